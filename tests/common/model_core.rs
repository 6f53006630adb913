//! The exact model shared by `tests/model.rs` (proptest) and
//! `fuzz/fuzz_targets/model.rs` (libFuzzer): the operation alphabet, the
//! engine configurations, the window arithmetic and the checks. Each front
//! end only turns its input into `Op`s and says how engine directories are
//! made and copied (`Storage`). Guards promise 1 of RELIABILITY, no false
//! negatives within the retention or a horizon.
//!
//! The model keeps every insertion instant of every key. From the same window
//! arithmetic as the engine (days, ISO weeks starting on Monday, calendar
//! months and fixed spans, at a UTC offset) it derives what the engine must
//! answer:
//!
//! * `contains` must be true for a key inserted at an instant whose window is
//!   still live in the tier that reaches furthest back (the union of all
//!   tiers' retentions); `insert` and `insert_at` must then return `false`.
//! * `contains_within(h)` must be true for a key inserted at or after
//!   `now - h`, and must fail with `HorizonTooLong` exactly when no tier's
//!   live windows reach back to `now - h`.
//! * `insert_at(t)` must fail with `WindowUnavailable` exactly when `t` lies
//!   in a future window of some tier or is older than every tier keeps.
//! * After a flush, no tier keeps more segments than its retention.
//!
//! The clock also steps back (`Op::Back`, never before the engine's
//! creation), as a VM restored from a snapshot or a reset host clock does.
//! The engine then expires nothing and brings back no expired window: each
//! tier keeps the windows its newest one keeps, and those were made by the
//! latest instant the clock ever showed (the model calls `maintain` at every
//! step forward, so the engine rotated to it). A fingerprint table keeps
//! the newest day it took (`table_today`, that latest instant's day) and
//! counts its days and horizons from it (docs/fingerprint.md, "A clock that
//! steps back"). So, while the clock is behind the latest instant:
//!
//! * "kept" (`contains`, and `insert` never saying "new") is measured from
//!   the latest instant, not from the clock: the conservative reading,
//!   since every tier keeps at least that much;
//! * "within the horizon" must hold counted back from the clock AND from
//!   the table's day: a key inserted at or after `now - h + shift` days,
//!   where `shift` is how many days the table's day is ahead of the
//!   clock's (0 without a table);
//! * `HorizonTooLong` is no longer exact: a horizon some tier keeps counted
//!   from the latest instant must be answered, one no tier keeps counted
//!   from the clock (which reaches further back than any tier really keeps)
//!   must be refused, and in between either answer is right (the engine
//!   counts Bloom windows from its newest ones, a table's days from the
//!   clock's day shifted to the table's). A refusal's longest horizon is
//!   shorter than the one asked and answered (in every run); with the
//!   clock behind every window the tiers keep no horizon is answered, and
//!   the refusal is `WindowUnavailable`;
//! * `insert_at` stays exact: a Bloom tier refuses an instant past the
//!   clock's window, a table one past its day, and a tier takes what its
//!   newest window (day) keeps.
//!
//! Once the clock is back at the latest instant every bound above is the
//! exact one again; in a run whose clock never stepped back the clock is
//! always the latest instant, so nothing is relaxed there.
//!
//! Positive answers for keys the model does not require are false positives
//! and allowed.
//!
//! Included by path (`#[path = ...] mod model_core;`), not through
//! `tests/common/mod.rs`.

use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;
use timebloom::{Config, Engine, Error, ManualClock, Options, Tier};

pub const DAY: i64 = 86_400;
pub const HOUR: i64 = 3_600;
/// Monday 2026-01-05T00:00:00Z, the start of ISO week 2026W02 (and of a
/// six-hour window).
pub const T0: i64 = 1_767_571_200;
/// Distinct keys: `k0` .. `k50`, plus the empty key and a long one.
pub const KEYS: u8 = 53;

/// Like `assert!`, but returns the message (with its location) as an `Err`
/// so that each front end reports it its own way.
macro_rules! check {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!("{} at {}:{}", format!($($fmt)+), file!(), line!()));
        }
    };
}

// ---- the model ----------------------------------------------------------------

/// A tier's windows as the model computes them (UTC plus `off` seconds).
/// The calendar math repeats `src/window.rs` on purpose: an oracle that
/// called the engine's own window code would share its bugs.
#[derive(Clone, Copy, Debug)]
enum Span {
    Day,
    Week,
    Month,
    Secs(i64),
}

/// Days since 1970-01-01 of the proleptic Gregorian date `y-m-d`
/// (Howard Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// `(year, month)` of a day counted from 1970-01-01 (Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, i64) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m)
}

impl Span {
    fn index(self, t: i64, off: i64) -> i64 {
        let local = t + off;
        match self {
            Span::Day => local.div_euclid(DAY),
            // ISO weeks start on Monday; 1970-01-01 was a Thursday.
            Span::Week => (local.div_euclid(DAY) + 3).div_euclid(7),
            Span::Month => {
                let (y, m) = civil_from_days(local.div_euclid(DAY));
                y * 12 + m - 1
            }
            Span::Secs(s) => local.div_euclid(s),
        }
    }

    fn start(self, i: i64, off: i64) -> i64 {
        let local = match self {
            Span::Day => i * DAY,
            Span::Week => (i * 7 - 3) * DAY,
            Span::Month => days_from_civil(i.div_euclid(12), i.rem_euclid(12) + 1, 1) * DAY,
            Span::Secs(s) => i * s,
        };
        local - off
    }
}

#[derive(Clone, Copy, Debug)]
struct ModelTier {
    span: Span,
    retention: i64,
    /// The configuration's `utc_offset_secs`.
    off: i64,
    /// A fingerprint table (days as windows; its "today" is the newest day
    /// it took, see `Model::table_shift`).
    table: bool,
}

impl ModelTier {
    fn index(self, t: i64) -> i64 {
        self.span.index(t, self.off)
    }

    fn start(self, i: i64) -> i64 {
        self.span.start(i, self.off)
    }

    fn oldest_live(self, now: i64) -> i64 {
        self.index(now) - (self.retention - 1)
    }
}

pub const VARIANTS: u8 = 10;

/// The engine configurations: tiers, keys a day (few, so chains grow) and
/// the UTC offset of window boundaries.
fn variant(v: u8) -> (Vec<Tier>, u64, i32) {
    let six_hours = Duration::from_secs(6 * 3600);
    match v % VARIANTS {
        0 => (vec![Tier::daily(3), Tier::weekly(2)], 4, 0),
        // The tier reaching furthest back alternates with the weekday.
        1 => (vec![Tier::daily(10), Tier::weekly(2)], 4, 0),
        2 => (vec![Tier::custom(six_hours, 4), Tier::daily(2)], 3, 0),
        3 => (
            vec![Tier::daily(3).counting(), Tier::weekly(2).counting()],
            4,
            0,
        ),
        4 => (vec![Tier::daily(1)], 2, 0),
        5 => (vec![Tier::weekly(2), Tier::daily(3)], 4, 0),
        // Boundaries at local midnight, +05:30.
        6 => (vec![Tier::daily(3), Tier::weekly(2)], 4, 19_800),
        // The month reaches furthest back except early in a month; -05:00.
        7 => (vec![Tier::monthly(1), Tier::daily(10)], 4, -18_000),
        // A fingerprint table alone: tiny, so its chain grows.
        8 => (vec![Tier::fingerprint(5)], 4, 0),
        // A table beside a Bloom tier, reaching furthest back; +05:30.
        _ => (vec![Tier::daily(2), Tier::fingerprint(10)], 4, 19_800),
    }
}

/// The engine configuration of variant `v`.
pub fn engine_config(v: u8) -> Config {
    let (tiers, items, off) = variant(v);
    Config {
        tiers,
        expected_items_per_day: items,
        fpr: 0.01,
        utc_offset_secs: off,
        ..Config::default()
    }
}

fn model_tiers(tiers: &[Tier], off: i32) -> Vec<ModelTier> {
    tiers
        .iter()
        .map(|t| ModelTier {
            span: match t.span {
                timebloom::Span::Day => Span::Day,
                timebloom::Span::Week => Span::Week,
                timebloom::Span::Month => Span::Month,
                timebloom::Span::Custom(s) => Span::Secs(s as i64),
            },
            retention: i64::from(t.retention),
            off: i64::from(off),
            table: matches!(t.kind, timebloom::Kind::Fingerprint),
        })
        .collect()
}

struct Model {
    tiers: Vec<ModelTier>,
    inserted: HashMap<Vec<u8>, Vec<i64>>,
}

impl Model {
    /// The start of the oldest live window of the tier reaching furthest
    /// back, with the newest windows at `now` (the latest instant the clock
    /// showed: see the module comment).
    fn coverage_start(&self, now: i64) -> i64 {
        self.tiers
            .iter()
            .map(|t| t.start(t.oldest_live(now)))
            .min()
            .unwrap_or(i64::MAX)
    }

    /// Whether `contains` must answer true, the newest windows made at
    /// `latest`.
    fn must_contain(&self, key: &[u8], latest: i64) -> bool {
        self.inserted_since(key, self.coverage_start(latest))
    }

    fn inserted_since(&self, key: &[u8], from: i64) -> bool {
        self.inserted
            .get(key)
            .is_some_and(|ts| ts.iter().any(|&t| t >= from))
    }

    /// Whether some tier keeps the window holding `since` when its newest
    /// window holds `now` (else `HorizonTooLong`).
    fn horizon_covered(&self, now: i64, since: i64) -> bool {
        self.tiers
            .iter()
            .any(|t| t.index(since) >= t.oldest_live(now))
    }

    /// Whether `insert_at(t)` must succeed, the newest windows (and the
    /// tables' day) made at `latest` (the clock's instant unless it stepped
    /// back). A tier's future is past its newest window (a
    /// table's, past the day it took), whatever the clock says; a tier
    /// keeps what its newest window (day) keeps.
    fn backfill_ok(&self, latest: i64, t: i64) -> bool {
        let future = self.tiers.iter().any(|tr| tr.index(t) > tr.index(latest));
        !future
            && self
                .tiers
                .iter()
                .any(|tr| tr.index(t) >= tr.oldest_live(latest))
    }

    /// How many days the tables' day (that of `latest`) is ahead of the
    /// clock's day: a table counts a horizon back from its day, so at clock
    /// `now` it answers `h` from `now - h + shift` days on (0 without a
    /// table, or with the clock at the latest instant).
    fn table_shift(&self, now: i64, latest: i64) -> i64 {
        self.tiers
            .iter()
            .filter(|t| t.table)
            .map(|t| t.index(latest) - t.index(now))
            .max()
            .unwrap_or(0)
    }

    fn record(&mut self, key: &[u8], t: i64) {
        self.inserted.entry(key.to_vec()).or_default().push(t);
    }
}

// ---- operations ---------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
pub enum Step {
    Hours(u8),
    Days(u8),
    /// To the next local midnight (window boundaries at the UTC offset),
    /// plus -1, 0 or +1 seconds.
    Midnight(i8),
}

#[derive(Clone, Copy, Debug)]
pub enum When {
    /// `now` minus so many seconds.
    Ago(u32),
    /// The start of the day `n` days before today, plus -1, 0 or +1 seconds
    /// (`n = -1` is tomorrow: a future window).
    DayStart(i8, i8),
}

#[derive(Clone, Copy, Debug)]
pub enum Op {
    Insert(u8),
    Contains(u8),
    ContainsWithin(u8, u32),
    Advance(Step),
    /// Steps the clock back (`Step::Midnight`: to the start of the clock's
    /// local day, plus -1, 0 or +1 seconds), never before the engine's
    /// creation. No `maintain`: the engine sees the clock in its calls.
    Back(Step),
    Reopen,
    /// Copies the directory while the engine is open (what a process crash
    /// leaves: the page cache survives) and opens the copy.
    Crash,
    Flush,
    InsertAt(u8, When),
}

fn key_bytes(k: u8) -> Vec<u8> {
    match k % KEYS {
        51 => Vec::new(),
        52 => vec![b'L'; 4000],
        k => format!("k{k}").into_bytes(),
    }
}

pub fn at(t: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(t as u64)
}

// ---- the harness --------------------------------------------------------------

/// What differs between the front ends: how engine directories are made and
/// copied. Failures here panic.
pub trait Storage {
    /// A fresh, empty directory.
    fn tempdir() -> TempDir;
    /// The engine of configuration `v` in the empty directory `dir`,
    /// opened with `options`.
    fn create(v: u8, dir: &Path, options: Options) -> Engine;
    /// Copies the files of the engine directory `from` (open or not) into
    /// `to`, LOCK aside.
    fn copy(from: &Path, to: &Path);
}

pub struct Harness<S: Storage> {
    dir: TempDir,
    clock: ManualClock,
    now: i64,
    /// The latest instant the clock showed (the engine rotated to it: every
    /// tier's newest window, and the tables' day, hold it).
    latest: i64,
    /// The engine's creation instant: the clock never steps back before it.
    created: i64,
    engine: Option<Engine>,
    model: Model,
    retention: Vec<u32>,
    /// The UTC offset of window boundaries.
    off: i64,
    storage: PhantomData<S>,
}

fn options(clock: &ManualClock) -> Options {
    Options::default().clock(clock.clone()).verify_on_open(true)
}

impl<S: Storage> Harness<S> {
    /// A new engine of configuration `v` at `T0 + start_offset` seconds.
    pub fn new(v: u8, start_offset: i64) -> Self {
        let (tiers, _, off) = variant(v);
        let now = T0 + start_offset;
        let clock = ManualClock::new(at(now));
        let dir = S::tempdir();
        let engine = S::create(v, dir.path(), options(&clock));
        Harness {
            dir,
            clock,
            now,
            latest: now,
            created: now,
            engine: Some(engine),
            model: Model {
                tiers: model_tiers(&tiers, off),
                inserted: HashMap::new(),
            },
            retention: tiers.iter().map(|t| t.retention).collect(),
            off: i64::from(off),
            storage: PhantomData,
        }
    }

    /// The model's (and the engine clock's) current instant.
    #[allow(dead_code)] // used by the fuzz front end's trace only
    pub fn now(&self) -> i64 {
        self.now
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("engine is open")
    }

    /// The local day (window boundaries at `off`) holding `t`.
    fn local_day(&self, t: i64) -> i64 {
        (t + self.off).div_euclid(DAY)
    }

    fn set_now(&mut self, t: i64) {
        assert!(t >= self.now, "Advance moves the model clock forward");
        self.now = t;
        self.latest = self.latest.max(t);
        self.clock.set(at(t));
    }

    fn when(&self, w: When) -> i64 {
        match w {
            When::Ago(s) => self.now - i64::from(s),
            When::DayStart(n, d) => {
                (self.local_day(self.now) - i64::from(n)) * DAY - self.off + i64::from(d.signum())
            }
        }
    }

    /// Applies one operation and checks the engine against the model.
    pub fn apply(&mut self, op: Op) -> Result<(), String> {
        let (now, latest) = (self.now, self.latest);
        match op {
            Op::Insert(k) => {
                let key = key_bytes(k);
                let must = self.model.must_contain(&key, latest);
                let new = self
                    .engine()
                    .insert(&key)
                    .map_err(|e| format!("insert: {e}"))?;
                check!(
                    !(must && new),
                    "insert reported new a key the model holds (k{k} inserted at {:?}, now {now})",
                    self.model.inserted.get(&key)
                );
                self.model.record(&key, now);
            }
            Op::Contains(k) => {
                let key = key_bytes(k);
                let got = self
                    .engine()
                    .contains(&key)
                    .map_err(|e| format!("contains: {e}"))?;
                check!(
                    got || !self.model.must_contain(&key, latest),
                    "false negative: contains(k{k}) = false, inserted at {:?}, now {now} \
                     (latest {latest}), coverage from {}",
                    self.model.inserted.get(&key),
                    self.model.coverage_start(latest)
                );
            }
            Op::ContainsWithin(k, h) => {
                let key = key_bytes(k);
                let since = now - i64::from(h);
                // Equal unless the clock is behind the latest instant (see
                // the module comment): then a horizon kept counted from the
                // latest instant must be answered, and one answered must be
                // kept counted from the clock, which reaches further back.
                let must_answer = self.model.horizon_covered(latest, since);
                let may_answer = self.model.horizon_covered(now, since);
                // Within the horizon from the clock and from the tables' day.
                let shift = self.model.table_shift(now, latest);
                let within_from = since + shift * DAY;
                match self
                    .engine()
                    .contains_within(&key, Duration::from_secs(u64::from(h)))
                {
                    Ok(got) => {
                        check!(
                            may_answer,
                            "contains_within({h}s) answered though no tier keeps {since} \
                             (now {now}, latest {latest})"
                        );
                        check!(
                            got || !self.model.inserted_since(&key, within_from),
                            "false negative: contains_within(k{k}, {h}s) = false, inserted at \
                             {:?}, now {now}, latest {latest}, within from {within_from}",
                            self.model.inserted.get(&key)
                        );
                    }
                    Err(Error::HorizonTooLong { max_secs, .. }) => {
                        check!(
                            !must_answer,
                            "contains_within({h}s) refused a horizon that a tier keeps (now \
                             {now}, latest {latest})"
                        );
                        // The longest horizon a refusal names is shorter and
                        // answered.
                        check!(
                            max_secs < u64::from(h),
                            "contains_within({h}s) refused, naming a longest horizon of \
                             {max_secs}s (now {now}, latest {latest})"
                        );
                        let longest = self
                            .engine()
                            .contains_within(&key, Duration::from_secs(max_secs));
                        check!(
                            longest.is_ok(),
                            "contains_within({h}s) refused naming a longest horizon of \
                             {max_secs}s, which answers {longest:?} (now {now}, latest {latest})"
                        );
                    }
                    // The clock stepped back behind every window the tiers
                    // keep: every horizon reaches windows a rotation
                    // expired, and none is answered.
                    Err(Error::WindowUnavailable { reason })
                        if !self.model.horizon_covered(latest, now) =>
                    {
                        check!(
                            !must_answer,
                            "contains_within({h}s) refused a horizon that a tier keeps: \
                             {reason} (now {now}, latest {latest})"
                        );
                    }
                    Err(e) => return Err(format!("contains_within: {e}")),
                }
            }
            Op::Advance(step) => {
                let to = match step {
                    Step::Hours(n) => now + i64::from(n) * HOUR,
                    Step::Days(n) => now + i64::from(n) * DAY,
                    Step::Midnight(d) => {
                        (self.local_day(now) + 1) * DAY - self.off + i64::from(d.signum())
                    }
                };
                self.set_now(to.max(now));
                // The model steps the clock on purpose: a step that skips
                // every window would otherwise be refused as a clock jump
                // (that guard has its own tests in tests/review_defects.rs).
                self.engine()
                    .maintain(at(self.now))
                    .map_err(|e| format!("maintain: {e}"))?;
            }
            Op::Back(step) => {
                let to = match step {
                    Step::Hours(n) => now - i64::from(n) * HOUR,
                    Step::Days(n) => now - i64::from(n) * DAY,
                    Step::Midnight(d) => {
                        self.local_day(now) * DAY - self.off + i64::from(d.signum())
                    }
                };
                self.now = to.min(now).max(self.created);
                self.clock.set(at(self.now));
            }
            Op::Reopen => {
                let engine = self.engine.take().expect("engine is open");
                engine.close().map_err(|e| format!("close: {e}"))?;
                self.reopen()?;
            }
            Op::Crash => {
                let copy = S::tempdir();
                S::copy(self.dir.path(), copy.path());
                drop(self.engine.take());
                self.dir = copy;
                self.reopen()?;
            }
            Op::Flush => {
                let e = self.engine();
                e.flush().map_err(|e| format!("flush: {e}"))?;
                e.verify().map_err(|e| format!("verify: {e}"))?;
                let stats = e.stats().map_err(|e| format!("stats: {e}"))?;
                for (t, r) in stats.tiers.iter().zip(&self.retention) {
                    check!(
                        t.segments.len() <= *r as usize,
                        "tier {} keeps {} segments, retention {r}",
                        t.tier,
                        t.segments.len()
                    );
                }
            }
            Op::InsertAt(k, w) => {
                let key = key_bytes(k);
                let t = self.when(w);
                let ok = self.model.backfill_ok(latest, t);
                let must = self.model.must_contain(&key, latest);
                match self.engine().insert_at(&key, at(t)) {
                    Ok(new) => {
                        check!(ok, "insert_at({t}) accepted, now {now}, latest {latest}");
                        check!(
                            !(must && new),
                            "insert_at reported new a key the model holds (k{k} inserted at \
                             {:?}, now {now})",
                            self.model.inserted.get(&key)
                        );
                        self.model.record(&key, t);
                    }
                    Err(Error::WindowUnavailable { .. }) => {
                        check!(!ok, "insert_at({t}) refused, now {now}, latest {latest}")
                    }
                    Err(e) => return Err(format!("insert_at({t}): {e}")),
                }
            }
        }
        Ok(())
    }

    fn reopen(&mut self) -> Result<(), String> {
        let e = Engine::open_with(self.dir.path(), options(&self.clock))
            .map_err(|e| format!("open: {e}"))?;
        self.engine = Some(e);
        Ok(())
    }

    /// After the last operation: every key the model holds is present.
    pub fn check_all(&self) -> Result<(), String> {
        for k in 0..KEYS {
            let key = key_bytes(k);
            let got = self
                .engine()
                .contains(&key)
                .map_err(|e| format!("contains: {e}"))?;
            check!(
                got || !self.model.must_contain(&key, self.latest),
                "false negative at the end: k{k}, inserted at {:?}, now {}, latest {}",
                self.model.inserted.get(&key),
                self.now,
                self.latest
            );
        }
        Ok(())
    }
}
