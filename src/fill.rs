//! The running count of a sub-filter's occupied cells, written by every
//! writer thread without sharing a cache line between them.
//!
//! Invariant: at any quiescent moment `total + Σ lanes` is the exact count
//! the writers reported (every add lands in exactly one of them). A writer
//! adds to the lane of its thread ([`lane`]); a lane that reaches `step`
//! cells moves everything it holds into `total` with one swap, so the
//! shared line is written once per `step` cells instead of once per key.
//! Readers who need the exact count (stats, headers, seals) add the lanes
//! up; the growth check on the insert path reads `total` alone and adds
//! the most the lanes can hold unfolded (`lanes × step`), so a chain grows
//! at most `grow_at / 4096` cells early (twice that after counting removes,
//! which may leave lanes below zero) and never late.
//!
//! Why: one shared `fetch_add` per new key was the whole difference
//! between one writer thread and two (docs/benchmarks.md, "Writers on
//! separate lines"): every insert moved the counter's line between cores.

use std::cell::Cell;
use std::sync::atomic::{AtomicI64, AtomicUsize, Ordering};

/// Lanes per counter: more than the writer threads a crawler runs on one
/// machine, so that two threads rarely share one.
pub(crate) const LANES: usize = 16;

/// The growth check may run ahead of the exact count by at most
/// `grow_at / SLACK` cells (see [`Fill::new`]).
const SLACK: u64 = 4096;

/// One lane, alone on its cache line (128 bytes: adjacent-line prefetch
/// pairs lines on x86).
#[repr(align(128))]
#[derive(Default)]
struct Lane(AtomicI64);

/// The lane of the calling thread: assigned round-robin at a thread's
/// first write, so that up to [`LANES`] writer threads each write their
/// own lines (of counters here, of staged log records in `wal`).
#[inline]
pub(crate) fn lane() -> usize {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    thread_local! {
        // `LANES` until assigned: a constant initializer, so a call is one
        // thread-local load and a compare (no lazy registration).
        static LANE: Cell<usize> = const { Cell::new(LANES) };
    }
    LANE.with(|l| {
        let lane = l.get();
        if lane < LANES {
            return lane;
        }
        let lane = NEXT.fetch_add(1, Ordering::Relaxed) % LANES;
        l.set(lane);
        lane
    })
}

/// The folded total at which a count that grows at `grow_at` and folds
/// every `step` cells may have reached it: `grow_at` less the most the
/// lanes can hold unfolded (nothing when every add goes to the total).
fn trigger(grow_at: u64, step: i64) -> i64 {
    let unfolded = match step {
        1 => 0,
        s => (s - 1).saturating_mul(LANES as i64),
    };
    i64::try_from(grow_at)
        .unwrap_or(i64::MAX)
        .saturating_sub(unfolded)
}

/// A sub-filter's occupied cells (see the module docs).
pub(crate) struct Fill {
    /// What the insert path reads, on one line.
    head: Head,
    /// Cells added (or, for counting removes, taken away) since each
    /// lane's last fold. Signed: a remove may empty a cell another lane
    /// counted.
    lanes: [Lane; LANES],
}

/// The folded total and the constants that go with it, on one line.
#[repr(align(128))]
struct Head {
    /// Cells folded in from the lanes (and set at open).
    total: AtomicI64,
    /// A lane folds once it holds this many cells (1: every add goes
    /// straight to `total`, as small filters do).
    step: i64,
    /// `total` at which the count may have reached `grow_at`: `grow_at`
    /// less the most the lanes can hold unfolded.
    trigger: i64,
}

impl Fill {
    /// A count of `occupied` cells for a sub-filter that grows at
    /// `grow_at`: the lanes together hold back at most `grow_at / 4096`.
    pub(crate) fn new(occupied: u64, grow_at: u64) -> Fill {
        // A table (`grow_at` = u64::MAX) never grows by its count.
        let step = match grow_at {
            u64::MAX => 1,
            g => (g / SLACK / LANES as u64).max(1),
        };
        let step = i64::try_from(step).unwrap_or(i64::MAX);
        let fill = Fill {
            head: Head {
                total: AtomicI64::new(0),
                step,
                trigger: trigger(grow_at, step),
            },
            lanes: Default::default(),
        };
        fill.set(occupied);
        fill
    }

    /// Records `n` newly occupied cells (a writer under its stripe, in the
    /// lane of its thread: [`lane`]).
    #[inline]
    pub(crate) fn add(&self, n: u64, lane: usize) {
        self.change(i64::try_from(n).unwrap_or(i64::MAX), lane);
    }

    /// Records `n` cells emptied (a counting remove).
    #[inline]
    pub(crate) fn remove(&self, n: u64, lane: usize) {
        self.change(-i64::try_from(n).unwrap_or(i64::MAX), lane);
    }

    #[inline]
    fn change(&self, n: i64, lane: usize) {
        if self.head.step <= 1 {
            self.head.total.fetch_add(n, Ordering::Relaxed);
            return;
        }
        let lane = &self.lanes[lane % LANES].0;
        let held = lane.fetch_add(n, Ordering::Relaxed).wrapping_add(n);
        if held >= self.head.step || held <= -self.head.step {
            // Everything the lane holds now, concurrent adds included: no
            // cell is lost or counted twice.
            let taken = lane.swap(0, Ordering::Relaxed);
            self.head.total.fetch_add(taken, Ordering::Relaxed);
        }
    }

    /// The exact count (lanes added up), never below zero: a damaged body
    /// may empty cells the count never had.
    pub(crate) fn get(&self) -> u64 {
        let lanes: i64 = self.lanes.iter().map(|l| l.0.load(Ordering::Relaxed)).sum();
        let n = self
            .head
            .total
            .load(Ordering::Relaxed)
            .saturating_add(lanes);
        u64::try_from(n).unwrap_or(0)
    }

    /// Replaces the count (a recount from the body, a shadow restored).
    pub(crate) fn set(&self, occupied: u64) {
        for l in &self.lanes {
            l.0.store(0, Ordering::Relaxed);
        }
        let n = i64::try_from(occupied).unwrap_or(i64::MAX);
        self.head.total.store(n, Ordering::Relaxed);
    }

    /// Whether adds wait in lanes (a large sub-filter) rather than going
    /// straight to the total.
    #[cfg(test)]
    pub(crate) fn folds_in_steps(&self) -> bool {
        self.head.step > 1
    }

    /// Whether the count may have reached the `grow_at` it was made with:
    /// the growth check on the insert path, one load of a line written
    /// once per fold. True whenever the exact count has (the lanes hold
    /// less than `step` each), and possibly up to `LANES × step` cells
    /// before.
    #[inline]
    pub(crate) fn may_be_full(&self) -> bool {
        self.head.total.load(Ordering::Relaxed) >= self.head.trigger
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `fill`'s total and lanes under the trigger of a count made for
    /// `grow_at` with `fill`'s step.
    fn with_trigger(fill: &Fill, grow_at: u64) -> Fill {
        let copy = Fill {
            head: Head {
                total: AtomicI64::new(fill.head.total.load(Ordering::Relaxed)),
                step: fill.head.step,
                trigger: trigger(grow_at, fill.head.step),
            },
            lanes: Default::default(),
        };
        for (to, from) in copy.lanes.iter().zip(&fill.lanes) {
            to.0.store(from.0.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        copy
    }

    #[test]
    fn adds_from_many_threads_sum_exactly_and_the_check_is_never_late() {
        let grow_at = 50_000_000u64;
        let fill = Fill::new(0, grow_at);
        assert!(fill.head.step > 1, "a large filter counts in lanes");
        let threads = 2 * LANES + 3; // lanes shared by several threads
        let per_thread = 40_000u64;
        std::thread::scope(|s| {
            for t in 0..threads as u64 {
                let fill = &fill;
                s.spawn(move || {
                    for i in 0..per_thread {
                        fill.add(1 + (i + t) % 12, lane());
                    }
                });
            }
        });
        let expected: u64 = (0..threads as u64)
            .map(|t| (0..per_thread).map(|i| 1 + (i + t) % 12).sum::<u64>())
            .sum();
        assert_eq!(fill.get(), expected);
        // Never late, and early by at most grow_at / SLACK: the count made
        // for a trigger at exactly what was added says full; one made for a
        // trigger past the slack does not, with the same lanes.
        assert!(with_trigger(&fill, expected).may_be_full());
        assert!(!with_trigger(&fill, expected + grow_at / SLACK + 1).may_be_full());
    }

    #[test]
    fn one_writer_is_never_late_at_any_count() {
        let grow_at = 10_000_000u64;
        let fill = Fill::new(0, grow_at);
        assert!(fill.head.step > 1);
        let mut exact = 0u64;
        for i in 0..200_000u64 {
            let n = 1 + i % 13;
            fill.add(n, 3);
            exact += n;
            assert!(with_trigger(&fill, exact).may_be_full(), "late at {exact}");
            assert!(
                !with_trigger(&fill, exact + grow_at / SLACK + 1).may_be_full(),
                "early at {exact}"
            );
        }
        assert_eq!(fill.get(), exact);
    }

    #[test]
    fn a_small_filter_counts_every_add_at_once() {
        let fill = Fill::new(7, 1000);
        assert_eq!(fill.head.step, 1);
        fill.add(5, 0);
        assert!(with_trigger(&fill, 12).may_be_full());
        assert!(!with_trigger(&fill, 13).may_be_full());
        fill.remove(20, 0);
        assert_eq!(fill.get(), 0, "never below zero");
    }

    #[test]
    fn removes_fold_too_and_set_replaces_everything() {
        let fill = Fill::new(1_000_000, 1 << 40);
        for _ in 0..1000 {
            fill.add(9, 1);
            fill.remove(4, 2);
        }
        assert_eq!(fill.get(), 1_000_000 + 5000);
        fill.set(42);
        assert_eq!(fill.get(), 42);
        assert!(with_trigger(&fill, 42).may_be_full());
    }
}
