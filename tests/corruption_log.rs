//! Corruption corpora for the write-ahead log, the MANIFEST and the shadow
//! copies of counting bodies (RELIABILITY, promises 1 to 3): a real engine
//! directory under `--sync always`, left as after a crash (the engine is
//! forgotten, not closed, so its log keeps the records), is damaged one way
//! per case (every truncation length, a bit flip at every header byte and
//! at the first records' bytes, sampled further on) and opened. Each case
//! must give a typed error naming the damaged file, or the documented
//! recovery with every key acknowledged before the damage present; never a
//! panic.
//!
//! The full sweeps run with `TIMEBLOOM_FULL=1`; by default later bytes are
//! sampled so that each test stays within a few seconds.

mod common;

use std::fs;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use common::*;
use timebloom::{Config, Engine, Error, ManualClock, Options, SyncPolicy, Tier};

const LOG_HEADER: usize = 32;
const RECORD: usize = 40;
const SHADOW_HEADER: usize = 24;
const BODY: usize = 4096;
const KEYS: u64 = 24;

fn full() -> bool {
    std::env::var_os("TIMEBLOOM_FULL").is_some_and(|v| v == "1")
}

/// Bytes `0..dense`, then every `step`-th byte (every byte under
/// `TIMEBLOOM_FULL=1`), then the last few.
fn positions(len: usize, dense: usize, step: usize) -> Vec<usize> {
    let step = if full() { 1 } else { step };
    let mut v: Vec<usize> = (0..len.min(dense)).collect();
    v.extend((dense..len).step_by(step));
    v.extend(len.saturating_sub(3)..len);
    v.sort_unstable();
    v.dedup();
    v
}

/// `bytes` with one bit flipped, for every bit of the first `dense` bytes
/// and one bit (`i % 8`) of each later byte (every bit under
/// `TIMEBLOOM_FULL=1`): `(byte, bit, flipped bytes)`.
fn flips(bytes: &[u8], dense: usize) -> impl Iterator<Item = (usize, u8, Vec<u8>)> + '_ {
    (0..bytes.len())
        .flat_map(move |i| {
            let bits = if full() || i < dense {
                0..8
            } else {
                (i % 8) as u8..(i % 8) as u8 + 1
            };
            bits.map(move |bit| (i, bit))
        })
        .map(|(i, bit)| {
            let mut b = bytes.to_vec();
            b[i] ^= 1 << bit;
            (i, bit, b)
        })
}

/// A scratch directory, on tmpfs when there is one (every open fsyncs).
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::Builder::new()
            .prefix("timebloom-corrupt-")
            .tempdir_in(shm)
        {
            return d;
        }
    }
    tempfile::tempdir().unwrap()
}

/// An engine directory as a crash left it: every file's bytes.
struct Template {
    files: Vec<(PathBuf, Vec<u8>)>,
    /// Keys in insertion order: key `i` is the log's record `i`.
    keys: Vec<Vec<u8>>,
    log: PathBuf,
    shadow: Option<PathBuf>,
}

fn read_tree(root: &Path, rel: &Path, out: &mut Vec<(PathBuf, Vec<u8>)>) {
    for e in fs::read_dir(root.join(rel)).unwrap() {
        let e = e.unwrap();
        let r = rel.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            read_tree(root, &r, out);
        } else {
            out.push((r, fs::read(e.path()).unwrap()));
        }
    }
}

/// Creates an engine under `sync always`, inserts `KEYS` keys (each
/// acknowledged durable: its record is in the fsynced log), and forgets
/// the engine: no checkpoint, no clean close.
fn build(tiers: &[Tier]) -> Template {
    let dir = scratch();
    let clock = ManualClock::new(day(0));
    let cfg = Config {
        sync: SyncPolicy::Always,
        ..config(tiers, 200, 0.01)
    };
    let e = Engine::create_with(dir.path(), cfg, Options::default().clock(clock)).unwrap();
    let keys: Vec<Vec<u8>> = (0..KEYS).map(|i| url(14, i)).collect();
    for k in &keys {
        assert!(e.insert(k).unwrap());
    }
    std::mem::forget(e);
    let mut files = Vec::new();
    read_tree(dir.path(), Path::new(""), &mut files);
    files.sort();
    let named = |ext: &str| -> Vec<PathBuf> {
        files
            .iter()
            .filter(|(p, _)| p.starts_with("wal") && p.extension().is_some_and(|x| x == ext))
            .map(|(p, _)| p.clone())
            .collect()
    };
    let logs = named("log");
    assert_eq!(logs.len(), 1, "one log file: {logs:?}");
    let log = logs[0].clone();
    let len = bytes_of(&files, &log).len();
    assert_eq!(
        len,
        LOG_HEADER + KEYS as usize * RECORD,
        "one record per insert"
    );
    let shadow = named("shadow").into_iter().next();
    Template {
        files,
        keys,
        log,
        shadow,
    }
}

fn bytes_of<'a>(files: &'a [(PathBuf, Vec<u8>)], rel: &Path) -> &'a [u8] {
    &files.iter().find(|(p, _)| p == rel).unwrap().1
}

/// A Bloom daily and a Bloom weekly tier.
fn bloom() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| build(&[Tier::daily(3), Tier::weekly(2)]))
}

/// A counting daily tier (it has a shadow copy at the checkpoint).
fn counting() -> &'static Template {
    static T: OnceLock<Template> = OnceLock::new();
    T.get_or_init(|| build(&[Tier::daily(3).counting()]))
}

/// How a case is opened.
#[derive(Clone, Copy, Debug)]
enum Mode {
    /// As after a process crash: the bodies are as the page cache left
    /// them (every insert in them); recovery does not replay.
    Crash,
    /// As after a power loss in which no page of an open body reached the
    /// disk (the bodies are zero): recovery restores counting bodies from
    /// their shadow copies and replays the log, which alone brings the
    /// keys back.
    PowerLoss,
}

/// Writes the template with `rel` replaced by `bytes`.
fn write_case(t: &Template, rel: &Path, bytes: &[u8], mode: Mode) -> tempfile::TempDir {
    let dir = scratch();
    for (p, b) in &t.files {
        let path = dir.path().join(p);
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        let mut b = if p == rel { bytes.to_vec() } else { b.clone() };
        if matches!(mode, Mode::PowerLoss) && p.starts_with("seg") && b.len() > BODY {
            b[BODY..].fill(0);
        }
        fs::write(&path, &b).unwrap();
    }
    dir
}

fn open(dir: &Path, mode: Mode) -> Result<Engine, Error> {
    Engine::open_with(
        dir,
        Options::default()
            .clock(ManualClock::new(day(0)))
            .assume_power_loss(matches!(mode, Mode::PowerLoss)),
    )
}

/// What a case must give.
enum Expect {
    /// The open succeeds and these first keys are present.
    Keys(usize),
    /// A typed error naming this file.
    Refused(PathBuf),
}

fn assert_names(err: &Error, file: &Path) {
    let msg = err.to_string();
    let name = file.file_name().unwrap().to_str().unwrap();
    assert!(msg.contains(name), "the error does not name {name}: {msg}");
}

/// Opens a case and checks it; a panic inside the engine is reported with
/// the case's description.
fn check(t: &Template, rel: &Path, bytes: &[u8], mode: Mode, expect: Expect, case: &str) {
    let dir = write_case(t, rel, bytes, mode);
    let r = catch_unwind(AssertUnwindSafe(|| open(dir.path(), mode)));
    let r = r.unwrap_or_else(|_| panic!("{case} ({mode:?}): the open panicked"));
    match (r, expect) {
        (Ok(e), Expect::Keys(n)) => {
            for (i, k) in t.keys[..n].iter().enumerate() {
                assert!(
                    e.contains(k).unwrap(),
                    "{case} ({mode:?}): key {i} of {n} acknowledged keys lost"
                );
            }
            // What recovery wrote opens again with every key.
            e.close()
                .unwrap_or_else(|err| panic!("{case} ({mode:?}): close: {err}"));
            let again = open(dir.path(), mode)
                .unwrap_or_else(|err| panic!("{case} ({mode:?}): reopen: {err}"));
            for k in &t.keys[..n] {
                assert!(
                    again.contains(k).unwrap(),
                    "{case} ({mode:?}): reopen lost a key"
                );
            }
        }
        (Err(err), Expect::Refused(file)) => {
            assert!(
                matches!(
                    err,
                    Error::Corrupt { .. } | Error::UnsupportedVersion { .. }
                ),
                "{case} ({mode:?}): untyped error {err}"
            );
            assert_names(&err, &file);
        }
        (Ok(_), Expect::Refused(file)) => {
            panic!("{case} ({mode:?}): damaged {} opened", file.display())
        }
        (Err(err), Expect::Keys(_)) => panic!("{case} ({mode:?}): refused: {err}"),
    }
}

/// Every problem `verify_each` reports on a read-only open of the case
/// (which recovers nothing, so the damaged files are still there).
fn verify_each(t: &Template, rel: &Path, bytes: &[u8]) -> Vec<Error> {
    let dir = write_case(t, rel, bytes, Mode::Crash);
    let e = Engine::open_read_only_with(
        dir.path(),
        Options::default().clock(ManualClock::new(day(0))),
    )
    .expect("read-only open");
    e.verify_each()
}

// ---- the log ---------------------------------------------------------------

/// Every truncation of the log: a cut inside the header is refused (a
/// non-zero header prefix is not a torn write the engine accepts; an empty
/// file is a header that never reached the disk); a cut after it keeps
/// every record wholly before the cut.
#[test]
fn every_truncation_of_the_log_recovers_the_records_before_the_cut() {
    for t in [bloom(), counting()] {
        let bytes = bytes_of(&t.files, &t.log);
        let log = t.log.clone();
        let lens: Vec<usize> = if full() {
            (0..=bytes.len()).collect()
        } else {
            // Every length through the first three records, then each record
            // boundary and one byte either side of it.
            let mut v: Vec<usize> = (0..=LOG_HEADER + 3 * RECORD).collect();
            for r in 3..=KEYS as usize {
                let at = LOG_HEADER + r * RECORD;
                v.extend([at - 1, at, at + 1, at + RECORD / 2]);
            }
            v.retain(|&l| l <= bytes.len());
            v.sort_unstable();
            v.dedup();
            v
        };
        for len in lens {
            let case = format!("log truncated to {len} of {}", bytes.len());
            for mode in [Mode::Crash, Mode::PowerLoss] {
                let expect = if (1..LOG_HEADER).contains(&len) {
                    Expect::Refused(log.clone())
                } else {
                    Expect::Keys(match mode {
                        Mode::Crash => KEYS as usize,
                        Mode::PowerLoss => len.saturating_sub(LOG_HEADER) / RECORD,
                    })
                };
                check(t, &log, &bytes[..len], mode, expect, &case);
            }
        }
    }
}

/// A flipped bit in the log's header: the checksummed bytes (0..24) are
/// refused naming the log; the zero padding (24..32) is not read.
#[test]
fn every_bit_flip_in_the_log_header_is_refused() {
    let t = bloom();
    let bytes = bytes_of(&t.files, &t.log);
    for (i, bit, b) in flips(&bytes[..LOG_HEADER], 24) {
        let b = [&b[..], &bytes[LOG_HEADER..]].concat();
        let case = format!("log header byte {i} bit {bit}");
        let expect = || {
            if i < 24 {
                Expect::Refused(t.log.clone())
            } else {
                Expect::Keys(KEYS as usize)
            }
        };
        check(t, &t.log, &b, Mode::Crash, expect(), &case);
        check(t, &t.log, &b, Mode::PowerLoss, expect(), &case);
    }
}

/// A flipped bit in record `k`: recovery replays records `0..k` and stops
/// there (the documented recovery: the first bad record ends the log); a
/// valid record after it is damage in the middle, which `verify_each`
/// reports naming the log, while a bad last record is a torn tail it
/// accepts.
#[test]
fn a_bit_flip_in_a_record_ends_the_replay_and_verify_reports_it() {
    for t in [bloom(), counting()] {
        let bytes = bytes_of(&t.files, &t.log);
        let body = bytes.len() - LOG_HEADER;
        for off in positions(body, 3 * RECORD, 7) {
            let k = off / RECORD;
            let at = LOG_HEADER + off;
            let mut b = bytes.to_vec();
            b[at] ^= 1 << (off % 8);
            let case = format!("log byte {at} (record {k}) bit {}", off % 8);
            check(
                t,
                &t.log,
                &b,
                Mode::Crash,
                Expect::Keys(KEYS as usize),
                &case,
            );
            // After a power loss the replay needs the log: a bad last record
            // is a torn tail (the records before it are recovered); damage
            // with valid records after it is refused rather than recovering
            // only up to it and dropping the rest without a word.
            let middle = k + 1 < KEYS as usize;
            let after_power_loss = if middle {
                Expect::Refused(t.log.clone())
            } else {
                Expect::Keys(k)
            };
            check(t, &t.log, &b, Mode::PowerLoss, after_power_loss, &case);
            if off % RECORD == 0 || full() {
                let problems = verify_each(t, &t.log, &b);
                assert_eq!(
                    problems.len(),
                    usize::from(middle),
                    "{case}: verify_each said {problems:?}"
                );
                if let Some(p) = problems.first() {
                    assert!(matches!(p, Error::Corrupt { .. }), "{case}: {p}");
                    assert_names(p, &t.log);
                }
            }
        }
    }
}

// ---- the manifest ----------------------------------------------------------

/// Every truncation of the MANIFEST and a flipped bit at every byte of it
/// (every bit of its 20-byte prefix): a typed error naming it.
#[test]
fn every_truncation_and_bit_flip_of_the_manifest_is_refused() {
    let t = bloom();
    let rel = Path::new("MANIFEST");
    let bytes = bytes_of(&t.files, rel);
    let refused = || Expect::Refused(rel.to_path_buf());
    for len in 0..bytes.len() {
        let case = format!("MANIFEST truncated to {len} of {}", bytes.len());
        check(t, rel, &bytes[..len], Mode::Crash, refused(), &case);
    }
    for (i, bit, b) in flips(bytes, 20) {
        let case = format!("MANIFEST byte {i} bit {bit}");
        check(t, rel, &b, Mode::Crash, refused(), &case);
        if i < 20 || full() {
            check(t, rel, &b, Mode::PowerLoss, refused(), &case);
        }
    }
}

// ---- the shadow copy of a counting body -------------------------------------

/// A counting window's shadow copy is read only when recovery replays as
/// after a power loss (a process crash leaves the body whole in the page
/// cache): then every truncation is refused naming the shadow; after a
/// process crash the open succeeds with every key, and `verify_each`
/// names the damaged shadow.
#[test]
fn every_truncation_of_a_shadow_copy_is_refused_when_it_is_needed() {
    let t = counting();
    let rel = t.shadow.clone().expect("a counting tier has a shadow copy");
    let bytes = bytes_of(&t.files, &rel);
    let lens: Vec<usize> = positions(bytes.len(), 2 * SHADOW_HEADER, 13);
    for len in lens {
        let case = format!("shadow truncated to {len} of {}", bytes.len());
        let cut = &bytes[..len];
        check(
            t,
            &rel,
            cut,
            Mode::PowerLoss,
            Expect::Refused(rel.clone()),
            &case,
        );
        check(
            t,
            &rel,
            cut,
            Mode::Crash,
            Expect::Keys(KEYS as usize),
            &case,
        );
        if len % 64 == 0 || len < SHADOW_HEADER {
            let problems = verify_each(t, &rel, cut);
            assert_eq!(problems.len(), 1, "{case}: {problems:?}");
            assert_names(&problems[0], &rel);
        }
    }
}

/// A flipped bit in a shadow copy: its magic, length and checksum (bytes
/// 0..20) and its body are refused naming it when recovery needs it; the
/// padding (20..24) is not read.
#[test]
fn every_bit_flip_in_a_shadow_copy_is_refused_when_it_is_needed() {
    let t = counting();
    let rel = t.shadow.clone().expect("a counting tier has a shadow copy");
    let bytes = bytes_of(&t.files, &rel);
    for i in positions(bytes.len(), SHADOW_HEADER + 64, 11) {
        let mut b = bytes.to_vec();
        b[i] ^= 1 << (i % 8);
        let case = format!("shadow byte {i} bit {}", i % 8);
        let padding = (20..SHADOW_HEADER).contains(&i);
        let expect = if padding {
            Expect::Keys(KEYS as usize)
        } else {
            Expect::Refused(rel.clone())
        };
        check(t, &rel, &b, Mode::PowerLoss, expect, &case);
        check(t, &rel, &b, Mode::Crash, Expect::Keys(KEYS as usize), &case);
        if i < SHADOW_HEADER || i % 97 == 0 {
            let problems = verify_each(t, &rel, &b);
            assert_eq!(
                problems.len(),
                usize::from(!padding),
                "{case}: {problems:?}"
            );
            if let Some(p) = problems.first() {
                assert_names(p, &rel);
            }
        }
    }
}

/// A damaged shadow copy refused every open that recovers after a power
/// loss, `Options::degraded` too: a directory refused for ever, with no way
/// out documented. The plain open still refuses, and says the way out; a
/// degraded open recovers the window from its body as the disk holds it
/// and the log, keeps a copy of the damaged shadow in `quarantine/`, and
/// lists the window in `Stats::unrestored_windows`.
#[test]
fn a_damaged_shadow_copy_opens_degraded_and_says_so() {
    let t = counting();
    let rel = t.shadow.clone().expect("a counting tier has a shadow copy");
    let mut b = bytes_of(&t.files, &rel).to_vec();
    b[SHADOW_HEADER + 10] ^= 0x04;
    let dir = write_case(t, &rel, &b, Mode::PowerLoss);
    let err = open(dir.path(), Mode::PowerLoss).unwrap_err();
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert_names(&err, &rel);
    assert!(err.to_string().contains("--degraded"), "{err}");
    let degraded = |dir: &Path| {
        Engine::open_with(
            dir,
            Options::default()
                .clock(ManualClock::new(day(0)))
                .assume_power_loss(true)
                .degraded(true),
        )
    };
    let e = degraded(dir.path()).unwrap_or_else(|err| panic!("degraded open: {err}"));
    let stats = e.stats().unwrap();
    assert_eq!(stats.unrestored_windows.len(), 1, "{stats:?}");
    assert!(stats.lost_windows.is_empty(), "{stats:?}");
    // The bodies lost every page (`Mode::PowerLoss`): the log alone
    // brings the keys back.
    for (i, k) in t.keys.iter().enumerate() {
        assert!(e.contains(k).unwrap(), "key {i} lost");
    }
    let kept = dir.path().join("quarantine").join(rel.file_name().unwrap());
    assert_eq!(fs::read(&kept).unwrap(), b, "the damaged copy is kept");
    e.close().unwrap();
    // The recovery's checkpoint replaced the damaged copy: plain opens
    // work again.
    let e = open(dir.path(), Mode::PowerLoss).unwrap_or_else(|err| panic!("reopen: {err}"));
    assert!(e.stats().unwrap().unrestored_windows.is_empty());
    for k in &t.keys {
        assert!(e.contains(k).unwrap());
    }
}

/// A shadow copy grown to 1 TiB (a sparse file: no block of it written):
/// recovery read the whole file before checking its length, so the open
/// failed with an out-of-memory I/O error (`Error::Io`, "read shadow
/// failed: out of memory"), not as damage naming the copy. Its length is
/// checked first: the copy is corrupt, and the error names it.
#[test]
fn a_huge_shadow_copy_is_damage_not_an_allocation() {
    let t = counting();
    let rel = t.shadow.clone().expect("a counting tier has a shadow copy");
    let dir = write_case(t, &rel, bytes_of(&t.files, &rel), Mode::PowerLoss);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(&rel))
        .unwrap();
    f.set_len(1 << 40).unwrap();
    drop(f);
    let err = catch_unwind(AssertUnwindSafe(|| open(dir.path(), Mode::PowerLoss)))
        .unwrap_or_else(|_| panic!("the open panicked"))
        .expect_err("a shadow of 1 TiB opened");
    assert!(matches!(err, Error::Corrupt { .. }), "{err}");
    assert_names(&err, &rel);
}

/// A degraded recovery keeps a copy of a damaged shadow in `quarantine/`.
/// It copied the whole file, whatever its size: a shadow grown to 1 TiB (a
/// sparse file) filled the file system with the copy's zeros. The copy
/// holds at most the length a shadow of that body has; the keys come back
/// from the log.
#[test]
fn a_degraded_open_keeps_at_most_a_shadows_length_of_a_grown_copy() {
    let t = counting();
    let rel = t.shadow.clone().expect("a counting tier has a shadow copy");
    let bytes = bytes_of(&t.files, &rel);
    let want = bytes.len() as u64;
    let dir = write_case(t, &rel, bytes, Mode::PowerLoss);
    let f = fs::OpenOptions::new()
        .write(true)
        .open(dir.path().join(&rel))
        .unwrap();
    f.set_len(want + (64 << 20)).unwrap();
    drop(f);
    let e = Engine::open_with(
        dir.path(),
        Options::default()
            .clock(ManualClock::new(day(0)))
            .assume_power_loss(true)
            .degraded(true),
    )
    .unwrap_or_else(|err| panic!("degraded open: {err}"));
    for (i, k) in t.keys.iter().enumerate() {
        assert!(e.contains(k).unwrap(), "key {i} lost");
    }
    drop(e);
    let kept = dir.path().join("quarantine").join(rel.file_name().unwrap());
    let len = fs::metadata(&kept).unwrap().len();
    assert_eq!(len, want, "the quarantined copy holds a shadow's length");
}

// ---- fuzz seeds --------------------------------------------------------------

/// Writes the seed corpora of the `log_replay`, `manifest` and
/// `segment_header` fuzz targets from real files of the templates:
/// `cargo test --test corruption_log write_fuzz_seeds -- --ignored`.
#[test]
#[ignore = "writes fuzz/seeds; run by hand when the formats change"]
fn write_fuzz_seeds() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("fuzz/seeds");
    let put = |target: &str, name: &str, bytes: &[u8]| {
        let d = root.join(target);
        fs::create_dir_all(&d).unwrap();
        fs::write(d.join(name), bytes).unwrap();
    };
    for (tag, t) in [("bloom", bloom()), ("counting", counting())] {
        let log = bytes_of(&t.files, &t.log);
        put("log_replay", &format!("{tag}-records"), log);
        put(
            "log_replay",
            &format!("{tag}-header-only"),
            &log[..LOG_HEADER],
        );
        put(
            "log_replay",
            &format!("{tag}-torn-tail"),
            &log[..log.len() - 13],
        );
        let mut mid = log.to_vec();
        mid[LOG_HEADER + 2 * RECORD + 9] ^= 0x10;
        put("log_replay", &format!("{tag}-damaged-middle"), &mid);
        // Two files: the second starts where the first ends.
        let n = 5;
        let mut two = log[..LOG_HEADER + n * RECORD].to_vec();
        let first = u64::from_le_bytes(log[16..24].try_into().unwrap());
        two.extend_from_slice(&relog(&log[..LOG_HEADER], first + n as u64));
        two.extend_from_slice(&log[LOG_HEADER + n * RECORD..]);
        put("log_replay", &format!("{tag}-two-files"), &two);
        put("manifest", tag, bytes_of(&t.files, Path::new("MANIFEST")));
        for (p, b) in &t.files {
            if p.starts_with("seg") {
                let name = p.file_name().unwrap().to_str().unwrap();
                put("segment_header", &format!("{tag}-{name}"), &b[..2048 + 128]);
            }
        }
    }
    // Shadow copies: a counting body's (a CRC32 of the body alone), a
    // fingerprint table's (a CRC32 over its last sweep day and the body),
    // and that table's as written before the day was kept.
    let c = counting();
    let rel = c
        .shadow
        .as_ref()
        .expect("a counting tier has a shadow copy");
    put("shadow", "counting", bytes_of(&c.files, rel));
    let fp = build(&[Tier::fingerprint(30)]);
    let rel = fp.shadow.as_ref().expect("a table has a shadow copy");
    let table = bytes_of(&fp.files, rel);
    assert_ne!(
        table[20..24],
        [0; 4],
        "a table's shadow keeps its sweep day"
    );
    put("shadow", "table", table);
    let mut old = table.to_vec();
    old[20..24].fill(0);
    let crc = crc32fast::hash(&old[24..]);
    old[16..20].copy_from_slice(&crc.to_le_bytes());
    put("shadow", "table-no-day", &old);
    // A manifest after a clean close and a day's rotation: sealed and open
    // segments, a later checkpoint.
    let dir = scratch();
    let clock = ManualClock::new(day(0));
    let cfg = Config {
        sync: SyncPolicy::Always,
        ..config(&[Tier::daily(3), Tier::weekly(2).counting()], 200, 0.01)
    };
    let e = Engine::create_with(dir.path(), cfg, Options::default().clock(clock.clone())).unwrap();
    e.insert(b"a").unwrap();
    clock.set(day(1));
    e.insert(b"b").unwrap();
    e.close().unwrap();
    put(
        "manifest",
        "rotated",
        &fs::read(dir.path().join("MANIFEST")).unwrap(),
    );
    for f in fs::read_dir(dir.path().join("seg")).unwrap() {
        let f = f.unwrap();
        let b = fs::read(f.path()).unwrap();
        put(
            "segment_header",
            &format!("rotated-{}", f.file_name().to_str().unwrap()),
            &b[..2048 + 128],
        );
    }
}

/// A log file header for first LSN `lsn`, made from a valid one (the
/// checksum covers bytes 0..12 and 16..24).
fn relog(header: &[u8], lsn: u64) -> Vec<u8> {
    let mut h = header.to_vec();
    h[16..24].copy_from_slice(&lsn.to_le_bytes());
    let mut c = crc32fast::Hasher::new();
    c.update(&h[0..12]);
    c.update(&h[16..24]);
    h[12..16].copy_from_slice(&c.finalize().to_le_bytes());
    h
}

// ---- LSNs at the end of their range -------------------------------------------

/// A log record: LSN, instant, key hash halves, operation 1 (insert), CRC.
fn record(lsn: u64, t: i64) -> Vec<u8> {
    let mut r = Vec::with_capacity(RECORD);
    r.extend_from_slice(&lsn.to_le_bytes());
    r.extend_from_slice(&t.to_le_bytes());
    r.extend_from_slice(&0x0123_4567_89ab_cdefu64.to_le_bytes());
    r.extend_from_slice(&0xfedc_ba98_7654_3210u64.to_le_bytes());
    r.extend_from_slice(&[1, 0, 0, 0]);
    r.extend_from_slice(&crc32fast::hash(&r).to_le_bytes());
    r
}

/// A log file whose header says `first` and whose records are `lsns`.
fn log_file(first: u64, lsns: &[u64], t: i64) -> Vec<u8> {
    let mut h = vec![0u8; LOG_HEADER];
    h[..8].copy_from_slice(b"TBLMWAL\0");
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    let mut f = relog(&h, first);
    for &l in lsns {
        f.extend_from_slice(&record(l, t));
    }
    f
}

/// Replay computes the LSN after the last record it took as `lsn + 1`:
/// with a record at `u64::MAX` followed by another file that holds a
/// record at `u64::MAX` too, that addition overflows (a panic where
/// overflow checks are on, as in the test and dev profiles; a wrap to 0
/// in release builds). Found by reading `wal::replay_records` for the
/// `log_replay` fuzz target, whose release build (no overflow checks)
/// cannot see it.
#[test]
fn replay_of_a_record_at_the_last_lsn_does_not_overflow() {
    let dir = scratch();
    let t = T0 as i64;
    let max = u64::MAX;
    fs::write(
        dir.path().join(format!("{:016x}.log", max - 1)),
        log_file(max - 1, &[max - 1, max], t),
    )
    .unwrap();
    fs::write(
        dir.path().join(format!("{max:016x}.log")),
        log_file(max, &[max], t),
    )
    .unwrap();
    let r = catch_unwind(|| timebloom::fuzzing::wal_replay(dir.path(), max - 1));
    assert!(r.is_ok(), "replay panicked");
}

/// The report of a log damaged in the middle names the LSN after the
/// file's valid records, computed as `first + count`: in a file whose
/// records start at `u64::MAX`, that addition overflowed (a panic where
/// overflow checks are on). Found by the `log_replay` fuzz target in CI's
/// smoke run. LSNs in a file follow each other modulo 2^64 (`wal::scan`),
/// so the report's LSN wraps as they do.
#[test]
fn a_damaged_middle_after_the_last_lsn_does_not_overflow() {
    let dir = scratch();
    let t = T0 as i64;
    let max = u64::MAX;
    let mut f = log_file(max, &[max], t);
    f.extend_from_slice(&[0xa5; RECORD]); // damaged
    f.extend_from_slice(&record(7, t)); // a valid record after it
    fs::write(dir.path().join(format!("{max:016x}.log")), f).unwrap();
    let r = catch_unwind(|| timebloom::fuzzing::wal_replay(dir.path(), max));
    assert!(r.is_ok(), "replay panicked");
}

/// A log file with a bad header whose records all lie below the replay's
/// start (its name, its first LSN, is below it) is a checkpoint's
/// leftover: the replay leaves it out (see `stale_log.rs`). The
/// `log_replay` fuzz target's check still demanded that such a file fail
/// the replay and panicked on this 32-byte input within seconds of any
/// run. A damaged file the replay needs still fails it.
#[test]
fn the_log_fuzz_check_accepts_a_damaged_leftover_below_the_replay() {
    let mut f = log_file(0x26_0000, &[], T0 as i64);
    f[12] ^= 1; // the header's CRC
    let dir = scratch();
    let r = catch_unwind(|| timebloom::fuzzing::wal_log(&f, dir.path()));
    assert!(r.is_ok(), "the fuzz check panicked on a damaged leftover");
    // From its own LSN on, the file is needed: refused.
    let dir = scratch();
    fs::write(dir.path().join("0000000000260000.log"), &f).unwrap();
    assert!(timebloom::fuzzing::wal_replay(dir.path(), 0x26_0000).is_err());
    assert_eq!(
        timebloom::fuzzing::wal_replay(dir.path(), 0x26_0001).ok(),
        Some(0)
    );
}

/// The open's recovery computes the next LSN as the last replayed one
/// plus one: a MANIFEST whose `checkpoint_lsn` is `u64::MAX` (checksum
/// intact: a damaged or hand-edited file) with a log holding the record
/// at that LSN makes the addition overflow (a panic where overflow checks
/// are on; in release builds the log restarts at LSN 0, below the
/// checkpoint).
#[test]
fn open_with_a_checkpoint_at_the_last_lsn_does_not_panic() {
    let t = bloom();
    let dir = write_case(t, Path::new(""), &[], Mode::Crash);
    set_checkpoint_lsn(dir.path(), u64::MAX);
    fs::remove_file(dir.path().join(&t.log)).unwrap();
    let secs = day(0)
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    fs::write(
        dir.path().join(format!("wal/{:016x}.log", u64::MAX)),
        log_file(u64::MAX, &[u64::MAX], secs),
    )
    .unwrap();
    for mode in [Mode::Crash, Mode::PowerLoss] {
        let r = catch_unwind(AssertUnwindSafe(|| open(dir.path(), mode).map(drop)));
        assert!(r.is_ok(), "{mode:?}: the open panicked");
    }
}

/// Rewrites the MANIFEST's `checkpoint_lsn`, its checksum kept valid (a
/// damaged or hand-edited file that passes every other check).
fn set_checkpoint_lsn(dir: &Path, lsn: u64) {
    let manifest = fs::read(dir.join("MANIFEST")).unwrap();
    let body = String::from_utf8(manifest[20..].to_vec()).unwrap();
    let at = body.find("\"checkpoint_lsn\": ").unwrap() + "\"checkpoint_lsn\": ".len();
    let end = at + body[at..].find(|c: char| !c.is_ascii_digit()).unwrap();
    let body = format!("{}{}{}", &body[..at], lsn, &body[end..]);
    let mut m = manifest[..20].to_vec();
    m[12..16].copy_from_slice(&(body.len() as u32).to_le_bytes());
    m[16..20].copy_from_slice(&crc32fast::hash(body.as_bytes()).to_le_bytes());
    m.extend_from_slice(body.as_bytes());
    fs::write(dir.join("MANIFEST"), m).unwrap();
}

/// A checkpoint a few positions below 2^64 with no record after it: the
/// open took it, and the log ran out of positions a few inserts later (the
/// append's addition overflowed: a panic where overflow checks are on, a
/// wrap to 0 in release builds, after which replay would have dropped
/// every later record). Found in review. A position past 2^62, which no
/// log reaches in centuries, is refused at the open as damage.
#[test]
fn a_checkpoint_near_the_last_lsn_is_refused_at_the_open() {
    let t = bloom();
    let dir = write_case(t, Path::new(""), &[], Mode::Crash);
    set_checkpoint_lsn(dir.path(), u64::MAX - 2);
    fs::remove_file(dir.path().join(&t.log)).unwrap();
    for mode in [Mode::Crash, Mode::PowerLoss] {
        let r = catch_unwind(AssertUnwindSafe(|| {
            let e = open(dir.path(), mode)?;
            for i in 0..4 {
                e.insert(&url(1, i))?;
            }
            Ok::<_, Error>(())
        }));
        match r {
            Ok(Err(err @ Error::Corrupt { .. })) => assert_names(&err, Path::new("wal")),
            other => panic!("{mode:?}: {other:?}"),
        }
    }
}

/// The configuration's floats survive the manifest's JSON exactly.
/// serde_json's default float parser (without its `float_roundtrip`
/// feature, now on) read `0.014511111111110555`, which is what it writes
/// for that `f64` (bits `0x3f8db8005d34ecae`), as `0.014511111111110557`,
/// one ULP higher, so an engine created with that `fpr` reopened with
/// another. Found by the `manifest` fuzz target.
#[test]
fn a_manifest_keeps_its_fpr_exactly() {
    let fpr: f64 = f64::from_bits(0x3f8d_b800_5d34_ecae);
    let dir = scratch();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(&[Tier::daily(3)], 200, fpr), &clock);
    e.close().unwrap();
    let e = open(dir.path(), Mode::Crash).unwrap();
    assert_eq!(
        e.config().fpr.to_bits(),
        fpr.to_bits(),
        "stored {fpr:?}, read back {:?}",
        e.config().fpr
    );
}
