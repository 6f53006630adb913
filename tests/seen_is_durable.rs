//! Under `always`, an insert that answers "seen" returns only once the key
//! is as durable as a "new" answer: a key written by another call still in
//! flight (its bits set, its log record not yet appended) makes the second
//! caller wait for that record, so the sync before it returns covers it.
//! Otherwise a crawler told "seen" would skip the page, and a power loss
//! before the first call's record reached the log would forget it.

mod common;

use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::*;
use timebloom::testing::set_pause_hook;
use timebloom::{Engine, ManualClock, SyncPolicy, Tier};

/// The pause hook is process-wide: one test at a time holds it.
static HOOK: Mutex<()> = Mutex::new(());

const KEY: &[u8] = b"https://example.com/contended";

/// Holds the first writer of `dir` that reaches "written, not logged"
/// until the returned sender is dropped; the receiver hears when it parks.
fn park_first_writer(dir: &Path) -> (mpsc::Sender<()>, mpsc::Receiver<()>) {
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (parked_tx, parked_rx) = mpsc::channel::<()>();
    let dir = dir.to_path_buf();
    let once = Mutex::new(Some((go_rx, parked_tx)));
    set_pause_hook(Some(Box::new(move |point, path| {
        if point == "written, not logged" && path.starts_with(&dir) {
            let taken = once.lock().unwrap().take();
            if let Some((go, parked)) = taken {
                let _ = parked.send(());
                let _ = go.recv(); // until the test lets go
            }
        }
    })));
    (go_tx, parked_rx)
}

/// Parks a first insert of `KEY` between its write and its log record,
/// starts a second one (`second`), and returns whether the second
/// returned within `early` while the first was parked, with both answers.
/// (A second call that waits for the first waits until the first is let
/// go, after `early`: any `early` tells the two apart, and a long one
/// leaves a busy machine time to run a second call that does not wait.)
fn race(sync: SyncPolicy, early: Duration, second: fn(&Engine) -> bool) -> (bool, bool, bool) {
    let _g = HOOK.lock().unwrap_or_else(|e| e.into_inner());
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("crawl.tb");
    let cfg = timebloom::Config {
        sync,
        ..config(&[Tier::daily(3)], 10_000, 0.001)
    };
    let e = Arc::new(create(&dir, cfg, &ManualClock::new(day(0))));
    let (go, parked) = park_first_writer(&dir);
    let e1 = Arc::clone(&e);
    let first = std::thread::spawn(move || e1.insert(KEY).unwrap());
    parked
        .recv_timeout(Duration::from_secs(30))
        .expect("the first insert parked");
    let (tx, rx) = mpsc::channel();
    let e2 = Arc::clone(&e);
    std::thread::spawn(move || {
        let _ = tx.send(second(&e2));
    });
    let early = rx.recv_timeout(early).ok();
    drop(go);
    let first = first.join().unwrap();
    let second = early.unwrap_or_else(|| rx.recv_timeout(Duration::from_secs(30)).unwrap());
    set_pause_hook(None);
    (early.is_some(), first, second)
}

#[test]
fn under_always_a_seen_answer_waits_for_the_writer_in_flight() {
    let single = |e: &Engine| e.insert(KEY).unwrap();
    let batch = |e: &Engine| e.insert_batch(&[KEY]).unwrap()[0];
    let within = |e: &Engine| e.insert_within(KEY, Duration::from_secs(86_400)).unwrap();
    for (what, second) in [
        ("insert", single as fn(&Engine) -> bool),
        ("insert_batch", batch),
        ("insert_within", within),
    ] {
        // The second must not answer while the first is parked: given
        // 300 ms to do so wrongly.
        let (early, first, second) = race(SyncPolicy::Always, Duration::from_millis(300), second);
        assert!(
            !early,
            "{what} answered while the key's record was not yet logged"
        );
        assert!(first, "the first insert claims the key");
        assert!(!second, "{what}: the second is told it was seen");
    }
}

#[test]
fn the_interval_policy_does_not_wait() {
    // It promises nothing per call, so a key found present answers at once
    // (the first insert is still parked). `none` has no log: no record to
    // wait for.
    // Given 30 s to answer, with the first parked all that time.
    let (early, first, second) = race(
        SyncPolicy::Interval(Duration::from_secs(1)),
        Duration::from_secs(30),
        |e| e.insert(KEY).unwrap(),
    );
    assert!(early, "a seen answer under interval waited for a writer");
    assert!(first && !second);
}
