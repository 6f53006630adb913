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
    assert!(new >= 19_900, "{new} of 20000 distinct keys reported new");
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
