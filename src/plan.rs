//! The sizing of a [`Config`], computed before anything is created.
//!
//! [`Plan::new`] answers "how large will this engine be, and how accurate?"
//! from the same functions the engine sizes its segments with: each tier's
//! windows, the keys planned per window, the share of the query's
//! false-positive rate each window gets, and the geometry of the first
//! sub-filter of a window (bits per key, probes, bytes). A window that
//! receives more keys than planned grows beyond this by a chain of larger
//! sub-filters; the plan is the size before any growth.
//!
//! ```
//! use timebloom::{plan::Plan, Config};
//!
//! let plan = Plan::new(&Config::default()).unwrap();
//! assert_eq!(plan.tiers.len(), 3);
//! assert!(plan.total_bytes > 0);
//! println!("{plan}");
//! ```

use std::fmt;

use serde::Serialize;

use crate::config::{Config, Tier};
use crate::error::Result;
use crate::filter::{sizing, Kind, BLOCK_BYTES};
use crate::segment::BODY_OFFSET;
use crate::window;

#[path = "units.rs"]
pub(crate) mod units;
use units::{fmt_bytes, fmt_rate, fmt_secs};

/// The sizing of one tier.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TierPlan {
    /// The tier, as written in a tier list (`7d`, `4w:counting`).
    pub tier: String,
    /// Bloom, counting or fingerprint.
    pub kind: Kind,
    /// Windows kept (the retention), all of which a lookup may read; 1 for
    /// a fingerprint tier (one table).
    pub windows: u32,
    /// Nominal length of one window in seconds (a month counts 31 days).
    pub window_secs: u64,
    /// Distinct keys one window is sized for.
    pub items_per_window: u64,
    /// The false-positive rate one window may contribute to a query.
    pub window_fpr: f64,
    /// The rate the first sub-filter is sized for (the rest of the window's
    /// share is kept for growth).
    pub subfilter_fpr: f64,
    /// Bits of memory per planned key in the first sub-filter.
    pub bits_per_key: f64,
    /// Probes per key (a fingerprint tier: bits of a fingerprint).
    pub probes: u32,
    /// Bytes of one window before any growth: its file, header page
    /// included, or in Redis its strings over every shard.
    pub bytes_per_window: u64,
    /// Bytes of all the tier's windows before any growth.
    pub bytes: u64,
    /// How much older than a horizon a key answered by this tier may be
    /// (one window length: windows are whole).
    pub coarseness_secs: u64,
}

/// The sizing of a whole configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Plan {
    /// One entry per tier, in configuration order.
    pub tiers: Vec<TierPlan>,
    /// The false-positive rate bound of one query.
    pub fpr: f64,
    /// Planned distinct keys per day.
    pub items_per_day: u64,
    /// Bytes of every window of every tier before any growth.
    pub total_bytes: u64,
    /// Where the windows are kept: `false` for files on disk
    /// ([`Plan::new`]), `true` for strings in Redis (`Plan::for_redis`,
    /// whose bytes are the strings' lengths, before Redis's own overhead).
    pub in_redis: bool,
}

impl Plan {
    /// The plan of `config`, or the reason the configuration is invalid.
    pub fn new(config: &Config) -> Result<Plan> {
        Plan::with(config, false, |t| {
            let (capacity, rate) = config.subfilter_plan(t, 0);
            let geometry = sizing::file_plan(t.kind, capacity, rate);
            let body = geometry.nblocks.saturating_mul(BLOCK_BYTES);
            (body, geometry.k, body.saturating_add(BODY_OFFSET))
        })
    }

    /// The plan of `config` for an engine in Redis split over `shards`
    /// (`RedisEngine::shards`): each window is one string per shard, with no
    /// header page, and Redis tiers are Bloom tiers only. `shards` is 1 to
    /// 16,384, as at create; another count is refused.
    #[cfg(feature = "redis")]
    pub fn for_redis(config: &Config, shards: u32) -> Result<Plan> {
        use crate::redis::layout::Geom;
        use crate::redis::{check_new_config, RedisError};
        match check_new_config(config, shards) {
            Ok(()) => {}
            Err(RedisError::Unsupported { reason }) => return Err(crate::Error::config(reason)),
            Err(RedisError::Engine(e)) => return Err(e),
            Err(e) => return Err(crate::Error::config(e.to_string())),
        }
        Plan::with(config, true, |t| {
            let g = Geom::of(config, t, 0, shards);
            let body = (g.nbs.saturating_mul(BLOCK_BYTES)).saturating_mul(u64::from(shards));
            (body, g.k, body)
        })
    }

    /// The plan with each tier's first sub-filter from `geometry`: its
    /// body's bytes, its probes, and the bytes one window takes.
    fn with(
        config: &Config,
        in_redis: bool,
        geometry: impl Fn(&Tier) -> (u64, u32, u64),
    ) -> Result<Plan> {
        config.validate_new()?;
        let mut tiers = Vec::with_capacity(config.tiers.len());
        for t in &config.tiers {
            let (capacity, rate) = config.subfilter_plan(t, 0);
            let (body, k, bytes_per_window) = geometry(t);
            // A fingerprint tier is one table over its whole retention,
            // answering at day precision.
            let (windows, window_secs, coarseness) = if t.is_table() {
                (1, u64::from(t.retention) * 86_400, 86_400)
            } else {
                let secs = window::nominal_secs(t.span);
                (t.retention, secs, secs)
            };
            tiers.push(TierPlan {
                tier: t.to_string(),
                kind: t.kind,
                windows,
                window_secs,
                items_per_window: capacity,
                window_fpr: config.segment_fpr(t),
                subfilter_fpr: rate,
                bits_per_key: body as f64 * 8.0 / capacity as f64,
                probes: k,
                bytes_per_window,
                bytes: bytes_per_window.saturating_mul(u64::from(windows)),
                coarseness_secs: coarseness,
            });
        }
        let total_bytes = tiers.iter().fold(0u64, |n, t| n.saturating_add(t.bytes));
        Ok(Plan {
            tiers,
            fpr: config.fpr,
            items_per_day: config.expected_items_per_day,
            total_bytes,
            in_redis,
        })
    }
}

impl fmt::Display for Plan {
    /// A table: one row per tier, then the total.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} keys/day planned, fpr {} per lookup",
            self.items_per_day,
            fmt_rate(self.fpr)
        )?;
        // The tier column fits its longest name (`365d:fingerprint`).
        let w = (self.tiers.iter())
            .map(|t| t.tier.to_string().len())
            .fold(14, usize::max);
        writeln!(
            f,
            "{:<w$} {:>7} {:>8} {:>12} {:>10} {:>8} {:>6} {:>11} {:>11} {:>10}",
            "tier",
            "windows",
            "window",
            "keys/window",
            "fpr/window",
            "bits/key",
            "probes",
            "per window",
            "tier total",
            "coarseness"
        )?;
        for t in &self.tiers {
            writeln!(
                f,
                "{:<w$} {:>7} {:>8} {:>12} {:>10.2e} {:>8.2} {:>6} {:>11} {:>11} {:>10}",
                t.tier.to_string(),
                t.windows,
                fmt_secs(t.window_secs),
                t.items_per_window,
                t.window_fpr,
                t.bits_per_key,
                t.probes,
                fmt_bytes(t.bytes_per_window),
                fmt_bytes(t.bytes),
                fmt_secs(t.coarseness_secs)
            )?;
        }
        writeln!(
            f,
            "total {} {} before growth; a lookup within a horizon may also \
             report keys up to one window (coarseness) older",
            fmt_bytes(self.total_bytes),
            if self.in_redis {
                "in Redis strings (plus Redis's own overhead)"
            } else {
                "on disk"
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Tier;

    #[test]
    fn a_fingerprint_tier_is_one_table_of_its_retention() {
        let config = Config {
            tiers: vec![Tier::monthly(12), Tier::fingerprint(365)],
            expected_items_per_day: 100_000,
            fpr: 0.001,
            ..Config::default()
        };
        let plan = Plan::new(&config).unwrap();
        let f = &plan.tiers[1];
        assert_eq!((f.windows, f.coarseness_secs), (1, 86_400));
        assert_eq!(f.items_per_window, 36_500_000);
        assert_eq!(f.bytes, f.bytes_per_window);
        // 16-bit fingerprints, 20 slots a line at 95%: 26.95 bits per key.
        assert_eq!(f.probes, 16);
        assert!((26.9..27.0).contains(&f.bits_per_key), "{}", f.bits_per_key);
        assert!(f.subfilter_fpr <= config.fpr);
        assert!(plan.to_string().contains("365d:fingerprint"));
    }

    /// A Redis plan is the geometry the Redis layout gives each window:
    /// one string per shard of `Geom::nbs` blocks, no header page; its
    /// tiers are Bloom tiers only.
    #[cfg(feature = "redis")]
    #[test]
    fn a_redis_plan_is_the_strings_of_every_shard() {
        use crate::redis::layout::Geom;
        let config = Config {
            tiers: vec![Tier::daily(7), Tier::monthly(12)],
            expected_items_per_day: 10_000,
            ..Config::default()
        };
        let plan = Plan::for_redis(&config, 16).unwrap();
        assert!(plan.in_redis && plan.to_string().contains("in Redis strings"));
        for (t, p) in config.tiers.iter().zip(&plan.tiers) {
            let g = Geom::of(&config, t, 0, 16);
            assert_eq!(p.bytes_per_window, g.nbs * BLOCK_BYTES * 16);
            assert_eq!(p.probes, g.k);
        }
        let files = Plan::new(&config).unwrap();
        assert!(!files.in_redis && files.to_string().contains("on disk"));
        let counting = Config {
            tiers: vec![Tier::daily(7).counting()],
            ..config
        };
        assert!(Plan::for_redis(&counting, 16).is_err());
    }

    #[test]
    fn plan_matches_the_engine_sizing() {
        let config = Config {
            tiers: vec![Tier::daily(7), Tier::weekly(4).counting()],
            expected_items_per_day: 10_000,
            fpr: 0.01,
            ..Config::default()
        };
        let plan = Plan::new(&config).unwrap();
        let d = &plan.tiers[0];
        assert_eq!(
            (d.windows, d.window_secs, d.items_per_window),
            (7, 86_400, 10_000)
        );
        assert!((d.window_fpr - 0.01 / 7.0).abs() < 1e-12);
        assert!(d.subfilter_fpr < d.window_fpr);
        // 0.07% per filter of 512-bit blocks needs about 15-17 bits per key.
        assert!((13.0..20.0).contains(&d.bits_per_key), "{}", d.bits_per_key);
        assert_eq!(d.bytes, 7 * d.bytes_per_window);
        let w = &plan.tiers[1];
        assert_eq!((w.kind, w.items_per_window), (Kind::Counting, 70_000));
        assert_eq!(plan.total_bytes, d.bytes + w.bytes);
        let table = plan.to_string();
        assert!(
            table.contains("7d") && table.contains("4w:counting"),
            "{table}"
        );
        let bad = Config {
            fpr: 2.0,
            ..Config::default()
        };
        assert!(Plan::new(&bad).is_err());
    }
}
