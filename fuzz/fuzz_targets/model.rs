//! Interprets the fuzz input as a sequence of engine operations and checks
//! every answer against an exact model. Guards promise 1 of RELIABILITY: no
//! false negatives within the retention or a `contains_within` horizon,
//! across rotation, expiry, backfill, clean reopens and process crashes.
//!
//! The same operation alphabet and properties as `tests/model.rs` (keep
//! them in step):
//!
//! * `contains` must be true for a key inserted at an instant whose window
//!   is still live in the tier that reaches furthest back; `insert` and
//!   `insert_at` must then return `false`.
//! * `contains_within(h)` must be true for a key inserted at or after
//!   `now - h`, and fails with `HorizonTooLong` exactly when no tier's live
//!   windows reach back to `now - h`.
//! * `insert_at(t)` fails with `WindowUnavailable` exactly when `t` lies in
//!   a future window of some tier or is older than every tier keeps.
//!
//! Input layout: byte 0 picks the configuration, bytes 1-2 the start instant
//! (within the first six hours of Monday 2026-01-05 UTC), then one operation
//! per opcode byte followed by its arguments (see `decode`).

#![no_main]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use tempfile::TempDir;
use timebloom::{Config, Engine, Error, ManualClock, Options, Tier};

const DAY: i64 = 86_400;
const HOUR: i64 = 3_600;
/// Monday 2026-01-05T00:00:00Z, the start of ISO week 2026W02 (and of a
/// six-hour window).
const T0: i64 = 1_767_571_200;
/// Distinct keys: `k0` .. `k50`, plus the empty key and a long one.
const KEYS: u8 = 53;
const MAX_OPS: usize = 160;

// ---- the model ----------------------------------------------------------------

/// A tier's windows as the model computes them (UTC plus `off` seconds).
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

const VARIANTS: u8 = 8;

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
        _ => (vec![Tier::monthly(1), Tier::daily(10)], 4, -18_000),
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
        })
        .collect()
}

struct Model {
    tiers: Vec<ModelTier>,
    inserted: HashMap<Vec<u8>, Vec<i64>>,
}

impl Model {
    /// The start of the oldest live window of the tier reaching furthest back.
    fn coverage_start(&self, now: i64) -> i64 {
        self.tiers
            .iter()
            .map(|t| t.start(t.oldest_live(now)))
            .min()
            .unwrap_or(i64::MAX)
    }

    fn must_contain(&self, key: &[u8], now: i64) -> bool {
        self.inserted_since(key, self.coverage_start(now))
    }

    fn inserted_since(&self, key: &[u8], from: i64) -> bool {
        self.inserted
            .get(key)
            .is_some_and(|ts| ts.iter().any(|&t| t >= from))
    }

    fn horizon_covered(&self, now: i64, since: i64) -> bool {
        self.tiers
            .iter()
            .any(|t| t.index(since) >= t.oldest_live(now))
    }

    fn backfill_ok(&self, now: i64, t: i64) -> bool {
        let future = self.tiers.iter().any(|tr| tr.index(t) > tr.index(now));
        !future
            && self
                .tiers
                .iter()
                .any(|tr| tr.index(t) >= tr.oldest_live(now))
    }

    fn record(&mut self, key: &[u8], t: i64) {
        self.inserted.entry(key.to_vec()).or_default().push(t);
    }
}

// ---- operations ---------------------------------------------------------------

#[derive(Clone, Copy, Debug)]
enum Step {
    Hours(u8),
    Days(u8),
    /// To the next UTC midnight, plus -1, 0 or +1 seconds.
    Midnight(i8),
}

#[derive(Clone, Copy, Debug)]
enum When {
    Ago(u32),
    /// The start of the day `n` days before today, plus -1, 0 or +1 seconds
    /// (`n = -1` is tomorrow: a future window).
    DayStart(i8, i8),
}

#[derive(Clone, Copy, Debug)]
enum Op {
    Insert(u8),
    Contains(u8),
    ContainsWithin(u8, u32),
    Advance(Step),
    Reopen,
    Crash,
    Flush,
    InsertAt(u8, When),
}

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn key(&mut self) -> u8 {
        self.u8() % KEYS
    }

    fn delta(&mut self) -> i8 {
        (self.u8() % 3) as i8 - 1
    }
}

fn decode(input: &mut Input) -> Op {
    match input.u8() % 16 {
        0..=3 => Op::Insert(input.key()),
        4 | 5 => Op::Contains(input.key()),
        6 | 7 => {
            let k = input.key();
            let h = match input.u8() % 2 {
                // Whole days, give or take a second: window boundaries.
                0 => (u32::from(input.u8() % 20) * 86_400)
                    .saturating_add_signed(input.delta().into()),
                _ => u32::from(input.u16()) * 27, // up to 20 days
            };
            Op::ContainsWithin(k, h)
        }
        8 | 9 => {
            let a = input.u8();
            Op::Advance(match a % 3 {
                0 => Step::Hours(1 + (a / 3) % 30),
                1 => Step::Days(1 + (a / 3) % 5),
                _ => Step::Midnight(input.delta()),
            })
        }
        10 => Op::Reopen,
        11 => Op::Crash,
        12 => Op::Flush,
        _ => {
            let k = input.key();
            let w = match input.u8() % 2 {
                0 => When::DayStart((input.u8() % 17) as i8 - 1, input.delta()),
                _ => When::Ago(u32::from(input.u16()) * 21), // up to 16 days
            };
            Op::InsertAt(k, w)
        }
    }
}

fn key_bytes(k: u8) -> Vec<u8> {
    match k % KEYS {
        51 => Vec::new(),
        52 => vec![b'L'; 4000],
        k => format!("k{k}").into_bytes(),
    }
}

/// A fresh directory, on tmpfs when there is one (`/dev/shm`): the engine
/// fsyncs at every rotation and close, which on a disk costs more than
/// everything else an input does. `TIMEBLOOM_FUZZ_TMPDIR` overrides it.
fn scratch() -> TempDir {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let base = BASE.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        std::env::var_os("TIMEBLOOM_FUZZ_TMPDIR")
            .map(PathBuf::from)
            .or_else(|| shm.is_dir().then(|| shm.to_path_buf()))
    });
    match base {
        Some(b) => tempfile::Builder::new()
            .prefix("timebloom-fuzz-")
            .tempdir_in(b)
            .or_else(|_| tempfile::tempdir()),
        None => tempfile::tempdir(),
    }
    .expect("tempdir")
}

fn at(t: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(t as u64)
}

/// The files of an engine directory (relative paths and bytes), LOCK aside.
type Files = Vec<(PathBuf, Vec<u8>)>;

fn read_files(dir: &Path) -> Files {
    let mut out = vec![(
        PathBuf::from("MANIFEST"),
        std::fs::read(dir.join("MANIFEST")).expect("read MANIFEST"),
    )];
    for e in std::fs::read_dir(dir.join("seg")).expect("list seg") {
        let rel = PathBuf::from("seg").join(e.expect("list seg").file_name());
        let bytes = std::fs::read(dir.join(&rel)).expect("read segment");
        out.push((rel, bytes));
    }
    out
}

fn write_files(dir: &Path, files: &Files) {
    std::fs::create_dir_all(dir.join("seg")).expect("create seg");
    for (rel, bytes) in files {
        std::fs::write(dir.join(rel), bytes).expect("write engine file");
    }
}

/// One freshly created, empty engine per configuration, made at `T0` and
/// copied for each input (creating one costs more than copying it).
fn template(v: u8) -> &'static Files {
    static T: OnceLock<Vec<Files>> = OnceLock::new();
    &T.get_or_init(|| {
        (0..VARIANTS)
            .map(|v| {
                let (tiers, items, off) = variant(v);
                let dir = scratch();
                let config = Config {
                    tiers,
                    expected_items_per_day: items,
                    fpr: 0.01,
                    utc_offset_secs: off,
                    ..Config::default()
                };
                let clock = ManualClock::new(at(T0));
                Engine::create_with(dir.path(), config, Options::default().clock(clock))
                    .expect("create template")
                    .close()
                    .expect("close template");
                read_files(dir.path())
            })
            .collect()
    })[usize::from(v % VARIANTS)]
}

// ---- the harness --------------------------------------------------------------

struct Harness {
    dir: TempDir,
    clock: ManualClock,
    now: i64,
    engine: Option<Engine>,
    model: Model,
    retention: Vec<u32>,
    /// The UTC offset of window boundaries.
    off: i64,
}

fn options(clock: &ManualClock) -> Options {
    Options::default().clock(clock.clone()).verify_on_open(true)
}

impl Harness {
    fn new(v: u8, start_offset: i64) -> Harness {
        let (tiers, _, off) = variant(v);
        let now = T0 + start_offset;
        let clock = ManualClock::new(at(now));
        let dir = scratch();
        write_files(dir.path(), template(v));
        let engine = Engine::open_with(dir.path(), options(&clock)).expect("open the template");
        Harness {
            dir,
            clock,
            now,
            engine: Some(engine),
            model: Model {
                tiers: model_tiers(&tiers, off),
                inserted: HashMap::new(),
            },
            retention: tiers.iter().map(|t| t.retention).collect(),
            off: i64::from(off),
        }
    }

    fn engine(&self) -> &Engine {
        self.engine.as_ref().expect("engine is open")
    }

    /// The local day (window boundaries at `off`) holding `t`.
    fn local_day(&self, t: i64) -> i64 {
        (t + self.off).div_euclid(DAY)
    }

    fn when(&self, w: When) -> i64 {
        match w {
            When::Ago(s) => self.now - i64::from(s),
            When::DayStart(n, d) => {
                (self.local_day(self.now) - i64::from(n)) * DAY - self.off + i64::from(d.signum())
            }
        }
    }

    fn reopen(&mut self) {
        let e = Engine::open_with(self.dir.path(), options(&self.clock))
            .unwrap_or_else(|e| panic!("open: {e}"));
        self.engine = Some(e);
    }

    fn apply(&mut self, op: Op) {
        let now = self.now;
        match op {
            Op::Insert(k) => {
                let key = key_bytes(k);
                let must = self.model.must_contain(&key, now);
                let new = self
                    .engine()
                    .insert(&key)
                    .unwrap_or_else(|e| panic!("insert: {e}"));
                assert!(
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
                    .unwrap_or_else(|e| panic!("contains: {e}"));
                assert!(
                    got || !self.model.must_contain(&key, now),
                    "false negative: contains(k{k}) = false, inserted at {:?}, now {now}, \
                     coverage from {}",
                    self.model.inserted.get(&key),
                    self.model.coverage_start(now)
                );
            }
            Op::ContainsWithin(k, h) => {
                let key = key_bytes(k);
                let since = now - i64::from(h);
                let covered = self.model.horizon_covered(now, since);
                match self
                    .engine()
                    .contains_within(&key, Duration::from_secs(u64::from(h)))
                {
                    Ok(got) => {
                        assert!(
                            covered,
                            "contains_within({h}s) answered though no tier keeps {since}"
                        );
                        assert!(
                            got || !self.model.inserted_since(&key, since),
                            "false negative: contains_within(k{k}, {h}s) = false, inserted at \
                             {:?}, now {now}",
                            self.model.inserted.get(&key)
                        );
                    }
                    Err(Error::HorizonTooLong { .. }) => assert!(
                        !covered,
                        "contains_within({h}s) refused a horizon that a tier keeps (now {now})"
                    ),
                    Err(e) => panic!("contains_within: {e}"),
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
                self.now = to.max(now);
                self.clock.set(at(self.now));
            }
            Op::Reopen => {
                let engine = self.engine.take().expect("engine is open");
                engine.close().unwrap_or_else(|e| panic!("close: {e}"));
                self.reopen();
            }
            Op::Crash => {
                let copy = scratch();
                write_files(copy.path(), &read_files(self.dir.path()));
                drop(self.engine.take());
                self.dir = copy;
                self.reopen();
            }
            Op::Flush => {
                let e = self.engine();
                e.flush().unwrap_or_else(|e| panic!("flush: {e}"));
                e.verify().unwrap_or_else(|e| panic!("verify: {e}"));
                let stats = e.stats().unwrap_or_else(|e| panic!("stats: {e}"));
                for (t, r) in stats.tiers.iter().zip(&self.retention) {
                    assert!(
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
                let ok = self.model.backfill_ok(now, t);
                let must = self.model.must_contain(&key, now);
                match self.engine().insert_at(&key, at(t)) {
                    Ok(new) => {
                        assert!(ok, "insert_at({t}) accepted, now {now}");
                        assert!(
                            !(must && new),
                            "insert_at reported new a key the model holds (k{k} inserted at \
                             {:?}, now {now})",
                            self.model.inserted.get(&key)
                        );
                        self.model.record(&key, t);
                    }
                    Err(Error::WindowUnavailable { .. }) => {
                        assert!(!ok, "insert_at({t}) refused, now {now}")
                    }
                    Err(e) => panic!("insert_at({t}): {e}"),
                }
            }
        }
    }

    fn check_all(&self) {
        for k in 0..KEYS {
            let key = key_bytes(k);
            let got = self
                .engine()
                .contains(&key)
                .unwrap_or_else(|e| panic!("contains: {e}"));
            assert!(
                got || !self.model.must_contain(&key, self.now),
                "false negative at the end: k{k}, inserted at {:?}, now {}",
                self.model.inserted.get(&key),
                self.now
            );
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let v = input.u8();
    let start_offset = i64::from(input.u16()) % (6 * HOUR);
    let mut ops = Vec::new();
    while !input.0.is_empty() && ops.len() < MAX_OPS {
        ops.push(decode(&mut input));
    }
    let trace = trace();
    if trace {
        eprintln!("model: variant {} start T0+{start_offset}s", v % VARIANTS);
    }
    let mut h = Harness::new(v, start_offset);
    for (i, op) in ops.iter().enumerate() {
        if trace {
            eprintln!("model: op {i}: {op:?} (now {})", h.now);
        }
        h.apply(*op);
    }
    h.check_all();
});

/// `MODEL_TRACE=1` prints every operation (to replay an artifact readably).
fn trace() -> bool {
    static T: OnceLock<bool> = OnceLock::new();
    *T.get_or_init(|| std::env::var_os("MODEL_TRACE").is_some_and(|v| v != "0"))
}
