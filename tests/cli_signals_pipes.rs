//! The command line in pipelines: a reader of stdout that goes away early
//! (`| head`), signals that stop a command, and inputs that come slowly.
//! Whatever `filter-new` records it prints first, so a key the next run
//! calls repeated was never lost on the way out.
#![cfg(unix)]

mod cli_support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use cli_support::*;

/// `n` distinct URL lines whose paths start with `tag`.
fn urls(tag: &str, n: usize) -> String {
    (0..n)
        .map(|i| format!("https://example.com/{tag}/{i:06}\n"))
        .collect()
}

/// The lines of `keys` that `check` answers `new` for in `db`.
fn unrecorded(db: &std::path::Path, keys: &str) -> usize {
    let out = run(
        &["check", db.to_str().unwrap(), "--now", DAY0],
        keys.as_bytes(),
    );
    stdout(&out).matches("\tnew\n").count()
}

/// A reader of stdout that has gone away before the next lines of input
/// arrive (`tail -f log | timebloom filter-new DIR | head -5`): those
/// lines can never be printed, so they must not be recorded either (the
/// next run prints them).
#[test]
fn lines_read_after_the_reader_of_stdout_left_are_not_recorded() {
    let (_tmp, db) = temp_db();
    let mut child = filter_new_command(&db, &["--items-per-day", "10000", "--fpr", "1e-9"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let first = urls("first", 10);
    stdin.write_all(first.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Read the first lines printed, then go away as `head` does.
    let mut lines = BufReader::new(child.stdout.take().unwrap());
    let mut printed = String::new();
    for _ in 0..10 {
        lines.read_line(&mut printed).unwrap();
    }
    assert_eq!(printed, first);
    drop(lines);
    // A copy of the pipe's read end that a process forked meanwhile (by
    // another test of this binary) holds until it execs is gone by then.
    std::thread::sleep(std::time::Duration::from_millis(500));
    let second = urls("second", 10);
    // The command may already have stopped: the write may fail.
    let _ = stdin.write_all(second.as_bytes());
    drop(stdin);
    let status = child.wait().unwrap();
    let err = read_stderr(&mut child);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(status.code(), Some(0), "a closed pipe is no error: {err}");
    assert_eq!(unrecorded(&db, &first), 0, "every line printed is recorded");
    assert_eq!(
        unrecorded(&db, &second),
        10,
        "lines read once nobody could read them were recorded"
    );
    // The next run prints them.
    let again = cmd(
        "filter-new",
        &db,
        &["--items-per-day", "10000"],
        (first + &second).as_bytes(),
    );
    assert_exit(&again, 0);
    assert_eq!(stdout(&again), second);
}

/// 100,000 keys that are costly to make canonical (URLs of 40 parameters
/// and dot segments) in `dir/keys.txt`: reading them takes seconds. The
/// path and the text.
fn costly_keys(dir: &std::path::Path) -> (std::path::PathBuf, String) {
    let keys = dir.join("keys.txt");
    let query: String = (1..=40).rev().map(|j| format!("&p{j}=v{j}")).collect();
    let text: String = (0..100_000)
        .map(|i| format!("https://Example.com/a/./b/../{i}?x=1{query}\n"))
        .collect();
    std::fs::write(&keys, &text).unwrap();
    (keys, text)
}

/// Sends `sig` to `child` 300 ms after its first byte on stderr (the note
/// on creating the engine, which comes after the signals are set up), and
/// returns the rest of its stderr.
fn signal_once_started(child: &mut std::process::Child, sig: rustix::process::Signal) -> String {
    use std::io::Read;
    let mut err = child.stderr.take().unwrap();
    let mut first = [0u8; 1];
    err.read_exact(&mut first).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    rustix::process::kill_process(rustix::process::Pid::from_child(child), sig).unwrap();
    let mut rest = String::new();
    err.read_to_string(&mut rest).unwrap();
    rest
}

/// SIGTERM, SIGINT or SIGHUP while `filter-new` reads a file (not waiting
/// for input: a regular file never keeps it waiting) is held as during a
/// batch: the command stops between batches, closes the engine, prints
/// its `--stats` summary and ends by the signal. It ended at once while
/// reading (most of the time with keys that are costly to make, here
/// canonical URLs with many parameters), with no summary and the engine
/// not closed.
#[test]
fn a_signal_while_reading_a_file_is_held_until_the_batch_is_done() {
    use std::os::unix::process::ExitStatusExt;

    use rustix::process::Signal;

    let tmp = tempfile::tempdir().unwrap();
    let (keys, _) = costly_keys(tmp.path());
    for sig in [Signal::TERM, Signal::INT, Signal::HUP] {
        let db = tmp.path().join(format!("db-{}", sig.as_raw()));
        let mut child = filter_new_command(
            &db,
            &[
                "--items-per-day",
                "100000",
                "--quiet",
                "--stats",
                "--canonical",
            ],
        )
        .arg(&keys)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
        let rest = signal_once_started(&mut child, sig);
        let status = child.wait().unwrap();
        assert!(!rest.contains("panicked"), "{rest}");
        assert_eq!(status.signal(), Some(sig.as_raw()), "{sig:?}: {rest}");
        assert!(
            rest.contains("timebloom: filter-new: read "),
            "{sig:?}: no summary: {rest}"
        );
        let verify = run(&["verify", db.to_str().unwrap(), "--now", DAY0], b"");
        assert_exit(&verify, 0);
    }
}

/// `add` stopped by SIGTERM, SIGINT or SIGHUP: it stops between batches,
/// closes the engine, prints how many keys it recorded (every one of
/// them, and no other) and ends by the signal. It ended at once, with no
/// count, whatever it had recorded.
#[test]
fn add_stopped_by_a_signal_reports_what_it_recorded() {
    use std::os::unix::process::ExitStatusExt;

    use rustix::process::Signal;

    let tmp = tempfile::tempdir().unwrap();
    let (keys, text) = costly_keys(tmp.path());
    for sig in [Signal::TERM, Signal::INT, Signal::HUP] {
        let db = tmp.path().join(format!("db-{}", sig.as_raw()));
        let mut child = Command::new(BIN)
            .args(["add", db.to_str().unwrap(), "--now", DAY0])
            .args([
                "--tiers",
                "2d",
                "--items-per-day",
                "100000",
                "--fpr",
                "1e-9",
                "--canonical",
            ])
            .arg(&keys)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let rest = signal_once_started(&mut child, sig);
        let out = read_stdout(&mut child);
        let status = child.wait().unwrap();
        assert!(!rest.contains("panicked"), "{rest}");
        assert_eq!(status.signal(), Some(sig.as_raw()), "{sig:?}: {rest}");
        let total: usize = out
            .strip_prefix("added ")
            .and_then(|s| s.split(' ').nth(3))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("{sig:?}: no count: {out:?} {rest}"));
        assert!(total > 0 && total < 100_000, "{sig:?}: {out}");
        assert_eq!(out, format!("added {total} new of {total} keys\n"));
        // Batches are recorded in order: the keys recorded are the first
        // `total`, and the next batch's are not (checking them all takes
        // long in a debug build).
        let upto = (total + 4096).min(100_000);
        let lines: String = text.lines().take(upto).map(|l| format!("{l}\n")).collect();
        let check = run(
            &["check", db.to_str().unwrap(), "--now", DAY0, "--canonical"],
            lines.as_bytes(),
        );
        let answers = stdout(&check);
        let seen: Vec<bool> = answers.lines().map(|l| l.ends_with("\tseen")).collect();
        assert_eq!(seen.len(), upto);
        assert!(
            seen[..total].iter().all(|s| *s) && !seen[total..].iter().any(|s| *s),
            "{sig:?}: the keys recorded are not the keys counted"
        );
    }
}

/// Whether the process `pid` catches SIGTERM (`SigCgt:` of its status):
/// its handler is set up.
#[cfg(target_os = "linux")]
fn catches_sigterm(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("SigCgt:"))
        .and_then(|m| u64::from_str_radix(m.trim(), 16).ok())
        .is_some_and(|m| m & (1 << 14) != 0)
}

/// `remove` stopped by SIGTERM: it stops between batches, closes the
/// engine, prints how many keys it took back (exactly those) and ends by
/// the signal. It ended at once, with no count.
#[cfg(target_os = "linux")]
#[test]
fn remove_stopped_by_a_signal_reports_what_it_removed() {
    use std::os::unix::process::ExitStatusExt;
    use std::time::{Duration, Instant};

    use rustix::process::{kill_process, Pid, Signal};

    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let (keys, text) = costly_keys(tmp.path());
    let added: String = text
        .lines()
        .take(10_000)
        .map(|l| format!("{l}\n"))
        .collect();
    let args = ["--tiers", "2d:counting", "--items-per-day", "100000"];
    let add = cmd(
        "add",
        &db,
        &[&args[..], &["--fpr", "1e-9", "--canonical"]].concat(),
        added.as_bytes(),
    );
    assert_exit(&add, 0);
    let mut child = Command::new(BIN)
        .args(["remove", db.to_str().unwrap(), "--now", DAY0, "--canonical"])
        .stdin(std::fs::File::open(&keys).unwrap())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while !catches_sigterm(child.id()) {
        assert!(start.elapsed() < Duration::from_secs(10), "no handler");
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(300));
    kill_process(Pid::from_child(&child), Signal::TERM).unwrap();
    let out = read_stdout(&mut child);
    let err = read_stderr(&mut child);
    let status = child.wait().unwrap();
    assert_eq!(status.signal(), Some(Signal::TERM.as_raw()), "{err}");
    let counts: Vec<usize> = out
        .strip_prefix("removed ")
        .map(|s| s.split(' ').filter_map(|w| w.parse().ok()).collect())
        .unwrap_or_default();
    let [removed, total] = counts[..] else {
        panic!("no count: {out:?} {err}");
    };
    assert!(total > 0 && total < 100_000, "{out}");
    assert_eq!(removed, total.min(10_000), "{out}");
    let check = run(
        &["check", db.to_str().unwrap(), "--now", DAY0, "--canonical"],
        added.as_bytes(),
    );
    assert_eq!(
        stdout(&check).matches("\tseen\n").count(),
        10_000 - removed,
        "the keys taken back are the keys counted"
    );
}

/// `check`'s exit status speaks for every key it was given: 1 when any
/// was new. A reader of its output that leaves early (`| head -1`) used
/// to end the reading too, so a new key after that point went unread and
/// the status said every key was seen.
#[test]
fn check_whose_reader_left_still_answers_for_every_key() {
    let (_tmp, db) = temp_db();
    let seen = urls("seen", 2000);
    let added = cmd("add", &db, &["--items-per-day", "10000"], seen.as_bytes());
    assert_exit(&added, 0);
    let mut child =
        spawn_piped(Command::new(BIN).args(["check", db.to_str().unwrap(), "--now", DAY0]));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(seen.as_bytes()).unwrap();
    stdin.flush().unwrap();
    // Read one answer, then go away as `head -1` does.
    let mut answers = BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    answers.read_line(&mut first).unwrap();
    assert_eq!(first, "https://example.com/seen/000000\tseen\n");
    drop(answers);
    // The keys that come once nobody reads the answers: one is new.
    let _ = stdin.write_all(urls("seen", 50).as_bytes());
    let _ = stdin.write_all(b"https://example.com/never-added\n");
    drop(stdin);
    let status = child.wait().unwrap();
    let err = read_stderr(&mut child);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(status.code(), Some(1), "a new key was given: {err}");

    // Every key seen: 0, with the reader gone as well.
    let mut child =
        spawn_piped(Command::new(BIN).args(["check", db.to_str().unwrap(), "--now", DAY0]));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(seen.as_bytes()).unwrap();
    drop(child.stdout.take());
    let _ = stdin.write_all(seen.as_bytes());
    drop(stdin);
    let status = child.wait().unwrap();
    let err = read_stderr(&mut child);
    assert_eq!(status.code(), Some(0), "every key was seen: {err}");
}
