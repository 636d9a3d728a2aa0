//! Commands whose keys live on several shards.
//!
//! Two ways, chosen by the command's row:
//! - **Split** (MGET, MSET, DEL, EXISTS, TOUCH, UNLINK): each shard runs the
//!   same command on its own keys, in parallel, and the replies are merged.
//!   Atomic splits (MGET, MSET) run as a transaction, so no client ever sees
//!   some shards' part done and others not.
//! - **Gather** (every other multi-key command: RENAME, COPY, MSETNX, BITOP,
//!   LCS, …): a transaction locks the keys on their shards, copies them into
//!   a scratch keyspace on this core, runs the ordinary single-shard handler
//!   there, and sends each changed key back to its owner, where the change
//!   goes through the owner's write funnel like any other write.
//!
//! Inside EXEC (`conn.state.in_exec`) the transaction already holds every
//! lock its commands need, so these run their steps without taking or
//! releasing any.
//!
//! The transaction scheme (see ARCHITECTURE.md and `ringdb_engine::locks`):
//! intent locks are taken shard by shard in ascending shard order, so two
//! transactions never wait for each other in a cycle; the last step on each
//! shard releases them. A scheduled transaction never rolls back.

use crate::aof::{log_part, PartLog};
use crate::mesh::NO_ANSWER;
use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::spec::{flags, FormedKeys};
use ringdb_engine::command::{CmdError, CmdResult, Exec, Merge};
use ringdb_engine::cross::{apply_changes, changes_by_owner, copy_keys, split_by_shard, Copies};
use ringdb_engine::keyspace::{Entry, Keyspace};
use ringdb_engine::locks::LockSet;
use ringdb_engine::scripting::RunReport;
use ringdb_engine::shard::{call, now_ms, Caller, Clock, ShardState};
use ringdb_engine::{ShardCommand, ShardId};
use std::collections::BTreeMap;

/// Runs a command whose keys span shards; its reply goes to `conn.out`.
/// A gathered script reports how its run went (an undone run replies
/// nothing and changes nothing: see `route::script`). `waiting`: a blocking
/// command's try that leaves its client waiting if it finds nothing
/// ([`Caller::Waiting`]).
pub async fn run(
    conn: &mut Connection,
    command: ShardCommand,
    waiting: bool,
) -> Result<RunReport, CmdError> {
    match command.spec.exec {
        Exec::Split { merge, atomic, .. } => {
            split(conn, command, merge, atomic).await.map(|()| RunReport::default())
        }
        _ => gather(conn, command, waiting).await,
    }
}

async fn split(
    conn: &mut Connection,
    command: ShardCommand,
    merge: Merge,
    atomic: bool,
) -> CmdResult {
    // An odd MSET must fail as a whole, before any shard sets anything.
    if merge == Merge::Ok && command.args.len().is_multiple_of(2) {
        return Err(CmdError::wrong_args(command.spec.name));
    }
    let started = std::time::Instant::now();
    let parts = split_by_shard(&conn.core.shared.slot_map, &command);
    // Inside EXEC the transaction already holds every lock: the parts run
    // directly, without taking or releasing anything.
    let held = conn.state.in_exec;
    let replies: Vec<Vec<u8>> = if atomic || held {
        let plan: Vec<(ShardId, LockSet)> = parts
            .iter()
            .map(|p| (p.shard, if held { Vec::new() } else { p.command.lock_set() }))
            .collect();
        if !held {
            let steps: Vec<AcquireStep<()>> =
                plan.iter().map(|(s, l)| (*s, l.clone(), Box::new(|_: &mut _| ()) as _)).collect();
            acquire_in_order(conn, steps).await?;
        }
        let mut waiting = Vec::new();
        // The parts of a write are one transaction in the append-only logs
        // too (inside EXEC, part of the EXEC's).
        let how = if held {
            PartLog::Exec(conn.state.exec_id)
        } else if command.spec.is_write() {
            PartLog::Own { id: transaction_id(conn), parts: parts.len() }
        } else {
            PartLog::Plain
        };
        for (part, (_, locks)) in parts.iter().zip(plan) {
            let cmd = part.command.clone();
            let (tx, rx) = flume::bounded(1);
            conn.core
                .send_job(
                    part.shard,
                    Box::new(move |core| {
                        let mut shard = core.shard.borrow_mut();
                        let mut out = Vec::new();
                        log_part(&mut shard, how, |shard| {
                            shard.call(&cmd, &mut out, &mut Clock::start(), Caller::Client)
                        });
                        if !locks.is_empty() {
                            shard.tx_release(&locks);
                        }
                        drop(shard);
                        core.publish_changes();
                        let _ = tx.send(out);
                    }),
                )
                .await;
            waiting.push(rx);
        }
        let mut replies = Vec::new();
        for rx in waiting {
            replies.push(rx.recv_async().await.map_err(|_| NO_ANSWER)?);
        }
        replies
    } else {
        let mut waiting = Vec::new();
        for part in &parts {
            let cmd = part.command.clone();
            let (tx, rx) = flume::bounded(1);
            conn.core
                .send_job(
                    part.shard,
                    Box::new(move |core| {
                        // One command: it always runs before the batch could
                        // stop at its reply limit.
                        let notifier = core.clone();
                        core.shard.borrow_mut().run_batch(
                            vec![cmd],
                            Box::new(move |shard, reply| {
                                // Pushes leave before the reply does.
                                notifier.publish_shard_changes(shard);
                                // Merged by parsing: one contiguous buffer.
                                let _ = tx.send(reply.buf.into_flat());
                            }),
                        )
                    }),
                )
                .await;
            waiting.push(rx);
        }
        let mut replies = Vec::new();
        for rx in waiting {
            replies.push(rx.recv_async().await.map_err(|_| NO_ANSWER)?);
        }
        replies
    };
    let usec = started.elapsed().as_micros() as u64;
    crate::cmd::slowlog::record_here(conn, &command.args, usec);
    let mut out = Vec::new();
    ringdb_engine::cross::merge_replies(merge, &parts, &replies, conn.state.resp, &mut out)
        .ok_or(NO_ANSWER)?;
    conn.out.extend_from_slice(&out);
    Ok(())
}

/// A step of lock acquisition: on `shard`, take `locks`, then run the
/// closure there (while holding them) and return its result.
pub(crate) type AcquireStep<T> =
    (ShardId, LockSet, Box<dyn FnOnce(&mut ringdb_engine::Shard) -> T + Send>);

/// Takes each step's locks shard by shard in ascending shard order, running
/// each step's closure once its locks are held. The locks stay held until a
/// later step releases them.
pub(crate) async fn acquire_in_order<T: Send + 'static>(
    conn: &Connection,
    steps: Vec<AcquireStep<T>>,
) -> Result<Vec<T>, CmdError> {
    if conn.state.in_exec {
        // Inside EXEC the locks are held already: just run the steps.
        let mut results = Vec::with_capacity(steps.len());
        for (shard, _, then) in steps {
            results.push(
                conn.core.invoke_on(shard, move |core| then(&mut core.shard.borrow_mut())).await?,
            );
        }
        return Ok(results);
    }
    take_in_order(&conn.core, steps).await
}

/// [`acquire_in_order`] for `core` itself (not a client inside EXEC).
pub(crate) async fn take_in_order<T: Send + 'static>(
    core: &std::rc::Rc<crate::node::Core>,
    steps: Vec<AcquireStep<T>>,
) -> Result<Vec<T>, CmdError> {
    debug_assert!(steps.windows(2).all(|w| w[0].0 < w[1].0), "steps must be in shard order");
    let mut results = Vec::with_capacity(steps.len());
    for (shard, locks, then) in steps {
        let result = core
            .invoke_deferred(shard, move |core, reply| {
                core.shard
                    .borrow_mut()
                    .tx_acquire(locks, Box::new(move |shard| reply.send(then(shard))));
            })
            .await?;
        results.push(result);
    }
    Ok(results)
}

/// Runs `f` on every shard as one transaction that locks each whole shard
/// (FLUSHDB, FLUSHALL, SWAPDB): no command sees one shard done and another
/// not, and no gathered command writes back into a shard after it.
pub async fn on_every_shard_exclusively<F>(conn: &Connection, f: F) -> Result<(), CmdError>
where
    F: Fn(&mut ringdb_engine::Shard) + Send + Sync + Clone + 'static,
{
    use ringdb_engine::locks::{LockMode, WHOLE_SHARD};
    let whole: LockSet = vec![(WHOLE_SHARD, LockMode::Exclusive)];
    let shards = conn.core.shared.shards();
    let steps: Vec<AcquireStep<()>> = (0..shards)
        .map(|i| (ShardId(i as u16), whole.clone(), Box::new(|_: &mut _| ()) as _))
        .collect();
    acquire_in_order(conn, steps).await?;
    let held = conn.state.in_exec;
    // All shards or none in the append-only logs too.
    let how = if held {
        PartLog::Exec(conn.state.exec_id)
    } else {
        PartLog::Own { id: transaction_id(conn), parts: shards }
    };
    let mut waiting = Vec::with_capacity(shards);
    for i in 0..shards {
        let (f, whole) = (f.clone(), whole.clone());
        let (tx, rx) = flume::bounded(1);
        conn.core
            .send_job(
                ShardId(i as u16),
                Box::new(move |core| {
                    let mut shard = core.shard.borrow_mut();
                    log_part(&mut shard, how, |shard| f(shard));
                    if !held {
                        shard.tx_release(&whole);
                    }
                    drop(shard);
                    core.publish_changes();
                    let _ = tx.send(());
                }),
            )
            .await;
        waiting.push(rx);
    }
    for rx in waiting {
        rx.recv_async().await.map_err(|_| NO_ANSWER)?;
    }
    Ok(())
}

/// How often a command that forms keys from data reads its value again when
/// the value changed between reading it and locking the formed keys.
const FORMED_KEY_TRIES: usize = 8;

async fn gather(
    conn: &mut Connection,
    command: ShardCommand,
    waiting: bool,
) -> Result<RunReport, CmdError> {
    let slot_map = conn.core.shared.slot_map;
    let positions = command.spec.key_positions(&command.args).unwrap_or_default();
    let named: Vec<Bytes> = positions.iter().map(|&pos| command.args[pos].clone()).collect();
    let formed =
        command.spec.formed_keys.filter(|f| f.elsewhere(command.spec, &command.args, &slot_map));
    // Inside EXEC only the named keys are locked: the handler refuses what
    // it would have to read elsewhere.
    let (Some(formed), Some(first), false) = (formed, named.first(), conn.state.in_exec) else {
        return Ok(gather_keys(conn, &command, named, None, waiting).await?.1);
    };
    // SORT … BY/GET: the keys its patterns form from the sorted value, read
    // now; once they are locked with it, the locked value must form no other.
    for _ in 0..FORMED_KEY_TRIES {
        let (source, args, db) = (first.clone(), command.args.clone(), command.client.db);
        let formed_now = conn
            .core
            .invoke_on(slot_map.shard_of_key(first), move |core| {
                let shard = core.shard.borrow();
                let entry = shard.keyspace.db(db).get(&source).filter(|e| !e.is_expired(now_ms()));
                (formed.from_value)(&args, entry.map(|e| &e.value))
            })
            .await?;
        let mut keys = named.clone();
        keys.extend(formed_now);
        keys.sort_unstable();
        keys.dedup();
        let (complete, report) =
            gather_keys(conn, &command, keys, Some((first.clone(), formed)), waiting).await?;
        if complete {
            return Ok(report);
        }
    }
    Err(CmdError::new("ERR the value kept changing while its pattern keys were gathered"))
}

/// Locks and copies `keys` (sorted when `formed` is given), runs the command
/// on the copies and writes its changes back. With `formed` (the command's
/// first key and its [`FormedKeys`]), the command runs only if the locked
/// value forms no key beyond `keys`; returns whether it ran, and a script's
/// report (an undone script writes nothing back and replies nothing).
async fn gather_keys(
    conn: &mut Connection,
    command: &ShardCommand,
    keys: Vec<Bytes>,
    formed: Option<(Bytes, FormedKeys)>,
    waiting: bool,
) -> Result<(bool, RunReport), CmdError> {
    let slot_map = conn.core.shared.slot_map;
    let mut keys_by_shard: BTreeMap<ShardId, Vec<Bytes>> = BTreeMap::new();
    for key in &keys {
        keys_by_shard.entry(slot_map.shard_of_key(key)).or_default().push(key.clone());
    }
    let databases = conn.core.config.borrow().databases();
    let plan: Vec<(ShardId, LockSet)> = keys_by_shard
        .iter()
        .map(|(shard, keys)| (*shard, lock_set_for(command, keys, databases)))
        .collect();

    // Lock and copy the keys, shard by shard.
    let steps: Vec<AcquireStep<Copies>> = plan
        .iter()
        .map(|(shard, locks)| {
            let keys = keys_by_shard.get(shard).cloned().unwrap_or_default();
            let dbs = command.databases(databases);
            let copy: Box<dyn FnOnce(&mut ringdb_engine::Shard) -> _ + Send> =
                Box::new(move |shard| copy_keys(&shard.keyspace, &keys, dbs, now_ms()));
            (*shard, locks.clone(), copy)
        })
        .collect();
    let gathered: Vec<(usize, Entry)> =
        acquire_in_order(conn, steps).await?.into_iter().flatten().collect();

    // Run the ordinary handler on the copies.
    let (mut settings, databases) = {
        let home = conn.core.shard.borrow();
        (home.state.settings.clone(), home.keyspace.db_count())
    };
    // Latency is recorded on the home shard below, not in the copy.
    let latency = std::mem::take(&mut settings.latency);
    let mut scratch = Keyspace::scratch(databases).filled(gathered);
    let mut state = ShardState::recording(settings);
    let complete = match &formed {
        None => true,
        Some((first, f)) => {
            let value = scratch.db(command.client.db).get(first).map(|e| &e.value);
            (f.from_value)(&command.args, value).iter().all(|k| keys.binary_search(k).is_ok())
        }
    };
    state.formed_keys_gathered = formed.is_some();
    {
        let home = conn.core.shard.borrow();
        state.monitored = home.state.monitored;
        state.slowlog_ids = home.state.slowlog_ids.clone();
    }
    // A gathered script runs on this core: it borrows the home shard's Lua
    // state (scripts, functions, the busy/kill link) for the duration.
    std::mem::swap(&mut state.scripting, &mut conn.core.shard.borrow_mut().state.scripting);
    let mark = conn.out.len();
    if complete {
        let caller = if waiting { Caller::Waiting } else { Caller::Client };
        call(&mut scratch, &mut state, command, &mut conn.out, &mut Clock::at(now_ms()), caller);
    }
    let mut report = state.scripting.take_report();
    report.found_nothing = state.found_nothing;
    std::mem::swap(&mut state.scripting, &mut conn.core.shard.borrow_mut().state.scripting);
    {
        let mut home = conn.core.shard.borrow_mut();
        if report.restart {
            // Undone: it runs again with every shard, and nothing of it
            // counts but the undoing.
            conn.out.truncate(mark);
            state.funnel.take_events();
            home.state.stats.script_runs.add(&state.stats.script_runs);
        } else {
            // Everything the copy counted (its calls, the commands a script
            // called, errors, hits and misses) is the home shard's.
            home.state.stats.add(&state.stats);
            let done = *state.stats.command(command.id);
            if done.calls > 0 {
                let fast = command.spec.has(flags::FAST);
                home.state.latency.record_call(latency, command.id, fast, done.usec);
            }
        }
    }
    // What the copy produced besides its changes (which go to their owners
    // below, and fire there): a slow gathered command is logged like any
    // other; the commands a gathered script called are shown to monitors.
    let effects = state.take_effects();
    let max_len = state.settings.slowlog.max_len;
    crate::cmd::slowlog::deliver(&conn.core, effects.slow, max_len);
    if !effects.monitor.is_empty() {
        crate::cmd::monitor::send(&conn.core, effects.monitor);
    }

    // Keys a tracking client read here are remembered by their owners.
    let mut remembered: BTreeMap<ShardId, Remembered> = BTreeMap::new();
    for (key, readers) in state.funnel.tracking.take_remembered() {
        remembered.entry(slot_map.shard_of_key(&key)).or_default().push((key, readers));
    }

    // Send every changed key to its owner, and release everywhere.
    let mut changes = changes_by_owner(&slot_map, state.funnel.take_events(), &mut scratch);
    let held = conn.state.in_exec;
    let mut waiting = Vec::new();
    // Only shards that change something write a part to their logs.
    let writers = changes.values().filter(|list| !list.is_empty()).count();
    let (tx_id, n_parts) = (transaction_id(conn), writers);
    let exec_id = conn.state.exec_id;
    for (shard, locks) in plan {
        let list = changes.remove(&shard).unwrap_or_default();
        let reads = remembered.remove(&shard).unwrap_or_default();
        let writer = command.client.id;
        let (tx, rx) = flume::bounded(1);
        conn.core
            .send_job(
                shard,
                Box::new(move |core| {
                    let mut shard = core.shard.borrow_mut();
                    let tracking = &mut shard.state.funnel.tracking;
                    for (key, readers) in reads {
                        readers.into_iter().for_each(|reader| tracking.remember(&key, reader));
                    }
                    shard.state.funnel.limit_tracked();
                    let how = match (held, list.is_empty()) {
                        (true, _) => PartLog::Exec(exec_id),
                        (false, false) => PartLog::Own { id: tx_id, parts: n_parts },
                        (false, true) => PartLog::Plain,
                    };
                    // The changes are this client's (NOLOOP).
                    let before = shard.state.funnel.tracking.changes_by(writer);
                    log_part(&mut shard, how, |shard| {
                        apply_changes(&mut shard.keyspace, &mut shard.state, list)
                    });
                    shard.state.funnel.tracking.changes_by(before);
                    if !held {
                        shard.tx_release(&locks);
                    }
                    drop(shard);
                    core.publish_changes();
                    let _ = tx.send(());
                }),
            )
            .await;
        waiting.push(rx);
    }
    for rx in waiting {
        rx.recv_async().await.map_err(|_| NO_ANSWER)?;
    }
    Ok((complete, report))
}

/// Keys a gathered read let tracking clients cache, for one owner.
type Remembered = Vec<(Bytes, Vec<ringdb_engine::tracking::Reader>)>;

/// The locks a gathered command takes on `keys` of one shard: in each
/// database it copies them from ([`ShardCommand::databases`]).
fn lock_set_for(command: &ShardCommand, keys: &[Bytes], databases: usize) -> LockSet {
    use ringdb_engine::locks::{fingerprint, LockMode};
    let mode =
        if command.spec.locks_exclusively() { LockMode::Exclusive } else { LockMode::Shared };
    let dbs = command.databases(databases);
    keys.iter().flat_map(|k| dbs.clone().map(move |db| (fingerprint(db, k), mode))).collect()
}

/// A random id for a cross-shard transaction's parts in the append-only
/// logs (random, so that ids of earlier runs never match new ones).
pub(crate) fn transaction_id(conn: &Connection) -> u64 {
    conn.core.shard.borrow_mut().state.random()
}
