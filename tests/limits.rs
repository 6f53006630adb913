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
    // About 460 GiB a window: under the 1 TiB a window may have, over what
    // a test machine's temporary file system holds.
    let out = sh_cli(
        "ulimit -f 65536",
        &[
            "create",
            engine.to_str().unwrap(),
            "--tiers",
            "2d",
            "--items-per-day",
            "300000000000",
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
