//! Read-only opens beside a writer that rotates day by day: every key the
//! writer acknowledged before a reader opened is seen by that reader, for
//! as long as the writer keeps it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant, UNIX_EPOCH};
use timebloom::{Config, Engine, ManualClock, Options, SyncPolicy, Tier};

mod common;
use common::expired_by_writer_day;

const T0: u64 = 1_767_571_200; // 2026-01-05T00:00:00Z, a Monday

fn noon(d: u64) -> std::time::SystemTime {
    UNIX_EPOCH + Duration::from_secs(T0 + d * 86_400 + 12 * 3600)
}

fn keys(day: u64) -> Vec<Vec<u8>> {
    (0..300)
        .map(|j| format!("k{day}-{j}").into_bytes())
        .collect()
}

/// The windows a reader's `stats` lists, by tier: window, state, chain
/// length and occupied cells.
fn describe(e: &Engine) -> String {
    match e.stats() {
        Ok(s) => s
            .tiers
            .iter()
            .map(|t| {
                let segs: Vec<String> = t
                    .segments
                    .iter()
                    .map(|g| {
                        format!(
                            "{}:{}:{}sub:{}occ",
                            g.window, g.state, g.subfilters, g.occupied
                        )
                    })
                    .collect();
                format!("{} [{}]", t.tier, segs.join(", "))
            })
            .collect::<Vec<_>>()
            .join("; "),
        Err(e) => format!("stats failed: {e}"),
    }
}

/// A new engine of `tiers` (100 keys a day planned, `sync always`) at
/// noon of day 0 of a manual clock, in a temporary directory.
fn writer_at_day_0(tiers: &[Tier]) -> (tempfile::TempDir, std::path::PathBuf, ManualClock, Engine) {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("db");
    let clock = ManualClock::new(noon(0));
    let config = Config {
        tiers: tiers.to_vec(),
        expected_items_per_day: 100,
        sync: SyncPolicy::Always,
        ..Config::default()
    };
    let w = Engine::create_with(&db, config, Options::default().clock(clock.clone())).unwrap();
    (tmp, db, clock, w)
}

/// One writer run of `days` days; readers open after each acknowledged
/// day and check its keys. Returns the failures.
fn run_once(tiers: Vec<Tier>, days: u64, readers: usize, checked: &AtomicU64) -> Vec<String> {
    let (_tmp, db, clock, w) = writer_at_day_0(&tiers);
    let acked = AtomicU64::new(u64::MAX);
    // The day the writer's clock is at (set before its rotation).
    let moving = AtomicU64::new(0);
    let stop = AtomicBool::new(false);
    let failures = std::sync::Mutex::new(Vec::new());
    // A reader open from before day d+1's rotation, kept across it.
    let kept: std::sync::Mutex<Option<(u64, Engine)>> = std::sync::Mutex::new(None);
    thread::scope(|s| {
        s.spawn(|| {
            for day in 0..days {
                moving.store(day, Ordering::SeqCst);
                clock.set(noon(day));
                w.insert_batch(&keys(day)).unwrap();
                if day % 3 == 0 {
                    w.flush().unwrap();
                }
                acked.store(day, Ordering::SeqCst);
                // Let the readers open before the next rotation.
                thread::sleep(Duration::from_millis(1));
            }
            stop.store(true, Ordering::SeqCst);
        });
        for r in 0..readers {
            let (acked, stop, failures, kept, db, tiers, moving) =
                (&acked, &stop, &failures, &kept, &db, &tiers, &moving);
            s.spawn(move || {
                while !stop.load(Ordering::SeqCst) {
                    let day = acked.load(Ordering::SeqCst);
                    if day == u64::MAX {
                        thread::yield_now();
                        continue;
                    }
                    let ks = keys(day);
                    // Readers open at varied distances from the rotations.
                    thread::sleep(Duration::from_millis((day * 7 + r as u64 * 13) % 5));
                    let opts = Options::default().clock(ManualClock::new(noon(day)));
                    let e = match Engine::open_read_only_with(db, opts) {
                        Ok(e) => e,
                        Err(err) => {
                            failures.lock().unwrap().push(format!(
                                "{tiers:?} day {day}: open failed: {err}"
                            ));
                            continue;
                        }
                    };
                    let batch = e.contains_batch(&ks).unwrap();
                    for (j, k) in ks.iter().enumerate() {
                        let one = e.contains(k).unwrap();
                        if (!one || !batch[j]) && !expired_by_writer_day(tiers, day, moving.load(Ordering::SeqCst)) {
                            failures.lock().unwrap().push(format!(
                                "{tiers:?} day {day} key {} (reader {r}, fresh open, writer at day {}): contains {one} batch {}; {}",
                                String::from_utf8_lossy(k),
                                moving.load(Ordering::SeqCst),
                                batch[j],
                                describe(&e)
                            ));
                            break;
                        }
                    }
                    if !expired_by_writer_day(tiers, day, moving.load(Ordering::SeqCst)) {
                        checked.fetch_add(1, Ordering::Relaxed);
                    }
                    if r == 0 {
                        // Check the engine kept from an earlier day again.
                        let mut slot = kept.lock().unwrap();
                        if let Some((kd, ke)) = slot.as_ref() {
                            let ks = keys(*kd);
                            let batch = ke.contains_batch(&ks).unwrap();
                            let gone = expired_by_writer_day(tiers, *kd, moving.load(Ordering::SeqCst));
                            if let Some(j) = batch.iter().position(|b| !b).filter(|_| !gone) {
                                failures.lock().unwrap().push(format!(
                                    "{tiers:?} day {kd} key k{kd}-{j} (kept open, writer at {}): {}",
                                    moving.load(Ordering::SeqCst),
                                    describe(ke)
                                ));
                            }
                        }
                        *slot = Some((day, e));
                    } else {
                        drop(e);
                    }
                }
            });
        }
    });
    drop(kept);
    w.close().unwrap();
    failures.into_inner().unwrap()
}

/// How long each stress test loops: `TB_RACE_SECS` seconds (3 unless set;
/// a few hundred seconds to hunt a rare interleaving).
fn budget() -> Duration {
    Duration::from_secs(
        std::env::var("TB_RACE_SECS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(3),
    )
}

/// Writer runs of 12 days for [`budget`], stopping at the first failure.
fn stress(tiers: Vec<Tier>) {
    let start = Instant::now();
    let mut runs = 0;
    let mut all = Vec::new();
    let checked = AtomicU64::new(0);
    while all.is_empty() && (runs == 0 || start.elapsed() < budget()) {
        all.extend(run_once(tiers.clone(), 12, 2, &checked));
        runs += 1;
    }
    assert!(all.is_empty(), "{runs} runs:\n{}", all.join("\n"));
    // Not every day's check found its keys expired.
    let checked = checked.into_inner();
    eprintln!("{tiers:?}: {runs} runs, {checked} days checked");
    assert!(
        checked > 0,
        "{tiers:?}: {runs} runs, no day checked in time"
    );
}

#[test]
fn read_only_opens_beside_rotating_bloom_tiers_see_acknowledged_keys() {
    stress(vec![Tier::daily(3), Tier::weekly(2)]);
}

#[test]
fn read_only_opens_beside_a_rotating_fingerprint_table_see_acknowledged_keys() {
    stress(vec![Tier::fingerprint(3)]);
}

/// The case the stress tests above do not count as a failure: a reader
/// asked about day 6 after the writer's fingerprint table moved to day 9
/// reads the table as of day 9 (a table never reads an earlier day than
/// its newest), where a key of day 6 has expired (the table keeps 2 days
/// before today), and the writer's sweep has cleared it. A weekly tier
/// keeps day 6 through week 2.
#[test]
fn a_reader_behind_the_writers_day_reads_what_the_writer_keeps() {
    for (tiers, kept) in [
        (vec![Tier::fingerprint(3)], false),
        (vec![Tier::daily(3), Tier::weekly(2)], true),
    ] {
        let (_tmp, db, clock, w) = writer_at_day_0(&tiers);
        for day in 0..10 {
            clock.set(noon(day));
            w.insert_batch(&keys(day)).unwrap();
        }
        let r =
            Engine::open_read_only_with(&db, Options::default().clock(ManualClock::new(noon(6))))
                .unwrap();
        let seen = r.contains_batch(&keys(6)).unwrap();
        let found = seen.iter().filter(|&&s| s).count();
        if kept {
            assert_eq!(found, 300, "{tiers:?}");
        } else {
            assert!(
                found < 10,
                "{tiers:?}: {found} of day 6's keys read at day 9"
            );
        }
        assert!(r.contains_batch(&keys(9)).unwrap().iter().all(|&s| s));
        w.close().unwrap();
    }
}
