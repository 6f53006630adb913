//! `RedisEngine`: the same time-windowed filters kept in Redis, so that a
//! fleet of processes shares one view of what has been seen
//! (`timebloom::redis::RedisEngine`, `docs/distributed.md`).
//!
//! Every call that talks to Redis is one or more network round trips, so
//! every such call releases the GIL, single-key calls included: other
//! Python threads run while a call waits for Redis. The library serializes
//! the calls of one engine on its one connection; open one engine per
//! thread for parallel round trips.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

use timebloom::redis::{RedisEngine, RedisError as LibRedisError, RedisOptions};

use crate::clock::PyManualClock;
use crate::convert::{config_of, duration_of, instant_of, tiers_text, to_dict, CHUNK};
use crate::errors::to_py;
use crate::slot::{Failure, Slot};

/// How to connect: the library's `RedisOptions` from the keyword arguments
/// (`None`: the library's default).
#[allow(clippy::too_many_arguments)]
fn redis_options(
    clock: Option<&Bound<'_, PyManualClock>>,
    shards: Option<u32>,
    connect_timeout: Option<&Bound<'_, PyAny>>,
    io_timeout: Option<&Bound<'_, PyAny>>,
    retries: Option<u32>,
    cluster: bool,
    wait_replicas: u32,
    wait_timeout: Option<&Bound<'_, PyAny>>,
) -> PyResult<RedisOptions> {
    let mut o = RedisOptions::default();
    let secs = |v: Option<&Bound<'_, PyAny>>, default: Duration| -> PyResult<Duration> {
        v.map_or(Ok(default), duration_of)
    };
    o.shards = shards.unwrap_or(o.shards);
    o.connect_timeout = secs(connect_timeout, o.connect_timeout)?;
    o.io_timeout = secs(io_timeout, o.io_timeout)?;
    for (name, d) in [
        ("connect_timeout", o.connect_timeout),
        ("io_timeout", o.io_timeout),
    ] {
        if d.is_zero() {
            return Err(PyValueError::new_err(format!("{name} must be positive")));
        }
    }
    o.retries = retries.unwrap_or(o.retries);
    o.cluster = cluster;
    o.wait_replicas = wait_replicas;
    o.wait_timeout = secs(wait_timeout, o.wait_timeout)?;
    if let Some(c) = clock {
        o = o.clock(c.get().inner.clone());
    }
    Ok(o)
}

/// A timebloom engine kept in Redis: time-windowed Bloom filters that every
/// process connected to the same Redis and prefix shares.
///
/// Create one with `RedisEngine.create(url, prefix, ...)` (with
/// `exist_ok=True`, what each process of a fleet calls), open one with
/// `RedisEngine.open(url, prefix)`. Of several processes inserting the same
/// new key, exactly one is told it is new. Use it as a context manager or
/// call `close()`, which closes the connection; the filters stay in Redis
/// and expire by themselves. Safe to share between threads.
#[pyclass(module = "timebloom", name = "RedisEngine", frozen, weakref)]
pub(crate) struct PyRedisEngine {
    slot: Slot<RedisEngine>,
    /// The URL, password masked.
    url: String,
    prefix: String,
}

impl PyRedisEngine {
    /// Connects (GIL released) with `start` and wraps the engine; errors
    /// name the URL (password masked) and the prefix.
    fn start(
        py: Python<'_>,
        url: &str,
        prefix: &str,
        start: impl FnOnce() -> timebloom::redis::Result<RedisEngine> + Send,
    ) -> PyResult<PyRedisEngine> {
        let shown = timebloom::redact_url(url);
        let place = PathBuf::from(format!(
            "{shown} (prefix {})",
            timebloom::shown_prefix(prefix)
        ));
        match py.detach(start) {
            Ok(engine) => Ok(PyRedisEngine {
                slot: Slot::new(place, engine),
                url: shown,
                prefix: prefix.to_string(),
            }),
            Err(e) => Err(e.into_py(&place)),
        }
    }

    /// A batch lookup `f` over the keys of an iterable, GIL released, in
    /// calls of up to [`CHUNK`] keys (a signal stops it between them, as
    /// `Engine`'s); a failed call raises its own error, the answers before
    /// it dropped.
    fn lookups(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        f: impl Fn(&RedisEngine, &[&[u8]]) -> timebloom::redis::Result<Vec<bool>> + Sync,
    ) -> PyResult<Vec<bool>> {
        self.slot
            .chunked(py, keys, CHUNK, f, |_, fail| fail.into_py(&self.slot))
    }
}

#[pymethods]
impl PyRedisEngine {
    /// Refused with a `TypeError` naming `RedisEngine.create` and
    /// `RedisEngine.open`, the two ways to make an engine (in place of
    /// Python's bare "cannot create instances"): nothing is created or opened.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        Err(PyTypeError::new_err(
            "timebloom.RedisEngine has no constructor: create an engine with \
             RedisEngine.create(url, prefix, tiers=..., exist_ok=True) \
             or open an existing one with RedisEngine.open(url, prefix)",
        ))
    }

    /// Creates a new engine in the Redis at `url`, its keys under `prefix`.
    ///
    /// `url`: `redis://[user:password@]host:6379[/db]`, `rediss://` for
    /// TLS, several comma-separated URLs for the seed nodes of a Cluster,
    /// `redis+sentinel://host:26379/<master name>` through Sentinels.
    /// `prefix`: every key's prefix (no braces, no spaces). `tiers`,
    /// `items_per_day`, `fpr`, `utc_offset_secs` as in `Engine.create`
    /// (no counting or fingerprint tiers). `shards`: strings per window
    /// (default 16; more spread a Cluster's load). `exist_ok=True` opens the engine when
    /// there is one already, and raises `ConfigMismatchError` when it has
    /// another configuration; otherwise an existing engine is an
    /// `AlreadyExistsError`. `clock`: a `ManualClock` for window
    /// boundaries (Redis's own clock still decides when windows expire).
    /// `connect_timeout`, `io_timeout` (timedelta or seconds; default 5 and
    /// 10 s), `retries` (reconnect-and-resend attempts, default 8),
    /// `cluster=True` (the Cluster client with a single seed URL),
    /// `wait_replicas` (after the create and each insert, wait until that
    /// many replicas have it: `NotReplicatedError` after `wait_timeout`,
    /// default 1 s).
    #[staticmethod]
    #[pyo3(signature = (url, prefix, tiers="7d,4w,12m", items_per_day=1_000_000, fpr=0.001, *, utc_offset_secs=0, shards=16, exist_ok=false, clock=None, connect_timeout=None, io_timeout=None, retries=None, cluster=false, wait_replicas=0, wait_timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn create(
        py: Python<'_>,
        url: &str,
        prefix: &str,
        tiers: &str,
        items_per_day: u64,
        fpr: f64,
        utc_offset_secs: i32,
        shards: u32,
        exist_ok: bool,
        clock: Option<&Bound<'_, PyManualClock>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        io_timeout: Option<&Bound<'_, PyAny>>,
        retries: Option<u32>,
        cluster: bool,
        wait_replicas: u32,
        wait_timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRedisEngine> {
        let place = format!(
            "{} (prefix {})",
            timebloom::redact_url(url),
            timebloom::shown_prefix(prefix)
        );
        let config = config_of(tiers, items_per_day, fpr, utc_offset_secs)
            .map_err(|e| to_py(e, Path::new(&place)))?;
        let options = redis_options(
            clock,
            Some(shards),
            connect_timeout,
            io_timeout,
            retries,
            cluster,
            wait_replicas,
            wait_timeout,
        )?;
        PyRedisEngine::start(py, url, prefix, || {
            if exist_ok {
                RedisEngine::create_or_open_with(url, prefix, config, options)
            } else {
                RedisEngine::create_with(url, prefix, config, options)
            }
        })
    }

    /// Opens the engine under `prefix` in the Redis at `url`; its
    /// configuration comes from Redis (`NotFoundError` when there is none).
    /// The keyword arguments are `create`'s that are not about the
    /// configuration: `clock`, `connect_timeout`, `io_timeout`, `retries`,
    /// `cluster`, `wait_replicas`, `wait_timeout` (no `shards`,
    /// `utc_offset_secs` or `exist_ok`: those come from Redis).
    #[staticmethod]
    #[pyo3(signature = (url, prefix, *, clock=None, connect_timeout=None, io_timeout=None, retries=None, cluster=false, wait_replicas=0, wait_timeout=None))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        url: &str,
        prefix: &str,
        clock: Option<&Bound<'_, PyManualClock>>,
        connect_timeout: Option<&Bound<'_, PyAny>>,
        io_timeout: Option<&Bound<'_, PyAny>>,
        retries: Option<u32>,
        cluster: bool,
        wait_replicas: u32,
        wait_timeout: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyRedisEngine> {
        let options = redis_options(
            clock,
            None,
            connect_timeout,
            io_timeout,
            retries,
            cluster,
            wait_replicas,
            wait_timeout,
        )?;
        PyRedisEngine::start(py, url, prefix, || {
            RedisEngine::open_with(url, prefix, options)
        })
    }

    /// Records `key` (str or bytes) in every tier's open window. Returns
    /// True when the key was new: absent from every live window before. Of
    /// several processes inserting the same new key, exactly one gets True.
    fn insert(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.slot.detached_key(py, key, |e, k| e.insert(k))
    }

    /// `insert` for every key of `keys` (an iterable of str or bytes), in one pipeline of server-side
    /// scripts; one bool per key, in order (a key repeated in the batch is
    /// new at most once). One call however long (sent again after an
    /// error, it resumes), so Ctrl-C is raised only once it returns, every
    /// key recorded: to stop a long batch, send it in chunks of your own.
    fn insert_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        self.slot.batch(py, keys, |e, k| e.insert_batch(k))
    }

    /// Claims `key` when it is due: when it was not seen within `horizon`
    /// (a timedelta or seconds), records it now and returns True; otherwise
    /// records nothing and returns False. One server-side step: of several
    /// processes calling it for the same due key, exactly one gets True.
    /// `horizon` raises as in `contains_within`, before anything is recorded.
    fn insert_within(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        horizon: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let h = duration_of(horizon)?;
        self.slot
            .detached_key(py, key, |e, k| e.insert_within(k, h))
    }

    /// `insert_within` for every key of `keys` (an iterable of str or
    /// bytes) with the same `horizon`, in one pipeline; one bool per key,
    /// in order. One call however long, as `insert_many`. `horizon` raises
    /// as in `insert_within`, even with no keys.
    fn insert_within_many(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        horizon: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<bool>> {
        let h = duration_of(horizon)?;
        self.slot
            .batch(py, keys, |e, k| e.insert_within_batch(k, h))
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

    /// Whether `key` is in any live window (at most `fpr` false positives,
    /// never a false negative within the retention).
    fn contains(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.slot.detached_key(py, key, |e, k| e.contains(k))
    }

    /// `contains` for every key of `keys` (an iterable of str or bytes), in calls of up to 16,384
    /// keys (a lookup has nothing to resume): Ctrl-C stops it between them.
    fn contains_many(&self, py: Python<'_>, keys: &Bound<'_, PyAny>) -> PyResult<Vec<bool>> {
        self.lookups(py, keys, |e, k| e.contains_batch(k))
    }

    /// Whether `key` was inserted within `horizon` (a timedelta or seconds)
    /// of now. True for every key inserted within the horizon; may be True
    /// for a key up to one window of the answering tier older.
    /// `HorizonTooLongError` when no tier keeps `horizon`; a negative, NaN
    /// or infinite one, or one of 2**64 s or more, is a `ValueError`.
    fn contains_within(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        horizon: &Bound<'_, PyAny>,
    ) -> PyResult<bool> {
        let h = duration_of(horizon)?;
        self.slot
            .detached_key(py, key, |e, k| e.contains_within(k, h))
    }

    /// `contains_within` for every key of `keys` (an iterable of str or
    /// bytes) with the same `horizon`, in calls of up to 16,384 keys as
    /// `contains_many`.
    fn contains_within_many(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        horizon: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<bool>> {
        let h = duration_of(horizon)?;
        self.lookups(py, keys, |e, k| e.contains_within_batch(k, h))
    }

    /// The engine's state, as `Engine.stats()`: tiers, windows, fill,
    /// estimated keys and rates, read from the shards' directories.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let stats = self.slot.detached(py, |e| e.stats())?;
        to_dict(py, &stats)
    }

    /// Closes the connection (later calls raise `ClosedError`); the filters
    /// stay in Redis. Closing a closed engine does nothing.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        self.slot.close(py, |e| {
            drop(e);
            Ok::<(), LibRedisError>(())
        })
    }

    /// The URL, its password masked.
    #[getter]
    fn url(&self) -> String {
        self.url.clone()
    }

    /// The prefix of every key of this engine.
    #[getter]
    fn prefix(&self) -> String {
        self.prefix.clone()
    }

    /// Whether `close` has been called.
    #[getter]
    fn closed(&self, py: Python<'_>) -> bool {
        self.slot.is_closed(py)
    }

    /// The tiers, in the form `create` takes (`"7d,4w,12m"`): spaces
    /// dropped, and a window length in the largest unit that holds it
    /// whole (`"4x360min"` reads back as `"4x6h"`).
    #[getter]
    fn tiers(&self, py: Python<'_>) -> PyResult<String> {
        self.slot.get(py, |e| tiers_text(e.config()))
    }

    /// Strings per window (fixed at create).
    #[getter]
    fn shards(&self, py: Python<'_>) -> PyResult<u32> {
        self.slot.get(py, RedisEngine::shards)
    }

    /// Whether the engine talks to a Redis Cluster.
    #[getter]
    fn is_cluster(&self, py: Python<'_>) -> PyResult<bool> {
        self.slot.get(py, RedisEngine::is_cluster)
    }

    fn __contains__(&self, py: Python<'_>, key: &Bound<'_, PyAny>) -> PyResult<bool> {
        self.contains(py, key)
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
    /// `copy.deepcopy` all ask for it. The engine holds a connection to
    /// Redis, which a copy would share; the other process connects again
    /// with the URL and prefix.
    fn __reduce__(&self) -> PyResult<()> {
        Err(PyTypeError::new_err(format!(
            "cannot pickle or copy a timebloom.RedisEngine ({} prefix {}): it holds \
             a connection to Redis, which a copy would share; pass the URL and \
             prefix and call RedisEngine.open(url, prefix) where it is needed",
            self.url, self.prefix
        )))
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        let state = if self.closed(py) { "closed" } else { "open" };
        format!(
            "<timebloom.RedisEngine {} (prefix {}) {state}>",
            self.url, self.prefix
        )
    }
}
