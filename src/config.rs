//! Engine configuration: tiers, sizing inputs, the query false-positive rate.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::filter::{sizing, Kind};
use crate::window::{self, Span};

/// The most tiers one engine may have.
pub const MAX_TIERS: usize = 16;
/// The largest first sub-filter of one window: 1 TiB.
pub const MAX_SEGMENT_BYTES: u64 = 1 << 40;
/// The longest retention of one tier, in windows.
pub const MAX_RETENTION: u32 = 10_000;

/// One tier: a window length, how many past windows to keep, and the cell kind.
///
/// A tier with retention `R` keeps `R` windows: the open one and the `R - 1`
/// before it. `daily(7)` answers for today and the six days before; a key
/// inserted at any moment of day 0 is gone on day 7. `daily(1)` is a single
/// window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tier {
    /// The window length.
    pub span: Span,
    /// Windows kept, the open one included (1 to 10,000; a fingerprint
    /// tier's days, 2 to 510).
    pub retention: u32,
    /// Bloom (insert, lookup), counting (also remove) or fingerprint (one
    /// table for the whole retention, day precision, also remove).
    pub kind: Kind,
}

impl Tier {
    /// `retention` UTC days (moved by the configured offset).
    pub fn daily(retention: u32) -> Tier {
        Tier::new(Span::Day, retention)
    }

    /// `retention` ISO weeks (Monday to Sunday).
    pub fn weekly(retention: u32) -> Tier {
        Tier::new(Span::Week, retention)
    }

    /// `retention` calendar months.
    pub fn monthly(retention: u32) -> Tier {
        Tier::new(Span::Month, retention)
    }

    /// `retention` windows of a fixed length (whole seconds, aligned to the
    /// Unix epoch plus the offset). A fraction of a second is dropped; a
    /// length outside 1 minute to 366 days is refused at create
    /// ([`Config::validate`]).
    pub fn custom(window: Duration, retention: u32) -> Tier {
        Tier::new(Span::Custom(window.as_secs()), retention)
    }

    /// The same tier built from counting segments, which support `remove`.
    pub fn counting(self) -> Tier {
        Tier {
            kind: Kind::Counting,
            ..self
        }
    }

    /// A fingerprint tier keeping `days` days (today included) at day
    /// precision: one cuckoo table of fingerprints and day tags for the
    /// whole retention (`docs/design.md`, "Fingerprint tiers"), which
    /// answers every horizon up to `days` days in two cache lines, where a
    /// Bloom tier reads a window per period and rounds a horizon to whole
    /// windows. `days` is 2 to 510. Written `365d:fingerprint`.
    pub fn fingerprint(days: u32) -> Tier {
        Tier {
            span: Span::Day,
            retention: days,
            kind: Kind::Fingerprint,
        }
    }

    /// Whether this tier is one fingerprint table rather than a window per
    /// period: it never rotates windows, its keys expire by day (the files
    /// of a grown chain's oldest tables are dropped once drained).
    pub(crate) fn is_table(&self) -> bool {
        self.kind == Kind::Fingerprint
    }

    /// Days a fingerprint table keeps after today (the kernel's retention).
    pub(crate) fn table_days(&self) -> u32 {
        self.retention.saturating_sub(1)
    }

    fn new(span: Span, retention: u32) -> Tier {
        Tier {
            span,
            retention,
            kind: Kind::Bloom,
        }
    }

    /// The tier's short name, also the prefix of its segment files:
    /// `d`, `w`, `m`, or `c<seconds>`.
    /// A fingerprint tier's code is `f`.
    pub fn code(&self) -> String {
        if self.is_table() {
            return "f".into();
        }
        match self.span {
            Span::Day => "d".into(),
            Span::Week => "w".into(),
            Span::Month => "m".into(),
            Span::Custom(s) => format!("c{s}"),
        }
    }

    /// The oldest window still live when window `cur` is open.
    pub(crate) fn oldest_live(&self, cur: i64) -> i64 {
        cur.saturating_sub(i64::from(self.retention.max(1)) - 1)
    }

    /// Keys planned for one window of this tier.
    pub(crate) fn planned_items(&self, items_per_day: u64) -> u64 {
        let secs = window::nominal_secs(self.span);
        let per_window = (u128::from(items_per_day) * u128::from(secs)).div_ceil(86_400);
        u64::try_from(per_window).unwrap_or(u64::MAX).max(1)
    }

    /// The span with `Custom(86400)` folded into `Day`: two tiers with the
    /// same windows are the same tier.
    fn windows(&self) -> Span {
        match self.span {
            Span::Custom(86_400) => Span::Day,
            s => s,
        }
    }
}

impl fmt::Display for Tier {
    /// The form [`Tier::from_str`] reads: `7d`, `4w`, `12m`, `24h`, and other
    /// window lengths in the largest unit that holds them whole (`4x6h`,
    /// `4x90min`, `1x366d`, `3x90s`), with `:counting` for counting tiers
    /// and `:fingerprint` for a fingerprint tier.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.retention;
        match self.span {
            Span::Day => write!(f, "{n}d")?,
            Span::Week => write!(f, "{n}w")?,
            Span::Month => write!(f, "{n}m")?,
            Span::Custom(3600) => write!(f, "{n}h")?,
            Span::Custom(s) => {
                let (unit, name) = [(86_400, "d"), (3600, "h"), (60, "min")]
                    .into_iter()
                    .find(|&(unit, _)| s % unit == 0)
                    .unwrap_or((1, "s"));
                write!(f, "{n}x{}{name}", s / unit)?
            }
        }
        match self.kind {
            Kind::Counting => write!(f, ":counting")?,
            Kind::Fingerprint => write!(f, ":fingerprint")?,
            Kind::Bloom => {}
        }
        Ok(())
    }
}

impl FromStr for Tier {
    type Err = Error;

    /// Reads `<N><unit>` (`7d`, `4w`, `12m`, `48h`: N windows of a day, an
    /// ISO week, a month, an hour) or `<N>x<length>` with the length in
    /// `s`, `min`, `h` or `d` (`4x6h`: four 6-hour windows), optionally
    /// followed by `:counting` or `:bloom`; or `<N>d:fingerprint`, a
    /// fingerprint tier of N days.
    fn from_str(s: &str) -> Result<Tier> {
        // A spec too long to repeat whole is named by its start.
        let shown = match s.char_indices().nth(48) {
            Some((end, _)) if s.len() > 64 => format!("{:?}… ({} bytes)", &s[..end], s.len()),
            _ => format!("{s:?}"),
        };
        let bad = |why: &str| {
            Error::config(format!(
                "tier {shown}: {why} (examples: 7d, 4w, 12m, 48h, 4x6h, 7d:counting, 365d:fingerprint)"
            ))
        };
        let (spec, kind) = match s.split_once(':') {
            None => (s, Kind::Bloom),
            Some((spec, "counting")) => (spec, Kind::Counting),
            Some((spec, "bloom")) => (spec, Kind::Bloom),
            Some((spec, "fingerprint")) => (spec, Kind::Fingerprint),
            Some(_) => {
                return Err(bad(
                    "the kind after ':' must be counting, bloom or fingerprint",
                ))
            }
        };
        let spec = spec.trim();
        let digits = spec.bytes().take_while(u8::is_ascii_digit).count();
        let count: u32 = spec[..digits].parse().map_err(|_| match digits {
            0 => bad("it must start with a window count"),
            // Digits too many for any count: past the limit `validate` names.
            _ => bad(&format!("retention above {MAX_RETENTION} windows")),
        })?;
        let rest = &spec[digits..];
        let span = match rest {
            "d" => Span::Day,
            "w" => Span::Week,
            "m" => Span::Month,
            "h" => Span::Custom(3600),
            _ => match rest.strip_prefix('x') {
                Some(len) => {
                    Span::Custom(parse_length(len).ok_or_else(|| bad("bad window length"))?)
                }
                None => return Err(bad("unknown unit")),
            },
        };
        if kind == Kind::Fingerprint && span != Span::Day {
            return Err(bad(
                "a fingerprint tier is counted in days (365d:fingerprint)",
            ));
        }
        Ok(Tier {
            span,
            retention: count,
            kind,
        })
    }
}

/// `30s`, `15min`, `6h`, `2d` -> seconds.
fn parse_length(s: &str) -> Option<u64> {
    let digits = s.bytes().take_while(u8::is_ascii_digit).count();
    let n: u64 = s[..digits].parse().ok()?;
    let unit = match &s[digits..] {
        "s" => 1,
        "min" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => return None,
    };
    n.checked_mul(unit)
}

/// Parses a comma-separated tier list such as `7d,4w,12m`.
///
/// ```
/// use timebloom::{parse_tiers, Tier};
/// let tiers = parse_tiers("7d,4w:counting").unwrap();
/// assert_eq!(tiers, vec![Tier::daily(7), Tier::weekly(4).counting()]);
/// assert!(parse_tiers("7x").is_err());
/// ```
pub fn parse_tiers(s: &str) -> Result<Vec<Tier>> {
    s.split(',').map(str::parse).collect()
}

/// When an acknowledged write becomes durable against power loss (a
/// process crash, `kill -9`, loses nothing under any policy: the written
/// pages stay in the operating system's cache).
///
/// The names follow Redis's `appendfsync always | everysec | no`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SyncPolicy {
    /// Every insert and remove returns only once it would survive a power
    /// loss: it is in the write-ahead log and the log is fsynced.
    /// Concurrent calls, and every batch, share one fsync (group commit).
    Always,
    /// The write-ahead log is fsynced at most this long after a write: a
    /// power loss loses at most the last interval of acknowledged writes.
    /// 1 ms to 1 hour; others are refused (`InvalidConfig`).
    Interval(Duration),
    /// No write-ahead log: the operating system writes the mapped pages
    /// back when it chooses (Linux: within 30 s by default); a power loss
    /// may lose any write since the last flush or close, except in the
    /// windows a rotation sealed (a rotation does not sync the windows
    /// that stay open, such as the weekly and monthly ones at a day's end).
    None,
}

impl Default for SyncPolicy {
    /// `Interval(1 s)`.
    fn default() -> SyncPolicy {
        SyncPolicy::Interval(Duration::from_secs(1))
    }
}

impl SyncPolicy {
    /// Refuses an interval outside 1 ms to 1 hour, what [`str::parse`]
    /// reads (an interval of a few nanoseconds kept the log's sync thread
    /// awake in a tight loop).
    pub(crate) fn check(&self) -> Result<()> {
        if let SyncPolicy::Interval(d) = *self {
            if d < Duration::from_millis(1) || d > Duration::from_secs(3600) {
                return Err(Error::config(format!(
                    "sync interval must be between 1 ms and 1 hour (got {d:?})"
                )));
            }
        }
        Ok(())
    }
}

impl fmt::Display for SyncPolicy {
    /// `always`, `interval=1s` (or `=250ms`; `=1500us`, `=1000001ns` for
    /// an interval of no whole milliseconds), `none`: what [`str::parse`]
    /// reads back as the same policy.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncPolicy::Always => write!(f, "always"),
            SyncPolicy::None => write!(f, "none"),
            SyncPolicy::Interval(d) => match d.subsec_nanos() {
                0 => write!(f, "interval={}s", d.as_secs()),
                n if n % 1_000_000 == 0 => write!(f, "interval={}ms", d.as_millis()),
                n if n % 1_000 == 0 => write!(f, "interval={}us", d.as_micros()),
                _ => write!(f, "interval={}ns", d.as_nanos()),
            },
        }
    }
}

impl FromStr for SyncPolicy {
    type Err = Error;

    /// `always`, `none`, `interval` (1 s), `interval=DURATION` with a unit
    /// of `ms`, `s` or `m` (`interval=250ms`, `interval=2s`), or `us` or
    /// `ns`, which Display writes for an interval of no whole milliseconds.
    fn from_str(s: &str) -> Result<SyncPolicy> {
        let bad = || {
            Error::config(format!(
                "sync policy {s:?}: expected always, none, interval or interval=DURATION (250ms, 1s, 1m)"
            ))
        };
        match s {
            "always" => return Ok(SyncPolicy::Always),
            "none" => return Ok(SyncPolicy::None),
            "interval" => return Ok(SyncPolicy::default()),
            _ => {}
        }
        let d = s.strip_prefix("interval=").ok_or_else(bad)?;
        let (num, unit) = d.split_at(d.find(|c: char| !c.is_ascii_digit()).unwrap_or(d.len()));
        let n: u64 = num.parse().map_err(|_| bad())?;
        let d = match unit {
            "ns" => Duration::from_nanos(n),
            "us" => Duration::from_micros(n),
            "ms" => Duration::from_millis(n),
            "s" => Duration::from_secs(n),
            "m" => Duration::from_secs(n.checked_mul(60).ok_or_else(bad)?),
            _ => return Err(bad()),
        };
        let policy = SyncPolicy::Interval(d);
        policy.check().map_err(|_| {
            Error::config(format!(
                "sync policy {s:?}: the interval must be between 1 ms and 1 hour"
            ))
        })?;
        Ok(policy)
    }
}

/// Everything an engine is created with. It is stored in the manifest, so
/// [`crate::Engine::open`] needs none of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// The tiers; every insert goes into the open window of each.
    pub tiers: Vec<Tier>,
    /// Planned distinct keys per day (at least 1): a daily window is sized for this many,
    /// a weekly one for 7 times as many, a monthly one for 31 times.
    pub expected_items_per_day: u64,
    /// The false-positive rate bound for one query (default 0.001;
    /// strictly between 0 and 1).
    pub fpr: f64,
    /// Seconds east of UTC where window boundaries fall (0: UTC midnight);
    /// less than a day in magnitude.
    pub utc_offset_secs: i32,
    /// How much larger each new sub-filter of a grown segment is (default
    /// 2; 1 to 16).
    /// Each also has a lower rate (`tightening`), so a chain cannot grow
    /// for ever: at 1, a window given many times its plan fills its chain
    /// (64 sub-filters at most, fewer where the next would cost more than
    /// 16 times the bits per key of the first: 37 of a Bloom chain at the
    /// default tightening and rate), and inserts that need another
    /// sub-filter fail with an error saying so (the keys before stay).
    pub growth_factor: f64,
    /// How much tighter each new sub-filter's rate is (default 0.5;
    /// strictly between 0 and 1): the
    /// planned rates of a chain add up to at most the segment's share.
    /// Below about 0.04 a chain fed many times its plan can run up to about
    /// 3% past the share (docs/design.md, "Chain growth").
    pub tightening: f64,
    /// When writes become durable against power loss (default: a 1 s
    /// interval). [`crate::Options::sync`] overrides it for one open.
    #[serde(default)]
    pub sync: SyncPolicy,
}

impl Default for Config {
    /// 7 daily, 4 weekly and 12 monthly windows, one million keys a day, 0.1%.
    fn default() -> Config {
        Config {
            tiers: vec![Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
            expected_items_per_day: 1_000_000,
            fpr: 0.001,
            utc_offset_secs: 0,
            growth_factor: 2.0,
            tightening: 0.5,
            sync: SyncPolicy::default(),
        }
    }
}

impl Config {
    /// Whether a new engine of this configuration, created at `now`, keeps
    /// `horizon`: the [`Error::HorizonTooLong`] that its
    /// `Engine::contains_within` would return, found before anything is
    /// created (the command line refuses `filter-new --within` this way
    /// rather than leave a new engine behind). An engine that exists
    /// answers for itself: its clock may have stepped back behind the
    /// days its tables took.
    pub fn check_new_horizon(&self, now: std::time::SystemTime, horizon: Duration) -> Result<()> {
        self.horizon_tier(crate::clock::instant(now)?, horizon, 0, i64::MIN)
            .map(|_| ())
    }

    /// The tier and first window that answer "seen within `horizon`" at
    /// `now` (seconds): the finest windows first, then the fewest of them.
    /// See docs/design.md, "Horizons". Both engines answer by it.
    ///
    /// `table_day` is the newest day the fingerprint tables took (0 when
    /// none did, as for a new engine or the Redis one). A clock stepped back
    /// behind it leaves the tables' day ahead of the clock's: a table then
    /// counts the horizon back from its own day, and the reach a refusal
    /// names is measured from the start of that day (see `Engine`'s
    /// `table_today`). Bloom windows are numbered from `now` as they are.
    ///
    /// `open_from` is the latest start among the windows the engine writes
    /// to (`i64::MIN` when unknown). A clock behind every window the tiers
    /// keep answers no horizon: `WindowUnavailable`, not a `HorizonTooLong`
    /// naming a longest horizon of 0 s that is refused too. A clock stepped back behind it leaves
    /// each tier's newest window ahead of the clock's, and the rotation into
    /// that window expired the windows it does not keep: a tier covers a
    /// horizon only from the oldest window its newest one keeps, not from
    /// the oldest the clock's window would keep.
    pub(crate) fn horizon_tier(
        &self,
        now: i64,
        horizon: Duration,
        table_day: u32,
        open_from: i64,
    ) -> Result<(usize, i64)> {
        let off = self.utc_offset_secs;
        let index = |span: Span, t: i64| window::index_or_unavailable(span, t, off);
        let secs = i64::try_from(horizon.as_secs()).unwrap_or(i64::MAX);
        let since = now.saturating_sub(secs).max(0);
        let table_day = i64::from(table_day);
        // What the reach is measured from.
        let reach_now = match window::start(Span::Day, table_day, off) {
            Some(start) if table_day > 0 => now.max(start),
            _ => now,
        };
        let mut best: Option<(u64, i64, usize, i64)> = None; // (window secs, segments, tier, first)
        let mut max_cover = 0u64;
        let mut behind_all = true;
        for (ti, t) in self.tiers.iter().enumerate() {
            // A fingerprint tier's "windows" are its days (one table).
            let span = if t.is_table() { Span::Day } else { t.span };
            let cur = index(span, now)?;
            // (current window, shift of `first`, oldest live window, oldest
            // window reached from `reach_now`)
            let (cur, shift, oldest, reach_oldest) = if t.is_table() {
                let today = cur.max(table_day);
                let oldest = today - i64::from(t.table_days());
                (today, today - cur, oldest, oldest)
            } else {
                // The newest window the tier has, which a clock stepped back
                // leaves ahead of the clock's.
                let newest = index(span, now.max(open_from))?;
                let reach_cur = index(span, reach_now.max(open_from))?;
                (cur, 0, t.oldest_live(newest), t.oldest_live(reach_cur))
            };
            if let Some(start) = window::start(span, reach_oldest, off) {
                max_cover = max_cover.max(reach_now.saturating_sub(start).max(0) as u64);
            }
            // A horizon of 0 s reads the current window (day): kept?
            behind_all &= cur < oldest;
            let Some(first) = window::index(span, since, off) else {
                continue;
            };
            let first = first + shift;
            if first < oldest {
                continue;
            }
            let segments = if t.is_table() { 1 } else { cur - first + 1 };
            let cand = (window::nominal_secs(span), segments, ti, first);
            if best.is_none_or(|b| (cand.0, cand.1) < (b.0, b.1)) {
                best = Some(cand);
            }
        }
        match best {
            Some(b) => Ok((b.2, b.3)),
            // A clock stepped back behind every window the tiers keep: every
            // horizon, 0 s included, reaches windows a rotation expired, so
            // no "longest horizon" can be named.
            None if behind_all => Err(Error::WindowUnavailable {
                reason: format!(
                    "the clock ({}) is behind every window the tiers keep (the \
                     newest from {}): no horizon can be answered until it catches up",
                    crate::clock::rfc3339(now),
                    crate::clock::rfc3339(open_from)
                ),
            }),
            None => Err(Error::HorizonTooLong {
                horizon_secs: horizon.as_secs(),
                max_secs: max_cover,
            }),
        }
    }

    /// Checks every field; the engine writes nothing for an invalid config.
    pub fn validate(&self) -> Result<()> {
        if self.tiers.is_empty() {
            return Err(Error::config("at least one tier is needed"));
        }
        if self.tiers.len() > MAX_TIERS {
            return Err(Error::config(format!("at most {MAX_TIERS} tiers")));
        }
        for (i, t) in self.tiers.iter().enumerate() {
            if t.retention == 0 {
                return Err(Error::config(format!(
                    "tier {t}: retention must be at least 1 window"
                )));
            }
            if t.retention > MAX_RETENTION {
                return Err(Error::config(format!(
                    "tier {t}: retention above {MAX_RETENTION} windows"
                )));
            }
            if let Span::Custom(secs) = t.span {
                if !(60..=366 * 86_400).contains(&secs) {
                    return Err(Error::config(format!(
                        "tier {t}: a custom window must be between 1 minute and 366 days"
                    )));
                }
            }
            if t.is_table() {
                let most = crate::fingerprint::MAX_RETENTION + 1;
                if t.span != Span::Day || !(2..=most).contains(&t.retention) {
                    return Err(Error::config(format!(
                        "tier {t}: a fingerprint tier keeps 2 to {most} days"
                    )));
                }
                if self.tiers[..i].iter().any(Tier::is_table) {
                    return Err(Error::config("at most one fingerprint tier"));
                }
            } else if self.tiers[..i]
                .iter()
                .any(|o| !o.is_table() && o.windows() == t.windows())
            {
                return Err(Error::config(format!(
                    "two tiers have the same window ({t})"
                )));
            }
        }
        self.sync.check()?;
        if self.expected_items_per_day == 0 {
            return Err(Error::config("expected_items_per_day must be at least 1"));
        }
        if !(self.fpr > 0.0 && self.fpr < 1.0) {
            return Err(Error::config(format!(
                "fpr must be strictly between 0 and 1 (got {})",
                crate::plan::units::fmt_rate(self.fpr)
            )));
        }
        if self.utc_offset_secs.unsigned_abs() >= 86_400 {
            return Err(Error::config(
                "utc_offset_secs must be less than a day in magnitude",
            ));
        }
        if !(self.growth_factor >= 1.0 && self.growth_factor <= 16.0) {
            return Err(Error::config("growth_factor must be between 1 and 16"));
        }
        if !(self.tightening > 0.0 && self.tightening < 1.0) {
            return Err(Error::config("tightening must be strictly between 0 and 1"));
        }
        for t in &self.tiers {
            let (capacity, rate) = self.subfilter_plan(t, 0);
            // A rate no geometry reaches plans 2^64 - 1 blocks, whose
            // bytes are past what a u64 counts: "more than" that, not it.
            let need = match sizing::file_plan(t.kind, capacity, rate)
                .nblocks
                .checked_mul(64)
            {
                Some(bytes) if bytes <= MAX_SEGMENT_BYTES => continue,
                Some(bytes) => format!("{bytes} bytes"),
                None => format!("more than {} bytes", u64::MAX),
            };
            return Err(Error::config(format!(
                "tier {t}: one window would need {need} (at most {MAX_SEGMENT_BYTES}); \
                 lower expected_items_per_day or raise fpr"
            )));
        }
        Ok(())
    }

    /// [`Config::validate`], and what only a new engine is refused for: a
    /// rate its fingerprint tier cannot meet. The widest fingerprints (32
    /// bits, 12 slots a bucket) give `2 x 12 / (2^32 - 1)`, 5.6e-9, with
    /// every slot live; a table asked for less would run at that rate
    /// whatever its plan said. An engine created before this check opens
    /// as it was (its stored configuration is read with `validate`).
    pub(crate) fn validate_new(&self) -> Result<()> {
        self.validate()?;
        if self.tiers.iter().any(Tier::is_table) {
            let best = crate::fingerprint::Geometry::for_fpr_at_any_load(0.0).fpr_bound(1.0);
            if self.fpr < best {
                return Err(Error::config(format!(
                    "fpr {}: a fingerprint tier meets rates down to {best:.2e} \
                     (32-bit fingerprints with every slot live); raise fpr or use Bloom tiers",
                    crate::plan::units::fmt_rate(self.fpr)
                )));
            }
        }
        Ok(())
    }

    /// The rate one segment of `tier` may contribute: a query reads at most
    /// the tier's `retention` segments, so each gets an equal share. A
    /// fingerprint tier is one segment: all of it.
    pub(crate) fn segment_fpr(&self, tier: &Tier) -> f64 {
        if tier.is_table() {
            return self.fpr;
        }
        self.fpr / f64::from(tier.retention.max(1))
    }

    /// Planned keys and target rate of sub-filter `index` of a segment of `tier`.
    ///
    /// A fingerprint tier plans its whole retention in one table: the keys
    /// of `retention` days. Its first table takes the narrowest
    /// fingerprint whose rate meets `fpr` with every slot live (the most
    /// any table can hold), and is charged that bound `B0`; the tables a
    /// chain grows share what is left, `(fpr - B0) (1 - r) r^(i-1)`, so
    /// the chain's rates add up to at most `fpr` however full each is.
    pub(crate) fn subfilter_plan(&self, tier: &Tier, index: u32) -> (u64, f64) {
        let base = tier.planned_items(self.expected_items_per_day) as f64;
        let i = index.min(1000) as i32;
        let (base, rate) = if tier.is_table() {
            let base = base * f64::from(tier.retention.max(1));
            let g = crate::fingerprint::Geometry::for_fpr_at_any_load(self.fpr);
            let b0 = g.fpr_bound(1.0).min(self.fpr);
            let rate = match i {
                0 => b0,
                _ => (self.fpr - b0) * (1.0 - self.tightening) * self.tightening.powi(i - 1),
            };
            (base, rate)
        } else {
            let rate = self.segment_fpr(tier) * (1.0 - self.tightening) * self.tightening.powi(i);
            (base, rate)
        };
        let capacity = base * self.growth_factor.powi(i);
        let capacity = if capacity >= u64::MAX as f64 {
            u64::MAX
        } else {
            capacity.ceil() as u64
        };
        (capacity.max(1), rate)
    }

    /// How many times the bits per key of a chain's first sub-filter one it
    /// grows may cost (Bloom and counting chains of the embedded engine).
    /// Each sub-filter a chain grows has a lower rate, and blocks of one
    /// cache line reach a rate below about 1e-12 (1e-6 for counting ones)
    /// only with ever more bits per key: 824 at 1e-18, 8,290 at 1e-24,
    /// 300,000 at 1e-30 for Bloom blocks. Past this cost the chain is at
    /// its longest (see `chain_too_costly`).
    pub(crate) const MAX_GROWTH_COST: f64 = 16.0;

    /// Whether sub-filter `index` of a Bloom or counting chain of `tier`
    /// costs more than [`Config::MAX_GROWTH_COST`] times the bits per key of
    /// the chain's first: `Some((its cost as a multiple of the first's))`
    /// when it does. With a tightening far below 1.0 (each sub-filter's rate
    /// a twentieth of the one before, say) and a growth factor of 1, a
    /// window's files grew without bound before the chain reached its 64
    /// sub-filters: 10.9 GB for the 28th of 20 keys.
    pub(crate) fn chain_too_costly(&self, tier: &Tier, index: u32) -> Option<f64> {
        if index == 0 || tier.is_table() {
            return None;
        }
        let per_key = |index: u32| {
            let (capacity, rate) = self.file_subfilter_plan(tier, index);
            let sized = crate::segment::sized_for(tier.kind, capacity, index);
            sizing::file_plan(tier.kind, sized, rate).nblocks as f64 / sized.max(1) as f64
        };
        let cost = per_key(index) / per_key(0);
        (cost > Self::MAX_GROWTH_COST).then_some(cost)
    }

    /// [`Config::subfilter_plan`] for the files of the embedded engine: the
    /// rate of sub-filter `index` of a Bloom or counting chain less its part
    /// of the first sub-filter's excess.
    ///
    /// A full sub-filter stopped taking keys at the fill expected a little
    /// past its capacity (`segment::GROWTH_MARGIN`), where its rate is above
    /// the plan's: by up to about 4% of it, more for more probes. The first keeps
    /// its plan (a window that receives what it planned pays nothing for the
    /// margin); the ones a chain grows are sized for the load they stop at
    /// (`segment::sized_for`), and together give up the first one's excess.
    /// Their rates add up to `share x r`, so each gives up `excess x (1 - r)
    /// / r` of its own. Without this, a chain as long as the growth half of
    /// the share lets fill up (a window of a thousand times its plan) ran
    /// 1-3% past the share by the sizing model. (The Redis layout keeps
    /// `subfilter_plan`: every client computes its geometry from it.)
    pub(crate) fn file_subfilter_plan(&self, tier: &Tier, index: u32) -> (u64, f64) {
        let (capacity, rate) = self.subfilter_plan(tier, index);
        if index == 0 || tier.is_table() {
            return (capacity, rate);
        }
        let (first_capacity, first_rate) = self.subfilter_plan(tier, 0);
        let first = sizing::file_plan(tier.kind, first_capacity, first_rate);
        let load = first_capacity as f64 * crate::segment::GROWTH_MARGIN / first.nblocks as f64;
        let excess = (sizing::fpr(tier.kind, first.k, load) / first_rate - 1.0).max(0.0);
        // A tightening near 0 leaves the growth half too little to give:
        // the later sub-filters keep a tenth of their rate at least.
        let cut = (excess * (1.0 - self.tightening) / self.tightening).min(0.9);
        (capacity, rate * (1.0 - cut))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_bad_tier_is_named_by_its_start() {
        // A spec of 100,000 digits gave an error of 100,000 bytes.
        let spec = format!("{}d", "9".repeat(100_000));
        let msg = spec.parse::<Tier>().unwrap_err().to_string();
        assert!(msg.len() < 400, "{} bytes: {}…", msg.len(), &msg[..200]);
        assert!(msg.contains("\"99999999"), "{msg}");
        assert!(msg.contains("100001 bytes"), "{msg}");
        let short = "7y".parse::<Tier>().unwrap_err().to_string();
        assert!(
            short.starts_with("invalid configuration: tier \"7y\": "),
            "{short}"
        );
    }

    #[test]
    fn parses_tier_lists() {
        let t = parse_tiers("7d,4w,12m").unwrap();
        assert_eq!(t, vec![Tier::daily(7), Tier::weekly(4), Tier::monthly(12)]);
        assert_eq!(
            "48h".parse::<Tier>().unwrap(),
            Tier::custom(Duration::from_secs(3600), 48)
        );
        assert_eq!("4x6h".parse::<Tier>().unwrap().span, Span::Custom(6 * 3600));
        assert_eq!(
            "7d:counting".parse::<Tier>().unwrap(),
            Tier::daily(7).counting()
        );
        for bad in [
            "",
            "d",
            "7",
            "7y",
            "7d:fast",
            "x6h",
            "4x",
            "4x6",
            "4x6y",
            "99999999999d",
            "7é",
        ] {
            assert!(bad.parse::<Tier>().is_err(), "{bad:?}");
        }
        for t in parse_tiers("7d,4w,12m,48h,4x6h,3x90s:counting").unwrap() {
            assert_eq!(t.to_string().parse::<Tier>().unwrap(), t);
        }
        // Shown in the largest unit that holds the length whole (`4x6h`
        // was shown as `4x21600s`, which reads back the same but not as
        // typed).
        for (given, shown) in [
            ("4x6h", "4x6h"),
            ("4x360min", "4x6h"),
            ("2x90min", "2x90min"),
            ("1x366d", "1x366d"),
            ("10000x1min", "10000x1min"),
            ("3x90s:counting", "3x90s:counting"),
            ("4x1d", "4x1d"),
        ] {
            let t: Tier = given.parse().unwrap();
            assert_eq!(t.to_string(), shown, "{given}");
            assert_eq!(shown.parse::<Tier>().unwrap(), t, "{given}");
        }
    }

    /// A table counts a horizon back from its own day, which a clock that
    /// stepped back leaves ahead of the clock's, and a refusal measures
    /// its reach from there.
    #[test]
    fn a_tables_day_ahead_of_the_clock_moves_its_horizons() {
        let c = Config {
            tiers: vec![Tier::daily(7), "30d:fingerprint".parse().unwrap()],
            ..Config::default()
        };
        const DAY: i64 = 86_400;
        let now = 100 * DAY + DAY / 2;
        let day = Duration::from_secs(86_400);
        // The same finest windows; the table reads one segment, not two.
        assert_eq!(c.horizon_tier(now, day, 0, i64::MIN).unwrap(), (1, 99));
        assert_eq!(c.horizon_tier(now, day, 100, i64::MIN).unwrap(), (1, 99));
        assert_eq!(c.horizon_tier(now, day, 104, i64::MIN).unwrap(), (1, 103));
        let reach = |table_day| match c.horizon_tier(now, 60 * day, table_day, i64::MIN) {
            Err(Error::HorizonTooLong { max_secs, .. }) => max_secs,
            other => panic!("{other:?}"),
        };
        // Today and the 29 days before it: 29.5 days back from noon.
        assert_eq!(reach(0), 29 * 86_400 + 43_200);
        assert_eq!(reach(104), 29 * 86_400);
    }

    #[test]
    fn rejects_bad_configs() {
        let ok = Config::default();
        ok.validate().unwrap();
        type Mutation = Box<dyn Fn(&mut Config)>;
        let cases: Vec<Mutation> = vec![
            Box::new(|c| c.tiers.clear()),
            Box::new(|c| c.tiers[0].retention = 0),
            Box::new(|c| c.expected_items_per_day = 0),
            Box::new(|c| c.fpr = 0.0),
            Box::new(|c| c.fpr = 1.0),
            Box::new(|c| c.fpr = f64::NAN),
            Box::new(|c| c.tiers.push(Tier::daily(3))),
            Box::new(|c| c.tiers.push(Tier::custom(Duration::from_secs(86_400), 3))),
            Box::new(|c| c.tiers.push(Tier::custom(Duration::from_secs(1), 3))),
            Box::new(|c| c.utc_offset_secs = 86_400),
            Box::new(|c| c.tightening = 1.0),
            Box::new(|c| c.growth_factor = 0.5),
            Box::new(|c| c.expected_items_per_day = u64::MAX),
        ];
        for (i, mutate) in cases.iter().enumerate() {
            let mut c = ok.clone();
            mutate(&mut c);
            assert!(
                matches!(c.validate(), Err(Error::InvalidConfig { .. })),
                "case {i}"
            );
        }
    }

    /// A rate so low that no geometry reaches it (1e-300 for one key a
    /// day: about 1e270 blocks) is refused as needing more bytes than a
    /// file can hold, not as needing exactly 2^64 - 1 bytes, the count the
    /// plan saturates at.
    #[test]
    fn an_unreachable_rate_is_refused_without_a_made_up_size() {
        for (items, fpr) in [(1, 1e-300), (1_000_000, 5e-324), (u64::MAX, 0.001)] {
            let c = Config {
                expected_items_per_day: items,
                fpr,
                ..Config::default()
            };
            let msg = c.validate().unwrap_err().to_string();
            assert!(
                !msg.contains(&format!("need {} bytes", u64::MAX))
                    && msg.contains("need more than"),
                "{items} keys a day at {fpr:e}: {msg}"
            );
        }
    }

    #[test]
    fn chain_rates_stay_inside_the_segment_share() {
        let c = Config::default();
        let t = Tier::daily(7);
        let total: f64 = (0..40).map(|i| c.subfilter_plan(&t, i).1).sum();
        assert!(total <= c.segment_fpr(&t) * (1.0 + 1e-9));
        assert_eq!(c.subfilter_plan(&t, 0).0, 1_000_000);
        assert_eq!(c.subfilter_plan(&Tier::weekly(4), 1).0, 14_000_000);
    }
}
