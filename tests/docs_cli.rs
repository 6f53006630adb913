//! Statements of docs/cli.md and docs/canonicalization.md that a test can
//! check cheaply: the examples of the rule tables, and the documented
//! behaviour of the binary.

mod cli_support;

use cli_support::*;
use timebloom::canonical::{canonicalize, Canonicalizer};

/// canonicalization.md, "The rules, in order": each row's example.
#[test]
fn the_rule_table_examples_give_what_the_table_shows() {
    let rows: &[(&str, Option<&str>)] = &[
        (" http://exa\tmple.com/a ", Some("http://example.com/a")),
        ("example.com/a", None),
        ("mailto:x@y", None),
        (
            "HTTP://Bücher.Example./",
            Some("http://xn--bcher-kva.example/"),
        ),
        ("https://u:p@example.com:443/", Some("https://example.com/")),
        (
            "http://example.com/a/./b/../c;jsessionid=F0",
            Some("http://example.com/a/c"),
        ),
        (
            "http://example.com/%7euser/a%2fb/%zz",
            Some("http://example.com/~user/a%2Fb/%25zz"),
        ),
        (
            "http://example.com/?b=2&&a=1&c",
            Some("http://example.com/?a=1&b=2&c"),
        ),
        (
            "http://example.com/?PHPSESSID=abc&x=1",
            Some("http://example.com/?x=1"),
        ),
        ("http://example.com/a#top", Some("http://example.com/a")),
    ];
    for (input, want) in rows {
        let got = canonicalize(input);
        match want {
            Some(w) => assert_eq!(got.as_deref(), Ok(*w), "{input:?}"),
            None => assert!(got.is_err(), "{input:?}: {got:?}"),
        }
    }
    let tracking = Canonicalizer::new().drop_tracking(true);
    assert_eq!(
        tracking
            .canonicalize("http://example.com/?utm_source=x&id=7")
            .unwrap(),
        "http://example.com/?id=7"
    );
    let www = Canonicalizer::new().drop_www(true);
    assert_eq!(
        www.canonicalize("https://www.example.com/").unwrap(),
        "https://example.com/"
    );
    assert_eq!(
        www.canonicalize("https://www.com/").unwrap(),
        "https://www.com/"
    );
    let slash = Canonicalizer::new().drop_trailing_slash(true);
    assert_eq!(
        slash.canonicalize("http://example.com/a//").unwrap(),
        "http://example.com/a"
    );
    // "Why we differ": `[` and `]` after the host are written escaped,
    // as `|`, `^`, `{`, `}` and the backquote are.
    for (a, b) in [
        ("http://example.com/x[1]", "http://example.com/x%5B1%5D"),
        ("http://example.com/?q=[1]", "http://example.com/?q=%5B1%5D"),
        (
            "http://example.com/|^{}`",
            "http://example.com/%7C%5E%7B%7D%60",
        ),
    ] {
        assert_eq!(canonicalize(a), canonicalize(b), "{a} vs {b}");
    }
    // "What stays apart on purpose".
    let plus = canonicalize("http://example.com/?q=a+b").unwrap();
    let space = canonicalize("http://example.com/?q=a%20b").unwrap();
    let escaped = canonicalize("http://example.com/?q=a%2Bb").unwrap();
    assert!(plus != space && space != escaped && plus != escaped);
    assert_ne!(
        canonicalize("http://example.com/?a").unwrap(),
        canonicalize("http://example.com/?a=").unwrap()
    );
    assert_eq!(
        canonicalize("http://example.com/a?").unwrap(),
        "http://example.com/a"
    );
    // Rule 3: a trailing dot that would leave a number stays.
    assert!(canonicalize("http://0x19../")
        .unwrap()
        .starts_with("http://0x19."));
    let own = Canonicalizer::new()
        .tracking_param("réf")
        .tracking_param("ref%5Fid");
    assert_eq!(
        own.canonicalize("http://example.com/?r%C3%A9f=1&ref_id=2&a=1")
            .unwrap(),
        "http://example.com/?a=1"
    );
}

/// cli.md, "Redis", **Arguments**: `--prefix` "needs `--redis`". `create`
/// and `stats` took it with a directory and went on without a word, so
/// `create crawl.tb --prefix crawl` made a directory engine that the
/// prefix meant nothing to.
#[test]
fn prefix_without_redis_is_refused_by_every_command() {
    let (_tmp, db) = temp_db();
    assert_exit(&cmd("add", &db, &[], b"a\n"), 0);
    let other = db.with_file_name("other");
    for (command, dir, rest) in [
        ("create", &other, &[][..]),
        ("stats", &db, &[][..]),
        ("add", &db, &[][..]),
        ("filter-new", &db, &[][..]),
        ("check", &db, &["a"][..]),
    ] {
        let mut args = vec!["--prefix", "crawl"];
        args.extend_from_slice(rest);
        let out = cmd(command, dir, &args, b"");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "--redis");
    }
    assert!(!other.exists(), "create made an engine");
}

/// The examples of the `--help` texts in docs/cli.md (those without
/// `--redis`), in the order the doc shows them, each command line taken
/// from the doc itself.
fn help_examples() -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let mut examples = Vec::new();
    let mut in_examples = false;
    for line in doc.lines() {
        if line == "Example:" || line == "Examples:" {
            in_examples = true;
        } else if !line.starts_with("  ") {
            in_examples = false;
        } else if in_examples && !line.contains("--redis") {
            examples.push(line.trim().to_string());
        }
    }
    examples
}

/// `line` (one example) as the arguments of `timebloom`: what comes
/// before `timebloom` (`crawl |`) and after a `|`, `>` or `&&` (the shell's
/// part) left out, single quotes removed.
fn example_args(line: &str) -> Vec<String> {
    let start = line.find("timebloom ").expect("an example runs timebloom") + "timebloom ".len();
    let end = [" | ", " > ", " && "]
        .iter()
        .filter_map(|s| line[start..].find(s))
        .min()
        .map_or(line.len(), |e| start + e);
    line[start..end]
        .split_whitespace()
        .map(|w| w.trim_matches('\'').to_string())
        .collect()
}

/// cli.md, "Commands": every example of the `--help` texts runs as
/// written (at a fixed `--now`, and with 1000 keys a day where `create`
/// asks for millions, to keep the engine small), in a directory holding
/// the files they name; `remove`'s needs an engine it can remove from.
#[test]
fn the_help_examples_run_as_written() {
    let examples = help_examples();
    assert_eq!(examples.len(), 12, "{examples:#?}");
    let tmp = tempfile::tempdir().unwrap();
    let urls = b"https://example.com/a\nHTTPS://Example.com:443/b\nhttps://example.com/c\n";
    std::fs::write(tmp.path().join("seen-urls.txt.gz"), gzip(urls)).unwrap();
    std::fs::write(
        tmp.path().join("today.txt.gz"),
        gzip(b"https://example.com/a\nnew\n"),
    )
    .unwrap();
    let counting = tempfile::tempdir().unwrap();
    let run_in = |dir: &std::path::Path, args: &[String], input: &[u8]| {
        let mut child = spawn_piped(std::process::Command::new(BIN).current_dir(dir).args(args));
        let writer = feed_stdin(&mut child, input.to_vec());
        let out = child.wait_with_output().unwrap();
        let _ = writer.join().unwrap();
        out
    };
    for line in &examples {
        let mut args = example_args(line);
        if args[0] == "create" {
            let n = args.iter().position(|a| a == "--items-per-day").unwrap();
            args[n + 1] = "1000".into();
        }
        if !args.contains(&"--now".to_string()) {
            args.extend(["--now".to_string(), DAY0.to_string()]);
        }
        let (dir, input): (&std::path::Path, &[u8]) = match args[0].as_str() {
            "filter-new" => (
                tmp.path(),
                b"https://example.com/b\nhttps://example.com/d\n",
            ),
            "remove" => {
                let setup = [
                    "add",
                    "crawl.tb",
                    "--counting",
                    "--items-per-day",
                    "1000",
                    "--now",
                    DAY0,
                ]
                .map(String::from);
                assert_exit(
                    &run_in(counting.path(), &setup, b"https://example.com/retry-me\n"),
                    0,
                );
                (counting.path(), b"")
            }
            _ => (tmp.path(), b""),
        };
        let out = run_in(dir, &args, input);
        assert_exit(&out, 0);
        let text = stdout(&out);
        match args[0].as_str() {
            "add" => assert_eq!(text, "added 3 new of 3 keys\n", "{line}"),
            "filter-new" if args.contains(&"--canonical".to_string()) => {
                assert_eq!(text, "https://example.com/d\n", "{line}")
            }
            "filter-new" if args.contains(&"--dry-run".to_string()) => {
                assert_eq!(text, "new\n", "{line}")
            }
            "check" => assert_eq!(text, "https://example.com/a\tseen\n", "{line}"),
            "remove" => assert_eq!(text, "removed 1 of 1 keys\n", "{line}"),
            "stats" => {
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert!(v["tiers"][0]["segments"].is_array(), "{line}");
            }
            "verify" => assert_eq!(text, "ok\n", "{line}"),
            _ => {}
        }
    }
}

/// cli.md, "Exit status" and "Messages": the rows about input and keys,
/// for an engine directory, with the words the table shows.
#[test]
fn the_messages_table_rows_for_inputs_and_keys() {
    let (tmp, db) = temp_db();
    let path = |name: &str| tmp.path().join(name).to_str().unwrap().to_string();
    // Input problems, before anything is created.
    std::fs::write(path("bad.gz"), b"not gzip").unwrap();
    std::fs::write(path("empty.gz"), b"").unwrap();
    let full = gzip(b"a\nb\nc\n");
    std::fs::write(path("cut.gz"), &full[..full.len() - 10]).unwrap();
    for (file, want) in [
        (path("missing"), "missing: open failed: "),
        (
            tmp.path().to_str().unwrap().to_string(),
            ": is a directory, not a file of keys",
        ),
        (
            path("bad.gz"),
            "bad.gz: not gzip data (the name ends in .gz",
        ),
        (
            path("empty.gz"),
            "empty.gz: not gzip data (the name ends in .gz",
        ),
    ] {
        let out = cmd("add", &db, &[&file], b"");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, want);
        assert!(!db.exists(), "{file}: the engine was created");
    }
    let out = run(&["add", "-", "--now", DAY0], b"a\n");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "timebloom: -: stdin is not an engine directory; ");
    // Mid-stream: the lines before it were used.
    let out = cmd("add", &db, &[&path("cut.gz")], b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "cut.gz: read failed at line ");
    assert_stderr_contains(&out, "timebloom: created new engine at ");
    // Long lines.
    let out = cmd("add", &db, &["--max-line-bytes", "3"], b"ab\nabcd\n");
    assert_exit(&out, 2);
    assert_stderr_contains(
        &out,
        "stdin:2: a line of 4 bytes is longer than the limit of 3 \
         (--max-line-bytes; --long-lines skip skips such lines)",
    );
    assert_eq!(stdout(&out), "added 1 new of 1 keys\n");
    let out = cmd(
        "add",
        &db,
        &["--max-line-bytes", "3", "--long-lines", "skip"],
        b"abcd\n",
    );
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "add: skipped 1 line(s) longer than 3 bytes");
    // Key arguments.
    let out = cmd("check", &db, &["ab", ""], b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "argument 2: an empty key (");
    assert_eq!(stdout(&out), "");
    let out = cmd(
        "check",
        &db,
        &["--canonical", "--not-url", "skip", "x"],
        b"",
    );
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "argument 1: not a URL: ");
    let out = cmd(
        "check",
        &db,
        &["--canonical", "--not-url", "error"],
        b"http://a/\nx\n",
    );
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "stdin:2: not a URL: ");
    assert_stderr_contains(&out, "(--not-url keep or skip goes on)");
    for (what, word) in [("keep", "kept as they are"), ("skip", "skipped")] {
        let out = cmd("check", &db, &["--canonical", "--not-url", what], b"x\n");
        assert_stderr_contains(&out, &format!("check: 1 line(s) were not URLs ({word})"));
    }
    // `check`'s answers and exit status; a key holding a tab.
    let out = cmd("check", &db, &["ab", "x\ty"], b"");
    assert_exit(&out, 1);
    assert_eq!(stdout(&out), "ab\tseen\nx\ty\tnew\n");
    assert_exit(&cmd("check", &db, &["ab"], b""), 0);
    // `filter-new --stats`, and lines printed as read with `\n` endings.
    let out = cmd("filter-new", &db, &["--stats"], b"ab\r\nn1\nn1\n\nlast");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "n1\nlast\n");
    assert_stderr_contains(
        &out,
        "filter-new: read 5 lines: 2 new, 2 repeated, 0 skipped, 1 empty, ",
    );
    // `--degraded` where no engine is opened; `remove` on Bloom tiers.
    for args in [&["plan"][..], &["completions", "bash"]] {
        let mut args = args.to_vec();
        args.push("--degraded");
        let out = run(&args, b"");
        assert_exit(&out, 2);
        assert_stderr_contains(
            &out,
            &format!("--degraded means nothing to `{}`: ", args[0]),
        );
    }
    let out = cmd("remove", &db, &["ab"], b"");
    assert_exit(&out, 2);
    assert_stderr_contains(
        &out,
        "(create the engine with --counting, or with fingerprint tiers only)",
    );
}

/// cli.md, "Messages": `-` where the engine directory goes. The hint that
/// followed named `filter-new DIR -` whatever the command, also for
/// `check`, `stats` or `verify`, where `-` reads no stdin.
#[test]
fn stdin_as_the_engine_directory_names_no_other_command() {
    for args in [
        &["check", "-", "x"][..],
        &["stats", "-"],
        &["verify", "-"],
        &["add", "-"],
    ] {
        let out = run(args, b"a\n");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "timebloom: -: stdin is not an engine directory; ");
        assert_stderr_contains(&out, "./- for a directory named -");
        assert!(
            !stderr(&out).contains("filter-new"),
            "{args:?}: {}",
            stderr(&out)
        );
    }
}
