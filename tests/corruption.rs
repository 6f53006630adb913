//! Guards promise 2 and 3 of RELIABILITY: a damaged segment or manifest, a
//! bad config and a locked directory give typed errors naming the file,
//! never a panic and never silent use.

mod common;
#[path = "common/durable.rs"]
mod durable;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use timebloom::{Config, Engine, Error, ManualClock, Options, Tier};

/// A small engine with one sealed and one open daily segment.
fn small_engine(dir: &Path) -> ManualClock {
    two_days(dir, 50)
}

/// An engine of one daily tier planned for 50 keys a day: `n` keys on day
/// 0 (sealed), `today` on day 1 (open); closed.
fn two_days(dir: &Path, n: u64) -> ManualClock {
    let clock = ManualClock::new(day(0));
    let e = create(dir, config(&[Tier::daily(3)], 50, 0.01), &clock);
    for i in 0..n {
        e.insert(&url(1, i)).unwrap();
    }
    clock.set(day(1));
    e.insert(b"today").unwrap();
    e.close().unwrap();
    clock
}

fn segment_files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir.join("seg"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

fn open_result(dir: &Path, clock: &ManualClock, verify: bool) -> Result<Engine, Error> {
    Engine::open_with(
        dir,
        Options::default()
            .clock(clock.clone())
            .verify_on_open(verify),
    )
}

fn assert_names(err: &Error, file: &Path) {
    let msg = err.to_string();
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(msg.contains(name), "error does not name {name}: {msg}");
}

#[test]
fn every_truncation_of_a_segment_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    for file in segment_files(dir.path()) {
        let bytes = fs::read(&file).unwrap();
        let lens: Vec<usize> = (0..300).chain((300..bytes.len()).step_by(61)).collect();
        for len in lens {
            fs::write(&file, &bytes[..len]).unwrap();
            let err = open_result(dir.path(), &clock, false).expect_err("truncated segment opened");
            // Refused, and the file moved to quarantine/ (written back below).
            assert!(matches!(err, Error::Quarantined { .. }), "len {len}: {err}");
            assert_names(&err, &file);
            assert!(
                !file.exists(),
                "len {len}: the damaged file was not moved aside"
            );
        }
        // Appended junk is a wrong length too.
        let mut longer = bytes.clone();
        longer.extend_from_slice(&[0xAB; 100]);
        fs::write(&file, &longer).unwrap();
        assert!(matches!(
            open_result(dir.path(), &clock, false),
            Err(Error::Quarantined { .. })
        ));
        fs::write(&file, &bytes).unwrap();
    }
    open_result(dir.path(), &clock, true).expect("restored files open");
}

/// The header is kept twice (offsets 0 and 2048): a flip in one copy is
/// recovered from the other (the documented recovery for a torn header
/// rewrite) and reported by `verify`; the same flip in both is refused.
#[test]
fn every_header_bit_flip_is_recovered_or_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let file = segment_files(dir.path()).remove(0);
    let bytes = fs::read(&file).unwrap();
    for i in 0..128 {
        for bit in 0..8 {
            for copy in [0usize, 2048] {
                let mut b = bytes.clone();
                b[copy + i] ^= 1 << bit;
                fs::write(&file, &b).unwrap();
                let e = open_result(dir.path(), &clock, false)
                    .unwrap_or_else(|e| panic!("byte {copy}+{i} bit {bit}: one copy left: {e}"));
                // Either verify reports the damaged copy, or opening
                // repaired it (a segment whose newest header copy was bad
                // is resealed, which rewrites that copy).
                match e.verify() {
                    Err(err) => {
                        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
                        assert_names(&err, &file);
                    }
                    Ok(()) => {
                        let now = fs::read(&file).unwrap();
                        assert_ne!(
                            now[copy..copy + 128],
                            b[copy..copy + 128],
                            "byte {copy}+{i} bit {bit}: damaged copy neither reported nor repaired"
                        );
                    }
                }
                drop(e);
                fs::write(&file, &bytes).unwrap();
            }
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            b[2048 + i] ^= 1 << bit;
            fs::write(&file, &b).unwrap();
            match open_result(dir.path(), &clock, false) {
                Err(Error::Quarantined { .. }) => {}
                Err(e) => panic!("byte {i} bit {bit}: unexpected error {e}"),
                Ok(_) => panic!("byte {i} bit {bit}: both copies flipped, accepted"),
            }
        }
    }
    fs::write(&file, &bytes).unwrap();
}

/// A segment file's bytes with the header copy of the higher sequence
/// number written only up to `len` of its 128 bytes (zeros after): a
/// header rewrite torn there.
fn torn_newest_header(bytes: &[u8], len: usize) -> Vec<u8> {
    let seq = |at: usize| u32::from_le_bytes(bytes[at + 92..at + 96].try_into().unwrap());
    let newest = if seq(2048).wrapping_sub(seq(0)) as i32 > 0 {
        2048
    } else {
        0
    };
    let mut b = bytes.to_vec();
    b[newest + len..newest + 128].fill(0);
    b
}

/// A torn header rewrite: the newest copy half written (every prefix
/// length), the other intact. The file always opens.
#[test]
fn a_torn_header_rewrite_never_leaves_a_file_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    for file in segment_files(dir.path()) {
        let bytes = fs::read(&file).unwrap();
        for len in 0..128 {
            fs::write(&file, torn_newest_header(&bytes, len)).unwrap();
            open_result(dir.path(), &clock, false)
                .unwrap_or_else(|e| panic!("{}: torn at {len}: {e}", file.display()));
        }
        fs::write(&file, &bytes).unwrap();
    }
}

/// The same torn header rewrite under `Options::verify_on_open`, which
/// checks sealed bodies: the file still opens from its intact copy, and
/// nothing is moved to quarantine. It was refused as damage instead (a
/// sealed or open window quarantined, the open failing, or a degraded open
/// going on without every key of the window).
#[test]
fn a_torn_header_rewrite_opens_under_verify_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    for file in segment_files(dir.path()) {
        let bytes = fs::read(&file).unwrap();
        fs::write(&file, torn_newest_header(&bytes, 40)).unwrap();
        let e = open_result(dir.path(), &clock, true)
            .unwrap_or_else(|e| panic!("{}: torn, verify_on_open: {e}", file.display()));
        assert!(e.contains(b"today").unwrap());
        assert!(e.contains(&url(1, 0)).unwrap());
        drop(e);
        assert!(
            !dir.path().join("quarantine").exists(),
            "{}: a file was quarantined",
            file.display()
        );
        fs::write(&file, &bytes).unwrap();
    }
}

#[test]
fn a_sealed_body_flip_is_caught_by_verify() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let sealed = segment_files(dir.path()).remove(0); // day 0: sealed
    let mut b = fs::read(&sealed).unwrap();
    let at = 4096 + (b.len() - 4096) / 2;
    b[at] ^= 0x10;
    fs::write(&sealed, &b).unwrap();
    // Open is cheap and does not read sealed bodies; verify does.
    let e = open_result(dir.path(), &clock, false).unwrap();
    let err = e.verify().unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert_names(&err, &sealed);
    drop(e);
    let err = open_result(dir.path(), &clock, true).unwrap_err();
    assert_names(&err, &sealed);
}

/// An open segment's body has no checksum (it changes with every insert),
/// so a flipped bit there goes unnoticed at open. Sealing must not turn that
/// into a file that fails its own checks: the seal counts the body it
/// checksums instead of trusting the running count.
#[test]
fn sealing_a_damaged_open_segment_writes_a_consistent_file() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let open_seg = segment_files(dir.path()).pop().unwrap(); // day 1: open, clean
    let mut b = fs::read(&open_seg).unwrap();
    let at = 4096 + (b.len() - 4096) / 3;
    b[at] ^= 0x11;
    fs::write(&open_seg, &b).unwrap();
    let e = open_result(dir.path(), &clock, true).expect("an open body has no checksum");
    clock.set(day(2)); // rotation seals day 1
    e.insert(b"tomorrow").unwrap();
    e.close().unwrap();
    let e = open_result(dir.path(), &clock, true).expect("what the engine sealed verifies");
    e.verify().unwrap();
}

/// The same for a clean close: its header claims an exact fill count, so
/// the count it writes is the body's, even when the body was damaged while
/// the engine was closed (a running count gone wrong can even exceed the
/// cells, which the next open refuses as corrupt).
#[test]
fn a_clean_close_writes_the_body_fill_count() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let open_seg = segment_files(dir.path()).pop().unwrap(); // day 1: open, clean
    let mut b = fs::read(&open_seg).unwrap();
    for byte in &mut b[4096..] {
        *byte = 0; // forget every key of the open window
    }
    fs::write(&open_seg, &b).unwrap();
    let e = open_result(dir.path(), &clock, true).unwrap();
    e.insert(b"today").unwrap(); // sets the same bits again, counted again
    for i in 0..20 {
        e.insert(&url(2, i)).unwrap();
    }
    e.close().unwrap();
    let b = fs::read(&open_seg).unwrap();
    // The newer of the two header copies (by sequence number).
    let seq = |at: usize| u32::from_le_bytes(b[at + 92..at + 96].try_into().unwrap());
    let at = if seq(2048).wrapping_sub(seq(0)) as i32 > 0 {
        2048
    } else {
        0
    };
    let header = u64::from_le_bytes(b[at + 96..at + 104].try_into().unwrap());
    let body: u64 = b[4096..].iter().map(|x| u64::from(x.count_ones())).sum();
    assert_eq!(
        header, body,
        "the clean header's fill count is not the body's"
    );
    open_result(dir.path(), &clock, true).expect("reopens");
}

#[test]
fn zeroed_or_foreign_segments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let other = tempfile::tempdir().unwrap();
    small_engine(other.path());
    let file = segment_files(dir.path()).remove(0);
    let original = fs::read(&file).unwrap();
    // Another engine's file under the same name: another seed.
    fs::copy(segment_files(other.path()).remove(0), &file).unwrap();
    let err = open_result(dir.path(), &clock, false).unwrap_err();
    assert!(err.to_string().contains("another engine"), "{err}");
    // A zeroed header page.
    let mut z = original.clone();
    z[..4096].fill(0);
    fs::write(&file, &z).unwrap();
    assert!(matches!(
        open_result(dir.path(), &clock, false),
        Err(Error::Quarantined { .. })
    ));
    // Quarantined: the next open says so again.
    assert!(!file.exists());
    let err = open_result(dir.path(), &clock, false).unwrap_err();
    assert!(matches!(err, Error::Quarantined { .. }), "{err}");
    // A missing file the manifest names (and no quarantined copy).
    let q = dir
        .path()
        .join("quarantine")
        .join(file.file_name().unwrap());
    fs::remove_file(&q).unwrap();
    let err = open_result(dir.path(), &clock, false).unwrap_err();
    assert!(matches!(err, Error::Io { .. }), "{err}");
    assert_names(&err, &file);
}

#[test]
fn a_damaged_manifest_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let path = dir.path().join("MANIFEST");
    let bytes = fs::read(&path).unwrap();
    for len in [0, 7, 19, 20, bytes.len() / 2, bytes.len() - 1] {
        fs::write(&path, &bytes[..len]).unwrap();
        let err = open_result(dir.path(), &clock, false).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert_names(&err, &path);
    }
    let mut v = bytes.clone();
    v[8] = 99; // version
    fs::write(&path, &v).unwrap();
    assert!(matches!(
        open_result(dir.path(), &clock, false),
        Err(Error::UnsupportedVersion { got: 99, .. })
    ));
    // A body that names a file outside the directory, with a valid checksum.
    let body = String::from_utf8(bytes[20..].to_vec()).unwrap();
    let evil = body.replacen("\"d-", "\"../../d-", 1);
    let mut m = bytes[..20].to_vec();
    m[12..16].copy_from_slice(&(evil.len() as u32).to_le_bytes());
    m[16..20].copy_from_slice(&crc32(evil.as_bytes()).to_le_bytes());
    m.extend_from_slice(evil.as_bytes());
    fs::write(&path, &m).unwrap();
    let err = open_result(dir.path(), &clock, false).unwrap_err();
    assert!(err.to_string().contains("escapes"), "{err}");
    fs::write(&path, &bytes).unwrap();
    open_result(dir.path(), &clock, true).unwrap();
}

/// CRC-32 (IEEE), bit by bit: the test's own, independent of the engine's.
fn crc32(data: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &b in data {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0xEDB8_8320
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn leftover_files_are_removed_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let stray = dir.path().join("seg").join("d-20260110-0.seg");
    fs::write(&stray, b"half-created by a crash").unwrap();
    fs::write(dir.path().join("MANIFEST.tmp"), b"partial").unwrap();
    let e = open_result(dir.path(), &clock, false).unwrap();
    assert!(!stray.exists() && !dir.path().join("MANIFEST.tmp").exists());
    assert!(e.contains(b"today").unwrap());
}

#[test]
fn a_locked_directory_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let first = open_result(dir.path(), &clock, false).unwrap();
    let err = open_result(dir.path(), &clock, false).unwrap_err();
    assert!(matches!(err, Error::Locked { .. }), "{err}");
    assert!(matches!(
        Engine::create_with(dir.path(), Config::default(), Options::default()),
        Err(Error::AlreadyExists { .. })
    ));
    drop(first);
    open_result(dir.path(), &clock, false).unwrap();
}

#[test]
fn bad_config_writes_nothing() {
    let parent = tempfile::tempdir().unwrap();
    let dir = parent.path().join("engine");
    let bad = [
        Config {
            fpr: 0.0,
            ..Config::default()
        },
        Config {
            fpr: 1.0,
            ..Config::default()
        },
        Config {
            expected_items_per_day: 0,
            ..Config::default()
        },
        Config {
            tiers: vec![],
            ..Config::default()
        },
        Config {
            tiers: vec![Tier::daily(0)],
            ..Config::default()
        },
        Config {
            tiers: vec![Tier::daily(3), Tier::daily(5)],
            ..Config::default()
        },
    ];
    for cfg in bad {
        let err = Engine::create(&dir, cfg).unwrap_err();
        assert!(matches!(err, Error::InvalidConfig { .. }), "{err}");
        assert!(!dir.exists(), "an invalid config created {dir:?}");
    }
    assert!(matches!(Engine::open(&dir), Err(Error::NotFound { .. })));
}

#[test]
fn tiny_and_huge_keys_and_extreme_plans_work() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(1)], 1, 0.999), &clock);
    assert!(e.insert(b"").unwrap());
    assert!(e.contains(b"").unwrap());
    let huge = vec![7u8; 10 << 20];
    e.insert(&huge).unwrap();
    assert!(e.contains(&huge).unwrap());
    drop(e);
    let dir = tempfile::tempdir().unwrap();
    let e = create(dir.path(), config(&[Tier::daily(1)], 1, 1e-12), &clock);
    for i in 0..1000 {
        e.insert(&url(1, i)).unwrap();
    }
    assert!((0..1000).all(|i| e.contains(&url(1, i)).unwrap()));
}

/// A sealed body that fails its checksum at a verifying open: moved to
/// `quarantine/`, the open refused naming it; a degraded open goes on
/// without that window and says so in `stats`; the manifest no longer
/// names it, so later opens need no option.
#[test]
fn a_damaged_sealed_segment_is_quarantined_and_a_degraded_open_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let sealed = segment_files(dir.path()).remove(0);
    let mut b = fs::read(&sealed).unwrap();
    b[4096 + 100] ^= 0x08;
    fs::write(&sealed, &b).unwrap();
    // Without verification the sealed body is not read: it opens.
    open_result(dir.path(), &clock, false).expect("open without verify");
    let err = open_result(dir.path(), &clock, true).unwrap_err();
    let Error::Quarantined { path, window, .. } = &err else {
        panic!("expected Quarantined, got {err}");
    };
    assert!(path.starts_with(dir.path().join("quarantine")), "{err}");
    assert_eq!(window, "3d 20260105", "{err}");
    assert!(err.to_string().contains("checksum"), "{err}");
    assert_eq!(
        fs::read(path).unwrap(),
        b,
        "the damaged file is kept as it was"
    );
    // Refused again without the option.
    assert!(matches!(
        open_result(dir.path(), &clock, false),
        Err(Error::Quarantined { .. })
    ));
    let e = Engine::open_with(
        dir.path(),
        Options::default().clock(clock.clone()).degraded(true),
    )
    .expect("degraded open");
    assert_eq!(
        e.stats().unwrap().lost_windows,
        vec!["3d 20260105".to_string()]
    );
    assert!(e.contains(b"today").unwrap(), "the other windows are kept");
    drop(e);
    let e = open_result(dir.path(), &clock, true).expect("the manifest no longer names it");
    assert!(e.stats().unwrap().lost_windows.is_empty());
}

/// A degraded open that leaves out today's window because its second
/// sub-filter is damaged: the first one, which is not, must not stop the
/// open from making today's window anew (its name is taken otherwise).
#[test]
fn a_degraded_open_that_loses_a_grown_open_window_makes_it_anew() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(3)], 50, 0.01), &clock);
    for i in 0..50 {
        e.insert(&url(1, i)).unwrap();
    }
    clock.set(day(1));
    for i in 0..400 {
        e.insert(&url(2, i)).unwrap();
    }
    e.close().unwrap();
    let files = seg_files(dir.path());
    assert!(
        files.iter().any(|f| f.ends_with("-1.seg")),
        "today's chain grew: {files:?}"
    );
    let tail = files
        .iter()
        .find(|f| f.ends_with("20260106-1.seg"))
        .unwrap();
    let path = dir.path().join("seg").join(tail);
    let mut b = fs::read(&path).unwrap();
    b[0] ^= 0xff;
    b[2048] ^= 0xff;
    fs::write(&path, &b).unwrap();
    assert!(matches!(
        open_result(dir.path(), &clock, false),
        Err(Error::Quarantined { .. })
    ));
    let e = Engine::open_with(
        dir.path(),
        Options::default().clock(clock.clone()).degraded(true),
    )
    .unwrap_or_else(|err| panic!("degraded open: {err}"));
    assert_eq!(
        e.stats().unwrap().lost_windows,
        vec!["3d 20260106".to_string()]
    );
    assert!(
        e.contains(&url(1, 0)).unwrap(),
        "yesterday's window is kept"
    );
    assert!(e.insert(b"after").unwrap());
    drop(e);
    let e = open_result(dir.path(), &clock, true).expect("reopens");
    assert!(e.contains(b"after").unwrap());
}

/// A quarantine made `quarantine/` and moved the file there, syncing both
/// directories but not the engine's, which names `quarantine/`: after a
/// power loss the file was gone from `seg/` and `quarantine/` was gone too.
/// The manifest still named the file, and every later open, degraded or
/// not, was refused with a bare "not found" (a missing file is no damage
/// to leave out): the directory could not be opened again.
#[test]
fn a_quarantine_survives_a_power_loss() {
    use durable::{power_fail, record_syncs};
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let dir = root.join("crawl.tb");
    let kept = record_syncs(&root, &[tmp.path()]);
    let clock = small_engine(&dir);
    // Damage on the disk: the file's durable bytes are the damaged ones.
    let sealed = segment_files(&dir).remove(0);
    let mut b = fs::read(&sealed).unwrap();
    b[4096 + 100] ^= 0x08;
    fs::write(&sealed, &b).unwrap();
    kept.lock().unwrap().observe(&sealed);
    let err = open_result(&dir, &clock, true).unwrap_err();
    assert!(matches!(err, Error::Quarantined { .. }), "{err}");
    let img = power_fail(&kept, tmp.path()).join("root").join("crawl.tb");
    let e = Engine::open_with(&img, Options::default().clock(clock.clone()).degraded(true))
        .expect("a degraded open after the power loss");
    assert_eq!(
        e.stats().unwrap().lost_windows,
        vec!["3d 20260105".to_string()]
    );
}

/// The header's reserved fields (bytes 60..64 of every segment header,
/// and 136..140 of a fingerprint table's) are zero in every file this
/// format writes. A file with one set was written by another format
/// (one that gave the field a meaning): read as this one, its other
/// fields may mean something else. It is refused with an error naming the
/// file and the field, like an unknown format version, not opened as if
/// the field were zero.
#[test]
fn a_reserved_header_field_set_is_refused_by_name() {
    let tiers: [(&str, usize); 2] = [("30d:fingerprint", 136), ("3d", 60)];
    for (tier, at) in tiers {
        let dir = tempfile::tempdir().unwrap();
        let clock = ManualClock::new(day(0));
        let e = create(
            dir.path(),
            config(&[tier.parse().unwrap()], 50, 0.01),
            &clock,
        );
        e.insert(b"a key").unwrap();
        e.close().unwrap();
        let file = segment_files(dir.path()).pop().unwrap();
        let mut bytes = fs::read(&file).unwrap();
        for copy in [0, 2048] {
            let h = &mut bytes[copy..copy + 144];
            if h[..8] != *b"TBLMSEG\0" {
                continue;
            }
            h[at] = 1;
            let crc = crc32(&h[..124]);
            h[124..128].copy_from_slice(&crc.to_le_bytes());
            if at >= 128 {
                let crc = crc32(&h[..140]);
                h[140..144].copy_from_slice(&crc.to_le_bytes());
            }
        }
        fs::write(&file, &bytes).unwrap();
        match open_result(dir.path(), &clock, false) {
            Err(err @ Error::Quarantined { .. }) => {
                assert_names(&err, &file);
                let msg = err.to_string();
                assert!(
                    msg.contains(&format!("reserved field at byte {at}")),
                    "{tier}: the error does not name the field: {msg}"
                );
            }
            Err(err) => panic!("{tier}: expected Quarantined, got {err}"),
            Ok(_) => panic!("{tier}: a header with byte {at} set was opened"),
        }
    }
}

/// `verify` checks every window the engine's snapshot names, and lookups
/// read only windows of that snapshot: a damaged sealed body that a lookup
/// reads is always reported. A sealed window past retention that the
/// manifest still names (a read-only open at a later clock, or a writer
/// whose clock jumped forward before any rotation) is not read by lookups;
/// the writer still reports its damage, a read-only open (which drops it
/// from its snapshot) does not.
#[test]
fn verify_reports_every_damaged_window_a_lookup_reads() {
    let dir = tempfile::tempdir().unwrap();
    small_engine(dir.path()); // daily(3): day 0 sealed, day 1 open
    let sealed = segment_files(dir.path()).remove(0);
    let mut b = fs::read(&sealed).unwrap();
    // Bits set, none cleared: the day-0 keys stay present in the body.
    let at = 4096 + (b.len() - 4096) / 2;
    b[at] = 0xff;
    fs::write(&sealed, &b).unwrap();
    let reads = |e: &Engine| (0..50).filter(|&i| e.contains(&url(1, i)).unwrap()).count();
    let reported = |e: &Engine| {
        e.verify_each().iter().any(|err| {
            err.to_string()
                .contains(sealed.file_name().unwrap().to_str().unwrap())
        })
    };
    // Read-only, at days 1 to 3 (day 0 past retention from day 3 on).
    for d in 1..=3 {
        let e = Engine::open_read_only_with(
            dir.path(),
            Options::default().clock(ManualClock::new(day(d))),
        )
        .unwrap();
        let (n, rep) = (reads(&e), reported(&e));
        assert!(
            n == 0 || rep,
            "day {d}: {n} of 50 keys read from a damaged window verify did not report"
        );
        if d < 3 {
            assert_eq!(n, 50, "day {d}: the live day-0 window not read");
            assert!(rep, "day {d}: a live damaged window not reported");
        } else {
            assert!(
                n <= 1,
                "day {d}: the expired day-0 window read ({n} of 50 keys)"
            );
            // Dropped from the read-only snapshot: neither read nor checked.
            assert!(!rep, "day {d}: an expired window verified");
        }
    }
    // A writer at day 2 whose clock then jumps to day 3 with no rotation:
    // the snapshot still names day 0, which lookups no longer read.
    let clock = ManualClock::new(day(2));
    let e = Engine::open_with(dir.path(), Options::default().clock(clock.clone())).unwrap();
    assert_eq!(reads(&e), 50);
    assert!(reported(&e), "a live damaged window not reported");
    clock.set(day(3));
    let (n, rep) = (reads(&e), reported(&e));
    assert!(
        rep,
        "the writer's snapshot names day 0: verified until expiry"
    );
    assert!(
        n == 0 || rep,
        "{n} of 50 keys read from a damaged window verify did not report"
    );
    assert!(n <= 1, "the expired day-0 window read ({n} of 50 keys)");
}

/// An engine with one day of four sub-filters and one of one, closed.
fn grown_day(dir: &Path) -> Vec<PathBuf> {
    two_days(dir, 400);
    let files = segment_files(dir);
    // Day 0 grew sub-filters past its planned keys.
    assert!(files.len() >= 3, "{files:?}");
    files
}

/// Cuts a file short by a page, as a copy onto a full disk leaves it.
fn cut_short(f: &Path) {
    let len = fs::metadata(f).unwrap().len();
    let file = fs::OpenOptions::new().write(true).open(f).unwrap();
    file.set_len(len - 4096).unwrap();
}

/// What `verify_each` reports on a read-only degraded open at day 1.
fn degraded_problems(dir: &Path) -> Vec<String> {
    let e = Engine::open_read_only_with(
        dir,
        Options::default()
            .clock(ManualClock::new(day(1)))
            .degraded(true),
    )
    .unwrap();
    e.verify_each().iter().map(|p| p.to_string()).collect()
}

/// A read-only degraded open (the CLI's `verify`) leaves out a window at
/// its first damaged file; `verify_each` still names every damaged file of
/// that window, not only the one that stopped the open.
#[test]
fn a_degraded_read_only_verify_names_every_damaged_file_of_a_window() {
    let dir = tempfile::tempdir().unwrap();
    let files = grown_day(dir.path());
    for f in &files[..2] {
        cut_short(f);
    }
    let problems = degraded_problems(dir.path());
    for f in &files[..2] {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(
            problems.iter().any(|p| p.contains(name)),
            "{name} not named: {problems:?}"
        );
    }
    // A damaged body before the file that left the window out, which the
    // open does not read: named too.
    let dir = tempfile::tempdir().unwrap();
    let files = grown_day(dir.path());
    let mut b = fs::read(&files[0]).unwrap();
    let at = 4096 + (b.len() - 4096) / 2;
    b[at] ^= 0xff;
    fs::write(&files[0], &b).unwrap();
    cut_short(&files[1]);
    let problems = degraded_problems(dir.path());
    for f in &files[..2] {
        let name = f.file_name().unwrap().to_str().unwrap();
        assert!(
            problems.iter().any(|p| p.contains(name)),
            "{name} not named: {problems:?}"
        );
    }
}

/// A segment file the manifest names and the disk lacks (deleted by hand,
/// or left out of a copy) of a window still live: a plain open refuses it
/// (file not found, as before); `verify` (a read-only degraded open)
/// reports it as damage, and a degraded open goes on without the window,
/// naming it lost, as for a damaged file. Before, every open failed, with
/// `--degraded` too, so no command could get past it, and `verify` exited
/// 2 (an error) rather than 1 (damage).
#[test]
fn a_missing_segment_file_is_damage_that_degraded_opens_go_past() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let clock = small_engine(&dir);
    let sealed = segment_files(&dir)[0].clone();
    fs::remove_file(&sealed).unwrap();
    let opts = || Options::default().clock(clock.clone());
    match Engine::open_with(&dir, opts()) {
        Err(Error::Io { source, path, .. }) => {
            assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
            assert_eq!(path, sealed);
        }
        Err(e) => panic!("plain open: {e}"),
        Ok(_) => panic!("plain open went on without a file"),
    }
    // verify's open: read-only, degraded; the file is named as damage.
    let r = Engine::open_read_only_with(&dir, opts().degraded(true)).expect("read-only degraded");
    let problems = r.verify_each();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(problems[0].is_damage(), "{}", problems[0]);
    assert!(
        problems[0].to_string().contains(&*sealed.to_string_lossy()),
        "{}",
        problems[0]
    );
    assert_eq!(r.stats().unwrap().lost_windows.len(), 1);
    r.close().unwrap();
    // A degraded writer goes on without the window, and names it.
    let w = Engine::open_with(&dir, opts().degraded(true)).expect("degraded open");
    assert_eq!(w.stats().unwrap().lost_windows.len(), 1);
    assert!(w.contains(b"today").unwrap());
    assert!(w.insert(b"after").unwrap());
    w.close().unwrap();
    // The manifest no longer names it: plain opens work again.
    let e = Engine::open_with(&dir, opts()).expect("plain open after");
    assert!(e.contains(b"today").unwrap() && e.contains(b"after").unwrap());
    assert!(e.verify_each().is_empty());
}

#[test]
fn a_lost_fingerprint_table_is_named_as_the_table() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let clock = ManualClock::new(day(3));
    let e = create(
        &dir,
        config(&[Tier::daily(3), Tier::fingerprint(3)], 50, 0.01),
        &clock,
    );
    e.insert(b"k").unwrap();
    let table_label = e
        .stats()
        .unwrap()
        .tiers
        .iter()
        .find(|t| t.tier == "3d:fingerprint")
        .map(|t| t.segments[0].window.clone())
        .unwrap();
    e.close().unwrap();
    fs::remove_file(dir.join("seg").join("f-table-0.seg")).unwrap();
    let opts = Options::default().clock(clock.clone()).degraded(true);
    let r = Engine::open_read_only_with(&dir, opts.clone()).unwrap();
    let lost = r.stats().unwrap().lost_windows;
    r.close().unwrap();
    // Named as stats names it, not as a day of 1970.
    assert_eq!(lost, [format!("3d:fingerprint {table_label}")]);
    let w = Engine::open_with(&dir, opts).unwrap();
    assert_eq!(w.stats().unwrap().lost_windows, lost);
    w.close().unwrap();
}

/// A window a degraded open went on without is made anew under the same
/// file names; damaged again, its file is quarantined a second time. The
/// second copy replaced the first in `quarantine/`, so the bytes first
/// found damaged were lost to inspection. Both are kept.
#[test]
fn a_second_quarantine_of_a_file_name_keeps_the_first_copy() {
    let dir = tempfile::tempdir().unwrap();
    let clock = small_engine(dir.path());
    let damage = |path: &Path, at: usize| {
        let mut b = fs::read(path).unwrap();
        b[0] ^= 0xff;
        b[2048] ^= 0xff;
        b[4096 + at] ^= 0xff;
        fs::write(path, &b).unwrap();
        b
    };
    let today = dir.path().join("seg/d-20260106-0.seg");
    let first = damage(&today, 0);
    let degraded = || {
        Engine::open_with(
            dir.path(),
            Options::default().clock(clock.clone()).degraded(true),
        )
        .unwrap_or_else(|err| panic!("degraded open: {err}"))
    };
    let e = degraded();
    assert!(e.insert(b"anew").unwrap(), "today's window is made anew");
    e.close().unwrap();
    assert!(today.exists(), "{:?}", seg_files(dir.path()));
    let second = damage(&today, 1);
    let e = degraded();
    assert_eq!(
        e.stats().unwrap().lost_windows,
        vec!["3d 20260106".to_string()]
    );
    drop(e);
    let mut kept: Vec<Vec<u8>> = fs::read_dir(dir.path().join("quarantine"))
        .unwrap()
        .map(|f| fs::read(f.unwrap().path()).unwrap())
        .collect();
    kept.sort();
    let mut want = vec![first, second];
    want.sort();
    assert_eq!(kept.len(), 2, "both damaged copies are kept");
    assert!(kept == want, "the quarantined bytes are the damaged ones");
}
