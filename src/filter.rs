//! Pure filter kernels over 64-byte blocks of atomic words, and the sizing math.
//!
//! A sub-filter is `nblocks` blocks of eight `u64` words. A key's block comes
//! from the high half of its hash, its `k` probes from the low half, so a
//! lookup touches one cache line per sub-filter. Two kinds share the layout:
//!
//! * [`Kind::Bloom`]: 512 one-bit cells per block.
//! * [`Kind::Counting`]: 128 four-bit counters per block (16 per word); a
//!   counter that reaches 15 saturates and is never decremented again.
//!
//! **Concurrency.** Readers load words without any lock. Every function
//! that changes a word takes an [`Exclusive`]: the proof that its caller
//! holds the [`Stripes`] lock of the key it writes, which makes
//! check-and-insert of one key atomic (of several threads inserting the
//! same new key, exactly one is told it was new). A key's stripe is the top
//! bits of the hash half that picks its block, so in a Bloom body whose
//! block count is a multiple of the stripe count every key of a block has
//! the same stripe ([`stripe_of`]): its holder is the block's only writer
//! and sets bits with a plain load and store. Other bodies (smaller ones,
//! counters) are written with atomic read-modify-write instructions
//! (`fetch_or`, a compare-and-swap loop for counters), so writers of
//! different keys sharing a word lose no update. A reader racing a writer
//! sees each word either before or after the write: a key being inserted
//! may test absent until its insert returns, never after.
//!
//! Nothing here knows about files or time.

use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::{Mutex, MutexGuard};

use crate::hash::KeyHash;

/// Key-striped writer locks: a writer holds the stripe of the key it
/// writes, so writers of one key are serialized and writers of different
/// keys (almost always different stripes) are not. Taking every stripe
/// ([`Stripes::lock_all`]) waits for every write in flight and keeps new
/// ones out: a checkpoint's and a seal's quiescent point.
pub(crate) struct Stripes(Box<[Stripe]>);

/// One stripe, alone on its cache line (128 bytes: adjacent-line prefetch
/// pairs lines on x86) so that writers of different stripes share nothing.
#[repr(align(128))]
#[derive(Default)]
struct Stripe(Mutex<()>);

/// Stripes per engine: with a handful of writer threads, two of them
/// rarely want the same stripe. A power of two: a stripe is the top bits of
/// a key's `hi`.
pub(crate) const STRIPES: u64 = 64;

/// The stripe of key `h`: the top `log2(STRIPES)` bits of `hi`, the half
/// that picks its block ([`block_index`]).
///
/// In a body of `n = STRIPES * m` blocks, key `h`'s block is
/// `b = floor(hi * n / 2^64)`, and `floor(b / m) = floor(hi * STRIPES / 2^64)`
/// is its stripe: the blocks `s*m .. (s+1)*m` are written by keys of stripe
/// `s` only, whatever the body's size. That is what lets a writer holding
/// the stripe set a Bloom block's bits without a locked instruction
/// ([`set_key`]).
#[inline]
pub(crate) fn stripe_of(h: KeyHash) -> usize {
    (h.hi >> (64 - STRIPES.trailing_zeros())) as usize
}

/// Whether a body of `nblocks` blocks has blocks written by one stripe each
/// (see [`stripe_of`]).
#[inline]
pub(crate) fn stripe_aligned(nblocks: u64) -> bool {
    nblocks.is_multiple_of(STRIPES)
}

impl Default for Stripes {
    fn default() -> Stripes {
        Stripes((0..STRIPES).map(|_| Stripe::default()).collect())
    }
}

impl Stripes {
    /// Waits for the stripe of key `h`; writes are allowed while the proof lives.
    #[inline]
    pub(crate) fn lock(&self, h: KeyHash) -> Exclusive<'_> {
        let i = stripe_of(h);
        Exclusive {
            _guard: Guard::One(self.0[i].0.lock()),
            stripe: Some(i),
            lane: crate::fill::lane(),
        }
    }

    /// Takes every stripe, in order: no write is in flight while it lives.
    pub(crate) fn lock_all(&self) -> Exclusive<'_> {
        Exclusive {
            _guard: Guard::All(self.0.iter().map(|s| s.0.lock()).collect()),
            stripe: None,
            lane: crate::fill::lane(),
        }
    }
}

enum Guard<'a> {
    One(#[allow(dead_code)] MutexGuard<'a, ()>),
    All(#[allow(dead_code)] Vec<MutexGuard<'a, ()>>),
}

/// Proof that the caller holds a [`Stripes`] lock: the kernels that write
/// take one, so no code path can write without it. It also carries the
/// writing thread's lane (`fill::lane`), looked up once per lock: a
/// thread-local read costs a call in a shared library (the Python
/// extension), and a write counts fill in several windows and logs.
pub(crate) struct Exclusive<'a> {
    _guard: Guard<'a>,
    /// The stripe held; `None` for all of them.
    stripe: Option<usize>,
    lane: usize,
}

impl Exclusive<'_> {
    /// Whether the holder is the only writer of key `h`'s stripe.
    #[inline]
    pub(crate) fn holds(&self, h: KeyHash) -> bool {
        self.stripe.is_none_or(|s| s == stripe_of(h))
    }

    /// The writing thread's lane.
    #[inline]
    pub(crate) fn lane(&self) -> usize {
        self.lane
    }
}

/// Words per block: 8 x 64 bits = one 64-byte cache line.
pub(crate) const BLOCK_WORDS: usize = 8;
/// Bytes per block.
pub(crate) const BLOCK_BYTES: u64 = 64;
/// The largest number of probes a plan may use.
pub(crate) const MAX_K: u32 = 24;

/// One 64-byte block.
pub(crate) type Block = [AtomicU64; BLOCK_WORDS];

/// The cell type of a sub-filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// One bit per cell: insert and lookup.
    Bloom,
    /// Four-bit counters: insert, lookup and remove.
    Counting,
    /// A cuckoo table of short fingerprints, each with the day its key was
    /// last seen (`crate::fingerprint`): one table answers every horizon of
    /// the retention at day precision; insert, lookup and remove.
    Fingerprint,
}

impl Kind {
    /// Cells in one 64-byte block.
    ///
    /// A fingerprint block's slots depend on its fingerprint width (see
    /// `segment::Header::cells_per_block`); 0 here.
    pub(crate) const fn cells_per_block(self) -> u32 {
        match self {
            Kind::Bloom => 512,
            Kind::Counting => 128,
            Kind::Fingerprint => 0,
        }
    }

    pub(crate) const fn code(self) -> u32 {
        match self {
            Kind::Bloom => 1,
            Kind::Counting => 2,
            Kind::Fingerprint => 3,
        }
    }

    pub(crate) fn from_code(code: u32) -> Option<Kind> {
        match code {
            1 => Some(Kind::Bloom),
            2 => Some(Kind::Counting),
            3 => Some(Kind::Fingerprint),
            _ => None,
        }
    }

    /// Whether the cells of this kind are not only ever set: a write-ahead
    /// log replay needs an exact starting point (a shadow copy at each
    /// checkpoint), since replaying a decrement or a relocation twice is
    /// not harmless.
    pub(crate) const fn needs_shadow(self) -> bool {
        matches!(self, Kind::Counting | Kind::Fingerprint)
    }
}

/// Odd 64-bit multipliers (from splitmix64): probe `i` is the top bits of
/// `lo * PROBE_MUL[i]`. The products are independent multiplies, so the
/// probes of a key are computed in parallel rather than as a serial chain.
pub(crate) const PROBE_MUL: [u64; MAX_K as usize] = [
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

/// Picks the block: the high half of the hash scaled to `nblocks`
/// (multiply-shift, 64-bit safe for any `nblocks`).
#[inline]
pub(crate) fn block_index(h: KeyHash, nblocks: u64) -> u64 {
    ((u128::from(h.hi) * u128::from(nblocks)) >> 64) as u64
}

/// The per-word cell masks of a key for `k` probes of the given kind: for
/// Bloom cells a mask bit is a cell; for counting cells it is the low bit of
/// each selected nibble.
#[inline]
pub(crate) fn masks(kind: Kind, lo: u64, k: u32) -> [u64; BLOCK_WORDS] {
    let mut m = [0u64; BLOCK_WORDS];
    let k = (k as usize).min(PROBE_MUL.len());
    match kind {
        Kind::Bloom => {
            for mul in &PROBE_MUL[..k] {
                let cell = lo.wrapping_mul(*mul) >> 55; // 0..512
                m[(cell >> 6) as usize] |= 1u64 << (cell & 63);
            }
        }
        Kind::Counting => {
            for mul in &PROBE_MUL[..k] {
                let cell = lo.wrapping_mul(*mul) >> 57; // 0..128
                m[(cell >> 4) as usize] |= 1u64 << ((cell & 15) * 4);
            }
        }
        // Fingerprint tables have no probe cells (`crate::fingerprint`).
        Kind::Fingerprint => {}
    }
    m
}

/// A key's Bloom cell masks, shared by every window one write sets.
///
/// The masks for `k` probes are those for `k - 1` with one more cell, so a
/// write that sets windows of 12 and then 13 probes computes 13 cells, not
/// 25; windows of fewer probes than the last one asked start over.
pub(crate) struct KeyMasks {
    lo: u64,
    k: usize,
    m: [u64; BLOCK_WORDS],
}

impl KeyMasks {
    /// No cell computed yet for the key whose hash has low half `lo`.
    #[inline]
    pub(crate) fn new(lo: u64) -> KeyMasks {
        KeyMasks {
            lo,
            k: 0,
            m: [0; BLOCK_WORDS],
        }
    }

    /// The masks of `k` probes: `masks(Kind::Bloom, lo, k)`.
    #[inline]
    pub(crate) fn get(&mut self, k: u32) -> &[u64; BLOCK_WORDS] {
        let k = (k as usize).min(PROBE_MUL.len());
        if k < self.k {
            self.k = 0;
            self.m = [0; BLOCK_WORDS];
        }
        for mul in &PROBE_MUL[self.k..k] {
            let cell = self.lo.wrapping_mul(*mul) >> 55; // 0..512, as `masks`
            self.m[(cell >> 6) as usize] |= 1u64 << (cell & 63);
        }
        self.k = k;
        &self.m
    }
}

/// Low bit of every nibble.
const NIBBLE_LOW: u64 = 0x1111_1111_1111_1111;

/// Low bit of each nibble that is not zero.
#[inline]
fn nibbles_nonzero(w: u64) -> u64 {
    (w | (w >> 1) | (w >> 2) | (w >> 3)) & NIBBLE_LOW
}

/// Low bit of each nibble equal to 15 (saturated).
#[inline]
fn nibbles_saturated(w: u64) -> u64 {
    w & (w >> 1) & (w >> 2) & (w >> 3) & NIBBLE_LOW
}

/// Low bit of each nibble equal to 1.
#[inline]
fn nibbles_one(w: u64) -> u64 {
    w & !(w >> 1) & !(w >> 2) & !(w >> 3) & NIBBLE_LOW
}

/// True when every cell of the key is set (Bloom) or non-zero (counting),
/// testing probe by probe and stopping at the first empty cell: a foreign
/// key usually stops after one or two probes, all in one cache line.
#[inline]
pub(crate) fn contains_key(kind: Kind, block: &Block, lo: u64, k: u32) -> bool {
    let k = (k as usize).min(PROBE_MUL.len());
    match kind {
        Kind::Bloom => PROBE_MUL[..k].iter().all(|mul| {
            let cell = lo.wrapping_mul(*mul) >> 55;
            block[(cell >> 6) as usize].load(Ordering::Relaxed) & (1u64 << (cell & 63)) != 0
        }),
        Kind::Counting => PROBE_MUL[..k].iter().all(|mul| {
            let cell = lo.wrapping_mul(*mul) >> 57;
            (block[(cell >> 4) as usize].load(Ordering::Relaxed) >> ((cell & 15) * 4)) & 0xF != 0
        }),
        // Fingerprint tables are read through `crate::fingerprint`, which
        // needs the day: no probe cells here.
        Kind::Fingerprint => false,
    }
}

/// [`contains_key`] with the key's masks computed already: a Bloom block
/// four words at a time without a branch, one branch between the halves; a
/// counting block all eight words without a branch. Where many blocks
/// are read anyway (a lookup over several segments) this beats the early
/// exit of `contains_key`, whose branch a foreign key takes unpredictably in
/// every block.
#[inline]
pub(crate) fn contains_masks(kind: Kind, block: &Block, masks: &[u64; BLOCK_WORDS]) -> bool {
    if kind == Kind::Fingerprint {
        return false; // as `contains_key`
    }
    // The cells of `masks` empty in the words `r`.
    let missing = |r: std::ops::Range<usize>| {
        let words = block[r.clone()].iter().zip(&masks[r]);
        words.fold(0u64, |acc, (w, &m)| {
            let v = w.load(Ordering::Relaxed);
            let occupied = match kind {
                Kind::Bloom => v,
                Kind::Counting | Kind::Fingerprint => nibbles_nonzero(v),
            };
            acc | (m & !occupied)
        })
    };
    if kind == Kind::Bloom {
        // Half a block at a time: a foreign key almost always misses a
        // cell among the first four words (they hold about half its
        // probes, each cell set with a chance equal to the block's fill),
        // so the one branch goes the same way nearly every time, and a
        // negative lookup over many windows reads four words of each
        // block (docs/benchmarks.md, "Half a block first").
        return missing(0..BLOCK_WORDS / 2) == 0 && missing(BLOCK_WORDS / 2..BLOCK_WORDS) == 0;
    }
    missing(0..BLOCK_WORDS) == 0
}

/// Sets a key's cells (Bloom kind). Returns how many cells went from empty
/// to set; zero means the block held the key already.
///
/// `sole` says that no other thread writes this block now: the caller holds
/// the stripe of every key the block takes (`stripe_aligned` body, and
/// `x.holds` the key). Then a word is set with a plain load and store;
/// otherwise with one `fetch_or` per word the key needs bits in (a key's
/// probes land in at most eight words), so that the count of newly set
/// cells is exact even when writers of other keys set bits in the same word
/// at the same time. Either way a block that holds every cell of the key
/// already is not written (its page stays clean); the sole writer of a
/// block that lacks one stores all eight words (see [`set_sole`]).
#[inline]
pub(crate) fn set_key(_: &Exclusive, sole: bool, block: &Block, m: &[u64; BLOCK_WORDS]) -> u64 {
    if sole {
        return set_sole(block, m);
    }
    let mut newly = 0u64;
    for (w, &m) in block.iter().zip(m) {
        if m == 0 {
            continue;
        }
        let mut old = w.load(Ordering::Relaxed);
        if old & m != m {
            old = w.fetch_or(m, Ordering::Relaxed);
        }
        newly += u64::from((m & !old).count_ones());
    }
    newly
}

/// [`set_key`] for the block's only writer: every word read, then (unless
/// the block holds every cell already) every word written back with the
/// key's cells set, without a branch per word. A word the key needs no
/// cell in is stored unchanged, in a line the call writes anyway; a key
/// whose cells are all set writes nothing, so a page stays clean.
#[inline]
fn set_sole(block: &Block, m: &[u64; BLOCK_WORDS]) -> u64 {
    let old: [u64; BLOCK_WORDS] = std::array::from_fn(|i| block[i].load(Ordering::Relaxed));
    let missing: [u64; BLOCK_WORDS] = std::array::from_fn(|i| m[i] & !old[i]);
    if missing.iter().fold(0, |a, &x| a | x) == 0 {
        return 0;
    }
    for ((w, &o), &m) in block.iter().zip(&old).zip(m) {
        w.store(o | m, Ordering::Relaxed);
    }
    missing.iter().map(|x| u64::from(x.count_ones())).sum()
}

/// Increments the counters selected by `masks` (counting kind; one count
/// per distinct cell, even when two probes pick the same one). Saturated
/// counters stay at 15. Returns how many counters went from zero to one.
/// A compare-and-swap per word: writers of other keys may change other
/// counters of the same word meanwhile.
#[inline]
pub(crate) fn increment(_: &Exclusive, block: &Block, masks: &[u64; BLOCK_WORDS]) -> u64 {
    let mut newly = 0u64;
    for (w, &m) in block.iter().zip(masks) {
        if m == 0 {
            continue;
        }
        let mut old = w.load(Ordering::Relaxed);
        loop {
            let inc = m & !nibbles_saturated(old);
            if inc == 0 {
                break;
            }
            // No carry crosses a nibble: every incremented nibble is below 15.
            match w.compare_exchange_weak(old, old + inc, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    newly += u64::from((inc & !nibbles_nonzero(old)).count_ones());
                    break;
                }
                Err(now) => old = now,
            }
        }
    }
    newly
}

/// Decrements the counters selected by `masks` (counting kind): saturated
/// counters stay at 15, empty ones at 0. Returns how many became empty.
#[inline]
pub(crate) fn decrement(_: &Exclusive, block: &Block, masks: &[u64; BLOCK_WORDS]) -> u64 {
    let mut emptied = 0u64;
    for (w, &m) in block.iter().zip(masks) {
        if m == 0 {
            continue;
        }
        let mut old = w.load(Ordering::Relaxed);
        loop {
            let dec = m & !nibbles_saturated(old) & nibbles_nonzero(old);
            if dec == 0 {
                break;
            }
            // No borrow crosses a nibble: every decremented nibble is at least 1.
            match w.compare_exchange_weak(old, old - dec, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => {
                    emptied += u64::from((dec & nibbles_one(old)).count_ones());
                    break;
                }
                Err(now) => old = now,
            }
        }
    }
    emptied
}

/// Counts occupied cells in a run of blocks (after a crash, or to verify).
pub(crate) fn count_occupied(kind: Kind, blocks: &[Block]) -> u64 {
    let mut n = 0u64;
    for b in scan(blocks) {
        for w in b {
            let v = w.load(Ordering::Relaxed);
            n += u64::from(match kind {
                Kind::Bloom => v.count_ones(),
                Kind::Counting => nibbles_nonzero(v).count_ones(),
                // Slots need the geometry: `SubFilter` asks the table.
                Kind::Fingerprint => 0,
            });
        }
    }
    n
}

/// Counts saturated counters (counting kind).
pub(crate) fn count_saturated(blocks: &[Block]) -> u64 {
    scan(blocks)
        .flat_map(|b| b.iter())
        .map(|w| u64::from(nibbles_saturated(w.load(Ordering::Relaxed)).count_ones()))
        .sum()
}

/// How far ahead of the block it reads a whole-body scan loads: 32 blocks
/// (2 KiB). Measured on the recount at open after a crash (the default
/// tiers at 10^7 keys a day, 700 MB of open windows): 0.56-0.64 s without
/// loading ahead, 0.34-0.35 s at 8 blocks, 0.25-0.27 s at 16 to 64. Read
/// front to back without it, the mapped pages arrived a line at a time.
const SCAN_AHEAD: usize = 32;

/// The blocks of a body front to back, each one's load issued
/// [`SCAN_AHEAD`] blocks before its turn: for the scans that read a whole
/// body (counts, the fingerprint sweep).
pub(crate) fn scan(blocks: &[Block]) -> impl Iterator<Item = &Block> {
    blocks.iter().enumerate().map(move |(i, b)| {
        if let Some(ahead) = blocks.get(i + SCAN_AHEAD) {
            prefetch(ahead);
        }
        b
    })
}

/// Issues a prefetch of the block that holds `block` so that several
/// sub-filters' loads overlap instead of queuing.
#[inline(always)]
pub(crate) fn prefetch(block: &Block) {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: `_mm_prefetch` is a hint: it never faults and never reads
        // into Rust-visible state, and `block` is a valid reference anyway.
        // SSE is part of the x86_64 baseline, so the instruction exists.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                block.as_ptr().cast::<i8>(),
            )
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = block;
    }
}

pub(crate) mod sizing;

#[cfg(test)]
mod tests {
    use super::*;

    fn block() -> Block {
        Default::default()
    }

    fn insert(x: &Exclusive, kind: Kind, b: &Block, lo: u64, k: u32) -> u64 {
        match kind {
            Kind::Bloom => set_key(x, false, b, &masks(kind, lo, k)),
            Kind::Counting => increment(x, b, &masks(kind, lo, k)),
            Kind::Fingerprint => panic!("tables are tested in crate::fingerprint"),
        }
    }

    /// In a body whose block count is a multiple of the stripes, a key's
    /// stripe is its block's (`stripe_of`), whatever the body's size; in
    /// one that is not, two keys of one block may have two stripes, which
    /// is why those bodies keep `fetch_or`.
    #[test]
    fn a_block_of_an_aligned_body_belongs_to_one_stripe() {
        let hashes = (0..200_000u64).map(|i| crate::hash::hash_key(3, &i.to_le_bytes()));
        let hashes: Vec<KeyHash> = hashes.collect();
        for n in [
            STRIPES,
            4096,
            4160,
            1_000_000 * STRIPES,
            (1 << 40) * STRIPES,
        ] {
            assert!(stripe_aligned(n));
            let per = n / STRIPES;
            for &h in &hashes {
                assert_eq!((block_index(h, n) / per) as usize, stripe_of(h), "n = {n}");
            }
        }
        // Not aligned: some block takes keys of two stripes.
        let n = 4097;
        assert!(!stripe_aligned(n));
        let mut owner = std::collections::HashMap::new();
        let shared = hashes
            .iter()
            .any(|&h| *owner.entry(block_index(h, n)).or_insert(stripe_of(h)) != stripe_of(h));
        assert!(shared);
    }

    /// The sole writer's plain stores set the same bits and count the same
    /// new cells as `fetch_or`.
    #[test]
    fn sole_and_shared_writes_agree() {
        let lock = Stripes::default();
        let x = lock.lock_all();
        let words = |b: &Block| {
            b.iter()
                .map(|w| w.load(Ordering::Relaxed))
                .collect::<Vec<_>>()
        };
        for k in [1, 7, 12, 24] {
            let (a, b) = (block(), block());
            for i in 0..2_000u64 {
                let lo = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0x5555;
                let m = masks(Kind::Bloom, lo, k);
                assert_eq!(set_key(&x, true, &a, &m), set_key(&x, false, &b, &m));
                assert_eq!(words(&a), words(&b), "k = {k}, key {i}");
                // Set already: nothing new, either way.
                assert_eq!(set_key(&x, true, &a, &m), 0);
            }
        }
    }

    /// Masks shared across windows are those of each window's own probe
    /// count, in whatever order the counts are asked (more, fewer, the
    /// same, past the probe table's end).
    #[test]
    fn shared_masks_are_each_counts_masks() {
        let ks = [12, 12, 13, 1, 7, 7, 24, 40, 3, 0, 13];
        for i in 0..500u64 {
            let lo = i.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ 0xa5a5;
            let mut shared = KeyMasks::new(lo);
            for (j, &k) in ks
                .iter()
                .cycle()
                .skip(i as usize % ks.len())
                .take(20)
                .enumerate()
            {
                assert_eq!(
                    *shared.get(k),
                    masks(Kind::Bloom, lo, k),
                    "key {i}, ask {j}: k = {k}"
                );
            }
        }
    }

    /// A stripe's lock proves sole writing only for keys of that stripe.
    #[test]
    fn an_exclusive_holds_its_own_stripe() {
        let lock = Stripes::default();
        let h = |hi| KeyHash { lo: 1, hi };
        let x = lock.lock(h(0));
        assert!(x.holds(h(1)));
        assert!(!x.holds(h(u64::MAX)));
        drop(x);
        assert!(lock.lock_all().holds(h(u64::MAX)));
    }

    #[test]
    fn bloom_insert_then_contains() {
        let lock = Stripes::default();
        let x = lock.lock_all();
        let b = block();
        let lo = 0x1234_5678_9abc_def1;
        assert!(!contains_key(Kind::Bloom, &b, lo, 8));
        let set = insert(&x, Kind::Bloom, &b, lo, 8);
        assert!((1..=8).contains(&set));
        assert!(contains_key(Kind::Bloom, &b, lo, 8));
        assert_eq!(insert(&x, Kind::Bloom, &b, lo, 8), 0);
        assert_eq!(count_occupied(Kind::Bloom, std::slice::from_ref(&b)), set);
        // Setting probe by probe sets exactly the cells of the key's masks.
        let m = masks(Kind::Bloom, lo, 8);
        let words: Vec<u64> = b.iter().map(|w| w.load(Ordering::Relaxed)).collect();
        assert_eq!(words, m.to_vec());
    }

    #[test]
    fn counting_saturates_and_sticks() {
        let lock = Stripes::default();
        let x = lock.lock_all();
        let b = block();
        let m = masks(Kind::Counting, 0xdead_beef_cafe_f00d, 6);
        for _ in 0..20 {
            increment(&x, &b, &m);
        }
        assert_eq!(
            count_saturated(std::slice::from_ref(&b)),
            count_occupied(Kind::Counting, std::slice::from_ref(&b))
        );
        for _ in 0..20 {
            decrement(&x, &b, &m);
        }
        assert!(
            contains_key(Kind::Counting, &b, 0xdead_beef_cafe_f00d, 6),
            "saturated counters are sticky"
        );
    }

    #[test]
    fn counting_insert_remove_roundtrip() {
        let lock = Stripes::default();
        let x = lock.lock_all();
        let b = block();
        let lo = 0x0123_4567_89ab_cdef;
        let m = masks(Kind::Counting, lo, 7);
        let occ = insert(&x, Kind::Counting, &b, lo, 7);
        insert(&x, Kind::Counting, &b, lo, 7);
        assert!(contains_key(Kind::Counting, &b, lo, 7));
        assert_eq!(decrement(&x, &b, &m), 0);
        assert_eq!(decrement(&x, &b, &m), occ);
        assert!(!contains_key(Kind::Counting, &b, lo, 7));
        // Removing again changes nothing: counters never go below zero.
        assert_eq!(decrement(&x, &b, &m), 0);
        assert_eq!(count_occupied(Kind::Counting, std::slice::from_ref(&b)), 0);
    }

    #[test]
    fn masks_test_agrees_with_probe_by_probe_test() {
        let lock = Stripes::default();
        let x = lock.lock_all();
        for kind in [Kind::Bloom, Kind::Counting] {
            let b = block();
            let mut lo = 0x0bad_cafe_u64;
            for i in 0..400u64 {
                lo = lo.wrapping_mul(0x9e3779b97f4a7c15).wrapping_add(i);
                let k = 1 + (i % 12) as u32;
                if i % 3 == 0 {
                    insert(&x, kind, &b, lo, k);
                }
                assert_eq!(
                    contains_key(kind, &b, lo, k),
                    contains_masks(kind, &b, &masks(kind, lo, k)),
                    "{kind:?} key {i}"
                );
            }
        }
    }

    #[test]
    fn block_index_in_range_past_2_pow_32() {
        let n = (1u64 << 40) + 7;
        for hi in [0, 1, u64::MAX / 3, u64::MAX] {
            assert!(block_index(KeyHash { lo: 0, hi }, n) < n);
        }
        assert!(
            block_index(
                KeyHash {
                    lo: 0,
                    hi: u64::MAX
                },
                n
            ) > (1u64 << 39)
        );
    }
}
