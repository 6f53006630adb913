//! The command line in pipelines: a reader of stdout that goes away early
//! (`| head`), signals that stop a command, and inputs that come slowly.
//! Whatever `filter-new` records it prints first, so a key the next run
//! calls repeated was never lost on the way out.
#![cfg(unix)]

mod cli_support;

use std::io::{BufRead, BufReader, Write};
use std::process::Stdio;

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
