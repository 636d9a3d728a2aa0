//! MULTI/EXEC and WATCH across shards.
//!
//! While a connection is in MULTI the router queues its commands (`+QUEUED`).
//! EXEC then runs them as one transaction of the cross-shard scheme:
//!
//! 1. **Lock ahead.** The keys every queued command names (and every WATCHed
//!    key) are locked on their shards, shard by shard in ascending order; a
//!    queued command that visits every shard (DBSIZE, FLUSHALL, KEYS, …) locks
//!    each shard whole. While locking, each shard checks the WATCHed keys it
//!    owns: a key changed since WATCH fails the EXEC (a null array) before
//!    anything runs.
//! 2. **Run.** Commands run in order. Consecutive commands bound for the same
//!    shard travel as one hop (Dragonfly's squashing); a command whose keys
//!    span shards runs its split or gather without taking locks again; server
//!    commands run on this core.
//! 3. **Release** every lock (and the WATCHes) in one hop per shard.
//!
//! No other client can touch a locked key in between, so nobody observes a
//! partial transaction. Runtime errors are replies in place; nothing rolls
//! back, as in Redis.
//!
//! In the append-only logs the transaction is all or nothing, as Redis
//! wraps it in MULTI … EXEC in its AOF: each shard holds back what the
//! transaction's steps change, and the release step logs it as that
//! shard's part of one cross-shard transaction (see `crate::aof`), before
//! EXEC's reply leaves.

use super::Path;
use crate::aof::{end_exec, log_part, PartLog};
use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::spec::flags;
use ringdb_engine::command::{CmdError, CmdResult, Exec, NodeCommand, Registered};
use ringdb_engine::locks::{fingerprint, LockMode, LockSet, WHOLE_SHARD};
use ringdb_engine::shard::{now_ms, Caller, Clock};
use ringdb_engine::{Shard, ShardCommand, ShardId};
use std::collections::BTreeMap;

/// A command queued in MULTI.
pub struct Queued {
    pub reg: &'static Registered,
    pub args: Vec<Bytes>,
}

/// A connection's open MULTI.
#[derive(Default)]
pub struct Multi {
    pub queued: Vec<Queued>,
    /// A command was refused while queueing: EXEC will abort.
    pub failed: bool,
}

impl Multi {
    /// MULTI on a connection whose transaction (if open) is `slot`; the
    /// busy hook answers it the same way while a script holds the core.
    pub fn begin(slot: &mut Option<Multi>) -> CmdResult {
        if slot.is_some() {
            return Err(CmdError::new("ERR MULTI calls can not be nested"));
        }
        *slot = Some(Multi::default());
        Ok(())
    }

    /// DISCARD: ends the open transaction (the caller forgets its WATCHed
    /// keys).
    pub fn discard(slot: &mut Option<Multi>) -> CmdResult {
        match slot.take() {
            Some(_) => Ok(()),
            None => Err(CmdError::new("ERR DISCARD without MULTI")),
        }
    }

    /// Queues a command (`+QUEUED`), or refuses one that may not run in a
    /// transaction, which fails the EXEC. A failed transaction keeps
    /// nothing (Redis frees nothing it will not run either).
    pub fn queue(&mut self, reg: &'static Registered, args: Vec<Bytes>) -> CmdResult {
        if !allowed_in_multi(reg) {
            self.failed = true;
            return Err(CmdError::new("ERR Command not allowed inside a transaction"));
        }
        if !self.failed {
            self.queued.push(Queued { reg, args });
        }
        Ok(())
    }
}

impl std::fmt::Debug for Multi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Multi {{ queued: {}, failed: {} }}", self.queued.len(), self.failed)
    }
}

/// A key this connection WATCHes.
#[derive(Clone, Debug)]
pub struct WatchedKey {
    pub shard: ShardId,
    pub db: usize,
    pub key: Bytes,
    /// Its version on its shard when WATCH ran.
    pub version: u64,
    /// It had expired (was logically absent) when WATCH ran.
    pub expired: bool,
}

pub const EXECABORT: CmdError =
    CmdError::new("EXECABORT Transaction discarded because of previous errors.");

/// Server commands that read or change every shard: inside EXEC they lock
/// every shard whole. MIGRATE too: it locks its keys itself outside EXEC,
/// but inside one its steps run under the transaction's locks.
fn visits_every_shard(cmd: NodeCommand) -> bool {
    use NodeCommand as N;
    matches!(
        cmd,
        N::DbSize
            | N::FlushDb
            | N::FlushAll
            | N::SwapDb
            | N::Keys
            | N::Scan
            | N::RandomKey
            | N::Debug
            | N::Migrate
    )
}

/// WATCH: registers the keys on their shards and remembers their versions.
pub async fn watch(conn: &mut Connection, keys: &[Bytes]) -> CmdResult {
    let slot_map = conn.core.shared.slot_map;
    let db = conn.state.db;
    for key in keys {
        if conn.state.watched.iter().any(|w| w.db == db && w.key == *key) {
            continue;
        }
        let shard = slot_map.shard_of_key(key);
        let k = key.clone();
        let (version, expired) = conn
            .core
            .invoke_on(shard, move |core| {
                let mut shard = core.shard.borrow_mut();
                let expired = shard.keyspace.db(db).get(&k).is_some_and(|e| e.is_expired(now_ms()));
                (shard.state.funnel.watches.watch(db, &k), expired)
            })
            .await?;
        conn.state.watched.push(WatchedKey { shard, db, key: key.clone(), version, expired });
    }
    Ok(())
}

/// Lets go of every WATCHed key (UNWATCH, DISCARD, RESET, disconnect).
pub async fn unwatch_all(conn: &mut Connection) {
    let watched = std::mem::take(&mut conn.state.watched);
    for (shard, keys) in by_shard(watched) {
        conn.core
            .send_job(
                shard,
                Box::new(move |core| {
                    let mut shard = core.shard.borrow_mut();
                    for w in keys {
                        shard.state.funnel.watches.unwatch(w.db, &w.key);
                    }
                }),
            )
            .await;
    }
}

fn by_shard(watched: Vec<WatchedKey>) -> BTreeMap<ShardId, Vec<WatchedKey>> {
    let mut map: BTreeMap<ShardId, Vec<WatchedKey>> = BTreeMap::new();
    for w in watched {
        map.entry(w.shard).or_default().push(w);
    }
    map
}

/// Whether a WATCHed key changed, judged on its shard (Redis 7.0's rules:
/// any change after WATCH, and a key that expires after WATCH, fail the
/// transaction; a key already expired at WATCH that is merely reclaimed
/// does not).
fn changed(shard: &Shard, w: &WatchedKey, now: u64) -> bool {
    let version = shard.state.funnel.watches.version(w.db, &w.key);
    let entry = shard.keyspace.db(w.db).get(&w.key);
    let exists = entry.is_some_and(|e| !e.is_expired(now));
    let expired_now = entry.is_some_and(|e| e.is_expired(now));
    if w.expired {
        version != Some(w.version) && exists
    } else {
        version != Some(w.version) || expired_now
    }
}

/// EXEC.
pub async fn exec(conn: &mut Connection) -> CmdResult {
    let Some(multi) = conn.state.multi.take() else {
        return Err(CmdError::new("ERR EXEC without MULTI"));
    };
    if multi.failed {
        unwatch_all(conn).await;
        return Err(EXECABORT);
    }
    let watched = std::mem::take(&mut conn.state.watched);
    let plan = lock_plan(conn, &multi.queued, &watched);

    // Lock ahead, checking the WATCHed keys of each shard as it is locked.
    let mut watched_by_shard = by_shard(watched);
    let steps: Vec<super::cross::AcquireStep<bool>> = plan
        .iter()
        .map(|(shard, locks)| {
            let keys = watched_by_shard.remove(shard).unwrap_or_default();
            let check: Box<dyn FnOnce(&mut Shard) -> bool + Send> =
                Box::new(move |s: &mut Shard| {
                    let now = now_ms();
                    let ok = !keys.iter().any(|w| changed(s, w, now));
                    for w in &keys {
                        s.state.funnel.watches.unwatch(w.db, &w.key);
                    }
                    ok
                });
            (*shard, locks.clone(), check)
        })
        .collect();
    let unchanged = super::cross::acquire_in_order(conn, steps).await?;

    let mut ran = None;
    if unchanged.iter().all(|ok| *ok) {
        conn.state.in_exec = true;
        conn.state.exec_id = super::cross::transaction_id(conn);
        conn.reply().array(multi.queued.len());
        let visited = run_queued(conn, multi.queued).await;
        conn.state.in_exec = false;
        ran = Some((conn.state.exec_id, visited));
    } else {
        conn.reply().null_array();
    }
    release(conn, plan, ran).await;
    Ok(())
}

/// The shards EXEC ran commands on itself (not through a cross-shard step),
/// and whether one of those commands may write.
type Visited = BTreeMap<ShardId, bool>;

/// The locks EXEC takes, by shard in ascending order.
fn lock_plan(
    conn: &Connection,
    queued: &[Queued],
    watched: &[WatchedKey],
) -> Vec<(ShardId, LockSet)> {
    let slot_map = conn.core.shared.slot_map;
    let databases = conn.core.config.borrow().databases();
    let mut plan: BTreeMap<ShardId, LockSet> = BTreeMap::new();
    let mut whole = false;
    // SELECT inside the transaction changes the database of what follows.
    let mut db = conn.state.db;
    for q in queued {
        let spec = q.reg.spec;
        match spec.exec {
            Exec::Node(NodeCommand::Select) => {
                if let Some(n) = q.args.get(1).and_then(|a| ringdb_types::number::parse_i64(a)) {
                    if n >= 0 && (n as usize) < databases {
                        db = n as usize;
                    }
                }
            }
            Exec::Node(cmd) if visits_every_shard(cmd) => whole = true,
            // A script may touch any key of any shard.
            Exec::Shard(_) if spec.has(flags::RUNS_SCRIPT) => whole = true,
            Exec::Shard(_) | Exec::Split { .. } => {
                // Scripts (EVAL, FCALL) may write: exclusive too.
                let mode =
                    if spec.locks_exclusively() { LockMode::Exclusive } else { LockMode::Shared };
                // COPY … DB and MOVE also touch the key in another database.
                let every_db = spec.has(flags::OTHER_DBS);
                spec.for_each_key(&q.args, |i| {
                    let key = &q.args[i];
                    let locks = plan.entry(slot_map.shard_of_key(key)).or_default();
                    if every_db {
                        locks.extend((0..databases).map(|d| (fingerprint(d, key), mode)));
                    } else {
                        locks.push((fingerprint(db, key), mode));
                    }
                });
            }
            Exec::Node(_) | Exec::Container => {}
        }
    }
    for w in watched {
        plan.entry(w.shard).or_default().push((fingerprint(w.db, &w.key), LockMode::Shared));
    }
    if whole {
        let all = vec![(WHOLE_SHARD, LockMode::Exclusive)];
        return (0..conn.core.shared.shards()).map(|i| (ShardId(i as u16), all.clone())).collect();
    }
    plan.into_iter().collect()
}

/// Runs the queued commands in order, writing each reply to `conn.out`;
/// returns the shards it ran commands on.
async fn run_queued(conn: &mut Connection, queued: Vec<Queued>) -> Visited {
    // Consecutive commands for one shard, sent as one hop.
    let mut group: Option<(ShardId, Vec<ShardCommand>)> = None;
    let mut visited = Visited::new();
    for Queued { reg, args } in queued {
        // The rules may have changed since the command was queued (Redis
        // checks again at EXEC).
        if !conn.state.user.unrestricted() {
            let verdict = conn.state.user.check(reg, &args);
            if verdict != ringdb_engine::acl::Verdict::Allowed {
                run_group(conn, group.take()).await;
                let context = ringdb_engine::acl::Context::Multi;
                crate::cmd::acl::log_denial(conn, verdict, &reg.full_name, &args, context);
                conn.reply().error(&verdict.exec_error());
                continue;
            }
        }
        crate::cmd::acl::note_key_reads(conn, reg, &args);
        let path = super::path(conn, reg, args, false);
        if !matches!(path, Path::One(..)) {
            run_group(conn, group.take()).await;
        }
        match path {
            Path::One(shard, command) => {
                *visited.entry(shard).or_default() |= reg.spec.locks_exclusively();
                match &mut group {
                    Some((s, cmds)) if *s == shard => cmds.push(command),
                    _ => {
                        run_group(conn, group.take()).await;
                        group = Some((shard, vec![command]));
                    }
                }
            }
            Path::Script(command) => {
                // Every shard is locked exclusively: each logs its part.
                let mark = conn.out.len();
                if let Err(e) = super::script::run_in_exec(conn, command).await {
                    conn.out.truncate(mark);
                    conn.reply().error(e.text());
                }
            }
            Path::Many(command) => super::run_many(conn, command).await,
            // Boxed: EXEC is itself a server command (the future would
            // otherwise contain itself). Only here: a boxed server command
            // is a large allocation, which INFO's used_memory would count.
            Path::Node(node, args) => Box::pin(super::run_node(conn, node, reg, &args)).await,
            // Not asked for: EXEC's commands never wait.
            Path::Blocking(_) => conn.reply().error("ERR internal error: a queued command blocked"),
            Path::Container => conn.reply().error("ERR unknown subcommand"),
        }
    }
    run_group(conn, group).await;
    visited
}

/// Runs a group of commands on their shard in one hop, without lock checks
/// (the transaction holds the locks).
async fn run_group(conn: &mut Connection, group: Option<(ShardId, Vec<ShardCommand>)>) {
    let Some((shard, commands)) = group else { return };
    let n = commands.len();
    let held = PartLog::Exec(conn.state.exec_id);
    let result = conn
        .core
        .invoke_on(shard, move |core| {
            let mut shard = core.shard.borrow_mut();
            let mut clock = Clock::start();
            let mut out = Vec::new();
            log_part(&mut shard, held, |shard| {
                for command in &commands {
                    shard.call(command, &mut out, &mut clock, Caller::Client);
                }
            });
            drop(shard);
            core.publish_changes();
            out
        })
        .await;
    match result {
        Ok(replies) => conn.out.extend_from_slice(&replies),
        Err(e) => {
            for _ in 0..n {
                conn.reply().error(e.text());
            }
        }
    }
}

/// Releases EXEC's locks, one hop per shard. When the transaction ran
/// (`ran`: its id and the shards it visited), each shard first logs what it
/// held back for it: a part of one transaction on every shard where it
/// could write (an exclusive lock, or a command that may write), so that
/// after a crash it is replayed only if every such shard's log has its part.
async fn release(conn: &Connection, plan: Vec<(ShardId, LockSet)>, ran: Option<(u64, Visited)>) {
    let mut shards: BTreeMap<ShardId, (LockSet, bool)> = plan
        .into_iter()
        .map(|(shard, locks)| {
            let writes = locks.iter().any(|(_, mode)| *mode == LockMode::Exclusive);
            (shard, (locks, writes))
        })
        .collect();
    let exec_id = ran.as_ref().map(|(id, _)| *id);
    for (shard, writes) in ran.map(|(_, visited)| visited).unwrap_or_default() {
        shards.entry(shard).or_default().1 |= writes;
    }
    let parts = shards.values().filter(|(_, writes)| *writes).count();
    let mut waiting = Vec::with_capacity(shards.len());
    for (shard, (locks, writes)) in shards {
        let (tx, rx) = flume::bounded(1);
        conn.core
            .send_job(
                shard,
                Box::new(move |core| {
                    if let Some(id) = exec_id {
                        let mut shard = core.shard.borrow_mut();
                        end_exec(&mut shard, id, writes.then_some(parts));
                        drop(shard);
                        // Logged (and synced) before EXEC's reply leaves.
                        core.publish_changes();
                    }
                    core.shard.borrow_mut().tx_release(&locks);
                    let _ = tx.send(());
                }),
            )
            .await;
        waiting.push(rx);
    }
    for rx in waiting {
        let _ = rx.recv_async().await;
    }
}

/// Whether a command may be queued in MULTI (Redis: commands flagged
/// `no_multi` are refused).
fn allowed_in_multi(reg: &Registered) -> bool {
    !reg.spec.has(flags::NO_MULTI)
}
