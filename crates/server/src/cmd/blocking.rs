//! Blocking commands (BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP, BZPOPMIN,
//! BZPOPMAX, BZMPOP, XREAD BLOCK, XREADGROUP BLOCK) and CLIENT UNBLOCK: the
//! wait, on the connection's home core.
//!
//! A blocking command's row is an ordinary shard handler that serves the
//! client if it can and otherwise replies the timeout's null. Here it runs
//! once through the normal routing; when it got the null the client
//! registers with its keys' shards ([`ringdb_engine::blocking`]) and waits
//! for its timeout, CLIENT UNBLOCK, its socket closing, or:
//! - keys on one shard: the reply, which that shard sends once a change lets
//!   it serve the command (in the order clients blocked, before the
//!   writer's own reply leaves, as Redis serves blocked clients);
//! - keys on several shards: wake-ups, after each of which the command runs
//!   again across shards (atomically; a retry that finds nothing keeps
//!   waiting). Such clients are served in the order their retries arrive.
//!
//! Inside MULTI and scripts the handlers run once and never block, as in
//! Redis.

use crate::net::connection::Connection;
use crate::node::Core;
use bytes::Bytes;
use ringdb_engine::blocking::{parse_timeout, timeout_of, verdict, Verdict, Waiter};
use ringdb_engine::command::spec::Waits;
use ringdb_engine::command::{CmdError, CmdResult, CommandSpec, Registered};
use ringdb_engine::keyspace::Value;
use ringdb_engine::shard::{Caller, Clock};
use ringdb_engine::{ShardCommand, ShardId};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// What wakes a blocked client.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Wake {
    /// One of its keys changed: try again (keys on several shards).
    Ready,
    /// Its shard served it: the reply.
    Served(Bytes),
    /// CLIENT UNBLOCK: reply as on timeout, or with an error.
    Unblock { error: bool },
    /// The ACL changed: is the command still allowed to its user?
    AclChanged,
}

/// This core's blocked clients: where to send their wake-ups.
#[derive(Default)]
pub struct BlockedClients {
    by_client: HashMap<u64, flume::Sender<Wake>>,
}

impl BlockedClients {
    /// Wakes `client` if it is still blocked here (a late wake-up for a
    /// client that was served meanwhile is dropped).
    pub fn wake(&self, client: u64, wake: Wake) -> bool {
        self.by_client.get(&client).is_some_and(|tx| tx.try_send(wake).is_ok())
    }

    /// Tells every blocked client that the ACL changed.
    pub fn acl_changed(&self) {
        for tx in self.by_client.values() {
            let _ = tx.try_send(Wake::AclChanged);
        }
    }

    /// Blocked clients of this core (INFO's blocked_clients).
    pub fn count(&self) -> usize {
        self.by_client.len()
    }
}

/// WAIT numreplicas timeout: how many replicas acknowledged every write
/// handed to the replication stream before WAIT (this client's included:
/// a write reaches the stream before its reply leaves). Answers at once
/// when enough have, or inside EXEC; otherwise asks the replicas for their
/// offsets (`REPLCONF GETACK`) and blocks until enough acknowledge or
/// `timeout` milliseconds pass (0: until CLIENT UNBLOCK or it leaves).
pub async fn wait(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let numreplicas = ringdb_engine::command::args::int(&args[1])?;
    let timeout_ms = parse_timeout(&args[2], ringdb_engine::blocking::Unit::Millis)?;
    let repl = conn.core.shared.repl.clone();
    let target = crate::repl::wait_target(&repl)?;
    let acked = || repl.lock().acked(target) as i64;
    if acked() >= numreplicas || conn.state.in_exec {
        conn.reply().int(acked());
        return Ok(());
    }
    repl.lock().getack();
    if conn.flush().await.is_err() {
        conn.state.close_after_reply = true;
        return Ok(());
    }
    let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
    let (tx, rx) = flume::unbounded();
    conn.core.blocked.borrow_mut().by_client.insert(conn.state.id, tx);
    conn.handle.view.borrow_mut().blocked = true;
    // Acknowledgements arrive on the replicas' cores: looked at every
    // millisecond.
    let event = loop {
        let poll = Instant::now() + Duration::from_millis(1);
        match next_event(conn, Some(deadline.map_or(poll, |d| d.min(poll))), &rx).await {
            Event::Wake(Wake::Ready | Wake::Served(_) | Wake::AclChanged) => continue,
            Event::TimedOut
                if acked() < numreplicas && deadline.is_none_or(|d| Instant::now() < d) =>
            {
                continue
            }
            event => break event,
        }
    };
    conn.handle.view.borrow_mut().blocked = false;
    conn.core.blocked.borrow_mut().by_client.remove(&conn.state.id);
    match event {
        Event::Wake(Wake::Unblock { error: true }) => error_reply(conn, UNBLOCKED),
        Event::Closed => conn.state.close_after_reply = true,
        _ => conn.reply().int(acked()),
    }
    Ok(())
}

/// An error reply of a blocked command, counted in INFO errorstats as
/// every error reply is (Redis's `afterErrorReply`).
fn error_reply(conn: &mut Connection, error: &str) {
    conn.reply().error(error);
    let code = error.split(' ').next().unwrap_or("ERR");
    conn.core.shard.borrow_mut().state.stats.error(code);
}

/// Redis's reply to a client unblocked with `CLIENT UNBLOCK id ERROR`.
const UNBLOCKED: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";

/// Runs a BLOCKING command outside MULTI: at once when it can be served (or
/// does not block: XREAD without BLOCK), else waits as the module doc says.
/// The reply goes to `conn.out`.
pub async fn run(conn: &mut Connection, reg: &'static Registered, args: Vec<Bytes>) {
    let timeout = timeout_of(reg.spec, &args).map(|(arg, unit)| parse_timeout(arg, unit));
    let mut command = ShardCommand { id: reg.id, spec: reg.spec, args, client: conn.state.info() };
    let Some(Ok(timeout_ms)) = timeout else {
        // Not blocking (XREAD without BLOCK), or a bad timeout the handler
        // reports: one run, its null included.
        if run_once(conn, command, false).await == Try::Nothing {
            null_reply(conn, reg.spec);
        }
        return;
    };
    let deadline = (timeout_ms > 0).then(|| Instant::now() + Duration::from_millis(timeout_ms));
    if waits(reg.spec) == Some(Waits::Entries) {
        resolve_last_ids(conn, &mut command).await;
    }
    if run_once(conn, command.clone(), true).await != Try::Nothing {
        return;
    }
    // Replies of earlier commands of the pipeline go out before we wait, as
    // Redis writes them while the client is blocked.
    if conn.flush().await.is_err() {
        conn.state.close_after_reply = true;
        return;
    }
    let keys = keys_by_shard(conn, &command);
    let (tx, rx) = flume::unbounded();
    conn.core.blocked.borrow_mut().by_client.insert(conn.state.id, tx);
    conn.handle.view.borrow_mut().blocked = true;
    // Served by the shard only when every key of the command lives there
    // (a move's destination included).
    let outcome = match (crate::route::target(conn, &command), keys.iter().next()) {
        (crate::route::Target::One(shard), Some((&waited_on, waited))) if waited_on == shard => {
            let waited = waited.clone();
            wait_on_shard(conn, &command, shard, waited, deadline, &rx).await
        }
        _ => {
            register(conn, &keys, true).await;
            let outcome = wait_retrying(conn, &command, deadline, &rx).await;
            register(conn, &keys, false).await;
            outcome
        }
    };
    conn.handle.view.borrow_mut().blocked = false;
    conn.core.blocked.borrow_mut().by_client.remove(&conn.state.id);
    // A blocked command that timed out or was unblocked: its one call.
    // What it waited for is not its run time (Redis).
    let stats = |conn: &Connection, failed| {
        conn.core.shard.borrow_mut().state.count_call(reg.id, reg.spec, 0, failed)
    };
    match outcome {
        Outcome::Served => {}
        Outcome::TimedOut => {
            stats(conn, false);
            null_reply(conn, reg.spec);
        }
        Outcome::Unblocked => {
            stats(conn, true);
            error_reply(conn, UNBLOCKED);
        }
        Outcome::GroupGone(error) => error_reply(conn, error),
        Outcome::Denied(e) => error_reply(conn, e.text()),
        Outcome::Disconnected => conn.state.close_after_reply = true,
    }
}

enum Outcome {
    Served,
    /// XREADGROUP's stream or group went away: Redis's error for it.
    GroupGone(&'static str),
    TimedOut,
    Unblocked,
    /// The ACL changed while it waited and no longer allows it.
    Denied(CmdError),
    Disconnected,
}

/// Whether the blocked `command` is still allowed to its user, as the ACL
/// is now (a refusal is logged like any other).
fn still_allowed(conn: &mut Connection, command: &ShardCommand) -> Result<(), CmdError> {
    crate::cmd::acl::keep_user_current(conn);
    if conn.state.user.unrestricted() {
        return Ok(());
    }
    let reg = ringdb_engine::command::table().resolve(&command.args)?;
    crate::cmd::acl::check(conn, reg, &command.args)
}

/// Keys on one shard: registers the command there (serving it at once if
/// something arrived meanwhile), then waits for the shard's reply or a
/// reason to stop.
async fn wait_on_shard(
    conn: &mut Connection,
    command: &ShardCommand,
    shard: ShardId,
    keys: Vec<Bytes>,
    deadline: Option<Instant>,
    rx: &flume::Receiver<Wake>,
) -> Outcome {
    let waiter = Waiter { core: conn.core.id.0, client: conn.state.id };
    let (cmd, waited) = (command.clone(), keys.clone());
    let now = conn
        .core
        .invoke_on(shard, move |core| {
            let reply = {
                let mut shard = core.shard.borrow_mut();
                let mut out = Vec::new();
                shard.call(&cmd, &mut out, &mut Clock::start(), Caller::Waiting);
                match verdict(&cmd, &out, shard.state.found_nothing, &shard.keyspace) {
                    Verdict::Reply(reply) => Some(reply),
                    Verdict::Wait => {
                        shard.state.funnel.blocked.block_command(waiter, cmd, waited);
                        None
                    }
                }
            };
            core.publish_changes();
            reply
        })
        .await;
    match now {
        Ok(Some(reply)) => {
            conn.out.extend_from_slice(&reply);
            return Outcome::Served;
        }
        Ok(None) => {}
        Err(e) => {
            conn.reply().error(e.text());
            return Outcome::Served;
        }
    }
    let stop = loop {
        match next_event(conn, deadline, rx).await {
            Event::Wake(Wake::Served(reply)) => {
                conn.out.extend_from_slice(&reply);
                return Outcome::Served;
            }
            Event::Wake(Wake::Ready) => continue,
            Event::Wake(Wake::AclChanged) => match still_allowed(conn, command) {
                Ok(()) => continue,
                Err(e) => break Outcome::Denied(e),
            },
            Event::Wake(Wake::Unblock { error: true }) => break Outcome::Unblocked,
            Event::Wake(Wake::Unblock { error: false }) | Event::TimedOut => {
                break Outcome::TimedOut
            }
            Event::Closed => break Outcome::Disconnected,
        }
    };
    // Leave the shard's table. If it served us meanwhile, its reply is on
    // the way and wins over the timeout (nothing popped is dropped).
    let db = conn.state.db;
    let still_waiting = conn
        .core
        .invoke_on(shard, move |core| {
            core.shard.borrow_mut().state.funnel.blocked.unblock(db, &keys, waiter)
        })
        .await
        .unwrap_or(true);
    if still_waiting {
        return stop;
    }
    let served = futures_lite::future::or(
        async {
            loop {
                match rx.recv_async().await {
                    Ok(Wake::Served(reply)) => return Some(reply),
                    Ok(_) => continue,
                    Err(_) => return None,
                }
            }
        },
        async {
            glommio::timer::sleep(Duration::from_secs(10)).await;
            None
        },
    )
    .await;
    match (served, stop) {
        (Some(_), Outcome::Disconnected) => {
            tracing::warn!(client = conn.state.id, "a blocked client left as it was served");
            Outcome::Disconnected
        }
        (Some(reply), _) => {
            conn.out.extend_from_slice(&reply);
            Outcome::Served
        }
        (None, stop) => stop,
    }
}

/// What ends one wait.
enum Event {
    Wake(Wake),
    TimedOut,
    Closed,
}

/// The next wake-up, the deadline, or the client hanging up.
async fn next_event(
    conn: &mut Connection,
    deadline: Option<Instant>,
    rx: &flume::Receiver<Wake>,
) -> Event {
    let woken = async {
        match rx.recv_async().await {
            Ok(wake) => Event::Wake(wake),
            // The sender lives in this core's table until we return.
            Err(_) => Event::TimedOut,
        }
    };
    let timer = async {
        match deadline.and_then(|d| d.checked_duration_since(Instant::now())) {
            Some(left) => glommio::timer::sleep(left).await,
            None if deadline.is_some() => {}
            None => std::future::pending().await,
        }
        Event::TimedOut
    };
    // A client that hangs up (or is killed) stops waiting: nothing may be
    // popped for a reader that is gone.
    let closed = async {
        conn.read_while_blocked().await;
        Event::Closed
    };
    futures_lite::future::or(futures_lite::future::or(woken, timer), closed).await
}

/// Keys on several shards: tries, then waits for a reason to try again,
/// until served or told to stop. A failed try is judged by the rules of
/// [`verdict`], which needs one keyspace: here the keys are looked up on
/// their shards.
async fn wait_retrying(
    conn: &mut Connection,
    command: &ShardCommand,
    deadline: Option<Instant>,
    rx: &flume::Receiver<Wake>,
) -> Outcome {
    loop {
        // Wake-ups that arrived meanwhile are covered by this try.
        let mut unblock = None;
        for wake in rx.try_iter() {
            if let Wake::Unblock { error } = wake {
                unblock = Some(error);
            }
        }
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Outcome::TimedOut;
        }
        match unblock {
            Some(true) => return Outcome::Unblocked,
            Some(false) => return Outcome::TimedOut,
            None => {}
        }
        let mark = conn.out.len();
        match run_once(conn, command.clone(), true).await {
            Try::Served => return Outcome::Served,
            Try::Nothing => {}
            Try::Failed if waits(command.spec) == Some(Waits::GroupEntries) => {
                conn.out.truncate(mark);
                return Outcome::GroupGone(group_error(conn, command).await);
            }
            // A move whose source is a list failed on its destination:
            // Redis replies that error (the source keeps its element).
            Try::Failed if is_move(command.spec) && source_is_list(conn, command).await => {
                return Outcome::Served
            }
            // A key now holds another type: Redis serves only a key of the
            // type the client waits for, and keeps it waiting.
            Try::Failed => conn.out.truncate(mark),
        }
        match next_event(conn, deadline, rx).await {
            Event::Wake(Wake::Ready | Wake::Served(_)) => {}
            Event::Wake(Wake::AclChanged) => {
                if let Err(e) = still_allowed(conn, command) {
                    return Outcome::Denied(e);
                }
            }
            Event::Wake(Wake::Unblock { error: true }) => return Outcome::Unblocked,
            Event::Wake(Wake::Unblock { error: false }) | Event::TimedOut => {
                return Outcome::TimedOut
            }
            Event::Closed => return Outcome::Disconnected,
        }
    }
}

/// What one run of a blocking command gave.
#[derive(PartialEq, Eq)]
enum Try {
    /// A reply (left in `conn.out`).
    Served,
    /// The timeout's null (not left in `conn.out`).
    Nothing,
    /// An error reply (left in `conn.out`).
    Failed,
}

/// Runs the command once through the normal routing, its reply appended to
/// `conn.out` unless it is the timeout's null.
/// An `attempt` (a blocking command's try that may leave it waiting) that
/// finds nothing is not counted as a call.
async fn run_once(conn: &mut Connection, command: ShardCommand, attempt: bool) -> Try {
    let mark = conn.out.len();
    let found_nothing = match crate::route::target(conn, &command) {
        crate::route::Target::Many => {
            match crate::route::cross::run(conn, command, attempt).await {
                Ok(report) => report.found_nothing,
                Err(e) => {
                    conn.out.truncate(mark);
                    conn.reply().error(e.text());
                    false
                }
            }
        }
        crate::route::Target::One(shard) => {
            let reply = conn
                .core
                .invoke_on(shard, move |core| {
                    let mut out = Vec::new();
                    let nothing = {
                        let mut shard = core.shard.borrow_mut();
                        let caller = if attempt { Caller::Waiting } else { Caller::Client };
                        shard.call(&command, &mut out, &mut Clock::start(), caller);
                        shard.state.found_nothing
                    };
                    core.publish_changes();
                    (out, nothing)
                })
                .await;
            match reply {
                Ok((bytes, nothing)) => {
                    conn.out.extend_from_slice(&bytes);
                    nothing
                }
                Err(e) => {
                    conn.reply().error(e.text());
                    false
                }
            }
        }
    };
    if found_nothing {
        conn.out.truncate(mark);
        return Try::Nothing;
    }
    // A blocking command's reply is never a spliced string value.
    let reply = conn.out.bytes_since(mark);
    if reply.first() == Some(&b'-') {
        return Try::Failed;
    }
    Try::Served
}

/// The reply on timeout: a null bulk for the moves, a null array for the
/// rest (one `_` under RESP3).
fn null_reply(conn: &mut Connection, spec: &CommandSpec) {
    if is_move(spec) {
        conn.reply().null();
    } else {
        conn.reply().null_array();
    }
}

fn waits(spec: &CommandSpec) -> Option<Waits> {
    spec.blocks.map(|b| b.waits)
}

/// BLMOVE and BRPOPLPUSH: they wait for their source only.
fn is_move(spec: &CommandSpec) -> bool {
    waits(spec) == Some(Waits::Move)
}

/// Whether a move's source key holds a list.
async fn source_is_list(conn: &Connection, command: &ShardCommand) -> bool {
    peek(conn, command.args[1].clone(), |v| matches!(v, Value::List(_))).await == Some(true)
}

/// `f` of the live value at `key`, looked up on its shard (None: no key).
async fn peek<R: Send + 'static>(conn: &Connection, key: Bytes, f: fn(&Value) -> R) -> Option<R> {
    let db = conn.state.db;
    let shard = conn.core.shared.slot_map.shard_of_key(&key);
    conn.core
        .invoke_on(shard, move |core| {
            let shard = core.shard.borrow();
            let now = ringdb_engine::shard::now_ms();
            shard.keyspace.db(db).get(&key).filter(|e| !e.is_expired(now)).map(|e| f(&e.value))
        })
        .await
        .ok()
        .flatten()
}

/// The command's keys, by the shard that owns them.
fn keys_by_shard(conn: &Connection, command: &ShardCommand) -> BTreeMap<ShardId, Vec<Bytes>> {
    let slot_map = conn.core.shared.slot_map;
    let mut keys: BTreeMap<ShardId, Vec<Bytes>> = BTreeMap::new();
    let positions = command.spec.key_positions(&command.args).unwrap_or_default();
    // A push to a move's destination does not make it servable.
    let positions =
        if is_move(command.spec) { &positions[..positions.len().min(1)] } else { &positions[..] };
    for &i in positions {
        let key = command.args[i].clone();
        keys.entry(slot_map.shard_of_key(&key)).or_default().push(key);
    }
    keys
}

/// Registers (or removes) this client as a waiter for its keys on their
/// shards, one message per shard, and waits for every shard to have done so.
async fn register(conn: &Connection, keys: &BTreeMap<ShardId, Vec<Bytes>>, block: bool) {
    let waiter = Waiter { core: conn.core.id.0, client: conn.state.id };
    let db = conn.state.db;
    for (&shard, keys) in keys {
        let keys = keys.clone();
        let _ = conn
            .core
            .invoke_on(shard, move |core| {
                let mut shard = core.shard.borrow_mut();
                let table = &mut shard.state.funnel.blocked;
                if block {
                    for key in keys {
                        table.block(db, key, waiter);
                    }
                } else {
                    table.unblock(db, &keys, waiter);
                }
            })
            .await;
    }
}

/// XREAD BLOCK's `$` means "entries added from now on": it becomes each
/// stream's last id before the first try, so that retries do not move it.
async fn resolve_last_ids(conn: &Connection, command: &mut ShardCommand) {
    let args = &command.args;
    let Some(streams) = args.iter().position(|a| a.eq_ignore_ascii_case(b"streams")) else {
        return;
    };
    let n = (args.len() - streams - 1) / 2;
    for i in 0..n {
        let (key_at, id_at) = (streams + 1 + i, streams + 1 + n + i);
        if &command.args[id_at][..] != b"$" {
            continue;
        }
        let last = stream_last_id(conn, command.args[key_at].clone()).await;
        // A missing stream: everything added later is new.
        command.args[id_at] = Bytes::from(last.unwrap_or_else(|| "0-0".to_string()));
    }
}

/// Why a blocked XREADGROUP can no longer be served, in Redis's words: one
/// of its keys is no longer a stream, or the group was destroyed.
async fn group_error(conn: &Connection, command: &ShardCommand) -> &'static str {
    let args = &command.args;
    let streams = args.iter().position(|a| a.eq_ignore_ascii_case(b"streams")).unwrap_or(0);
    let n = args.len().saturating_sub(streams + 1) / 2;
    for key in &args[streams + 1..streams + 1 + n] {
        if stream_last_id(conn, key.clone()).await.is_none() {
            return "UNBLOCKED the stream key no longer exists";
        }
    }
    "NOGROUP the consumer group this client was blocked on no longer exists"
}

/// The last id of the stream at `key` (None: no stream there).
async fn stream_last_id(conn: &Connection, key: Bytes) -> Option<String> {
    let last = |v: &Value| match v {
        Value::Stream(stream) => Some(stream.last_id().to_string()),
        _ => None,
    };
    peek(conn, key, last).await.flatten()
}

/// CLIENT UNBLOCK client-id [TIMEOUT | ERROR]: 1 if the client was blocked
/// (on any core) and is now unblocked, else 0.
pub async fn client_unblock(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let id = ringdb_types::number::parse_i64(&args[2])
        .ok_or(CmdError::new("ERR value is not an integer or out of range"))?;
    let error = match args.get(3) {
        None => false,
        Some(a) if a.eq_ignore_ascii_case(b"timeout") => false,
        Some(a) if a.eq_ignore_ascii_case(b"error") => true,
        Some(_) => {
            return Err(CmdError::new("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"))
        }
    };
    if args.len() > 4 {
        return Err(CmdError::new("ERR syntax error"));
    }
    let unblocked = conn
        .core
        .invoke_on_all(move |core| core.blocked.borrow().wake(id as u64, Wake::Unblock { error }))
        .await?;
    conn.reply().int(unblocked.into_iter().any(|u| u) as i64);
    Ok(())
}

/// Delivers a shard's replies and wake-ups to the blocked clients' home
/// cores.
pub fn send_wakes(core: &Core, wakes: Vec<(Waiter, Option<Bytes>)>) {
    for (waiter, reply) in wakes {
        let wake = reply.map_or(Wake::Ready, Wake::Served);
        core.queue_job(
            ShardId(waiter.core),
            Box::new(move |home: &Rc<Core>| {
                home.blocked.borrow().wake(waiter.client, wake);
            }),
        );
    }
}
