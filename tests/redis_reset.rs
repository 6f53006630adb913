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
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::ManualClock;

#[test]
fn an_engine_created_again_under_running_clients_is_refused_not_split() {
    if !require("an_engine_created_again_under_running_clients_is_refused_not_split") {
        return;
    }
    let mut server = Server::start();
    let clock = ManualClock::new(day(0));
    let config = daily(7, 100_000);
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
    let config = daily(7, 100_000);
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
            Err(err @ timebloom::redis::RedisError::EngineLost { .. }) => {
                let timebloom::redis::RedisError::EngineLost { key, .. } = &err else {
                    unreachable!()
                };
                assert_eq!(*key, config_key, "{how}");
                // What to delete: the documented names, not `P:*`.
                let msg = err.to_string();
                assert!(msg.contains("\"Key layout\""), "{how}: {msg}");
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

/// A shard whose keys went (on a Cluster: its master came back empty,
/// while the config hash's master kept it) before a client started: every
/// directory is made at create, so a client started after the loss knows
/// the shard's directory must exist, and is refused there. Before, a
/// client opened after every key of one of 16 shards was deleted read the
/// 63 of 1,000 inserted keys that shard held as absent, without an error.
/// Shown on one server,
/// deleting one shard's keys as a lost master would.
#[test]
fn a_client_started_after_a_shard_lost_its_keys_is_refused() {
    if !require("a_client_started_after_a_shard_lost_its_keys_is_refused") {
        return;
    }
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    let config = daily(7, 100_000);
    let pre = prefix("late-client");
    let opts = || RedisOptions::default().clock(clock.clone());
    let e = RedisEngine::create_or_open_with(&server.url(), &pre, config, opts()).expect("create");
    // Nothing inserted yet: no alarm for shards no key went to.
    let fresh = RedisEngine::open_with(&server.url(), &pre, opts()).expect("open");
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| url(170, i)).collect();
    assert!(fresh
        .contains_batch(&keys)
        .expect("read")
        .iter()
        .all(|&f| !f));
    assert!(fresh.stats().is_ok());
    assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    drop((e, fresh));
    let lost = server.cli(&["KEYS", &format!("{pre}:{{{pre}:3}}*")]);
    let lost: Vec<&str> = lost.lines().filter(|l| !l.is_empty()).collect();
    assert!(lost.len() >= 2, "{lost:?}");
    for k in &lost {
        assert_eq!(server.cli(&["DEL", k]).trim(), "1", "{k}");
    }
    let late = RedisEngine::open_with(&server.url(), &pre, opts()).expect("open after");
    match late.contains_batch(&keys) {
        Ok(found) => {
            let missing = found.iter().filter(|&&f| !f).count();
            panic!("{missing} keys absent, no error");
        }
        Err(RedisError::EngineLost { key, reason }) => {
            assert!(key.contains(":3}:dir:"), "{key}");
            // This client never saw the directory: create made it.
            assert!(!reason.contains("this client has seen"), "{reason}");
        }
        Err(err) => panic!("{err}"),
    }
    match late.stats() {
        Err(RedisError::EngineLost { key, .. }) => assert!(key.contains(":3}:dir:"), "{key}"),
        other => panic!("stats after a shard lost its keys: {other:?}"),
    }
    match late.insert_batch(&keys) {
        Ok(new) => panic!(
            "{} keys new again, no error",
            new.iter().filter(|&&n| n).count()
        ),
        Err(RedisError::EngineLost { key, .. }) => assert!(key.contains(":3}:dir:"), "{key}"),
        Err(err) => panic!("{err}"),
    }
}

/// On a Cluster, a master other than the one holding the config hash that
/// comes back empty has lost the directories and strings of its shards.
/// A client that has seen a shard's directory knows it must exist (a
/// directory is never deleted: it names its engine for good), and is
/// refused on that shard. Before, after `FLUSHALL` on the two masters
/// without the config hash, a running client read 646 of 1,000 keys it
/// had inserted as absent, without an error. No alarm before the loss:
/// shards no key went to yet, new windows (the oldest leaving the tier).
#[test]
fn a_cluster_master_that_comes_back_empty_is_an_error_for_running_clients() {
    if !require("a_cluster_master_that_comes_back_empty_is_an_error_for_running_clients") {
        return;
    }
    let cluster = Cluster::start();
    let clock = ManualClock::new(day(0));
    let config = daily(2, 100_000);
    let pre = prefix("cluster-empty");
    let opts = || {
        let mut o = RedisOptions::default().clock(clock.clone());
        o.shards = 64;
        o
    };
    let e = RedisEngine::create_or_open_with(&cluster.url(), &pre, config.clone(), opts())
        .expect("create");
    // A few keys: most of the 64 shards get none, and read no alarm.
    let few: Vec<Vec<u8>> = (0..5).map(|i| url(160, i)).collect();
    assert!(e.insert_batch(&few).expect("insert few").iter().all(|&n| n));
    let others: Vec<Vec<u8>> = (0..1000).map(|i| url(161, i)).collect();
    let found = e.contains_batch(&others).expect("read unwritten shards");
    assert!(found.iter().filter(|&&f| f).count() < 5);
    // A client that has only read sees the directories too.
    let reader = RedisEngine::open_with(&cluster.url(), &pre, opts()).expect("open reader");
    // Every shard written, then new windows (daily(2): the oldest leave).
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| url(162, i)).collect();
    for d in 0..4 {
        clock.set(day(d));
        e.insert_batch(&keys).expect("insert");
        assert!(reader
            .contains_batch(&keys)
            .expect("read")
            .iter()
            .all(|&f| f));
    }
    assert!(e.stats().is_ok());

    let config_key = format!("{pre}:config");
    let mut flushed = 0;
    for n in &cluster.nodes {
        if n.cli(&["EXISTS", &config_key]).trim() != "1" {
            assert_eq!(n.cli(&["FLUSHALL"]).trim(), "OK");
            flushed += 1;
        }
    }
    assert_eq!(flushed, 2);
    // A process started after the loss: every directory was made at create.
    let late = RedisEngine::open_with(&cluster.url(), &pre, opts()).expect("open after");
    for (who, client) in [("writer", &e), ("reader", &reader), ("late", &late)] {
        match client.contains_batch(&keys) {
            Ok(found) => {
                let missing = found.iter().filter(|&&f| !f).count();
                assert_eq!(missing, 0, "{who}: {missing} keys absent, no error");
            }
            Err(RedisError::EngineLost { key, .. }) => {
                assert!(key.starts_with(&pre), "{who}: {key}")
            }
            Err(err) => panic!("{who}: {err}"),
        }
        match client.stats() {
            Err(RedisError::EngineLost { key, .. }) => {
                assert!(key.starts_with(&pre), "{who}: {key}")
            }
            other => panic!("{who}: stats after a master lost its keys: {other:?}"),
        }
    }
    match e.insert_batch(&keys) {
        Ok(new) => {
            let again = new.iter().filter(|&&n| n).count();
            assert_eq!(again, 0, "{again} keys reported new again, no error");
        }
        Err(RedisError::EngineLost { key, reason }) => {
            assert!(key.starts_with(&pre), "{key}");
            assert!(reason.contains("gone"), "{reason}");
        }
        Err(err) => panic!("{err}"),
    }
}

/// A process of a fleet that opens the engine while its creator is still
/// making the directories (every process calls `create_or_open` at once)
/// reads a config hash without `dirs`. Once `dirs` is set, its next batch
/// learns it: a shard that loses its keys afterwards is refused, not
/// written again from empty. Before, such a client read `dirs` again only
/// at its next window boundary (up to a day, a month for monthly tiers):
/// after one of 16 shards lost its keys it reported the 63 of 1,000 keys
/// that shard held new again, without an error, and made the shard's
/// directory again, hiding the loss from every other client.
#[test]
fn a_client_opened_while_the_directories_were_made_learns_dirs() {
    if !require("a_client_opened_while_the_directories_were_made_learns_dirs") {
        return;
    }
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    let config = daily(7, 100_000);
    let pre = prefix("mid-create");
    let opts = || RedisOptions::default().clock(clock.clone());
    let e = RedisEngine::create_or_open_with(&server.url(), &pre, config, opts()).expect("create");
    // As if opened between the config hash's HSETNX and the `dirs` field.
    let config_key = format!("{pre}:config");
    assert_eq!(server.cli(&["HDEL", &config_key, "dirs"]).trim(), "1");
    let early = RedisEngine::open_with(&server.url(), &pre, opts()).expect("open early");
    // One key, and the shard it went to (the only one with a string).
    assert!(e.insert(b"probe").expect("insert probe"));
    let probe = server.cli(&["KEYS", &format!("{pre}:*:d:*")]);
    let probe: Vec<&str> = probe.lines().filter(|l| !l.is_empty()).collect();
    assert_eq!(probe.len(), 1, "{probe:?}");
    let shard_of = |k: &str| -> u32 {
        let tag = &k[k.find('{').expect("tag") + 1..k.find('}').expect("tag")];
        tag.rsplit(':')
            .next()
            .expect("shard")
            .parse()
            .expect("shard")
    };
    let lost_shard = (shard_of(probe[0]) + 1) % 16;
    // Its first batch, before the creator set `dirs`: of the other
    // shards it sees nothing.
    assert!(early.contains(b"probe").expect("read"));
    assert_eq!(
        server.cli(&["HSET", &config_key, "dirs", "made"]).trim(),
        "1"
    );
    assert!(early.contains(b"probe").expect("read"));
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| url(171, i)).collect();
    assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    let lost = server.cli(&["KEYS", &format!("{pre}:{{{pre}:{lost_shard}}}*")]);
    let lost: Vec<&str> = lost.lines().filter(|l| !l.is_empty()).collect();
    assert!(lost.len() >= 2, "{lost:?}");
    for k in &lost {
        assert_eq!(server.cli(&["DEL", k]).trim(), "1", "{k}");
    }
    let lost_dir = format!(":{lost_shard}}}:dir:");
    match early.insert_batch(&keys) {
        Ok(new) => panic!(
            "{} keys new again, no error",
            new.iter().filter(|&&n| n).count()
        ),
        Err(RedisError::EngineLost { key, .. }) => assert!(key.contains(&lost_dir), "{key}"),
        Err(err) => panic!("{err}"),
    }
}
