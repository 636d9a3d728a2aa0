//! HyperLogLog: PFADD, PFCOUNT, PFMERGE, PFDEBUG, PFSELFTEST, as Redis's
//! `hyperloglog.c` runs them. An HLL is a string value holding Redis's exact
//! bytes (`ringdb_types::hll`), so GET, SET, DUMP-like copies and the string
//! commands see what Redis would.
//!
//! PFCOUNT and PFMERGE of keys on several shards run on a gathered copy
//! (the router's cross-shard scheme); PFCOUNT of several keys never writes.

use crate::command::error::{CmdError, CmdResult, WRONG_TYPE};
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::{Entry, StrValue, Value};
use bytes::Bytes;
use ringdb_types::hll::{self, Encoding, REGISTERS};

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("pfadd", -2, WRITE | DENYOOM | FAST, Exec::Shard(pfadd))
        .keys(&[KeySpec::one(1, kf::RW | kf::INSERT)])
        .acl(acl::HYPERLOGLOG)
        .doc(
            "hyperloglog",
            "2.8.9",
            "Adds elements to a HyperLogLog key. Creates the key if it doesn't exist.",
            "O(1) to add every element.",
            "key [element [element ...]]",
        ),
    CommandSpec::new("pfcount", -2, READONLY | MAY_REPLICATE | WATCHABLE, Exec::Shard(pfcount))
        .keys(&[KeySpec::range(1, -1, 1, kf::RW | kf::ACCESS).notes(
            "RW because it may change the internal representation of the key, and propagate to replicas",
        )])
        .acl(acl::HYPERLOGLOG)
        .doc(
            "hyperloglog",
            "2.8.9",
            "Returns the approximated cardinality of the set(s) observed by the HyperLogLog key(s).",
            "O(1) with a very small average constant time when called with a single key. O(N) with N being the number of keys, and much bigger constant times, when called with multiple keys.",
            "key [key ...]",
        ),
    CommandSpec::new("pfmerge", -2, WRITE | DENYOOM, Exec::Shard(pfmerge))
        .keys(&[
            KeySpec::one(1, kf::RW | kf::ACCESS | kf::INSERT),
            KeySpec::range(2, -1, 1, kf::RO | kf::ACCESS),
        ])
        .acl(acl::HYPERLOGLOG)
        .doc(
            "hyperloglog",
            "2.8.9",
            "Merges one or more HyperLogLog values into a single key.",
            "O(N) to merge N HyperLogLogs, but with high constant times.",
            "destkey [sourcekey [sourcekey ...]]",
        ),
    CommandSpec::new("pfdebug", 3, WRITE | DENYOOM | ADMIN, Exec::Shard(pfdebug))
        .keys(&[KeySpec::one(2, kf::RW | kf::ACCESS)])
        .acl(acl::HYPERLOGLOG)
        .doc(
            "hyperloglog",
            "2.8.9",
            "Internal commands for debugging HyperLogLog values.",
            "N/A",
            "subcommand key",
        ),
    CommandSpec::new("pfselftest", 1, ADMIN, Exec::Shard(pfselftest))
        .acl(acl::HYPERLOGLOG)
        .doc(
            "hyperloglog",
            "2.8.9",
            "An internal command for testing HyperLogLog values.",
            "N/A",
            "",
        ),
];

/// A string that is not an HLL (Redis's `isHLLObjectOrReply`).
pub const NOT_HLL: CmdError =
    CmdError::new("WRONGTYPE Key is not a valid HyperLogLog string value.");
/// An HLL whose registers do not decode.
pub const CORRUPT_HLL: CmdError = CmdError::new("INVALIDOBJ Corrupted HLL object detected");

fn corrupt(_: hll::Corrupt) -> CmdError {
    CORRUPT_HLL
}

/// The bytes of a string value that is an HLL. Integer-encoded strings are
/// never HLLs (Redis requires an sds-encoded string).
fn hll_bytes(value: &Value) -> Result<&[u8], CmdError> {
    let bytes: &[u8] = match value {
        Value::Str(StrValue::Emb(b)) => b.as_slice(),
        Value::Str(StrValue::Raw(v)) => v.as_slice(),
        Value::Str(StrValue::Shared(b)) => &b[..],
        Value::Str(StrValue::Int(_)) => return Err(NOT_HLL),
        _ => return Err(WRONG_TYPE),
    };
    hll::check(bytes).map_err(|_| NOT_HLL)?;
    Ok(bytes)
}

/// The HLL at `key` for reading; `None` when the key does not exist.
fn read_hll<'a>(ks: &'a mut KeyspaceView, key: &[u8]) -> Result<Option<&'a [u8]>, CmdError> {
    match ks.read(key) {
        None => Ok(None),
        Some(e) => hll_bytes(&e.value).map(Some),
    }
}

/// The HLL in `value` as a growable buffer (Redis's
/// `dbUnshareStringValue`: the string becomes `raw`), after the checks.
fn hll_mut(value: &mut Value) -> Result<&mut Vec<u8>, CmdError> {
    hll_bytes(value)?;
    match value {
        Value::Str(s) => Ok(s.make_raw()),
        _ => Err(WRONG_TYPE),
    }
}

/// The HLL at `key` for writing, created empty when missing. The flag says
/// whether it was created.
fn write_hll<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<(Updater<'v, Entry>, bool), CmdError> {
    if !ks.exists_for_write(key) {
        let empty = Value::Str(StrValue::Raw(Box::new(hll::new_sparse())));
        return Ok((ks.create_as(key, empty, |e| Some(e))?, true));
    }
    let entry = ks.write(key).ok_or(WRONG_TYPE)?;
    hll_bytes(&entry.value)?;
    Ok((entry, false))
}

/// PFADD key [element ...]: 1 when a register changed (or the key was
/// created), 0 otherwise; only a change is a write.
fn pfadd(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let key = &args[1];
    let sparse_max = ctx.ks.state.settings.hll_sparse_max_bytes;
    let (mut entry, mut updated) = write_hll(&mut ctx.ks, key)?;
    let hll = hll_mut(&mut entry.update(NotifyClass::String, "pfadd").value)?;
    let mut result = Ok(());
    for element in &args[2..] {
        match hll::add(hll, element, sparse_max) {
            Ok(changed) => updated |= changed,
            Err(e) => {
                result = Err(corrupt(e));
                break;
            }
        }
    }
    if updated {
        hll::invalidate_cache(hll);
    } else {
        entry.unchanged();
    }
    drop(entry);
    result?;
    ctx.out.int(updated as i64);
    Ok(())
}

/// PFCOUNT key [key ...]: one key uses (and refreshes) the cached count in
/// the header; several keys count the union of their registers and change
/// nothing.
fn pfcount(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    if args.len() > 2 {
        let mut max = [0u8; REGISTERS];
        for key in &args[1..] {
            if let Some(bytes) = read_hll(&mut ctx.ks, key)? {
                hll::merge_into(&mut max, bytes).map_err(corrupt)?;
            }
        }
        ctx.out.int(hll::count_registers(&max) as i64);
        return Ok(());
    }
    // The cached count lives in the value: refreshing it reshapes the
    // value, the set it describes stays.
    let Some(entry) = ctx.ks.read_to_reshape(&args[1]) else {
        ctx.out.int(0);
        return Ok(());
    };
    let hll = hll_mut(&mut entry.value)?;
    let (count, cached) = hll::cached_count(hll).map_err(corrupt)?;
    if cached {
        // Storing the cache changes the bytes but not the set the HLL
        // describes: Redis counts it dirty (for propagation) without a
        // keyspace event, and so does ringdb.
        ctx.ks.reshaped();
    }
    ctx.out.int(count as i64);
    Ok(())
}

/// PFMERGE destkey [sourcekey ...]: the union of all the HLLs (the
/// destination included) stored in the destination, dense when any input
/// is dense.
fn pfmerge(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut max = [0u8; REGISTERS];
    let mut use_dense = false;
    for key in &args[1..] {
        if let Some(bytes) = read_hll(&mut ctx.ks, key)? {
            use_dense |= hll::encoding(bytes) == Encoding::Dense;
            hll::merge_into(&mut max, bytes).map_err(corrupt)?;
        }
    }
    let dest = &args[1];
    let sparse_max = ctx.ks.state.settings.hll_sparse_max_bytes;
    let (mut entry, _) = write_hll(&mut ctx.ks, dest)?;
    // Redis signals PFMERGE as a PFADD: a mass-add of elements.
    let hll = hll_mut(&mut entry.update(NotifyClass::String, "pfadd").value)?;
    hll::store_max(hll, &max, use_dense, sparse_max).map_err(corrupt)?;
    drop(entry);
    ctx.out.ok();
    Ok(())
}

/// PFDEBUG GETREG | DECODE | ENCODING | TODENSE key. Converting to dense
/// changes the bytes, not the set: counted dirty, no keyspace event, as in
/// Redis.
fn pfdebug(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let sub = String::from_utf8_lossy(&args[1]).to_ascii_lowercase();
    let Some(mut entry) = ctx.ks.write(&args[2]) else {
        return Err(CmdError::new("ERR The specified key does not exist"));
    };
    let hll = hll_mut(&mut entry.reshape().value)?;
    let mut converted = false;
    match sub.as_str() {
        "getreg" => {
            converted = hll::to_dense_encoding(hll).map_err(corrupt)?;
            let registers = hll::registers(hll);
            ctx.out.array(registers.len());
            for r in registers {
                ctx.out.int(r as i64);
            }
        }
        "decode" => {
            if hll::encoding(hll) != Encoding::Sparse {
                return Err(CmdError::new("ERR HLL encoding is not sparse"));
            }
            let text = hll::decode_sparse(hll);
            ctx.out.bulk(text.as_bytes());
        }
        "encoding" => ctx.out.simple(hll::encoding(hll).name()),
        "todense" => {
            converted = hll::to_dense_encoding(hll).map_err(corrupt)?;
            ctx.out.int(converted as i64);
        }
        _ => {
            return Err(CmdError::owned(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(&args[1])
            )))
        }
    }
    drop(entry);
    if converted {
        ctx.ks.reshaped();
    }
    Ok(())
}

/// PFSELFTEST: Redis's self test of the register packing and the estimator
/// (about 10 million additions; it holds the shard meanwhile, as it holds
/// Redis).
fn pfselftest(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let sparse_max = ctx.ks.state.settings.hll_sparse_max_bytes;
    let state = &mut *ctx.ks.state;
    let mut random = || state.random() as u32;
    hll::self_test(&mut random, sparse_max).map_err(|e| CmdError::owned(format!("ERR {e}")))?;
    ctx.out.ok();
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::command::ClientInfo;
    use crate::keyspace::Keyspace;
    use crate::shard::{test_call, ShardSettings, ShardState};
    use bytes::Bytes;
    use ringdb_protocol::Resp;

    fn run(ks: &mut Keyspace, state: &mut ShardState, args: &[&[u8]]) -> String {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
        let out = test_call(
            ks,
            state,
            args,
            ClientInfo { resp: Resp::V2, ..ClientInfo::default() },
            1_000,
        );
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn writes_fire_the_funnel_only_on_change() {
        let mut ks = Keyspace::scratch(1);
        let mut state = ShardState::recording(ShardSettings::default());
        assert_eq!(run(&mut ks, &mut state, &[b"PFADD", b"h", b"a"]), ":1\r\n");
        assert_eq!(state.funnel.take_events().len(), 1);
        assert_eq!(run(&mut ks, &mut state, &[b"PFADD", b"h", b"a"]), ":0\r\n");
        assert!(state.funnel.take_events().is_empty());
        // The cache write of PFCOUNT is no event.
        assert_eq!(run(&mut ks, &mut state, &[b"PFCOUNT", b"h"]), ":1\r\n");
        assert!(state.funnel.take_events().is_empty());
        assert_eq!(run(&mut ks, &mut state, &[b"PFCOUNT", b"h", b"missing"]), ":1\r\n");
        assert_eq!(run(&mut ks, &mut state, &[b"PFDEBUG", b"ENCODING", b"h"]), "+sparse\r\n");
        assert_eq!(run(&mut ks, &mut state, &[b"PFDEBUG", b"TODENSE", b"h"]), ":1\r\n");
        assert_eq!(run(&mut ks, &mut state, &[b"PFDEBUG", b"TODENSE", b"h"]), ":0\r\n");
        assert_eq!(
            run(&mut ks, &mut state, &[b"PFDEBUG", b"DECODE", b"h"]),
            "-ERR HLL encoding is not sparse\r\n"
        );
        assert!(state.funnel.take_events().is_empty());
    }

    #[test]
    fn errors_are_redis_texts() {
        let mut ks = Keyspace::scratch(1);
        let mut state = ShardState::recording(ShardSettings::default());
        run(&mut ks, &mut state, &[b"SET", b"s", b"not an hll"]);
        run(&mut ks, &mut state, &[b"SET", b"n", b"12345"]);
        for key in [&b"s"[..], b"n"] {
            assert_eq!(
                run(&mut ks, &mut state, &[b"PFADD", key, b"x"]),
                "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n"
            );
        }
        // A stale cache, so that PFCOUNT reads the registers.
        let mut corrupt = ringdb_types::hll::new_sparse();
        ringdb_types::hll::invalidate_cache(&mut corrupt);
        corrupt.extend_from_slice(b"hello");
        run(&mut ks, &mut state, &[b"SET", b"c", &corrupt]);
        assert_eq!(
            run(&mut ks, &mut state, &[b"PFCOUNT", b"c"]),
            "-INVALIDOBJ Corrupted HLL object detected\r\n"
        );
        assert_eq!(
            run(&mut ks, &mut state, &[b"PFDEBUG", b"nope", b"missing"]),
            "-ERR The specified key does not exist\r\n"
        );
        run(&mut ks, &mut state, &[b"PFADD", b"h"]);
        assert_eq!(
            run(&mut ks, &mut state, &[b"PFDEBUG", b"nope", b"h"]),
            "-ERR Unknown PFDEBUG subcommand 'nope'\r\n"
        );
    }
}
