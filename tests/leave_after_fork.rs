//! `Engine::leave_after_fork` in the process that opened the engine is a
//! plain close: nothing is lost and the directory opens again. (In a
//! forked child it lets go of the lock only; the Python tests fork a child
//! beside a running parent: python/tests/test_engine.py, `test_fork_*`.)

mod common;

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, Tier};

#[test]
fn in_the_opening_process_it_closes_the_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let opts = || Options::default().clock(clock.clone());
    let e = Engine::create_with(&dir, config(&[Tier::daily(3)], 1_000, 0.01), opts()).unwrap();
    assert!(e.insert(&url(0, 1)).unwrap());
    // While it is open, the directory is locked.
    assert!(matches!(
        Engine::open_with(&dir, opts()),
        Err(Error::Locked { .. })
    ));
    e.leave_after_fork();
    let e = Engine::open_with(&dir, opts()).unwrap();
    assert!(e.contains(&url(0, 1)).unwrap());
    e.verify().unwrap();
    e.close().unwrap();
}

#[test]
fn leave_lock_after_fork_does_nothing_in_the_opening_process() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let opts = || Options::default().clock(clock.clone());
    let e = Engine::create_with(&dir, config(&[Tier::daily(3)], 1_000, 0.01), opts()).unwrap();
    assert!(e.insert(&url(0, 1)).unwrap());
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
