//! Directories written by older builds of this repository, read and written
//! by this one: every key they added is still found, `verify` passes, and
//! this build's writes keep them readable. The fixtures under
//! `tests/data/compat/` were written by the `timebloom` binaries of the
//! commits their README names.

mod cli_support;

use std::path::{Path, PathBuf};

use cli_support::{assert_exit, code, run, stderr, stdout};

/// A copy of the fixture `name` in a temporary directory (opens write).
fn fixture(name: &str) -> (tempfile::TempDir, PathBuf) {
    let from = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/compat")
        .join(name);
    let tmp = tempfile::tempdir().expect("create a temporary directory");
    let to = tmp.path().join(name);
    copy_tree(&from, &to);
    (tmp, to)
}

fn copy_tree(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let dest = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &dest);
        } else {
            std::fs::copy(entry.path(), &dest).unwrap();
        }
    }
}

/// The keys the fixtures were written with: `https://example.com/SET/1..=n`.
fn keys(set: &str, n: u32) -> String {
    (1..=n)
        .map(|i| format!("https://example.com/{set}/{i}\n"))
        .collect()
}

/// `check` of `input` at `now`: every key must be seen.
fn assert_all_seen(dir: &Path, now: &str, input: &str) {
    let out = run(
        &["check", dir.to_str().unwrap(), "--now", now],
        input.as_bytes(),
    );
    let lines = stdout(&out);
    let new: Vec<&str> = lines.lines().filter(|l| !l.ends_with("\tseen")).collect();
    assert!(
        new.is_empty() && code(&out) == 0,
        "{dir:?}: {} keys not seen (exit {}): {:?}; stderr: {}",
        new.len(),
        code(&out),
        &new[..new.len().min(5)],
        stderr(&out)
    );
    assert_eq!(lines.lines().count(), input.lines().count());
}

fn assert_verifies(dir: &Path, now: &str) {
    let out = run(&["verify", dir.to_str().unwrap(), "--now", now], b"");
    assert_exit(&out, 0);
}

fn assert_stats(dir: &Path, now: &str) {
    let out = run(
        &["stats", dir.to_str().unwrap(), "--now", now, "--json"],
        b"",
    );
    assert_exit(&out, 0);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).expect("stats --json");
    assert!(json.is_object());
}

/// Writes keys `f` with this build at `now`; checks everything again.
fn add_and_recheck(dir: &Path, now: &str, before: &str) {
    let out = run(
        &["add", dir.to_str().unwrap(), "--now", now],
        keys("f", 40).as_bytes(),
    );
    assert_exit(&out, 0);
    assert_all_seen(dir, now, &format!("{before}{}", keys("f", 40)));
    assert_verifies(dir, now);
    assert_stats(dir, now);
}

/// Keys a (2026-11-02), b (11-03) and c (11-05) as the fixtures hold them.
fn abc() -> String {
    format!("{}{}{}", keys("a", 50), keys("b", 50), keys("c", 50))
}

const LATER: &str = "2026-11-05T18:00:00Z";
const NEXT_DAY: &str = "2026-11-06T12:00:00Z";

/// A counting daily tier by b7d8bfb, a build before sync policies and the
/// log: its manifest names no policy (the default applies) and no
/// checkpoint, and it has no `wal/`.
#[test]
fn counting_engine_of_b7d8bfb_reads_and_takes_writes() {
    let (_tmp, dir) = fixture("b7d8bfb-counting");
    assert_verifies(&dir, LATER);
    assert_stats(&dir, LATER);
    assert_all_seen(&dir, LATER, &abc());
    add_and_recheck(&dir, NEXT_DAY, &abc());
}

/// A counting daily tier by b1012d0, killed during an add under `always`
/// (30 keys e logged past the checkpoint) and opened as after a power loss
/// (its `wal/BOOT` names another boot): the shadow copy and the log it
/// left are recovered.
#[test]
fn counting_engine_of_b1012d0_recovers_its_log() {
    let (_tmp, dir) = fixture("b1012d0-counting-crash");
    let all = format!("{}{}", abc(), keys("e", 30));
    add_and_recheck(&dir, NEXT_DAY, &all);
}

/// A fingerprint tier beside a daily Bloom tier by b1012d0, killed as the
/// counting one was: the table's shadow copy and the log are recovered.
#[test]
fn fingerprint_engine_of_b1012d0_recovers_its_log() {
    let (_tmp, dir) = fixture("b1012d0-fp-crash");
    let all = format!("{}{}", abc(), keys("e", 30));
    add_and_recheck(&dir, NEXT_DAY, &all);
}

/// A fingerprint tier by 20b7e3f (before `table_day`, `first` and the
/// shadow copy's sweep day), killed as the others were: its shadow copy of
/// the table, of the older layout, and its log are recovered.
#[test]
fn fingerprint_engine_of_20b7e3f_recovers_its_log() {
    let (_tmp, dir) = fixture("20b7e3f-fp-crash");
    let all = format!("{}{}", abc(), keys("e", 30));
    add_and_recheck(&dir, NEXT_DAY, &all);
}
