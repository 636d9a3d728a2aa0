//! Bitmaps: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP, BITFIELD, BITFIELD_RO.
//!
//! Bitmaps are strings; the algorithms live in `ringdb_types::bits`, and this
//! module reads the arguments in Redis's order (so the same error wins when
//! several apply), looks the keys up and replies, as Redis's `bitops.c`.
//!
//! Bit offsets are checked against `proto-max-bulk-len` before anything is
//! allocated, so no client can make a string larger than a SET could. A
//! string changed in place becomes `raw`, as in Redis.

use crate::command::args::{self, is};
use crate::command::error::{CmdError, CmdResult, SYNTAX, WRONG_TYPE};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::families::string::read_str;
use crate::funnel::NotifyClass;
use crate::keyspace::{Entry, StrValue, Value};
use bytes::Bytes;
use ringdb_types::bits::{self, BitOp, FieldType, OverflowMode, PosRange, Unit};
use std::borrow::Cow;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("setbit", 4, WRITE | DENYOOM | AS_IS, Exec::Shard(setbit))
        .keys(&[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::BITMAP)
        .doc("bitmap", "2.2.0", "Sets or clears the bit at offset of the string value. Creates the key if it doesn't exist.", "O(1)", "key offset value:integer"),
    CommandSpec::new("getbit", 3, READONLY | FAST | WATCHABLE, Exec::Shard(getbit))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::BITMAP)
        .doc("bitmap", "2.2.0", "Returns a bit value by offset.", "O(1)", "key offset"),
    CommandSpec::new("bitcount", -2, READONLY | WATCHABLE, Exec::Shard(bitcount))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::BITMAP)
        .doc("bitmap", "2.6.0", "Counts the number of set bits (population counting) in a string.", "O(N)", "key [start end [BYTE | BIT]]"),
    CommandSpec::new("bitpos", -3, READONLY | WATCHABLE, Exec::Shard(bitpos))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::BITMAP)
        .doc("bitmap", "2.8.7", "Finds the first set (1) or clear (0) bit in a string.", "O(N)", "key bit [start [end [BYTE | BIT]]]"),
    CommandSpec::new("bitop", -4, WRITE | DENYOOM, Exec::Shard(bitop))
        .keys(&[KeySpec::one(2, kf::OW | kf::UPDATE), KeySpec::range(3, -1, 1, kf::RO | kf::ACCESS)])
        .acl(acl::BITMAP)
        .doc("bitmap", "2.6.0", "Performs bitwise operations on multiple strings, and stores the result.", "O(N)", "<AND | OR | XOR | NOT> destkey key [key ...]"),
    CommandSpec::new("bitfield", -2, WRITE | DENYOOM, Exec::Shard(bitfield))
        .keys(&[KeySpec::one(1, kf::RW | kf::UPDATE | kf::ACCESS | kf::VARIABLE_FLAGS)
            .notes("This command allows both access and modification of the key")])
        .variable_key_flags(bitfield_key_flags)
        .acl(acl::BITMAP)
        .doc(
            "bitmap",
            "3.2.0",
            "Performs arbitrary bitfield integer operations on strings.",
            "O(1) for each subcommand specified",
            "key [GET encoding offset | [OVERFLOW <WRAP | SAT | FAIL>] <SET encoding offset value:integer | INCRBY encoding offset increment> [GET encoding offset | [OVERFLOW <WRAP | SAT | FAIL>] <SET encoding offset value:integer | INCRBY encoding offset increment> ...]]",
        ),
    CommandSpec::new("bitfield_ro", -2, READONLY | FAST, Exec::Shard(bitfield_ro))
        .keys(&[KeySpec::one(1, kf::RO | kf::ACCESS)])
        .acl(acl::BITMAP)
        .doc("bitmap", "6.0.0", "Performs arbitrary read-only bitfield integer operations on strings.", "O(1) for each subcommand specified", "key [GET encoding offset [GET encoding offset ...]]"),
];

const BAD_OFFSET: CmdError = CmdError::new("ERR bit offset is not an integer or out of range");
const BAD_BIT: CmdError = CmdError::new("ERR bit is not an integer or out of range");
const BAD_BITPOS_BIT: CmdError = CmdError::new("ERR The bit argument must be 1 or 0.");
const BAD_FIELD_TYPE: CmdError = CmdError::new(
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.",
);
const BAD_OVERFLOW: CmdError = CmdError::new("ERR Invalid OVERFLOW type specified");
const BITOP_NOT_ONE_KEY: CmdError =
    CmdError::new("ERR BITOP NOT must be called with a single source key.");
const BITFIELD_RO_GET_ONLY: CmdError =
    CmdError::new("ERR BITFIELD_RO only supports the GET subcommand");

/// A bit offset argument (Redis's `getBitOffsetFromArgument`). With
/// `field_bits`, `#n` means field number n, i.e. bit n × field_bits. The
/// byte it falls in must be below `proto-max-bulk-len`.
fn bit_offset(ks: &KeyspaceView, arg: &[u8], field_bits: Option<u32>) -> Result<u64, CmdError> {
    let (fields, digits) = match (field_bits, arg.split_first()) {
        (Some(bits), Some((b'#', rest))) => (Some(bits), rest),
        _ => (None, arg),
    };
    let mut offset = args::int_or(digits, BAD_OFFSET)?;
    if let Some(bits) = fields {
        offset = offset.checked_mul(bits as i64).ok_or(BAD_OFFSET)?;
    }
    if offset < 0 || (offset as u64 >> 3) >= ks.state.settings.max_bulk_len {
        return Err(BAD_OFFSET);
    }
    Ok(offset as u64)
}

/// `BYTE` or `BIT`.
fn unit(arg: &[u8]) -> Result<Unit, CmdError> {
    if is(arg, "bit") {
        Ok(Unit::Bit)
    } else if is(arg, "byte") {
        Ok(Unit::Byte)
    } else {
        Err(SYNTAX)
    }
}

/// A string's bytes, formatting an integer-encoded one.
fn str_bytes(s: &StrValue) -> Cow<'_, [u8]> {
    match s {
        StrValue::Int(_) => {
            let mut tmp = [0u8; 20];
            Cow::Owned(s.as_bytes(&mut tmp).to_vec())
        }
        StrValue::Emb(b) => Cow::Borrowed(b.as_slice()),
        StrValue::Raw(v) => Cow::Borrowed(v.as_slice()),
        StrValue::Shared(b) => Cow::Borrowed(&b[..]),
    }
}

/// The string of `entry` as a mutable byte buffer (it becomes `raw`: how
/// it is kept, not what it holds).
fn raw_string(entry: &mut Entry) -> Option<&mut Vec<u8>> {
    match &mut entry.value {
        Value::Str(s) => Some(s.make_raw()),
        _ => None,
    }
}

/// Redis's `lookupStringForBitCommand`: the string at `key`, created or
/// zero-padded so that bit `max_bit` exists. Also says whether the key was
/// created or grew (a change even if no bit flips: the caller announces
/// it).
fn bits_for_write<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
    max_bit: u64,
) -> Result<(Updater<'v, Vec<u8>>, bool), CmdError> {
    // `bit_offset` bounded max_bit by proto-max-bulk-len, so this fits.
    let need = (max_bit >> 3) as usize + 1;
    if !ks.exists_for_write(key) {
        let zeros = Value::Str(StrValue::Raw(Box::new(vec![0u8; need])));
        return Ok((ks.create_as(key, zeros, raw_string)?, true));
    }
    let mut bytes = ks.write_as(key, raw_string)?.ok_or(WRONG_TYPE)?;
    let grew = bytes.len() < need;
    if grew {
        bytes.update(NotifyClass::String, "setbit").resize(need, 0);
    }
    Ok((bytes, grew))
}

/// SETBIT key offset value: the bit's previous value.
fn setbit(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let offset = bit_offset(&ctx.ks, &args[2], None)?;
    let on = args::int_or(&args[3], BAD_BIT)?;
    if on & !1 != 0 {
        return Err(BAD_BIT);
    }
    let (mut bytes, grew) = bits_for_write(&mut ctx.ks, key, offset)?;
    let at = (offset >> 3) as usize;
    let mask = 0x80u8 >> (offset & 7);
    let was = bytes[at] & mask != 0;
    if grew || was != (on == 1) {
        let byte = &mut bytes.update(NotifyClass::String, "setbit")[at];
        *byte = if on == 1 { *byte | mask } else { *byte & !mask };
    }
    drop(bytes);
    ctx.out.int(was as i64);
    Ok(())
}

/// GETBIT key offset: 0 past the end of the string or for a missing key.
fn getbit(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let offset = bit_offset(&ctx.ks, &args[2], None)?;
    let bit = match read_str(&mut ctx.ks, &args[1])? {
        None => false,
        Some(s) => {
            let bytes = str_bytes(s);
            let byte = usize::try_from(offset >> 3).ok().and_then(|i| bytes.get(i));
            byte.is_some_and(|b| b & (0x80 >> (offset & 7)) != 0)
        }
    };
    ctx.out.int(bit as i64);
    Ok(())
}

/// BITCOUNT key [start end [BYTE | BIT]].
fn bitcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    // A missing key answers 0 before the arguments are even looked at.
    let Some(s) = read_str(&mut ctx.ks, &args[1])? else {
        ctx.out.int(0);
        return Ok(());
    };
    let bytes = str_bytes(s);
    let count = match args.len() {
        2 => bits::popcount(&bytes),
        4 | 5 => {
            let start = args::int(&args[2])?;
            let end = args::int(&args[3])?;
            // Redis answers 0 here before reading the unit.
            if start < 0 && end < 0 && start > end {
                0
            } else {
                let unit = if args.len() == 5 { unit(&args[4])? } else { Unit::Byte };
                bits::count_range(&bytes, start, end, unit)
            }
        }
        _ => return Err(SYNTAX),
    };
    ctx.out.int(count as i64);
    Ok(())
}

/// BITPOS key bit [start [end [BYTE | BIT]]].
fn bitpos(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let bit = args::int(&args[2])?;
    if bit != 0 && bit != 1 {
        return Err(BAD_BITPOS_BIT);
    }
    let bit = bit == 1;
    // A missing key is an endless run of zeros.
    let Some(s) = read_str(&mut ctx.ks, &args[1])? else {
        ctx.out.int(if bit { -1 } else { 0 });
        return Ok(());
    };
    let bytes = str_bytes(s);
    let range = match args.len() {
        3 => None,
        4..=6 => {
            let start = args::int(&args[3])?;
            let unit = if args.len() == 6 { unit(&args[5])? } else { Unit::Byte };
            let end = if args.len() >= 5 { Some(args::int(&args[4])?) } else { None };
            Some(PosRange { start, end, unit })
        }
        _ => return Err(SYNTAX),
    };
    ctx.out.int(bits::bitpos(&bytes, bit, range));
    Ok(())
}

fn bitop_kind(arg: &[u8]) -> Result<BitOp, CmdError> {
    [("and", BitOp::And), ("or", BitOp::Or), ("xor", BitOp::Xor), ("not", BitOp::Not)]
        .into_iter()
        .find(|(name, _)| is(arg, name))
        .map(|(_, op)| op)
        .ok_or(SYNTAX)
}

/// BITOP <AND | OR | XOR | NOT> destkey key [key ...]: the length of the
/// result, which replaces destkey (an empty result deletes it).
fn bitop(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let op = bitop_kind(&args[1])?;
    if op == BitOp::Not && args.len() != 4 {
        return Err(BITOP_NOT_ONE_KEY);
    }
    let (dest, sources) = (&args[2], &args[3..]);
    // Look every source up for reading first (expiry, statistics, types),
    // then borrow them all at once to compute without copying.
    for key in sources {
        read_str(&mut ctx.ks, key)?;
    }
    let result = {
        let ks = &ctx.ks;
        let held: Vec<Cow<[u8]>> = sources
            .iter()
            .map(|key| match ks.peek(key).map(|e| &e.value) {
                Some(Value::Str(s)) => str_bytes(s),
                _ => Cow::Borrowed(&[][..]),
            })
            .collect();
        let views: Vec<&[u8]> = held.iter().map(|b| b.as_ref()).collect();
        bits::bitop(op, &views)
    };
    let len = result.len();
    if len > 0 {
        let value = Value::Str(StrValue::Raw(Box::new(result)));
        ctx.ks.set(dest, value, false, NotifyClass::String, "set");
    } else {
        ctx.ks.delete(dest);
    }
    ctx.out.int(len as i64);
    Ok(())
}

/// One BITFIELD operation, parsed.
#[derive(Clone, Copy, Debug)]
struct FieldOp {
    kind: FieldOpKind,
    ty: FieldType,
    offset: u64,
    /// SET's value or INCRBY's increment.
    value: i64,
    overflow: OverflowMode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldOpKind {
    Get,
    Set,
    IncrBy,
}

/// Parses BITFIELD's operations in order, each under the OVERFLOW mode in
/// force where it appears. Returns them and the highest bit any write
/// touches (`None` when nothing writes).
fn parse_field_ops(
    ks: &KeyspaceView,
    args: &[Bytes],
) -> Result<(Vec<FieldOp>, Option<u64>), CmdError> {
    let mut ops = Vec::new();
    let mut overflow = OverflowMode::Wrap;
    let mut highest_write: Option<u64> = None;
    let mut j = 2;
    while j < args.len() {
        let remaining = args.len() - j - 1;
        let sub = &args[j];
        let kind = if is(sub, "get") && remaining >= 2 {
            FieldOpKind::Get
        } else if is(sub, "set") && remaining >= 3 {
            FieldOpKind::Set
        } else if is(sub, "incrby") && remaining >= 3 {
            FieldOpKind::IncrBy
        } else if is(sub, "overflow") && remaining >= 1 {
            overflow = overflow_mode(&args[j + 1])?;
            j += 2;
            continue;
        } else {
            return Err(SYNTAX);
        };
        let ty = FieldType::parse(&args[j + 1]).ok_or(BAD_FIELD_TYPE)?;
        let offset = bit_offset(ks, &args[j + 2], Some(ty.bits))?;
        let mut value = 0;
        if kind != FieldOpKind::Get {
            let last = offset + ty.bits as u64 - 1;
            highest_write = Some(highest_write.map_or(last, |h| h.max(last)));
            value = args::int(&args[j + 3])?;
        }
        ops.push(FieldOp { kind, ty, offset, value, overflow });
        j += if kind == FieldOpKind::Get { 3 } else { 4 };
    }
    Ok((ops, highest_write))
}

fn overflow_mode(arg: &[u8]) -> Result<OverflowMode, CmdError> {
    if is(arg, "wrap") {
        Ok(OverflowMode::Wrap)
    } else if is(arg, "sat") {
        Ok(OverflowMode::Sat)
    } else if is(arg, "fail") {
        Ok(OverflowMode::Fail)
    } else {
        Err(BAD_OVERFLOW)
    }
}

/// The value a GET reads (as the reply's signed 64-bit integer).
fn field_get(bytes: &[u8], op: &FieldOp) -> i64 {
    if op.ty.signed {
        bits::get_signed(bytes, op.offset, op.ty.bits)
    } else {
        bits::get_unsigned(bytes, op.offset, op.ty.bits) as i64
    }
}

/// Runs a SET or INCRBY on `bytes`: `Some((reply, changed))`, or `None` when
/// OVERFLOW FAIL refused it (nothing written). SET replies the old value,
/// INCRBY the new one.
fn field_write(bytes: &mut [u8], op: &FieldOp) -> Option<(i64, bool)> {
    let (offset, width, mode) = (op.offset, op.ty.bits, op.overflow);
    let incr = op.kind == FieldOpKind::IncrBy;
    if op.ty.signed {
        let old = bits::get_signed(bytes, offset, width);
        let new = if incr {
            bits::check_signed_overflow(old, op.value, width, mode)
                .resolve(old.wrapping_add(op.value))?
        } else {
            bits::check_signed_overflow(op.value, 0, width, mode).resolve(op.value)?
        };
        bits::set_signed(bytes, offset, width, new);
        Some((if incr { new } else { old }, old != new))
    } else {
        let old = bits::get_unsigned(bytes, offset, width);
        let new = if incr {
            let sum = old.wrapping_add(op.value as u64);
            bits::check_unsigned_overflow(old, op.value, width, mode).resolve(sum)?
        } else {
            bits::check_unsigned_overflow(op.value as u64, 0, width, mode)
                .resolve(op.value as u64)?
        };
        bits::set_unsigned(bytes, offset, width, new);
        Some(((if incr { new } else { old }) as i64, old != new))
    }
}

/// BITFIELD key [GET type offset | SET type offset value |
/// INCRBY type offset increment | OVERFLOW WRAP|SAT|FAIL ...].
fn bitfield(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bitfield_generic(ctx, args, false)
}

/// BITFIELD_RO key [GET type offset ...].
fn bitfield_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    bitfield_generic(ctx, args, true)
}

/// Redis's `bitfieldGeneric`: parse everything first, then look the key up
/// for reading (only GETs) or writing (grown to the highest bit written),
/// then run the operations in order.
fn bitfield_generic(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> CmdResult {
    let key = &args[1];
    let (ops, highest_write) = parse_field_ops(&ctx.ks, args)?;
    let Some(max_bit) = highest_write else {
        let s = read_str(&mut ctx.ks, key)?;
        let bytes = s.map(str_bytes).unwrap_or_default();
        ctx.out.array(ops.len());
        for op in &ops {
            ctx.out.int(field_get(&bytes, op));
        }
        return Ok(());
    };
    if read_only {
        return Err(BITFIELD_RO_GET_ONLY);
    }
    let (mut updater, grew) = bits_for_write(&mut ctx.ks, key, max_bit)?;
    let bytes = updater.update(NotifyClass::String, "setbit");
    ctx.out.array(ops.len());
    let mut changed = grew;
    for op in &ops {
        if op.kind == FieldOpKind::Get {
            ctx.out.int(field_get(bytes, op));
            continue;
        }
        match field_write(bytes, op) {
            Some((reply, differs)) => {
                ctx.out.int(reply);
                changed |= differs;
            }
            None => ctx.out.null(),
        }
    }
    // Redis signals only when an operation wrote; a key created or grown
    // with every write refused by FAIL changed too, so it is signalled here.
    if !changed {
        updater.unchanged();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::ClientInfo;
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardSettings, ShardState};

    /// A keyspace with a recording funnel, driven through the command table.
    struct Bench {
        keyspace: Keyspace,
        state: ShardState,
        client: ClientInfo,
    }

    impl Bench {
        fn new() -> Self {
            Bench {
                keyspace: Keyspace::scratch(1),
                state: ShardState::recording(ShardSettings::default()),
                client: ClientInfo::default(),
            }
        }

        fn run(&mut self, line: &str) -> String {
            let args: Vec<Bytes> =
                line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
            let out = test_call(&mut self.keyspace, &mut self.state, args, self.client, 1_000);
            String::from_utf8_lossy(&out).into_owned()
        }

        /// The events fired since the last call, as `key:event`.
        fn events(&mut self) -> Vec<String> {
            let events = self.state.funnel.take_events();
            events
                .iter()
                .map(|e| format!("{}:{}", String::from_utf8_lossy(&e.key), e.event))
                .collect()
        }

        fn encoding(&self, key: &str) -> &'static str {
            self.keyspace.db(0).get(key.as_bytes()).map_or("none", |e| e.value.encoding())
        }
    }

    #[test]
    fn setbit_fires_only_on_change() {
        let mut b = Bench::new();
        assert_eq!(b.run("SETBIT k 7 1"), ":0\r\n");
        assert_eq!(b.events(), ["k:setbit"]);
        assert_eq!(b.run("SETBIT k 7 1"), ":1\r\n");
        assert!(b.events().is_empty(), "same bit, same length: no change");
        assert_eq!(b.run("SETBIT k 15 0"), ":0\r\n");
        assert_eq!(b.events(), ["k:setbit"], "the string grew");
        assert_eq!(b.run("SETBIT k x 1"), "-ERR bit offset is not an integer or out of range\r\n");
        assert!(b.events().is_empty());
    }

    #[test]
    fn in_place_changes_make_strings_raw() {
        let mut b = Bench::new();
        b.run("SET n 12");
        assert_eq!(b.encoding("n"), "int");
        assert_eq!(b.run("GETBIT n 2"), ":1\r\n");
        assert_eq!(b.encoding("n"), "int", "reads leave the encoding alone");
        b.run("SETBIT n 0 0");
        assert_eq!(b.encoding("n"), "raw");
        b.run("SET e abc");
        b.run("BITFIELD e GET u8 0");
        assert_eq!(b.encoding("e"), "embstr");
        b.run("BITFIELD e SET u8 0 65");
        assert_eq!(b.encoding("e"), "raw");
        assert_eq!(b.run("GET e"), "$3\r\nAbc\r\n");
        b.run("BITOP OR d e");
        assert_eq!(b.encoding("d"), "raw", "BITOP stores a raw string, as Redis");
    }

    #[test]
    fn bitop_events_set_and_del() {
        let mut b = Bench::new();
        b.run("SET a x");
        b.events();
        assert_eq!(b.run("BITOP NOT d a"), ":1\r\n");
        assert_eq!(b.events(), ["d:set"]);
        assert_eq!(b.run("BITOP AND d missing other"), ":0\r\n");
        assert_eq!(b.events(), ["d:del"]);
        assert_eq!(b.run("BITOP AND d missing other"), ":0\r\n");
        assert!(b.events().is_empty(), "nothing to delete");
    }

    #[test]
    fn bitfield_events() {
        let mut b = Bench::new();
        assert_eq!(b.run("BITFIELD k GET u8 0"), "*1\r\n:0\r\n");
        assert!(b.events().is_empty());
        assert_eq!(b.encoding("k"), "none", "GET does not create the key");
        assert_eq!(b.run("BITFIELD k SET u8 0 0"), "*1\r\n:0\r\n");
        assert_eq!(b.events(), ["k:setbit"], "created");
        assert_eq!(b.run("BITFIELD k SET u8 0 0"), "*1\r\n:0\r\n");
        assert!(b.events().is_empty(), "same value");
        assert_eq!(b.run("BITFIELD k INCRBY u8 0 1 INCRBY u8 0 1"), "*2\r\n:1\r\n:2\r\n");
        assert_eq!(b.events(), ["k:setbit"], "one event per command");
        assert_eq!(b.run("BITFIELD k OVERFLOW FAIL INCRBY u8 0 254"), "*1\r\n$-1\r\n");
        assert!(b.events().is_empty());
        assert_eq!(
            b.run("BITFIELD_RO k SET u8 0 1"),
            "-ERR BITFIELD_RO only supports the GET subcommand\r\n"
        );
        assert!(b.events().is_empty());
    }

    #[test]
    fn offsets_are_bounded_by_proto_max_bulk_len() {
        let mut b = Bench::new();
        b.state.settings.max_bulk_len = 16;
        assert_eq!(b.run("SETBIT k 127 1"), ":0\r\n");
        assert_eq!(
            b.run("SETBIT k 128 1"),
            "-ERR bit offset is not an integer or out of range\r\n"
        );
        assert_eq!(b.run("GETBIT k 128"), "-ERR bit offset is not an integer or out of range\r\n");
        assert_eq!(b.run("BITFIELD k GET u8 #15"), "*1\r\n:1\r\n");
        assert_eq!(
            b.run("BITFIELD k GET u8 #16"),
            "-ERR bit offset is not an integer or out of range\r\n"
        );
        assert_eq!(
            b.run("BITFIELD k GET i64 #9223372036854775807"),
            "-ERR bit offset is not an integer or out of range\r\n"
        );
    }

    #[test]
    fn refused_fields_are_resp3_nulls() {
        let mut b = Bench::new();
        b.client.resp = ringdb_protocol::Resp::V3;
        assert_eq!(b.run("BITFIELD k OVERFLOW FAIL INCRBY u2 0 5 GET u2 0"), "*2\r\n_\r\n:0\r\n");
    }
}

/// BITFIELD's key flags for given arguments (Redis's `bitfieldGetKeys`):
/// read-only when every operation is a GET (a syntax error counts as a
/// write, the safer reading).
fn bitfield_key_flags(args: &[Bytes]) -> u32 {
    let mut i = 2;
    while i < args.len() {
        let left = args.len() - i - 1;
        let a = &args[i];
        if a.eq_ignore_ascii_case(b"get") && left >= 2 {
            i += 3;
        } else if a.eq_ignore_ascii_case(b"overflow") && left >= 1 {
            i += 2;
        } else {
            return kf::RW | kf::ACCESS | kf::UPDATE;
        }
    }
    kf::RO | kf::ACCESS
}
