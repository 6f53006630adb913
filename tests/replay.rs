//! Replay after a power loss puts every logged write into the window that
//! holds its instant, whatever order the log has them in: a crawler that
//! backfills yesterday's log lines while it inserts today's leaves a log
//! whose consecutive records alternate between windows of one tier (and
//! replay loads records ahead of their turn, see `Engine::replay_windows`).

mod common;
#[path = "common/durable.rs"]
mod durable;

use std::fs;
use std::path::Path;
use std::time::Duration;

use common::*;
use timebloom::{Config, Engine, ManualClock, Options, SyncPolicy, Tier};

const HOUR: Duration = Duration::from_secs(3600);
const DAY: Duration = Duration::from_secs(86_400);

/// Copies the engine directory `from` (left as after a crash; its lock is
/// still held by this process) to `to`, every segment body (each file past
/// its 4 KiB header) zeroed: a power loss in which no page of an open
/// window reached the disk. Only the log can bring the keys back.
fn copy_losing_bodies(from: &Path, to: &Path) {
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let (src, dst) = (e.path(), to.join(e.file_name()));
        if e.file_type().unwrap().is_dir() {
            fs::create_dir_all(&dst).unwrap();
            copy_losing_bodies(&src, &dst);
            continue;
        }
        let mut b = fs::read(&src).unwrap();
        if src.parent().unwrap().ends_with("seg") && b.len() > 4096 {
            b[4096..].fill(0);
        }
        fs::write(&dst, &b).unwrap();
    }
}

/// A new engine of `tiers` under `always` in `dir`, on `clock` (at day 3
/// in every test here), planned for `per_day` keys at `fpr`.
fn always_engine(
    dir: &Path,
    clock: &ManualClock,
    tiers: &[Tier],
    per_day: u64,
    fpr: f64,
) -> Engine {
    let cfg = Config {
        sync: SyncPolicy::Always,
        ..config(tiers, per_day, fpr)
    };
    Engine::create_with(dir, cfg, Options::default().clock(clock.clone())).unwrap()
}

#[test]
fn replay_puts_alternating_records_into_their_own_windows() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let e = always_engine(
        dir.path(),
        &clock,
        &[Tier::daily(7), Tier::weekly(4)],
        2_000,
        0.01,
    );
    // The windows first: a backfill into a window that does not exist yet
    // creates it, and a checkpoint follows (the log restarts there).
    for back in [2 * DAY, DAY] {
        e.insert_at(b"https://example.com/", day(3) - back).unwrap();
    }
    // Today's keys, each followed by a key of two days ago, one of a day
    // ago and one of an hour ago: three daily windows take turns in the
    // log, record by record.
    let mut today = Vec::new();
    let mut earlier = Vec::new();
    for i in 0..300 {
        let k = url(21, i);
        assert!(e.insert(&k).unwrap());
        today.push(k);
        for (set, back) in [(22, 2 * DAY), (23, DAY), (24, HOUR)] {
            let k = url(set, i);
            assert!(e.insert_at(&k, day(3) - back).unwrap());
            earlier.push((k, back));
        }
    }
    // A crash: no checkpoint, no clean close.
    std::mem::forget(e);
    let segments = seg_files(dir.path()).len();
    assert!(
        segments >= 4,
        "the keys went to {:?}",
        seg_files(dir.path())
    );
    // Every write of the keys is in the log (after the last checkpoint).
    let records: u64 = fs::read_dir(dir.path().join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .map(|p| (fs::metadata(p).unwrap().len() - 32) / 40)
        .sum();
    assert!(records >= 4 * 300, "{records} records for 1200 writes");
    let lost = tempfile::tempdir().unwrap();
    copy_losing_bodies(dir.path(), lost.path());

    let e = Engine::open_with(
        lost.path(),
        Options::default()
            .clock(clock.clone())
            .assume_power_loss(true),
    )
    .unwrap();
    for (i, k) in today.iter().enumerate() {
        assert!(e.contains_within(k, HOUR).unwrap(), "today's key {i} lost");
    }
    for (i, (k, back)) in earlier.iter().enumerate() {
        assert!(e.contains(k).unwrap(), "key {i} of {back:?} ago lost");
        // In its own day: within a horizon that reaches its day, and not
        // within one that reaches back only into the day after it.
        let age = *back + HOUR;
        assert!(
            e.contains_within(k, age).unwrap(),
            "key {i} of {back:?} ago not in its day"
        );
        if *back >= 2 * DAY {
            assert!(
                !e.contains_within(k, DAY).unwrap(),
                "key {i} of {back:?} ago replayed into a later day"
            );
        }
    }
    e.close().unwrap();
}

/// An open refused before its recovery ran (here: damage in the middle of
/// the log) changes nothing on disk. Dropped, the engine it had assembled
/// used to close like an open one: it sealed every window but the newest
/// with the body the power loss left, so the next open (degraded, to go on
/// with what the log holds up to the damage) took the window for whole
/// and skipped its records: a key backfilled into it, logged before the
/// damage, was lost.
#[test]
fn an_open_refused_before_recovery_seals_no_window() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let opts = || Options::default().clock(clock.clone());
    let e = always_engine(dir.path(), &clock, &[Tier::daily(7)], 2_000, 0.01);
    // A backfill creates yesterday's window (a checkpoint follows); the
    // key's record is the first of the log after it.
    let key = b"https://example.com/backfilled";
    assert!(e.insert_at(key, day(3) - DAY).unwrap());
    for i in 0..3 {
        assert!(e.insert(&url(31, i)).unwrap());
    }
    std::mem::forget(e);
    let lost = tempfile::tempdir().unwrap();
    copy_losing_bodies(dir.path(), lost.path());
    // The second record damaged, the third intact: damage, not a torn tail.
    let logs: Vec<_> = fs::read_dir(lost.path().join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    assert_eq!(logs.len(), 1, "{logs:?}");
    let mut b = fs::read(&logs[0]).unwrap();
    assert_eq!(b.len(), 32 + 4 * 40);
    b[32 + 40 + 20] ^= 1;
    fs::write(&logs[0], &b).unwrap();

    let refused = Engine::open_with(lost.path(), opts().assume_power_loss(true));
    assert!(
        matches!(refused, Err(timebloom::Error::Corrupt { .. })),
        "{refused:?}"
    );
    drop(refused);
    let e = Engine::open_with(lost.path(), opts().assume_power_loss(true).degraded(true)).unwrap();
    assert!(
        e.contains(key).unwrap(),
        "a key logged before the damage was lost"
    );
}

/// A recovery ran before the open's clock-jump guard. When the clock read
/// at that open had jumped far ahead (a machine back from a power loss
/// with a wrong clock), the recovery swept the fingerprint table restored
/// from its shadow copy against that day and skipped every logged insert
/// as too old for it: every key of the table was cleared, and its
/// checkpoint made that durable. The sweep also moved the table's day to
/// the jumped one, so the guard then saw no jump and the open went on:
/// an open without a recovery refuses the same clock.
#[test]
fn a_recovery_with_a_clock_that_jumped_ahead_clears_no_table() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let e = always_engine(dir.path(), &clock, &[Tier::fingerprint(30)], 2_000, 0.01);
    let keys: Vec<Vec<u8>> = (0..50).map(|i| url(41, i)).collect();
    for k in &keys {
        assert!(e.insert(k).unwrap());
    }
    // A crash, then a power loss assumed at the next open.
    std::mem::forget(e);
    let ahead = ManualClock::new(day(3 + 400));
    // Without a recovery, the open refuses the jump.
    let same_boot = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), same_boot.path());
    let refused = Engine::open_with(same_boot.path(), Options::default().clock(ahead.clone()));
    assert!(
        matches!(refused, Err(timebloom::Error::ClockJump { .. })),
        "{refused:?}"
    );
    drop(refused);
    let img = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), img.path());
    let refused = Engine::open_with(
        img.path(),
        Options::default().clock(ahead).assume_power_loss(true),
    );
    assert!(
        matches!(refused, Err(timebloom::Error::ClockJump { .. })),
        "{refused:?}"
    );
    drop(refused);
    let e = Engine::open_with(
        img.path(),
        Options::default()
            .clock(clock.clone())
            .assume_power_loss(true),
    )
    .unwrap();
    for (i, k) in keys.iter().enumerate() {
        assert!(e.contains(k).unwrap(), "key {i} lost");
    }
}

/// A chain's sub-filters are sealed one after another, each seal synced on
/// its own: a power loss between two leaves the older sub-filters sealed
/// on disk and the tail open, its body whatever reached the disk. Replay
/// skipped a window if any of its sub-filters was sealed, so the keys
/// logged into the open tail were lost.
#[test]
fn replay_fills_the_open_tail_of_a_window_sealed_part_way() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    // 600 keys into a window planned for 100 grow its chain; at a rate of
    // 1e-6 none of them is a false positive of the ones before (at 0.01,
    // with the engine's random seed, one was in about one run of five).
    let e = always_engine(dir.path(), &clock, &[Tier::daily(7)], 100, 1e-6);
    let keys: Vec<Vec<u8>> = (0..600).map(|i| url(51, i)).collect();
    for k in &keys {
        assert!(e.insert(k).unwrap());
    }
    let tails: Vec<String> = seg_files(dir.path())
        .into_iter()
        .filter(|n| !n.ends_with("-0.seg"))
        .collect();
    assert!(
        !tails.is_empty(),
        "no chain grew: {:?}",
        seg_files(dir.path())
    );
    // The next day's first write rotates; the seal of the day's first
    // sub-filter lands, the power fails before the others' (their msync
    // fails here, so they stay open on disk).
    let root = dir.path().to_path_buf();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        let tail = path.starts_with(&root)
            && path.extension().is_some_and(|x| x == "seg")
            && !path.to_string_lossy().ends_with("-0.seg");
        (op == "msync segment" && tail).then(|| std::io::Error::other("power loss (injected)"))
    })));
    clock.advance(DAY);
    let mut stopped = false;
    for i in 0..500 {
        if e.insert(&url(52, i)).is_err() {
            stopped = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    timebloom::testing::set_fault_hook(None);
    assert!(stopped, "the seal never failed");
    std::mem::forget(e);
    let lost = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), lost.path());
    // The open tails' bodies never reached the disk.
    for name in &tails {
        let p = lost.path().join("seg").join(name);
        let mut b = fs::read(&p).unwrap();
        b[4096..].fill(0);
        fs::write(&p, &b).unwrap();
    }
    let e = Engine::open_with(
        lost.path(),
        Options::default()
            .clock(clock.clone())
            .assume_power_loss(true),
    )
    .unwrap();
    let missing = keys.iter().filter(|k| !e.contains(k).unwrap()).count();
    assert_eq!(missing, 0, "{missing} of {} keys lost", keys.len());
}

/// A log file left below the checkpoint (a crash between a checkpoint's
/// manifest and the deletion of the older files) whose tail a power loss
/// tore: its records are all below the checkpoint, but its torn tail
/// ended the reading of the log, so the records of the files after it,
/// acknowledged writes of a later session, were never replayed.
#[test]
fn a_torn_log_below_the_checkpoint_does_not_end_the_replay() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let opts = || Options::default().clock(clock.clone());
    let e = always_engine(dir.path(), &clock, &[Tier::daily(7)], 2_000, 0.01);
    for i in 0..3 {
        assert!(e.insert(&url(61, i)).unwrap());
    }
    std::mem::forget(e);
    // A power loss tore the last record.
    let a = tempfile::tempdir().unwrap();
    copy_tree(dir.path(), a.path());
    let logs = |d: &Path| -> Vec<std::path::PathBuf> {
        let mut v: Vec<_> = fs::read_dir(d.join("wal"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|x| x == "log"))
            .collect();
        v.sort();
        v
    };
    let torn = logs(a.path());
    assert_eq!(torn.len(), 1, "{torn:?}");
    let torn = torn[0].clone();
    let b = fs::read(&torn).unwrap();
    fs::write(&torn, &b[..b.len() - 10]).unwrap();
    // The recovery's checkpoint writes its manifest; then the older file
    // cannot be deleted (as a crash right there leaves it).
    let target = torn.clone();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        (op == "delete old log" && path == target)
            .then(|| std::io::Error::other("crash before the deletion (injected)"))
    })));
    let failed = Engine::open_with(a.path(), opts().assume_power_loss(true));
    timebloom::testing::set_fault_hook(None);
    assert!(failed.is_err(), "the deletion did not run");
    drop(failed);
    assert!(torn.exists());
    // A later session: an acknowledged key, then a power loss.
    let e = Engine::open_with(a.path(), opts()).unwrap();
    let key = b"https://example.com/acknowledged";
    assert!(e.insert(key).unwrap());
    std::mem::forget(e);
    assert!(torn.exists(), "{:?}", logs(a.path()));
    let lost = tempfile::tempdir().unwrap();
    copy_losing_bodies(a.path(), lost.path());
    let e = Engine::open_with(lost.path(), opts().assume_power_loss(true)).unwrap();
    assert!(
        e.contains(key).unwrap(),
        "an acknowledged key was lost behind the torn tail of an older log file"
    );
}

/// Every file and directory under `root`, made durable as it is now.
fn observe_all(d: &mut durable::Durable, root: &Path) {
    d.observe(root);
    for e in fs::read_dir(root).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            observe_all(d, &p);
        } else {
            d.observe(&p);
        }
    }
}

/// An open on the same boot (a process crash: the page cache holds every
/// write) does not replay and ignores damage in the log. With the first
/// record past the checkpoint damaged and the later ones valid, it reads
/// no record, takes no checkpoint, and replaces the log file with an empty
/// one. The writes since the checkpoint are then only in the bodies, which
/// the open made durable before that: opening an open segment for writing
/// marks its header dirty and fdatasyncs the file, every page the crashed
/// process dirtied with it. A power loss right after that open keeps
/// every acknowledged key.
#[test]
fn a_same_boot_open_past_log_damage_keeps_the_keys_through_a_power_loss() {
    use durable::{power_fail, record_syncs};
    let tmp = tempfile::tempdir().unwrap();
    let crashed = tmp.path().join("crashed");
    let clock = ManualClock::new(day(0));
    let cfg = Config {
        sync: SyncPolicy::Always,
        ..config(&[Tier::daily(3)], 200, 0.01)
    };
    let e = Engine::create_with(&crashed, cfg, Options::default().clock(clock.clone())).unwrap();
    let keys: Vec<Vec<u8>> = (0..24).map(|i| url(31, i)).collect();
    for k in &keys {
        e.insert(k).unwrap();
    }
    std::mem::forget(e);
    // The crashed engine's directory (its lock is still held here) as the
    // disk holds it: the bodies' pages never synced (zero), the log whole
    // but for damage to its first record.
    let root = tmp.path().join("root");
    let dir = root.join("crawl.tb");
    fs::create_dir_all(&dir).unwrap();
    copy_losing_bodies(&crashed, &dir);
    let log = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.extension().is_some_and(|x| x == "log"))
        .unwrap();
    let mut b = fs::read(&log).unwrap();
    assert_eq!(b.len(), 32 + 40 * keys.len(), "one record per key");
    b[32 + 20] ^= 0x10;
    fs::write(&log, &b).unwrap();
    let kept = record_syncs(&root, &[tmp.path()]);
    observe_all(&mut kept.lock().unwrap(), &root);
    // ... and the page cache: the bodies with every key.
    for e in fs::read_dir(crashed.join("seg")).unwrap() {
        let e = e.unwrap();
        let to = dir.join("seg").join(e.file_name());
        let bytes = fs::read(e.path()).unwrap();
        fs::OpenOptions::new()
            .write(true)
            .open(&to)
            .and_then(|mut f| std::io::Write::write_all(&mut f, &bytes))
            .unwrap();
    }
    let e = Engine::open_with(&dir, Options::default().clock(clock.clone()))
        .unwrap_or_else(|err| panic!("same-boot open: {err}"));
    for k in &keys {
        assert!(e.contains(k).unwrap(), "the page cache holds every key");
    }
    // The power fails before any later checkpoint.
    std::mem::forget(e);
    let img = power_fail(&kept, tmp.path()).join("root").join("crawl.tb");
    let e = Engine::open_with(
        &img,
        Options::default().clock(clock).assume_power_loss(true),
    )
    .unwrap_or_else(|err| panic!("open after the power loss: {err}"));
    let lost = keys.iter().filter(|k| !e.contains(k).unwrap()).count();
    assert_eq!(lost, 0, "{lost} of {} acknowledged keys lost", keys.len());
}
