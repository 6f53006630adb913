//! A crawler's deduplication: check, fetch, record, with many fetcher
//! threads sharing one engine.
//!
//! ```sh
//! cargo run --release --example crawler -- --urls 20000 --threads 8
//! cargo run --release --example crawler -- --counting   # record at claim, take back on failure
//! cargo run --release --example crawler -- --sync interval=1s
//! ```
//!
//! The story, on a manual clock starting 2026-11-02:
//! 1. day 0: a frontier where every URL appears twice (once spelled
//!    differently: keys are canonical URLs) is crawled by
//!    `--threads` fetchers; a URL is recorded once its fetch succeeded
//!    (Bloom tiers), or recorded when claimed and taken back when the fetch
//!    fails (`--counting`); a failed URL is retried once; every record is
//!    durable before the fetcher moves on (`--sync always`, the default
//!    here: one fsync per record, shared by the fetchers recording at the
//!    same moment, small beside a fetch);
//! 2. day 0, again: the same frontier finds every fetched URL seen;
//! 3. day 4: URLs not fetched within `--recrawl-days` are due again
//!    (`contains_within`), though `contains` still knows them;
//! 4. what a false positive costs: never-seen URLs that the engine calls
//!    "seen" would never be fetched; their number is measured against the
//!    budget `p x new URLs`.

#[path = "common/mod.rs"]
#[macro_use]
mod common;

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, SystemTime};

use common::{fail, or_die, Args, DAY};
use timebloom::canonical::canonicalize;
use timebloom::{Config, Engine, ManualClock, Options, SyncPolicy, Tier};

const USAGE: &str = "usage: crawler [--dir DIR] [--urls N] [--threads T] [--fail-every K] \
[--recrawl-days D] [--fpr P] [--sync POLICY] [--counting]
  --dir DIR         engine directory to create (new or empty; default: a temporary one)
  --urls N          distinct URLs in the frontier (default 2000)
  --threads T       fetcher threads (default 4)
  --fail-every K    about one fetch in K fails (default 7; 0: none)
  --recrawl-days D  recrawl a URL not fetched within D days, 1 to 6 (default 3)
  --fpr P           false-positive rate (default 0.001)
  --sync POLICY     when a record survives a power loss: always (default), interval=1s, none
  --counting        counting tiers: record at claim, take back on failure";

/// What happened to one URL of the frontier.
enum Visit {
    /// Recorded within the recrawl horizon (or a false positive): skipped.
    Seen,
    /// Another fetcher of this process is fetching it right now.
    Busy,
    Fetched,
    /// The fetch failed; the canonical URL, to retry.
    Failed(String),
}

struct Crawler {
    engine: Engine,
    clock: ManualClock,
    /// Counting tiers: record when claimed, take back when the fetch fails.
    counting: bool,
    fail_every: u64,
    horizon: Duration,
    /// URLs a fetcher of this process is fetching now (see `visit`).
    in_flight: Mutex<HashSet<String>>,
}

impl Crawler {
    /// Check, fetch, record.
    fn visit(&self, url: &str, attempt: u64) -> timebloom::Result<Visit> {
        // One page, one key: `HTTPS://Site1.example:443/page/1` and
        // `https://site1.example/page/1` are the same URL.
        let url = &canonicalize(url).unwrap_or_else(|_| url.to_owned());
        let key = url.as_bytes();
        // 1. Check: fetched within the horizon? (A false positive lands here
        //    too: the one cost of a Bloom filter, a page never fetched.)
        if self.engine.contains_within(key, self.horizon)? {
            return Ok(Visit::Seen);
        }
        // The engine gives exactly one `true` among threads inserting the
        // same *new* key, but a recrawl's key is not new; a small in-flight
        // set keeps two fetchers of this process off one URL either way.
        if !lock(&self.in_flight).insert(url.to_owned()) {
            return Ok(Visit::Busy);
        }
        let result = self.check_fetch_record(url, attempt);
        lock(&self.in_flight).remove(url);
        result
    }

    fn check_fetch_record(&self, url: &str, attempt: u64) -> timebloom::Result<Visit> {
        let key = url.as_bytes();
        // Another fetcher may have recorded it between our check and our claim.
        if self.engine.contains_within(key, self.horizon)? {
            return Ok(Visit::Seen);
        }
        // Counting tiers: record now, so every reader of the engine sees the
        // URL as taken while the fetch runs. One instant for the insert and
        // its possible undo: both name the same windows.
        let claimed_at: SystemTime = timebloom::Clock::now(&self.clock);
        if self.counting {
            self.engine.insert_at(key, claimed_at)?;
        }
        // 2. Fetch.
        match fetch(url, attempt, self.fail_every) {
            Ok(_body_len) => {
                // 3. Record, now that the page is ours.
                if !self.counting {
                    self.engine.insert(key)?;
                }
                Ok(Visit::Fetched)
            }
            Err(_why) => {
                // A failed fetch must not count as seen: Bloom tiers never
                // recorded it; counting tiers take the claim back.
                if self.counting {
                    self.engine.remove_at(key, claimed_at)?;
                }
                Ok(Visit::Failed(url.to_owned()))
            }
        }
    }
}

/// A simulated fetch: deterministic, about one in `fail_every` fails.
fn fetch(url: &str, attempt: u64, fail_every: u64) -> Result<usize, &'static str> {
    let h = url
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64 ^ attempt, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    if fail_every > 0 && h % fail_every == 0 {
        Err("timed out")
    } else {
        Ok(1000 + (h % 50_000) as usize)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[derive(Default)]
struct Tally {
    seen: AtomicU64,
    busy: AtomicU64,
    fetched: AtomicU64,
    failed: Mutex<Vec<String>>,
}

/// Runs `frontier` through `threads` fetchers sharing the crawler.
fn crawl(crawler: &Arc<Crawler>, frontier: Vec<String>, attempt: u64, threads: usize) -> Tally {
    let frontier = Arc::new(frontier);
    let next = Arc::new(AtomicUsize::new(0));
    let tally = Arc::new(Tally::default());
    let workers: Vec<_> = (0..threads)
        .map(|_| {
            let (crawler, frontier, next, tally) = (
                Arc::clone(crawler),
                Arc::clone(&frontier),
                Arc::clone(&next),
                Arc::clone(&tally),
            );
            thread::spawn(move || -> timebloom::Result<()> {
                while let Some(url) = frontier.get(next.fetch_add(1, Ordering::Relaxed)) {
                    match crawler.visit(url, attempt)? {
                        Visit::Seen => tally.seen.fetch_add(1, Ordering::Relaxed),
                        Visit::Busy => tally.busy.fetch_add(1, Ordering::Relaxed),
                        Visit::Fetched => tally.fetched.fetch_add(1, Ordering::Relaxed),
                        Visit::Failed(url) => {
                            lock(&tally.failed).push(url);
                            0
                        }
                    };
                }
                Ok(())
            })
        })
        .collect();
    for w in workers {
        match w.join() {
            Ok(r) => or_die(r, "fetcher"),
            Err(_) => fail("a fetcher thread panicked"),
        }
    }
    Arc::try_unwrap(tally).unwrap_or_else(|_| fail("fetchers still running"))
}

fn report(what: &str, t: &Tally) {
    say!(
        "{what}: fetched {}, skipped as seen {}, skipped while another fetcher had it {}, failed {}",
        t.fetched.load(Ordering::Relaxed),
        t.seen.load(Ordering::Relaxed),
        t.busy.load(Ordering::Relaxed),
        lock(&t.failed).len()
    );
}

fn main() {
    let args = Args::parse(
        USAGE,
        &[
            "dir",
            "urls",
            "threads",
            "fail-every",
            "recrawl-days",
            "fpr",
            "sync",
        ],
        &["counting"],
    );
    let urls: u64 = args.get("urls", 2000);
    let threads: usize = args.get("threads", 4);
    let fail_every: u64 = args.get("fail-every", 7);
    let recrawl_days: u64 = args.get("recrawl-days", 3);
    let fpr: f64 = args.get("fpr", 0.001);
    let counting = args.flag("counting");
    // A record after a fetch (or a claim and its undo) is worth an fsync:
    // lost to a power cut, it would mean fetching the page again (or, for
    // counting tiers, a claim that is never taken back).
    let sync: SyncPolicy = args.get("sync", SyncPolicy::Always);
    if urls == 0 || !(1..=1024).contains(&threads) {
        fail(format_args!(
            "--urls must be at least 1, --threads 1 to 1024\n{USAGE}"
        ));
    }
    // The story recrawls on day D + 1. A horizon the daily tier (7 windows)
    // cannot answer is answered from weekly or monthly windows, which count
    // a URL up to one window (a week, a month) longer: nothing would be due.
    if !(1..=6).contains(&recrawl_days) {
        fail(
            "--recrawl-days must be between 1 and 6: a longer horizon is answered from \
             weekly or monthly windows, which count a URL up to a window longer",
        );
    }
    let (dir, _tmp) = common::engine_dir(&args, "crawl.tb");

    let tiers = [Tier::daily(7), Tier::weekly(4), Tier::monthly(12)];
    let config = Config {
        tiers: if counting {
            tiers.into_iter().map(Tier::counting).collect()
        } else {
            tiers.to_vec()
        },
        expected_items_per_day: urls,
        fpr,
        sync,
        ..Config::default()
    };
    let clock = ManualClock::new(common::start());
    let engine = or_die(
        Engine::create_with(&dir, config, Options::default().clock(clock.clone())),
        "creating the engine",
    );
    say!(
        "engine {} ({} tiers, {urls} URLs/day planned, p = {fpr}, sync {sync}), {threads} fetchers",
        dir.display(),
        if counting { "counting" } else { "Bloom" }
    );
    let crawler = Arc::new(Crawler {
        engine,
        clock: clock.clone(),
        counting,
        fail_every,
        horizon: DAY * recrawl_days as u32,
        in_flight: Mutex::new(HashSet::new()),
    });

    // Every URL twice, interleaved, as links found on many pages arrive,
    // once as written elsewhere (upper-case host, default port).
    let distinct: Vec<String> = (0..urls)
        .map(|i| format!("https://site{}.example/page/{i}", i % 97))
        .collect();
    let frontier: Vec<String> = (0..2 * urls as usize)
        .map(|i| {
            let url = &distinct[(i * 7919) % distinct.len()];
            if i % 2 == 0 {
                url.replacen("https://site", "HTTPS://Site", 1).replacen(
                    ".example/",
                    ".example:443/",
                    1,
                )
            } else {
                url.clone()
            }
        })
        .collect();

    let day0 = crawl(&crawler, frontier.clone(), 0, threads);
    report("day 0, first crawl", &day0);
    // Requeue each failed URL once (a URL listed twice failed twice).
    let mut failed = std::mem::take(&mut *lock(&day0.failed));
    failed.sort_unstable();
    failed.dedup();
    let retry = crawl(&crawler, failed, 1, threads);
    report("day 0, failed URLs retried", &retry);
    let left = lock(&retry.failed).len();
    say!("day 0: {left} URLs still failing stay unrecorded: the next crawl fetches them");

    let again = crawl(&crawler, frontier, 2, threads);
    report(
        "day 0, same frontier again (only URLs that never succeeded are fetched)",
        &again,
    );

    clock.advance(DAY * (recrawl_days as u32 + 1));
    let engine = &crawler.engine;
    let known = distinct
        .iter()
        .filter(|u| or_die(engine.contains(u.as_bytes()), "contains"))
        .count();
    let recrawl = crawl(&crawler, distinct.clone(), 3, threads);
    report(
        &format!(
            "day {}, recrawl after {recrawl_days} days",
            recrawl_days + 1
        ),
        &recrawl,
    );
    say!(
        "day {}: contains() still knows {known} of {urls} URLs (the weekly and monthly tiers keep them)",
        recrawl_days + 1
    );

    // What a false positive costs: a never-seen URL that tests "seen" is a
    // page the crawler never fetches. Budget: p x (new URLs checked).
    let probes = 20 * urls;
    let false_pos = (0..probes)
        .filter(|i| {
            let url = format!("https://elsewhere{}.example/never/{i}", i % 89);
            or_die(engine.contains(url.as_bytes()), "contains")
        })
        .count();
    say!(
        "false positives: {false_pos} of {probes} never-seen URLs would never be fetched \
         (budget p x {probes} = {:.1}, met at the planned load; these windows hold \
         a fraction of theirs, so fewer occur)",
        fpr * probes as f64
    );
    let crawler = Arc::try_unwrap(crawler).unwrap_or_else(|_| fail("fetchers still running"));
    or_die(crawler.engine.close(), "closing the engine");
}
