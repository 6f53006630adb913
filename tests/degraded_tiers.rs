//! Degraded opens of engines with several tiers: what a lost window of one
//! tier costs the lookups, when every tier records every insert.

mod common;

use std::fs;
use std::path::Path;

use common::{config, create, day, url, DAY};
use timebloom::{Engine, Error, ManualClock, Options, Tier};

const N: u64 = 300;

/// Keys of set 1 on day 0 (Monday, sealed in the daily tier) and of set 2
/// on day 2 (today); closed.
fn two_sets(dir: &Path, tiers: &[Tier]) -> ManualClock {
    let clock = ManualClock::new(day(0));
    let e = create(dir, config(tiers, 2_000, 0.001), &clock);
    let keys: Vec<Vec<u8>> = (0..N).map(|i| url(1, i)).collect();
    e.insert_batch(&keys).unwrap();
    clock.set(day(2));
    let keys: Vec<Vec<u8>> = (0..N).map(|i| url(2, i)).collect();
    e.insert_batch(&keys).unwrap();
    e.close().unwrap();
    clock
}

/// Removes every segment file whose name starts with `prefix`.
fn remove_files(dir: &Path, prefix: &str) -> usize {
    let mut n = 0;
    for f in fs::read_dir(dir.join("seg")).unwrap() {
        let f = f.unwrap();
        if f.file_name().to_string_lossy().starts_with(prefix) {
            fs::remove_file(f.path()).unwrap();
            n += 1;
        }
    }
    n
}

fn set(n: u64) -> Vec<Vec<u8>> {
    (0..N).map(|i| url(n, i)).collect()
}

fn degraded(clock: &ManualClock) -> Options {
    Options::default().clock(clock.clone()).degraded(true)
}

/// Every key of sets 1 and 2 reads present, one by one and in a batch.
fn all_present(e: &Engine, what: &str) {
    for n in [1, 2] {
        let keys = set(n);
        let one = keys.iter().filter(|k| !e.contains(k).unwrap()).count();
        assert_eq!(one, 0, "{what}: set {n}: keys read absent by contains");
        let batch = e.contains_batch(&keys).unwrap();
        let missed = batch.iter().filter(|p| !**p).count();
        assert_eq!(
            missed, 0,
            "{what}: set {n}: keys read absent by contains_batch"
        );
        // Every horizon the tiers keep, whichever tier it picks.
        for days in [3, 20, 60, 100] {
            let horizon = DAY * days;
            let mut missed = 0;
            for k in &keys {
                match e.contains_within(k, horizon) {
                    Ok(true) => {}
                    Ok(false) => missed += 1,
                    Err(Error::HorizonTooLong { .. }) => break,
                    Err(err) => panic!("{what}: within {days} days: {err}"),
                }
            }
            assert_eq!(
                missed, 0,
                "{what}: set {n}: keys read absent by contains_within {days} days"
            );
        }
    }
}

/// A writable degraded open: nothing the other tiers hold is reported new
/// by a check-and-insert, one by one or in a batch.
fn none_new(e: &Engine, what: &str) {
    let keys = set(1);
    let new = keys.iter().filter(|k| e.insert(k).unwrap()).count();
    assert_eq!(new, 0, "{what}: set 1: keys reported new by insert");
    let keys = set(2);
    let new = e
        .insert_batch(&keys)
        .unwrap()
        .iter()
        .filter(|n| **n)
        .count();
    assert_eq!(new, 0, "{what}: set 2: keys reported new by insert_batch");
    let fresh = format!("never seen by {what}");
    assert!(
        e.insert(fresh.as_bytes()).unwrap(),
        "{what}: a new key is new"
    );
    // Nor claimed again within a horizon that holds them.
    let keys = set(1);
    let claimed = keys
        .iter()
        .filter(|k| e.insert_within(k, DAY * 3).unwrap())
        .count();
    assert_eq!(claimed, 0, "{what}: set 1: keys claimed by insert_within");
    let keys = set(2);
    let claimed = e.insert_within_batch(&keys, DAY * 3).unwrap();
    let claimed = claimed.iter().filter(|n| **n).count();
    assert_eq!(
        claimed, 0,
        "{what}: set 2: keys claimed by insert_within_batch"
    );
}

/// Loses the windows whose files start with `prefix`, and checks a
/// read-only, then a writable degraded open.
fn lose_and_check(tiers: &[Tier], prefix: &str) {
    let dir = tempfile::tempdir().unwrap();
    let clock = two_sets(dir.path(), tiers);
    assert!(remove_files(dir.path(), prefix) > 0, "{prefix}");
    let what = format!("{tiers:?} without {prefix}*");
    let r = Engine::open_read_only_with(dir.path(), degraded(&clock)).unwrap();
    assert!(!r.stats().unwrap().lost_windows.is_empty());
    all_present(&r, &format!("read-only {what}"));
    // Past the boundary that no writer crossed: the live set from the clock.
    clock.set(day(3));
    all_present(&r, &format!("read-only past the boundary {what}"));
    r.close().unwrap();
    clock.set(day(2));
    let w = Engine::open_with(dir.path(), degraded(&clock)).unwrap();
    assert!(!w.stats().unwrap().lost_windows.is_empty());
    all_present(&w, &format!("writable {what}"));
    // The next day (a rotation): the lost window's keys still found.
    clock.set(day(3));
    all_present(&w, &format!("writable, the next day, {what}"));
    w.close().unwrap();
    // And by every later open, which is not degraded and lists no window
    // lost: the manifest keeps what was lost until it expires. (The
    // writable open above wrote none of the keys again: a check-and-insert
    // writes a key it finds into the open windows.)
    let plain = || Options::default().clock(clock.clone());
    let r = Engine::open_read_only_with(dir.path(), plain()).unwrap();
    let stats = r.stats().unwrap();
    assert!(stats.lost_windows.is_empty());
    assert!(!stats.lost_earlier.is_empty(), "{what}: lost_earlier");
    all_present(&r, &format!("a later read-only open {what}"));
    r.close().unwrap();
    let w = Engine::open_with(dir.path(), plain()).unwrap();
    all_present(&w, &format!("a later open {what}"));
    none_new(&w, &format!("a later open {what}"));
    w.close().unwrap();
}

fn manifest_names_lost(dir: &Path) -> bool {
    let bytes = fs::read(dir.join("MANIFEST")).unwrap();
    String::from_utf8_lossy(&bytes).contains("\"lost\"")
}

/// Loses the windows whose files start with `prefix` in a writable
/// degraded open on day 2, and checks that the manifest names them on each
/// of `kept` (after a write that day) and no longer on day `gone`.
fn lost_until(tiers: &[Tier], prefix: &str, kept: &[u64], gone: u64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = two_sets(dir.path(), tiers);
    assert!(!manifest_names_lost(dir.path()));
    assert!(remove_files(dir.path(), prefix) > 0);
    let w = Engine::open_with(dir.path(), degraded(&clock)).unwrap();
    w.close().unwrap();
    assert!(manifest_names_lost(dir.path()));
    for &d in kept.iter().chain([&gone]) {
        clock.set(day(d));
        let w = Engine::open_with(dir.path(), Options::default().clock(clock.clone())).unwrap();
        w.insert(format!("day {d}").as_bytes()).unwrap();
        w.close().unwrap();
        let named = manifest_names_lost(dir.path());
        assert_eq!(named, d != gone, "{prefix}: day {d}");
        let r = Engine::open_read_only_with(dir.path(), Options::default().clock(clock.clone()));
        let earlier = r.unwrap().stats().unwrap().lost_earlier;
        assert_eq!(
            earlier.is_empty(),
            d == gone,
            "{prefix}: day {d}: {earlier:?}"
        );
    }
}

/// The manifest names a lost window until what it held has expired, and a
/// write after that drops it: week 2026W02 (days 0-6) expires with the
/// weekly tier's fourth week after it, on day 28.
#[test]
fn a_lost_window_is_kept_in_the_manifest_until_it_expires() {
    lost_until(&[Tier::daily(7), Tier::weekly(4)], "w-", &[10, 27], 28);
}

/// A lost table held keys up to the day it was lost (day 2), which a
/// 30-day table keeps through day 31.
#[test]
fn a_lost_table_is_kept_in_the_manifest_for_the_days_it_keeps() {
    lost_until(
        &[Tier::daily(7), Tier::fingerprint(30)],
        "f-",
        &[10, 31],
        32,
    );
}

/// The month window of `7d,4w,12m` lost: `contains` reads the month tier,
/// and read the keys the day and week tiers still hold as absent; a
/// check-and-insert reported them new.
#[test]
fn a_lost_window_of_the_longest_tier_leaves_the_keys_shorter_tiers_hold() {
    lose_and_check(&[Tier::daily(7), Tier::weekly(4), Tier::monthly(12)], "m-");
}

#[test]
fn a_lost_window_of_the_longest_counting_tier_leaves_the_keys_shorter_tiers_hold() {
    lose_and_check(
        &[Tier::daily(7).counting(), Tier::monthly(12).counting()],
        "m-",
    );
}

/// A lost fingerprint table (`7d,365d:fingerprint`): every key read absent,
/// though the daily tier held the week's.
#[test]
fn a_lost_fingerprint_table_leaves_the_keys_the_daily_tier_holds() {
    lose_and_check(&[Tier::daily(7), Tier::fingerprint(365)], "f-");
}

/// A lost window of a middle or the shortest tier: `contains` never read
/// it.
#[test]
fn a_lost_window_of_a_shorter_tier_costs_contains_nothing() {
    let tiers = [Tier::daily(7), Tier::weekly(4), Tier::monthly(12)];
    lose_and_check(&tiers, "w-");
    lose_and_check(&tiers, "d-");
    lose_and_check(&[Tier::daily(7), Tier::fingerprint(365)], "d-");
}

/// A counting engine whose month window was lost and made anew: `remove`
/// needs every window holding the instant to hold the key, and the new
/// month window does not, so the key is not taken back and still reads
/// present (from the daily tier), as docs/operations.md says.
#[test]
fn a_remove_of_a_key_a_lost_window_held_takes_nothing_back() {
    let tiers = [Tier::daily(7).counting(), Tier::monthly(12).counting()];
    let dir = tempfile::tempdir().unwrap();
    let clock = two_sets(dir.path(), &tiers);
    assert_eq!(remove_files(dir.path(), "m-"), 1);
    let w = Engine::open_with(dir.path(), degraded(&clock)).unwrap();
    let k = url(2, 0);
    assert!(!w.remove(&k).unwrap(), "the new month window lacks the key");
    assert!(w.contains(&k).unwrap(), "the daily window still holds it");
    // A key inserted after the open is taken back from both tiers.
    assert!(w.insert(b"after").unwrap());
    assert!(w.remove(b"after").unwrap());
    assert!(!w.contains(b"after").unwrap());
}
