//! Python values to what the engine takes, and reports back to Python.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

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
/// (measured in docs/python.md).
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

/// Every key of an iterable (the objects, which own the bytes the engine
/// reads: see [`key_bytes`]).
pub(crate) fn keys_of<'py>(keys: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "keys is an iterable of keys, not one str or bytes key",
        ));
    }
    let mut out = Vec::with_capacity(keys.len().unwrap_or(0));
    for k in keys.try_iter()? {
        out.push(k?);
    }
    Ok(out)
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
