//! Keys under an engine's prefix changed behind its back: a sub-filter
//! string overwritten with another value, a directory replaced by another
//! type. Acknowledged keys must not silently read as absent (and be
//! reported new again): the call fails, naming the key, where the script
//! can tell.
//!
//! Run: `cargo test --features redis --release --test redis_tamper`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, ManualClock};

fn config() -> Config {
    daily(7, 100_000)
}

/// An engine with 1,000 acknowledged keys, its server and its prefix.
fn engine_with_keys(test: &str, set: u64) -> (Server, RedisEngine, String, Vec<Vec<u8>>) {
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    let pre = prefix(test);
    let e = RedisEngine::create_with(
        &server.url(),
        &pre,
        config(),
        RedisOptions::default().clock(clock),
    )
    .expect("create");
    let keys: Vec<Vec<u8>> = (0..1000).map(|i| url(set, i)).collect();
    assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
    (server, e, pre, keys)
}

/// A sub-filter string replaced by a short value (`SET key x`): its bits
/// are gone. Before, every acknowledged key read as absent and was
/// reported new again, without an error.
#[test]
fn an_overwritten_filter_string_is_an_error_naming_it() {
    if !require("an_overwritten_filter_string_is_an_error_naming_it") {
        return;
    }
    let (server, e, pre, keys) = engine_with_keys("overwrite", 170);
    let strings = server.keys(&format!("{pre}:*:d:*"));
    assert!(!strings.is_empty());
    for s in &strings {
        assert_eq!(server.cli(&["SET", s, "x", "KEEPTTL"]).trim(), "OK");
    }
    let names = |msg: &str| strings.iter().any(|s| msg.contains(s.as_str()));
    match e.contains_batch(&keys) {
        Ok(found) => {
            let missing = found.iter().filter(|&&f| !f).count();
            assert_eq!(missing, 0, "{missing} acknowledged keys absent, no error");
        }
        Err(err) => {
            let msg = err.to_string();
            assert!(names(&msg) && msg.contains("overwritten"), "{msg}");
        }
    }
    match e.insert_batch(&keys) {
        Ok(new) => {
            let again = new.iter().filter(|&&n| n).count();
            assert_eq!(again, 0, "{again} acknowledged keys reported new again");
        }
        Err(err) => {
            let msg = err.to_string();
            assert!(names(&msg) && msg.contains("overwritten"), "{msg}");
        }
    }
}

/// A sub-filter string replaced by a hash, and a directory replaced by a
/// string: the error names the key of the wrong type, not only the
/// client's result key.
#[test]
fn a_key_of_the_wrong_type_is_an_error_naming_it() {
    if !require("a_key_of_the_wrong_type_is_an_error_naming_it") {
        return;
    }
    let (server, e, pre, keys) = engine_with_keys("wrongtype", 171);
    let strings = server.keys(&format!("{pre}:*:d:*"));
    for s in &strings {
        server.cli(&["DEL", s]);
        server.cli(&["HSET", s, "a", "b"]);
    }
    let msg = e
        .contains_batch(&keys)
        .expect_err("a hash read as a filter")
        .to_string();
    assert!(strings.iter().any(|s| msg.contains(s.as_str())), "{msg}");

    let (server, e, pre, keys) = engine_with_keys("wrongtype-dir", 172);
    let dirs = server.keys(&format!("{pre}:*:dir:*"));
    assert!(!dirs.is_empty());
    for d in &dirs {
        assert_eq!(server.cli(&["SET", d, "x"]).trim(), "OK");
    }
    for r in [e.contains_batch(&keys), e.insert_batch(&keys)] {
        let msg = r.expect_err("a string read as a directory").to_string();
        assert!(dirs.iter().any(|d| msg.contains(d.as_str())), "{msg}");
    }
}

/// Every directory deleted while the strings remain: the strings the
/// calls name are read anyway, so no acknowledged key reads as absent or
/// is reported new again.
#[test]
fn deleted_directories_lose_no_key() {
    if !require("deleted_directories_lose_no_key") {
        return;
    }
    let (server, e, pre, keys) = engine_with_keys("nodir", 173);
    let dirs = server.keys(&format!("{pre}:*:dir:*"));
    assert!(!dirs.is_empty());
    for d in &dirs {
        assert_eq!(server.cli(&["DEL", d]).trim(), "1");
    }
    // Not a node that lost its keys: the strings are there.
    e.stats().expect("stats");
    let found = e.contains_batch(&keys).expect("contains");
    assert!(
        found.iter().all(|&f| f),
        "an acknowledged key read as absent"
    );
    let new = e.insert_batch(&keys).expect("insert");
    assert!(new.iter().all(|&n| !n), "an acknowledged key reported new");
}

/// A chain length in the config hash and in a shard's directory raised to
/// the longest chain (`HSET ... 64`, as an edited or foreign hash may
/// hold), and fills of 2^64 - 1: sub-filters that deep are planned past
/// 2^64 bytes. Before, `stats` panicked on an overflow (`attempt to add
/// with overflow`) adding up their sizes; now every call answers or fails
/// with an error, and no acknowledged key reads as absent. (Only the
/// directory's window fields are raised: its `engine` field, raised too
/// at first, made every call fail as another engine's before any chain
/// was read.)
#[test]
fn a_chain_length_past_any_string_does_not_panic() {
    if !require("a_chain_length_past_any_string_does_not_panic") {
        return;
    }
    let (server, e, pre, keys) = engine_with_keys("longchain", 174);
    let dirs = server.keys(&format!("{pre}:*:dir:*"));
    assert!(!dirs.is_empty());
    for d in &dirs {
        let code = d.rsplit(':').next().expect("a tier code");
        let windows: Vec<String> = server
            .cli(&["HKEYS", d])
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| l.parse::<i64>().is_ok())
            .collect();
        assert!(!windows.is_empty(), "{d} names no window");
        for w in windows {
            server.cli(&["HSET", d, &w, "64"]);
            for i in 0..3 {
                server.cli(&["HSET", d, &format!("{w}:{i}"), &u64::MAX.to_string()]);
            }
            let field = format!("chain:{code}:{w}");
            server.cli(&["HSET", &format!("{pre}:config"), &field, "64"]);
        }
    }
    let run = |what: &str, f: &dyn Fn() -> Result<usize, String>| match std::panic::catch_unwind(
        std::panic::AssertUnwindSafe(f),
    ) {
        Ok(Ok(n)) => n,
        Ok(Err(msg)) => {
            eprintln!("{what}: {msg}");
            0
        }
        Err(p) => {
            let msg = p
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            panic!("{what} panicked: {msg}")
        }
    };
    run("stats", &|| {
        e.stats().map(|_| 0).map_err(|err| err.to_string())
    });
    let missing = run("contains", &|| match e.contains_batch(&keys) {
        Ok(found) => Ok(found.iter().filter(|&&f| !f).count()),
        Err(err) => Err(err.to_string()),
    });
    assert_eq!(missing, 0, "{missing} acknowledged keys absent");
    let again = run("insert", &|| match e.insert_batch(&keys) {
        Ok(new) => Ok(new.iter().filter(|&&n| n).count()),
        Err(err) => Err(err.to_string()),
    });
    assert_eq!(again, 0, "{again} acknowledged keys reported new again");
}

/// A directory listing a chain longer than any engine grows (65
/// sub-filters, past the longest, 64): the script reports the longer
/// chain, the client could never send it, and every call failed after
/// its rounds with "the chain lengths kept changing", lookups under the
/// name of the check-and-insert command. Each call now fails at once,
/// under its own command's name, saying what the directory holds.
#[test]
fn a_chain_past_the_longest_fails_naming_the_call() {
    if !require("a_chain_past_the_longest_fails_naming_the_call") {
        return;
    }
    let (server, e, pre, keys) = engine_with_keys("pastlongest", 175);
    let dirs = server.keys(&format!("{pre}:*:dir:*"));
    assert!(!dirs.is_empty());
    for d in &dirs {
        for w in server.cli(&["HKEYS", d]).lines().map(str::trim) {
            if w.parse::<i64>().is_ok() {
                server.cli(&["HSET", d, w, "65"]);
            }
        }
    }
    let check = e.contains_batch(&keys).expect_err("a lookup").to_string();
    assert!(
        check.contains("EVALSHA check:") || check.contains("EVALSHA check "),
        "{check}"
    );
    assert!(!check.contains("check-and-insert"), "{check}");
    assert!(
        check.contains("65 sub-filters") && check.contains(":dir:"),
        "{check}"
    );
    let insert = e.insert_batch(&keys).expect_err("an insert").to_string();
    assert!(insert.contains("EVALSHA check-and-insert"), "{insert}");
    assert!(insert.contains("65 sub-filters"), "{insert}");
}

/// The config hash replaced by a string: the read of it that ends every
/// batch's pipeline fails, and the error names that read, not the batch's
/// script (it said `EVALSHA check-and-insert` for the `HMGET` that failed).
#[test]
fn a_config_hash_of_the_wrong_type_is_an_error_naming_its_read() {
    if !require("a_config_hash_of_the_wrong_type_is_an_error_naming_its_read") {
        return;
    }
    let (server, e, pre, keys) = engine_with_keys("wrongtype-config", 173);
    let config = format!("{pre}:config");
    assert_eq!(server.cli(&["TYPE", &config]).trim(), "hash", "{config}");
    assert_eq!(server.cli(&["DEL", &config]).trim(), "1");
    assert_eq!(server.cli(&["SET", &config, "x"]).trim(), "OK");
    for r in [e.contains_batch(&keys), e.insert_batch(&keys)] {
        let msg = r.expect_err("a string read as the config hash").to_string();
        assert!(msg.contains(&config), "{msg}");
        assert!(msg.contains("HMGET"), "{msg}");
        assert!(!msg.contains("EVALSHA"), "{msg}");
    }
}
