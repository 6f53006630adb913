//! The few file-system operations with a durability meaning, in one place.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Makes the directory entries in `dir` (creations, renames, deletions) durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync directory", dir, e))
}

/// Replaces `path` with `bytes` atomically: write a temporary file, fsync it,
/// rename it over `path`, fsync the directory. A crash leaves either the old
/// or the new file, never a mix.
pub(crate) fn rewrite_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("tmp");
    let mut f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(&tmp)
        .map_err(|e| Error::io("create", &tmp, e))?;
    f.write_all(bytes)
        .map_err(|e| Error::io("write", &tmp, e))?;
    f.sync_all().map_err(|e| Error::io("fsync", &tmp, e))?;
    drop(f);
    fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))?;
    fsync_dir(dir)
}

/// Gives `file` `len` bytes of allocated blocks, so that writing through a
/// mapping of it cannot hit a full disk (which would be SIGBUS, not ENOSPC).
pub(crate) fn allocate(file: &File, path: &Path, len: u64) -> Result<()> {
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => Ok(()),
        // File systems without fallocate: extend the file and write its
        // blocks out, which allocates them just the same.
        Err(e) if e == rustix::io::Errno::OPNOTSUPP || e == rustix::io::Errno::NOSYS => {
            write_zeros(file, path, len)
        }
        Err(e) => Err(Error::io("allocate", path, e.into())),
    }
}

fn write_zeros(file: &File, path: &Path, len: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], off)
            .map_err(|e| Error::io("allocate", path, e))?;
        off += n as u64;
    }
    Ok(())
}
