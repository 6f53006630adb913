//! Guards chain growth: a segment that receives many times its plan grows
//! instead of losing keys or accuracy, including when growth falls in the
//! middle of a batch (a regression: a batch once skipped the group of keys
//! that came right after a growth).

mod common;

use common::*;
use timebloom::{ManualClock, Tier};

#[test]
fn batches_across_growth_keep_every_key_and_answer_once_per_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(2)], 1_000, 0.01), &clock);
    let keys: Vec<Vec<u8>> = (0..20_000).map(|i| url(4, i)).collect();
    let mut new = 0;
    for chunk in keys.chunks(1000) {
        let answers = e.insert_batch(chunk).unwrap();
        assert_eq!(answers.len(), chunk.len(), "one answer per key");
        new += answers.iter().filter(|&&n| n).count();
    }
    // A distinct key is reported "seen" only by a false positive, and the
    // chain's false-positive rate never exceeds the configured 1%, so at
    // most 200 of the 20,000 may be. (The engine's seed is random: over 300
    // runs the count was 57-106, mean 77; an earlier bound of 100 was
    // tighter than the contract and failed about one run in thirty.)
    assert!(new >= 19_800, "{new} of 20000 distinct keys reported new");
    let found = e.contains_batch(&keys).unwrap();
    assert!(
        found.iter().all(|&f| f),
        "a key inserted in a batch is missing"
    );
    let s = e.stats().unwrap();
    let seg = s.tiers[0].segments.last().unwrap();
    assert!(
        seg.subfilters >= 4,
        "20x the plan grew only {} sub-filters",
        seg.subfilters
    );
    assert!(
        seg.estimated_fpr <= s.tiers[0].segment_fpr,
        "{} > {}",
        seg.estimated_fpr,
        s.tiers[0].segment_fpr
    );
    let est = seg.estimated_items as f64;
    assert!((est - 20_000.0).abs() < 1_000.0, "estimated {est} items");
}

/// Batch and single lookups test the same cells, so they must agree on
/// every key, present or not: over 40 daily windows (more sub-filters than
/// the single lookup keeps on its stack) whose chains have grown.
#[test]
fn batch_and_single_lookups_agree_over_many_grown_segments() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(40)], 200, 0.01), &clock);
    let mut inserted = Vec::new();
    for d in 0..40 {
        clock.set(day(d));
        // Day 3 gets 8x its plan: a chain of several sub-filters.
        let n = if d == 3 { 1_600 } else { 150 };
        let keys: Vec<Vec<u8>> = (0..n).map(|i| url(100 + d, i)).collect();
        e.insert_batch(&keys).unwrap();
        inserted.extend(keys);
    }
    let s = e.stats().unwrap();
    let subs: usize = s.tiers[0].segments.iter().map(|g| g.subfilters).sum();
    assert!(subs > 40, "no chain grew: {subs} sub-filters");
    let negatives: Vec<Vec<u8>> = (0..20_000).map(|i| url(99, i)).collect();
    for keys in [&inserted, &negatives] {
        let batch = e.contains_batch(keys).unwrap();
        for (k, b) in keys.iter().zip(&batch) {
            assert_eq!(*b, e.contains(k).unwrap(), "batch and single disagree");
        }
    }
    assert!(e.contains_batch(&inserted).unwrap().iter().all(|&f| f));
    let fp = e.contains_batch(&negatives).unwrap();
    assert!(
        fp.iter().any(|&f| f),
        "no false positive at all: the test is blind"
    );
}

/// A segment that receives exactly its plan keeps one sub-filter. The fill
/// at exactly the plan is random around its mean; a trigger at the mean
/// grew about half of such segments (doubling their memory for nothing).
#[test]
fn exactly_the_planned_load_does_not_grow() {
    const PLAN: u64 = 200_000;
    // Each engine has its own random seed: with a trigger at the mean, all
    // eight staying at one sub-filter has a chance of about 1 in 256.
    for round in 0..8u64 {
        let fpr = if round % 2 == 0 { 0.01 } else { 0.001 };
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(day(0));
        let e = create(dir.path(), config(&[Tier::daily(1)], PLAN, fpr), &clock);
        let keys: Vec<Vec<u8>> = (0..PLAN).map(|i| url(200 + round, i)).collect();
        for chunk in keys.chunks(4096) {
            e.insert_batch(chunk).unwrap();
        }
        let s = e.stats().unwrap();
        let seg = &s.tiers[0].segments[0];
        assert_eq!(seg.subfilters, 1, "round {round}: grew at its planned load");
    }
}

/// A window that receives a thousand times its plan grows a chain of ten
/// sub-filters. Each full one stopped taking keys at the fill expected a
/// little past its capacity (the growth margin), where its rate is a few
/// percent above its plan; with the rates of a long chain adding up to
/// nearly the segment's share, those few percent took the chain past it
/// (the engine's own estimate: 1.010 x the share at p = 0.001, 1.025 x at
/// p = 1e-6). The sub-filters a chain grows are sized for the load they
/// stop at and leave room for the first one's excess, so the estimate
/// stays within the share. (The estimate, not a measurement: a measured
/// rate varies more from one engine's seed to another than that excess.)
#[test]
fn a_deep_chain_stays_within_the_segment_share() {
    const PLAN: u64 = 2_000;
    for p in [0.001, 1e-6] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(day(0));
        let e = create(dir.path(), config(&[Tier::daily(1)], PLAN, p), &clock);
        let keys: Vec<Vec<u8>> = (0..PLAN * 1_000).map(|i| url(300, i)).collect();
        for chunk in keys.chunks(8192) {
            e.insert_batch(chunk).unwrap();
        }
        let s = e.stats().unwrap();
        let seg = &s.tiers[0].segments[0];
        assert!(seg.subfilters >= 10, "{} sub-filters", seg.subfilters);
        assert!(
            seg.estimated_fpr <= s.tiers[0].segment_fpr,
            "p {p}: a chain of {} estimated at {:.4} x its share",
            seg.subfilters,
            seg.estimated_fpr / s.tiers[0].segment_fpr
        );
    }
}

/// A chain cannot grow for ever: each sub-filter it grows has half the
/// rate of the one before, and with a growth factor of 1 (every one sized
/// for the plan) a window given about 64 times its plan fills the longest
/// chain, 64 sub-filters (it stopped at about 47, where the rate, near
/// 1e-18, was taken for one no file can hold: `filter::sizing`,
/// `tiny_rates_are_planned_with_enough_probes`). That is an error naming the window's file and saying what to
/// change (it once said only "segment too large"); every key acknowledged
/// before it stays present, and the engine goes on answering.
#[test]
fn a_chain_that_cannot_grow_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(2)], 100, 0.001);
    cfg.growth_factor = 1.0;
    let e = create(dir.path(), cfg, &clock);
    let mut acked = 0;
    let err = loop {
        match e.insert(&url(9, acked)) {
            Ok(_) => acked += 1,
            Err(err) => break err,
        }
        assert!(acked < 1_000_000, "the chain grew without end");
    };
    let msg = err.to_string();
    assert!(
        msg.contains("seg/") && msg.contains("sub-filter") && msg.contains("growth factor"),
        "{msg}"
    );
    assert!(acked > 1_000, "only {acked} keys before the error: {msg}");
    for i in 0..acked {
        assert!(e.contains(&url(9, i)).unwrap(), "key {i} of {acked} lost");
    }
}

/// A fingerprint chain stops growing at its longest (64 tables): an insert
/// that then finds no room in the newest table is an error naming the
/// table, not a loop that grows nothing and tries again for ever. Every key
/// acknowledged before it stays present. (Growth factor 1 and a table of
/// one bucket, so 64 tables fill after about a thousand keys.)
#[test]
fn a_fingerprint_chain_at_its_longest_answers_an_error_not_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::fingerprint(2)], 1, 0.01);
    cfg.growth_factor = 1.0;
    let e = std::sync::Arc::new(create(dir.path(), cfg, &clock));
    let (tx, rx) = std::sync::mpsc::channel();
    let writer = std::sync::Arc::clone(&e);
    std::thread::spawn(move || {
        let mut acked = 0;
        let r = loop {
            match writer.insert(&url(11, acked)) {
                Ok(_) => acked += 1,
                Err(err) => break Err(err),
            }
            if acked == 200_000 {
                break Ok(());
            }
        };
        let _ = tx.send((acked, r));
    });
    let Ok((acked, r)) = rx.recv_timeout(std::time::Duration::from_secs(60)) else {
        panic!(
            "an insert never returned, {} table files",
            seg_files(dir.path()).len()
        );
    };
    let err = r.expect_err("200,000 keys into one-bucket tables: the chain must end");
    let msg = err.to_string();
    assert!(msg.contains("seg/"), "{msg}");
    assert!(acked > 500, "only {acked} keys before the error: {msg}");
    for i in 0..acked {
        assert!(e.contains(&url(11, i)).unwrap(), "key {i} of {acked} lost");
    }
    // The message says what the user of this engine can do: the plan is
    // fixed at create, and advice to raise it (all the message once said)
    // named nothing that helps. Keys expiring frees room: once the tier's
    // days have passed, new keys are taken again.
    for want in ["until keys expire", "2 days", "fixed at create"] {
        assert!(msg.contains(want), "the error does not say {want:?}: {msg}");
    }
    clock.set(day(3));
    e.maintain(day(3)).unwrap();
    assert!(
        e.insert(&url(11, acked + 1)).unwrap(),
        "a new key refused after every key expired"
    );
}

/// A growth that creates one window's next sub-filter and then fails on
/// another's (a chain that cannot grow) leaves no file behind: the next
/// growth of the first window creates its file again. It once found the
/// leftover (`File exists`), took it for an I/O failure and latched the
/// engine, so every later write failed with `PreviousIo` until a reopen.
#[test]
fn a_growth_that_fails_part_way_leaves_the_engine_writable() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(1));
    let mut cfg = config(&[Tier::daily(3)], 100, 0.001);
    cfg.growth_factor = 1.0;
    let e = create(dir.path(), cfg, &clock);
    // Today's chain grows until it cannot.
    let mut today = 0;
    let err = loop {
        match e.insert(&url(12, today)) {
            Ok(_) => today += 1,
            Err(err) => break err,
        }
        assert!(today < 1_000_000, "the chain grew without end");
    };
    assert!(err.to_string().contains("growth factor"), "{err}");
    // Backfills fill yesterday's window until its chain is due to grow:
    // the growth fails on today's chain, after creating yesterday's file.
    let yesterday = day(0) + std::time::Duration::from_secs(3600);
    let mut back = 0;
    let err = loop {
        match e.insert_at(&url(13, back), yesterday) {
            Ok(_) => back += 1,
            Err(err) => break err,
        }
        assert!(back < 1_000_000, "no growth was due");
    };
    assert!(err.to_string().contains("growth factor"), "{err}");
    // The same again, not an I/O error, and the engine takes writes that
    // need no growth.
    let again = e.insert_at(&url(13, back), yesterday).unwrap_err();
    assert!(again.to_string().contains("growth factor"), "{again}");
    assert!(!e.insert(&url(12, 0)).unwrap(), "a present key");
    for i in 0..today {
        assert!(e.contains(&url(12, i)).unwrap(), "key {i} of {today} lost");
    }
    for i in 0..back {
        assert!(
            e.contains(&url(13, i)).unwrap(),
            "backfill {i} of {back} lost"
        );
    }
}

/// A Bloom chain at its longest (64 sub-filters) takes no key into its
/// full tail: the write that would need a 65th sub-filter is an error
/// naming the window's file, every key acknowledged before it stays
/// present, and the chain's rate stays within the configured one. Before,
/// growth stopped at 64 and the tail took every later key: with a growth
/// factor of 1 and a tightening of 0.9 (each sub-filter planned for 100
/// keys, every plan a small file), 20,000 keys into a window planned for
/// 100 were all acknowledged, and `contains` answered true for every one of
/// 100,000 keys never inserted (a rate of 1 against 1%).
#[test]
fn a_chain_at_its_longest_refuses_keys_instead_of_overfilling() {
    const P: f64 = 0.01;
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(1)], 100, P);
    cfg.growth_factor = 1.0;
    cfg.tightening = 0.9;
    let e = create(dir.path(), cfg, &clock);
    let mut acked = 0;
    let err = loop {
        match e.insert(&url(14, acked)) {
            Ok(_) => acked += 1,
            Err(err) => break Some(err),
        }
        if acked == 20_000 {
            break None;
        }
    };
    let negatives: Vec<Vec<u8>> = (0..100_000).map(|i| url(15, i)).collect();
    let fp = e.contains_batch(&negatives).unwrap();
    let rate = fp.iter().filter(|&&f| f).count() as f64 / negatives.len() as f64;
    let s = e.stats().unwrap();
    let seg = &s.tiers[0].segments[0];
    let Some(err) = err else {
        panic!(
            "20,000 keys into a window planned for 100 were all taken by a chain of {} \
             sub-filters: measured rate {rate} (configured {P})",
            seg.subfilters
        );
    };
    let msg = err.to_string();
    assert!(msg.contains("seg/") && msg.contains("sub-filter"), "{msg}");
    assert_eq!(seg.subfilters, 64, "{msg}");
    for i in 0..acked {
        assert!(e.contains(&url(14, i)).unwrap(), "key {i} of {acked} lost");
    }
    assert!(
        seg.estimated_fpr <= s.tiers[0].segment_fpr,
        "estimated {} > {P}",
        seg.estimated_fpr
    );
    // The chain's rates add up to at most 1% (by the model, 0.87% here);
    // 1.5% is far outside what 100,000 negatives measure from 1%.
    assert!(rate <= 1.5 * P, "measured rate {rate} (configured {P})");
    // The engine still writes where no growth is needed: a present key.
    assert!(!e.insert(&url(14, 0)).unwrap(), "a present key");
}

/// Once a window's chain is at its longest and its newest sub-filter full,
/// every later write of a key the window does not hold fails the same way
/// until the window ends: the error says so, names the window, and says
/// what helps (the plan is fixed at create: a new engine with more keys a
/// day or a larger growth factor), where it told the user to raise the
/// plan of the engine, which no call or option can.
#[test]
fn a_chain_at_its_longest_says_writes_fail_until_its_window_ends() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(2)], 100, 0.01);
    cfg.growth_factor = 1.0;
    cfg.tightening = 0.9;
    let e = create(dir.path(), cfg, &clock);
    let mut i = 0;
    let err = loop {
        match e.insert(&url(16, i)) {
            Ok(_) => i += 1,
            Err(err) => break err,
        }
        assert!(i < 20_000, "no refusal after {i} keys");
    };
    let msg = err.to_string();
    for want in ["until", "20260105", "create"] {
        assert!(msg.contains(want), "the error does not say {want:?}: {msg}");
    }
    // Every later new key is refused alike until the window ends.
    let again = e.insert(&url(16, i + 1)).unwrap_err();
    assert_eq!(again.to_string(), msg);
    clock.set(day(1));
    assert!(
        e.insert(&url(16, i + 1)).unwrap(),
        "the next window refused"
    );
}

/// Each sub-filter a chain grows has a lower rate, and past about 1e-12 a
/// blocked filter reaches a lower one only with ever more bits per key. With
/// a tightening of 0.05 (each rate a twentieth of the one before) and a
/// growth factor of 1, a window planned for 20 keys grew files of 18.7 MB,
/// 77.6 MB, 346 MB, 1.68 GB and 10.9 GB for its sub-filters 24 to 28, each
/// for 20 keys. A sub-filter that would cost more than 16 times the bits per
/// key of the chain's first now ends the chain, as its 64th does: an error
/// naming the window's file, every key acknowledged before it present.
#[test]
fn a_chain_stops_before_its_files_cost_without_bound() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(1)], 20, 0.001);
    cfg.growth_factor = 1.0;
    cfg.tightening = 0.05;
    let e = create(dir.path(), cfg, &clock);
    let seg_bytes = || -> u64 {
        std::fs::read_dir(dir.path().join("seg"))
            .unwrap()
            .map(|f| f.unwrap().metadata().unwrap().len())
            .sum()
    };
    let mut acked = 0;
    let err = loop {
        match e.insert(&url(12, acked)) {
            Ok(_) => acked += 1,
            Err(err) => break err,
        }
        let bytes = seg_bytes();
        assert!(
            bytes < 4 << 20,
            "{bytes} bytes of files for {acked} keys planned at 20 a sub-filter"
        );
    };
    let msg = err.to_string();
    assert!(
        msg.contains("seg/") && msg.contains("bits per key") && msg.contains("growth factor"),
        "{msg}"
    );
    assert!(acked > 100, "only {acked} keys before the error: {msg}");
    for i in 0..acked {
        assert!(e.contains(&url(12, i)).unwrap(), "key {i} of {acked} lost");
    }
}

/// A past window filled by backfills until its chain is at its longest
/// (here at the cost bound) refuses keys the window does not hold, but
/// the open window of the same tier still grows: today's keys past its
/// plan are recorded, not refused with the past window's error.
#[test]
fn a_past_window_at_its_longest_leaves_the_open_one_growing() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(1));
    let mut cfg = config(&[Tier::daily(3)], 20, 0.001);
    cfg.growth_factor = 1.0;
    cfg.tightening = 0.05;
    let e = create(dir.path(), cfg, &clock);
    let mut i = 0;
    let err = loop {
        match e.insert_at(&url(17, i), day(0)) {
            Ok(_) => i += 1,
            Err(err) => break err,
        }
        assert!(i < 5_000, "no refusal after {i} backfilled keys");
    };
    assert!(err.to_string().contains("bits per key"), "{err}");
    for j in 0..100 {
        if let Err(err) = e.insert(&url(18, j)) {
            panic!("today's key {j} refused: {err}");
        }
    }
    // The past window still refuses what it does not hold, and keeps what
    // it took.
    let again = e.insert_at(&url(17, i + 1), day(0)).unwrap_err();
    assert_eq!(again.to_string(), err.to_string());
    for k in 0..i {
        assert!(e.contains(&url(17, k)).unwrap(), "backfilled key {k} lost");
    }
    for j in 0..100 {
        assert!(e.contains(&url(18, j)).unwrap(), "today's key {j} lost");
    }
}
