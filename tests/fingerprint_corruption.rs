//! Damaged and tampered fingerprint-table files, alone and beside a Bloom
//! tier: an open refuses them naming the file (or a degraded open goes on
//! without the table), and never panics or answers a live key absent
//! without an error.

mod common;

use std::fs;
use std::path::{Path, PathBuf};

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, Tier};

const TABLE: &str = "f-table-0.seg";

/// An engine of a weekly-retention Bloom tier and a 365-day table: keys
/// 0..300 on day 0, 300..600 on day 20 (older than the Bloom tier keeps);
/// closed on day 20.
fn build(dir: &Path) -> (ManualClock, Vec<Vec<u8>>) {
    let clock = ManualClock::new(day(0));
    let e = create(
        dir,
        config(&[Tier::daily(7), Tier::fingerprint(365)], 2_000, 0.01),
        &clock,
    );
    let keys: Vec<Vec<u8>> = (0..600).map(|i| url(7, i)).collect();
    for k in &keys[..300] {
        e.insert(k).unwrap();
    }
    clock.set(day(20));
    for k in &keys[300..] {
        e.insert(k).unwrap();
    }
    e.close().unwrap();
    (clock, keys)
}

fn table(dir: &Path) -> PathBuf {
    dir.join("seg").join(TABLE)
}

fn opts(clock: &ManualClock) -> Options {
    Options::default().clock(clock.clone())
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
}

/// Sets a u32 field of both header copies and recomputes both checksums
/// (bytes 124..128 over 0..124, 140..144 over 0..140), as docs/format.md
/// says: a header whose fields disagree with each other or with the
/// engine, yet carries valid checksums.
fn tamper(bytes: &mut [u8], at: usize, value: u32) {
    for copy in [0usize, 2048] {
        let h = &mut bytes[copy..copy + 144];
        h[at..at + 4].copy_from_slice(&value.to_le_bytes());
        let crc = crc32fast::hash(&h[..124]);
        h[124..128].copy_from_slice(&crc.to_le_bytes());
        let crc = crc32fast::hash(&h[..140]);
        h[140..144].copy_from_slice(&crc.to_le_bytes());
    }
}

/// Puts the table back (a refused open may have moved it to quarantine).
fn restore(dir: &Path, bytes: &[u8]) {
    let _ = fs::remove_dir_all(dir.join("quarantine"));
    fs::write(table(dir), bytes).unwrap();
}

fn assert_names(err: &Error, file: &Path) {
    let msg = err.to_string();
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(msg.contains(name), "error does not name {name}: {msg}");
}

/// For each of `cases`, the table as `original` with `fields` (offset,
/// value) set in both header copies ([`tamper`]): the open refuses it or
/// every key is present ([`open_and_check`]); then the table is put back.
fn check_tampered(
    dir: &Path,
    clock: &ManualClock,
    keys: &[Vec<u8>],
    original: &[u8],
    cases: &[(String, Vec<(usize, u32)>)],
) {
    for (what, fields) in cases {
        let mut b = original.to_vec();
        for &(at, v) in fields {
            tamper(&mut b, at, v);
        }
        fs::write(table(dir), &b).unwrap();
        open_and_check(dir, clock, keys, what);
        restore(dir, original);
    }
}

/// Every key is present, or the open failed: never a silent miss.
fn open_and_check(dir: &Path, clock: &ManualClock, keys: &[Vec<u8>], what: &str) {
    match Engine::open_with(dir, opts(clock)) {
        Err(err) => {
            assert!(
                err.is_damage() || matches!(err, Error::Quarantined { .. }),
                "{what}: {err}"
            );
            assert_names(&err, &table(dir));
        }
        Ok(e) => {
            for (i, k) in keys.iter().enumerate() {
                assert!(e.contains(k).unwrap(), "{what}: key {i} absent, no error");
            }
            e.close().unwrap();
        }
    }
}

#[test]
fn a_table_header_with_another_retention_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (clock, keys) = build(&dir);
    let bytes = fs::read(table(&dir)).unwrap();
    assert_eq!(le32(&bytes, 128), 364);
    let cases: Vec<_> = [6, 10, 100, 363, 365, 509]
        .into_iter()
        .map(|r| (format!("retention {r}"), vec![(128, r)]))
        .collect();
    check_tampered(&dir, &clock, &keys, &bytes, &cases);
}

#[test]
fn a_table_header_with_another_fingerprint_width_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (clock, keys) = build(&dir);
    let bytes = fs::read(table(&dir)).unwrap();
    let bits = le32(&bytes, 20);
    let cases: Vec<_> = (TABLE_WIDTHS.into_iter())
        .filter(|&(fp_bits, _)| fp_bits != bits)
        .map(|(fp_bits, slots)| (format!("{fp_bits} bits"), vec![(20, fp_bits), (16, slots)]))
        .collect();
    check_tampered(&dir, &clock, &keys, &bytes, &cases);
}

#[test]
fn a_table_header_with_another_chain_index_or_state_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (clock, keys) = build(&dir);
    let bytes = fs::read(table(&dir)).unwrap();
    // (offset, value): chain index, window, span, sealed state, clean mark,
    // kind 1 (version 2), occupied count past the cells, capacity 0.
    let cases = [
        (80, 1),
        (72, 1),
        (56, 2),
        (84, 2),
        (88, 1),
        (12, 1),
        (96, u32::MAX),
        (104, 0),
        (108, 1),
    ]
    .map(|(at, v)| (format!("byte {at} = {v}"), vec![(at, v)]));
    check_tampered(&dir, &clock, &keys, &bytes, &cases);
}

#[test]
fn every_table_header_bit_flip_is_recovered_or_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (clock, keys) = build(&dir);
    let bytes = fs::read(table(&dir)).unwrap();
    for i in 0..144 {
        for bit in [0, 3, 7] {
            for copy in [0usize, 2048] {
                let mut b = bytes.clone();
                b[copy + i] ^= 1 << bit;
                fs::write(table(&dir), &b).unwrap();
                let e = Engine::open_with(&dir, opts(&clock))
                    .unwrap_or_else(|e| panic!("byte {copy}+{i} bit {bit}: {e}"));
                assert!(e.contains(&keys[0]).unwrap());
                assert!(e.contains(&keys[599]).unwrap());
                drop(e);
                restore(&dir, &bytes);
            }
            let mut b = bytes.clone();
            b[i] ^= 1 << bit;
            b[2048 + i] ^= 1 << bit;
            fs::write(table(&dir), &b).unwrap();
            match Engine::open_with(&dir, opts(&clock)) {
                Err(err @ Error::Quarantined { .. }) => assert_names(&err, &table(&dir)),
                Err(e) => panic!("byte {i} bit {bit}: unexpected error {e}"),
                Ok(_) => panic!("byte {i} bit {bit}: both copies flipped, accepted"),
            }
            restore(&dir, &bytes);
        }
    }
}

#[test]
fn every_truncation_or_extension_of_a_table_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (clock, keys) = build(&dir);
    let bytes = fs::read(table(&dir)).unwrap();
    assert_eq!(le32(&bytes, 12), 3, "kind: a table");
    let lens = (0..200).chain((200..bytes.len()).step_by(997)).chain([
        bytes.len() - 64,
        bytes.len() - 1,
        bytes.len() + 1,
        bytes.len() + 64,
    ]);
    for len in lens {
        let mut b = bytes.clone();
        b.resize(len, 0);
        fs::write(table(&dir), &b).unwrap();
        for read_only in [true, false] {
            let r = if read_only {
                Engine::open_read_only_with(&dir, opts(&clock))
            } else {
                Engine::open_with(&dir, opts(&clock))
            };
            let err = r.err().unwrap_or_else(|| panic!("len {len} opened"));
            assert!(
                err.is_damage() || matches!(err, Error::Quarantined { .. }),
                "len {len}: {err}"
            );
            assert_names(&err, &table(&dir));
        }
        // Degraded: goes on without the table, naming it.
        restore(&dir, &b);
        let e = Engine::open_read_only_with(&dir, opts(&clock).degraded(true)).unwrap();
        assert_eq!(e.stats().unwrap().lost_windows.len(), 1, "len {len}");
        e.close().unwrap();
        restore(&dir, &bytes);
    }
    open_and_check(&dir, &clock, &keys, "restored");
}

/// Random damage to a table's body (which has no checksum: docs/format.md)
/// may lose keys, but lookups, inserts, sweeps over a year, stats and
/// verify never panic.
#[test]
fn a_damaged_table_body_never_panics() {
    for fpr in [0.2, 0.05, 0.01, 0.001, 1e-5, 1e-8] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("db");
        let clock = ManualClock::new(day(0));
        let e = create(
            &dir,
            config(&[Tier::daily(7), Tier::fingerprint(30)], 500, fpr),
            &clock,
        );
        for i in 0..2_000 {
            e.insert(&url(3, i)).unwrap();
        }
        e.close().unwrap();
        let mut b = fs::read(table(&dir)).unwrap();
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15 ^ fpr.to_bits();
        for _ in 0..(b.len() - 4096) / 8 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let at = 4096 + (x as usize % (b.len() - 4096));
            b[at] = (x >> 40) as u8;
        }
        fs::write(table(&dir), &b).unwrap();
        let e = Engine::open_with(&dir, opts(&clock).allow_clock_jump(true)).unwrap();
        e.verify().unwrap();
        for d in [0, 1, 40, 200, 400, 700] {
            clock.set(day(d));
            for i in 0..300 {
                let _ = e.contains(&url(3, i)).unwrap();
                e.insert(&url(4, d * 1000 + i)).unwrap();
                let _ = e.contains(&url(4, d * 1000 + i)).unwrap();
            }
            e.stats().unwrap();
        }
        e.close().unwrap();
    }
}

#[test]
fn a_manifest_naming_a_bloom_file_as_the_table_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("db");
    let (clock, _keys) = build(&dir);
    // A Bloom file of the daily tier put where the table was.
    let seg = dir.join("seg");
    let bloom: PathBuf = fs::read_dir(&seg)
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.file_name().unwrap() != TABLE)
        .unwrap();
    fs::copy(&bloom, table(&dir)).unwrap();
    for read_only in [true, false] {
        let r = if read_only {
            Engine::open_read_only_with(&dir, opts(&clock))
        } else {
            Engine::open_with(&dir, opts(&clock))
        };
        let err = r.expect_err("a Bloom file opened as the table");
        assert!(
            err.is_damage() || matches!(err, Error::Quarantined { .. }),
            "{err}"
        );
        assert_names(&err, &table(&dir));
    }
}
