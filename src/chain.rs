//! A segment: the filter for one window of one tier, kept as a scalable
//! chain of sub-filters.
//!
//! Inserts go to the newest sub-filter; when its fill reaches what the
//! sizing model expects at its planned capacity, the engine appends a larger
//! one with a tighter rate (growth factor `s`, tightening `r`), so the
//! chain's rates add up to at most `P0 / (1 - r)`, the segment's share.
//! Lookups read every sub-filter. Nothing here knows about files beyond the
//! sub-filters it holds, or about time beyond the window index.

use crate::filter::{self, Exclusive, Kind};
use crate::hash::KeyHash;
use crate::segment::{State, SubFilter};

/// One window's filter.
pub(crate) struct Segment {
    /// The window index (see `window::index`).
    pub window: i64,
    /// The chain, oldest first; never empty.
    pub subs: Vec<SubFilter>,
}

impl Segment {
    /// The sub-filter that takes inserts.
    pub(crate) fn tail(&self) -> Option<&SubFilter> {
        self.subs.last()
    }

    pub(crate) fn is_sealed(&self) -> bool {
        self.subs.iter().any(|s| s.state() == State::Sealed)
    }

    /// True when the newest sub-filter has reached its planned fill.
    pub(crate) fn needs_growth(&self) -> bool {
        self.tail().is_some_and(SubFilter::is_full)
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

    /// Records the key. False when the segment is sealed.
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
    /// keys' counts.
    #[inline]
    pub(crate) fn insert(&self, x: &Exclusive, h: KeyHash) -> bool {
        let Some((tail, older)) = self.subs.split_last() else {
            return false;
        };
        let holder = older.iter().find(|s| s.contains(h));
        match (tail.header().kind, holder) {
            (Kind::Bloom, Some(_)) => tail.state() == State::Open,
            (Kind::Counting, Some(s)) => s.insert(x, h),
            (_, None) => tail.insert(x, h),
        }
    }

    /// True when inserting the key would change nothing: a Bloom segment
    /// that holds it already. (A counting segment counts every insert.)
    #[inline]
    pub(crate) fn settled(&self, h: KeyHash) -> bool {
        self.tail()
            .is_some_and(|t| t.header().kind == Kind::Bloom && t.state() == State::Open)
            && self.contains(h)
    }

    /// Takes back one occurrence of the key (counting kind): decrements its
    /// counters in the oldest sub-filter that holds it (see `insert`).
    /// Returns whether one did; false also for a sealed or Bloom segment.
    pub(crate) fn remove(&self, x: &Exclusive, h: KeyHash) -> bool {
        self.subs
            .iter()
            .find(|s| s.contains(h))
            .is_some_and(|s| s.remove(x, h))
    }
}

/// Whether any of `segments` holds the key: every block address first, a
/// prefetch for each, then the tests, so the loads overlap.
#[inline]
pub(crate) fn any_contains(segments: &[Segment], h: KeyHash) -> bool {
    if segments.len() > 1 {
        for s in segments {
            s.prefetch(h);
        }
    }
    segments.iter().rev().any(|s| s.contains(h))
}
