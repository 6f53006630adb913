//! The engine: opens and recovers a directory, answers inserts and lookups,
//! rotates windows, expires old ones, and reports stats.
//!
//! The work is split by responsibility:
//! - this file: the engine value, its small shared helpers, and close;
//! - `open`: create, open and recovery of the files (lock, quarantine,
//!   degraded opens);
//! - `snapshot`: the live set as an immutable snapshot, and [`Handle`];
//! - `read`: lookups, horizons, stats and verification;
//! - `write`: inserts, backfills and removes;
//! - `rotate`: the clock, rotation, expiry, sealing and chain growth;
//! - `durable`: the write-ahead log, recovery, checkpoints and the manifest.
//!
//! Concurrency (docs/design.md, "Concurrency"): lookups read a snapshot and
//! the mapped words with plain atomic loads, and take no lock. A writer of
//! a key takes the key's stripe lock (`filter::Stripes`), checks again
//! there, and sets cells with atomic read-modify-writes, so writers of
//! different keys run in parallel and check-and-insert stays atomic per
//! key. A key that every open window holds already is answered without
//! any lock. Rotation, growth, unsealing and checkpoints take the
//! maintenance lock (one at a time); none of them blocks a lookup.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::clock::TimeSource;
use crate::config::{Config, SyncPolicy, Tier};
use crate::error::{Error, Result};
use crate::filter::{Kind, Stripes};
use crate::hash::{hash_key, KeyHash};
use crate::segment::Identity;
use crate::wal::Wal;
use crate::window;

mod ahead;
mod durable;
mod open;
mod read;
mod rotate;
mod snapshot;
mod write;

pub use snapshot::Handle;
use snapshot::{Snapshot, TierState};

const MANIFEST: &str = "MANIFEST";
const LOCK: &str = "LOCK";
const SEG_DIR: &str = "seg";
const WAL_DIR: &str = "wal";
/// The boot the engine was last opened for writing in (see `wal::boot_id`).
const BOOT: &str = "BOOT";
/// Sub-filters one segment may grow to; at growth factor 2 that is far more
/// keys than any disk holds.
const MAX_CHAIN: usize = 64;

/// What the maintenance lock guards: the state that rotation, growth,
/// checkpoints and close change (the live set itself is the snapshot).
struct Maint {
    /// The write-ahead log position of the last checkpoint (see `wal`).
    checkpoint_lsn: u64,
    /// Seals and fingerprint tables' daily sweeps running in the
    /// background (see `rotate`, `Engine::in_background`), joined before
    /// anything that needs them finished.
    upkeep: Vec<JoinHandle<Result<()>>>,
    /// Threads faulting in new windows (`ahead::prefault_behind`), and
    /// those that created windows ahead once a rotation or close took them
    /// (`ahead::take`): stopped and joined before an expiry deletes files
    /// (see `rotate`), and by close.
    prefaulting: Vec<JoinHandle<()>>,
    /// A checkpoint running beside the writers (see `durable`): the
    /// generation of the snapshot it flushes, and its thread, which returns
    /// the log position it made durable.
    background: Option<(u64, JoinHandle<Result<Option<u64>>>)>,
    /// Why a background checkpoint failed (the engine is latched): what
    /// `close` reports.
    failure: Option<Error>,
}

/// An open timebloom engine directory.
///
/// `Engine` is `Send + Sync`: share it between threads with an `Arc` or a
/// scoped borrow. Its methods are safe to call from any thread; a worker
/// thread that makes many calls does better with its own [`Handle`]
/// (`engine.handle()`), whose lookups write no shared memory. Dropping the
/// engine closes it cleanly; [`Engine::close`] does the same and reports
/// errors.
pub struct Engine {
    dir: PathBuf,
    /// The exclusive directory lock; `None` for a read-only engine (or
    /// once a forked child let go of it: `Engine::leave_lock_after_fork`).
    lock: Mutex<Option<open::DirLock>>,
    /// The process that opened the engine (see `Engine::leave_after_fork`).
    pid: u32,
    /// Opened with [`Engine::open_read_only`]: nothing is ever written.
    read_only: bool,
    /// How far the clock may step forward by itself (see `Options`).
    max_clock_jump: Option<Duration>,
    allow_clock_jump: bool,
    seed: u64,
    config: Config,
    clock: TimeSource,
    /// The live set (see `snapshot`).
    current: ArcSwap<Snapshot>,
    /// The generation of `current`: handles compare it on every call.
    generation: AtomicU64,
    /// The latest instant a lookup read past the snapshot's boundary (the
    /// clock-jump guard's evidence that the clock moved step by step).
    read_past: AtomicI64,
    /// The newest day the fingerprint tables were read and written at (see
    /// [`Engine::table_today`]); only ever raised, and named in the
    /// manifest before any write of a later day lands. Shared with the
    /// daily sweep's thread, which reads the tables' tags against it.
    table_day: Arc<AtomicU32>,
    /// The manifest's generation, for `stats`.
    manifest_generation: AtomicU64,
    /// Windows left out at a degraded open (`TIER WINDOW`).
    lost: Vec<String>,
    /// What was wrong with the files of the windows a read-only degraded
    /// open left out, for [`Engine::verify_each`] (a writer's degraded open
    /// moves them to quarantine instead).
    damaged: Vec<Error>,
    /// The other files of those windows, checked by
    /// [`Engine::verify_each`] (a window is left out at its first damaged
    /// file).
    unchecked: Vec<(PathBuf, Identity)>,
    /// Windows a degraded open recovered without their damaged shadow
    /// copy (`TIER WINDOW`; see [`crate::Stats::unrestored_windows`]).
    unrestored: Vec<String>,
    /// The log damage a degraded recovery went past: the log's writes
    /// after it were not replayed ([`crate::Stats::log_damage`]).
    log_damage: Option<String>,
    /// Per tier (in the configuration's order), the newest window a
    /// degraded open went on without: the manifest named it, so the engine
    /// had crossed into it, and the clock-jump guard measures from it as
    /// from a window it holds.
    lost_newest: Vec<Option<i64>>,
    /// The windows a degraded open left out, by tier and window (a table's
    /// window is its chain's): while one belongs to the tier that answers
    /// `contains` (or a horizon), a key it misses is looked for in the
    /// other tiers' live windows that overlap a lost window's span
    /// (`Engine::lost_contains`, `Engine::within`). Kept in the manifest
    /// (`Manifest::lost`) until what such a window held has expired, so
    /// later opens look there too. Empty on an engine no degraded open
    /// left a window out of (or whose lost windows have expired), and on
    /// an engine of one tier (no other tier to look in: none is kept), whose
    /// lookups never look at it.
    lost_at: Vec<crate::manifest::LostWindow>,
    /// Serializes rotation, growth, unsealing, checkpoints and close.
    maint: Mutex<Maint>,
    /// The thread creating the next boundary's windows ahead of it (see
    /// `ahead`); a rotation holds this until it has published.
    ahead: Mutex<Option<ahead::Ahead>>,
    /// The boundary whose windows were last started ahead.
    ahead_for: AtomicI64,
    /// Set by close: threads faulting in windows a rotation or a growth
    /// made stop (see `ahead::prefault_behind`).
    stop_prefault: Arc<AtomicBool>,
    /// Writers hold the stripe of their key (see the module docs).
    stripes: Stripes,
    /// A write failed on I/O: later writes report `PreviousIo`.
    failed: Arc<AtomicBool>,
    /// When writes become durable (the stored policy, or this open's).
    policy: SyncPolicy,
    /// The write-ahead log, under the `always` and `interval` policies.
    wal: Option<Arc<Wal>>,
    /// Syncs the log every interval (`interval` policy).
    syncer: Mutex<Option<Syncer>>,
    /// The log size at which a checkpoint is due.
    checkpoint_at: u64,
    /// Set by a background checkpoint's thread when its segments are
    /// flushed: the next write commits it (see `durable`).
    flushed: Arc<AtomicBool>,
    /// Set by a sealing thread that replaced a window's file by a copy in
    /// large pages: the next write swaps it in (`swap_rewritten`).
    rewritten: Arc<AtomicBool>,
}

struct Syncer {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl Syncer {
    fn start(wal: Arc<Wal>, every: Duration) -> Syncer {
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let flag = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("timebloom-sync".into())
            .spawn(move || {
                let (m, cv) = &*flag;
                let mut stopped = m.lock();
                while !*stopped {
                    cv.wait_for(&mut stopped, every);
                    if *stopped {
                        break;
                    }
                    drop(stopped);
                    // A failure is latched in the log: the next write is
                    // refused (`PreviousIo`), and `close` reports the cause.
                    if let Err(e) = wal.sync_all() {
                        wal.keep_cause(e);
                    }
                    stopped = m.lock();
                }
            })
            .ok();
        Syncer { stop, handle }
    }

    fn stop(&mut self) {
        let (m, cv) = &*self.stop;
        *m.lock() = true;
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("dir", &self.dir)
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

const QUARANTINE: &str = "quarantine";

/// A window as messages and `Maintenance` name it: `TIER WINDOW`
/// (`1d 20261201`), the index in decimal where no label exists; a
/// fingerprint tier's one table `TIER table` (`30d:fingerprint table`), as
/// `stats` labels it (its index, 0, is no day it holds).
fn window_name(tier: &Tier, w: i64) -> String {
    if tier.is_table() {
        return format!("{tier} table");
    }
    format!(
        "{tier} {}",
        window::label(tier.span, w).unwrap_or_else(|| w.to_string())
    )
}

impl Engine {
    /// Whether [`Engine::remove`] works here: every tier is a counting or
    /// a fingerprint tier.
    pub fn supports_remove(&self) -> bool {
        self.config.tiers.iter().all(|t| t.kind != Kind::Bloom)
    }

    /// Whether the engine was opened with [`Engine::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// The configuration the engine was created with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The engine directory.
    pub fn path(&self) -> &Path {
        &self.dir
    }

    fn seg_path(&self, name: &str) -> PathBuf {
        self.dir.join(SEG_DIR).join(name)
    }

    fn now(&self) -> Result<i64> {
        self.clock.now_secs()
    }

    #[inline]
    fn hash(&self, key: &[u8]) -> KeyHash {
        hash_key(self.seed, key)
    }

    /// Writes need an engine opened for writing.
    #[inline]
    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(self.read_only_error());
        }
        Ok(())
    }

    /// The error of a write to an engine opened read-only.
    #[cold]
    fn read_only_error(&self) -> Error {
        Error::ReadOnly {
            path: self.dir.clone(),
        }
    }

    /// Writes and maintenance need an open engine whose writes never failed.
    #[inline]
    fn check_usable(&self, snap: &Snapshot) -> Result<()> {
        let log_failed = self.wal.as_ref().is_some_and(|w| w.failed());
        if self.failed.load(Ordering::Relaxed) || log_failed || snap.closed {
            return Err(Error::PreviousIo);
        }
        Ok(())
    }

    /// Lookups work as long as the engine is open, even after a write failed.
    #[inline]
    fn check_open(&self, snap: &Snapshot) -> Result<()> {
        if snap.closed {
            return Err(Error::PreviousIo);
        }
        Ok(())
    }

    /// Latches an I/O error: every later write reports `PreviousIo`.
    fn latch<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(Error::Io { .. }) = &r {
            self.failed.store(true, Ordering::Relaxed);
        }
        r
    }

    /// A lookup past its snapshot's boundary (no writer has rotated yet):
    /// the clock-jump guard applies as it would to a write, and the instant
    /// is noted as the guard's evidence that the clock moved step by step.
    /// Checked and written at most once per second of clock.
    #[cold]
    fn past_boundary(&self, snap: &Snapshot, now: i64) -> Result<()> {
        if now <= self.read_past.load(Ordering::Relaxed) {
            return Ok(());
        }
        if !self.read_only && !self.allow_clock_jump {
            self.check_clock_jump(snap, now)?;
        }
        self.read_past.fetch_max(now, Ordering::Relaxed);
        Ok(())
    }

    fn window_index(&self, span: window::Span, t: i64) -> Result<i64> {
        window::index_or_unavailable(span, t, self.config.utc_offset_secs)
    }

    /// The day holding instant `t` (days since the epoch in the configured
    /// offset, as daily windows count them): a fingerprint table's clock.
    ///
    /// The instants before the first local midnight that a negative offset
    /// puts after the epoch (1970-01-01T00:00Z to 01:00Z at -01:00) lie in
    /// local day -1, which a table's day tags cannot hold: they count as
    /// day 0, so a key recorded then is kept a little longer, never less.
    /// (Every engine reads this day at a rotation, so refusing them refused
    /// to create or write any engine at such an instant.)
    #[inline]
    fn day_of(&self, t: i64) -> Result<u32> {
        let d = self.window_index(window::Span::Day, t)?.max(0);
        u32::try_from(d).map_err(|_| Error::WindowUnavailable {
            reason: format!(
                "instant {} lies before the first day a fingerprint table knows",
                crate::clock::rfc3339(t)
            ),
        })
    }

    /// The day fingerprint tables are read and written at, for the clock
    /// reading `now`: its day, or the newest day the tables took, if that
    /// is later. A table's day tags age by this day, so after a clock that
    /// stepped back two days or more (a VM restored from a snapshot, a
    /// machine booting with a reset clock) the newest tags would read as
    /// expired: lookups would miss them and inserts reuse their slots. The
    /// engine's time for the tables stops instead, until the clock catches
    /// up, as a Bloom tier's newest window goes on taking inserts: keys
    /// recorded meanwhile are dated the newest day (kept a little longer,
    /// never a false negative).
    #[inline]
    fn table_today(&self, now: i64) -> Result<u32> {
        Ok(self
            .day_of(now)?
            .max(self.table_day.load(Ordering::Relaxed)))
    }

    /// [`Engine::table_today`] read off `snap` when it knows it (before its
    /// boundary: no calendar arithmetic on the hot path).
    #[inline]
    fn table_today_in(&self, snap: &Snapshot, now: i64) -> Result<u32> {
        match snap.table_today(now) {
            Some(day) => Ok(day),
            None => self.table_today(now),
        }
    }

    /// `now`, or the start of the tables' day when the clock stepped back
    /// behind it (see [`Engine::table_today`]).
    #[inline]
    fn table_now(&self, now: i64) -> i64 {
        let day = self.table_day.load(Ordering::Relaxed);
        if day == 0 {
            return now;
        }
        window::start(
            window::Span::Day,
            i64::from(day),
            self.config.utc_offset_secs,
        )
        .map_or(now, |start| now.max(start))
    }

    /// The window of `tier` that holds `t`; a fingerprint tier has one
    /// window for its whole life, index 0 (see `Tier::is_table`).
    fn tier_window(&self, tier: &Tier, t: i64) -> Result<i64> {
        if tier.is_table() {
            return Ok(0);
        }
        self.window_index(tier.span, t)
    }

    /// Where the live windows of `tier` begin at `now` (an instant), and
    /// where its current window ends: for a fingerprint tier, the start of
    /// the oldest day it keeps and the end of today (the day its tags
    /// age by, and its daily sweep).
    ///
    /// Measured from the tables' day when the clock stepped back behind it
    /// (see [`Engine::table_today`]), for every tier: the tier that answers
    /// `contains` is the one whose retention reaches furthest back from
    /// the newest time the engine wrote at, not from a clock behind it.
    /// So a window tier's live windows are those its newest window keeps
    /// when the clock is behind that window (its rotation expired the
    /// older ones), while its current window is still the clock's.
    fn tier_reach(&self, t: &TierState, now: i64) -> Result<(i64, Option<i64>)> {
        let (tier, off) = (&t.tier, self.config.utc_offset_secs);
        let now = self.table_now(now);
        let (span, cur, oldest) = if tier.is_table() {
            let today = i64::from(self.day_of(now)?);
            let first = today - i64::from(tier.table_days());
            (window::Span::Day, today, first)
        } else {
            let cur = self.window_index(tier.span, now)?;
            let newest = t.segments.last().map_or(cur, |s| s.window.max(cur));
            (tier.span, cur, tier.oldest_live(newest))
        };
        let start = window::start(span, oldest, off).unwrap_or(i64::MIN);
        Ok((start, window::end(span, cur, off)))
    }

    /// Closes the engine cleanly, reporting any error (dropping it does the
    /// same silently).
    pub fn close(self) -> Result<()> {
        self.close_inner()
    }

    /// Lets go of an engine inherited through `fork` (without `exec`, as
    /// Python's `multiprocessing` does by default on Linux), in the child.
    ///
    /// The child must not use or close the engine: the opening process
    /// still writes the same files, and the threads the engine started
    /// there do not exist in the child. This closes the child's copy of the
    /// directory lock, so that the parent can close and open the directory
    /// again while the child lives, and leaves everything else alone:
    /// nothing is written, no thread is joined, no file is deleted.
    /// Called in the process that opened the engine, it closes the engine
    /// as dropping it does. Dropping the engine in a child does the same
    /// as this (see `Drop`); this names the intent.
    pub fn leave_after_fork(self) {
        drop(self);
    }

    /// In a child forked from the process that opened the engine, closes
    /// the child's copy of the directory lock, as
    /// [`Engine::leave_after_fork`] does, through a shared reference: for
    /// a child that cannot take the engine out of what shares it (another
    /// thread of the parent was inside a call at the fork, and that
    /// thread's borrow never ends in the child). Nothing else is let go of
    /// until the engine is dropped. In the process that opened the engine
    /// it does nothing.
    pub fn leave_lock_after_fork(&self) {
        if std::process::id() == self.pid {
            return;
        }
        // Only this and `let_go_inherited` take the mutex, never around a
        // fork: a failed `try_lock` cannot happen, and would leave the lock.
        if let Some(mut lock) = self.lock.try_lock() {
            drop(lock.take());
        }
    }

    /// What a drop does in a process other than the one that opened the
    /// engine (a child forked from it): see [`Engine::leave_after_fork`].
    fn let_go_inherited(&mut self) {
        // The lock is the open file's, shared with the parent's copy: it
        // holds until the parent closes its own.
        drop(self.lock.get_mut().take());
        // Windows the parent created ahead of a boundary: dropped, they
        // would be deleted (see `ahead::Made`). The mutex may have been
        // held by a parent thread at the fork: `get_mut` takes no lock.
        std::mem::forget(self.ahead.get_mut().take());
        // Handles of threads that exist only in the parent: dropped, each
        // would detach a thread this process does not have, which POSIX
        // leaves undefined (glibc may free a stack record a thread of the
        // child reuses). Leaked, as the process's copy of them is.
        let m = self.maint.get_mut();
        std::mem::forget(std::mem::take(&mut m.upkeep));
        std::mem::forget(std::mem::take(&mut m.prefaulting));
        std::mem::forget(m.background.take());
        std::mem::forget(self.syncer.get_mut().take());
        // The other fields drop harmlessly: mappings are unmapped and
        // descriptors closed in this process only.
    }

    fn close_inner(&self) -> Result<()> {
        let mut m = self.maint.lock();
        let cur = self.current.load_full();
        if cur.closed {
            return Ok(());
        }
        // Every later call fails; writes in flight finish first.
        let mut closed = (*cur).clone();
        closed.closed = true;
        self.publish(closed);
        drop(self.stripes.lock_all());
        if self.read_only {
            return Ok(());
        }
        // Windows created ahead of a boundary not reached: deleted.
        drop(ahead::take(&mut self.ahead.lock(), &mut m.prefaulting));
        self.stop_prefault.store(true, Ordering::Relaxed);
        // The threads creating windows ahead or faulting them in hold
        // their own references to the files: joined (each ends within one
        // step once stopped), so that none is still open or mapped, by a
        // thread of this engine, once close returns.
        for h in m.prefaulting.drain(..) {
            let _ = h.join();
        }
        if let Some(mut syncer) = self.syncer.lock().take() {
            syncer.stop();
        }
        let sealed = self.join_upkeep(&mut m);
        // A checkpoint running beside the writers stops touching the files
        // before anything else does.
        let flushed = m
            .background
            .take()
            .map_or(Ok(None), |(_, h)| durable::join_flush(h, &self.dir));
        // A failed background checkpoint latched the engine: its cause,
        // rather than `PreviousIo`.
        if let Some(e) = m.failure.take() {
            return Err(e);
        }
        flushed?;
        if self.failed.load(Ordering::Relaxed) || self.wal.as_ref().is_some_and(|w| w.failed()) {
            // Nothing is written after an I/O error; the caller learns that
            // the last writes may not have reached the disk, and why when
            // no call was told (a failed tick of the `interval` syncer).
            return Err(self
                .wal
                .as_ref()
                .and_then(|w| w.take_cause())
                .unwrap_or(Error::PreviousIo));
        }
        sealed?;
        // Everything logged reaches the segments; the log restarts empty.
        let logged_since = match &self.wal {
            Some(w) => self.latch(w.next_lsn())? != m.checkpoint_lsn,
            None => false,
        };
        if logged_since {
            let r = self.checkpoint(&mut m, &cur);
            self.latch(r)?;
        }
        for t in &cur.tiers {
            let newest = t.segments.len().saturating_sub(1);
            for (i, seg) in t.segments.iter().enumerate() {
                for s in &seg.subs {
                    if i == newest {
                        s.close()?;
                    } else {
                        s.seal()?;
                    }
                }
            }
        }
        Ok(())
    }
}

/// Dropping closes the engine ([`Engine::close`], errors unreported), in
/// the process that opened it. In another (a child forked from it, without
/// `exec`), it only lets go, as [`Engine::leave_after_fork`] does: a close
/// there would checkpoint, delete and seal the parent's files under it, and
/// wait for threads that exist only in the parent.
impl Drop for Engine {
    fn drop(&mut self) {
        if std::process::id() != self.pid {
            self.let_go_inherited();
            return;
        }
        let _ = self.close_inner();
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs;
    use std::time::{Duration, UNIX_EPOCH};

    use super::*;
    use crate::clock::{ManualClock, Options};

    /// Every file below `dir`, with its contents.
    fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
        let mut out = BTreeMap::new();
        let mut todo = vec![dir.to_path_buf()];
        while let Some(d) = todo.pop() {
            for entry in fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    todo.push(path);
                } else {
                    out.insert(path.clone(), fs::read(&path).unwrap());
                }
            }
        }
        out
    }

    /// An engine dropped in a process other than the one that opened it
    /// (a child forked without `exec`; here the process id it records is
    /// changed, as a fork changes the process's) writes, deletes and seals
    /// none of the files the opening process goes on using. A close there
    /// checkpointed (a new manifest and log file) and deleted the window
    /// created ahead of the next boundary, which the parent's rotation then
    /// named in its manifest.
    #[test]
    fn a_drop_in_a_forked_child_leaves_the_files_alone() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("e.tb");
        // A minute before a midnight: a write creates the next window ahead.
        let midnight = 1_767_571_200 + 86_400;
        let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(midnight - 60));
        let cfg = Config {
            tiers: vec![Tier::daily(3)],
            expected_items_per_day: 1_000,
            fpr: 0.01,
            ..Config::default()
        };
        let opts = Options::default()
            .clock(clock.clone())
            .sync(SyncPolicy::Always);
        let mut e = Engine::create_with(&dir, cfg, opts).unwrap();
        let segs = |dir: &Path| fs::read_dir(dir.join("seg")).unwrap().count();
        let before = segs(&dir);
        for i in 0..100u32 {
            e.insert(format!("https://example.com/{i}").as_bytes())
                .unwrap();
        }
        let made = (0..3000).any(|_| {
            std::thread::sleep(Duration::from_millis(10));
            segs(&dir) > before
        });
        assert!(made, "no window was created ahead of the boundary");
        // Let the thread that made it finish faulting it in.
        std::thread::sleep(Duration::from_millis(300));
        let kept = files(&dir);
        e.pid = e.pid.wrapping_add(1);
        drop(e);
        let after = files(&dir);
        assert_eq!(
            kept.keys().collect::<Vec<_>>(),
            after.keys().collect::<Vec<_>>(),
            "files made or deleted"
        );
        for (path, bytes) in &kept {
            assert!(after[path] == *bytes, "{} changed", path.display());
        }
    }
}
