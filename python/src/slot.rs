//! What the `Engine` and `RedisEngine` classes share: an engine that
//! `close` can take away while other threads are calling it.
//!
//! The engine sits behind a read-write lock over an `Option`. Every call
//! takes the lock shared; `close` takes it exclusive and leaves `None`, so
//! later calls raise `ClosedError`. Calls that release the GIL take the
//! lock only after releasing it, so no thread ever waits for the GIL while
//! it holds the lock.

use std::path::{Path, PathBuf};
use std::sync::{RwLock, RwLockReadGuard};

use pyo3::prelude::*;

use crate::convert::{key_bytes, keys_of};
use crate::errors::{with_path, ClosedError};

/// An engine error that becomes a Python exception naming `place` (the
/// engine directory, or the Redis URL and prefix).
pub(crate) trait Failure: Send {
    /// The Python exception.
    fn into_py(self, place: &Path) -> PyErr;
}

/// An open engine, or `None` once closed.
pub(crate) struct Slot<E> {
    inner: RwLock<Option<E>>,
    /// What errors name: the engine directory, or the Redis URL (password
    /// masked) and prefix.
    place: PathBuf,
}

impl<E: Send + Sync> Slot<E> {
    /// `engine`, whose errors name `place`.
    pub(crate) fn new(place: PathBuf, engine: E) -> Slot<E> {
        Slot {
            inner: RwLock::new(Some(engine)),
            place,
        }
    }

    /// What errors name.
    pub(crate) fn place(&self) -> &Path {
        &self.place
    }

    fn read(&self) -> RwLockReadGuard<'_, Option<E>> {
        // A panic while the lock was held cannot leave the engine half
        // changed from this side: the engine keeps its own invariants.
        self.inner.read().unwrap_or_else(|p| p.into_inner())
    }

    /// Whether `close` has run.
    pub(crate) fn is_closed(&self) -> bool {
        self.read().is_none()
    }

    /// Runs `f` on the open engine under the shared lock, with the GIL held.
    pub(crate) fn with<T, X: Failure>(&self, f: impl FnOnce(&E) -> Result<T, X>) -> PyResult<T> {
        let guard = self.read();
        let engine = guard.as_ref().ok_or_else(|| self.closed_error())?;
        f(engine).map_err(|e| e.into_py(&self.place))
    }

    /// Reads something off the open engine (GIL held).
    pub(crate) fn get<T>(&self, f: impl FnOnce(&E) -> T) -> PyResult<T> {
        let guard = self.read();
        guard.as_ref().map(f).ok_or_else(|| self.closed_error())
    }

    /// Runs `f` on the open engine with the GIL released.
    pub(crate) fn detached<T: Send, X: Failure>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&E) -> Result<T, X> + Send,
    ) -> PyResult<T> {
        let r = py.detach(|| {
            let guard = self.read();
            guard.as_ref().map(f)
        });
        match r {
            None => Err(self.closed_error()),
            Some(r) => r.map_err(|e| e.into_py(&self.place)),
        }
    }

    /// Runs a batch call `f` over the keys of an iterable, GIL released.
    pub(crate) fn batch<X: Failure>(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        f: impl FnOnce(&E, &[&[u8]]) -> Result<Vec<bool>, X> + Send,
    ) -> PyResult<Vec<bool>> {
        let keys = keys_of(keys)?;
        let owned = keys.iter().map(key_bytes).collect::<PyResult<Vec<_>>>()?;
        let slices: Vec<&[u8]> = owned.iter().map(|k| k.as_bytes()).collect();
        self.detached(py, |e| f(e, &slices))
    }

    /// Takes the engine out, once every call in flight has returned, and
    /// hands it to `finish` (GIL released). Closing a closed slot does
    /// nothing.
    pub(crate) fn close<X: Failure>(
        &self,
        py: Python<'_>,
        finish: impl FnOnce(E) -> Result<(), X> + Send,
    ) -> PyResult<()> {
        let r = py.detach(|| {
            let mut guard = self.inner.write().unwrap_or_else(|p| p.into_inner());
            guard.take().map(finish)
        });
        match r {
            None | Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(e.into_py(&self.place)),
        }
    }

    fn closed_error(&self) -> PyErr {
        with_path(
            ClosedError::new_err(format!("{}: the engine is closed", self.place.display())),
            &self.place,
        )
    }
}
