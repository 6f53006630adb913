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

/// The log file a checkpoint at `c` did not get to delete (a crash between
/// its manifest and the deletion) holds only records below `c`: every one
/// is in the checkpointed segments. Damaged later (cut short, a bit
/// flipped in its header or in a record before others), it is not needed
/// by any recovery, so the open ignores it rather than refusing the
/// directory for ever; every acknowledged key is there.
#[test]
fn a_damaged_log_file_below_the_checkpoint_does_not_refuse_the_open() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(3));
    let opts = || Options::default().clock(clock.clone());
    let cfg = timebloom::Config {
        sync: SyncPolicy::Always,
        ..config(&["7d:counting".parse::<Tier>().unwrap()], 2_000, 0.01)
    };
    let base = tmp.path().join("base");
    let keys: Vec<Vec<u8>> = (0..6).map(|i| url(31, i)).collect();
    let e = Engine::create_with(&base, cfg, opts()).unwrap();
    for k in &keys[..3] {
        assert!(e.insert(k).unwrap());
    }
    // A crash: the log holds the three records.
    std::mem::forget(e);
    let old = logs(&base);
    assert_eq!(old.len(), 1, "{old:?}");
    let old_bytes = fs::read(base.join("wal").join(&old[0])).unwrap();
    assert_eq!(old_bytes.len(), 32 + 3 * 40);
    // The open checkpoints past those records and deletes the file; put
    // back, it is what a crash before that deletion leaves.
    let crashed = tmp.path().join("crashed");
    copy_tree(&base, &crashed);
    let e = Engine::open_with(&crashed, opts()).unwrap();
    for k in &keys[3..] {
        assert!(e.insert(k).unwrap());
    }
    std::mem::forget(e);
    let base = crashed;
    assert!(!logs(&base).contains(&old[0]), "{:?}", logs(&base));

    let mut flipped_header = old_bytes.clone();
    flipped_header[17] ^= 1;
    let mut flipped_record = old_bytes.clone();
    flipped_record[32 + 5] ^= 1;
    let cases: [(&str, Vec<u8>); 4] = [
        ("intact", old_bytes.clone()),
        ("cut inside its header", old_bytes[..20].to_vec()),
        ("a bit flipped in its header", flipped_header),
        ("a bit flipped in its first record", flipped_record),
    ];
    for (i, (what, bytes)) in cases.iter().enumerate() {
        let dir = tmp.path().join(format!("case{i}"));
        copy_tree(&base, &dir);
        let leftover = dir.join("wal").join(&old[0]);
        fs::write(&leftover, bytes).unwrap();
        let e = Engine::open_with(&dir, opts().assume_power_loss(true))
            .unwrap_or_else(|err| panic!("{what}: the open was refused: {err}"));
        for k in &keys {
            assert!(
                e.contains(k).unwrap(),
                "{what}: an acknowledged key is lost"
            );
        }
        assert!(e.verify_each().is_empty(), "{what}: {:?}", e.verify_each());
        e.close().unwrap();
        assert!(
            !logs(&dir).contains(&old[0]),
            "{what}: the checkpoint left the file below it: {:?}",
            logs(&dir)
        );
    }
}

/// A log file's header: magic, version 1, CRC32 of bytes 0..12 and 16..24,
/// the first LSN, zeros.
fn log_header(first: u64) -> Vec<u8> {
    let mut b = vec![0u8; 32];
    b[0..8].copy_from_slice(b"TBLMWAL\0");
    b[8..12].copy_from_slice(&1u32.to_le_bytes());
    b[16..24].copy_from_slice(&first.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    h.update(&b[0..12]);
    h.update(&b[16..24]);
    b[12..16].copy_from_slice(&h.finalize().to_le_bytes());
    b
}

/// A log file's name is its first LSN, and recovery reads the files in
/// name order. Two log files under each other's names (renamed or copied
/// by hand) ended the replay at the first of them, silently: the
/// acknowledged keys logged in both were dropped (the counting window set
/// back to its checkpoint copy without them), and one of the files was
/// deleted as a file past the log. A file whose name is not its header's
/// first LSN is refused by name.
#[test]
fn a_log_file_under_another_name_is_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a");
    let clock = ManualClock::new(day(3));
    let opts = || Options::default().clock(clock.clone());
    let cfg = timebloom::Config {
        sync: SyncPolicy::Always,
        ..config(&["7d:counting".parse::<Tier>().unwrap()], 2_000, 0.01)
    };
    let keys: Vec<Vec<u8>> = (0..5).map(|i| url(32, i)).collect();
    let e = Engine::create_with(&dir, cfg, opts()).unwrap();
    for k in &keys {
        assert!(e.insert(k).unwrap());
    }
    std::mem::forget(e);
    let dir = {
        let crashed = tmp.path().join("crashed");
        copy_tree(&dir, &crashed);
        crashed
    };
    let name = logs(&dir).pop().unwrap();
    let bytes = fs::read(dir.join("wal").join(&name)).unwrap();
    let c = u64::from_str_radix(name.trim_end_matches(".log"), 16).unwrap();
    let recs = |from: u64, n: usize| {
        let at = 32 + 40 * (from - c) as usize;
        let mut f = log_header(from);
        f.extend_from_slice(&bytes[at..at + 40 * n]);
        f
    };
    // The log as three files (as a checkpoint beside the writers leaves
    // it), the last two under each other's names.
    let wal = dir.join("wal");
    fs::write(wal.join(format!("{c:016x}.log")), recs(c, 1)).unwrap();
    fs::write(wal.join(format!("{:016x}.log", c + 3)), recs(c + 1, 2)).unwrap();
    fs::write(wal.join(format!("{:016x}.log", c + 1)), recs(c + 3, 2)).unwrap();

    match Engine::open_with(&dir, opts().assume_power_loss(true)) {
        Err(timebloom::Error::Corrupt { path, reason }) => {
            let named = format!("{:016x}.log", c + 1);
            assert!(path.ends_with(&named), "{}: {reason}", path.display());
            assert!(
                reason.contains(&format!("{:016x}", c + 3)),
                "the error does not say what the header holds: {reason}"
            );
        }
        Err(e) => panic!("{e}"),
        Ok(e) => {
            for (i, k) in keys.iter().enumerate() {
                assert!(
                    e.contains(k).unwrap(),
                    "acknowledged key {i} (LSN {}) was lost; log files now {:?}",
                    c + i as u64,
                    logs(&dir)
                );
            }
        }
    }
}
