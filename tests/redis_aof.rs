//! A standalone `redis-server` with AOF (`appendfsync always`) is killed
//! (SIGKILL) and restarted while a client inserts: the client retries
//! through the outage, and no insert it saw acknowledged is lost. Every key
//! is distinct, so every acknowledged key must also have been reported new
//! exactly once: a batch resent after the crash gets its stored answer,
//! not "already present".
//!
//! Run: `cargo test --features redis --release --test redis_aof`.
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, ManualClock, Tier};

#[test]
fn kill_and_restart_loses_no_acknowledged_insert() {
    if !require("kill_and_restart_loses_no_acknowledged_insert") {
        return;
    }
    let mut server = Server::start_aof();
    let clock = ManualClock::new(day(0));
    let config = Config {
        tiers: vec![Tier::daily(7), Tier::weekly(4)],
        expected_items_per_day: 100_000,
        fpr: 1e-6,
        ..Config::default()
    };
    let opts = || {
        let mut o = RedisOptions::default().clock(clock.clone());
        // About 18 s of retries: a restart on a busy machine may take
        // seconds.
        o.retries = 40;
        o.backoff = Duration::from_millis(20);
        o.max_backoff = Duration::from_millis(500);
        o
    };
    let addr = server.url();
    let pre = prefix("aof");
    let engine = RedisEngine::create_with(&addr, &pre, config, opts()).expect("create");
    let stop = AtomicBool::new(false);
    let batches = AtomicU64::new(0);
    let (acked, news) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut acked = Vec::new();
            let mut news = 0usize;
            let mut batch = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let keys: Vec<Vec<u8>> = (0..200).map(|i| url(70, batch * 200 + i)).collect();
                let r = engine
                    .insert_batch(&keys)
                    .expect("insert_batch through the outage");
                news += r.iter().filter(|&&n| n).count();
                acked.extend(keys);
                batch += 1;
                batches.store(batch, Ordering::Relaxed);
            }
            (acked, news)
        });
        // The writer goes on for 700 ms and at least 5 batches before the
        // kill and again after the restart, however slowly a busy machine
        // runs them (at most 2 minutes each; a writer that failed ends it).
        let writing = |after: u64| {
            let t = Instant::now();
            while (t.elapsed() < Duration::from_millis(700)
                || batches.load(Ordering::Relaxed) < after + 5)
                && t.elapsed() < Duration::from_secs(120)
                && !writer.is_finished()
            {
                std::thread::sleep(Duration::from_millis(10));
            }
        };
        writing(0);
        server.kill();
        std::thread::sleep(Duration::from_millis(300));
        let before_restart = batches.load(Ordering::Relaxed);
        server.restart();
        writing(before_restart);
        stop.store(true, Ordering::Relaxed);
        writer.join().expect("writer")
    });
    println!("{} keys acknowledged, {news} reported new", acked.len());
    assert!(acked.len() >= 2_000, "too few inserts to mean anything");
    assert_eq!(news, acked.len(), "a key was not reported new exactly once");
    // Kill once more, with no client connected, and read with a new client.
    server.restart();
    let reader = RedisEngine::open_with(&addr, &pre, opts()).expect("open after restart");
    let found = reader.contains_batch(&acked).expect("contains_batch");
    let lost = found.iter().filter(|&&f| !f).count();
    assert_eq!(lost, 0, "{lost} acknowledged inserts lost");
}
