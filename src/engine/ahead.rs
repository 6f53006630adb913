//! The next windows, created before the boundary that needs them.
//!
//! Creating a window allocates its whole file: 1.1 GB for the default
//! tiers at 10^7 keys a day, 2.7 s of writing zeros, which the writer that
//! crossed the boundary used to pay while every other writer waited for
//! its rotation. Now the first write that finds the clock within
//! [`lead`] of the next boundary starts a thread that creates the files of
//! the windows that boundary opens and maps them in (`SubFilter::map_in`).
//! [`PREFAULT_SECS`] before the boundary the thread faults them in
//! writable (`SubFilter::prefault`), so the first inserts in the new
//! windows take no page faults: not earlier, because the kernel writes
//! dirty pages back within about 30 s and write-protects them again. The
//! rotation at the boundary takes the files (stopping the thread's wait
//! or prefault, or waiting for it to finish creating them) and only has
//! to name them in the manifest and publish them.
//!
//! Crash safety needs nothing new. A file created ahead is named by no
//! manifest until the rotation commits it, like the file of a rotation
//! interrupted before its manifest: an open deletes it as a leftover.
//! Files that no rotation takes (the engine closed first, or the clock
//! skipped past their window) are deleted when their [`Made`] drops. A
//! failure while creating (a full disk, an I/O error) deletes what the
//! thread created and reports nothing: the rotation then creates the
//! windows itself, after expiry has freed space, and reports any error as
//! before.
//!
//! The slot is a mutex the rotation holds from before it creates windows
//! until it has published the new set, and a writer only tries it: no
//! thread ever creates a window's file while a rotation may be creating
//! the same one, and no writer waits for it.

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, Receiver};
use std::sync::Arc;
use std::time::Duration;

use crate::clock::TimeSource;
use crate::error::Error;
use crate::filter::Kind;
use crate::segment::SubFilter;

use super::rotate::NewFile;
use super::Engine;

/// How long before a boundary its windows are created: an eighth of the
/// window that ends first (`window_secs`, that window's length), at most
/// ten minutes. Early enough that the files are
/// ready well before the boundary, late enough that the disk holds the
/// next windows beside the current ones only briefly.
pub(super) fn lead(window_secs: i64) -> i64 {
    (window_secs / 8).clamp(0, 600)
}

/// How many seconds before the boundary the files created ahead are
/// faulted in writable: enough for the 1.1 GB of the default tiers at
/// 10^7 keys a day on a busy machine, and inside the kernel's 30 s before
/// it writes dirty pages back.
pub(super) const PREFAULT_SECS: i64 = 20;

/// A thread creating the next windows, then prefaulting them.
pub(super) struct Ahead {
    /// The files, sent as soon as they are created: the rotation never
    /// waits for the prefault (a thread at nice 10 on busy cores could
    /// make it wait long).
    made: Receiver<Made>,
    /// Set by the rotation or close: stop waiting for the prefault instant,
    /// or stop prefaulting (the thread then ends within one 8 MiB step; it
    /// holds only its own references to the files).
    stop: Arc<AtomicBool>,
    /// The thread: joined by close (through `Maint::prefaulting`, where
    /// [`take`] puts it), so that no thread of the engine still holds a
    /// file of its directory once close returns.
    job: std::thread::JoinHandle<()>,
}

/// Sub-filters created ahead, each with its tier's index and its window;
/// those still here when this drops are deleted.
#[derive(Default)]
pub(super) struct Made(Vec<(usize, i64, Arc<SubFilter>)>);

impl Made {
    /// The file created ahead for `window` of tier `tier`, if any.
    pub(super) fn take(&mut self, tier: usize, window: i64) -> Option<Arc<SubFilter>> {
        let i = self
            .0
            .iter()
            .position(|(t, w, _)| *t == tier && *w == window)?;
        Some(self.0.swap_remove(i).2)
    }
}

impl Drop for Made {
    fn drop(&mut self) {
        for (_, _, sub) in self.0.drain(..) {
            let path = sub.path().to_path_buf();
            drop(sub);
            // An open deletes what is left, as any file no manifest names.
            let _ = fs::remove_file(path);
        }
    }
}

/// One file to create ahead: for `window` of the tier at `tier`.
struct Plan {
    tier: usize,
    window: i64,
    file: NewFile,
}

impl Engine {
    /// Called by a writer whose clock is within the lead of `boundary`:
    /// starts creating the windows that open there, once per boundary.
    /// Never waits: a writer that finds the slot taken goes on.
    #[cold]
    pub(super) fn create_ahead(&self, boundary: i64) {
        if self.ahead_for.load(Ordering::Relaxed) == boundary {
            return;
        }
        let Some(mut slot) = self.ahead.try_lock() else {
            return;
        };
        // Under the slot the current set cannot change windows (a rotation
        // holds the slot until it has published).
        let cur = self.current.load();
        let b = cur.next_boundary;
        if cur.closed || self.ahead_for.load(Ordering::Relaxed) == b || slot.is_some() {
            return;
        }
        self.ahead_for.store(b, Ordering::Relaxed);
        let mut plans = Vec::new();
        for (ti, t) in cur.tiers.iter().enumerate() {
            if t.tier.is_table() {
                continue; // one table for life: no window opens at a boundary
            }
            let Ok(window) = self.window_index(t.tier.span, b) else {
                continue;
            };
            if t.segments.last().is_some_and(|s| s.window >= window) {
                continue;
            }
            let Ok(file) = self.new_file(&t.tier, &t.code, window, 0) else {
                continue;
            };
            plans.push(Plan {
                tier: ti,
                window,
                file,
            });
        }
        if plans.is_empty() {
            return;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let (clock, stopped) = (self.clock.clone(), Arc::clone(&stop));
        let (tx, made) = mpsc::channel();
        let job = spawn_background("timebloom-ahead", move || {
            let made = make(plans);
            let subs: Vec<Arc<SubFilter>> = made.0.iter().map(|(_, _, s)| Arc::clone(s)).collect();
            // Nobody to take them (the engine went): they are deleted.
            let _ = tx.send(made);
            if wait_until(&clock, b - PREFAULT_SECS, &stopped) {
                for sub in &subs {
                    sub.prefault(&stopped);
                }
            }
        });
        // No thread to be had: the rotation creates the windows itself.
        if let Ok(job) = job {
            *slot = Some(Ahead { made, stop, job });
        }
    }
}

/// Faults in writable, on a thread of their own at nice 10, the
/// sub-filters a rotation or a growth just made and published (not those
/// created ahead, which their own thread faults in before the boundary):
/// the first windows of a new engine, those of a rotation after the
/// process was down at a boundary, a chain's new sub-filter. The inserts
/// that follow then take fewer first-write faults (a write-protect fault
/// through the file system per page: 30 to 140 ns a key over the first
/// million new keys of the default tiers at 10^6 a day, measured). Best
/// effort, as [`SubFilter::prefault`]: no error reaches anyone, and the
/// thread stops within one 8 MiB step once `stop` is set (at close).
/// Fingerprint tables are left out: at 10^7 keys a day one is a 12 GB
/// file, and inserts touch it a page at a time anyway.
///
/// The thread's handle goes into `running` (finished ones leave it): an
/// expiry stops and joins them first (`Engine::stop_prefaults`).
pub(super) fn prefault_behind(
    mut subs: Vec<Arc<SubFilter>>,
    stop: &Arc<AtomicBool>,
    running: &mut Vec<std::thread::JoinHandle<()>>,
) {
    running.retain(|h| !h.is_finished());
    subs.retain(|s| s.header().kind != Kind::Fingerprint);
    if subs.is_empty() || stop.load(Ordering::Relaxed) {
        return;
    }
    let stop = Arc::clone(stop);
    // No thread to be had: the inserts take the faults, as before.
    if let Ok(h) = spawn_background("timebloom-prefault", move || {
        for sub in &subs {
            sub.prefault(&stop);
        }
    }) {
        running.push(h);
    }
}

/// Runs `work` on a new thread named `name` at the background priority of
/// [`background`]: the engine's helper threads (creating windows ahead,
/// prefaulting, sealing, checkpoints, releasing old mappings) all start
/// here. An error when no thread could be had.
pub(super) fn spawn_background<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> T + Send + 'static,
) -> std::io::Result<std::thread::JoinHandle<T>> {
    std::thread::Builder::new()
        .name(name.into())
        .spawn(move || {
            background();
            work()
        })
}

/// Lowers the calling thread's priority to nice 10: the engine's
/// background work (creating windows ahead, sealing) gives way to the
/// threads that look keys up and insert them, which on a machine with few
/// cores it would otherwise preempt for milliseconds. It still runs (a
/// nice-10 thread gets about a tenth of a busy core). Linux sets the
/// nice value per thread; a failure leaves the priority as it was.
fn background() {
    #[cfg(target_os = "linux")]
    let _ = rustix::process::setpriority_process(Some(rustix::thread::gettid()), 10);
}

/// Takes what the thread in `slot` made: stops its prefault, and waits for
/// it to finish creating (not prefaulting). The thread, which ends within
/// one prefault step or wait, goes into `running` (`Maint::prefaulting`),
/// for an expiry or close to join.
pub(super) fn take(
    slot: &mut Option<Ahead>,
    running: &mut Vec<std::thread::JoinHandle<()>>,
) -> Made {
    running.retain(|h| !h.is_finished());
    slot.take()
        .and_then(|a| {
            a.stop.store(true, Ordering::Relaxed);
            let made = a.made.recv().ok();
            running.push(a.job);
            made
        })
        .unwrap_or_default()
}

/// Waits until the engine's clock reads `t` (true), or until `stop` is set
/// (false). Polls: the clock may be a test's or a simulation's, which
/// moves by steps no timer knows of.
fn wait_until(clock: &TimeSource, t: i64, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        match clock.now_secs() {
            Ok(now) if now >= t => return true,
            Ok(_) => {}
            Err(_) => return false,
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Creates and maps every planned file; on the first failure
/// deletes what it made and returns nothing.
fn make(plans: Vec<Plan>) -> Made {
    let mut made = Made::default();
    for p in plans {
        match p.file.create() {
            Ok(sub) => {
                made.0.push((p.tier, p.window, Arc::new(sub)));
            }
            Err(e) => {
                // A file this call did not create (it existed) is not ours
                // to delete; a partial one of ours is.
                let existed = matches!(&e, Error::Io { op: "create segment", source, .. }
                    if source.kind() == std::io::ErrorKind::AlreadyExists);
                if !existed {
                    let _ = fs::remove_file(&p.file.path);
                }
                return Made::default();
            }
        }
    }
    made
}
