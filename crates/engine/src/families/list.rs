//! Lists: LPUSH, RPUSH, LPUSHX, RPUSHX, LPOP, RPOP, LLEN, LRANGE, LINDEX,
//! LSET, LINSERT, LREM, LTRIM, LPOS, LMOVE, RPOPLPUSH, LMPOP, and the
//! blocking BLPOP, BRPOP, BLMOVE, BRPOPLPUSH, BLMPOP. Semantics,
//! replies and error texts follow Redis 7.0's `t_list.c`; the data structure
//! (and its encoding conversions) is [`ringdb_types::list::List`].
//!
//! The pops and the move are `op_*` functions that do the work and fire the
//! funnel but write no reply ([`op_pop`], [`op_mpop`], [`op_move`]), so that
//! the blocking forms (BLPOP, BRPOP, BLMPOP, BLMOVE, BRPOPLPUSH) can serve a
//! waiting client with the same code when a push wakes it.
//!
//! An emptied list is deleted, with the `del` event after the command's own
//! one, as Redis's `listElementsRemoved` does. LMOVE, RPOPLPUSH and LMPOP
//! are plain single-keyspace handlers: when their keys live on different
//! shards the router gathers them (see the server's `route::cross`).

use crate::blocking::Unit;
use crate::command::args::is;
use crate::command::error::{
    CmdError, CmdResult, NOT_INTEGER, NO_SUCH_KEY, OUT_OF_RANGE, SYNTAX, WRONG_TYPE,
};
use crate::command::spec::{
    acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec, TimeoutAt, Waits,
};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::{typed, Value};
use bytes::Bytes;
use ringdb_protocol::ReplyWriter;
use ringdb_types::list::{normalize_range, End, List};
use ringdb_types::number::parse_i64;
use ringdb_types::pack::{Item, Probe};

/// Key spec of the commands that pop (and may delete) their key.
const POP_KEY: KeySpec = KeySpec::one(1, kf::RW | kf::ACCESS | kf::DELETE);
/// Key spec of the commands that push onto their key.
const PUSH_KEY: KeySpec = KeySpec::one(1, kf::RW | kf::INSERT);
const PUSH_COMPLEXITY: &str = "O(1) for each element added, so O(N) to add N elements when the command is called with multiple arguments.";

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("lpush", -3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(lpush))
        .keys(&[PUSH_KEY])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Prepends one or more elements to a list. Creates the key if it doesn't exist.", PUSH_COMPLEXITY, "key element [element ...]")
        .history(&[("2.4.0", "Accepts multiple `element` arguments.")]),
    CommandSpec::new("rpush", -3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(rpush))
        .keys(&[PUSH_KEY])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Appends one or more elements to a list. Creates the key if it doesn't exist.", PUSH_COMPLEXITY, "key element [element ...]")
        .history(&[("2.4.0", "Accepts multiple `element` arguments.")]),
    CommandSpec::new("lpushx", -3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(lpushx))
        .keys(&[PUSH_KEY])
        .acl(acl::LIST)
        .doc("list", "2.2.0", "Prepends one or more elements to a list only when the list exists.", PUSH_COMPLEXITY, "key element [element ...]")
        .history(&[("4.0.0", "Accepts multiple `element` arguments.")]),
    CommandSpec::new("rpushx", -3, WRITE | DENYOOM | FAST | AS_IS, Exec::Shard(rpushx))
        .keys(&[PUSH_KEY])
        .acl(acl::LIST)
        .doc("list", "2.2.0", "Appends an element to a list only when the list exists.", PUSH_COMPLEXITY, "key element [element ...]")
        .history(&[("4.0.0", "Accepts multiple `element` arguments.")]),
    CommandSpec::new("lpop", -2, WRITE | FAST | AS_IS, Exec::Shard(lpop))
        .keys(&[POP_KEY])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Returns the first elements in a list after removing it. Deletes the list if the last element was popped.", "O(N) where N is the number of elements returned", "key [count]")
        .history(&[("6.2.0", "Added the `count` argument.")]),
    CommandSpec::new("rpop", -2, WRITE | FAST | AS_IS, Exec::Shard(rpop))
        .keys(&[POP_KEY])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Returns and removes the last elements of a list. Deletes the list if the last element was popped.", "O(N) where N is the number of elements returned", "key [count]")
        .history(&[("6.2.0", "Added the `count` argument.")]),
    CommandSpec::new("llen", 2, READONLY | FAST | WATCHABLE, Exec::Shard(llen))
        .keys(&[KeySpec::one(1, kf::RO)])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Returns the length of a list.", "O(1)", "key"),
    CommandSpec::new("lrange", 4, READONLY | WATCHABLE, Exec::Shard(lrange))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Returns a range of elements from a list.", "O(S+N) where S is the distance of start offset from HEAD for small lists, from nearest end (HEAD or TAIL) for large lists; and N is the number of elements in the specified range.", "key start stop"),
    CommandSpec::new("lindex", 3, READONLY | WATCHABLE, Exec::Shard(lindex))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Returns an element from a list by its index.", "O(N) where N is the number of elements to traverse to get to the element at index. This makes asking for the first or the last element of the list O(1).", "key index"),
    CommandSpec::new("lset", 4, WRITE | DENYOOM | AS_IS, Exec::Shard(lset))
        .keys(&[KeySpec::one(1, kf::RW | kf::UPDATE)])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Sets the value of an element in a list by its index.", "O(N) where N is the length of the list. Setting either the first or the last element of the list is O(1).", "key index element"),
    CommandSpec::new("linsert", 5, WRITE | DENYOOM | AS_IS, Exec::Shard(linsert))
        .keys(&[PUSH_KEY])
        .acl(acl::LIST)
        .doc("list", "2.2.0", "Inserts an element before or after another element in a list.", "O(N) where N is the number of elements to traverse before seeing the value pivot. This means that inserting somewhere on the left end on the list (head) can be considered O(1) and inserting somewhere on the right end (tail) is O(N).", "key <BEFORE | AFTER> pivot element"),
    CommandSpec::new("lrem", 4, WRITE | AS_IS, Exec::Shard(lrem))
        .keys(&[KeySpec::one(1, kf::RW | kf::DELETE)])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Removes elements from a list. Deletes the list if the last element was removed.", "O(N+M) where N is the length of the list and M is the number of elements removed.", "key count element"),
    CommandSpec::new("ltrim", 4, WRITE | AS_IS, Exec::Shard(ltrim))
        .keys(&[KeySpec::one(1, kf::RW | kf::DELETE)])
        .acl(acl::LIST)
        .doc("list", "1.0.0", "Removes elements from both ends a list. Deletes the list if all elements were trimmed.", "O(N) where N is the number of elements to be removed by the operation.", "key start stop"),
    CommandSpec::new("lpos", -3, READONLY | WATCHABLE, Exec::Shard(lpos))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::LIST)
        .doc("list", "6.0.6", "Returns the index of matching elements in a list.", "O(N) where N is the number of elements in the list, for the average case. When searching for elements near the head or the tail of the list, or when the MAXLEN option is provided, the command may run in constant time.", "key element [RANK rank] [COUNT num-matches] [MAXLEN len]"),
    CommandSpec::new("lmove", 5, WRITE | DENYOOM, Exec::Shard(lmove))
        .keys(&[POP_KEY, KeySpec::one(2, kf::RW | kf::INSERT)])
        .acl(acl::LIST)
        .doc("list", "6.2.0", "Returns an element after popping it from one list and pushing it to another. Deletes the list if the last element was moved.", "O(1)", "source destination <LEFT | RIGHT> <LEFT | RIGHT>"),
    CommandSpec::new("rpoplpush", 3, WRITE | DENYOOM, Exec::Shard(rpoplpush))
        .keys(&[POP_KEY, KeySpec::one(2, kf::RW | kf::INSERT)])
        .acl(acl::LIST)
        .doc("list", "1.2.0", "Returns the last element of a list after removing and pushing it to another list. Deletes the list if the last element was popped.", "O(1)", "source destination")
        .deprecated("6.2.0", "`LMOVE` with the `RIGHT` and `LEFT` arguments"),
    CommandSpec::new("lmpop", -4, WRITE, Exec::Shard(lmpop))
        .keys(&[KeySpec::keynum(1, kf::RW | kf::ACCESS | kf::DELETE)])
        .acl(acl::LIST)
        .doc("list", "7.0.0", "Returns multiple elements from a list after removing them. Deletes the list if the last element was popped.", "O(N+M) where N is the number of provided keys and M is the number of elements returned.", "numkeys key [key ...] <LEFT | RIGHT> [COUNT count]"),
    // The blocking forms: each serves the client if it can and otherwise
    // replies the timeout's null; the server waits and retries (see
    // `crate::blocking`).
    CommandSpec::new("blpop", -3, WRITE | NOSCRIPT | BLOCKING, Exec::Shard(blpop))
        .blocks(TimeoutAt::Last, Waits::Pop)
        .keys(&[BPOP_KEYS])
        .acl(acl::LIST)
        .doc("list", "2.0.0", "Removes and returns the first element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N) where N is the number of provided keys.", "key [key ...] timeout:double")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]),
    CommandSpec::new("brpop", -3, WRITE | NOSCRIPT | BLOCKING, Exec::Shard(brpop))
        .blocks(TimeoutAt::Last, Waits::Pop)
        .keys(&[BPOP_KEYS])
        .acl(acl::LIST)
        .doc("list", "2.0.0", "Removes and returns the last element in a list. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N) where N is the number of provided keys.", "key [key ...] timeout:double")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]),
    CommandSpec::new("blmove", 6, WRITE | DENYOOM | NOSCRIPT | BLOCKING, Exec::Shard(blmove))
        .blocks(TimeoutAt::Last, Waits::Move)
        .keys(&[POP_KEY, KeySpec::one(2, kf::RW | kf::INSERT)])
        .acl(acl::LIST)
        .doc("list", "6.2.0", "Pops an element from a list, pushes it to another list and returns it. Blocks until an element is available otherwise. Deletes the list if the last element was moved.", "O(1)", "source destination <LEFT | RIGHT> <LEFT | RIGHT> timeout:double"),
    CommandSpec::new("brpoplpush", 4, WRITE | DENYOOM | NOSCRIPT | BLOCKING, Exec::Shard(brpoplpush))
        .blocks(TimeoutAt::Last, Waits::Move)
        .keys(&[POP_KEY, KeySpec::one(2, kf::RW | kf::INSERT)])
        .acl(acl::LIST)
        .doc("list", "2.2.0", "Pops an element from a list, pushes it to another list and returns it. Block until an element is available otherwise. Deletes the list if the last element was popped.", "O(1)", "source destination timeout:double")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")])
        .deprecated("6.2.0", "`BLMOVE` with the `RIGHT` and `LEFT` arguments"),
    CommandSpec::new("blmpop", -5, WRITE | BLOCKING, Exec::Shard(blmpop))
        .blocks(TimeoutAt::First, Waits::Pop)
        .keys(&[KeySpec::keynum(2, kf::RW | kf::ACCESS | kf::DELETE)])
        .acl(acl::LIST)
        .doc("list", "7.0.0", "Pops the first element from one of multiple lists. Blocks until an element is available otherwise. Deletes the list if the last element was popped.", "O(N+M) where N is the number of provided keys and M is the number of elements returned.", "timeout:double numkeys key [key ...] <LEFT | RIGHT> [COUNT count]"),
];

/// Key spec of BLPOP and BRPOP: every argument but the timeout.
const BPOP_KEYS: KeySpec = KeySpec::range(1, -2, 1, kf::RW | kf::ACCESS | kf::DELETE);

// ---- Looking lists up -------------------------------------------------------

/// The list at `key` for reading: `Ok(None)` when missing, WRONGTYPE when
/// the key holds another type. Mutable so that a read can close the
/// compressed nodes it opened ([`List::close`]): that changes how the list
/// is kept, not what it holds.
pub fn read_list<'a>(
    ks: &'a mut KeyspaceView,
    key: &[u8],
) -> Result<Option<&'a mut List>, CmdError> {
    match ks.read_to_reshape(key) {
        None => Ok(None),
        Some(e) => match &mut e.value {
            Value::List(l) => Ok(Some(l)),
            _ => Err(WRONG_TYPE),
        },
    }
}

/// The list at `key` for writing.
pub fn write_list<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Option<Updater<'v, List>>, CmdError> {
    ks.write_as(key, typed)
}

/// The list at `key` for writing, created empty when missing (the caller
/// pushes at once: an empty list never stays in the keyspace).
fn list_or_create<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Updater<'v, List>, CmdError> {
    ks.write_or_create(key, || Value::List(List::new()))
}

/// After elements went from the list at `key` (its updater fired the
/// command's event): deletes the list if that `emptied` it, with Redis's
/// `del` event (Redis's `listElementsRemoved`).
fn delete_if_emptied(ks: &mut KeyspaceView, key: &[u8], emptied: bool) {
    if emptied {
        ks.delete(key);
    }
}

// ---- Arguments and replies --------------------------------------------------

/// `LEFT` or `RIGHT` (Redis's `getListPositionFromObjectOrReply`).
fn parse_end(arg: &[u8]) -> Result<End, CmdError> {
    if is(arg, "LEFT") {
        Ok(End::Head)
    } else if is(arg, "RIGHT") {
        Ok(End::Tail)
    } else {
        Err(SYNTAX)
    }
}

/// An integer in `min..=max`, with `err` for anything else, as Redis's
/// `getRangeLongFromObjectOrReply` with a message.
fn int_in(arg: &[u8], min: i64, max: i64, err: CmdError) -> Result<i64, CmdError> {
    parse_i64(arg).filter(|n| (min..=max).contains(n)).ok_or(err)
}

fn pop_event(end: End) -> &'static str {
    match end {
        End::Head => "lpop",
        End::Tail => "rpop",
    }
}

fn push_event(end: End) -> &'static str {
    match end {
        End::Head => "lpush",
        End::Tail => "rpush",
    }
}

/// One element as a bulk string (integers are stored as integers).
fn reply_item(out: &mut ReplyWriter, item: &Item) {
    match *item {
        Item::Int(n) => out.bulk_int(n),
        _ => {
            let mut tmp = [0u8; 24];
            out.bulk(item.bytes(&mut tmp));
        }
    }
}

fn reply_elements(out: &mut ReplyWriter, elements: &[Vec<u8>]) {
    out.array(elements.len());
    for e in elements {
        out.bulk(e);
    }
}

/// The reply of LMPOP (and BLMPOP): the key, then its popped elements.
pub fn reply_popped_with_key(out: &mut ReplyWriter, key: &[u8], elements: &[Vec<u8>]) {
    out.array(2);
    out.bulk(key);
    reply_elements(out, elements);
}

// ---- Pushes -----------------------------------------------------------------

/// Pushes `elements` one by one at `end` of the list at `key` (so LPUSH a b
/// c leaves c first), creating the list unless `only_existing` (LPUSHX,
/// RPUSHX). Returns the new length, or `None` when nothing was pushed
/// because the key is missing.
pub fn op_push(
    ks: &mut KeyspaceView,
    key: &[u8],
    end: End,
    elements: &[&[u8]],
    only_existing: bool,
) -> Result<Option<usize>, CmdError> {
    let limits = ks.state.settings.limits;
    let mut list = match only_existing {
        true => match write_list(ks, key)? {
            Some(list) => list,
            None => return Ok(None),
        },
        false => list_or_create(ks, key)?,
    };
    let list = list.update(NotifyClass::List, push_event(end));
    list.push(end, elements, &limits);
    Ok(Some(list.len()))
}

fn push_command(ctx: &mut Ctx, args: &[Bytes], end: End, only_existing: bool) -> CmdResult {
    let elements: Vec<&[u8]> = args[2..].iter().map(|a| a.as_ref()).collect();
    let len = op_push(&mut ctx.ks, &args[1], end, &elements, only_existing)?;
    ctx.out.int(len.unwrap_or(0) as i64);
    Ok(())
}

fn lpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push_command(ctx, args, End::Head, false)
}

fn rpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push_command(ctx, args, End::Tail, false)
}

fn lpushx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push_command(ctx, args, End::Head, true)
}

fn rpushx(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    push_command(ctx, args, End::Tail, true)
}

// ---- Pops -------------------------------------------------------------------

/// Elements popped from a list, in the order they were popped.
pub type Popped = Vec<Vec<u8>>;

/// Pops up to `count` elements (at least one) from `end` of the list at
/// `key`, in pop order, firing `lpop`/`rpop` and deleting the emptied list.
/// `None` when the key is missing.
pub fn op_pop(
    ks: &mut KeyspaceView,
    key: &[u8],
    end: End,
    count: usize,
) -> Result<Option<Popped>, CmdError> {
    let limits = ks.state.settings.limits;
    let Some(mut updater) = write_list(ks, key)? else { return Ok(None) };
    let list = updater.update(NotifyClass::List, pop_event(end));
    let popped = list.pop_many(end, count.max(1), &limits);
    let emptied = list.is_empty();
    if popped.is_empty() {
        // Only a list left empty by a bug could get here; Redis replies as
        // for a missing key.
        updater.unchanged();
        return Ok(None);
    }
    drop(updater);
    delete_if_emptied(ks, key, emptied);
    Ok(Some(popped))
}

/// LPOP/RPOP's optional count (Redis's `getPositiveLongFromObjectOrReply`:
/// one message for negatives and for non-numbers alike).
fn parse_pop_count(arg: &[u8]) -> Result<usize, CmdError> {
    let err = CmdError::new("ERR value is out of range, must be positive");
    Ok(int_in(arg, 0, i64::MAX, err)? as usize)
}

/// LPOP/RPOP key [count] (Redis's `popGenericCommand`): without a count a
/// bulk string or a null; with one an array, a null array for a missing
/// key, and an empty array for a count of 0.
fn pop_command(ctx: &mut Ctx, args: &[Bytes], end: End) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::wrong_args(if end == End::Head { "lpop" } else { "rpop" }));
    }
    let count = args.get(2).map(|a| parse_pop_count(a)).transpose()?;
    if count == Some(0) {
        match write_list(&mut ctx.ks, &args[1])? {
            Some(_) => ctx.out.array(0),
            None => ctx.out.null_array(),
        }
        return Ok(());
    }
    let popped = op_pop(&mut ctx.ks, &args[1], end, count.unwrap_or(1))?;
    match (popped, count) {
        (None, None) => ctx.out.null(),
        (None, Some(_)) => ctx.out.null_array(),
        (Some(elements), None) => ctx.out.bulk(elements.first().map_or(&[][..], |e| e)),
        (Some(elements), Some(_)) => reply_elements(&mut ctx.out, &elements),
    }
    Ok(())
}

fn lpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    pop_command(ctx, args, End::Head)
}

fn rpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    pop_command(ctx, args, End::Tail)
}

/// LMPOP's (and BLMPOP's) pop: up to `count` elements from `end` of the
/// first non-empty list among `keys`. WRONGTYPE when a key of another type
/// comes before any list. Returns the key popped from and its elements.
pub fn op_mpop<'k>(
    ks: &mut KeyspaceView,
    keys: &'k [Bytes],
    end: End,
    count: usize,
) -> Result<Option<(&'k Bytes, Popped)>, CmdError> {
    for key in keys {
        if let Some(elements) = op_pop(ks, key, end, count)? {
            return Ok(Some((key, elements)));
        }
    }
    Ok(None)
}

/// The parsed arguments of LMPOP / BLMPOP after the timeout.
pub struct MpopArgs<'a> {
    pub keys: &'a [Bytes],
    pub end: End,
    pub count: usize,
}

/// Parses `numkeys key [key ...] <LEFT | RIGHT> [COUNT count]` (Redis's
/// `lmpopGenericCommand`), `args` starting at numkeys.
pub fn parse_mpop(args: &[Bytes]) -> Result<MpopArgs<'_>, CmdError> {
    let numkeys =
        int_in(&args[0], 1, i64::MAX, CmdError::new("ERR numkeys should be greater than 0"))?;
    let where_at = usize::try_from(numkeys).ok().and_then(|n| n.checked_add(1));
    let Some(where_at) = where_at.filter(|&w| w < args.len()) else { return Err(SYNTAX) };
    let end = parse_end(&args[where_at])?;
    let mut count = None;
    let mut j = where_at + 1;
    while j < args.len() {
        if count.is_none() && is(&args[j], "COUNT") && j + 1 < args.len() {
            let err = CmdError::new("ERR count should be greater than 0");
            count = Some(int_in(&args[j + 1], 1, i64::MAX, err)? as usize);
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    Ok(MpopArgs { keys: &args[1..where_at], end, count: count.unwrap_or(1) })
}

/// LMPOP numkeys key [key ...] <LEFT | RIGHT> [COUNT count]
fn lmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let parsed = parse_mpop(&args[1..])?;
    match op_mpop(&mut ctx.ks, parsed.keys, parsed.end, parsed.count)? {
        Some((key, elements)) => reply_popped_with_key(&mut ctx.out, key, &elements),
        None => {
            ctx.ks.found_nothing();
            ctx.out.null_array();
        }
    }
    Ok(())
}

// ---- Moves ------------------------------------------------------------------

/// LMOVE's (and BLMOVE's, BRPOPLPUSH's) move (Redis's
/// `lmoveGenericCommand`): pops from `from` of `source` and pushes at `to`
/// of `destination`, creating it. `None` when the source is missing (the
/// destination is then not even looked at); WRONGTYPE for either key before
/// anything changes. Fires the push on the destination, then the pop (and
/// `del` when emptied) on the source.
pub fn op_move(
    ks: &mut KeyspaceView,
    source: &[u8],
    destination: &[u8],
    from: End,
    to: End,
) -> Result<Option<Vec<u8>>, CmdError> {
    let limits = ks.state.settings.limits;
    // The element to move, read before the destination's type is checked
    // (a missing or empty source answers nil first, as in Redis).
    let index = if from == End::Head { 0 } else { -1 };
    let Some(value) = write_list(ks, source)?.and_then(|l| l.get(index).map(|i| i.to_vec())) else {
        return Ok(None);
    };
    write_list(ks, destination)?;
    if source == destination {
        // Pop and push on one list, then its shrink check, in Redis's order.
        let Some(mut list) = write_list(ks, source)? else { return Ok(None) };
        let value = list.update(NotifyClass::List, push_event(to)).rotate(from, to, &limits);
        list.update(NotifyClass::List, pop_event(from));
        if value.is_none() {
            list.unchanged();
        }
        return Ok(value);
    }
    // Redis announces the push before the pop: the element read above is
    // pushed, and only then popped.
    list_or_create(ks, destination)?.update(NotifyClass::List, push_event(to)).push(
        to,
        &[&value],
        &limits,
    );
    let Some(mut updater) = write_list(ks, source)? else { return Ok(Some(value)) };
    let list = updater.update(NotifyClass::List, pop_event(from));
    list.pop(from, &limits);
    let emptied = list.is_empty();
    drop(updater);
    delete_if_emptied(ks, source, emptied);
    Ok(Some(value))
}

fn move_command(ctx: &mut Ctx, args: &[Bytes], from: End, to: End) -> CmdResult {
    match op_move(&mut ctx.ks, &args[1], &args[2], from, to)? {
        Some(value) => ctx.out.bulk(&value),
        None => {
            ctx.ks.found_nothing();
            ctx.out.null();
        }
    }
    Ok(())
}

/// LMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT>
fn lmove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let from = parse_end(&args[3])?;
    let to = parse_end(&args[4])?;
    move_command(ctx, args, from, to)
}

/// RPOPLPUSH source destination: LMOVE source destination RIGHT LEFT.
fn rpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    move_command(ctx, args, End::Tail, End::Head)
}

// ---- Blocking forms ---------------------------------------------------------

/// BLPOP/BRPOP key [key ...] timeout: `[key, element]` from the first
/// non-empty list, or the null array (the server then waits).
fn bpop(ctx: &mut Ctx, args: &[Bytes], end: End) -> CmdResult {
    crate::blocking::parse_timeout(&args[args.len() - 1], Unit::Seconds)?;
    match op_mpop(&mut ctx.ks, &args[1..args.len() - 1], end, 1)? {
        Some((key, elements)) => {
            ctx.out.array(2);
            ctx.out.bulk(key);
            ctx.out.bulk(elements.first().map_or(&[][..], |e| e));
        }
        None => {
            ctx.ks.found_nothing();
            ctx.out.null_array();
        }
    }
    Ok(())
}

fn blpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bpop(ctx, args, End::Head)
}

fn brpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bpop(ctx, args, End::Tail)
}

/// BLMOVE source destination <LEFT | RIGHT> <LEFT | RIGHT> timeout
fn blmove(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let from = parse_end(&args[3])?;
    let to = parse_end(&args[4])?;
    crate::blocking::parse_timeout(&args[5], Unit::Seconds)?;
    move_command(ctx, args, from, to)
}

/// BRPOPLPUSH source destination timeout
fn brpoplpush(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::blocking::parse_timeout(&args[3], Unit::Seconds)?;
    move_command(ctx, args, End::Tail, End::Head)
}

/// BLMPOP timeout numkeys key [key ...] <LEFT | RIGHT> [COUNT count]
fn blmpop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::blocking::parse_timeout(&args[1], Unit::Seconds)?;
    lmpop(ctx, &args[1..])
}

// ---- Reads ------------------------------------------------------------------

fn llen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = read_list(&mut ctx.ks, &args[1])?.map_or(0, |l| l.len());
    ctx.out.int(len as i64);
    Ok(())
}

/// LRANGE key start stop: indexes are parsed before the key is looked up,
/// as in Redis.
fn lrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let start = parse_i64(&args[2]).ok_or(NOT_INTEGER)?;
    let stop = parse_i64(&args[3]).ok_or(NOT_INTEGER)?;
    let Some(list) = read_list(&mut ctx.ks, &args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    match normalize_range(start, stop, list.len()) {
        None => ctx.out.array(0),
        Some((first, last)) => {
            ctx.out.array(last - first + 1);
            for item in list.iter_range(first, last - first + 1, false) {
                reply_item(&mut ctx.out, &item);
            }
        }
    }
    list.close();
    Ok(())
}

/// LINDEX key index: the key is looked up before the index is parsed.
fn lindex(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let Some(list) = read_list(&mut ctx.ks, &args[1])? else {
        ctx.out.null();
        return Ok(());
    };
    let index = parse_i64(&args[2]).ok_or(NOT_INTEGER)?;
    match list.get(index) {
        Some(item) => reply_item(&mut ctx.out, &item),
        None => ctx.out.null(),
    }
    list.close();
    Ok(())
}

/// LPOS's options.
struct LposOptions {
    /// Which match counts as the first (1 = the first); negative counts
    /// from the tail.
    rank: i64,
    /// `None` without COUNT (reply one index); `Some(0)`: every match.
    count: Option<u64>,
    /// Elements to look at; 0 = all.
    maxlen: u64,
}

fn parse_lpos_options(args: &[Bytes]) -> Result<LposOptions, CmdError> {
    let mut o = LposOptions { rank: 1, count: None, maxlen: 0 };
    let mut j = 3;
    while j < args.len() {
        let (opt, value) = (&args[j], args.get(j + 1));
        match value {
            Some(v) if is(opt, "RANK") => {
                // i64::MIN has no positive counterpart: Redis 7.2 rejects it
                // with the range error (7.0 negated it with overflow).
                o.rank = parse_i64(v).ok_or(NOT_INTEGER)?;
                if o.rank == i64::MIN {
                    return Err(CmdError::new("ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"));
                }
                if o.rank == 0 {
                    return Err(CmdError::new("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list"));
                }
            }
            Some(v) if is(opt, "COUNT") => {
                let err = CmdError::new("ERR COUNT can't be negative");
                o.count = Some(int_in(v, 0, i64::MAX, err)? as u64);
            }
            Some(v) if is(opt, "MAXLEN") => {
                let err = CmdError::new("ERR MAXLEN can't be negative");
                o.maxlen = int_in(v, 0, i64::MAX, err)? as u64;
            }
            _ => return Err(SYNTAX),
        }
        j += 2;
    }
    Ok(o)
}

/// The indexes (as LINDEX counts them) of the matches of `element` that
/// LPOS reports: from the `rank`-th match on, at most `count` of them (0:
/// all; `None`: one), looking at no more than `maxlen` elements.
fn lpos_matches(list: &List, element: &[u8], o: &LposOptions) -> Vec<usize> {
    let probe = Probe::new(element);
    let from_tail = o.rank < 0;
    let rank = o.rank.unsigned_abs();
    let wanted = match o.count {
        None => 1,
        Some(0) => u64::MAX,
        Some(n) => n,
    };
    let len = list.len();
    let scan_len = if o.maxlen == 0 { len } else { len.min(o.maxlen as usize) };
    let items = if from_tail { list.iter_rev() } else { list.iter() };
    let mut found = Vec::new();
    let mut matches = 0u64;
    for (seen, item) in items.take(scan_len).enumerate() {
        if !probe.matches(&item) {
            continue;
        }
        matches += 1;
        if matches >= rank {
            found.push(if from_tail { len - seen - 1 } else { seen });
            if found.len() as u64 >= wanted {
                break;
            }
        }
    }
    found
}

/// LPOS key element [RANK rank] [COUNT num-matches] [MAXLEN len]
fn lpos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let o = parse_lpos_options(args)?;
    let found = match read_list(&mut ctx.ks, &args[1])? {
        Some(list) => {
            let found = lpos_matches(list, &args[2], &o);
            list.close();
            found
        }
        None => Vec::new(),
    };
    match (o.count, found.first()) {
        (Some(_), _) => {
            ctx.out.array(found.len());
            for index in found {
                ctx.out.int(index as i64);
            }
        }
        (None, Some(&index)) => ctx.out.int(index as i64),
        (None, None) => ctx.out.null(),
    }
    Ok(())
}

// ---- Changes in place -------------------------------------------------------

/// LSET key index element: `ERR no such key` for a missing key, which is
/// looked up before the index is parsed.
fn lset(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let limits = ctx.ks.state.settings.limits;
    let Some(mut updater) = write_list(&mut ctx.ks, key)? else { return Err(NO_SUCH_KEY) };
    let index = parse_i64(&args[2]).ok_or(NOT_INTEGER)?;
    if !updater.update(NotifyClass::List, "lset").set(index, &args[3], &limits) {
        updater.unchanged();
        return Err(OUT_OF_RANGE);
    }
    drop(updater);
    ctx.out.ok();
    Ok(())
}

/// LINSERT key <BEFORE | AFTER> pivot element: the new length, 0 for a
/// missing key, -1 when the pivot is not found.
fn linsert(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let after = if is(&args[2], "AFTER") {
        true
    } else if is(&args[2], "BEFORE") {
        false
    } else {
        return Err(SYNTAX);
    };
    let key = &args[1];
    let limits = ctx.ks.state.settings.limits;
    let Some(mut updater) = write_list(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    match updater.update(NotifyClass::List, "linsert").insert(&args[3], &args[4], after, &limits) {
        Some(len) => ctx.out.int(len as i64),
        None => {
            updater.unchanged();
            ctx.out.int(-1)
        }
    }
    Ok(())
}

/// LREM key count element
fn lrem(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let count = parse_i64(&args[2]).ok_or(NOT_INTEGER)?;
    let limits = ctx.ks.state.settings.limits;
    let Some(mut updater) = write_list(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let list = updater.update(NotifyClass::List, "lrem");
    let removed = list.remove(&args[3], count, &limits);
    let emptied = list.is_empty();
    if removed == 0 {
        updater.unchanged();
    }
    drop(updater);
    delete_if_emptied(&mut ctx.ks, key, removed > 0 && emptied);
    ctx.out.int(removed as i64);
    Ok(())
}

/// LTRIM key start stop: Redis fires `ltrim` even when nothing went.
fn ltrim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let start = parse_i64(&args[2]).ok_or(NOT_INTEGER)?;
    let stop = parse_i64(&args[3]).ok_or(NOT_INTEGER)?;
    let limits = ctx.ks.state.settings.limits;
    ctx.out.ok();
    let Some(mut updater) = write_list(&mut ctx.ks, key)? else { return Ok(()) };
    let list = updater.update(NotifyClass::List, "ltrim");
    list.trim(start, stop, &limits);
    let emptied = list.is_empty();
    drop(updater);
    delete_if_emptied(&mut ctx.ks, key, emptied);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::command::ClientInfo;
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardSettings, ShardState};
    use bytes::Bytes;
    use ringdb_protocol::Resp;

    /// A one-shard keyspace and a recording state, driven command by command.
    struct Harness {
        keyspace: Keyspace,
        state: ShardState,
        resp: Resp,
    }

    impl Harness {
        fn new() -> Self {
            Harness {
                keyspace: Keyspace::scratch(16),
                state: ShardState::recording(ShardSettings::default()),
                resp: Resp::V2,
            }
        }

        fn run(&mut self, line: &str) -> String {
            let args: Vec<Bytes> =
                line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
            let out = test_call(
                &mut self.keyspace,
                &mut self.state,
                args,
                ClientInfo { resp: self.resp, ..ClientInfo::default() },
                1_000_000,
            );
            String::from_utf8_lossy(&out).into_owned()
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
    fn pushes_pops_and_their_events() {
        let mut h = Harness::new();
        assert_eq!(h.run("RPUSH l a b c"), ":3\r\n");
        assert_eq!(h.run("LPUSH l x y"), ":5\r\n");
        assert_eq!(
            h.run("LRANGE l 0 -1"),
            "*5\r\n$1\r\ny\r\n$1\r\nx\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n"
        );
        assert_eq!(h.events(), ["l:rpush", "l:lpush"]);
        assert_eq!(h.run("LPUSHX missing a"), ":0\r\n");
        assert_eq!(h.run("RPUSHX l 1 2"), ":7\r\n");
        assert_eq!(h.events(), ["l:rpush"]);
        assert_eq!(h.run("LPOP l"), "$1\r\ny\r\n");
        assert_eq!(h.run("RPOP l 2"), "*2\r\n$1\r\n2\r\n$1\r\n1\r\n");
        assert_eq!(h.run("LPOP l 0"), "*0\r\n");
        assert_eq!(h.events(), ["l:lpop", "l:rpop"]);
        assert_eq!(h.run("LPOP l 100"), "*4\r\n$1\r\nx\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n");
        assert_eq!(h.events(), ["l:lpop", "l:del"]);
        assert_eq!(h.run("EXISTS l"), ":0\r\n");
    }

    #[test]
    fn null_replies_follow_the_protocol() {
        let mut h = Harness::new();
        assert_eq!(h.run("LPOP none"), "$-1\r\n");
        assert_eq!(h.run("LPOP none 1"), "*-1\r\n");
        assert_eq!(h.run("LPOP none 0"), "*-1\r\n");
        assert_eq!(h.run("LMPOP 1 none LEFT"), "*-1\r\n");
        assert_eq!(h.run("LPOS none a"), "$-1\r\n");
        assert_eq!(h.run("LPOS none a COUNT 0"), "*0\r\n");
        h.resp = Resp::V3;
        for line in [
            "LPOP none",
            "RPOP none 2",
            "LMPOP 1 none RIGHT",
            "LINDEX none 0",
            "LMOVE none d LEFT LEFT",
        ] {
            assert_eq!(h.run(line), "_\r\n", "{line}");
        }
        assert!(h.events().is_empty());
    }

    #[test]
    fn argument_errors_come_before_or_after_the_lookup_as_in_redis() {
        let mut h = Harness::new();
        h.run("SET s v");
        let wrongtype = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
        // Counts and indexes parsed first.
        assert_eq!(h.run("LPOP s x"), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(h.run("LPOP s -1"), "-ERR value is out of range, must be positive\r\n");
        assert_eq!(h.run("LPOP s 0"), wrongtype);
        assert_eq!(h.run("LPOP s 1 2"), "-ERR wrong number of arguments for 'lpop' command\r\n");
        assert_eq!(h.run("LRANGE none x 1"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run("LTRIM none 0 x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run("LREM none x a"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run("LINSERT none MIDDLE a b"), "-ERR syntax error\r\n");
        assert_eq!(h.run("LMOVE none d UP LEFT"), "-ERR syntax error\r\n");
        // The key first.
        assert_eq!(h.run("LINDEX none x"), "$-1\r\n");
        assert_eq!(h.run("LSET none x v"), "-ERR no such key\r\n");
        assert_eq!(h.run("LSET s x v"), wrongtype);
        h.run("RPUSH l a");
        assert_eq!(h.run("LINDEX l x"), "-ERR value is not an integer or out of range\r\n");
        assert_eq!(h.run("LSET l 1 v"), "-ERR index out of range\r\n");
        for line in [
            "LLEN s",
            "LRANGE s 0 1",
            "LINDEX s 0",
            "LPUSH s a",
            "RPUSHX s a",
            "LREM s 0 a",
            "LTRIM s 0 1",
            "LINSERT s BEFORE a b",
            "LPOS s a",
            "LMPOP 2 none s LEFT",
            "RPOPLPUSH s l",
            "RPOPLPUSH l s",
        ] {
            assert_eq!(h.run(line), wrongtype, "{line}");
        }
        // A wrong destination leaves the source alone.
        assert_eq!(h.run("LLEN l"), ":1\r\n");
    }

    #[test]
    fn lmpop_parsing() {
        let mut h = Harness::new();
        let numkeys = "-ERR numkeys should be greater than 0\r\n";
        assert_eq!(h.run("LMPOP 0 a LEFT"), numkeys);
        assert_eq!(h.run("LMPOP -1 a LEFT"), numkeys);
        assert_eq!(h.run("LMPOP x a LEFT"), numkeys);
        assert_eq!(h.run("LMPOP 9223372036854775807 a LEFT"), "-ERR syntax error\r\n");
        assert_eq!(h.run("LMPOP 2 a LEFT"), "-ERR syntax error\r\n");
        assert_eq!(h.run("LMPOP 1 a MIDDLE"), "-ERR syntax error\r\n");
        assert_eq!(h.run("LMPOP 1 a LEFT COUNT"), "-ERR syntax error\r\n");
        assert_eq!(h.run("LMPOP 1 a LEFT COUNT 1 COUNT 1"), "-ERR syntax error\r\n");
        assert_eq!(h.run("LMPOP 1 a LEFT COUNT 0"), "-ERR count should be greater than 0\r\n");
        assert_eq!(h.run("LMPOP 1 a LEFT COUNT x"), "-ERR count should be greater than 0\r\n");
        h.run("RPUSH b 1 2 3");
        assert_eq!(
            h.run("LMPOP 2 a b RIGHT COUNT 2"),
            "*2\r\n$1\r\nb\r\n*2\r\n$1\r\n3\r\n$1\r\n2\r\n"
        );
        h.events();
        assert_eq!(h.run("LMPOP 2 a b left count 5"), "*2\r\n$1\r\nb\r\n*1\r\n$1\r\n1\r\n");
        assert_eq!(h.events(), ["b:lpop", "b:del"]);
    }

    #[test]
    fn lpos_options() {
        let mut h = Harness::new();
        h.run("RPUSH l a b c 1 2 3 c c");
        assert_eq!(h.run("LPOS l c"), ":2\r\n");
        assert_eq!(h.run("LPOS l c RANK 2"), ":6\r\n");
        assert_eq!(h.run("LPOS l c RANK -1"), ":7\r\n");
        assert_eq!(h.run("LPOS l c RANK -3"), ":2\r\n");
        assert_eq!(h.run("LPOS l c RANK 4"), "$-1\r\n");
        assert_eq!(h.run("LPOS l c COUNT 0"), "*3\r\n:2\r\n:6\r\n:7\r\n");
        assert_eq!(h.run("LPOS l c COUNT 2 RANK -1"), "*2\r\n:7\r\n:6\r\n");
        assert_eq!(h.run("LPOS l c COUNT 0 MAXLEN 7"), "*2\r\n:2\r\n:6\r\n");
        assert_eq!(h.run("LPOS l c RANK -1 MAXLEN 1"), ":7\r\n");
        assert_eq!(h.run("LPOS l 1"), ":3\r\n");
        assert_eq!(h.run("LPOS l x COUNT 1"), "*0\r\n");
        assert_eq!(h.run("LPOS l c RANK 0"), "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n");
        assert_eq!(h.run("LPOS l c RANK x"), "-ERR value is not an integer or out of range\r\n");
        assert!(h
            .run("LPOS l c RANK -9223372036854775808")
            .starts_with("-ERR value is out of range, value must between"));
        assert_eq!(h.run("LPOS l c COUNT -1"), "-ERR COUNT can't be negative\r\n");
        assert_eq!(h.run("LPOS l c MAXLEN -1"), "-ERR MAXLEN can't be negative\r\n");
        assert_eq!(h.run("LPOS l c MAXLEN"), "-ERR syntax error\r\n");
        assert_eq!(h.run("LPOS l c FOO 1"), "-ERR syntax error\r\n");
    }

    #[test]
    fn insert_set_rem_trim_and_their_events() {
        let mut h = Harness::new();
        h.run("RPUSH l a b a");
        assert_eq!(h.run("LINSERT l BEFORE b x"), ":4\r\n");
        assert_eq!(h.run("LINSERT l after a y"), ":5\r\n");
        assert_eq!(h.run("LINSERT l AFTER zz y"), ":-1\r\n");
        assert_eq!(h.run("LINSERT none AFTER a y"), ":0\r\n");
        assert_eq!(h.run("LSET l -1 z"), "+OK\r\n");
        assert_eq!(
            h.run("LRANGE l 0 -1"),
            "*5\r\n$1\r\na\r\n$1\r\ny\r\n$1\r\nx\r\n$1\r\nb\r\n$1\r\nz\r\n"
        );
        assert_eq!(h.run("LREM l 0 nothing"), ":0\r\n");
        assert_eq!(h.run("LREM l -1 a"), ":1\r\n");
        assert_eq!(h.events(), ["l:rpush", "l:linsert", "l:linsert", "l:lset", "l:lrem"]);
        assert_eq!(h.run("LTRIM l 0 -1"), "+OK\r\n");
        assert_eq!(h.run("LTRIM none 0 -1"), "+OK\r\n");
        assert_eq!(h.events(), ["l:ltrim"]);
        assert_eq!(h.run("LTRIM l 5 1"), "+OK\r\n");
        assert_eq!(h.events(), ["l:ltrim", "l:del"]);
        h.run("RPUSH r 1 1");
        assert_eq!(h.run("LREM r 0 1"), ":2\r\n");
        assert_eq!(h.events(), ["r:rpush", "r:lrem", "r:del"]);
    }

    #[test]
    fn moves_fire_push_then_pop_then_del() {
        let mut h = Harness::new();
        h.run("RPUSH s a b");
        h.events();
        assert_eq!(h.run("LMOVE s d LEFT RIGHT"), "$1\r\na\r\n");
        assert_eq!(h.events(), ["d:rpush", "s:lpop"]);
        assert_eq!(h.run("RPOPLPUSH s d"), "$1\r\nb\r\n");
        assert_eq!(h.events(), ["d:lpush", "s:rpop", "s:del"]);
        assert_eq!(h.run("LRANGE d 0 -1"), "*2\r\n$1\r\nb\r\n$1\r\na\r\n");
        assert_eq!(h.run("LMOVE d d LEFT RIGHT"), "$1\r\nb\r\n");
        assert_eq!(h.events(), ["d:rpush", "d:lpop"]);
        assert_eq!(h.run("LRANGE d 0 -1"), "*2\r\n$1\r\na\r\n$1\r\nb\r\n");
        assert_eq!(h.run("RPOPLPUSH none d"), "$-1\r\n");
        assert!(h.events().is_empty());
    }

    #[test]
    fn lists_report_quicklist_as_redis_7_0_does() {
        let mut h = Harness::new();
        h.run("RPUSH l 1");
        assert_eq!(h.encoding("l"), "$9\r\nquicklist\r\n");
        h.run("RPUSH l 12345678901234567890 -3 abc");
        assert_eq!(h.run("LINDEX l 1"), "$20\r\n12345678901234567890\r\n");
        assert_eq!(h.run("LINDEX l -2"), "$2\r\n-3\r\n");
        assert_eq!(h.run("LPOS l -3"), ":2\r\n");
        assert_eq!(h.run("LPOS l 1"), ":0\r\n");
        assert_eq!(h.run("LPOS l 01"), "$-1\r\n");
    }
}
