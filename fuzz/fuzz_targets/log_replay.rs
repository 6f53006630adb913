//! Arbitrary bytes as write-ahead log files (split before every later log
//! magic): scanning and replaying never panic, and what they decode is
//! consistent with the bytes (see `timebloom::fuzzing::wal_log`). Each
//! input is tried as it is and again with the CRCs of every header and
//! record made to match (in a fresh directory), so that mutations reach
//! the LSN sequence, the operations and the order of the files.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../scratch.rs"]
mod scratch;

const MAGIC: &[u8] = b"TBLMWAL\0";

/// Recomputes the checksums of each log file's header and records.
fn fix_checksums(data: &[u8]) -> Vec<u8> {
    let mut b = data.to_vec();
    let mut starts: Vec<usize> = (1..b.len().saturating_sub(7))
        .filter(|&i| &b[i..i + 8] == MAGIC)
        .collect();
    starts.insert(0, 0);
    starts.push(b.len());
    for w in starts.windows(2) {
        let file = &mut b[w[0]..w[1]];
        if file.len() < 32 {
            continue;
        }
        let mut h = crc32fast::Hasher::new();
        h.update(&file[0..12]);
        h.update(&file[16..24]);
        let crc = h.finalize();
        file[12..16].copy_from_slice(&crc.to_le_bytes());
        for r in file[32..].chunks_exact_mut(40) {
            let crc = crc32fast::hash(&r[..36]);
            r[36..].copy_from_slice(&crc.to_le_bytes());
        }
    }
    b
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch::scratch();
    timebloom::fuzzing::wal_log(data, dir.path());
    let fixed = fix_checksums(data);
    if fixed != data {
        let dir = scratch::scratch();
        timebloom::fuzzing::wal_log(&fixed, dir.path());
    }
});
