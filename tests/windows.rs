//! Guards the time-window contract: retention, expiry, horizons, backfill,
//! and that a clean reopen keeps every key.

mod common;

use std::time::Duration;

use common::*;
use timebloom::{Error, ManualClock, Span, Tier};

#[test]
fn reopen_after_clean_close_keeps_every_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(
        dir.path(),
        config(&[Tier::daily(7), Tier::weekly(4)], 10_000, 0.01),
        &clock,
    );
    for i in 0..20_000 {
        e.insert(&url(1, i)).unwrap();
    }
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    for i in 0..20_000 {
        assert!(
            e.contains(&url(1, i)).unwrap(),
            "key {i} lost across reopen"
        );
        assert!(
            !e.insert(&url(1, i)).unwrap(),
            "key {i} reported new after reopen"
        );
    }
    // The chain grew past the planned 10,000 a day, and the growth persisted.
    let stats = e.stats().unwrap();
    assert!(stats.tiers[0].segments.last().unwrap().subfilters >= 2);
}

#[test]
fn daily_tier_expires_after_its_windows() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(7)], 1000, 0.001), &clock);
    assert!(e.insert(b"https://example.com/a").unwrap());
    assert!(!e.insert(b"https://example.com/a").unwrap());
    clock.set(day(6));
    assert!(
        e.contains(b"https://example.com/a").unwrap(),
        "seen on day 6"
    );
    clock.set(day(8));
    assert!(
        !e.contains(b"https://example.com/a").unwrap(),
        "new again on day 8"
    );
    assert!(e.insert(b"https://example.com/a").unwrap());
    // Lookups never rotate: the day-8 write did, expiring day 0 and opening
    // day 8 (no window was made for day 6, which nothing was written in).
    let starts: Vec<i64> = e.stats().unwrap().tiers[0]
        .segments
        .iter()
        .map(|s| s.window_start)
        .collect();
    assert_eq!(
        starts,
        [(T0 + 8 * 86_400) as i64],
        "day 0 expired, day 8 is open"
    );
    // Files of expired windows are gone: one file, one live window.
    let files = std::fs::read_dir(dir.path().join("seg")).unwrap().count();
    assert_eq!(files, starts.len());
}

#[test]
fn a_longer_tier_answers_a_longer_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(
        dir.path(),
        config(&[Tier::daily(7), Tier::weekly(4)], 1000, 0.001),
        &clock,
    );
    e.insert(b"k").unwrap();
    clock.set(day(8));
    assert!(e
        .contains_within(b"k", Duration::from_secs(20 * 86_400))
        .unwrap());
    assert!(e.contains(b"k").unwrap());
    assert!(!e
        .contains_within(b"k", Duration::from_secs(3 * 86_400))
        .unwrap());
    // Longer than 4 weeks can hold: an error, not a guess.
    let err = e
        .contains_within(b"k", Duration::from_secs(60 * 86_400))
        .unwrap_err();
    assert!(matches!(err, Error::HorizonTooLong { .. }), "{err}");
    clock.set(day(7 * 4 + 1));
    assert!(!e.contains(b"k").unwrap(), "past every tier's retention");
}

/// An empty `insert_within_batch` with a horizon no tier keeps is refused
/// as a batch of keys is (and as `RedisEngine` refuses it): the error does
/// not depend on whether the batch happens to be empty.
#[test]
fn an_empty_insert_within_batch_refuses_a_horizon_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(7)], 1000, 0.001), &clock);
    let long = Duration::from_secs(60 * 86_400);
    let err = e.insert_within_batch(&[b"k"], long).unwrap_err();
    assert!(matches!(err, Error::HorizonTooLong { .. }), "{err}");
    let none: [&[u8]; 0] = [];
    let err = e.insert_within_batch(&none, long).unwrap_err();
    assert!(matches!(err, Error::HorizonTooLong { .. }), "{err}");
    let ok = e.insert_within_batch(&none, Duration::from_secs(86_400));
    assert_eq!(ok.unwrap(), Vec::<bool>::new());
}

#[test]
fn horizon_is_guaranteed_and_at_most_one_window_coarse() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(7)], 1000, 0.001), &clock);
    // Inserted at 12:00 on days 0..=5.
    for d in 0..6 {
        clock.set(day(d));
        e.insert(format!("day-{d}").as_bytes()).unwrap();
    }
    clock.set(day(5));
    // A 1-day horizon reads today's and yesterday's windows.
    assert!(e.contains_within(b"day-5", DAY).unwrap());
    assert!(e.contains_within(b"day-4", DAY).unwrap());
    assert!(!e.contains_within(b"day-3", DAY).unwrap());
    assert!(e.contains_within(b"day-3", 2 * DAY).unwrap());
}

#[test]
fn backfill_writes_past_windows_and_refuses_expired_ones() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(10));
    let e = create(
        dir.path(),
        config(&[Tier::daily(7), Tier::weekly(4)], 1000, 0.001),
        &clock,
    );
    assert!(e.insert_at(b"old", day(8)).unwrap());
    assert!(e.contains_within(b"old", 3 * DAY).unwrap());
    assert!(!e.contains_within(b"old", DAY).unwrap());
    assert!(!e.insert_at(b"old", day(9)).unwrap());
    assert!(e.contains_within(b"old", DAY).unwrap());
    // Too old for the daily tier, still inside the weekly one.
    assert!(e.insert_at(b"older", day(1)).unwrap());
    assert!(e.contains(b"older").unwrap());
    // Older than every tier keeps, and the future: errors.
    assert!(matches!(
        e.insert_at(b"x", day(0) - 60 * DAY),
        Err(Error::WindowUnavailable { .. })
    ));
    assert!(matches!(
        e.insert_at(b"x", day(12)),
        Err(Error::WindowUnavailable { .. })
    ));
    e.flush().unwrap();
    e.verify().unwrap();
    drop(e);
    let e = open(dir.path(), &clock);
    assert!(e.contains(b"old").unwrap() && e.contains(b"older").unwrap());
    e.verify().unwrap();
}

#[test]
fn rotation_seals_and_reopen_rotates_missed_windows() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(3)], 1000, 0.001), &clock);
    e.insert(b"a").unwrap();
    clock.set(day(1));
    e.insert(b"b").unwrap();
    let s = e.stats().unwrap();
    let states: Vec<&str> = s.tiers[0].segments.iter().map(|s| s.state).collect();
    assert_eq!(states, ["sealed", "open"]);
    e.verify().unwrap();
    drop(e);
    // The engine is closed for two days; reopening rotates and expires.
    clock.set(day(3));
    let e = open(dir.path(), &clock);
    assert!(!e.contains(b"a").unwrap());
    assert!(e.contains(b"b").unwrap());
    let s = e.stats().unwrap();
    assert_eq!(s.tiers[0].segments.len(), 2, "day 1 sealed, day 3 open");
}

#[test]
fn a_utc_offset_moves_the_day_boundary() {
    let dir = tempfile::tempdir().unwrap();
    // 22:00 UTC on day 0 is already day 1 at UTC+03:00.
    let clock = ManualClock::new(at(T0 + 22 * 3600));
    let mut cfg = config(&[Tier::daily(1)], 1000, 0.001);
    cfg.utc_offset_secs = 3 * 3600;
    let e = create(dir.path(), cfg, &clock);
    e.insert(b"k").unwrap();
    clock.set(at(T0 + 86_400 + 20 * 3600)); // 23:00 local on day 1: same window
    assert!(e.contains(b"k").unwrap());
    clock.set(at(T0 + 86_400 + 21 * 3600)); // 00:00 local on day 2
    assert!(!e.contains(b"k").unwrap());
}

/// A clock that steps back behind the newest window is reported by stats
/// (the keys go on into that window, none is lost), and the report clears
/// once the clock is past the window's start again.
#[test]
fn stats_report_a_clock_behind_the_newest_window() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(7)], 1_000, 0.01), &clock);
    e.insert(b"before").unwrap();
    assert_eq!(e.stats().unwrap().clock_behind_secs, 0);
    clock.set(day(3));
    e.insert(b"day 3").unwrap();
    clock.set(day(1));
    assert!(e.insert(b"stepped back").unwrap());
    // From noon of day 1 to the start of day 3, the newest window.
    assert_eq!(e.stats().unwrap().clock_behind_secs, 36 * 3600);
    for k in [&b"before"[..], b"day 3", b"stepped back"] {
        assert!(e.contains(k).unwrap(), "a key lost behind the clock");
    }
    clock.set(day(3));
    assert_eq!(e.stats().unwrap().clock_behind_secs, 0);
}

/// While the clock is behind the newest windows, a remove of a counting
/// tier takes back the insert made just before it: that insert went to the
/// newest windows, and the remove looked in the window of the clock's
/// instant, answered `false` and left the key (found in review).
#[test]
fn a_remove_behind_the_clock_takes_back_the_insert_made_now() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(
        dir.path(),
        config(&[Tier::daily(7).counting()], 1_000, 0.01),
        &clock,
    );
    e.insert(b"day 0").unwrap();
    clock.set(day(3));
    e.insert(b"day 3").unwrap();
    clock.set(day(1)); // the window of day 1 was never opened
    assert!(e.insert(b"k").unwrap());
    assert!(
        e.remove(b"k").unwrap(),
        "the insert made now was not taken back"
    );
    assert!(!e.contains(b"k").unwrap());
    assert!(e.contains(b"day 3").unwrap() && e.contains(b"day 0").unwrap());
    // The same with the clock's window open (day 0's, sealed).
    clock.set(day(0) + Duration::from_secs(3600));
    assert!(e.insert(b"k2").unwrap());
    assert!(e.remove(b"k2").unwrap());
    assert!(!e.contains(b"k2").unwrap());
    assert!(
        e.contains(b"day 0").unwrap(),
        "the remove took from another key's window"
    );
}

/// A clock set back after lookups walked it past a window boundary is not
/// a jump: with `max_clock_jump` set, the next insert measured the step
/// back as one and was refused until the clock caught up (found in review).
#[test]
fn a_step_back_is_not_a_clock_jump() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let opts = timebloom::Options::default()
        .clock(clock.clone())
        .max_clock_jump(Some(Duration::from_secs(3600)));
    let e =
        timebloom::Engine::create_with(dir.path(), config(&[Tier::daily(7)], 1_000, 0.01), opts)
            .unwrap();
    e.insert(b"a").unwrap();
    let boundary = T0 + 86_400;
    for i in 0..=12u64 {
        clock.set(at(boundary + i * 1800));
        e.contains(b"a").unwrap();
    }
    clock.set(at(boundary + 3600)); // five hours back, past the boundary
    assert!(e.insert(b"b").unwrap());
    // A forward jump past the limit is still refused.
    clock.set(at(boundary + 10 * 86_400));
    assert!(matches!(e.insert(b"c"), Err(Error::ClockJump { .. })));
}

/// A degraded open that goes on without the newest window (its file is
/// missing) does not take the clock to have jumped: the manifest named that
/// window, so the engine had already crossed into it. With
/// `max_clock_jump` set, such an open measured the step from the end of the
/// newest window left (12 hours at noon, past a limit of an hour) and was
/// refused with `ClockJump`, though the clock had not moved.
#[test]
fn a_degraded_open_without_the_newest_window_is_not_a_clock_jump() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(7)], 1_000, 0.01), &clock);
    for d in 0..3 {
        clock.set(day(d));
        e.insert(format!("k{d}").as_bytes()).unwrap();
    }
    e.close().unwrap();
    std::fs::remove_file(dir.path().join("seg").join("d-20260107-0.seg")).unwrap();
    let opts = timebloom::Options::default()
        .clock(clock.clone())
        .degraded(true)
        .max_clock_jump(Some(Duration::from_secs(3600)));
    let e = timebloom::Engine::open_with(dir.path(), opts.clone())
        .unwrap_or_else(|err| panic!("degraded open at the same instant refused: {err}"));
    assert_eq!(e.stats().unwrap().lost_windows, ["7d 20260107"]);
    assert!(e.contains(b"k1").unwrap());
    assert!(e.insert(b"k2").unwrap());
    // A real jump is still refused.
    clock.set(at(T0 + 3 * 86_400 + 2 * 3600));
    assert!(matches!(e.insert(b"x"), Err(Error::ClockJump { .. })));
}

/// Inserts read the open windows before the older ones
/// (`engine::write::open_first`). Each way that check can go must give the
/// answer of a full lookup, and a key found only in an older window must be
/// written again into the open windows, or it would expire early. Run for
/// single inserts and for batches, which take the same path a group at a
/// time.
fn older_window_keys_are_not_new_and_are_written_again(batch: bool) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0)); // a Monday
    let cfg = config(&[Tier::daily(2), Tier::weekly(3)], 1_000, 0.001);
    let e = create(dir.path(), cfg, &clock);
    // How many of `keys` an insert reports new.
    let insert = |keys: &[Vec<u8>]| match batch {
        true => e
            .insert_batch(keys)
            .unwrap()
            .into_iter()
            .filter(|n| *n)
            .count(),
        false => keys.iter().filter(|k| e.insert(k).unwrap()).count(),
    };
    let count = |v: &[Vec<u8>], f: &dyn Fn(&[u8]) -> bool| v.iter().filter(|k| f(k)).count();
    let keys: Vec<Vec<u8>> = (0..300).map(|i| url(7, i)).collect();
    assert_eq!(insert(&keys), 300);
    // Same day: every open window holds the keys.
    assert_eq!(insert(&keys), 0);
    // Tuesday: the week's window holds the keys, the new day's does not:
    // not new, and written into the day's window.
    clock.set(day(1));
    let (again, once) = keys.split_at(150);
    assert_eq!(insert(again), 0);
    // Wednesday: Monday's window has expired, Tuesday's answers a day.
    clock.set(day(2));
    let day_ago = |k: &[u8]| e.contains_within(k, DAY).unwrap();
    assert_eq!(count(again, &day_ago), 150, "written again on Tuesday");
    assert!(
        count(once, &day_ago) <= 5,
        "Monday's keys are past the daily tier"
    );
    // The next Monday: only last week's window holds the keys. Not new,
    // and written into this week's window; new keys among them are new.
    clock.set(day(7));
    let (refreshed, old) = keys.split_at(100);
    let fresh: Vec<Vec<u8>> = (0..100).map(|i| url(8, i)).collect();
    let mixed: Vec<Vec<u8>> = refreshed.iter().chain(&fresh).cloned().collect();
    let new = insert(&mixed);
    assert!(
        (95..=100).contains(&new),
        "{new} new of 100 new and 100 old"
    );
    // Three weeks on, last week's window has expired; this week's kept the
    // keys inserted again.
    clock.set(day(21));
    assert_eq!(count(refreshed, &|k| e.contains(k).unwrap()), 100);
    assert_eq!(count(&fresh, &|k| e.contains(k).unwrap()), 100);
    assert!(count(old, &|k| e.contains(k).unwrap()) <= 5);
    // And a new key is new.
    let later: Vec<Vec<u8>> = (0..300).map(|i| url(9, i)).collect();
    assert!(insert(&later) >= 295);
}

#[test]
fn insert_of_a_key_from_an_older_window_is_not_new_and_is_written_again() {
    older_window_keys_are_not_new_and_are_written_again(false);
}

#[test]
fn insert_batch_of_keys_from_older_windows_is_not_new_and_writes_them_again() {
    older_window_keys_are_not_new_and_are_written_again(true);
}

/// A clock stepped back behind the newest window brings back no window
/// that the rotation to it expired. A one-day tier whose clock stepped
/// back two seconds across midnight took a backfill at the clock's instant
/// into a new window for the day before: two windows of a one-window tier
/// live at once, each sized for the whole rate, which `contains` read both
/// of (at four times their plan, 14,852 false positives in a million
/// negatives at a configured 1%: 1.49 x). Such a backfill is now refused
/// as expired, as it is once the clock is right; one into a window the
/// newest still keeps is taken.
#[test]
fn a_clock_behind_brings_back_no_expired_window() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(10));
    let p = 0.01;
    let e = create(dir.path(), config(&[Tier::daily(1)], 20_000, p), &clock);
    let keys: Vec<Vec<u8>> = (0..80_000).map(|i| url(70, i)).collect();
    for chunk in keys.chunks(4096) {
        e.insert_batch(chunk).unwrap();
    }
    let behind = at(T0 + 10 * 86_400 - 2);
    clock.set(behind);
    let mut refused = 0;
    for i in 0..80_000 {
        match e.insert_at(&url(71, i), behind) {
            Err(Error::WindowUnavailable { .. }) => refused += 1,
            r => {
                r.unwrap();
            }
        }
    }
    let fp = (0..1_000_000u64)
        .filter(|&i| e.contains(&url(72, i)).unwrap())
        .count();
    // One window at four times its plan runs at about 0.75 p; p + 1.1 p is
    // far beyond the binomial spread of a million probes (100 at 1%).
    assert!(
        fp as f64 <= 1.1 * p * 1e6,
        "{fp} false positives in a million at a configured {p}"
    );
    assert_eq!(refused, 80_000, "backfills into an expired window taken");
    assert_eq!(e.stats().unwrap().tiers[0].segments.len(), 1);
    assert!(keys.iter().step_by(97).all(|k| e.contains(k).unwrap()));

    // Seven days: the clock two days behind the newest window (day 10),
    // whose rotation left days 4 to 10 live.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(10));
    let e = create(dir.path(), config(&[Tier::daily(7)], 1_000, p), &clock);
    e.insert(b"day 10").unwrap();
    clock.set(day(8));
    assert!(matches!(
        e.insert_at(b"day 3", day(3)),
        Err(Error::WindowUnavailable { .. })
    ));
    assert!(e.insert_at(b"day 4", day(4)).unwrap());
    assert!(e.contains(b"day 4").unwrap() && e.contains(b"day 10").unwrap());
    assert!(e.stats().unwrap().tiers[0].segments.len() <= 7);
}

/// `Config::check_new_horizon` answers as a new engine of that
/// configuration does (the command line asks it before creating one, so
/// that a refused `--within` leaves nothing behind): the same horizons
/// refused, with the same longest horizon kept, at several instants and
/// offsets, for window and fingerprint tiers.
#[test]
fn check_new_horizon_answers_as_a_new_engine_does() {
    let tier_sets: [&[Tier]; 4] = [
        &[Tier::daily(7)],
        &[Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
        &[Tier::custom(Duration::from_secs(3600), 48)],
        &[Tier::fingerprint(30), Tier::daily(3)],
    ];
    for tiers in tier_sets {
        for offset in [0, 2 * 3600, -5 * 3600 - 1800] {
            for at in [day(0), day(3), at(T0 + 40 * 86_400 + 23 * 3600 + 59 * 60)] {
                let mut cfg = config(tiers, 1000, 0.01);
                cfg.utc_offset_secs = offset;
                let dir = tempfile::tempdir().unwrap();
                let e = create(dir.path(), cfg.clone(), &ManualClock::new(at));
                for hours in [
                    1,
                    23,
                    24,
                    25,
                    71,
                    72,
                    7 * 24,
                    8 * 24,
                    29 * 24,
                    40 * 24,
                    400 * 24,
                ] {
                    let h = Duration::from_secs(hours * 3600);
                    let engine = e.contains_within(b"k", h).map(|_| ());
                    let pre = cfg.check_new_horizon(at, h);
                    assert_eq!(
                        format!("{engine:?}"),
                        format!("{pre:?}"),
                        "{tiers:?} offset {offset} horizon {hours}h"
                    );
                }
            }
        }
    }
}

/// A clock set or created past 9999 (or before 1970) is refused by every
/// call that reads it, as one advanced there is: it used to read as
/// 1970-01-01, so an engine made at 2^62 seconds took inserts.
#[test]
fn a_clock_outside_1970_to_9999_is_refused_however_it_got_there() {
    use std::time::UNIX_EPOCH;
    use timebloom::Clock;
    let far = UNIX_EPOCH + Duration::from_secs(1 << 62);
    let before = UNIX_EPOCH - Duration::from_secs(1);
    let cfg = || config(&[Tier::daily(7)], 1000, 0.01);
    let refused = |r: timebloom::Result<bool>, how: &str| {
        assert!(
            matches!(r, Err(Error::WindowUnavailable { .. })),
            "{how}: {r:?}"
        );
    };

    // Advanced, set, or shown from the start.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), cfg(), &clock);
    clock.advance(Duration::from_secs(1 << 62));
    refused(e.insert(b"https://example.com/a"), "advanced past 9999");
    clock.set(far);
    refused(e.insert(b"https://example.com/a"), "set past 9999");
    refused(
        e.contains(b"https://example.com/a"),
        "lookup, set past 9999",
    );
    clock.set(before);
    refused(e.insert(b"https://example.com/a"), "set before 1970");
    clock.set(day(0));
    assert!(e.insert(b"https://example.com/a").unwrap());
    drop(e);

    for (t, how) in [(far, "created past 9999"), (before, "created before 1970")] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(t);
        let made = timebloom::Engine::create_with(
            dir.path(),
            cfg(),
            timebloom::Options::default().clock(clock.clone()),
        );
        assert!(
            matches!(made, Err(Error::WindowUnavailable { .. })),
            "{how}: {:?}",
            made.map(|_| ())
        );
        assert_eq!(clock.now(), t, "{how}: the clock shows what it was given");
    }
}

/// A clock stepped back behind the newest window reads horizons from the
/// tiers that still hold them: the daily tier's rotation at day 10 expired
/// days 0 to 3, so a horizon reaching day 2 from a clock at day 7 is the
/// monthly tier's to answer, not the daily tier's (whose windows of days 2
/// and 3 are gone).
#[test]
fn a_clock_behind_answers_horizons_from_a_tier_that_still_holds_them() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(2));
    let e = create(
        dir.path(),
        config(&[Tier::daily(7), Tier::monthly(3)], 1000, 0.001),
        &clock,
    );
    e.insert(b"day 2").unwrap();
    clock.set(day(10));
    e.insert(b"day 10").unwrap();
    clock.set(day(7));
    // Inserted exactly five days before the clock's instant.
    assert!(
        e.contains_within(b"day 2", 5 * DAY).unwrap(),
        "a key inserted within the horizon reads as not seen"
    );
    assert!(e.contains(b"day 2").unwrap());
    // Nothing of the daily tier's live windows is left out either.
    assert!(e.contains_within(b"day 10", DAY).unwrap());
    drop(e);

    // One daily tier: a horizon reaching an expired window is refused, and
    // the longest horizon the refusal names is one the engine answers.
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(10));
    let e = create(dir.path(), config(&[Tier::daily(7)], 1000, 0.001), &clock);
    e.insert(b"day 10").unwrap();
    clock.set(day(7));
    let max = match e.contains_within(b"day 10", 5 * DAY) {
        Err(Error::HorizonTooLong { max_secs, .. }) => max_secs,
        other => panic!("a horizon reaching day 2, expired at day 10: {other:?}"),
    };
    // From noon of day 7 back to the start of day 4, the oldest kept.
    assert_eq!(max, 3 * 86_400 + 43_200);
    assert!(e
        .contains_within(b"day 10", Duration::from_secs(max))
        .unwrap());
}

/// `contains` reads the tier whose live windows reach furthest back from
/// the windows the engine has, also after a reopen with the clock behind
/// them: the weekly tier's rotation at Monday day 14 kept weeks 3 and 4
/// only, while the daily tier still keeps Saturday day 5 (week 2), so the
/// daily tier answers, not the weekly one whose windows of the clock's
/// reach (week 2 from Friday day 11) are gone.
#[test]
fn a_clock_behind_at_reopen_reads_the_tier_that_reaches_furthest_back() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(5));
    let e = create(
        dir.path(),
        config(&[Tier::daily(10), Tier::weekly(2)], 1000, 0.001),
        &clock,
    );
    e.insert(b"day 5").unwrap();
    clock.set(day(14));
    e.insert(b"day 14").unwrap();
    assert!(e.contains(b"day 5").unwrap());
    e.close().unwrap();
    clock.set(day(11));
    let e = open(dir.path(), &clock);
    assert!(
        e.contains(b"day 5").unwrap(),
        "a key the daily tier keeps reads as absent"
    );
    assert_eq!(
        e.contains_batch(&[&b"day 5"[..], &b"day 14"[..]]).unwrap(),
        [true, true]
    );
    assert!(
        !e.insert(b"day 5").unwrap(),
        "a key the daily tier keeps is new"
    );
}

/// A clock stepped back behind every window its tiers keep (a daily tier
/// of two windows rotated to day 3, the clock set back to day 1) answers
/// no horizon: every one, 0 s included, reaches days a rotation expired.
/// The refusal was `HorizonTooLong` naming 0 s as the longest horizon the
/// engine could answer, which it refused too; it is `WindowUnavailable`
/// saying the clock is behind, and horizons are answered again once the
/// clock is back among the kept windows.
#[test]
fn a_clock_behind_every_kept_window_says_so_for_every_horizon() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(2)], 1000, 0.001), &clock);
    for d in 1..=3 {
        clock.set(day(d));
        e.insert(format!("day {d}").as_bytes()).unwrap();
    }
    clock.set(at(T0 + 86_400 + 43_200));
    for h in [0, 3600, 86_400] {
        match e.contains_within(b"day 3", Duration::from_secs(h)) {
            Err(Error::WindowUnavailable { reason }) => {
                assert!(reason.contains("behind every window"), "{reason}")
            }
            other => panic!("horizon {h}s with the clock behind every kept window: {other:?}"),
        }
    }
    clock.set(day(3));
    assert!(e.contains_within(b"day 3", DAY).unwrap());
}

/// The UTC instant of a civil date-time at `offset` seconds east of UTC.
fn civil(y: i32, m: u8, d: u8, hh: u8, mm: u8, ss: u8, offset: i32) -> u64 {
    let date = time::Date::from_calendar_date(y, time::Month::try_from(m).unwrap(), d).unwrap();
    let t = time::PrimitiveDateTime::new(date, time::Time::from_hms(hh, mm, ss).unwrap());
    t.assume_offset(time::UtcOffset::from_whole_seconds(offset).unwrap())
        .unix_timestamp() as u64
}

/// Steps the clock through window edges of one tier (a second before, at
/// and after each boundary), inserting a key at each step, and checks every
/// key against every horizon: a key inserted within the horizon is always
/// present, one inserted more than a window before `now - horizon` is
/// absent, and `contains` keeps a key exactly while its window is live.
fn check_edges(tier: Tier, offset: i32, starts: &[u64], window_of: impl Fn(u64) -> i64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(at(starts[0] - 1));
    let mut cfg = config(&[tier], 100, 1e-7);
    cfg.utc_offset_secs = offset;
    let e = create(dir.path(), cfg, &clock);
    let mut keys: Vec<(u64, Vec<u8>)> = Vec::new();
    let r = i64::from(tier.retention);
    let mut steps = Vec::new();
    for &s in starts {
        steps.extend([s - 1, s, s + 1]);
    }
    let nominal = match tier.span {
        Span::Day => 86_400,
        Span::Week => 7 * 86_400,
        Span::Month => 31 * 86_400,
        Span::Custom(s) => s,
    };
    for (i, &now) in steps.iter().enumerate() {
        clock.set(at(now));
        let k = format!("key-{i}-{now}").into_bytes();
        // Every third step only reads: lookups past a boundary no write
        // rotated across yet.
        if i % 3 != 1 {
            assert!(e.insert(&k).unwrap(), "{tier} {now}: new key not new");
            keys.push((now, k));
        }
        let cur = window_of(now);
        // The reach stats report is the longest horizon answered.
        let covers = e.stats().unwrap().tiers[0].covers_secs;
        assert!(e.contains_within(b"x", Duration::from_secs(covers)).is_ok());
        match e.contains_within(b"x", Duration::from_secs(covers + 1)) {
            Err(Error::HorizonTooLong { max_secs, .. }) => assert_eq!(max_secs, covers, "{tier}"),
            other => panic!("{tier} at {now}: {covers} + 1 s: {other:?}"),
        }
        for (t, k) in &keys {
            let live = window_of(*t) > cur - r;
            assert_eq!(
                e.contains(k).unwrap(),
                live,
                "{tier} off {offset}: key at {t}, now {now}"
            );
            for h in [
                0u64,
                1,
                59,
                3_600,
                86_399,
                86_400,
                86_401,
                7 * 86_400,
                40 * 86_400,
            ] {
                let got = match e.contains_within(k, Duration::from_secs(h)) {
                    Ok(b) => b,
                    Err(Error::HorizonTooLong { max_secs, .. }) => {
                        // Refused only when the oldest live window starts after now - h.
                        assert!(h > max_secs, "{tier}: {h} refused, max {max_secs}");
                        continue;
                    }
                    Err(err) => panic!("{tier} now {now} h {h}: {err}"),
                };
                if now - t <= h {
                    assert!(
                        got,
                        "{tier} off {offset}: key at {t} absent at {now} within {h}"
                    );
                }
                if now - t > h + nominal {
                    assert!(
                        !got,
                        "{tier} off {offset}: key at {t} present at {now} within {h}"
                    );
                }
            }
        }
    }
    e.verify().unwrap();
    drop(e);
    // Reopen after several boundaries: expiry exactly by windows.
    let later = *steps.last().unwrap() + (r as u64 - 1).min(3) * nominal;
    clock.set(at(later));
    let e = open(dir.path(), &clock);
    let cur = window_of(later);
    for (t, k) in &keys {
        let live = window_of(*t) > cur - r;
        assert_eq!(
            e.contains(k).unwrap(),
            live,
            "{tier} after reopen: key at {t}"
        );
    }
}

#[test]
fn hourly_and_custom_windows_at_their_edges_with_offsets() {
    for offset in [0, 19_800, -34_200, 86_399, -86_399] {
        let o = i64::from(offset);
        for (tier, secs) in [
            ("6h".parse::<Tier>().unwrap(), 3_600i64),
            ("3x90min".parse().unwrap(), 5_400),
            ("1x7h".parse().unwrap(), 25_200),
        ] {
            let base = (T0 as i64 + o).div_euclid(secs) * secs - o;
            let starts: Vec<u64> = (1..8).map(|i| (base + i * secs) as u64).collect();
            check_edges(tier, offset, &starts, |t| (t as i64 + o).div_euclid(secs));
        }
    }
}

#[test]
fn days_weeks_and_months_at_their_edges_with_offsets() {
    for offset in [0, 3_600, -18_000, 50_400, -43_200] {
        let o = i64::from(offset);
        let day = |t: u64| (t as i64 + o).div_euclid(86_400);
        let month = |t: u64| {
            let d = time::OffsetDateTime::from_unix_timestamp(t as i64 + o).unwrap();
            i64::from(d.year()) * 12 + i64::from(u8::from(d.month())) - 1
        };
        // Month ends: Jan 31 -> Feb 29 (2024), Feb 28 (2100), year ends.
        let months: Vec<u64> = [(2024, 1), (2024, 2), (2024, 3), (2024, 4)]
            .iter()
            .map(|&(y, m)| civil(y, m, 1, 0, 0, 0, offset))
            .collect();
        check_edges(Tier::monthly(2), offset, &months, month);
        let months: Vec<u64> = [(2099, 12), (2100, 1), (2100, 2), (2100, 3)]
            .iter()
            .map(|&(y, m)| civil(y, m, 1, 0, 0, 0, offset))
            .collect();
        check_edges(Tier::monthly(1), offset, &months, month);
        let days: Vec<u64> = [
            (2024, 2, 28),
            (2024, 2, 29),
            (2024, 3, 1),
            (2038, 1, 19),
            (2038, 1, 20),
        ]
        .iter()
        .map(|&(y, m, d)| civil(y, m, d, 0, 0, 0, offset))
        .collect();
        check_edges(Tier::daily(3), offset, &days[..3], day);
        check_edges(Tier::daily(2), offset, &days[3..], day);
        check_edges(Tier::fingerprint(3), offset, &days[..3], day);
        check_edges(Tier::fingerprint(2), offset, &days[3..], day);
        // ISO weeks start on Monday: 2026-12-28, 2027-01-04, 2027-01-11.
        let weeks: Vec<u64> = [(2026, 12, 28), (2027, 1, 4), (2027, 1, 11)]
            .iter()
            .map(|&(y, m, d)| civil(y, m, d, 0, 0, 0, offset))
            .collect();
        check_edges(Tier::weekly(2), offset, &weeks, |t| {
            (day(t) + 3).div_euclid(7)
        });
    }
}

/// The first and last instants the engine accepts, with windows that start
/// before 1970 (a negative offset) or end after 9999, for every span kind.
#[test]
fn windows_at_the_ends_of_the_clock_range() {
    let tiers = [
        Tier::daily(2),
        Tier::weekly(2),
        Tier::monthly(2),
        "5h".parse().unwrap(),
        "2x7h".parse().unwrap(),
        "3d:fingerprint".parse().unwrap(),
    ];
    let last = civil(9999, 12, 31, 23, 59, 59, 0);
    let year_10000 = {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg = config(&tiers, 100, 0.001);
        cfg.utc_offset_secs = 3_600;
        let opts = timebloom::Options::default().clock(ManualClock::new(at(last - 700)));
        timebloom::Engine::create_with(dir.path(), cfg, opts).map(|_| ())
    };
    // At +01:00 the last hour of 9999 (UTC) is local year 10000: no window
    // there has a file name, an error naming why.
    assert!(
        matches!(&year_10000, Err(Error::WindowUnavailable { reason }) if reason.contains("year")),
        "{year_10000:?}"
    );
    for (start, offset) in [
        (0u64, -3_600),
        (0, 50_400),
        (last - 700, 0),
        (last - 700, -43_200),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(at(start));
        let mut cfg = config(&tiers, 100, 0.001);
        cfg.utc_offset_secs = offset;
        let e = create(dir.path(), cfg, &clock);
        for step in [0u64, 1, 100, 599, 600, 601, 700] {
            clock.set(at(start + step));
            let k = format!("k{step}");
            assert!(e.insert(k.as_bytes()).unwrap(), "{start} {offset} {step}");
            assert!(e.contains(k.as_bytes()).unwrap());
            assert!(e.contains_within(k.as_bytes(), Duration::ZERO).unwrap());
            e.stats().unwrap();
        }
        e.verify().unwrap();
        drop(e);
        let e = open(dir.path(), &clock);
        assert!(e.contains(b"k0").unwrap());
    }
}

/// `insert_at` and `remove_at` of instants at window edges pair up in
/// counting tiers of hours, days and months at an offset, and a remove at
/// another instant of the same window takes back the same insert.
#[test]
fn insert_at_and_remove_at_pair_up_at_window_edges() {
    let offset = -9 * 3_600 - 1_800;
    let o = i64::from(offset);
    let tiers = [
        "30h:counting".parse::<Tier>().unwrap(),
        Tier::daily(3).counting(),
        Tier::monthly(2).counting(),
    ];
    // 2024-03-01T00:00 local: an hour, a day and a month boundary at once.
    let b = civil(2024, 3, 1, 0, 0, 0, offset);
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(at(b + 5 * 3_600 + 17));
    let mut cfg = config(&tiers, 100, 1e-6);
    cfg.utc_offset_secs = offset;
    let e = create(dir.path(), cfg, &clock);
    let now = b + 5 * 3_600 + 17;
    for t in [b - 1, b, b + 1, b + 3_599, b + 3_600, now, now + 100] {
        let k = format!("k{t}");
        assert!(e.insert_at(k.as_bytes(), at(t)).unwrap(), "{t}");
        let h = Duration::from_secs(now.saturating_sub(t));
        assert!(e.contains_within(k.as_bytes(), h).unwrap(), "{t}");
    }
    // The same window, another instant: the insert is taken back.
    let before = format!("k{}", b - 1);
    assert!(e.remove_at(before.as_bytes(), at(b - 3_600)).unwrap());
    assert!(!e.contains(before.as_bytes()).unwrap());
    // Another hour of the same day: the hourly window does not hold it.
    assert!(!e
        .remove_at(format!("k{b}").as_bytes(), at(b + 3_600))
        .unwrap());
    assert!(e.contains(format!("k{b}").as_bytes()).unwrap());
    assert!(e.remove_at(format!("k{b}").as_bytes(), at(b + 59)).unwrap());
    assert!(!e.contains(format!("k{b}").as_bytes()).unwrap());
    // Past the current window is the future; before the oldest month, gone.
    let next_hour = ((now as i64 + o).div_euclid(3_600) + 1) * 3_600 - o;
    assert!(matches!(
        e.insert_at(b"x", at(next_hour as u64)),
        Err(Error::WindowUnavailable { .. })
    ));
    assert!(e.insert_at(b"x", at(next_hour as u64 - 1)).is_ok());
    let feb = civil(2024, 2, 1, 0, 0, 0, offset);
    assert!(e.insert_at(b"y", at(feb)).unwrap());
    assert!(matches!(
        e.insert_at(b"y", at(feb - 1)),
        Err(Error::WindowUnavailable { .. })
    ));
    e.verify().unwrap();
    drop(e);
    // Reopen 30 hours on: the hourly windows of before b expired, the
    // daily one of Feb 29 still live (3 days), February's month too.
    clock.set(at(b + 30 * 3_600));
    let e = open(dir.path(), &clock);
    assert!(e.contains(b"y").unwrap());
    assert!(e.contains(format!("k{}", b + 1).as_bytes()).unwrap());
    assert!(e
        .contains_within(
            format!("k{}", b + 1).as_bytes(),
            Duration::from_secs(30 * 3_600)
        )
        .unwrap());
    assert!(e
        .remove_at(format!("k{}", b + 1).as_bytes(), at(b + 1))
        .unwrap());
    assert!(!e.contains(format!("k{}", b + 1).as_bytes()).unwrap());
}

/// Mixed tiers (hours, days, weeks, months) across a month end at an
/// offset: `contains` finds a key exactly while some tier keeps its
/// window, and a horizon never misses a key inserted within it.
#[test]
fn mixed_tiers_across_a_month_end_keep_exactly_the_live_keys() {
    let offset = 5 * 3_600 + 2_700;
    let o = i64::from(offset);
    let tiers = [
        "6h".parse::<Tier>().unwrap(),
        Tier::daily(2),
        Tier::weekly(1),
        Tier::monthly(1),
    ];
    let dir = tempfile::tempdir().unwrap();
    let first = civil(2026, 2, 27, 22, 0, 0, offset);
    let clock = ManualClock::new(at(first - 1));
    let mut cfg = config(&tiers, 100, 1e-9);
    cfg.utc_offset_secs = offset;
    let e = create(dir.path(), cfg, &clock);
    let day = |t: i64| (t + o).div_euclid(86_400);
    let month = |t: i64| {
        let d = time::OffsetDateTime::from_unix_timestamp(t + o).unwrap();
        i64::from(d.year()) * 12 + i64::from(u8::from(d.month())) - 1
    };
    // Whether some tier keeps the window of `t` at `now`.
    let live = |t: i64, now: i64| {
        (t + o).div_euclid(3_600) > (now + o).div_euclid(3_600) - 6
            || day(t) > day(now) - 2
            || (day(t) + 3).div_euclid(7) == (day(now) + 3).div_euclid(7)
            || month(t) == month(now)
    };
    let mut keys: Vec<(i64, Vec<u8>)> = Vec::new();
    for step in 0..(30 * 8) {
        let base = first as i64 + step * 3 * 3_600;
        for now in [base - 1, base, base + 1] {
            clock.set(at(now as u64));
            if step % 2 == 0 {
                let k = format!("m{now}").into_bytes();
                e.insert(&k).unwrap();
                keys.push((now, k));
            }
            for (t, k) in &keys {
                assert_eq!(
                    e.contains(k).unwrap(),
                    live(*t, now),
                    "key at {t}, now {now}"
                );
                for h in [3_600u64, 86_400, 3 * 86_400] {
                    if let Ok(got) = e.contains_within(k, Duration::from_secs(h)) {
                        if (now - t) as u64 <= h {
                            assert!(got, "key at {t} absent at {now} within {h}");
                        }
                    }
                }
            }
        }
    }
}

/// A tier keeping one window expires it at each boundary: the step into
/// the next window is taken even when it expires every key, and only a
/// step that also passes a whole window of every tier unseen is a jump.
#[test]
fn single_window_tiers_step_into_the_next_window_but_not_past_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let tiers = [Tier::daily(1), "1x7h".parse().unwrap()];
    let e = create(dir.path(), config(&tiers, 100, 0.001), &clock);
    e.insert(b"a").unwrap();
    // Day 1, 13:00: both windows holding "a" expire; the day passed no
    // whole daily window unseen.
    clock.set(day(1) + Duration::from_secs(3_600));
    assert!(e.insert(b"b").unwrap());
    assert!(!e.contains(b"a").unwrap());
    // Two days on, a whole window of each tier passes unseen: a jump.
    clock.set(day(3) + Duration::from_secs(3_600));
    assert!(matches!(e.insert(b"c"), Err(Error::ClockJump { .. })));
    clock.set(day(1) + Duration::from_secs(7_200));
    assert!(e.contains(b"b").unwrap());
}
