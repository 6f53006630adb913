//! timebloom: embedded, persistent, time-windowed Bloom filters.
#![deny(missing_docs)]

mod chain;
mod config;
mod engine;
mod error;
mod file;
mod filter;
mod hash;
mod manifest;
mod segment;
mod window;

pub use config::{parse_tiers, Config, Tier};
pub use engine::{
    Clock, Engine, ManualClock, Options, SegmentStats, Stats, SystemClock, TierStats,
};
pub use error::{Error, Result};
pub use filter::Kind;
pub use window::Span;
