//! Running the `timebloom` binary from the `cli_*` tests.
#![allow(dead_code)]

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::thread::{self, JoinHandle};

/// The `timebloom` binary cargo built for these tests.
pub const BIN: &str = env!("CARGO_BIN_EXE_timebloom");
/// Small filters keep the test directories small (segments are preallocated).
pub const SMALL: &[&str] = &["--items-per-day", "1000"];
/// The instant `cmd` and `filter_new_command` pass as `--now`.
pub const DAY0: &str = "2026-11-02T12:00:00Z";

/// Starts `command` with stdin, stdout and stderr all pipes, for a test
/// that feeds and reads the child itself (see `feed_stdin`).
pub fn spawn_piped(command: &mut Command) -> Child {
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn the command")
}

/// Takes `child`'s stdin and writes `input` to it on a thread, so that a
/// child that prints while it reads never waits on a full stdout pipe;
/// stdin is closed once `input` is written. The thread's result is the
/// write's: an error where the child stopped reading early.
pub fn feed_stdin(child: &mut Child, input: Vec<u8>) -> JoinHandle<io::Result<()>> {
    let mut stdin = child.stdin.take().expect("stdin is a pipe");
    thread::spawn(move || stdin.write_all(&input))
}

/// A new temporary directory and the path `db` in it, not yet created, for
/// an engine; the directory is removed when the `TempDir` is dropped, so
/// a test keeps it to its end.
pub fn temp_db() -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().expect("create a temporary directory");
    let db = tmp.path().join("db");
    (tmp, db)
}

/// Runs the binary with `args`, feeding `input` on stdin; fails on a panic.
pub fn run(args: &[&str], input: &[u8]) -> Output {
    let mut child = spawn_piped(Command::new(BIN).args(args));
    // A command may exit before it reads all of its input: not an error here.
    let writer = feed_stdin(&mut child, input.to_vec());
    let out = child.wait_with_output().expect("wait for timebloom");
    let _ = writer.join().unwrap();
    assert!(
        !stderr(&out).contains("panicked"),
        "panic: {}",
        stderr(&out)
    );
    out
}

/// `run` with `dir` after the command name, `--now DAY0` and, for the
/// commands that may create an engine, `SMALL` sizing.
pub fn cmd(command: &str, dir: &Path, rest: &[&str], input: &[u8]) -> Output {
    let dir = dir.to_str().unwrap();
    let mut args = vec![command, dir, "--now", DAY0];
    args.extend_from_slice(rest);
    if matches!(command, "create" | "add" | "filter-new") && !rest.contains(&"--items-per-day") {
        args.extend_from_slice(SMALL);
    }
    run(&args, input)
}

/// A `Command` for `filter-new DIR --now DAY0` with `SMALL` sizing unless
/// `rest` (which follows) gives `--items-per-day`, for a test that wires
/// the child's stdin, stdout or stderr itself.
pub fn filter_new_command(dir: &Path, rest: &[&str]) -> Command {
    let mut command = Command::new(BIN);
    command.args(["filter-new", dir.to_str().unwrap(), "--now", DAY0]);
    if !rest.contains(&"--items-per-day") {
        command.args(SMALL);
    }
    command.args(rest);
    command
}

/// Reads the rest of `child`'s stdout (a pipe, taken from the child) to
/// its end, as text.
pub fn read_stdout(child: &mut Child) -> String {
    let mut text = String::new();
    let mut pipe = child.stdout.take().expect("stdout is a pipe");
    pipe.read_to_string(&mut text).expect("read stdout");
    text
}

/// Reads the rest of `child`'s stderr (a pipe, taken from the child) to
/// its end, as text.
pub fn read_stderr(child: &mut Child) -> String {
    let mut text = String::new();
    let mut pipe = child.stderr.take().expect("stderr is a pipe");
    pipe.read_to_string(&mut text).expect("read stderr");
    text
}

/// Asserts that the run in `out` exited with `want`, showing its stderr
/// if it did not.
#[track_caller]
pub fn assert_exit(out: &Output, want: i32) {
    assert_eq!(code(out), want, "{}", stderr(out));
}

/// Asserts that the stderr of the run in `out` contains `text`, showing
/// that stderr if it does not.
#[track_caller]
pub fn assert_stderr_contains(out: &Output, text: &str) {
    assert!(stderr(out).contains(text), "{}", stderr(out));
}

/// The exit code of the run in `out`; fails if a signal ended it.
pub fn code(out: &Output) -> i32 {
    out.status.code().expect("exited by a signal")
}

/// The stdout of the run in `out`; fails if it is not UTF-8.
pub fn stdout(out: &Output) -> String {
    String::from_utf8(out.stdout.clone()).unwrap()
}

/// The stderr of the run in `out`, with any bytes that are not UTF-8 replaced.
pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Gzip of `data`.
pub fn gzip(data: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(data).unwrap();
    e.finish().unwrap()
}
