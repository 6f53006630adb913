//! Reopening under another sync policy than the last writer's.

mod common;
#[path = "common/durable.rs"]
mod durable;

use std::fs;
use std::path::Path;
use std::sync::Mutex;

use common::*;
use durable::{power_fail, record_syncs};
use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};

/// The sync hook is the process's: the tests that install one take turns.
static HOOK: Mutex<()> = Mutex::new(());

fn shadows(dir: &Path) -> Vec<(std::ffi::OsString, Vec<u8>)> {
    fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_name().to_string_lossy().ends_with(".shadow"))
        .map(|e| (e.file_name(), fs::read(e.path()).unwrap()))
        .collect()
}

/// A writer under `always` leaves a log and counting shadows; an open
/// under `none` makes the bodies durable and deletes the log, then the
/// shadows: a crash between the two deletions leaves the shadows of the
/// old checkpoint with no log. Writes made under `none` after that (closed
/// cleanly) and the first writer's writes after its checkpoint are in the
/// bodies, not in those shadows. A later open under `always` must not
/// start its log from them: a power loss then set the counting windows
/// back to the stale shadows, and every write in between was lost.
#[test]
fn stale_shadows_without_a_log_are_not_a_checkpoint() {
    stale_shadows(true);
}

/// The same without the second open under `none`: the open under
/// `always` comes straight after the interrupted one.
#[test]
fn stale_shadows_left_by_an_interrupted_open_are_not_a_checkpoint() {
    stale_shadows(false);
}

fn stale_shadows(none_again: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a.tb");
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(2).counting()], 1_000, 0.01);
    cfg.sync = SyncPolicy::Always;
    let a = Engine::create_with(&dir, cfg, Options::default().clock(clock.clone())).unwrap();
    for i in 0..10 {
        a.insert(&url(1, i)).unwrap();
    }
    a.flush().unwrap(); // a checkpoint: shadows with keys 0..10
    for i in 10..20 {
        a.insert(&url(1, i)).unwrap(); // logged after it
    }
    // The directory as a kill -9 leaves it (the page cache holds it all).
    let img = tmp.path().join("img.tb");
    copy_tree(&dir, &img);
    drop(a);
    let stale = shadows(&img);
    assert!(!stale.is_empty());
    // Under `none`: the bodies are flushed, the log deleted; the crash
    // before the shadows' deletion is modelled by putting them back.
    let b = Engine::open_with(
        &img,
        Options::default()
            .clock(clock.clone())
            .sync(SyncPolicy::None),
    )
    .unwrap();
    b.close().unwrap();
    for (name, bytes) in &stale {
        fs::write(img.join("wal").join(name), bytes).unwrap();
    }
    // Reopened under `none` again (no log), more writes, a clean close:
    // durable.
    let last = if none_again {
        let b = Engine::open_with(
            &img,
            Options::default()
                .clock(clock.clone())
                .sync(SyncPolicy::None),
        )
        .unwrap();
        for i in 20..30 {
            b.insert(&url(1, i)).unwrap();
        }
        b.close().unwrap();
        30
    } else {
        20
    };
    // Under the stored `always`: one more write, then a power loss (the
    // files as they are, replayed as after a restart).
    let c = Engine::open_with(&img, Options::default().clock(clock.clone())).unwrap();
    c.insert(&url(1, 100)).unwrap();
    let lost = tmp.path().join("lost.tb");
    copy_tree(&img, &lost);
    drop(c);
    let d = Engine::open_with(
        &lost,
        Options::default()
            .clock(clock.clone())
            .assume_power_loss(true),
    )
    .unwrap();
    let missing: Vec<u64> = (0..last)
        .chain([100])
        .filter(|&i| !d.contains(&url(1, i)).unwrap())
        .collect();
    assert!(
        missing.is_empty(),
        "keys lost after the power loss: {missing:?}"
    );
}

/// An engine made under `none` has no `wal/`. Opened under `always`, the
/// open makes it and its first log file, syncs both, and an insert is
/// acknowledged once its record is synced there. The entry of `wal/` in
/// the engine's directory must be durable by then: with no manifest
/// written at that open (Bloom tiers, no rotation), nothing synced the
/// engine's directory, and a power loss took `wal/` with the log, and the
/// acknowledged key.
#[test]
fn a_log_made_by_an_open_under_always_survives_a_power_loss() {
    let _turn = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let dir = root.join("crawl.tb");
    let clock = ManualClock::new(day(0));
    // The root predates the engine: its entries are durable.
    let durable = record_syncs(&root, &[tmp.path()]);
    let mut cfg = config(&[Tier::daily(7)], 1_000, 0.01);
    cfg.sync = SyncPolicy::None;
    let opts = || Options::default().clock(clock.clone());
    Engine::create_with(&dir, cfg, opts())
        .unwrap()
        .close()
        .unwrap();
    assert!(!dir.join("wal").exists());
    let e = Engine::open_with(&dir, opts().sync(SyncPolicy::Always)).unwrap();
    let key = url(7, 1);
    assert!(e.insert(&key).unwrap());
    // The power fails once the insert is acknowledged: only what the
    // syncs made durable is left.
    let image = power_fail(&durable, tmp.path());
    std::mem::forget(e);
    let img = image.join("root").join("crawl.tb");
    let e = Engine::open_with(
        &img,
        opts().sync(SyncPolicy::Always).assume_power_loss(true),
    )
    .unwrap();
    assert!(
        e.contains(&key).unwrap(),
        "a key acknowledged under always was lost with the log's directory"
    );
}

/// A create into a path whose parents do not exist yet makes them. The
/// create syncs the engine's parent (its entry), but made the parents
/// above it with no sync: after a power loss the whole engine, and every
/// key acknowledged under `always`, was gone with them.
#[test]
fn a_create_under_new_parents_survives_a_power_loss() {
    let _turn = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let dir = root.join("a").join("b").join("crawl.tb");
    let clock = ManualClock::new(day(0));
    // `root` predates the engine too: its entries (none) are durable.
    let durable = record_syncs(&root, &[tmp.path(), &root]);
    let mut cfg = config(&[Tier::daily(7)], 1_000, 0.01);
    cfg.sync = SyncPolicy::Always;
    let opts = || Options::default().clock(clock.clone());
    let e = Engine::create_with(&dir, cfg, opts()).unwrap();
    let key = url(8, 1);
    assert!(e.insert(&key).unwrap());
    let image = power_fail(&durable, tmp.path());
    std::mem::forget(e);
    let img = image.join("root").join("a").join("b").join("crawl.tb");
    let e = Engine::open_with(&img, opts().assume_power_loss(true))
        .expect("the engine is gone after a power loss");
    assert!(e.contains(&key).unwrap());
}
