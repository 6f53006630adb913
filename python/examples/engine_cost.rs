//! The Rust cost of the calls `bench/bench.py` makes from Python, on the
//! same configuration and keys, so the two can be compared row by row:
//!
//! ```sh
//! cargo run --release --example engine_cost -- [N] [TIERS] [ROW]   # in python/
//! ```
//!
//! `N` (default 1,000,000) distinct URL keys, `items_per_day = N`, fpr
//! 0.001, tiers default `7d,4w,12m`; `ROW` runs only the rows whose name
//! contains it. Each row is the best of 3 runs on a
//! fresh engine, in ns per key. The "pre-touched" rows first insert N/4 other
//! keys, enough to write every page of the open windows once (about 10
//! keys a page in the largest window), so the timed inserts pay no first
//! writes: the difference to the plain rows is what the first write to
//! each page of a fresh window costs. Each row also shows the kernel time
//! and the page faults of its best run.
//!
//! `TIMEBLOOM_SYNC` (`always`, `interval=1s`, `none`) replaces the default
//! sync policy: under `none` there is no write-ahead log, so the
//! difference is what the log costs a key.

use std::time::Instant;

use timebloom::{Config, Engine};

fn urls(n: usize, tag: &str) -> Vec<String> {
    (0..n)
        .map(|i| {
            format!(
                "https://www.example-{}.com/{tag}/item/{i}?ref=feed&page={}",
                i % 997,
                i % 50
            )
        })
        .collect()
}

/// Minor page faults and system (kernel) seconds of this process so far,
/// from `/proc/self/stat` (zeros where it cannot be read).
fn faults_and_sys() -> (u64, f64) {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The fields after the command name, which is in parentheses.
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
    // minflt is field 10 of the file, stime field 15 (in ticks of 1/100 s
    // on Linux); `rest` starts at field 3.
    (num(7), num(12) as f64 / 100.0)
}

fn main() -> timebloom::Result<()> {
    let mut args = std::env::args().skip(1);
    let n: usize = args.next().map_or(1_000_000, |a| a.parse().expect("N"));
    let tiers = args.next().unwrap_or_else(|| "7d,4w,12m".to_string());
    let only = args.next().unwrap_or_default();
    let keys = urls(n, "seen");
    let other = urls(n / 4, "other");
    let dir = std::env::temp_dir().join(format!("tb-engine-cost-{}", std::process::id()));
    let mut runs = 0;
    let mut engine = |fill: &[String]| -> timebloom::Result<Engine> {
        runs += 1;
        let config = Config {
            tiers: timebloom::parse_tiers(&tiers)?,
            expected_items_per_day: n as u64,
            fpr: 0.001,
            sync: match std::env::var("TIMEBLOOM_SYNC") {
                Ok(policy) => policy.parse()?,
                Err(_) => Config::default().sync,
            },
            ..Config::default()
        };
        let e = Engine::create(dir.join(runs.to_string()), config)?;
        e.insert_batch(fill)?;
        Ok(e)
    };
    let mut row = |name: &str, fill: &[String], run: &dyn Fn(&Engine)| -> timebloom::Result<()> {
        if !name.contains(&only) {
            return Ok(());
        }
        let (mut best, mut faults, mut sys) = (f64::MAX, 0, 0.0);
        for _ in 0..3 {
            let e = engine(fill)?;
            let (f0, s0) = faults_and_sys();
            let t = Instant::now();
            run(&e);
            let secs = t.elapsed().as_secs_f64();
            let (f1, s1) = faults_and_sys();
            if secs < best {
                (best, faults, sys) = (secs, f1 - f0, s1 - s0);
            }
            e.close()?;
        }
        let per_key = |x: f64| x / n as f64 * 1e9;
        println!(
            "{tiers:10} {name:40} {:7.0} ns/key ({:4.0} ns/key in the kernel, {faults} page faults)",
            per_key(best),
            per_key(sys)
        );
        Ok(())
    };
    let none: &[String] = &[];
    let each = |e: &Engine| {
        for k in &keys {
            e.insert(k.as_bytes()).expect("insert");
        }
    };
    let each_handle = |e: &Engine| {
        let mut h = e.handle();
        for k in &keys {
            h.insert(k.as_bytes()).expect("insert");
        }
    };
    let batch = |e: &Engine| {
        e.insert_batch(&keys).expect("insert_batch");
    };
    let batch_10k = |e: &Engine| {
        for c in keys.chunks(10_000) {
            e.insert_batch(c).expect("insert_batch");
        }
    };
    let contains = |e: &Engine| {
        for k in &keys {
            e.contains(k.as_bytes()).expect("contains");
        }
    };
    row("insert, new keys", none, &each)?;
    row("insert (handle), new keys", none, &each_handle)?;
    row("insert_batch (one call), new keys", none, &batch)?;
    row("insert_batch (10,000 a call), new keys", none, &batch_10k)?;
    row("insert, new keys, pre-touched", &other, &each)?;
    row("insert_batch, new keys, pre-touched", &other, &batch)?;
    row("insert, seen before", &keys, &each)?;
    row("insert_batch, seen before", &keys, &batch)?;
    row("contains, present", &keys, &contains)?;
    std::fs::remove_dir_all(&dir).ok();
    Ok(())
}
