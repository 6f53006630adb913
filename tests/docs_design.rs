//! Statements of docs/design.md and docs/guide.md that a test can check
//! cheaply, run against the engine.

mod common;

use common::*;
use std::time::Duration;

use timebloom::{ManualClock, Tier};

/// design.md, "The false-positive budget" and "Sealed windows in large
/// pages": `contains` on the default tiers reads the 12 monthly windows.
#[test]
fn contains_on_the_default_tiers_reads_the_twelve_monthly_windows() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let tiers = [Tier::daily(7), Tier::weekly(4), Tier::monthly(12)];
    let e = create(dir.path(), config(&tiers, 100, 0.01), &clock);
    for d in 0..400 {
        clock.set(day(d));
        e.insert(format!("key {d}").as_bytes()).unwrap();
    }
    let stats = e.stats().unwrap();
    let read: Vec<_> = stats.tiers.iter().filter(|t| t.answers_contains).collect();
    assert_eq!(read.len(), 1);
    assert_eq!(read[0].tier, "12m");
    assert_eq!(read[0].segments.len(), 12);
    let all: usize = stats.tiers.iter().map(|t| t.segments.len()).sum();
    assert_eq!(all, 23, "7 daily, 4 weekly and 12 monthly windows");
}

/// design.md, "Tiers, windows and retention": `7d` keeps today and the six
/// days before: a key inserted at any moment of day 0 is present through
/// day 6 and gone on day 7.
#[test]
fn a_seven_day_tier_keeps_a_key_through_day_six() {
    let dir = tempfile::tempdir().unwrap();
    // Day 0 of `day()` at midnight, and its last second.
    let midnight = day(0) - Duration::from_secs(12 * 3600);
    let clock = ManualClock::new(midnight);
    let e = create(dir.path(), config(&[Tier::daily(7)], 1_000, 0.001), &clock);
    e.insert(b"first second").unwrap();
    clock.set(midnight + Duration::from_secs(86_399));
    e.insert(b"last second").unwrap();
    clock.set(midnight + Duration::from_secs(7 * 86_400 - 1));
    assert!(e.contains(b"first second").unwrap());
    assert!(e.contains(b"last second").unwrap());
    clock.set(midnight + Duration::from_secs(7 * 86_400));
    assert!(!e.contains(b"first second").unwrap());
    assert!(!e.contains(b"last second").unwrap());
}

/// guide.md, "Claiming a recrawl in one step": a claim at 23:59:59 and a
/// `remove` two seconds later answer `false`, and `insert_within` is
/// `false` again.
#[test]
fn a_remove_after_midnight_leaves_a_claim_standing() {
    let dir = tempfile::tempdir().unwrap();
    let midnight = day(3) - Duration::from_secs(12 * 3600);
    let clock = ManualClock::new(midnight - Duration::from_secs(3 * 86_400));
    let tiers = [Tier::daily(7).counting(), Tier::weekly(4).counting()];
    let e = create(dir.path(), config(&tiers, 1_000, 0.001), &clock);
    let three_days = Duration::from_secs(3 * 86_400);
    clock.set(midnight - Duration::from_secs(1));
    assert!(e
        .insert_within(b"https://example.com/", three_days)
        .unwrap());
    clock.set(midnight + Duration::from_secs(1));
    assert!(!e.remove(b"https://example.com/").unwrap());
    assert!(!e
        .insert_within(b"https://example.com/", three_days)
        .unwrap());
}

/// guide.md, "Recrawl after a horizon": past the horizon `contains_within`
/// is `false` while `contains` still finds the key in a longer tier; a
/// recrawl's `insert` then returns `false` but writes the open windows
/// that lack the key, so the horizon finds it again.
#[test]
fn a_recrawl_insert_answers_false_and_writes_the_open_windows() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let tiers = [Tier::daily(7), Tier::weekly(4), Tier::monthly(12)];
    let e = create(dir.path(), config(&tiers, 1_000, 0.001), &clock);
    let key = b"https://example.com/page";
    let three_days = Duration::from_secs(3 * 86_400);
    assert!(e.insert(key).unwrap());
    clock.set(day(5));
    assert!(!e.contains_within(key, three_days).unwrap());
    assert!(e.contains(key).unwrap());
    assert!(!e.insert(key).unwrap());
    assert!(e.contains_within(key, three_days).unwrap());
}
