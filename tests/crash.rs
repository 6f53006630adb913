//! Guards promise 1 and 4 of RELIABILITY under process crashes: a writer
//! killed with SIGKILL at random moments, including during rotation, chain
//! growth and expiry, loses no acknowledged key, and the directory always
//! reopens. One configuration has Bloom tiers only; the other a fingerprint
//! table beside them, planned small so that it kicks entries and grows its
//! chain within a few rounds.
//!
//! The test re-runs its own binary as a child (`crash_child`), which inserts
//! keys and appends their ids to an acknowledgement log only after the
//! engine returned. The parent kills it, and after every few rounds reopens
//! the engine and checks every acknowledged key.

mod common;

use std::io::{Read, Seek, SeekFrom, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use timebloom::{Config, ManualClock, Options, SyncPolicy, Tier};

const DIR_ENV: &str = "TIMEBLOOM_CRASH_DIR";
const START_ENV: &str = "TIMEBLOOM_CRASH_START";
const ROUND_ENV: &str = "TIMEBLOOM_CRASH_ROUND";
const SYNC_ENV: &str = "TIMEBLOOM_CRASH_SYNC";
const TABLE_ENV: &str = "TIMEBLOOM_CRASH_TABLE";
const SMALL_LOG_ENV: &str = "TIMEBLOOM_CRASH_SMALL_LOG";

fn crash_config(table: bool) -> Config {
    // Small windows (3 hours) and a small plan, so rotation, growth and
    // expiry all happen within a round.
    let window = Tier::custom(Duration::from_secs(3 * 3600), 4);
    if table {
        // A 3-day table planned for 2,000 keys a day: full (kicks, then
        // growth) after about 6,000.
        return config(&[window, Tier::fingerprint(3)], 2_000, 0.01);
    }
    config(&[window, Tier::daily(3)], 20_000, 0.01)
}

/// The child: runs only when the parent sets the environment.
#[test]
fn crash_child() {
    let (Ok(dir), Ok(start), Ok(round)) = (
        std::env::var(DIR_ENV),
        std::env::var(START_ENV),
        std::env::var(ROUND_ENV),
    ) else {
        return;
    };
    let dir = std::path::PathBuf::from(dir);
    let round: u64 = round.parse().unwrap();
    let sync: SyncPolicy = std::env::var(SYNC_ENV).unwrap().parse().unwrap();
    let table = std::env::var_os(TABLE_ENV).is_some();
    let clock = ManualClock::new(at(start.parse().unwrap()));
    // Every sealed window is rewritten in large pages, however small: the
    // kills land in those copies and renames too.
    timebloom::testing::set_rewrite_from(Some(0));
    let mut opts = Options::default().clock(clock.clone()).sync(sync);
    if std::env::var_os(SMALL_LOG_ENV).is_some() {
        // A checkpoint every 200 records: Bloom tiers checkpoint beside the
        // writers all the time, and the kills land in them.
        opts = opts.checkpoint_log_bytes(200 * 40);
    }
    let config = || Config {
        sync,
        ..crash_config(table)
    };
    let (e, mut ack) = open_or_create_with_ack(&dir, config, opts);
    for batch in 0u64.. {
        let ids: Vec<u64> = (0..64)
            .map(|j| round * 100_000_000 + batch * 64 + j)
            .collect();
        let keys: Vec<Vec<u8>> = ids.iter().map(|&i| url(3, i)).collect();
        if batch % 2 == 0 {
            e.insert_batch(&keys).unwrap();
        } else {
            for k in &keys {
                e.insert(k).unwrap();
            }
        }
        let mut line = String::new();
        for i in ids {
            line.push_str(&format!("{i}\n"));
        }
        ack.write_all(line.as_bytes()).unwrap(); // acknowledged only now
        clock.advance(Duration::from_secs(20));
    }
}

/// What a round's child runs: the sync policy, a fingerprint table beside
/// the Bloom tier, a small log (checkpoints all the time).
#[derive(Clone, Copy)]
struct Setup {
    sync: SyncPolicy,
    table: bool,
    small_log: bool,
}

/// The keys a child acknowledged in `ack.log` past its first `from`
/// bytes (complete lines only).
fn acked_since(dir: &std::path::Path, from: u64) -> u64 {
    let mut tail = Vec::new();
    if let Ok(mut f) = std::fs::File::open(dir.join("ack.log")) {
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let _ = f.read_to_end(&mut tail);
        }
    }
    tail.iter().filter(|&&b| b == b'\n').count() as u64
}

/// Runs a round's child and kills it (SIGKILL) after `kill_after`, or
/// later, once it has acknowledged `min_acked` keys (a busy machine may
/// take longer than `kill_after` to start a child, or to sync its keys;
/// at most 60 s past `kill_after`, or until the child ends by itself).
fn run_child(
    dir: &std::path::Path,
    setup: Setup,
    start: u64,
    round: u64,
    kill_after: Duration,
    min_acked: u64,
) {
    let from = std::fs::metadata(dir.join("ack.log")).map_or(0, |m| m.len());
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    if setup.table {
        cmd.env(TABLE_ENV, "1");
    }
    if setup.small_log {
        cmd.env(SMALL_LOG_ENV, "1");
    }
    let sync = setup.sync;
    let mut child = cmd
        .args(["--exact", "crash_child", "--nocapture", "--test-threads=1"])
        .env(DIR_ENV, dir)
        .env(SYNC_ENV, sync.to_string())
        .env(START_ENV, start.to_string())
        .env(ROUND_ENV, round.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(kill_after);
    let t = Instant::now();
    while acked_since(dir, from) < min_acked
        && t.elapsed() < Duration::from_secs(60)
        && child.try_wait().unwrap().is_none()
    {
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill().unwrap(); // SIGKILL
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "child panicked: {err}");
    drop_torn_ack(dir);
}

/// The instant at which the child of a round inserted acknowledged key
/// `id`: its round's start and 20 s of clock per 64-key batch before it.
fn inserted_at(starts: &[u64], id: u64) -> u64 {
    let (round, n) = (id / 100_000_000, id % 100_000_000);
    starts[round as usize] + (n / 64) * 20
}

/// Reopens at `now` and checks every acknowledged key inserted within the
/// last two days before it: the 3-day tiers keep today and the two days
/// before (older keys may rightly have expired; they are counted, not
/// checked). `as_after_power_loss` recovers from the log alone (counting
/// shadows restored, every record replayed) instead of trusting the page
/// cache. Returns the keys checked and the longest chain of the 3-day tier.
fn check_acknowledged(
    dir: &std::path::Path,
    starts: &[u64],
    now: u64,
    as_after_power_loss: bool,
) -> (usize, usize) {
    let clock = ManualClock::new(at(now));
    let opts = Options::default()
        .clock(clock)
        .assume_power_loss(as_after_power_loss);
    let e = open_past_spawns(dir, opts).expect("reopen after kill -9");
    e.verify().expect("sealed segments verify after kill -9");
    let log = std::fs::read_to_string(dir.join("ack.log")).unwrap_or_default();
    let first_kept_day = (now / 86_400).saturating_sub(2);
    let mut n = 0;
    for line in log.lines() {
        let i: u64 = line.parse().unwrap();
        if inserted_at(starts, i) / 86_400 < first_kept_day {
            continue;
        }
        assert!(e.contains(&url(3, i)).unwrap(), "acknowledged key {i} lost");
        n += 1;
    }
    let chain = e.stats().unwrap().tiers[1]
        .segments
        .iter()
        .map(|s| s.subfilters)
        .max()
        .unwrap_or(0);
    (n, chain)
}

/// Where the clock of the child of `round` (started at `start`) may have
/// got to: 20 s past the last batch it acknowledged, and one batch more
/// that it may have written unacknowledged.
fn reached(dir: &std::path::Path, round: u64, start: u64) -> u64 {
    let log = std::fs::read_to_string(dir.join("ack.log")).unwrap_or_default();
    let last = log
        .lines()
        .filter_map(|l| l.parse::<u64>().ok())
        .filter(|i| i / 100_000_000 == round)
        .map(|i| (i % 100_000_000) / 64)
        .max();
    last.map_or(start, |b| start + (b + 2) * 20)
}

/// Rounds of kill -9; `TIMEBLOOM_FULL=1` runs `full` of them. A writer
/// starts where the writers before it may have got to (at least 2 hours
/// later), so windows rotate and expire across crashes; but the second of
/// every four starts 54 hours behind that, a clock stepped back across a
/// crash (two days or more, past the one a table's tags tolerate by
/// themselves). Every
/// 12 rounds start over in a new directory (the acknowledgement log stays
/// small enough to check whole).
fn kill_rounds(setup: Setup, quick: u64, full: u64) {
    let Setup { sync, table, .. } = setup;
    let mut dir = tempfile::tempdir().unwrap();
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    // Three days after T0, so that a writer can start days behind.
    let first = T0 + 3 * 86_400;
    let mut start = first;
    // The latest clock any writer may have reached.
    let mut newest = first;
    // The start of every round's writer, by round (ids carry the round).
    let mut starts = Vec::new();
    let rounds = if std::env::var_os("TIMEBLOOM_FULL").is_some() {
        full
    } else {
        quick
    };
    let mut total = 0;
    let mut longest = 0;
    let mut round = 0;
    // Whether a writer that did not start behind acknowledged keys since
    // the last check: a check needs keys of the last two days.
    let mut fresh = false;
    // A table must have grown by the last round; on a slow disk (`always`
    // syncs every insert) a round acknowledges fewer keys, so a table that
    // has not grown yet gets more rounds, each writing for longer and
    // checked, until it does (at most 8). Each of those writes for 3 s and
    // at least 2,000 keys: more than the table holds within 8 rounds,
    // whatever the speed of the disk.
    while round < rounds || (table && longest < 2 && round < rounds + 8) {
        let extra = round >= rounds;
        if round > 0 && round % 12 == 0 && !extra {
            dir = tempfile::tempdir().unwrap();
            start = first;
            newest = first;
        }
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        // Now and then a kill within the first milliseconds: during the
        // open's recovery and its checkpoint.
        let kill_after = if extra {
            Duration::from_secs(3)
        } else if rng.is_multiple_of(5) {
            Duration::from_millis(2 + rng % 40)
        } else {
            Duration::from_millis(100 + rng % 400)
        };
        // Only behind a writer that acknowledged keys: one killed before its
        // engine had windows leaves the stepped-back writer to create them,
        // and the next writer's step forward would rightly be refused as a
        // clock jump that expires every window at once.
        let acked = std::fs::metadata(dir.path().join("ack.log")).is_ok_and(|m| m.len() > 0);
        let behind = if round % 4 == 1 && acked && !extra {
            54 * 3600
        } else {
            0
        };
        let child = start - behind;
        starts.push(child);
        let check = round % 4 == 3 || round + 1 >= rounds;
        // A check needs keys of the last two days: if no writer since the
        // last check (not started behind) acknowledged one, as when the
        // kills came before the writers were up (a busy machine starts
        // them slowly), the writer of the check's round is killed only
        // once it has.
        let min_acked = if extra {
            2_000
        } else {
            u64::from(check && !fresh)
        };
        let ack_bytes = std::fs::metadata(dir.path().join("ack.log")).map_or(0, |m| m.len());
        run_child(dir.path(), setup, child, round, kill_after, min_acked);
        if behind == 0 && acked_since(dir.path(), ack_bytes) > 0 {
            fresh = true;
        }
        newest = newest.max(reached(dir.path(), round, child));
        start = newest.max(start + 2 * 3600);
        if check {
            fresh = false;
            let (n, chain) = check_acknowledged(dir.path(), &starts, start, false);
            assert!(n > 0, "the child acknowledged nothing");
            total += n;
            longest = longest.max(chain);
            if sync == SyncPolicy::Always {
                // Everything acknowledged is in the durable log: a recovery
                // that trusts only the log and the checkpoint finds it too.
                check_acknowledged(dir.path(), &starts, start, true);
            }
        }
        round += 1;
    }
    println!(
        "{sync}, table {table}, small log {}: {round} rounds, {total} acknowledged keys checked \
         (each check counts all so far within the retention); clock at the end {} h past the \
         start; longest chain of the second tier: {longest}",
        setup.small_log,
        (start - first) / 3600
    );
    if table {
        // The table filled and grew under the kills: relocations and
        // growth were exercised, not only plain inserts.
        assert!(longest >= 2, "the table never grew ({longest})");
    }
}

#[test]
fn kill_9_loses_no_acknowledged_key() {
    if std::env::var(DIR_ENV).is_ok() {
        return;
    }
    kill_rounds(
        Setup {
            sync: SyncPolicy::default(),
            table: false,
            small_log: false,
        },
        12,
        40,
    );
}

#[test]
fn kill_9_under_sync_always_loses_nothing_and_recovers_from_the_log() {
    if std::env::var(DIR_ENV).is_ok() {
        return;
    }
    kill_rounds(
        Setup {
            sync: SyncPolicy::Always,
            table: false,
            small_log: false,
        },
        12,
        100,
    );
}

#[test]
fn kill_9_under_sync_none_loses_nothing() {
    if std::env::var(DIR_ENV).is_ok() {
        return;
    }
    kill_rounds(
        Setup {
            sync: SyncPolicy::None,
            table: false,
            small_log: false,
        },
        8,
        40,
    );
}

#[test]
fn kill_9_with_a_fingerprint_table_loses_no_acknowledged_key() {
    if std::env::var(DIR_ENV).is_ok() {
        return;
    }
    kill_rounds(
        Setup {
            sync: SyncPolicy::default(),
            table: true,
            small_log: false,
        },
        12,
        40,
    );
}

#[test]
fn kill_9_with_a_fingerprint_table_under_sync_always_recovers_from_the_log() {
    if std::env::var(DIR_ENV).is_ok() {
        return;
    }
    kill_rounds(
        Setup {
            sync: SyncPolicy::Always,
            table: true,
            small_log: false,
        },
        12,
        100,
    );
}

#[test]
fn kill_9_during_checkpoints_beside_the_writers_loses_nothing() {
    if std::env::var(DIR_ENV).is_ok() {
        return;
    }
    for sync in [SyncPolicy::Always, SyncPolicy::default()] {
        kill_rounds(
            Setup {
                sync,
                table: false,
                small_log: true,
            },
            12,
            60,
        );
    }
}
