//! The engine in Redis (`--redis URL [--prefix P]`, feature `redis`):
//! opened, created, or opened-or-created like an engine directory, with
//! every error prefixed by the URL (password masked) and the prefix.

use std::time::{Duration, SystemTime};

use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock, Stats};

use crate::{check_new_horizon, describe, note, per_key, CliError, CliResult, Sizing};

/// Where the engine in Redis is, and how to connect to it.
pub struct Place<'a> {
    url: &'a str,
    prefix: &'a str,
    options: RedisOptions,
    /// `URL (prefix P)` with the password masked.
    label: String,
    /// `--now`, if given.
    now: Option<SystemTime>,
}

impl<'a> Place<'a> {
    /// With `now`, the engine's clock stands at that instant (`--now`).
    pub fn new(url: &'a str, prefix: &'a str, now: Option<SystemTime>) -> Place<'a> {
        let options = match now {
            Some(t) => RedisOptions::default().clock(ManualClock::new(t)),
            None => RedisOptions::default(),
        };
        Place {
            url,
            prefix,
            options,
            label: format!(
                "{} (prefix {})",
                timebloom::redact_url(url),
                timebloom::shown_prefix(prefix)
            ),
            now,
        }
    }

    fn err(&self, e: RedisError) -> CliError {
        CliError(format!("{}: {e}", self.label))
    }

    fn store(&self, engine: RedisEngine) -> RedisStore {
        RedisStore {
            engine,
            label: self.label.clone(),
        }
    }

    /// Opens the engine; its configuration comes from Redis.
    pub fn open(&self) -> CliResult<RedisStore> {
        RedisEngine::open_with(self.url, self.prefix, self.options.clone())
            .map(|e| self.store(e))
            .map_err(|e| self.err(e))
    }

    /// Creates a new engine; an error when one exists under the prefix.
    pub fn create(&self, config: Config) -> CliResult<RedisStore> {
        self.created(config)
            .map(|e| self.store(e))
            .map_err(|e| self.err(e))
    }

    fn created(&self, config: Config) -> Result<RedisEngine, RedisError> {
        RedisEngine::create_with(self.url, self.prefix, config, self.options.clone())
    }

    /// Opens the engine, or creates it from the defaults and `sizing` when
    /// there is none (another process may create it meanwhile: then it is
    /// opened). Configuration flags that disagree with an existing engine
    /// are an error: the processes sharing an engine must agree on it. A
    /// new engine that would not keep the horizon `within` is not created.
    pub fn open_or_create(
        &self,
        sizing: &Sizing,
        within: Option<Duration>,
    ) -> CliResult<RedisStore> {
        let opened = RedisEngine::open_with(self.url, self.prefix, self.options.clone());
        let store = match opened {
            Err(RedisError::NotFound { .. }) => {
                let config = sizing.apply(Config::default());
                check_new_horizon(&self.label, &config, within, self.now)?;
                match self.created(config) {
                    Ok(e) => {
                        let store = self.store(e);
                        note(format_args!("created new engine at {}", store.summary()));
                        return Ok(store);
                    }
                    // Another process created it meanwhile.
                    Err(RedisError::AlreadyExists { .. }) => self.open()?,
                    Err(e) => return Err(self.err(e)),
                }
            }
            r => r.map(|e| self.store(e)).map_err(|e| self.err(e))?,
        };
        let have = store.engine.config();
        let wanted = sizing.apply(have.clone());
        wanted.validate().map_err(|e| self.err(e.into()))?;
        if wanted != *have {
            return Err(CliError(format!(
                "{}: the engine in Redis has {}, the configuration flags ask for {}; \
                 with --redis they must match the engine (leave them out to use the \
                 engine as it is, or choose another --prefix)",
                self.label,
                describe(have),
                describe(&wanted)
            )));
        }
        Ok(store)
    }
}

/// An open engine in Redis.
pub struct RedisStore {
    engine: RedisEngine,
    label: String,
}

impl RedisStore {
    fn err(&self, e: RedisError) -> CliError {
        CliError(format!("{}: {e}", self.label))
    }

    /// `URL (prefix P)`, password masked.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The sizing plan of the engine as it is kept in Redis (its shards).
    pub fn plan(&self) -> CliResult<timebloom::plan::Plan> {
        timebloom::plan::Plan::for_redis(self.engine.config(), self.engine.shards())
            .map_err(|e| CliError(format!("{}: {e}", self.label)))
    }

    /// `URL (prefix P) (tiers ..., N keys/day, fpr P, utc+00:00, S shards)`.
    pub fn summary(&self) -> String {
        format!(
            "{} ({}, {} shards)",
            self.label,
            describe(self.engine.config()),
            self.engine.shards()
        )
    }

    pub fn insert_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
    ) -> CliResult<(Vec<bool>, Option<CliError>)> {
        let answers = self.engine.insert_batch(keys).map_err(|e| self.err(e))?;
        Ok((per_key(keys.len(), answers)?, None))
    }

    pub fn insert_within_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        horizon: Duration,
    ) -> CliResult<(Vec<bool>, Option<CliError>)> {
        let answers = (self.engine)
            .insert_within_batch(keys, horizon)
            .map_err(|e| self.err(e))?;
        Ok((per_key(keys.len(), answers)?, None))
    }

    pub fn contains_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> CliResult<Vec<bool>> {
        let answers = self.engine.contains_batch(keys).map_err(|e| self.err(e))?;
        per_key(keys.len(), answers)
    }

    pub fn contains_within_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        horizon: Duration,
    ) -> CliResult<Vec<bool>> {
        let answers = (self.engine)
            .contains_within_batch(keys, horizon)
            .map_err(|e| self.err(e))?;
        per_key(keys.len(), answers)
    }

    /// An error from `too_long` when no tier keeps `horizon` (a batch of
    /// no keys asks Redis nothing).
    pub fn check_horizon(
        &self,
        horizon: Duration,
        too_long: impl Fn(&dyn std::fmt::Display, &dyn std::fmt::Display) -> CliError,
    ) -> CliResult<()> {
        match self.engine.contains_within_batch::<&[u8]>(&[], horizon) {
            Err(RedisError::Engine(e @ timebloom::Error::HorizonTooLong { .. })) => {
                Err(too_long(&self.label, &e))
            }
            Err(e) => Err(self.err(e)),
            Ok(_) => Ok(()),
        }
    }

    pub fn stats(&self) -> CliResult<Stats> {
        self.engine.stats().map_err(|e| self.err(e))
    }
}
