//! The connection to Redis: standalone or Cluster, timeouts, and retries
//! with backoff on connection loss.

use std::time::Duration;

use base64::Engine as _;

use redis::cluster::{ClusterClient, ClusterClientBuilder, ClusterConnection};
use redis::{
    Client, Cmd, Connection, ConnectionAddr, ConnectionInfo, ErrorKind, IntoConnectionInfo,
    RedisConnectionInfo, RedisResult, ServerErrorKind, Value,
};

use super::error::{RedisError, Result};
use super::RedisOptions;

enum Target {
    Single(Client),
    Cluster(ClusterClient),
    /// Asks the Sentinels for the master at every (re)connection.
    Sentinel(Box<Sentinels>),
}

/// The Sentinels of a `redis+sentinel://` URL, the master's name, and the
/// user and password of the data nodes.
struct Sentinels {
    nodes: Vec<ConnectionInfo>,
    master: String,
    auth: RedisConnectionInfo,
}

impl Sentinels {
    /// A connection to the master the Sentinels name (asked in turn), once
    /// it confirms with `ROLE` that it is one. Every connection and every
    /// reply, to a Sentinel and to the master, is bounded by the timeouts:
    /// a Sentinel or a master that accepts a connection and never answers
    /// is an error, not a wait without end.
    ///
    /// `at` is set to the server each step talks to (`host:port` of the
    /// Sentinel, then of the master), so that after an error it names the
    /// one that failed, and after success the master.
    fn connect(&self, connect: Duration, io: Duration, at: &mut String) -> RedisResult<Connection> {
        let open = |info: ConnectionInfo| -> RedisResult<Connection> {
            let con = Client::open(info)?.get_connection_with_timeout(connect)?;
            con.set_read_timeout(Some(io))?;
            con.set_write_timeout(Some(io))?;
            Ok(con)
        };
        let mut last = redis::RedisError::from((
            ErrorKind::MasterNameNotFoundBySentinel,
            "no Sentinel names the master",
        ));
        for node in &self.nodes {
            let tried = (|| {
                *at = format!("Sentinel {}", node.addr());
                let mut s = open(node.clone())?;
                let addr: Option<(String, u16)> = redis::cmd("SENTINEL")
                    .arg("get-master-addr-by-name")
                    .arg(&self.master)
                    .query(&mut s)?;
                let Some((host, port)) = addr else {
                    return Err(redis::RedisError::from((
                        ErrorKind::MasterNameNotFoundBySentinel,
                        "the Sentinel does not know the master name",
                    )));
                };
                let info = ConnectionAddr::Tcp(host, port)
                    .into_connection_info()?
                    .set_redis_settings(self.auth.clone());
                *at = info.addr().to_string();
                let mut m = open(info)?;
                let role: Value = redis::cmd("ROLE").query(&mut m)?;
                let master = matches!(&role, Value::Array(items)
                    if items.first().and_then(bulk_str) == Some(&b"master"[..]));
                if master {
                    Ok(m)
                } else {
                    // A failover in progress: retried after a backoff.
                    Err(redis::RedisError::from((
                        ErrorKind::Io,
                        "the node the Sentinel names is not a master (yet)",
                    )))
                }
            })();
            match tried {
                Ok(m) => return Ok(m),
                Err(e) => last = e,
            }
        }
        Err(last)
    }
}

fn bulk_str(v: &Value) -> Option<&[u8]> {
    match v {
        Value::BulkString(b) => Some(b),
        Value::SimpleString(s) => Some(s.as_bytes()),
        _ => None,
    }
}

enum Conn {
    Single(Connection),
    Cluster(Box<ClusterConnection>),
}

/// One connection, made lazily and remade after a loss.
pub(crate) struct Link {
    target: Target,
    conn: Option<Conn>,
    /// The server errors name (`host:port`, never a password): a
    /// standalone server, the master a Sentinel named (or the Sentinel
    /// that failed), a Cluster's seed nodes.
    at: String,
    /// A Cluster's slot ranges and the master of each (`CLUSTER SLOTS`),
    /// as last seen: errors name the node of their key.
    slots: Vec<(u16, u16, String)>,
    retries: u32,
    backoff: Duration,
    max_backoff: Duration,
    connect_timeout: Duration,
    io_timeout: Duration,
}

/// Whether an error may go away by reconnecting and sending again: the
/// connection dropped or timed out, the server is loading its data after
/// a restart, a Cluster is moving slots or failing over.
pub(crate) fn retryable(e: &redis::RedisError) -> bool {
    e.is_io_error()
        || e.is_connection_dropped()
        || e.is_timeout()
        || e.is_connection_refusal()
        || e.is_cluster_error()
        || matches!(
            e.kind(),
            ErrorKind::Server(
                ServerErrorKind::BusyLoading
                    | ServerErrorKind::MasterDown
                    | ServerErrorKind::ReadOnly
                    | ServerErrorKind::TryAgain
                    | ServerErrorKind::ClusterDown
            )
        )
}

/// The name of `cmd` (its first argument), upper-cased.
fn name_of(cmd: &Cmd) -> Option<String> {
    match cmd.args_iter().next()? {
        redis::Arg::Simple(name) => Some(String::from_utf8_lossy(name).to_ascii_uppercase()),
        _ => None,
    }
}

/// Whether a Cluster node answered `ASK` to a command (of a pipeline).
fn asked(e: &redis::RedisError) -> bool {
    e.clone().into_server_errors().is_some_and(|errs| {
        errs.iter()
            .any(|(_, s)| s.kind() == Some(ServerErrorKind::Ask))
    })
}

/// Whether a `WAIT` was refused because the node is a replica ("WAIT
/// cannot be used with replica instances", Redis 6 to 7.2).
fn now_a_replica(e: &redis::RedisError) -> bool {
    e.to_string().contains("cannot be used with replica")
}

/// Whether the server lacks a script (restarted, failed over, flushed).
pub(crate) fn no_script(e: &redis::RedisError) -> bool {
    e.kind() == ErrorKind::Server(ServerErrorKind::NoScript) || e.to_string().contains("NOSCRIPT")
}

/// A Sentinel client from `[user:password@]host:port[,host:port...]/<master>`.
fn sentinel(rest: &str) -> RedisResult<Target> {
    let bad = |why: &'static str| redis::RedisError::from((ErrorKind::InvalidClientConfig, why));
    let (hosts, master) = rest
        .rsplit_once('/')
        .filter(|(_, m)| !m.is_empty())
        .ok_or_else(|| bad("a Sentinel URL ends with /<master name>"))?;
    let (auth, hosts) = match hosts.rsplit_once('@') {
        Some((auth, hosts)) => (Some(auth), hosts),
        None => (None, hosts),
    };
    let nodes = hosts
        .split(',')
        .filter(|h| !h.is_empty())
        .map(|h| format!("redis://{h}").into_connection_info())
        .collect::<RedisResult<Vec<_>>>()?;
    if nodes.is_empty() {
        return Err(bad("a Sentinel URL names at least one Sentinel"));
    }
    let mut info = RedisConnectionInfo::default();
    if let Some(auth) = auth {
        let (user, password) = auth.split_once(':').unwrap_or(("", auth));
        // Percent-decoded, as the redis crate decodes a redis:// URL's.
        let decoded = |s: &str, what: &'static str| percent_decode(s).ok_or_else(|| bad(what));
        if !user.is_empty() {
            info = info.set_username(decoded(user, "the user name is not valid UTF-8")?);
        }
        if !password.is_empty() {
            info = info.set_password(decoded(password, "the password is not valid UTF-8")?);
        }
    }
    Ok(Target::Sentinel(Box::new(Sentinels {
        nodes,
        master: master.to_string(),
        auth: info,
    })))
}

/// `s` with every `%XX` (two hex digits) replaced by that byte; `None`
/// when the result is not UTF-8.
fn percent_decode(s: &str) -> Option<String> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .ok()
        .map(|s| s.into_owned())
}

/// The roots a `rediss://` connection trusts: the system's (the
/// distribution's bundle, or `SSL_CERT_FILE` / `SSL_CERT_DIR`), those
/// rustls accepts, as PEM. `None` when the system has none: the redis
/// crate then uses the webpki roots it was built with (which it uses
/// instead of the system's when given no roots).
fn system_roots() -> Option<redis::TlsCertificates> {
    let mut pem = Vec::new();
    for cert in rustls_native_certs::load_native_certs().certs {
        if rustls::RootCertStore::empty().add(cert.clone()).is_ok() {
            pem.extend_from_slice(b"-----BEGIN CERTIFICATE-----\n");
            let text = base64::engine::general_purpose::STANDARD.encode(&cert);
            for line in text.as_bytes().chunks(64) {
                pem.extend_from_slice(line);
                pem.push(b'\n');
            }
            pem.extend_from_slice(b"-----END CERTIFICATE-----\n");
        }
    }
    (!pem.is_empty()).then_some(redis::TlsCertificates {
        client_tls: None,
        root_cert: Some(pem),
    })
}

/// The URL(s) with every password replaced by `***`, for error messages.
pub(crate) fn redact(url: &str) -> String {
    crate::redact_url(url)
}

/// The URLs of a comma-separated list, split only at the commas that
/// begin another `scheme://`: a `,` in a password stays in it.
fn split_urls(url: &str) -> Vec<&str> {
    let begins_url = |s: &str| {
        let s = s.trim_start();
        s.find("://").is_some_and(|i| {
            s[..i].starts_with(|c: char| c.is_ascii_alphabetic())
                && s[..i]
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        })
    };
    let mut urls = Vec::new();
    let mut start = 0;
    for (i, _) in url.match_indices(',') {
        if begins_url(&url[i + 1..]) {
            urls.push(&url[start..i]);
            start = i + 1;
        }
    }
    urls.push(&url[start..]);
    // (A trailing comma ends the list, as before.)
    urls.into_iter()
        .map(|s| s.trim().trim_end_matches(',').trim_end())
        .filter(|s| !s.is_empty())
        .collect()
}

impl Link {
    /// `url` is one `redis://` or `rediss://` URL (user and password in it
    /// for ACLs), or several separated by commas: the seed nodes of a
    /// Cluster (`options.cluster` forces Cluster mode with one seed), or
    /// `redis+sentinel://[user:password@]host:port[,host:port...]/<master>`:
    /// the Sentinels that know the master (the user and password are the
    /// data nodes').
    pub(crate) fn new(url: &str, options: &RedisOptions) -> Result<Link> {
        if let Some(rest) = url.strip_prefix("redis+sentinel://") {
            let shown = redact(url);
            let target =
                sentinel(rest).map_err(|e| RedisError::redis("connect", &shown, &shown, e))?;
            let at = match &target {
                Target::Sentinel(s) => format!(
                    "Sentinel {} (master {})",
                    s.nodes
                        .iter()
                        .map(|n| n.addr().to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    s.master
                ),
                _ => shown,
            };
            return Ok(Link::with(target, at, options));
        }
        let urls = split_urls(url);
        let shown = redact(url);
        let bad = |e| RedisError::redis("connect", &shown, &shown, e);
        // The nodes' addresses (`host:port`: no user, no password).
        let at = urls
            .iter()
            .map(|u| match u.into_connection_info() {
                Ok(info) => info.addr().to_string(),
                Err(_) => redact(u),
            })
            .collect::<Vec<_>>()
            .join(", ");
        let tls = urls.iter().any(|u| u.starts_with("rediss://"));
        let roots = if tls { system_roots() } else { None };
        let target = if urls.len() > 1 || options.cluster {
            // A `WAIT` waits up to `wait_timeout` before it replies.
            let waits = if options.wait_replicas > 0 {
                options.wait_timeout
            } else {
                Duration::ZERO
            };
            // The Cluster client retries a command sent alone once: enough
            // to follow one `ASK` or `MOVED` (see `Link::send`), after a
            // `TRYAGAIN` waiting `backoff` (its own default is 1.28 s or
            // more). Everything else is retried by `Link::run`, with the
            // documented backoff.
            let backoff = u64::try_from(options.backoff.as_millis()).unwrap_or(u64::MAX);
            let mut builder = ClusterClientBuilder::new(urls)
                .connection_timeout(options.connect_timeout)
                .response_timeout(options.io_timeout.saturating_add(waits))
                .retries(1)
                .min_retry_wait(backoff)
                .max_retry_wait(backoff.saturating_add(1));
            if let Some(roots) = roots {
                builder = builder.certs(roots);
            }
            Target::Cluster(builder.build().map_err(bad)?)
        } else {
            // The URL as the list has it: without surrounding spaces or a
            // trailing comma.
            let one = urls.first().copied().unwrap_or(url);
            match roots {
                Some(roots) => Target::Single(Client::build_with_tls(one, roots).map_err(bad)?),
                None => Target::Single(Client::open(one).map_err(bad)?),
            }
        };
        let at = match &target {
            Target::Single(c) => c.get_connection_info().addr().to_string(),
            _ => at,
        };
        Ok(Link::with(target, at, options))
    }

    fn with(target: Target, at: String, options: &RedisOptions) -> Link {
        Link {
            target,
            conn: None,
            at,
            slots: Vec::new(),
            retries: options.retries,
            backoff: options.backoff,
            max_backoff: options.max_backoff,
            connect_timeout: options.connect_timeout,
            io_timeout: options.io_timeout,
        }
    }

    /// Whether this link talks to a Cluster.
    pub(crate) fn is_cluster(&self) -> bool {
        matches!(self.target, Target::Cluster(_))
    }

    fn conn(&mut self) -> RedisResult<&mut Conn> {
        if self.conn.is_none() {
            let (connect, io) = (self.connect_timeout, self.io_timeout);
            let conn = match &mut self.target {
                Target::Single(c) => {
                    let con = c.get_connection_with_timeout(connect)?;
                    con.set_read_timeout(Some(io))?;
                    con.set_write_timeout(Some(io))?;
                    Conn::Single(con)
                }
                Target::Cluster(c) => {
                    let mut con = c.get_connection()?;
                    // Only for naming nodes in errors: a failure here
                    // keeps the slots seen before.
                    if let Ok(v) = redis::cmd("CLUSTER").arg("SLOTS").query::<Value>(&mut con) {
                        self.slots = slot_owners(&v);
                    }
                    Conn::Cluster(Box::new(con))
                }
                Target::Sentinel(s) => Conn::Single(s.connect(connect, io, &mut self.at)?),
            };
            self.conn = Some(conn);
        }
        match self.conn.as_mut() {
            Some(c) => Ok(c),
            None => Err(redis::RedisError::from((ErrorKind::Io, "not connected"))),
        }
    }

    fn send(&mut self, cmds: &[Cmd]) -> RedisResult<Vec<Value>> {
        match self.conn()? {
            Conn::Single(con) => {
                let mut p = redis::pipe();
                for c in cmds {
                    p.add_command(c.clone());
                }
                p.query(con)
            }
            Conn::Cluster(con) => {
                let mut p = redis::cluster::cluster_pipe();
                for c in cmds {
                    p.add_command(c.clone());
                }
                match p.query(con.as_mut()) {
                    // A key moved ahead of the rest of its slot, which is
                    // migrating: its node answers `ASK`. The Cluster
                    // client follows no redirection inside a pipeline, and
                    // the pipeline sent again would meet the same `ASK`
                    // until the whole slot has moved, so each command goes
                    // alone, which the client redirects (`ASKING` to the
                    // node the key is on). `run`'s commands may be sent
                    // twice.
                    Err(e) if asked(&e) => cmds.iter().map(|c| c.query(con.as_mut())).collect(),
                    r => r,
                }
            }
        }
    }

    /// Sends `cmds` as one pipeline and returns one reply per command,
    /// reconnecting and sending again, with exponential backoff, while the
    /// error is [`retryable`]. The commands must be safe to send twice
    /// (reads, idempotent writes, or scripts with a request id).
    ///
    /// `build(eval)` makes the commands; with `eval` true, scripts go as
    /// `EVAL` with their source (after a `NOSCRIPT`).
    pub(crate) fn run(
        &mut self,
        what: &str,
        key_of: impl Fn(usize) -> String,
        build: impl Fn(bool) -> Vec<Cmd>,
    ) -> Result<Vec<Value>> {
        let mut eval = false;
        let mut attempt = 0u32;
        let mut wait = self.backoff.min(self.max_backoff);
        loop {
            let cmds = build(eval);
            match self.send(&cmds) {
                Ok(v) => return Ok(v),
                Err(e) if no_script(&e) && !eval => eval = true,
                Err(e) if retryable(&e) && attempt < self.retries => {
                    attempt += 1;
                    self.conn = None;
                    std::thread::sleep(wait);
                    wait = wait.saturating_mul(2).min(self.max_backoff);
                }
                Err(e) => {
                    if retryable(&e) {
                        self.conn = None;
                    }
                    let failed = e
                        .clone()
                        .into_server_errors()
                        .and_then(|errs| errs.first().map(|x| x.0));
                    let idx = failed.unwrap_or(0);
                    // A Cluster pipeline's connection error does not say
                    // which node failed: name every node it went to.
                    let server = match failed {
                        None if self.is_cluster() => {
                            let mut nodes: Vec<String> =
                                (0..cmds.len()).map(|i| self.server(&key_of(i))).collect();
                            nodes.sort();
                            nodes.dedup();
                            nodes.join(" or ")
                        }
                        _ => self.server(&key_of(idx)),
                    };
                    // A script call is named by `what` (which says which
                    // script); any other command (the config read that
                    // ends a batch) by its own name.
                    let command = match cmds.get(idx).and_then(name_of) {
                        Some(n) if !n.starts_with("EVAL") => n,
                        _ => what.to_string(),
                    };
                    return Err(RedisError::redis(&command, &key_of(idx), &server, e));
                }
            }
        }
    }

    /// `WAIT replicas ms` once, without retries: a reconnected client's
    /// `WAIT` would cover none of the writes it is meant to. `ms` is at
    /// least 1 (`WAIT n 0` blocks until the replicas confirm, however
    /// long), and the reply is awaited `ms` longer than any other.
    ///
    /// A node the client still takes for a master that has become a
    /// replica (a Cluster failover that no command of the batch met as a
    /// `MOVED`: the Cluster client sends `WAIT` to the masters it last
    /// read) refuses `WAIT`. Its writes cannot be confirmed any more, so
    /// the reply is 0 confirmations; the client connects again, reading the
    /// masters of now (named in the error), and its next batch goes to
    /// them. Without this, every later batch's `WAIT` went to the same
    /// replica and failed, without the batch's answers.
    pub(crate) fn once(&mut self, name: &str, key: &str, replicas: u32, ms: u64) -> Result<Value> {
        let ms = ms.max(1);
        let mut c = redis::cmd(name);
        c.arg(replicas).arg(ms);
        let io = self.io_timeout;
        let r = match self.conn() {
            Ok(Conn::Single(con)) => {
                let longer = io.saturating_add(Duration::from_millis(ms));
                con.set_read_timeout(Some(longer))
                    .and_then(|()| c.query::<Value>(con))
                    .and_then(|v| con.set_read_timeout(Some(io)).map(|()| v))
            }
            Ok(Conn::Cluster(con)) => c.query::<Value>(con.as_mut()),
            Err(e) => Err(e),
        };
        match r {
            Err(e) if now_a_replica(&e) => {
                self.conn = None;
                // The masters of now, for the error; when this fails, the
                // next command connects again.
                if self.conn().is_err() {
                    self.conn = None;
                }
                Ok(Value::Int(0))
            }
            r => r.map_err(|e| {
                if retryable(&e) {
                    self.conn = None;
                }
                RedisError::redis(name, key, &self.masters(), e)
            }),
        }
    }

    /// The server a command about `key` goes to, for errors: the node that
    /// serves its slot as last seen on a Cluster, else the server (or the
    /// master, or the Sentinel) of the connection.
    pub(crate) fn server(&self, key: &str) -> String {
        let slot = key_slot(key.as_bytes());
        self.slots
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
            .map_or_else(|| self.at.clone(), |(_, _, node)| node.clone())
    }

    /// The masters a `WAIT` goes to, for errors: every master of a
    /// Cluster as last seen, else the server of the connection.
    pub(crate) fn masters(&self) -> String {
        let mut nodes: Vec<&str> = self.slots.iter().map(|(_, _, n)| n.as_str()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        if nodes.is_empty() {
            self.at.clone()
        } else {
            nodes.join(", ")
        }
    }

    /// [`Link::run`] for one command without a script: `name key args...`.
    pub(crate) fn one(&mut self, name: &str, key: &str, args: &[&[u8]]) -> Result<Value> {
        let r = self.run(
            name,
            |_| key.to_string(),
            |_| {
                let mut c = redis::cmd(name);
                c.arg(key);
                for a in args {
                    c.arg(*a);
                }
                vec![c]
            },
        )?;
        r.into_iter()
            .next()
            .ok_or_else(|| RedisError::bad_reply(name, key, "no reply"))
    }
}

/// The slot ranges and their masters (`host:port`) of a `CLUSTER SLOTS`
/// reply; what does not parse is left out.
fn slot_owners(v: &Value) -> Vec<(u16, u16, String)> {
    let Value::Array(ranges) = v else {
        return Vec::new();
    };
    ranges
        .iter()
        .filter_map(|r| {
            let Value::Array(r) = r else { return None };
            let int = |v: Option<&Value>| match v {
                Some(Value::Int(n)) => u16::try_from(*n).ok(),
                _ => None,
            };
            let (lo, hi) = (int(r.first())?, int(r.get(1))?);
            let Some(Value::Array(master)) = r.get(2) else {
                return None;
            };
            let host = String::from_utf8_lossy(master.first().and_then(bulk_str)?).into_owned();
            let port = int(master.get(1))?;
            Some((lo, hi, format!("{host}:{port}")))
        })
        .collect()
}

/// The Cluster slot of a key: CRC16 (XMODEM) of its hash tag (the part
/// between the first `{` and the next `}`, when not empty) or of the whole
/// key, modulo 16384.
fn key_slot(key: &[u8]) -> u16 {
    let tagged = key.iter().position(|&b| b == b'{').and_then(|open| {
        let rest = &key[open + 1..];
        let close = rest.iter().position(|&b| b == b'}')?;
        (close > 0).then_some(&rest[..close])
    });
    crc16::State::<crc16::XMODEM>::calculate(tagged.unwrap_or(key)) % 16_384
}

#[cfg(test)]
mod tests {
    use super::split_urls;

    #[test]
    fn key_slots_are_the_cluster_s() {
        use super::key_slot;
        // Values from the Cluster specification and `CLUSTER KEYSLOT`.
        assert_eq!(key_slot(b"123456789"), 0x31c3);
        assert_eq!(key_slot(b"foo"), 12_182);
        assert_eq!(key_slot(b"{user1000}.following"), key_slot(b"user1000"));
        assert_ne!(key_slot(b"foo{}{bar}"), key_slot(b"bar"));
    }

    #[test]
    fn percent_decoding() {
        use super::percent_decode;
        assert_eq!(
            percent_decode("s3cr%40t%2Fx%25").as_deref(),
            Some("s3cr@t/x%")
        );
        assert_eq!(percent_decode("a%zz%4").as_deref(), Some("a%zz%4"));
        assert_eq!(percent_decode("%C3%A9").as_deref(), Some("\u{e9}"));
        assert_eq!(percent_decode("%ff"), None);
    }

    #[test]
    fn lists_split_only_where_another_url_begins() {
        assert_eq!(
            split_urls("redis://u:s3cr,etpw@h:1"),
            ["redis://u:s3cr,etpw@h:1"]
        );
        assert_eq!(
            split_urls("redis://h1:1, rediss://u:p,w@h2:2,"),
            ["redis://h1:1", "rediss://u:p,w@h2:2"]
        );
        assert_eq!(split_urls("redis://h:1"), ["redis://h:1"]);
    }
}
