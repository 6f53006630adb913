//! The manifest: the one file that says which segment files are live.
//!
//! Layout (all integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `TBLMMANI` |
//! | 8 | 4 | format version (1; 2 when a chain starts past its first file; 3 when it lists lost windows) |
//! | 12 | 4 | body length in bytes |
//! | 16 | 4 | CRC32 of the body |
//! | 20 | n | body: UTF-8 JSON, see [`Manifest`] |
//!
//! It is replaced atomically (temporary file, fsync, rename, directory
//! fsync), so a reader sees the old or the new one, never a mix.

use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::window;

const MAGIC: [u8; 8] = *b"TBLMMANI";
/// The manifest format version this build writes when no chain starts
/// past its first file (every manifest an older build could write).
pub(crate) const VERSION: u32 = 1;
/// The version written when some segment's chain starts past its first
/// file (`SegmentEntry::first`: a fingerprint chain whose oldest tables
/// were dropped), so that a build that knows only version 1 refuses it
/// instead of opening the files under the wrong chain positions.
pub(crate) const VERSION_FIRST: u32 = 2;
/// The version written when the manifest lists windows a degraded open
/// lost ([`Manifest::lost`]), whatever else it holds: a build that knows
/// only versions 1 and 2 would ignore the list and write the manifest
/// without it, so that its lookups and every later open's read the lost
/// windows' keys as new; it refuses the manifest by version instead.
/// Once every entry has expired the manifest goes back to version 1 or 2.
/// Read: any of the three versions may list lost windows (builds before
/// this version wrote them as version 1 or 2).
pub(crate) const VERSION_LOST: u32 = 3;
const PREFIX: usize = 20;
/// Larger manifests are refused as corrupt (10,000 windows x 16 tiers fit easily).
const MAX_BODY: u64 = 256 << 20;
/// Generations from here on are refused as corrupt: no engine replaces its
/// manifest that often (a billion times a second for a century stays
/// below it), and the next replacement adds one.
const MAX_GENERATION: u64 = 1 << 62;

/// The decoded manifest body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// The engine's configuration.
    pub config: Config,
    /// The hash seed.
    pub seed: u64,
    /// Incremented at every replacement.
    pub generation: u64,
    /// Live segments.
    pub segments: Vec<SegmentEntry>,
    /// The write-ahead log position of the last checkpoint: every record
    /// below it is durable in the segments (and counting windows have a
    /// shadow copy of their body at it). 0 before the first checkpoint.
    #[serde(default)]
    pub checkpoint_lsn: u64,
    /// The newest day (days since the epoch in the configured offset) at
    /// which the fingerprint tables were read and written: they are never
    /// read or written at an earlier one, so a clock that steps back days
    /// cannot make their newest day tags look expired (see
    /// `Engine::table_today`). 0 when no table took a day yet, or written
    /// by a build that did not record it: the tables' sweep days stand in.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub table_day: u32,
    /// Windows a writable degraded open left out, until what they held has
    /// expired: every open looks for a key their tier misses in the other
    /// tiers' windows overlapping them (`Engine::lost_contains`), not only
    /// the open that lost them. Absent when empty (and in manifests written
    /// by builds that did not record it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<LostWindow>,
}

/// A window a degraded open left out (see [`Manifest::lost`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct LostWindow {
    /// Its tier (index into `config.tiers`).
    pub tier: usize,
    /// Its window index (0 for a fingerprint table).
    pub window: i64,
    /// The instant (seconds since the epoch) from which every key it held
    /// has expired: its window's expiry, or for a table the day it was
    /// lost plus the days the table keeps. An open drops it from then on.
    pub expires: i64,
}

/// One live segment: its tier (index into `config.tiers`), window and files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentEntry {
    pub tier: usize,
    pub window: i64,
    /// Sub-filter files in chain order, relative to the `seg/` directory.
    pub files: Vec<String>,
    /// The chain position of `files[0]` (file `i` is sub-filter `first +
    /// i`): above 0 once the oldest tables of a fingerprint chain expired.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub first: u32,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// The file name of sub-filter `index` of a segment: `d-20261129-0.seg`.
pub(crate) fn file_name(
    tier_code: &str,
    span: window::Span,
    window: i64,
    index: u32,
) -> Option<String> {
    if tier_code == "f" {
        // A fingerprint tier: one table for the whole retention, no window.
        return Some(format!("f-table-{index}.seg"));
    }
    Some(format!(
        "{tier_code}-{}-{index}.seg",
        window::label(span, window)?
    ))
}

impl Manifest {
    pub(crate) fn encode(&self) -> Vec<u8> {
        // Serializing plain data with derived impls cannot fail.
        let body = serde_json::to_vec_pretty(self).unwrap_or_default();
        let mut out = Vec::with_capacity(PREFIX + body.len());
        out.extend_from_slice(&MAGIC);
        out.extend_from_slice(&self.version().to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// The format version this manifest is written as.
    fn version(&self) -> u32 {
        if !self.lost.is_empty() {
            VERSION_LOST
        } else {
            self.version_before_lost()
        }
    }

    /// The version a build before [`VERSION_LOST`] wrote this manifest
    /// as, its lost windows included.
    fn version_before_lost(&self) -> u32 {
        if self.segments.iter().any(|s| s.first > 0) {
            VERSION_FIRST
        } else {
            VERSION
        }
    }

    /// Decodes and validates a manifest read from `path`.
    pub(crate) fn decode(bytes: &[u8], path: &Path) -> Result<Manifest> {
        let bad = |why: String| Error::corrupt(path, why);
        if bytes.len() < PREFIX {
            return Err(bad(format!(
                "{} bytes, shorter than the {PREFIX}-byte prefix",
                bytes.len()
            )));
        }
        if bytes[0..8] != MAGIC {
            return Err(bad("not a timebloom manifest (bad magic)".into()));
        }
        let word = |at: usize| {
            u32::from_le_bytes([bytes[at], bytes[at + 1], bytes[at + 2], bytes[at + 3]])
        };
        let version = word(8);
        if !(VERSION..=VERSION_LOST).contains(&version) {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                expected: VERSION_LOST,
                got: version,
            });
        }
        let len = word(12) as usize;
        let body = &bytes[PREFIX..];
        if body.len() != len {
            return Err(bad(format!(
                "body length: header says {len}, file has {}",
                body.len()
            )));
        }
        let crc = crc32fast::hash(body);
        if crc != word(16) {
            return Err(bad(format!(
                "checksum mismatch: expected {:#010x}, got {crc:#010x}",
                word(16)
            )));
        }
        let m: Manifest = serde_json::from_slice(body).map_err(|e| bad(format!("body: {e}")))?;
        if version == VERSION && m.segments.iter().any(|s| s.first > 0) {
            return Err(bad(
                "a version 1 manifest names a chain that starts past its first file".into(),
            ));
        }
        // The version must be the one its body is written as (the header
        // is outside the checksum: a flipped bit shows here), or, for a
        // manifest that lists lost windows, the one builds before version
        // 3 wrote it as.
        let legacy = !m.lost.is_empty() && version == m.version_before_lost();
        if version != m.version() && !legacy {
            return Err(bad(format!(
                "format version {version} does not match its body (written as version {})",
                m.version()
            )));
        }
        m.validate(path)?;
        Ok(m)
    }

    /// Checks what JSON cannot: the config, tier references, and that every
    /// file name is exactly the one derived from its tier and window (so no
    /// name can point outside the directory).
    fn validate(&self, path: &Path) -> Result<()> {
        let bad = |why: String| Error::corrupt(path, why);
        self.config
            .validate()
            .map_err(|e| bad(format!("stored configuration: {e}")))?;
        if self.generation >= MAX_GENERATION {
            return Err(bad(format!(
                "generation {} is not below 2^62",
                self.generation
            )));
        }
        // Not a day any clock the engine accepts reaches: read at it, the
        // tables' every key would look expired.
        let last_day = window::index(
            window::Span::Day,
            crate::clock::MAX_INSTANT,
            self.config.utc_offset_secs,
        )
        .unwrap_or(i64::MAX);
        if i64::from(self.table_day) > last_day {
            return Err(bad(format!(
                "table_day {} is past the last day the clock reaches ({last_day})",
                self.table_day
            )));
        }
        for l in &self.lost {
            let tier = self.config.tiers.get(l.tier).ok_or_else(|| {
                bad(format!(
                    "a lost window names tier {}, which does not exist",
                    l.tier
                ))
            })?;
            if tier.is_table() && l.window != 0 {
                return Err(bad(format!(
                    "a lost table names window {} (a table's window is 0)",
                    l.window
                )));
            }
            // A window no segment entry could have named (its file name
            // has no label) was lost by no open.
            if !tier.is_table() && window::label(tier.span, l.window).is_none() {
                return Err(bad(format!(
                    "a lost window: window {} out of range",
                    l.window
                )));
            }
        }
        for (i, e) in self.segments.iter().enumerate() {
            let tier = self.config.tiers.get(e.tier).ok_or_else(|| {
                bad(format!(
                    "segment {i} names tier {}, which does not exist",
                    e.tier
                ))
            })?;
            // `f-table-N.seg` names no window: a table entry naming any
            // but 0 would match its file and then find the file's header
            // naming window 0, quarantining a healthy table.
            if tier.is_table() && e.window != 0 {
                return Err(bad(format!(
                    "segment {i}: a table names window {} (a table's window is 0)",
                    e.window
                )));
            }
            if e.files.is_empty() || e.files.len() > 64 {
                return Err(bad(format!(
                    "segment {i} has {} files (1 to 64 allowed)",
                    e.files.len()
                )));
            }
            if self.segments[..i]
                .iter()
                .any(|o| o.tier == e.tier && o.window == e.window)
            {
                return Err(bad(format!(
                    "segment {i} repeats tier {} window {}",
                    e.tier, e.window
                )));
            }
            if e.first.checked_add(e.files.len() as u32).is_none() {
                return Err(bad(format!("segment {i}: chain position out of range")));
            }
            for (j, f) in e.files.iter().enumerate() {
                if f.contains('/') || f.contains('\\') || f.contains("..") || f.contains('\0') {
                    return Err(bad(format!(
                        "file name {f:?} escapes the segment directory"
                    )));
                }
                let want = file_name(&tier.code(), tier.span, e.window, e.first + j as u32)
                    .ok_or_else(|| bad(format!("segment {i}: window {} out of range", e.window)))?;
                if *f != want {
                    return Err(bad(format!("file name: expected {want:?}, got {f:?}")));
                }
            }
        }
        Ok(())
    }

    /// Reads `path`; `Ok(None)` when it does not exist.
    pub(crate) fn load(path: &Path) -> Result<Option<Manifest>> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(Error::io("stat manifest", path, e)),
        };
        if meta.len() > MAX_BODY {
            return Err(Error::corrupt(
                path,
                format!("{} bytes is too large for a manifest", meta.len()),
            ));
        }
        let bytes = std::fs::read(path).map_err(|e| Error::io("read manifest", path, e))?;
        Manifest::decode(&bytes, path).map(Some)
    }

    /// Replaces the manifest at `path` atomically.
    pub(crate) fn store(&self, path: &Path) -> Result<()> {
        crate::file::rewrite_atomic(path, &self.encode())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            config: Config::default(),
            seed: 0x1234,
            generation: 7,
            segments: vec![SegmentEntry {
                tier: 0,
                window: 20_000,
                files: vec![file_name("d", window::Span::Day, 20_000, 0).unwrap()],
                first: 0,
            }],
            checkpoint_lsn: 42,
            table_day: 20_457,
            lost: Vec::new(),
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        let p = Path::new("MANIFEST");
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
    }

    /// The format version an encoded manifest carries.
    fn version(b: &[u8]) -> u32 {
        u32::from_le_bytes([b[8], b[9], b[10], b[11]])
    }

    /// A fingerprint chain whose oldest tables were dropped names its
    /// first position and is written as version 2; every other manifest
    /// stays version 1, without the field.
    #[test]
    fn a_chain_past_its_first_file_is_version_2() {
        let p = Path::new("MANIFEST");
        let plain = sample().encode();
        assert_eq!(version(&plain), VERSION);
        assert!(!String::from_utf8_lossy(&plain).contains("first"));
        let mut m = sample();
        m.config.tiers = vec![crate::config::Tier::fingerprint(30)];
        let span = m.config.tiers[0].span;
        m.segments[0].window = 0;
        m.segments[0].first = 2;
        m.segments[0].files = (2..4)
            .map(|i| file_name("f", span, 0, i).unwrap())
            .collect();
        let b = m.encode();
        assert_eq!(version(&b), VERSION_FIRST);
        assert_eq!(Manifest::decode(&b, p).unwrap(), m);
        // Labelled version 1, or with names that do not follow `first`: refused.
        let mut v1 = b.clone();
        v1[8..12].copy_from_slice(&VERSION.to_le_bytes());
        assert!(Manifest::decode(&v1, p).is_err());
        m.segments[0].first = 1;
        assert!(Manifest::decode(&m.encode(), p).is_err());
    }

    /// Lost windows round-trip, are absent from the body when there are
    /// none, and must name a tier that exists.
    #[test]
    fn lost_windows_round_trip_and_name_a_tier() {
        let p = Path::new("MANIFEST");
        assert!(!String::from_utf8_lossy(&sample().encode()).contains("lost"));
        let mut m = sample();
        m.lost = vec![LostWindow {
            tier: 0,
            window: 19_990,
            expires: 1_798_761_600,
        }];
        let b = m.encode();
        assert_eq!(version(&b), VERSION_LOST);
        assert_eq!(Manifest::decode(&b, p).unwrap(), m);
        // Builds before version 3 wrote lost windows as version 1 (or 2):
        // still read.
        let mut v1 = b.clone();
        v1[8..12].copy_from_slice(&VERSION.to_le_bytes());
        assert_eq!(Manifest::decode(&v1, p).unwrap(), m);
        // Once the list is empty, version 1 again; a version past 3 is
        // refused by version.
        let mut none = m.clone();
        none.lost.clear();
        assert_eq!(version(&none.encode()), VERSION);
        let mut v4 = b.clone();
        v4[8..12].copy_from_slice(&4u32.to_le_bytes());
        assert!(matches!(
            Manifest::decode(&v4, p),
            Err(Error::UnsupportedVersion { got: 4, .. })
        ));
        m.lost[0].tier = m.config.tiers.len();
        let e = Manifest::decode(&m.encode(), p).unwrap_err();
        assert!(e.to_string().contains("lost window names tier"), "{e}");
    }

    /// The version word is outside the checksum: a manifest whose version
    /// is not the one its body is written as is refused, so that a flipped
    /// bit never opens it under another version's rules. The one exception
    /// is a manifest with lost windows labelled as builds before version 3
    /// wrote it.
    #[test]
    fn a_version_that_does_not_match_the_body_is_refused() {
        let p = Path::new("MANIFEST");
        let plain = sample();
        let mut first = sample();
        first.config.tiers = vec![crate::config::Tier::fingerprint(30)];
        first.segments[0].window = 0;
        first.segments[0].first = 2;
        first.segments[0].files = (2..4)
            .map(|i| file_name("f", first.config.tiers[0].span, 0, i).unwrap())
            .collect();
        let mut lost = sample();
        lost.lost = vec![LostWindow {
            tier: 0,
            window: 19_990,
            expires: 1_798_761_600,
        }];
        for (m, written, legacy) in [
            (&plain, VERSION, None),
            (&first, VERSION_FIRST, None),
            (&lost, VERSION_LOST, Some(VERSION)),
        ] {
            let b = m.encode();
            assert_eq!(version(&b), written);
            for v in 0..8u32 {
                let mut c = b.clone();
                c[8..12].copy_from_slice(&v.to_le_bytes());
                let r = Manifest::decode(&c, p);
                if v == written || Some(v) == legacy {
                    assert_eq!(r.unwrap(), *m, "version {v}");
                } else {
                    assert!(
                        r.is_err(),
                        "version {v} of a version {written} manifest opened"
                    );
                }
            }
        }
    }

    /// A lost table names window 0, as its segment entry does; any other
    /// window is refused as corrupt, not read as some other table.
    #[test]
    fn a_lost_table_names_window_zero() {
        let p = Path::new("MANIFEST");
        let mut m = sample();
        m.config.tiers.push(crate::config::Tier::fingerprint(30));
        let table = m.config.tiers.len() - 1;
        m.lost = vec![LostWindow {
            tier: table,
            window: 0,
            expires: 1_798_761_600,
        }];
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
        m.lost[0].window = 20_000;
        let e = Manifest::decode(&m.encode(), p).unwrap_err();
        assert!(
            e.to_string().contains("a lost table names window 20000"),
            "{e}"
        );
    }

    /// A table's segment entry names window 0 too: its file name says
    /// nothing of the window, so another is refused here, not by the
    /// table's header at open.
    #[test]
    fn a_table_segment_names_window_zero() {
        let p = Path::new("MANIFEST");
        let mut m = sample();
        m.config.tiers.push(crate::config::Tier::fingerprint(30));
        let table = m.config.tiers.len() - 1;
        m.segments.push(SegmentEntry {
            tier: table,
            window: 0,
            files: vec![file_name("f", window::Span::Day, 0, 0).unwrap()],
            first: 0,
        });
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
        m.segments[1].window = 5;
        let e = Manifest::decode(&m.encode(), p).unwrap_err();
        assert!(e.to_string().contains("a table names window 5"), "{e}");
    }

    /// A generation the next replacement could not add one to (or that
    /// no engine reaches) is refused.
    #[test]
    fn a_generation_from_2_pow_62_is_refused() {
        let p = Path::new("MANIFEST");
        let mut m = sample();
        m.generation = MAX_GENERATION - 1;
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
        for g in [MAX_GENERATION, u64::MAX] {
            m.generation = g;
            let e = Manifest::decode(&m.encode(), p).unwrap_err();
            assert!(e.to_string().contains("generation"), "{e}");
        }
    }

    /// `table_day` reaches at most the day of the last instant the clock
    /// accepts, in the configured offset.
    #[test]
    fn a_table_day_past_the_clocks_last_day_is_refused() {
        let p = Path::new("MANIFEST");
        let mut m = sample();
        let last = u32::try_from(crate::clock::MAX_INSTANT / 86_400).unwrap();
        m.table_day = last;
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
        m.table_day = last + 1;
        let e = Manifest::decode(&m.encode(), p).unwrap_err();
        assert!(e.to_string().contains("table_day"), "{e}");
        // East of UTC that instant is a day later.
        m.config.utc_offset_secs = 3600;
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
    }

    /// A lost window of a windowed tier is one a segment entry could
    /// have named: a window whose label exists (years 0 to 9999).
    #[test]
    fn a_lost_window_past_the_labels_is_refused() {
        let p = Path::new("MANIFEST");
        let mut m = sample();
        m.lost = vec![LostWindow {
            tier: 0,
            window: 19_990,
            expires: 1_798_761_600,
        }];
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
        for w in [i64::MAX, i64::MIN, -719_529, 2_932_897] {
            m.lost[0].window = w;
            let e = Manifest::decode(&m.encode(), p).unwrap_err();
            assert!(e.to_string().contains("out of range"), "{w}: {e}");
        }
    }

    #[test]
    fn every_truncation_and_header_flip_is_an_error() {
        let bytes = sample().encode();
        let p = Path::new("MANIFEST");
        for n in 0..bytes.len() {
            assert!(
                Manifest::decode(&bytes[..n], p).is_err(),
                "truncated to {n}"
            );
        }
        for i in 0..bytes.len() {
            for bit in [0x01u8, 0x80] {
                let mut b = bytes.clone();
                b[i] ^= bit;
                assert!(Manifest::decode(&b, p).is_err(), "flip at {i}");
            }
        }
    }

    #[test]
    fn escaping_names_are_refused() {
        let mut m = sample();
        m.segments[0].files[0] = "../../etc/passwd".into();
        let err = Manifest::decode(&m.encode(), Path::new("M")).unwrap_err();
        assert!(err.to_string().contains("escapes"), "{err}");
        m.segments[0].files[0] = "d-20000101-0.seg".into();
        assert!(Manifest::decode(&m.encode(), Path::new("M")).is_err());
    }
}
