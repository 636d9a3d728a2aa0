//! Log rewrites that do not stop the shards: BGREWRITEAOF, the automatic
//! rewrite (`auto-aof-rewrite-percentage`, `auto-aof-rewrite-min-size`) and
//! turning `appendonly` on at run time.
//!
//! Every shard's log is rewritten at once, from one logical point taken as
//! a snapshot's is (each whole shard locked for the instant it takes to
//! start, see `crate::persist`), so no cross-shard transaction is half
//! before it. At that point each shard
//! - writes its pending records to its log, then a `REWRITEPOINT` record,
//!   syncs, and notes where the log ends: the tail starts there;
//! - starts a live snapshot of its keyspace (`ringdb_engine::persist::live`)
//!   that a thread of its own writes to a temporary file: the new log's
//!   base, an RDB preamble (or records with `aof-use-rdb-preamble no`).
//!
//! The shard keeps serving, and logging to its old log as before, so a
//! crash at any moment leaves a whole log. When the base is written, the
//! thread appends the old log's tail to it and syncs; then the shard
//! itself, between two commands, appends the last bytes of the tail, syncs
//! them and renames the new log over the old one. Its appends go on there.
//!
//! A crash between two shards' renames leaves some logs new, some old: a
//! transaction before the point may have its part in one shard's new base
//! (without markers) and its other part, marked, in an old log. The
//! `REWRITEPOINT` record says that those were complete at the point, so
//! start-up replays them (`ringdb_engine::persist::aof::Tally`).
//!
//! Turning the log on has no old log to append to: from the point, the
//! shard logs to a temporary file, which becomes the new log's tail. One
//! snapshot runs at a time, of the RDB file or of the logs: BGREWRITEAOF
//! during a background save is scheduled, and BGSAVE during a rewrite is
//! refused or scheduled, as in Redis.

use super::{log_dir, log_path, AofWriter, Fsync};
use crate::node::Core;
use crate::persist::{self, FileWriter, Layout};
use ringdb_engine::command::CmdError;
use ringdb_engine::persist::aof::{self, LogState};
use ringdb_engine::persist::live::{Format, SnapshotParams};
use ringdb_engine::persist::rdb::encode::Encoder;
use ringdb_engine::scripting::functions;
use ringdb_engine::shard::now_ms;
use std::fs::{File, OpenOptions};
use std::io::{Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU8, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;
use tracing::{info, warn};

pub const IN_PROGRESS: CmdError =
    CmdError::new("ERR Background append only file rewriting already in progress");

pub const FAILED: CmdError = CmdError::new(
    "ERR Can't execute an AOF background rewriting. Please check the server logs for more information.",
);

/// The thread copies the old log's tail until less than this is left:
/// the rest is copied by the shard, which writes nothing meanwhile.
const TAIL_LEFT: u64 = 1 << 20;

/// Seconds before a failed rewrite is tried again automatically.
const RETRY_DELAY_S: u64 = 5;

/// What BGREWRITEAOF did.
pub enum Outcome {
    Started,
    /// It starts when the background save (or the EXEC) ends.
    Scheduled,
}

/// BGREWRITEAOF: starts a rewrite now, or schedules it while a background
/// save runs or inside EXEC (Redis's answers).
pub async fn bgrewriteaof(core: &Rc<Core>, in_exec: bool) -> Result<Outcome, CmdError> {
    let p = &core.shared.persist;
    if p.aof_rewrite_in_progress.load(Relaxed) {
        return Err(IN_PROGRESS);
    }
    if in_exec || p.snapshot_busy.load(Relaxed) {
        p.aof_rewrite_scheduled.store(true, Relaxed);
        return Ok(Outcome::Scheduled);
    }
    start(core).await
}

/// Starts rewriting every shard's log; returns when each has taken its
/// snapshot point. A task on this core waits for them to finish.
pub async fn start(core: &Rc<Core>) -> Result<Outcome, CmdError> {
    let p = &core.shared.persist;
    if p.snapshot_busy.swap(true, Relaxed) {
        p.aof_rewrite_scheduled.store(true, Relaxed);
        return Ok(Outcome::Scheduled);
    }
    p.aof_rewrite_in_progress.store(true, Relaxed);
    p.background_jobs.fetch_add(1, Relaxed);
    tracing::info!("Background append only file rewriting started");
    p.aof_rewrite_scheduled.store(false, Relaxed);
    p.aof_cancel.store(false, Relaxed);
    p.aof_rewrite_started_ms.store(now_ms(), Relaxed);
    let point = now_ms();
    // Read once: the other cores may not have applied a CONFIG SET yet.
    let logging = core.config.borrow().get("appendonly") == Some("yes");
    let verdict = Arc::new(AtomicU8::new(PENDING));
    let shard_verdict = verdict.clone();
    let begun = match persist::lock_all(core, false).await {
        Ok(()) => {
            let begun = core
                .invoke_on_all(move |core| begin_shard(core, point, logging, shard_verdict.clone()))
                .await;
            persist::unlock_all(core, false).await.and(begun)
        }
        Err(e) => Err(e),
    };
    // Every shard must have marked the point before any installs its new
    // log (an old log without the point would not know that its
    // transactions' other parts are in new bases): otherwise none does,
    // and the others stop.
    let shards = begun.unwrap_or_else(|e| vec![Err(e.to_string())]);
    let not_begun = shards.iter().find_map(|shard| shard.as_ref().err()).cloned();
    match &not_begun {
        Some(e) => {
            warn!("cannot start the AOF rewrite: {e}");
            verdict.store(ABORT, Relaxed);
            p.aof_cancel.store(true, Relaxed);
        }
        None => {
            verdict.store(GO, Relaxed);
            info!("Background append only file rewriting started");
        }
    }
    let failed = not_begun.is_some();
    let waiter = core.clone();
    glommio::spawn_local(async move {
        let mut ok = !failed;
        for done in shards.into_iter().flatten() {
            let result = done.recv_async().await.unwrap_or_else(|_| Err("stopped".into()));
            if let Err(e) = result {
                warn!("Background AOF rewrite: {e}");
                ok = false;
            }
        }
        let stopped = !failed && waiter.shared.persist.aof_cancel.load(Relaxed);
        ended(&waiter, ok, stopped);
    })
    .detach();
    match failed {
        true => Err(FAILED),
        false => Ok(Outcome::Started),
    }
}

/// The rewrite of every shard is over: its status for INFO, and the next
/// snapshot may start. A rewrite `stopped` on purpose (SHUTDOWN,
/// `appendonly no`) is not a failed one, as in Redis.
fn ended(core: &Core, ok: bool, stopped: bool) {
    let p = &core.shared.persist;
    let started = p.aof_rewrite_started_ms.load(Relaxed);
    p.aof_last_rewrite_time_s.store((now_ms().saturating_sub(started) / 1000) as i64, Relaxed);
    if ok {
        info!("Background AOF rewrite finished successfully");
        p.aof_last_rewrite_ok.store(true, Relaxed);
        p.aof_rewrites.fetch_add(1, Relaxed);
        p.aof_rewrite_failures.store(0, Relaxed);
    } else if stopped {
        info!("Background AOF rewrite stopped");
    } else {
        p.aof_last_rewrite_ok.store(false, Relaxed);
        p.aof_rewrite_failures.fetch_add(1, Relaxed);
    }
    p.aof_rewrite_in_progress.store(false, Relaxed);
    persist::release(core);
}

/// Stops a running rewrite and waits until it is gone (SHUTDOWN, as Redis
/// kills its rewriting child); the old logs stay as they are.
pub async fn stop(core: &Core) {
    let p = &core.shared.persist;
    let warning = "There is a child rewriting the AOF. Killing it!";
    persist::stop_and_wait(&p.aof_rewrite_in_progress, &p.aof_cancel, warning).await;
}

/// Whether an automatic rewrite is due (checked once a second): the logs
/// have grown enough since their last rewrite, or the log is on and a
/// shard has none yet (turned on at run time, or a failed attempt, retried
/// after [`RETRY_DELAY_S`]).
pub async fn due(core: &Rc<Core>) -> bool {
    let (percentage, min_size) = {
        let config = core.config.borrow();
        if config.get("appendonly") != Some("yes") {
            return false;
        }
        let number = |name: &str| config.get(name).and_then(|v| v.parse().ok()).unwrap_or(0);
        (number("auto-aof-rewrite-percentage"), number("auto-aof-rewrite-min-size"))
    };
    let Ok(sizes) =
        core.invoke_on_all(|core| core.aof.borrow().as_ref().map(|w| (w.size, w.base_size))).await
    else {
        return false;
    };
    let p = &core.shared.persist;
    let failed_lately = !p.aof_last_rewrite_ok.load(Relaxed)
        && now_ms().saturating_sub(p.aof_rewrite_started_ms.load(Relaxed)) < RETRY_DELAY_S * 1000;
    if failed_lately {
        return false;
    }
    if sizes.iter().any(Option::is_none) {
        return true;
    }
    let (size, base) =
        sizes.into_iter().flatten().fold((0, 0), |(s, b), (ws, wb)| (s + ws, b + wb));
    super::needs_rewrite(size, base, percentage, min_size)
}

/// Whether every shard started its part of a rewrite: a shard installs its
/// new log only after [`GO`].
const PENDING: u8 = 0;
const GO: u8 = 1;
const ABORT: u8 = 2;

/// The log a shard keeps appending to while its new log is written.
#[derive(Clone, Debug)]
struct Live {
    path: PathBuf,
    /// Where the records after the snapshot point start.
    tail_start: u64,
}

/// What a shard's part of a rewrite reports when it is over.
type Done = flume::Receiver<Result<(), String>>;

/// At the snapshot point, on every core: marks the point in the log (or
/// opens the temporary one), starts the snapshot, the thread writing the
/// new log and the task that installs it.
fn begin_shard(
    core: &Rc<Core>,
    point_ms: u64,
    logging: bool,
    verdict: Arc<AtomicU8>,
) -> Result<Done, String> {
    let config = core.config.borrow().clone();
    let (index, shards) = (core.id.index(), core.shared.shards());
    let dir = log_dir(&config);
    std::fs::create_dir_all(&dir).map_err(|e| format!("can't create {}: {e}", dir.display()))?;
    let live = match logging {
        true => Some(mark_point(core, &dir, point_ms)?),
        false => None,
    };
    let preamble = config.get("aof-use-rdb-preamble") == Some("yes");
    let target = persist::target(core);
    let params = SnapshotParams {
        now_ms: point_ms,
        format: if preamble { Format::Rdb } else { Format::Log },
        encoder: Encoder { compress: target.compress },
        lfu_decay_time: None,
    };
    let (pieces, received) = flume::bounded(persist::IN_FLIGHT);
    let started = persist::begin_shard(core, pieces, params);
    let layout = match preamble {
        true => persist::rdb_layout(&target, &persist::aux_fields(true), &[started]),
        false => {
            let mut head = Vec::new();
            if !started.functions.is_empty() {
                let codes = started.functions.iter().map(|code| &code[..]);
                aof::functions_record(&mut head, &functions::dump(codes));
            }
            Layout::Log { head }
        }
    };
    let shared = core.shared.clone();
    let writer = FileWriter {
        layout,
        shards: 1,
        pieces: received,
        cancelled: Box::new(move || shared.persist.aof_cancel.load(Relaxed)),
        key_delay_us: persist::key_delay(core),
    };
    let tmp = dir.join(format!("temp-rewriteaof-{index}-of-{shards}.aof"));
    let (written, base) = flume::bounded(1);
    let job = BaseJob { writer, tmp: tmp.clone(), live: live.clone() };
    std::thread::Builder::new()
        .name("ringdb-aof-rewrite".into())
        .spawn(move || {
            let _ = written.send(job.run());
        })
        .map_err(|e| {
            core.shard.borrow_mut().keyspace.abort_snapshot();
            format!("can't start the rewrite thread: {e}")
        })?;
    let (done, report) = flume::bounded(1);
    let core = core.clone();
    glommio::spawn_local(async move {
        let copied = base.recv_async().await.unwrap_or_else(|_| Err("the writer stopped".into()));
        while verdict.load(Relaxed) == PENDING {
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
        let copied = match verdict.load(Relaxed) {
            GO => copied,
            _ => Err("another shard could not start its rewrite".into()),
        };
        let result = copied.and_then(|copied| install(&core, &tmp, live.as_ref(), copied));
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
            drop_temporary_log(&core, live.as_ref());
        }
        let _ = done.send(result);
    })
    .detach();
    Ok(report)
}

/// Writes the shard's pending records, then the point, to its log and
/// syncs it; or, when the log was just turned on, opens the temporary log
/// that takes the records from now on.
fn mark_point(core: &Core, dir: &Path, point_ms: u64) -> Result<Live, String> {
    core.flush_log();
    let mut aof = core.aof.borrow_mut();
    let live = match aof.as_mut() {
        Some(w) => {
            let mut record = Vec::new();
            aof::rewrite_point(&mut record, point_ms);
            let marked = w.file.write_all(&record).and_then(|()| w.file.sync_data());
            marked.map_err(|e| format!("can't write to {}: {e}", w.path.display()))?;
            w.size += record.len() as u64;
            w.unsynced = false;
            let end = w.file.metadata().map_err(|e| e.to_string())?.len();
            Live { path: w.path.clone(), tail_start: end }
        }
        None => {
            let (index, shards) = (core.id.index(), core.shared.shards());
            let path = dir.join(format!("temp-incr-{index}-of-{shards}.aof"));
            let opened =
                File::create(&path).and_then(|_| OpenOptions::new().append(true).open(&path));
            let file = opened.map_err(|e| format!("can't create {}: {e}", path.display()))?;
            let fsync = Fsync::from_config(&core.config.borrow());
            *aof = Some(AofWriter::new(file, path.clone(), fsync, 0));
            Live { path, tail_start: 0 }
        }
    };
    // The tail's first record chooses its database.
    let mut shard = core.shard.borrow_mut();
    shard.state.funnel.log.get_or_insert_with(LogState::default).reset_selected();
    Ok(live)
}

/// A failed rewrite of a log just turned on leaves no log: the next try
/// starts afresh (the shard logs nothing meanwhile; its data is in memory
/// and goes into the next try's base).
fn drop_temporary_log(core: &Core, live: Option<&Live>) {
    let Some(live) = live else { return };
    let mut aof = core.aof.borrow_mut();
    if aof.as_ref().is_some_and(|w| w.path == live.path && is_temporary(&live.path)) {
        *aof = None;
        core.shard.borrow_mut().state.funnel.log = None;
        let _ = std::fs::remove_file(&live.path);
    }
}

fn is_temporary(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n.to_string_lossy().starts_with("temp-"))
}

/// The thread's part: the new log's base, then most of the old log's tail.
struct BaseJob {
    writer: FileWriter,
    tmp: PathBuf,
    live: Option<Live>,
}

impl BaseJob {
    /// Returns where the copy of the old log stopped.
    fn run(self) -> Result<u64, String> {
        let failed = |e: std::io::Error| format!("writing {}: {e}", self.tmp.display());
        let mut out =
            std::io::BufWriter::with_capacity(1 << 20, File::create(&self.tmp).map_err(failed)?);
        self.writer.write_to(&mut out).map_err(failed)?;
        let mut file = out.into_inner().map_err(|e| failed(e.into_error()))?;
        let mut copied = 0;
        if let Some(live) = &self.live {
            copied = live.tail_start;
            // The shard keeps appending: copy until little is left.
            loop {
                if (self.writer.cancelled)() {
                    return Err("cancelled".into());
                }
                let n = copy_tail(&live.path, copied, &mut file).map_err(failed)?;
                copied += n;
                if n < TAIL_LEFT {
                    break;
                }
            }
        }
        // The bulk is synced here, off the shard's core.
        file.sync_data().map_err(failed)?;
        Ok(copied)
    }
}

/// Appends `from`'s bytes after offset `at` to `to`; returns how many.
fn copy_tail(from: &Path, at: u64, to: &mut File) -> std::io::Result<u64> {
    let mut source = File::open(from)?;
    source.seek(SeekFrom::Start(at))?;
    std::io::copy(&mut source, to)
}

/// On the shard's core, between commands: completes the new log with the
/// rest of the tail and puts it in the old one's place; the shard's appends
/// go on there. With the log off, the new file only replaces the old one.
fn install(core: &Core, tmp: &Path, live: Option<&Live>, copied: u64) -> Result<(), String> {
    let config = core.config.borrow().clone();
    let path = log_path(&config, core.id.index(), core.shared.shards());
    let failed = |e: std::io::Error| format!("can't install {}: {e}", path.display());
    let dir = log_dir(&config);
    let Some(live) = live else {
        std::fs::rename(tmp, &path).map_err(failed)?;
        persist::sync_dir(&dir);
        return Ok(());
    };
    core.flush_log();
    let mut aof = core.aof.borrow_mut();
    let Some(w) = aof.as_mut().filter(|w| w.path == live.path) else {
        return Err("the log was turned off during the rewrite".into());
    };
    let mut file = OpenOptions::new().append(true).open(tmp).map_err(failed)?;
    copy_tail(&live.path, copied, &mut file).map_err(failed)?;
    file.sync_data().map_err(failed)?;
    std::fs::rename(tmp, &path).map_err(failed)?;
    persist::sync_dir(&dir);
    if live.path != path {
        let _ = std::fs::remove_file(&live.path);
    }
    let size = file.metadata().map_err(failed)?.len();
    *w = AofWriter::new(file, path, w.fsync, size);
    Ok(())
}

/// Removes what a rewrite cut short by a crash left in the log directory
/// for this shard (start-up).
pub fn remove_leftovers(dir: &Path, index: usize, shards: usize) {
    for name in [
        format!("temp-rewriteaof-{index}-of-{shards}.aof"),
        format!("temp-incr-{index}-of-{shards}.aof"),
    ] {
        let _ = std::fs::remove_file(dir.join(name));
    }
}
