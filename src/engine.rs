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

use parking_lot::RwLock;

use crate::chain::{any_contains, Lookup, Segment, MAX_GROUP};
use crate::clock::{instant, Options, TimeSource};
use crate::config::{Config, Tier};
use crate::error::{Error, Result};
use crate::filter::{sizing, Exclusive, Kind, WriteLock};
use crate::hash::{hash_key, random_seed, seed_fingerprint, KeyHash};
use crate::manifest::{file_name, Manifest, SegmentEntry};
use crate::segment::{Identity, SubFilter};
use crate::stats::{SegmentStats, Stats, TierStats};
use crate::window;

const MANIFEST: &str = "MANIFEST";
const LOCK: &str = "LOCK";
const SEG_DIR: &str = "seg";
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
    _lock: File,
    seed: u64,
    config: Config,
    clock: TimeSource,
    state: RwLock<Live>,
    /// Serializes every write to segment words (see the module docs).
    writer: WriteLock,
    /// The earliest instant at which some tier's window ends.
    next_boundary: AtomicI64,
    failed: AtomicBool,
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

impl Engine {
    /// Creates a new engine in `dir` (created if missing) with the system clock.
    pub fn create(dir: impl AsRef<Path>, config: Config) -> Result<Engine> {
        Engine::create_with(dir, config, Options::default())
    }

    /// Creates a new engine with explicit [`Options`].
    pub fn create_with(dir: impl AsRef<Path>, config: Config, options: Options) -> Result<Engine> {
        let dir = dir.as_ref();
        config.validate()?;
        let now = options.clock.now_secs()?;
        if dir.join(MANIFEST).exists() {
            return Err(Error::AlreadyExists {
                path: dir.to_path_buf(),
            });
        }
        let fresh = !dir.exists();
        let r = (|| {
            fs::create_dir_all(dir.join(SEG_DIR))
                .map_err(|e| Error::io("create directory", dir, e))?;
            let lock = lock_dir(dir)?;
            if dir.join(MANIFEST).exists() {
                return Err(Error::AlreadyExists {
                    path: dir.to_path_buf(),
                });
            }
            let engine = Engine::assemble(dir, lock, random_seed(), config, options, Vec::new(), 0);
            engine.remove_unnamed_files(&[])?;
            engine.maintain_at(now)?;
            Ok(engine)
        })();
        if r.is_err() && fresh {
            // Leave no half-made engine behind in a directory we made.
            let _ = fs::remove_dir_all(dir);
        }
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
        let dir = dir.as_ref();
        if !dir.join(MANIFEST).exists() {
            return Err(Error::NotFound {
                path: dir.to_path_buf(),
            });
        }
        let lock = lock_dir(dir)?;
        let manifest = Manifest::load(&dir.join(MANIFEST))?.ok_or_else(|| Error::NotFound {
            path: dir.to_path_buf(),
        })?;
        let seed_fp = seed_fingerprint(manifest.seed);
        let mut tiers: Vec<Vec<Segment>> =
            manifest.config.tiers.iter().map(|_| Vec::new()).collect();
        for e in &manifest.segments {
            let tier = manifest.config.tiers[e.tier];
            let mut subs = Vec::with_capacity(e.files.len());
            for (i, f) in e.files.iter().enumerate() {
                let id = Identity {
                    span: tier.span,
                    window: e.window,
                    index: i as u32,
                };
                let path = dir.join(SEG_DIR).join(f);
                let sub = SubFilter::open(&path, id, seed_fp, options.verify_on_open)?;
                if sub.header().kind != tier.kind {
                    return Err(Error::corrupt(
                        &path,
                        "segment kind differs from its tier's kind",
                    ));
                }
                subs.push(sub);
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
        let engine = Engine::assemble(
            dir,
            lock,
            manifest.seed,
            manifest.config.clone(),
            options,
            tiers,
            manifest.generation,
        );
        engine.remove_unnamed_files(&named)?;
        engine.maintain_at(now)?;
        Ok(engine)
    }

    fn assemble(
        dir: &Path,
        lock: File,
        seed: u64,
        config: Config,
        options: Options,
        segments: Vec<Vec<Segment>>,
        generation: u64,
    ) -> Engine {
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
            seed,
            config,
            clock: options.clock,
            state: RwLock::new(Live {
                tiers,
                generation,
                full_tier: 0,
                closed: false,
            }),
            writer: WriteLock::default(),
            next_boundary: AtomicI64::new(i64::MIN),
            failed: AtomicBool::new(false),
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
            self.maintain_at(now)?;
        }
        Ok(now)
    }

    /// Rotates and expires as of `now`, and reseals segments that a backfill
    /// or a remove reopened. Inserts and lookups do this by themselves when
    /// a window boundary passes; call it to do it at a chosen moment.
    pub fn maintain(&self, now: SystemTime) -> Result<()> {
        self.maintain_at(instant(now)?)
    }

    fn maintain_at(&self, now: i64) -> Result<()> {
        let mut st = self.state.write();
        self.check_usable(&st)?;
        let r = self.rotate(&mut st, now);
        self.latch(r)
    }

    fn check_usable(&self, st: &Live) -> Result<()> {
        if self.failed.load(Ordering::Relaxed) || st.closed {
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
    /// 1. create the new windows' files, fsync them and the directory;
    /// 2. seal every segment that is no longer the newest of its tier;
    /// 3. write the manifest naming the new set (the commit point);
    /// 4. delete the files of expired segments.
    fn rotate(&self, st: &mut Live, now: i64) -> Result<()> {
        let off = self.config.utc_offset_secs;
        let mut created = false;
        for ti in 0..st.tiers.len() {
            let cur = self.window_index(st.tiers[ti].tier.span, now)?;
            let t = &st.tiers[ti];
            if t.segments.last().is_none_or(|s| s.window < cur) {
                let seg = self.new_segment(t, cur)?;
                st.tiers[ti].segments.push(seg);
                created = true;
            }
        }
        if created {
            crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
        }
        let mut expired = Vec::new();
        for t in &mut st.tiers {
            let cur = self.window_index(t.tier.span, now)?;
            let keep_from = t.tier.oldest_live(cur);
            let n = t.segments.partition_point(|s| s.window < keep_from);
            expired.extend(t.segments.drain(..n));
            let newest = t.segments.len().saturating_sub(1);
            for (i, seg) in t.segments.iter_mut().enumerate() {
                for s in &mut seg.subs {
                    if i == newest {
                        // The newest segment takes inserts: after a crash
                        // between sealing and the manifest it may be sealed.
                        s.unseal()?;
                    } else {
                        // Also reseals what a backfill or remove reopened.
                        s.seal()?;
                    }
                }
            }
        }
        if created || !expired.is_empty() {
            self.store_manifest(st)?;
            let paths: Vec<PathBuf> = expired
                .iter()
                .flat_map(|seg| seg.subs.iter().map(|s| s.path().to_path_buf()))
                .collect();
            drop(expired); // unmap before deleting
            for p in &paths {
                match fs::remove_file(p) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => return Err(Error::io("delete expired segment", p, e)),
                }
            }
            if !paths.is_empty() {
                crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
            }
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
                if !seg.needs_growth() || seg.is_sealed() || seg.subs.len() >= MAX_CHAIN {
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
        let r =
            crate::file::fsync_dir(&self.dir.join(SEG_DIR)).and_then(|()| self.store_manifest(st));
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
    /// gets `true`.
    pub fn insert(&self, key: &[u8]) -> Result<bool> {
        self.tick()?;
        let h = self.hash(key);
        let (new, grow) = {
            let st = self.state.read();
            self.check_usable(&st)?;
            self.insert_locked(&st, h)?
        };
        if grow {
            self.grow()?;
        }
        Ok(new)
    }

    /// Check-and-insert under the shared lock: `(was new, needs growth)`.
    #[inline]
    fn insert_locked(&self, st: &Live, h: KeyHash) -> Result<(bool, bool)> {
        for t in &st.tiers {
            if let Some(seg) = t.segments.last() {
                seg.prefetch(h);
            }
        }
        let present = any_contains(&st.tiers[st.full_tier].segments, h);
        if present && settled(st, h) {
            return Ok((false, false));
        }
        let x = self.writer.lock();
        self.write_locked(st, &x, h, present)
    }

    /// The write half of check-and-insert, under the writer lock: checks
    /// again a key that tested absent (another writer may have inserted it
    /// since), then records it in every tier's open window.
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
    ) -> Result<(bool, bool)> {
        let full = &st.tiers[st.full_tier].segments;
        let present = present || full.iter().rev().any(|s| !s.is_sealed() && s.contains(h));
        let mut grow = false;
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
            grow |= seg.needs_growth();
        }
        Ok((!present, grow))
    }

    /// [`Engine::insert`] for many keys: one clock read, one shared lock,
    /// and per group of keys: every memory load issued before any key is
    /// tested, then one writer lock for the keys that need a write.
    pub fn insert_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.tick()?;
        let mut out = Vec::with_capacity(keys.len());
        let mut rest = keys;
        while !rest.is_empty() {
            let mut grow = false;
            {
                let st = self.state.read();
                self.check_usable(&st)?;
                let mut look = Lookup::new(&st.tiers[st.full_tier].segments);
                // The open windows of the other tiers take writes too.
                let tails: Vec<&Segment> = (st.tiers.iter().enumerate())
                    .filter(|&(ti, _)| ti != st.full_tier)
                    .filter_map(|(_, t)| t.segments.last())
                    .collect();
                // Groups until a chain must grow: growth needs the exclusive
                // lock, and a full sub-filter must not keep taking keys.
                while !grow && !rest.is_empty() {
                    let (group, tail) = rest.split_at(look.group().min(rest.len()));
                    rest = tail;
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
                            if todo[i] {
                                let was_present = !out[first + i];
                                let (new, g) = self.write_locked(&st, &x, *h, was_present)?;
                                out[first + i] = new;
                                grow |= g;
                            }
                        }
                    }
                }
            }
            if grow {
                self.grow()?;
            }
        }
        Ok(out)
    }

    /// Whether `key` is present in any live segment. Never a false negative
    /// for a key inserted within the retention (and not removed); a false
    /// positive at most at the configured rate.
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        self.tick()?;
        let h = self.hash(key);
        let st = self.state.read();
        self.check_usable(&st)?;
        Ok(any_contains(&st.tiers[st.full_tier].segments, h))
    }

    /// [`Engine::contains`] for many keys, loads of a group issued first.
    pub fn contains_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.tick()?;
        let st = self.state.read();
        self.check_usable(&st)?;
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
    pub fn contains_within(&self, key: &[u8], horizon: Duration) -> Result<bool> {
        let now = self.tick()?;
        let h = self.hash(key);
        let st = self.state.read();
        self.check_usable(&st)?;
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
    pub fn insert_at(&self, key: &[u8], time: SystemTime) -> Result<bool> {
        let now = self.tick()?;
        let t = instant(time)?;
        let h = self.hash(key);
        loop {
            let (new, grow) = {
                let st = self.state.read();
                self.check_usable(&st)?;
                let targets = self.backfill_targets(&st, now, t)?;
                if targets
                    .iter()
                    .any(|&(ti, w)| !has_open_segment(&st.tiers[ti], w))
                {
                    drop(st);
                    self.open_windows(now, t)?;
                    continue;
                }
                let x = self.writer.lock();
                let present = any_contains(&st.tiers[st.full_tier].segments, h);
                let mut grow = false;
                for (ti, w) in targets {
                    if let Some(seg) = st.tiers[ti].segments.iter().find(|s| s.window == w) {
                        seg.insert(&x, h);
                        grow |= seg.needs_growth();
                    }
                }
                (!present, grow)
            };
            if grow {
                self.grow()?;
            }
            return Ok(new);
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
            for (ti, w) in targets {
                let ts = &st.tiers[ti];
                match ts.segments.binary_search_by_key(&w, |s| s.window) {
                    Ok(i) => {
                        for s in &mut st.tiers[ti].segments[i].subs {
                            s.unseal()?;
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
                self.store_manifest(&mut st)?;
            }
            Ok(())
        })();
        self.latch(r)
    }

    /// Takes `key` back: decrements its counters in every live segment that
    /// holds it. Only for engines whose tiers are all counting tiers
    /// ([`Tier::counting`]); otherwise [`Error::RemoveUnsupported`] and
    /// nothing changes. Returns whether any segment held the key.
    ///
    /// Removing a key that was never inserted may remove another key that
    /// shares its counters (true of every counting filter): remove only
    /// keys you inserted.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        if let Some(t) = self.config.tiers.iter().find(|t| t.kind != Kind::Counting) {
            return Err(Error::RemoveUnsupported {
                tier: t.to_string(),
            });
        }
        self.tick()?;
        let h = self.hash(key);
        loop {
            let st = self.state.read();
            self.check_usable(&st)?;
            let x = self.writer.lock();
            let holders = || {
                st.tiers
                    .iter()
                    .flat_map(|t| t.segments.iter())
                    .filter(|s| s.contains(h))
            };
            if holders().any(Segment::is_sealed) {
                drop(x);
                drop(st);
                self.unseal_holders(h)?;
                continue;
            }
            let mut any = false;
            for seg in holders() {
                any |= seg.remove(&x, h);
            }
            return Ok(any);
        }
    }

    fn unseal_holders(&self, h: KeyHash) -> Result<()> {
        let mut st = self.state.write();
        self.check_usable(&st)?;
        let r = (|| {
            for t in &mut st.tiers {
                for seg in &mut t.segments {
                    if seg.is_sealed() && seg.contains(h) {
                        for s in &mut seg.subs {
                            s.unseal()?;
                        }
                    }
                }
            }
            Ok(())
        })();
        self.latch(r)
    }

    // ---- durability and reporting --------------------------------------------

    /// Makes every insert so far durable (msync, header, fsync), and
    /// reseals segments that a backfill or remove reopened.
    pub fn flush(&self) -> Result<()> {
        let now = self.now()?;
        let mut st = self.state.write();
        self.check_usable(&st)?;
        let r = (|| {
            self.rotate(&mut st, now)?;
            for t in &mut st.tiers {
                for seg in &mut t.segments {
                    for s in &mut seg.subs {
                        s.flush()?;
                    }
                }
            }
            Ok(())
        })();
        self.latch(r)
    }

    /// Checks every sealed segment's body checksum and fill count.
    pub fn verify(&self) -> Result<()> {
        let st = self.state.read();
        for t in &st.tiers {
            for seg in &t.segments {
                for s in &seg.subs {
                    s.verify()?;
                }
            }
        }
        Ok(())
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
        if self.failed.load(Ordering::Relaxed) {
            // Nothing is written after an I/O error; the caller learns that
            // the last writes may not have reached the disk.
            return Err(Error::PreviousIo);
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
        let now = self.tick()?;
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
                let mut s = SegmentStats {
                    window: window::label(t.tier.span, seg.window).unwrap_or_default(),
                    window_start: window::start(t.tier.span, seg.window, off).unwrap_or(0),
                    window_end: window::end(t.tier.span, seg.window, off).unwrap_or(0),
                    state: if seg.is_sealed() { "sealed" } else { "open" },
                    subfilters: seg.subs.len(),
                    bytes: 0,
                    cells: 0,
                    occupied: 0,
                    fill: 0.0,
                    estimated_items: 0,
                    estimated_fpr: 0.0,
                    saturated: 0,
                };
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

fn has_open_segment(t: &TierState, w: i64) -> bool {
    t.segments.iter().any(|s| s.window == w && !s.is_sealed())
}

impl Drop for Engine {
    fn drop(&mut self) {
        let _ = self.close_inner();
    }
}
