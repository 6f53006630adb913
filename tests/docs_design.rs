//! Statements of docs/design.md and docs/guide.md that a test can check
//! cheaply, run against the engine.

mod common;

use common::*;
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
