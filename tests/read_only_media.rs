//! An engine directory on read-only media (a read-only bind mount, made by
//! the test; needs root and mount rights, which CI has): a read-only open
//! finds every key and reads stats and checksums, writing nothing; a
//! writing open is refused with an error naming the lock file, and
//! changes nothing.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, Tier};

/// The tests take turns: each spawns `mount` and `umount`, and a spawned
/// child holds a copy of the process's descriptors until it execs, the
/// other test's engine lock among them (as in tests/full_disk.rs).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A read-only bind mount of a directory, unmounted on drop.
struct ReadOnlyView {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl ReadOnlyView {
    fn mount(of: &Path) -> Option<ReadOnlyView> {
        let dir = tempfile::tempdir().unwrap();
        let run = |args: &[&str]| {
            Command::new("mount")
                .args(args)
                .arg(of)
                .arg(dir.path())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !run(&["--bind"]) {
            eprintln!("NOTE: bind mounts are not permitted here; read-only media test not run");
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run this test as root"
            );
            return None;
        }
        let view = ReadOnlyView {
            path: dir.path().to_path_buf(),
            _dir: dir,
        };
        let ro = Command::new("mount")
            .args(["-o", "remount,bind,ro"])
            .arg(&view.path)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ro, "remount read-only");
        Some(view)
    }
}

impl Drop for ReadOnlyView {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn read_only_media(tiers: &str) {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let tiers: Vec<Tier> = tiers.split(',').map(|t| t.parse().unwrap()).collect();
    let clock = ManualClock::new(day(0));
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path().join("crawl.tb");
    // Three days of keys: windows sealed, one open, a log beside them.
    let e = create(&dir, config(&tiers, 2_000, 0.01), &clock);
    for d in 0..3u64 {
        clock.set(day(d));
        let keys: Vec<Vec<u8>> = (0..500).map(|i| url(d, i)).collect();
        e.insert_batch(&keys).unwrap();
    }
    e.close().unwrap();
    let before = snapshot(&dir);

    let Some(view) = ReadOnlyView::mount(scratch.path()) else {
        return;
    };
    let ro_dir = view.path.join("crawl.tb");
    // The media is read-only indeed.
    let probe = fs::File::create(view.path.join("probe"));
    assert_eq!(
        probe.unwrap_err().kind(),
        std::io::ErrorKind::ReadOnlyFilesystem
    );

    let opts = Options::default().clock(clock.clone());
    let r = Engine::open_read_only_with(&ro_dir, opts.clone()).expect("read-only open");
    for d in 0..3u64 {
        let keys: Vec<Vec<u8>> = (0..500).map(|i| url(d, i)).collect();
        assert!(
            r.contains_batch(&keys).unwrap().iter().all(|&b| b),
            "day {d}"
        );
        assert!(r.contains(&keys[7]).unwrap());
    }
    assert!(r
        .contains_within(&url(2, 3), Duration::from_secs(86_400))
        .unwrap());
    let fresh: Vec<Vec<u8>> = (0..2_000).map(|i| url(99, i)).collect();
    let fp = r
        .contains_batch(&fresh)
        .unwrap()
        .iter()
        .filter(|&&b| b)
        .count();
    assert!(fp < 100, "{fp} of 2000 never-inserted keys found");
    assert!(r.stats().unwrap().bytes > 0);
    r.verify().expect("verify on read-only media");
    assert!(matches!(r.insert(b"x"), Err(Error::ReadOnly { .. })));
    drop(r);

    // A writing open: refused, naming the lock file it could not make.
    match Engine::open_with(&ro_dir, opts) {
        Err(Error::Io { path, source, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::ReadOnlyFilesystem);
            assert_eq!(path.file_name().unwrap(), "LOCK", "{path:?}");
        }
        other => panic!("writing open on read-only media: {other:?}"),
    }
    drop(view);
    assert!(snapshot(&dir) == before, "read-only media changed");

    // The same directory, writable again, opens for writing as it was.
    let e = open(&dir, &clock);
    assert!(e.contains(&url(0, 1)).unwrap());
    assert!(e.insert(b"after").unwrap());
}

#[test]
fn bloom_tiers_on_read_only_media() {
    read_only_media("3d,2w");
}

#[test]
fn a_fingerprint_tier_on_read_only_media() {
    read_only_media("7d:fingerprint");
}
