//! Writes at a past instant (`insert_at`, `remove_at`) at the edges: the
//! ends of the clock's range, sealed windows reopened and sealed again,
//! and a reopen after a crash.

mod common;

use std::time::{Duration, UNIX_EPOCH};

use common::*;
use timebloom::{Error, ManualClock, Tier};

const DAY_SECS: u64 = 86_400;

/// The engine `e` of `dir` as a kill left it (not closed), copied and
/// opened from the copy with a recovery as after a power loss; the copy's
/// directory lives as long as the first value.
fn recover_after_a_kill(
    e: timebloom::Engine,
    dir: &std::path::Path,
    clock: &ManualClock,
) -> (tempfile::TempDir, timebloom::Engine) {
    std::mem::forget(e);
    let lost = tempfile::tempdir().unwrap();
    copy_tree(dir, lost.path());
    let e = timebloom::Engine::open_with(
        lost.path(),
        timebloom::Options::default()
            .clock(clock.clone())
            .assume_power_loss(true),
    )
    .unwrap();
    (lost, e)
}

#[test]
fn instants_at_the_ends_of_the_range_are_errors_not_panics() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let mut cfg = config(
        &[
            Tier::daily(7).counting(),
            Tier::weekly(4).counting(),
            Tier::monthly(3).counting(),
        ],
        1_000,
        0.01,
    );
    cfg.utc_offset_secs = -3600;
    let e = create(dir.path(), cfg, &clock);
    let far = [
        UNIX_EPOCH,
        UNIX_EPOCH + Duration::from_secs(1),
        UNIX_EPOCH + Duration::from_secs(253_402_300_799),
        UNIX_EPOCH + Duration::from_secs(253_402_300_800),
        UNIX_EPOCH + Duration::from_secs(u64::MAX / 4),
        UNIX_EPOCH - Duration::from_secs(1),
    ];
    for t in far {
        let r = e.insert_at(b"k", t);
        assert!(
            matches!(r, Err(Error::WindowUnavailable { .. })),
            "{t:?}: {r:?}"
        );
        let r = e.remove_at(b"k", t);
        assert!(
            matches!(r, Err(Error::WindowUnavailable { .. })),
            "{t:?}: {r:?}"
        );
    }
    assert!(!e.contains(b"k").unwrap());
    e.close().unwrap();
}

#[test]
fn a_backfill_into_a_sealed_counting_window_survives_a_reseal_and_a_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let cfg = config(&[Tier::daily(7).counting()], 1_000, 0.01);
    let e = create(dir.path(), cfg, &clock);
    e.insert(b"a").unwrap();
    clock.set(day(4));
    e.insert(b"b").unwrap();
    // day 1: never opened; day 0: sealed.
    assert!(e.insert_at(b"c", day(0)).unwrap());
    assert!(e.insert_at(b"d", day(1)).unwrap());
    assert!(!e.remove_at(b"never", day(0)).unwrap());
    assert!(!e.remove_at(b"never", day(2)).unwrap());
    e.flush().unwrap();
    assert!(e
        .contains_within(b"c", Duration::from_secs(5 * DAY_SECS))
        .unwrap());
    assert!(!e
        .contains_within(b"c", Duration::from_secs(3 * DAY_SECS))
        .unwrap());
    assert!(e
        .contains_within(b"d", Duration::from_secs(4 * DAY_SECS))
        .unwrap());
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    for k in [&b"a"[..], b"b", b"c", b"d"] {
        assert!(e.contains(k).unwrap(), "{k:?}");
    }
    assert!(!e
        .contains_within(b"c", Duration::from_secs(3 * DAY_SECS))
        .unwrap());
    assert!(e.remove_at(b"c", day(0)).unwrap());
    assert!(!e.contains(b"c").unwrap());
    assert!(e.contains(b"a").unwrap());
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    assert!(!e.contains(b"c").unwrap());
    assert!(e.contains(b"a").unwrap());
    e.close().unwrap();
}

#[test]
fn a_backfill_on_a_boundary_goes_to_the_window_it_starts() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(10));
    let cfg = config(&[Tier::daily(14), Tier::weekly(4)], 1_000, 0.01);
    let e = create(dir.path(), cfg, &clock);
    // Monday of week 2026W03 at 00:00Z: day 7.
    let monday = at(T0 + 7 * DAY_SECS);
    assert!(e.insert_at(b"m", monday).unwrap());
    assert!(e.insert_at(b"s", at(T0 + 7 * DAY_SECS - 1)).unwrap());
    let now_secs = T0 + 10 * DAY_SECS + 12 * 3600;
    let to_monday = Duration::from_secs(now_secs - (T0 + 7 * DAY_SECS));
    assert!(e.contains_within(b"m", to_monday).unwrap());
    assert!(!e.contains_within(b"s", to_monday).unwrap());
    e.close().unwrap();
}

fn backfills_survive_a_power_loss(tiers: &[Tier], behind: bool) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let cfg = timebloom::Config {
        sync: timebloom::SyncPolicy::Always,
        ..config(tiers, 1_000, 0.01)
    };
    let e = create(dir.path(), cfg, &clock);
    e.insert(b"zero").unwrap();
    clock.set(day(5));
    e.insert(b"five").unwrap();
    if behind {
        clock.set(day(4));
    }
    // Into the sealed day 0, twice with a reseal between, and into day 2,
    // never opened.
    assert!(e.insert_at(b"c0", day(0)).unwrap());
    e.flush().unwrap();
    assert!(e.insert_at(b"c1", day(0)).unwrap());
    assert!(e.insert_at(b"c2", day(2)).unwrap());
    assert!(e.insert_at(b"c5", day(5)).unwrap());
    let (_lost, e) = recover_after_a_kill(e, dir.path(), &clock);
    let now = if behind { 4 } else { 5 };
    for (k, d) in [
        (&b"c0"[..], 0u64),
        (b"c1", 0),
        (b"c2", 2),
        (b"five", 5),
        (b"c5", 5),
    ] {
        assert!(e.contains(k).unwrap(), "{k:?} lost");
        if d < now {
            let h = Duration::from_secs((now - d) * DAY_SECS);
            assert!(e.contains_within(k, h).unwrap(), "{k:?} not in day {d}");
            let h = Duration::from_secs((now - d - 1) * DAY_SECS);
            assert!(
                !e.contains_within(k, h).unwrap(),
                "{k:?} moved after day {d}"
            );
        }
    }
    e.close().unwrap();
}

#[test]
fn counting_backfills_survive_a_power_loss_in_their_windows() {
    backfills_survive_a_power_loss(
        &[Tier::daily(7).counting(), Tier::weekly(4).counting()],
        false,
    );
}

#[test]
fn bloom_and_table_backfills_survive_a_power_loss_in_their_windows() {
    backfills_survive_a_power_loss(&[Tier::daily(7), Tier::fingerprint(30)], false);
}

#[test]
fn backfills_with_a_clock_behind_survive_a_power_loss() {
    backfills_survive_a_power_loss(&[Tier::daily(7).counting(), Tier::weekly(4)], true);
}

#[test]
fn a_table_backfill_moves_a_day_forward_only_and_answers_seen() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let cfg = config(&[Tier::fingerprint(10)], 1_000, 0.01);
    let e = create(dir.path(), cfg, &clock);
    for n in 1..=12 {
        clock.set(day(n));
        e.maintain(day(n)).unwrap();
    }
    let d = Duration::from_secs(DAY_SECS);
    assert!(e.insert(b"now").unwrap());
    assert!(!e.insert_at(b"now", day(5)).unwrap());
    assert!(e.contains_within(b"now", d).unwrap());
    assert!(e.insert_at(b"old", day(4)).unwrap());
    assert!(e.contains_within(b"old", 8 * d).unwrap());
    assert!(!e.contains_within(b"old", 7 * d).unwrap());
    assert!(!e.insert_at(b"old", day(6)).unwrap());
    assert!(e.contains_within(b"old", 6 * d).unwrap());
    assert!(!e.insert_at(b"old", day(5)).unwrap());
    assert!(e.contains_within(b"old", 6 * d).unwrap());
    // The oldest day kept, and the one before.
    assert!(e.insert_at(b"edge", day(3)).unwrap());
    assert!(e.contains(b"edge").unwrap());
    let r = e.insert_at(b"gone", day(2));
    assert!(matches!(r, Err(Error::WindowUnavailable { .. })), "{r:?}");
    assert!(!e.contains(b"gone").unwrap());
    let r = e.insert_at(b"ahead", day(13));
    assert!(matches!(r, Err(Error::WindowUnavailable { .. })), "{r:?}");
    let r = e.remove_at(b"old", day(13));
    assert!(matches!(r, Err(Error::WindowUnavailable { .. })), "{r:?}");
    let r = e.remove_at(b"old", day(2));
    assert!(matches!(r, Err(Error::WindowUnavailable { .. })), "{r:?}");
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    assert!(e.contains(b"edge").unwrap());
    assert!(e.contains_within(b"old", 6 * d).unwrap());
    assert!(!e.contains_within(b"old", 5 * d).unwrap());
    e.close().unwrap();
}

#[test]
fn a_backfill_into_a_grown_past_counting_window_is_taken_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let cfg = config(&[Tier::daily(7).counting()], 200, 0.01);
    let e = create(dir.path(), cfg, &clock);
    for i in 0..1_000 {
        e.insert(&url(1, i)).unwrap();
    }
    clock.set(day(3));
    e.insert(b"today").unwrap();
    let mut fresh = Vec::new();
    for i in 0..1_000 {
        if e.insert_at(&url(2, i), day(0)).unwrap() {
            fresh.push(url(2, i));
        }
    }
    for k in &fresh {
        assert!(e.remove_at(k, day(0)).unwrap());
    }
    let d = Duration::from_secs(DAY_SECS);
    for i in 0..1_000 {
        assert!(e.contains_within(&url(1, i), 4 * d).unwrap(), "{i}");
    }
    e.close().unwrap();
}

#[test]
fn a_later_instant_of_the_newest_window_is_taken() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let cfg = config(&[Tier::daily(7), Tier::fingerprint(7)], 1_000, 0.01);
    let e = create(dir.path(), cfg, &clock);
    // day(3) is noon: later that day is still the newest window and day.
    assert!(e
        .insert_at(b"later", day(3) + Duration::from_secs(6 * 3600))
        .unwrap());
    assert!(e.contains_within(b"later", Duration::ZERO).unwrap());
    let r = e.insert_at(b"tomorrow", day(4));
    assert!(matches!(r, Err(Error::WindowUnavailable { .. })), "{r:?}");
    e.close().unwrap();
}

#[test]
fn backfills_that_grow_a_sealed_window_keep_their_keys_after_a_crash() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let cfg = timebloom::Config {
        sync: timebloom::SyncPolicy::Always,
        ..config(&[Tier::daily(7), Tier::weekly(2).counting()], 200, 0.01)
    };
    let e = create(dir.path(), cfg, &clock);
    for i in 0..200 {
        e.insert(&url(1, i)).unwrap();
    }
    clock.set(day(2));
    e.insert(b"today").unwrap();
    for i in 0..600 {
        e.insert_at(&url(2, i), day(0)).unwrap();
    }
    let (lost, e) = recover_after_a_kill(e, dir.path(), &clock);
    let d = Duration::from_secs(DAY_SECS);
    for (set, n) in [(1, 200), (2, 600)] {
        for i in 0..n {
            assert!(e.contains_within(&url(set, i), 2 * d).unwrap(), "{set} {i}");
        }
    }
    e.verify().unwrap();
    e.close().unwrap();
    let e = open(lost.path(), &clock);
    for i in 0..600 {
        assert!(e.contains_within(&url(2, i), 2 * d).unwrap(), "{i}");
    }
    e.close().unwrap();
}
