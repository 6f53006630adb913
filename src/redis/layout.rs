//! Where a key's cells live in Redis: shard, block, cells, key names.
//!
//! Pure functions of the configuration and the key's hash, shared by every
//! client of one engine; nothing here talks to Redis. The geometry is the
//! embedded engine's: a window's sub-filter `i` is sized by
//! [`Config::subfilter_plan`] and [`sizing::plan`], and its blocks are
//! split evenly over the shards (rounded up), so the rate of the whole is at
//! or below the plan's. Each shard grows its own chain when its share of the
//! tail is full: a shard is a scalable filter of its own, and a key's
//! lookup reads one shard.

use crate::config::{Config, Tier};
use crate::filter::{sizing, Kind, PROBE_MUL};
use crate::hash::KeyHash;

/// Redis strings hold at most `proto-max-bulk-len` bytes, 512 MiB (2^32
/// bits) by default, which every layout keeps to: 2^23 blocks of 64 bytes.
pub(crate) const MAX_SHARD_BLOCKS: u64 = 1 << 23;
/// Sub-filters one window may grow to.
pub(crate) const MAX_CHAIN: u32 = 64;
/// A shard's chain grows at the fill expected a little past its share of
/// the tail's capacity, as in the embedded engine.
const GROWTH_MARGIN: f64 = 1.0 + 1.0 / 256.0;

/// The geometry of one sub-filter position of a tier's chain.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Geom {
    /// Blocks in each shard's string.
    pub nbs: u64,
    /// Probes per key.
    pub k: u32,
    /// Occupied cells of one shard's string at which the chain grows there.
    pub full: u64,
}

impl Geom {
    /// Sub-filter `index` of `tier`'s chains, split over `shards` strings.
    pub(crate) fn of(config: &Config, tier: &Tier, index: u32, shards: u32) -> Geom {
        let (capacity, rate) = config.subfilter_plan(tier, index);
        let plan = sizing::plan(tier.kind, capacity, rate);
        let nbs = plan.nblocks.div_ceil(u64::from(shards)).max(1);
        let one = sizing::Plan {
            nblocks: nbs,
            k: plan.k,
        };
        let share = capacity as f64 * GROWTH_MARGIN / f64::from(shards);
        Geom {
            nbs,
            k: plan.k,
            full: sizing::expected_occupied(tier.kind, one, share) as u64,
        }
    }

    /// The plan of one shard's string.
    pub(crate) fn shard_plan(&self) -> sizing::Plan {
        sizing::Plan {
            nblocks: self.nbs,
            k: self.k,
        }
    }
}

/// The shard of a key: the top of the hash's high half, scaled.
#[inline]
pub(crate) fn shard(h: KeyHash, shards: u32) -> u32 {
    ((u128::from(h.hi) * u128::from(shards)) >> 64) as u32
}

/// The block of a key inside its shard's string of `nbs` blocks: the part
/// of the high half below the shard choice, scaled again (multiply-shift,
/// so uniform and 64-bit safe).
#[inline]
pub(crate) fn block(h: KeyHash, shards: u32, nbs: u64) -> u64 {
    let rest = h.hi.wrapping_mul(u64::from(shards));
    ((u128::from(rest) * u128::from(nbs)) >> 64) as u64
}

/// The key's first `k` cells (0..512) in its block: the same probes as the
/// embedded kernel (`filter::masks`), in probe order, so the first `j` of
/// them are the cells of a sub-filter with `j` probes.
#[inline]
pub(crate) fn cells(lo: u64, k: u32) -> impl Iterator<Item = u16> {
    PROBE_MUL[..(k as usize).min(PROBE_MUL.len())]
        .iter()
        .map(move |m| (lo.wrapping_mul(*m) >> 55) as u16)
}

/// Key names under one prefix. Every key of shard `s` carries the hash tag
/// `{<prefix>:<s>}`, so in a Cluster every window and sub-filter of one
/// shard sits in one slot, and the shards spread over the slots.
#[derive(Clone, Debug)]
pub(crate) struct Names {
    pub prefix: String,
}

impl Names {
    /// The config hash: tiers, sizing, seed, shard count, chain lengths.
    pub(crate) fn config(&self) -> String {
        format!("{}:config", self.prefix)
    }

    fn tag(&self, shard: u32) -> String {
        format!("{}:{{{}:{shard}}}", self.prefix, self.prefix)
    }

    /// The string of sub-filter `index` of a window in one shard.
    pub(crate) fn filter(&self, shard: u32, code: &str, label: &str, index: u32) -> String {
        format!("{}:{code}:{label}:{index}", self.tag(shard))
    }

    /// The directory hash of a tier in one shard: chain length and fill of
    /// every window that has been written there.
    pub(crate) fn dir(&self, shard: u32, code: &str) -> String {
        format!("{}:dir:{code}", self.tag(shard))
    }

    /// A client's result key for chunk `chunk` of its batches in one shard.
    pub(crate) fn result(&self, shard: u32, client: &str, chunk: usize) -> String {
        format!("{}:r:{client}:{chunk}", self.tag(shard))
    }
}

/// Invisible format characters (Unicode category Cf): a prefix holding one
/// looks like the prefix without it in every message, and a bidi control
/// makes a message display out of order. (Messages show a refused prefix with
/// [`crate::shown_prefix`], whose `char::escape_debug` escapes all of
/// these.)
fn invisible(c: char) -> bool {
    matches!(
        c,
        '\u{ad}'
            | '\u{600}'..='\u{605}'
            | '\u{61c}'
            | '\u{6dd}'
            | '\u{70f}'
            | '\u{890}'..='\u{891}'
            | '\u{8e2}'
            | '\u{180e}'
            | '\u{200b}'..='\u{200f}'
            | '\u{202a}'..='\u{202e}'
            | '\u{2060}'..='\u{2064}'
            | '\u{2066}'..='\u{206f}'
            | '\u{feff}'
            | '\u{fff9}'..='\u{fffb}'
            | '\u{110bd}'
            | '\u{110cd}'
            | '\u{13430}'..='\u{1343f}'
            | '\u{1bca0}'..='\u{1bca3}'
            | '\u{1d173}'..='\u{1d17a}'
            | '\u{e0001}'
            | '\u{e0020}'..='\u{e007f}'
    )
}

/// A prefix is part of every key and of the hash tag: no braces, no spaces,
/// no control or invisible format characters.
pub(crate) fn check_prefix(prefix: &str) -> Result<(), String> {
    if prefix.is_empty() || prefix.len() > 128 {
        return Err("the prefix must be 1 to 128 bytes long".into());
    }
    if prefix
        .chars()
        .any(|c| c == '{' || c == '}' || c.is_whitespace() || c.is_control())
    {
        return Err(format!(
            "prefix {prefix:?}: braces, spaces and control characters are not allowed"
        ));
    }
    if let Some(c) = prefix.chars().find(|&c| invisible(c)) {
        // `{:?}` writes each of them as an escape (`\u{200b}`).
        return Err(format!(
            "prefix {prefix:?}: invisible format characters such as U+{:04X} are not allowed \
             (the prefix would look like another one)",
            c as u32
        ));
    }
    Ok(())
}

/// The Redis engine only builds Bloom tiers (remove needs counting cells; a
/// fingerprint tier is one cuckoo table, not windows of bits).
pub(crate) fn check_kinds(config: &Config) -> Result<(), String> {
    let what = |kind| match kind {
        Kind::Fingerprint => "fingerprint tiers are",
        _ => "counting tiers (remove) are",
    };
    match config.tiers.iter().find(|t| t.kind != Kind::Bloom) {
        Some(t) => Err(format!("tier {t}: {} not available on Redis", what(t.kind))),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::filter::{masks, BLOCK_WORDS};
    use crate::hash::hash_key;

    /// The cells sent to Redis are exactly the embedded kernel's masks, for
    /// every probe count, so the strings are the embedded filter's bytes.
    #[test]
    fn cells_match_the_kernel_masks() {
        for i in 0..2000u64 {
            let h = hash_key(7, &i.to_le_bytes());
            for k in 1..=24 {
                let mut m = [0u64; BLOCK_WORDS];
                for c in cells(h.lo, k) {
                    m[usize::from(c >> 6)] |= 1u64 << (c & 63);
                }
                assert_eq!(m, masks(Kind::Bloom, h.lo, k), "key {i} k {k}");
            }
        }
    }

    #[test]
    fn shards_and_blocks_stay_in_range_and_spread() {
        let shards = 16;
        let nbs = 1000;
        let mut per_shard = vec![0u32; shards as usize];
        for i in 0..160_000u64 {
            let h = hash_key(1, &i.to_le_bytes());
            let s = shard(h, shards);
            assert!(s < shards);
            assert!(block(h, shards, nbs) < nbs);
            per_shard[s as usize] += 1;
        }
        for n in per_shard {
            assert!((9_500..10_500).contains(&n), "{n}");
        }
        let top = KeyHash {
            lo: 0,
            hi: u64::MAX,
        };
        assert_eq!(shard(top, 3), 2);
        assert!(block(top, 3, 1 << 40) < 1 << 40);
    }

    #[test]
    fn sharded_geometry_covers_the_plan() {
        let c = Config::default();
        for t in &c.tiers {
            let g = Geom::of(&c, t, 0, 16);
            let (cap, rate) = c.subfilter_plan(t, 0);
            let p = sizing::plan(t.kind, cap, rate);
            assert!(g.nbs * 16 >= p.nblocks);
            assert!(g.nbs * 16 < p.nblocks + 16);
            assert_eq!(g.k, p.k);
            assert!(g.full > 0);
        }
    }

    /// A tier the Redis engine cannot build is refused naming the tier and
    /// its own kind: a fingerprint tier is not called a counting one.
    #[test]
    fn other_kinds_are_refused_by_name() {
        assert!(check_kinds(&Config::default()).is_ok());
        for (tiers, words) in [
            ("7d:counting", "7d:counting: counting tiers (remove) are"),
            (
                "7d,365d:fingerprint",
                "365d:fingerprint: fingerprint tiers are",
            ),
        ] {
            let config = Config {
                tiers: crate::parse_tiers(tiers).unwrap(),
                ..Config::default()
            };
            let why = check_kinds(&config).unwrap_err();
            assert!(why.contains(words), "{tiers}: {why}");
            assert!(why.ends_with("not available on Redis"), "{tiers}: {why}");
        }
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(check_prefix("tb").is_ok());
        assert!(check_prefix("crawl:prod").is_ok());
        for bad in ["", "a{b", "a}b", "a b", "a\nb"] {
            assert!(check_prefix(bad).is_err(), "{bad:?}");
        }
    }

    /// Every character a prefix refuses as invisible is one that
    /// `char::escape_debug` escapes: `shown_prefix`, how messages show a
    /// refused prefix, relies on it.
    #[test]
    fn invisible_characters_are_escaped_where_messages_show_them() {
        let mut n = 0;
        for c in (0..=0x10_ffff)
            .filter_map(char::from_u32)
            .filter(|&c| invisible(c))
        {
            assert_ne!(
                c.escape_debug().to_string(),
                c.to_string(),
                "U+{:04X}",
                c as u32
            );
            n += 1;
        }
        assert!(n > 150, "{n}");
    }

    /// The sizing in docs/distributed.md ("Sizing on paper"): 10^10 URLs a
    /// year with the default tiers at 0.1%, 64 shards. Run with
    /// `--nocapture` to print the table.
    #[test]
    fn sizing_on_paper() {
        let c = Config {
            expected_items_per_day: 10_000_000_000 / 365,
            ..Config::default()
        };
        let shards = 64;
        let mut total = 0.0;
        for t in &c.tiers {
            let (cap, rate) = c.subfilter_plan(t, 0);
            let g = Geom::of(&c, t, 0, shards);
            let bytes = (g.nbs * 64 * u64::from(shards)) as f64;
            let live = bytes * f64::from(t.retention);
            total += live;
            println!(
                "{t}: {cap} keys a window at {rate:.2e}: k {}, {:.1} bits/key, {:.2} GB a window, \
                 {:.0} MB a shard string, {:.1} GB live",
                g.k,
                bytes * 8.0 / cap as f64,
                bytes / 1e9,
                (g.nbs * 64) as f64 / 1e6,
                live / 1e9
            );
            // Two doublings of the chain still fit Redis's string limit.
            assert!(Geom::of(&c, t, 2, shards).nbs <= MAX_SHARD_BLOCKS, "{t}");
        }
        println!("all tiers at plan: {:.1} GB", total / 1e9);
    }
}
