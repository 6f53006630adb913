//! Interprets the fuzz input as a sequence of engine operations and checks
//! every answer against an exact model. Guards promise 1 of RELIABILITY: no
//! false negatives within the retention or a `contains_within` horizon,
//! across rotation, expiry, backfill, clean reopens and process crashes.
//!
//! The model, the operation alphabet and the checks live in
//! `tests/common/model_core.rs`, shared with the proptest twin
//! `tests/model.rs`; this file is the libFuzzer front end: it decodes bytes
//! into operations and keeps engine directories on tmpfs.
//!
//! Input layout: byte 0 picks the configuration, bytes 1-2 the start instant
//! (within the first six hours of Monday 2026-01-05 UTC), then one operation
//! per opcode byte followed by its arguments (see `decode`).

#![no_main]

#[path = "../../tests/common/model_core.rs"]
mod model_core;

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

#[path = "../scratch.rs"]
mod scratch;

use libfuzzer_sys::fuzz_target;
use model_core::{at, Harness, Op, Step, Storage, When, HOUR, KEYS, T0, VARIANTS};
use scratch::scratch;
use tempfile::TempDir;
use timebloom::{Engine, ManualClock, Options};

const MAX_OPS: usize = 160;

struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        let (b, rest) = self.0.split_first().map_or((0, &[][..]), |(b, r)| (*b, r));
        self.0 = rest;
        b
    }

    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    fn key(&mut self) -> u8 {
        self.u8() % KEYS
    }

    fn delta(&mut self) -> i8 {
        (self.u8() % 3) as i8 - 1
    }
}

fn decode(input: &mut Input) -> Op {
    let op = input.u8() % 16;
    match op {
        0..=3 => Op::Insert(input.key()),
        4 | 5 => Op::Contains(input.key()),
        6 | 7 => {
            let k = input.key();
            let h = match input.u8() % 2 {
                // Whole days, give or take a second: window boundaries.
                0 => (u32::from(input.u8() % 20) * 86_400)
                    .saturating_add_signed(input.delta().into()),
                _ => u32::from(input.u16()) * 27, // up to 20 days
            };
            Op::ContainsWithin(k, h)
        }
        8 | 9 => {
            let a = input.u8();
            // Opcode 9 with the argument's high bit set steps the clock
            // back: one step in 32 operations, a third as many as forward.
            let back = op == 9 && a & 0x80 != 0;
            let a = if back { a & 0x7f } else { a };
            let step = match a % 3 {
                0 => Step::Hours(1 + (a / 3) % 30),
                1 => Step::Days(1 + (a / 3) % 5),
                _ => Step::Midnight(input.delta()),
            };
            match back {
                true => Op::Back(step),
                false => Op::Advance(step),
            }
        }
        10 => Op::Reopen,
        11 => Op::Crash,
        12 => Op::Flush,
        _ => {
            let k = input.key();
            let w = match input.u8() % 2 {
                0 => When::DayStart((input.u8() % 17) as i8 - 1, input.delta()),
                _ => When::Ago(u32::from(input.u16()) * 21), // up to 16 days
            };
            Op::InsertAt(k, w)
        }
    }
}

/// The files of an engine directory (relative paths and bytes), LOCK aside.
type Files = Vec<(PathBuf, Vec<u8>)>;

fn read_files(dir: &Path) -> Files {
    let mut out = vec![(
        PathBuf::from("MANIFEST"),
        std::fs::read(dir.join("MANIFEST")).expect("read MANIFEST"),
    )];
    for e in std::fs::read_dir(dir.join("seg")).expect("list seg") {
        let rel = PathBuf::from("seg").join(e.expect("list seg").file_name());
        let bytes = std::fs::read(dir.join(&rel)).expect("read segment");
        out.push((rel, bytes));
    }
    out
}

fn write_files(dir: &Path, files: &Files) {
    std::fs::create_dir_all(dir.join("seg")).expect("create seg");
    for (rel, bytes) in files {
        std::fs::write(dir.join(rel), bytes).expect("write engine file");
    }
}

/// One freshly created, empty engine per configuration, made at `T0` and
/// copied for each input (creating one costs more than copying it).
fn template(v: u8) -> &'static Files {
    static T: OnceLock<Vec<Files>> = OnceLock::new();
    &T.get_or_init(|| {
        (0..VARIANTS)
            .map(|v| {
                let dir = scratch();
                let clock = ManualClock::new(at(T0));
                let config = model_core::engine_config(v);
                Engine::create_with(dir.path(), config, Options::default().clock(clock))
                    .expect("create template")
                    .close()
                    .expect("close template");
                read_files(dir.path())
            })
            .collect()
    })[usize::from(v % VARIANTS)]
}

/// Engine directories on tmpfs, each engine a copy of its template.
struct ShmStorage;

impl Storage for ShmStorage {
    fn tempdir() -> TempDir {
        scratch()
    }

    fn create(v: u8, dir: &Path, options: Options) -> Engine {
        write_files(dir, template(v));
        Engine::open_with(dir, options).expect("open the template")
    }

    fn copy(from: &Path, to: &Path) {
        write_files(to, &read_files(from));
    }
}

fuzz_target!(|data: &[u8]| {
    let mut input = Input(data);
    let v = input.u8();
    let start_offset = i64::from(input.u16()) % (6 * HOUR);
    let mut ops = Vec::new();
    while !input.0.is_empty() && ops.len() < MAX_OPS {
        ops.push(decode(&mut input));
    }
    let trace = trace();
    if trace {
        eprintln!("model: variant {} start T0+{start_offset}s", v % VARIANTS);
    }
    let mut h = Harness::<ShmStorage>::new(v, start_offset);
    for (i, op) in ops.iter().enumerate() {
        if trace {
            eprintln!("model: op {i}: {op:?} (now {})", h.now());
        }
        h.apply(*op).unwrap_or_else(|e| panic!("{e}"));
    }
    h.check_all().unwrap_or_else(|e| panic!("{e}"));
});

/// `MODEL_TRACE=1` prints every operation (to replay an artifact readably).
fn trace() -> bool {
    static T: OnceLock<bool> = OnceLock::new();
    *T.get_or_init(|| std::env::var_os("MODEL_TRACE").is_some_and(|v| v != "0"))
}
