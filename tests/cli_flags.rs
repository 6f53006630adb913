//! Guards the command line's key flags through the real binary: URL
//! canonicalization, filter-new's anew-like flags, input files (several,
//! gzip, CRLF, no final newline), plan, completions and help examples.

mod cli_support;

use cli_support::*;

#[test]
fn canonical_merges_spellings_and_prints_the_original_line() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let input = b"HTTP://Example.COM:80/a\nhttp://example.com/a\nhttp://example.com/a#x\n\
                  https://example.com/?b=2&a=1\nhttps://example.com?a=1&b=2\nnot a url\nnot a url\n";
    let out = cmd("filter-new", &db, &["--canonical"], input);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "HTTP://Example.COM:80/a\nhttps://example.com/?b=2&a=1\nnot a url\n"
    );
    assert!(
        stderr(&out).contains("2 line(s) were not URLs (kept as they are)"),
        "{}",
        stderr(&out)
    );
    // Without --canonical the spellings are different keys.
    let out = cmd(
        "filter-new",
        &db,
        &[],
        b"HTTP://example.com/a\nhttp://example.com/a\n",
    );
    assert_eq!(stdout(&out), "HTTP://example.com/a\n");
    // check and remove canonicalize too.
    let out = cmd(
        "check",
        &db,
        &["--canonical", "http://EXAMPLE.com:80/a"],
        b"",
    );
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (0, "http://EXAMPLE.com:80/a\tseen\n")
    );
}

#[test]
fn canonical_strict_and_not_url_policies() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let input = b"https://www.example.com/a/?utm_source=x\nhttps://example.com/a\nmailto:x@y\n";
    let out = cmd(
        "filter-new",
        &db,
        &["--canonical-strict", "--not-url", "skip"],
        input,
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "https://www.example.com/a/?utm_source=x\n");
    assert!(
        stderr(&out).contains("1 line(s) were not URLs (skipped)"),
        "{}",
        stderr(&out)
    );
    // One rule at a time, and a user tracking parameter.
    let out = cmd(
        "filter-new",
        &db,
        &["--canonical-rules", "www", "--tracking-param", "ref"],
        b"http://www.example.org/p?ref=1\nhttp://example.org/p\nhttp://example.org/p/\n",
    );
    assert_eq!(
        stdout(&out),
        "http://www.example.org/p?ref=1\nhttp://example.org/p/\n"
    );
    // --not-url error names the line.
    let f = tmp.path().join("urls.txt");
    std::fs::write(&f, "http://a.example/\nnope\n").unwrap();
    let out = cmd(
        "filter-new",
        &db,
        &["--canonical", "--not-url", "error", f.to_str().unwrap()],
        b"",
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("urls.txt:2: not a URL"),
        "{}",
        stderr(&out)
    );
    assert_eq!(
        stdout(&out),
        "http://a.example/\n",
        "the line before the error is printed"
    );
}

#[test]
fn filter_new_quiet_dry_run_duplicates_trim_and_stats() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let out = cmd("filter-new", &db, &["-q"], b"a\nb\n");
    assert_eq!((code(&out), stdout(&out).as_str()), (0, ""));
    // Dry run: prints what is new once, records nothing.
    let out = cmd("filter-new", &db, &["--dry-run"], b"a\nc\nc\nd\n");
    assert_eq!(stdout(&out), "c\nd\n");
    let out = cmd("filter-new", &db, &["--dry-run"], b"c\n");
    assert_eq!(stdout(&out), "c\n", "dry run recorded nothing");
    // Duplicates: the repeats instead.
    let out = cmd("filter-new", &db, &["--duplicates"], b"a\nx\nx\nb\n");
    assert_eq!(stdout(&out), "a\nx\nb\n");
    // Trim: keys compare without surrounding whitespace, lines print as read.
    let out = cmd("filter-new", &db, &["-t"], b"  y \ny\n\t a\n");
    assert_eq!(stdout(&out), "  y \n");
    // Stats: one line on stderr.
    let out = cmd("filter-new", &db, &["--stats"], b"p\np\nq\na\n");
    assert_eq!(stdout(&out), "p\nq\n");
    let err = stderr(&out);
    assert!(
        err.contains("read 4 lines: 2 new, 2 repeated, 0 skipped, 0 empty,")
            && err.contains("lines/s"),
        "{err}"
    );
    // Empty lines are read, skipped and counted (blank ones too under -t).
    let out = cmd("filter-new", &db, &["--stats"], b"\nr\n\nr\n");
    assert_eq!(stdout(&out), "r\n");
    let err = stderr(&out);
    assert!(
        err.contains("read 4 lines: 1 new, 1 repeated, 0 skipped, 2 empty,"),
        "{err}"
    );
    let out = cmd("filter-new", &db, &["--stats", "-t"], b" \ns\n\t\n");
    assert_eq!(stdout(&out), "s\n");
    let err = stderr(&out);
    assert!(
        err.contains("read 3 lines: 1 new, 0 repeated, 0 skipped, 2 empty,"),
        "{err}"
    );
    // Dry run on a directory that holds no engine creates nothing.
    let none = tmp.path().join("none");
    let out = cmd("filter-new", &none, &["--dry-run"], b"a\n");
    assert_eq!(code(&out), 2);
    assert!(!none.exists());
}

/// `filter-new --within`: prints the lines not seen within the horizon
/// (due for a recrawl) and records them again, and only them; `--dry-run`
/// with it records nothing; a horizon past every tier is refused.
#[test]
fn filter_new_within_prints_what_is_due_again() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let dbs = db.to_str().unwrap();
    let at = |now: &str, flags: &[&str], input: &[u8]| {
        let mut args = vec!["filter-new", dbs, "--now", now, "--within", "5d"];
        args.extend_from_slice(flags);
        args.extend_from_slice(SMALL);
        run(&args, input)
    };
    let out = at("2026-11-02T12:00:00Z", &[], b"a\nb\na\n");
    assert_eq!((code(&out), stdout(&out).as_str()), (0, "a\nb\n"));
    // Three days later: both seen within 5 days (and not recorded again);
    // c is new.
    let out = at("2026-11-05T12:00:00Z", &[], b"a\nc\n");
    assert_eq!(stdout(&out), "c\n");
    // Six days after a was recorded: due, the sight on day 3 did not push
    // it back.
    let out = at("2026-11-08T12:00:00Z", &[], b"a\n");
    assert_eq!(stdout(&out), "a\n");
    // Day 9: b (day 0) and c (day 3) are due, a (day 6) is not; d is new.
    let out = at("2026-11-11T12:00:00Z", &["--dry-run"], b"a\nb\nd\n");
    assert_eq!(stdout(&out), "b\nd\n");
    let out = at("2026-11-11T12:00:00Z", &[], b"a\nb\nc\nd\nb\n");
    assert_eq!(stdout(&out), "b\nc\nd\n");
    let out = at("2026-11-11T13:00:00Z", &[], b"a\nb\nc\nd\n");
    assert_eq!(stdout(&out), "", "recorded by the run before");
    // Without --within, every key ever seen is a repeat.
    let out = cmd("filter-new", &db, &[], b"a\n");
    assert_eq!(stdout(&out), "");
    let out = run(
        &[
            "filter-new",
            dbs,
            "--now",
            "2026-11-11T14:00:00Z",
            "--within",
            "400d",
        ],
        b"z\n",
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("horizon"), "{}", stderr(&out));
}

#[test]
fn several_inputs_gzip_crlf_and_no_final_newline() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let plain = tmp.path().join("one.txt");
    let gz = tmp.path().join("two.txt.gz");
    std::fs::write(&plain, b"a\r\nb\r\n\r\nc").unwrap();
    std::fs::write(&gz, gzip(b"c\nd\r\ne")).unwrap();
    let (p, g) = (plain.to_str().unwrap(), gz.to_str().unwrap());
    let out = cmd("filter-new", &db, &[p, "-", g], b"s\na");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert_eq!(stdout(&out), "a\nb\nc\ns\nd\ne\n");
    let add = cmd("add", &db, &[g], b"");
    assert_eq!(stdout(&add), "added 0 new of 3 keys\n");
    // A .gz file that is not gzip is refused before anything is read.
    let fake = tmp.path().join("fake.gz");
    std::fs::write(&fake, b"plain text\n").unwrap();
    let out = cmd("add", &db, &[fake.to_str().unwrap()], b"");
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("fake.gz: not gzip data"),
        "{}",
        stderr(&out)
    );
    // A truncated gzip stream is an error naming the file.
    let whole = gzip(&b"line\n".repeat(10_000));
    let cut = tmp.path().join("cut.gz");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let out = cmd("add", &db, &[cut.to_str().unwrap()], b"");
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("cut.gz: read failed"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn engine_directory_missing_or_not_an_engine() {
    let tmp = tempfile::tempdir().unwrap();
    let missing = tmp.path().join("missing");
    for c in ["check", "stats", "verify", "remove"] {
        let out = cmd(
            c,
            &missing,
            &["k"][..usize::from(c == "check" || c == "remove")],
            b"",
        );
        assert_eq!(code(&out), 2, "{c}");
        assert!(stderr(&out).contains("missing"), "{c}: {}", stderr(&out));
        assert!(!missing.exists(), "{c} created the directory");
    }
    let other = tmp.path().join("other");
    std::fs::create_dir(&other).unwrap();
    std::fs::write(other.join("notes.txt"), "mine").unwrap();
    for c in ["check", "stats", "verify"] {
        let out = cmd(c, &other, &[], b"k\n");
        assert_eq!(code(&out), 2, "{c}");
        assert!(stderr(&out).contains("other"), "{c}: {}", stderr(&out));
    }
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = cmd("filter-new", &file, &[], b"k\n");
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("a-file"), "{}", stderr(&out));
}

#[test]
fn plan_prints_the_sizing_that_create_prints() {
    let args = [
        "--items-per-day",
        "100000",
        "--fpr",
        "0.01",
        "--tiers",
        "7d,4w",
    ];
    let mut plan_args = vec!["plan"];
    plan_args.extend_from_slice(&args);
    let plan = run(&plan_args, b"");
    assert_eq!(code(&plan), 0, "{}", stderr(&plan));
    let table = stdout(&plan);
    for want in [
        "7d",
        "4w",
        "bits/key",
        "probes",
        "per window",
        "coarseness",
        "total",
    ] {
        assert!(table.contains(want), "{want}: {table}");
    }
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let mut create = vec!["create", db.to_str().unwrap()];
    create.extend_from_slice(&args);
    let created = run(&create, b"");
    assert_eq!(code(&created), 0, "{}", stderr(&created));
    assert_eq!(stdout(&created), table);
    let json = run(&["plan", "--json", "--fpr", "0.01"], b"");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
    assert_eq!(v["tiers"].as_array().unwrap().len(), 3);
    let bad = run(&["plan", "--items-per-day", "0"], b"");
    assert_eq!(code(&bad), 2);
}

#[test]
fn completions_and_help_examples() {
    for shell in ["bash", "zsh", "fish"] {
        let out = run(&["completions", shell], b"");
        assert_eq!(code(&out), 0, "{shell}");
        assert!(stdout(&out).contains("filter-new"), "{shell}");
    }
    assert_eq!(code(&run(&["completions", "tcsh"], b"")), 2);
    for c in [
        "create",
        "plan",
        "add",
        "filter-new",
        "check",
        "remove",
        "stats",
        "verify",
        "completions",
    ] {
        let out = run(&[c, "--help"], b"");
        let help = stdout(&out);
        let last = help.trim_end().lines().last().unwrap_or("");
        assert!(help.contains("Example"), "{c}: {help}");
        assert!(last.contains("timebloom"), "{c} help ends with: {last}");
    }
}

/// Rates print in their shortest form: an fpr of 1e-300 is `1e-300` in
/// the refusal (not a decimal of 300 zeros), and an empty fingerprint
/// table's bits per key is `-` (nothing counted), not its size in bits.
#[test]
fn rates_and_an_empty_tables_bits_per_key_print_short() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let db = db.to_str().unwrap();
    let tiny = run(
        &[
            "create",
            db,
            "--tiers",
            "365d:fingerprint",
            "--fpr",
            "1e-300",
        ],
        b"",
    );
    assert_eq!(code(&tiny), 2, "{}", stderr(&tiny));
    let err = stderr(&tiny);
    assert!(err.contains("fpr 1e-300:"), "{err}");
    assert!(err.len() < 300, "{err}");
    let made = run(&["create", db, "--tiers", "365d:fingerprint"], b"");
    assert_eq!(code(&made), 0, "{}", stderr(&made));
    let stats = run(&["stats", db], b"");
    assert_eq!(code(&stats), 0, "{}", stderr(&stats));
    let text = stdout(&stats);
    let row = text
        .lines()
        .find(|l| l.trim_start().starts_with("table"))
        .unwrap();
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cols[cols.len() - 2], "-", "{text}");
}

/// A window count too large for a number says so, as a count one below
/// that limit does (`retention above 10000 windows`); it said the tier
/// "must start with a window count", which it does.
#[test]
fn a_window_count_past_any_number_is_named_too_large() {
    for tiers in ["4294967296d", "99999999999999999999d", "4294967296x6h"] {
        let out = run(&["plan", "--tiers", tiers], b"");
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains("retention above 10000 windows") && !err.contains("must start with"),
            "{tiers}: {err}"
        );
    }
}

/// `--degraded` is for commands that open an engine whose files may be
/// damaged. `create`, `plan` and `completions` open none, yet took it and
/// exited 0, though their `--help` describes it as if it applied; they
/// refuse it, naming the command.
#[test]
fn degraded_is_refused_where_no_engine_is_opened() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("new.tb");
    let dir = dir.to_str().unwrap();
    for args in [
        &["create", dir, "--items-per-day", "10", "--degraded"][..],
        &["plan", "--items-per-day", "10", "--degraded"],
        &["completions", "bash", "--degraded"],
    ] {
        let out = run(args, b"");
        assert_eq!(code(&out), 2, "{args:?}");
        assert!(
            stderr(&out).contains(&format!("--degraded means nothing to `{}`", args[0])),
            "{args:?}: {}",
            stderr(&out)
        );
    }
    assert!(!tmp.path().join("new.tb").exists(), "create made nothing");
}

/// A dry run opens the engine read-only: it syncs nothing and moves no
/// clock, so `--sync` and `--max-clock-jump` would do nothing there. They
/// were taken in silence; they are refused, naming both flags.
#[test]
fn dry_run_refuses_the_flags_of_writing() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let out = cmd("filter-new", &db, &["--items-per-day", "10"], b"a\n");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for (flag, value) in [("--sync", "always"), ("--max-clock-jump", "3d")] {
        let out = cmd("filter-new", &db, &["--dry-run", flag, value], b"a\nb\n");
        assert_eq!(code(&out), 2, "{flag}: {}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("--dry-run") && err.contains(flag) && err.contains("cannot be used with"),
            "{flag}: {err}"
        );
        assert_eq!(stdout(&out), "", "{flag}");
    }
    // Without them the dry run answers.
    let out = cmd("filter-new", &db, &["--dry-run"], b"a\nb\n");
    assert_eq!((code(&out), stdout(&out).as_str()), (0, "b\n"));
}
