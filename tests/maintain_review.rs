//! What `Engine::maintain` reports against what it did.

mod common;

use std::time::{Duration, Instant};

use common::*;
use timebloom::{ManualClock, Tier};

/// A maintain that moves a fingerprint tier's day expires the keys of the
/// days that fell out of its retention: the report names them (a range,
/// however many days), and a second maintain at the same instant names
/// nothing. It said "nothing to do" while every key of the table expired.
#[test]
fn maintain_reports_the_days_a_fingerprint_tier_expired() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(
        dir.path(),
        config(&[Tier::fingerprint(3)], 100, 0.01),
        &clock,
    );
    assert!(e.insert(b"k").unwrap());
    // Day 2: day 0 and the two before it (a backfill on day 0 could write
    // them) were kept on day 0; the two before it are not any more.
    let done = e.maintain(day(2)).unwrap();
    assert_eq!(
        done.expired,
        ["3d:fingerprint days 20260103 to 20260104 (2 days)"],
        "{done}"
    );
    assert!(e.contains(b"k").unwrap());
    // Day 3: day 0 expired.
    let done = e.maintain(day(3)).unwrap();
    assert!(!e.contains(b"k").unwrap());
    assert_eq!(done.expired, ["3d:fingerprint day 20260105"], "{done}");
    assert!(e.maintain(day(3)).unwrap().is_empty());
    // Thirty years on: days 1..=3 (those kept on day 3) expired, as one
    // entry, quickly.
    let t = Instant::now();
    let done = e.maintain(day(3 + 365 * 30)).unwrap();
    assert!(t.elapsed() < Duration::from_secs(10));
    assert_eq!(
        done.expired,
        ["3d:fingerprint days 20260106 to 20260108 (3 days)"],
        "{done}"
    );
    assert!(e.maintain(day(3 + 365 * 30)).unwrap().is_empty());
    // A maintain behind the tables' day moves nothing.
    assert!(e.maintain(day(5)).unwrap().is_empty());
}
