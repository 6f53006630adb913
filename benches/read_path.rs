//! The read path under threads, and lookups across a window boundary.
//!
//! ```text
//! cargo bench --bench read_path                 # 10^7 keys, threads 1,2,4,8
//! TIMEBLOOM_BENCH_N=1e6 cargo bench --bench read_path
//! ```
//!
//! Three parts, timed by hand (criterion times one thread; these need the wall
//! time of several, and the tail of single calls):
//!
//! * `threads`: lookups of negative keys through a handle, through
//!   `Engine::contains`, and the floor (xxh3-128 and one random 64-byte read
//!   in an array of the engine's size; and the same reads one after
//!   another, each address waiting for the previous answer: the latency
//!   floor, which no overlap between calls hides), and inserts of new keys through
//!   handles, on 1, 2, 4 and 8 threads (each thread its own keys); the best
//!   of three runs. Scaling is the throughput against one thread.
//! * `mixed`: a crawler's mix on one daily window: one thread looks
//!   negative keys up through its handle while another inserts 2 million
//!   new keys through its own; each side's ns per call (best of three),
//!   to set beside the one-thread rows of `threads`.
//! * `boundary`: default tiers (7d, 4w, 12m) at 10^7 keys a day, the clock
//!   two minutes before a month boundary. A reader thread looks keys up
//!   through a handle without pause and a writer inserts new keys; the
//!   writer's first insert starts creating the next windows ahead of the
//!   boundary (phase one: 8 s, then 5 s with the clock fifteen seconds
//!   before the boundary, when they are prefaulted), then the clock moves
//!   past the boundary and
//!   the writer's next insert rotates (takes the day's and the month's
//!   windows created ahead, seals the two they follow). Every lookup's and insert's latency is kept: worst
//!   and percentiles of each phase. After each lookup the reader also times
//!   the floor's lookup (no engine involved): the control that tells the
//!   machine's stalls (the reader losing its core) from the engine's.
//!
//! Results print as tables and go to `target/timebloom-bench/read_path.json`.
//! Without `--bench` (under `cargo test --benches`) a tiny version runs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{json, Value};
use timebloom::{Config, Engine, ManualClock, Options, SyncPolicy, Tier};

mod support;
use support::{bench_n, keys, url, wall, Floor};

fn config(n: u64, tiers: Vec<Tier>, sync: SyncPolicy) -> Config {
    Config {
        tiers,
        expected_items_per_day: n,
        fpr: 0.001,
        sync,
        ..Config::default()
    }
}

fn threads_part(n: u64, per_thread: u64, counts: &[usize], out: &mut Vec<Value>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_614_400));
    let opts = || Options::default().clock(clock.clone());
    let cfg = config(n, vec![Tier::daily(1)], SyncPolicy::None);
    let engine = Engine::create_with(tmp.path().join("look"), cfg.clone(), opts()).expect("create");
    let t = Instant::now();
    for chunk in (0..n).collect::<Vec<_>>().chunks(100_000) {
        let ks: Vec<Vec<u8>> = chunk.iter().map(|&i| url(1, i)).collect();
        engine.insert_batch(&ks).expect("fill");
    }
    let bytes = engine.stats().expect("stats").bytes;
    println!(
        "filled {n} keys in {:.1} s ({bytes} bytes)",
        t.elapsed().as_secs_f64()
    );
    let floor = Floor::new(bytes);
    let max_t = counts.iter().copied().max().unwrap_or(1) as u64;
    let neg: Vec<Vec<Vec<u8>>> = (0..max_t).map(|t| keys(1000 + t, 0, per_thread)).collect();
    let mut rows = Vec::new();
    println!("\n== {per_thread} lookups or inserts per thread, n = {n}, p = 0.001, ns per key (wall / all keys)");
    println!(
        "{:<28} {:>8} {:>10} {:>9}",
        "what", "threads", "ns/key", "scaling"
    );
    type Work<'a> = Box<dyn Fn(usize) -> usize + Sync + 'a>;
    let cases: Vec<(&str, Work)> = vec![
        (
            "floor lookup",
            Box::new(|t| neg[t].iter().filter(|k| floor.lookup(k)).count()),
        ),
        (
            "floor, one after another",
            Box::new(|t| floor.chained(&neg[t])),
        ),
        (
            "timebloom handle.contains",
            Box::new(|t| {
                let mut h = engine.handle();
                neg[t].iter().filter(|k| h.contains(k).unwrap()).count()
            }),
        ),
        (
            "timebloom Engine::contains",
            Box::new(|t| {
                neg[t]
                    .iter()
                    .filter(|k| engine.contains(k).unwrap())
                    .count()
            }),
        ),
    ];
    for (name, work) in &cases {
        let mut one = 0.0;
        for &th in counts {
            let secs = wall(th, 3, work);
            let per_key = secs * 1e9 / (th as f64 * per_thread as f64);
            if th == 1 {
                one = per_key;
            }
            println!("{name:<28} {th:>8} {per_key:>10.1} {:>8.2}x", one / per_key);
            rows.push(json!({"what": name, "threads": th, "ns_per_key": per_key, "scaling": one / per_key}));
        }
    }
    // Inserts of new keys: a fresh engine per run, each thread its own keys,
    // half the planned keys in all whatever the thread count (so no run
    // grows a chain, and every run does the same work); without the log,
    // then under the default policy (`interval`: the log's records too).
    // Thread t of a run on `th` threads inserts n / 2 / th keys, so thread t
    // needs n / 2 / (t + 1) of its own: the lookups' 2 million a thread
    // would cap one and two threads at 2 and 4 million.
    let half = n / 2;
    let new: Vec<Vec<Vec<u8>>> = (0..max_t)
        .map(|t| keys(2000 + t, 0, half / (t + 1)))
        .collect();
    for (name, sync) in [
        ("timebloom handle.insert new", SyncPolicy::None),
        ("handle.insert new, interval", SyncPolicy::default()),
    ] {
        insert_rows(name, &cfg, sync, n, counts, &new, &mut rows, &tmp, &opts);
    }
    out.push(json!({"part": "threads", "n": n, "per_thread": per_thread, "rows": rows}));
}

/// The new-key insert rows of `threads_part` under one sync policy.
#[allow(clippy::too_many_arguments)]
fn insert_rows(
    name: &str,
    cfg: &Config,
    sync: SyncPolicy,
    n: u64,
    counts: &[usize],
    new: &[Vec<Vec<u8>>],
    rows: &mut Vec<Value>,
    tmp: &tempfile::TempDir,
    opts: &dyn Fn() -> Options,
) {
    let cfg = Config {
        sync,
        ..cfg.clone()
    };
    let mut one = 0.0;
    for &th in counts {
        let share = (n / 2 / th as u64) as usize;
        let mut best = f64::INFINITY;
        for run in 0..3 {
            let e = Engine::create_with(
                tmp.path().join(format!("ins-{name}-{th}-{run}")),
                cfg.clone(),
                opts(),
            )
            .expect("create");
            let secs = wall(th, 1, |t| {
                let mut h = e.handle();
                new[t][..share]
                    .iter()
                    .filter(|k| h.insert(k).unwrap())
                    .count()
            });
            best = best.min(secs);
        }
        let done = (th * share) as f64;
        let per_key = best * 1e9 / done;
        if th == 1 {
            one = per_key;
        }
        println!("{name:<28} {th:>8} {per_key:>10.1} {:>8.2}x", one / per_key);
        rows.push(
            json!({"what": name, "threads": th, "ns_per_key": per_key, "scaling": one / per_key}),
        );
    }
}

/// A crawler's mix: one thread looks negative keys up through its handle
/// while another inserts new keys into the same open window through its
/// own. Each side's ns per call, best of three runs on fresh engines;
/// compare with the one-thread rows above (each side alone).
fn mixed_part(n: u64, per_thread: u64, out: &mut Vec<Value>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(SystemTime::UNIX_EPOCH + Duration::from_secs(1_767_614_400));
    let cfg = config(n, vec![Tier::daily(1)], SyncPolicy::None);
    let neg: Vec<Vec<Vec<u8>>> = (0..2).map(|t| keys(1000 + t, 0, per_thread)).collect();
    let share = (n / 2).min(per_thread) as usize;
    println!("\n== one reader beside one writer, {share} inserts, n = {n}, p = 0.001, ns per call");
    let (mut reader, mut writer) = (f64::INFINITY, f64::INFINITY);
    for run in 0..3 {
        let e = Engine::create_with(
            tmp.path().join(format!("mix-{run}")),
            cfg.clone(),
            Options::default().clock(clock.clone()),
        )
        .expect("create");
        let done = AtomicBool::new(false);
        let (r, w) = std::thread::scope(|s| {
            let r = s.spawn(|| {
                let mut h = e.handle();
                let (mut calls, mut hits) = (0u64, 0usize);
                let t = Instant::now();
                for chunk in neg[1].chunks(1024).cycle() {
                    if done.load(Ordering::Relaxed) {
                        break;
                    }
                    for k in chunk {
                        hits += usize::from(h.contains(k).unwrap());
                    }
                    calls += chunk.len() as u64;
                }
                std::hint::black_box(hits);
                t.elapsed().as_secs_f64() * 1e9 / calls as f64
            });
            let w = s.spawn(|| {
                let mut h = e.handle();
                let t = Instant::now();
                let new = neg[0][..share]
                    .iter()
                    .filter(|k| h.insert(k).unwrap())
                    .count();
                let secs = t.elapsed().as_secs_f64();
                done.store(true, Ordering::Relaxed);
                std::hint::black_box(new);
                secs * 1e9 / share as f64
            });
            (r.join().expect("reader"), w.join().expect("writer"))
        });
        reader = reader.min(r);
        writer = writer.min(w);
    }
    println!("{:<28} {reader:>10.1}", "handle.contains (negative)");
    println!("{:<28} {writer:>10.1}", "handle.insert (new keys)");
    out.push(json!({"part": "mixed", "n": n, "inserts": share,
        "reader_ns_per_call": reader, "writer_ns_per_call": writer}));
}

fn percentile(sorted: &[u32], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() - 1) as f64 * q).round() as usize;
    f64::from(sorted[i])
}

fn boundary_part(n: u64, fill: u64, out: &mut Vec<Value>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    // 2026-02-01 00:00:00 UTC: crossing it crosses a day, a month, and
    // (2026-02-02 is a Monday) no week.
    let midnight = 1_769_904_000u64;
    // Two minutes before: within the lead, so the first write starts
    // creating the next windows ahead (see `engine::ahead`).
    let before = midnight - 120;
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(before));
    let cfg = Config {
        expected_items_per_day: n,
        ..Config::default()
    };
    let t = Instant::now();
    let engine = Engine::create_with(
        tmp.path().join("boundary"),
        cfg,
        Options::default().clock(clock.clone()),
    )
    .expect("create");
    println!(
        "\ncreated default tiers at {n} keys a day in {:.1} s ({} bytes)",
        t.elapsed().as_secs_f64(),
        engine.stats().expect("stats").bytes
    );
    let known = keys(2, 0, fill);
    for c in known.chunks(100_000) {
        engine.insert_batch(c).expect("fill");
    }
    let stop = AtomicBool::new(false);
    let crossed = AtomicBool::new(false);
    // The control: the floor's lookup (no engine at all) timed by the same
    // thread right after each engine lookup. A stall that hits both is the
    // machine's (the reader losing its core), not the engine's.
    let floor = Floor::new(if fill > 1_000_000 { 256 << 20 } else { 1 << 20 });
    // Per phase (0: the next windows created ahead, 1: across the
    // boundary): every lookup's latency, the floor's beside them, and the
    // writer's insert latencies.
    let (reads, floors, writes) = std::thread::scope(|s| {
        let reader = s.spawn(|| {
            let mut h = engine.handle();
            let probes = keys(3, 0, 1 << 16);
            let mut lat: [Vec<u32>; 2] = [Vec::with_capacity(1 << 24), Vec::with_capacity(1 << 24)];
            let mut control: [Vec<u32>; 2] =
                [Vec::with_capacity(1 << 24), Vec::with_capacity(1 << 24)];
            let mut hits = 0usize;
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let phase = usize::from(crossed.load(Ordering::Relaxed));
                let k = if i.is_multiple_of(2) {
                    &known[i % known.len()]
                } else {
                    &probes[i % probes.len()]
                };
                let start = Instant::now();
                let found = h.contains(k).expect("contains");
                lat[phase].push(nanos(start));
                assert!(found || i % 2 == 1, "a known key went missing");
                let start = Instant::now();
                hits += usize::from(floor.lookup(&probes[(i + 7) % probes.len()]));
                control[phase].push(nanos(start));
                i += 1;
            }
            std::hint::black_box(hits);
            (lat, control)
        });
        let writer = s.spawn(|| {
            let mut h = engine.handle();
            let mut lat: [Vec<u32>; 2] = [Vec::new(), Vec::new()];
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let phase = usize::from(crossed.load(Ordering::Relaxed));
                let k = url(4, i);
                let start = Instant::now();
                h.insert(&k).expect("insert");
                lat[phase].push(nanos(start));
                i += 1;
                if i.is_multiple_of(1024) {
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
            lat
        });
        // The first write started creating the next windows: long enough
        // for them to be written and mapped; then fifteen seconds before
        // the boundary, when they are faulted in writable.
        let big = fill > 1_000_000;
        std::thread::sleep(Duration::from_secs(if big { 8 } else { 1 }));
        clock.set(UNIX_EPOCH + Duration::from_secs(midnight - 15));
        std::thread::sleep(Duration::from_secs(if big { 5 } else { 1 }));
        crossed.store(true, Ordering::Relaxed);
        clock.set(UNIX_EPOCH + Duration::from_secs(midnight + 10));
        // Long enough for the rotation and the background seals.
        std::thread::sleep(Duration::from_secs(if big { 8 } else { 2 }));
        stop.store(true, Ordering::Relaxed);
        let (reads, floors) = reader.join().expect("reader");
        let writes = writer.join().expect("writer");
        (reads, floors, writes)
    });
    let st = engine.stats().expect("stats");
    let sealed: usize = st
        .tiers
        .iter()
        .flat_map(|t| &t.segments)
        .filter(|s| s.state == "sealed")
        .count();
    let names = [
        "before the boundary: the next windows created ahead and prefaulted",
        "across the month boundary: the writer rotates",
    ];
    let mut phases = Vec::new();
    for (((name, r), f), w) in names.iter().zip(reads).zip(floors).zip(writes) {
        println!("== {name}");
        let r = summary("lookups", r);
        let f = summary("floor lookups, same thread (control)", f);
        let w = summary("inserts", w);
        phases.push(json!({ "phase": name, "lookups": r, "floor_lookups": f, "inserts": w }));
    }
    println!("after: {sealed} sealed window(s)");
    out.push(json!({ "part": "boundary", "n": n, "fill": fill, "phases": phases }));
}

/// Nanoseconds since `start`, saturated to `u32`.
fn nanos(start: Instant) -> u32 {
    start.elapsed().as_nanos().min(u32::MAX as u128) as u32
}

/// Prints and returns count, percentiles, worst and the count over 1 ms.
fn summary(what: &str, mut lat: Vec<u32>) -> Value {
    lat.sort_unstable();
    let worst = lat.last().copied().unwrap_or(0);
    let over_1ms = lat.iter().filter(|&&x| x > 1_000_000).count();
    println!(
        "{what} {}, p50 {:.0} ns, p99 {:.0} ns, p99.9 {:.0} ns, worst {:.3} ms, over 1 ms: {over_1ms}",
        lat.len(),
        percentile(&lat, 0.5),
        percentile(&lat, 0.99),
        percentile(&lat, 0.999),
        f64::from(worst) / 1e6
    );
    json!({
        "count": lat.len(),
        "p50_ns": percentile(&lat, 0.5),
        "p99_ns": percentile(&lat, 0.99),
        "p999_ns": percentile(&lat, 0.999),
        "worst_ns": worst,
        "over_1ms": over_1ms,
    })
}

fn main() {
    let bench = std::env::args().any(|a| a == "--bench");
    let n = bench_n(if bench { 10_000_000 } else { 20_000 });
    let parts =
        std::env::var("TIMEBLOOM_BENCH_PARTS").unwrap_or_else(|_| "threads,mixed,boundary".into());
    let parts: Vec<&str> = parts
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .collect();
    // A part this bench does not have (`single` is filters') would
    // otherwise run nothing and still overwrite the results file.
    for p in &parts {
        assert!(
            ["threads", "mixed", "boundary"].contains(p),
            "TIMEBLOOM_BENCH_PARTS: unknown part `{p}` (this bench has threads, mixed, boundary)"
        );
    }
    let parts = |name: &str| parts.contains(&name);
    let mut out = Vec::new();
    if parts("threads") {
        let per = if bench { 2_000_000 } else { 5_000 };
        threads_part(n, per, &[1, 2, 4, 8], &mut out);
    }
    if parts("mixed") {
        mixed_part(n, if bench { 2_000_000 } else { 5_000 }, &mut out);
    }
    if parts("boundary") {
        boundary_part(n, if bench { n / 2 } else { 5_000 }, &mut out);
    }
    if bench {
        let path = std::path::Path::new("target/timebloom-bench/read_path.json");
        let _ = std::fs::create_dir_all(path.parent().expect("parent"));
        std::fs::write(
            path,
            serde_json::to_string_pretty(&json!(out)).expect("json"),
        )
        .expect("write");
        println!("\nresults written to {}", path.display());
    }
}
