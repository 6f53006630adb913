//! Reading keys: input files (plain or gzip) or stdin, opened and checked
//! before the engine is touched; lines read with a bounded length; keys
//! derived from lines (trim, canonical URL) in batches.
//!
//! A line is never read whole into memory past the limit: at most
//! `max_line + 2` bytes of it are kept, the rest is skipped up to its
//! newline. Lines end at `\n`; a trailing `\r` is dropped; empty lines are
//! skipped; the last line may lack its newline.

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read};
use std::ops::Range;
use std::path::PathBuf;
use std::rc::Rc;

use clap::ValueEnum;
use flate2::read::MultiGzDecoder;
use rustix::event::{PollFd, PollFlags};
use timebloom::canonical::Canonicalizer;

use crate::{note, CliError, CliResult};

/// Lines per batch handed to the engine.
pub const CHUNK: usize = 4096;

/// Bytes of lines after which a batch is handed over, whatever its count
/// of lines: a batch of [`CHUNK`] lines at the limit held 4096 times the
/// limit (twice that in buffers, more in rewritten keys). Batches of
/// URLs (16384 lines under `--sync always`) stay whole below it.
const BATCH_BYTES: usize = 4 << 20;

/// A line or key buffer of a [`Chunk`] larger than this is let go of
/// before the next batch rather than kept for reuse, so that a few long
/// lines do not keep their memory for the rest of the input.
const KEEP_BUFFER: usize = 4096;

/// What to do with a line longer than the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LongLines {
    /// Stop with an error naming the file and line (exit 2).
    Error,
    /// Skip the line; the count is reported on stderr at the end.
    Skip,
}

/// What to do with a line that is not a URL under `--canonical`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum NotUrl {
    /// Use the line as it is as the key.
    Keep,
    /// Skip the line (not recorded, not printed); counted on stderr.
    Skip,
    /// Stop with an error naming the file, line and reason (exit 2).
    Error,
}

/// How keys are made from lines.
pub struct KeyRules {
    /// Trim ASCII whitespace around the line before using it as a key.
    pub trim: bool,
    /// Canonicalize keys as URLs.
    pub canonical: Option<Canonicalizer>,
    /// Lines that are not URLs under `canonical`.
    pub not_url: NotUrl,
    /// The longest line accepted, in bytes (its line end left out), as
    /// read: before trimming or canonicalization.
    pub max_line: usize,
    /// Lines longer than `max_line`.
    pub long_lines: LongLines,
}

impl KeyRules {
    fn transforms(&self) -> bool {
        self.trim || self.canonical.is_some()
    }
}

/// Counts bytes read from a file, for the progress bar's fraction done.
struct Counted<R> {
    inner: R,
    read: Rc<Cell<u64>>,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read.set(self.read.get() + n as u64);
        Ok(n)
    }
}

/// Standard input that waits when a read would block. A pipe that another
/// process sharing it set non-blocking (the flag belongs to the open pipe,
/// not to this process) answers "try again" while the producer is between
/// lines; taken for a failure, it ended the command mid-stream.
struct WaitingStdin(io::Stdin);

impl Read for WaitingStdin {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.0.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(&self.0, PollFlags::IN)];
                    // Interrupted, or any other answer: the read tells.
                    let _ = rustix::event::poll(&mut fds, None);
                }
                r => return r,
            }
        }
    }
}

/// A buffered input that can tell whether a read would need the source.
trait Input: BufRead {
    fn buffered(&self) -> bool;
}

impl<R: Read> Input for BufReader<R> {
    fn buffered(&self) -> bool {
        !self.buffer().is_empty()
    }
}

/// One input: stdin, a pipe or device, or a regular file opened when
/// reading reaches it.
struct Source {
    name: String,
    /// `None` for a regular file not reached yet (see [`open_inputs`]).
    reader: Option<Box<dyn Input>>,
    /// The file to open when reached; `None` for stdin.
    path: Option<PathBuf>,
    line: u64,
}

/// Every input, checked before any work starts.
pub struct Inputs {
    sources: VecDeque<Source>,
    /// Total bytes of the regular files, when every input is one.
    pub total_bytes: Option<u64>,
    /// Bytes read so far from the files (compressed bytes for gzip).
    pub read_bytes: Rc<Cell<u64>>,
    /// Whether every input is a regular file (stdin too, when it is
    /// one): reading never waits for a writer, so `filter-new` holds
    /// signals while it reads (see `signals`).
    pub never_wait: bool,
}

/// Checks every input in turn (`-` is stdin; none means stdin): a missing,
/// unreadable or non-gzip `.gz` file is an error naming it, before anything
/// else happens. Each regular file is opened for the check and closed
/// again, and opened once more when reading reaches it: an input list of
/// thousands of files (`logs/*.gz`) holds one open at a time, within the
/// limit of open files.
pub fn open_inputs(files: Vec<PathBuf>) -> CliResult<Inputs> {
    let mut files = files;
    if files.is_empty() {
        files.push(PathBuf::from("-"));
    }
    let read_bytes = Rc::new(Cell::new(0));
    let mut total = Some(0u64);
    let mut never_wait = true;
    let mut sources = VecDeque::with_capacity(files.len());
    for path in files {
        if path.as_os_str() == "-" {
            // As for a file: refused before anything is created, rather
            // than failing at its first read (EISDIR).
            let kind = rustix::fs::fstat(io::stdin())
                .map(|st| rustix::fs::FileType::from_raw_mode(st.st_mode));
            if kind == Ok(rustix::fs::FileType::Directory) {
                return Err(CliError("stdin: is a directory, not a file of keys".into()));
            }
            never_wait &= kind == Ok(rustix::fs::FileType::RegularFile);
            total = None;
            sources.push_back(Source {
                name: "stdin".into(),
                reader: Some(Box::new(BufReader::with_capacity(
                    1 << 16,
                    WaitingStdin(io::stdin()),
                ))),
                path: None,
                line: 0,
            });
            continue;
        }
        let name = path.display().to_string();
        // The bytes read by the check are not progress.
        let (reader, size) = open_file(&path, &name, &Rc::new(Cell::new(0)))?;
        never_wait &= size.is_some();
        total = match (total, size) {
            (Some(t), Some(n)) => Some(t + n),
            _ => None, // a pipe or a device: no known size
        };
        // A regular file opens again as it was; a pipe or a device stays
        // open (its writer would see the reader go, and a `.gz` check has
        // consumed its first bytes), and so has no progress to count.
        let reader = if size.is_some() { None } else { Some(reader) };
        sources.push_back(Source {
            name,
            reader,
            path: Some(path),
            line: 0,
        });
    }
    Ok(Inputs {
        sources,
        total_bytes: total,
        read_bytes,
        never_wait,
    })
}

/// Opens and checks the file of keys at `path` (called `name`): its
/// reader (gzip decompressed for a `.gz` name, in any case), counting the bytes read
/// into `read`, and its size if it is a regular file.
fn open_file(
    path: &std::path::Path,
    name: &str,
    read: &Rc<Cell<u64>>,
) -> CliResult<(Box<dyn Input>, Option<u64>)> {
    let file = File::open(path).map_err(|e| CliError::io(&name, "open", e))?;
    let meta = file
        .metadata()
        .map_err(|e| CliError::io(&name, "stat", e))?;
    if meta.is_dir() {
        return Err(CliError(format!(
            "{name}: is a directory, not a file of keys"
        )));
    }
    let size = meta.is_file().then_some(meta.len());
    let counted = Counted {
        inner: file,
        read: Rc::clone(read),
    };
    let reader: Box<dyn Input> = if path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("gz"))
    {
        let mut raw = BufReader::with_capacity(1 << 16, counted);
        let head = raw.fill_buf().map_err(|e| CliError::io(&name, "read", e))?;
        // An empty file too: gzip data has a header (`zcat` refuses it).
        if !head.starts_with(&[0x1f, 0x8b]) {
            let what = if head.is_empty() {
                "; the file is empty"
            } else {
                ""
            };
            return Err(CliError(format!(
                "{name}: not gzip data (the name ends in .gz{what})"
            )));
        }
        Box::new(BufReader::with_capacity(1 << 16, MultiGzDecoder::new(raw)))
    } else {
        Box::new(BufReader::with_capacity(1 << 16, counted))
    };
    Ok((reader, size))
}

/// One line read with a bounded length.
enum Line {
    /// A line is in the buffer (without its `\n` or `\r\n`).
    Key,
    /// A line of this many bytes was longer than the limit and was skipped.
    TooLong(u64),
    /// A line longer than the limit went on past this many bytes, where
    /// reading it stopped (its end was not read).
    Longer(u64),
    /// The input has no more lines.
    End,
}

/// Reads one line into `buf`, keeping at most `max + 2` bytes of it.
#[cfg(test)]
fn read_line(r: &mut dyn BufRead, buf: &mut Vec<u8>, max: usize) -> io::Result<Line> {
    read_line_upto(r, buf, max, u64::MAX)
}

/// How far a line over the limit is measured under `--long-lines error`,
/// in multiples of the limit: the error gives its length, but a line with
/// no end (`yes | tr -d '\n'`) must not keep the command reading forever.
pub const MEASURE_LIMITS: u64 = 2048;

/// Reads one line into `buf`, keeping at most `max + 2` bytes of it; a
/// longer line is skipped to its end, or, past `measure` bytes, left
/// unread ([`Line::Longer`]).
fn read_line_upto(
    r: &mut dyn BufRead,
    buf: &mut Vec<u8>,
    max: usize,
    measure: u64,
) -> io::Result<Line> {
    buf.clear();
    let cap = max as u64 + 2;
    let n = (&mut *r).take(cap).read_until(b'\n', buf)?;
    if n == 0 {
        return Ok(Line::End);
    }
    let mut len = n as u64;
    if buf.last() == Some(&b'\n') {
        buf.pop();
        len -= 1;
    } else if len == cap {
        // The limit cut the line: skip the rest of it without keeping it.
        // Its length leaves out a trailing `\r`, as a key does.
        let mut last = buf.last().copied();
        buf.clear();
        loop {
            let avail = match r.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if avail.is_empty() {
                break;
            }
            let end = avail.iter().position(|&b| b == b'\n');
            // Past the bound, stop unless the line ends in what is read:
            // it has more than `len` bytes then (one less when `avail` is
            // a lone `\r`, which a `\n` may follow).
            if len > measure && end.is_none() {
                return Ok(Line::Longer(len - u64::from(avail == b"\r")));
            }
            match end {
                Some(i) => {
                    if i > 0 {
                        last = Some(avail[i - 1]);
                    }
                    len += i as u64;
                    r.consume(i + 1);
                    break;
                }
                None => {
                    let n = avail.len();
                    last = Some(avail[n - 1]);
                    len += n as u64;
                    r.consume(n);
                }
            }
        }
        if last == Some(b'\r') {
            len -= 1;
        }
        return Ok(Line::TooLong(len));
    }
    if buf.last() == Some(&b'\r') {
        buf.pop();
        len -= 1;
    }
    if buf.len() > max {
        buf.clear();
        return Ok(Line::TooLong(len));
    }
    Ok(Line::Key)
}

/// The lines of one batch and the keys made from them; the buffers are
/// reused from batch to batch. A key that is a part of its line (the whole
/// line, the line trimmed, a URL already canonical) is not copied.
#[derive(Default)]
pub struct Chunk {
    lines: Vec<Vec<u8>>,
    /// Keys that are not a part of their line (rewritten URLs).
    keys: Vec<Vec<u8>>,
    /// Where each key is when `transformed`: a range of its line, or
    /// (`None`) in `keys`.
    spans: Vec<Option<Range<usize>>>,
    len: usize,
    transformed: bool,
}

impl Chunk {
    /// The lines as read (what `filter-new` prints).
    pub fn lines(&self) -> &[Vec<u8>] {
        &self.lines[..self.len]
    }

    /// The keys the engine sees.
    pub fn keys(&self) -> Vec<&[u8]> {
        let lines = self.lines().iter();
        if !self.transformed {
            return lines.map(Vec::as_slice).collect();
        }
        (lines.zip(&self.spans).zip(&self.keys))
            .map(|((line, span), key)| match span {
                Some(r) => &line[r.clone()],
                None => key.as_slice(),
            })
            .collect()
    }
}

/// Counts of what the reader did, for `--stats` and the final notes.
#[derive(Default, Clone, Copy)]
pub struct ReadCounts {
    /// Keys handed to the engine.
    pub keys: u64,
    /// Lines skipped as too long.
    pub too_long: u64,
    /// Lines that were not URLs (kept as they are, or skipped).
    pub not_urls: u64,
    /// Lines skipped because they were not URLs.
    pub not_urls_skipped: u64,
    /// Lines skipped as empty (after trimming, with `--trim`).
    pub empty: u64,
}

/// Keys from command-line arguments, or lines from the inputs in turn.
pub struct KeyReader {
    args: Option<std::vec::IntoIter<Vec<u8>>>,
    /// Arguments taken so far, over every batch (for the argument number
    /// an error names).
    args_taken: usize,
    inputs: Inputs,
    rules: KeyRules,
    /// An error met while filling a batch, returned by the next call so
    /// that the keys before it are processed first.
    pending: Option<CliError>,
    /// What was read.
    pub counts: ReadCounts,
    command: &'static str,
    /// Keys per batch at most.
    batch: usize,
}

impl KeyReader {
    /// Batches of up to `lines` keys instead of [`CHUNK`] (a batch is what
    /// one engine call records; under `--sync always`, one fsync).
    pub fn with_batch(mut self, lines: usize) -> KeyReader {
        self.batch = lines.max(1);
        self
    }

    /// Lines of `inputs`.
    pub fn new(inputs: Inputs, rules: KeyRules, command: &'static str) -> KeyReader {
        KeyReader {
            args: None,
            args_taken: 0,
            inputs,
            rules,
            pending: None,
            counts: ReadCounts::default(),
            command,
            batch: CHUNK,
        }
    }

    /// The arguments as keys, byte for byte, or stdin lines when there are none.
    pub fn args_or_stdin(
        args: Vec<OsString>,
        rules: KeyRules,
        command: &'static str,
    ) -> CliResult<KeyReader> {
        let args: Vec<Vec<u8>> = args.into_iter().map(os_bytes).collect();
        // An empty line of input is skipped, but a key given as an empty
        // argument is most likely an unset shell variable (`check DIR
        // "$url"`): skipped, `check` answered "every key seen" (exit 0).
        let empty = |a: &Vec<u8>| a.is_empty() || (rules.trim && a.trim_ascii().is_empty());
        if let Some(n) = args.iter().position(empty) {
            return Err(CliError(format!(
                "argument {}: an empty key (an empty line of input is skipped; an empty \
                 argument is an error)",
                n + 1
            )));
        }
        // The same for an argument that `--not-url skip` would skip:
        // `check` had nothing to answer and said "every key seen".
        if let (Some(c), NotUrl::Skip) = (&rules.canonical, rules.not_url) {
            let mut out = Vec::new();
            for (n, a) in args.iter().enumerate() {
                let text = if rules.trim { a.trim_ascii() } else { &a[..] };
                out.clear();
                if let Err(e) = c.canonicalize_into_if_changed(text, &mut out) {
                    return Err(CliError(format!(
                        "argument {}: {e} (--not-url skip skips lines of input, not \
                         arguments; --not-url keep uses it as it is)",
                        n + 1
                    )));
                }
            }
        }
        let mut r = KeyReader::new(open_inputs(Vec::new())?, rules, command);
        if !args.is_empty() {
            r.args = Some(args.into_iter());
        }
        Ok(r)
    }

    /// The inputs (for the progress bar).
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    /// Refills `chunk` with up to [`CHUNK`] keys (see `with_batch`); `false` once input is
    /// exhausted. Returns a partial batch rather than block for more input,
    /// so that a slow pipe streams through, and once its lines hold
    /// [`BATCH_BYTES`]. An error (a long line, a read failure) comes after
    /// the keys read before it have been returned.
    pub fn fill(&mut self, chunk: &mut Chunk) -> CliResult<bool> {
        // The buffers the last batch used: its lines, and the one after
        // them (a line skipped, or a key that was not a URL).
        let used = chunk.len + 1;
        let lines = chunk.lines.iter_mut().take(used);
        for buf in lines.chain(chunk.keys.iter_mut().take(used)) {
            if buf.capacity() > KEEP_BUFFER {
                *buf = Vec::new();
            }
        }
        chunk.len = 0;
        chunk.transformed = self.rules.transforms();
        if let Some(e) = self.pending.take() {
            return Err(e);
        }
        if self.args.is_some() {
            while chunk.len < CHUNK {
                let Some(arg) = self.args.as_mut().and_then(Iterator::next) else {
                    break;
                };
                if chunk.len == chunk.lines.len() {
                    chunk.lines.push(Vec::new());
                }
                chunk.lines[chunk.len] = arg;
                self.args_taken += 1;
                let n = self.args_taken;
                // `--not-url skip` refuses an argument too (see
                // `args_or_stdin`): only keep goes on.
                push_key(
                    &self.rules,
                    &mut self.counts,
                    chunk,
                    "keep uses it as it is",
                    &|| format!("argument {n}"),
                )?;
            }
            return Ok(chunk.len > 0);
        }
        let mut held = 0;
        while chunk.len < self.batch && held < BATCH_BYTES {
            let Some(src) = self.inputs.sources.front_mut() else {
                break;
            };
            if chunk.len > 0 && !src.reader.as_ref().is_some_and(|r| r.buffered()) {
                break; // hand over what we have rather than block for more
            }
            let reader = match (&mut src.reader, &src.path) {
                (Some(r), _) => r,
                (None, path) => {
                    let Some(path) = path else { break };
                    match open_file(path, &src.name, &self.inputs.read_bytes) {
                        Ok((r, _)) => src.reader.insert(r),
                        Err(e) => {
                            self.inputs.sources.pop_front();
                            return self.defer(chunk, e);
                        }
                    }
                }
            };
            if chunk.len == chunk.lines.len() {
                chunk.lines.push(Vec::new());
            }
            let buf = &mut chunk.lines[chunk.len];
            // Under `--long-lines error` an overlong line ends the command:
            // it is measured only so far.
            let measure = match self.rules.long_lines {
                LongLines::Error => (self.rules.max_line as u64).saturating_mul(MEASURE_LIMITS),
                LongLines::Skip => u64::MAX,
            };
            let line = match read_line_upto(&mut **reader, buf, self.rules.max_line, measure) {
                Ok(l) => l,
                Err(e) => {
                    // The lines before it were read whole, and used.
                    let e = CliError(format!(
                        "{}: read failed at line {}: {e}",
                        src.name,
                        src.line + 1
                    ));
                    return self.defer(chunk, e);
                }
            };
            match line {
                Line::End => {
                    self.inputs.sources.pop_front();
                }
                Line::TooLong(_) | Line::Longer(_) => {
                    src.line += 1;
                    if self.rules.long_lines == LongLines::Skip {
                        self.counts.too_long += 1;
                        continue;
                    }
                    let size = match line {
                        Line::Longer(len) => format!("more than {len}"),
                        Line::TooLong(len) => len.to_string(),
                        Line::Key | Line::End => String::new(),
                    };
                    let e = CliError(format!(
                        "{}:{}: a line of {size} bytes is longer than the limit of {} \
                         (--max-line-bytes; --long-lines skip skips such lines)",
                        src.name, src.line, self.rules.max_line
                    ));
                    return self.defer(chunk, e);
                }
                Line::Key => {
                    src.line += 1;
                    if buf.is_empty() {
                        self.counts.empty += 1;
                        continue;
                    }
                    held += buf.len();
                    let (name, line) = (&src.name, src.line);
                    let hint = "keep or skip goes on";
                    let pushed = push_key(&self.rules, &mut self.counts, chunk, hint, &|| {
                        format!("{name}:{line}")
                    });
                    if let Err(e) = pushed {
                        return self.defer(chunk, e);
                    }
                }
            }
        }
        Ok(chunk.len > 0)
    }

    /// Keeps `e` for the next call when the batch holds keys.
    fn defer(&mut self, chunk: &Chunk, e: CliError) -> CliResult<bool> {
        if chunk.len == 0 {
            return Err(e);
        }
        self.pending = Some(e);
        Ok(true)
    }

    /// Notes on stderr about skipped lines, once input is done.
    pub fn report_skips(&self) {
        let c = &self.counts;
        if c.too_long > 0 {
            note(format_args!(
                "{}: skipped {} line(s) longer than {} bytes",
                self.command, c.too_long, self.rules.max_line
            ));
        }
        // Under `--not-url error` the line that was not a URL stopped the
        // command, and the error names it.
        if c.not_urls > 0 && self.rules.not_url != NotUrl::Error {
            let what = if c.not_urls_skipped > 0 {
                "skipped"
            } else {
                "kept as they are"
            };
            note(format_args!(
                "{}: {} line(s) were not URLs ({what})",
                self.command, c.not_urls
            ));
        }
    }
}

/// Derives the key of line `chunk.len` and counts it in, or skips it;
/// `hint` says which `--not-url` choice goes past a key that is not a URL.
fn push_key(
    rules: &KeyRules,
    counts: &mut ReadCounts,
    chunk: &mut Chunk,
    hint: &str,
    where_: &dyn Fn() -> String,
) -> CliResult<()> {
    if !chunk.transformed {
        if chunk.lines[chunk.len].is_empty() {
            counts.empty += 1;
            return Ok(());
        }
        chunk.len += 1;
        counts.keys += 1;
        return Ok(());
    }
    if chunk.len == chunk.keys.len() {
        chunk.keys.push(Vec::new());
        chunk.spans.push(None);
    }
    let line = &chunk.lines[chunk.len];
    let key = &mut chunk.keys[chunk.len];
    key.clear();
    let text = if rules.trim {
        let start = line.len() - line.trim_ascii_start().len();
        start..start + line[start..].trim_ascii_end().len()
    } else {
        0..line.len()
    };
    if text.is_empty() {
        counts.empty += 1;
        return Ok(());
    }
    let span = match &rules.canonical {
        None => Some(text),
        Some(c) => match c.canonicalize_into_if_changed(&line[text.clone()], key) {
            Ok(false) => Some(text),
            Ok(true) => None,
            Err(e) => {
                counts.not_urls += 1;
                match rules.not_url {
                    NotUrl::Keep => Some(text),
                    NotUrl::Skip => {
                        counts.not_urls_skipped += 1;
                        return Ok(());
                    }
                    NotUrl::Error => {
                        return Err(CliError(format!("{}: {e} (--not-url {hint})", where_())))
                    }
                }
            }
        },
    };
    chunk.spans[chunk.len] = span;
    chunk.len += 1;
    counts.keys += 1;
    Ok(())
}

#[cfg(unix)]
fn os_bytes(s: OsString) -> Vec<u8> {
    std::os::unix::ffi::OsStringExt::into_vec(s)
}

#[cfg(not(unix))]
fn os_bytes(s: OsString) -> Vec<u8> {
    s.to_string_lossy().into_owned().into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A line over the measured bound that ends where a read ends is
    /// measured to its end, not reported as longer than it is.
    #[test]
    fn a_line_that_ends_past_the_bound_is_measured_exactly() {
        let data = format!("{}\nnext\n", "x".repeat(3072));
        let mut r = BufReader::with_capacity(1024, data.as_bytes());
        let mut buf = Vec::new();
        match read_line_upto(&mut r, &mut buf, 1, 2048) {
            Ok(Line::TooLong(3072)) => {}
            Ok(Line::Longer(n)) => panic!("a line of 3072 bytes read as longer than {n}"),
            _ => panic!("expected a line of 3072 bytes"),
        }
        assert!(matches!(
            read_line_upto(&mut r, &mut buf, 10, 20),
            Ok(Line::Key)
        ));
        assert_eq!(buf, b"next");
    }

    #[test]
    fn read_line_bounds_long_lines_and_keeps_the_next() {
        let data = format!("ok\r\n{}\nnext\n{}", "x".repeat(100), "y".repeat(11));
        let mut r: Box<dyn BufRead> = Box::new(BufReader::with_capacity(8, data.as_bytes()));
        let mut buf = Vec::new();
        assert!(matches!(read_line(&mut *r, &mut buf, 10), Ok(Line::Key)));
        assert_eq!(buf, b"ok");
        match read_line(&mut *r, &mut buf, 10) {
            Ok(Line::TooLong(100)) => {}
            _ => panic!("expected a 100-byte line"),
        }
        assert!(buf.capacity() < 64, "kept {} bytes", buf.capacity());
        assert!(matches!(read_line(&mut *r, &mut buf, 10), Ok(Line::Key)));
        assert_eq!(buf, b"next");
        assert!(matches!(
            read_line(&mut *r, &mut buf, 10),
            Ok(Line::TooLong(11))
        ));
        assert!(matches!(read_line(&mut *r, &mut buf, 10), Ok(Line::End)));
        // Exactly the limit, with and without \r.
        let mut r: Box<dyn BufRead> = Box::new(BufReader::new(&b"0123456789\r\n0123456789"[..]));
        assert!(matches!(read_line(&mut *r, &mut buf, 10), Ok(Line::Key)));
        assert_eq!(buf.len(), 10);
        assert!(matches!(read_line(&mut *r, &mut buf, 10), Ok(Line::Key)));
        assert_eq!(buf.len(), 10);
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        /// Reads of at most `sizes[i]` bytes in turn (a size of 0 stands
        /// for a read interrupted by a signal), as a pipe delivers them.
        struct Chunked {
            data: Vec<u8>,
            at: usize,
            sizes: Vec<usize>,
            turn: usize,
        }

        impl Read for Chunked {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                let size = self.sizes[self.turn % self.sizes.len()];
                self.turn += 1;
                if size == 0 {
                    return Err(io::ErrorKind::Interrupted.into());
                }
                let n = size.min(buf.len()).min(self.data.len() - self.at);
                buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
                self.at += n;
                Ok(n)
            }
        }

        /// A buffered reader of `data` in chunks of `sizes`, with a buffer
        /// of `cap` bytes.
        fn chunked(data: &[u8], sizes: &[usize], cap: usize) -> BufReader<Chunked> {
            let r = Chunked {
                data: data.to_vec(),
                at: 0,
                sizes: sizes.to_vec(),
                turn: 0,
            };
            BufReader::with_capacity(cap, r)
        }

        /// The lines of `data` by a plain split at `\n` (a last line without
        /// one included, a trailing `\r` dropped): `Ok(line)`, or
        /// `Err(length)` for one longer than `max`.
        fn reference(data: &[u8], max: usize) -> Vec<Result<Vec<u8>, u64>> {
            let mut pieces: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
            if pieces.last().is_some_and(|p| p.is_empty()) {
                pieces.pop();
            }
            pieces
                .into_iter()
                .map(|p| p.strip_suffix(b"\r").unwrap_or(p))
                .map(|p| {
                    if p.len() > max {
                        Err(p.len() as u64)
                    } else {
                        Ok(p.to_vec())
                    }
                })
                .collect()
        }

        /// Input-like bytes: short lines of a few letters, `\r`, spaces and
        /// arbitrary bytes, now and then a long run, joined by `\n`.
        fn lines_like() -> impl Strategy<Value = Vec<u8>> {
            let piece = prop_oneof![
                8 => proptest::collection::vec(
                    prop_oneof![Just(b'a'), Just(b'\r'), Just(b' '), Just(b'\n'), any::<u8>()],
                    0..24,
                ),
                1 => (1usize..6000, any::<u8>()).prop_map(|(n, b)| vec![b; n]),
            ];
            proptest::collection::vec(piece, 0..12).prop_map(|v| v.join(&b'\n'))
        }

        fn sizes() -> impl Strategy<Value = Vec<usize>> {
            proptest::collection::vec(
                prop_oneof![1 => Just(0usize), 6 => 1usize..40, 1 => 40usize..5000],
                1..8,
            )
            .prop_filter("a read that makes progress", |v| v.iter().any(|&s| s > 0))
        }

        /// A `KeyReader` of `data` read in chunks of `sizes` under `rules`.
        fn key_reader(data: &[u8], sizes: &[usize], cap: usize, rules: KeyRules) -> KeyReader {
            let mut sources = VecDeque::new();
            sources.push_back(Source {
                name: "in".into(),
                reader: Some(Box::new(chunked(data, sizes, cap))),
                path: None,
                line: 0,
            });
            let inputs = Inputs {
                sources,
                total_bytes: None,
                read_bytes: Rc::new(Cell::new(0)),
                never_wait: false,
            };
            KeyReader::new(inputs, rules, "test").with_batch(3)
        }

        /// Every batch's keys and lines, and the error that ended the
        /// reading if one did.
        fn read_all(r: &mut KeyReader) -> (Vec<Vec<u8>>, Vec<Vec<u8>>, Option<String>) {
            let (mut keys, mut lines) = (Vec::new(), Vec::new());
            let mut chunk = Chunk::default();
            loop {
                match r.fill(&mut chunk) {
                    Ok(true) => {
                        keys.extend(chunk.keys().into_iter().map(<[u8]>::to_vec));
                        lines.extend(chunk.lines().iter().cloned());
                    }
                    Ok(false) => return (keys, lines, None),
                    Err(CliError(e)) => return (keys, lines, Some(e)),
                }
            }
        }

        fn rules(max: usize, trim: bool, long_lines: LongLines) -> KeyRules {
            KeyRules {
                trim,
                canonical: None,
                not_url: NotUrl::Keep,
                max_line: max,
                long_lines,
            }
        }

        proptest! {
            /// The line reader, given any bytes in any read sizes and any
            /// buffer size, gives the lines of a plain split, with the
            /// length of every line over the limit.
            #[test]
            fn read_line_matches_a_plain_split(
                data in prop_oneof![lines_like(), any::<Vec<u8>>()],
                sizes in sizes(),
                cap in prop_oneof![1usize..4, 4usize..64, Just(1 << 16)],
                max in 0usize..30,
            ) {
                let mut r = chunked(&data, &sizes, cap);
                let mut buf = Vec::new();
                let mut got = Vec::new();
                loop {
                    match read_line(&mut r, &mut buf, max).unwrap() {
                        Line::Key => {
                            prop_assert!(buf.len() <= max);
                            got.push(Ok(buf.clone()));
                        }
                        Line::TooLong(n) => got.push(Err(n)),
                        Line::Longer(_) => prop_assert!(false, "measured without a bound"),
                        Line::End => break,
                    }
                    prop_assert!(got.len() <= data.len(), "more lines than bytes");
                }
                prop_assert_eq!(got, reference(&data, max));
            }

            /// Under `--long-lines skip` the keys are the lines within the
            /// limit (trimmed under `--trim`) that are not empty, and every
            /// line is counted once: as a key, too long or empty.
            #[test]
            fn skip_reads_the_lines_within_the_limit(
                data in lines_like(),
                sizes in sizes(),
                cap in prop_oneof![1usize..8, Just(1 << 16)],
                max in 1usize..30,
                trim in any::<bool>(),
            ) {
                let mut r = key_reader(&data, &sizes, cap, rules(max, trim, LongLines::Skip));
                let (keys, lines, err) = read_all(&mut r);
                prop_assert_eq!(err, None);
                let want_lines: Vec<Vec<u8>> = reference(&data, max)
                    .into_iter()
                    .flatten()
                    .filter(|l| !(if trim { l.trim_ascii() } else { l }).is_empty())
                    .collect();
                let want_keys: Vec<Vec<u8>> = want_lines
                    .iter()
                    .map(|l| if trim { l.trim_ascii().to_vec() } else { l.clone() })
                    .collect();
                prop_assert_eq!(&keys, &want_keys);
                prop_assert_eq!(lines, want_lines);
                let all = reference(&data, max);
                let c = r.counts;
                prop_assert_eq!(c.keys, keys.len() as u64);
                prop_assert_eq!(c.too_long, all.iter().filter(|l| l.is_err()).count() as u64);
                prop_assert_eq!(c.keys + c.too_long + c.empty, all.len() as u64);
            }

            /// Under `--long-lines error` the keys are those before the
            /// first line over the limit, and the error names that line's
            /// number and length (or, past the measured bound, a length it
            /// exceeds).
            #[test]
            fn error_stops_at_the_first_long_line(
                data in lines_like(),
                sizes in sizes(),
                cap in prop_oneof![1usize..8, Just(1 << 16)],
                max in 1usize..4,
            ) {
                let mut r = key_reader(&data, &sizes, cap, rules(max, false, LongLines::Error));
                let (keys, _, err) = read_all(&mut r);
                let all = reference(&data, max);
                let first = all.iter().position(Result::is_err);
                let before = &all[..first.unwrap_or(all.len())];
                let want: Vec<Vec<u8>> = before.iter().flatten().filter(|l| !l.is_empty()).cloned().collect();
                prop_assert_eq!(keys, want);
                match (first, err) {
                    (None, None) => {}
                    (Some(i), Some(e)) => {
                        let len = all[i].clone().unwrap_err();
                        let exact = format!("in:{}: a line of {len} bytes is longer", i + 1);
                        let measure = max as u64 * MEASURE_LIMITS;
                        let bounded = e
                            .strip_prefix(&format!("in:{}: a line of more than ", i + 1))
                            .and_then(|t| t.split(' ').next())
                            .and_then(|n| n.parse::<u64>().ok())
                            .is_some_and(|n| n > measure && n < len);
                        prop_assert!(e.starts_with(&exact) || bounded, "{} (line {} of {} bytes)", e, i + 1, len);
                    }
                    (first, err) => prop_assert!(false, "first long line {:?}, error {:?}", first, err),
                }
            }

            /// Under `--canonical` each `--not-url` choice keeps, skips or
            /// stops at a line that is not a URL; a URL's key is its
            /// canonical form.
            #[test]
            fn not_url_keeps_skips_or_stops(
                data in proptest::collection::vec(
                    prop_oneof![
                        Just("https://Example.COM/a?utm_source=x".to_string()),
                        Just("http://example.com:80/".to_string()),
                        Just(" example.com ".to_string()),
                        "[a-z:/. %?#]{0,20}",
                    ],
                    0..10,
                ).prop_map(|v| v.join("\n").into_bytes()),
                sizes in sizes(),
                trim in any::<bool>(),
                mode in prop_oneof![Just(NotUrl::Keep), Just(NotUrl::Skip), Just(NotUrl::Error)],
            ) {
                let c = Canonicalizer::new();
                let rules = KeyRules { canonical: Some(c.clone()), not_url: mode, ..rules(64, trim, LongLines::Skip) };
                let mut r = key_reader(&data, &sizes, 4, rules);
                let (keys, _, err) = read_all(&mut r);
                let mut want = Vec::new();
                let mut stop = None;
                for (i, l) in reference(&data, 64).into_iter().enumerate() {
                    let Ok(l) = l else { continue };
                    let text = if trim { l.trim_ascii() } else { &l[..] };
                    if text.is_empty() {
                        continue;
                    }
                    match (c.canonicalize_bytes(text), mode) {
                        (Ok(k), _) => want.push(k.into_bytes()),
                        (Err(_), NotUrl::Keep) => want.push(text.to_vec()),
                        (Err(_), NotUrl::Skip) => {}
                        (Err(_), NotUrl::Error) => {
                            stop = Some(i + 1);
                            break;
                        }
                    }
                }
                prop_assert_eq!(keys, want);
                match (stop, err) {
                    (None, None) => {}
                    (Some(n), Some(e)) => prop_assert!(e.starts_with(&format!("in:{n}: ")), "{}", e),
                    (stop, err) => prop_assert!(false, "stop {:?}, error {:?}", stop, err),
                }
            }
        }
    }
}
