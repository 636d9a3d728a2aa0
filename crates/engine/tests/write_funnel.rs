//! The write funnel contract (ARCHITECTURE.md, "One write funnel"): every
//! command flagged `write` in the command table fires the funnel for each key
//! it changes, and read commands never fire it.
//!
//! Every row that runs on a shard must have a sample invocation here; a new
//! command without one fails the test, so the contract cannot silently lapse.

use bytes::Bytes;
use ringdb_engine::command::{table, ClientInfo, Exec};
use ringdb_engine::keyspace::{Entry, Keyspace, StrValue, Value};
use ringdb_engine::shard::{call, now_ms, Caller, Clock, ShardSettings, ShardState};
use ringdb_engine::ShardCommand;
use ringdb_types::limits::Limits;
use ringdb_types::list::{End, List};
use ringdb_types::stream::{AddId, GroupFrom, Stream, StreamId};
use ringdb_types::zset::{AddFlags, ZSet};
use std::collections::BTreeSet;

/// (row, command line, keys it must report as changed).
const SAMPLES: &[(&str, &str, &[&str])] = &[
    // Strings.
    ("get", "GET s", &[]),
    ("set", "SET s v", &["s"]),
    ("setnx", "SETNX new v", &["new"]),
    ("setex", "SETEX s 100 v", &["s"]),
    ("psetex", "PSETEX s 100000 v", &["s"]),
    ("getset", "GETSET s v", &["s"]),
    ("getex", "GETEX s EX 100", &["s"]),
    ("getdel", "GETDEL s", &["s"]),
    ("mget", "MGET s n missing", &[]),
    ("mset", "MSET s 1 new 2", &["s", "new"]),
    ("msetnx", "MSETNX new 1 new2 2", &["new", "new2"]),
    ("append", "APPEND s x", &["s"]),
    ("strlen", "STRLEN s", &[]),
    ("incr", "INCR n", &["n"]),
    ("decr", "DECR n", &["n"]),
    ("incrby", "INCRBY n 5", &["n"]),
    ("decrby", "DECRBY n 5", &["n"]),
    ("incrbyfloat", "INCRBYFLOAT n 1.5", &["n"]),
    ("getrange", "GETRANGE s 0 1", &[]),
    ("substr", "SUBSTR s 0 1", &[]),
    ("setrange", "SETRANGE s 1 x", &["s"]),
    ("lcs", "LCS s n", &[]),
    // Bitmaps.
    ("setbit", "SETBIT b 3 1", &["b"]),
    ("getbit", "GETBIT b 3", &[]),
    ("bitcount", "BITCOUNT b", &[]),
    ("bitpos", "BITPOS b 1", &[]),
    ("bitop", "BITOP AND dest s n", &["dest"]),
    ("bitfield", "BITFIELD b SET u8 0 255", &["b"]),
    ("bitfield_ro", "BITFIELD_RO b GET u8 0", &[]),
    // Keyspace.
    ("del", "DEL s missing", &["s"]),
    ("unlink", "UNLINK s", &["s"]),
    ("exists", "EXISTS s missing", &[]),
    ("touch", "TOUCH s", &[]),
    ("type", "TYPE s", &[]),
    ("rename", "RENAME s new", &["s", "new"]),
    ("renamenx", "RENAMENX s new", &["s", "new"]),
    ("copy", "COPY s new", &["new"]),
    ("sort", "SORT l ALPHA STORE new", &["new"]),
    ("sort_ro", "SORT_RO l ALPHA LIMIT 0 2", &[]),
    ("move", "MOVE s 1", &["s"]),
    ("expire", "EXPIRE s 100", &["s"]),
    ("pexpire", "PEXPIRE s 100000", &["s"]),
    ("expireat", "EXPIREAT s 99999999999", &["s"]),
    ("pexpireat", "PEXPIREAT s 99999999999000", &["s"]),
    ("ttl", "TTL t", &[]),
    ("pttl", "PTTL t", &[]),
    ("expiretime", "EXPIRETIME t", &[]),
    ("pexpiretime", "PEXPIRETIME t", &[]),
    ("persist", "PERSIST t", &["t"]),
    // "\0\x03r13\n\0yG;_[-d$" is the DUMP payload of "r13", chosen for
    // a checksum with no space in it.
    ("dump", "DUMP s", &[]),
    ("restore", "RESTORE new 0 \0\x03r13\n\0yG;_[-d$", &["new"]),
    ("object|encoding", "OBJECT ENCODING s", &[]),
    ("object|freq", "OBJECT FREQ s", &[]),
    ("object|idletime", "OBJECT IDLETIME s", &[]),
    ("object|refcount", "OBJECT REFCOUNT s", &[]),
    ("object|help", "OBJECT HELP", &[]),
    ("memory|usage", "MEMORY USAGE h SAMPLES 0", &[]),
    ("memory|help", "MEMORY HELP", &[]),
    ("lolwut", "LOLWUT VERSION 5 1 1 1", &[]),
    // Streams.
    ("xadd", "XADD x * f v", &["x"]),
    ("xlen", "XLEN x", &[]),
    ("xrange", "XRANGE x - +", &[]),
    ("xrevrange", "XREVRANGE x + -", &[]),
    ("xdel", "XDEL x 1-0", &["x"]),
    ("xtrim", "XTRIM x MAXLEN 0", &["x"]),
    ("xread", "XREAD STREAMS x 0", &[]),
    ("xreadgroup", "XREADGROUP GROUP g c STREAMS x >", &["x"]),
    ("xgroup|create", "XGROUP CREATE x g2 0", &["x"]),
    ("xgroup|setid", "XGROUP SETID x g 0", &["x"]),
    ("xgroup|destroy", "XGROUP DESTROY x g", &["x"]),
    ("xgroup|createconsumer", "XGROUP CREATECONSUMER x g c2", &["x"]),
    ("xgroup|delconsumer", "XGROUP DELCONSUMER x g c", &["x"]),
    ("xgroup|help", "XGROUP HELP", &[]),
    ("xack", "XACK x g 1-0", &["x"]),
    ("xpending", "XPENDING x g - + 10", &[]),
    ("xclaim", "XCLAIM x g c2 0 1-0", &["x"]),
    ("xautoclaim", "XAUTOCLAIM x g c2 0 0", &["x"]),
    ("xinfo|stream", "XINFO STREAM x FULL", &[]),
    ("xinfo|groups", "XINFO GROUPS x", &[]),
    ("xinfo|consumers", "XINFO CONSUMERS x g", &[]),
    ("xinfo|help", "XINFO HELP", &[]),
    ("xsetid", "XSETID x 5-0", &["x"]),
    // Sets.
    ("sadd", "SADD st x", &["st"]),
    ("srem", "SREM st a", &["st"]),
    ("scard", "SCARD st", &[]),
    ("sismember", "SISMEMBER st a", &[]),
    ("smismember", "SMISMEMBER st a z", &[]),
    ("smembers", "SMEMBERS st", &[]),
    ("srandmember", "SRANDMEMBER st -5", &[]),
    ("spop", "SPOP st 2", &["st"]),
    ("smove", "SMOVE st new a", &["st", "new"]),
    ("sinter", "SINTER st missing", &[]),
    ("sintercard", "SINTERCARD 2 st st LIMIT 1", &[]),
    ("sunion", "SUNION st missing", &[]),
    ("sdiff", "SDIFF st missing", &[]),
    ("sinterstore", "SINTERSTORE new st st", &["new"]),
    ("sunionstore", "SUNIONSTORE s st", &["s"]),
    ("sdiffstore", "SDIFFSTORE new st missing", &["new"]),
    ("sscan", "SSCAN st 0 MATCH * COUNT 5", &[]),
    // Sorted sets.
    ("zadd", "ZADD z 5 e", &["z"]),
    ("zincrby", "ZINCRBY z 1 a", &["z"]),
    ("zrem", "ZREM z a", &["z"]),
    ("zcard", "ZCARD z", &[]),
    ("zcount", "ZCOUNT z 0 10", &[]),
    ("zlexcount", "ZLEXCOUNT z - +", &[]),
    ("zscore", "ZSCORE z a", &[]),
    ("zmscore", "ZMSCORE z a b", &[]),
    ("zrank", "ZRANK z a", &[]),
    ("zrevrank", "ZREVRANK z a WITHSCORE", &[]),
    ("zrange", "ZRANGE z 0 -1 WITHSCORES", &[]),
    ("zrangestore", "ZRANGESTORE new z 0 1", &["new"]),
    ("zrevrange", "ZREVRANGE z 0 -1", &[]),
    ("zrangebyscore", "ZRANGEBYSCORE z 1 2", &[]),
    ("zrevrangebyscore", "ZREVRANGEBYSCORE z 2 1", &[]),
    ("zrangebylex", "ZRANGEBYLEX z - +", &[]),
    ("zrevrangebylex", "ZREVRANGEBYLEX z + -", &[]),
    ("zremrangebyrank", "ZREMRANGEBYRANK z 0 0", &["z"]),
    ("zremrangebyscore", "ZREMRANGEBYSCORE z 1 2", &["z"]),
    ("zremrangebylex", "ZREMRANGEBYLEX z - +", &["z"]),
    ("zpopmin", "ZPOPMIN z", &["z"]),
    ("zpopmax", "ZPOPMAX z 5", &["z"]),
    ("zmpop", "ZMPOP 2 missing z MIN", &["z"]),
    ("bzpopmin", "BZPOPMIN missing z 0", &["z"]),
    ("bzpopmax", "BZPOPMAX z 0.5", &["z"]),
    ("bzmpop", "BZMPOP 0 2 missing z MAX COUNT 2", &["z"]),
    ("zrandmember", "ZRANDMEMBER z -5 WITHSCORES", &[]),
    ("zunion", "ZUNION 2 z missing WITHSCORES", &[]),
    ("zinter", "ZINTER 1 z", &[]),
    ("zdiff", "ZDIFF 2 z missing", &[]),
    ("zunionstore", "ZUNIONSTORE new 2 z missing", &["new"]),
    ("zinterstore", "ZINTERSTORE z 2 z z", &["z"]),
    ("zdiffstore", "ZDIFFSTORE new 1 z", &["new"]),
    ("zintercard", "ZINTERCARD 1 z", &[]),
    ("zscan", "ZSCAN z 0", &[]),
    // Geo (a sorted set whose scores are geohashes: `z`'s small scores sit
    // near longitude -180, latitude -85).
    ("geoadd", "GEOADD g 13.361389 38.115556 Palermo", &["g"]),
    ("geodist", "GEODIST z a b km", &[]),
    ("geohash", "GEOHASH z a missing", &[]),
    ("geopos", "GEOPOS z a missing", &[]),
    ("georadius", "GEORADIUS z -180 -85 500 km STORE new", &["new"]),
    ("georadius_ro", "GEORADIUS_RO z -180 -85 500 km WITHDIST", &[]),
    ("georadiusbymember", "GEORADIUSBYMEMBER z a 100 km STOREDIST new", &["new"]),
    ("georadiusbymember_ro", "GEORADIUSBYMEMBER_RO z a 100 km", &[]),
    ("geosearch", "GEOSEARCH z FROMMEMBER a BYBOX 10 10 km", &[]),
    ("geosearchstore", "GEOSEARCHSTORE new z FROMLONLAT -180 -85 BYRADIUS 500 km", &["new"]),
    // Lists.
    ("lpush", "LPUSH l x", &["l"]),
    ("rpush", "RPUSH new x y", &["new"]),
    ("lpushx", "LPUSHX l x", &["l"]),
    ("rpushx", "RPUSHX l x", &["l"]),
    ("lpop", "LPOP l", &["l"]),
    ("rpop", "RPOP l 5", &["l"]),
    ("llen", "LLEN l", &[]),
    ("lrange", "LRANGE l 0 -1", &[]),
    ("lindex", "LINDEX l 1", &[]),
    ("lset", "LSET l 0 x", &["l"]),
    ("linsert", "LINSERT l BEFORE b x", &["l"]),
    ("lrem", "LREM l 0 a", &["l"]),
    ("ltrim", "LTRIM l 1 -1", &["l"]),
    ("lpos", "LPOS l b", &[]),
    ("lmove", "LMOVE l new LEFT RIGHT", &["l", "new"]),
    ("rpoplpush", "RPOPLPUSH l new", &["l", "new"]),
    ("lmpop", "LMPOP 2 missing l LEFT COUNT 2", &["l"]),
    ("blpop", "BLPOP missing l 0", &["l"]),
    ("brpop", "BRPOP l 1", &["l"]),
    ("blmove", "BLMOVE l new LEFT RIGHT 0", &["l", "new"]),
    ("brpoplpush", "BRPOPLPUSH l new 0", &["l", "new"]),
    ("blmpop", "BLMPOP 0 2 missing l LEFT COUNT 2", &["l"]),
    // Hashes.
    ("hset", "HSET h f v new v", &["h"]),
    ("hsetnx", "HSETNX h new v", &["h"]),
    ("hmset", "HMSET h f v", &["h"]),
    ("hget", "HGET h f", &[]),
    ("hmget", "HMGET h f g", &[]),
    ("hgetall", "HGETALL h", &[]),
    ("hdel", "HDEL h f g", &["h"]),
    ("hlen", "HLEN h", &[]),
    ("hstrlen", "HSTRLEN h f", &[]),
    ("hexists", "HEXISTS h f", &[]),
    ("hkeys", "HKEYS h", &[]),
    ("hvals", "HVALS h", &[]),
    ("hincrby", "HINCRBY h n 2", &["h"]),
    ("hincrbyfloat", "HINCRBYFLOAT h n 2.5", &["h"]),
    ("hrandfield", "HRANDFIELD h -5 WITHVALUES", &[]),
    ("hscan", "HSCAN h 0", &[]),
    // Scripting: no write flag (a script's writes are its commands').
    ("eval", "EVAL return 0", &[]),
    ("evalsha", "EVALSHA 0000000000000000000000000000000000000000 0", &[]),
    ("eval_ro", "EVAL_RO return 0", &[]),
    ("evalsha_ro", "EVALSHA_RO 0000000000000000000000000000000000000000 0", &[]),
    ("fcall", "FCALL nosuch 0", &[]),
    ("fcall_ro", "FCALL_RO nosuch 0", &[]),
    // HyperLogLog ("a" raises a register of the empty "hll").
    ("pfadd", "PFADD hll a", &["hll"]),
    ("pfcount", "PFCOUNT hll", &[]),
    ("pfmerge", "PFMERGE dest hll", &["dest"]),
    ("pfdebug", "PFDEBUG ENCODING hll", &[]),
    ("pfselftest", "PFSELFTEST", &[]),
    // Bloom filters.
    ("bf.reserve", "BF.RESERVE newbf 0.01 100", &["newbf"]),
    ("bf.add", "BF.ADD bf x", &["bf"]),
    ("bf.madd", "BF.MADD bf x y", &["bf"]),
    ("bf.insert", "BF.INSERT bf ITEMS x", &["bf"]),
    ("bf.exists", "BF.EXISTS bf x", &[]),
    ("bf.mexists", "BF.MEXISTS bf x y", &[]),
    ("bf.info", "BF.INFO bf", &[]),
    ("bf.card", "BF.CARD bf", &[]),
    ("bf.scandump", "BF.SCANDUMP bf 0", &[]),
    ("bf.loadchunk", "BF.LOADCHUNK bf 2 x", &["bf"]),
    ("bf.debug", "BF.DEBUG bf", &[]),
];

/// A keyspace with a string `s`, a counter `n`, a bitmap `b`, a string `t`
/// with a TTL, a set `st` of `a`, `b`, `c`, a sorted set `z` (a:1 b:2 c:3),
/// a list `l` of `a b c`, a hash `h` (fields `f`, `g`, `n`), an empty
/// HyperLogLog `hll` and a Bloom filter `bf`.
fn fixture() -> Keyspace {
    let mut ks = Keyspace::scratch(16);
    let db = ks.db_mut(0);
    let hll = ringdb_types::hll::new_sparse();
    for (k, v) in
        [("s", &b"hello"[..]), ("n", b"10"), ("b", b"\x00\xff"), ("t", b"x"), ("hll", &hll)]
    {
        db.insert(Box::new(Entry::new(k.as_bytes(), Value::Str(StrValue::from_bytes(v)))));
    }
    let limits = ringdb_types::limits::Limits::default();
    let mut set = ringdb_types::set::Set::new_for(b"a", 1, &limits);
    for m in [&b"a"[..], b"b", b"c"] {
        set.add(m, &limits);
    }
    db.insert(Box::new(Entry::new(b"st", Value::Set(set))));
    let bf = ringdb_types::bloom::BloomFilter::new(100, 0.01, 2, true, 1 << 20).expect("a filter");
    db.insert(Box::new(Entry::new(b"bf", Value::Bloom(Box::new(bf)))));
    db.set_expire(b"t", Some(now_ms() + 1_000_000));
    let mut z = ZSet::new();
    for (member, score) in [("a", 1.0), ("b", 2.0), ("c", 3.0)] {
        let _ = z.add(member.as_bytes(), score, AddFlags::default(), &Limits::default());
    }
    db.insert(Box::new(Entry::new(b"z", Value::ZSet(z))));
    let mut list = List::new();
    list.push(End::Tail, &[b"a", b"b", b"c"], &ShardSettings::default().limits);
    db.insert(Box::new(Entry::new(b"l", Value::List(list))));
    let mut hash = ringdb_types::hash::Hash::new();
    let limits = ringdb_types::limits::Limits::default();
    let pairs: [(&[u8], &[u8]); 3] = [(b"f", b"v"), (b"g", b"w"), (b"n", b"1")];
    hash.set_many(&pairs, &limits);
    db.insert(Box::new(Entry::new(b"h", Value::Hash(hash))));
    // A stream with entries 1-0 and 2-0, and group g whose consumer c has
    // 1-0 pending.
    let mut x = Stream::new();
    for ms in [1, 2] {
        x.append(AddId::Exact(StreamId::new(ms, 0)), &[b"f", b"v"], 0, &limits).expect("append");
    }
    x.create_group(b"g", StreamId::MIN, 0);
    x.read_group(b"g", b"c", GroupFrom::New, 1, false, 0);
    db.insert(Box::new(Entry::new(b"x", Value::Stream(Box::new(x)))));
    ks
}

fn run(line: &str) -> (Vec<u8>, BTreeSet<String>, usize) {
    let args: Vec<Bytes> = line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
    let reg = table().resolve(&args).unwrap_or_else(|e| panic!("{line}: {e}"));
    let cmd = ShardCommand { id: reg.id, spec: reg.spec, args, client: ClientInfo::default() };
    let mut ks = fixture();
    let mut state = ShardState::recording(ShardSettings::default());
    let mut out = Vec::new();
    call(&mut ks, &mut state, &cmd, &mut out, &mut Clock::at(now_ms()), Caller::Client);
    let events = state.funnel.take_events();
    let keys = events.iter().map(|e| String::from_utf8_lossy(&e.key).into_owned()).collect();
    (out, keys, events.len())
}

#[test]
fn writes_fire_the_funnel_for_every_changed_key_and_reads_never_do() {
    let mut problems = Vec::new();
    let shard_rows: Vec<_> = table()
        .all_rows()
        .into_iter()
        .filter(|r| matches!(r.spec.exec, Exec::Shard(_) | Exec::Split { .. }))
        .collect();
    for reg in &shard_rows {
        let Some((_, line, expected)) = SAMPLES.iter().find(|(name, _, _)| *name == reg.full_name)
        else {
            problems.push(format!("{}: no sample in SAMPLES", reg.full_name));
            continue;
        };
        let (reply, changed, events) = run(line);
        let reply = String::from_utf8_lossy(&reply);
        if reg.spec.is_write() {
            for key in expected.iter() {
                if !changed.contains(*key) {
                    problems.push(format!(
                        "{line}: changed {key} without firing the funnel (reply {reply:?})"
                    ));
                }
            }
            let args: BTreeSet<&str> = line.split(' ').skip(1).collect();
            for key in &changed {
                if !args.contains(key.as_str()) {
                    problems.push(format!(
                        "{line}: fired the funnel for {key}, which it does not name"
                    ));
                }
            }
        } else if events > 0 {
            problems.push(format!("{line}: a read command fired the funnel for {changed:?}"));
        } else if !expected.is_empty() {
            problems.push(format!("{line}: sample expects changes from a read command"));
        }
    }
    assert!(problems.is_empty(), "write funnel contract broken:\n{}", problems.join("\n"));
    assert!(shard_rows.len() >= SAMPLES.len(), "SAMPLES names rows that do not exist");
}
