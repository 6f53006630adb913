//! Guards the review defects whose fix lives in the command line (#7.2,
//! #7.5, #7.6, #7.7), each through the real binary.

mod cli_support;

use std::io::Write;

use cli_support::*;

/// Peak resident memory of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmHWM:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

#[test]
fn review_7_6_long_lines_are_bounded() {
    let (tmp, db) = temp_db();
    // A 100 MB line without a newline, streamed: memory stays far below it.
    let mut child = spawn_piped(&mut filter_new_command(&db, &[]));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"before\n").unwrap();
    let block = vec![b'x'; 1 << 20];
    for _ in 0..100 {
        stdin.write_all(&block).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(300));
    let peak = peak_rss_kib(child.id());
    drop(stdin);
    let out = child.wait_with_output().unwrap();
    assert!(peak < 40 * 1024, "peak RSS {peak} KiB for a 100 MB line");
    assert_exit(&out, 2);
    assert_stderr_contains(
        &out,
        "stdin:2: a line of 104857600 bytes is longer than the limit of 65536",
    );
    assert_eq!(
        stdout(&out),
        "before\n",
        "lines before the long one are processed"
    );

    // A smaller limit, skip mode: the count goes to stderr, the rest goes on.
    let f = tmp.path().join("keys.txt");
    std::fs::write(
        &f,
        format!("a\n{}\nb\r\n{}\nc", "y".repeat(17), "z".repeat(16)),
    )
    .unwrap();
    let args = [
        "--max-line-bytes",
        "16",
        "--long-lines",
        "skip",
        f.to_str().unwrap(),
    ];
    let out = cmd("filter-new", &db, &args, b"");
    assert_exit(&out, 0);
    assert_eq!(stdout(&out), format!("a\nb\n{}\nc\n", "z".repeat(16)));
    assert_stderr_contains(&out, "skipped 1 line(s) longer than 16 bytes");
    let out = cmd(
        "add",
        &db,
        &["--max-line-bytes", "16", f.to_str().unwrap()],
        b"",
    );
    assert_eq!(code(&out), 2);
    assert_stderr_contains(&out, "keys.txt:2: a line of 17 bytes");
    assert_eq!(code(&cmd("add", &db, &["--max-line-bytes", "0"], b"")), 2);
}

#[test]
fn review_7_7_inputs_are_checked_before_anything_is_created() {
    let tmp = tempfile::tempdir().unwrap();
    let db = tmp.path().join("newdir");
    let good = tmp.path().join("good.txt");
    std::fs::write(&good, "a\n").unwrap();
    let missing = tmp.path().join("missing-file");
    let (g, m) = (good.to_str().unwrap(), missing.to_str().unwrap());
    for c in ["add", "filter-new"] {
        // The missing file comes after a good one: still nothing is created.
        let out = cmd(c, &db, &[g, m], b"");
        assert_eq!(code(&out), 2, "{c}");
        assert!(
            stderr(&out).contains("missing-file: open failed"),
            "{c}: {}",
            stderr(&out)
        );
        assert!(
            !db.exists(),
            "{c} created the engine before checking its inputs"
        );
        let out = cmd(c, &db, &[tmp.path().to_str().unwrap()], b"");
        assert_eq!(code(&out), 2, "{c}");
        assert!(
            stderr(&out).contains("is a directory"),
            "{c}: {}",
            stderr(&out)
        );
        assert!(!db.exists());
    }
    // Bad flags are refused before anything too.
    let out = cmd("add", &db, &["--max-line-bytes", "x", g], b"");
    assert_eq!(code(&out), 2);
    assert!(!db.exists());
}

/// Every file under `dir` with its length, modification time and content hash.
fn snapshot(dir: &std::path::Path) -> Vec<(String, u64, std::time::SystemTime, u64)> {
    let mut all = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                let data = std::fs::read(&p).unwrap();
                let sum = data
                    .iter()
                    .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(*b)));
                all.push((p.display().to_string(), m.len(), m.modified().unwrap(), sum));
            }
        }
    }
    all.sort();
    all
}

#[test]
fn review_7_2_read_only_commands_never_rotate_or_expire() {
    let (_tmp, db) = temp_db();
    let out = cmd("add", &db, &["--tiers", "7d"], b"k2026\n");
    assert_exit(&out, 0);
    let before = snapshot(&db);
    let d = db.to_str().unwrap();
    // Years ahead: every window would expire if check rotated.
    let far = run(&["check", d, "--now", "2031-01-01T00:00:00Z", "k2026"], b"");
    assert_exit(&far, 1);
    for c in [&["stats", d][..], &["verify", d], &["stats", d, "--json"]] {
        let mut args = c.to_vec();
        args.extend_from_slice(&["--now", "2031-01-01T00:00:00Z"]);
        let out = run(&args, b"");
        assert_eq!(code(&out), 0, "{c:?}: {}", stderr(&out));
    }
    assert_eq!(
        snapshot(&db),
        before,
        "a read-only command changed the directory"
    );
    let back = run(&["check", d, "--now", DAY0, "k2026"], b"");
    assert_eq!(
        (code(&back), stdout(&back).as_str()),
        (0, "k2026\tseen\n"),
        "{}",
        stderr(&back)
    );
    // maintain --now is the one way to move the clock on purpose.
    let m = run(&["maintain", d, "--now", "2031-01-01T00:00:00Z"], b"");
    assert_exit(&m, 0);
    assert!(stdout(&m).contains("expired"), "{}", stdout(&m));
    let gone = run(&["check", d, "--now", "2031-01-01T00:00:00Z", "k2026"], b"");
    assert_eq!(code(&gone), 1);
}
