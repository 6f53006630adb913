//! A checkpoint that fails after a write was logged and synced does not
//! turn that write's answer into an error. The key is recorded: told
//! "error", a crawler would ask again, hear "seen", and never fetch the
//! page. The engine latches instead: the next write reports `PreviousIo`,
//! `close` reports the cause, and a reopen finds every key answered.
//!
//! Its own test binary: the fault hook is process-wide.

mod common;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use common::*;
use timebloom::{Engine, Error, ManualClock, Options, SyncPolicy, Tier};

/// Inserts distinct keys one at a time under `always`, with a checkpoint
/// every few records, while the first `op` on a path containing `file`
/// fails. Returns the keys acknowledged and the error that stopped the run.
///
/// The tier is planned for far more keys than the run inserts: a chain
/// growth writes the manifest too, in the writing call (before the key is
/// written, so its failure is that call's), and a background checkpoint
/// slow to finish (it runs at nice 10) once let the growth's manifest be
/// the first one, about one run in ten on a 2-core machine.
fn run(dir: &Path, tier: Tier, op: &'static str, file: &'static str) -> (Vec<Vec<u8>>, Error) {
    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[tier], 100_000, 0.01);
    cfg.sync = SyncPolicy::Always;
    let opts = Options::default()
        .clock(clock.clone())
        .checkpoint_log_bytes(40 * 16);
    let e = Engine::create_with(dir, cfg, opts).unwrap();
    let fired = Arc::new(AtomicU64::new(0));
    let hook = Arc::clone(&fired);
    let root = dir.to_path_buf();
    timebloom::testing::set_fault_hook(Some(Box::new(move |o, path: &Path| {
        let ours = path.starts_with(&root) && path.to_string_lossy().contains(file);
        (ours && o == op && hook.fetch_add(1, Ordering::SeqCst) == 0)
            .then(|| std::io::Error::from_raw_os_error(28)) // ENOSPC
    })));
    let mut acked = Vec::new();
    let mut stop = None;
    for i in 0..20_000 {
        let k = url(0, i);
        match e.insert(&k) {
            Ok(_) => acked.push(k),
            Err(err) => {
                stop = Some(err);
                break;
            }
        }
    }
    timebloom::testing::set_fault_hook(None);
    assert_eq!(fired.load(Ordering::SeqCst), 1, "{op} of {file} never ran");
    let stop = stop.expect("no write failed after the checkpoint did");
    // The failure reaches a caller: the writes after it, and `close`.
    assert!(matches!(stop, Error::PreviousIo), "first error: {stop}");
    assert!(e.contains(acked.last().unwrap()).unwrap(), "lookups go on");
    match e.close() {
        Err(Error::Io { op: o, .. }) => assert_eq!(o, op),
        other => panic!("close after a failed checkpoint: {other:?}"),
    }
    (acked, stop)
}

fn reopen_finds(dir: &Path, acked: &[Vec<u8>]) {
    let clock = ManualClock::new(day(0));
    let e = Engine::open_with(dir, Options::default().clock(clock)).unwrap();
    for (i, k) in acked.iter().enumerate() {
        assert!(e.contains(k).unwrap(), "acknowledged key {i} lost");
    }
    e.verify().unwrap();
    e.close().unwrap();
}

#[test]
fn a_failed_checkpoint_does_not_fail_the_write_that_ran_it() {
    let tmp = tempfile::tempdir().unwrap();
    // Counting tiers checkpoint in the writing call (shadow copies).
    let dir = tmp.path().join("counting.tb");
    let (acked, _) = run(&dir, Tier::daily(2).counting(), "create shadow", "");
    assert!(!acked.is_empty());
    reopen_finds(&dir, &acked);
    // Bloom tiers checkpoint on a thread; a later write commits it by
    // writing the manifest.
    let dir = tmp.path().join("bloom.tb");
    let (acked, _) = run(&dir, Tier::daily(2), "rename", "MANIFEST");
    assert!(!acked.is_empty());
    reopen_finds(&dir, &acked);
}
