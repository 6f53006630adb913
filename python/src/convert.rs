//! Python values to what the engine takes, and reports back to Python.

use std::path::PathBuf;
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

/// Keys per piece of a batch: a joined piece of URLs (about 70 KiB) is
/// copied out of Python while it is still in the processor's cache, and
/// Python's allocator reuses the same memory for the next piece. Joining a
/// whole batch of a million keys at once was measured slower than
/// encoding key by key (two cold 70 MB buffers, 80 ns a key); pieces of
/// 10,000 keys (about 700 KiB) took 10 ns a key against 35-50 for key by
/// key, and a piece of 1,024 is a tenth of that size.
const PIECE: usize = 1024;

/// What separates the keys of a joined piece.
const SEP: u8 = b'\n';

/// Keys per engine call of a long batch (see [`for_chunks`]): about 1 MiB
/// of URLs, which stays in the caches between its copy and the engine's
/// reads.
pub(crate) const CHUNK: usize = 16_384;

/// The largest scratch a thread keeps between calls; a batch of longer
/// keys gets a buffer of its own size and gives it back.
const KEEP: usize = 8 << 20;

/// The UTF-8 of a chunk of keys, copied out of Python: each key followed
/// by [`SEP`], `ends[i]` the offset just past key `i`.
#[derive(Default)]
struct Scratch {
    bytes: Vec<u8>,
    ends: Vec<usize>,
}

thread_local! {
    /// One scratch per thread, kept between calls. Keys' bytes allocated
    /// anew for every call (Python objects held until the engine had
    /// answered, before) took a page fault for every 4 KiB of them in
    /// calls of a million keys: glibc hands freed large blocks back to
    /// the kernel (24-52 ns a key of kernel time, docs/python.md).
    static SCRATCH: std::cell::RefCell<Scratch> = Default::default();
}

impl Scratch {
    /// Appends the keys of `list[start..end]`, a piece at a time: every
    /// Python object made for a piece is dropped before the next.
    fn push(
        &mut self,
        py: Python<'_>,
        list: &Bound<'_, PyList>,
        start: usize,
        end: usize,
    ) -> PyResult<()> {
        for from in (start..end).step_by(PIECE) {
            let piece = list.get_slice(from, (from + PIECE).min(end));
            if !self.push_joined(py, &piece) {
                for k in piece.iter() {
                    self.bytes.extend_from_slice(key_bytes(&k)?.as_bytes());
                    self.ends.push(self.bytes.len());
                    self.bytes.push(SEP);
                }
            }
        }
        Ok(())
    }

    /// A piece whose keys are all `str` (subclasses included: `join` and
    /// `encode` both read the characters themselves) and none holds
    /// [`SEP`]: CPython joins and encodes it in two calls, and the keys are
    /// found again at the separators, whose count tells whether some key
    /// held one (UTF-8 never has the byte inside another character). No
    /// call into Python per key. False (nothing appended: encode key by
    /// key) otherwise, and on any error (a `bytes` key, a lone surrogate),
    /// which the key-by-key path then reports for its key.
    fn push_joined(&mut self, py: Python<'_>, piece: &Bound<'_, PyList>) -> bool {
        let sep = PyString::new(py, "\n");
        let Some(bytes) = sep
            .call_method1("join", (piece,))
            .ok()
            .and_then(|j| j.cast_into::<PyString>().ok())
            .and_then(|j| j.encode_utf8().ok())
        else {
            return false;
        };
        let (base, keys) = (self.bytes.len(), self.ends.len());
        self.bytes.extend_from_slice(bytes.as_bytes());
        self.ends
            .extend(memchr::memchr_iter(SEP, &self.bytes[base..]).map(|p| base + p));
        if self.ends.len() - keys + 1 != piece.len() {
            // Some key holds the separator.
            self.bytes.truncate(base);
            self.ends.truncate(keys);
            return false;
        }
        self.ends.push(self.bytes.len());
        self.bytes.push(SEP);
        true
    }

    /// One slice per key, in order.
    fn slices(&self) -> Vec<&[u8]> {
        let mut start = 0;
        self.ends
            .iter()
            .map(|&end| {
                let key = &self.bytes[start..end];
                start = end + 1; // past the separator
                key
            })
            .collect()
    }

    fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
        if self.bytes.capacity() > KEEP {
            *self = Scratch::default();
        }
    }
}

/// The keys of an iterable (str or bytes each) as a list: the same list
/// when it is one, otherwise a new one. One str or bytes is refused (it
/// would read as a batch of characters).
fn key_list<'py>(py: Python<'py>, keys: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyList>> {
    if keys.is_instance_of::<PyString>() || keys.is_instance_of::<PyBytes>() {
        return Err(PyTypeError::new_err(
            "keys is an iterable of keys, not one str or bytes key",
        ));
    }
    match keys.cast_exact::<PyList>() {
        Ok(list) => Ok(list.clone()),
        Err(_) => Ok(py
            .get_type::<PyList>()
            .call1((keys,))?
            .cast_into::<PyList>()?),
    }
}

/// How a chunked batch stopped part way (see [`for_chunks`]).
pub(crate) enum Stop<X> {
    /// `f` failed: its error.
    Call(X),
    /// A key of a later chunk could not be encoded (a lone surrogate); the
    /// chunks before it were passed to `f`.
    Key(PyErr),
    /// A signal handler raised between two chunks (Ctrl-C's
    /// `KeyboardInterrupt`): its exception; the chunks before it were
    /// passed to `f`.
    Signal(PyErr),
}

/// Runs `f` over the keys of an iterable (str or bytes each), in chunks of
/// up to `chunk` keys in order, each chunk's keys copied out of Python
/// first (GIL held), `f` then called with the GIL released. Every key's
/// type is checked before the first call, so a key that is neither str
/// nor bytes stops the batch before `f` runs; a key that cannot be encoded
/// stops it at its chunk ([`Stop::Key`] after the first). Between chunks
/// pending signals are handled, so that Ctrl-C stops a long batch within
/// a chunk, not at its end ([`Stop::Signal`]). The keys are read from the
/// list chunk by chunk: a list changed by another thread during the call
/// is read as it is at each chunk.
pub(crate) fn for_chunks<X: Send>(
    py: Python<'_>,
    keys: &Bound<'_, PyAny>,
    chunk: usize,
    mut f: impl FnMut(&[&[u8]]) -> Result<(), X> + Send,
) -> PyResult<Result<(), Stop<X>>> {
    let list = key_list(py, keys)?;
    let n = list.len();
    if n > chunk {
        for k in list.iter() {
            if !(k.is_instance_of::<PyString>() || k.is_instance_of::<PyBytes>()) {
                key_bytes(&k)?; // the error naming the type
            }
        }
    }
    // The thread's scratch, or one of this call's own when a call of this
    // thread already holds it (a finalizer run during the copy that makes
    // another batch call).
    let mut own = None;
    SCRATCH.with(|cell| {
        let mut guard = cell.try_borrow_mut().ok();
        let scratch: &mut Scratch = match guard.as_deref_mut() {
            Some(s) => s,
            None => own.insert(Scratch::default()),
        };
        let mut each = || {
            for start in (0..n.max(1)).step_by(chunk) {
                let end = start.saturating_add(chunk).min(n);
                scratch.clear();
                if let Err(e) = scratch.push(py, &list, start, end) {
                    return if start == 0 {
                        Err(e)
                    } else {
                        Ok(Err(Stop::Key(e)))
                    };
                }
                let slices = scratch.slices();
                if let Err(e) = py.detach(|| f(&slices)) {
                    return Ok(Err(Stop::Call(e)));
                }
                if end < n {
                    if let Err(e) = py.check_signals() {
                        return Ok(Err(Stop::Signal(e)));
                    }
                }
            }
            Ok(Ok(()))
        };
        let r = each();
        // Done with it: a buffer grown past `KEEP` goes back now.
        scratch.clear();
        r
    })
}

/// A path argument (`str`, `bytes` or `os.PathLike`), as `os.fsencode`
/// gives it: a name the file system's encoding cannot hold (a lone
/// surrogate) raises its `UnicodeEncodeError`, where pyo3's own conversion
/// panicked.
pub(crate) fn path_of(obj: &Bound<'_, PyAny>) -> PyResult<PathBuf> {
    let encoded = obj.py().import("os")?.call_method1("fsencode", (obj,))?;
    let bytes = encoded.cast::<PyBytes>()?.as_bytes().to_vec();
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStringExt;
        Ok(PathBuf::from(std::ffi::OsString::from_vec(bytes)))
    }
    #[cfg(not(unix))]
    {
        let _ = bytes;
        obj.extract()
    }
}

/// Whether `e`, raised while reading a number as a float, says the
/// number is too large for one (an int, or a `Fraction` of ints, past
/// about 1.8e308): a number out of range, not a wrong type.
fn overflowed(py: Python<'_>, e: &PyErr) -> bool {
    e.is_instance_of::<pyo3::exceptions::PyOverflowError>(py)
}

/// Seconds from a `timedelta` or a number, as a `Duration`: another type
/// (a `bool` included) is a `TypeError`; a negative, NaN or infinite
/// number, or one of 2**64 seconds or more (a number too large for a
/// float, such as an int or a `Fraction` past 1.8e308, included), a
/// `ValueError`.
pub(crate) fn duration_of(obj: &Bound<'_, PyAny>) -> PyResult<Duration> {
    let secs: f64 = if obj.hasattr("total_seconds")? {
        obj.call_method0("total_seconds")?.extract()?
    } else if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err("a duration is a timedelta or seconds"));
    } else if obj.is_instance_of::<pyo3::types::PyInt>() {
        // Whole seconds as they are: through a float, the ints of the last
        // 1,024 below 2**64 would round up to it.
        if let Ok(n) = obj.extract::<u64>() {
            return Ok(Duration::from_secs(n));
        }
        // An int too large for a float is a number, not a wrong type.
        obj.extract()
            .map_err(|_| PyValueError::new_err(format!("not a valid duration: {obj} seconds")))?
    } else {
        obj.extract().map_err(|e| {
            if overflowed(obj.py(), &e) {
                PyValueError::new_err(format!("not a valid duration: {obj} seconds"))
            } else {
                PyTypeError::new_err("a duration is a timedelta or seconds")
            }
        })?
    };
    Duration::try_from_secs_f64(secs)
        .map_err(|_| PyValueError::new_err(format!("not a valid duration: {secs} seconds")))
}

/// An instant from an aware `datetime` or seconds since the Unix epoch.
pub(crate) fn instant_of(obj: &Bound<'_, PyAny>) -> PyResult<SystemTime> {
    let secs: f64 = if obj.hasattr("timestamp")? && obj.hasattr("tzinfo")? {
        // Naive as Python defines it: no tzinfo, or one that gives no
        // offset for this datetime (`timestamp()` would then fail with a
        // `TypeError` about subtracting naive and aware datetimes).
        let no_offset = || -> PyResult<bool> {
            Ok(obj.hasattr("utcoffset")? && obj.call_method0("utcoffset")?.is_none())
        };
        if obj.getattr("tzinfo")?.is_none() || no_offset()? {
            return Err(PyValueError::new_err(
                "a naive datetime is ambiguous: give it a tzinfo (datetime.timezone.utc)",
            ));
        }
        obj.call_method0("timestamp")?.extract()?
    } else if obj.is_instance_of::<pyo3::types::PyBool>() {
        return Err(PyTypeError::new_err(
            "an instant is an aware datetime or seconds since the Unix epoch",
        ));
    } else if obj.is_instance_of::<pyo3::types::PyInt>() {
        // An int too large for a float is a number, not a wrong type.
        obj.extract()
            .map_err(|_| PyValueError::new_err(format!("instant {obj} is out of range")))?
    } else {
        obj.extract().map_err(|e| {
            if overflowed(obj.py(), &e) {
                PyValueError::new_err(format!("instant {obj} is out of range"))
            } else {
                PyTypeError::new_err(
                    "an instant is an aware datetime or seconds since the Unix epoch",
                )
            }
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
