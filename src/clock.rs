//! Where the engine reads the time, and how it is opened.

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::error::{Error, Result};

/// The latest instant the engine accepts: 9999-12-31T23:59:59Z.
pub(crate) const MAX_INSTANT: i64 = 253_402_300_799;

/// Where the engine reads the time. Tests and backfills inject their own.
pub trait Clock: Send + Sync {
    /// The current instant.
    fn now(&self) -> SystemTime;

    /// The current instant in whole seconds since the Unix epoch, `None`
    /// before 1970 or after 9999. The engine reads its clock on every call;
    /// the default converts [`Clock::now`], a clock that keeps seconds can
    /// return them directly.
    fn now_secs(&self) -> Option<i64> {
        to_secs(self.now())
    }
}

/// The system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    /// The coarse real-time clock: accurate to the kernel's tick (a few
    /// milliseconds), and read in a few nanoseconds instead of the 50-90 ns
    /// a precise read costs on virtual machines. Window boundaries need no
    /// better; every insert and lookup reads the clock.
    fn now(&self) -> SystemTime {
        let ts = coarse_realtime();
        match (u64::try_from(ts.tv_sec), u32::try_from(ts.tv_nsec)) {
            (Ok(s), Ok(ns)) => UNIX_EPOCH + Duration::new(s, ns),
            _ => SystemTime::now(),
        }
    }
}

/// The system's real-time clock, read coarsely where the kernel offers
/// that (`CLOCK_REALTIME_COARSE` on Linux and Android).
#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
fn coarse_realtime() -> rustix::time::Timespec {
    rustix::time::clock_gettime(rustix::time::ClockId::RealtimeCoarse)
}

/// The system's real-time clock: other systems (macOS, the BSDs) have no
/// coarse one here, and read the precise `CLOCK_REALTIME`.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[inline]
fn coarse_realtime() -> rustix::time::Timespec {
    rustix::time::clock_gettime(rustix::time::ClockId::Realtime)
}

/// A clock that moves only when told to (whole seconds); clones share it.
///
/// It shows any instant it is given, to the second (within what an `i64`
/// counts), also one before 1970 or after 9999: an engine reading such an
/// instant refuses the call ([`crate::Error::WindowUnavailable`]), however
/// the clock got there ([`ManualClock::new`], [`ManualClock::set`] or
/// [`ManualClock::advance`]).
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<AtomicI64>);

impl ManualClock {
    /// A clock showing `t`.
    pub fn new(t: SystemTime) -> ManualClock {
        ManualClock(Arc::new(AtomicI64::new(signed_secs(t))))
    }

    /// Shows `t` from now on.
    pub fn set(&self, t: SystemTime) {
        self.0.store(signed_secs(t), Ordering::SeqCst);
    }

    /// Moves the clock forward by `d` (stopping at the last second an
    /// `i64` counts; the engine refuses instants past 9999 anyway).
    pub fn advance(&self, d: Duration) {
        let secs = i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
        // Never fails: the closure always returns a value.
        let _ = self
            .0
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |t| {
                Some(t.saturating_add(secs))
            });
    }
}

impl Clock for ManualClock {
    fn now(&self) -> SystemTime {
        let s = self.0.load(Ordering::SeqCst);
        let d = Duration::from_secs(s.unsigned_abs());
        match s >= 0 {
            true => UNIX_EPOCH.checked_add(d),
            false => UNIX_EPOCH.checked_sub(d),
        }
        // Only where `SystemTime` holds fewer seconds than an `i64`; the
        // engine reads `now_secs`, which refuses such an instant anyway.
        .unwrap_or(UNIX_EPOCH)
    }

    fn now_secs(&self) -> Option<i64> {
        Some(self.0.load(Ordering::SeqCst))
    }
}

/// Where an engine reads the time: the system's coarse clock read directly
/// (the hot path: no `SystemTime` round trip), or an injected [`Clock`].
#[derive(Clone)]
pub(crate) enum TimeSource {
    System,
    Injected(Arc<dyn Clock>),
}

impl TimeSource {
    /// Seconds since the Unix epoch, checked against the engine's range.
    #[inline]
    pub(crate) fn now_secs(&self) -> Result<i64> {
        match self {
            TimeSource::System => {
                let secs = coarse_realtime().tv_sec;
                if (0..=MAX_INSTANT).contains(&secs) {
                    Ok(secs)
                } else {
                    instant(SystemTime::now())
                }
            }
            TimeSource::Injected(c) => c
                .now_secs()
                .filter(|s| (0..=MAX_INSTANT).contains(s))
                .ok_or_else(out_of_range),
        }
    }
}

/// How to open or create an engine.
#[derive(Clone)]
pub struct Options {
    pub(crate) clock: TimeSource,
    pub(crate) verify_on_open: bool,
    pub(crate) max_clock_jump: Option<Duration>,
    pub(crate) allow_clock_jump: bool,
    pub(crate) sync: Option<crate::config::SyncPolicy>,
    pub(crate) assume_power_loss: bool,
    pub(crate) degraded: bool,
    pub(crate) checkpoint_log_bytes: Option<u64>,
    pub(crate) expired_at: Option<SystemTime>,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            clock: TimeSource::System,
            verify_on_open: false,
            max_clock_jump: None,
            allow_clock_jump: false,
            sync: None,
            assume_power_loss: false,
            degraded: false,
            checkpoint_log_bytes: None,
            expired_at: None,
        }
    }
}

impl std::fmt::Debug for Options {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("verify_on_open", &self.verify_on_open)
            .field("max_clock_jump", &self.max_clock_jump)
            .field("allow_clock_jump", &self.allow_clock_jump)
            .field("sync", &self.sync)
            .finish_non_exhaustive()
    }
}

impl Options {
    /// Reads the time from `clock` instead of the system clock.
    pub fn clock(mut self, clock: impl Clock + 'static) -> Options {
        self.clock = TimeSource::Injected(Arc::new(clock));
        self
    }

    /// Checks every sealed segment's body checksum at open (reads every
    /// sealed byte; off by default, see [`crate::Engine::verify`]). A
    /// header copy left damaged by a torn rewrite is recovered from as
    /// without this option (the other copy is used); `verify` reports it.
    pub fn verify_on_open(mut self, yes: bool) -> Options {
        self.verify_on_open = yes;
        self
    }

    /// The longest forward step of the clock a writer takes by itself.
    ///
    /// Whatever the limit, a writer refuses a step that would expire every
    /// window of every tier at once and pass at least one whole window of
    /// each unseen ([`crate::Error::ClockJump`]): a clock set years ahead by
    /// mistake must not empty the engine. (A tier keeping one window expires
    /// it at each of its boundaries by design: the step into the next window
    /// is taken even when every tier keeps one window.) `None`
    /// (the default) sets no further limit, so a crawler paused for weeks
    /// restarts as usual while a longer tier still keeps its keys. With
    /// `Some(d)`, a step that passes the first window boundary the engine
    /// has not crossed (the end of its newest window of the shortest
    /// length) by more than `d` is refused too, or, once lookups have read
    /// the clock past that boundary, a step more than `d` past the latest
    /// instant they read. Steps before that boundary are never refused.
    pub fn max_clock_jump(mut self, limit: Option<Duration>) -> Options {
        self.max_clock_jump = limit;
        self
    }

    /// Takes any forward step of the clock, even one that expires every
    /// window: for an operator who knows the new time is right (the CLI's
    /// `maintain --now`). [`crate::Engine::maintain`] always does.
    pub fn allow_clock_jump(mut self, yes: bool) -> Options {
        self.allow_clock_jump = yes;
        self
    }
}

impl Options {
    /// The sync policy for this open, in place of the one the engine was
    /// created with ([`crate::Config::sync`]). The stored policy is not
    /// changed: the next open without this option uses it again. An
    /// interval outside 1 ms to 1 hour is refused at open or create
    /// ([`crate::Error::InvalidConfig`]), as in a [`crate::Config`].
    pub fn sync(mut self, policy: crate::config::SyncPolicy) -> Options {
        self.sync = Some(policy);
        self
    }

    /// Refuses what a [`crate::Config`] would be refused for: the sync
    /// policy that replaces the stored one is held to the same limits.
    pub(crate) fn check(&self) -> Result<()> {
        match &self.sync {
            Some(policy) => policy.check(),
            None => Ok(()),
        }
    }

    /// How large the write-ahead log grows before a checkpoint makes its
    /// records durable in the segments and deletes it (default 64 MiB,
    /// about 1.7 million 40-byte records): a smaller log replays faster after a
    /// power loss, at the cost of more frequent checkpoints. Less than one
    /// 40-byte record is taken as one record. An engine of
    /// Bloom tiers only checkpoints beside its writers, on a background
    /// thread; one with counting or fingerprint tiers stops its writes for
    /// the checkpoint (their windows need an exact copy).
    pub fn checkpoint_log_bytes(mut self, bytes: u64) -> Options {
        self.checkpoint_log_bytes = Some(bytes.max(crate::wal::RECORD as u64));
        self
    }

    /// Opens even when a segment file fails its checks: the file is moved
    /// to `quarantine/` (as without this option) and the engine goes on
    /// without that window; `stats` lists the windows lost
    /// ([`crate::Stats::lost_windows`]). While that engine is open, and
    /// after it (a writable open keeps the windows it lost in the manifest
    /// until what they held has expired), a key
    /// that the tier answering [`crate::Engine::contains`] misses is looked
    /// for in the other tiers' windows overlapping a lost window of that
    /// tier (they recorded the same inserts), by `contains`, its batches
    /// and the check of a check-and-insert (`insert_at`'s too); so is a key
    /// that the tier a horizon picks misses, by
    /// [`crate::Engine::contains_within`] and the check of
    /// [`crate::Engine::insert_within`] (answered as coarsely as the window
    /// that holds it: docs/operations.md, "Checking and recovering"). Off by
    /// default: such an open fails with [`crate::Error::Quarantined`]. A
    /// segment file of a live window that the manifest names and `seg/`
    /// lacks (deleted, or left out of a copy) is taken the same way (there
    /// is nothing to move); a
    /// read-only open reports it as damage, `missing, though the manifest
    /// names it` ([`crate::Engine::verify_each`]). Without this option such
    /// an open fails with the file's "not found" error.
    ///
    /// Also recovers after a power loss past a damaged shadow copy of a
    /// counting window or fingerprint table (which otherwise fails with
    /// [`crate::Error::Corrupt`] naming it): the window keeps its body as
    /// the disk holds it and takes the log again, and `stats` lists it
    /// ([`crate::Stats::unrestored_windows`]; its counts may be off, see
    /// docs/operations.md, "Checking and recovering").
    pub fn degraded(mut self, yes: bool) -> Options {
        self.degraded = yes;
        self
    }

    /// Recovers as after a power loss even when the operating system has not
    /// restarted since the engine was last open (for power-loss simulations
    /// in tests; see `docs/format.md`, "Recovery").
    #[doc(hidden)]
    pub fn assume_power_loss(mut self, yes: bool) -> Options {
        self.assume_power_loss = yes;
        self
    }

    /// Judges at `t`, rather than at the clock's instant, which windows
    /// have expired when the manifest names a file `seg/` lacks: such a
    /// window is left out at open (see docs/operations.md, "Backup").
    /// For the CLI's `maintain`, which opens on a clock standing still and
    /// moves the engine to `t` after; a writing open that leaves a window
    /// out this way refuses a clock jump to `t` as an open at `t` would
    /// (unless [`Options::allow_clock_jump`]).
    #[doc(hidden)]
    pub fn expired_at(mut self, t: SystemTime) -> Options {
        self.expired_at = Some(t);
        self
    }
}

/// An instant (seconds since the Unix epoch) as RFC 3339 UTC, for messages.
pub(crate) fn rfc3339(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}

pub(crate) fn to_secs(t: SystemTime) -> Option<i64> {
    let s = t.duration_since(UNIX_EPOCH).ok()?.as_secs();
    i64::try_from(s).ok().filter(|s| *s <= MAX_INSTANT)
}

/// Whole seconds since the Unix epoch, rounded down (an instant 0.5 s
/// before 1970 is second -1), saturating at what an `i64` counts.
fn signed_secs(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_secs()).unwrap_or(i64::MAX),
        Err(e) => {
            let d = e.duration();
            let s = d.as_secs().saturating_add(u64::from(d.subsec_nanos() > 0));
            i64::try_from(s).map_or(i64::MIN, |s| -s)
        }
    }
}

pub(crate) fn instant(t: SystemTime) -> Result<i64> {
    to_secs(t).ok_or_else(out_of_range)
}

fn out_of_range() -> Error {
    Error::WindowUnavailable {
        reason: "the instant is before 1970 or after 9999".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The coarse read lies between two precise reads taken around it,
    /// give or take 50 ms (the coarse clock lags by up to a tick). A
    /// thread preempted between the reads widens the bracket instead of
    /// reading as an error of the clock.
    #[test]
    fn the_coarse_system_clock_is_close_to_the_precise_one() {
        let before = SystemTime::now();
        let coarse = SystemClock.now();
        let after = SystemTime::now();
        let slack = Duration::from_millis(50);
        assert!(
            coarse + slack >= before && coarse <= after + slack,
            "coarse clock {coarse:?} outside [{before:?}, {after:?}] by more than {slack:?}"
        );
    }

    #[test]
    fn a_manual_clock_moves_only_when_told() {
        let c = ManualClock::new(UNIX_EPOCH + Duration::from_secs(100));
        let shared = c.clone();
        c.advance(Duration::from_secs(5));
        assert_eq!(shared.now(), UNIX_EPOCH + Duration::from_secs(105));
        assert_eq!(to_secs(UNIX_EPOCH - Duration::from_secs(1)), None);
    }
}
