//! What docs/operations.md, "Checking and recovering", "One writer",
//! "The clock" and "Creating", tells an operator, run through the command
//! line: each kind of damage shows the symptom the runbook describes (the
//! error text, the exit status, what `verify` says) and its way out works
//! as written.
#![cfg(unix)]

mod cli_support;

use std::fs;
use std::io::Write;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use cli_support::*;

/// The day after `DAY0`: the window of `DAY0` is sealed, still live.
const DAY1: &str = "2026-11-03T12:00:00Z";
/// The sealed daily window's file, and the open one's, at `DAY1`.
const SEALED: &str = "d-20261102-0.seg";

/// `run` of `command DIR --now at rest...`.
fn at(command: &str, dir: &Path, at: &str, rest: &[&str], input: &[u8]) -> std::process::Output {
    let mut args = vec![command, dir.to_str().unwrap(), "--now", at];
    args.extend_from_slice(rest);
    run(&args, input)
}

/// An engine of `7d,4w` with keys `a`, `b`, `c` added on `DAY0` (into the
/// window sealed by the next add) and `d` on `DAY1`.
fn two_days(db: &Path) {
    let out = cmd("create", db, &["--tiers", "7d,4w", "--sync", "always"], b"");
    assert_exit(&out, 0);
    assert_exit(&cmd("add", db, &[], b"a\nb\nc\n"), 0);
    assert_exit(&at("add", db, DAY1, &[], b"d\n"), 0);
}

/// "A segment file the manifest names that is missing from `seg/` ... of a
/// window still live fails a plain open ..., naming the file. `verify`
/// reports it as damage (exit 1, `missing, though the manifest names
/// it`), and a `--degraded` open goes on without its window."
#[test]
fn a_missing_live_segment_fails_open_is_damage_to_verify_and_opens_degraded() {
    let (_tmp, db) = temp_db();
    two_days(&db);
    fs::remove_file(db.join("seg").join(SEALED)).unwrap();
    let out = at("add", &db, DAY1, &[], b"x\n");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, SEALED);
    assert_stderr_contains(&out, "No such file or directory");
    let out = at("verify", &db, DAY1, &[], b"");
    assert_exit(&out, 1);
    assert_stderr_contains(&out, "missing, though the manifest names it");
    let out = at("add", &db, DAY1, &["--degraded"], b"x\n");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "opened degraded without these windows");
    assert_stderr_contains(&out, "7d 20261102");
    // The weekly tier still holds the lost day's keys.
    let out = at("check", &db, DAY1, &[], b"a\n");
    assert_exit(&out, 0);
    let out = at("stats", &db, DAY1, &[], b"");
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("lost by an earlier degraded open"));
    assert_exit(&at("verify", &db, DAY1, &[], b""), 0);
}

/// "A segment file that fails its checks at open ... is moved to
/// `quarantine/` and the open fails with `Quarantined`, naming the file and
/// its window. Restore the file from a backup (back into `seg/`), or open
/// with `--degraded`"; `verify` names a file an open moved to
/// `quarantine/`; `stats --degraded` lists the window and changes nothing.
#[test]
fn a_damaged_segment_is_quarantined_and_either_way_out_works() {
    let (tmp, db) = temp_db();
    two_days(&db);
    let backup = tmp.path().join(SEALED);
    let seg = db.join("seg").join(SEALED);
    fs::copy(&seg, &backup).unwrap();
    fs::OpenOptions::new()
        .write(true)
        .open(&seg)
        .unwrap()
        .set_len(100)
        .unwrap();
    let out = at("add", &db, DAY1, &[], b"x\n");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "quarantined");
    assert_stderr_contains(&out, "7d 20261102");
    assert!(db.join("quarantine").join(SEALED).exists());
    let out = at("verify", &db, DAY1, &[], b"");
    assert_exit(&out, 1);
    assert_stderr_contains(&out, &format!("quarantine/{SEALED}"));
    let out = at("stats", &db, DAY1, &["--degraded"], b"");
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("7d 20261102"), "{}", stdout(&out));

    // Way out 1: the file back from a backup.
    let restored = tmp.path().join("restored");
    copy_dir(&db, &restored);
    fs::copy(&backup, restored.join("seg").join(SEALED)).unwrap();
    assert_exit(&at("add", &restored, DAY1, &[], b"y\n"), 0);
    assert_exit(&at("verify", &restored, DAY1, &[], b""), 0);
    assert_exit(&at("check", &restored, DAY1, &[], b"a\n"), 0);

    // Way out 2: --degraded, after which plain opens work.
    let out = at("add", &db, DAY1, &["--degraded"], b"y\n");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "opened degraded without these windows");
    assert_exit(&at("add", &db, DAY1, &[], b"z\n"), 0);
    assert_exit(&at("verify", &db, DAY1, &[], b""), 0);
}

/// "Every problem names its file: `seg/d-...seg: corrupt: body checksum
/// mismatch: expected 0x..., got 0x...`. ... a sealed window whose body
/// `verify` reports damaged still opens and answers lookups from the
/// damaged body until you act", and the way out of "A damaged sealed
/// segment": delete the window's files and open once with `--degraded`.
#[test]
fn a_damaged_sealed_body_opens_until_its_file_is_deleted_and_opened_degraded() {
    let (_tmp, db) = temp_db();
    two_days(&db);
    let seg = db.join("seg").join(SEALED);
    let mut bytes = fs::read(&seg).unwrap();
    bytes[5000] ^= 0xff;
    fs::write(&seg, &bytes).unwrap();
    let out = at("verify", &db, DAY1, &[], b"");
    assert_exit(&out, 1);
    assert_stderr_contains(
        &out,
        &format!("seg/{SEALED}: corrupt: body checksum mismatch: expected 0x"),
    );
    assert_exit(&at("check", &db, DAY1, &[], b"a\n"), 0);
    assert_exit(&at("add", &db, DAY1, &[], b"y\n"), 0);

    fs::remove_file(&seg).unwrap();
    let out = at("add", &db, DAY1, &["--degraded"], b"z\n");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "7d 20261102");
    assert_exit(&at("verify", &db, DAY1, &[], b""), 0);
    assert_exit(&at("add", &db, DAY1, &[], b"w\n"), 0);
}

/// "`LOCK` in the engine directory is held (`flock`) by the open engine;
/// a second open ... fails at once with `Locked`" (exit 2); read-only
/// commands take no lock.
#[test]
fn a_held_lock_refuses_writers_not_readers() {
    let (_tmp, db) = temp_db();
    two_days(&db);
    let lock = fs::File::open(db.join("LOCK")).unwrap();
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::NonBlockingLockExclusive).unwrap();
    let start = Instant::now();
    let out = at("add", &db, DAY1, &[], b"x\n");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "one writer at a time");
    assert!(start.elapsed() < Duration::from_secs(5), "fails at once");
    assert_exit(&at("maintain", &db, DAY1, &[], b""), 2);
    assert_exit(&at("check", &db, DAY1, &[], b"a\n"), 0);
    assert_exit(&at("verify", &db, DAY1, &[], b""), 0);
    drop(lock);
    assert_exit(&at("add", &db, DAY1, &[], b"x\n"), 0);
}

/// "Creating": `create` accepts an empty `seg/` and a stale `LOCK`, and
/// refuses anything else with `NotEmpty`, naming what it found.
#[test]
fn create_accepts_a_stale_lock_and_names_what_it_refuses() {
    let (_tmp, db) = temp_db();
    fs::create_dir_all(db.join("seg")).unwrap();
    fs::write(db.join("LOCK"), b"").unwrap();
    assert_exit(&cmd("create", &db, &["--tiers", "7d"], b""), 0);
    let (_tmp2, other) = temp_db();
    fs::create_dir_all(&other).unwrap();
    fs::write(other.join("notes.txt"), b"").unwrap();
    let out = cmd("create", &other, &["--tiers", "7d"], b"");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "notes.txt");
    assert!(!other.join("MANIFEST").exists());
}

/// "The clock": a step that skips every window is refused with
/// `ClockJump`, naming the boundary and the instant, nothing changes, and
/// `timebloom maintain DIR --now T` moves the engine on purpose.
#[test]
fn a_clock_jump_is_refused_until_maintain_moves_the_engine() {
    let (_tmp, db) = temp_db();
    assert_exit(&cmd("create", &db, &["--tiers", "7d"], b""), 0);
    assert_exit(&cmd("add", &db, &[], b"a\n"), 0);
    let later = "2026-12-03T12:00:00Z";
    let out = at("add", &db, later, &[], b"b\n");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "the clock jumped from 2026-11-03T00:00:00Z");
    assert_stderr_contains(&out, &format!("timebloom maintain DIR --now {later}"));
    assert_exit(&cmd("check", &db, &[], b"a\n"), 0);
    let out = at("maintain", &db, later, &[], b"");
    assert_exit(&out, 0);
    assert!(
        stdout(&out).contains("expired 7d 20261102"),
        "{}",
        stdout(&out)
    );
    assert_exit(&at("add", &db, later, &[], b"b\n"), 0);
}

/// Copies the files of `from` (two levels: the engine directory and its
/// subdirectories) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            fs::copy(entry.path(), &target).unwrap();
        }
    }
}

/// An engine of `7d:counting,4w` under `--sync always` whose writer was
/// killed with 50 keys (`k1`..`k50`) in its log, then left as after a
/// power loss (`wal/BOOT` deleted, as "Backup" step 4 does): its next open
/// replays the log. Returns the log file's path.
fn killed_with_a_log(db: &Path) -> std::path::PathBuf {
    let out = cmd(
        "create",
        db,
        &["--tiers", "7d:counting,4w", "--sync", "always"],
        b"",
    );
    assert_exit(&out, 0);
    let mut child =
        spawn_piped(filter_new_command(db, &["-q"]).stdout(std::process::Stdio::null()));
    let mut stdin = child.stdin.take().unwrap();
    let keys: String = (1..=50).map(|i| format!("k{i}\n")).collect();
    stdin.write_all(keys.as_bytes()).unwrap();
    stdin.flush().unwrap();
    let log = db.join("wal").join("0000000000000000.log");
    // A 32-byte header and 40 bytes a record.
    let start = Instant::now();
    while fs::metadata(&log).map_or(0, |m| m.len()) < 32 + 50 * 40 {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "the log never held 50 records"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    drop(stdin);
    fs::remove_file(db.join("wal").join("BOOT")).unwrap();
    log
}

/// "A log file damaged in its middle ... refuses an open that replays ...
/// with `Corrupt`, naming the file; `verify` reports it. The ways out: ...
/// open once with `--degraded`, which replays the records before the
/// damage and goes on"; later opens are plain again.
#[test]
fn a_log_damaged_in_its_middle_refuses_the_replay_until_opened_degraded() {
    let (_tmp, db) = temp_db();
    let log = killed_with_a_log(&db);
    let mut bytes = fs::read(&log).unwrap();
    bytes[32 + 10 * 40 + 20] ^= 0xaa;
    fs::write(&log, &bytes).unwrap();
    let out = at("verify", &db, DAY0, &[], b"");
    assert_exit(&out, 1);
    assert_stderr_contains(&out, "0000000000000000.log: corrupt");
    let out = cmd("add", &db, &[], b"z\n");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "0000000000000000.log: corrupt");
    // The degraded open says what it went past: the log's writes after
    // the damage are not replayed.
    let out = cmd("add", &db, &["--degraded"], b"z\n");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "0000000000000000.log");
    assert_stderr_contains(&out, "not replayed");
    // The records before the damage were replayed into the counting tier.
    assert_exit(&cmd("check", &db, &[], b"k1\nk10\n"), 0);
    assert_exit(&cmd("add", &db, &[], b"y\n"), 0);
    assert_exit(&at("verify", &db, DAY0, &[], b""), 0);
}

/// "A log file whose header cannot be read refuses the open, `--degraded`
/// too, while a recovery needs its records"; `verify` reports it.
#[test]
fn a_log_with_a_damaged_header_refuses_even_a_degraded_open() {
    let (tmp, db) = temp_db();
    let log = killed_with_a_log(&db);
    let saved = tmp.path().join("saved.log");
    fs::copy(&log, &saved).unwrap();
    let mut bytes = fs::read(&log).unwrap();
    bytes[9] ^= 0xaa;
    fs::write(&log, &bytes).unwrap();
    assert_exit(&at("verify", &db, DAY0, &[], b""), 1);
    for flags in [&[][..], &["--degraded"][..]] {
        let out = cmd("add", &db, flags, b"z\n");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "0000000000000000.log: corrupt");
    }
    // Restored from a copy, the log replays.
    fs::copy(&saved, &log).unwrap();
    assert_exit(&cmd("add", &db, &[], b"z\n"), 0);
    assert_exit(&cmd("check", &db, &[], b"k1\nk50\n"), 0);
}

/// "A log file whose name is not the first LSN its header holds ...
/// refuses the open, naming the file and both positions: give it back its
/// name".
#[test]
fn a_renamed_log_is_refused_naming_both_positions_until_renamed_back() {
    let (_tmp, db) = temp_db();
    let log = killed_with_a_log(&db);
    let renamed = db.join("wal").join("0000000000000005.log");
    fs::rename(&log, &renamed).unwrap();
    let out = cmd("add", &db, &["--degraded"], b"z\n");
    assert_exit(&out, 2);
    assert_stderr_contains(&out, "0000000000000005.log");
    assert_stderr_contains(&out, "its header says 0000000000000000");
    fs::rename(&renamed, &log).unwrap();
    assert_exit(&cmd("add", &db, &[], b"z\n"), 0);
}

/// "A damaged shadow copy ... Then the open fails with `Corrupt`, naming
/// the file, every time. ... open once with `--degraded`. The degraded
/// open copies the damaged shadow to `quarantine/` ... and later opens are
/// plain again."
#[test]
fn a_damaged_shadow_copy_fails_every_open_until_one_degraded_open() {
    let (_tmp, db) = temp_db();
    killed_with_a_log(&db);
    let shadow = db
        .join("wal")
        .join("d-20261102-0.seg.0000000000000000.shadow");
    let mut bytes = fs::read(&shadow).unwrap();
    bytes[5000] ^= 0xaa;
    fs::write(&shadow, &bytes).unwrap();
    assert_exit(&at("verify", &db, DAY0, &[], b""), 1);
    for _ in 0..2 {
        let out = cmd("add", &db, &[], b"z\n");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "shadow: corrupt");
    }
    let out = cmd("add", &db, &["--degraded"], b"z\n");
    assert_exit(&out, 0);
    assert_stderr_contains(&out, "7d:counting 20261102");
    assert!(db
        .join("quarantine")
        .join("d-20261102-0.seg.0000000000000000.shadow")
        .exists());
    assert_exit(&cmd("add", &db, &[], b"y\n"), 0);
    assert_exit(&cmd("check", &db, &[], b"k1\nk50\n"), 0);
}

/// The README's main job prints each URL once, as `.ci/run` checks it.
#[test]
fn the_readme_main_job_prints_each_url_once() {
    let (_tmp, db) = temp_db();
    let out = Command::new(BIN)
        .args([
            "filter-new",
            db.to_str().unwrap(),
            "--items-per-day",
            "1000",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            c.stdin
                .take()
                .unwrap()
                .write_all(b"https://a.example/1\nhttps://a.example/2\nhttps://a.example/1\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), "https://a.example/1\nhttps://a.example/2\n");
}

/// "A damaged `MANIFEST` ... refuses every open, `--degraded` too (exit
/// 2), and `verify` reports it (exit 1)"; a copy of it from the same
/// moment as `seg/` opens again.
#[test]
fn a_damaged_manifest_refuses_every_open_until_restored() {
    let (tmp, db) = temp_db();
    two_days(&db);
    let saved = tmp.path().join("MANIFEST");
    fs::copy(db.join("MANIFEST"), &saved).unwrap();
    let mut bytes = fs::read(db.join("MANIFEST")).unwrap();
    bytes[100] ^= 0x01;
    fs::write(db.join("MANIFEST"), &bytes).unwrap();
    let out = at("verify", &db, DAY1, &[], b"");
    assert_exit(&out, 1);
    assert_stderr_contains(&out, "MANIFEST: corrupt: checksum mismatch: expected 0x");
    for flags in [&[][..], &["--degraded"][..]] {
        let out = at("add", &db, DAY1, flags, b"x\n");
        assert_exit(&out, 2);
        assert_stderr_contains(&out, "MANIFEST: corrupt");
    }
    fs::write(db.join("MANIFEST"), &bytes[..50]).unwrap();
    let out = at("verify", &db, DAY1, &[], b"");
    assert_exit(&out, 1);
    assert_stderr_contains(&out, "MANIFEST: corrupt: body length: header says");
    fs::copy(&saved, db.join("MANIFEST")).unwrap();
    assert_exit(&at("add", &db, DAY1, &[], b"x\n"), 0);
    assert_exit(&at("check", &db, DAY1, &[], b"a\nd\n"), 0);
}

/// "A `MANIFEST` older than `seg/` (put back alone from a backup) names
/// fewer files than `seg/` holds: a writing open refuses it, naming a file
/// that holds keys the manifest does not know, `--degraded` too. The ways
/// out: restore `MANIFEST`, `seg/` and `wal/` from one consistent copy,
/// or move the named files out of `seg/` to go on without their keys."
/// (Before, the open deleted them without a word, and only the other
/// tiers still held their keys.)
#[test]
fn an_older_manifest_is_refused_naming_the_files_it_does_not_know() {
    let (tmp, db) = temp_db();
    assert_exit(&cmd("create", &db, &["--tiers", "7d,4w"], b""), 0);
    assert_exit(&cmd("add", &db, &[], b"a\n"), 0);
    let old = tmp.path().join("MANIFEST");
    fs::copy(db.join("MANIFEST"), &old).unwrap();
    assert_exit(&at("add", &db, DAY1, &[], b"b\n"), 0);
    let day2 = "2026-11-04T12:00:00Z";
    assert_exit(&at("add", &db, day2, &[], b"c\n"), 0);
    let newer = ["d-20261103-0.seg", "d-20261104-0.seg"].map(|n| db.join("seg").join(n));
    assert!(newer.iter().all(|f| f.exists()));
    let current = tmp.path().join("MANIFEST.current");
    fs::copy(db.join("MANIFEST"), &current).unwrap();
    fs::copy(&old, db.join("MANIFEST")).unwrap();
    for flags in [&[][..], &["--degraded"][..]] {
        let out = at("add", &db, day2, flags, b"x\n");
        assert_exit(&out, 2);
        let err = stderr(&out);
        assert!(
            err.contains("d-20261103-0.seg") || err.contains("d-20261104-0.seg"),
            "{err}"
        );
        assert_stderr_contains(&out, "MANIFEST does not name it");
        for f in &newer {
            assert!(f.exists(), "the open deleted {}", f.display());
        }
    }
    // The consistent MANIFEST back: every key is there.
    fs::copy(&current, db.join("MANIFEST")).unwrap();
    assert_exit(&at("check", &db, day2, &["--within", "1d"], b"c\n"), 0);
    assert_exit(&at("check", &db, day2, &[], b"a\nb\nc\n"), 0);
    // Or the old one, with the files it does not know moved out of seg/.
    fs::copy(&old, db.join("MANIFEST")).unwrap();
    let aside = tmp.path().join("aside");
    fs::create_dir(&aside).unwrap();
    loop {
        let out = at("add", &db, day2, &[], b"x\n");
        if out.status.code() == Some(0) {
            break;
        }
        assert_exit(&out, 2);
        let err = stderr(&out);
        let name = err
            .split(|c: char| c.is_whitespace() || c == ':' || c == '/')
            .find(|w| w.ends_with(".seg"))
            .unwrap_or_else(|| panic!("no file named: {err}"))
            .to_string();
        fs::rename(db.join("seg").join(&name), aside.join(&name)).unwrap();
    }
    assert_exit(&at("verify", &db, day2, &[], b""), 0);
}
