//! One suite, two engines: the embedded [`Engine`] and [`RedisEngine`]
//! must give the same answers on insert, contains, horizons, expiry with a
//! moved clock, backfill, growth, the false-positive rate and concurrent
//! check-and-insert. The Redis runs start their own `redis-server` on a free
//! loopback port (a three-node Cluster for `cluster_passes_the_suite`).
//!
//! Run: `cargo test --features redis --release --test conformance`.
//! Without `redis-server` the Redis cases fail when `CI` is set and print
//! a skip message otherwise.
#![cfg(feature = "redis")]

mod redis_support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use redis_support::*;
use timebloom::redis::{RedisEngine, RedisOptions};
use timebloom::{Config, Engine, ManualClock, Options, Stats, Tier};

/// What the suite asks of an engine.
trait Dedup: Send + Sync {
    fn insert_batch(&self, keys: &[Vec<u8>]) -> Vec<bool>;
    fn contains_batch(&self, keys: &[Vec<u8>]) -> Vec<bool>;
    fn contains_within(&self, key: &[u8], horizon: Duration) -> Result<bool, String>;
    fn contains_within_batch(&self, keys: &[Vec<u8>], horizon: Duration) -> Vec<bool>;
    fn insert_at(&self, key: &[u8], t: SystemTime) -> Result<bool, String>;
    fn insert_within(&self, key: &[u8], horizon: Duration) -> Result<bool, String>;
    fn stats(&self) -> Stats;
}

impl Dedup for Engine {
    fn insert_batch(&self, keys: &[Vec<u8>]) -> Vec<bool> {
        Engine::insert_batch(self, keys).expect("insert_batch")
    }
    fn contains_batch(&self, keys: &[Vec<u8>]) -> Vec<bool> {
        Engine::contains_batch(self, keys).expect("contains_batch")
    }
    fn contains_within(&self, key: &[u8], horizon: Duration) -> Result<bool, String> {
        Engine::contains_within(self, key, horizon).map_err(|e| e.to_string())
    }
    fn contains_within_batch(&self, keys: &[Vec<u8>], horizon: Duration) -> Vec<bool> {
        // The embedded engine has no batch form: one call per key.
        keys.iter()
            .map(|k| Engine::contains_within(self, k, horizon).expect("contains_within"))
            .collect()
    }
    fn insert_at(&self, key: &[u8], t: SystemTime) -> Result<bool, String> {
        Engine::insert_at(self, key, t).map_err(|e| e.to_string())
    }
    fn insert_within(&self, key: &[u8], horizon: Duration) -> Result<bool, String> {
        Engine::insert_within(self, key, horizon).map_err(|e| e.to_string())
    }
    fn stats(&self) -> Stats {
        Engine::stats(self).expect("stats")
    }
}

impl Dedup for RedisEngine {
    fn insert_batch(&self, keys: &[Vec<u8>]) -> Vec<bool> {
        RedisEngine::insert_batch(self, keys).expect("insert_batch")
    }
    fn contains_batch(&self, keys: &[Vec<u8>]) -> Vec<bool> {
        RedisEngine::contains_batch(self, keys).expect("contains_batch")
    }
    fn contains_within(&self, key: &[u8], horizon: Duration) -> Result<bool, String> {
        RedisEngine::contains_within(self, key, horizon).map_err(|e| e.to_string())
    }
    fn contains_within_batch(&self, keys: &[Vec<u8>], horizon: Duration) -> Vec<bool> {
        RedisEngine::contains_within_batch(self, keys, horizon).expect("contains_within_batch")
    }
    fn insert_at(&self, key: &[u8], t: SystemTime) -> Result<bool, String> {
        RedisEngine::insert_at(self, key, t).map_err(|e| e.to_string())
    }
    fn insert_within(&self, key: &[u8], horizon: Duration) -> Result<bool, String> {
        RedisEngine::insert_within(self, key, horizon).map_err(|e| e.to_string())
    }
    fn stats(&self) -> Stats {
        RedisEngine::stats(self).expect("stats")
    }
}

/// Makes engines: `create` a fresh one; `clients` more handles on the
/// store `create` made last (other processes, for Redis).
trait Backend {
    fn create(&mut self, config: Config, clock: &ManualClock) -> Arc<dyn Dedup>;
    fn clients(&mut self, n: usize, clock: &ManualClock) -> Vec<Arc<dyn Dedup>>;
}

struct Embedded {
    dir: tempfile::TempDir,
    made: usize,
    last: Option<Arc<Engine>>,
}

impl Embedded {
    fn new() -> Embedded {
        Embedded {
            dir: tempfile::tempdir().expect("temp dir"),
            made: 0,
            last: None,
        }
    }
}

impl Backend for Embedded {
    fn create(&mut self, config: Config, clock: &ManualClock) -> Arc<dyn Dedup> {
        self.made += 1;
        let path = self.dir.path().join(format!("e{}.tb", self.made));
        let e = Arc::new(
            Engine::create_with(path, config, Options::default().clock(clock.clone()))
                .expect("create"),
        );
        self.last = Some(Arc::clone(&e));
        e
    }

    fn clients(&mut self, n: usize, _clock: &ManualClock) -> Vec<Arc<dyn Dedup>> {
        // One directory has one writer process: threads share the engine.
        let e = self.last.clone().expect("create first");
        (0..n).map(|_| Arc::clone(&e) as Arc<dyn Dedup>).collect()
    }
}

struct OnRedis {
    url: String,
    base: String,
    made: usize,
}

impl OnRedis {
    fn new(url: &str, test: &str) -> OnRedis {
        OnRedis {
            url: url.to_string(),
            base: prefix(test),
            made: 0,
        }
    }

    fn prefix(&self) -> String {
        format!("{}-{}", self.base, self.made)
    }
}

impl Backend for OnRedis {
    fn create(&mut self, config: Config, clock: &ManualClock) -> Arc<dyn Dedup> {
        self.made += 1;
        let opts = RedisOptions::default().clock(clock.clone());
        Arc::new(RedisEngine::create_with(&self.url, &self.prefix(), config, opts).expect("create"))
    }

    fn clients(&mut self, n: usize, clock: &ManualClock) -> Vec<Arc<dyn Dedup>> {
        (0..n)
            .map(|_| {
                let opts = RedisOptions::default().clock(clock.clone());
                Arc::new(RedisEngine::open_with(&self.url, &self.prefix(), opts).expect("open"))
                    as Arc<dyn Dedup>
            })
            .collect()
    }
}

fn config(tiers: &[Tier], items_per_day: u64, fpr: f64) -> Config {
    Config {
        tiers: tiers.to_vec(),
        expected_items_per_day: items_per_day,
        fpr,
        ..Config::default()
    }
}

fn keys(set: u64, n: u64) -> Vec<Vec<u8>> {
    (0..n).map(|i| url(set, i)).collect()
}

fn count(v: &[bool]) -> usize {
    v.iter().filter(|&&b| b).count()
}

// ---- the suite ----------------------------------------------------------------

/// New keys are new once, present afterwards; answers come in input order,
/// and a key repeated inside a batch is new only at its first position.
fn insert_and_contains(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(0));
    let cfg = config(
        &[Tier::daily(7), Tier::weekly(4), Tier::monthly(12)],
        10_000,
        0.001,
    );
    let e = b.create(cfg, &clock);
    let a = keys(1, 2000);
    let first = e.insert_batch(&a);
    assert_eq!(first.len(), a.len());
    assert!(count(&first) >= 1995, "{} of 2000 new", count(&first));
    assert_eq!(count(&e.insert_batch(&a)), 0, "second insert reported new");
    assert!(e.contains_batch(&a).iter().all(|&x| x), "false negative");
    let absent = keys(2, 20_000);
    let fp = count(&e.contains_batch(&absent));
    assert!(fp <= 40, "{fp} of 20000 absent keys present (p = 0.001)");
    let mixed = vec![url(3, 1), url(1, 5), url(3, 1), url(3, 2), url(3, 2)];
    assert_eq!(
        e.insert_batch(&mixed),
        vec![true, false, false, true, false]
    );
    assert_eq!(e.insert_batch(&[]), Vec::<bool>::new());
}

/// The shortest tier covering a horizon answers it; keys older than the
/// horizon (by more than a window) are not found; too long a horizon is an
/// error.
fn horizons(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(0));
    let e = b.create(
        config(&[Tier::daily(7), Tier::weekly(4)], 10_000, 0.001),
        &clock,
    );
    let old = keys(10, 500);
    e.insert_batch(&old);
    clock.set(day(3));
    let recent = keys(11, 500);
    e.insert_batch(&recent);
    let within = |ks: &[Vec<u8>], h: Duration| {
        ks.iter()
            .filter(|k| e.contains_within(k, h).expect("contains_within"))
            .count()
    };
    assert_eq!(within(&recent, Duration::from_secs(3600)), 500);
    assert!(within(&old, Duration::from_secs(3600)) <= 3);
    assert!(
        within(&old, DAY) <= 3,
        "a 1-day horizon found 3-day-old keys"
    );
    assert_eq!(within(&old, 4 * DAY), 500);
    assert_eq!(within(&old, 20 * DAY), 500);
    // The batch form gives the single answers, key by key.
    let mixed: Vec<Vec<u8>> = old.iter().chain(&recent).step_by(7).cloned().collect();
    for h in [DAY, 4 * DAY] {
        let single: Vec<bool> = mixed
            .iter()
            .map(|k| e.contains_within(k, h).expect("contains_within"))
            .collect();
        assert_eq!(e.contains_within_batch(&mixed, h), single, "horizon {h:?}");
    }
    let err = e
        .contains_within(&old[0], 400 * DAY)
        .expect_err("a horizon past every tier");
    assert!(err.contains("horizon"), "{err}");
}

/// Check-and-insert within a horizon (a recrawl schedule): a key is new
/// again once it was not recorded within the horizon, and recorded only
/// then; too long a horizon is an error that records nothing.
fn recrawl_within_a_horizon(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(0));
    let e = b.create(
        config(&[Tier::daily(7), Tier::weekly(4)], 10_000, 0.001),
        &clock,
    );
    let horizon = 5 * DAY;
    let a = keys(15, 500);
    let new = |e: &Arc<dyn Dedup>| {
        a.iter()
            .filter(|k| e.insert_within(k, horizon).expect("insert_within"))
            .count()
    };
    // A false positive is "seen" for a key never inserted: a few allowed
    // (500 keys against 6 windows at 0.1%).
    assert!(new(&e) >= 497, "first sight");
    assert_eq!(new(&e), 0, "just recorded");
    clock.set(day(3));
    assert_eq!(new(&e), 0, "seen 3 days ago");
    // Day 6: recorded on day 0, six days ago (the check on day 3 recorded
    // nothing): due again, once.
    clock.set(day(6));
    let again = new(&e);
    assert!(again >= 497, "only {again} of 500 due again");
    assert_eq!(new(&e), 0, "recorded by the recrawl");
    clock.set(day(9));
    assert_eq!(new(&e), 0, "recrawled 3 days ago");
    assert_eq!(count(&e.contains_batch(&a)), 500);
    // The last record is day 6's: within 4 days, not within 1.
    let within = |h: Duration| {
        a.iter()
            .filter(|k| e.contains_within(k, h).expect("contains_within"))
            .count()
    };
    assert!(within(DAY) <= 3, "the checks on day 9 recorded");
    assert_eq!(within(4 * DAY), 500);
    let fresh = url(16, 0);
    let err = e
        .insert_within(&fresh, 400 * DAY)
        .expect_err("a horizon past every tier");
    assert!(err.contains("horizon"), "{err}");
    assert_eq!(
        e.contains_batch(&[fresh]),
        [false],
        "the refused call wrote"
    );
}

/// 8 clients recrawl the same keys at once, a key by call: once a key is
/// due (not seen within the horizon), exactly one of them is told so.
fn concurrency_exactly_one_recrawl(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(0));
    let e = b.create(
        config(&[Tier::daily(7), Tier::weekly(4)], 10_000, 1e-7),
        &clock,
    );
    let universe = keys(61, 1_500);
    assert_eq!(count(&e.insert_batch(&universe)), universe.len());
    clock.set(day(9));
    let clients = b.clients(8, &clock);
    let wins = race(&clients, universe.len(), |c, e, got| {
        for j in 0..universe.len() {
            let i = (j + c * 200) % universe.len();
            got[i] += u32::from(
                e.insert_within(&universe[i], 5 * DAY)
                    .expect("insert_within"),
            );
        }
    });
    for (i, &n) in wins.iter().enumerate() {
        assert_eq!(n, 1, "key {i} was due for {n} clients");
    }
}

/// Windows leave when the clock passes their retention: nothing of them
/// is found afterwards.
fn expiry_with_moved_clock(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(0));
    let e = b.create(config(&[Tier::daily(2)], 10_000, 0.001), &clock);
    let a = keys(20, 1000);
    e.insert_batch(&a);
    clock.set(day(1));
    assert_eq!(count(&e.contains_batch(&a)), 1000, "expired too early");
    clock.set(day(2));
    assert_eq!(
        count(&e.contains_batch(&a)),
        0,
        "window outlived its retention"
    );
    assert_eq!(
        count(&e.insert_batch(&a)),
        1000,
        "expired keys are new again"
    );
}

/// `insert_at` writes the windows holding the instant; expired or future
/// instants are errors.
fn backfill(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(3));
    let e = b.create(config(&[Tier::daily(7)], 10_000, 0.001), &clock);
    let k = url(30, 1);
    assert_eq!(e.insert_at(&k, day(1)), Ok(true));
    assert_eq!(e.insert_at(&k, day(2)), Ok(false));
    assert_eq!(e.contains_within(&k, Duration::from_secs(3600)), Ok(false));
    assert_eq!(e.contains_within(&k, 3 * DAY), Ok(true));
    assert_eq!(count(&e.contains_batch(std::slice::from_ref(&k))), 1);
    // Day by day: a jump past every window's end at once is refused by
    // the embedded engine (it would expire everything).
    for d in 4..=10 {
        clock.set(day(d));
        e.contains_batch(std::slice::from_ref(&k));
    }
    let unavailable = |r: Result<bool, String>| r.is_err_and(|m| m.contains("window unavailable"));
    assert!(
        unavailable(e.insert_at(&k, day(1))),
        "expired window written"
    );
    assert!(
        unavailable(e.insert_at(&k, day(12))),
        "future window written"
    );
    assert_eq!(e.insert_at(&k, day(9)), Ok(true), "day 1 expired");
}

/// A window receiving 20 times its plan grows a chain: no key lost, the
/// estimated rate within the window's share.
fn growth(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(0));
    let e = b.create(config(&[Tier::daily(2)], 1_000, 0.01), &clock);
    let a = keys(40, 20_000);
    let mut new = 0;
    for chunk in a.chunks(1000) {
        let r = e.insert_batch(chunk);
        assert_eq!(r.len(), chunk.len());
        new += count(&r);
    }
    assert!(e.contains_batch(&a).iter().all(|&x| x), "false negative");
    let s = e.stats();
    // Each distinct key is reported seen only as a false positive, each
    // with a chance of at most the window's share of the rate however full
    // the chain is: the count of such keys is at most binomial with that
    // mean. Fail when it is 4 standard deviations above it (a chance of
    // about 3e-5 for an engine exactly at its share). The point bound this
    // replaces (100 at a mean of up to 100) failed correct runs: 40 runs
    // saw 57 to 101 such keys, median 75.
    let mean = s.tiers[0].segment_fpr * 20_000.0;
    let bound = mean + 4.0 * mean.sqrt();
    let seen = 20_000 - new;
    assert!(
        (seen as f64) <= bound,
        "{seen} of 20000 distinct keys reported seen (mean at the share {mean:.0}, bound {bound:.0})"
    );
    let seg = s.tiers[0].segments.last().expect("a segment");
    assert!(
        seg.subfilters >= 4,
        "20x the plan grew {} sub-filters",
        seg.subfilters
    );
    assert!(
        seg.estimated_fpr <= s.tiers[0].segment_fpr,
        "{} > {}",
        seg.estimated_fpr,
        s.tiers[0].segment_fpr
    );
    let est = seg.estimated_items as f64;
    assert!((est - 20_000.0).abs() < 1_000.0, "estimated {est} items");
}

/// The configured rate bounds `contains` and a horizon query, at the
/// planned load and on a day with 4 times the plan.
fn false_positive_rate(b: &mut dyn Backend) {
    let clock = ManualClock::new(day(0));
    let p = 0.01;
    let e = b.create(config(&[Tier::daily(3)], 5_000, p), &clock);
    for (d, n) in [(0, 5_000), (1, 20_000), (2, 5_000)] {
        clock.set(day(d));
        for chunk in keys(50 + d, n).chunks(2000) {
            e.insert_batch(chunk);
        }
    }
    let neg = keys(99, 200_000);
    let rate = count(&e.contains_batch(&neg)) as f64 / neg.len() as f64;
    println!("contains over 3 windows: measured {rate:.5} (configured {p})");
    assert!(rate <= 1.1 * p, "measured {rate} > 1.1 x {p}");
    let few = &neg[..20_000];
    let hits = few
        .iter()
        .filter(|k| e.contains_within(k, DAY).expect("within"))
        .count();
    let rate = hits as f64 / few.len() as f64;
    println!("within a day: measured {rate:.5}");
    assert!(rate <= 1.1 * p, "within a day: {rate} > 1.1 x {p}");
}

/// 8 clients insert overlapping keys at once: each key is new for exactly
/// one of them (or, a false positive, for none).
fn concurrency_exactly_one_new(b: &mut dyn Backend) {
    // A rate low enough that no distinct key is a false positive of another.
    eight_clients(
        b,
        config(&[Tier::daily(7), Tier::weekly(4)], 10_000, 1e-7),
        4000,
    );
}

/// The same while the windows grow: 8 times the plan, so every client
/// meets chains that other clients have grown (on Redis: a client with an
/// old chain length is refused by the shard and learns the new one).
fn concurrency_through_growth(b: &mut dyn Backend) {
    eight_clients(
        b,
        config(&[Tier::daily(7), Tier::weekly(4)], 2_000, 1e-5),
        16_000,
    );
}

/// Runs `each(client number, client, wins)` on every client at once, each
/// counting in its own `wins` (one counter per key) the keys it was told
/// are new; returns the sum per key.
fn race(
    clients: &[Arc<dyn Dedup>],
    keys: usize,
    each: impl Fn(usize, &dyn Dedup, &mut [u32]) + Sync,
) -> Vec<u32> {
    let per_client: Vec<Vec<u32>> = std::thread::scope(|s| {
        let hs: Vec<_> = clients
            .iter()
            .enumerate()
            .map(|(c, e)| {
                let each = &each;
                s.spawn(move || {
                    let mut got = vec![0u32; keys];
                    each(c, e.as_ref(), &mut got);
                    got
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().expect("client")).collect()
    });
    (0..keys)
        .map(|i| per_client.iter().map(|g| g[i]).sum())
        .collect()
}

fn eight_clients(b: &mut dyn Backend, cfg: Config, n: u64) {
    let clock = ManualClock::new(day(0));
    b.create(cfg, &clock);
    let clients = b.clients(8, &clock);
    let universe = keys(60, n);
    let wins = race(&clients, universe.len(), |c, e, got| {
        // Every client walks the whole universe from another offset, in
        // batches, so they collide all the time.
        let order: Vec<usize> = (0..universe.len())
            .map(|i| (i + c * 500) % universe.len())
            .collect();
        for chunk in order.chunks(100) {
            let ks: Vec<Vec<u8>> = chunk.iter().map(|&i| universe[i].clone()).collect();
            for (&i, new) in chunk.iter().zip(e.insert_batch(&ks)) {
                got[i] += u32::from(new);
            }
        }
    });
    // Exactly one client sees each key new, except a key that is a false
    // positive before anyone inserts it: every client is told "seen" (the
    // contract allows it, and the check below shows it is then found).
    // Two winners would be a lost atomicity, and many keys with none a
    // lost write: the callers' configurations expect at most 0.16 false
    // positives (16,000 keys at 1e-5), so more than 3 (Poisson: 3e-5)
    // fails the test.
    let mut none = Vec::new();
    for (i, &n) in wins.iter().enumerate() {
        assert!(n <= 1, "key {i} was new for {n} clients");
        if n == 0 {
            none.push(i);
        }
    }
    assert!(
        none.len() <= 3,
        "{} keys were new for no client: {none:?}",
        none.len()
    );
    for (c, e) in clients.iter().enumerate() {
        let found = count(&e.contains_batch(&universe));
        assert_eq!(found, universe.len(), "client {c} misses keys");
    }
    let s = clients[0].stats();
    for t in &s.tiers {
        let seg = t.segments.last().expect("a segment");
        println!(
            "{}: {} sub-filters, {} keys estimated, rate {:.2e} (share {:.2e})",
            t.tier, seg.subfilters, seg.estimated_items, seg.estimated_fpr, t.segment_fpr
        );
        assert!(
            seg.estimated_fpr <= t.segment_fpr,
            "{}: over its share",
            t.tier
        );
    }
}

type Case = fn(&mut dyn Backend);

const SUITE: [(&str, Case); 10] = [
    ("insert_and_contains", insert_and_contains),
    ("horizons", horizons),
    ("expiry_with_moved_clock", expiry_with_moved_clock),
    ("backfill", backfill),
    ("growth", growth),
    ("false_positive_rate", false_positive_rate),
    ("concurrency_exactly_one_new", concurrency_exactly_one_new),
    ("concurrency_through_growth", concurrency_through_growth),
    ("recrawl_within_a_horizon", recrawl_within_a_horizon),
    (
        "concurrency_exactly_one_recrawl",
        concurrency_exactly_one_recrawl,
    ),
];

macro_rules! both {
    ($($name:ident),* $(,)?) => {
        mod embedded {
            $(
                #[test]
                fn $name() {
                    super::$name(&mut super::Embedded::new());
                }
            )*
        }
        mod redis {
            use super::redis_support;
            $(
                #[test]
                fn $name() {
                    if !redis_support::require(concat!("redis::", stringify!($name))) {
                        return;
                    }
                    let server = redis_support::Server::start();
                    super::$name(&mut super::OnRedis::new(&server.url(), stringify!($name)));
                }
            )*
        }
    };
}

both!(
    insert_and_contains,
    horizons,
    expiry_with_moved_clock,
    backfill,
    growth,
    false_positive_rate,
    concurrency_exactly_one_new,
    concurrency_through_growth,
    recrawl_within_a_horizon,
    concurrency_exactly_one_recrawl,
);

/// The whole suite on a three-node Cluster; afterwards every node holds
/// keys (the shards' hash tags spread over the slots).
#[test]
fn cluster_passes_the_suite() {
    if !require("cluster_passes_the_suite") {
        return;
    }
    let cluster = Cluster::start();
    for (name, case) in SUITE {
        println!("cluster: {name}");
        case(&mut OnRedis::new(&cluster.url(), name));
    }
    let per_node = cluster.keys_per_node();
    println!("keys per node: {per_node:?}");
    assert!(
        per_node.iter().all(|&n| n > 0),
        "some node holds no key: {per_node:?}"
    );
}
