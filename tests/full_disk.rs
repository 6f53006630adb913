//! A full disk at a window boundary (on a small tmpfs mounted by the test;
//! needs root and mount rights, which CI has): rotation frees the expired
//! windows before it asks for new ones, a failed rotation does not stop
//! lookups, and after space is freed a reopen continues from the last
//! acknowledged state.

mod common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, Tier};

/// The tests take turns. Each spawns `mount` and `umount`, and a spawned
/// child holds a copy of every descriptor of the process until it execs,
/// the engine directory's lock among them: a reopen in the other test
/// could find its directory locked by a `umount` starting up (seen once in
/// a CI run).
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// A tmpfs of `kib` KiB (whole pages), unmounted on drop.
struct Tmpfs {
    path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(kib: u64) -> Option<Tmpfs> {
        let dir = tempfile::tempdir().unwrap();
        let ok = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={kib}k"), "tmpfs"])
            .arg(dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            eprintln!("NOTE: mounting a tmpfs is not permitted here; full-disk test not run");
            assert!(
                std::env::var_os("CI").is_none(),
                "CI must run this test as root"
            );
            return None;
        }
        Some(Tmpfs {
            path: dir.path().to_path_buf(),
            _dir: dir,
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.path).status();
    }
}

fn opts(clock: &ManualClock) -> Options {
    Options::default().clock(clock.clone())
}

/// Bytes of one daily window of the test's configuration.
fn window_bytes(dir: &Path, clock: &ManualClock) -> u64 {
    let e = Engine::create_with(dir, cfg(), opts(clock)).unwrap();
    let b = e.stats().unwrap().bytes;
    drop(e);
    fs::remove_dir_all(dir).unwrap();
    b
}

fn cfg() -> timebloom::Config {
    config(&[Tier::daily(2)], 400_000, 0.01)
}

#[test]
fn rotation_expires_before_it_creates() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let clock = ManualClock::new(day(0));
    let scratch = tempfile::tempdir().unwrap();
    let w = window_bytes(&scratch.path().join("probe"), &clock);
    // Room for two windows and a half: a third one fits only once the
    // expired one is gone.
    let kib = (w * 5 / 2).div_ceil(4096) * 4;
    let Some(fs_) = Tmpfs::mount(kib) else { return };
    let dir = fs_.path.join("crawl.tb");
    let e = Engine::create_with(&dir, cfg(), opts(&clock)).unwrap();
    e.insert(b"day 0").unwrap();
    clock.set(day(1));
    e.insert(b"day 1").unwrap();
    clock.set(day(2)); // day 0 expires, day 2 opens
    e.insert(b"day 2").unwrap();
    assert!(e.contains(b"day 1").unwrap());
    assert!(!e.contains(b"day 0").unwrap());
}

#[test]
fn a_full_disk_at_a_boundary_keeps_lookups_and_reopens_after_space_is_freed() {
    let _turn = ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner());
    let clock = ManualClock::new(day(0));
    let scratch = tempfile::tempdir().unwrap();
    let w = window_bytes(&scratch.path().join("probe"), &clock);
    let kib = (w * 3).div_ceil(4096) * 4;
    let Some(fs_) = Tmpfs::mount(kib) else { return };
    let dir = fs_.path.join("crawl.tb");
    let e =
        Engine::create_with(&dir, config(&[Tier::daily(7)], 400_000, 0.01), opts(&clock)).unwrap();
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| url(1, i)).collect();
    e.insert_batch(&keys).unwrap();
    // Fill the disk.
    let junk = fs_.path.join("junk");
    let mut n = 0u64;
    let block = vec![1u8; 1 << 16];
    {
        use std::io::Write;
        let mut f = fs::File::create(&junk).unwrap();
        while f.write_all(&block).is_ok() {
            n += 1;
        }
    }
    assert!(n > 0);
    clock.set(day(1)); // the new window does not fit
                       // Lookups answer from the windows the engine has.
    for k in &keys {
        assert!(e.contains(k).unwrap());
    }
    // Writes report the failure with its path and operation...
    let err = e.insert(b"tomorrow").unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, Error::Io { .. } | Error::PreviousIo), "{msg}");
    // ... and lookups keep working after it.
    assert!(e.contains(&keys[0]).unwrap());
    drop(e);
    // Reopening on the full disk fails cleanly; after space is freed it
    // continues from the last acknowledged state.
    assert!(Engine::open_with(&dir, opts(&clock)).is_err());
    fs::remove_file(&junk).unwrap();
    let e = Engine::open_with(&dir, opts(&clock)).unwrap();
    for k in &keys {
        assert!(e.contains(k).unwrap(), "lost after the full disk");
    }
    assert!(e.insert(b"tomorrow").unwrap());
}
