//! Connecting: an ACL user with a password in the URL works; a wrong
//! password is an error naming the command and the key, and no error shows
//! the password.
//!
//! Run: `cargo test --features redis --release --test redis_connect`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError};
use timebloom::{Config, Tier};

#[test]
fn acl_user_and_password_in_the_url() {
    if !require("acl_user_and_password_in_the_url") {
        return;
    }
    let server = Server::with_args(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--user",
        "crawler",
        "on",
        ">s3cret",
        "~tbtest*",
        "+@all",
    ]);
    let good = format!("redis://crawler:s3cret@127.0.0.1:{}", server.port);
    let config = Config {
        tiers: vec![Tier::daily(2)],
        expected_items_per_day: 1000,
        ..Config::default()
    };
    let pre = prefix("acl");
    let e = RedisEngine::create(&good, &pre, config).expect("create as crawler");
    assert_eq!(
        e.insert_batch(&[b"a", b"b", b"a"]).expect("insert"),
        [true, true, false]
    );

    let bad = format!("redis://crawler:pa55-wrong-x9@127.0.0.1:{}", server.port);
    let err = RedisEngine::open(&bad, &pre).expect_err("a wrong password");
    let msg = err.to_string();
    assert!(
        matches!(err, RedisError::Redis { .. }) && msg.contains("HGETALL") && msg.contains(&pre),
        "{msg}"
    );
    assert!(!format!("{err:?}").contains("pa55-wrong-x9"), "{err:?}");
    // A URL that does not parse is named without its password.
    let err = RedisEngine::open("redis://crawler:pa55-wrong-x9@[::1", &pre).expect_err("bad URL");
    assert!(
        !format!("{err} {err:?}").contains("pa55-wrong-x9"),
        "{err:?}"
    );
    // The ACL allows only keys starting with tbtest: another prefix is refused.
    let err = RedisEngine::open(&good, "other").expect_err("a key outside the ACL");
    assert!(err.to_string().contains("other:config"), "{err}");
}
