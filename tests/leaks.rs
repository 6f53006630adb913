//! Guards against resource leaks over long runs: many open/close cycles of
//! one directory, long runs of rotations in one open engine, and opens that
//! fail part way leave no descriptors, mappings or threads behind, and
//! expired windows' files are unmapped, closed and deleted.
//!
//! Counts are read from `/proc/self`: descriptors and mappings of files
//! below the test's own directory (other tests of this binary use their
//! own), and the engine's threads by name. The tests that count threads
//! run one at a time (`SERIAL`).

#![cfg(target_os = "linux")]

mod common;

use std::fs;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::*;
use timebloom::{Config, Engine, Error, ManualClock, Options, SyncPolicy, Tier};

/// Thread counts are the process's: one counting test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// Descriptors of this process open on files below `dir`.
fn fds_below(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap();
    let mut out = Vec::new();
    for e in fs::read_dir("/proc/self/fd").unwrap().flatten() {
        if let Ok(target) = fs::read_link(e.path()) {
            if target.starts_with(&dir) {
                out.push(target.display().to_string());
            }
        }
    }
    out.sort();
    out
}

/// Mappings of this process of files below `dir` (a deleted file's name
/// ends in ` (deleted)`).
fn maps_below(dir: &Path) -> Vec<String> {
    let dir = dir.canonicalize().unwrap().display().to_string();
    let maps = fs::read_to_string("/proc/self/maps").unwrap();
    let mut out: Vec<String> = maps
        .lines()
        .filter_map(|l| l.find('/').map(|i| &l[i..]))
        .filter(|p| p.starts_with(&dir))
        .map(str::to_owned)
        .collect();
    out.sort();
    out
}

/// The names of this process's threads that the engine started.
fn engine_threads() -> Vec<String> {
    let mut out = Vec::new();
    for e in fs::read_dir("/proc/self/task").unwrap().flatten() {
        if let Ok(name) = fs::read_to_string(e.path().join("comm")) {
            let name = name.trim().to_owned();
            if name.starts_with("timebloom") {
                out.push(name);
            }
        }
    }
    out.sort();
    out
}

/// Waits up to 10 s for `f` to return true (engine threads that end by
/// themselves, such as `timebloom-release`, end shortly after).
fn eventually(mut f: impl FnMut() -> bool) -> bool {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        if f() {
            return true;
        }
        if Instant::now() > until {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Nothing below `dir` is open once its engine is closed (or its open
/// failed), and nothing mapped nor any engine thread running shortly
/// after: `what` names the case.
fn assert_released(dir: &Path, what: &str) {
    assert!(
        fds_below(dir).is_empty(),
        "{what}: descriptors left open: {:?}",
        fds_below(dir)
    );
    assert!(
        eventually(|| maps_below(dir).is_empty() && engine_threads().is_empty()),
        "{what}: left mapped {:?}, threads {:?}",
        maps_below(dir),
        engine_threads()
    );
}

/// The process's total descriptor count.
fn all_fds() -> usize {
    fs::read_dir("/proc/self/fd").unwrap().count()
}

fn small(tiers: &[Tier]) -> Config {
    config(tiers, 1000, 0.01)
}

/// A new engine at `e.tb` in a temporary directory, its clock at day 0,
/// made with `cfg` and the options `opts` adds to that clock.
fn fresh(
    cfg: Config,
    opts: impl FnOnce(Options) -> Options,
) -> (tempfile::TempDir, std::path::PathBuf, ManualClock, Engine) {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = Engine::create_with(&dir, cfg, opts(Options::default().clock(clock.clone()))).unwrap();
    (tmp, dir, clock, e)
}

/// Opens the writer of `dir` on `clock`, with `policy`.
fn open_writer(dir: &Path, clock: &ManualClock, policy: SyncPolicy) -> Engine {
    open_past_spawns(dir, Options::default().clock(clock.clone()).sync(policy)).expect("open")
}

/// Hundreds of open, insert, rotate, close cycles of one directory, with a
/// read-only engine beside the writer, handles cloned into threads, and
/// every other engine dropped without `close`: nothing stays open once the
/// engines are gone.
#[test]
fn open_insert_rotate_close_cycles_leave_nothing_open() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    create(&dir, small(&[Tier::daily(3), Tier::weekly(2)]), &clock)
        .close()
        .unwrap();
    let policies = [SyncPolicy::None, SyncPolicy::Always];
    let mut base = None;
    for cycle in 0..80u64 {
        clock.set(day(cycle));
        let policy = policies[cycle as usize % 2];
        let e = open_writer(&dir, &clock, policy);
        let ro = Engine::open_read_only_with(&dir, Options::default().clock(clock.clone()))
            .expect("read-only open");
        std::thread::scope(|s| {
            let h = e.handle();
            for t in 0..2u64 {
                let mut h = h.clone();
                s.spawn(move || {
                    for i in 0..50 {
                        h.insert(&url(cycle * 10 + t, i)).unwrap();
                    }
                });
            }
        });
        // Minutes before midnight (the next windows are created ahead),
        // then into the next day: a rotation in this open; or a close
        // before it, which deletes the windows created ahead.
        clock.set(day(cycle) + Duration::from_secs(12 * 3600 - 300));
        e.insert(b"late").unwrap();
        if cycle % 4 != 1 {
            clock.set(day(cycle + 1));
            e.insert(&url(cycle, 1_000)).unwrap();
        } else {
            // Let the thread creating them get there.
            std::thread::sleep(Duration::from_millis(20));
        }
        assert!(ro.contains(&url(cycle * 10, 0)).unwrap());
        if cycle % 3 == 0 {
            drop(ro);
            drop(e);
        } else {
            ro.close().unwrap();
            e.close().unwrap();
        }
        assert_released(&dir, &format!("cycle {cycle}"));
        assert!(
            seg_files(&dir).len() <= 6,
            "cycle {cycle}: {:?}",
            seg_files(&dir)
        );
        if cycle == 10 {
            base = Some((all_fds(), rss_kib()));
        }
    }
    let (fds0, rss0) = base.unwrap();
    let (fds1, rss1) = (all_fds(), rss_kib());
    assert!(fds1 <= fds0 + 4, "descriptors grew {fds0} -> {fds1}");
    // 70 cycles of small engines: a leak of even one window's file (about
    // 10 KiB) or of a thread's stack a cycle would show.
    assert!(rss1 <= rss0 + 16 * 1024, "RSS grew {rss0} -> {rss1} KiB");
}

fn rss_kib() -> u64 {
    let status = fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// Opens that fail (the directory locked by a writer; a segment damaged)
/// leave no descriptor, mapping or thread behind.
#[test]
fn failed_opens_leave_nothing_open() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, small(&[Tier::daily(3)]), &clock);
    for i in 0..100 {
        e.insert(&url(1, i)).unwrap();
    }
    clock.set(day(1));
    e.insert(b"today").unwrap();
    let held = (fds_below(&dir), maps_below(&dir));
    for _ in 0..50 {
        let err = Engine::open_with(&dir, Options::default().clock(clock.clone())).unwrap_err();
        assert!(matches!(err, Error::Locked { .. }), "{err}");
        let err =
            Engine::create_with(&dir, small(&[Tier::daily(3)]), Options::default()).unwrap_err();
        drop(err);
    }
    assert_eq!(
        (fds_below(&dir), maps_below(&dir)),
        held,
        "after locked opens"
    );
    e.close().unwrap();
    assert!(eventually(|| engine_threads().is_empty()));

    // A damaged sealed segment: a writer's open moves it to quarantine and
    // fails, a read-only open fails; each on a fresh copy.
    let segs = seg_files(&dir);
    let policies = [
        SyncPolicy::None,
        SyncPolicy::Always,
        SyncPolicy::Interval(Duration::from_millis(5)),
    ];
    for round in 0..30usize {
        let copy = tmp.path().join(format!("copy{}", round % 2));
        let _ = fs::remove_dir_all(&copy);
        copy_tree(&dir, &copy);
        // The sealed window or the open one, damaged in its body and its
        // trailer.
        let seg = copy.join("seg").join(&segs[round % segs.len()]);
        let mut bytes = fs::read(&seg).unwrap();
        let mid = bytes.len() / 2;
        bytes[mid] ^= 0xff;
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        fs::write(&seg, bytes).unwrap();
        let opts = Options::default()
            .clock(clock.clone())
            .verify_on_open(true)
            .sync(policies[round % 3]);
        // (A damaged open window may open: its body has no checksum.)
        drop(Engine::open_read_only_with(&copy, opts.clone()));
        assert!(
            fds_below(&copy).is_empty(),
            "read-only: {:?}",
            fds_below(&copy)
        );
        assert!(
            maps_below(&copy).is_empty(),
            "read-only: {:?}",
            maps_below(&copy)
        );
        drop(Engine::open_with(&copy, opts.clone()));
        assert!(
            fds_below(&copy).is_empty(),
            "writer: {:?}",
            fds_below(&copy)
        );
        assert!(
            maps_below(&copy).is_empty(),
            "writer: {:?}",
            maps_below(&copy)
        );
        assert!(
            eventually(|| engine_threads().is_empty()),
            "threads: {:?}",
            engine_threads()
        );
        // Degraded, the open goes on without it; closed, nothing stays.
        let w = Engine::open_with(&copy, opts.degraded(true)).expect("degraded open");
        w.insert(b"after").unwrap();
        if round % 2 == 0 {
            w.close().unwrap();
        } else {
            drop(w);
        }
        assert_released(&copy, "degraded");
    }
    // A damaged log: the open fails, and leaves nothing open.
    for round in 0..10usize {
        let copy = tmp.path().join("logcopy");
        let _ = fs::remove_dir_all(&copy);
        let e = Engine::create_with(
            &copy,
            small(&[Tier::daily(3)]),
            Options::default()
                .clock(clock.clone())
                .sync(policies[1 + round % 2]),
        )
        .unwrap();
        for i in 0..50 {
            e.insert(&url(2, i)).unwrap();
        }
        // Copied while open, as a crash leaves it: the log holds the
        // inserts.
        let crashed = tmp.path().join("crashed");
        let _ = fs::remove_dir_all(&crashed);
        copy_tree(&copy, &crashed);
        e.close().unwrap();
        for entry in fs::read_dir(crashed.join("wal")).unwrap().flatten() {
            let mut bytes = fs::read(entry.path()).unwrap();
            if bytes.len() > 64 {
                let at = bytes.len() - 20;
                bytes[at] ^= 0x5a;
                bytes[40] ^= 0x5a;
                fs::write(entry.path(), bytes).unwrap();
            }
        }
        let r = Engine::open_with(
            &crashed,
            Options::default()
                .clock(clock.clone())
                .assume_power_loss(round % 2 == 0),
        );
        drop(r);
        assert_released(&crashed, "log");
    }
}

/// Hundreds of days in one open engine: expired windows are unmapped,
/// their descriptors closed and their files deleted; a handle that stayed
/// idle holds its windows only until its next call or its drop.
#[test]
fn a_long_run_of_rotations_releases_expired_windows() {
    let _g = serial();
    let (_tmp, dir, clock, e) = fresh(small(&[Tier::daily(3), Tier::weekly(2)]), |o| {
        o.sync(SyncPolicy::Always)
    });
    let mut idle = Some(e.handle());
    idle.as_mut().unwrap().insert(b"idle").unwrap();
    let (fds_start, threads_start) = (all_fds(), engine_threads().len());
    for d in 0..150u64 {
        // A minute before midnight (windows created ahead), then the day.
        clock.set(day(d) + Duration::from_secs(12 * 3600 - 60));
        e.insert(&url(d, 0)).unwrap();
        clock.set(day(d + 1));
        for i in 0..20 {
            e.insert(&url(d, i)).unwrap();
        }
        if d == 30 {
            // Idle since day 0: the windows it holds expired long ago,
            // yet stay mapped for it (their files deleted).
            let held = maps_below(&dir);
            assert!(
                held.iter().any(|m| m.ends_with("(deleted)")),
                "the idle handle's windows: {held:?}"
            );
            idle.as_mut().unwrap().contains(b"idle").unwrap();
        }
        if d == 60 {
            // Idle again since day 30: dropped, it lets its windows go.
            drop(idle.take());
        }
        if d > 30 {
            let maps = maps_below(&dir);
            let fds = fds_below(&dir);
            // 3 daily, 2 weekly windows, one of each ahead, a seal's
            // rewrite: never dozens.
            assert!(maps.len() <= 16, "day {d}: mapped {maps:?}");
            assert!(fds.len() <= 16, "day {d}: open {fds:?}");
            assert!(seg_files(&dir).len() <= 8, "day {d}: {:?}", seg_files(&dir));
        }
    }
    assert!(
        eventually(|| !maps_below(&dir).iter().any(|m| m.ends_with("(deleted)"))),
        "deleted files still mapped: {:?}",
        maps_below(&dir)
    );
    assert!(
        eventually(|| !fds_below(&dir).iter().any(|m| m.ends_with("(deleted)"))),
        "deleted files still open: {:?}",
        fds_below(&dir)
    );
    assert!(
        eventually(|| engine_threads().len() <= threads_start + 2),
        "threads {threads_start} -> {:?}",
        engine_threads()
    );
    assert!(
        all_fds() <= fds_start + 16,
        "descriptors {fds_start} -> {}",
        all_fds()
    );
    e.close().unwrap();
    assert_released(&dir, "after the long run");
}

/// Calls repeated on open engines (verify, stats, flush, maintain, small
/// checkpoints), on a writer and on a read-only engine beside it that the
/// writer's expiry deletes files under: the counts stay bounded.
#[test]
fn repeated_calls_on_open_engines_hold_nothing_more() {
    let _g = serial();
    let (_tmp, dir, clock, e) = fresh(small(&[Tier::daily(3), Tier::weekly(2)]), |o| {
        o.sync(SyncPolicy::Interval(Duration::from_millis(5)))
            .checkpoint_log_bytes(4096)
    });
    for i in 0..200 {
        e.insert(&url(3, i)).unwrap();
    }
    clock.set(day(1));
    e.insert(b"day 1").unwrap();
    let ro = Engine::open_read_only_with(&dir, Options::default().clock(clock.clone())).unwrap();
    let mut counts = Vec::new();
    for d in 1..60u64 {
        clock.set(day(d));
        for i in 0..200 {
            e.insert(&url(d, i)).unwrap();
        }
        e.verify().unwrap();
        assert!(e.verify_each().is_empty());
        e.stats().unwrap();
        e.flush().unwrap();
        e.maintain(day(d)).unwrap();
        ro.verify_each();
        ro.stats().unwrap();
        ro.contains(b"day 1").unwrap();
        let _ = ro.maintain(day(d));
        if d >= 20 {
            counts.push((
                fds_below(&dir).len(),
                maps_below(&dir).len(),
                engine_threads().len(),
            ));
        }
    }
    let first = counts[0];
    let most = counts
        .iter()
        .fold((0, 0, 0), |a, c| (a.0.max(c.0), a.1.max(c.1), a.2.max(c.2)));
    assert!(
        most.0 <= first.0 + 4 && most.1 <= first.1 + 4 && most.2 <= first.2 + 4,
        "fds, maps, threads grew from {first:?} to {most:?}: {:?} {:?}",
        fds_below(&dir),
        maps_below(&dir)
    );
    ro.close().unwrap();
    e.close().unwrap();
    assert_released(&dir, "after repeated calls");
}

/// A long run of counting and fingerprint tiers in one open engine (tables
/// grow, drain and are dropped; counting windows keep shadow copies): the
/// descriptors and mappings stay bounded, and none of a deleted file stays.
#[test]
fn a_long_run_of_counting_and_fingerprint_tiers_releases_what_it_drops() {
    let _g = serial();
    let (_tmp, dir, clock, e) = fresh(
        config(
            &[Tier::daily(2).counting(), Tier::fingerprint(5)],
            200,
            0.01,
        ),
        |o| o.sync(SyncPolicy::Always).checkpoint_log_bytes(8192),
    );
    let mut most = (0, 0);
    for d in 0..100u64 {
        clock.set(day(d));
        // More keys than planned some days: the table chain grows.
        let n = if d % 10 == 0 { 600 } else { 100 };
        for i in 0..n {
            e.insert(&url(d, i)).unwrap();
        }
        if d % 7 == 0 {
            e.remove(&url(d, 1)).unwrap();
        }
        let (fds, maps) = (fds_below(&dir), maps_below(&dir));
        most = (most.0.max(fds.len()), most.1.max(maps.len()));
        assert!(
            fds.len() <= 24 && maps.len() <= 24,
            "day {d}: {fds:?} {maps:?}"
        );
    }
    assert!(
        eventually(
            || !maps_below(&dir).iter().any(|m| m.ends_with("(deleted)"))
                && !fds_below(&dir).iter().any(|m| m.ends_with("(deleted)"))
        ),
        "deleted files held: {:?} {:?}",
        maps_below(&dir),
        fds_below(&dir)
    );
    e.close().unwrap();
    assert_released(&dir, "after the counting and fingerprint run");
}

/// Opens refused by the clock-jump guard (a clock far ahead), under each
/// sync policy (the `interval` one starts its syncer first), leave nothing
/// open.
#[test]
fn opens_refused_for_a_clock_jump_leave_nothing_open() {
    let _g = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("e.tb");
    let clock = ManualClock::new(day(0));
    let e = create(&dir, small(&[Tier::daily(2)]), &clock);
    e.insert(b"k").unwrap();
    e.close().unwrap();
    let policies = [
        SyncPolicy::None,
        SyncPolicy::Always,
        SyncPolicy::Interval(Duration::from_millis(5)),
    ];
    let ahead = ManualClock::new(day(30));
    for round in 0..60usize {
        let opts = Options::default()
            .clock(ahead.clone())
            .sync(policies[round % 3]);
        let err = Engine::open_with(&dir, opts).unwrap_err();
        assert!(matches!(err, Error::ClockJump { .. }), "{err}");
        assert_released(&dir, &format!("refused open {round}"));
    }
    let e = open(&dir, &clock);
    assert!(e.contains(b"k").unwrap());
    e.close().unwrap();
}
