//! What later opens make of the windows a degraded open lost: the
//! manifest's `lost` entries, read by every open until they expire.

mod common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::{config, create, day, url, DAY};
use timebloom::{Engine, ManualClock, Options, Tier};

/// Rewrites the MANIFEST with `lost` (a JSON array) as its lost windows,
/// its checksum kept valid (a hand-edited or damaged file that passes every
/// other check).
fn set_lost(dir: &Path, lost: &str) {
    let manifest = fs::read(dir.join("MANIFEST")).unwrap();
    let body = String::from_utf8(manifest[20..].to_vec()).unwrap();
    assert!(!body.contains("\"lost\""), "{body}");
    let at = body.find('{').unwrap() + 1;
    let body = format!("{}\n  \"lost\": {lost},{}", &body[..at], &body[at..]);
    let mut m = manifest[..20].to_vec();
    m[12..16].copy_from_slice(&(body.len() as u32).to_le_bytes());
    m[16..20].copy_from_slice(&crc32fast::hash(body.as_bytes()).to_le_bytes());
    m.extend_from_slice(body.as_bytes());
    fs::write(dir.join("MANIFEST"), m).unwrap();
}

/// Every lookup and write an open may make, each allowed to fail but not
/// to panic.
fn exercise(e: &Engine, writable: bool) {
    let keys: Vec<Vec<u8>> = (0..50).map(|i| url(7, i)).collect();
    let _ = e.contains(&keys[0]);
    let _ = e.contains_batch(&keys);
    for days in [0, 1, 3, 20, 60, 400] {
        let _ = e.contains_within(&keys[1], DAY * days);
    }
    let _ = e.stats();
    if writable {
        let _ = e.insert(&keys[2]);
        let _ = e.insert_batch(&keys);
        let _ = e.insert_within(&keys[3], DAY * 3);
        let _ = e.insert_within_batch(&keys, DAY * 3);
        let _ = e.remove(&keys[4]);
    }
}

/// A manifest whose lost windows are absurd (windows at the ends of the
/// index range, expiries at the ends of time) opens and answers, or is
/// refused as corrupt: never a panic.
#[test]
fn absurd_lost_windows_never_panic() {
    let tier_sets: [&[Tier]; 4] = [
        &[Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
        &[Tier::daily(7), Tier::fingerprint(365)],
        &[
            Tier::custom(Duration::from_secs(6 * 3600), 4),
            Tier::daily(7).counting(),
        ],
        &[Tier::daily(7).counting(), Tier::monthly(12).counting()],
    ];
    let windows = [i64::MIN, i64::MIN + 1, -1, 0, 1, i64::MAX - 1, i64::MAX];
    let expiries = [i64::MIN, 0, i64::MAX];
    for tiers in tier_sets {
        for &w in &windows {
            for &x in &expiries {
                let lost: Vec<String> = (0..tiers.len())
                    .map(|t| format!("{{\"tier\": {t}, \"window\": {w}, \"expires\": {x}}}"))
                    .collect();
                let lost = format!("[{}]", lost.join(", "));
                let dir = tempfile::tempdir().unwrap();
                let clock = ManualClock::new(day(0));
                let e = create(dir.path(), config(tiers, 1_000, 0.01), &clock);
                e.insert_batch(&[url(7, 0), url(7, 1)]).unwrap();
                e.close().unwrap();
                set_lost(dir.path(), &lost);
                let what = format!("{tiers:?} lost {lost}");
                let r = std::panic::catch_unwind(|| {
                    let opts = || Options::default().clock(clock.clone());
                    if let Ok(r) = Engine::open_read_only_with(dir.path(), opts()) {
                        exercise(&r, false);
                        let _ = r.close();
                    }
                    if let Ok(w) = Engine::open_with(dir.path(), opts()) {
                        exercise(&w, true);
                        clock.set(day(40));
                        exercise(&w, true);
                        let _ = w.close();
                        clock.set(day(0));
                    }
                    let _ = Engine::open_with(dir.path(), opts().allow_clock_jump(true))
                        .map(|w| w.close());
                });
                assert!(r.is_ok(), "{what}: panicked");
            }
        }
    }
}

fn manifest_names_lost(dir: &Path) -> bool {
    let bytes = fs::read(dir.join("MANIFEST")).unwrap();
    String::from_utf8_lossy(&bytes).contains("\"lost\"")
}

fn secs(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// Inserts keys on day 0 into an engine of `tiers` at `offset`, loses the
/// files starting with `prefix` in a writable degraded open, and checks
/// that later plain opens find the keys and the manifest names the lost
/// window until just before `expires` (UTC seconds), not from it on.
fn kept_until(tiers: &[Tier], offset: i32, prefix: &str, expires: i64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let mut cfg = config(tiers, 1_000, 0.001);
    cfg.utc_offset_secs = offset;
    let e = create(dir.path(), cfg, &clock);
    let keys: Vec<Vec<u8>> = (0..200).map(|i| url(3, i)).collect();
    e.insert_batch(&keys).unwrap();
    e.close().unwrap();
    let mut n = 0;
    for f in fs::read_dir(dir.path().join("seg")).unwrap() {
        let f = f.unwrap();
        if f.file_name().to_string_lossy().starts_with(prefix) {
            fs::remove_file(f.path()).unwrap();
            n += 1;
        }
    }
    assert!(n > 0, "{prefix}");
    let opts = || {
        Options::default()
            .clock(clock.clone())
            .allow_clock_jump(true)
    };
    let w = Engine::open_with(dir.path(), opts().degraded(true)).unwrap();
    assert!(!w.stats().unwrap().lost_windows.is_empty());
    w.close().unwrap();
    assert!(manifest_names_lost(dir.path()));
    // A later plain open still finds every key.
    let w = Engine::open_with(dir.path(), opts()).unwrap();
    let missed = keys.iter().filter(|k| !w.contains(k).unwrap()).count();
    assert_eq!(missed, 0, "{tiers:?} without {prefix}*: keys read absent");
    w.close().unwrap();
    // Writes along the way (every few hours), so that no open meets a
    // clock far past the windows it has.
    let start = secs(day(0));
    let mut t = start;
    let step = 3 * 3600;
    while t < expires + step {
        let at = if t < expires - 1 && t + step >= expires - 1 {
            expires - 1
        } else if t < expires && t + step >= expires {
            expires
        } else {
            t + step
        };
        clock.set(std::time::UNIX_EPOCH + Duration::from_secs(at as u64));
        let w = Engine::open_with(dir.path(), opts()).unwrap();
        w.insert(format!("at {at}").as_bytes()).unwrap();
        w.close().unwrap();
        assert_eq!(
            manifest_names_lost(dir.path()),
            at < expires,
            "{tiers:?} {prefix} offset {offset}: at {} s from day 0 (expiry {})",
            at - start,
            expires - start
        );
        t = at;
    }
}

/// A 6-hour window lost (the tier reaching furthest back), at +05:00: it
/// is named until the twelfth window after it starts.
#[test]
fn a_lost_six_hour_window_is_kept_until_it_expires() {
    let s = 6 * 3600;
    let off = 5 * 3600;
    let t = secs(day(0));
    let w = (t + off).div_euclid(s);
    let expires = (w + 12) * s - off;
    let tiers = [
        Tier::daily(2),
        Tier::custom(Duration::from_secs(s as u64), 12),
    ];
    kept_until(&tiers, off as i32, &format!("c{s}-"), expires);
}

/// A month window lost at -05:00: January 2026 (local) is kept by a
/// two-month tier until local midnight starting March.
#[test]
fn a_lost_month_window_is_kept_until_local_march() {
    // 2026-03-01T00:00-05:00 (05:00Z).
    let expires = 1_772_341_200;
    kept_until(
        &[Tier::daily(7), Tier::monthly(2)],
        -5 * 3600,
        "m-",
        expires,
    );
}

/// A read-only open beside a plain writer of an engine whose manifest
/// names a lost month window finds the keys that window held, in the
/// daily windows, as the writer does; so does a copy of the directory.
#[test]
fn a_reader_beside_the_writer_and_a_copy_look_where_the_writer_looks() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let tiers = [Tier::daily(7), Tier::monthly(12)];
    let e = create(dir.path(), config(&tiers, 1_000, 0.001), &clock);
    let keys: Vec<Vec<u8>> = (0..200).map(|i| url(4, i)).collect();
    e.insert_batch(&keys).unwrap();
    e.close().unwrap();
    for f in fs::read_dir(dir.path().join("seg")).unwrap() {
        let f = f.unwrap();
        if f.file_name().to_string_lossy().starts_with("m-") {
            fs::remove_file(f.path()).unwrap();
        }
    }
    clock.set(day(1));
    let opts = || Options::default().clock(clock.clone());
    Engine::open_with(dir.path(), opts().degraded(true))
        .unwrap()
        .close()
        .unwrap();
    let w = Engine::open_with(dir.path(), opts()).unwrap();
    let r = Engine::open_read_only_with(dir.path(), opts()).unwrap();
    for (what, e) in [("writer", &w), ("reader", &r)] {
        let one = keys.iter().filter(|k| !e.contains(k).unwrap()).count();
        let batch = e.contains_batch(&keys).unwrap();
        let missed = batch.iter().filter(|p| !**p).count();
        assert_eq!((one, missed), (0, 0), "{what}: keys read absent");
    }
    r.close().unwrap();
    let new = w.insert_batch(&keys).unwrap();
    assert!(new.iter().all(|n| !n), "keys reported new by insert_batch");
    w.close().unwrap();
    let copy = tempfile::tempdir().unwrap();
    common::copy_tree(dir.path(), copy.path());
    let c = Engine::open_with(copy.path(), opts()).unwrap();
    let missed = keys.iter().filter(|k| !c.contains(k).unwrap()).count();
    assert_eq!(missed, 0, "the copy: keys read absent");
    c.close().unwrap();
}

/// Today's daily window lost in `7d,4w,12m`: "within 3 days" is answered
/// for the lost day by this week's window, the finest that covers it, not
/// by the month's, which also holds the keys of last week. Before, every
/// key seen earlier that month read present within 3 days.
#[test]
fn a_lost_day_is_answered_by_the_finest_window_covering_it() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let tiers = [Tier::daily(7), Tier::weekly(4), Tier::monthly(12)];
    let e = create(dir.path(), config(&tiers, 1_000, 0.001), &clock);
    let set = |n: u64| -> Vec<Vec<u8>> { (0..200).map(|i| url(n, i)).collect() };
    // Monday of 2026W02, Monday of 2026W03, and today (Wednesday).
    e.insert_batch(&set(10)).unwrap();
    clock.set(day(7));
    e.insert_batch(&set(11)).unwrap();
    clock.set(day(9));
    e.insert_batch(&set(12)).unwrap();
    e.close().unwrap();
    fs::remove_file(dir.path().join("seg/d-20260114-0.seg")).unwrap();
    let opts = || Options::default().clock(clock.clone());
    let within = |e: &Engine, n: u64| {
        set(n)
            .iter()
            .filter(|k| e.contains_within(k, DAY * 3).unwrap())
            .count()
    };
    let w = Engine::open_with(dir.path(), opts().degraded(true)).unwrap();
    assert_eq!(within(&w, 12), 200, "today's keys, from this week's window");
    assert_eq!(within(&w, 11), 200, "Monday's keys, from Monday's window");
    assert_eq!(within(&w, 10), 0, "last week's keys read present");
    w.close().unwrap();
    let r = Engine::open_read_only_with(dir.path(), opts()).unwrap();
    assert_eq!((within(&r, 12), within(&r, 10)), (200, 0), "a later open");
}
