//! `stats` of the Redis engine: what it shows of a directory's bits-set
//! counts, and which windows it lists when clocks differ.
//!
//! Run: `cargo test --features redis --release --test redis_stats_review`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::ManualClock;

/// The keys of `server` matching `pattern` (`SCAN`, through `redis-cli`).
fn keys_of(server: &Server, pattern: &str) -> Vec<String> {
    server
        .cli(&["--scan", "--pattern", pattern])
        .lines()
        .map(|l| l.trim().to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// A directory's count of bits set in a sub-filter raised past the
/// sub-filter's cells (`HSET dir <window>:0 ...`, as an edited directory
/// may hold). Before, `stats` showed a fill above 1 (and an estimate made
/// from it) without a word; now it fails naming the directory, as the
/// other calls do for a directory no engine writes.
#[test]
fn a_count_past_the_cells_is_an_error_naming_the_directory() {
    if !require("a_count_past_the_cells_is_an_error_naming_the_directory") {
        return;
    }
    let server = Server::start();
    let pre = prefix("count");
    let e = RedisEngine::create_with(
        &server.url(),
        &pre,
        daily(7, 10_000),
        RedisOptions::default().clock(ManualClock::new(day(0))),
    )
    .expect("create");
    let keys: Vec<Vec<u8>> = (0..500).map(|i| url(180, i)).collect();
    assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    let before = e.stats().expect("stats");
    let seg = &before.tiers[0].segments.last().expect("a segment").clone();
    assert!(seg.fill > 0.0 && seg.fill < 1.0, "{seg:?}");

    let dirs = keys_of(&server, &format!("{pre}:*:dir:*"));
    assert!(!dirs.is_empty());
    let mut edited = Vec::new();
    for d in &dirs {
        for f in server.cli(&["HKEYS", d]).lines().map(str::trim) {
            if f.ends_with(":0") {
                // Far more than any shard's cells, and 2^64 - 1.
                let v = if edited.is_empty() {
                    u64::MAX.to_string()
                } else {
                    (seg.cells * 4).to_string()
                };
                server.cli(&["HSET", d, f, &v]);
                edited.push(d.clone());
            }
        }
    }
    assert!(!edited.is_empty(), "no count field in {dirs:?}");
    match e.stats() {
        Ok(s) => {
            for t in &s.tiers {
                for g in &t.segments {
                    assert!(
                        g.fill.is_finite() && g.fill <= 1.0,
                        "window {}: fill {} (occupied {} of {} cells)",
                        g.window,
                        g.fill,
                        g.occupied,
                        g.cells
                    );
                    assert!(g.occupied <= g.cells, "{g:?}");
                    assert!(g.estimated_fpr.is_finite(), "{g:?}");
                }
            }
        }
        Err(err) => {
            let msg = err.to_string();
            assert!(
                edited.iter().any(|d| msg.contains(d.as_str())),
                "the error names no edited directory: {msg}"
            );
        }
    }
    // Lookups do not read the counts: every key is still found.
    assert!(e
        .contains_batch(&keys)
        .expect("contains")
        .iter()
        .all(|&f| f));
}
