//! Work and memory on hostile input: a URL at the line limit built of the
//! worst shapes canonicalizes in time linear in its length, and the CLI's
//! reader holds a bounded number of bytes whatever the lines are.

mod cli_support;

use std::time::{Duration, Instant};

use timebloom::canonical::{canonicalize, canonicalize_strict};

/// About one megabyte: sixteen times the CLI's default line limit.
const MB: usize = 1 << 20;

/// `unit` repeated to about `bytes` bytes.
fn repeat_to(unit: &str, bytes: usize) -> String {
    unit.repeat(bytes / unit.len())
}

/// Canonicalizes `url` with the default and the strict rules, each within
/// `limit` (generous: a quadratic step on a megabyte takes minutes), and
/// returns the default form (or the error, as text).
#[track_caller]
fn timed(url: &str, limit: Duration) -> Result<String, String> {
    let start = Instant::now();
    let default = canonicalize(url).map_err(|e| e.to_string());
    let _ = canonicalize_strict(url);
    let took = start.elapsed();
    assert!(
        took < limit,
        "{} bytes starting {:?} took {took:?}",
        url.len(),
        &url[..url.len().min(40)]
    );
    default
}

#[test]
fn dot_segments_by_the_hundred_thousand_resolve_in_linear_time() {
    let limit = Duration::from_secs(5);
    for unit in [
        "/.",
        "/..",
        "/%2e%2e",
        "/%2E",
        "/a/..",
        "\\..",
        "/.;jsessionid=x",
    ] {
        let url = format!("http://a.com{}", repeat_to(unit, MB));
        assert_eq!(timed(&url, limit).as_deref(), Ok("http://a.com/"), "{unit}");
    }
    // Deep, then all the way up again.
    let url = format!(
        "http://a.com{}{}",
        "/a".repeat(MB / 4),
        "/..".repeat(MB / 4)
    );
    assert_eq!(timed(&url, limit).as_deref(), Ok("http://a.com/"));
}

#[test]
fn a_query_of_many_parameters_sorts_in_n_log_n() {
    let limit = Duration::from_secs(5);
    let n = MB / 12;
    let params: Vec<String> = (0..n).rev().map(|i| format!("a{i:08}=1")).collect();
    let url = format!("http://a.com/?{}", params.join("&"));
    let got = timed(&url, limit).unwrap();
    let mut sorted = params.clone();
    sorted.sort();
    assert_eq!(got, format!("http://a.com/?{}", sorted.join("&")));
    // Parameters that differ only at their end: every comparison of the
    // sort reads a whole name.
    let prefix = "p".repeat(1000);
    let params: Vec<String> = (0..MB / 1010)
        .rev()
        .map(|i| format!("{prefix}{i:06}"))
        .collect();
    let got = timed(&format!("http://a.com/?{}", params.join("&")), limit).unwrap();
    assert!(got.ends_with(&params[0]), "{}", &got[got.len() - 20..]);
    // Equal parameters, empty ones, parameters the rules remove.
    let same = timed(&format!("http://a.com/?{}", repeat_to("a&", MB)), limit).unwrap();
    assert_eq!(same.len(), "http://a.com/?".len() + MB - 1);
    let amps = format!("http://a.com/?{}", "&".repeat(MB));
    assert_eq!(timed(&amps, limit).as_deref(), Ok("http://a.com/"));
    let sids = repeat_to("sid=0123456789abcdef0123456789abcdef&", MB);
    let url = format!("http://a.com/?{sids}");
    assert_eq!(timed(&url, limit).as_deref(), Ok("http://a.com/"));
}

#[test]
fn escapes_and_encoded_bytes_by_the_megabyte_take_linear_time() {
    let limit = Duration::from_secs(5);
    for (unit, out_per_unit) in [("%25", 3), ("%", 3), ("%41", 1), ("%C3", 3), ("é", 6)] {
        let path = repeat_to(unit, MB);
        let got = timed(&format!("http://a.com/{path}"), limit).unwrap();
        let units = path.len() / unit.len();
        assert_eq!(
            got.len(),
            "http://a.com/".len() + units * out_per_unit,
            "{unit}"
        );
    }
    let got = timed(&format!("http://a.com/?{}", "%".repeat(MB)), limit).unwrap();
    assert_eq!(got.len(), "http://a.com/?".len() + 3 * MB);
}

#[test]
fn hosts_and_authorities_at_the_megabyte_take_linear_time() {
    let limit = Duration::from_secs(5);
    let many_labels = format!("http://{}com/", repeat_to("a.", MB));
    assert_eq!(timed(&many_labels, limit).unwrap(), many_labels);
    let long_label = format!("http://{}.com/", "a".repeat(MB));
    assert_eq!(timed(&long_label, limit).unwrap(), long_label);
    // IDNA: every label goes through punycode.
    let idna = timed(&format!("http://{}com/", repeat_to("é.", MB)), limit).unwrap();
    assert!(
        idna.starts_with("http://xn--9ca.xn--9ca."),
        "{}",
        &idna[..40]
    );
    // Labels of 999 distinct code points, each as long as IDNA encodes
    // (punycode takes time quadratic in a label's length, so these cost
    // most per byte: about 0.8 s a megabyte in a release build).
    let distinct: String = (0..999)
        .map(|i| char::from_u32(0x4E00 + i).unwrap())
        .collect();
    let labels = vec![distinct.as_str(); MB / 4 / distinct.len()].join(".");
    assert!(timed(&format!("http://{labels}.com/"), limit).is_err());
    for host in [
        format!("xn--{}.com", "a".repeat(MB)),
        vec![format!("xn--{}", "a".repeat(1990)); MB / 2000].join("."),
        format!("{}.com", "é".repeat(MB / 2)),
        format!("{}1", repeat_to("1.", MB)),
        format!("[{}1]", "0".repeat(MB)),
        format!("[fe80::1%25{}]", "a".repeat(MB)),
    ] {
        let got = timed(&format!("http://{host}/"), limit);
        assert!(got.is_err(), "{:?}", &host[..20]);
    }
    for authority in [
        format!("{}a.com", "@".repeat(MB)),
        format!("{}@a.com", ":".repeat(MB)),
        format!("{}a.com", "\\".repeat(MB)),
        format!("1.1.1.{}1", "0".repeat(MB)),
    ] {
        let got = timed(&format!("http://{authority}/"), limit).unwrap();
        assert!(got.len() < 20, "{got:?}");
    }
}

/// The reader hands a batch over once its lines hold a few megabytes,
/// and lets go of a long line's buffer afterwards: lines at the limit
/// (64 KiB by default) by the thousand, read from a file that never makes
/// the reader wait, were held a whole batch at once (up to 4096 lines, each
/// in a buffer of twice the limit: 512 MiB) and kept after.
#[cfg(target_os = "linux")]
#[test]
fn long_lines_by_the_thousand_are_not_held_at_once() {
    use std::io::{BufRead, BufReader, Write};

    use cli_support::*;

    let (tmp, db) = temp_db();
    let long = format!("http://a.com/{}\n", "a".repeat(65_536 - 13));
    let mut data = long.repeat(2000).into_bytes();
    data.extend_from_slice(b"http://done.example/\n");
    let file = tmp.path().join("keys.gz");
    std::fs::write(&file, gzip(&data)).unwrap();
    // Stdin after the file: the command waits there, alive, once the
    // file's lines are printed.
    let mut child = spawn_piped(&mut filter_new_command(&db, &[file.to_str().unwrap(), "-"]));
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while out.read_line(&mut line).unwrap() > 0 && !line.ends_with("done.example/\n") {
        line.clear();
    }
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).unwrap();
    stdin.write_all(b"http://after.example/\n").unwrap();
    drop(stdin);
    assert!(child.wait().unwrap().success());
    let peak_kib: u64 = (status.lines())
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM in /proc/PID/status");
    assert!(
        peak_kib < 48 * 1024,
        "peak resident memory {peak_kib} KiB for 128 MiB of input"
    );
}
