//! A create that fails part way into an existing empty directory removes
//! what it made, so that the next create there goes ahead.

mod common;

use std::io;
use std::path::Path;

use common::*;
use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};

/// Under a logged policy the create makes `wal/` (the log, the boot) before
/// the first windows: a full disk while allocating a window fails the
/// create after that. The directory existed (empty) before: the failed
/// create must leave it as empty as it found it.
#[test]
fn a_create_that_fails_after_its_log_leaves_the_directory_creatable() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    std::fs::create_dir(&dir).unwrap();
    let root = dir.clone();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        (path.starts_with(&root) && op == "allocate").then(|| io::Error::from_raw_os_error(28))
    })));
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(2)], 1_000, 0.01);
    cfg.sync = SyncPolicy::Always;
    let r = Engine::create_with(&dir, cfg.clone(), Options::default().clock(clock.clone()));
    timebloom::testing::set_fault_hook(None);
    assert!(r.is_err(), "the injected full disk fails the create");
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    let e = Engine::create_with(&dir, cfg, Options::default().clock(clock.clone()))
        .unwrap_or_else(|err| panic!("create after a failed create (left {left:?}): {err}"));
    assert!(e.insert(b"k").unwrap());
}
