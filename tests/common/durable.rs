//! What a simulated power loss keeps, shared by the power-loss tests: the
//! bytes each sync made durable, and the crash image built from them.
//! A hook (`timebloom::testing::set_sync_hook`) hands every synced path to
//! [`Durable::observe`]; [`build_image`] writes the tree a power loss would
//! leave. Each test file that uses it takes what it needs.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// A file for the life of its inode: the inode number and the file's
/// birth time. The number alone is not enough: a file system hands the
/// number of a deleted file to the next one created (at once, here), and
/// a crash image must not take the new file's unsynced pages for those of
/// the old one that a durable directory entry still names.
pub type FileId = (u64, u128);

fn file_id(md: &fs::Metadata) -> FileId {
    let born = md
        .created()
        .ok()
        .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
        .map_or(0, |d| d.as_nanos());
    (md.ino(), born)
}

/// What the syncs made durable.
#[derive(Clone, Default)]
pub struct Durable {
    /// File -> bytes made durable by its last sync.
    pub files: HashMap<FileId, Vec<u8>>,
    /// Directory -> its entries (name -> file, or `None` for a directory)
    /// at its last fsync.
    pub dirs: HashMap<PathBuf, Vec<(String, Option<FileId>)>>,
}

impl Durable {
    /// Records what a sync of `path` made durable: a file's bytes, or a
    /// directory's entries. False when `path` is gone.
    pub fn observe(&mut self, path: &Path) -> bool {
        match fs::metadata(path) {
            Ok(md) if md.is_dir() => {
                self.dirs.insert(path.to_path_buf(), entries(path));
            }
            Ok(md) => {
                if let Ok(b) = fs::read(path) {
                    self.files.insert(file_id(&md), b);
                }
            }
            Err(_) => return false,
        }
        true
    }
}

/// Installs the process's sync hook to record what each sync under
/// `under` makes durable, with the directories of `predate` durable as
/// they are now (they existed before the engine). The caller clears the
/// hook (`set_sync_hook(None)`) once done.
pub fn record_syncs(under: &Path, predate: &[&Path]) -> Arc<Mutex<Durable>> {
    let durable = Arc::new(Mutex::new(Durable::default()));
    for d in predate {
        let dirs = &mut durable.lock().unwrap().dirs;
        dirs.insert(d.to_path_buf(), entries(d));
    }
    let (hook, under) = (Arc::clone(&durable), under.to_path_buf());
    timebloom::testing::set_sync_hook(Some(Box::new(move |p: &Path| {
        if p.starts_with(&under) {
            hook.lock().unwrap_or_else(|e| e.into_inner()).observe(p);
        }
    })));
    durable
}

/// A directory's entries: name, and file (`None` for a directory).
pub fn entries(dir: &Path) -> Vec<(String, Option<FileId>)> {
    let mut v = Vec::new();
    if let Ok(rd) = fs::read_dir(dir) {
        for e in rd.flatten() {
            let Ok(md) = e.metadata() else { continue };
            let name = e.file_name().to_string_lossy().into_owned();
            v.push((name, (!md.is_dir()).then(|| file_id(&md))));
        }
    }
    v
}

/// Every file under `root` as it is now.
pub fn all_files(root: &Path, out: &mut HashMap<FileId, Vec<u8>>) {
    if let Ok(rd) = fs::read_dir(root) {
        for e in rd.flatten() {
            let p = e.path();
            let Ok(md) = fs::metadata(&p) else { continue };
            if md.is_dir() {
                all_files(&p, out);
            } else if let Ok(b) = fs::read(&p) {
                out.insert(file_id(&md), b);
            }
        }
    }
}

/// A small deterministic generator for the tearing choices.
pub struct Rng(pub u64);
impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// The power fails now: stops recording syncs and builds, under
/// `tmp/image`, what the disk holds of `tmp` after the syncs that `kept`
/// recorded (unsynced bytes lost, as `build_image` with no current bytes
/// makes them). Returns the image's directory; `tmp/X` is at
/// `image/root/X`.
pub fn power_fail(kept: &Mutex<Durable>, tmp: &Path) -> PathBuf {
    let durable = kept.lock().unwrap().clone();
    timebloom::testing::set_sync_hook(None);
    let image = tmp.join("image");
    build_image(&durable, &Default::default(), tmp, &image, &mut Rng(1));
    image
}

/// Writes into `to` the crash image of the tree under `from`: the entries
/// and bytes `durable` holds, plus a random choice of what `current` (the
/// files as they were at the crash) had not synced yet: each
/// unsynced 4 KiB page, and a 512-byte-grain prefix of an unsynced append.
/// An empty `current` keeps exactly what the syncs made durable.
pub fn build_image(
    durable: &Durable,
    current: &HashMap<FileId, Vec<u8>>,
    from: &Path,
    to: &Path,
    rng: &mut Rng,
) {
    fs::create_dir_all(to).unwrap();
    let Some(list) = durable.dirs.get(from) else {
        return; // never fsynced: its entries are not durable
    };
    for (name, id) in list {
        let (src, dst) = (from.join(name), to.join(name));
        match id {
            None => build_image(durable, current, &src, &dst, rng),
            Some(id) => {
                let mut b = durable.files.get(id).cloned().unwrap_or_default();
                if let Some(cur) = current.get(id) {
                    // Unsynced pages of the same length reach the disk or not.
                    for (i, page) in cur.chunks(4096).enumerate() {
                        let at = i * 4096;
                        if at + page.len() <= b.len()
                            && b[at..at + page.len()] != *page
                            && rng.next().is_multiple_of(2)
                        {
                            b[at..at + page.len()].copy_from_slice(page);
                        }
                    }
                    // An unsynced append: a random 512-byte-grain prefix.
                    if cur.len() > b.len() && cur.starts_with(&b) {
                        let extra = cur.len() - b.len();
                        let keep = (rng.next() as usize % (extra / 512 + 2)) * 512;
                        b.extend_from_slice(&cur[b.len()..b.len() + keep.min(extra)]);
                    }
                }
                fs::write(&dst, b).unwrap();
            }
        }
    }
}
