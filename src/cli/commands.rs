//! The commands of `timebloom`: the arguments of each and the function
//! that runs it. `run` (main.rs) hands each its arguments, what it needs of
//! the global flags (a [`Ctx`], or `--degraded` alone), and stdout, and
//! flushes stdout after it.

use std::collections::HashSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant, SystemTime};

use clap::{Args, CommandFactory};
use timebloom::plan::Plan;
use timebloom::{Config, Engine, Error, Kind, ManualClock, Options};

use crate::input::{open_inputs, Chunk, KeyReader};
use crate::progress::Progress;
use crate::signals;
use crate::store::{NoRedisFlags, RedisFlags, Store, Target};
use crate::text::{self, parse_duration, parse_rfc3339, stats_table};
use crate::{
    create_in_redis, engine_dir, finish, named, note, note_degraded, open_or_create,
    open_read_only, refuse_degraded, refuse_for_redis, summary, unix_secs, Cli, CliError,
    CliResult, KeyFlags, LineFlags, Out, Sizing, WriteFlags,
};

/// What a command that opens or creates an engine is run with: the global
/// flags and the engine options made of them.
pub(crate) struct Ctx {
    /// Engine options: the clock of `--now` (else the system clock), and
    /// `--degraded`.
    opts: Options,
    /// `--now`.
    now: Option<SystemTime>,
    /// `--degraded`.
    degraded: bool,
}

impl Ctx {
    /// The context of the global flags `--now` and `--degraded`.
    pub(crate) fn new(now: Option<SystemTime>, degraded: bool) -> Ctx {
        let opts = match now {
            Some(t) => Options::default().clock(ManualClock::new(t)),
            None => Options::default(),
        }
        .degraded(degraded);
        Ctx {
            opts,
            now,
            degraded,
        }
    }
}

/// The arguments of `create`.
#[derive(Args)]
pub(crate) struct CreateArgs {
    /// The engine directory.
    #[arg(required_unless_present = "redis", conflicts_with = "redis")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    redis: RedisFlags,
    #[command(flatten)]
    sizing: Sizing,
}

/// `create`: makes the engine in a directory or in Redis, notes where, and
/// prints its sizing plan.
pub(crate) fn create(args: CreateArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let CreateArgs { dir, redis, sizing } = args;
    let Ctx {
        opts,
        now,
        degraded,
    } = ctx;
    let target = Target::of(dir, redis)?;
    refuse_for_redis(&target, degraded, Some(&sizing), None)?;
    refuse_degraded("create", degraded)?;
    let config = sizing.apply(Config::default());
    let (created, plan) = match &target {
        Target::Dir(dir) => {
            let plan = Plan::new(&config)?;
            let engine = Engine::create_with(dir, config, opts).map_err(|e| named(dir, e))?;
            let text = summary(&engine)?;
            engine.close().map_err(|e| named(dir, e))?;
            (text, plan)
        }
        Target::Redis { url, prefix } => create_in_redis(url, prefix, now, config)?,
    };
    note(format_args!("created engine at {created}"));
    out.write(&[plan.to_string().as_bytes()])?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `plan`.
#[derive(Args)]
pub(crate) struct PlanArgs {
    #[command(flatten)]
    sizing: Sizing,
    /// Print the plan as JSON.
    #[arg(long)]
    json: bool,
}

/// `plan`: prints the sizing plan of a configuration (as text or JSON)
/// and creates nothing.
pub(crate) fn plan(args: PlanArgs, degraded: bool, out: &mut Out) -> CliResult<ExitCode> {
    let PlanArgs { sizing, json } = args;
    refuse_degraded("plan", degraded)?;
    let plan = Plan::new(&sizing.apply(Config::default()))?;
    let text = if json {
        let mut s = serde_json::to_string_pretty(&plan)
            .map_err(|e| CliError(format!("plan as JSON: {e}")))?;
        s.push('\n');
        s
    } else {
        plan.to_string()
    };
    out.write(&[text.as_bytes()])?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `add`.
#[derive(Args)]
pub(crate) struct AddArgs {
    /// The engine directory (with --redis, the first file of keys).
    #[arg(required_unless_present = "redis")]
    dir: Option<PathBuf>,
    /// Files of keys, one per line (`.gz` files, any case, are decompressed); stdin
    /// when none ("-" is stdin too).
    files: Vec<PathBuf>,
    #[command(flatten)]
    redis: RedisFlags,
    #[command(flatten)]
    sizing: Sizing,
    #[command(flatten)]
    keys: KeyFlags,
    #[command(flatten)]
    lines: LineFlags,
    #[command(flatten)]
    write: WriteFlags,
}

/// `add`: records the keys of the inputs, creating the engine if there is
/// none, and prints how many were new.
pub(crate) fn add(args: AddArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let AddArgs {
        dir,
        mut files,
        redis,
        sizing,
        keys,
        lines,
        write,
    } = args;
    let Ctx {
        opts,
        now,
        degraded,
    } = ctx;
    let target = Target::with_rest(dir, redis, &mut files)?;
    refuse_for_redis(&target, degraded, Some(&sizing), Some(&write))?;
    let opts = sizing.session(write.apply(opts));
    // Inputs first: nothing is created for a missing file.
    let inputs = open_inputs(files)?;
    let reader = KeyReader::new(inputs, keys.rules(&lines), "add");
    signals::install();
    let engine = open_or_create(&target, &sizing, opts, now, None, degraded)?;
    let mut reader = reader.with_batch(engine.batch_lines(sizing.sync));
    let progress = Progress::new(
        "add",
        reader.inputs().total_bytes,
        reader.inputs().read_bytes.clone(),
    );
    let mut chunk = Chunk::default();
    let (mut new, mut total) = (0u64, 0u64);
    // As in `filter_lines`: a signal stops the command between batches
    // (reading files only, also while a batch is read), and the keys
    // recorded are counted.
    let hold_reading = reader.inputs().never_wait;
    let result = (|| -> CliResult<()> {
        while !signals::caught() {
            let reading = hold_reading.then(signals::hold);
            if !reader.fill(&mut chunk)? {
                break;
            }
            let _hold = reading.unwrap_or_else(signals::hold);
            let (fresh, stopped) = engine.insert_batch(&chunk.keys())?;
            new += fresh.iter().filter(|n| **n).count() as u64;
            total += fresh.len() as u64;
            progress.update(total, new);
            if let Some(e) = stopped {
                return Err(e);
            }
        }
        Ok(())
    })();
    progress.finish();
    reader.report_skips();
    let closed = engine.close();
    // The keys recorded before an error are reported too.
    out.write(&[format!("added {new} new of {total} keys\n").as_bytes()])?;
    out.flush()?;
    finish(result, closed)?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `filter-new`.
#[derive(Args)]
pub(crate) struct FilterNewArgs {
    /// The engine directory (with --redis, the first file of keys).
    #[arg(required_unless_present = "redis")]
    dir: Option<PathBuf>,
    /// Files of keys, one per line (`.gz` files, any case, are decompressed); stdin
    /// when none ("-" is stdin too).
    files: Vec<PathBuf>,
    #[command(flatten)]
    redis: RedisFlags,
    /// Record the new lines but print nothing.
    #[arg(short, long, conflicts_with_all = ["dry_run", "duplicates"])]
    quiet: bool,
    /// Print what would be new but record nothing (lines repeated within
    /// the input are printed once); the engine is opened read-only, so
    /// a dry run works beside a running writer (--sync and
    /// --max-clock-jump, which only writing uses, are refused with it).
    /// It keeps a hash of each line it prints to catch repeats: about
    /// 35 bytes a new line (3.5 GB for 100 million).
    #[arg(long, conflicts_with_all = ["sync", "max_clock_jump"])]
    dry_run: bool,
    /// Print the repeated lines instead of the new ones.
    #[arg(long)]
    duplicates: bool,
    /// A line counts as seen only when recorded within this long of now
    /// (3d, 12h, 2w, 1d12h): print what is due for a recrawl, and
    /// record it again. Windows are whole, so a key up to one window of
    /// the answering tier older may count as seen too.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    within: Option<Duration>,
    /// One summary line on stderr at the end: lines read, new, repeated,
    /// skipped, empty, rate.
    #[arg(long)]
    stats: bool,
    #[command(flatten)]
    sizing: Sizing,
    #[command(flatten)]
    keys: KeyFlags,
    #[command(flatten)]
    lines: LineFlags,
    #[command(flatten)]
    write: WriteFlags,
}

/// `filter-new`: prints the lines not seen before and records them (with
/// `--dry-run`, records nothing), creating the engine if there is none.
pub(crate) fn filter_new(args: FilterNewArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let FilterNewArgs {
        dir,
        mut files,
        redis,
        quiet,
        dry_run,
        duplicates,
        stats,
        within,
        sizing,
        keys,
        lines,
        write,
    } = args;
    let Ctx {
        opts,
        now,
        degraded,
    } = ctx;
    let target = Target::with_rest(dir, redis, &mut files)?;
    refuse_for_redis(&target, degraded, Some(&sizing), Some(&write))?;
    let opts = sizing.session(write.apply(opts));
    let inputs = open_inputs(files)?;
    let reader = KeyReader::new(inputs, keys.rules(&lines), "filter-new");
    signals::install();
    // A dry run records nothing: it reads beside a running writer.
    let engine = if dry_run {
        open_read_only(&target, Some(&sizing), opts, now, degraded)?
    } else {
        open_or_create(&target, &sizing, opts, now, within, degraded)?
    };
    if let Some(Err(e)) = within.map(|h| engine.check_horizon(h)) {
        engine.close()?;
        return Err(e);
    }
    let reader = reader.with_batch(engine.batch_lines(sizing.sync));
    let mode = FilterMode {
        quiet,
        dry_run,
        duplicates,
        stats,
        within,
    };
    let result = filter_lines(&engine, reader, &mode, out);
    let closed = engine.close();
    finish(result, closed)?;
    Ok(ExitCode::SUCCESS)
}

/// What `filter-new` prints and records.
struct FilterMode {
    quiet: bool,
    dry_run: bool,
    duplicates: bool,
    stats: bool,
    within: Option<Duration>,
}

/// The loop of `filter-new`: prints the new (or repeated) lines of every
/// batch once the batch is recorded.
fn filter_lines(
    engine: &Store,
    mut reader: KeyReader,
    mode: &FilterMode,
    out: &mut Out,
) -> CliResult<()> {
    let progress = Progress::new(
        "filter-new",
        reader.inputs().total_bytes,
        reader.inputs().read_bytes.clone(),
    );
    let start = Instant::now();
    // --dry-run records nothing, so repeats within the input are caught here.
    let mut printed: HashSet<u128> = HashSet::new();
    let mut chunk = Chunk::default();
    let (mut new, mut total) = (0u64, 0u64);
    // Reading files only, a signal is held while a batch is read too: the
    // command stops between batches, closes the engine and reports.
    // Reading what may wait for a writer (a pipe, a terminal), a signal
    // acts at once.
    let hold_reading = !mode.dry_run && reader.inputs().never_wait;
    let result = (|| -> CliResult<()> {
        while !out.closed && !signals::caught() {
            let reading = hold_reading.then(signals::hold);
            if !reader.fill(&mut chunk)? {
                break;
            }
            // Nothing is recorded that could not be printed (see
            // `Out::reader_gone`); --quiet prints nothing.
            if !mode.quiet && out.reader_gone() {
                break;
            }
            // A batch is recorded before it is printed: a signal waits
            // until every line of it is out (see `signals`).
            let _hold = reading.or_else(|| (!mode.dry_run).then(signals::hold));
            let (fresh, stopped): (Vec<bool>, _) = if mode.dry_run {
                let keys = chunk.keys();
                let seen = match mode.within {
                    Some(h) => engine.contains_within_batch(&keys, h)?,
                    None => engine.contains_batch(&keys)?,
                };
                let fresh = (keys.iter().zip(seen))
                    .map(|(k, seen)| !seen && printed.insert(xxhash_rust::xxh3::xxh3_128(k)))
                    .collect();
                (fresh, None)
            } else if let Some(h) = mode.within {
                engine.insert_within_batch(&chunk.keys(), h)?
            } else {
                engine.insert_batch(&chunk.keys())?
            };
            new += fresh.iter().filter(|n| **n).count() as u64;
            total += fresh.len() as u64;
            if !mode.quiet {
                // Stdout may be the terminal that shows the progress bar.
                progress.suspend(|| -> CliResult<()> {
                    for (line, _) in (chunk.lines().iter().zip(fresh))
                        .filter(|(_, is_new)| *is_new != mode.duplicates)
                    {
                        out.write(&[line, b"\n"])?;
                    }
                    out.flush()
                })?;
            }
            progress.update(total, new);
            if let Some(e) = stopped {
                return Err(e);
            }
        }
        Ok(())
    })();
    progress.finish();
    reader.report_skips();
    if mode.stats {
        let c = reader.counts;
        let skipped = c.too_long + c.not_urls_skipped;
        let read = total + skipped + c.empty;
        note(format_args!(
            "filter-new: read {read} lines: {new} new, {} repeated, {skipped} skipped, {} empty, {} lines/s",
            total - new,
            c.empty,
            rate(read, start.elapsed())
        ));
    }
    result
}

/// `n` a second over `d` (0 when no time passed).
fn rate(n: u64, d: Duration) -> u64 {
    let s = d.as_secs_f64();
    if s > 0.0 {
        (n as f64 / s).round() as u64
    } else {
        0
    }
}

/// The arguments of `check`.
#[derive(Args)]
pub(crate) struct CheckArgs {
    /// The engine directory (with --redis, the first key).
    #[arg(required_unless_present = "redis")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    redis: RedisFlags,
    /// Only keys recorded within this long of now count as seen (3d, 12h,
    /// 90min, 30s, 2w, 1d12h). Windows are whole, so a key up to one
    /// window of the answering tier older may count too.
    #[arg(long, value_name = "DURATION", value_parser = parse_duration)]
    within: Option<Duration>,
    /// Keys to check; stdin lines when none.
    keys: Vec<OsString>,
    #[command(flatten)]
    key_flags: KeyFlags,
    #[command(flatten)]
    lines: LineFlags,
}

/// `check`: prints whether each key was seen, read-only; exit 1 when any
/// was new.
pub(crate) fn check(args: CheckArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let CheckArgs {
        dir,
        redis,
        within,
        mut keys,
        key_flags,
        lines,
    } = args;
    let Ctx {
        opts,
        now,
        degraded,
    } = ctx;
    let target = Target::with_rest(dir, redis, &mut keys)?;
    refuse_for_redis(&target, degraded, None, None)?;
    let mut reader = KeyReader::args_or_stdin(keys, key_flags.rules(&lines), "check")?;
    let engine = open_read_only(&target, None, opts, now, degraded)?;
    if let Some(Err(e)) = within.map(|h| engine.check_horizon(h)) {
        engine.close()?;
        return Err(e);
    }
    let mut chunk = Chunk::default();
    let mut any_new = false;
    // The exit status answers for every key: once the reader of stdout
    // has gone (`| head`), the keys go on being read, unprinted, until
    // one is new or the input ends.
    let result = (|| -> CliResult<()> {
        while !(out.closed && any_new) && reader.fill(&mut chunk)? {
            let seen = match within {
                None => engine.contains_batch(&chunk.keys())?,
                Some(h) => engine.contains_within_batch(&chunk.keys(), h)?,
            };
            for (line, seen) in chunk.lines().iter().zip(seen) {
                any_new |= !seen;
                if !out.closed {
                    out.write(&[line, if seen { b"\tseen\n" } else { b"\tnew\n" }])?;
                }
            }
            if !out.closed {
                out.flush()?;
            }
        }
        Ok(())
    })();
    reader.report_skips();
    let closed = engine.close();
    result?;
    closed?;
    Ok(ExitCode::from(u8::from(any_new)))
}

/// The arguments of `remove`.
#[derive(Args)]
pub(crate) struct RemoveArgs {
    /// The engine directory.
    #[arg(required_unless_present = "redis")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    redis: NoRedisFlags,
    /// Keys to remove; stdin lines when none.
    keys: Vec<OsString>,
    /// Take back inserts made at this instant (RFC 3339) instead of now:
    /// the windows holding it are decremented, and only where every one
    /// of them holds the key.
    #[arg(long, value_name = "RFC3339", value_parser = parse_rfc3339)]
    at: Option<SystemTime>,
    #[command(flatten)]
    key_flags: KeyFlags,
    #[command(flatten)]
    lines: LineFlags,
    #[command(flatten)]
    write: WriteFlags,
}

/// `remove`: takes back one insert of each key (now, or at `--at`) in an
/// engine with no plain Bloom tier, and prints how many were taken back.
pub(crate) fn remove(args: RemoveArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let RemoveArgs {
        dir,
        redis,
        keys,
        at,
        key_flags,
        lines,
        write,
    } = args;
    let Ctx { opts, degraded, .. } = ctx;
    redis.refuse("remove", "counting tiers are not available on Redis")?;
    let dir = engine_dir(dir)?;
    let opts = write.apply(opts);
    let mut reader = KeyReader::args_or_stdin(keys, key_flags.rules(&lines), "remove")?;
    signals::install();
    let engine = Engine::open_with(&dir, opts).map_err(|e| named(&dir, e))?;
    note_degraded(&dir, &engine, degraded)?;
    if let Some(t) = engine.config().tiers.iter().find(|t| t.kind == Kind::Bloom) {
        let e = Error::RemoveUnsupported {
            tier: t.to_string(),
        };
        return Err(CliError(format!(
            "{}: {e} (create the engine with --counting, or with fingerprint tiers only)",
            dir.display()
        )));
    }
    let mut chunk = Chunk::default();
    let (mut removed, mut total) = (0u64, 0u64);
    // As in `add`: a signal stops the command between batches, and the
    // keys taken back are counted.
    let hold_reading = reader.inputs().never_wait;
    let result = (|| -> CliResult<()> {
        while !signals::caught() {
            let reading = hold_reading.then(signals::hold);
            if !reader.fill(&mut chunk)? {
                break;
            }
            let _hold = reading.unwrap_or_else(signals::hold);
            for key in chunk.keys() {
                let r = match at {
                    Some(t) => engine.remove_at(key, t),
                    None => engine.remove(key),
                };
                let (done, failed) = match (r, at) {
                    (Ok(done), _) => (done, None),
                    // A remove whose sync failed is done: counted,
                    // then its cause is the error.
                    (Err(Error::Incomplete { answers, cause }), _) => {
                        (answers == [true], Some(named(&dir, *cause)))
                    }
                    (Err(e @ Error::WindowUnavailable { .. }), Some(t)) => {
                        return Err(CliError(format!(
                            "{}: --at {}: {e}",
                            dir.display(),
                            text::fmt_instant(unix_secs(t))
                        )));
                    }
                    (Err(e), _) => return Err(named(&dir, e)),
                };
                removed += u64::from(done);
                total += 1;
                if let Some(e) = failed {
                    return Err(e);
                }
            }
        }
        Ok(())
    })();
    reader.report_skips();
    let closed = engine.close();
    // The keys removed before an error are reported too.
    out.write(&[format!("removed {removed} of {total} keys\n").as_bytes()])?;
    out.flush()?;
    finish(result, closed.map_err(|e| named(&dir, e)))?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `stats`.
#[derive(Args)]
pub(crate) struct StatsArgs {
    /// The engine directory.
    #[arg(required_unless_present = "redis", conflicts_with = "redis")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    redis: RedisFlags,
    /// Print the stats as JSON.
    #[arg(long)]
    json: bool,
}

/// `stats`: prints the tiers and segments of the engine (as a table or
/// JSON), read-only.
pub(crate) fn stats(args: StatsArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let StatsArgs { dir, redis, json } = args;
    let Ctx {
        opts,
        now,
        degraded,
    } = ctx;
    let target = Target::of(dir, redis)?;
    refuse_for_redis(&target, degraded, None, None)?;
    // Its output lists the windows lost.
    let engine = open_read_only(&target, None, opts, now, false)?;
    let stats = engine.stats()?;
    let (name, place) = engine.name();
    engine.close()?;
    let text = if json {
        let mut s = serde_json::to_string_pretty(&stats)
            .map_err(|e| CliError(format!("stats as JSON: {e}")))?;
        s.push('\n');
        s
    } else {
        stats_table(&name, place, &stats)
    };
    out.write(&[text.as_bytes()])?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `verify`.
#[derive(Args)]
pub(crate) struct VerifyArgs {
    /// The engine directory.
    #[arg(required_unless_present = "redis")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    redis: NoRedisFlags,
}

/// `verify`: checks every sealed segment's checksum and prints "ok"; exit
/// 1 naming each damaged file.
pub(crate) fn verify(args: VerifyArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let VerifyArgs { dir, redis } = args;
    let Ctx { opts, .. } = ctx;
    redis.refuse(
        "verify",
        "Redis keeps no checksummed segment files (Redis's own persistence checks apply)",
    )?;
    let dir = engine_dir(dir)?;
    // Exit 1 for damage (every damaged file named), 2 for any other
    // error. Degraded, so that the open goes on past a damaged file
    // (a read-only open moves nothing) and `verify_each` names them
    // all.
    let engine = match Engine::open_read_only_with(&dir, opts.degraded(true)) {
        Ok(e) => e,
        Err(e) if e.is_damage() => {
            note(format_args!("{e}"));
            return Ok(ExitCode::from(1));
        }
        Err(e) => return Err(e.into()),
    };
    let problems = engine.verify_each();
    engine.close()?;
    if let Some(e) = problems.iter().find(|e| !e.is_damage()) {
        return Err(CliError(e.to_string()));
    }
    if !problems.is_empty() {
        for e in &problems {
            note(format_args!("{e}"));
        }
        return Ok(ExitCode::from(1));
    }
    out.write(&[b"ok\n"])?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `maintain`.
#[derive(Args)]
pub(crate) struct MaintainArgs {
    /// The engine directory.
    #[arg(required_unless_present = "redis")]
    dir: Option<PathBuf>,
    #[command(flatten)]
    redis: NoRedisFlags,
}

/// `maintain`: rotates and expires the engine's windows now (or at
/// `--now`) and prints what changed.
pub(crate) fn maintain(args: MaintainArgs, ctx: Ctx, out: &mut Out) -> CliResult<ExitCode> {
    let MaintainArgs { dir, redis } = args;
    let Ctx { now, degraded, .. } = ctx;
    redis.refuse(
        "maintain",
        "windows in Redis rotate with each client's clock and expire by themselves (EXPIREAT)",
    )?;
    let dir = engine_dir(dir)?;
    // Opened on a clock that stands still a day past the epoch, so
    // that the open itself moves nothing and `maintain` reports every
    // change (a day past it, the first instant that is day 0 or
    // later at every UTC offset: a fingerprint table knows no day
    // before the epoch's); --degraded applies as to every other open.
    // A window whose file is missing is left out as expired when
    // it has expired at the instant the engine is moved to (a copy
    // that took MANIFEST before the writer's expiry), as every
    // other writing open does at its clock.
    // --now moves the engine on purpose, past any clock jump; the
    // system clock is refused a jump, as at every other write.
    let at = now.unwrap_or_else(SystemTime::now);
    let clock = ManualClock::new(std::time::UNIX_EPOCH + Duration::from_secs(86_400));
    let still = Options::default()
        .clock(clock.clone())
        .degraded(degraded)
        .expired_at(at)
        .allow_clock_jump(now.is_some());
    let engine = Engine::open_with(&dir, still).map_err(|e| named(&dir, e))?;
    let done = match now {
        Some(t) => engine.maintain(t),
        None => engine.maintain_checked(at),
    };
    // The windows the open went on without, read once the engine
    // stands at the instant it was moved to (the epoch is before
    // any day a fingerprint table knows); after a refused move, the
    // refusal is the error to report.
    if done.is_ok() {
        clock.set(at);
    }
    let noted = note_degraded(&dir, &engine, degraded);
    let closed = engine.close();
    let done = done.map_err(|e| named(&dir, e))?;
    noted?;
    closed.map_err(|e| named(&dir, e))?;
    out.write(&[done.to_string().as_bytes()])?;
    Ok(ExitCode::SUCCESS)
}

/// The arguments of `completions`.
#[derive(Args)]
pub(crate) struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

/// `completions`: prints a shell completion script.
pub(crate) fn completions(
    args: CompletionsArgs,
    degraded: bool,
    out: &mut Out,
) -> CliResult<ExitCode> {
    let CompletionsArgs { shell } = args;
    refuse_degraded("completions", degraded)?;
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut Cli::command(), "timebloom", &mut script);
    out.write(&[&script])?;
    Ok(ExitCode::SUCCESS)
}
