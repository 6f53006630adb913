//! Arbitrary bytes as a segment's header page (copies at 0 and 2048):
//! decoding never panics, and a header that decodes round-trips (see
//! `timebloom::fuzzing::segment_header_roundtrip`). Each input is decoded
//! as it is and again with the CRCs of both copies made to match (both of
//! a fingerprint table's: bytes 124..128 and 140..144), so that mutations
//! reach the field checks and the choice between the copies.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = timebloom::fuzzing::segment_header_roundtrip(data);
    let mut b = data.to_vec();
    for at in [0, 2048] {
        if let Some(copy) = b.get_mut(at..at + 128) {
            let crc = crc32fast::hash(&copy[..124]);
            copy[124..].copy_from_slice(&crc.to_le_bytes());
        }
        // A fingerprint table's header goes on to byte 144, with a second
        // CRC (of bytes 0..140) at 140.
        if let Some(copy) = b.get_mut(at..at + 144) {
            let crc = crc32fast::hash(&copy[..140]);
            copy[140..].copy_from_slice(&crc.to_le_bytes());
        }
    }
    if b != data {
        let _ = timebloom::fuzzing::segment_header_roundtrip(&b);
    }
});
