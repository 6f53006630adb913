//! The fingerprint tier's kernel: a cuckoo table of short fingerprints in
//! which every slot also holds the day its key was last seen.
//!
//! One table answers "seen since day `d`?" for every `d` within the
//! retention, at day precision, in two cache lines, where the Bloom tiers
//! read one window per tier. `docs/fingerprint.md` has the sizing math and
//! the measured numbers; this comment is the contract.
//!
//! **Layout.** The body is a slice of 64-byte [`Block`]s, one bucket each.
//! A bucket holds [`Geometry::slots`] slots. Fingerprints and day tags live
//! in separate words so that no field ever straddles a word: the first
//! `fp_words` words hold `64 / fp_bits` fingerprints each, the next words
//! hold seven 9-bit day tags each (bit 63 unused); slot `i`'s fingerprint
//! is lane `i % per_word` of fingerprint word `i / per_word` and its day is
//! lane `i % 7` of day word `i / 7`. At p = 0.1% that is 20 slots of a
//! 16-bit fingerprint and a 9-bit day (500 of 512 bits used). Fingerprint 0
//! means "empty"; fingerprints are drawn uniformly from `1..2^fp_bits`.
//!
//! **Hashing.** From the key's one [`KeyHash`]: the first bucket from `hi`
//! (multiply-shift, as [`block_index`]), the fingerprint from `lo`
//! (multiply-shift onto `1..2^fp_bits`), and the other bucket
//! `alt(b, fp) = (H(fp) - b) mod nbuckets`, so each bucket of a pair is
//! computed from the other and the fingerprint alone, for any bucket count.
//!
//! **Days.** Callers pass absolute day numbers (`u32`); a slot stores
//! `day mod 512`. A slot's age is `(today - tag) mod 512`; it is *live*
//! when its age is at most the retention, or exactly 511 (written by a
//! writer whose clock already turned to tomorrow); otherwise it is *dead*
//! and counts as empty: lookups ignore it and inserts reuse it. A dead tag
//! comes back to life when its age wraps past 511, so [`Table::sweep`] must
//! clear dead slots at least once every [`max_sweep_interval`] days (145 for
//! a 365-day retention); [`Table::catch_up`] does it after downtime.
//!
//! **Writers.** Every write to a bucket happens while holding that bucket's
//! stripe lock, an in-memory spin bit in [`Shared`] (4096 stripes; never in
//! the mapped file, so a crash cannot leave one set). An insert locks its
//! two buckets (in stripe order), looks for its fingerprint, updates a
//! match's day or fills a free slot, and unlocks: no table-wide lock on the
//! common path, and the engine's per-key stripes are not even needed for
//! correctness (they only keep two inserts of one key from both answering
//! `New`). Only when both buckets are full of live entries does the insert
//! take the table-wide kick mutex, search a path of relocations
//! breadth-first without locks, and execute it from its free end backwards,
//! one move at a time, each move under the two stripes it touches and
//! validated against what the search read (a concurrent writer that changed
//! a slot makes the move fail and the search start again). A writer holds
//! at most two stripes, always acquired in order, and never waits for the
//! kick mutex while holding one: no deadlock.
//!
//! **Moves and readers.** A move writes the entry into its new slot (day,
//! then fingerprint) *before* clearing the old one, so at every instant
//! every acknowledged key is in one of its buckets, at worst twice. That
//! alone does not make a lock-free lookup safe: a lookup reads bucket 1 and
//! then bucket 2, and an entry moving from bucket 2 to bucket 1 between the
//! two reads is in neither read. So the kick path bumps a move counter in
//! [`Shared`] to an odd value before each move and to even after it (a
//! seqlock), and a lookup that found nothing re-reads bucket 1 if a move
//! was in flight, then checks the counter: unchanged means at most that one
//! move overlapped the lookup, and reading bucket 1, bucket 2, bucket 1
//! sees the entry in one of the three reads whichever way it moved; changed
//! means retry. A hit needs no check. Readers never wait for a writer: a
//! stalled mover leaves the counter odd and unchanged, which lookups accept.
//!
//! **Slots and readers.** A writer fills a slot by clearing a dead
//! fingerprint first, then storing the day, then the fingerprint (release
//! stores). A reader loads the fingerprint word first and the day word
//! after (acquire loads), so a fingerprint it sees comes with its own day
//! or a newer one; on a match it re-loads the fingerprint word, so it never
//! pairs a dead key's fingerprint with a new key's day.
//!
//! **Crashes.** The order of stores above holds for the mapped memory, so a
//! process killed at any instant leaves every acknowledged key findable (the
//! tests stop a relocation after every word store). It does not hold for
//! what reaches the disk after a power loss, where the kernel writes pages
//! back in any order: see `docs/fingerprint.md`.
//!
//! Nothing here knows about files; there is no `unsafe`.

use std::collections::HashSet;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, Ordering};

use parking_lot::Mutex;

use crate::filter::{block_index, Block, BLOCK_WORDS};
use crate::hash::KeyHash;

/// Bits of a day tag.
pub(crate) const DAY_BITS: u32 = 9;
/// Day tags count modulo this.
pub(crate) const DAY_RING: u32 = 1 << DAY_BITS;
const DAY_MASK: u64 = (DAY_RING - 1) as u64;
/// Day tags per day word (7 x 9 = 63 bits).
const DAYS_PER_WORD: u32 = 64 / DAY_BITS;
/// The age of a tag written on the reader's tomorrow.
const TOMORROW: u32 = DAY_RING - 1;
/// The longest retention: leaves a sweep interval of at least one day.
pub(crate) const MAX_RETENTION: u32 = DAY_RING - 3;
/// The load a plan sizes for.
pub(crate) const DESIGN_LOAD: f64 = 0.95;
/// Stripe locks per table (a power of two).
const STRIPES: usize = 4096;
/// Buckets a kick search visits before it gives up (the kick limit).
pub(crate) const MAX_SEARCH: usize = 256;
/// Searches an insert runs when concurrent writers spoil its paths.
const MAX_ATTEMPTS: usize = 4;

/// The shape of one bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Geometry {
    /// Bits of a fingerprint: 64 / (fingerprints per word).
    pub fp_bits: u32,
    /// Slots per 64-byte bucket.
    pub slots: u32,
}

impl Geometry {
    /// The bucket with `per_word` fingerprints a word (2..=8) and as many
    /// slots as fit the eight words with their day tags.
    pub(crate) fn with_fps_per_word(per_word: u32) -> Geometry {
        assert!(
            (2..=8).contains(&per_word),
            "{per_word} fingerprints a word"
        );
        Geometry::shape(per_word)
    }

    /// [`Geometry::with_fps_per_word`] for a `per_word` known good (a
    /// constant: lookups keep one copy of their test per shape).
    const fn shape(per_word: u32) -> Geometry {
        let mut slots: u32 = 1;
        while (slots + 1).div_ceil(per_word) + (slots + 1).div_ceil(DAYS_PER_WORD)
            <= BLOCK_WORDS as u32
        {
            slots += 1;
        }
        Geometry {
            fp_bits: 64 / per_word,
            slots,
        }
    }

    /// The smallest fingerprint whose bound ([`Geometry::fpr_bound`] at
    /// [`DESIGN_LOAD`]) meets `fpr`; 32-bit fingerprints for anything below.
    pub(crate) fn for_fpr(fpr: f64) -> Geometry {
        (2..=8)
            .rev()
            .map(Geometry::with_fps_per_word)
            .find(|g| g.fpr_bound(DESIGN_LOAD) <= fpr)
            .unwrap_or_else(|| Geometry::with_fps_per_word(2))
    }

    /// The geometry with `fp_bits`-bit fingerprints, if one exists (8, 9,
    /// 10, 12, 16, 21 or 32 bits: 64 / fingerprints per word).
    pub(crate) fn from_fp_bits(fp_bits: u32) -> Option<Geometry> {
        (2..=8)
            .map(Geometry::with_fps_per_word)
            .find(|g| g.fp_bits == fp_bits)
    }

    /// The smallest fingerprint whose bound at a load of 1 (every slot
    /// live, the most a table can hold) meets `fpr`: whatever a table of
    /// this geometry receives, its rate stays at or below `fpr`. 32-bit
    /// fingerprints for anything below.
    pub(crate) fn for_fpr_at_any_load(fpr: f64) -> Geometry {
        (2..=8)
            .rev()
            .map(Geometry::with_fps_per_word)
            .find(|g| g.fpr_bound(1.0) <= fpr)
            .unwrap_or_else(|| Geometry::with_fps_per_word(2))
    }

    /// The chance that a key never inserted matches a live slot when a
    /// fraction `load` of all slots is live: it is compared with every live
    /// slot of its two buckets, each matching with chance 1/(2^f - 1).
    pub(crate) fn fpr_bound(self, load: f64) -> f64 {
        2.0 * f64::from(self.slots) * load / self.fp_mask() as f64
    }

    /// Bits of table per distinct key at `load`.
    pub(crate) fn bits_per_key(self, load: f64) -> f64 {
        (BLOCK_WORDS * 64) as f64 / (f64::from(self.slots) * load)
    }

    /// Bits per key of the same fields packed without any waste.
    pub(crate) fn packed_bits_per_key(self, load: f64) -> f64 {
        f64::from(self.fp_bits + DAY_BITS) / load
    }

    const fn per_word(self) -> u32 {
        64 / self.fp_bits
    }

    const fn fp_words(self) -> usize {
        self.slots.div_ceil(self.per_word()) as usize
    }

    const fn fp_mask(self) -> u64 {
        (1u64 << self.fp_bits) - 1
    }

    /// Slot `i`'s fingerprint: its word and the lane's first bit.
    #[inline]
    fn fp_pos(self, i: u32) -> (usize, u32) {
        let pw = self.per_word();
        ((i / pw) as usize, (i % pw) * self.fp_bits)
    }

    /// Slot `i`'s day tag: its word and the lane's first bit.
    #[inline]
    fn day_pos(self, i: u32) -> (usize, u32) {
        (
            self.fp_words() + (i / DAYS_PER_WORD) as usize,
            (i % DAYS_PER_WORD) * DAY_BITS,
        )
    }
}

/// The geometry and size of one table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Plan {
    pub geometry: Geometry,
    pub nbuckets: u64,
}

/// Sizes a table for `keys_per_day` distinct keys a day kept
/// `retention_days` days at false-positive rate `fpr`, at [`DESIGN_LOAD`].
pub(crate) fn plan(fpr: f64, keys_per_day: u64, retention_days: u32) -> Plan {
    let geometry = Geometry::for_fpr(fpr);
    let keys = keys_per_day
        .saturating_mul(u64::from(retention_days))
        .max(1) as f64;
    let nbuckets = (keys / (f64::from(geometry.slots) * DESIGN_LOAD)).ceil() as u64;
    Plan {
        geometry,
        nbuckets: nbuckets.max(1),
    }
}

/// Buckets for `capacity` distinct keys at [`DESIGN_LOAD`] in `geometry`.
pub(crate) fn buckets_for(geometry: Geometry, capacity: u64) -> u64 {
    let keys = capacity.max(1) as f64;
    let n = (keys / (f64::from(geometry.slots) * DESIGN_LOAD)).ceil();
    if n >= u64::MAX as f64 {
        u64::MAX
    } else {
        (n as u64).max(1)
    }
}

/// The longest a table may go without [`Table::sweep`] (days) before a dead
/// tag can read as live again: a tag dies at age `retention + 1` and would
/// read as "tomorrow" at age 511.
pub(crate) const fn max_sweep_interval(retention: u32) -> u32 {
    DAY_RING - 2 - retention
}

/// What an insert did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Insert {
    /// No live slot matched; the key now has one, dated today.
    New,
    /// A live slot matched; its day is now today.
    Updated,
    /// Both buckets are full and no relocation path was found within the
    /// kick limit (or concurrent writers spoiled four paths): the key was
    /// not written; the caller grows a chain.
    Full,
}

/// The in-memory state that the writers and readers of one table share:
/// stripe locks, the kick mutex, the move counter. The engine keeps one per
/// mapped table; nothing of it is persistent.
pub(crate) struct Shared {
    stripes: Box<[AtomicBool]>,
    kick: Mutex<()>,
    moves: AtomicU64,
    /// Test hook: body stores left before a simulated crash (then every
    /// store is dropped); `u64::MAX` is unlimited.
    #[cfg(test)]
    budget: AtomicU64,
    /// Test hook: body stores done.
    #[cfg(test)]
    stores: AtomicU64,
    /// Test hook: kick paths still to spoil, as a concurrent writer that
    /// fills the path's free end between the search and the moves does.
    #[cfg(test)]
    spoils: AtomicU64,
}

impl Default for Shared {
    fn default() -> Shared {
        Shared {
            stripes: (0..STRIPES).map(|_| AtomicBool::new(false)).collect(),
            kick: Mutex::new(()),
            moves: AtomicU64::new(0),
            #[cfg(test)]
            budget: AtomicU64::new(u64::MAX),
            #[cfg(test)]
            stores: AtomicU64::new(0),
            #[cfg(test)]
            spoils: AtomicU64::new(0),
        }
    }
}

/// Reads after the first two of a lookup that saw a move in flight (or
/// is blind to moves): bucket 1, 2, 1, 2, 1.
const ODD_READS: u32 = 5;

impl Shared {
    /// The state of a table mapped read-only, which another engine may be
    /// writing: its moves never reach this counter. The counter starts odd
    /// ("a move in flight") and nothing writes it, so its lookups take the
    /// further reads of a move in flight on every miss (see `contains_in`),
    /// at no cost to a writer's lookups.
    pub(crate) fn blind() -> Shared {
        Shared {
            moves: AtomicU64::new(1),
            ..Shared::default()
        }
    }

    /// Relocations done since this state was created.
    pub(crate) fn moves(&self) -> u64 {
        self.moves.load(Ordering::Relaxed) / 2
    }
}

/// Holds one or two stripe locks; releases them when dropped.
struct Stripes<'a> {
    shared: &'a Shared,
    held: [usize; 2],
    n: usize,
}

impl Drop for Stripes<'_> {
    fn drop(&mut self) {
        for &s in &self.held[..self.n] {
            self.shared.stripes[s].store(false, Ordering::Release);
        }
    }
}

/// What a sweep did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Swept {
    /// Slots cleared (dead as of the sweep's day).
    pub cleared: u64,
    /// The newest day among the live slots the sweep read; 0 when none.
    pub newest: u32,
}

/// Evaluates `$body` with `$geo` bound to geometry `$of` as a constant
/// of its bucket shape (`Geometry::shape`, one copy of `$body` per shape,
/// with its word count and lane width constants: a negative bucket is then
/// a few instructions a word, where the general loop pays several times
/// that), or to `$of` itself for a table of another slot count (every
/// table a plan makes has its shape's).
macro_rules! with_shape {
    ($of:expr, $geo:ident => $body:expr) => {{
        let of: Geometry = $of;
        macro_rules! shaped {
            ($per_word:literal) => {{
                const SHAPE: Geometry = Geometry::shape($per_word);
                if SHAPE == of {
                    let $geo = SHAPE;
                    $body
                } else {
                    let $geo = of;
                    $body
                }
            }};
        }
        // Matched on the fingerprint's width, not on `per_word` (a
        // division on every call); `shaped!` checks the whole shape anyway.
        match of.fp_bits {
            32 => shaped!(2),
            21 => shaped!(3),
            16 => shaped!(4),
            12 => shaped!(5),
            10 => shaped!(6),
            9 => shaped!(7),
            8 => shaped!(8),
            _ => {
                let $geo = of;
                $body
            }
        }
    }};
}

/// Keys a batch lookup locates ahead of the ones it tests
/// ([`Table::contains_many`]): their 32 lines in flight at once.
const GROUP: usize = 16;

/// A key's place in one table: its fingerprint and its two buckets.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Located {
    fp: u64,
    b1: u64,
    b2: u64,
}

/// A table over a caller-provided body.
pub(crate) struct Table<'a> {
    body: &'a [Block],
    geo: Geometry,
    retention: u32,
    shared: &'a Shared,
    /// The last day this table's tags can be read against (see
    /// [`Table::swept_on`]); `u32::MAX` when the caller keeps the sweep
    /// interval itself.
    readable_until: u32,
}

impl<'a> Table<'a> {
    /// A table of `body.len()` buckets keeping days for `retention` days
    /// (1..=[`MAX_RETENTION`]). An all-zero body is an empty table.
    pub(crate) fn new(
        body: &'a [Block],
        geo: Geometry,
        retention: u32,
        shared: &'a Shared,
    ) -> Table<'a> {
        // Checked when the file is opened; a table is made per call.
        debug_assert!(!body.is_empty(), "a table needs a bucket");
        debug_assert!(
            (1..=MAX_RETENTION).contains(&retention),
            "retention {retention} days"
        );
        debug_assert_eq!(geo, Geometry::with_fps_per_word(geo.per_word()));
        Table {
            body,
            geo,
            retention,
            shared,
            readable_until: u32::MAX,
        }
    }

    /// The view of a table last swept on day `swept`: lookups and counts on
    /// a later day than the sweep interval allows read the tags against
    /// the last day they still tell apart.
    ///
    /// Nothing sweeps a table that takes no writes (an engine opened read
    /// only, or one that only answers lookups: lookups never rotate), and
    /// past [`max_sweep_interval`] days a dead tag would read as a live one
    /// (a key expired for months present again). Every slot still there was
    /// live at that sweep (its day at least `swept - retention`) or written
    /// since, on a day before `swept + interval` (a writer on a later day
    /// waits for a sweep first), so read against a day up to `swept +
    /// interval` (and not before its own day less one: tomorrow) its age is
    /// exact. A lookup that loaded `swept` before a catch-up sweep and reads
    /// a key inserted after it may miss that key: the lookup began before
    /// the insert did.
    pub(crate) fn swept_on(self, swept: u32) -> Table<'a> {
        Table {
            readable_until: swept.saturating_add(max_sweep_interval(self.retention)),
            ..self
        }
    }

    /// What a lookup or count on `today` reads the tags against: the day
    /// (`today`, or the last day the tags are readable on, see
    /// [`Table::swept_on`]), and how many days before it are still live on
    /// `today` (`None`: none are).
    #[inline(always)]
    fn read_on(&self, today: u32) -> (u32, Option<u32>) {
        let on = today.min(self.readable_until);
        (on, self.retention.checked_sub(today - on))
    }

    fn nbuckets(&self) -> u64 {
        self.body.len() as u64
    }

    /// The key's fingerprint and its two buckets.
    #[inline]
    fn locate(&self, h: KeyHash) -> (u64, u64, u64) {
        let fp = 1 + ((u128::from(h.lo) * u128::from(self.geo.fp_mask())) >> 64) as u64;
        let b1 = block_index(h, self.nbuckets());
        (fp, b1, self.alt(b1, fp))
    }

    /// The other bucket of a fingerprint that sits in bucket `b`.
    #[inline]
    fn alt(&self, b: u64, fp: u64) -> u64 {
        let n = self.nbuckets();
        let hf = ((u128::from(fmix64(fp)) * u128::from(n)) >> 64) as u64;
        let a = hf + n - b;
        if a >= n {
            a - n
        } else {
            a
        }
    }

    #[inline]
    fn fp_of(&self, block: &Block, i: u32) -> u64 {
        let (w, s) = self.geo.fp_pos(i);
        (block[w].load(Ordering::Acquire) >> s) & self.geo.fp_mask()
    }

    #[inline]
    fn tag_of(&self, block: &Block, i: u32) -> u32 {
        let (w, s) = self.geo.day_pos(i);
        ((block[w].load(Ordering::Acquire) >> s) & DAY_MASK) as u32
    }

    #[inline]
    fn live(&self, tag: u32, today: u32) -> bool {
        let age = age(tag, today);
        age <= self.retention || age == TOMORROW
    }

    /// Whether slot `i` is free for an insert: empty, or dead.
    #[inline]
    fn free(&self, block: &Block, i: u32, today: u32) -> bool {
        self.fp_of(block, i) == 0 || !self.live(self.tag_of(block, i), today)
    }

    // ---- readers -------------------------------------------------------

    /// Issues the loads of both of the key's buckets (a batch lookup's
    /// next group, whose lines arrive while the current group is tested).
    #[inline]
    pub(crate) fn prefetch(&self, h: KeyHash) {
        self.locate_ahead(h);
    }

    /// The key's fingerprint and buckets, their loads issued: a batch
    /// locates the next group of keys while it tests the current one
    /// ([`Table::contains_many`]).
    #[inline]
    pub(crate) fn locate_ahead(&self, h: KeyHash) -> Located {
        let (fp, b1, b2) = self.locate(h);
        crate::filter::prefetch(&self.body[b1 as usize]);
        crate::filter::prefetch(&self.body[b2 as usize]);
        Located { fp, b1, b2 }
    }

    /// True when the key's fingerprint is in one of its buckets with a day
    /// in `[first_day, today]` (or tomorrow, see the module comment). Never
    /// false for a key inserted on such a day and not removed since, while
    /// the retention holds; true for another key with the chance measured
    /// in `docs/fingerprint.md`. Lock-free.
    #[inline]
    pub(crate) fn contains_since(&self, h: KeyHash, first_day: u32, today: u32) -> bool {
        self.contains_at(self.locate_ahead(h), first_day, today)
    }

    /// [`Table::contains_since`] for a key located by
    /// [`Table::locate_ahead`] on this table.
    pub(crate) fn contains_at(&self, at: Located, first_day: u32, today: u32) -> bool {
        with_shape!(self.geo, geo => self.contains_in(geo, at, first_day, today))
    }

    /// [`Table::contains_since`] for every key of `hashes`, appended to
    /// `out`, pipelined: both buckets of each of the next [`GROUP`] keys
    /// are loaded before the current ones are tested. The bucket shape is
    /// matched once for the batch and each key located once.
    pub(crate) fn contains_many(
        &self,
        hashes: &[KeyHash],
        first_day: u32,
        today: u32,
        out: &mut Vec<bool>,
    ) {
        with_shape!(self.geo, geo => self.contains_many_in(geo, hashes, first_day, today, out))
    }

    /// [`Table::contains_many`] with the table's geometry `geo`, as
    /// [`Table::contains_in`].
    #[inline(always)]
    fn contains_many_in(
        &self,
        geo: Geometry,
        hashes: &[KeyHash],
        first_day: u32,
        today: u32,
        out: &mut Vec<bool>,
    ) {
        let none = Located {
            fp: 0,
            b1: 0,
            b2: 0,
        };
        let (mut current, mut next) = ([none; GROUP], [none; GROUP]);
        let mut groups = hashes.chunks(GROUP);
        let locate = |g: &[KeyHash], into: &mut [Located; GROUP]| {
            for (at, h) in into.iter_mut().zip(g) {
                *at = self.locate_ahead(*h);
            }
            g.len()
        };
        let mut n = groups.next().map_or(0, |g| locate(g, &mut current));
        while n > 0 {
            let m = groups.next().map_or(0, |g| locate(g, &mut next));
            out.extend(
                current[..n]
                    .iter()
                    .map(|at| self.contains_in(geo, *at, first_day, today)),
            );
            std::mem::swap(&mut current, &mut next);
            n = m;
        }
    }

    /// [`Table::contains_at`] with the table's geometry `geo` (the
    /// constant of its shape, see `with_shape!`, or the table's own).
    #[inline(always)]
    fn contains_in(&self, geo: Geometry, at: Located, first_day: u32, today: u32) -> bool {
        let (today, Some(keep)) = self.read_on(today) else {
            return false;
        };
        if first_day > today {
            return false;
        }
        let max_age = (today - first_day).min(keep);
        let Located { fp, b1, b2 } = at;
        let (b1, b2) = (&self.body[b1 as usize], &self.body[b2 as usize]);
        let has = |b| bucket_has(geo, b, fp, today, max_age);
        loop {
            let s1 = self.shared.moves.load(Ordering::Acquire);
            if has(b1) || has(b2) {
                return true;
            }
            // A move in flight may have carried the entry from bucket 2 to
            // bucket 1 between the two reads: the third read sees it. A
            // reader blind to the writer's counter (a read-only engine
            // beside a writer) always sees it odd (`Shared::blind`) and
            // cannot tell how many moves overlapped its reads (it may be
            // descheduled between two of them), so the reads go on
            // alternating: to miss the entry, a move must fall between
            // every two of them.
            if s1 & 1 == 1 && (0..ODD_READS).any(|i| has(if i % 2 == 0 { b1 } else { b2 })) {
                return true;
            }
            fence(Ordering::Acquire);
            if self.shared.moves.load(Ordering::Relaxed) == s1 {
                return false;
            }
        }
    }

    /// Slots holding a fingerprint, live or dead (a scan).
    pub(crate) fn count_occupied(&self) -> u64 {
        crate::filter::scan(self.body)
            .map(|b| u64::from(self.occupied(b).count_ones()))
            .sum()
    }

    /// Slots holding a live fingerprint on day `today` (a scan).
    pub(crate) fn count_live(&self, today: u32) -> u64 {
        crate::filter::scan(self.body)
            .map(|b| self.live_in(b, today))
            .sum()
    }

    /// Live slots of one bucket on `today`.
    #[inline]
    fn live_in(&self, block: &Block, today: u32) -> u64 {
        let (on, Some(keep)) = self.read_on(today) else {
            return 0;
        };
        let (occupied, dead) = self.slot_masks_kept(block, on, keep);
        u64::from((occupied & !dead).count_ones())
    }

    /// [`Table::count_live`] read off at most `sample` buckets spread evenly
    /// over the table and scaled to all of them: exact when the table has
    /// no more buckets than that. Buckets are chosen by hash, so every
    /// stretch of the table holds the same mix of keys.
    pub(crate) fn count_live_sampled(&self, today: u32, sample: usize) -> u64 {
        let n = self.body.len();
        if n <= sample {
            return self.count_live(today);
        }
        let step = n / sample.max(1);
        let seen: u64 = self
            .body
            .iter()
            .step_by(step)
            .map(|b| self.live_in(b, today))
            .sum();
        let buckets = n.div_ceil(step) as u64;
        ((u128::from(seen) * n as u128 + u128::from(buckets) / 2) / u128::from(buckets)) as u64
    }

    // ---- writers -------------------------------------------------------

    /// Records the key as seen on `today`: updates the day of a live slot
    /// with its fingerprint, or fills a free (empty or dead) slot, relocating
    /// other entries when both buckets are full. Callers must not insert or
    /// remove the same key from two threads at once (the engine's per-key
    /// stripes); everything else may run concurrently.
    pub(crate) fn insert(&self, h: KeyHash, today: u32) -> Insert {
        self.insert_dated(h, today, today)
    }

    /// Records the key as seen on `day`, a day of the retention as of
    /// `today` (a backfill, or the replay of a logged insert): as
    /// [`Table::insert`], except that a live slot's day only ever moves
    /// forward (a slot dated after `day` keeps its day). A `day` outside
    /// `[today - retention, today + 1]` is not recorded and returns
    /// `Updated` (it would be dead on arrival).
    pub(crate) fn insert_dated(&self, h: KeyHash, day: u32, today: u32) -> Insert {
        if day > today.saturating_add(1) || today.saturating_sub(day) > self.retention {
            return Insert::Updated;
        }
        let (fp, b1, b2) = self.locate(h);
        {
            let _held = self.lock(b1, b2);
            if let Some(done) = self.insert_locked(fp, b1, b2, day, today) {
                return done;
            }
        }
        let _kick = self.shared.kick.lock();
        // One look more than searches: the last path's moves may have made
        // the room (answering `Full` then grew the chain with room here).
        for attempt in 0..=MAX_ATTEMPTS {
            {
                let _held = self.lock(b1, b2);
                if let Some(done) = self.insert_locked(fp, b1, b2, day, today) {
                    return done;
                }
            }
            if attempt == MAX_ATTEMPTS {
                break;
            }
            let Some(path) = self.search(b1, b2, today) else {
                return Insert::Full;
            };
            #[cfg(test)]
            self.spoil(&path, today);
            self.relocate(&path, today);
        }
        Insert::Full
    }

    /// Test hook ([`Shared::spoils`]): fills every free slot of the path's
    /// last bucket with another fingerprint, as concurrent inserts would.
    #[cfg(test)]
    fn spoil(&self, path: &[(u64, u32)], today: u32) {
        if self.shared.spoils.load(Ordering::Relaxed) == 0 {
            return;
        }
        self.shared.spoils.fetch_sub(1, Ordering::Relaxed);
        let Some(&(end, _)) = path.last() else {
            return;
        };
        let _held = self.lock(end, end);
        let block = &self.body[end as usize];
        for i in 0..self.geo.slots {
            if self.free(block, i, today) {
                let fp = 1 + (end * 31 + u64::from(i)) % (self.geo.fp_mask() - 1);
                self.write_slot(block, i, fp, today & DAY_MASK as u32);
            }
        }
    }

    /// Insert with both buckets' stripes held; `None` when both are full.
    ///
    /// Each fingerprint word is matched whole (`match_lanes`) against the
    /// key's fingerprint and against 0 (empty slots); a day is read only
    /// for a slot holding the fingerprint. The new entry goes to the
    /// bucket with more empty slots (two choices keep buckets even), and
    /// only when neither has one to a dead slot (a day past the retention
    /// that the daily sweep has not cleared yet), found slot by slot.
    fn insert_locked(&self, fp: u64, b1: u64, b2: u64, day: u32, today: u32) -> Option<Insert> {
        let tag = day & DAY_MASK as u32;
        let new_age = age(tag, today);
        let buckets = if b1 == b2 { &[b1][..] } else { &[b1, b2][..] };
        let mut dead_match = None;
        let mut empty = [(0u32, None::<u32>); 2];
        let (pw, bits) = (self.geo.per_word(), self.geo.fp_bits);
        for (k, &b) in buckets.iter().enumerate() {
            let block = &self.body[b as usize];
            for w in 0..self.geo.fp_words() {
                let word = block[w].load(Ordering::Acquire);
                let lanes = self.slot_lanes(w);
                let mut hits = match_lanes(word, fp, bits, pw) & lanes;
                while hits != 0 {
                    let i = w as u32 * pw + hits.trailing_zeros() / bits;
                    hits &= hits - 1;
                    let a = age(self.tag_of(block, i), today);
                    if a <= self.retention || a == TOMORROW {
                        // Forward only: "tomorrow" is the newest age, then 0, 1, ...
                        let newer = |x: u32| if x == TOMORROW { 0 } else { x + 1 };
                        if newer(new_age) < newer(a) {
                            self.set_tag(block, i, tag);
                        }
                        return Some(Insert::Updated);
                    }
                    dead_match.get_or_insert((block, i));
                }
                let empties = match_lanes(word, 0, bits, pw) & lanes;
                if empties != 0 {
                    empty[k].0 += lanes_set(empties, bits, pw);
                    empty[k]
                        .1
                        .get_or_insert(w as u32 * pw + empties.trailing_zeros() / bits);
                }
            }
        }
        if let Some((block, i)) = dead_match {
            self.set_tag(block, i, tag);
            return Some(Insert::New);
        }
        let k = usize::from(empty[1].0 > empty[0].0);
        let (block, i) = match empty[k].1 {
            Some(i) => (&self.body[buckets[k] as usize], i),
            None => buckets.iter().find_map(|&b| {
                let block = &self.body[b as usize];
                (0..self.geo.slots)
                    .find(|&i| self.free(block, i, today))
                    .map(|i| (block, i))
            })?,
        };
        self.write_slot(block, i, fp, tag);
        Some(Insert::New)
    }

    /// The lanes of fingerprint word `w` that hold slots, as a
    /// `match_lanes` mask: every lane but the last word's spare ones.
    #[inline]
    fn slot_lanes(&self, w: usize) -> u64 {
        let (pw, bits) = (self.geo.per_word(), self.geo.fp_bits);
        let all = LANE_ONES[pw as usize];
        match self.geo.slots.saturating_sub(w as u32 * pw) {
            n if n >= pw => all,
            n => all & ((1u64 << (n * bits)) - 1),
        }
    }

    /// Deletes one live slot with the key's fingerprint. Removing a key that
    /// was never inserted deletes the slot of another key with the same
    /// fingerprint and bucket, if there is one: a false negative for that
    /// key. Only remove what was inserted.
    pub(crate) fn remove(&self, h: KeyHash, today: u32) -> bool {
        let (fp, b1, b2) = self.locate(h);
        let _held = self.lock(b1, b2);
        for b in [b1, b2] {
            let block = &self.body[b as usize];
            for i in 0..self.geo.slots {
                if self.fp_of(block, i) == fp && self.live(self.tag_of(block, i), today) {
                    self.set_fp(block, i, 0);
                    return true;
                }
            }
        }
        false
    }

    /// Clears every dead slot (day older than the retention) as of `today`
    /// and returns how many. Readers never wait: the sweep locks one
    /// bucket's stripe at a time, only for buckets with a dead slot.
    pub(crate) fn sweep(&self, today: u32) -> u64 {
        self.sweep_by(|| today).cleared
    }

    /// [`Table::sweep`] with the day read from `today` again under each
    /// stripe it takes, for a sweep that runs beside inserts while the
    /// clock moves: an insert that wrote its bucket before the sweep took
    /// the stripe read its day earlier, so with a clock that does not go
    /// back its tag is never younger than the day the sweep tests it
    /// against (a sweep with a fixed day would clear tags written two days
    /// after it, which read as dead).
    ///
    /// It also reports the newest day among the live slots it read (each
    /// bucket once, after clearing it): a slot it did not see was written
    /// or moved by an insert that ran meanwhile.
    pub(crate) fn sweep_by(&self, today: impl Fn() -> u32) -> Swept {
        let mut out = Swept::default();
        let mut day = today();
        for (b, block) in crate::filter::scan(self.body).enumerate() {
            // One pass: which slots are dead, and the newest live day.
            // A slot that dies before the clearing below read the clock
            // again only makes `newest` later than it is (a later drop).
            let (occupied, dead) = self.slot_masks(block, day);
            let live = occupied & !dead;
            if live != 0 && out.newest <= day {
                self.newest_in(block, live, day, &mut out.newest);
            }
            if dead == 0 {
                continue;
            }
            let _held = self.lock(b as u64, b as u64);
            day = today();
            let (_, mut dead) = self.slot_masks(block, day);
            while dead != 0 {
                self.set_fp(block, dead.trailing_zeros(), 0);
                dead &= dead - 1;
                out.cleared += 1;
            }
        }
        out
    }

    /// A bucket's occupied slots (fingerprint not 0) and, among them, the
    /// dead ones on `today`, as masks with bit `i` for slot `i`: read a
    /// word at a time (`match_lanes`, `dead_tags`, `gather`).
    #[inline]
    fn slot_masks(&self, block: &Block, today: u32) -> (u64, u64) {
        self.slot_masks_kept(block, today, self.retention)
    }

    /// [`Table::slot_masks`] with slots older than `keep` days before
    /// `today` dead (a lookup past the sweep interval: see
    /// [`Table::read_on`]).
    #[inline]
    fn slot_masks_kept(&self, block: &Block, today: u32, keep: u32) -> (u64, u64) {
        let occupied = self.occupied(block);
        let mut dead = 0;
        for (first, word) in self.day_words(block) {
            dead |= gather(dead_tags(word, today, keep), DAYS_PER_WORD) << first;
        }
        (occupied, occupied & dead)
    }

    /// A bucket's occupied slots (fingerprint not 0), bit `i` for slot `i`.
    #[inline]
    fn occupied(&self, block: &Block) -> u64 {
        let (pw, bits) = (self.geo.per_word(), self.geo.fp_bits);
        let mut occupied = 0;
        for (w, word) in block.iter().take(self.geo.fp_words()).enumerate() {
            let lanes =
                self.slot_lanes(w) & !match_lanes(word.load(Ordering::Acquire), 0, bits, pw);
            occupied |= gather(lanes, pw) << (w as u32 * pw);
        }
        occupied
    }

    /// A bucket's day words, each with the first slot whose tag it holds.
    #[inline]
    fn day_words<'b>(&self, block: &'b Block) -> impl Iterator<Item = (u32, u64)> + 'b {
        let words = self.geo.slots.div_ceil(DAYS_PER_WORD) as usize;
        block[self.geo.fp_words()..][..words]
            .iter()
            .zip((0..).step_by(DAYS_PER_WORD as usize))
            .map(|(w, first)| (first, w.load(Ordering::Acquire)))
    }

    /// Raises `newest` to the newest day among the `live` slots of a
    /// bucket on `today` (tomorrow for a slot written by a writer whose
    /// clock turned already). Slots are ranked by distance from tomorrow
    /// (tomorrow 0, today 1, a day of age `a` is `a + 1`); one comparison a
    /// day word finds those ranked above `newest`, and only they are read
    /// one by one: after the first buckets, almost none.
    #[inline]
    fn newest_in(&self, block: &Block, live: u64, today: u32, newest: &mut u32) {
        let tomorrow = today.saturating_add(1);
        // Live tags rank below retention + 2; `newest` is at most tomorrow.
        let bound = (tomorrow - (*newest).min(tomorrow)).min(self.retention + 2);
        let mut above = 0;
        for (first, word) in self.day_words(block) {
            above |= gather(tags_below(word, tomorrow, bound), DAYS_PER_WORD) << first;
        }
        let mut above = above & live;
        while above != 0 {
            let i = above.trailing_zeros();
            above &= above - 1;
            *newest = (*newest).max(match age(self.tag_of(block, i), today) {
                TOMORROW => tomorrow,
                a => today - a.min(today),
            });
        }
    }

    /// Sweeps from the day of the last sweep to `today` in steps of at most
    /// [`max_sweep_interval`] days, so that a table left alone for longer
    /// (no insert since `last_swept + interval`) is cleared before its old
    /// tags wrap. Returns the slots cleared, and the newest live day the
    /// last step read; the caller then records `today` as the last sweep.
    pub(crate) fn catch_up(&self, last_swept: u32, today: u32) -> Swept {
        let step = max_sweep_interval(self.retention);
        let mut day = last_swept;
        let mut cleared = 0;
        loop {
            day = day.saturating_add(step).min(today);
            let s = self.sweep_by(|| day);
            cleared += s.cleared;
            if day >= today {
                return Swept { cleared, ..s };
            }
        }
    }

    // ---- kicks ---------------------------------------------------------

    /// Breadth-first search from the key's buckets for a bucket with a free
    /// slot, without locks (the caller holds the kick mutex). Returns the
    /// path as (bucket, slot) steps: the entry at step `j` moves to the
    /// bucket of step `j + 1`; the last step is the bucket with room.
    fn search(&self, b1: u64, b2: u64, today: u32) -> Option<Vec<(u64, u32)>> {
        // (bucket, parent node, slot in the parent whose entry moves here)
        let mut nodes: Vec<(u64, usize, u32)> = vec![(b1, usize::MAX, 0)];
        if b2 != b1 {
            nodes.push((b2, usize::MAX, 0));
        }
        let mut seen: HashSet<u64> = nodes.iter().map(|n| n.0).collect();
        let mut head = 0;
        while head < nodes.len() {
            let x = nodes[head].0;
            let block = &self.body[x as usize];
            for i in 0..self.geo.slots {
                let fp = self.fp_of(block, i);
                if fp == 0 {
                    continue;
                }
                let y = self.alt(x, fp);
                if nodes.len() >= MAX_SEARCH || !seen.insert(y) {
                    continue;
                }
                nodes.push((y, head, i));
                let target = &self.body[y as usize];
                if (0..self.geo.slots).any(|j| self.free(target, j, today)) {
                    let mut path = vec![(y, 0)];
                    let mut n = nodes.len() - 1;
                    while nodes[n].1 != usize::MAX {
                        let (_, parent, slot) = nodes[n];
                        path.push((nodes[parent].0, slot));
                        n = parent;
                    }
                    path.reverse();
                    return Some(path);
                }
            }
            head += 1;
        }
        None
    }

    /// Executes a path from its free end backwards; stops at the first move
    /// that a concurrent writer spoiled. Each completed move is a whole
    /// relocation, so stopping anywhere leaves a valid table.
    fn relocate(&self, path: &[(u64, u32)], today: u32) {
        for j in (0..path.len() - 1).rev() {
            let (src, slot) = path[j];
            let dst = path[j + 1].0;
            if !self.move_entry(src, slot, dst, today) {
                return;
            }
        }
    }

    /// Moves the entry in slot `slot` of `src` to a free slot of `dst`, its
    /// other bucket: new copy first, old slot cleared after.
    fn move_entry(&self, src: u64, slot: u32, dst: u64, today: u32) -> bool {
        let _held = self.lock(src, dst);
        let from = &self.body[src as usize];
        let to = &self.body[dst as usize];
        let fp = self.fp_of(from, slot);
        if fp == 0 || self.alt(src, fp) != dst {
            return false;
        }
        let tag = self.tag_of(from, slot);
        if !self.live(tag, today) {
            return false; // it died: the slot is free already
        }
        let Some(free) = (0..self.geo.slots).find(|&j| self.free(to, j, today)) else {
            return false;
        };
        let s = self.shared.moves.load(Ordering::Relaxed);
        self.shared.moves.store(s + 1, Ordering::Relaxed);
        fence(Ordering::Release);
        self.write_slot(to, free, fp, tag);
        self.set_fp(from, slot, 0);
        self.shared.moves.store(s + 2, Ordering::Release);
        true
    }

    // ---- stores (stripes held) -----------------------------------------

    /// Locks the stripes of buckets `a` and `b` in stripe order.
    fn lock(&self, a: u64, b: u64) -> Stripes<'_> {
        let (sa, sb) = (a as usize % STRIPES, b as usize % STRIPES);
        let (lo, hi) = (sa.min(sb), sa.max(sb));
        let mut held = Stripes {
            shared: self.shared,
            held: [lo, hi],
            n: 0,
        };
        let n = if lo == hi { 1 } else { 2 };
        for &s in &[lo, hi][..n] {
            let lock = &self.shared.stripes[s];
            let mut spins = 0u32;
            while lock
                .compare_exchange_weak(false, true, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                }
            }
            held.n += 1;
        }
        held
    }

    /// Fills slot `i`: a dead fingerprint is cleared first, then the day is
    /// stored, then the fingerprint, so no reader pairs one slot's
    /// fingerprint with another's day.
    fn write_slot(&self, block: &Block, i: u32, fp: u64, tag: u32) {
        let old = self.fp_of(block, i);
        if old != 0 && old != fp {
            self.set_fp(block, i, 0);
        }
        self.set_tag(block, i, tag);
        if old != fp {
            self.set_fp(block, i, fp);
        }
    }

    fn set_fp(&self, block: &Block, i: u32, fp: u64) {
        let (w, s) = self.geo.fp_pos(i);
        self.set_field(&block[w], s, self.geo.fp_mask(), fp);
    }

    fn set_tag(&self, block: &Block, i: u32, tag: u32) {
        let (w, s) = self.geo.day_pos(i);
        self.set_field(&block[w], s, DAY_MASK, u64::from(tag));
    }

    /// One field of a word. The bucket's stripe is held, so no other writer
    /// stores to this word: a load and a release store lose nothing.
    fn set_field(&self, word: &AtomicU64, shift: u32, mask: u64, value: u64) {
        let old = word.load(Ordering::Relaxed);
        let new = (old & !(mask << shift)) | (value << shift);
        #[cfg(test)]
        {
            let left = self.shared.budget.load(Ordering::Relaxed);
            if left == 0 {
                return; // the simulated process has died
            }
            if left != u64::MAX {
                self.shared.budget.store(left - 1, Ordering::Relaxed);
            }
            self.shared.stores.fetch_add(1, Ordering::Relaxed);
        }
        word.store(new, Ordering::Release);
    }
}

/// Days since a tag was written, modulo the ring.
#[inline]
fn age(tag: u32, today: u32) -> u32 {
    today.wrapping_sub(tag) & (DAY_RING - 1)
}

/// Whether `block` (a bucket of shape `geo`) holds fingerprint `fp` with a
/// day at most `max_age` before `today` (or tomorrow). All fingerprint
/// words are tested before any day is read: a bucket without the
/// fingerprint, the usual case, is four operations a word and one branch.
#[inline(always)]
fn bucket_has(geo: Geometry, block: &Block, fp: u64, today: u32, max_age: u32) -> bool {
    let (pw, bits, mask) = (geo.per_word(), geo.fp_bits, geo.fp_mask());
    let mut any = 0;
    for word in block.iter().take(geo.fp_words()) {
        any |= any_lane(word.load(Ordering::Acquire), fp, bits, pw);
    }
    if any == 0 {
        return false;
    }
    // Some lane matches: which ones, exactly, from the words loaded again
    // (a move may have changed them since; the day test re-reads anyway).
    let mut hits = [0u64; BLOCK_WORDS];
    for (h, word) in hits.iter_mut().zip(block).take(geo.fp_words()) {
        *h = match_lanes(word.load(Ordering::Acquire), fp, bits, pw);
    }
    for (w, mut hits) in hits.into_iter().enumerate().take(geo.fp_words()) {
        while hits != 0 {
            let lane = hits.trailing_zeros() / bits;
            hits &= hits - 1;
            let i = w as u32 * pw + lane;
            if i >= geo.slots {
                break;
            }
            let (dw, ds) = geo.day_pos(i);
            let tag = block
                .get(dw)
                .map_or(0, |d| ((d.load(Ordering::Acquire) >> ds) & DAY_MASK) as u32);
            let a = age(tag, today);
            // Re-load: the fingerprint is still there, so the day read
            // after the first load is this fingerprint's own (or newer).
            if (a <= max_age || a == TOMORROW)
                && (block[w].load(Ordering::Acquire) >> (lane * bits)) & mask == fp
            {
                return true;
            }
        }
    }
    false
}

/// Non-zero exactly when some lane of `word` (each `bits` wide, `per_word`
/// of them) equals `fp`. The classic zero-lane test on `word ^ fp`: a lane
/// that is not zero neither sets its top bit here nor borrows from the
/// lane above, so the lowest zero lane always shows; lanes above it may
/// show falsely, which only [`match_lanes`] tells apart.
#[inline]
fn any_lane(word: u64, fp: u64, bits: u32, per_word: u32) -> u64 {
    let ones = LANE_ONES[per_word as usize];
    let x = word ^ (fp * ones);
    x.wrapping_sub(ones) & !x & (ones << (bits - 1))
}

/// The lanes of `word` (each `bits` wide, `per_word` of them) equal to
/// `fp`, as a mask with the low bit of every matching lane set.
#[inline]
fn match_lanes(word: u64, fp: u64, bits: u32, per_word: u32) -> u64 {
    // Branch-free (SWAR): x has a zero lane exactly where a lane equals
    // fp. Per lane, (x & low) + low sets the lane's top bit iff its lower
    // bits are not all zero, and never carries out of the lane (it is at
    // most 2^bits - 2); or-ing x adds the top bit itself.
    let ones = LANE_ONES[per_word as usize];
    let low = ones * (((1u64 << bits) - 1) >> 1);
    let high = ones << (bits - 1);
    let x = word ^ (fp * ones);
    let zero = !(((x & low) + low) | x) & high;
    zero >> (bits - 1)
}

/// How many lanes a `match_lanes` mask marks: one multiply adds every
/// lane's bit into the top lane (a count of at most 8 never carries out of
/// a lane of 8 bits or more).
#[inline]
fn lanes_set(hits: u64, bits: u32, per_word: u32) -> u32 {
    let sum = hits.wrapping_mul(LANE_ONES[per_word as usize]) >> ((per_word - 1) * bits);
    (sum & ((1u64 << bits) - 1)) as u32
}

/// The low bits of the lanes of a `match_lanes` mask (`per_word` lanes of
/// `64 / per_word` bits) gathered into bits `0..per_word`, lane `j` to bit
/// `j`: one multiply moves every lane's bit to its place in the top bits
/// (`GATHER` shows that no two land on the same bit, so nothing carries).
#[inline]
fn gather(lanes: u64, per_word: u32) -> u64 {
    lanes.wrapping_mul(GATHER[per_word as usize]) >> (64 - per_word)
}

/// Per fingerprints-a-word count `n` (lanes `b = 64 / n` bits apart): the
/// multiplier that moves bit `b * j` to bit `64 - n + j`, a 1 at
/// `64 - n - (b - 1) * j` for each lane `j`. Lane `i` times term `j` lands
/// on `64 - n + b * i - (b - 1) * j`; two pairs land on the same bit only
/// if `b - 1` divides `i - i'` and `b` divides `j - j'`, which for
/// `n <= 8 <= b` lanes means the same pair.
const GATHER: [u64; 9] = {
    let mut t = [0u64; 9];
    let mut n = 2;
    while n <= 8 {
        let b = 64 / n;
        let mut j = 0;
        while j < n {
            t[n as usize] |= 1u64 << (64 - n - (b - 1) * j);
            j += 1;
        }
        n += 1;
    }
    t
};

/// The first bit of each day tag of a day word.
const DAY_ONES: u64 = LANE_ONES[DAYS_PER_WORD as usize];
/// The top bit of each day tag of a day word.
const DAY_HIGH: u64 = DAY_ONES << (DAY_BITS - 1);

/// The tags of day word `word` whose distance `(base - tag) mod 512` is
/// below `bound` (at most 511), as a `match_lanes` mask (bit `9 * j` for
/// tag `j`). Branch-free: the distance, then the comparison, each lane by
/// lane in one subtraction.
#[inline]
fn tags_below(word: u64, base: u32, bound: u32) -> u64 {
    debug_assert!(bound < DAY_RING, "a bound of {bound} does not fit a tag");
    let w = word & (DAY_ONES * DAY_MASK); // bit 63 is not a tag's
    let d = u64::from(base & (DAY_RING - 1)) * DAY_ONES;
    // Lane-wise d - w: every lane of `d | HIGH` is at least 256 and every
    // lane of `w & !HIGH` at most 255, so no borrow leaves a lane; the xor
    // puts back each lane's true top bit (Hacker's Delight, 2-18).
    let e = ((d | DAY_HIGH) - (w & !DAY_HIGH)) ^ ((d ^ !w) & DAY_HIGH);
    let m = u64::from(bound) * DAY_ONES;
    // Lane-wise e >= m: the low eight bits compared by the same borrow-free
    // subtraction (its top bit set iff e's low bits >= m's), then the top
    // bits decide unless they are equal.
    let low_ge = (e | DAY_HIGH) - (m & !DAY_HIGH);
    let ge = ((e & !m) | (!(e ^ m) & low_ge)) & DAY_HIGH;
    (!ge & DAY_HIGH) >> (DAY_BITS - 1)
}

/// The tags of day word `word` that are dead on `today` for `retention`:
/// an age (`today - tag`) of `retention + 1..=510`, that is a distance
/// from `today - retention - 1` below `510 - retention`.
#[inline]
fn dead_tags(word: u64, today: u32, retention: u32) -> u64 {
    tags_below(
        word,
        today.wrapping_sub(retention + 1),
        TOMORROW - 1 - retention,
    )
}

/// Per fingerprints-a-word count: a 1 at the start of each lane.
const LANE_ONES: [u64; 9] = {
    let mut t = [0u64; 9];
    let mut per_word = 2;
    while per_word <= 8 {
        let bits = 64 / per_word;
        let mut lane = 0;
        while lane < per_word {
            t[per_word as usize] |= 1u64 << (lane * bits);
            lane += 1;
        }
        per_word += 1;
    }
    t
};

/// MurmurHash3's 64-bit finalizer: spreads a fingerprint over 64 bits.
#[inline]
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51afd7ed558ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ceb9fe1a85ec53);
    k ^ (k >> 33)
}

#[cfg(test)]
mod tests;
