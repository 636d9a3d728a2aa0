//! The write funnel contract (ARCHITECTURE.md, "One write funnel"): every
//! command flagged `write` in the command table fires the funnel for each key
//! it changes, and read commands never fire it.
//!
//! The keys a sample changed are found from a signature of every key (its
//! DUMP payload and expiry) before and after, not from a hand list.
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
use std::collections::{BTreeMap, BTreeSet};

/// (row, command line): a sample run of every row that runs on a shard.
const SAMPLES: &[(&str, &str)] = &[
    // Strings.
    ("get", "GET s"),
    ("set", "SET s v"),
    ("setnx", "SETNX new v"),
    ("setex", "SETEX s 100 v"),
    ("psetex", "PSETEX s 100000 v"),
    ("getset", "GETSET s v"),
    ("getex", "GETEX s EX 100"),
    ("getdel", "GETDEL s"),
    ("mget", "MGET s n missing"),
    ("mset", "MSET s 1 new 2"),
    ("msetnx", "MSETNX new 1 new2 2"),
    ("append", "APPEND s x"),
    ("strlen", "STRLEN s"),
    ("incr", "INCR n"),
    ("decr", "DECR n"),
    ("incrby", "INCRBY n 5"),
    ("decrby", "DECRBY n 5"),
    ("incrbyfloat", "INCRBYFLOAT n 1.5"),
    ("getrange", "GETRANGE s 0 1"),
    ("substr", "SUBSTR s 0 1"),
    ("setrange", "SETRANGE s 1 x"),
    ("lcs", "LCS s n"),
    // Bitmaps.
    ("setbit", "SETBIT b 3 1"),
    ("getbit", "GETBIT b 3"),
    ("bitcount", "BITCOUNT b"),
    ("bitpos", "BITPOS b 1"),
    ("bitop", "BITOP AND dest s n"),
    ("bitfield", "BITFIELD b SET u8 0 255"),
    ("bitfield_ro", "BITFIELD_RO b GET u8 0"),
    // Keyspace.
    ("del", "DEL s missing"),
    ("unlink", "UNLINK s"),
    ("exists", "EXISTS s missing"),
    ("touch", "TOUCH s"),
    ("type", "TYPE s"),
    ("rename", "RENAME s new"),
    ("renamenx", "RENAMENX s new"),
    ("copy", "COPY s new"),
    ("sort", "SORT l ALPHA STORE new"),
    ("sort_ro", "SORT_RO l ALPHA LIMIT 0 2"),
    ("move", "MOVE s 1"),
    ("expire", "EXPIRE s 100"),
    ("pexpire", "PEXPIRE s 100000"),
    ("expireat", "EXPIREAT s 99999999999"),
    ("pexpireat", "PEXPIREAT s 99999999999000"),
    ("ttl", "TTL t"),
    ("pttl", "PTTL t"),
    ("expiretime", "EXPIRETIME t"),
    ("pexpiretime", "PEXPIRETIME t"),
    ("persist", "PERSIST t"),
    // "\0\x03r13\n\0yG;_[-d$" is the DUMP payload of "r13", chosen for
    // a checksum with no space in it.
    ("dump", "DUMP s"),
    ("restore", "RESTORE new 0 \0\x03r13\n\0yG;_[-d$"),
    ("object|encoding", "OBJECT ENCODING s"),
    ("object|freq", "OBJECT FREQ s"),
    ("object|idletime", "OBJECT IDLETIME s"),
    ("object|refcount", "OBJECT REFCOUNT s"),
    ("object|help", "OBJECT HELP"),
    ("memory|usage", "MEMORY USAGE h SAMPLES 0"),
    ("memory|help", "MEMORY HELP"),
    ("lolwut", "LOLWUT VERSION 5 1 1 1"),
    // Streams.
    ("xadd", "XADD x * f v"),
    ("xlen", "XLEN x"),
    ("xrange", "XRANGE x - +"),
    ("xrevrange", "XREVRANGE x + -"),
    ("xdel", "XDEL x 1-0"),
    ("xtrim", "XTRIM x MAXLEN 0"),
    ("xread", "XREAD STREAMS x 0"),
    ("xreadgroup", "XREADGROUP GROUP g c STREAMS x >"),
    ("xgroup|create", "XGROUP CREATE x g2 0"),
    ("xgroup|setid", "XGROUP SETID x g 0"),
    ("xgroup|destroy", "XGROUP DESTROY x g"),
    ("xgroup|createconsumer", "XGROUP CREATECONSUMER x g c2"),
    ("xgroup|delconsumer", "XGROUP DELCONSUMER x g c"),
    ("xgroup|help", "XGROUP HELP"),
    ("xack", "XACK x g 1-0"),
    ("xpending", "XPENDING x g - + 10"),
    ("xclaim", "XCLAIM x g c2 0 1-0"),
    ("xautoclaim", "XAUTOCLAIM x g c2 0 0"),
    ("xinfo|stream", "XINFO STREAM x FULL"),
    ("xinfo|groups", "XINFO GROUPS x"),
    ("xinfo|consumers", "XINFO CONSUMERS x g"),
    ("xinfo|help", "XINFO HELP"),
    ("xsetid", "XSETID x 5-0"),
    // Sets.
    ("sadd", "SADD st x"),
    ("srem", "SREM st a"),
    ("scard", "SCARD st"),
    ("sismember", "SISMEMBER st a"),
    ("smismember", "SMISMEMBER st a z"),
    ("smembers", "SMEMBERS st"),
    ("srandmember", "SRANDMEMBER st -5"),
    ("spop", "SPOP st 2"),
    ("smove", "SMOVE st new a"),
    ("sinter", "SINTER st missing"),
    ("sintercard", "SINTERCARD 2 st st LIMIT 1"),
    ("sunion", "SUNION st missing"),
    ("sdiff", "SDIFF st missing"),
    ("sinterstore", "SINTERSTORE new st st"),
    ("sunionstore", "SUNIONSTORE s st"),
    ("sdiffstore", "SDIFFSTORE new st missing"),
    ("sscan", "SSCAN st 0 MATCH * COUNT 5"),
    // Sorted sets.
    ("zadd", "ZADD z 5 e"),
    ("zincrby", "ZINCRBY z 1 a"),
    ("zrem", "ZREM z a"),
    ("zcard", "ZCARD z"),
    ("zcount", "ZCOUNT z 0 10"),
    ("zlexcount", "ZLEXCOUNT z - +"),
    ("zscore", "ZSCORE z a"),
    ("zmscore", "ZMSCORE z a b"),
    ("zrank", "ZRANK z a"),
    ("zrevrank", "ZREVRANK z a WITHSCORE"),
    ("zrange", "ZRANGE z 0 -1 WITHSCORES"),
    ("zrangestore", "ZRANGESTORE new z 0 1"),
    ("zrevrange", "ZREVRANGE z 0 -1"),
    ("zrangebyscore", "ZRANGEBYSCORE z 1 2"),
    ("zrevrangebyscore", "ZREVRANGEBYSCORE z 2 1"),
    ("zrangebylex", "ZRANGEBYLEX z - +"),
    ("zrevrangebylex", "ZREVRANGEBYLEX z + -"),
    ("zremrangebyrank", "ZREMRANGEBYRANK z 0 0"),
    ("zremrangebyscore", "ZREMRANGEBYSCORE z 1 2"),
    ("zremrangebylex", "ZREMRANGEBYLEX z - +"),
    ("zpopmin", "ZPOPMIN z"),
    ("zpopmax", "ZPOPMAX z 5"),
    ("zmpop", "ZMPOP 2 missing z MIN"),
    ("bzpopmin", "BZPOPMIN missing z 0"),
    ("bzpopmax", "BZPOPMAX z 0.5"),
    ("bzmpop", "BZMPOP 0 2 missing z MAX COUNT 2"),
    ("zrandmember", "ZRANDMEMBER z -5 WITHSCORES"),
    ("zunion", "ZUNION 2 z missing WITHSCORES"),
    ("zinter", "ZINTER 1 z"),
    ("zdiff", "ZDIFF 2 z missing"),
    ("zunionstore", "ZUNIONSTORE new 2 z missing"),
    ("zinterstore", "ZINTERSTORE z 2 z z"),
    ("zdiffstore", "ZDIFFSTORE new 1 z"),
    ("zintercard", "ZINTERCARD 1 z"),
    ("zscan", "ZSCAN z 0"),
    // Geo (a sorted set whose scores are geohashes: `z`'s small scores sit
    // near longitude -180, latitude -85).
    ("geoadd", "GEOADD g 13.361389 38.115556 Palermo"),
    ("geodist", "GEODIST z a b km"),
    ("geohash", "GEOHASH z a missing"),
    ("geopos", "GEOPOS z a missing"),
    ("georadius", "GEORADIUS z -180 -85 500 km STORE new"),
    ("georadius_ro", "GEORADIUS_RO z -180 -85 500 km WITHDIST"),
    ("georadiusbymember", "GEORADIUSBYMEMBER z a 100 km STOREDIST new"),
    ("georadiusbymember_ro", "GEORADIUSBYMEMBER_RO z a 100 km"),
    ("geosearch", "GEOSEARCH z FROMMEMBER a BYBOX 10 10 km"),
    ("geosearchstore", "GEOSEARCHSTORE new z FROMLONLAT -180 -85 BYRADIUS 500 km"),
    // Lists.
    ("lpush", "LPUSH l x"),
    ("rpush", "RPUSH new x y"),
    ("lpushx", "LPUSHX l x"),
    ("rpushx", "RPUSHX l x"),
    ("lpop", "LPOP l"),
    ("rpop", "RPOP l 5"),
    ("llen", "LLEN l"),
    ("lrange", "LRANGE l 0 -1"),
    ("lindex", "LINDEX l 1"),
    ("lset", "LSET l 0 x"),
    ("linsert", "LINSERT l BEFORE b x"),
    ("lrem", "LREM l 0 a"),
    ("ltrim", "LTRIM l 1 -1"),
    ("lpos", "LPOS l b"),
    ("lmove", "LMOVE l new LEFT RIGHT"),
    ("rpoplpush", "RPOPLPUSH l new"),
    ("lmpop", "LMPOP 2 missing l LEFT COUNT 2"),
    ("blpop", "BLPOP missing l 0"),
    ("brpop", "BRPOP l 1"),
    ("blmove", "BLMOVE l new LEFT RIGHT 0"),
    ("brpoplpush", "BRPOPLPUSH l new 0"),
    ("blmpop", "BLMPOP 0 2 missing l LEFT COUNT 2"),
    // Hashes.
    ("hset", "HSET h f v new v"),
    ("hsetnx", "HSETNX h new v"),
    ("hmset", "HMSET h f v"),
    ("hget", "HGET h f"),
    ("hmget", "HMGET h f g"),
    ("hgetall", "HGETALL h"),
    ("hdel", "HDEL h f g"),
    ("hlen", "HLEN h"),
    ("hstrlen", "HSTRLEN h f"),
    ("hexists", "HEXISTS h f"),
    ("hkeys", "HKEYS h"),
    ("hvals", "HVALS h"),
    ("hincrby", "HINCRBY h n 2"),
    ("hincrbyfloat", "HINCRBYFLOAT h n 2.5"),
    ("hrandfield", "HRANDFIELD h -5 WITHVALUES"),
    ("hscan", "HSCAN h 0"),
    // Scripting: no write flag (a script's writes are its commands').
    ("eval", "EVAL return 0"),
    ("evalsha", "EVALSHA 0000000000000000000000000000000000000000 0"),
    ("eval_ro", "EVAL_RO return 0"),
    ("evalsha_ro", "EVALSHA_RO 0000000000000000000000000000000000000000 0"),
    ("fcall", "FCALL nosuch 0"),
    ("fcall_ro", "FCALL_RO nosuch 0"),
    // HyperLogLog ("a" raises a register of the empty "hll").
    ("pfadd", "PFADD hll a"),
    ("pfcount", "PFCOUNT hll"),
    ("pfmerge", "PFMERGE dest hll"),
    ("pfdebug", "PFDEBUG ENCODING hll"),
    ("pfselftest", "PFSELFTEST"),
    // Bloom filters.
    ("bf.reserve", "BF.RESERVE newbf 0.01 100"),
    ("bf.add", "BF.ADD bf x"),
    ("bf.madd", "BF.MADD bf x y"),
    ("bf.insert", "BF.INSERT bf ITEMS x"),
    ("bf.exists", "BF.EXISTS bf x"),
    ("bf.mexists", "BF.MEXISTS bf x y"),
    ("bf.info", "BF.INFO bf"),
    ("bf.card", "BF.CARD bf"),
    ("bf.scandump", "BF.SCANDUMP bf 0"),
    ("bf.loadchunk", "BF.LOADCHUNK bf 2 x"),
    ("bf.debug", "BF.DEBUG bf"),
];

/// A keyspace with a string `s`, a counter `n`, a bitmap `b`, a string `t`
/// with a TTL, a set `st` of `a`, `b`, `c`, a sorted set `z` (a:1 b:2 c:3),
/// a list `l` of `a b c`, a hash `h` (fields `f`, `g`, `n`), an empty
/// HyperLogLog `hll` and a Bloom filter `bf`.
fn fixture() -> Keyspace {
    let hll = ringdb_types::hll::new_sparse();
    let mut entries: Vec<Entry> =
        [("s", &b"hello"[..]), ("n", b"10"), ("b", b"\x00\xff"), ("hll", &hll)]
            .into_iter()
            .map(|(k, v)| Entry::new(k.as_bytes(), Value::Str(StrValue::from_bytes(v))))
            .collect();
    let t = Entry::new(b"t", Value::Str(StrValue::from_bytes(b"x")));
    entries.push(t.with_expire(Some(now_ms() + 1_000_000)));
    let limits = Limits::default();
    let mut set = ringdb_types::set::Set::new_for(b"a", 1, &limits);
    for m in [&b"a"[..], b"b", b"c"] {
        set.add(m, &limits);
    }
    entries.push(Entry::new(b"st", Value::Set(set)));
    let bf = ringdb_types::bloom::BloomFilter::new(100, 0.01, 2, true, 1 << 20).expect("a filter");
    entries.push(Entry::new(b"bf", Value::Bloom(Box::new(bf))));
    let mut z = ZSet::new();
    for (member, score) in [("a", 1.0), ("b", 2.0), ("c", 3.0)] {
        let _ = z.add(member.as_bytes(), score, AddFlags::default(), &limits);
    }
    entries.push(Entry::new(b"z", Value::ZSet(z)));
    let mut list = List::new();
    list.push(End::Tail, &[b"a", b"b", b"c"], &ShardSettings::default().limits);
    entries.push(Entry::new(b"l", Value::List(list)));
    let mut hash = ringdb_types::hash::Hash::new();
    let pairs: [(&[u8], &[u8]); 3] = [(b"f", b"v"), (b"g", b"w"), (b"n", b"1")];
    hash.set_many(&pairs, &limits);
    entries.push(Entry::new(b"h", Value::Hash(hash)));
    // A stream with entries 1-0 and 2-0, and group g whose consumer c has
    // 1-0 pending.
    let mut x = Stream::new();
    for ms in [1, 2] {
        x.append(AddId::Exact(StreamId::new(ms, 0)), &[b"f", b"v"], 0, &limits).expect("append");
    }
    x.create_group(b"g", StreamId::MIN, 0);
    x.read_group(b"g", b"c", GroupFrom::New, 1, false, 0);
    entries.push(Entry::new(b"x", Value::Stream(Box::new(x))));
    Keyspace::scratch(16).filled(entries.into_iter().map(|e| (0, e)))
}

/// What every key of `ks` is: (database, key) → its DUMP payload (the
/// whole value: members, encodings' contents, stream groups) and expiry.
fn signatures(ks: &mut Keyspace) -> BTreeMap<(usize, String), (Vec<u8>, Option<u64>)> {
    let mut keys = Vec::new();
    for (db, d) in ks.iter().enumerate() {
        let entries = d.slots().flat_map(|(_, table)| table.iter());
        keys.extend(entries.map(|e| (db, e.key().to_vec(), e.expire_at())));
    }
    let mut state = ShardState::new(ShardSettings::default(), 1);
    let dump = table().get(b"dump").expect("DUMP");
    keys.into_iter()
        .map(|(db, key, expire)| {
            let args = vec![Bytes::from_static(b"DUMP"), Bytes::from(key.clone())];
            let client = ClientInfo { db, ..ClientInfo::default() };
            let cmd = ShardCommand { id: dump.id, spec: dump.spec, args, client };
            let mut payload = Vec::new();
            call(ks, &mut state, &cmd, &mut payload, &mut Clock::at(now_ms()), Caller::Query);
            ((db, String::from_utf8_lossy(&key).into_owned()), (payload, expire))
        })
        .collect()
}

/// Runs `line` on the fixture: its reply, the keys it reported changed, how
/// many events it fired, and the keys whose signature it changed.
fn run(line: &str) -> (Vec<u8>, BTreeSet<String>, usize, BTreeSet<String>) {
    let args: Vec<Bytes> = line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
    let reg = table().resolve(&args).unwrap_or_else(|e| panic!("{line}: {e}"));
    let cmd = ShardCommand { id: reg.id, spec: reg.spec, args, client: ClientInfo::default() };
    let mut ks = fixture();
    let before = signatures(&mut ks);
    let mut state = ShardState::recording(ShardSettings::default());
    let mut out = Vec::new();
    call(&mut ks, &mut state, &cmd, &mut out, &mut Clock::at(now_ms()), Caller::Client);
    let events = state.funnel.take_events();
    let reported = events.iter().map(|e| String::from_utf8_lossy(&e.key).into_owned()).collect();
    let after = signatures(&mut ks);
    let changed = before
        .keys()
        .chain(after.keys())
        .filter(|k| before.get(*k) != after.get(*k))
        .map(|(_, key)| key.clone())
        .collect();
    (out, reported, events.len(), changed)
}

#[test]
fn writes_fire_the_funnel_for_every_changed_key_and_reads_never_do() {
    let mut problems = Vec::new();
    let shard_rows: Vec<_> = table()
        .all_rows()
        .into_iter()
        .filter(|r| matches!(r.spec.exec, Exec::Shard(_) | Exec::Split { .. }))
        .collect();
    let mut changing = 0;
    for reg in &shard_rows {
        let Some((_, line)) = SAMPLES.iter().find(|(name, _)| *name == reg.full_name) else {
            problems.push(format!("{}: no sample in SAMPLES", reg.full_name));
            continue;
        };
        let (reply, reported, events, changed) = run(line);
        let reply = String::from_utf8_lossy(&reply);
        changing += !changed.is_empty() as usize;
        if reg.spec.is_write() {
            for key in changed.difference(&reported) {
                problems.push(format!(
                    "{line}: changed {key} without firing the funnel (reply {reply:?})"
                ));
            }
            let args: BTreeSet<&str> = line.split(' ').skip(1).collect();
            for key in &reported {
                if !args.contains(key.as_str()) {
                    problems.push(format!(
                        "{line}: fired the funnel for {key}, which it does not name"
                    ));
                }
            }
        } else if events > 0 {
            problems.push(format!("{line}: a read command fired the funnel for {reported:?}"));
        } else if !changed.is_empty() {
            problems.push(format!("{line}: a read command changed {changed:?}"));
        }
    }
    assert!(problems.is_empty(), "write funnel contract broken:\n{}", problems.join("\n"));
    assert!(shard_rows.len() >= SAMPLES.len(), "SAMPLES names rows that do not exist");
    // The samples do change keys: a fixture that broke would pass vacuously.
    assert!(changing > 100, "only {changing} samples changed a key");
}
