//! `verify` beside a checkpoint: verification lists the files of `wal/`,
//! then reads them; a checkpoint of the writer that runs in between
//! deletes the log files and shadow copies it supersedes. A file gone
//! that way is no damage and no failure: verify (of the writer itself,
//! or of a read-only engine, as `timebloom verify` opens one beside a
//! running writer) reports the engine intact. The pause hook holds the
//! verification between its listing and its reads (one test: the hook is
//! process-wide).

mod common;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};

/// Holds the first thread that reaches `point` in `wal` until `go`.
struct Hold {
    arrived: Arc<AtomicBool>,
    go: Arc<AtomicBool>,
}

impl Hold {
    fn install(point: &'static str, wal: &Path) -> Hold {
        let (arrived, go) = (
            Arc::new(AtomicBool::new(false)),
            Arc::new(AtomicBool::new(false)),
        );
        let (a, g, wal) = (Arc::clone(&arrived), Arc::clone(&go), wal.to_path_buf());
        timebloom::testing::set_pause_hook(Some(Box::new(move |p, path: &Path| {
            if p == point && path == wal && !a.swap(true, Ordering::SeqCst) {
                while !g.load(Ordering::SeqCst) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        })));
        Hold { arrived, go }
    }

    /// Waits for the paused thread to arrive (at most two minutes: a
    /// pause point never reached fails the test instead of hanging it).
    fn wait(&self) {
        let start = std::time::Instant::now();
        while !self.arrived.load(Ordering::SeqCst) {
            assert!(
                start.elapsed() < Duration::from_secs(120),
                "the pause point was never reached"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    fn release(self) {
        self.go.store(true, Ordering::SeqCst);
        timebloom::testing::set_pause_hook(None);
    }
}

fn wal_files(wal: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(wal)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.to_string_lossy().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// Runs `verify` on its own thread, held at `point`; meanwhile the writer
/// takes more keys and checkpoints (`flush`), deleting the files of `wal/`
/// with `suffix` that verify listed; then verify goes on.
fn verify_beside_a_checkpoint(
    writer: &Arc<Engine>,
    verifier: &Arc<Engine>,
    point: &'static str,
    suffix: &str,
    next: &mut u64,
) {
    let wal = writer.path().join("wal");
    let before = wal_files(&wal, suffix);
    assert!(!before.is_empty(), "no {suffix} file to list");
    let hold = Hold::install(point, &wal);
    let v = Arc::clone(verifier);
    let verify = std::thread::spawn(move || v.verify());
    hold.wait();
    for _ in 0..50 {
        writer.insert(&url(1, *next)).unwrap();
        *next += 1;
    }
    writer.flush().unwrap();
    assert!(
        before.iter().all(|p| !p.exists()),
        "the checkpoint deleted none of {before:?}"
    );
    hold.release();
    verify
        .join()
        .unwrap()
        .unwrap_or_else(|e| panic!("verify held at {point:?} across a checkpoint: {e}"));
}

#[test]
fn verify_beside_a_checkpoint_finds_the_engine_intact() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(3).counting()], 10_000, 0.01);
    cfg.sync = SyncPolicy::Always;
    let opts = Options::default().clock(clock.clone());
    let writer = Arc::new(Engine::create_with(&dir, cfg, opts.clone()).unwrap());
    let mut next = 0;
    for _ in 0..100 {
        writer.insert(&url(1, next)).unwrap();
        next += 1;
    }
    writer.flush().unwrap();
    for _ in 0..10 {
        writer.insert(&url(1, next)).unwrap();
        next += 1;
    }
    // The writer's own verify: its log, then its shadows.
    verify_beside_a_checkpoint(&writer, &writer, "logs listed", ".log", &mut next);
    verify_beside_a_checkpoint(&writer, &writer, "shadows listed", ".shadow", &mut next);
    // A read-only engine's (`timebloom verify DIR` beside a running
    // writer): the same, from the checkpoint its open read.
    for (point, suffix) in [("logs listed", ".log"), ("shadows listed", ".shadow")] {
        let reader = Arc::new(Engine::open_read_only_with(&dir, opts.clone()).unwrap());
        verify_beside_a_checkpoint(&writer, &reader, point, suffix, &mut next);
    }
    writer.verify().unwrap();
}
