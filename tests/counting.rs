//! Guards counting tiers: remove takes keys back without ever removing a key
//! that is still inserted, counters saturate and stick, the rate holds after
//! removals and growth, and concurrent updates lose nothing.

mod common;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use timebloom::{Error, ManualClock, Tier};

fn counting_engine(
    dir: &std::path::Path,
    tiers: &[Tier],
    per_day: u64,
    p: f64,
) -> (timebloom::Engine, ManualClock) {
    let clock = ManualClock::new(day(0));
    let tiers: Vec<Tier> = tiers.iter().map(|t| t.counting()).collect();
    (create(dir, config(&tiers, per_day, p), &clock), clock)
}

#[test]
fn random_inserts_and_removes_never_lose_an_inserted_key() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _clock) = counting_engine(dir.path(), &[Tier::daily(1)], 2_000, 0.01);
    let mut model: HashMap<u64, u32> = HashMap::new();
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for op in 0..100_000u32 {
        let k = next() % 5_000;
        let key = url(5, k);
        let count = model.entry(k).or_insert(0);
        if next() % 3 == 0 && *count > 0 {
            // Only keys that were inserted are removed (the documented rule).
            assert!(
                e.remove(&key).unwrap(),
                "op {op}: inserted key {k} not found by remove"
            );
            *count -= 1;
        } else {
            e.insert(&key).unwrap();
            *count += 1;
        }
        if op % 1000 == 0 {
            for (&k, &c) in &model {
                if c > 0 {
                    assert!(
                        e.contains(&url(5, k)).unwrap(),
                        "op {op}: key {k} (count {c}) lost"
                    );
                }
            }
        }
    }
    let present = model.values().filter(|&&c| c > 0).count();
    for (&k, &c) in &model {
        if c > 0 {
            assert!(e.contains(&url(5, k)).unwrap(), "key {k} (count {c}) lost");
        }
    }
    assert!(present > 1000, "the mix left only {present} keys");
}

#[test]
fn saturated_counters_stick_and_no_other_key_disappears() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _clock) = counting_engine(dir.path(), &[Tier::daily(1)], 1_000, 0.01);
    for i in 0..500 {
        e.insert(&url(6, i)).unwrap();
    }
    let hot = b"https://example.com/hot";
    for _ in 0..20 {
        e.insert(hot).unwrap();
    }
    let saturated = e.stats().unwrap().tiers[0].segments[0].saturated;
    assert!(saturated > 0, "20 inserts saturated no counter");
    for _ in 0..20 {
        e.remove(hot).unwrap();
    }
    assert!(e.contains(hot).unwrap(), "a saturated key stays present");
    for i in 0..500 {
        assert!(e.contains(&url(6, i)).unwrap(), "key {i} disappeared");
    }
    // A key inserted twice survives one remove.
    e.insert(b"twice").unwrap();
    e.insert(b"twice").unwrap();
    e.remove(b"twice").unwrap();
    assert!(e.contains(b"twice").unwrap());
    e.remove(b"twice").unwrap();
    assert!(!e.contains(b"twice").unwrap());
}

#[test]
fn rate_holds_after_removing_half_and_under_growth() {
    for load in [1u64, 4] {
        let dir = tempfile::tempdir().unwrap();
        let planned = 50_000;
        let p = 0.01;
        let (e, _clock) = counting_engine(dir.path(), &[Tier::daily(1)], planned, p);
        let n = planned * load;
        let keys: Vec<Vec<u8>> = (0..n).map(|i| url(8, i)).collect();
        for chunk in keys.chunks(4096) {
            e.insert_batch(chunk).unwrap();
        }
        for k in keys.iter().step_by(2) {
            assert!(e.remove(k).unwrap());
        }
        for k in keys.iter().skip(1).step_by(2) {
            assert!(
                e.contains(k).unwrap(),
                "a kept key was lost by removing others"
            );
        }
        let fp = (0..1_000_000u64)
            .filter(|&i| e.contains(&url(9, i)).unwrap())
            .count();
        let rate = fp as f64 / 1e6;
        println!("counting, load {load}x, half removed: measured {rate:.5} (configured {p})");
        assert!(rate <= p, "measured {rate} > configured {p}");
        if load == 4 {
            assert!(e.stats().unwrap().tiers[0].segments[0].subfilters >= 2);
        }
    }
}

#[test]
fn removes_reach_every_window_and_survive_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let (e, clock) = counting_engine(dir.path(), &[Tier::daily(3), Tier::weekly(2)], 1_000, 0.01);
    e.insert(b"k").unwrap();
    clock.set(day(1));
    e.insert(b"k").unwrap(); // day 1's window; day 0's is sealed now
                             // Days 0 and 1 are one ISO week: the weekly window counted "k" twice,
                             // each daily window once. A remove undoes one insert where it was
                             // made: `remove` the one made today (day 1's window and one count
                             // of the week), `remove_at` the one made on day 0 (the sealed day 0
                             // window is reopened for it, and the week's last count).
    assert!(e.remove(b"k").unwrap());
    assert!(!e.contains_within(b"k", Duration::from_secs(3600)).unwrap());
    assert!(e.contains(b"k").unwrap());
    assert!(
        !e.remove(b"k").unwrap(),
        "today's windows hold nothing more to take back"
    );
    assert!(
        e.contains(b"k").unwrap(),
        "a refused remove changes nothing"
    );
    assert!(e.remove_at(b"k", day(0)).unwrap());
    assert!(
        !e.contains(b"k").unwrap(),
        "two removes take back two inserts"
    );
    e.flush().unwrap();
    e.verify().unwrap();
    drop(e);
    let e = open(dir.path(), &clock);
    assert!(!e.contains(b"k").unwrap());
    assert!(!e.remove(b"k").unwrap(), "nothing left to remove");
}

#[test]
fn remove_on_bloom_tiers_is_an_error_and_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(
        dir.path(),
        config(&[Tier::daily(3).counting(), Tier::weekly(2)], 100, 0.01),
        &clock,
    );
    e.insert(b"k").unwrap();
    assert!(!e.supports_remove());
    let err = e.remove(b"k").unwrap_err();
    assert!(matches!(err, Error::RemoveUnsupported { .. }), "{err}");
    assert!(err.to_string().contains("2w"), "{err}");
    assert!(e.contains(b"k").unwrap());
}

#[test]
fn concurrent_inserts_and_removes_of_disjoint_keys_keep_the_rest() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _clock) = counting_engine(dir.path(), &[Tier::daily(1)], 100_000, 0.01);
    let e = Arc::new(e);
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let e = Arc::clone(&e);
            std::thread::spawn(move || {
                for i in 0..10_000 {
                    e.insert(&url(10 + t, i)).unwrap();
                    if i % 2 == 1 {
                        assert!(e.remove(&url(10 + t, i - 1)).unwrap());
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    for t in 0..8 {
        for i in (1..10_000).step_by(2) {
            assert!(
                e.contains(&url(10 + t, i)).unwrap(),
                "thread {t} key {i} lost"
            );
        }
    }
}
