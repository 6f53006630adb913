//! Connecting: an ACL user with a password in the URL works; a wrong
//! password is an error naming the command and the key, and no error shows
//! the password.
//!
//! Run: `cargo test --features redis --release --test redis_connect`.
#![cfg(feature = "redis")]

mod redis_support;

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisError};

#[test]
fn acl_user_and_password_in_the_url() {
    if !require("acl_user_and_password_in_the_url") {
        return;
    }
    let server = Server::with_user("crawler", "s3cret", "tbtest*");
    let good = format!("redis://crawler:s3cret@127.0.0.1:{}", server.port);
    let config = daily(2, 1000);
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

/// `rediss://` trusts the system's roots: a server whose certificate comes
/// from a CA the system trusts (here through `SSL_CERT_FILE`, which the
/// system store honours) is reached.
#[test]
fn tls_trusts_the_system_roots() {
    if !require("tls_trusts_the_system_roots") {
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let d = dir.path();
    let openssl = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .current_dir(d)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    std::fs::write(
        d.join("ext.cnf"),
        "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .expect("write ext.cnf");
    let made = openssl(&[
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "2",
        "-subj",
        "/CN=timebloom test CA",
    ]) && openssl(&[
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "srv.key",
        "-out",
        "srv.csr",
        "-subj",
        "/CN=127.0.0.1",
    ]) && openssl(&[
        "x509",
        "-req",
        "-in",
        "srv.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "srv.pem",
        "-days",
        "2",
        "-extfile",
        "ext.cnf",
    ]);
    if !made {
        eprintln!("SKIPPED tls_trusts_the_system_roots: openssl could not make certificates");
        return;
    }
    let tls_port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
        .to_string();
    let file = |f: &str| d.join(f).display().to_string();
    let (cert, key) = (file("srv.pem"), file("srv.key"));
    let server = Server::with_args(&[
        "--save",
        "",
        "--appendonly",
        "no",
        "--tls-port",
        &tls_port,
        "--tls-cert-file",
        &cert,
        "--tls-key-file",
        &key,
        "--tls-auth-clients",
        "no",
    ]);
    assert!(server.cli(&["PING"]).contains("PONG"));
    // The client runs in a process of its own with SSL_CERT_FILE set (an
    // environment changed here would race the other tests' threads).
    let pre = prefix("tls");
    let out = std::process::Command::new(std::env::current_exe().expect("test binary"))
        .args([
            "--exact",
            "tls_client_of_the_system_roots",
            "--include-ignored",
        ])
        .env("SSL_CERT_FILE", file("ca.pem"))
        .env(
            "TIMEBLOOM_TLS_URL",
            format!("rediss://127.0.0.1:{tls_port}"),
        )
        .env("TIMEBLOOM_TLS_PREFIX", &pre)
        .output()
        .expect("run the TLS client");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the TLS client failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let plain = RedisEngine::open(&server.url(), &pre).expect("open without TLS");
    assert_eq!(
        plain.contains_batch(&[b"a", b"c"]).expect("contains"),
        [true, false]
    );
}

/// The client side of [`tls_trusts_the_system_roots`], which runs it in a
/// process of its own with `SSL_CERT_FILE` naming the test CA.
#[test]
#[ignore = "run by tls_trusts_the_system_roots, in a child process"]
fn tls_client_of_the_system_roots() {
    let var = |name: &str| std::env::var(name).expect("set by tls_trusts_the_system_roots");
    let (url, pre) = (var("TIMEBLOOM_TLS_URL"), var("TIMEBLOOM_TLS_PREFIX"));
    let config = daily(2, 1000);
    let e = RedisEngine::create(&url, &pre, config).expect("create over TLS");
    assert_eq!(e.insert_batch(&[b"a", b"b"]).expect("insert"), [true, true]);
}

/// Options that give up fast: one retry, short backoff and timeouts.
fn quick() -> timebloom::redis::RedisOptions {
    let mut o = timebloom::redis::RedisOptions::default();
    o.retries = 1;
    o.backoff = std::time::Duration::from_millis(10);
    o.connect_timeout = std::time::Duration::from_millis(500);
    o.io_timeout = std::time::Duration::from_millis(500);
    o
}

/// An error that comes from a server names it (`host:port`), so an
/// operator of a fleet that talks to several servers knows which one
/// failed; never the password of the URL. Here a port where nothing
/// listens, and a server stopped while an engine runs on it.
#[test]
fn errors_from_a_server_name_its_address_not_its_password() {
    if !require("errors_from_a_server_name_its_address_not_its_password") {
        return;
    }
    let mut server = Server::with_user("crawler", "pa55-w0rd-z7", "*");
    let at = format!("127.0.0.1:{}", server.port);
    let url = format!("redis://crawler:pa55-w0rd-z7@{at}");
    let pre = prefix("named");
    let config = daily(2, 1000);
    let e = RedisEngine::create_with(&url, &pre, config, quick()).expect("create");
    assert!(e.insert(b"k").expect("insert"));
    server.kill();
    for err in [
        e.insert(b"k2").expect_err("the server is gone"),
        e.contains(b"k").expect_err("the server is gone"),
        RedisEngine::open_with(&url, &pre, quick()).expect_err("nothing listens"),
    ] {
        let shown = format!("{err} {err:?}");
        assert!(matches!(err, RedisError::Redis { .. }), "{shown}");
        assert!(err.to_string().contains(&at), "{err}");
        assert!(!shown.contains("pa55-w0rd-z7"), "{shown}");
    }
}

/// One URL with a trailing comma or surrounding spaces (as a list of seed
/// URLs takes them) reaches its server like the bare URL.
#[test]
fn one_url_with_a_trailing_comma_or_spaces_is_the_url() {
    if !require("one_url_with_a_trailing_comma_or_spaces_is_the_url") {
        return;
    }
    let server = Server::start();
    let pre = prefix("comma");
    let config = daily(2, 1000);
    drop(RedisEngine::create(&server.url(), &pre, config).expect("create"));
    for url in [format!("{},", server.url()), format!(" {} ", server.url())] {
        let e = RedisEngine::open_with(&url, &pre, quick())
            .unwrap_or_else(|err| panic!("{url:?}: {err}"));
        assert!(e.insert(b"k").is_ok(), "{url:?}");
    }
}
