//! `filter-new` stopped by SIGTERM or SIGINT: every key it recorded is
//! printed, so a pipeline stopped by a service manager, `timeout` or
//! Ctrl-C never loses a line it will not see again. Waiting for input, a
//! signal ends it at once; one it was started with ignored (`nohup`) stays
//! ignored.
#![cfg(unix)]

mod cli_support;

use std::io::Read;
use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cli_support::*;
use rustix::process::{kill_process, Pid, Signal};

/// Runs `filter-new` over 20,000 new keys with stdout a pipe that nobody
/// reads until the pipe is full (the command then waits in a write with a
/// batch recorded and only partly printed), sends `sig`, then reads
/// everything. Returns the lines printed and the keys recorded.
fn stopped_by(sig: Signal) -> (usize, usize) {
    let (tmp, db) = temp_db();
    let keys = tmp.path().join("keys.txt");
    let text: String = (0..20_000)
        .map(|i| format!("https://example.com/page/{i:08}\n"))
        .collect();
    std::fs::write(&keys, &text).unwrap();
    let (mut read, write) = std::io::pipe().unwrap();
    // A rate low enough that no unrecorded key of the 20,000 reads as seen.
    let mut child = filter_new_command(&db, &["--items-per-day", "20000", "--fpr", "1e-9"])
        .arg(&keys)
        .stdin(Stdio::null())
        .stdout(write)
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The pipe holds 64 KiB: once it is full, the command waits to write.
    let start = Instant::now();
    while rustix::io::ioctl_fionread(&read).unwrap() < 60_000 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the pipe never filled"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(200));
    kill_process(Pid::from_child(&child), sig).unwrap();
    let mut out = Vec::new();
    read.read_to_end(&mut out).unwrap();
    let status = child.wait().unwrap();
    let err = read_stderr(&mut child);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(
        status.signal(),
        Some(sig.as_raw()),
        "ends by the signal, as the shell expects: {status:?}: {err}"
    );
    let printed = out.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
    let check = run(
        &["check", db.to_str().unwrap(), "--now", DAY0],
        text.as_bytes(),
    );
    let recorded = stdout(&check).matches("\tseen\n").count();
    (printed, recorded)
}

#[test]
fn a_signal_mid_stream_leaves_no_key_recorded_but_unprinted() {
    for sig in [Signal::TERM, Signal::INT] {
        let (printed, recorded) = stopped_by(sig);
        assert!(
            printed > 0 && printed < 20_000,
            "{sig:?}: printed {printed}"
        );
        assert_eq!(
            recorded, printed,
            "{sig:?}: {recorded} keys recorded, {printed} lines printed"
        );
    }
}

/// Starts `filter-new` on a new engine through `sh -c "<prelude> exec ..."`
/// with stdin a pipe left open, and returns once it waits for input (its
/// note on creating the engine is printed after the signals are set up).
fn waiting_for_input(prelude: &str, db: &std::path::Path) -> std::process::Child {
    let script =
        format!("{prelude} exec \"$0\" filter-new \"$1\" --now {DAY0} --items-per-day 1000");
    let mut child =
        spawn_piped(Command::new("sh").args(["-c", &script, BIN, db.to_str().unwrap()]));
    let mut note = [0u8; 1];
    let mut err = child.stderr.take().unwrap();
    // The first byte of the note: the engine is created, stdin is next.
    err.read_exact(&mut note).unwrap();
    std::thread::spawn(move || std::io::copy(&mut err, &mut std::io::sink()));
    std::thread::sleep(Duration::from_millis(200));
    child
}

/// Waits for `child` to end, for at most 10 seconds.
fn ended(child: &mut std::process::Child) -> Option<std::process::ExitStatus> {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(10) {
        if let Some(status) = child.try_wait().unwrap() {
            return Some(status);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[test]
fn a_signal_while_waiting_for_input_ends_the_command_at_once() {
    for sig in [Signal::TERM, Signal::INT, Signal::HUP] {
        let tmp = tempfile::tempdir().unwrap();
        let mut child = waiting_for_input("", &tmp.path().join("db"));
        kill_process(Pid::from_child(&child), sig).unwrap();
        let status = ended(&mut child);
        let _ = child.kill();
        assert_eq!(
            status.and_then(|s| s.signal()),
            Some(sig.as_raw()),
            "{sig:?}: {status:?}"
        );
    }
}

#[test]
fn a_signal_ignored_at_start_stays_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    // As `nohup` starts it: SIGHUP ignored.
    let mut child = waiting_for_input("trap '' HUP;", &tmp.path().join("db"));
    let pid = Pid::from_child(&child);
    kill_process(pid, Signal::HUP).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let early = child.try_wait().unwrap();
    if early.is_some() {
        let _ = child.kill();
    }
    assert_eq!(early, None, "ended by an ignored SIGHUP");
    // It goes on reading, and prints the new line.
    let mut stdin = child.stdin.take().unwrap();
    std::io::Write::write_all(&mut stdin, b"https://example.com/a\n").unwrap();
    drop(stdin);
    let out = read_stdout(&mut child);
    let status = ended(&mut child).expect("ends once its input does");
    assert!(status.success(), "{status:?}");
    assert_eq!(out, "https://example.com/a\n");
}
