//! Strings and counters: GET, SET and its variants, MGET/MSET/MSETNX, APPEND,
//! STRLEN, INCR/DECR/INCRBY/DECRBY/INCRBYFLOAT, GETRANGE/SUBSTR, SETRANGE,
//! LCS. Semantics and error texts follow Redis's `t_string.c`.

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, NOT_FLOAT, NOT_INTEGER, SYNTAX, WRONG_TYPE};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec, Merge};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::{typed, StrValue, Value};
use bytes::Bytes;
use ringdb_types::number::{format_human_f64, parse_f64, parse_i64};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("get", 2, READONLY | FAST | WATCHABLE | READ_COPY, Exec::Shard(get))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Returns the string value of a key.", "O(1)", "key"),
    CommandSpec::new("set", -3, WRITE | DENYOOM, Exec::Shard(set))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE | kf::VARIABLE_FLAGS)
            .notes("RW and ACCESS due to the optional `GET` argument")])
        .variable_key_flags(set_key_flags)
        .as_is_when(set_as_is)
        .acl(acl::STRING)
        .doc(
            "string",
            "1.0.0",
            "Sets the string value of a key, ignoring its type. The key is created if it doesn't exist.",
            "O(1)",
            "key value [NX | XX] [GET] [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | KEEPTTL]",
        )
        .history(&[
            ("2.6.12", "Added the `EX`, `PX`, `NX` and `XX` options."),
            ("6.0.0", "Added the `KEEPTTL` option."),
            ("6.2.0", "Added the `GET`, `EXAT` and `PXAT` option."),
            ("7.0.0", "Allowed the `NX` and `GET` options to be used together."),
        ]),
    CommandSpec::new("setnx", 3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(setnx))
        .keys(&[KeySpec::one(1, kf::OW | kf::INSERT)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Set the string value of a key only when the key doesn't exist.", "O(1)", "key value")
        .deprecated("2.6.12", "`SET` with the `NX` argument"),
    CommandSpec::new("setex", 4, WRITE | DENYOOM, Exec::Shard(setex))
        .keys(&[KeySpec::one(1, kf::OW | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "2.0.0", "Sets the string value and expiration time of a key. Creates the key if it doesn't exist.", "O(1)", "key seconds value")
        .deprecated("2.6.12", "`SET` with the `EX` argument"),
    CommandSpec::new("psetex", 4, WRITE | DENYOOM, Exec::Shard(psetex))
        .keys(&[KeySpec::one(1, kf::OW | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "2.6.0", "Sets both string value and expiration time in milliseconds of a key. The key is created if it doesn't exist.", "O(1)", "key milliseconds value")
        .deprecated("2.6.12", "`SET` with the `PX` argument"),
    CommandSpec::new("getset", 3, WRITE | DENYOOM | FAST, Exec::Shard(getset))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Returns the previous string value of a key after setting it to a new value.", "O(1)", "key value")
        .deprecated("6.2.0", "`SET` with the `!GET` argument"),
    CommandSpec::new("getex", -2, WRITE | FAST, Exec::Shard(getex))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)
            .notes("RW and UPDATE because it changes the TTL")])
        .acl(acl::STRING)
        .doc(
            "string",
            "6.2.0",
            "Returns the string value of a key after setting its expiration time.",
            "O(1)",
            "key [EX seconds | PX milliseconds | EXAT unix-time-seconds | PXAT unix-time-milliseconds | PERSIST]",
        ),
    CommandSpec::new("getdel", 2, WRITE | FAST | AS_IS, Exec::Shard(getdel))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::DELETE)])
        .acl(acl::STRING)
        .doc("string", "6.2.0", "Returns the string value of a key after deleting the key.", "O(1)", "key"),
    CommandSpec::new("mget", -2, READONLY | FAST | WATCHABLE, Exec::Split { handler: mget, merge: Merge::Array, atomic: true })
        .keys(&[KeySpec::range(1, -1, 1, kf::RO | kf::ACCESS)])
        .acl(acl::STRING)
        .tips(&["request_policy:multi_shard"])
        .doc("string", "1.0.0", "Atomically returns the string values of one or more keys.", "O(N) where N is the number of keys to retrieve.", "key [key ...]"),
    CommandSpec::new("mset", -3, WRITE | DENYOOM, Exec::Split { handler: mset, merge: Merge::Ok, atomic: true })
        .keys(&[KeySpec::range(1, -1, 2, kf::OW | kf::UPDATE)])
        .acl(acl::STRING)
        .tips(&["request_policy:multi_shard", "response_policy:all_succeeded"])
        .doc("string", "1.0.1", "Atomically creates or modifies the string values of one or more keys.", "O(N) where N is the number of keys to set.", "key value [key value ...]"),
    CommandSpec::new("msetnx", -3, WRITE | DENYOOM, Exec::Shard(msetnx))
        .keys(&[KeySpec::range(1, -1, 2, kf::OW | kf::INSERT)])
        .acl(acl::STRING)
        .tips(&["request_policy:multi_shard", "response_policy:agg_min"])
        .doc("string", "1.0.1", "Atomically modifies the string values of one or more keys only when all keys don't exist.", "O(N) where N is the number of keys to set.", "key value [key value ...]"),
    CommandSpec::new("append", 3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(append))
        .keys(&[KeySpec::one(1, kf::RW | kf::INSERT)])
        .acl(acl::STRING)
        .doc("string", "2.0.0", "Appends a string to the value of a key. Creates the key if it doesn't exist.", "O(1). The amortized time complexity is O(1) assuming the appended value is small and the already present value is of any size, since the dynamic string library used by Redis will double the free space available on every reallocation.", "key value"),
    CommandSpec::new("strlen", 2, READONLY | FAST | WATCHABLE, Exec::Shard(strlen))
        .keys(&[KeySpec::one(1, kf::RO)])
        .acl(acl::STRING)
        .doc("string", "2.2.0", "Returns the length of a string value.", "O(1)", "key"),
    CommandSpec::new("incr", 2, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(incr))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Increments the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "O(1)", "key"),
    CommandSpec::new("decr", 2, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(decr))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Decrements the integer value of a key by one. Uses 0 as initial value if the key doesn't exist.", "O(1)", "key"),
    CommandSpec::new("incrby", 3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(incrby))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Increments the integer value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "O(1)", "key increment"),
    CommandSpec::new("decrby", 3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(decrby))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Decrements a number from the integer value of a key. Uses 0 as initial value if the key doesn't exist.", "O(1)", "key decrement"),
    CommandSpec::new("incrbyfloat", 3, WRITE | DENYOOM | FAST, Exec::Shard(incrbyfloat))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "2.6.0", "Increment the floating point value of a key by a number. Uses 0 as initial value if the key doesn't exist.", "O(1)", "key increment:double"),
    CommandSpec::new("getrange", 4, READONLY, Exec::Shard(getrange))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::STRING)
        .doc("string", "2.4.0", "Returns a substring of the string stored at a key.", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.", "key start end"),
    CommandSpec::new("substr", 4, READONLY, Exec::Shard(getrange))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::STRING)
        .doc("string", "1.0.0", "Returns a substring from a string value.", "O(N) where N is the length of the returned string. The complexity is ultimately determined by the returned length, but because creating a substring from an existing string is very cheap, it can be considered O(1) for small strings.", "key start end")
        .deprecated("2.0.0", "`GETRANGE`"),
    CommandSpec::new("setrange", 4, WRITE | DENYOOM | AS_IS, Exec::Shard(setrange))
        .keys(&[KeySpec::one(1, kf::RW | kf::UPDATE)])
        .acl(acl::STRING)
        .doc("string", "2.2.0", "Overwrites a part of a string value with another by an offset. Creates the key if it doesn't exist.", "O(1), not counting the time taken to copy the new string in place. Usually, this string is very small so the amortized complexity is O(1). Otherwise, complexity is O(M) with M being the length of the value argument.", "key offset value"),
    CommandSpec::new("lcs", -3, READONLY, Exec::Shard(lcs))
        .keys(&[KeySpec::range(1, 1, 1, kf::RO | kf::ACCESS)])
        .acl(acl::STRING)
        .doc("string", "7.0.0", "Finds the longest common substring.", "O(N*M) where N and M are the lengths of s1 and s2, respectively", "key1 key2 [LEN] [IDX] [MINMATCHLEN min-match-len] [WITHMATCHLEN]"),
];

/// SET replicates as it ran unless EX or PX made its expiry count from
/// this server's clock (then its key's state goes, with an absolute time).
fn set_as_is(args: &[Bytes]) -> bool {
    !args.iter().skip(3).any(|a| is(a, "ex") || is(a, "px"))
}

/// SET's key flags for given arguments (Redis's `setGetKeys`): it reads the
/// old value only with GET.
fn set_key_flags(args: &[Bytes]) -> u32 {
    let options = args.get(3..).unwrap_or_default();
    if options.iter().any(|a| is(a, "GET")) {
        kf::RW | kf::ACCESS | kf::UPDATE
    } else {
        kf::OW | kf::UPDATE
    }
}

/// The string at `key` for reading: `Ok(None)` when missing, WRONGTYPE when
/// the key holds another type.
pub fn read_str<'a>(
    ks: &'a mut KeyspaceView,
    key: &[u8],
) -> Result<Option<&'a StrValue>, CmdError> {
    match ks.read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Str(s) => Ok(Some(s)),
            _ => Err(WRONG_TYPE),
        },
    }
}

/// The string at `key` for writing.
pub fn write_str<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Option<Updater<'v, StrValue>>, CmdError> {
    ks.write_as(key, typed)
}

/// A string value's reply; a long (shared) one goes out by reference.
fn reply_str(ctx_out: &mut ringdb_protocol::ReplyWriter, s: Option<&StrValue>) {
    match s {
        Some(StrValue::Shared(b)) => ctx_out.bulk_shared(b),
        Some(s) => {
            let mut tmp = [0u8; 20];
            ctx_out.bulk(s.as_bytes(&mut tmp));
        }
        None => ctx_out.null(),
    }
}

fn get(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let s = read_str(&mut ctx.ks, &args[1])?;
    reply_str(&mut ctx.out, s);
    Ok(())
}

/// The expiry options of SET and GETEX.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Expiry {
    #[default]
    None,
    Ex,
    Px,
    ExAt,
    PxAt,
    KeepTtl,
    Persist,
}

#[derive(Default)]
struct SetOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    expiry: Expiry,
    expire_arg: Option<&'a Bytes>,
}

/// Redis's `parseExtendedStringArgumentsOrReply`: the options after
/// `SET key value` (`for_set`) or `GETEX key`.
fn parse_set_options(args: &[Bytes], for_set: bool) -> Result<SetOptions<'_>, CmdError> {
    let mut o = SetOptions::default();
    let mut j = if for_set { 3 } else { 2 };
    while j < args.len() {
        let opt = &args[j];
        let next = args.get(j + 1);
        let no_expiry = o.expiry == Expiry::None;
        if for_set && is(opt, "NX") && !o.xx {
            o.nx = true;
        } else if for_set && is(opt, "XX") && !o.nx {
            o.xx = true;
        } else if for_set && is(opt, "GET") {
            o.get = true;
        } else if for_set && is(opt, "KEEPTTL") && (no_expiry || o.expiry == Expiry::KeepTtl) {
            o.expiry = Expiry::KeepTtl;
        } else if !for_set && is(opt, "PERSIST") && (no_expiry || o.expiry == Expiry::Persist) {
            o.expiry = Expiry::Persist;
        } else if let Some(kind) =
            [("EX", Expiry::Ex), ("PX", Expiry::Px), ("EXAT", Expiry::ExAt), ("PXAT", Expiry::PxAt)]
                .iter()
                .find(|(w, _)| is(opt, w))
                .map(|(_, k)| *k)
                .filter(|k| (no_expiry || o.expiry == *k) && next.is_some())
        {
            o.expiry = kind;
            o.expire_arg = next;
            j += 1;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    Ok(o)
}

/// Redis's `getExpireMillisecondsOrReply`: the absolute expiry in ms.
fn expire_at_ms(arg: &[u8], expiry: Expiry, now_ms: u64, command: &str) -> Result<u64, CmdError> {
    let invalid = || CmdError::owned(format!("ERR invalid expire time in '{command}' command"));
    let mut ms = args::int(arg)?;
    let seconds = matches!(expiry, Expiry::Ex | Expiry::ExAt);
    if ms <= 0 || (seconds && ms > i64::MAX / 1000) {
        return Err(invalid());
    }
    if seconds {
        ms *= 1000;
    }
    if matches!(expiry, Expiry::Ex | Expiry::Px) {
        ms = ms.checked_add(now_ms as i64).ok_or_else(invalid)?;
    }
    Ok(ms as u64)
}

/// Redis's `setGenericCommand`.
#[allow(clippy::too_many_arguments)]
fn set_generic(
    ctx: &mut Ctx,
    command: &str,
    key: &[u8],
    value: &[u8],
    opts: &SetOptions,
    ok_reply: Option<i64>,
    abort_reply: Option<i64>,
) -> CmdResult {
    let expire = match opts.expire_arg {
        Some(arg) => Some(expire_at_ms(arg, opts.expiry, ctx.ks.now_ms, command)?),
        None => None,
    };
    if opts.get {
        let old = read_str(&mut ctx.ks, key)?;
        reply_str(&mut ctx.out, old);
    }
    let found = ctx.ks.write(key).is_some();
    if (opts.nx && found) || (opts.xx && !found) {
        if !opts.get {
            match abort_reply {
                Some(n) => ctx.out.int(n),
                None => ctx.out.null(),
            }
        }
        return Ok(());
    }
    let value = Value::Str(StrValue::from_bytes(value));
    ctx.ks.set(key, value, opts.expiry == Expiry::KeepTtl, NotifyClass::String, "set");
    if let Some(at) = expire {
        ctx.ks.set_expire(key, Some(at), "expire");
    }
    if !opts.get {
        match ok_reply {
            Some(n) => ctx.out.int(n),
            None => ctx.out.ok(),
        }
    }
    Ok(())
}

fn set(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = parse_set_options(args, true)?;
    set_generic(ctx, "set", &args[1], &args[2], &opts, None, None)
}

fn setnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = SetOptions { nx: true, ..Default::default() };
    set_generic(ctx, "setnx", &args[1], &args[2], &opts, Some(1), Some(0))
}

fn setex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = SetOptions { expiry: Expiry::Ex, expire_arg: Some(&args[2]), ..Default::default() };
    set_generic(ctx, "setex", &args[1], &args[3], &opts, None, None)
}

fn psetex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = SetOptions { expiry: Expiry::Px, expire_arg: Some(&args[2]), ..Default::default() };
    set_generic(ctx, "psetex", &args[1], &args[3], &opts, None, None)
}

fn getset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let old = read_str(&mut ctx.ks, &args[1])?;
    reply_str(&mut ctx.out, old);
    let value = Value::Str(StrValue::from_bytes(&args[2]));
    ctx.ks.set(&args[1], value, false, NotifyClass::String, "set");
    Ok(())
}

fn getex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let opts = parse_set_options(args, false)?;
    let key = &args[1];
    let Some(s) = read_str(&mut ctx.ks, key)? else {
        ctx.out.null();
        return Ok(());
    };
    // Kept apart from the key, which may be deleted below.
    let value = match s.shared() {
        Some(shared) => shared.clone(),
        None => Bytes::copy_from_slice(s.as_bytes(&mut [0u8; 20])),
    };
    let expire = match opts.expire_arg {
        Some(arg) => Some(expire_at_ms(arg, opts.expiry, ctx.ks.now_ms, "getex")?),
        None => None,
    };
    ctx.out.bulk_shared(&value);
    match expire {
        Some(at) if matches!(opts.expiry, Expiry::ExAt | Expiry::PxAt) && at <= ctx.ks.now_ms => {
            ctx.ks.delete(key);
        }
        Some(at) => {
            ctx.ks.set_expire(key, Some(at), "expire");
        }
        None if opts.expiry == Expiry::Persist
            && ctx.ks.peek(key).and_then(|e| e.expire_at()).is_some() =>
        {
            ctx.ks.set_expire(key, None, "persist");
        }
        None => {}
    }
    Ok(())
}

fn getdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let old = read_str(&mut ctx.ks, key)?;
    let found = old.is_some();
    reply_str(&mut ctx.out, old);
    if found {
        ctx.ks.delete(key);
    }
    Ok(())
}

fn mget(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    ctx.out.array(args.len() - 1);
    for key in &args[1..] {
        // A key of another type is a null, not an error.
        match read_str(&mut ctx.ks, key) {
            Ok(s) => reply_str(&mut ctx.out, s),
            Err(_) => ctx.out.null(),
        }
    }
    Ok(())
}

fn mset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::wrong_args("mset"));
    }
    for pair in args[1..].chunks(2) {
        let value = Value::Str(StrValue::from_bytes(&pair[1]));
        ctx.ks.set(&pair[0], value, false, NotifyClass::String, "set");
    }
    ctx.out.ok();
    Ok(())
}

fn msetnx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::wrong_args("msetnx"));
    }
    if args[1..].chunks(2).any(|pair| ctx.ks.write(&pair[0]).is_some()) {
        ctx.out.int(0);
        return Ok(());
    }
    for pair in args[1..].chunks(2) {
        let value = Value::Str(StrValue::from_bytes(&pair[1]));
        ctx.ks.set(&pair[0], value, false, NotifyClass::String, "set");
    }
    ctx.out.int(1);
    Ok(())
}

/// Fails unless a string of `len` + `append` bytes is within
/// `proto-max-bulk-len` (Redis's `checkStringLength`).
pub fn check_string_length(ks: &KeyspaceView, len: u64, append: u64) -> CmdResult {
    match len.checked_add(append) {
        Some(total) if total <= ks.state.settings.max_bulk_len => Ok(()),
        _ => Err(crate::command::error::STRING_TOO_LONG),
    }
}

fn append(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, tail) = (&args[1], &args[2]);
    let current_len = write_str(&mut ctx.ks, key)?.map(|s| s.len());
    let new_len = match current_len {
        None => {
            let value = Value::Str(StrValue::from_bytes(tail));
            ctx.ks.set(key, value, false, NotifyClass::String, "append");
            tail.len()
        }
        Some(len) => {
            check_string_length(&ctx.ks, len as u64, tail.len() as u64)?;
            let Some(mut s) = write_str(&mut ctx.ks, key)? else { return Ok(()) };
            let raw = s.update(NotifyClass::String, "append").make_raw();
            raw.extend_from_slice(tail);
            raw.len()
        }
    };
    ctx.out.int(new_len as i64);
    Ok(())
}

fn strlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = read_str(&mut ctx.ks, &args[1])?.map_or(0, |s| s.len());
    ctx.out.int(len as i64);
    Ok(())
}

/// Redis's `incrDecrCommand`: the TTL is kept.
fn incr_by(ctx: &mut Ctx, key: &[u8], by: i64) -> CmdResult {
    let Some(mut s) = write_str(&mut ctx.ks, key)? else {
        ctx.ks.set(key, Value::Str(StrValue::Int(by)), false, NotifyClass::String, "incrby");
        ctx.out.int(by);
        return Ok(());
    };
    let old = match &*s {
        StrValue::Int(n) => *n,
        other => parse_i64(other.as_bytes(&mut [0u8; 20])).ok_or(NOT_INTEGER)?,
    };
    let value = old.checked_add(by).ok_or(crate::command::error::OVERFLOW)?;
    *s.update(NotifyClass::String, "incrby") = StrValue::Int(value);
    drop(s);
    ctx.out.int(value);
    Ok(())
}

fn incr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, &args[1], 1)
}

fn decr(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    incr_by(ctx, &args[1], -1)
}

fn incrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = args::int(&args[2])?;
    incr_by(ctx, &args[1], by)
}

fn decrby(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let by = args::int(&args[2])?;
    if by == i64::MIN {
        return Err(CmdError::new("ERR decrement would overflow"));
    }
    incr_by(ctx, &args[1], -by)
}

fn incrbyfloat(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let current = match write_str(&mut ctx.ks, key)? {
        None => 0.0,
        Some(s) => parse_f64(s.as_bytes(&mut [0u8; 20])).ok_or(NOT_FLOAT)?,
    };
    let by = parse_f64(&args[2]).ok_or(NOT_FLOAT)?;
    let value = current + by;
    if value.is_nan() || value.is_infinite() {
        return Err(CmdError::new("ERR increment would produce NaN or Infinity"));
    }
    let text = format_human_f64(value);
    let new = StrValue::from_bytes(text.as_bytes());
    ctx.ks.set(key, Value::Str(new), true, NotifyClass::String, "incrbyfloat");
    ctx.out.bulk(text.as_bytes());
    Ok(())
}

fn getrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut start = args::int(&args[2])?;
    let mut end = args::int(&args[3])?;
    let Some(s) = read_str(&mut ctx.ks, &args[1])? else {
        ctx.out.bulk(b"");
        return Ok(());
    };
    let mut tmp = [0u8; 20];
    let bytes = s.as_bytes(&mut tmp);
    let len = bytes.len() as i64;
    if start < 0 && end < 0 && start > end {
        ctx.out.bulk(b"");
        return Ok(());
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        ctx.out.bulk(b"");
    } else {
        ctx.out.bulk(&bytes[start as usize..=end as usize]);
    }
    Ok(())
}

fn setrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, value) = (&args[1], &args[3]);
    let offset = args::int(&args[2])?;
    if offset < 0 {
        return Err(CmdError::new("ERR offset is out of range"));
    }
    let offset = offset as u64;
    let existing = write_str(&mut ctx.ks, key)?.map(|s| s.len());
    match existing {
        None => {
            if value.is_empty() {
                ctx.out.int(0);
                return Ok(());
            }
            check_string_length(&ctx.ks, offset, value.len() as u64)?;
            let mut buf = vec![0u8; offset as usize + value.len()];
            buf[offset as usize..].copy_from_slice(value);
            let value = Value::Str(StrValue::Raw(Box::new(buf)));
            ctx.ks.set(key, value, false, NotifyClass::String, "setrange");
        }
        Some(len) => {
            if value.is_empty() {
                ctx.out.int(len as i64);
                return Ok(());
            }
            check_string_length(&ctx.ks, offset, value.len() as u64)?;
            let Some(mut s) = write_str(&mut ctx.ks, key)? else { return Ok(()) };
            let raw = s.update(NotifyClass::String, "setrange").make_raw();
            let end = offset as usize + value.len();
            if raw.len() < end {
                raw.resize(end, 0);
            }
            raw[offset as usize..end].copy_from_slice(value);
        }
    }
    let len = read_len(&ctx.ks, key);
    ctx.out.int(len as i64);
    Ok(())
}

fn read_len(ks: &KeyspaceView, key: &[u8]) -> usize {
    match ks.peek(key).map(|e| &e.value) {
        Some(Value::Str(s)) => s.len(),
        _ => 0,
    }
}

/// The options of LCS after the two keys.
#[derive(Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    with_match_len: bool,
    min_match_len: u64,
}

fn parse_lcs_options(args: &[Bytes]) -> Result<LcsOptions, CmdError> {
    let mut o = LcsOptions::default();
    let mut j = 3;
    while j < args.len() {
        let opt = &args[j];
        if is(opt, "IDX") {
            o.idx = true;
        } else if is(opt, "LEN") {
            o.len = true;
        } else if is(opt, "WITHMATCHLEN") {
            o.with_match_len = true;
        } else if is(opt, "MINMATCHLEN") && j + 1 < args.len() {
            // Negative means no minimum, as in Redis.
            o.min_match_len = args::int(&args[j + 1])?.max(0) as u64;
            j += 1;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    if o.len && o.idx {
        return Err(CmdError::new(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(o)
}

/// The bytes of the string at `key` for LCS (a missing key is ""), or
/// `None` when it holds another type.
fn lcs_input(ks: &mut KeyspaceView, key: &[u8]) -> Option<Vec<u8>> {
    match read_str(ks, key) {
        Ok(Some(s)) => {
            let mut tmp = [0u8; 20];
            Some(s.as_bytes(&mut tmp).to_vec())
        }
        Ok(None) => Some(Vec::new()),
        Err(_) => None,
    }
}

/// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN] (Redis's
/// `lcsCommand`). The table it needs is refused past `proto-max-bulk-len`.
fn lcs(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    use ringdb_types::lcs::{lcs as compute, LcsError, LcsQuery};
    let a = lcs_input(&mut ctx.ks, &args[1]);
    let b = lcs_input(&mut ctx.ks, &args[2]);
    let (Some(a), Some(b)) = (a, b) else {
        return Err(CmdError::new("ERR The specified keys must contain string values"));
    };
    let o = parse_lcs_options(args)?;
    let query =
        LcsQuery { string: !o.len && !o.idx, ranges: o.idx, min_match_len: o.min_match_len };
    let result =
        compute(&a, &b, query, ctx.ks.state.settings.max_bulk_len).map_err(|e| match e {
            LcsError::StringTooLong => CmdError::new("ERR String too long for LCS"),
            LcsError::TableTooLarge => CmdError::new(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            ),
            LcsError::OutOfMemory => {
                CmdError::new("ERR Insufficient memory, failed allocating transient memory for LCS")
            }
        })?;
    if o.idx {
        ctx.out.map(2);
        ctx.out.bulk(b"matches");
        ctx.out.array(result.ranges.len());
        for m in &result.ranges {
            ctx.out.array(2 + o.with_match_len as usize);
            for (start, end) in [m.a, m.b] {
                ctx.out.array(2);
                ctx.out.int(start as i64);
                ctx.out.int(end as i64);
            }
            if o.with_match_len {
                ctx.out.int(m.len as i64);
            }
        }
        ctx.out.bulk(b"len");
        ctx.out.int(result.len as i64);
    } else if o.len {
        ctx.out.int(result.len as i64);
    } else {
        ctx.out.bulk(&result.string);
    }
    Ok(())
}

#[cfg(test)]
mod lcs_tests {
    use crate::command::ClientInfo;
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardSettings, ShardState};
    use bytes::Bytes;
    use ringdb_protocol::Resp;

    fn run(keyspace: &mut Keyspace, state: &mut ShardState, resp: Resp, line: &str) -> String {
        let args: Vec<Bytes> =
            line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let out =
            test_call(keyspace, state, args, ClientInfo { resp, ..ClientInfo::default() }, 1_000);
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn lcs_idx_is_a_map_in_resp3_and_reads_fire_nothing() {
        let mut ks = Keyspace::scratch(1);
        let mut state = ShardState::recording(ShardSettings::default());
        run(&mut ks, &mut state, Resp::V2, "MSET a ohmytext b mynewtext");
        state.funnel.take_events();
        let reply = run(&mut ks, &mut state, Resp::V3, "LCS a b IDX MINMATCHLEN 4 WITHMATCHLEN");
        let expect = "%2\r\n$7\r\nmatches\r\n*1\r\n*3\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n:4\r\n$3\r\nlen\r\n:6\r\n";
        assert_eq!(reply, expect);
        let reply = run(&mut ks, &mut state, Resp::V2, "LCS a b IDX MINMATCHLEN 4");
        let expect = "*4\r\n$7\r\nmatches\r\n*1\r\n*2\r\n*2\r\n:4\r\n:7\r\n*2\r\n:5\r\n:8\r\n$3\r\nlen\r\n:6\r\n";
        assert_eq!(reply, expect);
        assert!(state.funnel.take_events().is_empty());
    }

    #[test]
    fn lcs_table_is_bounded_by_proto_max_bulk_len() {
        let mut ks = Keyspace::scratch(1);
        let mut state =
            ShardState::recording(ShardSettings { max_bulk_len: 80, ..ShardSettings::default() });
        run(&mut ks, &mut state, Resp::V2, "MSET a abc b abcd c abcde");
        assert_eq!(run(&mut ks, &mut state, Resp::V2, "LCS a b LEN"), ":3\r\n");
        assert_eq!(
            run(&mut ks, &mut state, Resp::V2, "LCS a c LEN"),
            "-ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len\r\n"
        );
    }
}

#[cfg(test)]
mod shared_value_tests {
    use crate::command::{table, ClientInfo};
    use crate::keyspace::{Keyspace, SHARED_MIN};
    use crate::shard::{call, Caller, Clock, ShardSettings, ShardState};
    use crate::ShardCommand;
    use bytes::Bytes;
    use ringdb_protocol::{Output, Resp};

    fn command(args: &[&[u8]]) -> ShardCommand {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let reg = table().resolve(&args).expect("known command");
        let client = ClientInfo { resp: Resp::V2, ..ClientInfo::default() };
        ShardCommand { id: reg.id, spec: reg.spec, args, client }
    }

    fn run(ks: &mut Keyspace, state: &mut ShardState, args: &[&[u8]]) -> Vec<u8> {
        let mut out = Vec::new();
        call(ks, state, &command(args), &mut out, &mut Clock::at(1_000), Caller::Client);
        out
    }

    /// A reply into a splicing output, flattened.
    fn run_spliced(ks: &mut Keyspace, state: &mut ShardState, args: &[&[u8]]) -> Output {
        let mut out = Output::default();
        call(ks, state, &command(args), &mut out, &mut Clock::at(1_000), Caller::Client);
        out
    }

    fn bulk(value: &[u8]) -> Vec<u8> {
        let mut v = format!("${}\r\n", value.len()).into_bytes();
        v.extend_from_slice(value);
        v.extend_from_slice(b"\r\n");
        v
    }

    #[test]
    fn replies_in_flight_keep_the_value_they_were_given() {
        let mut ks = Keyspace::scratch(1);
        let mut state = ShardState::recording(ShardSettings::default());
        let value = vec![b'v'; SHARED_MIN + 10];
        run(&mut ks, &mut state, &[b"SET", b"k", &value]);
        // GET, GETEX and SET … GET send the stored bytes by reference.
        let got = run_spliced(&mut ks, &mut state, &[b"GET", b"k"]);
        assert!(got.has_splices(), "a long value is spliced, not copied");
        assert!(got.len() < 32);
        let getex = run_spliced(&mut ks, &mut state, &[b"GETEX", b"k", b"PERSIST"]);
        assert!(getex.has_splices());
        // Each in-place change copies first: the replies still hold the
        // value as it was.
        let appended = format!(":{}\r\n", SHARED_MIN + 12).into_bytes();
        assert_eq!(run(&mut ks, &mut state, &[b"APPEND", b"k", b"++"]), appended);
        assert_eq!(got.into_flat(), bulk(&value));
        assert_eq!(getex.into_flat(), bulk(&value));
        let mut longer = value.clone();
        longer.extend_from_slice(b"++");
        assert_eq!(run(&mut ks, &mut state, &[b"GET", b"k"]), bulk(&longer));
        assert_eq!(run(&mut ks, &mut state, &[b"OBJECT", b"ENCODING", b"k"]), b"$3\r\nraw\r\n");

        for change in [
            &[b"SETRANGE".as_slice(), b"k", b"1", b"XY"][..],
            &[b"SETBIT", b"k", b"0", b"1"],
            &[b"BITFIELD", b"k", b"SET", b"u8", b"16", b"65"],
        ] {
            run(&mut ks, &mut state, &[b"SET", b"k", &value]);
            let before = run_spliced(&mut ks, &mut state, &[b"GET", b"k"]);
            assert!(before.has_splices());
            let reply = run(&mut ks, &mut state, change);
            assert!(!reply.starts_with(b"-"), "{reply:?}");
            assert_eq!(before.into_flat(), bulk(&value), "after {:?}", change[0]);
            let after = run(&mut ks, &mut state, &[b"GET", b"k"]);
            assert_ne!(after, bulk(&value), "{:?} changed the key", change[0]);
        }
        // A long value is not a number; nothing changes.
        run(&mut ks, &mut state, &[b"SET", b"k", &value]);
        let not_integer = b"-ERR value is not an integer or out of range\r\n";
        assert_eq!(run(&mut ks, &mut state, &[b"INCR", b"k"]), not_integer);
        assert_eq!(run(&mut ks, &mut state, &[b"GET", b"k"]), bulk(&value));
        // The old value leaves with GETSET and GETDEL too.
        let old = run_spliced(&mut ks, &mut state, &[b"GETSET", b"k", b"small"]);
        assert!(old.has_splices());
        assert_eq!(old.into_flat(), bulk(&value));
        run(&mut ks, &mut state, &[b"SET", b"k", &value]);
        let gone = run_spliced(&mut ks, &mut state, &[b"GETDEL", b"k"]);
        assert_eq!(gone.into_flat(), bulk(&value));
        assert_eq!(run(&mut ks, &mut state, &[b"EXISTS", b"k"]), b":0\r\n");
    }
}
