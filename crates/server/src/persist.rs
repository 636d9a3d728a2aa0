//! Snapshots on disk: SAVE, BGSAVE [SCHEDULE], the `save` schedule, DEBUG
//! RELOAD, saving at SHUTDOWN, and loading `dir`/`dbfilename` at start-up.
//!
//! One RDB file for the whole node, as redis-server writes it (so that
//! redis-server and redis-check-rdb read it). Consistency across shards:
//! a snapshot locks every whole shard through the cross-shard transaction
//! scheme (intent locks taken in ascending shard order, as FLUSHALL takes
//! them), so it is taken at one logical point: a cross-shard transaction
//! (MSET over two shards, MULTI/EXEC, a gathered RENAME) is entirely in it
//! or entirely out. Once every lock is held, all shards serialise their own
//! keys in parallel into memory, then release; BGSAVE assembles and writes
//! the file on a background thread while the shards serve again.
//!
//! What this does not do yet: the "no stop" snapshot of the issue (keeping
//! pre-images of entries changed while a shard is being written): a shard
//! is busy while it serialises its keys to bytes (not while the file is
//! written).

use crate::node::Core;
use ringdb_engine::command::CmdError;
use ringdb_engine::families::dump::load_limits;
use ringdb_engine::locks::{LockMode, LockSet, WHOLE_SHARD};
use ringdb_engine::persist::rdb::encode::Encoder;
use ringdb_engine::persist::snapshot::{self, ShardPart};
use ringdb_engine::shard::now_ms;
use ringdb_engine::ShardId;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering::Relaxed};
use tracing::{info, warn};

/// Seconds before a failed background save is retried by the schedule
/// (Redis's `CONFIG_BGSAVE_RETRY_DELAY`).
const BGSAVE_RETRY_DELAY_S: u64 = 5;

pub const SAVE_IN_PROGRESS: CmdError = CmdError::new("ERR Background save already in progress");

/// The node's snapshot state (INFO persistence, LASTSAVE), shared by all
/// cores.
#[derive(Debug)]
pub struct Persistence {
    /// Unix seconds of the last successful save (or of start-up).
    pub last_save: AtomicU64,
    pub bgsave_in_progress: AtomicBool,
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
}

impl Default for Persistence {
    fn default() -> Self {
        Persistence {
            last_save: AtomicU64::new(now_ms() / 1000),
            bgsave_in_progress: AtomicBool::new(false),
            bgsave_scheduled: AtomicBool::new(false),
            last_bgsave_ok: AtomicBool::new(true),
            last_bgsave_time_s: AtomicI64::new(-1),
            bgsave_started_ms: AtomicU64::new(0),
            last_bgsave_try_ms: AtomicU64::new(0),
            saves: AtomicU64::new(0),
            aof_last_write_ok: AtomicBool::new(true),
            aof_last_rewrite_ok: AtomicBool::new(true),
            aof_rewrites: AtomicU64::new(0),
        }
    }
}

fn whole_shard() -> LockSet {
    vec![(WHOLE_SHARD, LockMode::Exclusive)]
}

/// Locks every whole shard, in ascending shard order (the transaction
/// scheme's global order, so this never deadlocks with a transaction).
/// Inside EXEC the locks are held already.
async fn lock_all(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
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

async fn unlock_all(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
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

/// Every shard's part of a snapshot, taken at one logical point.
async fn take_parts(core: &Rc<Core>, in_exec: bool) -> Result<Vec<ShardPart>, CmdError> {
    lock_all(core, in_exec).await?;
    let parts = core
        .invoke_on_all(|core| {
            let encoder = Encoder { compress: core.config.borrow().rdbcompression() };
            let shard = core.shard.borrow();
            snapshot::serialize(&shard.keyspace, &shard.state, now_ms(), encoder)
        })
        .await;
    unlock_all(core, in_exec).await?;
    parts
}

/// How a file is written, fixed when the snapshot is taken.
#[derive(Clone, Debug)]
struct Target {
    path: PathBuf,
    compress: bool,
    checksum: bool,
}

fn target(core: &Core) -> Target {
    let config = core.config.borrow();
    Target {
        path: config.rdb_path(),
        compress: config.rdbcompression(),
        checksum: config.rdbchecksum(),
    }
}

/// The aux fields Redis 7.0 writes at the top of a file.
fn aux_fields() -> Vec<(&'static str, String)> {
    vec![
        ("redis-ver", crate::cmd::connection::REDIS_VERSION.to_string()),
        ("redis-bits", (usize::BITS).to_string()),
        ("ctime", (now_ms() / 1000).to_string()),
        ("used-mem", crate::memory::used_memory().to_string()),
        ("aof-base", "0".to_string()),
    ]
}

/// Assembles and writes the file: a temporary file in the same directory,
/// synced, then renamed over the old one (a crash leaves the old file or
/// the new one, never half of one).
fn write_file(target: &Target, parts: &[ShardPart]) -> std::io::Result<usize> {
    let bytes = snapshot::assemble(
        &aux_fields(),
        parts,
        Encoder { compress: target.compress },
        target.checksum,
    );
    let dir = target.path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let tmp = dir.join(format!("temp-{}.rdb", std::process::id()));
    let result = (|| {
        let mut file = std::fs::File::create(&tmp)?;
        file.write_all(&bytes)?;
        file.sync_all()?;
        std::fs::rename(&tmp, &target.path)?;
        if let Ok(d) = std::fs::File::open(dir) {
            let _ = d.sync_all();
        }
        Ok(bytes.len())
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// After a successful save: the changes it covered no longer count, and
/// LASTSAVE moves.
async fn saved(core: &Rc<Core>, parts: &[ShardPart]) -> Result<(), CmdError> {
    let covered: Vec<u64> = parts.iter().map(|p| p.dirty).collect();
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

/// SAVE (and the save of SHUTDOWN and DEBUG RELOAD): in the foreground.
pub async fn save(core: &Rc<Core>, in_exec: bool) -> Result<(), String> {
    if core.shared.persist.bgsave_in_progress.load(Relaxed) {
        return Err("Background save already in progress".into());
    }
    let target = target(core);
    let parts = take_parts(core, in_exec).await.map_err(|e| e.to_string())?;
    match write_file(&target, &parts) {
        Ok(bytes) => {
            info!("DB saved on disk ({} bytes, {})", bytes, target.path.display());
            saved(core, &parts).await.map_err(|e| e.to_string())
        }
        Err(e) => {
            let reason =
                format!("Failed opening the temp RDB file in {}: {e}", target.path.display());
            warn!("{reason}");
            Err(reason)
        }
    }
}

/// Starts a background save: the snapshot now, the file on a thread.
pub async fn bgsave(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
    let p = &core.shared.persist;
    if p.bgsave_in_progress.swap(true, Relaxed) {
        return Err(SAVE_IN_PROGRESS);
    }
    p.bgsave_scheduled.store(false, Relaxed);
    p.last_bgsave_try_ms.store(now_ms(), Relaxed);
    p.bgsave_started_ms.store(now_ms(), Relaxed);
    let target = target(core);
    let parts = match take_parts(core, in_exec).await {
        Ok(parts) => parts,
        Err(e) => {
            p.bgsave_in_progress.store(false, Relaxed);
            return Err(e);
        }
    };
    info!("Background saving started");
    let (tx, rx) = flume::bounded(1);
    std::thread::Builder::new()
        .name("ringdb-bgsave".into())
        .spawn(move || {
            let result = write_file(&target, &parts).map_err(|e| e.to_string());
            let _ = tx.send((result, parts));
        })
        .map_err(|e| {
            p.bgsave_in_progress.store(false, Relaxed);
            CmdError::owned(format!("ERR Can't save in background: {e}"))
        })?;
    let core = core.clone();
    glommio::spawn_local(async move {
        let p = &core.shared.persist;
        let ok = match rx.recv_async().await {
            Ok((Ok(bytes), parts)) => {
                info!("Background saving terminated with success ({bytes} bytes)");
                saved(&core, &parts).await.is_ok()
            }
            Ok((Err(e), _)) => {
                warn!("Background saving error: {e}");
                false
            }
            Err(_) => false,
        };
        let started = p.bgsave_started_ms.load(Relaxed);
        p.last_bgsave_time_s.store((now_ms().saturating_sub(started) / 1000) as i64, Relaxed);
        p.last_bgsave_ok.store(ok, Relaxed);
        p.bgsave_in_progress.store(false, Relaxed);
    })
    .detach();
    Ok(())
}

/// Reads the snapshot file, if there is one. `Ok(None)`: no file.
pub fn read_file(path: &Path) -> Result<Option<Vec<u8>>, String> {
    match std::fs::read(path) {
        Ok(data) => Ok(Some(data)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(format!("Fatal error loading the DB ({}): {e}. Exiting.", path.display())),
    }
}

/// Loads this core's shard from a file's bytes (keys it owns, function
/// libraries) into an empty keyspace.
pub fn load_shard(core: &Core, data: &[u8], path: &Path) -> Result<usize, String> {
    let verify = core.config.borrow().rdbchecksum();
    let mut shard = core.shard.borrow_mut();
    let shard = &mut *shard;
    let limits = load_limits(&shard.state.settings);
    let report = snapshot::load(data, &mut shard.keyspace, &shard.state, &limits, now_ms(), verify)
        .map_err(|e| {
            format!(
                "Short read or OOM loading DB ({}): {e}. Unrecoverable error, aborting now.",
                path.display()
            )
        })?;
    for code in &report.functions {
        shard.state.scripting.function_load(&bytes::Bytes::copy_from_slice(code), true).map_err(
            |e| format!("Failed loading a function library from {}: {e}", path.display()),
        )?;
    }
    Ok(report.keys)
}

/// DEBUG RELOAD: save, empty every shard, load the file again, all under
/// one lock of every shard (nothing runs in between, as in Redis).
pub async fn debug_reload(core: &Rc<Core>, in_exec: bool) -> Result<(), CmdError> {
    if core.shared.persist.bgsave_in_progress.load(Relaxed) {
        return Err(SAVE_IN_PROGRESS);
    }
    let target = target(core);
    lock_all(core, in_exec).await?;
    let result = reload_locked(core, &target).await;
    unlock_all(core, in_exec).await?;
    result
}

async fn reload_locked(core: &Rc<Core>, target: &Target) -> Result<(), CmdError> {
    let parts = core
        .invoke_on_all(|core| {
            let encoder = Encoder { compress: core.config.borrow().rdbcompression() };
            let shard = core.shard.borrow();
            snapshot::serialize(&shard.keyspace, &shard.state, now_ms(), encoder)
        })
        .await?;
    if let Err(e) = write_file(target, &parts) {
        warn!("DEBUG RELOAD: {e}");
        return Err(CmdError::new("ERR Error trying to save the DB"));
    }
    saved(core, &parts).await?;
    let data = std::sync::Arc::new(std::fs::read(&target.path).unwrap_or_default());
    let path = target.path.clone();
    let results = core
        .invoke_on_all(move |core| {
            {
                let mut shard = core.shard.borrow_mut();
                for db in 0..shard.keyspace.db_count() {
                    shard.keyspace.db_mut(db).clear();
                }
                shard.state.scripting.function_flush();
            }
            load_shard(core, &data, &path)
        })
        .await?;
    if let Some(Err(e)) = results.into_iter().find(|r| r.is_err()) {
        warn!("DEBUG RELOAD: {e}");
        return Err(CmdError::new("ERR Error trying to load the RDB dump"));
    }
    Ok(())
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
            {
                let mut shard = core.shard.borrow_mut();
                for db in 0..shard.keyspace.db_count() {
                    shard.keyspace.db_mut(db).clear();
                }
            }
            crate::aof::replay_shard(core, core.shared.shards(), &committed)
        })
        .await;
    if let Some(e) = results?.into_iter().find_map(Result::err) {
        warn!("DEBUG LOADAOF: {e}");
        return Err(CmdError::new("ERR Error trying to load the AOF files, check server logs."));
    }
    Ok(())
}

/// The `save` schedule and BGSAVE SCHEDULE, run on core 0 (Redis's
/// `serverCron` part for snapshots).
pub async fn cron(core: Rc<Core>) {
    let mut tick = 0u64;
    loop {
        glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
        tick += 1;
        let p = &core.shared.persist;
        if p.bgsave_in_progress.load(Relaxed) {
            continue;
        }
        if p.bgsave_scheduled.load(Relaxed) {
            if let Err(e) = bgsave(&core, false).await {
                warn!("scheduled background save: {e}");
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
