//! A log file of zeros that is not the last one (a zeroed file in the
//! middle of the log: damage, which the engine's own writes cannot leave,
//! since a switch syncs the older file before any record of the next one
//! counts as durable) must not drop the acknowledged records of the files
//! after it without a word: the open refuses it, naming the file, as it
//! does damage in the middle of a file; `verify` reports it. A file of
//! zeros that is the last one (a header that never reached the disk) stays
//! accepted.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, SyncPolicy, Tier};

fn logs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    v.sort();
    v
}

/// An engine of a Bloom tier under `always` whose log moved to a second
/// file (a checkpoint beside the writers, held after its switch so that it
/// does not commit), with acknowledged keys in both files, copied as a
/// crash left it. Returns the copy and the keys of each file.
fn two_files(root: &Path) -> (PathBuf, Vec<Vec<u8>>, Vec<Vec<u8>>) {
    // The fault hook is the process's: one test at a time installs it.
    static HOOK: Mutex<()> = Mutex::new(());
    let _one = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let live = root.join("live");
    let clock = ManualClock::new(day(3));
    let cfg = timebloom::Config {
        sync: SyncPolicy::Always,
        ..config(&["7d".parse::<Tier>().unwrap()], 2_000, 0.01)
    };
    let e = Engine::create_with(
        &live,
        cfg,
        Options::default().clock(clock).checkpoint_log_bytes(40 * 8),
    )
    .unwrap();
    // The checkpoint's thread is held at its first operation on a segment
    // (after the switch, before its flush), until `go`.
    let go = Arc::new(AtomicBool::new(false));
    let held = Arc::clone(&go);
    let wal = live.join("wal");
    timebloom::testing::set_fault_hook(Some(Box::new(move |_, path: &Path| {
        let ours = std::thread::current().name() == Some("timebloom-checkpoint");
        while ours && !path.starts_with(&wal) && !held.load(Ordering::SeqCst) {
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        None
    })));
    let first: Vec<Vec<u8>> = (0..8).map(|i| url(31, i)).collect();
    for k in &first {
        assert!(e.insert(k).unwrap());
    }
    // The switch runs on the checkpoint's thread: wait for the second file.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while logs(&live).len() < 2 {
        assert!(std::time::Instant::now() < deadline, "{:?}", logs(&live));
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
    // A power loss: the segments as they were before the second file's
    // keys (their pages did not reach the disk), the log as synced.
    let crashed = root.join("crashed");
    copy_tree(&live, &crashed);
    let second: Vec<Vec<u8>> = (0..4).map(|i| url(32, i)).collect();
    for k in &second {
        assert!(e.insert(k).unwrap());
    }
    for f in logs(&live) {
        fs::copy(&f, crashed.join("wal").join(f.file_name().unwrap())).unwrap();
    }
    go.store(true, Ordering::SeqCst);
    e.close().unwrap();
    timebloom::testing::set_fault_hook(None);
    (crashed, first, second)
}

/// Whether the bodies of `dir` hold `key`, without a replay.
fn ro_contains(dir: &Path, key: &[u8]) -> bool {
    Engine::open_read_only_with(dir, opts())
        .unwrap()
        .contains(key)
        .unwrap()
}

fn opts() -> Options {
    Options::default().clock(ManualClock::new(day(3)))
}

#[test]
fn a_zeroed_log_file_before_another_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let (crashed, first, second) = two_files(tmp.path());
    let files = logs(&crashed);
    assert_eq!(files.len(), 2, "{files:?}");
    // Unharmed, a recovery after a power loss finds every key.
    let whole = tmp.path().join("whole");
    copy_tree(&crashed, &whole);
    let e = Engine::open_with(&whole, opts().assume_power_loss(true)).unwrap();
    for k in first.iter().chain(&second) {
        assert!(e.contains(k).unwrap(), "{:?}", String::from_utf8_lossy(k));
    }
    for k in &second {
        assert!(
            !ro_contains(&crashed, k),
            "the bodies hold the second file's keys"
        );
    }
    e.close().unwrap();

    // The first file zeroed, its length kept.
    let len = fs::metadata(&files[0]).unwrap().len() as usize;
    fs::write(&files[0], vec![0u8; len]).unwrap();
    let name = files[0].file_name().unwrap().to_string_lossy().into_owned();

    let ro = Engine::open_read_only_with(&crashed, opts()).unwrap();
    let problems = ro.verify_each();
    assert!(
        problems
            .iter()
            .any(|p| matches!(p, Error::Corrupt { .. }) && p.to_string().contains(&name)),
        "verify says nothing of the zeroed {name}: {problems:?}"
    );
    drop(ro);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_timebloom"))
        .args(["verify", crashed.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        !out.status.success() && String::from_utf8_lossy(&out.stderr).contains(&name),
        "CLI verify: {:?} {}{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );

    let degraded = tmp.path().join("degraded");
    copy_tree(&crashed, &degraded);
    match Engine::open_with(&crashed, opts().assume_power_loss(true)) {
        Err(err @ Error::Corrupt { .. }) => {
            assert!(err.to_string().contains(&name), "{err}")
        }
        Err(err) => panic!("refused, but not as damage: {err}"),
        Ok(e) => {
            let lost: Vec<_> = second.iter().filter(|k| !e.contains(k).unwrap()).collect();
            panic!(
                "opened with {} of {} acknowledged keys of the second file lost",
                lost.len(),
                second.len()
            );
        }
    }
    // Degraded, the open goes on with what the log holds up to the damage,
    // and its stats name the damage it went past.
    let e = Engine::open_with(&degraded, opts().assume_power_loss(true).degraded(true)).unwrap();
    let damage = e.stats().unwrap().log_damage;
    assert!(
        damage.as_deref().is_some_and(|d| d.contains(&name)),
        "{damage:?}"
    );
    e.close().unwrap();
    // The next open replays nothing past damage, and says none.
    let e = Engine::open_with(&degraded, opts().assume_power_loss(true)).unwrap();
    assert_eq!(e.stats().unwrap().log_damage, None);
    e.close().unwrap();
}

/// The last log file of zeros (a header that never reached the disk) is
/// no damage: the open and `verify` accept it.
#[test]
fn a_zeroed_last_log_file_is_accepted() {
    let tmp = tempfile::tempdir().unwrap();
    let (crashed, first, _) = two_files(tmp.path());
    let files = logs(&crashed);
    assert_eq!(files.len(), 2, "{files:?}");
    // The second file's records never reached the disk: none of them was
    // acknowledged in this state, so only the first file's keys count.
    let len = fs::metadata(&files[1]).unwrap().len() as usize;
    fs::write(&files[1], vec![0u8; len]).unwrap();
    let ro = Engine::open_read_only_with(&crashed, opts()).unwrap();
    assert!(ro.verify_each().is_empty(), "{:?}", ro.verify_each());
    drop(ro);
    let e = Engine::open_with(&crashed, opts().assume_power_loss(true)).unwrap();
    for k in &first {
        assert!(e.contains(k).unwrap());
    }
    e.close().unwrap();
}

/// A log file whose header cannot be read (a flipped bit in its magic)
/// and whose records a recovery needs refuses the open by name, degraded
/// too: unlike damage after a valid header, it is not gone past
/// (docs/format.md, "Write-ahead log").
#[test]
fn a_needed_log_file_with_a_bad_header_refuses_even_a_degraded_open() {
    let tmp = tempfile::tempdir().unwrap();
    let (crashed, _, _) = two_files(tmp.path());
    let files = logs(&crashed);
    assert_eq!(files.len(), 2, "{files:?}");
    let mut bytes = fs::read(&files[1]).unwrap();
    bytes[0] ^= 1;
    fs::write(&files[1], &bytes).unwrap();
    let name = files[1].file_name().unwrap().to_string_lossy().into_owned();
    for degraded in [false, true] {
        let copy = tmp.path().join(format!("copy-{degraded}"));
        copy_tree(&crashed, &copy);
        let o = opts().assume_power_loss(true).degraded(degraded);
        match Engine::open_with(&copy, o) {
            Err(err @ Error::Corrupt { .. }) => {
                assert!(err.to_string().contains(&name), "{err}")
            }
            Err(err) => panic!("degraded {degraded}: refused, but not as damage: {err}"),
            Ok(_) => panic!("degraded {degraded}: opened past a bad header"),
        }
    }
}
