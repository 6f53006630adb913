//! Lookups (`contains`, `contains_within`, batches), stats and verify.
//!
//! A lookup reads one snapshot (see `snapshot`) and takes no lock: not the
//! maintenance lock, not a stripe. It never rotates either; past a window
//! boundary that no writer has crossed yet it skips the windows the clock
//! says have expired.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::chain::{any_contains, Lookup, Segment, MAX_GROUP, READ_LOADS};
use crate::error::{Error, Result};
use crate::filter::sizing;
use crate::hash::KeyHash;
use crate::segment::SubFilter;
use crate::stats::{SegmentStats, Stats, TierStats};
use crate::wal;
use crate::window;

use super::snapshot::{Full, Snapshot, TierState};
use super::{window_name, Engine, WAL_DIR};

impl Engine {
    /// Whether `key` is present in any live segment. Never a false negative
    /// for a key inserted within the retention (and not removed: a remove
    /// can also take other keys with it, see [`Engine::remove`]); a false
    /// positive at most at the configured rate.
    ///
    /// A lookup takes no lock and never waits for a rotation: see
    /// [`Handle`](crate::Handle) for the form that writes no shared memory.
    #[inline]
    pub fn contains(&self, key: &[u8]) -> Result<bool> {
        self.contains_in(&self.current().0, key)
    }

    #[inline]
    pub(super) fn contains_in(&self, snap: &Snapshot, key: &[u8]) -> Result<bool> {
        // The key's lines are on their way while the clock is read.
        let h = self.hash(key);
        let mut room = None;
        let probes = snap.prefetch_full(&mut room, h);
        let now = self.now()?;
        self.check_open(snap)?;
        let found = match probes {
            // Before the boundary the live set is the probes' windows,
            Some(Full::Windows(p)) if now < snap.next_boundary => Some(p.any()),
            // and the tables' day the snapshot's (as `table_today_in`).
            Some(Full::Table(p, days)) => snap
                .table_today(now)
                .map(|today| p.contains(today.saturating_sub(days), today)),
            _ => None,
        };
        match found {
            Some(true) => Ok(true),
            Some(false) => self.lost_contains(snap, now, h),
            None => self.seen_live(snap, now, h),
        }
    }

    /// Whether the key is in the live set of the tier that answers
    /// `contains` at `now`, or (on an engine a degraded open left windows
    /// of that tier out of) in another tier's live window overlapping one
    /// of them.
    #[inline]
    pub(super) fn seen_live(&self, snap: &Snapshot, now: i64, h: KeyHash) -> Result<bool> {
        Ok(self.live_full(snap, now)?.contains(h) || self.lost_contains(snap, now, h)?)
    }

    /// For a key the tier answering `contains` misses: whether another
    /// tier holds it for the span of a window of that tier that the open
    /// left out (every tier records every insert, so the other tiers'
    /// windows overlapping a lost window hold what it held, as far back as
    /// they reach). Always `false` on an engine that lost no window.
    #[inline]
    pub(super) fn lost_contains(&self, snap: &Snapshot, now: i64, h: KeyHash) -> Result<bool> {
        if self.lost_at.is_empty() {
            return Ok(false);
        }
        self.lost_contains_slow(snap, now, h)
    }

    /// Whether a lookup of the live set at `now` may need
    /// [`Engine::lost_contains`]: the open left out a window of the tier
    /// that answers `contains` (past the snapshot's boundary, where that
    /// tier is worked out per call: whenever it left out any).
    pub(super) fn lost_in_full(&self, snap: &Snapshot, now: i64) -> bool {
        !self.lost_at.is_empty()
            && (now >= snap.next_boundary
                || (self.lost_at.iter()).any(|l| l.tier == snap.full_tier && l.expires > now))
    }

    #[cold]
    fn lost_contains_slow(&self, snap: &Snapshot, now: i64, h: KeyHash) -> Result<bool> {
        let full = if now < snap.next_boundary {
            Some(snap.full_tier)
        } else {
            self.furthest(snap, now)?
        };
        match full {
            Some(full) => self.lost_fallback(snap, now, h, full, i64::MIN),
            None => Ok(false),
        }
    }

    /// For a key tier `tier` misses: whether another tier holds it in a
    /// live window overlapping the span, from instant `since` on, of a
    /// window of `tier` that the open left out (a table's span is every
    /// day it keeps), the finest tier first: the part of a lost span that
    /// a tier's whole windows cover is not asked of a coarser tier.
    /// `false` when the open left out none of `tier`'s.
    #[cold]
    fn lost_fallback(
        &self,
        snap: &Snapshot,
        now: i64,
        h: KeyHash,
        tier: usize,
        since: i64,
    ) -> Result<bool> {
        let off = self.config.utc_offset_secs;
        let span_of = |tier: &crate::config::Tier, w: i64| {
            if tier.is_table() {
                return (i64::MIN, i64::MAX);
            }
            (
                window::start(tier.span, w, off).unwrap_or(i64::MIN),
                window::end(tier.span, w, off).unwrap_or(i64::MAX),
            )
        };
        let mut lost: Vec<(i64, i64)> = self
            .lost_at
            .iter()
            // What a window held that has expired since the open is gone
            // from every tier too: an engine open that long stops asking.
            .filter(|l| l.tier == tier && l.expires > now)
            .filter_map(|l| snap.tiers.get(l.tier).map(|s| span_of(&s.tier, l.window)))
            .map(|(s, e)| (s.max(since), e))
            .filter(|&(s, e)| s < e)
            .collect();
        if lost.is_empty() {
            return Ok(false);
        }
        // A table is read from the day `since` falls in.
        let since_day = match since {
            i64::MIN => 0,
            t => u32::try_from(self.window_index(window::Span::Day, t)?.max(0)).unwrap_or(0),
        };
        // The other tiers finest first: the part of the lost spans that a
        // tier's windows cover (those no degraded open left out) is left
        // to that tier, which holds every key inserted then; a coarser
        // window overlapping that part would add only keys from outside
        // it (a key seen earlier that month, for a day lost).
        let mut order: Vec<usize> = (0..snap.tiers.len()).filter(|&ti| ti != tier).collect();
        order.sort_by_key(|&ti| window::nominal_secs(snap.tiers[ti].tier.span));
        for ti in order {
            if lost.is_empty() {
                break;
            }
            let t = &snap.tiers[ti];
            let overlaps = |(a, b): (i64, i64)| lost.iter().any(|&(s, e)| a < e && s < b);
            let found = match self.reader(snap, t, now)? {
                Reader::Windows(segs) => {
                    if segs
                        .iter()
                        .any(|s| overlaps(span_of(&t.tier, s.window)) && s.contains(h))
                    {
                        return Ok(true);
                    }
                    let whole = segs.iter().filter(|s| {
                        !self
                            .lost_at
                            .iter()
                            .any(|l| l.tier == ti && l.window == s.window)
                    });
                    for s in whole {
                        let (a, b) = span_of(&t.tier, s.window);
                        lost = lost
                            .into_iter()
                            .flat_map(|(s, e)| [(s, e.min(a)), (s.max(b), e)])
                            .filter(|&(s, e)| s < e)
                            .collect();
                    }
                    false
                }
                Reader::Table { seg, first, today } => {
                    seg.is_some_and(|s| s.table_contains(h, first.max(since_day), today))
                }
            };
            if found {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The live segments of the tier whose windows reach furthest back:
    /// the snapshot's, or past a boundary that no writer has rotated
    /// across yet, those the clock says are still live.
    #[inline]
    pub(super) fn live_full<'s>(&self, snap: &'s Snapshot, now: i64) -> Result<Reader<'s>> {
        if now < snap.next_boundary {
            let t = &snap.tiers[snap.full_tier];
            // Before the boundary the snapshot's windows are the live set:
            // no calendar arithmetic on the hot path.
            if !t.tier.is_table() {
                return Ok(Reader::Windows(&t.segments));
            }
            return self.reader(snap, t, now);
        }
        self.past_boundary(snap, now)?;
        match self.furthest(snap, now)? {
            Some(i) => self.reader(snap, &snap.tiers[i], now),
            None => Ok(Reader::Windows(&[])),
        }
    }

    /// The index of the tier whose live windows reach furthest back at
    /// `now` (past the snapshot's boundary: worked out from the clock).
    fn furthest(&self, snap: &Snapshot, now: i64) -> Result<Option<usize>> {
        let mut best: Option<(i64, usize)> = None;
        for (i, t) in snap.tiers.iter().enumerate() {
            let (start, _) = self.tier_reach(t, now)?;
            if best.is_none_or(|b| start < b.0) {
                best = Some((start, i));
            }
        }
        Ok(best.map(|(_, i)| i))
    }

    /// What reads a tier's whole retention at `now`: its live windows, or
    /// its table from the oldest day it keeps.
    #[inline]
    fn reader<'s>(&self, snap: &Snapshot, t: &'s TierState, now: i64) -> Result<Reader<'s>> {
        if t.tier.is_table() {
            let today = self.table_today_in(snap, now)?;
            return Ok(Reader::Table {
                seg: t.segments.last(),
                first: today.saturating_sub(t.tier.table_days()),
                today,
            });
        }
        let cur = self.window_index(t.tier.span, now)?;
        let from = t.tier.oldest_live(cur);
        let i = t.segments.partition_point(|s| s.window < from);
        Ok(Reader::Windows(&t.segments[i..]))
    }

    /// [`Engine::contains`] for many keys, loads of a group issued first.
    pub fn contains_batch<K: AsRef<[u8]>>(&self, keys: &[K]) -> Result<Vec<bool>> {
        self.contains_batch_in(&self.current().0, keys)
    }

    pub(super) fn contains_batch_in<K: AsRef<[u8]>>(
        &self,
        snap: &Snapshot,
        keys: &[K],
    ) -> Result<Vec<bool>> {
        let now = self.now()?;
        self.check_open(snap)?;
        if self.lost_in_full(snap, now) {
            // A degraded open's engine: key by key (`seen_live`).
            return keys
                .iter()
                .map(|k| self.seen_live(snap, now, self.hash(k.as_ref())))
                .collect();
        }
        let segments = match self.live_full(snap, now)? {
            Reader::Windows(segments) => segments,
            table => {
                let hashes: Vec<KeyHash> = keys.iter().map(|k| self.hash(k.as_ref())).collect();
                return Ok(table.contains_all(&hashes));
            }
        };
        let mut look = Lookup::new(segments, READ_LOADS);
        let mut out = Vec::with_capacity(keys.len());
        if look.interleaves() {
            let hashes: Vec<KeyHash> = keys.iter().map(|k| self.hash(k.as_ref())).collect();
            look.contains_interleaved(&hashes, &mut out);
            return Ok(out);
        }
        // Pipelined: the next group's loads are issued before the current
        // group is tested, so memory stays busy while the tests run.
        for group in keys.chunks(look.group()) {
            let previous = look.hashes().len();
            for k in group {
                look.push(self.hash(k.as_ref()));
            }
            out.extend((0..previous).map(|i| look.contains(i)));
            look.consume(previous);
        }
        out.extend((0..look.hashes().len()).map(|i| look.contains(i)));
        Ok(out)
    }

    /// Whether `key` was inserted within `horizon` of now.
    ///
    /// The engine reads the tier with the shortest windows that still covers
    /// the horizon, and in it only the windows the horizon touches. The answer is guaranteed `true` for every key inserted
    /// within `horizon`, and may also be `true` for a key up to one window
    /// of that tier older (windows are whole: see `stats`, `coarseness_secs`).
    /// A horizon longer than every tier keeps is an error
    /// ([`Error::HorizonTooLong`](crate::Error::HorizonTooLong)); so is any
    /// horizon while the clock is behind every window the tiers keep (it
    /// was stepped back further than the tiers keep, after the engine
    /// rotated at a later time: [`Error::WindowUnavailable`](crate::Error::WindowUnavailable),
    /// until the clock catches up).
    ///
    /// One exception to the guarantee: while the clock is behind the newest
    /// day a fingerprint table took (it was stepped back across midnight),
    /// the table counts horizons back from that day, not from the clock's
    /// instant, so a key inserted within `horizon` of the clock's now but
    /// longer than `horizon` before that day may answer `false` (and
    /// [`Engine::insert_within`] may claim it again) until the clock
    /// catches up (docs/fingerprint.md, "A clock that steps back").
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
        self.contains_within_in(&self.current().0, key, horizon)
    }

    pub(super) fn contains_within_in(
        &self,
        snap: &Snapshot,
        key: &[u8],
        horizon: Duration,
    ) -> Result<bool> {
        let now = self.now()?;
        self.check_open(snap)?;
        self.within(snap, self.hash(key), now, horizon)
    }

    /// Whether the key was inserted within `horizon` of `now`, read in
    /// `snap` (see [`Engine::contains_within`]).
    pub(super) fn within(
        &self,
        snap: &Snapshot,
        h: KeyHash,
        now: i64,
        horizon: Duration,
    ) -> Result<bool> {
        if now >= snap.next_boundary {
            self.past_boundary(snap, now)?;
        }
        let (ti, first) = self.pick_tier(snap, now, horizon)?;
        let t = &snap.tiers[ti];
        let found = if t.tier.is_table() {
            let today = self.table_today_in(snap, now)?;
            let first = u32::try_from(first).unwrap_or(today);
            t.segments
                .last()
                .is_some_and(|s| s.table_contains(h, first, today))
        } else {
            let segs = &t.segments;
            let from = segs.partition_point(|s| s.window < first);
            any_contains(&segs[from..], h)
        };
        if found || self.lost_at.is_empty() {
            return Ok(found);
        }
        // A degraded open's engine: what the tier's lost windows held from
        // the first window (or day) the horizon reads on, from the others.
        let since = window::start(t.tier.span, first, self.config.utc_offset_secs);
        self.lost_fallback(snap, now, h, ti, since.unwrap_or(i64::MIN))
    }

    /// The tier and first window that answer a horizon in `snap`.
    pub(super) fn pick_tier(
        &self,
        snap: &Snapshot,
        now: i64,
        horizon: Duration,
    ) -> Result<(usize, i64)> {
        let table_day = self.table_day.load(Ordering::Relaxed);
        self.config
            .horizon_tier(now, horizon, table_day, snap.open_from)
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
    /// file (empty when everything verifies). An engine opened read-only
    /// with [`crate::Options::degraded`] reports the files of the windows
    /// its open left out too.
    pub fn verify_each(&self) -> Vec<Error> {
        let checkpoint = self.maint.lock().checkpoint_lsn;
        let snap = self.current.load_full();
        let mut problems: Vec<Error> = self.damaged.iter().filter_map(Error::damage_copy).collect();
        let seed_fp = crate::hash::seed_fingerprint(self.seed);
        for (path, id) in &self.unchecked {
            let checked =
                SubFilter::open_read_only(path, *id, seed_fp, false).and_then(|sub| sub.verify());
            problems.extend(checked.err().filter(Error::is_damage));
        }
        if let Err(e) = wal::verify(&self.dir.join(WAL_DIR), checkpoint) {
            problems.push(e);
        }
        for t in &snap.tiers {
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

    /// Per tier and per segment: windows, fill, estimated keys and
    /// false-positive rates.
    pub fn stats(&self) -> Result<Stats> {
        let now = self.now()?;
        let cur = self.current.load_full();
        self.check_open(&cur)?;
        let stale = now >= cur.next_boundary;
        drop(cur);
        if stale && !self.read_only && !self.failed.load(Ordering::Relaxed) {
            // A rotation that fails on I/O (a full disk at a boundary) does
            // not fail stats: the error is latched for writes.
            match self.maintain_at(now, self.allow_clock_jump, true) {
                Ok(_) | Err(Error::Io { .. }) | Err(Error::PreviousIo) => {}
                Err(e) => return Err(e),
            }
        }
        let st = self.current.load_full();
        let off = self.config.utc_offset_secs;
        let mut tiers = Vec::new();
        let mut bytes = 0;
        let (reach_now, today) = (self.table_now(now), self.table_today(now)?);
        // The newest instant the engine has dated writes at: the tables'
        // day, and the newest window of each Bloom tier (below).
        let mut newest = reach_now;
        // Past the snapshot's boundary (a read-only engine, or a rotation
        // that failed) `contains` works out the answering tier from the
        // clock, and so does this.
        let full = if now < st.next_boundary {
            Some(st.full_tier)
        } else {
            self.furthest(&st, now)?
        };
        for (ti, t) in st.tiers.iter().enumerate() {
            let (start, _) = self.tier_reach(t, now)?;
            let covers = reach_now.saturating_sub(start).max(0) as u64;
            let table = t.tier.is_table();
            let mut segments = Vec::new();
            for seg in &t.segments {
                // A snapshot no rotation has replaced (a read-only engine,
                // or a rotation that failed) still holds the windows that
                // expired since: `contains` skips them, and so does this.
                let end = window::end(t.tier.span, seg.window, off);
                if !table && end.is_some_and(|end| end <= start) {
                    continue;
                }
                let s = segment_stats(t, seg, today, off);
                bytes += s.bytes;
                if !table {
                    newest = newest.max(s.window_start);
                }
                segments.push(s);
            }
            tiers.push(TierStats {
                tier: t.tier.to_string(),
                kind: t.tier.kind,
                retention: t.tier.retention,
                window_secs: window::nominal_secs(t.tier.span),
                covers_secs: covers,
                coarseness_secs: if table {
                    86_400
                } else {
                    window::nominal_secs(t.tier.span)
                },
                segment_fpr: self.config.segment_fpr(&t.tier),
                answers_contains: full == Some(ti),
                segments,
            });
        }
        let lost_earlier = (self.lost_at.iter())
            .filter(|l| l.expires > now)
            .filter_map(|l| Some(window_name(self.config.tiers.get(l.tier)?, l.window)))
            .filter(|name| !self.lost.contains(name))
            .collect();
        Ok(Stats {
            now,
            lost_windows: self.lost.clone(),
            lost_earlier,
            unrestored_windows: self.unrestored.clone(),
            log_damage: self.log_damage.clone(),
            fpr: self.config.fpr,
            expected_items_per_day: self.config.expected_items_per_day,
            generation: self.manifest_generation.load(Ordering::Relaxed),
            bytes,
            tiers,
            clock_behind_secs: newest.saturating_sub(now).max(0) as u64,
        })
    }
}

/// Buckets of a fingerprint table that `stats` reads at most.
const STATS_SAMPLE: usize = 1 << 16;

/// The stats of one segment of tier `t` (a window, or a fingerprint
/// table read on `today`), summed over its sub-filters; `off` is the
/// engine's UTC offset in seconds.
fn segment_stats(t: &TierState, seg: &Segment, today: u32, off: i32) -> SegmentStats {
    let table = t.tier.is_table();
    let state = if seg.is_sealed() { "sealed" } else { "open" };
    let mut s = if table {
        SegmentStats::table(t.tier.table_days(), today, off, state)
    } else {
        SegmentStats::window(t.tier.span, seg.window, off, state)
    };
    s.subfilters = seg.subs.len();
    for sub in &seg.subs {
        let hd = sub.header();
        let plan = sizing::Plan {
            nblocks: hd.nblocks,
            k: hd.k,
        };
        // A table counts its live slots (one per key), from a sample when
        // it is large.
        let occ = if table {
            sub.count_live_sampled(today, STATS_SAMPLE)
        } else {
            sub.occupied_for_stats()
        };
        let items = sizing::estimate_items(hd.kind, plan, occ);
        s.bytes += sub.len_bytes();
        s.cells += hd.cells();
        s.occupied += occ;
        s.estimated_items += items.round() as u64;
        s.estimated_fpr += sizing::fpr(hd.kind, hd.k, items / hd.nblocks as f64);
        s.saturated += sub.saturated();
        s.moves += sub.moves();
    }
    s.fill = s.occupied as f64 / s.cells.max(1) as f64;
    s.bits_per_key = match s.estimated_items {
        0 => 0.0,
        n => (s.bytes * 8) as f64 / n as f64,
    };
    s
}

/// Bucket loads a table's batch lookup keeps in flight per group.
const TABLE_LOADS_PER_GROUP: usize = 32;

/// What answers "seen within the retention of a tier?" at one instant.
pub(super) enum Reader<'s> {
    /// The live windows of a Bloom or counting tier.
    Windows(&'s [Segment]),
    /// A fingerprint tier's table, from day `first` to `today`.
    Table {
        seg: Option<&'s Segment>,
        first: u32,
        today: u32,
    },
}

impl Reader<'_> {
    /// Whether the key is there.
    #[inline]
    pub(super) fn contains(&self, h: KeyHash) -> bool {
        match self {
            Reader::Windows(segments) => any_contains(segments, h),
            Reader::Table { seg, first, today } => {
                seg.is_some_and(|s| s.table_contains(h, *first, *today))
            }
        }
    }

    /// [`Reader::contains`] for many keys. For a table, pipelined as
    /// `contains_batch` is for windows: both buckets of every key of the
    /// next group are loaded before the current group is tested.
    pub(super) fn contains_all(&self, hashes: &[KeyHash]) -> Vec<bool> {
        let Reader::Table {
            seg: Some(seg),
            first,
            today,
        } = *self
        else {
            return hashes.iter().map(|h| self.contains(*h)).collect();
        };
        if let [sub] = &seg.subs[..] {
            if let Some(table) = sub.table() {
                let mut out = Vec::with_capacity(hashes.len());
                table.contains_many(hashes, first, today, &mut out);
                return out;
            }
        }
        // A chain: two lines per key and table in flight per group.
        let group = (TABLE_LOADS_PER_GROUP / (2 * seg.subs.len().max(1))).clamp(2, MAX_GROUP);
        let prefetch = |g: &[KeyHash]| g.iter().for_each(|h| seg.prefetch_tables(*h));
        let mut groups = hashes.chunks(group).peekable();
        if let Some(first) = groups.peek() {
            prefetch(first);
        }
        let mut out = Vec::with_capacity(hashes.len());
        while let Some(g) = groups.next() {
            if let Some(next) = groups.peek() {
                prefetch(next);
            }
            // The table's test itself, not `Reader::contains`: that holds
            // the windows' lookup too, and stops being inlined here.
            out.extend(g.iter().map(|h| seg.table_contains(*h, first, today)));
        }
        out
    }
}
