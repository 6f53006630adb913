//! One writer per directory: the lock holds whatever path reaches the
//! directory, and however its `LOCK` file is treated while a writer runs.

mod common;

use std::process::{Command, Stdio};

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, Tier};

/// A `LOCK` deleted by hand while a writer runs (a cleanup script, an
/// operator who took it for a stale lock) let a second writer make a new
/// one, lock it and write the same files as the first.
#[test]
fn a_deleted_lock_file_does_not_let_a_second_writer_in() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 1_000, 0.01), &clock);
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    let r = Engine::open_with(&dir, Options::default().clock(clock.clone()));
    assert!(
        matches!(r, Err(Error::Locked { .. })),
        "second writer: {:?}",
        r.as_ref().map(|_| ())
    );
    // A create there is refused too, and changes nothing.
    let r = Engine::create_with(
        &dir,
        config(&[Tier::daily(3)], 1_000, 0.01),
        Options::default().clock(clock.clone()),
    );
    assert!(
        matches!(r, Err(Error::Locked { .. } | Error::AlreadyExists { .. })),
        "create: {:?}",
        r.as_ref().map(|_| ())
    );
    drop(e);
    // Once the writer is gone, the directory opens (a new LOCK is made);
    // past the children other tests spawn meanwhile (`past_spawns`).
    let e = open_past_spawns(&dir, Options::default().clock(clock.clone())).unwrap();
    drop(e);
    assert!(dir.join("LOCK").exists());
}

/// The same, across processes: this process holds the directory and a
/// writer of the command line is started beside it once `LOCK` is gone.
#[test]
fn a_deleted_lock_file_does_not_let_a_second_cli_writer_in() {
    let bin = env!("CARGO_BIN_EXE_timebloom");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 1_000, 0.01), &clock);
    let maintain = || {
        Command::new(bin)
            .args(["maintain", "--now", "2026-01-05T12:00:00Z"])
            .arg(&dir)
            .stdin(Stdio::null())
            .output()
            .unwrap()
    };
    let out = maintain();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{err}");
    std::fs::remove_file(dir.join("LOCK")).unwrap();
    let out = maintain();
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "second writer ran: {err}");
    assert!(err.contains("open in another process"), "{err}");
    drop(e);
}

/// `Locked` names the directory and says what to do: close the other
/// writer, or read beside it with a read-only open. It said only "one
/// writer at a time".
#[test]
fn locked_says_what_to_do() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 1_000, 0.01), &clock);
    let Err(err) = Engine::open_with(&dir, Options::default().clock(clock.clone())) else {
        panic!("a second writer opened");
    };
    let msg = err.to_string();
    assert!(msg.contains(&dir.display().to_string()), "{msg}");
    assert!(msg.contains("close"), "{msg}");
    assert!(msg.contains("read-only"), "{msg}");
    drop(e);
}

/// A create held just after its first manifest is written (the commit
/// point; no window made yet): a writer or a create beside it is told
/// `Locked`, and a read-only open sees an engine without windows that
/// answers "new", or refuses with an error; it never panics.
#[test]
fn opens_beside_a_create_halfway() {
    use std::sync::{mpsc, Arc, Mutex};
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let (at_tx, at_rx) = mpsc::channel::<()>();
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let state = Arc::new(Mutex::new(Some((at_tx, go_rx))));
    let d = dir.clone();
    timebloom::testing::set_fault_hook(Some(Box::new(move |_op, path| {
        if path.starts_with(&d) && d.join("MANIFEST").exists() {
            if let Some((at, go)) = state.lock().unwrap().take() {
                at.send(()).unwrap();
                go.recv().unwrap();
            }
        }
        None
    })));
    let (d, c) = (dir.clone(), clock.clone());
    let maker = std::thread::spawn(move || {
        Engine::create_with(
            &d,
            config(&[Tier::daily(3)], 1_000, 0.01),
            Options::default().clock(c),
        )
        .map(|_| ())
    });
    at_rx.recv().unwrap();
    let opts = || Options::default().clock(clock.clone());
    let w = Engine::open_with(&dir, opts());
    let c = Engine::create_with(&dir, config(&[Tier::daily(3)], 1_000, 0.01), opts());
    let ro = Engine::open_read_only_with(&dir, opts()).map(|e| e.contains(b"k"));
    go_tx.send(()).unwrap();
    let made = maker.join().unwrap();
    timebloom::testing::set_fault_hook(None);
    assert!(
        matches!(w, Err(Error::Locked { .. })),
        "{:?}",
        w.map(|_| ())
    );
    assert!(
        matches!(c, Err(Error::Locked { .. } | Error::AlreadyExists { .. })),
        "{:?}",
        c.map(|_| ())
    );
    assert!(matches!(ro, Ok(Ok(false)) | Err(_)), "{ro:?}");
    made.unwrap();
}

/// Creates of the same new directory from several processes at once:
/// exactly one succeeds, the others exit 2 naming the directory, and the
/// directory is the winner's engine (it opens, with its tiers).
#[test]
fn concurrent_cli_creates_have_one_winner() {
    let bin = env!("CARGO_BIN_EXE_timebloom");
    let tmp = tempfile::tempdir().unwrap();
    for round in 0..4 {
        let dir = tmp.path().join(format!("e{round}.tb"));
        let kids: Vec<_> = (0..4)
            .map(|i| {
                Command::new(bin)
                    .args(["create", "--items-per-day", "1000", "--tiers"])
                    .arg(["7d", "3d", "2d", "5d"][i])
                    .arg(&dir)
                    .stdout(Stdio::null())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<_> = kids
            .into_iter()
            .map(|k| k.wait_with_output().unwrap())
            .collect();
        let won: Vec<usize> = (0..4).filter(|&i| outs[i].status.success()).collect();
        assert_eq!(won.len(), 1, "round {round}: {outs:?}");
        for (i, o) in outs.iter().enumerate() {
            if i != won[0] {
                let err = String::from_utf8_lossy(&o.stderr);
                assert_eq!(o.status.code(), Some(2), "{err}");
                assert!(err.contains(&dir.display().to_string()), "{err}");
            }
        }
        let e = Engine::open_read_only(&dir).unwrap();
        let days = [7, 3, 2, 5][won[0]];
        assert_eq!(e.config().tiers, vec![Tier::daily(days)], "round {round}");
    }
}

/// A writer killed with SIGKILL leaves no lock behind: the next writer
/// opens and finds the key the killed one printed (recorded before print).
#[test]
fn a_killed_writer_leaves_no_lock() {
    use std::io::{BufRead, BufReader, Write};
    let bin = env!("CARGO_BIN_EXE_timebloom");
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let now = "2026-01-05T12:00:00Z";
    let mut w = Command::new(bin)
        .args(["filter-new", "--sync", "always", "--now", now])
        .arg(&dir)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut keys = w.stdin.take().unwrap();
    keys.write_all(b"a\n").unwrap();
    keys.flush().unwrap();
    // The line comes back once it is recorded: the writer holds the lock.
    let mut line = String::new();
    BufReader::new(w.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line, "a\n");
    w.kill().unwrap();
    w.wait().unwrap();
    drop(keys);
    let clock = ManualClock::new(day(0) + std::time::Duration::from_secs(43_200));
    let e = open_past_spawns(&dir, Options::default().clock(clock)).unwrap();
    assert!(e.contains(b"a").unwrap());
}

/// The lock holds whatever path reaches the directory: a symlink, `dir/.`,
/// a path through `..`, a relative path (from the tests' working
/// directory).
#[test]
fn every_path_to_the_directory_meets_the_lock() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, config(&[Tier::daily(3)], 1_000, 0.01), &clock);
    std::os::unix::fs::symlink(&dir, tmp.path().join("link")).unwrap();
    std::fs::create_dir(tmp.path().join("sub")).unwrap();
    let cwd = std::env::current_dir().unwrap();
    let up = cwd.components().count() - 1;
    let relative = std::iter::repeat_n("..", up)
        .collect::<std::path::PathBuf>()
        .join(dir.strip_prefix("/").unwrap());
    for p in [
        tmp.path().join("link"),
        dir.join("."),
        tmp.path().join("sub/../e.tb"),
        relative,
    ] {
        let r = Engine::open_with(&p, Options::default().clock(clock.clone()));
        assert!(
            matches!(r, Err(Error::Locked { .. })),
            "{}: {:?}",
            p.display(),
            r.as_ref().map(|_| ())
        );
    }
    drop(e);
}
