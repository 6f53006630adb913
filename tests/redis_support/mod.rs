//! Shared by the Redis tests: `redis-server` processes started on free
//! loopback ports in temporary directories and killed at the end, a
//! three-node Cluster, crawl-like URLs and a clock in the near future.
//!
//! When `redis-server` is missing, [`require`] fails the test in CI (the
//! `CI` environment variable is set) and prints a skip message elsewhere.
#![allow(dead_code)]

#[path = "../common/mod.rs"]
mod common;

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const DAY: Duration = Duration::from_secs(86_400);

/// Whether the Redis binaries are installed; in CI their absence is a
/// failure, elsewhere a printed skip.
pub fn require(test: &str) -> bool {
    let found = ["redis-server", "redis-cli"].iter().all(|b| {
        Command::new(b)
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    });
    if !found {
        if std::env::var_os("CI").is_some() {
            panic!(
                "{test}: redis-server and redis-cli are required in CI but were not found; \
                 install them (.ci/redis.sh, or apt-get install -y redis-server redis-tools)"
            );
        }
        // Written to the real stderr, past the test harness's capture, so
        // the skip shows even for a passing test.
        use std::io::Write;
        let _ = writeln!(
            std::io::stderr(),
            "SKIPPED {test}: redis-server/redis-cli not found \
             (apt-get install -y redis-server redis-tools); in CI this fails"
        );
    }
    found
}

fn free_port() -> u16 {
    // Cluster bus ports are port + 10000: keep both free and below 65536.
    loop {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let port = l.local_addr().expect("local address").port();
        if port < 55_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// One `redis-server` on 127.0.0.1, killed when dropped.
pub struct Server {
    pub port: u16,
    pub dir: PathBuf,
    child: Option<Child>,
    extra: Vec<String>,
    /// Started again on its port (`restart`): the port cannot change.
    restarted: bool,
    _tmp: Option<tempfile::TempDir>,
}

impl Server {
    /// A plain server: no persistence.
    pub fn start() -> Server {
        Server::with_args(&["--save", "", "--appendonly", "no"])
    }

    /// A server with AOF, every write fsynced before its reply.
    pub fn start_aof() -> Server {
        Server::with_args(&[
            "--save",
            "",
            "--appendonly",
            "yes",
            "--appendfsync",
            "always",
        ])
    }

    /// A plain server with an ACL user `user` (password `password`) that
    /// may run every command on the keys matching `keys` (`~` pattern).
    pub fn with_user(user: &str, password: &str, keys: &str) -> Server {
        let (password, keys) = (format!(">{password}"), format!("~{keys}"));
        Server::with_args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--user",
            user,
            "on",
            &password,
            &keys,
            "+@all",
        ])
    }

    /// A server started as a node of a Cluster still to be formed
    /// (cluster mode, no persistence, a node timeout of 5 s).
    pub fn cluster_node() -> Server {
        Server::with_args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--cluster-enabled",
            "yes",
            "--cluster-config-file",
            "nodes.conf",
            "--cluster-node-timeout",
            "5000",
        ])
    }

    pub fn with_args(extra: &[&str]) -> Server {
        let tmp = tempfile::tempdir().expect("temp dir");
        let mut s = Server {
            port: free_port(),
            dir: tmp.path().to_path_buf(),
            child: None,
            extra: extra.iter().map(|s| s.to_string()).collect(),
            restarted: false,
            _tmp: Some(tmp),
        };
        s.spawn();
        s
    }

    /// Starts the server on its port. A port taken between `free_port`
    /// and the server's bind (by another test's server: the tests of a
    /// binary run in parallel) makes this server exit; a first start then
    /// takes another port, a restart (which must keep its port) fails.
    fn spawn(&mut self) {
        let first = !self.restarted;
        for _ in 0..5 {
            let mut child = Command::new("redis-server")
                .arg("--port")
                .arg(self.port.to_string())
                .args(["--bind", "127.0.0.1", "--daemonize", "no"])
                .arg("--dir")
                .arg(&self.dir)
                .args(["--logfile", "redis.log"])
                .args(&self.extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("start redis-server");
            let ready = wait_ready(self.port, &self.dir, &mut child);
            self.child = Some(child);
            if ready || !first {
                assert!(
                    ready,
                    "redis-server could not take port {} again",
                    self.port
                );
                return;
            }
            self.child = None;
            self.port = free_port();
        }
        panic!("redis-server found no free port in 5 tries");
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// SIGKILL, no shutdown save: what a crash does.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts the server again on the same port and directory (AOF reload).
    pub fn restart(&mut self) {
        self.kill();
        self.restarted = true;
        self.spawn();
    }

    /// A replica of this server, returned once its link to it is up.
    pub fn replica(&self) -> Server {
        let port = self.port.to_string();
        let r = Server::with_args(&[
            "--save",
            "",
            "--appendonly",
            "no",
            "--replicaof",
            "127.0.0.1",
            &port,
        ]);
        let t = Instant::now();
        while !r
            .cli(&["INFO", "replication"])
            .contains("master_link_status:up")
        {
            assert!(
                t.elapsed() < Duration::from_secs(20),
                "the replica of port {port} did not attach"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        r
    }

    /// Runs `redis-cli` against this server and returns its output.
    pub fn cli(&self, args: &[&str]) -> String {
        cli(self.port, args)
    }

    /// The keys of this server matching `pattern` (`SCAN`, through
    /// `redis-cli`).
    pub fn keys(&self, pattern: &str) -> Vec<String> {
        self.cli(&["--scan", "--pattern", pattern])
            .lines()
            .map(|l| l.trim().to_string())
            .filter(|l| !l.is_empty())
            .collect()
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn cli(port: u16, args: &[&str]) -> String {
    let out = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p"])
        .arg(port.to_string())
        .args(args)
        .output()
        .expect("run redis-cli");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The port of the master that serves `slot`, as the Cluster node on
/// `port` sees it (the slot ranges of its `CLUSTER NODES`).
pub fn owner_of(port: u16, slot: u16) -> u16 {
    let nodes = cli(port, &["CLUSTER", "NODES"]);
    // `<id> <ip:port@bus> <flags> <master> <ping> <pong> <epoch> <link>
    // <slot or lo-hi>...`
    for line in nodes.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 9 || !f[2].contains("master") {
            continue;
        }
        let serves = f[8..].iter().any(|r| {
            let (lo, hi) = r.split_once('-').unwrap_or((r, r));
            matches!((lo.parse::<u16>(), hi.parse::<u16>()),
                     (Ok(lo), Ok(hi)) if (lo..=hi).contains(&slot))
        });
        if serves {
            let port = f[1].split(['@', ':']).nth(1).expect("a port");
            return port.parse().expect("a port");
        }
    }
    panic!("no master for slot {slot} in CLUSTER NODES:\n{nodes}");
}

/// Waits until `child` answers on `port`: true then, false when it exited
/// (its port was taken). The answer must come from `child` itself (its
/// process id), not from another test's server that took the port.
fn wait_ready(port: u16, dir: &Path, child: &mut Child) -> bool {
    let t = Instant::now();
    let own = format!("process_id:{}", child.id());
    while t.elapsed() < Duration::from_secs(20) {
        if child.try_wait().ok().flatten().is_some() {
            return false;
        }
        if cli(port, &["INFO", "server"])
            .lines()
            .any(|l| l.trim() == own)
        {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let log = std::fs::read_to_string(dir.join("redis.log")).unwrap_or_default();
    panic!("redis-server on port {port} did not answer; its log:\n{log}");
}

/// One Sentinel (`redis-server <conf> --sentinel`) watching a master as
/// `mymaster` with quorum 1, marking it down after one second; killed when
/// dropped.
pub struct Sentinel {
    pub port: u16,
    child: Option<Child>,
    _tmp: tempfile::TempDir,
}

impl Sentinel {
    pub fn start(master_port: u16) -> Sentinel {
        let tmp = tempfile::tempdir().expect("temp dir");
        let port = free_port();
        let conf = tmp.path().join("sentinel.conf");
        std::fs::write(
            &conf,
            format!(
                "port {port}\nbind 127.0.0.1\ndir {}\nlogfile redis.log\n\
                 sentinel monitor mymaster 127.0.0.1 {master_port} 1\n\
                 sentinel down-after-milliseconds mymaster 1000\n\
                 sentinel failover-timeout mymaster 5000\n",
                tmp.path().display()
            ),
        )
        .expect("write sentinel.conf");
        let mut child = Command::new("redis-server")
            .arg(&conf)
            .arg("--sentinel")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start redis-server --sentinel");
        assert!(
            wait_ready(port, tmp.path(), &mut child),
            "the Sentinel could not take port {port}"
        );
        Sentinel {
            port,
            child: Some(child),
            _tmp: tmp,
        }
    }

    /// The port of the master the Sentinel names now.
    pub fn master_port(&self) -> Option<u16> {
        let out = cli(
            self.port,
            &["SENTINEL", "get-master-addr-by-name", "mymaster"],
        );
        out.lines().nth(1)?.trim().parse().ok()
    }
}

impl Drop for Sentinel {
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Three masters on loopback ports joined by `redis-cli --cluster create`,
/// with or without replicas.
pub struct Cluster {
    pub nodes: Vec<Server>,
}

impl Cluster {
    /// Three masters, no replicas.
    pub fn start() -> Cluster {
        Cluster::with_replicas(0)
    }

    /// Three masters with `replicas` replicas each, all on loopback ports,
    /// returned once every node sees the cluster ok, every replica's link
    /// to its master is up and every node knows every other.
    pub fn with_replicas(replicas: usize) -> Cluster {
        let nodes: Vec<Server> = (0..3 * (1 + replicas))
            .map(|_| Server::cluster_node())
            .collect();
        let addrs: Vec<String> = nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let out = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .arg("--cluster-replicas")
            .arg(replicas.to_string())
            .arg("--cluster-yes")
            .output()
            .expect("run redis-cli --cluster create");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = Cluster { nodes };
        cluster.settle();
        cluster
    }

    /// Waits (30 s at most) until every node reports `cluster_state:ok` and
    /// knows every node, every master has its replicas attached and every
    /// replica's link to its master is up.
    pub fn settle(&self) {
        let t = Instant::now();
        let total = self.nodes.len();
        let per_master = total / 3 - 1;
        for n in &self.nodes {
            loop {
                let info = n.cli(&["CLUSTER", "INFO"]);
                let repl = n.cli(&["INFO", "replication"]);
                let field = |text: &str, name: &str| {
                    text.lines()
                        .find_map(|l| l.trim().strip_prefix(name))
                        .map(str::to_string)
                };
                let ok = field(&info, "cluster_state:").as_deref() == Some("ok")
                    && field(&info, "cluster_known_nodes:") == Some(total.to_string())
                    && match field(&repl, "role:").as_deref() {
                        Some("master") => {
                            field(&repl, "connected_slaves:") == Some(per_master.to_string())
                        }
                        Some("slave") => {
                            field(&repl, "master_link_status:").as_deref() == Some("up")
                        }
                        _ => false,
                    };
                if ok {
                    break;
                }
                assert!(
                    t.elapsed() < Duration::from_secs(30),
                    "the cluster did not settle; node {}: {info}{repl}",
                    n.port
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The ports of the nodes that are masters now (`ROLE`), ascending.
    pub fn masters(&self) -> Vec<u16> {
        let mut m: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| n.cli(&["ROLE"]).lines().next() == Some("master"))
            .map(|n| n.port)
            .collect();
        m.sort_unstable();
        m
    }

    /// The port of the master of the replica on `port` (`ROLE`), if it is one.
    pub fn master_of(&self, port: u16) -> Option<u16> {
        let role = cli(port, &["ROLE"]);
        let mut lines = role.lines();
        if lines.next() != Some("slave") {
            return None;
        }
        lines.nth(1)?.trim().parse().ok()
    }

    /// The ports of the replicas of the master on `port`, ascending.
    pub fn replicas_of(&self, port: u16) -> Vec<u16> {
        let mut r: Vec<u16> = self
            .nodes
            .iter()
            .filter(|n| self.master_of(n.port) == Some(port))
            .map(|n| n.port)
            .collect();
        r.sort_unstable();
        r
    }

    /// The port of the master serving `key`'s slot (`CLUSTER KEYSLOT`,
    /// then the slot ranges of `CLUSTER NODES` as the first node sees them).
    pub fn master_for(&self, key: &str) -> u16 {
        let slot: u16 = self.nodes[0]
            .cli(&["CLUSTER", "KEYSLOT", key])
            .trim()
            .parse()
            .expect("a slot");
        owner_of(self.nodes[0].port, slot)
    }

    /// `CLUSTER FAILOVER` on the replica on `replica`: returns once it is a
    /// master, its old master is its replica with the link up, and the
    /// cluster has settled (30 s at most).
    pub fn failover(&self, replica: u16) {
        let old = self.master_of(replica).expect("a replica");
        let out = cli(replica, &["CLUSTER", "FAILOVER"]);
        assert_eq!(out.trim(), "OK", "CLUSTER FAILOVER on {replica}");
        let t = Instant::now();
        while !(self.master_of(replica).is_none()
            && cli(replica, &["ROLE"]).lines().next() == Some("master")
            && self.master_of(old) == Some(replica))
        {
            assert!(
                t.elapsed() < Duration::from_secs(30),
                "the failover to {replica} did not complete"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        self.settle();
    }

    /// The seed URLs, comma-separated (what `RedisEngine` takes for a Cluster).
    pub fn url(&self) -> String {
        self.nodes
            .iter()
            .map(|n| n.url())
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Keys stored on each node.
    pub fn keys_per_node(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .map(|n| n.cli(&["DBSIZE"]).trim().parse().unwrap_or(0))
            .collect()
    }
}

/// A Monday 00:00 UTC two to three weeks after the real time: windows
/// written by the tests expire (`EXPIREAT`, on the server's real clock)
/// well after the tests end, whatever the tests' clock says.
pub fn t0() -> u64 {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs();
    let day = now / 86_400 + 14;
    // 1970-01-01 was a Thursday: day d is a Monday when (d + 3) % 7 == 0.
    let monday = day + (7 - (day + 3) % 7) % 7;
    monday * 86_400
}

pub fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

/// Noon of day `n` after [`t0`].
pub fn day(n: u64) -> SystemTime {
    at(t0() + n * 86_400 + 12 * 3600)
}

/// A unique key prefix per test (tests in one binary share no server, but
/// a prefix per engine keeps them apart anyway).
pub fn prefix(name: &str) -> String {
    format!("tbtest-{name}-{}", std::process::id())
}

/// The crawl-like URLs of the embedded engine's tests.
#[allow(unused_imports)]
pub use common::url;

/// A configuration of one daily tier of `days` windows, `per_day` keys
/// planned a day, the default rate.
pub fn daily(days: u32, per_day: u64) -> timebloom::Config {
    timebloom::Config {
        tiers: vec![timebloom::Tier::daily(days)],
        expected_items_per_day: per_day,
        ..timebloom::Config::default()
    }
}

/// The midnight between days 1 and 2 ([`day`] is noon).
pub fn midnight() -> SystemTime {
    day(2) - Duration::from_secs(12 * 3600)
}

/// Two clients of one engine (`daily(7, 10_000)`, prefix `pre`) on
/// `server` whose clocks straddle [`midnight`]: the first (which creates
/// the engine) 5 s past it, the second 5 s before it.
pub fn straddling_midnight(
    server: &Server,
    pre: &str,
) -> (timebloom::redis::RedisEngine, timebloom::redis::RedisEngine) {
    use timebloom::redis::{RedisEngine, RedisOptions};
    let ahead = timebloom::ManualClock::new(midnight() + Duration::from_secs(5));
    let behind = timebloom::ManualClock::new(midnight() - Duration::from_secs(5));
    let a = RedisEngine::create_with(
        &server.url(),
        pre,
        daily(7, 10_000),
        RedisOptions::default().clock(ahead),
    )
    .expect("create");
    let b = RedisEngine::open_with(&server.url(), pre, RedisOptions::default().clock(behind))
        .expect("open");
    (a, b)
}

/// Options on `clock` that wait (`WAIT`) for `replicas` replicas up to
/// `timeout` after each batch and the create.
pub fn waiting(
    clock: &timebloom::ManualClock,
    replicas: u32,
    timeout: Duration,
) -> timebloom::redis::RedisOptions {
    let mut opts = timebloom::redis::RedisOptions::default().clock(clock.clone());
    opts.wait_replicas = replicas;
    opts.wait_timeout = timeout;
    opts
}

/// What a `NotReplicated` holds: the masters it names, the confirmations
/// (fewest, asked for) and the answers.
pub struct NotReplicated {
    pub server: String,
    pub acked: (u32, u32),
    pub answers: Vec<bool>,
}

/// The `NotReplicated` that `r` must be (any other result fails the test).
pub fn not_replicated<T>(r: Result<T, timebloom::redis::RedisError>) -> NotReplicated {
    match r {
        Err(timebloom::redis::RedisError::NotReplicated {
            server,
            acked,
            wanted,
            answers,
        }) => NotReplicated {
            server,
            acked: (acked, wanted),
            answers,
        },
        Err(other) => panic!("expected NotReplicated, got {other:?}"),
        Ok(_) => panic!("expected NotReplicated, got Ok"),
    }
}
