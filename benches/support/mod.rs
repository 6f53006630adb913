//! What the hand-timed benchmarks share: crawl-like keys, a wall clock
//! over threads, and the floors of one-line and two-line lookups.

// Compiled into each benchmark, which uses part of it.
#![allow(dead_code)]

use std::sync::Barrier;
use std::time::Instant;

use xxhash_rust::xxh3::xxh3_128;

/// A crawl-like URL for key `i` of set `set`.
pub fn url(set: u64, i: u64) -> Vec<u8> {
    let host = (i.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 40) % 50_000;
    format!(
        "https://www.site{host}.example/{set}/articles/{i}/index.html?ref={}",
        i % 97
    )
    .into_bytes()
}

/// Keys `from..from + n` of set `set`.
pub fn keys(set: u64, from: u64, n: u64) -> Vec<Vec<u8>> {
    (from..from + n).map(|i| url(set, i)).collect()
}

/// Wall seconds for `threads` threads each running `work(thread)` once,
/// started together; the best of `runs`.
pub fn wall<F: Fn(usize) -> usize + Sync>(threads: usize, runs: usize, work: F) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..runs {
        let barrier = Barrier::new(threads + 1);
        let secs = std::thread::scope(|s| {
            let hs: Vec<_> = (0..threads)
                .map(|t| {
                    let (barrier, work) = (&barrier, &work);
                    s.spawn(move || {
                        barrier.wait();
                        std::hint::black_box(work(t))
                    })
                })
                .collect();
            barrier.wait();
            let start = Instant::now();
            for h in hs {
                h.join().expect("worker");
            }
            start.elapsed().as_secs_f64()
        });
        best = best.min(secs);
    }
    best
}

/// The floor of one lookup: the key's xxh3-128, then one read of a random
/// 64-byte line (a bit of its first word) in an array of the filter's size.
pub struct Floor {
    words: Vec<u64>,
    lines: u64,
}

impl Floor {
    pub fn new(bytes: u64) -> Floor {
        let lines = (bytes / 64).max(1);
        let mut s = 0x1234_5678_u64;
        let words = (0..lines * 8)
            .map(|_| {
                s = s
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                s ^ (s >> 29)
            })
            .collect();
        Floor { words, lines }
    }

    #[inline]
    pub fn lookup(&self, key: &[u8]) -> bool {
        let h = xxh3_128(key);
        let line = (((h >> 64) as u64 as u128 * self.lines as u128) >> 64) as usize;
        self.words[line * 8] & (1 << (h as u64 & 63)) != 0
    }
}

impl Floor {
    /// The floor of a two-bucket lookup: the key's xxh3-128, then two
    /// random lines (the fingerprint table's two candidate buckets).
    #[inline]
    pub fn lookup2(&self, key: &[u8]) -> bool {
        let h = xxh3_128(key);
        let a = (((h >> 64) as u64 as u128 * self.lines as u128) >> 64) as usize;
        let b = (((h as u64) as u128 * self.lines as u128) >> 64) as usize;
        let m = 1u64 << (h as u64 & 63);
        (self.words[a * 8] | self.words[b * 8]) & m != 0
    }
}

impl Floor {
    /// The latency floor: [`Floor::lookup`] over `keys`, each line's
    /// address depending on the previous answer, so no two reads overlap.
    /// The throughput floor lets the processor start the next keys' reads
    /// while one waits for memory (several in flight); a lookup whose
    /// reads overlap nothing can take no less than this.
    pub fn chained<K: AsRef<[u8]>>(&self, keys: &[K]) -> usize {
        self.chain(keys, |h, prev| {
            let line = self.line(h >> 64, prev);
            self.words[line * 8] & (1 << (h as u64 & 63)) != 0
        })
    }

    /// [`Floor::chained`] for [`Floor::lookup2`]: the two lines of one key
    /// are read together, each key's after the previous key's.
    pub fn chained2<K: AsRef<[u8]>>(&self, keys: &[K]) -> usize {
        self.chain(keys, |h, prev| {
            let (a, b) = (self.line(h >> 64, prev), self.line(h, prev));
            (self.words[a * 8] | self.words[b * 8]) & (1 << (h as u64 & 63)) != 0
        })
    }

    fn chain<K: AsRef<[u8]>>(&self, keys: &[K], probe: impl Fn(u128, bool) -> bool) -> usize {
        let mut prev = false;
        let mut hits = 0;
        for k in keys {
            prev = probe(xxh3_128(k.as_ref()), prev);
            hits += usize::from(prev);
        }
        hits
    }

    /// The line of hash bits `x` (their low 64), moved by the previous
    /// answer: arithmetic, not a branch, so the address waits for it.
    #[inline]
    fn line(&self, x: u128, prev: bool) -> usize {
        let line = ((x as u64 as u128 * self.lines as u128) >> 64) as usize;
        line.saturating_sub(usize::from(prev))
    }
}

/// `TIMEBLOOM_BENCH_N` (a count, `1e7` allowed), or `default`; a value
/// that is not a number stops the bench rather than being ignored.
pub fn bench_n(default: u64) -> u64 {
    env_count("TIMEBLOOM_BENCH_N", default)
}

/// The count in environment variable `name` (`1e7` allowed), or `default`.
pub fn env_count(name: &str, default: u64) -> u64 {
    std::env::var(name).map_or(default, |s| {
        s.trim()
            .parse::<f64>()
            .unwrap_or_else(|_| panic!("{name}: a count, not `{s}`")) as u64
    })
}
