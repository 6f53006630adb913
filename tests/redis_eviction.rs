//! A server whose `maxmemory-policy` evicts keys: Redis drops whole filter
//! strings of live windows when memory runs short. The keys they held were
//! acknowledged; a lookup that reads the window must not answer "absent"
//! for them as if nothing had happened. The script finds a sub-filter that
//! the shard's directory lists but Redis no longer has and fails, naming
//! the string (and, a directory lost while its strings remain, reads the
//! strings it finds).
//!
//! Run: `cargo test --features redis --release --test redis_eviction`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock};

/// Inserts batches until the server has evicted something, checking after
/// each batch that every acknowledged key is found or the lookup fails.
fn never_a_silent_false_negative(policy: &str) {
    let test = format!("eviction-{policy}");
    if !require(&test) {
        return;
    }
    let server = Server::with_args(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--maxmemory",
        "6mb",
        "--maxmemory-policy",
        policy,
        "--maxmemory-samples",
        "10",
    ]);
    let clock = ManualClock::new(day(0));
    // Each day's window is planned for 400,000 keys at 0.1%: about 0.8 MB
    // of strings, made at full length when a shard first writes there.
    let config = Config {
        fpr: 0.001,
        ..daily(30, 400_000)
    };
    let pre = prefix(&test);
    let e = RedisEngine::create_with(
        &server.url(),
        &pre,
        config,
        RedisOptions::default().clock(clock.clone()),
    )
    .expect("create");
    let mut acked: Vec<Vec<u8>> = Vec::new();
    let mut evicted = false;
    for d in 0..25u64 {
        let keys: Vec<Vec<u8>> = (0..2_000).map(|i| url(140 + d, i)).collect();
        match e.insert_batch(&keys) {
            Ok(_) => acked.extend(keys),
            Err(err) => {
                assert!(
                    matches!(err, RedisError::Redis { .. } | RedisError::BadReply { .. }),
                    "{err}"
                );
                evicted = true;
                break;
            }
        }
        let info = server.cli(&["INFO", "stats"]);
        let n: u64 = info
            .lines()
            .find_map(|l| l.strip_prefix("evicted_keys:"))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0);
        match e.contains_batch(&acked) {
            Ok(found) => {
                let missing = found.iter().filter(|&&f| !f).count();
                assert_eq!(
                    missing,
                    0,
                    "day {d}: {missing} of {} acknowledged keys reported absent after \
                     Redis evicted {n} keys, and no error said so",
                    acked.len()
                );
            }
            Err(err) => {
                let msg = err.to_string();
                assert!(n > 0, "an error without eviction: {msg}");
                assert!(msg.contains("evict") && msg.contains(&pre), "{msg}");
                evicted = true;
                break;
            }
        }
        if n > 0 {
            evicted = true;
        }
        clock.advance(DAY);
    }
    assert!(evicted, "the server never evicted: the test proved nothing");
}

#[test]
fn volatile_lru_eviction_is_an_error_not_a_false_negative() {
    never_a_silent_false_negative("volatile-lru");
}

/// `volatile-ttl` drops the keys nearest their expiry first: the result
/// keys, then the oldest windows' strings.
#[test]
fn volatile_ttl_eviction_is_an_error_not_a_false_negative() {
    never_a_silent_false_negative("volatile-ttl");
}

#[test]
fn allkeys_lru_eviction_is_an_error_not_a_false_negative() {
    never_a_silent_false_negative("allkeys-lru");
}

/// `noeviction` (the default): a server at its `maxmemory` refuses the
/// groups of a batch that would write past it (`OOM`), after it ran the
/// groups before. The call is an error; sent again once memory is free,
/// it resumes, so every key is reported new exactly once, and the groups
/// that had run are not reported "present".
#[test]
fn noeviction_out_of_memory_mid_batch_reports_each_key_new_once() {
    if !require("noeviction_out_of_memory_mid_batch_reports_each_key_new_once") {
        return;
    }
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    // A day's window: 16 shard strings of about 110 KB each, made when a
    // shard first writes there.
    let config = Config {
        fpr: 0.001,
        ..daily(7, 1_000_000)
    };
    let pre = prefix("noeviction");
    let e = RedisEngine::create_with(
        &server.url(),
        &pre,
        config,
        RedisOptions::default().clock(clock.clone()),
    )
    .expect("create");
    let used: u64 = server
        .cli(&["INFO", "memory"])
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory");
    // Room for a few of the shards' strings, not for all sixteen.
    let limit = (used + 500_000).to_string();
    server.cli(&["CONFIG", "SET", "maxmemory-policy", "noeviction"]);
    server.cli(&["CONFIG", "SET", "maxmemory", &limit]);
    let keys: Vec<Vec<u8>> = (0..3000).map(|i| url(160, i)).collect();
    let err = e.insert_batch(&keys).expect_err("past maxmemory");
    assert!(err.to_string().contains("OOM"), "{err}");
    let found = e.contains_batch(&keys).expect("lookups run out of memory");
    let applied = found.iter().filter(|&&f| f).count();
    assert!(
        applied > 0 && applied < keys.len(),
        "{applied} of {} keys applied: the batch should stop part-way",
        keys.len()
    );
    // Still out of memory: an error again, nothing reported.
    assert!(e.insert_batch(&keys).is_err());
    server.cli(&["CONFIG", "SET", "maxmemory", "0"]);
    let new = e.insert_batch(&keys).expect("insert once memory is free");
    let once = new.iter().filter(|&&n| n).count();
    assert_eq!(
        once,
        keys.len(),
        "{} keys of the groups applied before the OOM reported present",
        keys.len() - once
    );
    assert!(e.contains_batch(&keys).expect("lookups").iter().all(|&f| f));
}
