//! Opens engine directories whose MANIFEST and segment files were damaged by
//! the fuzz input, and uses whatever opens. Guards promises 2 and 3 of
//! RELIABILITY: any bytes on disk give an error or a working engine, never a
//! panic, an abort or a crash (SIGBUS, SIGSEGV).
//!
//! Input layout (every field optional; a short input just does less):
//!
//! ```text
//! byte 0      template (bits 0-1), clock mode (bits 2-4), reopen a day
//!             later (bit 5)
//! clock arg   0, 1 or 8 bytes, by clock mode
//! edits...    each: file selector, mode, then the mode's arguments
//! ```
//!
//! Edit modes: replace the whole file, XOR bytes at an offset, truncate,
//! append, XOR and then fix the checksums (so the field checks behind them
//! are reached), replace a substring and fix the checksums, delete the file,
//! copy another file over it.

#![no_main]

use std::path::{Path, PathBuf};
use std::sync::{Once, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

#[path = "../scratch.rs"]
mod scratch;

use libfuzzer_sys::fuzz_target;
use scratch::scratch;
use timebloom::{Config, Engine, Error, ManualClock, Options, Tier};

/// Monday 2026-01-05T00:00:00Z.
const T0: i64 = 1_767_571_200;
const DAY: i64 = 86_400;
const HOUR: i64 = 3_600;
const SEG_BODY: usize = 4096;

/// Files of an engine directory: paths relative to it, `MANIFEST` first,
/// and their bytes (`None`: deleted).
type Files = Vec<(PathBuf, Option<Vec<u8>>)>;

/// A valid engine directory built once per process, kept in memory.
struct Template {
    files: Files,
    /// The clock when it was last written.
    now: i64,
}

fn at(t: i64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(t.max(0) as u64)
}

fn copy_dir(from: &Path, to: &Path) {
    write_files(to, &read_files(from));
}

fn read_files(dir: &Path) -> Files {
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir.join("seg"))
        .expect("list seg")
        .map(|e| PathBuf::from("seg").join(e.expect("list seg").file_name()))
        .collect();
    segs.sort();
    std::iter::once(PathBuf::from("MANIFEST"))
        .chain(segs)
        .map(|rel| {
            let bytes = std::fs::read(dir.join(&rel)).expect("read engine file");
            (rel, Some(bytes))
        })
        .collect()
}

fn write_files(dir: &Path, files: &Files) {
    std::fs::create_dir_all(dir.join("seg")).expect("create seg");
    for (rel, bytes) in files {
        if let Some(b) = bytes {
            std::fs::write(dir.join(rel), b).expect("write engine file");
        }
    }
}

/// Builds a template: a few days of inserts so that there are sealed and
/// open segments and chains longer than one sub-filter. With `crashed`, the
/// files are copied while the engine is still open (dirty headers, an
/// unsealed past segment), as a process crash leaves them.
fn build(tiers: Vec<Tier>, crashed: bool) -> Template {
    let work = scratch();
    let mut now = T0 + 12 * HOUR;
    let clock = ManualClock::new(at(now));
    let config = Config {
        tiers,
        expected_items_per_day: 8,
        fpr: 0.01,
        ..Config::default()
    };
    let e = Engine::create_with(work.path(), config, Options::default().clock(clock.clone()))
        .expect("create template");
    for i in 0..40 {
        e.insert(format!("a{i}").as_bytes()).expect("insert");
    }
    now += DAY;
    clock.set(at(now));
    for i in 0..5 {
        e.insert(format!("b{i}").as_bytes()).expect("insert");
    }
    e.flush().expect("flush");
    for i in 0..20 {
        e.insert_at(format!("c{i}").as_bytes(), at(now - DAY))
            .expect("insert_at");
    }
    let out = if crashed {
        let out = scratch();
        copy_dir(work.path(), out.path());
        drop(e);
        out
    } else {
        e.close().expect("close template");
        work
    };
    // The template must open as it is, or the target tests nothing. Open a
    // copy: opening recovers and a clean close rewrites the headers, which
    // would leave a "crashed" template indistinguishable from a clean one.
    let probe = scratch();
    copy_dir(out.path(), probe.path());
    let check = Engine::open_with(
        probe.path(),
        Options::default()
            .clock(ManualClock::new(at(now)))
            .verify_on_open(true),
    )
    .expect("the template opens");
    check.close().expect("close template");
    Template {
        files: read_files(out.path()),
        now,
    }
}

fn templates() -> &'static [Template] {
    static T: OnceLock<Vec<Template>> = OnceLock::new();
    T.get_or_init(|| {
        let six_hours = Duration::from_secs(6 * 3600);
        vec![
            build(vec![Tier::daily(3), Tier::weekly(2)], false),
            build(vec![Tier::daily(3), Tier::weekly(2)], true),
            build(
                vec![Tier::custom(six_hours, 4).counting(), Tier::daily(2)],
                false,
            ),
            build(vec![Tier::monthly(2), Tier::daily(1).counting()], true),
        ]
    })
}

/// Keeps a damaged manifest that names an enormous configuration from
/// filling the disk: writes past this size fail with EFBIG instead.
fn limit_file_size() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // SAFETY: plain libc calls with valid arguments; ignoring SIGXFSZ
        // makes an oversized write return EFBIG instead of killing us.
        unsafe {
            libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            let lim = libc::rlimit {
                rlim_cur: 64 << 20,
                rlim_max: 64 << 20,
            };
            libc::setrlimit(libc::RLIMIT_FSIZE, &lim);
        }
    });
}

/// Reads fields from the fuzz input; past its end every field is zero/empty.
struct Input<'a>(&'a [u8]);

impl<'a> Input<'a> {
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn u64(&mut self) -> u64 {
        let mut b = [0u8; 8];
        for x in &mut b {
            *x = self.u8();
        }
        u64::from_le_bytes(b)
    }

    /// A length-prefixed chunk (the length is taken modulo what is left).
    fn chunk(&mut self) -> &'a [u8] {
        let n = usize::from(self.u16()) % (self.0.len() + 1);
        let (c, rest) = self.0.split_at(n);
        self.0 = rest;
        c
    }
}

/// Makes the checksums match the (damaged) contents again.
fn fix_checksums(file: &Path, bytes: &mut [u8]) {
    if file == Path::new("MANIFEST") {
        if bytes.len() >= 20 {
            let body_len = (bytes.len() - 20) as u32;
            let crc = crc32fast::hash(&bytes[20..]);
            bytes[12..16].copy_from_slice(&body_len.to_le_bytes());
            bytes[16..20].copy_from_slice(&crc.to_le_bytes());
        }
    } else if bytes.len() >= 128 {
        if bytes.len() > SEG_BODY {
            let crc = crc32fast::hash(&bytes[SEG_BODY..]);
            bytes[120..124].copy_from_slice(&crc.to_le_bytes());
        }
        let crc = crc32fast::hash(&bytes[..124]);
        bytes[124..128].copy_from_slice(&crc.to_le_bytes());
    }
}

fn xor_at(bytes: &mut [u8], offset: usize, chunk: &[u8]) {
    if bytes.is_empty() {
        return;
    }
    let offset = offset % bytes.len();
    for (b, x) in bytes[offset..].iter_mut().zip(chunk) {
        *b ^= x;
    }
}

/// Applies one edit to the files.
fn edit(files: &mut Files, input: &mut Input) {
    let n = files.len();
    let which = usize::from(input.u8()) % n;
    let mode = input.u8() % 8;
    let rel = files[which].0.clone();
    let mut bytes = files[which].1.take().unwrap_or_default();
    match mode {
        0 => bytes = input.chunk().to_vec(),
        1 => {
            let off = usize::from(input.u16());
            xor_at(&mut bytes, off, input.chunk());
        }
        2 => {
            let n = usize::from(input.u16()) % (bytes.len() + 1);
            bytes.truncate(n);
        }
        3 => bytes.extend_from_slice(input.chunk()),
        4 => {
            // The header of a segment, the body of a manifest: where the
            // fields behind the checksums are.
            let off = usize::from(input.u16());
            let chunk = input.chunk();
            if rel == Path::new("MANIFEST") {
                if bytes.len() > 20 {
                    xor_at(&mut bytes[20..], off, chunk);
                }
            } else {
                let end = bytes.len().min(120);
                xor_at(&mut bytes[..end], off, chunk);
            }
            fix_checksums(&rel, &mut bytes);
        }
        5 => {
            // Replace the first occurrence of a substring (JSON values and
            // keys in the manifest), then fix the checksums.
            let needle = input.chunk();
            let with = input.chunk();
            if !needle.is_empty() {
                if let Some(i) = bytes.windows(needle.len()).position(|w| w == needle) {
                    bytes.splice(i..i + needle.len(), with.iter().copied());
                }
            }
            fix_checksums(&rel, &mut bytes);
        }
        6 => return, // deleted
        _ => {
            // Another file's bytes under this name (a swapped segment).
            let other = usize::from(input.u8()) % n;
            if other != which {
                bytes = files[other].1.clone().unwrap_or_default();
            }
        }
    }
    files[which].1 = Some(bytes);
}

fn exercise(e: &Engine, now: i64) {
    let _ = e.contains(b"a1");
    let _ = e.contains(b"c3");
    let _ = e.insert(b"fuzz");
    let _ = e.insert(&[0u8; 300]);
    let _ = e.contains_within(b"b2", Duration::from_secs(3600));
    let _ = e.contains_within(b"a1", Duration::from_secs(2 * 86_400));
    let _ = e.insert_at(b"past", at(now.saturating_sub(DAY)));
    let _ = e.insert_batch(&[b"x1", b"x2", b"x3"]);
    let _ = e.contains_batch(&[b"a1", b"x2"]);
    let _ = e.stats();
    let _ = e.verify();
    let _ = e.flush();
}

fuzz_target!(|data: &[u8]| {
    limit_file_size();
    let mut input = Input(data);
    let head = input.u8();
    let templates = templates();
    let template = &templates[usize::from(head & 3) % templates.len()];
    let now = match (head >> 2) & 7 {
        1 => template.now + i64::from(input.u8()) * HOUR,
        2 => template.now + i64::from(input.u8()) * DAY,
        3 => template.now - i64::from(input.u8()) * HOUR,
        4 => input.u64() as i64,
        _ => template.now,
    };
    let mut files = template.files.clone();
    while !input.is_empty() {
        edit(&mut files, &mut input);
    }
    let dir = scratch();
    write_files(dir.path(), &files);
    let clock = ManualClock::new(at(now));
    let options = Options::default().clock(clock.clone()).verify_on_open(true);
    if let Ok(e) = Engine::open_with(dir.path(), options.clone()) {
        exercise(&e, now);
        let closed = e.close();
        // What the engine wrote must open again, a day later when bit 5 of
        // byte 0 is set (rotation creates segments, which is slow), unless
        // the disk refused a write (see `limit_file_size`).
        let later = if head & 0x20 != 0 {
            now.saturating_add(DAY)
        } else {
            now
        };
        clock.set(at(later));
        match Engine::open_with(dir.path(), options) {
            Ok(e) => exercise(&e, later),
            Err(Error::Io { .. }) | Err(Error::WindowUnavailable { .. }) => {}
            Err(err) => assert!(
                closed.is_err(),
                "an engine that opened and closed cleanly does not open again: {err}"
            ),
        }
    }
});
