//! One xxh3-128 per key; every probe of every segment derives from it.
//!
//! The seed is random per engine and kept in the manifest, so nobody can
//! precompute keys that collide with another engine's keys. Changing anything
//! here changes where keys land on disk: the golden values in the tests below
//! pin it.

use xxhash_rust::xxh3::{xxh3_128_with_seed, xxh3_64_with_seed};

/// The 128-bit hash of one key: `hi` picks the block, `lo` the probes in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct KeyHash {
    pub lo: u64,
    pub hi: u64,
}

/// Hashes a key with the engine's seed.
#[inline]
pub(crate) fn hash_key(seed: u64, key: &[u8]) -> KeyHash {
    let h = xxh3_128_with_seed(key, seed);
    KeyHash {
        lo: h as u64,
        hi: (h >> 64) as u64,
    }
}

/// A fingerprint of the seed, stored in every segment header so that a segment
/// from another engine (another seed) is refused instead of answering wrongly.
pub(crate) fn seed_fingerprint(seed: u64) -> u64 {
    xxh3_64_with_seed(b"timebloom seed fingerprint", seed)
}

/// A fresh random seed from the operating system's randomness
/// (`/dev/urandom`), mixed with the standard library's per-process random
/// state so that a missing device still gives a seed nobody can predict
/// offline.
pub(crate) fn random_seed() -> u64 {
    use std::hash::BuildHasher;
    use std::io::Read;
    let mut buf = [0u8; 8];
    let from_os = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut buf))
        .is_ok();
    let mixed = std::collections::hash_map::RandomState::new().hash_one((
        buf,
        from_os,
        std::time::SystemTime::now(),
        std::process::id(),
    ));
    u64::from_le_bytes(buf) ^ mixed
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Golden values: if these change, every existing segment file gives
    /// false negatives. Never update them to make a test pass.
    #[test]
    fn golden_hash_values() {
        let cases: [(u64, &[u8], u64, u64); 4] = [
            // The published XXH3-128 of the empty input with seed 0.
            (0, b"", 0x6001c324468d497f, 0x99aa06d3014798d8),
            (
                0,
                b"https://example.com/",
                0x9ff1930daa8e5b98,
                0x503c1beec51db020,
            ),
            (
                42,
                b"https://example.com/a?b=c",
                0x7fdaaeda8f9a9a0c,
                0x9274bae3ae6da468,
            ),
            (
                u64::MAX,
                &[0xff; 100],
                0x61ac6f4f4687471e,
                0xacdd586471a905b4,
            ),
        ];
        for (seed, key, lo, hi) in cases {
            let h = hash_key(seed, key);
            println!("({seed}, {key:?}) -> lo {:#018x} hi {:#018x}", h.lo, h.hi);
            assert_eq!((h.lo, h.hi), (lo, hi), "hash of {key:?} with seed {seed}");
        }
        assert_eq!(seed_fingerprint(7), 0x452bfcb54fb743c3);
    }

    #[test]
    fn seeds_differ() {
        assert_ne!(random_seed(), random_seed());
    }
}
