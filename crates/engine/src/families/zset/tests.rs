//! Sorted-set commands run through the command table on one keyspace:
//! replies byte for byte in RESP2 and RESP3, the funnel events each write
//! fires, encodings at the thresholds.

use crate::command::ClientInfo;
use crate::funnel::NotifyClass;
use crate::keyspace::{Keyspace, Value};
use crate::shard::{test_call, ShardSettings, ShardState};
use bytes::Bytes;
use ringdb_protocol::Resp;

struct Db {
    ks: Keyspace,
    state: ShardState,
}

impl Db {
    fn new() -> Db {
        Db { ks: Keyspace::scratch(1), state: ShardState::recording(ShardSettings::default()) }
    }

    fn exec(&mut self, resp: Resp, args: Vec<Bytes>) -> String {
        let out = test_call(
            &mut self.ks,
            &mut self.state,
            args,
            ClientInfo { resp, ..ClientInfo::default() },
            1_000,
        );
        String::from_utf8_lossy(&out).into_owned()
    }

    /// Runs a space-separated command line in RESP2.
    fn run(&mut self, line: &str) -> String {
        self.exec(Resp::V2, words(line))
    }

    fn run3(&mut self, line: &str) -> String {
        self.exec(Resp::V3, words(line))
    }

    /// The events fired since the last call, as `(key, event)`.
    fn events(&mut self) -> Vec<(String, &'static str)> {
        let events = self.state.funnel.take_events();
        events
            .into_iter()
            .map(|e| (String::from_utf8_lossy(&e.key).into_owned(), e.event))
            .collect()
    }

    fn encoding(&self, key: &str) -> Option<&'static str> {
        self.ks.db(0).get(key.as_bytes()).map(|e| e.value.encoding())
    }

    fn set_limits(&mut self, entries: usize, value: usize) {
        self.state.settings.limits.zset_max_listpack_entries = entries;
        self.state.settings.limits.zset_max_listpack_value = value;
    }
}

fn words(line: &str) -> Vec<Bytes> {
    line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
}

/// `*n` then each item as a bulk string.
fn bulks(items: &[&str]) -> String {
    let mut s = format!("*{}\r\n", items.len());
    for i in items {
        s += &format!("${}\r\n{i}\r\n", i.len());
    }
    s
}

#[test]
fn zadd_options_replies_and_errors() {
    let mut db = Db::new();
    assert_eq!(db.run("ZADD z 1 a 2 b"), ":2\r\n");
    assert_eq!(db.events(), [("z".into(), "zadd")]);
    assert_eq!(db.run("ZADD z 1 a"), ":0\r\n");
    assert_eq!(db.events(), [], "no change, no event");
    assert_eq!(db.run("ZADD z CH 5 a 3 c"), ":2\r\n");
    assert_eq!(db.run("ZADD z XX 9 new 6 a"), ":0\r\n");
    assert_eq!(db.run("ZSCORE z a"), "$1\r\n6\r\n");
    assert_eq!(db.run("ZADD z NX 100 a 4 d"), ":1\r\n");
    assert_eq!(db.run("ZADD z GT CH 1 a 7 b"), ":1\r\n");
    assert_eq!(db.run("ZADD z LT CH 1 a 70 b"), ":1\r\n");
    assert_eq!(db.run("ZADD z XX GT CH 10 a 10 zz"), ":1\r\n");
    assert_eq!(db.run("ZADD z INCR 2.5 a"), "$4\r\n12.5\r\n");
    assert_eq!(db.events().last(), Some(&("z".into(), "zincr")));
    assert_eq!(db.run("ZADD z INCR GT -1 a"), "$-1\r\n");
    assert_eq!(db.run3("ZADD z INCR NX 1 a"), "_\r\n");
    assert_eq!(db.run3("ZINCRBY z 1 a"), ",13.5\r\n");
    assert_eq!(db.run("ZADD missing XX 1 a"), ":0\r\n");
    assert_eq!(db.run("ZADD missing XX INCR 1 a"), "$-1\r\n");
    assert_eq!(db.run("EXISTS missing"), ":0\r\n");
    for (line, err) in [
        ("ZADD z 1 a 2 b 3", "-ERR syntax error\r\n"),
        ("ZADD z 1 a 2", "-ERR syntax error\r\n"),
        ("ZADD z NX XX 1 a", "-ERR XX and NX options at the same time are not compatible\r\n"),
        (
            "ZADD z GT LT 1 a",
            "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
        ),
        (
            "ZADD z NX GT 1 a",
            "-ERR GT, LT, and/or NX options at the same time are not compatible\r\n",
        ),
        ("ZADD z INCR 1 a 2 b", "-ERR INCR option supports a single increment-element pair\r\n"),
        ("ZADD z 1 a nan b", "-ERR value is not a valid float\r\n"),
        ("ZADD z 1 a x b", "-ERR value is not a valid float\r\n"),
        ("ZINCRBY z abc a", "-ERR value is not a valid float\r\n"),
        ("ZINCRBY z nx a", "-ERR syntax error\r\n"),
    ] {
        assert_eq!(db.run(line), err, "{line}");
    }
    assert_eq!(db.run("ZSCORE z b"), "$1\r\n7\r\n", "a bad score changed nothing");
    db.run("ZADD inf 0 x");
    db.run("ZADD inf +inf x");
    assert_eq!(db.run("ZINCRBY inf -inf x"), "-ERR resulting score is not a number (NaN)\r\n");
    assert_eq!(db.run("ZSCORE inf x"), "$3\r\ninf\r\n");
    db.run("SET s v");
    assert!(db.run("ZADD s 1 a").starts_with("-WRONGTYPE"));
}

#[test]
fn removals_delete_emptied_keys_with_redis_events() {
    let mut db = Db::new();
    db.run("ZADD z 1 a 2 b 3 c");
    db.events();
    assert_eq!(db.run("ZREM z a nope"), ":1\r\n");
    assert_eq!(db.events(), [("z".into(), "zrem")]);
    assert_eq!(db.run("ZREM z nope"), ":0\r\n");
    assert_eq!(db.events(), []);
    assert_eq!(db.run("ZREM z b c b"), ":2\r\n");
    assert_eq!(db.events(), [("z".into(), "zrem"), ("z".into(), "del")]);
    assert_eq!(db.run("EXISTS z"), ":0\r\n");
    for (line, reply, event) in [
        ("ZREMRANGEBYRANK z 0 1", ":2\r\n", "zremrangebyrank"),
        ("ZREMRANGEBYSCORE z (1 3", ":2\r\n", "zremrangebyscore"),
        ("ZREMRANGEBYLEX z [a (c", ":2\r\n", "zremrangebylex"),
    ] {
        db.run("DEL z");
        db.run("ZADD z 1 a 2 b 3 c");
        db.events();
        assert_eq!(db.run(line), reply, "{line}");
        assert_eq!(db.events(), [("z".into(), event)], "{line}");
    }
    db.run("ZADD z 1 a 2 b 3 c");
    db.events();
    assert_eq!(db.run("ZREMRANGEBYRANK z 0 -1"), ":3\r\n");
    assert_eq!(db.events(), [("z".into(), "zremrangebyrank"), ("z".into(), "del")]);
    assert_eq!(db.run("ZREMRANGEBYRANK z 0 -1"), ":0\r\n");
    assert_eq!(db.run("ZREMRANGEBYRANK z a 1"), "-ERR value is not an integer or out of range\r\n");
    assert_eq!(db.run("ZREMRANGEBYSCORE z a 1"), "-ERR min or max is not a float\r\n");
    assert_eq!(db.run("ZREMRANGEBYLEX z a b"), "-ERR min or max not valid string range item\r\n");
}

#[test]
fn range_commands_in_both_encodings() {
    for (entries, encoding) in [(128, "listpack"), (0, "skiplist")] {
        let mut db = Db::new();
        db.set_limits(entries, 64);
        db.run("ZADD z 1 a 2 b 3 c 4 d 5 e");
        db.events();
        assert_eq!(db.encoding("z"), Some(encoding));
        assert_eq!(db.run("ZRANGE z 0 -1"), bulks(&["a", "b", "c", "d", "e"]));
        assert_eq!(db.run("ZRANGE z -2 100 WITHSCORES"), bulks(&["d", "4", "e", "5"]));
        assert_eq!(db.run("ZRANGE z 0 1 REV"), bulks(&["e", "d"]));
        assert_eq!(db.run("ZREVRANGE z 0 0 WITHSCORES"), bulks(&["e", "5"]));
        assert_eq!(db.run("ZRANGE z (1 3 BYSCORE"), bulks(&["b", "c"]));
        assert_eq!(db.run("ZRANGE z 3 (1 BYSCORE REV"), bulks(&["c", "b"]));
        assert_eq!(db.run("ZRANGE z -inf +inf BYSCORE LIMIT 1 2"), bulks(&["b", "c"]));
        assert_eq!(db.run("ZRANGE z -inf +inf BYSCORE LIMIT -1 2"), "*0\r\n");
        assert_eq!(db.run("ZRANGE z -inf +inf BYSCORE LIMIT 3 -1"), bulks(&["d", "e"]));
        assert_eq!(db.run("ZRANGEBYSCORE z 2 4 WITHSCORES LIMIT 0 1"), bulks(&["b", "2"]));
        assert_eq!(db.run("ZREVRANGEBYSCORE z +inf (4"), bulks(&["e"]));
        assert_eq!(db.run("ZRANGE z [b (d BYLEX"), bulks(&["b", "c"]));
        assert_eq!(db.run("ZRANGE z + - BYLEX REV LIMIT 0 2"), bulks(&["e", "d"]));
        assert_eq!(db.run("ZRANGEBYLEX z - [b"), bulks(&["a", "b"]));
        assert_eq!(db.run("ZREVRANGEBYLEX z [c - LIMIT 1 5"), bulks(&["b", "a"]));
        assert_eq!(db.run("ZRANGE z 0 -1 LIMIT 1 -1"), bulks(&["a", "b", "c", "d", "e"]));
        assert_eq!(db.run("ZCOUNT z (1 +inf"), ":4\r\n");
        assert_eq!(db.run("ZLEXCOUNT z (a [c"), ":2\r\n");
        assert_eq!(db.run("ZCARD z"), ":5\r\n");
        assert_eq!(db.run("ZRANK z c"), ":2\r\n");
        assert_eq!(db.run("ZREVRANK z c WITHSCORE"), "*2\r\n:2\r\n$1\r\n3\r\n");
        assert_eq!(db.run3("ZRANK z c WITHSCORE"), "*2\r\n:2\r\n,3\r\n");
        assert_eq!(db.run("ZRANK z nope WITHSCORE"), "*-1\r\n");
        assert_eq!(db.run("ZRANK z nope"), "$-1\r\n");
        assert_eq!(
            db.run3("ZRANGE z 0 1 WITHSCORES"),
            "*2\r\n*2\r\n$1\r\na\r\n,1\r\n*2\r\n$1\r\nb\r\n,2\r\n"
        );
        assert_eq!(db.run("ZMSCORE z a nope e"), "*3\r\n$1\r\n1\r\n$-1\r\n$1\r\n5\r\n");
        assert!(db.events().is_empty(), "reads fire nothing");
    }
}

#[test]
fn range_errors_in_redis_order() {
    let mut db = Db::new();
    db.run("ZADD z 1 a");
    db.run("SET s v");
    for (line, err) in [
        (
            "ZRANGE z 0 -1 LIMIT 1 2",
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            "ZRANGE z [a [b BYLEX WITHSCORES",
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        (
            "ZRANGEBYLEX z [a [b WITHSCORES",
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        ("ZREVRANGE z 0 -1 BYSCORE", "ERR syntax error"),
        ("ZRANGEBYSCORE z 0 -1 REV", "ERR syntax error"),
        ("ZRANGE z 0 -1 BYSCORE BYLEX", "ERR syntax error"),
        ("ZRANGE z 0 -1 LIMIT 1", "ERR syntax error"),
        ("ZRANGE z 0 1 BYSCORE LIMIT x 1", "ERR value is not an integer or out of range"),
        ("ZRANGE z a 1", "ERR value is not an integer or out of range"),
        ("ZRANGE z a 1 BYSCORE", "ERR min or max is not a float"),
        ("ZRANGE z a 1 BYLEX", "ERR min or max not valid string range item"),
        ("ZRANGESTORE d z 0 -1 WITHSCORES", "ERR syntax error"),
        ("ZRANGE s 0 -1", "WRONGTYPE Operation against a key holding the wrong kind of value"),
        ("ZRANGE s a 1", "ERR value is not an integer or out of range"),
        ("ZRANK z a WITHSCORES", "ERR syntax error"),
        ("ZRANK z a WITHSCORE x", "ERR wrong number of arguments for 'zrank' command"),
        ("ZCOUNT z 1 nan", "ERR min or max is not a float"),
        ("ZLEXCOUNT z a b", "ERR min or max not valid string range item"),
    ] {
        assert_eq!(db.run(line), format!("-{err}\r\n"), "{line}");
    }
    assert_eq!(db.run("ZRANGE missing 0 -1"), "*0\r\n");
    assert_eq!(db.run("ZCOUNT missing 0 1"), ":0\r\n");
}

#[test]
fn zrangestore_stores_and_deletes() {
    let mut db = Db::new();
    db.set_limits(1, 64);
    db.run("ZADD src 1 a 2 b 3 c");
    db.events();
    assert_eq!(db.run("ZRANGESTORE d src 0 0"), ":1\r\n");
    assert_eq!(db.encoding("d"), Some("listpack"));
    assert_eq!(db.events(), [("d".into(), "zrangestore")]);
    assert_eq!(db.run("ZRANGESTORE d src (3 1 BYSCORE REV LIMIT 0 5"), ":2\r\n");
    assert_eq!(db.encoding("d"), Some("skiplist"));
    assert_eq!(db.run("ZRANGE d 0 -1 WITHSCORES"), bulks(&["a", "1", "b", "2"]));
    assert_eq!(db.run("ZRANGESTORE d src 1 (3 BYSCORE REV"), ":0\r\n", "REV takes max then min");
    db.run("ZRANGESTORE d src (3 1 BYSCORE REV");
    db.events();
    assert_eq!(db.run("ZRANGESTORE d src 5 10"), ":0\r\n");
    assert_eq!(db.events(), [("d".into(), "del")]);
    assert_eq!(db.run("ZRANGESTORE d missing 0 -1"), ":0\r\n");
    assert_eq!(db.events(), [], "nothing to delete, no event");
    assert_eq!(db.run("ZRANGESTORE src src 0 0"), ":1\r\n", "source and destination alike");
    assert_eq!(db.run("ZRANGE src 0 -1"), bulks(&["a"]));
}

#[test]
fn pops_in_every_shape() {
    let mut db = Db::new();
    db.run("ZADD z 1 a 2 b 3 c");
    db.events();
    assert_eq!(db.run("ZPOPMIN z"), bulks(&["a", "1"]));
    assert_eq!(db.events(), [("z".into(), "zpopmin")]);
    assert_eq!(db.run3("ZPOPMAX z"), "*2\r\n$1\r\nc\r\n,3\r\n");
    assert_eq!(db.run("ZPOPMIN z 0"), "*0\r\n");
    assert_eq!(db.run3("ZPOPMAX z 5"), "*1\r\n*2\r\n$1\r\nb\r\n,2\r\n");
    assert_eq!(
        db.events(),
        [("z".into(), "zpopmax"), ("z".into(), "zpopmax"), ("z".into(), "del")]
    );
    assert_eq!(db.run("ZPOPMIN z"), "*0\r\n");
    assert_eq!(db.run("ZPOPMIN z -1"), "-ERR value is out of range, must be positive\r\n");
    assert_eq!(db.run("ZPOPMIN z x"), "-ERR value is out of range, must be positive\r\n");
    assert_eq!(db.run("ZPOPMIN z 1 2"), "-ERR syntax error\r\n");
    db.run("ZADD z2 1 a 2 b 3 c");
    assert_eq!(
        db.run("ZMPOP 2 z z2 MAX COUNT 2"),
        "*2\r\n$2\r\nz2\r\n*2\r\n*2\r\n$1\r\nc\r\n$1\r\n3\r\n*2\r\n$1\r\nb\r\n$1\r\n2\r\n"
    );
    assert_eq!(db.run3("ZMPOP 1 z2 MIN"), "*2\r\n$2\r\nz2\r\n*1\r\n*2\r\n$1\r\na\r\n,1\r\n");
    assert_eq!(db.run("ZMPOP 2 z z2 MIN"), "*-1\r\n");
    assert_eq!(db.run3("ZMPOP 1 z MIN"), "_\r\n");
    for (line, err) in [
        ("ZMPOP 0 z MIN", "ERR numkeys should be greater than 0"),
        ("ZMPOP x z MIN", "ERR numkeys should be greater than 0"),
        ("ZMPOP 2 z MIN", "ERR syntax error"),
        ("ZMPOP 1 z LEFT", "ERR syntax error"),
        ("ZMPOP 1 z MIN COUNT 0", "ERR count should be greater than 0"),
        ("ZMPOP 1 z MIN COUNT 1 COUNT 1", "ERR syntax error"),
        ("ZMPOP 1 z MIN COUNT", "ERR syntax error"),
    ] {
        assert_eq!(db.run(line), format!("-{err}\r\n"), "{line}");
    }
    db.run("SET s v");
    assert!(db.run("ZMPOP 2 z s MIN").starts_with("-WRONGTYPE"));
    assert!(db.run("ZPOPMIN s").starts_with("-WRONGTYPE"));
}

#[test]
fn algebra_with_weights_aggregates_and_plain_sets() {
    let mut db = Db::new();
    db.run("ZADD a 1 x 2 y 3 z");
    db.run("ZADD b 10 y 20 z 30 w");
    db.ks.db_mut(0).insert(crate::keyspace::Entry::new(
        b"s",
        Value::Set({
            let mut s = ringdb_types::set::Set::new_intset();
            let limits = ringdb_types::limits::Limits::default();
            s.add(b"x", &limits);
            s.add(b"w", &limits);
            s
        }),
    ));
    assert_eq!(
        db.run("ZUNION 2 a b WITHSCORES"),
        bulks(&["x", "1", "y", "12", "z", "23", "w", "30"])
    );
    assert_eq!(db.run("ZINTER 2 a b AGGREGATE MIN WITHSCORES"), bulks(&["y", "2", "z", "3"]));
    assert_eq!(
        db.run("ZINTER 2 a b WEIGHTS 2 -1 AGGREGATE MAX WITHSCORES"),
        bulks(&["y", "4", "z", "6"])
    );
    assert_eq!(db.run("ZDIFF 2 a b WITHSCORES"), bulks(&["x", "1"]));
    assert_eq!(
        db.run("ZUNION 2 s a WEIGHTS 5 1 WITHSCORES"),
        bulks(&["y", "2", "z", "3", "w", "5", "x", "6"])
    );
    assert_eq!(db.run("ZINTERCARD 2 a b"), ":2\r\n");
    assert_eq!(db.run("ZINTERCARD 2 a b LIMIT 1"), ":1\r\n");
    assert_eq!(db.run("ZINTERCARD 2 a b LIMIT 0"), ":2\r\n");
    assert_eq!(
        db.run3("ZINTER 2 a b WITHSCORES"),
        "*2\r\n*2\r\n$1\r\ny\r\n,12\r\n*2\r\n$1\r\nz\r\n,23\r\n"
    );
    db.events();
    assert_eq!(db.run("ZUNIONSTORE d 3 a b s"), ":4\r\n");
    assert_eq!(db.events(), [("d".into(), "zunionstore")]);
    assert_eq!(db.run("ZINTERSTORE d 2 a s"), ":1\r\n");
    assert_eq!(db.run("ZRANGE d 0 -1 WITHSCORES"), bulks(&["x", "2"]));
    assert_eq!(db.run("ZDIFFSTORE d 2 a a"), ":0\r\n");
    assert_eq!(db.events(), [("d".into(), "zinterstore"), ("d".into(), "del")]);
    assert_eq!(db.run("ZUNION 2 a missing"), bulks(&["x", "y", "z"]));
    // inf * 0 and inf + -inf are 0, never NaN.
    db.run("ZADD i1 +inf m");
    db.run("ZADD i2 -inf m");
    assert_eq!(db.run("ZUNION 2 i1 i2 WITHSCORES"), bulks(&["m", "0"]));
    assert_eq!(db.run("ZINTER 1 i1 WEIGHTS 0 WITHSCORES"), bulks(&["m", "0"]));
    for (line, err) in [
        ("ZUNION 0 a", "ERR at least 1 input key is needed for 'zunion' command"),
        ("ZINTERSTORE d 0 a", "ERR at least 1 input key is needed for 'zinterstore' command"),
        ("ZINTERCARD 0 a", "ERR at least 1 input key is needed for 'zintercard' command"),
        ("ZUNION 3 a b", "ERR syntax error"),
        ("ZUNION x a", "ERR value is not an integer or out of range"),
        ("ZUNION 2 a b WEIGHTS 1", "ERR syntax error"),
        ("ZUNION 2 a b WEIGHTS 1 nan", "ERR weight value is not a float"),
        ("ZUNION 2 a b AGGREGATE AVG", "ERR syntax error"),
        ("ZUNIONSTORE d 2 a b WITHSCORES", "ERR syntax error"),
        ("ZDIFF 2 a b WEIGHTS 1 2", "ERR syntax error"),
        ("ZINTERCARD 2 a b LIMIT -1", "ERR LIMIT can't be negative"),
        ("ZINTERCARD 2 a b LIMIT x", "ERR LIMIT can't be negative"),
        ("ZINTERCARD 2 a b WITHSCORES", "ERR syntax error"),
    ] {
        assert_eq!(db.run(line), format!("-{err}\r\n"), "{line}");
    }
    db.run("SET str v");
    assert!(db.run("ZUNION 2 a str").starts_with("-WRONGTYPE"));
    assert!(db.run("ZUNION 2 str a WEIGHTS x y").starts_with("-WRONGTYPE"), "types before options");
}

/// Stores a plain set at `key` (SADD belongs to the set family).
fn plain_set(db: &mut Db, key: &str, members: &[&str]) {
    let limits = db.state.settings.limits;
    let mut set = ringdb_types::set::Set::new_for(members[0].as_bytes(), members.len(), &limits);
    for m in members {
        set.add(m.as_bytes(), &limits);
    }
    db.ks.db_mut(0).insert(crate::keyspace::Entry::new(key.as_bytes(), Value::Set(set)));
}

/// Redis's own tests of plain sets as inputs (zset.tcl), with the sets in
/// each of their encodings.
#[test]
fn plain_sets_as_inputs_in_every_encoding() {
    for (set_listpack_entries, set_encoding) in [(128, "listpack"), (0, "hashtable")] {
        let mut db = Db::new();
        db.state.settings.limits.set_max_listpack_entries = set_listpack_entries;
        db.state.settings.limits.set_max_listpack_value = 64;
        db.run("ZADD zsetb 1 b 2 c 3 d");
        plain_set(&mut db, "seta", &["a", "b", "c"]);
        let encoding = db.encoding("seta");
        assert_eq!(encoding, Some(set_encoding));
        assert_eq!(db.run("ZUNIONSTORE zsetc 2 seta zsetb WEIGHTS 2 3"), ":4\r\n", "{encoding:?}");
        assert_eq!(
            db.run("ZRANGE zsetc 0 -1 WITHSCORES"),
            bulks(&["a", "2", "b", "5", "c", "8", "d", "9"])
        );
        assert_eq!(db.run("ZINTERSTORE zsetc 2 seta zsetb WEIGHTS 2 3"), ":2\r\n");
        assert_eq!(db.run("ZRANGE zsetc 0 -1 WITHSCORES"), bulks(&["b", "5", "c", "8"]));
        assert_eq!(db.run("ZDIFFSTORE zsetc 2 seta zsetb"), ":1\r\n");
        assert_eq!(db.run("ZRANGE zsetc 0 -1 WITHSCORES"), bulks(&["a", "1"]));
        plain_set(&mut db, "set1", &["a"]);
        plain_set(&mut db, "set2", &["10"]);
        assert_eq!(db.encoding("set2"), Some("intset"));
        assert_eq!(db.run("ZINTERSTORE set3 2 set1 set2"), ":0\r\n");
        plain_set(&mut db, "one", &["100", "101", "102", "103"]);
        plain_set(&mut db, "two", &["100", "200", "201", "202"]);
        db.run("ZADD three 1 500 1 501 1 502 1 503 1 100");
        db.run("ZINTERSTORE to_here 3 one two three WEIGHTS 0 0 1");
        assert_eq!(db.run("ZRANGE to_here 0 -1"), bulks(&["100"]));
        assert_eq!(
            db.run("ZUNION 2 one seta"),
            bulks(&["100", "101", "102", "103", "a", "b", "c"])
        );
    }
}

#[test]
fn store_results_take_the_listpack_when_small() {
    let mut db = Db::new();
    db.set_limits(3, 5);
    db.run("ZADD a 1 x 2 y");
    db.run("ZADD b 3 z 4 w");
    db.run("ZUNIONSTORE d 2 a b");
    assert_eq!(db.encoding("d"), Some("skiplist"), "4 members > 3");
    db.run("ZINTERSTORE d 2 a a");
    assert_eq!(db.encoding("d"), Some("listpack"));
    db.run("ZADD c 1 longmember");
    db.run("ZUNIONSTORE d 1 c");
    assert_eq!(db.encoding("d"), Some("skiplist"), "member longer than 5");
    db.run("ZADD e 1 a 2 b 3 c");
    assert_eq!(db.encoding("e"), Some("listpack"));
    db.run("ZADD e 4 d");
    assert_eq!(db.encoding("e"), Some("skiplist"), "converts past the entry limit");
    db.run("ZADD f 1 abcdef");
    assert_eq!(db.encoding("f"), Some("skiplist"), "a first member past the value limit");
}

#[test]
fn zrandmember_counts_and_shapes() {
    let mut db = Db::new();
    assert_eq!(db.run("ZRANDMEMBER z"), "$-1\r\n");
    assert_eq!(db.run("ZRANDMEMBER z 5"), "*0\r\n");
    db.run("ZADD z 1 a 2 b 3 c");
    assert!(
        ["$1\r\na\r\n", "$1\r\nb\r\n", "$1\r\nc\r\n"].contains(&db.run("ZRANDMEMBER z").as_str())
    );
    assert_eq!(db.run("ZRANDMEMBER z 0"), "*0\r\n");
    assert_eq!(db.run("ZRANDMEMBER z 10 WITHSCORES"), bulks(&["a", "1", "b", "2", "c", "3"]));
    assert!(db.run("ZRANDMEMBER z -10").starts_with("*10\r\n"));
    assert!(db.run("ZRANDMEMBER z -4 WITHSCORES").starts_with("*8\r\n"));
    assert!(db.run3("ZRANDMEMBER z -4 WITHSCORES").starts_with("*4\r\n*2\r\n"));
    assert!(db.run("ZRANDMEMBER z 2").starts_with("*2\r\n"));
    for (line, err) in [
        ("ZRANDMEMBER z -9223372036854775808", "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"),
        ("ZRANDMEMBER z -9223372036854770000 WITHSCORES", "ERR value is out of range"),
        ("ZRANDMEMBER z 1 WITHSCORE", "ERR syntax error"),
        ("ZRANDMEMBER z 1 WITHSCORES x", "ERR syntax error"),
        ("ZRANDMEMBER z x", "ERR value is not an integer or out of range"),
    ] {
        assert_eq!(db.run(line), format!("-{err}\r\n"), "{line}");
    }
    db.state.settings.max_bulk_len = 10_000;
    assert_eq!(
        db.run("ZRANDMEMBER z -100000"),
        "-ERR reply exceeds proto-max-bulk-len; ask for fewer random members\r\n"
    );
    // Distinct picks really are distinct in the big encoding too.
    let mut db = Db::new();
    db.set_limits(0, 0);
    let members: Vec<String> = (0..50).map(|i| format!("{i} m{i}")).collect();
    db.run(&format!("ZADD big {}", members.join(" ")));
    let reply = db.run("ZRANDMEMBER big 20");
    let picked: std::collections::HashSet<&str> =
        reply.split("\r\n").filter(|l| l.starts_with('m')).collect();
    assert_eq!(picked.len(), 20);
}

#[test]
fn zscan_small_and_big() {
    let mut db = Db::new();
    assert_eq!(db.run("ZSCAN z 0"), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(db.run("ZSCAN z x"), "-ERR invalid cursor\r\n");
    db.run("ZADD z 1 a 2.5 b -inf c");
    assert_eq!(db.run("ZSCAN z 0"), "*2\r\n$1\r\n0\r\n*6\r\n$1\r\nc\r\n$4\r\n-inf\r\n$1\r\na\r\n$1\r\n1\r\n$1\r\nb\r\n$3\r\n2.5\r\n");
    assert_eq!(db.run3("ZSCAN z 0 MATCH b"), "*2\r\n$1\r\n0\r\n*2\r\n$1\r\nb\r\n$3\r\n2.5\r\n");
    assert_eq!(db.run("ZSCAN z 0 COUNT 0"), "-ERR syntax error\r\n");
    assert_eq!(db.run("ZSCAN z 0 TYPE zset"), "-ERR syntax error\r\n");
    assert_eq!(db.run("ZSCAN z 0 COUNT"), "-ERR syntax error\r\n");
    let mut db = Db::new();
    let members: Vec<String> = (0..1000).map(|i| format!("{i} m{i}")).collect();
    db.run(&format!("ZADD big {}", members.join(" ")));
    assert_eq!(db.encoding("big"), Some("skiplist"));
    let mut seen = std::collections::HashSet::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let reply = db.run(&format!("ZSCAN big {cursor} COUNT 50 MATCH m*"));
        let lines: Vec<&str> = reply.split("\r\n").collect();
        cursor = lines[2].to_string();
        for pair in lines[4..].chunks(4).filter(|c| c.len() == 4) {
            let (m, s) = (pair[1], pair[3]);
            assert_eq!(m[1..].parse::<f64>().ok(), s.parse::<f64>().ok(), "{m} scores {s}");
            seen.insert(m.to_string());
        }
        calls += 1;
        if cursor == "0" {
            break;
        }
    }
    assert_eq!(seen.len(), 1000);
    assert!(calls > 5, "{calls} calls");
}

#[test]
fn reads_of_other_types_are_wrongtype_and_events_name_classes() {
    let mut db = Db::new();
    db.run("SET s v");
    for line in [
        "ZCARD s",
        "ZSCORE s a",
        "ZMSCORE s a",
        "ZRANK s a",
        "ZCOUNT s 0 1",
        "ZLEXCOUNT s - +",
        "ZRANGEBYSCORE s 0 1",
        "ZRANDMEMBER s",
        "ZRANDMEMBER s 2",
        "ZSCAN s 0",
        "ZREM s a",
        "ZINCRBY s 1 a",
        "ZREMRANGEBYRANK s 0 1",
        "ZRANGESTORE d s 0 1",
        "ZINTERCARD 1 s",
    ] {
        assert!(db.run(line).starts_with("-WRONGTYPE"), "{line}");
    }
    db.state.funnel.take_events();
    // Each write's events, with their notification classes, in Redis's order.
    let classes = |db: &mut Db| -> Vec<(&'static str, NotifyClass)> {
        db.state.funnel.take_events().into_iter().map(|e| (e.event, e.class)).collect()
    };
    db.run("ZADD z 1 a 2 b");
    assert_eq!(classes(&mut db), [("zadd", NotifyClass::ZSet)]);
    db.run("ZDIFFSTORE d 1 z");
    assert_eq!(classes(&mut db), [("zdiffstore", NotifyClass::ZSet)]);
    db.run("ZMPOP 2 nope z MAX COUNT 5");
    assert_eq!(classes(&mut db), [("zpopmax", NotifyClass::ZSet), ("del", NotifyClass::Generic)]);
    db.run("ZDIFFSTORE d 1 z");
    assert_eq!(classes(&mut db), [("del", NotifyClass::Generic)]);
    db.run("ZINCRBY z 1 a");
    assert_eq!(classes(&mut db), [("zincr", NotifyClass::ZSet)]);
}
