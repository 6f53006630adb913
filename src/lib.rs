//! timebloom: embedded, persistent, time-windowed Bloom filters for
//! deduplicating URLs and other keys.
//!
//! An [`Engine`] keeps, for every tier of its configuration (by default 7
//! daily, 4 weekly and 12 monthly windows), one filter per window as
//! checksummed, memory-mapped files in a directory. Every insert goes into
//! the open window of each tier; old windows expire by themselves; a window
//! that receives more keys than planned grows a chain of larger sub-filters
//! instead of losing accuracy. The configured false-positive rate bounds
//! every query, however many windows it reads.
//!
//! ```
//! use std::time::Duration;
//! use timebloom::{Config, Engine, Tier};
//!
//! # fn main() -> timebloom::Result<()> {
//! let dir = tempfile::tempdir().unwrap();
//! let config = Config {
//!     tiers: vec![Tier::daily(7), Tier::weekly(4)],
//!     expected_items_per_day: 100_000,
//!     fpr: 0.001,
//!     ..Config::default()
//! };
//! let engine = Engine::create(dir.path().join("crawl.tb"), config)?;
//!
//! // Check-and-insert: true the first time a URL is seen.
//! assert!(engine.insert(b"https://example.com/a")?);
//! assert!(!engine.insert(b"https://example.com/a")?);
//!
//! // "Seen in the last 3 days?"
//! assert!(engine.contains_within(b"https://example.com/a", Duration::from_secs(3 * 86_400))?);
//! engine.close()?;
//!
//! // Reopening finds every key; the configuration comes from the directory.
//! let engine = Engine::open(dir.path().join("crawl.tb"))?;
//! assert!(engine.contains(b"https://example.com/a")?);
//! # Ok(())
//! # }
//! ```
//!
//! The layers, bottom up: `hash` (one xxh3-128 per key), `filter` (blocked
//! Bloom and counting kernels, sizing math), `segment` (one mapped file),
//! `chain` (a window's scalable list of sub-filters), `window` (calendar
//! arithmetic), `manifest` (the live set), `engine` (all of it together).
//! `docs/design.md` explains why, `docs/format.md` draws the bytes.
#![deny(missing_docs)]
#![warn(clippy::unwrap_used)]

// The targets the engine refuses (README.md, "Platforms"). Segment bodies,
// and their shadow copies, are mapped and read and written as native
// 64-bit words, while docs/format.md defines them as little-endian: a
// big-endian build would write files that differ from the format and read
// files from other machines wrong, without an error.
#[cfg(target_endian = "big")]
compile_error!(
    "timebloom supports little-endian targets only: its segment files are little-endian \
     (docs/format.md) and are mapped and accessed as native 64-bit words, so on a big-endian \
     target they would be written and read wrong; see README.md, \"Platforms\""
);
// Segment files of several GB are mapped whole, and their 64-bit sizes,
// offsets and block indexes become `usize`: on a 32-bit target they would
// be cut short (a wrong block, not an error).
#[cfg(not(target_pointer_width = "64"))]
compile_error!(
    "timebloom supports 64-bit targets only: segment files of several GB are mapped whole \
     and their 64-bit sizes, offsets and block indexes are used as usize, which a 32-bit \
     target would truncate; see README.md, \"Platforms\""
);

pub mod canonical;
mod chain;
mod clock;
mod config;
mod engine;
mod error;
mod file;
mod fill;
mod filter;
// The fingerprint tier's kernel (`Kind::Fingerprint` tiers). Its design-load
// sizing (`plan`, `Geometry::for_fpr`) and plain `insert` serve its own
// tests and measurements; the engine sizes at load 1 and inserts with a day.
#[allow(dead_code)]
mod fingerprint;
pub mod fuzzing;
mod hash;
mod manifest;
pub mod plan;
mod segment;
mod stats;
mod wal;
mod window;

#[cfg(feature = "redis")]
pub mod redis;

pub use clock::{Clock, ManualClock, Options, SystemClock};
pub use config::{parse_tiers, Config, SyncPolicy, Tier};
pub use engine::{Engine, Handle};
pub use error::{redact_url, shown_prefix, Error, Result};
#[doc(hidden)]
pub use file::testing;
pub use filter::Kind;
pub use stats::{Maintenance, SegmentStats, Stats, TierStats};
pub use window::Span;

#[cfg(test)]
mod tests {
    /// The engine is shared between threads behind an `Arc`.
    #[test]
    fn engine_is_send_and_sync() {
        fn check<T: Send + Sync>() {}
        check::<crate::Engine>();
    }
}
