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
use timebloom::ManualClock;

#[test]
fn a_lagging_clock_sees_keys_of_the_next_window() {
    if !require("a_lagging_clock_sees_keys_of_the_next_window") {
        return;
    }
    let server = Server::start();
    let (a, b) = straddling_midnight(&server, &prefix("clocks"));
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
    let config = daily(2, 10_000);
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

/// A client whose clock is days ahead (a wrong clock, or `--now` in the
/// future) writes: its shards' directories must keep the windows that are
/// still live for the other clients. It deleted their entries (a window
/// below its own oldest live one minus one), and the others then skipped
/// those windows: every key inserted there was reported absent, and new
/// again.
#[test]
fn a_clock_far_ahead_does_not_make_live_windows_vanish_for_the_others() {
    if !require("a_clock_far_ahead_does_not_make_live_windows_vanish_for_the_others") {
        return;
    }
    let server = Server::start();
    let config = daily(7, 10_000);
    let pre = prefix("ahead");
    let clock = ManualClock::new(day(0));
    let e = RedisEngine::create_with(
        &server.url(),
        &pre,
        config,
        RedisOptions::default().clock(clock.clone()),
    )
    .expect("create");
    let keys: Vec<Vec<u8>> = (0..2000).map(|i| url(92, i)).collect();
    assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    // Day 6: the window of day 0 is the oldest live one.
    clock.set(day(6));
    assert!(e
        .contains_batch(&keys)
        .expect("contains")
        .iter()
        .all(|&f| f));
    let wrong = RedisEngine::open_with(
        &server.url(),
        &pre,
        RedisOptions::default().clock(ManualClock::new(day(400))),
    )
    .expect("open");
    let other: Vec<Vec<u8>> = (0..2000).map(|i| url(93, i)).collect();
    wrong.insert_batch(&other).expect("insert, far ahead");
    let found = e.contains_batch(&keys).expect("contains");
    let missing = found.iter().filter(|&&f| !f).count();
    assert_eq!(
        missing, 0,
        "a client whose clock is ahead made live windows vanish"
    );
    let again = e.insert_batch(&keys).expect("insert");
    assert!(again.iter().all(|&n| !n), "keys reported new twice");
}
