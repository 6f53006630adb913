//! What an open does with a MANIFEST whose checksum holds but whose body
//! names something docs/format.md ("MANIFEST") calls out of range: it is
//! refused as corrupt, naming the manifest, before any segment file is
//! read, moved or written.

mod common;

use std::fs;
use std::path::Path;

use common::*;
use serde_json::Value;
use timebloom::{Engine, Error, ManualClock, Options, SyncPolicy, Tier};

/// The JSON body of `dir`'s MANIFEST and its format version.
fn read_manifest(dir: &Path) -> (u32, Value) {
    let b = fs::read(dir.join("MANIFEST")).unwrap();
    assert_eq!(&b[0..8], b"TBLMMANI");
    let version = u32::from_le_bytes(b[8..12].try_into().unwrap());
    (version, serde_json::from_slice(&b[20..]).unwrap())
}

/// Writes `json` as `dir`'s MANIFEST under `version`, with its length and
/// CRC32: only the field a test edits is wrong.
fn write_manifest(dir: &Path, version: u32, json: &Value) {
    let body = serde_json::to_vec_pretty(json).unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(b"TBLMMANI");
    b.extend_from_slice(&version.to_le_bytes());
    b.extend_from_slice(&(body.len() as u32).to_le_bytes());
    b.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
    b.extend_from_slice(&body);
    fs::write(dir.join("MANIFEST"), b).unwrap();
}

/// An engine of a daily tier and a fingerprint tier at `dir`, holding the
/// key `"kept"`, closed.
fn make(dir: &Path, clock: &ManualClock) {
    let cfg = timebloom::Config {
        sync: SyncPolicy::None,
        ..config(&[Tier::daily(7), Tier::fingerprint(30)], 1_000, 0.01)
    };
    let e = create(dir, cfg, clock);
    e.insert(b"kept").unwrap();
    e.close().unwrap();
}

/// Edits `dir`'s manifest with `f`, keeping its version and checksum
/// valid, and opens it for writing.
fn open_edited(
    dir: &Path,
    clock: &ManualClock,
    f: impl FnOnce(&mut Value),
) -> std::thread::Result<Result<Engine, Error>> {
    let (version, mut j) = read_manifest(dir);
    f(&mut j);
    write_manifest(dir, version, &j);
    let clock = clock.clone();
    let dir = dir.to_path_buf();
    std::panic::catch_unwind(move || Engine::open_with(&dir, Options::default().clock(clock)))
}

/// The error of an open that must be refused as a corrupt manifest.
fn corrupt_manifest(r: std::thread::Result<Result<Engine, Error>>) -> Error {
    let r = r.expect("the open panicked");
    let e = match r {
        Ok(_) => panic!("the open succeeded"),
        Err(e) => e,
    };
    match &e {
        Error::Corrupt { path, .. } if path.ends_with("MANIFEST") => {}
        _ => panic!("not refused as a corrupt manifest: {e:?}"),
    }
    e
}

/// A fingerprint tier's one table is window 0 in its segment entry, as in
/// its lost entry. An entry naming another window matched its file name
/// (`f-table-0.seg` has no window) and was accepted: the open then found
/// the file's header naming window 0, moved the healthy table to
/// `quarantine/` and refused the directory as `Quarantined` (a degraded
/// open went on without every key the table held).
#[test]
fn a_table_entry_names_window_zero() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    make(&dir, &clock);
    let tables = || {
        seg_files(&dir)
            .into_iter()
            .filter(|n| n.starts_with("f-table-"))
            .count()
    };
    assert_eq!(tables(), 1);
    let e = corrupt_manifest(open_edited(&dir, &clock, |j| {
        let s = j["segments"].as_array_mut().unwrap();
        let t = s.iter_mut().find(|e| e["tier"] == 1).unwrap();
        assert_eq!(t["window"], 0);
        t["window"] = Value::from(5);
    }));
    assert!(e.to_string().contains("table"), "{e}");
    assert_eq!(tables(), 1, "the table file stays in seg/");
    assert!(!dir.join("quarantine").exists(), "nothing is quarantined");
}

/// `generation` goes up by one at every replacement: a manifest whose
/// generation cannot (`u64::MAX`) made the first replacement after the
/// open (here the day's rotation) overflow, a panic under overflow checks.
#[test]
fn a_generation_past_its_range_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    make(&dir, &clock);
    clock.set(day(1));
    let e = corrupt_manifest(open_edited(&dir, &clock, |j| {
        j["generation"] = Value::from(u64::MAX);
    }));
    assert!(e.to_string().contains("generation"), "{e}");
}

/// `table_day` is a day the tables were read and written at, so no later
/// than the last day the engine's clock accepts (9999-12-31). A manifest
/// naming a later one opened, and its tables were then read at that day:
/// every key they held read as expired (and `"kept"` as new).
#[test]
fn a_table_day_past_year_9999_is_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    make(&dir, &clock);
    let e = corrupt_manifest(open_edited(&dir, &clock, |j| {
        j["table_day"] = Value::from(u32::MAX);
    }));
    assert!(e.to_string().contains("table_day"), "{e}");
}
