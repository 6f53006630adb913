//! SIGINT, SIGTERM and SIGHUP during `filter-new`, `add` and `remove`.
//!
//! `filter-new` records a batch before it prints it. Killed between the
//! two (a service manager's SIGTERM, `timeout`, Ctrl-C while the reader of
//! stdout is slow), it left keys recorded whose lines were never printed:
//! keys the next run calls repeated, so their lines were never seen
//! downstream. While a batch is being recorded and printed, a signal is
//! held: the batch is printed in full, the command stops reading, closes
//! the engine and then ends by the same signal. Outside a batch (waiting
//! for input), and for a second signal while one is held, the signal acts
//! at once, as without a handler. When every input is a regular file,
//! reading never waits, and a batch holds signals while it is read too
//! (else the command ended at once, with no `--stats` summary and the
//! engine not closed). `add` and `remove` hold signals the same way, so
//! that they stop between batches and print the count of the keys they
//! recorded or took back. A signal the process was started with ignored
//! (`nohup`, a background job's SIGINT) stays ignored.
//!
//! # How
//!
//! The signals are caught with `signal-hook`: its handler only notes the
//! signal, and a thread of this module ([`install`]) reads the notes. For
//! each signal, under the lock of [`STATE`], the thread either records it
//! (a batch holds signals and none is held yet) or ends the process as
//! the signal's default action would (`emulate_default_handler`: the
//! default disposition is restored and the signal raised, so the parent
//! sees a death by that signal, 143 for SIGTERM in the shell).
//!
//! The lock orders a batch against a signal. [`hold`] takes it before the
//! batch records anything, so a signal the thread is acting on while idle
//! ends the process before the batch begins, and a signal noted just
//! before the batch began (and read by the thread after) is held by it.
//! [`Hold`]'s drop takes it after the last line is printed, so a signal
//! the thread reads after that ends the process with nothing recorded but
//! unprinted, and one it read before is passed on to [`caught`] and
//! [`reraise_caught`]. No signal is lost either way.
//!
//! # Signals ignored at start
//!
//! Registering a handler replaces an ignored disposition, so each signal is
//! looked up before it is registered, and left alone if it is ignored. On
//! Linux the set of ignored signals is the `SigIgn:` mask of
//! `/proc/self/status` (signal `n` is bit `n - 1`). Where that cannot be
//! read (another Unix, no `/proc`), SIGINT and SIGHUP, the signals that
//! `nohup` and shells start processes with ignored, are left as they are
//! (not held during a batch), and only SIGTERM is handled: a process
//! started with SIGTERM ignored would then end by SIGTERM.

#[cfg(unix)]
use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

#[cfg(unix)]
use parking_lot::Mutex;
#[cfg(unix)]
use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};

/// What a signal does now.
#[cfg(unix)]
#[derive(Clone, Copy, PartialEq, Eq)]
enum State {
    /// No batch in progress: a signal acts at once.
    Idle,
    /// A batch in progress, no signal held: a signal is held.
    Holding,
    /// A batch in progress that holds this signal: another acts at once.
    Held(i32),
}

/// What a signal does now; the thread acts on a signal under this lock.
#[cfg(unix)]
static STATE: Mutex<State> = Mutex::new(State::Idle);
/// The signal held by a batch that has ended (0 if none): the command
/// stops.
#[cfg(unix)]
static CAUGHT: AtomicI32 = AtomicI32::new(0);

/// Handles SIGINT, SIGTERM and SIGHUP from now on, except those the
/// process was started with ignored (see the module docs).
///
/// Called once, before the engine is opened. If the handler cannot be
/// set up, the signals keep their default action.
pub fn install() {
    #[cfg(unix)]
    {
        let ignored = ignored_at_start();
        let signals: Vec<i32> = [SIGINT, SIGTERM, SIGHUP]
            .into_iter()
            .filter(|&sig| match ignored {
                Some(mask) => mask & (1u64 << (sig - 1)) == 0,
                // Unknown: only SIGTERM, which nothing common starts a
                // process with ignored.
                None => sig == SIGTERM,
            })
            .collect();
        if signals.is_empty() {
            return;
        }
        // The handler is registered on the thread that reads its notes, so
        // that no handler is left registered without a reader (its signals
        // would be swallowed); `install` returns once it is registered.
        let (registered, done) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("timebloom-signals".into())
            .spawn(move || {
                let notes = signal_hook::iterator::Signals::new(&signals);
                let _ = registered.send(());
                if let Ok(mut notes) = notes {
                    for sig in notes.forever() {
                        on_signal(sig);
                    }
                }
            });
        if spawned.is_ok() {
            let _ = done.recv();
        }
    }
}

/// Catches SIGXFSZ, so that a write past the file size limit
/// (`ulimit -f`, a service's LimitFSIZE) fails with EFBIG, reported with
/// its file as any I/O error is, instead of ending the process at once by
/// the signal's default action: that left a batch recorded and never
/// printed, and no message. The handler only sets a flag nobody reads.
/// If it cannot be set up, the signal keeps its default action.
pub fn catch_file_size_limit() {
    #[cfg(unix)]
    {
        let flag = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let _ = signal_hook::flag::register(signal_hook::consts::SIGXFSZ, flag);
    }
}

/// Acts on `sig` (on the signal thread): holds it if a batch holds
/// signals and none is held yet, else ends the process by it.
#[cfg(unix)]
fn on_signal(sig: i32) {
    let mut state = STATE.lock();
    match *state {
        State::Holding => *state = State::Held(sig),
        // The lock is kept: no batch begins while the process ends.
        State::Idle | State::Held(_) => die(sig),
    }
}

/// The signals the process ignores (bit `n - 1` for signal `n`), from the
/// `SigIgn:` line of `/proc/self/status`; `None` where it cannot be read.
#[cfg(unix)]
fn ignored_at_start() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let mask = status
        .lines()
        .find_map(|line| line.strip_prefix("SigIgn:"))?
        .trim();
    u64::from_str_radix(mask, 16).ok()
}

/// Ends the process by `sig` with its default action; should that fail,
/// exits with the shell's status for a death by `sig`.
#[cfg(unix)]
fn die(sig: i32) -> ! {
    // Restores the default disposition, unblocks `sig` and raises it (for
    // these signals it does not return but by an error).
    let _ = signal_hook::low_level::emulate_default_handler(sig);
    std::process::exit(128 + sig);
}

/// Holds signals until it is dropped (the batch printed, or failed).
pub struct Hold(());

/// Holds signals from now until the batch is done.
///
/// Waits while the signal thread is ending the process for a signal that
/// arrived before, so that no batch is recorded then.
pub fn hold() -> Hold {
    #[cfg(unix)]
    {
        *STATE.lock() = State::Holding;
    }
    Hold(())
}

impl Drop for Hold {
    fn drop(&mut self) {
        #[cfg(unix)]
        {
            let mut state = STATE.lock();
            if let State::Held(sig) = *state {
                CAUGHT.store(sig, SeqCst);
            }
            *state = State::Idle;
        }
    }
}

/// Whether a signal arrived during a batch: the command stops reading.
pub fn caught() -> bool {
    #[cfg(unix)]
    {
        CAUGHT.load(SeqCst) != 0
    }
    #[cfg(not(unix))]
    {
        false
    }
}

/// Ends the process by the signal a batch held, if one did.
pub fn reraise_caught() {
    #[cfg(unix)]
    {
        let sig = CAUGHT.load(SeqCst);
        if sig != 0 {
            die(sig);
        }
    }
}
