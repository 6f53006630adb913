//! A client that has not seen a chain grow: another client fills a window
//! far past its plan (its shards grow new sub-filters), then the first one,
//! which last read the chain lengths when the window was one sub-filter
//! long, asks for those keys. The shards refuse its stale plan, it learns
//! the lengths, and it finds every key and reports none of them new.
//!
//! Run: `cargo test --features redis --release --test redis_growth`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, ManualClock};

#[test]
fn a_client_with_an_old_chain_length_finds_keys_in_new_sub_filters() {
    if !require("a_client_with_an_old_chain_length_finds_keys_in_new_sub_filters") {
        return;
    }
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    let config = Config {
        fpr: 1e-4,
        ..daily(3, 1_000)
    };
    let pre = prefix("growth");
    let opts = || RedisOptions::default().clock(clock.clone());
    let grower = RedisEngine::create_with(&server.url(), &pre, config, opts()).expect("create");
    let stale = RedisEngine::open_with(&server.url(), &pre, opts()).expect("open");
    // The stale client writes first, so it has read the chain lengths (one).
    let first: Vec<Vec<u8>> = (0..100).map(|i| url(95, i)).collect();
    assert!(stale
        .insert_batch(&first)
        .expect("insert")
        .iter()
        .all(|&n| n));
    let keys: Vec<Vec<u8>> = (0..16_000).map(|i| url(96, i)).collect();
    for chunk in keys.chunks(2000) {
        grower.insert_batch(chunk).expect("insert");
    }
    let s = grower.stats().expect("stats");
    let grown = s.tiers[0].segments.last().expect("a window").subfilters;
    assert!(grown >= 4, "16x the plan grew to {grown} sub-filters");
    let found = stale.contains_batch(&keys).expect("contains");
    let missing = found.iter().filter(|&&f| !f).count();
    assert_eq!(missing, 0, "a stale client missed keys of new sub-filters");
    let again = stale.insert_batch(&keys).expect("insert");
    assert!(
        again.iter().all(|&n| !n),
        "a stale client reported keys new"
    );
}
