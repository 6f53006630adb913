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
use std::sync::Arc;
use std::time::Duration;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError, RedisOptions};
use timebloom::{Config, ManualClock, Tier};

/// Forwards loopback connections to `target`; when `cut` is set, the next
/// reply is swallowed and both connections are closed.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    cuts: Arc<AtomicUsize>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let cut = Arc::new(AtomicBool::new(false));
        let cuts = Arc::new(AtomicUsize::new(0));
        let (c, n) = (Arc::clone(&cut), Arc::clone(&cuts));
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { break };
                let Ok(server) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                let (c, n) = (Arc::clone(&c), Arc::clone(&n));
                let (mut c_in, mut s_out) = (
                    client.try_clone().expect("clone"),
                    server.try_clone().expect("clone"),
                );
                std::thread::spawn(move || {
                    let mut buf = [0u8; 65536];
                    while let Ok(k) = c_in.read(&mut buf) {
                        if k == 0 || s_out.write_all(&buf[..k]).is_err() {
                            break;
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
                        if c.swap(false, Ordering::SeqCst) {
                            n.fetch_add(1, Ordering::SeqCst);
                            break; // the reply is lost
                        }
                        if c_out.write_all(&buf[..k]).is_err() {
                            break;
                        }
                    }
                    let _ = c_out.shutdown(Shutdown::Both);
                    let _ = s_in.shutdown(Shutdown::Both);
                });
            }
        });
        Proxy { port, cut, cuts }
    }
}

fn engine(port: u16, prefix: &str, clock: &ManualClock, create: bool) -> RedisEngine {
    let mut o = RedisOptions::default().clock(clock.clone());
    o.backoff = Duration::from_millis(10);
    o.retries = 4;
    let url = format!("redis://127.0.0.1:{port}");
    if create {
        let config = Config {
            tiers: vec![Tier::daily(7), Tier::monthly(12)],
            expected_items_per_day: 100_000,
            fpr: 1e-6,
            ..Config::default()
        };
        RedisEngine::create_with(&url, prefix, config, o).expect("create")
    } else {
        RedisEngine::open_with(&url, prefix, o).expect("open")
    }
}

#[test]
fn a_lost_reply_is_retried_and_reports_each_key_new_once() {
    if !require("a_lost_reply_is_retried_and_reports_each_key_new_once") {
        return;
    }
    let server = Server::start();
    let proxy = Proxy::start(server.port);
    let clock = ManualClock::new(day(0));
    let e = engine(proxy.port, &prefix("retry"), &clock, true);
    assert!(e.insert(b"warm-up").expect("insert"));
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

#[test]
fn errors_name_the_command_and_the_key() {
    if !require("errors_name_the_command_and_the_key") {
        return;
    }
    let mut server = Server::start();
    let clock = ManualClock::new(day(0));
    let pre = prefix("errors");
    let e = engine(server.port, &pre, &clock, true);
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
    let _e = engine(server.port, "cfg", &clock, true);
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
