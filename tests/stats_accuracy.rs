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
