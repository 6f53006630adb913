//! A segment: the filter for one window of one tier, kept as a scalable
//! chain of sub-filters.
//!
//! Inserts go to the newest sub-filter; when its fill reaches what the
//! sizing model expects at its planned capacity, the engine appends a larger
//! one with a tighter rate (growth factor `s`, tightening `r`), so the
//! chain's rates add up to at most `P0 / (1 - r)`, the segment's share.
//! Lookups read every sub-filter. Nothing here knows about files beyond the
//! sub-filters it holds, or about time beyond the window index.

use std::sync::Arc;

use crate::filter::{self, Exclusive, KeyMasks, Kind};
use crate::fingerprint::{Insert, Located, Table};
use crate::hash::KeyHash;
use crate::segment::{State, SubFilter};

/// One window's filter. Cloning it shares its files (a new snapshot of the
/// live set names the same sub-filters).
#[derive(Clone)]
pub(crate) struct Segment {
    /// The window index (see `window::index`).
    pub window: i64,
    /// The chain, oldest first; never empty.
    pub subs: Vec<Arc<SubFilter>>,
}

impl Segment {
    /// The chain position of the oldest sub-filter: 0 unless the oldest
    /// tables of a fingerprint chain expired and were dropped.
    pub(crate) fn first(&self) -> u32 {
        self.subs.first().map_or(0, |s| s.header().id.index)
    }

    /// The chain position a sub-filter added now takes.
    pub(crate) fn next_index(&self) -> u32 {
        self.subs.last().map_or(0, |s| s.header().id.index + 1)
    }

    /// The sub-filter that takes inserts.
    pub(crate) fn tail(&self) -> Option<&SubFilter> {
        self.subs.last().map(|s| &**s)
    }

    pub(crate) fn is_sealed(&self) -> bool {
        self.subs.iter().any(|s| s.state() == State::Sealed)
    }

    /// True when the newest sub-filter has reached its planned fill.
    pub(crate) fn needs_growth(&self) -> bool {
        self.tail().is_some_and(|s| s.is_full())
    }

    /// Issues the memory loads this key needs in every sub-filter.
    #[inline]
    pub(crate) fn prefetch(&self, h: KeyHash) {
        for s in &self.subs {
            let b = filter::block_index(h, s.header().nblocks);
            if let Some(block) = s.blocks().get(b as usize) {
                filter::prefetch(block);
            }
        }
    }

    /// Whether any sub-filter holds the key.
    #[inline]
    pub(crate) fn contains(&self, h: KeyHash) -> bool {
        self.subs.iter().rev().any(|s| s.contains(h))
    }

    /// Records the key. False only on a read-only mapping. The caller
    /// checked under its stripe that the segment takes writes.
    ///
    /// A Bloom key goes to the newest sub-filter, unless an older (full) one
    /// already holds it: adding it again would only fill the tail.
    ///
    /// A counting window is a multiset: every insert is counted, duplicates
    /// included. It goes to the **oldest** sub-filter that holds the key, or
    /// to the newest when none does, and `remove` takes from the oldest
    /// sub-filter that holds the key. The two rules always pick the same
    /// sub-filter: only the newest sub-filter gains keys, so in an older
    /// one a key that was absent at insert time stays absent (counters there
    /// only reach zero, never leave it). Taking from "the newest holder"
    /// instead would let a false positive in a newer sub-filter take other
    /// keys' counts. "Never leave it" needs an insert into an older
    /// sub-filter and a remove to exclude each other (the chain's lock): an
    /// insert that found the key's counters taken there, and counted it
    /// after a remove emptied one, brought that counter back.
    ///
    /// `m` holds the key's masks, shared by the windows one write sets
    /// (`KeyMasks::new(h.lo)` for a window alone).
    #[inline]
    pub(crate) fn insert(&self, x: &Exclusive, h: KeyHash, m: &mut KeyMasks) -> bool {
        match self.insert_target(h) {
            Some(s) if s.header().kind == Kind::Counting && !self.is_tail(s) => {
                // Chosen and counted under the chain's lock, which removes
                // hold: a remove that empties one of the key's counters
                // meanwhile would otherwise see it brought back to 1, and
                // a key checked while it was empty, gone to the tail, would
                // turn into a false positive of this sub-filter, whose
                // remove then took from here (another key's count).
                let _chain = self.subs[0].chain_lock();
                let s = self.insert_target(h).unwrap_or(s);
                if !self.is_tail(s) {
                    crate::file::pause("counting target chosen", s.path());
                }
                s.insert(x, h, m)
            }
            Some(s) => s.insert(x, h, m),
            // A Bloom key an older sub-filter holds: recorded already.
            None => self.tail().is_some_and(|t| t.header().kind == Kind::Bloom),
        }
    }

    /// Whether `s` is the newest sub-filter, which takes new keys.
    fn is_tail(&self, s: &SubFilter) -> bool {
        self.tail().is_some_and(|t| std::ptr::eq(t, s))
    }

    /// The sub-filter a write of the key goes to, by the rules of
    /// [`Segment::insert`]; `None` for a Bloom key an older sub-filter
    /// holds, for a table (written through `table_insert`, with a day) and
    /// for a chain of none.
    #[inline]
    fn insert_target(&self, h: KeyHash) -> Option<&SubFilter> {
        let (tail, older) = self.subs.split_last()?;
        match (tail.header().kind, older.iter().find(|s| s.contains(h))) {
            (Kind::Fingerprint, _) | (Kind::Bloom, Some(_)) => None,
            (Kind::Counting, Some(s)) => Some(s),
            (_, None) => Some(tail),
        }
    }

    /// Fingerprint chain: issues the loads of the key's two buckets in
    /// every table.
    #[inline]
    pub(crate) fn prefetch_tables(&self, h: KeyHash) {
        for s in &self.subs {
            s.table_prefetch(h);
        }
    }

    /// Fingerprint chain: whether a table saw the key on a day in
    /// `[first_day, today]`. Every table's bucket is loaded before any is
    /// tested, newest first.
    #[inline]
    pub(crate) fn table_contains(&self, h: KeyHash, first_day: u32, today: u32) -> bool {
        if self.subs.len() > 1 {
            self.prefetch_tables(h);
        }
        self.subs
            .iter()
            .rev()
            .any(|s| s.table_contains(h, first_day, today))
    }

    /// Fingerprint chain: records the key as seen on `day` in the newest
    /// table, which takes every write: a key seen again while an older
    /// table still holds it gets a slot in the newest (or its day moved
    /// there) and its old slot expires where it is. Older tables are thus
    /// never written after the chain grew past them, so each drains one
    /// retention later and leaves the chain (see `Engine::drop_drained`);
    /// moving days in place would let every false match of a new key keep
    /// an old table alive. `Full` when the newest has no room (the chain
    /// grows; nothing was written), `None` on a read-only mapping.
    pub(crate) fn table_insert(
        &self,
        x: &Exclusive,
        h: KeyHash,
        day: u32,
        today: u32,
    ) -> Option<Insert> {
        self.subs.last()?.table_insert(x, h, day, today)
    }

    /// Fingerprint chain: deletes one live slot of the key from every
    /// table that holds it (a key seen again after the chain grew has one
    /// in an older table and one in the newest); whether one was.
    pub(crate) fn table_remove(&self, x: &Exclusive, h: KeyHash, today: u32, days: u32) -> bool {
        let first = today.saturating_sub(days);
        let mut removed = false;
        for s in &self.subs {
            if s.table_contains(h, first, today) {
                removed |= s.table_remove(x, h, today);
            }
        }
        removed
    }

    /// True when inserting the key would change nothing: a Bloom segment
    /// that holds it already. (A counting segment counts every insert.)
    #[inline]
    pub(crate) fn settled(&self, h: KeyHash) -> bool {
        self.takes_bloom_writes() && self.contains(h)
    }

    /// A Bloom segment whose newest sub-filter is open: one where a key it
    /// holds needs no write.
    #[inline]
    pub(crate) fn takes_bloom_writes(&self) -> bool {
        self.tail()
            .is_some_and(|t| t.header().kind == Kind::Bloom && t.state() == State::Open)
    }

    /// Whether some sub-filter is not sealed on disk: the window takes a
    /// replayed write (see [`Segment::replay_insert`]).
    pub(crate) fn open_on_disk(&self) -> bool {
        self.subs.iter().any(|s| !s.sealed_on_disk())
    }

    /// [`Segment::insert`] for recovery, into a window whose sub-filters
    /// may be partly sealed on disk (a power loss between the seals of a
    /// chain, which are synced one by one): the sub-filter the write goes
    /// to is chosen as `insert` chooses it, and left alone when sealed on
    /// disk (a seal holds every write made before it; written again, its
    /// body would no longer match its checksum).
    pub(crate) fn replay_insert(&self, x: &Exclusive, h: KeyHash, m: &mut KeyMasks) {
        if let Some(target) = self.insert_target(h).filter(|s| !s.sealed_on_disk()) {
            target.insert(x, h, m);
        }
    }

    /// [`Segment::remove`] for recovery: as [`Segment::replay_insert`], a
    /// sub-filter sealed on disk is left alone.
    pub(crate) fn replay_remove(&self, x: &Exclusive, h: KeyHash) {
        if let Some(s) = self.subs.iter().find(|s| s.contains(h)) {
            if !s.sealed_on_disk() {
                s.remove(x, h);
            }
        }
    }

    /// Takes back one occurrence of the key (counting kind): decrements its
    /// counters in the oldest sub-filter that holds it (see `insert`).
    /// Returns whether one did; false also for a Bloom segment. A sealed
    /// one is not refused here: the caller checks `is_sealed` under the
    /// key's stripe first.
    pub(crate) fn remove(&self, x: &Exclusive, h: KeyHash) -> bool {
        // Inserts into older sub-filters wait (see `insert`).
        let _chain = (self.subs.len() > 1).then(|| self.subs[0].chain_lock());
        self.subs
            .iter()
            .find(|s| s.contains(h))
            .is_some_and(|s| s.remove(x, h))
    }
}

/// Whether any of `segments` holds the key: every block address first, a
/// prefetch for each, then the tests, newest first, so the loads overlap.
#[inline]
pub(crate) fn any_contains(segments: &[Segment], h: KeyHash) -> bool {
    match segments {
        [] => false,
        [one] => one.contains(h),
        _ => Probes::start(&mut None, segments, h).any(),
    }
}

/// Room for a key's block in each sub-filter of a lookup, on the caller's
/// stack; [`Probes::start`] fills it, only when there are several.
pub(crate) type Room<'a> = Option<[Option<&'a filter::Block>; MAX_SINGLE]>;

/// A key's block in every sub-filter of a run of segments, each found and
/// prefetched once; [`Probes::any`] tests them, as often as asked (a writer
/// asks again under the key's stripe). A single lookup starts them before
/// it reads the clock, so the loads are on their way meanwhile.
pub(crate) struct Probes<'a, 'r> {
    segments: &'a [Segment],
    h: KeyHash,
    blocks: Blocks<'a, 'r>,
    /// The kind and probe count of every sub-filter, when they all share
    /// them (a tier's windows do, unless a chain grew): one set of masks
    /// then tests every block.
    shared: Option<(Kind, u32)>,
}

/// The key's blocks of [`Probes`], oldest sub-filter first.
#[derive(Clone, Copy)]
enum Blocks<'a, 'r> {
    /// The only sub-filter's (no room needed).
    One(Option<&'a filter::Block>),
    /// Several, in the caller's room.
    Many(&'r [Option<&'a filter::Block>]),
    /// More sub-filters than there is room for: tested one by one.
    Overflow,
}

/// A key's buckets in a fingerprint chain, found and their loads issued
/// before a single lookup reads the clock (as [`Probes`] for windows);
/// [`TableProbe::contains`] tests them once the day is known.
pub(crate) enum TableProbe<'a> {
    /// The chain's only table, the key located in it: the usual case,
    /// tested without locating the key again.
    One(Table<'a>, Located),
    /// A grown chain: every table's buckets loaded, each located again
    /// when tested.
    Chain(&'a Segment, KeyHash),
}

impl<'a> TableProbe<'a> {
    /// Locates the key in the chain's tables and issues their loads.
    #[inline]
    pub(crate) fn start(seg: &'a Segment, h: KeyHash) -> Self {
        if let [sub] = &seg.subs[..] {
            if let Some(table) = sub.table() {
                let at = table.locate_ahead(h);
                return TableProbe::One(table, at);
            }
        }
        seg.prefetch_tables(h);
        TableProbe::Chain(seg, h)
    }

    /// Whether a table saw the key on a day in `[first_day, today]`.
    #[inline]
    pub(crate) fn contains(&self, first_day: u32, today: u32) -> bool {
        match self {
            TableProbe::One(table, at) => table.contains_at(*at, first_day, today),
            TableProbe::Chain(seg, h) => seg.table_contains(*h, first_day, today),
        }
    }
}

/// Whether a run of sub-filters shares one kind and probe count (then one
/// set of masks tests all their blocks), told one view at a time.
#[derive(Clone, Copy, Default)]
struct Shared {
    first: Option<(Kind, u32)>,
    mixed: bool,
}

impl Shared {
    #[inline]
    fn add(&mut self, v: &View<'_>) {
        match self.first {
            None => self.first = Some((v.kind, v.k)),
            Some(kk) => self.mixed |= kk != (v.kind, v.k),
        }
    }

    /// The kind and probe count all views told share, if they do.
    #[inline]
    fn get(self) -> Option<(Kind, u32)> {
        self.first.filter(|_| !self.mixed)
    }
}

impl<'a, 'r> Probes<'a, 'r> {
    /// Finds and prefetches the key's blocks (into `room` when there are
    /// several).
    #[inline]
    pub(crate) fn start(room: &'r mut Room<'a>, segments: &'a [Segment], h: KeyHash) -> Self {
        if segments.is_empty() {
            // A tier's first window has no older ones: nothing to fill.
            return Probes {
                segments,
                h,
                blocks: Blocks::Many(&[]),
                shared: None,
            };
        }
        if let [seg] = segments {
            if let [sub] = &seg.subs[..] {
                let v = View::of(sub);
                let b = v.block(h);
                if let Some(b) = b {
                    filter::prefetch(b);
                }
                return Probes {
                    segments,
                    h,
                    blocks: Blocks::One(b),
                    shared: Some((v.kind, v.k)),
                };
            }
        }
        let room = room.insert([None; MAX_SINGLE]);
        let mut n = 0;
        let mut shared = Shared::default();
        for sub in segments.iter().flat_map(|s| &s.subs) {
            let Some(slot) = room.get_mut(n) else {
                for s in segments {
                    s.prefetch(h);
                }
                return Probes {
                    segments,
                    h,
                    blocks: Blocks::Overflow,
                    shared: None,
                };
            };
            let v = View::of(sub);
            *slot = v.block(h);
            if let Some(b) = slot {
                filter::prefetch(b);
            }
            shared.add(&v);
            n += 1;
        }
        Probes {
            segments,
            h,
            blocks: Blocks::Many(&room[..n]),
            shared: shared.get(),
        }
    }

    /// Whether any of the segments holds the key, newest first (a recent
    /// key is usually found in the newest window).
    #[inline]
    pub(crate) fn any(&self) -> bool {
        match (self.blocks, self.shared) {
            (Blocks::Many([]), _) => false,
            // One block: stop at the first empty cell.
            (Blocks::One(b), Some((kind, k))) => {
                b.is_some_and(|b| filter::contains_key(kind, b, self.h.lo, k))
            }
            (Blocks::Many(blocks), Some((kind, k))) => {
                any_block(kind, k, self.h.lo, blocks.iter().rev().copied())
            }
            _ => self.any_mixed(),
        }
    }

    /// [`Probes::any`] over sub-filters of different kinds or probe counts
    /// (a grown chain), or more than there was room for.
    #[inline(never)]
    fn any_mixed(&self) -> bool {
        let h = self.h;
        let Blocks::Many(blocks) = self.blocks else {
            return self.segments.iter().rev().any(|s| s.contains(h));
        };
        let mut masks = Masks::new(h);
        let subs = self.segments.iter().rev().flat_map(|s| s.subs.iter().rev());
        subs.zip(blocks.iter().rev())
            .any(|(sub, b)| b.is_some_and(|b| masks.test(View::of(sub), b)))
    }
}

/// Whether any of `blocks` (of sub-filters that share one kind and probe
/// count) holds the key: one set of masks tests every block, and the Bloom
/// test, the common case, is written out with its kind known.
#[inline]
fn any_block<'b>(
    kind: Kind,
    k: u32,
    lo: u64,
    mut blocks: impl Iterator<Item = Option<&'b filter::Block>>,
) -> bool {
    let m = filter::masks(kind, lo, k);
    if kind == Kind::Bloom {
        blocks.any(|b| b.is_some_and(|b| filter::contains_masks(Kind::Bloom, b, &m)))
    } else {
        blocks.any(|b| b.is_some_and(|b| filter::contains_masks(kind, b, &m)))
    }
}

/// A key's cell masks for the sub-filters of a multi-segment lookup,
/// computed once per (kind, probe count): the segments of one tier share it
/// unless a chain grew.
struct Masks {
    lo: u64,
    /// The (kind, probe count) `m` was computed for.
    of: Option<(Kind, u32)>,
    m: [u64; filter::BLOCK_WORDS],
}

impl Masks {
    #[inline]
    fn new(h: KeyHash) -> Masks {
        Masks {
            lo: h.lo,
            of: None,
            m: [0; filter::BLOCK_WORDS],
        }
    }

    /// Whether the view's block holds the key (branch-free test).
    #[inline]
    fn test(&mut self, v: View, blk: &filter::Block) -> bool {
        if self.of != Some((v.kind, v.k)) {
            self.m = filter::masks(v.kind, self.lo, v.k);
            self.of = Some((v.kind, v.k));
        }
        filter::contains_masks(v.kind, blk, &self.m)
    }
}

/// Sub-filters `any_contains` handles with addresses on the stack.
pub(crate) const MAX_SINGLE: usize = 32;

/// One sub-filter as a lookup sees it: its blocks, kind and probe count,
/// read out of the mapping once.
#[derive(Clone, Copy)]
pub(crate) struct View<'a> {
    blocks: &'a [filter::Block],
    kind: Kind,
    k: u32,
}

impl<'a> View<'a> {
    #[inline]
    fn of(sub: &'a SubFilter) -> View<'a> {
        View {
            blocks: sub.blocks(),
            kind: sub.header().kind,
            k: sub.header().k,
        }
    }

    /// The key's block.
    #[inline]
    fn block(&self, h: KeyHash) -> Option<&'a filter::Block> {
        let i = filter::block_index(h, self.blocks.len() as u64);
        self.blocks.get(i as usize)
    }

    #[inline]
    fn test(&self, blk: &filter::Block, h: KeyHash) -> bool {
        filter::contains_key(self.kind, blk, h.lo, self.k)
    }
}

/// Batch lookups in a run of segments: every key of a group gets all its
/// block addresses computed once and prefetched before any is tested.
pub(crate) struct Lookup<'a> {
    views: Vec<View<'a>>,
    /// Keys per group: enough loads in flight to hide the memory latency,
    /// not so many that the earliest lines are evicted before their test.
    group: usize,
    /// Per key of the group, its block in each view (`views.len()` each).
    addrs: Vec<Option<&'a filter::Block>>,
    hashes: Vec<KeyHash>,
    /// The kind and probe count every view shares, if they do (see
    /// [`Probes`]).
    shared: Option<(Kind, u32)>,
}

/// Block loads `contains_batch` keeps ahead of its tests. Over one window
/// (or windows of mixed kinds) it goes by groups of this many keys'
/// loads, pipelined: the next group's loads go out before the current
/// group is tested. Over several windows of one kind it goes key by key
/// ([`Lookup::contains_interleaved`]): while a key's block in one window
/// is tested, the block in the same window of the key this many loads
/// ahead is prefetched. Issued in bursts (a group of one key over 12
/// windows), the loads stalled the tests behind them on a Zen 1 guest;
/// interleaved one per test they did not (docs/benchmarks.md, "Batch
/// groups sized to what the memory serves" and "One load per test").
pub(crate) const READ_LOADS: usize = 16;
/// Block loads a group of `insert_batch` issues before its first test (not
/// pipelined: each group's keys are written before the next is hashed).
/// Measured as for [`READ_LOADS`]: 24 wrote new keys 1.09-1.13x faster
/// than 64 into the default tiers and 1.09x into `7d`.
pub(crate) const WRITE_LOADS: usize = 24;
/// The most keys in one group.
pub(crate) const MAX_GROUP: usize = 16;

impl<'a> Lookup<'a> {
    /// A lookup in `segments` by groups of about `loads` block loads
    /// ([`READ_LOADS`] or [`WRITE_LOADS`]).
    pub(crate) fn new(segments: &'a [Segment], loads: usize) -> Lookup<'a> {
        let views: Vec<View<'a>> = segments
            .iter()
            .flat_map(|s| s.subs.iter().map(|sub| View::of(sub)))
            .collect();
        let group = (loads / views.len().max(1)).clamp(1, MAX_GROUP);
        let mut shared = Shared::default();
        views.iter().for_each(|v| shared.add(v));
        Lookup {
            shared: shared.get(),
            addrs: Vec::with_capacity(2 * group * views.len()),
            hashes: Vec::with_capacity(2 * group),
            views,
            group,
        }
    }

    /// Keys per group.
    pub(crate) fn group(&self) -> usize {
        self.group
    }

    /// Starts a group: forgets the previous one's keys.
    pub(crate) fn clear(&mut self) {
        self.addrs.clear();
        self.hashes.clear();
    }

    /// Forgets the first `n` keys (a group that was tested), keeping those
    /// pushed after them (the next group, whose loads are in flight).
    pub(crate) fn consume(&mut self, n: usize) {
        self.addrs.drain(..n * self.views.len());
        self.hashes.drain(..n);
    }

    /// Adds a key to the group and prefetches its blocks.
    #[inline]
    pub(crate) fn push(&mut self, h: KeyHash) {
        self.hashes.push(h);
        for v in &self.views {
            let b = v.block(h);
            if let Some(b) = b {
                filter::prefetch(b);
            }
            self.addrs.push(b);
        }
    }

    /// The keys of the group, in the order pushed.
    pub(crate) fn hashes(&self) -> &[KeyHash] {
        &self.hashes
    }

    /// Whether [`Lookup::contains_interleaved`] serves this lookup: several
    /// sub-filters, all of one kind and probe count.
    pub(crate) fn interleaves(&self) -> bool {
        self.views.len() > 1 && self.shared.is_some()
    }

    /// Whether each key of `hashes` is in any segment, appended to `out`.
    /// Made for where [`Lookup::interleaves`]; elsewhere it answers key by
    /// key without loads ahead. Keys are taken one at a time, newest
    /// window first; while a key's block in a window is tested, the same
    /// window's block of the key [`READ_LOADS`] loads ahead is prefetched.
    /// The loads then go out one per test instead of in bursts, and the
    /// memory serves them while the tests run. A key found in a window
    /// skips its tests in the older ones, not their loads for the key
    /// ahead.
    pub(crate) fn contains_interleaved(&self, hashes: &[KeyHash], out: &mut Vec<bool>) {
        let Some((kind, k)) = self.shared.filter(|_| self.interleaves()) else {
            out.extend(hashes.iter().map(|h| {
                let mut masks = Masks::new(*h);
                let mut views = self.views.iter().rev();
                views.any(|v| v.block(*h).is_some_and(|b| masks.test(*v, b)))
            }));
            return;
        };
        let ahead = (READ_LOADS / self.views.len()).max(1);
        for h in hashes.iter().take(ahead) {
            for b in self.views.iter().filter_map(|v| v.block(*h)) {
                filter::prefetch(b);
            }
        }
        for (i, h) in hashes.iter().enumerate() {
            let m = filter::masks(kind, h.lo, k);
            let next = hashes.get(i + ahead);
            let mut found = false;
            for v in self.views.iter().rev() {
                if let Some(b) = next.and_then(|a| v.block(*a)) {
                    filter::prefetch(b);
                }
                if !found {
                    found = v
                        .block(*h)
                        .is_some_and(|b| filter::contains_masks(kind, b, &m));
                }
            }
            out.push(found);
        }
    }

    /// Whether the `i`-th key of the group is in any segment (newest first).
    #[inline]
    pub(crate) fn contains(&self, i: usize) -> bool {
        let h = self.hashes[i];
        let n = self.views.len();
        let mut views = self.views.iter().zip(&self.addrs[i * n..(i + 1) * n]);
        if n == 1 {
            // One block: stop at the first empty cell.
            return views.any(|(v, b)| b.is_some_and(|b| v.test(b, h)));
        }
        if let Some((kind, k)) = self.shared {
            let blocks = self.addrs[i * n..(i + 1) * n].iter().rev();
            return any_block(kind, k, h.lo, blocks.copied());
        }
        let mut masks = Masks::new(h);
        views
            .rev()
            .any(|(v, b)| b.is_some_and(|b| masks.test(*v, b)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Stripes;
    use crate::hash::hash_key;
    use crate::segment::Identity;
    use crate::window::Span;

    /// A window of one sub-filter of `kind`, sized for `fpr` (so its probe
    /// count follows from the rate).
    fn window(dir: &std::path::Path, window: i64, kind: Kind, fpr: f64) -> Segment {
        let id = Identity {
            span: Span::Day,
            window,
            index: 0,
        };
        let path = dir.join(format!("w{window}"));
        let sub = SubFilter::create(&path, kind, id, 7, 2_000, fpr, false, None).unwrap();
        Segment {
            window,
            subs: vec![Arc::new(sub)],
        }
    }

    fn keys(w: i64) -> Vec<KeyHash> {
        (0..500)
            .map(|i| hash_key(7, format!("https://example.com/w{w}/page/{i}").as_bytes()))
            .collect()
    }

    /// The interleaved batch lookup answers as single lookups do, key by
    /// key, for runs of windows of one kind whose count puts the key it
    /// prefetches for at different distances (16 / 2 = 8 keys ahead down to
    /// one key ahead for more than 16 windows), for batches shorter than
    /// that distance, and for an empty one; it declines runs it does not
    /// serve (one window, or windows of mixed kinds).
    #[test]
    fn the_interleaved_batch_lookup_answers_as_single_lookups() {
        let dir = tempfile::tempdir().unwrap();
        let stripes = Stripes::default();
        for (n, kind) in [
            (2, Kind::Bloom),
            (5, Kind::Bloom),
            (12, Kind::Bloom),
            (20, Kind::Bloom),
            (3, Kind::Counting),
        ] {
            let sub = dir.path().join(format!("{n}-{kind:?}"));
            std::fs::create_dir(&sub).unwrap();
            let segs: Vec<Segment> = (0..n).map(|w| window(&sub, w, kind, 0.01)).collect();
            let x = stripes.lock_all();
            for (w, s) in segs.iter().enumerate() {
                for h in keys(w as i64).iter().step_by(2) {
                    assert!(s.insert(&x, *h, &mut KeyMasks::new(h.lo)));
                }
            }
            drop(x);
            // Every window's keys, half of them inserted, and keys of no window.
            let probe: Vec<KeyHash> = (0..=n).flat_map(keys).collect();
            let look = Lookup::new(&segs, READ_LOADS);
            assert!(look.interleaves());
            for len in [0, 1, 3, probe.len()] {
                let mut out = Vec::new();
                look.contains_interleaved(&probe[..len], &mut out);
                let single: Vec<bool> = probe[..len]
                    .iter()
                    .map(|h| any_contains(&segs, *h))
                    .collect();
                assert_eq!(out, single, "{n} {kind:?} windows, {len} keys");
            }
            let found = probe.iter().filter(|h| any_contains(&segs, **h)).count();
            assert!(found >= n as usize * 250, "{n} windows: {found} found");
        }
        // Runs it is not made for: still the single lookups' answers.
        let one = vec![window(dir.path(), 99, Kind::Bloom, 0.01)];
        let mixed = vec![
            window(dir.path(), 100, Kind::Bloom, 0.01),
            window(dir.path(), 101, Kind::Bloom, 1e-6),
        ];
        for segs in [one, mixed] {
            let x = stripes.lock_all();
            for s in &segs {
                for h in keys(s.window).iter().step_by(2) {
                    assert!(s.insert(&x, *h, &mut KeyMasks::new(h.lo)));
                }
            }
            drop(x);
            let look = Lookup::new(&segs, READ_LOADS);
            assert!(!look.interleaves());
            let probe: Vec<KeyHash> = (99..103).flat_map(keys).collect();
            let mut out = Vec::new();
            look.contains_interleaved(&probe, &mut out);
            let single: Vec<bool> = probe.iter().map(|h| any_contains(&segs, *h)).collect();
            assert_eq!(out, single);
            assert!(out.iter().any(|&p| p));
        }
    }

    /// A counting insert that chose an older sub-filter (every counter of
    /// the key there is taken, by other keys: a false positive) and a
    /// remove that empties those counters meanwhile: the insert must not
    /// bring them back once a third key, checked while they were empty,
    /// went to the tail. Otherwise that key turns into a false positive of
    /// the older sub-filter, its remove takes from there (the oldest
    /// holder), and the first key, inserted once and never removed, is gone.
    #[test]
    fn a_counting_insert_brings_back_no_counter_a_remove_emptied_meanwhile() {
        use crate::filter::stripe_of;
        use std::sync::mpsc;
        let dir = tempfile::tempdir().unwrap();
        let sub = |index: u32, capacity: u64| {
            let id = Identity {
                span: Span::Day,
                window: 0,
                index,
            };
            let path = dir.path().join(format!("c{index}"));
            let s = SubFilter::create(&path, Kind::Counting, id, 7, capacity, 0.01, false, None);
            Arc::new(s.unwrap())
        };
        // One block in the older sub-filter, many in the tail. The three
        // keys share their probes (`lo`), so the same counters there; each
        // has a stripe of its own.
        let old = sub(0, 1);
        assert_eq!(old.header().nblocks, 1);
        let lo = 0x5851_f42d_4c95_7f2d;
        let (b, a, d) = (
            KeyHash {
                lo,
                hi: 0x8100 << 48,
            },
            KeyHash {
                lo,
                hi: 0x9100 << 48,
            },
            KeyHash {
                lo,
                hi: 0x1100 << 48,
            },
        );
        assert!(stripe_of(b) != stripe_of(d) && stripe_of(a) != stripe_of(d));
        let stripes = Stripes::default();
        let first = Segment {
            window: 0,
            subs: vec![Arc::clone(&old)],
        };
        assert!(first.insert(&stripes.lock(b), b, &mut KeyMasks::new(b.lo)));
        let tail = sub(1, 2_000);
        let seg = Segment {
            window: 0,
            subs: vec![Arc::clone(&old), Arc::clone(&tail)],
        };
        assert_ne!(
            crate::filter::block_index(a, tail.header().nblocks),
            crate::filter::block_index(d, tail.header().nblocks)
        );
        // `d` tests present in the older sub-filter (`b`'s counters): its
        // insert goes there, and is held after choosing it.
        let (go_tx, go_rx) = mpsc::channel::<()>();
        let (parked_tx, parked_rx) = mpsc::channel::<()>();
        let once = std::sync::Mutex::new(Some((go_rx, parked_tx)));
        let at = old.path().to_path_buf();
        crate::file::testing::set_pause_hook(Some(Box::new(move |point, path| {
            if point == "counting target chosen" && path == at {
                if let Some((go, parked)) = once.lock().unwrap().take() {
                    let _ = parked.send(());
                    let _ = go.recv();
                }
            }
        })));
        std::thread::scope(|s| {
            let (seg, stripes) = (&seg, &stripes);
            let inserter = s.spawn(move || {
                assert!(seg.insert(&stripes.lock(d), d, &mut KeyMasks::new(d.lo)));
            });
            parked_rx
                .recv_timeout(std::time::Duration::from_secs(30))
                .expect("the insert of d parked");
            // Meanwhile `b` is removed (its counters empty) and `a`,
            // absent from the older sub-filter now, goes to the tail; or
            // both wait for `d`'s insert.
            let (done_tx, done_rx) = mpsc::channel::<()>();
            s.spawn(move || {
                assert!(seg.remove(&stripes.lock(b), b));
                assert!(seg.insert(&stripes.lock(a), a, &mut KeyMasks::new(a.lo)));
                let _ = done_tx.send(());
            });
            let _ = done_rx.recv_timeout(std::time::Duration::from_millis(500));
            drop(go_tx);
            inserter.join().unwrap();
        });
        crate::file::testing::set_pause_hook(None);
        // `a` is taken back; `d`, inserted once and never removed, stays.
        assert!(seg.remove(&stripes.lock(a), a));
        assert!(
            seg.contains(d),
            "a key inserted once and never removed is gone"
        );
    }

    /// Single and batch lookups over windows whose probe counts differ (or
    /// whose kinds do) find every key in the window that holds it: each
    /// window is tested with its own masks, not the first window's.
    #[test]
    fn lookups_over_windows_of_different_probe_counts_and_kinds_find_every_key() {
        let dir = tempfile::tempdir().unwrap();
        let stripes = Stripes::default();
        let layouts: [&[(Kind, f64)]; 3] = [
            // Many probes first, few after: the first window's masks would
            // ask the later windows for cells their keys never set.
            &[(Kind::Bloom, 1e-6), (Kind::Bloom, 0.2), (Kind::Bloom, 0.01)],
            &[(Kind::Bloom, 0.2), (Kind::Bloom, 1e-6)],
            &[
                (Kind::Counting, 1e-4),
                (Kind::Bloom, 0.2),
                (Kind::Counting, 0.3),
            ],
        ];
        for (l, layout) in layouts.iter().enumerate() {
            let sub = dir.path().join(l.to_string());
            std::fs::create_dir(&sub).unwrap();
            let segs: Vec<Segment> = layout
                .iter()
                .enumerate()
                .map(|(w, &(kind, fpr))| window(&sub, w as i64, kind, fpr))
                .collect();
            let ks: Vec<Vec<KeyHash>> = (0..segs.len() as i64).map(keys).collect();
            {
                let x = stripes.lock_all();
                for (s, ks) in segs.iter().zip(&ks) {
                    for h in ks {
                        assert!(s.insert(&x, *h, &mut KeyMasks::new(h.lo)));
                    }
                }
            }
            let mut look = Lookup::new(&segs, READ_LOADS);
            for (w, ks) in ks.iter().enumerate() {
                for h in ks {
                    assert!(
                        any_contains(&segs, *h),
                        "layout {l}: window {w}'s key, single"
                    );
                    look.clear();
                    look.push(*h);
                    assert!(look.contains(0), "layout {l}: window {w}'s key, batch");
                }
            }
        }
    }
}
