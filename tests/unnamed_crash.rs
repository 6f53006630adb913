//! An open deletes the files in `seg/` its manifest does not name, but
//! refuses the directory when such a file lies past what the manifest names
//! and holds keys (a MANIFEST put back alone). No crash of a writer may
//! leave such a file: these tests crash writers (SIGKILL at random moments
//! across day, week and month boundaries, chain growth, backfills and
//! expiry; an exit in the middle of a degraded open) under each sync
//! policy, and check that every reopen succeeds and keeps every
//! acknowledged key.
//!
//! The tests re-run their own binary as a child (`unnamed_child`), which
//! does what the environment asks and is killed or exits mid-operation.

mod common;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use common::*;
use timebloom::{parse_tiers, Engine, Error, ManualClock, Options, SyncPolicy};

const MODE_ENV: &str = "TIMEBLOOM_UNNAMED_MODE";
const DIR_ENV: &str = "TIMEBLOOM_UNNAMED_DIR";
const NOW_ENV: &str = "TIMEBLOOM_UNNAMED_NOW";
const ROUND_ENV: &str = "TIMEBLOOM_UNNAMED_ROUND";
const SYNC_ENV: &str = "TIMEBLOOM_UNNAMED_SYNC";
const TIERS_ENV: &str = "TIMEBLOOM_UNNAMED_TIERS";

const POLICIES: [&str; 3] = ["none", "interval=50ms", "always"];

fn sync_policy(s: &str) -> SyncPolicy {
    s.parse().unwrap()
}

/// Clock seconds a child's batch of keys moves: 25 minutes, so that day
/// boundaries (and their ahead-of-boundary windows) come every 58 batches.
const STEP: u64 = 1500;
/// Keys a batch inserts.
const BATCH: u64 = 16;

/// The child: runs only when the parent sets the environment.
#[test]
fn unnamed_child() {
    let Ok(mode) = std::env::var(MODE_ENV) else {
        return;
    };
    let dir = std::path::PathBuf::from(std::env::var(DIR_ENV).unwrap());
    let now: u64 = std::env::var(NOW_ENV).unwrap().parse().unwrap();
    let sync = sync_policy(&std::env::var(SYNC_ENV).unwrap());
    let clock = ManualClock::new(at(now));
    let opts = Options::default().clock(clock.clone()).sync(sync);
    match mode.as_str() {
        // A degraded open that exits as it deletes the files of the
        // windows it left out (the manifest without them is stored).
        "degraded" => {
            timebloom::testing::set_fault_hook(Some(Box::new(|op, _| {
                if op == "remove leftover file" {
                    std::process::abort();
                }
                None
            })));
            let _ = open_past_spawns(&dir, opts.degraded(true));
        }
        "writer" => writer(&dir, &clock, opts, sync),
        m => panic!("unknown mode {m}"),
    }
}

/// Inserts batches of keys, now and backfilled, advancing the clock a
/// `STEP` per batch; each key's id goes to `ack.log` once acknowledged,
/// with the instant it was inserted at.
fn writer(dir: &Path, clock: &ManualClock, opts: Options, sync: SyncPolicy) {
    let round: u64 = std::env::var(ROUND_ENV).unwrap().parse().unwrap();
    let tiers = parse_tiers(&std::env::var(TIERS_ENV).unwrap()).unwrap();
    timebloom::testing::set_rewrite_from(Some(0));
    let cfg = || timebloom::Config {
        sync,
        ..config(&tiers, 150, 0.01)
    };
    let (e, mut ack) = open_or_create_with_ack(dir, cfg, opts);
    for batch in 0u64.. {
        let now = clock.now_secs_for_test();
        let mut line = String::new();
        for j in 0..BATCH {
            let id = round * 100_000_000 + batch * BATCH + j;
            // Every fourth key backfilled 1 to 3 days back (into sealed
            // past windows, or windows a backfill creates).
            let t = if j % 4 == 3 {
                now - 86_400 * (1 + (id % 3))
            } else {
                now
            };
            let r = if t == now {
                e.insert(&url(5, id)).map(|_| ())
            } else {
                e.insert_at(&url(5, id), at(t)).map(|_| ())
            };
            match r {
                Ok(()) => line.push_str(&format!("{id} {t}\n")),
                // A backfill to a window the tiers no longer keep.
                Err(Error::WindowUnavailable { .. }) => {}
                Err(err) => panic!("insert: {err}"),
            }
        }
        ack.write_all(line.as_bytes()).unwrap(); // acknowledged only now
        clock.advance(Duration::from_secs(STEP));
    }
}

trait NowSecs {
    fn now_secs_for_test(&self) -> u64;
}

impl NowSecs for ManualClock {
    fn now_secs_for_test(&self) -> u64 {
        use timebloom::Clock;
        self.now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs()
    }
}

fn child(dir: &Path, mode: &str, now: u64, sync: &str) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        "--exact",
        "unnamed_child",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(MODE_ENV, mode)
    .env(DIR_ENV, dir)
    .env(NOW_ENV, now.to_string())
    .env(SYNC_ENV, sync)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    cmd
}

fn opts_at(now: u64) -> Options {
    Options::default().clock(ManualClock::new(at(now)))
}

/// The first file of the chain of the window `label` in `dir/seg` (a
/// chain of two or more), which the tests remove so that a degraded open
/// loses the window while its later files stay.
fn first_of_chain(dir: &Path, label: &str) -> String {
    let files: Vec<String> = seg_files(dir)
        .into_iter()
        .filter(|f| f.contains(&format!("-{label}-")))
        .collect();
    assert!(files.len() >= 2, "window {label}: chain {files:?}");
    files[0].clone()
}

/// A degraded open that lost a window (its chain's first file missing)
/// and exited while it deleted the window's other files, after its
/// manifest stopped naming them: the next open goes on (the files are
/// the lost window's, not keys a manifest put back alone would lose),
/// and keeps the keys of the windows it did not lose.
fn degraded_exit(tiers: &str, sync: &str, lost_day: u64, reopen_day: u64) {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // A window before the lost one, still named when the reopen's clock
    // has expired it (and the lost one's entry in the manifest).
    let clock = ManualClock::new(day(lost_day - 1));
    let mut cfg = config(&parse_tiers(tiers).unwrap(), 200, 0.01);
    cfg.sync = sync_policy(sync);
    let e = Engine::create_with(d, cfg, Options::default().clock(clock.clone())).unwrap();
    let kept: Vec<Vec<u8>> = (0..100).map(|i| url(1, i)).collect();
    e.insert_batch(&kept).unwrap();
    clock.set(day(lost_day));
    // Enough keys that the lost day's chain grows.
    let lost: Vec<Vec<u8>> = (0..1_500).map(|i| url(2, i)).collect();
    e.insert_batch(&lost).unwrap();
    clock.set(day(lost_day + 1));
    let today: Vec<Vec<u8>> = (0..100).map(|i| url(3, i)).collect();
    e.insert_batch(&today).unwrap();
    e.close().unwrap();
    // Days are labelled YYYYMMDD; day 0 is 2026-01-05.
    let label = format!("202601{:02}", 5 + lost_day);
    let first = first_of_chain(d, &label);
    std::fs::remove_file(d.join("seg").join(&first)).unwrap();

    let now = T0 + (lost_day + 1) * 86_400 + 13 * 3600;
    let out = child(d, "degraded", now, sync).output().unwrap();
    assert!(
        !out.status.success(),
        "the degraded open was to exit while deleting: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reopen = T0 + reopen_day * 86_400 + 13 * 3600;
    let e = open_past_spawns(d, opts_at(reopen)).unwrap_or_else(|err| {
        panic!(
            "{tiers} ({sync}): reopen after a degraded open that exited: {err}\nseg/: {:?}",
            seg_files(d)
        )
    });
    if reopen_day == lost_day + 1 {
        for k in today.iter() {
            assert!(e.contains(k).unwrap(), "{tiers} ({sync}): today's key lost");
        }
    }
    e.close().unwrap();
    if !tiers.contains(',') {
        // One tier: the degraded open's manifest listed the lost window
        // until its files were gone; the reopen deleted them and wrote
        // the manifest again without the list (the version older builds
        // read).
        let manifest = std::fs::read(d.join("MANIFEST")).unwrap();
        let body = String::from_utf8_lossy(&manifest[20..]).into_owned();
        assert!(!body.contains("\"lost\""), "{tiers} ({sync}): {body}");
    }
}

#[test]
fn a_degraded_open_exiting_as_it_deletes_a_lost_window_one_tier() {
    for sync in POLICIES {
        degraded_exit("7d", sync, 2, 3);
    }
}

#[test]
fn a_degraded_open_exiting_as_it_deletes_a_lost_window_two_tiers() {
    for sync in POLICIES {
        degraded_exit("3d,4w", sync, 2, 3);
    }
}

/// Two tiers: the lost window's entry in the manifest has expired by the
/// reopen, whose own expiry (of the windows around it) runs only after
/// the leftovers are deleted.
#[test]
fn a_degraded_open_exiting_as_it_deletes_a_lost_window_reopened_after_its_expiry() {
    for sync in POLICIES {
        degraded_exit("3d,4w", sync, 2, 5);
    }
}

/// The acknowledged keys: `(id, instant)`, complete lines only.
fn acked(dir: &Path) -> Vec<(u64, u64)> {
    let log = std::fs::read_to_string(dir.join("ack.log")).unwrap_or_default();
    let mut v = Vec::new();
    for line in log.lines() {
        let mut it = line.split(' ');
        if let (Some(Ok(i)), Some(Ok(t))) = (
            it.next().map(str::parse::<u64>),
            it.next().map(str::parse::<u64>),
        ) {
            v.push((i, t));
        }
    }
    v
}

/// Rounds of writers killed (SIGKILL) at random moments, starting on
/// Friday 2026-01-30, so that the writers cross day, week (Monday
/// 2026-02-02) and month (2026-02-01) boundaries, the windows created
/// ahead of them, chain growth (150 keys a day planned) and backfills;
/// after every round the directory reopens (no file refused) and every
/// acknowledged key of the last two days reads present.
fn kill_rounds(tiers: &str, rounds: u64) {
    let started = Instant::now();
    for (p, sync) in POLICIES.iter().enumerate() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        let mut rng = 0x2545_f491_4f6c_dd1du64 ^ ((p as u64 + 1) * 0x9e37_79b9);
        let mut newest = T0 + 25 * 86_400 + 20 * 3600;
        let mut checked = 0;
        for round in 0..rounds {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let kill_after = Duration::from_millis(if rng.is_multiple_of(5) {
                2 + rng % 30
            } else {
                60 + rng % 300
            });
            let mut c = child(d, "writer", newest, sync)
                .env(ROUND_ENV, round.to_string())
                .env(TIERS_ENV, tiers)
                .spawn()
                .unwrap();
            std::thread::sleep(kill_after);
            c.kill().unwrap(); // SIGKILL
            let out = c.wait_with_output().unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!err.contains("panicked"), "child panicked: {err}");
            drop_torn_ack(d);
            let keys = acked(d);
            // Where the writer's clock may have got to: a batch past the
            // last it acknowledged.
            let reached = keys
                .iter()
                .filter(|(i, _)| i / 100_000_000 == round)
                .map(|&(_, t)| t + 2 * STEP)
                .max()
                .unwrap_or(newest);
            newest = newest.max(reached);
            let what = format!("{tiers} ({sync}) round {round}");
            let Some(e) = reopen_after_kill(d, newest, &keys, &what) else {
                continue;
            };
            let from_day = (newest / 86_400).saturating_sub(2);
            for &(i, t) in keys.iter().filter(|(_, t)| t / 86_400 >= from_day) {
                assert!(
                    e.contains(&url(5, i)).unwrap(),
                    "{tiers} ({sync}) round {round}: acknowledged key {i} (at {t}) lost"
                );
                checked += 1;
            }
            e.close().unwrap();
        }
        eprintln!("{tiers} ({sync}): {checked} keys checked, up to {newest}");
        assert!(
            checked > 0,
            "{tiers} ({sync}): no writer acknowledged a key"
        );
    }
    assert!(started.elapsed() < Duration::from_secs(120));
}

/// The directory a writer killed by `kill_rounds` left, opened again; `None`
/// when the writer was killed before its create wrote the first manifest
/// (a kill a few milliseconds after the start, on a busy machine): then
/// there is no engine yet (docs/operations.md, "Creating"), so no key
/// can have been acknowledged. Any other failure to open fails the test.
fn reopen_after_kill(d: &Path, newest: u64, keys: &[(u64, u64)], what: &str) -> Option<Engine> {
    match open_past_spawns(d, opts_at(newest)) {
        Ok(e) => Some(e),
        Err(Error::NotFound { .. }) if keys.is_empty() && !d.join("MANIFEST").exists() => None,
        Err(err) => {
            let listing = |p: &Path| {
                std::fs::read_dir(p).map(|r| {
                    let mut v: Vec<String> = r
                        .flatten()
                        .map(|e| e.file_name().to_string_lossy().into_owned())
                        .collect();
                    v.sort();
                    v
                })
            };
            panic!(
                "{what}: reopen after kill -9: {err}\ndirectory: {:?}\nseg/: {:?}",
                listing(d),
                listing(&d.join("seg"))
            )
        }
    }
}

/// A writer killed before it made the engine leaves nothing that opens
/// (at most a `LOCK`, an empty `seg/` and a `MANIFEST.tmp`): that is no
/// failure of the reopen, and the next writer creates the engine there.
#[test]
fn a_writer_killed_before_its_create_leaves_nothing_to_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let newest = T0 + 25 * 86_400 + 20 * 3600;
    let mut c = child(d, "writer", newest, "always")
        .env(ROUND_ENV, "0")
        .env(TIERS_ENV, "3d,4w:counting")
        .spawn()
        .unwrap();
    c.kill().unwrap(); // at once: before the child's create, as a rule
    c.wait().unwrap();
    drop_torn_ack(d);
    let keys = acked(d);
    if let Some(e) = reopen_after_kill(d, newest, &keys, "killed at once") {
        e.close().unwrap();
    }
    // The next writer creates the engine (or opens the one made) and
    // acknowledges keys, which a reopen finds.
    let mut c = child(d, "writer", newest, "always")
        .env(ROUND_ENV, "1")
        .env(TIERS_ENV, "3d,4w:counting")
        .spawn()
        .unwrap();
    let started = Instant::now();
    while acked(d).is_empty() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
    }
    c.kill().unwrap();
    c.wait().unwrap();
    drop_torn_ack(d);
    let keys = acked(d);
    assert!(!keys.is_empty(), "the second writer acknowledged no key");
    // Where the writer's clock may have got to: a batch past its last.
    let reached = keys
        .iter()
        .map(|&(_, t)| t + 2 * STEP)
        .max()
        .unwrap_or(newest);
    let e = reopen_after_kill(d, reached, &keys, "second writer").expect("an engine to reopen");
    for &(i, _) in &keys {
        assert!(e.contains(&url(5, i)).unwrap(), "acknowledged key {i} lost");
    }
    e.close().unwrap();
}

#[test]
fn kill_9_across_boundaries_and_growth_bloom() {
    kill_rounds("3d,4w,3m", 5);
}

#[test]
fn kill_9_across_boundaries_and_growth_counting() {
    kill_rounds("3d,4w:counting", 5);
}

#[test]
fn kill_9_across_boundaries_and_growth_fingerprint() {
    kill_rounds("3d,30d:fingerprint", 5);
}

#[test]
fn kill_9_across_boundaries_and_growth_one_tier() {
    kill_rounds("7d", 5);
}
