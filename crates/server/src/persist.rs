//! Snapshots on disk: SAVE, BGSAVE [SCHEDULE], the `save` schedule, DEBUG
//! RELOAD, saving at SHUTDOWN, and loading `dir`/`dbfilename` at start-up.
//!
//! One RDB file for the whole node, as redis-server writes it (so that
//! redis-server and redis-check-rdb read it). No fork and no stop: the
//! shards keep serving commands, writes included, while their snapshot is
//! written (see `ringdb_engine::persist::live`).
//!
//! - Starting: every whole shard is locked through the cross-shard
//!   transaction scheme (intent locks in ascending shard order, as FLUSHALL
//!   takes them) only for the instant it takes to start the snapshot on
//!   each shard, so all shards snapshot at one logical point: a cross-shard
//!   transaction (MSET over two shards, MULTI/EXEC, a gathered RENAME) is
//!   entirely in it or entirely out.
//! - Running: each shard serialises its slot tables in a background task of
//!   its own, [`STEP_BYTES`] at a time, yielding to commands between steps;
//!   a write to a table not serialised yet serialises the table first (its
//!   pre-image). The bytes go through a bounded channel ([`IN_FLIGHT`]
//!   steps) to a thread that writes the file, so memory grows by the bytes
//!   in flight and the pre-images, not by a copy of the data.
//! - The file: header and function libraries, then the pieces in the order
//!   they come, each preceded by `SELECTDB` when its database differs from
//!   the previous piece's (the first time with `RESIZEDB` and the database's
//!   size at the snapshot point: a hint, as Redis's loader takes it), then
//!   `EOF` and the CRC64, computed as the bytes go by.
//!
//! One snapshot file is written at a time (`snapshot_busy`). SAVE waits for
//! its end (commands still run meanwhile); SHUTDOWN stops a running
//! background save first (as Redis kills its child) and then saves.

use crate::node::Core;
use ringdb_engine::command::CmdError;
use ringdb_engine::families::dump::load_limits;
use ringdb_engine::locks::{LockMode, LockSet, WHOLE_SHARD};
use ringdb_engine::persist::crc64;
use ringdb_engine::persist::live::{Chunk, DbCount, Format, SnapshotParams};
use ringdb_engine::persist::rdb::decode::LoadLimits;
use ringdb_engine::persist::rdb::encode::{self, Encoder};
use ringdb_engine::persist::snapshot;
use ringdb_engine::shard::now_ms;
use ringdb_engine::ShardId;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use std::time::Duration;
use tracing::{info, warn};

/// Seconds before a failed background save is retried by the schedule
/// (Redis's `CONFIG_BGSAVE_RETRY_DELAY`).
const BGSAVE_RETRY_DELAY_S: u64 = 5;

/// Bytes a shard serialises in one step before it lets commands run.
const STEP_BYTES: usize = 128 * 1024;

/// Steps on their way from the shards to the file writer (about 4 MB).
pub(crate) const IN_FLIGHT: usize = 32;

pub const SAVE_IN_PROGRESS: CmdError = CmdError::new("ERR Background save already in progress");

/// BGSAVE while a foreground save (SAVE, DEBUG RELOAD) writes the file:
/// Redis's answer when another child process is busy.
pub const OTHER_SAVE_RUNNING: CmdError = CmdError::new(
    "ERR Another child process is active (AOF?): can't BGSAVE right now. Use BGSAVE SCHEDULE in order to schedule a BGSAVE whenever possible.",
);

/// The node's snapshot state (INFO persistence, LASTSAVE), shared by all
/// cores.
#[derive(Debug)]
pub struct Persistence {
    /// Unix seconds of the last successful save (or of start-up).
    pub last_save: AtomicU64,
    pub bgsave_in_progress: AtomicBool,
    /// A snapshot file is being written (by BGSAVE, SAVE or DEBUG RELOAD):
    /// only one at a time.
    pub snapshot_busy: AtomicBool,
    /// Stop the running background save (SHUTDOWN).
    pub cancel: AtomicBool,
    /// BGSAVE SCHEDULE (or BGSAVE inside MULTI) waiting to start.
    pub bgsave_scheduled: AtomicBool,
    pub last_bgsave_ok: AtomicBool,
    /// Duration of the last background save, seconds (-1: none yet).
    pub last_bgsave_time_s: AtomicI64,
    /// Unix ms the current background save started.
    pub bgsave_started_ms: AtomicU64,
    /// Unix ms of the last background save attempt (retry delay).
    pub last_bgsave_try_ms: AtomicU64,
    /// Successful saves since start-up (`rdb_saves`).
    pub saves: AtomicU64,
    /// The last append-only log write (and sync) worked.
    pub aof_last_write_ok: AtomicBool,
    pub aof_last_rewrite_ok: AtomicBool,
    /// Log rewrites since start-up (`aof_rewrites`).
    pub aof_rewrites: AtomicU64,
    /// Failed log rewrites since the last one that worked.
    pub aof_rewrite_failures: AtomicU64,
    pub aof_rewrite_in_progress: AtomicBool,
    /// BGREWRITEAOF (during a background save or in EXEC) or `appendonly
    /// yes` waiting to start.
    pub aof_rewrite_scheduled: AtomicBool,
    /// Stop the running log rewrite (SHUTDOWN, `appendonly no`).
    pub aof_cancel: AtomicBool,
    /// Unix ms the current (or last) log rewrite started.
    pub aof_rewrite_started_ms: AtomicU64,
    /// Duration of the last log rewrite, seconds (-1: none yet).
    pub aof_last_rewrite_time_s: AtomicI64,
    /// Background saves and log rewrites started. INFO shows it as
    /// `total_forks`: ringdb forks nothing, these jobs are what Redis forks
    /// for.
    pub background_jobs: AtomicU64,
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            last_save: AtomicU64::new(now_ms() / 1000),
            bgsave_in_progress: AtomicBool::new(false),
            snapshot_busy: AtomicBool::new(false),
            cancel: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_time_s: AtomicI64::new(-1),
            bgsave_started_ms: AtomicU64::new(0),
            last_bgsave_try_ms: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            aof_last_write_ok: AtomicBool::new(true),
            aof_last_rewrite_ok: AtomicBool::new(true),
            aof_rewrites: AtomicU64::new(0),
            aof_rewrite_failures: AtomicU64::new(0),
            aof_rewrite_in_progress: AtomicBool::new(false),
            aof_rewrite_scheduled: AtomicBool::new(false),
            aof_cancel: AtomicBool::new(false),
            aof_rewrite_started_ms: AtomicU64::new(0),
            aof_last_rewrite_time_s: AtomicI64::new(-1),
            background_jobs: AtomicU64::new(0),
        }
    }
}

fn whole_shard() -> LockSet {
    vec![(WHOLE_SHARD, LockMode::Exclusive)]
}

/// Locks every whole shard, in ascending shard order (the transaction
/// scheme's global order, so this never deadlocks with a transaction).
/// Inside EXEC the locks are held already.
pub(crate) async fn lock_all(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
    if in_exec {
        return Ok(());
    }
    for i in 0..core.shared.shards() {
        core.invoke_deferred(ShardId(i as u16), |core, reply| {
            core.shard.borrow_mut().tx_acquire(whole_shard(), Box::new(move |_| reply.send(())));
        })
        .await?;
    }
    Ok(())
}

pub(crate) async fn unlock_all(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
    if in_exec {
        return Ok(());
    }
    core.invoke_on_all(|core| {
        core.shard.borrow_mut().tx_release(&whole_shard());
        core.publish_changes();
    })
    .await?;
    Ok(())
}

/// Takes the right to write the snapshot file. `wait`: until the running
/// foreground save ends (never inside EXEC: that save may be waiting for
/// the locks this EXEC holds). A background save running is an error.
async fn claim(core: &Core, wait: bool) -> Result<(), CmdError> {
    let p = &core.shared.persist;
    loop {
        if p.bgsave_in_progress.load(Relaxed) {
            return Err(SAVE_IN_PROGRESS);
        }
        if !p.snapshot_busy.swap(true, Relaxed) {
            return Ok(());
        }
        if !wait {
            return Err(SAVE_IN_PROGRESS);
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
}

pub(crate) fn release(core: &Core) {
    core.shared.persist.snapshot_busy.store(false, Relaxed);
}

/// How a file is written, fixed when the snapshot is taken.
#[derive(Clone, Debug)]
pub(crate) struct Target {
    path: PathBuf,
    pub compress: bool,
    checksum: bool,
}

/// `rdb-key-save-delay` now.
pub(crate) fn key_delay(core: &Core) -> i64 {
    core.config.borrow().int("rdb-key-save-delay")
}

pub(crate) fn target(core: &Core) -> Target {
    let config = core.config.borrow();
    Target {
        path: config.rdb_path(),
        compress: config.rdbcompression(),
        checksum: config.rdbchecksum(),
    }
}

/// The aux fields Redis 7.0 writes at the top of a file (`aof_base`: the
/// file is a log's RDB preamble).
pub(crate) fn aux_fields(aof_base: bool) -> Vec<(&'static str, String)> {
    vec![
        ("redis-ver", crate::cmd::connection::REDIS_VERSION.to_string()),
        ("redis-bits", (usize::BITS).to_string()),
        ("ctime", (now_ms() / 1000).to_string()),
        ("used-mem", crate::memory::used_memory().to_string()),
        ("aof-base", u8::from(aof_base).to_string()),
    ]
}

/// What a shard streams to the file writer.
pub(crate) enum Piece {
    /// Serialised keys of a database (numbered as at the snapshot point).
    Keys(Chunk),
    /// The shard's last piece was sent.
    Done,
}

/// What a shard reports when its snapshot starts.
pub(crate) struct Started {
    pub counts: Vec<DbCount>,
    /// The shard's change counter at the snapshot point (what a successful
    /// save subtracts, as Redis's `dirty_before_bgsave`).
    dirty: u64,
    /// The code of every function library (the same on every shard).
    pub functions: Vec<Vec<u8>>,
}

/// Starts the snapshot on this core's shard and the task that streams it.
pub(crate) fn begin_shard(
    core: &Rc<Core>,
    pieces: flume::Sender<Piece>,
    params: SnapshotParams,
) -> Started {
    let started = {
        let mut shard = core.shard.borrow_mut();
        let settings = &shard.state.settings;
        let params = SnapshotParams {
            lfu_decay_time: settings.lfu.then_some(settings.lfu_decay_time),
            ..params
        };
        let functions = shard
            .state
            .scripting
            .libraries()
            .map(|libs| libs.libs.values().map(|l| l.code.to_vec()).collect())
            .unwrap_or_default();
        let dirty = shard.state.funnel.dirty;
        SNAPSHOTS.with(|n| n.set(n.get() + 1));
        Started { counts: shard.keyspace.begin_snapshot(params), dirty, functions }
    };
    let this = SNAPSHOTS.with(|n| n.get());
    match glommio::spawn_local_into(stream_shard(core.clone(), pieces, this), step_queue()) {
        Ok(task) => {
            task.detach();
        }
        Err(e) => {
            // The writer will miss this shard's part and fail the save.
            warn!("cannot start the snapshot task: {e}");
            core.shard.borrow_mut().keyspace.abort_snapshot();
        }
    }
    started
}

/// How long a shard's snapshot task may run before the executor polls for
/// I/O (the task yields between steps when that time is up).
const STEP_LATENCY: Duration = Duration::from_millis(1);

thread_local! {
    static STEP_QUEUE: std::cell::OnceCell<glommio::TaskQueueHandle> =
        const { std::cell::OnceCell::new() };
}

/// This core's task queue for snapshot steps: its latency requirement
/// shortens the executor's preemption timer while a snapshot runs (plain
/// yields would not poll for I/O, and sleeping between steps would hand
/// the CPU to other processes).
pub(crate) fn step_queue() -> glommio::TaskQueueHandle {
    STEP_QUEUE.with(|q| {
        *q.get_or_init(|| {
            glommio::executor().create_task_queue(
                glommio::Shares::default(),
                glommio::Latency::Matters(STEP_LATENCY),
                "snapshot",
            )
        })
    })
}

thread_local! {
    /// Snapshots started on this core: a snapshot task whose number is no
    /// longer the last left its snapshot behind (its writer stopped, and
    /// another snapshot may have started since): it must not touch it.
    static SNAPSHOTS: std::cell::Cell<u64> = const { std::cell::Cell::new(0) };
}

/// The shard's background part: serialise a step, hand it to the writer,
/// let the commands waiting run, again until every table is written. When
/// the writer is gone (an error, a cancelled save) the snapshot is dropped.
async fn stream_shard(core: Rc<Core>, pieces: flume::Sender<Piece>, this: u64) {
    let current = || SNAPSHOTS.with(|n| n.get()) == this;
    loop {
        if !current() {
            return;
        }
        let step = core.shard.borrow_mut().keyspace.snapshot_step(STEP_BYTES);
        for chunk in step.chunks {
            if pieces.send_async(Piece::Keys(chunk)).await.is_err() {
                if current() {
                    core.shard.borrow_mut().keyspace.abort_snapshot();
                }
                return;
            }
        }
        if step.finished {
            let _ = pieces.send_async(Piece::Done).await;
            return;
        }
        // The task queue's latency makes the executor poll for I/O at least
        // every STEP_LATENCY: then connections with input run before the
        // next step.
        glommio::yield_if_needed().await;
    }
}

/// A snapshot started on every shard, its file being written.
struct Running {
    result: flume::Receiver<std::io::Result<usize>>,
    /// Every shard's change counter at the snapshot point.
    dirty: Vec<u64>,
    path: PathBuf,
}

/// Starts a snapshot of every shard at one logical point and the thread
/// that writes its file. `locked`: the caller holds every shard's lock
/// already (EXEC, DEBUG RELOAD).
async fn start(core: &Rc<Core>, target: Target, locked: bool) -> Result<Running, CmdError> {
    let shared = core.shared.clone();
    let cancelled = move || shared.persist.cancel.load(Relaxed);
    let (mut writers, dirty) = begin_rdb(core, &target, locked, false, |_| {}, cancelled).await?;
    let writer = writers.remove(0);
    let path = target.path.clone();
    let (done, result) = flume::bounded(1);
    std::thread::Builder::new()
        .name("ringdb-snapshot".into())
        .spawn(move || {
            let _ = done.send(writer.write(&target.path));
        })
        .map_err(|e| CmdError::owned(format!("ERR Can't save in background: {e}")))?;
    Ok(Running { result, dirty, path })
}

/// Starts a snapshot of every shard at one logical point for a replica's
/// full sync: `at_point` runs on each shard at that point, right before its
/// snapshot starts (it cuts the replication stream there). Returns the
/// writer of the RDB, or with `flows` one writer per shard, each a whole
/// RDB of that shard's keys (a ringdb replica with as many shards loads
/// each on its own shard); the caller runs them and has claimed the
/// snapshot (`snapshot_busy`).
pub(crate) async fn start_for_replica<F>(
    core: &Rc<Core>,
    flows: bool,
    at_point: F,
) -> Result<Vec<FileWriter>, CmdError>
where
    F: Fn(&Rc<Core>) + Send + Sync + Clone + 'static,
{
    let mut target = target(core);
    // Flows go between ringdb nodes, where LZF costs more CPU on both ends
    // than the bytes it saves take to send (measured: it was most of the
    // primary's time in a full sync).
    target.compress &= !flows;
    // What Redis forks for (INFO total_forks).
    core.shared.persist.background_jobs.fetch_add(1, Relaxed);
    Ok(begin_rdb(core, &target, false, flows, at_point, || false).await?.0)
}

/// Starts the snapshot on every shard at one logical point (under one lock
/// of every shard, unless the caller holds it: `locked`), running
/// `at_point` on each right before; returns the writer of its RDB file (or
/// one per shard: `per_shard`) and every shard's change counter at that
/// point.
async fn begin_rdb<F, C>(
    core: &Rc<Core>,
    target: &Target,
    locked: bool,
    per_shard: bool,
    at_point: F,
    cancelled: C,
) -> Result<(Vec<FileWriter>, Vec<u64>), CmdError>
where
    F: Fn(&Rc<Core>) + Send + Sync + Clone + 'static,
    C: Fn() -> bool + Send + Clone + 'static,
{
    let files = if per_shard { core.shared.shards() } else { 1 };
    let (senders, receivers): (Vec<flume::Sender<Piece>>, Vec<_>) =
        (0..files).map(|_| flume::bounded(IN_FLIGHT)).unzip();
    let params = SnapshotParams {
        now_ms: now_ms(),
        format: Format::Rdb,
        encoder: Encoder { compress: target.compress },
        lfu_decay_time: None,
    };
    lock_all(core, locked).await?;
    let started = core
        .invoke_on_all(move |core| {
            at_point(core);
            let pieces = senders[core.id.index() % senders.len()].clone();
            begin_shard(core, pieces, params)
        })
        .await;
    unlock_all(core, locked).await?;
    let started = started?;
    let aux = aux_fields(false);
    let key_delay_us = key_delay(core);
    let writers = receivers
        .into_iter()
        .enumerate()
        .map(|(i, pieces)| {
            let of = if per_shard { &started[i..=i] } else { &started[..] };
            FileWriter {
                layout: rdb_layout(target, &aux, of),
                shards: of.len(),
                pieces,
                cancelled: Box::new(cancelled.clone()),
                key_delay_us,
            }
        })
        .collect();
    Ok((writers, started.iter().map(|s| s.dirty).collect()))
}

/// A replica's full sync: replaces every shard's data with the primary's
/// snapshot, under one lock of every shard. `parts`: one RDB that every
/// shard takes its keys from, or one per shard (a ringdb primary's flows).
/// A snapshot that does not load whole leaves every shard empty (never
/// half a dataset served as whole).
pub async fn load_from_primary(
    core: &Rc<Core>,
    parts: Vec<crate::repl::received::Snapshot>,
) -> Result<usize, String> {
    let parts = std::sync::Arc::new(parts);
    lock_all(core, false).await.map_err(|e| e.text().to_string())?;
    let path = PathBuf::from("(snapshot from the primary)");
    let loaded = core
        .invoke_on_all(move |core| {
            empty_for_load(core);
            load_shard(core, &parts[core.id.index() % parts.len()], &path, false)
        })
        .await
        .map_err(|e| e.text().to_string())
        .and_then(|shards| shards.into_iter().sum::<Result<usize, String>>());
    if loaded.is_err() {
        let _ = core.invoke_on_all(empty_for_load).await;
    }
    unlock_all(core, false).await.map_err(|e| e.text().to_string())?;
    loaded
}

impl Running {
    /// Waits for the file: its size, or why it could not be written.
    async fn finish(&self) -> Result<usize, String> {
        match self.result.recv_async().await {
            Ok(Ok(bytes)) => Ok(bytes),
            Ok(Err(e)) => Err(format!("Failed saving the RDB file {}: {e}", self.path.display())),
            Err(_) => Err("the snapshot writer stopped".into()),
        }
    }
}

/// How a file frames the pieces the shards stream.
pub(crate) enum Layout {
    /// An RDB file: `head` (header and function libraries), `SELECTDB`
    /// before a database's pieces (the first time with `RESIZEDB` and the
    /// database's size at the snapshot point), `EOF` and the CRC64 after.
    Rdb { head: Vec<u8>, counts: Vec<DbCount>, checksum: bool },
    /// Log records (a log rewritten without an RDB preamble): `head`
    /// (the function libraries), `SELECT` before a database's pieces.
    Log { head: Vec<u8> },
}

/// The RDB layout of a snapshot that `started` on these shards.
pub(crate) fn rdb_layout(target: &Target, aux: &[(&str, String)], started: &[Started]) -> Layout {
    let encoder = Encoder { compress: target.compress };
    let mut head = Vec::new();
    encode::header(&mut head, aux);
    for code in started.first().map(|s| &s.functions[..]).unwrap_or_default() {
        encode::function(&mut head, &encoder, code);
    }
    let databases = started.iter().map(|s| s.counts.len()).max().unwrap_or(0);
    let counts = (0..databases)
        .map(|db| {
            let of_db = || started.iter().filter_map(move |s| s.counts.get(db));
            DbCount {
                keys: of_db().map(|c| c.keys).sum(),
                volatile: of_db().map(|c| c.volatile).sum(),
            }
        })
        .collect();
    Layout::Rdb { head, counts, checksum: target.checksum }
}

/// Writes a file from the pieces the shards stream.
pub(crate) struct FileWriter {
    pub layout: Layout,
    /// Shards streaming: each ends with [`Piece::Done`].
    pub shards: usize,
    pub pieces: flume::Receiver<Piece>,
    /// Whether to stop (SHUTDOWN, `appendonly no`).
    pub cancelled: Box<dyn Fn() -> bool + Send>,
    /// `rdb-key-save-delay` when the file was started.
    pub key_delay_us: i64,
}

/// The temporary snapshot file being written, if any (one at a time), for
/// [`remove_temp_file`].
static WRITING: std::sync::Mutex<Option<PathBuf>> = std::sync::Mutex::new(None);

/// Removes the temporary snapshot file being written, if any: the process
/// is about to exit without finishing it (Redis's `rdbRemoveTempFile`).
pub fn remove_temp_file() {
    if let Some(tmp) = WRITING.lock().ok().and_then(|w| w.clone()) {
        let _ = std::fs::remove_file(tmp);
    }
}

impl FileWriter {
    /// Writes a temporary file in the same directory, syncs it and renames
    /// it over `path` (a crash leaves the old file or the new one, never
    /// half of one). Returns the file's size.
    fn write(self, path: &Path) -> std::io::Result<usize> {
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
        let set_writing = |now: Option<&Path>| {
            if let Ok(mut writing) = WRITING.lock() {
                *writing = now.map(Path::to_path_buf);
            }
        };
        set_writing(Some(&tmp));
        let result = (|| {
            let mut file = std::io::BufWriter::with_capacity(1 << 20, std::fs::File::create(&tmp)?);
            let size = self.write_to(&mut file)?;
            file.into_inner().map_err(|e| e.into_error())?.sync_all()?;
            std::fs::rename(&tmp, path)?;
            sync_dir(dir);
            Ok(size)
        })();
        if result.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        set_writing(None);
        result
    }

    /// `rdb-key-save-delay` (a setting for tests, as Redis's): the writer
    /// waits `delay` microseconds per key written, or when negative (-n),
    /// 1 µs for one key in n on average. Only the writer thread waits: the
    /// shards keep serving, and the snapshot stays at its point however
    /// long the file takes. It waits in short slices, to stop when told.
    fn key_save_delay(&self, keys: usize) -> std::io::Result<()> {
        let mut micros = match self.key_delay_us {
            0 => 0,
            d if d > 0 => d as u64 * keys as u64,
            d => keys as u64 / d.unsigned_abs(),
        };
        while micros > 0 {
            if (self.cancelled)() {
                return Err(std::io::Error::other("cancelled"));
            }
            let slice = micros.min(10_000);
            std::thread::sleep(Duration::from_micros(slice));
            micros -= slice;
        }
        Ok(())
    }

    /// Writes the whole file to `file` (without syncing it); returns its
    /// size.
    pub(crate) fn write_to(&self, file: &mut impl Write) -> std::io::Result<usize> {
        let checksum = matches!(self.layout, Layout::Rdb { checksum: true, .. });
        let mut out = Output { file, crc: 0, size: 0, checksum };
        let mut announced = Vec::new();
        match &self.layout {
            Layout::Rdb { head, counts, .. } => {
                out.put(head)?;
                announced = vec![false; counts.len()];
            }
            Layout::Log { head } => out.put(head)?,
        }
        let mut selected = None;
        let mut done = 0;
        while done < self.shards {
            if (self.cancelled)() {
                return Err(std::io::Error::other("cancelled"));
            }
            let piece = self
                .pieces
                .recv()
                .map_err(|_| std::io::Error::other("a shard stopped its snapshot"))?;
            let Chunk { db, bytes, keys } = match piece {
                Piece::Done => {
                    done += 1;
                    continue;
                }
                Piece::Keys(chunk) => chunk,
            };
            if selected != Some(db) {
                let mut op = Vec::new();
                match &self.layout {
                    Layout::Rdb { counts, .. } => {
                        encode::select_db(&mut op, db);
                        if let Some(first) = announced.get_mut(db).filter(|a| !**a) {
                            *first = true;
                            encode::resize_db(&mut op, counts[db].keys, counts[db].volatile);
                        }
                    }
                    Layout::Log { .. } => ringdb_engine::persist::aof::select(&mut op, db),
                }
                out.put(&op)?;
                selected = Some(db);
            }
            out.put(&bytes)?;
            self.key_save_delay(keys)?;
        }
        if matches!(self.layout, Layout::Rdb { .. }) {
            let mut footer = Vec::new();
            encode::footer(&mut footer, out.crc, out.checksum);
            out.put(&footer)?;
        }
        Ok(out.size)
    }
}

/// Syncs a directory after a rename in it (where the file system needs
/// it for the rename to last).
pub(crate) fn sync_dir(dir: &Path) {
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
}

/// The file being written, with the checksum of what is in it so far.
struct Output<'a, W: Write> {
    file: &'a mut W,
    crc: u64,
    size: usize,
    checksum: bool,
}

impl<W: Write> Output<'_, W> {
    fn put(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        if self.checksum {
            self.crc = crc64::update(self.crc, bytes);
        }
        self.size += bytes.len();
        self.file.write_all(bytes)
    }
}

/// After a successful save: the changes it covered no longer count, and
/// LASTSAVE moves.
async fn saved(core: &Rc<Core>, covered: &[u64]) -> Result<(), CmdError> {
    let covered = covered.to_vec();
    core.invoke_on_all(move |core| {
        let mut shard = core.shard.borrow_mut();
        let dirty = &mut shard.state.funnel.dirty;
        *dirty = dirty.saturating_sub(covered[core.id.index()]);
    })
    .await?;
    let p = &core.shared.persist;
    p.last_save.store(now_ms() / 1000, Relaxed);
    p.saves.fetch_add(1, Relaxed);
    Ok(())
}

/// Writes a snapshot file and waits for it. `locked`: the caller holds
/// every shard's lock (EXEC, DEBUG RELOAD). The caller has claimed the file.
async fn save_claimed(core: &Rc<Core>, target: &Target, locked: bool) -> Result<(), String> {
    let running = start(core, target.clone(), locked).await.map_err(|e| e.to_string())?;
    match running.finish().await {
        Ok(bytes) => {
            info!("DB saved on disk ({} bytes, {})", bytes, target.path.display());
            saved(core, &running.dirty).await.map_err(|e| e.to_string())
        }
        Err(reason) => {
            warn!("{reason}");
            Err(reason)
        }
    }
}

/// SAVE (and the save of SHUTDOWN): the file is written when this returns;
/// it holds the data as it was when the call started.
pub async fn save(core: &Rc<Core>, in_exec: bool) -> Result<(), String> {
    claim(core, !in_exec).await.map_err(|e| e.to_string())?;
    let result = save_claimed(core, &target(core), in_exec).await;
    release(core);
    result
}

/// Starts a background save: the snapshot point is now (when this
/// returns), the file is written while the shards serve.
pub async fn bgsave(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
    let p = &core.shared.persist;
    if p.bgsave_in_progress.load(Relaxed) {
        return Err(SAVE_IN_PROGRESS);
    }
    if p.snapshot_busy.swap(true, Relaxed) {
        return Err(OTHER_SAVE_RUNNING);
    }
    p.bgsave_in_progress.store(true, Relaxed);
    p.background_jobs.fetch_add(1, Relaxed);
    p.cancel.store(false, Relaxed);
    p.bgsave_scheduled.store(false, Relaxed);
    p.last_bgsave_try_ms.store(now_ms(), Relaxed);
    p.bgsave_started_ms.store(now_ms(), Relaxed);
    let running = match start(core, target(core), in_exec).await {
        Ok(running) => running,
        Err(e) => {
            p.bgsave_in_progress.store(false, Relaxed);
            release(core);
            return Err(e);
        }
    };
    info!("Background saving started");
    let core = core.clone();
    glommio::spawn_local(async move {
        let p = &core.shared.persist;
        let ok = match running.finish().await {
            Ok(bytes) => {
                info!("Background saving terminated with success ({bytes} bytes)");
                saved(&core, &running.dirty).await.is_ok()
            }
            Err(_) if p.cancel.load(Relaxed) => {
                // Stopped on purpose (SHUTDOWN), as Redis kills its child:
                // not a failed save.
                info!("Background saving stopped");
                p.last_bgsave_ok.load(Relaxed)
            }
            Err(e) => {
                warn!("Background saving error: {e}");
                false
            }
        };
        let started = p.bgsave_started_ms.load(Relaxed);
        p.last_bgsave_time_s.store((now_ms().saturating_sub(started) / 1000) as i64, Relaxed);
        p.last_bgsave_ok.store(ok, Relaxed);
        p.bgsave_in_progress.store(false, Relaxed);
        release(&core);
    })
    .detach();
    Ok(())
}

/// Stops a running background save and waits until it is gone (SHUTDOWN,
/// as Redis's `killRDBChild`); its temporary file is removed.
pub async fn stop_background_save(core: &Core) {
    let p = &core.shared.persist;
    let warning = "There is a child saving an .rdb. Killing it!";
    stop_and_wait(&p.bgsave_in_progress, &p.cancel, warning).await;
}

/// Stops a background job (a save or a log rewrite) that `running` says is
/// on, by setting its `cancel` flag, and waits until it has ended.
pub(crate) async fn stop_and_wait(running: &AtomicBool, cancel: &AtomicBool, warning: &str) {
    if !running.load(Relaxed) {
        return;
    }
    warn!("{warning}");
    cancel.store(true, Relaxed);
    while running.load(Relaxed) {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    cancel.store(false, Relaxed);
}

/// Reads the snapshot file, if there is one. `Ok(None)`: no file.
pub fn read_file(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(path) {
        Ok(data) => Ok(Some(data)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("Fatal error loading the DB ({}): {e}. Exiting.", path.display())),
    }
}

/// Loads this shard's keys (and the function libraries) from `data` in
/// one go (DEBUG RELOAD: every shard is held meanwhile); `merge` replaces
/// what is already there instead of failing on it.
pub fn load_shard(core: &Core, data: &[u8], path: &Path, merge: bool) -> Result<usize, String> {
    let mut load = ShardLoad::new(core, data, path, merge)?;
    loop {
        if let Some(keys) = load.step(core, usize::MAX)? {
            return Ok(keys);
        }
    }
}

/// Loads this shard's keys from the snapshot at start-up, serving the
/// core's clients (INFO, `-LOADING`) every
/// `loading-process-events-interval-bytes` of the file, as Redis does.
pub async fn load_at_start(core: &Core, data: &[u8], path: &Path) -> Result<usize, String> {
    let interval = core.config.borrow().int("loading-process-events-interval-bytes");
    let mut load = ShardLoad::new(core, data, path, false)?;
    loop {
        let before = load.loader.position();
        let done = load.step(core, interval.max(1) as usize)?;
        core.shared.loading.advance(load.loader.position() - before);
        if let Some(keys) = done {
            return Ok(keys);
        }
        futures_lite::future::yield_now().await;
    }
}

/// One shard's load of a file, a step at a time; the shard is borrowed
/// only within a step.
struct ShardLoad<'a> {
    loader: snapshot::Loader<'a>,
    limits: LoadLimits,
    delay: crate::loading::KeyDelay,
    path: &'a Path,
    started: std::time::Instant,
    logged: std::time::Instant,
}

impl<'a> ShardLoad<'a> {
    fn new(core: &Core, data: &'a [u8], path: &'a Path, merge: bool) -> Result<Self, String> {
        let (verify, delay) = {
            let config = core.config.borrow();
            (config.rdbchecksum(), config.int("key-load-delay"))
        };
        let loader = snapshot::Loader::new(data, verify, merge).map_err(|e| fatal(path, e))?;
        let now = std::time::Instant::now();
        Ok(ShardLoad {
            loader,
            limits: load_limits(&core.shard.borrow().state.settings),
            delay: crate::loading::KeyDelay::new(delay),
            path,
            started: now,
            logged: now,
        })
    }

    /// Loads about `budget` more bytes; at the end, the keys loaded.
    fn step(&mut self, core: &Core, budget: usize) -> Result<Option<usize>, String> {
        let report = {
            let mut shard = core.shard.borrow_mut();
            let shard = &mut *shard;
            let delay = &mut self.delay;
            self.loader
                .step(
                    &mut shard.keyspace,
                    &mut shard.state,
                    &self.limits,
                    now_ms(),
                    budget,
                    &mut || delay.after_key(),
                )
                .map_err(|e| fatal(self.path, e))?
        };
        // Large files take a while: the progress is logged at most once a
        // second per shard (keys loaded, how far into the file, the rate).
        if report.is_none() && self.logged.elapsed() >= Duration::from_secs(1) {
            self.logged = std::time::Instant::now();
            info!(
                shard = core.id.0,
                "Loading {}: {} keys, {:.0}%, {:.0} keys/s",
                self.path.display(),
                self.loader.keys(),
                self.loader.position() as f64 * 100.0 / self.loader.total().max(1) as f64,
                self.loader.keys() as f64 / self.started.elapsed().as_secs_f64()
            );
        }
        Ok(report.map(|r| r.keys))
    }
}

fn fatal(path: &Path, e: impl std::fmt::Display) -> String {
    format!(
        "Short read or OOM loading DB ({}): {e}. Unrecoverable error, aborting now.",
        path.display()
    )
}

/// DEBUG RELOAD's options (Redis's): NOSAVE loads the file as it is,
/// NOFLUSH keeps the data, MERGE lets the file replace what it also has.
#[derive(Clone, Copy, Debug)]
pub struct Reload {
    pub save: bool,
    pub flush: bool,
    pub merge: bool,
}

/// DEBUG RELOAD: save, empty every shard, load the file again, all under
/// one lock of every shard (nothing runs in between, as in Redis).
pub async fn debug_reload(core: &Rc<Core>, in_exec: bool, how: Reload) -> Result<(), CmdError> {
    claim(core, !in_exec).await?;
    let target = target(core);
    let result = match lock_all(core, in_exec).await {
        Ok(()) => {
            let result = reload_locked(core, &target, how).await;
            unlock_all(core, in_exec).await.and(result)
        }
        Err(e) => Err(e),
    };
    release(core);
    result
}

async fn reload_locked(core: &Rc<Core>, target: &Target, how: Reload) -> Result<(), CmdError> {
    if how.save {
        if let Err(e) = save_claimed(core, target, true).await {
            warn!("DEBUG RELOAD: {e}");
            return Err(CmdError::new("ERR Error trying to save the DB"));
        }
    }
    let data = match std::fs::read(&target.path) {
        Ok(data) => std::sync::Arc::new(data),
        Err(e) => {
            warn!("DEBUG RELOAD: cannot read {}: {e}", target.path.display());
            return Err(CmdError::new("ERR Error trying to load the RDB dump"));
        }
    };
    let path = target.path.clone();
    let results = core
        .invoke_on_all(move |core| {
            if how.flush {
                empty_for_load(core);
            }
            load_shard(core, &data, &path, how.merge)
        })
        .await?;
    if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
        warn!("DEBUG RELOAD: {e}");
        return Err(CmdError::new("ERR Error trying to load the RDB dump"));
    }
    Ok(())
}

/// Empties this core's shard for a load (Redis's `emptyData`): WATCH,
/// reactive queries and blocked clients see its keys change, and every
/// tracking client of this core drops its cache.
fn empty_for_load(core: &Rc<Core>) {
    ringdb_engine::families::keys::op_empty_for_load(&mut core.shard.borrow_mut());
    crate::push::tracking::invalidate_everything(core);
}

/// DEBUG LOADAOF: every shard writes and syncs its log (when on), empties
/// itself and replays its log file, under one lock of every shard.
pub async fn debug_loadaof(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
    lock_all(core, in_exec).await?;
    let result = loadaof_locked(core).await;
    unlock_all(core, in_exec).await?;
    result
}

async fn loadaof_locked(core: &Rc<Core>) -> Result<(), CmdError> {
    core.invoke_on_all(|core| {
        core.flush_log();
        core.sync_log();
    })
    .await?;
    let config = core.config.borrow().clone();
    let committed = crate::aof::committed_transactions(&config, core.shared.shards())
        .map(std::sync::Arc::new)
        .map_err(|e| {
            warn!("DEBUG LOADAOF: {e}");
            CmdError::new("ERR Error trying to load the AOF files, check server logs.")
        })?;
    let results = core
        .invoke_on_all(move |core| {
            // Everything the log holds goes, as Redis empties its data
            // before loading the AOF.
            empty_for_load(core);
            crate::aof::replay_shard(core, core.shared.shards(), &committed)
        })
        .await;
    if let Some(e) = results?.into_iter().find_map(Result::err) {
        warn!("DEBUG LOADAOF: {e}");
        return Err(CmdError::new("ERR Error trying to load the AOF files, check server logs."));
    }
    Ok(())
}

/// The `save` schedule, BGSAVE SCHEDULE, scheduled and automatic log
/// rewrites, run on core 0 (Redis's `serverCron` part for snapshots).
pub async fn cron(core: Rc<Core>) {
    let mut tick = 0u64;
    loop {
        glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        tick += 1;
        let p = &core.shared.persist;
        if core.shared.cron_paused.load(Relaxed) {
            continue;
        }
        if p.bgsave_in_progress.load(Relaxed) || p.snapshot_busy.load(Relaxed) {
            continue;
        }
        if p.bgsave_scheduled.load(Relaxed) {
            if let Err(e) = bgsave(&core, false).await {
                warn!("scheduled background save: {e}");
            }
            continue;
        }
        // Log rewrites: scheduled ones within a tenth of a second,
        // automatic ones checked once a second.
        let rewrite_due = p.aof_rewrite_scheduled.load(Relaxed)
            || (tick.is_multiple_of(10) && crate::aof::rewrite::due(&core).await);
        if rewrite_due {
            if let Err(e) = crate::aof::rewrite::start(&core).await {
                warn!("log rewrite: {e}");
            }
            continue;
        }
        // The schedule is checked once a second (it counts whole seconds);
        // scheduled saves above start within a tenth.
        let points = core.config.borrow().save_points();
        if points.is_empty() || !tick.is_multiple_of(10) {
            continue;
        }
        let Ok(dirty) = core.invoke_on_all(|core| core.shard.borrow().state.funnel.dirty).await
        else {
            continue;
        };
        let dirty: u64 = dirty.iter().sum();
        let now_s = now_ms() / 1000;
        let since = now_s.saturating_sub(p.last_save.load(Relaxed));
        let retry_ok = p.last_bgsave_ok.load(Relaxed)
            || now_ms().saturating_sub(p.last_bgsave_try_ms.load(Relaxed))
                > BGSAVE_RETRY_DELAY_S * 1000;
        // Redis's test: at least `changes` changes and more than `seconds`
        // seconds since the last save.
        if let Some((seconds, _)) = points.iter().find(|(s, c)| dirty >= *c && since > *s) {
            if retry_ok {
                info!("{dirty} changes in {seconds} seconds. Saving...");
                if let Err(e) = bgsave(&core, false).await {
                    warn!("background save: {e}");
                }
            }
        }
    }
}
