//! The manifest: the one file that says which segment files are live.
//!
//! Layout (all integers little-endian):
//!
//! | offset | size | field |
//! |---|---|---|
//! | 0 | 8 | magic `TBLMMANI` |
//! | 8 | 4 | format version (1) |
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
/// The manifest format version this build writes and reads.
pub(crate) const VERSION: u32 = 1;
const PREFIX: usize = 20;
/// Larger manifests are refused as corrupt (10,000 windows x 16 tiers fit easily).
const MAX_BODY: u64 = 256 << 20;

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
}

/// One live segment: its tier (index into `config.tiers`), window and files.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct SegmentEntry {
    pub tier: usize,
    pub window: i64,
    /// Sub-filter files in chain order, relative to the `seg/` directory.
    pub files: Vec<String>,
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
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(&crc32fast::hash(&body).to_le_bytes());
        out.extend_from_slice(&body);
        out
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
        if version != VERSION {
            return Err(Error::UnsupportedVersion {
                path: path.to_path_buf(),
                expected: VERSION,
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
        for (i, e) in self.segments.iter().enumerate() {
            let tier = self.config.tiers.get(e.tier).ok_or_else(|| {
                bad(format!(
                    "segment {i} names tier {}, which does not exist",
                    e.tier
                ))
            })?;
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
            for (j, f) in e.files.iter().enumerate() {
                if f.contains('/') || f.contains('\\') || f.contains("..") || f.contains('\0') {
                    return Err(bad(format!(
                        "file name {f:?} escapes the segment directory"
                    )));
                }
                let want = file_name(&tier.code(), tier.span, e.window, j as u32)
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
            }],
            checkpoint_lsn: 42,
        }
    }

    #[test]
    fn round_trips() {
        let m = sample();
        let p = Path::new("MANIFEST");
        assert_eq!(Manifest::decode(&m.encode(), p).unwrap(), m);
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
