//! What `Engine::stats` reports: plain data, serializable as JSON.

use serde::Serialize;

use crate::filter::Kind;

/// What [`Engine::stats`] reports.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// The instant of the report (seconds since the Unix epoch).
    pub now: i64,
    /// The configured false-positive rate of one query.
    pub fpr: f64,
    /// The configured keys per day.
    pub expected_items_per_day: u64,
    /// The manifest generation.
    pub generation: u64,
    /// Bytes of all segment files.
    pub bytes: u64,
    /// One entry per tier.
    pub tiers: Vec<TierStats>,
}

/// One tier in [`Stats`].
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct TierStats {
    /// The tier as written in `--tiers` (`7d`, `4w:counting`).
    pub tier: String,
    /// Bloom or counting.
    pub kind: Kind,
    /// Live windows, the open one included.
    pub retention: u32,
    /// The window length (the longest month for monthly tiers).
    pub window_secs: u64,
    /// How far back the live windows reach now.
    pub covers_secs: u64,
    /// How much older than a horizon a key answered through this tier can
    /// be: one window.
    pub coarseness_secs: u64,
    /// The rate each segment of this tier is sized for (the query rate
    /// divided by the tier's segment count).
    pub segment_fpr: f64,
    /// Whether `contains` reads this tier (the one reaching furthest back).
    pub answers_contains: bool,
    /// Live segments, oldest first.
    pub segments: Vec<SegmentStats>,
}

/// One segment in [`Stats`].
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct SegmentStats {
    /// The window label (`20261129`, `2026W48`, `202611`).
    pub window: String,
    /// Window start, seconds since the Unix epoch.
    pub window_start: i64,
    /// Window end (exclusive).
    pub window_end: i64,
    /// `open` or `sealed`.
    pub state: &'static str,
    /// Sub-filters in the chain.
    pub subfilters: usize,
    /// Bytes of the segment's files.
    pub bytes: u64,
    /// Cells (bits, or 4-bit counters).
    pub cells: u64,
    /// Occupied cells (bits set, or non-zero counters).
    pub occupied: u64,
    /// `occupied / cells`.
    pub fill: f64,
    /// Distinct keys estimated from the fill.
    pub estimated_items: u64,
    /// The false-positive rate the segment has now (sum over its chain).
    pub estimated_fpr: f64,
    /// Counters stuck at 15 (counting segments).
    pub saturated: u64,
}
