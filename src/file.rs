//! The few file-system operations with a durability meaning, in one place.

use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

use crate::error::{Error, Result};

/// Makes the directory entries in `dir` (creations, renames, deletions) durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync directory", dir, e))?;
    synced(dir);
    Ok(())
}

/// Makes a file's data durable (`fdatasync`).
pub(crate) fn sync_data(file: &File, path: &Path, op: &'static str) -> Result<()> {
    file.sync_data().map_err(|e| Error::io(op, path, e))?;
    synced(path);
    Ok(())
}

/// Makes a file's data and metadata durable (`fsync`).
pub(crate) fn sync_all(file: &File, path: &Path, op: &'static str) -> Result<()> {
    file.sync_all().map_err(|e| Error::io(op, path, e))?;
    synced(path);
    Ok(())
}

/// Writes a writable mapping's dirty pages back and waits (`msync`).
pub(crate) fn msync(map: &memmap2::MmapMut, path: &Path) -> Result<()> {
    map.flush()
        .map_err(|e| Error::io("msync segment", path, e))?;
    synced(path);
    Ok(())
}

/// Every durability point of the engine passes through `synced`: a
/// power-loss simulation (tests) installs a hook that records what each
/// sync made durable. One relaxed load when no hook is installed.
fn synced(path: &Path) {
    if testing::HOOKED.load(std::sync::atomic::Ordering::Relaxed) {
        testing::call(path);
    }
}

/// Test support: observe every sync the engine makes.
#[doc(hidden)]
pub mod testing {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::RwLock;

    /// What a hook receives: the file or directory just made durable.
    pub type SyncHook = Box<dyn Fn(&Path) + Send + Sync>;

    pub(super) static HOOKED: AtomicBool = AtomicBool::new(false);
    static HOOK: RwLock<Option<SyncHook>> = RwLock::new(None);

    /// Installs (or, with `None`, removes) the process-wide sync hook. It
    /// runs right after every successful fsync, fdatasync and msync, on the
    /// thread that made it.
    pub fn set_sync_hook(hook: Option<SyncHook>) {
        let on = hook.is_some();
        *HOOK.write().unwrap_or_else(|e| e.into_inner()) = hook;
        HOOKED.store(on, Ordering::SeqCst);
    }

    pub(super) fn call(path: &Path) {
        if let Some(h) = HOOK.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            h(path);
        }
    }
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
    sync_all(&f, &tmp, "fsync")?;
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
