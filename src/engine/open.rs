//! Create, open and recovery of an engine directory: the lock, the
//! directory's making and checks, the segment files the manifest names
//! (quarantined when they fail their checks, left out by a degraded open),
//! and the engine assembled from them. The write-ahead log's replay is in
//! `durable`.

use std::fs::{self, File, OpenOptions};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;
use parking_lot::Mutex;

use crate::chain::Segment;
use crate::clock::Options;
use crate::config::{Config, Tier};
use crate::error::{Error, Result};
use crate::filter::Stripes;
use crate::hash::{random_seed, seed_fingerprint};
use crate::manifest::{LostWindow, Manifest, SegmentEntry};
use crate::segment::{Identity, SubFilter};
use crate::window;

use super::snapshot::{Snapshot, TierState};
use super::{window_name, Engine, Maint, LOCK, MANIFEST, QUARANTINE, SEG_DIR, WAL_DIR};

/// The exclusive lock of an engine directory: `LOCK` (what earlier
/// versions lock, and what docs/operations.md names) and, on Unix, the
/// directory itself. A `LOCK` deleted by hand while a writer ran let the
/// next writer make a new one and lock it beside the first; the
/// directory cannot be deleted while it holds the engine's files, and any
/// path that reaches it (a symlink, `dir/.`, a bind mount) reaches the same
/// inode.
pub(super) struct DirLock {
    _file: File,
    _dir: Option<File>,
}

impl DirLock {
    /// A second descriptor of each open file, holding the same locks.
    fn try_clone(&self, dir: &Path) -> Result<DirLock> {
        let dup = |f: &File, p: PathBuf| {
            f.try_clone()
                .map_err(|e| Error::io("duplicate lock descriptor", p, e))
        };
        Ok(DirLock {
            _file: dup(&self._file, dir.join(LOCK))?,
            _dir: match &self._dir {
                Some(d) => Some(dup(d, dir.to_path_buf())?),
                None => None,
            },
        })
    }
}

fn lock_dir(dir: &Path) -> Result<DirLock> {
    let path = dir.join(LOCK);
    let mut options = OpenOptions::new();
    options.read(true).write(true).create(true).truncate(false);
    // A `LOCK` that is a symlink is refused (ELOOP, naming the file), not
    // followed: opening it would make, or lock, a file outside the
    // directory.
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::custom_flags(
        &mut options,
        rustix::fs::OFlags::NOFOLLOW.bits() as i32,
    );
    let f = options
        .open(&path)
        .map_err(|e| Error::io("open lock file", &path, e))?;
    let locked = || Error::Locked {
        path: dir.to_path_buf(),
    };
    match f.try_lock() {
        Ok(()) => {}
        Err(fs::TryLockError::WouldBlock) => return Err(locked()),
        Err(fs::TryLockError::Error(e)) => return Err(Error::io("lock", &path, e)),
    }
    Ok(DirLock {
        _file: f,
        _dir: lock_dir_itself(dir).map_err(|_| locked())?,
    })
}

/// Locks the directory's own inode: `Err` when another writer holds it,
/// `None` where a directory cannot be locked (a file system without
/// `flock` on directories: `LOCK` alone guards it there).
#[cfg(unix)]
fn lock_dir_itself(dir: &Path) -> std::result::Result<Option<File>, ()> {
    let Ok(d) = File::open(dir) else {
        return Ok(None);
    };
    match d.try_lock() {
        Ok(()) => Ok(Some(d)),
        Err(fs::TryLockError::WouldBlock) => Err(()),
        Err(fs::TryLockError::Error(_)) => Ok(None),
    }
}

#[cfg(not(unix))]
fn lock_dir_itself(_dir: &Path) -> std::result::Result<Option<File>, ()> {
    Ok(None)
}

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
    crate::file::create_dir_in(dir, &qdir)?;
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

/// The parts of a sub-filter's file name without its extension,
/// `<tier>-<label>-<index>` (`manifest::file_name`): the tier's code and the
/// window's label, each a non-empty run of ASCII letters and digits, and the
/// chain index, decimal digits that fit a `u32`. `None` for any other name.
fn seg_name_parts(stem: &str) -> Option<(&str, &str, u32)> {
    let (rest, index) = stem.rsplit_once('-')?;
    let (code, label) = rest.split_once('-')?;
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric());
    let digits = !index.is_empty() && index.bytes().all(|b| b.is_ascii_digit());
    if !(word(code) && word(label) && digits) {
        return None;
    }
    Some((code, label, index.parse().ok()?))
}

/// Whether `name` is one the engine gives a file in `seg/`: a sub-filter
/// (`<tier>-<label>-<index>.seg`) or its copy in large pages (`.large`),
/// with no leading dot. Only such files are deleted as leftovers.
fn made_in_seg(name: &str) -> bool {
    name.strip_suffix(".seg")
        .or_else(|| name.strip_suffix(".large"))
        .and_then(seg_name_parts)
        .is_some()
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

/// What a create made itself, and so removes if it fails.
#[derive(Clone, Copy)]
struct Made {
    /// `dir` itself (and the create removes it whole).
    dir: bool,
    /// `seg/` in a `dir` that was there before.
    seg: bool,
}

/// [`Error::AlreadyExists`] when `dir` holds a manifest.
fn refuse_existing(dir: &Path) -> Result<()> {
    if dir.join(MANIFEST).exists() {
        return Err(Error::AlreadyExists {
            path: dir.to_path_buf(),
        });
    }
    Ok(())
}

/// A directory of other files is refused before the lock file is made in
/// it (nothing is touched). Only while no `LOCK` is there: one made
/// meanwhile is a racing create's, which makes it before anything else, so
/// its files are refused under the lock (`Locked`, `AlreadyExists`), not as
/// `NotEmpty`.
fn refuse_foreign_files(dir: &Path, made_dir: bool) -> Result<()> {
    if !made_dir && !dir.join(LOCK).exists() {
        if let Err(e @ Error::NotEmpty { .. }) = check_empty(dir) {
            if !dir.join(LOCK).exists() {
                return Err(e);
            }
        }
    }
    Ok(())
}

/// Removes what a failed create made, while its lock is still held.
fn undo_create(dir: &Path, made: Made) {
    if made.dir {
        let _ = fs::remove_dir_all(dir);
        return;
    }
    // `check_empty` saw no engine files and an empty `seg/`: every file
    // there now is this call's.
    let _ = fs::remove_file(dir.join(MANIFEST));
    let _ = fs::remove_file(dir.join(MANIFEST).with_extension("tmp"));
    if let Ok(entries) = fs::read_dir(dir.join(SEG_DIR)) {
        for e in entries.flatten() {
            let _ = fs::remove_file(e.path());
        }
    }
    if made.seg {
        let _ = fs::remove_dir(dir.join(SEG_DIR));
    }
    // `check_empty` saw no `wal/`: the log and boot files this call made
    // under a logged policy. Left behind, the directory was refused by the
    // next create (not empty) and by open (no manifest).
    let _ = fs::remove_dir_all(dir.join(WAL_DIR));
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
        options.check()?;
        let now = options.clock.now_secs()?;
        refuse_existing(dir)?;
        let made_dir = make_dir(dir)?;
        refuse_foreign_files(dir, made_dir)?;
        let lock = lock_dir(dir)?;
        // From here on this call holds the lock: whatever it finds, no other
        // timebloom process is writing here.
        refuse_existing(dir)?;
        check_empty(dir)?;
        // The lock travels into the engine; a second descriptor of the same
        // open file keeps it held while a failed create cleans up.
        let guard = lock.try_clone(dir)?;
        let made = Made {
            dir: made_dir,
            seg: !dir.join(SEG_DIR).exists(),
        };
        let r = Engine::create_locked(dir, lock, config, options, now, made);
        if r.is_err() {
            // The engine (if any) is dropped, but `guard` still holds the lock.
            undo_create(dir, made);
        }
        drop(guard);
        r
    }

    /// The part of [`Engine::create_with`] done under the directory lock,
    /// once `dir` was found empty: makes `seg/` (when `made.seg`), writes
    /// the first manifest, starts the log, makes the windows of `now` and
    /// syncs the directory entries.
    fn create_locked(
        dir: &Path,
        lock: DirLock,
        config: Config,
        options: Options,
        now: i64,
        made: Made,
    ) -> Result<Engine> {
        if made.seg {
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
        if made.dir {
            let parent = match dir.parent() {
                Some(p) if !p.as_os_str().is_empty() => p,
                _ => Path::new("."),
            };
            crate::file::fsync_dir(parent)?;
        }
        Ok(engine)
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

    fn open_inner(dir: &Path, options: Options, read_only: bool) -> Result<Engine> {
        options.check()?;
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
        let now = options.clock.now_secs()?;
        let expired_at = match options.expired_at {
            Some(t) => crate::clock::instant(t)?,
            None => now,
        };
        let mut reading = Reading {
            dir,
            manifest: &manifest,
            seed_fp: seed_fingerprint(manifest.seed),
            read_only,
            degraded: options.degraded,
            verify: options.verify_on_open,
            now,
            expired_at,
            left: LeftOut {
                names: Vec::new(),
                // Those earlier degraded opens lost, until they expire.
                lost_at: (manifest.lost.iter())
                    .filter(|l| l.expires > now)
                    .copied()
                    .collect(),
                damaged: Vec::new(),
                unchecked: Vec::new(),
                windows: Vec::new(),
                newest: vec![None; manifest.config.tiers.len()],
            },
        };
        let mut tiers = reading.segments()?;
        let LeftOut {
            names: lost,
            mut lost_at,
            damaged,
            unchecked,
            windows: left_out,
            newest: lost_newest,
        } = reading.left;
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
        // A window lost again since an earlier open: once, with the later
        // expiry.
        lost_at.sort_by_key(|l| (l.tier, l.window, std::cmp::Reverse(l.expires)));
        lost_at.dedup_by_key(|l| (l.tier, l.window));
        // With one tier there is no other to look in: nothing to keep (and
        // batches stay in groups). But the manifest this open stores while
        // it leaves windows out names them as lost until their files are
        // deleted (see `remove_unnamed_files`): cleared after that.
        let one_tier = manifest.config.tiers.len() < 2;
        engine.lost_at = lost_at;
        // The windows whose files are no leftovers of a manifest put back
        // alone: those this open leaves out, and those any degraded open
        // lost (the manifest's list, expired entries too: this open's
        // expiry, after the deletion, has not yet dropped the windows
        // before them).
        let spared: Vec<(usize, i64)> = (left_out.iter().copied())
            .chain(manifest.lost.iter().map(|l| (l.tier, l.window)))
            .collect();
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
                engine.remove_unnamed_files(&named, &spared, assume_power_loss)?;
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
        if one_tier {
            let listed = !engine.lost_at.is_empty() || !manifest.lost.is_empty();
            engine.lost_at.clear();
            // The files are gone: the manifest lists no lost window again
            // (and goes back to a version older builds read).
            if listed && !read_only {
                let m = engine.maint.lock();
                let r = engine.store_manifest(&m, &engine.current.load());
                drop(m);
                if r.is_err() {
                    engine.failed.store(true, Ordering::Relaxed);
                }
                r?;
            }
        }
        engine.maintain_at(now, engine.allow_clock_jump, false)?;
        Ok(engine)
    }

    #[allow(clippy::too_many_arguments)]
    fn assemble(
        dir: &Path,
        lock: Option<DirLock>,
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
            read_past: AtomicI64::new(i64::MIN),
            table_day: Arc::new(AtomicU32::new(0)),
            manifest_generation: AtomicU64::new(generation),
            lost,
            damaged: Vec::new(),
            unchecked: Vec::new(),
            unrestored: Vec::new(),
            log_damage: None,
            lost_newest: Vec::new(),
            lost_at: Vec::new(),
            maint: Mutex::new(Maint {
                checkpoint_lsn,
                upkeep: Vec::new(),
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

    /// Deletes the files in `seg/` the manifest does not name (`named`)
    /// and that the engine makes ([`made_in_seg`]; any other file there,
    /// an editor's backup or an NFS `.nfs*` file, is left alone):
    /// what a crash left of a rotation, growth or expiry, and the files of
    /// the windows this open left out or a degraded open lost (`spared`:
    /// a crash of that open between its manifest and the deletion leaves
    /// them, and its manifest names them lost). A file past what the
    /// manifest names that holds keys is no such leftover (the engine
    /// names a file in the manifest before a key goes into it): the
    /// manifest is older than `seg/`. A copy taken by docs/operations.md's
    /// "Backup" is such a directory (windows opened while it was taken):
    /// its recovery replays the log from the manifest's checkpoint, which
    /// gives it what that procedure promises (the writes acknowledged
    /// before its first step), and such files go as before. Without that
    /// replay the manifest was put back alone (or the copy kept
    /// `wal/BOOT`), and deleting the file would lose keys it was
    /// acknowledged with: the open is refused naming it, before anything
    /// is deleted.
    fn remove_unnamed_files(
        &self,
        named: &[&str],
        spared: &[(usize, i64)],
        assume_power_loss: bool,
    ) -> Result<()> {
        let seg = self.dir.join(SEG_DIR);
        let entries = fs::read_dir(&seg).map_err(|e| Error::io("list directory", &seg, e))?;
        let mut unnamed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| Error::io("list directory", &seg, e))?;
            let name = entry.file_name();
            let ours = name
                .to_str()
                .is_some_and(|n| made_in_seg(n) && !named.contains(&n));
            if ours && entry.path().is_file() {
                unnamed.push((entry.path(), name));
            }
        }
        if !self.replays_since_checkpoint(assume_power_loss)? {
            let snap = self.current.load();
            for (path, name) in &unnamed {
                let past = name
                    .to_str()
                    .is_some_and(|n| self.past_manifest(&snap, n, spared));
                if past && crate::file::body_has_bits(path, crate::segment::BODY_OFFSET)? {
                    return Err(Error::Corrupt {
                        path: path.clone(),
                        reason: format!(
                            "holds keys, but {MANIFEST} does not name it (a {MANIFEST} older \
                             than seg/, put back alone?); an open would delete it: restore \
                             {MANIFEST}, seg/ and wal/ from one consistent copy, or move the \
                             file out of seg/ to go on without its keys"
                        ),
                    });
                }
            }
        }
        let removed = !unnamed.is_empty();
        for (path, _) in &unnamed {
            crate::file::check("remove leftover file", path)?;
            fs::remove_file(path).map_err(|e| Error::io("remove leftover file", path, e))?;
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

    /// Whether this open's recovery will replay the log from the
    /// manifest's checkpoint on (see `start_durability_with`): a log is
    /// there, it reaches back to the checkpoint, and the open recovers as
    /// after a power loss (asked to, or on another boot than the log's).
    fn replays_since_checkpoint(&self, assume_power_loss: bool) -> Result<bool> {
        let wal_dir = self.dir.join(WAL_DIR);
        let checkpoint = self.maint.lock().checkpoint_lsn;
        let reaches = match crate::wal::list(&wal_dir)?.first() {
            Some(&(first, _)) => first <= checkpoint,
            None => false,
        };
        Ok(reaches && super::durable::recovers_as_after_power_loss(&wal_dir, assume_power_loss))
    }

    /// Whether `name`, a file in `seg/` the manifest does not name, lies
    /// past what it names: a sub-filter after a named chain's last, or a
    /// window of a tier after its oldest live one, not one of the windows
    /// `spared` (left out or lost by a degraded open). (Older windows'
    /// files are what an expiry a crash interrupted left; a fingerprint
    /// chain's earlier tables expired.)
    fn past_manifest(&self, snap: &Snapshot, name: &str, spared: &[(usize, i64)]) -> bool {
        let Some((code, label, index)) = name.strip_suffix(".seg").and_then(seg_name_parts) else {
            return false;
        };
        let Some((ti, t)) = snap.tiers.iter().enumerate().find(|(_, t)| t.code == code) else {
            return false;
        };
        let window = match t.tier.is_table() {
            true if label == "table" => 0,
            true => return false,
            false => match window::parse_label(t.tier.span, label) {
                Some(w) => w,
                None => return false,
            },
        };
        if spared.contains(&(ti, window)) {
            return false;
        }
        match t.segments.iter().find(|s| s.window == window) {
            Some(seg) => index >= seg.next_index(),
            None => t.segments.first().is_some_and(|s| window > s.window),
        }
    }
}

/// What an open learns of the windows it leaves out (lost, damaged, or
/// expired and missing) while it opens the files the manifest names.
struct LeftOut {
    /// `TIER WINDOW` of each window this open lost (`Engine::lost`).
    names: Vec<String>,
    /// The lost windows the manifest keeps, earlier opens' included
    /// (`Engine::lost_at`).
    lost_at: Vec<LostWindow>,
    /// Why a read-only degraded open left each window out
    /// (`Engine::damaged`).
    damaged: Vec<Error>,
    /// The other files of those windows (`Engine::unchecked`).
    unchecked: Vec<(PathBuf, Identity)>,
    /// Every window left out: the manifest stops naming their files, so
    /// the files of such a window that opened (or were not tried) are
    /// leftovers too, deleted after the open. Kept, the first file of a
    /// lost open window would take the name of the one the open then
    /// makes for it.
    windows: Vec<(usize, i64)>,
    /// Per tier, the newest window a writer lost (`Engine::lost_newest`;
    /// none for tables).
    newest: Vec<Option<i64>>,
}

/// One open's reading of the segment files its manifest names.
struct Reading<'a> {
    dir: &'a Path,
    manifest: &'a Manifest,
    seed_fp: u64,
    read_only: bool,
    degraded: bool,
    verify: bool,
    now: i64,
    /// The instant windows count as expired at (`Options::expired_at`,
    /// else `now`).
    expired_at: i64,
    left: LeftOut,
}

impl Reading<'_> {
    /// Opens every window the manifest names, by tier (in the manifest's
    /// order), leaving out those whose files are missing or damaged as
    /// [`Reading::failed`] decides.
    fn segments(&mut self) -> Result<Vec<Vec<Segment>>> {
        let manifest = self.manifest;
        let mut tiers: Vec<Vec<Segment>> =
            manifest.config.tiers.iter().map(|_| Vec::new()).collect();
        'segments: for e in &manifest.segments {
            let tier = manifest.config.tiers[e.tier];
            let mut subs = Vec::with_capacity(e.files.len());
            for (i, f) in e.files.iter().enumerate() {
                let id = Identity {
                    span: tier.span,
                    window: e.window,
                    index: e.first + i as u32,
                };
                match self.open_file(&tier, f, id) {
                    Ok(sub) => subs.push(Arc::new(sub)),
                    Err(err) => {
                        self.failed(e, i, id, err)?;
                        continue 'segments;
                    }
                }
            }
            tiers[e.tier].push(Segment {
                window: e.window,
                subs,
            });
        }
        Ok(tiers)
    }

    /// Opens file `f` of a window of `tier`, checking that it is of the
    /// tier's kind (and a table, that it keeps the tier's days).
    fn open_file(&self, tier: &Tier, f: &str, id: Identity) -> Result<SubFilter> {
        let path = self.dir.join(SEG_DIR).join(f);
        let sub = if self.read_only {
            SubFilter::open_read_only(&path, id, self.seed_fp, self.verify)?
        } else {
            SubFilter::open(&path, id, self.seed_fp, self.verify)?
        };
        if sub.header().kind != tier.kind {
            return Err(Error::corrupt(
                &path,
                "segment kind differs from its tier's kind",
            ));
        }
        // A table read with another retention than its tier's takes keys
        // it still keeps for expired.
        if tier.is_table() && sub.header().retention != tier.table_days() {
            return Err(Error::corrupt(
                &path,
                format!(
                    "table keeps {} days after today, its tier {}",
                    sub.header().retention,
                    tier.table_days()
                ),
            ));
        }
        Ok(sub)
    }

    /// File `i` (identity `id`) of the window of entry `e` failed to open
    /// with `err`: `Ok` when the window is left out (and the open goes on
    /// without it), else the error the open fails with.
    fn failed(&mut self, e: &SegmentEntry, i: usize, id: Identity, err: Error) -> Result<()> {
        let (dir, read_only, degraded) = (self.dir, self.read_only, self.degraded);
        let tier = self.manifest.config.tiers[e.tier];
        let f = &e.files[i];
        let path = dir.join(SEG_DIR).join(f);
        let not_found = matches!(&err, Error::Io { source, .. }
            if source.kind() == std::io::ErrorKind::NotFound);
        // Windows the clock says have expired (the rotation after the open
        // drops them): a file of one that is missing was deleted by the
        // expiry of a writer whose manifest this is not the latest of (a
        // copy that took MANIFEST before seg/, docs/operations.md,
        // "Backup"). Nothing reads such a window, so it is left out rather
        // than refusing the directory.
        let expired = !tier.is_table()
            && window::index(
                tier.span,
                self.expired_at,
                self.manifest.config.utc_offset_secs,
            )
            .is_some_and(|c| e.window < tier.oldest_live(c));
        if not_found && expired {
            self.left.windows.push((e.tier, e.window));
            return Ok(());
        }
        let window = window_name(&tier, e.window);
        // A file the manifest names and the disk lacks (not moved to
        // quarantine by an earlier open: deleted, or left out of a copy)
        // is damage to a degraded open, which goes on without its window;
        // a plain open fails with "not found" as it is. A reader beside a
        // writer first checks that the manifest on disk is still the one
        // it read: a writer replaces it before it deletes what it no longer
        // names, and the reader then reads again (`open_read_only_with`).
        // A file an earlier open moved to quarantine is damage to a
        // read-only degraded open (`verify`) too, which would otherwise
        // leave the window out without a word.
        let moved = dir.join(QUARANTINE).join(f);
        let quarantined = not_found && moved.exists();
        let missing = not_found
            && !quarantined
            && (!read_only
                || Manifest::load(&dir.join(MANIFEST))
                    .is_ok_and(|m| m.as_ref() == Some(self.manifest)));
        let err = match (missing, quarantined) {
            _ if !degraded => err,
            (true, _) => Error::corrupt(&path, "missing, though the manifest names it"),
            (_, true) if read_only => Error::corrupt(
                &moved,
                "moved here from seg/ by an open that found it damaged",
            ),
            _ => err,
        };
        if missing && degraded && !read_only {
            self.lose(e, window, true);
            return Ok(());
        }
        if read_only && err.is_damage() && degraded {
            // A read-only open moves nothing; it only leaves the window
            // out.
            self.lose(e, window, false);
            self.left.damaged.push(err);
            // The window's other files, for `verify_each` to check too: it
            // names every damaged one, not only the one that left the
            // window out.
            self.left
                .unchecked
                .extend(
                    (e.files.iter().enumerate())
                        .filter(|&(j, _)| j != i)
                        .map(|(j, f)| {
                            let id = Identity {
                                index: e.first + j as u32,
                                ..id
                            };
                            (dir.join(SEG_DIR).join(f), id)
                        }),
                );
            return Ok(());
        }
        let Some(moved) = quarantine(dir, f, &err, read_only)? else {
            return Err(err);
        };
        if !degraded {
            return Err(Error::Quarantined {
                path: moved,
                window,
                reason: err.to_string(),
            });
        }
        // Degraded: go on without the whole window.
        self.lose(e, window, true);
        Ok(())
    }

    /// Leaves out the window of entry `e` (named `window`) as lost: kept
    /// in the manifest's list until it expires, and, when `newest` (a
    /// writer's open), noted as its tier's newest lost window.
    fn lose(&mut self, e: &SegmentEntry, window: String, newest: bool) {
        let lost = self.lost_window(e.tier, e.window);
        let left = &mut self.left;
        left.names.push(window);
        left.lost_at.push(lost);
        if newest && !self.manifest.config.tiers[e.tier].is_table() {
            let w = &mut left.newest[e.tier];
            *w = Some(w.map_or(e.window, |n| n.max(e.window)));
        }
        left.windows.push((e.tier, e.window));
    }

    /// A lost window, with the instant every key it held has expired by:
    /// its window's expiry, or a table's days kept from the newest day it
    /// took (today, or a later day a clock stepped back left).
    fn lost_window(&self, tier: usize, window: i64) -> LostWindow {
        let (now, offset) = (self.now, self.manifest.config.utc_offset_secs);
        let t = &self.manifest.config.tiers[tier];
        let (span, past) = if t.is_table() {
            let today = window::index(window::Span::Day, now, offset)
                .map(|d| d.max(i64::from(self.manifest.table_day)));
            (
                window::Span::Day,
                today.and_then(|d| d.checked_add(i64::from(t.retention))),
            )
        } else {
            (t.span, window.checked_add(i64::from(t.retention)))
        };
        let expires = past.and_then(|w| window::start(span, w, offset));
        LostWindow {
            tier,
            window,
            expires: expires.unwrap_or(i64::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::made_in_seg;
    use crate::manifest::file_name;
    use crate::window::Span;

    /// Every name the engine gives a sub-filter (each span, windows before
    /// and after the epoch, chain positions) and its large-page copy count
    /// as the engine's, so a crash's leftovers are still deleted; names
    /// close to them that the engine never makes do not.
    #[test]
    fn the_engines_own_names_and_only_those_are_its_leftovers() {
        let spans = [
            ("d", Span::Day),
            ("w", Span::Week),
            ("m", Span::Month),
            ("c3600", Span::Custom(3600)),
            ("c90", Span::Custom(90)),
            ("f", Span::Day),
        ];
        let mut checked = 0;
        for (code, span) in spans {
            for window in [-40_000i64, -1, 0, 1, 20_795, 20_800, 24_300, 600_000] {
                for index in [0u32, 1, 17, u32::MAX] {
                    let Some(name) = file_name(code, span, window, index) else {
                        continue;
                    };
                    assert!(made_in_seg(&name), "{name}");
                    let large = name.replace(".seg", ".large");
                    assert!(made_in_seg(&large), "{large}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "{checked} names");
        for other in [
            "d-20261207-0.seg~",
            ".d-20261207-0.seg.swp",
            ".nfs000000000012abcd00000001",
            "README",
            "d-20261207.seg",
            "d-20261207-.seg",
            "-20261207-0.seg",
            "d--0.seg",
            "d-2026_12-0.seg",
        ] {
            assert!(!made_in_seg(other), "{other}");
        }
    }
}
