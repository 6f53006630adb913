//! What `stats` reports against what the engine holds and answers.

mod common;

use std::time::Duration;

use common::*;
use timebloom::{Engine, ManualClock, Options, Tier};

/// A read-only engine left open while the clock passes the end of a
/// tier's retention: `contains` skips the expired windows, and `stats`
/// must not list them (with their bytes and keys) as live, which a
/// read-only open made at the same instant does not.
#[test]
fn read_only_stats_leave_out_windows_that_expired_while_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.tb");
    let clock = ManualClock::new(day(20_000));
    let e = create(&path, config(&[Tier::daily(3)], 10_000, 0.01), &clock);
    let keys: Vec<Vec<u8>> = (0..5_000).map(|i| url(1, i)).collect();
    e.insert_batch(&keys).unwrap();
    e.close().unwrap();

    clock.advance(Duration::from_secs(86_400));
    let r = Engine::open_read_only_with(&path, Options::default().clock(clock.clone())).unwrap();
    let before = r.stats().unwrap();
    assert_eq!(before.tiers[0].segments.len(), 1);
    assert!(before.tiers[0].segments[0].estimated_items > 4_000);

    // Ten days on, the day-0 window is three retentions past.
    clock.advance(Duration::from_secs(9 * 86_400));
    assert!(!r.contains(&keys[3]).unwrap());
    let s = r.stats().unwrap();
    let listed: Vec<_> = (s.tiers[0].segments.iter())
        .map(|g| (g.window.clone(), g.window_end, g.estimated_items))
        .collect();
    assert!(
        s.tiers[0]
            .segments
            .iter()
            .all(|g| g.window_end > s.now - 3 * 86_400),
        "stats at {} list expired windows {listed:?}",
        s.now
    );
    assert_eq!(s.bytes, 0, "bytes of expired windows counted: {listed:?}");

    let fresh = Engine::open_read_only_with(&path, Options::default().clock(clock)).unwrap();
    assert_eq!(fresh.stats().unwrap().bytes, s.bytes);
}

/// The tier that answers `contains` changes with the clock: with a 6-day
/// tier beside a 1-week one, the week reaches furthest back on Sundays
/// (back to Monday, the days back to Tuesday) and the days on every other
/// day. A read-only engine left open across those days answers from the
/// tier the clock says (`contains` works it out past the snapshot's
/// boundary); `stats` must name the same one as a read-only open made at
/// that instant, not the one of its snapshot.
#[test]
fn read_only_stats_name_the_tier_answering_contains_now() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.tb");
    let clock = ManualClock::new(day(20_000));
    let e = create(
        &path,
        config(&[Tier::daily(6), Tier::weekly(1)], 10_000, 0.01),
        &clock,
    );
    e.insert(&url(1, 1)).unwrap();
    e.close().unwrap();

    let answering = |e: &Engine| -> Vec<String> {
        let s = e.stats().unwrap();
        (s.tiers.iter())
            .filter(|t| t.answers_contains)
            .map(|t| t.tier.clone())
            .collect()
    };
    let r = Engine::open_read_only_with(&path, Options::default().clock(clock.clone())).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for d in 0..8 {
        if d > 0 {
            clock.advance(Duration::from_secs(86_400));
        }
        let fresh =
            Engine::open_read_only_with(&path, Options::default().clock(clock.clone())).unwrap();
        let want = answering(&fresh);
        assert_eq!(want.len(), 1);
        assert_eq!(answering(&r), want, "day {d}");
        seen.insert(want[0].clone());
    }
    // Both tiers took a turn.
    assert_eq!(seen.len(), 2, "{seen:?}");
}
