//! Python values to what the engine takes, and reports back to Python.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};

use crate::errors::TimebloomError;

/// Plain data as Python dicts, lists and scalars (through JSON).
pub(crate) fn to_dict<'py>(
    py: Python<'py>,
    value: &impl serde::Serialize,
) -> PyResult<Bound<'py, PyAny>> {
    let json = serde_json::to_string(value)
        .map_err(|e| TimebloomError::new_err(format!("encoding a report: {e}")))?;
    py.import("json")?.call_method1("loads", (json,))
}

/// The configuration `create` makes from its arguments (`tiers` as
/// `"7d,4w,12m"`); the rest are the library's defaults.
pub(crate) fn config_of(
    tiers: &str,
    items_per_day: u64,
    fpr: f64,
    utc_offset_secs: i32,
) -> timebloom::Result<timebloom::Config> {
    Ok(timebloom::Config {
        tiers: timebloom::parse_tiers(tiers)?,
        expected_items_per_day: items_per_day,
        fpr,
        utc_offset_secs,
        ..timebloom::Config::default()
    })
}

/// A configuration's tiers as `create` takes them (`"7d,4w,12m"`).
pub(crate) fn tiers_text(config: &timebloom::Config) -> String {
    let tiers: Vec<String> = config.tiers.iter().map(|t| t.to_string()).collect();
    tiers.join(",")
}

/// A key as the engine reads it: a `bytes` object (the same object), or the
/// UTF-8 of a `str` encoded into a new `bytes` object. CPython 3.9's stable
/// interface has no way to lend a `str`'s UTF-8, so the wheel (abi3,
/// CPython >= 3.9) encodes it; an abi3-py310 build would borrow it
/// (measured in docs/python.md). Batches join their `str` keys instead
/// ([`BatchKeys`]).
pub(crate) fn key_bytes<'py>(obj: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(b) = obj.cast::<PyBytes>() {
        Ok(b.clone())
    } else if let Ok(s) = obj.cast::<PyString>() {
        s.encode_utf8()
    } else {
        Err(PyTypeError::new_err(format!(
            "a key is str or bytes, not {}",
            obj.get_type().name()?
        )))
    }
}

/// The bytes of a batch's keys, owned by Python objects for as long as the
/// engine reads them: pieces of up to [`PIECE`] keys each.
pub(crate) struct BatchKeys<'py>(Vec<Piece<'py>>);

/// Keys per piece of a batch: a joined piece of URLs (about 70 KiB) stays
/// in the processor's cache between its encoding and the engine's reads.
/// Joining a whole batch of a million keys at once was measured slower than
/// encoding key by key (two cold 70 MB buffers, 80 ns a key); pieces of
/// 10,000 keys took 10 ns a key against 35-50 for key by key.
const PIECE: usize = 1024;

/// What separates the keys of a joined piece.
const SEP: u8 = b'\n';

/// Up to [`PIECE`] keys of a batch.
enum Piece<'py> {
    /// Every key a `str` (most URLs): their UTF-8, joined by [`SEP`] and
    /// encoded once, and where each key ends in it (the last at the end).
    Joined(Bound<'py, PyBytes>, Vec<usize>),
    /// One `bytes` object per key (see [`key_bytes`]).
    Each(Vec<Bound<'py, PyBytes>>),
}

impl<'py> BatchKeys<'py> {
    /// The bytes of the keys of an iterable (str or bytes each).
    pub(crate) fn of(py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Self> {
        if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
            return Err(PyTypeError::new_err(
                "keys is an iterable of keys, not one str or bytes key",
            ));
        }
        let list = match keys.cast_exact::<PyList>() {
            Ok(list) => list.clone(),
            Err(_) => py
                .get_type::<PyList>()
                .call1((keys,))?
                .cast_into::<PyList>()?,
        };
        let n = list.len();
        let mut pieces = Vec::with_capacity(n.div_ceil(PIECE));
        for start in (0..n).step_by(PIECE) {
            let piece = list.get_slice(start, (start + PIECE).min(n));
            pieces.push(match joined(py, &piece) {
                Some(joined) => joined,
                None => Piece::Each(
                    piece
                        .iter()
                        .map(|k| key_bytes(&k))
                        .collect::<PyResult<_>>()?,
                ),
            });
        }
        Ok(BatchKeys(pieces))
    }

    /// One slice per key, in order.
    pub(crate) fn slices(&self) -> Vec<&[u8]> {
        let mut out = Vec::with_capacity(self.0.len() * PIECE);
        for piece in &self.0 {
            match piece {
                Piece::Joined(bytes, ends) => {
                    let all = bytes.as_bytes();
                    let mut start = 0;
                    for &end in ends {
                        out.push(&all[start..end]);
                        start = end + 1; // past the separator
                    }
                }
                Piece::Each(each) => out.extend(each.iter().map(|k| k.as_bytes())),
            }
        }
        out
    }
}

/// [`Piece::Joined`] for a piece whose keys are all `str` (subclasses
/// included: `join` and `encode` both read the characters themselves) and
/// none holds [`SEP`]: CPython joins and encodes the piece in two calls,
/// and the keys are found again at the separators, whose count tells
/// whether some key held one (UTF-8 never has the byte inside another
/// character). No call into Python per key. `None` (encode key by key)
/// otherwise, and on any error (a `bytes` key, a lone surrogate), which
/// the key-by-key path then reports for its key.
fn joined<'py>(py: Python<'py>, piece: &Bound<'py, PyList>) -> Option<Piece<'py>> {
    let sep = PyString::new(py, "\n");
    let joined = sep.call_method1("join", (piece,)).ok()?;
    let bytes = joined.cast_into::<PyString>().ok()?.encode_utf8().ok()?;
    let all = bytes.as_bytes();
    let mut ends = Vec::with_capacity(piece.len());
    ends.extend(memchr::memchr_iter(SEP, all));
    if ends.len() + 1 != piece.len() {
        return None; // some key holds the separator
    }
    ends.push(all.len());
    Some(Piece::Joined(bytes, ends))
}

/// Seconds from a `timedelta` or a number, as a `Duration`.
pub(crate) fn duration_of(obj: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let secs: f64 = if obj.hasattr("total_seconds")? {
        obj.call_method0("total_seconds")?.extract()?
    } else if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err("a duration is a timedelta or seconds"));
    } else {
        obj.extract()
            .map_err(|_| PyTypeError::new_err("a duration is a timedelta or seconds"))?
    };
    Duration::try_from_secs_f64(secs)
        .map_err(|_| PyValueError::new_err(format!("not a valid duration: {secs} seconds")))
}

/// An instant from an aware `datetime` or seconds since the Unix epoch.
pub(crate) fn instant_of(obj: &Bound<'_, PyAny>) -> PyResult<SystemTime> {
    let secs: f64 = if obj.hasattr("timestamp")? && obj.hasattr("tzinfo")? {
        if obj.getattr("tzinfo")?.is_none() {
            return Err(PyValueError::new_err(
                "a naive datetime is ambiguous: give it a tzinfo (datetime.timezone.utc)",
            ));
        }
        obj.call_method0("timestamp")?.extract()?
    } else if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(
            "an instant is an aware datetime or seconds since the Unix epoch",
        ));
    } else {
        obj.extract().map_err(|_| {
            PyTypeError::new_err("an instant is an aware datetime or seconds since the Unix epoch")
        })?
    };
    if !secs.is_finite() || secs < 0.0 {
        return Err(PyValueError::new_err(format!(
            "instant {secs} is not a time after 1970"
        )));
    }
    Duration::try_from_secs_f64(secs)
        .ok()
        .and_then(|d| UNIX_EPOCH.checked_add(d))
        .ok_or_else(|| PyValueError::new_err(format!("instant {secs} is out of range")))
}
