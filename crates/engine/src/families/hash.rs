//! Hashes: HSET, HSETNX, HMSET, HGET, HMGET, HGETALL, HDEL, HLEN, HSTRLEN,
//! HEXISTS, HKEYS, HVALS, HINCRBY, HINCRBYFLOAT, HRANDFIELD, HSCAN.
//!
//! Semantics, reply shapes and error texts follow Redis 7.0's `t_hash.c`
//! (and `scanGenericCommand` in `db.c` for HSCAN). The data structure, with
//! its `listpack` and `hashtable` encodings, the conversions between them,
//! random picks and the HSCAN cursor, is [`ringdb_types::hash::Hash`]; this
//! module reads arguments, looks keys up, fires the write funnel and replies.

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, NOT_FLOAT, OVERFLOW, SYNTAX, WRONG_TYPE};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::{typed, Value};
use crate::scan::parse_cursor;
use bytes::Bytes;
use ringdb_protocol::ReplyWriter;
use ringdb_types::glob::glob_match;
use ringdb_types::hash::Hash;
use ringdb_types::number::{format_human_f64, parse_f64, parse_i64};
use ringdb_types::pack::Item;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("hset", -4, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(hset))
        .keys(&[KeySpec::one(1, kf::RW | kf::UPDATE)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Creates or modifies the value of a field in a hash.", "O(1) for each field/value pair added, so O(N) to add N field/value pairs when the command is called with multiple field/value pairs.", "key field value [field value ...]")
        .history(&[("4.0.0", "Accepts multiple `field` and `value` arguments.")]),
    CommandSpec::new("hsetnx", 4, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(hsetnx))
        .keys(&[KeySpec::one(1, kf::RW | kf::INSERT)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Sets the value of a field in a hash only when the field doesn't exist.", "O(1)", "key field value"),
    CommandSpec::new("hmset", -4, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(hmset))
        .keys(&[KeySpec::one(1, kf::RW | kf::UPDATE)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Sets the values of multiple fields.", "O(N) where N is the number of fields being set.", "key field value [field value ...]")
        .deprecated("4.0.0", "`HSET` with multiple field-value pairs"),
    CommandSpec::new("hget", 3, READONLY | FAST | WATCHABLE, Exec::Shard(hget))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Returns the value of a field in a hash.", "O(1)", "key field"),
    CommandSpec::new("hmget", -3, READONLY | FAST, Exec::Shard(hmget))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Returns the values of all fields in a hash.", "O(N) where N is the number of fields being requested.", "key field [field ...]"),
    CommandSpec::new("hgetall", 2, READONLY | WATCHABLE, Exec::Shard(hgetall))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::HASH)
        .tips(&["nondeterministic_output_order"])
        .doc("hash", "2.0.0", "Returns all fields and values in a hash.", "O(N) where N is the size of the hash.", "key"),
    CommandSpec::new("hdel", -3, WRITE | FAST | AS_IS, Exec::Shard(hdel))
        .keys(&[KeySpec::one(1, kf::RW | kf::DELETE)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Deletes one or more fields and their values from a hash. Deletes the hash if no fields remain.", "O(N) where N is the number of fields to be removed.", "key field [field ...]")
        .history(&[("2.4.0", "Accepts multiple `field` arguments.")]),
    CommandSpec::new("hlen", 2, READONLY | FAST | WATCHABLE, Exec::Shard(hlen))
        .keys(&[KeySpec::one(1, kf::RO)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Returns the number of fields in a hash.", "O(1)", "key"),
    CommandSpec::new("hstrlen", 3, READONLY | FAST, Exec::Shard(hstrlen))
        .keys(&[KeySpec::one(1, kf::RO)])
        .acl(acl::HASH)
        .doc("hash", "3.2.0", "Returns the length of the value of a field.", "O(1)", "key field"),
    CommandSpec::new("hexists", 3, READONLY | FAST, Exec::Shard(hexists))
        .keys(&[KeySpec::one(1, kf::RO)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Determines whether a field exists in a hash.", "O(1)", "key field"),
    CommandSpec::new("hkeys", 2, READONLY, Exec::Shard(hkeys))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::HASH)
        .tips(&["nondeterministic_output_order"])
        .doc("hash", "2.0.0", "Returns all fields in a hash.", "O(N) where N is the size of the hash.", "key"),
    CommandSpec::new("hvals", 2, READONLY, Exec::Shard(hvals))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::HASH)
        .tips(&["nondeterministic_output_order"])
        .doc("hash", "2.0.0", "Returns all values in a hash.", "O(N) where N is the size of the hash.", "key"),
    CommandSpec::new("hincrby", 4, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(hincrby))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::HASH)
        .doc("hash", "2.0.0", "Increments the integer value of a field in a hash by a number. Uses 0 as initial value if the field doesn't exist.", "O(1)", "key field increment"),
    CommandSpec::new("hincrbyfloat", 4, WRITE | DENYOOM | FAST, Exec::Shard(hincrbyfloat))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::HASH)
        .doc("hash", "2.6.0", "Increments the floating point value of a field by a number. Uses 0 as initial value if the field doesn't exist.", "O(1)", "key field increment:double"),
    CommandSpec::new("hrandfield", -2, READONLY, Exec::Shard(hrandfield))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::HASH)
        .tips(&["nondeterministic_output"])
        .doc("hash", "6.2.0", "Returns one or more random fields from a hash.", "O(N) where N is the number of fields returned", "key [count [WITHVALUES]]"),
    CommandSpec::new("hscan", -3, READONLY, Exec::Shard(hscan))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::HASH)
        .tips(&["nondeterministic_output"])
        .doc("hash", "2.8.0", "Iterates over fields and values of a hash.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", "key cursor [MATCH pattern] [COUNT count]"),
];

const NOT_INTEGER_VALUE: CmdError = CmdError::new("ERR hash value is not an integer");
const NOT_FLOAT_VALUE: CmdError = CmdError::new("ERR hash value is not a float");
const NAN_OR_INFINITY: CmdError = CmdError::new("ERR increment would produce NaN or Infinity");

/// Redis streams any number of repeated picks (its default client output
/// buffer has no limit); ringdb builds a reply in memory, so a reply that
/// would grow past `proto-max-bulk-len` is refused instead.
const REPLY_TOO_LARGE: CmdError = CmdError::new("ERR HRANDFIELD reply exceeds proto-max-bulk-len");

/// Redis's `MAX_LONG_DOUBLE_CHARS`: `string2ld` refuses longer strings.
const MAX_LONG_DOUBLE_CHARS: usize = 5 * 1024;

/// Redis's `HRANDFIELD_RANDOM_SAMPLE_LIMIT`: picks with repeats are drawn in
/// batches of this many, so a large negative count never holds more than
/// one batch of picks in memory.
const RANDOM_SAMPLE_LIMIT: usize = 1000;

/// The hash at `key` for reading (Redis's `lookupKeyRead` + `checkType`):
/// `Ok(None)` when missing, WRONGTYPE when the key holds another type.
pub fn read_hash<'a>(ks: &'a mut KeyspaceView, key: &[u8]) -> Result<Option<&'a Hash>, CmdError> {
    match ks.read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Hash(h) => Ok(Some(h)),
            _ => Err(WRONG_TYPE),
        },
    }
}

/// The hash at `key` for writing (`lookupKeyWrite` + `checkType`).
pub fn write_hash<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Option<Updater<'v, Hash>>, CmdError> {
    ks.write_as(key, typed)
}

/// The hash at `key`, created empty when missing (Redis's
/// `hashTypeLookupWriteOrCreate`). Callers add a field right away, so no
/// empty hash is ever left in the keyspace.
fn hash_or_create<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Updater<'v, Hash>, CmdError> {
    ks.write_or_create(key, || Value::Hash(Hash::new()))
}

/// A field or value as a bulk string (integers in a listpack are formatted).
fn reply_item(out: &mut ReplyWriter, item: Item<'_>) {
    match item {
        Item::Int(n) => out.bulk_int(n),
        other => {
            let mut tmp = [0u8; 24];
            out.bulk(other.bytes(&mut tmp));
        }
    }
}

/// HSET and HMSET: sets every pair, returning how many fields were new.
fn set_pairs(ctx: &mut Ctx, args: &[Bytes], command: &str) -> Result<usize, CmdError> {
    if args.len() % 2 == 1 {
        return Err(CmdError::wrong_args(command));
    }
    let key = &args[1];
    let pairs: Vec<(&[u8], &[u8])> = args[2..].chunks(2).map(|p| (&p[0][..], &p[1][..])).collect();
    let limits = ctx.ks.state.settings.limits;
    let mut hash = hash_or_create(&mut ctx.ks, key)?;
    Ok(hash.update(NotifyClass::Hash, "hset").set_many(&pairs, &limits))
}

fn hset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let created = set_pairs(ctx, args, "hset")?;
    ctx.out.int(created as i64);
    Ok(())
}

fn hmset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    set_pairs(ctx, args, "hmset")?;
    ctx.out.ok();
    Ok(())
}

/// As in Redis 7.0, an existing field leaves the hash untouched (no
/// conversion for a long value either).
fn hsetnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, field, value) = (&args[1], &args[2], &args[3]);
    let limits = ctx.ks.state.settings.limits;
    let mut hash = hash_or_create(&mut ctx.ks, key)?;
    if hash.contains(field) {
        drop(hash);
        ctx.out.int(0);
        return Ok(());
    }
    let hash = hash.update(NotifyClass::Hash, "hset");
    hash.prepare_for(&[field, value], &limits);
    hash.set(field, value, &limits);
    ctx.out.int(1);
    Ok(())
}

fn hget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    match read_hash(&mut ctx.ks, &args[1])?.and_then(|h| h.get(&args[2])) {
        Some(v) => reply_item(&mut ctx.out, v),
        None => ctx.out.null(),
    }
    Ok(())
}

/// A missing key is an empty hash: one null per field.
fn hmget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let hash = read_hash(&mut ctx.ks, &args[1])?;
    ctx.out.array(args.len() - 2);
    for field in &args[2..] {
        match hash.and_then(|h| h.get(field)) {
            Some(v) => reply_item(&mut ctx.out, v),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

/// What HGETALL, HKEYS and HVALS return of each pair.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Parts {
    Fields,
    Values,
    Both,
}

/// Redis's `genericHgetallCommand`: HGETALL is a map (in RESP3), HKEYS and
/// HVALS flat arrays.
fn hgetall_generic(ctx: &mut Ctx, key: &[u8], parts: Parts) -> CmdResult {
    let hash = read_hash(&mut ctx.ks, key)?;
    let len = hash.map_or(0, Hash::len);
    if parts == Parts::Both {
        ctx.out.map(len);
    } else {
        ctx.out.array(len);
    }
    for (field, value) in hash.into_iter().flat_map(Hash::iter) {
        if parts != Parts::Values {
            reply_item(&mut ctx.out, field);
        }
        if parts != Parts::Fields {
            reply_item(&mut ctx.out, value);
        }
    }
    Ok(())
}

fn hgetall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    hgetall_generic(ctx, &args[1], Parts::Both)
}

fn hkeys(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    hgetall_generic(ctx, &args[1], Parts::Fields)
}

fn hvals(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    hgetall_generic(ctx, &args[1], Parts::Values)
}

/// Deletes the hash when its last field goes, firing `hdel` then `del`.
fn hdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let Some(mut updater) = write_hash(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let hash = updater.update(NotifyClass::Hash, "hdel");
    let mut deleted = 0;
    for field in &args[2..] {
        if hash.remove(field) {
            deleted += 1;
            if hash.is_empty() {
                break;
            }
        }
    }
    let emptied = hash.is_empty();
    if deleted == 0 {
        updater.unchanged();
    }
    drop(updater);
    if deleted > 0 && emptied {
        ctx.ks.delete(key);
    }
    ctx.out.int(deleted);
    Ok(())
}

fn hlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = read_hash(&mut ctx.ks, &args[1])?.map_or(0, Hash::len);
    ctx.out.int(len as i64);
    Ok(())
}

fn hstrlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = read_hash(&mut ctx.ks, &args[1])?.map_or(0, |h| h.value_len(&args[2]));
    ctx.out.int(len as i64);
    Ok(())
}

fn hexists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = read_hash(&mut ctx.ks, &args[1])?.is_some_and(|h| h.contains(&args[2]));
    ctx.out.int(found as i64);
    Ok(())
}

/// Sets `field` of the hash at `key` (creating it) to `value` and fires the
/// funnel with `event`: the common tail of HINCRBY and HINCRBYFLOAT.
fn store_field(
    ctx: &mut Ctx,
    key: &[u8],
    field: &[u8],
    value: &[u8],
    event: &'static str,
) -> CmdResult {
    let limits = ctx.ks.state.settings.limits;
    hash_or_create(&mut ctx.ks, key)?.update(NotifyClass::Hash, event).set(field, value, &limits);
    Ok(())
}

fn hincrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, field) = (&args[1], &args[2]);
    let by = args::int(&args[3])?;
    let hash = write_hash(&mut ctx.ks, key)?;
    let old = match hash.as_deref().and_then(|h| h.get(field)) {
        None => 0,
        Some(Item::Int(n)) => n,
        Some(item) => {
            let mut tmp = [0u8; 24];
            parse_i64(item.bytes(&mut tmp)).ok_or(NOT_INTEGER_VALUE)?
        }
    };
    drop(hash);
    let value = old.checked_add(by).ok_or(OVERFLOW)?;
    let mut tmp = [0u8; 24];
    store_field(ctx, key, field, ringdb_types::pack::format_i64(&mut tmp, value), "hincrby")?;
    ctx.out.int(value);
    Ok(())
}

/// A long double as Redis's `string2ld` reads it (here an `f64`): what
/// [`parse_f64`] accepts, within `MAX_LONG_DOUBLE_CHARS`.
fn parse_long_double(bytes: &[u8]) -> Option<f64> {
    if bytes.len() >= MAX_LONG_DOUBLE_CHARS {
        return None;
    }
    parse_f64(bytes)
}

/// Redis computes in `long double`; ringdb in `f64`, printed in the same
/// human form as INCRBYFLOAT (no exponent, at most 17 decimals, trailing
/// zeros removed).
fn hincrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, field) = (&args[1], &args[2]);
    let by = parse_long_double(&args[3]).ok_or(NOT_FLOAT)?;
    if !by.is_finite() {
        return Err(CmdError::new("ERR value is NaN or Infinity"));
    }
    let hash = write_hash(&mut ctx.ks, key)?;
    let old = match hash.as_deref().and_then(|h| h.get(field)) {
        None => 0.0,
        Some(Item::Int(n)) => n as f64,
        Some(item) => {
            let mut tmp = [0u8; 24];
            parse_long_double(item.bytes(&mut tmp)).ok_or(NOT_FLOAT_VALUE)?
        }
    };
    drop(hash);
    let value = old + by;
    if !value.is_finite() {
        return Err(NAN_OR_INFINITY);
    }
    let text = format_human_f64(value);
    store_field(ctx, key, field, text.as_bytes(), "hincrbyfloat")?;
    ctx.out.bulk(text.as_bytes());
    Ok(())
}

/// HRANDFIELD's count and WITHVALUES, with Redis's checks in Redis's order
/// (they come before the key is looked up).
fn parse_hrandfield(args: &[Bytes]) -> Result<Option<(i64, bool)>, CmdError> {
    let Some(count) = args.get(2) else { return Ok(None) };
    let count = args::int(count)?;
    if count == i64::MIN {
        return Err(CmdError::owned(format!(
            "ERR value is out of range, value must between {} and {}",
            -i64::MAX,
            i64::MAX
        )));
    }
    let with_values = match args.get(3) {
        None => false,
        Some(word) if args.len() == 4 && is(word, "WITHVALUES") => true,
        Some(_) => return Err(SYNTAX),
    };
    if with_values && !(-(i64::MAX / 2)..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::new("ERR value is out of range"));
    }
    Ok(Some((count, with_values)))
}

/// One field (and value) of an HRANDFIELD reply; in RESP3 a pair is an
/// array of two.
fn reply_pick(out: &mut ReplyWriter, field: Item<'_>, value: Item<'_>, with_values: bool) {
    if with_values && out.is_resp3() {
        out.array(2);
    }
    reply_item(out, field);
    if with_values {
        reply_item(out, value);
    }
}

fn hrandfield(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let parsed = parse_hrandfield(args)?;
    let Some(len) = read_hash(&mut ctx.ks, key)?.map(Hash::len) else {
        match parsed {
            Some(_) => ctx.out.array(0),
            None => ctx.out.null(),
        }
        return Ok(());
    };
    // Borrow the hash and the shard's generator side by side.
    let db = ctx.ks.db;
    let (keyspace, state) = ctx.ks.keyspace_and_state();
    let max_reply = state.settings.max_bulk_len;
    let Some(Value::Hash(hash)) = keyspace.db(db).get(key).map(|e| &e.value) else {
        return Err(WRONG_TYPE);
    };
    let mut rng = || state.random();
    let out = &mut ctx.out;
    let Some((count, with_values)) = parsed else {
        if let Some((field, _)) = hash.random(&mut rng) {
            reply_item(out, field);
        }
        return Ok(());
    };
    if count == 0 {
        out.array(0);
        return Ok(());
    }
    let pairs_header = |out: &mut ReplyWriter, n: usize| {
        out.array(if with_values && !out.is_resp3() { n * 2 } else { n });
    };
    if count < 0 || count == 1 {
        // Independent picks in random order (Redis's CASE 1).
        let picks = count.unsigned_abs() as usize;
        let start = out.buf.len();
        pairs_header(out, picks);
        let mut left = picks;
        while left > 0 {
            let batch = left.min(RANDOM_SAMPLE_LIMIT);
            left -= batch;
            for (field, value) in hash.random_with_repeats(batch, &mut rng) {
                reply_pick(out, field, value, with_values);
                if (out.buf.len() - start) as u64 > max_reply {
                    out.buf.truncate(start);
                    return Err(REPLY_TOO_LARGE);
                }
            }
        }
        return Ok(());
    }
    let count = count as usize;
    pairs_header(out, count.min(len));
    if count >= len {
        // The whole hash (CASE 2).
        for (field, value) in hash.iter() {
            reply_pick(out, field, value, with_values);
        }
    } else {
        // Distinct picks (CASES 3 and 4): `random_distinct` samples the whole
        // hash when the count is close to its size, draws when it is small.
        for (field, value) in hash.random_distinct(count, &mut rng) {
            reply_pick(out, field, value, with_values);
        }
    }
    Ok(())
}

/// The options of HSCAN (and of the other collection scans): `[MATCH
/// pattern] [COUNT count]`, read as Redis's `scanGenericCommand` reads them.
pub struct CollectionScanOptions<'a> {
    /// `None` also for `*`, which matches everything.
    pub pattern: Option<&'a [u8]>,
    pub count: usize,
}

impl<'a> CollectionScanOptions<'a> {
    pub fn parse(options: &'a [Bytes]) -> Result<Self, CmdError> {
        let mut o = CollectionScanOptions { pattern: None, count: 10 };
        let mut i = 0;
        while i < options.len() {
            let Some(value) = options.get(i + 1) else { return Err(SYNTAX) };
            if is(&options[i], "COUNT") {
                let n = args::int(value)?;
                if n < 1 {
                    return Err(SYNTAX);
                }
                o.count = usize::try_from(n).unwrap_or(usize::MAX);
            } else if is(&options[i], "MATCH") {
                o.pattern = (value.as_ref() != b"*").then_some(&value[..]);
            } else {
                return Err(SYNTAX);
            }
            i += 2;
        }
        Ok(o)
    }

    /// Whether an element passes MATCH.
    pub fn admits(&self, element: &[u8]) -> bool {
        self.pattern.is_none_or(|p| glob_match(p, element, false))
    }
}

/// The reply of a scan that found nothing or a missing key: cursor 0 and an
/// empty array (never the client's cursor, on which clients would loop).
fn reply_empty_scan(out: &mut ReplyWriter) {
    out.array(2);
    out.bulk(b"0");
    out.array(0);
}

/// HSCAN key cursor [MATCH pattern] [COUNT count]. A listpack hash returns
/// everything with cursor 0; a hashtable returns the window of hash
/// positions [`Hash::scan`] chooses, which keeps SCAN's guarantee across
/// any growth or shrinking between calls. Options are read after the key
/// is looked up, as in Redis.
fn hscan(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let cursor = parse_cursor(&args[2]).ok_or(CmdError::new("ERR invalid cursor"))?;
    let Some(hash) = read_hash(&mut ctx.ks, &args[1])? else {
        reply_empty_scan(&mut ctx.out);
        return Ok(());
    };
    let options = CollectionScanOptions::parse(&args[3..])?;
    // The elements go to a side buffer: their number is known only at the end.
    let mut body = Vec::new();
    let mut elements = ReplyWriter::new(&mut body, ctx.out.resp);
    let mut found = 0;
    let next = hash.scan(cursor, options.count, |field, value| {
        let mut tmp = [0u8; 24];
        if options.admits(field.bytes(&mut tmp)) {
            reply_item(&mut elements, field);
            reply_item(&mut elements, value);
            found += 2;
        }
    });
    ctx.out.array(2);
    ctx.out.bulk(next.to_string().as_bytes());
    ctx.out.array(found);
    ctx.out.raw(&body);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::command::ClientInfo;
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardSettings, ShardState};
    use bytes::Bytes;
    use ringdb_protocol::Resp;

    /// A scratch shard to run command lines against.
    struct Shard {
        keyspace: Keyspace,
        state: ShardState,
        resp: Resp,
    }

    impl Shard {
        fn new() -> Self {
            Self::with(ShardSettings::default())
        }

        fn with(settings: ShardSettings) -> Self {
            Shard {
                keyspace: Keyspace::scratch(1),
                state: ShardState::recording(settings),
                resp: Resp::V2,
            }
        }

        fn run_args(&mut self, args: Vec<Bytes>) -> String {
            let out = test_call(
                &mut self.keyspace,
                &mut self.state,
                args,
                ClientInfo { resp: self.resp, ..ClientInfo::default() },
                1_000,
            );
            String::from_utf8_lossy(&out).into_owned()
        }

        fn run(&mut self, line: &str) -> String {
            self.run_args(line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect())
        }

        /// The (event, key) pairs fired since the last call.
        fn events(&mut self) -> Vec<(String, String)> {
            self.state
                .funnel
                .take_events()
                .into_iter()
                .map(|e| (e.event.to_string(), String::from_utf8_lossy(&e.key).into_owned()))
                .collect()
        }

        fn encoding(&mut self, key: &str) -> String {
            self.run(&format!("OBJECT ENCODING {key}"))
        }
    }

    fn events(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter().map(|(e, k)| (e.to_string(), k.to_string())).collect()
    }

    #[test]
    fn set_get_and_events() {
        let mut s = Shard::new();
        assert_eq!(s.run("HSET h a 1 b 2"), ":2\r\n");
        assert_eq!(s.run("HSET h a 3 c x"), ":1\r\n");
        assert_eq!(s.run("HMSET h d 4"), "+OK\r\n");
        assert_eq!(s.events(), events(&[("hset", "h"), ("hset", "h"), ("hset", "h")]));
        assert_eq!(s.run("HGET h a"), "$1\r\n3\r\n");
        assert_eq!(s.run("HGET h zz"), "$-1\r\n");
        assert_eq!(s.run("HGET nokey a"), "$-1\r\n");
        assert_eq!(s.run("HMGET h a zz c"), "*3\r\n$1\r\n3\r\n$-1\r\n$1\r\nx\r\n");
        assert_eq!(s.run("HMGET nokey a b"), "*2\r\n$-1\r\n$-1\r\n");
        assert_eq!(s.run("HLEN h"), ":4\r\n");
        assert_eq!(s.run("HSTRLEN h c"), ":1\r\n");
        assert_eq!(s.run("HEXISTS h c"), ":1\r\n");
        assert_eq!(s.run("HEXISTS h zz"), ":0\r\n");
        assert_eq!(s.run("HSETNX h a 9"), ":0\r\n");
        assert_eq!(s.run("HSETNX h e 9"), ":1\r\n");
        assert_eq!(s.events(), events(&[("hset", "h")]), "only the HSETNX that set fires");
        assert!(s.run("HSET h a 1 b").contains("wrong number of arguments for 'hset'"));
        assert!(s.run("HMSET h a 1 b").contains("wrong number of arguments for 'hmset'"));
        assert!(s.events().is_empty(), "reads and failed writes fire nothing");
    }

    #[test]
    fn getall_keys_vals_in_both_protocols() {
        let mut s = Shard::new();
        s.run("HSET h f1 v1 f2 2");
        assert_eq!(s.run("HGETALL h"), "*4\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$1\r\n2\r\n");
        assert_eq!(s.run("HKEYS h"), "*2\r\n$2\r\nf1\r\n$2\r\nf2\r\n");
        assert_eq!(s.run("HVALS h"), "*2\r\n$2\r\nv1\r\n$1\r\n2\r\n");
        assert_eq!(s.run("HGETALL nokey"), "*0\r\n");
        s.resp = Resp::V3;
        assert_eq!(s.run("HGETALL h"), "%2\r\n$2\r\nf1\r\n$2\r\nv1\r\n$2\r\nf2\r\n$1\r\n2\r\n");
        assert_eq!(s.run("HGETALL nokey"), "%0\r\n");
        assert_eq!(s.run("HKEYS nokey"), "*0\r\n");
    }

    #[test]
    fn hdel_deletes_the_emptied_hash() {
        let mut s = Shard::new();
        s.run("HSET h a 1 b 2 c 3");
        s.events();
        assert_eq!(s.run("HDEL h a zz"), ":1\r\n");
        assert_eq!(s.events(), events(&[("hdel", "h")]));
        assert_eq!(s.run("HDEL h zz"), ":0\r\n");
        assert!(s.events().is_empty());
        assert_eq!(s.run("HDEL h b c b"), ":2\r\n");
        assert_eq!(s.events(), events(&[("hdel", "h"), ("del", "h")]));
        assert_eq!(s.run("EXISTS h"), ":0\r\n");
        assert_eq!(s.run("HDEL h a"), ":0\r\n");
    }

    #[test]
    fn wrong_type_everywhere() {
        let mut s = Shard::new();
        s.run("SET s x");
        for line in [
            "HSET s a 1",
            "HSETNX s a 1",
            "HMSET s a 1",
            "HGET s a",
            "HMGET s a",
            "HGETALL s",
            "HKEYS s",
            "HVALS s",
            "HDEL s a",
            "HLEN s",
            "HSTRLEN s a",
            "HEXISTS s a",
            "HINCRBY s a 1",
            "HINCRBYFLOAT s a 1",
            "HRANDFIELD s",
            "HRANDFIELD s 2",
            "HSCAN s 0",
        ] {
            assert!(s.run(line).starts_with("-WRONGTYPE"), "{line}");
        }
        assert_eq!(s.run("GET s"), "$1\r\nx\r\n");
    }

    #[test]
    fn hincrby_and_errors() {
        let mut s = Shard::new();
        assert_eq!(s.run("HINCRBY h n 5"), ":5\r\n");
        assert_eq!(s.run("HINCRBY h n -7"), ":-2\r\n");
        assert_eq!(s.events(), events(&[("hincrby", "h"), ("hincrby", "h")]));
        s.run("HSET h big 9223372036854775807 s abc");
        assert_eq!(s.run("HINCRBY h big 1"), "-ERR increment or decrement would overflow\r\n");
        assert_eq!(s.run("HINCRBY h s 1"), "-ERR hash value is not an integer\r\n");
        let args =
            |line: &[&str]| line.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        s.run_args(args(&["HSET", "h", "sp", " 1"]));
        assert_eq!(s.run("HINCRBY h sp 1"), "-ERR hash value is not an integer\r\n");
        assert_eq!(s.run("HINCRBYFLOAT h sp 1"), "-ERR hash value is not a float\r\n");
        assert_eq!(s.run("HINCRBY h n x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(s.run("HGET h n"), "$2\r\n-2\r\n");
        // A value too long for the listpack converts before the write.
        let mut s = Shard::with(ShardSettings {
            limits: ringdb_types::limits::Limits {
                hash_max_listpack_value: 3,
                ..ShardSettings::default().limits
            },
            ..ShardSettings::default()
        });
        s.run("HINCRBY h n 999");
        assert_eq!(s.encoding("h"), "$8\r\nlistpack\r\n");
        s.run("HINCRBY h n 1");
        assert_eq!(s.encoding("h"), "$9\r\nhashtable\r\n");
        assert_eq!(s.run("HGET h n"), "$4\r\n1000\r\n");
    }

    #[test]
    fn hincrbyfloat_formats_and_errors() {
        let mut s = Shard::new();
        assert_eq!(s.run("HINCRBYFLOAT h f 10.5"), "$4\r\n10.5\r\n");
        assert_eq!(s.run("HINCRBYFLOAT h f 0.1"), "$4\r\n10.6\r\n");
        assert_eq!(s.run("HINCRBYFLOAT h f -10.6"), "$1\r\n0\r\n");
        assert_eq!(s.run("HINCRBYFLOAT h f 1e20"), "$21\r\n100000000000000000000\r\n");
        assert_eq!(s.run("HINCRBYFLOAT h g 5.0e3"), "$4\r\n5000\r\n");
        assert_eq!(s.events(), events(&[("hincrbyfloat", "h"); 5]));
        assert_eq!(s.run("HINCRBYFLOAT h f x"), "-ERR value is not a valid float\r\n");
        assert_eq!(s.run("HINCRBYFLOAT h f inf"), "-ERR value is NaN or Infinity\r\n");
        assert_eq!(s.run("HINCRBYFLOAT nokey f -inf"), "-ERR value is NaN or Infinity\r\n");
        assert_eq!(s.run("EXISTS nokey"), ":0\r\n");
        s.run("HSET h s abc big 1e308");
        assert_eq!(s.run("HINCRBYFLOAT h s 1"), "-ERR hash value is not a float\r\n");
        assert_eq!(
            s.run("HINCRBYFLOAT h big 1e308"),
            "-ERR increment would produce NaN or Infinity\r\n"
        );
        assert!(s.events().iter().all(|(e, _)| e == "hset"), "failures fire nothing");
    }

    #[test]
    fn encodings_convert_at_the_thresholds() {
        let mut s = Shard::with(ShardSettings {
            limits: ringdb_types::limits::Limits {
                hash_max_listpack_entries: 4,
                hash_max_listpack_value: 8,
                ..ShardSettings::default().limits
            },
            ..ShardSettings::default()
        });
        s.run("HSET h a 1 b 2 c 3 d 12345678");
        assert_eq!(s.encoding("h"), "$8\r\nlistpack\r\n");
        s.run("HSET h e 5");
        assert_eq!(s.encoding("h"), "$9\r\nhashtable\r\n");
        s.run("HSET v a 123456789");
        assert_eq!(s.encoding("v"), "$9\r\nhashtable\r\n");
        s.run("HSET k 123456789 a");
        assert_eq!(s.encoding("k"), "$9\r\nhashtable\r\n");
        // HSETNX on an existing field converts nothing (Redis 7.0).
        s.run("HSET n a 1");
        assert_eq!(s.run("HSETNX n a 123456789"), ":0\r\n");
        assert_eq!(s.encoding("n"), "$8\r\nlistpack\r\n");
        assert_eq!(s.run("HSETNX n b 123456789"), ":1\r\n");
        assert_eq!(s.encoding("n"), "$9\r\nhashtable\r\n");
        assert_eq!(s.run("HGET n b"), "$9\r\n123456789\r\n");
    }

    #[test]
    fn hrandfield_shapes_and_errors() {
        let mut s = Shard::new();
        assert_eq!(s.run("HRANDFIELD nokey"), "$-1\r\n");
        assert_eq!(s.run("HRANDFIELD nokey 5"), "*0\r\n");
        s.run("HSET h a 1 b 2 c 3");
        assert!(["$1\r\na\r\n", "$1\r\nb\r\n", "$1\r\nc\r\n"].contains(&&*s.run("HRANDFIELD h")));
        assert_eq!(s.run("HRANDFIELD h 0"), "*0\r\n");
        assert!(s.run("HRANDFIELD h 10").starts_with("*3\r\n"));
        assert!(s.run("HRANDFIELD h 10 WITHVALUES").starts_with("*6\r\n"));
        assert!(s.run("HRANDFIELD h 2").starts_with("*2\r\n"));
        assert!(s.run("HRANDFIELD h -7").starts_with("*7\r\n"));
        assert!(s.run("HRANDFIELD h -7 withvalues").starts_with("*14\r\n"));
        assert_eq!(s.run("HRANDFIELD h 1 WITHVALUE"), "-ERR syntax error\r\n");
        assert_eq!(s.run("HRANDFIELD h 1 WITHVALUES x"), "-ERR syntax error\r\n");
        assert_eq!(s.run("HRANDFIELD h x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(
            s.run("HRANDFIELD h -9223372036854775808"),
            "-ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807\r\n"
        );
        assert_eq!(
            s.run("HRANDFIELD h -9223372036854770000 WITHVALUES"),
            "-ERR value is out of range\r\n"
        );
        s.resp = Resp::V3;
        let reply = s.run("HRANDFIELD h -2 WITHVALUES");
        assert!(reply.starts_with("*2\r\n*2\r\n$1\r\n"), "{reply:?}");
        let reply = s.run("HRANDFIELD h 3 WITHVALUES");
        assert_eq!(reply.matches("*2\r\n").count(), 3, "{reply:?}");
        let reply = s.run("HRANDFIELD h 2");
        assert!(reply.starts_with("*2\r\n$1\r\n"), "{reply:?}");
        assert!(s.events().iter().all(|(e, _)| e == "hset"));
    }

    #[test]
    fn hrandfield_distinct_and_repeated_picks_in_both_encodings() {
        for big in [false, true] {
            let mut s = Shard::new();
            for i in 0..(if big { 600 } else { 50 }) {
                s.run(&format!("HSET h f{i} v{i}"));
            }
            assert_eq!(s.encoding("h").contains("hashtable"), big);
            for count in [1, 5, 20, 49] {
                let reply = s.run(&format!("HRANDFIELD h {count} WITHVALUES"));
                let lines: Vec<&str> = reply.split("\r\n").filter(|l| l.starts_with('f')).collect();
                let mut fields = lines.clone();
                fields.sort();
                fields.dedup();
                assert_eq!(fields.len(), count, "distinct picks: {reply:?}");
                for field in &lines {
                    assert!(reply.contains(&format!("{field}\r\n$")), "value follows {field}");
                }
            }
            let reply = s.run("HRANDFIELD h -3000");
            assert!(reply.starts_with("*3000\r\n"));
            assert_eq!(reply.matches("\r\nf").count(), 3000);
        }
    }

    #[test]
    fn hrandfield_reply_is_bounded() {
        let mut s = Shard::with(ShardSettings { max_bulk_len: 10_000, ..ShardSettings::default() });
        s.run("HSET h a 1");
        assert_eq!(
            s.run("HRANDFIELD h -100"),
            format!("*100{}", "\r\n$1\r\na".repeat(100)) + "\r\n"
        );
        assert_eq!(
            s.run("HRANDFIELD h -100000000000"),
            "-ERR HRANDFIELD reply exceeds proto-max-bulk-len\r\n"
        );
    }

    #[test]
    fn hscan_small_big_and_options() {
        let mut s = Shard::new();
        assert_eq!(s.run("HSCAN nokey 123"), "*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(s.run("HSCAN nokey 0 BADOPT"), "*2\r\n$1\r\n0\r\n*0\r\n");
        assert_eq!(s.run("HSCAN h x"), "-ERR invalid cursor\r\n");
        s.run("HSET h a 1 b 2 ab 3 10 x");
        assert_eq!(
            s.run("HSCAN h 77 COUNT 1"),
            "*2\r\n$1\r\n0\r\n*8\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$1\r\n2\r\n$2\r\nab\r\n$1\r\n3\r\n$2\r\n10\r\n$1\r\nx\r\n"
        );
        assert_eq!(
            s.run("HSCAN h 0 MATCH a*"),
            "*2\r\n$1\r\n0\r\n*4\r\n$1\r\na\r\n$1\r\n1\r\n$2\r\nab\r\n$1\r\n3\r\n"
        );
        assert_eq!(s.run("HSCAN h 0 MATCH 1*"), "*2\r\n$1\r\n0\r\n*2\r\n$2\r\n10\r\n$1\r\nx\r\n");
        assert_eq!(s.run("HSCAN h 0 COUNT 0"), "-ERR syntax error\r\n");
        assert_eq!(s.run("HSCAN h 0 COUNT x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(s.run("HSCAN h 0 MATCH"), "-ERR syntax error\r\n");
        assert_eq!(s.run("HSCAN h 0 TYPE string"), "-ERR syntax error\r\n");
        // A big hash: pages by cursor until 0, every field once or more.
        for i in 0..1000 {
            s.run(&format!("HSET big f{i} {i}"));
        }
        let mut seen = std::collections::HashSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let reply = s.run(&format!("HSCAN big {cursor} COUNT 20"));
            let lines: Vec<&str> = reply.split("\r\n").collect();
            cursor = lines[2].to_string();
            for pair in lines[4..].chunks(4) {
                if pair.len() == 4 {
                    assert_eq!(pair[1][1..], pair[3][..], "value follows its field");
                    seen.insert(pair[1].to_string());
                }
            }
            calls += 1;
            if cursor == "0" {
                break;
            }
        }
        assert!(calls > 10, "paged in {calls} calls");
        assert_eq!(seen.len(), 1000);
    }
}
