//! What durability costs: inserts of new keys under each sync policy, one
//! thread and four, beside the disk's own `fdatasync` latency; and the time
//! to reopen after `kill -9` with 10^6 inserts since the last checkpoint.
//!
//!     cargo bench --bench durability
//!
//! The engine lives in `target/` (the disk whose fsync is measured), not in
//! /tmp, which may be a memory file system.

use std::fs::OpenOptions;
use std::hint::black_box;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, Throughput};
use timebloom::{Config, Engine, Options, SyncPolicy, Tier};

const CHILD_ENV: &str = "TIMEBLOOM_BENCH_RECOVERY_CHILD";

fn scratch(name: &str) -> PathBuf {
    let d = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("target")
        .join("bench-durability")
        .join(name);
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(d.parent().unwrap()).unwrap();
    d
}

fn key(i: u64, out: &mut Vec<u8>) {
    out.clear();
    out.extend_from_slice(b"https://example.com/path/");
    out.extend_from_slice(i.to_string().as_bytes());
}

fn config(sync: SyncPolicy) -> Config {
    Config {
        tiers: vec![Tier::daily(7)],
        expected_items_per_day: PLAN,
        fpr: 0.001,
        sync,
        ..Config::default()
    }
}

const POLICIES: [SyncPolicy; 3] = [
    SyncPolicy::None,
    SyncPolicy::Interval(Duration::from_secs(1)),
    SyncPolicy::Always,
];

fn disk(c: &mut Criterion) {
    let path = scratch("fdatasync");
    let mut f = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&path)
        .unwrap();
    let mut g = c.benchmark_group("disk");
    g.sample_size(20);
    g.bench_function("write 40 bytes + fdatasync", |b| {
        b.iter(|| {
            f.write_all(&[7u8; 40]).unwrap();
            f.sync_data().unwrap();
        })
    });
    g.finish();
}

/// Keys a day the engine is planned for: each engine takes at most this
/// many, so that no chain grows while the inserts are timed.
const PLAN: u64 = 20_000_000;

/// The engine the insert benches write to, replaced by a fresh one (made,
/// and the old one dropped, outside the timing) before it would take more
/// keys than its plan: criterion's warm-up and samples of one benchmark
/// alone insert 20-30 million keys at 250-350 ns a key, and the three
/// benchmarks of a policy share the engine.
struct Fresh {
    policy: SyncPolicy,
    serial: u32,
    engine: Arc<Engine>,
    dir: PathBuf,
    used: u64,
}

impl Fresh {
    fn new(policy: SyncPolicy) -> Fresh {
        let dir = scratch(&format!("insert-{policy}-0"));
        let engine = Arc::new(Engine::create(&dir, config(policy)).unwrap());
        Fresh {
            policy,
            serial: 0,
            engine,
            dir,
            used: 0,
        }
    }

    /// The engine for `keys` more new keys.
    fn room(&mut self, keys: u64) -> Arc<Engine> {
        if self.used + keys > PLAN {
            self.check();
            self.serial += 1;
            let dir = scratch(&format!("insert-{}-{}", self.policy, self.serial));
            let engine = Arc::new(Engine::create(&dir, config(self.policy)).unwrap());
            drop(std::mem::replace(&mut self.engine, engine));
            let _ = std::fs::remove_dir_all(std::mem::replace(&mut self.dir, dir));
            self.used = 0;
        }
        self.used += keys;
        Arc::clone(&self.engine)
    }

    /// Stops the bench if a chain grew (a call asked for more keys than
    /// the plan, which no timing should mix in).
    fn check(&self) {
        let stats = self.engine.stats().unwrap();
        let grown = stats
            .tiers
            .iter()
            .flat_map(|t| &t.segments)
            .any(|s| s.subfilters > 1);
        assert!(!grown, "{}: a chain grew during the inserts", self.policy);
    }

    /// Checks the last engine, closes it and removes its directory.
    fn finish(self) {
        self.check();
        drop(self.engine);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn inserts(c: &mut Criterion) {
    let mut g = c.benchmark_group("insert new keys");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(4));
    for policy in POLICIES {
        let mut fresh = Fresh::new(policy);
        let next = Arc::new(AtomicU64::new(0));
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("single, 1 thread", policy), |b| {
            let mut k = Vec::new();
            b.iter_custom(|iters| {
                let e = fresh.room(iters);
                let start = Instant::now();
                for _ in 0..iters {
                    key(next.fetch_add(1, Ordering::Relaxed), &mut k);
                    black_box(e.insert(&k).unwrap());
                }
                start.elapsed()
            })
        });
        g.throughput(Throughput::Elements(1024));
        g.bench_function(BenchmarkId::new("batch of 1024, 1 thread", policy), |b| {
            b.iter_custom(|iters| {
                let e = fresh.room(iters * 1024);
                let start = Instant::now();
                for _ in 0..iters {
                    let base = next.fetch_add(1024, Ordering::Relaxed);
                    let keys: Vec<Vec<u8>> = (base..base + 1024)
                        .map(|i| {
                            let mut k = Vec::new();
                            key(i, &mut k);
                            k
                        })
                        .collect();
                    black_box(e.insert_batch(&keys).unwrap());
                }
                start.elapsed()
            })
        });
        g.throughput(Throughput::Elements(1));
        g.bench_function(BenchmarkId::new("single, 4 threads", policy), |b| {
            b.iter_custom(|iters| {
                let per = iters.div_ceil(4);
                let e = fresh.room(4 * per);
                let start = Instant::now();
                let hs: Vec<_> = (0..4)
                    .map(|_| {
                        let (e, next) = (Arc::clone(&e), Arc::clone(&next));
                        std::thread::spawn(move || {
                            let mut k = Vec::new();
                            for _ in 0..per {
                                key(next.fetch_add(1, Ordering::Relaxed), &mut k);
                                black_box(e.insert(&k).unwrap());
                            }
                        })
                    })
                    .collect();
                for h in hs {
                    h.join().unwrap();
                }
                start.elapsed()
            })
        });
        fresh.finish();
    }
    g.finish();
}

/// The child: inserts 10^6 keys under `interval`, says so, and waits to be
/// killed.
fn recovery_child(dir: &str) {
    let e = Engine::create(dir, config(SyncPolicy::default())).unwrap();
    let mut keys = Vec::with_capacity(1024);
    for b in 0..1_000_000u64 / 1024 + 1 {
        keys.clear();
        for i in b * 1024..(b + 1) * 1024 {
            let mut k = Vec::new();
            key(i, &mut k);
            keys.push(k);
        }
        e.insert_batch(&keys).unwrap();
    }
    // Let the interval sync run once: the log is durable, the bodies are
    // not checkpointed.
    std::thread::sleep(Duration::from_millis(1500));
    println!("ready");
    std::io::stdout().flush().unwrap();
    std::thread::sleep(Duration::from_secs(600));
}

fn recovery() {
    for power_loss in [false, true] {
        let dir = scratch(&format!("recovery-{power_loss}"));
        let mut child = Command::new(std::env::current_exe().unwrap())
            .env(CHILD_ENV, &dir)
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut out = child.stdout.take().unwrap();
        let mut buf = [0u8; 6];
        std::io::Read::read_exact(&mut out, &mut buf).unwrap();
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        let records: u64 = std::fs::read_dir(dir.join("wal"))
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| e.metadata().unwrap().len().saturating_sub(32) / 40)
            .sum();
        let start = Instant::now();
        let e = Engine::open_with(&dir, Options::default().assume_power_loss(power_loss)).unwrap();
        let took = start.elapsed();
        let mut k = Vec::new();
        key(999_999, &mut k);
        assert!(e.contains(&k).unwrap());
        println!(
            "recovery after kill -9: {} log records since the checkpoint, {}: open took {:.3} s",
            records,
            if power_loss {
                "replayed as after a power loss"
            } else {
                "same boot (page cache trusted, nothing replayed)"
            },
            took.as_secs_f64()
        );
        drop(e);
        let _ = std::fs::remove_dir_all(&dir);
    }
}

fn main() {
    if let Ok(dir) = std::env::var(CHILD_ENV) {
        recovery_child(&dir);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    disk(&mut c);
    inserts(&mut c);
    c.final_summary();
    if std::env::args().all(|a| a != "--list") {
        recovery();
    }
}
