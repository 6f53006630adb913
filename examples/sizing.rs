//! Sizing: from "N keys a day, these tiers, rate p" to disk and memory,
//! next to what an exact Redis set and RedisBloom need for the same keys.
//!
//! ```sh
//! cargo run --release --example sizing                       # the table for 1e6, 1e8, 1e9 keys/day
//! cargo run --release --example sizing -- --items-per-day 5000000 --tiers 7d,4w,12m --fpr 0.001
//! ```
//!
//! How it is computed: `timebloom::plan::Plan::new` (the same functions
//! the engine sizes its segments with; `timebloom plan` prints the same)
//! gives each tier's bytes per window before any growth. Memory equals
//! disk: segments are mapped files, and lookups touch pages all over each.
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
use timebloom::plan::Plan;
use timebloom::{parse_tiers, Config, Span, Tier};

const USAGE: &str = "usage: sizing [--items-per-day N] [--tiers LIST] [--fpr P] \
[--redis-bytes-per-key B]
  --items-per-day N       keys a day (default: print the table for 1e6, 1e8 and 1e9)
  --tiers LIST            tiers as in `timebloom create --tiers` (default 7d,4w,12m)
  --fpr P                 false-positive rate of one query (default 0.001; the table: 0.01 and 0.001)
  --redis-bytes-per-key B bytes a member of a Redis set costs (default 135.6, see the source)";

const LN2_SQ: f64 = std::f64::consts::LN_2 * std::f64::consts::LN_2;

/// The plan of `tiers` at `n` keys a day and rate `fpr`, or a clean exit.
fn plan(tiers: &[Tier], n: u64, fpr: f64) -> Plan {
    let config = Config {
        tiers: tiers.to_vec(),
        expected_items_per_day: n,
        fpr,
        ..Config::default()
    };
    or_die(Plan::new(&config), "configuration")
}

/// The days the longest tier reaches back over (the keys an exact set must
/// hold); months average 365.25 / 12 days.
fn reach(tiers: &[Tier]) -> f64 {
    tiers
        .iter()
        .map(|t| {
            f64::from(t.retention)
                * match t.span {
                    Span::Day => 1.0,
                    Span::Week => 7.0,
                    Span::Month => 365.25 / 12.0,
                    Span::Custom(secs) => secs as f64 / 86_400.0,
                }
        })
        .fold(0.0, f64::max)
}

/// RedisBloom's size for `keys` at `rate`: `keys (-ln rate) / ln(2)^2` bits.
fn redisbloom_bytes(keys: f64, rate: f64) -> f64 {
    keys * (-rate.ln()) / LN2_SQ / 8.0
}

fn main() {
    let args = Args::parse(
        USAGE,
        &["items-per-day", "tiers", "fpr", "redis-bytes-per-key"],
        &[],
    );
    let tiers = match args.raw("tiers") {
        Some(s) => parse_tiers(&s).unwrap_or_else(|e| fail(format_args!("--tiers: {e}"))),
        None => Config::default().tiers,
    };
    let redis_per_key: f64 = args.get("redis-bytes-per-key", 135.6);
    if !redis_per_key.is_finite() || redis_per_key <= 0.0 {
        fail("--redis-bytes-per-key must be positive");
    }

    let Some(n) = args.raw("items-per-day") else {
        return table(&tiers, redis_per_key);
    };
    let n: u64 = n.parse().ok().filter(|n| *n > 0).unwrap_or_else(|| {
        fail(format_args!(
            "--items-per-day {n:?}: a positive whole number"
        ))
    });
    let fpr: f64 = args.get("fpr", 0.001);
    let p = plan(&tiers, n, fpr);
    let n = n as f64;
    say!("{n} keys a day, p = {fpr}:");
    say!(
        "{:<14} {:>14} {:>10} {:>7} {:>12} {:>8} {:>12}",
        "tier",
        "keys/window",
        "bits/key",
        "probes",
        "per window",
        "windows",
        "total"
    );
    for t in &p.tiers {
        say!(
            "{:<14} {:>14} {:>10.1} {:>7} {:>12} {:>8} {:>12}",
            t.tier,
            t.items_per_window,
            t.bits_per_key,
            t.probes,
            bytes(t.bytes_per_window as f64),
            t.windows,
            bytes(t.bytes as f64)
        );
    }
    let days = reach(&tiers);
    say!(
        "timebloom: {} on disk, the same mapped (resident as lookups touch it)",
        bytes(p.total_bytes as f64)
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
fn table(tiers: &[Tier], redis_per_key: f64) {
    let names: Vec<String> = tiers.iter().map(Tier::to_string).collect();
    let days = reach(tiers);
    // Every row first: tiers the plan refuses print no half table.
    let mut rows = Vec::new();
    for fpr in [0.01, 0.001] {
        for n in [1_000_000u64, 100_000_000, 1_000_000_000] {
            let keys = n as f64 * days;
            rows.push(format!(
                "| {:.0e} | {}% | {} | {} | {} | {} |",
                n as f64,
                fpr * 100.0,
                bytes(plan(tiers, n, fpr).total_bytes as f64),
                bytes(keys * redis_per_key),
                bytes(redisbloom_bytes(keys, fpr)),
                bytes(redisbloom_bytes(keys, fpr / days.round()))
            ));
        }
    }
    say!(
        "| keys a day | p | timebloom {} | exact Redis set | RedisBloom, one filter | RedisBloom, one filter a day |",
        names.join(",")
    );
    say!("|---:|---:|---:|---:|---:|---:|");
    for row in rows {
        say!("{row}");
    }
}
