//! `stats` of a read-only open beside a running writer: the open windows'
//! counts are the writer's keys so far, not the header's count from when
//! the writer opened them.

use std::time::{Duration, UNIX_EPOCH};

use timebloom::{Config, Engine, ManualClock, Options, Tier};

#[test]
fn read_only_stats_count_a_running_writers_open_windows() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.tb");
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(1_796_040_000));
    let config = Config {
        tiers: vec![Tier::daily(3)],
        expected_items_per_day: 10_000,
        ..Config::default()
    };
    let writer =
        Engine::create_with(&path, config, Options::default().clock(clock.clone())).unwrap();
    let keys: Vec<String> = (0..5_000).map(|i| format!("key-{i}")).collect();
    writer.insert_batch(&keys).unwrap();

    // The writer is still running: its window is open, its header unclean.
    let reader = Engine::open_read_only_with(&path, Options::default().clock(clock)).unwrap();
    let stats = reader.stats().unwrap();
    let seg = &stats.tiers[0].segments[0];
    assert_eq!(seg.state, "open");
    assert!(
        (4_500..5_500).contains(&seg.estimated_items),
        "a reader's stats estimate {} keys in a window the writer has put 5000 into (fill {})",
        seg.estimated_items,
        seg.fill
    );
    reader.close().unwrap();
    writer.close().unwrap();
}
