//! TIME, LASTSAVE, SHUTDOWN, DEBUG and ROLE, with Redis 7.2's semantics and error
//! texts (server.c, db.c, debug.c).

use crate::net::connection::Connection;
use crate::node::Core;
use crate::persist;
use bytes::Bytes;
use ringdb_engine::command::args::{is, text};
use ringdb_engine::command::error::{NO_SUCH_KEY, SYNTAX};
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_engine::digest::{self, Digest};
use ringdb_engine::keyspace::{Entry, StrValue, Value};
use ringdb_engine::shard::{Caller, Clock};
use ringdb_types::number::parse_i64;
use ringdb_types::sha1::hex;
use std::sync::atomic::Ordering::Relaxed;

/// TIME: seconds and microseconds, as two bulk strings.
pub async fn time(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    ringdb_engine::families::server::time(&mut conn.reply());
    Ok(())
}

pub async fn lastsave(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let at = conn.core.shared.persist.last_save.load(Relaxed) as i64;
    conn.reply().int(at);
    Ok(())
}

/// SAVE: the snapshot file, now, in the foreground. A failure is Redis's
/// bare `-ERR` (the reason is logged).
pub async fn save(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    if conn.core.shared.persist.bgsave_in_progress.load(Relaxed) {
        return Err(persist::SAVE_IN_PROGRESS);
    }
    match persist::save(&conn.core, conn.state.in_exec).await {
        Ok(()) => conn.reply().ok(),
        Err(_) => return Err(CmdError::new("ERR")),
    }
    Ok(())
}

/// BGSAVE [SCHEDULE]: a background save. Inside MULTI it is scheduled (it
/// starts after EXEC), as Redis does; with SCHEDULE it is also scheduled
/// while a foreground save (SAVE, DEBUG RELOAD) writes the file, Redis's
/// "another child" case. A background save running is an error either way.
pub async fn bgsave(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if args.len() > 1 && !(args.len() == 2 && is(&args[1], "schedule")) {
        return Err(SYNTAX);
    }
    let p = &conn.core.shared.persist;
    if p.bgsave_in_progress.load(Relaxed) {
        return Err(persist::SAVE_IN_PROGRESS);
    }
    let schedule = args.len() == 2;
    let busy = p.snapshot_busy.load(Relaxed);
    if busy && !schedule && !conn.state.in_exec {
        return Err(persist::OTHER_SAVE_RUNNING);
    }
    if conn.state.in_exec || busy {
        p.bgsave_scheduled.store(true, Relaxed);
        conn.reply().simple("Background saving scheduled");
        return Ok(());
    }
    persist::bgsave(&conn.core, false).await?;
    conn.reply().simple("Background saving started");
    Ok(())
}

/// BGREWRITEAOF: every shard's log is rewritten from its state now, while
/// the shards keep serving (see `crate::aof::rewrite`); scheduled during a
/// background save or inside MULTI, as in Redis.
pub async fn bgrewriteaof(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    use crate::aof::rewrite::{self, Outcome};
    let reply = match rewrite::bgrewriteaof(&conn.core, conn.state.in_exec).await? {
        Outcome::Started => "Background append only file rewriting started",
        Outcome::Scheduled => "Background append only file rewriting scheduled",
    };
    conn.reply().simple(reply);
    Ok(())
}

/// The options of SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT].
#[derive(Default)]
pub struct ShutdownFlags {
    pub nosave: bool,
    pub save: bool,
    pub force: bool,
    pub abort: bool,
}

impl ShutdownFlags {
    pub fn parse(args: &[Bytes]) -> Result<ShutdownFlags, CmdError> {
        let mut f = ShutdownFlags::default();
        let mut now = false;
        for arg in &args[1..] {
            if is(arg, "nosave") {
                f.nosave = true;
            } else if is(arg, "save") {
                f.save = true;
            } else if is(arg, "now") {
                now = true;
            } else if is(arg, "force") {
                f.force = true;
            } else if is(arg, "abort") {
                f.abort = true;
            } else {
                return Err(SYNTAX);
            }
        }
        if (f.abort && (f.nosave || f.save || now || f.force)) || (f.nosave && f.save) {
            return Err(SYNTAX);
        }
        Ok(f)
    }
}

/// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. ringdb has no replicas to
/// wait for, so SHUTDOWN happens at once; ABORT calls off a signal's
/// shutdown that has not started (see `node::wait_for_signal`). It
/// saves the snapshot first when asked (SAVE) or when a `save` schedule is
/// configured (unless NOSAVE), as Redis does; a failed save stops the
/// shutdown unless FORCE says to go on regardless. While a script is busy
/// only SHUTDOWN NOSAVE goes ahead (the busy core could not save).
pub async fn shutdown(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let ShutdownFlags { nosave, save, force, abort } = ShutdownFlags::parse(args)?;
    if abort {
        // Only a signal's shutdown can be pending (SHUTDOWN itself happens
        // at once): it is called off while it waits.
        let pending = &conn.core.shared.shutting_down;
        if !pending.swap(false, std::sync::atomic::Ordering::Relaxed) {
            return Err(CmdError::new("ERR No shutdown in progress."));
        }
        tracing::warn!("Shutdown manually aborted.");
        conn.reply().ok();
        return Ok(());
    }
    if !nosave {
        if let Some(busy) = conn.core.shared.scripts.any_busy_error() {
            return Err(CmdError::new(busy));
        }
    }
    crate::supervise::stopping();
    // As Redis kills its saving child: the final save (if any) starts
    // afresh, and no temporary file is left behind.
    persist::stop_background_save(&conn.core).await;
    crate::aof::rewrite::stop(&conn.core).await;
    let scheduled = !conn.core.config.borrow().save_points().is_empty();
    // While the data loads nothing is saved (the file is what is loading),
    // as in Redis.
    let loading = conn.core.shared.loading.active();
    if !loading && (save || (scheduled && !nosave)) {
        tracing::warn!("Saving the final RDB snapshot before exiting.");
        let saved = persist::save(&conn.core, false).await;
        if saved.is_err() && !force {
            tracing::warn!(
                "Errors trying to shut down the server. Check the logs for more information."
            );
            return Err(CmdError::new("ERR Errors trying to SHUTDOWN. Check logs."));
        }
    }
    tracing::warn!("User requested shutdown...");
    crate::node::shutdown(0)
}

const DEBUG_HELP: &[&str] = &[
    "CHANGE-REPL-ID",
    "    Change the replication IDs of the instance.",
    "    Dangerous: should be used only for testing the replication subsystem.",
    "CONFIG-REWRITE-FORCE-ALL",
    "    Like CONFIG REWRITE but writes all configuration options, including",
    "    keywords not listed in original configuration file or default values.",
    "DIGEST",
    "    Output a hex signature representing the current DB content.",
    "DIGEST-VALUE <key> [<key> ...]",
    "    Output a hex signature of the values of all the specified keys.",
    "ERROR <string>",
    "    Return a Redis protocol error with <string> as message. Useful for clients",
    "    unit tests to simulate Redis errors.",
    "LOADAOF",
    "    Flush the AOF buffers on disk and reload the AOF in memory.",
    "LOG <message>",
    "    Write <message> to the server log.",
    "OBJECT <key>",
    "    Show low level info about `key` and associated value.",
    "PROTOCOL <type>",
    "    Reply with a test value of the specified type. <type> can be: string,",
    "    integer, double, bignum, null, array, set, map, attrib, push, verbatim,",
    "    true, false.",
    "SET-DISABLE-DENY-SCRIPTS <0|1>",
    "    Setting it to 1 lets scripts call commands flagged 'noscript' (for tests).",
    "POPULATE <count> [<prefix>] [<size>]",
    "    Create <count> string keys named key:<num>. If <prefix> is specified then",
    "    it is used instead of the 'key' prefix. These are not propagated to",
    "    replicas. Cluster slots are not respected so keys not belonging to the",
    "    current node can be created in cluster mode.",
    "PAUSE-CRON <0|1>",
    "    Stop periodic cron job processing.",
    "SET-ACTIVE-EXPIRE <0|1>",
    "    Setting it to 0 disables expiring keys in background when they are not",
    "    accessed (otherwise the Redis behavior). Setting it to 1 reenables back the",
    "    default.",
    "RELOAD",
    "    Save the RDB on disk and reload it back to memory.",
    "QUICKLIST-PACKED-THRESHOLD <size>",
    "    Sets the threshold for elements to be inserted as plain vs packed nodes",
    "    Default value is 1GB, allows values up to 4GB. Setting to 0 restores to default.",
    "SLEEP <seconds>",
    "    Stop the server for <seconds>. Decimals allowed.",
    "STRINGMATCH-TEST",
    "    Run a fuzz tester against the stringmatchlen() function.",
    "LISTPACK <key>",
    "    Show low level info about the listpack encoding of <key>.",
    "QUICKLIST <key> [<0|1>]",
    "    Show low level info about the quicklist encoding of <key>.",
    "    The optional argument (0 by default) sets the level of detail",
];

/// DEBUG <subcommand> ...: the subcommands Redis's test suite and client
/// libraries rely on, as far as they mean something in ringdb.
pub async fn debug(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let sub = &args[1];
    let argc = args.len();
    // DEBUG may run while the data loads (as Redis's), but not to change
    // it: the load would then meet keys it did not put there.
    let changes_data = ["loadaof", "reload", "populate"].iter().any(|name| is(sub, name));
    if changes_data && conn.core.shared.loading.active() {
        return Err(crate::loading::LOADING);
    }
    if argc == 2 && is(sub, "help") {
        crate::cmd::help(conn, args, DEBUG_HELP);
    } else if is(sub, "loadaof") && argc == 2 {
        persist::debug_loadaof(&conn.core, conn.state.in_exec).await?;
        conn.reply().ok();
    } else if is(sub, "reload") {
        debug_reload(conn, &args[2..]).await?;
    } else if is(sub, "sleep") && argc == 3 {
        sleep_all(conn, &args[2]).await?;
    } else if is(sub, "set-disable-deny-scripts") && argc == 3 {
        conn.core.shared.scripts.set_deny_disabled(atoi(&args[2]) != 0);
        conn.reply().ok();
    } else if is(sub, "populate") && (3..=5).contains(&argc) {
        populate(conn, args).await?;
    } else if is(sub, "pause-cron") && argc == 3 {
        let paused = atoi(&args[2]) != 0;
        conn.core.shared.cron_paused.store(paused, std::sync::atomic::Ordering::Relaxed);
        conn.reply().ok();
    } else if is(sub, "set-active-expire") && argc == 3 {
        let enabled = atoi(&args[2]) != 0;
        conn.core
            .invoke_on_all(move |core| {
                core.shard.borrow_mut().state.settings.active_expire = enabled
            })
            .await?;
        conn.reply().ok();
    } else if is(sub, "object") && argc == 3 {
        let line = on_key_owner(conn, &args[2], object_line).await??;
        conn.reply().simple(&line);
    } else if is(sub, "listpack") && argc == 3 {
        on_key_owner(conn, &args[2], |_, _| {
            Err(CmdError::new("ERR Not a listpack encoded object."))
        })
        .await??;
    } else if is(sub, "quicklist") && (argc == 3 || argc == 4) {
        on_key_owner(conn, &args[2], |_, _| {
            Err(CmdError::new("ERR Not a quicklist encoded object."))
        })
        .await??;
    } else if is(sub, "quicklist-packed-threshold") && argc == 3 {
        // ringdb's lists keep every element the same way whatever its size:
        // there is no plain/packed node threshold to move, so only the
        // argument is checked, as Redis checks it.
        let size = crate::config::settings::parse_memory(&text(&args[2]));
        if !size.is_some_and(|n| (0..=(1i64 << 32) - (1 << 20)).contains(&n)) {
            return Err(CmdError::new(
                "ERR argument must be a memory value bigger than 1 and smaller than 4gb",
            ));
        }
        conn.reply().ok();
    } else if is(sub, "change-repl-id") && argc == 2 {
        tracing::info!("Changing replication IDs after receiving DEBUG change-repl-id");
        let seed = ringdb_engine::shard::now_ms() ^ (conn.state.id << 32);
        {
            let mut st = conn.core.shared.repl.lock();
            st.replid = crate::node::run_id(seed ^ st.replid.len() as u64);
            st.replid2 = crate::repl::NO_REPLID.into();
            st.second_offset = -1;
        }
        conn.reply().ok();
    } else if is(sub, "digest") && argc == 2 {
        let digest = dataset_digest(conn).await?;
        conn.reply().simple(&hex(&digest));
    } else if is(sub, "digest-value") && argc >= 2 {
        let digests = value_digests(conn, &args[2..]).await?;
        let mut out = conn.reply();
        out.array(digests.len());
        digests.iter().for_each(|d| out.simple(&hex(d)));
    } else if is(sub, "protocol") && argc == 3 {
        ringdb_engine::families::debug::protocol(&mut conn.reply(), &args[2])?;
    } else if is(sub, "error") && argc == 3 {
        return Err(CmdError::owned(text(&args[2])));
    } else if is(sub, "log") && argc == 3 {
        tracing::warn!("DEBUG LOG: {}", text(&args[2]));
        conn.reply().ok();
    } else if is(sub, "config-rewrite-force-all") && argc == 2 {
        // CONFIG REWRITE writing every setting, defaults too (Redis's
        // test of a file that names everything).
        let config = conn.core.config.borrow().clone();
        if let Err(e) = config.rewrite(true) {
            return Err(CmdError::owned(format!("ERR CONFIG-REWRITE-FORCE-ALL failed: {e}")));
        }
        conn.reply().ok();
    } else if is(sub, "stringmatch-test") && argc == 2 {
        stringmatch_fuzz(conn.state.id);
        conn.reply().simple("Apparently Redis did not crash: test passed");
    } else {
        return Err(crate::cmd::subcommand_syntax_error(args));
    }
    Ok(())
}

/// DEBUG RELOAD [MERGE] [NOFLUSH] [NOSAVE]: save, empty and load again
/// (NOSAVE: load the file as it is; NOFLUSH: keep the data, and with MERGE
/// let the file replace what it also has).
async fn debug_reload(conn: &mut Connection, options: &[Bytes]) -> CmdResult {
    let mut how = persist::Reload { save: true, flush: true, merge: false };
    for option in options {
        if is(option, "merge") {
            how.merge = true;
        } else if is(option, "noflush") {
            how.flush = false;
        } else if is(option, "nosave") {
            how.save = false;
        } else {
            return Err(CmdError::new(
                "ERR DEBUG RELOAD only supports the MERGE, NOFLUSH and NOSAVE options.",
            ));
        }
    }
    persist::debug_reload(&conn.core, conn.state.in_exec, how).await?;
    conn.reply().ok();
    Ok(())
}

/// DEBUG DIGEST: the signature of every database on every shard.
async fn dataset_digest(conn: &Connection) -> Result<Digest, CmdError> {
    let per_core = conn
        .core
        .invoke_on_all(|core| {
            let shard = core.shard.borrow();
            shard.keyspace.iter().map(|db| (db.len(), digest::db_digest(db))).collect::<Vec<_>>()
        })
        .await?;
    let mut dbs: Vec<(usize, Digest)> = Vec::new();
    for core in &per_core {
        dbs.resize(dbs.len().max(core.len()), (0, [0; 20]));
        dbs.iter_mut().zip(core).for_each(|(total, part)| digest::combine(total, part));
    }
    Ok(digest::dataset_digest(&dbs))
}

/// DEBUG DIGEST-VALUE key ...: each value's signature (zeros for a missing
/// key), with one visit per shard that owns some of the keys.
async fn value_digests(conn: &Connection, keys: &[Bytes]) -> Result<Vec<Digest>, CmdError> {
    let mut out = vec![[0u8; 20]; keys.len()];
    let db = conn.state.db;
    let slot_map = conn.core.shared.slot_map;
    for shard in 0..conn.core.shared.shards() {
        let owner = ringdb_engine::ShardId(shard as u16);
        let mine: Vec<(usize, Bytes)> = keys
            .iter()
            .enumerate()
            .filter(|(_, k)| slot_map.shard_of_key(k) == owner)
            .map(|(i, k)| (i, k.clone()))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let found = conn
            .core
            .invoke_on(owner, move |core| {
                let shard = core.shard.borrow();
                let db = shard.keyspace.db(db);
                mine.into_iter()
                    .map(|(i, k)| (i, db.get(&k).map(digest::value_digest).unwrap_or([0; 20])))
                    .collect::<Vec<_>>()
            })
            .await?;
        for (i, d) in found {
            out[i] = d;
        }
    }
    Ok(out)
}

/// C's `atoi`: the leading decimal integer, 0 when there is none.
fn atoi(arg: &[u8]) -> i64 {
    let start = arg.iter().position(|c| !c.is_ascii_whitespace()).unwrap_or(arg.len());
    let rest = &arg[start..];
    let sign_len = usize::from(matches!(rest.first(), Some(b'-' | b'+')));
    let digits = rest[sign_len..].iter().take_while(|c| c.is_ascii_digit()).count().min(18);
    parse_i64(&rest[..sign_len + digits]).unwrap_or(0)
}

/// DEBUG SLEEP seconds: stops the whole server, every core at once, as
/// Redis's single thread stops. The other cores are asked first and this one
/// sleeps last, so that all of them sleep at the same time.
async fn sleep_all(conn: &mut Connection, seconds: &[u8]) -> CmdResult {
    let pause = ringdb_engine::families::debug::sleep_time(seconds);
    let mut asleep = Vec::new();
    for shard in (0..conn.core.shared.shards()).map(|i| ringdb_engine::ShardId(i as u16)) {
        if shard == conn.core.id {
            continue;
        }
        let (done, woke) = flume::bounded(1);
        let job: crate::mesh::Job = Box::new(move |_| {
            std::thread::sleep(pause);
            let _ = done.send(());
        });
        conn.core.send_job(shard, job).await;
        asleep.push(woke);
    }
    std::thread::sleep(pause);
    for woke in asleep {
        woke.recv_async().await.map_err(|_| crate::mesh::NO_ANSWER)?;
    }
    conn.reply().ok();
    Ok(())
}

/// Runs `f` with the entry stored at `key` in the caller's database, on the
/// shard that owns it; a missing key is `ERR no such key`. Like Redis's
/// debug lookups it neither expires the key nor touches its access time.
/// DEBUG POPULATE count [prefix] [size]: `prefix:0` … `prefix:count-1`
/// (`key` by default) set to `value:<n>`, zero-padded or cut to `size`
/// bytes when given; keys that exist are left alone, as Redis does. Each
/// shard makes its own keys, through SET NX so that the change reaches
/// WATCH, tracking and the log as any write.
async fn populate(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    const NOT_POSITIVE: CmdError = CmdError::new("ERR value is out of range, must be positive");
    let positive = |a: &Bytes| parse_i64(a).filter(|n| *n >= 0).ok_or(NOT_POSITIVE);
    let count = positive(&args[2])? as u64;
    let size = match args.get(4) {
        Some(a) => positive(a)? as usize,
        None => 0,
    };
    let prefix = args.get(3).map_or_else(|| Bytes::from_static(b"key"), Bytes::clone);
    let client = ringdb_engine::command::ClientInfo { db: conn.state.db, ..conn.state.info() };
    let set = ringdb_engine::command::table().get(b"set").ok_or(CmdError::new("ERR no SET row"))?;
    conn.core
        .invoke_on_all(move |core| {
            let slot_map = core.shared.slot_map;
            let mut reply = Vec::new();
            {
                let mut shard = core.shard.borrow_mut();
                for j in 0..count {
                    let mut key = prefix.to_vec();
                    key.extend_from_slice(format!(":{j}").as_bytes());
                    if slot_map.shard_of_key(&key) != core.id {
                        continue;
                    }
                    let mut value = format!("value:{j}").into_bytes();
                    if size > 0 {
                        value.resize(size, 0);
                    }
                    let args = vec![
                        Bytes::from_static(b"set"),
                        Bytes::from(key),
                        Bytes::from(value),
                        Bytes::from_static(b"nx"),
                    ];
                    let cmd =
                        ringdb_engine::ShardCommand { id: set.id, spec: set.spec, args, client };
                    reply.clear();
                    shard.call(&cmd, &mut reply, &mut Clock::start(), Caller::Client);
                }
            }
            core.publish_changes();
        })
        .await?;
    conn.reply().ok();
    Ok(())
}

async fn on_key_owner<R, F>(
    conn: &Connection,
    key: &Bytes,
    f: F,
) -> Result<Result<R, CmdError>, CmdError>
where
    F: FnOnce(&Core, &Entry) -> Result<R, CmdError> + Send + 'static,
    R: Send + 'static,
{
    let owner = conn.core.shared.slot_map.shard_of_key(key);
    let db = conn.state.db;
    let key = key.clone();
    conn.core
        .invoke_on(owner, move |core| {
            let shard = core.shard.borrow();
            match shard.keyspace.db(db).get(&key) {
                Some(entry) => f(core, entry),
                None => Err(NO_SUCH_KEY),
            }
        })
        .await
}

/// DEBUG OBJECT's line: `Value at:<address> refcount:1 encoding:<enc>
/// serializedlength:<n> lru:<clock> lru_seconds_idle:<s>`. ringdb shares no
/// values, so the refcount is always 1; the serialized length is that of the
/// value's uncompressed RDB encoding.
fn object_line(core: &Core, entry: &Entry) -> Result<String, CmdError> {
    let shard = core.shard.borrow();
    let now = ringdb_engine::shard::now_ms();
    let idle = if shard.state.settings.lfu {
        // LFU keeps the minute of the last decrement in the top 16 bits.
        let last = entry.access >> 8;
        let minutes = ((now / 60_000) & 0xffff) as u32;
        let elapsed = if minutes >= last { minutes - last } else { 0xffff - last + minutes };
        elapsed as u64 * 60
    } else {
        (now / 1000).saturating_sub(entry.access as u64)
    };
    Ok(format!(
        "Value at:{:p} refcount:1 encoding:{} serializedlength:{} lru:{} lru_seconds_idle:{}",
        &entry.value as *const Value,
        entry.value.encoding(),
        serialized_len(&entry.value),
        entry.access,
        idle
    ))
}

/// Length of the value in RDB form without compression (`rdbSavedObjectLen`).
/// Collections are measured in RDB's element-by-element forms (count, then
/// each element as an RDB string; sorted-set scores as 8-byte doubles).
fn serialized_len(value: &Value) -> usize {
    let mut tmp = [0u8; 24];
    let elements = |count: usize, lens: &mut dyn Iterator<Item = usize>| {
        rdb_len_len(count) + lens.sum::<usize>()
    };
    match value {
        Value::List(l) => {
            elements(l.len(), &mut l.iter().map(|i| string_rdb_len(i.bytes(&mut tmp))))
        }
        Value::Set(set) => {
            elements(set.len(), &mut set.iter().map(|i| string_rdb_len(i.bytes(&mut tmp))))
        }
        Value::Hash(h) => {
            let mut tmp2 = [0u8; 24];
            elements(
                h.len(),
                &mut h.iter().map(|(f, v)| {
                    string_rdb_len(f.bytes(&mut tmp)) + string_rdb_len(v.bytes(&mut tmp2))
                }),
            )
        }
        Value::ZSet(z) => {
            elements(z.len(), &mut z.iter().map(|(m, _)| string_rdb_len(m.bytes(&mut tmp)) + 8))
        }
        Value::Str(StrValue::Int(n)) => rdb_int_len(*n).unwrap_or_else(|| {
            let digits = n.to_string().len();
            rdb_len_len(digits) + digits
        }),
        Value::Str(s) => {
            let mut tmp = [0u8; 20];
            let bytes = s.as_bytes(&mut tmp);
            string_rdb_len(bytes)
        }
        Value::Bloom(filter) => bloom_rdb_len(filter),
        // Each node as its key (a 16-byte id string) and its listpack as a
        // string, then the stream's counters and ids (groups not counted).
        Value::Stream(s) => {
            let nodes: usize = s.node_sizes().map(|n| 17 + rdb_len_len(n) + n).sum();
            rdb_len_len(s.node_count()) + nodes + 64
        }
    }
}

/// A Bloom filter as RedisBloom's `BFRdbSave` writes it through the module
/// API: the 64-bit module type id, each field behind its one-byte opcode
/// (unsigned: an RDB length; double: 8 bytes; buffer: an RDB string), and
/// the end-of-value opcode.
fn bloom_rdb_len(filter: &ringdb_types::bloom::BloomFilter) -> usize {
    let unsigned = |v: u64| 1 + rdb_len_len(v as usize);
    let double = 1 + 8;
    let mut len = 9
        + unsigned(filter.size())
        + unsigned(filter.links().len() as u64)
        + unsigned(filter.options() as u64)
        + unsigned(filter.growth() as u64);
    for link in filter.links() {
        len += unsigned(link.entries)
            + double
            + unsigned(link.hashes as u64)
            + double
            + unsigned(link.bits)
            + unsigned(link.n2() as u64)
            + 1
            + string_rdb_len(link.bit_array())
            + unsigned(link.size);
    }
    len + 1
}

/// A string as `rdbSaveRawString` writes it: short canonical integers as
/// integers, everything else as length + bytes.
fn string_rdb_len(bytes: &[u8]) -> usize {
    if bytes.len() <= 11 {
        if let Some(n) = parse_i64(bytes).filter(|n| n.to_string().as_bytes() == bytes) {
            if let Some(len) = rdb_int_len(n) {
                return len;
            }
        }
    }
    rdb_len_len(bytes.len()) + bytes.len()
}

/// `rdbEncodeInteger`: a type byte and 1, 2 or 4 bytes for 8/16/32-bit values.
fn rdb_int_len(n: i64) -> Option<usize> {
    if (-(1 << 7)..1 << 7).contains(&n) {
        Some(2)
    } else if (-(1 << 15)..1 << 15).contains(&n) {
        Some(3)
    } else if (-(1 << 31)..1 << 31).contains(&n) {
        Some(5)
    } else {
        None
    }
}

/// `rdbSaveLen`: how many bytes a length takes.
fn rdb_len_len(len: usize) -> usize {
    match len {
        0..64 => 1,
        64..16384 => 2,
        _ if len as u64 <= u32::MAX as u64 => 5,
        _ => 9,
    }
}

/// DEBUG STRINGMATCH-TEST: Redis's fuzz test of its glob matcher, run
/// against ringdb's: random patterns and strings of up to 31 bytes must
/// never crash it or run away.
fn stringmatch_fuzz(seed: u64) {
    let mut x = seed ^ 0x2545_f491_4f6c_dd1d | 1;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let (mut text, mut pattern) = ([0u8; 32], [0u8; 32]);
    for _ in 0..1_000_000 {
        let text_len = (next() % 32) as usize;
        let pattern_len = (next() % 32) as usize;
        text[..text_len].iter_mut().for_each(|c| *c = (next() % 128) as u8);
        pattern[..pattern_len].iter_mut().for_each(|c| *c = (next() % 128) as u8);
        std::hint::black_box(ringdb_types::glob::glob_match(
            &pattern[..pattern_len],
            &text[..text_len],
            false,
        ));
    }
}

/// ROLE: a primary without replicas (ringdb has no replication yet), at the
/// replication offset INFO replication shows.
pub fn role(conn: &mut Connection) -> CmdResult {
    crate::repl::role(conn);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rdb_lengths() {
        assert_eq!(serialized_len(&Value::Str(StrValue::Int(100))), 2);
        assert_eq!(serialized_len(&Value::Str(StrValue::Int(1000))), 3);
        assert_eq!(serialized_len(&Value::Str(StrValue::Int(1 << 20))), 5);
        assert_eq!(serialized_len(&Value::Str(StrValue::Int(1 << 40))), 1 + 13);
        assert_eq!(serialized_len(&Value::Str(StrValue::from_bytes(b"hello"))), 6);
        assert_eq!(string_rdb_len(b"007"), 4);
        assert_eq!(string_rdb_len(&[b'x'; 100]), 102);
        assert_eq!(rdb_len_len(20000), 5);
    }

    #[test]
    fn c_number_prefixes() {
        assert_eq!(atoi(b"1"), 1);
        assert_eq!(atoi(b" 12abc"), 12);
        assert_eq!(atoi(b"abc"), 0);
        assert_eq!(atoi(b"-3"), -3);
        assert_eq!(atoi(b"99999999999999999999999"), 999_999_999_999_999_999);
    }
}
