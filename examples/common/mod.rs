//! What the examples share: `--name value` arguments (or `TB_NAME`
//! environment variables), clean error exits, and a fixed starting instant
//! so that every run of an example tells the same story.
#![allow(dead_code)] // each example uses a part of this file

use std::collections::HashMap;
use std::fmt::Display;
use std::path::PathBuf;
use std::process::exit;
use std::str::FromStr;
use std::sync::Mutex;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// 2026-11-02T12:00:00Z, a Monday: where the examples' manual clocks start.
pub const START_SECS: u64 = 1_793_620_800;
/// One day.
pub const DAY: Duration = Duration::from_secs(86_400);

/// The starting instant of the examples' manual clocks.
pub fn start() -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(START_SECS)
}

/// The temporary directories [`temp_dir`] made: an early exit ([`fail`],
/// a closed stdout) runs no destructor, so it removes them itself.
static TEMP_DIRS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// Removes the temporary directories and exits with `code`.
fn exit_now(code: i32) -> ! {
    let dirs = std::mem::take(&mut *TEMP_DIRS.lock().unwrap_or_else(|p| p.into_inner()));
    for d in dirs {
        let _ = std::fs::remove_dir_all(d);
    }
    exit(code)
}

/// Prints `msg` on stderr with the program's name and exits with status 2.
pub fn fail(msg: impl Display) -> ! {
    eprintln!("{}: {msg}", program());
    exit_now(2)
}

/// The value of a `timebloom::Result`, or a clean exit naming `what` failed.
pub fn or_die<T>(r: timebloom::Result<T>, what: &str) -> T {
    r.unwrap_or_else(|e| fail(format_args!("{what}: {e}")))
}

fn program() -> String {
    std::env::args()
        .next()
        .and_then(|p| p.rsplit('/').next().map(str::to_owned))
        .unwrap_or_else(|| "example".into())
}

/// Command-line options: `--name value` pairs and bare `--flag`s.
pub struct Args {
    values: HashMap<String, String>,
    usage: &'static str,
}

impl Args {
    /// Reads the command line; `options` take a value, `flags` do not.
    /// Anything else (or `--help`) prints `usage` and exits.
    pub fn parse(usage: &'static str, options: &[&str], flags: &[&str]) -> Args {
        let mut values = HashMap::new();
        let mut args = std::env::args().skip(1);
        while let Some(a) = args.next() {
            if a == "--help" || a == "-h" {
                println!("{usage}");
                exit(0);
            }
            let name = a.strip_prefix("--").unwrap_or("");
            if flags.contains(&name) {
                values.insert(name.to_owned(), "true".to_owned());
            } else if options.contains(&name) {
                let Some(v) = args.next() else {
                    fail(format_args!("--{name} needs a value\n{usage}"))
                };
                values.insert(name.to_owned(), v);
            } else {
                fail(format_args!("unknown argument {a:?}\n{usage}"));
            }
        }
        Args { values, usage }
    }

    /// The raw value of `--name`, or of the environment variable
    /// `TB_NAME` (upper case, `-` as `_`).
    pub fn raw(&self, name: &str) -> Option<String> {
        self.values
            .get(name)
            .cloned()
            .or_else(|| std::env::var(env_name(name)).ok())
    }

    /// `--name` parsed as a `T`, or `default`; a value that does not parse
    /// is a clean exit.
    pub fn get<T: FromStr>(&self, name: &str, default: T) -> T
    where
        T::Err: Display,
    {
        match self.raw(name) {
            None => default,
            Some(v) => v.parse().unwrap_or_else(|e| {
                // Name where the value came from: the argument, or the
                // environment variable.
                let source = if self.values.contains_key(name) {
                    format!("--{name}")
                } else {
                    env_name(name)
                };
                fail(format_args!("{source} {v:?}: {e}\n{}", self.usage))
            }),
        }
    }

    /// Whether the flag `--name` was given.
    pub fn flag(&self, name: &str) -> bool {
        self.raw(name).is_some_and(|v| v != "0" && v != "false")
    }
}

/// The environment variable of option `name`: `TB_NAME` (upper case, `-`
/// as `_`).
fn env_name(name: &str) -> String {
    format!("TB_{}", name.to_uppercase().replace('-', "_"))
}

/// An RFC 3339 instant (`2026-11-02T12:00:00Z`) or whole seconds since the
/// Unix epoch.
pub fn parse_instant(s: &str) -> Result<SystemTime, String> {
    if let Ok(secs) = s.parse::<u64>() {
        return UNIX_EPOCH
            .checked_add(Duration::from_secs(secs))
            .ok_or_else(|| format!("{s:?} is past the latest instant this system holds"));
    }
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339)
        .map_err(|e| format!("{s:?} is neither RFC 3339 nor Unix seconds: {e}"))?;
    u64::try_from(t.unix_timestamp())
        .map(|secs| UNIX_EPOCH + Duration::from_secs(secs))
        .map_err(|_| format!("{s:?} is before 1970"))
}

/// An instant as RFC 3339 UTC.
pub fn rfc3339(t: SystemTime) -> String {
    let secs = t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    time::OffsetDateTime::from_unix_timestamp(secs as i64)
        .ok()
        .and_then(|d| {
            d.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| secs.to_string())
}

/// A byte count with a binary unit.
pub fn bytes(n: f64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
    let mut v = n;
    let mut u = 0;
    while v >= 1024.0 && u + 1 < units.len() {
        v /= 1024.0;
        u += 1;
    }
    if u == 0 {
        format!("{v:.0} {}", units[u])
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// The engine directory: `--dir` (or `TB_DIR`), else a temporary directory
/// removed when the returned guard is dropped or at an early exit.
pub fn engine_dir(args: &Args, name: &str) -> (PathBuf, Option<tempfile::TempDir>) {
    match args.raw("dir") {
        Some(d) => (d.into(), None),
        None => {
            let tmp = temp_dir();
            (tmp.path().join(name), Some(tmp))
        }
    }
}

/// A new temporary directory, removed when the returned guard is dropped
/// or at an early exit.
pub fn temp_dir() -> tempfile::TempDir {
    let dir = tempfile::tempdir()
        .unwrap_or_else(|e| fail(format_args!("creating a temporary directory: {e}")));
    TEMP_DIRS
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(dir.path().to_owned());
    dir
}

/// Writes a line on stdout; a closed stdout (`| head`) ends the program
/// quietly instead of the panic `println!` gives.
pub fn say(line: std::fmt::Arguments) {
    use std::io::Write;
    if writeln!(std::io::stdout().lock(), "{line}").is_err() {
        exit_now(0);
    }
}

/// `println!` through [`say`].
macro_rules! say {
    ($($t:tt)*) => {
        common::say(format_args!($($t)*))
    };
}
