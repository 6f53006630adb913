//! Sizing: from "N keys a day, these tiers, rate p" to disk and memory,
//! next to what an exact Redis set and RedisBloom need for the same keys.
//!
//! ```sh
//! cargo run --release --example sizing                       # the table for 1e6, 1e8, 1e9 keys/day
//! cargo run --release --example sizing -- --items-per-day 5000000 --tiers 7d,4w,12m --fpr 0.001
//! ```
//!
//! How it is computed: the library has no public sizing call, so this
//! program creates a real engine with the same tiers and rate but
//! `--calibrate` keys a day (20,000 by default) in a temporary directory,
//! reads each tier's segment size from `stats()`, and scales the body
//! linearly (a segment is a 4096-byte header and `ceil(keys / keys per
//! block)` 64-byte blocks, so the only error is the rounding to a block,
//! under 0.1% at 20,000 keys a day). Memory equals disk: segments are
//! mapped files, and a lookup touches pages all over each one.
//!
//! The peers:
//! * exact Redis set: `--redis-bytes-per-key` (default 135.6) times the
//!   keys the engine's longest tier reaches back over. 135.6 was measured
//!   with redis-server 7.0.15 (jemalloc): `used_memory` grew by 135.6 MB
//!   after `SADD` of one million distinct URLs averaging 77.7 bytes (88.4
//!   bytes a key for 40-character hex SHA-1 fingerprints);
//! * RedisBloom `BF.RESERVE key p n NONSCALING`: `n (-ln p) / (ln 2)^2`
//!   bits (its `bloom_init`, no rounding; without NONSCALING the first
//!   sub-filter is built at `p / 2`, which adds `n ln 2 / (ln 2)^2` bits);
//!   RedisBloom has no windows, so the table shows one filter holding the
//!   whole span, and one filter a day (to drop a day at a time), each at
//!   `p / days` so that a query reading all of them still meets `p`.

#[path = "common/mod.rs"]
#[macro_use]
mod common;

use common::{bytes, fail, or_die, Args};
use timebloom::{parse_tiers, Config, Engine, Span, Tier};

const USAGE: &str = "usage: sizing [--items-per-day N] [--tiers LIST] [--fpr P] \
[--redis-bytes-per-key B] [--calibrate N]
  --items-per-day N       keys a day (default: print the table for 1e6, 1e8 and 1e9)
  --tiers LIST            tiers as in `timebloom create --tiers` (default 7d,4w,12m)
  --fpr P                 false-positive rate of one query (default 0.001; the table: 0.01 and 0.001)
  --redis-bytes-per-key B bytes a member of a Redis set costs (default 135.6, see the source)
  --calibrate N           keys a day of the engine measured and scaled (default 20000)";

const LN2_SQ: f64 = std::f64::consts::LN_2 * std::f64::consts::LN_2;
const HEADER: f64 = 4096.0;

/// One tier's measured plan, per key a day.
struct TierPlan {
    tier: Tier,
    /// Keys one window is planned for, per key a day (1, 7, 31, ...).
    days_per_window: f64,
    /// Body bytes of one window per key a day.
    body_per_key_day: f64,
    /// The span the tier's windows reach back over, in days.
    reach_days: f64,
}

/// Measures every tier of `tiers` at rate `fpr`.
fn calibrate(tiers: &[Tier], fpr: f64, n0: u64) -> Vec<TierPlan> {
    let tmp = tempfile::tempdir()
        .unwrap_or_else(|e| fail(format_args!("creating a temporary directory: {e}")));
    let config = Config {
        tiers: tiers.to_vec(),
        expected_items_per_day: n0,
        fpr,
        ..Config::default()
    };
    let engine = or_die(
        Engine::create(tmp.path().join("plan.tb"), config),
        "creating the engine",
    );
    let stats = or_die(engine.stats(), "stats");
    let plans = tiers
        .iter()
        .zip(&stats.tiers)
        .map(|(tier, t)| {
            let seg = t
                .segments
                .last()
                .unwrap_or_else(|| fail(format_args!("tier {tier} has no open window")));
            TierPlan {
                tier: *tier,
                days_per_window: t.window_secs as f64 / 86_400.0,
                body_per_key_day: (seg.bytes as f64 - HEADER) / n0 as f64,
                // Months average 365.25 / 12 days (`window_secs` is the longest).
                reach_days: f64::from(t.retention)
                    * match tier.span {
                        Span::Month => 365.25 / 12.0,
                        _ => t.window_secs as f64 / 86_400.0,
                    },
            }
        })
        .collect();
    or_die(engine.close(), "closing the engine");
    plans
}

/// Bytes of one window of `p` at `n` keys a day.
fn window_bytes(p: &TierPlan, n: f64) -> f64 {
    HEADER + p.body_per_key_day * n
}

fn total_bytes(plans: &[TierPlan], n: f64) -> f64 {
    plans
        .iter()
        .map(|p| window_bytes(p, n) * f64::from(p.tier.retention))
        .sum()
}

/// The days the longest tier reaches back over (keys an exact set must hold).
fn reach(plans: &[TierPlan]) -> f64 {
    plans.iter().map(|p| p.reach_days).fold(0.0, f64::max)
}

/// RedisBloom's size for `keys` at `rate`: `keys (-ln rate) / ln(2)^2` bits.
fn redisbloom_bytes(keys: f64, rate: f64) -> f64 {
    keys * (-rate.ln()) / LN2_SQ / 8.0
}

fn main() {
    let args = Args::parse(
        USAGE,
        &[
            "items-per-day",
            "tiers",
            "fpr",
            "redis-bytes-per-key",
            "calibrate",
        ],
        &[],
    );
    let tiers = match args.raw("tiers") {
        Some(s) => parse_tiers(&s).unwrap_or_else(|e| fail(format_args!("--tiers: {e}"))),
        None => Config::default().tiers,
    };
    let redis_per_key: f64 = args.get("redis-bytes-per-key", 135.6);
    let n0: u64 = args.get("calibrate", 20_000);
    if !(1000..=1_000_000).contains(&n0) {
        fail("--calibrate must be between 1000 and 1000000");
    }
    if !redis_per_key.is_finite() || redis_per_key <= 0.0 {
        fail("--redis-bytes-per-key must be positive");
    }

    let Some(n) = args.raw("items-per-day") else {
        return table(&tiers, n0, redis_per_key);
    };
    let n: u64 = n.parse().ok().filter(|n| *n > 0).unwrap_or_else(|| {
        fail(format_args!(
            "--items-per-day {n:?}: a positive whole number"
        ))
    });
    let fpr: f64 = args.get("fpr", 0.001);
    let check = Config {
        tiers: tiers.clone(),
        expected_items_per_day: n,
        fpr,
        ..Config::default()
    };
    or_die(check.validate(), "configuration");
    let plans = calibrate(&tiers, fpr, n0);
    let n = n as f64;
    say!("{n} keys a day, p = {fpr}:");
    say!(
        "{:<14} {:>14} {:>10} {:>12} {:>8} {:>12}",
        "tier",
        "keys/window",
        "bits/key",
        "per window",
        "windows",
        "total"
    );
    for p in &plans {
        let keys = n * p.days_per_window;
        let per = window_bytes(p, n);
        say!(
            "{:<14} {:>14.0} {:>10.1} {:>12} {:>8} {:>12}",
            p.tier.to_string(),
            keys,
            (per - HEADER) * 8.0 / keys,
            bytes(per),
            p.tier.retention,
            bytes(per * f64::from(p.tier.retention))
        );
    }
    let days = reach(&plans);
    say!(
        "timebloom: {} on disk, the same mapped (resident as lookups touch it)",
        bytes(total_bytes(&plans, n))
    );
    say!(
        "exact Redis set of {days:.0} days of keys: {} ({redis_per_key} bytes a key)",
        bytes(n * days * redis_per_key)
    );
    say!(
        "RedisBloom, one NONSCALING filter for {days:.0} days: {}; {days:.0} daily filters at p/{days:.0}: {}",
        bytes(redisbloom_bytes(n * days, fpr)),
        bytes(redisbloom_bytes(n * days, fpr / days.round()))
    );
}

/// The table operators pass around.
fn table(tiers: &[Tier], n0: u64, redis_per_key: f64) {
    let names: Vec<String> = tiers.iter().map(Tier::to_string).collect();
    say!(
        "| keys a day | p | timebloom {} | exact Redis set | RedisBloom, one filter | RedisBloom, one filter a day |",
        names.join(",")
    );
    say!("|---:|---:|---:|---:|---:|---:|");
    for fpr in [0.01, 0.001] {
        let plans = calibrate(tiers, fpr, n0);
        let days = reach(&plans);
        for n in [1e6, 1e8, 1e9] {
            say!(
                "| {n:.0e} | {}% | {} | {} | {} | {} |",
                fpr * 100.0,
                bytes(total_bytes(&plans, n)),
                bytes(n * days * redis_per_key),
                bytes(redisbloom_bytes(n * days, fpr)),
                bytes(redisbloom_bytes(n * days, fpr / days.round()))
            );
        }
    }
}
