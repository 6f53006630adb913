//! The one error type of timebloom.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// A Redis URL, or a comma-separated list of them (Cluster seeds, a
/// Sentinel list), with every password replaced by `***`: what error
/// messages and logs may show. The user information of each `scheme://`
/// ends at the last `@` before the next scheme, so a password holding a
/// `,` (which separates the nodes of a list) or an `@` is masked whole.
/// The `pass=` query parameter (a Unix socket's password,
/// `unix:///run/redis.sock?pass=P`) is masked too.
///
/// ```
/// assert_eq!(
///     timebloom::redact_url("redis://crawler:s3,cr@t@10.0.0.1:6379/0"),
///     "redis://crawler:***@10.0.0.1:6379/0"
/// );
/// ```
pub fn redact_url(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        let end = tail.find("://").unwrap_or(tail.len());
        match tail[..end].rfind('@') {
            Some(a) => {
                match tail[..a].split_once(':') {
                    Some((user, _)) => {
                        out.push_str(user);
                        out.push_str(":***");
                    }
                    None => out.push_str(&tail[..a]),
                }
                rest = &tail[a..];
            }
            None => rest = tail,
        }
    }
    out.push_str(rest);
    mask_query_passwords(&out)
}

/// A Redis key prefix as error messages show it: characters that
/// `char::escape_debug` escapes (control characters, invisible format
/// characters such as a zero-width space or a bidi override, unassigned
/// code points) written as escapes, so a refused prefix neither cuts nor
/// reorders a message nor looks like another prefix; quotes and
/// backslashes as they are; the empty prefix as `""`.
///
/// ```
/// assert_eq!(timebloom::shown_prefix("crawl:prod"), "crawl:prod");
/// assert_eq!(timebloom::shown_prefix("crawl\u{200b}"), "crawl\\u{200b}");
/// assert_eq!(timebloom::shown_prefix("a\nb"), "a\\nb");
/// assert_eq!(timebloom::shown_prefix(""), "\"\"");
/// ```
pub fn shown_prefix(prefix: &str) -> String {
    if prefix.is_empty() {
        return "\"\"".into();
    }
    prefix
        .chars()
        .map(|c| match c {
            // Shown as they are: escaping them would only add backslashes.
            '\\' | '"' | '\'' => c.to_string(),
            _ => c.escape_debug().to_string(),
        })
        .collect()
}

/// `url` with the value of every `pass=` query parameter replaced by
/// `***`, up to the next parameter, fragment, or URL of a list.
fn mask_query_passwords(url: &str) -> String {
    let mut out = String::with_capacity(url.len());
    let mut rest = url;
    loop {
        let at = rest
            .match_indices("pass=")
            .map(|(i, _)| i)
            .find(|&i| i > 0 && matches!(rest.as_bytes()[i - 1], b'?' | b'&'));
        let Some(at) = at else {
            out.push_str(rest);
            return out;
        };
        let (head, tail) = rest.split_at(at + "pass=".len());
        out.push_str(head);
        out.push_str("***");
        let next_url = tail.find("://").and_then(|j| tail[..j].rfind(','));
        let end = [tail.find('&'), tail.find('#'), next_url]
            .into_iter()
            .flatten()
            .min()
            .unwrap_or(tail.len());
        rest = &tail[end..];
    }
}

/// Everything that can go wrong in timebloom.
///
/// Every variant that concerns a file names it. After an I/O error while
/// writing, an [`crate::Engine`] refuses further writes with
/// [`Error::PreviousIo`] (lookups go on working): close it and open it
/// again.
#[derive(Debug)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    Io {
        /// What timebloom was doing.
        op: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// The configuration is not valid; nothing was written.
    InvalidConfig {
        /// Why.
        reason: String,
    },
    /// Another process (or another `Engine` in this process) holds the directory.
    Locked {
        /// The engine directory.
        path: PathBuf,
    },
    /// `create` was called on a directory that already holds an engine.
    AlreadyExists {
        /// The engine directory.
        path: PathBuf,
    },
    /// `open` was called on a directory that holds no engine.
    NotFound {
        /// The engine directory.
        path: PathBuf,
    },
    /// A file's bytes are wrong: bad magic, checksum, length or field.
    Corrupt {
        /// The file.
        path: PathBuf,
        /// What is wrong, with the expected and the found value where they exist.
        reason: String,
    },
    /// The file was written by a newer or unknown format version.
    UnsupportedVersion {
        /// The file.
        path: PathBuf,
        /// The version this build reads.
        expected: u32,
        /// The version found.
        got: u32,
    },
    /// `insert_at` or `remove_at` named an instant whose window has expired
    /// (or lies in the future), or an instant (also `maintain`'s) before
    /// 1970 or after 9999. Every call that reads the engine's clock
    /// (`create`, `open`, `insert`, `contains`, `remove`, `stats`, `flush`,
    /// their batch and `_within` forms) returns it while the clock reads
    /// before 1970 or after 9999, whether the system clock or a
    /// [`crate::ManualClock`] created, set or advanced there.
    /// `contains_within` returns it while the clock is behind every window
    /// the tiers keep (see [`crate::Engine::contains_within`]).
    WindowUnavailable {
        /// Why the instant cannot be written.
        reason: String,
    },
    /// `contains_within` or `insert_within` (or their batches) asked for a
    /// horizon longer than any tier keeps.
    HorizonTooLong {
        /// The horizon asked for, in seconds.
        horizon_secs: u64,
        /// The longest horizon the engine can answer now, in seconds.
        max_secs: u64,
    },
    /// `remove` or `remove_at` on an engine with a plain Bloom tier (only
    /// counting and fingerprint tiers can remove keys).
    RemoveUnsupported {
        /// The first tier that cannot remove keys.
        tier: String,
    },
    /// An earlier I/O error left the engine in an unknown state; reopen it.
    PreviousIo,
    /// A write (insert, remove, flush, maintain) on an engine opened with
    /// [`crate::Engine::open_read_only`].
    ReadOnly {
        /// The engine directory.
        path: PathBuf,
    },
    /// The clock jumped forward further than the writer accepts: the jump
    /// would expire every live window that holds keys at once, or is longer
    /// than [`crate::Options::max_clock_jump`]. Nothing was changed. To move
    /// on to `to` on purpose, call [`crate::Engine::maintain`] (CLI:
    /// `timebloom maintain DIR --now T`) or open with
    /// [`crate::Options::allow_clock_jump`].
    ClockJump {
        /// The latest instant the engine knew of, in seconds since the Unix epoch.
        from: i64,
        /// The instant the clock now reads.
        to: i64,
    },
    /// A batch insert stopped part way: `answers` are the answers for the
    /// first `answers.len()` keys, which were recorded before `cause`
    /// stopped the batch; the keys after them were not (but for the first
    /// one when `cause` is an I/O error of the write-ahead log: see
    /// [`crate::Engine::insert_batch`]). When `cause` is a failed sync of
    /// the batch (under `always`), `answers` may cover the whole batch:
    /// every key recorded, none known to be durable. A single-key write
    /// (`insert`, `insert_within`, `insert_at`, `remove`, `remove_at`)
    /// whose sync failed under `always` is `Incomplete` too, with its one
    /// answer: the write is done, not known to be durable.
    Incomplete {
        /// Check-and-insert answers for the recorded prefix of the batch.
        answers: Vec<bool>,
        /// What stopped the batch.
        cause: Box<Error>,
    },
    /// A segment file failed its checks at open and was moved to the
    /// engine's `quarantine/` directory. The open is refused; with
    /// [`crate::Options::degraded`] it goes on without that window instead
    /// (`stats` lists the windows lost).
    Quarantined {
        /// Where the file is now.
        path: PathBuf,
        /// The window it held (`TIER WINDOW`).
        window: String,
        /// What was wrong with it.
        reason: String,
    },
    /// `create` refused a directory that already holds files it did not make.
    NotEmpty {
        /// The directory.
        path: PathBuf,
        /// What is there (at most a few names).
        found: Vec<String>,
    },
}

/// `Result` with timebloom's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the error is about a file's bytes (wrong magic, checksum,
    /// length, field or format version), as opposed to failing to reach
    /// them: the errors `verify` reports as damage and an open quarantines.
    pub fn is_damage(&self) -> bool {
        matches!(
            self,
            Error::Corrupt { .. } | Error::UnsupportedVersion { .. }
        )
    }

    /// A copy of a damage error ([`Error::is_damage`]); `None` for others.
    pub(crate) fn damage_copy(&self) -> Option<Error> {
        match self {
            Error::Corrupt { path, reason } => Some(Error::Corrupt {
                path: path.clone(),
                reason: reason.clone(),
            }),
            Error::UnsupportedVersion {
                path,
                expected,
                got,
            } => Some(Error::UnsupportedVersion {
                path: path.clone(),
                expected: *expected,
                got: *got,
            }),
            _ => None,
        }
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }

    pub(crate) fn config(reason: impl Into<String>) -> Self {
        Error::InvalidConfig {
            reason: reason.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Io { op, path, source } => {
                write!(f, "{}: {op} failed: {source}", path.display())?;
                if source.raw_os_error() == Some(rustix::io::Errno::MFILE.raw_os_error()) {
                    // The engine keeps every segment file open: an engine
                    // of many windows meets the limit, not a leak.
                    write!(
                        f,
                        " (the engine keeps each window's file open; raise the limit of \
                         open files: `ulimit -n`, a service's LimitNOFILE)"
                    )?;
                }
                Ok(())
            }
            Error::InvalidConfig { reason } => write!(f, "invalid configuration: {reason}"),
            Error::Locked { path } => write!(
                f,
                "{}: the engine is open in another process (or handle); one writer at a time: close that writer first, or read beside it with a read-only open (`check`, `stats`, `verify`; `Engine::open_read_only`; `Engine.open(path, read_only=True)` in Python)",
                path.display()
            ),
            Error::AlreadyExists { path } => {
                write!(f, "{}: an engine already exists here", path.display())
            }
            Error::NotFound { path } if path.is_file() => write!(
                f,
                "{}: a file, not an engine directory (no MANIFEST)",
                path.display()
            ),
            Error::NotFound { path } => {
                write!(f, "{}: no engine here (no MANIFEST)", path.display())
            }
            Error::Corrupt { path, reason } => write!(f, "{}: corrupt: {reason}", path.display()),
            Error::UnsupportedVersion {
                path,
                expected,
                got,
            } => write!(
                f,
                "{}: format version {got} is not supported (this build reads version {expected})",
                path.display()
            ),
            Error::WindowUnavailable { reason } => write!(f, "window unavailable: {reason}"),
            Error::HorizonTooLong {
                horizon_secs,
                max_secs,
            } => write!(
                f,
                "horizon of {horizon_secs}s ({}) is longer than any tier keeps (at most \
                 {max_secs}s now, {})",
                crate::plan::units::fmt_secs_full(*horizon_secs),
                crate::plan::units::fmt_secs_full(*max_secs)
            ),
            Error::RemoveUnsupported { tier } => write!(
                f,
                "remove needs counting or fingerprint tiers, but tier {tier} is a plain Bloom tier"
            ),
            Error::PreviousIo => write!(
                f,
                "an earlier I/O error left the engine in an unknown state; close and reopen it"
            ),
            Error::ReadOnly { path } => write!(
                f,
                "{}: the engine was opened read-only; open it for writing to change it",
                path.display()
            ),
            Error::ClockJump { from, to } => write!(
                f,
                "the clock jumped from {} (the first window boundary not yet crossed) to {}, \
                 which would expire every window at once (or exceeds the allowed jump); \
                 nothing was changed. If the new time is \
                 right, move the engine there on purpose: `timebloom maintain DIR --now {}` \
                 (library: Engine::maintain, or Options::allow_clock_jump)",
                crate::clock::rfc3339(*from),
                crate::clock::rfc3339(*to),
                crate::clock::rfc3339(*to)
            ),
            Error::Incomplete { answers, cause } => {
                let n = answers.len();
                let s = if n == 1 { "" } else { "s" };
                write!(f, "stopped after recording {n} key{s}: {cause}")
            }
            Error::Quarantined {
                path,
                window,
                reason,
            } => write!(
                f,
                "{}: quarantined: the file of window {window} failed its checks ({reason}); \
                 it was moved aside and the engine does not open. Restore the file from a \
                 backup, or open degraded (CLI --degraded, library Options::degraded) to go \
                 on without that window's keys",
                path.display()
            ),
            Error::NotEmpty { path, found } => write!(
                f,
                "{}: refusing to create an engine in a directory that holds other files ({}); \
                 use an empty or new directory",
                path.display(),
                found.join(", ")
            ),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::Incomplete { cause, .. } => Some(cause.as_ref()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod redact_tests {
    use super::redact_url;

    #[test]
    fn passwords_are_masked_whole() {
        for (url, want) in [
            ("redis://h:6379", "redis://h:6379"),
            ("redis://u:p@h:6379", "redis://u:***@h:6379"),
            (
                "redis://crawler:s3cret@10.0.0.1:6379/0",
                "redis://crawler:***@10.0.0.1:6379/0",
            ),
            ("redis://:p@h", "redis://:***@h"),
            ("redis://u@h", "redis://u@h"),
            // A `,` or an `@` in the password.
            ("redis://u:pa,ss@h:6379", "redis://u:***@h:6379"),
            ("redis://u:s3cr,etpw@host", "redis://u:***@host"),
            ("redis://u:p@ss@h", "redis://u:***@h"),
            (
                "redis://u:p1@h1:1,redis://v:p,2@h2:2",
                "redis://u:***@h1:1,redis://v:***@h2:2",
            ),
            (
                "rediss://:pw@h:1,redis://u:p@h:2",
                "rediss://:***@h:1,redis://u:***@h:2",
            ),
            ("redis://u:p@h1:1,h2:2,h3:3", "redis://u:***@h1:1,h2:2,h3:3"),
            (
                "redis+sentinel://u:p,w@h1:1,h2:2/master",
                "redis+sentinel://u:***@h1:1,h2:2/master",
            ),
            ("rediss://u:p@h/0", "rediss://u:***@h/0"),
            (
                "unix:///run/r.sock?db=1&pass=p,w&user=u",
                "unix:///run/r.sock?db=1&pass=***&user=u",
            ),
            ("redis+unix:///s?pass=p@w", "redis+unix:///s?pass=***"),
            (
                "unix:///a?pass=p1,redis://u:p2@h",
                "unix:///a?pass=***,redis://u:***@h",
            ),
            ("redis://h/?bypass=x", "redis://h/?bypass=x"),
            ("not a url", "not a url"),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }
}
