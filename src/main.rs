//! `timebloom`: the command-line front end of the engine.
//!
//! Keys are lines of raw bytes. Every command checks its inputs, opens the
//! engine directory (read-only for `check`, `stats` and `verify`) or, with
//! `--redis URL`, the engine in Redis, does its work, and closes it,
//! reporting close errors (durability failures) with exit status 2 like any
//! other error. `docs/cli.md` is the reference.

// Memory mapping and prefetching, the only places `unsafe` is needed, are in
// the library; the command line has none (signals: see `signals`).
#![forbid(unsafe_code)]
// The doc comments of the argument structs are also the `--help` text, which
// prints `KEY<TAB>seen` and `[user:password@]` as they are; rustdoc would read
// those as an HTML tag and a link.
#![allow(rustdoc::invalid_html_tags, rustdoc::broken_intra_doc_links)]

use std::io::{self, BufWriter, StdoutLock, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, SystemTime};

use clap::{Args, Parser, Subcommand};
use rustix::event::{PollFd, PollFlags};
use timebloom::canonical::Canonicalizer;
use timebloom::plan::Plan;
use timebloom::{Config, Engine, Error, Kind, Options, SyncPolicy, Tier};

#[path = "cli/commands.rs"]
mod commands;
#[path = "cli/input.rs"]
mod input;
#[path = "cli/progress.rs"]
mod progress;
#[cfg(feature = "redis")]
#[path = "cli/redis.rs"]
mod redis_cli;
#[path = "cli/signals.rs"]
mod signals;
#[path = "cli/store.rs"]
mod store;
#[path = "cli/text.rs"]
mod text;
#[path = "units.rs"]
mod units;

use commands::Ctx;
use input::{KeyRules, LongLines, NotUrl};
use store::{Store, Target};
use text::{fmt_offset, parse_duration, parse_fpr, parse_offset, parse_rfc3339, parse_tier_list};
use units::fmt_bytes;

/// Embedded, persistent, time-windowed Bloom filters for deduplicating URLs.
///
/// Keys are read one per line (raw bytes; a trailing "\r" is dropped, empty
/// lines are skipped). Exit status: 0 on success, 1 when `check` found a new
/// key or `verify` found damage, 2 on any other error.
#[derive(Parser)]
#[command(
    name = "timebloom",
    version,
    after_help = "Example:\n  crawl | timebloom filter-new --canonical crawl.tb | fetch"
)]
struct Cli {
    /// Act at this instant instead of the system clock (RFC 3339, such as
    /// 2026-11-29T12:00:00Z or 2026-11-29T14:00:00+02:00).
    #[arg(long, global = true, value_name = "RFC3339", value_parser = parse_rfc3339)]
    now: Option<SystemTime>,
    /// Open even when a segment file fails its checks: it is moved to
    /// quarantine/ (as without this flag) and the engine goes on without
    /// that window (also without a window whose file is missing); a
    /// writing command names the windows lost on stderr, `check` and
    /// `filter-new --dry-run` name those they read without (moving
    /// nothing), `stats --degraded` lists them and changes nothing.
    #[arg(long, global = true)]
    degraded: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Create an engine in DIR (the directory is created if missing) or in
    /// Redis (--redis URL), and print its sizing plan.
    #[command(
        override_usage = "timebloom create [OPTIONS] <DIR>\n       timebloom create [OPTIONS] --redis <URL> [--prefix <P>]",
        after_help = "Examples:\n  timebloom create crawl.tb --tiers 7d,4w --items-per-day 5000000 --fpr 0.001\n  timebloom create --redis redis://10.0.0.5:6379 --prefix crawl --tiers 7d,4w"
    )]
    Create(commands::CreateArgs),
    /// Print the sizing plan of a configuration without creating anything:
    /// windows, bits per key, probes, bytes per window and in total, and
    /// how much older than a horizon an answer may be.
    #[command(
        after_help = "Example:\n  timebloom plan --items-per-day 20000000 --fpr 0.0001 --tiers 7d,12m"
    )]
    Plan(commands::PlanArgs),
    /// Record keys and print how many were new. The engine (DIR, or --redis
    /// URL) is created with the default (or given) configuration if there is
    /// none.
    #[command(
        override_usage = "timebloom add [OPTIONS] <DIR> [FILES]...\n       timebloom add [OPTIONS] --redis <URL> [--prefix <P>] [FILES]...",
        after_help = "Examples:\n  timebloom add crawl.tb seen-urls.txt.gz --canonical\n  timebloom add --redis redis://10.0.0.5:6379 --prefix crawl seen-urls.txt.gz"
    )]
    Add(commands::AddArgs),
    /// Print the lines not seen before, in input order, and record them.
    ///
    /// The deduplicating stage of a crawler pipeline. The engine (DIR, or
    /// --redis URL) is created with the default (or given) configuration if
    /// there is none. Lines are
    /// recorded a batch at a time before they are printed: if the reader of
    /// stdout goes away, the keys of the batch being printed stay recorded.
    /// SIGINT, SIGTERM or SIGHUP waits until the batch in progress is
    /// printed, then ends the command (a second signal ends it at once).
    /// A full stdout pipe is waited on, also one another process made
    /// non-blocking. The line is printed as it was read, whatever key was
    /// made of it.
    #[command(
        override_usage = "timebloom filter-new [OPTIONS] <DIR> [FILES]...\n       timebloom filter-new [OPTIONS] --redis <URL> [--prefix <P>] [FILES]...",
        after_help = "Examples:\n  crawl | timebloom filter-new crawl.tb --canonical > new-urls.txt\n  timebloom filter-new crawl.tb --dry-run --stats today.txt.gz | wc -l\n  crawl | timebloom filter-new crawl.tb --within 7d > due-for-recrawl.txt\n  crawl | timebloom filter-new --redis redis://10.0.0.5:6379 --prefix crawl --canonical"
    )]
    FilterNew(commands::FilterNewArgs),
    /// Print "KEY<TAB>seen" or "KEY<TAB>new" per key; exit 0 when all were
    /// seen, 1 when any was new. Read-only: never writes, rotates or expires.
    #[command(
        override_usage = "timebloom check [OPTIONS] <DIR> [KEYS]...\n       timebloom check [OPTIONS] --redis <URL> [--prefix <P>] [KEYS]...",
        after_help = "Examples:\n  timebloom check crawl.tb --within 3d 'https://example.com/a'\n  timebloom check --redis redis://10.0.0.5:6379 --prefix crawl 'https://example.com/a'"
    )]
    Check(commands::CheckArgs),
    /// Take back one insert of each key (made now, or at --at) and print how
    /// many were taken back (engines with no plain Bloom tier: counting
    /// tiers, `create --counting`, and fingerprint tiers, `365d:fingerprint`).
    ///
    /// A key counts as taken back when every window it is taken from holds
    /// it. A counting key inserted 15 times or more has saturated counters,
    /// which are never decremented: it counts as taken back every time and
    /// stays present. In a fingerprint table, keys with the same
    /// fingerprint and bucket pair share one slot (an insert of the second
    /// answers seen, about the false-positive rate), and taking one back
    /// takes the other too. After an error (exit 2) the count covers the keys
    /// read before it, the one whose sync failed under `--sync always`
    /// among them (taken back, not known to be durable).
    #[command(
        after_help = "Example:\n  timebloom remove crawl.tb --canonical 'https://example.com/retry-me'"
    )]
    Remove(commands::RemoveArgs),
    /// Print tiers and segments: windows, fill, estimated keys and
    /// false-positive rates. Read-only.
    #[command(
        override_usage = "timebloom stats [OPTIONS] <DIR>\n       timebloom stats [OPTIONS] --redis <URL> [--prefix <P>]",
        after_help = "Examples:\n  timebloom stats crawl.tb --json | jq '.tiers[0].segments'\n  timebloom stats --redis redis://10.0.0.5:6379 --prefix crawl"
    )]
    Stats(commands::StatsArgs),
    /// Check every sealed segment's checksum; print "ok", or name each
    /// damaged file and exit 1 when it finds damage (2 on any other error).
    /// Read-only.
    #[command(after_help = "Example:\n  timebloom verify crawl.tb && echo intact")]
    Verify(commands::VerifyArgs),
    /// Rotate and expire now, and print what changed (windows opened, sealed,
    /// expired). With --now, the one writing command that may move the
    /// clock forward past the --max-clock-jump limit or every live window;
    /// without it, a system clock that jumped past every live window is
    /// refused, as at any write.
    #[command(after_help = "Example:\n  timebloom maintain crawl.tb --now 2027-01-01T00:00:00Z")]
    Maintain(commands::MaintainArgs),
    /// Print a shell completion script.
    #[command(
        after_help = "Example:\n  timebloom completions bash > /etc/bash_completion.d/timebloom"
    )]
    Completions(commands::CompletionsArgs),
}

/// How keys are made from lines.
#[derive(Args)]
struct KeyFlags {
    /// Canonicalize keys as URLs (lowercase scheme and host, IDNA, default
    /// port, dot segments, percent-encoding, sorted query, session ids,
    /// fragment: see docs/canonicalization.md) before hashing.
    #[arg(long)]
    canonical: bool,
    /// --canonical plus the rules that lose information: tracking
    /// parameters (utm_*, gclid, fbclid...), a leading www., trailing slashes.
    #[arg(long)]
    canonical_strict: bool,
    /// --canonical plus these opt-in rules only: tracking, www,
    /// trailing-slash (comma-separated).
    #[arg(long, value_name = "LIST", value_delimiter = ',')]
    canonical_rules: Vec<StrictRule>,
    /// Another tracking parameter to remove (implies --canonical and the
    /// tracking rule); repeatable.
    #[arg(long, value_name = "NAME")]
    tracking_param: Vec<String>,
    /// Under --canonical, a line that is not an http(s) URL is used as it is
    /// (keep), skipped (skip), or an error (error).
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = NotUrl::Keep)]
    not_url: NotUrl,
    /// Trim ASCII whitespace (space, tab, CR, LF, form feed) around each line before using it as a key.
    #[arg(short = 't', long)]
    trim: bool,
}

/// One opt-in canonicalization rule.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum StrictRule {
    /// Remove tracking parameters.
    Tracking,
    /// Drop a leading `www.` of the host.
    Www,
    /// Remove trailing slashes of the path.
    TrailingSlash,
}

impl KeyFlags {
    fn canonicalizer(&self) -> Option<Canonicalizer> {
        let any = self.canonical
            || self.canonical_strict
            || !self.canonical_rules.is_empty()
            || !self.tracking_param.is_empty();
        if !any {
            return None;
        }
        let mut c = if self.canonical_strict {
            Canonicalizer::strict()
        } else {
            Canonicalizer::new()
        };
        for r in &self.canonical_rules {
            c = match r {
                StrictRule::Tracking => c.drop_tracking(true),
                StrictRule::Www => c.drop_www(true),
                StrictRule::TrailingSlash => c.drop_trailing_slash(true),
            };
        }
        for name in &self.tracking_param {
            c = c.tracking_param(name);
        }
        Some(c)
    }

    fn rules(&self, lines: &LineFlags) -> KeyRules {
        KeyRules {
            trim: self.trim,
            canonical: self.canonicalizer(),
            not_url: self.not_url,
            max_line: lines.max_line_bytes as usize,
            long_lines: lines.long_lines,
        }
    }
}

/// Limits on input lines.
#[derive(Args)]
struct LineFlags {
    /// The longest line accepted, in bytes; longer lines are never read
    /// whole into memory.
    #[arg(long, value_name = "BYTES", default_value_t = 65_536,
          value_parser = clap::value_parser!(u32).range(1..))]
    max_line_bytes: u32,
    /// A longer line is an error naming its file and line number (error) or
    /// is skipped and counted on stderr (skip).
    #[arg(long, value_name = "WHAT", value_enum, default_value_t = LongLines::Error)]
    long_lines: LongLines,
}

/// Flags of the commands that write.
#[derive(Args)]
struct WriteFlags {
    /// Refuse a forward step of the clock that passes the next window
    /// boundary by more than this (3d, 12h...); `maintain --now` is the way
    /// past it.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    max_clock_jump: Option<Duration>,
}

impl WriteFlags {
    fn apply(&self, opts: Options) -> Options {
        match self.max_clock_jump {
            Some(d) => opts.max_clock_jump(Some(d)),
            None => opts,
        }
    }
}

/// Configuration flags; they apply when an engine is created.
#[derive(Args)]
struct Sizing {
    /// Comma-separated tiers: 7d (days), 4w (ISO weeks), 12m (months), 48h
    /// (hours), 4x6h (four 6-hour windows), each optionally :counting; and
    /// at most one fingerprint tier, 365d:fingerprint (2 to 510 days, day
    /// precision) [default: 7d,4w,12m]
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
    /// Make every Bloom tier counting, so that `remove` works (5x the space
    /// at fpr 1e-2, 7x at 1e-4, 10x at 1e-6: `plan --counting` shows it); a
    /// fingerprint tier removes as it is
    #[arg(long)]
    counting: bool,
    /// When writes survive a power loss: always (each batch fsynced before
    /// its lines are printed or counted), interval=DURATION like 250ms, 1s
    /// or 1m (at most the last interval lost), none (the OS decides). Stored
    /// at create; on an existing engine it applies to this command only
    /// [default: interval=1s]
    #[arg(long, value_name = "POLICY", value_parser = parse_sync)]
    sync: Option<SyncPolicy>,
}

impl Sizing {
    /// `base` with the given flags applied.
    fn apply(&self, mut base: Config) -> Config {
        if let Some(t) = &self.tiers {
            base.tiers.clone_from(&t.0);
        }
        if self.counting {
            // Only Bloom tiers are made counting: a fingerprint tier removes
            // already, and made counting it would keep its retention as
            // that many daily windows (ten times the space).
            base.tiers = (base.tiers.into_iter())
                .map(|t| match t.kind {
                    Kind::Bloom => t.counting(),
                    _ => t,
                })
                .collect();
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
        if let Some(p) = self.sync {
            base.sync = p;
        }
        base
    }

    /// `opts` with this command's sync policy, if one was given.
    fn session(&self, opts: Options) -> Options {
        match self.sync {
            Some(p) => opts.sync(p),
            None => opts,
        }
    }
}

fn parse_sync(s: &str) -> Result<SyncPolicy, String> {
    s.parse().map_err(|e: Error| e.to_string())
}

#[derive(Clone)]
struct TierList(Vec<Tier>);

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
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => return usage(&e),
    };
    signals::catch_file_size_limit();
    raise_open_file_limit();
    let code = match run(cli) {
        Ok(code) => code,
        Err(CliError(msg)) => {
            note(format_args!("{msg}"));
            ExitCode::from(2)
        }
    };
    // A signal held while `filter-new` printed a batch ends the process
    // now that the engine is closed.
    signals::reraise_caught();
    code
}

/// The end of a run that parsed no command: `--help` and `--version`
/// print on stdout (a failing stdout is an error, as for every other
/// output, and a closed pipe is not), the usage errors on stderr (exit 2).
fn usage(e: &clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if !matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
        e.exit();
    }
    match e.print().and_then(|()| io::stdout().flush()) {
        Err(err) if err.kind() != io::ErrorKind::BrokenPipe => {
            note(format_args!("stdout: write failed: {err}"));
            ExitCode::from(2)
        }
        _ => ExitCode::SUCCESS,
    }
}

/// Raises the soft limit of open files to the hard one: the engine keeps
/// each window's file open, and a tier of a few years of daily windows
/// needs more than the 1024 a login's soft limit usually is (its hard
/// limit is usually far higher). A failure leaves the limit as it was:
/// an open past it fails naming the limit.
fn raise_open_file_limit() {
    use rustix::process::{getrlimit, setrlimit, Resource};
    let limit = getrlimit(Resource::Nofile);
    // `None` is no limit: a hard limit of none is left alone (Linux caps
    // open files at `fs.nr_open` whatever the limit says).
    if let (Some(soft), Some(hard)) = (limit.current, limit.maximum) {
        if soft < hard {
            let raised = rustix::process::Rlimit {
                current: Some(hard),
                maximum: Some(hard),
            };
            let _ = setrlimit(Resource::Nofile, raised);
        }
    }
}

/// Runs the command parsed, one function of [`commands`] each, and flushes
/// stdout after it.
fn run(cli: Cli) -> CliResult<ExitCode> {
    let ctx = Ctx::new(cli.now, cli.degraded);
    let degraded = cli.degraded;
    let mut out = Out::new();
    let code = match cli.command {
        Command::Create(args) => commands::create(args, ctx, &mut out),
        Command::Plan(args) => commands::plan(args, degraded, &mut out),
        Command::Add(args) => commands::add(args, ctx, &mut out),
        Command::FilterNew(args) => commands::filter_new(args, ctx, &mut out),
        Command::Check(args) => commands::check(args, ctx, &mut out),
        Command::Remove(args) => commands::remove(args, ctx, &mut out),
        Command::Stats(args) => commands::stats(args, ctx, &mut out),
        Command::Verify(args) => commands::verify(args, ctx, &mut out),
        Command::Maintain(args) => commands::maintain(args, ctx, &mut out),
        Command::Completions(args) => commands::completions(args, degraded, &mut out),
    }?;
    out.flush()?;
    Ok(code)
}

/// The answers of a batch call, checked to be one per key: a short answer
/// would pair keys with the wrong answers.
fn per_key(keys: usize, answers: Vec<bool>) -> CliResult<Vec<bool>> {
    if answers.len() == keys {
        return Ok(answers);
    }
    Err(CliError(format!(
        "internal error: the engine answered {} of a batch of {keys} keys",
        answers.len()
    )))
}

/// The answers of an insert batch: all of them, or, when the batch stopped
/// part way ([`Error::Incomplete`]), the answers of the keys it recorded and
/// the error that stopped it, so that every recorded key is reported.
fn recorded(
    dir: &std::path::Path,
    keys: usize,
    r: timebloom::Result<Vec<bool>>,
) -> CliResult<(Vec<bool>, Option<CliError>)> {
    match r {
        Ok(answers) => Ok((per_key(keys, answers)?, None)),
        Err(Error::Incomplete { answers, cause }) if answers.len() <= keys => {
            Ok((answers, Some(named(dir, *cause))))
        }
        Err(e) => Err(named(dir, e)),
    }
}

/// The end of a writing command: the error of its work, or else of the
/// close. When both failed, the close's error is printed first if it names
/// a failure (not `PreviousIo`, nor the same error): a write refused after
/// an earlier I/O failure says only that (`PreviousIo`), and the close
/// names the failure itself, the file and the reason, where no call was
/// told of it (a failed write of the log's `interval` thread, a failed
/// background checkpoint).
fn finish(result: CliResult<()>, closed: CliResult<()>) -> CliResult<()> {
    match (result, closed) {
        (Err(e), Err(cause)) => {
            if cause.0 != e.0 && !cause.0.ends_with(&Error::PreviousIo.to_string()) {
                note(format_args!("{}", cause.0));
            }
            Err(e)
        }
        (result, closed) => result.and(closed),
    }
}

/// `e` as a message that names the engine directory: the engine words its
/// errors about the engine as a whole (a refused clock jump, an earlier I/O
/// failure) without a path.
fn named(dir: &std::path::Path, e: Error) -> CliError {
    let (dir, msg) = (dir.display().to_string(), e.to_string());
    if msg.starts_with(&dir) {
        CliError(msg)
    } else {
        CliError(format!("{dir}: {msg}"))
    }
}

/// Seconds since the Unix epoch of `t` (instants from `parse_rfc3339`
/// are never before it).
fn unix_secs(t: SystemTime) -> i64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Opens the engine of `target` for reading (an embedded engine read-only,
/// beside any writer; an engine in Redis on a clock standing at `now` when
/// given).
fn open_read_only(
    target: &Target,
    sizing: Option<&Sizing>,
    opts: Options,
    now: Option<SystemTime>,
    note_lost: bool,
) -> CliResult<Store> {
    match target {
        Target::Dir(dir) => {
            let engine = Engine::open_read_only_with(dir, opts)?;
            if let Some(sizing) = sizing {
                note_kept(dir, &engine, sizing)?;
            }
            if note_lost {
                note_read_without(dir, &engine)?;
            }
            Ok(Store::Dir(engine))
        }
        Target::Redis { url, prefix } => redis_store(url, prefix, now, None),
    }
}

/// Opens the engine of `target`, or creates it from the defaults and
/// `sizing` when there is none (unless it would not keep the horizon
/// `within`: see [`check_new_horizon`]).
fn open_or_create(
    target: &Target,
    sizing: &Sizing,
    opts: Options,
    now: Option<SystemTime>,
    within: Option<Duration>,
    degraded: bool,
) -> CliResult<Store> {
    match target {
        Target::Dir(dir) => Ok(Store::Dir(open_or_create_dir(
            dir, sizing, opts, now, within, degraded,
        )?)),
        Target::Redis { url, prefix } => redis_store(url, prefix, now, Some((sizing, within))),
    }
}

/// An error naming the engine `name` when a new engine of `config`,
/// created at `now`, would not keep the horizon `within` (`filter-new
/// --within`): refused before the engine is made, which the check of an
/// open engine came too late for.
fn check_new_horizon(
    name: &dyn std::fmt::Display,
    config: &Config,
    within: Option<Duration>,
    now: Option<SystemTime>,
) -> CliResult<()> {
    let Some(h) = within else { return Ok(()) };
    match config.check_new_horizon(now.unwrap_or_else(SystemTime::now), h) {
        Err(e @ Error::HorizonTooLong { .. }) => Err(store::horizon_too_long(name, h, &e)),
        _ => Ok(()),
    }
}

/// `create --redis`: the summary of the engine created, and its plan as kept in Redis.
fn create_in_redis(
    url: &str,
    prefix: &str,
    now: Option<SystemTime>,
    config: Config,
) -> CliResult<(String, Plan)> {
    #[cfg(feature = "redis")]
    {
        let store = redis_cli::Place::new(url, prefix, now).create(config)?;
        Ok((store.summary(), store.plan()?))
    }
    #[cfg(not(feature = "redis"))]
    {
        let _ = (prefix, now, config);
        Err(store::no_redis(url))
    }
}

/// The engine in Redis at `url` and `prefix`: opened, or with `sizing`,
/// opened or created (see [`open_or_create`] for the horizon).
#[cfg(feature = "redis")]
fn redis_store(
    url: &str,
    prefix: &str,
    now: Option<SystemTime>,
    sizing: Option<(&Sizing, Option<Duration>)>,
) -> CliResult<Store> {
    let place = redis_cli::Place::new(url, prefix, now);
    Ok(Store::Redis(match sizing {
        Some((sizing, within)) => place.open_or_create(sizing, within)?,
        None => place.open()?,
    }))
}

#[cfg(not(feature = "redis"))]
fn redis_store(
    url: &str,
    _: &str,
    _: Option<SystemTime>,
    _: Option<(&Sizing, Option<Duration>)>,
) -> CliResult<Store> {
    Err(store::no_redis(url))
}

/// `--degraded` given to a command that opens no existing engine, for
/// which it would mean nothing: refused rather than ignored.
fn refuse_degraded(command: &str, degraded: bool) -> CliResult<()> {
    match degraded {
        true => Err(CliError(format!(
            "--degraded means nothing to `{command}`: it opens no existing engine \
             (the flag is for commands that open one whose files may be damaged)"
        ))),
        false => Ok(()),
    }
}

/// The flags that have no meaning for an engine in Redis, refused with it.
fn refuse_for_redis(
    target: &Target,
    degraded: bool,
    sizing: Option<&Sizing>,
    write: Option<&WriteFlags>,
) -> CliResult<()> {
    target.refuse(
        "--degraded",
        degraded,
        "Redis keeps no segment files to check or quarantine",
    )?;
    if let Some(sizing) = sizing {
        target.refuse(
            "--sync",
            sizing.sync.is_some(),
            "durability is the Redis server's (its appendonly and appendfsync settings)",
        )?;
        target.refuse(
            "--counting",
            sizing.counting,
            "counting tiers (remove) are not available on Redis",
        )?;
    }
    if let Some(write) = write {
        target.refuse(
            "--max-clock-jump",
            write.max_clock_jump.is_some(),
            "a Redis client keeps no clock of its own to compare with",
        )?;
    }
    Ok(())
}

/// clap requires DIR unless --redis is given, and --redis is refused first.
fn no_dir() -> CliError {
    CliError("no engine directory given".into())
}

/// The engine directory given, or an error when there is none (see
/// [`no_dir`]) or it is `-` (see [`store::not_stdin`]).
fn engine_dir(dir: Option<PathBuf>) -> CliResult<PathBuf> {
    let dir = dir.ok_or_else(no_dir)?;
    store::not_stdin(&dir)?;
    Ok(dir)
}

/// Opens the engine in `dir`, or creates it from the defaults and `sizing`
/// when the directory holds none.
fn open_or_create_dir(
    dir: &std::path::Path,
    sizing: &Sizing,
    opts: Options,
    now: Option<SystemTime>,
    within: Option<Duration>,
    degraded: bool,
) -> CliResult<Engine> {
    let engine = match Engine::open_with(dir, opts.clone()) {
        Err(Error::NotFound { .. }) => {
            let config = sizing.apply(Config::default());
            check_new_horizon(&dir.display(), &config, within, now)?;
            match Engine::create_with(dir, config, opts.clone()) {
                Ok(engine) => {
                    note(format_args!("created new engine at {}", summary(&engine)?));
                    return Ok(engine);
                }
                // Another process created it meanwhile.
                Err(Error::AlreadyExists { .. }) => {
                    Engine::open_with(dir, opts).map_err(|e| named(dir, e))?
                }
                Err(e) => return Err(named(dir, e)),
            }
        }
        r => r.map_err(|e| named(dir, e))?,
    };
    note_kept(dir, &engine, sizing)?;
    note_degraded(dir, &engine, degraded)?;
    Ok(engine)
}

/// After a writing open with `--degraded`: names on stderr the windows the
/// open went on without, those it recovered without their shadow copy, and
/// the log damage whose later writes it did not replay.
/// The manifest stops naming a lost window as live: a later `stats` lists
/// it only among the windows lost earlier (`lost_earlier`, kept while
/// other tiers are looked in for it), so this note is the command's word
/// of the loss.
fn note_degraded(dir: &std::path::Path, engine: &Engine, degraded: bool) -> CliResult<()> {
    if !degraded {
        return Ok(());
    }
    let s = engine.stats().map_err(|e| named(dir, e))?;
    if !s.lost_windows.is_empty() {
        note(format_args!(
            "{}: opened degraded without these windows (a damaged file of each is in quarantine/, or a file was missing): {}",
            dir.display(),
            s.lost_windows.join(", ")
        ));
    }
    if !s.unrestored_windows.is_empty() {
        note(format_args!(
            "{}: opened degraded; recovered without a damaged shadow copy (counts may be off): {}",
            dir.display(),
            s.unrestored_windows.join(", ")
        ));
    }
    if let Some(damage) = &s.log_damage {
        note(format_args!(
            "{}: opened degraded past {damage}",
            dir.display()
        ));
    }
    Ok(())
}

/// After a read-only open with `--degraded` (`check`, `filter-new
/// --dry-run`): names on stderr the damaged windows it reads without,
/// whose keys it answers as new unless another tier holds them. A
/// read-only open moves nothing.
fn note_read_without(dir: &std::path::Path, engine: &Engine) -> CliResult<()> {
    let s = engine.stats().map_err(|e| named(dir, e))?;
    if !s.lost_windows.is_empty() {
        note(format_args!(
            "{}: read without these damaged windows, their keys answered as new \
             where no other tier holds them (nothing was moved; `timebloom verify` \
             names their files): {}",
            dir.display(),
            s.lost_windows.join(", ")
        ));
    }
    Ok(())
}

/// Notes that the configuration flags of `sizing` that differ from the
/// existing engine's configuration are not applied to it.
fn note_kept(dir: &std::path::Path, engine: &Engine, sizing: &Sizing) -> CliResult<()> {
    let have = engine.config();
    let mut wanted = sizing.apply(have.clone());
    wanted.validate()?;
    // --sync applies to this command on an existing engine (`session`).
    wanted.sync = have.sync;
    if wanted != *have {
        note(format_args!(
            "{}: the engine exists; configuration flags apply only when creating one (it keeps tiers {})",
            dir.display(),
            tier_list(&have.tiers)
        ));
    }
    Ok(())
}

fn tier_list(tiers: &[Tier]) -> String {
    tiers
        .iter()
        .map(Tier::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// `tiers 7d,4w,12m, 1000000 keys/day, fpr 0.001, utc+00:00`.
fn describe(c: &Config) -> String {
    format!(
        "tiers {}, {} keys/day, fpr {}, utc{}",
        tier_list(&c.tiers),
        c.expected_items_per_day,
        units::fmt_rate(c.fpr),
        fmt_offset(c.utc_offset_secs)
    )
}

/// `DIR (tiers 7d,4w,12m, 1000000 keys/day, fpr 0.001, utc+00:00, sync
/// interval=1s, 1.2 GiB on disk)`.
fn summary(engine: &Engine) -> CliResult<String> {
    let c = engine.config();
    let bytes = engine.stats()?.bytes;
    Ok(format!(
        "{} ({}, sync {}, {} on disk)",
        engine.path().display(),
        describe(c),
        c.sync,
        fmt_bytes(bytes)
    ))
}

// ---- output -------------------------------------------------------------------

/// Buffered stdout. A closed pipe (EPIPE: `| head`) is not an error: output
/// stops, `closed` is set, and the command finishes quietly.
struct Out {
    w: BufWriter<Waiting>,
    closed: bool,
    /// Whether stdout is a pipe or a socket, once `reader_gone` asked.
    stream: Option<bool>,
}

impl Out {
    fn new() -> Out {
        Out {
            w: BufWriter::with_capacity(1 << 16, Waiting(io::stdout().lock())),
            closed: false,
            stream: None,
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

    /// Whether the reader of stdout has gone (a pipe or FIFO whose read
    /// end is closed: `| head` that has exited), asked before a batch is
    /// recorded. A write learns it only once the batch is recorded, and
    /// the batch's lines could then never be printed: `tail -f log |
    /// filter-new DIR | head -5` recorded the next batch after `head`
    /// left, and the next run called those lines repeated. Sets `closed`.
    fn reader_gone(&mut self) -> bool {
        // A pipe or a socket only: a terminal that hung up answers
        // POLLERR too, and its write error is reported as such.
        let stream = *self.stream.get_or_insert_with(|| {
            rustix::fs::fstat(io::stdout()).is_ok_and(|st| {
                matches!(
                    rustix::fs::FileType::from_raw_mode(st.st_mode),
                    rustix::fs::FileType::Fifo | rustix::fs::FileType::Socket
                )
            })
        });
        if stream && !self.closed {
            let mut fds = [PollFd::new(&self.w.get_ref().0, PollFlags::OUT)];
            let now = rustix::event::Timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // A pipe with no reader answers POLLERR; an error of the
            // poll itself leaves the answer to the next write.
            if rustix::event::poll(&mut fds, Some(&now)).is_ok_and(|n| n > 0)
                && fds[0].revents().contains(PollFlags::ERR)
            {
                self.closed = true;
            }
        }
        self.closed
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

/// Standard output that waits when a write would block. A pipe that
/// another process sharing it set non-blocking (the flag belongs to the open
/// pipe, not to this process) answers "try again" when full; treated as a
/// failure, it ended `filter-new` with keys recorded whose lines were
/// never printed. A `write` that fails accepts nothing, so it is tried
/// again once the pipe takes data.
struct Waiting(StdoutLock<'static>);

impl Waiting {
    fn retry<T>(
        &mut self,
        mut op: impl FnMut(&mut StdoutLock<'static>) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            match op(&mut self.0) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut fds = [PollFd::new(&self.0, PollFlags::OUT)];
                    // Interrupted, or any other answer: the write tells.
                    let _ = rustix::event::poll(&mut fds, None);
                }
                r => return r,
            }
        }
    }
}

impl Write for Waiting {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.retry(|w| w.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        self.retry(|w| w.flush())
    }
}
