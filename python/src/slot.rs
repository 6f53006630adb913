//! What the `Engine` and `RedisEngine` classes share: an engine that
//! `close` can take away while other threads are calling it.
//!
//! The engine sits behind a read-write lock over an `Option`. Every call
//! takes the lock shared; `close` takes it exclusive and leaves `None`, so
//! later calls raise `ClosedError`. Calls that release the GIL take the
//! lock only after releasing it, so no thread ever waits for the GIL while
//! it holds the lock.
//!
//! A process forked while an engine is open (without `exec`: Python's
//! `multiprocessing` on Linux) inherits it, but must not use it: the
//! parent still writes the same files (or talks on the same connection),
//! and the engine's threads and lock holders exist only in the parent.
//! `os.register_at_fork` bumps a counter in the child; a slot made before
//! the fork sees it changed and raises `ForkedError` without touching its
//! lock (a thread of the parent may have held it at the fork). Closing or
//! dropping it in the child lets go of it without a write (see `Leave`).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{RwLock, RwLockReadGuard, TryLockError};

use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::convert::{for_chunks, key_bytes, Stop};
use crate::errors::{with_path, ClosedError, ForkedError};

/// Forks this process has been through (`os.register_at_fork` calls
/// [`after_fork_in_child`] in each child).
static FORKS: AtomicU64 = AtomicU64::new(0);

/// Registered with `os.register_at_fork(after_in_child=...)`.
#[pyfunction]
pub(crate) fn after_fork_in_child() {
    FORKS.fetch_add(1, Ordering::Relaxed);
}

/// How an engine inherited through `fork` is let go of in the child.
pub(crate) trait Leave: Send {
    /// Lets go without writing or joining anything.
    fn leave(self);

    /// What of it can be let go of through a shared reference, when a
    /// thread of the parent was inside a call at the fork (its borrow
    /// never ends in the child, so the engine cannot be taken out).
    fn leave_shared(&self) {}
}

impl Leave for timebloom::Engine {
    fn leave(self) {
        self.leave_after_fork();
    }

    /// The child's copy of the directory lock.
    fn leave_shared(&self) {
        self.leave_lock_after_fork();
    }
}

impl Leave for timebloom::redis::RedisEngine {
    /// The connection stays open until the child exits: closing the
    /// child's copy of the socket would not end the parent's connection,
    /// but dropping the client may talk on it.
    fn leave(self) {
        std::mem::forget(self);
    }
}

/// An engine error that becomes a Python exception naming `place` (the
/// engine directory, or the Redis URL and prefix).
pub(crate) trait Failure: Send {
    /// The Python exception.
    fn into_py(self, place: &Path) -> PyErr;
}

/// Why one call of a batch failed.
pub(crate) enum Fail<X> {
    /// The engine was closed meanwhile.
    Closed,
    /// The engine's error.
    Call(X),
    /// Already a Python exception: a key that cannot be encoded, or the
    /// engine inherited through `fork`.
    Raised(PyErr),
}

impl<X: Failure> Fail<X> {
    /// The Python exception (GIL held: the engine's errors set attributes).
    pub(crate) fn into_py<E: Send + Sync + Leave>(self, slot: &Slot<E>) -> PyErr {
        match self {
            Fail::Closed => slot.closed_error(),
            Fail::Call(e) => e.into_py(&slot.place),
            Fail::Raised(e) => e,
        }
    }
}

/// An open engine, or `None` once closed.
pub(crate) struct Slot<E: Leave> {
    inner: RwLock<Option<E>>,
    /// What errors name: the engine directory, or the Redis URL (password
    /// masked) and prefix.
    place: PathBuf,
    /// [`FORKS`] when the engine was opened.
    forks: u64,
}

impl<E: Leave> Slot<E> {
    /// Whether this process was forked since the engine was opened.
    fn forked(&self) -> bool {
        FORKS.load(Ordering::Relaxed) != self.forks
    }
}

/// An engine never closed ends with its Python object, whenever the last
/// reference goes or the garbage collector reaches it, in any thread:
/// dropping it closes it (an `Engine` syncs and unmaps its files, half a
/// second or more for large windows; a `RedisEngine` ends its
/// connection), with the GIL released as `close` does, so that the other
/// Python threads run meanwhile. Nothing else can reach the object then
/// (no reference is left, and a weak reference to it answers `None`).
impl<E: Leave> Drop for Slot<E> {
    fn drop(&mut self) {
        let forked = self.forked();
        let inner = self.inner.get_mut().unwrap_or_else(|p| p.into_inner());
        let Some(engine) = inner.take() else {
            return;
        };
        if forked {
            engine.leave();
        } else {
            Python::attach(|py| py.detach(move || drop(engine)));
        }
    }
}

impl<E: Send + Sync + Leave> Slot<E> {
    /// `engine`, whose errors name `place`.
    pub(crate) fn new(place: PathBuf, engine: E) -> Slot<E> {
        Slot {
            inner: RwLock::new(Some(engine)),
            place,
            forks: FORKS.load(Ordering::Relaxed),
        }
    }

    /// What errors name.
    pub(crate) fn place(&self) -> &Path {
        &self.place
    }

    /// The shared lock, unless the engine was inherited through `fork`
    /// (with the GIL released: see [`Slot::read_attached`] otherwise).
    fn read(&self) -> PyResult<RwLockReadGuard<'_, Option<E>>> {
        if self.forked() {
            return Err(self.forked_error());
        }
        // A panic while the lock was held cannot leave the engine half
        // changed from this side: the engine keeps its own invariants.
        Ok(self.inner.read().unwrap_or_else(|p| p.into_inner()))
    }

    /// [`Slot::read`] with the GIL held. The lock is not free at once
    /// while a `close` waits for a call in flight (a Redis round trip
    /// with its retries, a long batch, `verify`): it is then waited for
    /// with the GIL released, so other Python threads run meanwhile,
    /// and taken again once it is free.
    fn read_attached(&self, py: Python<'_>) -> PyResult<RwLockReadGuard<'_, Option<E>>> {
        loop {
            if self.forked() {
                return Err(self.forked_error());
            }
            match self.inner.try_read() {
                Ok(guard) => return Ok(guard),
                Err(TryLockError::Poisoned(p)) => return Ok(p.into_inner()),
                Err(TryLockError::WouldBlock) => py.detach(|| drop(self.inner.read())),
            }
        }
    }

    /// Whether `close` has run (or the engine was inherited through `fork`).
    pub(crate) fn is_closed(&self, py: Python<'_>) -> bool {
        self.read_attached(py).map_or(true, |g| g.is_none())
    }

    /// Runs `f` on the open engine under the shared lock, with the GIL held.
    pub(crate) fn with<T, X: Failure>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&E) -> Result<T, X>,
    ) -> PyResult<T> {
        let r = {
            let guard = self.read_attached(py)?;
            guard
                .as_ref()
                .ok_or(Fail::Closed)
                .and_then(|e| f(e).map_err(Fail::Call))
        };
        // The exception is made once the lock is let go of.
        r.map_err(|fail| fail.into_py(self))
    }

    /// `f` on the open engine under the shared lock, its failure kept as a
    /// value: a call made with the GIL released turns it into a Python
    /// exception only once the GIL is taken again ([`Fail::into_py`]).
    fn call<T, X>(&self, f: impl FnOnce(&E) -> Result<T, X>) -> Result<T, Fail<X>> {
        let guard = self.read().map_err(Fail::Raised)?;
        let engine = guard.as_ref().ok_or(Fail::Closed)?;
        f(engine).map_err(Fail::Call)
    }

    /// Reads something off the open engine (GIL held).
    pub(crate) fn get<T>(&self, py: Python<'_>, f: impl FnOnce(&E) -> T) -> PyResult<T> {
        let guard = self.read_attached(py)?;
        guard.as_ref().map(f).ok_or_else(|| self.closed_error())
    }

    /// Runs `f` on the open engine with the GIL released.
    pub(crate) fn detached<T: Send, X: Failure>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&E) -> Result<T, X> + Send,
    ) -> PyResult<T> {
        py.detach(|| self.call(f))
            .map_err(|fail| fail.into_py(self))
    }

    /// Runs `f` on the open engine for one key (str or bytes), with the GIL
    /// held.
    pub(crate) fn with_key<T, X: Failure>(
        &self,
        key: &Bound<'_, PyAny>,
        f: impl FnOnce(&E, &[u8]) -> Result<T, X>,
    ) -> PyResult<T> {
        let k = key_bytes(key)?;
        self.with(key.py(), |e| f(e, k.as_bytes()))
    }

    /// Runs `f` on the open engine for one key (str or bytes), with the GIL
    /// released (the key is read first, GIL held).
    pub(crate) fn detached_key<T: Send, X: Failure>(
        &self,
        py: Python<'_>,
        key: &Bound<'_, PyAny>,
        f: impl FnOnce(&E, &[u8]) -> Result<T, X> + Send,
    ) -> PyResult<T> {
        let k = key_bytes(key)?;
        let k = k.as_bytes();
        self.detached(py, |e| f(e, k))
    }

    /// Runs a batch call `f` over the keys of an iterable, GIL released:
    /// all of them in one call (a Redis batch resumes as one call).
    pub(crate) fn batch<X: Failure>(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        f: impl Fn(&E, &[&[u8]]) -> Result<Vec<bool>, X> + Sync,
    ) -> PyResult<Vec<bool>> {
        self.chunked(py, keys, usize::MAX, f, |_, e| e.into_py(self))
    }

    /// [`Slot::batch`] in calls of up to `chunk` keys. When a call after
    /// the first fails, or a key of a later chunk cannot be encoded,
    /// `stopped` makes the error from the answers so far and the failure
    /// (the answers of the failed call, if any, are in its error).
    pub(crate) fn chunked<X: Failure>(
        &self,
        py: Python<'_>,
        keys: &Bound<'_, PyAny>,
        chunk: usize,
        f: impl Fn(&E, &[&[u8]]) -> Result<Vec<bool>, X> + Sync,
        stopped: impl FnOnce(Vec<bool>, Fail<X>) -> PyErr,
    ) -> PyResult<Vec<bool>> {
        let mut out = Vec::new();
        let r = for_chunks(py, keys, chunk, |k| self.answers(&f, k, &mut out))?;
        let fail = match r {
            Ok(()) => return Ok(out),
            Err(Stop::Call(fail)) => fail,
            Err(Stop::Key(e)) => Fail::Raised(e),
            Err(Stop::Signal(e)) => {
                // Raised as it is (an `IncompleteError` would be caught by
                // `except Exception`, which Ctrl-C must pass); the answers
                // of the chunks done ride on it, as `answers`.
                let answers = PyList::new(py, &out)?;
                let _ = e.value(py).setattr("answers", answers);
                return Err(e);
            }
        };
        if out.is_empty() {
            Err(fail.into_py(self))
        } else {
            Err(stopped(out, fail))
        }
    }

    /// `f` on the open engine for one chunk of keys, its answers appended
    /// to `out` (run with the GIL released, see [`Slot::call`]).
    fn answers<X: Failure>(
        &self,
        f: impl Fn(&E, &[&[u8]]) -> Result<Vec<bool>, X>,
        keys: &[&[u8]],
        out: &mut Vec<bool>,
    ) -> Result<(), Fail<X>> {
        let answers = self.call(|e| f(e, keys))?;
        if out.is_empty() {
            *out = answers;
        } else {
            out.extend(answers);
        }
        Ok(())
    }

    /// Takes the engine out, once every call in flight has returned, and
    /// hands it to `finish` (GIL released). Closing a closed slot does
    /// nothing. In a child forked since the engine was opened, lets go of
    /// it instead (see [`Leave`]); when a thread of the parent was inside
    /// a call at the fork, only of what a shared reference can let go of
    /// ([`Leave::leave_shared`]: an `Engine`'s directory lock), the rest
    /// staying until the child exits. When a thread of the parent was
    /// waiting in `close` at the fork, nothing is let go of.
    pub(crate) fn close<X: Failure>(
        &self,
        py: Python<'_>,
        finish: impl FnOnce(E) -> Result<(), X> + Send,
    ) -> PyResult<()> {
        if self.forked() {
            if let Ok(mut guard) = self.inner.try_write() {
                if let Some(engine) = guard.take() {
                    engine.leave();
                }
            } else if let Ok(guard) = self.inner.try_read() {
                // Shared by a call that was in flight at the fork.
                if let Some(engine) = guard.as_ref() {
                    engine.leave_shared();
                }
            }
            return Ok(());
        }
        let r = py.detach(|| {
            let mut guard = self.inner.write().unwrap_or_else(|p| p.into_inner());
            guard.take().map(finish)
        });
        match r {
            None | Some(Ok(())) => Ok(()),
            Some(Err(e)) => Err(e.into_py(&self.place)),
        }
    }

    fn forked_error(&self) -> PyErr {
        let msg = format!(
            "{}: opened before this process was forked (process {} is a child): \
             open it again here; the parent still uses it",
            self.place.display(),
            std::process::id()
        );
        with_path(ForkedError::new_err(msg), &self.place)
    }

    fn closed_error(&self) -> PyErr {
        with_path(
            ClosedError::new_err(format!("{}: the engine is closed", self.place.display())),
            &self.place,
        )
    }
}
