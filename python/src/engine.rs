//! `Engine`: an engine directory.
//!
//! Single-key calls keep the GIL (they take well under a microsecond),
//! except writes that wait: under the `always` sync policy for an fsync,
//! and writes that first rotate or grow windows (new files); backfills
//! (`insert_at`, `remove_at`), batch calls, `maintain`, `stats`, `verify`,
//! `flush`, `close`, `open` and `create` release it, and so does the end
//! of an engine never closed (see `Slot`'s `Drop`).

use std::path::Path;
use std::time::SystemTime;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString, PyTuple};

use timebloom::{Config, SyncPolicy};

use crate::clock::PyManualClock;
use crate::convert::{config_of, duration_of, instant_of, path_of, tiers_text, to_dict, CHUNK};
use crate::errors::{stopped_after, to_py};
use crate::slot::Slot;

fn options(
    clock: Option<&Bound<'_, PyManualClock>>,
    verify: bool,
    allow_clock_jump: bool,
    degraded: bool,
) -> timebloom::Options {
    let o = timebloom::Options::default()
        .verify_on_open(verify)
        .allow_clock_jump(allow_clock_jump)
        .degraded(degraded);
    match clock {
        Some(c) => o.clock(c.get().inner.clone()),
        None => o,
    }
}

/// A sync policy as the library reads it (`always`, `interval=1s`,
/// `interval=250ms`, `none`); a bad one is an `InvalidConfigError` naming
/// `path`.
fn sync_policy(s: &str, path: &Path) -> PyResult<SyncPolicy> {
    s.parse().map_err(|e| to_py(e, path))
}

/// An open timebloom engine: a directory of time-windowed Bloom filters.
///
/// Create one with `Engine.create(path, ...)`, open one with
/// `Engine.open(path)`. Use it as a context manager (`with ... as engine:`)
/// or call `close()`; an engine that is never closed is recovered at the
/// next open. Safe to share between threads.
#[pyclass(module = "timebloom", name = "Engine", frozen, weakref)]
pub(crate) struct PyEngine {
    slot: Slot<timebloom::Engine>,
    /// The injected clock, if any (`maintain()` reads it).
    clock: Option<timebloom::ManualClock>,
    /// The sync policy of this open: the one given to `open`, else the
    /// stored one.
    policy: SyncPolicy,
}

impl PyEngine {
    fn wrap(
        engine: timebloom::Engine,
        clock: Option<&Bound<'_, PyManualClock>>,
        sync: Option<SyncPolicy>,
    ) -> PyEngine {
        PyEngine {
            policy: sync.unwrap_or(engine.config().sync),
            clock: clock.map(|c| c.get().inner.clone()),
            slot: Slot::new(engine.path().to_path_buf(), engine),
        }
    }

    /// Runs a write `f` of one key (str or bytes): with the GIL held,
    /// except where the call waits: under the `always` policy, for an
    /// fsync (other Python threads run meanwhile, and their writes share
    /// that fsync), and when the write first rotates or grows windows
    /// (`Engine::write_may_wait`: new files, a manifest synced; a second
    /// or more for large windows).
    fn write_key<T: Send>(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        f: impl FnOnce(&timebloom::Engine, &[u8]) -> timebloom::Result<T> + Send,
    ) -> PyResult<T> {
        if self.policy == SyncPolicy::Always
            || self.slot.get(py, timebloom::Engine::write_may_wait)?
        {
            return self.slot.detached_key(py, key, f);
        }
        self.slot.with_key(key, f)
    }

    /// Runs a batch write `f` over the keys of an iterable, GIL released,
    /// in calls of up to [`CHUNK`] keys: when a call after the first fails,
    /// `IncompleteError` holds the answers of the keys recorded before.
    fn write_batch(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        f: impl Fn(&timebloom::Engine, &[&[u8]]) -> timebloom::Result<Vec<bool>> + Sync,
    ) -> PyResult<Vec<bool>> {
        self.slot
            .chunked(py, keys, CHUNK, f, |a, f| stopped_after(a, f, &self.slot))
    }
}

#[pymethods]
impl PyEngine {
    /// Refused with a `TypeError` naming `Engine.create` and `Engine.open`,
    /// the two ways to make an engine (in place of Python's bare "cannot
    /// create instances"): nothing is created or opened.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Err(PyTypeError::new_err(
            "timebloom.Engine has no constructor: create an engine with \
             Engine.create(path, tiers=..., items_per_day=..., fpr=...) \
             or open an existing one with Engine.open(path)",
        ))
    }

    /// Creates a new engine in `path` (created if missing).
    ///
    /// `tiers`: comma-separated windows and retentions, default `7d,4w,12m`
    /// (a `:counting` suffix makes a tier support `remove`). `items_per_day`:
    /// planned distinct keys per day (a window grows past it, at a cost in
    /// memory). `fpr`: false-positive rate bound of one query.
    /// `utc_offset_secs`: where window boundaries fall. `clock`: a
    /// `ManualClock` to read the time from instead of the system clock.
    /// `sync`: when an acknowledged insert survives a power loss, stored in
    /// the engine: `"always"` (before the call returns: one fsync per call,
    /// shared by a batch), `"interval=1s"` (all but at most the last
    /// interval; `250ms`, `2s`, `1m` also work) or `"none"` (what the
    /// operating system wrote back). A process crash loses nothing under
    /// any policy.
    #[staticmethod]
    #[pyo3(signature = (path, tiers="7d,4w,12m", items_per_day=1_000_000, fpr=0.001, *, utc_offset_secs=0, clock=None, sync="interval=1s"))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        tiers: &str,
        items_per_day: u64,
        fpr: f64,
        utc_offset_secs: i32,
        clock: Option<&Bound<'_, PyManualClock>>,
        sync: &str,
    ) -> PyResult<PyEngine> {
        let path = path_of(path)?;
        let config = Config {
            sync: sync_policy(sync, &path)?,
            ..config_of(tiers, items_per_day, fpr, utc_offset_secs).map_err(|e| to_py(e, &path))?
        };
        let opts = options(clock, false, false, false);
        py.detach(|| timebloom::Engine::create_with(&path, config, opts))
            .map(|e| PyEngine::wrap(e, clock, None))
            .map_err(|e| to_py(e, &path))
    }

    /// Opens the engine in `path`; its configuration comes from the directory.
    ///
    /// `verify=True` checks every sealed segment's checksum while opening.
    /// `read_only=True` opens for lookups only: no lock is taken (a writer
    /// may keep running), nothing is written, writes raise `ReadOnlyError`.
    /// `clock`: a `ManualClock` to read the time from.
    /// `allow_clock_jump=True` accepts a clock that jumped past every
    /// window holding keys (they all expire) instead of `ClockJumpError`.
    /// `sync`: a sync policy (as in `create`) for this open only, in place
    /// of the stored one, which stays as it is; not with `read_only=True`,
    /// which writes nothing. A segment file that fails its checks is moved
    /// to `quarantine/` and the open raises `QuarantinedError`;
    /// `degraded=True` goes on without that window instead (`stats()`
    /// lists it under `lost_windows`).
    #[staticmethod]
    #[pyo3(signature = (path, *, verify=false, read_only=false, clock=None, allow_clock_jump=false, sync=None, degraded=false))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        path: &Bound<'_, PyAny>,
        verify: bool,
        read_only: bool,
        clock: Option<&Bound<'_, PyManualClock>>,
        allow_clock_jump: bool,
        sync: Option<&str>,
        degraded: bool,
    ) -> PyResult<PyEngine> {
        let path = path_of(path)?;
        let sync = sync.map(|s| sync_policy(s, &path)).transpose()?;
        if read_only && sync.is_some() {
            return Err(PyValueError::new_err(
                "sync= applies to writes; a read_only=True open writes nothing",
            ));
        }
        let mut opts = options(clock, verify, allow_clock_jump, degraded);
        if let Some(p) = sync {
            opts = opts.sync(p);
        }
        py.detach(|| {
            if read_only {
                timebloom::Engine::open_read_only_with(&path, opts)
            } else {
                timebloom::Engine::open_with(&path, opts)
            }
        })
        .map(|e| PyEngine::wrap(e, clock, sync))
        .map_err(|e| to_py(e, &path))
    }

    /// Records `key` (str or bytes) in every tier's open window. Returns
    /// True when the key was new: absent from every live window before.
    fn insert(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.write_key(py, key, |e, k| e.insert(k))
    }

    /// `insert` for every key of `keys` (an iterable of str or bytes, not
    /// one str or bytes), with the GIL released; one bool per key, in
    /// order. Ctrl-C stops a batch of more than 16,384
    /// keys between chunks: the `KeyboardInterrupt` carries the answers of
    /// the keys recorded in its `answers` attribute.
    fn insert_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        self.write_batch(py, keys, |e, k| e.insert_batch(k))
    }

    /// Whether `key` is in any live window (at most `fpr` false positives,
    /// never a false negative within the retention).
    fn contains(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.slot.with_key(key, |e, k| e.contains(k))
    }

    /// `contains` for every key of `keys` (an iterable of str or bytes),
    /// with the GIL released; one bool per key, in order.
    fn contains_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        self.slot.chunked(
            py,
            keys,
            CHUNK,
            |e, k| e.contains_batch(k),
            |_, f| f.into_py(&self.slot),
        )
    }

    /// Whether `key` was inserted within `horizon` (a timedelta or seconds)
    /// of now. True for every key inserted within the horizon; may be True
    /// for a key up to one window of the answering tier older.
    /// `HorizonTooLongError` when no tier keeps `horizon`;
    /// `WindowUnavailableError` for every horizon while the clock is behind
    /// every window the tiers keep (stepped back further than they keep);
    /// a negative, NaN or infinite one, or one of 2**64 s or more, is a
    /// `ValueError`.
    fn contains_within(
        &self,
        key: &Bound<'_, PyAny>,
        horizon: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let h = duration_of(horizon)?;
        self.slot.with_key(key, |e, k| e.contains_within(k, h))
    }

    /// Claims `key` when it is due: when it was not seen within `horizon`
    /// (a timedelta or seconds), records it now, as `insert` does, and
    /// returns True; otherwise records nothing and returns False. The check
    /// of `contains_within` and the insert in one step (a recrawl
    /// schedule). Of several threads calling it for the same due key,
    /// exactly one gets True.
    /// `horizon` raises as in `contains_within`, before anything is recorded.
    fn insert_within(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        horizon: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let h = duration_of(horizon)?;
        self.write_key(py, key, |e, k| e.insert_within(k, h))
    }

    /// `insert_within` for every key of `keys` (an iterable of str or
    /// bytes) with the same `horizon`, with the GIL released; one bool per
    /// key, in order. `horizon` raises as in `insert_within`, even with no
    /// keys.
    fn insert_within_many(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        horizon: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<bool>> {
        let h = duration_of(horizon)?;
        self.write_batch(py, keys, |e, k| e.insert_within_batch(k, h))
    }

    /// Records `key` as seen at `when` (an aware datetime or seconds since
    /// the epoch): a backfill into every tier that still keeps that window.
    /// Returns True when the key was new.
    fn insert_at(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        when: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let t = instant_of(when)?;
        self.slot.detached_key(py, key, |e, k| e.insert_at(k, t))
    }

    /// Takes back one insert of `key` made now (counting and fingerprint
    /// tiers only: `RemoveUnsupportedError` otherwise): the windows inserts
    /// go to now, and only when every one of them holds the key. Returns
    /// whether it did (False for a key inserted into earlier counting
    /// windows only: `remove_at` with the instant of that insert takes it
    /// back). Remove only keys you inserted: removing another may remove a
    /// key that shares its counters. In a fingerprint tier two keys with
    /// the same fingerprint and bucket pair share one slot, so a remove
    /// takes the other with it (about the false-positive rate per remove).
    fn remove(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.write_key(py, key, |e, k| e.remove(k))
    }

    /// Takes back one insert of `key` made at `when` (an aware datetime or
    /// seconds since the epoch): counting and fingerprint tiers only.
    /// Returns whether it did.
    fn remove_at(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        when: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let t = instant_of(when)?;
        self.slot.detached_key(py, key, |e, k| e.remove_at(k, t))
    }

    /// Rotates and expires windows as of `now` (default: the engine's
    /// clock) and returns what changed: `{"opened": [...], "sealed": [...],
    /// "expired": [...]}`, windows as `TIER LABEL` (a fingerprint tier's
    /// dropped tables as `TIER table N`, the days whose keys it let go as
    /// `TIER day D` or `TIER days D to E (N days)`). Calls do this by
    /// themselves; call it to move across a clock jump on purpose. A
    /// `read_only=True` engine raises `ReadOnlyError`.
    #[pyo3(signature = (now=None))]
    fn maintain<'py>(
        &self,
        py: Python<'py>,
        now: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let now = now.map(instant_of).transpose()?;
        let now = now.unwrap_or_else(|| match &self.clock {
            Some(c) => timebloom::Clock::now(c),
            None => SystemTime::now(),
        });
        let m = self.slot.detached(py, |e| e.maintain(now))?;
        to_dict(py, &m)
    }

    /// The engine's state: tiers, segments, fill, estimated keys and rates.
    /// Runs with the GIL released: it may rotate windows (a boundary
    /// passed), and a read-only engine counts the open windows a writer
    /// holds from their bodies (a scan of each).
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.slot.detached(py, |e| e.stats())?;
        to_dict(py, &stats)
    }

    /// Checks every sealed segment's body checksum and fill count;
    /// `CorruptError` names the first bad file.
    fn verify(&self, py: Python<'_>) -> PyResult<()> {
        self.slot.detached(py, |e| e.verify())
    }

    /// Makes every insert so far durable (msync, header, fsync).
    fn flush(&self, py: Python<'_>) -> PyResult<()> {
        self.slot.detached(py, |e| e.flush())
    }

    /// Closes the engine cleanly (later calls raise `ClosedError`). Closing
    /// a closed engine does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.slot.close(py, timebloom::Engine::close)
    }

    /// The engine directory, as `os.fsdecode` names it: a name that is not
    /// UTF-8 keeps its bytes (as surrogate escapes), so it opens the same
    /// directory again.
    #[getter]
    fn path<'py>(&self, py: Python<'py>) -> Bound<'py, PyString> {
        let Ok(s) = self.slot.place().as_os_str().into_pyobject(py);
        s
    }

    /// Whether `close` has been called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.slot.is_closed(py)
    }

    /// Whether the engine was opened with `read_only=True`.
    #[getter]
    fn read_only(&self, py: Python<'_>) -> PyResult<bool> {
        self.slot.get(py, |e| e.is_read_only())
    }

    /// Whether `remove` works here (every tier is a counting or
    /// fingerprint tier).
    #[getter]
    fn supports_remove(&self, py: Python<'_>) -> PyResult<bool> {
        self.slot.get(py, |e| e.supports_remove())
    }

    /// The sync policy of this open (`"always"`, `"interval=1s"`, `"none"`):
    /// the one given to `open`, else the one stored at `create`.
    #[getter]
    fn sync(&self) -> String {
        self.policy.to_string()
    }

    /// The tiers, in the form `create` takes (`"7d,4w,12m"`): spaces
    /// dropped, and a window length in the largest unit that holds it
    /// whole (`"4x360min"` reads back as `"4x6h"`).
    #[getter]
    fn tiers(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.get(py, |e| tiers_text(e.config()))
    }

    fn __contains__(&self, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.contains(key)
    }

    /// The engine itself, for `with`; `ClosedError` once closed
    /// (`ForkedError` in a forked child), as every call.
    fn __enter__(slf: Py<Self>, py: Python<'_>) -> PyResult<Py<Self>> {
        slf.get().slot.get(py, |_| ())?;
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// Refused with a `TypeError` saying why: `pickle`, `copy.copy` and
    /// `copy.deepcopy` all ask for it. An open engine holds its
    /// directory's lock and mapped files, which a copy would share (or, in
    /// another process, hold twice); the other process opens the directory
    /// again by path.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(format!(
            "cannot pickle or copy a timebloom.Engine ({}): an open engine holds \
             its directory's lock and mapped files, which a copy would share; \
             pass the path and call Engine.open(path) where it is needed \
             (one writing process at a time, or read_only=True)",
            self.slot.place().display()
        )))
    }

    /// `<timebloom.Engine '/data/seen.tb' open>`: the directory as the
    /// `path` attribute names it (Python's repr of it: a name that is not
    /// UTF-8 shows its surrogate escapes), and whether it is open.
    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let state = if self.closed(py) { "closed" } else { "open" };
        Ok(format!(
            "<timebloom.Engine {} {state}>",
            self.path(py).repr()?
        ))
    }
}
