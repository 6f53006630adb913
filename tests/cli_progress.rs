//! Guards the progress bar: drawn on stderr when stderr is a terminal (a
//! pseudo-terminal made by `script`), absent when stderr is a pipe.

mod cli_support;

use std::process::Command;

use cli_support::*;

/// Runs `shell_cmd` with stdin, stdout and stderr on a pseudo-terminal;
/// returns what the terminal showed, or `None` without `script(1)`.
fn in_terminal(shell_cmd: &str) -> Option<String> {
    let out = Command::new("script")
        .args(["-qefc", shell_cmd, "/dev/null"])
        .output()
        .ok()?;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[test]
fn progress_bar_on_a_terminal_only() {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys.txt");
    let text: String = (0..300_000)
        .map(|i| format!("https://example.com/{i}\n"))
        .collect();
    std::fs::write(&keys, text).unwrap();
    let k = keys.to_str().unwrap();
    for command in ["filter-new", "add"] {
        let db = tmp.path().join(command);
        let line = format!(
            "{BIN} {command} {} {k} --items-per-day 1000000 --now {DAY0} > /dev/null",
            db.display()
        );
        let Some(shown) = in_terminal(&line) else {
            // In CI (scripts/test.sh sets CI) a missing script(1) fails
            // the test instead of skipping it unseen.
            assert!(
                std::env::var_os("CI").is_none(),
                "script(1) (util-linux) is needed to test the progress bar"
            );
            eprintln!("skipped: script(1) is not installed");
            return;
        };
        assert!(
            shown.contains(&format!("{command} [")),
            "{command}: {shown:?}"
        );
        assert!(
            shown.contains("lines/s") && shown.contains("new"),
            "{command}: {shown:?}"
        );
        assert!(
            shown.contains('%'),
            "a file input shows the fraction done: {shown:?}"
        );

        // Piped: the same run prints no bar.
        let db = tmp.path().join(format!("{command}-piped"));
        let args = [command, db.to_str().unwrap(), k, "--now", DAY0];
        let out = run(&args, b"");
        assert_eq!(code(&out), 0);
        let err = stderr(&out);
        assert!(
            !err.contains("lines/s") && !err.contains('\u{1b}'),
            "{command}: {err:?}"
        );
    }
    // Stdin input: a spinner with counts, no percentage.
    let db = tmp.path().join("stdin");
    let line = format!(
        "{BIN} filter-new {} --now {DAY0} < {k} > /dev/null",
        db.display()
    );
    let shown = in_terminal(&line).unwrap_or_default();
    assert!(shown.contains("lines/s"), "{shown:?}");
}
