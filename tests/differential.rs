// Differential tests: the embedded engine's several ways of asking the same
// question must give the same answers, key by key.
//
// Two engines start as byte-for-byte copies of one directory (the same hash
// seed), share one `ManualClock` and are fed the same keys in the same
// order: `single` by one call per key (`insert`, `insert_within`), `batched`
// by the batch calls (`insert_batch`, `insert_within_batch`, a `Handle`'s
// `insert_batch`), with keys repeated inside a batch. Their answers must be
// identical, and so must every lookup: `contains`, `contains_batch`, a
// handle's `contains` and `contains_batch`, `contains_within` (engine and
// handle) at several horizons, an engine opened read-only beside the
// writer, and the `timebloom check` command on the same directory. Any key
// inserted within a horizon the engine keeps must be found at it (no false
// negative). The clock moves across window boundaries by small and large
// steps and steps back a little; the engines are closed and reopened; the
// plans are small, so chains grow past them.
//
// `tests/model.rs` checks one engine against an exact model of what it must
// answer; this file checks the engine's entry points against each other.

#[path = "cli_support/mod.rs"]
mod cli_support;
mod common;

use std::collections::HashMap;
use std::mem::discriminant;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tempfile::TempDir;
use timebloom::{Clock, Config, Engine, Error, ManualClock, Options, SyncPolicy, Tier};

const HOUR: u64 = 3600;
const DAYS: u64 = 86_400;

/// The horizons every check asks at (some longer than a configuration keeps).
const HORIZONS: [u64; 10] = [
    0,
    60,
    HOUR,
    6 * HOUR,
    DAYS,
    2 * DAYS,
    3 * DAYS,
    7 * DAYS,
    14 * DAYS,
    40 * DAYS,
];

/// A small deterministic generator (splitmix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// The configurations under test: mixed tiers, small plans.
fn configs() -> Vec<(&'static str, Config)> {
    let cfg = |tiers: Vec<Tier>, items: u64, sync: SyncPolicy| Config {
        tiers,
        expected_items_per_day: items,
        fpr: 0.01,
        sync,
        ..Config::default()
    };
    let offset = |mut c: Config, secs: i32| {
        c.utc_offset_secs = secs;
        c
    };
    let hourly = |n| Tier::custom(Duration::from_secs(HOUR), n);
    vec![
        (
            "3d,2w +05:30",
            offset(
                cfg(vec![Tier::daily(3), Tier::weekly(2)], 8, SyncPolicy::None),
                19_800,
            ),
        ),
        (
            "6h1,3d",
            cfg(vec![hourly(6), Tier::daily(3)], 8, SyncPolicy::None),
        ),
        (
            "2d,10d:fingerprint -05:00",
            offset(
                cfg(
                    vec![Tier::daily(2), Tier::fingerprint(10)],
                    8,
                    SyncPolicy::Interval(Duration::from_secs(60)),
                ),
                -18_000,
            ),
        ),
        (
            "3d:counting,2w",
            cfg(
                vec![Tier::daily(3).counting(), Tier::weekly(2)],
                8,
                SyncPolicy::Interval(Duration::from_secs(60)),
            ),
        ),
        (
            "4x6h:counting,4d:fingerprint",
            cfg(
                vec![
                    Tier::custom(Duration::from_secs(6 * HOUR), 4).counting(),
                    Tier::fingerprint(4),
                ],
                8,
                SyncPolicy::None,
            ),
        ),
        (
            "5d:fingerprint",
            cfg(vec![Tier::fingerprint(5)], 8, SyncPolicy::None),
        ),
        (
            "2d,2w,2m",
            cfg(
                vec![Tier::daily(2), Tier::weekly(2), Tier::monthly(2)],
                8,
                SyncPolicy::Interval(Duration::from_secs(60)),
            ),
        ),
    ]
}

fn key(i: u64) -> Vec<u8> {
    format!("https://diff.example/{i}").into_bytes()
}

fn secs(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Two engines that must answer alike, and what was inserted when.
struct Rig {
    name: String,
    clock: ManualClock,
    single_dir: TempDir,
    batched_dir: TempDir,
    single: Option<Engine>,
    batched: Option<Engine>,
    /// Clock readings at which each key was recorded.
    inserted: HashMap<Vec<u8>, Vec<i64>>,
    keys: u64,
    log: Vec<String>,
    /// Whether a tier is a fingerprint table.
    table: bool,
    /// The latest instant the clock showed.
    latest: i64,
    /// The configured offset of days from UTC.
    off: i64,
}

fn options(clock: &ManualClock) -> Options {
    Options::default().clock(clock.clone())
}

fn same_outcome<T: PartialEq + std::fmt::Debug>(
    a: &timebloom::Result<T>,
    b: &timebloom::Result<T>,
) -> bool {
    match (a, b) {
        (Ok(x), Ok(y)) => x == y,
        (Err(x), Err(y)) => discriminant(x) == discriminant(y),
        _ => false,
    }
}

impl Rig {
    fn new(name: &str, config: Config, start: SystemTime, keys: u64) -> Rig {
        let clock = ManualClock::new(start);
        let table = config
            .tiers
            .iter()
            .any(|t| t.kind == timebloom::Kind::Fingerprint);
        let off = i64::from(config.utc_offset_secs);
        let single_dir = tempfile::tempdir().unwrap();
        let batched_dir = tempfile::tempdir().unwrap();
        let e = Engine::create_with(single_dir.path().join("e"), config, options(&clock)).unwrap();
        e.close().unwrap();
        common::copy_tree(&single_dir.path().join("e"), &batched_dir.path().join("e"));
        let single =
            common::open_past_spawns(&single_dir.path().join("e"), options(&clock)).unwrap();
        let batched =
            common::open_past_spawns(&batched_dir.path().join("e"), options(&clock)).unwrap();
        Rig {
            name: name.to_string(),
            clock,
            single_dir,
            batched_dir,
            single: Some(single),
            batched: Some(batched),
            inserted: HashMap::new(),
            keys,
            log: Vec::new(),
            table,
            latest: secs(start),
            off,
        }
    }

    fn single(&self) -> &Engine {
        self.single.as_ref().unwrap()
    }

    fn batched(&self) -> &Engine {
        self.batched.as_ref().unwrap()
    }

    fn now(&self) -> i64 {
        secs(Clock::now(&self.clock))
    }

    fn fail(&self, what: String) -> ! {
        let tail: Vec<&String> = self.log.iter().rev().take(40).rev().collect();
        panic!(
            "{}: {what}\nlast operations (of {}):\n{}",
            self.name,
            self.log.len(),
            tail.iter()
                .map(|s| s.as_str())
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    /// Records the keys whose insert succeeded (answers given).
    fn record(&mut self, keys: &[Vec<u8>], answers: &[bool], within: bool) {
        let now = self.now();
        for (k, new) in keys.iter().zip(answers) {
            // `insert_within` writes only a key it answers new for.
            if !within || *new {
                self.inserted.entry(k.clone()).or_default().push(now);
            }
        }
    }

    fn pick_keys(&mut self, rng: &mut Rng) -> Vec<Vec<u8>> {
        let n = 1 + rng.below(12);
        let mut v: Vec<Vec<u8>> = (0..n).map(|_| key(rng.below(self.keys))).collect();
        if rng.below(3) == 0 && !v.is_empty() {
            // A key repeated within the batch.
            let k = v[rng.below(v.len() as u64) as usize].clone();
            v.push(k);
        }
        v
    }

    fn insert(&mut self, rng: &mut Rng) {
        let keys = self.pick_keys(rng);
        let singles: timebloom::Result<Vec<bool>> =
            keys.iter().map(|k| self.single().insert(k)).collect();
        let how = rng.below(3);
        let batch = match how {
            0 => self.batched().insert_batch(&keys),
            1 => self.batched().handle().insert_batch(&keys),
            _ => {
                let mut h = self.batched().handle();
                keys.iter().map(|k| h.insert(k)).collect()
            }
        };
        self.log.push(format!(
            "t={} insert {:?} (batched by {how}) -> {singles:?} / {batch:?}",
            self.now(),
            names(&keys)
        ));
        if !same_outcome(&singles, &batch) {
            self.fail(format!(
                "insert one by one {singles:?} but batched ({how}) {batch:?}"
            ));
        }
        if let Ok(a) = &singles {
            let a = a.clone();
            self.record(&keys, &a, false);
        } else {
            self.on_error(&singles.unwrap_err());
        }
    }

    fn insert_within(&mut self, rng: &mut Rng) {
        let keys = self.pick_keys(rng);
        let h = Duration::from_secs(HORIZONS[rng.below(HORIZONS.len() as u64) as usize]);
        let singles: timebloom::Result<Vec<bool>> = if rng.below(2) == 0 {
            keys.iter()
                .map(|k| self.single().insert_within(k, h))
                .collect()
        } else {
            let mut hd = self.single().handle();
            keys.iter().map(|k| hd.insert_within(k, h)).collect()
        };
        let batch = self.batched().insert_within_batch(&keys, h);
        self.log.push(format!(
            "t={} insert_within {h:?} {:?} -> {singles:?} / {batch:?}",
            self.now(),
            names(&keys)
        ));
        if !same_outcome(&singles, &batch) {
            self.fail(format!(
                "insert_within {h:?} one by one {singles:?} but batched {batch:?}"
            ));
        }
        match &singles {
            Ok(a) => {
                let a = a.clone();
                self.record(&keys, &a, true);
            }
            Err(e) => self.on_error(e),
        }
    }

    /// A write refused for a clock jump: move both engines on as an
    /// operator would.
    fn on_error(&mut self, e: &Error) {
        match e {
            Error::ClockJump { .. } => {
                let t = Clock::now(&self.clock);
                self.single().maintain(t).unwrap();
                self.batched().maintain(t).unwrap();
                self.log.push(format!("t={} maintain", self.now()));
            }
            Error::HorizonTooLong { .. } | Error::WindowUnavailable { .. } => {}
            other => self.fail(format!("unexpected error {other}")),
        }
    }

    fn advance(&mut self, rng: &mut Rng) {
        let step = match rng.below(6) {
            0 => rng.below(120),
            1 => rng.below(2 * HOUR),
            2 => rng.below(DAYS),
            3 => DAYS - 1 + rng.below(3),
            4 => rng.below(4 * DAYS),
            _ => HOUR * (1 + rng.below(30)),
        };
        self.clock.advance(Duration::from_secs(step));
        self.latest = self.latest.max(self.now());
        self.log.push(format!("t={} advanced {step}", self.now()));
    }

    fn back(&mut self, rng: &mut Rng) {
        let step = 1 + rng.below(2 * HOUR);
        self.clock
            .set(Clock::now(&self.clock) - Duration::from_secs(step));
        self.log.push(format!("t={} back {step}", self.now()));
    }

    fn reopen(&mut self) {
        self.single.take().unwrap().close().unwrap();
        self.batched.take().unwrap().close().unwrap();
        let open = |dir: &TempDir| {
            let path = dir.path().join("e");
            // Other tests of this binary start `timebloom` processes.
            match common::open_past_spawns(&path, options(&self.clock)) {
                // An open refuses a clock jump as a write does: move on
                // as an operator would.
                Err(Error::ClockJump { .. }) => {
                    common::open_past_spawns(&path, options(&self.clock).allow_clock_jump(true))
                }
                r => r,
            }
        };
        let (a, b) = (open(&self.single_dir), open(&self.batched_dir));
        if a.is_ok() != b.is_ok() {
            self.fail(format!("reopen: {:?} / {:?}", a.err(), b.err()));
        }
        self.single = Some(a.unwrap());
        self.batched = Some(b.unwrap());
        self.log.push(format!("t={} reopen", self.now()));
    }

    /// Every lookup of every key, through every entry point, on both
    /// engines and a read-only open beside each.
    fn check(&mut self) {
        let now = self.now();
        let all: Vec<Vec<u8>> = (0..self.keys + 16).map(key).collect();
        // A refused clock jump fails every lookup of a writer alike.
        if let Err(e @ Error::ClockJump { .. }) = self.single().contains(&all[0]) {
            let mut h = self.batched().handle();
            let others = [
                self.batched().contains(&all[0]).map(|_| ()),
                self.batched().contains_batch(&all).map(|_| ()),
                self.single().contains_batch(&all).map(|_| ()),
                h.contains(&all[0]).map(|_| ()),
                h.contains_batch(&all).map(|_| ()),
                h.contains_within(&all[0], Duration::ZERO).map(|_| ()),
                self.single()
                    .contains_within(&all[0], Duration::ZERO)
                    .map(|_| ()),
            ];
            if !others
                .iter()
                .all(|r| matches!(r, Err(Error::ClockJump { .. })))
            {
                self.fail(format!(
                    "t={now} contains {e} but the other lookups {others:?}"
                ));
            }
            self.on_error(&e);
        }
        let ro_a =
            Engine::open_read_only_with(self.single_dir.path().join("e"), options(&self.clock))
                .unwrap();
        let ro_b =
            Engine::open_read_only_with(self.batched_dir.path().join("e"), options(&self.clock))
                .unwrap();
        let engines: [(&str, &Engine); 4] = [
            ("single", self.single()),
            ("batched", self.batched()),
            ("read-only beside single", &ro_a),
            ("read-only beside batched", &ro_b),
        ];
        // contains: per key, batch, handle, handle batch; all four engines.
        let reference: Vec<bool> = all
            .iter()
            .map(|k| self.single().contains(k).unwrap())
            .collect();
        for (name, e) in engines {
            let batch = e.contains_batch(&all).unwrap();
            let mut h = e.handle();
            let hbatch = h.contains_batch(&all).unwrap();
            for (i, k) in all.iter().enumerate() {
                let one = e.contains(k).unwrap();
                let hone = h.contains(k).unwrap();
                let got = [one, batch[i], hone, hbatch[i]];
                if got.iter().any(|&g| g != reference[i]) {
                    self.fail(format!(
                        "t={now} key {i}: contains of single {} but {name} \
                         [contains, contains_batch, handle.contains, handle.contains_batch] = {got:?}",
                        reference[i]
                    ));
                }
            }
        }
        // contains_within at every horizon, engine and handle.
        let mut kept = Vec::new();
        // Horizons reaching to just before, at and after the start of the
        // clock's day and of the day before, besides the fixed ones.
        let into_day = (now + self.off).rem_euclid(DAYS as i64) as u64;
        let mut horizons = HORIZONS.to_vec();
        for base in [into_day, into_day + DAYS] {
            horizons.extend([base.saturating_sub(1), base, base + 1]);
        }
        for &hs in &horizons {
            let hz = Duration::from_secs(hs);
            let reference: Vec<timebloom::Result<bool>> = all
                .iter()
                .map(|k| self.single().contains_within(k, hz))
                .collect();
            if reference.iter().all(|r| r.is_ok()) {
                kept.push(hs);
            }
            for (name, e) in engines {
                let mut h = e.handle();
                for (i, k) in all.iter().enumerate() {
                    let one = e.contains_within(k, hz);
                    let hone = h.contains_within(k, hz);
                    if !same_outcome(&one, &reference[i]) || !same_outcome(&hone, &reference[i]) {
                        self.fail(format!(
                            "t={now} key {i} within {hs}s: single {:?} but {name} {one:?}, \
                             its handle {hone:?}",
                            reference[i]
                        ));
                    }
                }
            }
            // No false negative within a horizon the engine keeps. A
            // fingerprint table whose day is ahead of a clock that stepped
            // back counts the horizon back from its day (docs/fingerprint.md,
            // "A clock that steps back").
            let shift = match self.table {
                true => {
                    let day = |t: i64| (t + self.off).div_euclid(DAYS as i64);
                    (day(self.latest) - day(now)).max(0)
                }
                false => 0,
            };
            for (i, k) in all.iter().enumerate() {
                let Ok(found) = reference[i] else { continue };
                let since = now - hs as i64 + shift * DAYS as i64;
                let due = self
                    .inserted
                    .get(k)
                    .is_some_and(|ts| ts.iter().any(|&t| t >= since));
                if due && !found {
                    self.fail(format!(
                        "t={now} key {i} inserted at {:?} not found within {hs}s",
                        self.inserted[k]
                    ));
                }
            }
        }
        // contains: no false negative for a key inserted within the longest
        // horizon the engine keeps.
        if let Some(&longest) = kept.iter().max() {
            for (i, k) in all.iter().enumerate() {
                let since = now - longest as i64;
                let due = self
                    .inserted
                    .get(k)
                    .is_some_and(|ts| ts.iter().any(|&t| t >= since));
                if due && !reference[i] {
                    self.fail(format!(
                        "t={now} key {i} inserted at {:?} not found by contains \
                         (kept horizon {longest}s)",
                        self.inserted[k]
                    ));
                }
            }
        }
        ro_a.close().unwrap();
        ro_b.close().unwrap();
        self.log.push(format!("t={now} checked"));
    }

    /// `timebloom check` on the writer's directory, beside the writer,
    /// against the library.
    fn check_cli(&mut self, rng: &mut Rng) {
        let now = self.now();
        let all: Vec<Vec<u8>> = (0..self.keys + 16).map(key).collect();
        let hs = HORIZONS[rng.below(HORIZONS.len() as u64) as usize];
        let within = (rng.below(2) == 0).then_some(hs);
        let dir = self.single_dir.path().join("e");
        let stamp = time_arg(Clock::now(&self.clock));
        let mut args = vec!["--now".to_string(), stamp, "check".to_string()];
        args.push(dir.display().to_string());
        if let Some(hs) = within {
            args.push("--within".into());
            args.push(format!("{hs}s"));
        }
        let input: Vec<u8> = all
            .iter()
            .flat_map(|k| k.iter().copied().chain([b'\n']))
            .collect();
        let out = cli(&args, &input);
        let lib: timebloom::Result<Vec<bool>> = all
            .iter()
            .map(|k| match within {
                None => self.single().contains(k),
                Some(hs) => self.single().contains_within(k, Duration::from_secs(hs)),
            })
            .collect();
        let code = out.status.code();
        let stdout = String::from_utf8_lossy(&out.stdout).to_string();
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        match lib {
            Ok(answers) => {
                let lines: Vec<&str> = stdout.lines().collect();
                let want: Vec<String> = all
                    .iter()
                    .zip(&answers)
                    .map(|(k, s)| {
                        format!(
                            "{}\t{}",
                            String::from_utf8_lossy(k),
                            if *s { "seen" } else { "new" }
                        )
                    })
                    .collect();
                let want_code = i32::from(answers.iter().any(|s| !s));
                if lines != want || code != Some(want_code) {
                    let diff: Vec<String> = lines
                        .iter()
                        .zip(&want)
                        .filter(|(a, b)| a != b)
                        .map(|(a, b)| format!("cli {a:?} library {b:?}"))
                        .take(5)
                        .collect();
                    self.fail(format!(
                        "t={now} check {within:?}: exit {code:?} (library {want_code}), \
                         {} lines (library {}); first differences {diff:?}; stderr {stderr}",
                        lines.len(),
                        want.len()
                    ));
                }
            }
            Err(Error::ClockJump { .. }) => {}
            Err(e) => {
                if code != Some(2) {
                    self.fail(format!(
                        "t={now} check {within:?}: library error {e} but cli exit {code:?}, \
                         stdout {stdout:?} stderr {stderr:?}"
                    ));
                }
            }
        }
        self.log.push(format!(
            "t={now} cli check within {within:?}: exit {code:?}"
        ));
    }

    fn close(mut self) {
        self.single.take().unwrap().close().unwrap();
        self.batched.take().unwrap().close().unwrap();
    }
}

fn names(keys: &[Vec<u8>]) -> Vec<String> {
    keys.iter()
        .map(|k| String::from_utf8_lossy(&k[21..]).to_string())
        .collect()
}

fn time_arg(t: SystemTime) -> String {
    time_of(secs(t))
}

/// RFC 3339 UTC of a Unix time.
fn time_of(s: i64) -> String {
    let days = s.div_euclid(86_400);
    let rem = s.rem_euclid(86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = if m <= 2 { y + 1 } else { y };
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

fn cli(args: &[String], input: &[u8]) -> std::process::Output {
    let mut child = cli_support::spawn_piped(Command::new(cli_support::BIN).args(args));
    let feeder = cli_support::feed_stdin(&mut child, input.to_vec());
    let out = child.wait_with_output().unwrap();
    let _ = feeder.join();
    out
}

/// One random run of `steps` operations over configuration `c`.
fn run(c: usize, seed: u64, steps: usize, cli_checks: bool) {
    let (name, config) = configs().swap_remove(c);
    let mut rng = Rng(seed.wrapping_mul(0x2545_f491_4f6c_dd1d) ^ c as u64);
    let start = common::T0 + rng.below(14 * DAYS);
    let mut rig = Rig::new(
        &format!("{name} seed {seed}"),
        config,
        common::at(start),
        24 + rng.below(100),
    );
    for _ in 0..steps {
        match rng.below(20) {
            0..=6 => rig.insert(&mut rng),
            7..=9 => rig.insert_within(&mut rng),
            10..=12 => rig.advance(&mut rng),
            13 => rig.back(&mut rng),
            14 => rig.reopen(),
            15 if cli_checks => rig.check_cli(&mut rng),
            _ => rig.check(),
        }
    }
    rig.check();
    rig.close();
}

/// Seeds 0..2, or 0..`DIFFERENTIAL_CASES`, or only `DIFFERENTIAL_SEED`.
fn seeds() -> std::ops::Range<u64> {
    let var = |name| std::env::var(name).ok().and_then(|v| v.parse::<u64>().ok());
    match (var("DIFFERENTIAL_SEED"), var("DIFFERENTIAL_CASES")) {
        (Some(s), _) => s..s + 1,
        (None, n) => 0..n.unwrap_or(2),
    }
}

macro_rules! config_test {
    ($name:ident, $c:expr) => {
        #[test]
        fn $name() {
            for seed in seeds() {
                run($c, seed, 100, seed == 0);
            }
            // Handles kept across the run: one seed unless told otherwise.
            let told = std::env::var_os("DIFFERENTIAL_CASES").is_some()
                || std::env::var_os("DIFFERENTIAL_SEED").is_some();
            for seed in seeds().take(if told { usize::MAX } else { 1 }) {
                run_kept_handles($c, seed);
            }
        }
    };
}

config_test!(daily_and_weekly_entry_points_agree, 0);
config_test!(hourly_and_daily_entry_points_agree, 1);
config_test!(daily_and_fingerprint_entry_points_agree, 2);
config_test!(counting_and_weekly_entry_points_agree, 3);
config_test!(counting_hours_and_fingerprint_entry_points_agree, 4);
config_test!(fingerprint_alone_entry_points_agree, 5);
config_test!(daily_weekly_monthly_entry_points_agree, 6);

#[test]
fn time_of_formats_rfc3339() {
    assert_eq!(time_of(common::T0 as i64), "2026-01-05T00:00:00Z");
    assert_eq!(time_of(0), "1970-01-01T00:00:00Z");
    assert_eq!(time_of(951_782_400 + 3661), "2000-02-29T01:01:01Z");
}

/// Handles made once and kept across rotations, growth and steps of the
/// clock answer as the engine does: each call picks up the snapshot the
/// engine published meanwhile.
fn run_kept_handles(c: usize, seed: u64) {
    let (name, config) = configs().swap_remove(c);
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ (c as u64) << 8);
    let clock = ManualClock::new(common::at(common::T0 + rng.below(14 * DAYS)));
    let dir = tempfile::tempdir().unwrap();
    let e = Engine::create_with(dir.path().join("e"), config, options(&clock)).unwrap();
    let keys: Vec<Vec<u8>> = (0..120).map(key).collect();
    let mut writer = e.handle();
    let mut reader = e.handle();
    let mut idle = e.handle();
    for step in 0..90 {
        let at = secs(Clock::now(&clock));
        match rng.below(8) {
            0..=2 => {
                let batch: Vec<Vec<u8>> = (0..1 + rng.below(20))
                    .map(|_| keys[rng.below(keys.len() as u64) as usize].clone())
                    .collect();
                let r = match rng.below(3) {
                    0 => writer.insert_batch(&batch),
                    1 => batch.iter().map(|k| writer.insert(k)).collect(),
                    _ => e.insert_batch(&batch),
                };
                if let Err(err) = r {
                    assert!(matches!(err, Error::ClockJump { .. }), "{name}: {err}");
                    e.maintain(Clock::now(&clock)).unwrap();
                }
            }
            3 => clock.advance(Duration::from_secs(rng.below(3 * DAYS))),
            4 => clock.set(Clock::now(&clock) - Duration::from_secs(1 + rng.below(HOUR))),
            _ => {
                let want = e.contains_batch(&keys);
                let got = reader.contains_batch(&keys);
                assert!(
                    same_outcome(&want, &got),
                    "{name} seed {seed} step {step} t={at}: engine {want:?} handle {got:?}"
                );
                let hs = HORIZONS[rng.below(HORIZONS.len() as u64) as usize];
                let h = Duration::from_secs(hs);
                // The idle handle is used only here, after many snapshots.
                let use_idle = rng.below(4) == 0;
                for (i, k) in keys.iter().enumerate() {
                    let w = e.contains(k);
                    let g = match use_idle {
                        true => idle.contains(k),
                        false => reader.contains(k),
                    };
                    assert!(
                        same_outcome(&w, &g),
                        "{name} seed {seed} step {step} t={at} key {i}: engine {w:?} handle {g:?}"
                    );
                    let w = e.contains_within(k, h);
                    let g = reader.contains_within(k, h);
                    assert!(
                        same_outcome(&w, &g),
                        "{name} seed {seed} step {step} t={at} key {i} within {hs}: \
                         engine {w:?} handle {g:?}"
                    );
                }
            }
        }
    }
    drop((writer, reader, idle));
    e.close().unwrap();
}
