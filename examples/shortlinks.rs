//! A short-link service in front of its database: never mint two codes for
//! one URL, and reject unknown codes without touching the database.
//!
//! ```sh
//! cargo run --release --example shortlinks -- --links 10000 --probes 100000
//! ```
//!
//! The database is a `HashMap` standing in for the real one; every read of
//! it is counted. The engine keeps `url:` and `code:` keys in 30 daily
//! counting windows, as long as a link lives:
//! * "definitely absent" skips the database (a new URL is minted at once,
//!   an unknown code is rejected at once: the cache-penetration guard);
//! * "maybe present" is confirmed in the database;
//! * a deleted link is taken out of the filter (`remove_at` with its
//!   creation instant), and an expired one ages out with its window.

#[path = "common/mod.rs"]
#[macro_use]
mod common;

use std::collections::HashMap;
use std::time::SystemTime;

use common::{fail, or_die, Args, DAY};
use timebloom::{Clock, Config, Engine, ManualClock, Options, Tier};

const USAGE: &str = "usage: shortlinks [--dir DIR] [--links N] [--probes M] [--fpr P] [--days D]
  --dir DIR    engine directory to create (new or empty; default: a temporary one)
  --links N    links to create (default 1000; one URL in five is asked for twice)
  --probes M   unknown codes to resolve, as a scanner would (default 20000)
  --fpr P      false-positive rate (default 0.001)
  --days D     how long a link lives, in days (default 30)";

/// One row of the stand-in database.
struct Link {
    url: String,
    created: SystemTime,
}

/// The database: links by code, and the unique index url -> code.
#[derive(Default)]
struct Database {
    links: HashMap<String, Link>,
    by_url: HashMap<String, String>,
    reads: u64,
}

impl Database {
    fn code_of(&mut self, url: &str) -> Option<String> {
        self.reads += 1;
        self.by_url.get(url).cloned()
    }

    fn url_of(&mut self, code: &str) -> Option<String> {
        self.reads += 1;
        self.links.get(code).map(|l| l.url.clone())
    }
}

struct Service {
    engine: Engine,
    clock: ManualClock,
    db: Database,
    next: u64,
}

fn url_key(url: &str) -> Vec<u8> {
    [b"url:".as_slice(), url.as_bytes()].concat()
}

fn code_key(code: &str) -> Vec<u8> {
    [b"code:".as_slice(), code.as_bytes()].concat()
}

impl Service {
    /// The code for `url`: the existing one, or a new one.
    fn shorten(&mut self, url: &str) -> timebloom::Result<String> {
        // Maybe shortened before: the database decides (a false positive
        // finds nothing there and mints below).
        if self.engine.contains(&url_key(url))? {
            if let Some(code) = self.db.code_of(url) {
                return Ok(code);
            }
        }
        // Definitely never shortened (within a link's life): no database read.
        let code = self.free_code()?;
        let now = self.clock.now();
        // Filter first, database second: a crash between the two leaves a
        // key the filter calls "maybe" (one wasted database read), never a
        // code the database has and the filter rejects. Counting windows
        // count every insert, so each link inserts its keys exactly once.
        self.engine.insert_at(&url_key(url), now)?;
        self.engine.insert_at(&code_key(&code), now)?;
        self.db.by_url.insert(url.to_owned(), code.clone());
        let link = Link {
            url: url.to_owned(),
            created: now,
        };
        self.db.links.insert(code.clone(), link);
        Ok(code)
    }

    /// A code no live link uses; the filter answers for most candidates.
    fn free_code(&mut self) -> timebloom::Result<String> {
        loop {
            self.next += 1;
            let code = base62(self.next.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 24);
            if !self.engine.contains(&code_key(&code))? || self.db.url_of(&code).is_none() {
                return Ok(code);
            }
        }
    }

    /// The URL behind `code`, or `None` (HTTP 404).
    fn resolve(&mut self, code: &str) -> timebloom::Result<Option<String>> {
        if !self.engine.contains(&code_key(code))? {
            return Ok(None); // rejected without touching the database
        }
        Ok(self.db.url_of(code))
    }

    /// Deletes a link: out of the database, and its keys out of the filter
    /// (one `remove_at` per insert, at the instant of that insert).
    fn delete(&mut self, code: &str) -> timebloom::Result<bool> {
        let Some(link) = self.db.links.remove(code) else {
            return Ok(false);
        };
        self.db.by_url.remove(&link.url);
        self.engine.remove_at(&code_key(code), link.created)?;
        self.engine.remove_at(&url_key(&link.url), link.created)?;
        Ok(true)
    }

    /// The database's own expiry (its TTL); the filter's windows age out
    /// by themselves on the same schedule.
    fn purge(&mut self, lifetime: std::time::Duration) {
        let now = self.clock.now();
        let expired = |l: &Link| {
            now.duration_since(l.created)
                .is_ok_and(|age| age >= lifetime)
        };
        self.db.links.retain(|_, l| !expired(l));
        let links = &self.db.links;
        self.db.by_url.retain(|_, code| links.contains_key(code));
    }
}

/// The value of an engine call, or a clean exit.
fn run<T>(r: timebloom::Result<T>) -> T {
    or_die(r, "engine")
}

fn base62(mut n: u64) -> String {
    const DIGITS: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
    let mut s = Vec::new();
    loop {
        s.push(DIGITS[(n % 62) as usize]);
        n /= 62;
        if n == 0 {
            break;
        }
    }
    s.reverse();
    String::from_utf8_lossy(&s).into_owned()
}

fn main() {
    let args = Args::parse(USAGE, &["dir", "links", "probes", "fpr", "days"], &[]);
    let links: u64 = args.get("links", 1000);
    let probes: u64 = args.get("probes", 20_000);
    let fpr: f64 = args.get("fpr", 0.001);
    let days: u32 = args.get("days", 30);
    if links == 0 || !(2..=3650).contains(&days) {
        fail(format_args!(
            "--links must be at least 1 and --days between 2 and 3650\n{USAGE}"
        ));
    }
    let (dir, _tmp) = common::engine_dir(&args, "links.tb");
    let clock = ManualClock::new(common::start());
    let config = Config {
        // One window a day, as many as a link lives: a link created on day 0
        // is in the filter through day `days - 1`.
        tiers: vec![Tier::daily(days).counting()],
        // Saturating: a count past the largest plan is the configuration's
        // clean refusal, not an overflow.
        expected_items_per_day: links.saturating_mul(2),
        fpr,
        ..Config::default()
    };
    let engine = or_die(
        Engine::create_with(&dir, config, Options::default().clock(clock.clone())),
        "creating the engine",
    );
    let mut svc = Service {
        engine,
        clock: clock.clone(),
        db: Database::default(),
        next: 0,
    };

    // Create links; one URL in five is asked for twice.
    let urls: Vec<String> = (0..links)
        .map(|i| format!("https://shop.example/item/{i}?utm=mail"))
        .collect();
    let mut codes = HashMap::new();
    let mut twice_same = 0;
    for (i, url) in urls.iter().enumerate() {
        let code = run(svc.shorten(url));
        if i % 5 == 0 {
            twice_same += u64::from(run(svc.shorten(url)) == code);
        }
        codes.insert(url.clone(), code);
    }
    say!(
        "created {} links for {links} URLs; {twice_same} of {} repeated URLs got their existing code \
         ({} database reads)",
        svc.db.links.len(),
        links.div_ceil(5),
        svc.db.reads
    );

    let reads = svc.db.reads;
    let ok = codes
        .iter()
        .filter(|(url, code)| run(svc.resolve(code)).as_deref() == Some(url.as_str()))
        .count();
    say!(
        "resolved {ok} of {} known codes ({} database reads)",
        codes.len(),
        svc.db.reads - reads
    );

    // A scanner tries codes that were never issued.
    let reads = svc.db.reads;
    let mut found = 0;
    for i in 0..probes {
        let code = format!("zz{}", base62(i));
        found += u64::from(run(svc.resolve(&code)).is_some());
    }
    say!(
        "{probes} unknown codes: {found} resolved, {} reached the database \
         (false positives; at most p x {probes} = {:.0} at the planned load)",
        svc.db.reads - reads,
        fpr * probes as f64
    );

    // Delete one link in ten: the filter forgets its keys.
    let deleted: Vec<String> = codes.values().step_by(10).cloned().collect();
    for code in &deleted {
        run(svc.delete(code));
    }
    let reads = svc.db.reads;
    let gone = deleted
        .iter()
        .filter(|c| run(svc.resolve(c)).is_none())
        .count();
    say!(
        "deleted {} links: {gone} now 404, with {} database reads",
        deleted.len(),
        svc.db.reads - reads
    );

    // A day before the end of a link's life, then the day it ends.
    clock.advance(DAY * (days - 1));
    svc.purge(DAY * days);
    let alive = codes
        .values()
        .filter(|c| run(svc.engine.contains(&code_key(c))))
        .count();
    say!(
        "day {}: the filter still holds {alive} codes (the deleted ones are gone)",
        days - 1
    );
    clock.advance(DAY);
    svc.purge(DAY * days);
    let reads = svc.db.reads;
    let alive = codes
        .values()
        .filter(|c| run(svc.resolve(c)).is_some())
        .count();
    say!(
        "day {days}: the links' window aged out; {alive} of {} old codes resolve, \
         {} database reads; the database purged to {} links",
        codes.len(),
        svc.db.reads - reads,
        svc.db.links.len()
    );
    let fresh = run(svc.shorten(&urls[0]));
    say!("day {days}: {} gets a new code, {fresh}", urls[0]);
    or_die(svc.engine.close(), "closing the engine");
}
