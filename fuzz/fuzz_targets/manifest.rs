//! Arbitrary bytes as a MANIFEST: decoding never panics, and a manifest
//! that decodes round-trips (see `timebloom::fuzzing::manifest_roundtrip`).
//! Each input is decoded as it is and again with its body length and CRC
//! made to match, so that mutations of the JSON reach the parser and the
//! validation behind the checksum.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = timebloom::fuzzing::manifest_roundtrip(data);
    if data.len() >= 20 {
        let mut b = data.to_vec();
        let len = (b.len() - 20) as u32;
        let crc = crc32fast::hash(&b[20..]);
        b[12..16].copy_from_slice(&len.to_le_bytes());
        b[16..20].copy_from_slice(&crc.to_le_bytes());
        let _ = timebloom::fuzzing::manifest_roundtrip(&b);
    }
});
