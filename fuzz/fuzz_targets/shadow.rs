//! Arbitrary bytes as a shadow copy (the body of a counting sub-filter or
//! fingerprint table that a checkpoint keeps, read back by a recovery after
//! a power loss): reading never panics, an error is typed and names the
//! file, and a copy that reads is consistent with its bytes and round-trips
//! (see `timebloom::fuzzing::shadow_roundtrip`). Each input is read as it
//! is and again with its length field made to match and its CRC32
//! recomputed as the writer does (over the sweep day at bytes 20..24 when
//! it is not zero, then the body), and, when that day is not zero, once
//! more with a CRC32 of the body alone (a copy written before the day was
//! kept), so that mutations reach the checks behind the checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../scratch.rs"]
mod scratch;

const HEADER: usize = 24;

/// `data` with its length field set to its body's length and its CRC32
/// over the day's bytes (when `with_day`) and the body.
fn fixed(data: &[u8], with_day: bool) -> Vec<u8> {
    let mut b = data.to_vec();
    let len = (b.len() - HEADER) as u64;
    b[8..16].copy_from_slice(&len.to_le_bytes());
    let mut h = crc32fast::Hasher::new();
    if with_day {
        h.update(&b[20..24]);
    }
    h.update(&b[HEADER..]);
    let crc = h.finalize();
    b[16..20].copy_from_slice(&crc.to_le_bytes());
    b
}

fuzz_target!(|data: &[u8]| {
    let dir = scratch::scratch();
    let _ = timebloom::fuzzing::shadow_roundtrip(data, dir.path());
    if data.len() >= HEADER {
        let has_day = data[20..24] != [0; 4];
        let mut tried = vec![data.to_vec()];
        for with_day in [has_day, false] {
            let b = fixed(data, with_day);
            if !tried.contains(&b) {
                let got = timebloom::fuzzing::shadow_roundtrip(&b, dir.path());
                // With the magic in place, a copy whose length and CRC32
                // match reads, with its day when the CRC32 covers one
                // (unless the day is the one four bytes that leave the
                // CRC32 of what follows as it was: then the body's own).
                if b[..8] == *b"TBLMSHDW" {
                    let day = u32::from_le_bytes(b[20..24].try_into().unwrap());
                    let own = crc32fast::hash(&b[HEADER..]).to_le_bytes() == b[16..20];
                    let want = (with_day && !own).then_some(day);
                    match got {
                        Ok((_, swept)) => assert_eq!(swept, want, "the sweep day read"),
                        Err(e) => panic!("a consistent shadow copy was refused: {e}"),
                    }
                }
                tried.push(b);
            }
        }
    }
});
