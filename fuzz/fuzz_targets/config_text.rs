//! Arbitrary bytes as the text forms of a configuration: the first line a
//! tier list (`parse_tiers`, what `--tiers` reads), the second a sync
//! policy (`SyncPolicy::from_str`, what `--sync` reads). No panic; errors
//! are `InvalidConfig`; what parses prints (`Display`) as text that parses
//! to the same value; and a tier list that parses is validated as a
//! configuration's tiers and, when valid, asked for horizons at several
//! instants (`Config::check_new_horizon`), which answers without a panic.
#![no_main]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use libfuzzer_sys::fuzz_target;
use timebloom::{parse_tiers, Config, Error, SyncPolicy, Tier};

/// Monday 2026-01-05T00:00:00Z.
const T0: u64 = 1_767_571_200;

fn typed(e: &Error, what: &str) {
    assert!(
        matches!(e, Error::InvalidConfig { .. }),
        "{what}: an untyped error: {e:?}"
    );
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (tiers, sync) = text.split_once('\n').unwrap_or((text, ""));
    match parse_tiers(tiers) {
        Ok(list) => {
            for t in &list {
                let shown = t.to_string();
                match shown.parse::<Tier>() {
                    Ok(again) => assert_eq!(&again, t, "{tiers:?}: {shown:?}"),
                    Err(e) => panic!("{tiers:?}: its display {shown:?} does not parse: {e}"),
                }
            }
            let config = Config {
                tiers: list,
                expected_items_per_day: 100,
                ..Config::default()
            };
            match config.validate() {
                Ok(()) => {
                    let horizons = [0, 3_600, 86_400, 7 * 86_400, 400 * 86_400, u64::MAX];
                    let instants = [0, T0, 253_402_300_799];
                    for now in instants {
                        let now: SystemTime = UNIX_EPOCH + Duration::from_secs(now);
                        for h in horizons {
                            let _ = config.check_new_horizon(now, Duration::from_secs(h));
                        }
                    }
                }
                Err(e) => typed(&e, tiers),
            }
        }
        Err(e) => typed(&e, tiers),
    }
    match sync.parse::<SyncPolicy>() {
        Ok(p) => {
            let shown = p.to_string();
            match shown.parse::<SyncPolicy>() {
                Ok(again) => assert_eq!(again, p, "{sync:?}: {shown:?}"),
                Err(e) => panic!("{sync:?}: its display {shown:?} does not parse: {e}"),
            }
        }
        Err(e) => typed(&e, sync),
    }
});
