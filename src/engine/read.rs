//! Lookups (`contains`, `contains_within`, batches), stats and verify.
//!
//! A lookup reads one snapshot (see `snapshot`) and takes no lock: not the
//! maintenance lock, not a stripe. It never rotates either; past a window
//! boundary that no writer has crossed yet it skips the windows the clock
//! says have expired.

use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::chain::{any_contains, Lookup, Segment};
use crate::error::{Error, Result};
use crate::filter::sizing;
use crate::stats::{SegmentStats, Stats, TierStats};
use crate::wal;
use crate::window;

use super::snapshot::Snapshot;
use super::{Engine, WAL_DIR};

impl Engine {
    /// Whether `key` is present in any live segment. Never a false negative
    /// for a key inserted within the retention (and not removed); a false
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
        let now = self.now()?;
        self.check_open(snap)?;
        let h = self.hash(key);
        Ok(any_contains(self.live_full(snap, now)?, h))
    }

    /// The live segments of the tier whose windows reach furthest back:
    /// the snapshot's, or past a boundary that no writer has rotated
    /// across yet, those the clock says are still live.
    #[inline]
    fn live_full<'s>(&self, snap: &'s Snapshot, now: i64) -> Result<&'s [Segment]> {
        if now < snap.next_boundary {
            return Ok(&snap.tiers[snap.full_tier].segments);
        }
        self.past_boundary(snap, now)?;
        let off = self.config.utc_offset_secs;
        let mut best: Option<(i64, &'s [Segment])> = None;
        for t in &snap.tiers {
            let cur = self.window_index(t.tier.span, now)?;
            let from = t.tier.oldest_live(cur);
            let start = window::start(t.tier.span, from, off).unwrap_or(i64::MIN);
            let i = t.segments.partition_point(|s| s.window < from);
            if best.is_none_or(|b| start < b.0) {
                best = Some((start, &t.segments[i..]));
            }
        }
        Ok(best.map_or(&[], |b| b.1))
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
        let mut look = Lookup::new(self.live_full(snap, now)?);
        let mut out = Vec::with_capacity(keys.len());
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
        if now >= snap.next_boundary {
            self.past_boundary(snap, now)?;
        }
        let h = self.hash(key);
        let (ti, first) = self.pick_tier(snap, now, horizon)?;
        let segs = &snap.tiers[ti].segments;
        let from = segs.partition_point(|s| s.window < first);
        Ok(any_contains(&segs[from..], h))
    }

    /// The tier and first window that answer a horizon.
    fn pick_tier(&self, snap: &Snapshot, now: i64, horizon: Duration) -> Result<(usize, i64)> {
        let secs = i64::try_from(horizon.as_secs()).unwrap_or(i64::MAX);
        let since = now.saturating_sub(secs);
        let mut best: Option<(u64, i64, usize, i64)> = None; // (window secs, segments, tier, first)
        let mut max_cover = 0u64;
        for (ti, t) in snap.tiers.iter().enumerate() {
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
        let checkpoint = self.maint.lock().checkpoint_lsn;
        let snap = self.current.load_full();
        let mut problems = Vec::new();
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
            lost_windows: self.lost.clone(),
            fpr: self.config.fpr,
            expected_items_per_day: self.config.expected_items_per_day,
            generation: self.manifest_generation.load(Ordering::Relaxed),
            bytes,
            tiers,
        })
    }
}
