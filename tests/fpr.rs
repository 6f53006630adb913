//! Guards the false-positive contract: the configured rate bounds every
//! query (`contains` and each horizon), at the planned load and at four
//! times it (chain growth), measured over a million crawl-like negatives.

mod common;

use std::time::Duration;

use common::*;
use timebloom::{Engine, ManualClock, Tier};

const NEGATIVES: u64 = 1_000_000;

/// Inserts `per_day` fresh URLs a day for `days` days, in batches.
fn populate(e: &Engine, clock: &ManualClock, days: u64, per_day: u64) {
    for d in 0..days {
        clock.set(day(d));
        let keys: Vec<Vec<u8>> = (0..per_day).map(|i| url(1, d * per_day + i)).collect();
        for chunk in keys.chunks(4096) {
            e.insert_batch(chunk).unwrap();
        }
    }
}

fn rate(mut hit: impl FnMut(&[u8]) -> bool) -> f64 {
    let fp = (0..NEGATIVES).filter(|&i| hit(&url(2, i))).count();
    fp as f64 / NEGATIVES as f64
}

/// Every horizon a tier can answer, plus `contains`, stays within 1.1 x `p`.
fn check_every_query(e: &Engine, p: f64) {
    let stats = e.stats().unwrap();
    let mut horizons = vec![Duration::from_secs(3600)];
    for t in &stats.tiers {
        // One window back, and as far back as the tier reaches.
        if t.covers_secs > t.window_secs {
            horizons.push(Duration::from_secs(t.window_secs));
        }
        horizons.push(Duration::from_secs(t.covers_secs.saturating_sub(3600)));
    }
    let bound = 1.1 * p;
    let r = rate(|k| e.contains(k).unwrap());
    println!("contains: measured {r:.6} (configured {p})");
    assert!(r <= bound, "contains: measured {r} > 1.1 x {p}");
    for h in horizons {
        let r = rate(|k| e.contains_within(k, h).unwrap());
        println!(
            "within {:>6.2} days: measured {r:.6} (configured {p})",
            h.as_secs_f64() / 86_400.0
        );
        assert!(r <= bound, "within {h:?}: measured {r} > 1.1 x {p}");
    }
    // Positives are never missed (no false negatives), checked on a sample.
}

fn run(tiers: &[Tier], days: u64, planned: u64, load: u64, p: f64) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(day(0));
    let e = create(dir.path(), config(tiers, planned, p), &clock);
    populate(&e, &clock, days, planned * load);
    for i in (0..planned * load).step_by(97) {
        let d = days - 1;
        assert!(e.contains(&url(1, d * planned * load + i)).unwrap());
    }
    check_every_query(&e, p);
}

#[test]
fn default_tiers_at_planned_load() {
    run(
        &[Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
        400,
        3_000,
        1,
        0.001,
    );
}

#[test]
fn default_tiers_at_four_times_planned_load() {
    run(
        &[Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
        400,
        3_000,
        4,
        0.001,
    );
}

#[test]
fn single_window_at_planned_and_four_times_load() {
    run(&[Tier::daily(1)], 1, 200_000, 1, 0.01);
    run(&[Tier::daily(1)], 1, 200_000, 4, 0.01);
}
