//! Edges of chain growth: the measured false-positive rate of windows fed
//! many times their plan, growth across a reopen, counting chains and
//! chains of past windows, and a chain whose link file is missing or
//! truncated at open.

mod common;

use common::*;
use std::panic::{catch_unwind, AssertUnwindSafe};
use timebloom::{Engine, ManualClock, Options, Tier};

/// Disjoint probes of a window answered "present": the measured rate.
fn measured(e: &Engine, set: u64, n: u64) -> f64 {
    let probes: Vec<Vec<u8>> = (0..n).map(|i| url(set, i)).collect();
    let hits = e.contains_batch(&probes).unwrap();
    hits.iter().filter(|&&h| h).count() as f64 / n as f64
}

/// Upper bound a measured rate may reach when the true one is `p` over
/// `n` probes: the rate plus four standard deviations.
fn allowed(p: f64, n: u64) -> f64 {
    p + 4.0 * (p * (1.0 - p) / n as f64).sqrt()
}

/// A window fed 10 and 50 times its plan of crawl-like URLs answers
/// disjoint URLs "present" no more often than its configured share (one
/// window: the query rate), measured, not only by the sizing model.
#[test]
fn a_window_fed_10x_and_50x_its_plan_measures_within_its_share() {
    // A window of a few hundred keys has a first sub-filter of a dozen
    // blocks, whose realized rate varies widely with the seed: at 300
    // keys, p 0.001 and 10x, one engine in about 20 measured 1.33 times its
    // share where `stats` said 0.66. 2,000 keys keep the spread small.
    const PLAN: u64 = 2_000;
    const PROBES: u64 = 200_000;
    // Bloom chains only: a counting chain planned for 300 keys fed 50
    // times its plan measured 0.66 to 2.0 times its share over 12 engines
    // (mean 1.03), where `stats` said 0.97; too spread for a bound one
    // engine meets (docs/design.md, "The false-positive budget").
    for (kind, times) in [(Tier::daily(1), 10), (Tier::daily(1), 50)] {
        for p in [0.01, 0.001] {
            let dir = tempfile::tempdir().unwrap();
            let clock = ManualClock::new(day(0));
            let e = create(dir.path(), config(&[kind], PLAN, p), &clock);
            let keys: Vec<Vec<u8>> = (0..PLAN * times).map(|i| url(70, i)).collect();
            for chunk in keys.chunks(1024) {
                e.insert_batch(chunk).unwrap();
            }
            assert!(e.contains_batch(&keys).unwrap().iter().all(|&f| f));
            let s = e.stats().unwrap();
            let seg = &s.tiers[0].segments[0];
            assert!(seg.subfilters > 1, "{kind} x{times}: no growth");
            let m = measured(&e, 71, PROBES);
            assert!(
                m <= allowed(p, PROBES),
                "{kind} at {times}x its plan, p {p}: measured {m:.5} over {} sub-filters \
                 (stats say {:.5})",
                seg.subfilters,
                seg.estimated_fpr
            );
            assert!(
                seg.estimated_fpr <= p,
                "{kind} x{times} p {p}: estimated {}",
                seg.estimated_fpr
            );
        }
    }
}

/// A grown chain closed and opened again holds every key, reports the
/// same chain, verifies, and grows on from where it was.
#[test]
fn a_grown_chain_reopens_whole_and_grows_on() {
    const PLAN: u64 = 200;
    for tier in [Tier::daily(2), Tier::daily(2).counting()] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(day(0));
        let e = create(dir.path(), config(&[tier], PLAN, 0.01), &clock);
        let first: Vec<Vec<u8>> = (0..PLAN * 8).map(|i| url(80, i)).collect();
        e.insert_batch(&first).unwrap();
        let before = e.stats().unwrap().tiers[0].segments[0].subfilters;
        assert!(before >= 3, "{tier}: {before} sub-filters");
        e.close().unwrap();
        let e = open(dir.path(), &clock);
        e.verify().unwrap();
        let s = e.stats().unwrap();
        assert_eq!(s.tiers[0].segments[0].subfilters, before, "{tier}");
        assert!(e.contains_batch(&first).unwrap().iter().all(|&f| f));
        let more: Vec<Vec<u8>> = (0..PLAN * 16).map(|i| url(81, i)).collect();
        e.insert_batch(&more).unwrap();
        let after = e.stats().unwrap().tiers[0].segments[0].subfilters;
        assert!(after > before, "{tier}: {after} after {before}");
        assert!(e.contains_batch(&first).unwrap().iter().all(|&f| f));
        assert!(e.contains_batch(&more).unwrap().iter().all(|&f| f));
        e.verify().unwrap();
        e.close().unwrap();
        let e = open(dir.path(), &clock);
        assert_eq!(e.stats().unwrap().tiers[0].segments[0].subfilters, after);
        e.verify().unwrap();
    }
}

/// A counting chain grown to many sub-filters takes back what is removed
/// and keeps what is not, however the keys spread over its sub-filters.
#[test]
fn a_grown_counting_chain_removes_and_keeps_exactly() {
    const PLAN: u64 = 200;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(
        dir.path(),
        config(&[Tier::daily(2).counting()], PLAN, 0.001),
        &clock,
    );
    let keys: Vec<Vec<u8>> = (0..PLAN * 20).map(|i| url(90, i)).collect();
    e.insert_batch(&keys).unwrap();
    assert!(e.stats().unwrap().tiers[0].segments[0].subfilters >= 4);
    for k in keys.iter().step_by(2) {
        assert!(e.remove(k).unwrap(), "a key inserted once was not removed");
    }
    for k in keys.iter().skip(1).step_by(2) {
        assert!(e.contains(k).unwrap(), "a key never removed is gone");
    }
    let still = keys
        .iter()
        .step_by(2)
        .filter(|k| e.contains(k).unwrap())
        .count();
    // Those left are false positives of the chain (rate at most 0.1%).
    assert!(
        still <= 20,
        "{still} of {} removed keys still present",
        keys.len() / 2
    );
}

/// Backfills into a past window grow its chain as inserts into the open
/// one do: every key stays present, the window's estimate stays within
/// its share, and the chain survives a reopen.
#[test]
fn a_past_window_grows_by_backfill_and_reopens() {
    const PLAN: u64 = 200;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(4)], PLAN, 0.01), &clock);
    e.insert(&url(1, 0)).unwrap();
    clock.set(day(2));
    let keys: Vec<Vec<u8>> = (0..PLAN * 10).map(|i| url(100, i)).collect();
    for k in &keys {
        e.insert_at(k, day(0)).unwrap();
    }
    let s = e.stats().unwrap();
    let seg = s.tiers[0]
        .segments
        .iter()
        .find(|g| g.subfilters > 1)
        .expect("the past window grew");
    assert!(seg.estimated_fpr <= s.tiers[0].segment_fpr);
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    e.verify().unwrap();
    assert!(e.contains_batch(&keys).unwrap().iter().all(|&f| f));
    let m = measured(&e, 101, 100_000);
    assert!(m <= allowed(0.01, 100_000), "measured {m}");
}

/// Grows a one-tier chain to at least three sub-filters, closes it and
/// returns the name of its sub-filter 1 file.
fn grown_and_closed(dir: &std::path::Path, clock: &ManualClock) -> String {
    let e = create(dir, config(&[Tier::daily(2)], 200, 0.01), clock);
    let keys: Vec<Vec<u8>> = (0..1_600).map(|i| url(110, i)).collect();
    e.insert_batch(&keys).unwrap();
    assert!(e.stats().unwrap().tiers[0].segments[0].subfilters >= 3);
    e.close().unwrap();
    seg_files(dir)
        .into_iter()
        .find(|f| f.ends_with("-1.seg"))
        .expect("sub-filter 1's file")
}

/// What an open of `dir` does: its error's text, or None when it opened;
/// a panic fails the test.
fn open_result(dir: &std::path::Path, clock: &ManualClock) -> Option<String> {
    let r = catch_unwind(AssertUnwindSafe(|| {
        Engine::open_with(dir, Options::default().clock(clock.clone()))
    }))
    .expect("open panicked");
    match r {
        Ok(e) => {
            // If it opened, its answers must not lie silently: verify says
            // what is wrong.
            let v = catch_unwind(AssertUnwindSafe(|| e.verify_each())).expect("verify panicked");
            assert!(!v.is_empty(), "a damaged chain opened and verified clean");
            None
        }
        Err(err) => Some(err.to_string()),
    }
}

/// A chain whose middle link file is gone: the open refuses, naming the
/// file, rather than panic or answer from a chain with a hole.
#[test]
fn a_missing_chain_link_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let link = grown_and_closed(dir.path(), &clock);
    std::fs::remove_file(dir.path().join("seg").join(&link)).unwrap();
    if let Some(msg) = open_result(dir.path(), &clock) {
        assert!(msg.contains(&link), "{msg}");
    }
}

/// A chain whose middle link file is cut short (its header whole, its body
/// not; then only part of its header): refused or reported, naming the
/// file, never a panic.
#[test]
fn a_truncated_chain_link_is_refused_at_open() {
    for keep in [4096 + 64, 100, 0] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(day(0));
        let link = grown_and_closed(dir.path(), &clock);
        let path = dir.path().join("seg").join(&link);
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(keep).unwrap();
        drop(f);
        if let Some(msg) = open_result(dir.path(), &clock) {
            assert!(msg.contains(&link), "cut to {keep}: {msg}");
        }
    }
}

/// A chain file of the right size with its body's bytes changed: verify
/// reports the sub-filter, not the first of the chain.
#[test]
fn verify_names_the_damaged_link_of_a_chain() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let link = grown_and_closed(dir.path(), &clock);
    // Seal the window: its files then carry checksums.
    let e = open(dir.path(), &clock);
    clock.set(day(1));
    e.insert(&url(2, 0)).unwrap();
    e.close().unwrap();
    let path = dir.path().join("seg").join(&link);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 10;
    bytes[at] ^= 0xff;
    std::fs::write(&path, bytes).unwrap();
    match catch_unwind(AssertUnwindSafe(|| {
        Engine::open_with(dir.path(), Options::default().clock(clock.clone()))
    }))
    .expect("open panicked")
    {
        Ok(e) => {
            let errs = e.verify_each();
            assert!(
                errs.iter().any(|err| err.to_string().contains(&link)),
                "{errs:?}"
            );
        }
        Err(err) => assert!(err.to_string().contains(&link), "{err}"),
    }
}

/// Inserts fresh keys into a one-window engine of `tier` at a growth
/// factor of 1 until a write fails: the sub-filters its chain then holds,
/// the keys acknowledged and the error.
fn fill_to_longest(tier: Tier, tightening: f64) -> (usize, u64, String, Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[tier], 100, 0.001);
    cfg.growth_factor = 1.0;
    cfg.tightening = tightening;
    let e = create(dir.path(), cfg, &clock);
    let mut acked = 0;
    let err = loop {
        match catch_unwind(AssertUnwindSafe(|| e.insert(&url(120, acked)))).expect("panicked") {
            Ok(_) => acked += 1,
            Err(err) => break err.to_string(),
        }
        assert!(acked < 100_000, "the chain grew without end");
    };
    let n = e.stats().unwrap().tiers[0].segments[0].subfilters;
    (n, acked, err, e, dir)
}

/// At a growth factor of 1 and the default tightening and rate, the cost
/// bound ends a chain planned for 100 keys a window after 38 to 39
/// sub-filters (Bloom) or 20 (counting); docs/design.md and `Config`'s
/// documentation give 37 and 20 for the default million keys a day (the
/// cost of a tiny plan's first sub-filter rounds up to whole blocks). The error names the file, every acknowledged key stays, and the
/// full chain still answers within its share by the model.
#[test]
fn the_longest_chain_stops_by_its_cost_bound_and_within_its_share() {
    for (tier, want) in [
        (Tier::daily(7), 38..=39),
        (Tier::daily(7).counting(), 20..=20),
    ] {
        let (n, acked, err, e, _dir) = fill_to_longest(tier, 0.5);
        println!("{tier}: {n} sub-filters, {acked} keys: {err}");
        assert!(err.contains("sub-filter") && err.contains("seg/"), "{err}");
        let keys: Vec<Vec<u8>> = (0..acked).map(|i| url(120, i)).collect();
        assert!(e.contains_batch(&keys).unwrap().iter().all(|&f| f));
        let s = e.stats().unwrap();
        let share = s.tiers[0].segment_fpr;
        let seg = &s.tiers[0].segments[0];
        assert!(
            seg.estimated_fpr <= share,
            "{tier}: {} > {share}",
            seg.estimated_fpr
        );
        // Not measured against the share: chains of sub-filters of 100
        // keys (a few blocks each) vary widely with the seed; one engine in
        // about 20 measured 1.9 (Bloom) or 2.2 (counting) times its share.
        // A write of a key the window holds is still fine; a new one fails.
        assert!(e.insert(&keys[0]).is_ok() || tier.kind != timebloom::Kind::Bloom);
        assert!(e.insert(&url(122, 0)).is_err());
        assert!(
            want.contains(&n),
            "{tier}: the chain stopped at {n} sub-filters"
        );
    }
}

/// A counting chain at its longest still takes back keys it holds, but
/// refuses every insert, of a key it holds too (each one counts, in the
/// sub-filter that holds the key); its error said only "every write of a
/// key the window does not hold fails", and now says so.
#[test]
fn a_counting_chain_at_its_longest_refuses_every_insert_and_says_so() {
    let (_, acked, _, e, _dir) = fill_to_longest(Tier::daily(7).counting(), 0.5);
    assert!(acked > 5);
    assert!(e.remove(&url(120, 3)).unwrap());
    assert!(
        e.insert(&url(122, 0)).is_err(),
        "a new key past the longest"
    );
    let err = e.insert(&url(120, 5)).expect_err("a key the window holds");
    let msg = err.to_string();
    assert!(
        msg.contains("every insert into the window fails") && msg.contains("removes go on"),
        "{msg}"
    );
    assert!(e.contains(&url(120, 5)).unwrap());
    assert!(e.remove(&url(120, 5)).unwrap());
}

/// A crash in the middle of a growth: the next sub-filter's file was made
/// (here: a copy of the last one under the next name, its body zeroed, as
/// a new file's is) but no manifest names it. The open keeps the chain the
/// manifest names, and the chain grows over that position later without
/// an error. The same file with bits in its body is no crash's leftover
/// (a key goes only into a file a manifest names): the open is refused
/// naming it, and deletes nothing.
#[test]
fn a_growth_cut_before_its_manifest_leaves_a_chain_that_grows_on() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(2)], 200, 0.01), &clock);
    let keys: Vec<Vec<u8>> = (0..1_600).map(|i| url(130, i)).collect();
    e.insert_batch(&keys).unwrap();
    let n = e.stats().unwrap().tiers[0].segments[0].subfilters;
    e.close().unwrap();
    let files = seg_files(dir.path());
    let last = files
        .iter()
        .find(|f| f.ends_with(&format!("-{}.seg", n - 1)))
        .unwrap();
    let next = last.replace(&format!("-{}.seg", n - 1), &format!("-{n}.seg"));
    let seg = dir.path().join("seg");
    std::fs::copy(seg.join(last), seg.join(&next)).unwrap();
    match Engine::open_with(dir.path(), Options::default().clock(clock.clone())) {
        Err(err) => assert!(err.to_string().contains(&next), "{err}"),
        Ok(_) => panic!("opened, deleting {next}, whose body holds bits"),
    }
    assert!(seg.join(&next).exists());
    let mut bytes = std::fs::read(seg.join(&next)).unwrap();
    bytes[4096..].fill(0);
    std::fs::write(seg.join(&next), &bytes).unwrap();
    let e = open(dir.path(), &clock);
    assert!(!seg.join(&next).exists(), "the empty leftover stays");
    assert_eq!(e.stats().unwrap().tiers[0].segments[0].subfilters, n);
    e.verify().unwrap();
    let more: Vec<Vec<u8>> = (0..3_200).map(|i| url(131, i)).collect();
    e.insert_batch(&more).unwrap();
    assert!(e.stats().unwrap().tiers[0].segments[0].subfilters > n);
    assert!(e.contains_batch(&keys).unwrap().iter().all(|&f| f));
    assert!(e.contains_batch(&more).unwrap().iter().all(|&f| f));
    e.verify().unwrap();
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    e.verify().unwrap();
    assert!(e.contains_batch(&more).unwrap().iter().all(|&f| f));
}
