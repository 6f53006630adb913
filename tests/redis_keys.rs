//! Key hygiene under a prefix: an engine in Redis reads and writes only
//! the keys docs/distributed.md ("Key layout") names for its prefix `P`:
//! `P:config` and keys beginning `P:{P:<shard>}:`. Engines whose prefixes
//! overlap as strings (`crawl`, `crawl:x`, `crawl-2`, `crawl:config`, glob
//! characters) share no key, and a user's own keys beside them (`P`,
//! `P:notes`) are never read, changed, expired or deleted. Prefixes the
//! layout cannot keep apart (braces, which would change the Cluster hash
//! tag; spaces, control and invisible format characters; the empty
//! prefix) are refused before anything is sent to Redis, through the API
//! and the command line.
//!
//! Run: `cargo test --features redis --release --test redis_keys`.
#![cfg(feature = "redis")]

mod redis_support;

use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock, Tier};

const SHARDS: u32 = 4;

/// Two tiers (codes `d` and `w`), small.
fn config() -> Config {
    Config {
        tiers: vec![Tier::daily(3), Tier::weekly(2)],
        expected_items_per_day: 1000,
        ..Config::default()
    }
}

fn opts(clock: &ManualClock) -> RedisOptions {
    let mut o = RedisOptions::default().clock(clock.clone());
    o.shards = SHARDS;
    o
}

/// What the documented layout calls `key` under prefix `p` (`SHARDS`
/// shards, tier codes `d` and `w`), or `None` when the key is not one of
/// that engine's names.
fn kind_of(key: &str, p: &str) -> Option<&'static str> {
    if key == format!("{p}:config") {
        return Some("config");
    }
    let rest = key.strip_prefix(&format!("{p}:{{{p}:"))?;
    let (shard, rest) = rest.split_once("}:")?;
    // A shard number is written without leading zeros.
    let shard = shard
        .parse::<u32>()
        .ok()
        .filter(|s| s.to_string() == shard)?;
    if shard >= SHARDS {
        return None;
    }
    let parts: Vec<&str> = rest.split(':').collect();
    let code = |c: &str| c == "d" || c == "w";
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    match parts.as_slice() {
        ["dir", c] if code(c) => Some("dir"),
        ["r", client, chunk]
            if client.len() == 16
                && client.bytes().all(|b| b.is_ascii_hexdigit())
                && digits(chunk) =>
        {
            Some("result")
        }
        [c, label, i] if code(c) && !label.is_empty() && digits(i) => Some("filter"),
        _ => None,
    }
}

/// Every key of the server with its type, absolute expiry and a digest
/// of its value (a hash's fields sorted), read in one script call.
fn everything(server: &Server) -> BTreeMap<String, String> {
    const SCRIPT: &str = "local out = {} \
        for _, k in ipairs(redis.call('KEYS', '*')) do \
          local t = redis.call('TYPE', k).ok \
          local v = t \
          if t == 'string' then v = redis.call('GET', k) \
          elseif t == 'hash' then \
            local f = redis.call('HGETALL', k) \
            local p = {} \
            for i = 1, #f, 2 do p[#p + 1] = f[i] .. '=' .. f[i + 1] end \
            table.sort(p) \
            v = table.concat(p, '\\n') \
          end \
          out[#out + 1] = k \
          out[#out + 1] = t .. ' ' .. redis.call('EXPIRETIME', k) .. ' ' .. redis.sha1hex(v) \
        end \
        return out";
    let text = server.cli(&["EVAL", SCRIPT, "0"]);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len() % 2, 0, "{text}");
    lines
        .chunks(2)
        .map(|p| (p[0].to_string(), p[1].to_string()))
        .collect()
}

/// An engine's whole life under `pre` at `to`: created, keys inserted over six
/// days (windows rotate past the daily tier's retention), read back,
/// claimed within a horizon, stats, opened and created again. Returns
/// whether every one of `keys` was new on the first day.
fn exercise(to: &str, pre: &str, keys: &[Vec<u8>]) -> bool {
    let clock = ManualClock::new(day(0));
    let e = RedisEngine::create_with(to, pre, config(), opts(&clock))
        .unwrap_or_else(|e| panic!("create {pre:?}: {e}"));
    let first = e.insert_batch(keys).expect("insert");
    assert!(e.contains_batch(keys).expect("contains").iter().all(|&c| c));
    for d in 1..6u64 {
        clock.set(day(d));
        let fresh: Vec<Vec<u8>> = (0..50).map(|i| url(900 + d, i)).collect();
        e.insert_batch(&fresh).expect("insert on a later day");
        e.insert_within_batch(&fresh, Duration::from_secs(2 * 86_400))
            .expect("insert within");
        e.stats().expect("stats");
    }
    let again = RedisEngine::create_or_open_with(to, pre, config(), opts(&clock))
        .expect("create_or_open an existing engine");
    again.stats().expect("stats");
    let opened = RedisEngine::open_with(to, pre, opts(&clock)).expect("open");
    opened.contains_batch(keys).expect("contains");
    match RedisEngine::create_with(to, pre, config(), opts(&clock)) {
        Err(RedisError::AlreadyExists { key }) => assert_eq!(key, format!("{pre}:config")),
        Err(e) => panic!("create {pre:?} again: {e}"),
        Ok(_) => panic!("create {pre:?} again succeeded"),
    }
    first.iter().all(|&n| n)
}

/// Every key an engine makes is one of the documented names, and
/// every kind of name is made.
#[test]
fn an_engine_makes_only_the_documented_keys() {
    if !require("an_engine_makes_only_the_documented_keys") {
        return;
    }
    let server = Server::start();
    let pre = prefix("layout");
    let keys: Vec<Vec<u8>> = (0..200).map(|i| url(1, i)).collect();
    assert!(exercise(&server.url(), &pre, &keys));
    let mut kinds = BTreeSet::new();
    for k in server.keys("*") {
        let kind = kind_of(&k, &pre).unwrap_or_else(|| panic!("{k:?} is not a documented name"));
        kinds.insert(kind);
    }
    assert_eq!(
        kinds,
        BTreeSet::from(["config", "dir", "filter", "result"]),
        "every documented kind of key is made"
    );
    // Every key begins with `P:` (an ACL key pattern `~P:*` covers them).
    assert!(server
        .keys("*")
        .iter()
        .all(|k| k.starts_with(&format!("{pre}:"))));
}

/// Engines whose prefixes overlap as strings, and prefixes with glob
/// characters, in one database beside a user's keys: each engine's keys
/// are its own names only, no key is the name of two engines, and nothing
/// one engine does changes a key that is not its own.
#[test]
fn overlapping_prefixes_share_and_touch_no_key() {
    if !require("overlapping_prefixes_share_and_touch_no_key") {
        return;
    }
    let server = Server::start();
    let base = prefix("overlap");
    let prefixes: Vec<String> = [
        "", ":x", "-2", ":config", ":dir", ":d", ":r", "*", "?", "[a-z]", "\\", ":*", ":0",
    ]
    .iter()
    .map(|s| format!("{base}{s}"))
    .collect();
    // The user's own keys, named like the engines' (a TTL on one).
    let user = [
        base.clone(),
        format!("{base}:notes"),
        format!("{base}:config:notes"),
        format!("{base}:{{x}}"),
        format!("{base}:d"),
        format!("{base}:dir:d"),
        format!("{base}*"),
    ];
    for (i, k) in user.iter().enumerate() {
        server.cli(&["SET", k, &format!("user value {i}")]);
    }
    server.cli(&["HSET", &format!("{base}:x:cfg"), "a", "1"]);
    server.cli(&["EXPIRE", &format!("{base}:notes"), "100000"]);
    // The digest sees a change of value, of a hash field and of expiry.
    let first = everything(&server);
    assert_eq!(first.len(), user.len() + 1);
    for change in [
        vec!["SET".to_string(), base.clone(), "user value 0!".into()],
        vec![
            "HSET".into(),
            format!("{base}:x:cfg"),
            "a".into(),
            "2".into(),
        ],
        vec!["EXPIRE".into(), format!("{base}:notes"), "200000".into()],
    ] {
        let before = everything(&server);
        server.cli(&change.iter().map(String::as_str).collect::<Vec<_>>());
        assert_ne!(before, everything(&server), "{change:?}");
    }
    // The same keys go into every engine: each has its own filters.
    let keys: Vec<Vec<u8>> = (0..300).map(|i| url(7, i)).collect();
    for p in &prefixes {
        let before = everything(&server);
        assert!(
            exercise(&server.url(), p, &keys),
            "{p:?}: a key another engine holds read as seen"
        );
        let after = everything(&server);
        for (k, snap) in &before {
            if kind_of(k, p).is_some() {
                continue;
            }
            assert_eq!(
                after.get(k),
                Some(snap),
                "engine {p:?} changed or deleted {k:?}, not one of its keys"
            );
        }
        for k in after.keys() {
            if !before.contains_key(k) {
                assert!(
                    kind_of(k, p).is_some(),
                    "engine {p:?} made {k:?}, not one of its names"
                );
            }
        }
    }
    // The documented way to list exactly one engine's keys (to delete
    // them): `P:config` and the `SCAN` pattern `P:{P:*`, glob characters of
    // `P` escaped. `P:*` would take the user's keys and other engines'.
    for p in &prefixes {
        let e = glob_escape(p);
        let mut listed: BTreeSet<String> =
            server.keys(&format!("{e}:{{{e}:*")).into_iter().collect();
        listed.insert(format!("{p}:config"));
        let own: BTreeSet<String> = server
            .keys("*")
            .into_iter()
            .filter(|k| kind_of(k, p).is_some())
            .collect();
        assert_eq!(listed, own, "{p:?}");
    }
    assert!(server
        .keys(&format!("{}:*", glob_escape(&base)))
        .iter()
        .any(|k| kind_of(k, &base).is_none()));
    // No key is the name of two engines; every key is an engine's or the
    // user's.
    for k in server.keys("*") {
        let owners: Vec<&String> = prefixes
            .iter()
            .filter(|p| kind_of(&k, p).is_some())
            .collect();
        let users = user.contains(&k) || k == format!("{base}:x:cfg");
        assert_eq!(
            owners.len() + usize::from(users),
            1,
            "{k:?}: engines {owners:?}, user's {users}"
        );
    }
}

/// Prefixes the layout cannot keep apart are refused as a
/// configuration error that names the reason, before any connection (the
/// URL here has no server), and with a server nothing is written.
#[test]
fn prefixes_that_would_break_the_layout_are_refused_before_connecting() {
    let nowhere = "redis://127.0.0.1:1";
    let long = "p".repeat(129);
    for (bad, why) in [
        ("", "1 to 128 bytes"),
        (long.as_str(), "1 to 128 bytes"),
        ("a{b}c", "braces"),
        ("{x", "braces"),
        ("}", "braces"),
        ("{}", "braces"),
        ("crawl{0}", "braces"),
        ("a b", "spaces"),
        (" a", "spaces"),
        ("a\n", "control"),
        ("a\tb", "spaces"),
        ("a\rb", "spaces"),
        ("a\u{0}b", "control"),
        ("a\u{7f}b", "control"),
        ("a\u{a0}b", "spaces"),
        ("a\u{2028}b", "spaces"),
    ] {
        for r in [
            RedisEngine::create(nowhere, bad, config()).map(|_| ()),
            RedisEngine::open(nowhere, bad).map(|_| ()),
            RedisEngine::create_or_open(nowhere, bad, config()).map(|_| ()),
        ] {
            match r {
                Err(RedisError::Engine(timebloom::Error::InvalidConfig { reason: msg })) => {
                    assert!(msg.contains(why), "{bad:?}: {msg}")
                }
                Err(other) => panic!("{bad:?}: not a configuration error: {other}"),
                Ok(()) => panic!("{bad:?} was taken"),
            }
        }
    }
}

/// Invisible format characters (zero-width, bidi controls, the BOM, the
/// soft hyphen) would make a prefix that looks like another one, or a
/// message that displays wrongly: refused as a configuration error naming
/// the character by its code point, before any connection.
#[test]
fn prefixes_with_invisible_format_characters_are_refused() {
    let nowhere = "redis://127.0.0.1:1";
    let invisible = [
        0xad, 0x200b, 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
        0x2060, 0x2061, 0x2062, 0x2063, 0x2064, 0x2066, 0x2067, 0x2068, 0x2069, 0xfeff,
    ];
    for cp in invisible {
        let c = char::from_u32(cp).expect("a char");
        let code = format!("U+{cp:04X}");
        for bad in [
            format!("crawl{c}"),
            format!("{c}crawl"),
            format!("cr{c}awl"),
        ] {
            for r in [
                RedisEngine::create(nowhere, &bad, config()).map(|_| ()),
                RedisEngine::open(nowhere, &bad).map(|_| ()),
                RedisEngine::create_or_open(nowhere, &bad, config()).map(|_| ()),
            ] {
                match r {
                    Err(RedisError::Engine(timebloom::Error::InvalidConfig { reason: msg })) => {
                        assert!(msg.contains(&code), "{bad:?}: {msg}");
                        assert!(!msg.contains(c), "{bad:?}: the message shows it: {msg}");
                    }
                    Err(other) => panic!("{bad:?}: not a configuration error: {other}"),
                    Ok(()) => panic!("{bad:?} was taken"),
                }
            }
        }
    }
}

/// The longest prefix allowed, and prefixes of other scripts, work
/// and are the engine's own; the engine names its prefix as given.
#[test]
fn long_and_non_ascii_prefixes_work() {
    if !require("long_and_non_ascii_prefixes_work") {
        return;
    }
    let server = Server::start();
    let long = format!("{}{}", prefix("long"), "p".repeat(128))
        .split_at(128)
        .0
        .to_string();
    for pre in [
        long.as_str(),
        "crawl-é",
        "краул",
        "クロール:東京",
        "a\\b*c?[d]",
    ] {
        let keys: Vec<Vec<u8>> = (0..100).map(|i| url(3, i)).collect();
        assert!(exercise(&server.url(), pre, &keys), "{pre:?}");
        let e = RedisEngine::open(&server.url(), pre).expect("open");
        assert_eq!(e.prefix(), pre);
    }
    for k in server.keys("*") {
        let n = [
            long.as_str(),
            "crawl-é",
            "краул",
            "クロール:東京",
            "a\\b*c?[d]",
        ]
        .iter()
        .filter(|p| kind_of(&k, p).is_some())
        .count();
        assert_eq!(n, 1, "{k:?}");
    }
}

/// A user key at the engine's own config name (`P:config`, not a hash)
/// makes create fail naming that key, and is left as it was.
#[test]
fn a_foreign_value_at_the_config_name_is_an_error_and_kept() {
    if !require("a_foreign_value_at_the_config_name_is_an_error_and_kept") {
        return;
    }
    let server = Server::start();
    let pre = prefix("foreign");
    let key = format!("{pre}:config");
    server.cli(&["SET", &key, "mine"]);
    for r in [
        RedisEngine::create(&server.url(), &pre, config()).map(|_| ()),
        RedisEngine::create_or_open(&server.url(), &pre, config()).map(|_| ()),
        RedisEngine::open(&server.url(), &pre).map(|_| ()),
    ] {
        let msg = r.expect_err("a string at the config name").to_string();
        assert!(msg.contains(&key), "{msg}");
    }
    assert_eq!(server.cli(&["GET", &key]).trim(), "mine");
    assert_eq!(server.keys("*"), vec![key]);
}

/// A user's hash at the engine's config name that has no `engine` field
/// is not taken for the engine's: create refuses it naming the key (and
/// adds no field to it), open names it too, and the hash is left as it was.
#[test]
fn a_foreign_hash_at_the_config_name_is_refused_and_kept() {
    if !require("a_foreign_hash_at_the_config_name_is_refused_and_kept") {
        return;
    }
    let server = Server::start();
    let pre = prefix("foreignhash");
    let key = format!("{pre}:config");
    server.cli(&["HSET", &key, "owner", "ops", "note", "keep me"]);
    let before = server.cli(&["HGETALL", &key]);
    for r in [
        RedisEngine::create(&server.url(), &pre, config()).map(|_| ()),
        RedisEngine::create_or_open(&server.url(), &pre, config()).map(|_| ()),
    ] {
        let msg = r.expect_err("a user's hash at the config name").to_string();
        assert!(msg.contains(&key), "{msg}");
        assert!(msg.contains("not a timebloom engine"), "{msg}");
    }
    let msg = RedisEngine::open(&server.url(), &pre)
        .expect_err("a user's hash is no engine")
        .to_string();
    assert!(msg.contains(&key), "{msg}");
    assert_eq!(server.cli(&["HGETALL", &key]), before);
    assert_eq!(server.cli(&["HLEN", &key]).trim(), "2");
    assert_eq!(server.keys("*"), vec![key]);
}

/// Through the command line: an empty prefix, one with a space or a
/// newline, braces, and one that is not UTF-8 are refused with a message
/// and a failing exit, and nothing is written to Redis.
#[cfg(feature = "cli")]
#[test]
fn the_command_line_refuses_bad_prefixes() {
    use std::ffi::OsString;
    use std::process::Command;
    if !require("the_command_line_refuses_bad_prefixes") {
        return;
    }
    let server = Server::start();
    let bin = env!("CARGO_BIN_EXE_timebloom");
    let mut bad: Vec<(OsString, &str)> = vec![
        ("".into(), "1 to 128 bytes"),
        ("a b".into(), "spaces"),
        ("a\nb".into(), "control"),
        ("abcdef\rX".into(), "control"),
        ("a\u{1b}[2Jb".into(), "control"),
        ("a{b}c".into(), "braces"),
    ];
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        bad.push((OsString::from_vec(b"crawl\xff".to_vec()), "UTF-8"));
    }
    for (pre, why) in bad {
        for command in [
            vec!["create", "--items-per-day", "1000"],
            vec!["add"],
            vec!["stats"],
        ] {
            let out = Command::new(bin)
                .args(&command)
                .arg("--redis")
                .arg(server.url())
                .arg("--prefix")
                .arg(&pre)
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run timebloom");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{pre:?} {command:?}: succeeded");
            assert!(err.contains(why), "{pre:?} {command:?}: {err}");
            if why != "UTF-8" {
                // One line, the prefix's control characters escaped: a
                // newline or a carriage return does not cut or overwrite
                // the message.
                let line = err.strip_suffix('\n').unwrap_or(&err);
                assert!(
                    !line.chars().any(char::is_control),
                    "{pre:?} {command:?}: {err:?}"
                );
            }
        }
    }
    // Without --redis the prefix is refused before it is checked: shown
    // escaped as well.
    let dir = tempfile::tempdir().expect("temp dir");
    let out = Command::new(bin)
        .args(["stats", "--prefix", "a\nb"])
        .arg(dir.path())
        .output()
        .expect("run timebloom");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("needs --redis"), "{err}");
    let line = err.strip_suffix('\n').unwrap_or(&err);
    assert!(!line.chars().any(char::is_control), "{err:?}");
    assert!(server.keys("*").is_empty(), "{:?}", server.keys("*"));
}

/// A --prefix with an invisible format character is refused with its code
/// point named, and the message shows no such character: a zero-width
/// space would make the prefix look like another, a bidi override would
/// display the message out of order.
#[cfg(feature = "cli")]
#[test]
fn the_command_line_shows_a_refused_invisible_prefix_escaped() {
    use std::process::Command;
    if !require("the_command_line_shows_a_refused_invisible_prefix_escaped") {
        return;
    }
    let server = Server::start();
    let bin = env!("CARGO_BIN_EXE_timebloom");
    for (pre, code) in [
        ("crawl\u{200b}", "U+200B"),
        ("a\u{202e}cba", "U+202E"),
        ("\u{feff}crawl", "U+FEFF"),
    ] {
        for command in [vec!["create", "--items-per-day", "1000"], vec!["stats"]] {
            let out = Command::new(bin)
                .args(&command)
                .arg("--redis")
                .arg(server.url())
                .arg("--prefix")
                .arg(pre)
                .stdin(std::process::Stdio::null())
                .output()
                .expect("run timebloom");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{pre:?} {command:?}: succeeded");
            assert!(err.contains(code), "{pre:?} {command:?}: {err}");
            let shown = pre.chars().find(|c| !c.is_ascii()).expect("the character");
            assert!(!err.contains(shown), "{pre:?} {command:?}: {err:?}");
        }
    }
    assert!(server.keys("*").is_empty());
}

/// `p` with the glob characters of `SCAN` and ACL key patterns escaped.
fn glob_escape(p: &str) -> String {
    p.chars()
        .flat_map(|c| match c {
            '*' | '?' | '[' | ']' | '\\' => vec!['\\', c],
            c => vec![c],
        })
        .collect()
}

/// Every key begins `P:`: an ACL user allowed only the key pattern `~P:*`
/// (glob characters of `P` escaped with a backslash) runs the whole engine,
/// and such a user is kept from the keys beside it.
#[test]
fn an_acl_key_pattern_of_the_prefix_covers_the_engine() {
    if !require("an_acl_key_pattern_of_the_prefix_covers_the_engine") {
        return;
    }
    let server = Server::start();
    let base = prefix("acl");
    for (n, pre) in [base.clone(), format!("{base}*?[x]\\")].iter().enumerate() {
        let escaped = glob_escape(pre);
        let user = format!("u{n}");
        let ok = server.cli(&[
            "ACL",
            "SETUSER",
            &user,
            "on",
            ">pw",
            "resetkeys",
            &format!("~{escaped}:*"),
            "+@all",
        ]);
        assert_eq!(ok.trim(), "OK");
        let url = format!("redis://{user}:pw@127.0.0.1:{}", server.port);
        let keys: Vec<Vec<u8>> = (0..100).map(|i| url_key(n as u64, i)).collect();
        let clock = ManualClock::new(day(0));
        let e = RedisEngine::create_with(&url, pre, config(), opts(&clock)).expect("create");
        assert!(e.insert_batch(&keys).expect("insert").iter().all(|&n| n));
        clock.set(day(3));
        e.insert_batch(&keys).expect("insert later");
        e.stats().expect("stats");
        // The pattern is the prefix's only: a prefix that merely begins
        // like it is out of this user's reach.
        let other = format!("{pre}x");
        let r = RedisEngine::create_with(&url, &other, config(), opts(&clock));
        assert!(
            r.as_ref()
                .is_err_and(|e| e.to_string().to_lowercase().contains("noperm")),
            "{other:?}: {:?}",
            r.map(|_| ())
        );
    }
}

fn url_key(n: u64, i: u64) -> Vec<u8> {
    url(40 + n, i)
}

/// The same in a Cluster: engines on overlapping prefixes beside a user's
/// keys make only their own names, every key of shard `s` sits in the slot
/// of its tag `P:s`, and the user's keys are as they were.
#[test]
fn in_a_cluster_overlapping_prefixes_keep_apart_and_each_shard_in_one_slot() {
    if !require("in_a_cluster_overlapping_prefixes_keep_apart_and_each_shard_in_one_slot") {
        return;
    }
    let cluster = Cluster::start();
    let base = prefix("cluster");
    let prefixes = [base.clone(), format!("{base}:x"), format!("{base}*")];
    let user = [
        base.clone(),
        format!("{base}:notes"),
        format!("{base}:{{x}}"),
    ];
    for k in &user {
        cli(cluster.master_for(k), &["SET", k, "user value"]);
    }
    let keys: Vec<Vec<u8>> = (0..200).map(|i| url(8, i)).collect();
    for p in &prefixes {
        assert!(exercise(&cluster.url(), p, &keys), "{p:?}");
    }
    let slot = |k: &str| cli(cluster.masters()[0], &["CLUSTER", "KEYSLOT", k]);
    let mut seen = 0;
    for port in cluster.masters() {
        for k in cli(port, &["--scan"]).lines().map(str::trim) {
            if user.iter().any(|u| u == k) {
                continue;
            }
            seen += 1;
            let owners: Vec<&String> = prefixes
                .iter()
                .filter(|p| kind_of(k, p).is_some())
                .collect();
            assert_eq!(owners.len(), 1, "{k:?}: {owners:?}");
            let p = owners[0];
            if k != format!("{p}:config") {
                let shard = k[p.len() + 2 + p.len() + 1..]
                    .split('}')
                    .next()
                    .expect("a tag");
                assert_eq!(slot(k), slot(&format!("{p}:{shard}")), "{k:?}");
            }
        }
    }
    assert!(seen > 3 * (1 + 2 * SHARDS as usize), "{seen} keys");
    for k in &user {
        assert_eq!(
            cli(cluster.master_for(k), &["GET", k]).trim(),
            "user value",
            "{k:?}"
        );
        assert_eq!(
            cli(cluster.master_for(k), &["TTL", k]).trim(),
            "-1",
            "{k:?}"
        );
    }
}
