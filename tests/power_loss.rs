//! Simulated power loss. A hook sees every sync the engine makes
//! (`timebloom::testing::set_sync_hook`) and records what it made durable:
//! a file's bytes at its fsync/fdatasync/msync, a directory's entries at
//! its fsync. A crash at sync point `k` keeps the durable state as of `k`
//! plus a random choice of the writes not yet synced (torn: each 4 KiB page
//! of a file's unsynced content, and a 512-byte-grain prefix of what was
//! appended), and drops directory entries no fsync made durable. The
//! engine, opened on each such image as after a power loss, must open every
//! time; under `always` every key acknowledged before the crash point must
//! be there. The workloads rotate windows, grow chains, expire windows,
//! remove keys from counting tiers, and fill a fingerprint table beside a
//! daily tier past its plan (it grows and relocates entries).

mod common;
#[path = "common/durable.rs"]
mod durable;

use std::collections::HashMap;
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use common::*;
use durable::{all_files, build_image, entries, Durable, FileId, Rng};
use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};

/// One sync point: the durable state right after it, what every file held
/// then, the clock, and how many writes had been acknowledged.
struct Point {
    durable: Durable,
    current: HashMap<FileId, Vec<u8>>,
    now: SystemTime,
    acked: usize,
}

#[derive(Default)]
struct Recorder {
    root: PathBuf,
    durable: Durable,
    points: Vec<Point>,
    acked: usize,
    clock: Option<ManualClock>,
}

impl Recorder {
    fn observe(&mut self, path: &Path) {
        if !path.starts_with(&self.root) || !self.durable.observe(path) {
            return; // another test's engine, or gone
        }
        let mut current = HashMap::new();
        all_files(&self.root, &mut current);
        let now = self.clock.as_ref().map_or(SystemTime::UNIX_EPOCH, |c| {
            use timebloom::Clock;
            c.now()
        });
        self.points.push(Point {
            durable: self.durable.clone(),
            current,
            now,
            acked: self.acked,
        });
    }
}

type Workload = fn(&Engine, &ManualClock, &Arc<Mutex<Recorder>>, &mut Vec<(Vec<u8>, bool)>);

/// Runs `workload` on a new engine under `policy` while recording every
/// sync, then crashes at every sync point and checks the image.
fn crash_at_every_sync(tiers: &[Tier], policy: SyncPolicy, workload: Workload) -> usize {
    crash_at_every_sync_with(tiers, policy, workload, None)
}

/// [`crash_at_every_sync`] with the log checkpointed every `checkpoint`
/// bytes (`Options::checkpoint_log_bytes`).
fn crash_at_every_sync_with(
    tiers: &[Tier],
    policy: SyncPolicy,
    workload: Workload,
    checkpoint: Option<u64>,
) -> usize {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let dir = root.join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let rec = Arc::new(Mutex::new(Recorder {
        root: root.clone(),
        clock: Some(clock.clone()),
        ..Recorder::default()
    }));
    // The root itself is durable (it predates the engine).
    rec.lock()
        .unwrap()
        .durable
        .dirs
        .insert(tmp.path().to_path_buf(), entries(tmp.path()));
    // Every sealed window is rewritten in large pages (a copy synced and
    // renamed over it), however small: the crash points land in those too.
    timebloom::testing::set_rewrite_from(Some(0));
    let hook = Arc::clone(&rec);
    timebloom::testing::set_sync_hook(Some(Box::new(move |p: &Path| {
        // Blocking: every sync must be seen (the test only holds the lock
        // briefly, never while calling the engine).
        hook.lock().unwrap_or_else(|e| e.into_inner()).observe(p);
    })));
    let mut cfg = config(tiers, 300, 0.01);
    cfg.sync = policy;
    let mut opts = Options::default().clock(clock.clone());
    if let Some(bytes) = checkpoint {
        opts = opts.checkpoint_log_bytes(bytes);
    }
    let e = Engine::create_with(&dir, cfg, opts).unwrap();
    let mut acked = Vec::new();
    workload(&e, &clock, &rec, &mut acked);
    drop(e);
    timebloom::testing::set_sync_hook(None);
    timebloom::testing::set_rewrite_from(None);

    let rec = rec.lock().unwrap();
    let mut rng = Rng(7);
    let mut checked = 0;
    for (k, p) in rec.points.iter().enumerate() {
        let img = tempfile::tempdir().unwrap();
        build_image(&p.durable, &p.current, &root, img.path(), &mut rng);
        let edir = img.path().join("crawl.tb");
        if !edir.join("MANIFEST").exists() {
            // Before the create's own syncs finished: no engine yet, and
            // no write was acknowledged.
            assert_eq!(p.acked, 0, "point {k}: acknowledged writes but no engine");
            continue;
        }
        let c = ManualClock::new(p.now);
        let opts = Options::default()
            .clock(c)
            .allow_clock_jump(true)
            .assume_power_loss(true);
        let e = Engine::open_with(&edir, opts).unwrap_or_else(|err| {
            panic!(
                "point {k} of {}: the engine does not open: {err}",
                rec.points.len()
            )
        });
        if policy == SyncPolicy::Always {
            for (i, (key, present)) in acked[..p.acked].iter().enumerate() {
                if *present {
                    assert!(
                        e.contains(key).unwrap(),
                        "point {k}: acknowledged key {i} lost ({})",
                        String::from_utf8_lossy(key)
                    );
                }
            }
        }
        e.verify()
            .unwrap_or_else(|err| panic!("point {k}: verify after recovery: {err}"));
        checked += 1;
    }
    checked
}

/// Marks `n` more acknowledged writes (after the call that made them returned).
fn ack(rec: &Arc<Mutex<Recorder>>, acked: &mut Vec<(Vec<u8>, bool)>, keys: Vec<(Vec<u8>, bool)>) {
    acked.extend(keys);
    rec.lock().unwrap().acked = acked.len();
}

/// Bloom tiers: batches and single inserts over four days (rotation and
/// expiry of the daily tier), with more keys a day than planned (growth).
fn bloom_workload(
    e: &Engine,
    clock: &ManualClock,
    rec: &Arc<Mutex<Recorder>>,
    acked: &mut Vec<(Vec<u8>, bool)>,
) {
    for d in 0..4 {
        clock.set(day(d));
        for b in 0..12 {
            let keys: Vec<Vec<u8>> = (0..40).map(|i| url(d, b * 40 + i)).collect();
            e.insert_batch(&keys).unwrap();
            // Keys of a day that expires before the end are not checked.
            let keep = d >= 2;
            ack(rec, acked, keys.into_iter().map(|k| (k, keep)).collect());
        }
        for i in 0..5 {
            let k = url(100 + d, i);
            e.insert(&k).unwrap();
            ack(rec, acked, vec![(k, d >= 2)]);
        }
    }
}

/// Counting tiers: inserts, removes right after, and removes of the
/// previous day's keys (which reopen a sealed window).
fn counting_workload(
    e: &Engine,
    clock: &ManualClock,
    rec: &Arc<Mutex<Recorder>>,
    acked: &mut Vec<(Vec<u8>, bool)>,
) {
    for d in 0..3 {
        clock.set(day(d));
        // A key counted three times before the checkpoint that the
        // remove_at below makes, and taken back twice after it: replaying
        // those removes onto a body that already holds them would drop it
        // to zero (the recovery restores the checkpoint's copy first).
        let heavy = format!("heavy {d}").into_bytes();
        for _ in 0..3 {
            e.insert(&heavy).unwrap();
        }
        ack(rec, acked, vec![(heavy.clone(), true)]);
        if d > 0 {
            assert!(e.remove_at(&url(d - 1, 1), day(d - 1)).unwrap());
            if let Some(m) = acked.iter_mut().find(|m| m.0 == url(d - 1, 1)) {
                m.1 = false;
            }
        }
        for _ in 0..2 {
            assert!(e.remove(&heavy).unwrap());
            ack(rec, acked, vec![]);
        }
        for b in 0..6 {
            let keys: Vec<Vec<u8>> = (0..30).map(|i| url(d, b * 30 + i)).collect();
            e.insert_batch(&keys).unwrap();
            let mut marks: Vec<(Vec<u8>, bool)> = keys.into_iter().map(|k| (k, true)).collect();
            // Every third key is taken back at once; its mark is cleared.
            for m in marks.iter_mut().step_by(3) {
                assert!(e.remove(&m.0).unwrap());
                m.1 = false;
            }
            ack(rec, acked, marks);
        }
        if d > 0 {
            // Take back a few of yesterday's keys (a sealed window reopens).
            for i in (3..30).step_by(7) {
                let k = url(d - 1, i);
                if let Some(m) = acked.iter_mut().find(|m| m.0 == k && m.1) {
                    assert!(e.remove_at(&k, day(d - 1)).unwrap());
                    m.1 = false;
                }
            }
            rec.lock().unwrap().acked = acked.len();
        }
    }
}

/// A clock stepped back into a day whose window is sealed: the inserts go
/// to the newest windows (docs/design.md, "Time"), and their log records
/// must bring them back there, not to the sealed window of the clock's
/// instant (where replay skips them).
fn clock_behind_workload(
    e: &Engine,
    clock: &ManualClock,
    rec: &Arc<Mutex<Recorder>>,
    acked: &mut Vec<(Vec<u8>, bool)>,
) {
    for d in 0..3 {
        clock.set(day(d));
        let keys: Vec<Vec<u8>> = (0..40).map(|i| url(d, i)).collect();
        e.insert_batch(&keys).unwrap();
        ack(rec, acked, keys.into_iter().map(|k| (k, d >= 1)).collect());
    }
    clock.set(day(1) + std::time::Duration::from_secs(3_600));
    for i in 0..10 {
        let k = url(200, i);
        assert!(e.insert(&k).unwrap());
        ack(rec, acked, vec![(k, true)]);
    }
    let keys: Vec<Vec<u8>> = (0..30).map(|i| url(201, i)).collect();
    e.insert_batch(&keys).unwrap();
    ack(rec, acked, keys.into_iter().map(|k| (k, true)).collect());
}

// One test drives every workload in turn: the sync hook is process-wide.
#[test]
fn power_loss_at_every_sync_point() {
    let bloom = [Tier::daily(2), Tier::weekly(2)];
    let counting = [Tier::daily(2).counting(), Tier::weekly(2).counting()];
    let n = crash_at_every_sync(&bloom, SyncPolicy::Always, bloom_workload);
    println!("bloom, always: {n} crash points");
    assert!(n > 50, "only {n} crash points");
    let n = crash_at_every_sync(&counting, SyncPolicy::Always, counting_workload);
    println!("counting, always: {n} crash points");
    assert!(n > 50, "only {n} crash points");
    // The log checkpointed every 150 records: Bloom tiers checkpoint beside
    // the writers (a new log file, the segments flushed on a thread, the
    // manifest at the next write); counting tiers stop the writers.
    let small = Some(150 * 40);
    let n = crash_at_every_sync_with(&bloom, SyncPolicy::Always, bloom_workload, small);
    println!("bloom, always, checkpoints beside the writers: {n} crash points");
    assert!(n > 50, "only {n} crash points");
    let n = crash_at_every_sync_with(&counting, SyncPolicy::Always, counting_workload, small);
    println!("counting, always, small log: {n} crash points");
    assert!(n > 50, "only {n} crash points");
    // A fingerprint table beside a daily tier, overfilled (it grows and
    // relocates entries): its shadow copies and replay with days.
    let table = [Tier::daily(2), Tier::fingerprint(3)];
    let n = crash_at_every_sync(&table, SyncPolicy::Always, bloom_workload);
    println!("fingerprint, always: {n} crash points");
    assert!(n > 50, "only {n} crash points");
    // The clock stepped back behind the newest windows: a daily tier alone
    // (no other tier holds the keys in a window of the clock's instant),
    // and a table beside it.
    for tiers in [&[Tier::daily(3)][..], &table[..]] {
        let n = crash_at_every_sync(tiers, SyncPolicy::Always, clock_behind_workload);
        println!("clock behind, {tiers:?}, always: {n} crash points");
        assert!(n > 20, "only {n} crash points");
    }
    for policy in [
        SyncPolicy::Interval(std::time::Duration::from_millis(5)),
        SyncPolicy::None,
    ] {
        let n = crash_at_every_sync(&bloom, policy, bloom_workload);
        println!("bloom, {policy}: {n} crash points, every one opened");
        let n = crash_at_every_sync_with(&bloom, policy, bloom_workload, small);
        println!("bloom, {policy}, small log: {n} crash points, every one opened");
        let n = crash_at_every_sync(&counting, policy, counting_workload);
        println!("counting, {policy}: {n} crash points, every one opened");
        let n = crash_at_every_sync(&table, policy, bloom_workload);
        println!("fingerprint, {policy}: {n} crash points, every one opened");
    }
}

/// The crash image tells files apart by inode number and birth time: a
/// file system gives a new file the number of one just deleted, and the
/// image must not lay the new file's unsynced pages over the old file
/// that a durable directory entry still names (a manifest replaced by a
/// rename, its old inode's number taken by the next file: the image's
/// manifest read as "bad magic", one run in twenty here under load).
#[test]
fn a_reused_inode_number_is_another_file() {
    use std::os::unix::fs::MetadataExt;
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let old = root.join("MANIFEST");
    fs::write(&old, vec![b'm'; 6000]).unwrap();
    let mut durable = Durable::default();
    assert!(durable.observe(&old));
    assert!(durable.observe(&root));
    let ino = fs::metadata(&old).unwrap().ino();
    fs::remove_file(&old).unwrap();
    let new = root.join("0000000000000001.log");
    fs::write(&new, vec![b'x'; 9000]).unwrap();
    if fs::metadata(&new).unwrap().ino() != ino {
        println!("the file system gave the new file another number: nothing to tell apart");
    }
    let mut current = HashMap::new();
    all_files(&root, &mut current);
    for seed in 0..16 {
        let img = tempfile::tempdir().unwrap();
        build_image(&durable, &current, &root, img.path(), &mut Rng(seed));
        assert_eq!(
            fs::read(img.path().join("MANIFEST")).unwrap(),
            vec![b'm'; 6000],
            "seed {seed}"
        );
    }
}
