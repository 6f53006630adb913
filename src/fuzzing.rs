//! Entry points for the fuzz targets in `fuzz/` (hidden; not part of the
//! API): they feed arbitrary bytes to the crate-private decoders of the
//! write-ahead log, the manifest, the segment header and the shadow copies
//! of counting bodies and fingerprint tables, and check with
//! `assert!` that what decodes is consistent with the bytes it came from.
//!
//! A decoder must never panic; these functions panic only when a decoder
//! broke one of the properties below, which is the failure the fuzzer
//! reports. On bytes that do not decode they return the decoder's error
//! after checking that it is typed and names the file.
#![doc(hidden)]

use std::fs;
use std::path::Path;

use crate::error::{Error, Result};
use crate::manifest::Manifest;
use crate::segment::{Header, HEADER_COPY, HEADER_LEN};
use crate::wal::{self, Record, FILE_HEADER, RECORD, SHADOW_HEADER, SHADOW_MAGIC};

const LOG_MAGIC: &[u8] = b"TBLMWAL\0";

/// `r` as it is, after checking that an error is typed and names `path`.
fn checked<T>(r: Result<T>, path: &Path) -> Result<T> {
    if let Err(e) = &r {
        assert_typed(e, path);
    }
    r
}

/// A decoder's error for bytes read from `path`: [`Error::Corrupt`] or
/// [`Error::UnsupportedVersion`], naming `path`.
fn assert_typed(e: &Error, path: &Path) {
    match e {
        Error::Corrupt { path: p, .. } | Error::UnsupportedVersion { path: p, .. } => {
            assert_eq!(p, path, "the error names another file: {e}");
        }
        other => panic!("decoding {} gave an untyped error: {other}", path.display()),
    }
}

fn le_u64(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Scans `bytes` as one log file (`wal::scan`) and checks the result: the
/// first LSN is the header's, the records are consecutive from it, each
/// re-encodes to exactly the 40 bytes it was decoded from, records and
/// trailing bytes account for the whole body, and damage "in the middle"
/// means at least two record slots after the last valid record. Returns
/// the number of records.
pub fn wal_scan(bytes: &[u8]) -> Result<usize> {
    let path = Path::new("0000000000000000.log");
    let s = checked(wal::scan(bytes, path), path)?;
    assert!(bytes.len() >= FILE_HEADER, "a short file scanned");
    let body = &bytes[FILE_HEADER..];
    assert_eq!(Some(s.first_lsn), le_u64(bytes, 16));
    assert!(
        s.records.len() <= body.len() / RECORD,
        "more records than bytes"
    );
    assert_eq!(s.records.len() * RECORD + s.trailing, body.len());
    for (i, r) in s.records.iter().enumerate() {
        assert_eq!(r.lsn, s.first_lsn.wrapping_add(i as u64), "LSN gap");
        let enc = r.encode();
        assert_eq!(&enc[..], &body[i * RECORD..(i + 1) * RECORD], "record {i}");
        assert_eq!(Record::decode(&enc), Some(*r));
    }
    // The scan stopped at a record that is short, invalid or out of sequence.
    let rest = &body[s.records.len() * RECORD..];
    if let Some(r) = Record::decode(rest) {
        assert_ne!(
            r.lsn,
            s.first_lsn.wrapping_add(s.records.len() as u64),
            "the scan stopped before a valid next record"
        );
    }
    if s.damaged_middle {
        assert!(rest.len() >= 2 * RECORD, "damage in the middle of a tail");
    }
    Ok(s.records.len())
}

/// Replays the log files in `dir` from LSN `from` (`wal::replay_records`)
/// and checks the result against the files: LSNs consecutive from `from`,
/// every record one that a file's scan holds (so it re-encodes to bytes of
/// that file), never more records than the files' bytes allow. Returns the
/// number of records.
pub fn wal_replay(dir: &Path, from: u64) -> Result<usize> {
    let got = match wal::replay_records(dir, from) {
        Ok(r) => r,
        Err(e) => {
            match &e {
                Error::Corrupt { path, .. } | Error::UnsupportedVersion { path, .. } => {
                    assert_eq!(path.parent(), Some(dir), "the error names no log: {e}");
                }
                Error::Io { .. } => {}
                other => panic!("replay gave an untyped error: {other}"),
            }
            return Err(e);
        }
    };
    let mut held = Vec::new();
    let mut slots = 0;
    for (_, path) in wal::list(dir)? {
        let bytes = fs::read(&path).map_err(|e| Error::io("read log", &path, e))?;
        slots += bytes.len().saturating_sub(FILE_HEADER) / RECORD;
        if let Ok(s) = wal::scan(&bytes, &path) {
            held.extend(s.records);
        }
    }
    assert!(got.len() <= slots, "more records than the files hold");
    for (i, r) in got.iter().enumerate() {
        assert_eq!(Some(r.lsn), from.checked_add(i as u64), "LSN gap in replay");
        assert!(held.contains(r), "replayed a record no file holds: {r:?}");
    }
    Ok(got.len())
}

/// Writes `bytes` into `dir` as log files (split before every later
/// occurrence of the log magic, each piece named after the first LSN in
/// its header), then checks [`wal_scan`] on every piece and [`wal_replay`]
/// from several LSNs. With one piece, the replay must be exactly the
/// records of the scan from `from` on (or nothing when `from` precedes the
/// first LSN), and a file that does not scan must fail the replay too,
/// unless it is all zeros (a header that never reached the disk) or its
/// first LSN is below `from` (a checkpoint's leftover, which the replay
/// leaves out: see `wal::read_logs`).
pub fn wal_log(bytes: &[u8], dir: &Path) {
    let mut starts: Vec<usize> = bytes
        .windows(LOG_MAGIC.len())
        .enumerate()
        .filter(|&(i, w)| i > 0 && w == LOG_MAGIC)
        .map(|(i, _)| i)
        .take(7)
        .collect();
    starts.insert(0, 0);
    starts.push(bytes.len());
    let pieces: Vec<&[u8]> = starts.windows(2).map(|w| &bytes[w[0]..w[1]]).collect();
    for p in &pieces {
        let name = format!("{:016x}.log", le_u64(p, 16).unwrap_or(0));
        if fs::write(dir.join(name), p).is_err() {
            return;
        }
    }
    let scans: Vec<Result<usize>> = pieces.iter().map(|p| wal_scan(p)).collect();
    let first = le_u64(bytes, 16).unwrap_or(0);
    let froms = [
        first,
        first.wrapping_add(1),
        first.wrapping_add(3),
        first.wrapping_sub(1),
        0,
    ];
    for from in froms {
        let replay = wal_replay(dir, from);
        let ([piece], [scan]) = (&pieces[..], &scans[..]) else {
            continue;
        };
        match (scan, &replay) {
            (Ok(n), Ok(got)) => {
                let n = *n as u64;
                // Without wrapping LSNs the replay is the scan's tail.
                if first.checked_add(n).is_some() {
                    let want = if from < first || from > first + n {
                        0
                    } else {
                        n - (from - first)
                    };
                    assert_eq!(*got as u64, want, "replay from {from} of {n} records");
                }
            }
            (Ok(_), Err(e)) => panic!("a log that scans does not replay: {e}"),
            (Err(_), Ok(got)) => {
                // Left out: a file that holds nothing, or a leftover of a
                // checkpoint at `from` (its records all lie below it).
                assert!(
                    piece.iter().all(|&b| b == 0) || first < from,
                    "a log that does not scan replays"
                );
                assert_eq!(*got, 0);
            }
            (Err(_), Err(_)) => {}
        }
    }
}

/// Decodes `bytes` as a MANIFEST; a manifest that decodes re-encodes to
/// bytes that decode to the same manifest, and encoding that again gives
/// the same bytes.
pub fn manifest_roundtrip(bytes: &[u8]) -> Result<()> {
    let path = Path::new("MANIFEST");
    let m = checked(Manifest::decode(bytes, path), path)?;
    let enc = m.encode();
    let again = match Manifest::decode(&enc, path) {
        Ok(m) => m,
        Err(e) => panic!("a re-encoded manifest does not decode: {e}"),
    };
    assert_eq!(again, m, "a manifest changed in a round trip");
    Ok(())
}

/// Decodes `bytes` as one header copy and as a header page. A copy that
/// decodes re-encodes to the bytes it came from (all but the reserved
/// bytes 60..64 and the CRCs; a fingerprint table's up to byte 140), and
/// that encoding decodes to the same header; the page decodes to the valid copy with the newer sequence
/// number (copy A on a tie), and a page rebuilt from the decoded copies
/// decodes to the same header.
pub fn segment_header_roundtrip(bytes: &[u8]) -> Result<()> {
    let path = Path::new("d-20260105-0.seg");
    let copy = |b: &[u8]| -> Option<Header> {
        match Header::decode(b, path) {
            Ok(h) => {
                let enc = h.encode();
                assert_eq!(enc[..60], b[..60], "fields re-encode differently");
                assert_eq!(enc[64..124], b[64..124], "fields re-encode differently");
                if h.kind == crate::filter::Kind::Fingerprint {
                    // A table's retention, last sweep and reserved field.
                    assert_eq!(
                        enc[128..140],
                        b[128..140],
                        "table fields re-encode differently"
                    );
                }
                match Header::decode(&enc, path) {
                    Ok(again) => assert_eq!(again.encode(), enc, "a header changed"),
                    Err(e) => panic!("a re-encoded header does not decode: {e}"),
                }
                Some(h)
            }
            Err(e) => {
                assert_typed(&e, path);
                None
            }
        }
    };
    let a = copy(bytes);
    let b = bytes.get(HEADER_COPY as usize..).and_then(copy);
    let h = checked(Header::decode_page(bytes, path), path);
    assert!(
        h.is_ok() || (a.is_none() && b.is_none()),
        "a valid copy was refused"
    );
    let h = h?;
    let want = match (a, b) {
        (Some(a), Some(b)) => {
            if (b.seq.wrapping_sub(a.seq) as i32) > 0 {
                b
            } else {
                a
            }
        }
        (Some(x), None) | (None, Some(x)) => x,
        (None, None) => panic!("a page with no valid copy decoded"),
    };
    assert_eq!(h.encode(), want.encode(), "the page chose the wrong copy");
    let mut page = vec![0u8; HEADER_COPY as usize + HEADER_LEN];
    if let Some(a) = a {
        page[..HEADER_LEN].copy_from_slice(&a.encode());
    }
    if let Some(b) = b {
        page[HEADER_COPY as usize..].copy_from_slice(&b.encode());
    }
    match Header::decode_page(&page, path) {
        Ok(again) => assert_eq!(again.encode(), h.encode(), "a rebuilt page differs"),
        Err(e) => panic!("a rebuilt page does not decode: {e}"),
    }
    Ok(())
}

/// Writes `bytes` into `dir` as a shadow copy (`wal/<segment>.<LSN>.shadow`)
/// and reads it back (`wal::read_shadow`) with the body length its file
/// size gives (as `wal::verify` does) and with one byte more and one less
/// (a sub-filter whose body has another length, as the recovery would pass;
/// those are always refused). A copy that reads has the magic, its length
/// field is the body's, the body is the file's bytes after the 24-byte
/// header, and the CRC32 matches the body alone (no sweep day) or the
/// nonzero sweep day at bytes 20..24 and the body (that day); written again
/// (`wal::write_shadow`) it gives the same bytes (all but bytes 20..24
/// when no day was read, which the writer zeroes) and reads back the same.
/// Returns the body length and the sweep day.
pub fn shadow_roundtrip(bytes: &[u8], dir: &Path) -> Result<(usize, Option<u32>)> {
    let path = wal::shadow_path(dir, "c-d-20260105-0.seg", 0x3e8);
    fs::write(&path, bytes).map_err(|e| Error::io("write shadow", &path, e))?;
    let body_len = bytes.len().saturating_sub(SHADOW_HEADER);
    for other in [Some(body_len + 1), body_len.checked_sub(1)]
        .into_iter()
        .flatten()
    {
        match wal::read_shadow(&path, other) {
            Ok(_) => panic!("a shadow of {body_len} body bytes read as {other}"),
            Err(e) => assert_typed(&e, &path),
        }
    }
    let (body, swept) = checked(wal::read_shadow(&path, body_len), &path)?;
    assert!(bytes.len() >= SHADOW_HEADER, "a short shadow copy read");
    assert_eq!(
        bytes[..8],
        SHADOW_MAGIC,
        "a shadow copy without the magic read"
    );
    assert_eq!(le_u64(bytes, 8), Some(body_len as u64), "the length field");
    assert_eq!(body, bytes[SHADOW_HEADER..], "the body is not the file's");
    let crc = u32::from_le_bytes(bytes[16..20].try_into().unwrap_or_default());
    let day: [u8; 4] = bytes[20..24].try_into().unwrap_or_default();
    match swept {
        None => assert_eq!(crc, crc32fast::hash(&body), "a CRC of the body alone"),
        Some(d) => {
            assert_ne!(d, 0, "a sweep day of zero read");
            assert_eq!(d.to_le_bytes(), day, "the sweep day is not bytes 20..24");
            let mut h = crc32fast::Hasher::new();
            h.update(&day);
            h.update(&body);
            assert_eq!(crc, h.finalize(), "a CRC of the day and the body");
            assert_ne!(crc, crc32fast::hash(&body), "the body's own CRC gave a day");
        }
    }
    let again = wal::shadow_path(dir, "c-d-20260105-0.seg", 0x3e9);
    wal::write_shadow(&again, &body, swept)?;
    let enc = fs::read(&again).map_err(|e| Error::io("read shadow", &again, e))?;
    assert_eq!(
        enc.len(),
        bytes.len(),
        "a shadow re-encodes to another length"
    );
    assert_eq!(enc[..20], bytes[..20], "a shadow re-encodes differently");
    assert_eq!(
        enc[24..],
        bytes[24..],
        "a shadow's body re-encodes differently"
    );
    if swept.is_some() {
        assert_eq!(
            enc[20..24],
            bytes[20..24],
            "the sweep day re-encodes differently"
        );
    } else {
        assert_eq!(enc[20..24], [0; 4], "no sweep day re-encodes as one");
    }
    match wal::read_shadow(&again, body_len) {
        Ok(r) => assert_eq!(r, (body, swept), "a shadow changed in a round trip"),
        Err(e) => panic!("a re-encoded shadow does not read: {e}"),
    }
    Ok((body_len, swept))
}
