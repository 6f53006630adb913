//! A three-master Cluster grown to four under running writers: a fourth
//! master joins (`redis-cli --cluster add-node`) and the slots of every
//! shard of an engine, and of its config hash, move to it by hand
//! (`CLUSTER SETSLOT ... IMPORTING` / `MIGRATING`, `MIGRATE` key by key of
//! strings of a few MB, `CLUSTER SETSLOT ... NODE`), while three clients
//! insert the same keys in batches and check their previous batch.
//!
//! During a slot's migration every script of its shard meets `ASK` (a key
//! it names is on the target, or not made yet) and then `TRYAGAIN` on the
//! target (some of its keys are still on the source): the script cannot
//! run until the slot has moved, and the client retries. Checked: every
//! call returns `Ok` (or a `RedisError::Redis` naming command, key and
//! server, after which the batch is sent again), every key is told new
//! exactly once across the three clients, every acknowledged key is
//! present afterwards, from a fresh client too, `stats` agree, and new
//! calls go to the new master without a `MOVED`.
//!
//! Run: `CI=1 cargo test --release --all-features --test redis_reshard`.
#![cfg(feature = "redis")]

mod redis_support;

use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock};

/// One daily tier of two windows, 10,000,000 keys a day at 1e-4 over
/// four shards: each shard's sub-filter string is about 6 MB, so
/// `MIGRATE` takes a while.
fn big() -> Config {
    Config {
        fpr: 1e-4,
        ..daily(2, 10_000_000)
    }
}

/// A master started empty and joined to `cluster` (`--cluster add-node`),
/// returned once every node knows it and it knows the slots.
fn add_master(cluster: &Cluster) -> Server {
    let s = Server::cluster_node();
    let out = Command::new("redis-cli")
        .arg("--cluster")
        .arg("add-node")
        .arg(format!("127.0.0.1:{}", s.port))
        .arg(format!("127.0.0.1:{}", cluster.nodes[0].port))
        .output()
        .expect("run redis-cli --cluster add-node");
    assert!(
        out.status.success(),
        "redis-cli --cluster add-node failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let t = Instant::now();
    let ports: Vec<u16> = cluster
        .nodes
        .iter()
        .map(|n| n.port)
        .chain([s.port])
        .collect();
    for &p in &ports {
        // Known to all, and the new node knows the slots (else it answers
        // `CLUSTERDOWN`, to a `MIGRATE` too).
        while !(cli(p, &["CLUSTER", "INFO"]).contains("cluster_known_nodes:4")
            && cli(p, &["CLUSTER", "INFO"]).contains("cluster_state:ok"))
        {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "node {p} did not learn the new master"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    s
}

fn node_id(port: u16) -> String {
    cli(port, &["CLUSTER", "MYID"]).trim().to_string()
}

fn slot_of(port: u16, key: &str) -> u16 {
    cli(port, &["CLUSTER", "KEYSLOT", key])
        .trim()
        .parse()
        .expect("a slot")
}

/// What moving one slot took.
struct Moved {
    keys: usize,
    bytes: u64,
    took: Duration,
}

/// `slot` marked as moving from the master on `from` to the one on `to`
/// (`IMPORTING` on the target, then `MIGRATING` on the source), as
/// `redis-cli --cluster reshard` begins.
fn begin_move(slot: u16, from: u16, to: u16) {
    let slot_s = slot.to_string();
    ok(
        to,
        &["CLUSTER", "SETSLOT", &slot_s, "IMPORTING", &node_id(from)],
    );
    ok(
        from,
        &["CLUSTER", "SETSLOT", &slot_s, "MIGRATING", &node_id(to)],
    );
}

/// `key` moved from `from` to `to` (`MIGRATE`); false when `from` no
/// longer had it.
fn migrate(from: u16, to: u16, key: &str) -> bool {
    let out = cli(
        from,
        &["MIGRATE", "127.0.0.1", &to.to_string(), key, "0", "10000"],
    );
    match out.trim() {
        "OK" => true,
        "NOKEY" => false,
        _ => panic!("MIGRATE {key}: {out}"),
    }
}

/// A command on `port` that must answer `OK`.
fn ok(port: u16, args: &[&str]) {
    let out = cli(port, args);
    assert_eq!(out.trim(), "OK", "{args:?} on {port}");
}

/// Moves `slot` from the master on `from` to the one on `to` as
/// `redis-cli --cluster reshard` does, one key per `MIGRATE`, with
/// `pause` after each key (a busier network, larger keys), then gives
/// the slot to `to` on every node.
fn move_slot(slot: u16, from: u16, to: u16, all: &[u16], pause: Duration) -> Moved {
    let t = Instant::now();
    let dst = node_id(to);
    let slot_s = slot.to_string();
    begin_move(slot, from, to);
    let (mut keys, mut bytes) = (0, 0);
    loop {
        let batch = cli(from, &["CLUSTER", "GETKEYSINSLOT", &slot_s, "10"]);
        let batch: Vec<&str> = batch
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        if batch.is_empty() {
            break;
        }
        for k in batch {
            bytes += cli(from, &["MEMORY", "USAGE", k])
                .trim()
                .parse::<u64>()
                .unwrap_or(0);
            migrate(from, to, k);
            keys += 1;
            std::thread::sleep(pause);
        }
    }
    // The target first, then the source, then the others (as redis-cli).
    ok(to, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &dst]);
    ok(from, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &dst]);
    for &p in all.iter().filter(|&&p| p != to && p != from) {
        ok(p, &["CLUSTER", "SETSLOT", &slot_s, "NODE", &dst]);
    }
    Moved {
        keys,
        bytes,
        took: t.elapsed(),
    }
}

/// An engine of `shards` shards made on a fresh Cluster, with quick
/// retries (3, 50 ms doubling to 200 ms), that holds `n` keys of `set`;
/// then a fourth master joined, empty.
struct Joined {
    cluster: Cluster,
    new: Server,
    /// The ports of the first three masters, and of all four.
    old: Vec<u16>,
    all: Vec<u16>,
    pre: String,
    opts: RedisOptions,
    e: RedisEngine,
    first: Vec<Vec<u8>>,
}

fn joined(name: &str, shards: u32, n: u64, set: u64) -> Joined {
    let cluster = Cluster::start();
    let pre = prefix(name);
    let mut opts = RedisOptions::default().clock(ManualClock::new(day(0)));
    opts.shards = shards;
    opts.retries = 3;
    opts.backoff = Duration::from_millis(50);
    opts.max_backoff = Duration::from_millis(200);
    let e = RedisEngine::create_with(&cluster.url(), &pre, daily(2, 10_000), opts.clone())
        .expect("create");
    let first: Vec<Vec<u8>> = (0..n).map(|i| url(set, i)).collect();
    assert!(e.insert_batch(&first).expect("insert").iter().all(|&n| n));
    let new = add_master(&cluster);
    let old: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    let all: Vec<u16> = old.iter().copied().chain([new.port]).collect();
    Joined {
        cluster,
        new,
        old,
        all,
        pre,
        opts,
        e,
        first,
    }
}

/// A count of `INFO errorstats` (`errorstat_<name>:count=N`) on `port`.
fn errors(port: u16, name: &str) -> u64 {
    let info = cli(port, &["INFO", "errorstats"]);
    info.lines()
        .find_map(|l| l.trim().strip_prefix(&format!("errorstat_{name}:count=")))
        .map_or(0, |n| {
            n.split(',').next().unwrap_or("0").parse().unwrap_or(0)
        })
}

/// Calls of `EVALSHA` and `EVAL` on `port` (`INFO commandstats`), run
/// and refused (`rejected_calls`: a `MOVED`, `ASK` or `TRYAGAIN` counts
/// there).
fn script_calls(port: u16) -> u64 {
    let info = cli(port, &["INFO", "commandstats"]);
    let field = |stats: &str, name: &str| -> u64 {
        stats
            .split(',')
            .find_map(|f| f.strip_prefix(name))
            .map_or(0, |n| n.parse().unwrap_or(0))
    };
    ["cmdstat_evalsha:", "cmdstat_eval:"]
        .iter()
        .filter_map(|p| info.lines().find_map(|l| l.trim().strip_prefix(p)))
        .map(|r| field(r, "calls=") + field(r, "rejected_calls="))
        .sum()
}

/// What one writer saw.
#[derive(Default)]
struct Seen {
    /// How many times this writer was told each key is new.
    new: Vec<u32>,
    /// The keys of every batch this writer got `Ok` for.
    acked: Vec<usize>,
    /// The longest call.
    longest: Duration,
    /// Errors (all `RedisError::Redis`, checked), then the batch was sent
    /// again.
    errors: Vec<String>,
    calls: u64,
}

/// Inserts `keys` in batches of `batch` (writer `w` goes through them in
/// its own order) until they are all done and `stop` is set, checking
/// after each batch that the previous one is present. An error is
/// recorded and the same batch sent again.
fn writer(e: &RedisEngine, w: usize, keys: &[Vec<u8>], batch: usize, stop: &AtomicBool) -> Seen {
    let mut seen = Seen {
        new: vec![0; keys.len()],
        ..Seen::default()
    };
    let mut order: Vec<usize> = (0..keys.len()).collect();
    // Different orders: writers race on every key, in different batches.
    order.rotate_left(w * keys.len() / 3);
    if w % 2 == 1 {
        order.reverse();
    }
    let mut prev: Vec<usize> = Vec::new();
    for chunk in order.chunks(batch) {
        // Paced while the migration runs: every shard's move meets calls
        // of every writer.
        if !stop.load(Ordering::Relaxed) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let ks: Vec<&Vec<u8>> = chunk.iter().map(|&i| &keys[i]).collect();
        let mut tries = 0;
        let answers = loop {
            let t = Instant::now();
            let r = e.insert_batch(&ks);
            seen.longest = seen.longest.max(t.elapsed());
            seen.calls += 1;
            match r {
                Ok(a) => break a,
                Err(err) => {
                    assert!(
                        matches!(&err, RedisError::Redis { command, key, server, .. }
                            if !command.is_empty() && !key.is_empty() && !server.is_empty()),
                        "writer {w}: not a named Redis error: {err:?}"
                    );
                    seen.errors.push(format!("{:.1?}: {err}", t.elapsed()));
                    tries += 1;
                    assert!(
                        tries < 10,
                        "writer {w}: 10 errors on one batch: {:?}",
                        seen.errors
                    );
                }
            }
        };
        for (&i, new) in chunk.iter().zip(answers) {
            seen.new[i] += u32::from(new);
        }
        seen.acked.extend_from_slice(chunk);
        if !prev.is_empty() {
            let pk: Vec<&Vec<u8>> = prev.iter().map(|&i| &keys[i]).collect();
            let t = Instant::now();
            let found = e.contains_batch(&pk);
            seen.longest = seen.longest.max(t.elapsed());
            seen.calls += 1;
            match found {
                Ok(f) => assert!(
                    f.iter().all(|&f| f),
                    "writer {w}: an acknowledged key reads absent"
                ),
                Err(err) => seen.errors.push(format!("contains: {err}")),
            }
        }
        prev = chunk.to_vec();
    }
    seen
}

#[test]
fn slots_moved_to_a_new_master_under_writers() {
    if !require("slots_moved_to_a_new_master_under_writers") {
        return;
    }
    let cluster = Cluster::start();
    let clock = ManualClock::new(day(0));
    let pre = prefix("reshard");
    let mut opts = RedisOptions::default().clock(clock.clone());
    opts.shards = 4;
    let e = RedisEngine::create_with(&cluster.url(), &pre, big(), opts.clone()).expect("create");
    // Every shard's strings made, before the migration: the slots carry
    // a few MB each.
    let before: Vec<Vec<u8>> = (0..2000).map(|i| url(1, i)).collect();
    assert!(e.insert_batch(&before).expect("insert").iter().all(|&n| n));

    let new = add_master(&cluster);
    let old: Vec<u16> = cluster.nodes.iter().map(|n| n.port).collect();
    let all: Vec<u16> = old.iter().copied().chain([new.port]).collect();
    let mut slots: Vec<u16> = (0..4)
        .map(|s| slot_of(old[0], &format!("{{{pre}:{s}}}")))
        .collect();
    slots.push(slot_of(old[0], &format!("{pre}:config")));
    slots.sort_unstable();
    slots.dedup();

    let keys: Vec<Vec<u8>> = (0..12_000).map(|i| url(2, i)).collect();
    let stop = AtomicBool::new(false);
    let clients: Vec<RedisEngine> = (0..3)
        .map(|_| RedisEngine::open_with(&cluster.url(), &pre, opts.clone()).expect("open"))
        .collect();
    let (seen, moves) = std::thread::scope(|s| {
        let hs: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(w, c)| {
                let (keys, stop) = (&keys, &stop);
                s.spawn(move || writer(c, w, keys, 100, stop))
            })
            .collect();
        // Let the writers start, then move every slot of the engine.
        std::thread::sleep(Duration::from_millis(300));
        let mut moves = Vec::new();
        for &slot in &slots {
            let owner = owner_of(old[0], slot);
            moves.push((
                slot,
                move_slot(slot, owner, new.port, &all, Duration::from_millis(20)),
            ));
        }
        stop.store(true, Ordering::Relaxed);
        let seen: Vec<Seen> = hs.into_iter().map(|h| h.join().expect("writer")).collect();
        (seen, moves)
    });

    for (slot, m) in &moves {
        eprintln!(
            "slot {slot}: {} keys, {:.1} MB, moved in {:.2?}",
            m.keys,
            m.bytes as f64 / 1e6,
            m.took
        );
    }
    for (w, s) in seen.iter().enumerate() {
        eprintln!(
            "writer {w}: {} calls, longest {:.2?}, {} errors {:?}",
            s.calls,
            s.longest,
            s.errors.len(),
            s.errors
        );
    }
    for p in &all {
        eprintln!(
            "node {p}: ASK {} TRYAGAIN {} MOVED {}, scripts {}",
            errors(*p, "ASK"),
            errors(*p, "TRYAGAIN"),
            errors(*p, "MOVED"),
            script_calls(*p)
        );
    }

    // 1. Exactly one writer was told each key is new.
    let wrong: Vec<(usize, u32)> = (0..keys.len())
        .map(|i| (i, seen.iter().map(|s| s.new[i]).sum::<u32>()))
        .filter(|&(_, n)| n != 1)
        .take(10)
        .collect();
    assert!(wrong.is_empty(), "keys not new exactly once: {wrong:?}");
    for s in &seen {
        assert_eq!(s.acked.len(), keys.len());
    }
    // Every acknowledged key is present, for a client opened now too.
    let fresh = RedisEngine::open_with(&cluster.url(), &pre, opts.clone()).expect("open after");
    for c in clients.iter().chain([&fresh, &e]) {
        let f = c.contains_batch(&keys).expect("contains after");
        assert_eq!(
            f.iter().filter(|&&f| !f).count(),
            0,
            "acknowledged keys lost"
        );
        let f = c.contains_batch(&before).expect("contains after");
        assert_eq!(f.iter().filter(|&&f| !f).count(), 0, "keys of before lost");
    }
    assert!(fresh
        .insert_batch(&keys)
        .expect("again")
        .iter()
        .all(|&n| !n));

    // 3. Every key of the prefix is on the new master; stats agree.
    for &p in &old {
        let left = cli(p, &["--scan", "--pattern", &format!("{pre}*")]);
        assert!(left.trim().is_empty(), "keys left on {p}: {left}");
    }
    let (a, b) = (
        e.stats().expect("stats"),
        fresh.stats().expect("stats fresh"),
    );
    let items = |s: &timebloom::Stats| -> u64 {
        s.tiers[0].segments.iter().map(|g| g.estimated_items).sum()
    };
    let occupied = |s: &timebloom::Stats| -> Vec<u64> {
        s.tiers[0].segments.iter().map(|g| g.occupied).collect()
    };
    assert_eq!(occupied(&a), occupied(&b));
    assert_eq!(a.bytes, b.bytes);
    let want = (keys.len() + before.len()) as f64;
    let got = items(&b) as f64;
    assert!(
        (got - want).abs() < want * 0.05,
        "stats: {got} keys, inserted {want}"
    );

    // 4. New calls go to the new master, none to the old ones.
    let old_before: Vec<u64> = old.iter().map(|&p| script_calls(p)).collect();
    let calls_before = script_calls(new.port);
    let t = Instant::now();
    for (i, c) in clients.iter().enumerate() {
        let more: Vec<Vec<u8>> = (0..500).map(|j| url(3 + i as u64, j)).collect();
        assert!(c.insert_batch(&more).expect("after").iter().all(|&n| n));
    }
    assert!(
        t.elapsed() < Duration::from_secs(2),
        "calls after: {:.2?}",
        t.elapsed()
    );
    let old_after: Vec<u64> = old.iter().map(|&p| script_calls(p)).collect();
    assert_eq!(old_before, old_after, "scripts sent to the old masters");
    assert!(script_calls(new.port) > calls_before);

    // 2. No call stalled past the retries' budget.
    let longest = seen.iter().map(|s| s.longest).max().unwrap_or_default();
    let errs: usize = seen.iter().map(|s| s.errors.len()).sum();
    assert_eq!(errs, 0, "errors during the migration");
    assert!(
        longest < Duration::from_secs(20),
        "longest call {longest:.2?}"
    );
}

/// A slot left half-migrated (`MIGRATING` on its master, `IMPORTING` on
/// the new one, some of its keys moved): no script of its shard can run
/// (`TRYAGAIN`), so a batch fails once its `retries` are used, after
/// about the documented backoff (50 ms doubling, at most `max_backoff`
/// each), naming the command, the key and the server. Sent again once
/// the slot has moved, it answers every key new once. (The Cluster
/// client's own retries, with their 1.28 s minimum wait, would multiply
/// the stall: with the default 8 retries, about 100 s.)
#[test]
fn a_stuck_migration_fails_after_the_documented_retries() {
    if !require("a_stuck_migration_fails_after_the_documented_retries") {
        return;
    }
    let Joined {
        cluster,
        new,
        old,
        all,
        pre,
        opts,
        e,
        first,
    } = joined("stuck", 1, 100, 5);
    let slot = slot_of(old[0], &format!("{{{pre}:0}}"));
    let from = owner_of(old[0], slot);
    begin_move(slot, from, new.port);
    // The shard's directory moves; its strings stay.
    let dir = format!("{pre}:{{{pre}:0}}:dir:d");
    assert!(migrate(from, new.port, &dir), "MIGRATE {dir}");

    let more: Vec<Vec<u8>> = (0..100).map(|i| url(6, i)).collect();
    let t = Instant::now();
    let r = e.insert_batch(&more);
    let took = t.elapsed();
    eprintln!("stuck migration: {took:.2?}: {r:?}");
    match &r {
        Err(RedisError::Redis {
            command,
            key,
            server,
            ..
        }) => {
            assert!(command.contains("EVALSHA"), "command {command}");
            assert!(key.contains(&format!("{{{pre}:0}}")), "key {key}");
            assert!(server.contains("127.0.0.1:"), "server {server}");
        }
        other => panic!("expected a Redis error, got {other:?}"),
    }
    // 50 + 100 + 200 ms of backoff, and round trips.
    assert!(took < Duration::from_secs(2), "failed after {took:.2?}");

    // The slot moves; the same batch, sent again, goes through.
    move_slot(slot, from, new.port, &all, Duration::ZERO);
    assert!(e.insert_batch(&more).expect("again").iter().all(|&n| n));
    let fresh = RedisEngine::open_with(&cluster.url(), &pre, opts).expect("open");
    for ks in [&first, &more] {
        assert!(fresh
            .contains_batch(ks)
            .expect("contains")
            .iter()
            .all(|&f| f));
    }
}

/// The config hash moved to the new master while its slot is still
/// migrating (other keys of the slot, of other applications, can take
/// long to follow): the source answers `ASK` for it, and the client must
/// ask the target (`ASKING`) rather than send it to the source again.
/// Batches, lookups, `stats` and a new client's open all work meanwhile.
#[test]
fn a_config_hash_moved_ahead_of_its_slot_is_followed() {
    if !require("a_config_hash_moved_ahead_of_its_slot_is_followed") {
        return;
    }
    let Joined {
        cluster,
        new,
        old,
        all,
        pre,
        opts,
        e,
        first,
    } = joined("ask", 4, 500, 7);
    let config = format!("{pre}:config");
    let slot = slot_of(old[0], &config);
    let from = owner_of(old[0], slot);
    // Another key of the slot (its hash tag is the config hash's name),
    // which stays on the source for now.
    let other = format!("{{{config}}}:other-app");
    assert_eq!(slot_of(old[0], &other), slot);
    assert_eq!(cli(from, &["SET", &other, "x"]).trim(), "OK");
    begin_move(slot, from, new.port);
    assert!(migrate(from, new.port, &config), "MIGRATE {config}");

    let more: Vec<Vec<u8>> = (0..500).map(|i| url(8, i)).collect();
    let r = e.insert_batch(&more);
    assert!(r
        .expect("insert while the config hash's slot migrates")
        .iter()
        .all(|&n| n));
    let fresh = RedisEngine::open_with(&cluster.url(), &pre, opts.clone())
        .expect("open while the config hash's slot migrates");
    for c in [&e, &fresh] {
        for ks in [&first, &more] {
            assert!(c.contains_batch(ks).expect("contains").iter().all(|&f| f));
        }
        c.stats()
            .expect("stats while the config hash's slot migrates");
    }

    move_slot(slot, from, new.port, &all, Duration::ZERO);
    assert!(fresh
        .insert_batch(&more)
        .expect("after")
        .iter()
        .all(|&n| !n));
}
