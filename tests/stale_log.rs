//! A log file that begins past the records an open reads (a power loss
//! tore the log before the file a switch had begun: none of that file's
//! records was acknowledged) is never read after a later session's
//! records: should that session's log end just before it, a recovery
//! would otherwise go on into it and replay writes that were never made
//! in that session.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};

fn logs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".log"))
        .collect();
    v.sort();
    v
}

#[test]
fn a_log_file_past_the_records_read_is_never_replayed_later() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let clock = ManualClock::new(day(3));
    let opts = || Options::default().clock(clock.clone());
    let cfg = timebloom::Config {
        sync: SyncPolicy::Always,
        ..config(&["7d:counting".parse::<Tier>().unwrap()], 2_000, 0.01)
    };
    Engine::create_with(&a, cfg, opts())
        .unwrap()
        .close()
        .unwrap();
    // The same engine (the same seed) elsewhere, whose log goes on one
    // record past where `a`'s will end, with a remove of the key `a`
    // inserts there.
    copy_tree(&a, &b);
    let key = b"https://example.com/acknowledged";
    let e = Engine::open_with(&b, opts()).unwrap();
    assert!(e.insert(key).unwrap());
    e.close().unwrap();
    let e = Engine::open_with(&b, opts()).unwrap();
    assert!(e.remove(key).unwrap());
    let before = logs(&a);
    let stale: Vec<String> = logs(&b)
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert_eq!(stale.len(), 1, "a has {before:?}, b {:?}", logs(&b));
    // The file a torn log left behind, past what `a`'s open reads.
    fs::copy(b.join("wal").join(&stale[0]), a.join("wal").join(&stale[0])).unwrap();
    drop(e);

    let e = Engine::open_with(&a, opts()).unwrap();
    assert!(
        !logs(&a).contains(&stale[0]),
        "the file past the log is still there: {:?}",
        logs(&a)
    );
    assert!(e.insert(key).unwrap());
    // A crash: no checkpoint, no clean close; then a recovery as after a
    // power loss, from the log.
    std::mem::forget(e);
    let crashed = tmp.path().join("crashed");
    copy_tree(&a, &crashed);
    let e = Engine::open_with(&crashed, opts().assume_power_loss(true)).unwrap();
    assert!(
        e.contains(key).unwrap(),
        "an acknowledged key was removed by a record of the file left past the log"
    );
}

/// The open's checkpoint deletes the file left past the log only after its
/// manifest names the new position. A crash between the two (here: the
/// deletion fails, which leaves the same files) left a manifest whose
/// checkpoint lies inside that file's records: the next recovery replayed
/// them as this engine's own writes, and a stale remove took the counts of
/// an acknowledged key.
#[test]
fn a_crash_before_the_file_past_the_log_is_deleted_replays_none_of_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let clock = ManualClock::new(day(3));
    let opts = || Options::default().clock(clock.clone());
    let cfg = timebloom::Config {
        sync: SyncPolicy::Always,
        ..config(&["7d:counting".parse::<Tier>().unwrap()], 2_000, 0.01)
    };
    let key = b"https://example.com/acknowledged";
    let e = Engine::create_with(&a, cfg, opts()).unwrap();
    assert!(e.insert(key).unwrap());
    e.close().unwrap();
    // The same engine elsewhere, whose log goes on past where `a`'s
    // ends, in a file of two records: an insert of another key, then a
    // remove of `key`.
    copy_tree(&a, &b);
    let e = Engine::open_with(&b, opts()).unwrap();
    assert!(e.insert(b"https://example.com/first").unwrap());
    e.close().unwrap();
    let e = Engine::open_with(&b, opts()).unwrap();
    assert!(e.insert(b"https://example.com/other").unwrap());
    assert!(e.remove(key).unwrap());
    let before = logs(&a);
    let stale: Vec<String> = logs(&b)
        .into_iter()
        .filter(|n| !before.contains(n))
        .collect();
    assert_eq!(stale.len(), 1, "a has {before:?}, b {:?}", logs(&b));
    // The file a torn log left behind, past what `a`'s open reads.
    let stale_path = a.join("wal").join(&stale[0]);
    fs::copy(b.join("wal").join(&stale[0]), &stale_path).unwrap();
    drop(e);

    // The open cannot delete the stale file. Deleted after the open's
    // checkpoint wrote its manifest, this is the state a crash between the
    // two leaves; deleted before, the open fails with the old manifest.
    let target = stale_path.clone();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        (op.starts_with("delete") && path == target)
            .then(|| std::io::Error::other("crash before the deletion (injected)"))
    })));
    let failed = Engine::open_with(&a, opts());
    timebloom::testing::set_fault_hook(None);
    drop(failed);

    let e = Engine::open_with(&a, opts().assume_power_loss(true)).unwrap();
    assert!(
        e.contains(key).unwrap(),
        "an acknowledged key was removed by a record of the file left past the log"
    );
}
