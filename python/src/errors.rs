//! The exception classes, and the mapping of engine errors onto them.

use std::path::Path;

use pyo3::create_exception;
use pyo3::exceptions::PyException;
use pyo3::prelude::*;

use timebloom::Error;

use crate::slot::{Fail, Failure, Slot};

create_exception!(
    timebloom,
    TimebloomError,
    PyException,
    "Base class of every error timebloom raises; `path` names the engine directory or file."
);
create_exception!(
    timebloom,
    InvalidConfigError,
    TimebloomError,
    "The configuration given to `Engine.create` or `RedisEngine.create` (or the `sync` policy given to `Engine.open`, or the prefix given to `RedisEngine`) is not valid; nothing was written."
);
create_exception!(
    timebloom,
    LockedError,
    TimebloomError,
    "Another process (or another open `Engine`) holds the directory: one writer at a time. Close that writer first, or read beside it with `Engine.open(path, read_only=True)`."
);
create_exception!(
    timebloom,
    AlreadyExistsError,
    TimebloomError,
    "`Engine.create` found an engine in the directory already (`RedisEngine.create`: under the prefix, without `exist_ok=True`)."
);
create_exception!(
    timebloom,
    NotFoundError,
    TimebloomError,
    "`Engine.open` found no engine (no MANIFEST) in the directory (`RedisEngine.open`: no config hash under the prefix)."
);
create_exception!(
    timebloom,
    CorruptError,
    TimebloomError,
    "A file's bytes are wrong: bad magic, checksum, length or field. The message names the file."
);
create_exception!(
    timebloom,
    QuarantinedError,
    CorruptError,
    "A segment file failed its checks at open and was moved to the engine's `quarantine/`; `path` is where it is now, `window` the window it held. Restore it from a backup, or open with `degraded=True` to go on without that window."
);
create_exception!(
    timebloom,
    UnsupportedVersionError,
    TimebloomError,
    "A file was written by a format version this build does not read."
);
create_exception!(
    timebloom,
    WindowUnavailableError,
    TimebloomError,
    "`insert_at` or `remove_at` named an instant whose window has expired in every tier, or that lies past a tier's newest window (a later instant of the current window, later today for a daily tier, is taken); or the clock (a `ManualClock` set so) reads before 1970 or after 9999, which every call refuses; or `contains_within` or `insert_within` (or their batches) asked a horizon while the clock is behind every window the tiers keep (stepped back further than they keep, after a rotation at a later time): no horizon is answered until the clock catches up."
);
create_exception!(
    timebloom,
    HorizonTooLongError,
    TimebloomError,
    "`contains_within` or `insert_within` (or their batches) asked for a horizon longer than any tier keeps."
);
create_exception!(
    timebloom,
    RemoveUnsupportedError,
    TimebloomError,
    "`remove` or `remove_at` on an engine with a plain Bloom tier: only counting (`7d:counting`) and fingerprint tiers remove keys."
);
create_exception!(
    timebloom,
    IoError,
    TimebloomError,
    "An operating-system I/O call failed, or an earlier one left the engine unusable (reopen it)."
);
create_exception!(
    timebloom,
    ReadOnlyError,
    TimebloomError,
    "A write, or `maintain`, on an engine opened with `read_only=True`."
);
create_exception!(
    timebloom,
    ClockJumpError,
    TimebloomError,
    "The clock jumped so far forward that every window holding keys would expire at once; nothing changed. Call `maintain(now)` to move there on purpose."
);
create_exception!(
    timebloom,
    IncompleteError,
    TimebloomError,
    "`insert_many` (or `insert_within_many`) stopped part way: `answers` holds the answers of the keys recorded before the error (the first `len(answers)` keys); the rest were not recorded. When the batch's closing sync failed (under `sync=\"always\"`), `answers` covers every key of the batch (or of its chunks up to the failed one): recorded, not known to be durable. `__cause__` is the error that stopped it: the engine's, or, in a batch of more than 16,384 keys (handed to the engine a chunk at a time), a key of a later chunk that could not be encoded. Also raised by a single-key write (`insert`, `insert_within`, `insert_at`, `remove`, `remove_at`) whose sync failed under `sync=\"always\"`, with its one answer in `answers`: done, not known to be durable."
);
create_exception!(
    timebloom,
    NotEmptyError,
    TimebloomError,
    "`Engine.create` refused a directory that holds files it did not make."
);
create_exception!(
    timebloom,
    RedisError,
    TimebloomError,
    "Redis, or the connection to it, failed after every retry, or answered something unexpected; the message names the command, the Redis key and, for a failure of Redis or the connection, the server (`host:port`). After a failed `insert_many`, send the same keys again (same order, no other insert in between): the call resumes and reports each key new exactly once. Also raised by every call once Redis lost the engine's keys (a restart without persistence, `FLUSHDB`, a failover to an empty replica; the message names the config hash, or on a Cluster the directory of a shard whose master came back empty): sending again fails the same way; stop every client, then delete the engine's keys (docs/distributed.md, \"Key layout\": not `prefix:*`) or use another prefix."
);
create_exception!(
    timebloom,
    NotReplicatedError,
    RedisError,
    "An insert batch was applied, or an engine created, but fewer replicas than `wait_replicas` confirmed it in time: `answers` holds the answers of the first `len(answers)` keys (valid: they are recorded on the master; all of them unless the batch went out in several rounds, and sending it again sends the rest; none after a create, whose engine exists on the master and opens), `acked` and `wanted` the replica counts. A failover may lose these writes."
);
create_exception!(
    timebloom,
    ConfigMismatchError,
    TimebloomError,
    "`RedisEngine.create(..., exist_ok=True)` found an engine created with another configuration (tiers, sizing, shards) under the prefix; nothing was written."
);
create_exception!(
    timebloom,
    UnsupportedError,
    TimebloomError,
    "The Redis engine does not do this: counting or fingerprint tiers, a false-positive rate below the lowest its layout plans (about 3.5e-18 per sub-filter), a window string over Redis's 512 MiB, or a key layout this build does not read."
);
create_exception!(
    timebloom,
    ClosedError,
    TimebloomError,
    "The engine was closed; open it again."
);
create_exception!(
    timebloom,
    ForkedError,
    ClosedError,
    "The engine was opened in the parent of this process, before a `fork` (`multiprocessing`'s default on Linux): the child cannot use it, as the parent still writes it. Open it again in the child (an engine directory takes one writing process at a time: close it in the parent first, or open it read-only)."
);

/// The Python exception for an engine error, its message naming `path`.
pub(crate) fn to_py(err: Error, path: &Path) -> PyErr {
    let shown = path.display().to_string();
    let text = err.to_string();
    let msg = if text.contains(&shown) {
        text
    } else {
        format!("{shown}: {text}")
    };
    let e = match err {
        Error::InvalidConfig { .. } => InvalidConfigError::new_err(msg),
        Error::Locked { .. } => LockedError::new_err(msg),
        Error::AlreadyExists { .. } => AlreadyExistsError::new_err(msg),
        Error::NotFound { .. } => NotFoundError::new_err(msg),
        Error::Corrupt { .. } => CorruptError::new_err(msg),
        Error::UnsupportedVersion { .. } => UnsupportedVersionError::new_err(msg),
        Error::WindowUnavailable { .. } => WindowUnavailableError::new_err(msg),
        Error::HorizonTooLong { .. } => HorizonTooLongError::new_err(msg),
        Error::RemoveUnsupported { .. } => RemoveUnsupportedError::new_err(msg),
        Error::Io { .. } | Error::PreviousIo => IoError::new_err(msg),
        Error::ReadOnly { .. } => ReadOnlyError::new_err(msg),
        Error::ClockJump { .. } => ClockJumpError::new_err(msg),
        Error::NotEmpty { .. } => NotEmptyError::new_err(msg),
        Error::Quarantined {
            path: file, window, ..
        } => {
            let e = with_path(QuarantinedError::new_err(msg), &file);
            Python::attach(|py| {
                // As for `path`: setting an attribute on a fresh exception
                // does not fail, and the message names the window too.
                let _ = e.value(py).setattr("window", window);
            });
            return e;
        }
        Error::Incomplete { answers, cause } => {
            return incomplete(msg, answers, to_py(*cause, path), path);
        }
        _ => TimebloomError::new_err(msg),
    };
    with_path(e, path)
}

/// An `IncompleteError` with `msg`, the answers of the recorded keys and
/// the exception that stopped the batch as its `__cause__`.
pub(crate) fn incomplete(msg: String, answers: Vec<bool>, cause: PyErr, path: &Path) -> PyErr {
    let e = with_path(IncompleteError::new_err(msg), path);
    Python::attach(|py| {
        let v = e.value(py);
        // As for `path`: setting attributes on a fresh exception does not
        // fail, and the message says how many were recorded.
        let _ = v.setattr("answers", answers);
        v.setattr("__cause__", cause.value(py)).ok();
    });
    e
}

/// The error of a batch stopped by `fail` after the keys of `answers` were
/// recorded (in calls before the failed one): an `IncompleteError` whose
/// answers are those and the failed call's own.
pub(crate) fn stopped_after(
    answers: Vec<bool>,
    fail: Fail<Error>,
    slot: &Slot<timebloom::Engine>,
) -> PyErr {
    match fail {
        Fail::Call(Error::Incomplete {
            answers: more,
            cause,
        }) => {
            let mut all = answers;
            all.extend(more);
            to_py(
                Error::Incomplete {
                    answers: all,
                    cause,
                },
                slot.place(),
            )
        }
        Fail::Call(e) => to_py(
            Error::Incomplete {
                answers,
                cause: Box::new(e),
            },
            slot.place(),
        ),
        fail => {
            let cause = fail.into_py(slot);
            let msg = Python::attach(|py| {
                format!(
                    "{}: stopped after recording {} keys: {}",
                    slot.place().display(),
                    answers.len(),
                    cause.value(py)
                )
            });
            incomplete(msg, answers, cause, slot.place())
        }
    }
}

impl Failure for Error {
    fn into_py(self, place: &Path) -> PyErr {
        to_py(self, place)
    }
}

impl Failure for timebloom::redis::RedisError {
    /// The exception for an error of the Redis engine; `place` is the URL
    /// (password masked) and the prefix.
    fn into_py(self, place: &Path) -> PyErr {
        use timebloom::redis::RedisError as E;
        let msg = format!("{}: {self}", place.display());
        let e = match self {
            E::Engine(e) => return to_py(e, place),
            E::NotFound { .. } => NotFoundError::new_err(msg),
            E::AlreadyExists { .. } => AlreadyExistsError::new_err(msg),
            E::ConfigMismatch { .. } => ConfigMismatchError::new_err(msg),
            E::Unsupported { .. } => UnsupportedError::new_err(msg),
            E::NotReplicated {
                acked,
                wanted,
                answers,
                ..
            } => {
                let e = NotReplicatedError::new_err(msg);
                Python::attach(|py| {
                    let v = e.value(py);
                    // As for `path`: setting attributes on a fresh
                    // exception does not fail.
                    let _ = v.setattr("answers", answers);
                    let _ = v.setattr("acked", acked);
                    let _ = v.setattr("wanted", wanted);
                });
                e
            }
            _ => RedisError::new_err(msg),
        };
        with_path(e, place)
    }
}

/// Sets the exception's `path` attribute (the message names it too), as
/// `os.fsdecode` names it: a name that is not UTF-8 keeps its bytes.
pub(crate) fn with_path(e: PyErr, path: &Path) -> PyErr {
    Python::attach(|py| {
        // Setting an attribute on a fresh exception object does not fail;
        // if it did, the message still names the path.
        let _ = e.value(py).setattr("path", path.as_os_str());
    });
    e
}
