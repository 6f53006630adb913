//! Shared by the integration tests: crawl-like URLs and a clock at a fixed date.
#![allow(dead_code)]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use timebloom::{Config, Engine, ManualClock, Options, Tier};

/// Monday 2026-01-05T00:00:00Z: the start of ISO week 2026W02.
pub const T0: u64 = 1_767_571_200;
pub const DAY: Duration = Duration::from_secs(86_400);

/// The fingerprint widths a table's header may hold, each with the slots
/// per bucket it leaves (docs/format.md, the table header's "fingerprint
/// bits" and "cells per block").
pub const TABLE_WIDTHS: [(u32, u32); 7] = [
    (8, 28),
    (9, 28),
    (10, 24),
    (12, 21),
    (16, 20),
    (21, 15),
    (32, 12),
];

pub fn at(secs: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(secs)
}

pub fn day(n: u64) -> SystemTime {
    at(T0 + n * 86_400 + 12 * 3600)
}

/// A deterministic crawl-like URL, 60 to 120 bytes, from many hosts. `set`
/// separates disjoint key sets (inserted versus probed).
pub fn url(set: u64, i: u64) -> Vec<u8> {
    let mut x = splitmix(set.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ i);
    let mut next = || {
        x = splitmix(x);
        x
    };
    let tlds = ["com", "org", "net", "io", "de", "co.uk", "fr", "jp"];
    let words = [
        "news", "shop", "blog", "wiki", "docs", "forum", "media", "store", "video", "travel",
        "sports", "cloud", "music", "games", "photos", "health",
    ];
    let host = format!(
        "{}{}.{}",
        words[(next() % 16) as usize],
        next() % 50_000,
        tlds[(next() % 8) as usize]
    );
    let mut u = format!("https://www.{host}/{set}/");
    while u.len() < 60 + (next() % 40) as usize {
        u.push_str(words[(next() % 16) as usize]);
        u.push('/');
    }
    u.push_str(&format!(
        "item-{i}?ref={:x}&page={}",
        next() % 0xffff,
        next() % 100
    ));
    u.truncate(120);
    u.into_bytes()
}

fn splitmix(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

pub fn config(tiers: &[Tier], items_per_day: u64, fpr: f64) -> Config {
    Config {
        tiers: tiers.to_vec(),
        expected_items_per_day: items_per_day,
        fpr,
        ..Config::default()
    }
}

pub fn create(dir: &std::path::Path, cfg: Config, clock: &ManualClock) -> Engine {
    Engine::create_with(dir, cfg, Options::default().clock(clock.clone())).expect("create")
}

pub fn open(dir: &std::path::Path, clock: &ManualClock) -> Engine {
    Engine::open_with(dir, Options::default().clock(clock.clone())).expect("open")
}

/// The file names in `dir/seg`, sorted.
pub fn seg_files(dir: &std::path::Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir.join("seg"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

/// Copies the directory tree `from` into `to` (made if missing), every
/// file but a `LOCK`: the lock belongs to the engine at `from` (perhaps
/// still open in this process); an open of the copy makes its own.
pub fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let p = e.path();
        if p.is_dir() {
            copy_tree(&p, &to.join(e.file_name()));
        } else if e.file_name() != "LOCK" {
            std::fs::copy(&p, to.join(e.file_name())).unwrap();
        }
    }
}

/// Every file under `dir` with its bytes and modification time, by path:
/// equal before and after something that must write nothing.
pub fn snapshot(dir: &std::path::Path) -> Vec<(std::path::PathBuf, Vec<u8>, SystemTime)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let m = std::fs::metadata(&p).unwrap().modified().unwrap();
                out.push((p.clone(), std::fs::read(&p).unwrap(), m));
            }
        }
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// Runs `f` (an open for writing, or a create) again while it fails with
/// a `Locked` that no writer causes: in a test binary whose tests start
/// child processes, a child spawned while this process had the directory
/// open holds a copy of the lock's descriptor until it execs (descriptors
/// close on exec, not on fork), so an engine just closed may read as
/// locked for a moment. A `Locked` that lasts a second is a real one: it
/// is returned.
pub fn past_spawns<T>(mut f: impl FnMut() -> timebloom::Result<T>) -> timebloom::Result<T> {
    let mut tries = 0;
    loop {
        match f() {
            Err(timebloom::Error::Locked { .. }) if tries < 100 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(10));
            }
            r => return r,
        }
    }
}

/// [`Engine::open_with`] through [`past_spawns`].
pub fn open_past_spawns(dir: &std::path::Path, opts: Options) -> timebloom::Result<Engine> {
    past_spawns(|| Engine::open_with(dir, opts.clone()))
}

/// A kill -9 test's child: the engine in `dir` opened (through
/// [`past_spawns`]), or created with `config` when there is none yet, and
/// `dir/ack.log` opened for appending, where the child writes a line for
/// each key once acknowledged.
pub fn open_or_create_with_ack(
    dir: &std::path::Path,
    config: impl FnOnce() -> Config,
    opts: Options,
) -> (Engine, std::fs::File) {
    let e = match open_past_spawns(dir, opts.clone()) {
        Ok(e) => e,
        Err(timebloom::Error::NotFound { .. }) => Engine::create_with(dir, config(), opts).unwrap(),
        Err(e) => panic!("child open: {e}"),
    };
    let ack = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join("ack.log"))
        .unwrap();
    (e, ack)
}

/// A kill during the child's append to `ack.log` (see
/// [`open_or_create_with_ack`]) can leave the last line torn (a write
/// crossing a page boundary returns short when SIGKILL is pending): a
/// prefix of an id, to which the next child's first id would be glued
/// into a number that was never inserted. The torn line is cut; every
/// complete line is still checked.
pub fn drop_torn_ack(dir: &std::path::Path) {
    let path = dir.join("ack.log");
    let Ok(bytes) = std::fs::read(&path) else {
        return;
    };
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    if keep < bytes.len() {
        let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
        f.set_len(keep as u64).unwrap();
    }
}

/// Whether a writer whose clock is on day `w` since T0 (a Monday) has
/// expired the keys it inserted on day `d`, for the two tier sets the
/// read-only tests beside a rotating writer use: a 3-day fingerprint
/// table keeps the 2 days before today; daily(3) with weekly(2) keeps a
/// key until its week is two weeks old. A reader asked about day `d`
/// reads what the writer keeps (docs/operations.md, "Read-only opens").
pub fn expired_by_writer_day(tiers: &[Tier], d: u64, w: u64) -> bool {
    match tiers[0].kind == timebloom::Kind::Fingerprint {
        true => w >= d + 3,
        false => w >= 7 * (d / 7 + 2),
    }
}
