//! Through a Sentinel: a master with one replica, a client connected by
//! `redis+sentinel://`, waiting for the replica after every batch. The
//! master is killed; the Sentinel promotes the replica; the client's next
//! batch reconnects (retries with backoff) to the new master (which has no
//! replica left to confirm it), and every key of the batch confirmed before
//! the failover is there.
//!
//! Run: `cargo test --features redis --release --test redis_sentinel`.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::{Duration, Instant};

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock, Tier};

fn wait_until(what: &str, secs: u64, mut ok: impl FnMut() -> bool) {
    let t = Instant::now();
    while !ok() {
        assert!(t.elapsed() < Duration::from_secs(secs), "timed out: {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[test]
fn failover_through_sentinel_keeps_confirmed_inserts() {
    if !require("failover_through_sentinel_keeps_confirmed_inserts") {
        return;
    }
    let mut master = Server::start();
    let replica = master.replica();
    let sentinel = Sentinel::start(master.port);
    wait_until("the Sentinel sees the replica", 30, || {
        sentinel
            .port
            .checked_add(0)
            .map(|p| cli(p, &["SENTINEL", "replicas", "mymaster"]))
            .is_some_and(|out| out.contains(&replica.port.to_string()))
    });
    let clock = ManualClock::new(day(0));
    let config = Config {
        tiers: vec![Tier::daily(7), Tier::weekly(4)],
        expected_items_per_day: 100_000,
        fpr: 1e-6,
        ..Config::default()
    };
    let mut opts = RedisOptions::default().clock(clock);
    opts.wait_replicas = 1;
    opts.retries = 30;
    opts.backoff = Duration::from_millis(100);
    opts.max_backoff = Duration::from_millis(500);
    let url = format!("redis+sentinel://127.0.0.1:{}/mymaster", sentinel.port);
    let e = RedisEngine::create_with(&url, &prefix("sentinel"), config, opts).expect("create");
    let before: Vec<Vec<u8>> = (0..3000).map(|i| url_key(1, i)).collect();
    assert!(e.insert_batch(&before).expect("insert").iter().all(|&n| n));

    master.kill();
    wait_until("the Sentinel promotes the replica", 60, || {
        sentinel.master_port() == Some(replica.port)
    });
    let after: Vec<Vec<u8>> = (0..3000).map(|i| url_key(2, i)).collect();
    // The new master has no replica left: the batch is applied, and says so.
    let new = match e.insert_batch(&after) {
        Err(RedisError::NotReplicated {
            acked: 0,
            wanted: 1,
            answers,
            ..
        }) => answers,
        other => panic!("expected NotReplicated with no replica left, got {other:?}"),
    };
    assert!(new.iter().all(|&n| n), "keys inserted after the failover");
    assert!(e
        .contains_batch(&after)
        .expect("contains")
        .iter()
        .all(|&f| f));
    let found = e.contains_batch(&before).expect("contains");
    let lost = found.iter().filter(|&&f| !f).count();
    assert_eq!(lost, 0, "{lost} confirmed inserts lost in the failover");
}

fn url_key(set: u64, i: u64) -> Vec<u8> {
    url(100 + set, i)
}

/// A Sentinel that accepts connections and never answers (a hung process,
/// a half-open connection): opening the engine gives up within the
/// configured timeouts instead of waiting forever.
#[test]
fn a_sentinel_that_never_answers_times_out() {
    if !require("a_sentinel_that_never_answers_times_out") {
        return;
    }
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    let hold = std::thread::spawn(move || {
        // Keep every accepted connection open, silent.
        let mut held = Vec::new();
        for c in listener.incoming().take(64) {
            match c {
                Ok(c) => held.push(c),
                Err(_) => break,
            }
        }
    });
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut opts = RedisOptions::default();
        opts.connect_timeout = Duration::from_millis(500);
        opts.io_timeout = Duration::from_millis(500);
        opts.retries = 1;
        opts.backoff = Duration::from_millis(10);
        let url = format!("redis+sentinel://127.0.0.1:{port}/mymaster");
        let r = RedisEngine::open_with(&url, &prefix("hung-sentinel"), opts);
        let _ = tx.send(r.map(|_| ()).map_err(|e| e.to_string()));
    });
    match rx.recv_timeout(Duration::from_secs(20)) {
        Ok(Err(msg)) => assert!(msg.contains("HGETALL"), "{msg}"),
        Ok(Ok(())) => panic!("opened an engine through a Sentinel that never answers"),
        Err(_) => panic!("no answer after 20 s with 0.5 s timeouts: the Sentinel query hangs"),
    }
    drop(hold);
}

/// The user and password in a `redis+sentinel://` URL are percent-decoded
/// as in a `redis://` URL, so the same encoded password works through both.
#[test]
fn a_percent_encoded_password_works_through_the_sentinel_as_directly() {
    if !require("a_percent_encoded_password_works_through_the_sentinel_as_directly") {
        return;
    }
    let master = Server::with_user("crawler", "s3cr@t/x%", "*");
    let sentinel = Sentinel::start(master.port);
    let encoded = "crawler:s3cr%40t%2Fx%25";
    let config = daily(2, 1000);
    let pre = prefix("sentinel-encoded");
    let direct = format!("redis://{encoded}@127.0.0.1:{}", master.port);
    let e = RedisEngine::create(&direct, &pre, config).expect("create with the encoded password");
    assert_eq!(e.insert_batch(&[b"a"]).expect("insert"), [true]);
    let url = format!(
        "redis+sentinel://{encoded}@127.0.0.1:{}/mymaster",
        sentinel.port
    );
    let via = RedisEngine::open(&url, &pre).expect("open through the Sentinel");
    assert_eq!(
        via.insert_batch(&[b"a", b"b"]).expect("insert"),
        [false, true]
    );
}
