//! SIGINT, SIGTERM and SIGHUP during `filter-new`.
//!
//! `filter-new` records a batch before it prints it. Killed between the
//! two (a service manager's SIGTERM, `timeout`, Ctrl-C while the reader of
//! stdout is slow), it left keys recorded whose lines were never printed:
//! keys the next run calls repeated, so their lines were never seen
//! downstream. While a batch is being recorded and printed, a signal is
//! held: the batch is printed in full, the command stops reading, closes
//! the engine and then ends by the same signal. Outside a batch (waiting
//! for input), and for a second signal while one is held, the signal acts
//! at once, as without a handler. A signal the process was started with
//! ignored (`nohup`, a background job's SIGINT) stays ignored.

use std::sync::atomic::{AtomicI32, Ordering::SeqCst};

/// No batch in progress: a signal acts at once.
const IDLE: i32 = 0;
/// A batch in progress: a signal is held.
const HOLDING: i32 = -1;

/// `IDLE`, `HOLDING`, or the number of the signal held during a batch.
static STATE: AtomicI32 = AtomicI32::new(IDLE);
/// The signal held by a batch that has ended: the command stops.
static CAUGHT: AtomicI32 = AtomicI32::new(0);

#[cfg(unix)]
const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

#[cfg(unix)]
extern "C" fn on_signal(sig: libc::c_int) {
    if STATE
        .compare_exchange(HOLDING, sig, SeqCst, SeqCst)
        .is_err()
    {
        die(sig);
    }
}

/// Ends the process by `sig` with its default action (async-signal-safe).
#[cfg(unix)]
fn die(sig: libc::c_int) {
    // SAFETY: signal and raise are async-signal-safe; SIG_DFL is a valid
    // disposition. Inside the handler the raised signal is delivered when
    // the handler returns.
    unsafe {
        libc::signal(sig, libc::SIG_DFL);
        libc::raise(sig);
    }
}

/// Installs the handler for the signals the process does not ignore.
pub fn install() {
    #[cfg(unix)]
    for sig in SIGNALS {
        // SAFETY: sigaction with zeroed structures set field by field; the
        // handler only touches atomics and calls async-signal-safe functions.
        unsafe {
            let mut old: libc::sigaction = std::mem::zeroed();
            if libc::sigaction(sig, std::ptr::null(), &mut old) != 0
                || old.sa_sigaction == libc::SIG_IGN
            {
                continue;
            }
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
            // A write or fsync in progress goes on after the handler.
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(sig, &action, std::ptr::null_mut());
        }
    }
}

/// Holds signals until it is dropped (the batch printed, or failed).
pub struct Hold(());

/// Holds signals from now until the batch is done.
pub fn hold() -> Hold {
    STATE.store(HOLDING, SeqCst);
    Hold(())
}

impl Drop for Hold {
    fn drop(&mut self) {
        let held = STATE.swap(IDLE, SeqCst);
        if held > 0 {
            CAUGHT.store(held, SeqCst);
        }
    }
}

/// Whether a signal arrived during a batch: the command stops reading.
pub fn caught() -> bool {
    CAUGHT.load(SeqCst) != 0
}

/// Ends the process by the signal a batch held, if one did.
pub fn reraise_caught() {
    let sig = CAUGHT.load(SeqCst);
    if sig == 0 {
        return;
    }
    #[cfg(unix)]
    die(sig);
    // The default action of these signals ends the process; should it not,
    // the shell's convention for a death by signal.
    std::process::exit(128 + sig);
}
