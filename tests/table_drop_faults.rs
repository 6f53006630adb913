//! A fingerprint chain's drained table is dropped in two steps: the
//! manifest without it (the commit point), then its file deleted. A crash
//! between the two (the deletion fails here, through the fault hook: this
//! binary holds one test, so no other test shares the process-wide hook)
//! leaves a file no manifest names: the next open deletes it and reads the
//! shorter chain with every live key.

mod common;

use std::path::Path;

use common::*;
use timebloom::{Engine, ManualClock, Tier};

fn key(d: u64, i: u64) -> Vec<u8> {
    url(1, d * 1_000_000 + i)
}

#[test]
fn a_drop_interrupted_before_the_delete_is_finished_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::fingerprint(10)], 500, 0.001), &clock);
    let chain = |e: &Engine| e.stats().unwrap().tiers[0].segments[0].subfilters;
    for i in 0..30_000 {
        e.insert(&key(0, i)).unwrap();
    }
    let grown = chain(&e);
    assert!(grown >= 3, "chain of {grown}");
    let d0 = dir.clone();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        (op == "delete drained table" && path.starts_with(&d0))
            .then(|| std::io::Error::other("injected: the process dies here"))
    })));
    let mut failed_on = None;
    for d in 1..=14u64 {
        clock.set(day(d));
        if let Err(err) = e.maintain(day(d)) {
            failed_on = Some((d, err.to_string()));
            break;
        }
        for i in 0..100 {
            e.insert(&key(d, i)).unwrap();
        }
    }
    timebloom::testing::set_fault_hook(None);
    let (d, err) = failed_on.expect("no drop was attempted");
    assert!(d >= 11, "a drop on day {d}, before day 0's keys expired");
    assert!(err.contains("delete drained table"), "{err}");
    // Nothing was deleted; the manifest names the newest table alone.
    assert_eq!(seg_files(&dir).len(), grown);
    drop(e);
    let e = open(&dir, &clock);
    assert_eq!(chain(&e), 1);
    assert_eq!(seg_files(&dir), vec![format!("f-table-{}.seg", grown - 1)]);
    for day_ in (d - 9).max(1)..d {
        for i in 0..100 {
            assert!(
                e.contains(&key(day_, i)).unwrap(),
                "day {day_} key {i} lost"
            );
        }
    }
    e.verify().unwrap();
}
