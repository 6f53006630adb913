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

/// [`in_terminal`], or `None` after saying the test is skipped when
/// `script(1)` is missing; in CI (scripts/test.sh sets CI) a missing
/// `script(1)` fails the test instead of skipping it unseen.
fn in_terminal_or_skip(shell_cmd: &str) -> Option<String> {
    let shown = in_terminal(shell_cmd);
    if shown.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "script(1) (util-linux) is needed to test the progress bar"
        );
        eprintln!("skipped: script(1) is not installed");
    }
    shown
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
        let Some(shown) = in_terminal_or_skip(&line) else {
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

/// What a terminal `width` columns wide shows for `raw`: text wrapping at
/// the right margin, cursor moves up and down, carriage returns and line
/// clears as `indicatif` sends them.
fn screen(raw: &str, width: usize) -> Vec<String> {
    let mut rows: Vec<Vec<char>> = vec![Vec::new()];
    let (mut row, mut col) = (0usize, 0usize);
    let mut chars = raw.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' => col = 0,
            '\n' => row += 1,
            '\u{1b}' if chars.peek() == Some(&'[') => {
                chars.next();
                let mut param = String::new();
                let mut end = ' ';
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        end = c;
                        break;
                    }
                    param.push(c);
                }
                let n: usize = param.parse().unwrap_or(1);
                col = col.min(width - 1); // a move ends a pending wrap
                match end {
                    'A' => row = row.saturating_sub(n),
                    'B' => row += n,
                    'G' => col = n.saturating_sub(1),
                    'K' if param == "2" => {
                        if let Some(r) = rows.get_mut(row) {
                            r.clear();
                        }
                    }
                    'K' => {
                        if let Some(r) = rows.get_mut(row) {
                            r.truncate(col);
                        }
                    }
                    'J' => {
                        rows.truncate(row + 1);
                        rows[row].truncate(col);
                    }
                    _ => {}
                }
            }
            c => {
                if col >= width {
                    row += 1;
                    col = 0;
                }
                while rows.len() <= row {
                    rows.push(Vec::new());
                }
                let r = &mut rows[row];
                while r.len() < col {
                    r.push(' ');
                }
                if col < r.len() {
                    r[col] = c;
                } else {
                    r.push(c);
                }
                col += 1;
            }
        }
        while rows.len() <= row {
            rows.push(Vec::new());
        }
    }
    rows.into_iter()
        .map(|r| r.into_iter().collect::<String>().trim_end().to_string())
        .collect()
}

/// Runs `filter-new` on `n` distinct URLs from a file, on a terminal 80
/// columns wide (the bar's rows depend on it), its stdout redirected as
/// `redirect` says (`""`: the terminal); what the terminal showed, or
/// `None` when skipped ([`in_terminal_or_skip`]).
fn filter_new_in_terminal(n: usize, redirect: &str) -> Option<String> {
    let tmp = tempfile::tempdir().unwrap();
    let keys = tmp.path().join("keys.txt");
    let text: String = (0..n)
        .map(|i| format!("https://example.com/{i}\n"))
        .collect();
    std::fs::write(&keys, text).unwrap();
    let db = tmp.path().join("db");
    in_terminal_or_skip(&format!(
        "stty cols 80 rows 40; {BIN} filter-new {} {} --items-per-day 1000000 --now {DAY0}{redirect}",
        db.display(),
        keys.display()
    ))
}

/// `filter-new` printing to the terminal that shows its progress bar: every
/// line printed stays on the screen, on a row of its own. The bar was
/// redrawn over the last line printed (cursor up, clear) and left copies of
/// itself with the next line glued to them, so lines went missing from what
/// the terminal showed.
#[test]
fn the_progress_bar_never_hides_printed_lines() {
    let n = 200_000;
    let Some(shown) = filter_new_in_terminal(n, "") else {
        return;
    };
    assert!(shown.contains("lines/s"), "no bar drawn");
    let rows = screen(&shown, 80);
    let urls: std::collections::HashSet<&str> = rows
        .iter()
        .map(String::as_str)
        .filter(|r| r.starts_with("https://"))
        .collect();
    let missing: Vec<usize> = (0..n)
        .filter(|i| !urls.contains(format!("https://example.com/{i}").as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "{} lines not shown on rows of their own, such as {:?}",
        missing.len(),
        &missing[..missing.len().min(8)]
    );
}

/// With stdout elsewhere (here `/dev/null`), printed lines never reach the
/// bar's terminal: the bar is not taken off and drawn again for every batch
/// printed, only at its own pace (a steady tick and rate-limited updates).
#[test]
fn the_bar_is_not_redrawn_per_batch_when_stdout_is_elsewhere() {
    let start = std::time::Instant::now();
    let Some(shown) = filter_new_in_terminal(400_000, " > /dev/null") else {
        return;
    };
    let secs = start.elapsed().as_secs_f64();
    let draws = shown.matches("filter-new [").count();
    // At its own pace the bar is drawn about 20 times a second (indicatif's
    // limit; 23 in 0.57 s here) plus the final draw; a redraw per batch of
    // printed lines was one for each of the run's ~100 batches (122 draws
    // in 0.56 s).
    let bound = (secs * 40.0).ceil() as usize + 10;
    assert!(
        draws <= bound,
        "the bar was drawn {draws} times in {secs:.2} s (at most {bound} at its own pace)"
    );
}
