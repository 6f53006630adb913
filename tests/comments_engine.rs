//! What the documentation of the engine's public calls promises, checked.

use std::fs;
use std::time::{Duration, UNIX_EPOCH};

use timebloom::{Config, Engine, Error, ManualClock, Options, Tier};

fn config() -> Config {
    Config {
        tiers: vec![Tier::daily(3)],
        expected_items_per_day: 100,
        fpr: 0.01,
        ..Config::default()
    }
}

fn names(dir: &std::path::Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    names.sort();
    names
}

/// `Engine::create_with`: a directory holding other files is `NotEmpty`
/// "and nothing is touched": no `LOCK` file is left among the user's files.
#[test]
fn a_create_refused_as_not_empty_leaves_no_lock_file() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(20_000 * 86_400));
    let dir = tmp.path().join("mine");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("README"), b"x").unwrap();
    let err = Engine::create_with(&dir, config(), Options::default().clock(clock)).unwrap_err();
    assert!(matches!(err, Error::NotEmpty { .. }), "{err}");
    assert_eq!(
        names(&dir),
        ["README"],
        "the refused create left files behind"
    );
}

/// A directory a create refused, once emptied, takes a create.
#[test]
fn a_refused_directory_once_emptied_is_created_in() {
    let tmp = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(UNIX_EPOCH + Duration::from_secs(20_000 * 86_400));
    let dir = tmp.path().join("mine");
    fs::create_dir(&dir).unwrap();
    fs::write(dir.join("README"), b"x").unwrap();
    let opts = || Options::default().clock(clock.clone());
    assert!(Engine::create_with(&dir, config(), opts()).is_err());
    fs::remove_file(dir.join("README")).unwrap();
    let e = Engine::create_with(&dir, config(), opts()).unwrap();
    assert!(e.insert(b"k").unwrap());
    e.close().unwrap();
}
