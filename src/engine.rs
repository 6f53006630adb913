//! The engine: opens and recovers a directory, answers inserts and lookups,
//! rotates windows, expires old ones, and reports stats.
//!
//! Concurrency: the segment list sits behind a read-write lock. Inserts and
//! lookups take it shared; rotation, expiry, chain growth and unsealing take
//! it exclusive for the few file operations they need. Lookups read the
//! mapped words with plain atomic loads. Every write to them happens under
//! the engine's one writer lock (`filter::WriteLock`), which also makes
//! check-and-insert atomic: of several threads inserting the same new key,
//! exactly one is told it was new. A key that every open window holds
//! already (most keys of a crawl) is answered without the writer lock, and
//! a batch takes it once per group of keys. See docs/design.md,
//! "Concurrency".

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::time::{Duration, SystemTime};

use std::sync::Arc;

use parking_lot::{Condvar, Mutex, RwLock};

use crate::chain::{any_contains, Lookup, Segment, MAX_GROUP};
use crate::clock::{instant, Options, TimeSource};
use crate::config::{Config, SyncPolicy, Tier};
use crate::error::{Error, Result};
use crate::filter::{sizing, Exclusive, Kind, WriteLock};
use crate::hash::{hash_key, random_seed, seed_fingerprint, KeyHash};
use crate::manifest::{file_name, Manifest, SegmentEntry};
use crate::segment::{Identity, SubFilter};
use crate::stats::{Maintenance, SegmentStats, Stats, TierStats};
use crate::wal::{self, Op, Wal};
use crate::window;

const MANIFEST: &str = "MANIFEST";
const LOCK: &str = "LOCK";
const SEG_DIR: &str = "seg";
const WAL_DIR: &str = "wal";
/// The boot the engine was last opened for writing in (see `wal::boot_id`).
const BOOT: &str = "BOOT";
/// Sub-filters one segment may grow to; at growth factor 2 that is far more
/// keys than any disk holds.
const MAX_CHAIN: usize = 64;

struct TierState {
    tier: Tier,
    code: String,
    /// Live segments, oldest window first; the last one takes inserts.
    segments: Vec<Segment>,
}

struct Live {
    tiers: Vec<TierState>,
    generation: u64,
    /// The write-ahead log position of the last checkpoint (see `wal`).
    checkpoint_lsn: u64,
    /// Windows left out at a degraded open (`TIER WINDOW`).
    lost: Vec<String>,
    /// The tier whose live windows reach furthest back: `contains` reads it alone.
    full_tier: usize,
    closed: bool,
}

/// An open timebloom engine directory.
///
/// `Engine` is `Send + Sync`: share it between threads with an `Arc`.
/// Dropping it closes it cleanly; [`Engine::close`] does the same and
/// reports errors.
pub struct Engine {
    dir: PathBuf,
    /// The exclusive directory lock; `None` for a read-only engine.
    _lock: Option<File>,
    /// Opened with [`Engine::open_read_only`]: nothing is ever written.
    read_only: bool,
    /// How far the clock may step forward by itself (see `Options`).
    max_clock_jump: Option<Duration>,
    allow_clock_jump: bool,
    seed: u64,
    config: Config,
    clock: TimeSource,
    state: RwLock<Live>,
    /// Serializes every write to segment words (see the module docs).
    writer: WriteLock,
    /// The earliest instant at which some tier's window ends.
    next_boundary: AtomicI64,
    failed: AtomicBool,
    /// When writes become durable (the stored policy, or this open's).
    policy: SyncPolicy,
    /// The write-ahead log, under the `always` and `interval` policies.
    wal: Option<Arc<Wal>>,
    /// Syncs the log every interval (`interval` policy).
    syncer: Mutex<Option<Syncer>>,
}

/// The background thread of the `interval` policy.
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
                    // A failure is latched in the log: the next write reports it.
                    let _ = wal.sync_appended();
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
    fs::create_dir_all(&qdir).map_err(|e| Error::io("create directory", &qdir, e))?;
    crate::file::check("quarantine segment", &from)?;
    fs::rename(&from, &to).map_err(|e| Error::io("quarantine segment", &from, e))?;
    crate::file::fsync_dir(&qdir)?;
    crate::file::fsync_dir(&dir.join(SEG_DIR))?;
    Ok(Some(to))
}

/// A window as messages and `Maintenance` name it: `TIER WINDOW`
/// (`1d 20261201`), the index in decimal where no label exists.
fn window_name(tier: &Tier, w: i64) -> String {
    format!(
        "{tier} {}",
        window::label(tier.span, w).unwrap_or_else(|| w.to_string())
    )
}

/// Msyncs every open body and rewrites its header (sealed ones need
/// nothing).
fn flush_bodies(st: &mut Live) -> Result<()> {
    for t in &mut st.tiers {
        for seg in &mut t.segments {
            for s in &mut seg.subs {
                s.flush()?;
            }
        }
    }
    Ok(())
}

/// Makes `dir` (and missing parents); true when this call made `dir` itself.
fn make_dir(dir: &Path) -> Result<bool> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fs::create_dir_all(parent).map_err(|e| Error::io("create directory", parent, e))?;
    }
    match fs::create_dir(dir) {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && dir.is_dir() => Ok(false),
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
        config.validate()?;
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
            );
            // The first manifest (no windows yet) is the commit point of the
            // create, written before any other file: a create killed after
            // it leaves an engine that opens (the open makes the windows and
            // deletes what the manifest does not name); one killed before it
            // leaves only what `check_empty` accepts (LOCK, an empty seg/, a
            // MANIFEST.tmp), so the next create goes ahead.
            {
                let mut st = engine.state.write();
                engine.store_manifest(&mut st)?;
            }
            engine.start_durability(false, false)?;
            engine.maintain_at(now, true)?;
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
            }
        }
        drop(guard);
        r
    }

    /// Whether [`Engine::remove`] works here: every tier is a counting tier.
    pub fn supports_remove(&self) -> bool {
        self.config.tiers.iter().all(|t| t.kind == Kind::Counting)
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
    /// the manifest at open, and the writer's later inserts into them),
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
        let mut tiers: Vec<Vec<Segment>> =
            manifest.config.tiers.iter().map(|_| Vec::new()).collect();
        let mut lost = Vec::new();
        'segments: for e in &manifest.segments {
            let tier = manifest.config.tiers[e.tier];
            let mut subs = Vec::with_capacity(e.files.len());
            for (i, f) in e.files.iter().enumerate() {
                let id = Identity {
                    span: tier.span,
                    window: e.window,
                    index: i as u32,
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
                    Ok(sub) => subs.push(sub),
                    Err(err) => {
                        let window = window_name(&tier, e.window);
                        if read_only && err.is_damage() && options.degraded {
                            // A read-only open moves nothing; it only leaves
                            // the window out.
                            lost.push(window);
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
            .flat_map(|e| e.files.iter().map(String::as_str))
            .collect();
        let now = options.clock.now_secs()?;
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
        );
        engine.state.get_mut().checkpoint_lsn = manifest.checkpoint_lsn;
        engine.state.get_mut().lost = lost;
        if !read_only {
            if !engine.state.get_mut().lost.is_empty() {
                // The manifest stops naming the lost windows' files.
                let mut st = engine.state.write();
                engine.store_manifest(&mut st)?;
            }
            engine.remove_unnamed_files(&named)?;
            engine.start_durability(assume_power_loss, degraded)?;
        }
        engine.maintain_at(now, engine.allow_clock_jump)?;
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
            })
            .collect();
        Engine {
            dir: dir.to_path_buf(),
            _lock: lock,
            read_only,
            max_clock_jump: options.max_clock_jump,
            allow_clock_jump: options.allow_clock_jump,
            seed,
            config,
            clock: options.clock,
            state: RwLock::new(Live {
                tiers,
                generation,
                full_tier: 0,
                closed: false,
                checkpoint_lsn: 0,
                lost: Vec::new(),
            }),
            writer: WriteLock::default(),
            next_boundary: AtomicI64::new(i64::MIN),
            failed: AtomicBool::new(false),
            policy,
            wal: None,
            syncer: Mutex::new(None),
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

    // ---- time and rotation -------------------------------------------------

    fn now(&self) -> Result<i64> {
        self.clock.now_secs()
    }

    /// Reads the clock and rotates when a window boundary has passed.
    #[inline]
    fn tick(&self) -> Result<i64> {
        let now = self.now()?;
        if now >= self.next_boundary.load(Ordering::Acquire) {
            self.maintain_at(now, self.allow_clock_jump)?;
        }
        Ok(now)
    }

    /// Rotates and expires as of `now`, reseals segments that a backfill or
    /// a remove reopened, and says what changed. Inserts and lookups do
    /// this by themselves when a window boundary passes; call it to do it
    /// at a chosen moment.
    ///
    /// This is the one way to move the engine forward across a clock jump
    /// that the writer refuses by itself ([`Error::ClockJump`]): it takes
    /// any forward step, even one that expires every window.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use timebloom::{Config, Engine, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let engine = Engine::create(dir.path().join("crawl.tb"), Config {
    ///     tiers: vec![Tier::daily(2)],
    ///     expected_items_per_day: 1_000,
    ///     ..Config::default()
    /// })?;
    /// let later = SystemTime::now() + Duration::from_secs(10 * 86_400);
    /// let done = engine.maintain(later)?;
    /// assert!(!done.opened.is_empty() && !done.expired.is_empty());
    /// print!("{done}"); // "opened 2d 2026...", "expired 2d 2026..."
    /// # Ok(())
    /// # }
    /// ```
    pub fn maintain(&self, now: SystemTime) -> Result<Maintenance> {
        self.writable()?;
        self.maintain_at(instant(now)?, true)
    }

    fn maintain_at(&self, now: i64, allow_jump: bool) -> Result<Maintenance> {
        let mut st = self.state.write();
        self.check_usable(&st)?;
        if !allow_jump && !self.read_only {
            self.check_clock_jump(&st, now)?;
        }
        let r = self.rotate(&mut st, now);
        self.latch(r)
    }

    fn writable(&self) -> Result<()> {
        if self.read_only {
            return Err(Error::ReadOnly {
                path: self.dir.clone(),
            });
        }
        Ok(())
    }

    /// Refuses a forward step of the clock that would expire every live
    /// window holding keys at once, or that passes the first window boundary
    /// the engine has not crossed by more than `max_clock_jump`.
    fn check_clock_jump(&self, st: &Live, now: i64) -> Result<()> {
        let off = self.config.utc_offset_secs;
        // The first boundary not yet crossed: the end of the newest window
        // of the tier with the shortest windows.
        let Some(boundary) = st
            .tiers
            .iter()
            .filter_map(|t| {
                let w = t.segments.last()?.window;
                window::end(t.tier.span, w, off)
            })
            .min()
        else {
            return Ok(());
        };
        if now < boundary {
            return Ok(());
        }
        let refuse = || Error::ClockJump {
            from: boundary,
            to: now,
        };
        if let Some(limit) = self.max_clock_jump {
            if (now - boundary).unsigned_abs() > limit.as_secs() {
                return Err(refuse());
            }
        }
        // Every window of every tier expires at once, and at least one
        // whole window of each tier passes unseen (a tier keeping one window
        // expires it at every boundary by design).
        for t in &st.tiers {
            let Some(newest) = t.segments.last() else {
                continue;
            };
            let cur = self.window_index(t.tier.span, now)?;
            let skip = i64::from(t.tier.retention.max(2));
            if cur < newest.window.saturating_add(skip) {
                return Ok(());
            }
        }
        Err(refuse())
    }

    /// The clock for a lookup: rotates like `tick`, but a rotation that
    /// fails on I/O (a full disk at a window boundary) does not fail the
    /// lookup: the error is latched, writes report it, and lookups go on
    /// answering from the windows the engine has.
    #[inline]
    fn tick_lookup(&self) -> Result<i64> {
        let now = self.now()?;
        if now >= self.next_boundary.load(Ordering::Acquire) && !self.failed.load(Ordering::Relaxed)
        {
            match self.maintain_at(now, self.allow_clock_jump) {
                Ok(_) | Err(Error::Io { .. }) | Err(Error::PreviousIo) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(now)
    }

    /// Lookups work as long as the engine is open, even after a write failed.
    fn check_open(&self, st: &Live) -> Result<()> {
        if st.closed {
            return Err(Error::PreviousIo);
        }
        Ok(())
    }

    fn check_usable(&self, st: &Live) -> Result<()> {
        let log_failed = self.wal.as_ref().is_some_and(|w| w.failed());
        if self.failed.load(Ordering::Relaxed) || log_failed || st.closed {
            return Err(Error::PreviousIo);
        }
        Ok(())
    }

    fn latch<T>(&self, r: Result<T>) -> Result<T> {
        if let Err(Error::Io { .. }) = &r {
            self.failed.store(true, Ordering::Relaxed);
        }
        r
    }

    fn window_index(&self, span: window::Span, t: i64) -> Result<i64> {
        window::index(span, t, self.config.utc_offset_secs).ok_or_else(|| {
            Error::WindowUnavailable {
                reason: format!("no {span:?} window holds instant {t}"),
            }
        })
    }

    /// The file name of sub-filter `index` of `window` in a tier.
    fn file_name(tier: &Tier, code: &str, window: i64, index: u32) -> Result<String> {
        file_name(code, tier.span, window, index).ok_or_else(|| Error::WindowUnavailable {
            reason: format!("window {window} of tier {tier} has no file name (year out of range)"),
        })
    }

    /// Creates the file of sub-filter `index` of `window` in a tier, sized
    /// by the chain's plan for that position.
    fn new_subfilter(&self, tier: &Tier, code: &str, window: i64, index: u32) -> Result<SubFilter> {
        let name = Engine::file_name(tier, code, window, index)?;
        let (capacity, rate) = self.config.subfilter_plan(tier, index);
        let id = Identity {
            span: tier.span,
            window,
            index,
        };
        SubFilter::create(
            &self.seg_path(&name),
            tier.kind,
            id,
            seed_fingerprint(self.seed),
            capacity,
            rate,
            self.policy != SyncPolicy::None,
        )
    }

    /// Creates a new segment (its sub-filter 0) for `window` of a tier.
    fn new_segment(&self, t: &TierState, window: i64) -> Result<Segment> {
        let sub = self.new_subfilter(&t.tier, &t.code, window, 0)?;
        Ok(Segment {
            window,
            subs: vec![sub],
        })
    }

    /// The rotation protocol (see docs/format.md):
    /// 1. expire: write the manifest without the expired segments (the
    ///    commit point of expiry), then delete their files;
    /// 2. create the new windows' files, fsync them and the directory;
    /// 3. seal every segment that is no longer the newest of its tier;
    /// 4. write the manifest naming the new set (the commit point).
    ///
    /// Expiry comes first so that a rotation on a nearly full disk frees
    /// the expired windows' space before it asks for the new ones'.
    /// A read-only engine only stops reading expired windows (in memory).
    fn rotate(&self, st: &mut Live, now: i64) -> Result<Maintenance> {
        let off = self.config.utc_offset_secs;
        let mut done = Maintenance::default();
        let label = |t: &TierState, w: i64| window_name(&t.tier, w);
        let mut expired = Vec::new();
        for t in &mut st.tiers {
            let cur = self.window_index(t.tier.span, now)?;
            let keep_from = t.tier.oldest_live(cur);
            let n = t.segments.partition_point(|s| s.window < keep_from);
            for seg in &t.segments[..n] {
                done.expired.push(label(t, seg.window));
            }
            expired.extend(t.segments.drain(..n));
        }
        if !self.read_only && !expired.is_empty() {
            self.store_manifest(st)?;
            let paths: Vec<PathBuf> = expired
                .iter()
                .flat_map(|seg| seg.subs.iter().map(|s| s.path().to_path_buf()))
                .collect();
            expired.clear(); // unmap before deleting
            for p in &paths {
                crate::file::check("delete expired segment", p)?;
                match fs::remove_file(p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("delete expired segment", p, e)),
                }
            }
            crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
        }
        drop(expired);
        let mut created = false;
        let mut unsealed = false;
        for ti in 0..st.tiers.len() {
            if self.read_only {
                break;
            }
            let cur = self.window_index(st.tiers[ti].tier.span, now)?;
            let t = &st.tiers[ti];
            if t.segments.last().is_none_or(|s| s.window < cur) {
                let seg = self.new_segment(t, cur)?;
                done.opened.push(label(t, cur));
                st.tiers[ti].segments.push(seg);
                created = true;
            }
        }
        if created {
            crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
        }
        for t in &mut st.tiers {
            if self.read_only {
                break;
            }
            let newest = t.segments.len().saturating_sub(1);
            for i in 0..t.segments.len() {
                let w = t.segments[i].window;
                if i != newest && !t.segments[i].is_sealed() {
                    done.sealed.push(label(t, w));
                }
                let seg = &mut t.segments[i];
                for s in &mut seg.subs {
                    if i == newest {
                        // The newest segment takes inserts: after a crash
                        // between sealing and the manifest it may be sealed.
                        unsealed |= s.unseal()?;
                    } else {
                        // Also reseals what a backfill or remove reopened.
                        s.seal()?;
                    }
                }
            }
        }
        if self.wal.is_some() && (created || unsealed || !done.sealed.is_empty()) {
            // The commit point of the rotation is a checkpoint: what was
            // logged for the sealed windows is durable in them now.
            self.checkpoint(st)?;
        } else if created {
            self.store_manifest(st)?;
        }
        // Which tier reaches furthest back, and when the next boundary comes.
        let mut next = i64::MAX;
        let mut oldest = i64::MAX;
        for (ti, t) in st.tiers.iter().enumerate() {
            let cur = self.window_index(t.tier.span, now)?;
            if let Some(end) = window::end(t.tier.span, cur, off) {
                next = next.min(end);
            }
            let from = t.tier.oldest_live(cur);
            let start = window::start(t.tier.span, from, off).unwrap_or(i64::MIN);
            if start < oldest {
                oldest = start;
                st.full_tier = ti;
            }
        }
        self.next_boundary.store(next, Ordering::Release);
        Ok(done)
    }

    // ---- durability: the write-ahead log --------------------------------------

    /// At a writer's open (and at create): recovers from the log a previous
    /// session left, then starts this session's log under the `always` and
    /// `interval` policies (see docs/format.md, "Write-ahead log").
    fn start_durability(&mut self, assume_power_loss: bool, degraded: bool) -> Result<()> {
        let wal_dir = self.dir.join(WAL_DIR);
        let had_log = !wal::list(&wal_dir)?.is_empty();
        let mut st = std::mem::replace(
            self.state.get_mut(),
            Live {
                tiers: Vec::new(),
                generation: 0,
                checkpoint_lsn: 0,
                lost: Vec::new(),
                full_tier: 0,
                closed: true,
            },
        );
        let r = self.start_durability_with(&mut st, &wal_dir, had_log, assume_power_loss, degraded);
        *self.state.get_mut() = st;
        r
    }

    fn start_durability_with(
        &mut self,
        st: &mut Live,
        wal_dir: &Path,
        had_log: bool,
        assume_power_loss: bool,
        degraded: bool,
    ) -> Result<()> {
        let c = st.checkpoint_lsn;
        let records = if had_log {
            wal::replay_records(wal_dir, c)?
        } else {
            Vec::new()
        };
        let mut need_checkpoint = !records.is_empty();
        // While the operating system has not restarted, the page cache
        // holds every write of the crashed process: the bodies are whole
        // and replaying would count counting windows twice. After a restart
        // (a power loss, perhaps), the bodies are whatever reached the
        // disk: restore counting windows from their shadow copies and
        // replay the log.
        let recorded = fs::read_to_string(wal_dir.join(BOOT)).ok();
        let same_boot = match (recorded, wal::boot_id()) {
            (Some(a), Some(b)) => a.trim() == b,
            _ => false,
        };
        if had_log && (assume_power_loss || !same_boot) {
            // Damage in the middle of the log (not a torn tail) would end
            // the replay early and silently drop the acknowledged writes
            // after it: refused, unless opened degraded.
            if let Err(e) = wal::verify_logs(wal_dir) {
                if !degraded {
                    return Err(e);
                }
            }
            if !records.is_empty() {
                self.replay(st, wal_dir, c, &records)?;
            }
        }
        if self.policy == SyncPolicy::None {
            if had_log {
                // Leaving the logged policies: make the bodies durable, then
                // drop the log and the shadow copies.
                flush_bodies(st)?;
                wal::remove_older(wal_dir, u64::MAX)?;
                wal::remove_shadows_except(wal_dir, u64::MAX)?;
            }
            return Ok(());
        }
        fs::create_dir_all(wal_dir).map_err(|e| Error::io("create directory", wal_dir, e))?;
        if let Some(id) = wal::boot_id() {
            let p = wal_dir.join(BOOT);
            if fs::read_to_string(&p).ok().as_deref() != Some(id.as_str()) {
                fs::write(&p, id).map_err(|e| Error::io("write", &p, e))?;
            }
        }
        let next = match records.last() {
            None => c,
            Some(r) => r.lsn.checked_add(1).ok_or_else(|| {
                Error::corrupt(
                    wal_dir,
                    "the log reached its last position (LSN 2^64 - 1); the manifest or log is damaged",
                )
            })?,
        };
        let log = Arc::new(Wal::create(wal_dir, next)?);
        self.wal = Some(Arc::clone(&log));
        // Every open counting sub-filter needs a shadow copy at the
        // checkpoint the log starts from.
        need_checkpoint |= st.tiers.iter().any(|t| {
            t.tier.kind == Kind::Counting
                && t.segments.iter().flat_map(|s| &s.subs).any(|s| {
                    s.is_writable() && !wal::shadow_path(wal_dir, &s.file_name(), c).exists()
                })
        });
        if need_checkpoint || next != c {
            self.checkpoint(st)?;
        }
        if let SyncPolicy::Interval(every) = self.policy {
            *self.syncer.get_mut() = Some(Syncer::start(log, every));
        }
        Ok(())
    }

    /// Recovery after a possible power loss: counting windows back to their
    /// shadow copies at checkpoint `c`, then every logged write since.
    fn replay(&self, st: &mut Live, wal_dir: &Path, c: u64, records: &[wal::Record]) -> Result<()> {
        let x = self.writer.lock();
        for t in &st.tiers {
            if t.tier.kind != Kind::Counting {
                continue;
            }
            for s in t.segments.iter().flat_map(|s| &s.subs) {
                if !s.is_writable() {
                    continue;
                }
                let p = wal::shadow_path(wal_dir, &s.file_name(), c);
                // No shadow at this checkpoint: the sub-filter was created
                // or reopened after it, and a checkpoint always follows
                // that before any write, so its body is still the state
                // the checkpoint describes.
                if !p.exists() {
                    continue;
                }
                let body = wal::read_shadow(&p, s.body().len())?;
                s.restore(&x, &body);
            }
        }
        for r in records {
            let mut targets = Vec::with_capacity(st.tiers.len());
            for t in &st.tiers {
                let Some(w) = window::index(t.tier.span, r.t, self.config.utc_offset_secs) else {
                    continue;
                };
                // A sealed window holds what was logged before its seal; an
                // expired one is gone.
                if let Some(seg) = t.segments.iter().find(|s| s.window == w && !s.is_sealed()) {
                    targets.push(seg);
                }
            }
            match r.op {
                Op::Insert => {
                    for seg in &targets {
                        seg.insert(&x, r.h);
                    }
                }
                Op::Remove => {
                    if !targets.is_empty() && targets.iter().all(|s| s.contains(r.h)) {
                        for seg in &targets {
                            seg.remove(&x, r.h);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// A checkpoint: every logged write made durable in the segments
    /// (msync), a shadow copy of every open counting body, the manifest
    /// naming the checkpoint's log position (the commit point), then a new
    /// log file; older logs and shadows are deleted. The caller holds the
    /// state exclusively, so no write runs meanwhile.
    fn checkpoint(&self, st: &mut Live) -> Result<()> {
        let Some(log) = &self.wal else {
            return Ok(());
        };
        let l = log.next_lsn();
        log.sync_to(l)?;
        let wal_dir = self.dir.join(WAL_DIR);
        let mut shadows = false;
        for t in &mut st.tiers {
            for seg in &mut t.segments {
                for s in &mut seg.subs {
                    if !s.is_writable() {
                        continue;
                    }
                    s.flush()?;
                    if t.tier.kind == Kind::Counting {
                        let p = wal::shadow_path(&wal_dir, &s.file_name(), l);
                        wal::write_shadow(&p, s.body())?;
                        shadows = true;
                    }
                }
            }
        }
        if shadows {
            crate::file::fsync_dir(&wal_dir)?;
        }
        st.checkpoint_lsn = l;
        self.store_manifest(st)?;
        log.restart(l)?;
        wal::remove_shadows_except(&wal_dir, l)
    }

    /// Under `always`, returns once every logged write is durable (group
    /// commit: two loads when it already is); then checkpoints if the log
    /// has grown past its limit.
    fn sync_writes(&self) -> Result<()> {
        let Some(log) = &self.wal else {
            return Ok(());
        };
        if self.policy == SyncPolicy::Always {
            let r = log.sync_appended();
            self.latch(r)?;
        }
        if log.checkpoint_due() {
            let mut st = self.state.write();
            self.check_usable(&st)?;
            if log.checkpoint_due() {
                let r = self.checkpoint(&mut st);
                self.latch(r)?;
            }
        }
        Ok(())
    }

    fn store_manifest(&self, st: &mut Live) -> Result<()> {
        let mut segments = Vec::new();
        for (ti, t) in st.tiers.iter().enumerate() {
            for seg in &t.segments {
                let files = (0..seg.subs.len() as u32)
                    .map(|i| Engine::file_name(&t.tier, &t.code, seg.window, i))
                    .collect::<Result<Vec<_>>>()?;
                segments.push(SegmentEntry {
                    tier: ti,
                    window: seg.window,
                    files,
                });
            }
        }
        let m = Manifest {
            config: self.config.clone(),
            seed: self.seed,
            generation: st.generation + 1,
            segments,
            checkpoint_lsn: st.checkpoint_lsn,
        };
        m.store(&self.dir.join(MANIFEST))?;
        st.generation += 1;
        Ok(())
    }

    /// Appends a sub-filter to every open segment whose newest one is full.
    fn grow(&self) -> Result<()> {
        let mut st = self.state.write();
        self.check_usable(&st)?;
        let r = self.grow_locked(&mut st);
        self.latch(r)
    }

    fn grow_locked(&self, st: &mut Live) -> Result<()> {
        let mut grown = Vec::new();
        for (ti, t) in st.tiers.iter_mut().enumerate() {
            for (si, seg) in t.segments.iter_mut().enumerate() {
                if !growth_due(seg) {
                    continue;
                }
                let index = seg.subs.len() as u32;
                seg.subs
                    .push(self.new_subfilter(&t.tier, &t.code, seg.window, index)?);
                grown.push((ti, si));
            }
        }
        if grown.is_empty() {
            return Ok(());
        }
        let r = crate::file::fsync_dir(&self.dir.join(SEG_DIR)).and_then(|()| {
            if self.wal.is_some() {
                self.checkpoint(st)
            } else {
                self.store_manifest(st)
            }
        });
        if r.is_err() {
            // The new files are not named by a manifest: take them back out
            // of the chains so nothing is written where a reopen won't look.
            for (ti, si) in grown {
                st.tiers[ti].segments[si].subs.pop();
            }
        }
        r
    }

    // ---- the data path ------------------------------------------------------

    #[inline]
    fn hash(&self, key: &[u8]) -> KeyHash {
        hash_key(self.seed, key)
    }

    /// Records `key` in the open window of every tier. Returns `true` when
    /// the key was not present in any live segment before (check-and-insert).
    ///
    /// Of several threads inserting the same new key at once, exactly one
    /// gets `true`. An error means the key was not recorded by this call.
    pub fn insert(&self, key: &[u8]) -> Result<bool> {
        self.writable()?;
        let now = self.tick()?;
        let h = self.hash(key);
        loop {
            {
                let st = self.state.read();
                self.check_usable(&st)?;
                if let Some(new) = self.insert_locked(&st, h, now)? {
                    drop(st);
                    self.sync_writes()?;
                    return Ok(new);
                }
            }
            // A full open window grows before it takes the write.
            self.grow()?;
        }
    }

    /// Check-and-insert under the shared lock: whether the key was new, or
    /// `None` (nothing written) when an open window must grow first.
    #[inline]
    fn insert_locked(&self, st: &Live, h: KeyHash, now: i64) -> Result<Option<bool>> {
        for t in &st.tiers {
            if let Some(seg) = t.segments.last() {
                seg.prefetch(h);
            }
        }
        let present = any_contains(&st.tiers[st.full_tier].segments, h);
        if present && settled(st, h) {
            return Ok(Some(false));
        }
        let x = self.writer.lock();
        if tails_due(st) {
            return Ok(None);
        }
        self.write_locked(st, &x, h, present, now).map(Some)
    }

    /// The write half of check-and-insert, under the writer lock: checks
    /// again a key that tested absent (another writer may have inserted it
    /// since), then records it in every tier's open window. Returns whether
    /// the key was new.
    ///
    /// The second check reads only open segments: a sealed one cannot have
    /// changed since the first, because unsealing needs the exclusive lock
    /// that the caller's shared lock keeps out.
    #[inline]
    fn write_locked(
        &self,
        st: &Live,
        x: &Exclusive,
        h: KeyHash,
        present: bool,
        now: i64,
    ) -> Result<bool> {
        let full = &st.tiers[st.full_tier].segments;
        let present = present || full.iter().rev().any(|s| !s.is_sealed() && s.contains(h));
        for t in &st.tiers {
            let Some(seg) = t.segments.last() else {
                continue;
            };
            if !seg.insert(x, h) {
                return Err(Error::corrupt(
                    seg_path_of(seg),
                    "the open segment is sealed",
                ));
            }
        }
        if let Some(log) = &self.wal {
            let r = log.append(Op::Insert, now, h).map(drop);
            self.latch(r)?;
        }
        Ok(!present)
    }

    /// [`Engine::insert`] for many keys: one clock read, one shared lock,
    /// and per group of keys: every memory load issued before any key is
    /// tested, then one writer lock for the keys that need a write.
    ///
    /// Answers come in input order. If an error stops the batch after some
    /// keys were recorded, the error is [`Error::Incomplete`] with the
    /// answers for those keys (a prefix of `keys`); no key is ever recorded
    /// without its answer reaching the caller.
    ///
    /// ```
    /// use timebloom::{Config, Engine, Error, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let engine = Engine::create(dir.path().join("crawl.tb"), Config {
    /// #     tiers: vec![Tier::daily(7)], expected_items_per_day: 1_000, ..Config::default() })?;
    /// let urls = ["https://a.example/1", "https://a.example/2", "https://a.example/1"];
    /// match engine.insert_batch(&urls) {
    ///     Ok(new) => assert_eq!(new, [true, true, false]),
    ///     // urls[..answers.len()] were recorded; fetch those that are new,
    ///     // then report the cause.
    ///     Err(Error::Incomplete { answers, cause }) => panic!("{} recorded: {cause}", answers.len()),
    ///     Err(e) => return Err(e),
    /// }
    /// # Ok(())
    /// # }
    /// ```
    pub fn insert_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.writable()?;
        let now = self.tick()?;
        let out = self.insert_batch_at(keys, now);
        // Under `always`, one sync for the whole batch (group commit).
        let synced = self.sync_writes();
        match (out, synced) {
            (Ok(out), Ok(())) => Ok(out),
            (Err(e), Ok(())) => Err(e),
            (_, Err(e)) => Err(e),
        }
    }

    fn insert_batch_at<K: AsRef<[u8]>>(&self, keys: &[K], now: i64) -> Result<Vec<bool>> {
        let mut out = Vec::with_capacity(keys.len());
        let mut rest = keys;
        while !rest.is_empty() {
            let mut grow = false;
            {
                let st = self.state.read();
                if let Err(e) = self.check_usable(&st) {
                    return Err(incomplete(out, e));
                }
                let mut look = Lookup::new(&st.tiers[st.full_tier].segments);
                // The open windows of the other tiers take writes too.
                let tails: Vec<&Segment> = (st.tiers.iter().enumerate())
                    .filter(|&(ti, _)| ti != st.full_tier)
                    .filter_map(|(_, t)| t.segments.last())
                    .collect();
                // Groups until a chain must grow: growth needs the exclusive
                // lock, and a full sub-filter must not keep taking keys.
                while !rest.is_empty() {
                    let (group, tail) = rest.split_at(look.group().min(rest.len()));
                    look.clear();
                    for k in group {
                        let h = self.hash(k.as_ref());
                        look.push(h);
                        for seg in &tails {
                            seg.prefetch(h);
                        }
                    }
                    // Which keys are present, and which need no write at all.
                    let first = out.len();
                    let mut todo = [false; MAX_GROUP]; // key i needs the writer
                    for (i, h) in look.hashes().iter().enumerate() {
                        let present = look.contains(i);
                        out.push(!present);
                        todo[i] = !(present && settled(&st, *h));
                    }
                    if todo.contains(&true) {
                        let x = self.writer.lock();
                        for (i, h) in look.hashes().iter().enumerate() {
                            if !todo[i] {
                                continue;
                            }
                            // Fill counts change only under the writer
                            // lock: a full tail is seen before the write
                            // that would overfill it, even with many
                            // writers. Grow first, then go on from key i.
                            if tails_due(&st) {
                                out.truncate(first + i);
                                rest = &rest[i..];
                                grow = true;
                                break;
                            }
                            let was_present = !out[first + i];
                            match self.write_locked(&st, &x, *h, was_present, now) {
                                Ok(new) => out[first + i] = new,
                                Err(e) => {
                                    out.truncate(first + i);
                                    return Err(incomplete(out, e));
                                }
                            }
                        }
                        if grow {
                            break;
                        }
                    }
                    rest = tail;
                }
            }
            if grow {
                if let Err(e) = self.grow() {
                    return Err(incomplete(out, e));
                }
            }
        }
        Ok(out)
    }

    /// Whether `key` is present in any live segment. Never a false negative
    /// for a key inserted within the retention (and not removed); a false
    /// positive at most at the configured rate.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        self.tick_lookup()?;
        let h = self.hash(key);
        let st = self.state.read();
        self.check_open(&st)?;
        Ok(any_contains(&st.tiers[st.full_tier].segments, h))
    }

    /// [`Engine::contains`] for many keys, loads of a group issued first.
    pub fn contains_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.tick_lookup()?;
        let st = self.state.read();
        self.check_open(&st)?;
        let mut look = Lookup::new(&st.tiers[st.full_tier].segments);
        let mut out = Vec::with_capacity(keys.len());
        for group in keys.chunks(look.group()) {
            look.clear();
            for k in group {
                look.push(self.hash(k.as_ref()));
            }
            out.extend((0..group.len()).map(|i| look.contains(i)));
        }
        Ok(out)
    }

    /// Whether `key` was inserted within `horizon` of now.
    ///
    /// The engine reads the tier with the shortest windows that still covers
    /// the horizon, and in it only the windows the horizon touches. The answer is guaranteed `true` for every key inserted
    /// within `horizon`, and may also be `true` for a key up to one window
    /// of that tier older (windows are whole: see `stats`, `coarseness_secs`).
    /// A horizon longer than every tier keeps is an error.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use timebloom::{Config, Engine, ManualClock, Options, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let clock = ManualClock::new(SystemTime::now());
    /// let engine = Engine::create_with(
    ///     dir.path().join("crawl.tb"),
    ///     Config { tiers: vec![Tier::daily(7)], expected_items_per_day: 1_000, ..Config::default() },
    ///     Options::default().clock(clock.clone()),
    /// )?;
    /// engine.insert(b"https://example.com/a")?;
    /// clock.advance(Duration::from_secs(5 * 86_400));
    /// let day = Duration::from_secs(86_400);
    /// assert!(!engine.contains_within(b"https://example.com/a", 3 * day)?); // recrawl it
    /// assert!(engine.contains(b"https://example.com/a")?); // still known this week
    /// # Ok(())
    /// # }
    /// ```
    pub fn contains_within(&self, key: &[u8], horizon: Duration) -> Result<bool> {
        let now = self.tick_lookup()?;
        let h = self.hash(key);
        let st = self.state.read();
        self.check_open(&st)?;
        let (ti, first) = self.pick_tier(&st, now, horizon)?;
        let segs = &st.tiers[ti].segments;
        let from = segs.partition_point(|s| s.window < first);
        Ok(any_contains(&segs[from..], h))
    }

    /// The tier and first window that answer a horizon.
    fn pick_tier(&self, st: &Live, now: i64, horizon: Duration) -> Result<(usize, i64)> {
        let secs = i64::try_from(horizon.as_secs()).unwrap_or(i64::MAX);
        let since = now.saturating_sub(secs);
        let mut best: Option<(u64, i64, usize, i64)> = None; // (window secs, segments, tier, first)
        let mut max_cover = 0u64;
        for (ti, t) in st.tiers.iter().enumerate() {
            let cur = self.window_index(t.tier.span, now)?;
            let oldest = t.tier.oldest_live(cur);
            if let Some(start) = window::start(t.tier.span, oldest, self.config.utc_offset_secs) {
                max_cover = max_cover.max(now.saturating_sub(start).max(0) as u64);
            }
            let Some(first) = window::index(t.tier.span, since.max(0), self.config.utc_offset_secs)
            else {
                continue;
            };
            if first < oldest {
                continue;
            }
            // The finest windows first (the least coarse answer), then the
            // fewest segments. See docs/design.md, "Horizons".
            let cand = (
                window::nominal_secs(t.tier.span),
                cur - first + 1,
                ti,
                first,
            );
            if best.is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                best = Some(cand);
            }
        }
        best.map(|b| (b.2, b.3)).ok_or(Error::HorizonTooLong {
            horizon_secs: horizon.as_secs(),
            max_secs: max_cover,
        })
    }

    /// Records `key` as seen at `time` (a backfill from a crawl log or a
    /// database): into the window holding `time` in every tier that still
    /// keeps it. Returns `true` when the key was not present in any live
    /// segment before. An instant whose window has expired in every tier,
    /// or that lies in a future window, is an error.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use timebloom::{Config, Engine, Error, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let engine = Engine::create(dir.path().join("crawl.tb"), Config {
    ///     tiers: vec![Tier::daily(7)],
    ///     expected_items_per_day: 1_000,
    ///     ..Config::default()
    /// })?;
    /// let day = Duration::from_secs(86_400);
    /// // A crawl log line from two days ago.
    /// assert!(engine.insert_at(b"https://example.com/a", SystemTime::now() - 2 * day)?);
    /// assert!(engine.contains_within(b"https://example.com/a", 3 * day)?);
    /// // Older than every tier keeps: an error, not a silent drop.
    /// let old = engine.insert_at(b"https://example.com/b", SystemTime::now() - 30 * day);
    /// assert!(matches!(old, Err(Error::WindowUnavailable { .. })));
    /// # Ok(())
    /// # }
    /// ```
    pub fn insert_at(&self, key: &[u8], time: SystemTime) -> Result<bool> {
        self.writable()?;
        let now = self.tick()?;
        let t = instant(time)?;
        let h = self.hash(key);
        loop {
            {
                let st = self.state.read();
                self.check_usable(&st)?;
                let targets = self.backfill_targets(&st, now, t)?;
                let segs: Vec<Option<&Segment>> = targets
                    .iter()
                    .map(|&(ti, w)| st.tiers[ti].segments.iter().find(|s| s.window == w))
                    .collect();
                let ready = segs.iter().all(|s| s.is_some_and(|s| !s.is_sealed()));
                if ready && !segs.iter().flatten().any(|s| growth_due(s)) {
                    let x = self.writer.lock();
                    let present = any_contains(&st.tiers[st.full_tier].segments, h);
                    for seg in segs.into_iter().flatten() {
                        seg.insert(&x, h);
                    }
                    if let Some(log) = &self.wal {
                        let r = log.append(Op::Insert, t, h).map(drop);
                        self.latch(r)?;
                    }
                    drop(x);
                    drop(st);
                    self.sync_writes()?;
                    return Ok(!present);
                }
                if ready {
                    drop(st);
                    self.grow()?;
                    continue;
                }
            }
            self.open_windows(now, t)?;
        }
    }

    /// `(tier, window)` pairs that a backfill at `t` writes.
    fn backfill_targets(&self, st: &Live, now: i64, t: i64) -> Result<Vec<(usize, i64)>> {
        let mut out = Vec::new();
        for (ti, ts) in st.tiers.iter().enumerate() {
            let cur = self.window_index(ts.tier.span, now)?;
            let w = self.window_index(ts.tier.span, t)?;
            if w > cur {
                return Err(Error::WindowUnavailable {
                    reason: format!("instant {t} lies in a future window of tier {}", ts.tier),
                });
            }
            if w >= ts.tier.oldest_live(cur) {
                out.push((ti, w));
            }
        }
        if out.is_empty() {
            return Err(Error::WindowUnavailable {
                reason: format!("instant {t} is older than every tier keeps"),
            });
        }
        Ok(out)
    }

    /// Creates or unseals the segments a backfill at `t` needs.
    fn open_windows(&self, now: i64, t: i64) -> Result<()> {
        let mut st = self.state.write();
        self.check_usable(&st)?;
        let r = (|| {
            let targets = self.backfill_targets(&st, now, t)?;
            let mut created = false;
            let mut unsealed = false;
            for (ti, w) in targets {
                let ts = &st.tiers[ti];
                match ts.segments.binary_search_by_key(&w, |s| s.window) {
                    Ok(i) => {
                        for s in &mut st.tiers[ti].segments[i].subs {
                            unsealed |= s.unseal()?;
                        }
                    }
                    Err(i) => {
                        let seg = self.new_segment(ts, w)?;
                        st.tiers[ti].segments.insert(i, seg);
                        created = true;
                    }
                }
            }
            if created {
                crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
            }
            if self.wal.is_some() && (created || unsealed) {
                // A reopened counting window needs its shadow copy before
                // it takes writes, and a new one a manifest that names it.
                self.checkpoint(&mut st)?;
            } else if created {
                self.store_manifest(&mut st)?;
            }
            Ok(())
        })();
        self.latch(r)
    }

    /// Takes back one insert of `key` made now: decrements its counters in
    /// the windows inserts go to now (the open window of every tier), and
    /// only if every one of them holds the key. Returns whether it did.
    ///
    /// Only for engines whose tiers are all counting tiers
    /// ([`Tier::counting`]); otherwise [`Error::RemoveUnsupported`] and
    /// nothing changes. To undo an insert made at another instant (an
    /// earlier day), use [`Engine::remove_at`] with that instant: a remove
    /// decrements only windows the key was inserted into, never every
    /// window where it merely tests positive (each such false positive
    /// would take counts from other keys and make them disappear).
    ///
    /// Removing a key that was never inserted into those windows changes
    /// nothing, unless every one of them reports it as a false positive
    /// (about the product of their false-positive rates); then it takes
    /// one count from the keys that share its counters, which may make one
    /// of them disappear. Remove only keys you inserted. Saturated counters
    /// stay saturated: a key removed as often as inserted may still test
    /// present where its counters saturated.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        self.check_remove()?;
        let now = self.tick()?;
        self.remove_inner(self.hash(key), now, now)
    }

    /// Takes back one insert of `key` made at `time` (by [`Engine::insert`]
    /// during the window holding `time`, or by [`Engine::insert_at`]): the
    /// windows holding `time` in every tier that still keeps it, decremented
    /// only when every one of them holds the key. Returns whether it did.
    /// The same contract as [`Engine::remove`] otherwise; an instant older
    /// than every tier keeps, or in a future window, is an error.
    ///
    /// ```
    /// use std::time::SystemTime;
    /// use timebloom::{Config, Engine, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let engine = Engine::create(dir.path().join("links.tb"), Config {
    ///     tiers: vec![Tier::daily(30).counting()],
    ///     expected_items_per_day: 1_000,
    ///     ..Config::default()
    /// })?;
    /// let created = SystemTime::now();
    /// engine.insert_at(b"https://example.com/a", created)?;
    /// // The link is deleted: take back the insert made when it was created.
    /// assert!(engine.remove_at(b"https://example.com/a", created)?);
    /// assert!(!engine.contains(b"https://example.com/a")?);
    /// # Ok(())
    /// # }
    /// ```
    pub fn remove_at(&self, key: &[u8], time: SystemTime) -> Result<bool> {
        self.check_remove()?;
        let now = self.tick()?;
        self.remove_inner(self.hash(key), now, instant(time)?)
    }

    fn check_remove(&self) -> Result<()> {
        if let Some(t) = self.config.tiers.iter().find(|t| t.kind != Kind::Counting) {
            return Err(Error::RemoveUnsupported {
                tier: t.to_string(),
            });
        }
        self.writable()
    }

    fn remove_inner(&self, h: KeyHash, now: i64, t: i64) -> Result<bool> {
        loop {
            {
                let st = self.state.read();
                self.check_usable(&st)?;
                let targets = self.backfill_targets(&st, now, t)?;
                let mut segs = Vec::with_capacity(targets.len());
                for (ti, w) in targets {
                    match st.tiers[ti].segments.iter().find(|s| s.window == w) {
                        Some(seg) => segs.push(seg),
                        // No window there: the key was never inserted at `t`.
                        None => return Ok(false),
                    }
                }
                let x = self.writer.lock();
                if !segs.iter().all(|s| s.contains(h)) {
                    return Ok(false);
                }
                if !segs.iter().any(|s| s.is_sealed()) {
                    for seg in segs {
                        seg.remove(&x, h);
                    }
                    if let Some(log) = &self.wal {
                        let r = log.append(Op::Remove, t, h).map(drop);
                        self.latch(r)?;
                    }
                    drop(x);
                    drop(st);
                    self.sync_writes()?;
                    return Ok(true);
                }
            }
            // A past window was sealed: reopen it for the decrement.
            self.open_windows(now, t)?;
        }
    }

    // ---- durability and reporting --------------------------------------------

    /// Makes every insert so far durable (msync, header, fsync), and
    /// reseals segments that a backfill or remove reopened.
    pub fn flush(&self) -> Result<()> {
        self.writable()?;
        let now = self.now()?;
        let mut st = self.state.write();
        self.check_usable(&st)?;
        if !self.allow_clock_jump {
            self.check_clock_jump(&st, now)?;
        }
        let r = (|| {
            self.rotate(&mut st, now)?;
            if self.wal.is_some() {
                return self.checkpoint(&mut st);
            }
            flush_bodies(&mut st)
        })();
        self.latch(r)
    }

    /// Checks every segment's header copies, every sealed segment's body
    /// checksum and fill count, the write-ahead log (damage other than a
    /// torn last record) and the shadow copies of the last checkpoint.
    /// Returns the first problem found; [`Engine::verify_each`] lists them all.
    pub fn verify(&self) -> Result<()> {
        match self.verify_each().into_iter().next() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Every problem [`Engine::verify`] checks for, one error per damaged
    /// file (empty when everything verifies).
    pub fn verify_each(&self) -> Vec<Error> {
        let st = self.state.read();
        let mut problems = Vec::new();
        if let Err(e) = wal::verify(&self.dir.join(WAL_DIR), st.checkpoint_lsn) {
            problems.push(e);
        }
        for t in &st.tiers {
            for seg in &t.segments {
                for s in &seg.subs {
                    if let Err(e) = s.verify() {
                        problems.push(e);
                    }
                }
            }
        }
        problems
    }

    /// Closes the engine cleanly, reporting any error (dropping it does the
    /// same silently).
    pub fn close(self) -> Result<()> {
        self.close_inner()
    }

    fn close_inner(&self) -> Result<()> {
        let mut st = self.state.write();
        if st.closed {
            return Ok(());
        }
        st.closed = true;
        if self.read_only {
            return Ok(());
        }
        if let Some(mut syncer) = self.syncer.lock().take() {
            syncer.stop();
        }
        if self.failed.load(Ordering::Relaxed) || self.wal.as_ref().is_some_and(|w| w.failed()) {
            // Nothing is written after an I/O error; the caller learns that
            // the last writes may not have reached the disk.
            return Err(Error::PreviousIo);
        }
        // Everything logged reaches the segments; the log restarts empty.
        if self
            .wal
            .as_ref()
            .is_some_and(|w| w.next_lsn() != st.checkpoint_lsn)
        {
            let r = self.checkpoint(&mut st);
            self.latch(r)?;
        }
        for t in &mut st.tiers {
            let newest = t.segments.len().saturating_sub(1);
            for (i, seg) in t.segments.iter_mut().enumerate() {
                for s in &mut seg.subs {
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

    /// Per tier and per segment: windows, fill, estimated keys and
    /// false-positive rates.
    pub fn stats(&self) -> Result<Stats> {
        let now = self.tick_lookup()?;
        let st = self.state.read();
        let off = self.config.utc_offset_secs;
        let mut tiers = Vec::new();
        let mut bytes = 0;
        for (ti, t) in st.tiers.iter().enumerate() {
            let cur = self.window_index(t.tier.span, now)?;
            let oldest = t.tier.oldest_live(cur);
            let covers = window::start(t.tier.span, oldest, off)
                .map_or(0, |s| now.saturating_sub(s).max(0) as u64);
            let mut segments = Vec::new();
            for seg in &t.segments {
                let state = if seg.is_sealed() { "sealed" } else { "open" };
                let mut s = SegmentStats::window(t.tier.span, seg.window, off, state);
                s.subfilters = seg.subs.len();
                for sub in &seg.subs {
                    let hd = sub.header();
                    let plan = sizing::Plan {
                        nblocks: hd.nblocks,
                        k: hd.k,
                    };
                    let occ = sub.occupied();
                    let items = sizing::estimate_items(hd.kind, plan, occ);
                    s.bytes += sub.len_bytes();
                    s.cells += hd.nblocks * u64::from(hd.kind.cells_per_block());
                    s.occupied += occ;
                    s.estimated_items += items.round() as u64;
                    s.estimated_fpr += sizing::fpr(hd.kind, hd.k, items / hd.nblocks as f64);
                    s.saturated += sub.saturated();
                }
                s.fill = s.occupied as f64 / s.cells.max(1) as f64;
                bytes += s.bytes;
                segments.push(s);
            }
            tiers.push(TierStats {
                tier: t.tier.to_string(),
                kind: t.tier.kind,
                retention: t.tier.retention,
                window_secs: window::nominal_secs(t.tier.span),
                covers_secs: covers,
                coarseness_secs: window::nominal_secs(t.tier.span),
                segment_fpr: self.config.segment_fpr(&t.tier),
                answers_contains: ti == st.full_tier,
                segments,
            });
        }
        Ok(Stats {
            now,
            lost_windows: st.lost.clone(),
            fpr: self.config.fpr,
            expected_items_per_day: self.config.expected_items_per_day,
            generation: st.generation,
            bytes,
            tiers,
        })
    }
}

fn seg_path_of(seg: &Segment) -> PathBuf {
    seg.tail()
        .map(|s| s.path().to_path_buf())
        .unwrap_or_default()
}

/// True when inserting the key would write nothing: every tier's open
/// window holds it already in a Bloom segment.
#[inline]
fn settled(st: &Live, h: KeyHash) -> bool {
    st.tiers
        .iter()
        .all(|t| t.segments.last().is_none_or(|s| s.settled(h)))
}

/// True when an open segment's newest sub-filter is full and its chain may
/// still grow. Writers grow such a chain before they write (so no key is
/// recorded by a call that then fails on growth).
#[inline]
fn growth_due(seg: &Segment) -> bool {
    seg.needs_growth() && !seg.is_sealed() && seg.subs.len() < MAX_CHAIN
}

/// True when some tier's open window must grow before it takes a write.
#[inline]
fn tails_due(st: &Live) -> bool {
    st.tiers
        .iter()
        .any(|t| t.segments.last().is_some_and(growth_due))
}

/// The error of a batch that stopped after recording `answers`.
fn incomplete(answers: Vec<bool>, cause: Error) -> Error {
    if answers.is_empty() {
        cause
    } else {
        Error::Incomplete {
            answers,
            cause: Box::new(cause),
        }
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}
