//! The tier kinds side by side on the same keys: a year of the default
//! Bloom tiers (7d, 4w, 12m) against one `365d:fingerprint` table.
//!
//! ```text
//! cargo bench --bench kinds                    # 32,000 keys a day for 365 days
//! TIMEBLOOM_BENCH_N=100000 cargo bench --bench kinds
//! TIMEBLOOM_BENCH_PLAN=1e6 cargo bench --bench kinds   # sized for 10^6 a day
//! ```
//!
//! Both engines get the same keys, `N` a day for 365 days (a `ManualClock`
//! moved a day at a time, `insert_batch` of each day's keys), at p = 0.1%,
//! without the write-ahead log. `TIMEBLOOM_BENCH_PLAN` sizes both engines
//! for that many keys a day instead of `N` (default: `N`), so lookups can
//! be timed in structures of a real crawl's size without inserting a
//! year of it: a negative lookup reads the same lines in a window or
//! table whatever its fill (the measured rates and bits per key are then
//! those of structures filled to `N / PLAN` of their plan). Then, on the last day, timed by hand (the
//! best of three runs of 2^20 keys each, ns per key):
//!
//! * negative lookups through a handle, single calls and `contains_batch`
//!   in batches of 1024, against the floor of the fingerprint table's
//!   lookup: the key's xxh3-128 and two reads of random 64-byte lines in
//!   an array of the table's size (and the same reads with each key's
//!   addresses waiting for the previous key's answer: the latency floor,
//!   what a lookup costs when nothing overlaps it);
//! * the measured false-positive rate of `contains` and of a 7-day
//!   horizon on those 2^20 keys never inserted;
//! * inserts of new keys within the plan: on each of the next six days
//!   (after `maintain` ran that day's rotation), a day's keys, single
//!   calls on three days and batches on three, the best day of each;
//! * a burst: 2^20 new keys in single calls and 2^20 in batches on one
//!   more day, far past the plan (chains grow within the timing);
//! * bytes per key inserted.
//!
//! Results print as a table and go to `target/timebloom-bench/kinds.json`.
//! Without `--bench` (under `cargo test --benches`) a tiny version runs.

use std::time::{Duration, Instant, UNIX_EPOCH};

use serde_json::{json, Value};
use timebloom::{Config, Engine, Handle, ManualClock, Options, SyncPolicy, Tier};

mod support;
use support::{bench_n, env_count, keys, wall, Floor};

/// 2025-01-01 12:00 UTC.
const START: u64 = 1_735_732_800;
const DAY: u64 = 86_400;

/// Nanoseconds per key of `work` over `n` keys, the best of three.
fn per_key(n: usize, work: impl Fn() -> usize + Sync) -> f64 {
    wall(1, 3, |_| work()) * 1e9 / n as f64
}

/// Inserts `keys` through `h`, in single calls or in batches of 1024;
/// returns how many were new.
fn insert_new(h: &mut Handle<'_>, keys: &[Vec<u8>], batch: bool) -> usize {
    match batch {
        false => keys.iter().filter(|k| h.insert(k).unwrap()).count(),
        true => keys
            .chunks(1024)
            .map(|c| h.insert_batch(c).unwrap().iter().filter(|&&x| x).count())
            .sum(),
    }
}

/// One engine of `tiers`, filled with `days` days of `n` keys; the clock
/// left on the last day. Returns it with its clock and fill seconds.
fn filled(
    name: &str,
    tiers: Vec<Tier>,
    (n, plan): (u64, u64),
    days: u64,
) -> (Engine, ManualClock, f64) {
    let dir = std::env::temp_dir().join(format!("timebloom-kinds-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(START));
    let config = Config {
        tiers,
        expected_items_per_day: plan,
        fpr: 0.001,
        sync: SyncPolicy::None,
        ..Config::default()
    };
    let engine =
        Engine::create_with(&dir, config, Options::default().clock(clock.clone())).expect("create");
    let t = Instant::now();
    for d in 0..days {
        clock.set(UNIX_EPOCH + Duration::from_secs(START + d * DAY));
        for chunk in keys(1, d * n, n).chunks(4096) {
            engine.insert_batch(chunk).expect("fill");
        }
    }
    let secs = t.elapsed().as_secs_f64();
    // Background work of the last boundary (seals of Bloom windows, the
    // table's daily sweep) done before anything is timed.
    engine.flush().expect("flush");
    (engine, clock, secs)
}

fn measure(name: &str, tiers: Vec<Tier>, (n, plan): (u64, u64), days: u64, probes: usize) -> Value {
    let (engine, clock, fill_secs) = filled(name, tiers, (n, plan), days);
    let inserted = n * days;
    let bytes = engine.stats().expect("stats").bytes;
    let absent = keys(2, 0, probes as u64);
    let mut h = engine.handle();
    let single = per_key(probes, || {
        let mut h = engine.handle();
        absent.iter().filter(|k| h.contains(k).unwrap()).count()
    });
    let batch = per_key(probes, || {
        let mut h = engine.handle();
        absent
            .chunks(1024)
            .map(|c| h.contains_batch(c).unwrap().iter().filter(|&&p| p).count())
            .sum()
    });
    let floor = Floor::new(bytes);
    let floor_ns = per_key(probes, || {
        absent.iter().filter(|k| floor.lookup2(k)).count()
    });
    let latency_ns = per_key(probes, || floor.chained2(&absent));
    let fp = absent.iter().filter(|k| h.contains(k).unwrap()).count();
    let week = Duration::from_secs(7 * DAY);
    let fp_week = absent
        .iter()
        .filter(|k| engine.contains_within(k, week).unwrap())
        .count();
    drop(h);
    // New keys within the plan: each of the next days gets a day's keys
    // (`n`), after that day's rotation (the table's sweep, the seals) ran
    // by `maintain`; single calls on three days, batches on three, the
    // best day of each.
    let mut day = days;
    let mut in_plan = |batch: bool| {
        let t = UNIX_EPOCH + Duration::from_secs(START + day * DAY);
        clock.set(t);
        engine.maintain(t).expect("maintain");
        let fresh = keys(3, (day - days) * n, n);
        day += 1;
        let mut h = engine.handle();
        let t = Instant::now();
        let new = insert_new(&mut h, &fresh, batch);
        (t.elapsed().as_secs_f64() * 1e9 / n as f64, new)
    };
    let best = |runs: [(f64, usize); 3]| {
        let ns = runs.iter().map(|r| r.0).fold(f64::MAX, f64::min);
        (ns, runs.iter().map(|r| r.1).sum::<usize>())
    };
    let (insert_single, new_single) = best([(); 3].map(|_| in_plan(false)));
    let (insert_batch, new_batch) = best([(); 3].map(|_| in_plan(true)));
    // A burst: 2^20 new keys in single calls, then 2^20 in batches, all on
    // one more day, far past the day's plan: the open window (or the
    // table) fills and its chain grows within the timed inserts.
    let t = UNIX_EPOCH + Duration::from_secs(START + day * DAY);
    clock.set(t);
    engine.maintain(t).expect("maintain");
    let fresh = keys(4, 0, 2 * probes as u64);
    let (one, two) = fresh.split_at(probes);
    let mut h = engine.handle();
    let t = Instant::now();
    let burst1 = insert_new(&mut h, one, false);
    let burst_single = t.elapsed().as_secs_f64() * 1e9 / probes as f64;
    let t = Instant::now();
    let burst2 = insert_new(&mut h, two, true);
    let burst_batch = t.elapsed().as_secs_f64() * 1e9 / probes as f64;
    drop(h);
    let dir = std::env::temp_dir().join(format!("timebloom-kinds-{}-{name}", std::process::id()));
    drop(engine);
    let _ = std::fs::remove_dir_all(dir);
    let rate = |c: usize| c as f64 / probes as f64;
    println!(
        "{name:>12}: {:.1} bits/key, lookup {single:.0} ns (batch {batch:.0}; floor of two lines {floor_ns:.0}, one after another {latency_ns:.0}), \
         rate {:.4}% (7 days {:.4}%), insert {insert_single:.0} ns (batch {insert_batch:.0}), new {}/{}, \
         burst insert {burst_single:.0} ns (batch {burst_batch:.0}), new {}/{}, filled in {fill_secs:.1} s",
        bytes as f64 * 8.0 / inserted as f64,
        rate(fp) * 100.0,
        rate(fp_week) * 100.0,
        new_single + new_batch,
        6 * n,
        burst1 + burst2,
        2 * probes,
    );
    json!({
        "kind": name,
        "keys": inserted,
        "bytes": bytes,
        "bits_per_key": bytes as f64 * 8.0 / inserted as f64,
        "lookup_ns": single,
        "lookup_batch_ns": batch,
        "floor_two_lines_ns": floor_ns,
        "floor_two_lines_chained_ns": latency_ns,
        "fpr": rate(fp),
        "fpr_7d": rate(fp_week),
        "insert_ns": insert_single,
        "insert_batch_ns": insert_batch,
        "new": new_single + new_batch,
        "burst_insert_ns": burst_single,
        "burst_insert_batch_ns": burst_batch,
        "burst_new": burst1 + burst2,
        "fill_secs": fill_secs,
    })
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n = bench_n(if bench { 32_000 } else { 200 });
    let plan = env_count("TIMEBLOOM_BENCH_PLAN", n);
    let (days, probes) = if bench { (365, 1 << 20) } else { (20, 2_000) };
    println!("== {days} days of {n} keys a day (sized for {plan}), p = 0.1%, {probes} probes");
    let bloom = measure(
        "7d,4w,12m",
        vec![Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
        (n, plan),
        days,
        probes,
    );
    let fingerprint = measure(
        "365d:fp",
        vec![Tier::fingerprint(365)],
        (n, plan),
        days,
        probes,
    );
    let out = json!({ "n_per_day": n, "plan_per_day": plan, "days": days, "kinds": [bloom, fingerprint] });
    let path = std::path::Path::new("target/timebloom-bench");
    let _ = std::fs::create_dir_all(path);
    std::fs::write(path.join("kinds.json"), out.to_string()).expect("write results");
    println!("\nresults written to target/timebloom-bench/kinds.json");
}
