//! The false-positive rate of the engine in Redis at its configured bound,
//! with crawl-like URLs: a `7d` engine filled at its plan for seven days
//! (a lookup reads all seven windows), probed with 300,000 URLs never
//! inserted; and the memory Redis reports for its strings.
//!
//! Run: `cargo test --features redis --release --test redis_fpr -- --nocapture`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, ManualClock};

#[test]
fn the_rate_at_the_plan_stays_within_the_configured_bound() {
    if !require("the_rate_at_the_plan_stays_within_the_configured_bound") {
        return;
    }
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    let per_day = 50_000u64;
    let fpr = 0.001;
    let config = Config {
        fpr,
        ..daily(7, per_day)
    };
    let pre = prefix("fpr");
    let e = RedisEngine::create_with(
        &server.url(),
        &pre,
        config,
        RedisOptions::default().clock(clock.clone()),
    )
    .expect("create");
    for d in 0..7u64 {
        let keys: Vec<Vec<u8>> = (0..per_day).map(|i| url(170 + d, i)).collect();
        for chunk in keys.chunks(10_000) {
            e.insert_batch(chunk).expect("insert");
        }
        if d < 6 {
            clock.advance(DAY);
        }
    }
    let probes = 300_000u64;
    let mut positives = 0usize;
    for start in (0..probes).step_by(10_000) {
        let keys: Vec<Vec<u8>> = (start..start + 10_000).map(|i| url(190, i)).collect();
        positives += e
            .contains_batch(&keys)
            .expect("contains")
            .iter()
            .filter(|&&f| f)
            .count();
    }
    let rate = positives as f64 / probes as f64;
    let stats = e.stats().expect("stats");
    let est: f64 = stats.tiers[0]
        .segments
        .iter()
        .map(|s| s.estimated_fpr)
        .sum();
    let mut bytes = 0u64;
    let mut strings = 0u64;
    for k in server.keys(&format!("{pre}:*")) {
        let n: u64 = server
            .cli(&["MEMORY", "USAGE", &k])
            .trim()
            .parse()
            .unwrap_or(0);
        bytes += n;
        if k.contains(":d:") {
            strings += n;
        }
    }
    let keys = (per_day * 7) as f64;
    println!(
        "{positives} of {probes} probes positive: {rate:.2e} (configured {fpr:e}, stats {est:.2e}); \
         Redis memory {:.2} MB ({:.2} MB of filter strings, planned {:.2} MB): {:.1} bits per key",
        bytes as f64 / 1e6,
        strings as f64 / 1e6,
        stats.bytes as f64 / 1e6,
        strings as f64 * 8.0 / keys
    );
    // Three standard deviations above the bound.
    let sd = (fpr * probes as f64).sqrt() / probes as f64;
    assert!(rate <= fpr + 3.0 * sd, "rate {rate:e} over {fpr:e}");
}

/// A rate the Redis layout cannot plan (below about 3.5e-18 for a
/// sub-filter: the embedded engine plans such files with more probes; the
/// Redis layout keeps the sizing every client of a deployment computes
/// alike) is refused naming the rate and what to change. It was refused
/// as a window needing more than 512 MiB per shard string, "use more
/// shards", which no shard count helps; and the byte count overflowed (a
/// panic with overflow checks, 0 bytes without).
#[test]
fn a_rate_below_the_layouts_reach_is_refused_naming_the_rate() {
    if !require("a_rate_below_the_layouts_reach_is_refused_naming_the_rate") {
        return;
    }
    let server = Server::start();
    for (fpr, shards) in [(1e-18, 16), (1e-18, 1), (1e-30, 16384)] {
        let config = Config {
            fpr,
            ..daily(7, 1_000)
        };
        // The embedded engine takes it.
        config.validate().expect("an embedded engine plans it");
        let mut opts = RedisOptions::default();
        opts.shards = shards;
        let err = RedisEngine::create_with(&server.url(), &prefix("tiny"), config, opts)
            .expect_err("the Redis layout cannot plan it");
        let msg = err.to_string();
        assert!(
            msg.contains("7d") && msg.contains("raise fpr") && !msg.contains("more shards"),
            "fpr {fpr:e}, {shards} shards: {msg}"
        );
    }
    // A rate the layout plans is taken (7d at 1e-15: 7.1e-17 a sub-filter).
    let config = Config {
        fpr: 1e-15,
        ..daily(7, 1_000)
    };
    RedisEngine::create(&server.url(), &prefix("low"), config).expect("create");
}
