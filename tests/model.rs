// Guards promise 1 of RELIABILITY, no false negatives within the retention or
// a horizon, against an exact model over random sequences of insert /
// contains / contains_within / clock advances / reopen / crash / flush /
// insert_at (backfill), and (in `engine_matches_model_with_the_clock_stepping_back`)
// steps of the clock back.
//
// The model, the operation alphabet and the checks live in
// `tests/common/model_core.rs`, shared with `fuzz/fuzz_targets/model.rs`;
// this file is the proptest front end: strategies over the alphabet,
// shrinking, and engine directories from `tempfile`.

#[path = "common/model_core.rs"]
mod model_core;

use std::path::Path;

use model_core::{Harness, Op, Step, Storage, When, KEYS, VARIANTS};
use proptest::prelude::*;
use proptest::test_runner::FileFailurePersistence;
use tempfile::TempDir;
use timebloom::{Engine, Options};

/// Plain temporary directories, engines created at the start instant.
struct TempStorage;

impl Storage for TempStorage {
    fn tempdir() -> TempDir {
        tempfile::tempdir().expect("tempdir")
    }

    fn create(v: u8, dir: &Path, options: Options) -> Engine {
        Engine::create_with(dir, model_core::engine_config(v), options).expect("create")
    }

    fn copy(from: &Path, to: &Path) {
        copy_dir(from, to).expect("copy directory");
    }
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else if entry.file_name() != "LOCK" {
            std::fs::copy(entry.path(), target)?;
        }
    }
    Ok(())
}

/// Runs a sequence, failing at the first operation the engine gets wrong.
fn run(v: u8, start_offset: u32, ops: &[Op]) -> Result<(), TestCaseError> {
    let mut h = Harness::<TempStorage>::new(v, i64::from(start_offset));
    for (i, op) in ops.iter().enumerate() {
        h.apply(*op)
            .map_err(|e| TestCaseError::fail(format!("op {i} ({op:?}): {e}")))?;
    }
    h.check_all().map_err(TestCaseError::fail)
}

// ---- strategies ---------------------------------------------------------------

fn key() -> impl Strategy<Value = u8> {
    0..KEYS
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (1u8..=30).prop_map(Step::Hours),
        2 => (1u8..=5).prop_map(Step::Days),
        2 => (-1i8..=1).prop_map(Step::Midnight),
    ]
}

fn horizon() -> impl Strategy<Value = u32> {
    prop_oneof![
        0u32..20 * 86_400,
        (0u32..20, -1i32..=1).prop_map(|(d, s)| (d * 86_400).saturating_add_signed(s)),
    ]
}

fn when() -> impl Strategy<Value = When> {
    prop_oneof![
        (0u32..16 * 86_400).prop_map(When::Ago),
        (-1i8..16, -1i8..=1).prop_map(|(n, d)| When::DayStart(n, d)),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => key().prop_map(Op::Insert),
        4 => key().prop_map(Op::Contains),
        3 => (key(), horizon()).prop_map(|(k, h)| Op::ContainsWithin(k, h)),
        3 => step().prop_map(Op::Advance),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => Just(Op::Flush),
        3 => (key(), when()).prop_map(|(k, w)| Op::InsertAt(k, w)),
    ]
}

/// The same operations, and steps of the clock back (two thirds as often
/// as steps forward, so that the clock still moves on across expiries).
fn op_or_back() -> impl Strategy<Value = Op> {
    prop_oneof![
        22 => op(),
        2 => step().prop_map(Op::Back),
    ]
}

/// 64 cases, or `default` (`PROPTEST_CASES` overrides both for longer
/// runs); failures are kept in `tests/model.proptest-regressions` and
/// replayed first.
fn config() -> ProptestConfig {
    config_with(64)
}

fn config_with(default: u32) -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig {
        cases,
        failure_persistence: Some(Box::new(FileFailurePersistence::WithSource(
            "proptest-regressions",
        ))),
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn engine_matches_model(
        v in 0..VARIANTS,
        start_offset in 0u32..7 * 86_400,
        ops in prop::collection::vec(op(), 1..200),
    ) {
        run(v, start_offset, &ops)?;
    }
}

proptest! {
    // A fifth of the cases above: the steps back have their own test, so
    // the exact checks of a clock that only moves forward keep every case
    // of `engine_matches_model`.
    #![proptest_config(config_with(13))]

    #[test]
    fn engine_matches_model_with_the_clock_stepping_back(
        v in 0..VARIANTS,
        start_offset in 0u32..7 * 86_400,
        ops in prop::collection::vec(op_or_back(), 1..200),
    ) {
        run(v, start_offset, &ops)?;
    }
}
