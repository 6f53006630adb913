//! The public API as a user of the crate meets it: thread-safety markers,
//! error traits, documented defaults, Display/FromStr round trips, and
//! bad input refused with clear errors rather than panics.

use std::time::Duration;

use timebloom::{
    parse_tiers, Config, Engine, Error, Handle, Kind, Maintenance, ManualClock, Options,
    SegmentStats, Span, Stats, SyncPolicy, SystemClock, Tier, TierStats,
};

fn assert_send_sync<T: Send + Sync>() {}
fn assert_send<T: Send>() {}
fn assert_debug<T: std::fmt::Debug>() {}

#[test]
fn shared_types_are_send_and_sync() {
    assert_send_sync::<Engine>();
    assert_send::<Handle<'static>>();
    assert_send_sync::<ManualClock>();
    assert_send_sync::<SystemClock>();
    assert_send_sync::<Options>();
    #[cfg(feature = "redis")]
    assert_send_sync::<timebloom::redis::RedisEngine>();
}

#[test]
fn error_is_a_std_error_with_its_io_source() {
    fn check<E: std::error::Error + Send + Sync + 'static>() {}
    check::<Error>();
    // An io failure keeps its cause reachable through `source()`.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("plain-file");
    std::fs::write(&file, b"x").unwrap();
    let err = Engine::open(file.join("below-a-file")).unwrap_err();
    if let Error::Io { .. } = err {
        let src = std::error::Error::source(&err).expect("an io error names its source");
        assert!(src.downcast_ref::<std::io::Error>().is_some(), "{src:?}");
    }
    assert!(!err.to_string().is_empty());
}

#[test]
fn public_types_implement_debug() {
    assert_debug::<Engine>();
    assert_debug::<Handle<'static>>();
    assert_debug::<Config>();
    assert_debug::<Tier>();
    assert_debug::<SyncPolicy>();
    assert_debug::<Options>();
    assert_debug::<ManualClock>();
    assert_debug::<SystemClock>();
    assert_debug::<Error>();
    assert_debug::<Stats>();
    assert_debug::<TierStats>();
    assert_debug::<SegmentStats>();
    assert_debug::<Maintenance>();
    assert_debug::<Span>();
    assert_debug::<Kind>();
    #[cfg(feature = "redis")]
    {
        assert_debug::<timebloom::redis::RedisEngine>();
        assert_debug::<timebloom::redis::RedisOptions>();
    }
}

/// What the rustdoc of `Config`, its fields and `SyncPolicy` promise.
#[test]
fn documented_defaults_hold() {
    let c = Config::default();
    assert_eq!(
        c.tiers,
        vec![Tier::daily(7), Tier::weekly(4), Tier::monthly(12)]
    );
    assert_eq!(c.expected_items_per_day, 1_000_000);
    assert_eq!(c.fpr, 0.001);
    assert_eq!(c.utc_offset_secs, 0);
    assert_eq!(c.growth_factor, 2.0);
    assert_eq!(c.tightening, 0.5);
    assert_eq!(c.sync, SyncPolicy::Interval(Duration::from_secs(1)));
    assert_eq!(
        SyncPolicy::default(),
        SyncPolicy::Interval(Duration::from_secs(1))
    );
    c.validate().unwrap();

    assert_eq!(Tier::daily(3).span, Span::Day);
    assert_eq!(Tier::weekly(3).span, Span::Week);
    assert_eq!(Tier::monthly(3).span, Span::Month);
    assert_eq!(Tier::daily(3).kind, Kind::Bloom);
    assert_eq!(Tier::daily(3).counting().kind, Kind::Counting);
    let f = Tier::fingerprint(30);
    assert_eq!(
        (f.span, f.retention, f.kind),
        (Span::Day, 30, Kind::Fingerprint)
    );
    assert_eq!(
        Tier::custom(Duration::from_secs(6 * 3600), 4).span,
        Span::Custom(6 * 3600)
    );
    for (t, code) in [
        (Tier::daily(1), "d"),
        (Tier::weekly(1), "w"),
        (Tier::monthly(1), "m"),
        (Tier::custom(Duration::from_secs(90), 1), "c90"),
        (Tier::fingerprint(7), "f"),
    ] {
        assert_eq!(t.code(), code);
    }
    #[cfg(feature = "redis")]
    {
        let o = timebloom::redis::RedisOptions::default();
        assert_eq!(o.shards, 16);
        assert_eq!(o.connect_timeout, Duration::from_secs(5));
        assert_eq!(o.io_timeout, Duration::from_secs(10));
        assert_eq!(o.retries, 8);
        assert_eq!(o.backoff, Duration::from_millis(50));
        assert_eq!(o.max_backoff, Duration::from_secs(2));
        assert!(!o.cluster);
        assert_eq!(o.wait_replicas, 0);
        assert_eq!(o.wait_timeout, Duration::from_secs(1));
    }
}

/// `Tier::to_string()` read back gives the same tier, for every kind and span.
#[test]
fn tier_display_parses_back() {
    let spans = [
        Span::Day,
        Span::Week,
        Span::Month,
        Span::Custom(60),
        Span::Custom(90),
        Span::Custom(3600),
        Span::Custom(5400),
        Span::Custom(86_400),
        Span::Custom(6 * 3600),
        Span::Custom(7 * 86_400),
        Span::Custom(366 * 86_400),
        Span::Custom(61),
    ];
    for span in spans {
        for kind in [Kind::Bloom, Kind::Counting, Kind::Fingerprint] {
            for retention in [1, 2, 7, 365, 10_000] {
                let t = Tier {
                    span,
                    retention,
                    kind,
                };
                // Only day-counted fingerprint tiers exist.
                if kind == Kind::Fingerprint && span != Span::Day {
                    continue;
                }
                let s = t.to_string();
                assert_eq!(s.parse::<Tier>().unwrap(), t, "{s}");
                assert_eq!(parse_tiers(&s).unwrap(), vec![t], "{s}");
            }
        }
    }
    let all = "7d,4w,12m,48h,4x6h,3x90s:counting,30d:fingerprint";
    let tiers = parse_tiers(all).unwrap();
    let shown: Vec<String> = tiers.iter().map(Tier::to_string).collect();
    assert_eq!(parse_tiers(&shown.join(",")).unwrap(), tiers);
}

#[test]
fn sync_policy_display_parses_back() {
    for p in [
        SyncPolicy::Always,
        SyncPolicy::None,
        SyncPolicy::default(),
        SyncPolicy::Interval(Duration::from_millis(1)),
        SyncPolicy::Interval(Duration::from_millis(250)),
        SyncPolicy::Interval(Duration::from_millis(1500)),
        SyncPolicy::Interval(Duration::from_secs(3600)),
    ] {
        let s = p.to_string();
        assert_eq!(s.parse::<SyncPolicy>().unwrap(), p, "{s}");
    }
    for bad in [
        "",
        "interval=",
        "interval=0ms",
        "interval=999us",
        "interval=999999ns",
        "interval=3600000001us",
        "interval=2h",
        "interval=3601s",
        "interval=99999999999999999999m",
        "Always",
    ] {
        assert!(bad.parse::<SyncPolicy>().is_err(), "{bad:?}");
    }
}

fn refused_at_create(config: Config) -> Error {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.tb");
    let err = match Engine::create(&path, config.clone()) {
        Ok(_) => panic!("created an engine for {config:?}"),
        Err(e) => e,
    };
    assert!(
        matches!(err, Error::InvalidConfig { .. }),
        "{config:?}: {err:?}"
    );
    assert!(!path.join("MANIFEST").exists());
    err
}

/// Bad input is refused at create with `InvalidConfig`, never a panic.
#[test]
fn bad_configs_are_clear_errors_at_create() {
    let base = Config {
        tiers: vec![Tier::daily(3)],
        expected_items_per_day: 1_000,
        ..Config::default()
    };
    let with = |f: &dyn Fn(&mut Config)| {
        let mut c = base.clone();
        f(&mut c);
        c
    };
    let cases: Vec<Config> = vec![
        with(&|c| c.tiers = vec![Tier::custom(Duration::ZERO, 3)]),
        with(&|c| c.tiers = vec![Tier::custom(Duration::from_millis(500), 3)]),
        with(&|c| c.tiers = vec![Tier::custom(Duration::from_secs(u64::MAX), 3)]),
        with(&|c| c.tiers = vec![Tier::custom(Duration::MAX, 3)]),
        with(&|c| c.tiers = vec![Tier::daily(u32::MAX)]),
        with(&|c| c.tiers = vec![Tier::daily(0)]),
        with(&|c| c.tiers = vec![Tier::fingerprint(0)]),
        with(&|c| c.tiers = vec![Tier::fingerprint(1)]),
        with(&|c| c.tiers = vec![Tier::fingerprint(u32::MAX)]),
        with(&|c| c.tiers = vec![Tier::weekly(3), Tier::fingerprint(7), Tier::fingerprint(8)]),
        with(&|c| {
            c.tiers = vec![Tier {
                span: Span::Week,
                retention: 4,
                kind: Kind::Fingerprint,
            }]
        }),
        with(&|c| c.tiers = vec![]),
        with(&|c| {
            c.tiers = (1..=17)
                .map(|i| Tier::custom(Duration::from_secs(60 * i), 2))
                .collect()
        }),
        with(&|c| c.fpr = f64::NAN),
        with(&|c| c.fpr = f64::INFINITY),
        with(&|c| c.fpr = f64::NEG_INFINITY),
        with(&|c| c.fpr = 0.0),
        with(&|c| c.fpr = -0.0),
        with(&|c| c.fpr = 1.0),
        with(&|c| c.fpr = -0.5),
        with(&|c| c.fpr = f64::MIN_POSITIVE),
        with(&|c| c.expected_items_per_day = 0),
        with(&|c| c.expected_items_per_day = u64::MAX),
        with(&|c| c.growth_factor = f64::NAN),
        with(&|c| c.growth_factor = f64::INFINITY),
        with(&|c| c.growth_factor = 0.0),
        with(&|c| c.growth_factor = 0.99),
        with(&|c| c.tightening = f64::NAN),
        with(&|c| c.tightening = 0.0),
        with(&|c| c.tightening = 1.0),
        with(&|c| c.utc_offset_secs = 86_400),
        with(&|c| c.utc_offset_secs = -86_400),
        with(&|c| c.utc_offset_secs = i32::MIN),
        with(&|c| c.utc_offset_secs = i32::MAX),
        with(&|c| c.sync = SyncPolicy::Interval(Duration::ZERO)),
        with(&|c| c.sync = SyncPolicy::Interval(Duration::from_secs(3601))),
        with(&|c| c.sync = SyncPolicy::Interval(Duration::MAX)),
    ];
    for c in cases {
        refused_at_create(c);
    }
    // The limits themselves are accepted.
    for ok in [
        with(&|c| c.utc_offset_secs = 86_399),
        with(&|c| c.utc_offset_secs = -86_399),
        with(&|c| c.growth_factor = 1.0),
        with(&|c| c.tiers = vec![Tier::custom(Duration::from_secs(60), 2)]),
    ] {
        ok.validate().unwrap();
    }
}

/// `validate` says "the interval must be between 1 ms and 1 hour": an
/// interval below a millisecond is refused as its message says.
#[test]
fn a_sync_interval_below_a_millisecond_is_refused() {
    for d in [Duration::from_nanos(1), Duration::from_micros(999)] {
        refused_at_create(Config {
            tiers: vec![Tier::daily(2)],
            expected_items_per_day: 100,
            sync: SyncPolicy::Interval(d),
            ..Config::default()
        });
    }
}

/// `Options::sync` replaces the stored policy for one open: it is held to
/// the same limits as `Config::sync`, not taken unchecked (an interval of
/// zero had the log's sync thread fsync in a tight loop).
#[test]
fn an_open_with_an_invalid_sync_override_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("e.tb");
    let config = Config {
        tiers: vec![Tier::daily(2)],
        expected_items_per_day: 100,
        ..Config::default()
    };
    Engine::create(&path, config.clone())
        .unwrap()
        .close()
        .unwrap();
    for bad in [
        Duration::ZERO,
        Duration::from_nanos(1),
        Duration::from_secs(3601),
        Duration::MAX,
    ] {
        let p = SyncPolicy::Interval(bad);
        match Engine::open_with(&path, Options::default().sync(p)) {
            Err(Error::InvalidConfig { .. }) => {}
            Err(e) => panic!("{p:?}: {e:?}"),
            Ok(_) => panic!("{p:?}: opened"),
        }
        let dir2 = tempfile::tempdir().unwrap();
        match Engine::create_with(
            dir2.path().join("n.tb"),
            config.clone(),
            Options::default().sync(p),
        ) {
            Err(Error::InvalidConfig { .. }) => {}
            Err(e) => panic!("create {p:?}: {e:?}"),
            Ok(_) => panic!("create {p:?}: created"),
        }
    }
    // A valid override still opens.
    let e = Engine::open_with(&path, Options::default().sync(SyncPolicy::Always)).unwrap();
    assert!(e.insert(b"k").unwrap());
    e.close().unwrap();
}

/// The clock's bad instants are errors, not panics.
#[test]
fn a_clock_out_of_range_is_an_error() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(std::time::UNIX_EPOCH + Duration::from_secs(86_400 * 1000));
    let e = Engine::create_with(
        dir.path().join("e.tb"),
        Config {
            tiers: vec![Tier::daily(2)],
            expected_items_per_day: 100,
            ..Config::default()
        },
        Options::default().clock(clock.clone()),
    )
    .unwrap();
    assert!(e.insert(b"a").unwrap());
    clock.advance(Duration::MAX);
    assert!(matches!(
        e.insert(b"b"),
        Err(Error::WindowUnavailable { .. })
    ));
    assert!(e.contains(b"a").is_err());
    assert!(e.contains_within(b"a", Duration::MAX).is_err());
    clock.set(std::time::UNIX_EPOCH + Duration::from_secs(86_400 * 1000));
    assert!(e.contains(b"a").unwrap());
    assert!(e.contains_within(b"a", Duration::MAX).is_err());
    assert!(e.contains_within(b"a", Duration::ZERO).unwrap());
    e.close().unwrap();
}

/// Extreme arguments to the engine's calls are answers or errors, never
/// panics.
#[test]
fn extreme_arguments_are_answers_or_errors() {
    use std::time::UNIX_EPOCH;
    let dir = tempfile::tempdir().unwrap();
    let start = UNIX_EPOCH + Duration::from_secs(86_400 * 20_000);
    let clock = ManualClock::new(start);
    let e = Engine::create_with(
        dir.path().join("e.tb"),
        Config {
            tiers: vec![Tier::daily(3), Tier::weekly(2).counting()],
            expected_items_per_day: 100,
            ..Config::default()
        },
        Options::default().clock(clock.clone()),
    )
    .unwrap();
    let empty: [&[u8]; 0] = [];
    assert!(e.insert_batch(&empty).unwrap().is_empty());
    assert!(e.contains_batch(&empty).unwrap().is_empty());
    assert!(e
        .insert_within_batch(&empty, Duration::MAX)
        .unwrap_or_default()
        .is_empty());
    assert!(e.insert(b"").unwrap());
    assert!(e.contains(b"").unwrap());
    let big = vec![7u8; 1 << 20];
    assert!(e.insert(&big).unwrap());
    assert!(e.contains(&big).unwrap());
    for t in [
        UNIX_EPOCH,
        UNIX_EPOCH - Duration::from_secs(1),
        start + Duration::from_secs(86_400 * 365 * 10_000),
        start - Duration::from_secs(86_400 * 30),
        start + Duration::from_secs(86_400 * 30),
    ] {
        let _ = e.insert_at(b"k", t);
        let _ = e.remove_at(b"k", t);
    }
    let _ = e.insert_within(b"k", Duration::ZERO);
    let _ = e.insert_within(b"k", Duration::MAX);
    let _ = e.remove(b"never inserted");
    let mut h = e.handle();
    let _ = h.contains_within(b"k", Duration::MAX);
    let _ = h.insert_within(b"k", Duration::from_nanos(1));
    let _ = e.maintain(UNIX_EPOCH);
    let _ = e.maintain_checked(UNIX_EPOCH - Duration::from_secs(86_400));
    let _ = e.maintain_checked(start + Duration::from_secs(86_400 * 365 * 20_000));
    e.stats().unwrap();
    e.flush().unwrap();
    drop(h);
    e.close().unwrap();
}

/// `Plan::for_redis` plans the engine `RedisEngine::create_with` would make
/// for `shards`: a shard count create refuses (0, or above 16,384) is
/// refused here too, not planned as another count.
#[cfg(feature = "redis")]
#[test]
fn a_redis_plan_refuses_the_shard_counts_create_refuses() {
    use timebloom::plan::Plan;
    let c = Config::default();
    for shards in [1, 16, 16_384] {
        Plan::for_redis(&c, shards).unwrap();
    }
    for shards in [0, 16_385, u32::MAX] {
        match Plan::for_redis(&c, shards) {
            Err(Error::InvalidConfig { reason }) => assert!(reason.contains("shards"), "{reason}"),
            other => panic!("{shards} shards: {other:?}"),
        }
    }
}

/// What `RedisEngine::create_with` refuses as beyond the Redis layout (a
/// first sub-filter's rate below about 3.5e-18, a shard string past
/// 512 MiB) has no Redis plan: it was planned as 2^64 - 1 bytes at one
/// probe and 1.5e17 bits per key.
#[cfg(feature = "redis")]
#[test]
fn a_redis_plan_refuses_a_rate_create_refuses() {
    use timebloom::plan::Plan;
    let c = Config {
        tiers: vec![Tier::daily(7)],
        expected_items_per_day: 1_000,
        fpr: 1e-19,
        ..Config::default()
    };
    Plan::new(&c).unwrap();
    match Plan::for_redis(&c, 16) {
        Err(Error::InvalidConfig { reason }) => assert!(reason.contains("3.5e-18"), "{reason}"),
        other => panic!("{other:?}"),
    }
    // A shard string past Redis's 512 MiB: planned with enough shards only.
    let c = Config {
        tiers: vec![Tier::monthly(2)],
        expected_items_per_day: 100_000_000,
        ..Config::default()
    };
    match Plan::for_redis(&c, 1) {
        Err(Error::InvalidConfig { reason }) => assert!(reason.contains("512 MiB"), "{reason}"),
        other => panic!("{other:?}"),
    }
    Plan::for_redis(&c, 1024).unwrap();
}

/// Every interval a config accepts is shown as a policy that reads back
/// the same: 1.5 ms was shown as `interval=1ms`, which reads back as 1 ms.
#[test]
fn every_accepted_sync_interval_displays_exactly() {
    for d in [
        Duration::from_micros(1500),
        Duration::from_micros(1001),
        Duration::from_nanos(1_000_001),
        Duration::from_nanos(2_500_000_001),
        Duration::from_millis(1),
        Duration::from_secs(2),
    ] {
        let p = SyncPolicy::Interval(d);
        Config {
            sync: p,
            ..Config::default()
        }
        .validate()
        .unwrap();
        let s = p.to_string();
        assert_eq!(s.parse::<SyncPolicy>().unwrap(), p, "{s}");
    }
}
