//! `Engine::leave_after_fork` in the process that opened the engine is a
//! plain close: nothing is lost and the directory opens again. (In a
//! forked child it lets go of the lock only; the Python tests fork a child
//! beside a running parent: python/tests/test_engine.py, `test_fork_*`.)

mod common;

use std::path::PathBuf;

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, Tier};

/// A new engine holding one key (`url(0, 1)`), open, so its directory is
/// locked; with the options that open it again.
fn locked_engine() -> (tempfile::TempDir, PathBuf, impl Fn() -> Options, Engine) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let opts = move || Options::default().clock(clock.clone());
    let e = Engine::create_with(&dir, config(&[Tier::daily(3)], 1_000, 0.01), opts()).unwrap();
    assert!(e.insert(&url(0, 1)).unwrap());
    assert!(matches!(
        Engine::open_with(&dir, opts()),
        Err(Error::Locked { .. })
    ));
    (tmp, dir, opts, e)
}

#[test]
fn in_the_opening_process_it_closes_the_engine() {
    let (_tmp, dir, opts, e) = locked_engine();
    e.leave_after_fork();
    let e = Engine::open_with(&dir, opts()).unwrap();
    assert!(e.contains(&url(0, 1)).unwrap());
    e.verify().unwrap();
    e.close().unwrap();
}

#[test]
fn leave_lock_after_fork_does_nothing_in_the_opening_process() {
    let (_tmp, dir, opts, e) = locked_engine();
    e.leave_lock_after_fork();
    // Still the one writer: the lock is held and the engine works.
    assert!(matches!(
        Engine::open_with(&dir, opts()),
        Err(Error::Locked { .. })
    ));
    assert!(e.insert(&url(0, 2)).unwrap());
    e.close().unwrap();
    let e = Engine::open_with(&dir, opts()).unwrap();
    assert!(e.contains(&url(0, 2)).unwrap());
    e.close().unwrap();
}
