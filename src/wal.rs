//! The write-ahead log: key hashes of every write since the last
//! checkpoint, so that writes acknowledged under the `always` and
//! `interval` sync policies survive a power loss.
//!
//! A mapped segment body reaches the disk whenever the kernel writes its
//! pages back, a page at a time and in any order, so after a power loss a
//! body is some mix of old and new pages. The log restores what the
//! bodies may have lost: Bloom bits only go from 0 to 1, so replaying an
//! insert is idempotent; counting windows restore their body from the
//! checkpoint's shadow copy first, then replay exactly the records after
//! it (see `docs/format.md`, "Write-ahead log").
//!
//! File `wal/<first LSN, 16 hex digits>.log`:
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `TBLMWAL\0` |
//! | 8 | 4 | format version (1) |
//! | 12 | 4 | CRC32 of bytes 0..12 and 16..24 |
//! | 16 | 8 | LSN of the first record |
//! | 24 | 8 | zero (padding outside the CRC, not read) |
//! | 32 | 40 each | records |
//!
//! A record: LSN (8), instant in seconds (8, signed), key hash low (8) and
//! high (8) halves, operation (1: insert, 2: remove, 3: remove from the
//! windows only, a fingerprint table left alone), three zero bytes, and
//! the CRC32 of the 36 bytes before it. LSNs are consecutive. Replay stops
//! at the first record that is short, fails its checksum or breaks the LSN
//! sequence: the torn tail of the last write before a crash. A file's name
//! must be its header's first LSN; a damaged file whose records all lie
//! below the checkpoint is ignored; a file of zeros is accepted as the
//! last one only (see [`read_logs`]).

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};

use crate::error::{Error, Result};
use crate::hash::KeyHash;

const MAGIC: [u8; 8] = *b"TBLMWAL\0";
const VERSION: u32 = 1;
pub(crate) const FILE_HEADER: usize = 32;
pub(crate) const RECORD: usize = 40;
/// The highest position a log may start from: appends count up from it
/// without a check (see `Engine::start_durability_with`).
pub(crate) const MAX_LSN: u64 = 1 << 62;
/// The log is written out (not synced) whenever this much is buffered.
const WRITE_AT: usize = 1 << 20;
/// A checkpoint is due once the current log file passes this size (unless
/// `Options::checkpoint_log_bytes` says otherwise).
pub(crate) const CHECKPOINT_AT: u64 = 64 << 20;

/// What a record does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Op {
    /// The key was inserted at the instant (into every window holding it).
    Insert,
    /// One insert of the key made at the instant was taken back.
    Remove,
    /// [`Op::Remove`] from the windows holding the instant alone: the
    /// engine's fingerprint table no longer kept its day (a `remove_at` of
    /// an instant only a counting tier keeps), so the table was left as it
    /// was. Replay cannot tell that from the instant: it does not know the
    /// table's day when the remove ran.
    RemoveWindows,
}

/// One logged write.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Record {
    pub lsn: u64,
    pub t: i64,
    pub h: KeyHash,
    pub op: Op,
}

impl Record {
    /// The record's bytes (for one record; a run of them is encoded with
    /// [`encode_all`]).
    pub(crate) fn encode(&self) -> [u8; RECORD] {
        let mut b = self.fields();
        put_crc(&mut b);
        b
    }

    /// The record's bytes before its checksum (which stays zero).
    fn fields(&self) -> [u8; RECORD] {
        let mut b = [0u8; RECORD];
        b[0..8].copy_from_slice(&self.lsn.to_le_bytes());
        b[8..16].copy_from_slice(&self.t.to_le_bytes());
        b[16..24].copy_from_slice(&self.h.lo.to_le_bytes());
        b[24..32].copy_from_slice(&self.h.hi.to_le_bytes());
        b[32] = match self.op {
            Op::Insert => 1,
            Op::Remove => 2,
            Op::RemoveWindows => 3,
        };
        b
    }

    /// A record, or `None` for bytes that are not a whole valid one.
    pub(crate) fn decode(b: &[u8]) -> Option<Record> {
        let b = b.get(..RECORD)?;
        let word = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or([0; 8]));
        let crc = u32::from_le_bytes(b[36..40].try_into().unwrap_or([0; 4]));
        if crc != crc32fast::hash(&b[..36]) || b[33..36] != [0, 0, 0] {
            return None;
        }
        let op = match b[32] {
            1 => Op::Insert,
            2 => Op::Remove,
            3 => Op::RemoveWindows,
            _ => return None,
        };
        Some(Record {
            lsn: word(0),
            t: word(8) as i64,
            h: KeyHash {
                lo: word(16),
                hi: word(24),
            },
            op,
        })
    }
}

/// Appends the records to `buf`: every record's fields first, then each
/// one's checksum in a second pass. One pass (fields, then at once the
/// CRC of the bytes just stored) cost three times as much a record (18
/// ns against 6 on the development machine), most likely because the
/// CRC's 16-byte loads of bytes still in the store buffer as 8-byte stores
/// cannot be forwarded from them and wait for the stores to reach the
/// cache; a pass later they have.
fn encode_all(buf: &mut Vec<u8>, records: impl IntoIterator<Item = Record>) {
    let start = buf.len();
    for r in records {
        buf.extend_from_slice(&r.fields());
    }
    for rec in buf[start..].chunks_exact_mut(RECORD) {
        put_crc(rec);
    }
}

/// Writes a record's checksum (its last four bytes) from its fields.
fn put_crc(rec: &mut [u8]) {
    let crc = crc32fast::hash(&rec[..36]);
    rec[36..40].copy_from_slice(&crc.to_le_bytes());
}

fn file_header(first_lsn: u64) -> [u8; FILE_HEADER] {
    let mut b = [0u8; FILE_HEADER];
    b[0..8].copy_from_slice(&MAGIC);
    b[8..12].copy_from_slice(&VERSION.to_le_bytes());
    b[16..24].copy_from_slice(&first_lsn.to_le_bytes());
    let crc = header_crc(&b);
    b[12..16].copy_from_slice(&crc.to_le_bytes());
    b
}

fn header_crc(b: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    h.update(&b[0..12]);
    h.update(&b[16..24]);
    h.finalize()
}

/// The name of the log file whose first record is `lsn`.
fn log_name(lsn: u64) -> String {
    format!("{lsn:016x}.log")
}

/// What a log file holds: its records up to the first torn or invalid one.
#[derive(Debug)]
pub(crate) struct Scan {
    pub first_lsn: u64,
    pub records: Vec<Record>,
    /// Bytes after the last valid record (a torn tail, or damage).
    pub trailing: usize,
    /// A valid record follows the first invalid one: damage in the middle
    /// of the log, not a torn tail.
    pub damaged_middle: bool,
}

/// Decodes a whole log file. A file shorter than its header or with a bad
/// header (magic, checksum) is [`Error::Corrupt`], one of another format
/// version [`Error::UnsupportedVersion`]; a torn tail is not an error.
pub(crate) fn scan(bytes: &[u8], path: &Path) -> Result<Scan> {
    if bytes.len() < FILE_HEADER {
        return Err(Error::corrupt(
            path,
            format!(
                "log file is {} bytes, shorter than its {FILE_HEADER}-byte header",
                bytes.len()
            ),
        ));
    }
    if bytes[0..8] != MAGIC {
        return Err(Error::corrupt(path, "not a timebloom log (bad magic)"));
    }
    let stored = u32::from_le_bytes(bytes[12..16].try_into().unwrap_or([0; 4]));
    if stored != header_crc(bytes) {
        return Err(Error::corrupt(path, "log header checksum mismatch"));
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap_or([0; 4]));
    if version != VERSION {
        return Err(Error::UnsupportedVersion {
            path: path.to_path_buf(),
            expected: VERSION,
            got: version,
        });
    }
    let first_lsn = u64::from_le_bytes(bytes[16..24].try_into().unwrap_or([0; 8]));
    let body = &bytes[FILE_HEADER..];
    let mut records = Vec::with_capacity(body.len() / RECORD);
    let mut at = 0;
    while let Some(r) = body.get(at..).and_then(Record::decode) {
        if r.lsn != first_lsn.wrapping_add(records.len() as u64) {
            break;
        }
        records.push(r);
        at += RECORD;
    }
    let rest = &body[at..];
    let damaged_middle = rest
        .chunks(RECORD)
        .skip(1)
        .any(|c| Record::decode(c).is_some());
    Ok(Scan {
        first_lsn,
        records,
        trailing: rest.len(),
        damaged_middle,
    })
}

/// Checks the log files and the shadow copies of checkpoint `checkpoint`
/// in `dir`: a bad file header, a valid record after a damaged one (damage
/// in the middle, not a torn tail) or a bad shadow is [`Error::Corrupt`].
pub(crate) fn verify(dir: &Path, checkpoint: u64) -> Result<()> {
    verify_logs(dir, checkpoint)?;
    verify_shadows(dir, checkpoint)
}

/// The log files' part of [`verify`]: a bad header, or damage in the
/// middle of a file (a valid record after an invalid one). A file that a
/// checkpoint deleted after the listing is left out ([`Vanished::Skip`]),
/// and so is the damage of a file whose records all lie below
/// `checkpoint` (see [`read_logs`]).
pub(crate) fn verify_logs(dir: &Path, checkpoint: u64) -> Result<()> {
    // Only the damage report is wanted: from the last LSN on, at most one
    // record is kept.
    match read_logs_listed(dir, u64::MAX, checkpoint, Vanished::Skip)?.damaged {
        Some(e) => Err(e),
        None => Ok(()),
    }
}

/// Every log file in `dir`, each read once: what recovery replays from
/// LSN `from` on, and what verification reports.
#[derive(Default)]
pub(crate) struct Logs {
    /// The records from `from` on, consecutive, up to the first gap or
    /// torn tail ([`replay_records`]).
    pub records: Vec<Record>,
    /// The first file damaged in the middle (a valid record after an
    /// invalid one), as [`verify_logs`] reports it.
    pub damaged: Option<Error>,
}

/// Reads every log file in `dir` once into one reused buffer (a log may
/// hold millions of records; reading it twice, into new memory each time,
/// was a third of a recovery's time). A bad file header is an error up to
/// the end of the records kept, and `damaged` after it.
///
/// A file whose records all lie below `from` (the next file's name is at
/// or below `from`, or it is the last file and its name is below `from`)
/// is a leftover of the checkpoint at `from`, which did not get to delete
/// it: no recovery needs a record of it, so damage to it (a bad header,
/// damage in the middle) is neither an error nor reported; the next
/// checkpoint deletes it. A file whose name is not the first LSN its
/// header holds is refused by name wherever it is: the names order the
/// files, and tell a file past the log from one read. A file of zeros (or
/// empty) is a header that never reached the disk when it is the last
/// file, and damage before another (`damaged`, see `LogReader::scan_file`).
pub(crate) fn read_logs(dir: &Path, from: u64) -> Result<Logs> {
    read_logs_listed(dir, from, from, Vanished::Fail)
}

/// What [`read_logs_listed`] and [`verify_shadows`] make of a file listed
/// in `wal/` that is gone when they read it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Vanished {
    /// An error: at recovery the writer holds the directory's lock, and
    /// nothing else deletes its files.
    Fail,
    /// Left out: verification runs beside a writer (in its process, or a
    /// read-only engine in another), whose checkpoint deletes the log
    /// files and shadow copies it supersedes. A deleted file is no longer
    /// part of the state a recovery would read, so there is nothing in it
    /// to verify.
    Skip,
}

/// Whether `e` says that a file was not there.
fn not_found(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound)
}

/// [`read_logs`], where the damage of a file whose records all lie below
/// `below` is ignored.
fn read_logs_listed(dir: &Path, from: u64, below: u64, vanished: Vanished) -> Result<Logs> {
    let mut reader = LogReader {
        from,
        vanished,
        out: Logs::default(),
        ended: false,
        buf: Vec::new(),
    };
    let listed = list(dir)?;
    crate::file::pause("logs listed", dir);
    // Where the records before the next file end, when known. At first the
    // checkpoint, where the log a recovery needs begins; but not for a
    // verification beside a writer, whose checkpoint since may have
    // deleted the files from `below` on (they lie below its own).
    let mut end = (vanished == Vanished::Fail).then_some(below);
    for (i, (named, path)) in listed.iter().enumerate() {
        let next = listed.get(i + 1).map(|(next, _)| *next);
        let superseded = superseded(*named, next, below);
        if let Some(e) = end.filter(|&e| next.is_some() && *named > below && e < *named) {
            reader.note_missing(path, e, *named);
        }
        end = None;
        let Some(scan) = reader.scan_file(*named, path, superseded, next.is_none())? else {
            continue;
        };
        if scan.trailing == 0 && !scan.damaged_middle {
            end = scan.first_lsn.checked_add(scan.records.len() as u64);
        }
        reader.note_damaged_middle(path, &scan, superseded);
        if !reader.ended {
            reader.keep_records(scan);
        }
    }
    Ok(reader.out)
}

/// Whether every record of the log file `named`, followed by the one named
/// `next` (if any), lies below `below`: a file's records end where the
/// next file's begin, and a checkpoint's position is where a file begins
/// (the last file before it ends there).
fn superseded(named: u64, next: Option<u64>, below: u64) -> bool {
    match next {
        Some(next) => next <= below,
        None => named < below,
    }
}

/// The state of [`read_logs_listed`] as it goes through the log files in
/// order.
struct LogReader {
    /// The first LSN replay wants.
    from: u64,
    vanished: Vanished,
    out: Logs,
    /// A gap or a torn tail ended the records kept: later files are only
    /// checked for damage.
    ended: bool,
    /// Each file's bytes, read into the same buffer.
    buf: Vec<u8>,
}

impl LogReader {
    /// Reads and decodes the log file `path` (named `named`). `None` for a
    /// file that holds nothing to replay or report now: all zeros, gone
    /// under [`Vanished::Skip`], damaged but `superseded`, or damaged past
    /// the end of the records kept (then noted in `damaged`).
    ///
    /// A file of zeros is a header that never reached the disk only when
    /// it is the `last` file: a switch syncs the older file before any
    /// record of the next one counts as durable, so a file of zeros before
    /// another is damage, noted in `damaged` (as damage in the middle of a
    /// file is), and the records kept end before it. Skipped silently, it
    /// left a gap where the replay stopped, and the acknowledged records of
    /// the files after it were dropped without a word.
    fn scan_file(
        &mut self,
        named: u64,
        path: &Path,
        superseded: bool,
        last: bool,
    ) -> Result<Option<Scan>> {
        match read_log_into(path, &mut self.buf) {
            Ok(None) if !last && !superseded => {
                self.out.damaged.get_or_insert_with(|| {
                    Error::corrupt(
                        path,
                        "log file is all zeros (or empty) but is not the last one: its \
                         records are lost, and replay cannot go past it to the files after it",
                    )
                });
                self.ended = true;
                Ok(None)
            }
            Ok(Some(scan)) if scan.first_lsn != named => Err(Error::corrupt(
                path,
                format!(
                    "the log file's name says its first record is LSN {named:016x}, its \
                     header says {:016x}: a log file is named after its first LSN (renamed \
                     or copied under another name?)",
                    scan.first_lsn
                ),
            )),
            Ok(scan) => Ok(scan),
            Err(e) if self.vanished == Vanished::Skip && not_found(&e) => Ok(None),
            // No recovery needs any record of it.
            Err(e) if superseded && e.is_damage() => Ok(None),
            // Past the end of what replay reads, a bad file is for
            // verification to report (the first problem in file order).
            Err(e) if self.ended => {
                self.out.damaged.get_or_insert(e);
                Ok(None)
            }
            Err(e) => Err(e),
        }
    }

    /// Notes that the records from LSN `from` up to `named`, the first of
    /// the log file `path`, are in no file, and ends the records kept
    /// there. A switch syncs the older file before any record of the next
    /// counts as durable, and only a checkpoint deletes log files (those
    /// below its position): a gap before a file that is not the last is a
    /// log file deleted or not copied, and the acknowledged records from
    /// `path` on cannot be replayed past it. (Before the last file, a gap
    /// is what a power loss during a switch leaves: see `next_position` in
    /// the engine.)
    fn note_missing(&mut self, path: &Path, from: u64, named: u64) {
        self.out.damaged.get_or_insert_with(|| {
            Error::corrupt(
                path,
                format!(
                    "the log records from LSN {from:016x} up to this file's first, \
                     {named:016x}, are in no file: a log file before this one is missing \
                     (deleted, or not copied with the rest of wal/), and replay cannot go \
                     past it to the acknowledged records of this file and the ones after it"
                ),
            )
        });
        self.ended = true;
    }

    /// Notes damage in the middle of `path` (a valid record after an
    /// invalid one) as `damaged`, unless the file is `superseded` or an
    /// earlier file was damaged.
    fn note_damaged_middle(&mut self, path: &Path, scan: &Scan, superseded: bool) {
        if scan.damaged_middle && !superseded && self.out.damaged.is_none() {
            self.out.damaged = Some(Error::corrupt(
                path,
                format!(
                    "a damaged record after LSN {} is followed by valid ones",
                    // LSNs follow each other modulo 2^64, as in `scan`.
                    scan.first_lsn.wrapping_add(scan.records.len() as u64)
                ),
            ));
        }
    }

    /// Appends the records of `scan` from `from` on while each follows the
    /// one before; a gap, or a torn tail past `from`, ends the log.
    fn keep_records(&mut self, scan: Scan) {
        let trailing = scan.trailing;
        // The position the first record past the valid ones would have.
        let end = scan.first_lsn.checked_add(scan.records.len() as u64);
        let mut records = scan.records;
        // Kept in place: the records from `from` on while each follows the
        // one before (the record after one at the last LSN has no number).
        let mut kept = 0;
        for i in 0..records.len() {
            let r = records[i];
            if r.lsn < self.from {
                continue;
            }
            let last = match kept {
                0 => self.out.records.last(),
                k => records.get(k - 1),
            };
            let expected = match last {
                None => Some(self.from),
                Some(l) => l.lsn.checked_add(1),
            };
            if Some(r.lsn) != expected {
                self.ended = true;
                break;
            }
            records[kept] = r;
            kept += 1;
        }
        records.truncate(kept);
        if self.out.records.is_empty() {
            self.out.records = records;
        } else {
            self.out.records.append(&mut records);
        }
        // A torn tail ends the log: nothing after it was acknowledged. Not
        // one at or below `from`: such a file is a leftover of a
        // checkpoint at `from` that did not get to delete it (a crash
        // between its manifest and the deletion), and the records from
        // `from` on are in the files after it. Ended there, the replay
        // dropped every acknowledged write of the sessions since.
        self.ended |= trailing > 0 && end.is_none_or(|e| e > self.from);
    }
}

/// The shadow copies' part of [`verify`]. One that a later checkpoint
/// deleted after the listing is left out ([`Vanished::Skip`]).
fn verify_shadows(dir: &Path, checkpoint: u64) -> Result<()> {
    let suffix = format!(".{checkpoint:016x}.shadow");
    let listed = entries(dir)?;
    crate::file::pause("shadows listed", dir);
    for (name, path) in listed {
        if !name.ends_with(&suffix) {
            continue;
        }
        let len = match fs::metadata(&path) {
            Ok(m) => m.len().saturating_sub(SHADOW_HEADER as u64),
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => continue,
            Err(err) => return Err(Error::io("stat shadow", &path, err)),
        };
        match read_shadow(&path, usize::try_from(len).unwrap_or(usize::MAX)) {
            Err(e) if not_found(&e) => {}
            r => r.map(drop)?,
        }
    }
    Ok(())
}

/// The entries of `dir` as `(name, path)`; none when `dir` does not exist.
fn entries(dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let listing = match fs::read_dir(dir) {
        Ok(l) => l,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(Error::io("list directory", dir, e)),
    };
    let mut out = Vec::new();
    for e in listing {
        let e = e.map_err(|e| Error::io("list directory", dir, e))?;
        out.push((e.file_name().to_string_lossy().into_owned(), e.path()));
    }
    Ok(out)
}

/// A log file's records, or `None` for a file of zeros (or empty): as the
/// last file, a header that never reached the disk, so a log that holds
/// nothing; before another, damage (the caller tells which). The file is
/// read into `buf`.
fn read_log_into(path: &Path, buf: &mut Vec<u8>) -> Result<Option<Scan>> {
    buf.clear();
    File::open(path)
        .and_then(|mut f| f.read_to_end(buf))
        .map_err(|e| Error::io("read log", path, e))?;
    if buf.iter().all(|&b| b == 0) {
        return Ok(None);
    }
    scan(buf, path).map(Some)
}

/// The log files in `dir` in LSN order: `(first LSN, path)`. Other files
/// are left alone.
pub(crate) fn list(dir: &Path) -> Result<Vec<(u64, PathBuf)>> {
    let mut out = Vec::new();
    for (name, path) in entries(dir)? {
        let Some(hex) = name.strip_suffix(".log") else {
            continue;
        };
        if hex.len() == 16 {
            if let Ok(lsn) = u64::from_str_radix(hex, 16) {
                out.push((lsn, path));
            }
        }
    }
    out.sort();
    Ok(out)
}

struct Writer {
    file: File,
    path: PathBuf,
    /// Encoded records not yet written to the file.
    buf: Vec<u8>,
    /// The LSN the next record gets.
    next_lsn: u64,
    /// Bytes in the file (header included).
    len: u64,
}

struct SyncState {
    /// Every record below this LSN is durable.
    durable: u64,
    /// A leader is writing and syncing; followers wait for it.
    syncing: bool,
    /// A failed sync: every later sync fails (the kernel may have dropped
    /// the pages it could not write).
    failed: bool,
}

/// Records a lane stages before it moves them into the log in one run.
const RUN: usize = 64;

/// A record staged by a writer thread (see [`Wal::stage`]): what it will
/// say once it has its LSN.
#[derive(Clone, Copy)]
struct Staged {
    op: Op,
    t: i64,
    h: KeyHash,
}

/// One writer thread's staged records, alone on its cache line.
#[repr(align(128))]
#[derive(Default)]
struct Lane(Mutex<Vec<Staged>>);

/// The open log: appends under the writers' stripes, group commit.
pub(crate) struct Wal {
    dir: PathBuf,
    writer: Mutex<Writer>,
    /// Records staged per writer thread ([`crate::fill::lane`]), moved into
    /// `writer` a run at a time: writers on different cores share no
    /// line of the log until a run moves.
    lanes: Box<[Lane]>,
    sync: Mutex<SyncState>,
    synced: Condvar,
    /// Mirrors of `Writer::next_lsn` and `SyncState::durable`, read without
    /// a lock: a call that wrote nothing checks them with two loads.
    appended: AtomicU64,
    durable: AtomicU64,
    failed: AtomicBool,
    /// The failure of a sync no caller waited for (the `interval` syncer's
    /// tick), kept for `close` to report: writes after it are refused with
    /// `PreviousIo`, which names no file.
    cause: Mutex<Option<Error>>,
    /// The first LSN of the current file.
    file_first: AtomicU64,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Wal {
    /// Starts a new, empty log file whose first record will be `next_lsn`,
    /// and makes it durable (file and directory).
    /// An existing file of that name that holds only its header (what a
    /// clean close leaves) is reused as it is.
    pub(crate) fn create(dir: &Path, next_lsn: u64) -> Result<Wal> {
        fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
        let (file, path) = match reuse_empty(dir, next_lsn) {
            Some(f) => f,
            None => new_file(dir, next_lsn)?,
        };
        Ok(Wal {
            dir: dir.to_path_buf(),
            writer: Mutex::new(Writer {
                file,
                path,
                buf: Vec::with_capacity(64 << 10),
                next_lsn,
                len: FILE_HEADER as u64,
            }),
            sync: Mutex::new(SyncState {
                durable: next_lsn,
                syncing: false,
                failed: false,
            }),
            synced: Condvar::new(),
            lanes: (0..crate::fill::LANES).map(|_| Lane::default()).collect(),
            appended: AtomicU64::new(next_lsn),
            durable: AtomicU64::new(next_lsn),
            failed: AtomicBool::new(false),
            cause: Mutex::new(None),
            file_first: AtomicU64::new(next_lsn),
        })
    }

    /// Whether a sync failed (the log refuses to sync again).
    #[inline]
    pub(crate) fn failed(&self) -> bool {
        self.failed.load(Ordering::Relaxed)
    }

    /// Keeps the failure of a sync whose caller reports it to nobody (the
    /// `interval` syncer), the first one only; `PreviousIo` (a failure
    /// already reported to the call that met it) is not kept.
    pub(crate) fn keep_cause(&self, e: Error) {
        if !matches!(e, Error::PreviousIo) {
            lock(&self.cause).get_or_insert(e);
        }
    }

    /// The failure [`Wal::keep_cause`] kept, once.
    pub(crate) fn take_cause(&self) -> Option<Error> {
        lock(&self.cause).take()
    }

    /// Returns once everything appended so far is durable; two loads when
    /// it already is.
    #[inline]
    pub(crate) fn sync_appended(&self) -> Result<()> {
        let upto = self.appended.load(Ordering::Acquire);
        if self.durable.load(Ordering::Acquire) >= upto {
            return Ok(());
        }
        self.sync_to(upto)
    }

    /// Stages a record in the calling thread's lane (`lane`: see
    /// [`crate::fill::lane`]); it reaches the log, with its LSN, when the
    /// lane holds a run of them or when the log is synced
    /// ([`Wal::sync_all`]), checkpointed or closed ([`Wal::next_lsn`]).
    /// Called under the key's stripe, after the write it logs, under the
    /// `interval` policy for Bloom writes only: they commute, so replay
    /// needs no order between records, and the syncer moves every lane
    /// before each sync, so a record is durable within one interval as
    /// one appended at once would be.
    pub(crate) fn stage(&self, lane: usize, op: Op, t: i64, h: KeyHash) -> Result<()> {
        let mut lane = lock(&self.lanes[lane % self.lanes.len()].0);
        lane.push(Staged { op, t, h });
        if lane.len() >= RUN {
            self.append_run(&mut lane)?;
        }
        Ok(())
    }

    /// Moves a lane's staged records into the log (the lane's lock held,
    /// then the log's: never the other way round).
    fn append_run(&self, run: &mut Vec<Staged>) -> Result<()> {
        if run.is_empty() {
            return Ok(());
        }
        let mut w = lock(&self.writer);
        let first = w.next_lsn;
        w.next_lsn += run.len() as u64;
        let records = run.iter().zip(first..).map(|(r, lsn)| Record {
            lsn,
            t: r.t,
            h: r.h,
            op: r.op,
        });
        encode_all(&mut w.buf, records);
        run.clear();
        self.appended.store(w.next_lsn, Ordering::Release);
        if w.buf.len() >= WRITE_AT {
            write_out(&mut w)?;
        }
        Ok(())
    }

    /// Moves every lane's staged records into the log.
    fn drain(&self) -> Result<()> {
        for lane in self.lanes.iter() {
            self.append_run(&mut lock(&lane.0))?;
        }
        Ok(())
    }

    /// Moves every staged record into the log and returns once everything
    /// appended is durable: the `interval` syncer's tick. A failure to
    /// write the staged records latches the log, as a failed sync does.
    pub(crate) fn sync_all(&self) -> Result<()> {
        if let Err(e) = self.drain() {
            lock(&self.sync).failed = true;
            self.failed.store(true, Ordering::Relaxed);
            return Err(e);
        }
        self.sync_appended()
    }

    /// Appends a record; returns its LSN. Called under the key's stripe,
    /// after the write it logs: writes of one key are logged in the order
    /// they were applied. (Bloom writes commute, so that order is all
    /// replay needs; counting writes use `append_applying`.)
    pub(crate) fn append(&self, op: Op, t: i64, h: KeyHash) -> Result<u64> {
        self.append_applying(op, t, h, || ()).map(|(lsn, ())| lsn)
    }

    /// Runs `apply` (the write) and appends its record under the log's
    /// lock, so that LSN order is the order writes of all keys were applied
    /// in: counting writes of different keys that share a saturating
    /// counter do not commute, and replay must apply them in that order.
    pub(crate) fn append_applying<R>(
        &self,
        op: Op,
        t: i64,
        h: KeyHash,
        apply: impl FnOnce() -> R,
    ) -> Result<(u64, R)> {
        let mut w = lock(&self.writer);
        let r = apply();
        let lsn = w.next_lsn;
        w.next_lsn += 1;
        encode_all(&mut w.buf, [Record { lsn, t, h, op }]);
        self.appended.store(lsn + 1, Ordering::Release);
        if w.buf.len() >= WRITE_AT {
            write_out(&mut w)?;
        }
        Ok((lsn, r))
    }

    /// The LSN the next record gets, once every staged record is moved
    /// into the log: every record below it is appended.
    pub(crate) fn next_lsn(&self) -> Result<u64> {
        self.drain()?;
        Ok(lock(&self.writer).next_lsn)
    }

    /// Whether the current file has grown past `bytes` (two loads).
    #[inline]
    pub(crate) fn checkpoint_due(&self, bytes: u64) -> bool {
        let records = self
            .appended
            .load(Ordering::Relaxed)
            .saturating_sub(self.file_first.load(Ordering::Relaxed));
        records.saturating_mul(RECORD as u64) >= bytes
    }

    /// Returns once every record below `lsn` is durable. Of several threads
    /// waiting at once, one (the leader) writes and syncs everything
    /// appended so far; the others wait for it (group commit).
    pub(crate) fn sync_to(&self, lsn: u64) -> Result<()> {
        self.lead(Some(lsn), || self.write_and_sync().map(Some))
            .map(|_| ())
    }

    /// Runs `work` as the sync leader (the one thread that writes and syncs
    /// the log; others wait for it), unless everything below `lsn` is
    /// durable already. `work` returns the LSN below which every record is
    /// then durable (`None`: nothing changed). A failure latches the log.
    fn lead(
        &self,
        lsn: Option<u64>,
        work: impl FnOnce() -> Result<Option<u64>>,
    ) -> Result<Option<u64>> {
        let mut s = lock(&self.sync);
        loop {
            if s.failed {
                return Err(Error::PreviousIo);
            }
            if lsn.is_some_and(|l| s.durable >= l) {
                return Ok(None);
            }
            if !s.syncing {
                break;
            }
            s = self.synced.wait(s).unwrap_or_else(|e| e.into_inner());
        }
        s.syncing = true;
        drop(s);
        let r = work();
        let mut s = lock(&self.sync);
        s.syncing = false;
        match &r {
            Ok(Some(upto)) => {
                s.durable = s.durable.max(*upto);
                self.durable.store(s.durable, Ordering::Release);
            }
            Ok(None) => {}
            Err(_) => {
                s.failed = true;
                self.failed.store(true, Ordering::Relaxed);
            }
        }
        self.synced.notify_all();
        drop(s);
        r
    }

    /// Writes the buffer out and fdatasyncs; returns the LSN below which
    /// every record is now durable.
    fn write_and_sync(&self) -> Result<u64> {
        let (file, path, upto) = {
            let mut w = lock(&self.writer);
            write_out(&mut w)?;
            let f = w
                .file
                .try_clone()
                .map_err(|e| Error::io("duplicate log descriptor", &w.path, e))?;
            (f, w.path.clone(), w.next_lsn)
        };
        crate::file::sync_data(&file, &path, "fsync log")?;
        Ok(upto)
    }

    /// Moves the appends to a new log file and makes every record before it
    /// durable in the older files; returns the new file's first LSN, or
    /// `None` when the current file holds no record. Appends wait only
    /// while the new file is opened (no sync runs under their lock).
    ///
    /// The first step of a checkpoint that runs beside the writers (see
    /// `Engine::checkpoint_beside_writers`): the records below the returned
    /// LSN are all in the older files, which the checkpoint may delete once
    /// the segments hold those records. One switch or restart at a time:
    /// the engine switches only on a background checkpoint's thread, which
    /// every restart (an exclusive checkpoint) joins first.
    pub(crate) fn switch(&self) -> Result<Option<u64>> {
        // As the sync leader for the whole switch: no group commit can then
        // sync the new file and declare the old one's unsynced records
        // durable with it.
        self.lead(None, || self.switch_leading())
    }

    fn switch_leading(&self) -> Result<Option<u64>> {
        let (old, old_path, l) = {
            let mut w = lock(&self.writer);
            let l = w.next_lsn;
            if l == self.file_first.load(Ordering::Relaxed) {
                return Ok(None);
            }
            write_out(&mut w)?;
            let (file, path) = new_file_unsynced(&self.dir, l)?;
            let old = std::mem::replace(&mut w.file, file);
            let old_path = std::mem::replace(&mut w.path, path);
            w.len = FILE_HEADER as u64;
            self.file_first.store(l, Ordering::Relaxed);
            (old, old_path, l)
        };
        crate::file::sync_data(&old, &old_path, "fsync log")?;
        let (new, new_path) = {
            let w = lock(&self.writer);
            let f = w
                .file
                .try_clone()
                .map_err(|e| Error::io("duplicate log descriptor", &w.path, e))?;
            (f, w.path.clone())
        };
        crate::file::sync_data(&new, &new_path, "fsync log")?;
        crate::file::fsync_dir(&self.dir)?;
        Ok(Some(l))
    }

    /// After a checkpoint made every record below `next_lsn` durable in the
    /// segments: starts a new log file and deletes the older ones. The
    /// caller holds the engine exclusively (no appends run).
    pub(crate) fn restart(&self, next_lsn: u64) -> Result<()> {
        let (file, path) = new_file(&self.dir, next_lsn)?;
        let mut w = lock(&self.writer);
        debug_assert!(w.buf.is_empty());
        w.file = file;
        w.path = path;
        w.buf.clear();
        w.next_lsn = next_lsn;
        w.len = FILE_HEADER as u64;
        self.appended.store(next_lsn, Ordering::Release);
        self.file_first.store(next_lsn, Ordering::Relaxed);
        drop(w);
        {
            let mut s = lock(&self.sync);
            s.durable = s.durable.max(next_lsn);
            self.durable.store(s.durable, Ordering::Release);
        }
        remove_older(&self.dir, next_lsn)
    }
}

fn write_out(w: &mut Writer) -> Result<()> {
    if w.buf.is_empty() {
        return Ok(());
    }
    let Writer {
        file, path, buf, ..
    } = w;
    // What reached the file leaves the buffer even when the write fails
    // part way, so that a later write goes on after it: writing it again
    // would put a run of repeated positions in the log, where replay stops.
    let (written, r) = match crate::file::check_write("write log", path, buf.len())? {
        Some((n, e)) => (write_some(file, &buf[..n]).0, Err(e)),
        None => {
            let (n, r) = write_some(file, buf);
            (n, r.map_err(|e| Error::io("write log", &*path, e)))
        }
    };
    w.len += written as u64;
    w.buf.drain(..written);
    r
}

/// Writes `bytes` to `file` until all are written or a write fails;
/// returns how many were written, and the failure.
fn write_some(file: &mut File, bytes: &[u8]) -> (usize, std::io::Result<()>) {
    let mut done = 0;
    while done < bytes.len() {
        match file.write(&bytes[done..]) {
            Ok(0) => return (done, Err(std::io::ErrorKind::WriteZero.into())),
            Ok(n) => done += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Err(e)),
        }
    }
    (done, Ok(()))
}

/// `wal/<lsn>.log` opened for appending, if it is exactly a valid header
/// for `lsn` (durable already: it was synced when it was made).
fn reuse_empty(dir: &Path, lsn: u64) -> Option<(File, PathBuf)> {
    let path = dir.join(log_name(lsn));
    let bytes = fs::read(&path).ok()?;
    if bytes != file_header(lsn) {
        return None;
    }
    let file = OpenOptions::new().append(true).open(&path).ok()?;
    Some((file, path))
}

/// Creates `wal/<lsn>.log` with its header, fsyncs it and the directory.
fn new_file(dir: &Path, next_lsn: u64) -> Result<(File, PathBuf)> {
    let (file, path) = new_file_unsynced(dir, next_lsn)?;
    crate::file::sync_data(&file, &path, "fsync log")?;
    crate::file::fsync_dir(dir)?;
    Ok((file, path))
}

/// [`new_file`] without its syncs: the caller makes the file and its
/// directory entry durable before any record in it counts as durable.
fn new_file_unsynced(dir: &Path, next_lsn: u64) -> Result<(File, PathBuf)> {
    let path = dir.join(log_name(next_lsn));
    crate::file::check("create log", &path)?;
    let mut file =
        crate::file::create_fresh(&path).map_err(|e| Error::io("create log", &path, e))?;
    file.write_all(&file_header(next_lsn))
        .map_err(|e| Error::io("write log", &path, e))?;
    Ok((file, path))
}

/// Deletes the log files whose records all lie below `lsn`.
pub(crate) fn remove_older(dir: &Path, lsn: u64) -> Result<()> {
    let mut removed = false;
    for (first, path) in list(dir)? {
        if first < lsn {
            crate::file::check("delete old log", &path)?;
            fs::remove_file(&path).map_err(|e| Error::io("delete old log", &path, e))?;
            removed = true;
        }
    }
    if removed {
        crate::file::fsync_dir(dir)?;
    }
    Ok(())
}

/// Every record at or after `from` in the log files of `dir`, in LSN order,
/// up to the first gap, torn record or damaged file.
pub(crate) fn replay_records(dir: &Path, from: u64) -> Result<Vec<Record>> {
    read_logs(dir, from).map(|l| l.records)
}

pub(crate) const SHADOW_MAGIC: [u8; 8] = *b"TBLMSHDW";
pub(crate) const SHADOW_HEADER: usize = 24;

/// The shadow copy of a counting sub-filter's body at checkpoint `lsn`:
/// `wal/<segment file name>.<lsn, 16 hex digits>.shadow`.
pub(crate) fn shadow_path(dir: &Path, seg_name: &str, lsn: u64) -> PathBuf {
    dir.join(format!("{seg_name}.{lsn:016x}.shadow"))
}

/// Writes a shadow copy (magic, body length, CRC32, the day a fingerprint
/// table was last swept, body) through a temporary file, fsynced and
/// renamed into place. The caller fsyncs the directory once for all
/// shadows of a checkpoint.
///
/// `swept`: a fingerprint table's last sweep day (see [`read_shadow`]);
/// `None` for a counting body, whose bytes 20..24 stay zero and whose
/// CRC32 covers the body alone.
pub(crate) fn write_shadow(path: &Path, body: &[u8], swept: Option<u32>) -> Result<()> {
    let tmp = path.with_extension("tmp");
    crate::file::check("create shadow", &tmp)?;
    let mut f = crate::file::create_fresh(&tmp).map_err(|e| Error::io("create shadow", &tmp, e))?;
    let mut head = [0u8; SHADOW_HEADER];
    head[0..8].copy_from_slice(&SHADOW_MAGIC);
    head[8..16].copy_from_slice(&(body.len() as u64).to_le_bytes());
    let day = swept.filter(|&d| d != 0).map_or([0; 4], u32::to_le_bytes);
    head[16..20].copy_from_slice(&shadow_crc(day, body).to_le_bytes());
    head[20..24].copy_from_slice(&day);
    f.write_all(&head)
        .and_then(|()| f.write_all(body))
        .map_err(|e| Error::io("write shadow", &tmp, e))?;
    crate::file::sync_data(&f, &tmp, "fsync shadow")?;
    drop(f);
    crate::file::check("rename shadow", path)?;
    fs::rename(&tmp, path).map_err(|e| Error::io("rename shadow", path, e))
}

/// A shadow copy's CRC32: of the body, preceded by the sweep day's four
/// bytes when there is one (not zero).
fn shadow_crc(day: [u8; 4], body: &[u8]) -> u32 {
    let mut h = crc32fast::Hasher::new();
    if day != [0; 4] {
        h.update(&day);
    }
    h.update(body);
    h.finalize()
}

/// Reads a shadow copy back, with the day its fingerprint table was last
/// swept when the copy was taken (`None`: a counting body, or a table's
/// copy written before the day was kept); a wrong length or checksum is
/// corrupt. A CRC32 of the body alone leaves bytes 20..24 unread.
pub(crate) fn read_shadow(path: &Path, body_len: usize) -> Result<(Vec<u8>, Option<u32>)> {
    let bad = |why: &str| Error::corrupt(path, why);
    // The length is checked before the read: a copy of the wrong size
    // (a sparse file of a terabyte) is damage, not an allocation.
    let want = u64::try_from(body_len)
        .ok()
        .and_then(|n| n.checked_add(SHADOW_HEADER as u64));
    let file = fs::File::open(path).map_err(|e| Error::io("read shadow", path, e))?;
    let size = file
        .metadata()
        .map_err(|e| Error::io("read shadow", path, e))?
        .len();
    let Some(want) = want.filter(|&w| w == size) else {
        return Err(bad("shadow copy has the wrong length or magic"));
    };
    let mut bytes = Vec::new();
    file.take(want.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io("read shadow", path, e))?;
    if bytes.len() as u64 != want || bytes[0..8] != SHADOW_MAGIC {
        return Err(bad("shadow copy has the wrong length or magic"));
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().unwrap_or([0; 8]));
    let crc = u32::from_le_bytes(bytes[16..20].try_into().unwrap_or([0; 4]));
    let day: [u8; 4] = bytes[20..24].try_into().unwrap_or([0; 4]);
    let body = &bytes[SHADOW_HEADER..];
    if len != body_len as u64 {
        return Err(bad("shadow copy's length field does not match its body"));
    }
    if crc == shadow_crc([0; 4], body) {
        return Ok((body.to_vec(), None));
    }
    if day != [0; 4] && crc == shadow_crc(day, body) {
        return Ok((body.to_vec(), Some(u32::from_le_bytes(day))));
    }
    Err(bad("shadow copy checksum mismatch"))
}

/// Whether `name` is one [`shadow_path`] makes (`ext` `.shadow`) or
/// [`write_shadow`]'s temporary file of one (`.tmp`): `<segment file>.<16
/// hex digits><ext>`. Only such files are deleted: another file in `wal/`
/// (`notes.tmp`) is not the engine's.
fn made_as_shadow(name: &str, ext: &str) -> bool {
    name.strip_suffix(ext)
        .and_then(|s| s.rsplit_once('.'))
        .is_some_and(|(seg, lsn)| {
            seg.ends_with(".seg") && lsn.len() == 16 && lsn.bytes().all(|b| b.is_ascii_hexdigit())
        })
}

/// Deletes the shadow copies (and leftover temporary files) of every
/// checkpoint but `keep`; other files are left alone.
pub(crate) fn remove_shadows_except(dir: &Path, keep: u64) -> Result<()> {
    let suffix = format!(".{keep:016x}.shadow");
    let mut removed = false;
    for (name, path) in entries(dir)? {
        let stale = (made_as_shadow(&name, ".shadow") && !name.ends_with(&suffix))
            || made_as_shadow(&name, ".tmp");
        if stale {
            fs::remove_file(&path).map_err(|err| Error::io("delete old shadow", &path, err))?;
            removed = true;
        }
    }
    if removed {
        crate::file::fsync_dir(dir)?;
    }
    Ok(())
}

/// This boot of the operating system (`/proc/sys/kernel/random/boot_id`),
/// or `None` where it cannot be read. While it is unchanged, the page cache
/// still holds every write the engine made before a process crash.
pub(crate) fn boot_id() -> Option<String> {
    fs::read_to_string("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(lsn: u64) -> Record {
        Record {
            lsn,
            t: 1_767_571_200 + lsn as i64,
            h: KeyHash {
                lo: lsn.wrapping_mul(0x9e37_79b9_7f4a_7c15),
                hi: !lsn,
            },
            op: if lsn.is_multiple_of(3) {
                Op::Remove
            } else {
                Op::Insert
            },
        }
    }

    /// A log of `n` files written by switches, the first from LSN 10, each
    /// of 10 records but the last, of 5.
    fn log_files(dir: &Path, n: u64) -> Vec<PathBuf> {
        let wal = Wal::create(dir, 10).unwrap();
        for i in 10..5 + 10 * n {
            let r = rec(i);
            assert_eq!(wal.append(r.op, r.t, r.h).unwrap(), i);
            if i % 10 == 9 {
                assert_eq!(wal.switch().unwrap(), Some(i + 1));
            }
        }
        wal.sync_appended().unwrap();
        let files: Vec<PathBuf> = list(dir).unwrap().into_iter().map(|(_, p)| p).collect();
        assert_eq!(files.len() as u64, n, "{files:?}");
        files
    }

    /// A log file missing before two others (deleted, or not copied with
    /// the rest of `wal/`) is damage: a switch syncs the older file before
    /// any record of the next counts as durable, and only a checkpoint
    /// deletes log files, the oldest first. The replay ends before the gap
    /// and `damaged` names the file after it; so does verification.
    /// Before, the replay ended there without a word, and the records of
    /// the files after the gap, acknowledged, were dropped.
    #[test]
    fn a_log_file_missing_before_two_others_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let files = log_files(dir.path(), 4);
        let whole = read_logs(dir.path(), 10).unwrap();
        assert_eq!(whole.records, (10..45).map(rec).collect::<Vec<_>>());
        assert!(whole.damaged.is_none());
        fs::remove_file(&files[1]).unwrap();
        let logs = read_logs(dir.path(), 10).unwrap();
        assert_eq!(logs.records, (10..20).map(rec).collect::<Vec<_>>());
        let name = files[2].file_name().unwrap().to_string_lossy().into_owned();
        let err = logs.damaged.expect("a missing log file is no damage");
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        assert!(err.to_string().contains(&name), "{err}");
        assert!(verify_logs(dir.path(), 10).is_err());
        // Missing below the checkpoint, the gap is nobody's: its records
        // are in the segments.
        assert!(read_logs(dir.path(), 30).unwrap().damaged.is_none());
        assert!(verify_logs(dir.path(), 30).is_ok());
        // The checkpoint's own file missing, before two others: damage too.
        let dir = tempfile::tempdir().unwrap();
        let files = log_files(dir.path(), 3);
        fs::remove_file(&files[0]).unwrap();
        let logs = read_logs(dir.path(), 10).unwrap();
        assert!(logs.records.is_empty());
        assert!(logs.damaged.is_some(), "the checkpoint's file missing");
        // Verification runs beside a writer, whose checkpoint since may
        // have deleted the files from the one it read on: not damage there.
        assert!(verify_logs(dir.path(), 10).is_ok());
        // A gap before the last file is what a power loss during a switch
        // leaves (see `next_position` in the engine): no damage. So a
        // missing file that the last one follows cannot be told from it.
        let dir = tempfile::tempdir().unwrap();
        let files = log_files(dir.path(), 2);
        let bytes = fs::read(&files[0]).unwrap();
        fs::write(&files[0], &bytes[..FILE_HEADER + 4 * RECORD]).unwrap();
        let logs = read_logs(dir.path(), 10).unwrap();
        assert_eq!(logs.records, (10..14).map(rec).collect::<Vec<_>>());
        assert!(logs.damaged.is_none());
    }

    /// A shadow copy whose length field disagrees with its body (the CRC32
    /// does not cover the field) is refused as such, not as a checksum
    /// mismatch.
    #[test]
    fn a_shadow_copy_with_a_wrong_length_field_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let path = shadow_path(dir.path(), "c-d-20260105-0.seg", 7);
        let body = [0x12u8; 40];
        write_shadow(&path, &body, None).unwrap();
        assert_eq!(read_shadow(&path, 40).unwrap(), (body.to_vec(), None));
        let mut bytes = fs::read(&path).unwrap();
        bytes[8] ^= 1;
        fs::write(&path, &bytes).unwrap();
        let err = read_shadow(&path, 40).unwrap_err();
        assert!(matches!(err, Error::Corrupt { .. }), "{err}");
        let msg = err.to_string();
        assert!(
            msg.contains("length field") && !msg.contains("checksum"),
            "{msg}"
        );
    }

    #[test]
    fn a_run_encodes_as_its_records_one_by_one() {
        let mut buf = b"before".to_vec();
        encode_all(&mut buf, (7..77).map(rec));
        assert_eq!(&buf[..6], b"before");
        let run = &buf[6..];
        assert_eq!(run.len(), 70 * RECORD);
        for (b, lsn) in run.chunks_exact(RECORD).zip(7..) {
            assert_eq!(b, rec(lsn).encode(), "record {lsn}");
            assert_eq!(Record::decode(b), Some(rec(lsn)));
        }
    }

    #[test]
    fn records_round_trip_and_a_torn_tail_is_dropped() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::create(dir.path(), 10).unwrap();
        for i in 10..20 {
            let r = rec(i);
            assert_eq!(wal.append(r.op, r.t, r.h).unwrap(), i);
        }
        wal.sync_appended().unwrap();
        let got = replay_records(dir.path(), 10).unwrap();
        assert_eq!(got, (10..20).map(rec).collect::<Vec<_>>());
        // Records must start at the checkpoint: a gap before them is not
        // replayed past.
        assert!(replay_records(dir.path(), 5).unwrap().is_empty());
        let got = replay_records(dir.path(), 15).unwrap();
        assert_eq!(got.len(), 5);
        // Every torn length of the last record drops exactly that record.
        let path = list(dir.path()).unwrap()[0].1.clone();
        let bytes = fs::read(&path).unwrap();
        for cut in 1..RECORD {
            fs::write(&path, &bytes[..bytes.len() - cut]).unwrap();
            let got = replay_records(dir.path(), 10).unwrap();
            assert_eq!(got.len(), 9, "cut {cut}");
        }
        // A flipped bit in a middle record ends the replay there and is
        // reported as damage in the middle.
        let mut b = bytes.clone();
        b[FILE_HEADER + 3 * RECORD + 5] ^= 4;
        fs::write(&path, &b).unwrap();
        assert_eq!(replay_records(dir.path(), 10).unwrap().len(), 3);
        assert!(scan(&b, &path).unwrap().damaged_middle);
    }

    /// A write of the log that fails part way (a short write) leaves what
    /// it wrote out of the buffer: the next write goes on after it. Written
    /// again, those records would repeat their positions in the file, and
    /// replay stops at the repeat (found in review).
    #[test]
    fn a_write_that_fails_part_way_is_not_written_again() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::create(dir.path(), 0).unwrap();
        for i in 0..100 {
            let r = rec(i);
            wal.append(r.op, r.t, r.h).unwrap();
        }
        let root = dir.path().to_path_buf();
        let fired = std::sync::Arc::new(AtomicBool::new(false));
        let once = std::sync::Arc::clone(&fired);
        crate::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
            let hit =
                op == "write log" && path.starts_with(&root) && !once.swap(true, Ordering::SeqCst);
            hit.then(|| {
                std::io::Error::new(std::io::ErrorKind::WriteZero, "short write (injected)")
            })
        })));
        let failed = write_out(&mut lock(&wal.writer));
        crate::testing::set_fault_hook(None);
        assert!(failed.is_err() && fired.load(Ordering::SeqCst));
        write_out(&mut lock(&wal.writer)).unwrap();
        let got = replay_records(dir.path(), 0).unwrap();
        assert_eq!(got.len(), 100, "records replayed");
        assert_eq!(got, (0..100).map(rec).collect::<Vec<_>>());
    }

    #[test]
    fn restart_deletes_older_files() {
        let dir = tempfile::tempdir().unwrap();
        let wal = Wal::create(dir.path(), 0).unwrap();
        let r = rec(0);
        wal.append(r.op, r.t, r.h).unwrap();
        wal.sync_appended().unwrap();
        wal.restart(1).unwrap();
        let files = list(dir.path()).unwrap();
        assert_eq!(files.len(), 1);
        assert_eq!(files[0].0, 1);
        assert!(replay_records(dir.path(), 0).unwrap().is_empty());
    }

    #[test]
    fn group_commit_makes_every_waiter_durable() {
        let dir = tempfile::tempdir().unwrap();
        let wal = std::sync::Arc::new(Wal::create(dir.path(), 0).unwrap());
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let wal = std::sync::Arc::clone(&wal);
                std::thread::spawn(move || {
                    for i in 0..200u64 {
                        let r = rec(t * 1000 + i);
                        let lsn = wal.append(r.op, r.t, r.h).unwrap();
                        wal.sync_to(lsn + 1).unwrap();
                    }
                })
            })
            .collect();
        for h in handles {
            h.join().unwrap();
        }
        assert_eq!(replay_records(dir.path(), 0).unwrap().len(), 800);
    }
}
