//! The command line against an engine in Redis (`--redis URL [--prefix P]`)
//! through the real binary, each test with its own `redis-server` on a free
//! loopback port (see `tests/redis_support`): the same output and exit
//! codes as with a directory, two concurrent `filter-new` processes, and
//! the errors (a configuration mismatch, an unreachable URL, flags that
//! have no meaning on Redis).
//!
//! Run: `cargo test --release --test cli_redis`.

mod cli_support;

use cli_support::{code, run, stderr};
#[cfg(feature = "redis")]
use cli_support::{stdout, BIN};

/// The instant `t` in RFC 3339 (what `--now` takes).
#[cfg(feature = "redis")]
fn rfc(t: std::time::SystemTime) -> String {
    let secs = t
        .duration_since(std::time::UNIX_EPOCH)
        .expect("after 1970")
        .as_secs();
    time::OffsetDateTime::from_unix_timestamp(secs as i64)
        .expect("a valid instant")
        .format(&time::format_description::well_known::Rfc3339)
        .expect("RFC 3339")
}

#[cfg(feature = "redis")]
mod redis_support;

#[cfg(feature = "redis")]
use redis_support::{day, prefix, require, url, Server};

/// `--redis URL --prefix P`: the engine named `pre` in `server`.
#[cfg(feature = "redis")]
fn in_redis(server: &Server, pre: &str) -> Vec<String> {
    let p = ["--redis", &server.url(), "--prefix", pre];
    p.iter().map(|s| s.to_string()).collect()
}

/// `command TARGET.. --now NOW rest..`: TARGET is a directory or
/// `--redis URL --prefix P`.
#[cfg(feature = "redis")]
fn at_day(
    command: &str,
    target: &[String],
    n: u64,
    rest: &[&str],
    input: &[u8],
) -> std::process::Output {
    let now = rfc(day(n));
    let mut args: Vec<&str> = vec![command];
    args.extend(target.iter().map(String::as_str));
    args.extend_from_slice(&["--now", &now]);
    args.extend_from_slice(rest);
    run(&args, input)
}

/// One session of every shared command; returns what each step printed on
/// stdout, its exit status, and the last stderr line of the steps whose
/// stderr is part of the output (`--stats`, errors).
#[cfg(feature = "redis")]
fn session(target: &[String]) -> Vec<(String, i32, String)> {
    let mut steps = Vec::new();
    let mut step = |out: std::process::Output, keep_stderr: bool| {
        let err = stderr(&out);
        let last = err.lines().last().unwrap_or("").to_string();
        // The rate of --stats differs from run to run.
        let last = match last.rsplit_once(", ") {
            Some((head, rate)) if rate.ends_with("lines/s") => head.to_string(),
            _ => last,
        };
        steps.push((
            stdout(&out),
            code(&out),
            if keep_stderr { last } else { String::new() },
        ));
    };
    let sizing = ["--tiers", "7d,4w", "--items-per-day", "20000"];
    step(at_day("create", target, 0, &sizing, b""), false);
    // Order across batches (4096 lines each), repeats dropped, --canonical.
    let mut input = String::new();
    for i in (0..10_000u32).rev() {
        input.push_str(&format!("https://example.com/{i}\n"));
        if i % 7 == 0 {
            input.push_str("HTTPS://EXAMPLE.com:443/9999\n");
        }
    }
    step(
        at_day("filter-new", target, 0, &["--canonical"], input.as_bytes()),
        false,
    );
    let mixed = b"https://example.com/1\nfresh-a\nhttps://example.com/2\nfresh-a\n";
    step(
        at_day("filter-new", target, 0, &["--duplicates"], mixed),
        false,
    );
    let dry = b"fresh-b\nx-dry\nfresh-b\nhttps://example.com/3\n";
    step(at_day("filter-new", target, 0, &["--dry-run"], dry), false);
    step(
        at_day(
            "filter-new",
            target,
            1,
            &["--quiet", "--stats"],
            b"fresh-b\nhttps://example.com/1\n",
        ),
        true,
    );
    step(at_day("add", target, 1, &[], b"x\ny\nx\nfresh-a\n"), false);
    // Line limits: a long line skipped, or an error after the lines before it.
    let long = b"short-1\nthis line is too long\nshort-2\n";
    let limit = ["--max-line-bytes", "10"];
    step(
        at_day(
            "filter-new",
            target,
            1,
            &[&limit[..], &["--long-lines", "skip"]].concat(),
            long,
        ),
        true,
    );
    step(
        at_day(
            "filter-new",
            target,
            1,
            &limit,
            b"short-3\nthis line is too long\n",
        ),
        true,
    );
    // check: exit 0 when all were seen, 1 when any was new; --within and
    // --now move the engine clock.
    step(at_day("check", target, 1, &["x", "fresh-a"], b""), false);
    step(at_day("check", target, 1, &["x", "never"], b""), false);
    step(
        at_day(
            "check",
            target,
            2,
            &["--within", "1d"],
            b"x\nhttps://example.com/5\n",
        ),
        false,
    );
    step(at_day("check", target, 9, &["x"], b""), false);
    step(
        at_day("check", target, 9, &["--within", "2d", "x"], b""),
        false,
    );
    step(at_day("check", target, 40, &["x"], b""), false);
    // filter-new --within (check never moved the engine past day 9): x and
    // fresh-b, last seen on day 1, are due again.
    let within = ["--within", "2d"];
    let due = b"x\nfresh-b\nnew-9\nx\n";
    step(at_day("filter-new", target, 9, &within, due), false);
    step(
        at_day("filter-new", target, 9, &within, b"x\nnew-9\n"),
        false,
    );
    steps
}

#[cfg(feature = "redis")]
#[test]
fn every_shared_command_prints_what_it_prints_with_a_directory() {
    if !require("every_shared_command_prints_what_it_prints_with_a_directory") {
        return;
    }
    let server = Server::start();
    let tmp = tempfile::tempdir().unwrap();
    let dir = vec![tmp.path().join("db").to_str().unwrap().to_string()];
    let redis = in_redis(&server, &prefix("session"));
    let with_dir = session(&dir);
    let with_redis = session(&redis);
    let names = [
        "create",
        "filter-new --canonical",
        "filter-new --duplicates",
        "filter-new --dry-run",
        "filter-new --quiet --stats",
        "add",
        "filter-new --long-lines skip",
        "filter-new long line error",
        "check seen",
        "check new",
        "check --within",
        "check day 9",
        "check --within day 9",
        "check day 40",
        "filter-new --within day 9",
        "filter-new --within day 9, again",
    ];
    assert_eq!(with_redis.len(), names.len());
    // `create` prints the plan of where the windows are kept: files with a
    // header page, or one string per shard (blocks rounded up per shard);
    // the same tiers, windows, keys and rates.
    let columns = |text: &str| -> Vec<String> {
        (text.lines())
            .map(|l| {
                let cells: Vec<&str> = l.split_whitespace().collect();
                // A tier's row (sizes are two cells each): all but bits
                // per key and bytes; the header and the total's tail whole.
                match cells.len() {
                    12 => [&cells[..5], &cells[6..7], &cells[11..]].concat().join(" "),
                    _ => l.split(" before growth").nth(1).unwrap_or(l).to_string(),
                }
            })
            .collect()
    };
    assert_eq!(
        columns(&with_dir[0].0),
        columns(&with_redis[0].0),
        "create: directory versus Redis"
    );
    assert_eq!(with_dir[0].1, with_redis[0].1);
    let shared = names.iter().zip(&with_dir).zip(&with_redis).skip(1);
    for ((name, d), r) in shared {
        assert_eq!(d, r, "{name}: directory versus Redis");
    }
    // And what they printed is right, not just alike.
    let out = |i: usize| (with_redis[i].0.as_str(), with_redis[i].1);
    assert!(out(0).0.contains("tier"), "create prints the plan");
    let mut want = String::new();
    for i in (0..10_000u32).rev() {
        want.push_str(&format!("https://example.com/{i}\n"));
    }
    assert_eq!(out(1), (want.as_str(), 0));
    // --duplicates: the lines seen before and the repeat within the input.
    assert_eq!(
        out(2),
        ("https://example.com/1\nhttps://example.com/2\nfresh-a\n", 0)
    );
    assert_eq!(out(3), ("fresh-b\nx-dry\n", 0));
    // --dry-run recorded nothing: fresh-b is new here.
    assert_eq!(out(4), ("", 0));
    assert_eq!(
        with_redis[4].2,
        "timebloom: filter-new: read 2 lines: 1 new, 1 repeated, 0 skipped, 0 empty"
    );
    assert_eq!(out(5), ("added 2 new of 4 keys\n", 0));
    assert_eq!(out(6), ("short-1\nshort-2\n", 0));
    assert!(with_redis[6]
        .2
        .contains("skipped 1 line(s) longer than 10 bytes"));
    assert_eq!(out(7), ("short-3\n", 2));
    assert!(with_redis[7]
        .2
        .contains(":2: a line of 21 bytes is longer than the limit of 10"));
    assert_eq!(out(8), ("x\tseen\nfresh-a\tseen\n", 0));
    assert_eq!(out(9), ("x\tseen\nnever\tnew\n", 1));
    assert_eq!(out(10), ("x\tseen\nhttps://example.com/5\tnew\n", 1));
    assert_eq!(out(11), ("x\tseen\n", 0));
    assert_eq!(out(12), ("x\tnew\n", 1));
    assert_eq!(out(13), ("x\tnew\n", 1));
    assert_eq!(out(14), ("x\nfresh-b\nnew-9\n", 0));
    assert_eq!(out(15), ("", 0));
}

#[cfg(feature = "redis")]
#[test]
fn stats_reads_the_engine_in_redis() {
    if !require("stats_reads_the_engine_in_redis") {
        return;
    }
    let server = Server::start();
    let target = in_redis(&server, &prefix("stats"));
    let sizing = ["--tiers", "7d", "--items-per-day", "1000"];
    let created = at_day("create", &target, 0, &sizing, b"");
    assert_eq!(code(&created), 0, "{}", stderr(&created));
    assert!(
        stderr(&created).contains(&format!(
            "created engine at {} (prefix {}) (tiers 7d, 1000 keys/day",
            server.url(),
            prefix("stats")
        )),
        "{}",
        stderr(&created)
    );
    // The plan printed is the one kept in Redis, not on disk.
    let plan = stdout(&created);
    assert!(
        plan.contains("in Redis strings") && !plan.contains("on disk"),
        "{plan}"
    );
    let keys: String = (0..500).map(|i| format!("k{i}\n")).collect();
    let added = at_day("add", &target, 0, &[], keys.as_bytes());
    assert_eq!(stdout(&added), "added 500 new of 500 keys\n");
    let text = at_day("stats", &target, 0, &[], b"");
    assert_eq!(code(&text), 0, "{}", stderr(&text));
    let text = stdout(&text);
    assert!(
        text.starts_with(&format!(
            "engine {} (prefix {})  at {}",
            server.url(),
            prefix("stats"),
            rfc(day(0))
        )),
        "{text}"
    );
    assert!(text.contains("tier 7d  bloom  7 windows of 1d"), "{text}");
    let json = at_day("stats", &target, 0, &["--json"], b"");
    let v: serde_json::Value = serde_json::from_slice(&json.stdout).expect("stats --json");
    let windows = v["tiers"][0]["segments"].as_array().expect("segments");
    assert_eq!(windows.len(), 1, "{v}");
    let est = windows[0]["estimated_items"]
        .as_u64()
        .expect("estimated_items");
    assert!((450..=550).contains(&est), "estimated {est} of 500 keys");
    // Bits per key as with a directory: the bytes per estimated key.
    let bytes = windows[0]["bytes"].as_u64().expect("bytes");
    let bits = windows[0]["bits_per_key"].as_f64().expect("bits_per_key");
    let want = (bytes * 8) as f64 / est as f64;
    assert!(
        (bits - want).abs() < 1e-9,
        "bits_per_key {bits}, want {want}"
    );
}

#[cfg(feature = "redis")]
#[test]
fn two_concurrent_filter_new_print_each_key_once_in_total() {
    use std::collections::HashMap;
    use std::io::Write;
    use std::process::{Command, Stdio};

    if !require("two_concurrent_filter_new_print_each_key_once_in_total") {
        return;
    }
    let server = Server::start();
    let now = rfc(day(0));
    let pre = prefix("race");
    // Overlapping halves, one of them reversed, several batches each; both
    // processes also race to create the engine.
    let line = |i: u64| {
        let mut l = url(0, i);
        l.push(b'\n');
        l
    };
    let a: Vec<u8> = (0..12_000).flat_map(line).collect();
    let b: Vec<u8> = (6_000..18_000).rev().flat_map(line).collect();
    let children: Vec<_> = [a, b]
        .into_iter()
        .map(|input| {
            let mut child = Command::new(BIN)
                .args(["filter-new", "--redis", &server.url(), "--prefix", &pre])
                .args([
                    "--now",
                    &now,
                    "--items-per-day",
                    "100000",
                    "--fpr",
                    "0.000001",
                ])
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn timebloom");
            let mut stdin = child.stdin.take().expect("stdin");
            let writer = std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            });
            (child, writer)
        })
        .collect();
    let mut printed: HashMap<Vec<u8>, usize> = HashMap::new();
    for (child, writer) in children {
        let out = child.wait_with_output().expect("wait for timebloom");
        writer.join().expect("writer");
        assert_eq!(code(&out), 0, "{}", stderr(&out));
        for l in out.stdout.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
            *printed.entry(l.to_vec()).or_default() += 1;
        }
    }
    let twice: Vec<_> = printed.iter().filter(|(_, &n)| n > 1).collect();
    assert!(twice.is_empty(), "{} keys printed twice", twice.len());
    for i in 0..18_000 {
        let key = url(0, i);
        assert!(
            printed.contains_key(&key),
            "key {i} ({}) printed by neither process",
            String::from_utf8_lossy(&key)
        );
    }
    assert_eq!(printed.len(), 18_000);
}

#[cfg(feature = "redis")]
#[test]
fn a_configuration_other_than_the_engines_is_an_error() {
    if !require("a_configuration_other_than_the_engines_is_an_error") {
        return;
    }
    let server = Server::start();
    let pre = prefix("mismatch");
    let target = in_redis(&server, &pre);
    let small = ["--tiers", "7d", "--items-per-day", "1000"];
    assert_eq!(code(&at_day("create", &target, 0, &small, b"")), 0);
    // The same flags, or none: the engine as it is.
    let out = at_day("add", &target, 0, &small, b"a\n");
    assert_eq!(
        (code(&out), stdout(&out).as_str()),
        (0, "added 1 new of 1 keys\n")
    );
    let out = at_day("filter-new", &target, 0, &[], b"a\nb\n");
    assert_eq!((code(&out), stdout(&out).as_str()), (0, "b\n"));
    // Other flags: an error naming the URL, the prefix and both configurations.
    for command in ["add", "filter-new"] {
        let out = at_day(command, &target, 0, &["--tiers", "4w"], b"c\n");
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{command}: {err}");
        assert_eq!(stdout(&out), "", "{command}");
        assert!(
            err.contains(&format!(
                "{} (prefix {pre}): the engine in Redis has tiers 7d",
                server.url()
            )) && err.contains("the configuration flags ask for tiers 4w")
                && err.contains("must match"),
            "{command}: {err}"
        );
    }
    // Nothing was recorded by the refused runs.
    let out = at_day("check", &target, 0, &["c"], b"");
    assert_eq!((code(&out), stdout(&out).as_str()), (1, "c\tnew\n"));
    // create on an existing engine.
    let out = at_day("create", &target, 0, &small, b"");
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains("exists in Redis already"),
        "{}",
        stderr(&out)
    );
    // check, stats and filter-new --dry-run create nothing.
    let other = in_redis(&server, &prefix("absent"));
    for (command, rest) in [
        ("check", &["a"][..]),
        ("stats", &[]),
        ("filter-new", &["--dry-run"]),
    ] {
        let out = at_day(command, &other, 0, rest, b"a\n");
        assert_eq!(code(&out), 2, "{command}");
        assert!(
            stderr(&out).contains("no timebloom engine in Redis"),
            "{command}: {}",
            stderr(&out)
        );
    }
}

#[cfg(feature = "redis")]
#[test]
fn flags_without_meaning_on_redis_are_refused_by_name() {
    if !require("flags_without_meaning_on_redis_are_refused_by_name") {
        return;
    }
    let server = Server::start();
    let url = server.url();
    let r = ["--redis", url.as_str()];
    let cases: [(&[&str], &str); 8] = [
        (
            &["add", "--sync", "always"],
            "--sync is not available with --redis",
        ),
        (
            &["create", "--counting"],
            "--counting is not available with --redis",
        ),
        (
            &["filter-new", "--degraded"],
            "--degraded is not available with --redis",
        ),
        (
            &["add", "--max-clock-jump", "1d"],
            "--max-clock-jump is not available",
        ),
        (&["remove", "a"], "`remove` is not available with --redis"),
        (&["verify"], "`verify` is not available with --redis"),
        (&["maintain"], "`maintain` is not available with --redis"),
        (
            &["stats", "--degraded"],
            "--degraded is not available with --redis",
        ),
    ];
    for (args, want) in cases {
        let mut all = args.to_vec();
        all.extend_from_slice(&r);
        let out = run(&all, b"");
        assert_eq!(code(&out), 2, "{all:?}");
        assert!(
            stderr(&out).contains(&format!("{url}: {want}")),
            "{all:?}: {}",
            stderr(&out)
        );
    }
    // Nothing was created by the refused commands.
    assert_eq!(server.cli(&["DBSIZE"]).trim(), "0");
    // An engine directory and --redis together.
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let db = db.to_str().unwrap();
    assert_eq!(
        code(&run(&["create", db, "--items-per-day", "1000"], b"")),
        0
    );
    for command in ["add", "filter-new", "check"] {
        let out = run(&[command, db, "--redis", &url], b"a\n");
        assert_eq!(code(&out), 2, "{command}");
        assert!(
            stderr(&out).contains("an engine directory and --redis"),
            "{command}: {}",
            stderr(&out)
        );
    }
    for command in ["create", "stats"] {
        let out = run(&[command, db, "--redis", &url], b"");
        assert_eq!(code(&out), 2, "{command}");
        assert!(
            stderr(&out).contains("cannot be used with"),
            "{}",
            stderr(&out)
        );
    }
    // --prefix needs --redis; one of DIR and --redis is needed.
    let out = run(&["add", db, "--prefix", "p"], b"");
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--redis <URL>"), "{}", stderr(&out));
    let out = run(&["stats"], b"");
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("--redis <URL>"), "{}", stderr(&out));
}

/// A configuration whose window would not fit a Redis string is refused
/// at `create` with advice the command line can follow: the CLI makes 16
/// shards and has no flag for more, and the refusal said only "use more
/// shards".
#[cfg(feature = "redis")]
#[test]
fn a_window_over_redis_string_limit_is_refused_with_advice_the_cli_can_follow() {
    if !require("a_window_over_redis_string_limit_is_refused_with_advice_the_cli_can_follow") {
        return;
    }
    let server = Server::start();
    let target = in_redis(&server, &prefix("huge"));
    let sizing = ["--tiers", "7d,12m", "--items-per-day", "1000000000"];
    let out = at_day("create", &target, 0, &sizing, b"");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("512 MiB") && err.contains("lower expected_items_per_day or raise fpr"),
        "{err}"
    );
    assert_eq!(server.cli(&["DBSIZE"]).trim(), "0");
}

#[cfg(feature = "redis")]
#[test]
fn an_unreachable_url_is_an_error_naming_it_without_its_password() {
    if !require("an_unreachable_url_is_an_error_naming_it_without_its_password") {
        return;
    }
    // A loopback port nobody listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let url = format!("redis://crawler:s3cret@127.0.0.1:{port}");
    let out = run(
        &["filter-new", "--redis", &url, "--prefix", "crawl"],
        b"a\nb\n",
    );
    let err = stderr(&out);
    assert_eq!(code(&out), 2, "{err}");
    assert_eq!(stdout(&out), "");
    assert!(
        err.contains(&format!(
            "redis://crawler:***@127.0.0.1:{port} (prefix crawl): "
        )),
        "{err}"
    );
    assert!(err.contains("failed"), "{err}");
    assert!(!err.contains("s3cret"), "the password shows: {err}");
}

/// `--now` far in the past: the windows written are not dropped at once
/// (Redis keeps every string written at least an hour past its own time),
/// so a `check` at the same instant finds the keys, and the strings carry
/// a TTL of about an hour.
#[cfg(feature = "redis")]
#[test]
fn now_in_the_past_writes_windows_kept_an_hour() {
    if !require("now_in_the_past_writes_windows_kept_an_hour") {
        return;
    }
    let server = Server::start();
    let pre = prefix("cli-past");
    let target = in_redis(&server, &pre);
    let past = "2020-09-13T12:00:00Z";
    let mut args: Vec<&str> = vec!["add"];
    args.extend(target.iter().map(String::as_str));
    args.extend_from_slice(&["--now", past, "--tiers", "1d", "--items-per-day", "1000"]);
    let out = run(&args, b"https://example.com/a\nhttps://example.com/b\n");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut args: Vec<&str> = vec!["check"];
    args.extend(target.iter().map(String::as_str));
    args.extend_from_slice(&[
        "--now",
        past,
        "https://example.com/a",
        "https://example.com/b",
    ]);
    let out = run(&args, b"");
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let keys = server.cli(&["KEYS", &format!("{pre}:*:d:*")]);
    let key = keys.lines().next().expect("a filter string");
    let ttl: i64 = server.cli(&["TTL", key]).trim().parse().expect("a TTL");
    assert!((3000..=3600).contains(&ttl), "TTL {ttl}");
}

#[cfg(not(feature = "redis"))]
#[test]
fn without_the_redis_feature_redis_is_refused() {
    let out = run(
        &["add", "--redis", "redis://u:pw@127.0.0.1:6379", "keys.txt"],
        b"",
    );
    assert_eq!(code(&out), 2);
    assert!(
        stderr(&out).contains(
            "--redis redis://u:***@127.0.0.1:6379: this build has no Redis support (feature redis)"
        ),
        "{}",
        stderr(&out)
    );
}

/// Without the `redis` feature the help of every command that lists
/// `--redis` says that this build refuses it, rather than offering a flag
/// that can only fail.
#[cfg(not(feature = "redis"))]
#[test]
fn without_the_redis_feature_the_help_says_redis_is_refused() {
    for command in ["create", "add", "filter-new", "check", "stats"] {
        for help in ["-h", "--help"] {
            let out = run(&[command, help], b"");
            assert_eq!(code(&out), 0, "{command} {help}: {}", stderr(&out));
            let text = cli_support::stdout(&out);
            assert!(text.contains("--redis <URL>"), "{command} {help}: {text}");
            assert!(
                text.contains("this build has no Redis support (feature redis)"),
                "{command} {help}: {text}"
            );
        }
    }
}

/// `filter-new --within` with a horizon that the engine it would create
/// does not keep is refused before the engine is made in Redis, as with a
/// directory: the refused command left a new engine under the prefix.
#[cfg(feature = "redis")]
#[test]
fn a_refused_horizon_creates_no_engine_in_redis() {
    if !require("a_refused_horizon_creates_no_engine_in_redis") {
        return;
    }
    let server = Server::start();
    let target = in_redis(&server, &prefix("horizon"));
    let out = at_day("filter-new", &target, 0, &["--within", "400d"], b"a\n");
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--within 400d:") && err.contains("longer than"),
        "{err}"
    );
    assert!(!err.contains("created"), "{err}");
    assert!(out.stdout.is_empty());
    let stats = at_day("stats", &target, 0, &[], b"");
    assert_eq!(code(&stats), 2, "an engine was created: {}", stdout(&stats));
    assert!(
        stderr(&stats).contains("no timebloom engine in Redis"),
        "{}",
        stderr(&stats)
    );
}
