//! A single-key write under `always` whose closing sync fails: the key was
//! recorded (a later call answers "seen"), so its answer reaches the caller
//! in `Error::Incomplete`, as a batch's answers do.

mod common;

use std::io;
use std::path::Path;

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, SyncPolicy, Tier};

fn fail_log_syncs(root: &Path) {
    let root = root.to_path_buf();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        (path.starts_with(&root) && op == "fsync log").then(|| io::Error::from_raw_os_error(5))
    })));
}

/// The answer in an `Incomplete` of one key.
fn one_answer(r: timebloom::Result<bool>, what: &str) -> bool {
    match r {
        Err(Error::Incomplete { answers, cause }) => {
            assert_eq!(answers.len(), 1, "{what}");
            assert!(
                matches!(
                    *cause,
                    Error::Io {
                        op: "fsync log",
                        ..
                    }
                ),
                "{what}: {cause}"
            );
            answers[0]
        }
        other => panic!("{what}: expected Incomplete with one answer, got {other:?}"),
    }
}

// One test: the fault hook is process-wide.
#[test]
fn a_failed_sync_of_one_key_returns_its_answer() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let opts = || Options::default().clock(clock.clone());
    let make = |name: &str, tiers: &[Tier]| {
        let dir = tmp.path().join(name);
        let mut cfg = config(tiers, 1_000, 0.01);
        cfg.sync = SyncPolicy::Always;
        (Engine::create_with(&dir, cfg, opts()).unwrap(), dir)
    };

    // insert, insert_within and insert_at on Bloom tiers.
    for (i, call) in ["insert", "insert_within", "insert_at"]
        .into_iter()
        .enumerate()
    {
        let (e, dir) = make(&format!("bloom-{i}"), &[Tier::daily(7)]);
        assert!(e.insert(b"before").unwrap());
        fail_log_syncs(&dir);
        let r = match call {
            "insert" => e.insert(b"k"),
            "insert_within" => e.insert_within(b"k", std::time::Duration::from_secs(86_400)),
            _ => e.insert_at(b"k", day(3)),
        };
        timebloom::testing::set_fault_hook(None);
        assert!(one_answer(r, call), "{call}: the key was new");
        assert!(e.contains(b"k").unwrap(), "{call}: recorded");
    }

    // remove and remove_at on a counting tier: the answer says whether the
    // key's counts were taken.
    for (i, call) in ["remove", "remove_at"].into_iter().enumerate() {
        let (e, dir) = make(&format!("counting-{i}"), &[Tier::daily(7).counting()]);
        e.insert(b"k").unwrap();
        fail_log_syncs(&dir);
        let r = match call {
            "remove" => e.remove(b"k"),
            _ => e.remove_at(b"k", day(3)),
        };
        timebloom::testing::set_fault_hook(None);
        assert!(one_answer(r, call), "{call}: the key was held");
        assert!(!e.contains(b"k").unwrap(), "{call}: removed");
    }
}
