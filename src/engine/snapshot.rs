//! The live set as an immutable snapshot, and the handles that read it.
//!
//! The engine's live set (every tier's windows and their sub-filter files)
//! is a [`Snapshot`] behind an `Arc`. Rotation, growth, unsealing and
//! closing never change a snapshot: they build the next one, swap it in
//! and bump the engine's generation counter. A [`Handle`] keeps its own
//! `Arc` of the snapshot it last saw and compares that generation with
//! one plain atomic load per call, so a lookup writes no shared memory at
//! all; the engine's own methods load the current snapshot through
//! `arc_swap`, which writes only a slot owned by the calling thread.
//!
//! A snapshot holds its files' mappings: a file dropped from the live set
//! (an expired window, or one replaced by a copy in large pages) stays
//! mapped while some snapshot names it, and is unmapped by maintenance or
//! a release thread once none does ([`Engine::release`]), not inside a
//! reader's call (unless no thread could be started: then the last holder
//! unmaps it, a reader's call included). Expiry deletes the file right away; Linux keeps a
//! deleted file's blocks until its last mapping goes, so a reader still
//! holding an old snapshot reads valid memory, and the space returns soon
//! after it moves on.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use crate::chain::{Probes, Room, Segment, TableProbe};
use crate::config::Tier;
use crate::error::Result;
use crate::segment::SubFilter;

use super::Engine;

/// One tier's live windows.
#[derive(Clone)]
pub(super) struct TierState {
    pub tier: Tier,
    pub code: String,
    /// Live segments, oldest window first; the last one takes inserts.
    pub segments: Vec<Segment>,
    /// A fingerprint tier: the day of its last rotation (`None` before the
    /// first one since open: then its last sweep's day stands in).
    pub day: Option<i64>,
}

/// An immutable view of the live set.
#[derive(Clone)]
pub(crate) struct Snapshot {
    /// The engine generation this snapshot was published as.
    pub(super) generation: u64,
    pub(super) tiers: Vec<TierState>,
    /// The tier whose live windows reach furthest back: `contains` reads
    /// it alone (and, for a key it misses, the other tiers' windows that
    /// overlap a window of it a degraded open lost: `Engine::lost_contains`).
    pub(super) full_tier: usize,
    /// The earliest instant at which some tier's window ends. Before it the
    /// live set is exactly `tiers`; from it on, a lookup works out which
    /// windows are still live itself until a writer rotates.
    pub(super) next_boundary: i64,
    /// From this instant on, writers have the windows that open at
    /// `next_boundary` created ahead of it (see `ahead`).
    pub(super) ahead_from: i64,
    /// An instant inside the newest window of every tier (and the tables'
    /// day): see [`Snapshot::write_instant`].
    pub(super) open_from: i64,
    /// The engine was closed: every call fails.
    pub(super) closed: bool,
}

impl Snapshot {
    /// Issues the loads that a lookup of the key over the full tier makes
    /// (every window, or the table's two buckets), before the caller reads
    /// the clock, so the clock's read overlaps the memory's. The windows'
    /// probes are returned for the lookup to test: before the snapshot's
    /// boundary they are its live set.
    #[inline]
    pub(super) fn prefetch_full<'s, 'r>(
        &'s self,
        room: &'r mut Room<'s>,
        h: crate::hash::KeyHash,
    ) -> Option<Full<'s, 'r>> {
        let t = self.tiers.get(self.full_tier)?;
        if t.tier.is_table() {
            let probe = TableProbe::start(t.segments.last()?, h);
            return Some(Full::Table(probe, t.tier.table_days()));
        }
        Some(Full::Windows(Probes::start(room, &t.segments, h)))
    }

    /// The fingerprint tables' day ([`Engine::table_today`]) as the
    /// rotation that published this snapshot took it, while `now` is
    /// before the snapshot's boundary; `None` past it, or with no table.
    /// Exact there: the tables' day moves only at a rotation, and the
    /// boundary comes no later than the end of that day, so the clock's
    /// day is at most it. A rotation that a racing call does not see yet
    /// makes it answer as if it had run just before that rotation.
    #[inline]
    pub(super) fn table_today(&self, now: i64) -> Option<u32> {
        if now >= self.next_boundary {
            return None;
        }
        let day = self.tiers.iter().find(|t| t.tier.is_table())?.day?;
        u32::try_from(day).ok()
    }

    /// The instant a write made at clock reading `now` is made at: `now`,
    /// or, while the clock is behind the newest windows (which take the
    /// write), the latest start among them. The log records it, so that
    /// replay, which puts a record in the windows holding its instant,
    /// finds the windows written; a plain `remove` takes back from them.
    #[inline]
    pub(super) fn write_instant(&self, now: i64) -> i64 {
        now.max(self.open_from)
    }

    pub(super) fn empty(tiers: Vec<TierState>) -> Snapshot {
        Snapshot {
            generation: 0,
            tiers,
            full_tier: 0,
            // No boundary is known until the first rotation.
            next_boundary: i64::MIN,
            ahead_from: i64::MAX,
            open_from: i64::MIN,
            closed: false,
        }
    }
}

/// A key's loads over the full tier, issued by [`Snapshot::prefetch_full`].
pub(super) enum Full<'s, 'r> {
    /// Every live window's block.
    Windows(Probes<'s, 'r>),
    /// The table's buckets, with the days the tier keeps before today.
    Table(TableProbe<'s>, u32),
}

/// Where a call finds the live set: a [`Handle`]'s own snapshot, or the
/// engine's current one.
pub(super) trait Source {
    /// The snapshot to read.
    fn snap(&self) -> &Snapshot;
    /// Picks up the engine's current snapshot (after a rotation or growth).
    fn refresh(&mut self, engine: &Engine);
    /// Lets go of the snapshot (before a rotation: the expired windows'
    /// space returns once no snapshot maps them); `refresh` before reading.
    fn release(&mut self);
}

/// What a source holds between `release` and `refresh`: no windows, and a
/// generation no engine publishes, so a handle's next call refreshes.
fn released() -> Arc<Snapshot> {
    let mut s = Snapshot::empty(Vec::new());
    s.generation = u64::MAX;
    s.closed = true;
    Arc::new(s)
}

/// The engine's current snapshot, loaded for one call.
pub(super) struct Current(pub arc_swap::Guard<Arc<Snapshot>>);

impl Source for Current {
    #[inline]
    fn snap(&self) -> &Snapshot {
        &self.0
    }

    fn refresh(&mut self, engine: &Engine) {
        self.0 = engine.current.load();
    }

    fn release(&mut self) {
        self.0 = arc_swap::Guard::from_inner(released());
    }
}

/// A per-thread view of an [`Engine`] for the hot path: lookups, and
/// inserts of keys already present, through a handle write no memory that
/// other threads read (an insert of a new key takes its stripe's lock and
/// sets its cells, like [`Engine::insert`]).
///
/// A handle keeps the snapshot of the live set it last saw and checks, with
/// one atomic load per call, whether the engine has published a newer one
/// (after a rotation, a chain growth, a backfill that reopened a window or
/// a close, among others); only then does it pick it up. Make one per
/// worker thread (`engine.handle()`, or `clone` one): it is `Send`, and
/// its methods take `&mut self`.
///
/// Its methods behave exactly as the [`Engine`] methods of the same name.
/// A handle that stays idle keeps the windows it last saw mapped (not the
/// engine's other state): a window that expired meanwhile keeps its disk
/// space until shortly after the handle's next call or drop.
///
/// ```
/// use timebloom::{Config, Engine, Tier};
/// # fn main() -> timebloom::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// let engine = Engine::create(dir.path().join("crawl.tb"), Config {
///     tiers: vec![Tier::daily(7)],
///     expected_items_per_day: 1_000,
///     ..Config::default()
/// })?;
/// std::thread::scope(|s| {
///     for worker in 0..4 {
///         let mut h = engine.handle();
///         s.spawn(move || -> timebloom::Result<()> {
///             for page in 0..100 {
///                 let url = format!("https://example.com/{worker}/{page}");
///                 if h.insert(url.as_bytes())? {
///                     // new: fetch it
///                 }
///             }
///             Ok(())
///         });
///     }
/// });
/// assert!(engine.handle().contains(b"https://example.com/3/99")?);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Handle<'a> {
    engine: &'a Engine,
    snap: Arc<Snapshot>,
}

impl std::fmt::Debug for Handle<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("dir", &self.engine.path())
            .field("generation", &self.snap.generation)
            .finish()
    }
}

impl Source for Handle<'_> {
    #[inline]
    fn snap(&self) -> &Snapshot {
        &self.snap
    }

    fn refresh(&mut self, engine: &Engine) {
        self.snap = engine.current.load_full();
    }

    fn release(&mut self) {
        self.snap = released();
    }
}

impl<'a> Handle<'a> {
    pub(super) fn new(engine: &'a Engine) -> Handle<'a> {
        Handle {
            engine,
            snap: engine.current.load_full(),
        }
    }

    /// Picks up a newer snapshot if the engine published one: one load of
    /// a counter that only a publish writes (rotation, growth, a backfill
    /// reopening a window, a drained table dropped, a copy in large pages
    /// swapped in, close).
    #[inline]
    fn fresh(&mut self) -> &mut Self {
        if self.engine.generation.load(Ordering::Acquire) != self.snap.generation {
            self.snap = self.engine.current.load_full();
        }
        self
    }

    /// The engine this handle reads.
    pub fn engine(&self) -> &'a Engine {
        self.engine
    }

    /// [`Engine::contains`].
    #[inline]
    pub fn contains(&mut self, key: &[u8]) -> Result<bool> {
        let engine = self.engine;
        engine.contains_in(&self.fresh().snap, key)
    }

    /// [`Engine::contains_batch`].
    pub fn contains_batch<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<bool>> {
        let engine = self.engine;
        engine.contains_batch_in(&self.fresh().snap, keys)
    }

    /// [`Engine::contains_within`].
    pub fn contains_within(&mut self, key: &[u8], horizon: Duration) -> Result<bool> {
        let engine = self.engine;
        engine.contains_within_in(&self.fresh().snap, key, horizon)
    }

    /// [`Engine::insert`].
    #[inline]
    pub fn insert(&mut self, key: &[u8]) -> Result<bool> {
        let engine = self.engine;
        engine.insert_in(self.fresh(), key)
    }

    /// [`Engine::insert_within`].
    pub fn insert_within(&mut self, key: &[u8], horizon: Duration) -> Result<bool> {
        let engine = self.engine;
        engine.insert_within_in(self.fresh(), key, horizon)
    }

    /// [`Engine::insert_batch`].
    pub fn insert_batch<K: AsRef<[u8]>>(&mut self, keys: &[K]) -> Result<Vec<bool>> {
        let engine = self.engine;
        engine.insert_batch_in(self.fresh(), keys)
    }
}

impl Engine {
    /// A handle for one worker thread: the same lookups and inserts, with a
    /// read path that writes no shared memory (see [`Handle`]).
    pub fn handle(&self) -> Handle<'_> {
        Handle::new(self)
    }

    /// The current snapshot, for one call.
    #[inline]
    pub(super) fn current(&self) -> Current {
        Current(self.current.load())
    }

    /// Swaps in `next` as the live set and bumps the generation; the caller
    /// holds the maintenance lock (one publisher at a time).
    ///
    /// The snapshot is stored before the generation, so a handle that sees
    /// the new generation loads this snapshot or a later one. A writer that
    /// checks the generation under its stripe lock after a publisher's
    /// `Stripes::lock_all` sees the new one (the locks order the two).
    pub(super) fn publish(&self, mut next: Snapshot) -> Arc<Snapshot> {
        let g = self.generation.load(Ordering::Relaxed) + 1;
        next.generation = g;
        let next = Arc::new(next);
        self.current.store(Arc::clone(&next));
        self.generation.store(g, Ordering::Release);
        next
    }

    /// Lets go of sub-filters that left the live set (expired, drained, or
    /// replaced by a copy in large pages). Those no snapshot holds any more
    /// are unmapped now, by the caller (maintenance, under its lock: an
    /// expiry's space returns before the rotation creates new windows);
    /// the rest on a thread of their own once the last snapshot holding
    /// them goes. Otherwise the handle that dropped that snapshot would
    /// unmap them inside a lookup: 11-12 ms for a 1.1 GB window mapped in
    /// 4 KiB pages (docs/benchmarks.md, "The year's lookup at scale").
    /// The thread checks every 10 ms, backing off to once a second (an
    /// idle handle may hold a snapshot for long); no thread to be had, the
    /// last holder unmaps them as before.
    pub(super) fn release(subs: Vec<Arc<SubFilter>>) {
        let held: Vec<Arc<SubFilter>> = subs
            .into_iter()
            .filter(|s| Arc::strong_count(s) > 1)
            .collect();
        Engine::release_later(held);
    }

    /// [`Engine::release`] with every sub-filter left to the release
    /// thread, held or not (for callers that must not unmap).
    pub(super) fn release_later(mut held: Vec<Arc<SubFilter>>) {
        if held.is_empty() {
            return;
        }
        let _ = super::ahead::spawn_background("timebloom-release", move || {
            let mut wait = Duration::from_millis(10);
            loop {
                // Only this thread holds a count of 1: nothing can
                // clone it meanwhile.
                held.retain(|s| Arc::strong_count(s) > 1);
                if held.is_empty() {
                    return;
                }
                std::thread::sleep(wait);
                wait = (wait * 2).min(Duration::from_secs(1));
            }
        });
    }
}
