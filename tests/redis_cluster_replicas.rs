//! `RedisOptions::wait_replicas` on a Cluster of three masters with one
//! replica each: the `WAIT` goes to every master, the fewest confirmations
//! count, and every replica holds its master's keys after a batch; a manual
//! `CLUSTER FAILOVER` between batches is followed (`MOVED`, new
//! connections), loses none of the keys confirmed before it, and
//! check-and-insert stays exactly-once across it.
//!
//! Run: `cargo test --features redis --release --test redis_cluster_replicas`.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::Duration;

use redis_support::*;
use timebloom::redis::RedisEngine;
use timebloom::{Config, ManualClock};

/// Two daily windows of 10,000 keys at a rate low enough that no distinct
/// key of these tests is a false positive of another.
fn two_days() -> Config {
    Config {
        fpr: 1e-7,
        ..daily(2, 10_000)
    }
}

fn keys(set: u64, n: u64) -> Vec<Vec<u8>> {
    (0..n).map(|i| url(set, i)).collect()
}

/// The keys on the node on `port`, sorted.
fn keys_on(port: u16) -> Vec<String> {
    let mut k: Vec<String> = cli(port, &["--scan"]).lines().map(str::to_string).collect();
    k.sort();
    k
}

/// Every master's keys are on its replica, and every master holds some.
fn replicas_hold_their_masters_keys(cluster: &Cluster) {
    for m in cluster.masters() {
        let on_master = keys_on(m);
        assert!(!on_master.is_empty(), "master {m} holds no key");
        for r in cluster.replicas_of(m) {
            assert_eq!(keys_on(r), on_master, "replica {r} of master {m}");
        }
    }
}

/// The masters as `NotReplicated` names them: `host:port`, sorted, joined.
fn named(masters: &[u16]) -> String {
    let mut m: Vec<String> = masters.iter().map(|p| format!("127.0.0.1:{p}")).collect();
    m.sort();
    m.join(", ")
}

#[test]
fn every_master_waits_for_its_replica() {
    if !require("every_master_waits_for_its_replica") {
        return;
    }
    let cluster = Cluster::with_replicas(1);
    let clock = ManualClock::new(day(0));
    let pre = prefix("cluster-wait");
    // `WAIT` returns as soon as the replicas have the writes: a long
    // timeout costs nothing on success.
    let opts = waiting(&clock, 1, Duration::from_secs(30));
    let e = RedisEngine::create_with(&cluster.url(), &pre, two_days(), opts).expect("create");
    // The create's WAIT: the config hash and the directories are on the
    // replicas.
    replicas_hold_their_masters_keys(&cluster);

    let first = keys(1, 2000);
    assert!(e.insert_batch(&first).expect("insert").iter().all(|&n| n));
    replicas_hold_their_masters_keys(&cluster);
    assert!(e.insert_batch(&first).expect("again").iter().all(|&n| !n));

    // Two replicas a master, with one each: every master answers 1. Each
    // master's `WAIT` is waited out in full, one after the other.
    let opts = waiting(&clock, 2, Duration::from_secs(2));
    let e2 = RedisEngine::open_with(&cluster.url(), &pre, opts).expect("open");
    let more = keys(2, 300);
    let n = not_replicated(e2.insert_batch(&more));
    assert_eq!(n.acked, (1, 2));
    assert_eq!(n.answers, vec![true; 300]);
    assert_eq!(n.server, named(&cluster.masters()));
    // Applied all the same, and replicated to the one replica there is.
    assert!(e
        .contains_batch(&more)
        .expect("contains")
        .iter()
        .all(|&f| f));
    assert!(e.insert_batch(&keys(3, 10)).is_ok());
    replicas_hold_their_masters_keys(&cluster);
}

/// Inserts `batch` from every client at once, each in chunks of 200 in its
/// own order; returns how many clients were told each key is new.
fn race(clients: &[&RedisEngine], batch: &[Vec<u8>]) -> Vec<u32> {
    let per_client: Vec<Vec<u32>> = std::thread::scope(|s| {
        let hs: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(c, e)| {
                s.spawn(move || {
                    let mut got = vec![0u32; batch.len()];
                    let mut order: Vec<usize> = (0..batch.len()).collect();
                    if c % 2 == 1 {
                        order.reverse();
                    }
                    for chunk in order.chunks(200) {
                        let ks: Vec<Vec<u8>> = chunk.iter().map(|&i| batch[i].clone()).collect();
                        let new = e.insert_batch(&ks).expect("insert during the race");
                        for (&i, n) in chunk.iter().zip(new) {
                            got[i] += u32::from(n);
                        }
                    }
                    got
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("client")).collect()
    });
    (0..batch.len())
        .map(|i| per_client.iter().map(|g| g[i]).sum())
        .collect()
}

#[test]
fn a_manual_failover_between_batches_is_followed() {
    if !require("a_manual_failover_between_batches_is_followed") {
        return;
    }
    let cluster = Cluster::with_replicas(1);
    let clock = ManualClock::new(day(0));
    let pre = prefix("cluster-failover");
    let opts = waiting(&clock, 1, Duration::from_secs(30));
    let e =
        RedisEngine::create_with(&cluster.url(), &pre, two_days(), opts.clone()).expect("create");
    let e2 = RedisEngine::open_with(&cluster.url(), &pre, opts.clone()).expect("open");
    // A client that asks for two replicas, idle through both failovers:
    // its `NotReplicated` names the masters of the moment.
    let strict = waiting(&clock, 2, Duration::from_secs(2));
    let e_strict = RedisEngine::open_with(&cluster.url(), &pre, strict).expect("open");

    let confirmed = keys(10, 3000);
    assert!(e
        .insert_batch(&confirmed)
        .expect("insert")
        .iter()
        .all(|&n| n));

    // First the master of the config hash, then another one (shard
    // directories only).
    let config_master = cluster.master_for(&format!("{pre}:config"));
    let other = *cluster
        .masters()
        .iter()
        .find(|&&m| m != config_master)
        .expect("another master");
    let mut round = 0u64;
    for old in [config_master, other] {
        round += 1;
        let replica = cluster.replicas_of(old)[0];
        cluster.failover(replica);
        assert!(cluster.masters().contains(&replica));
        assert!(!cluster.masters().contains(&old));

        // Every key confirmed before is there, seen by both clients.
        for c in [&e, &e2] {
            let found = c.contains_batch(&confirmed).expect("contains");
            let missing = found.iter().filter(|&&f| !f).count();
            assert_eq!(missing, 0, "keys lost in the failover to {replica}");
        }
        assert!(e2
            .insert_batch(&confirmed)
            .expect("insert again")
            .iter()
            .all(|&n| !n));

        // Check-and-insert stays exactly-once: two clients opened before
        // the failover and one opened after race on new keys.
        let e3 = RedisEngine::open_with(&cluster.url(), &pre, opts.clone()).expect("open");
        let batch = keys(20 + round, 2000);
        let wins = race(&[&e, &e2, &e3], &batch);
        let wrong: Vec<(usize, u32)> = wins
            .iter()
            .enumerate()
            .filter(|(_, &w)| w != 1)
            .map(|(i, &w)| (i, w))
            .take(10)
            .collect();
        assert!(wrong.is_empty(), "keys not new exactly once: {wrong:?}");
        // Confirmed by the new masters' replicas (the old masters).
        replicas_hold_their_masters_keys(&cluster);

        if round < 2 {
            continue;
        }
        let n = not_replicated(e_strict.insert_batch(&keys(30 + round, 50)));
        assert_eq!(n.acked, (1, 2));
        assert_eq!(n.answers, vec![true; 50]);
        assert_eq!(n.server, named(&cluster.masters()));
    }
}

/// A failover of a master that a batch does not touch: the engine has one
/// shard, and the master failed over holds neither it nor the config
/// hash, so no command of the batch meets a `MOVED` and the client's view
/// of the slots stays the old one. The batch's `WAIT` still goes to the old
/// master, a replica now, which refuses it. That batch is `NotReplicated`
/// with its answers (the old master's writes, if any, cannot be confirmed:
/// no confirmation counted), naming the masters of now, and the next batch
/// goes to them: `Ok`, or `NotReplicated` with their confirmations.
#[test]
fn a_failover_of_a_master_no_batch_touches_is_followed() {
    if !require("a_failover_of_a_master_no_batch_touches_is_followed") {
        return;
    }
    let cluster = Cluster::with_replicas(1);
    let clock = ManualClock::new(day(0));
    let pre = prefix("cluster-untouched");
    let mut opts = waiting(&clock, 1, Duration::from_secs(30));
    opts.shards = 1;
    let e =
        RedisEngine::create_with(&cluster.url(), &pre, two_days(), opts.clone()).expect("create");
    let strict = waiting(&clock, 2, Duration::from_secs(2));
    let e_strict = RedisEngine::open_with(&cluster.url(), &pre, strict).expect("open");
    assert!(e
        .insert_batch(&keys(40, 100))
        .expect("insert")
        .iter()
        .all(|&n| n));
    let used = [
        cluster.master_for(&format!("{pre}:config")),
        cluster.master_for(&format!("{{{pre}:0}}")),
    ];
    let untouched = *cluster
        .masters()
        .iter()
        .find(|m| !used.contains(m))
        .expect("a master the engine does not use");
    cluster.failover(cluster.replicas_of(untouched)[0]);
    let now = named(&cluster.masters());

    let unconfirmed = |e: &RedisEngine, batch: &[Vec<u8>], want: (u32, u32)| {
        let n = not_replicated(e.insert_batch(batch));
        assert_eq!(n.acked, want);
        assert_eq!(n.answers, vec![true; batch.len()]);
        assert_eq!(n.server, now);
    };
    let more = keys(41, 100);
    unconfirmed(&e, &more, (0, 1));
    // The next batch goes to the masters of now.
    assert!(e
        .insert_batch(&keys(43, 100))
        .expect("next")
        .iter()
        .all(|&n| n));
    assert!(e.insert_batch(&more).expect("again").iter().all(|&n| !n));
    replicas_hold_their_masters_keys_of(&cluster, &used);

    unconfirmed(&e_strict, &keys(42, 50), (0, 2));
    unconfirmed(&e_strict, &keys(44, 50), (1, 2));
}

/// [`replicas_hold_their_masters_keys`] for the masters that served
/// `ports`' slots (the others may hold no key).
fn replicas_hold_their_masters_keys_of(cluster: &Cluster, ports: &[u16]) {
    for &m in ports {
        let on_master = keys_on(m);
        assert!(!on_master.is_empty(), "master {m} holds no key");
        for r in cluster.replicas_of(m) {
            assert_eq!(keys_on(r), on_master, "replica {r} of master {m}");
        }
    }
}
