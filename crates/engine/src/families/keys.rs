//! The keyspace ("generic") family: DEL, UNLINK, EXISTS, TOUCH, TYPE,
//! RENAME, RENAMENX, COPY, MOVE, OBJECT, the expiry commands (EXPIRE …
//! PERSIST, TTL …), and the rows of the commands that visit every shard
//! (KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL, SWAPDB), which the
//! server runs on the connection's core with the shard-side `op_*`
//! functions below. Semantics and error texts follow Redis's `db.c`,
//! `expire.c` and `object.c`.
//!
//! RENAME, RENAMENX and COPY are plain single-keyspace handlers: when their
//! keys live on different shards the router gathers them into a scratch
//! keyspace and sends the results back to the owners.

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, DB_INDEX_OUT_OF_RANGE, NO_SUCH_KEY, SYNTAX};
use crate::command::spec::{
    acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec, Merge, NodeCommand as N,
};
use crate::command::{Ctx, KeyspaceView};
use crate::keyspace::{Db, Entry, Keyspace, StrValue, Value};
use crate::shard::Shard;
use bytes::Bytes;
use ringdb_types::glob::glob_match;

const SAME_OBJECT: CmdError = CmdError::new("ERR source and destination objects are the same");

/// The one key spec of EXPIRE and its relatives.
const EXPIRE_KEY: &[KeySpec] = &[KeySpec::one(1, kf::RW | kf::UPDATE)];
/// TTL and its relatives.
const TTL_KEY: &[KeySpec] = &[KeySpec::one(1, kf::RO | kf::ACCESS)];
/// The key of an OBJECT subcommand.
const OBJECT_KEY: &[KeySpec] = &[KeySpec::one(2, kf::RO)];

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd))
}

const fn object_sub(name: &'static str, handler: crate::command::Handler) -> CommandSpec {
    CommandSpec::new(name, 3, READONLY, Exec::Shard(handler))
        .keys(OBJECT_KEY)
        .acl(acl::KEYSPACE)
        .tips(&["nondeterministic_output"])
}

static OBJECT_SUBCOMMANDS: &[CommandSpec] = &[
    object_sub("encoding", object_encoding).doc(
        "generic",
        "2.2.3",
        "Returns the internal encoding of a Redis object.",
        "O(1)",
        "key",
    ),
    object_sub("freq", object_freq).doc(
        "generic",
        "4.0.0",
        "Returns the logarithmic access frequency counter of a Redis object.",
        "O(1)",
        "key",
    ),
    object_sub("idletime", object_idletime).doc(
        "generic",
        "2.2.3",
        "Returns the time since the last access to a Redis object.",
        "O(1)",
        "key",
    ),
    object_sub("refcount", object_refcount).doc(
        "generic",
        "2.2.3",
        "Returns the reference count of a value of a key.",
        "O(1)",
        "key",
    ),
    CommandSpec::new("help", 2, LOADING | STALE, Exec::Shard(object_help)).acl(acl::KEYSPACE).doc(
        "generic",
        "6.2.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("del", -2, WRITE, Exec::Split { handler: del, merge: Merge::Sum, atomic: true })
        .keys(&[KeySpec::range(1, -1, 1, kf::RM | kf::DELETE)])
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .doc("generic", "1.0.0", "Deletes one or more keys.", "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).", "key [key ...]"),
    CommandSpec::new("unlink", -2, WRITE | FAST, Exec::Split { handler: unlink, merge: Merge::Sum, atomic: true })
        .keys(&[KeySpec::range(1, -1, 1, kf::RM | kf::DELETE)])
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .doc("generic", "4.0.0", "Asynchronously deletes one or more keys.", "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.", "key [key ...]"),
    CommandSpec::new("exists", -2, READONLY | FAST | WATCHABLE, Exec::Split { handler: exists, merge: Merge::Sum, atomic: false })
        .keys(&[KeySpec::range(1, -1, 1, kf::RO)])
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .doc("generic", "1.0.0", "Determines whether one or more keys exist.", "O(N) where N is the number of keys to check.", "key [key ...]"),
    CommandSpec::new("touch", -2, READONLY | FAST, Exec::Split { handler: touch, merge: Merge::Sum, atomic: false })
        .keys(&[KeySpec::range(1, -1, 1, kf::RO)])
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .doc("generic", "3.2.1", "Returns the number of existing keys out of those specified after updating the time they were last accessed.", "O(N) where N is the number of keys that will be touched.", "key [key ...]"),
    CommandSpec::new("type", 2, READONLY | FAST, Exec::Shard(type_of))
        .keys(&[KeySpec::one(1, kf::RO)])
        .acl(acl::KEYSPACE)
        .doc("generic", "1.0.0", "Determines the type of value stored at a key.", "O(1)", "key"),
    CommandSpec::new("rename", 3, WRITE, Exec::Shard(rename))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::DELETE), KeySpec::one(2, kf::OW | kf::UPDATE)])
        .acl(acl::KEYSPACE)
        .doc("generic", "1.0.0", "Renames a key and overwrites the destination.", "O(1)", "key newkey"),
    CommandSpec::new("renamenx", 3, WRITE | FAST, Exec::Shard(renamenx))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::DELETE), KeySpec::one(2, kf::OW | kf::INSERT)])
        .acl(acl::KEYSPACE)
        .doc("generic", "1.0.0", "Renames a key only when the target key name doesn't exist.", "O(1)", "key newkey"),
    CommandSpec::new("copy", -3, WRITE | DENYOOM | OTHER_DBS, Exec::Shard(copy))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS), KeySpec::one(2, kf::OW | kf::UPDATE)])
        .acl(acl::KEYSPACE)
        .doc("generic", "6.2.0", "Copies the value of a key to a new key.", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values.", "source destination [DB destination-db] [REPLACE]"),
    CommandSpec::new("move", 3, WRITE | FAST | OTHER_DBS, Exec::Shard(move_key))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::KEYSPACE)
        .doc("generic", "1.0.0", "Moves a key to another database.", "O(1)", "key db"),
    CommandSpec::container("object", OBJECT_SUBCOMMANDS)
        .doc("generic", "2.2.3", "A container for object introspection commands.", "Depends on subcommand.", ""),
    CommandSpec::new("expire", -3, WRITE | FAST, Exec::Shard(expire))
        .keys(EXPIRE_KEY)
        .acl(acl::KEYSPACE)
        .doc("generic", "1.0.0", "Sets the expiration time of a key in seconds.", "O(1)", "key seconds [NX | XX | GT | LT]"),
    CommandSpec::new("pexpire", -3, WRITE | FAST, Exec::Shard(pexpire))
        .keys(EXPIRE_KEY)
        .acl(acl::KEYSPACE)
        .doc("generic", "2.6.0", "Sets the expiration time of a key in milliseconds.", "O(1)", "key milliseconds [NX | XX | GT | LT]"),
    CommandSpec::new("expireat", -3, WRITE | FAST, Exec::Shard(expireat))
        .keys(EXPIRE_KEY)
        .acl(acl::KEYSPACE)
        .doc("generic", "1.2.0", "Sets the expiration time of a key to a Unix timestamp.", "O(1)", "key unix-time-seconds [NX | XX | GT | LT]"),
    CommandSpec::new("pexpireat", -3, WRITE | FAST, Exec::Shard(pexpireat))
        .keys(EXPIRE_KEY)
        .acl(acl::KEYSPACE)
        .doc("generic", "2.6.0", "Sets the expiration time of a key to a Unix milliseconds timestamp.", "O(1)", "key unix-time-milliseconds [NX | XX | GT | LT]"),
    CommandSpec::new("ttl", 2, READONLY | FAST | WATCHABLE, Exec::Shard(ttl))
        .keys(TTL_KEY)
        .acl(acl::KEYSPACE)
        .tips(&["nondeterministic_output"])
        .doc("generic", "1.0.0", "Returns the expiration time in seconds of a key.", "O(1)", "key"),
    CommandSpec::new("pttl", 2, READONLY | FAST, Exec::Shard(pttl))
        .keys(TTL_KEY)
        .acl(acl::KEYSPACE)
        .tips(&["nondeterministic_output"])
        .doc("generic", "2.6.0", "Returns the expiration time in milliseconds of a key.", "O(1)", "key"),
    CommandSpec::new("expiretime", 2, READONLY | FAST, Exec::Shard(expiretime))
        .keys(TTL_KEY)
        .acl(acl::KEYSPACE)
        .doc("generic", "7.0.0", "Returns the expiration time of a key as a Unix timestamp.", "O(1)", "key"),
    CommandSpec::new("pexpiretime", 2, READONLY | FAST, Exec::Shard(pexpiretime))
        .keys(TTL_KEY)
        .acl(acl::KEYSPACE)
        .doc("generic", "7.0.0", "Returns the expiration time of a key as a Unix milliseconds timestamp.", "O(1)", "key"),
    CommandSpec::new("persist", 2, WRITE | FAST | AS_IS, Exec::Shard(persist))
        .keys(EXPIRE_KEY)
        .acl(acl::KEYSPACE)
        .doc("generic", "2.2.0", "Removes the expiration time of a key.", "O(1)", "key"),
    node("keys", 2, READONLY, N::Keys)
        .acl(acl::KEYSPACE | acl::DANGEROUS)
        .tips(&["request_policy:all_shards", "nondeterministic_output_order"])
        .doc("generic", "1.0.0", "Returns all key names that match a pattern.", "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length.", "pattern"),
    node("scan", -2, READONLY | TOUCHES_ARBITRARY_KEYS, N::Scan)
        .acl(acl::KEYSPACE)
        .tips(&["nondeterministic_output", "request_policy:special", "response_policy:special"])
        .doc("generic", "2.8.0", "Iterates over the key names in the database.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", "cursor [MATCH pattern] [COUNT count] [TYPE type]"),
    node("randomkey", 1, READONLY | TOUCHES_ARBITRARY_KEYS, N::RandomKey)
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:all_shards", "response_policy:special", "nondeterministic_output"])
        .doc("generic", "1.0.0", "Returns a random key name from the database.", "O(1)", ""),
    node("dbsize", 1, READONLY | FAST, N::DbSize)
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:all_shards", "response_policy:agg_sum"])
        .doc("server", "1.0.0", "Returns the number of keys in the database.", "O(1)", ""),
    node("flushdb", -1, WRITE, N::FlushDb)
        .acl(acl::KEYSPACE | acl::DANGEROUS)
        .tips(&["request_policy:all_shards", "response_policy:all_succeeded"])
        .doc("server", "1.0.0", "Remove all keys from the current database.", "O(N) where N is the number of keys in the selected database", "[ASYNC | SYNC]"),
    node("flushall", -1, WRITE, N::FlushAll)
        .acl(acl::KEYSPACE | acl::DANGEROUS)
        .tips(&["request_policy:all_shards", "response_policy:all_succeeded"])
        .doc("server", "1.0.0", "Removes all keys from all databases.", "O(N) where N is the total number of keys in all databases", "[ASYNC | SYNC]"),
    node("swapdb", 3, WRITE | FAST, N::SwapDb)
        .acl(acl::KEYSPACE | acl::DANGEROUS)
        .doc("server", "4.0.0", "Swaps two Redis databases.", "O(N) where N is the count of clients watching or blocking on keys from both databases.", "index1 index2"),
];

/// DEL and UNLINK: `lazy` frees big values in the background.
fn delete_keys(ctx: &mut Ctx, args: &[Bytes], lazy: bool) -> i64 {
    let mut n = 0;
    for key in &args[1..] {
        // An expired key is reclaimed by the lookup and does not count.
        let deleted =
            ctx.ks.exists(key) && if lazy { ctx.ks.unlink(key) } else { ctx.ks.delete(key) };
        if deleted {
            n += 1;
        }
    }
    n
}

fn del(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let lazy = ctx.ks.state.settings.lazy_user_del;
    let n = delete_keys(ctx, args, lazy);
    ctx.out.int(n);
    Ok(())
}

fn unlink(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let n = delete_keys(ctx, args, true);
    ctx.out.int(n);
    Ok(())
}

fn exists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let n = args[1..].iter().filter(|k| ctx.ks.exists(k)).count();
    ctx.out.int(n as i64);
    Ok(())
}

/// TOUCH: a read of each key that updates its access time, even for a
/// client in CLIENT NO-TOUCH mode (Redis 7.2 exempts TOUCH from it).
fn touch(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.ks.no_touch = false;
    let n = args[1..].iter().filter(|k| ctx.ks.read(k).is_some()).count();
    ctx.out.int(n as i64);
    Ok(())
}

/// Looks `key` up as Redis's `LOOKUP_NOTOUCH` reads do (TYPE, TTL, OBJECT):
/// lazy expiry and hit/miss statistics, but the access time stays as it was.
fn lookup_no_touch<'a>(ks: &'a mut KeyspaceView<'_>, key: &[u8]) -> Option<&'a Entry> {
    let saved = ks.no_touch;
    ks.no_touch = true;
    let found = ks.read(key).is_some();
    ks.no_touch = saved;
    if found {
        ks.peek(key)
    } else {
        None
    }
}

fn type_of(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let name = lookup_no_touch(&mut ctx.ks, &args[1]).map_or("none", |e| e.value.type_name());
    ctx.out.simple(name);
    Ok(())
}

/// `entry` under another name, keeping its value, expiry and access time.
/// Redis's `renameGenericCommand`: the TTL moves with the value, and an
/// existing destination is overwritten (RENAME) or left alone (RENAMENX).
fn rename_generic(ctx: &mut Ctx, args: &[Bytes], nx: bool) -> CmdResult {
    let (src, dst) = (&args[1], &args[2]);
    if ctx.ks.write(src).is_none() {
        return Err(NO_SUCH_KEY);
    }
    if src == dst {
        match nx {
            true => ctx.out.int(0),
            false => ctx.out.ok(),
        }
        return Ok(());
    }
    if ctx.ks.write(dst).is_some() {
        if nx {
            ctx.out.int(0);
            return Ok(());
        }
        // Replaced: the event is rename_to.
        ctx.ks.discard(dst);
    }
    if !ctx.ks.rename(src, dst) {
        return Err(NO_SUCH_KEY);
    }
    match nx {
        true => ctx.out.int(1),
        false => ctx.out.ok(),
    }
    Ok(())
}

fn rename(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rename_generic(ctx, args, false)
}

fn renamenx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    rename_generic(ctx, args, true)
}

/// A database index argument of MOVE and COPY … DB: an `int` (Redis's
/// `getIntFromObjectOrReply`), then one of the configured databases.
pub fn db_index(arg: &[u8], databases: usize) -> Result<usize, CmdError> {
    let n = args::int(arg)?;
    if n < i32::MIN as i64 || n > i32::MAX as i64 {
        return Err(CmdError::new(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    if n < 0 || n as usize >= databases {
        return Err(DB_INDEX_OUT_OF_RANGE);
    }
    Ok(n as usize)
}

fn move_key(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let dst_db = db_index(&args[2], ctx.ks.keyspace().db_count())?;
    if dst_db == ctx.ks.db {
        return Err(SAME_OBJECT);
    }
    if ctx.ks.write(key).is_none() || ctx.ks.with_db(dst_db, |ks| ks.write(key).is_some()) {
        ctx.out.int(0);
        return Ok(());
    }
    let moved = ctx.ks.move_to(key, dst_db);
    ctx.out.int(moved as i64);
    Ok(())
}

/// COPY source destination [DB destination-db] [REPLACE] (Redis's
/// `copyCommand`): the copy gets the source's TTL and a fresh access time.
fn copy(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut replace = false;
    let mut dst_db = ctx.ks.db;
    let mut j = 3;
    while j < args.len() {
        if is(&args[j], "REPLACE") {
            replace = true;
        } else if is(&args[j], "DB") && j + 1 < args.len() {
            dst_db = db_index(&args[j + 1], ctx.ks.keyspace().db_count())?;
            j += 1;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    let (src, dst) = (&args[1], &args[2]);
    if dst_db == ctx.ks.db && src == dst {
        return Err(SAME_OBJECT);
    }
    let Some(entry) = ctx.ks.read(src) else {
        ctx.out.int(0);
        return Ok(());
    };
    let (value, expire) = (entry.value.clone(), entry.expire_at());
    let exists = ctx.ks.with_db(dst_db, |ks| ks.write(dst).is_some());
    if exists && !replace {
        ctx.out.int(0);
        return Ok(());
    }
    ctx.ks.with_db(dst_db, |ks| ks.set_restored(dst, value, expire, None, "copy_to"));
    ctx.out.int(1);
    Ok(())
}

/// `OBJECT <sub> key`'s entry, without touching it; `None` (a null reply
/// already written) when the key does not exist.
fn object_lookup<'a>(ctx: &'a mut Ctx, args: &[Bytes]) -> Option<&'a Entry> {
    let found = lookup_no_touch(&mut ctx.ks, &args[2]).is_some();
    if !found {
        ctx.out.null();
        return None;
    }
    ctx.ks.peek(&args[2])
}

fn object_encoding(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if let Some(e) = object_lookup(ctx, args) {
        let encoding = e.value.encoding();
        ctx.out.bulk(encoding.as_bytes());
    }
    Ok(())
}

/// Redis shares the integers 0..10000 between all keys (unless an LRU/LFU
/// policy needs per-key access data) and reports them with this count.
const SHARED_REFCOUNT: i64 = i32::MAX as i64;
const SHARED_INTEGERS: i64 = 10_000;

fn object_refcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    use crate::evict::Policy;
    // Redis's MAXMEMORY_FLAG_NO_SHARED_INTEGERS: with a limit, LRU and LFU
    // policies keep per-key access data, so integers are not shared.
    let memory = ctx.ks.state.settings.memory;
    let per_key = memory.maxmemory > 0
        && matches!(
            memory.policy,
            Policy::AllKeysLru | Policy::AllKeysLfu | Policy::VolatileLru | Policy::VolatileLfu
        );
    if let Some(e) = object_lookup(ctx, args) {
        let shared = matches!(e.value, Value::Str(StrValue::Int(n)) if (0..SHARED_INTEGERS).contains(&n) && !per_key);
        ctx.out.int(if shared { SHARED_REFCOUNT } else { 1 });
    }
    Ok(())
}

fn object_idletime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let lfu = ctx.ks.state.settings.lfu;
    let now_s = (ctx.ks.now_ms / 1000) as u32;
    let Some(access) = object_lookup(ctx, args).map(|e| e.access) else { return Ok(()) };
    if lfu {
        return Err(CmdError::new("ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    ctx.out.int(now_s.wrapping_sub(access) as i64);
    Ok(())
}

fn object_freq(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let lfu = ctx.ks.state.settings.lfu;
    let Some(access) = object_lookup(ctx, args).map(|e| e.access) else { return Ok(()) };
    if !lfu {
        return Err(CmdError::new("ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."));
    }
    let freq = ctx.ks.state.lfu_decayed(access, ctx.ks.now_ms);
    ctx.out.int(freq as i64);
    Ok(())
}

fn object_help(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    const LINES: &[&str] = &[
        "ENCODING <key>",
        "    Return the kind of internal representation used in order to store the value",
        "    associated with a <key>.",
        "FREQ <key>",
        "    Return the access frequency index of the <key>. The returned integer is",
        "    proportional to the logarithm of the recent access frequency of the key.",
        "IDLETIME <key>",
        "    Return the idle time of the <key>, that is the approximated number of",
        "    seconds elapsed since the last access to the key.",
        "REFCOUNT <key>",
        "    Return the number of references of the value associated with the specified",
        "    <key>.",
    ];
    reply_help(ctx, &args[0], LINES);
    Ok(())
}

/// Redis's `addReplyHelp`: a header naming the command, the lines, and the
/// HELP entry.
pub fn reply_help(ctx: &mut Ctx, command: &[u8], lines: &[&str]) {
    let name = String::from_utf8_lossy(command).to_ascii_uppercase();
    ctx.out.array(lines.len() + 3);
    ctx.out.simple(&format!("{name} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"));
    for line in lines {
        ctx.out.simple(line);
    }
    ctx.out.simple("HELP");
    ctx.out.simple("    Prints this help.");
}

/// The conditions of EXPIRE and its relatives (Redis 7).
#[derive(Default, Clone, Copy)]
struct ExpireFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
}

/// Redis's `parseExtendedExpireArgumentsOrReply`.
fn parse_expire_flags(options: &[Bytes]) -> Result<ExpireFlags, CmdError> {
    let mut f = ExpireFlags::default();
    for opt in options {
        if is(opt, "NX") {
            f.nx = true;
        } else if is(opt, "XX") {
            f.xx = true;
        } else if is(opt, "GT") {
            f.gt = true;
        } else if is(opt, "LT") {
            f.lt = true;
        } else {
            return Err(CmdError::owned(format!("ERR Unsupported option {}", args::text(opt))));
        }
    }
    if f.nx && (f.xx || f.gt || f.lt) {
        return Err(CmdError::new(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if f.gt && f.lt {
        return Err(CmdError::new("ERR GT and LT options at the same time are not compatible"));
    }
    Ok(f)
}

impl ExpireFlags {
    /// Whether the conditions allow replacing `current` (ms, `None` = no
    /// TTL, an infinite one) with `when`.
    fn allow(self, current: Option<i64>, when: i64) -> bool {
        if self.nx && current.is_some() {
            return false;
        }
        if self.xx && current.is_none() {
            return false;
        }
        // No TTL counts as an infinite one: GT always fails against it.
        if self.gt && current.is_none_or(|c| when <= c) {
            return false;
        }
        if self.lt && current.is_some_and(|c| when >= c) {
            return false;
        }
        true
    }
}

/// Redis's `expireGenericCommand`: `base_ms` is now for relative times and 0
/// for absolute ones. A time already past deletes the key.
fn expire_generic(
    ctx: &mut Ctx,
    args: &[Bytes],
    base_ms: u64,
    seconds: bool,
    name: &str,
) -> CmdResult {
    let flags = parse_expire_flags(&args[3..])?;
    let invalid = || CmdError::owned(format!("ERR invalid expire time in '{name}' command"));
    let mut when = args::int(&args[2])?;
    if seconds {
        when = when.checked_mul(1000).ok_or_else(invalid)?;
    }
    when = when.checked_add(base_ms as i64).ok_or_else(invalid)?;
    let key = &args[1];
    if ctx.ks.write(key).is_none() {
        ctx.out.int(0);
        return Ok(());
    }
    let current = ctx.ks.peek(key).and_then(Entry::expire_at).map(|at| at as i64);
    if !flags.allow(current, when) {
        ctx.out.int(0);
        return Ok(());
    }
    if when <= ctx.ks.now_ms as i64 {
        ctx.ks.delete(key);
    } else {
        ctx.ks.set_expire(key, Some(when as u64), "expire");
    }
    ctx.out.int(1);
    Ok(())
}

fn expire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let now = ctx.ks.now_ms;
    expire_generic(ctx, args, now, true, "expire")
}

fn pexpire(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let now = ctx.ks.now_ms;
    expire_generic(ctx, args, now, false, "pexpire")
}

fn expireat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 0, true, "expireat")
}

fn pexpireat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    expire_generic(ctx, args, 0, false, "pexpireat")
}

/// Redis's `ttlGenericCommand`: -2 for a missing key, -1 without a TTL,
/// else the time left (`absolute`: the expiry itself), in ms or rounded to
/// seconds.
fn ttl_generic(ctx: &mut Ctx, key: &[u8], millis: bool, absolute: bool) -> CmdResult {
    let now = ctx.ks.now_ms as i64;
    let reply = match lookup_no_touch(&mut ctx.ks, key) {
        None => -2,
        Some(e) => match e.expire_at() {
            None => -1,
            Some(at) => {
                let at = at as i64;
                let ttl = if absolute { at } else { (at - now).max(0) };
                if millis {
                    ttl
                } else {
                    ttl.saturating_add(500) / 1000
                }
            }
        },
    };
    ctx.out.int(reply);
    Ok(())
}

fn ttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &args[1], false, false)
}

fn pttl(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &args[1], true, false)
}

fn expiretime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &args[1], false, true)
}

fn pexpiretime(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ttl_generic(ctx, &args[1], true, true)
}

fn persist(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let had_ttl = ctx.ks.write(key).is_some_and(|e| e.expire_at().is_some());
    if had_ttl {
        ctx.ks.set_expire(key, None, "persist");
    }
    ctx.out.int(had_ttl as i64);
    Ok(())
}

// ---- Shard-side operations of the commands that visit every shard ----

/// KEYS on one shard: the live keys of `db` matching the glob `pattern`.
pub fn op_keys(shard: &Shard, db: usize, pattern: &[u8], now_ms: u64) -> Vec<Bytes> {
    keys_matching(&shard.keyspace, db, pattern, now_ms)
}

/// [`op_keys`] of one keyspace (a script's KEYS visits each shard's).
pub fn keys_matching(keyspace: &Keyspace, db: usize, pattern: &[u8], now_ms: u64) -> Vec<Bytes> {
    let all = pattern == b"*";
    let mut keys = Vec::new();
    for (_, table) in keyspace.db(db).slots() {
        for e in table.iter() {
            if (all || glob_match(pattern, e.key(), false)) && !e.is_expired(now_ms) {
                keys.push(Bytes::copy_from_slice(e.key()));
            }
        }
    }
    keys
}

/// The `n`-th entry of `db` in slot order.
fn nth_entry(db: &Db, mut n: usize) -> Option<&Entry> {
    for (_, table) in db.slots() {
        if n < table.len() {
            return table.iter().nth(n);
        }
        n -= table.len();
    }
    None
}

/// Expired keys RANDOMKEY may meet in a row before it reclaims them all.
const RANDOM_KEY_TRIES: usize = 100;

/// Deletes `key` of `db` as expired, through the funnel.
fn reclaim_expired(shard: &mut Shard, db: usize, key: &[u8]) {
    if shard.state.pause.keys_frozen(crate::shard::now_ms()) {
        return;
    }
    crate::expire::delete_expired(&mut shard.keyspace, &mut shard.state, db, key);
}

/// RANDOMKEY on one shard: a uniformly chosen live key of `db`, or `None`
/// when it has none. Expired keys met on the way are reclaimed, as Redis's
/// `dbRandomKey` does; after many in a row, all of the database's expired
/// keys are, so the answer never waits on luck.
pub fn op_random_key(shard: &mut Shard, db: usize, now_ms: u64) -> Option<Bytes> {
    for _ in 0..RANDOM_KEY_TRIES {
        let len = shard.keyspace.db(db).len();
        if len == 0 {
            return None;
        }
        let n = (shard.state.random() % len as u64) as usize;
        let entry = nth_entry(shard.keyspace.db(db), n)?;
        let key = Bytes::copy_from_slice(entry.key());
        if !entry.is_expired(now_ms) {
            return Some(key);
        }
        reclaim_expired(shard, db, &key);
    }
    let volatile: Vec<u16> =
        shard.keyspace.db(db).slots().filter(|(_, t)| t.volatile() > 0).map(|(s, _)| s).collect();
    let frozen = shard.state.pause.keys_frozen(now_ms);
    for slot in volatile.into_iter().filter(|_| !frozen) {
        crate::expire::drain_expired(&mut shard.keyspace, &mut shard.state, db, slot, now_ms);
    }
    let len = shard.keyspace.db(db).len();
    if len == 0 {
        return None;
    }
    let n = (shard.state.random() % len as u64) as usize;
    nth_entry(shard.keyspace.db(db), n).map(|e| Bytes::copy_from_slice(e.key()))
}

/// FLUSHDB (`Some(db)`) or FLUSHALL (`None`) on one shard; `lazy` frees
/// the keys in the background (ASYNC).
pub fn op_flush(shard: &mut Shard, db: Option<usize>, lazy: bool) {
    let dbs = match db {
        Some(db) => db..db + 1,
        None => 0..shard.keyspace.db_count(),
    };
    // Cached keys are not per database: every client drops everything.
    shard.state.funnel.tracking.flush();
    for db in dbs {
        // Watched keys that existed are changed by the flush.
        let keyspace = &shard.keyspace;
        shard.state.funnel.flushed(db, |key| keyspace.db(db).get(key).is_some());
        shard.keyspace.db_mut(db).clear_freeing(lazy);
    }
}

/// Empties the shard before its data is loaded again from a file (DEBUG
/// RELOAD, DEBUG LOADAOF), functions included: watchers and tracking
/// clients hear a flush, the log does not ([`crate::funnel::Funnel::replaced`]).
pub fn op_empty_for_load(shard: &mut Shard) {
    shard.state.funnel.tracking.flush();
    for db in 0..shard.keyspace.db_count() {
        let keyspace = &shard.keyspace;
        shard.state.funnel.replaced(db, |key| keyspace.db(db).get(key).is_some());
        shard.keyspace.db_mut(db).clear();
    }
    shard.state.scripting.function_flush();
}

/// SWAPDB on one shard. Every key of both databases may look different to
/// their clients afterwards, so both go through the funnel as flushed.
pub fn op_swap_db(shard: &mut Shard, a: usize, b: usize) {
    if a == b {
        return;
    }
    // A watched key changes if it exists on either side of the swap.
    let keyspace = &shard.keyspace;
    let on_either =
        |key: &[u8]| keyspace.db(a).get(key).is_some() || keyspace.db(b).get(key).is_some();
    shard.state.funnel.flushed(a, on_either);
    shard.state.funnel.flushed(b, on_either);
    shard.keyspace.swap(a, b);
}

/// FLUSHDB's and FLUSHALL's optional `ASYNC | SYNC` (both free memory at
/// once here: a shard's flush drops its tables in one go).
/// `[ASYNC | SYNC]` of FLUSHDB and FLUSHALL: whether to free in the
/// background, `lazy_default` (`lazyfree-lazy-user-flush`) when not said.
pub fn parse_flush_mode(args: &[Bytes], lazy_default: bool) -> Result<bool, CmdError> {
    match args {
        [_] => Ok(lazy_default),
        [_, mode] if is(mode, "SYNC") => Ok(false),
        [_, mode] if is(mode, "ASYNC") => Ok(true),
        _ => Err(SYNTAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::spec::NodeCommand;
    use crate::command::{table, ClientInfo};
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardId, ShardSettings, ShardState, SlotMap};
    use ringdb_protocol::Resp;

    /// A one-shard keyspace and a recording state, driven command by command.
    struct Harness {
        keyspace: Keyspace,
        state: ShardState,
        db: usize,
        now: u64,
        no_touch: bool,
    }

    impl Harness {
        fn new() -> Self {
            Harness {
                keyspace: Keyspace::for_slots(16, 0, 16384),
                state: ShardState::recording(ShardSettings::default()),
                db: 0,
                now: 1_000_000,
                no_touch: false,
            }
        }

        fn run(&mut self, line: &str) -> String {
            let args: Vec<Bytes> =
                line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
            let out = test_call(
                &mut self.keyspace,
                &mut self.state,
                args,
                ClientInfo {
                    id: 1,
                    db: self.db,
                    resp: Resp::V2,
                    no_touch: self.no_touch,
                    ..ClientInfo::default()
                },
                self.now,
            );
            String::from_utf8_lossy(&out).into_owned()
        }

        fn events(&mut self) -> Vec<(usize, String, &'static str)> {
            self.state
                .funnel
                .take_events()
                .into_iter()
                .map(|e| (e.db, String::from_utf8_lossy(&e.key).into_owned(), e.event))
                .collect()
        }

        fn set(&mut self, key: &str, value: &str) {
            self.run(&format!("SET {key} {value}"));
            self.events();
        }
    }

    #[test]
    fn rename_moves_value_and_ttl_and_fires_both_events() {
        let mut h = Harness::new();
        h.set("a", "1");
        h.run("PEXPIRE a 5000");
        h.set("b", "2");
        h.events();
        assert_eq!(h.run("RENAME a b"), "+OK\r\n");
        assert_eq!(h.events(), vec![(0, "a".into(), "rename_from"), (0, "b".into(), "rename_to")]);
        assert_eq!(h.run("GET b"), "$1\r\n1\r\n");
        assert_eq!(h.run("PTTL b"), ":5000\r\n");
        assert_eq!(h.run("RENAME a b"), "-ERR no such key\r\n");
        assert_eq!(h.run("RENAME b b"), "+OK\r\n");
        assert_eq!(h.run("RENAMENX b b"), ":0\r\n");
        h.set("c", "3");
        assert_eq!(h.run("RENAMENX b c"), ":0\r\n");
        assert_eq!(h.run("RENAMENX b d"), ":1\r\n");
        assert!(h.events().iter().any(|e| e.2 == "rename_to" && e.1 == "d"));
    }

    #[test]
    fn expire_options_follow_redis() {
        let mut h = Harness::new();
        h.set("k", "v");
        assert_eq!(h.run("EXPIRE k 100 XX"), ":0\r\n");
        assert_eq!(h.run("EXPIRE k 100 GT"), ":0\r\n");
        assert_eq!(h.run("EXPIRE k 100 LT"), ":1\r\n");
        assert_eq!(h.run("EXPIRE k 200 NX"), ":0\r\n");
        assert_eq!(h.run("EXPIRE k 200 GT"), ":1\r\n");
        assert_eq!(h.run("EXPIRE k 300 LT"), ":0\r\n");
        assert_eq!(h.run("TTL k"), ":200\r\n");
        assert_eq!(h.run("PEXPIRETIME k"), format!(":{}\r\n", h.now + 200_000));
        assert_eq!(
            h.run("EXPIRE k 1 NX XX"),
            "-ERR NX and XX, GT or LT options at the same time are not compatible\r\n"
        );
        assert_eq!(
            h.run("EXPIRE k 1 GT LT"),
            "-ERR GT and LT options at the same time are not compatible\r\n"
        );
        assert_eq!(h.run("EXPIRE k 1 XX AB"), "-ERR Unsupported option AB\r\n");
        assert_eq!(
            h.run("EXPIRE k 9223372036854776"),
            "-ERR invalid expire time in 'expire' command\r\n"
        );
        assert_eq!(
            h.run("PEXPIRE k 9223372036854770000"),
            "-ERR invalid expire time in 'pexpire' command\r\n"
        );
        assert_eq!(h.run("PEXPIREAT k 9223372036854770000"), ":1\r\n");
        h.events();
        assert_eq!(h.run("EXPIRE k -1"), ":1\r\n");
        assert_eq!(h.events(), vec![(0, "k".into(), "del")]);
        assert_eq!(h.run("TTL k"), ":-2\r\n");
        assert_eq!(h.run("EXPIRE k 10"), ":0\r\n");
    }

    #[test]
    fn object_does_not_touch_and_reports_redis_errors() {
        let mut h = Harness::new();
        h.set("n", "123");
        h.set("s", "hello");
        assert_eq!(h.run("OBJECT ENCODING n"), "$3\r\nint\r\n");
        assert_eq!(h.run("OBJECT ENCODING s"), "$6\r\nembstr\r\n");
        assert_eq!(h.run("OBJECT ENCODING missing"), "$-1\r\n");
        assert_eq!(h.run("OBJECT REFCOUNT n"), ":2147483647\r\n");
        assert_eq!(h.run("OBJECT REFCOUNT s"), ":1\r\n");
        // A limit with an LRU/LFU policy: integers are not shared.
        h.state.settings.memory.maxmemory = 1 << 30;
        h.state.settings.memory.policy = crate::evict::Policy::VolatileLru;
        assert_eq!(h.run("OBJECT REFCOUNT n"), ":1\r\n");
        h.state.settings.memory.policy = crate::evict::Policy::AllKeysRandom;
        assert_eq!(h.run("OBJECT REFCOUNT n"), ":2147483647\r\n");
        h.state.settings.memory.maxmemory = 0;
        h.now += 5_000;
        assert_eq!(h.run("OBJECT IDLETIME s"), ":5\r\n");
        // OBJECT itself did not reset the access time; GET does.
        assert_eq!(h.run("OBJECT IDLETIME s"), ":5\r\n");
        h.run("GET s");
        assert_eq!(h.run("OBJECT IDLETIME s"), ":0\r\n");
        assert!(h.run("OBJECT FREQ s").starts_with("-ERR An LFU maxmemory policy is not selected"));
        h.state.settings.lfu = true;
        assert!(h.run("OBJECT IDLETIME s").starts_with("-ERR An LFU maxmemory policy is selected"));
        assert!(h.run("OBJECT FREQ s").starts_with(':'));
        assert!(h.run("OBJECT HELP").starts_with("*15\r\n+OBJECT <subcommand>"));
        assert!(h.events().is_empty());
    }

    #[test]
    fn copy_and_move_between_databases() {
        let mut h = Harness::new();
        h.set("k", "v");
        h.run("EXPIRE k 100");
        assert_eq!(h.run("COPY k k"), "-ERR source and destination objects are the same\r\n");
        assert_eq!(h.run("COPY k k DB 99"), "-ERR DB index is out of range\r\n");
        assert_eq!(h.run("COPY k k DB x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run("COPY k k FOO"), "-ERR syntax error\r\n");
        h.events();
        assert_eq!(h.run("COPY k k DB 1"), ":1\r\n");
        assert_eq!(h.events(), vec![(1, "k".into(), "copy_to")]);
        assert_eq!(h.run("COPY k k DB 1"), ":0\r\n");
        assert_eq!(h.run("COPY k k DB 1 REPLACE"), ":1\r\n");
        assert_eq!(h.events(), vec![(1, "k".into(), "copy_to")]);
        assert_eq!(h.run("MOVE k 0"), "-ERR source and destination objects are the same\r\n");
        assert_eq!(h.run("MOVE k 1"), ":0\r\n");
        assert_eq!(
            h.run("MOVE k 4294967296"),
            "-ERR value is out of range, value must between -2147483648 and 2147483647\r\n"
        );
        assert_eq!(h.run("MOVE k 2"), ":1\r\n");
        assert_eq!(
            h.events().iter().map(|e| (e.0, e.2)).collect::<Vec<_>>(),
            vec![(0, "move_from"), (2, "move_to")]
        );
        h.db = 2;
        assert_eq!(h.run("TTL k"), ":100\r\n");
        h.db = 1;
        assert_eq!(h.run("TTL k"), ":100\r\n");
    }

    #[test]
    fn persist_type_touch() {
        let mut h = Harness::new();
        h.set("k", "v");
        assert_eq!(h.run("PERSIST k"), ":0\r\n");
        h.run("EXPIRE k 10");
        h.events();
        assert_eq!(h.run("PERSIST k"), ":1\r\n");
        assert_eq!(h.events(), vec![(0, "k".into(), "persist")]);
        assert_eq!(h.run("TTL k"), ":-1\r\n");
        assert_eq!(h.run("TYPE k"), "+string\r\n");
        assert_eq!(h.run("TYPE nope"), "+none\r\n");
        assert_eq!(h.run("TOUCH k nope k"), ":2\r\n");
    }

    #[test]
    fn touch_updates_access_even_for_no_touch_clients() {
        let mut h = Harness::new();
        h.set("k", "v");
        h.no_touch = true;
        h.now += 3_000;
        h.run("GET k");
        assert_eq!(h.run("OBJECT IDLETIME k"), ":3\r\n");
        assert_eq!(h.run("TOUCH k"), ":1\r\n");
        assert_eq!(h.run("OBJECT IDLETIME k"), ":0\r\n");
    }

    #[test]
    fn node_rows_name_their_node_commands() {
        for (name, cmd) in [
            ("keys", NodeCommand::Keys),
            ("scan", NodeCommand::Scan),
            ("randomkey", NodeCommand::RandomKey),
            ("dbsize", NodeCommand::DbSize),
            ("flushdb", NodeCommand::FlushDb),
            ("flushall", NodeCommand::FlushAll),
            ("swapdb", NodeCommand::SwapDb),
        ] {
            let reg = table().get(name.as_bytes()).expect(name);
            assert!(matches!(reg.spec.exec, Exec::Node(c) if c == cmd), "{name}");
        }
    }

    fn shard_with(keys: &[(&str, Option<u64>)]) -> Shard {
        let mut shard = Shard::new(ShardId(0), SlotMap::new(1), ShardSettings::default(), 3);
        for (k, expire) in keys {
            let e = Entry::new(k.as_bytes(), Value::Str(StrValue::from_bytes(b"v")))
                .with_expire(*expire);
            shard.keyspace.db_mut(0).insert(e);
        }
        shard
    }

    #[test]
    fn keys_random_flush_swap_ops() {
        let mut shard = shard_with(&[("a1", None), ("a2", None), ("b1", None), ("gone", Some(5))]);
        let mut keys = op_keys(&shard, 0, b"a*", 10);
        keys.sort();
        assert_eq!(keys, vec![Bytes::from_static(b"a1"), Bytes::from_static(b"a2")]);
        assert_eq!(op_keys(&shard, 0, b"*", 10).len(), 3);
        let mut seen = std::collections::HashSet::new();
        for _ in 0..200 {
            seen.insert(op_random_key(&mut shard, 0, 10).expect("a key"));
        }
        assert_eq!(seen.len(), 3);
        assert!(shard.keyspace.db(0).get(b"gone").is_none(), "reclaimed on the way");
        op_swap_db(&mut shard, 0, 3);
        assert_eq!(shard.keyspace.db(0).len(), 0);
        assert_eq!(shard.keyspace.db(3).len(), 3);
        op_flush(&mut shard, Some(3), false);
        assert_eq!(shard.key_count(), 0);
        assert_eq!(op_random_key(&mut shard, 0, 10), None);
    }

    #[test]
    fn random_key_survives_a_database_of_expired_keys() {
        let keys: Vec<(String, Option<u64>)> =
            (0..1000).map(|i| (format!("k{i}"), Some(5))).collect();
        let refs: Vec<(&str, Option<u64>)> = keys.iter().map(|(k, e)| (k.as_str(), *e)).collect();
        let mut shard = shard_with(&refs);
        shard
            .keyspace
            .db_mut(0)
            .insert(Entry::new(b"live", Value::Str(StrValue::from_bytes(b"v"))));
        assert_eq!(op_random_key(&mut shard, 0, 10), Some(Bytes::from_static(b"live")));
        assert_eq!(shard.keyspace.db(0).len(), 1);
    }

    #[test]
    fn flush_mode_parsing() {
        let a = |s: &str| {
            s.split(' ').map(|x| Bytes::copy_from_slice(x.as_bytes())).collect::<Vec<_>>()
        };
        assert_eq!(parse_flush_mode(&a("FLUSHDB"), false), Ok(false));
        assert_eq!(parse_flush_mode(&a("FLUSHDB"), true), Ok(true));
        assert_eq!(parse_flush_mode(&a("FLUSHDB async"), false), Ok(true));
        assert_eq!(parse_flush_mode(&a("FLUSHALL SYNC"), true), Ok(false));
        assert_eq!(parse_flush_mode(&a("FLUSHALL SYNC x"), false), Err(SYNTAX));
        assert_eq!(parse_flush_mode(&a("FLUSHALL now"), false), Err(SYNTAX));
    }
}
