//! The engine at the limits of its tier layout: tiers of many windows, a
//! low descriptor limit, sizes beyond the machine.

mod common;

use std::process::Command;
use std::time::Instant;

use common::*;
use timebloom::ManualClock;

/// The built `timebloom` binary run by `sh` under the given `ulimit`s.
fn sh_cli(limits: &str, args: &[&str]) -> std::process::Output {
    let script = format!("{limits}; exec \"$0\" \"$@\"");
    Command::new("sh")
        .arg("-c")
        .arg(script)
        .arg(env!("CARGO_BIN_EXE_timebloom"))
        .args(args)
        .output()
        .unwrap()
}

/// A window larger than the file system has room for is refused before
/// its file is written, naming the bytes it needs and those available:
/// allocating it by writing zeros would fill the disk for minutes first.
/// (`ulimit -f` keeps the test from writing more than 64 MiB whatever
/// happens.)
#[test]
fn a_window_larger_than_the_free_space_is_refused_before_writing() {
    let dir = tempfile::tempdir().unwrap();
    let engine = dir.path().join("e");
    let t = Instant::now();
    // About 1000 GiB a window: just under the 1 TiB a window may have, over
    // what a test machine's temporary file system holds.
    let out = sh_cli(
        "ulimit -f 65536",
        &[
            "create",
            engine.to_str().unwrap(),
            "--tiers",
            "2d",
            "--items-per-day",
            "650000000000",
            "--fpr",
            "0.01",
            "--now",
            "2026-01-05T00:00:00Z",
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("available") && err.contains("bytes"),
        "the error names the space needed and available: {err}"
    );
    assert!(t.elapsed().as_secs() < 10, "refused at once");
    assert!(!engine.exists(), "nothing left behind");
}

/// Hundreds of daily windows: every day's key is kept across a reopen,
/// and stats, verify and maintain see every window.
#[test]
fn a_tier_of_hundreds_of_daily_windows_keeps_each_day() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let tiers = timebloom::parse_tiers("3650d").unwrap();
    let e = create(dir.path(), config(&tiers, 1000, 0.001), &clock);
    let days = 300u64;
    for d in 0..days {
        clock.set(day(d));
        assert!(e.insert(&url(d, 0)).unwrap(), "day {d} new");
    }
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    for d in 0..days {
        assert!(e.contains(&url(d, 0)).unwrap(), "day {d} kept");
    }
    assert_eq!(e.stats().unwrap().tiers[0].segments.len(), days as usize);
    e.verify().unwrap();
    e.maintain(day(days - 1)).unwrap();
    assert_eq!(seg_files(dir.path()).len(), days as usize);
    e.close().unwrap();
}

/// An engine of more windows than the soft limit of open files (each
/// window's file stays open; a daily tier of a few years keeps more than
/// the 1024 a login's soft limit usually is) opens from the command line,
/// which raises its soft limit to the hard one; under a hard limit too
/// low, commands fail naming the limit, change nothing, and the engine
/// opens afterwards under a normal limit.
#[test]
fn more_windows_than_the_soft_file_limit_open_from_the_cli() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let tiers = timebloom::parse_tiers("200d").unwrap();
    let e = create(dir.path(), config(&tiers, 1000, 0.001), &clock);
    let days = 80u64;
    for d in 0..days {
        clock.set(day(d));
        e.insert(format!("key-{d}").as_bytes()).unwrap();
    }
    e.close().unwrap();
    let path = dir.path().to_str().unwrap();
    // 2026-01-05 is day 0: day 80 is 2026-03-26.
    let now = "2026-03-26T12:00:00Z";

    let out = sh_cli(
        "ulimit -S -n 40",
        &["check", path, "--now", now, "key-0", "key-79"],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "a soft limit below the windows is raised: {}",
        String::from_utf8_lossy(&out.stderr)
    );

    let manifest = std::fs::read(dir.path().join("MANIFEST")).unwrap();
    let files = seg_files(dir.path());
    for args in [
        vec!["check", path, "--now", now, "key-0"],
        vec!["add", path, "--now", "2026-03-27T12:00:00Z", "-"],
        vec!["stats", path, "--now", now],
        vec!["verify", path, "--now", now],
        vec!["maintain", path, "--now", "2026-03-27T12:00:00Z"],
    ] {
        let out = sh_cli("ulimit -n 40", &args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("Too many open files") && err.contains("ulimit -n"),
            "{args:?}: the error names the limit: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    }
    assert_eq!(
        std::fs::read(dir.path().join("MANIFEST")).unwrap(),
        manifest
    );
    assert_eq!(seg_files(dir.path()), files);

    let e = open(dir.path(), &clock);
    for d in 0..days {
        assert!(e.contains(format!("key-{d}").as_bytes()).unwrap());
    }
    e.verify().unwrap();
    e.close().unwrap();
}

/// An hourly tier of a thousand windows, written in bursts with long
/// jumps between them: each key answers for exactly its retention, the
/// windows on disk are the live ones, and a reopen agrees.
#[test]
fn an_hourly_tier_of_a_thousand_windows_expires_by_the_hour() {
    use std::time::Duration;
    let dir = tempfile::tempdir().unwrap();
    let hour = |h: u64| at(T0 + h * 3600 + 1800);
    let clock = ManualClock::new(hour(0));
    let tiers = timebloom::parse_tiers("1000h").unwrap();
    let e = create(dir.path(), config(&tiers, 1000, 0.001), &clock);
    let written: Vec<u64> = (0..40).chain(600..640).chain(990..1010).collect();
    for &h in &written {
        clock.set(hour(h));
        assert!(e.insert(format!("h{h}").as_bytes()).unwrap(), "h{h}");
    }
    // At hour 1009 the tier keeps hours 10..=1009.
    let live = |now: u64| {
        written
            .iter()
            .copied()
            .filter(move |&h| h + 1000 > now && h <= now)
    };
    let check = |e: &timebloom::Engine, reopened: bool| {
        for &h in &written {
            assert_eq!(
                e.contains(format!("h{h}").as_bytes()).unwrap(),
                h + 1000 > 1009,
                "h{h} (reopened: {reopened})"
            );
        }
        let segs = e.stats().unwrap().tiers[0].segments.len();
        assert_eq!(segs, live(1009).count(), "reopened: {reopened}");
    };
    check(&e, false);
    e.close().unwrap();
    let e = open(dir.path(), &clock);
    check(&e, true);
    e.verify().unwrap();
    e.maintain(hour(1009) + Duration::from_secs(1)).unwrap();
    assert_eq!(seg_files(dir.path()).len(), live(1009).count());
    e.close().unwrap();
}
