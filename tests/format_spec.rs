//! An independent reader of the files an engine writes, written from
//! `docs/format.md` alone: every field the document defines is decoded
//! from real files and checked against the value the document gives it
//! (magic, version, sizes, offsets, checksums over the byte ranges it
//! names, counts, states, names), and a few damaged files are opened to
//! check what the document says an open does with them.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;
use std::time::Duration;

use common::*;
use serde_json::Value;
use timebloom::{Config, Engine, Error, ManualClock, Options, SyncPolicy, Tier};
use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

// ---------------------------------------------------------------------------
// Little-endian fields and checksums.

fn u32_at(b: &[u8], off: usize) -> u32 {
    u32::from_le_bytes(b[off..off + 4].try_into().unwrap())
}

fn u64_at(b: &[u8], off: usize) -> u64 {
    u64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn i64_at(b: &[u8], off: usize) -> i64 {
    i64::from_le_bytes(b[off..off + 8].try_into().unwrap())
}

fn crc(parts: &[&[u8]]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    for p in parts {
        h.update(p);
    }
    h.finalize()
}

// ---------------------------------------------------------------------------
// Calendar: window indexes and labels as "The directory" and "Window
// indexes" define them.

/// (year, month 1..=12, day 1..=31) of a day count since 1970-01-01.
fn civil(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = m as i64;
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d as i64 - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The label of window `w` of a span (`day`, `week`, `month`, custom).
fn label(span: &Value, w: i64) -> String {
    match span {
        Value::String(s) if s == "day" => {
            let (y, m, d) = civil(w);
            format!("{y:04}{m:02}{d:02}")
        }
        Value::String(s) if s == "week" => {
            // Week `w` starts on Monday, day `7w - 3`; its Thursday names
            // the ISO year.
            let thursday = 7 * w;
            let (y, _, _) = civil(thursday);
            let week = (thursday - days_from_civil(y, 1, 1)) / 7 + 1;
            format!("{y:04}W{week:02}")
        }
        Value::String(s) if s == "month" => {
            format!("{:04}{:02}", w.div_euclid(12), w.rem_euclid(12) + 1)
        }
        Value::Object(o) if o.contains_key("custom") => {
            if w < 0 {
                format!("n{}", -w)
            } else {
                w.to_string()
            }
        }
        other => panic!("span {other} is not one format.md names"),
    }
}

fn tier_code(tier: &Value) -> String {
    if tier["kind"] == "fingerprint" {
        return "f".into();
    }
    match &tier["span"] {
        Value::String(s) if s == "day" => "d".into(),
        Value::String(s) if s == "week" => "w".into(),
        Value::String(s) if s == "month" => "m".into(),
        Value::Object(o) => format!("c{}", o["custom"].as_u64().unwrap()),
        other => panic!("span {other}"),
    }
}

/// The window of `local` seconds (UTC plus the offset) in a span.
fn window_of(span: &Value, local: i64) -> i64 {
    let day = local.div_euclid(86_400);
    match span {
        Value::String(s) if s == "day" => day,
        Value::String(s) if s == "week" => (day + 3).div_euclid(7),
        Value::String(s) if s == "month" => {
            let (y, m, _) = civil(day);
            y * 12 + m as i64 - 1
        }
        Value::Object(o) => local.div_euclid(o["custom"].as_i64().unwrap()),
        other => panic!("span {other}"),
    }
}

// ---------------------------------------------------------------------------
// MANIFEST.

struct Manifest {
    version: u32,
    json: Value,
}

fn read_manifest(dir: &Path) -> Manifest {
    let b = fs::read(dir.join("MANIFEST")).unwrap();
    assert_eq!(&b[0..8], b"TBLMMANI", "manifest magic");
    let version = u32_at(&b, 8);
    let n = u32_at(&b, 12) as usize;
    assert_eq!(b.len(), 20 + n, "manifest length: 20 + body length");
    let body = &b[20..];
    assert_eq!(u32_at(&b, 16), crc(&[body]), "manifest body CRC32");
    let json: Value = serde_json::from_slice(body).expect("UTF-8 JSON body");
    let has_first = json["segments"]
        .as_array()
        .unwrap()
        .iter()
        .any(|s| s.get("first").is_some());
    assert_eq!(version, if has_first { 2 } else { 1 }, "manifest version");
    for key in ["config", "seed", "generation", "segments"] {
        assert!(json.get(key).is_some(), "manifest body lacks {key}: {json}");
    }
    let cfg = &json["config"];
    for key in [
        "tiers",
        "expected_items_per_day",
        "fpr",
        "utc_offset_secs",
        "growth_factor",
        "tightening",
        "sync",
    ] {
        assert!(cfg.get(key).is_some(), "manifest config lacks {key}: {cfg}");
    }
    for t in cfg["tiers"].as_array().unwrap() {
        assert!(t.get("span").is_some() && t.get("retention").is_some());
        let kind = t["kind"].as_str().unwrap();
        assert!(
            ["bloom", "counting", "fingerprint"].contains(&kind),
            "{kind}"
        );
    }
    let sync = &cfg["sync"];
    assert!(
        sync == "always" || sync == "none" || sync.get("interval").is_some(),
        "sync {sync}"
    );
    Manifest { version, json }
}

// ---------------------------------------------------------------------------
// Segment files.

/// A decoded header copy, or why it is invalid.
#[derive(Clone, Debug)]
struct Header {
    raw: Vec<u8>,
    version: u32,
    kind: u32,
    cells: u32,
    k: u32,
    nblocks: u64,
    seq: u32,
    state: u32,
    clean: u32,
    occupied: u64,
    body_crc: u32,
}

fn decode_header(b: &[u8]) -> Result<Header, String> {
    if &b[0..8] != b"TBLMSEG\0" {
        return Err("magic".into());
    }
    if u32_at(b, 124) != crc(&[&b[0..124]]) {
        return Err("header CRC32".into());
    }
    let version = u32_at(b, 8);
    if version == 2 && u32_at(b, 140) != crc(&[&b[0..140]]) {
        return Err("table CRC32".into());
    }
    Ok(Header {
        raw: b[..144].to_vec(),
        version,
        kind: u32_at(b, 12),
        cells: u32_at(b, 16),
        k: u32_at(b, 20),
        nblocks: u64_at(b, 24),
        seq: u32_at(b, 92),
        state: u32_at(b, 84),
        clean: u32_at(b, 88),
        occupied: u64_at(b, 96),
        body_crc: u32_at(b, 120),
    })
}

struct Segment {
    name: String,
    h: Header,
    body: Vec<u8>,
}

/// The valid copy with the higher sequence number (serial-number order).
fn newer(a: &Header, b: &Header) -> bool {
    (b.seq.wrapping_sub(a.seq) as i32) > 0
}

/// Reads and checks one segment file against everything format.md says of
/// it, for the entry (`tier`, `window`) at chain position `pos`.
fn read_segment(path: &Path, seed: u64, tier: &Value, window: i64, pos: u64) -> Segment {
    let name = path.file_name().unwrap().to_str().unwrap().to_string();
    let b = fs::read(path).unwrap();
    assert!(b.len() >= 4096, "{name}: shorter than the header page");
    let a = decode_header(&b[0..2048]);
    let bb = decode_header(&b[2048..4096]);
    let (a, bb) = match (a, bb) {
        (Ok(a), Ok(bb)) => (a, bb),
        (a, bb) => panic!("{name}: a header copy does not decode: A {a:?} B {bb:?}"),
    };
    let h = if newer(&a, &bb) {
        bb.clone()
    } else {
        a.clone()
    };
    let older = if newer(&a, &bb) { &a } else { &bb };
    // Sequence: both 0 after create; else the newest copy is at A when
    // even, B when odd, and the other holds the version before.
    if h.seq == 0 {
        assert_eq!(older.seq, 0, "{name}: sequence 0 in one copy only");
    } else {
        let at_b = h.seq % 2 == 1;
        assert_eq!(
            at_b,
            newer(&a, &bb),
            "{name}: sequence {} in the wrong copy",
            h.seq
        );
        assert_eq!(older.seq, h.seq - 1, "{name}: other copy's sequence");
    }
    let r = &h.raw;
    let table = tier["kind"] == "fingerprint";
    if table {
        assert_eq!(h.version, 2, "{name}: table version");
        assert_eq!(h.kind, 3, "{name}: table kind");
        assert!(
            TABLE_WIDTHS.contains(&(h.k, h.cells)),
            "{name}: fingerprint bits {} with {} slots",
            h.k,
            h.cells
        );
        assert_eq!(u32_at(r, 56), 1, "{name}: table span");
        assert_eq!(u64_at(r, 64), 0, "{name}: table custom seconds");
        assert_eq!(i64_at(r, 72), 0, "{name}: table window");
        assert_eq!(
            u32_at(r, 128),
            tier["retention"].as_u64().unwrap() as u32 - 1,
            "{name}: days kept after today"
        );
        assert_eq!(u32_at(r, 136), 0, "{name}: table reserved field");
        assert_eq!(h.state, 1, "{name}: a table is never sealed");
        assert!(
            h.occupied <= h.nblocks * u64::from(h.cells),
            "{name}: occupied"
        );
        assert_eq!(name, format!("f-table-{pos}.seg"), "table name");
    } else {
        assert_eq!(h.version, 1, "{name}: version");
        let kind = match tier["kind"].as_str().unwrap() {
            "bloom" => 1,
            "counting" => 2,
            k => panic!("{k}"),
        };
        assert_eq!(h.kind, kind, "{name}: kind");
        assert_eq!(h.cells, if kind == 1 { 512 } else { 128 }, "{name}: cells");
        assert!((1..=24).contains(&h.k), "{name}: k {}", h.k);
        let (span, secs) = match &tier["span"] {
            Value::String(s) if s == "day" => (1, 0),
            Value::String(s) if s == "week" => (2, 0),
            Value::String(s) if s == "month" => (3, 0),
            Value::Object(o) => (4, o["custom"].as_u64().unwrap()),
            other => panic!("{other}"),
        };
        assert_eq!(u32_at(r, 56), span, "{name}: span");
        assert_eq!(u64_at(r, 64), secs, "{name}: custom seconds");
        assert_eq!(i64_at(r, 72), window, "{name}: window index");
        assert!(
            r[128..144].iter().all(|&x| x == 0),
            "{name}: bytes 128..144 of a version-1 file are not zero"
        );
        assert!(h.state == 1 || h.state == 2, "{name}: state {}", h.state);
        assert_eq!(
            name,
            format!(
                "{}-{}-{pos}.seg",
                tier_code(tier),
                label(&tier["span"], window)
            ),
            "segment name"
        );
    }
    assert!(h.nblocks >= 1, "{name}: blocks");
    assert_eq!(u64_at(r, 32), 4096, "{name}: body offset");
    assert_eq!(u64_at(r, 40), h.nblocks * 64, "{name}: body length");
    assert_eq!(b.len() as u64, 4096 + h.nblocks * 64, "{name}: file length");
    assert_eq!(
        u64_at(r, 48),
        xxh3_64_with_seed(b"timebloom seed fingerprint", seed),
        "{name}: seed fingerprint"
    );
    assert_eq!(u32_at(r, 60), 0, "{name}: reserved");
    assert_eq!(u64::from(u32_at(r, 80)), pos, "{name}: sub-filter index");
    assert!(h.clean <= 1, "{name}: clean mark {}", h.clean);
    assert!(u64_at(r, 104) > 0, "{name}: capacity");
    let rate = f64::from_bits(u64_at(r, 112));
    assert!(rate > 0.0 && rate < 1.0, "{name}: target rate {rate}");
    let body = b[4096..].to_vec();
    if h.state == 2 {
        assert_eq!(h.clean, 1, "{name}: a sealed header is clean");
        assert_eq!(h.body_crc, crc(&[&body]), "{name}: sealed body CRC32");
    }
    if h.clean == 1 && !table {
        assert_eq!(
            h.occupied,
            occupied(h.kind, &body),
            "{name}: occupied cells"
        );
    }
    Segment { name, h, body }
}

fn occupied(kind: u32, body: &[u8]) -> u64 {
    body.chunks(8)
        .map(|w| {
            let w = u64::from_le_bytes(w.try_into().unwrap());
            if kind == 1 {
                u64::from(w.count_ones())
            } else {
                (0..16).filter(|i| (w >> (4 * i)) & 15 != 0).count() as u64
            }
        })
        .sum()
}

/// The 24 odd constants of "Where a key goes in a body".
const M: [u64; 24] = [
    0x9e3779b97f4a7c15,
    0xbf58476d1ce4e5b9,
    0x94d049bb133111eb,
    0xd6e8feb86659fd93,
    0xa0761d6478bd642f,
    0xe7037ed1a0b428db,
    0x8ebc6af09c88c6e3,
    0x589965cc75374cc3,
    0x1d8e4e27c47d124f,
    0xff51afd7ed558ccd,
    0xc4ceb9fe1a85ec53,
    0x87c37b91114253d5,
    0x4cf5ad432745937f,
    0x52dce729da3ed3e5,
    0x2545f4914f6cdd1d,
    0x9fb21c651e98df25,
    0xd1b54a32d192ed03,
    0xaef17502108ef2d9,
    0xf1357aea2e62a9c5,
    0xc2b2ae3d27d4eb4f,
    0x165667b19e3779f9,
    0x27d4eb2f165667c5,
    0x85ebca77c2b2ae63,
    0xcc9e2d51b8b7d3a1,
];

fn halves(key: &[u8], seed: u64) -> (u64, u64) {
    let h = xxh3_128_with_seed(key, seed);
    (h as u64, (h >> 64) as u64)
}

/// Whether every cell of `key` is set in `seg`'s body, found by the rules
/// of "Where a key goes in a body".
fn holds(seg: &Segment, key: &[u8], seed: u64) -> bool {
    let (lo, hi) = halves(key, seed);
    let block = ((u128::from(hi) * u128::from(seg.h.nblocks)) >> 64) as usize;
    let base = block * 64;
    (0..seg.h.k as usize).all(|i| {
        let x = lo.wrapping_mul(M[i]);
        if seg.h.kind == 1 {
            let c = (x >> 55) as usize;
            let w = u64_at(&seg.body, base + (c >> 6) * 8);
            w >> (c & 63) & 1 == 1
        } else {
            let c = (x >> 57) as usize;
            let w = u64_at(&seg.body, base + (c >> 4) * 8);
            w >> (4 * (c & 15)) & 15 != 0
        }
    })
}

/// Every segment of the manifest, read and checked, by (tier, window).
fn read_all(dir: &Path) -> (Manifest, BTreeMap<(u64, i64), Vec<Segment>>) {
    let m = read_manifest(dir);
    let seed = m.json["seed"].as_u64().unwrap();
    let tiers = m.json["config"]["tiers"].as_array().unwrap().clone();
    let mut out = BTreeMap::new();
    let mut named = Vec::new();
    for s in m.json["segments"].as_array().unwrap() {
        let t = s["tier"].as_u64().unwrap();
        let w = s["window"].as_i64().unwrap();
        let first = s.get("first").map_or(0, |f| f.as_u64().unwrap());
        let tier = &tiers[t as usize];
        let mut chain = Vec::new();
        for (i, f) in s["files"].as_array().unwrap().iter().enumerate() {
            let f = f.as_str().unwrap();
            named.push(f.to_string());
            chain.push(read_segment(
                &dir.join("seg").join(f),
                seed,
                tier,
                w,
                first + i as u64,
            ));
        }
        // Only a chain's newest sub-filter takes writes; the others of a
        // window are sealed once the chain grew past them (or reopened by
        // a backfill, not done here).
        assert!(
            out.insert((t, w), chain).is_none(),
            "a (tier, window) pair appears twice"
        );
    }
    named.sort();
    let on_disk = seg_files(dir);
    assert_eq!(
        on_disk, named,
        "seg/ holds exactly the files the manifest names"
    );
    (m, out)
}

fn local_secs(m: &Manifest, t: std::time::SystemTime) -> i64 {
    let utc = t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64;
    utc + m.json["config"]["utc_offset_secs"].as_i64().unwrap()
}

/// Checks that every key in `keys`, inserted at `t`, is in some sub-filter
/// of the window holding `t` in every non-table tier.
fn check_keys(
    m: &Manifest,
    segs: &BTreeMap<(u64, i64), Vec<Segment>>,
    keys: &[Vec<u8>],
    t: std::time::SystemTime,
) {
    let seed = m.json["seed"].as_u64().unwrap();
    let tiers = m.json["config"]["tiers"].as_array().unwrap();
    for (ti, tier) in tiers.iter().enumerate() {
        if tier["kind"] == "fingerprint" {
            continue;
        }
        let w = window_of(&tier["span"], local_secs(m, t));
        let Some(chain) = segs.get(&(ti as u64, w)) else {
            continue; // expired
        };
        for key in keys {
            assert!(
                chain.iter().any(|s| holds(s, key, seed)),
                "tier {ti} window {w}: a key is in no sub-filter by format.md's placement"
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Write-ahead log and shadows.

struct Record {
    lsn: u64,
    instant: i64,
    lo: u64,
    hi: u64,
    op: u8,
}

/// Reads `wal/<16 hex>.log`: header fields and every record, checking
/// each CRC the document names.
fn read_log(path: &Path) -> (u64, Vec<Record>) {
    let name = path.file_name().unwrap().to_str().unwrap();
    let stem = name.strip_suffix(".log").unwrap();
    assert_eq!(stem.len(), 16, "log name {name}: 16 hexadecimal digits");
    assert!(stem
        .chars()
        .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    let first = u64::from_str_radix(stem, 16).unwrap();
    let b = fs::read(path).unwrap();
    assert!(b.len() >= 32, "{name}: shorter than its header");
    assert_eq!(&b[0..8], b"TBLMWAL\0", "{name}: magic");
    assert_eq!(u32_at(&b, 8), 1, "{name}: version");
    assert_eq!(
        u32_at(&b, 12),
        crc(&[&b[0..12], &b[16..24]]),
        "{name}: header CRC32"
    );
    assert_eq!(u64_at(&b, 16), first, "{name}: first LSN is the name");
    assert_eq!(u64_at(&b, 24), 0, "{name}: padding");
    assert_eq!((b.len() - 32) % 40, 0, "{name}: whole 40-byte records");
    let mut out = Vec::new();
    for (i, r) in b[32..].chunks(40).enumerate() {
        assert_eq!(u32_at(r, 36), crc(&[&r[0..36]]), "{name}: record {i} CRC32");
        assert_eq!(&r[33..36], &[0, 0, 0], "{name}: record {i} zero bytes");
        let rec = Record {
            lsn: u64_at(r, 0),
            instant: i64_at(r, 8),
            lo: u64_at(r, 16),
            hi: u64_at(r, 24),
            op: r[32],
        };
        assert_eq!(
            rec.lsn,
            first + i as u64,
            "{name}: record {i} LSN in sequence"
        );
        assert!((1..=3).contains(&rec.op), "{name}: operation {}", rec.op);
        out.push(rec);
    }
    (first, out)
}

fn logs(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "log"))
        .collect();
    v.sort();
    v
}

fn wal_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = fs::read_dir(dir.join("wal"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Reads `wal/<file>.<L>.shadow`: (sweep day, body).
fn read_shadow(path: &Path) -> (u32, Vec<u8>) {
    let name = path.display().to_string();
    let b = fs::read(path).unwrap();
    assert_eq!(&b[0..8], b"TBLMSHDW", "{name}: magic");
    let len = u64_at(&b, 8) as usize;
    assert_eq!(b.len(), 24 + len, "{name}: 24-byte header + body length");
    let day = u32_at(&b, 20);
    let body = &b[24..];
    let want = if day == 0 {
        crc(&[body])
    } else {
        crc(&[&b[20..24], body])
    };
    assert_eq!(u32_at(&b, 16), want, "{name}: shadow CRC32");
    (day, body.to_vec())
}

// ---------------------------------------------------------------------------
// The tests.

fn hour(n: u64) -> Duration {
    Duration::from_secs(3600 * n)
}

/// Calendar tiers of every span and both window kinds, grown chains, sealed
/// and open windows across a week's and a month's end, at a UTC offset.
#[test]
fn calendar_tiers_decode_as_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    // Friday 2026-01-30, 12:00 UTC; the offset puts local time at 07:00.
    let start = day(25);
    let clock = ManualClock::new(start);
    let cfg = Config {
        utc_offset_secs: -5 * 3600,
        sync: SyncPolicy::None,
        ..config(
            &[
                Tier::daily(3),
                Tier::weekly(2),
                Tier::monthly(2),
                Tier::custom(hour(6), 12),
                Tier::custom(hour(12), 6).counting(),
            ],
            20,
            0.01,
        )
    };
    let e = create(&dir, cfg, &clock);
    let mut inserted: Vec<(std::time::SystemTime, Vec<Vec<u8>>)> = Vec::new();
    for d in 0..4u64 {
        let t = day(25 + d);
        clock.set(t);
        let keys: Vec<Vec<u8>> = (0..90).map(|i| url(d, i)).collect();
        for k in &keys {
            e.insert(k).unwrap();
        }
        inserted.push((t, keys));
    }
    e.close().unwrap();

    assert!(dir.join("LOCK").exists(), "LOCK");
    assert!(!dir.join("wal").exists(), "no wal/ under none");
    assert!(!dir.join("MANIFEST.tmp").exists());
    let (m, segs) = read_all(&dir);
    assert_eq!(m.version, 1);
    let tiers = m.json["config"]["tiers"].as_array().unwrap();
    assert_eq!(tiers[3]["span"]["custom"], 21600);
    assert_eq!(m.json["config"]["sync"], "none");
    let now_local = local_secs(&m, clock.now_for_test());
    // Each tier's newest window is the current one, open; older ones
    // sealed; after a clean close every header is clean; chains grew.
    let mut grown = 0;
    for ((t, w), chain) in &segs {
        let tier = &tiers[*t as usize];
        let current = window_of(&tier["span"], now_local);
        let retention = tier["retention"].as_i64().unwrap();
        assert!(
            *w <= current && *w > current - retention,
            "tier {t} window {w} kept"
        );
        for s in chain {
            assert_eq!(s.h.clean, 1, "{}: clean after close", s.name);
            // A window's sub-filters are sealed when the window is, once
            // it is no longer its tier's newest.
            let want = if *w < current { 2 } else { 1 };
            assert_eq!(s.h.state, want, "{}: state", s.name);
        }
        if chain.len() > 1 {
            grown += 1;
        }
    }
    assert!(grown >= 3, "chains grew: {grown}");
    // A sealed week and a sealed month exist.
    assert!(segs
        .keys()
        .any(|(t, w)| *t == 1 && *w < window_of(&tiers[1]["span"], now_local)));
    assert!(segs
        .keys()
        .any(|(t, w)| *t == 2 && *w < window_of(&tiers[2]["span"], now_local)));
    let names: Vec<_> = seg_files(&dir);
    assert!(names.contains(&"w-2026W05-0.seg".to_string()), "{names:?}");
    assert!(names.contains(&"m-202601-0.seg".to_string()), "{names:?}");
    assert!(names.contains(&"d-20260202-0.seg".to_string()), "{names:?}");
    for (t, keys) in &inserted[..3] {
        check_keys(&m, &segs, keys, *t);
    }
    check_keys(&m, &segs, &inserted[3].1, inserted[3].0);
}

trait NowForTest {
    fn now_for_test(&self) -> std::time::SystemTime;
}

impl NowForTest for ManualClock {
    fn now_for_test(&self) -> std::time::SystemTime {
        use timebloom::Clock;
        self.now()
    }
}

/// The engine of the log tests: a counting daily tier, a fingerprint tier
/// and a Bloom daily tier under `always`.
fn logged_engine(dir: &Path, clock: &ManualClock) -> Engine {
    let cfg = Config {
        sync: SyncPolicy::Always,
        ..config(
            &[Tier::daily(3).counting(), Tier::fingerprint(10)],
            50,
            0.01,
        )
    };
    create(dir, cfg, clock)
}

fn secs(t: std::time::SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() as i64
}

/// The log under `always` with inserts and removes, a checkpoint and its
/// shadows, `BOOT`, and the headers of a live engine.
#[test]
fn log_checkpoint_and_shadows_decode_as_documented() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let e = logged_engine(&dir, &clock);
    let m = read_manifest(&dir);
    let seed = m.json["seed"].as_u64().unwrap();
    assert_eq!(m.json["config"]["sync"], "always");
    let boot = fs::read_to_string(dir.join("wal/BOOT")).unwrap();
    let running = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    assert_eq!(boot.trim(), running.trim(), "BOOT names the running boot");
    let l0 = m
        .json
        .get("checkpoint_lsn")
        .map_or(0, |v| v.as_u64().unwrap());

    let keys: Vec<Vec<u8>> = (0..20).map(|i| url(3, i)).collect();
    for k in &keys {
        assert!(e.insert(k).unwrap());
    }
    for k in &keys[..5] {
        e.remove(k).unwrap();
    }
    // The log, read while the engine is open (every record acknowledged
    // under `always` is in it).
    let files = logs(&dir);
    assert_eq!(files.len(), 1, "{:?}", wal_names(&dir));
    let (first, recs) = read_log(&files[0]);
    assert_eq!(first, l0, "the log starts at the checkpoint");
    assert_eq!(recs.len(), 25, "one record per insert and remove");
    for (i, r) in recs.iter().enumerate() {
        let (key, op) = if i < 20 {
            (&keys[i], 1)
        } else {
            (&keys[i - 20], 2)
        };
        assert_eq!(
            (r.lo, r.hi),
            halves(key, seed),
            "record {i}: key hash halves"
        );
        assert_eq!(r.op, op, "record {i}: operation");
        assert_eq!(r.instant, secs(day(0)), "record {i}: instant");
        assert_eq!(r.lsn, l0 + i as u64);
    }
    // Headers of a live engine: open segments have clean mark 0.
    let (_, segs) = read_all(&dir);
    for chain in segs.values() {
        for s in chain {
            assert_eq!(s.h.state, 1, "{}", s.name);
            assert_eq!(
                s.h.clean, 0,
                "{}: clean mark while the engine has it open",
                s.name
            );
        }
    }

    // A checkpoint.
    e.flush().unwrap();
    let m = read_manifest(&dir);
    let l = m.json["checkpoint_lsn"].as_u64().unwrap();
    assert_eq!(l, l0 + 25, "checkpoint at the log's end");
    let names = wal_names(&dir);
    let lhex = format!("{l:016x}");
    assert_eq!(logs(&dir).len(), 1, "older logs deleted: {names:?}");
    let (first, recs) = read_log(&logs(&dir)[0]);
    assert_eq!((first, recs.len()), (l, 0), "{names:?}");
    let (_, segs) = read_all(&dir);
    let tiers = m.json["config"]["tiers"].as_array().unwrap().clone();
    let mut shadows = Vec::new();
    for ((t, _), chain) in &segs {
        let kind = tiers[*t as usize]["kind"].as_str().unwrap();
        for s in chain {
            let shadow = dir.join("wal").join(format!("{}.{lhex}.shadow", s.name));
            if kind == "bloom" || s.h.state == 2 {
                assert!(!shadow.exists(), "{shadow:?}");
                continue;
            }
            let (sweep, body) = read_shadow(&shadow);
            assert!(
                body == s.body,
                "{}: shadow body is the body at the checkpoint",
                s.name
            );
            if kind == "fingerprint" {
                assert_eq!(sweep, u32_at(&s.h.raw, 132), "{}: shadow sweep day", s.name);
            } else {
                assert_eq!(sweep, 0, "{}: a counting shadow's day", s.name);
            }
            shadows.push(format!("{}.{lhex}.shadow", s.name));
        }
    }
    assert_eq!(shadows.len(), 2, "a counting and a table shadow: {names:?}");
    let mut want = shadows.clone();
    want.push(format!("{lhex}.log"));
    want.push("BOOT".into());
    want.sort();
    assert_eq!(names, want, "wal/ after a checkpoint");

    // More writes after the checkpoint, then the process dies.
    let more: Vec<Vec<u8>> = (0..6).map(|i| url(4, i)).collect();
    clock.set(day(0) + Duration::from_secs(60));
    for k in &more {
        assert!(e.insert(k).unwrap());
    }
    e.remove(&more[0]).unwrap();
    let (first, recs) = read_log(&logs(&dir)[0]);
    assert_eq!((first, recs.len()), (l, 7));
    assert!(recs.iter().all(|r| r.instant == secs(day(0)) + 60));
    assert_eq!(recs[6].op, 2);
    std::mem::forget(e);

    let pl = || {
        Options::default()
            .clock(clock.clone())
            .assume_power_loss(true)
    };
    let log_name = format!("{lhex}.log");
    // Recovery from an intact copy.
    let copy = tmp.path().join("intact");
    copy_tree(&dir, &copy);
    let r = Engine::open_with(&copy, pl()).expect("recovery");
    assert!(r.contains(&more[1]).unwrap());
    r.close().unwrap();
    // After the recovery's checkpoint and the close: one log, no records.
    let (_, recs) = read_log(&logs(&copy)[0]);
    assert!(recs.is_empty());

    // The log header's padding is outside the CRC and not read.
    let copy = tmp.path().join("padding");
    copy_tree(&dir, &copy);
    let p = copy.join("wal").join(&log_name);
    let mut b = fs::read(&p).unwrap();
    b[24..32].copy_from_slice(&[0xa5; 8]);
    fs::write(&p, &b).unwrap();
    Engine::open_with(&copy, pl())
        .expect("a flipped padding leaves every record readable")
        .close()
        .unwrap();

    // A log under another name than its first LSN: Corrupt, naming the
    // file and both positions.
    let copy = tmp.path().join("renamed");
    copy_tree(&dir, &copy);
    let wrong = format!("{:016x}.log", l + 1000);
    fs::rename(
        copy.join("wal").join(&log_name),
        copy.join("wal").join(&wrong),
    )
    .unwrap();
    let err = refused(Engine::open_with(&copy, pl()));
    let msg = err.to_string();
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(msg.contains(&wrong), "{msg}");

    // Damage in the middle of the log: Corrupt naming the file; degraded
    // goes on.
    let copy = tmp.path().join("middle");
    copy_tree(&dir, &copy);
    let p = copy.join("wal").join(&log_name);
    let mut b = fs::read(&p).unwrap();
    b[32 + 40 * 2 + 3] ^= 0xff;
    fs::write(&p, &b).unwrap();
    let err = refused(Engine::open_with(&copy, pl()));
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains(&log_name), "{err}");
    Engine::open_with(&copy, pl().degraded(true))
        .expect("degraded")
        .close()
        .unwrap();

    // A damaged shadow: Corrupt naming it; degraded keeps a copy in
    // quarantine/.
    let copy = tmp.path().join("shadow");
    copy_tree(&dir, &copy);
    let counting_shadow = shadows.iter().find(|s| s.starts_with("d-")).unwrap();
    let p = copy.join("wal").join(counting_shadow);
    let mut b = fs::read(&p).unwrap();
    let n = b.len();
    b[n - 1] ^= 0x10;
    fs::write(&p, &b).unwrap();
    let err = refused(Engine::open_with(&copy, pl()));
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    assert!(err.to_string().contains(counting_shadow.as_str()), "{err}");
    let r = Engine::open_with(&copy, pl().degraded(true)).expect("degraded");
    assert!(!r.stats().unwrap().unrestored_windows.is_empty());
    r.close().unwrap();
    let q: Vec<String> = fs::read_dir(copy.join("quarantine"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(q.len(), 1, "{q:?}");

    // An open under `none` after a logged session deletes the logs and
    // shadows but leaves wal/ and its BOOT.
    let copy = tmp.path().join("none");
    copy_tree(&dir, &copy);
    Engine::open_with(&copy, pl().sync(SyncPolicy::None))
        .expect("open under none")
        .close()
        .unwrap();
    assert_eq!(wal_names(&copy), vec!["BOOT".to_string()]);
}

/// The error of an open that must be refused.
fn refused(r: Result<Engine, Error>) -> Error {
    match r {
        Ok(_) => panic!("the open succeeded"),
        Err(e) => e,
    }
}

/// Flips one byte of `path` at `off`.
fn flip(path: &Path, off: usize) {
    let mut b = fs::read(path).unwrap();
    b[off] ^= 0x40;
    fs::write(path, &b).unwrap();
}

/// Rewrites a header copy at `at` with `f` applied and its CRC recomputed.
fn rewrite_header(path: &Path, at: usize, f: impl Fn(&mut [u8])) {
    let mut b = fs::read(path).unwrap();
    f(&mut b[at..at + 128]);
    let c = crc(&[&b[at..at + 124]]);
    b[at + 124..at + 128].copy_from_slice(&c.to_le_bytes());
    fs::write(path, &b).unwrap();
}

/// What an open does with damaged segment files and leftovers.
#[test]
fn damaged_segments_and_leftovers_at_open() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 50, 0.01), &clock);
    for i in 0..30 {
        e.insert(&url(5, i)).unwrap();
    }
    clock.set(day(1));
    e.insert(b"today").unwrap();
    e.close().unwrap();
    let (_, segs) = read_all(&dir);
    let sealed = segs.values().next().unwrap()[0].name.clone();
    let open_name = segs.values().last().unwrap()[0].name.clone();
    let opts = || Options::default().clock(clock.clone());

    // The newest header copy torn: the other copy opens the file.
    let copy = tmp.path().join("torn");
    copy_tree(&dir, &copy);
    let p = copy.join("seg").join(&sealed);
    let h = decode_header(&fs::read(&p).unwrap()[0..2048]).unwrap();
    let hb = decode_header(&fs::read(&p).unwrap()[2048..4096]).unwrap();
    let newest_at = if newer(&h, &hb) { 2048 } else { 0 };
    flip(&p, newest_at + 100);
    let r = Engine::open_with(&copy, opts()).expect("the other header copy opens the file");
    assert!(r.contains(&url(5, 1)).unwrap());
    r.close().unwrap();

    // Both copies damaged: refused, naming the file.
    let copy = tmp.path().join("both");
    copy_tree(&dir, &copy);
    let p = copy.join("seg").join(&sealed);
    flip(&p, 100);
    flip(&p, 2048 + 100);
    let err = refused(Engine::open_with(&copy, opts()));
    assert!(err.to_string().contains(&sealed), "{err}");
    assert!(copy.join("quarantine").join(&sealed).exists(), "{err}");

    // Reserved field set (with valid CRCs): refused, naming the file and
    // the field.
    let copy = tmp.path().join("reserved");
    copy_tree(&dir, &copy);
    let p = copy.join("seg").join(&open_name);
    for at in [0, 2048] {
        rewrite_header(&p, at, |h| h[60] = 1);
    }
    let err = refused(Engine::open_with(&copy, opts()));
    let msg = err.to_string();
    assert!(
        msg.contains(&open_name) && msg.contains("reserved"),
        "{msg}"
    );

    // A sealed body damaged: verify_on_open finds it by its CRC.
    let copy = tmp.path().join("body");
    copy_tree(&dir, &copy);
    flip(&copy.join("seg").join(&sealed), 4096 + 7);
    let err = refused(Engine::open_with(&copy, opts().verify_on_open(true)));
    assert!(err.to_string().contains(&sealed), "{err}");

    // Leftovers: MANIFEST.tmp, files of seg/ no manifest names and a
    // `.large` copy are deleted; nothing else is touched.
    let copy = tmp.path().join("leftovers");
    copy_tree(&dir, &copy);
    fs::write(copy.join("MANIFEST.tmp"), b"partial").unwrap();
    fs::copy(
        copy.join("seg").join(&sealed),
        copy.join("seg").join(sealed.replace(".seg", ".large")),
    )
    .unwrap();
    fs::write(copy.join("seg").join("d-20300101-0.seg"), b"x").unwrap();
    fs::write(copy.join("notes.txt"), b"mine").unwrap();
    Engine::open_with(&copy, opts())
        .expect("open")
        .close()
        .unwrap();
    assert!(!copy.join("MANIFEST.tmp").exists());
    assert!(copy.join("notes.txt").exists());
    read_all(&copy);
}

/// A grown fingerprint chain, operation 3 and `insert_at`'s instant in the
/// log, `table_day`, and ISO week labels at a year's end.
#[test]
fn tables_remove_from_windows_and_year_end_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    // Saturday 2027-01-02, 12:00 UTC: ISO week 2026W53.
    let t0 = day(362);
    let clock = ManualClock::new(t0);
    let cfg = Config {
        sync: SyncPolicy::Always,
        ..config(&[Tier::weekly(4).counting(), Tier::fingerprint(3)], 5, 0.01)
    };
    let e = create(&dir, cfg, &clock);
    let keys: Vec<Vec<u8>> = (0..200).map(|i| url(6, i)).collect();
    for k in &keys {
        e.insert(k).unwrap();
    }
    // Ten days on, a backfill and a remove at day 0's instant: the table
    // keeps 3 days, the weekly window still holds that instant.
    clock.set(t0 + 10 * DAY);
    let (first, before) = read_log(&logs(&dir)[0]);
    let old = url(7, 1);
    e.insert_at(&old, t0).unwrap();
    e.remove_at(&keys[0], t0).unwrap();
    let end = first + before.len() as u64;
    let recs: Vec<Record> = logs(&dir).iter().flat_map(|p| read_log(p).1).collect();
    let new: Vec<&Record> = recs.iter().filter(|r| r.lsn >= end).collect();
    let ops: Vec<(u8, i64)> = new.iter().map(|r| (r.op, r.instant)).collect();
    assert!(
        ops.contains(&(1, secs(t0))) && ops.contains(&(3, secs(t0))),
        "insert_at and remove_at log their instant; the remove is operation 3: {ops:?}"
    );
    e.close().unwrap();
    let (m, segs) = read_all(&dir);
    let names = seg_files(&dir);
    assert!(names.contains(&"w-2026W53-0.seg".to_string()), "{names:?}");
    assert!(
        names.contains(&"f-table-1.seg".to_string()),
        "the table grew: {names:?}"
    );
    let today = secs(clock.now_for_test()).div_euclid(86_400);
    assert_eq!(m.json["table_day"].as_i64(), Some(today), "table_day");
    let tables = &segs[&(1, 0)];
    let cap0 = u64_at(&tables[0].h.raw, 104);
    let cap1 = u64_at(&tables[1].h.raw, 104);
    assert_eq!(
        cap0,
        5 * 3,
        "capacity: keys a day x the tier's days, today included"
    );
    assert_eq!(cap1, cap0 * 2, "later tables: x growth");
    for t in tables {
        assert_eq!(
            u32_at(&t.h.raw, 132) as i64,
            today,
            "{}: last sweep",
            t.name
        );
        assert_eq!(t.h.clean, 1);
    }
    // A read-only open writes nothing.
    let before: Vec<Vec<u8>> = names
        .iter()
        .map(|n| fs::read(dir.join("seg").join(n)).unwrap())
        .collect();
    let manifest = fs::read(dir.join("MANIFEST")).unwrap();
    let r = Engine::open_read_only_with(&dir, Options::default().clock(clock.clone())).unwrap();
    assert!(r.contains(&keys[5]).unwrap());
    r.close().unwrap();
    let after: Vec<Vec<u8>> = names
        .iter()
        .map(|n| fs::read(dir.join("seg").join(n)).unwrap())
        .collect();
    assert!(before == after, "a read-only open changed a segment file");
    assert!(manifest == fs::read(dir.join("MANIFEST")).unwrap());
}

/// A negative custom window index (local time before the epoch, at a
/// negative offset) is labelled with `n`.
#[test]
fn minus_labels() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    // 1970-01-01 02:00 UTC is 21:00 the day before at UTC-5.
    let clock = ManualClock::new(std::time::UNIX_EPOCH + hour(2));
    let cfg = Config {
        sync: SyncPolicy::None,
        utc_offset_secs: -5 * 3600,
        ..config(&[Tier::custom(hour(1), 2)], 50, 0.01)
    };
    let e = create(&dir, cfg, &clock);
    e.insert(b"before the epoch").unwrap();
    e.close().unwrap();
    read_all(&dir);
    assert_eq!(seg_files(&dir), vec!["c3600-n3-0.seg".to_string()]);
}

#[test]
fn old_single_copy_header_and_second_quarantine() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 50, 0.01), &clock);
    e.insert(b"k").unwrap();
    e.close().unwrap();
    let name = seg_files(&dir)[0].clone();
    let opts = || Options::default().clock(clock.clone());

    // Copy B zeros, copy A the newest version with sequence 0.
    let copy = tmp.path().join("single");
    copy_tree(&dir, &copy);
    let p = copy.join("seg").join(&name);
    let b = fs::read(&p).unwrap();
    let h = decode_header(&b[0..2048]).unwrap();
    let hb = decode_header(&b[2048..4096]).unwrap();
    let newest = if newer(&h, &hb) { hb } else { h };
    let mut b = b;
    b[0..128].copy_from_slice(&newest.raw[..128]);
    b[2048..4096].fill(0);
    fs::write(&p, &b).unwrap();
    rewrite_header(&p, 0, |h| h[92..96].copy_from_slice(&0u32.to_le_bytes()));
    let r = Engine::open_with(&copy, opts()).expect("a single-copy file opens from copy A");
    assert!(r.contains(b"k").unwrap());
    r.close().unwrap();

    // Quarantined twice under one name: the second is NAME.2.
    let copy = tmp.path().join("twice");
    copy_tree(&dir, &copy);
    for round in 0..2 {
        let p = copy.join("seg").join(&name);
        flip(&p, 100);
        flip(&p, 2048 + 100);
        refused(Engine::open_with(&copy, opts()));
        let r = Engine::open_with(&copy, opts().degraded(true)).expect("degraded");
        r.insert(b"again").unwrap();
        r.close().unwrap();
        assert!(
            copy.join("seg").join(&name).exists(),
            "round {round}: made anew"
        );
    }
    let mut q: Vec<String> = fs::read_dir(copy.join("quarantine"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    q.sort();
    assert_eq!(q, vec![name.clone(), format!("{name}.2")]);
}

/// A torn tail is ignored; a log file that begins past the records read is
/// deleted at open.
#[test]
fn torn_tail_and_log_past_the_records() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let e = logged_engine(&dir, &clock);
    for i in 0..4 {
        e.insert(&url(8, i)).unwrap();
    }
    std::mem::forget(e);
    let pl = || {
        Options::default()
            .clock(clock.clone())
            .assume_power_loss(true)
    };
    let copy = tmp.path().join("torn");
    copy_tree(&dir, &copy);
    let log = logs(&copy)[0].clone();
    let mut b = fs::read(&log).unwrap();
    let (first, recs) = read_log(&log);
    // A torn tail: half a record.
    b.extend_from_slice(&[0x5a; 17]);
    fs::write(&log, &b).unwrap();
    // A file past the records read, under its own first LSN.
    let past = first + recs.len() as u64 + 100;
    let mut h = vec![0u8; 32];
    h[0..8].copy_from_slice(b"TBLMWAL\0");
    h[8..12].copy_from_slice(&1u32.to_le_bytes());
    h[16..24].copy_from_slice(&past.to_le_bytes());
    let c = crc(&[&h[0..12], &h[16..24]]);
    h[12..16].copy_from_slice(&c.to_le_bytes());
    let past_name = format!("{past:016x}.log");
    fs::write(copy.join("wal").join(&past_name), &h).unwrap();
    let r = Engine::open_with(&copy, pl()).expect("a torn tail is not damage");
    assert!(
        !copy.join("wal").join(&past_name).exists(),
        "{:?}",
        wal_names(&copy)
    );
    for i in 0..4 {
        assert!(r.contains(&url(8, i)).unwrap());
    }
    let m = read_manifest(&copy);
    let l = m.json["checkpoint_lsn"].as_u64().unwrap();
    assert!(
        l > past,
        "the new log starts past the deleted file: {l} <= {past}"
    );
    r.close().unwrap();
}

/// Writes `json` as the MANIFEST of `dir` (version 1, its CRC).
fn write_manifest(dir: &Path, json: &Value) {
    let body = serde_json::to_vec(json).unwrap();
    let mut b = Vec::new();
    b.extend_from_slice(b"TBLMMANI");
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&(body.len() as u32).to_le_bytes());
    b.extend_from_slice(&crc(&[&body]).to_le_bytes());
    b.extend_from_slice(&body);
    fs::write(dir.join("MANIFEST"), b).unwrap();
}

/// What an open does with manifests a person or tool edited: names not
/// derived from their entry, names escaping the directory, absent optional
/// fields, a checkpoint position past 2^62; and the instant an insert logs
/// when the clock is behind the newest windows.
#[test]
fn edited_manifests_and_a_clock_behind() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(1));
    let e = logged_engine(&dir, &clock);
    e.insert(b"day 1").unwrap();
    // The clock steps back into day 0: the insert logs day 1's start.
    clock.set(day(0) + hour(6));
    let (first, before) = read_log(&logs(&dir)[0]);
    e.insert(b"behind").unwrap();
    let recs: Vec<Record> = logs(&dir).iter().flat_map(|p| read_log(p).1).collect();
    let r = recs
        .iter()
        .find(|r| r.lsn == first + before.len() as u64)
        .expect("the record");
    assert_eq!(
        r.instant,
        secs(day(1)) - 12 * 3600,
        "a clock behind logs the latest start of the newest windows"
    );
    e.close().unwrap();
    let m = read_manifest(&dir);
    let opts = || Options::default().clock(clock.clone());

    let edit = |name: &str, f: &dyn Fn(&mut Value)| -> std::path::PathBuf {
        let copy = tmp.path().join(name);
        copy_tree(&dir, &copy);
        let mut j = m.json.clone();
        f(&mut j);
        write_manifest(&copy, &j);
        copy
    };
    // Optional fields absent: opens (sync: 1 s interval default).
    let copy = edit("absent", &|j| {
        let o = j.as_object_mut().unwrap();
        o.remove("checkpoint_lsn");
        o.remove("table_day");
        j["config"].as_object_mut().unwrap().remove("sync");
    });
    let r = Engine::open_with(&copy, opts()).expect("optional fields absent");
    assert!(r.contains(b"behind").unwrap());
    r.close().unwrap();
    // A name not derived from its entry: corrupt.
    let copy = edit("misnamed", &|j| {
        let s = j["segments"].as_array_mut().unwrap();
        let e = s.iter_mut().find(|e| e["tier"] == 0).unwrap();
        e["files"][0] = Value::String("d-20300101-0.seg".into());
    });
    let err = refused(Engine::open_with(&copy, opts()));
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
    // A name escaping the directory.
    let copy = edit("escape", &|j| {
        let s = j["segments"].as_array_mut().unwrap();
        s[0]["files"][0] = Value::String("../MANIFEST".into());
    });
    let err = refused(Engine::open_with(&copy, opts()));
    assert!(err.to_string().contains("escap"), "{err}");
    // A checkpoint position past 2^62.
    let copy = edit("lsn", &|j| {
        j["checkpoint_lsn"] = Value::from((1u64 << 62) + 1);
    });
    let err = refused(Engine::open_with(&copy, opts()));
    assert!(matches!(err, Error::Corrupt { .. }), "{err:?}");
}

/// A sealed Bloom file of 8 MiB or more is copied to `<name>.large` and
/// renamed over itself: the same name and bytes a reader expects, no
/// `.large` left after the close.
#[test]
fn large_sealed_file_keeps_its_name_and_format() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let cfg = Config {
        sync: SyncPolicy::None,
        ..config(&[Tier::daily(2)], 6_000_000, 0.001)
    };
    let e = create(&dir, cfg, &clock);
    e.insert(b"sealed").unwrap();
    clock.set(day(1));
    e.insert(b"open").unwrap();
    e.close().unwrap();
    let (_, segs) = read_all(&dir);
    let sealed = &segs.values().next().unwrap()[0];
    assert_eq!(sealed.h.state, 2);
    assert!(sealed.body.len() >= 8 << 20, "{}", sealed.body.len());
    assert!(seg_files(&dir).iter().all(|n| n.ends_with(".seg")));
}

/// A manifest edited so that a custom tier's window is at the far end of
/// the index range (`i64::MAX`, `i64::MIN`), its file renamed to match and
/// its header patched: such a name is well formed, so the open may take
/// it, but no call may panic on the window's arithmetic.
#[test]
fn extreme_custom_window_indexes_do_not_panic() {
    for target in [i64::MAX, i64::MAX - 1, i64::MIN, i64::MIN + 1] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("crawl.tb");
        let clock = ManualClock::new(day(3));
        let cfg = config(&["4x6h".parse::<Tier>().unwrap()], 50, 0.01);
        let e = create(&dir, cfg, &clock);
        e.insert(b"a").unwrap();
        e.close().unwrap();
        let m = read_manifest(&dir);
        let mut j = m.json.clone();
        let seg = &mut j["segments"][0];
        let old_w = seg["window"].as_i64().unwrap();
        let old_name = seg["files"][0].as_str().unwrap().to_string();
        let new_label = if target < 0 {
            format!("n{}", target.unsigned_abs())
        } else {
            target.to_string()
        };
        let old_label = if old_w < 0 {
            format!("n{}", old_w.unsigned_abs())
        } else {
            old_w.to_string()
        };
        let new_name = old_name.replacen(&format!("-{old_label}-"), &format!("-{new_label}-"), 1);
        assert_ne!(new_name, old_name);
        seg["window"] = Value::from(target);
        seg["files"][0] = Value::from(new_name.clone());
        let (from, to) = (
            dir.join("seg").join(&old_name),
            dir.join("seg").join(&new_name),
        );
        fs::rename(&from, &to).unwrap();
        for at in [0, 2048] {
            rewrite_header(&to, at, |h| {
                h[72..80].copy_from_slice(&target.to_le_bytes())
            });
        }
        write_manifest(&dir, &j);
        // Drop the log: the manifest alone describes the store.
        for l in logs(&dir) {
            fs::remove_file(l).unwrap();
        }
        let what = format!("window {target}");
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let e = match Engine::open_with(&dir, Options::default().clock(clock.clone())) {
                Ok(e) => e,
                Err(err) => {
                    eprintln!("{what}: open: {err}");
                    return;
                }
            };
            let _ = e.insert(b"b");
            let _ = e.contains(b"a");
            let _ = e.stats();
            clock.advance(Duration::from_secs(7 * 86_400));
            let _ = e.insert(b"c");
            let _ = e.contains(b"b");
            let _ = e.stats();
            let _ = e.close();
        }));
        if let Err(p) = r {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{what} panicked: {msg}");
        }
    }
}
