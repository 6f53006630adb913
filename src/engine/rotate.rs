//! Time and the live set: rotation, expiry, sealing, chain growth and the
//! windows a backfill reopens.
//!
//! Every change here runs under the maintenance lock and ends by
//! publishing a new snapshot (see `snapshot`). Lookups never wait for it:
//! they go on reading the snapshot they have, and past a window boundary
//! that no writer has rotated yet they work out the live windows from the
//! clock themselves (`read`). Sealing a window that stopped taking inserts
//! (msync and a checksum of its whole body, the slow part) runs on a
//! background thread after the new snapshot is published.

use std::fs;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::SystemTime;

use crate::chain::Segment;
use crate::clock::instant;
use crate::config::{Config, SyncPolicy, Tier};
use crate::error::{Error, Result};
use crate::filter::Kind;
use crate::manifest::file_name;
use crate::segment::{Identity, SubFilter};
use crate::stats::Maintenance;
use crate::window;

use super::ahead;
use super::snapshot::{Snapshot, TierState};
use super::{window_name, Engine, Maint, MAX_CHAIN, SEG_DIR};

impl Engine {
    /// Rotates and expires as of `now`, reseals segments that a backfill or
    /// a remove reopened, and says what changed. Inserts do this by
    /// themselves when a window boundary passes; call it to do it at a
    /// chosen moment (lookups never rotate: they skip expired windows by
    /// the clock, and their files are deleted at the next write or
    /// `maintain`).
    ///
    /// It moves the engine forward across a clock jump that the writer
    /// refuses by itself ([`Error::ClockJump`]): it takes any forward step,
    /// even one that expires every window (the other way is opening with
    /// [`crate::Options::allow_clock_jump`]).
    ///
    /// An engine opened read-only refuses it ([`Error::ReadOnly`], nothing
    /// changed): the writer rotates, and lookups skip expired windows by
    /// the clock. A fingerprint tier's keys expire by day, not by file: the
    /// days it let go are named in [`Maintenance::expired`] as a range.
    ///
    /// ```
    /// use std::time::{Duration, SystemTime};
    /// use timebloom::{Config, Engine, Tier};
    /// # fn main() -> timebloom::Result<()> {
    /// # let dir = tempfile::tempdir().unwrap();
    /// let engine = Engine::create(dir.path().join("crawl.tb"), Config {
    ///     tiers: vec![Tier::daily(2)],
    ///     expected_items_per_day: 1_000,
    ///     ..Config::default()
    /// })?;
    /// let later = SystemTime::now() + Duration::from_secs(10 * 86_400);
    /// let done = engine.maintain(later)?;
    /// assert!(!done.opened.is_empty() && !done.expired.is_empty());
    /// print!("{done}"); // "opened 2d 2026...", "expired 2d 2026..."
    /// # Ok(())
    /// # }
    /// ```
    pub fn maintain(&self, now: SystemTime) -> Result<Maintenance> {
        self.writable()?;
        self.maintain_at(instant(now)?, true, false)
    }

    /// [`Engine::maintain`] that refuses a clock jump as an insert would:
    /// a step to `now` that would expire every live window at once, or
    /// that passes the limit of [`crate::Options::max_clock_jump`], is
    /// [`Error::ClockJump`] and changes nothing (unless the engine was
    /// opened with [`crate::Options::allow_clock_jump`]). For a routine
    /// rotation to a clock that may be wrong, such as the system clock.
    pub fn maintain_checked(&self, now: SystemTime) -> Result<Maintenance> {
        self.writable()?;
        self.maintain_at(instant(now)?, self.allow_clock_jump, false)
    }

    /// Rotation under the maintenance lock. `lazy`: only if a boundary
    /// passed (another writer may have rotated while this one waited), and
    /// seals in the background.
    pub(super) fn maintain_at(
        &self,
        now: i64,
        allow_jump: bool,
        lazy: bool,
    ) -> Result<Maintenance> {
        let mut m = self.maint.lock();
        let cur = self.current.load_full();
        self.check_usable(&cur)?;
        if lazy && now < cur.next_boundary {
            return Ok(Maintenance::default());
        }
        if !allow_jump && !self.read_only {
            self.check_clock_jump(&cur, now)?;
        }
        drop(cur); // the expired windows' space returns with the last holder
        let r = self.rotate(&mut m, now, lazy);
        self.latch(r)
    }

    /// Refuses a forward step of the clock that would expire every live
    /// window holding keys at once, or that passes the first window boundary
    /// the engine has not crossed by more than `max_clock_jump`.
    pub(super) fn check_clock_jump(&self, snap: &Snapshot, now: i64) -> Result<()> {
        let off = self.config.utc_offset_secs;
        // The first boundary not yet crossed: the earliest end among the
        // tiers' newest windows (not always the shortest tier's: a month
        // ends before the week holding its last day).
        let newest: Vec<Option<(window::Span, i64)>> = (snap.tiers.iter().enumerate())
            .map(|(i, t)| self.newest_crossed(i, t))
            .collect();
        let Some(boundary) = newest
            .iter()
            .filter_map(|n| {
                let (span, w) = (*n)?;
                window::end(span, w, off)
            })
            .min()
        else {
            return Ok(());
        };
        if now < boundary {
            return Ok(());
        }
        // Lookups do not rotate, but past a boundary they note the instants
        // they read: a clock that lookups saw move there step by step did
        // not jump.
        let from = boundary.max(self.read_past.load(Ordering::Relaxed));
        let refuse = || Error::ClockJump { from, to: now };
        // Only a step forward is a jump: a clock set back (behind what
        // lookups saw) expires nothing, and inserts go on in the newest
        // windows until it catches up (docs/design.md, "Time").
        if let Some(limit) = self.max_clock_jump {
            if now > from && (now - from).unsigned_abs() > limit.as_secs() {
                return Err(refuse());
            }
        }
        // Every window of every tier expires at once, and at least one
        // whole window of each tier passes unseen (a tier keeping one window
        // expires it at every boundary by design).
        for (t, n) in snap.tiers.iter().zip(&newest) {
            let Some((span, newest)) = *n else {
                continue;
            };
            let cur = self.window_index(span, now)?;
            let last = newest.max(self.window_index(span, from - 1)?);
            let skip = i64::from(t.tier.retention.max(2));
            if cur < last.saturating_add(skip) {
                return Ok(());
            }
        }
        Err(refuse())
    }

    /// The newest window of tier `i` the engine has crossed into: the
    /// newest it holds, or a newer one a degraded open went on without.
    fn newest_crossed(&self, i: usize, t: &TierState) -> Option<(window::Span, i64)> {
        let held = newest_window(t);
        match (held, self.lost_newest.get(i).copied().flatten()) {
            (Some((span, w)), Some(lost)) if !t.tier.is_table() => Some((span, w.max(lost))),
            (None, Some(lost)) if !t.tier.is_table() => Some((t.tier.span, lost)),
            (held, _) => held,
        }
    }

    /// The file name of sub-filter `index` of `window` in a tier.
    pub(super) fn file_name(tier: &Tier, code: &str, window: i64, index: u32) -> Result<String> {
        file_name(code, tier.span, window, index).ok_or_else(|| Error::WindowUnavailable {
            reason: format!("window {window} of tier {tier} has no file name (year out of range)"),
        })
    }

    /// What the file of sub-filter `index` of `window` in a tier is: its
    /// path, and its size by the chain's plan for that position.
    pub(super) fn new_file(
        &self,
        tier: &Tier,
        code: &str,
        window: i64,
        index: u32,
    ) -> Result<NewFile> {
        let name = Engine::file_name(tier, code, window, index)?;
        if let Some(cost) = self.config.chain_too_costly(tier, index) {
            return Err(Error::config(format!(
                "{}: sub-filter {index} of this window's chain would cost {cost:.0} times the \
                 bits per key of its first (each sub-filter a chain grows has a lower rate, and \
                 past {} times a chain is at its longest), so {}",
                self.seg_path(&name).display(),
                Config::MAX_GROWTH_COST,
                crate::segment::chain_end(tier.kind)
            )));
        }
        let (capacity, rate) = self.config.file_subfilter_plan(tier, index);
        // A table's first sweep day: the tables' day, which a write raised
        // after its clock check, not a fresh clock read that may have
        // jumped since (a future day would become the engine's at reopen);
        // the clock only before the tables took any day (at creation).
        let table = match tier.is_table() {
            true => Some((
                tier.table_days(),
                match self.table_day.load(Ordering::Relaxed) {
                    0 => self.table_today(self.now()?)?,
                    day => day,
                },
            )),
            false => None,
        };
        Ok(NewFile {
            path: self.seg_path(&name),
            kind: tier.kind,
            id: Identity {
                span: tier.span,
                window,
                index,
            },
            seed_fp: crate::hash::seed_fingerprint(self.seed),
            capacity,
            rate,
            write_zeros: self.policy != SyncPolicy::None,
            table,
        })
    }

    /// Creates the file of sub-filter `index` of `window` in a tier.
    pub(super) fn new_subfilter(
        &self,
        tier: &Tier,
        code: &str,
        window: i64,
        index: u32,
    ) -> Result<Arc<SubFilter>> {
        let sub = self.new_file(tier, code, window, index)?.create()?;
        Ok(Arc::new(sub))
    }

    /// Creates a new segment (its sub-filter 0) for `window` of a tier.
    fn new_segment(&self, t: &TierState, window: i64) -> Result<Segment> {
        let sub = self.new_subfilter(&t.tier, &t.code, window, 0)?;
        Ok(Segment {
            window,
            subs: vec![sub],
        })
    }

    /// The rotation protocol (see docs/format.md):
    /// 1. expire: write the manifest without the expired segments (the
    ///    commit point of expiry), then delete their files (snapshots that
    ///    still map them keep reading valid memory);
    /// 2. create the new windows' files (or take those created ahead of
    ///    the boundary, see `ahead`), fsync them and the directory;
    /// 3. write the manifest naming the new set (the commit point) and
    ///    publish it as the new snapshot;
    /// 4. stop writes to every segment that is no longer the newest of its
    ///    tier, wait for the writes in flight, and seal them (in the
    ///    background when `background`).
    ///
    /// Expiry comes first so that a rotation on a nearly full disk frees
    /// the expired windows' space before it asks for the new ones'.
    /// A read-only engine only stops reading expired windows (in memory).
    pub(super) fn rotate(&self, m: &mut Maint, now: i64, background: bool) -> Result<Maintenance> {
        self.swap_rewritten(m)?;
        let cur = self.current.load_full();
        let mut next: Snapshot = (*cur).clone();
        drop(cur);
        let mut done = Maintenance::default();
        self.expire(m, now, &mut next, &mut done)?;
        if !self.read_only {
            self.drop_drained(m, &mut next, now, &mut done)?;
        }
        let mut changes = Changes::default();
        let mut to_seal: Vec<Arc<SubFilter>> = Vec::new();
        // Windows this rotation made itself (none was created ahead).
        let mut fresh: Vec<Arc<SubFilter>> = Vec::new();
        // Held until the publish: no window is created ahead meanwhile.
        let mut slot = self.ahead.lock();
        if !self.read_only {
            let mut made = self.take_made_ahead(m, &mut slot, now);
            fresh = self.open_new_windows(&mut made, &mut next, now, &mut done, &mut changes)?;
            to_seal = plan_seals(&next, &mut done, &mut changes)?;
            // What was made ahead and not taken is deleted here, once the
            // seals are planned (`ahead::Made` drops).
            drop(made);
        }
        self.set_boundaries(&mut next, now)?;
        let before = self.table_day.load(Ordering::Relaxed);
        let (today, day_moved) = self.move_table_day(&next, now)?;
        if day_moved && !self.read_only {
            expired_days(&next, before, today, &mut done);
        }
        set_open_from(&mut next, today, self.config.utc_offset_secs);
        self.store_new_set(m, &next, &changes, day_moved)?;
        let to_sweep = self.plan_sweeps(&mut next, today)?;
        self.publish(next);
        drop(slot);
        ahead::prefault_behind(fresh, &self.stop_prefault, &mut m.prefaulting);
        self.sweep_tables(m, to_sweep, today, background)?;
        self.seal_older(m, to_seal, background)?;
        Ok(done)
    }

    /// A step of `rotate`, expiry: takes the windows past their tier's
    /// retention out of `next` (not the tables: their keys expire by day)
    /// and names them in `done`; unless read-only, stores the manifest
    /// without them, publishes it, then deletes their files.
    fn expire(
        &self,
        m: &mut Maint,
        now: i64,
        next: &mut Snapshot,
        done: &mut Maintenance,
    ) -> Result<()> {
        let mut expired = Vec::new();
        for t in &mut next.tiers {
            if t.tier.is_table() {
                continue; // one table for life: its keys expire by day
            }
            let c = self.window_index(t.tier.span, now)?;
            let keep_from = t.tier.oldest_live(c);
            let n = t.segments.partition_point(|s| s.window < keep_from);
            for seg in &t.segments[..n] {
                done.expired.push(label(t, seg.window));
            }
            expired.extend(t.segments.drain(..n));
        }
        if !self.read_only && !expired.is_empty() {
            // A seal still running holds its window's mapping: done first
            // (it started a window or more ago). So does a prefault thread
            // (a window made moments ago, on a clock that moves fast, or
            // a thread the scheduler has not run yet): stopped.
            self.join_upkeep(m)?;
            self.stop_prefaults(m);
            self.store_manifest(m, next)?;
            // Published before the files go: no new call reads them.
            self.publish(next.clone());
            let paths: Vec<PathBuf> = expired
                .iter()
                .flat_map(|seg| seg.subs.iter().map(|s| s.path().to_path_buf()))
                .collect();
            Engine::release(expired.into_iter().flat_map(|seg| seg.subs).collect());
            self.delete_files("delete expired segment", &paths)?;
        } else {
            drop(expired);
        }
        Ok(())
    }

    /// A step of `rotate`, not on a read-only engine: the files created
    /// ahead (see `ahead::take`) when `now` reached the boundary they were
    /// made for, else none. `slot` is `self.ahead`, which the caller holds
    /// until its publish.
    fn take_made_ahead(
        &self,
        m: &mut Maint,
        slot: &mut Option<ahead::Ahead>,
        now: i64,
    ) -> ahead::Made {
        // Files created ahead for this boundary; any not taken by
        // `open_new_windows` (the clock skipped their window) are deleted. Those of a
        // boundary not reached yet (a `flush` or `maintain` before it)
        // stay for the rotation at it: no write would make them again.
        match now >= self.ahead_for.load(Ordering::Relaxed) {
            true => ahead::take(slot, &mut m.prefaulting),
            false => ahead::Made::default(),
        }
    }

    /// A step of `rotate`, not on a read-only engine: gives each tier whose
    /// newest window is older than `now`'s the window for `now`, taking
    /// its file from `made` or creating one, then fsyncs `seg/`. Names
    /// them in `done`, and returns the files it created (to prefault after
    /// the publish).
    fn open_new_windows(
        &self,
        made: &mut ahead::Made,
        next: &mut Snapshot,
        now: i64,
        done: &mut Maintenance,
        changes: &mut Changes,
    ) -> Result<Vec<Arc<SubFilter>>> {
        let mut fresh = Vec::new();
        for (ti, t) in next.tiers.iter_mut().enumerate() {
            let c = self.tier_window(&t.tier, now)?;
            if t.segments.last().is_none_or(|s| s.window < c) {
                let seg = match made.take(ti, c) {
                    Some(sub) => Segment {
                        window: c,
                        subs: vec![sub],
                    },
                    None => {
                        let seg = self.new_segment(t, c)?;
                        fresh.extend(seg.subs.iter().cloned());
                        seg
                    }
                };
                done.opened.push(label(t, c));
                t.segments.push(seg);
                changes.created = true;
                changes.counting_changed |= t.tier.kind.needs_shadow();
            }
        }
        if changes.created {
            crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
        }
        Ok(fresh)
    }

    /// A step of `rotate`: when the next boundary comes (`next_boundary`),
    /// when to start creating the windows it opens (`ahead_from`), and
    /// which tier reaches furthest back (`full_tier`).
    fn set_boundaries(&self, next: &mut Snapshot, now: i64) -> Result<()> {
        let off = self.config.utc_offset_secs;
        // Which tier reaches furthest back, and when the next boundary comes.
        let mut boundary = i64::MAX;
        let mut ahead_from = i64::MAX;
        let mut oldest = i64::MAX;
        for (ti, t) in next.tiers.iter().enumerate() {
            let (start, end) = self.tier_reach(t, now)?;
            if let Some(end) = end {
                if end < boundary {
                    boundary = end;
                    let span = if t.tier.is_table() {
                        window::Span::Day
                    } else {
                        t.tier.span
                    };
                    let c = self.window_index(span, now)?;
                    let start = window::start(span, c, off).unwrap_or(end);
                    ahead_from = end - ahead::lead(end - start);
                }
            }
            if start < oldest {
                oldest = start;
                next.full_tier = ti;
            }
        }
        next.next_boundary = boundary;
        next.ahead_from = ahead_from;
        Ok(())
    }

    /// A step of `rotate`: the tables' day at `now`, and whether it moved
    /// past the engine's (which then takes it).
    fn move_table_day(&self, next: &Snapshot, now: i64) -> Result<(u32, bool)> {
        // The tables' day only moves forward (see `Engine::table_today`),
        // and the manifest names a new one before any write of it lands.
        let today = self.table_today(now)?;
        let tables = next.tiers.iter().any(|t| t.tier.is_table());
        let day_moved = tables && today > self.table_day.load(Ordering::Relaxed);
        if day_moved {
            self.table_day.store(today, Ordering::Relaxed);
        }
        Ok((today, day_moved))
    }

    /// A step of `rotate`, the commit point of the new set: a checkpoint when
    /// a counting window changed under the log, else the manifest when a
    /// window was opened or unsealed or the tables' day moved.
    fn store_new_set(
        &self,
        m: &mut Maint,
        next: &Snapshot,
        changes: &Changes,
        day_moved: bool,
    ) -> Result<()> {
        // A counting window under the log needs its shadow copy (and a
        // reopened one its state) in a checkpoint before it takes writes;
        // a Bloom window needs only the manifest naming it (replaying a
        // Bloom insert twice changes nothing).
        let checkpoint = self.wal.is_some() && changes.counting_changed;
        if checkpoint {
            // The windows about to be sealed are not sealed on disk yet, so
            // the checkpoint msyncs them and copies their counting bodies
            // like any open window: what the log holds for them up to here
            // is in them. They are sealed only after the publish (in
            // `rotate`; a writer of the current snapshot may still write
            // them until then), and recovery skips them only once their
            // seal is durable.
            self.checkpoint(m, next)?;
        } else if changes.created || changes.unsealed || (day_moved && !self.read_only) {
            self.store_manifest(m, next)?;
        }
        Ok(())
    }

    /// A step of `rotate`: sets the tables' day in `next`, and (unless
    /// read-only) sweeps now each table left alone past its sweep interval;
    /// returns the tables to sweep after the publish.
    fn plan_sweeps(&self, next: &mut Snapshot, today: u32) -> Result<Vec<Arc<SubFilter>>> {
        // Fingerprint tables expire by day: sweep them when the day moved.
        // One left alone past the sweep interval is caught up before any
        // later call reads it (a dead tag would soon read as live again);
        // a daily sweep runs beside the lookups and inserts.
        let mut to_sweep = Vec::new();
        for t in next.tiers.iter_mut().filter(|t| t.tier.is_table()) {
            t.day = Some(i64::from(today));
        }
        if !self.read_only {
            for t in next.tiers.iter().filter(|t| t.tier.is_table()) {
                let interval = crate::fingerprint::max_sweep_interval(t.tier.table_days());
                for s in t.segments.iter().flat_map(|seg| &seg.subs) {
                    match s.swept() {
                        Some(d) if today >= d.saturating_add(interval) => {
                            // Writers wait for this rotation: no insert
                            // of a later day runs meanwhile.
                            s.sweep(today, || today)?;
                        }
                        Some(d) if today > d => to_sweep.push(Arc::clone(s)),
                        // Read once by this process, so that it can tell
                        // when an older table of the chain has drained.
                        Some(_) if s.table_unscanned() && !is_tail(&t.segments, s) => {
                            to_sweep.push(Arc::clone(s))
                        }
                        _ => {}
                    }
                }
            }
        }
        Ok(to_sweep)
    }

    /// A step of `rotate`, after the publish: sweeps the tables
    /// `plan_sweeps` listed, on a background thread when `background`.
    fn sweep_tables(
        &self,
        m: &mut Maint,
        to_sweep: Vec<Arc<SubFilter>>,
        today: u32,
        background: bool,
    ) -> Result<()> {
        if !to_sweep.is_empty() {
            if background {
                self.sweep_in_background(m, to_sweep, today);
            } else {
                let clock = self.day_clock(today);
                for s in &to_sweep {
                    s.sweep(today, &clock)?;
                }
            }
        }
        Ok(())
    }

    /// The last step of `rotate`: stops writes to the windows `plan_seals`
    /// listed and seals them on a background thread when `background`
    /// (and not read-only), else seals them now.
    fn seal_older(
        &self,
        m: &mut Maint,
        to_seal: Vec<Arc<SubFilter>>,
        background: bool,
    ) -> Result<()> {
        if !to_seal.is_empty() {
            if background && !self.read_only {
                self.stop_writes(&to_seal);
                self.seal_in_background(m, to_seal);
            } else {
                self.seal_now(&to_seal)?;
            }
        }
        Ok(())
    }

    /// Drops the oldest tables of a fingerprint chain once every slot they
    /// hold has expired (the newest table, which takes new keys, stays):
    /// a burst that grew the chain gives its space back a retention later.
    /// Writers are held off (every stripe) from the check to the publish,
    /// so no insert of the old snapshot writes a table after it was found
    /// drained; the manifest without it is the commit point, and its file
    /// is deleted after (Linux keeps a mapped file's blocks until the last
    /// snapshot holding it lets go). Only a prefix of the chain is dropped,
    /// so the manifest names the rest by their first position.
    fn drop_drained(
        &self,
        m: &mut Maint,
        next: &mut Snapshot,
        now: i64,
        done: &mut Maintenance,
    ) -> Result<()> {
        let today = self.table_today(now)?;
        let due = |seg: &Segment| seg.subs.len() > 1 && seg.subs[0].table_drained(today);
        let chains = |next: &Snapshot| {
            next.tiers
                .iter()
                .filter(|t| t.tier.is_table())
                .filter_map(|t| t.segments.last())
                .any(due)
        };
        if !chains(next) {
            return Ok(());
        }
        // A sweep still running reads the table (harmless), but finishing
        // it first keeps its thread from outliving the file.
        self.join_upkeep(m)?;
        let all = self.stripes.lock_all();
        let mut dropped = Vec::new();
        for t in next.tiers.iter_mut().filter(|t| t.tier.is_table()) {
            let Some(seg) = t.segments.last_mut() else {
                continue;
            };
            let before = dropped.len();
            while due(seg) {
                let sub = seg.subs.remove(0);
                done.expired
                    .push(format!("{} table {}", t.tier, sub.header().id.index));
                dropped.push(sub);
            }
            // A `Full` the newest table answered while the chain was at its
            // longest grew nothing, and its keys may have expired since:
            // the chain grows again on its next `Full`, not on that one.
            if dropped.len() > before {
                if let Some(tail) = seg.tail() {
                    tail.clear_full();
                }
            }
        }
        if dropped.is_empty() {
            return Ok(());
        }
        self.store_manifest(m, next)?;
        self.publish(next.clone());
        drop(all);
        let paths: Vec<PathBuf> = dropped.iter().map(|s| s.path().to_path_buf()).collect();
        Engine::release(dropped);
        self.delete_files("delete drained table", &paths)
    }

    /// Deletes sub-filter files that the manifest no longer names (gone
    /// already is fine), then makes the deletions durable (fsync `seg/`).
    fn delete_files(&self, op: &'static str, paths: &[PathBuf]) -> Result<()> {
        for p in paths {
            crate::file::check(op, p)?;
            match fs::remove_file(p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(Error::io(op, p, e)),
            }
        }
        crate::file::fsync_dir(&self.dir.join(SEG_DIR))
    }

    /// No write reaches `subs` once this returns: stops new ones, then
    /// waits for those in flight (writers check the generation and the
    /// state under their stripe).
    fn stop_writes(&self, subs: &[Arc<SubFilter>]) {
        for s in subs {
            s.stop_writes();
        }
        drop(self.stripes.lock_all());
    }

    /// Seals sub-filters, in this thread.
    fn seal_now(&self, subs: &[Arc<SubFilter>]) -> Result<()> {
        self.stop_writes(subs);
        for s in subs {
            s.seal()?;
        }
        Ok(())
    }

    /// Seals on a thread of its own: lookups and writes go on meanwhile.
    /// A failure latches like any write error; a crash before the seal is
    /// durable leaves a window that the next open seals. No thread to be
    /// had: the next `flush`, `close` or open seals.
    fn seal_in_background(&self, m: &mut Maint, subs: Vec<Arc<SubFilter>>) {
        let rewritten = Arc::clone(&self.rewritten);
        self.in_background(m, "timebloom-seal", move || {
            subs.iter().try_for_each(|s| s.seal())?;
            // Then each large body again, in large pages, swapped in by the
            // next write (or rotation, flush, backfill: `swap_rewritten`).
            for s in &subs {
                let r = s.rewrite_sealed();
                if s.replaced() {
                    rewritten.store(true, Ordering::Release);
                }
                r?;
            }
            Ok(())
        });
    }

    /// Sweeps fingerprint tables on a thread of its own (at nice 10, like
    /// seals): lookups and inserts go on meanwhile; the next `flush`,
    /// `close` or expiry waits for it. A failure (writing the header)
    /// latches like a seal's. No thread to be had: the next rotation sweeps.
    fn sweep_in_background(&self, m: &mut Maint, subs: Vec<Arc<SubFilter>>, today: u32) {
        let clock = self.day_clock(today);
        self.in_background(m, "timebloom-sweep", move || {
            subs.iter()
                .try_for_each(|s| s.sweep(today, &clock).map(drop))
        });
    }

    /// Runs `work` on a thread of its own at nice 10, joined by the next
    /// `flush`, `close` or expiry (`Maint::upkeep`); an I/O error latches
    /// the engine like a write's. Nothing runs when no thread can start.
    fn in_background(
        &self,
        m: &mut Maint,
        name: &str,
        work: impl FnOnce() -> Result<()> + Send + 'static,
    ) {
        let failed = Arc::clone(&self.failed);
        let spawned = ahead::spawn_background(name, move || {
            let r = work();
            if matches!(r, Err(Error::Io { .. })) {
                failed.store(true, Ordering::Relaxed);
            }
            r
        });
        if let Ok(h) = spawned {
            m.upkeep.push(h);
        }
    }

    /// The day a daily sweep reads the tables' tags against, read again
    /// under every stripe it takes (`Table::sweep_by`): the newest day the
    /// tables took (`Engine::table_today`), at least `fallback`. Every
    /// write of a later day than the sweep's started after the rotation
    /// that raised it, so the sweep never takes it for an expired one. Not
    /// the clock itself: a clock that jumps while a sweep runs (one the
    /// next write refuses as a jump, or that is set right again) would
    /// clear the newest keys, whose tags read as expired on the ring of
    /// days by a day months ahead.
    fn day_clock(&self, fallback: u32) -> impl Fn() -> u32 + Send + 'static {
        let day = Arc::clone(&self.table_day);
        move || day.load(Ordering::Relaxed).max(fallback)
    }

    /// Stops the threads faulting in new windows and waits for them (each
    /// stops within one 8 MiB step): they hold the windows they fault in,
    /// whose space an expiry returns before it creates new windows. Under
    /// the maintenance lock (`m`), which every spawner and `close` hold:
    /// after this only `close` sets the flag. A window left part faulted
    /// takes its first-write faults at its inserts instead.
    fn stop_prefaults(&self, m: &mut Maint) {
        if m.prefaulting.is_empty() {
            return;
        }
        self.stop_prefault.store(true, Ordering::Relaxed);
        for h in m.prefaulting.drain(..) {
            let _ = h.join();
        }
        self.stop_prefault.store(false, Ordering::Relaxed);
    }

    /// Waits for the seals and sweeps running in the background; the first
    /// error.
    pub(super) fn join_upkeep(&self, m: &mut Maint) -> Result<()> {
        let mut r = Ok(());
        for h in m.upkeep.drain(..) {
            let out = h.join().unwrap_or_else(|_| {
                Err(Error::Io {
                    op: "seal or sweep segments",
                    path: self.dir.join(SEG_DIR),
                    source: std::io::Error::other("a background seal or sweep panicked"),
                })
            });
            if r.is_ok() {
                r = out;
            }
        }
        r
    }

    /// Swaps every sub-filter whose file a sealing thread replaced by a
    /// copy in large pages (`SubFilter::rewrite_sealed`) for one opened on
    /// the copy, and publishes the result; readers move to the new
    /// mappings at their next call, and the old ones go with the last
    /// snapshot that holds them. The maintenance lock is held (`_m`), and
    /// every caller reads the current snapshot after this: a replaced
    /// sub-filter, whose file is unlinked, must never be unsealed and
    /// written again (its `unseal` refuses).
    pub(super) fn swap_rewritten(&self, _m: &mut Maint) -> Result<()> {
        self.rewritten.store(false, Ordering::Relaxed);
        let cur = self.current.load_full();
        let replaced = cur
            .tiers
            .iter()
            .flat_map(|t| &t.segments)
            .flat_map(|seg| &seg.subs)
            .any(|s| s.replaced());
        if !replaced {
            return Ok(());
        }
        let mut next = (*cur).clone();
        drop(cur);
        let mut old = Vec::new();
        for seg in next.tiers.iter_mut().flat_map(|t| &mut t.segments) {
            for sub in seg.subs.iter_mut().filter(|s| s.replaced()) {
                let h = sub.header();
                let copy = Arc::new(SubFilter::open(sub.path(), h.id, h.seed_fp, false)?);
                old.push(std::mem::replace(sub, copy));
            }
        }
        self.publish(next);
        // On the release thread even when no snapshot holds them any more:
        // the caller may be a writer (`swap_soon`), and unmapping a large
        // window in 4 KiB pages takes milliseconds.
        Engine::release_later(old);
        Ok(())
    }

    /// Swaps in the copies a sealing thread made (`swap_rewritten`), from
    /// a writer: only when one is waiting, and only if maintenance is not
    /// busy (a later write, or the next rotation, does it then). A failure
    /// to open a copy latches the engine like a failed write: the window's
    /// old sub-filter can no longer take writes.
    #[inline]
    pub(super) fn swap_soon(&self) {
        if self.rewritten.load(Ordering::Acquire) {
            self.swap_now();
        }
    }

    /// [`Engine::swap_soon`]'s work, out of line (rarely needed).
    #[cold]
    #[inline(never)]
    fn swap_now(&self) {
        if let Some(mut m) = self.maint.try_lock() {
            let r = self.swap_rewritten(&mut m);
            let _ = self.latch(r);
        }
    }

    /// Appends a sub-filter to every open segment (the newest window of
    /// each tier) whose newest one is full.
    pub(super) fn grow(&self) -> Result<()> {
        self.grow_windows(None)
    }

    /// [`Engine::grow`] for the windows `targets` names (`(tier, window)`
    /// pairs, as a backfill writes them), or the open ones for `None`.
    /// Only those: a past window whose chain a backfill took to its longest
    /// refuses the backfills of keys it does not hold, not the growth of
    /// the open windows (which its error stopped for every tier).
    pub(super) fn grow_windows(&self, targets: Option<&[(usize, i64)]>) -> Result<()> {
        let mut m = self.maint.lock();
        let cur = self.current.load_full();
        self.check_usable(&cur)?;
        let r = self.grow_locked(&mut m, &cur, targets);
        self.latch(r)
    }

    fn grow_locked(
        &self,
        m: &mut Maint,
        cur: &Snapshot,
        targets: Option<&[(usize, i64)]>,
    ) -> Result<()> {
        let mut next = cur.clone();
        let mut grown = false;
        let mut counting = false;
        let mut fresh: Vec<Arc<SubFilter>> = Vec::new();
        for (ti, t) in next.tiers.iter_mut().enumerate() {
            let newest = t.segments.last().map(|s| s.window);
            for seg in &mut t.segments {
                let wanted = match targets {
                    None => Some(seg.window) == newest,
                    Some(targets) => targets.contains(&(ti, seg.window)),
                };
                if !wanted || !growth_due(seg) {
                    continue;
                }
                if seg.subs.len() >= MAX_CHAIN {
                    // A full tail that may not grow: refused, not filled
                    // past its plan (see `growth_due`).
                    for made in &fresh {
                        let _ = fs::remove_file(made.path());
                    }
                    return Err(chain_at_longest(&t.tier, seg));
                }
                let index = seg.next_index();
                let sub = match self.new_subfilter(&t.tier, &t.code, seg.window, index) {
                    Ok(sub) => sub,
                    Err(e) => {
                        // No manifest names the files this call made: they
                        // go, or the next growth would find them there, fail
                        // on I/O and latch the engine.
                        for made in &fresh {
                            let _ = fs::remove_file(made.path());
                        }
                        return Err(e);
                    }
                };
                fresh.push(Arc::clone(&sub));
                seg.subs.push(sub);
                grown = true;
                counting |= t.tier.kind.needs_shadow();
            }
        }
        if !grown {
            return Ok(());
        }
        // Nothing is published unless a manifest names the new files, so a
        // failure leaves no write where a reopen won't look.
        crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
        if self.wal.is_some() && counting {
            self.checkpoint(m, &next)?;
        } else {
            self.store_manifest(m, &next)?;
        }
        // A counting (or table) chain is published under every stripe: a
        // writer that checked the old chain under its stripe writes before
        // the new tail takes a key, and later ones find the generation
        // moved. A write into the old tail after a newer key went to the
        // new one could turn that key into a false positive of the old
        // tail, whose remove would then take from the old tail (the oldest
        // holder) and leave the new one's count behind.
        let all = counting.then(|| self.stripes.lock_all());
        self.publish(next);
        drop(all);
        ahead::prefault_behind(fresh, &self.stop_prefault, &mut m.prefaulting);
        Ok(())
    }

    /// Creates or unseals the segments a backfill at `t` needs.
    pub(super) fn open_windows(&self, now: i64, t: i64) -> Result<()> {
        let mut m = self.maint.lock();
        self.check_usable(&self.current.load())?;
        let r = (|| {
            // A window being sealed in the background finishes first, and
            // one whose file it replaced is swapped for the copy before it
            // is unsealed.
            self.join_upkeep(&mut m)?;
            self.swap_rewritten(&mut m)?;
            let mut next = (*self.current.load_full()).clone();
            let targets = self.backfill_targets(&next, now, t)?;
            let mut created = false;
            let mut unsealed = false;
            for (ti, w) in targets {
                let ts = &next.tiers[ti];
                match ts.segments.binary_search_by_key(&w, |s| s.window) {
                    Ok(i) => {
                        for s in &ts.segments[i].subs {
                            unsealed |= s.unseal()?;
                        }
                    }
                    Err(i) => {
                        let seg = self.new_segment(ts, w)?;
                        next.tiers[ti].segments.insert(i, seg);
                        created = true;
                    }
                }
            }
            if created {
                crate::file::fsync_dir(&self.dir.join(SEG_DIR))?;
            }
            if self.wal.is_some() && (created || unsealed) {
                // A reopened counting window needs its shadow copy before
                // it takes writes, and a new one a manifest that names it.
                self.checkpoint(&mut m, &next)?;
            } else if created {
                self.store_manifest(&m, &next)?;
            }
            if created || unsealed {
                self.publish(next);
            }
            Ok(())
        })();
        self.latch(r)
    }

    /// `(tier, window)` pairs that a backfill at `t` writes.
    pub(super) fn backfill_targets(
        &self,
        snap: &Snapshot,
        now: i64,
        t: i64,
    ) -> Result<Vec<(usize, i64)>> {
        let mut out = Vec::new();
        for (ti, ts) in snap.tiers.iter().enumerate() {
            if ts.tier.is_table() {
                // One table: any day it keeps, none in the future.
                let (day, today) = (self.day_of(t)?, self.table_today(now)?);
                if day > today {
                    return Err(Error::WindowUnavailable {
                        reason: format!(
                            "instant {} lies in a future day of tier {}",
                            crate::clock::rfc3339(t),
                            ts.tier
                        ),
                    });
                }
                if today - day <= ts.tier.table_days() {
                    out.push((ti, 0));
                }
                continue;
            }
            let cur = self.window_index(ts.tier.span, now)?;
            let w = self.window_index(ts.tier.span, t)?;
            // The newest window: the clock's, or a later one made before
            // the clock stepped back behind it (see docs/design.md,
            // "Time"), which inserts still go to and which holds the
            // inserts made at its instants (as a table takes any day up to
            // its newest).
            let newest = ts.segments.last().map_or(cur, |s| s.window.max(cur));
            if w > newest {
                return Err(Error::WindowUnavailable {
                    reason: format!(
                        "instant {} lies in a future window of tier {}",
                        crate::clock::rfc3339(t),
                        ts.tier
                    ),
                });
            }
            // The live windows are those the newest one keeps: a clock
            // stepped back behind it brings back no window its rotation
            // expired, so a tier never holds more windows than its
            // retention (a lookup reads them all, each sized for its share
            // of the rate).
            if w >= ts.tier.oldest_live(newest) {
                out.push((ti, w));
            }
        }
        if out.is_empty() {
            return Err(Error::WindowUnavailable {
                reason: format!(
                    "instant {} is older than every tier keeps",
                    crate::clock::rfc3339(t)
                ),
            });
        }
        Ok(out)
    }
}

/// A sub-filter file to create (see `SubFilter::create`): everything it
/// needs, so a thread of its own can create it (`ahead`).
pub(super) struct NewFile {
    pub(super) path: PathBuf,
    kind: Kind,
    id: Identity,
    seed_fp: u64,
    capacity: u64,
    rate: f64,
    write_zeros: bool,
    table: Option<(u32, u32)>,
}

impl NewFile {
    pub(super) fn create(&self) -> Result<SubFilter> {
        SubFilter::create(
            &self.path,
            self.kind,
            self.id,
            self.seed_fp,
            self.capacity,
            self.rate,
            self.write_zeros,
            self.table,
        )
    }
}

/// True when an open segment's newest sub-filter is full. Writers grow such
/// a chain before they write (so no key is recorded by a call that then
/// fails on growth).
///
/// A Bloom or counting chain at its longest ([`MAX_CHAIN`]) is still due:
/// its growth is an error ([`chain_at_longest`]), so that no key goes into
/// a full tail, whose rate rises with every key past its plan (such a
/// chain took every later key, and answered "present" for every key once
/// its tail filled). A fingerprint chain at its longest is not due: an
/// insert that finds no room in its newest table says so itself.
#[inline]
pub(super) fn growth_due(seg: &Segment) -> bool {
    seg.needs_growth()
        && !seg.is_sealed()
        && (seg.subs.len() < MAX_CHAIN
            || seg
                .tail()
                .is_some_and(|s| s.header().kind != Kind::Fingerprint))
}

/// The error of a write that needs another sub-filter in a Bloom or
/// counting chain that holds [`MAX_CHAIN`] already: nothing is written.
/// Every later write of a key the window does not hold gets it too (in a
/// counting window every insert: each one counts), until the window ends;
/// the plan is fixed at create, so the message says so.
#[cold]
fn chain_at_longest(tier: &Tier, seg: &Segment) -> Error {
    let path = seg.tail().map(|s| s.path().display().to_string());
    Error::config(format!(
        "{}: window {}'s chain holds {MAX_CHAIN} sub-filters, the most it may, and its \
         newest is full: another key would raise its false-positive rate past the configured \
         one, so {} (the plan is fixed at create: for this many keys, create an engine with \
         more planned keys per day or a larger growth factor)",
        path.unwrap_or_default(),
        window_name(tier, seg.window),
        crate::segment::after_chain_end(tier.kind)
    ))
}

/// What the windows `rotate` opened or unsealed changed: decides whether
/// it stores a checkpoint, the manifest or nothing (`store_new_set`).
#[derive(Default)]
struct Changes {
    /// A tier's window for now was opened.
    created: bool,
    /// A newest window sealed on disk was unsealed.
    unsealed: bool,
    /// A counting tier (one with a shadow copy) opened or unsealed one.
    counting_changed: bool,
}

/// A step of `rotate`, not on a read-only engine: unseals each tier's
/// newest window and returns the sub-filters of the older ones not sealed
/// on disk (to seal after the publish), naming in `done` those not sealed
/// in memory either.
fn plan_seals(
    next: &Snapshot,
    done: &mut Maintenance,
    changes: &mut Changes,
) -> Result<Vec<Arc<SubFilter>>> {
    let mut to_seal = Vec::new();
    for t in &next.tiers {
        let newest = t.segments.len().saturating_sub(1);
        for (i, seg) in t.segments.iter().enumerate() {
            if i == newest {
                // The newest segment takes inserts: after a crash
                // between sealing and the manifest it may be sealed.
                for s in &seg.subs {
                    if s.unseal()? {
                        changes.unsealed = true;
                        changes.counting_changed |= t.tier.kind.needs_shadow();
                    }
                }
            } else if seg.subs.iter().any(|s| !s.sealed_on_disk()) {
                // Also reseals what a backfill or remove reopened.
                if !seg.is_sealed() {
                    done.sealed.push(label(t, seg.window));
                }
                to_seal.extend(seg.subs.iter().cloned());
            }
        }
    }
    Ok(to_seal)
}

/// A step of `rotate`: sets `next.open_from`, from each tier's newest
/// window and the tables' day `today` (`off`, the configured UTC offset).
fn set_open_from(next: &mut Snapshot, today: u32, off: i32) {
    // The latest start among the windows writes of this snapshot go to
    // (each tier's newest, and the tables' day): every one of them
    // holds it, so a write made while the clock is behind it is logged
    // at it, and replay finds the windows the write went to.
    next.open_from = next
        .tiers
        .iter()
        .filter_map(|t| match t.tier.is_table() {
            true => window::start(window::Span::Day, i64::from(today), off),
            false => window::start(t.tier.span, t.segments.last()?.window, off),
        })
        .max()
        .unwrap_or(i64::MIN);
}

/// A step of `rotate`: names in `done` the days whose keys each fingerprint
/// tier's table let go when its day moved from `before` to `today` (those
/// it kept on `before` and keeps no longer): one entry per tier, a range
/// however many days (`365d:fingerprint days 20260105 to 20260109 (5
/// days)`). None when the tables took no day before (at creation).
fn expired_days(next: &Snapshot, before: u32, today: u32, done: &mut Maintenance) {
    if before == 0 || today <= before {
        return;
    }
    let day =
        |d: u32| window::label(window::Span::Day, i64::from(d)).unwrap_or_else(|| d.to_string());
    for t in next.tiers.iter().filter(|t| t.tier.is_table()) {
        // Kept on day `d`: the days `d - (retention - 1) ..= d`.
        let keep = t.tier.table_days();
        let first = before.saturating_sub(keep);
        let Some(last) = today.checked_sub(keep + 1) else {
            continue;
        };
        let last = last.min(before);
        if last < first {
            continue;
        }
        let n = last - first + 1;
        done.expired.push(match n {
            1 => format!("{} day {}", t.tier, day(first)),
            _ => format!("{} days {} to {} ({n} days)", t.tier, day(first), day(last)),
        });
    }
}

/// The name `Maintenance` gives window `w` of a tier.
fn label(t: &TierState, w: i64) -> String {
    window_name(&t.tier, w)
}

/// Whether `s` takes a chain's new keys (the newest sub-filter of the
/// tier's newest segment).
fn is_tail(segments: &[Segment], s: &Arc<SubFilter>) -> bool {
    segments
        .last()
        .and_then(|seg| seg.subs.last())
        .is_some_and(|t| Arc::ptr_eq(t, s))
}

/// The span and index of a tier's newest window: for a fingerprint tier,
/// the day of its last rotation (or, before one, of its last sweep).
fn newest_window(t: &TierState) -> Option<(window::Span, i64)> {
    let newest = t.segments.last()?;
    if t.tier.is_table() {
        let swept = newest.subs.iter().filter_map(|s| s.swept()).max();
        let day = t.day.or(swept.map(i64::from))?;
        return Some((window::Span::Day, day));
    }
    Some((t.tier.span, newest.window))
}
