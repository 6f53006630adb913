//! `stats` of the Redis engine: what it shows of a directory's bits-set
//! counts, and which windows it lists when clocks differ.
//!
//! Run: `cargo test --features redis --release --test redis_stats_review`.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::Duration;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::ManualClock;

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

    let dirs = server.keys(&format!("{pre}:*:dir:*"));
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

/// Two clients whose clocks straddle midnight: the one ahead inserts into
/// the new window, which the lagging one's lookups read (the next window
/// is read too). The lagging one's `stats` lists that window as well, and
/// nothing past it; before, it left the window out, so its stats showed
/// fewer windows, bytes and keys than its lookups read.
#[test]
fn stats_list_the_next_window_that_lookups_read() {
    if !require("stats_list_the_next_window_that_lookups_read") {
        return;
    }
    let server = Server::start();
    let pre = prefix("nextwin");
    let (a, b) = straddling_midnight(&server, &pre);
    // The lagging client writes its own window first, then the one ahead
    // writes the next.
    let old: Vec<Vec<u8>> = (0..300).map(|i| url(181, i)).collect();
    assert!(b.insert_batch(&old).expect("insert").iter().all(|&n| n));
    let keys: Vec<Vec<u8>> = (0..2000).map(|i| url(182, i)).collect();
    assert!(a.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    assert!(
        b.contains_batch(&keys)
            .expect("contains")
            .iter()
            .all(|&f| f),
        "the lagging client's lookups do not read the next window"
    );

    let ahead_stats = a.stats().expect("stats ahead");
    let next = ahead_stats.tiers[0]
        .segments
        .last()
        .expect("a segment")
        .clone();
    let s = b.stats().expect("stats behind");
    let t = &s.tiers[0];
    let labels: Vec<&str> = t.segments.iter().map(|g| g.window.as_str()).collect();
    assert!(
        labels.contains(&next.window.as_str()),
        "the lagging client's stats leave out window {} that its lookups read: {labels:?}",
        next.window
    );
    let listed = t
        .segments
        .iter()
        .find(|g| g.window == next.window)
        .expect("listed");
    assert_eq!(listed.estimated_items, next.estimated_items);
    assert_eq!(listed.state, "open", "a window clients write is open");
    assert_eq!(s.bytes, ahead_stats.bytes, "both read the same windows");
    // Oldest first.
    let starts: Vec<i64> = t.segments.iter().map(|g| g.window_start).collect();
    assert!(starts.windows(2).all(|p| p[0] < p[1]), "{starts:?}");

    // A window two days past the lagging clock is not read by its
    // lookups, nor listed by its stats.
    let far = ManualClock::new(midnight() + Duration::from_secs(86_400 + 5));
    let c = RedisEngine::open_with(&server.url(), &pre, RedisOptions::default().clock(far))
        .expect("open");
    let later: Vec<Vec<u8>> = (0..200).map(|i| url(183, i)).collect();
    assert!(c.insert_batch(&later).expect("insert").iter().all(|&n| n));
    let found = b.contains_batch(&later).expect("contains");
    assert!(
        found.iter().filter(|&&f| f).count() < 20,
        "the lagging client reads a window two days ahead"
    );
    let far_label = c.stats().expect("stats").tiers[0]
        .segments
        .last()
        .expect("a segment")
        .window
        .clone();
    let s = b.stats().expect("stats behind");
    assert!(
        s.tiers[0].segments.iter().all(|g| g.window != far_label),
        "the lagging client's stats list window {far_label}, which its lookups do not read"
    );
}
