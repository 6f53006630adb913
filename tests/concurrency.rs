//! Guards check-and-insert under concurrency: of 8 threads inserting the
//! same keys, exactly one is told each key is new.

mod common;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use timebloom::{Engine, ManualClock, Tier};

type Wins = Arc<Vec<AtomicU8>>;

/// An engine at 0.1% shared by threads, and a win counter per key.
fn setup(tiers: &[Tier], per_day: u64, keys: u64) -> (tempfile::TempDir, Arc<Engine>, Wins) {
    setup_with(config(tiers, per_day, 0.001), keys)
}

/// [`setup`] with a whole configuration.
fn setup_with(cfg: timebloom::Config, keys: u64) -> (tempfile::TempDir, Arc<Engine>, Wins) {
    let dir = tempfile::tempdir().unwrap();
    let e = Arc::new(create(dir.path(), cfg, &ManualClock::new(day(0))));
    let wins = Arc::new((0..keys).map(|_| AtomicU8::new(0)).collect());
    (dir, e, wins)
}

/// No key was reported new twice. A key can be a false positive of earlier
/// keys (then nobody sees it new); at 0.1% that is rare.
fn assert_one_winner_each(wins: &[AtomicU8]) {
    let mut zero = 0;
    for (i, w) in wins.iter().enumerate() {
        match w.load(Ordering::Relaxed) {
            1 => {}
            0 => zero += 1,
            n => panic!("key {i} was reported new {n} times"),
        }
    }
    assert!(zero < wins.len() / 500, "{zero} keys never reported new");
}

#[test]
fn exactly_one_thread_sees_each_new_key() {
    const KEYS: u64 = 100_000;
    let (_dir, e, wins) = setup(&[Tier::daily(3), Tier::weekly(2)], 50_000, KEYS);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (e, wins) = (Arc::clone(&e), Arc::clone(&wins));
            std::thread::spawn(move || {
                // Half the threads go forwards, half backwards, some in batches.
                for j in 0..KEYS {
                    let i = if t % 2 == 0 { j } else { KEYS - 1 - j };
                    let new = if t % 4 < 2 {
                        e.insert(&url(7, i)).unwrap()
                    } else {
                        e.insert_batch(&[url(7, i)]).unwrap()[0]
                    };
                    if new {
                        wins[i as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_one_winner_each(&wins);
    for i in 0..KEYS {
        assert!(e.contains(&url(7, i)).unwrap());
    }
}

/// Batches of many keys, with a key repeated inside a batch, racing single
/// inserts: still exactly one winner per key, and no key lost (a lost bit
/// update between two writers would show as a key not found).
#[test]
fn batches_and_single_inserts_agree_on_one_winner() {
    let cfg = config(&[Tier::daily(2), Tier::weekly(2)], 40_000, 0.001);
    singles_and_batches_race(cfg, 60_000);
}

/// The same race under `always`, where a key found present waits for the
/// writer still in flight (tests/seen_is_durable.rs): still one winner
/// each, no key lost, and no deadlock between that wait and the writers'
/// stripes. Fewer keys: every call that wrote waits for an fsync.
#[test]
fn under_always_batches_and_single_inserts_agree_on_one_winner() {
    let cfg = timebloom::Config {
        sync: timebloom::SyncPolicy::Always,
        ..config(&[Tier::daily(2), Tier::weekly(2)], 40_000, 0.001)
    };
    singles_and_batches_race(cfg, 4_000);
}

/// Two threads inserting `n` keys one by one and four in batches (each
/// key twice in a row), half of them forwards, half backwards; then every
/// key has one winner and is found, also within horizons.
fn singles_and_batches_race(cfg: timebloom::Config, n: u64) {
    let (_dir, e, wins) = setup_with(cfg, n);
    let threads: Vec<_> = (0..6u64)
        .map(|t| {
            let (e, wins) = (Arc::clone(&e), Arc::clone(&wins));
            std::thread::spawn(move || {
                let order: Vec<u64> = if t % 2 == 0 {
                    (0..n).collect()
                } else {
                    (0..n).rev().collect()
                };
                if t < 2 {
                    for i in order {
                        if e.insert(&url(9, i)).unwrap() {
                            wins[i as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    return;
                }
                // Batches of 37 keys (not a multiple of the engine's group),
                // each key twice in a row.
                for chunk in order.chunks(37) {
                    let idx: Vec<u64> = chunk.iter().flat_map(|&i| [i, i]).collect();
                    let keys: Vec<Vec<u8>> = idx.iter().map(|&i| url(9, i)).collect();
                    let news = e.insert_batch(&keys).unwrap();
                    assert_eq!(news.len(), keys.len());
                    for (&i, new) in idx.iter().zip(news) {
                        if new {
                            wins[i as usize].fetch_add(1, Ordering::Relaxed);
                        }
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    assert_one_winner_each(&wins);
    let keys: Vec<Vec<u8>> = (0..n).map(|i| url(9, i)).collect();
    assert!(e.contains_batch(&keys).unwrap().into_iter().all(|p| p));
    for w in [Duration::from_secs(3600), Duration::from_secs(86_400 * 7)] {
        for k in keys.iter().step_by(7) {
            assert!(e.contains_within(k, w).unwrap());
        }
    }
}

/// Writers of a window whose blocks each belong to one writer stripe set
/// bits with plain stores (docs/design.md, "A Bloom block has one writer
/// stripe"): four threads inserting their own keys into one such window,
/// the only one (no other window could answer for a lost bit), lose no
/// key. The window is the smallest size that qualifies (4,096 blocks), so
/// writers meet in the same blocks often.
#[test]
fn writers_of_a_stripe_aligned_window_lose_no_key() {
    const PER_THREAD: u64 = 31_000;
    let (_dir, e, _) = setup(&[Tier::daily(1)], 4 * PER_THREAD, 0);
    let stats = e.stats().unwrap();
    let blocks = stats.tiers[0].segments[0].cells / 512;
    assert!(
        (4096..8192).contains(&blocks) && blocks % 64 == 0,
        "{blocks} blocks"
    );
    std::thread::scope(|s| {
        for t in 0..4u64 {
            let e = &e;
            s.spawn(move || {
                let keys: Vec<Vec<u8>> = (0..PER_THREAD).map(|i| url(20 + t, i)).collect();
                let mut h = e.handle();
                for (j, chunk) in keys.chunks(100).enumerate() {
                    if j % 2 == 0 {
                        h.insert_batch(chunk).unwrap();
                    } else {
                        for k in chunk {
                            h.insert(k).unwrap();
                        }
                    }
                }
            });
        }
    });
    let missing = (0..4u64)
        .flat_map(|t| (0..PER_THREAD).map(move |i| url(20 + t, i)))
        .filter(|k| !e.contains(k).unwrap())
        .count();
    assert_eq!(missing, 0, "keys lost to concurrent writes");
    e.verify().unwrap();
}
