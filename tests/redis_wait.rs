//! `RedisOptions::wait_replicas`: with a replica attached, a batch returns
//! once the replica has it (and the replica holds the engine's keys); asking
//! for more replicas than exist is `NotReplicated`, which still carries the
//! batch's answers.
//!
//! Run: `cargo test --features redis --release --test redis_wait`.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::Duration;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock};

/// The engine every test here creates: two daily windows of 10,000 keys.
fn two_days() -> Config {
    daily(2, 10_000)
}

/// The config hash of prefix `pre` on `server`: its engine field and its
/// mark that the directories are made (a hash's field order may differ
/// between a master and its replica).
fn config_hash(server: &Server, pre: &str) -> String {
    server.cli(&["HMGET", &format!("{pre}:config"), "engine", "dirs"])
}

#[test]
fn wait_for_replicas() {
    if !require("wait_for_replicas") {
        return;
    }
    let master = Server::start();
    let replica = master.replica();
    let clock = ManualClock::new(day(0));
    let config = two_days();
    let pre = prefix("wait");
    let mut opts = RedisOptions::default().clock(clock.clone());
    opts.wait_replicas = 1;
    // `WAIT` returns as soon as the replica has the batch: a long timeout
    // costs nothing, and a replica slow to be scheduled on a busy machine
    // is still counted.
    opts.wait_timeout = Duration::from_secs(30);
    let e = RedisEngine::create_with(&master.url(), &pre, config, opts).expect("create");
    let keys: Vec<Vec<u8>> = (0..500).map(|i| url(97, i)).collect();
    assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    // Acknowledged by the replica: it holds as many keys as the master.
    assert_eq!(master.cli(&["DBSIZE"]), replica.cli(&["DBSIZE"]));

    let mut opts = RedisOptions::default().clock(clock);
    opts.wait_replicas = 2;
    // Waited out in full (there is one replica): long enough for the one
    // there is to acknowledge the batch on a busy machine (it answers the
    // master's GETACK once it has applied the batch), so that it is
    // counted.
    opts.wait_timeout = Duration::from_secs(2);
    let e2 = RedisEngine::open_with(&master.url(), &pre, opts).expect("open");
    let more: Vec<Vec<u8>> = (0..10).map(|i| url(98, i)).collect();
    let n = not_replicated(e2.insert_batch(&more));
    assert_eq!(n.acked, (1, 2));
    assert_eq!(n.answers, vec![true; 10]);
    // The master the `WAIT` went to is named.
    assert_eq!(n.server, format!("127.0.0.1:{}", master.port));
    // The batch was applied all the same.
    assert!(e
        .contains_batch(&more)
        .expect("contains")
        .iter()
        .all(|&f| f));
}

/// A create ends with a `WAIT` too, when `wait_replicas` asks for one: the
/// config hash and the shards' directories it writes are what every later
/// batch stands on, and a failover that lost them before any batch would
/// leave the engine lost (or, on a Cluster, one shard's directory gone
/// under a mark that says all are made). Fewer replicas in time is
/// `NotReplicated` with no answers; the engine is made on the master, and
/// opening it works.
#[test]
fn a_create_waits_for_its_replicas() {
    if !require("a_create_waits_for_its_replicas") {
        return;
    }
    let master = Server::start();
    let replica = master.replica();
    let clock = ManualClock::new(day(0));
    let pre = prefix("wait-create");
    let opts = waiting(&clock, 2, Duration::from_secs(2));
    let n = not_replicated(RedisEngine::create_with(
        &master.url(),
        &pre,
        two_days(),
        opts.clone(),
    ));
    assert_eq!(n.acked, (1, 2));
    assert!(n.answers.is_empty(), "{:?}", n.answers);
    assert_eq!(n.server, format!("127.0.0.1:{}", master.port));
    // The one replica confirmed it: it holds the config hash.
    assert_eq!(config_hash(&master, &pre), config_hash(&replica, &pre));
    // Made on the master: it opens, and answers.
    let e = RedisEngine::create_or_open_with(&master.url(), &pre, two_days(), opts)
        .expect("open the engine the create made");
    assert_eq!(
        e.contains_batch(&[url(99, 0)]).expect("contains"),
        vec![false]
    );

    // With as many replicas as there are, the create returns the engine.
    let pre = prefix("wait-create-one");
    let opts = waiting(&clock, 1, Duration::from_secs(30));
    RedisEngine::create_with(&master.url(), &pre, two_days(), opts).expect("create");
    assert_eq!(config_hash(&master, &pre), config_hash(&replica, &pre));
}

/// A `wait_timeout` under a millisecond (`WAIT n 0` would block until the
/// replicas confirm, however long) or longer than `io_timeout` still ends
/// in `NotReplicated` with the batch's answers once it has passed, not in a
/// timeout error after `io_timeout`.
#[test]
fn a_wait_shorter_than_a_millisecond_or_longer_than_the_io_timeout_still_reports_the_answers() {
    if !require("a_wait_shorter_than_a_millisecond_or_longer_than_the_io_timeout") {
        return;
    }
    let master = Server::start();
    let clock = ManualClock::new(day(0));
    let config = two_days();
    let pre = prefix("wait-bounds");
    // Made without a wait: a create asking for a replica would end in
    // `NotReplicated` before the batches this test sends.
    let opts = RedisOptions::default().clock(clock.clone());
    RedisEngine::create_with(&master.url(), &pre, config.clone(), opts).expect("create");
    for (i, wait) in [
        Duration::ZERO,
        Duration::from_micros(500),
        Duration::from_millis(1500),
    ]
    .into_iter()
    .enumerate()
    {
        let mut opts = RedisOptions::default().clock(clock.clone());
        opts.wait_replicas = 1;
        opts.wait_timeout = wait;
        opts.io_timeout = Duration::from_secs(1);
        opts.retries = 0;
        let e = RedisEngine::create_or_open_with(&master.url(), &pre, config.clone(), opts)
            .expect("open");
        let keys: Vec<Vec<u8>> = (0..10).map(|k| url(90 + i as u64, k)).collect();
        let t = std::time::Instant::now();
        match e.insert_batch(&keys) {
            Err(RedisError::NotReplicated {
                acked: 0,
                wanted: 1,
                answers,
                ..
            }) => assert_eq!(answers, vec![true; 10]),
            other => panic!("wait_timeout {wait:?}: expected NotReplicated, got {other:?}"),
        }
        assert!(
            t.elapsed() < wait + Duration::from_secs(1),
            "wait_timeout {wait:?}: took {:?}",
            t.elapsed()
        );
    }
}

/// The process id of a server (`INFO server`).
fn pid(server: &Server) -> String {
    server
        .cli(&["INFO", "server"])
        .lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .expect("process_id in INFO")
        .trim()
        .to_string()
}

/// A `WAIT` whose connection is lost (here killed while the replica, stopped,
/// had not acknowledged the batch) fails the call, naming `WAIT`; sent
/// again, the batch resumes from the answers Redis stored and reports every
/// key new once (not "present", which a run of the script would say for the
/// keys the first send inserted). The resend's `WAIT` covers the first
/// send's writes: the resent script writes its stored answer again, since
/// from Redis 7.2 a `WAIT` covers the stream only up to the connection's
/// last command that propagated a write (before 7.2, up to its last
/// command): the replica still has not acknowledged them, so it is
/// `NotReplicated`, not `Ok`. (On Redis 7.2.4, run with that
/// `redis-server` first in `PATH`, the resend returned `Ok` before the
/// answer was written again.)
#[test]
fn a_batch_sent_again_after_a_lost_wait_waits_for_its_writes() {
    if !require("a_batch_sent_again_after_a_lost_wait_waits_for_its_writes") {
        return;
    }
    let master = Server::start();
    let replica = master.replica();
    let clock = ManualClock::new(day(0));
    let config = two_days();
    let mut opts = RedisOptions::default().clock(clock);
    opts.wait_replicas = 1;
    opts.wait_timeout = Duration::from_secs(2);
    let e = RedisEngine::create_with(&master.url(), &prefix("lost-wait"), config, opts)
        .expect("create");
    assert!(e.insert(b"warm-up").expect("insert"));
    let replica_pid = pid(&replica);
    let signal = |sig: &str| {
        let ok = std::process::Command::new("kill")
            .args([sig, &replica_pid])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill {sig} {replica_pid}");
    };
    signal("-STOP");
    let killer = {
        let port = master.port;
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(500));
            cli(port, &["CLIENT", "KILL", "TYPE", "normal", "SKIPME", "yes"])
        })
    };
    let keys: Vec<Vec<u8>> = (0..300).map(|i| url(99, i)).collect();
    let first = e.insert_batch(&keys);
    killer.join().expect("killer");
    let err = first.expect_err("the WAIT's connection was killed");
    assert!(err.to_string().contains("WAIT"), "{err}");
    let again = e.insert_batch(&keys);
    signal("-CONT");
    match again {
        Err(RedisError::NotReplicated {
            acked: 0,
            wanted: 1,
            answers,
            ..
        }) => assert_eq!(answers, vec![true; keys.len()], "resumed answers"),
        other => panic!("the replica has not acknowledged the batch, got {other:?}"),
    }
}
