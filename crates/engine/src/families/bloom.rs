//! Bloom filters: BF.RESERVE, BF.ADD, BF.MADD, BF.INSERT, BF.EXISTS,
//! BF.MEXISTS, BF.INFO, BF.CARD, BF.SCANDUMP, BF.LOADCHUNK and BF.DEBUG,
//! as RedisBloom 2.x (2.8) answers them: its argument parsing (quirks
//! included), its error texts (some without an `ERR` prefix) and its RESP3
//! booleans and maps. The filter itself is `ringdb_types::bloom`.
//!
//! RedisBloom sends no keyspace notifications; ringdb's write funnel still
//! sees every change (class `Module`, the command's name as the event), so
//! that WATCH, reactive watches and cross-shard copies work.
//!
//! A filter's bit arrays are bounded like a string by `proto-max-bulk-len`
//! (RedisBloom is bounded only by memory): larger requests get RedisBloom's
//! out-of-memory errors.

use crate::command::args::is;
use crate::command::error::{CmdError, CmdResult, WRONG_TYPE};
use crate::command::spec::{flags::*, keyflags as kf, CommandSpec, Exec, KeySpec};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::{typed, Value};
use bytes::Bytes;
use ringdb_protocol::reply::format_g;
use ringdb_types::bloom::{AddResult, BloomError, BloomFilter, OPT_FORCE64};
use ringdb_types::number::{parse_f64, parse_i64};

const RW: &[KeySpec] = &[KeySpec::one(1, kf::RW)];
const RO: &[KeySpec] = &[KeySpec::one(1, kf::RO)];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("bf.reserve", -4, WRITE | DENYOOM, Exec::Shard(bf_reserve))
        .keys(RW)
        .doc(
            "bf",
            "1.0.0",
            "Creates a new Bloom Filter",
            "O(1)",
            "key error_rate:double capacity:integer [EXPANSION expansion:integer] [NONSCALING]",
        ),
    CommandSpec::new("bf.add", 3, WRITE | DENYOOM, Exec::Shard(bf_add))
        .keys(RW)
        .doc(
            "bf",
            "1.0.0",
            "Adds an item to a Bloom Filter",
            "O(k), where k is the number of hash functions used by the last sub-filter",
            "key item",
        ),
    CommandSpec::new("bf.madd", -3, WRITE | DENYOOM, Exec::Shard(bf_madd))
        .keys(RW)
        .doc(
            "bf",
            "1.0.0",
            "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
            "O(k * n), where k is the number of hash functions and n is the number of items",
            "key item [item ...]",
        ),
    CommandSpec::new("bf.insert", -4, WRITE | DENYOOM, Exec::Shard(bf_insert))
        .keys(RW)
        .doc(
            "bf",
            "1.0.0",
            "Adds one or more items to a Bloom Filter. A filter will be created if it does not exist",
            "O(k * n), where k is the number of hash functions and n is the number of items",
            "key [CAPACITY capacity:integer] [ERROR error:double] [EXPANSION expansion:integer] [NOCREATE] [NONSCALING] ITEMS item [item ...]",
        ),
    CommandSpec::new("bf.exists", 3, READONLY | FAST | WATCHABLE, Exec::Shard(bf_exists))
        .keys(RO)
        .doc(
            "bf",
            "1.0.0",
            "Checks whether an item exists in a Bloom Filter",
            "O(k), where k is the number of hash functions used by the last sub-filter",
            "key item",
        ),
    CommandSpec::new("bf.mexists", -3, READONLY | FAST | WATCHABLE, Exec::Shard(bf_mexists))
        .keys(RO)
        .doc(
            "bf",
            "1.0.0",
            "Checks whether one or more items exist in a Bloom Filter",
            "O(k * n), where k is the number of hash functions and n is the number of items",
            "key item [item ...]",
        ),
    CommandSpec::new("bf.info", -2, READONLY | FAST, Exec::Shard(bf_info))
        .keys(RO)
        .doc(
            "bf",
            "1.0.0",
            "Returns information about a Bloom Filter",
            "O(1)",
            "key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]",
        ),
    CommandSpec::new("bf.card", 2, READONLY | FAST | WATCHABLE, Exec::Shard(bf_card))
        .keys(RO)
        .doc("bf", "2.4.4", "Returns the cardinality of a Bloom filter", "O(1)", "key"),
    CommandSpec::new("bf.scandump", 3, READONLY | FAST, Exec::Shard(bf_scandump))
        .keys(RO)
        .doc(
            "bf",
            "1.0.0",
            "Begins an incremental save of the bloom filter",
            "O(n), where n is the capacity",
            "key iterator:integer",
        ),
    CommandSpec::new("bf.loadchunk", 4, WRITE | DENYOOM, Exec::Shard(bf_loadchunk))
        .keys(RW)
        .doc(
            "bf",
            "1.0.0",
            "Restores a filter previously saved using SCANDUMP",
            "O(n), where n is the capacity",
            "key iterator:integer data",
        ),
    CommandSpec::new("bf.debug", 2, READONLY | FAST, Exec::Shard(bf_debug))
        .keys(RO)
        .doc(
            "bf",
            "1.0.0",
            "Returns internal debug information about a Bloom Filter",
            "O(n), where n is the number of sub-filters",
            "key",
        ),
];

const NOT_FOUND: CmdError = CmdError::new("ERR not found");
const CANNOT_CREATE: CmdError = CmdError::new("ERR could not create filter");
const NO_MEMORY: CmdError = CmdError::new("ERR Insufficient memory to create filter");

/// The filter at `key` for reading.
fn read_filter<'a>(
    ks: &'a mut KeyspaceView,
    key: &[u8],
) -> Result<Option<&'a BloomFilter>, CmdError> {
    match ks.read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::Bloom(f) => Ok(Some(f)),
            _ => Err(WRONG_TYPE),
        },
    }
}

/// Whether a filter exists at `key` for writing: `Ok(false)` when the key
/// is missing, WRONGTYPE when it holds something else.
fn filter_exists_for_write(ks: &mut KeyspaceView, key: &[u8]) -> Result<bool, CmdError> {
    match ks.write(key) {
        None => Ok(false),
        Some(e) if matches!(e.value, Value::Bloom(_)) => Ok(true),
        Some(_) => Err(WRONG_TYPE),
    }
}

/// The filter at `key` for writing.
fn write_filter<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Option<Updater<'v, BloomFilter>>, CmdError> {
    ks.write_as(key, typed)
}

/// The bound on a filter's bit arrays.
fn max_bytes(ks: &KeyspaceView) -> u64 {
    ks.state.settings.max_bulk_len
}

fn create_error(e: BloomError) -> CmdError {
    match e {
        BloomError::Invalid => CANNOT_CREATE,
        BloomError::TooBig => NO_MEMORY,
    }
}

/// A yes/no answer: a boolean in RESP3, 1 or 0 in RESP2.
fn reply_bool(ctx: &mut Ctx, yes: bool) {
    if ctx.out.is_resp3() {
        ctx.out.bool(yes);
    } else {
        ctx.out.int(yes as i64);
    }
}

/// RedisBloom's `RMUtil_ArgIndex`: the first argument equal to `word` (any
/// case), searching every argument after the command name, the key
/// included, as RedisBloom does.
fn arg_index(args: &[Bytes], word: &str) -> Option<usize> {
    (1..args.len()).find(|&i| is(&args[i], word))
}

/// BF.RESERVE key error_rate capacity [EXPANSION expansion] [NONSCALING]
fn bf_reserve(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 7 {
        return Err(CmdError::wrong_args("bf.reserve"));
    }
    let error_rate = parse_f64(&args[2]).ok_or(CmdError::new("ERR bad error rate"))?;
    if error_rate >= 1.0 || error_rate <= 0.0 {
        return Err(CmdError::new("ERR (0 < error rate range < 1) "));
    }
    let capacity = parse_i64(&args[3]).ok_or(CmdError::new("ERR bad capacity"))?;
    if capacity <= 0 {
        return Err(CmdError::new("ERR (capacity should be larger than 0)"));
    }
    let scaling = arg_index(args, "NONSCALING").is_none();
    let mut expansion = ringdb_types::bloom::DEFAULT_EXPANSION as i64;
    if let Some(i) = arg_index(args, "EXPANSION") {
        if i + 1 == args.len() {
            return Err(CmdError::new("ERR no expansion"));
        }
        if !scaling {
            return Err(CmdError::new("Nonscaling filters cannot expand"));
        }
        expansion = parse_i64(&args[i + 1]).ok_or(CmdError::new("ERR bad expansion"))?;
        if expansion < 1 {
            return Err(CmdError::new("ERR expansion should be greater or equal to 1"));
        }
    }
    let key = &args[1];
    if filter_exists_for_write(&mut ctx.ks, key)? {
        return Err(CmdError::new("ERR item exists"));
    }
    // RedisBloom keeps the expansion in 32 bits.
    let filter = BloomFilter::new(
        capacity as u64,
        error_rate,
        expansion as u32,
        scaling,
        max_bytes(&ctx.ks),
    )
    .map_err(create_error)?;
    ctx.ks.set(key, Value::Bloom(Box::new(filter)), false, NotifyClass::Module, "bf.reserve");
    ctx.out.ok();
    Ok(())
}

/// How BF.ADD, BF.MADD and BF.INSERT add (RedisBloom's `BFInsertOptions`).
struct InsertOptions {
    capacity: i64,
    error_rate: f64,
    expansion: i64,
    scaling: bool,
    create: bool,
    /// An array of replies (BF.MADD, BF.INSERT) rather than one.
    multi: bool,
    /// The funnel event: the command's name.
    event: &'static str,
}

impl InsertOptions {
    fn defaults(ks: &KeyspaceView, multi: bool, event: &'static str) -> Self {
        InsertOptions {
            capacity: ks.state.settings.bf_initial_size as i64,
            error_rate: ks.state.settings.bf_error_rate,
            expansion: ringdb_types::bloom::DEFAULT_EXPANSION as i64,
            scaling: true,
            create: true,
            multi,
            event,
        }
    }
}

fn bf_add(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let options = InsertOptions::defaults(&ctx.ks, false, "bf.add");
    insert(ctx, &args[1], &args[2..], &options)
}

fn bf_madd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let options = InsertOptions::defaults(&ctx.ks, true, "bf.madd");
    insert(ctx, &args[1], &args[2..], &options)
}

/// BF.INSERT key [CAPACITY c] [ERROR e] [EXPANSION x] [NOCREATE]
/// [NONSCALING] ITEMS item [item ...]. Options are told apart by their
/// first letters, as RedisBloom does (`ITEMS` is any word starting with
/// `i`; `e` then `r` is ERROR, another `e` word EXPANSION; an `n` word with
/// `c` third is NOCREATE, other `n` words NONSCALING).
fn bf_insert(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut options = InsertOptions::defaults(&ctx.ks, true, "bf.insert");
    let wrong_args = || CmdError::wrong_args("bf.insert");
    let letter = |arg: &[u8], i: usize| arg.get(i).map_or(0, u8::to_ascii_lowercase);
    let mut items_at = None;
    let mut pos = 2;
    while pos < args.len() && items_at.is_none() {
        let arg = &args[pos];
        match letter(arg, 0) {
            b'i' => {
                pos += 1;
                items_at = Some(pos);
            }
            b'e' => {
                pos += 1;
                let value = args.get(pos).ok_or_else(wrong_args)?;
                if letter(arg, 1) == b'r' {
                    options.error_rate = parse_f64(value).ok_or(CmdError::new("Bad error rate"))?;
                } else {
                    options.expansion = parse_i64(value).ok_or(CmdError::new("Bad expansion"))?;
                }
                pos += 1;
            }
            b'c' => {
                pos += 1;
                let value = args.get(pos).ok_or_else(wrong_args)?;
                options.capacity = parse_i64(value).ok_or(CmdError::new("Bad capacity"))?;
                pos += 1;
            }
            b'n' => {
                if letter(arg, 2) == b'c' {
                    options.create = false;
                } else {
                    options.scaling = false;
                }
                pos += 1;
            }
            _ => return Err(CmdError::new("Unknown argument received")),
        }
    }
    let items_at = items_at.filter(|&i| i < args.len()).ok_or_else(wrong_args)?;
    if options.error_rate <= 0.0
        || options.error_rate >= 1.0
        || options.capacity < 1
        || options.expansion < 1
    {
        return Err(CmdError::new("Bad argument received"));
    }
    insert(ctx, &args[1], &args[items_at..], &options)
}

/// RedisBloom's `bfInsertCommon`: creates the filter if allowed, then adds
/// each item. A full non-scaling filter ends the items with an error; a
/// filter that cannot grow gives an error for that item and goes on.
fn insert(ctx: &mut Ctx, key: &[u8], items: &[Bytes], options: &InsertOptions) -> CmdResult {
    let limit = max_bytes(&ctx.ks);
    let exists = filter_exists_for_write(&mut ctx.ks, key)?;
    if !exists && !options.create {
        return Err(NOT_FOUND);
    }
    let mut updater = if exists {
        write_filter(&mut ctx.ks, key)?.ok_or(WRONG_TYPE)?
    } else {
        let filter = BloomFilter::new(
            options.capacity as u64,
            options.error_rate,
            options.expansion as u32,
            options.scaling,
            limit,
        )
        .map_err(create_error)?;
        ctx.ks.create_as(key, Value::Bloom(Box::new(filter)), typed)?
    };
    // RedisBloom replicates (and Redis signals) the key whatever happened.
    let filter = updater.update(NotifyClass::Module, options.event);
    let mut results = Vec::with_capacity(items.len());
    for item in items {
        let result = filter.add(item, limit);
        results.push(result);
        if result == AddResult::Full {
            break;
        }
    }
    drop(updater);
    if !options.multi {
        return match results.first() {
            Some(AddResult::Full) => Err(CmdError::new("ERR non scaling filter is full")),
            Some(AddResult::CannotGrow) => Err(CmdError::new("ERR problem inserting into filter")),
            Some(r) => {
                reply_bool(ctx, *r == AddResult::Added);
                Ok(())
            }
            None => Err(CmdError::wrong_args("bf.add")),
        };
    }
    ctx.out.array(results.len());
    for r in results {
        match r {
            AddResult::Full => item_error(ctx, "ERR non scaling filter is full"),
            AddResult::CannotGrow => item_error(ctx, "ERR problem inserting into filter"),
            r => reply_bool(ctx, r == AddResult::Added),
        }
    }
    Ok(())
}

/// An error inside an array reply, counted in the error statistics as
/// Redis counts module errors.
fn item_error(ctx: &mut Ctx, text: &'static str) {
    ctx.out.error(text);
    ctx.ks.state.stats.error("ERR");
}

fn bf_exists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found = read_filter(&mut ctx.ks, &args[1])?.is_some_and(|f| f.contains(&args[2]));
    reply_bool(ctx, found);
    Ok(())
}

fn bf_mexists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let found: Vec<bool> = match read_filter(&mut ctx.ks, &args[1])? {
        Some(f) => args[2..].iter().map(|item| f.contains(item)).collect(),
        None => vec![false; args.len() - 2],
    };
    ctx.out.array(found.len());
    for yes in found {
        reply_bool(ctx, yes);
    }
    Ok(())
}

/// The fields of BF.INFO: (name, argument that selects it).
const INFO_FIELDS: [(&str, &str); 5] = [
    ("Capacity", "capacity"),
    ("Size", "size"),
    ("Number of filters", "filters"),
    ("Number of items inserted", "items"),
    ("Expansion rate", "expansion"),
];

/// BF.INFO key [CAPACITY | SIZE | FILTERS | ITEMS | EXPANSION]: a map (RESP3)
/// or flat array (RESP2) of every field, or one field (a one-entry map, or
/// a one-element array with just the value).
fn bf_info(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(CmdError::wrong_args("bf.info"));
    }
    let filter = read_filter(&mut ctx.ks, &args[1])?.ok_or(NOT_FOUND)?;
    let values: [Option<u64>; 5] = [
        Some(filter.capacity()),
        Some(filter.memory_usage()),
        Some(filter.links().len() as u64),
        Some(filter.size()),
        filter.expansion().map(u64::from),
    ];
    let resp3 = ctx.out.is_resp3();
    let selected: Vec<usize> = match args.get(2) {
        None => (0..INFO_FIELDS.len()).collect(),
        Some(field) => {
            let i = INFO_FIELDS
                .iter()
                .position(|(_, word)| is(field, word))
                .ok_or(CmdError::new("Invalid information value"))?;
            vec![i]
        }
    };
    let with_names = resp3 || args.len() == 2;
    if resp3 {
        ctx.out.map(selected.len());
    } else {
        ctx.out.array(selected.len() * if with_names { 2 } else { 1 });
    }
    for i in selected {
        if with_names {
            ctx.out.simple(INFO_FIELDS[i].0);
        }
        match values[i] {
            Some(v) => ctx.out.int(v as i64),
            None => ctx.out.null(),
        }
    }
    Ok(())
}

fn bf_card(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let size = read_filter(&mut ctx.ks, &args[1])?.map_or(0, |f| f.size());
    ctx.out.int(size as i64);
    Ok(())
}

/// BF.SCANDUMP key iterator: `[1, header]` for iterator 0, then `[next,
/// chunk]` until `[0, ""]`.
fn bf_scandump(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let filter = read_filter(&mut ctx.ks, &args[1])?.ok_or(NOT_FOUND)?;
    let iter = parse_i64(&args[2]).ok_or(CmdError::new("Second argument must be numeric"))?;
    let (next, data) = if iter == 0 {
        (1, filter.encode_header())
    } else {
        let (next, chunk) = filter.chunk(iter);
        (next, chunk.to_vec())
    };
    ctx.out.array(2);
    ctx.out.int(next);
    ctx.out.bulk(&data);
    Ok(())
}

/// BF.LOADCHUNK key iterator data: iterator 1 on a missing key creates the
/// filter from a SCANDUMP header; later iterators fill its bit arrays.
fn bf_loadchunk(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let iter = parse_i64(&args[2]).ok_or(CmdError::new("ERR Second argument must be numeric"))?;
    let (key, data) = (&args[1], &args[3]);
    let exists = filter_exists_for_write(&mut ctx.ks, key)?;
    if !exists && iter == 1 {
        let filter = BloomFilter::from_header(data, max_bytes(&ctx.ks))
            .ok_or(CmdError::new("ERR received bad data"))?;
        let value = Value::Bloom(Box::new(filter));
        ctx.ks.set(key, value, false, NotifyClass::Module, "bf.loadchunk");
    } else {
        let mut filter = write_filter(&mut ctx.ks, key)?.ok_or(NOT_FOUND)?;
        let loaded = filter.update(NotifyClass::Module, "bf.loadchunk").load_chunk(iter, data);
        if loaded.is_err() {
            filter.unchanged();
        }
        loaded.map_err(CmdError::new)?;
    }
    ctx.out.ok();
    Ok(())
}

/// BF.DEBUG key: `size:N`, then per sub-filter its bytes, bits, hashes,
/// hash width, capacity, items and error rate.
fn bf_debug(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let filter = read_filter(&mut ctx.ks, &args[1])?.ok_or(NOT_FOUND)?;
    let width = if filter.options() & OPT_FORCE64 != 0 { 64 } else { 32 };
    let mut lines = vec![format!("size:{}", filter.size())];
    for l in filter.links() {
        let mut ratio = Vec::new();
        format_g(&mut ratio, l.error, 6);
        lines.push(format!(
            "bytes:{} bits:{} hashes:{} hashwidth:{width} capacity:{} size:{} ratio:{}",
            l.bytes(),
            l.bits,
            l.hashes,
            l.entries,
            l.size,
            String::from_utf8_lossy(&ratio)
        ));
    }
    ctx.out.array(lines.len());
    for line in lines {
        ctx.out.bulk(line.as_bytes());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::command::{table, ClientInfo};
    use crate::keyspace::Keyspace;
    use crate::shard::{call, Caller, Clock, ShardSettings, ShardState};
    use crate::ShardCommand;
    use bytes::Bytes;
    use ringdb_protocol::Resp;

    fn run_resp(ks: &mut Keyspace, state: &mut ShardState, resp: Resp, line: &str) -> String {
        let args: Vec<Bytes> =
            line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        // Arity errors come from the table, as the router reports them.
        let reg = match table().resolve(&args) {
            Ok(reg) => reg,
            Err(e) => return format!("-{e}\r\n"),
        };
        let client = ClientInfo { resp, ..ClientInfo::default() };
        let cmd = ShardCommand { id: reg.id, spec: reg.spec, args, client };
        let mut out = Vec::new();
        call(ks, state, &cmd, &mut out, &mut Clock::at(1_000), Caller::Client);
        String::from_utf8_lossy(&out).into_owned()
    }

    fn run(ks: &mut Keyspace, state: &mut ShardState, line: &str) -> String {
        run_resp(ks, state, Resp::V2, line)
    }

    #[test]
    fn reserve_errors_in_redisbloom_order() {
        let mut ks = Keyspace::scratch(1);
        let mut st = ShardState::recording(ShardSettings::default());
        let cases = [
            ("BF.RESERVE b x 100", "-ERR bad error rate\r\n"),
            ("BF.RESERVE b 1 100", "-ERR (0 < error rate range < 1) \r\n"),
            ("BF.RESERVE b 0.01 x", "-ERR bad capacity\r\n"),
            ("BF.RESERVE b 0.01 0", "-ERR (capacity should be larger than 0)\r\n"),
            ("BF.RESERVE b 0.01 10 EXPANSION", "-ERR no expansion\r\n"),
            (
                "BF.RESERVE b 0.01 10 NONSCALING EXPANSION 2",
                "-Nonscaling filters cannot expand\r\n",
            ),
            ("BF.RESERVE b 0.01 10 EXPANSION x", "-ERR bad expansion\r\n"),
            (
                "BF.RESERVE b 0.01 10 EXPANSION 0",
                "-ERR expansion should be greater or equal to 1\r\n",
            ),
            (
                "BF.RESERVE b 0.01 10 1 2 3 4",
                "-ERR wrong number of arguments for 'bf.reserve' command\r\n",
            ),
            ("BF.RESERVE b 0.01 10", "+OK\r\n"),
            ("BF.RESERVE b 0.01 10", "-ERR item exists\r\n"),
        ];
        for (line, want) in cases {
            assert_eq!(run(&mut ks, &mut st, line), want, "{line}");
        }
        run(&mut ks, &mut st, "SET s x");
        assert!(run(&mut ks, &mut st, "BF.RESERVE s 0.01 10").starts_with("-WRONGTYPE"));
    }

    #[test]
    fn insert_options_and_replies() {
        let mut ks = Keyspace::scratch(1);
        let mut st = ShardState::recording(ShardSettings::default());
        assert_eq!(run(&mut ks, &mut st, "BF.INSERT b NOCREATE ITEMS a"), "-ERR not found\r\n");
        assert_eq!(
            run(&mut ks, &mut st, "BF.INSERT b CAPACITY 2 NONSCALING ITEMS a b c d"),
            "*3\r\n:1\r\n:1\r\n-ERR non scaling filter is full\r\n"
        );
        assert_eq!(run_resp(&mut ks, &mut st, Resp::V3, "BF.MEXISTS b a c"), "*2\r\n#t\r\n#f\r\n");
        assert_eq!(
            run(&mut ks, &mut st, "BF.INSERT b ITEMS"),
            "-ERR wrong number of arguments for 'bf.insert' command\r\n"
        );
        assert_eq!(
            run(&mut ks, &mut st, "BF.INSERT b CAPACITY"),
            "-ERR wrong number of arguments for 'bf.insert' command\r\n"
        );
        assert_eq!(
            run(&mut ks, &mut st, "BF.INSERT b FOO ITEMS a"),
            "-Unknown argument received\r\n"
        );
        assert_eq!(run(&mut ks, &mut st, "BF.INSERT b ERROR x ITEMS a"), "-Bad error rate\r\n");
        assert_eq!(run(&mut ks, &mut st, "BF.INSERT b EXPANSION x ITEMS a"), "-Bad expansion\r\n");
        assert_eq!(run(&mut ks, &mut st, "BF.INSERT b CAPACITY x ITEMS a"), "-Bad capacity\r\n");
        assert_eq!(
            run(&mut ks, &mut st, "BF.INSERT b ERROR 2 ITEMS a"),
            "-Bad argument received\r\n"
        );
        assert_eq!(
            run(&mut ks, &mut st, "BF.INFO b"),
            "*10\r\n+Capacity\r\n:2\r\n+Size\r\n:104\r\n+Number of filters\r\n:1\r\n\
             +Number of items inserted\r\n:2\r\n+Expansion rate\r\n$-1\r\n"
        );
        assert_eq!(run(&mut ks, &mut st, "BF.INFO b items"), "*1\r\n:2\r\n");
        assert_eq!(
            run_resp(&mut ks, &mut st, Resp::V3, "BF.INFO b ITEMS"),
            "%1\r\n+Number of items inserted\r\n:2\r\n"
        );
        assert_eq!(run(&mut ks, &mut st, "BF.INFO b nope"), "-Invalid information value\r\n");
        assert_eq!(run(&mut ks, &mut st, "BF.INFO missing"), "-ERR not found\r\n");
    }

    #[test]
    fn debug_lists_links() {
        let mut ks = Keyspace::scratch(1);
        let mut st = ShardState::recording(ShardSettings::default());
        run(&mut ks, &mut st, "BF.RESERVE b 0.01 1000");
        assert_eq!(
            run(&mut ks, &mut st, "BF.DEBUG b"),
            "*2\r\n$6\r\nsize:0\r\n$76\r\nbytes:1384 bits:11072 hashes:8 hashwidth:64 capacity:1000 size:0 ratio:0.005\r\n"
        );
    }
}
