//! Text in and out of the command line: the stats table, and parsing of
//! instants, offsets, durations, rates and tier lists.

use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use timebloom::{Kind, SegmentStats, Stats, TierStats};

use crate::units::{fmt_bytes, fmt_rate, fmt_secs};
use crate::TierList;

// ---- stats --------------------------------------------------------------------

/// The stats of the engine called `name`, whose bytes are `place` ("on
/// disk", "in Redis (planned)").
pub fn stats_table(name: &str, place: &str, s: &Stats) -> String {
    let mut t = String::new();
    write_summary(&mut t, name, place, s);
    write_warnings(&mut t, s);
    for tier in &s.tiers {
        write_tier(&mut t, tier);
    }
    t
}

/// The engine's first two lines: name, instant, generation, size, and the
/// planned rate and keys per day.
fn write_summary(t: &mut String, name: &str, place: &str, s: &Stats) {
    let _ = writeln!(
        t,
        "engine {name}  at {}  generation {}  {} {place}\nfpr {} per lookup, {} keys/day planned",
        fmt_instant(s.now),
        s.generation,
        fmt_bytes(s.bytes),
        fmt_rate(s.fpr),
        s.expected_items_per_day
    );
}

/// A line for each of: windows lost at this open, windows lost earlier,
/// windows recovered without a shadow copy, a clock behind the newest
/// window (each only when there is something to say).
fn write_warnings(t: &mut String, s: &Stats) {
    if !s.lost_windows.is_empty() {
        let _ = writeln!(
            t,
            "LOST (damaged or missing, opened degraded): {}",
            s.lost_windows.join(", ")
        );
    }
    if !s.lost_earlier.is_empty() {
        let _ = writeln!(
            t,
            "lost by an earlier degraded open, their keys looked for in the other tiers: {}",
            s.lost_earlier.join(", ")
        );
    }
    if !s.unrestored_windows.is_empty() {
        let _ = writeln!(
            t,
            "RECOVERED WITHOUT A DAMAGED SHADOW COPY (opened degraded; counts may be off): {}",
            s.unrestored_windows.join(", ")
        );
    }
    if s.clock_behind_secs > 0 {
        let _ = writeln!(
            t,
            "CLOCK BEHIND by {}: new keys are dated as of the newest window until it catches up",
            fmt_secs(s.clock_behind_secs)
        );
    }
}

/// One tier: its heading, the column names, a row per segment and the
/// note on how much older its answers may be.
fn write_tier(t: &mut String, tier: &TierStats) {
    write_tier_heading(t, tier);
    write_column_names(t, tier.kind);
    for g in &tier.segments {
        write_segment_row(t, tier.kind, g);
    }
    let _ = writeln!(
        t,
        "  (a horizon answered by this tier may also report keys up to {} older)",
        fmt_secs(tier.coarseness_secs)
    );
}

/// `tier 7d  bloom  7 windows of 1d  covers 6d 12h  (answers check)`,
/// after a blank line.
fn write_tier_heading(t: &mut String, tier: &TierStats) {
    let kind = match tier.kind {
        Kind::Bloom => "bloom",
        Kind::Counting => "counting",
        Kind::Fingerprint => "fingerprint",
    };
    let windows = match (tier.kind, tier.retention) {
        (Kind::Fingerprint, _) => "days in one table".to_string(),
        (_, 1) => format!("window of {}", fmt_secs(tier.window_secs)),
        _ => format!("windows of {}", fmt_secs(tier.window_secs)),
    };
    let _ = writeln!(
        t,
        "\ntier {}  {kind}  {} {windows}  covers {}{}",
        tier.tier,
        tier.retention,
        fmt_secs(tier.covers_secs),
        if tier.answers_contains {
            "  (answers check)"
        } else {
            ""
        }
    );
}

/// The column names of a tier of `kind`: a counting tier adds
/// `saturated`, a fingerprint table `bits/key` and `moves`.
fn write_column_names(t: &mut String, kind: Kind) {
    let _ = write!(
        t,
        "  {:<10} {:<7} {:>10} {:>10} {:>8} {:>12} {:>10}",
        "window", "state", "subfilters", "size", "fill", "est. items", "est. fpr"
    );
    let _ = writeln!(
        t,
        "{}",
        match kind {
            Kind::Counting => "  saturated",
            Kind::Fingerprint => "  bits/key      moves",
            Kind::Bloom => "",
        }
    );
}

/// One segment's row, under [`write_column_names`] of its tier's `kind`.
fn write_segment_row(t: &mut String, kind: Kind, g: &SegmentStats) {
    let _ = write!(
        t,
        "  {:<10} {:<7} {:>10} {:>10} {:>7.3}% {:>12} {:>10.2e}",
        g.window,
        g.state,
        g.subfilters,
        fmt_bytes(g.bytes),
        g.fill * 100.0,
        g.estimated_items,
        g.estimated_fpr
    );
    match kind {
        Kind::Counting => {
            let _ = write!(t, " {:>10}", g.saturated);
        }
        Kind::Fingerprint => {
            let bits = match g.estimated_items {
                0 => "-".to_string(),
                _ => format!("{:.2}", g.bits_per_key),
            };
            let _ = write!(t, " {bits:>9} {:>10}", g.moves);
        }
        Kind::Bloom => {}
    }
    t.push('\n');
}

// ---- parsing: instants, offsets, durations, flags -------------------------------

/// The latest instant the engine accepts: 9999-12-31T23:59:59Z.
pub const MAX_INSTANT: i64 = 253_402_300_799;

/// `2026-11-29T12:00:00Z` for seconds since the Unix epoch.
pub fn fmt_instant(t: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(t)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| t.to_string())
}

/// A fixed-width run of ASCII digits.
fn digits(b: &[u8]) -> Option<i64> {
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(b.iter().fold(0, |n, d| n * 10 + i64::from(d - b'0')))
}

/// `Z` or `±HH:MM` (also `±HH`) to seconds east of UTC.
fn offset_secs(b: &[u8]) -> Option<i32> {
    let (sign, rest) = match b {
        [b'Z' | b'z'] => return Some(0),
        [b'+', rest @ ..] => (1, rest),
        [b'-', rest @ ..] => (-1, rest),
        _ => return None,
    };
    let (h, m) = match rest {
        [h1, h2] => (digits(&[*h1, *h2])?, 0),
        [h1, h2, b':', m1, m2] => (digits(&[*h1, *h2])?, digits(&[*m1, *m2])?),
        _ => return None,
    };
    if h > 23 || m > 59 {
        return None;
    }
    i32::try_from(sign * (h * 3600 + m * 60)).ok()
}

/// An RFC 3339 instant; the fraction of a second is dropped (the engine
/// counts whole seconds).
pub fn parse_rfc3339(s: &str) -> Result<SystemTime, String> {
    let t = time::OffsetDateTime::parse(s.trim(), &time::format_description::well_known::Rfc3339)
        .map_err(|_| {
            "not an RFC 3339 instant (like 2026-11-29T12:00:00Z or 2026-11-29T14:00:00+02:00)"
                .to_string()
        })?
        .unix_timestamp();
    if !(0..=MAX_INSTANT).contains(&t) {
        return Err("the instant must lie between 1970 and 9999 (UTC)".into());
    }
    Ok(UNIX_EPOCH + Duration::from_secs(t.unsigned_abs()))
}

pub fn parse_offset(s: &str) -> Result<i32, String> {
    offset_secs(s.trim().as_bytes()).ok_or_else(|| "expected Z or ±HH:MM, like +02:00".into())
}

pub fn fmt_offset(secs: i32) -> String {
    let sign = if secs < 0 { '-' } else { '+' };
    let a = secs.unsigned_abs();
    format!("{sign}{:02}:{:02}", a / 3600, a / 60 % 60)
}

/// `3d`, `12h`, `90min`, `30s`, `2w`, or several run together (`1d12h`).
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = |why: &str| format!("{why} (examples: 3d, 12h, 90min, 30s, 2w, 1d12h)");
    let mut rest = s.trim();
    if rest.is_empty() {
        return Err(bad("empty duration"));
    }
    let mut total: u64 = 0;
    while !rest.is_empty() {
        let n = rest.bytes().take_while(u8::is_ascii_digit).count();
        let count: u64 = match rest[..n].parse() {
            Ok(c) => c,
            // All digits, but more than a u64 holds.
            Err(_) if n > 0 => return Err(bad("too long")),
            Err(_) => return Err(bad("expected a number")),
        };
        rest = &rest[n..];
        let u = rest.bytes().take_while(u8::is_ascii_alphabetic).count();
        let unit = match &rest[..u] {
            "" if rest.starts_with(['.', ',']) => {
                return Err(bad("whole numbers only: write 1d12h for 1.5d"))
            }
            "" => return Err(bad("a unit is needed")),
            "s" => 1,
            "min" => 60,
            "h" => 3600,
            "d" => 86_400,
            "w" => 7 * 86_400,
            "m" => return Err(bad("\"m\" is ambiguous: write min for minutes")),
            _ => return Err(bad("unknown unit")),
        };
        rest = &rest[u..];
        total = (count.checked_mul(unit))
            .and_then(|x| total.checked_add(x))
            .ok_or_else(|| bad("too long"))?;
    }
    Ok(Duration::from_secs(total))
}

pub fn parse_tier_list(s: &str) -> Result<TierList, String> {
    timebloom::parse_tiers(s)
        .map(TierList)
        .map_err(|e| e.to_string())
}

pub fn parse_fpr(s: &str) -> Result<f64, String> {
    match s.trim().parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err("expected a rate strictly between 0 and 1, like 0.001".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rfc3339_instants() {
        let secs =
            |s: &str| parse_rfc3339(s).map(|t| t.duration_since(UNIX_EPOCH).unwrap().as_secs());
        assert_eq!(secs("1970-01-01T00:00:00Z"), Ok(0));
        assert_eq!(secs("2026-11-29T12:00:00Z"), Ok(1_795_953_600));
        assert_eq!(secs("2026-11-29T14:00:00+02:00"), Ok(1_795_953_600));
        assert_eq!(secs("2026-11-29t11:30:00.999-00:30"), Ok(1_795_953_600));
        assert_eq!(secs("2024-02-29T00:00:00z"), Ok(1_709_164_800));
        assert_eq!(secs("9999-12-31T23:59:59Z"), Ok(MAX_INSTANT as u64));
        for bad in [
            "",
            "2026-11-29",
            "2026-11-29T12:00:00",
            "2026-11-29T12:00Z",
            "2025-02-29T00:00:00Z",
            "2026-13-01T00:00:00Z",
            "2026-11-29T12:00:00.Z",
            "2026-11-29T12:00:00+2:00",
            "2026-11-29T12:00:00+24:00",
            "1969-12-31T23:59:59Z",
            "9999-12-31T23:59:59-00:01",
            "2026-11-29T12:00:00Zjunk",
            "２026-11-29T12:00:00Z",
            "+026-11-29T12:00:00Z",
        ] {
            assert!(parse_rfc3339(bad).is_err(), "{bad:?}");
        }
        assert_eq!(fmt_instant(1_795_953_600), "2026-11-29T12:00:00Z");
        assert_eq!(fmt_instant(MAX_INSTANT), "9999-12-31T23:59:59Z");
    }

    #[test]
    fn parses_durations_and_offsets() {
        let d = |s: &str| parse_duration(s).map(|d| d.as_secs());
        assert_eq!(d("3d"), Ok(3 * 86_400));
        assert_eq!(d("90min"), Ok(5400));
        assert_eq!(d("2w"), Ok(14 * 86_400));
        assert_eq!(d("1d12h30s"), Ok(86_400 + 12 * 3600 + 30));
        for bad in [
            "",
            "3",
            "d",
            "3m",
            "3y",
            "-3d",
            "3 d",
            "99999999999999999999s",
            "é",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad:?}");
        }
        // Each error says what is wrong with the number or the unit.
        for (bad, why) in [
            ("99999999999999999999d", "too long"),
            ("1.5d", "whole numbers only"),
            ("3", "a unit is needed"),
            ("-1d", "expected a number"),
            ("3y", "unknown unit"),
        ] {
            let err = parse_duration(bad).unwrap_err();
            assert!(err.starts_with(why), "{bad:?}: {err}");
        }
        assert_eq!(parse_offset("+02:00"), Ok(7200));
        assert_eq!(parse_offset("-05:30"), Ok(-19_800));
        assert_eq!(parse_offset("Z"), Ok(0));
        assert!(parse_offset("+24:00").is_err() && parse_offset("2").is_err());
        assert_eq!(fmt_offset(-19_800), "-05:30");
        assert_eq!(fmt_secs(6 * 86_400 + 12 * 3600 + 5), "6d 12h");
        assert_eq!(fmt_secs(0), "0s");
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        /// Duration-like text: numbers (some past a `u64`) and units (some
        /// wrong), run together, with the odd space, sign or point.
        fn duration_like() -> impl Strategy<Value = String> {
            proptest::string::string_regex(
                r"( ?[-+]?([0-9]{0,3}|[0-9]{18,22})([.,][0-9])?(s|min|h|d|w|m|y|S|mi|)){0,4} ?",
            )
            .unwrap()
        }

        /// Tier-list-like text: the units, lengths and kinds `--tiers` reads,
        /// and near misses.
        fn tiers_like() -> impl Strategy<Value = String> {
            proptest::string::string_regex(
                r"( ?[0-9]{0,4}(d|w|m|h|x[0-9]{0,6}(s|min|h|d|m)|y|)(:counting|:bloom|:fingerprint|:x)? ?,){0,3}[0-9]{1,3}(d|w|m|h|x6h)",
            )
            .unwrap()
        }

        proptest! {
            /// No text makes a parser panic; what they accept is in range.
            #[test]
            fn arbitrary_text_never_panics(s in any::<String>()) {
                let _ = parse_duration(&s);
                if let Ok(o) = parse_offset(&s) {
                    prop_assert!(o.abs() < 86_400);
                }
                if let Ok(t) = parse_rfc3339(&s) {
                    let secs = t.duration_since(UNIX_EPOCH).unwrap().as_secs();
                    prop_assert!(secs <= MAX_INSTANT as u64);
                }
                if let Ok(p) = parse_fpr(&s) {
                    prop_assert!(p > 0.0 && p < 1.0);
                }
                let _ = parse_tier_list(&s);
            }

            /// A duration is the sum of its parts; a `u64` overflow is
            /// refused, never wrapped.
            #[test]
            fn a_duration_is_the_sum_of_its_parts(s in duration_like()) {
                let mut sum = Some(0u64);
                let mut valid = !s.trim().is_empty();
                let mut rest = s.trim();
                while valid && !rest.is_empty() {
                    let n = rest.bytes().take_while(u8::is_ascii_digit).count();
                    let u = rest[n..].bytes().take_while(u8::is_ascii_alphabetic).count();
                    let unit = match &rest[n..n + u] {
                        "s" => Some(1u64),
                        "min" => Some(60),
                        "h" => Some(3600),
                        "d" => Some(86_400),
                        "w" => Some(604_800),
                        _ => None,
                    };
                    match (rest[..n].parse::<u64>(), unit) {
                        (Ok(c), Some(unit)) => {
                            sum = sum.and_then(|t| t.checked_add(c.checked_mul(unit)?));
                        }
                        (Err(_), _) if n > 0 => sum = None,
                        _ => valid = false,
                    }
                    rest = &rest[n + u..];
                }
                let got = parse_duration(&s).map(|d| d.as_secs());
                match (valid, sum) {
                    (true, Some(want)) => prop_assert_eq!(got, Ok(want), "{:?}", s),
                    (true, None) => prop_assert!(got.unwrap_err().starts_with("too long")),
                    (false, _) => prop_assert!(got.is_err(), "{:?} parsed", s),
                }
            }

            /// What `fmt_secs` prints (spaces removed) parses back to the
            /// duration cut to its two largest units.
            #[test]
            fn a_printed_duration_reparses(secs in prop_oneof![0u64..200_000_000, any::<u64>()]) {
                let text = fmt_secs(secs).replace(' ', "");
                let got = parse_duration(&text).map(|d| d.as_secs());
                let units = [86_400, 3600, 60, 1];
                let top = units.iter().position(|&u| secs >= u).unwrap_or(3);
                let keep = units[(top + 1).min(3)];
                prop_assert_eq!(got, Ok(secs - secs % keep), "{}", text);
                // Every unit count printed on its own reparses exactly.
                for (u, name) in [(1u64, "s"), (60, "min"), (3600, "h"), (86_400, "d"), (604_800, "w")] {
                    let n = secs / u;
                    prop_assert_eq!(parse_duration(&format!("{n}{name}")).map(|d| d.as_secs()), Ok(n * u));
                }
            }

            /// An offset prints (`fmt_offset`) as text that parses to it.
            #[test]
            fn an_offset_round_trips(mins in -(23 * 60 + 59)..=(23 * 60 + 59i32)) {
                let secs = mins * 60;
                prop_assert_eq!(parse_offset(&fmt_offset(secs)), Ok(secs));
            }

            /// An instant prints (`fmt_instant`) as text that parses to it.
            #[test]
            fn an_instant_round_trips(t in 0..=MAX_INSTANT) {
                let back = parse_rfc3339(&fmt_instant(t))
                    .map(|s| s.duration_since(UNIX_EPOCH).unwrap().as_secs());
                prop_assert_eq!(back, Ok(t as u64));
            }

            /// A tier list that parses prints (comma-joined `Display`) as
            /// text that parses to the same tiers.
            #[test]
            fn a_tier_list_round_trips(s in tiers_like()) {
                if let Ok(TierList(tiers)) = parse_tier_list(&s) {
                    let text: Vec<String> = tiers.iter().map(ToString::to_string).collect();
                    let again = parse_tier_list(&text.join(",")).map(|t| t.0);
                    prop_assert_eq!(again, Ok(tiers), "{:?}", s);
                }
            }
        }
    }
}
