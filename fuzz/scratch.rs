//! Scratch directories for the fuzz targets (included by each with `#[path]`).

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tempfile::TempDir;

/// A fresh directory, on tmpfs when there is one (`/dev/shm`): the engine
/// fsyncs at every rotation and close, which on a disk costs more than
/// everything else an input does. `TIMEBLOOM_FUZZ_TMPDIR` overrides it.
pub fn scratch() -> TempDir {
    static BASE: OnceLock<Option<PathBuf>> = OnceLock::new();
    let base = BASE.get_or_init(|| {
        let shm = Path::new("/dev/shm");
        std::env::var_os("TIMEBLOOM_FUZZ_TMPDIR")
            .map(PathBuf::from)
            .or_else(|| shm.is_dir().then(|| shm.to_path_buf()))
    });
    match base {
        Some(b) => tempfile::Builder::new()
            .prefix("timebloom-fuzz-")
            .tempdir_in(b)
            .or_else(|_| tempfile::tempdir()),
        None => tempfile::tempdir(),
    }
    .expect("tempdir")
}
