//! Statements of docs/fingerprint.md that a test can check cheaply, read
//! off `timebloom plan` for a lone fingerprint tier.

use std::process::Command;

/// The plan of `365d:fingerprint` for `per_day` keys a day at `fpr`:
/// (fingerprint bits, bits per key, keys planned, bytes of the tier).
fn plan(per_day: u64, fpr: f64) -> (u64, f64, u64, u64) {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_timebloom"))
        .current_dir(dir.path())
        .args(["plan", "--tiers", "365d:fingerprint", "--json"])
        .args(["--items-per-day", &per_day.to_string()])
        .args(["--fpr", &fpr.to_string()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let t = &v["tiers"][0];
    assert_eq!(t["kind"], "fingerprint");
    (
        t["probes"].as_u64().unwrap(),
        t["bits_per_key"].as_f64().unwrap(),
        t["items_per_window"].as_u64().unwrap(),
        t["bytes_per_window"].as_u64().unwrap(),
    )
}

/// fingerprint.md, "Layout": the engine takes the narrowest fingerprint
/// whose bound with every slot live meets the rate, so each row's bits per
/// key at 95% is what `plan` prints; and at p = 1% (12-bit bound 1.03% at a
/// load of 1) it takes 16 bits, not the 12 whose bound at 95% is 0.974%.
#[test]
fn the_engine_picks_the_width_whose_bound_at_full_load_meets_p() {
    // (rate asked, fingerprint bits, bits per key at 95%)
    let rows = [
        (0.3, 8, 19.25),
        (0.2, 9, 19.25),
        (0.05, 10, 22.46),
        (0.011, 12, 25.66),
        (0.01, 16, 26.95),
        (0.001, 16, 26.95),
        (1e-4, 21, 35.93),
        (1e-8, 32, 44.91),
    ];
    for (p, bits, per_key) in rows {
        let (got_bits, got_per_key, _, _) = plan(100_000, p);
        assert_eq!(got_bits, bits, "fpr {p}");
        assert!(
            (got_per_key - per_key).abs() < 0.01,
            "fpr {p}: {got_per_key}"
        );
    }
}

/// fingerprint.md, "Sizing": `ceil(keys_per_day x 365 / (b x 0.95))`
/// buckets of 64 bytes (20 slots at p = 0.1%), so 548 keys a day (the
/// measured table's 200,020 keys) take 10,528 buckets, 26.95 bits a key.
#[test]
fn a_table_has_the_buckets_the_sizing_formula_gives() {
    for per_day in [548u64, 5_480, 100_000] {
        let (bits, per_key, keys, _) = plan(per_day, 0.001);
        assert_eq!(bits, 16);
        assert_eq!(keys, per_day * 365);
        let buckets = (keys as f64 / (20.0 * 0.95)).ceil();
        let body_bits = per_key * keys as f64;
        assert!(
            (body_bits - buckets * 512.0).abs() < 1.0,
            "{per_day}: {body_bits}"
        );
    }
    let (_, per_key, keys, _) = plan(548, 0.001);
    assert_eq!(keys, 200_020);
    assert!((per_key * keys as f64 / 512.0 - 10_528.0).abs() < 0.01);
}

/// fingerprint.md, "Days": an `Nd:fingerprint` tier gives the kernel
/// `R = N - 1`, up to `MAX_RETENTION = 509`, so `N` runs from 2 to 510.
#[test]
fn a_fingerprint_tier_keeps_two_to_510_days() {
    for (days, ok) in [(1, false), (2, true), (510, true), (511, false)] {
        let dir = tempfile::tempdir().unwrap();
        let out = Command::new(env!("CARGO_BIN_EXE_timebloom"))
            .current_dir(dir.path())
            .args(["plan", "--tiers", &format!("{days}d:fingerprint")])
            .args(["--items-per-day", "10"])
            .output()
            .unwrap();
        assert_eq!(out.status.success(), ok, "{days} days: {out:?}");
        if !ok {
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.contains("2 to 510 days"), "{err}");
        }
    }
}
