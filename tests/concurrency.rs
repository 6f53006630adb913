//! Guards check-and-insert under concurrency: of 8 threads inserting the
//! same keys, exactly one is told each key is new.

mod common;

use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use common::*;
use timebloom::{ManualClock, Tier};

#[test]
fn exactly_one_thread_sees_each_new_key() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = Arc::new(create(
        dir.path(),
        config(&[Tier::daily(3), Tier::weekly(2)], 50_000, 0.001),
        &clock,
    ));
    const KEYS: u64 = 100_000;
    let wins: Arc<Vec<AtomicU8>> = Arc::new((0..KEYS).map(|_| AtomicU8::new(0)).collect());
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let (e, wins) = (Arc::clone(&e), Arc::clone(&wins));
            std::thread::spawn(move || {
                // Half the threads go forwards, half backwards, some in batches.
                for j in 0..KEYS {
                    let i = if t % 2 == 0 { j } else { KEYS - 1 - j };
                    let new = if t % 4 < 2 {
                        e.insert(&url(7, i)).unwrap()
                    } else {
                        e.insert_batch(&[url(7, i)]).unwrap()[0]
                    };
                    if new {
                        wins[i as usize].fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    // A key can be a false positive of earlier keys (then nobody sees it
    // new); at 0.1% that is rare, and never two winners.
    let mut zero = 0;
    for (i, w) in wins.iter().enumerate() {
        match w.load(Ordering::Relaxed) {
            1 => {}
            0 => zero += 1,
            n => panic!("key {i} was new for {n} threads"),
        }
    }
    assert!(
        zero < (KEYS / 500) as usize,
        "{zero} keys never reported new"
    );
    for i in 0..KEYS {
        assert!(e.contains(&url(7, i)).unwrap());
    }
}
