//! Where the engine reads the time, and how it is opened.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The latest instant the engine accepts: 9999-12-31T23:59:59Z.
const MAX_INSTANT: i64 = 253_402_300_799;

/// Where the engine reads the time. Tests and backfills inject their own.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> SystemTime;
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> SystemTime {
        SystemTime::now()
    }
}

/// A clock that moves only when told to (whole seconds); clones share it.
///
/// Instants before 1970 read as 1970-01-01 (the engine refuses them anyway).
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock showing `t`.
    pub fn new(t: SystemTime) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(to_secs(t).unwrap_or(0))))
    }

    /// Shows `t` from now on.
    pub fn set(&self, t: SystemTime) {
        self.0.store(to_secs(t).unwrap_or(0), Ordering::SeqCst);
    }

    /// Moves the clock forward by `d`.
    pub fn advance(&self, d: Duration) {
        let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        self.0.fetch_add(secs, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        from_secs(self.0.load(Ordering::SeqCst))
    }
}

/// How to open or create an engine.
#[derive(Clone)]
pub struct Options {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) verify_on_open: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            clock: Arc::new(SystemClock),
            verify_on_open: false,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("verify_on_open", &self.verify_on_open)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Reads the time from `clock` instead of the system clock.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Options {
        self.clock = Arc::new(clock);
        self
    }

    /// Checks every sealed segment's body checksum at open (reads every
    /// sealed byte; off by default, see [`Engine::verify`]).
    pub fn verify_on_open(mut self, yes: bool) -> Options {
        self.verify_on_open = yes;
        self
    }
}

pub(crate) fn to_secs(t: SystemTime) -> Option<i64> {
    let s = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(s).ok().filter(|s| *s <= MAX_INSTANT)
}

pub(crate) fn from_secs(s: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(s.max(0).unsigned_abs())
}

pub(crate) fn instant(t: SystemTime) -> Result<i64> {
    to_secs(t).ok_or_else(|| Error::WindowUnavailable {
        reason: "the instant is before 1970 or after 9999".into(),
    })
}
