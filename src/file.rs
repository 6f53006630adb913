//! The few file-system operations with a durability meaning, in one place.

use std::fs::{self, File, OpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::Path;

use crate::error::{Error, Result};

/// The I/O seam: every file operation with a durability meaning calls
/// this first. A fault-injection test's hook may make it fail (one relaxed
/// load when no hook is installed).
#[inline]
pub(crate) fn check(op: &'static str, path: &Path) -> Result<()> {
    if testing::FAULTS.load(std::sync::atomic::Ordering::Relaxed) {
        if let Some(e) = testing::fault(op, path) {
            return Err(Error::io(op, path, e));
        }
    }
    Ok(())
}

/// [`check`] for a write of `len` bytes: a fault of kind `WriteZero`
/// stands for a short write, and the caller writes this many bytes before
/// failing; other faults write nothing. `Ok(None)`: write it all.
pub(crate) fn check_write(
    op: &'static str,
    path: &Path,
    len: usize,
) -> Result<Option<(usize, Error)>> {
    match check(op, path) {
        Ok(()) => Ok(None),
        Err(Error::Io { source, op, path }) if source.kind() == std::io::ErrorKind::WriteZero => {
            Ok(Some((len / 2, Error::Io { op, path, source })))
        }
        Err(e) => Err(e),
    }
}

/// Makes the directory entries in `dir` (creations, renames, deletions) durable.
pub(crate) fn fsync_dir(dir: &Path) -> Result<()> {
    check("fsync directory", dir)?;
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| Error::io("fsync directory", dir, e))?;
    synced(dir);
    Ok(())
}

/// Makes the directory `dir` inside `parent` when it is missing, and then
/// syncs `parent`, so that a file made in `dir` and counted durable is not
/// lost with the new directory's entry.
pub(crate) fn create_dir_in(parent: &Path, dir: &Path) -> Result<()> {
    let made = !dir.is_dir();
    std::fs::create_dir_all(dir).map_err(|e| Error::io("create directory", dir, e))?;
    if made {
        fsync_dir(parent)?;
    }
    Ok(())
}

/// Makes a file's data durable (`fdatasync`).
pub(crate) fn sync_data(file: &File, path: &Path, op: &'static str) -> Result<()> {
    check(op, path)?;
    file.sync_data().map_err(|e| Error::io(op, path, e))?;
    synced(path);
    Ok(())
}

/// Makes a file's data and metadata durable (`fsync`).
pub(crate) fn sync_all(file: &File, path: &Path, op: &'static str) -> Result<()> {
    check(op, path)?;
    file.sync_all().map_err(|e| Error::io(op, path, e))?;
    synced(path);
    Ok(())
}

/// Writes a writable mapping's dirty pages back and waits (`msync`), when
/// no other thread of the engine writes or reads it (a close).
pub(crate) fn msync(map: &memmap2::MmapMut, path: &Path) -> Result<()> {
    msync_range(map, path, 0, map.len())
}

/// [`msync`] while the engine's other threads run (a checkpoint, a seal,
/// `flush`): a piece of [`PMD`] at a time, each piece's page-table
/// entries dropped just before it is written ([`drop_mapped`]).
///
/// Why: writeback write-protects every dirty page it writes, so that the
/// next write marks it dirty again. A page still mapped by this process
/// then costs a TLB shootdown: an interrupt to every CPU running one of
/// its threads, one page at a time. While a writer runs on the other core
/// of a virtual machine that took 18 us a page against 1.8 us with no
/// other thread (a 118 MB file, measured), and the checkpoint of the
/// default tiers' open windows at 10^6 keys a day (28,700 pages) spent about half
/// of a core sending those interrupts while the writers lost theirs to
/// taking them (docs/benchmarks.md, "Checkpoints without shootdowns").
/// A dropped entry needs no shootdown of its own (the kernel flushes once
/// per page table, 2 MiB), and the next access maps the page again with
/// one fault, as the write-protect fault it replaces. Pieces, so that the
/// writers map few of a piece's pages again before its writeback starts.
///
/// The cost: each piece's msync is a sync of its range, with a flush of
/// the disk's cache. Where nothing else runs, that made a flush of the
/// default tiers' windows at 10^7 keys a day (1.1 GB) 480-562 -> 583-759
/// ms, and is why a close uses [`msync`].
pub(crate) fn msync_beside_writers(map: &memmap2::MmapMut, path: &Path) -> Result<()> {
    if !drop_is_safe() {
        return msync(map, path);
    }
    check("msync segment", path)?;
    let mut at = 0;
    while at < map.len() {
        let n = PMD.min(map.len() - at);
        drop_mapped(map, at, n);
        map.flush_range(at, n)
            .map_err(|e| Error::io("msync segment", path, e))?;
        at += n;
    }
    synced(path);
    Ok(())
}

/// Writes back `len` bytes of a writable mapping from `at` and waits. On
/// Linux, `msync(MS_SYNC)` of a range is `fsync` of that range of the file
/// (`vfs_fsync_range`): it also writes what `pwrite` put there. A segment's
/// header is written with `pwrite` and synced this way, so that a
/// checkpoint running beside writers does not write back (and
/// write-protect) the body's pages the writers dirtied since its msync, as
/// an `fdatasync` of the whole file would. (The power-loss tests' hook
/// records a file's whole contents at each of its syncs, this one
/// included: exact when no writer runs, generous by the writes made
/// since the body's msync when writers do, which the log replays.)
pub(crate) fn msync_range(
    map: &memmap2::MmapMut,
    path: &Path,
    at: usize,
    len: usize,
) -> Result<()> {
    check("msync segment", path)?;
    map.flush_range(at, len)
        .map_err(|e| Error::io("msync segment", path, e))?;
    synced(path);
    Ok(())
}

/// Replaces the file at `path` with a copy of `bytes` (its whole contents,
/// read from its mapping) written 2 MiB at a time at 2 MiB offsets, which
/// puts the copy in the page cache in large folios (2 MiB on ext4 and XFS
/// of recent Linux); a new mapping of the file then maps them with one
/// page-table entry each, and a lookup in a large sealed window takes a
/// short page walk, or none, instead of a cold one for each 4 KiB page
/// (docs/design.md, "Sealed windows in large pages").
///
/// The pieces are paced ([`COPY_PAUSE`] after each): on a machine whose
/// cores the engine's readers and writers keep busy, a copy at full speed
/// took their time in long slices (a reader beside a writer at 10^7 keys a
/// day crossing a month boundary: 320-345 lookups over 1 ms in 8 s against
/// 21 without the copy). Paced, a piece takes about half a millisecond of
/// a core and the copy of a 1.1 GB window a few seconds.
///
/// The copy is synced before it is renamed over `path`, and the directory
/// right after: a crash or power loss at any point leaves `path` naming
/// the old file or the whole copy, whose bytes are the same, and once the
/// old file can be freed (its last mapping gone) no durable directory
/// entry names it. A leftover copy (`.large`) is deleted at the next open
/// like any file no manifest names.
///
/// `Ok(true)`: replaced; the caller must stop writing through its old
/// handle and mapping, which now belong to an unlinked file. `Ok(false)`:
/// the copy failed (a full disk, say) and is deleted, `path` untouched;
/// the copy is only for speed, so that is no error. `Err`: replaced, but
/// the directory's sync failed (the caller latches, as for any failed
/// sync).
pub(crate) fn rewrite_in_large_pages(bytes: &[u8], path: &Path) -> Result<bool> {
    let copy = path.with_extension("large");
    let copied = (|| {
        check("copy segment", &copy)?;
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&copy)
            .map_err(|e| Error::io("copy segment", &copy, e))?;
        for (i, piece) in bytes.chunks(PMD).enumerate() {
            std::os::unix::fs::FileExt::write_all_at(&file, piece, (i * PMD) as u64)
                .map_err(|e| Error::io("copy segment", &copy, e))?;
            std::thread::sleep(COPY_PAUSE);
        }
        sync_data(&file, &copy, "fsync segment copy")?;
        check("rename segment copy", path)?;
        fs::rename(&copy, path).map_err(|e| Error::io("rename segment copy", path, e))
    })();
    if copied.is_err() {
        let _ = fs::remove_file(&copy);
        return Ok(false);
    }
    fsync_dir(path.parent().unwrap_or(Path::new("."))).map(|()| true)
}

/// The pause after each piece of [`rewrite_in_large_pages`]' copy.
const COPY_PAUSE: std::time::Duration = std::time::Duration::from_millis(2);

/// 2 MiB: what one page-table page maps, and one large folio. The piece
/// [`msync_beside_writers`] writes back at a time, and the piece
/// [`rewrite_in_large_pages`] copies at a time.
const PMD: usize = 2 << 20;

/// Drops the page-table entries of `len` bytes of `map` from `at`
/// (`MADV_DONTNEED`); only a hint, so a refusal is ignored.
fn drop_mapped(map: &memmap2::MmapMut, at: usize, len: usize) {
    // SAFETY: `map` is a shared mapping of a file (`MmapMut` of
    // `MmapOptions::map_mut`, `MAP_SHARED`). For those, MADV_DONTNEED only
    // unmaps: the pages stay in the page cache with their contents (dirty
    // ones marked dirty), and the next access maps them again. So no byte
    // of the mapping changes and every reference into it stays valid
    // (memmap2 marks the advice unchecked because on a private mapping it
    // would discard the contents).
    let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, at, len) };
}

/// Whether [`drop_mapped`] may run beside writers: Linux 6.2 or later.
/// Dropping a dirty page's entry while another thread writes through it
/// is safe once the kernel keeps the page's reverse mapping until the TLB
/// flush (a change of late 2022): before that, a writeback running at the
/// same instant could miss a write made through a stale TLB entry and
/// leave the page marked clean. Older kernels (and other systems) keep
/// the plain msync.
fn drop_is_safe() -> bool {
    static SAFE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *SAFE.get_or_init(|| {
        cfg!(target_os = "linux")
            && release_at_least(&rustix::system::uname().release().to_string_lossy(), (6, 2))
    })
}

/// Whether a kernel release string (`6.18.0-12-generic`) is at least
/// `(major, minor)`; false when it does not parse.
fn release_at_least(release: &str, want: (u32, u32)) -> bool {
    let mut parts = release
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse::<u32>().ok());
    match (parts.next().flatten(), parts.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= want,
        _ => false,
    }
}

/// Every durability point of the engine passes through `synced`: a
/// power-loss simulation (tests) installs a hook that records what each
/// sync made durable. One relaxed load when no hook is installed.
fn synced(path: &Path) {
    if testing::HOOKED.load(std::sync::atomic::Ordering::Relaxed) {
        testing::call(path);
    }
}

/// A point where a test may hold the calling thread (`testing::set_pause_hook`):
/// the engine's races made deterministic. One relaxed load when no hook is
/// installed.
#[inline]
pub(crate) fn pause(point: &'static str, path: &Path) {
    if testing::PAUSES.load(std::sync::atomic::Ordering::Relaxed) {
        testing::paused(point, path);
    }
}

/// Test support: observe every sync the engine makes, fail file
/// operations, hold threads at pause points.
#[doc(hidden)]
pub mod testing {
    use std::path::Path;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::RwLock;

    /// What a hook receives: the file or directory just made durable.
    pub type SyncHook = Box<dyn Fn(&Path) + Send + Sync>;
    /// A fault hook: given the operation and its path before it runs, an
    /// error makes it fail (kind `WriteZero`: a short write).
    pub type FaultHook = Box<dyn Fn(&'static str, &Path) -> Option<std::io::Error> + Send + Sync>;

    pub(super) static HOOKED: AtomicBool = AtomicBool::new(false);
    static HOOK: RwLock<Option<SyncHook>> = RwLock::new(None);
    pub(super) static FAULTS: AtomicBool = AtomicBool::new(false);
    static FAULT: RwLock<Option<FaultHook>> = RwLock::new(None);

    /// Installs (or, with `None`, removes) the process-wide fault hook,
    /// consulted before every file operation with a durability meaning
    /// (create, allocate, write, rename, delete, mmap, msync, fsync).
    pub fn set_fault_hook(hook: Option<FaultHook>) {
        let on = hook.is_some();
        *FAULT.write().unwrap_or_else(|e| e.into_inner()) = hook;
        FAULTS.store(on, Ordering::SeqCst);
    }

    pub(super) fn fault(op: &'static str, path: &Path) -> Option<std::io::Error> {
        FAULT
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|h| h(op, path))
    }

    /// Installs (or, with `None`, removes) the process-wide sync hook. It
    /// runs right after every successful fsync, fdatasync and msync, on the
    /// thread that made it.
    pub fn set_sync_hook(hook: Option<SyncHook>) {
        let on = hook.is_some();
        *HOOK.write().unwrap_or_else(|e| e.into_inner()) = hook;
        HOOKED.store(on, Ordering::SeqCst);
    }

    /// A pause hook: given the pause point and a path of the engine's (its
    /// directory, or the file or directory the point names), it may block
    /// the calling thread (until the test lets go).
    pub type PauseHook = Box<dyn Fn(&'static str, &Path) + Send + Sync>;
    pub(super) static PAUSES: AtomicBool = AtomicBool::new(false);
    static PAUSE: RwLock<Option<PauseHook>> = RwLock::new(None);

    /// Installs (or, with `None`, removes) the process-wide pause hook.
    /// The pause points: `"written, not logged"` (given the engine's
    /// directory), a Bloom write applied under its key's stripe, its log
    /// record not yet appended; `"logs listed"` and `"shadows listed"`
    /// (given the `wal/` directory), a reading of the log files (recovery,
    /// verification) or a verification of the shadow copies that has
    /// listed them and not yet read them; `"counting target chosen"`
    /// (given the sub-filter's file), a counting insert that chose an older
    /// sub-filter than the newest of its chain, holding the chain's lock,
    /// its counters not yet written.
    pub fn set_pause_hook(hook: Option<PauseHook>) {
        let on = hook.is_some();
        *PAUSE.write().unwrap_or_else(|e| e.into_inner()) = hook;
        PAUSES.store(on, Ordering::SeqCst);
    }

    pub(super) fn paused(point: &'static str, path: &Path) {
        if let Some(h) = PAUSE.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            h(point, path);
        }
    }

    pub(super) fn call(path: &Path) {
        if let Some(h) = HOOK.read().unwrap_or_else(|e| e.into_inner()).as_ref() {
            h(path);
        }
    }

    /// `u64::MAX`: no override.
    static REWRITE_FROM: AtomicU64 = AtomicU64::new(u64::MAX);

    /// Sets (or, with `None`, removes) a process-wide override of the
    /// smallest sealed Bloom file rewritten in large pages (8 MiB), so that
    /// crash tests with small windows exercise the rewrite.
    pub fn set_rewrite_from(bytes: Option<u64>) {
        REWRITE_FROM.store(bytes.unwrap_or(u64::MAX), Ordering::SeqCst);
    }

    /// The smallest sealed Bloom file rewritten in large pages: `default`
    /// unless a test set another.
    pub(crate) fn rewrite_from(default: u64) -> u64 {
        match REWRITE_FROM.load(Ordering::Relaxed) {
            u64::MAX => default,
            set => set,
        }
    }
}

/// Opens `path` for writing as a new, empty file: whatever has that name
/// (a leftover of an earlier attempt, or a symlink someone put there) is
/// unlinked first, and the file is made with `O_CREAT | O_EXCL`, which
/// never follows a symlink. So nothing a link at the name points to (a
/// file outside the engine's directory) is ever truncated or written; a
/// link put back between the two steps makes the call fail instead.
pub(crate) fn create_fresh(path: &Path) -> std::io::Result<File> {
    match fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    OpenOptions::new().write(true).create_new(true).open(path)
}

/// Replaces `path` with `bytes` atomically: write a temporary file, fsync it,
/// rename it over `path`, fsync the directory. A crash leaves either the old
/// or the new file, never a mix.
pub(crate) fn rewrite_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = path.with_extension("tmp");
    check("create", &tmp)?;
    let mut f = create_fresh(&tmp).map_err(|e| Error::io("create", &tmp, e))?;
    if let Some((n, e)) = check_write("write", &tmp, bytes.len())? {
        let _ = f.write_all(&bytes[..n]);
        return Err(e);
    }
    f.write_all(bytes)
        .map_err(|e| Error::io("write", &tmp, e))?;
    sync_all(&f, &tmp, "fsync")?;
    drop(f);
    check("rename", path)?;
    fs::rename(&tmp, path).map_err(|e| Error::io("rename", path, e))?;
    fsync_dir(dir)
}

/// Refuses a new file of `len` bytes at `path` that its file system has no
/// room for, before the file is made: allocating it by writing zeros (or
/// where `fallocate` is missing) would otherwise fill the disk for minutes
/// before failing, and leave every other writer of that disk without
/// space meanwhile. A file system that reports no block counts (some
/// network and virtual ones) is not checked.
pub(crate) fn check_room(path: &Path, len: u64) -> Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let Ok(st) = rustix::fs::statvfs(dir) else {
        return Ok(());
    };
    if st.f_blocks == 0 {
        return Ok(());
    }
    let available = st.f_bavail.saturating_mul(st.f_frsize);
    if len > available {
        return Err(Error::io(
            "allocate",
            path,
            std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!(
                    "the file needs {len} bytes and its file system has {available} bytes \
                     available; free space, or plan smaller windows (lower the keys per day \
                     or raise the false-positive rate)"
                ),
            ),
        ));
    }
    Ok(())
}

/// Gives `file` `len` bytes of allocated blocks, so that writing through a
/// mapping of it cannot hit a full disk (which would be SIGBUS, not ENOSPC).
pub(crate) fn allocate(file: &File, path: &Path, len: u64) -> Result<()> {
    check("allocate", path)?;
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

/// Writes `len` zero bytes from the start of `file`: allocated, written
/// blocks.
///
/// One page per write: a file system with large folios (ext4 since Linux
/// 6.16) caches a large write in large folios, and a segment is written
/// through its mapping, where every write to a folio the kernel has written
/// back faults, and `ext4_page_mkwrite` then walks every block of the folio
/// (measured at 10^7 keys a day: inserts' p99 50-80 us with 1 MiB writes, 4
/// us with page-sized ones; docs/benchmarks.md, "Read path and threads").
pub(crate) fn write_zeros(file: &File, path: &Path, len: u64) -> Result<()> {
    use std::os::unix::fs::FileExt;
    let zeros = vec![0u8; 4096];
    let mut off = 0u64;
    while off < len {
        let n = (len - off).min(zeros.len() as u64) as usize;
        file.write_all_at(&zeros[..n], off)
            .map_err(|e| Error::io("allocate", path, e))?;
        off += n as u64;
    }
    Ok(())
}

/// Whether the file `path` holds a byte other than zero from `offset` on
/// (a segment body into which keys were written: its cells start zero).
pub(crate) fn body_has_bits(path: &Path, offset: u64) -> Result<bool> {
    let io = |e| Error::io("read unnamed file", path, e);
    let mut f = File::open(path).map_err(io)?;
    f.seek(SeekFrom::Start(offset)).map_err(io)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = match f.read(&mut buf) {
            Ok(0) => return Ok(false),
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io(e)),
        };
        // OR-folded a page at a time, which vectorizes.
        let set = buf[..n]
            .chunks(4096)
            .any(|c| c.iter().fold(0, |a, &b| a | b) != 0);
        if set {
            return Ok(true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::release_at_least;

    #[test]
    fn kernel_releases_compare_by_major_then_minor() {
        assert!(release_at_least("6.18.0-12-generic", (6, 2)));
        assert!(release_at_least("6.2.0", (6, 2)));
        assert!(release_at_least("7.0", (6, 2)));
        assert!(!release_at_least("6.1.112-lts", (6, 2)));
        assert!(!release_at_least("5.15.0-91-generic", (6, 2)));
        assert!(!release_at_least("6", (6, 2)));
        assert!(!release_at_least("", (6, 2)));
        assert!(!release_at_least("linux", (6, 2)));
    }
}
