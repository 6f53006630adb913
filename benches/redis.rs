//! RedisEngine against the two usual ways of deduplicating in Redis, on
//! one local `redis-server` (a fresh one per variant, so memory is each
//! variant's own):
//!
//! * `RedisEngine::insert_batch`: batches of 10,000 keys, one Lua call per
//!   shard, pipelined;
//! * the classic client: a fixed-size bitmap sized by the classic formula,
//!   one `GETBIT` per probe until a zero, then one `SETBIT` per probe,
//!   each a round trip (no atomicity, no expiry, no growth);
//! * pipelined `SADD` of the raw URL (exact), 10,000 commands per pipeline.
//!
//! Keys per second, and Redis memory (`used_memory` after minus before)
//! scaled to 10^6 keys. Run:
//!
//! ```text
//! cargo bench --features redis --bench redis
//! TB_BENCH_KEYS=1000000 TB_BENCH_PROBE_KEYS=20000 cargo bench --features redis --bench redis
//! ```

#[path = "../tests/redis_support/mod.rs"]
mod redis_support;

use std::time::Instant;

use redis_support::{day, url, Server};
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, ManualClock, Tier};
use xxhash_rust::xxh3::xxh3_128_with_seed;

const BATCH: usize = 10_000;

/// A count from the environment (`300000` or `3e5`), or `default`; a value
/// that is not a number stops the bench rather than being ignored.
fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |v| {
        v.trim()
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{name}: a count, not `{v}`")) as u64
    })
}

fn used_memory(s: &Server) -> u64 {
    s.cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Microseconds the server spent executing commands (all of them).
fn server_usec(s: &Server) -> u64 {
    s.cli(&["INFO", "commandstats"])
        .lines()
        .filter_map(|l| l.split("usec=").nth(1))
        .filter_map(|v| v.split(',').next()?.parse::<u64>().ok())
        .sum()
}

struct Row {
    name: String,
    keys: u64,
    secs: f64,
    bytes: u64,
    new: u64,
    server_us: u64,
}

impl Row {
    fn rate(&self) -> f64 {
        self.keys as f64 / self.secs
    }
    fn server_us_per_key(&self) -> f64 {
        self.server_us as f64 / self.keys as f64
    }
    fn mem_per_million(&self) -> f64 {
        self.bytes as f64 * 1e6 / self.keys as f64
    }
}

fn engine_run(name: &str, tiers: Vec<Tier>, per_day: u64, n: u64) -> Row {
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    let config = Config {
        tiers,
        expected_items_per_day: per_day,
        fpr: 0.001,
        ..Config::default()
    };
    let opts = RedisOptions::default().clock(clock);
    let before = used_memory(&server);
    let e = RedisEngine::create_with(&server.url(), "bench", config, opts).expect("create");
    let keys: Vec<Vec<u8>> = (0..n).map(|i| url(1, i)).collect();
    let t = Instant::now();
    let mut new = 0;
    for chunk in keys.chunks(BATCH) {
        new += e
            .insert_batch(chunk)
            .expect("insert_batch")
            .iter()
            .filter(|&&x| x)
            .count() as u64;
    }
    let secs = t.elapsed().as_secs_f64();
    Row {
        name: name.to_string(),
        keys: n,
        secs,
        bytes: used_memory(&server).saturating_sub(before),
        new,
        server_us: server_usec(&server),
    }
}

/// The tutorial client: m bits and k probes from the classic formula for
/// `capacity` keys at rate p, probes by double hashing, one round trip each.
fn per_probe_run(n: u64, capacity: u64) -> Row {
    let server = Server::start();
    let client = redis::Client::open(server.url()).expect("client");
    let mut con = client.get_connection().expect("connect");
    let p: f64 = 0.001;
    let ln2 = std::f64::consts::LN_2;
    let m = (-(capacity as f64) * p.ln() / (ln2 * ln2)).ceil() as u64;
    let k = ((m as f64 / capacity as f64) * ln2).round() as u64;
    let before = used_memory(&server);
    // The whole bitmap, as the tutorials allocate it up front.
    let _: () = redis::cmd("SETBIT")
        .arg("bf")
        .arg(m - 1)
        .arg(0)
        .query(&mut con)
        .expect("SETBIT");
    let t = Instant::now();
    let mut new = 0;
    for i in 0..n {
        let h = xxh3_128_with_seed(&url(1, i), 0);
        let (a, b) = (h as u64, (h >> 64) as u64 | 1);
        let bit = |j: u64| a.wrapping_add(j.wrapping_mul(b)) % m;
        let mut present = true;
        for j in 0..k {
            let v: u8 = redis::cmd("GETBIT")
                .arg("bf")
                .arg(bit(j))
                .query(&mut con)
                .expect("GETBIT");
            if v == 0 {
                present = false;
                break;
            }
        }
        if !present {
            new += 1;
            for j in 0..k {
                let _: u8 = redis::cmd("SETBIT")
                    .arg("bf")
                    .arg(bit(j))
                    .arg(1)
                    .query(&mut con)
                    .expect("SETBIT");
            }
        }
    }
    let secs = t.elapsed().as_secs_f64();
    // Memory: the bitmap is sized for `capacity` keys whatever was inserted.
    let bytes = used_memory(&server).saturating_sub(before);
    Row {
        name: format!("per-probe GETBIT/SETBIT (m = {m} bits, k = {k})"),
        keys: n,
        secs,
        bytes: bytes * n / capacity.max(1),
        new,
        server_us: server_usec(&server),
    }
}

fn sadd_run(n: u64) -> Row {
    let server = Server::start();
    let client = redis::Client::open(server.url()).expect("client");
    let mut con = client.get_connection().expect("connect");
    let before = used_memory(&server);
    let keys: Vec<Vec<u8>> = (0..n).map(|i| url(1, i)).collect();
    let t = Instant::now();
    let mut new = 0;
    for chunk in keys.chunks(BATCH) {
        let mut p = redis::pipe();
        for k in chunk {
            p.cmd("SADD").arg("seen").arg(k);
        }
        let r: Vec<u64> = p.query(&mut con).expect("SADD");
        new += r.iter().sum::<u64>();
    }
    let secs = t.elapsed().as_secs_f64();
    Row {
        name: "pipelined SADD".to_string(),
        keys: n,
        secs,
        bytes: used_memory(&server).saturating_sub(before),
        new,
        server_us: server_usec(&server),
    }
}

fn main() {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing
    // and must stay quick.
    let quick = !std::env::args().any(|a| a == "--bench");
    let n = env("TB_BENCH_KEYS", if quick { 20_000 } else { 1_000_000 });
    let n_probe = env("TB_BENCH_PROBE_KEYS", if quick { 2_000 } else { 20_000 });
    if !redis_support::require("benches/redis") {
        return;
    }
    let version = std::process::Command::new("redis-server")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    println!("{version}");
    println!(
        "{n} distinct crawl-like URLs (~90 bytes), batches of {BATCH}; per-probe client: {n_probe}"
    );
    let rows = vec![
        engine_run(
            "RedisEngine 1d (planned: all keys), p=0.001",
            vec![Tier::daily(1)],
            n,
            n,
        ),
        engine_run(
            "RedisEngine 7d/4w/12m (planned: all keys a day), p=0.001",
            vec![Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
            n,
            n / 5,
        ),
        per_probe_run(n_probe, n),
        sadd_run(n),
    ];
    println!(
        "| client | keys | keys/s | server CPU per key | Redis memory per 10^6 keys | reported new |"
    );
    println!("|---|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {:.0} | {:.2} us | {:.1} MB | {} |",
            r.name,
            r.keys,
            r.rate(),
            r.server_us_per_key(),
            r.mem_per_million() / 1e6,
            r.new
        );
    }
    let (eng, probe, sadd) = (&rows[0], &rows[2], &rows[3]);
    println!(
        "RedisEngine 1d / per-probe: {:.1}x keys/s; / SADD: {:.2}x keys/s, {:.3}x memory",
        eng.rate() / probe.rate(),
        eng.rate() / sadd.rate(),
        eng.mem_per_million() / sadd.mem_per_million()
    );
}
