//! The same windowed filters on Redis, for a fleet of processes that must
//! share one view of what has been seen (feature `redis`).
//!
//! A [`RedisEngine`] has the tiers, windows, horizons, sizing, growth and
//! check-and-insert semantics of the embedded [`crate::Engine`], on plain
//! Redis strings used as bitmaps: any Redis 6 or newer, standalone or
//! Cluster, no modules. Each window of each tier is split into shard
//! strings (a key's shard comes from its hash); a key's cells fill one
//! 64-byte block of its shard's string, laid out byte for byte like the
//! embedded engine's sub-filter body. Check-and-insert runs server-side in
//! one Lua script per shard and batch, atomically across every tier, so of
//! several clients inserting the same new key exactly one is told it is new.
//! Windows expire by themselves (`EXPIREAT`).
//!
//! ```no_run
//! use timebloom::redis::RedisEngine;
//! use timebloom::{Config, Tier};
//!
//! # fn main() -> timebloom::redis::Result<()> {
//! let config = Config {
//!     tiers: vec![Tier::daily(7), Tier::monthly(12)],
//!     expected_items_per_day: 10_000_000,
//!     fpr: 0.001,
//!     ..Config::default()
//! };
//! // Every crawler runs this; the first one creates the engine.
//! let engine = RedisEngine::create_or_open("redis://127.0.0.1:6379", "crawl", config)?;
//! let new = engine.insert_batch(&["https://example.com/a", "https://example.com/b"])?;
//! assert_eq!(new.len(), 2);
//! # Ok(())
//! # }
//! ```
//!
//! `docs/distributed.md` describes the key layout, the Lua contract,
//! expiry, failure behaviour and sizing.

mod error;
pub(crate) mod layout;
mod link;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, SystemTime};

use parking_lot::Mutex;
use redis::Value;
use serde::{Deserialize, Serialize};

use crate::clock::{instant, Clock, TimeSource};
use crate::config::Config;
use crate::filter::sizing;
use crate::hash::{hash_key, random_seed, KeyHash};
use crate::stats::{SegmentStats, Stats, TierStats};
use crate::window;

pub use error::{RedisError, Result};
use layout::{Geom, Names, MAX_CHAIN, MAX_SHARD_BLOCKS};
use link::Link;

/// The check-and-insert script (see `docs/distributed.md`, "The Lua contract").
const SCRIPT: &str = include_str!("check_insert.lua");
/// Records in the config hash that a window's chain has grown to `ARGV[2]`
/// sub-filters in some shard (never lowers it).
///
/// Writes nothing, and answers -1, when the engine field is not `ARGV[3]`
/// (Redis lost the engine's keys): a lone chain field would leave a hash
/// without an engine field, which create refuses as someone else's.
const GROW_SCRIPT: &str = "if redis.call('HGET', KEYS[1], 'engine') ~= ARGV[3] then return -1 end \
    local cur = tonumber(redis.call('HGET', KEYS[1], ARGV[1]) or '1') \
    local n = tonumber(ARGV[2]) \
    if n > cur then redis.call('HSET', KEYS[1], ARGV[1], n) return n end \
    return cur";
/// Offers the engine field `ARGV[1]` to the config hash: `HSETNX`, unless
/// the key holds a hash without an engine field (someone else's: -1, and
/// nothing written). The engine's own hash always has its engine field:
/// the other fields are written only where it is (see [`GROW_SCRIPT`],
/// [`DIRS_SCRIPT`]).
const CREATE_SCRIPT: &str = "if redis.call('EXISTS', KEYS[1]) == 1 \
    and redis.call('HEXISTS', KEYS[1], 'engine') == 0 then return -1 end \
    return redis.call('HSETNX', KEYS[1], 'engine', ARGV[1])";
/// Marks the config hash ([`DIRS_FIELD`]) when its engine field is still
/// `ARGV[1]` (else -1, nothing written: Redis lost the engine's keys).
const DIRS_SCRIPT: &str = "if redis.call('HGET', KEYS[1], 'engine') ~= ARGV[1] then return -1 end \
    redis.call('HSET', KEYS[1], 'dirs', 'made') return 1";
/// The most shards an engine has: one Redis Cluster slot each at most.
const MAX_SHARDS: u32 = 16_384;
/// The version of the key layout and the config hash.
const FORMAT: u32 = 1;
/// The config hash field holding the configuration.
const ENGINE_FIELD: &str = "engine";
/// The config hash field, set once every shard's directory of every tier
/// exists (made at create): a client that reads it treats every directory
/// as seen, so a shard whose node lost its keys before the client started
/// is an error too, not a shard that reads empty. Read at open, at window
/// boundaries and with every batch (a client opened while the creator was
/// making the directories learns it then).
const DIRS_FIELD: &str = "dirs";
/// Keys per script call: bounds the time one call holds the server.
const CHUNK: usize = 1000;
/// How long a result key keeps the last answer for a retry.
const RESULT_TTL_SECS: u64 = 3600;
/// Windows are kept this long past their last live instant (client clocks
/// and the server's clock may differ a little).
const EXPIRY_GRACE_SECS: i64 = 3600;
/// Times a batch is sent again after a shard reported a longer chain.
const STALE_ROUNDS: usize = 16;

/// How to connect, and the shard count of a new engine.
///
/// Start from [`RedisOptions::default`] and set the fields wanted (a
/// private field, the clock, rules out `RedisOptions { shards: 4,
/// ..Default::default() }` outside this crate):
///
/// ```
/// let mut options = timebloom::redis::RedisOptions::default();
/// options.shards = 4;
/// options.wait_replicas = 1;
/// ```
#[derive(Clone)]
pub struct RedisOptions {
    /// Shard strings per window (at create; stored in the config hash).
    /// More shards spread a Cluster's load and keep each string under
    /// Redis's 2^32-bit limit. Default 16.
    pub shards: u32,
    /// Connecting to a node gives up after this long. Default 5 s; 0 is
    /// refused (`InvalidConfig`).
    pub connect_timeout: Duration,
    /// A command without a reply gives up after this long. Default 10 s; 0
    /// is refused (`InvalidConfig`).
    pub io_timeout: Duration,
    /// Reconnect-and-resend attempts after a connection loss. Default 8.
    pub retries: u32,
    /// The first wait before a retry; it doubles each time, up to
    /// `max_backoff`. Default 50 ms.
    pub backoff: Duration,
    /// The longest wait between retries, the first one included. Default 2 s.
    pub max_backoff: Duration,
    /// Use the Cluster client even with a single seed URL (several
    /// comma-separated URLs always mean a Cluster). Default false.
    pub cluster: bool,
    /// After each check-and-insert batch, and after a create, wait
    /// (`WAIT`) until this many replicas of every master written have the
    /// writes; fewer by `wait_timeout` is [`RedisError::NotReplicated`].
    /// Default 0: no wait.
    /// It narrows what a failover can lose; see `docs/distributed.md`.
    pub wait_replicas: u32,
    /// How long `wait_replicas` waits (at least 1 ms; a reply is awaited
    /// this much longer than `io_timeout`). Default 1 s.
    pub wait_timeout: Duration,
    clock: TimeSource,
}

impl Default for RedisOptions {
    fn default() -> RedisOptions {
        RedisOptions {
            shards: 16,
            connect_timeout: Duration::from_secs(5),
            io_timeout: Duration::from_secs(10),
            retries: 8,
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_secs(2),
            cluster: false,
            wait_replicas: 0,
            wait_timeout: Duration::from_secs(1),
            clock: TimeSource::System,
        }
    }
}

impl std::fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisOptions")
            .field("shards", &self.shards)
            .field("connect_timeout", &self.connect_timeout)
            .field("io_timeout", &self.io_timeout)
            .field("retries", &self.retries)
            .field("cluster", &self.cluster)
            .field("wait_replicas", &self.wait_replicas)
            .finish_non_exhaustive()
    }
}

impl RedisOptions {
    /// Reads the time from `clock` instead of the system clock (tests,
    /// backfills). Window boundaries follow this clock; Redis's own clock
    /// only decides when expired windows are dropped.
    pub fn clock(mut self, clock: impl Clock + 'static) -> RedisOptions {
        self.clock = TimeSource::Injected(std::sync::Arc::new(clock));
        self
    }
}

/// What an engine created in Redis must be, checked by create (a step of
/// `RedisEngine::start`, when it is given a configuration) and by
/// [`crate::plan::Plan::for_redis`]: the configuration is valid, its
/// filter kinds are ones Redis mode keeps, and `shards` is in range and
/// fits the key layout.
pub(crate) fn check_new_config(config: &Config, shards: u32) -> Result<()> {
    config.validate()?;
    layout::check_kinds(config).map_err(|reason| RedisError::Unsupported { reason })?;
    if !(1..=MAX_SHARDS).contains(&shards) {
        return Err(crate::Error::config(format!(
            "shards must be between 1 and {MAX_SHARDS} (got {shards})"
        ))
        .into());
    }
    layout_fits(config, shards)
}

/// What the Redis layout refuses in a valid `config` split over `shards`:
/// a first sub-filter's rate below the lowest it plans, or a shard string
/// past Redis's 512 MiB. Create refuses such an engine, and
/// [`crate::plan::Plan::for_redis`] plans none.
fn layout_fits(config: &Config, shards: u32) -> Result<()> {
    for t in &config.tiers {
        // The layout keeps the sizing every client of a deployment
        // computes alike, which plans no rate below about 3.5e-18
        // (`sizing::plan` answers 2^64 blocks); the embedded engine
        // plans lower ones with more probes (`sizing::file_plan`).
        let (capacity, rate) = config.subfilter_plan(t, 0);
        if sizing::plan(t.kind, capacity, rate).nblocks == u64::MAX {
            return Err(RedisError::Unsupported {
                reason: format!(
                    "tier {t}: its first sub-filter's rate, {rate:.1e} (fpr {} shared \
                     over the tier's windows and its chain), is below the lowest the \
                     Redis layout plans, about 3.5e-18; raise fpr",
                    crate::plan::units::fmt_rate(config.fpr)
                ),
            });
        }
        let g = Geom::of(config, t, 0, shards);
        if g.nbs > MAX_SHARD_BLOCKS {
            return Err(RedisError::Unsupported {
                reason: format!(
                    "tier {t}: one window needs {} bytes per shard string, more than \
                     Redis's 512 MiB; use more shards, or lower \
                     expected_items_per_day or raise fpr",
                    g.nbs.saturating_mul(64)
                ),
            });
        }
    }
    Ok(())
}

/// What the config hash holds under [`ENGINE_FIELD`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
struct Stored {
    format: u32,
    config: Config,
    seed: u64,
    shards: u32,
}

/// The windows one script call reads and writes in one tier.
struct TierPlan {
    tier: usize,
    prune_below: i64,
    /// `(window, read, write)`, oldest first.
    windows: Vec<(i64, bool, bool)>,
}

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Check-and-insert: every key is written.
    Insert,
    /// Check-and-insert of the keys no window read holds (`insert_within`).
    Due,
    /// Lookups only.
    Check,
}

impl Mode {
    /// The script call as errors name it.
    fn command(self) -> &'static str {
        match self {
            Mode::Insert | Mode::Due => "EVALSHA check-and-insert",
            Mode::Check => "EVALSHA check",
        }
    }
}

struct State {
    link: Link,
    /// Sub-filters per `(tier, window)` as last seen; 1 when absent.
    chains: HashMap<(usize, i64), u32>,
    /// The `(tier, shard)` directories this client has seen exist. A
    /// directory is never deleted (its `id` field stays), so one of these
    /// that is gone went with the rest of its node's keys (see
    /// `dir_lost`): on a Cluster, the config hash check covers one node.
    dirs: HashSet<(usize, u32)>,
    /// Every directory was made at create ([`DIRS_FIELD`]): all of them
    /// count as seen.
    all_dirs: bool,
    /// Request ids: one per round of a batch.
    requests: u64,
    /// Writing rounds run so far (see `Unfinished`).
    writes: u64,
    /// The last check-and-insert call, if it failed part-way.
    unfinished: Option<Unfinished>,
    /// The chain lengths are read again from the config hash at this instant.
    refresh_at: i64,
}

impl State {
    /// Whether the client knows the directory of `tier` in `shard` exists.
    fn seen(&self, tier: usize, shard: u32) -> bool {
        self.all_dirs || self.dirs.contains(&(tier, shard))
    }
}

/// A check-and-insert call that failed part-way: the answers of the rounds
/// that completed, and the request id and size of the round that failed.
///
/// Sent again (the same keys in the same order, by the same method) before
/// any other write through this engine, the call resumes instead of
/// starting over: the completed rounds keep their answers, and the failed
/// round goes out with its own request id, so each of its groups that
/// Redis ran before the connection failed answers from its stored result
/// (see `check_insert.lua`) instead of running again, which would report
/// its new keys as present. A key is then reported new exactly once even
/// across the error.
struct Unfinished {
    /// The call: its method, its argument and every key (see `digest`).
    digest: u128,
    /// `writes` after the failed round: another write since then may have
    /// replaced the stored results, and the call starts over.
    writes: u64,
    answers: Vec<bool>,
    /// `(request id, keys)` of the round that failed; `None` when the
    /// call stopped after a complete round (`NotReplicated`).
    failed: Option<(u64, usize)>,
}

/// What identifies a check-and-insert call for `Unfinished`: its method
/// with its argument (`Method`) and every key's hash, in order.
fn digest(call: Method, hashes: &[KeyHash]) -> u128 {
    let mut h = xxhash_rust::xxh3::Xxh3::new();
    h.update(&[call.0]);
    h.update(&call.1.to_le_bytes());
    for k in hashes {
        h.update(&k.lo.to_le_bytes());
        h.update(&k.hi.to_le_bytes());
    }
    h.digest128()
}

/// A check-and-insert method and its argument, for `digest`: `(b'i', 0)`
/// for `insert_batch`, `(b'd', horizon secs)` for `insert_within_batch`,
/// `(b'a', instant)` for `insert_at`. A call resumes only the same call.
type Method = (u8, i64);

/// A time-windowed filter engine whose state lives in Redis.
///
/// `RedisEngine` is `Send + Sync`; calls from several threads share one
/// connection and are serialized. For parallelism, open one engine per
/// thread or process: they share everything through Redis.
pub struct RedisEngine {
    names: Names,
    stored: Stored,
    /// The config hash's engine field as read at open: every batch reads
    /// it again (in the same pipeline) and fails when it changed.
    engine_json: String,
    clock: TimeSource,
    codes: Vec<String>,
    geoms: Mutex<Vec<Vec<Geom>>>,
    client: String,
    sha: String,
    /// `(replicas, timeout)` of a `WAIT` after each insert batch.
    wait: Option<(u32, Duration)>,
    /// Whether the link talks to a Cluster (fixed at open: read without
    /// waiting for a call in flight, which holds `state`).
    cluster: bool,
    state: Mutex<State>,
}

impl std::fmt::Debug for RedisEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEngine")
            .field("prefix", &self.names.prefix)
            .field("shards", &self.stored.shards)
            .field("config", &self.stored.config)
            .finish_non_exhaustive()
    }
}

fn sha1(src: &str) -> String {
    redis::Script::new(src).get_hash().to_string()
}

fn bulk(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

/// A flat `HGETALL` reply (or a RESP3 map) as field-value pairs.
fn pairs(v: &Value) -> Vec<(String, String)> {
    let s = |v: &Value| bulk(v).map(|b| String::from_utf8_lossy(b).into_owned());
    match v {
        Value::Array(items) => items
            .chunks(2)
            .filter_map(|p| Some((s(p.first()?)?, s(p.get(1)?)?)))
            .collect(),
        Value::Map(items) => items
            .iter()
            .filter_map(|(a, b)| Some((s(a)?, s(b)?)))
            .collect(),
        _ => Vec::new(),
    }
}

impl RedisEngine {
    /// Creates a new engine under `prefix` with the default options.
    /// Fails with [`RedisError::AlreadyExists`] when one exists.
    pub fn create(url: &str, prefix: &str, config: Config) -> Result<RedisEngine> {
        RedisEngine::create_with(url, prefix, config, RedisOptions::default())
    }

    /// Creates a new engine under `prefix`.
    pub fn create_with(
        url: &str,
        prefix: &str,
        config: Config,
        options: RedisOptions,
    ) -> Result<RedisEngine> {
        match RedisEngine::start(url, prefix, Some(config), options)? {
            (e, true) => Ok(e),
            (e, false) => Err(RedisError::AlreadyExists {
                key: e.names.config(),
            }),
        }
    }

    /// Opens the engine under `prefix`, or creates it with `config` when
    /// there is none: what each process of a fleet calls. An engine created
    /// with another configuration or shard count is an error
    /// ([`RedisError::ConfigMismatch`]), never silently another geometry;
    /// the sync policy, which Redis mode does not use, may differ.
    pub fn create_or_open(url: &str, prefix: &str, config: Config) -> Result<RedisEngine> {
        RedisEngine::create_or_open_with(url, prefix, config, RedisOptions::default())
    }

    /// [`RedisEngine::create_or_open`] with options.
    pub fn create_or_open_with(
        url: &str,
        prefix: &str,
        config: Config,
        options: RedisOptions,
    ) -> Result<RedisEngine> {
        let shards = options.shards;
        let (e, _) = RedisEngine::start(url, prefix, Some(config.clone()), options)?;
        // The sync policy is the embedded engine's: Redis's persistence
        // decides what survives here, so only the geometry must agree.
        let same = Config {
            sync: e.stored.config.sync,
            ..config.clone()
        } == e.stored.config;
        if !same || e.stored.shards != shards {
            let json = |c: &Config, s: u32| {
                format!(
                    "{} with {s} shards",
                    serde_json::to_string(c).unwrap_or_default()
                )
            };
            return Err(RedisError::ConfigMismatch {
                key: e.names.config(),
                stored: json(&e.stored.config, e.stored.shards),
                given: json(&config, shards),
            });
        }
        Ok(e)
    }

    /// Opens the engine under `prefix` with the default options; its
    /// configuration comes from the config hash.
    pub fn open(url: &str, prefix: &str) -> Result<RedisEngine> {
        RedisEngine::open_with(url, prefix, RedisOptions::default())
    }

    /// Opens the engine under `prefix` (`options.shards` is ignored: the
    /// shard count is the engine's).
    pub fn open_with(url: &str, prefix: &str, options: RedisOptions) -> Result<RedisEngine> {
        Ok(RedisEngine::start(url, prefix, None, options)?.0)
    }

    /// Connects, creates the config hash when `config` is given and none
    /// exists, and loads it. Returns whether this call created it.
    fn start(
        url: &str,
        prefix: &str,
        config: Option<Config>,
        options: RedisOptions,
    ) -> Result<(RedisEngine, bool)> {
        RedisEngine::check_options(prefix, &options)?;
        let names = Names {
            prefix: prefix.to_string(),
        };
        let key = names.config();
        let mut link = Link::new(url, &options)?;
        let mut created = false;
        // The engine field this call offered: found in the config hash
        // after an `HSETNX` answered 0, it is this call's own (the seed is
        // random), written by a first `HSETNX` whose reply was lost and
        // which the link sent again.
        let mut offered = None;
        if let Some(config) = config {
            check_new_config(&config, options.shards)?;
            let (won, json) = RedisEngine::offer_config(&mut link, &key, config, options.shards)?;
            created = won;
            offered = Some(json);
        }
        let fields = pairs(&link.one("HGETALL", &key, &[])?);
        let json = RedisEngine::engine_field(&key, &fields)?;
        created |= offered.as_ref() == Some(&json);
        let stored = RedisEngine::check_stored(&key, &json)?;
        let engine = RedisEngine::assemble(names, json, stored, link, &options);
        engine.absorb_chains(&mut engine.state.lock(), &fields);
        if created {
            engine.make_dirs()?;
            // Every later batch stands on the config hash and the
            // directories: a create is confirmed like a batch.
            engine.confirm(&mut engine.state.lock(), Vec::new())?;
        }
        Ok((engine, created))
    }

    /// A step of `start`, before it connects: the prefix is one the key
    /// layout allows, and neither timeout is zero.
    fn check_options(prefix: &str, options: &RedisOptions) -> Result<()> {
        layout::check_prefix(prefix).map_err(crate::Error::config)?;
        for (name, timeout) in [
            ("connect_timeout", options.connect_timeout),
            ("io_timeout", options.io_timeout),
        ] {
            if timeout.is_zero() {
                return Err(crate::Error::config(format!(
                    "{name} must be above zero (a connection takes no timeout of 0)"
                ))
                .into());
            }
        }
        Ok(())
    }

    /// A step of `start`: offers the engine field (`config`, `shards` and
    /// a new random seed) to the config hash `key` with `HSETNX`. Returns
    /// whether Redis took it, and the field as offered.
    fn offer_config(
        link: &mut Link,
        key: &str,
        config: Config,
        shards: u32,
    ) -> Result<(bool, String)> {
        let stored = Stored {
            format: FORMAT,
            config,
            seed: random_seed(),
            shards,
        };
        let json = serde_json::to_string(&stored)
            .map_err(|e| RedisError::bad_reply("HSETNX", key, e.to_string()))?;
        let r = RedisEngine::script(link, "EVALSHA create", CREATE_SCRIPT, key, &[&json])?;
        if matches!(r, Value::Int(-1)) {
            return Err(RedisError::NotAnEngine {
                key: key.to_string(),
            });
        }
        Ok((matches!(r, Value::Int(1)), json))
    }

    /// Runs the one-key script `src` (named `what`) on `key` with `args`,
    /// by its SHA1 (by its source after a `NOSCRIPT`).
    fn script(link: &mut Link, what: &str, src: &str, key: &str, args: &[&str]) -> Result<Value> {
        let sha = sha1(src);
        let mut r = link.run(
            what,
            |_| key.to_string(),
            |eval| {
                let mut c = if eval {
                    let mut c = redis::cmd("EVAL");
                    c.arg(src);
                    c
                } else {
                    let mut c = redis::cmd("EVALSHA");
                    c.arg(&sha);
                    c
                };
                c.arg(1).arg(key).arg(args);
                vec![c]
            },
        )?;
        match r.pop() {
            Some(v) if r.is_empty() => Ok(v),
            _ => Err(RedisError::bad_reply(what, key, "one reply expected")),
        }
    }

    /// A step of `start`: the engine field among the `fields` of the
    /// config hash `key`; [`RedisError::NotFound`] when there is none,
    /// [`RedisError::NotAnEngine`] when `key` holds a hash without one.
    fn engine_field(key: &str, fields: &[(String, String)]) -> Result<String> {
        let key = key.to_string();
        match fields.iter().find(|(f, _)| f == ENGINE_FIELD) {
            Some((_, v)) => Ok(v.clone()),
            None if fields.is_empty() => Err(RedisError::NotFound { key }),
            None => Err(RedisError::NotAnEngine { key }),
        }
    }

    /// A step of `start`: the engine field `json` read from the config
    /// hash `key`, parsed and checked: the layout format is this build's,
    /// the configuration is valid and the shard count in range.
    fn check_stored(key: &str, json: &str) -> Result<Stored> {
        let stored: Stored = serde_json::from_str(json)
            .map_err(|e| RedisError::bad_reply("HGETALL", key, format!("the engine field: {e}")))?;
        if stored.format != FORMAT {
            return Err(RedisError::Unsupported {
                reason: format!(
                    "{key}: layout format {} (this build reads format {FORMAT})",
                    stored.format
                ),
            });
        }
        stored.config.validate()?;
        if !(1..=MAX_SHARDS).contains(&stored.shards) {
            return Err(RedisError::bad_reply(
                "HGETALL",
                key,
                format!(
                    "the engine field: {} shards (1 to {MAX_SHARDS})",
                    stored.shards
                ),
            ));
        }
        Ok(stored)
    }

    /// A step of `start`: the engine over `link`, from the checked engine
    /// field (`json`, parsed as `stored`), with no chain length or
    /// directory known yet.
    fn assemble(
        names: Names,
        json: String,
        stored: Stored,
        link: Link,
        options: &RedisOptions,
    ) -> RedisEngine {
        let codes = stored.config.tiers.iter().map(|t| t.code()).collect();
        let geoms = stored.config.tiers.iter().map(|_| Vec::new()).collect();
        RedisEngine {
            names,
            engine_json: json,
            clock: options.clock.clone(),
            codes,
            geoms: Mutex::new(geoms),
            client: format!("{:016x}", random_seed()),
            sha: sha1(SCRIPT),
            wait: (options.wait_replicas > 0)
                .then_some((options.wait_replicas, options.wait_timeout)),
            cluster: link.is_cluster(),
            state: Mutex::new(State {
                link,
                chains: HashMap::new(),
                dirs: HashSet::new(),
                all_dirs: false,
                requests: 0,
                writes: 0,
                unfinished: None,
                refresh_at: i64::MIN,
            }),
            stored,
        }
    }

    /// Makes every shard's directory of every tier, naming the engine
    /// (`id`), then marks the config hash ([`DIRS_FIELD`]). Before the
    /// mark, clients learn directories as they see them; a creator stopped
    /// in between leaves the engine in that mode.
    fn make_dirs(&self) -> Result<()> {
        let id = format!("{:016x}", self.stored.seed);
        let dirs: Vec<String> = (0..self.stored.shards)
            .flat_map(|s| self.codes.iter().map(move |c| (s, c)))
            .map(|(s, c)| self.names.dir(s, c))
            .collect();
        let mut st = self.state.lock();
        for chunk in dirs.chunks(1000) {
            st.link.run(
                "HSETNX",
                |i| chunk.get(i).cloned().unwrap_or_default(),
                |_| {
                    chunk
                        .iter()
                        .map(|d| {
                            let mut c = redis::cmd("HSETNX");
                            c.arg(d).arg("id").arg(&id);
                            c
                        })
                        .collect()
                },
            )?;
        }
        let key = self.names.config();
        self.config_write(&mut st, "EVALSHA mark-dirs", DIRS_SCRIPT, &key, &[])?;
        st.all_dirs = true;
        Ok(())
    }

    /// The configuration (from the config hash).
    pub fn config(&self) -> &Config {
        &self.stored.config
    }

    /// The key prefix.
    pub fn prefix(&self) -> &str {
        &self.names.prefix
    }

    /// Shard strings per window.
    pub fn shards(&self) -> u32 {
        self.stored.shards
    }

    fn now(&self) -> Result<i64> {
        Ok(self.clock.now_secs()?)
    }

    fn off(&self) -> i32 {
        self.stored.config.utc_offset_secs
    }

    fn window_index(&self, span: window::Span, t: i64) -> Result<i64> {
        Ok(window::index_or_unavailable(span, t, self.off())?)
    }

    fn geom(&self, tier: usize, index: u32) -> Geom {
        let mut g = self.geoms.lock();
        let list = &mut g[tier];
        while list.len() <= index as usize {
            let i = list.len() as u32;
            list.push(Geom::of(
                &self.stored.config,
                &self.stored.config.tiers[tier],
                i,
                self.stored.shards,
            ));
        }
        list[index as usize]
    }

    fn chain_field(&self, tier: usize, window: i64) -> String {
        format!("chain:{}:{window}", self.codes[tier])
    }

    /// Takes the chain lengths from the config hash's fields.
    fn absorb_chains(&self, st: &mut State, fields: &[(String, String)]) {
        st.all_dirs |= fields.iter().any(|(f, _)| f == DIRS_FIELD);
        for (f, v) in fields {
            let Some(rest) = f.strip_prefix("chain:") else {
                continue;
            };
            let Some((code, w)) = rest.rsplit_once(':') else {
                continue;
            };
            let (Some(ti), Ok(w), Ok(n)) = (
                self.codes.iter().position(|c| c == code),
                w.parse::<i64>(),
                v.parse::<u32>(),
            ) else {
                continue;
            };
            let e = st.chains.entry((ti, w)).or_insert(1);
            *e = (*e).max(n.min(MAX_CHAIN));
        }
    }

    /// Reads the chain lengths again, and drops the fields of windows that
    /// expired (one window of grace for clients whose clocks lag).
    fn refresh_chains(&self, st: &mut State, now: i64) -> Result<()> {
        let key = self.names.config();
        let fields = pairs(&st.link.one("HGETALL", &key, &[])?);
        let engine = fields.iter().find(|(f, _)| f == ENGINE_FIELD);
        self.still_there(engine.map(|(_, v)| v.as_bytes()))?;
        self.absorb_chains(st, &fields);
        let mut old = Vec::new();
        for (ti, t) in self.stored.config.tiers.iter().enumerate() {
            let cur = self.window_index(t.span, now)?;
            let keep = t.oldest_live(cur) - 1;
            st.chains.retain(|&(i, w), _| i != ti || w >= keep);
            let prefix = format!("chain:{}:", self.codes[ti]);
            for (f, _) in &fields {
                if let Some(w) = f.strip_prefix(&prefix).and_then(|w| w.parse::<i64>().ok()) {
                    if w < keep {
                        old.push(f.clone());
                    }
                }
            }
        }
        if !old.is_empty() {
            let old: Vec<&[u8]> = old.iter().map(|f| f.as_bytes()).collect();
            st.link.one("HDEL", &key, &old)?;
        }
        st.refresh_at = self.next_boundary(now)?;
        Ok(())
    }

    /// `EngineLost` unless `engine`, the config hash's engine field as
    /// the server holds it now, is the one this client opened: a server
    /// that lost the engine's keys (restarted empty, flushed) would read
    /// every key absent, which only the config hash's absence (or another
    /// engine in it) tells.
    fn still_there(&self, engine: Option<&[u8]>) -> Result<()> {
        let reason = match engine {
            None => "(the config hash) is gone".to_string(),
            Some(b) if b != self.engine_json.as_bytes() => format!(
                "(the config hash) holds another engine ({}) than the one this client opened ({})",
                String::from_utf8_lossy(b),
                self.engine_json
            ),
            Some(_) => return Ok(()),
        };
        Err(RedisError::EngineLost {
            key: self.names.config(),
            reason,
        })
    }

    /// `EngineLost` for the directory `key` of a shard, which this client
    /// has seen exist (or knows create made: [`DIRS_FIELD`]) and Redis no
    /// longer has: a directory is never
    /// deleted, so the node holding it lost its keys (on a Cluster, a
    /// master other than the config hash's), and every key of the shard
    /// would read as absent.
    fn dir_lost(&self, st: &State, key: &str) -> RedisError {
        let known = match st.all_dirs {
            true => "which the engine's create made",
            false => "which this client has seen",
        };
        RedisError::EngineLost {
            key: key.to_string(),
            reason: format!("(a shard's directory, {known}) is gone"),
        }
    }

    /// The earliest end of a current window of any tier.
    fn next_boundary(&self, now: i64) -> Result<i64> {
        let mut next = i64::MAX;
        for t in &self.stored.config.tiers {
            let cur = self.window_index(t.span, now)?;
            if let Some(end) = window::end(t.span, cur, self.off()) {
                next = next.min(end);
            }
        }
        Ok(next)
    }

    /// The tier whose live windows reach furthest back: `contains` reads it.
    fn full_tier(&self, now: i64) -> Result<usize> {
        let mut best = (i64::MAX, 0);
        for (ti, t) in self.stored.config.tiers.iter().enumerate() {
            let cur = self.window_index(t.span, now)?;
            let start = window::start(t.span, t.oldest_live(cur), self.off()).unwrap_or(i64::MIN);
            if start < best.0 {
                best = (start, ti);
            }
        }
        Ok(best.1)
    }

    /// The live windows of the tier that answers `contains`, for reading.
    fn read_plan(&self, now: i64) -> Result<TierPlan> {
        let ti = self.full_tier(now)?;
        let t = &self.stored.config.tiers[ti];
        let cur = self.window_index(t.span, now)?;
        let from = t.oldest_live(cur);
        Ok(TierPlan {
            tier: ti,
            prune_below: from - 1,
            windows: reads(t.span, from, cur),
        })
    }

    /// Adds a write of window `w` of tier `ti` to the plans.
    fn add_write(&self, plans: &mut Vec<TierPlan>, ti: usize, w: i64, now: i64) -> Result<()> {
        let p = match plans.iter_mut().position(|p| p.tier == ti) {
            Some(i) => &mut plans[i],
            None => {
                let t = &self.stored.config.tiers[ti];
                let cur = self.window_index(t.span, now)?;
                plans.push(TierPlan {
                    tier: ti,
                    prune_below: t.oldest_live(cur) - 1,
                    windows: Vec::new(),
                });
                let last = plans.len() - 1;
                &mut plans[last]
            }
        };
        match p.windows.iter_mut().find(|x| x.0 == w) {
            Some(x) => x.2 = true,
            None => {
                p.windows.push((w, false, true));
                p.windows.sort_by_key(|x| x.0);
            }
        }
        Ok(())
    }

    /// When Redis may drop window `w` of tier `ti`: the end of the last
    /// window in which it is live, plus a grace.
    fn expire_at(&self, ti: usize, w: i64) -> i64 {
        let t = &self.stored.config.tiers[ti];
        let last = w.saturating_add(i64::from(t.retention.max(1)) - 1);
        window::end(t.span, last, self.off())
            .unwrap_or(i64::MAX - EXPIRY_GRACE_SECS)
            .saturating_add(EXPIRY_GRACE_SECS)
    }

    // ---- the public operations --------------------------------------------

    /// Records `key` in the open window of every tier. Returns `true` when
    /// the key was not present in any live window before (check-and-insert).
    /// Of several clients inserting the same new key at once, exactly one
    /// gets `true`.
    pub fn insert(&self, key: &[u8]) -> Result<bool> {
        Ok(self.insert_batch(&[key])?.first().copied().unwrap_or(false))
    }

    /// [`RedisEngine::insert`] for many keys, one answer per key in input
    /// order: one script call per shard (and per 1000 keys), all shards in
    /// one pipeline. A key repeated in the batch is new at most once.
    ///
    /// After an error (the retries ran out, some groups possibly applied),
    /// send the same keys again in the same order, before any other write
    /// through this engine: the call resumes from what Redis stored and
    /// reports each key new exactly once (docs/distributed.md, "Failure
    /// behaviour"). The same holds for [`RedisEngine::insert_within_batch`].
    pub fn insert_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        let now = self.now()?;
        let plans = vec![self.read_plan(now)?];
        self.insert_reading(keys, plans, Mode::Insert, now, (b'i', 0))
    }

    /// Claims a key that is due: when `key` was **not seen within
    /// `horizon`**, records it in the open window of every tier and returns
    /// `true`; otherwise writes nothing and returns `false`
    /// ([`RedisEngine::contains_within`] and the insert in one server-side
    /// step; see [`crate::Engine::insert_within`]). Of several clients
    /// calling it for the same key at once, when the key was not seen
    /// within the horizon, exactly one gets `true`. A horizon longer than
    /// every tier keeps is an error, and nothing is written.
    pub fn insert_within(&self, key: &[u8], horizon: Duration) -> Result<bool> {
        Ok(self
            .insert_within_batch(&[key], horizon)?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// [`RedisEngine::insert_within`] for many keys, one answer per key in
    /// input order. A key repeated in the batch is new at most once.
    pub fn insert_within_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        horizon: Duration,
    ) -> Result<Vec<bool>> {
        let now = self.now()?;
        let plans = vec![self.within_plan(now, horizon)?];
        let secs = i64::try_from(horizon.as_secs()).unwrap_or(i64::MAX);
        self.insert_reading(keys, plans, Mode::Due, now, (b'd', secs))
    }

    /// Check-and-insert of `keys`: a key is new when no window `plans`
    /// read holds it; every tier's open window records it (`Mode::Insert`),
    /// or records it only when it is new (`Mode::Due`).
    fn insert_reading<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        mut plans: Vec<TierPlan>,
        mode: Mode,
        now: i64,
        call: Method,
    ) -> Result<Vec<bool>> {
        for (ti, t) in self.stored.config.tiers.iter().enumerate() {
            let cur = self.window_index(t.span, now)?;
            self.add_write(&mut plans, ti, cur, now)?;
        }
        self.insert_rounds(keys, &plans, mode, now, call)
    }

    /// Check-and-insert of `keys` in rounds (see `round_size`), resuming
    /// the previous call when it failed part-way and this one is the same
    /// `call` of the same keys (see `Unfinished`).
    fn insert_rounds<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        plans: &[TierPlan],
        mode: Mode,
        now: i64,
        call: Method,
    ) -> Result<Vec<bool>> {
        if keys.is_empty() {
            // Writes nothing: a failed call waiting to be sent again stays
            // resumable.
            return Ok(Vec::new());
        }
        let hashes = self.hashes(keys);
        let digest = digest(call, &hashes);
        let (mut out, mut failed) = {
            let mut st = self.state.lock();
            match st.unfinished.take() {
                Some(u) if u.digest == digest && u.writes == st.writes => (u.answers, u.failed),
                _ => (Vec::with_capacity(keys.len()), None),
            }
        };
        while out.len() < hashes.len() {
            let rest = &hashes[out.len()..];
            let (req, n) = match failed.take() {
                Some((req, n)) => (req, n.min(rest.len())),
                None => (self.next_request(), self.round_size(plans).min(rest.len())),
            };
            // The count of writes so far: a round that fails before its
            // own write is counted (refreshing the chains at a window
            // boundary) leaves the call resumable from it.
            let mut writes = self.state.lock().writes;
            match self.run_batch(&rest[..n], plans, mode, now, req, &mut writes) {
                Ok(a) => out.extend(a),
                Err(RedisError::NotReplicated {
                    server,
                    acked,
                    wanted,
                    answers,
                }) => {
                    // Applied, with answers: the keys after this round
                    // were not sent, and sending the call again sends them.
                    out.extend(answers);
                    if out.len() < hashes.len() {
                        self.state.lock().unfinished = Some(Unfinished {
                            digest,
                            writes,
                            answers: out.clone(),
                            failed: None,
                        });
                    }
                    return Err(RedisError::NotReplicated {
                        server,
                        acked,
                        wanted,
                        answers: out,
                    });
                }
                Err(e) => {
                    self.state.lock().unfinished = Some(Unfinished {
                        digest,
                        writes,
                        answers: out,
                        failed: Some((req, n)),
                    });
                    return Err(e);
                }
            }
        }
        Ok(out)
    }

    /// Every key's hash, in order.
    fn hashes<K: AsRef<[u8]>>(&self, keys: &[K]) -> Vec<KeyHash> {
        keys.iter()
            .map(|k| hash_key(self.stored.seed, k.as_ref()))
            .collect()
    }

    /// A fresh request id.
    fn next_request(&self) -> u64 {
        let mut st = self.state.lock();
        st.requests += 1;
        st.requests
    }

    /// Keys sent before the chains are checked for growth: an eighth of the
    /// smallest tail's capacity (at least 64), so no tail takes much more
    /// than its plan before it grows (growth is decided between rounds).
    fn round_size(&self, plans: &[TierPlan]) -> usize {
        let st = self.state.lock();
        let mut smallest = u64::MAX;
        for p in plans {
            let tier = &self.stored.config.tiers[p.tier];
            for &(w, _, write) in &p.windows {
                if write {
                    let n = self.chain(&st, p.tier, w);
                    smallest = smallest.min(self.stored.config.subfilter_plan(tier, n - 1).0);
                }
            }
        }
        usize::try_from(smallest / 8).unwrap_or(usize::MAX).max(64)
    }

    /// Records `key` as seen at `time` (a backfill): into the window holding
    /// `time` of every tier that still keeps it. Returns `true` when the key
    /// was not present in any live window before. An instant older than
    /// every tier keeps, or in a future window, is an error.
    pub fn insert_at(&self, key: &[u8], time: SystemTime) -> Result<bool> {
        let now = self.now()?;
        let t = instant(time)?;
        let mut plans = vec![self.read_plan(now)?];
        let mut any = false;
        for (ti, tier) in self.stored.config.tiers.iter().enumerate() {
            let cur = self.window_index(tier.span, now)?;
            let w = self.window_index(tier.span, t)?;
            if w > cur {
                return Err(crate::Error::WindowUnavailable {
                    reason: format!(
                        "instant {} lies in a future window of tier {tier}",
                        crate::clock::rfc3339(t)
                    ),
                }
                .into());
            }
            if w >= tier.oldest_live(cur) {
                self.add_write(&mut plans, ti, w, now)?;
                any = true;
            }
        }
        if !any {
            return Err(crate::Error::WindowUnavailable {
                reason: format!(
                    "instant {} is older than every tier keeps",
                    crate::clock::rfc3339(t)
                ),
            }
            .into());
        }
        Ok(self
            .insert_rounds(&[key], &plans, Mode::Insert, now, (b'a', t))?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// Whether `key` is present in any live window. Never a false negative
    /// for a key inserted within the retention; a false positive at most at
    /// the configured rate.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        Ok(self
            .contains_batch(&[key])?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// [`RedisEngine::contains`] for many keys, one answer per key.
    pub fn contains_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        let now = self.now()?;
        let plans = vec![self.read_plan(now)?];
        self.run_batch(&self.hashes(keys), &plans, Mode::Check, now, 0, &mut 0)
    }

    /// Whether `key` was inserted within `horizon` of now: the tier with the
    /// finest windows that covers the horizon, and in it only the windows
    /// the horizon touches (as [`crate::Engine::contains_within`]): true for
    /// every key inserted within `horizon`, possibly also for a key up to
    /// one window of that tier older. A horizon longer than every tier
    /// keeps is an error.
    pub fn contains_within(&self, key: &[u8], horizon: Duration) -> Result<bool> {
        Ok(self
            .contains_within_batch(&[key], horizon)?
            .first()
            .copied()
            .unwrap_or(false))
    }

    /// [`RedisEngine::contains_within`] for many keys, one answer per key.
    pub fn contains_within_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        horizon: Duration,
    ) -> Result<Vec<bool>> {
        let now = self.now()?;
        let plans = vec![self.within_plan(now, horizon)?];
        self.run_batch(&self.hashes(keys), &plans, Mode::Check, now, 0, &mut 0)
    }

    /// The windows that answer "seen within `horizon`" at `now`.
    fn within_plan(&self, now: i64, horizon: Duration) -> Result<TierPlan> {
        let (ti, first) = self.pick_tier(now, horizon)?;
        let t = &self.stored.config.tiers[ti];
        let cur = self.window_index(t.span, now)?;
        Ok(TierPlan {
            tier: ti,
            prune_below: t.oldest_live(cur) - 1,
            windows: reads(t.span, first, cur),
        })
    }

    /// The tier and first window that answer a horizon: the finest windows
    /// first, then the fewest of them (the embedded engine's rule).
    fn pick_tier(&self, now: i64, horizon: Duration) -> Result<(usize, i64)> {
        Ok(self.stored.config.horizon_tier(now, horizon, 0, i64::MIN)?)
    }

    // ---- the batch machinery ------------------------------------------------

    /// One round: every key's group script, pipelined. `req` is the
    /// round's request id (writing modes); `writes` gets the engine's
    /// count of writing rounds, this one included.
    ///
    /// The keys go as one script call per shard and chunk ([`groups`]).
    /// A call answered "stale" (its shard knows a longer chain than this
    /// client) is sent again, with the chains read afresh, for at most
    /// [`STALE_ROUNDS`] rounds; chains that grew are recorded after.
    fn run_batch(
        &self,
        hashes: &[KeyHash],
        plans: &[TierPlan],
        mode: Mode,
        now: i64,
        req: u64,
        writes: &mut u64,
    ) -> Result<Vec<bool>> {
        if hashes.is_empty() {
            return Ok(Vec::new());
        }
        let groups = groups(hashes, self.stored.shards);
        let mut st = self.state.lock();
        if now >= st.refresh_at {
            self.refresh_chains(&mut st, now)?;
        }
        if mode != Mode::Check {
            st.writes += 1;
            *writes = st.writes;
        }
        let req = req.to_string();
        let mut out = vec![false; hashes.len()];
        let mut pending: Vec<usize> = (0..groups.len()).collect();
        let mut grown: Vec<(usize, i64, u32)> = Vec::new();
        for _round in 0..STALE_ROUNDS {
            let calls: Vec<Call> = pending
                .iter()
                .map(|&g| {
                    let Group { shard, chunk, idx } = &groups[g];
                    self.call(&st, *shard, *chunk, idx, hashes, plans, mode, &req)
                })
                .collect::<Result<_>>()?;
            let replies = self.send_calls(&mut st, &calls, mode)?;
            let mut stale = Vec::new();
            let cmd = mode.command();
            for ((&g, call), reply) in pending.iter().zip(&calls).zip(&replies) {
                let group = &groups[g];
                if !self.take_reply(&mut st, cmd, group, call, reply, &mut out, &mut grown)? {
                    stale.push(g);
                }
            }
            if stale.is_empty() {
                pending.clear();
                break;
            }
            self.refresh_chains(&mut st, now)?;
            pending = stale;
        }
        if !pending.is_empty() {
            return Err(RedisError::bad_reply(
                mode.command(),
                &self.names.config(),
                "the chain lengths kept changing",
            ));
        }
        for (ti, w, n) in grown {
            self.record_growth(&mut st, ti, w, n)?;
        }
        match mode {
            Mode::Insert | Mode::Due => self.confirm(&mut st, out),
            Mode::Check => Ok(out),
        }
    }

    /// Sends `calls` as one pipeline, with the config hash's engine and
    /// `dirs` fields read after them, and returns one reply per call once
    /// those fields show the engine still there.
    fn send_calls(&self, st: &mut State, calls: &[Call], mode: Mode) -> Result<Vec<Value>> {
        let sha = &self.sha;
        let config_key = self.names.config();
        let mut replies = st.link.run(
            mode.command(),
            |i| {
                calls
                    .get(i)
                    .map_or_else(|| config_key.clone(), |c| c.keys[0].clone())
            },
            |eval| {
                // The engine field last: a server that lost the
                // engine's keys (restarted empty, flushed) would
                // answer every key absent, which only the config
                // hash's absence (or another engine in it) tells.
                // With it `dirs`, which a client opened while the
                // creator was making the directories learns here,
                // not only at its next window boundary.
                let mut check = redis::cmd("HMGET");
                check.arg(&config_key).arg(ENGINE_FIELD).arg(DIRS_FIELD);
                calls
                    .iter()
                    .map(|call| {
                        let mut c = if eval {
                            let mut c = redis::cmd("EVAL");
                            c.arg(SCRIPT);
                            c
                        } else {
                            let mut c = redis::cmd("EVALSHA");
                            c.arg(sha);
                            c
                        };
                        c.arg(call.keys.len()).arg(&call.keys).arg(&call.argv);
                        c
                    })
                    .chain(std::iter::once(check))
                    .collect()
            },
        )?;
        if replies.len() != calls.len() + 1 {
            return Err(RedisError::bad_reply(
                mode.command(),
                &config_key,
                "one reply per command expected",
            ));
        }
        let fields = match replies.pop() {
            Some(Value::Array(v)) => v,
            _ => return Err(RedisError::bad_reply("HMGET", &config_key, "not an array")),
        };
        self.still_there(fields.first().and_then(bulk))?;
        st.all_dirs |= fields.get(1).and_then(bulk).is_some();
        Ok(replies)
    }

    /// Reads the reply of one group's call: its keys' answers into `out`,
    /// the directories it saw exist, and the chains it saw longer than
    /// known into `grown`. False when the call was stale (the longer
    /// chain is learnt; the group is to be sent again).
    #[allow(clippy::too_many_arguments)]
    fn take_reply(
        &self,
        st: &mut State,
        cmd: &str,
        group: &Group,
        call: &Call,
        reply: &Value,
        out: &mut [bool],
        grown: &mut Vec<(usize, i64, u32)>,
    ) -> Result<bool> {
        let bad = |why: &str| RedisError::bad_reply(cmd, &call.keys[0], why);
        let Value::Array(items) = reply else {
            return Err(bad("not an array"));
        };
        let status = match items.first() {
            Some(Value::Int(n)) => *n,
            _ => return Err(bad("no status")),
        };
        let payload = items
            .get(1)
            .and_then(bulk)
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .ok_or_else(|| bad("no payload"))?;
        // The key of the directory a report starts with (its index among
        // the call's keys; Lua counts from 1).
        let dir_of = |report: &str| {
            let d = report.split(' ').next()?.parse::<usize>().ok()?;
            call.keys.get(d.checked_sub(1)?)
        };
        if status == 2 {
            // A directory this client has seen is gone.
            let dir = dir_of(&payload).ok_or_else(|| bad("a malformed lost directory"))?;
            return Err(self.dir_lost(st, dir));
        }
        if status == 0 {
            // A shard knows a longer chain: learn it, send again.
            let (ti, w, n) = parse_report(&payload, &call.dir_tier)
                .ok_or_else(|| bad("a malformed stale report"))?;
            // A chain no client grows (longer than the longest, or with
            // sub-filters past what Redis holds): no call could name it,
            // and every resend would be stale again.
            let most = self.held(ti, n.min(MAX_CHAIN));
            if n > most {
                let key = dir_of(&payload).unwrap_or(&call.keys[0]);
                let tier = &self.stored.config.tiers[ti];
                let why = format!(
                    "the directory lists {n} sub-filters for window {w} of tier {tier}, \
                     more than the {most} its chain can grow to (an edited directory)"
                );
                return Err(RedisError::bad_reply(cmd, key, why));
            }
            let e = st.chains.entry((ti, w)).or_insert(1);
            *e = (*e).max(n);
            return Ok(false);
        }
        let (answers, chains) = payload.split_once('|').ok_or_else(|| bad("no '|'"))?;
        let idx = &group.idx;
        if answers.len() != idx.len() {
            return Err(bad("one answer per key expected"));
        }
        for (i, a) in idx.iter().zip(answers.bytes()) {
            out[*i] = a == b'1';
        }
        // The directories that exist now (none for a stored answer).
        let exist = items.get(2).and_then(bulk).unwrap_or_default();
        for d in String::from_utf8_lossy(exist).split(' ') {
            if let Some(&ti) = d.parse().ok().and_then(|d| call.dir_tier.get(&d)) {
                st.dirs.insert((ti, group.shard));
            }
        }
        for rep in chains.split(';').filter(|r| !r.is_empty()) {
            let (ti, w, n) =
                parse_report(rep, &call.dir_tier).ok_or_else(|| bad("a malformed chain report"))?;
            let n = n.min(MAX_CHAIN);
            let known = st.chains.entry((ti, w)).or_insert(1);
            if n > *known {
                *known = n;
                grown.push((ti, w, n));
            }
        }
        Ok(true)
    }

    /// With [`RedisOptions::wait_replicas`], `WAIT` until that many
    /// replicas have this connection's writes: `answers` back, or
    /// [`RedisError::NotReplicated`] carrying them when fewer confirmed in
    /// time. Without it, `answers` back at once.
    fn confirm(&self, st: &mut State, answers: Vec<bool>) -> Result<Vec<bool>> {
        let Some((replicas, timeout)) = self.wait else {
            return Ok(answers);
        };
        // Sent once, never retried: on a new connection `WAIT` would wait
        // for nothing and report every replica as caught up.
        let key = self.names.config();
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        let acked = match st.link.once("WAIT", &key, replicas, ms)? {
            Value::Int(n) => u32::try_from(n).unwrap_or(0),
            _ => return Err(RedisError::bad_reply("WAIT", &key, "not an integer")),
        };
        if acked < replicas {
            return Err(RedisError::NotReplicated {
                server: st.link.masters(),
                acked,
                wanted: replicas,
                answers,
            });
        }
        Ok(answers)
    }

    /// The keys and arguments of one script call: the keys `idx` of one
    /// shard (see `check_insert.lua` for the argument layout).
    #[allow(clippy::too_many_arguments)]
    fn call(
        &self,
        st: &State,
        shard: u32,
        chunk: usize,
        idx: &[usize],
        hashes: &[KeyHash],
        plans: &[TierPlan],
        mode: Mode,
        req: &str,
    ) -> Result<Call> {
        let shards = self.stored.shards;
        let mut keys = vec![self.names.result(shard, &self.client, chunk)];
        let mut dir_tier = HashMap::new();
        let mut geoms: Vec<Geom> = Vec::new();
        let mut plan = String::new();
        for p in plans {
            let tier = &self.stored.config.tiers[p.tier];
            let code = &self.codes[p.tier];
            let dir = keys.len() + 1; // Lua counts from 1
            keys.push(self.names.dir(shard, code));
            dir_tier.insert(dir, p.tier);
            let seen = u8::from(st.seen(p.tier, shard));
            plan.push_str(&format!("T {dir} {} {seen};", p.prune_below));
            let longest = p
                .windows
                .iter()
                .map(|&(w, _, write)| self.named(st, p.tier, w, write))
                .max()
                .unwrap_or(1);
            let geom0 = geoms.len() + 1;
            for i in 0..longest {
                geoms.push(self.geom(p.tier, i));
            }
            for &(w, read, write) in &p.windows {
                let n = self.named(st, p.tier, w, write);
                let label =
                    window::label(tier.span, w).ok_or_else(|| crate::Error::WindowUnavailable {
                        reason: format!(
                            "window {w} of tier {tier} has no name (year out of range)"
                        ),
                    })?;
                let first = keys.len() + 1;
                for i in 0..n {
                    keys.push(self.names.filter(shard, code, &label, i));
                }
                let flags = match (read, write) {
                    (true, true) => "rw",
                    (true, false) => "r",
                    _ => "w",
                };
                let exp = if write { self.expire_at(p.tier, w) } else { 0 };
                plan.push_str(&format!("W {w} {n} {first} {geom0} {flags} {exp};"));
            }
        }
        let kmax = geoms.iter().map(|g| g.k).max().unwrap_or(1);
        let ks: Vec<String> = geoms.iter().map(|g| g.k.to_string()).collect();
        let full: Vec<String> = geoms.iter().map(|g| g.full.to_string()).collect();
        let lens: Vec<String> = geoms.iter().map(|g| (g.nbs * 64).to_string()).collect();
        let mut blob = Vec::with_capacity(idx.len() * (geoms.len() * 4 + kmax as usize * 2));
        for &i in idx {
            let h = hashes[i];
            for g in &geoms {
                // nbs <= 2^23 (checked at create and growth): fits in u32.
                let b = layout::block(h, shards, g.nbs) as u32;
                blob.extend_from_slice(&b.to_le_bytes());
            }
            for c in layout::cells(h.lo, kmax) {
                // The cell's byte in the block (Lua counts from 1), its bit.
                blob.push((c >> 3) as u8 + 1);
                blob.push(1u8 << (c & 7));
            }
        }
        let argv: Vec<Vec<u8>> = vec![
            match mode {
                Mode::Insert => b"i".to_vec(),
                Mode::Due => b"d".to_vec(),
                Mode::Check => b"c".to_vec(),
            },
            req.as_bytes().to_vec(),
            plan.into_bytes(),
            ks.join(" ").into_bytes(),
            kmax.to_string().into_bytes(),
            idx.len().to_string().into_bytes(),
            blob,
            RESULT_TTL_SECS.to_string().into_bytes(),
            full.join(" ").into_bytes(),
            lens.join(" ").into_bytes(),
            format!("{:016x}", self.stored.seed).into_bytes(),
        ];
        Ok(Call {
            keys,
            argv,
            dir_tier,
        })
    }

    fn chain(&self, st: &State, tier: usize, window: i64) -> u32 {
        let n = st.chains.get(&(tier, window)).copied().unwrap_or(1);
        self.held(tier, n)
    }

    /// `n` sub-filters of `tier`'s chain, or fewer: no more than the
    /// positions whose strings Redis can hold, which a chain never grows
    /// past (see `named`). A longer length read from an edited config hash
    /// or directory names no sub-filter planned past 2^64 bytes.
    fn held(&self, tier: usize, n: u32) -> u32 {
        (1..n)
            .find(|&i| self.geom(tier, i).nbs > MAX_SHARD_BLOCKS)
            .unwrap_or(n)
    }

    /// The sub-filters a call names for a window: those seen, and for a
    /// window it writes one more, so a shard whose tail is full can grow
    /// inside the script (unless the chain is at its longest, or the next
    /// sub-filter would pass Redis's string limit: then the tail keeps
    /// taking keys and its rate rises, which `stats` shows).
    fn named(&self, st: &State, tier: usize, window: i64, write: bool) -> u32 {
        let n = self.chain(st, tier, window);
        if write && n < MAX_CHAIN && self.geom(tier, n).nbs <= MAX_SHARD_BLOCKS {
            n + 1
        } else {
            n
        }
    }

    /// Records in the config hash that window `w` of tier `ti` has grown
    /// to `n` sub-filters in some shard (the shards grow on their own, in
    /// the script; the hash is what other clients and `stats` read).
    fn record_growth(&self, st: &mut State, ti: usize, w: i64, n: u32) -> Result<()> {
        let key = self.names.config();
        let field = self.chain_field(ti, w);
        let n = n.to_string();
        self.config_write(
            st,
            "EVALSHA record-growth",
            GROW_SCRIPT,
            &key,
            &[&field, &n],
        )
    }

    /// Runs `src`, one of the scripts that write the config hash `key`
    /// only while its engine field is this client's ([`GROW_SCRIPT`],
    /// [`DIRS_SCRIPT`]: `args`, then the engine field), and turns their
    /// refusal (-1: Redis lost the engine's keys) into `EngineLost`.
    fn config_write(
        &self,
        st: &mut State,
        what: &str,
        src: &str,
        key: &str,
        args: &[&str],
    ) -> Result<()> {
        let mut args = args.to_vec();
        args.push(&self.engine_json);
        let r = RedisEngine::script(&mut st.link, what, src, key, &args)?;
        if matches!(r, Value::Int(-1)) {
            let e = st.link.one("HGET", key, &[ENGINE_FIELD.as_bytes()])?;
            self.still_there(bulk(&e))?;
            return Err(RedisError::bad_reply(
                what,
                key,
                "the engine field changed while the script ran",
            ));
        }
        Ok(())
    }

    /// Per tier and per window: sub-filters (the longest chain of any
    /// shard), fill, estimated keys and false-positive rate, from the
    /// shards' directories (one `HGETALL` per tier and shard, pipelined).
    /// A window's rate is the average over its shards (a key's lookup reads
    /// one shard) of each shard's chain sum. `bytes` counts each string at
    /// its planned length; Redis allocates a string up to its highest
    /// written block.
    pub fn stats(&self) -> Result<Stats> {
        let now = self.now()?;
        let mut st = self.state.lock();
        self.refresh_chains(&mut st, now)?;
        let full = self.full_tier(now)?;
        let mut tiers = Vec::new();
        let mut bytes = 0;
        for (ti, t) in self.stored.config.tiers.iter().enumerate() {
            let windows = self.read_dirs(&mut st, ti, t, now)?;
            let tier = self.tier_stats(ti, t, now, ti == full, &windows)?;
            bytes += tier.segments.iter().map(|s| s.bytes).sum::<u64>();
            tiers.push(tier);
        }
        Ok(Stats {
            now,
            // Redis keeps no files to quarantine: a window is there or not.
            lost_windows: Vec::new(),
            lost_earlier: Vec::new(),
            unrestored_windows: Vec::new(),
            log_damage: None,
            fpr: self.stored.config.fpr,
            expected_items_per_day: self.stored.config.expected_items_per_day,
            generation: 0,
            bytes,
            tiers,
            clock_behind_secs: 0,
        })
    }

    /// A step of `stats`: the directories of tier `ti` (`t`) in every
    /// shard, read with one pipelined `HGETALL` each, as figures per window
    /// and shard. A directory this client has seen that reads empty is
    /// checked (`check_dir_kept`); one that reads fields counts as seen.
    fn read_dirs(
        &self,
        st: &mut State,
        ti: usize,
        t: &crate::config::Tier,
        now: i64,
    ) -> Result<DirFigures> {
        let shards = self.stored.shards;
        let code = &self.codes[ti];
        let dirs: Vec<String> = (0..shards).map(|s| self.names.dir(s, code)).collect();
        let replies = st.link.run(
            "HGETALL",
            |i| dirs.get(i).cloned().unwrap_or_default(),
            |_| {
                dirs.iter()
                    .map(|d| {
                        let mut c = redis::cmd("HGETALL");
                        c.arg(d);
                        c
                    })
                    .collect()
            },
        )?;
        // Per window, per shard: (chain length, bits set per sub-filter).
        let mut windows: DirFigures = BTreeMap::new();
        for (shard, r) in replies.iter().enumerate() {
            let fields = pairs(r);
            // A directory is never deleted (see `dir_lost`); one deleted
            // alone leaves the first sub-filters of its windows.
            if fields.is_empty() && st.seen(ti, shard as u32) {
                self.check_dir_kept(st, ti, t, shard as u32, &dirs[shard], now)?;
            }
            if !fields.is_empty() {
                st.dirs.insert((ti, shard as u32));
            }
            add_dir_fields(&mut windows, shard, shards, fields);
        }
        Ok(windows)
    }

    /// A step of `stats`, for the directory `dir` of tier `ti` (`t`) in
    /// `shard` that reads empty: [`RedisError::EngineLost`] (see `dir_lost`)
    /// unless the first sub-filter of one of the tier's live windows, or
    /// of the next window, exists (one `EXISTS`).
    fn check_dir_kept(
        &self,
        st: &mut State,
        ti: usize,
        t: &crate::config::Tier,
        shard: u32,
        dir: &str,
        now: i64,
    ) -> Result<()> {
        let code = &self.codes[ti];
        let cur = self.window_index(t.span, now)?;
        let mut firsts = Vec::new();
        for w in t.oldest_live(cur)..=cur.saturating_add(1) {
            if let Some(label) = window::label(t.span, w) {
                firsts.push(self.names.filter(shard, code, &label, 0));
            }
        }
        if let Some((first, rest)) = firsts.split_first() {
            let rest: Vec<&[u8]> = rest.iter().map(|k| k.as_bytes()).collect();
            if matches!(st.link.one("EXISTS", first, &rest)?, Value::Int(0)) {
                return Err(self.dir_lost(st, dir));
            }
        }
        Ok(())
    }

    /// A step of `stats`: the figures of tier `ti` (`t`) read from its
    /// directories (`windows`), as one segment per window present of those
    /// lookups read (see [`reads`]): the live ones and the next, which a
    /// shard has when a client whose clock is ahead has passed the
    /// boundary already; `contains` is whether the tier answers `contains`.
    fn tier_stats(
        &self,
        ti: usize,
        t: &crate::config::Tier,
        now: i64,
        contains: bool,
        windows: &DirFigures,
    ) -> Result<TierStats> {
        let cur = self.window_index(t.span, now)?;
        let oldest = t.oldest_live(cur);
        let covers = window::start(t.span, oldest, self.off())
            .map_or(0, |s| now.saturating_sub(s).max(0) as u64);
        let newest = reads(t.span, oldest, cur).last().map_or(cur, |r| r.0);
        let segments = windows
            .range(oldest..=newest)
            .map(|(&w, per)| self.window_stats(ti, t, w, cur, per))
            .collect::<Result<_>>()?;
        Ok(TierStats {
            tier: t.to_string(),
            kind: t.kind,
            retention: t.retention,
            window_secs: window::nominal_secs(t.span),
            covers_secs: covers,
            coarseness_secs: window::nominal_secs(t.span),
            segment_fpr: self.stored.config.segment_fpr(t),
            answers_contains: contains,
            segments,
        })
    }

    /// A step of `stats`: window `w` of tier `ti` (`t`), open when it is
    /// `cur` or later, from each shard's `(chain length, bits set per sub-filter)`
    /// (`per`): the sizes, fill and estimates of its sub-filters, summed
    /// over the shards, the rate averaged over them. A count of bits set
    /// past its sub-filter's cells, which no engine writes (an edited
    /// directory), is an error naming the shard's directory.
    fn window_stats(
        &self,
        ti: usize,
        t: &crate::config::Tier,
        w: i64,
        cur: i64,
        per: &[(u32, Vec<u64>)],
    ) -> Result<SegmentStats> {
        let shards = self.stored.shards;
        // The next window (see `reads`) is open for the clients ahead.
        let state = if w >= cur { "open" } else { "sealed" };
        let mut s = SegmentStats::window(t.span, w, self.off(), state);
        let mut items = 0.0;
        for (shard, (n, fills)) in per.iter().enumerate() {
            let n = self.held(ti, *n);
            s.subfilters = s.subfilters.max(n as usize);
            for i in 0..n {
                let g = self.geom(ti, i);
                let plan = g.shard_plan();
                let occ = fills.get(i as usize).copied().unwrap_or(0);
                let cells = plan
                    .nblocks
                    .saturating_mul(u64::from(t.kind.cells_per_block()));
                if occ > cells {
                    let dir = self.names.dir(shard as u32, &self.codes[ti]);
                    let why = format!(
                        "field {w}:{i} says {occ} bits are set in sub-filter {i} of window \
                         {w} of tier {t}, which has {cells} (an edited directory)"
                    );
                    return Err(RedisError::bad_reply("HGETALL", &dir, why));
                }
                let est = sizing::estimate_items(t.kind, plan, occ);
                items += est;
                s.bytes += plan.nblocks * 64;
                s.cells += cells;
                s.occupied = s.occupied.saturating_add(occ);
                s.estimated_fpr +=
                    sizing::fpr(t.kind, plan.k, est / plan.nblocks as f64) / f64::from(shards);
            }
        }
        s.estimated_items = items.round() as u64;
        s.fill = s.occupied as f64 / s.cells.max(1) as f64;
        s.bits_per_key = match s.estimated_items {
            0 => 0.0,
            n => (s.bytes * 8) as f64 / n as f64,
        };
        Ok(s)
    }

    /// Whether this engine talks to a Redis Cluster (fixed at open: it
    /// does not wait for the calls of other threads).
    pub fn is_cluster(&self) -> bool {
        self.cluster
    }
}

/// What `stats` reads from a tier's directories: per window, per shard,
/// `(chain length, bits set per sub-filter)`.
type DirFigures = BTreeMap<i64, Vec<(u32, Vec<u64>)>>;

/// A step of `stats`: adds the `fields` of the directory of `shard` (one
/// of `shards`) to `windows`: a `<window>` field is the window's chain
/// length (at most [`MAX_CHAIN`]), a `<window>:<i>` field the bits set in
/// its sub-filter `i`; any other field is passed over.
fn add_dir_fields(
    windows: &mut DirFigures,
    shard: usize,
    shards: u32,
    fields: Vec<(String, String)>,
) {
    for (f, v) in fields {
        let (w, sub) = match f.split_once(':') {
            None => (f.parse::<i64>().ok(), None),
            Some((w, i)) => (w.parse::<i64>().ok(), i.parse::<usize>().ok()),
        };
        let (Some(w), Ok(x)) = (w, v.parse::<u64>()) else {
            continue;
        };
        let per = windows
            .entry(w)
            .or_insert_with(|| vec![(0, Vec::new()); shards as usize]);
        let slot = &mut per[shard];
        match sub {
            None => slot.0 = u32::try_from(x).unwrap_or(MAX_CHAIN).min(MAX_CHAIN),
            Some(i) if i < MAX_CHAIN as usize => {
                if slot.1.len() <= i {
                    slot.1.resize(i + 1, 0);
                }
                slot.1[i] = x;
            }
            Some(_) => {}
        }
    }
}

/// The windows `first..=cur` to read, and the next one: a shard has it only
/// when a client whose clock is ahead has passed the boundary already, and
/// it costs nothing otherwise (the script skips windows its directory does
/// not know). So a client whose clock lags a little still sees the keys an
/// earlier client put into the new window.
fn reads(span: window::Span, first: i64, cur: i64) -> Vec<(i64, bool, bool)> {
    let next = cur
        .checked_add(1)
        .filter(|&w| window::label(span, w).is_some());
    (first..=cur)
        .chain(next)
        .map(|w| (w, true, false))
        .collect()
}

/// A `<dir index> <window> <n>` report of the script: `(tier, window, n)`,
/// `n` at least 1 and as reported (callers bound it).
fn parse_report(rep: &str, dir_tier: &HashMap<usize, usize>) -> Option<(usize, i64, u32)> {
    let mut f = rep.split(' ');
    let ti = *dir_tier.get(&f.next()?.parse::<usize>().ok()?)?;
    let w = f.next()?.parse::<i64>().ok()?;
    let n = f.next()?.parse::<u32>().ok()?;
    Some((ti, w, n.max(1)))
}

/// The keys of one script call: a chunk of one shard's keys.
struct Group {
    shard: u32,
    /// The chunk's number within its shard (names its result key).
    chunk: usize,
    /// The indices of its keys in the batch.
    idx: Vec<usize>,
}

/// The script calls of a batch: the keys of each shard, in order, cut into
/// chunks of [`CHUNK`].
fn groups(hashes: &[KeyHash], shards: u32) -> Vec<Group> {
    let mut by_shard: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    for (i, h) in hashes.iter().enumerate() {
        by_shard
            .entry(layout::shard(*h, shards))
            .or_default()
            .push(i);
    }
    let mut groups = Vec::new();
    for (s, idx) in by_shard {
        for (c, chunk) in idx.chunks(CHUNK).enumerate() {
            groups.push(Group {
                shard: s,
                chunk: c,
                idx: chunk.to_vec(),
            });
        }
    }
    groups
}

/// One script call, ready to send.
struct Call {
    keys: Vec<String>,
    argv: Vec<Vec<u8>>,
    /// Lua index of each directory key -> tier.
    dir_tier: HashMap<usize, usize>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn engine_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<super::RedisEngine>();
    }

    /// A zero connect or I/O timeout cannot be set on a connection: it is
    /// refused as a configuration error before any connection, not
    /// retried into a connection error. (Nothing listens on port 1.)
    #[test]
    fn a_zero_timeout_is_refused_before_connecting() {
        use super::{RedisEngine, RedisError, RedisOptions};
        use std::time::Duration;
        for (name, options) in [
            (
                "connect_timeout",
                RedisOptions {
                    connect_timeout: Duration::ZERO,
                    ..RedisOptions::default()
                },
            ),
            (
                "io_timeout",
                RedisOptions {
                    io_timeout: Duration::ZERO,
                    retries: 0,
                    ..RedisOptions::default()
                },
            ),
        ] {
            let r = RedisEngine::open_with("redis://127.0.0.1:1", "tbtest", options);
            match r {
                Err(RedisError::Engine(crate::Error::InvalidConfig { reason })) => {
                    assert!(reason.contains(name), "{reason}");
                }
                Err(e) => panic!("{name} of 0: {e}"),
                Ok(_) => panic!("{name} of 0: opened"),
            }
        }
    }

    /// `max_backoff` bounds every wait, the first one too: a `backoff`
    /// above it waits `max_backoff`.
    #[test]
    fn the_first_wait_is_held_to_max_backoff() {
        use super::{RedisEngine, RedisOptions};
        use std::time::{Duration, Instant};
        let options = RedisOptions {
            retries: 1,
            backoff: Duration::from_secs(30),
            max_backoff: Duration::from_millis(10),
            connect_timeout: Duration::from_millis(500),
            ..RedisOptions::default()
        };
        let start = Instant::now();
        // Nothing listens on port 1: the connection is refused, retried
        // once after one wait, and refused again.
        let r = RedisEngine::open_with("redis://127.0.0.1:1", "tbtest", options);
        assert!(r.is_err(), "opened through port 1");
        let took = start.elapsed();
        assert!(took < Duration::from_secs(10), "waited {took:?}");
    }

    #[test]
    fn the_script_hash_is_stable_per_source() {
        assert_eq!(super::sha1(super::SCRIPT), super::sha1(super::SCRIPT));
        assert_eq!(super::sha1(super::SCRIPT).len(), 40);
    }
}
