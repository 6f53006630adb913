//! The error type of [`super::RedisEngine`].

use std::fmt;

/// Everything that can go wrong with a [`super::RedisEngine`].
///
/// Every variant that comes from Redis names the command and the key it
/// was about, so an operator can find the failing slot or node.
#[non_exhaustive]
pub enum RedisError {
    /// Redis (or the connection to it) reported an error. Connection losses
    /// are retried with backoff first; this is what remained after the
    /// last retry.
    Redis {
        /// The command, as sent (`EVALSHA check-and-insert`, `HGETALL`, ...).
        command: String,
        /// The key the command was about (the first key of a script call).
        key: String,
        /// The server the command went to, as `host:port` (never the
        /// password of the URL): the server of a standalone URL, the
        /// master a Sentinel named (or the Sentinel that failed), the
        /// Cluster node that serves the key's slot as last seen (or the
        /// nodes the failed pipeline went to, when the error does not say
        /// which of them failed).
        server: String,
        /// The error from the `redis` crate.
        source: redis::RedisError,
    },
    /// Redis answered something this version of timebloom does not expect.
    BadReply {
        /// The command.
        command: String,
        /// The key.
        key: String,
        /// What was wrong with the reply.
        reason: String,
    },
    /// An engine-level error shared with the embedded engine: an invalid
    /// configuration, a horizon too long, a window that has expired.
    Engine(crate::Error),
    /// No engine exists under the prefix (no config hash).
    NotFound {
        /// The config hash key that is missing.
        key: String,
    },
    /// The config hash's name holds a hash that is not a timebloom
    /// engine's (it has no `engine` field): someone else's data, which
    /// neither `create` nor `open` touches.
    NotAnEngine {
        /// The config hash key, holding the other hash.
        key: String,
    },
    /// `create` found an engine under the prefix already.
    AlreadyExists {
        /// The config hash key that exists.
        key: String,
    },
    /// The engine under the prefix was created with another configuration
    /// (tiers, sizing, shard count): using it would read another geometry.
    ConfigMismatch {
        /// The config hash key.
        key: String,
        /// The stored configuration (JSON).
        stored: String,
        /// The configuration this client was given (JSON).
        given: String,
    },
    /// A check-and-insert batch was applied, or an engine created, but
    /// fewer replicas than [`super::RedisOptions::wait_replicas`] confirmed
    /// it in time (`WAIT`). The answers are valid; the writes may be lost
    /// in a failover. After a create, the answers are empty and the engine
    /// exists on the master: opening it works.
    NotReplicated {
        /// The master(s) the `WAIT` went to, as `host:port`.
        server: String,
        /// Replicas that confirmed (the fewest over the masters written;
        /// 0 when a node taken for a master had become a replica, which
        /// refuses `WAIT`).
        acked: u32,
        /// Replicas asked for.
        wanted: u32,
        /// The batch's answers, one per key, as if the call had succeeded;
        /// for a batch sent in several rounds, those of the rounds sent
        /// (a prefix of the keys): the `WAIT` after each round stops the
        /// rest, and sending the same batch again sends only the rest.
        answers: Vec<bool>,
    },
    /// The configuration asks for something the Redis engine does not do,
    /// or the engine stored under the prefix has a key layout this build
    /// cannot read.
    Unsupported {
        /// What, and why.
        reason: String,
    },
    /// The engine's config hash is gone, or holds another engine, while
    /// this client runs, or a shard's directory this client has seen exist
    /// is gone with its strings: Redis lost the engine's keys (restarted
    /// without persistence, flushed, failed over to an empty replica,
    /// evicted under an `allkeys-*` policy), so the call's answers cannot
    /// be trusted (the keys would read as absent). Checked with every batch
    /// and by `stats`. On a Cluster, a master other than the config hash's
    /// that comes back empty is detected on every shard: `create` makes
    /// every shard's directory, and marks the config hash once they exist
    /// (an engine created before that mark existed is checked on the
    /// directories this client has seen: docs/distributed.md).
    EngineLost {
        /// The config hash key, or the lost directory's key.
        key: String,
        /// What was found there.
        reason: String,
    },
}

/// `Result` with [`RedisError`].
pub type Result<T, E = RedisError> = std::result::Result<T, E>;

impl RedisError {
    pub(crate) fn redis(command: &str, key: &str, server: &str, source: redis::RedisError) -> Self {
        RedisError::Redis {
            command: command.to_string(),
            key: key.to_string(),
            server: server.to_string(),
            source,
        }
    }

    pub(crate) fn bad_reply(command: &str, key: &str, reason: impl Into<String>) -> Self {
        RedisError::BadReply {
            command: command.to_string(),
            key: key.to_string(),
            reason: reason.into(),
        }
    }
}

impl From<crate::Error> for RedisError {
    fn from(e: crate::Error) -> Self {
        RedisError::Engine(e)
    }
}

impl fmt::Debug for RedisError {
    /// As derived, except that a batch's answers show as counts.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisError::Redis {
                command,
                key,
                server,
                source,
            } => f
                .debug_struct("Redis")
                .field("command", command)
                .field("key", key)
                .field("server", server)
                .field("source", source)
                .finish(),
            RedisError::BadReply {
                command,
                key,
                reason,
            } => f
                .debug_struct("BadReply")
                .field("command", command)
                .field("key", key)
                .field("reason", reason)
                .finish(),
            RedisError::Engine(e) => f.debug_tuple("Engine").field(e).finish(),
            RedisError::NotFound { key } => f.debug_struct("NotFound").field("key", key).finish(),
            RedisError::NotAnEngine { key } => {
                f.debug_struct("NotAnEngine").field("key", key).finish()
            }
            RedisError::AlreadyExists { key } => {
                f.debug_struct("AlreadyExists").field("key", key).finish()
            }
            RedisError::ConfigMismatch { key, stored, given } => f
                .debug_struct("ConfigMismatch")
                .field("key", key)
                .field("stored", stored)
                .field("given", given)
                .finish(),
            RedisError::NotReplicated {
                server,
                acked,
                wanted,
                answers,
            } => f
                .debug_struct("NotReplicated")
                .field("server", server)
                .field("acked", acked)
                .field("wanted", wanted)
                .field(
                    "answers",
                    &format_args!(
                        "[{} keys, {} new]",
                        answers.len(),
                        answers.iter().filter(|&&n| n).count()
                    ),
                )
                .finish(),
            RedisError::Unsupported { reason } => f
                .debug_struct("Unsupported")
                .field("reason", reason)
                .finish(),
            RedisError::EngineLost { key, reason } => f
                .debug_struct("EngineLost")
                .field("key", key)
                .field("reason", reason)
                .finish(),
        }
    }
}

impl fmt::Display for RedisError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedisError::Redis {
                command,
                key,
                server,
                source,
            } => write!(
                f,
                "redis {command} on key {key:?} at {server} failed: {source}"
            ),
            RedisError::BadReply {
                command,
                key,
                reason,
            } => write!(
                f,
                "redis {command} on key {key:?}: unexpected reply: {reason}"
            ),
            RedisError::Engine(e) => e.fmt(f),
            RedisError::NotFound { key } => {
                write!(f, "no timebloom engine in Redis (no config hash {key:?})")
            }
            RedisError::NotAnEngine { key } => write!(
                f,
                "the key {key:?} holds a hash that is not a timebloom engine's config hash \
                 (it has no \"engine\" field): left as it is; use another prefix"
            ),
            RedisError::AlreadyExists { key } => {
                write!(f, "a timebloom engine exists in Redis already ({key:?})")
            }
            RedisError::ConfigMismatch { key, stored, given } => write!(
                f,
                "the engine in Redis ({key:?}) was created with another configuration: \
                 stored {stored}, given {given}; open it without a configuration or use \
                 another prefix"
            ),
            RedisError::NotReplicated {
                server,
                acked,
                wanted,
                ..
            } => write!(
                f,
                "redis WAIT at {server}: {acked} of {wanted} replicas confirmed the writes in \
                 time; they are applied on the master but a failover may lose them"
            ),
            RedisError::Unsupported { reason } => write!(f, "not supported on Redis: {reason}"),
            RedisError::EngineLost { key, reason } => write!(
                f,
                "the timebloom engine's key {key:?} {reason}: Redis lost the engine's \
                 keys (a restart without persistence, a flush, a failover to an empty replica, \
                 an eviction) and the keys it held would read as absent; stop every client, then \
                 delete the engine's keys (docs/distributed.md, \"Key layout\": not a pattern \
                 of the prefix and `*`, which also takes other engines' keys) or use another \
                 prefix"
            ),
        }
    }
}

impl std::error::Error for RedisError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            RedisError::Redis { source, .. } => Some(source),
            RedisError::Engine(e) => Some(e),
            _ => None,
        }
    }
}
