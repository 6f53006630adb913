//! Warm-up: load an engine from a crawl log with timestamps, each URL into
//! the windows of the instant it was seen (`insert_at`), with progress on
//! stderr, then check the result with `stats`.
//!
//! ```sh
//! cargo run --release --example warmup -- --log crawl.log --dir crawl.tb
//! cargo run --release --example warmup              # a generated 60-day log
//! ```
//!
//! A log line is `TIMESTAMP<TAB>URL`, the timestamp in RFC 3339
//! (`2026-11-02T12:00:00Z`) or Unix seconds; `-` reads stdin. Lines older
//! than every tier keeps, or in a window after the present one, are counted
//! and skipped (a later instant of the present window is loaded); a
//! malformed line is skipped, counted, and (the first five) reported with
//! its number.

#[path = "common/mod.rs"]
#[macro_use]
mod common;

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use common::{fail, or_die, Args, DAY};
use timebloom::{Config, Engine, Error, ManualClock, Options};

const USAGE: &str =
    "usage: warmup [--log FILE] [--dir DIR] [--now T] [--lines N] [--items-per-day N]
  --log FILE           TIMESTAMP<TAB>URL lines, '-' for stdin (default: generate a 60-day log
                       in a temporary directory)
  --dir DIR            engine directory, opened if it holds one, else created
                       (default: a temporary one)
  --now T              the present, RFC 3339 or Unix seconds (default: the system clock,
                       or the end of the generated log)
  --lines N            lines of the generated log (default 5000)
  --items-per-day N    sizing of a created engine (default 1000)";

/// Writes a log of `lines` URLs seen over the 60 days before `end`, oldest
/// first; every tenth line (line i) names URL i / 2 instead of URL i, seen
/// before unless line i / 2 was itself such a line (half of them: 1200
/// lines load 1140 new keys and 60 seen before).
fn generate(path: &Path, lines: u64, end: SystemTime) -> io::Result<()> {
    let mut out = BufWriter::new(File::create(path)?);
    let span = 60 * DAY.as_secs();
    let start = end - Duration::from_secs(span);
    for i in 0..lines {
        let t = start + Duration::from_secs(span * i / lines.max(1));
        let url = if i % 10 == 9 { i / 2 } else { i };
        writeln!(
            out,
            "{}\thttps://news.example/story/{url}",
            common::rfc3339(t)
        )?;
    }
    out.flush()
}

/// Progress on stderr: a bar redrawn in place on a terminal, a line every
/// quarter otherwise.
struct Progress {
    total: Option<u64>,
    tty: bool,
    shown: u64,
}

impl Progress {
    fn update(&mut self, done: u64, lines: u64) {
        let Some(total) = self.total.filter(|t| *t > 0) else {
            if lines.is_multiple_of(100_000) {
                eprintln!("warmup: {lines} lines");
            }
            return;
        };
        let pct = (done * 100 / total).min(100);
        let step = if self.tty { 1 } else { 25 };
        if pct < self.shown + step && pct != 100 {
            return;
        }
        if pct == 100 && self.shown == 100 {
            return;
        }
        self.shown = pct;
        if self.tty {
            let bar = "#".repeat(pct as usize / 4);
            eprint!("\rwarmup: [{bar:<25}] {pct:3}% {lines} lines");
            if pct == 100 {
                eprintln!();
            }
        } else {
            eprintln!("warmup: {pct}% ({lines} lines)");
        }
    }
}

fn main() {
    let args = Args::parse(USAGE, &["log", "dir", "now", "lines", "items-per-day"], &[]);
    let lines_wanted: u64 = args.get("lines", 5000);
    let items_per_day: u64 = args.get("items-per-day", 1000);
    let (dir, tmp) = common::engine_dir(&args, "warm.tb");
    let now = args
        .raw("now")
        .map(|s| common::parse_instant(&s).unwrap_or_else(|e| fail(format_args!("--now: {e}"))));

    // The log: the given one, or one generated in a temporary directory
    // (never next to the engine, where the user's own log may be).
    let mut log_tmp = None;
    let (log, now) = match args.raw("log") {
        Some(p) => (PathBuf::from(p), now),
        None => {
            let end = now.unwrap_or_else(|| common::start() + 60 * DAY);
            let path = match &tmp {
                Some(t) => t.path().join("crawl.log"),
                None => log_tmp.insert(common::temp_dir()).path().join("crawl.log"),
            };
            generate(&path, lines_wanted, end)
                .unwrap_or_else(|e| fail(format_args!("{}: writing the log: {e}", path.display())));
            eprintln!(
                "warmup: generated {} ({lines_wanted} lines)",
                path.display()
            );
            (path, Some(end))
        }
    };
    let options = match now {
        Some(t) => Options::default().clock(ManualClock::new(t)),
        None => Options::default(),
    };

    // The log is opened first: a log that cannot be read creates no engine.
    let (input, total): (Box<dyn Read>, Option<u64>) = if log.as_os_str() == "-" {
        (Box::new(io::stdin()), None)
    } else {
        let f = File::open(&log)
            .unwrap_or_else(|e| fail(format_args!("{}: open failed: {e}", log.display())));
        let meta = f.metadata().ok();
        // A directory opens, but its first read fails.
        if meta.as_ref().is_some_and(std::fs::Metadata::is_dir) {
            fail(format_args!("{}: a directory, not a log", log.display()));
        }
        (Box::new(f), meta.map(|m| m.len()))
    };
    let engine = match Engine::open_with(&dir, options.clone()) {
        Err(Error::NotFound { .. }) => {
            let config = Config {
                expected_items_per_day: items_per_day,
                ..Config::default()
            };
            or_die(
                Engine::create_with(&dir, config, options),
                "creating the engine",
            )
        }
        r => or_die(r, "opening the engine"),
    };

    let mut progress = Progress {
        total,
        tty: io::stderr().is_terminal(),
        shown: 0,
    };

    let (mut lines, mut new, mut known, mut out_of_range, mut bad) = (0u64, 0u64, 0u64, 0u64, 0u64);
    let mut done = 0u64;
    let mut reader = BufReader::new(input);
    let mut line = Vec::new();
    loop {
        line.clear();
        let n = reader
            .read_until(b'\n', &mut line)
            .unwrap_or_else(|e| fail(format_args!("{}: read failed: {e}", log.display())));
        if n == 0 {
            break;
        }
        done += n as u64;
        lines += 1;
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        let text = text.strip_suffix(b"\r").unwrap_or(text);
        if text.is_empty() {
            continue;
        }
        let parsed = text
            .iter()
            .position(|b| *b == b'\t')
            .ok_or_else(|| "no TAB between timestamp and URL".to_owned())
            .and_then(|tab| {
                let stamp = std::str::from_utf8(&text[..tab]).map_err(|e| e.to_string())?;
                Ok((common::parse_instant(stamp.trim())?, &text[tab + 1..]))
            });
        let (t, url) = match parsed {
            Ok(v) => v,
            Err(why) => {
                bad += 1;
                if bad <= 5 {
                    eprintln!("warmup: {}:{lines}: skipped: {why}", log.display());
                }
                continue;
            }
        };
        match engine.insert_at(url, t) {
            Ok(true) => new += 1,
            Ok(false) => known += 1,
            // Expired in every tier, or in a future window: not an error of the log.
            Err(Error::WindowUnavailable { .. }) => out_of_range += 1,
            Err(e) => fail(format_args!("{}:{lines}: {e}", log.display())),
        }
        progress.update(done, lines);
    }
    // The last lines may have been skipped (blank, malformed) before they
    // reached the update above: finish at 100%, and end a terminal's bar.
    progress.update(done, lines);
    or_die(engine.flush(), "flushing");
    say!(
        "loaded {lines} lines: {new} new keys, {known} seen before, \
         {out_of_range} outside every tier's windows, {bad} malformed"
    );

    // Check the result: each tier's segments should hold about the keys of
    // their windows.
    let stats = or_die(engine.stats(), "stats");
    say!(
        "{:<6} {:>9} {:>15} {:>13}",
        "tier",
        "segments",
        "estimated keys",
        "bytes"
    );
    for t in &stats.tiers {
        let keys: u64 = t.segments.iter().map(|s| s.estimated_items).sum();
        let bytes: u64 = t.segments.iter().map(|s| s.bytes).sum();
        say!(
            "{:<6} {:>9} {:>15} {:>13}",
            t.tier,
            t.segments.len(),
            keys,
            common::bytes(bytes as f64)
        );
    }
    // A temporary engine is removed at exit: no `stats` to run on it then.
    match &tmp {
        None => say!(
            "total {} on disk; `timebloom stats {}` shows every window",
            common::bytes(stats.bytes as f64),
            dir.display()
        ),
        Some(_) => say!(
            "total {} on disk, in a temporary directory removed at exit (--dir keeps the engine)",
            common::bytes(stats.bytes as f64)
        ),
    }
    or_die(engine.close(), "closing the engine");
}
