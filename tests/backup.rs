//! The live backup procedure of docs/operations.md, "Backup": copy
//! MANIFEST, seg/, then wal/ while a writer runs under `always`, delete
//! wal/BOOT in the copy, and the copy opens with every write acknowledged
//! before the copy began (counting removes included).

mod common;

use std::collections::HashSet;
use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, SyncPolicy, Tier};

fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        // A file may vanish between listing and copying (a checkpoint).
        let _ = fs::copy(e.path(), to.join(e.file_name()));
    }
}

/// A writer started by [`spawn_writer`].
struct Writer {
    /// The count of keys acknowledged so far (after each batch).
    done: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    thread: std::thread::JoinHandle<()>,
    /// The keys (their `i`) whose insert answered "seen" though no key was
    /// inserted twice: each shares a slot with another key in a
    /// fingerprint table (docs/fingerprint.md, "remove": same fingerprint
    /// and bucket pair, a chance of about the false-positive rate per
    /// insert), and a remove of that other key removes it too, in the
    /// writer's engine as in any copy. Such a key is not taken back, and
    /// not counted lost when absent.
    shared: Arc<Mutex<HashSet<u64>>>,
}

impl Writer {
    /// Stops the writer and waits for it. The keys left out as shared are
    /// few (the engines here are planned at 0.1%): many would be inserts
    /// answering "seen" wrongly, and the copies' checks would leave out
    /// what they should find.
    fn finish(self) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.join().unwrap();
        let (shared, done) = (
            self.shared.lock().unwrap().len(),
            self.done.load(Ordering::SeqCst),
        );
        assert!(
            shared <= done / 100,
            "{shared} of {done} keys answered seen"
        );
    }

    /// Whether key `i`, acknowledged before a copy, must be found in it:
    /// not a key taken back (when `removes`), nor one that shared a slot.
    fn kept(&self, i: u64, removes: bool) -> bool {
        let taken_back = removes && i.is_multiple_of(10);
        !taken_back && !self.shared.lock().unwrap().contains(&i)
    }
}

/// Starts a writer that inserts `batches` batches of 10 keys (`url(1, i)`,
/// in order) into `e` until told to stop, taking back each batch's first
/// key when `removes` (unless its insert answered "seen": see
/// [`Writer::shared`]).
fn spawn_writer(e: &Arc<Engine>, batches: u64, removes: bool) -> Writer {
    let done = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let shared = Arc::new(Mutex::new(HashSet::new()));
    let (e, acked, stopped, seen) = (
        Arc::clone(e),
        Arc::clone(&done),
        Arc::clone(&stop),
        Arc::clone(&shared),
    );
    let thread = std::thread::spawn(move || {
        let mut b = 0u64;
        while !stopped.load(Ordering::SeqCst) && b < batches {
            let keys: Vec<Vec<u8>> = (0..10).map(|i| url(1, b * 10 + i)).collect();
            let new = e.insert_batch(&keys).unwrap();
            let mut seen = seen.lock().unwrap();
            seen.extend((0..10).filter(|&i| !new[i as usize]).map(|i| b * 10 + i));
            if removes && new[0] {
                assert!(e.remove(&keys[0]).unwrap());
            }
            drop(seen);
            acked.store(((b + 1) * 10) as usize, Ordering::SeqCst);
            b += 1;
        }
    });
    Writer {
        done,
        stop,
        thread,
        shared,
    }
}

#[test]
fn a_live_copy_opens_with_every_write_acknowledged_before_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live.tb");
    let clock = ManualClock::new(day(0));
    let tiers = [Tier::daily(3).counting(), Tier::weekly(2).counting()];
    let mut cfg = config(&tiers, 20_000, 0.001);
    cfg.sync = SyncPolicy::Always;
    let e = Arc::new(Engine::create_with(&dir, cfg, Options::default().clock(clock)).unwrap());
    // Every batch's first key is taken back at once.
    let writer = spawn_writer(&e, 2_000, true);
    let mut copies = 0;
    for attempt in 0..20 {
        while writer.done.load(Ordering::SeqCst) < 500 * (attempt + 1) {
            // A writer that failed stops the test instead of hanging it.
            assert!(!writer.thread.is_finished(), "the writer stopped early");
            std::thread::yield_now();
        }
        let acked = writer.done.load(Ordering::SeqCst);
        let copy = tmp.path().join(format!("copy{attempt}"));
        fs::create_dir_all(&copy).unwrap();
        fs::copy(dir.join("MANIFEST"), copy.join("MANIFEST")).unwrap();
        if !finish_copy(&dir, &copy) {
            continue; // a checkpoint ran during the copy: the procedure copies again
        }
        let clock = ManualClock::new(day(0));
        let ro = Engine::open_with(&copy, Options::default().clock(clock)).unwrap();
        for i in 0..acked as u64 {
            let present = ro.contains(&url(1, i)).unwrap();
            if writer.kept(i, true) {
                assert!(
                    present,
                    "copy {attempt}: key {i} acknowledged before the copy is missing"
                );
            }
        }
        copies += 1;
        if copies == 5 {
            break;
        }
    }
    writer.finish();
    assert!(copies >= 3, "only {copies} usable copies");
}

/// The copy's `MANIFEST` is taken first; a rotation that expires a window
/// before `seg/` is copied deletes a file that manifest still names. The
/// window is expired for the copy too (it opens at the same instant or
/// later), so the copy opens without it, and keeps every other key.
#[test]
fn a_copy_whose_manifest_names_a_window_expired_meanwhile_opens() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live.tb");
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(2)], 1_000, 0.01);
    cfg.sync = SyncPolicy::Always;
    let e = Engine::create_with(&dir, cfg, Options::default().clock(clock.clone())).unwrap();
    e.insert(&url(1, 0)).unwrap();
    clock.set(day(1));
    e.insert(&url(1, 1)).unwrap();
    let copy = tmp.path().join("copy.tb");
    fs::create_dir_all(&copy).unwrap();
    // 1. MANIFEST (names the windows of days 0 and 1).
    fs::copy(dir.join("MANIFEST"), copy.join("MANIFEST")).unwrap();
    // The writer crosses into day 2: day 0 expires, its file is deleted.
    clock.set(day(2));
    e.insert(&url(1, 2)).unwrap();
    // 2. seg/, 3. wal/, 4. no BOOT.
    copy_dir(&dir.join("seg"), &copy.join("seg"));
    copy_dir(&dir.join("wal"), &copy.join("wal"));
    let _ = fs::remove_file(copy.join("wal/BOOT"));
    let manifest = fs::read(copy.join("MANIFEST")).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&manifest[20..]).unwrap();
    let c = body["checkpoint_lsn"].as_u64().unwrap_or(0);
    assert!(
        copy.join(format!("wal/{c:016x}.log")).exists(),
        "step 5: no checkpoint ran during the copy"
    );
    let ro = Engine::open_read_only_with(&copy, Options::default().clock(clock.clone()))
        .unwrap_or_else(|err| panic!("the copy does not open read-only: {err}"));
    assert!(ro.contains(&url(1, 1)).unwrap());
    drop(ro);
    // Step 4 skipped (wal/BOOT kept) on this boot, the open would not
    // replay the log, and the day-2 window, which the copied manifest
    // does not name, would be deleted with its key: the open is refused,
    // naming that file, and deletes nothing.
    let skipped = tmp.path().join("no-step-4.tb");
    fs::create_dir_all(&skipped).unwrap();
    fs::copy(copy.join("MANIFEST"), skipped.join("MANIFEST")).unwrap();
    copy_dir(&copy.join("seg"), &skipped.join("seg"));
    copy_dir(&copy.join("wal"), &skipped.join("wal"));
    fs::copy(dir.join("wal/BOOT"), skipped.join("wal/BOOT")).unwrap();
    match Engine::open_with(&skipped, Options::default().clock(clock.clone())) {
        Err(err @ Error::Corrupt { .. }) => {
            assert!(err.to_string().contains("d-20260107-0.seg"), "{err}");
            assert!(skipped.join("seg/d-20260107-0.seg").exists());
        }
        Err(err) => panic!("refused, but not as damage: {err}"),
        Ok(w) => panic!(
            "opened; the day-2 key reads {}",
            w.contains(&url(1, 2)).unwrap()
        ),
    }
    let w = Engine::open_with(&copy, Options::default().clock(clock.clone()))
        .unwrap_or_else(|err| panic!("the copy does not open: {err}"));
    assert!(w.contains(&url(1, 1)).unwrap(), "a key of day 1 is lost");
    w.verify().unwrap();
    drop(w);
    let manifest = fs::read(copy.join("MANIFEST")).unwrap();
    assert!(
        !String::from_utf8_lossy(&manifest).contains("d-20260105-0.seg"),
        "the copy's manifest still names the expired window"
    );
    let w = Engine::open_with(&copy, Options::default().clock(clock.clone())).unwrap();
    assert!(w.contains(&url(1, 1)).unwrap());
    drop(w);
    drop(e);
}

/// Copies `dir` by the procedure of docs/operations.md, "Backup", steps
/// 2 to 4, into `copy`, which holds the copied `MANIFEST` already; returns
/// whether the checks of step 5 pass.
fn finish_copy(dir: &Path, copy: &Path) -> bool {
    copy_dir(&dir.join("seg"), &copy.join("seg"));
    copy_dir(&dir.join("wal"), &copy.join("wal"));
    let _ = fs::remove_file(copy.join("wal/BOOT"));
    step_5(dir, copy)
}

/// The `checkpoint_lsn` of the `MANIFEST` in `dir`.
fn checkpoint_of(dir: &Path) -> u64 {
    let manifest = fs::read(dir.join("MANIFEST")).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&manifest[20..]).unwrap();
    body["checkpoint_lsn"].as_u64().unwrap_or(0)
}

/// Whether the checks of step 5 pass for `copy`, taken from `dir`: the
/// copied `wal/` holds the log of the copied checkpoint, the writer's
/// `MANIFEST` still names that checkpoint (no checkpoint ran during the
/// copy), and the copied `seg/` holds every file the copied manifest
/// names.
fn step_5(dir: &Path, copy: &Path) -> bool {
    let manifest = fs::read(copy.join("MANIFEST")).unwrap();
    let body: serde_json::Value = serde_json::from_slice(&manifest[20..]).unwrap();
    let c = checkpoint_of(copy);
    let named = body["segments"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|e| e["files"].as_array().unwrap().iter())
        .all(|f| copy.join("seg").join(f.as_str().unwrap()).exists());
    copy.join(format!("wal/{c:016x}.log")).exists() && checkpoint_of(dir) == c && named
}

/// A checkpoint that runs while `wal/` is copied, after the log files were
/// copied and before the shadow copies were (a copy program's order is
/// the directory's), deletes the shadow copies at the copied manifest's
/// checkpoint: the copy has that checkpoint's log but no shadows, and its
/// recovery takes each counting window's body as copied (every write up
/// to step 2) and replays the log since the checkpoint onto it, counting
/// those writes twice. Step 5 catches it: the writer's `MANIFEST` names
/// another checkpoint after the copy than the one copied.
#[test]
fn a_checkpoint_while_wal_is_copied_is_caught_by_step_5() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live.tb");
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(3).counting()], 1_000, 0.001);
    cfg.sync = SyncPolicy::Always;
    let e = Engine::create_with(&dir, cfg, Options::default().clock(clock.clone())).unwrap();
    e.insert(&url(1, 0)).unwrap();
    e.flush().unwrap();
    let k = url(1, 1);
    e.insert(&k).unwrap();
    let copy = tmp.path().join("copy.tb");
    fs::create_dir_all(copy.join("wal")).unwrap();
    // 1. MANIFEST; 2. seg/.
    fs::copy(dir.join("MANIFEST"), copy.join("MANIFEST")).unwrap();
    copy_dir(&dir.join("seg"), &copy.join("seg"));
    // 3. wal/: the log files first, then a checkpoint, then the rest.
    let listed: Vec<_> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|f| f.unwrap().path())
        .collect();
    let (logs, rest): (Vec<_>, Vec<_>) = listed
        .iter()
        .partition(|p| p.extension().is_some_and(|x| x == "log"));
    for p in logs {
        fs::copy(p, copy.join("wal").join(p.file_name().unwrap())).unwrap();
    }
    e.flush().unwrap();
    for p in rest {
        let _ = fs::copy(p, copy.join("wal").join(p.file_name().unwrap()));
    }
    // 4.
    let _ = fs::remove_file(copy.join("wal/BOOT"));
    let shadows = fs::read_dir(copy.join("wal"))
        .unwrap()
        .filter(|f| {
            f.as_ref()
                .unwrap()
                .path()
                .extension()
                .is_some_and(|x| x == "shadow")
        })
        .count();
    assert_eq!(shadows, 0, "the checkpoint left the copied shadow copies");
    // The copy is not the engine's state at any instant: the key taken
    // back once is still there.
    let wrong = tmp.path().join("wrong.tb");
    copy_tree(&copy, &wrong);
    let w = Engine::open_with(&wrong, Options::default().clock(clock.clone())).unwrap();
    assert!(w.remove(&k).unwrap());
    assert!(
        w.contains(&k).unwrap(),
        "the copy counts the key once: the check below has no case"
    );
    drop(w);
    assert!(
        !step_5(&dir, &copy),
        "step 5 passes a copy across a checkpoint"
    );
    // Copied again with no checkpoint meanwhile, the key taken back is gone.
    fs::remove_dir_all(&copy).unwrap();
    fs::create_dir_all(&copy).unwrap();
    fs::copy(dir.join("MANIFEST"), copy.join("MANIFEST")).unwrap();
    assert!(finish_copy(&dir, &copy));
    let w = Engine::open_with(&copy, Options::default().clock(clock.clone())).unwrap();
    assert!(w.contains(&url(1, 0)).unwrap());
    assert!(w.remove(&k).unwrap());
    assert!(!w.contains(&k).unwrap(), "the copy counts the key twice");
    drop(w);
    drop(e);
}

/// The copy's `MANIFEST` is taken first; the writer then drops the
/// drained oldest table of a fingerprint chain (the chain grew past it a
/// retention ago) and deletes its file before `seg/` is copied. The
/// copy's manifest names a table its `seg/` lacks, and an open cannot
/// tell a drained table from a lost one (a table's last day is in its
/// body; unlike a window's, it does not follow from the clock): the copy
/// is refused, unchanged, and step 5 of the procedure (every file the
/// copied manifest names is in the copied `seg/`) says to copy again. The
/// new copy opens with every live key.
#[test]
fn a_copy_across_a_dropped_table_is_refused_and_step_5_catches_it() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live.tb");
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::fingerprint(10)], 500, 0.001);
    cfg.sync = SyncPolicy::Always;
    let e = Engine::create_with(&dir, cfg, Options::default().clock(clock.clone())).unwrap();
    let key = |d: u64, i: u64| url(1, d * 1_000_000 + i);
    for b in 0..30 {
        let keys: Vec<Vec<u8>> = (0..1_000).map(|i| key(0, b * 1_000 + i)).collect();
        e.insert_batch(&keys).unwrap();
    }
    let grown = seg_files(&dir).len();
    assert!(grown >= 3, "chain of {grown}");
    let copy = tmp.path().join("copy.tb");
    let mut dropped_on = None;
    for d in 1..=14u64 {
        // 1. MANIFEST, before the writer's day `d` begins.
        let _ = fs::remove_dir_all(&copy);
        fs::create_dir_all(&copy).unwrap();
        fs::copy(dir.join("MANIFEST"), copy.join("MANIFEST")).unwrap();
        clock.set(day(d));
        e.maintain(day(d)).unwrap();
        let keys: Vec<Vec<u8>> = (0..100).map(|i| key(d, i)).collect();
        e.insert_batch(&keys).unwrap();
        if seg_files(&dir).len() < grown {
            dropped_on = Some(d);
            break;
        }
    }
    let d = dropped_on.expect("no table was dropped");
    assert!(
        !finish_copy(&dir, &copy),
        "step 5 passes a copy whose manifest names a dropped table"
    );
    let before = seg_files(&copy);
    for read_only in [true, false] {
        let opts = Options::default().clock(clock.clone());
        let opened = if read_only {
            Engine::open_read_only_with(&copy, opts)
        } else {
            Engine::open_with(&copy, opts)
        };
        match opened {
            Err(timebloom::Error::Io { source, path, .. })
                if source.kind() == std::io::ErrorKind::NotFound
                    && path.ends_with("f-table-0.seg") => {}
            Err(err) => panic!("the copy is refused for another reason: {err}"),
            Ok(_) => panic!("the copy opens without a table its manifest names"),
        }
    }
    assert_eq!(seg_files(&copy), before, "a refused open changed the copy");
    // Copied again: the manifest without the table.
    fs::remove_dir_all(&copy).unwrap();
    fs::create_dir_all(&copy).unwrap();
    fs::copy(dir.join("MANIFEST"), copy.join("MANIFEST")).unwrap();
    assert!(
        finish_copy(&dir, &copy),
        "step 5 fails with no writer change"
    );
    let w = Engine::open_with(&copy, Options::default().clock(clock.clone()))
        .unwrap_or_else(|err| panic!("the new copy does not open: {err}"));
    for day_ in (d - 9).max(1)..=d {
        for i in 0..100 {
            assert!(
                w.contains(&key(day_, i)).unwrap(),
                "day {day_} key {i} lost"
            );
        }
    }
    w.verify().unwrap();
    drop(w);
    drop(e);
}

/// The live procedure of `a_live_copy_opens_with_every_write_acknowledged_before_it`
/// for each tier kind: a writer under `always` inserts batches (and, when
/// no tier is Bloom, takes back each batch's first key) into an engine
/// planned for few keys, so that its chains grow, with a small log, so
/// that checkpoints (and, for counting windows and fingerprint tables,
/// their shadow copies) run while the copies are taken. Every copy that
/// passes step 5 opens with every key acknowledged before its step 1.
fn live_copies_keep_every_acknowledged_key(tiers: &[Tier], removes: bool) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("live.tb");
    let clock = ManualClock::new(day(0));
    let mut cfg = config(tiers, 2_000, 0.001);
    cfg.sync = SyncPolicy::Always;
    let opts = Options::default()
        .clock(clock)
        .checkpoint_log_bytes(64 << 10);
    let e = Arc::new(Engine::create_with(&dir, cfg, opts).unwrap());
    let writer = spawn_writer(&e, 3_000, removes);
    let (mut copies, mut retries) = (0, 0);
    for attempt in 0..40 {
        while writer.done.load(Ordering::SeqCst) < 600 * (attempt + 1) {
            assert!(!writer.thread.is_finished(), "the writer stopped early");
            std::thread::yield_now();
        }
        let acked = writer.done.load(Ordering::SeqCst);
        let copy = tmp.path().join(format!("copy{attempt}"));
        fs::create_dir_all(&copy).unwrap();
        fs::copy(dir.join("MANIFEST"), copy.join("MANIFEST")).unwrap();
        if !finish_copy(&dir, &copy) {
            retries += 1;
            continue;
        }
        let ro = Engine::open_with(&copy, Options::default().clock(ManualClock::new(day(0))))
            .unwrap_or_else(|err| panic!("copy {attempt} does not open: {err}"));
        for i in 0..acked as u64 {
            if !writer.kept(i, removes) {
                continue;
            }
            assert!(
                ro.contains(&url(1, i)).unwrap(),
                "{tiers:?} copy {attempt}: key {i} acknowledged before the copy is missing \
                 ({acked} acknowledged)"
            );
        }
        ro.verify().unwrap();
        drop(ro);
        fs::remove_dir_all(&copy).unwrap();
        copies += 1;
        if copies == 5 {
            break;
        }
    }
    writer.finish();
    assert!(
        copies >= 3,
        "only {copies} usable copies ({retries} copied again)"
    );
}

#[test]
fn a_live_copy_of_bloom_windows_and_a_table_keeps_every_acknowledged_key() {
    live_copies_keep_every_acknowledged_key(&[Tier::daily(3), Tier::fingerprint(10)], false);
}

#[test]
fn a_live_copy_of_counting_windows_and_a_table_keeps_every_acknowledged_key() {
    live_copies_keep_every_acknowledged_key(
        &[Tier::daily(3).counting(), Tier::fingerprint(10)],
        true,
    );
}

#[test]
fn a_live_copy_of_bloom_windows_keeps_every_acknowledged_key() {
    live_copies_keep_every_acknowledged_key(&[Tier::daily(3), Tier::weekly(2)], false);
}
