//! One writer per directory: the lock holds whatever path reaches the
//! directory, and however its `LOCK` file is treated while a writer runs.

mod common;

use std::process::{Command, Stdio};

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, Tier};

/// A `LOCK` deleted by hand while a writer runs (a cleanup script, an
/// operator who took it for a stale lock) let a second writer make a new
/// one, lock it and write the same files as the first.
#[test]
fn a_deleted_lock_file_does_not_let_a_second_writer_in() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 1_000, 0.01), &clock);
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    let r = Engine::open_with(&dir, Options::default().clock(clock.clone()));
    assert!(
        matches!(r, Err(Error::Locked { .. })),
        "second writer: {:?}",
        r.as_ref().map(|_| ())
    );
    // A create there is refused too, and changes nothing.
    let r = Engine::create_with(
        &dir,
        config(&[Tier::daily(3)], 1_000, 0.01),
        Options::default().clock(clock.clone()),
    );
    assert!(
        matches!(r, Err(Error::Locked { .. } | Error::AlreadyExists { .. })),
        "create: {:?}",
        r.as_ref().map(|_| ())
    );
    drop(e);
    // Once the writer is gone, the directory opens (a new LOCK is made).
    let e = open(&dir, &clock);
    drop(e);
    assert!(dir.join("LOCK").exists());
}

/// The same, across processes: this process holds the directory and a
/// writer of the command line is started beside it once `LOCK` is gone.
#[test]
fn a_deleted_lock_file_does_not_let_a_second_cli_writer_in() {
    let bin = env!("CARGO_BIN_EXE_timebloom");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 1_000, 0.01), &clock);
    let maintain = || {
        Command::new(bin)
            .args(["maintain", "--now", "2026-01-05T12:00:00Z"])
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = maintain();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    let out = maintain();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "second writer ran: {err}");
    assert!(err.contains("open in another process"), "{err}");
    drop(e);
}

/// `Locked` names the directory and says what to do: close the other
/// writer, or read beside it with a read-only open. It said only "one
/// writer at a time".
#[test]
fn locked_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 1_000, 0.01), &clock);
    let Err(err) = Engine::open_with(&dir, Options::default().clock(clock.clone())) else {
        panic!("a second writer opened");
    };
    let msg = err.to_string();
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    assert!(msg.contains("close"), "{msg}");
    assert!(msg.contains("read-only"), "{msg}");
    drop(e);
}
