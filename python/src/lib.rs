//! Python bindings of timebloom: the `timebloom._timebloom` extension module.
//!
//! One `Engine` class over `timebloom::Engine`, a `RedisEngine` class over
//! `timebloom::redis::RedisEngine`, a `ManualClock` for tests and replays,
//! and one exception class per kind of error. The Python package
//! `timebloom` (python/timebloom/__init__.py) re-exports them with type stubs.
//!
//! Files: `engine` (the `Engine` class), `redis` (`RedisEngine`), `slot` (the lock that lets `close`
//! take an engine away from threads calling it; calls with or without the
//! GIL; engines inherited through `fork`),
//! `clock` (`ManualClock`), `errors` (the exception classes and the mapping
//! of engine errors onto them), `convert` (keys, durations, instants and
//! reports between Python and the engine).

mod clock;
mod convert;
mod engine;
mod errors;
mod redis;
mod slot;

use pyo3::prelude::*;

use clock::PyManualClock;
use engine::PyEngine;
use errors::*;
use redis::PyRedisEngine;

/// The extension module behind the `timebloom` package.
#[pymodule]
fn _timebloom(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_class::<PyEngine>()?;
    m.add_class::<PyRedisEngine>()?;
    m.add_class::<PyManualClock>()?;
    m.add("TimebloomError", py.get_type::<TimebloomError>())?;
    m.add("InvalidConfigError", py.get_type::<InvalidConfigError>())?;
    m.add("LockedError", py.get_type::<LockedError>())?;
    m.add("AlreadyExistsError", py.get_type::<AlreadyExistsError>())?;
    m.add("NotFoundError", py.get_type::<NotFoundError>())?;
    m.add("CorruptError", py.get_type::<CorruptError>())?;
    m.add("QuarantinedError", py.get_type::<QuarantinedError>())?;
    m.add(
        "UnsupportedVersionError",
        py.get_type::<UnsupportedVersionError>(),
    )?;
    m.add(
        "WindowUnavailableError",
        py.get_type::<WindowUnavailableError>(),
    )?;
    m.add("HorizonTooLongError", py.get_type::<HorizonTooLongError>())?;
    m.add(
        "RemoveUnsupportedError",
        py.get_type::<RemoveUnsupportedError>(),
    )?;
    m.add("IoError", py.get_type::<IoError>())?;
    m.add("ReadOnlyError", py.get_type::<ReadOnlyError>())?;
    m.add("ClockJumpError", py.get_type::<ClockJumpError>())?;
    m.add("IncompleteError", py.get_type::<IncompleteError>())?;
    m.add("NotEmptyError", py.get_type::<NotEmptyError>())?;
    m.add("ClosedError", py.get_type::<ClosedError>())?;
    m.add("ForkedError", py.get_type::<ForkedError>())?;
    m.add("RedisError", py.get_type::<RedisError>())?;
    m.add("NotReplicatedError", py.get_type::<NotReplicatedError>())?;
    m.add("ConfigMismatchError", py.get_type::<ConfigMismatchError>())?;
    m.add("UnsupportedError", py.get_type::<UnsupportedError>())?;
    // Engines opened before a fork refuse calls in the child (see `slot`).
    let after_fork = wrap_pyfunction!(slot::after_fork_in_child, m)?;
    let kwargs = pyo3::types::PyDict::new(py);
    kwargs.set_item("after_in_child", after_fork)?;
    py.import("os")?
        .getattr("register_at_fork")?
        .call((), Some(&kwargs))?;
    Ok(())
}
