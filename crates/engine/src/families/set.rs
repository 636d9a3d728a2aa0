//! Sets: SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS, SRANDMEMBER,
//! SPOP, SMOVE, SINTER, SINTERCARD, SUNION, SDIFF, SINTERSTORE, SUNIONSTORE,
//! SDIFFSTORE, SSCAN.
//!
//! Semantics, replies, error texts, keyspace events and the encodings of new
//! and stored sets follow Redis 7.0's `t_set.c` (with listpack sets disabled,
//! ringdb's default, the set type behaves as 7.0's intset/hashtable pair).
//! The data structure and its algebra live in `ringdb_types::set`; this
//! module is the commands around it.
//!
//! Multi-key commands are plain single-keyspace handlers: when their keys
//! live on several shards the router runs them on a gathered copy.

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX, WRONG_TYPE};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::{typed, Value};
use crate::scan::parse_cursor;
use crate::shard::ShardState;
use bytes::Bytes;
use ringdb_protocol::ReplyWriter;
use ringdb_types::glob::glob_match;
use ringdb_types::limits::Limits;
use ringdb_types::pack::Item;
use ringdb_types::set::Set;

const ONE_KEY_RO: &[KeySpec] = &[KeySpec::one(1, kf::RO)];
const ONE_KEY_RO_ACCESS: &[KeySpec] = &[KeySpec::one(1, kf::RO | kf::ACCESS)];
const ALL_KEYS_RO_ACCESS: &[KeySpec] = &[KeySpec::range(1, -1, 1, kf::RO | kf::ACCESS)];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("sadd", -3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(sadd))
        .keys(&[KeySpec::one(1, kf::RW | kf::INSERT)])
        .acl(acl::SET)
        .history(&[("2.4.0", "Accepts multiple `member` arguments.")])
        .doc("set", "1.0.0", "Adds one or more members to a set. Creates the key if it doesn't exist.", "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.", "key member [member ...]"),
    CommandSpec::new("srem", -3, WRITE | FAST | AS_IS, Exec::Shard(srem))
        .keys(&[KeySpec::one(1, kf::RW | kf::DELETE)])
        .acl(acl::SET)
        .history(&[("2.4.0", "Accepts multiple `member` arguments.")])
        .doc("set", "1.0.0", "Removes one or more members from a set. Deletes the set if the last member was removed.", "O(N) where N is the number of members to be removed.", "key member [member ...]"),
    CommandSpec::new("scard", 2, READONLY | FAST | WATCHABLE, Exec::Shard(scard))
        .keys(ONE_KEY_RO)
        .acl(acl::SET)
        .doc("set", "1.0.0", "Returns the number of members in a set.", "O(1)", "key"),
    CommandSpec::new("sismember", 3, READONLY | FAST | WATCHABLE, Exec::Shard(sismember))
        .keys(ONE_KEY_RO)
        .acl(acl::SET)
        .doc("set", "1.0.0", "Determines whether a member belongs to a set.", "O(1)", "key member"),
    CommandSpec::new("smismember", -3, READONLY | FAST, Exec::Shard(smismember))
        .keys(ONE_KEY_RO_ACCESS)
        .acl(acl::SET)
        .doc("set", "6.2.0", "Determines whether multiple members belong to a set.", "O(N) where N is the number of elements being checked for membership", "key member [member ...]"),
    CommandSpec::new("smembers", 2, READONLY | WATCHABLE, Exec::Shard(smembers))
        .keys(ONE_KEY_RO_ACCESS)
        .acl(acl::SET)
        .tips(&["nondeterministic_output_order"])
        .doc("set", "1.0.0", "Returns all members of a set.", "O(N) where N is the set cardinality.", "key"),
    CommandSpec::new("srandmember", -2, READONLY, Exec::Shard(srandmember))
        .keys(ONE_KEY_RO_ACCESS)
        .acl(acl::SET)
        .tips(&["nondeterministic_output"])
        .history(&[("2.6.0", "Added the optional `count` argument.")])
        .doc("set", "1.0.0", "Get one or multiple random members from a set", "Without the count argument O(1), otherwise O(N) where N is the absolute value of the passed count.", "key [count]"),
    CommandSpec::new("spop", -2, WRITE | FAST, Exec::Shard(spop))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::DELETE)])
        .acl(acl::SET)
        .tips(&["nondeterministic_output"])
        .history(&[("3.2.0", "Added the `count` argument.")])
        .doc("set", "1.0.0", "Returns one or more random members from a set after removing them. Deletes the set if the last member was popped.", "Without the count argument O(1), otherwise O(N) where N is the value of the passed count.", "key [count]"),
    CommandSpec::new("smove", 4, WRITE | FAST, Exec::Shard(smove))
        .keys(&[
            KeySpec::one(1, kf::RW | kf::ACCESS | kf::DELETE),
            KeySpec::one(2, kf::RW | kf::INSERT),
        ])
        .acl(acl::SET)
        .doc("set", "1.0.0", "Moves a member from one set to another.", "O(1)", "source destination member"),
    CommandSpec::new("sinter", -2, READONLY, Exec::Shard(sinter))
        .keys(ALL_KEYS_RO_ACCESS)
        .acl(acl::SET)
        .tips(&["nondeterministic_output_order"])
        .doc("set", "1.0.0", "Returns the intersect of multiple sets.", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", "key [key ...]"),
    CommandSpec::new("sintercard", -3, READONLY, Exec::Shard(sintercard))
        .keys(&[KeySpec::keynum(1, kf::RO | kf::ACCESS)])
        .acl(acl::SET)
        .doc("set", "7.0.0", "Returns the number of members of the intersect of multiple sets.", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", "numkeys key [key ...] [LIMIT limit:integer]"),
    CommandSpec::new("sunion", -2, READONLY, Exec::Shard(sunion))
        .keys(ALL_KEYS_RO_ACCESS)
        .acl(acl::SET)
        .tips(&["nondeterministic_output_order"])
        .doc("set", "1.0.0", "Returns the union of multiple sets.", "O(N) where N is the total number of elements in all given sets.", "key [key ...]"),
    CommandSpec::new("sdiff", -2, READONLY, Exec::Shard(sdiff))
        .keys(ALL_KEYS_RO_ACCESS)
        .acl(acl::SET)
        .tips(&["nondeterministic_output_order"])
        .doc("set", "1.0.0", "Returns the difference of multiple sets.", "O(N) where N is the total number of elements in all given sets.", "key [key ...]"),
    CommandSpec::new("sinterstore", -3, WRITE | DENYOOM, Exec::Shard(sinterstore))
        .keys(&[
            KeySpec::one(1, kf::RW | kf::UPDATE),
            KeySpec::range(2, -1, 1, kf::RO | kf::ACCESS),
        ])
        .acl(acl::SET)
        .doc("set", "1.0.0", "Stores the intersect of multiple sets in a key.", "O(N*M) worst case where N is the cardinality of the smallest set and M is the number of sets.", "destination key [key ...]"),
    CommandSpec::new("sunionstore", -3, WRITE | DENYOOM, Exec::Shard(sunionstore))
        .keys(&[
            KeySpec::one(1, kf::OW | kf::UPDATE),
            KeySpec::range(2, -1, 1, kf::RO | kf::ACCESS),
        ])
        .acl(acl::SET)
        .doc("set", "1.0.0", "Stores the union of multiple sets in a key.", "O(N) where N is the total number of elements in all given sets.", "destination key [key ...]"),
    CommandSpec::new("sdiffstore", -3, WRITE | DENYOOM, Exec::Shard(sdiffstore))
        .keys(&[
            KeySpec::one(1, kf::OW | kf::UPDATE),
            KeySpec::range(2, -1, 1, kf::RO | kf::ACCESS),
        ])
        .acl(acl::SET)
        .doc("set", "1.0.0", "Stores the difference of multiple sets in a key.", "O(N) where N is the total number of elements in all given sets.", "destination key [key ...]"),
    CommandSpec::new("sscan", -3, READONLY, Exec::Shard(sscan))
        .keys(ONE_KEY_RO_ACCESS)
        .acl(acl::SET)
        .tips(&["nondeterministic_output"])
        .doc("set", "2.8.0", "Iterates over members of a set.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", "key cursor [MATCH pattern] [COUNT count]"),
];

/// SRANDMEMBER's reply with a negative count has no natural bound (Redis
/// relies on the client output buffer limit); ringdb refuses a reply that
/// grows past `proto-max-bulk-len` instead of building it.
const REPLY_TOO_LARGE: CmdError =
    CmdError::new("ERR reply exceeds maximum allowed size (proto-max-bulk-len)");

/// Random picks written between two checks of the reply's size.
const PICK_BATCH: usize = 1000;

/// The set at `key` for reading (Redis's `lookupKeyRead` + `checkType`).
fn read_set<'a>(ks: &'a mut KeyspaceView, key: &[u8]) -> Result<Option<&'a Set>, CmdError> {
    match ks.read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Set(s) => Ok(Some(s)),
            _ => Err(WRONG_TYPE),
        },
    }
}

/// The set at `key` for writing (`lookupKeyWrite` + `checkType`).
fn write_set<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Option<Updater<'v, Set>>, CmdError> {
    ks.write_as(key, typed)
}

/// The set at `key` for reading together with the shard state (for its
/// random numbers), borrowed apart; `Ok(None)` when missing, WRONGTYPE when
/// the key holds another type.
fn read_set_and_state<'a>(
    ks: &'a mut KeyspaceView,
    key: &[u8],
) -> Result<Option<(&'a Set, &'a mut ShardState)>, CmdError> {
    if read_set(ks, key)?.is_none() {
        return Ok(None);
    }
    // The lookup above did expiry, statistics and the type check; this one
    // only splits the borrow of the keyspace from the shard state.
    let db = ks.db;
    let (keyspace, state) = ks.keyspace_and_state();
    Ok(match keyspace.db(db).get(key).map(|e| &e.value) {
        Some(Value::Set(s)) => Some((s, state)),
        _ => None,
    })
}

/// Redis's `setTypeCreate`: the encoding a new set gets from its first
/// member (an intset for an integer).
fn new_set(first: &[u8], limits: &Limits) -> Set {
    Set::new_for(first, 1, limits)
}

fn reply_item(out: &mut ReplyWriter, item: Item<'_>) {
    match item {
        Item::Int(n) => out.bulk_int(n),
        other => {
            let mut tmp = [0u8; 24];
            out.bulk(other.bytes(&mut tmp));
        }
    }
}

/// Every member of `set` as a RESP3 set (an array in RESP2).
fn reply_members(out: &mut ReplyWriter, set: &Set) {
    out.set(set.len());
    for m in set.iter() {
        reply_item(out, m);
    }
}

fn sadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, members) = (&args[1], &args[2..]);
    let limits = ctx.ks.state.settings.limits;
    let Some(mut updater) = write_set(&mut ctx.ks, key)? else {
        let mut set = new_set(&members[0], &limits);
        let added = members.iter().filter(|m| set.add(m, &limits)).count();
        ctx.ks.set(key, Value::Set(set), false, NotifyClass::Set, "sadd");
        ctx.out.int(added as i64);
        return Ok(());
    };
    let set = updater.update(NotifyClass::Set, "sadd");
    let added = members.iter().filter(|m| set.add(m, &limits)).count();
    if added == 0 {
        updater.unchanged();
    }
    drop(updater);
    ctx.out.int(added as i64);
    Ok(())
}

fn srem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let Some(mut updater) = write_set(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let set = updater.update(NotifyClass::Set, "srem");
    let mut removed = 0;
    for member in &args[2..] {
        if set.remove(member) {
            removed += 1;
            if set.is_empty() {
                break;
            }
        }
    }
    let emptied = set.is_empty();
    if removed == 0 {
        updater.unchanged();
    }
    drop(updater);
    if removed > 0 && emptied {
        ctx.ks.delete(key);
    }
    ctx.out.int(removed);
    Ok(())
}

fn scard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = read_set(&mut ctx.ks, &args[1])?.map_or(0, |s| s.len());
    ctx.out.int(len as i64);
    Ok(())
}

fn sismember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = read_set(&mut ctx.ks, &args[1])?.is_some_and(|s| s.contains(&args[2]));
    ctx.out.int(found as i64);
    Ok(())
}

/// A missing key is an empty set: a zero for every member.
fn smismember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let set = read_set(&mut ctx.ks, &args[1])?;
    let members = &args[2..];
    ctx.out.array(members.len());
    for m in members {
        ctx.out.int(set.as_ref().is_some_and(|s| s.contains(m)) as i64);
    }
    Ok(())
}

/// Redis 7.0 runs SMEMBERS as a one-key SINTER: a set reply, empty for a
/// missing key.
fn smembers(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match read_set(&mut ctx.ks, &args[1])? {
        Some(set) => reply_members(&mut ctx.out, set),
        None => ctx.out.set(0),
    }
    Ok(())
}

/// SRANDMEMBER key [count].
fn srandmember(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args.len() {
        2 => {}
        3 => return srandmember_count(ctx, args),
        _ => return Err(SYNTAX),
    }
    let Some((set, state)) = read_set_and_state(&mut ctx.ks, &args[1])? else {
        ctx.out.null();
        return Ok(());
    };
    match set.random(&mut || state.random()) {
        Some(m) => reply_item(&mut ctx.out, m),
        None => ctx.out.null(),
    }
    Ok(())
}

/// SRANDMEMBER key count (Redis's `srandmemberWithCountCommand`): a
/// negative count allows repeats and keeps the random order; a positive one
/// returns distinct members, the whole set when it asks for as many.
fn srandmember_count(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let count = args::int(&args[2])?;
    if count == i64::MIN {
        return Err(CmdError::new(
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807",
        ));
    }
    let unique = count >= 0;
    let count = count.unsigned_abs() as usize;
    let limit = ctx.ks.state.settings.max_bulk_len;
    let Some((set, state)) = read_set_and_state(&mut ctx.ks, key)? else {
        ctx.out.array(0);
        return Ok(());
    };
    if count == 0 {
        ctx.out.array(0);
        return Ok(());
    }
    let size = set.len();
    let mut rng = || state.random();
    let out = &mut ctx.out;
    if !unique || count == 1 {
        // Every element costs at least `$0\r\n\r\n`: a count that cannot fit
        // is refused before any work.
        if (count as u64).saturating_mul(6) > limit {
            return Err(REPLY_TOO_LARGE);
        }
        let start = out.buf.len();
        out.array(count);
        let mut left = count;
        while left > 0 {
            let batch = left.min(PICK_BATCH);
            for m in set.random_with_repeats(batch, &mut rng) {
                reply_item(out, m);
            }
            left -= batch;
            if (out.buf.len() - start) as u64 > limit {
                return Err(REPLY_TOO_LARGE);
            }
        }
    } else if count >= size {
        // An array, not a set reply: SRANDMEMBER always answers arrays.
        out.array(size);
        for m in set.iter() {
            reply_item(out, m);
        }
    } else {
        let picks = set.random_distinct(count, &mut rng);
        out.array(picks.len());
        for m in picks {
            reply_item(out, m);
        }
    }
    Ok(())
}

/// SPOP key [count].
fn spop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match args.len() {
        2 => {}
        3 => return spop_count(ctx, args),
        _ => return Err(SYNTAX),
    }
    let key = &args[1];
    let mut random = ctx.ks.state.generator();
    let Some(mut updater) = write_set(&mut ctx.ks, key)? else {
        ctx.out.null();
        return Ok(());
    };
    let set = updater.update(NotifyClass::Set, "spop");
    let popped = set.pop_random(&mut random);
    let emptied = set.is_empty();
    drop(updater);
    match popped {
        Some(m) => ctx.out.bulk(&m),
        None => ctx.out.null(),
    }
    if emptied {
        ctx.ks.delete(key);
    }
    Ok(())
}

/// SPOP key count (Redis's `spopWithCountCommand`): the whole set when the
/// count reaches its size (the key is deleted); otherwise random pops, or,
/// when most members go, the survivors picked into a new set. The reply is
/// a set; a missing key or a zero count gives an empty one.
fn spop_count(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let count = args::int_or(&args[2], MUST_BE_POSITIVE)?;
    if count < 0 {
        return Err(MUST_BE_POSITIVE);
    }
    let limits = ctx.ks.state.settings.limits;
    let mut random = ctx.ks.state.generator();
    let found = write_set(&mut ctx.ks, key)?;
    let Some(mut updater) = found.filter(|_| count > 0) else {
        ctx.out.set(0);
        return Ok(());
    };
    let set = updater.update(NotifyClass::Set, "spop");
    let popped = set.pop_many(count as usize, &mut random, &limits);
    let emptied = set.is_empty();
    drop(updater);
    ctx.out.set(popped.len());
    for m in &popped {
        ctx.out.bulk(m);
    }
    if emptied {
        ctx.ks.delete(key);
    }
    Ok(())
}

const MUST_BE_POSITIVE: CmdError = CmdError::new("ERR value is out of range, must be positive");

/// SMOVE source destination member. A missing source answers 0 before any
/// type check, as in Redis; the same key on both sides only checks
/// membership.
fn smove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (src, dst, member) = (&args[1], &args[2], &args[3]);
    let src_is_set = ctx.ks.write(src).map(|e| matches!(e.value, Value::Set(_)));
    let dst_is_set = ctx.ks.write(dst).map(|e| matches!(e.value, Value::Set(_)));
    let Some(src_is_set) = src_is_set else {
        ctx.out.int(0);
        return Ok(());
    };
    if !src_is_set || dst_is_set == Some(false) {
        return Err(WRONG_TYPE);
    }
    if src == dst {
        let found = write_set(&mut ctx.ks, src)?.is_some_and(|s| s.contains(member));
        ctx.out.int(found as i64);
        return Ok(());
    }
    let Some(mut source) = write_set(&mut ctx.ks, src)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let set = source.update(NotifyClass::Set, "srem");
    if !set.remove(member) {
        source.unchanged();
        drop(source);
        ctx.out.int(0);
        return Ok(());
    }
    let emptied = set.is_empty();
    drop(source);
    if emptied {
        ctx.ks.delete(src);
    }
    let limits = ctx.ks.state.settings.limits;
    ctx.out.int(1);
    let Some(mut destination) = write_set(&mut ctx.ks, dst)? else {
        let mut set = new_set(member, &limits);
        set.add(member, &limits);
        ctx.ks.set(dst, Value::Set(set), false, NotifyClass::Set, "sadd");
        return Ok(());
    };
    if !destination.update(NotifyClass::Set, "sadd").add(member, &limits) {
        destination.unchanged();
    }
    Ok(())
}

/// Looks every key up for reading, in order (counting hits and misses and
/// expiring keys as due), failing with WRONGTYPE at the first key that holds
/// something else, as the lookup loop of Redis's set algebra does.
fn look_up_sets(ks: &mut KeyspaceView, keys: &[Bytes]) -> CmdResult {
    for key in keys {
        read_set(ks, key)?;
    }
    Ok(())
}

/// The sets at `keys` after [`look_up_sets`], `None` for missing keys. A
/// key named twice gives the same reference (the algebra relies on it).
fn sets_at<'a>(ks: &'a KeyspaceView, keys: &[Bytes]) -> Vec<Option<&'a Set>> {
    keys.iter()
        .map(|k| match ks.peek(k).map(|e| &e.value) {
            Some(Value::Set(s)) => Some(s),
            _ => None,
        })
        .collect()
}

/// Stores `result` at `dst` (replacing whatever was there and its TTL), or
/// deletes `dst` when the result is empty; replies with the result's size.
fn store(ctx: &mut Ctx, dst: &[u8], result: Set, event: &'static str) {
    let len = result.len();
    if len > 0 {
        ctx.ks.set(dst, Value::Set(result), false, NotifyClass::Set, event);
    } else {
        ctx.ks.delete(dst);
    }
    ctx.out.int(len as i64);
}

fn sinter(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let keys = &args[1..];
    look_up_sets(&mut ctx.ks, keys)?;
    let sets = sets_at(&ctx.ks, keys);
    let mut members = Vec::new();
    Set::for_each_in_intersection(&sets, |m| {
        members.push(m);
        true
    });
    ctx.out.set(members.len());
    for m in members {
        reply_item(&mut ctx.out, m);
    }
    Ok(())
}

/// SINTERCARD numkeys key [key ...] [LIMIT limit]; a limit of 0 means none.
fn sintercard(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let numkeys = args::int_or(&args[1], NUMKEYS)?;
    if numkeys < 1 {
        return Err(NUMKEYS);
    }
    if numkeys > (args.len() - 2) as i64 {
        return Err(CmdError::new("ERR Number of keys can't be greater than number of args"));
    }
    let keys = &args[2..2 + numkeys as usize];
    let mut limit = 0u64;
    let mut i = 2 + numkeys as usize;
    while i < args.len() {
        match args.get(i + 1) {
            Some(value) if is(&args[i], "LIMIT") => {
                let n = args::int_or(value, LIMIT_NEGATIVE)?;
                limit = u64::try_from(n).map_err(|_| LIMIT_NEGATIVE)?;
                i += 2;
            }
            _ => return Err(SYNTAX),
        }
    }
    look_up_sets(&mut ctx.ks, keys)?;
    let sets = sets_at(&ctx.ks, keys);
    let mut cardinality = 0u64;
    Set::for_each_in_intersection(&sets, |_| {
        cardinality += 1;
        limit == 0 || cardinality < limit
    });
    ctx.out.int(cardinality as i64);
    Ok(())
}

const NUMKEYS: CmdError = CmdError::new("ERR numkeys should be greater than 0");
const LIMIT_NEGATIVE: CmdError = CmdError::new("ERR LIMIT can't be negative");

/// The three set operations.
#[derive(Clone, Copy)]
enum Algebra {
    Inter,
    Union,
    Diff,
}

impl Algebra {
    /// The result over the sets at `keys`, built (and so encoded) as Redis
    /// builds it.
    fn compute(self, ks: &mut KeyspaceView, keys: &[Bytes]) -> Result<Set, CmdError> {
        look_up_sets(ks, keys)?;
        let limits = ks.state.settings.limits;
        let sets = sets_at(ks, keys);
        Ok(match self {
            Algebra::Inter => Set::intersection(&sets, &limits),
            Algebra::Union => Set::union(&sets, &limits),
            Algebra::Diff => Set::difference(&sets, &limits),
        })
    }

    fn store_event(self) -> &'static str {
        match self {
            Algebra::Inter => "sinterstore",
            Algebra::Union => "sunionstore",
            Algebra::Diff => "sdiffstore",
        }
    }
}

fn sunion(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let result = Algebra::Union.compute(&mut ctx.ks, &args[1..])?;
    reply_members(&mut ctx.out, &result);
    Ok(())
}

fn sdiff(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let result = Algebra::Diff.compute(&mut ctx.ks, &args[1..])?;
    reply_members(&mut ctx.out, &result);
    Ok(())
}

/// SINTERSTORE, SUNIONSTORE, SDIFFSTORE destination key [key ...]. The
/// destination is overwritten whatever its type (no WRONGTYPE for it).
fn store_algebra(ctx: &mut Ctx, args: &[Bytes], op: Algebra) -> CmdResult {
    let result = op.compute(&mut ctx.ks, &args[2..])?;
    store(ctx, &args[1], result, op.store_event());
    Ok(())
}

fn sinterstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store_algebra(ctx, args, Algebra::Inter)
}

fn sunionstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store_algebra(ctx, args, Algebra::Union)
}

fn sdiffstore(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    store_algebra(ctx, args, Algebra::Diff)
}

/// SSCAN's options after the cursor (Redis's `scanGenericCommand`, which
/// reads them only once the key was found).
struct SscanOptions<'a> {
    count: usize,
    pattern: Option<&'a [u8]>,
}

fn parse_sscan_options(args: &[Bytes]) -> Result<SscanOptions<'_>, CmdError> {
    let mut o = SscanOptions { count: 10, pattern: None };
    let mut i = 3;
    while i < args.len() {
        let Some(value) = args.get(i + 1) else { return Err(SYNTAX) };
        if is(&args[i], "COUNT") {
            let n = args::int(value)?;
            if n < 1 {
                return Err(SYNTAX);
            }
            o.count = usize::try_from(n).unwrap_or(usize::MAX);
        } else if is(&args[i], "MATCH") {
            // "*" alone matches everything: no filter at all.
            o.pattern = (value.as_ref() != b"*").then_some(value.as_ref());
        } else {
            return Err(SYNTAX);
        }
        i += 2;
    }
    Ok(o)
}

/// SSCAN key cursor [MATCH pattern] [COUNT count]. Intsets (and listpacks)
/// return everything at once with cursor 0; hashtables step through hash
/// space with the types crate's cursor, which survives any resize in
/// between. A missing key ends the iteration (cursor 0, no members).
fn sscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&args[2]).ok_or(CmdError::new("ERR invalid cursor"))?;
    let Some(set) = read_set(&mut ctx.ks, &args[1])? else {
        ctx.out.array(2);
        ctx.out.bulk(b"0");
        ctx.out.array(0);
        return Ok(());
    };
    let o = parse_sscan_options(args)?;
    let mut found = Vec::new();
    let next = set.scan(cursor, o.count, |m| found.push(m));
    if let Some(pattern) = o.pattern {
        found.retain(|m| {
            let mut tmp = [0u8; 24];
            glob_match(pattern, m.bytes(&mut tmp), false)
        });
    }
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found.len());
    for m in found {
        reply_item(&mut ctx.out, m);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::command::ClientInfo;
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardSettings, ShardState};
    use bytes::Bytes;
    use ringdb_protocol::Resp;

    /// A keyspace and a recording shard state to run commands against.
    struct Bench {
        ks: Keyspace,
        state: ShardState,
    }

    impl Bench {
        fn new() -> Self {
            Self::with(ShardSettings::default())
        }

        fn with(settings: ShardSettings) -> Self {
            Bench { ks: Keyspace::scratch(1), state: ShardState::recording(settings) }
        }

        fn run_in(&mut self, resp: Resp, line: &str) -> String {
            let args: Vec<Bytes> =
                line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
            let out = test_call(
                &mut self.ks,
                &mut self.state,
                args,
                ClientInfo { resp, ..ClientInfo::default() },
                1_000,
            );
            String::from_utf8_lossy(&out).into_owned()
        }

        fn run(&mut self, line: &str) -> String {
            self.run_in(Resp::V2, line)
        }

        /// `key:event` for every funnel event since the last call.
        fn events(&mut self) -> Vec<String> {
            self.state
                .funnel
                .take_events()
                .into_iter()
                .map(|e| format!("{}:{}", String::from_utf8_lossy(&e.key), e.event))
                .collect()
        }

        fn encoding(&mut self, key: &str) -> String {
            self.run(&format!("OBJECT ENCODING {key}"))
        }
    }

    #[test]
    fn sadd_and_srem_convert_fire_events_and_delete_empty_sets() {
        let mut b = Bench::new();
        assert_eq!(b.run("SADD s 3 1 2 1"), ":3\r\n");
        assert_eq!(b.encoding("s"), "$6\r\nintset\r\n");
        assert_eq!(b.run("SADD s 1"), ":0\r\n");
        assert_eq!(b.events(), ["s:sadd"], "no event when nothing was added");
        assert_eq!(b.run("SADD s x"), ":1\r\n");
        assert_eq!(b.encoding("s"), "$9\r\nhashtable\r\n");
        assert_eq!(b.run("SREM s nope"), ":0\r\n");
        assert_eq!(b.run("SREM s 1 2 3 x 9"), ":4\r\n");
        assert_eq!(b.events(), ["s:sadd", "s:srem", "s:del"]);
        assert_eq!(b.run("EXISTS s"), ":0\r\n");
        assert_eq!(b.run("SADD str x"), ":1\r\n");
        assert_eq!(b.encoding("str"), "$9\r\nhashtable\r\n", "Redis 7.0: no listpack sets");
        b.run("SET plain v");
        let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        for line in
            ["SADD plain x", "SREM plain x", "SCARD plain", "SPOP plain 0", "SMEMBERS plain"]
        {
            assert_eq!(b.run(line), wrongtype, "{line}");
        }
    }

    #[test]
    fn spop_count_replies_a_set_and_deletes_when_all_are_taken() {
        let mut b = Bench::new();
        b.run("SADD s 1 2 3 4 5");
        b.events();
        assert_eq!(b.run_in(Resp::V3, "SPOP s 0"), "~0\r\n");
        assert_eq!(b.run_in(Resp::V3, "SPOP missing 3"), "~0\r\n");
        assert!(b.events().is_empty(), "nothing popped, nothing fired");
        assert!(b.run_in(Resp::V3, "SPOP s 2").starts_with("~2\r\n"));
        assert_eq!(b.events(), ["s:spop"]);
        assert!(b.run("SPOP s 10").starts_with("*3\r\n"));
        assert_eq!(b.events(), ["s:spop", "s:del"]);
        assert_eq!(b.run("EXISTS s"), ":0\r\n");
        b.run("SADD s a");
        assert_eq!(b.run("SPOP s"), "$1\r\na\r\n");
        assert_eq!(b.run("SPOP s"), "$-1\r\n");
        assert_eq!(b.run("SPOP s 1 2"), "-ERR syntax error\r\n");
        for bad in ["-1", "x"] {
            assert_eq!(
                b.run(&format!("SPOP s {bad}")),
                "-ERR value is out of range, must be positive\r\n"
            );
        }
    }

    #[test]
    fn spop_case_three_rebuilds_survivors_as_redis_7_0() {
        let mut b = Bench::new();
        let members: Vec<String> = (0..600).map(|i| i.to_string()).collect();
        b.run(&format!("SADD s {}", members.join(" ")));
        assert_eq!(b.encoding("s"), "$9\r\nhashtable\r\n");
        assert!(b.run("SPOP s 595").starts_with("*595\r\n"));
        assert_eq!(b.run("SCARD s"), ":5\r\n");
        assert_eq!(b.encoding("s"), "$6\r\nintset\r\n");
    }

    #[test]
    fn srandmember_shapes_and_bounded_negative_counts() {
        let mut b = Bench::with(ShardSettings { max_bulk_len: 10_000, ..ShardSettings::default() });
        b.run("SADD s a b c");
        assert_eq!(b.run_in(Resp::V3, "SRANDMEMBER missing 5"), "*0\r\n");
        assert_eq!(b.run_in(Resp::V3, "SRANDMEMBER s 0"), "*0\r\n");
        assert_eq!(b.run_in(Resp::V3, "SRANDMEMBER missing"), "_\r\n");
        assert!(b.run_in(Resp::V3, "SRANDMEMBER s 5").starts_with("*3\r\n"));
        assert!(b.run_in(Resp::V3, "SRANDMEMBER s 2").starts_with("*2\r\n"));
        assert!(b.run_in(Resp::V3, "SRANDMEMBER s -5").starts_with("*5\r\n"));
        assert_eq!(
            b.run("SRANDMEMBER s -9223372036854775808"),
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
        );
        assert_eq!(
            b.run("SRANDMEMBER s -1000000000000"),
            "-ERR reply exceeds maximum allowed size (proto-max-bulk-len)\r\n"
        );
        assert_eq!(b.run("SRANDMEMBER s 1 2"), "-ERR syntax error\r\n");
        assert!(b.events().iter().all(|e| e.starts_with("s:sadd")), "reads fire nothing");
    }

    #[test]
    fn smove_events_follow_redis() {
        let mut b = Bench::new();
        b.run("SADD src a b");
        b.run("SADD dst a");
        b.events();
        assert_eq!(b.run("SMOVE src dst a"), ":1\r\n");
        assert_eq!(b.events(), ["src:srem"], "dst already had it: no sadd");
        assert_eq!(b.run("SMOVE src new b"), ":1\r\n");
        assert_eq!(b.events(), ["src:srem", "src:del", "new:sadd"]);
        assert_eq!(b.run("SMOVE src new b"), ":0\r\n");
        b.run("SET str v");
        b.events();
        assert_eq!(b.run("SMOVE missing str b"), ":0\r\n", "missing source first");
        assert!(b.run("SMOVE new str b").starts_with("-WRONGTYPE"));
        assert!(b.run("SMOVE str new b").starts_with("-WRONGTYPE"));
        assert_eq!(b.run("SMOVE new new b"), ":1\r\n");
        assert_eq!(b.run("SMOVE new new zz"), ":0\r\n");
        assert!(b.events().is_empty());
        b.run("SADD ints 1");
        assert_eq!(b.run("SMOVE ints fresh 1"), ":1\r\n");
        assert_eq!(b.encoding("fresh"), "$6\r\nintset\r\n");
    }

    #[test]
    fn stores_replace_the_destination_or_delete_it() {
        let mut b = Bench::new();
        b.run("SADD a 1 2 3");
        b.run("SADD b 2 3 4");
        b.run("SET dst old");
        b.run("EXPIRE dst 100");
        b.events();
        assert_eq!(b.run("SINTERSTORE dst a b"), ":2\r\n");
        assert_eq!(b.events(), ["dst:sinterstore"]);
        assert_eq!(b.run("TTL dst"), ":-1\r\n", "the TTL goes with the old value");
        assert_eq!(b.encoding("dst"), "$6\r\nintset\r\n");
        assert_eq!(b.run("SUNIONSTORE dst a b"), ":4\r\n");
        assert_eq!(b.run("SDIFFSTORE dst a b"), ":1\r\n");
        assert_eq!(b.events(), ["dst:sunionstore", "dst:sdiffstore"]);
        assert_eq!(b.run("SINTERSTORE dst a missing"), ":0\r\n");
        assert_eq!(b.events(), ["dst:del"]);
        assert_eq!(b.run("SDIFFSTORE dst a a"), ":0\r\n");
        assert!(b.events().is_empty(), "nothing to delete, nothing fired");
        assert_eq!(b.run_in(Resp::V3, "SINTER a missing"), "~0\r\n");
        assert_eq!(b.run_in(Resp::V3, "SUNION missing"), "~0\r\n");
        assert_eq!(b.run_in(Resp::V3, "SMEMBERS missing"), "~0\r\n");
        assert_eq!(b.run_in(Resp::V3, "SINTER a b"), "~2\r\n:2\r\n:3\r\n".replace(':', "$1\r\n"));
    }

    #[test]
    fn sintercard_arguments() {
        let mut b = Bench::new();
        b.run("SADD a 1 2 3");
        b.run("SADD b 1 2 3 4");
        assert_eq!(b.run("SINTERCARD 2 a b"), ":3\r\n");
        assert_eq!(b.run("SINTERCARD 2 a b LIMIT 2"), ":2\r\n");
        assert_eq!(b.run("SINTERCARD 2 a b limit 0"), ":3\r\n");
        assert_eq!(b.run("SINTERCARD 1 missing"), ":0\r\n");
        let numkeys = "-ERR numkeys should be greater than 0\r\n";
        assert_eq!(b.run("SINTERCARD 0 a"), numkeys);
        assert_eq!(b.run("SINTERCARD x a"), numkeys);
        assert_eq!(
            b.run("SINTERCARD 3 a b"),
            "-ERR Number of keys can't be greater than number of args\r\n"
        );
        assert_eq!(b.run("SINTERCARD 1 a b"), "-ERR syntax error\r\n");
        assert_eq!(b.run("SINTERCARD 1 a LIMIT"), "-ERR syntax error\r\n");
        assert_eq!(b.run("SINTERCARD 1 a LIMIT -1"), "-ERR LIMIT can't be negative\r\n");
        assert_eq!(b.run("SINTERCARD 1 a LIMIT x"), "-ERR LIMIT can't be negative\r\n");
    }

    #[test]
    fn sscan_small_missing_and_options() {
        let mut b = Bench::new();
        b.run("SADD s 1 2 3 10");
        assert_eq!(b.run("SSCAN missing 123 COUNT 0"), "*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(b.run("SSCAN s 77 MATCH 1*"), "*2\r\n$1\r\n0\r\n*2\r\n$1\r\n1\r\n$2\r\n10\r\n");
        assert_eq!(b.run("SSCAN s x"), "-ERR invalid cursor\r\n");
        assert_eq!(b.run("SSCAN s 0 COUNT 0"), "-ERR syntax error\r\n");
        assert_eq!(b.run("SSCAN s 0 TYPE set"), "-ERR syntax error\r\n");
        assert_eq!(b.run("SSCAN s 0 MATCH"), "-ERR syntax error\r\n");
        assert_eq!(b.run("SSCAN s 0 COUNT x"), "-ERR value is not an integer or out of range\r\n");
    }
}
