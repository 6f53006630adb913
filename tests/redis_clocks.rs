//! Two clients whose clocks straddle a window boundary: the one that is
//! ahead inserts into the new window, the one that lags must still see the
//! key (it reads the next window too when a shard has it).
//!
//! Run: `cargo test --features redis --release --test redis_clocks`.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::Duration;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, ManualClock, Tier};

#[test]
fn a_lagging_clock_sees_keys_of_the_next_window() {
    if !require("a_lagging_clock_sees_keys_of_the_next_window") {
        return;
    }
    let server = Server::start();
    let midnight = day(2) - Duration::from_secs(12 * 3600);
    let ahead = ManualClock::new(midnight + Duration::from_secs(5));
    let behind = ManualClock::new(midnight - Duration::from_secs(5));
    let config = Config {
        tiers: vec![Tier::daily(7)],
        expected_items_per_day: 10_000,
        ..Config::default()
    };
    let pre = prefix("clocks");
    let a = RedisEngine::create_with(
        &server.url(),
        &pre,
        config,
        RedisOptions::default().clock(ahead.clone()),
    )
    .expect("create");
    let b = RedisEngine::open_with(&server.url(), &pre, RedisOptions::default().clock(behind))
        .expect("open");
    let keys: Vec<Vec<u8>> = (0..2000).map(|i| url(90, i)).collect();
    assert!(a.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    assert!(
        b.contains_batch(&keys)
            .expect("contains")
            .iter()
            .all(|&f| f),
        "a lagging client misses keys of the next window"
    );
    assert!(
        b.insert_batch(&keys).expect("insert").iter().all(|&n| !n),
        "a lagging client reported keys new twice"
    );
    assert!(b
        .contains_within(&keys[0], Duration::from_secs(60))
        .expect("within"));
}

/// A client clock far behind the server's (a replay of an old log with an
/// injected clock): the windows it writes are not dropped by Redis at once.
#[test]
fn a_clock_behind_the_server_does_not_expire_what_it_writes() {
    if !require("a_clock_behind_the_server_does_not_expire_what_it_writes") {
        return;
    }
    let server = Server::start();
    let past = ManualClock::new(at(1_600_000_000)); // September 2020
    let config = Config {
        tiers: vec![Tier::daily(2)],
        expected_items_per_day: 10_000,
        ..Config::default()
    };
    let e = RedisEngine::create_with(
        &server.url(),
        &prefix("past"),
        config,
        RedisOptions::default().clock(past),
    )
    .expect("create");
    let keys: Vec<Vec<u8>> = (0..500).map(|i| url(91, i)).collect();
    assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    assert!(
        e.contains_batch(&keys)
            .expect("contains")
            .iter()
            .all(|&f| f),
        "Redis dropped the window at once"
    );
}
