//! The command line at its edges: what is reported when a run stops part
//! way, and messages that must name the flag, the path and the problem.

mod cli_support;

use cli_support::*;

/// `add` that stops part way (a line over the limit, an input that fails
/// to read) still reports the keys it recorded before the error, as the
/// exit status table promises, so that a loader knows what went in.
#[test]
fn add_reports_what_it_recorded_before_an_error() {
    let (tmp, db) = temp_db();
    let long = "x".repeat(100);
    let input = format!("a\nb\na\n{long}\nc\n");
    let out = cmd("add", &db, &["--max-line-bytes", "50"], input.as_bytes());
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "stdin:4: a line of 100 bytes");
    assert_eq!(stdout(&out), "added 2 new of 3 keys\n");
    // A second input that fails to read: the first one's keys are counted.
    let keys = tmp.path().join("keys.txt");
    std::fs::write(&keys, "a\nd\n").unwrap();
    let bad = tmp.path().join("bad.gz");
    let mut data = gzip(b"e\nf\n");
    data.truncate(data.len() - 6);
    std::fs::write(&bad, data).unwrap();
    let args = [keys.to_str().unwrap(), bad.to_str().unwrap()];
    let out = cmd("add", &db, &args, b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "bad.gz: read failed");
    let report = stdout(&out);
    assert!(
        report.starts_with("added ") && report.ends_with(" keys\n"),
        "{report}"
    );
    // `remove` the same way.
    let counting = tmp.path().join("counting");
    let out = cmd("add", &counting, &["--counting"], b"a\nb\n");
    assert_exit(&out, 0);
    let input = format!("a\nz\n{long}\nb\n");
    let out = cmd(
        "remove",
        &counting,
        &["--max-line-bytes", "50"],
        input.as_bytes(),
    );
    assert_exit(&out, 2);
    assert_eq!(stdout(&out), "removed 1 of 2 keys\n");
}

/// `--sync` on an existing engine applies to that command (the help says
/// so), so it is not among the configuration flags said to be ignored.
#[test]
fn sync_on_an_existing_engine_is_not_called_ignored() {
    let (_tmp, db) = temp_db();
    assert_eq!(code(&cmd("create", &db, &[], b"")), 0);
    for command in ["add", "filter-new"] {
        let out = cmd(command, &db, &["--sync", "none"], b"a\n");
        assert_exit(&out, 0);
        assert!(
            !stderr(&out).contains("apply only when creating"),
            "{command}: {}",
            stderr(&out)
        );
    }
    // A flag that does not apply is still noted.
    let out = cmd("add", &db, &["--sync", "none", "--fpr", "0.01"], b"a\n");
    assert_stderr_contains(&out, "apply only when creating");
}

/// Under `--not-url error` a line that is not a URL stops the command; the
/// closing note must not say that it was kept as it is.
#[test]
fn not_url_error_does_not_say_the_line_was_kept() {
    let (_tmp, db) = temp_db();
    let args = ["--canonical", "--not-url", "error"];
    let out = cmd("filter-new", &db, &args, b"https://a.example/\nnot a url\n");
    assert_exit(&out, 2);
    assert_eq!(stdout(&out), "https://a.example/\n");
    let err = stderr(&out);
    assert!(err.contains("stdin:2: not a URL"), "{err}");
    assert!(!err.contains("kept as they are"), "{err}");
}

/// A horizon longer than every tier keeps is a bad `--within`: the error
/// names the flag and the engine, and comes before any input is read (an
/// empty input was a success).
#[test]
fn a_horizon_past_every_tier_names_the_flag_and_the_engine() {
    let (_tmp, db) = temp_db();
    let d = db.to_str().unwrap().to_string();
    assert_eq!(code(&cmd("create", &db, &["--tiers", "7d"], b"")), 0);
    for (command, input) in [
        ("filter-new", &b""[..]),
        ("filter-new", b"a\n"),
        ("check", b"a\n"),
    ] {
        for dry in [&[][..], &["--dry-run"]] {
            if command == "check" && !dry.is_empty() {
                continue;
            }
            let mut args = vec!["--within", "30d"];
            args.extend_from_slice(dry);
            let out = cmd(command, &db, &args, input);
            assert_eq!(code(&out), 2, "{command} {dry:?}: {}", stderr(&out));
            let err = stderr(&out);
            assert!(
                err.contains(&format!("{d}: --within 30d:")) && err.contains("longer than"),
                "{command} {dry:?}: {err}"
            );
            assert!(out.stdout.is_empty(), "{command} {dry:?}");
        }
    }
}

/// A refused clock jump names the engine directory, as every error does.
#[test]
fn a_refused_clock_jump_names_the_engine() {
    let (_tmp, db) = temp_db();
    let d = db.to_str().unwrap().to_string();
    assert_eq!(code(&cmd("add", &db, &[], b"a\n")), 0);
    for command in ["add", "filter-new"] {
        let out = run(&[command, &d, "--now", "2027-11-02T12:00:00Z"], b"b\n");
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.starts_with(&format!("timebloom: {d}: the clock jumped")),
            "{command}: {err}"
        );
    }
}

/// docs/cli.md gives each command's `--help` as its reference text: every
/// one of them matches the binary's.
#[test]
fn docs_cli_md_holds_each_commands_help() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    let mut found = 0;
    for part in doc.split("### `timebloom ").skip(1) {
        let command = &part[..part.find('`').unwrap()];
        let Some(start) = part.find("```text\n") else {
            continue;
        };
        let body = &part[start + 8..];
        let body = &body[..body.find("```").unwrap()];
        let out = run(&[command, "--help"], b"");
        let tidy = |s: &str| {
            s.trim()
                .lines()
                .map(str::trim_end)
                .collect::<Vec<_>>()
                .join("\n")
        };
        assert_eq!(tidy(body), tidy(&stdout(&out)), "docs/cli.md, {command}");
        found += 1;
    }
    assert!(found >= 10, "{found} commands");
}

/// `--quiet` prints nothing, so `--duplicates` (print the repeats instead)
/// beside it is a contradiction, refused like `--quiet --dry-run`.
#[test]
fn quiet_with_duplicates_is_a_usage_error() {
    let (_tmp, db) = temp_db();
    for flags in [["-q", "--duplicates"], ["--quiet", "--dry-run"]] {
        let out = cmd("filter-new", &db, &flags, b"a\na\n");
        assert_eq!(code(&out), 2, "{flags:?}: {}", stderr(&out));
        assert_stderr_contains(&out, "cannot be used with");
        assert!(!db.exists(), "{flags:?} created the engine");
    }
}

/// A file where the engine's directory goes (the arguments swapped,
/// `filter-new urls.txt`) is named as in the way, and left alone.
#[test]
fn a_file_given_as_the_engine_is_said_to_be_in_the_way() {
    let tmp = tempfile::tempdir().unwrap();
    let urls = tmp.path().join("urls.txt");
    std::fs::write(&urls, "https://a.example/1\n").unwrap();
    let out = cmd("filter-new", &urls, &[], b"https://a.example/1\n");
    assert_exit(&out, 2);
    assert_stderr_contains(
        &out,
        "urls.txt: create directory failed: a file is in the way",
    );
    assert_eq!(std::fs::read(&urls).unwrap(), b"https://a.example/1\n");
}

/// A dry run on an existing engine notes the configuration flags it does
/// not apply, as a run that records does, rather than taking them without
/// a word.
#[test]
fn a_dry_run_notes_the_configuration_flags_it_does_not_apply() {
    let (_tmp, db) = temp_db();
    assert_eq!(code(&cmd("create", &db, &[], b"")), 0);
    let out = cmd(
        "filter-new",
        &db,
        &["--dry-run", "--tiers", "3d", "--fpr", "0.01"],
        b"https://a.example/1\n",
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "https://a.example/1\n");
    assert_stderr_contains(&out, "apply only when creating");
    // Flags the engine has already: nothing to note.
    let out = cmd("filter-new", &db, &["--dry-run"], b"https://a.example/1\n");
    assert!(!stderr(&out).contains("apply only"), "{}", stderr(&out));
}

/// An engine of one `3d` tier holding `a` on 2026-11-02 and `b` on
/// 2026-11-03 (12:00), both header copies of the sealed first day damaged.
fn db_with_a_damaged_sealed_day() -> (tempfile::TempDir, std::path::PathBuf) {
    db_with_a_damaged_sealed_day_of("3d")
}

/// [`db_with_a_damaged_sealed_day`] with other tiers beside the days.
fn db_with_a_damaged_sealed_day_of(tiers: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let (tmp, db) = temp_db();
    let out = cmd("add", &db, &["--tiers", tiers], b"a\n");
    assert_exit(&out, 0);
    let next = ["add", db.to_str().unwrap(), "--now", "2026-11-03T12:00:00Z"];
    assert_exit(&run(&next, b"b\n"), 0);
    let sealed = db.join("seg/d-20261102-0.seg");
    let mut b = std::fs::read(&sealed).unwrap();
    b[10] ^= 0x40;
    b[2048 + 10] ^= 0x40;
    std::fs::write(&sealed, &b).unwrap();
    (tmp, db)
}

/// `--degraded` is a global flag and the quarantine error says to open
/// degraded to go on; `maintain --degraded` goes on without the damaged
/// window as the other writing commands do, rather than failing with the
/// very error that names the flag.
#[test]
fn maintain_honours_degraded() {
    let (_tmp, db) = db_with_a_damaged_sealed_day();
    let dir = db.to_str().unwrap();
    let out = run(
        &[
            "maintain",
            dir,
            "--degraded",
            "--now",
            "2026-11-03T13:00:00Z",
        ],
        b"",
    );
    assert_exit(&out, 0);
    assert!(db.join("quarantine/d-20261102-0.seg").exists());
    // The manifest no longer names the window: a plain open works.
    let out = run(&["add", dir, "--now", "2026-11-03T14:00:00Z"], b"c\n");
    assert_exit(&out, 0);
}

/// `maintain --degraded` names on stderr the window it went on without, as
/// every other writing command does: the manifest stops naming the window
/// as live (a later `stats` lists it only as lost earlier), and before,
/// `maintain` printed "nothing to do" and said nothing of the loss.
#[test]
fn maintain_degraded_names_the_window_it_lost() {
    let (_tmp, db) = db_with_a_damaged_sealed_day_of("3d,2w");
    let dir = db.to_str().unwrap();
    let later = ["--now", "2026-11-03T13:00:00Z"];
    let out = run(
        &[&["maintain", dir, "--degraded"][..], &later].concat(),
        b"",
    );
    assert_exit(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains("opened degraded without these windows") && err.contains("3d 20261102"),
        "{err}"
    );
    // The manifest no longer names it as live: stats lists no loss of its
    // own open, and the window as lost earlier (its keys still looked for
    // in the other tiers), in JSON and in the table.
    let out = run(&[&["stats", dir, "--json"][..], &later].concat(), b"");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats --json");
    assert_eq!(v["lost_windows"], serde_json::json!([]), "{v}");
    assert_eq!(v["lost_earlier"], serde_json::json!(["3d 20261102"]), "{v}");
    let out = run(&[&["stats", dir][..], &later].concat(), b"");
    assert!(
        stdout(&out).contains("lost by an earlier degraded open, their keys looked for in the other tiers: 3d 20261102"),
        "{}",
        stdout(&out)
    );
    // And a check finds the lost day's key in the weekly tier.
    let out = run(&[&["check", dir, "a"][..], &later].concat(), b"");
    assert_eq!(stdout(&out), "a\tseen\n");
}

/// With one tier there is no other tier to look in: a degraded open of a
/// single-tier engine keeps nothing of the window it lost.
#[test]
fn a_single_tier_keeps_no_lost_window() {
    let (_tmp, db) = db_with_a_damaged_sealed_day();
    let dir = db.to_str().unwrap();
    let later = ["--now", "2026-11-03T13:00:00Z"];
    let out = run(
        &[&["maintain", dir, "--degraded"][..], &later].concat(),
        b"",
    );
    assert_exit(&out, 0);
    let out = run(&[&["stats", dir, "--json"][..], &later].concat(), b"");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).expect("stats --json");
    assert_eq!(v["lost_earlier"], serde_json::json!([]), "{v}");
    let manifest = std::fs::read(db.join("MANIFEST")).unwrap();
    assert!(!String::from_utf8_lossy(&manifest).contains("\"lost\""));
}

/// `maintain` works on an engine with a fingerprint tier and a negative
/// UTC offset: it opened the engine on a clock standing at the epoch, a
/// day before any a table knows west of UTC, and every run failed with
/// "window unavailable: instant 0 lies before the first day a fingerprint
/// table knows" (exit 2), `--degraded` or not.
#[test]
fn maintain_works_with_a_fingerprint_tier_west_of_utc() {
    let (_tmp, db) = temp_db();
    let tiers = ["--tiers", "3d,30d:fingerprint", "--utc-offset", "-12:00"];
    assert_exit(&cmd("add", &db, &tiers, b"a\n"), 0);
    let dir = db.to_str().unwrap();
    let out = run(&["maintain", dir, "--now", DAY0], b"");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "nothing to do\n");
    let later = "2026-11-10T12:00:00Z";
    let out = run(&["maintain", dir, "--degraded", "--now", later], b"");
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("opened 3d 20261110"),
        "{}",
        stdout(&out)
    );
    let out = run(&["check", dir, "--now", later, "a"], b"");
    assert_eq!(stdout(&out), "a\tseen\n");
}

/// A writing command opened with `--degraded` names on stderr the window
/// it goes on without: the manifest stops naming it, so no later `stats`
/// lists it, and the command said nothing of it.
#[test]
fn a_degraded_write_names_the_window_it_lost() {
    let (_tmp, db) = db_with_a_damaged_sealed_day();
    let dir = db.to_str().unwrap();
    let later = ["--now", "2026-11-03T13:00:00Z"];
    let out = run(&[&["add", dir, "--degraded"][..], &later].concat(), b"c\n");
    assert_exit(&out, 0);
    let err = stderr(&out);
    assert!(
        err.contains("opened degraded without these windows") && err.contains("20261102"),
        "{err}"
    );
    // Nothing lost at the next degraded open: nothing to say.
    let out = run(&[&["add", dir, "--degraded"][..], &later].concat(), b"d\n");
    assert_exit(&out, 0);
    assert!(!stderr(&out).contains("degraded"), "{}", stderr(&out));
}

/// `maintain` without `--now` rotates to the system clock; a system clock
/// that jumped past every window is refused there as at every other
/// writing command (exit 2, nothing expired), and only `maintain --now T`
/// moves the engine on purpose, as the help and the refusal say. A cron
/// job's plain `maintain` on a host whose clock jumped expired every
/// window.
#[test]
fn maintain_without_now_refuses_a_clock_jump() {
    let (_tmp, db) = temp_db();
    let d = db.to_str().unwrap();
    // Years before the system clock: moving there expires every window.
    let then = "2001-03-04T12:00:00Z";
    let out = run(
        &[
            "add",
            d,
            "--now",
            then,
            "--tiers",
            "3d",
            "--items-per-day",
            "1000",
        ],
        b"k\n",
    );
    assert_exit(&out, 0);
    let out = run(&["maintain", d], b"");
    assert_eq!(code(&out), 2, "{}{}", stdout(&out), stderr(&out));
    assert!(
        stderr(&out).contains("--now") && stderr(&out).contains("clock jumped"),
        "{}",
        stderr(&out)
    );
    let out = run(&["check", d, "--now", then, "k"], b"");
    assert_eq!(stdout(&out), "k\tseen\n", "{}", stderr(&out));
    // On purpose.
    let out = run(&["maintain", d, "--now", "2002-01-01T00:00:00Z"], b"");
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("expired 3d 20010304"),
        "{}",
        stdout(&out)
    );
}

/// An error of `remove` names the engine directory (docs/cli.md: every
/// error names the path), and for an instant no window keeps, the `--at`
/// given; it said only "window unavailable: instant N is older than every
/// tier keeps".
#[test]
fn remove_errors_name_the_engine_and_the_instant() {
    let (_tmp, db) = temp_db();
    let out = cmd("add", &db, &["--counting", "--tiers", "3d"], b"a\n");
    assert_exit(&out, 0);
    let at = "2020-01-01T00:00:00Z";
    let out = cmd("remove", &db, &["--at", at, "a"], b"");
    assert_exit(&out, 2);
    let err = stderr(&out);
    let dir = db.display().to_string();
    assert!(
        err.contains(&format!("timebloom: {dir}: --at {at}: ")),
        "{err}"
    );
}

/// `--counting` is there so that `remove` works; a fingerprint tier
/// removes already, and `--counting` kept its retention but made it a
/// counting tier of as many daily windows (`plan --counting --tiers
/// 365d:fingerprint`: 12.3 GiB in 365 windows instead of one 1.1 GiB
/// table), or refused a list with a daily tier beside it as two tiers of
/// the same window.
#[test]
fn counting_leaves_a_fingerprint_tier_as_it_is() {
    let out = run(
        &["plan", "--counting", "--tiers", "365d:fingerprint,48h"],
        b"",
    );
    assert_exit(&out, 0);
    let plan = stdout(&out);
    assert!(
        plan.contains("\n365d:fingerprint ") && plan.contains("\n48h:counting "),
        "{plan}"
    );
    let out = run(
        &["plan", "--counting", "--tiers", "30d:fingerprint,7d"],
        b"",
    );
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("\n7d:counting "), "{}", stdout(&out));
}

/// A long line's length in the error leaves out its `\r\n` as a short
/// line's key does: the same 11 bytes are "a line of 11 bytes" whether the
/// input ends its lines in `\n` or `\r\n` (it said 12 for the latter).
#[test]
fn a_long_crlf_line_is_measured_without_its_cr() {
    let (_tmp, db) = temp_db();
    for input in [
        &b"ok\nxxxxxxxxxxx\r\n"[..],
        b"ok\nxxxxxxxxxxx\r",
        b"ok\nxxxxxxxxxxx\n",
    ] {
        let out = cmd("filter-new", &db, &["--max-line-bytes", "10"], input);
        assert_exit(&out, 2);
        assert!(
            stderr(&out).contains("stdin:2: a line of 11 bytes is longer than the limit of 10"),
            "{:?}: {}",
            String::from_utf8_lossy(input),
            stderr(&out)
        );
    }
}

/// An empty file named `.gz` holds no gzip data (`zcat` fails on it too):
/// it is refused with the other inputs, before anything is created or
/// recorded, rather than passing the check and failing to read once the
/// inputs before it were recorded.
#[test]
fn an_empty_gz_file_is_refused_before_anything_is_recorded() {
    let (tmp, db) = temp_db();
    let good = tmp.path().join("good.txt");
    std::fs::write(&good, "a\n").unwrap();
    let empty = tmp.path().join("empty.gz");
    std::fs::write(&empty, b"").unwrap();
    let (g, e) = (good.to_str().unwrap(), empty.to_str().unwrap());
    for c in ["add", "filter-new"] {
        let out = cmd(c, &db, &[g, e], b"");
        assert_eq!(code(&out), 2, "{c}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("empty.gz: not gzip data"),
            "{c}: {}",
            stderr(&out)
        );
        assert!(!db.exists(), "{c} created the engine");
    }
}

/// A stdin pipe that another process sharing it made non-blocking (the
/// flag belongs to the open pipe) answers "try again" while the producer
/// is between lines: `filter-new` is waited on as on a full non-blocking
/// stdout, rather than ending with "stdin: read failed: Resource
/// temporarily unavailable" (exit 2) and the producer's next write
/// meeting a closed pipe.
#[cfg(unix)]
#[test]
fn a_non_blocking_stdin_pipe_is_waited_on() {
    use std::io::Write;
    use std::process::Stdio;
    let (_tmp, db) = temp_db();
    let (read, mut write) = std::io::pipe().unwrap();
    let flags = rustix::fs::fcntl_getfl(&read).unwrap();
    rustix::fs::fcntl_setfl(&read, flags | rustix::fs::OFlags::NONBLOCK).unwrap();
    let mut child = filter_new_command(&db, &[])
        .stdin(read)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    write.write_all(b"a\nb\n").unwrap();
    // The producer pauses; the pipe is empty meanwhile.
    std::thread::sleep(std::time::Duration::from_millis(300));
    let more = write.write_all(b"c\na\n");
    drop(write);
    let out = read_stdout(&mut child);
    let status = child.wait().unwrap();
    let err = read_stderr(&mut child);
    assert!(status.success(), "{status:?}: {err}");
    assert!(more.is_ok(), "{more:?}");
    assert_eq!(out, "a\nb\nc\n", "{err}");
}

/// Many input files (a directory of hourly logs, `add DIR logs/*.gz`) are
/// each checked before anything is created, but read one at a time: every
/// one was kept open (with its buffers) from the start, so past the limit
/// of open files (often 1024) the command failed with "Too many open
/// files".
#[cfg(unix)]
#[test]
fn many_input_files_are_not_all_held_open() {
    let (tmp, db) = temp_db();
    let mut files = Vec::new();
    for i in 0..200 {
        let f = tmp.path().join(format!("{i:03}.txt"));
        std::fs::write(&f, format!("k{i}\n")).unwrap();
        files.push(f.display().to_string());
    }
    let gz = tmp.path().join("last.gz");
    std::fs::write(&gz, gzip(b"k0\nz\n")).unwrap();
    files.push(gz.display().to_string());
    let line = format!(
        "ulimit -n 64 && exec {BIN} add {} --now {DAY0} --items-per-day 1000 {}",
        db.display(),
        files.join(" ")
    );
    let out = std::process::Command::new("sh")
        .args(["-c", &line])
        .output()
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "added 201 new of 202 keys\n");

    // A named pipe stays open from its check (its writer must not see the
    // reader go), gzip and all.
    let fifo = tmp.path().join("fifo.gz");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status();
    if !made.is_ok_and(|s| s.success()) {
        return;
    }
    let path = fifo.clone();
    let writer = std::thread::spawn(move || std::fs::write(path, gzip(b"p1\np2\nk0\n")));
    let args = [files[0].as_str(), fifo.to_str().unwrap()];
    let out = cmd("filter-new", &db, &args, b"");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "p1\np2\n");
    writer.join().unwrap().unwrap();
}

/// A Redis URL for a Unix socket carries its password in the query
/// (`unix:///run/redis.sock?pass=P`, as the Redis client reads it): error
/// messages show it as `***`, as they do the password of `redis://u:P@h`
/// (docs/cli.md). It was printed in clear.
#[cfg(feature = "redis")]
#[test]
fn a_unix_socket_password_is_not_printed() {
    let tmp = tempfile::tempdir().unwrap();
    let sock = tmp.path().join("none.sock");
    for url in [
        format!("unix://{}?db=0&pass=s3cret&user=u", sock.display()),
        format!("redis+unix://{}?pass=s3cret", sock.display()),
    ] {
        let out = run(&["stats", "--redis", &url], b"");
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(!err.contains("s3cret") && err.contains("pass=***"), "{err}");
    }
}

/// `-` means stdin wherever a file of keys goes; given where the engine
/// directory goes (`crawl | timebloom filter-new -`, the directory left
/// out), it made an engine in a directory named `-` and recorded the
/// keys there. It is refused, naming the mix-up; `./-` still names such a
/// directory.
#[test]
fn a_dash_is_not_taken_for_the_engine_directory() {
    let tmp = tempfile::tempdir().unwrap();
    for args in [
        &["filter-new", "-"][..],
        &["add", "-"],
        &["create", "-"],
        &["check", "-", "k"],
        &["stats", "-"],
        &["remove", "-", "k"],
        &["verify", "-"],
        &["maintain", "-"],
    ] {
        let out = std::process::Command::new(BIN)
            .args(args)
            .args(["--now", DAY0])
            .current_dir(tmp.path())
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("timebloom: -: stdin is not an engine directory"),
            "{args:?}: {}",
            stderr(&out)
        );
        assert!(!tmp.path().join("-").exists(), "{args:?} made ./-");
    }
}

/// `filter-new --within` with a horizon that the engine it would create
/// does not keep is refused before the engine is made: a refused command
/// left a new engine of the default configuration behind.
#[test]
fn a_refused_horizon_creates_no_engine() {
    let tmp = tempfile::tempdir().unwrap();
    for (db, sizing) in [
        (tmp.path().join("new"), &[][..]),
        (tmp.path().join("short"), &["--tiers", "7d"][..]),
    ] {
        let within = if sizing.is_empty() { "400d" } else { "30d" };
        let mut args = vec!["--within", within];
        args.extend_from_slice(sizing);
        let out = cmd("filter-new", &db, &args, b"a\n");
        assert_exit(&out, 2);
        let err = stderr(&out);
        let d = db.to_str().unwrap();
        assert!(
            err.contains(&format!("{d}: --within {within}:")) && err.contains("longer than"),
            "{err}"
        );
        assert!(!err.contains("created"), "{err}");
        assert!(out.stdout.is_empty());
        assert!(!db.exists(), "{d} was left behind");
        // A horizon the new engine keeps goes on and creates it.
        let mut args = vec!["--within", "3d"];
        args.extend_from_slice(sizing);
        let out = cmd("filter-new", &db, &args, b"a\n");
        assert_exit(&out, 0);
        assert_eq!(stdout(&out), "a\n");
    }
}

/// A line with no end under `--long-lines error` (`yes | tr -d '\n'`) is
/// an error once it has run far past the limit: the command read it for
/// ever (memory bounded, but no answer and no exit).
#[test]
fn an_endless_line_is_an_error_under_long_lines_error() {
    use std::io::Write;
    use std::time::{Duration, Instant};
    let (_tmp, db) = temp_db();
    let mut child = spawn_piped(&mut filter_new_command(
        &db,
        &["--max-line-bytes", "100", "--long-lines", "error"],
    ));
    let mut stdin = child.stdin.take().unwrap();
    // Writes until the command stops reading (its end of the pipe closes).
    let writer = std::thread::spawn(move || {
        let block = vec![b'x'; 1 << 16];
        let _ = stdin.write_all(b"before\n");
        while stdin.write_all(&block).is_ok() {}
    });
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            child.wait().unwrap();
            panic!("filter-new still reading an endless line after 30 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap();
    assert_exit(&out, 2);
    let err = stderr(&out);
    assert!(
        err.contains("stdin:2: a line of more than ")
            && err.contains(" bytes is longer than the limit of 100"),
        "{err}"
    );
    assert_eq!(stdout(&out), "before\n");
}

/// An empty key argument is an error (exit 2) before anything is looked
/// up: skipped as an empty line of input is, `check DIR ""` (an unset
/// `"$url"`) answered exit 0, "every key was seen". Empty lines of input
/// are still skipped.
#[test]
fn an_empty_key_argument_is_an_error() {
    let (tmp, db) = temp_db();
    assert_eq!(code(&cmd("add", &db, &[], b"a\n")), 0);
    for args in [&[""][..], &["a", ""], &["--trim", "a", " \t"]] {
        let out = cmd("check", &db, args, b"");
        assert_eq!(code(&out), 2, "{args:?}: {}", stderr(&out));
        assert_stderr_contains(&out, "an empty key");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    let counting = tmp.path().join("counting");
    assert_eq!(code(&cmd("add", &counting, &["--counting"], b"a\n")), 0);
    let out = cmd("remove", &counting, &["a", ""], b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "an empty key");
    assert_eq!(stdout(&out), "");
    // `a` was not taken back.
    assert_eq!(code(&cmd("check", &counting, &["a"], b"")), 0);
    // Empty lines of stdin are skipped, as by every command.
    let out = cmd("check", &db, &[], b"\na\n\n");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "a\tseen\n");
}

/// A key argument that `--not-url skip` would skip is an error, as an
/// empty one is: skipped, `check` had nothing to answer, printed nothing
/// and exited 0 ("every key seen"). Lines of input are still skipped.
#[test]
fn a_key_argument_that_not_url_skip_would_skip_is_an_error() {
    let (tmp, db) = temp_db();
    assert_eq!(code(&cmd("add", &db, &[], b"https://example.com/a\n")), 0);
    let skip = ["--canonical", "--not-url", "skip"];
    for keys in [&["not a url"][..], &["https://example.com/a", "not a url"]] {
        let args: Vec<&str> = skip.iter().chain(keys).copied().collect();
        let out = cmd("check", &db, &args, b"");
        assert_eq!(code(&out), 2, "{keys:?}: {}", stderr(&out));
        let n = keys.len();
        assert_stderr_contains(&out, &format!("argument {n}: not a URL"));
        assert!(out.stdout.is_empty(), "{keys:?}: {}", stdout(&out));
    }
    // Under --trim, the trimmed argument is what is checked.
    let args: Vec<&str> = skip
        .iter()
        .chain(&["--trim", " https://example.com/a "])
        .copied()
        .collect();
    assert_eq!(code(&cmd("check", &db, &args, b"")), 0);
    // Keep and error answer as before.
    let out = cmd("check", &db, &["--canonical", "not a url"], b"");
    assert_exit(&out, 1);
    assert_eq!(stdout(&out), "not a url\tnew\n");
    let out = cmd(
        "check",
        &db,
        &["--canonical", "--not-url", "error", "not a url"],
        b"",
    );
    assert_exit(&out, 2);
    // `remove` the same way: nothing taken back.
    let counting = tmp.path().join("counting");
    let out = cmd(
        "add",
        &counting,
        &["--counting"],
        b"https://example.com/a\n",
    );
    assert_exit(&out, 0);
    let args: Vec<&str> = skip
        .iter()
        .chain(&["https://example.com/a", "not a url"])
        .copied()
        .collect();
    let out = cmd("remove", &counting, &args, b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "argument 2: not a URL");
    assert_eq!(stdout(&out), "");
    assert_eq!(
        code(&cmd("check", &counting, &["https://example.com/a"], b"")),
        0
    );
    // Lines of stdin that are not URLs are skipped, as documented.
    let out = cmd("check", &db, &skip, b"not a url\nhttps://example.com/a\n");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "https://example.com/a\tseen\n");
}

/// An input that fails mid-stream names the line it was reading: the
/// lines before it were read and recorded (a truncated .gz said only
/// "FILE: read failed: REASON").
#[test]
fn a_read_failure_names_the_line_being_read() {
    let (tmp, db) = temp_db();
    let mut text = String::new();
    for i in 0..20_000 {
        text.push_str(&format!("https://example.com/{i}\n"));
    }
    let whole = gzip(text.as_bytes());
    let cut = tmp.path().join("cut.gz");
    std::fs::write(&cut, &whole[..whole.len() / 2]).unwrap();
    let out = cmd("add", &db, &[cut.to_str().unwrap()], b"");
    assert_exit(&out, 2);
    let err = stderr(&out);
    let at = err
        .split("cut.gz: read failed at line ")
        .nth(1)
        .unwrap_or_else(|| panic!("no line named: {err}"));
    let line: u64 = at[..at.find(':').unwrap()].parse().unwrap();
    let added = line - 1;
    assert!(added > 0 && added < 20_000, "{err}");
    assert_eq!(stdout(&out), format!("added {added} new of {added} keys\n"));
}

/// A failing stdout (a full disk) ends `filter-new` with exit 2; the keys
/// of the batch it was printing stay recorded, unprinted, as docs/cli.md
/// says (keys are recorded a batch at a time before they are printed).
#[test]
fn a_failing_stdout_leaves_the_batch_recorded_but_unprinted() {
    use std::process::Stdio;
    let (tmp, db) = temp_db();
    let keys = tmp.path().join("keys");
    std::fs::write(&keys, b"a\nb\nc\n").unwrap();
    let Ok(full) = std::fs::OpenOptions::new().write(true).open("/dev/full") else {
        return; // no /dev/full on this system
    };
    let out = filter_new_command(&db, &[])
        .stdin(std::fs::File::open(&keys).unwrap())
        .stdout(Stdio::from(full))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "stdout: write failed");
    let out = cmd("check", &db, &["a", "b", "c"], b"");
    assert_eq!(code(&out), 0, "{}", stdout(&out));
}

/// An error about a key argument names its place among all the
/// arguments: past the first batch of 4096 keys the number started again
/// from 1 (argument 4500 was called "argument 404").
#[test]
fn an_argument_error_past_the_first_batch_names_the_argument() {
    let (_tmp, db) = temp_db();
    assert_eq!(code(&cmd("add", &db, &[], b"https://example.com/0\n")), 0);
    let keys: Vec<String> = (1..=5000)
        .map(|i| match i {
            4500 => "not a url".to_string(),
            _ => format!("https://example.com/{i}"),
        })
        .collect();
    let mut args = vec!["--canonical", "--not-url", "error"];
    args.extend(keys.iter().map(String::as_str));
    let out = cmd("check", &db, &args, b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "argument 4500: not a URL");
}

/// A key argument that is not a URL under `--not-url error` is an error
/// whose hint names only `--not-url keep`: it said "--not-url keep or
/// skip goes on", but `--not-url skip` refuses such an argument too.
#[test]
fn a_not_url_argument_error_does_not_offer_skip() {
    let (tmp, db) = temp_db();
    assert_eq!(code(&cmd("add", &db, &[], b"https://example.com/a\n")), 0);
    let counting = tmp.path().join("counting");
    assert_eq!(code(&cmd("add", &counting, &["--counting"], b"x\n")), 0);
    for (command, dir) in [("check", &db), ("remove", &counting)] {
        let args = ["--canonical", "--not-url", "error", "not a url"];
        let out = cmd(command, dir, &args, b"");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "argument 1: not a URL");
        assert_stderr_contains(&out, "--not-url keep");
        let err = stderr(&out);
        assert!(!err.contains("skip goes on"), "{command}: {err}");
        // `--not-url skip` refuses the argument too.
        let out = cmd(
            command,
            dir,
            &["--canonical", "--not-url", "skip", "not a url"],
            b"",
        );
        assert_exit(&out, 2);
    }
}

/// `maintain` opens a copy whose manifest names a window the writer
/// expired before `seg/` was copied (docs/operations.md, "Backup": "it
/// has expired for the copy too, which opens without it"), as `add` does:
/// it opened the engine on a clock standing at the epoch, where no window
/// has expired, and failed with "seg/d-20261101-0.seg: open segment
/// failed: No such file or directory" (exit 2).
#[test]
fn maintain_opens_a_copy_missing_an_expired_window() {
    let (_tmp, db) = temp_db();
    let dir = db.to_str().unwrap();
    for day in ["01", "02", "03"] {
        let now = format!("2026-11-{day}T12:00:00Z");
        let out = run(&["add", dir, "--tiers", "3d", "--now", &now], b"a\n");
        assert_exit(&out, 0);
    }
    // MANIFEST copied before the expiry of day 1, seg/ after it.
    let manifest = std::fs::read(db.join("MANIFEST")).unwrap();
    let out = run(&["maintain", dir, "--now", "2026-11-04T00:00:01Z"], b"");
    assert_exit(&out, 0);
    assert!(!db.join("seg/d-20261101-0.seg").exists());
    std::fs::write(db.join("MANIFEST"), manifest).unwrap();
    let out = run(&["maintain", dir, "--now", "2026-11-05T00:00:01Z"], b"");
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("opened 3d 20261105"),
        "{}",
        stdout(&out)
    );
    let out = run(&["check", dir, "--now", "2026-11-05T00:00:02Z", "a"], b"");
    assert_eq!(stdout(&out), "a\tseen\n");
}

/// `verify` after an open moved a damaged file to `quarantine/` reports
/// the window as damage (exit 1, naming the file), as it does before the
/// move: it printed "ok" and exited 0 while every plain open of the
/// directory failed with `Quarantined`.
#[test]
fn verify_reports_a_window_whose_file_is_in_quarantine() {
    let (_tmp, db) = db_with_a_damaged_sealed_day();
    let dir = db.to_str().unwrap();
    let later = ["--now", "2026-11-03T13:00:00Z"];
    let out = run(&[&["add", dir][..], &later].concat(), b"c\n");
    assert_exit(&out, 2);
    assert!(db.join("quarantine/d-20261102-0.seg").exists());
    let out = run(&[&["verify", dir][..], &later].concat(), b"");
    assert_exit(&out, 1);
    assert_stderr_contains(&out, "d-20261102-0.seg");
}

/// A gzip file whose name ends in upper-case `.GZ` (as archives copied
/// from case-insensitive file systems often are) was read as text: its
/// compressed bytes were recorded as keys ("added 1 new of 1 keys" for a
/// file of two lines). The suffix is matched without regard to case.
#[test]
fn an_upper_case_gz_name_is_decompressed() {
    let (tmp, db) = temp_db();
    let gz = tmp.path().join("LOG.GZ");
    std::fs::write(&gz, gzip(b"a\nb\n")).unwrap();
    let out = cmd("add", &db, &[gz.to_str().unwrap()], b"");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "added 2 new of 2 keys\n");
    let out = cmd("check", &db, &["a", "b"], b"");
    assert_exit(&out, 0);
}

/// For tiers of hours, custom lengths, a single long window, counting and
/// fingerprint kinds at a negative offset, `plan --json` gives each tier's
/// bytes per window as the size of the file `add` creates for its open
/// window, and `stats --json` counts exactly the bytes of the files there.
#[test]
fn plan_and_stats_agree_with_the_files_of_unusual_tiers() {
    let (_tmp, db) = temp_db();
    let spec = "48h,4x6h,3x90s:counting,1x366d,30d:fingerprint";
    let sizing = [
        "--tiers",
        spec,
        "--items-per-day",
        "1000",
        "--utc-offset",
        "-03:30",
    ];
    let out = run(&[&["plan", "--json"][..], &sizing].concat(), b"");
    assert_exit(&out, 0);
    let plan: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let out = cmd("add", &db, &sizing, b"a\n");
    assert_exit(&out, 0);
    let mut files: Vec<(String, u64)> = std::fs::read_dir(db.join("seg"))
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, e.metadata().unwrap().len())
        })
        .collect();
    files.sort();
    let prefixes = ["c3600-", "c21600-", "c90-", "c31622400-", "f-"];
    let tiers = plan["tiers"].as_array().unwrap();
    assert_eq!(tiers.len(), prefixes.len());
    for (t, prefix) in tiers.iter().zip(prefixes) {
        let made: Vec<u64> = (files.iter())
            .filter(|(n, _)| n.starts_with(prefix))
            .map(|(_, len)| *len)
            .collect();
        assert_eq!(
            made,
            [t["bytes_per_window"].as_u64().unwrap()],
            "{t} {files:?}"
        );
    }
    let out = cmd("stats", &db, &["--json"], b"");
    assert_exit(&out, 0);
    let stats: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let total: u64 = files.iter().map(|(_, len)| len).sum();
    assert_eq!(stats["bytes"].as_u64(), Some(total), "{files:?}");
    // The text form names each tier as it was given (`4x6h` was shown as
    // `4x21600s`), one window in the singular.
    let out = cmd("stats", &db, &[], b"");
    assert_exit(&out, 0);
    let text = stdout(&out);
    for line in [
        "tier 48h  bloom  48 windows of 1h",
        "tier 4x6h  bloom  4 windows of 6h",
        "tier 3x90s:counting  counting  3 windows of 1min 30s",
        "tier 1x366d  bloom  1 window of 366d",
    ] {
        assert!(text.contains(line), "{line:?} in {text}");
    }
}

/// `check --degraded` and `filter-new --dry-run --degraded` read without a
/// damaged window and answered its keys "new" without a word on stderr
/// (only writing commands and `stats` named the windows lost). They name
/// them now; a read-only open moves nothing.
#[test]
fn reading_commands_name_the_windows_a_degraded_open_reads_without() {
    let (_tmp, db) = db_with_a_damaged_sealed_day();
    let dir = db.to_str().unwrap();
    let now = ["--now", "2026-11-03T13:00:00Z", "--degraded"];
    let check = run(&[&["check", dir, "a"][..], &now].concat(), b"");
    assert_exit(&check, 1);
    assert_eq!(stdout(&check), "a\tnew\n");
    let dry = run(
        &[&["filter-new", dir, "--dry-run"][..], &now].concat(),
        b"a\n",
    );
    assert_exit(&dry, 0);
    for out in [&check, &dry] {
        assert_stderr_contains(out, "read without these damaged windows");
        assert_stderr_contains(out, "3d 20261102");
    }
    assert!(
        !db.join("quarantine").exists(),
        "a read-only open moved a file"
    );
}

/// `7d,4w,12m` with this month's window file missing: `check --degraded`
/// and `filter-new --degraded` find today's key in the daily and weekly
/// windows. Before, `check` printed it `new` (exit 1) and `filter-new`
/// printed it again as new, since both read the month tier alone.
#[test]
fn degraded_commands_find_a_lost_month_windows_keys_in_the_other_tiers() {
    let (_tmp, db) = temp_db();
    let dir = db.to_str().unwrap();
    let now = ["--now", "2026-11-03T12:00:00Z"];
    let out = run(
        &[&["add", dir, "--tiers", "7d,4w,12m"][..], &now].concat(),
        b"https://a.example/1\n",
    );
    assert_exit(&out, 0);
    std::fs::remove_file(db.join("seg/m-202611-0.seg")).unwrap();
    let out = run(
        &[
            &["check", dir, "--degraded", "https://a.example/1"][..],
            &now,
        ]
        .concat(),
        b"",
    );
    assert_eq!(
        stdout(&out),
        "https://a.example/1\tseen\n",
        "{}",
        stderr(&out)
    );
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "answered as new where no other tier holds them");
    let out = run(
        &[&["filter-new", dir, "--degraded"][..], &now].concat(),
        b"https://a.example/1\nhttps://a.example/2\n",
    );
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "https://a.example/2\n", "{}", stderr(&out));
    assert_stderr_contains(&out, "opened degraded without these windows");
}
