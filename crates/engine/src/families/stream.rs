//! Streams: XADD, XLEN, XRANGE, XREVRANGE, XDEL, XTRIM, XREAD, XREADGROUP,
//! XGROUP (CREATE, SETID, DESTROY, CREATECONSUMER, DELCONSUMER, HELP), XACK,
//! XPENDING, XCLAIM, XAUTOCLAIM, XINFO (STREAM, GROUPS, CONSUMERS, HELP),
//! XSETID.
//!
//! Argument rules, reply shapes and error texts follow Redis 7.0's
//! `t_stream.c`. The data structure (nodes, ids, consumer groups, the read
//! counter and lag) is [`ringdb_types::stream::Stream`]; this module reads
//! arguments, looks keys up, fires the write funnel and replies.
//!
//! XREAD and XREADGROUP accept BLOCK and parse its timeout as Redis does, but
//! do not block yet: when nothing can be served they reply as a timeout
//! would (the null array), which is also what Redis does where a client may
//! not block (MULTI, scripts). Blocking is the blocking commands' work.
//!
//! Changes Redis makes without a keyspace notification (XACK, XCLAIM,
//! XAUTOCLAIM, a group read moving the group's position) still go through
//! the funnel, with [`NotifyClass::Silent`]: they are writes for WATCH and
//! for the cross-shard write-back, but nothing is published.

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX, WRONG_TYPE};
use crate::command::spec::{
    acl, flags::*, keyflags as kf, CommandSpec, Exec, FindKeys, KeySpec, TimeoutAt, Waits,
};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::families::keys::reply_help;
use crate::funnel::NotifyClass;
use crate::keyspace::{typed, Value};
use bytes::Bytes;
use ringdb_protocol::ReplyWriter;
use ringdb_types::limits::Limits;
use ringdb_types::pack::Item;
use ringdb_types::stream::{
    self as st, AddError, AddId, AutoClaim, ClaimOptions, EntryCopy, GroupFrom, SetIdError, Stream,
    StreamId, Trim, TrimTo,
};

const KEY_RW_UPDATE: &[KeySpec] = &[KeySpec::one(1, kf::RW | kf::UPDATE)];
const KEY_RW_DELETE: &[KeySpec] = &[KeySpec::one(1, kf::RW | kf::DELETE)];
const KEY_RO_ACCESS: &[KeySpec] = &[KeySpec::one(1, kf::RO | kf::ACCESS)];
/// The keys after STREAMS: the first half of what follows.
const fn streams_keys(startfrom: i32) -> [KeySpec; 1] {
    [KeySpec::keyword(
        "STREAMS",
        startfrom,
        FindKeys::Range { lastkey: -1, step: 1, limit: 2 },
        kf::RO | kf::ACCESS,
    )]
}
const XREAD_KEYS: &[KeySpec] = &streams_keys(1);
const XREADGROUP_KEYS: &[KeySpec] = &streams_keys(4);

const fn group_sub(
    name: &'static str,
    arity: i32,
    flags: u32,
    keys: &'static [KeySpec],
    handler: crate::command::Handler,
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Shard(handler)).keys(keys).acl(acl::STREAM)
}

const GROUP_KEY_INSERT: &[KeySpec] = &[KeySpec::one(2, kf::RW | kf::INSERT)];
const GROUP_KEY_UPDATE: &[KeySpec] = &[KeySpec::one(2, kf::RW | kf::UPDATE)];
const GROUP_KEY_DELETE: &[KeySpec] = &[KeySpec::one(2, kf::RW | kf::DELETE)];
const INFO_KEY: &[KeySpec] = &[KeySpec::one(2, kf::RO | kf::ACCESS)];

static XGROUP_SUBCOMMANDS: &[CommandSpec] = &[
    group_sub("create", -5, WRITE | DENYOOM, GROUP_KEY_INSERT, xgroup_create)
        .doc(
            "stream",
            "5.0.0",
            "Creates a consumer group.",
            "O(1)",
            "key group <id | $> [MKSTREAM] [ENTRIESREAD entries-read:integer]",
        )
        .history(&[("7.0.0", "Added the `entries_read` named argument.")]),
    group_sub("setid", -5, WRITE, GROUP_KEY_UPDATE, xgroup_setid)
        .doc(
            "stream",
            "5.0.0",
            "Sets the last-delivered ID of a consumer group.",
            "O(1)",
            "key group <id | $> [ENTRIESREAD entriesread=entries-read:integer]",
        )
        .history(&[("7.0.0", "Added the optional `entries_read` argument.")]),
    group_sub("destroy", 4, WRITE, GROUP_KEY_DELETE, xgroup_destroy).doc(
        "stream",
        "5.0.0",
        "Destroys a consumer group.",
        "O(N) where N is the number of entries in the group's pending entries list (PEL).",
        "key group",
    ),
    group_sub("createconsumer", 5, WRITE | DENYOOM, GROUP_KEY_INSERT, xgroup_createconsumer).doc(
        "stream",
        "6.2.0",
        "Creates a consumer in a consumer group.",
        "O(1)",
        "key group consumer",
    ),
    group_sub("delconsumer", 5, WRITE, GROUP_KEY_DELETE, xgroup_delconsumer).doc(
        "stream",
        "5.0.0",
        "Deletes a consumer from a consumer group.",
        "O(1)",
        "key group consumer",
    ),
    group_sub("help", 2, LOADING | STALE, &[], xgroup_help).doc(
        "stream",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
];

static XINFO_SUBCOMMANDS: &[CommandSpec] = &[
    group_sub("stream", -3, READONLY, INFO_KEY, xinfo_stream)
        .doc("stream", "5.0.0", "Returns information about a stream.", "O(1)", "key [FULL [COUNT count:integer]]")
        .history(&[("6.0.0", "Added the `FULL` modifier."), ("7.0.0", "Added the `max-deleted-entry-id`, `entries-added`, `recorded-first-entry-id`, `entries-read` and `lag` fields")]),
    group_sub("groups", 3, READONLY, INFO_KEY, xinfo_groups)
        .doc("stream", "5.0.0", "Returns a list of the consumer groups of a stream.", "O(1)", "key")
        .history(&[("7.0.0", "Added the `entries-read` and `lag` fields")]),
    group_sub("consumers", 4, READONLY, INFO_KEY, xinfo_consumers)
        .tips(&["nondeterministic_output"])
        .doc("stream", "5.0.0", "Returns a list of the consumers in a consumer group.", "O(1)", "key group"),
    group_sub("help", 2, LOADING | STALE, &[], xinfo_help)
        .doc("stream", "5.0.0", "Returns helpful text about the different subcommands.", "O(1)", ""),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("xadd", -5, WRITE | DENYOOM | FAST, Exec::Shard(xadd))
        .keys(KEY_RW_UPDATE)
        .acl(acl::STREAM)
        .tips(&["nondeterministic_output"])
        .doc("stream", "5.0.0", "Appends a new message to a stream. Creates the key if it doesn't exist.", "O(1) when adding a new entry, O(N) when trimming where N being the number of entries evicted.", "key [NOMKSTREAM] [<MAXLEN | MINID> [= | ~] threshold [LIMIT count:integer]] <* | id> field value [field value ...]")
        .history(&[("6.2.0", "Added the `NOMKSTREAM` option, `MINID` trimming strategy and the `LIMIT` option."), ("7.0.0", "Added support for the `<ms>-*` explicit ID form.")]),
    CommandSpec::new("xlen", 2, READONLY | FAST | WATCHABLE, Exec::Shard(xlen))
        .keys(&[KeySpec::one(1, kf::RO)])
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "Return the number of messages in a stream.", "O(1)", "key"),
    CommandSpec::new("xrange", -4, READONLY, Exec::Shard(xrange))
        .keys(KEY_RO_ACCESS)
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "Returns the messages from a stream within a range of IDs.", "O(N) with N being the number of elements being returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).", "key start:string end:string [COUNT count:integer]")
        .history(&[("6.2.0", "Added exclusive ranges.")]),
    CommandSpec::new("xrevrange", -4, READONLY, Exec::Shard(xrevrange))
        .keys(KEY_RO_ACCESS)
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "Returns the messages from a stream within a range of IDs in reverse order.", "O(N) with N being the number of elements returned. If N is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1).", "key end:string start:string [COUNT count:integer]")
        .history(&[("6.2.0", "Added exclusive ranges.")]),
    CommandSpec::new("xdel", -3, WRITE | FAST | AS_IS, Exec::Shard(xdel))
        .keys(KEY_RW_DELETE)
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "Returns the number of messages after removing them from a stream.", "O(1) for each single item to delete in the stream, regardless of the stream size.", "key ID [ID ...]"),
    CommandSpec::new("xtrim", -4, WRITE, Exec::Shard(xtrim))
        .keys(KEY_RW_DELETE)
        .acl(acl::STREAM)
        .tips(&["nondeterministic_output"])
        .doc("stream", "5.0.0", "Deletes messages from the beginning of a stream.", "O(N), with N being the number of evicted entries. Constant times are very small however, since entries are organized in macro nodes containing multiple entries that can be released with a single deallocation.", "key <<MAXLEN | MINID> [= | ~] threshold [LIMIT count:integer]>")
        .history(&[("6.2.0", "Added the `MINID` trimming strategy and the `LIMIT` option.")]),
    CommandSpec::new("xread", -4, BLOCKING | READONLY, Exec::Shard(xread))
        .blocks(TimeoutAt::AfterBlock, Waits::Entries)
        .keys(XREAD_KEYS)
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "Returns messages from multiple streams with IDs greater than the ones requested. Blocks until a message is available otherwise.", "", "[COUNT count:integer] [BLOCK milliseconds:integer] STREAMS key [key ...] ID [ID ...]"),
    CommandSpec::new("xreadgroup", -7, BLOCKING | WRITE, Exec::Shard(xreadgroup))
        .blocks(TimeoutAt::AfterBlock, Waits::GroupEntries)
        .keys(XREADGROUP_KEYS)
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "Returns new or historical messages from a stream for a consumer in a group. Blocks until a message is available otherwise.", "For each stream mentioned: O(M) with M being the number of elements returned. If M is constant (e.g. always asking for the first 10 elements with COUNT), you can consider it O(1). On the other side when XREADGROUP blocks, XADD will pay the O(N) time in order to serve the N clients blocked on the stream getting new data.", "GROUP group consumer [COUNT count:integer] [BLOCK milliseconds:integer] [NOACK] STREAMS key [key ...] ID [ID ...]"),
    CommandSpec::container("xgroup", XGROUP_SUBCOMMANDS)
        .doc("stream", "5.0.0", "A container for consumer groups commands.", "Depends on subcommand.", ""),
    CommandSpec::new("xack", -4, WRITE | FAST | AS_IS, Exec::Shard(xack))
        .keys(KEY_RW_UPDATE)
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "Returns the number of messages that were successfully acknowledged by the consumer group member of a stream.", "O(1) for each message ID processed.", "key group ID [ID ...]"),
    CommandSpec::new("xpending", -3, READONLY, Exec::Shard(xpending))
        .keys(KEY_RO_ACCESS)
        .acl(acl::STREAM)
        .tips(&["nondeterministic_output"])
        .doc("stream", "5.0.0", "Returns the information and entries from a stream consumer group's pending entries list.", "O(N) with N being the number of elements returned, so asking for a small fixed number of entries per call is O(1). O(M), where M is the total number of entries scanned when used with the IDLE filter. When the command returns just the summary and the list of consumers is small, it runs in O(1) time; otherwise, an additional O(N) time for iterating every consumer.", "key group [[IDLE min-idle-time:integer] start:string end:string count:integer [consumer]]")
        .history(&[("6.2.0", "Added the `IDLE` option and exclusive range intervals.")]),
    CommandSpec::new("xclaim", -6, WRITE | FAST, Exec::Shard(xclaim))
        .keys(KEY_RW_UPDATE)
        .acl(acl::STREAM)
        .tips(&["nondeterministic_output"])
        .doc("stream", "5.0.0", "Changes, or acquires, ownership of a message in a consumer group, as if the message was delivered a consumer group member.", "O(log N) with N being the number of messages in the PEL of the consumer group.", "key group consumer min-idle-time ID [ID ...] [IDLE ms:integer] [TIME unix-time-milliseconds:unix-time] [RETRYCOUNT count:integer] [FORCE] [JUSTID] [LASTID lastid]"),
    CommandSpec::new("xautoclaim", -6, WRITE | FAST, Exec::Shard(xautoclaim))
        .keys(KEY_RW_DELETE)
        .acl(acl::STREAM)
        .tips(&["nondeterministic_output"])
        .doc("stream", "6.2.0", "Changes, or acquires, ownership of messages in a consumer group, as if the messages were delivered to as consumer group member.", "O(1) if COUNT is small.", "key group consumer min-idle-time start:string [COUNT count:integer] [JUSTID]")
        .history(&[("7.0.0", "Added an element to the reply array, containing deleted entries the command cleared from the PEL")]),
    CommandSpec::container("xinfo", XINFO_SUBCOMMANDS)
        .doc("stream", "5.0.0", "A container for stream introspection commands.", "Depends on subcommand.", ""),
    CommandSpec::new("xsetid", -3, WRITE | DENYOOM | FAST, Exec::Shard(xsetid))
        .keys(KEY_RW_UPDATE)
        .acl(acl::STREAM)
        .doc("stream", "5.0.0", "An internal command for replicating stream values.", "O(1)", "key last-id [ENTRIESADDED entries-added:integer] [MAXDELETEDID max-deleted-id]")
        .history(&[("7.0.0", "Added the `entries_added` and `max_deleted_entry_id` arguments.")]),
];

// ---- Errors -----------------------------------------------------------------

const INVALID_ID: CmdError =
    CmdError::new("ERR Invalid stream ID specified as stream command argument");
const ID_TOO_SMALL: CmdError = CmdError::new(
    "ERR The ID specified in XADD is equal or smaller than the target stream top item",
);
const TOO_LARGE: CmdError = CmdError::new("ERR Elements are too large to be stored");
const BAD_START: CmdError = CmdError::new("ERR invalid start ID for the interval");
const BAD_END: CmdError = CmdError::new("ERR invalid end ID for the interval");
const NO_SUCH_KEY: CmdError = CmdError::new("ERR no such key");

/// `NOGROUP No such key '…' or consumer group '…'` with Redis's suffix.
fn no_key_or_group(key: &[u8], group: &[u8], suffix: &str) -> CmdError {
    CmdError::owned(format!(
        "NOGROUP No such key '{}' or consumer group '{}'{suffix}",
        String::from_utf8_lossy(key),
        String::from_utf8_lossy(group)
    ))
}

/// `NOGROUP No such consumer group '…' for key name '…'`.
fn no_group(group: &[u8], key: &[u8]) -> CmdError {
    CmdError::owned(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        String::from_utf8_lossy(group),
        String::from_utf8_lossy(key)
    ))
}

/// Redis's `addReplySubcommandSyntaxError`.
fn subcommand_syntax(args: &[Bytes]) -> CmdError {
    let sub = args.get(1).map_or(&b""[..], |a| &a[..]);
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {} HELP.",
        String::from_utf8_lossy(&sub[..sub.len().min(128)]),
        String::from_utf8_lossy(&args[0]).to_ascii_uppercase()
    ))
}

fn strict_id(arg: &[u8]) -> Result<StreamId, CmdError> {
    st::parse_strict(arg, 0).map_err(|_| INVALID_ID)
}

/// A range's start: `(` makes it exclusive (the next id).
fn start_bound(arg: &[u8]) -> Result<StreamId, CmdError> {
    match st::parse_interval(arg, 0).map_err(|_| INVALID_ID)? {
        (id, true) => id.next().ok_or(BAD_START),
        (id, false) => Ok(id),
    }
}

/// A range's end: `(` makes it exclusive (the previous id).
fn end_bound(arg: &[u8]) -> Result<StreamId, CmdError> {
    match st::parse_interval(arg, u64::MAX).map_err(|_| INVALID_ID)? {
        (id, true) => id.prev().ok_or(BAD_END),
        (id, false) => Ok(id),
    }
}

// ---- Lookups and replies ----------------------------------------------------

/// The stream at `key` for reading (`lookupKeyRead` + `checkType`).
fn read_stream<'a>(ks: &'a mut KeyspaceView, key: &[u8]) -> Result<Option<&'a Stream>, CmdError> {
    match ks.read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Stream(s) => Ok(Some(s)),
            _ => Err(WRONG_TYPE),
        },
    }
}

/// The stream at `key` for writing (`lookupKeyWrite` + `checkType`).
fn write_stream<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Option<Updater<'v, Stream>>, CmdError> {
    ks.write_as(key, typed)
}

/// The stream at `key`, created empty when missing (`created` says so).
fn stream_or_create<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
    created: bool,
) -> Result<Updater<'v, Stream>, CmdError> {
    if created {
        ks.create_as(key, Value::Stream(Box::default()), typed)
    } else {
        write_stream(ks, key)?.ok_or(WRONG_TYPE)
    }
}

fn reply_id(out: &mut ReplyWriter, id: StreamId) {
    let mut buf = [0u8; 41];
    out.bulk(id.format(&mut buf));
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

/// `[id, [field, value, …]]`.
fn reply_entry<'a>(
    out: &mut ReplyWriter,
    id: StreamId,
    len: usize,
    pairs: impl Iterator<Item = (Item<'a>, Item<'a>)>,
) {
    out.array(2);
    reply_id(out, id);
    out.array(2 * len);
    for (field, value) in pairs {
        reply_item(out, field);
        reply_item(out, value);
    }
}

/// A copied entry; one whose stream entry is gone is `[id, nil]`.
fn reply_copy(out: &mut ReplyWriter, entry: &EntryCopy) {
    if entry.is_missing() {
        out.array(2);
        reply_id(out, entry.id);
        out.null_array();
    } else {
        reply_entry(out, entry.id, entry.len(), entry.pairs());
    }
}

fn reply_copies(out: &mut ReplyWriter, entries: &[EntryCopy]) {
    out.array(entries.len());
    for entry in entries {
        reply_copy(out, entry);
    }
}

/// Entries of `stream` from `start` to `end` (backwards with `rev`), at most
/// `count` (0: all), as an array.
fn reply_range(
    out: &mut ReplyWriter,
    stream: &Stream,
    start: StreamId,
    end: StreamId,
    count: usize,
    rev: bool,
) {
    let limit = if count == 0 { usize::MAX } else { count };
    let entries: Vec<_> = stream.range(start, end, rev).take(limit).collect();
    out.array(entries.len());
    for e in entries {
        reply_entry(out, e.id(), e.len(), e.pairs());
    }
}

/// The first or last entry, or nil (XINFO STREAM).
fn reply_edge_entry(out: &mut ReplyWriter, stream: &Stream, last: bool) {
    match stream.range(StreamId::MIN, StreamId::MAX, last).next() {
        Some(e) => reply_entry(out, e.id(), e.len(), e.pairs()),
        None => out.null(),
    }
}

fn reply_opt_int(out: &mut ReplyWriter, n: Option<i64>) {
    match n {
        Some(n) => out.int(n),
        None => out.null(),
    }
}

// ---- XADD and XTRIM -----------------------------------------------------------

/// What XADD and XTRIM read from their options
/// (`streamParseAddOrTrimArgsOrReply`).
#[derive(Default)]
struct AddTrimArgs {
    trim: Option<Trim>,
    /// XADD's explicit id and whether its sequence was given.
    id: Option<(StreamId, bool)>,
    no_mkstream: bool,
    /// Where the id is (XADD) or the end of the arguments.
    id_pos: usize,
}

fn parse_add_or_trim(args: &[Bytes], xadd: bool, limits: &Limits) -> Result<AddTrimArgs, CmdError> {
    let mut parsed = AddTrimArgs::default();
    let mut approx = false;
    let mut limit: i64 = 0;
    let mut limit_given = false;
    let mut to: Option<TrimTo> = None;
    let mut i = 2;
    while i < args.len() {
        let more = args.len() - 1 - i;
        let opt = &args[i][..];
        if xadd && opt == b"*" {
            break;
        } else if (is(opt, "maxlen") || is(opt, "minid")) && more > 0 {
            if to.is_some() {
                return Err(CmdError::new(
                    "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
                ));
            }
            approx = false;
            let next = &args[i + 1][..];
            if more >= 2 && next == b"~" {
                approx = true;
                i += 1;
            } else if more >= 2 && next == b"=" {
                i += 1;
            }
            if is(opt, "maxlen") {
                let max = args::int(&args[i + 1])?;
                if max < 0 {
                    return Err(CmdError::new("ERR The MAXLEN argument must be >= 0."));
                }
                to = Some(TrimTo::MaxLen(max as u64));
            } else {
                to = Some(TrimTo::MinId(strict_id(&args[i + 1])?));
            }
            i += 1;
        } else if is(opt, "limit") && more > 0 {
            limit = args::int(&args[i + 1])?;
            if limit < 0 {
                return Err(CmdError::new("ERR The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 1;
        } else if xadd && is(opt, "nomkstream") {
            parsed.no_mkstream = true;
        } else if xadd {
            parsed.id = Some(st::parse_for_add(opt).map_err(|_| INVALID_ID)?);
            break;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    parsed.id_pos = i;
    if limit != 0 && to.is_none() {
        return Err(CmdError::new(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    let Some(to) = to else {
        if !xadd {
            return Err(CmdError::new(
                "ERR syntax error, XTRIM must be called with a trimming strategy",
            ));
        }
        return Ok(parsed);
    };
    if limit_given && !approx {
        return Err(CmdError::new(
            "ERR syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    if !limit_given {
        // Approximate trimming does at most 100 nodes' worth of work.
        limit = if approx {
            match 100i64.saturating_mul(limits.stream_node_max_entries as i64) {
                n if n <= 0 => 10_000,
                n => n.min(1_000_000),
            }
        } else {
            0
        };
    }
    parsed.trim = Some(Trim { to, approx, limit: limit as u64 });
    Ok(parsed)
}

fn xadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let limits = ctx.ks.state.settings.limits;
    let parsed = parse_add_or_trim(args, true, &limits)?;
    let fields_at = parsed.id_pos + 1;
    if args.len() < fields_at + 2 || (args.len() - fields_at) % 2 == 1 {
        return Err(CmdError::wrong_args("xadd"));
    }
    let add_id = match parsed.id {
        Some((id, true)) if id.is_zero() => {
            return Err(CmdError::new("ERR The ID specified in XADD must be greater than 0-0"))
        }
        Some((id, true)) => AddId::Exact(id),
        Some((id, false)) => AddId::Ms(id.ms),
        None => AddId::Auto,
    };
    let key = &args[1];
    let pairs: Vec<&[u8]> = args[fields_at..].iter().map(|a| &a[..]).collect();
    let now = ctx.ks.now_ms;
    let exists = write_stream(&mut ctx.ks, key)?.is_some();
    if !exists && parsed.no_mkstream {
        ctx.out.null();
        return Ok(());
    }
    let mut updater = stream_or_create(&mut ctx.ks, key, !exists)?;
    if updater.last_id() == StreamId::MAX {
        return Err(CmdError::new(
            "ERR The stream has exhausted the last possible ID, unable to add more items",
        ));
    }
    let stream = updater.update(NotifyClass::Stream, "xadd");
    let id = match stream.append(add_id, &pairs, now, &limits) {
        Ok(id) => id,
        Err(e) => {
            updater.unchanged();
            drop(updater);
            // A stream this command created stays only if something went in.
            if !exists {
                ctx.ks.discard(key);
            }
            return Err(match e {
                AddError::IdTooSmall => ID_TOO_SMALL,
                AddError::TooLarge => TOO_LARGE,
            });
        }
    };
    if parsed.trim.is_some_and(|trim| stream.trim(&trim) > 0) {
        updater.announce(NotifyClass::Stream, "xtrim");
    }
    drop(updater);
    reply_id(&mut ctx.out, id);
    Ok(())
}

fn xtrim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let limits = ctx.ks.state.settings.limits;
    let parsed = parse_add_or_trim(args, false, &limits)?;
    let Some(trim) = parsed.trim else {
        return Err(SYNTAX);
    };
    let key = &args[1];
    let Some(mut stream) = write_stream(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let deleted = stream.update(NotifyClass::Stream, "xtrim").trim(&trim);
    if deleted == 0 {
        stream.unchanged();
    }
    drop(stream);
    ctx.out.int(deleted as i64);
    Ok(())
}

// ---- XLEN, XRANGE, XREVRANGE, XDEL ------------------------------------------

fn xlen(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let len = read_stream(&mut ctx.ks, &args[1])?.map_or(0, Stream::len);
    ctx.out.int(len as i64);
    Ok(())
}

fn xrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_generic(ctx, args, false)
}

fn xrevrange(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    range_generic(ctx, args, true)
}

/// XRANGE and XREVRANGE (`xrangeGenericCommand`).
fn range_generic(ctx: &mut Ctx, args: &[Bytes], rev: bool) -> CmdResult {
    let (start_arg, end_arg) = if rev { (&args[3], &args[2]) } else { (&args[2], &args[3]) };
    let start = start_bound(start_arg)?;
    let end = end_bound(end_arg)?;
    let mut count: i64 = -1;
    let mut j = 4;
    while j < args.len() {
        if is(&args[j], "count") && j + 1 < args.len() {
            count = args::int(&args[j + 1])?.max(0);
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    let Some(stream) = read_stream(&mut ctx.ks, &args[1])? else {
        ctx.out.array(0);
        return Ok(());
    };
    if count == 0 {
        ctx.out.null_array();
        return Ok(());
    }
    let count = usize::try_from(count).unwrap_or(0);
    reply_range(&mut ctx.out, stream, start, end, count, rev);
    Ok(())
}

fn xdel(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let Some(mut stream) = write_stream(&mut ctx.ks, key)? else {
        ctx.out.int(0);
        return Ok(());
    };
    let ids = args[2..].iter().map(|a| strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let deleted = stream.update(NotifyClass::Stream, "xdel").delete(&ids);
    if deleted == 0 {
        stream.unchanged();
    }
    drop(stream);
    ctx.out.int(deleted as i64);
    Ok(())
}

// ---- XREAD and XREADGROUP -------------------------------------------------------

/// XREAD's and XREADGROUP's options (`xreadCommand`).
struct ReadArgs<'a> {
    /// Most entries per stream (0: no limit).
    count: usize,
    noack: bool,
    group: Option<(&'a [u8], &'a [u8])>,
    keys: &'a [Bytes],
    ids: &'a [Bytes],
}

fn parse_read(args: &[Bytes], group_form: bool, script: bool) -> Result<ReadArgs<'_>, CmdError> {
    let mut read = ReadArgs { count: 0, noack: false, group: None, keys: &[], ids: &[] };
    let mut streams_at = None;
    let mut i = 1;
    while i < args.len() {
        let more = args.len() - i - 1;
        let opt = &args[i][..];
        if is(opt, "block") && more > 0 {
            // A script cannot wait (Redis's special case for Lua).
            if script {
                return Err(CmdError::owned(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(&args[0])
                )));
            }
            i += 1;
            let ms = args::int_or(
                &args[i],
                CmdError::new("ERR timeout is not an integer or out of range"),
            )?;
            // Checked as Redis checks it; reads do not block yet (see the
            // module doc), so the timeout itself is not kept.
            if ms < 0 {
                return Err(CmdError::new("ERR timeout is negative"));
            }
        } else if is(opt, "count") && more > 0 {
            i += 1;
            read.count = usize::try_from(args::int(&args[i])?).unwrap_or(0);
        } else if is(opt, "streams") && more > 0 {
            let rest = args.len() - (i + 1);
            if !rest.is_multiple_of(2) {
                return Err(CmdError::new(
                    "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.",
                ));
            }
            streams_at = Some((i + 1, rest / 2));
            break;
        } else if is(opt, "group") && more >= 2 {
            if !group_form {
                return Err(CmdError::new(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            read.group = Some((&args[i + 1], &args[i + 2]));
            i += 2;
        } else if is(opt, "noack") {
            if !group_form {
                return Err(CmdError::new(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD instead.",
                ));
            }
            read.noack = true;
        } else {
            return Err(SYNTAX);
        }
        i += 1;
    }
    let Some((at, n)) = streams_at else {
        return Err(SYNTAX);
    };
    if group_form && read.group.is_none() {
        return Err(CmdError::new("ERR Missing GROUP option for XREADGROUP"));
    }
    read.keys = &args[at..at + n];
    read.ids = &args[at + n..];
    Ok(read)
}

/// Where one stream is read from.
#[derive(Clone, Copy)]
enum ReadFrom {
    /// XREAD: entries after this id.
    After(StreamId),
    /// XREADGROUP: new entries (`>`) or the consumer's history.
    Group(GroupFrom),
}

/// Resolves each stream's id argument, checking types and groups first as
/// Redis does (all before anything is read).
fn resolve_ids(ctx: &mut Ctx, read: &ReadArgs) -> Result<Vec<ReadFrom>, CmdError> {
    let mut from = Vec::with_capacity(read.keys.len());
    for (key, arg) in read.keys.iter().zip(read.ids) {
        let stream = read_stream(&mut ctx.ks, key)?;
        if let Some((group, _)) = read.group {
            if stream.and_then(|s| s.group(group)).is_none() {
                return Err(no_key_or_group(key, group, " in XREADGROUP with GROUP option"));
            }
        }
        let grouped = read.group.is_some();
        from.push(match &arg[..] {
            b"$" if grouped => {
                return Err(CmdError::new(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.",
                ))
            }
            b"$" => ReadFrom::After(stream.map_or(StreamId::MIN, Stream::last_id)),
            b">" if grouped => ReadFrom::Group(GroupFrom::New),
            b">" => {
                return Err(CmdError::new(
                    "ERR The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.",
                ))
            }
            other => {
                let id = strict_id(other)?;
                match (grouped, id.next()) {
                    (false, _) => ReadFrom::After(id),
                    // The largest id means `>` (Redis marks `>` with it).
                    (true, None) => ReadFrom::Group(GroupFrom::New),
                    (true, Some(after)) => ReadFrom::Group(GroupFrom::History(after)),
                }
            }
        });
    }
    Ok(from)
}

fn xread(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_generic(ctx, args, false)
}

fn xreadgroup(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    read_generic(ctx, args, true)
}

/// XREAD and XREADGROUP: serves every stream that has something, replying
/// `[[key, entries], …]` (a map in RESP3), or the null array when none has.
fn read_generic(ctx: &mut Ctx, args: &[Bytes], group_form: bool) -> CmdResult {
    let read = parse_read(args, group_form, ctx.client.script)?;
    let from = resolve_ids(ctx, &read)?;
    let mut served: Vec<(&Bytes, Vec<EntryCopy>)> = Vec::new();
    for (key, from) in read.keys.iter().zip(from) {
        let entries = match from {
            ReadFrom::After(after) => read_after(ctx, key, after, read.count)?,
            ReadFrom::Group(from) => read_group(ctx, key, &read, from)?,
        };
        if let Some(entries) = entries {
            served.push((key, entries));
        }
    }
    if served.is_empty() {
        // Nothing to serve: with BLOCK the client waits.
        ctx.ks.found_nothing();
        ctx.out.null_array();
        return Ok(());
    }
    let resp3 = ctx.out.is_resp3();
    if resp3 {
        ctx.out.map(served.len());
    } else {
        ctx.out.array(served.len());
    }
    for (key, entries) in &served {
        if !resp3 {
            ctx.out.array(2);
        }
        ctx.out.bulk(key);
        reply_copies(&mut ctx.out, entries);
    }
    Ok(())
}

/// XREAD of one stream: its entries after `after`, if it has any.
fn read_after(
    ctx: &mut Ctx,
    key: &[u8],
    after: StreamId,
    count: usize,
) -> Result<Option<Vec<EntryCopy>>, CmdError> {
    let Some(stream) = read_stream(&mut ctx.ks, key)? else {
        return Ok(None);
    };
    let Some(start) = after.next() else {
        return Ok(None);
    };
    if stream.last_valid_id().is_none_or(|top| top <= after) {
        return Ok(None);
    }
    let limit = if count == 0 { usize::MAX } else { count };
    Ok(Some(stream.range(start, StreamId::MAX, false).take(limit).map(|e| e.to_copy()).collect()))
}

/// XREADGROUP of one stream, firing the funnel for what it changed.
fn read_group(
    ctx: &mut Ctx,
    key: &[u8],
    read: &ReadArgs,
    from: GroupFrom,
) -> Result<Option<Vec<EntryCopy>>, CmdError> {
    let Some((group, consumer)) = read.group else {
        return Ok(None);
    };
    let now = ctx.ks.now_ms as i64;
    let Some(mut stream) = write_stream(&mut ctx.ks, key)? else {
        return Ok(None);
    };
    let done = stream
        .update(NotifyClass::Silent, "xreadgroup")
        .read_group(group, consumer, from, read.count, read.noack, now);
    stream.unchanged();
    let Some(done) = done else { return Ok(None) };
    announce_claimed(&mut stream, done.consumer_created, !done.entries.is_empty(), "xreadgroup");
    Ok(Some(done.entries))
}

// ---- XGROUP ---------------------------------------------------------------------

/// CREATE's and SETID's options from the 6th argument on: MKSTREAM (CREATE
/// only) and ENTRIESREAD.
fn group_options(args: &[Bytes], create: bool) -> Result<(bool, i64), CmdError> {
    let mut mkstream = false;
    let mut entries_read = st::ENTRIES_READ_INVALID;
    let mut i = 5;
    while i < args.len() {
        if create && is(&args[i], "mkstream") {
            mkstream = true;
            i += 1;
        } else if is(&args[i], "entriesread") && i + 1 < args.len() {
            entries_read = args::int(&args[i + 1])?;
            if entries_read < 0 && entries_read != st::ENTRIES_READ_INVALID {
                return Err(CmdError::new("ERR value for ENTRIESREAD must be positive or -1"));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax(args));
        }
    }
    Ok((mkstream, entries_read))
}

const KEY_REQUIRED: CmdError = CmdError::new(
    "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.",
);

/// The stream an XGROUP subcommand works on, which must exist; with
/// `need_group`, the group too.
fn group_stream<'v>(
    ks: &'v mut KeyspaceView,
    args: &'v [Bytes],
    need_group: bool,
) -> Result<Updater<'v, Stream>, CmdError> {
    let (key, group) = (&args[2], &args[3]);
    let stream = write_stream(ks, key)?.ok_or(KEY_REQUIRED)?;
    if need_group && stream.group(group).is_none() {
        return Err(no_group(group, key));
    }
    Ok(stream)
}

fn xgroup_create(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (mkstream, entries_read) = group_options(args, true)?;
    let (key, group) = (&args[2], &args[3]);
    let exists = write_stream(&mut ctx.ks, key)?.is_some();
    if !exists && !mkstream {
        return Err(KEY_REQUIRED);
    }
    if args.len() > 8 {
        return Err(subcommand_syntax(args));
    }
    let id = match &args[4][..] {
        b"$" => write_stream(&mut ctx.ks, key)?.map_or(StreamId::MIN, |s| s.last_id()),
        other => strict_id(other)?,
    };
    let mut stream = stream_or_create(&mut ctx.ks, key, !exists)?;
    if !stream.update(NotifyClass::Stream, "xgroup-create").create_group(group, id, entries_read) {
        stream.unchanged();
        return Err(CmdError::new("BUSYGROUP Consumer Group name already exists"));
    }
    drop(stream);
    ctx.out.ok();
    Ok(())
}

fn xgroup_setid(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (_, entries_read) = group_options(args, false)?;
    let mut stream = group_stream(&mut ctx.ks, args, true)?;
    if args.len() != 5 && args.len() != 7 {
        return Err(subcommand_syntax(args));
    }
    let id = match &args[4][..] {
        b"$" => stream.last_id(),
        other => st::parse(other, 0).map_err(|_| INVALID_ID)?,
    };
    if let Some(g) = stream.update(NotifyClass::Stream, "xgroup-setid").group_mut(&args[3]) {
        g.last_id = id;
        g.entries_read = entries_read;
    }
    drop(stream);
    ctx.out.ok();
    Ok(())
}

fn xgroup_destroy(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut stream = group_stream(&mut ctx.ks, args, false)?;
    let destroyed = stream.update(NotifyClass::Stream, "xgroup-destroy").destroy_group(&args[3]);
    if !destroyed {
        stream.unchanged();
    }
    drop(stream);
    ctx.out.int(destroyed as i64);
    Ok(())
}

fn xgroup_createconsumer(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let now = ctx.ks.now_ms as i64;
    let mut stream = group_stream(&mut ctx.ks, args, true)?;
    let created = stream
        .update(NotifyClass::Stream, "xgroup-createconsumer")
        .group_mut(&args[3])
        .is_some_and(|g| g.create_consumer(&args[4], now));
    if !created {
        stream.unchanged();
    }
    drop(stream);
    ctx.out.int(created as i64);
    Ok(())
}

fn xgroup_delconsumer(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut stream = group_stream(&mut ctx.ks, args, true)?;
    let pending = stream
        .update(NotifyClass::Stream, "xgroup-delconsumer")
        .group_mut(&args[3])
        .and_then(|g| g.delete_consumer(&args[4]));
    if pending.is_none() {
        stream.unchanged();
    }
    drop(stream);
    ctx.out.int(pending.unwrap_or(0) as i64);
    Ok(())
}

fn xgroup_help(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    const LINES: &[&str] = &[
        "CREATE <key> <groupname> <id|$> [option]",
        "    Create a new consumer group. Options are:",
        "    * MKSTREAM",
        "      Create the empty stream if it does not exist.",
        "    * ENTRIESREAD entries_read",
        "      Set the group's entries_read counter (internal use).",
        "CREATECONSUMER <key> <groupname> <consumer>",
        "    Create a new consumer in the specified group.",
        "DELCONSUMER <key> <groupname> <consumer>",
        "    Remove the specified consumer.",
        "DESTROY <key> <groupname>",
        "    Remove the specified group.",
        "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
        "    Set the current group ID and entries_read counter.",
    ];
    reply_help(ctx, &args[0], LINES);
    Ok(())
}

// ---- XSETID ---------------------------------------------------------------------

fn xsetid(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let id = strict_id(&args[2])?;
    let mut entries_added = None;
    let mut max_deleted = None;
    let mut i = 3;
    while i < args.len() {
        let more = args.len() - 1 - i;
        if is(&args[i], "entriesadded") && more > 0 {
            let n = args::int(&args[i + 1])?;
            if n < 0 {
                return Err(CmdError::new("ERR entries_added must be positive"));
            }
            entries_added = Some(n as u64);
        } else if is(&args[i], "maxdeletedid") && more > 0 {
            let max = strict_id(&args[i + 1])?;
            if id < max {
                return Err(CmdError::new(
                    "ERR The ID specified in XSETID is smaller than the provided max_deleted_entry_id",
                ));
            }
            max_deleted = Some(max);
        } else {
            return Err(SYNTAX);
        }
        i += 2;
    }
    let key = &args[1];
    let mut stream = write_stream(&mut ctx.ks, key)?.ok_or(NO_SUCH_KEY)?;
    let set =
        stream.update(NotifyClass::Stream, "xsetid").set_last_id(id, entries_added, max_deleted);
    if set.is_err() {
        stream.unchanged();
    }
    drop(stream);
    set.map_err(|e| match e {
        SetIdError::SmallerThanTop => CmdError::new(
            "ERR The ID specified in XSETID is smaller than the target stream top item",
        ),
        SetIdError::EntriesAddedTooSmall => CmdError::new(
            "ERR The entries_added specified in XSETID is smaller than the target stream length",
        ),
    })?;
    ctx.out.ok();
    Ok(())
}

// ---- XACK and XPENDING ------------------------------------------------------------

fn xack(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, group) = (&args[1], &args[2]);
    let stream = write_stream(&mut ctx.ks, key)?;
    // All ids are checked before any is acknowledged, even with no group.
    let ids = args[3..].iter().map(|a| strict_id(a)).collect::<Result<Vec<_>, _>>()?;
    let acked = match stream {
        Some(mut stream) if stream.group(group).is_some() => {
            let g = stream.update(NotifyClass::Silent, "xack").group_mut(group);
            let acked = g.map_or(0, |g| ids.into_iter().filter(|id| g.ack(*id)).count());
            if acked == 0 {
                stream.unchanged();
            }
            acked
        }
        _ => 0,
    };
    ctx.out.int(acked as i64);
    Ok(())
}

/// XPENDING's extended form.
struct PendingRange<'a> {
    min_idle: i64,
    start: StreamId,
    end: StreamId,
    count: usize,
    consumer: Option<&'a [u8]>,
}

fn parse_pending_range(args: &[Bytes]) -> Result<Option<PendingRange<'_>>, CmdError> {
    if args.len() == 3 {
        return Ok(None);
    }
    if args.len() < 6 || args.len() > 9 {
        return Err(SYNTAX);
    }
    let mut at = 3;
    let mut min_idle = 0;
    if is(&args[3], "idle") {
        min_idle = args::int(&args[4])?;
        if args.len() < 8 {
            return Err(SYNTAX);
        }
        at += 2;
    }
    let count = usize::try_from(args::int(&args[at + 2])?.max(0)).unwrap_or(0);
    let start = start_bound(&args[at])?;
    let end = end_bound(&args[at + 1])?;
    let consumer = args.get(at + 3).map(|c| &c[..]);
    Ok(Some(PendingRange { min_idle, start, end, count, consumer }))
}

fn xpending(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let range = parse_pending_range(args)?;
    let (key, group) = (&args[1], &args[2]);
    let now = ctx.ks.now_ms as i64;
    let stream = read_stream(&mut ctx.ks, key)?;
    let Some(g) = stream.and_then(|s| s.group(group)) else {
        return Err(no_key_or_group(key, group, ""));
    };
    let out = &mut ctx.out;
    let Some(range) = range else {
        out.array(4);
        out.int(g.pending_len() as i64);
        let Some((first, last)) = g.pending_bounds() else {
            out.null();
            out.null();
            out.null_array();
            return Ok(());
        };
        reply_id(out, first);
        reply_id(out, last);
        let owners: Vec<_> = g.consumers().filter(|(_, c)| c.pending_len() > 0).collect();
        out.array(owners.len());
        for (name, c) in owners {
            out.array(2);
            out.bulk(name);
            out.bulk_int(c.pending_len() as i64);
        }
        return Ok(());
    };
    let ids: Box<dyn Iterator<Item = StreamId>> = match range.consumer {
        Some(name) => match g.consumer(name) {
            Some(c) => Box::new(c.pending_from(range.start)),
            None => {
                out.array(0);
                return Ok(());
            }
        },
        None => Box::new(g.pending_from(range.start).map(|(id, _)| id)),
    };
    let mut rows = Vec::new();
    for id in ids.take_while(|id| *id <= range.end) {
        if rows.len() >= range.count {
            break;
        }
        let Some(nack) = g.nack(id) else { continue };
        let idle = now.wrapping_sub(nack.delivery_time);
        if range.min_idle != 0 && idle < range.min_idle {
            continue;
        }
        rows.push((id, nack.consumer(), idle.max(0), nack.delivery_count));
    }
    out.array(rows.len());
    for (id, consumer, idle, deliveries) in rows {
        out.array(4);
        reply_id(out, id);
        out.bulk(consumer);
        out.int(idle);
        out.int(deliveries as i64);
    }
    Ok(())
}

// ---- XCLAIM and XAUTOCLAIM ----------------------------------------------------------

/// XCLAIM's ids and options (`xclaimCommand`): ids until one does not
/// parse, then options.
fn parse_claim(args: &[Bytes], now: i64) -> Result<(Vec<StreamId>, ClaimOptions), CmdError> {
    let min_idle =
        args::int_or(&args[4], CmdError::new("ERR Invalid min-idle-time argument for XCLAIM"))?;
    let mut j = 5;
    let mut ids = Vec::new();
    while j < args.len() {
        let Ok(id) = st::parse_strict(&args[j], 0) else { break };
        ids.push(id);
        j += 1;
    }
    let mut opts = ClaimOptions { min_idle: min_idle.max(0), ..ClaimOptions::default() };
    let mut delivery_time: Option<i64> = None;
    while j < args.len() {
        let more = args.len() - 1 - j;
        let opt = &args[j][..];
        let value_error =
            |what: &str| CmdError::owned(format!("ERR Invalid {what} option argument for XCLAIM"));
        if is(opt, "force") {
            opts.force = true;
        } else if is(opt, "justid") {
            opts.just_id = true;
        } else if is(opt, "idle") && more > 0 {
            j += 1;
            let idle = args::int_or(&args[j], value_error("IDLE"))?;
            delivery_time = Some(now.wrapping_sub(idle));
        } else if is(opt, "time") && more > 0 {
            j += 1;
            delivery_time = Some(args::int_or(&args[j], value_error("TIME"))?);
        } else if is(opt, "retrycount") && more > 0 {
            j += 1;
            let n = args::int_or(&args[j], value_error("RETRYCOUNT"))?;
            opts.retry_count = u64::try_from(n).ok();
        } else if is(opt, "lastid") && more > 0 {
            j += 1;
            opts.last_id = Some(strict_id(&args[j])?);
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                String::from_utf8_lossy(opt)
            )));
        }
        j += 1;
    }
    opts.delivery_time = match delivery_time {
        Some(t) if (0..=now).contains(&t) => t,
        _ => now,
    };
    Ok((ids, opts))
}

fn xclaim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let now = ctx.ks.now_ms as i64;
    let exists = read_stream(&mut ctx.ks, key)?.is_some_and(|s| s.group(group).is_some());
    if !exists {
        return Err(no_key_or_group(key, group, ""));
    }
    let (ids, opts) = parse_claim(args, now)?;
    let Some(mut stream) = write_stream(&mut ctx.ks, key)? else {
        return Err(no_key_or_group(key, group, ""));
    };
    let done =
        stream.update(NotifyClass::Silent, "xclaim").claim(group, consumer, &ids, &opts, now);
    stream.unchanged();
    let Some(done) = done else {
        return Err(no_key_or_group(key, group, ""));
    };
    announce_claimed(&mut stream, done.consumer_created, done.changed, "xclaim");
    drop(stream);
    reply_claimed(&mut ctx.out, &done.entries, opts.just_id);
    Ok(())
}

/// What a group read or claim announces: the consumer it created, then
/// (silently, as Redis) the entries it moved.
fn announce_claimed(
    stream: &mut Updater<'_, Stream>,
    consumer_created: bool,
    moved: bool,
    event: &'static str,
) {
    if consumer_created {
        stream.announce(NotifyClass::Stream, "xgroup-createconsumer");
    }
    if moved {
        stream.announce(NotifyClass::Silent, event);
    }
}

/// Claimed entries, or only their ids with JUSTID.
fn reply_claimed(out: &mut ReplyWriter, entries: &[EntryCopy], just_id: bool) {
    out.array(entries.len());
    for entry in entries {
        if just_id {
            reply_id(out, entry.id);
        } else {
            reply_copy(out, entry);
        }
    }
}

fn xautoclaim(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, group, consumer) = (&args[1], &args[2], &args[3]);
    let min_idle =
        args::int_or(&args[4], CmdError::new("ERR Invalid min-idle-time argument for XAUTOCLAIM"))?;
    let start = start_bound(&args[5])?;
    let mut request = AutoClaim { start, count: 100, min_idle: min_idle.max(0), just_id: false };
    let mut j = 6;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "count") && more > 0 {
            const MAX_COUNT: i64 = i64::MAX / 16;
            let bad = CmdError::new("ERR COUNT must be > 0");
            let n = args::int_or(&args[j + 1], bad.clone())?;
            if !(1..=MAX_COUNT).contains(&n) {
                return Err(bad);
            }
            request.count = n as u64;
            j += 1;
        } else if is(&args[j], "justid") {
            request.just_id = true;
        } else {
            return Err(SYNTAX);
        }
        j += 1;
    }
    let now = ctx.ks.now_ms as i64;
    let Some(mut stream) = write_stream(&mut ctx.ks, key)? else {
        return Err(no_key_or_group(key, group, ""));
    };
    let done =
        stream.update(NotifyClass::Silent, "xclaim").autoclaim(group, consumer, &request, now);
    stream.unchanged();
    let Some(done) = done else {
        return Err(no_key_or_group(key, group, ""));
    };
    announce_claimed(&mut stream, done.consumer_created, done.changed, "xclaim");
    drop(stream);
    let out = &mut ctx.out;
    out.array(3);
    reply_id(out, done.cursor);
    reply_claimed(out, &done.entries, request.just_id);
    out.array(done.deleted.len());
    for id in &done.deleted {
        reply_id(out, *id);
    }
    Ok(())
}

// ---- XINFO ------------------------------------------------------------------------

/// The stream an XINFO subcommand describes, which must exist.
fn info_stream<'a>(ks: &'a mut KeyspaceView, key: &[u8]) -> Result<&'a Stream, CmdError> {
    read_stream(ks, key)?.ok_or(NO_SUCH_KEY)
}

fn xinfo_stream(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let options = &args[3..];
    let full = !options.is_empty();
    let mut count: i64 = 10;
    if full {
        if (options.len() != 1 && options.len() != 3) || !is(&options[0], "full") {
            return Err(subcommand_syntax(args));
        }
        if options.len() == 3 {
            if !is(&options[1], "count") {
                return Err(subcommand_syntax(args));
            }
            count = args::int(&options[2])?;
            if count < 0 {
                count = 10;
            }
        }
    }
    let stream = info_stream(&mut ctx.ks, &args[2])?;
    let out = &mut ctx.out;
    out.map(if full { 9 } else { 10 });
    out.bulk(b"length");
    out.int(stream.len() as i64);
    out.bulk(b"radix-tree-keys");
    out.int(stream.node_count() as i64);
    out.bulk(b"radix-tree-nodes");
    out.int(stream.radix_tree_nodes() as i64);
    out.bulk(b"last-generated-id");
    reply_id(out, stream.last_id());
    out.bulk(b"max-deleted-entry-id");
    reply_id(out, stream.max_deleted_id());
    out.bulk(b"entries-added");
    out.int(stream.entries_added() as i64);
    out.bulk(b"recorded-first-entry-id");
    reply_id(out, stream.first_id());
    if !full {
        out.bulk(b"groups");
        out.int(stream.groups_len() as i64);
        out.bulk(b"first-entry");
        reply_edge_entry(out, stream, false);
        out.bulk(b"last-entry");
        reply_edge_entry(out, stream, true);
        return Ok(());
    }
    let count = usize::try_from(count).unwrap_or(0);
    out.bulk(b"entries");
    reply_range(out, stream, StreamId::MIN, StreamId::MAX, count, false);
    out.bulk(b"groups");
    out.array(stream.groups_len());
    for (name, g) in stream.groups() {
        reply_full_group(out, stream, name, g, count);
    }
    Ok(())
}

/// One group of XINFO STREAM FULL, its PEL and consumers cut at `count`
/// entries each (0: all).
fn reply_full_group(
    out: &mut ReplyWriter,
    stream: &Stream,
    name: &[u8],
    g: &st::Group,
    count: usize,
) {
    let limit = if count == 0 { usize::MAX } else { count };
    out.map(7);
    out.bulk(b"name");
    out.bulk(name);
    out.bulk(b"last-delivered-id");
    reply_id(out, g.last_id);
    out.bulk(b"entries-read");
    reply_opt_int(out, g.entries_read());
    out.bulk(b"lag");
    reply_opt_int(out, stream.lag(g));
    out.bulk(b"pel-count");
    out.int(g.pending_len() as i64);
    out.bulk(b"pending");
    let pending: Vec<_> = g.pending_from(StreamId::MIN).take(limit).collect();
    out.array(pending.len());
    for (id, nack) in pending {
        out.array(4);
        reply_id(out, id);
        out.bulk(nack.consumer());
        out.int(nack.delivery_time);
        out.int(nack.delivery_count as i64);
    }
    out.bulk(b"consumers");
    out.array(g.consumers_len());
    for (cname, c) in g.consumers() {
        out.map(4);
        out.bulk(b"name");
        out.bulk(cname);
        out.bulk(b"seen-time");
        out.int(c.seen_time);
        out.bulk(b"pel-count");
        out.int(c.pending_len() as i64);
        out.bulk(b"pending");
        let ids: Vec<_> = c.pending_from(StreamId::MIN).take(limit).collect();
        out.array(ids.len());
        for id in ids {
            let (time, deliveries) =
                g.nack(id).map_or((0, 0), |n| (n.delivery_time, n.delivery_count));
            out.array(3);
            reply_id(out, id);
            out.int(time);
            out.int(deliveries as i64);
        }
    }
}

fn xinfo_groups(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let stream = info_stream(&mut ctx.ks, &args[2])?;
    let out = &mut ctx.out;
    out.array(stream.groups_len());
    for (name, g) in stream.groups() {
        out.map(6);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"consumers");
        out.int(g.consumers_len() as i64);
        out.bulk(b"pending");
        out.int(g.pending_len() as i64);
        out.bulk(b"last-delivered-id");
        reply_id(out, g.last_id);
        out.bulk(b"entries-read");
        reply_opt_int(out, g.entries_read());
        out.bulk(b"lag");
        reply_opt_int(out, stream.lag(g));
    }
    Ok(())
}

fn xinfo_consumers(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let (key, group) = (&args[2], &args[3]);
    let now = ctx.ks.now_ms as i64;
    let stream = info_stream(&mut ctx.ks, key)?;
    let g = stream.group(group).ok_or_else(|| no_group(group, key))?;
    let out = &mut ctx.out;
    out.array(g.consumers_len());
    for (name, c) in g.consumers() {
        // Redis 7.2's fields: `idle` counts from the last command naming the
        // consumer, `inactive` from the last time it was given entries (-1:
        // never).
        out.map(4);
        out.bulk(b"name");
        out.bulk(name);
        out.bulk(b"pending");
        out.int(c.pending_len() as i64);
        out.bulk(b"idle");
        out.int(now.wrapping_sub(c.seen_time).max(0));
        out.bulk(b"inactive");
        out.int(if c.active_time == -1 { -1 } else { now.wrapping_sub(c.active_time).max(0) });
    }
    Ok(())
}

fn xinfo_help(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    const LINES: &[&str] = &[
        "CONSUMERS <key> <groupname>",
        "    Show consumers of <groupname>.",
        "GROUPS <key>",
        "    Show the stream consumer groups.",
        "STREAM <key> [FULL [COUNT <count>]",
        "    Show information about the stream.",
    ];
    reply_help(ctx, &args[0], LINES);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::command::{table, ClientInfo};
    use crate::keyspace::Keyspace;
    use crate::shard::{call, Caller, Clock, ShardSettings, ShardState};
    use crate::ShardCommand;
    use bytes::Bytes;

    /// A scratch shard at a fixed time (1000 ms).
    struct Shard {
        keyspace: Keyspace,
        state: ShardState,
    }

    impl Shard {
        fn new() -> Self {
            Shard {
                keyspace: Keyspace::scratch(1),
                state: ShardState::recording(ShardSettings::default()),
            }
        }

        fn run(&mut self, line: &str) -> String {
            let args: Vec<Bytes> =
                line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
            let reg = match table().resolve(&args) {
                Ok(reg) => reg,
                Err(e) => return format!("-{}\r\n", e.text()),
            };
            let cmd =
                ShardCommand { id: reg.id, spec: reg.spec, args, client: ClientInfo::default() };
            let mut out = Vec::new();
            call(
                &mut self.keyspace,
                &mut self.state,
                &cmd,
                &mut out,
                &mut Clock::at(1_000),
                Caller::Client,
            );
            String::from_utf8_lossy(&out).into_owned()
        }

        fn events(&mut self) -> Vec<String> {
            self.state.funnel.take_events().into_iter().map(|e| e.event.to_string()).collect()
        }
    }

    #[test]
    fn xadd_ids_trimming_and_events() {
        let mut s = Shard::new();
        assert_eq!(s.run("XADD s * a 1"), "$6\r\n1000-0\r\n");
        assert_eq!(s.run("XADD s * a 2"), "$6\r\n1000-1\r\n");
        assert_eq!(s.run("XADD s 1000-* a 3"), "$6\r\n1000-2\r\n");
        assert_eq!(
            s.run("XADD s 5-1 a 1"),
            "-ERR The ID specified in XADD is equal or smaller than the target stream top item\r\n"
        );
        assert_eq!(
            s.run("XADD s 0-0 a 1"),
            "-ERR The ID specified in XADD must be greater than 0-0\r\n"
        );
        assert_eq!(s.run("XADD s * a"), "-ERR wrong number of arguments for 'xadd' command\r\n");
        assert_eq!(s.run("XADD missing NOMKSTREAM * a 1"), "$-1\r\n");
        assert_eq!(s.events(), ["xadd", "xadd", "xadd"]);
        assert_eq!(s.run("XADD s MAXLEN 1 * a 4"), "$6\r\n1000-3\r\n");
        assert_eq!(s.events(), ["xadd", "xtrim"]);
        assert_eq!(s.run("XLEN s"), ":1\r\n");
        assert_eq!(
            s.run("XADD s MAXLEN 1 LIMIT 5 * a 4"),
            "-ERR syntax error, LIMIT cannot be used without the special ~ option\r\n"
        );
        assert_eq!(
            s.run("XADD s MAXLEN 1 MINID 5 * a 4"),
            "-ERR syntax error, MAXLEN and MINID options at the same time are not compatible\r\n"
        );
        assert_eq!(
            s.run("XTRIM s LIMIT 5"),
            "-ERR syntax error, LIMIT cannot be used without specifying a trimming strategy\r\n"
        );
        assert_eq!(s.run("XTRIM s MAXLEN -1"), "-ERR The MAXLEN argument must be >= 0.\r\n");
        assert_eq!(s.run("TYPE s"), "+stream\r\n");
        assert_eq!(s.run("OBJECT ENCODING s"), "$6\r\nstream\r\n");
    }

    #[test]
    fn ranges_with_exclusive_bounds_and_count() {
        let mut s = Shard::new();
        for id in ["1-0", "2-0", "3-0"] {
            s.run(&format!("XADD s {id} f v"));
        }
        let ids = |reply: String| reply.matches("-0\r\n").count();
        assert_eq!(ids(s.run("XRANGE s - +")), 3);
        assert_eq!(ids(s.run("XRANGE s (1 +")), 2);
        assert_eq!(ids(s.run("XREVRANGE s + - COUNT 1")), 1);
        assert!(s.run("XREVRANGE s + - COUNT 1").contains("3-0"));
        assert_eq!(s.run("XRANGE s - + COUNT 0"), "*-1\r\n");
        assert_eq!(
            s.run("XRANGE s (18446744073709551615-18446744073709551615 +"),
            "-ERR invalid start ID for the interval\r\n"
        );
        assert_eq!(
            s.run("XRANGE s x +"),
            "-ERR Invalid stream ID specified as stream command argument\r\n"
        );
        assert_eq!(s.run("XDEL s 2-0 9-0"), ":1\r\n");
        assert_eq!(ids(s.run("XRANGE s - +")), 2);
    }

    #[test]
    fn group_lifecycle() {
        let mut s = Shard::new();
        assert!(s
            .run("XGROUP CREATE s g $")
            .starts_with("-ERR The XGROUP subcommand requires the key to exist"));
        assert_eq!(s.run("XGROUP CREATE s g $ MKSTREAM"), "+OK\r\n");
        assert_eq!(
            s.run("XGROUP CREATE s g $"),
            "-BUSYGROUP Consumer Group name already exists\r\n"
        );
        s.events();
        s.run("XADD s 1-0 f v");
        s.run("XADD s 2-0 f v");
        let read = s.run("XREADGROUP GROUP g c COUNT 1 STREAMS s >");
        assert!(read.contains("1-0") && !read.contains("2-0"), "{read}");
        assert_eq!(s.events(), ["xadd", "xadd", "xgroup-createconsumer", "xreadgroup"]);
        assert!(s.run("XPENDING s g").starts_with("*4\r\n:1\r\n"));
        // The consumer's history from 0.
        assert!(s.run("XREADGROUP GROUP g c STREAMS s 0").contains("1-0"));
        assert_eq!(s.run("XACK s g 1-0 1-0"), ":1\r\n");
        assert_eq!(
            s.run("XACK s g bad"),
            "-ERR Invalid stream ID specified as stream command argument\r\n"
        );
        assert_eq!(
            s.run("XPENDING s nogroup"),
            "-NOGROUP No such key 's' or consumer group 'nogroup'\r\n"
        );
        assert_eq!(
            s.run("XREADGROUP GROUP g c STREAMS s $").split(':').next(),
            Some("-ERR The $ ID is meaningless in the context of XREADGROUP")
        );
        assert_eq!(s.run("XGROUP DELCONSUMER s g c"), ":0\r\n");
        assert_eq!(s.run("XGROUP DESTROY s g"), ":1\r\n");
        assert_eq!(s.run("XGROUP FOO s g"), "-ERR unknown subcommand 'FOO'. Try XGROUP HELP.\r\n");
    }

    #[test]
    fn xread_serves_only_streams_with_news() {
        let mut s = Shard::new();
        assert_eq!(s.run("XREAD STREAMS s 0"), "*-1\r\n");
        assert_eq!(s.run("XREAD BLOCK 10 STREAMS s $"), "*-1\r\n");
        assert_eq!(s.run("XREAD BLOCK -1 STREAMS s $"), "-ERR timeout is negative\r\n");
        s.run("XADD s 1-0 f v");
        assert!(s.run("XREAD STREAMS s t 0 0").starts_with("*1\r\n*2\r\n$1\r\ns\r\n"));
        assert_eq!(s.run("XREAD STREAMS s 1-0"), "*-1\r\n");
        assert!(s.run("XREAD STREAMS s t 0").starts_with("-ERR Unbalanced XREAD list of streams"));
        assert!(s
            .run("XREAD GROUP g c STREAMS s >")
            .starts_with("-ERR The GROUP option is only supported by XREADGROUP"));
        assert!(s.events().iter().all(|e| e == "new" || e == "xadd"));
    }
}
