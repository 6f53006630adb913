//! Runs the `timebloom` binary in temporary directories.

use std::io::{Read, Write};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::thread;

mod cli_support;
mod common;

use cli_support::{
    assert_exit, assert_stderr_contains, feed_stdin, filter_new_command, read_stderr, run,
    spawn_piped, temp_db, BIN, DAY0, SMALL,
};

/// `run` with `dir` appended after the command name and `SMALL` sizing.
fn cmd(command: &str, dir: &Path, rest: &[&str], input: &[u8]) -> Output {
    let dir = dir.to_str().unwrap();
    let mut args = vec![command, dir];
    args.extend_from_slice(rest);
    if matches!(command, "create" | "add" | "filter-new") && !rest.contains(&"--items-per-day") {
        args.extend_from_slice(SMALL);
    }
    run(&args, input)
}

use cli_support::{code, stderr, stdout};

#[test]
fn filter_new_dedups_within_one_input_and_across_runs() {
    // Guards the core primitive: a key is printed once, ever, within retention.
    let (_tmp, db) = temp_db();
    let out = cmd("filter-new", &db, &[], b"a\nb\na\nc\nb\n");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "a\nb\nc\n");
    let again = cmd("filter-new", &db, &[], b"a\nb\nc\n");
    assert_eq!(code(&again), 0);
    assert_eq!(stdout(&again), "");
    let more = cmd("filter-new", &db, &[], b"c\nd\n");
    assert_eq!(stdout(&more), "d\n");
}

#[test]
fn filter_new_preserves_input_order_across_batches() {
    // Guards that batching (4096 lines per insert_batch) keeps input order and drops only repeats.
    let (_tmp, db) = temp_db();
    let mut input = String::new();
    let mut want = String::new();
    for i in (0..10_000u32).rev() {
        input.push_str(&format!("https://example.com/{i}\n"));
        want.push_str(&format!("https://example.com/{i}\n"));
        if i % 7 == 0 {
            input.push_str("https://example.com/9999\n");
        }
    }
    let out = cmd(
        "filter-new",
        &db,
        &["--items-per-day", "100000"],
        input.as_bytes(),
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), want);
}

#[test]
fn filter_new_strips_cr_skips_empty_lines_and_counts_a_last_line_without_newline() {
    // Guards line splitting: CRLF input, blank lines and an unterminated last line.
    let (_tmp, db) = temp_db();
    let out = cmd("filter-new", &db, &[], b"a\r\n\n\r\nb\r\na\n\nlast");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "a\nb\nlast\n");
    let add = cmd("add", &db, &[], b"last\r\na");
    assert_eq!(stdout(&add), "added 0 new of 2 keys\n");
}

#[test]
fn filter_new_echoes_non_utf8_keys_byte_exact() {
    // Guards that keys are raw bytes, never decoded or replaced.
    let (_tmp, db) = temp_db();
    let input = b"caf\xe9\n\xff\xfe\x00x\r\ncaf\xe9\nok\n";
    let out = cmd("filter-new", &db, &[], input);
    assert_exit(&out, 0);
    assert_eq!(out.stdout, b"caf\xe9\n\xff\xfe\x00x\nok\n");
    let check = cmd("check", &db, &[], b"\xff\xfe\x00x\nnope\n");
    assert_eq!(code(&check), 1);
    assert_eq!(check.stdout, b"\xff\xfe\x00x\tseen\nnope\tnew\n");
}

#[test]
fn filter_new_reads_files_in_turn_and_dash_as_stdin() {
    // Guards FILE arguments: several files in order, `-` meaning stdin, a missing file is exit 2.
    let (tmp, db) = temp_db();
    let f1 = tmp.path().join("one.txt");
    let f2 = tmp.path().join("two.txt");
    std::fs::write(&f1, "a\nb\n").unwrap();
    std::fs::write(&f2, "b\nc").unwrap();
    let (f1, f2) = (f1.to_str().unwrap(), f2.to_str().unwrap());
    let out = cmd("filter-new", &db, &[f1, "-", f2], b"s\na\n");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "a\nb\ns\nc\n");
    let missing = tmp.path().join("missing.txt");
    let out = cmd("add", &db, &[missing.to_str().unwrap()], b"");
    assert_eq!(code(&out), 2);
    assert_stderr_contains(&out, "missing.txt");
}

#[test]
fn add_prints_new_and_total_counts() {
    // Guards the `add` report line.
    let (_tmp, db) = temp_db();
    let out = cmd("add", &db, &[], b"x\ny\nx\n");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "added 2 new of 3 keys\n");
    let out = cmd("add", &db, &[], b"x\nz\n");
    assert_eq!(stdout(&out), "added 1 new of 2 keys\n");
}

#[test]
fn first_run_creates_the_engine_and_says_so() {
    // Guards auto-create for add/filter-new (and only for them): a first run needs no setup.
    let (tmp, db) = temp_db();
    let out = cmd("filter-new", &db, &[], b"k\n");
    assert_eq!(code(&out), 0);
    let err = stderr(&out);
    assert!(err.contains("timebloom: created new engine at"), "{err}");
    assert!(err.contains("tiers 7d,4w,12m"), "{err}");
    let out = cmd("add", &db, &[], b"k\n");
    assert!(!stderr(&out).contains("created"), "{}", stderr(&out));
    for command in ["check", "stats", "remove", "verify"] {
        let other = tmp.path().join(command);
        let keys: &[&str] = if matches!(command, "check" | "remove") {
            &["k"]
        } else {
            &[]
        };
        let out = cmd(command, &other, keys, b"k\n");
        assert_eq!(code(&out), 2, "{command}");
        assert_stderr_contains(&out, "no engine");
        assert!(!other.join("MANIFEST").exists());
    }
}

#[test]
fn daily_tier_forgets_after_its_retention() {
    // Guards --now and tier expiry: 7d keeps day 6, forgets by day 8.
    let (_tmp, db) = temp_db();
    let db = db.to_str().unwrap();
    let out = run(&["create", db, "--tiers", "7d", "--now", DAY0], b"");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "tiers 7d");
    assert_eq!(code(&run(&["add", db, "--now", DAY0, "-"], b"key\n")), 0);
    let day6 = run(&["check", db, "key", "--now", "2026-11-08T12:00:00Z"], b"");
    assert_eq!(stdout(&day6), "key\tseen\n");
    assert_eq!(code(&day6), 0);
    let day8 = run(&["--now", "2026-11-10T12:00:00Z", "check", db, "key"], b"");
    assert_eq!(stdout(&day8), "key\tnew\n");
    assert_eq!(code(&day8), 1);
}

#[test]
fn within_is_answered_by_a_longer_tier() {
    // Guards --within: 20 days back on 7d,4w is answered by the weekly tier.
    let (_tmp, db) = temp_db();
    let db = db.to_str().unwrap();
    let out = run(&["--now", DAY0, "create", db, "--tiers", "7d,4w"], b"");
    assert_exit(&out, 0);
    run(&["--now", DAY0, "add", db], b"key\n");
    let day8 = "2026-11-10T12:00:00Z";
    let out = run(&["--now", day8, "check", db, "--within", "20d", "key"], b"");
    assert_eq!((code(&out), stdout(&out)), (0, "key\tseen\n".into()));
    let out = run(
        &["--now", day8, "check", db, "--within", "1d12h", "key"],
        b"",
    );
    assert_eq!((code(&out), stdout(&out)), (1, "key\tnew\n".into()));
    let out = run(
        &["--now", day8, "check", db, "--within", "400d", "key"],
        b"",
    );
    assert_eq!(code(&out), 2);
    assert_stderr_contains(&out, "longer than any tier");
}

#[test]
fn now_accepts_offsets_and_fractions() {
    // Guards the RFC 3339 parser: an offset moves the instant (23:30-01:00 is the next UTC day).
    let (_tmp, db) = temp_db();
    let db = db.to_str().unwrap();
    let now = "2026-11-02T23:30:00.250-01:00";
    let out = run(
        &[
            "--now",
            now,
            "create",
            db,
            "--tiers",
            "3d",
            "--items-per-day",
            "10",
        ],
        b"",
    );
    assert_exit(&out, 0);
    let out = run(&["--now", now, "stats", db, "--json"], b"");
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(stats["now"], 1_793_665_800);
    assert_eq!(stats["tiers"][0]["segments"][0]["window"], "20261103");
}

#[test]
fn check_exit_codes() {
    // Guards check's contract: 0 all seen, 1 any new, 2 on error.
    let (tmp, db) = temp_db();
    cmd("add", &db, &[], b"a\nb\n");
    assert_eq!(code(&cmd("check", &db, &["a", "b"], b"")), 0);
    let out = cmd("check", &db, &[], b"a\nc\n");
    assert_eq!((code(&out), stdout(&out)), (1, "a\tseen\nc\tnew\n".into()));
    assert_eq!(code(&cmd("check", &db, &["--within", "3x"], b"")), 2);
    let missing = tmp.path().join("missing");
    assert_eq!(code(&cmd("check", &missing, &["a"], b"")), 2);
}

#[test]
fn remove_on_a_bloom_engine_is_a_clear_error() {
    // Guards that remove on plain Bloom tiers fails with exit 2 and says why.
    let (_tmp, db) = temp_db();
    cmd("add", &db, &[], b"a\n");
    let out = cmd("remove", &db, &["a"], b"");
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(err.starts_with("timebloom: "), "{err}");
    assert!(err.contains("counting"), "{err}");
    assert_eq!(code(&cmd("check", &db, &["a"], b"")), 0);
}

#[test]
fn remove_on_a_counting_engine_works() {
    // Guards create --counting and remove: removed keys read as new again.
    let (_tmp, db) = temp_db();
    let out = cmd("create", &db, &["--tiers", "7d,4w", "--counting"], b"");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "7d:counting,4w:counting");
    cmd("add", &db, &[], b"a\nb\nc\n");
    let out = cmd("remove", &db, &[], b"a\nb\nnever-added\n");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "removed 2 of 3 keys\n");
    let out = cmd("check", &db, &["a", "c"], b"");
    assert_eq!(stdout(&out), "a\tnew\nc\tseen\n");
}

#[test]
fn stats_prints_a_table_and_json() {
    // Guards both stats formats; the JSON is the library's Stats, parsed back.
    let (_tmp, db) = temp_db();
    let out = cmd("create", &db, &["--now", DAY0, "--tiers", "7d,4w"], b"");
    assert_exit(&out, 0);
    run(&["--now", DAY0, "add", db.to_str().unwrap()], b"a\nb\nc\n");
    let table = cmd("stats", &db, &["--now", DAY0], b"");
    assert_exit(&table, 0);
    let text = stdout(&table);
    for want in [
        "tier 7d", "tier 4w", "bloom", "20261102", "2026W45", "est. fpr", "open",
    ] {
        assert!(text.contains(want), "{want:?} missing from\n{text}");
    }
    let json = cmd("stats", &db, &["--json", "--now", DAY0], b"");
    assert_eq!(code(&json), 0);
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["tiers"][0]["tier"], "7d");
    assert_eq!(v["tiers"][0]["kind"], "bloom");
    assert_eq!(v["tiers"][1]["tier"], "4w");
    assert_eq!(v["tiers"][0]["segments"][0]["window"], "20261102");
    assert_eq!(v["tiers"][0]["segments"][0]["estimated_items"], 3);
    assert_eq!(v["expected_items_per_day"], 1000);
}

#[test]
fn bad_flags_exit_2_and_create_nothing() {
    // Guards argument validation: bad tiers, rates, instants and durations never leave a directory.
    let (_tmp, db) = temp_db();
    let d = db.to_str().unwrap();
    let cases: &[&[&str]] = &[
        &["create", d, "--tiers", "7y"],
        &["create", d, "--tiers", "0d"],
        &["create", d, "--tiers", "7d,7d"],
        &["create", d, "--tiers", ""],
        &["create", d, "--fpr", "0"],
        &["create", d, "--fpr", "1.5"],
        &["create", d, "--fpr", "NaN"],
        &["create", d, "--items-per-day", "0"],
        &["create", d, "--utc-offset", "+25:00"],
        &["create", d, "--now", "yesterday"],
        &["create", d, "--now", "2026-02-30T00:00:00Z"],
        &["create", d, "--now", "2026-11-29T12:00:00"],
        &["create", d, "--now", "1969-12-31T23:59:59Z"],
        &["create", d, "--now", "2026-11-29T24:00:00Z"],
        &["filter-new", d, "--now", "2026-11-29T12:00:00+2:00"],
        &["add", d, "--fpr", "2"],
    ];
    for args in cases {
        let out = run(args, b"a\n");
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(!stderr(&out).is_empty(), "{args:?}");
        assert!(!db.exists(), "{args:?} created the directory");
    }
    let out = run(&["create", d, "--utc-offset", "-05:30", "--now", DAY0], b"");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "utc-05:30");
    let again = run(&["create", d], b"");
    assert_eq!(code(&again), 2);
    assert_stderr_contains(&again, "already exists");
}

#[test]
fn a_locked_directory_is_exit_2_naming_the_lock() {
    // Guards one-writer-at-a-time: the CLI reports another holder instead of waiting or corrupting;
    // readers are not writers and go on.
    let (_tmp, db) = temp_db();
    assert_eq!(code(&cmd("create", &db, &[], b"")), 0);
    let held = timebloom::Engine::open(&db).unwrap();
    // Read-only commands take no lock (review #7.2): they work beside a writer.
    for command in ["check", "stats", "verify"] {
        let out = cmd(command, &db, &[], b"a\n");
        assert!(code(&out) <= 1, "{command}: {}", stderr(&out));
    }
    // Nor is a dry run of filter-new, which records nothing (found in
    // review: it took the writer's lock).
    assert!(held.insert(b"seen").unwrap());
    let out = cmd("filter-new", &db, &["--dry-run"], b"seen\nnew\nnew\n");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "new\n");
    for command in ["add", "filter-new", "maintain"] {
        let out = cmd(command, &db, &[], b"a\n");
        assert_eq!(code(&out), 2, "{command}");
        let err = stderr(&out);
        assert!(
            err.contains("lock") || err.contains("another process"),
            "{command}: {err}"
        );
        assert!(out.stdout.is_empty(), "{command}");
    }
    held.close().unwrap();
    // A child another test spawned while `held` was open holds a copy of
    // its lock's descriptor until it execs: a moment, on a busy machine
    // perhaps more. A lock that lasts a second is a real one.
    let mut out = cmd("add", &db, &[], b"a\n");
    for _ in 0..100 {
        let err = stderr(&out);
        if code(&out) != 2 || !(err.contains("lock") || err.contains("another process")) {
            break;
        }
        thread::sleep(std::time::Duration::from_millis(10));
        out = cmd("add", &db, &[], b"a\n");
    }
    assert_exit(&out, 0);
}

#[test]
fn a_closed_output_pipe_ends_filter_new_quietly() {
    // Guards `filter-new | head`: EPIPE ends the run without a panic, and the engine stays usable.
    let (_tmp, db) = temp_db();
    let mut input = Vec::new();
    for i in 0..200_000 {
        writeln!(input, "https://example.com/page/{i}").unwrap();
    }
    let mut child = spawn_piped(Command::new(BIN).args([
        "filter-new",
        db.to_str().unwrap(),
        "--items-per-day",
        "200000",
    ]));
    // The command stops reading once its stdout closes.
    let writer = feed_stdin(&mut child, input);
    let mut stdout = child.stdout.take().unwrap();
    let mut first = [0u8; 100];
    stdout.read_exact(&mut first).unwrap();
    assert!(first.starts_with(b"https://example.com/page/0\n"));
    drop(stdout);
    let err = read_stderr(&mut child);
    let status = child.wait().unwrap();
    let _ = writer.join().unwrap();
    assert!(!err.contains("panicked"), "{err}");
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        assert!(
            status.success() || status.signal() == Some(13),
            "{status:?}: {err}"
        );
    }
    #[cfg(not(unix))]
    assert!(status.success(), "{status:?}: {err}");
    let out = cmd("check", &db, &["https://example.com/page/0"], b"");
    assert_exit(&out, 0);
}

/// A stdout pipe that another process set non-blocking (a parent such as
/// node shares it) answers "try again" when full. `filter-new` records a
/// batch before it prints it, so treating that answer as a failure left
/// keys recorded whose lines were never printed (found in review: 2,221 of
/// 20,000 lines printed, 4,096 keys recorded, exit 2). Every line comes
/// out now, behind a slow reader.
#[cfg(unix)]
#[test]
fn a_non_blocking_stdout_pipe_gets_every_line() {
    let (_tmp, db) = temp_db();
    let (mut read, write) = std::io::pipe().unwrap();
    let flags = rustix::fs::fcntl_getfl(&write).unwrap();
    rustix::fs::fcntl_setfl(&write, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    let mut input = Vec::new();
    for i in 0..20_000 {
        writeln!(input, "https://example.com/page/{i}").unwrap();
    }
    let mut child = filter_new_command(&db, &[])
        .stdin(Stdio::piped())
        .stdout(write)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let writer = feed_stdin(&mut child, input);
    // A slow reader: the pipe (64 KiB) fills long before this.
    thread::sleep(std::time::Duration::from_millis(500));
    let mut out = Vec::new();
    read.read_to_end(&mut out).unwrap();
    writer.join().unwrap().unwrap();
    let status = child.wait().unwrap();
    let err = read_stderr(&mut child);
    assert!(status.success(), "{status:?}: {err}");
    let lines = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
    assert_eq!(lines, 20_000, "{err}");
}

#[test]
fn help_and_usage_errors() {
    // Guards clap wiring: --help is exit 0, a missing argument or unknown command is exit 2.
    let out = run(&["--help"], b"");
    assert_eq!(code(&out), 0);
    assert!(stdout(&out).contains("filter-new"));
    assert_eq!(code(&run(&["add"], b"")), 2);
    assert_eq!(code(&run(&["frobnicate", "x"], b"")), 2);
    assert_eq!(code(&run(&[], b"")), 2);
}

#[test]
fn filter_new_stays_exact_when_filters_grow() {
    // Guards batching across chain growth: far more keys than planned must each be printed once and recorded.
    let (_tmp, db) = temp_db();
    let input: String = (0..5000).map(|i| format!("k{i}\n")).collect();
    let out = cmd(
        "filter-new",
        &db,
        &["--items-per-day", "10", "--tiers", "7d"],
        input.as_bytes(),
    );
    assert_exit(&out, 0);
    // Every printed line is an input line, in input order, printed once; a
    // few keys may be withheld as false positives (0.1% each at most).
    let printed: Vec<String> = stdout(&out).lines().map(str::to_owned).collect();
    let mut expected = (0..5000).map(|i| format!("k{i}"));
    for line in &printed {
        assert!(
            expected.any(|e| e == *line),
            "{line:?} out of order or not an input line"
        );
    }
    assert!(
        printed.len() >= 4990,
        "only {} of 5000 new keys printed",
        printed.len()
    );
    let out = cmd("check", &db, &[], input.as_bytes());
    assert_exit(&out, 0);
}

#[test]
fn stats_shows_saturated_counters_of_counting_tiers() {
    // Guards the counting-tier stats column: saturation is visible to operators.
    let (_tmp, db) = temp_db();
    assert_eq!(
        code(&cmd("create", &db, &["--tiers", "2d:counting"], b"")),
        0
    );
    assert_eq!(
        code(&cmd("add", &db, &[], "hot\n".repeat(20).as_bytes())),
        0
    );
    let out = cmd("stats", &db, &[], b"");
    assert_exit(&out, 0);
    let text = stdout(&out);
    assert!(text.contains("saturated"), "{text}");
    let json = cmd("stats", &db, &["--json"], b"");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert!(v["tiers"][0]["segments"][0]["saturated"].as_u64().unwrap() > 0);
}

/// `check`, `stats`, `verify` and `filter-new --dry-run`, each a process of
/// its own, beside a writer that stays open and moves day by day (rotating,
/// expiring, sealing, growing chains, checkpointing under `sync always`):
/// every key the writer acknowledged before a reader started is seen
/// while the writer still keeps it, and no reader fails or reports damage.
/// Bloom tiers, and a fingerprint table.
#[test]
fn read_only_commands_beside_a_rotating_writer_see_every_acknowledged_key() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::time::{Duration, UNIX_EPOCH};
    use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};
    const T0: u64 = 1_767_571_200; // 2026-01-05T00:00:00Z
    let noon = |d: u64| UNIX_EPOCH + Duration::from_secs(T0 + d * 86_400 + 12 * 3600);
    let rfc = |d: u64| {
        time::OffsetDateTime::from_unix_timestamp((T0 + d * 86_400 + 12 * 3600) as i64)
            .unwrap()
            .format(&time::format_description::well_known::Rfc3339)
            .unwrap()
    };
    for tiers in [
        vec![Tier::daily(3), Tier::weekly(2)],
        vec![Tier::fingerprint(3)],
    ] {
        // Whether the writer, on day `w`, has expired the keys of day `d`:
        // a reader asked about day `d` reads what the writer keeps (a table
        // is read as of its newest day, and the writer's sweep clears what
        // it no longer keeps; an expired window's files are deleted), so
        // a reader that a busy machine held up until then rightly finds
        // them new (docs/operations.md, "Read-only opens").
        let kept = tiers.clone();
        let expired = move |d: u64, w: u64| common::expired_by_writer_day(&kept, d, w);
        let label = format!("{tiers:?}");
        let (_tmp, db) = temp_db();
        let d = db.to_str().unwrap();
        let clock = ManualClock::new(noon(0));
        let config = timebloom::Config {
            tiers,
            expected_items_per_day: 100,
            sync: SyncPolicy::Always,
            ..timebloom::Config::default()
        };
        let w = Engine::create_with(&db, config, Options::default().clock(clock.clone())).unwrap();
        let acked = AtomicU64::new(u64::MAX);
        // The writer's day, set before its clock moves there.
        let moving = AtomicU64::new(0);
        let stop = AtomicBool::new(false);
        let mut rounds = 0;
        thread::scope(|s| {
            s.spawn(|| {
                for day in 0..12u64 {
                    moving.store(day, Ordering::SeqCst);
                    clock.set(noon(day));
                    let keys: Vec<Vec<u8>> = (0..300)
                        .map(|j| format!("k{day}-{j}").into_bytes())
                        .collect();
                    w.insert_batch(&keys).unwrap();
                    if day % 3 == 0 {
                        w.flush().unwrap();
                    }
                    acked.store(day, Ordering::SeqCst);
                    thread::sleep(Duration::from_millis(40));
                }
                stop.store(true, Ordering::SeqCst);
            });
            while !stop.load(Ordering::SeqCst) {
                let day = acked.load(Ordering::SeqCst);
                if day == u64::MAX {
                    thread::yield_now();
                    continue;
                }
                let now = rfc(day);
                let keys: String = (0..300).map(|j| format!("k{day}-{j}\n")).collect();
                let out = run(&["check", d, "--now", &now], keys.as_bytes());
                let gone = expired(day, moving.load(Ordering::SeqCst));
                match code(&out) {
                    1 if gone => assert_eq!(stderr(&out), ""),
                    c => assert_eq!(c, 0, "{label} day {day}: {}", stderr(&out)),
                }
                let out = run(
                    &["filter-new", d, "--dry-run", "--now", &now],
                    keys.as_bytes(),
                );
                let gone = expired(day, moving.load(Ordering::SeqCst));
                assert_exit(&out, 0);
                if !gone {
                    assert_eq!(stdout(&out), "", "{label} day {day}: new under --dry-run");
                }
                for command in ["stats", "verify"] {
                    let out = run(&[command, d, "--now", &now], b"");
                    assert_eq!(code(&out), 0, "{command} day {day}: {}", stderr(&out));
                }
                rounds += 1;
            }
        });
        w.close().unwrap();
        assert!(rounds > 0);
    }
}
