//! `timebloom`: the command-line front end of the engine.
//!
//! Keys are lines of raw bytes. Every command opens the engine directory,
//! does its work, and closes it, reporting close errors (durability
//! failures) with exit status 2 like any other error.

use std::ffi::OsString;
use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Read, StdoutLock, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use clap::{Args, Parser, Subcommand};
use timebloom::{Config, Engine, Error, Kind, ManualClock, Options, Stats, Tier};

/// Embedded, persistent, time-windowed Bloom filters for deduplicating URLs.
///
/// Keys are read one per line (raw bytes; a trailing "\r" is dropped, empty
/// lines are skipped). Exit status: 0 on success, 1 when `check` found a new
/// key, 2 on any error.
#[derive(Parser)]
#[command(name = "timebloom", version)]
struct Cli {
    /// Act at this instant instead of the system clock (RFC 3339, such as
    /// 2026-11-29T12:00:00Z or 2026-11-29T14:00:00+02:00).
    #[arg(long, global = true, value_name = "RFC3339", value_parser = parse_rfc3339)]
    now: Option<SystemTime>,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create an engine in DIR (the directory is created if missing).
    Create {
        /// The engine directory.
        dir: PathBuf,
        #[command(flatten)]
        sizing: Sizing,
    },
    /// Record keys and print how many were new. DIR is created with the
    /// default (or given) configuration if it holds no engine.
    Add {
        /// The engine directory.
        dir: PathBuf,
        /// Files of keys, one per line; stdin when none ("-" is stdin too).
        files: Vec<PathBuf>,
        #[command(flatten)]
        sizing: Sizing,
    },
    /// Print the lines not seen before, in input order, and record them.
    ///
    /// The deduplicating stage of a crawler pipeline. DIR is created with the
    /// default (or given) configuration if it holds no engine. Lines are
    /// recorded a batch at a time before they are printed: if the reader of
    /// stdout goes away, the keys of the batch being printed stay recorded.
    FilterNew {
        /// The engine directory.
        dir: PathBuf,
        /// Files of keys, one per line; stdin when none ("-" is stdin too).
        files: Vec<PathBuf>,
        #[command(flatten)]
        sizing: Sizing,
    },
    /// Print "KEY<TAB>seen" or "KEY<TAB>new" per key; exit 0 when all were
    /// seen, 1 when any was new.
    Check {
        /// The engine directory.
        dir: PathBuf,
        /// Only keys recorded within this long of now count as seen (3d, 12h,
        /// 90min, 30s, 2w, 1d12h). Windows are whole, so a key up to one
        /// window of the answering tier older may count too.
        #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
        within: Option<Duration>,
        /// Keys to check; stdin lines when none.
        keys: Vec<OsString>,
    },
    /// Take keys back out and print how many were present (counting engines
    /// only: see `create --counting`).
    Remove {
        /// The engine directory.
        dir: PathBuf,
        /// Keys to remove; stdin lines when none.
        keys: Vec<OsString>,
    },
    /// Print tiers and segments: windows, fill, estimated keys and
    /// false-positive rates.
    Stats {
        /// The engine directory.
        dir: PathBuf,
        /// Print the stats as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Check every sealed segment's checksum; print "ok" or the error.
    Verify {
        /// The engine directory.
        dir: PathBuf,
    },
}

/// Configuration flags; they apply when an engine is created.
#[derive(Args)]
struct Sizing {
    /// Comma-separated tiers: 7d (days), 4w (ISO weeks), 12m (months), 48h
    /// (hours), 4x6h (four 6-hour windows), each optionally :counting
    /// [default: 7d,4w,12m]
    #[arg(long, value_name = "LIST", value_parser = parse_tier_list)]
    tiers: Option<TierList>,
    /// Distinct keys planned per day; filters are sized for it [default: 1000000]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    items_per_day: Option<u64>,
    /// False-positive rate of one lookup, strictly between 0 and 1 [default: 0.001]
    #[arg(long, value_name = "P", value_parser = parse_fpr)]
    fpr: Option<f64>,
    /// Where windows start: local midnight at this offset from UTC, like
    /// +02:00 [default: Z]
    #[arg(long, value_name = "OFFSET", value_parser = parse_offset, allow_hyphen_values = true)]
    utc_offset: Option<i32>,
    /// Make every tier counting, so that `remove` works (4x the space)
    #[arg(long)]
    counting: bool,
}

#[derive(Clone)]
struct TierList(Vec<Tier>);

impl Sizing {
    /// `base` with the given flags applied.
    fn apply(&self, mut base: Config) -> Config {
        if let Some(t) = &self.tiers {
            base.tiers.clone_from(&t.0);
        }
        if self.counting {
            base.tiers = base.tiers.into_iter().map(Tier::counting).collect();
        }
        if let Some(n) = self.items_per_day {
            base.expected_items_per_day = n;
        }
        if let Some(p) = self.fpr {
            base.fpr = p;
        }
        if let Some(o) = self.utc_offset {
            base.utc_offset_secs = o;
        }
        base
    }
}

/// An error to print on stderr; exit status 2.
struct CliError(String);

impl From<Error> for CliError {
    fn from(e: Error) -> CliError {
        CliError(e.to_string())
    }
}

impl CliError {
    fn io(what: &dyn std::fmt::Display, op: &str, e: io::Error) -> CliError {
        CliError(format!("{what}: {op} failed: {e}"))
    }
}

type CliResult<T> = Result<T, CliError>;

/// A message on stderr; a failing stderr is ignored rather than a panic.
fn note(msg: std::fmt::Arguments) {
    let _ = writeln!(io::stderr().lock(), "timebloom: {msg}");
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(CliError(msg)) => {
            note(format_args!("{msg}"));
            ExitCode::from(2)
        }
    }
}

fn run(cli: Cli) -> CliResult<ExitCode> {
    let opts = match cli.now {
        Some(t) => Options::default().clock(ManualClock::new(t)),
        None => Options::default(),
    };
    let mut out = Out::new();
    match cli.command {
        Command::Create { dir, sizing } => {
            let config = sizing.apply(Config::default());
            let engine = Engine::create_with(&dir, config, opts)?;
            note(format_args!("created engine at {}", summary(&engine)?));
            engine.close()?;
        }
        Command::Add { dir, files, sizing } => {
            let engine = open_or_create(&dir, &sizing, opts)?;
            let mut keys = KeyReader::files(files, "add");
            let mut chunk = Chunk::default();
            let (mut new, mut total) = (0u64, 0u64);
            while keys.fill(&mut chunk)? {
                let fresh = per_key(&chunk, engine.insert_batch(chunk.keys())?)?;
                new += fresh.iter().filter(|n| **n).count() as u64;
                total += fresh.len() as u64;
            }
            engine.close()?;
            out.write(&[format!("added {new} new of {total} keys\n").as_bytes()])?;
        }
        Command::FilterNew { dir, files, sizing } => {
            let engine = open_or_create(&dir, &sizing, opts)?;
            let mut keys = KeyReader::files(files, "filter-new");
            let mut chunk = Chunk::default();
            while !out.closed && keys.fill(&mut chunk)? {
                let fresh = per_key(&chunk, engine.insert_batch(chunk.keys())?)?;
                for (key, _) in chunk.keys().iter().zip(fresh).filter(|(_, n)| *n) {
                    out.write(&[key, b"\n"])?;
                }
                out.flush()?;
            }
            engine.close()?;
        }
        Command::Check { dir, within, keys } => {
            let engine = Engine::open_with(&dir, opts)?;
            let mut keys = KeyReader::args_or_stdin(keys, "check");
            let mut chunk = Chunk::default();
            let mut any_new = false;
            while !out.closed && keys.fill(&mut chunk)? {
                let seen = match within {
                    None => per_key(&chunk, engine.contains_batch(chunk.keys())?)?,
                    Some(h) => (chunk.keys().iter())
                        .map(|k| engine.contains_within(k, h))
                        .collect::<Result<_, _>>()?,
                };
                for (key, seen) in chunk.keys().iter().zip(seen) {
                    any_new |= !seen;
                    out.write(&[key, if seen { b"\tseen\n" } else { b"\tnew\n" }])?;
                }
                out.flush()?;
            }
            engine.close()?;
            out.flush()?;
            return Ok(ExitCode::from(u8::from(any_new)));
        }
        Command::Remove { dir, keys } => {
            let engine = Engine::open_with(&dir, opts)?;
            if let Some(t) = engine
                .config()
                .tiers
                .iter()
                .find(|t| t.kind != Kind::Counting)
            {
                let e = Error::RemoveUnsupported {
                    tier: t.to_string(),
                };
                return Err(CliError(format!(
                    "{}: {e} (create the engine with --counting)",
                    dir.display()
                )));
            }
            let mut keys = KeyReader::args_or_stdin(keys, "remove");
            let mut chunk = Chunk::default();
            let (mut removed, mut total) = (0u64, 0u64);
            while keys.fill(&mut chunk)? {
                for key in chunk.keys() {
                    removed += u64::from(engine.remove(key)?);
                    total += 1;
                }
            }
            engine.close()?;
            out.write(&[format!("removed {removed} of {total} keys\n").as_bytes()])?;
        }
        Command::Stats { dir, json } => {
            let engine = Engine::open_with(&dir, opts)?;
            let stats = engine.stats()?;
            engine.close()?;
            let text = if json {
                let mut s = serde_json::to_string_pretty(&stats)
                    .map_err(|e| CliError(format!("stats as JSON: {e}")))?;
                s.push('\n');
                s
            } else {
                stats_table(&dir, &stats)
            };
            out.write(&[text.as_bytes()])?;
        }
        Command::Verify { dir } => {
            let engine = Engine::open_with(&dir, opts)?;
            engine.verify()?;
            engine.close()?;
            out.write(&[b"ok\n"])?;
        }
    }
    out.flush()?;
    Ok(ExitCode::SUCCESS)
}

/// Opens the engine in `dir`, or creates it from the defaults and `sizing`
/// when the directory holds none.
fn open_or_create(dir: &Path, sizing: &Sizing, opts: Options) -> CliResult<Engine> {
    let engine = match Engine::open_with(dir, opts.clone()) {
        Err(Error::NotFound { .. }) => {
            let config = sizing.apply(Config::default());
            match Engine::create_with(dir, config, opts.clone()) {
                Ok(engine) => {
                    note(format_args!("created new engine at {}", summary(&engine)?));
                    return Ok(engine);
                }
                // Another process created it meanwhile.
                Err(Error::AlreadyExists { .. }) => Engine::open_with(dir, opts)?,
                Err(e) => return Err(e.into()),
            }
        }
        r => r?,
    };
    let have = engine.config();
    let wanted = sizing.apply(have.clone());
    wanted.validate()?;
    if wanted != *have {
        note(format_args!(
            "{}: the engine exists; configuration flags apply only when creating one (it keeps tiers {})",
            dir.display(),
            tier_list(&have.tiers)
        ));
    }
    Ok(engine)
}

fn tier_list(tiers: &[Tier]) -> String {
    tiers
        .iter()
        .map(Tier::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// `DIR (tiers 7d,4w,12m, 1000000 keys/day, fpr 0.001, utc+00:00, 1.2 GiB)`.
fn summary(engine: &Engine) -> CliResult<String> {
    let c = engine.config();
    let bytes = engine.stats()?.bytes;
    Ok(format!(
        "{} (tiers {}, {} keys/day, fpr {}, utc{}, {} on disk)",
        engine.path().display(),
        tier_list(&c.tiers),
        c.expected_items_per_day,
        c.fpr,
        fmt_offset(c.utc_offset_secs),
        fmt_bytes(bytes)
    ))
}

// ---- input and output ---------------------------------------------------------

/// Lines per batch handed to the engine.
const CHUNK: usize = 4096;
/// Lines between progress reports (on a terminal only).
const PROGRESS_EVERY: u64 = 1_000_000;

/// The keys of one batch; the line buffers are reused from batch to batch.
#[derive(Default)]
struct Chunk {
    bufs: Vec<Vec<u8>>,
    len: usize,
}

impl Chunk {
    fn keys(&self) -> &[Vec<u8>] {
        &self.bufs[..self.len]
    }
}

/// The answers of a batch call, checked to be one per key: a short answer
/// would pair keys with the wrong answers.
fn per_key(chunk: &Chunk, answers: Vec<bool>) -> CliResult<Vec<bool>> {
    if answers.len() == chunk.len {
        return Ok(answers);
    }
    Err(CliError(format!(
        "internal error: the engine answered {} of a batch of {} keys",
        answers.len(),
        chunk.len
    )))
}

/// Keys from command-line arguments, or lines from files in turn (`-` is stdin).
struct KeyReader {
    args: Option<std::vec::IntoIter<Vec<u8>>>,
    files: std::vec::IntoIter<PathBuf>,
    current: Option<(BufReader<Box<dyn Read>>, PathBuf)>,
    lines: u64,
    progress: bool,
    command: &'static str,
}

impl KeyReader {
    /// Lines of `files`, or of stdin when there are none.
    fn files(mut files: Vec<PathBuf>, command: &'static str) -> KeyReader {
        if files.is_empty() {
            files.push(PathBuf::from("-"));
        }
        KeyReader {
            args: None,
            files: files.into_iter(),
            current: None,
            lines: 0,
            progress: io::stderr().is_terminal(),
            command,
        }
    }

    /// The arguments as keys, byte for byte, or stdin lines when there are none.
    fn args_or_stdin(args: Vec<OsString>, command: &'static str) -> KeyReader {
        let mut r = KeyReader::files(Vec::new(), command);
        if !args.is_empty() {
            r.args = Some(
                args.into_iter()
                    .map(os_bytes)
                    .collect::<Vec<_>>()
                    .into_iter(),
            );
        }
        r
    }

    /// Refills `chunk` with up to [`CHUNK`] keys; `false` once input is
    /// exhausted. Returns a partial batch rather than block for more input,
    /// so that a slow pipe streams through.
    fn fill(&mut self, chunk: &mut Chunk) -> CliResult<bool> {
        chunk.len = 0;
        if let Some(args) = &mut self.args {
            chunk.bufs.clear();
            chunk.bufs.extend(args.take(CHUNK));
            chunk.len = chunk.bufs.len();
            return Ok(chunk.len > 0);
        }
        while chunk.len < CHUNK {
            let Some((reader, name)) = &mut self.current else {
                match self.files.next() {
                    Some(path) => self.current = Some(open_input(path)?),
                    None => break,
                }
                continue;
            };
            if chunk.len > 0 && reader.buffer().is_empty() {
                break;
            }
            if chunk.len == chunk.bufs.len() {
                chunk.bufs.push(Vec::new());
            }
            let buf = &mut chunk.bufs[chunk.len];
            buf.clear();
            let n = (reader.read_until(b'\n', buf))
                .map_err(|e| CliError::io(&name.display(), "read", e))?;
            if n == 0 {
                self.current = None;
                continue;
            }
            if buf.last() == Some(&b'\n') {
                buf.pop();
            }
            if buf.last() == Some(&b'\r') {
                buf.pop();
            }
            if buf.is_empty() {
                continue;
            }
            chunk.len += 1;
            self.lines += 1;
            if self.progress && self.lines.is_multiple_of(PROGRESS_EVERY) {
                note(format_args!("{}: {} lines", self.command, self.lines));
            }
        }
        Ok(chunk.len > 0)
    }
}

fn open_input(path: PathBuf) -> CliResult<(BufReader<Box<dyn Read>>, PathBuf)> {
    let source: Box<dyn Read> = if path.as_os_str() == "-" {
        Box::new(io::stdin())
    } else {
        Box::new(File::open(&path).map_err(|e| CliError::io(&path.display(), "open", e))?)
    };
    Ok((BufReader::with_capacity(1 << 16, source), path))
}

#[cfg(unix)]
fn os_bytes(s: OsString) -> Vec<u8> {
    std::os::unix::ffi::OsStringExt::into_vec(s)
}

#[cfg(not(unix))]
fn os_bytes(s: OsString) -> Vec<u8> {
    s.to_string_lossy().into_owned().into_bytes()
}

/// Buffered stdout. A closed pipe (EPIPE: `| head`) is not an error: output
/// stops, `closed` is set, and the command finishes quietly.
struct Out {
    w: BufWriter<StdoutLock<'static>>,
    closed: bool,
}

impl Out {
    fn new() -> Out {
        Out {
            w: BufWriter::with_capacity(1 << 16, io::stdout().lock()),
            closed: false,
        }
    }

    fn write(&mut self, parts: &[&[u8]]) -> CliResult<()> {
        for p in parts {
            let r = self.w.write_all(p);
            self.check(r)?;
        }
        Ok(())
    }

    fn flush(&mut self) -> CliResult<()> {
        let r = self.w.flush();
        self.check(r)
    }

    fn check(&mut self, r: io::Result<()>) -> CliResult<()> {
        match r {
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => {
                self.closed = true;
                Ok(())
            }
            Err(e) if !self.closed => Err(CliError::io(&"stdout", "write", e)),
            _ => Ok(()),
        }
    }
}

// ---- stats --------------------------------------------------------------------

fn stats_table(dir: &Path, s: &Stats) -> String {
    use std::fmt::Write as _;
    let mut t = String::new();
    let _ = writeln!(
        t,
        "engine {}  at {}  generation {}  {} on disk\nfpr {} per lookup, {} keys/day planned",
        dir.display(),
        fmt_instant(s.now),
        s.generation,
        fmt_bytes(s.bytes),
        s.fpr,
        s.expected_items_per_day
    );
    for tier in &s.tiers {
        let kind = match tier.kind {
            Kind::Bloom => "bloom",
            Kind::Counting => "counting",
        };
        let _ = writeln!(
            t,
            "\ntier {}  {kind}  {} windows of {}  covers {}{}",
            tier.tier,
            tier.retention,
            fmt_secs(tier.window_secs),
            fmt_secs(tier.covers_secs),
            if tier.answers_contains {
                "  (answers check)"
            } else {
                ""
            }
        );
        let counting = tier.kind == Kind::Counting;
        let _ = write!(
            t,
            "  {:<10} {:<7} {:>10} {:>10} {:>8} {:>12} {:>10}",
            "window", "state", "subfilters", "size", "fill", "est. items", "est. fpr"
        );
        let _ = writeln!(t, "{}", if counting { "  saturated" } else { "" });
        for g in &tier.segments {
            let _ = write!(
                t,
                "  {:<10} {:<7} {:>10} {:>10} {:>7.3}% {:>12} {:>10.2e}",
                g.window,
                g.state,
                g.subfilters,
                fmt_bytes(g.bytes),
                g.fill * 100.0,
                g.estimated_items,
                g.estimated_fpr
            );
            if counting {
                let _ = write!(t, " {:>10}", g.saturated);
            }
            t.push('\n');
        }
        let _ = writeln!(
            t,
            "  (a horizon answered by this tier may also report keys up to {} older)",
            fmt_secs(tier.coarseness_secs)
        );
    }
    t
}

fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `6d 12h`, `3h 5min`, `45s`: the two largest non-zero units.
fn fmt_secs(s: u64) -> String {
    let parts = [
        (s / 86_400, "d"),
        (s / 3600 % 24, "h"),
        (s / 60 % 60, "min"),
        (s % 60, "s"),
    ];
    let shown: Vec<String> = (parts.iter())
        .skip_while(|(n, _)| *n == 0)
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if shown.is_empty() {
        "0s".into()
    } else {
        shown.join(" ")
    }
}

// ---- parsing: instants, offsets, durations, flags -------------------------------

/// The latest instant the engine accepts: 9999-12-31T23:59:59Z.
const MAX_INSTANT: i64 = 253_402_300_799;

/// `2026-11-29T12:00:00Z` for seconds since the Unix epoch.
fn fmt_instant(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}

/// A fixed-width run of ASCII digits.
fn digits(b: &[u8]) -> Option<i64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
}

/// `Z` or `±HH:MM` (also `±HH`) to seconds east of UTC.
fn offset_secs(b: &[u8]) -> Option<i32> {
    let (sign, rest) = match b {
        [b'Z' | b'z'] => return Some(0),
        [b'+', rest @ ..] => (1, rest),
        [b'-', rest @ ..] => (-1, rest),
        _ => return None,
    };
    let (h, m) = match rest {
        [h1, h2] => (digits(&[*h1, *h2])?, 0),
        [h1, h2, b':', m1, m2] => (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    i32::try_from(sign * (h * 3600 + m * 60)).ok()
}

/// An RFC 3339 instant; the fraction of a second is dropped (the engine
/// counts whole seconds).
fn parse_rfc3339(s: &str) -> Result<SystemTime, String> {
    let t = time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            "not an RFC 3339 instant (like 2026-11-29T12:00:00Z or 2026-11-29T14:00:00+02:00)"
                .to_string()
        })?
        .unix_timestamp();
    if !(0..=MAX_INSTANT).contains(&t) {
        return Err("the instant must lie between 1970 and 9999 (UTC)".into());
    }
    Ok(UNIX_EPOCH + Duration::from_secs(t.unsigned_abs()))
}

fn parse_offset(s: &str) -> Result<i32, String> {
    offset_secs(s.trim().as_bytes()).ok_or_else(|| "expected Z or ±HH:MM, like +02:00".into())
}

fn fmt_offset(secs: i32) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    format!("{sign}{:02}:{:02}", a / 3600, a / 60 % 60)
}

/// `3d`, `12h`, `90min`, `30s`, `2w`, or several run together (`1d12h`).
fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("{why} (examples: 3d, 12h, 90min, 30s, 2w, 1d12h)");
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad("empty duration"));
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        let count: u64 = rest[..n].parse().map_err(|_| bad("expected a number"))?;
        rest = &rest[n..];
        let u = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = match &rest[..u] {
            "s" => 1,
            "min" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            "m" => return Err(bad("\"m\" is ambiguous: write min for minutes")),
            _ => return Err(bad("unknown unit")),
        };
        rest = &rest[u..];
        total = (count.checked_mul(unit))
            .and_then(|x| total.checked_add(x))
            .ok_or_else(|| bad("too long"))?;
    }
    Ok(Duration::from_secs(total))
}

fn parse_tier_list(s: &str) -> Result<TierList, String> {
    timebloom::parse_tiers(s)
        .map(TierList)
        .map_err(|e| e.to_string())
}

fn parse_fpr(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err("expected a rate strictly between 0 and 1, like 0.001".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339_instants() {
        let secs =
            |s: &str| parse_rfc3339(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(secs("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(secs("2026-11-29T12:00:00Z"), Ok(1_795_953_600));
        assert_eq!(secs("2026-11-29T14:00:00+02:00"), Ok(1_795_953_600));
        assert_eq!(secs("2026-11-29t11:30:00.999-00:30"), Ok(1_795_953_600));
        assert_eq!(secs("2024-02-29T00:00:00z"), Ok(1_709_164_800));
        assert_eq!(secs("9999-12-31T23:59:59Z"), Ok(MAX_INSTANT as u64));
        for bad in [
            "",
            "2026-11-29",
            "2026-11-29T12:00:00",
            "2026-11-29T12:00Z",
            "2025-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-29T12:00:00.Z",
            "2026-11-29T12:00:00+2:00",
            "2026-11-29T12:00:00+24:00",
            "1969-12-31T23:59:59Z",
            "9999-12-31T23:59:59-00:01",
            "2026-11-29T12:00:00Zjunk",
            "２026-11-29T12:00:00Z",
            "+026-11-29T12:00:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?}");
        }
        assert_eq!(fmt_instant(1_795_953_600), "2026-11-29T12:00:00Z");
        assert_eq!(fmt_instant(MAX_INSTANT), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn parses_durations_and_offsets() {
        let d = |s: &str| parse_duration(s).map(|d| d.as_secs());
        assert_eq!(d("3d"), Ok(3 * 86_400));
        assert_eq!(d("90min"), Ok(5400));
        assert_eq!(d("2w"), Ok(14 * 86_400));
        assert_eq!(d("1d12h30s"), Ok(86_400 + 12 * 3600 + 30));
        for bad in [
            "",
            "3",
            "d",
            "3m",
            "3y",
            "-3d",
            "3 d",
            "99999999999999999999s",
            "é",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_offset("+02:00"), Ok(7200));
        assert_eq!(parse_offset("-05:30"), Ok(-19_800));
        assert_eq!(parse_offset("Z"), Ok(0));
        assert!(parse_offset("+24:00").is_err() && parse_offset("2").is_err());
        assert_eq!(fmt_offset(-19_800), "-05:30");
        assert_eq!(fmt_secs(6 * 86_400 + 12 * 3600 + 5), "6d 12h");
        assert_eq!(fmt_secs(0), "0s");
    }
}
