//! Runs every program in `examples/` with small inputs and checks what it
//! prints. `cargo test` builds the examples before it runs the tests; a
//! test run limited to this file (`cargo test --test examples`) builds them
//! with `cargo build --examples` only when they are missing, so after
//! changing an example run `cargo build --examples` (with `--release` for a
//! release test run) first, or this file tests the example's old binary.

use std::path::PathBuf;
use std::process::{Command, Output};
use std::sync::Once;

/// The compiled example `name`, built if `cargo test` did not build it
/// (an existing binary is used as it is, even if older than its source).
fn example(name: &str) -> PathBuf {
    static BUILD: Once = Once::new();
    // The test binary is target/<profile>/deps/examples-<hash>.
    let exe = std::env::current_exe().expect("test binary path");
    let dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target profile directory")
        .join("examples");
    let path = dir.join(name);
    if !path.exists() {
        BUILD.call_once(|| {
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
            let profile = dir.parent().and_then(|p| p.file_name()).expect("profile");
            let mut cmd = Command::new(cargo);
            cmd.args(["build", "--examples"]);
            if profile == "release" {
                cmd.arg("--release");
            }
            let status = cmd.status().expect("run cargo build --examples");
            assert!(status.success(), "cargo build --examples failed");
        });
    }
    assert!(path.exists(), "{} was not built", path.display());
    path
}

/// Runs example `name` with `args`; asserts it exits as `code` without a panic.
fn run(name: &str, args: &[&str], code: i32) -> String {
    let out: Output = Command::new(example(name))
        .args(args)
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{name} panicked: {stderr}");
    assert_eq!(
        out.status.code(),
        Some(code),
        "{name} {args:?}\nstdout: {stdout}\nstderr: {stderr}"
    );
    if code != 0 {
        return stderr.into_owned();
    }
    stdout
}

/// The number right after `before` in `text`.
fn number_after(text: &str, before: &str) -> u64 {
    let at = text
        .find(before)
        .unwrap_or_else(|| panic!("{before:?} in {text}"))
        + before.len();
    let digits: String = text[at..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits
        .parse()
        .unwrap_or_else(|_| panic!("a number after {before:?} in {text}"))
}

#[test]
fn crawler_records_successes_and_recrawls_after_the_horizon() {
    for mode in [&[][..], &["--counting"][..]] {
        let args = [&["--urls", "500", "--threads", "3"][..], mode].concat();
        let out = run("crawler", &args, 0);
        assert!(out.contains("sync always)"), "{out}");
        // Every URL is in the frontier twice: the first crawl fetches each
        // URL whose fetch succeeds once, and the failures stay unrecorded.
        let fetched = number_after(&out, "day 0, first crawl: fetched ");
        assert!(fetched > 350 && fetched < 500, "{out}");
        // The same frontier again fetches only URLs that never succeeded.
        let again = number_after(
            &out,
            "(only URLs that never succeeded are fetched): fetched ",
        );
        let failing = number_after(&out, "day 0: ");
        assert!(again <= 2 * failing, "{out}");
        // After the horizon every URL is due, and still known to `contains`.
        let skipped = number_after(&out, "recrawl after 3 days: fetched ");
        let seen = out
            .split("recrawl after 3 days:")
            .nth(1)
            .map(|rest| number_after(rest, "skipped as seen "))
            .unwrap();
        assert!(skipped > 350 && seen == 0, "{out}");
        assert!(
            number_after(&out, "contains() still knows ") >= 490,
            "{out}"
        );
    }
    let err = run("crawler", &["--urls", "many"], 2);
    assert!(err.contains("--urls"), "{err}");
    let out = run("crawler", &["--urls", "200", "--sync", "none"], 0);
    assert!(out.contains("sync none)"), "{out}");
    let err = run("crawler", &["--sync", "sometimes"], 2);
    assert!(
        err.contains("--sync \"sometimes\"") && err.contains("sync policy"),
        "{err}"
    );
}

#[test]
fn shortlinks_never_mint_twice_and_guard_the_database() {
    let out = run("shortlinks", &["--links", "300", "--probes", "3000"], 0);
    assert!(
        out.contains(
            "created 300 links for 300 URLs; 60 of 60 repeated URLs got their existing code"
        ),
        "{out}"
    );
    assert!(out.contains("resolved 300 of 300 known codes"), "{out}");
    // Unknown codes almost never reach the database (p = 0.001).
    let reached = number_after(&out, "3000 unknown codes: 0 resolved, ");
    assert!(reached <= 15, "{out}");
    assert!(
        out.contains("deleted 30 links: 30 now 404, with 0 database reads"),
        "{out}"
    );
    assert!(
        out.contains("day 29: the filter still holds 270 codes"),
        "{out}"
    );
    assert!(
        out.contains("day 30: the links' window aged out; 0 of 300 old codes resolve"),
        "{out}"
    );
    let err = run("shortlinks", &["--days", "1"], 2);
    assert!(err.contains("--days"), "{err}");
}

#[test]
fn warmup_loads_a_log_and_reports_stats() {
    let out = run("warmup", &["--lines", "1200"], 0);
    assert!(
        out.contains("loaded 1200 lines: 1140 new keys, 60 seen before, 0 outside"),
        "{out}"
    );
    assert!(out.contains("12m"), "{out}");

    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log");
    std::fs::write(
        &log,
        "2026-11-01T08:00:00Z\thttps://a.example/1\nnot a line\n\
         1700000000\thttps://a.example/old\n2026-11-01T09:00:00Z\thttps://a.example/1\n",
    )
    .unwrap();
    let engine = dir.path().join("e.tb");
    let args = [
        "--log",
        log.to_str().unwrap(),
        "--dir",
        engine.to_str().unwrap(),
        "--now",
        "2026-11-02T00:00:00Z",
    ];
    let out = run("warmup", &args, 0);
    assert!(out.contains("loaded 4 lines: 1 new keys, 1 seen before, 1 outside every tier's windows, 1 malformed"), "{out}");
    // A second load opens the same engine: everything is known.
    let out = run("warmup", &args, 0);
    assert!(out.contains("0 new keys, 2 seen before"), "{out}");
    let err = run("warmup", &["--log", "/nonexistent/log"], 2);
    assert!(err.contains("/nonexistent/log"), "{err}");
    // A log that cannot be opened creates no engine.
    let fresh = dir.path().join("fresh.tb");
    let err = run(
        "warmup",
        &[
            "--log",
            "/nonexistent/log",
            "--dir",
            fresh.to_str().unwrap(),
        ],
        2,
    );
    assert!(err.contains("/nonexistent/log"), "{err}");
    assert!(!fresh.exists(), "an engine was created for a missing log");
}

#[test]
fn sizing_prints_the_table_and_a_plan() {
    let out = run("sizing", &[], 0);
    assert_eq!(out.lines().count(), 8, "{out}");
    assert!(out.contains("| 1e9 | 0.1% |"), "{out}");
    let out = run(
        "sizing",
        &["--items-per-day", "1000000", "--fpr", "0.001"],
        0,
    );
    // docs/operations.md: 2.8 MiB a daily window, 91.6 MiB a monthly one.
    assert!(out.contains("2.8 MiB"), "{out}");
    assert!(out.contains("91.6 MiB"), "{out}");
    let err = run("sizing", &["--items-per-day", "10", "--fpr", "3"], 2);
    assert!(err.contains("fpr"), "{err}");
}

/// Without `--dir`, warmup's engine is in a temporary directory removed
/// at exit: it told the user to run `timebloom stats` on that directory,
/// which no longer exists when they read the advice.
#[test]
fn warmup_names_only_an_engine_that_outlives_it() {
    let out = run("warmup", &["--lines", "100"], 0);
    if let Some(at) = out.find("`timebloom stats ") {
        let rest = &out[at + "`timebloom stats ".len()..];
        let path = &rest[..rest.find('`').expect("closing backquote")];
        assert!(
            std::path::Path::new(path).exists(),
            "warmup names {path}, removed at its exit: {out}"
        );
    }
    assert!(out.contains("--dir"), "{out}");
}

/// Progress reaches 100% (and, on a terminal, ends its bar's line) even
/// when the log's last line is skipped: malformed, or blank.
#[test]
fn warmup_progress_ends_at_100_percent_after_a_skipped_last_line() {
    let dir = tempfile::tempdir().unwrap();
    for (name, tail) in [("malformed", "not a line\n"), ("blank", "\n")] {
        let log = dir.path().join(name);
        std::fs::write(
            &log,
            format!("2026-11-01T08:00:00Z\thttps://a.example/1\n{tail}"),
        )
        .unwrap();
        let out = Command::new(example("warmup"))
            .args([
                "--log",
                log.to_str().unwrap(),
                "--now",
                "2026-11-02T00:00:00Z",
            ])
            .output()
            .expect("run the example");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "{name}: {stderr}");
        assert!(stderr.contains("warmup: 100%"), "{name}: {stderr}");
    }
}

/// Without `--log`, warmup generates a log; with `--dir crawl.tb` it wrote
/// it to `crawl.log` next to the engine, replacing the file the guide's
/// own command loads (`--log crawl.log --dir crawl.tb`).
#[test]
fn warmup_generated_log_leaves_the_users_files_alone() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("crawl.log");
    let mine = "2026-11-01T08:00:00Z\thttps://my.example/kept\n";
    std::fs::write(&log, mine).unwrap();
    let engine = dir.path().join("crawl.tb");
    run(
        "warmup",
        &["--dir", engine.to_str().unwrap(), "--lines", "10"],
        0,
    );
    assert_eq!(std::fs::read_to_string(&log).unwrap(), mine);
}

/// `--links` beyond half of u64 overflowed `2 * links` (a panic in a debug
/// build) instead of a clean refusal.
#[test]
fn shortlinks_refuses_a_huge_link_count_without_a_panic() {
    let err = run("shortlinks", &["--links", "18446744073709551615"], 2);
    assert!(err.contains("configuration"), "{err}");
}

/// `--now` in Unix seconds past what a `SystemTime` holds panicked
/// ("overflow when adding duration to instant").
#[test]
fn warmup_refuses_an_instant_out_of_range_without_a_panic() {
    let err = run(
        "warmup",
        &["--lines", "10", "--now", "18446744073709551615"],
        2,
    );
    assert!(err.contains("--now"), "{err}");
}

/// An example that exits on an error (or on a closed stdout) removes the
/// temporary directory it made for its engine, as a normal exit does.
#[test]
fn examples_remove_their_temporary_directory_on_an_error_exit() {
    let tmp = tempfile::tempdir().unwrap();
    for (name, args) in [
        ("crawler", &["--urls", "50", "--fpr", "2"][..]),
        ("shortlinks", &["--links", "50", "--fpr", "1"][..]),
        ("warmup", &["--lines", "10", "--items-per-day", "0"][..]),
    ] {
        let out = Command::new(example(name))
            .args(args)
            .env("TMPDIR", tmp.path())
            .output()
            .expect("run the example");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name}: {stderr}");
        let left: Vec<_> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert!(left.is_empty(), "{name} left {left:?}: {stderr}");
    }
}

/// A directory given as `--log` opens but cannot be read: warmup created
/// the engine first, then failed on the first read.
#[test]
fn warmup_creates_no_engine_for_a_directory_given_as_log() {
    let dir = tempfile::tempdir().unwrap();
    let engine = dir.path().join("e.tb");
    let err = run(
        "warmup",
        &[
            "--log",
            dir.path().to_str().unwrap(),
            "--dir",
            engine.to_str().unwrap(),
        ],
        2,
    );
    assert!(err.contains(dir.path().to_str().unwrap()), "{err}");
    assert!(!engine.exists(), "an engine was created: {err}");
}

/// The crawler's recrawl step advances the clock `--recrawl-days` + 1 days
/// and says the URLs are due again; from 7 days on the horizon is answered
/// from weekly or monthly windows, which count a URL up to a window longer,
/// and "recrawl after 10 days" fetched 0 URLs, skipping all as seen.
#[test]
fn crawler_recrawl_fetches_or_refuses_the_horizon() {
    for days in ["6", "7", "10", "40"] {
        let out = Command::new(example("crawler"))
            .args(["--urls", "50", "--fail-every", "0", "--recrawl-days", days])
            .output()
            .expect("run the example");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("panicked"), "{stderr}");
        match out.status.code() {
            Some(0) => {
                let label = format!("recrawl after {days} days: fetched ");
                assert_eq!(number_after(&stdout, &label), 50, "{stdout}");
            }
            Some(2) => assert!(stderr.contains("--recrawl-days"), "{stderr}"),
            other => panic!("exit {other:?}: {stderr}"),
        }
    }
}

/// An option may come from `TB_NAME` in the environment; a bad value there
/// was reported as `--urls "abc"`, an argument the user never gave.
#[test]
fn examples_name_the_environment_variable_a_bad_value_came_from() {
    let out = Command::new(example("crawler"))
        .env("TB_URLS", "abc")
        .output()
        .expect("run the example");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("TB_URLS \"abc\""), "{stderr}");
}

/// A tier list the plan refuses printed the table's header rows on stdout
/// before the error: a half table under exit status 2.
#[test]
fn sizing_prints_no_partial_table_for_refused_tiers() {
    let out = Command::new(example("sizing"))
        .args(["--tiers", "0d"])
        .output()
        .expect("run the example");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("0d"), "{stderr}");
    assert_eq!(stdout, "", "{stderr}");
}
