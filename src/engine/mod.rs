//! The engine: opens and recovers a directory, answers inserts and lookups,
//! rotates windows, expires old ones, and reports stats.
//!
//! The work is split by responsibility:
//! - this file: the engine value, create, open and recovery of the files,
//!   close;
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

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use arc_swap::ArcSwap;
use parking_lot::{Condvar, Mutex};

use crate::chain::Segment;
use crate::clock::{Options, TimeSource};
use crate::config::{Config, SyncPolicy, Tier};
use crate::error::{Error, Result};
use crate::filter::{Kind, Stripes};
use crate::hash::{hash_key, random_seed, seed_fingerprint, KeyHash};
use crate::manifest::Manifest;
use crate::segment::{Identity, SubFilter};
use crate::wal::Wal;
use crate::window;

mod ahead;
mod durable;
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
    /// Seals running in the background (see `rotate`), joined before
    /// anything that needs them finished.
    sealing: Vec<JoinHandle<Result<()>>>,
    /// Threads faulting in new windows (`ahead::prefault_behind`), stopped
    /// and joined before an expiry deletes files (see `rotate`).
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
    lock: Mutex<Option<File>>,
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
    seen: AtomicI64,
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
    /// Per tier (in the configuration's order), the newest window a
    /// degraded open went on without: the manifest named it, so the engine
    /// had crossed into it, and the clock-jump guard measures from it as
    /// from a window it holds.
    lost_newest: Vec<Option<i64>>,
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

fn lock_dir(dir: &Path) -> Result<File> {
    let path = dir.join(LOCK);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| Error::io("open lock file", &path, e))?;
    match f.try_lock() {
        Ok(()) => Ok(f),
        Err(fs::TryLockError::WouldBlock) => Err(Error::Locked {
            path: dir.to_path_buf(),
        }),
        Err(fs::TryLockError::Error(e)) => Err(Error::io("lock", &path, e)),
    }
}

const QUARANTINE: &str = "quarantine";

/// Moves a segment file that failed its checks to `quarantine/`, so that
/// it is never used again yet kept for inspection; returns where it is.
/// `None` when the error is not about the file's bytes (an I/O error), so
/// the open fails as it is. A read-only open moves nothing.
fn quarantine(dir: &Path, name: &str, err: &Error, read_only: bool) -> Result<Option<PathBuf>> {
    let from = dir.join(SEG_DIR).join(name);
    let to = dir.join(QUARANTINE).join(name);
    let missing =
        matches!(err, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound);
    if missing && to.exists() {
        return Ok(Some(to)); // moved by an earlier open
    }
    if !err.is_damage() {
        return Ok(None);
    }
    if read_only {
        return Ok(None); // never moves anything; see `open_inner`
    }
    let qdir = dir.join(QUARANTINE);
    // A `quarantine/` made here is named durably before a file moves into
    // it: lost to a power loss, it took the file, which `seg/` no longer
    // named, and every later open was refused with "not found".
    let made = !qdir.is_dir();
    fs::create_dir_all(&qdir).map_err(|e| Error::io("create directory", &qdir, e))?;
    if made {
        crate::file::fsync_dir(dir)?;
    }
    // A window made anew after an earlier quarantine has the same file
    // names: a second damaged copy is kept beside the first (`NAME.2`, ...),
    // not renamed over it.
    let (mut to, mut n) = (to, 1u64);
    while to.exists() {
        n += 1;
        to = qdir.join(format!("{name}.{n}"));
    }
    crate::file::check("quarantine segment", &from)?;
    fs::rename(&from, &to).map_err(|e| Error::io("quarantine segment", &from, e))?;
    crate::file::fsync_dir(&qdir)?;
    crate::file::fsync_dir(&dir.join(SEG_DIR))?;
    Ok(Some(to))
}

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

/// Makes `dir` (and missing parents); true when this call made `dir` itself.
///
/// Each missing parent is made and its entry synced (an fsync of the
/// directory above it): the create syncs the entry of `dir` in its parent,
/// and a parent whose own entry a power loss took would take the engine
/// with it.
fn make_dir(dir: &Path) -> Result<bool> {
    let mut missing = Vec::new();
    let mut at = dir.parent().filter(|p| !p.as_os_str().is_empty());
    while let Some(p) = at.filter(|p| !p.exists()) {
        missing.push(p);
        at = p.parent().filter(|p| !p.as_os_str().is_empty());
    }
    for p in missing.into_iter().rev() {
        match fs::create_dir(p) {
            Ok(()) => {
                let above = p
                    .parent()
                    .filter(|a| !a.as_os_str().is_empty())
                    .unwrap_or(Path::new("."));
                crate::file::fsync_dir(above)?;
            }
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && p.is_dir() => {}
            Err(e) => return Err(Error::io("create directory", p, e)),
        }
    }
    match fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(false),
        // A file given where the engine's directory goes (arguments
        // swapped: `filter-new urls.txt`): said so, not just "File exists".
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            let why = "a file is in the way: an engine is a directory";
            let e = std::io::Error::new(e.kind(), why);
            Err(Error::io("create directory", dir, e))
        }
        Err(e) => Err(Error::io("create directory", dir, e)),
    }
}

/// Refuses a directory that holds anything but a `LOCK`, an empty `seg/`
/// and a `MANIFEST.tmp` (left by a create that died before its commit).
fn check_empty(dir: &Path) -> Result<()> {
    let list = |d: &Path| -> Result<Vec<String>> {
        let mut names = Vec::new();
        for e in fs::read_dir(d).map_err(|e| Error::io("list directory", d, e))? {
            let e = e.map_err(|e| Error::io("list directory", d, e))?;
            names.push(e.file_name().to_string_lossy().into_owned());
        }
        names.sort();
        Ok(names)
    };
    // A MANIFEST.tmp without a MANIFEST is a create that died while
    // writing its first manifest; it is replaced.
    let tmp = format!("{MANIFEST}.tmp");
    let mut found: Vec<String> = list(dir)?
        .into_iter()
        .filter(|n| n != LOCK && n != SEG_DIR && *n != tmp)
        .collect();
    let seg = dir.join(SEG_DIR);
    if seg.is_dir() {
        found.extend(list(&seg)?.into_iter().map(|n| format!("{SEG_DIR}/{n}")));
    } else if seg.exists() {
        found.push(SEG_DIR.to_string());
    }
    if found.is_empty() {
        return Ok(());
    }
    let more = found.len().saturating_sub(5);
    found.truncate(5);
    if more > 0 {
        found.push(format!("and {more} more"));
    }
    Err(Error::NotEmpty {
        path: dir.to_path_buf(),
        found,
    })
}

impl Engine {
    /// Creates a new engine in `dir` (created if missing) with the system clock.
    pub fn create(dir: impl AsRef<Path>, config: Config) -> Result<Engine> {
        Engine::create_with(dir, config, Options::default())
    }

    /// Creates a new engine with explicit [`Options`].
    ///
    /// `dir` must be new or empty (an empty `seg/` and a `LOCK` left by an
    /// earlier failed create are accepted); anything else is
    /// [`Error::NotEmpty`] and nothing is touched. Of several processes or
    /// threads creating the same directory at once, exactly one succeeds;
    /// the others get [`Error::Locked`] or [`Error::AlreadyExists`] and
    /// change nothing. A create that fails removes only what it made, while
    /// it still holds the directory lock.
    pub fn create_with(dir: impl AsRef<Path>, config: Config, options: Options) -> Result<Engine> {
        let dir = dir.as_ref();
        config.validate_new()?;
        let now = options.clock.now_secs()?;
        if dir.join(MANIFEST).exists() {
            return Err(Error::AlreadyExists {
                path: dir.to_path_buf(),
            });
        }
        let made_dir = make_dir(dir)?;
        let lock = lock_dir(dir)?;
        // From here on this call holds the lock: whatever it finds, no other
        // timebloom process is writing here.
        if dir.join(MANIFEST).exists() {
            return Err(Error::AlreadyExists {
                path: dir.to_path_buf(),
            });
        }
        check_empty(dir)?;
        // The lock travels into the engine; a second descriptor of the same
        // open file keeps it held while a failed create cleans up.
        let guard = lock
            .try_clone()
            .map_err(|e| Error::io("duplicate lock descriptor", dir.join(LOCK), e))?;
        let made_seg = !dir.join(SEG_DIR).exists();
        let r = (|| {
            if made_seg {
                fs::create_dir(dir.join(SEG_DIR))
                    .map_err(|e| Error::io("create directory", dir.join(SEG_DIR), e))?;
            }
            let mut engine = Engine::assemble(
                dir,
                Some(lock),
                false,
                random_seed(),
                config,
                options,
                Vec::new(),
                0,
                Vec::new(),
                0,
            );
            // The first manifest (no windows yet) is the commit point of the
            // create, written before any other file: a create killed after
            // it leaves an engine that opens (the open makes the windows and
            // deletes what the manifest does not name); one killed before it
            // leaves only what `check_empty` accepts (LOCK, an empty seg/, a
            // MANIFEST.tmp), so the next create goes ahead.
            {
                let m = engine.maint.lock();
                engine.store_manifest(&m, &engine.current.load())?;
            }
            engine.start_durability(false, false)?;
            engine.maintain_at(now, true, false)?;
            // The new directory's entry in its parent, and the engine's own
            // entries, reach the disk before the create returns.
            crate::file::fsync_dir(dir)?;
            if made_dir {
                let parent = match dir.parent() {
                    Some(p) if !p.as_os_str().is_empty() => p,
                    _ => Path::new("."),
                };
                crate::file::fsync_dir(parent)?;
            }
            Ok(engine)
        })();
        if r.is_err() {
            // The engine (if any) is dropped, but `guard` still holds the lock.
            if made_dir {
                let _ = fs::remove_dir_all(dir);
            } else {
                // `check_empty` saw no engine files and an empty `seg/`:
                // every file there now is this call's.
                let _ = fs::remove_file(dir.join(MANIFEST));
                let _ = fs::remove_file(dir.join(MANIFEST).with_extension("tmp"));
                if let Ok(entries) = fs::read_dir(dir.join(SEG_DIR)) {
                    for e in entries.flatten() {
                        let _ = fs::remove_file(e.path());
                    }
                }
                if made_seg {
                    let _ = fs::remove_dir(dir.join(SEG_DIR));
                }
                // `check_empty` saw no `wal/`: the log and boot files this
                // call made under a logged policy. Left behind, the
                // directory was refused by the next create (not empty) and
                // by open (no manifest).
                let _ = fs::remove_dir_all(dir.join(WAL_DIR));
            }
        }
        drop(guard);
        r
    }

    /// Whether [`Engine::remove`] works here: every tier is a counting or
    /// a fingerprint tier.
    pub fn supports_remove(&self) -> bool {
        self.config.tiers.iter().all(|t| t.kind != Kind::Bloom)
    }

    /// Opens the engine in `dir` with the system clock; its configuration
    /// comes from its manifest.
    pub fn open(dir: impl AsRef<Path>) -> Result<Engine> {
        Engine::open_with(dir, Options::default())
    }

    /// Opens an existing engine with explicit [`Options`].
    ///
    /// Opening maps the segment files; it reads only their headers (and the
    /// bodies of open segments that were not closed cleanly, to recount
    /// their fill). Files in `seg/` that the manifest does not name are
    /// leftovers of an interrupted rotation and are deleted.
    pub fn open_with(dir: impl AsRef<Path>, options: Options) -> Result<Engine> {
        Engine::open_inner(dir.as_ref(), options, false)
    }

    /// Opens an existing engine for lookups only, with the system clock.
    ///
    /// A read-only engine never writes a byte: it takes no lock (a writer
    /// may keep running; the read-only engine sees the segments named by
    /// the manifest at open, and the writer's later inserts into them, but
    /// for a backfill into a sealed window the writer copied into large
    /// pages after this open: docs/operations.md, "Read-only opens"),
    /// never rotates, expires or recounts, and works on read-only media.
    /// A lookup at an instant past some windows' retention does not read
    /// them, but their files stay. Writes return [`Error::ReadOnly`].
    ///
    /// ```
    /// use timebloom::{Config, Engine, Error, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let path = dir.path().join("crawl.tb");
    /// let writer = Engine::create(&path, Config {
    ///     tiers: vec![Tier::daily(7)],
    ///     expected_items_per_day: 1_000,
    ///     ..Config::default()
    /// })?;
    /// writer.insert(b"https://example.com/a")?;
    /// // Beside the running writer: no lock, no write.
    /// let reader = Engine::open_read_only(&path)?;
    /// assert!(reader.contains(b"https://example.com/a")?);
    /// assert!(matches!(reader.insert(b"x"), Err(Error::ReadOnly { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn open_read_only(dir: impl AsRef<Path>) -> Result<Engine> {
        Engine::open_read_only_with(dir, Options::default())
    }

    /// [`Engine::open_read_only`] with explicit [`Options`].
    pub fn open_read_only_with(dir: impl AsRef<Path>, options: Options) -> Result<Engine> {
        let dir = dir.as_ref();
        // A writer may replace the manifest and delete the files it no longer
        // names between our reading the one and mapping the other: read again.
        let mut tries = 0;
        loop {
            match Engine::open_inner(dir, options.clone(), true) {
                Err(Error::Io { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound && tries < 5 =>
                {
                    tries += 1;
                }
                r => return r,
            }
        }
    }

    /// Whether the engine was opened with [`Engine::open_read_only`].
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    fn open_inner(dir: &Path, options: Options, read_only: bool) -> Result<Engine> {
        if !dir.join(MANIFEST).exists() {
            return Err(Error::NotFound {
                path: dir.to_path_buf(),
            });
        }
        let lock = if read_only {
            None
        } else {
            Some(lock_dir(dir)?)
        };
        let manifest = Manifest::load(&dir.join(MANIFEST))?.ok_or_else(|| Error::NotFound {
            path: dir.to_path_buf(),
        })?;
        let seed_fp = seed_fingerprint(manifest.seed);
        let now = options.clock.now_secs()?;
        // Windows the clock says have expired (the rotation below drops
        // them): a file of one that is missing was deleted by the expiry
        // of a writer whose manifest this is not the latest of (a copy that
        // took MANIFEST before seg/, docs/operations.md, "Backup"). Nothing
        // reads such a window, so it is left out rather than refusing the
        // directory.
        let offset = manifest.config.utc_offset_secs;
        let expired_at = match options.expired_at {
            Some(t) => crate::clock::instant(t)?,
            None => now,
        };
        let expired = |tier: &Tier, w: i64| {
            !tier.is_table()
                && window::index(tier.span, expired_at, offset)
                    .is_some_and(|c| w < tier.oldest_live(c))
        };
        let mut tiers: Vec<Vec<Segment>> =
            manifest.config.tiers.iter().map(|_| Vec::new()).collect();
        let mut lost = Vec::new();
        let mut damaged = Vec::new();
        let mut unchecked = Vec::new();
        // The entries of the windows left out: the manifest stops naming
        // their files, so the files of such a window that opened (or were
        // not tried) are leftovers too, deleted below. Kept, the first file
        // of a lost open window would take the name of the one the open
        // then makes for it.
        let mut left_out = Vec::new();
        let mut lost_newest: Vec<Option<i64>> = vec![None; manifest.config.tiers.len()];
        let mut note_lost = |tier: usize, window: i64| {
            if !manifest.config.tiers[tier].is_table() {
                let w = &mut lost_newest[tier];
                *w = Some(w.map_or(window, |n| n.max(window)));
            }
        };
        'segments: for e in &manifest.segments {
            let tier = manifest.config.tiers[e.tier];
            let mut subs = Vec::with_capacity(e.files.len());
            for (i, f) in e.files.iter().enumerate() {
                let id = Identity {
                    span: tier.span,
                    window: e.window,
                    index: e.first + i as u32,
                };
                let path = dir.join(SEG_DIR).join(f);
                let opened = if read_only {
                    SubFilter::open_read_only(&path, id, seed_fp, options.verify_on_open)
                } else {
                    SubFilter::open(&path, id, seed_fp, options.verify_on_open)
                };
                let opened = opened.and_then(|sub| {
                    if sub.header().kind != tier.kind {
                        return Err(Error::corrupt(
                            &path,
                            "segment kind differs from its tier's kind",
                        ));
                    }
                    Ok(sub)
                });
                match opened {
                    Ok(sub) => subs.push(Arc::new(sub)),
                    Err(Error::Io { source, .. })
                        if source.kind() == std::io::ErrorKind::NotFound
                            && expired(&tier, e.window) =>
                    {
                        left_out.push((e.tier, e.window));
                        continue 'segments;
                    }
                    Err(err) => {
                        let window = window_name(&tier, e.window);
                        // A file the manifest names and the disk lacks (not
                        // moved to quarantine by an earlier open: deleted,
                        // or left out of a copy) is damage to a degraded
                        // open, which goes on without its window; a plain
                        // open fails with "not found" as it is. A reader
                        // beside a writer first checks that the manifest on
                        // disk is still the one it read: a writer replaces
                        // it before it deletes what it no longer names, and
                        // the reader then reads again (`open_read_only_with`).
                        // A file an earlier open moved to quarantine is
                        // damage to a read-only degraded open (`verify`)
                        // too, which would otherwise leave the window out
                        // without a word.
                        let not_found = matches!(&err, Error::Io { source, .. }
                            if source.kind() == std::io::ErrorKind::NotFound);
                        let moved = dir.join(QUARANTINE).join(f);
                        let quarantined = not_found && moved.exists();
                        let missing = not_found
                            && !quarantined
                            && (!read_only
                                || Manifest::load(&dir.join(MANIFEST))
                                    .is_ok_and(|m| m.as_ref() == Some(&manifest)));
                        let err = match (missing, quarantined) {
                            _ if !options.degraded => err,
                            (true, _) => {
                                Error::corrupt(&path, "missing, though the manifest names it")
                            }
                            (_, true) if read_only => Error::corrupt(
                                &moved,
                                "moved here from seg/ by an open that found it damaged",
                            ),
                            _ => err,
                        };
                        if missing && options.degraded && !read_only {
                            lost.push(window);
                            note_lost(e.tier, e.window);
                            left_out.push((e.tier, e.window));
                            continue 'segments;
                        }
                        if read_only && err.is_damage() && options.degraded {
                            // A read-only open moves nothing; it only leaves
                            // the window out.
                            lost.push(window);
                            damaged.push(err);
                            // The window's other files, for `verify_each`
                            // to check too: it names every damaged one, not
                            // only the one that left the window out.
                            unchecked.extend(
                                e.files.iter().enumerate().filter(|&(j, _)| j != i).map(
                                    |(j, f)| {
                                        let id = Identity {
                                            index: e.first + j as u32,
                                            ..id
                                        };
                                        (dir.join(SEG_DIR).join(f), id)
                                    },
                                ),
                            );
                            left_out.push((e.tier, e.window));
                            continue 'segments;
                        }
                        let Some(moved) = quarantine(dir, f, &err, read_only)? else {
                            return Err(err);
                        };
                        if !options.degraded {
                            return Err(Error::Quarantined {
                                path: moved,
                                window,
                                reason: err.to_string(),
                            });
                        }
                        // Degraded: go on without the whole window.
                        lost.push(window);
                        note_lost(e.tier, e.window);
                        left_out.push((e.tier, e.window));
                        continue 'segments;
                    }
                }
            }
            tiers[e.tier].push(Segment {
                window: e.window,
                subs,
            });
        }
        for t in &mut tiers {
            t.sort_by_key(|s| s.window);
        }
        let named: Vec<&str> = manifest
            .segments
            .iter()
            .filter(|e| !left_out.contains(&(e.tier, e.window)))
            .flat_map(|e| e.files.iter().map(String::as_str))
            .collect();
        let assume_power_loss = options.assume_power_loss;
        let degraded = options.degraded;
        let mut engine = Engine::assemble(
            dir,
            lock,
            read_only,
            manifest.seed,
            manifest.config.clone(),
            options,
            tiers,
            manifest.generation,
            lost,
            manifest.checkpoint_lsn,
        );
        engine.damaged = damaged;
        engine.unchecked = unchecked;
        engine.lost_newest = lost_newest;
        // The tables' newest day: the manifest's, or (written by a build
        // that did not record it) the latest sweep's.
        let swept = engine
            .current
            .load()
            .tiers
            .iter()
            .filter(|t| t.tier.is_table())
            .flat_map(|t| t.segments.iter().flat_map(|seg| seg.subs.iter()))
            .filter_map(|s| s.swept())
            .max()
            .unwrap_or(0);
        engine
            .table_day
            .store(manifest.table_day.max(swept), Ordering::Relaxed);
        if !read_only {
            let r = (|| {
                // The clock-jump guard before anything is written: a
                // recovery with a clock far ahead would sweep the
                // fingerprint tables it restores against that day (clearing
                // them, and moving their day there, so that the guard at
                // the rotation below saw no jump).
                if !engine.allow_clock_jump {
                    engine.check_clock_jump(&engine.current.load(), now)?;
                    if !left_out.is_empty() && expired_at != now {
                        engine.check_clock_jump(&engine.current.load(), expired_at)?;
                    }
                }
                if !left_out.is_empty() {
                    // The manifest stops naming the files of the windows
                    // left out (lost, or expired and missing).
                    let m = engine.maint.lock();
                    engine.store_manifest(&m, &engine.current.load())?;
                }
                engine.remove_unnamed_files(&named)?;
                engine.start_durability(assume_power_loss, degraded)
            })();
            if r.is_err() {
                // Until recovery is done, the bodies may lack what the log
                // holds: the engine is dropped without its close, which
                // would seal every window but the newest as it is (the
                // next recovery then skips them) and mark the rest clean.
                engine.failed.store(true, Ordering::Relaxed);
            }
            r?;
        }
        engine.maintain_at(now, engine.allow_clock_jump, false)?;
        Ok(engine)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        dir: &Path,
        lock: Option<File>,
        read_only: bool,
        seed: u64,
        config: Config,
        options: Options,
        segments: Vec<Vec<Segment>>,
        generation: u64,
        lost: Vec<String>,
        checkpoint_lsn: u64,
    ) -> Engine {
        let policy = options.sync.unwrap_or(config.sync);
        let tiers = config
            .tiers
            .iter()
            .zip(segments.into_iter().chain(std::iter::repeat_with(Vec::new)))
            .map(|(t, segments)| TierState {
                tier: *t,
                code: t.code(),
                segments,
                day: None,
            })
            .collect();
        Engine {
            dir: dir.to_path_buf(),
            lock: Mutex::new(lock),
            pid: std::process::id(),
            read_only,
            max_clock_jump: options.max_clock_jump,
            allow_clock_jump: options.allow_clock_jump,
            seed,
            config,
            clock: options.clock,
            current: ArcSwap::from_pointee(Snapshot::empty(tiers)),
            generation: AtomicU64::new(0),
            seen: AtomicI64::new(i64::MIN),
            table_day: Arc::new(AtomicU32::new(0)),
            manifest_generation: AtomicU64::new(generation),
            lost,
            damaged: Vec::new(),
            unchecked: Vec::new(),
            unrestored: Vec::new(),
            lost_newest: Vec::new(),
            maint: Mutex::new(Maint {
                checkpoint_lsn,
                sealing: Vec::new(),
                prefaulting: Vec::new(),
                background: None,
                failure: None,
            }),
            checkpoint_at: options
                .checkpoint_log_bytes
                .unwrap_or(crate::wal::CHECKPOINT_AT),
            flushed: Arc::new(AtomicBool::new(false)),
            rewritten: Arc::new(AtomicBool::new(false)),
            stripes: Stripes::default(),
            failed: Arc::new(AtomicBool::new(false)),
            policy,
            wal: None,
            syncer: Mutex::new(None),
            ahead: Mutex::new(None),
            ahead_for: AtomicI64::new(i64::MIN),
            stop_prefault: Arc::new(AtomicBool::new(false)),
        }
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

    fn remove_unnamed_files(&self, named: &[&str]) -> Result<()> {
        let seg = self.dir.join(SEG_DIR);
        let entries = fs::read_dir(&seg).map_err(|e| Error::io("list directory", &seg, e))?;
        let mut removed = false;
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list directory", &seg, e))?;
            let name = entry.file_name();
            if !named.iter().any(|n| name.to_str() == Some(n)) && entry.path().is_file() {
                crate::file::check("remove leftover file", &entry.path())?;
                fs::remove_file(entry.path())
                    .map_err(|e| Error::io("remove leftover file", entry.path(), e))?;
                removed = true;
            }
        }
        let tmp = self.dir.join(MANIFEST).with_extension("tmp");
        if tmp.exists() {
            fs::remove_file(&tmp).map_err(|e| Error::io("remove leftover file", &tmp, e))?;
        }
        if removed {
            crate::file::fsync_dir(&seg)?;
        }
        Ok(())
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
        if now <= self.seen.load(Ordering::Relaxed) {
            return Ok(());
        }
        if !self.read_only && !self.allow_clock_jump {
            self.check_clock_jump(snap, now)?;
        }
        self.seen.fetch_max(now, Ordering::Relaxed);
        Ok(())
    }

    fn window_index(&self, span: window::Span, t: i64) -> Result<i64> {
        window::index(span, t, self.config.utc_offset_secs).ok_or_else(|| {
            Error::WindowUnavailable {
                reason: format!("no {span:?} window holds instant {t}"),
            }
        })
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
            reason: format!("instant {t} lies before the first day a fingerprint table knows"),
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
        std::mem::forget(std::mem::take(&mut m.sealing));
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
        drop(ahead::take(&mut self.ahead.lock()));
        self.stop_prefault.store(true, Ordering::Relaxed);
        if let Some(mut syncer) = self.syncer.lock().take() {
            syncer.stop();
        }
        let sealed = self.join_seals(&mut m);
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
