//! One sub-filter file: a fixed header, then a page-aligned body of blocks,
//! mapped into memory.
//!
//! The byte layout is documented in `docs/format.md`; the table below is the
//! same, and [`Header::encode`]/[`Header::decode`] are the only code that
//! knows it.
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `TBLMSEG\0` |
//! | 8 | 4 | format version (1) |
//! | 12 | 4 | kind: 1 Bloom, 2 counting |
//! | 16 | 4 | cells per block (512 Bloom, 128 counting) |
//! | 20 | 4 | probes per key `k` |
//! | 24 | 8 | blocks |
//! | 32 | 8 | body offset (4096) |
//! | 40 | 8 | body length (blocks x 64) |
//! | 48 | 8 | seed fingerprint |
//! | 56 | 4 | span: 1 day, 2 week, 3 month, 4 custom |
//! | 60 | 4 | reserved, zero |
//! | 64 | 8 | custom span seconds (zero otherwise) |
//! | 72 | 8 | window index (signed) |
//! | 80 | 4 | sub-filter index in the chain |
//! | 84 | 4 | state: 1 open, 2 sealed |
//! | 88 | 4 | clean mark: 1 when the occupied count below is exact |
//! | 92 | 4 | header sequence number (see below) |
//! | 96 | 8 | occupied cells |
//! | 104 | 8 | planned keys (capacity) |
//! | 112 | 8 | target false-positive rate (IEEE 754 bits) |
//! | 120 | 4 | CRC32 of the body (valid when sealed) |
//! | 124 | 4 | CRC32 of bytes 0..124 |
//!
//! A fingerprint table (kind 3) is format version 2: the same fields, with
//! slots per bucket at 16 and the fingerprint width at 20, then
//!
//! | offset | size | field |
//! |---|---|---|
//! | 128 | 4 | retention in days after today (the table keeps `1 + this` days) |
//! | 132 | 4 | the day of the last sweep (days since the epoch, local) |
//! | 136 | 4 | reserved, zero |
//! | 140 | 4 | CRC32 of bytes 0..140 |
//!
//! Bloom and counting files are still version 1, byte for byte.
//! The header is kept twice, at offset 0 and at offset 2048, and every
//! rewrite goes to the copy that does not hold the newest version, with the
//! sequence number one higher. A torn rewrite (power loss in the middle of
//! it) therefore leaves the other copy intact: open takes the valid copy
//! with the higher sequence number, so no header update can leave a file
//! refused.

use std::fs::{File, OpenOptions};
use std::io::Read;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

use parking_lot::Mutex;

use memmap2::{Mmap, MmapMut, MmapOptions};

use crate::error::{Error, Result};
use crate::fill::Fill;
use crate::filter::{self, sizing, Block, Exclusive, KeyMasks, Kind, BLOCK_BYTES, MAX_K};
use crate::fingerprint::{self, Geometry, Insert, Table};
use crate::hash::KeyHash;
use crate::window::Span;

const MAGIC: [u8; 8] = *b"TBLMSEG\0";
/// The segment format version of Bloom and counting files.
pub(crate) const VERSION: u32 = 1;
/// The format version of fingerprint tables: version 1 and an extension.
pub(crate) const VERSION_TABLE: u32 = 2;
/// Bytes of header fields (version 2; a version 1 header is the first 128
/// and zeros); the header page is padded with zeros to 4096.
pub(crate) const HEADER_LEN: usize = 144;
/// Bytes of a version 1 header.
const HEADER_V1: usize = 128;
/// Where the second copy of the header starts.
pub(crate) const HEADER_COPY: u64 = 2048;
/// Where the body starts: one page after the file's start.
pub(crate) const BODY_OFFSET: u64 = 4096;

/// A chain grows at the fill expected after this many times its tail's
/// planned capacity (see `SubFilter::assemble`).
pub(crate) const GROWTH_MARGIN: f64 = 1.0 + 1.0 / 256.0;

/// The keys the geometry of sub-filter `index` of a chain is sized for:
/// its capacity for the first, and for the ones a chain grows the load
/// they stop taking keys at (`capacity x GROWTH_MARGIN`, see
/// `SubFilter::assemble`), so that a full one holds its rate. The first
/// keeps its plan: a window that receives what it planned pays nothing
/// for the margin, and the first one's excess at the trigger comes out of
/// the rates of the others (`Config::file_subfilter_plan`). Fingerprint
/// tables grow when an insert finds no room, not at a fill.
pub(crate) fn sized_for(kind: Kind, capacity: u64, index: u32) -> u64 {
    if index == 0 || kind == Kind::Fingerprint {
        return capacity;
    }
    let n = (capacity as f64 * GROWTH_MARGIN).ceil();
    if n >= u64::MAX as f64 {
        u64::MAX
    } else {
        n as u64
    }
}

/// What follows when a chain of `kind` can grow no more ("so ..." in the
/// errors that say why): what happens to the keys of the engine as it is,
/// and what plan a new engine would need (the plan is fixed at create).
pub(crate) fn chain_end(kind: Kind) -> String {
    format!(
        "nothing was written and {} (the plan is fixed at create: for this many keys, \
         create an engine with more planned keys per day, a larger growth factor or a \
         tightening nearer 1)",
        after_chain_end(kind)
    )
}

/// What fails once a chain of `kind` can grow no more, and until when.
pub(crate) fn after_chain_end(kind: Kind) -> &'static str {
    match kind {
        Kind::Fingerprint => {
            "writes of new keys fail until keys expire and free room in the chain's tables"
        }
        Kind::Counting => {
            "every insert into the window fails (each one counts, of a key it holds too; \
             removes go on) until the window ends and the next one takes writes"
        }
        Kind::Bloom => {
            "every write of a key the window does not hold fails until the window ends and \
             the next one takes writes"
        }
    }
}

/// Whether a segment still takes inserts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    Open,
    Sealed,
}

/// Which tier window and chain position a file belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Identity {
    pub span: Span,
    pub window: i64,
    pub index: u32,
}

/// In words, as error messages name it: `sub-filter 1 of day window
/// 20261102` (the window labelled as in file names).
impl std::fmt::Display for Identity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let span = match self.span {
            Span::Day => "day".to_string(),
            Span::Week => "week".to_string(),
            Span::Month => "month".to_string(),
            Span::Custom(secs) => format!("{secs}-second"),
        };
        let label =
            crate::window::label(self.span, self.window).unwrap_or_else(|| self.window.to_string());
        write!(f, "sub-filter {} of {span} window {label}", self.index)
    }
}

/// The decoded header.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Header {
    pub kind: Kind,
    pub k: u32,
    pub nblocks: u64,
    pub seed_fp: u64,
    pub id: Identity,
    pub state: State,
    pub clean: bool,
    pub occupied: u64,
    pub capacity: u64,
    pub target_fpr: f64,
    pub body_crc: u32,
    /// Incremented at every rewrite; picks the newer of the two copies.
    pub seq: u32,
    /// Fingerprint tables: days kept after today (0 otherwise).
    pub retention: u32,
    /// Fingerprint tables: the day of the last sweep (0 otherwise).
    pub swept: u32,
}

fn span_code(span: Span) -> (u32, u64) {
    match span {
        Span::Day => (1, 0),
        Span::Week => (2, 0),
        Span::Month => (3, 0),
        Span::Custom(s) => (4, s),
    }
}

fn le_u32(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    if let Some(s) = b.get(at..at + 4) {
        a.copy_from_slice(s);
    }
    u32::from_le_bytes(a)
}

fn le_u64(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    if let Some(s) = b.get(at..at + 8) {
        a.copy_from_slice(s);
    }
    u64::from_le_bytes(a)
}

impl Header {
    pub(crate) fn body_len(&self) -> u64 {
        self.nblocks.saturating_mul(BLOCK_BYTES)
    }

    /// Cells per block: bits, counters, or a fingerprint table's slots.
    pub(crate) fn cells_per_block(&self) -> u32 {
        match self.kind {
            Kind::Fingerprint => self.geometry().map_or(0, |g| g.slots),
            k => k.cells_per_block(),
        }
    }

    /// Cells of the whole body.
    pub(crate) fn cells(&self) -> u64 {
        self.nblocks
            .saturating_mul(u64::from(self.cells_per_block()))
    }

    /// A fingerprint table's bucket shape (`k` is its fingerprint width).
    pub(crate) fn geometry(&self) -> Option<Geometry> {
        match self.kind {
            Kind::Fingerprint => Geometry::from_fp_bits(self.k),
            _ => None,
        }
    }

    /// Encodes the header into its 144 bytes, checksums included (a
    /// version 1 header's 128 and zeros for Bloom and counting files).
    pub(crate) fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        let (span, secs) = span_code(self.id.span);
        b[0..8].copy_from_slice(&MAGIC);
        let table = self.kind == Kind::Fingerprint;
        let version = if table { VERSION_TABLE } else { VERSION };
        b[8..12].copy_from_slice(&version.to_le_bytes());
        b[12..16].copy_from_slice(&self.kind.code().to_le_bytes());
        b[16..20].copy_from_slice(&self.cells_per_block().to_le_bytes());
        b[20..24].copy_from_slice(&self.k.to_le_bytes());
        b[24..32].copy_from_slice(&self.nblocks.to_le_bytes());
        b[32..40].copy_from_slice(&BODY_OFFSET.to_le_bytes());
        b[40..48].copy_from_slice(&self.body_len().to_le_bytes());
        b[48..56].copy_from_slice(&self.seed_fp.to_le_bytes());
        b[56..60].copy_from_slice(&span.to_le_bytes());
        b[64..72].copy_from_slice(&secs.to_le_bytes());
        b[72..80].copy_from_slice(&self.id.window.to_le_bytes());
        b[80..84].copy_from_slice(&self.id.index.to_le_bytes());
        let state: u32 = match self.state {
            State::Open => 1,
            State::Sealed => 2,
        };
        b[84..88].copy_from_slice(&state.to_le_bytes());
        b[88..92].copy_from_slice(&u32::from(self.clean).to_le_bytes());
        b[92..96].copy_from_slice(&self.seq.to_le_bytes());
        b[96..104].copy_from_slice(&self.occupied.to_le_bytes());
        b[104..112].copy_from_slice(&self.capacity.to_le_bytes());
        b[112..120].copy_from_slice(&self.target_fpr.to_bits().to_le_bytes());
        b[120..124].copy_from_slice(&self.body_crc.to_le_bytes());
        let crc = crc32fast::hash(&b[..124]);
        b[124..128].copy_from_slice(&crc.to_le_bytes());
        if table {
            b[128..132].copy_from_slice(&self.retention.to_le_bytes());
            b[132..136].copy_from_slice(&self.swept.to_le_bytes());
            let crc = crc32fast::hash(&b[..140]);
            b[140..144].copy_from_slice(&crc.to_le_bytes());
        }
        b
    }

    /// Decodes and checks a header; every problem is a [`Error::Corrupt`]
    /// or [`Error::UnsupportedVersion`] naming `path`.
    ///
    /// The checks run in a fixed order (it decides which error a damaged
    /// file reports): the frame (length, magic, checksum), the version and
    /// kind, a table's trailer, the cell geometry, the body's extent, the
    /// reserved field, the span, state and clean mark, a table's plan, and
    /// the occupied count.
    pub(crate) fn decode(b: &[u8], path: &Path) -> Result<Header> {
        let d = Decoder { b, path };
        d.check_frame()?;
        let kind = d.version_and_kind()?;
        let table = kind == Kind::Fingerprint;
        let (retention, swept) = if table { d.table_trailer()? } else { (0, 0) };
        let (k, cells) = d.geometry(kind)?;
        let nblocks = d.extent()?;
        d.reserved(60)?;
        let span = d.span()?;
        let state = d.state()?;
        let clean = d.clean()?;
        let capacity = le_u64(b, 104);
        let target_fpr = f64::from_bits(le_u64(b, 112));
        if table {
            d.table_plan(k, nblocks, capacity, target_fpr)?;
        }
        let occupied = d.occupied(nblocks, cells)?;
        Ok(Header {
            kind,
            k,
            nblocks,
            seed_fp: le_u64(b, 48),
            id: Identity {
                span,
                window: le_u64(b, 72) as i64,
                index: le_u32(b, 80),
            },
            state,
            clean,
            occupied,
            capacity,
            target_fpr,
            body_crc: le_u32(b, 120),
            seq: le_u32(b, 92),
            retention,
            swept,
        })
    }

    /// Decodes the header page: the valid copy with the higher sequence
    /// number, or, when neither copy is valid, the first copy's error.
    pub(crate) fn decode_page(page: &[u8], path: &Path) -> Result<Header> {
        let a = Header::decode(page, path);
        let b = page
            .get(HEADER_COPY as usize..)
            .map(|p| Header::decode(p, path));
        match (a, b) {
            // Serial-number order, so the sequence may wrap.
            (Ok(a), Some(Ok(b))) => Ok(if (b.seq.wrapping_sub(a.seq) as i32) > 0 {
                b
            } else {
                a
            }),
            (Ok(a), _) => Ok(a),
            (Err(_), Some(Ok(b))) => Ok(b),
            (Err(e), _) => Err(e),
        }
    }

    /// Where the next rewrite goes: the copy that does not hold `seq`.
    fn slot(seq: u32) -> u64 {
        if seq.is_multiple_of(2) {
            0
        } else {
            HEADER_COPY
        }
    }
}

/// The steps of [`Header::decode`]: each reads and checks a group of
/// fields of one header copy `b`, naming `path` in its errors.
struct Decoder<'a> {
    b: &'a [u8],
    path: &'a Path,
}

impl Decoder<'_> {
    fn bad(&self, why: String) -> Error {
        Error::corrupt(self.path, why)
    }

    /// A reserved field is zero in every file this format writes: set,
    /// the file is of another format, whose other fields may mean
    /// something else.
    fn reserved(&self, at: usize) -> Result<()> {
        match le_u32(self.b, at) {
            0 => Ok(()),
            v => Err(self.bad(format!(
                "reserved field at byte {at}: expected 0, got {v} (a file of a newer format?)"
            ))),
        }
    }

    /// The version 1 length, the magic and the checksum of bytes 0..124.
    fn check_frame(&self) -> Result<()> {
        let b = self.b;
        if b.len() < HEADER_V1 {
            return Err(self.bad(format!("header is {} bytes, expected {HEADER_V1}", b.len())));
        }
        if b[0..8] != MAGIC {
            return Err(self.bad("not a timebloom segment (bad magic)".into()));
        }
        let crc = crc32fast::hash(&b[..124]);
        let stored = le_u32(b, 124);
        if crc != stored {
            return Err(self.bad(format!(
                "header checksum mismatch: expected {stored:#010x}, got {crc:#010x}"
            )));
        }
        Ok(())
    }

    /// The format version and the kind, which must go together (version 2
    /// for fingerprint tables, 1 for the others).
    fn version_and_kind(&self) -> Result<Kind> {
        let b = self.b;
        let version = le_u32(b, 8);
        if version != VERSION && version != VERSION_TABLE {
            return Err(Error::UnsupportedVersion {
                path: self.path.to_path_buf(),
                expected: VERSION_TABLE,
                got: version,
            });
        }
        let kind = Kind::from_code(le_u32(b, 12))
            .ok_or_else(|| self.bad(format!("unknown kind {}", le_u32(b, 12))))?;
        let table = kind == Kind::Fingerprint;
        if table != (version == VERSION_TABLE) {
            return Err(self.bad(format!(
                "format version {version} does not go with kind {}",
                kind.code()
            )));
        }
        Ok(kind)
    }

    /// A fingerprint table's extension (bytes 128..144): its length, its
    /// checksum, the retention and the reserved field; `(retention, swept)`.
    fn table_trailer(&self) -> Result<(u32, u32)> {
        let b = self.b;
        if b.len() < HEADER_LEN {
            return Err(self.bad(format!(
                "header is {} bytes, expected {HEADER_LEN}",
                b.len()
            )));
        }
        let crc = crc32fast::hash(&b[..140]);
        let stored = le_u32(b, 140);
        if crc != stored {
            return Err(self.bad(format!(
                "table header checksum mismatch: expected {stored:#010x}, got {crc:#010x}"
            )));
        }
        let retention = le_u32(b, 128);
        let swept = le_u32(b, 132);
        if !(1..=fingerprint::MAX_RETENTION).contains(&retention) {
            return Err(self.bad(format!(
                "table retention: expected 1..={}, got {retention}",
                fingerprint::MAX_RETENTION
            )));
        }
        self.reserved(136)?;
        Ok((retention, swept))
    }

    /// The probes per key (a table's fingerprint width) and the cells per
    /// block they go with: `(k, cells)`.
    fn geometry(&self, kind: Kind) -> Result<(u32, u32)> {
        let k = le_u32(self.b, 20);
        let expected_cells = if kind == Kind::Fingerprint {
            let g = Geometry::from_fp_bits(k).ok_or_else(|| {
                self.bad(format!(
                    "fingerprint width: expected 8, 9, 10, 12, 16, 21 or 32 bits, got {k}"
                ))
            })?;
            g.slots
        } else {
            if !(1..=MAX_K).contains(&k) {
                return Err(self.bad(format!("probes per key: expected 1..={MAX_K}, got {k}")));
            }
            kind.cells_per_block()
        };
        let cells = le_u32(self.b, 16);
        if cells != expected_cells {
            return Err(self.bad(format!(
                "cells per block: expected {expected_cells}, got {cells}"
            )));
        }
        Ok((k, cells))
    }

    /// The block count, the body offset and the body length; the blocks.
    fn extent(&self) -> Result<u64> {
        let b = self.b;
        let nblocks = le_u64(b, 24);
        if nblocks == 0 || nblocks > (u64::MAX - BODY_OFFSET) / BLOCK_BYTES {
            return Err(self.bad(format!("block count {nblocks} is out of range")));
        }
        let body_off = le_u64(b, 32);
        if body_off != BODY_OFFSET {
            return Err(self.bad(format!(
                "body offset: expected {BODY_OFFSET}, got {body_off}"
            )));
        }
        let body_len = le_u64(b, 40);
        if body_len != nblocks * BLOCK_BYTES {
            return Err(self.bad(format!(
                "body length: expected {}, got {body_len}",
                nblocks * BLOCK_BYTES
            )));
        }
        Ok(nblocks)
    }

    /// The span code and the custom span's seconds.
    fn span(&self) -> Result<Span> {
        let secs = le_u64(self.b, 64);
        Ok(match (le_u32(self.b, 56), secs) {
            (1, 0) => Span::Day,
            (2, 0) => Span::Week,
            (3, 0) => Span::Month,
            (4, s) if s > 0 => Span::Custom(s),
            (c, s) => return Err(self.bad(format!("unknown span {c} ({s} s)"))),
        })
    }

    fn state(&self) -> Result<State> {
        match le_u32(self.b, 84) {
            1 => Ok(State::Open),
            2 => Ok(State::Sealed),
            s => Err(self.bad(format!("unknown state {s}"))),
        }
    }

    fn clean(&self) -> Result<bool> {
        match le_u32(self.b, 88) {
            0 => Ok(false),
            1 => Ok(true),
            c => Err(self.bad(format!("clean mark: expected 0 or 1, got {c}"))),
        }
    }

    /// A table's width and buckets follow from its planned keys and rate
    /// (`sizing::plan`): read with another width or bucket count, every
    /// key's slots are looked for in the wrong places.
    fn table_plan(&self, k: u32, nblocks: u64, capacity: u64, target_fpr: f64) -> Result<()> {
        let plan = sizing::plan(Kind::Fingerprint, capacity, target_fpr);
        if (k, nblocks) != (plan.k, plan.nblocks) {
            return Err(self.bad(format!(
                "a table planned for {capacity} keys at a rate of {target_fpr:e} has \
                 {}-bit fingerprints in {} buckets, got {k}-bit in {nblocks}",
                plan.k, plan.nblocks
            )));
        }
        Ok(())
    }

    /// The occupied cells, at most the body's.
    fn occupied(&self, nblocks: u64, cells: u32) -> Result<u64> {
        let occupied = le_u64(self.b, 96);
        let total_cells = nblocks.saturating_mul(u64::from(cells));
        if occupied > total_cells {
            return Err(self.bad(format!(
                "occupied cells {occupied} exceed the {total_cells} cells"
            )));
        }
        Ok(occupied)
    }
}

enum Map {
    Writable(MmapMut),
    ReadOnly(Mmap),
}

impl Map {
    fn bytes(&self) -> &[u8] {
        match self {
            Map::Writable(m) => m,
            Map::ReadOnly(m) => m,
        }
    }
}

/// One mapped sub-filter file, shared (`Arc`) by every snapshot of the
/// engine's live set that names it.
///
/// A writable engine maps every file writable, sealed or not: sealing and
/// unsealing are a state change and a header rewrite, never a new mapping,
/// so the snapshots holding the file never see it change under them. The
/// write kernels (`insert`, `remove`) do not read the state: their callers
/// keep writes out of a sealed file, under the key's stripe (see
/// `SubFilter::stop_writes`).
pub(crate) struct SubFilter {
    path: PathBuf,
    file: File,
    map: Map,
    /// The header as opened or created: its geometry (kind, probes, blocks,
    /// identity, plan) never changes.
    header: Header,
    /// The header as last written (state, count, checksum, sequence): the
    /// lock also serializes header rewrites (a seal in the background and a
    /// checkpoint may both want one).
    disk: Mutex<Header>,
    /// `disk.state == Sealed`, readable without the lock: a checkpoint holds
    /// it through a whole msync, and a rotation asking whether a window is
    /// sealed must not wait for that.
    sealed_on_disk: AtomicBool,
    /// `Open` or `Sealed` (see `State`), read by writers under their stripe.
    state: AtomicU8,
    /// Occupied cells: exact, counted by writer thread (see `fill`), and
    /// the fill at which the chain grows: what the sizing model expects at
    /// the planned capacity. Boxed: its lanes take 2 KiB of lines that
    /// only writers touch, and kept inline they spread the fields every
    /// lookup reads (`map`, `header`) apart (the year of Bloom tiers'
    /// batch lookups measured 168-177 ns a key inline, 155-164 boxed and
    /// 150-164 before the lanes).
    occupied: Box<Fill>,
    /// The running count was taken from the body in this process (the file
    /// was created, recounted at open, or sealed here): a clean close can
    /// write it down without reading the body again.
    count_exact: AtomicBool,
    /// Some write changed the body since it was opened.
    touched: AtomicBool,
    /// A fingerprint table's in-memory state; `None` for other kinds.
    table: Option<TableState>,
    /// The file at `path` was replaced by a copy in large pages
    /// ([`SubFilter::rewrite_sealed`]): this object's handle and mapping
    /// belong to the unlinked old file, so it must never be written again.
    replaced: AtomicBool,
    /// A counting chain's lock, the first sub-filter's (see
    /// [`SubFilter::chain_lock`]).
    chain: Mutex<()>,
}

/// Sealed Bloom bodies from this size on are rewritten in large pages
/// ([`SubFilter::rewrite_sealed`]); below it the few page-table entries
/// of a window stay cached anyway.
const REWRITE_FROM: u64 = 8 << 20;

/// `TableState::scanned` before a sweep completed.
const UNSCANNED: u32 = u32::MAX;

/// What a mapped fingerprint table needs beside its body.
struct TableState {
    geo: Geometry,
    /// Days kept after today (`Header::retention`).
    retention: u32,
    /// The kernel's stripes, kick mutex and move counter.
    shared: fingerprint::Shared,
    /// The day of the last sweep, written into the header at every rewrite.
    swept: AtomicU32,
    /// An insert found no room (`Insert::Full`): the chain grows.
    full: AtomicBool,
    /// The newest day among the live slots that the last sweep completed
    /// in this process read ([`UNSCANNED`] before one).
    scanned: AtomicU32,
    /// Above every day an insert wrote or moved in this process: with
    /// `scanned`, a bound on every live slot's day (see `table_drained`).
    written: AtomicU32,
    /// Held by a sweep, and by a checkpoint while it copies the body: the
    /// shadow copy never sees a sweep half done.
    sweeping: Mutex<()>,
}

impl SubFilter {
    /// Creates, allocates and maps a new open sub-filter. The caller makes the
    /// directory entry durable (one directory fsync for several files).
    ///
    /// `write_zeros`: allocate by writing the zeros out rather than with
    /// `fallocate`. Blocks that `fallocate` reserves are "unwritten"
    /// extents; writing into them through the mapping makes the file
    /// system convert them, and on ext4 that drags the mapped pages into
    /// every journal commit, so each fsync of the write-ahead log also
    /// wrote segment pages (3.3 ms a sync instead of 0.16 ms, measured).
    /// The log's policies pay the write once, at creation.
    ///
    /// `table`: for a fingerprint table, the days it keeps after today and
    /// today's day (its first sweep day: an empty table needs none).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn create(
        path: &Path,
        kind: Kind,
        id: Identity,
        seed_fp: u64,
        capacity: u64,
        target_fpr: f64,
        write_zeros: bool,
        table: Option<(u32, u32)>,
    ) -> Result<SubFilter> {
        let plan = sizing::file_plan(kind, sized_for(kind, capacity, id.index), target_fpr);
        let (retention, swept) = match (kind, table) {
            (Kind::Fingerprint, Some(t)) => t,
            (Kind::Fingerprint, None) => {
                return Err(Error::config("a fingerprint table needs its retention"))
            }
            _ => (0, 0),
        };
        let header = Header {
            kind,
            k: plan.k,
            nblocks: plan.nblocks,
            seed_fp,
            id,
            state: State::Open,
            clean: false,
            occupied: 0,
            capacity,
            target_fpr,
            body_crc: 0,
            seq: 0,
            retention,
            swept,
        };
        // Only a rate far below any plan's asks this many blocks: the
        // ever tighter sub-filters of a chain that grew very long (a window
        // given many times its plan, more so with a growth factor of 1).
        // The plan is fixed at create, so the message says what happens to
        // the keys of the engine as it is (as a chain at its longest does),
        // and what plan a new engine would need.
        let len = BODY_OFFSET.checked_add(header.body_len()).ok_or_else(|| {
            Error::config(format!(
                "{}: sub-filter {} of this window's chain cannot be made: {capacity} keys \
                 at a rate of {target_fpr:.1e} need more blocks than a file holds (each \
                 sub-filter a chain grows has a lower rate), so {}",
                path.display(),
                id.index,
                chain_end(kind)
            ))
        })?;
        crate::file::check("create segment", path)?;
        crate::file::check_room(path, len)?;
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .map_err(|e| Error::io("create segment", path, e))?;
        if write_zeros {
            crate::file::check("allocate", path)?;
            crate::file::write_zeros(&file, path, len)?;
        } else {
            crate::file::allocate(&file, path, len)?;
        }
        for at in [0, HEADER_COPY] {
            file.write_all_at(&header.encode(), at)
                .map_err(|e| Error::io("write segment header", path, e))?;
        }
        crate::file::sync_all(&file, path, "fsync segment")?;
        let map = map_writable(&file, path, len)?;
        let sub = SubFilter::assemble(path, file, Map::Writable(map), header, 0);
        // A new file's body is all zeros: its count of 0 is exact.
        sub.count_exact.store(true, Ordering::Relaxed);
        sub.map_in();
        Ok(sub)
    }

    /// Opens an existing sub-filter file, checking its header against what
    /// the manifest says it is. Mapped writable, sealed or not (see
    /// [`SubFilter`]: a backfill unseals without a new mapping). A file
    /// whose header is not marked clean (an open file that was not closed
    /// cleanly) has its occupied count recomputed from the body.
    pub(crate) fn open(
        path: &Path,
        expect: Identity,
        seed_fp: u64,
        verify: bool,
    ) -> Result<SubFilter> {
        let (file, header, len) = open_checked(path, expect, seed_fp, true)?;
        let map = Map::Writable(map_writable(&file, path, len)?);
        let sub = SubFilter::assemble(path, file, map, header, header.occupied);
        // Not marked clean, the count is not exact, whatever the state (a
        // seal writes its header clean: one that is not was not written so).
        if !header.clean {
            sub.recount();
        }
        if verify {
            sub.verify_at_open()?;
        }
        if header.state == State::Open {
            // Mark dirty before taking writes: a crash from here on recounts.
            let mut disk = sub.disk.lock();
            disk.clean = false;
            sub.write_header(&mut disk)?;
        }
        Ok(sub)
    }

    /// Opens a sub-filter file for reading only: the same checks as `open`,
    /// a read-only mapping whatever its state, and nothing written or
    /// recounted (an open file's count is its header's, which is exact only
    /// when the header is marked clean; `stats` counts the body otherwise:
    /// [`SubFilter::occupied_for_stats`]).
    pub(crate) fn open_read_only(
        path: &Path,
        expect: Identity,
        seed_fp: u64,
        verify: bool,
    ) -> Result<SubFilter> {
        let (file, header, len) = open_checked(path, expect, seed_fp, false)?;
        let map = Map::ReadOnly(map_read_only(&file, path, len)?);
        let sub = SubFilter::assemble(path, file, map, header, header.occupied);
        if verify {
            sub.verify_at_open()?;
        }
        Ok(sub)
    }

    fn assemble(path: &Path, file: File, map: Map, header: Header, occupied: u64) -> SubFilter {
        // Grow at the fill expected a little past the planned capacity. The
        // fill after exactly `capacity` keys is random around its mean
        // (a standard deviation is ~0.07% of it at 2e5 keys, ~0.03% at 1e6),
        // so a trigger at the mean grew half the segments that received
        // exactly their plan. The margin is ~4 standard deviations at 2e5
        // keys and raises the rate at the trigger by ~3% of the plan's.
        let expected = sizing::expected_occupied(
            header.kind,
            sizing::Plan {
                nblocks: header.nblocks,
                k: header.k,
            },
            header.capacity as f64 * GROWTH_MARGIN,
        );
        let table = header.geometry().map(|geo| TableState {
            geo,
            retention: header.retention,
            // A read-only mapping's writer (if any) is another engine,
            // whose move counter this one never sees.
            shared: match map {
                Map::ReadOnly(_) => fingerprint::Shared::blind(),
                Map::Writable(_) => fingerprint::Shared::default(),
            },
            swept: AtomicU32::new(header.swept),
            full: AtomicBool::new(false),
            scanned: AtomicU32::new(UNSCANNED),
            written: AtomicU32::new(0),
            sweeping: Mutex::new(()),
        });
        // A table grows when an insert finds no room, not at a fill.
        let grow_at = if table.is_some() {
            u64::MAX
        } else {
            expected as u64
        };
        SubFilter {
            path: path.to_path_buf(),
            file,
            map,
            header,
            disk: Mutex::new(header),
            sealed_on_disk: AtomicBool::new(header.state == State::Sealed),
            state: AtomicU8::new(header.state as u8),
            occupied: Box::new(Fill::new(occupied, grow_at)),
            count_exact: AtomicBool::new(false),
            touched: AtomicBool::new(false),
            table,
            replaced: AtomicBool::new(false),
            chain: Mutex::new(()),
        }
    }

    /// Held, on the first sub-filter of a counting chain of several, by a
    /// remove and by an insert that goes to an older sub-filter than the
    /// newest, from the choice of its sub-filter to its last counter (see
    /// `Segment::insert`).
    pub(crate) fn chain_lock(&self) -> parking_lot::MutexGuard<'_, ()> {
        self.chain.lock()
    }

    /// The fingerprint table over this body, if this is one.
    #[inline]
    pub(crate) fn table(&self) -> Option<Table<'_>> {
        let t = self.table.as_ref()?;
        let swept = t.swept.load(Ordering::Acquire);
        Some(Table::new(self.blocks(), t.geo, t.retention, &t.shared).swept_on(swept))
    }

    /// Fingerprint table: whether the key was seen on a day in
    /// `[first_day, today]`. False for other kinds. Lock-free.
    #[inline]
    pub(crate) fn table_contains(&self, h: KeyHash, first_day: u32, today: u32) -> bool {
        self.table()
            .is_some_and(|t| t.contains_since(h, first_day, today))
    }

    /// Issues the loads of both of the key's buckets (fingerprint tables).
    #[inline]
    pub(crate) fn table_prefetch(&self, h: KeyHash) {
        if let Some(t) = self.table() {
            t.prefetch(h);
        }
    }

    /// Fingerprint table: records the key as seen on `day` (see
    /// `Table::insert_dated`). `None` on a read-only mapping or another
    /// kind. A `Full` answer marks the table for growth. The caller holds
    /// the key's stripe and checked that the file takes writes.
    pub(crate) fn table_insert(
        &self,
        _x: &Exclusive,
        h: KeyHash,
        day: u32,
        today: u32,
    ) -> Option<Insert> {
        if !matches!(self.map, Map::Writable(_)) {
            return None;
        }
        let state = self.table.as_ref()?;
        let r = self.table()?.insert_dated(h, day, today);
        // Whatever the answer, this call may have written a slot of `day`
        // or moved one live as of `today` (a day up to `today + 1`).
        let bound = day.max(today).saturating_add(1);
        if state.written.load(Ordering::Relaxed) < bound {
            state.written.fetch_max(bound, Ordering::Relaxed);
        }
        match r {
            Insert::Full => state.full.store(true, Ordering::Relaxed),
            Insert::New => self.changed(),
            // A day moved (or nothing did): the body may have changed.
            Insert::Updated => self.touch(),
        }
        Some(r)
    }

    /// Fingerprint table: deletes one live slot holding the key's
    /// fingerprint; whether one was. Same contract as `table_insert`.
    pub(crate) fn table_remove(&self, _x: &Exclusive, h: KeyHash, today: u32) -> bool {
        if !matches!(self.map, Map::Writable(_)) {
            return false;
        }
        let removed = self.table().is_some_and(|t| t.remove(h, today));
        if removed {
            self.changed();
        }
        removed
    }

    /// Fingerprint table: the day of the last sweep.
    pub(crate) fn swept(&self) -> Option<u32> {
        Some(self.table.as_ref()?.swept.load(Ordering::Acquire))
    }

    /// Fingerprint table: its body was set back to a shadow copy taken
    /// when it was last swept on `day`; the next [`SubFilter::sweep`]
    /// catches up from there.
    pub(crate) fn restored_swept(&self, day: u32) {
        if let Some(t) = &self.table {
            t.swept.store(day, Ordering::Release);
            t.scanned.store(UNSCANNED, Ordering::Release);
        }
    }

    /// Fingerprint table: clears the slots that expired by `today`, in
    /// steps of the sweep interval from the last sweep when that is
    /// further back (`Table::catch_up`), and records `today` as the last
    /// sweep (in the header at its next rewrite). Lookups and inserts go
    /// on meanwhile. Returns the slots cleared.
    ///
    /// `clock` gives the tables' day now: the daily sweep reads it again
    /// under every stripe it takes (`Table::sweep_by`), so inserts of a
    /// later day that run meanwhile are never taken for expired ones.
    ///
    /// The header is written after (its sweep day made durable), so that
    /// a reopen after a crash knows the table's last day: without it, an
    /// engine of one table killed weeks after its last checkpoint would
    /// take the restart for a clock jump from the day of that checkpoint.
    pub(crate) fn sweep(&self, today: u32, clock: impl Fn() -> u32) -> Result<u64> {
        let (Some(state), Some(t), Map::Writable(_)) =
            (self.table.as_ref(), self.table(), &self.map)
        else {
            return Ok(0);
        };
        let _g = state.sweeping.lock();
        let last = state.swept.load(Ordering::Acquire);
        // A table swept today already is read once more if no sweep in
        // this process has read it (see `table_drained`).
        if today < last || (today == last && state.scanned.load(Ordering::Acquire) != UNSCANNED) {
            return Ok(0);
        }
        let done = if today - last >= fingerprint::max_sweep_interval(state.retention) {
            t.catch_up(last, today)
        } else {
            t.sweep_by(|| clock().max(today))
        };
        state.swept.store(today, Ordering::Release);
        state.scanned.store(done.newest, Ordering::Release);
        if done.cleared > 0 {
            self.changed();
        }
        if today > last {
            let mut disk = self.disk.lock();
            if disk.state == State::Open {
                self.write_header(&mut disk)?;
            }
        }
        Ok(done.cleared)
    }

    /// Fingerprint table: no sweep in this process has read the table yet.
    pub(crate) fn table_unscanned(&self) -> bool {
        self.table
            .as_ref()
            .is_some_and(|t| t.scanned.load(Ordering::Acquire) == UNSCANNED)
    }

    /// Fingerprint table: every slot it holds expired by `today`, so the
    /// table can leave its chain. Exact only while no insert runs (the
    /// caller holds every stripe): every live slot was either read by the
    /// last sweep (`scanned`, from a sweep that started after the table
    /// was mapped, so it saw every slot on disk that no insert moved) or
    /// written or moved by an insert of this process (`written`).
    pub(crate) fn table_drained(&self, today: u32) -> bool {
        self.table.as_ref().is_some_and(|t| {
            let scanned = t.scanned.load(Ordering::Acquire);
            let newest = scanned.max(t.written.load(Ordering::Relaxed));
            scanned != UNSCANNED && newest.saturating_add(t.retention) < today
        })
    }

    /// Fingerprint table: live slots on `today`, estimated from at most
    /// `sample` buckets (exact in a smaller table).
    pub(crate) fn count_live_sampled(&self, today: u32, sample: usize) -> u64 {
        self.table()
            .map_or(0, |t| t.count_live_sampled(today, sample))
    }

    /// Fingerprint table: relocations since it was mapped.
    pub(crate) fn moves(&self) -> u64 {
        self.table.as_ref().map_or(0, |t| t.shared.moves())
    }

    /// Holds off sweeps while a checkpoint copies the body.
    pub(crate) fn hold_sweeps(&self) -> Option<parking_lot::MutexGuard<'_, ()>> {
        Some(self.table.as_ref()?.sweeping.lock())
    }

    /// A fingerprint write changed the body in a way the running count
    /// does not follow (a slot reused or cleared): counted at close.
    fn changed(&self) {
        if self.count_exact.load(Ordering::Relaxed) {
            self.count_exact.store(false, Ordering::Relaxed);
        }
        self.touch();
    }

    /// Occupied cells of the body (a scan).
    fn count_body(&self) -> u64 {
        match self.table() {
            Some(t) => t.count_occupied(),
            None => filter::count_occupied(self.header.kind, self.blocks()),
        }
    }

    /// The body as blocks of atomic words.
    #[inline]
    pub(crate) fn blocks(&self) -> &[Block] {
        // Raw pointers straight from the mapping (not through a `&[u8]`), so
        // writes through the atomics below do not alias a shared byte slice.
        let (base, len) = match &self.map {
            Map::Writable(m) => (m.as_ptr(), m.len()),
            Map::ReadOnly(m) => (m.as_ptr(), m.len()),
        };
        let n = (len.saturating_sub(BODY_OFFSET as usize)) / BLOCK_BYTES as usize;
        // SAFETY: the mapping is `BODY_OFFSET + n * 64` bytes long (`create`
        // allocates it, `open` checks the file length against the header
        // before mapping), starts on a page boundary, and the body starts
        // 4096 bytes in, so the body pointer is in bounds and 64-byte
        // aligned. `[AtomicU64; 8]` has the size and alignment of
        // `[u64; 8]` and every bit pattern is valid. The slice borrows
        // `self`, which owns the mapping, so it cannot outlive it. All
        // accesses are atomic; the directory lock keeps other timebloom
        // processes from writing the file, and this process writes only
        // through `insert`/`remove`, the table's inserts, removes and
        // sweeps, which refuse read-only mappings, and `restore`, which a
        // writer's recovery alone calls (its files are mapped writable).
        unsafe { std::slice::from_raw_parts(base.add(BODY_OFFSET as usize).cast::<Block>(), n) }
    }

    /// The block a key uses here.
    #[inline]
    fn block_of(&self, h: KeyHash) -> Option<&Block> {
        let b = filter::block_index(h, self.header.nblocks);
        self.blocks().get(b as usize)
    }

    /// Whether the sub-filter holds the key.
    #[inline]
    pub(crate) fn contains(&self, h: KeyHash) -> bool {
        self.block_of(h)
            .is_some_and(|blk| filter::contains_key(self.header.kind, blk, h.lo, self.header.k))
    }

    /// Records a key. Returns false (and writes nothing) on a read-only
    /// mapping, which the engine never asks for. `m` holds the key's masks
    /// for the windows it sets (a Bloom body takes them from it).
    ///
    /// The caller checked under its stripe that the file takes writes (its
    /// snapshot is still the current one, or the segment is not sealed): a
    /// seal that begins meanwhile waits for the stripe before it reads the
    /// body, so this write is in it. This does not check the state itself.
    #[inline]
    pub(crate) fn insert(&self, x: &Exclusive, h: KeyHash, m: &mut KeyMasks) -> bool {
        if !matches!(self.map, Map::Writable(_)) {
            return false;
        }
        if let Some(b) = self.block_of(h) {
            let n = match self.header.kind {
                Kind::Bloom => {
                    // The only writer of the block (`filter::stripe_of`).
                    let sole = filter::stripe_aligned(self.header.nblocks) && x.holds(h);
                    filter::set_key(x, sole, b, m.get(self.header.k))
                }
                Kind::Counting => {
                    filter::increment(x, b, &filter::masks(Kind::Counting, h.lo, self.header.k))
                }
                // Tables are written through `table_insert` (with a day).
                Kind::Fingerprint => return false,
            };
            if n > 0 {
                // Exact: `n` counts the cells this call turned on, and the
                // add is atomic. `occupied()` caps it at the cell count, in
                // case the body was damaged behind the engine's back.
                self.occupied.add(n, x.lane());
                self.touch();
            }
        }
        true
    }

    /// Decrements a key's counters (counting kind). Same contract as `insert`.
    pub(crate) fn remove(&self, x: &Exclusive, h: KeyHash) -> bool {
        if !matches!(self.map, Map::Writable(_)) || self.header.kind != Kind::Counting {
            return false;
        }
        if let Some(b) = self.block_of(h) {
            let n = filter::decrement(x, b, &filter::masks(Kind::Counting, h.lo, self.header.k));
            if n > 0 {
                // Never below zero when read (`Fill::get`): a damaged body
                // may empty cells the count never had.
                self.occupied.remove(n, x.lane());
            }
            // A decrement that empties no cell still changes the body.
            self.touch();
        }
        true
    }

    /// The body's bytes (for a checkpoint's shadow copy; the caller keeps
    /// writers out while it reads them).
    pub(crate) fn body(&self) -> &[u8] {
        &self.map.bytes()[BODY_OFFSET as usize..]
    }

    /// The file name, without its directory.
    pub(crate) fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }

    /// Replaces the body with `bytes` (recovery: a counting window's shadow
    /// copy, the body as it was at the last checkpoint) and recounts.
    pub(crate) fn restore(&self, _x: &Exclusive, bytes: &[u8]) {
        for (block, src) in self
            .blocks()
            .iter()
            .zip(bytes.chunks_exact(BLOCK_BYTES as usize))
        {
            for (w, b) in block.iter().zip(src.chunks_exact(8)) {
                let mut v = [0u8; 8];
                v.copy_from_slice(b);
                // The shadow is a raw copy of the mapped words.
                w.store(u64::from_ne_bytes(v), Ordering::Relaxed);
            }
        }
        self.recount();
        self.touch();
    }

    /// Notes that the body changed (once per file: a load, then a store
    /// only the first time).
    #[inline]
    fn touch(&self) {
        if !self.touched.load(Ordering::Relaxed) {
            self.touched.store(true, Ordering::Relaxed);
        }
    }

    /// Fingerprint table: forgets a `Full` answer (see
    /// `Engine::drop_drained`), so that only the next one grows the chain.
    pub(crate) fn clear_full(&self) {
        if let Some(t) = &self.table {
            t.full.store(false, Ordering::Relaxed);
        }
    }

    #[inline]
    pub(crate) fn is_full(&self) -> bool {
        match &self.table {
            Some(t) => t.full.load(Ordering::Relaxed),
            None => self.occupied.may_be_full(),
        }
    }

    pub(crate) fn header(&self) -> &Header {
        &self.header
    }

    pub(crate) fn occupied(&self) -> u64 {
        self.occupied.get().min(self.header.cells())
    }

    /// The occupied cells `stats` reports: the running count, except in a
    /// read-only open of a file that was not marked clean when it was
    /// mapped (a writer has it open, or crashed). Its header holds the
    /// count of the writer's open or last checkpoint, hours old beside a
    /// running writer (a window it opened since reads empty), so the body
    /// is counted as it reads now (a scan of the body).
    pub(crate) fn occupied_for_stats(&self) -> u64 {
        let unclean = !self.header.clean;
        if unclean && matches!(self.map, Map::ReadOnly(_)) {
            self.count_body().min(self.header.cells())
        } else {
            self.occupied()
        }
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    #[inline]
    pub(crate) fn state(&self) -> State {
        if self.state.load(Ordering::Acquire) == State::Sealed as u8 {
            State::Sealed
        } else {
            State::Open
        }
    }

    pub(crate) fn len_bytes(&self) -> u64 {
        BODY_OFFSET + self.header.body_len()
    }

    /// Maps every page of the file into the page tables now
    /// (`MADV_POPULATE_READ`), without dirtying them. An insert reads its
    /// block before writing it, so each page of a new window took a read
    /// fault and then a write-protect fault (several microseconds each in
    /// ext4's `page_mkwrite`: about 200 ns per key over the first million
    /// keys of the default tiers, measured from the Python bindings); with
    /// the pages mapped, only the write-protect fault is left. Cheap: a
    /// new file's pages are in the page cache (just written) or are holes.
    /// Only a hint: kernels before 5.14 refuse it.
    pub(crate) fn map_in(&self) {
        #[cfg(target_os = "linux")]
        if let Map::Writable(m) = &self.map {
            let _ = m.advise(memmap2::Advice::PopulateRead);
        }
    }

    /// Faults every page of the file in writable now
    /// (`MADV_POPULATE_WRITE`), so that inserts take no page faults at all
    /// until the kernel writes the pages back.
    ///
    /// Populated pages are dirty: the kernel writes them back within about
    /// 30 s, and then write-protects them again (as for every written page
    /// of a shared file mapping), so this pays only seconds before the
    /// pages are needed. Making a clean page writable goes through the
    /// file system's `page_mkwrite` (about 3 s for the 1.1 GB of the
    /// default tiers at 10^7 keys a day, measured), which is why a new file
    /// is only mapped in ([`SubFilter::map_in`]) when it is created, the
    /// windows created ahead of a boundary are faulted in writable 20 s
    /// before it, and those a rotation or a growth makes for immediate use
    /// right after they are published, on a thread of their own
    /// (`engine::ahead`). Only a hint, like `map_in`.
    ///
    /// Works in steps of 8 MiB and stops early once `stop` is set: a
    /// rotation that needs the file does not wait for the rest.
    pub(crate) fn prefault(&self, stop: &AtomicBool) {
        // Elsewhere (no `MADV_POPULATE_WRITE`) there is nothing to stop.
        #[cfg(not(target_os = "linux"))]
        let _ = stop;
        #[cfg(target_os = "linux")]
        if let Map::Writable(m) = &self.map {
            const STEP: usize = 8 << 20;
            let mut at = 0;
            while at < m.len() && !stop.load(Ordering::Relaxed) {
                // A seam for tests (which park it); a failure stops it.
                if crate::file::check("prefault", &self.path).is_err() {
                    return;
                }
                let n = STEP.min(m.len() - at);
                if m.advise_range(memmap2::Advice::PopulateWrite, at, n)
                    .is_err()
                {
                    return;
                }
                at += n;
            }
        }
    }

    /// Counting kind: counters stuck at 15.
    pub(crate) fn saturated(&self) -> u64 {
        match self.header.kind {
            Kind::Counting => filter::count_saturated(self.blocks()),
            Kind::Bloom | Kind::Fingerprint => 0,
        }
    }

    fn write_header(&self, disk: &mut Header) -> Result<()> {
        self.put_header(disk)?;
        crate::file::sync_data(&self.file, &self.path, "fsync segment")
    }

    /// Writes the next header copy (`pwrite`), not yet synced.
    fn put_header(&self, disk: &mut Header) -> Result<()> {
        disk.occupied = self.occupied();
        if let Some(swept) = self.swept() {
            disk.swept = swept;
        }
        // The other copy keeps the previous version until this one is whole.
        disk.seq = disk.seq.wrapping_add(1);
        let bytes = disk.encode();
        let at = Header::slot(disk.seq);
        if let Some((n, e)) =
            crate::file::check_write("write segment header", &self.path, bytes.len())?
        {
            let _ = self.file.write_all_at(&bytes[..n], at);
            return Err(e);
        }
        self.file
            .write_all_at(&bytes, at)
            .map_err(|e| Error::io("write segment header", &self.path, e))
    }

    /// Makes every write so far durable (msync of the body, then the header).
    ///
    /// A sealed file was made durable by its seal and is left alone. Writers
    /// may run meanwhile (a checkpoint beside them): the header is synced
    /// alone (`msync_range` of its page), not with the body pages they
    /// dirtied since the body's msync, which the next checkpoint writes.
    pub(crate) fn flush(&self) -> Result<()> {
        let mut disk = self.disk.lock();
        if disk.state == State::Sealed {
            return Ok(());
        }
        if let Map::Writable(m) = &self.map {
            crate::file::msync_beside_writers(m, &self.path)?;
            self.put_header(&mut disk)?;
            crate::file::msync_range(m, &self.path, 0, BODY_OFFSET as usize)?;
        }
        Ok(())
    }

    /// Sets the running fill count to the body's (reads the whole body).
    fn recount(&self) {
        let n = self.count_body();
        self.occupied.set(n);
        self.count_exact.store(true, Ordering::Relaxed);
    }

    /// Flushes and marks the header clean (exact occupied count): the last
    /// step of a clean close.
    ///
    /// The clean mark promises that the count describes the body, so the
    /// body is counted unless the running count is known to be the body's
    /// without reading it:
    /// - it was taken from the body in this process (a new file, a recount
    ///   at a dirty open, a seal), so it is exact; or
    /// - it came from a clean header and nothing was written since, so the
    ///   close writes back the very claim the file already made.
    ///
    /// Only a file opened clean and then written to is counted: a body
    /// damaged while the engine was closed has a running count that does
    /// not describe it (it can even exceed the cells), and that count must
    /// not be written down as exact.
    pub(crate) fn close(&self) -> Result<()> {
        let mut disk = self.disk.lock();
        if disk.state == State::Sealed {
            return Ok(());
        }
        if let Map::Writable(m) = &self.map {
            crate::file::msync(m, &self.path)?;
            if !self.count_exact.load(Ordering::Relaxed) && self.touched.load(Ordering::Relaxed) {
                self.recount();
            }
            disk.clean = true;
            self.write_header(&mut disk)?;
        }
        Ok(())
    }

    /// Stops writes: marks the file sealed in memory, which writers check
    /// under their stripe (a backfill and a remove read `is_sealed`, an
    /// insert the snapshot's generation, bumped before this); `insert` and
    /// `remove` themselves do not. The caller then waits for writes in
    /// flight (`Stripes::lock_all`) before `seal` reads the body. True when
    /// the file was open.
    pub(crate) fn stop_writes(&self) -> bool {
        self.state.swap(State::Sealed as u8, Ordering::AcqRel) != State::Sealed as u8
    }

    /// Seals: msync the body, checksum it and count its occupied cells,
    /// write the sealed header and fsync. Writes must have stopped
    /// (`stop_writes`, then no write in flight); this is the slow part of a
    /// rotation (a whole body read and written back), so the engine runs it
    /// off the hot path.
    ///
    /// The count comes from the body, not the running counter: an open body
    /// has no checksum, so damage done to it while it was closed goes
    /// unnoticed, and a sealed header must agree with the body it describes.
    pub(crate) fn seal(&self) -> Result<()> {
        self.stop_writes();
        let mut disk = self.disk.lock();
        let Map::Writable(m) = &self.map else {
            return Ok(());
        };
        if disk.state == State::Sealed {
            return Ok(());
        }
        crate::file::msync_beside_writers(m, &self.path)?;
        disk.body_crc = crc32fast::hash(&m[BODY_OFFSET as usize..]);
        self.recount();
        disk.state = State::Sealed;
        disk.clean = true;
        self.sealed_on_disk.store(true, Ordering::Release);
        self.write_header(&mut disk)
    }

    /// Once sealed, replaces the file with a copy of itself
    /// (`file::rewrite_in_large_pages`: its page cache in 2 MiB folios,
    /// mapped with one page-table entry each), for Bloom bodies of at
    /// least [`REWRITE_FROM`] on Linux. Afterwards this object is
    /// [`replaced`](Self::replaced) (`Ok(true)`, or an error syncing the
    /// directory after the rename), and the engine swaps in one opened on
    /// the copy before anything writes to the window again. `Ok(false)`:
    /// nothing changed (too small, not sealed, or the copy failed: it is
    /// only for speed, so that is not reported). The caller keeps unseals
    /// out (the engine's maintenance lock waits for the sealing thread).
    pub(crate) fn rewrite_sealed(&self) -> Result<bool> {
        if !cfg!(target_os = "linux")
            || self.header.kind != Kind::Bloom
            || self.len_bytes() < crate::file::testing::rewrite_from(REWRITE_FROM)
        {
            return Ok(false);
        }
        let disk = self.disk.lock();
        let Map::Writable(m) = &self.map else {
            return Ok(false);
        };
        if disk.state != State::Sealed || self.replaced() {
            return Ok(false);
        }
        let r = crate::file::rewrite_in_large_pages(&m[..], &self.path);
        self.replaced
            .store(!matches!(r, Ok(false)), Ordering::Release);
        r
    }

    /// Whether [`rewrite_sealed`](Self::rewrite_sealed) replaced the file.
    pub(crate) fn replaced(&self) -> bool {
        self.replaced.load(Ordering::Acquire)
    }

    /// Reopens a sealed sub-filter for writes (a backfill into a past
    /// window); true when it was sealed. The caller keeps seals out
    /// (the engine's maintenance lock).
    pub(crate) fn unseal(&self) -> Result<bool> {
        if self.replaced() {
            // The engine swaps replaced sub-filters out before it unseals
            // (`Engine::swap_rewritten`); a write here would be lost.
            return Err(Error::io(
                "unseal segment",
                &self.path,
                std::io::Error::other("this window's file was replaced by a copy"),
            ));
        }
        // The common case, an open window, without waiting for the lock (a
        // checkpoint may hold it through an msync): only the caller seals
        // or unseals, so neither state can change meanwhile.
        if !self.sealed_on_disk() && self.state() == State::Open {
            return Ok(false);
        }
        let mut disk = self.disk.lock();
        if !matches!(self.map, Map::Writable(_)) {
            return Ok(false);
        }
        if disk.state == State::Open && self.state() == State::Open {
            return Ok(false);
        }
        disk.state = State::Open;
        disk.clean = false;
        self.sealed_on_disk.store(false, Ordering::Release);
        self.write_header(&mut disk)?;
        // The sealed count described the body when it was sealed; the body
        // may have been damaged since (only `verify` reads it), so a close
        // after writes counts again.
        self.count_exact.store(false, Ordering::Relaxed);
        self.state.store(State::Open as u8, Ordering::Release);
        Ok(true)
    }

    /// Whether the header on disk says sealed (the seal is durable).
    pub(crate) fn sealed_on_disk(&self) -> bool {
        self.sealed_on_disk.load(Ordering::Acquire)
    }

    /// Checks both header copies, a sealed body against its checksum and
    /// the occupied count against the body.
    ///
    /// The header is the file's, read before and after the body's check:
    /// a read-only engine's copy from its open goes stale when the writer
    /// reopens and reseals the window (a backfill, a remove), and a window
    /// reopened while its body is read (in this process or another) is not
    /// the body its old header describes. A header rewritten meanwhile (its
    /// sequence number moved) makes the check run again; a window rewritten
    /// under every try is being written, and not checked.
    pub(crate) fn verify(&self) -> Result<()> {
        self.verify_with(SubFilter::header_on_disk)
    }

    /// [`SubFilter::verify`] at open (`Options::verify_on_open`): the body
    /// against the header copy in use. A damaged other copy (a torn header
    /// rewrite) is what the open recovers from, as without the option, not
    /// damage that refuses the file; `verify` reports it.
    fn verify_at_open(&self) -> Result<()> {
        self.verify_with(SubFilter::header_in_use)
    }

    fn verify_with(&self, header: fn(&SubFilter) -> Result<Header>) -> Result<()> {
        for _ in 0..4 {
            let before = header(self)?;
            if before.state != State::Sealed {
                return Ok(());
            }
            let crc = crc32fast::hash(&self.map.bytes()[BODY_OFFSET as usize..]);
            let n = self.count_body();
            if header(self)?.seq != before.seq {
                continue;
            }
            if crc != before.body_crc {
                return Err(Error::corrupt(
                    &self.path,
                    format!(
                        "body checksum mismatch: expected {:#010x}, got {crc:#010x}",
                        before.body_crc
                    ),
                ));
            }
            if n != before.occupied {
                return Err(Error::corrupt(
                    &self.path,
                    format!(
                        "occupied cells: header says {}, body has {n}",
                        before.occupied
                    ),
                ));
            }
            return Ok(());
        }
        Ok(())
    }

    /// The header copy in use as the file holds it now (the valid copy
    /// with the higher sequence number; a damaged other copy is passed over).
    fn header_in_use(&self) -> Result<Header> {
        let mut page = [0u8; HEADER_COPY as usize + HEADER_LEN];
        self.file
            .read_exact_at(&mut page, 0)
            .map_err(|e| Error::io("read segment header", &self.path, e))?;
        Header::decode_page(&page, &self.path)
    }

    /// Both header copies as the file holds them now, each checked; the
    /// one in use (the higher sequence number).
    ///
    /// A read is not atomic with a write to the file: beside a writer (a
    /// read-only engine's `verify`, or the writer's own beside its
    /// checkpoint) the copy it is rewriting may be read half old, half
    /// new, and fail its checksum. So a copy that fails is read again, and
    /// reported damaged only when the page reads the same four times in a
    /// row (7 ms; torn reads tear where the kernel's copy does, and two of
    /// them matched in a CI run), or fails ten reads.
    fn header_on_disk(&self) -> Result<Header> {
        /// Reads of one damaged page that make it damage, not a read torn
        /// by a writer's rewrite.
        const SAME_READS: u32 = 4;
        let mut last: Option<Vec<u8>> = None;
        let (mut tries, mut same) = (0, 0u32);
        loop {
            let mut page = [0u8; HEADER_COPY as usize + HEADER_LEN];
            self.file
                .read_exact_at(&mut page, 0)
                .map_err(|e| Error::io("read segment header", &self.path, e))?;
            let damaged = [0, HEADER_COPY].into_iter().find_map(|at| {
                Header::decode(&page[at as usize..], &self.path)
                    .err()
                    .map(|e| (at, e))
            });
            let Some((at, e)) = damaged else {
                return Header::decode_page(&page, &self.path);
            };
            // A torn read tears where the kernel's copy does, so two of
            // them can match: damage is a page that reads the same
            // `SAME_READS` times in a row, over 1 + 2 + 4 ms.
            same = if last.as_deref() == Some(&page[..]) {
                same + 1
            } else {
                1
            };
            tries += 1;
            if same >= SAME_READS || tries >= 10 {
                return Err(Error::corrupt(
                    &self.path,
                    format!(
                        "header copy at offset {at} is damaged (the other copy is in use): {e}"
                    ),
                ));
            }
            last = Some(page.to_vec());
            std::thread::sleep(std::time::Duration::from_millis(1 << (same - 1)));
        }
    }
}

/// Opens a sub-filter file and checks its header against the manifest's
/// identity, the engine's seed and the file's length: `(file, header,
/// length)`.
fn open_checked(
    path: &Path,
    expect: Identity,
    seed_fp: u64,
    write: bool,
) -> Result<(File, Header, u64)> {
    let mut file = OpenOptions::new()
        .read(true)
        .write(write)
        .open(path)
        .map_err(|e| Error::io("open segment", path, e))?;
    let mut hb = [0u8; HEADER_COPY as usize + HEADER_LEN];
    let file_len = file
        .metadata()
        .map_err(|e| Error::io("stat segment", path, e))?
        .len();
    if file_len < BODY_OFFSET {
        return Err(Error::corrupt(
            path,
            format!("file is {file_len} bytes, shorter than its header page"),
        ));
    }
    file.read_exact(&mut hb)
        .map_err(|e| Error::io("read segment header", path, e))?;
    let header = Header::decode_page(&hb, path)?;
    if header.id != expect {
        return Err(Error::corrupt(
            path,
            format!(
                "header names {}, the manifest expects {}",
                header.id, expect
            ),
        ));
    }
    if header.seed_fp != seed_fp {
        return Err(Error::corrupt(
            path,
            "segment belongs to another engine (seed fingerprint differs)",
        ));
    }
    let len = BODY_OFFSET + header.body_len();
    if file_len != len {
        return Err(Error::corrupt(
            path,
            format!("file length: expected {len}, got {file_len}"),
        ));
    }
    Ok((file, header, len))
}

fn map_writable(file: &File, path: &Path, len: u64) -> Result<MmapMut> {
    crate::file::check("mmap segment", path)?;
    let len = usize::try_from(len)
        .map_err(|_| Error::corrupt(path, "segment larger than the address space"))?;
    // SAFETY: the file is `len` bytes long (allocated by `create` or checked
    // by `open`) and the engine never shrinks it while mapped. The directory
    // lock keeps other timebloom processes out; see `blocks` for how the
    // mapped bytes are accessed.
    let map = unsafe { MmapOptions::new().len(len).map_mut(file) }
        .map_err(|e| Error::io("mmap segment", path, e))?;
    // Lookups touch one random block per segment: without this hint the
    // kernel's read-around pulls megabytes around every first touch (a cold
    // first lookup took 34-60 ms). Only a hint, so a failure is ignored.
    let _ = map.advise(memmap2::Advice::Random);
    Ok(map)
}

fn map_read_only(file: &File, path: &Path, len: u64) -> Result<Mmap> {
    crate::file::check("mmap segment", path)?;
    let len = usize::try_from(len)
        .map_err(|_| Error::corrupt(path, "segment larger than the address space"))?;
    // SAFETY: as for `map_writable`; this mapping is only read.
    let map = unsafe { MmapOptions::new().len(len).map(file) }
        .map_err(|e| Error::io("mmap segment", path, e))?;
    // Random access, as in `map_writable`.
    let _ = map.advise(memmap2::Advice::Random);
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::Stripes;
    use crate::hash::hash_key;
    use crate::window::Span;
    use std::sync::atomic::AtomicUsize;

    /// The running count that writer threads keep in lanes (`fill`) is the
    /// body's count once they are done, for every kind that counts: it is
    /// what a clean close writes into the header as exact, and what the
    /// growth check compares. The sub-filter is large enough that the
    /// lanes fold in steps and that its Bloom body is stripe-aligned
    /// (bits set by plain stores: a lost update would show here as a body
    /// count below the kept one, and as a missing key), and the threads
    /// outnumber the lanes (several share one); every key is inserted by
    /// two threads at once.
    #[test]
    fn counts_kept_by_writer_threads_match_the_body() {
        let dir = tempfile::tempdir().unwrap();
        let stripes = Stripes::default();
        for kind in [Kind::Bloom, Kind::Counting] {
            let id = Identity {
                span: Span::Day,
                window: 1,
                index: 0,
            };
            let path = dir.path().join(format!("{kind:?}"));
            let sub = SubFilter::create(&path, kind, id, 7, 300_000, 0.01, false, None).unwrap();
            assert!(sub.occupied.folds_in_steps(), "the lanes fold in steps");
            if kind == Kind::Bloom {
                assert!(crate::filter::stripe_aligned(sub.header.nblocks));
            }
            let key =
                |t: u64, i: u64| hash_key(7, format!("https://example.com/{t}/{i}").as_bytes());
            // Key sets; two threads insert each.
            let sets = crate::fill::LANES as u64 + 2;
            std::thread::scope(|s| {
                for t in 0..2 * sets {
                    let (sub, stripes) = (&sub, &stripes);
                    s.spawn(move || {
                        // Threads t and t + 1 (t even) insert the same keys.
                        for i in 0..8_000u64 {
                            let h = key(t / 2, i);
                            let x = stripes.lock(h);
                            assert!(sub.insert(&x, h, &mut KeyMasks::new(h.lo)));
                            if kind == Kind::Counting && i % 5 == 0 {
                                assert!(sub.remove(&x, h));
                            }
                        }
                    });
                }
            });
            assert_eq!(sub.occupied(), sub.count_body(), "{kind:?}");
            assert!(sub.occupied() > 0);
            if kind == Kind::Bloom {
                let missing = (0..sets)
                    .flat_map(|t| (0..8_000).map(move |i| (t, i)))
                    .filter(|&(t, i)| !sub.contains(key(t, i)))
                    .count();
                assert_eq!(missing, 0, "keys lost to a concurrent write");
            }
        }
    }

    /// A sub-filter too large for any file (a chain grown far past its
    /// plan) is refused before anything is written. The plan is fixed at
    /// create, so the error says what happens to the window's keys and what
    /// a user can do (an engine created with another plan), where it told
    /// the user to raise the plan of this engine, which nothing can.
    #[test]
    fn a_sub_filter_too_large_for_a_file_says_what_happens_and_what_helps() {
        let dir = tempfile::tempdir().unwrap();
        for (kind, table, then) in [
            (Kind::Bloom, None, "fails until the window ends"),
            (
                Kind::Counting,
                None,
                "every insert into the window fails (each one counts, of a key it holds too; \
                 removes go on) until the window ends",
            ),
            (Kind::Fingerprint, Some((30, 0)), "fail until keys expire"),
        ] {
            let path = dir.path().join(format!("{kind:?}.seg"));
            let id = Identity {
                span: Span::Day,
                window: 1,
                index: 40,
            };
            let r = SubFilter::create(&path, kind, id, 7, u64::MAX, 0.01, false, table);
            let msg = r.err().expect("a file past 2^64 bytes made").to_string();
            for want in [
                "cannot be made",
                then,
                "fixed at create",
                "create an engine",
            ] {
                assert!(msg.contains(want), "{kind:?}: no {want:?} in: {msg}");
            }
            assert!(!msg.contains("raise the planned"), "{kind:?}: {msg}");
            assert!(!path.exists(), "{kind:?}: a file was written");
        }
    }

    /// A new Bloom sub-filter at `path` for `capacity` keys at 1% (seed
    /// fingerprint 7), and its identity.
    fn bloom_of(path: &Path, capacity: u64) -> (SubFilter, Identity) {
        let id = Identity {
            span: Span::Day,
            window: 1,
            index: 0,
        };
        let sub = SubFilter::create(path, Kind::Bloom, id, 7, capacity, 0.01, false, None).unwrap();
        (sub, id)
    }

    /// A flush beside writers (the checkpoint's) drops the page-table
    /// entries of the pages it writes back (`file::msync_beside_writers`): no write may be
    /// lost by it (it would be if the advice discarded pages, as it does on
    /// a private mapping: checked). Two writer threads insert while another
    /// flushes over and over; then every key answers present, and after a
    /// last flush the file's bytes as `pread` sees them (not through the
    /// mapping) are the mapping's. The body spans several of the flush's
    /// pieces.
    #[test]
    fn flushes_beside_writers_lose_no_write() {
        let dir = tempfile::tempdir().unwrap();
        let stripes = Stripes::default();
        let (sub, _) = bloom_of(&dir.path().join("flushed"), 6_000_000);
        assert!(sub.len_bytes() > 3 * (2 << 20), "several msync pieces");
        let key = |t: u64, i: u64| hash_key(7, format!("https://example.com/{t}/{i}").as_bytes());
        // Each writer inserts at least KEYS keys and goes on until the
        // flusher has finished a few flushes, so the flushes run beside the
        // writes however the threads are scheduled.
        const KEYS: u64 = 200_000;
        const FLUSHES: usize = 3;
        let done = AtomicBool::new(false);
        let flushes = AtomicUsize::new(0);
        let mut written = [0u64; 2];
        std::thread::scope(|s| {
            let writers: Vec<_> = (0..2u64)
                .map(|t| {
                    let (sub, stripes, flushes) = (&sub, &stripes, &flushes);
                    s.spawn(move || {
                        let mut i = 0;
                        // (At most 50 times KEYS: a flusher that failed
                        // stops the test rather than hanging it.)
                        while i < KEYS
                            || (flushes.load(Ordering::Relaxed) < FLUSHES && i < 50 * KEYS)
                        {
                            let h = key(t, i);
                            sub.insert(&stripes.lock(h), h, &mut KeyMasks::new(h.lo));
                            i += 1;
                        }
                        i
                    })
                })
                .collect();
            let flusher = s.spawn(|| {
                while !done.load(Ordering::Relaxed) {
                    sub.flush().unwrap();
                    flushes.fetch_add(1, Ordering::Relaxed);
                }
            });
            for (t, w) in writers.into_iter().enumerate() {
                written[t] = w.join().unwrap();
            }
            done.store(true, Ordering::Relaxed);
            flusher.join().unwrap();
        });
        assert!(
            flushes.load(Ordering::Relaxed) >= FLUSHES,
            "the flushes ran beside the writers"
        );
        for (t, &n) in written.iter().enumerate() {
            for i in 0..n {
                assert!(sub.contains(key(t as u64, i)), "key {t}/{i} lost");
            }
        }
        sub.flush().unwrap();
        let mut on_disk = vec![0u8; sub.len_bytes() as usize];
        sub.file.read_exact_at(&mut on_disk, 0).unwrap();
        let Map::Writable(m) = &sub.map else {
            panic!("an open sub-filter is writable")
        };
        let body = BODY_OFFSET as usize;
        assert!(
            on_disk[body..] == m[body..],
            "the file holds the mapping's body"
        );
    }

    /// A sealed body rewritten in large pages: the file at the path is a
    /// new one with the same bytes, which opens, verifies and holds every
    /// key; the old object refuses to be reopened for writes (its file is
    /// unlinked), and an open window or a small one is left alone.
    #[test]
    fn sealed_bodies_are_rewritten_with_the_same_bytes() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let stripes = Stripes::default();
        let path = dir.path().join("sealed");
        let (sub, id) = bloom_of(&path, 10_000_000);
        assert!(sub.len_bytes() >= REWRITE_FROM);
        let key = |i: u64| hash_key(7, format!("https://example.com/{i}").as_bytes());
        for i in 0..50_000 {
            sub.insert(&stripes.lock(key(i)), key(i), &mut KeyMasks::new(key(i).lo));
        }
        assert!(!sub.rewrite_sealed().unwrap(), "an open body stays");
        sub.seal().unwrap();
        let before = std::fs::metadata(&path).unwrap().ino();
        let Map::Writable(m) = &sub.map else {
            panic!("a sealed sub-filter of a writable engine is writable")
        };
        let bytes = m.to_vec();
        assert!(sub.rewrite_sealed().unwrap());
        assert!(sub.replaced());
        assert!(!sub.rewrite_sealed().unwrap(), "once");
        assert_ne!(std::fs::metadata(&path).unwrap().ino(), before);
        assert_eq!(std::fs::read(&path).unwrap(), bytes);
        assert!(
            !dir.path().join("sealed.large").exists(),
            "no copy left over"
        );
        assert!(
            sub.unseal().is_err(),
            "a replaced sub-filter is never written"
        );
        let copy = SubFilter::open(&path, id, 7, true).unwrap();
        assert_eq!(copy.state(), State::Sealed);
        for i in 0..50_000 {
            assert!(copy.contains(key(i)), "key {i} in the copy");
        }
        assert!(copy.unseal().unwrap(), "the copy takes backfills");

        let (small, _) = bloom_of(&dir.path().join("small"), 10_000);
        small.seal().unwrap();
        assert!(!small.rewrite_sealed().unwrap(), "a small body stays");
    }

    /// The clean mark is what says whether a header's occupied count is
    /// exact (docs/format.md: 0, "recount at open"), sealed or not. A
    /// sealed header marked dirty (with valid checksums) was trusted at
    /// open: its count, here 0 for a body with bits set, became the
    /// running count that stats report and a backfill's growth compares.
    #[test]
    fn a_sealed_header_marked_dirty_is_recounted_at_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("d.seg");
        let (sub, id) = bloom_of(&path, 1000);
        let stripes = crate::filter::Stripes::default();
        for i in 0..500u64 {
            let h = hash_key(7, format!("k{i}").as_bytes());
            let x = stripes.lock(h);
            assert!(sub.insert(&x, h, &mut KeyMasks::new(h.lo)));
        }
        sub.seal().unwrap();
        let mut disk = *sub.disk.lock();
        drop(sub);
        assert_eq!(disk.state, State::Sealed);
        disk.clean = false;
        disk.occupied = 0;
        disk.seq += 1;
        let file = OpenOptions::new().write(true).open(&path).unwrap();
        file.write_all_at(&disk.encode(), Header::slot(disk.seq))
            .unwrap();
        drop(file);
        let sub = SubFilter::open(&path, id, 7, false).unwrap();
        assert_eq!(sub.state(), State::Sealed);
        assert!(sub.count_body() > 0);
        assert_eq!(sub.occupied(), sub.count_body(), "writable open");
        drop(sub);
        let sub = SubFilter::open_read_only(&path, id, 7, false).unwrap();
        assert_eq!(sub.occupied_for_stats(), sub.count_body(), "read-only open");
    }
}
