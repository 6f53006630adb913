//! The engine directory as a file system sees it: the modes of what the
//! engine makes, symlinks in and to the directory, and files in it that
//! the engine did not make.

mod common;

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::{Path, PathBuf};

use common::*;
use timebloom::{Config, Engine, Error, ManualClock, Options, SyncPolicy, Tier};

/// Every path under `dir` (directories first), not following symlinks.
fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    let mut i = 0;
    while i < out.len() {
        let p = out[i].clone();
        if fs::symlink_metadata(&p).unwrap().is_dir() {
            for e in fs::read_dir(&p).unwrap() {
                out.push(e.unwrap().path());
            }
        }
        i += 1;
    }
    out
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

fn counting_config() -> Config {
    Config {
        sync: SyncPolicy::Always,
        ..config(&[Tier::daily(2).counting(), Tier::weekly(2)], 1_000, 0.01)
    }
}

/// The files and directories the engine makes (manifest, segments, their
/// large-page copies, the log, the lock, `wal/`, `seg/`) get the modes the
/// umask leaves of 0666 and 0777: under `umask 077` nothing is readable by
/// others, and under the usual `022` nothing is writable by others. The
/// only test of this file that sets the umask (a process-wide setting);
/// the others do not look at modes.
#[test]
fn what_the_engine_makes_honours_the_umask() {
    timebloom::testing::set_rewrite_from(Some(0));
    for (mask, file_mode, dir_mode) in [(0o077, 0o600, 0o700), (0o022, 0o644, 0o755)] {
        let old = rustix::process::umask(rustix::fs::Mode::from_raw_mode(mask));
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("e.tb");
        let clock = ManualClock::new(day(0));
        let e = Engine::create_with(
            &dir,
            counting_config(),
            Options::default().clock(clock.clone()),
        )
        .unwrap();
        e.insert(b"k").unwrap();
        // A rotation: a seal, its copy in large pages renamed into place,
        // a checkpoint, new windows.
        clock.set(day(1));
        e.maintain(day(1)).unwrap();
        e.insert(b"k2").unwrap();
        e.close().unwrap();
        let e = Engine::open_with(&dir, Options::default().clock(clock.clone())).unwrap();
        e.close().unwrap();
        rustix::process::umask(old);
        for p in walk(&dir) {
            let md = fs::symlink_metadata(&p).unwrap();
            let want = if md.is_dir() { dir_mode } else { file_mode };
            assert_eq!(
                mode(&p),
                want,
                "{} under umask {mask:03o}: {:o}",
                p.display(),
                mode(&p)
            );
        }
    }
    timebloom::testing::set_rewrite_from(None);
}

/// An engine path that is a symlink to a directory: create and open go
/// through it, the files land in the real directory, and the lock taken
/// through one path excludes a writer through the other (the real path,
/// the link, or a path with `..` in it).
#[test]
fn an_engine_path_that_is_a_symlink_works_and_locks_the_real_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let real = tmp.path().join("real.tb");
    fs::create_dir(&real).unwrap();
    let link = tmp.path().join("link.tb");
    symlink(&real, &link).unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(&link, config(&[Tier::daily(2)], 1_000, 0.01), &clock);
    assert!(fs::symlink_metadata(&link).unwrap().is_symlink());
    assert!(real.join("MANIFEST").is_file() && real.join("LOCK").is_file());
    let dotdot = tmp.path().join("real.tb/../real.tb");
    for other in [&real, &link, &dotdot] {
        let r = Engine::open_with(other, Options::default().clock(clock.clone()));
        assert!(
            matches!(r, Err(Error::Locked { .. })),
            "{}: {:?}",
            other.display(),
            r.as_ref().map(|_| ())
        );
    }
    e.insert(b"k").unwrap();
    e.close().unwrap();
    let e = open(&real, &clock);
    assert!(e.contains(b"k").unwrap());
    let r = Engine::open_with(&link, Options::default().clock(clock.clone()));
    assert!(matches!(r, Err(Error::Locked { .. })));
}

/// Files in the engine directory the engine did not make (an editor's
/// backup, an NFS "silly rename", notes) are left alone by open,
/// rotation and expiry: the engine deletes only names it makes.
#[test]
fn files_the_engine_did_not_make_are_left_alone() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, counting_config(), &clock);
    e.insert(b"k").unwrap();
    e.close().unwrap();
    let seg0 = seg_files(&dir)[0].clone();
    let strays = [
        "notes.txt".to_string(),
        format!("seg/{seg0}~"),
        format!("seg/.{seg0}.swp"),
        "seg/.nfs000000000001".to_string(),
        "seg/README".to_string(),
        "wal/notes.txt".to_string(),
        "wal/notes.tmp".to_string(),
        format!("wal/{seg0}.tmp"),
    ];
    for s in &strays {
        fs::write(dir.join(s), b"mine").unwrap();
    }
    let e = open(&dir, &clock);
    for d in 1..=20 {
        clock.set(day(d));
        e.maintain(day(d)).unwrap();
        e.insert(format!("k{d}").as_bytes()).unwrap();
    }
    e.close().unwrap();
    let e = open(&dir, &clock);
    e.close().unwrap();
    for s in &strays {
        assert_eq!(
            fs::read(dir.join(s)).ok().as_deref(),
            Some(&b"mine"[..]),
            "{s}"
        );
    }
    // What the engine does make there goes: a shadow copy's temporary
    // file and a segment file left by a crash.
    let ours = [
        format!("wal/{seg0}.0000000000000001.tmp"),
        "seg/d-20260101-0.seg".to_string(),
    ];
    for s in &ours {
        fs::write(dir.join(s), b"").unwrap();
    }
    let e = open(&dir, &clock);
    clock.set(day(21));
    e.maintain(day(21)).unwrap();
    e.close().unwrap();
    for s in &ours {
        assert!(!dir.join(s).exists(), "{s}");
    }
}

/// A segment file replaced by a symlink to a file outside the directory:
/// the target is never written (its bytes are not a segment of this
/// engine, so the open quarantines the link, not the target), and a
/// symlink to a segment that expires is unlinked, its target kept.
#[test]
fn a_symlinked_segment_never_writes_or_deletes_its_target() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let outside = tmp.path().join("precious");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, counting_config(), &clock);
    e.insert(b"k").unwrap();
    e.close().unwrap();
    // Not a segment: refused and moved aside, the target untouched.
    let daily = seg_files(&dir)
        .into_iter()
        .find(|n| n.starts_with("d-"))
        .unwrap();
    let content = vec![7u8; 20_000];
    fs::write(&outside, &content).unwrap();
    fs::remove_file(dir.join("seg").join(&daily)).unwrap();
    symlink(&outside, dir.join("seg").join(&daily)).unwrap();
    let r = Engine::open_with(&dir, Options::default().clock(clock.clone()));
    assert!(
        matches!(&r, Err(Error::Quarantined { path, .. }) if path.ends_with(&daily)),
        "{:?}",
        r.as_ref().map(|_| ())
    );
    assert_eq!(fs::read(&outside).unwrap(), content);
    let moved_aside = dir.join("quarantine").join(&daily);
    assert!(fs::symlink_metadata(moved_aside).unwrap().is_symlink());
    // A symlink to a real segment (moved elsewhere by hand) that expires:
    // the link goes, the target stays.
    let dir = tmp.path().join("e2.tb");
    let e = create(&dir, counting_config(), &clock);
    e.close().unwrap();
    let daily = seg_files(&dir)
        .into_iter()
        .find(|n| n.starts_with("d-"))
        .unwrap();
    let moved = tmp.path().join("moved.seg");
    fs::copy(dir.join("seg").join(&daily), &moved).unwrap();
    fs::remove_file(dir.join("seg").join(&daily)).unwrap();
    symlink(&moved, dir.join("seg").join(&daily)).unwrap();
    let e = open(&dir, &clock);
    for d in 1..=5 {
        clock.set(day(d));
        e.maintain(day(d)).unwrap();
    }
    e.close().unwrap();
    assert!(!seg_files(&dir).contains(&daily), "{:?}", seg_files(&dir));
    assert!(moved.is_file(), "the expired link's target was deleted");
}

/// `MANIFEST` replaced by a symlink to a copy outside: a new manifest is
/// renamed over the link, and the outside copy keeps its bytes.
#[test]
fn a_symlinked_manifest_is_replaced_not_written_through() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let outside = tmp.path().join("manifest-copy");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, counting_config(), &clock);
    e.close().unwrap();
    fs::rename(dir.join("MANIFEST"), &outside).unwrap();
    symlink(&outside, dir.join("MANIFEST")).unwrap();
    let before = fs::read(&outside).unwrap();
    let e = open(&dir, &clock);
    clock.set(day(1));
    e.maintain(day(1)).unwrap();
    e.close().unwrap();
    assert_eq!(fs::read(&outside).unwrap(), before);
    assert!(!fs::symlink_metadata(dir.join("MANIFEST"))
        .unwrap()
        .is_symlink());
}

/// A symlink at `MANIFEST.tmp` (left there by anyone who can write the
/// directory, while a writer runs) is never written through: the next
/// manifest is made as a new file, so the file the link points to keeps
/// its bytes and `MANIFEST` does not become a link to it.
#[test]
fn a_new_manifest_is_never_written_through_a_symlink() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let outside = tmp.path().join("precious");
    fs::write(&outside, b"precious").unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(&dir, counting_config(), &clock);
    e.insert(b"k").unwrap();
    symlink(&outside, dir.join("MANIFEST.tmp")).unwrap();
    clock.set(day(1));
    e.maintain(day(1)).unwrap();
    e.insert(b"k1").unwrap();
    e.close().unwrap();
    assert!(
        fs::read(&outside).unwrap() == b"precious",
        "the link's target was overwritten"
    );
    assert!(!fs::symlink_metadata(dir.join("MANIFEST"))
        .unwrap()
        .is_symlink());
    let e = open(&dir, &clock);
    assert!(e.contains(b"k1").unwrap());
}

/// `LOCK` replaced by a symlink (dangling, to a path outside the
/// directory): the open does not make the file the link points to, and
/// refuses with an error naming `LOCK`.
#[test]
fn a_symlinked_lock_file_is_refused_not_followed() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let outside = tmp.path().join("made-through-the-link");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, counting_config(), &clock);
    e.close().unwrap();
    fs::remove_file(dir.join("LOCK")).unwrap();
    symlink(&outside, dir.join("LOCK")).unwrap();
    let r = Engine::open_with(&dir, Options::default().clock(clock.clone()));
    assert!(!outside.exists(), "the open made the link's target");
    let err = match r {
        Ok(_) => panic!("opened through a symlinked LOCK"),
        Err(e) => e.to_string(),
    };
    assert!(
        err.contains("LOCK") && err.contains("symbolic links"),
        "{err}"
    );
}
