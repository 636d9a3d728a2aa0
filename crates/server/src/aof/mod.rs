//! The append-only log on disk: one file per shard, written by the shard's
//! own core with no lock (`<dir>/<appenddirname>/<appendfilename>.<i>-of-<n>`).
//!
//! After shard work (a batch, a mesh job, a transaction step) the core
//! drains the funnel's pending changes into records (see
//! `ringdb_engine::persist::aof`) and writes them; with `appendfsync always`
//! it also syncs them then, so one fsync covers every write of that unit of
//! work. Batches (the path of single-shard commands) go further: their
//! records are written without a sync and their replies wait for a group
//! commit, a task that lets every other ready task of the core run first
//! and then syncs once for all of them (`Core::after_log_sync`), as Redis
//! syncs once per event-loop turn. Every path that runs writes on a shard (batches,
//! split and gathered cross-shard commands, transaction steps, whole-shard
//! commands, expiry) does this before its reply leaves the shard, through
//! `Core::publish_changes` or the batch's completion. `everysec`
//! syncs once a second from a timer; `no` leaves syncing to the kernel.
//!
//! Start-up replays each shard's log (a torn last record, or a transaction
//! the log ends inside, is cut off when `aof-load-truncated` is yes, and
//! stops start-up otherwise; other damage stops start-up, naming
//! `ringdb check-aof`, which checks and fixes logs offline); a log exists
//! only for the shard count that wrote it. BGREWRITEAOF, the automatic
//! rewrite and turning `appendonly` on replace every log with its shard's
//! state, without stopping the shards ([`rewrite`]).
//!
//! Cross-shard commands (atomic splits such as MSET, gathered commands such
//! as RENAME or SUNIONSTORE across shards) mark their part in each shard's
//! log with a transaction id and the number of parts; at start-up a part is
//! replayed only when every part's log has it whole, so a crash between two
//! shards' writes never leaves half of one. A single command that changes
//! several keys on one shard (MSET, RENAME, a script) is a transaction of
//! one part. MULTI/EXEC holds back what its commands change on each shard
//! (other clients' writes to other keys run between its steps) and logs it
//! as one part per shard it could write when it ends, before its reply:
//! after a crash an EXEC is there whole or not at all.

pub mod rewrite;

use crate::config::Config;
use crate::node::Core;
use ringdb_engine::families::dump::load_limits;
use ringdb_engine::persist::aof::{self, LogState};
use ringdb_engine::shard::now_ms;
use ringdb_engine::Shard;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering::Relaxed;
use tracing::{error, info, warn};

/// When the log is synced to disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fsync {
    Always,
    EverySec,
    No,
}

impl Fsync {
    pub fn from_config(config: &Config) -> Fsync {
        match config.get("appendfsync") {
            Some("always") => Fsync::Always,
            Some("no") => Fsync::No,
            _ => Fsync::EverySec,
        }
    }
}

/// One shard's open log.
pub struct AofWriter {
    file: File,
    pub path: PathBuf,
    pub fsync: Fsync,
    /// Written since the last sync.
    unsynced: bool,
    /// Under `appendfsync always`, write without syncing: the caller's
    /// replies wait for the group commit ([`Core::after_log_sync`]).
    defer_sync: bool,
    buf: Vec<u8>,
    /// Bytes in the file, and right after its last rewrite
    /// (`auto-aof-rewrite-percentage` compares them).
    pub size: u64,
    pub base_size: u64,
}

impl AofWriter {
    /// Bytes the write buffer holds (MEMORY STATS `aof.buffer`).
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// A writer appending to `file`, which holds `size` bytes.
    fn new(file: File, path: PathBuf, fsync: Fsync, size: u64) -> Self {
        AofWriter {
            file,
            path,
            fsync,
            unsynced: false,
            defer_sync: false,
            buf: Vec::new(),
            size,
            base_size: size,
        }
    }
}

/// The log file of shard `i` of `n`.
pub fn log_path(config: &Config, shard: usize, shards: usize) -> PathBuf {
    log_dir(config).join(format!(
        "{}.{}-of-{}",
        config.get("appendfilename").unwrap_or("appendonly.aof"),
        shard,
        shards
    ))
}

fn log_dir(config: &Config) -> PathBuf {
    Path::new(config.get("dir").unwrap_or("./"))
        .join(config.get("appenddirname").unwrap_or("appendonlydir"))
}

/// Whether logs exist for `shards` shards; an error when logs of another
/// shard count are there (their keys would land on the wrong shards).
pub fn logs_exist(config: &Config, shards: usize) -> Result<bool, String> {
    let dir = log_dir(config);
    let Ok(entries) = std::fs::read_dir(&dir) else { return Ok(false) };
    let prefix = format!("{}.", config.get("appendfilename").unwrap_or("appendonly.aof"));
    let mut found = false;
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = name.strip_prefix(&prefix) else { continue };
        let Some((_, count)) = rest.split_once("-of-") else { continue };
        if count.parse::<usize>().ok() != Some(shards) {
            return Err(format!(
                "the append-only logs in {} were written by {count} shards: start with --shards {count}",
                dir.display()
            ));
        }
        found = true;
    }
    Ok(found)
}

/// The cross-shard transactions to replay: every part of which is in the
/// logs, or complete before a rewrite point (the others are left out of
/// the replay: see `ringdb_engine::persist::aof::Tally`).
pub type Committed = std::collections::HashSet<u64>;

pub fn committed_transactions(config: &Config, shards: usize) -> Result<Committed, String> {
    let mut tally = aof::Tally::default();
    for i in 0..shards {
        let path = log_path(config, i, shards);
        let Ok(data) = std::fs::read(&path) else { continue };
        tally.add(&aof::committed_parts(&data).map_err(|e| bad_format(&path, e))?);
    }
    Ok(tally.committed())
}

/// Marks the start of this shard's part of a cross-shard transaction in
/// its log (nothing when the log is off); [`end_part`] marks its end.
pub fn begin_part(shard: &mut Shard, id: u64, parts: usize) {
    if let Some(log) = &mut shard.state.funnel.log {
        log.events.push(aof::LogEvent::TxBegin(id, parts as u32));
    }
}

pub fn end_part(shard: &mut Shard, id: u64) {
    if let Some(log) = &mut shard.state.funnel.log {
        log.events.push(aof::LogEvent::TxEnd(id));
    }
}

/// How a shard's share of a cross-shard step is logged.
#[derive(Clone, Copy, Debug)]
pub enum PartLog {
    /// As any write (a step that writes nothing).
    Plain,
    /// As part of transaction `id` of `parts` parts, marked around it.
    Own { id: u64, parts: usize },
    /// Inside EXEC `id`: held back until the EXEC ends ([`end_exec`]).
    Exec(u64),
}

/// Runs `work` on `shard`, logging what it changes as `how` says.
pub fn log_part<T>(shard: &mut Shard, how: PartLog, work: impl FnOnce(&mut Shard) -> T) -> T {
    match how {
        PartLog::Plain => work(shard),
        PartLog::Own { id, parts } => {
            begin_part(shard, id, parts);
            let result = work(shard);
            end_part(shard, id);
            result
        }
        PartLog::Exec(id) => {
            let mark = shard.state.funnel.log.as_ref().map(|log| log.mark());
            let result = work(shard);
            if let (Some(mark), Some(log)) = (mark, &mut shard.state.funnel.log) {
                log.hold_since(mark, id);
            }
            result
        }
    }
}

/// EXEC `id` ended: what it changed on this shard goes to the log, as one
/// part of a transaction of `parts` parts (every shard where it could
/// write), or as plain changes (`None`: a shard it only read, where reads
/// may still have deleted expired keys). Then the caller flushes the log.
pub fn end_exec(shard: &mut Shard, id: u64, parts: Option<usize>) {
    if let Some(log) = &mut shard.state.funnel.log {
        log.commit(id, parts.map(|n| n as u32));
    }
}

/// The start-up error for a log damaged before its end.
fn bad_format(path: &Path, e: impl std::fmt::Display) -> String {
    let file = path.display();
    format!(
        "Bad file format reading the append only file {file}: {e}. Make a backup of it, then run `ringdb check-aof {file}` for details, or `ringdb check-aof --fix {file}` to truncate it at the bad record (what follows it is lost)"
    )
}

/// Replays shard `shard`'s log at start-up. A torn last record is cut off
/// (`aof-load-truncated yes`) or stops start-up.
pub fn replay_shard(core: &Core, shards: usize, committed: &Committed) -> Result<usize, String> {
    let config = core.config.borrow().clone();
    let path = log_path(&config, core.id.index(), shards);
    let data = match std::fs::read(&path) {
        Ok(d) => d,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) => {
            return Err(format!(
                "Fatal error: can't open the append log file {}: {e}",
                path.display()
            ))
        }
    };
    let mut shard = core.shard.borrow_mut();
    let shard = &mut *shard;
    let limits = load_limits(&shard.state.settings);
    let report =
        aof::replay(&data, &mut shard.keyspace, &mut shard.state, &limits, now_ms(), &|id| {
            committed.contains(&id)
        })
        .map_err(|e| bad_format(&path, e))?;
    if report.valid_len < data.len() {
        if config.get("aof-load-truncated") != Some("yes") {
            return Err(format!(
                "Unexpected end of file reading the append only file {} (at byte {}). You can: 1) Make a backup of your AOF file, then use `ringdb check-aof --fix {}`. 2) Alternatively you can set the 'aof-load-truncated' configuration option to yes and restart the server.",
                path.display(),
                report.valid_len,
                path.display()
            ));
        }
        warn!(
            "!!! Warning: short read while loading the AOF file {}!!! AOF loaded anyway because aof-load-truncated is enabled; the torn last record (from byte {}) is cut off",
            path.display(),
            report.valid_len
        );
        let file = OpenOptions::new().write(true).open(&path).map_err(|e| e.to_string())?;
        file.set_len(report.valid_len as u64).map_err(|e| e.to_string())?;
        file.sync_all().map_err(|e| e.to_string())?;
    }
    Ok(report.records)
}

/// Writes the shard's log from its current state and opens it: start-up
/// with the log on and no log yet (nothing is served yet, so the shard
/// may stop for it; at run time, see [`rewrite`]).
fn create(core: &Core, shard: &mut Shard) -> Result<(), String> {
    let config = core.config.borrow().clone();
    let path = log_path(&config, core.id.index(), core.shared.shards());
    let dir = log_dir(&config);
    std::fs::create_dir_all(&dir).map_err(|e| format!("can't create {}: {e}", dir.display()))?;
    let bytes = if config.get("aof-use-rdb-preamble") == Some("yes") {
        aof::rewrite_with_preamble(&shard.keyspace, &shard.state, now_ms())
    } else {
        aof::rewrite(&shard.keyspace, &shard.state, now_ms())
    };
    let tmp =
        dir.join(format!("temp-rewriteaof-{}-of-{}.aof", core.id.index(), core.shared.shards()));
    let written = (|| -> std::io::Result<File> {
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        crate::persist::sync_dir(&dir);
        OpenOptions::new().append(true).open(&path)
    })();
    let file = written.map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("can't write the append only file {}: {e}", path.display())
    })?;
    shard.state.funnel.log.get_or_insert_with(LogState::default).reset_selected();
    *core.aof.borrow_mut() =
        Some(AofWriter::new(file, path, Fsync::from_config(&config), bytes.len() as u64));
    Ok(())
}

/// Opens the log for appending after a start-up replay.
pub fn open(core: &Core) -> Result<(), String> {
    let config = core.config.borrow().clone();
    let (index, shards) = (core.id.index(), core.shared.shards());
    rewrite::remove_leftovers(&log_dir(&config), index, shards);
    let path = log_path(&config, index, shards);
    if !path.exists() {
        let mut shard = core.shard.borrow_mut();
        return create(core, &mut shard);
    }
    let file = OpenOptions::new()
        .append(true)
        .open(&path)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let size = file.metadata().map(|m| m.len()).unwrap_or(0);
    core.shard.borrow_mut().state.funnel.log.get_or_insert_with(LogState::default).reset_selected();
    *core.aof.borrow_mut() = Some(AofWriter::new(file, path, Fsync::from_config(&config), size));
    Ok(())
}

/// Stops logging (`appendonly no`), and a rewrite running or scheduled, as
/// Redis does.
pub fn close(core: &Core) {
    let p = &core.shared.persist;
    p.aof_rewrite_scheduled.store(false, Relaxed);
    // Every core closes its log; the first one stops the rewrite. Redis's
    // words, though ringdb's rewrite is no child process.
    if p.aof_rewrite_in_progress.load(Relaxed) && !p.aof_cancel.swap(true, Relaxed) {
        tracing::info!("Killing running AOF rewrite child: the rewrite is stopped");
    }
    if let Some(w) = core.aof.borrow_mut().take() {
        let _ = w.file.sync_data();
    }
    // The replication stream may still want the shard's changes.
    if !core.shared.repl.feeding.load(Relaxed) {
        core.shard.borrow_mut().state.funnel.log = None;
    }
}

impl Core {
    /// Writes the shard's pending log records (and syncs them under
    /// `appendfsync always`). Cheap when there is nothing to write.
    /// The same changes go to the replication stream while it is fed (see
    /// `crate::repl`).
    pub fn flush_log_of(&self, shard: &mut Shard) {
        let Some(log) = shard.state.funnel.log.as_mut() else { return };
        if log.events.is_empty() {
            return;
        }
        let events = std::mem::take(&mut log.events);
        if self.shared.repl.feeding.load(Relaxed) {
            self.shared.repl.feed(self.id.index(), &events, &shard.keyspace);
        }
        let mut aof = self.aof.borrow_mut();
        let Some(w) = aof.as_mut() else { return };
        w.buf.clear();
        aof::write_records(&events, log, &shard.keyspace, now_ms(), &mut w.buf);
        let sync_now = w.fsync == Fsync::Always && !w.defer_sync;
        let ok = w.file.write_all(&w.buf).is_ok() && (!sync_now || w.file.sync_data().is_ok());
        w.size += w.buf.len() as u64;
        w.unsynced = match w.fsync {
            Fsync::Always => !sync_now || w.unsynced,
            Fsync::EverySec => true,
            Fsync::No => false,
        };
        if sync_now {
            // This sync covered what deferred writers left too.
            w.unsynced = false;
        }
        let persist = &self.shared.persist;
        if !ok && persist.aof_last_write_ok.swap(false, Relaxed) {
            error!("Error writing to the AOF file {}", w.path.display());
        } else if ok && !persist.aof_last_write_ok.swap(true, Relaxed) {
            info!("AOF write error looks solved, Redis can write again.");
        }
    }

    pub fn flush_log(&self) {
        if self.aof.borrow().is_none() && !self.shared.repl.feeding.load(Relaxed) {
            return;
        }
        let mut shard = self.shard.borrow_mut();
        self.flush_log_of(&mut shard);
    }

    /// [`publish_shard_changes`](Self::publish_shard_changes) for a batch
    /// whose reply goes through [`after_log_sync`](Self::after_log_sync):
    /// under `appendfsync always` the log is written but not synced yet.
    /// When the changes send anything at once (blocked clients' wakes,
    /// keyspace notifications, tracking invalidations, reactive query
    /// results, hot-key pushes), the log is synced first as usual: nothing
    /// about a write leaves before it is on disk, as in Redis.
    pub fn publish_group_committed(self: &std::rc::Rc<Self>, shard: &mut Shard) {
        let effects = self.take_effects(shard);
        self.set_defer_sync(!effects.sends_at_once());
        self.deliver(shard, effects);
        self.set_defer_sync(false);
    }

    /// [`publish_changes`](Self::publish_changes) for a connection whose
    /// commands ran on this core: returns once the log has their writes on
    /// disk (under `appendfsync always`, with the group commit of
    /// [`after_log_sync`](Self::after_log_sync)).
    pub async fn publish_durably(self: &std::rc::Rc<Self>) {
        self.publish_group_committed(&mut self.shard.borrow_mut());
        if !self.log_sync_pending() {
            return;
        }
        let (tx, rx) = flume::bounded(1);
        self.after_log_sync(Box::new(move || {
            let _ = tx.send(());
        }));
        let _ = rx.recv_async().await;
    }

    fn log_sync_pending(&self) -> bool {
        self.aof.borrow().as_ref().is_some_and(|w| w.fsync == Fsync::Always && w.unsynced)
    }

    fn set_defer_sync(&self, defer: bool) {
        if let Some(w) = self.aof.borrow_mut().as_mut() {
            w.defer_sync = defer && w.fsync == Fsync::Always;
        }
    }

    /// Runs `then` (which sends a reply) once everything written to the
    /// log so far is on disk: at once unless `appendfsync always` left
    /// writes unsynced; otherwise after the next group commit, a task that
    /// first lets every other ready task on this core run (the batches of
    /// other connections add their writes and replies), then syncs once for
    /// all of them, as Redis syncs once per event-loop turn.
    pub fn after_log_sync(self: &std::rc::Rc<Self>, then: Box<dyn FnOnce()>) {
        if !self.log_sync_pending() {
            then();
            return;
        }
        let mut group = self.log_sync.borrow_mut();
        group.waiting.push(then);
        if !group.scheduled {
            group.scheduled = true;
            let core = self.clone();
            glommio::spawn_local(async move {
                futures_lite::future::yield_now().await;
                core.log_sync.borrow_mut().scheduled = false;
                core.sync_log();
                let waiting = std::mem::take(&mut core.log_sync.borrow_mut().waiting);
                for then in waiting {
                    then();
                }
            })
            .detach();
        }
    }

    /// `appendfsync everysec`: syncs what was written in the last second.
    pub fn sync_log(&self) {
        if let Some(w) = self.aof.borrow_mut().as_mut() {
            if w.unsynced {
                w.unsynced = false;
                if w.file.sync_data().is_err() {
                    self.shared.persist.aof_last_write_ok.store(false, Relaxed);
                }
            }
        }
    }
}

/// Replies waiting for a group commit ([`Core::after_log_sync`]).
#[derive(Default)]
pub struct GroupCommit {
    waiting: Vec<Box<dyn FnOnce()>>,
    /// A task will sync and send them.
    scheduled: bool,
}

/// Whether the log has grown enough since its last rewrite for an
/// automatic one (Redis's test: at least `auto-aof-rewrite-min-size`, and
/// grown by `auto-aof-rewrite-percentage` percent of its base; 0 = never).
pub fn needs_rewrite(size: u64, base_size: u64, percentage: u64, min_size: u64) -> bool {
    if percentage == 0 || size < min_size {
        return false;
    }
    let base = base_size.max(1);
    size.saturating_mul(100) / base >= 100 + percentage
}

/// Once a second on every core: the sync of `appendfsync everysec`.
pub async fn sync_loop(core: std::rc::Rc<Core>) {
    loop {
        glommio::timer::sleep(std::time::Duration::from_secs(1)).await;
        core.flush_log();
        core.sync_log();
    }
}

#[cfg(test)]
mod tests {
    use super::needs_rewrite;

    #[test]
    fn automatic_rewrites_follow_redis_thresholds() {
        let mb = 1 << 20;
        assert!(!needs_rewrite(63 * mb, 1, 100, 64 * mb), "below the minimum size");
        assert!(needs_rewrite(64 * mb, 32 * mb, 100, 64 * mb), "doubled");
        assert!(!needs_rewrite(64 * mb, 33 * mb, 100, 64 * mb));
        assert!(!needs_rewrite(u64::MAX / 2, 1, 0, 0), "0% turns it off");
        assert!(needs_rewrite(150, 100, 50, 0) && !needs_rewrite(149, 100, 50, 0));
    }
}
