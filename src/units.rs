//! Numbers for people: byte sizes and durations, shared by the `plan`
//! module and the `timebloom` binary.

/// `1.5 MiB`: binary units, one decimal.
pub fn fmt_bytes(b: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < UNITS.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", UNITS[u])
    }
}

/// `6d 12h`, `3h 5min`, `45s`: the two largest non-zero units.
pub fn fmt_secs(s: u64) -> String {
    let parts = [
        (s / 86_400, "d"),
        (s / 3600 % 24, "h"),
        (s / 60 % 60, "min"),
        (s % 60, "s"),
    ];
    let shown: Vec<String> = (parts.iter())
        .skip_while(|(n, _)| *n == 0)
        .take(2)
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if shown.is_empty() {
        "0s".into()
    } else {
        shown.join(" ")
    }
}
