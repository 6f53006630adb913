//! Guards the `interval` policy's promise with records staged per writer
//! thread: a key inserted more than one sync interval before a power loss
//! survives it. Writer threads stage their log records in lanes of their
//! own (`Wal::stage`) and a lane moves into the log only when it holds a
//! run of them; the syncer must move every lane before each sync. Here a
//! few threads insert fewer keys than a run, the syncer ticks a few times,
//! and an image of exactly what the syncs made durable (no unsynced page
//! of any file) must hold every key after recovery.

mod common;
#[path = "common/durable.rs"]
mod durable;

use std::collections::HashMap;
use std::fs;
use std::time::{Duration, Instant};

use common::*;
use durable::{build_image, record_syncs, Rng};
use timebloom::{Engine, ManualClock, Options, SyncPolicy, Tier};

#[test]
fn keys_staged_by_several_threads_are_durable_one_interval_later() {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("root");
    fs::create_dir(&root).unwrap();
    let dir = root.join("crawl.tb");
    let durable = record_syncs(&root, &[tmp.path()]);

    let clock = ManualClock::new(day(0));
    let mut cfg = config(&[Tier::daily(2), Tier::weekly(2)], 100_000, 0.01);
    cfg.sync = SyncPolicy::Interval(Duration::from_millis(10));
    let e = Engine::create_with(&dir, cfg, Options::default().clock(clock.clone())).unwrap();
    // Fewer keys per thread than a lane's run: every record stays staged
    // until the syncer moves it.
    let threads = 6u64;
    let per_thread = 25u64;
    std::thread::scope(|s| {
        for t in 0..threads {
            let e = &e;
            s.spawn(move || {
                let mut h = e.handle();
                for i in 0..per_thread {
                    assert!(h.insert(&url(t, i)).unwrap());
                }
            });
        }
    });
    // Several ticks of the syncer, then the power goes: what the syncs made
    // durable, taken before the engine closes (a close flushes everything).
    // The syncer is a thread of its own: on a busy machine its ticks (and
    // their fsyncs) may come late, so a crash image missing keys is taken
    // again, every 100 ms for up to 60 s, until the syncer has made them
    // durable. One that never moves the staged records fails.
    std::thread::sleep(Duration::from_millis(300));
    let start = Instant::now();
    let (lost, recovered, _img) = loop {
        let image = durable.lock().unwrap().clone();
        let img = tempfile::tempdir().unwrap();
        // No file as it was at the crash: only what the syncs made durable.
        build_image(&image, &HashMap::new(), &root, img.path(), &mut Rng(7));
        let opts = Options::default()
            .clock(clock.clone())
            .assume_power_loss(true);
        let recovered = Engine::open_with(img.path().join("crawl.tb"), opts).unwrap();
        let mut lost = Vec::new();
        for t in 0..threads {
            for i in 0..per_thread {
                if !recovered.contains(&url(t, i)).unwrap() {
                    lost.push((t, i));
                }
            }
        }
        if lost.is_empty() || start.elapsed() > Duration::from_secs(60) {
            break (lost, recovered, img);
        }
        drop(recovered);
        std::thread::sleep(Duration::from_millis(100));
    };
    timebloom::testing::set_sync_hook(None);
    drop(e);
    assert!(
        lost.is_empty(),
        "{} of {} keys lost after a power loss {:?} later: {lost:?}",
        lost.len(),
        threads * per_thread,
        start.elapsed() + Duration::from_millis(300)
    );
    recovered.verify().unwrap();
}
