//! What docs/distributed.md states, checked against a real `redis-server`:
//! its first example, and the key layout (names, types, the directory's
//! fields, expiry).
//!
//! Run: `cargo test --features redis --release --test docs_distributed`.
#![cfg(feature = "redis")]

mod redis_support;

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use redis_support::*;
use timebloom::redis::RedisEngine;
use timebloom::{Config, Tier};

/// `redis-cli`'s answer, without its trailing newline.
fn cli(server: &Server, args: &[&str]) -> String {
    server.cli(args).trim_end().to_string()
}

/// The example at the top of docs/distributed.md, as written (the URL and
/// the prefix aside), with 1,000 crawl-like URLs.
#[test]
fn the_first_example_runs_as_written() {
    if !require("the_first_example_runs_as_written") {
        return;
    }
    let server = Server::start();
    let pre = prefix("example");
    let urls: Vec<Vec<u8>> = (0..1000).map(|i| url(1, i)).collect();
    let config = Config {
        tiers: vec![Tier::daily(7), Tier::monthly(12)],
        ..Config::default()
    };
    let engine = RedisEngine::create_or_open(&server.url(), &pre, config.clone()).expect("create");
    let new: Vec<bool> = engine.insert_batch(&urls).expect("insert"); // one answer per URL, in order
    assert_eq!(new.len(), 1000);
    assert!(new.iter().all(|n| *n));
    let seen = engine
        .contains_within(&urls[0], Duration::from_secs(3 * 86_400))
        .expect("contains_within");
    assert!(seen);
    // The fleet's call again: opens, and checks the configuration.
    let again = RedisEngine::create_or_open(&server.url(), &pre, config).expect("open");
    assert_eq!(
        again.insert_batch(&urls[..3]).expect("insert again"),
        [false; 3]
    );
}

/// "Key layout": `P:config` (a hash with `engine` and `dirs`), the strings
/// `P:{P:s}:<tier>:<label>:<i>`, the directories `P:{P:s}:dir:<tier>` with
/// `id`, `<window>`, `<window>:<i>` and `e<window>`, the result keys
/// `P:{P:s}:r:<client>:<chunk>` (kept an hour); a string's `EXPIREAT` is
/// the end of its last live window plus an hour, and a directory has no TTL.
#[test]
fn the_key_layout_is_as_documented() {
    if !require("the_key_layout_is_as_documented") {
        return;
    }
    let server = Server::start();
    let pre = prefix("layout");
    let engine = RedisEngine::create(&server.url(), &pre, daily(3, 1000)).expect("create");
    let urls: Vec<Vec<u8>> = (0..200).map(|i| url(2, i)).collect();
    engine.insert_batch(&urls).expect("insert");

    assert_eq!(cli(&server, &["TYPE", &format!("{pre}:config")]), "hash");
    let fields = cli(&server, &["HKEYS", &format!("{pre}:config")]);
    assert!(
        fields.contains("engine") && fields.contains("dirs"),
        "{fields}"
    );
    assert_eq!(
        cli(&server, &["HGET", &format!("{pre}:config"), "dirs"]),
        "made"
    );

    let day = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("after 1970")
        .as_secs()
        / 86_400;
    let keys = cli(&server, &["KEYS", &format!("{pre}:*")]);
    let mut strings = 0;
    for k in keys.lines() {
        if k == format!("{pre}:config") {
            continue;
        }
        let rest = k
            .strip_prefix(&format!("{pre}:{{{pre}:"))
            .unwrap_or_else(|| panic!("{k} lacks the tag {{{pre}:s}}"));
        let (shard, rest) = rest.split_once("}:").expect("a tag");
        assert!(shard.parse::<u32>().expect("shard") < 16, "{k}");
        let parts: Vec<&str> = rest.split(':').collect();
        match parts[..] {
            ["d", label, "0"] => {
                strings += 1;
                assert_eq!(cli(&server, &["TYPE", k]), "string");
                assert_eq!(label.len(), 8, "{k}");
                // The window of today (UTC), live 3 days: it expires at the
                // end of the day after tomorrow, plus an hour.
                let at: u64 = cli(&server, &["EXPIRETIME", k])
                    .parse()
                    .expect("expiretime");
                assert_eq!(at, (day + 3) * 86_400 + 3600, "{k}");
            }
            ["dir", "d"] => {
                assert_eq!(cli(&server, &["TYPE", k]), "hash");
                assert_eq!(cli(&server, &["TTL", k]), "-1", "{k}");
                let f = cli(&server, &["HKEYS", k]);
                let w = day.to_string();
                assert!(f.lines().any(|l| l == "id"), "{k}: {f}");
                if f.lines().any(|l| l == w) {
                    assert!(f.lines().any(|l| l == format!("{w}:0")), "{k}: {f}");
                    assert!(f.lines().any(|l| l == format!("e{w}")), "{k}: {f}");
                    assert_eq!(cli(&server, &["HGET", k, &w]), "1");
                }
            }
            ["r", _client, "0"] => {
                let ttl: i64 = cli(&server, &["TTL", k]).parse().expect("ttl");
                assert!((3000..=3600).contains(&ttl), "{k}: {ttl}");
            }
            _ => panic!("a key the layout does not name: {k}"),
        }
    }
    assert_eq!(strings, 16, "one string per shard of today's window");
}

/// "Configuration": `create_or_open` fails with `ConfigMismatch` rather
/// than use another geometry; a client whose configuration differs only in
/// its sync policy (which the Redis engine does not use: Redis's own
/// persistence decides) is given the same geometry and opens the engine.
#[test]
fn create_or_open_ignores_a_sync_policy_redis_does_not_use() {
    if !require("create_or_open_ignores_a_sync_policy_redis_does_not_use") {
        return;
    }
    let server = Server::start();
    let pre = prefix("sync");
    let config = daily(3, 1000);
    let first = RedisEngine::create_or_open(&server.url(), &pre, config.clone()).expect("create");
    assert!(first.insert(b"a").expect("insert"));
    let other = Config {
        sync: timebloom::SyncPolicy::Always,
        ..config.clone()
    };
    let second = RedisEngine::create_or_open(&server.url(), &pre, other)
        .expect("the same geometry, another sync policy");
    assert!(!second.insert(b"a").expect("insert"));
    // Another geometry is still refused.
    let bigger = Config {
        expected_items_per_day: 2000,
        ..config
    };
    let err =
        RedisEngine::create_or_open(&server.url(), &pre, bigger).expect_err("another geometry");
    assert!(
        matches!(err, timebloom::redis::RedisError::ConfigMismatch { .. }),
        "{err}"
    );
}
