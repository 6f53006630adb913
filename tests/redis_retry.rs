//! Connection loss between a check-and-insert's execution and its reply:
//! a loopback proxy forwards the request to `redis-server`, then drops the
//! reply and closes the connection. The client reconnects and sends the
//! batch again with the same request id; the script returns the stored
//! answer, so every key is reported new exactly once (not "present", which
//! a plain resend would say). Errors name the command and the key.
//!
//! Run: `cargo test --features redis --release --test redis_retry`.
#![cfg(feature = "redis")]

mod redis_support;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock, Tier};

/// Forwards loopback connections to `target`; when `cut` is set, the next
/// reply is swallowed and both connections are closed; while `down` is
/// set, every reply is. `budget` (unlimited at `usize::MAX`) is the number
/// of reply bytes still forwarded before `down` sets itself. `cut_on`
/// sets `cut` as the first command containing its bytes goes out (then
/// clears itself), so that command's reply is the one swallowed.
///
/// Requests go to the server one command at a time, each once a reply to
/// the one before has come through: a command after a swallowed reply
/// never reaches the server. (A pipeline forwarded whole ran on past the
/// cut, as far as the server got before it saw the connection close: how
/// many of a batch's groups ran depended on how the threads were
/// scheduled.)
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    down: Arc<AtomicBool>,
    budget: Arc<AtomicUsize>,
    cuts: Arc<AtomicUsize>,
    cut_on: Arc<Mutex<Option<Vec<u8>>>>,
}

/// The length of the first whole command in `b` (RESP: an array of bulk
/// strings, as clients send them), `None` while it is incomplete. Bytes
/// that are not such an array count as one command.
fn command_len(b: &[u8]) -> Option<usize> {
    fn number(b: &[u8], at: usize, tag: u8) -> Option<Result<(usize, usize), ()>> {
        if *b.get(at)? != tag {
            return Some(Err(()));
        }
        let end = at + b[at..].windows(2).position(|w| w == b"\r\n")?;
        let n = std::str::from_utf8(&b[at + 1..end])
            .ok()
            .and_then(|t| t.parse().ok());
        Some(n.map(|n| (n, end + 2)).ok_or(()))
    }
    let Ok((n, mut at)) = number(b, 0, b'*')? else {
        return Some(b.len());
    };
    for _ in 0..n {
        let Ok((len, next)) = number(b, at, b'$')? else {
            return Some(b.len());
        };
        at = next + len + 2;
        if at > b.len() {
            return None;
        }
    }
    Some(at)
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let cut = Arc::new(AtomicBool::new(false));
        let down = Arc::new(AtomicBool::new(false));
        let budget = Arc::new(AtomicUsize::new(usize::MAX));
        let cuts = Arc::new(AtomicUsize::new(0));
        let cut_on: Arc<Mutex<Option<Vec<u8>>>> = Arc::new(Mutex::new(None));
        let (c, d, b, n, on) = (
            Arc::clone(&cut),
            Arc::clone(&down),
            Arc::clone(&budget),
            Arc::clone(&cuts),
            Arc::clone(&cut_on),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (c, d, b, n, on) = (
                    Arc::clone(&c),
                    Arc::clone(&d),
                    Arc::clone(&b),
                    Arc::clone(&n),
                    Arc::clone(&on),
                );
                let (mut c_in, mut s_out) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                // Reply chunks passed on to the client, and whether the
                // connection was cut: the request side forwards the next
                // command once the first has grown or the second is set.
                let passed = Arc::new(AtomicUsize::new(0));
                let closed = Arc::new(AtomicBool::new(false));
                let (p, x) = (Arc::clone(&passed), Arc::clone(&closed));
                let (cc, on) = (Arc::clone(&c), on);
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    let mut pending = Vec::new();
                    'read: while let Ok(k) = c_in.read(&mut buf) {
                        if k == 0 {
                            break;
                        }
                        pending.extend_from_slice(&buf[..k]);
                        while let Some(len) = command_len(&pending) {
                            let mark = p.load(Ordering::SeqCst);
                            {
                                let mut on = on.lock().expect("cut_on");
                                let hit = on.as_ref().is_some_and(|pat| {
                                    pending[..len].windows(pat.len()).any(|w| w == &pat[..])
                                });
                                if hit {
                                    *on = None;
                                    cc.store(true, Ordering::SeqCst);
                                }
                            }
                            if s_out.write_all(&pending[..len]).is_err() {
                                break 'read;
                            }
                            pending.drain(..len);
                            while p.load(Ordering::SeqCst) == mark {
                                if x.load(Ordering::SeqCst) {
                                    break 'read;
                                }
                                std::thread::sleep(Duration::from_micros(100));
                            }
                        }
                    }
                    let _ = s_out.shutdown(Shutdown::Both);
                });
                std::thread::spawn(move || {
                    let (mut s_in, mut c_out) = (server, client);
                    let mut buf = [0u8; 65536];
                    while let Ok(k) = s_in.read(&mut buf) {
                        if k == 0 {
                            break;
                        }
                        let spent = b.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |left| {
                            (left != usize::MAX).then(|| left.saturating_sub(k))
                        });
                        if spent.is_ok_and(|left| left < k) {
                            d.store(true, Ordering::SeqCst);
                        }
                        if c.swap(false, Ordering::SeqCst) || d.load(Ordering::SeqCst) {
                            n.fetch_add(1, Ordering::SeqCst);
                            break; // the reply is lost
                        }
                        if c_out.write_all(&buf[..k]).is_err() {
                            break;
                        }
                        passed.fetch_add(1, Ordering::SeqCst);
                    }
                    closed.store(true, Ordering::SeqCst);
                    let _ = c_out.shutdown(Shutdown::Both);
                    let _ = s_in.shutdown(Shutdown::Both);
                });
            }
        });
        Proxy {
            port,
            cut,
            down,
            budget,
            cuts,
            cut_on,
        }
    }
}

/// A new engine through `port` (4 retries, 10 ms backoff) of `tiers`
/// planned for `per_day` keys a day.
fn engine(
    port: u16,
    prefix: &str,
    clock: &ManualClock,
    tiers: Vec<Tier>,
    per_day: u64,
) -> RedisEngine {
    let mut o = RedisOptions::default().clock(clock.clone());
    o.backoff = Duration::from_millis(10);
    o.retries = 4;
    let url = format!("redis://127.0.0.1:{port}");
    let config = Config {
        tiers,
        expected_items_per_day: per_day,
        fpr: 1e-6,
        ..Config::default()
    };
    RedisEngine::create_with(&url, prefix, config, o).expect("create")
}

fn default_tiers() -> Vec<Tier> {
    vec![Tier::daily(7), Tier::monthly(12)]
}

/// A server, a proxy in front of it, and an engine (7d, 12m at 100,000
/// keys a day) through the proxy that has inserted one key; `None` when
/// the test may skip (no `redis-server` outside CI).
fn setup(test: &str) -> Option<(Server, Proxy, ManualClock, RedisEngine)> {
    if !require(test) {
        return None;
    }
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let clock = ManualClock::new(day(0));
    let e = engine(proxy.port, &prefix(test), &clock, default_tiers(), 100_000);
    assert!(e.insert(b"warm-up").expect("insert"));
    Some((server, proxy, clock, e))
}

#[test]
fn a_lost_reply_is_retried_and_reports_each_key_new_once() {
    let Some((_server, proxy, _clock, e)) = setup("retry") else {
        return;
    };
    let keys: Vec<Vec<u8>> = (0..3000).map(|i| url(80, i)).collect();
    proxy.cut.store(true, Ordering::SeqCst);
    let first = e.insert_batch(&keys).expect("insert through a lost reply");
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1, "no reply was cut");
    let new = first.iter().filter(|&&n| n).count();
    assert_eq!(new, keys.len(), "a retried batch reported known keys");
    let again = e.insert_batch(&keys).expect("insert again");
    assert!(again.iter().all(|&n| !n), "a key was new twice");
    // Checks are read-only: a lost reply is simply asked again.
    proxy.cut.store(true, Ordering::SeqCst);
    assert!(e
        .contains_batch(&keys)
        .expect("contains through a lost reply")
        .iter()
        .all(|&f| f));
}

/// After a write failed part-way (the proxy up again): some of `keys` are
/// recorded, not all; `send` sending them again reports every key new, and
/// a third time none.
fn check_resumed(
    what: &str,
    e: &RedisEngine,
    keys: &[Vec<u8>],
    send: impl Fn() -> Result<Vec<bool>, RedisError>,
) {
    let count = |v: Vec<bool>| v.iter().filter(|&&p| p).count();
    let seen = count(e.contains_batch(keys).expect("contains"));
    assert!(
        seen > 0 && seen < keys.len(),
        "{what}: {seen} of {} keys recorded",
        keys.len()
    );
    let new = count(send().expect("the same batch again"));
    assert_eq!(
        new,
        keys.len(),
        "{what}: resumed batch reported keys present"
    );
    assert_eq!(
        count(send().expect("a third time")),
        0,
        "{what}: a key was new twice"
    );
}

/// Every reply lost until the retries run out: the call fails after Redis
/// ran its scripts. Sent again, the same batch resumes (the stored answers
/// of the rounds and groups that ran) and reports each key new exactly
/// once; a different batch in between starts over, reporting the keys it
/// sent before as present.
#[test]
fn a_batch_sent_again_after_the_retries_ran_out_reports_each_key_new_once() {
    let Some((_server, proxy, clock, e)) = setup("resume") else {
        return;
    };
    for (method, set) in [("insert_batch", 82), ("insert_within_batch", 83)] {
        let keys: Vec<Vec<u8>> = (0..3000).map(|i| url(set, i)).collect();
        let send = || match method {
            "insert_batch" => e.insert_batch(&keys),
            _ => e.insert_within_batch(&keys, Duration::from_secs(86_400)),
        };
        proxy.down.store(true, Ordering::SeqCst);
        let cuts = proxy.cuts.load(Ordering::SeqCst);
        let err = send().expect_err("every reply lost");
        proxy.down.store(false, Ordering::SeqCst);
        assert!(proxy.cuts.load(Ordering::SeqCst) > cuts, "no reply was cut");
        assert!(msg_has(&err, "EVALSHA check-and-insert"), "{err}");
        // The pipeline was cut after its first reply: some groups ran.
        check_resumed(method, &e, &keys, send);
    }
    // A batch of many rounds (a small plan: rounds of a few hundred keys)
    // cut part-way: the rounds answered keep their answers, the round cut
    // resumes from its stored results, the rest run.
    let small = engine(
        proxy.port,
        &prefix("rounds"),
        &clock,
        vec![Tier::daily(7)],
        10_000,
    );
    let keys: Vec<Vec<u8>> = (0..6000).map(|i| url(85, i)).collect();
    proxy.budget.store(2_500, Ordering::SeqCst);
    small
        .insert_batch(&keys)
        .expect_err("replies lost part-way");
    proxy.budget.store(usize::MAX, Ordering::SeqCst);
    proxy.down.store(false, Ordering::SeqCst);
    check_resumed("rounds", &small, &keys, || small.insert_batch(&keys));

    // A different write between the failure and the resend: the resend
    // starts over (the results it would resume from may be replaced).
    let keys: Vec<Vec<u8>> = (0..500).map(|i| url(84, i)).collect();
    proxy.down.store(true, Ordering::SeqCst);
    e.insert_batch(&keys).expect_err("every reply lost");
    proxy.down.store(false, Ordering::SeqCst);
    assert!(e.insert(b"another key").expect("insert"));
    let answers = e.insert_batch(&keys).expect("the batch again");
    // Resumed, every key would be new; started over, those applied before
    // are present.
    assert!(!answers.iter().all(|&n| n), "resumed across another write");
}

/// A resend that fails too, at a window boundary (in the chains' refresh,
/// before its own write was counted), and then succeeds: the call resumes
/// and reports each key new once. It started over, so the keys Redis took
/// before the first failure were never reported new (found in review).
/// And a batch of no keys between a failure and its resend writes nothing
/// and leaves the failed call resumable (it used to forget it).
#[test]
fn a_resend_that_fails_at_a_boundary_or_waits_behind_an_empty_batch_still_resumes() {
    let Some((_server, proxy, clock, e)) = setup("resume-boundary") else {
        return;
    };
    let count = |v: Vec<bool>| v.iter().filter(|&&p| p).count();
    let keys: Vec<Vec<u8>> = (0..3000).map(|i| url(86, i)).collect();
    proxy.down.store(true, Ordering::SeqCst);
    e.insert_batch(&keys).expect_err("every reply lost");
    clock.advance(Duration::from_secs(86_400));
    e.insert_batch(&keys)
        .expect_err("still down, at a window boundary");
    proxy.down.store(false, Ordering::SeqCst);
    check_resumed("boundary", &e, &keys, || e.insert_batch(&keys));

    let keys: Vec<Vec<u8>> = (0..3000).map(|i| url(87, i)).collect();
    proxy.down.store(true, Ordering::SeqCst);
    e.insert_batch(&keys).expect_err("every reply lost");
    proxy.down.store(false, Ordering::SeqCst);
    let none: Vec<Vec<u8>> = Vec::new();
    assert!(e.insert_batch(&none).expect("an empty batch").is_empty());
    assert_eq!(count(e.insert_batch(&keys).expect("resend")), keys.len());
}

/// A config hash whose shard count is out of range (0, or more than a
/// Cluster has slots: a hand edit, a damaged restore) is refused at open.
/// With 0 the first insert divided by zero (found in review).
#[test]
fn a_stored_shard_count_out_of_range_is_refused() {
    if !require("bad-shards") {
        return;
    }
    let server = Server::start();
    let clock = ManualClock::new(day(0));
    let pre = prefix("bad-shards");
    drop(engine(
        server.port,
        &pre,
        &clock,
        vec![Tier::daily(7)],
        1_000,
    ));
    let key = format!("{pre}:config");
    let json = server.cli(&["HGET", &key, "engine"]);
    for bad in ["0", "16385", "4294967295"] {
        let edited = json
            .trim()
            .replace("\"shards\":16", &format!("\"shards\":{bad}"));
        assert_ne!(edited, json.trim());
        server.cli(&["HSET", &key, "engine", &edited]);
        let opts = RedisOptions::default().clock(clock.clone());
        match RedisEngine::open_with(&server.url(), &pre, opts) {
            Err(err) => assert!(err.to_string().contains("shards"), "{bad}: {err}"),
            Ok(_) => panic!("{bad} shards opened"),
        }
    }
}

#[test]
fn errors_name_the_command_and_the_key() {
    if !require("errors_name_the_command_and_the_key") {
        return;
    }
    let mut server = Server::start();
    let clock = ManualClock::new(day(0));
    let pre = prefix("errors");
    let e = engine(server.port, &pre, &clock, default_tiers(), 100_000);
    // A key of the engine's layout holding another type: Redis refuses.
    let dir = format!("{pre}:{{{pre}:0}}:dir:d");
    server.cli(&["DEL", &dir]);
    server.cli(&["SET", &dir, "not a hash"]);
    let keys: Vec<Vec<u8>> = (0..200).map(|i| url(81, i)).collect();
    let err = e.insert_batch(&keys).expect_err("a WRONGTYPE key");
    let msg = err.to_string();
    assert!(
        matches!(err, RedisError::Redis { .. }) && msg.contains("EVALSHA") && msg.contains(&pre),
        "{msg}"
    );
    // A server that is gone: the error comes after the retries, named.
    server.kill();
    let err = e.contains(b"x").expect_err("no server");
    assert!(msg_has(&err, "EVALSHA check"), "{err}");
    let err = RedisEngine::open(&server.url(), &pre).expect_err("no server");
    assert!(msg_has(&err, "HGETALL") && msg_has(&err, "config"), "{err}");
    // Another configuration under an existing prefix is refused.
    server.restart();
    let _e = engine(server.port, "cfg", &clock, default_tiers(), 100_000);
    let other = Config {
        tiers: vec![Tier::daily(3)],
        ..Config::default()
    };
    let err = RedisEngine::create_or_open(&server.url(), "cfg", other).expect_err("mismatch");
    assert!(matches!(err, RedisError::ConfigMismatch { .. }), "{err}");
    let err = RedisEngine::open(&server.url(), "nothing-here").expect_err("absent");
    assert!(matches!(err, RedisError::NotFound { .. }), "{err}");
}

fn msg_has(e: &RedisError, s: &str) -> bool {
    e.to_string().contains(s)
}

/// On a Cluster, an error names the node that failed (`host:port`) among
/// the nodes the call went to, not only the key: here one of three
/// masters killed under a running engine.
#[test]
fn a_cluster_error_names_the_node() {
    if !require("a_cluster_error_names_the_node") {
        return;
    }
    let mut cluster = Cluster::start();
    let clock = ManualClock::new(day(0));
    let mut o = RedisOptions::default().clock(clock);
    o.backoff = Duration::from_millis(10);
    o.retries = 1;
    o.connect_timeout = Duration::from_millis(500);
    o.io_timeout = Duration::from_millis(500);
    let config = daily(2, 10_000);
    let e = RedisEngine::create_with(&cluster.url(), &prefix("cluster-named"), config, o)
        .expect("create");
    let keys: Vec<Vec<u8>> = (0..200).map(|i| url(88, i)).collect();
    e.insert_batch(&keys).expect("insert");
    let dead = format!("127.0.0.1:{}", cluster.nodes[1].port);
    cluster.nodes[1].kill();
    let err = e.insert_batch(&keys).expect_err("a master is gone");
    assert!(matches!(err, RedisError::Redis { .. }), "{err}");
    assert!(err.to_string().contains(&dead), "{err}");
}

/// `create` whose `HSETNX` of the config hash reached Redis but whose reply
/// was lost: the client reconnects and sends it again, and the second
/// `HSETNX` finds the engine this very call wrote. That is still this
/// call's engine (its hash seed is random): `create` succeeds and makes
/// every shard's directory, rather than failing `AlreadyExists` and
/// leaving an engine whose config hash never gets `dirs`.
#[test]
fn a_create_whose_reply_was_lost_still_creates() {
    if !require("a_create_whose_reply_was_lost_still_creates") {
        return;
    }
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let clock = ManualClock::new(day(0));
    let pre = prefix("create-lost-reply");
    *proxy.cut_on.lock().expect("cut_on") = Some(b"HSETNX".to_vec());
    let mut o = RedisOptions::default().clock(clock.clone());
    o.backoff = Duration::from_millis(10);
    o.retries = 4;
    let url = format!("redis://127.0.0.1:{}", proxy.port);
    let e = RedisEngine::create_with(&url, &pre, daily(7, 100_000), o);
    assert_eq!(proxy.cuts.load(Ordering::SeqCst), 1, "no reply was cut");
    let e = e.expect("create through a lost reply");
    let config_key = format!("{pre}:config");
    assert_eq!(server.cli(&["HGET", &config_key, "dirs"]).trim(), "made");
    assert!(e.insert(b"first").expect("insert"));
}
