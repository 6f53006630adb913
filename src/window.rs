//! Calendar arithmetic for tier windows: which window holds an instant, where
//! a window starts and ends, and the short label naming it in file names.
//!
//! Instants are seconds since the Unix epoch (UTC); `offset` is seconds east
//! of UTC, and window boundaries fall on local (UTC + offset) midnights.
//! Arithmetic runs in `i128` and results are checked back into `i64`, so no
//! input panics: a result that does not fit, or a `Custom(0)` span, is `None`.

/// Seconds in a day.
const DAY: i128 = 86_400;

/// The length of a tier's window.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Span {
    /// A UTC day (moved by the offset).
    Day,
    /// An ISO week, Monday to Sunday.
    Week,
    /// A calendar month.
    Month,
    /// A fixed number of seconds, windows aligned to the Unix epoch (plus the offset).
    Custom(u64),
}

/// Days since 1970-01-01 of the proleptic Gregorian date `y-m-d`
/// (Howard Hinnant's `days_from_civil`); `m` in 1..=12, `d` in 1..=31.
fn days_from_civil(y: i128, m: i128, d: i128) -> i128 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The proleptic Gregorian `(year, month, day)` of a day counted from
/// 1970-01-01 (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i128) -> (i128, i128, i128) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i128::from(m <= 2), m, d)
}

/// The local day (days since local 1970-01-01) holding instant `t`.
fn local_day(t: i64, offset: i32) -> i64 {
    // In i64 (a multiply by the inverse) unless `t + offset` leaves it, at
    // the extremes only: a 128-bit division is a library call. Either way
    // the day fits an i64 (|t + offset| < 2^64, a day is 86,400 s).
    match t.checked_add(i64::from(offset)) {
        Some(local) => local.div_euclid(DAY as i64),
        None => ((i128::from(t) + i128::from(offset)).div_euclid(DAY)) as i64,
    }
}

/// The first day of ISO week `w`: weeks start on Monday, and week 0 starts on
/// Monday 1969-12-29, three days before the epoch.
fn week_monday(w: i128) -> i128 {
    w * 7 - 3
}

/// The window of `span` holding instant `t` (UTC seconds) at `offset`.
pub(crate) fn index(span: Span, t: i64, offset: i32) -> Option<i64> {
    let idx = match span {
        Span::Day => i128::from(local_day(t, offset)),
        Span::Week => i128::from((local_day(t, offset) + 3).div_euclid(7)),
        Span::Month => {
            let (y, m, _) = civil_from_days(i128::from(local_day(t, offset)));
            y * 12 + m - 1
        }
        Span::Custom(0) => return None,
        Span::Custom(secs) => (i128::from(t) + i128::from(offset)).div_euclid(i128::from(secs)),
    };
    i64::try_from(idx).ok()
}

/// [`index`], or [`crate::Error::WindowUnavailable`] naming the instant
/// when no window of `span` holds it.
pub(crate) fn index_or_unavailable(span: Span, t: i64, offset: i32) -> crate::Result<i64> {
    index(span, t, offset).ok_or_else(|| crate::Error::WindowUnavailable {
        reason: format!(
            "no {span:?} window holds instant {}",
            crate::clock::rfc3339(t)
        ),
    })
}

/// The UTC instant (seconds) where window `index` of `span` begins at `offset`.
pub(crate) fn start(span: Span, index: i64, offset: i32) -> Option<i64> {
    let i = i128::from(index);
    let local = match span {
        Span::Day => i * DAY,
        Span::Week => week_monday(i) * DAY,
        Span::Month => days_from_civil(i.div_euclid(12), i.rem_euclid(12) + 1, 1) * DAY,
        Span::Custom(0) => return None,
        Span::Custom(secs) => i * i128::from(secs),
    };
    i64::try_from(local - i128::from(offset)).ok()
}

/// The UTC instant where window `index` ends: the start of window `index + 1`.
pub(crate) fn end(span: Span, index: i64, offset: i32) -> Option<i64> {
    start(span, index.checked_add(1)?, offset)
}

/// The nominal length of a window in seconds: the longest month for `Month`.
pub(crate) fn nominal_secs(span: Span) -> u64 {
    match span {
        Span::Day => 86_400,
        Span::Week => 7 * 86_400,
        Span::Month => 31 * 86_400,
        Span::Custom(secs) => secs,
    }
}

/// A year that a four-digit label can hold.
fn four_digit(y: i128) -> Option<i128> {
    (0..=9999).contains(&y).then_some(y)
}

/// The label of window `index` in file names, only `[0-9A-Za-z]`:
/// `20261129` (day), `2026W48` (ISO week-year and week), `202611` (month),
/// the index in decimal for `Custom` (`n5` for -5). `None` for years outside
/// 0..=9999 and for `Custom(0)`.
pub(crate) fn label(span: Span, index: i64) -> Option<String> {
    let i = i128::from(index);
    match span {
        Span::Day => {
            let (y, m, d) = civil_from_days(i);
            Some(format!("{:04}{m:02}{d:02}", four_digit(y)?))
        }
        Span::Week => {
            // The ISO week-year is the year of the week's Thursday.
            let thursday = week_monday(i) + 3;
            let (y, _, _) = civil_from_days(thursday);
            let week = (thursday - days_from_civil(y, 1, 1)) / 7 + 1;
            Some(format!("{:04}W{week:02}", four_digit(y)?))
        }
        Span::Month => Some(format!(
            "{:04}{:02}",
            four_digit(i.div_euclid(12))?,
            i.rem_euclid(12) + 1
        )),
        Span::Custom(0) => None,
        Span::Custom(_) if index < 0 => Some(format!("n{}", index.unsigned_abs())),
        Span::Custom(_) => Some(index.to_string()),
    }
}

/// A non-empty run of ASCII digits as a number; `None` for anything else.
fn digits(s: &str) -> Option<i128> {
    if s.is_empty() || s.len() > 20 || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// The index of the window that `label` names: the inverse of [`label`].
/// Rejects anything `label` would not produce (bad dates, week 53 of a year
/// with 52 weeks, signs, spaces, leading zeros, non-ASCII).
pub(crate) fn parse_label(span: Span, label: &str) -> Option<i64> {
    if !label.is_ascii() {
        return None;
    }
    let part = |from: usize, to: usize| digits(label.get(from..to)?);
    let guess = match (span, label.len()) {
        (Span::Day, 8) => {
            let (m, d) = (part(4, 6)?, part(6, 8)?);
            if !(1..=12).contains(&m) || !(1..=31).contains(&d) {
                return None;
            }
            days_from_civil(part(0, 4)?, m, d)
        }
        (Span::Week, 7) if label.as_bytes().get(4) == Some(&b'W') => {
            let (y, w) = (part(0, 4)?, part(5, 7)?);
            let jan4 = days_from_civil(y, 1, 4); // always in ISO week 1
            (jan4 + 3).div_euclid(7) + w - 1
        }
        (Span::Month, 6) => part(0, 4)? * 12 + part(4, 6)? - 1,
        (Span::Custom(_), _) => match label.strip_prefix('n') {
            Some(rest) => -digits(rest)?,
            None => digits(label)?,
        },
        _ => return None,
    };
    let index = i64::try_from(guess).ok()?;
    // Formatting back catches every out-of-range field and non-canonical form.
    (self::label(span, index)?.as_str() == label).then_some(index)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;
    use time::{Date, Duration, PrimitiveDateTime, UtcOffset};

    /// The UTC timestamp of a civil date-time at a given offset.
    fn ts(dt: PrimitiveDateTime, offset: i32) -> i64 {
        dt.assume_offset(UtcOffset::from_whole_seconds(offset).unwrap())
            .unix_timestamp()
    }

    /// The label of the window holding `t`.
    fn lab(span: Span, t: i64, offset: i32) -> String {
        label(span, index(span, t, offset).unwrap()).unwrap()
    }

    /// The day arithmetic in i64 agrees with the exact 128-bit formula,
    /// across day boundaries, before the epoch, and at the ends of i64
    /// where `t + offset` overflows it.
    #[test]
    fn local_day_matches_the_exact_formula_everywhere() {
        let exact = |t: i64, o: i32| (i128::from(t) + i128::from(o)).div_euclid(DAY);
        let mut ts = vec![
            0,
            -1,
            1,
            86_399,
            86_400,
            -86_400,
            -86_401,
            i64::MIN,
            i64::MAX,
            i64::MIN + 1,
            i64::MAX - 1,
            i64::MIN + 50_400,
            i64::MAX - 50_400,
        ];
        let mut x = 0x9e37_79b9_7f4a_7c15_u64;
        for _ in 0..10_000 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            ts.push(x as i64);
            ts.push((x % 8_000_000_000) as i64 - 4_000_000_000);
        }
        for &t in &ts {
            for o in [0, 1, -1, 3_600, -3_600, 50_400, -50_400, 86_399, -86_399] {
                assert_eq!(i128::from(local_day(t, o)), exact(t, o), "t {t} offset {o}");
                let week = index(Span::Week, t, o).unwrap();
                assert_eq!(
                    i128::from(week),
                    (exact(t, o) + 3).div_euclid(7),
                    "t {t} offset {o}"
                );
            }
        }
    }

    #[test]
    fn month_ends_and_leap_days() {
        for (dt, day, month) in [
            (datetime!(2026-01-31 23:59:59), "20260131", "202601"),
            (datetime!(2026-02-01 00:00:00), "20260201", "202602"),
            (datetime!(2024-02-29 12:00:00), "20240229", "202402"),
            (datetime!(2024-03-01 00:00:00), "20240301", "202403"),
            (datetime!(2100-02-28 23:59:59), "21000228", "210002"),
            (datetime!(2100-03-01 00:00:00), "21000301", "210003"),
            (datetime!(2000-02-29 00:00:00), "20000229", "200002"),
        ] {
            assert_eq!(lab(Span::Day, ts(dt, 0), 0), day);
            assert_eq!(lab(Span::Month, ts(dt, 0), 0), month);
        }
        assert_eq!(parse_label(Span::Day, "21000229"), None);
        assert_eq!(parse_label(Span::Day, "20230229"), None);
        assert!(parse_label(Span::Day, "20240229").is_some());
        let feb24 = parse_label(Span::Month, "202402").unwrap();
        assert_eq!(
            end(Span::Month, feb24, 0).unwrap() - start(Span::Month, feb24, 0).unwrap(),
            29 * 86_400
        );
    }

    #[test]
    fn iso_week_53_and_year_change() {
        for (dt, week) in [
            (datetime!(2021-01-01 00:00), "2020W53"),
            (datetime!(2027-01-03 23:59:59), "2026W53"),
            (datetime!(2027-01-04 00:00), "2027W01"),
            (datetime!(2024-12-30 00:00), "2025W01"),
        ] {
            assert_eq!(lab(Span::Week, ts(dt, 0), 0), week);
        }
        assert_eq!(parse_label(Span::Week, "2025W53"), None);
        assert_eq!(parse_label(Span::Week, "2026W00"), None);
        let a = ts(datetime!(2026-12-31 23:59:59), 0);
        let b = a + 1;
        assert_eq!(ts(datetime!(2027-01-01 00:00), 0), b);
        assert_eq!(
            lab(Span::Day, a, 0) + &lab(Span::Day, b, 0),
            "2026123120270101"
        );
        assert_eq!(
            lab(Span::Month, a, 0) + &lab(Span::Month, b, 0),
            "202612202701"
        );
        assert_eq!(index(Span::Week, a, 0), index(Span::Week, b, 0));
    }

    #[test]
    fn offsets_shift_boundaries() {
        // 2026-12-31 23:30 local at -05:00 is 2027-01-01 04:30 UTC.
        let t = ts(datetime!(2027-01-01 04:30), 0);
        assert_eq!(lab(Span::Day, t, -18_000), "20261231");
        assert_eq!(lab(Span::Month, t, -18_000), "202612");
        assert_eq!(lab(Span::Day, t, 0), "20270101");
        // Sunday 2026-11-29 20:00 UTC is Monday 01:30 at +05:30: a new week.
        let t = ts(datetime!(2026-11-29 20:00), 0);
        assert_eq!(lab(Span::Week, t, 0), "2026W48");
        assert_eq!(lab(Span::Week, t, 19_800), "2026W49");
        assert_eq!(
            start(Span::Week, index(Span::Week, t, 19_800).unwrap(), 19_800),
            Some(ts(datetime!(2026-11-30 00:00), 19_800))
        );
        // At +14:00, 2026-01-31 10:00 UTC is already February.
        let t = ts(datetime!(2026-01-31 10:00), 0);
        assert_eq!(lab(Span::Month, t, 50_400), "202602");
        assert_eq!(
            start(Span::Month, index(Span::Month, t, 50_400).unwrap(), 50_400),
            Some(ts(datetime!(2026-02-01 00:00), 50_400))
        );
    }

    #[test]
    fn before_1970() {
        assert_eq!(index(Span::Day, -1, 0), Some(-1));
        assert_eq!(index(Span::Month, -1, 0), Some(1969 * 12 + 11));
        let monday = ts(datetime!(1969-12-29 00:00), 0);
        assert_eq!(index(Span::Week, monday, 0), Some(0));
        assert_eq!(index(Span::Week, monday - 1, 0), Some(-1));
        assert_eq!(lab(Span::Week, monday - 1, 0), "1969W52");
        assert_eq!(lab(Span::Day, -1, 0), "19691231");
        assert_eq!(
            lab(Span::Month, ts(datetime!(1969-12-01 00:00), 0), 0),
            "196912"
        );
        assert_eq!(
            lab(Span::Day, ts(datetime!(1601-03-01 00:00), 0), 0),
            "16010301"
        );
    }

    #[test]
    fn custom_spans() {
        let hour = Span::Custom(3600);
        assert_eq!(index(hour, 7199, 0), Some(1));
        assert_eq!(index(hour, -1, 0), Some(-1));
        assert_eq!(label(hour, -5).as_deref(), Some("n5"));
        assert_eq!(parse_label(hour, "n5"), Some(-5));
        let six = Span::Custom(6 * 3600);
        // At +01:00, 05:00 UTC is 06:00 local: the second six-hour window.
        assert_eq!(index(six, 5 * 3600 - 1, 3600), Some(0));
        assert_eq!(index(six, 5 * 3600, 3600), Some(1));
        assert_eq!(start(six, 1, 3600), Some(5 * 3600));
        assert_eq!(nominal_secs(six), 21_600);
        let zero = Span::Custom(0);
        assert_eq!(
            (index(zero, 5, 0), start(zero, 1, 0), end(zero, 1, 0)),
            (None, None, None)
        );
        assert_eq!((label(zero, 1), parse_label(zero, "1")), (None, None));
        assert_eq!(
            label(Span::Custom(u64::MAX), i64::MIN).as_deref(),
            Some("n9223372036854775808")
        );
        assert_eq!(
            parse_label(Span::Custom(1), "n9223372036854775808"),
            Some(i64::MIN)
        );
    }

    #[test]
    fn round_trips() {
        let spans = [
            Span::Day,
            Span::Week,
            Span::Month,
            Span::Custom(3600),
            Span::Custom(7 * 3600 + 1),
        ];
        for span in spans {
            for offset in [0, -18_000, 19_800, 50_400, -43_200] {
                for i in (-30_000..30_000).step_by(37).chain([0, -1, 1]) {
                    let (s, e) = (
                        start(span, i, offset).unwrap(),
                        end(span, i, offset).unwrap(),
                    );
                    assert!(s < e);
                    assert_eq!(index(span, s, offset), Some(i), "{span:?} {i} {offset}");
                    assert_eq!(index(span, e - 1, offset), Some(i), "{span:?} {i} {offset}");
                    assert!((e - s) as u64 <= nominal_secs(span));
                    if let Some(l) = label(span, i) {
                        assert!(l.bytes().all(|b| b.is_ascii_alphanumeric()));
                        assert_eq!(parse_label(span, &l), Some(i), "{l}");
                    }
                }
            }
        }
    }

    #[test]
    fn malformed_labels() {
        let reject = |span: Span, labels: &[&str]| {
            for l in labels {
                assert_eq!(parse_label(span, l), None, "{span:?} {l:?}");
            }
        };
        reject(
            Span::Day,
            &["", "2026113", "20261131", "20261300", "+2026112"],
        );
        reject(
            Span::Day,
            &["2026112é", "202611299", "00000000", " 2026113"],
        );
        reject(
            Span::Week,
            &["2026w48", "2026W4", "2026W+4", "é026W48", "2026W54"],
        );
        reject(
            Span::Month,
            &["202600", "202613", "20261", "2026 1", "2026011"],
        );
        reject(
            Span::Custom(60),
            &["-5", "n0", "05", "n", "+5", "", "٣", "1e3"],
        );
        reject(
            Span::Custom(60),
            &["9223372036854775808", "n9223372036854775809"],
        );
    }

    #[test]
    fn extremes_never_panic() {
        let spans = [
            Span::Day,
            Span::Week,
            Span::Month,
            Span::Custom(1),
            Span::Custom(u64::MAX),
            Span::Custom(0),
        ];
        for span in spans {
            for v in [i64::MIN, i64::MIN + 1, -1, 0, i64::MAX - 1, i64::MAX] {
                for offset in [i32::MIN, -1, 0, i32::MAX] {
                    let _ = (
                        index(span, v, offset),
                        start(span, v, offset),
                        end(span, v, offset),
                    );
                }
                let _ = label(span, v);
            }
        }
        assert_eq!(start(Span::Day, i64::MAX, 0), None);
        assert_eq!(end(Span::Month, i64::MAX, 0), None);
        assert_eq!(label(Span::Day, i64::MAX), None);
        assert_eq!(label(Span::Month, -1), None);
        assert_eq!(
            index(Span::Day, i64::MIN, i32::MIN),
            Some((i64::MIN as i128 + i32::MIN as i128).div_euclid(86_400) as i64)
        );
    }

    #[test]
    fn cross_check_with_time_crate() {
        let mut date: Date = Date::from_calendar_date(1900, time::Month::January, 1).unwrap();
        while date <= Date::from_calendar_date(2200, time::Month::December, 31).unwrap() {
            let midnight = ts(date.midnight(), 0);
            let day = index(Span::Day, midnight, 0).unwrap();
            assert_eq!(start(Span::Day, day, 0), Some(midnight));
            assert_eq!(day, i64::from(date.to_julian_day()) - 2_440_588);
            let (y, m, d) = (date.year(), u8::from(date.month()), date.day());
            let ymd = format!("{y:04}{m:02}{d:02}");
            assert_eq!(label(Span::Day, day).as_ref(), Some(&ymd));
            assert_eq!(parse_label(Span::Day, &ymd), Some(day));
            let (wy, w, _) = date.to_iso_week_date();
            let week = index(Span::Week, midnight, 0).unwrap();
            let monday = date - Duration::days(date.weekday().number_days_from_monday().into());
            assert_eq!(label(Span::Week, week).unwrap(), format!("{wy:04}W{w:02}"));
            assert_eq!(start(Span::Week, week, 0), Some(ts(monday.midnight(), 0)));
            let month = index(Span::Month, midnight, 0).unwrap();
            assert_eq!(label(Span::Month, month).unwrap(), format!("{y:04}{m:02}"));
            let first = date.replace_day(1).unwrap().midnight();
            assert_eq!(start(Span::Month, month, 0), Some(ts(first, 0)));
            if date.to_julian_day() % 97 == 0 {
                for offset in [-18_000, 19_800, 50_400] {
                    let local = ts(date.midnight(), offset);
                    assert_eq!(start(Span::Day, day, offset), Some(local));
                    assert_eq!(index(Span::Day, local, offset), Some(day));
                    assert_eq!(index(Span::Day, local - 1, offset), Some(day - 1));
                    assert_eq!(
                        start(Span::Week, week, offset),
                        Some(ts(monday.midnight(), offset))
                    );
                    assert_eq!(index(Span::Month, local, offset), Some(month));
                }
            }
            date = date.next_day().unwrap();
        }
    }
}
