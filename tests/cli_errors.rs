//! The errors a user of the command line meets: each names what is wrong
//! and the file concerned, in words rather than a dump of a Rust value,
//! with the exit status docs/cli.md gives.

mod cli_support;

use cli_support::*;

/// A segment file that holds another window's (or sub-filter's) filter,
/// such as one copied over another, is named as corrupt with both
/// identities in words (the window and sub-filter), not as a Rust `Debug`
/// dump of an internal struct.
#[test]
fn a_segment_of_another_window_is_named_in_words() {
    let (_tmp, db) = temp_db();
    let keys: String = (0..3000)
        .map(|i| format!("https://a.example/{i}\n"))
        .collect();
    assert_eq!(code(&cmd("add", &db, SMALL, keys.as_bytes())), 0);
    let seg = db.join("seg");
    let (first, second) = (seg.join("d-20261102-0.seg"), seg.join("d-20261102-1.seg"));
    assert!(second.exists(), "a second sub-filter was made");
    std::fs::copy(&second, &first).unwrap();
    for (command, args, status) in [
        ("check", &["https://a.example/1"][..], 2),
        ("verify", &[], 1),
    ] {
        let out = cmd(command, &db, args, b"");
        assert_exit(&out, status);
        let err = stderr(&out);
        assert!(
            err.contains("d-20261102-0.seg: corrupt: header names sub-filter 1 of day window 20261102, the manifest expects sub-filter 0 of day window 20261102"),
            "{command}: {err}"
        );
        assert!(!err.contains("Identity {"), "{command}: {err}");
    }
}

/// `timebloom --help` gives the exit statuses, and `verify --help` its
/// own: `verify` exits 1 when it finds damage (docs/cli.md, "Exit
/// status"), which both left out, so that a script written from them
/// took `verify`'s 1 for an error of the run.
#[test]
fn help_gives_the_exit_status_of_verify() {
    for args in [&["--help"][..], &["verify", "--help"]] {
        let out = run(args, b"");
        assert_exit(&out, 0);
        let text = stdout(&out).replace('\n', " ");
        assert!(
            text.contains("`verify` found damage") || text.contains("exit 1 when it finds damage"),
            "{args:?}: {text}"
        );
    }
}

/// `--help` and `--version` whose stdout fails (a full disk) end with
/// exit 2 and `stdout: write failed`, as every other output does; they
/// exited 0 having printed nothing. A closed pipe stays quiet.
#[test]
fn help_on_a_failing_stdout_is_an_error() {
    for args in [&["--help"][..], &["--version"], &["check", "--help"]] {
        let full = std::fs::File::create("/dev/full").unwrap();
        let out = std::process::Command::new(BIN)
            .args(args)
            .stdout(full)
            .output()
            .unwrap();
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "stdout: write failed");
    }
    let mut child = std::process::Command::new(BIN)
        .arg("--help")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert_exit(&out, 0);
    assert_eq!(stderr(&out), "");
}

/// `maintain` refusing a clock jump names the engine directory, as every
/// other writing command's refusal does (docs/cli.md: every error names
/// the path); it began "the clock jumped ..." with no directory, where
/// a cron job maintaining several engines left the reader to guess.
#[test]
fn maintain_names_the_engine_whose_clock_jump_it_refuses() {
    let (_tmp, db) = temp_db();
    let d = db.to_str().unwrap();
    let then = ["--now", "2001-03-04T12:00:00Z"];
    let create = [&["add", d][..], &then, &["--tiers", "3d"], SMALL].concat();
    assert_exit(&run(&create, b"k\n"), 0);
    let out = run(&["maintain", d], b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, &format!("timebloom: {d}: the clock jumped from"));
}

/// `create` names the directory in the engine's errors that do not: a
/// window past year 9999 (UTC+14 on the last day) said only "window
/// unavailable: window N of tier 7d has no file name".
#[test]
fn create_names_the_engine_in_its_errors() {
    let (_tmp, db) = temp_db();
    let d = db.to_str().unwrap();
    let args = [
        "create",
        d,
        "--tiers",
        "7d",
        "--utc-offset",
        "+14:00",
        "--now",
        "9999-12-31T23:00:00Z",
    ];
    let out = run(&args, b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, &format!("timebloom: {d}: window unavailable"));
}

/// Stdin that is a directory (`add DIR < some-dir`) is refused before
/// anything is created, as a directory given as a file of keys is
/// (docs/cli.md: input problems, before anything is created); the engine
/// was created first and the read then failed with "Is a directory".
#[test]
fn a_directory_on_stdin_is_refused_before_anything_is_created() {
    let (tmp, db) = temp_db();
    for command in ["add", "filter-new"] {
        let stdin = std::fs::File::open(tmp.path()).unwrap();
        let out = std::process::Command::new(BIN)
            .args([command, db.to_str().unwrap(), "--now", DAY0])
            .args(SMALL)
            .stdin(stdin)
            .output()
            .unwrap();
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "stdin: is a directory, not a file of keys");
        assert!(!db.exists(), "{command} created the engine");
    }
}

/// A regular file given where the engine directory goes is named as a
/// file, not only as a directory without a manifest.
#[test]
fn a_file_given_as_the_engine_is_named_as_a_file() {
    let (_tmp, db) = temp_db();
    std::fs::write(&db, b"https://a.example/1\n").unwrap();
    for (command, args) in [
        ("check", &["https://a.example/1"][..]),
        ("stats", &[]),
        ("verify", &[]),
        ("maintain", &[]),
    ] {
        let out = cmd(command, &db, args, b"");
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains("a file, not an engine directory"),
            "{command}: {err}"
        );
    }
}

/// A horizon longer than the tiers keep is given in seconds and in days,
/// hours and minutes, the longest one kept too.
#[test]
fn a_horizon_too_long_is_given_in_days_too() {
    let (_tmp, db) = temp_db();
    assert_eq!(
        code(&cmd(
            "add",
            &db,
            &["--tiers", "7d"],
            b"https://a.example/1\n"
        )),
        0
    );
    let out = cmd(
        "check",
        &db,
        &["--within", "8d", "https://a.example/1"],
        b"",
    );
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("horizon of 691200s (8d) is longer than any tier keeps"),
        "{err}"
    );
    // Six whole days back and today's half (DAY0 is at noon).
    assert!(err.contains("(at most 561600s now, 6d 12h)"), "{err}");
}
