//! Durability: the write-ahead log's recovery and checkpoints, the
//! manifest, and `flush`.

use std::fs;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use crate::chain::Segment;
use crate::config::SyncPolicy;
use crate::error::{Error, Result};
use crate::filter::{Exclusive, KeyMasks};
use crate::fingerprint::Insert;
use crate::manifest::{Manifest, SegmentEntry};
use crate::segment::SubFilter;
use crate::wal::{self, Op, Wal};
use crate::window;

use super::snapshot::Snapshot;
use super::write::AHEAD;
use super::{
    window_name, Engine, Maint, Syncer, BOOT, MANIFEST, MAX_CHAIN, QUARANTINE, SEG_DIR, WAL_DIR,
};

/// Copies a damaged shadow copy that a degraded recovery goes on without
/// to `quarantine/`, for inspection: the copy in `wal/` stays until the
/// recovery's checkpoint deletes it, so that an open that fails before
/// then finds it again (and refuses again unless degraded). At most `len`
/// bytes, the length of a shadow of its body: a copy grown past it (a
/// sparse file of a terabyte) would fill the file system with the copy.
fn keep_damaged_shadow(dir: &Path, shadow: &Path, len: u64) -> Result<()> {
    let qdir = dir.join(QUARANTINE);
    fs::create_dir_all(&qdir).map_err(|e| Error::io("create directory", &qdir, e))?;
    let to = qdir.join(shadow.file_name().unwrap_or_default());
    let copied = fs::File::open(shadow).and_then(|from| {
        let mut out = crate::file::create_fresh(&to)?;
        std::io::copy(&mut std::io::Read::take(from, len), &mut out)?;
        out.sync_all()
    });
    copied.map_err(|e| Error::io("quarantine shadow copy", shadow, e))?;
    crate::file::fsync_dir(&qdir)?;
    crate::file::fsync_dir(dir)
}

/// Msyncs every body not sealed on disk and rewrites its header.
fn flush_bodies(snap: &Snapshot) -> Result<()> {
    for t in &snap.tiers {
        for seg in &t.segments {
            for s in &seg.subs {
                s.flush()?;
            }
        }
    }
    Ok(())
}

/// A step of `start_durability_with`: the records past checkpoint `c` in
/// the log a previous session left, none if it left no log.
fn read_logs_since(wal_dir: &Path, had_log: bool, c: u64) -> Result<wal::Logs> {
    if had_log {
        wal::read_logs(wal_dir, c)
    } else {
        Ok(wal::Logs::default())
    }
}

/// Whether an open recovers from the log in `wal_dir` as after a power
/// loss (shadow copies restored, the log replayed from the checkpoint):
/// when asked to (`assume_power_loss`), or on another boot than the log's.
/// `start_durability_with` acts on it, and the open's check of files the
/// manifest does not name asks it ahead.
pub(super) fn recovers_as_after_power_loss(wal_dir: &Path, assume_power_loss: bool) -> bool {
    assume_power_loss || !same_boot(wal_dir)
}

/// Whether the boot recorded in `wal/` is this one (the operating system
/// has not restarted since).
fn same_boot(wal_dir: &Path) -> bool {
    let recorded = fs::read_to_string(wal_dir.join(BOOT)).ok();
    match (recorded, wal::boot_id()) {
        (Some(a), Some(b)) => a.trim() == b,
        _ => false,
    }
}

/// A step of `start_durability_with`, before a replay: the log's damage,
/// if any, unless `degraded`; degraded, the damage gone past, as
/// [`crate::Stats::log_damage`] words it.
fn refuse_damaged_log(damaged: Option<Error>, degraded: bool) -> Result<Option<String>> {
    // Damage in the middle of the log (not a torn tail) would end
    // the replay early and silently drop the acknowledged writes
    // after it: refused, unless opened degraded.
    match damaged {
        Some(e) if !degraded => Err(e),
        Some(e) => Ok(Some(format!(
            "{e}; the log's writes after it were not replayed"
        ))),
        None => Ok(None),
    }
}

/// A step of `start_durability_with`, under `none`: deletes the log and
/// the shadow copies.
fn leave_log(snap: &Snapshot, wal_dir: &Path, had_log: bool) -> Result<()> {
    if had_log {
        // Leaving the logged policies: make the bodies durable, then
        // drop the log and the shadow copies.
        flush_bodies(snap)?;
        wal::remove_older(wal_dir, u64::MAX)?;
    }
    // Also the shadows a crash between the two deletions left
    // behind a deleted log.
    wal::remove_shadows_except(wal_dir, u64::MAX)
}

/// A step of `start_durability_with`: records this boot in `wal/`, if the
/// system names it and the file does not already.
fn record_boot(wal_dir: &Path) -> Result<()> {
    if let Some(id) = wal::boot_id() {
        let p = wal_dir.join(BOOT);
        if fs::read_to_string(&p).ok().as_deref() != Some(id.as_str()) {
            fs::write(&p, id).map_err(|e| Error::io("write", &p, e))?;
        }
    }
    Ok(())
}

/// A step of `start_durability_with`: the position this session's log
/// starts at, after checkpoint `c` and the `records` read, and the
/// position past which log files are stale (see `delete_stale_logs`), if
/// any file begins past it.
fn next_position(wal_dir: &Path, c: u64, records: &[wal::Record]) -> Result<(u64, Option<u64>)> {
    let mut next = match records.last() {
        None => Some(c),
        Some(r) => r.lsn.checked_add(1),
    };
    // A log file that begins past the records read holds none that was
    // acknowledged (a power loss tore the log before a file a switch
    // had begun, whose entry lasted). Should this session's log end
    // just before it, a recovery would go on into it: the log starts
    // past every such file, and such files are deleted (and the
    // deletion made durable) before the checkpoint in
    // `start_durability_with` names a new position. Deleted only by that
    // checkpoint, after its manifest, a crash between the two left a
    // checkpoint inside such a file's records, and the next recovery
    // replayed the ones past it as writes of this engine's log.
    let mut stale = None;
    if let (Some(n), Some((last, _))) = (next, wal::list(wal_dir)?.last()) {
        if *last > n {
            next = last.checked_add(1);
            stale = Some(n);
        }
    }
    // A position no log reaches in centuries (2^62 records: 146 years
    // at 10^9 a second) is damage, refused here: appends count up from
    // it without a check.
    let next = next.filter(|&n| n <= wal::MAX_LSN).ok_or_else(|| {
        Error::corrupt(
            wal_dir,
            format!(
                "the log position after the checkpoint or the last record is past 2^62 \
                 (checkpoint {c}); the manifest or log is damaged"
            ),
        )
    })?;
    Ok((next, stale))
}

/// A step of `start_durability_with`, before the checkpoint that starts
/// this session's log: deletes the log files that begin past position `n`
/// (see `next_position`), durably.
fn delete_stale_logs(wal_dir: &Path, n: u64) -> Result<()> {
    for (first, path) in wal::list(wal_dir)? {
        if first > n {
            crate::file::check("delete stale log", &path)?;
            fs::remove_file(&path).map_err(|e| Error::io("delete stale log", &path, e))?;
        }
    }
    crate::file::fsync_dir(wal_dir)
}

/// A step of `start_durability_with`: whether a counting sub-filter lacks
/// its shadow copy at checkpoint `c`, so that a checkpoint must make one.
fn lacks_shadow(snap: &Snapshot, wal_dir: &Path, had_log: bool, c: u64) -> bool {
    // Every counting sub-filter not sealed on disk needs a shadow copy
    // at the checkpoint the log starts from. Without a log, shadows are
    // not one: an open under `none` deletes the log, then the shadows,
    // and writes under `none` after a crash between the two are in the
    // bodies but not in those shadows, which a power loss would then
    // restore.
    snap.tiers.iter().any(|t| {
        t.tier.kind.needs_shadow()
            && t.segments.iter().flat_map(|s| &s.subs).any(|s| {
                !s.sealed_on_disk()
                    && (!had_log || !wal::shadow_path(wal_dir, &s.file_name(), c).exists())
            })
    })
}

/// A step of `replay`, once the shadow copies are restored: sweeps the
/// tables that `restore_shadows` set back, as of `today`.
fn sweep_restored(restored: Vec<&Arc<SubFilter>>, today: u32) -> Result<()> {
    // A table set back to its shadow copy holds the slots that the
    // sweeps since the checkpoint cleared, dated as the checkpoint saw
    // them: swept again from the day the copy was last swept (in steps
    // of the sweep interval past it, `Table::catch_up`), before their
    // tags can read as live again around the ring of days.
    for s in restored {
        s.sweep(today, || today)?;
    }
    Ok(())
}

impl Engine {
    /// At a writer's open (and at create): recovers from the log a previous
    /// session left, then starts this session's log under the `always` and
    /// `interval` policies (see docs/format.md, "Write-ahead log").
    pub(super) fn start_durability(
        &mut self,
        assume_power_loss: bool,
        degraded: bool,
    ) -> Result<()> {
        let wal_dir = self.dir.join(WAL_DIR);
        let had_log = !wal::list(&wal_dir)?.is_empty();
        let snap = self.current.load_full();
        let mut m = std::mem::replace(
            self.maint.get_mut(),
            Maint {
                checkpoint_lsn: 0,
                upkeep: Vec::new(),
                prefaulting: Vec::new(),
                background: None,
                failure: None,
            },
        );
        let r = self.start_durability_with(
            &mut m,
            &snap,
            &wal_dir,
            had_log,
            assume_power_loss,
            degraded,
        );
        *self.maint.get_mut() = m;
        r
    }

    /// The steps of `start_durability`, with `m` taken out of the engine:
    /// reads the log a previous session left, recovers from it after a
    /// restart, then either leaves the logged policies or starts this
    /// session's log (its position, a checkpoint, the sync thread).
    fn start_durability_with(
        &mut self,
        m: &mut Maint,
        snap: &Snapshot,
        wal_dir: &Path,
        had_log: bool,
        assume_power_loss: bool,
        degraded: bool,
    ) -> Result<()> {
        let c = m.checkpoint_lsn;
        let logs = read_logs_since(wal_dir, had_log, c)?;
        let records = logs.records;
        let mut need_checkpoint = !records.is_empty();
        // While the operating system has not restarted, the page cache
        // holds every write of the crashed process: the bodies are whole
        // and replaying would count counting windows twice. After a restart
        // (a power loss, perhaps), the bodies are whatever reached the
        // disk: restore counting windows from their shadow copies and
        // replay the log.
        if had_log && recovers_as_after_power_loss(wal_dir, assume_power_loss) {
            self.log_damage = refuse_damaged_log(logs.damaged, degraded)?;
            if !records.is_empty() {
                self.unrestored = self.replay(m, snap, wal_dir, c, &records, degraded)?;
            }
        }
        // A replay that grew a fingerprint chain published a new set.
        let snap = &*self.current.load_full();
        if self.policy == SyncPolicy::None {
            return leave_log(snap, wal_dir, had_log);
        }
        // A `wal/` made here (the engine ran under `none` so far) is named
        // in the engine's directory durably before any record in it counts
        // as durable: an open that writes no manifest syncs that directory
        // nowhere else, and a power loss took `wal/` with the log.
        crate::file::create_dir_in(&self.dir, wal_dir)?;
        record_boot(wal_dir)?;
        let (next, stale) = next_position(wal_dir, c, &records)?;
        if let Some(n) = stale {
            delete_stale_logs(wal_dir, n)?;
        }
        let log = Arc::new(Wal::create(wal_dir, next)?);
        self.wal = Some(Arc::clone(&log));
        need_checkpoint |= lacks_shadow(snap, wal_dir, had_log, c);
        if need_checkpoint || next != c {
            self.checkpoint(m, snap)?;
        }
        if let SyncPolicy::Interval(every) = self.policy {
            *self.syncer.get_mut() = Some(Syncer::start(log, every));
        }
        Ok(())
    }

    /// Recovery after a possible power loss: counting windows back to their
    /// shadow copies at checkpoint `c`, then every logged write since.
    ///
    /// A damaged shadow copy refuses the recovery, unless `degraded`: the
    /// copy is then copied to `quarantine/`, the sub-filter keeps its body
    /// as the disk holds it and takes the replay (docs/operations.md,
    /// "Checking and recovering"). Returns the windows recovered so
    /// (`TIER WINDOW`).
    fn replay(
        &self,
        m: &Maint,
        snap: &Snapshot,
        wal_dir: &Path,
        c: u64,
        records: &[wal::Record],
        degraded: bool,
    ) -> Result<Vec<String>> {
        let x = self.stripes.lock_all();
        let (restored, unrestored) = self.restore_shadows(snap, wal_dir, c, &x, degraded)?;
        let today = self.table_today(self.now()?)?;
        sweep_restored(restored, today)?;
        let cur = self.replay_tables(m, &x, records, today)?;
        // The windows after the tables: the two share no state, and the
        // records keep their order within each.
        self.replay_windows(&cur, &x, records);
        Ok(unrestored)
    }

    /// A step of `replay`: sets each counting sub-filter not sealed on disk
    /// that has a shadow copy at checkpoint `c` back to it. Returns the
    /// tables set back to a copy that names the day it was last swept (for
    /// `sweep_restored`), and the windows recovered from their bodies as
    /// the disk holds them (`degraded`; `TIER WINDOW`).
    fn restore_shadows<'s>(
        &self,
        snap: &'s Snapshot,
        wal_dir: &Path,
        c: u64,
        x: &Exclusive,
        degraded: bool,
    ) -> Result<(Vec<&'s Arc<SubFilter>>, Vec<String>)> {
        let mut restored = Vec::new();
        let mut unrestored = Vec::new();
        for t in &snap.tiers {
            if !t.tier.kind.needs_shadow() {
                continue;
            }
            for (seg, s) in t
                .segments
                .iter()
                .flat_map(|seg| seg.subs.iter().map(move |s| (seg, s)))
            {
                if s.sealed_on_disk() {
                    continue;
                }
                let p = wal::shadow_path(wal_dir, &s.file_name(), c);
                // No shadow at this checkpoint: the sub-filter was created
                // or reopened after it, and a checkpoint always follows
                // that before any write, so its body is still the state
                // the checkpoint describes.
                if !p.exists() {
                    continue;
                }
                let window = window_name(&t.tier, seg.window);
                let (body, swept) = match wal::read_shadow(&p, s.body().len()) {
                    Ok(read) => read,
                    Err(Error::Corrupt { path, reason }) if !degraded => {
                        return Err(Error::corrupt(
                            path,
                            format!(
                                "{reason}: recovery after a power loss needs this copy of \
                                 window {window}'s body; restore wal/ from the same copy as \
                                 MANIFEST, or open with --degraded (Options::degraded) to \
                                 recover the window from its body as the disk holds it, whose \
                                 counts may then be too high or too low \
                                 (docs/operations.md, \"Checking and recovering\")"
                            ),
                        ));
                    }
                    Err(err) if degraded && err.is_damage() => {
                        let len = (s.body().len() + wal::SHADOW_HEADER) as u64;
                        keep_damaged_shadow(&self.dir, &p, len)?;
                        if !unrestored.contains(&window) {
                            unrestored.push(window);
                        }
                        continue;
                    }
                    Err(err) => return Err(err),
                };
                s.restore(x, &body);
                if let Some(day) = swept.filter(|_| s.swept().is_some()) {
                    s.restored_swept(day);
                    restored.push(s);
                }
            }
        }
        Ok((restored, unrestored))
    }

    /// A step of `replay`, after the shadow copies: takes every record again
    /// into the fingerprint tables, as of `today`, growing a chain whose
    /// table has no room. Returns the set as it stands after (a growth
    /// publishes a new one).
    fn replay_tables(
        &self,
        m: &Maint,
        x: &Exclusive,
        records: &[wal::Record],
        today: u32,
    ) -> Result<Arc<Snapshot>> {
        // Fingerprint tables take each logged insert again with its own day
        // (the record's instant), as of the tables' day (never earlier than
        // the newest one they took, even with a clock stepped back across
        // the crash): a day they no longer keep is skipped, a key's day
        // only moves forward. A table may find less room than the logged
        // writes had (writers of different keys filled it in another order
        // than the log's): it grows, as a writer's would, and the record is
        // taken again.
        let mut cur = self.current.load_full();
        let tables: Vec<usize> = (0..cur.tiers.len())
            .filter(|&ti| cur.tiers[ti].tier.is_table())
            .collect();
        for r in records {
            for &ti in &tables {
                let Ok(day) = self.day_of(r.t) else {
                    continue;
                };
                let days = cur.tiers[ti].tier.table_days();
                while let Some(seg) = cur.tiers[ti].segments.last() {
                    let full = match r.op {
                        Op::Insert => match seg.tail() {
                            // A seam for tests: this insert finds no room.
                            Some(s) if crate::file::check("replay table", s.path()).is_err() => {
                                true
                            }
                            _ => {
                                matches!(seg.table_insert(x, r.h, day, today), Some(Insert::Full))
                            }
                        },
                        Op::Remove => {
                            seg.table_remove(x, r.h, today, days);
                            false
                        }
                        // The table no longer kept the day: left alone.
                        Op::RemoveWindows => false,
                    };
                    if !full {
                        break;
                    }
                    cur = self.grow_at_recovery(m, &cur, ti)?;
                }
            }
        }
        Ok(cur)
    }

    /// Replays `records` into the Bloom and counting windows holding their
    /// instants, in log order. Each record's lines are loaded [`AHEAD`]
    /// records before its turn, so that several records' loads are in
    /// flight while one is written (a record is a random line in each of
    /// its windows: one at a time, the replay waited for each in turn).
    fn replay_windows<'s>(&self, snap: &'s Snapshot, x: &Exclusive, records: &[wal::Record]) {
        let tiers: Vec<_> = snap.tiers.iter().filter(|t| !t.tier.is_table()).collect();
        // The window each tier found last: consecutive records are mostly
        // in the same windows.
        let mut found: Vec<Option<(i64, Option<&'s Segment>)>> = vec![None; tiers.len()];
        let mut targets = |r: &wal::Record, out: &mut Vec<&'s Segment>| {
            out.clear();
            for (t, found) in tiers.iter().zip(found.iter_mut()) {
                let Some(w) = window::index(t.tier.span, r.t, self.config.utc_offset_secs) else {
                    continue;
                };
                let seg = match *found {
                    Some((at, seg)) if at == w => seg,
                    _ => {
                        // A sealed window holds every write made before its
                        // seal (a record staged under `interval` may reach
                        // the log only after the seal: its write is in the
                        // sealed body, which waited for the write's
                        // stripe); an expired one is gone. A chain's
                        // sub-filters are sealed one by one: one whose seal
                        // did not land takes the replay, the others are
                        // left alone (`Segment::replay_insert`).
                        let seg = t
                            .segments
                            .iter()
                            .find(|s| s.window == w && s.open_on_disk());
                        *found = Some((w, seg));
                        seg
                    }
                };
                if let Some(seg) = seg {
                    seg.prefetch(r.h);
                    out.push(seg);
                }
            }
        };
        let mut ring: Vec<Vec<&'s Segment>> = (0..AHEAD).map(|_| Vec::new()).collect();
        for (r, out) in records.iter().zip(ring.iter_mut()) {
            targets(r, out);
        }
        for (i, r) in records.iter().enumerate() {
            let segs = &mut ring[i % AHEAD];
            match r.op {
                Op::Insert => {
                    let mut m = KeyMasks::new(r.h.lo);
                    for seg in segs.iter() {
                        seg.replay_insert(x, r.h, &mut m);
                    }
                }
                Op::Remove | Op::RemoveWindows => {
                    if !segs.is_empty() && segs.iter().all(|s| s.contains(r.h)) {
                        for seg in segs.iter() {
                            seg.replay_remove(x, r.h);
                        }
                    }
                }
            }
            if let Some(next) = records.get(i + AHEAD) {
                targets(next, segs);
            }
        }
    }

    /// Recovery's growth of tier `ti`'s fingerprint chain: a new table,
    /// named by a manifest at the same checkpoint, then published. A crash
    /// before the replay's closing checkpoint replays from that checkpoint
    /// again onto the longer chain: the new table has no shadow copy and
    /// keeps what this replay wrote to it, keys that were all logged, so
    /// nothing false is added (a key found there is updated in place).
    fn grow_at_recovery(&self, m: &Maint, cur: &Snapshot, ti: usize) -> Result<Arc<Snapshot>> {
        let mut next = cur.clone();
        let t = &mut next.tiers[ti];
        let Some(seg) = t.segments.last_mut() else {
            return Err(Error::corrupt(
                self.dir.join(SEG_DIR),
                "a fingerprint tier has no table",
            ));
        };
        if seg.subs.len() >= MAX_CHAIN {
            return Err(Error::corrupt(
                seg.tail()
                    .map(|s| s.path().to_path_buf())
                    .unwrap_or_default(),
                "a fingerprint chain at its longest has no room for a logged insert at recovery",
            ));
        }
        let index = seg.next_index();
        seg.subs
            .push(self.new_subfilter(&t.tier, &t.code, seg.window, index)?);
        crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
        self.store_manifest(m, &next)?;
        Ok(self.publish(next))
    }

    /// A checkpoint: every logged write made durable in the segments
    /// (msync), a shadow copy of every counting or fingerprint body not
    /// sealed on disk, the manifest naming the checkpoint's log position
    /// (the commit point), then a new log file; older logs and shadows are
    /// deleted.
    ///
    /// Every stripe is held throughout, so no write runs meanwhile: the
    /// bodies hold exactly the writes logged before the checkpoint's
    /// position, which the shadows need. Lookups go on.
    pub(super) fn checkpoint(&self, m: &mut Maint, snap: &Snapshot) -> Result<()> {
        let Some(log) = &self.wal else {
            return Ok(());
        };
        // A checkpoint running beside the writers finishes first; this one
        // supersedes it.
        if let Some((_, h)) = m.background.take() {
            self.flushed.store(false, Ordering::Relaxed);
            join_flush(h, &self.dir)?;
        }
        let _x = self.stripes.lock_all();
        let l = log.next_lsn()?;
        log.sync_to(l)?;
        let wal_dir = self.dir.join(WAL_DIR);
        let mut shadows = false;
        for t in &snap.tiers {
            for seg in &t.segments {
                for s in &seg.subs {
                    // A sealed body is durable; `flush` waits for a seal
                    // running in the background (it holds the header lock).
                    if s.sealed_on_disk() {
                        continue;
                    }
                    // A sweep in progress finishes first: the copy and its
                    // checksum read one state of the body.
                    let _sweeps = s.hold_sweeps();
                    s.flush()?;
                    if t.tier.kind.needs_shadow() && !s.sealed_on_disk() {
                        let p = wal::shadow_path(&wal_dir, &s.file_name(), l);
                        wal::write_shadow(&p, s.body(), s.swept())?;
                        shadows = true;
                    }
                }
            }
        }
        if shadows {
            crate::file::fsync_dir(&wal_dir)?;
        }
        m.checkpoint_lsn = l;
        self.store_manifest(m, snap)?;
        log.restart(l)?;
        wal::remove_shadows_except(&wal_dir, l)
    }

    /// Under `always`, returns once every logged write is durable (group
    /// commit: two loads when it already is); then checkpoints if the log
    /// has grown past its limit (see `upkeep`).
    #[inline]
    pub(super) fn sync_writes(&self) -> Result<()> {
        let Some(log) = &self.wal else {
            return Ok(());
        };
        if self.policy == SyncPolicy::Always {
            let r = log.sync_appended();
            self.latch(r)?;
        }
        self.upkeep(log);
        Ok(())
    }

    /// Commits a finished background checkpoint and starts a due one, once
    /// the calling write is logged (and, under `always`, synced).
    ///
    /// A failure here is not the calling write's: that write is recorded,
    /// as durable as the policy promises, so the call returns its answer.
    /// An error instead would tell a crawler that the key was not recorded;
    /// asked again, the engine would answer "seen" and the page would never
    /// be fetched. The failure latches the engine: the next write reports
    /// `PreviousIo` and `close` reports the cause.
    #[inline]
    fn upkeep(&self, log: &Arc<Wal>) {
        if self.flushed.load(Ordering::Relaxed) || log.checkpoint_due(self.checkpoint_at) {
            self.upkeep_now(log);
        }
    }

    /// [`Engine::upkeep`]'s work, when there is some: out of line, so that
    /// a write that finds none runs two loads.
    #[cold]
    #[inline(never)]
    fn upkeep_now(&self, log: &Arc<Wal>) {
        if self.flushed.load(Ordering::Relaxed) {
            // A background checkpoint flushed its segments: commit it, unless
            // maintenance is busy (a later write will).
            if let Some(mut m) = self.maint.try_lock() {
                let r = self.commit_background(&mut m);
                self.keep_failure(&mut m, r);
            }
        }
        if log.checkpoint_due(self.checkpoint_at) {
            let mut m = self.maint.lock();
            let snap = self.current.load_full();
            if self.check_usable(&snap).is_err() {
                return; // closed, or latched already: nothing to start
            }
            if log.checkpoint_due(self.checkpoint_at) {
                let r = if snap.tiers.iter().any(|t| t.tier.kind.needs_shadow()) {
                    self.checkpoint(&mut m, &snap)
                } else {
                    self.checkpoint_beside_writers(&mut m, log)
                };
                self.keep_failure(&mut m, r);
            }
        }
    }

    /// Latches the engine on a failed checkpoint, keeping the first cause
    /// for `close` (see `upkeep`).
    fn keep_failure(&self, m: &mut Maint, r: Result<()>) {
        if let Err(e) = r {
            self.failed.store(true, Ordering::Relaxed);
            m.failure.get_or_insert(e);
        }
    }

    /// A checkpoint that does not stop the writers, for engines of Bloom
    /// tiers only. A Bloom write is applied before its record is appended
    /// and replaying it again changes nothing, so a fuzzy checkpoint is
    /// exact enough. On a background thread, the log moves to a new file
    /// at LSN `l` (every record below `l` is then applied, and durable in
    /// the older files) and every open segment of the current snapshot is
    /// msynced; writers go on meanwhile (what they write is logged at `l`
    /// or later and replayed if needed). The next write after that commits
    /// the checkpoint: the manifest names `l`, and the older log files go.
    ///
    /// What makes it sound: a write below `l` went to a window of this
    /// snapshot, which the thread flushes, or of an older one, rotated out
    /// before this snapshot (sealed, or being sealed: the commit waits for
    /// the seals). A snapshot published meanwhile (rotation, growth) may
    /// have taken writes below `l` that the thread did not flush: then the
    /// checkpoint is dropped, and a later one commits. Recovery before the
    /// commit replays from the previous checkpoint through every file.
    ///
    /// Measured at 10^7 keys a day (docs/benchmarks.md, "Read path and
    /// threads"): the checkpoint that stops the writers held every writer
    /// for the msync of the open windows, 1.6-3.8 s every 64 MiB of log.
    fn checkpoint_beside_writers(&self, m: &mut Maint, log: &Arc<Wal>) -> Result<()> {
        if m.background.is_some() {
            return Ok(());
        }
        let snap = self.current.load_full();
        let generation = snap.generation;
        let (log, flushed) = (Arc::clone(log), Arc::clone(&self.flushed));
        let failed = Arc::clone(&self.failed);
        let dir = self.dir.join(super::SEG_DIR);
        let h = super::ahead::spawn_background("timebloom-checkpoint", move || {
            let r = (|| {
                let Some(l) = log.switch()? else {
                    return Ok(None);
                };
                flush_bodies(&snap)?;
                Ok(Some(l))
            })();
            if r.is_err() {
                // Writes stop before they write (`check_usable`): none
                // is acknowledged past a failure it was not told of.
                failed.store(true, Ordering::Relaxed);
            }
            flushed.store(true, Ordering::Release);
            r
        })
        .map_err(|e| Error::io("start checkpoint thread", &dir, e))?;
        m.background = Some((generation, h));
        Ok(())
    }

    /// Commits a background checkpoint whose segments are flushed: the
    /// manifest names its position and the older log files are deleted.
    /// Waits for nothing: while a seal runs (a window the thread did not
    /// flush may depend on it), the commit is left for a later write.
    fn commit_background(&self, m: &mut Maint) -> Result<()> {
        let finished = m.background.as_ref().is_some_and(|(_, h)| h.is_finished());
        if !finished || m.upkeep.iter().any(|h| !h.is_finished()) {
            return Ok(());
        }
        let Some((generation, h)) = m.background.take() else {
            return Ok(());
        };
        self.flushed.store(false, Ordering::Relaxed);
        let l = match join_flush(h, &self.dir) {
            Ok(l) => l,
            // The thread latched the engine; the write that got here was
            // applied and logged before, so it is not the one to fail.
            // `close` reports the cause.
            Err(e) => {
                m.failure.get_or_insert(e);
                return Ok(());
            }
        };
        self.join_upkeep(m)?;
        let cur = self.current.load_full();
        match l {
            Some(l) if l > m.checkpoint_lsn && cur.generation == generation => {
                m.checkpoint_lsn = l;
                self.store_manifest(m, &cur)?;
                wal::remove_older(&self.dir.join(WAL_DIR), l)
            }
            // A snapshot published since: the log files stay, and another
            // checkpoint starts at once with the new snapshot (waiting for
            // the log to fill again would let rotations and growth that
            // keep landing in checkpoints grow it without bound).
            Some(l) if l > m.checkpoint_lsn => match &self.wal {
                Some(log) => self.checkpoint_beside_writers(m, log),
                None => Ok(()),
            },
            // Nothing to checkpoint, or superseded.
            _ => Ok(()),
        }
    }

    /// Writes the manifest naming `snap`'s windows (the commit point of
    /// every change to the live set).
    pub(super) fn store_manifest(&self, m: &Maint, snap: &Snapshot) -> Result<()> {
        let mut segments = Vec::new();
        for (ti, t) in snap.tiers.iter().enumerate() {
            for seg in &t.segments {
                let files = seg
                    .subs
                    .iter()
                    .map(|s| Engine::file_name(&t.tier, &t.code, seg.window, s.header().id.index))
                    .collect::<Result<Vec<_>>>()?;
                segments.push(SegmentEntry {
                    tier: ti,
                    window: seg.window,
                    files,
                    first: seg.first(),
                });
            }
        }
        let generation = self
            .manifest_generation
            .load(std::sync::atomic::Ordering::Relaxed)
            + 1;
        let manifest = Manifest {
            config: self.config.clone(),
            seed: self.seed,
            generation,
            segments,
            checkpoint_lsn: m.checkpoint_lsn,
            table_day: self.table_day.load(Ordering::Relaxed),
            lost: self.lost_at.clone(),
        };
        manifest.store(&self.dir.join(MANIFEST))?;
        self.manifest_generation
            .store(generation, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    }

    /// Makes every insert so far durable (msync, header, fsync), and
    /// reseals segments that a backfill or remove reopened. Runs any
    /// rotation due first, so like a write it returns
    /// [`Error::ClockJump`](crate::Error::ClockJump) when the clock jumped
    /// past the guard (unless the engine was opened allowing it).
    pub fn flush(&self) -> Result<()> {
        self.writable()?;
        let now = self.now()?;
        let mut m = self.maint.lock();
        let cur = self.current.load_full();
        self.check_usable(&cur)?;
        if !self.allow_clock_jump {
            self.check_clock_jump(&cur, now)?;
        }
        drop(cur);
        let r = (|| {
            self.rotate(&mut m, now, false)?;
            self.join_upkeep(&mut m)?;
            self.swap_rewritten(&mut m)?;
            let snap = self.current.load_full();
            if self.wal.is_some() {
                return self.checkpoint(&mut m, &snap);
            }
            flush_bodies(&snap)
        })();
        self.latch(r)
    }
}

/// Joins a background checkpoint's thread: the log position it flushed
/// to, its error, or a panic as an I/O error.
pub(super) fn join_flush(
    h: std::thread::JoinHandle<Result<Option<u64>>>,
    dir: &Path,
) -> Result<Option<u64>> {
    h.join().unwrap_or_else(|_| {
        Err(Error::Io {
            op: "checkpoint",
            path: dir.join(super::SEG_DIR),
            source: std::io::Error::other("the checkpoint thread panicked"),
        })
    })
}
