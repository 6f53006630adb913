//! Side-by-side benchmarks of timebloom, its peers and the floor (issue #4).
//!
//! One binary, one run: every ratio in `docs/benchmarks.md` compares numbers
//! measured here, one after the other, on the same keys. Run it with
//!
//! ```text
//! TIMEBLOOM_BENCH_SIZES=1e6,1e7 cargo bench --bench filters
//! python3 scripts/report.py
//! ```
//!
//! Environment (all optional):
//! * `TIMEBLOOM_BENCH_SIZES`: item counts, default `1e6`.
//! * `TIMEBLOOM_BENCH_FPRS`: configured false-positive rates, default `0.01,0.001`.
//! * `TIMEBLOOM_BENCH_PARTS`: any of `single,windowed,segments,load,open`
//!   (default all of them).
//! * `TIMEBLOOM_BENCH_SECS`: criterion measurement time per benchmark, default 3.
//! * `TIMEBLOOM_BENCH_OUT`: where the measured rates, sizes and open times go
//!   as JSON (default `target/timebloom-bench/results.json`).
//! * `TIMEBLOOM_BENCH_TIMINGS`: `off` measures the rates, sizes and open
//!   times alone (criterion runs nothing), e.g.
//!   `TIMEBLOOM_BENCH_TIMINGS=off TIMEBLOOM_BENCH_PARTS=single,load`.
//! * `TIMEBLOOM_BENCH_SEED`: the base of the seeds given to the peers that
//!   take one (bloomfilter, fastbloom), a number or `random`; default a
//!   fixed base, so that runs repeat. Every seed is made of distinct bytes.
//!
//! What is measured without criterion (printed as tables and written to the
//! JSON file): false-positive rates over a disjoint set of negatives, bits per
//! item, false-positive rate against load, and the time to open an engine of
//! about 4 GiB. Everything timed per key goes through criterion: each
//! iteration is one chunk of [`CHUNK`] keys (throughput in elements), taken
//! in turn from a key set much larger than any cache line pattern could hide.
//!
//! Without `--bench` (as under `cargo test --benches`) the binary runs a tiny
//! smoke version of everything (criterion's test mode), so it stays cheap.

use std::alloc::{GlobalAlloc, Layout, System};
use std::collections::HashSet;
use std::hash::{BuildHasher, BuildHasherDefault, Hasher};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use criterion::measurement::WallTime;
use criterion::{BenchmarkFilter, BenchmarkGroup, BenchmarkId, Criterion, Throughput};
use serde_json::{json, Value};
use timebloom::{Config, Engine, ManualClock, Options, Stats, SyncPolicy, Tier};
use xxhash_rust::xxh3::{xxh3_128, xxh3_64};

// ---- memory accounting ----------------------------------------------------------

/// The system allocator, counting live bytes, so that the peers' memory is
/// measured rather than computed from their formulas.
struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: every call is forwarded unchanged to the system allocator; the
// counter is only bookkeeping.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer and layout.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new, Ordering::Relaxed);
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        // SAFETY: forwarded with the caller's pointer, layout and size.
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live_bytes() -> usize {
    LIVE.load(Ordering::Relaxed)
}

// ---- keys -------------------------------------------------------------------------

/// Keys per criterion iteration (and per batch call).
const CHUNK: usize = 1024;
/// Ids of negative keys start here; positive ids stay far below.
const NEG_BASE: u64 = 1 << 48;
/// Negatives probed for a one-window false-positive rate (at least: n of
/// them when n is larger) and for the default tiers' (at most: 4n when n is
/// smaller). The segment and load sweeps probe their own counts.
const MIN_NEGATIVES: usize = 4_000_000;

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

const WORDS: [&str; 24] = [
    "news", "shop", "blog", "wiki", "docs", "forum", "media", "store", "video", "travel", "sports",
    "cloud", "music", "games", "photos", "health", "market", "press", "daily", "local", "books",
    "recipes", "jobs", "auto",
];
const TLDS: [&str; 12] = [
    "com", "org", "net", "io", "de", "co.uk", "fr", "jp", "com.br", "nl", "es", "info",
];
const SECTIONS: [&str; 16] = [
    "article", "category", "product", "tag", "page", "search", "user", "2025", "2026", "item",
    "view", "en", "archive", "static", "post", "topic",
];
const SLUG: &[u8; 37] = b"abcdefghijklmnopqrstuvwxyz0123456789-";

fn push_num(out: &mut Vec<u8>, mut v: u64, radix: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b"0123456789abcdef"[(v % radix) as usize];
        v /= radix;
        if v == 0 {
            break;
        }
    }
    out.extend_from_slice(&tmp[i..]);
}

/// Appends the crawl-like URL of `id`: 60 to 120 bytes, one of 300,000
/// hosts, a path of sections and slugs, and `?id=<hex id>` last. Nothing
/// before the last `?` contains one, so different ids give different URLs.
fn push_url(id: u64, out: &mut Vec<u8>) {
    let mut s = id.wrapping_mul(0xd6e8_feb8_6659_fd93) ^ 0x5eed;
    let start = out.len();
    let target = 60 + (splitmix(&mut s) % 61) as usize;
    out.extend_from_slice(b"https://");
    let r = splitmix(&mut s);
    if r & 3 != 0 {
        out.extend_from_slice(b"www.");
    }
    let host = (r >> 8) % 300_000;
    out.extend_from_slice(WORDS[(host % 24) as usize].as_bytes());
    push_num(out, host / 24, 10);
    out.push(b'.');
    out.extend_from_slice(TLDS[((r >> 40) % 12) as usize].as_bytes());
    let mut suffix = Vec::with_capacity(20);
    suffix.extend_from_slice(b"?id=");
    push_num(&mut suffix, id, 16);
    let end = target.max(out.len() - start + 1 + suffix.len());
    out.push(b'/');
    while out.len() - start + suffix.len() < end {
        let room = end - (out.len() - start + suffix.len());
        let r = splitmix(&mut s);
        if r & 1 == 0 {
            let w = SECTIONS[((r >> 8) % 16) as usize].as_bytes();
            out.extend_from_slice(&w[..w.len().min(room)]);
        } else {
            let len = (3 + (r >> 8) % 12) as usize;
            let mut bits = r >> 16;
            for _ in 0..len.min(room) {
                out.push(SLUG[(bits % 37) as usize]);
                bits = bits / 37 + 0x9e37;
            }
        }
        if out.len() - start + suffix.len() < end {
            out.push(b'/');
        }
    }
    out.extend_from_slice(&suffix);
}

/// Keys stored back to back.
struct Keys {
    data: Vec<u8>,
    ends: Vec<usize>,
}

impl Keys {
    /// The URLs of `ids(0..count)`, generated on two threads.
    fn generate(count: usize, ids: impl Fn(usize) -> u64 + Sync) -> Keys {
        let half = count / 2;
        let part = |from: usize, to: usize| {
            let mut data = Vec::with_capacity((to - from) * 92);
            let mut ends = Vec::with_capacity(to - from);
            for i in from..to {
                push_url(ids(i), &mut data);
                ends.push(data.len());
            }
            (data, ends)
        };
        let ((mut data, mut ends), (d2, e2)) = std::thread::scope(|s| {
            let h = s.spawn(|| part(half, count));
            (part(0, half), h.join().expect("key generator"))
        });
        let base = data.len();
        data.extend_from_slice(&d2);
        ends.extend(e2.into_iter().map(|e| e + base));
        Keys { data, ends }
    }

    /// Positive keys: ids `from..from + count`.
    fn range(from: u64, count: usize) -> Keys {
        Keys::generate(count, |i| from + i as u64)
    }

    /// Negative keys, disjoint from every positive id.
    fn negatives(count: usize) -> Keys {
        Keys::generate(count, |i| NEG_BASE + i as u64)
    }

    /// Keys `from..to`.
    fn slice(&self, from: usize, to: usize) -> Vec<&[u8]> {
        (from..to)
            .map(|i| {
                let start = if i == 0 { 0 } else { self.ends[i - 1] };
                &self.data[start..self.ends[i]]
            })
            .collect()
    }

    fn refs(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&e| {
                let k = &self.data[start..e];
                start = e;
                k
            })
            .collect()
    }
}

// ---- configuration ------------------------------------------------------------------

struct Setup {
    bench: bool,
    sizes: Vec<usize>,
    fprs: Vec<f64>,
    parts: Vec<String>,
    out: PathBuf,
    seeds: PeerSeeds,
    /// False with `TIMEBLOOM_BENCH_TIMINGS=off`: only the rates, sizes and
    /// open times are measured (criterion runs nothing), which no other
    /// load on the machine can change.
    timings: bool,
}

impl Setup {
    fn from_env() -> Setup {
        let bench = std::env::args().any(|a| a == "--bench");
        let list = |var: &str, default: &str| -> Vec<String> {
            std::env::var(var)
                .unwrap_or_else(|_| default.to_string())
                .split(',')
                .map(|s| s.trim().to_string())
                .filter(|s| !s.is_empty())
                .collect()
        };
        let sizes = if bench {
            list("TIMEBLOOM_BENCH_SIZES", "1e6")
                .iter()
                .map(|s| s.parse::<f64>().expect("TIMEBLOOM_BENCH_SIZES: numbers") as usize)
                .collect()
        } else {
            vec![20_000]
        };
        let fprs = list("TIMEBLOOM_BENCH_FPRS", "0.01,0.001")
            .iter()
            .map(|s| s.parse::<f64>().expect("TIMEBLOOM_BENCH_FPRS: numbers"))
            .collect();
        let parts = list(
            "TIMEBLOOM_BENCH_PARTS",
            "single,windowed,segments,load,open",
        );
        // A part this bench does not have (`threads` is read_path's) would
        // otherwise run nothing and still overwrite the results file.
        for p in &parts {
            assert!(
                PARTS.contains(&p.as_str()),
                "TIMEBLOOM_BENCH_PARTS: unknown part `{p}` (this bench has {})",
                PARTS.join(", ")
            );
        }
        let target = std::env::var("CARGO_TARGET_DIR")
            .map(PathBuf::from)
            .unwrap_or_else(|_| Path::new(env!("CARGO_MANIFEST_DIR")).join("target"));
        let out = std::env::var("TIMEBLOOM_BENCH_OUT")
            .map(PathBuf::from)
            .unwrap_or_else(|_| target.join("timebloom-bench").join("results.json"));
        let base = match std::env::var("TIMEBLOOM_BENCH_SEED") {
            Err(_) => SEED_BASE,
            Ok(s) if s == "random" => std::hash::RandomState::new().build_hasher().finish(),
            Ok(s) => match s.strip_prefix("0x") {
                Some(hex) => u64::from_str_radix(hex, 16),
                None => s.parse(),
            }
            .expect("TIMEBLOOM_BENCH_SEED: a number or `random`"),
        };
        let timings = std::env::var("TIMEBLOOM_BENCH_TIMINGS").map_or(true, |v| v != "off");
        Setup {
            bench,
            sizes,
            fprs,
            parts,
            out,
            seeds: PeerSeeds::new(base),
            timings,
        }
    }

    fn part(&self, name: &str) -> bool {
        debug_assert!(PARTS.contains(&name));
        self.parts.iter().any(|p| p == name)
    }
}

/// The parts `TIMEBLOOM_BENCH_PARTS` can name.
const PARTS: [&str; 5] = ["single", "windowed", "segments", "load", "open"];

fn label_n(n: usize) -> String {
    let e = (n as f64).log10();
    if n >= 1000 && (e - e.round()).abs() < 1e-9 {
        format!("1e{}", e.round() as i32)
    } else {
        n.to_string()
    }
}

// ---- time -----------------------------------------------------------------------------

/// 2025-01-01T00:00:00Z.
const Y2025: u64 = 1_735_689_600;
const DAY_SECS: u64 = 86_400;

fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Noon of day `d` of 2025 (0 = January 1st).
fn noon(d: u64) -> SystemTime {
    at(Y2025 + d * DAY_SECS + 12 * 3600)
}

// ---- the floor ------------------------------------------------------------------------

/// One array of 64-byte lines, the size of one filter segment.
struct Lines {
    words: Vec<u64>,
    /// First word of line 0 (64-byte aligned).
    off: usize,
    lines: usize,
}

impl Lines {
    /// Zeroed and untouched: `vec![0u64; _]` comes from `calloc`, so pages
    /// are mapped on first touch, as in a freshly created filter.
    fn zeroed(lines: u64) -> Lines {
        let lines = lines.max(1) as usize;
        let words = vec![0u64; lines * 8 + 8];
        let off = (words.as_ptr() as usize).wrapping_neg() % 64 / 8;
        Lines { words, off, lines }
    }

    #[inline]
    fn word(&self, h: u128) -> (usize, u64) {
        let (i, bit) = key_word(h, self.lines);
        (self.off + i, bit)
    }
}

/// The word (counted from the first line) and bit a key's hash picks in an
/// array of `lines` 64-byte lines: a line by multiply-shift of the high
/// half, a word and a bit in it from the low half.
#[inline]
fn key_word(h: u128, lines: usize) -> (usize, u64) {
    let (lo, hi) = (h as u64, (h >> 64) as u64);
    let line = ((u128::from(hi) * lines as u128) >> 64) as usize;
    (line * 8 + (lo & 7) as usize, 1u64 << (lo >> 58))
}

/// The floor: one xxh3-128 per key and one random 64-byte touch per
/// segment, in arrays the size of the filter's segments.
struct Floor {
    segs: Vec<Lines>,
}

impl Floor {
    /// Arrays of `blocks[i]` lines, filled with random bits (every page real).
    fn new(blocks: &[u64]) -> Floor {
        let mut f = Floor::zeroed(blocks);
        let mut s = 1u64;
        for seg in &mut f.segs {
            for w in &mut seg.words {
                *w = splitmix(&mut s) & splitmix(&mut s);
            }
        }
        f
    }

    /// Arrays of `blocks[i]` zeroed, untouched lines (for inserts).
    fn zeroed(blocks: &[u64]) -> Floor {
        Floor {
            segs: blocks.iter().map(|&n| Lines::zeroed(n)).collect(),
        }
    }

    /// Reads one line in each of the first `k` arrays; no early exit.
    #[inline]
    fn lookup(&self, key: &[u8], k: usize) -> bool {
        let h = xxh3_128(key);
        let mut all = true;
        for seg in &self.segs[..k] {
            let (i, bit) = seg.word(h);
            all &= seg.words[i] & bit != 0;
        }
        all
    }

    /// What a batch call can do: hash a group of 16 keys and prefetch
    /// their lines in the first `k` arrays, then test them.
    #[inline]
    fn lookup_batch(&self, keys: &[&[u8]], k: usize) -> usize {
        let mut hits = 0;
        for group in keys.chunks(16) {
            let mut hs = [0u128; 16];
            for (h, key) in hs.iter_mut().zip(group) {
                *h = xxh3_128(key);
                for seg in &self.segs[..k] {
                    prefetch(&seg.words[seg.word(*h).0]);
                }
            }
            for h in &hs[..group.len()] {
                let mut all = true;
                for seg in &self.segs[..k] {
                    let (i, bit) = seg.word(*h);
                    all &= seg.words[i] & bit != 0;
                }
                hits += usize::from(all);
            }
        }
        hits
    }

    /// The floor with the cheaper 64-bit xxh3 (what the peers fed with
    /// xxh3 use): one line of the first array.
    #[inline]
    fn lookup64(&self, key: &[u8]) -> bool {
        let h = u128::from(xxh3_64(key));
        let seg = &self.segs[0];
        let (i, bit) = seg.word(h | h << 64);
        seg.words[i] & bit != 0
    }

    /// Reads one line in each of the first `read` arrays and sets a bit in
    /// each of `write`.
    #[inline]
    fn insert(&mut self, key: &[u8], read: usize, write: &[usize]) -> bool {
        let h = xxh3_128(key);
        let mut all = true;
        for seg in &self.segs[..read] {
            let (i, bit) = seg.word(h);
            all &= seg.words[i] & bit != 0;
        }
        for &s in write {
            let seg = &mut self.segs[s];
            let (i, bit) = seg.word(h);
            seg.words[i] |= bit;
        }
        all
    }
}

/// The floor of an insert made to the engine's contract: it may run
/// beside other writers and answers whether the key was new. One
/// xxh3-128, one random line, the key's word read and, when its bit is
/// clear, a `fetch_or` that says whether this call set it (a locked
/// instruction on x86, where [`Floor::insert`] has a plain store). The
/// array is written at creation, so the timing takes no page faults (the
/// plain floor's does): a bound that favours this floor.
struct AtomicFloor {
    words: Vec<AtomicU64>,
    lines: usize,
}

impl AtomicFloor {
    fn new(lines: u64) -> AtomicFloor {
        let lines = lines.max(1) as usize;
        AtomicFloor {
            words: (0..lines * 8).map(|_| AtomicU64::new(0)).collect(),
            lines,
        }
    }

    #[inline]
    fn insert(&self, key: &[u8]) -> bool {
        let (i, bit) = key_word(xxh3_128(key), self.lines);
        let word = &self.words[i];
        word.load(Ordering::Relaxed) & bit == 0 && word.fetch_or(bit, Ordering::Relaxed) & bit == 0
    }
}

#[inline(always)]
fn prefetch(w: &u64) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is a hint that never faults; the pointer comes
    // from a reference. SSE is in the x86_64 baseline.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(
            (w as *const u64).cast::<i8>(),
        )
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = w;
}

// ---- peers -------------------------------------------------------------------------

/// A `HashSet<u128>` of xxh3-128 hashes needs no second hash: the table
/// folds the value it is given.
#[derive(Default)]
struct Fold(u64);

impl Hasher for Fold {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }
    fn write_u128(&mut self, v: u128) {
        self.0 = (v as u64) ^ ((v >> 64) as u64);
    }
}

type Exact = HashSet<u128, BuildHasherDefault<Fold>>;

/// The false-positive rate of a split-block filter (Parquet SBBF: 256-bit
/// buckets of eight 32-bit words, one bit per word) at `bits_per_key`,
/// with Poisson bucket loads.
fn sbbf_model_fpr(bits_per_key: f64) -> f64 {
    let lambda = 256.0 / bits_per_key;
    let mut p = (-lambda).exp();
    let mut sum = 0.0;
    for i in 0..2000 {
        if i > 0 {
            p *= lambda / f64::from(i);
        }
        let f = (1.0 - (31.0f64 / 32.0).powi(i)).powi(8);
        sum += p * f;
        if f64::from(i) > lambda * 4.0 + 100.0 {
            break;
        }
    }
    sum
}

/// The fewest whole bits per key at which the split-block model meets `p`
/// (sbbf-rs-safe takes whole bits per key).
fn sbbf_bits_per_key(p: f64) -> usize {
    (1..64)
        .find(|&b| sbbf_model_fpr(b as f64) <= p)
        .unwrap_or(64)
}

// ---- peer seeds ------------------------------------------------------------------

/// The seed base unless `TIMEBLOOM_BENCH_SEED` gives another, so that a
/// run repeats false positive for false positive.
const SEED_BASE: u64 = 0x2f6b_c3a1_94d7_5e08;

/// `N` pairwise distinct bytes drawn from `base`: the first `N` of the 256
/// byte values after a Fisher-Yates shuffle driven by splitmix.
fn distinct_bytes<const N: usize>(base: u64) -> [u8; N] {
    const { assert!(N <= 256) };
    let mut all: [u8; 256] = std::array::from_fn(|i| i as u8);
    let mut s = base;
    for i in 0..N {
        let j = i + (splitmix(&mut s) % (256 - i) as u64) as usize;
        all.swap(i, j);
    }
    std::array::from_fn(|i| all[i])
}

/// The seeds of the peers that take one, given as their users would give
/// them: bytes drawn at random (`TIMEBLOOM_BENCH_SEED=random`) or, by
/// default, fixed bytes that are all distinct. The other peers take none:
/// growable-bloom-filter hashes with xxh3-64 under its fixed default seed
/// (its output is meant to be the same on every platform), and sbbf-rs-safe
/// and the xxh3 fastbloom are given xxh3-64 hashes.
struct PeerSeeds {
    base: u64,
    /// bloomfilter 3's `new_for_fp_rate_with_seed`: bytes 0..16 and 16..32
    /// are the keys of its two SipHash-1-3 hashers, the two hashes of its
    /// double hashing. Equal halves make the two hashes equal, and every
    /// probe a multiple of one hash (the first report's seed `[7; 32]` did
    /// that, and measured 3.7% at a configured 1%).
    bloomfilter: [u8; 32],
    /// fastbloom 0.17's `seed(&u128)`: the key of its SipHash-1-3 (its
    /// default, `with_false_pos`, draws a random key for every filter).
    fastbloom: u128,
}

impl PeerSeeds {
    fn new(base: u64) -> PeerSeeds {
        let seeds = PeerSeeds {
            base,
            bloomfilter: distinct_bytes(base),
            fastbloom: u128::from_be_bytes(distinct_bytes(!base)),
        };
        // The keys bloomfilter 3 made of the seed, read back from the crate.
        let keys = bloomfilter::Bloom::<[u8]>::new_with_seed(1, 1, &seeds.bloomfilter)
            .expect("bloomfilter")
            .seed();
        assert_ne!(
            keys[..16],
            keys[16..],
            "bloomfilter's two SipHash keys must differ"
        );
        seeds
    }

    /// A bloomfilter 3 filter for `n` items at `p`, seeded.
    fn bloomfilter(&self, n: usize, p: f64) -> bloomfilter::Bloom<[u8]> {
        bloomfilter::Bloom::new_for_fp_rate_with_seed(n, p, &self.bloomfilter).expect("bloomfilter")
    }

    /// A fastbloom 0.17 filter for `n` items at `p`, its SipHash-1-3 seeded.
    fn fastbloom(&self, n: usize, p: f64) -> fastbloom::BloomFilter {
        fastbloom::BloomFilter::with_false_pos(p)
            .seed(&self.fastbloom)
            .expected_items(n)
    }

    fn json(&self) -> Value {
        let hex: String = self
            .bloomfilter
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        json!({
            "base": format!("{:#018x}", self.base),
            "bloomfilter": hex,
            "fastbloom": format!("{:#034x}", self.fastbloom),
        })
    }
}

// ---- timebloom helpers ------------------------------------------------------------

fn single_config(n: usize, fpr: f64) -> Config {
    Config {
        tiers: vec![Tier::daily(1)],
        expected_items_per_day: n as u64,
        fpr,
        ..Config::default()
    }
}

fn create(dir: &Path, config: Config, clock: &ManualClock) -> Engine {
    Engine::create_with(dir, config, Options::default().clock(clock.clone())).expect("create")
}

fn fill(engine: &Engine, keys: &[&[u8]]) {
    for chunk in keys.chunks(4096) {
        engine.insert_batch(chunk).expect("insert_batch");
    }
}

/// Cells of every segment, oldest first per tier.
fn segment_cells(stats: &Stats) -> Vec<(String, String, u64, u64, usize, f64)> {
    stats
        .tiers
        .iter()
        .flat_map(|t| {
            t.segments.iter().map(move |s| {
                (
                    t.tier.clone(),
                    s.window.clone(),
                    s.cells,
                    s.bytes,
                    s.subfilters,
                    s.estimated_fpr,
                )
            })
        })
        .collect()
}

/// Cells of the engine (every cell of every segment, set or not: its bit
/// array's size, not its fill), and file bytes.
fn engine_size(stats: &Stats) -> (u64, u64) {
    let cells = segment_cells(stats).iter().map(|s| s.2).sum();
    (cells, stats.bytes)
}

// ---- measuring ----------------------------------------------------------------------

/// False positives counted among a set of negatives.
#[derive(Clone, Copy)]
struct Rate {
    fp: usize,
    n: usize,
}

impl Rate {
    fn value(self) -> f64 {
        self.fp as f64 / self.n as f64
    }

    /// The 95% Wilson score interval of the rate.
    fn interval95(self) -> (f64, f64) {
        let (n, z) = (self.n as f64, 1.96f64);
        let p = self.value();
        let centre = p + z * z / (2.0 * n);
        let half = z * (p * (1.0 - p) / n + z * z / (4.0 * n * n)).sqrt();
        let scale = 1.0 + z * z / n;
        (((centre - half) / scale).max(0.0), (centre + half) / scale)
    }

    /// Missed the configured rate `p`: the whole 95% interval lies above
    /// it. A rate whose interval contains `p` is not told apart from `p`.
    fn missed(self, p: f64) -> bool {
        self.interval95().0 > p
    }

    /// `rate [lower, upper]`.
    fn show(self) -> String {
        let (lo, hi) = self.interval95();
        format!("{:.3e} [{lo:.3e}, {hi:.3e}]", self.value())
    }

    fn json(self) -> Value {
        let (lo, hi) = self.interval95();
        json!({
            "false_positives": self.fp, "negatives": self.n,
            "measured_fpr": self.value(), "lower95": lo, "upper95": hi,
        })
    }
}

/// False positives among `neg`.
fn false_positives(neg: &[&[u8]], mut hit: impl FnMut(&[u8]) -> bool) -> Rate {
    Rate {
        fp: neg.iter().filter(|k| hit(k)).count(),
        n: neg.len(),
    }
}

/// Adds the fields of the object `extra` to the object `to`.
fn merge(to: &mut Value, extra: Value) {
    if let (Value::Object(to), Value::Object(extra)) = (to, extra) {
        to.extend(extra);
    }
}

/// One chunk of keys copied into a small buffer just before it is timed: a
/// pipeline hashes a key right after parsing it, while it is in cache, so
/// streaming the key set from memory is not part of any per-key cost.
#[derive(Default)]
struct Hot {
    buf: Vec<u8>,
    ends: Vec<usize>,
}

impl Hot {
    fn load(&mut self, keys: &[&[u8]]) -> Vec<&[u8]> {
        self.buf.clear();
        self.ends.clear();
        for k in keys {
            self.buf.extend_from_slice(k);
            self.ends.push(self.buf.len());
        }
        let mut start = 0;
        self.ends
            .iter()
            .map(|&e| {
                let k = &self.buf[start..e];
                start = e;
                k
            })
            .collect()
    }
}

/// A lookup benchmark: each iteration is one chunk of keys, taken in turn.
fn bench_lookup<F>(g: &mut BenchmarkGroup<'_, WallTime>, id: BenchmarkId, keys: &[&[u8]], mut f: F)
where
    F: FnMut(&[&[u8]]) -> usize,
{
    assert!(keys.len() >= CHUNK);
    let mut cur = 0;
    let mut hot = Hot::default();
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut hits = 0;
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                if cur + CHUNK > keys.len() {
                    cur = 0;
                }
                let chunk = hot.load(&keys[cur..cur + CHUNK]);
                let start = Instant::now();
                hits += f(&chunk);
                total += start.elapsed();
                cur += CHUNK;
            }
            black_box(hits);
            total
        })
    });
}

/// An insert benchmark: keys in turn into a filter made by `make`; when the
/// keys run out, a fresh filter (made and dropped outside the timing), so
/// every insert is of a new key into a filter between empty and the load
/// the keys reach.
fn bench_insert<T, M, F>(
    g: &mut BenchmarkGroup<'_, WallTime>,
    id: BenchmarkId,
    keys: &[&[u8]],
    mut make: M,
    mut f: F,
) where
    M: FnMut() -> T,
    F: FnMut(&mut T, &[&[u8]]) -> usize,
{
    assert!(keys.len() >= CHUNK);
    let mut filter: Option<T> = None;
    let mut cur = usize::MAX;
    let mut hot = Hot::default();
    g.bench_function(id, |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut acc = 0;
            for _ in 0..iters {
                if cur.saturating_add(CHUNK) > keys.len() {
                    drop(filter.take());
                    filter = Some(make());
                    cur = 0;
                }
                let Some(fl) = filter.as_mut() else {
                    unreachable!()
                };
                let chunk = hot.load(&keys[cur..cur + CHUNK]);
                let start = Instant::now();
                acc += f(fl, &chunk);
                total += start.elapsed();
                cur += CHUNK;
            }
            black_box(acc);
            total
        })
    });
    drop(filter);
}

/// Keys inserted for a planned load of `n`: exactly `n`. (The engine grows
/// a chain at the fill expected after `n (1 + 1/256)` keys, so a segment
/// given exactly its plan keeps one sub-filter; before that margin existed
/// the runs used 99.5% of `n` to avoid a coin flip between one sub-filter
/// and two.) Every filter gets the same keys.
fn filled(n: usize) -> usize {
    n
}

fn count(v: Vec<bool>) -> usize {
    v.into_iter().filter(|b| *b).count()
}

// ---- part 1: one window against the peers ---------------------------------------------

struct Row {
    name: &'static str,
    bits: f64,
    fp: Rate,
    note: String,
}

fn single_window(
    c: &mut Criterion,
    setup: &Setup,
    n: usize,
    p: f64,
    pos: &[&[u8]],
    neg: &[&[u8]],
    out: &mut Vec<Value>,
) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let clock = ManualClock::new(noon(0));
    let mut rows: Vec<Row> = Vec::new();
    let nf = n as f64;
    let pos = &pos[..filled(n)];

    // timebloom, one `1d` window.
    let tb = create(&tmp.path().join("tb"), single_config(n, p), &clock);
    fill(&tb, pos);
    let missed = pos.iter().filter(|k| !tb.contains(k).unwrap()).count();
    assert_eq!(missed, 0, "timebloom lost inserted keys");
    let st = tb.stats().expect("stats");
    let (cells, file_bytes) = engine_size(&st);
    let segs = segment_cells(&st);
    rows.push(Row {
        name: "timebloom",
        bits: cells as f64 / nf,
        fp: false_positives(neg, |k| tb.contains(k).unwrap()),
        note: format!(
            "{} sub-filter(s), file {:.2} bits/item, model fpr {:.2e}",
            segs[0].4,
            file_bytes as f64 * 8.0 / nf,
            segs[0].5
        ),
    });
    // The same engine through the system clock (what the CLI uses).
    let tb_sys = Engine::create(tmp.path().join("tb-sys"), single_config(n, p)).expect("create");
    fill(&tb_sys, pos);

    let floor = Floor::new(&[cells / 512]);

    let seeds = &setup.seeds;
    let mut fb_sip = seeds.fastbloom(n, p);
    let mut fb_x = seeds.fastbloom(n, p);
    for k in pos {
        fb_sip.insert(*k);
        fb_x.insert_hash(xxh3_64(k));
    }
    rows.push(Row {
        name: "fastbloom (SipHash-1-3)",
        bits: fb_sip.num_bits() as f64 / nf,
        fp: false_positives(neg, |k| fb_sip.contains(k)),
        note: format!("k = {}", fb_sip.num_hashes()),
    });
    rows.push(Row {
        name: "fastbloom (xxh3)",
        bits: fb_x.num_bits() as f64 / nf,
        fp: false_positives(neg, |k| fb_x.contains_hash(xxh3_64(k))),
        note: format!("k = {}", fb_x.num_hashes()),
    });

    let bpk = sbbf_bits_per_key(p);
    let mut sbbf = sbbf_rs_safe::Filter::new(bpk, n);
    for k in pos {
        sbbf.insert_hash(xxh3_64(k));
    }
    rows.push(Row {
        name: "sbbf-rs-safe (xxh3)",
        bits: sbbf.as_bytes().len() as f64 * 8.0 / nf,
        fp: false_positives(neg, |k| sbbf.contains_hash(xxh3_64(k))),
        note: format!(
            "{bpk} bits/key requested (fewest whole bits meeting p in the SBBF model: {:.2e})",
            sbbf_model_fpr(bpk as f64)
        ),
    });

    let mut bloom = seeds.bloomfilter(n, p);
    for k in pos {
        bloom.set(k);
    }
    rows.push(Row {
        name: "bloomfilter",
        bits: bloom.len() as f64 / nf,
        fp: false_positives(neg, |k| bloom.check(k)),
        note: format!("k = {}", bloom.number_of_hash_functions()),
    });

    let before = live_bytes();
    let mut grow = growable_bloom_filter::GrowableBloom::new(p, n);
    for k in pos {
        grow.insert(k);
    }
    let grow_bytes = live_bytes().saturating_sub(before);
    rows.push(Row {
        name: "growable-bloom-filter",
        bits: grow_bytes as f64 * 8.0 / nf,
        fp: false_positives(neg, |k| grow.contains(k)),
        note: "heap bytes measured".into(),
    });

    let before = live_bytes();
    let mut exact = Exact::with_capacity_and_hasher(n, Default::default());
    for k in pos {
        exact.insert(xxh3_128(k));
    }
    let exact_bytes = live_bytes().saturating_sub(before);
    rows.push(Row {
        name: "HashSet<u128> (xxh3-128)",
        bits: exact_bytes as f64 * 8.0 / nf,
        fp: false_positives(neg, |k| exact.contains(&xxh3_128(k))),
        note: "heap bytes measured".into(),
    });

    println!(
        "\n== single window, n = {}, configured fpr {p}, {} negatives",
        label_n(n),
        neg.len()
    );
    println!(
        "{:<26} {:>10} {:>40} {:>7}  note",
        "filter", "bits/item", "measured [95% interval]", "missed"
    );
    let classic = |q: f64| -q.ln() / std::f64::consts::LN_2.powi(2);
    let mut json_rows = Vec::new();
    for r in &rows {
        println!(
            "{:<26} {:>10.2} {:>40} {:>7}  {}",
            r.name,
            r.bits,
            r.fp.show(),
            if r.fp.missed(p) { "MISSED" } else { "no" },
            r.note
        );
        let mut row = json!({
            "filter": r.name,
            "bits_per_item": r.bits,
            "classic_bits_for_measured": if r.fp.fp > 0 { classic(r.fp.value()) } else { f64::NAN },
            "note": r.note,
        });
        merge(&mut row, r.fp.json());
        json_rows.push(row);
    }
    out.push(json!({
        "part": "single",
        "n": n,
        "fpr": p,
        "timebloom_segments": segs.iter().map(|s| json!({
            "tier": s.0, "window": s.1, "cells": s.2, "bytes": s.3,
            "subfilters": s.4, "estimated_fpr": s.5,
        })).collect::<Vec<_>>(),
        "sbbf_bits_per_key": bpk,
        "peer_seeds": seeds.json(),
        "rows": json_rows,
    }));

    // ---- timings
    let mut g = c.benchmark_group(format!("single n={} p={p}", label_n(n)));
    g.throughput(Throughput::Elements(CHUNK as u64));
    g.measurement_time(measurement_time(setup));
    let id = |f: &str, op: &str| BenchmarkId::new(f, op);

    bench_lookup(&mut g, id("floor", "lookup"), neg, |ks| {
        ks.iter().filter(|k| floor.lookup(k, 1)).count()
    });
    bench_lookup(&mut g, id("floor-xxh3_64", "lookup"), neg, |ks| {
        ks.iter().filter(|k| floor.lookup64(k)).count()
    });
    bench_lookup(&mut g, id("floor", "lookup_batch"), neg, |ks| {
        floor.lookup_batch(ks, 1)
    });
    bench_lookup(&mut g, id("timebloom", "pos"), pos, |ks| {
        ks.iter().filter(|k| tb.contains(k).unwrap()).count()
    });
    bench_lookup(&mut g, id("timebloom", "pos_batch"), pos, |ks| {
        count(tb.contains_batch(ks).unwrap())
    });
    bench_lookup(&mut g, id("timebloom", "neg"), neg, |ks| {
        ks.iter().filter(|k| tb.contains(k).unwrap()).count()
    });
    bench_lookup(&mut g, id("timebloom", "neg_batch"), neg, |ks| {
        count(tb.contains_batch(ks).unwrap())
    });
    bench_lookup(&mut g, id("timebloom-sysclock", "neg"), neg, |ks| {
        ks.iter().filter(|k| tb_sys.contains(k).unwrap()).count()
    });
    // Through a per-thread handle (the read path that writes no shared
    // memory), and inserts of keys already present (a recrawl).
    let mut th = tb.handle();
    bench_lookup(&mut g, id("timebloom-handle", "pos"), pos, |ks| {
        ks.iter().filter(|k| th.contains(k).unwrap()).count()
    });
    bench_lookup(&mut g, id("timebloom-handle", "neg"), neg, |ks| {
        ks.iter().filter(|k| th.contains(k).unwrap()).count()
    });
    bench_lookup(
        &mut g,
        id("timebloom-handle", "insert_present"),
        pos,
        |ks| ks.iter().filter(|k| th.insert(k).unwrap()).count(),
    );
    bench_lookup(&mut g, id("timebloom", "insert_present"), pos, |ks| {
        ks.iter().filter(|k| tb.insert(k).unwrap()).count()
    });
    drop(th);
    bench_lookup(&mut g, id("fastbloom-sip", "pos"), pos, |ks| {
        ks.iter().filter(|k| fb_sip.contains(**k)).count()
    });
    bench_lookup(&mut g, id("fastbloom-sip", "neg"), neg, |ks| {
        ks.iter().filter(|k| fb_sip.contains(**k)).count()
    });
    bench_lookup(&mut g, id("fastbloom-xxh3", "pos"), pos, |ks| {
        ks.iter().filter(|k| fb_x.contains_hash(xxh3_64(k))).count()
    });
    bench_lookup(&mut g, id("fastbloom-xxh3", "neg"), neg, |ks| {
        ks.iter().filter(|k| fb_x.contains_hash(xxh3_64(k))).count()
    });
    bench_lookup(&mut g, id("sbbf-xxh3", "pos"), pos, |ks| {
        ks.iter().filter(|k| sbbf.contains_hash(xxh3_64(k))).count()
    });
    bench_lookup(&mut g, id("sbbf-xxh3", "neg"), neg, |ks| {
        ks.iter().filter(|k| sbbf.contains_hash(xxh3_64(k))).count()
    });
    bench_lookup(&mut g, id("bloomfilter", "pos"), pos, |ks| {
        ks.iter().filter(|k| bloom.check(k)).count()
    });
    bench_lookup(&mut g, id("bloomfilter", "neg"), neg, |ks| {
        ks.iter().filter(|k| bloom.check(k)).count()
    });
    bench_lookup(&mut g, id("growable", "pos"), pos, |ks| {
        ks.iter().filter(|k| grow.contains(k)).count()
    });
    bench_lookup(&mut g, id("growable", "neg"), neg, |ks| {
        ks.iter().filter(|k| grow.contains(k)).count()
    });
    bench_lookup(&mut g, id("hashset", "pos"), pos, |ks| {
        ks.iter().filter(|k| exact.contains(&xxh3_128(k))).count()
    });
    bench_lookup(&mut g, id("hashset", "neg"), neg, |ks| {
        ks.iter().filter(|k| exact.contains(&xxh3_128(k))).count()
    });

    // Free the filled filters before the insert runs make their own.
    drop((tb, tb_sys, fb_sip, fb_x, sbbf, bloom, grow, exact, floor));

    let cells_per_seg = cells / 512;
    bench_insert(
        &mut g,
        id("floor", "insert"),
        pos,
        || Floor::zeroed(&[cells_per_seg]),
        |f, ks| ks.iter().filter(|k| f.insert(k, 1, &[0])).count(),
    );
    bench_insert(
        &mut g,
        id("floor-atomic", "insert"),
        pos,
        || AtomicFloor::new(cells_per_seg),
        |f, ks| ks.iter().filter(|k| f.insert(k)).count(),
    );
    let mut serial = 0u32;
    let mut fresh_engine = |tag: &str, sync: SyncPolicy| {
        serial += 1;
        let dir = tmp.path().join(format!("{tag}-{serial}"));
        let config = Config {
            sync,
            ..single_config(n, p)
        };
        let e = create(&dir, config, &clock);
        (e, Cleanup(dir))
    };
    bench_insert(
        &mut g,
        id("timebloom", "insert"),
        pos,
        || fresh_engine("ins", SyncPolicy::default()),
        |(e, _), ks| ks.iter().filter(|k| e.insert(k).unwrap()).count(),
    );
    bench_insert(
        &mut g,
        id("timebloom-handle", "insert"),
        pos,
        || fresh_engine("insh", SyncPolicy::default()),
        |(e, _), ks| {
            let mut h = e.handle();
            ks.iter().filter(|k| h.insert(k).unwrap()).count()
        },
    );
    // The same without the write-ahead log (`--sync none`): what the
    // default policy's log append costs per insert.
    bench_insert(
        &mut g,
        id("timebloom-handle-nolog", "insert"),
        pos,
        || fresh_engine("insn", SyncPolicy::None),
        |(e, _), ks| {
            let mut h = e.handle();
            ks.iter().filter(|k| h.insert(k).unwrap()).count()
        },
    );
    bench_insert(
        &mut g,
        id("timebloom", "insert_batch"),
        pos,
        || fresh_engine("insb", SyncPolicy::default()),
        |(e, _), ks| count(e.insert_batch(ks).unwrap()),
    );
    bench_insert(
        &mut g,
        id("fastbloom-sip", "insert"),
        pos,
        || seeds.fastbloom(n, p),
        |f, ks| ks.iter().filter(|k| !f.insert(**k)).count(),
    );
    bench_insert(
        &mut g,
        id("fastbloom-xxh3", "insert"),
        pos,
        || seeds.fastbloom(n, p),
        |f, ks| ks.iter().filter(|k| !f.insert_hash(xxh3_64(k))).count(),
    );
    bench_insert(
        &mut g,
        id("sbbf-xxh3", "insert"),
        pos,
        || sbbf_rs_safe::Filter::new(bpk, n),
        |f, ks| ks.iter().filter(|k| !f.insert_hash(xxh3_64(k))).count(),
    );
    bench_insert(
        &mut g,
        id("bloomfilter", "insert"),
        pos,
        || seeds.bloomfilter(n, p),
        |f, ks| ks.iter().filter(|k| !f.check_and_set(k)).count(),
    );
    bench_insert(
        &mut g,
        id("growable", "insert"),
        pos,
        || growable_bloom_filter::GrowableBloom::new(p, n),
        |f, ks| ks.iter().filter(|k| f.insert(k)).count(),
    );
    bench_insert(
        &mut g,
        id("hashset", "insert"),
        pos,
        || Exact::with_capacity_and_hasher(n, Default::default()),
        |f, ks| ks.iter().filter(|k| f.insert(xxh3_128(k))).count(),
    );
    g.finish();
}

/// Removes an engine directory when dropped (after the engine, which is
/// dropped first as the tuple's first field).
struct Cleanup(PathBuf);

impl Drop for Cleanup {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn measurement_time(setup: &Setup) -> Duration {
    let secs: f64 = std::env::var("TIMEBLOOM_BENCH_SECS").map_or(3.0, |s| {
        s.parse()
            .expect("TIMEBLOOM_BENCH_SECS: a number of seconds")
    });
    Duration::from_secs_f64(if setup.bench { secs } else { 0.1 })
}

// ---- part 2: the default 7d/4w/12m engine, every segment populated ----------------

/// Inserts `per_day` fresh keys (ids from `*next`) on each of `days` days
/// starting at `first_day`, generating the next day's keys while inserting.
fn populate(
    engine: &Engine,
    clock: &ManualClock,
    first_day: u64,
    days: u64,
    per_day: usize,
    next: &mut u64,
) {
    let start = *next;
    *next += days * per_day as u64;
    let gen = |d: u64| Keys::range(start + d * per_day as u64, per_day);
    let mut keys = gen(0);
    for d in 0..days {
        clock.set(noon(first_day + d));
        keys = std::thread::scope(|s| {
            let h = (d + 1 < days).then(|| s.spawn(move || gen(d + 1)));
            fill(engine, &keys.refs());
            h.map(|h| h.join().expect("generator"))
                .unwrap_or_else(|| Keys::range(0, 0))
        });
    }
}

fn windowed(c: &mut Criterion, setup: &Setup, n: usize, out: &mut Vec<Value>) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let per_day = n.div_ceil(31);
    let config = Config {
        expected_items_per_day: per_day as u64,
        ..Config::default()
    };
    let p = config.fpr;
    let clock = ManualClock::new(noon(0));
    let engine = create(&tmp.path().join("w"), config, &clock);
    let days = 365;
    let mut next = 0u64;
    let t = Instant::now();
    populate(&engine, &clock, 0, days, filled(per_day), &mut next);
    let populate_secs = t.elapsed().as_secs_f64();
    let st = engine.stats().expect("stats");
    let segs = segment_cells(&st);
    println!(
        "\n== windowed 7d/4w/12m, {} keys per month planned ({per_day} a day, {} inserted a day), {} days, {} keys, {} segments, {:.1} MiB, populated in {populate_secs:.1} s",
        label_n(n),
        filled(per_day),
        days,
        next,
        segs.len(),
        st.bytes as f64 / (1 << 20) as f64
    );
    for s in &segs {
        println!(
            "  {:<4} {:<9} {:>12} cells {:>2} sub-filter(s)  model fpr {:.2e}",
            s.0, s.1, s.2, s.4, s.5
        );
    }
    // Positive keys: a random sample of everything inserted this year.
    let sample = n.clamp(CHUNK * 4, 1_000_000);
    let pos_keys = Keys::generate(sample, |i| {
        let mut s = i as u64 ^ 0x5a5a;
        splitmix(&mut s) % next
    });
    let pos = pos_keys.refs();
    let neg_keys = Keys::negatives(MIN_NEGATIVES.min(n * 4).max(CHUNK * 4));
    let neg = neg_keys.refs();
    let missed = pos.iter().filter(|k| !engine.contains(k).unwrap()).count();
    assert_eq!(missed, 0, "timebloom lost inserted keys");
    let fp = false_positives(&neg, |k| engine.contains(k).unwrap());
    let model: f64 = segs.iter().filter(|s| s.0 == "12m").map(|s| s.5).sum();
    println!(
        "  contains: measured fpr {} (95% interval) over {} negatives; configured {p}{}; model {model:.2e}",
        fp.show(),
        fp.n,
        if fp.missed(p) { ", MISSED" } else { "" }
    );
    let mut row = json!({
        "part": "windowed",
        "n_per_month": n,
        "per_day": per_day,
        "days": days,
        "keys": next,
        "fpr": p,
        "bytes": st.bytes,
        "populate_secs": populate_secs,
        "model_fpr": model,
        "segments": segs.iter().map(|s| json!({
            "tier": s.0, "window": s.1, "cells": s.2, "bytes": s.3,
            "subfilters": s.4, "estimated_fpr": s.5,
        })).collect::<Vec<_>>(),
    });
    merge(&mut row, fp.json());
    out.push(row);

    // Floor arrays: the 12 monthly segments first, then weekly, then daily.
    let mut order: Vec<usize> = (0..segs.len()).collect();
    order.sort_by_key(|&i| match segs[i].0.as_str() {
        "12m" => 0,
        "4w" => 1,
        _ => 2,
    });
    let blocks: Vec<u64> = order.iter().map(|&i| segs[i].2 / 512).collect();
    let months = segs.iter().filter(|s| s.0 == "12m").count();
    let mut floor = Floor::new(&blocks);
    let all = blocks.len();
    // The open segment of each tier: the last of its run in `order`.
    let weeks = segs.iter().filter(|s| s.0 == "4w").count();
    let tails = [months - 1, months + weeks - 1, all - 1];

    let mut g = c.benchmark_group(format!("windowed n={}", label_n(n)));
    g.throughput(Throughput::Elements(CHUNK as u64));
    g.measurement_time(measurement_time(setup));
    let id = |f: &str, op: &str| BenchmarkId::new(f, op);
    bench_lookup(
        &mut g,
        id("floor", format!("lookup{months}").as_str()),
        &neg,
        |ks| ks.iter().filter(|k| floor.lookup(k, months)).count(),
    );
    bench_lookup(
        &mut g,
        id("floor", format!("lookup{all}").as_str()),
        &neg,
        |ks| ks.iter().filter(|k| floor.lookup(k, all)).count(),
    );
    bench_lookup(
        &mut g,
        id("floor", format!("lookup{months}_batch").as_str()),
        &neg,
        |ks| floor.lookup_batch(ks, months),
    );
    bench_lookup(&mut g, id("timebloom", "pos"), &pos, |ks| {
        ks.iter().filter(|k| engine.contains(k).unwrap()).count()
    });
    bench_lookup(&mut g, id("timebloom", "pos_batch"), &pos, |ks| {
        count(engine.contains_batch(ks).unwrap())
    });
    bench_lookup(&mut g, id("timebloom", "neg"), &neg, |ks| {
        ks.iter().filter(|k| engine.contains(k).unwrap()).count()
    });
    bench_lookup(&mut g, id("timebloom", "neg_batch"), &neg, |ks| {
        count(engine.contains_batch(ks).unwrap())
    });
    let mut h = engine.handle();
    bench_lookup(&mut g, id("timebloom-handle", "neg"), &neg, |ks| {
        ks.iter().filter(|k| h.contains(k).unwrap()).count()
    });
    drop(h);
    // Inserts of the keys inserted earlier the same day (the last populated
    // day, the clock still on it): a crawl's duplicates, which every open
    // window holds and which write nothing.
    let today_keys = Keys::range(next - filled(per_day) as u64, filled(per_day));
    let today = today_keys.refs();
    if today.len() >= CHUNK {
        bench_lookup(&mut g, id("timebloom", "insert_seen_today"), &today, |ks| {
            ks.iter().filter(|k| engine.insert(k).unwrap()).count()
        });
        bench_lookup(
            &mut g,
            id("timebloom", "insert_seen_today_batch"),
            &today,
            |ks| count(engine.insert_batch(ks).unwrap()),
        );
    }
    // Insert floor: read the monthly segments, write the three open ones.
    bench_lookup(&mut g, id("floor", "insert"), &neg, |ks| {
        ks.iter()
            .filter(|k| floor.insert(k, months, &tails))
            .count()
    });
    drop(floor);

    // Inserts in the steady state: one day's keys at a time into the open
    // windows, then the clock moves to the next day (rotation and expiry
    // happen outside the timing), so every segment stays populated.
    let mut day = days;
    let mut run_inserts = |name: &str, batch: bool| {
        let mut day_keys: Option<Keys> = None;
        let mut cur = 0usize;
        let mut hot = Hot::default();
        g.bench_function(BenchmarkId::new("timebloom", name), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                let mut acc = 0;
                for _ in 0..iters {
                    if day_keys.is_none() || cur + CHUNK > filled(per_day) {
                        day += 1;
                        clock.set(noon(day));
                        engine.maintain(noon(day)).expect("maintain");
                        day_keys = Some(Keys::range(next, filled(per_day)));
                        next += filled(per_day) as u64;
                        cur = 0;
                    }
                    let keys = day_keys
                        .as_ref()
                        .map(|k| k.slice(cur, cur + CHUNK))
                        .unwrap_or_default();
                    let ks = &hot.load(&keys)[..];
                    let start = Instant::now();
                    acc += if batch {
                        count(engine.insert_batch(ks).unwrap())
                    } else {
                        ks.iter().filter(|k| engine.insert(k).unwrap()).count()
                    };
                    total += start.elapsed();
                    cur += CHUNK;
                }
                black_box(acc);
                total
            })
        });
    };
    if per_day >= CHUNK {
        run_inserts("insert", false);
        run_inserts("insert_batch", true);
    }
    g.finish();
    let st = engine.stats().expect("stats");
    let grown = segment_cells(&st).iter().filter(|s| s.4 > 1).count();
    println!("  after the insert runs: day {day}, {grown} segment(s) with grown chains");
}

// ---- part 3: lookup cost against the number of segments --------------------------

fn segments(c: &mut Criterion, setup: &Setup, out: &mut Vec<Value>) {
    let (per_seg, rs): (usize, Vec<u32>) = if setup.bench {
        (250_000, vec![1, 2, 4, 8, 12, 16, 23, 32])
    } else {
        (5_000, vec![1, 3])
    };
    let neg_keys = Keys::negatives(1_000_000.min(per_seg * 8));
    let neg = neg_keys.refs();
    let tmp = tempfile::tempdir().expect("tempdir");
    let mut g = c.benchmark_group(format!("segments per={}", label_n(per_seg)));
    g.throughput(Throughput::Elements(CHUNK as u64));
    g.measurement_time(measurement_time(setup).mul_f64(2.0 / 3.0));
    println!(
        "\n== negative lookups against segments read ({per_seg} keys per daily segment, fpr 0.001)"
    );
    for r in rs {
        let config = Config {
            tiers: vec![Tier::daily(r)],
            expected_items_per_day: per_seg as u64,
            fpr: 0.001,
            ..Config::default()
        };
        let clock = ManualClock::new(noon(0));
        let engine = create(&tmp.path().join(format!("r{r}")), config, &clock);
        let mut next = 0;
        populate(&engine, &clock, 0, u64::from(r), filled(per_seg), &mut next);
        let st = engine.stats().expect("stats");
        let segs = segment_cells(&st);
        assert_eq!(segs.len(), r as usize);
        let fp = false_positives(&neg, |k| engine.contains(k).unwrap());
        println!(
            "  {r:>2} segments, {:.1} MiB: measured fpr {} (95% interval)",
            st.bytes as f64 / (1 << 20) as f64,
            fp.show()
        );
        let mut row = json!({
            "part": "segments", "segments": r, "per_segment": per_seg, "bytes": st.bytes,
        });
        merge(&mut row, fp.json());
        out.push(row);
        let floor = Floor::new(&segs.iter().map(|s| s.2 / 512).collect::<Vec<_>>());
        bench_lookup(&mut g, BenchmarkId::new("floor", r), &neg, |ks| {
            ks.iter().filter(|k| floor.lookup(k, r as usize)).count()
        });
        bench_lookup(&mut g, BenchmarkId::new("floor batch", r), &neg, |ks| {
            floor.lookup_batch(ks, r as usize)
        });
        bench_lookup(&mut g, BenchmarkId::new("timebloom neg", r), &neg, |ks| {
            ks.iter().filter(|k| engine.contains(k).unwrap()).count()
        });
        bench_lookup(
            &mut g,
            BenchmarkId::new("timebloom neg_batch", r),
            &neg,
            |ks| count(engine.contains_batch(ks).unwrap()),
        );
    }
    g.finish();
}

// ---- part 4: false-positive rate against load ------------------------------------

fn load(setup: &Setup, out: &mut Vec<Value>) {
    let n = if setup.bench { 1_000_000 } else { 10_000 };
    let loads = [0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 3.0, 4.0];
    let pos_keys = Keys::range(1 << 40, n * 4);
    let pos = pos_keys.refs();
    let neg_keys = Keys::negatives(if setup.bench { 2_000_000 } else { 20_000 });
    let neg = neg_keys.refs();
    let tmp = tempfile::tempdir().expect("tempdir");
    for &p in &setup.fprs {
        println!(
            "\n== false-positive rate against load, planned {} items, configured {p}",
            label_n(n)
        );
        println!(
            "{:>6} {:>34} {:>10} {:>5} {:>34} {:>34}",
            "load", "timebloom [95% interval]", "tb model", "subs", "fastbloom", "sbbf"
        );
        let clock = ManualClock::new(noon(0));
        let tb = create(
            &tmp.path().join(format!("p{p}")),
            single_config(n, p),
            &clock,
        );
        let mut fb = setup.seeds.fastbloom(n, p);
        let mut sbbf = sbbf_rs_safe::Filter::new(sbbf_bits_per_key(p), n);
        let mut done = 0;
        for &l in &loads {
            let upto = (l * n as f64) as usize;
            fill(&tb, &pos[done..upto]);
            for k in &pos[done..upto] {
                let h = xxh3_64(k);
                fb.insert_hash(h);
                sbbf.insert_hash(h);
            }
            done = upto;
            let st = tb.stats().expect("stats");
            let segs = segment_cells(&st);
            let model: f64 = segs.iter().map(|s| s.5).sum();
            let cells: u64 = segs.iter().map(|s| s.2).sum();
            let t = false_positives(&neg, |k| tb.contains(k).unwrap());
            let f = false_positives(&neg, |k| fb.contains_hash(xxh3_64(k)));
            let s = false_positives(&neg, |k| sbbf.contains_hash(xxh3_64(k)));
            println!(
                "{l:>6.2} {:>34} {model:>10.3e} {:>5} {:>34} {:>34}",
                t.show(),
                segs[0].4,
                f.show(),
                s.show()
            );
            out.push(json!({
                "part": "load", "planned": n, "fpr": p, "load": l,
                "timebloom": t.value(), "timebloom_model": model, "subfilters": segs[0].4,
                "timebloom_bits_per_item": cells as f64 / upto as f64,
                "fastbloom_xxh3": f.value(), "sbbf_xxh3": s.value(), "negatives": neg.len(),
                "false_positives": {
                    "timebloom": t.fp, "fastbloom_xxh3": f.fp, "sbbf_xxh3": s.fp,
                },
            }));
        }
    }
}

// ---- part 5: opening a 4 GiB engine ------------------------------------------------

/// Drops the page cache of every file under `dir` (clean pages only, which
/// they are after a close), so that an open has to go to the disk. Uses
/// python3's `os.posix_fadvise` (no extra crate); false if that failed.
fn evict(dir: &Path) -> bool {
    const PY: &str = "import os, sys\n\
        for root, _, files in os.walk(sys.argv[1]):\n\
        \x20   for f in files:\n\
        \x20       fd = os.open(os.path.join(root, f), os.O_RDONLY)\n\
        \x20       os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)\n\
        \x20       os.close(fd)\n";
    std::process::Command::new("python3")
        .arg("-c")
        .arg(PY)
        .arg(dir)
        .status()
        .is_ok_and(|s| s.success())
}

/// (resident KiB, bytes this process read from storage).
fn proc_counters() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    let read = io
        .lines()
        .find(|l| l.starts_with("read_bytes:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0);
    (rss, read)
}

fn open_time(setup: &Setup, out: &mut Vec<Value>) {
    // About 4 GiB with the default tiers: the monthly segments dominate.
    let per_day: u64 = if setup.bench { 3_600_000 } else { 1_000 };
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = tmp.path().join("big");
    let now = noon(364); // 2025-12-31
    let clock = ManualClock::new(now);
    let config = Config {
        expected_items_per_day: per_day,
        ..Config::default()
    };
    let t = Instant::now();
    let engine = create(&dir, config, &clock);
    // Backfill one key into every past window the tiers keep: the six days
    // before, the three ISO weeks before (Dec 8, 15, 22), the eleven months
    // before.
    let mut instants: Vec<SystemTime> = (358..364).map(noon).collect();
    instants.extend([341u64, 348, 355].map(noon));
    for m in 0..11u64 {
        instants.push(noon(m * 31 - m / 2));
    }
    for (i, t) in instants.iter().enumerate() {
        engine
            .insert_at(format!("backfill-{i}").as_bytes(), *t)
            .expect("insert_at");
    }
    let st = engine.stats().expect("stats");
    let nsegs = segment_cells(&st).len();
    let bytes = st.bytes;
    engine.close().expect("close");
    let create_secs = t.elapsed().as_secs_f64();
    println!(
        "\n== open: {nsegs} segments, {:.2} GiB on disk (made in {create_secs:.1} s)",
        bytes as f64 / (1u64 << 30) as f64
    );
    let key = b"https://www.news42.com/article/x?id=1";
    let mut runs = Vec::new();
    for run in 0..7 {
        let cold = run % 2 == 0 && evict(&dir);
        let (rss0, read0) = proc_counters();
        let t0 = Instant::now();
        let e = Engine::open_with(&dir, Options::default().clock(clock.clone())).expect("open");
        let open = t0.elapsed();
        let (rss1, read1) = proc_counters();
        let t1 = Instant::now();
        let hit = e.contains(key).expect("contains");
        let first = t1.elapsed();
        let t2 = Instant::now();
        let hit2 = e.contains(b"backfill-3").expect("contains");
        let second = t2.elapsed();
        let (rss2, read2) = proc_counters();
        black_box((hit, hit2));
        println!(
            "  {} open {:>8.3} ms (+{} KiB resident, {} KiB read); first contains {:>7.3} ms ({} KiB read); next {:>6.1} us",
            if cold { "cold" } else { "warm" },
            open.as_secs_f64() * 1e3,
            rss1.saturating_sub(rss0),
            read1.saturating_sub(read0) / 1024,
            first.as_secs_f64() * 1e3,
            read2.saturating_sub(read1) / 1024,
            second.as_secs_f64() * 1e6,
        );
        runs.push(json!({
            "cold": cold,
            "open_ms": open.as_secs_f64() * 1e3,
            "rss_kib_added_by_open": rss1.saturating_sub(rss0),
            "read_kib_by_open": read1.saturating_sub(read0) / 1024,
            "first_contains_ms": first.as_secs_f64() * 1e3,
            "read_kib_by_first_contains": read2.saturating_sub(read1) / 1024,
            "second_contains_us": second.as_secs_f64() * 1e6,
            "rss_kib_after": rss2,
        }));
        e.close().expect("close");
    }
    out.push(json!({
        "part": "open", "segments": nsegs, "bytes": bytes, "per_day": per_day, "runs": runs,
    }));
}

// ---- main ----------------------------------------------------------------------------------

fn main() {
    let setup = Setup::from_env();
    let secs = measurement_time(&setup);
    let mut c = Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500).min(secs))
        .measurement_time(secs)
        .nresamples(20_000)
        .configure_from_args();
    if !setup.timings {
        c = c.with_benchmark_filter(BenchmarkFilter::RejectAll);
    }
    println!(
        "peer seeds from base {:#018x} (TIMEBLOOM_BENCH_SEED): {}",
        setup.seeds.base,
        setup.seeds.json()
    );
    let mut out: Vec<Value> = Vec::new();
    let started = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);

    for &n in &setup.sizes {
        if setup.part("single") {
            let t = Instant::now();
            let pos_keys = Keys::range(0, n);
            let neg_keys = Keys::negatives(n.max(if setup.bench { MIN_NEGATIVES } else { n }));
            let (pos, neg) = (pos_keys.refs(), neg_keys.refs());
            let lens: Vec<usize> = pos.iter().map(|k| k.len()).collect();
            println!(
                "\n== {} keys generated in {:.1} s: {}..{} bytes, mean {:.1}; {} negatives",
                label_n(n),
                t.elapsed().as_secs_f64(),
                lens.iter().min().unwrap_or(&0),
                lens.iter().max().unwrap_or(&0),
                lens.iter().sum::<usize>() as f64 / n as f64,
                neg.len()
            );
            println!(
                "   e.g. {}",
                String::from_utf8_lossy(pos[pos.len() / 2]).into_owned()
            );
            for &p in &setup.fprs {
                single_window(&mut c, &setup, n, p, &pos, &neg, &mut out);
            }
        }
        if setup.part("windowed") {
            windowed(&mut c, &setup, n, &mut out);
        }
    }
    if setup.part("segments") {
        segments(&mut c, &setup, &mut out);
    }
    if setup.part("load") {
        load(&setup, &mut out);
    }
    if setup.part("open") {
        open_time(&setup, &mut out);
    }

    if setup.bench {
        let doc = json!({
            "started": started,
            "sizes": setup.sizes,
            "fprs": setup.fprs,
            "parts": setup.parts,
            "timings": setup.timings,
            "peer_seeds": setup.seeds.json(),
            "chunk": CHUNK,
            "results": out,
        });
        if let Some(dir) = setup.out.parent() {
            std::fs::create_dir_all(dir).expect("create output directory");
        }
        std::fs::write(
            &setup.out,
            serde_json::to_string_pretty(&doc).expect("json"),
        )
        .expect("write results");
        println!("\nresults written to {}", setup.out.display());
    }
    c.final_summary();
}
