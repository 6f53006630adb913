//! Numbers for people: byte sizes, durations and rates, shared by the
//! `plan` module, error messages and the `timebloom` binary.

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
    let largest = (time_units(s).into_iter())
        .skip_while(|(n, _)| *n == 0)
        .take(2);
    join_units(largest)
}

/// `3649d 5h 30min`: every non-zero unit, so nothing is rounded away.
// The library's error messages use it; the binary, which compiles this
// file as its own module too, does not.
#[allow(dead_code)]
pub fn fmt_secs_full(s: u64) -> String {
    join_units(time_units(s).into_iter())
}

/// Seconds as days, hours, minutes and seconds.
fn time_units(s: u64) -> [(u64, &'static str); 4] {
    [
        (s / 86_400, "d"),
        (s / 3600 % 24, "h"),
        (s / 60 % 60, "min"),
        (s % 60, "s"),
    ]
}

/// The non-zero units of `parts`, `0s` when there are none.
fn join_units(parts: impl Iterator<Item = (u64, &'static str)>) -> String {
    let shown: Vec<String> = parts
        .filter(|(n, _)| *n > 0)
        .map(|(n, u)| format!("{n}{u}"))
        .collect();
    if shown.is_empty() {
        "0s".into()
    } else {
        shown.join(" ")
    }
}

/// A rate as given, the shortest text that reads back as the same value:
/// `0.001` and `0.25` as decimals, `1e-300` and `2.5e-7` (below 1e-4) or
/// `1e300` (from 1e6) in exponent form, where a decimal would spell out
/// hundreds of zeros.
pub fn fmt_rate(r: f64) -> String {
    let a = r.abs();
    if a == 0.0 || !a.is_finite() || (1e-4..1e6).contains(&a) {
        format!("{r}")
    } else {
        format!("{r:e}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_rate_prints_short() {
        assert_eq!(fmt_rate(0.001), "0.001");
        assert_eq!(fmt_rate(0.5), "0.5");
        assert_eq!(fmt_rate(1e-300), "1e-300");
        assert_eq!(fmt_rate(2.5e-7), "2.5e-7");
        assert_eq!(fmt_rate(1e300), "1e300");
        assert_eq!(fmt_rate(0.0), "0");
        assert_eq!(fmt_rate(f64::NAN), "NaN");
    }

    /// The (number, seconds per unit) parts of a printed duration,
    /// checked to come largest unit first.
    fn read_units(text: &str) -> Vec<(u128, u128)> {
        let mut last = u128::MAX;
        let parts: Vec<(u128, u128)> = (text.split(' '))
            .map(|p| {
                let n = p.bytes().take_while(u8::is_ascii_digit).count();
                let unit = match &p[n..] {
                    "d" => 86_400,
                    "h" => 3600,
                    "min" => 60,
                    "s" => 1,
                    other => panic!("unit {other:?} in {text}"),
                };
                assert!(unit < last, "{text}: units out of order");
                last = unit;
                (p[..n].parse().unwrap(), unit)
            })
            .collect();
        parts
    }

    proptest! {
        /// Any rate prints in at most 24 characters and reads back as the
        /// same value.
        #[test]
        fn a_rate_reads_back(r in any::<f64>().prop_filter("finite", |r| r.is_finite())) {
            let text = fmt_rate(r);
            prop_assert!(text.len() <= 24, "{}", text);
            prop_assert_eq!(text.parse::<f64>().unwrap(), r);
        }

        /// A size prints as whole bytes below 1 KiB, and above as a value
        /// from 1 to 1024 of the largest unit it reaches (TiB at most),
        /// within the rounding of one decimal.
        #[test]
        fn a_size_prints_in_its_unit(b in prop_oneof![0u64..1 << 22, any::<u64>()]) {
            let text = fmt_bytes(b);
            let (num, unit) = text.split_once(' ').unwrap();
            let exp = ["B", "KiB", "MiB", "GiB", "TiB"].iter().position(|u| *u == unit).unwrap();
            if exp == 0 {
                prop_assert_eq!(num.parse::<u64>(), Ok(b));
                prop_assert!(b < 1024);
            } else {
                let v: f64 = num.parse().unwrap();
                let scale = 1024f64.powi(exp as i32);
                prop_assert!(v >= 1.0 && (exp == 4 || v <= 1024.0), "{}", text);
                prop_assert!((v * scale - b as f64).abs() <= 0.05 * scale + 1e-9 * b as f64, "{}", text);
            }
        }

        /// A duration prints as one or two parts, largest unit first, and
        /// never more than it is.
        #[test]
        fn a_duration_prints_its_two_largest_units(s in prop_oneof![0u64..1 << 30, any::<u64>()]) {
            let text = fmt_secs(s);
            let parts = read_units(&text);
            prop_assert!(!parts.is_empty() && parts.len() <= 2, "{}", text);
            let total: u128 = parts.iter().map(|(n, unit)| n * unit).sum();
            prop_assert!(total <= u128::from(s) && u128::from(s) - total < 86_400, "{}", text);
        }

        /// The full form reads back as exactly the seconds it was given.
        #[test]
        fn a_full_duration_adds_up_to_its_seconds(s in prop_oneof![0u64..1 << 30, any::<u64>()]) {
            let text = fmt_secs_full(s);
            let total: u128 = read_units(&text).iter().map(|(n, unit)| n * unit).sum();
            prop_assert_eq!(total, u128::from(s), "{}", text);
        }
    }
}
