//! `filter-new` stopped by SIGTERM or SIGINT: every key it recorded is
//! printed, so a pipeline stopped by a service manager, `timeout` or
//! Ctrl-C never loses a line it will not see again.
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
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let keys = tmp.path().join("keys.txt");
    let text: String = (0..20_000)
        .map(|i| format!("https://example.com/page/{i:08}\n"))
        .collect();
    std::fs::write(&keys, &text).unwrap();
    let (mut read, write) = std::io::pipe().unwrap();
    // A rate low enough that no unrecorded key of the 20,000 reads as seen.
    let mut child = Command::new(BIN)
        .args(["filter-new", db.to_str().unwrap(), "--now", DAY0])
        .args(["--items-per-day", "20000", "--fpr", "1e-9"])
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
    let mut err = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
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
