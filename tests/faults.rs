//! Counted fault injection: the Nth file operation with a durability
//! meaning (create, allocate, write, rename, delete, mmap, msync, fsync)
//! fails with ENOSPC, EIO or a short write, for every N a workload with
//! rotation, growth, expiry and counting removes reaches. Nothing panics,
//! the error reaches a caller, and reopening without faults finds every
//! write acknowledged before it.

mod common;

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};

/// Runs the workload until its first error; returns the keys acknowledged
/// (with whether each must still be present) and whether an error was seen.
fn workload(dir: &Path, counting: bool, sync: SyncPolicy) -> (Vec<(Vec<u8>, bool)>, bool) {
    let clock = ManualClock::new(day(0));
    let tiers: Vec<Tier> = [Tier::daily(2), Tier::weekly(2)]
        .into_iter()
        .map(|t| if counting { t.counting() } else { t })
        .collect();
    let mut cfg = config(&tiers, 100, 0.01);
    cfg.sync = sync;
    let mut acked = Vec::new();
    let e = match Engine::create_with(dir, cfg, Options::default().clock(clock.clone())) {
        Ok(e) => e,
        Err(_) => return (acked, true),
    };
    let mut failed = false;
    'days: for d in 0..4 {
        clock.set(day(d));
        for b in 0..4 {
            let keys: Vec<Vec<u8>> = (0..60).map(|i| url(d, b * 60 + i)).collect();
            match e.insert_batch(&keys) {
                Ok(_) => acked.extend(keys.into_iter().map(|k| (k, d >= 2))),
                Err(timebloom::Error::Incomplete { answers, .. }) => {
                    // The answered prefix was recorded; under `always` it
                    // is durable only if the batch's sync succeeded, which
                    // it did not: check nothing of it.
                    let _ = answers;
                    failed = true;
                    break 'days;
                }
                Err(_) => {
                    failed = true;
                    break 'days;
                }
            }
            if counting {
                let k = url(d, b * 60);
                match e.remove(&k) {
                    Ok(true) => {
                        if let Some(m) = acked.iter_mut().find(|m| m.0 == k) {
                            m.1 = false;
                        }
                    }
                    Ok(false) => panic!("remove of an inserted key refused"),
                    Err(_) => {
                        // A write that failed may or may not have been
                        // applied: the key is not checked either way.
                        if let Some(m) = acked.iter_mut().find(|m| m.0 == k) {
                            m.1 = false;
                        }
                        failed = true;
                        break 'days;
                    }
                }
            }
        }
    }
    if failed {
        // A failed write latches writes; lookups keep working.
        if let Some((k, true)) = acked.iter().find(|m| m.1) {
            assert!(e.contains(k).expect("a lookup after a failed write"));
        }
    }
    if e.close().is_err() {
        failed = true;
    }
    (acked, failed)
}

struct Counter {
    calls: AtomicU64,
    /// The injected fault happened (runs differ in length a little: the
    /// random hash seed moves when chains grow).
    fired: AtomicU64,
    fail_at: AtomicU64,
    kind: AtomicU64,
}

fn fault_error(kind: u64) -> io::Error {
    match kind % 3 {
        0 => io::Error::from_raw_os_error(28), // ENOSPC
        1 => io::Error::from_raw_os_error(5),  // EIO
        _ => io::Error::new(io::ErrorKind::WriteZero, "short write (injected)"),
    }
}

/// `(I/O calls of a clean run, runs with one of them failing)`.
fn every_n(counting: bool, sync: SyncPolicy, root: &Path) -> (u64, u64) {
    let c = Arc::new(Counter {
        calls: AtomicU64::new(0),
        fired: AtomicU64::new(0),
        fail_at: AtomicU64::new(u64::MAX),
        kind: AtomicU64::new(0),
    });
    let hook = Arc::clone(&c);
    let root_s = root.to_path_buf();
    timebloom::testing::set_fault_hook(Some(Box::new(move |op, path: &Path| {
        if !path.starts_with(&root_s) {
            return None; // another test's engine
        }
        // Faulting a new window's pages in is a hint with no durability
        // meaning, made on a thread of its own (its count differs run to
        // run) whose failure is reported to nobody by design.
        if op == "prefault" {
            return None;
        }
        let n = hook.calls.fetch_add(1, Ordering::SeqCst) + 1;
        let hit = n == hook.fail_at.load(Ordering::SeqCst);
        if hit {
            hook.fired.store(1, Ordering::SeqCst);
        }
        hit.then(|| fault_error(hook.kind.load(Ordering::SeqCst)))
    })));
    // A clean run counts the calls.
    let dir = root.join("clean");
    let (acked, failed) = workload(&dir, counting, sync);
    assert!(!failed && !acked.is_empty());
    let total = c.calls.load(Ordering::SeqCst);
    let stride = if std::env::var_os("TIMEBLOOM_FULL").is_some() {
        1
    } else {
        (total / 150).max(1)
    };
    let mut n = 1;
    let mut runs = 0;
    while n <= total {
        runs += 1;
        let dir = root.join(format!("n{n}"));
        c.calls.store(0, Ordering::SeqCst);
        c.fired.store(0, Ordering::SeqCst);
        c.kind.store(n, Ordering::SeqCst);
        c.fail_at.store(n, Ordering::SeqCst);
        let (acked, failed) = workload(&dir, counting, sync);
        let fired = c.fired.load(Ordering::SeqCst) == 1;
        assert!(
            failed || !fired,
            "call {n} of {total} failed and nobody was told"
        );
        c.fail_at.store(u64::MAX, Ordering::SeqCst);
        if !dir.join("MANIFEST").exists() {
            assert!(acked.is_empty(), "call {n}: keys acknowledged, no engine");
            n += stride;
            continue;
        }
        // Reopen without faults: the last acknowledged state.
        let clock = ManualClock::new(day(3));
        let opts = Options::default().clock(clock).allow_clock_jump(true);
        let e = Engine::open_with(&dir, opts)
            .unwrap_or_else(|e| panic!("call {n} of {total}: reopen failed: {e}"));
        for (i, (k, present)) in acked.iter().enumerate() {
            if *present {
                assert!(
                    e.contains(k).unwrap(),
                    "call {n}: acknowledged key {i} lost"
                );
            }
        }
        e.verify()
            .unwrap_or_else(|err| panic!("call {n}: verify after reopen: {err}"));
        n += stride;
    }
    timebloom::testing::set_fault_hook(None);
    (total, runs)
}

// One test: the fault hook is process-wide.
#[test]
fn the_nth_io_call_fails_for_every_n() {
    let tmp = tempfile::tempdir().unwrap();
    for (counting, sync) in [
        (false, SyncPolicy::Always),
        (true, SyncPolicy::Always),
        (false, SyncPolicy::None),
    ] {
        let root = tmp.path().join(format!("{counting}-{sync}"));
        let (total, runs) = every_n(counting, sync, &root);
        println!(
            "counting {counting}, sync {sync}: {total} I/O calls, {runs} runs with one failing \
             (every one with TIMEBLOOM_FULL=1)"
        );
    }
}
