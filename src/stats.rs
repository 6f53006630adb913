//! What `Engine::stats` reports: plain data, serializable as JSON.

use serde::Serialize;

use crate::filter::Kind;

/// What [`crate::Engine::stats`] reports.
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct Stats {
    /// The instant of the report (seconds since the Unix epoch).
    pub now: i64,
    /// Windows this open went on without (`TIER WINDOW`): their files
    /// failed their checks and are in `quarantine/` ([`crate::Options::degraded`]).
    pub lost_windows: Vec<String>,
    /// Windows an earlier degraded open went on without (`TIER WINDOW`),
    /// which the manifest keeps until what they held has expired: a key
    /// their tier misses is still looked for in the other tiers' windows
    /// overlapping them (a slower lookup on a miss; docs/operations.md,
    /// "Checking and recovering").
    pub lost_earlier: Vec<String>,
    /// Windows (and fingerprint tables) this open recovered after a power
    /// loss without their shadow copy, which was damaged
    /// ([`crate::Options::degraded`]; a copy of it is in `quarantine/`):
    /// each kept its body as the disk held it and took the log's writes
    /// again, so its counts may be too high (a removed key may still read
    /// present) or too low (a key may read absent). See
    /// docs/operations.md, "Checking and recovering".
    pub unrestored_windows: Vec<String>,
    /// The damage in the middle of the log that this open's recovery went
    /// past ([`crate::Options::degraded`]): the error naming the log file,
    /// then that the log's writes after it were not replayed, so keys
    /// acknowledged after it may read absent and counts may be off (see
    /// docs/operations.md, "Checking and recovering"). `None` when this
    /// open replayed the whole log or replayed nothing; the open's
    /// checkpoint leaves no damage for a later open to report.
    pub log_damage: Option<String>,
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
    /// How far the clock is behind the newest window the engine has
    /// opened (or the newest day its fingerprint tables took), in seconds;
    /// 0 when it is not. A clock that stepped back (a VM restored from a
    /// snapshot, a host booting with a reset clock) loses no key: inserts
    /// go on into the newest windows and tables are read as of their
    /// newest day until the clock catches up, but keys are dated later than
    /// they arrived, so this says the clock wants fixing (`docs/design.md`,
    /// "Time"). Always 0 for the Redis engine, which dates each write by
    /// the writer's own clock.
    pub clock_behind_secs: u64,
}

/// One tier in [`Stats`].
#[derive(Clone, Debug, Serialize)]
#[non_exhaustive]
pub struct TierStats {
    /// The tier as written in `--tiers` (`7d`, `4w:counting`).
    pub tier: String,
    /// Bloom, counting or fingerprint.
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
    /// Occupied cells (bits set, or non-zero counters); for a fingerprint
    /// table, live slots: counted exactly in a table of up to 65,536
    /// buckets, estimated from an even sample of 65,536 buckets in a larger
    /// one (a standard error of about 0.1% of the count at half load, less
    /// when fuller), so `stats` reads 4 MB of a large table, not all of it.
    pub occupied: u64,
    /// `occupied / cells`.
    pub fill: f64,
    /// Distinct keys estimated from the fill: a new key whose cells were
    /// all set already (its insert answered "seen", a false positive) adds
    /// no fill and is not counted (negligible at the usual rates; at a rate
    /// of 0.5, 15% under for counting windows and 3% under for Bloom
    /// windows). For a fingerprint table,
    /// its live slots: a key seen again after the chain grew holds a slot
    /// in an older table and one in the newest until the older one
    /// expires, and counts once in each (30,000 keys that grew a chain, all
    /// seen again the next day, counted 59,980).
    pub estimated_items: u64,
    /// The false-positive rate the segment has now (sum over its chain).
    pub estimated_fpr: f64,
    /// Counters stuck at 15 (counting segments).
    pub saturated: u64,
    /// Bytes of the segment's files per estimated key, in bits (for a
    /// fingerprint table: per live slot, see `estimated_items`); 0 while
    /// no key is counted.
    pub bits_per_key: f64,
    /// Fingerprint tables: entries relocated to make room since the engine
    /// was opened (0 for other kinds).
    pub moves: u64,
}

impl SegmentStats {
    /// Window `w` of `span` (its label and bounds), with nothing counted
    /// yet: the embedded and the Redis engine add up their sub-filters.
    pub(crate) fn window(span: crate::Span, w: i64, offset: i32, state: &'static str) -> Self {
        use crate::window;
        SegmentStats {
            window: window::label(span, w).unwrap_or_default(),
            window_start: window::start(span, w, offset).unwrap_or(0),
            window_end: window::end(span, w, offset).unwrap_or(0),
            state,
            subfilters: 0,
            bytes: 0,
            cells: 0,
            occupied: 0,
            fill: 0.0,
            estimated_items: 0,
            estimated_fpr: 0.0,
            saturated: 0,
            bits_per_key: 0.0,
            moves: 0,
        }
    }

    /// A fingerprint tier's table: labelled `table`, spanning the days it
    /// keeps up to the end of `today`.
    pub(crate) fn table(days: u32, today: u32, offset: i32, state: &'static str) -> Self {
        use crate::window::{self, Span};
        let (first, today) = (i64::from(today) - i64::from(days), i64::from(today));
        let mut s = SegmentStats::window(Span::Day, today, offset, state);
        s.window = "table".into();
        s.window_start = window::start(Span::Day, first, offset).unwrap_or(0);
        s
    }
}

/// What one rotation changed ([`crate::Engine::maintain`]): the windows it
/// opened, sealed and expired, each as `TIER WINDOW`, the tier as written
/// in `--tiers` (`7d 20261201`, `4w 2026W49`, `12m 202612`).
///
/// ```
/// use std::time::{Duration, UNIX_EPOCH};
/// use timebloom::{Config, Engine, ManualClock, Options, Tier};
/// # fn main() -> timebloom::Result<()> {
/// # let dir = tempfile::tempdir().unwrap();
/// // Monday 2026-11-30, 12:00 UTC.
/// let monday = UNIX_EPOCH + Duration::from_secs(1_796_040_000);
/// let engine = Engine::create_with(
///     dir.path().join("crawl.tb"),
///     Config {
///         tiers: vec![Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
///         expected_items_per_day: 1_000,
///         ..Config::default()
///     },
///     Options::default().clock(ManualClock::new(monday)),
/// )?;
/// // Tuesday is a new day and a new month, in the same ISO week.
/// let m = engine.maintain(monday + Duration::from_secs(86_400))?;
/// assert_eq!(m.opened, ["7d 20261201", "12m 202612"]);
/// assert_eq!(m.sealed, ["7d 20261130", "12m 202611"]);
/// assert!(m.expired.is_empty());
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Maintenance {
    /// Windows created (they take inserts from now on).
    pub opened: Vec<String>,
    /// Windows sealed (checksummed; from now on only a backfill or a
    /// remove at an instant they hold reopens them).
    pub sealed: Vec<String>,
    /// Windows expired (their files deleted), the drained oldest tables a
    /// fingerprint chain dropped (named `TIER table N`), and the days whose
    /// keys a fingerprint tier let go as its day moved, one entry a move
    /// however many days (`365d:fingerprint day 20261207`,
    /// `365d:fingerprint days 20261201 to 20261207 (7 days)`).
    pub expired: Vec<String>,
}

impl Maintenance {
    /// True when nothing changed.
    pub fn is_empty(&self) -> bool {
        self.opened.is_empty() && self.sealed.is_empty() && self.expired.is_empty()
    }
}

impl std::fmt::Display for Maintenance {
    /// One line per change (`opened 7d 20261207`: the tier as configured
    /// and the window), or `nothing to do`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.is_empty() {
            return writeln!(f, "nothing to do");
        }
        for (what, list) in [
            ("opened", &self.opened),
            ("sealed", &self.sealed),
            ("expired", &self.expired),
        ] {
            for w in list {
                writeln!(f, "{what} {w}")?;
            }
        }
        Ok(())
    }
}
