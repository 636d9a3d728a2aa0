//! Routing: where each command of a read runs.
//!
//! For every request: look the command up in the table, check arity and
//! authentication, find its keys from the row's key specs, and map them to
//! shards. Then:
//! - keys on one shard (the common case): the command joins that shard's
//!   batch for this read ([`segment`]); on the connection's own shard it runs
//!   at once;
//! - keys on several shards: the segment so far is finished, and the command
//!   runs as a cross-shard operation ([`cross`]);
//! - connection and server commands run on this core ([`crate::cmd`]), after
//!   the segment so far is finished.
//!
//! Replies always go out in request order.

pub mod busy;
pub mod cross;
pub mod debug;
pub mod multi;
pub mod pause;
pub mod script;
pub mod segment;

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::error::NOAUTH;
use ringdb_engine::command::spec::{flags, Debugs};
use ringdb_engine::command::{table, CmdError, Exec, NodeCommand, Registered};
use ringdb_engine::evict::OOM;
use ringdb_engine::{ShardCommand, ShardId};
use ringdb_protocol::Request;
use segment::Segment;

/// Replies buffered beyond this are written before more commands run.
const OUTPUT_FLUSH_BYTES: usize = 1 << 20;

/// Runs the commands of one read, taking them out of `requests` (whose
/// memory the connection keeps for its next read), and leaves their replies
/// in `conn.out`.
pub async fn execute(conn: &mut Connection, requests: &mut Vec<Request>) {
    let mut segment = Segment::default();
    if requests.len() > 1 {
        conn.core.shard.borrow().prefetch(conn.state.db, requests.iter().map(|r| &r.args[..]));
    }
    conn.meter.executing = requests.iter().map(|r| r.wire_len).sum();
    let mut previous = 0;
    for request in requests.drain(..) {
        if conn.state.close_after_reply {
            break;
        }
        // The command before is done with its bytes.
        conn.meter.executing -= std::mem::replace(&mut previous, request.wire_len);
        conn.meter.argv_mem = request.args.iter().map(|a| a.len()).sum();
        // A long pipeline of big replies is written out as it goes, so the
        // replies held in memory stay bounded (and a slow reader holds the
        // pipeline back instead of growing our buffers).
        if conn.out.size() + segment.buffered() >= OUTPUT_FLUSH_BYTES {
            segment.finish(conn).await;
            // The replies of writes leave once the log has them.
            conn.core.publish_durably().await;
            if conn.flush().await.is_err() {
                conn.state.close_after_reply = true;
                break;
            }
        }
        let args = request.args;
        let skip = std::mem::take(&mut conn.state.skip_next);
        if std::mem::take(&mut conn.state.caching_spent) {
            conn.state.caching = false;
        }
        let reg = match table().resolve(&args) {
            Ok(reg) => reg,
            Err(e) => {
                // A known command with the wrong arity is "rejected" in its
                // INFO commandstats, as in Redis; an unknown one has no row.
                let row = rejected_row(&args);
                reject(conn, &mut segment, row, &e, skip).await;
                continue;
            }
        };
        let spec = reg.spec;
        conn.handle.view.borrow_mut().last_cmd = reg.full_name.as_str();
        // Also when CACHING is not set yet: a transaction may set it.
        conn.state.caching_spent = spends_caching(conn, reg);
        if !conn.state.authenticated && !spec.has(flags::NO_AUTH) {
            reject(conn, &mut segment, Some(reg), &NOAUTH, skip).await;
            continue;
        }
        crate::cmd::acl::keep_user_current(conn);
        if !conn.state.user.unrestricted() {
            if let Err(e) = crate::cmd::acl::check(conn, reg, &args) {
                reject(conn, &mut segment, Some(reg), &e, skip).await;
                continue;
            }
        }
        crate::cmd::acl::note_key_reads(conn, reg, &args);
        if spec.has(flags::PROTECTED) && !protected_allowed(conn) {
            reject(conn, &mut segment, Some(reg), &CmdError::new(DEBUG_NOT_ALLOWED), skip).await;
            continue;
        }
        if !spec.has(flags::LOADING) && conn.core.shared.loading.active() {
            reject(conn, &mut segment, Some(reg), &crate::loading::LOADING, skip).await;
            continue;
        }
        if let Err(e) = crate::repl::gate(conn, reg) {
            reject(conn, &mut segment, Some(reg), &e, skip).await;
            continue;
        }
        if conn.core.shared.scripts.any_busy() && !spec.has(flags::ALLOW_BUSY) {
            if let Some(busy) = busy_error(&conn.core) {
                reject(conn, &mut segment, Some(reg), &CmdError::new(busy), skip).await;
                continue;
            }
        }
        if conn.state.in_push_mode() && !spec.has(flags::PUSH_MODE) {
            let error = if !conn.state.watching() {
                crate::cmd::pubsub::subscriber_mode_error(&reg.full_name)
            } else {
                crate::cmd::watch::watch_mode_error(&reg.full_name)
            };
            segment.reply_error(conn, &error, skip || conn.state.reply_off);
            continue;
        }
        if over_limits(&conn.core) {
            // What the shards push as they give up keys (invalidations)
            // precedes this command's reply, as in Redis.
            segment.finish(conn).await;
            conn.core.enforce_limits().await;
            conn.write_pushes();
        }
        if conn.state.multi.is_some() && !spec.has(flags::CONTROLS_MULTI) {
            queue(conn, &mut segment, reg, args, skip).await;
            continue;
        }
        if pause::holds(conn, reg, &args) {
            segment.finish(conn).await;
            pause::wait(conn, reg, &args).await;
        }
        crate::cmd::monitor::feed(conn, spec, &args);
        if let (Some(mode), true) = (conn.state.debugger, spec.debugs != Debugs::No) {
            segment.finish(conn).await;
            debug::run(conn, reg, args, mode).await;
            continue;
        }
        if matches!(spec.exec, Exec::Shard(_)) && read_from_copy(conn, &segment, reg, &args, skip) {
            continue;
        }
        let suppress = skip || conn.state.reply_off;
        match path(conn, reg, args, true) {
            Path::One(shard, command) => segment.push(conn, shard, command, suppress),
            Path::Script(command) => {
                segment.finish(conn).await;
                let mark = conn.out.len();
                if let Err(e) = script::run(conn, command).await {
                    conn.out.truncate(mark);
                    conn.reply().error(e.text());
                }
                if suppress {
                    conn.out.truncate(mark);
                }
            }
            Path::Blocking(args) => {
                segment.finish(conn).await;
                let mark = conn.out.len();
                crate::cmd::blocking::run(conn, reg, args).await;
                if suppress {
                    conn.out.truncate(mark);
                }
            }
            Path::Many(command) => {
                segment.finish(conn).await;
                let mark = conn.out.len();
                run_many(conn, command).await;
                if suppress {
                    conn.out.truncate(mark);
                }
            }
            Path::Node(..) if may_grow_memory(conn, reg) && out_of_memory(&conn.core) => {
                reject(conn, &mut segment, Some(reg), &CmdError::new(OOM), skip).await;
            }
            Path::Node(node, args) => {
                segment.finish(conn).await;
                let mark = conn.out.len();
                conn.state.skip_current = skip;
                run_node(conn, node, reg, &args).await;
                // Subscription confirmations are pushes: CLIENT REPLY OFF or
                // SKIP does not hold them back (Redis's CLIENT_PUSHING).
                let suppressed =
                    std::mem::take(&mut conn.state.skip_current) || conn.state.reply_off;
                if suppressed && !spec.has(flags::PUSH_REPLY) {
                    conn.out.truncate(mark);
                }
            }
            Path::Container => {
                // `resolve` always returns a subcommand for containers.
                segment.reply_error(conn, &CmdError::new("ERR unknown subcommand"), skip);
            }
        }
    }
    segment.finish(conn).await;
    conn.meter.executing = 0;
    conn.meter.argv_mem = 0;
    conn.core.publish_durably().await;
}

/// Redis's refusal of DEBUG (the one PROTECTED row) unless
/// `enable-debug-command` allows it to this client.
const DEBUG_NOT_ALLOWED: &str = "ERR DEBUG command not allowed. If the enable-debug-command option is set to \"local\", you can run it from a local connection, otherwise you need to set this option in the configuration file, and then restart the server.";

fn protected_allowed(conn: &Connection) -> bool {
    conn.core.config.borrow().allows("enable-debug-command", conn.is_local())
}

/// Whether CLIENT CACHING stops applying once this command has run: it
/// covers the next command, or the next transaction whole, and CLIENT
/// commands leave it alone (Redis's `resetClient`).
fn spends_caching(conn: &Connection, reg: &Registered) -> bool {
    use ringdb_engine::command::NodeCommand as N;
    if reg.parent.is_some_and(|p| p.has(flags::KEEPS_CACHING)) {
        return false;
    }
    match reg.spec.exec {
        Exec::Node(N::Multi) => false,
        Exec::Node(N::Exec | N::Discard) => true,
        _ => conn.state.multi.is_none(),
    }
}

/// `GET` of another shard's hot key with a read copy on this core
/// (`hotkeys-replicate-reads`): answered here, without a hop to the owner.
/// Only when nothing of this read is still waiting for a shard, so that a
/// pipelined write before it is never overtaken. Returns whether it
/// answered.
fn read_from_copy(
    conn: &mut Connection,
    segment: &Segment,
    reg: &Registered,
    args: &[Bytes],
    skip: bool,
) -> bool {
    if !reg.spec.has(flags::READ_COPY) || args.len() != 2 || !segment.is_idle() {
        return false;
    }
    let reply = {
        let replicas = conn.core.replicas.borrow();
        if replicas.is_empty() {
            return false;
        }
        let Some(slot) = replicas.get(&(conn.state.db, args[1].clone())) else { return false };
        let Some(reply) = slot.read(ringdb_engine::shard::now_ms()) else { return false };
        reply
    };
    conn.core.replica_reads.set(conn.core.replica_reads.get() + 1);
    {
        let mut shard = conn.core.shard.borrow_mut();
        shard.state.count_call(reg.id, reg.spec, 0, false);
        shard.state.stats.keyspace_hits += 1;
    }
    if !(skip || conn.state.reply_off) {
        conn.out.extend_from_slice(&reply);
    }
    true
}

/// Redis's BUSY reply while a script has been running past the busy
/// threshold: a busy script makes the whole server busy, as in Redis, on
/// every core (only checked while some script is busy: one atomic load
/// otherwise).
pub(crate) fn busy_error(core: &crate::node::Core) -> Option<&'static str> {
    core.shared.scripts.any_busy_error()
}

/// A command refused before it runs (Redis's `rejectCommand`): a rejected
/// call of its row in INFO commandstats, an open MULTI fails at
/// EXEC, and the error is its reply; a refused EXEC discards the
/// transaction and answers EXECABORT with the error.
async fn reject(
    conn: &mut Connection,
    segment: &mut Segment,
    row: Option<&Registered>,
    error: &CmdError,
    skip: bool,
) {
    if let Some(row) = row {
        conn.core.shard.borrow_mut().state.stats.command(row.id).rejected_calls += 1;
    }
    let suppress = skip || conn.state.reply_off;
    if row.is_some_and(|row| matches!(row.spec.exec, Exec::Node(NodeCommand::Exec))) {
        conn.state.multi = None;
        multi::unwatch_all(conn).await;
        segment.reply_error(conn, &CmdError::owned(exec_abort_text(error.text())), suppress);
        return;
    }
    if let Some(multi) = &mut conn.state.multi {
        multi.failed = true;
    }
    segment.reply_error(conn, error, suppress);
}

/// Redis's reply to an EXEC refused before it runs (`execCommandAbort`).
pub(crate) fn exec_abort_text(error: &str) -> String {
    format!("EXECABORT Transaction discarded because of: {error}")
}

/// Whether a server command may grow memory: a DENYOOM one, or EXEC of a
/// transaction with one (Redis refuses that EXEC whole when out of memory).
fn may_grow_memory(conn: &Connection, reg: &Registered) -> bool {
    match reg.spec.exec {
        Exec::Node(NodeCommand::Exec) => conn
            .state
            .multi
            .as_ref()
            .is_some_and(|m| m.queued.iter().any(|q| q.reg.spec.has(flags::DENYOOM))),
        _ => reg.spec.has(flags::DENYOOM),
    }
}

/// Whether a server command that may grow memory (FUNCTION LOAD, FUNCTION
/// RESTORE) must be refused: the process is over `maxmemory` and this
/// core's shard has nothing left to evict (see `ringdb_engine::evict`).
fn out_of_memory(core: &crate::node::Core) -> bool {
    let mut shard = core.shard.borrow_mut();
    ringdb_engine::evict::make_room(&mut shard, ringdb_engine::shard::now_ms());
    shard.state.oom
}

/// Whether the process is over `maxmemory` (and must evict) or over
/// `tracking-table-max-keys` before the next command: a load and a branch
/// when it is not.
fn over_limits(core: &crate::node::Core) -> bool {
    core.shared.tracked.over_limit() || ringdb_engine::evict::must_evict(&core.shard.borrow())
}

/// The row a request that failed to resolve would have run, when the command
/// (and its subcommand) exist and only the arity was wrong.
fn rejected_row(args: &[Bytes]) -> Option<&'static Registered> {
    let reg = table().get(args.first()?)?;
    if !matches!(reg.spec.exec, Exec::Container) {
        return Some(reg);
    }
    let sub = String::from_utf8_lossy(args.get(1)?);
    table().get_full(format!("{}|{}", reg.spec.name, sub).as_bytes())
}

/// Queues a command of an open MULTI: `+QUEUED`, or Redis's error for a
/// command that may not run in a transaction (which fails the EXEC).
async fn queue(
    conn: &mut Connection,
    segment: &mut Segment,
    reg: &'static Registered,
    args: Vec<Bytes>,
    skip: bool,
) {
    // Over `maxmemory`, a write that may grow memory fails the transaction
    // at once, as Redis refuses it before queueing.
    if reg.spec.has(flags::DENYOOM) && out_of_memory(&conn.core) {
        reject(conn, segment, Some(reg), &CmdError::new(OOM), skip).await;
        return;
    }
    let suppress = skip || conn.state.reply_off;
    let queued = conn.state.multi.as_mut().map(|m| m.queue(reg, args));
    match queued {
        Some(Err(e)) => segment.reply_error(conn, &e, suppress),
        _ => segment.reply_status(conn, "QUEUED", suppress),
    }
}

pub(crate) enum Target {
    One(ShardId),
    Many,
}

/// How a resolved command runs: the one decision both dispatchers (a
/// pipeline's, and EXEC's over its queued commands) take from the row.
pub(crate) enum Path {
    /// On one shard (its keys' owner, or this core for a keyless one).
    One(ShardId, ShardCommand),
    /// Over several shards' keys (`cross`).
    Many(ShardCommand),
    /// A script on a node of several shards: it may touch any key, and
    /// runs where the core's knowledge of it says (`script`).
    Script(ShardCommand),
    /// A blocking command that may wait for its keys (`cmd::blocking`);
    /// inside EXEC it never waits and takes the shard paths.
    Blocking(Vec<Bytes>),
    /// A server command, run on the connection's core (`cmd`).
    Node(NodeCommand, Vec<Bytes>),
    /// A container without its subcommand.
    Container,
}

/// The [`Path`] of `reg` called with `args`; `may_wait`: a blocking
/// command may block (not inside EXEC).
pub(crate) fn path(
    conn: &Connection,
    reg: &'static Registered,
    args: Vec<Bytes>,
    may_wait: bool,
) -> Path {
    let spec = reg.spec;
    let command = |args| ShardCommand { id: reg.id, spec, args, client: conn.state.info() };
    match spec.exec {
        Exec::Shard(_) if spec.has(flags::RUNS_SCRIPT) && conn.core.shared.shards() > 1 => {
            Path::Script(command(args))
        }
        Exec::Shard(_) if may_wait && spec.has(flags::BLOCKING) => Path::Blocking(args),
        Exec::Shard(_) | Exec::Split { .. } => {
            let command = command(args);
            match target(conn, &command) {
                Target::One(shard) => Path::One(shard, command),
                Target::Many => Path::Many(command),
            }
        }
        Exec::Node(node) => Path::Node(node, args),
        Exec::Container => Path::Container,
    }
}

/// Runs a command over several shards' keys; an error is its reply.
pub(crate) async fn run_many(conn: &mut Connection, command: ShardCommand) {
    let mark = conn.out.len();
    if let Err(e) = cross::run(conn, command, false).await {
        conn.out.truncate(mark);
        conn.reply().error(e.text());
    }
}

/// Runs a server command; an error is its reply, counted as Redis counts
/// every error reply.
pub(crate) async fn run_node(
    conn: &mut Connection,
    node: NodeCommand,
    reg: &'static Registered,
    args: &[Bytes],
) {
    let mark = conn.out.len();
    if let Err(e) = crate::cmd::run(conn, node, reg, args).await {
        conn.out.truncate(mark);
        conn.reply().error(e.text());
        conn.core.shard.borrow_mut().state.stats.error(e.code());
    }
}

/// The shard a command must run on: the owner of its keys, this core for a
/// keyless command, or several.
pub(crate) fn target(conn: &Connection, command: &ShardCommand) -> Target {
    let slot_map = conn.core.shared.slot_map;
    let home = conn.core.id;
    let mut first = None;
    let mut many = false;
    let found = command.spec.for_each_key(&command.args, |i| {
        let shard = slot_map.shard_of_key(&command.args[i]);
        match first {
            None => first = Some(shard),
            Some(f) if f != shard => many = true,
            Some(_) => {}
        }
    });
    // Keys it forms from data on other shards are gathered (SORT … BY).
    let formed_elsewhere = command
        .spec
        .formed_keys
        .is_some_and(|f| f.elsewhere(command.spec, &command.args, &slot_map));
    match (found, first) {
        // Malformed key arguments: the command reports its own error.
        (None, _) | (Some(()), None) => Target::One(home),
        (Some(()), Some(_)) if many || formed_elsewhere => Target::Many,
        (Some(()), Some(shard)) => Target::One(shard),
    }
}
