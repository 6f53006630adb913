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

/// The ISO week (`span` 7) or day (`span` 1) index of `t`, in seconds.
fn window_of(span: u64, t: u64) -> u64 {
    match span {
        7 => (t / 86_400 + 3) / 7,
        _ => t / 86_400,
    }
}

/// Random inserts, backfills, removes of inserts still outstanding (now, or
/// at their instant), clock steps, reopens and power-loss copies (the
/// directory copied while open, its boot id deleted, so the open replays
/// the log onto the shadow copies) against an exact list of the inserts
/// not taken back: every remove of one of them succeeds, and every key one
/// of them holds in a live window is present.
#[test]
fn removes_of_outstanding_inserts_match_an_exact_model() {
    const KEYS: u64 = 40;
    let tiers = [(1u64, 10u64), (7, 2)]; // (span in days, retention)
    for seed in 1..=6u64 {
        let dir = tempfile::tempdir().unwrap();
        let base = tempfile::tempdir().unwrap();
        let t0 = 20_000 * 86_400;
        let clock = ManualClock::new(at(t0));
        let cfg = timebloom::Config {
            sync: timebloom::SyncPolicy::Always,
            ..config(
                &[Tier::daily(10).counting(), Tier::weekly(2).counting()],
                4,
                0.01,
            )
        };
        let mut cur = dir.path().to_path_buf();
        let mut e = create(&cur, cfg, &clock);
        let mut now = t0;
        let mut rng = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        let mut next = move || {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            rng
        };
        let live = |ti: usize, t: u64, now: u64| {
            let (span, keep) = tiers[ti];
            window_of(span, t) + keep > window_of(span, now)
        };
        let any_live = |t: u64, now: u64| (0..2).any(|ti| live(ti, t, now));
        let same = |t: u64, now: u64| {
            tiers
                .iter()
                .all(|&(span, _)| window_of(span, t) == window_of(span, now))
        };
        let key = |k: u64| format!("k{k}").into_bytes();
        let mut outstanding: Vec<(u64, u64)> = Vec::new(); // (key, instant)
        let mut log: Vec<String> = Vec::new();
        for op in 0..300 {
            let k = next() % KEYS;
            match next() % 10 {
                0..=2 => {
                    e.insert(&key(k)).unwrap();
                    outstanding.push((k, now));
                    log.push(format!("insert {k}"));
                }
                3 => {
                    let t = now - (next() % (14 * 86_400)).min(now - t0);
                    let r = e.insert_at(&key(k), at(t));
                    log.push(format!("insert_at {k} {}s ago: {}", now - t, r.is_ok()));
                    if any_live(t, now) {
                        r.unwrap();
                        outstanding.push((k, t));
                    } else {
                        assert!(r.is_err(), "seed {seed} op {op}: backfill past every tier");
                    }
                }
                4 | 5 => {
                    let Some(i) = outstanding
                        .iter()
                        .position(|&(k2, t)| k2 == k && same(t, now))
                    else {
                        continue;
                    };
                    let removed = e.remove(&key(k)).unwrap();
                    log.push(format!("remove {k}: {removed}"));
                    assert!(
                        removed,
                        "seed {seed} op {op}: an insert made now not taken back\n{}",
                        log.join("\n")
                    );
                    outstanding.swap_remove(i);
                }
                6 => {
                    if outstanding.is_empty() {
                        continue;
                    }
                    let i = (next() % outstanding.len() as u64) as usize;
                    let (k, t) = outstanding.swap_remove(i);
                    let r = e.remove_at(&key(k), at(t));
                    log.push(format!("remove_at {k} {}s ago: {r:?}", now - t));
                    if any_live(t, now) {
                        assert!(
                            r.unwrap(),
                            "seed {seed} op {op}: an insert at its instant not taken back\n{}",
                            log.join("\n")
                        );
                    } else {
                        assert!(r.is_err(), "seed {seed} op {op}: remove past every tier");
                    }
                }
                7 | 8 => {
                    now += (1 + next() % 30) * 3600;
                    clock.set(at(now));
                    log.push(format!("clock {now}"));
                }
                _ if next() % 2 == 0 => {
                    let to = base.path().join(format!("copy{op}"));
                    copy_tree(&cur, &to);
                    let _ = std::fs::remove_file(to.join("wal/BOOT"));
                    drop(e);
                    cur = to;
                    e = open(&cur, &clock);
                    log.push("power loss (copy)".into());
                }
                _ => {
                    drop(e);
                    e = open(&cur, &clock);
                    log.push("reopen".into());
                }
            }
            for kk in 0..KEYS {
                if outstanding
                    .iter()
                    .any(|&(k2, t)| k2 == kk && any_live(t, now))
                {
                    assert!(
                        e.contains(&key(kk)).unwrap(),
                        "seed {seed} op {op}: k{kk} lost\n{}",
                        log.join("\n")
                    );
                }
            }
        }
        e.verify().unwrap();
    }
}

/// `remove` answers whether every window held the key: for a key whose
/// counters all saturated (inserted 15 times) that is every call, although
/// nothing is decremented and the key stays present, as `Engine::remove`
/// documents. A key below saturation answers `false` once taken back.
#[test]
fn a_saturated_key_answers_true_to_every_remove_and_stays() {
    let dir = tempfile::tempdir().unwrap();
    let (e, _clock) = counting_engine(dir.path(), &[Tier::daily(1)], 1_000, 0.01);
    let hot = b"https://example.com/hot";
    for _ in 0..15 {
        e.insert(hot).unwrap();
    }
    for i in 0..30 {
        assert!(e.remove(hot).unwrap(), "remove {i} of a saturated key");
    }
    assert!(e.contains(hot).unwrap(), "a saturated key stays present");
    let cold = b"https://example.com/cold";
    for _ in 0..14 {
        e.insert(cold).unwrap();
    }
    for i in 0..14 {
        assert!(e.remove(cold).unwrap(), "remove {i} of 14 inserts");
    }
    assert!(!e.remove(cold).unwrap(), "a 15th remove of 14 inserts");
    assert!(!e.contains(cold).unwrap());
}

/// Threads insert overlapping keys into a small counting window that grows
/// several times meanwhile, then take back some of those inserts while
/// others insert fresh keys (growing it again), then take back the rest.
/// Checked against an exact model of every key's outstanding inserts: no
/// key is reported new twice before any remove; every remove of a key with
/// an outstanding insert finds it; every key with one is present; and once
/// every insert is taken back, no cell of any sub-filter holds a count
/// (except saturated ones): a count added to one sub-filter and taken from
/// another would leave one behind.
fn counting_growth_race(sync: timebloom::SyncPolicy) {
    const THREADS: u64 = 6;
    const KEYS: u64 = 12_000;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let cfg = timebloom::Config {
        sync,
        ..config(&[Tier::daily(1).counting()], 500, 0.01)
    };
    let e = Arc::new(create(dir.path(), cfg, &clock));
    // How often thread `t` inserts key `i` of set `set`: 0, 1 or 2 times.
    let times = |set: u64, t: u64, i: u64| -> u32 {
        let z = (set * 0x9e37_79b9 + t * 0x85eb_ca6b + i * 0xc2b2_ae35)
            .wrapping_mul(0x2545_f491_4f6c_dd1d);
        match z >> 58 {
            0..=27 => 1,
            28..=31 => 2,
            _ => 0,
        }
    };
    let wins: Arc<Vec<std::sync::atomic::AtomicU8>> =
        Arc::new((0..KEYS).map(|_| Default::default()).collect());
    // Phase 1: inserts only, half the threads forwards, half backwards,
    // some in batches.
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let (e, wins) = (&e, &wins);
            s.spawn(move || {
                let order: Vec<u64> = match t % 2 {
                    0 => (0..KEYS).collect(),
                    _ => (0..KEYS).rev().collect(),
                };
                for i in order {
                    for _ in 0..times(1, t, i) {
                        let new = match t % 3 {
                            2 => e.insert_batch(&[url(31, i)]).unwrap()[0],
                            _ => e.insert(&url(31, i)).unwrap(),
                        };
                        if new {
                            wins[i as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                }
            });
        }
    });
    let inserted = |set: u64, i: u64| (0..THREADS).map(|t| times(set, t, i)).sum::<u32>();
    let mut never = 0;
    for i in 0..KEYS {
        let w = wins[i as usize].load(std::sync::atomic::Ordering::Relaxed);
        assert!(w <= 1, "key {i} reported new {w} times");
        if inserted(1, i) > 0 {
            never += u64::from(w == 0);
            assert!(e.contains(&url(31, i)).unwrap(), "key {i} lost");
        }
    }
    assert!(never < KEYS / 30, "{never} keys never reported new");
    let grown = e.stats().unwrap().tiers[0].segments[0].subfilters;
    assert!(grown >= 4, "{grown} sub-filters");
    // Phase 2: each thread takes back its inserts of set 1 but, for every
    // fourth key, one; meanwhile it inserts set 2 (the chain grows again).
    // Every remove finds its key: the thread's own insert is outstanding.
    let kept = |t: u64, i: u64| i.is_multiple_of(4) && times(1, t, i) > 0;
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let e = &e;
            s.spawn(move || {
                for i in 0..KEYS {
                    for _ in 0..times(2, t, i) {
                        e.insert(&url(32, i)).unwrap();
                    }
                    let n = times(1, t, i) - u32::from(kept(t, i));
                    for _ in 0..n {
                        assert!(e.remove(&url(31, i)).unwrap(), "thread {t}: key {i}");
                    }
                }
            });
        }
    });
    let regrown = e.stats().unwrap().tiers[0].segments[0].subfilters;
    assert!(regrown > grown, "{regrown} sub-filters");
    for i in 0..KEYS {
        if (0..THREADS).any(|t| kept(t, i)) {
            assert!(e.contains(&url(31, i)).unwrap(), "set 1 key {i} lost");
        }
        if inserted(2, i) > 0 {
            assert!(e.contains(&url(32, i)).unwrap(), "set 2 key {i} lost");
        }
    }
    // Phase 3: every outstanding insert taken back.
    std::thread::scope(|s| {
        for t in 0..THREADS {
            let e = &e;
            s.spawn(move || {
                for i in (0..KEYS).rev() {
                    for _ in 0..u32::from(kept(t, i)) {
                        assert!(e.remove(&url(31, i)).unwrap(), "thread {t}: key {i}");
                    }
                    for _ in 0..times(2, t, i) {
                        assert!(e.remove(&url(32, i)).unwrap(), "thread {t}: set 2 key {i}");
                    }
                }
            });
        }
    });
    let seg = &e.stats().unwrap().tiers[0].segments[0];
    assert_eq!(
        seg.occupied, seg.saturated,
        "cells still counted after every insert was taken back ({} sub-filters)",
        seg.subfilters
    );
}

#[test]
fn counting_growth_under_concurrent_writers_keeps_every_count_in_place() {
    counting_growth_race(timebloom::SyncPolicy::None);
}

#[test]
fn counting_growth_under_concurrent_logged_writers_keeps_every_count_in_place() {
    counting_growth_race(timebloom::SyncPolicy::default());
}
