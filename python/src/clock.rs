//! `ManualClock`: the engine's injected clock, for tests and replays.

use std::time::UNIX_EPOCH;

use pyo3::prelude::*;

use crate::convert::{duration_of, instant_of};

/// A clock that moves only when told to, for tests and replays.
///
/// `ManualClock(now)` shows `now`: an aware datetime or seconds since the
/// Unix epoch. Give it to `Engine.create(..., clock=c)`,
/// `Engine.open(..., clock=c)` or `RedisEngine`'s: the engine then reads
/// the time from it instead of the system clock.
/// Copies share one time. Whole seconds.
#[pyclass(module = "timebloom", name = "ManualClock", frozen)]
pub(crate) struct PyManualClock {
    pub(crate) inner: timebloom::ManualClock,
}

#[pymethods]
impl PyManualClock {
    /// A clock showing `now`: an aware datetime or seconds since the Unix epoch.
    #[new]
    fn new(now: &Bound<'_, PyAny>) -> PyResult<Self> {
        Ok(PyManualClock {
            inner: timebloom::ManualClock::new(instant_of(now)?),
        })
    }

    /// Shows `now` from now on (an aware datetime or seconds since the epoch).
    fn set(&self, now: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.set(instant_of(now)?);
        Ok(())
    }

    /// Moves the clock forward by `by` (a timedelta or seconds), stopping at
    /// the last second a signed 64-bit count holds. A `by` of more seconds
    /// than an unsigned 64-bit count holds (2**64) is a `ValueError`, and
    /// the clock does not move.
    fn advance(&self, by: &Bound<'_, PyAny>) -> PyResult<()> {
        self.inner.advance(duration_of(by)?);
        Ok(())
    }

    /// The time shown, in whole seconds since the Unix epoch.
    fn timestamp(&self) -> u64 {
        use timebloom::Clock;
        self.inner
            .now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs())
    }

    fn __repr__(&self) -> String {
        format!("ManualClock({})", self.timestamp())
    }
}
