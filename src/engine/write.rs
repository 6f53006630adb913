//! Inserts, backfills and removes.
//!
//! A writer reads one snapshot (see `snapshot`). A key that every open
//! window holds already (most keys of a crawl) is answered from the
//! snapshot alone, with no lock and no write. Otherwise the writer takes
//! the key's stripe (`filter::Stripes`) and, under it, checks that its
//! snapshot is still the current one (a rotation bumps the generation and
//! then waits for every stripe; a growth of a counting or table chain bumps
//! it under every stripe), checks the key again and
//! writes it with atomic read-modify-writes. So writers of different keys
//! share no lock, and of several threads inserting the same new key
//! exactly one is told it was new.

use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use crate::chain::{Lookup, Probes, Segment, MAX_GROUP, WRITE_LOADS};
use crate::clock::instant;
use crate::config::{SyncPolicy, Tier};
use crate::error::{Error, Result};
use crate::filter::{Exclusive, KeyMasks, Kind};
use crate::fingerprint::Insert;
use crate::hash::KeyHash;
use crate::wal::Op;

use super::rotate::growth_due;
use super::snapshot::{Snapshot, Source};
use super::{Engine, MAX_CHAIN};

/// What counts as seen for a check-and-insert (the answer is "new" when
/// the key was not).
#[derive(Clone, Copy)]
enum Seen {
    /// In any live window (`insert`).
    Live,
    /// Within a horizon of now (`insert_within`).
    Within(Duration),
}

/// How one attempt at a write ended.
enum Step<T> {
    Done(T),
    /// An open window is full: grow its chain, then try again.
    Grow,
    /// A newer snapshot was published: pick it up and try again.
    Stale,
}

impl Engine {
    /// Records `key` in the open window of every tier. Returns `true` when
    /// the key was not present in any live segment before (check-and-insert).
    ///
    /// Of several threads inserting the same new key at once, exactly one
    /// gets `true`. An error means the key was not recorded by this call,
    /// except two I/O errors of the write-ahead log, which come after the
    /// key's write and latch the engine: under `always`, a failed sync of
    /// the record is [`Error::Incomplete`] holding the call's one answer
    /// (the key is recorded, a later call answers "seen", but it may not
    /// survive a power loss); a failed write of the record is that error
    /// alone, and lookups may find the key although the call failed.
    #[inline]
    pub fn insert(&self, key: &[u8]) -> Result<bool> {
        self.insert_in(&mut self.current(), key)
    }

    /// Whether a write made now would first rotate (a window boundary has
    /// passed since the windows were last moved) or grow a full open
    /// window: work that creates files and syncs the manifest, or waits
    /// for another writer doing it, where an ordinary write only records
    /// its key. A hint for a caller that picks how to wait, such as a
    /// binding that lets other threads run meanwhile; the answer may be
    /// out of date as soon as it is given. (A fingerprint table found full
    /// by the write itself also grows; that is not foreseen here.)
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
    /// assert!(!engine.write_may_wait());
    /// clock.advance(Duration::from_secs(86_400));
    /// assert!(engine.write_may_wait()); // the next write opens a new window
    /// engine.insert(b"https://example.com/a")?;
    /// assert!(!engine.write_may_wait());
    /// # Ok(())
    /// # }
    /// ```
    pub fn write_may_wait(&self) -> bool {
        let snap = self.current.load();
        self.now().map_or(true, |now| now >= snap.next_boundary) || tails_due(&snap)
    }

    /// The clock for a write, rotating first if a boundary passed: the
    /// snapshot in `src` covers the returned instant.
    #[inline]
    fn ready<S: Source>(&self, src: &mut S) -> Result<i64> {
        loop {
            let snap = src.snap();
            self.check_usable(snap)?;
            let now = self.now()?;
            if now < snap.next_boundary {
                if now >= snap.ahead_from {
                    self.create_ahead(snap.next_boundary);
                }
                self.swap_soon();
                return Ok(now);
            }
            // Writers wait for the rotation (a key is recorded in the window
            // of the instant it was inserted at), holding no snapshot: the
            // expired windows' space returns before the new ones need it.
            src.release();
            let r = self.maintain_at(now, self.allow_clock_jump, true);
            src.refresh(self);
            r?;
        }
    }

    #[inline]
    pub(super) fn insert_in<S: Source>(&self, src: &mut S, key: &[u8]) -> Result<bool> {
        self.insert_synced(src, key, Seen::Live)
    }

    /// One check-and-insert, synced under `always`.
    ///
    /// The key's lines in the open windows are loaded first, before the
    /// engine's state and the clock are checked: a single call then ends
    /// soon enough after its wait for memory that the processor issues the
    /// next call's loads during it (a present key's insert into a 96 MB
    /// window: 204-229 -> 125-134 ns a call in a loop). Only a hint: when
    /// the snapshot is replaced meanwhile, the check reads the new one's
    /// lines without it.
    #[inline]
    fn insert_synced<S: Source>(&self, src: &mut S, key: &[u8], seen: Seen) -> Result<bool> {
        let h = self.hash(key);
        prefetch_open(src.snap(), h);
        self.writable()?;
        let new = self.insert_hashed(src, h, seen)?;
        self.synced(new)
    }

    /// The end of a single-key write: syncs it under `always`, then
    /// returns its answer, or on a failed sync `Incomplete` with the answer
    /// (the key is recorded: a later call answers as if the write
    /// succeeded, so the answer must reach the caller).
    #[inline]
    fn synced(&self, answer: bool) -> Result<bool> {
        match self.sync_writes() {
            Ok(()) => Ok(answer),
            Err(e) => Err(incomplete(vec![answer], e)),
        }
    }

    /// Claims a key that is due: when `key` was **not seen within
    /// `horizon`**, records it in the open window of every tier (as
    /// [`Engine::insert`]) and returns `true`; otherwise writes nothing and
    /// returns `false`. The check of [`Engine::contains_within`] and the
    /// insert in one step: "fetch it again after `horizon`", a recrawl
    /// schedule without a race between checking and recording. A key seen
    /// within the horizon is not recorded again, so asking often does not
    /// push its next due time back.
    ///
    /// Of several threads calling it for the same key at once, when the
    /// key was not seen within the horizon, exactly one gets `true`. The
    /// horizon is read as `contains_within` reads it: a key seen up to one
    /// window of the answering tier before the horizon may still count as
    /// seen (day precision for a fingerprint tier). A horizon longer than
    /// every tier keeps is [`Error::HorizonTooLong`], and nothing is written.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use timebloom::{Config, Engine, ManualClock, Options, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let clock = ManualClock::new(SystemTime::now());
    /// let engine = Engine::create_with(
    ///     dir.path().join("crawl.tb"),
    ///     Config { tiers: vec![Tier::daily(30)], expected_items_per_day: 1_000, ..Config::default() },
    ///     Options::default().clock(clock.clone()),
    /// )?;
    /// let week = Duration::from_secs(7 * 86_400);
    /// let url = b"https://example.com/a";
    /// assert!(engine.insert_within(url, week)?); // first seen: fetch
    /// clock.advance(Duration::from_secs(3 * 86_400));
    /// assert!(!engine.insert_within(url, week)?); // fetched 3 days ago: skip
    /// clock.advance(Duration::from_secs(5 * 86_400));
    /// assert!(engine.insert_within(url, week)?); // 8 days since: fetch again
    /// assert!(!engine.insert_within(url, week)?); // just claimed
    /// assert!(!engine.insert(url)?); // and it is known, as ever
    /// # Ok(())
    /// # }
    /// ```
    pub fn insert_within(&self, key: &[u8], horizon: Duration) -> Result<bool> {
        self.insert_within_in(&mut self.current(), key, horizon)
    }

    pub(super) fn insert_within_in<S: Source>(
        &self,
        src: &mut S,
        key: &[u8],
        horizon: Duration,
    ) -> Result<bool> {
        self.insert_synced(src, key, Seen::Within(horizon))
    }

    /// [`Engine::insert_within`] for many keys, one answer per key in input
    /// order (a key repeated in the batch is new at most once); under
    /// `always`, one sync for the batch. Errors as [`Engine::insert_batch`]:
    /// a batch stopped part way is [`Error::Incomplete`] with the answers of
    /// the keys it recorded. The keys are taken one by one, each key's
    /// lines in the open windows loaded a few keys ahead of its turn. A
    /// horizon no tier keeps is [`Error::HorizonTooLong`] even for an empty
    /// batch, as it is for a batch of keys.
    pub fn insert_within_batch<K: AsRef<[u8]>>(
        &self,
        keys: &[K],
        horizon: Duration,
    ) -> Result<Vec<bool>> {
        self.writable()?;
        let mut out = Vec::with_capacity(keys.len());
        let src = &mut self.current();
        let r = self.insert_each(src, keys, Seen::Within(horizon), &mut out);
        self.batch_answers(out, r)
    }

    /// The end of a batch of writes: one sync for the whole batch under
    /// `always` (group commit), then the answers, or `Incomplete` with the
    /// answers of the keys recorded before the error that stopped it. A
    /// failed sync is the cause, with the answers of every key recorded
    /// (all of them when nothing else stopped the batch): those keys are in
    /// the windows and a later call answers "seen", so their answers must
    /// reach the caller.
    fn batch_answers(&self, out: Vec<bool>, r: Result<()>) -> Result<Vec<bool>> {
        match (r, self.sync_writes()) {
            (Ok(()), Ok(())) => Ok(out),
            (Err(e), Ok(())) | (_, Err(e)) => Err(incomplete(out, e)),
        }
    }

    /// Check-and-insert of `keys` one at a time (answers into `out`), not
    /// yet synced: each key's lines in the open windows (or tables) are
    /// loaded [`AHEAD`] keys before its turn, so that several keys' loads
    /// are in flight while one is written.
    fn insert_each<S: Source, K: AsRef<[u8]>>(
        &self,
        src: &mut S,
        keys: &[K],
        seen: Seen,
        out: &mut Vec<bool>,
    ) -> Result<()> {
        if let Seen::Within(horizon) = seen {
            let now = self.ready(src)?;
            self.pick_tier(src.snap(), now, horizon)?;
        }
        let mut ahead = [KeyHash { lo: 0, hi: 0 }; AHEAD];
        for (slot, k) in ahead.iter_mut().zip(keys) {
            *slot = self.hash(k.as_ref());
            prefetch_open(src.snap(), *slot);
        }
        for i in 0..keys.len() {
            let h = ahead[i % AHEAD];
            if let Some(k) = keys.get(i + AHEAD) {
                let next = self.hash(k.as_ref());
                prefetch_open(src.snap(), next);
                ahead[i % AHEAD] = next;
            }
            out.push(self.insert_hashed(src, h, seen)?);
        }
        Ok(())
    }

    /// One check-and-insert of a hashed key, not yet synced under `always`
    /// (the caller syncs: once per key, or once per batch). The caller has
    /// issued the loads of the key's lines in the open windows
    /// (`prefetch_open`); the older windows of the full tier are loaded
    /// (`Probes`) only for a key its open one lacks.
    #[inline]
    fn insert_hashed<S: Source>(&self, src: &mut S, h: KeyHash, seen: Seen) -> Result<bool> {
        loop {
            let now = self.ready(src)?;
            match self.insert_one(src.snap(), h, now, seen)? {
                Step::Done(new) => return Ok(new),
                // A full open window grows before it takes the write.
                Step::Grow => self.grow()?,
                Step::Stale => {}
            }
            src.refresh(self);
        }
    }

    /// One check-and-insert against `snap`.
    #[inline]
    fn insert_one(&self, snap: &Snapshot, h: KeyHash, now: i64, seen: Seen) -> Result<Step<bool>> {
        let today = self.insert_day(snap, now)?;
        let quick = open_first(snap, h, today);
        // The older windows' probes, kept to test them again under the
        // stripe.
        let mut room = None;
        let mut older = None;
        // Whether the key is present, or `None` when there is nothing to
        // write (settled, or seen within the horizon).
        let check = match (seen, quick) {
            (Seen::Live, Quick::Settled) => None,
            (Seen::Live, Quick::Present) => Some(true),
            (Seen::Live, Quick::Older { open, older: rest }) => {
                let probes = Probes::start(&mut room, rest, h);
                let present = probes.any() || self.lost_contains(snap, now, h)?;
                older = Some((open, probes));
                Some(present)
            }
            (Seen::Live, Quick::Unknown) => {
                let present = self.seen(snap, h, now, seen)?;
                (!(present && settled(snap, h, today))).then_some(present)
            }
            (Seen::Within(_), _) => (!self.seen(snap, h, now, seen)?).then_some(false),
        };
        let Some(present) = check else {
            self.after_writer(h);
            return Ok(Step::Done(false));
        };
        let x = self.stripes.lock(h);
        if let Some(step) = self.recheck(snap, &x) {
            return Ok(step);
        }
        // The same snapshot (`recheck`), so the same windows: those the
        // check read, tested again.
        let again = || match &older {
            Some((open, probes)) => {
                Ok(open.contains(h) || probes.any() || self.lost_contains(snap, now, h)?)
            }
            None => self.seen(snap, h, now, seen),
        };
        self.write_locked(snap, &x, h, present, again, seen, now)
    }

    /// Under `always`, waits for a writer of `h` that may be in flight, for
    /// a key found present without its stripe: the bits it read may be a
    /// write whose call has not returned and whose log record is not yet
    /// appended (a writer holds the key's stripe from its write to its
    /// append). Without this, the sync before this call returns could miss
    /// that record, and the answer "seen" would not survive a power loss
    /// that the writer's own answer, not yet given, does not promise to
    /// survive: the key would be skipped and then forgotten. The other
    /// policies promise nothing per call, and pay nothing here.
    #[inline]
    fn after_writer(&self, h: KeyHash) {
        if self.policy == SyncPolicy::Always && self.wal.is_some() {
            drop(self.stripes.lock(h));
        }
    }

    /// Whether the key counts as seen for a check-and-insert: in any live
    /// window, or within a horizon.
    #[inline]
    fn seen(&self, snap: &Snapshot, h: KeyHash, now: i64, seen: Seen) -> Result<bool> {
        match seen {
            Seen::Live => self.seen_live(snap, now, h),
            Seen::Within(horizon) => self.within(snap, h, now, horizon),
        }
    }

    /// Under a stripe, before writing the open windows of `snap`: `Stale`
    /// when a newer snapshot was published (its open windows may have
    /// stopped taking writes), `Grow` when one of them is full.
    #[inline]
    fn recheck<T>(&self, snap: &Snapshot, _x: &Exclusive) -> Option<Step<T>> {
        if self.generation.load(Ordering::Acquire) != snap.generation {
            return Some(Step::Stale);
        }
        if tails_due(snap) {
            return Some(Step::Grow);
        }
        None
    }

    /// The write half of check-and-insert, under the key's stripe: checks
    /// again (`again`: whether it is present now) a key that tested absent
    /// (another writer of the same key may have inserted it since; it held
    /// the same stripe), then records it in every tier's open window.
    /// Returns whether the key was new, or `Grow` when a fingerprint table
    /// had no room (nothing written then).
    #[allow(clippy::too_many_arguments)]
    #[inline]
    fn write_locked(
        &self,
        snap: &Snapshot,
        x: &Exclusive,
        h: KeyHash,
        present: bool,
        again: impl FnOnce() -> Result<bool>,
        seen: Seen,
        now: i64,
    ) -> Result<Step<bool>> {
        let present = present || again()?;
        if present && matches!(seen, Seen::Within(_)) {
            // Seen within the horizon: not due, and not recorded again (the
            // key's last record stays the one that claimed it).
            return Ok(Step::Done(false));
        }
        let today = self.insert_day(snap, now)?;
        if let Some(step) = self.write_tables(snap, x, h, today, today, |_| true)? {
            return Ok(step);
        }
        let refused = self.logged(x, Op::Insert, snap.write_instant(now), h, || {
            let mut m = KeyMasks::new(h.lo);
            snap.tiers
                .iter()
                .filter(|t| !t.tier.is_table())
                .filter_map(|t| t.segments.last())
                .find(|seg| !seg.insert(x, h, &mut m))
        })?;
        if let Some(seg) = refused {
            return Err(read_only(seg));
        }
        Ok(Step::Done(!present))
    }

    /// The day fingerprint tables are read and written at, on the insert
    /// path; 0, never read, when no tier is a table: engines without one
    /// work out no day per insert.
    #[inline]
    fn insert_day(&self, snap: &Snapshot, now: i64) -> Result<u32> {
        if snap.tiers.iter().any(|t| t.tier.is_table()) {
            self.table_today_in(snap, now)
        } else {
            Ok(0)
        }
    }

    /// Records the key as seen on `day` in the fingerprint tables of the
    /// tiers `pick` accepts (by index), before the other tiers are written: a
    /// table without room answers `Grow` and nothing else is written, so
    /// the retry after growth counts a counting tier once. Tables are
    /// written outside the log's lock: their inserts of different keys
    /// commute (a key's day only moves forward), those of one key are
    /// ordered by its stripe, and a remove writes under the log's lock
    /// (see [`Engine::logged`]).
    fn write_tables(
        &self,
        snap: &Snapshot,
        x: &Exclusive,
        h: KeyHash,
        day: u32,
        today: u32,
        pick: impl Fn(usize) -> bool,
    ) -> Result<Option<Step<bool>>> {
        for (ti, t) in snap.tiers.iter().enumerate() {
            if !t.tier.is_table() || !pick(ti) {
                continue;
            }
            let Some(seg) = t.segments.last() else {
                continue;
            };
            match seg.table_insert(x, h, day, today) {
                None => return Err(read_only(seg)),
                // A chain at its longest grows no more (`growth_due`):
                // asking for growth again would retry for ever.
                Some(Insert::Full) if seg.subs.len() >= MAX_CHAIN => {
                    return Err(chain_full(&t.tier, seg))
                }
                Some(Insert::Full) => return Ok(Some(Step::Grow)),
                Some(_) => {}
            }
        }
        Ok(None)
    }

    /// Applies a write and logs it (under the logged policies): counting
    /// writes and every remove inside the log's lock, so replay applies
    /// them in the order they happened (see `Wal::append_applying`); Bloom
    /// and table inserts, which commute, before it.
    ///
    /// A table's remove does not commute with an insert of another key
    /// that shares its slot (the same fingerprint and bucket pair): an
    /// insert made after the remove took the slot gets one of its own and
    /// is new, one made before only found the slot. An insert writes its
    /// table before it takes the log's lock, so with the remove's write and
    /// record under that lock, an insert that wrote after the remove is
    /// logged after it too. (A remove applied before it took the lock let
    /// such an insert log first; replayed so, the insert found the removed
    /// key's slot and the remove took it: an insert acknowledged as new was
    /// gone after a power loss.)
    #[inline]
    fn logged<R>(
        &self,
        x: &Exclusive,
        op: Op,
        t: i64,
        h: KeyHash,
        apply: impl FnOnce() -> R,
    ) -> Result<R> {
        let Some(log) = &self.wal else {
            return Ok(apply());
        };
        if op != Op::Insert || self.config.tiers.iter().any(|t| t.kind == Kind::Counting) {
            let r = log.append_applying(op, t, h, apply).map(|(_, r)| r);
            return self.latch(r);
        }
        let r = apply();
        crate::file::pause("written, not logged", &self.dir);
        // Under `interval`, on engines of Bloom tiers, the record waits in
        // the thread's lane until a run of them moves (`Wal::stage`):
        // writer threads share no line of the log per key. Bloom writes
        // commute, so the order runs reach the log in does not matter;
        // tables and counting tiers, whose removes do not commute with
        // inserts of the same key, append at once, in stripe order. Under
        // `always` the call syncs its record before it returns.
        let staged = matches!(self.policy, SyncPolicy::Interval(_))
            && self.config.tiers.iter().all(|t| t.kind == Kind::Bloom);
        let logged = match staged {
            true => log.stage(x.lane(), op, t, h),
            false => log.append(op, t, h).map(drop),
        };
        self.latch(logged)?;
        Ok(r)
    }

    /// [`Engine::insert`] for many keys: one clock read, and per group of
    /// keys every memory load issued before any key is tested; only keys
    /// that need a write take their stripe.
    ///
    /// Answers come in input order. If an error stops the batch after some
    /// keys were recorded, the error is [`Error::Incomplete`] with the
    /// answers for those keys (a prefix of `keys`); no other key is
    /// recorded, except after an I/O error of the write-ahead log, which
    /// comes after a key's write: the key whose record failed may be
    /// recorded too. When the batch's closing sync fails (under `always`),
    /// the error is [`Error::Incomplete`] with that failure as its cause
    /// and the answers of every key recorded (the whole batch when nothing
    /// stopped it before): recorded, as a later call's "seen" shows, but
    /// not known to be durable.
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
        self.insert_batch_in(&mut self.current(), keys)
    }

    pub(super) fn insert_batch_in<S: Source, K: AsRef<[u8]>>(
        &self,
        src: &mut S,
        keys: &[K],
    ) -> Result<Vec<bool>> {
        self.writable()?;
        let mut out = Vec::with_capacity(keys.len());
        let r = self.insert_batch_steps(src, keys, &mut out);
        self.batch_answers(out, r)
    }

    fn insert_batch_steps<S: Source, K: AsRef<[u8]>>(
        &self,
        src: &mut S,
        keys: &[K],
        out: &mut Vec<bool>,
    ) -> Result<()> {
        let mut rest = keys;
        let mut now = self.ready(src)?;
        let tables = src.snap().tiers.iter().any(|t| t.tier.is_table());
        loop {
            // A fingerprint tier, or windows of the full tier a degraded
            // open left out: key by key (the groups below read the full
            // tier's windows only), synced once for the batch by the
            // caller. Asked again of each snapshot: the tier that reaches
            // furthest back can change at a rotation.
            if tables || self.lost_in_full(src.snap(), now) {
                return self.insert_each(src, rest, Seen::Live, out);
            }
            if rest.is_empty() {
                break;
            }
            match self.insert_groups(src.snap(), &mut rest, out, now)? {
                Step::Done(()) => break,
                Step::Grow => self.grow()?,
                Step::Stale => {}
            }
            src.refresh(self);
            now = self.ready(src)?;
        }
        Ok(())
    }

    /// Inserts groups of keys from `rest` against `snap` until done, or
    /// until a chain must grow or a newer snapshot appears; `rest` is left
    /// at the first key not answered, `out` holds the answers.
    fn insert_groups<K: AsRef<[u8]>>(
        &self,
        snap: &Snapshot,
        rest: &mut &[K],
        out: &mut Vec<bool>,
        now: i64,
    ) -> Result<Step<()>> {
        let today = self.insert_day(snap, now)?;
        // As `insert_one`: the open windows first, the full tier's older
        // windows only for the keys its open window does not hold.
        let full = &snap.tiers[snap.full_tier].segments;
        let mut look = Lookup::new(
            full.split_last().map_or(&[][..], |(_, older)| older),
            WRITE_LOADS,
        );
        // The full tier's open window, which with `look` is its live set
        // (`open_first`; batches of engines with a table go key by key, so
        // the tier is a Bloom tier).
        let opens_full = full.last();
        let opens: Vec<&Segment> = snap
            .tiers
            .iter()
            .filter_map(|t| t.segments.last())
            .collect();
        let mut hashes = [KeyHash { lo: 0, hi: 0 }; MAX_GROUP];
        while !rest.is_empty() {
            let (group, tail) = rest.split_at(look.group().min(rest.len()));
            look.clear();
            for (slot, k) in hashes.iter_mut().zip(group) {
                let h = self.hash(k.as_ref());
                *slot = h;
                for seg in &opens {
                    seg.prefetch(h);
                }
            }
            let hashes = &hashes[..group.len()];
            // Which keys are present, and which need no write at all.
            let first = out.len();
            let mut todo = [false; MAX_GROUP]; // key i needs a write
            let mut pending = [None; MAX_GROUP]; // key i's place in `look`
            for (i, h) in hashes.iter().enumerate() {
                let quick = open_first(snap, *h, today);
                out.push(false);
                match quick {
                    Quick::Settled => self.after_writer(*h),
                    Quick::Present => todo[i] = true,
                    Quick::Older { .. } | Quick::Unknown => {
                        todo[i] = true;
                        pending[i] = Some(look.hashes().len());
                        look.push(*h);
                    }
                }
            }
            // The older windows of the keys that need them, their loads
            // issued together above.
            for (i, j) in pending[..group.len()].iter().enumerate() {
                if let Some(j) = *j {
                    out[first + i] = !look.contains(j);
                }
            }
            for (i, h) in hashes.iter().enumerate() {
                if !todo[i] {
                    continue;
                }
                let x = self.stripes.lock(*h);
                // Fill counts are checked under the stripe, before the
                // write that would overfill a tail: grow first, then go on
                // from key i.
                if let Some(step) = self.recheck(snap, &x) {
                    out.truncate(first + i);
                    *rest = &rest[i..];
                    return Ok(step);
                }
                let was_present = !out[first + i];
                // The same snapshot (`recheck`): the windows the check read,
                // tested again (their addresses are still in `look`).
                let again = || match (opens_full, pending[i]) {
                    (Some(open), Some(j)) => Ok(open.contains(*h) || look.contains(j)),
                    _ => self.seen(snap, *h, now, Seen::Live),
                };
                match self.write_locked(snap, &x, *h, was_present, again, Seen::Live, now) {
                    Ok(Step::Done(new)) => out[first + i] = new,
                    // Only a table grows here, and batches of engines with
                    // a table go key by key: kept for completeness.
                    Ok(_) => {
                        out.truncate(first + i);
                        *rest = &rest[i..];
                        return Ok(Step::Grow);
                    }
                    Err(e) => {
                        out.truncate(first + i);
                        return Err(e);
                    }
                }
            }
            *rest = tail;
        }
        Ok(Step::Done(()))
    }

    /// Records `key` as seen at `time` (a backfill from a crawl log or a
    /// database): into the window holding `time` in every tier that still
    /// keeps it. Returns `true` when the key was not present in any live
    /// segment before. An instant whose window has expired in every tier,
    /// or that lies past a tier's newest window (the clock's, or a later
    /// one made before the clock stepped back behind it), is an error.
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
        let t = instant(time)?;
        let h = self.hash(key);
        let mut src = self.current();
        loop {
            let now = self.ready(&mut src)?;
            let snap = src.snap();
            let targets = self.backfill_targets(snap, now, t)?;
            let segs: Vec<Option<&Segment>> = targets
                .iter()
                .map(|&(ti, w)| snap.tiers[ti].segments.iter().find(|s| s.window == w))
                .collect();
            if segs.iter().all(Option::is_some) {
                if segs.iter().flatten().any(|s| growth_due(s)) {
                    self.grow_windows(Some(&targets))?;
                    src.refresh(self);
                    continue;
                }
                let x = self.stripes.lock(h);
                if self.generation.load(Ordering::Acquire) != snap.generation {
                    drop(x);
                    src.refresh(self);
                    continue;
                }
                // Checked under the stripe: a seal that starts now waits
                // for it, so the write below lands before the seal reads.
                if segs.iter().flatten().all(|s| !s.is_sealed()) {
                    let present = self.seen_live(snap, now, h)?;
                    let (day, today) = (self.day_of(t)?, self.table_today(now)?);
                    let pick = |ti: usize| targets.iter().any(|&(t, _)| t == ti);
                    if let Some(Step::Grow) = self.write_tables(snap, &x, h, day, today, pick)? {
                        drop(x);
                        self.grow_windows(Some(&targets))?;
                        src.refresh(self);
                        continue;
                    }
                    let tables: Vec<bool> = targets
                        .iter()
                        .map(|&(ti, _)| snap.tiers[ti].tier.is_table())
                        .collect();
                    self.logged(&x, Op::Insert, t, h, || {
                        let mut m = KeyMasks::new(h.lo);
                        for (seg, table) in segs.into_iter().zip(tables) {
                            if let (Some(seg), false) = (seg, table) {
                                seg.insert(&x, h, &mut m);
                            }
                        }
                    })?;
                    drop(x);
                    return self.synced(!present);
                }
            }
            // A past window is missing or sealed: make or reopen it.
            self.open_windows(now, t)?;
            src.refresh(self);
        }
    }

    /// Takes back one insert of `key` made now: decrements its counters in
    /// the windows inserts go to now (the open window of every tier), and
    /// only if every one of them holds the key. Returns whether it did:
    /// `true` when every one of them held the key, also when none of its
    /// counters could be decremented because all of them are saturated (a
    /// key inserted 15 times or more answers `true` to every remove and
    /// stays present, see below).
    ///
    /// Only for engines without a plain Bloom tier (every tier a counting
    /// tier, [`Tier::counting`](crate::Tier::counting), or a fingerprint
    /// tier, [`Tier::fingerprint`](crate::Tier::fingerprint)); otherwise
    /// [`Error::RemoveUnsupported`] and nothing changes. To undo an insert made at another instant (an
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
    /// (a counter reaches 15 and then never moves) stay saturated: a key
    /// removed as often as inserted may still test present where its
    /// counters saturated, and the remove still answers `true`.
    ///
    /// A fingerprint tier deletes one slot holding the key's fingerprint in
    /// its bucket pair: the key is gone for every horizon. Keys that share
    /// a fingerprint and a bucket pair share one slot (the second one's
    /// insert found the first one's slot and answered "seen", a false
    /// positive), so removing one of them, even one that was inserted,
    /// removes the other too: a false negative for it. The chance that a
    /// remove takes another key with it is about the table's false-positive
    /// rate at the time. Removing a key never inserted deletes such another
    /// key's slot with about the same chance.
    ///
    /// Under `always`, a remove whose sync fails is [`Error::Incomplete`]
    /// with its one answer: the remove is done, not known to be durable.
    pub fn remove(&self, key: &[u8]) -> Result<bool> {
        self.check_remove()?;
        self.remove_inner(self.hash(key), None)
    }

    /// Takes back one insert of `key` made at `time` (by [`Engine::insert`]
    /// during the window holding `time`, or by [`Engine::insert_at`]): the
    /// windows holding `time` in every tier that still keeps it, decremented
    /// only when every one of them holds the key. Returns whether it did.
    /// The same contract as [`Engine::remove`] otherwise; an instant older
    /// than every tier keeps, or past a tier's newest window, is an error
    /// (as for [`Engine::insert_at`]: `insert_at` and `remove_at` of one
    /// instant pair up also after the clock stepped back behind it).
    ///
    /// After the clock was stepped back behind the newest window, an
    /// [`Engine::insert`] still goes to that newest window, while `time`
    /// names the window of the clock's instant: such an insert is taken back
    /// by [`Engine::remove`], not by `remove_at` at the clock's instant
    /// (which answers `false`).
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
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
        self.remove_inner(self.hash(key), Some(instant(time)?))
    }

    fn check_remove(&self) -> Result<()> {
        if let Some(t) = self.config.tiers.iter().find(|t| t.kind == Kind::Bloom) {
            return Err(Error::RemoveUnsupported {
                tier: t.to_string(),
            });
        }
        self.writable()
    }

    /// Removes an insert made at `at` (`None`: now, as read after any
    /// rotation).
    fn remove_inner(&self, h: KeyHash, at: Option<i64>) -> Result<bool> {
        let mut src = self.current();
        loop {
            let clock = self.ready(&mut src)?;
            let snap = src.snap();
            // A plain remove takes back an insert made now, which went to
            // the newest windows even while the clock is behind them.
            let now = match at {
                Some(_) => clock,
                None => snap.write_instant(clock),
            };
            let t = at.unwrap_or(now);
            let targets = self.backfill_targets(snap, now, t)?;
            let mut segs = Vec::with_capacity(targets.len());
            for &(ti, w) in &targets {
                match snap.tiers[ti].segments.iter().find(|s| s.window == w) {
                    Some(seg) => segs.push(seg),
                    // No window there: the key was never inserted at `t`.
                    None => return Ok(false),
                }
            }
            let x = self.stripes.lock(h);
            if self.generation.load(Ordering::Acquire) != snap.generation {
                drop(x);
                src.refresh(self);
                continue;
            }
            // A fingerprint table holds one day per key: it holds the key
            // if any day it keeps does, and a remove deletes the key.
            let today = self.table_today(now)?;
            let days = |ti: usize| snap.tiers[ti].tier.table_days();
            let table = |ti: usize| snap.tiers[ti].tier.is_table();
            let holds = |(&(ti, _), s): (&(usize, i64), &&Segment)| match table(ti) {
                true => s.table_contains(h, today.saturating_sub(days(ti)), today),
                false => s.contains(h),
            };
            if !targets.iter().zip(&segs).all(holds) {
                return Ok(false);
            }
            if segs.iter().all(|s| !s.is_sealed()) {
                // A fingerprint table that no longer keeps `t`'s day is
                // left alone; replay learns it from the record, as it
                // does not know the table's day now.
                let untouched = snap.tiers.iter().enumerate().any(|(ti, tier)| {
                    tier.tier.is_table() && !targets.iter().any(|&(target, _)| target == ti)
                });
                let op = if untouched {
                    Op::RemoveWindows
                } else {
                    Op::Remove
                };
                self.logged(&x, op, t, h, || {
                    for (&(ti, _), seg) in targets.iter().zip(segs) {
                        match table(ti) {
                            true => seg.table_remove(&x, h, today, days(ti)),
                            false => seg.remove(&x, h),
                        };
                    }
                })?;
                drop(x);
                return self.synced(true);
            }
            drop(x);
            // A past window was sealed: reopen it for the decrement.
            self.open_windows(now, t)?;
            src.refresh(self);
        }
    }
}

/// True when inserting the key would write nothing: every tier's open
/// window holds it already in a Bloom segment, and every fingerprint table
/// holds it dated today.
#[inline]
fn settled(snap: &Snapshot, h: KeyHash, today: u32) -> bool {
    settled_except(snap, h, today, None)
}

/// [`settled`] for every tier but the one of index `skip`.
#[inline]
fn settled_except(snap: &Snapshot, h: KeyHash, today: u32, skip: Option<usize>) -> bool {
    snap.tiers.iter().enumerate().all(|(i, t)| {
        skip == Some(i)
            || t.segments.last().is_none_or(|s| match t.tier.is_table() {
                true => s.table_contains(h, today, today),
                false => s.settled(h),
            })
    })
}

/// What the open window of the tier reaching furthest back says of a key,
/// before its older windows are read (see [`open_first`]).
enum Quick<'s> {
    /// Every tier's open window holds it: present, and nothing to write.
    Settled,
    /// Present (in that open window), but some tier still needs the write.
    Present,
    /// Not in that open window (`open`): present if one of `older` (the
    /// rest of the tier's live set) holds it.
    Older {
        open: &'s Segment,
        older: &'s [Segment],
    },
    /// No shortcut (the tier is a fingerprint table, or has no window).
    Unknown,
}

/// How many keys ahead of its turn a key's lines are loaded when a batch
/// takes its keys one at a time ([`Engine::insert_each`]).
pub(super) const AHEAD: usize = 8;

/// Issues the loads of the key's lines in every tier's open window (its
/// block) or table (its two buckets).
#[inline]
fn prefetch_open(snap: &Snapshot, h: KeyHash) {
    for t in &snap.tiers {
        if let Some(seg) = t.segments.last() {
            match t.tier.is_table() {
                true => seg.prefetch_tables(h),
                false => seg.prefetch(h),
            }
        }
    }
}

/// The check of a check-and-insert that reads the open windows first: a
/// key most crawls insert is one seen today, which the open windows answer
/// alone, and a new key reads each of the tier's windows once.
///
/// Before the snapshot's boundary (`ready` saw to it) the tier's live set
/// is its snapshot windows, the open one last, so "in the open window or
/// in one of the others" is exactly [`Engine::live_full`]'s answer.
#[inline]
fn open_first<'s>(snap: &'s Snapshot, h: KeyHash, today: u32) -> Quick<'s> {
    let Some(t) = snap.tiers.get(snap.full_tier) else {
        return Quick::Unknown;
    };
    let Some((open, older)) = t.segments.split_last() else {
        return Quick::Unknown;
    };
    if t.tier.is_table() {
        return Quick::Unknown;
    }
    // Asked before the test of the open window waits for its line, so
    // that little is left to run after the wait: a single call then ends
    // soon enough for the next call's loads to go out during it.
    let takes = open.takes_bloom_writes();
    if !open.contains(h) {
        return Quick::Older { open, older };
    }
    if takes && settled_except(snap, h, today, Some(snap.full_tier)) {
        Quick::Settled
    } else {
        Quick::Present
    }
}

/// The error of a write that met a segment mapped read-only.
fn read_only(seg: &Segment) -> Error {
    Error::corrupt(
        seg.tail()
            .map(|s| s.path().to_path_buf())
            .unwrap_or_default(),
        "the open segment is mapped read-only",
    )
}

/// The error of a table write that found no room in the newest table of a
/// chain at its longest ([`MAX_CHAIN`] tables): nothing was written.
///
/// The plan is fixed at create, so the message says what frees room in the
/// engine as it is: keys expiring (a table whose every key has expired
/// leaves the chain at a day's rotation, and the chain grows again).
#[cold]
fn chain_full(tier: &Tier, seg: &Segment) -> Error {
    let path = seg.tail().map(|s| s.path().display().to_string());
    Error::config(format!(
        "{}: the fingerprint chain holds {MAX_CHAIN} tables, the most it may, and its \
         newest has no room for the key: writes of new keys fail until keys expire (after \
         the tier's {} days) and free room (a table whose every key has expired leaves the \
         chain at a day's rotation, and the chain grows again) (the plan is fixed at create: \
         for this many keys, create an engine with more planned keys per day or a larger \
         growth factor)",
        path.unwrap_or_default(),
        tier.retention
    ))
}

/// True when some tier's open window must grow before it takes a write.
#[inline]
fn tails_due(snap: &Snapshot) -> bool {
    snap.tiers
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

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicBool;
    use std::time::{Duration, Instant, SystemTime};

    use super::*;
    use crate::clock::{ManualClock, Options};
    use crate::config::Config;
    use crate::filter::stripe_of;

    /// Writers whose check passed before a counting chain grew, and who
    /// write after it grew (paused between the two, holding their keys'
    /// stripes), meet a chain that other writers already wrote past: the
    /// growth waits for them before it publishes. Otherwise their keys
    /// would land in the old tail after newer keys went to the new one, and
    /// such a newer key that the late write turned into a false positive
    /// of the old tail would have its remove taken from the old tail (the
    /// oldest holder) instead of the new one: a count left behind, and one
    /// taken from keys still inserted.
    #[test]
    fn a_counting_growth_waits_for_writers_that_checked_the_old_chain() {
        const LATE: usize = 48;
        let dir = tempfile::tempdir().unwrap();
        let cfg = Config {
            tiers: vec![Tier::daily(1).counting()],
            expected_items_per_day: 300,
            fpr: 0.05,
            sync: SyncPolicy::None,
            ..Config::default()
        };
        let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(86_400 * 20_000));
        let e = Engine::create_with(dir.path(), cfg, Options::default().clock(clock)).unwrap();
        let chain = |e: &Engine| e.current.load().tiers[0].segments[0].subs.len();
        // One key per stripe for the late writers; the other keys avoid
        // those stripes (the late writers hold them).
        let mut late: Vec<Vec<u8>> = Vec::new();
        let mut held = [false; crate::filter::STRIPES as usize];
        for i in 0.. {
            let k = format!("https://late.example/{i}").into_bytes();
            let s = stripe_of(e.hash(&k));
            if !held[s] {
                held[s] = true;
                late.push(k);
                if late.len() == LATE {
                    break;
                }
            }
        }
        let free = |k: &[u8]| !held[stripe_of(e.hash(k))];
        let fill: Vec<Vec<u8>> = (0..)
            .map(|i| format!("https://fill.example/{i}").into_bytes())
            .filter(|k| free(k))
            .take(2_000)
            .collect();
        let fresh: Vec<Vec<u8>> = (0..)
            .map(|i| format!("https://fresh.example/{i}").into_bytes())
            .filter(|k| free(k))
            .take(300)
            .collect();
        let ready = std::sync::Barrier::new(LATE + 1);
        let go = AtomicBool::new(false);
        let mut filled = 0;
        std::thread::scope(|s| {
            for k in &late {
                let (e, ready, go) = (&e, &ready, &go);
                s.spawn(move || {
                    // A writer's check: its stripe, the current snapshot,
                    // and no growth due.
                    let h = e.hash(k);
                    let x = e.stripes.lock(h);
                    let old = e.current.load_full();
                    let now = e.now().unwrap();
                    assert!(e.recheck::<bool>(&old, &x).is_none());
                    ready.wait();
                    // Paused until the chain grew and took newer keys (or,
                    // when the growth waits for this writer, a while).
                    let until = Instant::now() + Duration::from_millis(500);
                    while !go.load(Ordering::Acquire) && Instant::now() < until {
                        std::thread::sleep(Duration::from_millis(1));
                    }
                    let again = || e.seen(&old, h, now, Seen::Live);
                    let step = e.write_locked(&old, &x, h, false, again, Seen::Live, now);
                    assert!(matches!(step, Ok(Step::Done(_))));
                });
            }
            ready.wait();
            // Other writers fill the tail until the chain grows, then
            // write keys that go to the new tail.
            for k in &fill {
                e.insert(k).unwrap();
                filled += 1;
                if chain(&e) == 2 {
                    break;
                }
            }
            for k in &fresh {
                e.insert(k).unwrap();
            }
            go.store(true, Ordering::Release);
        });
        assert_eq!(chain(&e), 2);
        // Every key was inserted once. Taking back the fresh keys leaves
        // every other key present, and taking back every key leaves no
        // count behind (but in saturated counters).
        let removed = |keys: &[Vec<u8>]| keys.iter().filter(|k| e.remove(k).unwrap()).count();
        let fresh_removed = removed(&fresh);
        let lost = fill[..filled]
            .iter()
            .chain(&late)
            .filter(|k| !e.contains(k).unwrap())
            .count();
        let rest_removed = removed(&fill[..filled]) + removed(&late);
        // Cells still counted, less those saturated (a counter that
        // reached 15 stays there).
        let left: Vec<u64> = e.current.load().tiers[0].segments[0]
            .subs
            .iter()
            .map(|s| s.occupied().saturating_sub(s.saturated()))
            .collect();
        assert_eq!(
            (fresh_removed, lost, rest_removed, left.iter().sum::<u64>()),
            (fresh.len(), 0, filled + LATE, 0),
            "(fresh keys removed, keys lost after the fresh keys were taken back, other keys \
             removed, unsaturated cells still counted); per sub-filter: {left:?}"
        );
    }
}
