//! A failure of the `interval` policy's log thread, which no call waits
//! for: the writes after it are refused, and `close` reports the failure
//! itself (the file and the reason), not only that one happened.

mod common;

use std::io;
use std::path::Path;
use std::time::Duration;

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, SyncPolicy, Tier};

// One test: the fault hook is process-wide.
#[test]
fn close_reports_the_failure_of_the_log_thread() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(2)], 1_000, 0.01);
    cfg.sync = SyncPolicy::Interval(Duration::from_millis(20));
    let e = Engine::create_with(&dir, cfg, Options::default().clock(clock)).unwrap();
    assert!(e.insert(b"before").unwrap());
    let root = dir.clone();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        (path.starts_with(&root) && op == "write log").then(|| io::Error::from_raw_os_error(27))
    })));
    assert!(e.insert(b"staged").unwrap());
    // The log thread's tick writes the staged record and fails.
    let mut refused = None;
    for _ in 0..200 {
        std::thread::sleep(Duration::from_millis(10));
        if let Err(err) = e.insert(b"later") {
            refused = Some(err);
            break;
        }
    }
    timebloom::testing::set_fault_hook(None);
    let refused = refused.expect("no write was refused after the log thread failed");
    assert!(matches!(refused, Error::PreviousIo), "{refused}");
    assert!(e.contains(b"staged").unwrap(), "lookups go on");
    match e.close() {
        Err(Error::Io { op, path, source }) => {
            assert_eq!(op, "write log");
            assert!(path.starts_with(dir.join("wal")), "{}", path.display());
            assert_eq!(source.raw_os_error(), Some(27));
        }
        other => panic!("close after the log thread failed: {other:?}"),
    }
    let e = Engine::open_with(&dir, Options::default().clock(ManualClock::new(day(0)))).unwrap();
    assert!(e.contains(b"before").unwrap() && e.contains(b"staged").unwrap());
}
