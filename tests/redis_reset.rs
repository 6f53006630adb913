//! A server that comes back empty (restarted without persistence, flushed,
//! a failover to a replica that had nothing) while clients of the engine
//! keep running: the config hash is gone, so the next process to start
//! creates the engine again, with a new hash seed. Its keys land on other
//! cells than the old clients' keys, and the two would each report the
//! same URL new, forever. Each shard's directory names the engine that
//! writes it, so a client of the other engine is refused, loudly.
//!
//! Run: `cargo test --features redis --release --test redis_reset`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, ManualClock, Tier};

#[test]
fn an_engine_created_again_under_running_clients_is_refused_not_split() {
    if !require("an_engine_created_again_under_running_clients_is_refused_not_split") {
        return;
    }
    let mut server = Server::start();
    let clock = ManualClock::new(day(0));
    let config = Config {
        tiers: vec![Tier::daily(7)],
        expected_items_per_day: 100_000,
        ..Config::default()
    };
    let pre = prefix("reset");
    let opts = || RedisOptions::default().clock(clock.clone());
    let old = RedisEngine::create_or_open_with(&server.url(), &pre, config.clone(), opts())
        .expect("create");
    let before: Vec<Vec<u8>> = (0..1000).map(|i| url(150, i)).collect();
    assert!(old
        .insert_batch(&before)
        .expect("insert")
        .iter()
        .all(|&n| n));

    // The server comes back with nothing; the old client keeps running.
    server.restart();
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| url(151, i)).collect();
    let a = old.insert_batch(&keys[..500]);
    let new = RedisEngine::create_or_open_with(&server.url(), &pre, config, opts())
        .expect("create again");
    let b = new.insert_batch(&keys);
    let c = old.insert_batch(&keys);
    match (a, b, c) {
        (Ok(_), Ok(b), Ok(c)) => {
            let twice = b.iter().zip(&c).filter(|(&x, &y)| x && y).count();
            assert_eq!(
                twice, 0,
                "{twice} keys reported new by both the old and the new engine's clients"
            );
        }
        (a, b, c) => {
            // An error is the expected outcome: it must say what happened.
            for r in [a.err(), b.err(), c.err()].into_iter().flatten() {
                let msg = r.to_string();
                assert!(msg.contains(&pre), "{msg}");
            }
        }
    }
}

/// A server that comes back empty (a restart without persistence, or a
/// `FLUSHDB`) under a client that keeps running, with no other process
/// creating the engine again: the config hash is gone, and every key the
/// client had inserted reads as absent. Before, the client answered
/// "absent" and "new" for all of them, without an error.
#[test]
fn a_server_that_comes_back_empty_is_an_error_for_running_clients() {
    if !require("a_server_that_comes_back_empty_is_an_error_for_running_clients") {
        return;
    }
    let mut server = Server::start();
    let clock = ManualClock::new(day(0));
    let config = Config {
        tiers: vec![Tier::daily(7)],
        expected_items_per_day: 100_000,
        ..Config::default()
    };
    for (round, how) in ["restart", "FLUSHDB"].iter().enumerate() {
        let pre = prefix(&format!("empty-{how}"));
        let e = RedisEngine::create_or_open_with(
            &server.url(),
            &pre,
            config.clone(),
            RedisOptions::default().clock(clock.clone()),
        )
        .expect("create");
        let keys: Vec<Vec<u8>> = (0..1000).map(|i| url(152 + round as u64, i)).collect();
        assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
        if *how == "restart" {
            server.restart();
        } else {
            assert_eq!(server.cli(&["FLUSHDB"]).trim(), "OK");
        }
        let config_key = format!("{pre}:config");
        // `stats` too: it showed empty windows, without an error.
        match e.stats() {
            Err(timebloom::redis::RedisError::EngineLost { key, .. }) => {
                assert_eq!(key, config_key, "{how}")
            }
            other => panic!("{how}: stats of a lost engine: {other:?}"),
        }
        match e.contains_batch(&keys) {
            Ok(found) => {
                let missing = found.iter().filter(|&&f| !f).count();
                assert_eq!(missing, 0, "{how}: {missing} keys absent, no error");
            }
            Err(err) => assert!(err.to_string().contains(&config_key), "{how}: {err}"),
        }
        match e.insert_batch(&keys) {
            Ok(new) => {
                let again = new.iter().filter(|&&n| n).count();
                assert_eq!(again, 0, "{how}: {again} keys reported new again, no error");
            }
            Err(err) => assert!(err.to_string().contains(&config_key), "{how}: {err}"),
        }
    }
}
