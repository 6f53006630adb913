//! Where the engine of a command lives: a directory (the embedded engine)
//! or Redis (`--redis URL [--prefix P]`, cargo feature `redis`). The
//! commands that work on both see one [`Store`]: the same batch calls, the
//! same answers in input order, errors that name the directory or the URL.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use timebloom::{redact_url, Engine, Error, Stats, SyncPolicy};

use crate::{input, recorded, CliError, CliResult};

/// `--redis URL` and `--prefix P`: the engine in Redis instead of DIR.
#[derive(clap::Args)]
pub struct RedisFlags {
    /// Use the engine in Redis at this URL instead of a directory:
    /// redis://[user:password@]host:port, rediss:// (TLS), several
    /// comma-separated URLs (the seed nodes of a Cluster), or
    /// redis+sentinel://host:port[,host:port...]/MASTER
    #[arg(long, value_name = "URL")]
    // A build without the feature keeps the flag only to refuse it (see
    // `no_redis`): its help says so instead of offering it.
    #[cfg_attr(
        not(feature = "redis"),
        arg(
            help = NO_REDIS_HELP,
            long_help = NO_REDIS_HELP
        )
    )]
    pub redis: Option<String>,
    /// The key prefix of the engine in Redis (its keys are P:config and
    /// P:{P:s}:...) [default: timebloom]
    #[arg(long, value_name = "P", requires = "redis")]
    pub prefix: Option<String>,
}

/// `--redis` and `--prefix` on the commands that have no Redis form: they
/// are accepted only to say why they cannot be used.
#[derive(clap::Args)]
pub struct NoRedisFlags {
    #[arg(long, value_name = "URL", hide = true)]
    pub redis: Option<String>,
    #[arg(long, value_name = "P", hide = true, requires = "redis")]
    pub prefix: Option<String>,
}

impl NoRedisFlags {
    /// An error when `--redis` was given to `command`, saying why.
    pub fn refuse(&self, command: &str, why: &str) -> CliResult<()> {
        match &self.redis {
            Some(url) => Err(CliError(format!(
                "{}: `{command}` is not available with --redis: {why}",
                redact_url(url)
            ))),
            None => Ok(()),
        }
    }
}

/// Where the engine is.
pub enum Target {
    Dir(PathBuf),
    #[cfg_attr(not(feature = "redis"), allow(dead_code))]
    Redis {
        url: String,
        prefix: String,
    },
}

/// The default `--prefix`.
pub const DEFAULT_PREFIX: &str = "timebloom";

impl Target {
    /// The target of a command whose only positional argument is DIR
    /// (clap has made sure that exactly one of DIR and --redis is given).
    pub fn of(dir: Option<PathBuf>, flags: RedisFlags) -> CliResult<Target> {
        Target::with_rest(dir, flags, &mut Vec::<OsString>::new())
    }

    /// The target of a command whose DIR is followed by files or keys:
    /// with `--redis` every positional argument is a file (or key), so the
    /// one clap took for DIR goes back to the front of `rest`. A first
    /// argument that is an engine directory means both were given.
    pub fn with_rest<T: From<PathBuf>>(
        dir: Option<PathBuf>,
        flags: RedisFlags,
        rest: &mut Vec<T>,
    ) -> CliResult<Target> {
        let Some(url) = flags.redis else {
            // clap's `requires` lets it through where DIR conflicts with
            // --redis (`create`, `stats`): refused here, not ignored.
            if let Some(prefix) = flags.prefix {
                return Err(CliError(format!(
                    "--prefix {} needs --redis URL (an engine directory has no prefix)",
                    timebloom::shown_prefix(&prefix)
                )));
            }
            return match dir {
                Some(dir) => {
                    not_stdin(&dir)?;
                    Ok(Target::Dir(dir))
                }
                None => Err(CliError("give an engine directory or --redis URL".into())),
            };
        };
        if let Some(first) = dir {
            if first.join("MANIFEST").is_file() {
                return Err(CliError(format!(
                    "{}: an engine directory and --redis {} were both given; use one of them",
                    first.display(),
                    redact_url(&url)
                )));
            }
            rest.insert(0, T::from(first));
        }
        if cfg!(not(feature = "redis")) {
            return Err(no_redis(&url));
        }
        let prefix = flags.prefix.unwrap_or_else(|| DEFAULT_PREFIX.to_string());
        Ok(Target::Redis { url, prefix })
    }

    /// An error naming `flag` when it is given with --redis.
    pub fn refuse(&self, flag: &str, given: bool, why: &str) -> CliResult<()> {
        match self {
            Target::Redis { url, .. } if given => Err(CliError(format!(
                "{}: {flag} is not available with --redis: {why}",
                redact_url(url)
            ))),
            _ => Ok(()),
        }
    }
}

/// An error when the engine directory given is `-`: stdin wherever a file
/// of keys goes, so most likely the directory left out (`crawl |
/// timebloom filter-new -`) rather than a directory named `-` (`./-`
/// names one).
pub fn not_stdin(dir: &std::path::Path) -> CliResult<()> {
    if dir.as_os_str() == "-" {
        return Err(CliError(
            "-: stdin is not an engine directory; give the directory first (stdin is read \
             after it: when no file or key follows, or as `-` among the files of keys), \
             or ./- for a directory named -"
                .into(),
        ));
    }
    Ok(())
}

/// The help of `--redis` in a build without the `redis` feature.
#[cfg(not(feature = "redis"))]
const NO_REDIS_HELP: &str = "Refused: this build has no Redis support (feature redis). \
    With it: the engine in Redis at this URL instead of a directory";

/// The error of `--redis` in a build without the `redis` feature.
pub fn no_redis(url: &str) -> CliError {
    CliError(format!(
        "--redis {}: this build has no Redis support (feature redis)",
        redact_url(url)
    ))
}

/// The error of a `--within` horizon that no tier of the engine `name` keeps.
pub fn horizon_too_long(
    name: &dyn std::fmt::Display,
    horizon: Duration,
    e: &dyn std::fmt::Display,
) -> CliError {
    CliError(format!(
        "{name}: --within {}: {e}",
        crate::units::fmt_secs(horizon.as_secs()).replace(' ', "")
    ))
}

/// An open engine: embedded or in Redis. A process holds one, so the
/// variants' sizes do not matter.
#[allow(clippy::large_enum_variant)]
pub enum Store {
    Dir(Engine),
    #[cfg(feature = "redis")]
    Redis(crate::redis_cli::RedisStore),
}

impl Store {
    /// Check-and-insert of a batch: the answers of the keys recorded, and
    /// the error that stopped the batch part way, if one did.
    pub fn insert_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> CliResult<(Vec<bool>, Option<CliError>)> {
        match self {
            Store::Dir(e) => recorded(e.path(), keys.len(), e.insert_batch(keys)),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.insert_batch(keys),
        }
    }

    /// Check-and-insert of a batch where a key counts as seen only within
    /// `horizon`: as [`Store::insert_batch`].
    pub fn insert_within_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        horizon: Duration,
    ) -> CliResult<(Vec<bool>, Option<CliError>)> {
        match self {
            Store::Dir(e) => recorded(e.path(), keys.len(), e.insert_within_batch(keys, horizon)),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.insert_within_batch(keys, horizon),
        }
    }

    /// Whether each key is in a live window.
    pub fn contains_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> CliResult<Vec<bool>> {
        match self {
            Store::Dir(e) => Ok(e.contains_batch(keys)?),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.contains_batch(keys),
        }
    }

    /// Whether each key was recorded within `horizon` of now.
    pub fn contains_within_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        horizon: Duration,
    ) -> CliResult<Vec<bool>> {
        match self {
            Store::Dir(e) => Ok(keys
                .iter()
                .map(|k| e.contains_within(k.as_ref(), horizon))
                .collect::<Result<_, Error>>()?),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.contains_within_batch(keys, horizon),
        }
    }

    /// An error naming the engine and `--within` when no tier keeps
    /// `horizon`, found before any input is read (lines past the first
    /// batch were read, and an empty input passed, before).
    pub fn check_horizon(&self, horizon: Duration) -> CliResult<()> {
        let too_long = |name: &dyn std::fmt::Display, e: &dyn std::fmt::Display| {
            horizon_too_long(name, horizon, e)
        };
        match self {
            Store::Dir(e) => match e.contains_within(b"", horizon) {
                Err(err @ Error::HorizonTooLong { .. }) => Err(too_long(&e.path().display(), &err)),
                _ => Ok(()),
            },
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.check_horizon(horizon, too_long),
        }
    }

    /// The stats of every tier and window.
    pub fn stats(&self) -> CliResult<Stats> {
        match self {
            Store::Dir(e) => Ok(e.stats()?),
            #[cfg(feature = "redis")]
            Store::Redis(r) => r.stats(),
        }
    }

    /// The engine's name in the stats table, and where its bytes are.
    pub fn name(&self) -> (String, &'static str) {
        match self {
            Store::Dir(e) => (e.path().display().to_string(), "on disk"),
            #[cfg(feature = "redis")]
            Store::Redis(r) => (r.label().to_string(), "in Redis"),
        }
    }

    /// Lines per engine call: under `--sync always` each call of the
    /// embedded engine is one fsync, so larger batches (one fsync per 16384
    /// lines) keep throughput; a batch is handed over early whenever the
    /// input has no more lines ready, so a slow pipe still streams, and
    /// once its lines hold 4 MiB.
    pub fn batch_lines(&self, sync: Option<SyncPolicy>) -> usize {
        match self {
            Store::Dir(e) if sync.unwrap_or(e.config().sync) == SyncPolicy::Always => {
                4 * input::CHUNK
            }
            _ => input::CHUNK,
        }
    }

    /// Closes the engine; for the embedded engine, durability failures
    /// surface here.
    pub fn close(self) -> CliResult<()> {
        match self {
            Store::Dir(e) => Ok(e.close()?),
            #[cfg(feature = "redis")]
            Store::Redis(_) => Ok(()),
        }
    }
}
