//! Sorted sets against a real 2-shard server: every command and option,
//! Redis's error texts, WRONGTYPE, listpack → skiplist conversion at the
//! CONFIG thresholds, multi-key commands with keys on both shards, RESP3
//! reply shapes, and ZSCAN's guarantee while the set changes under it.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    match q::<redis::Value>(c, args) {
        Err(e) => e.to_string(),
        Ok(v) => panic!("{args:?} succeeded with {v:?}"),
    }
}

fn strings(c: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    q(c, args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

/// Both keys of `keys_on_two_shards`, plus a third on the first one's shard
/// (same hash tag, so same slot).
fn keys() -> (String, String, String) {
    let (a, b) = keys_on_two_shards();
    let a = format!("{{{a}}}");
    let b = format!("{{{b}}}");
    let a2 = format!("{a}:2");
    (a, b, a2)
}

#[test]
fn zadd_options_scores_and_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, _) = keys();
    for key in [&a, &b] {
        assert_eq!(q::<i64>(&mut c, &["ZADD", key, "1", "x", "2", "y"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["ZADD", key, "CH", "5", "x", "3", "z"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["ZADD", key, "NX", "9", "x", "4", "w"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["ZADD", key, "XX", "CH", "6", "x", "1", "new"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["ZADD", key, "GT", "CH", "1", "x", "7", "y"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["ZADD", key, "LT", "CH", "2", "x", "70", "y"]).unwrap(), 1);
        assert_eq!(q::<String>(&mut c, &["ZADD", key, "INCR", "0.5", "x"]).unwrap(), "2.5");
        assert_eq!(
            q::<Option<String>>(&mut c, &["ZADD", key, "INCR", "GT", "-1", "x"]).unwrap(),
            None
        );
        assert_eq!(
            q::<Option<String>>(&mut c, &["ZADD", key, "INCR", "XX", "1", "nope"]).unwrap(),
            None
        );
        assert_eq!(q::<String>(&mut c, &["ZINCRBY", key, "-3", "x"]).unwrap(), "-0.5");
        assert_eq!(q::<String>(&mut c, &["ZINCRBY", key, "1e2", "fresh"]).unwrap(), "100");
        assert_eq!(q::<i64>(&mut c, &["ZCARD", key]).unwrap(), 5);
        assert_eq!(q::<String>(&mut c, &["ZSCORE", key, "y"]).unwrap(), "7");
    }
    assert_eq!(q::<i64>(&mut c, &["ZADD", "nokey", "XX", "1", "a"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nokey"]).unwrap(), 0);
    q::<i64>(
        &mut c,
        &["ZADD", "f", "1.1", "a", "-inf", "b", "+inf", "c", "1e300", "d", "0.00001", "e"],
    )
    .unwrap();
    assert_eq!(
        strings(&mut c, &["ZRANGE", "f", "0", "-1", "WITHSCORES"]),
        [
            "b",
            "-inf",
            "e",
            "1.0000000000000001e-05",
            "a",
            "1.1000000000000001",
            "d",
            "1.0000000000000001e+300",
            "c",
            "inf"
        ]
    );
    for (args, text) in [
        (&["ZADD", "z", "CH", "1"][..], "syntax error"),
        (&["ZADD", "z", "1", "a", "2"], "syntax error"),
        (
            &["ZADD", "z", "NX", "XX", "1", "a"],
            "XX and NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "GT", "LT", "1", "a"],
            "GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "GT", "NX", "1", "a"],
            "GT, LT, and/or NX options at the same time are not compatible",
        ),
        (
            &["ZADD", "z", "INCR", "1", "a", "2", "b"],
            "INCR option supports a single increment-element pair",
        ),
        (&["ZADD", "z", "nan", "a"], "value is not a valid float"),
        (&["ZADD", "z", "", "a"], "value is not a valid float"),
        (&["ZADD", "z", "1", "a", "x", "b"], "value is not a valid float"),
        (&["ZINCRBY", "z", "x", "a"], "value is not a valid float"),
        (&["ZADD", "z"], "wrong number of arguments for 'zadd' command"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(text), "{args:?}: {e}");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "z"]).unwrap(), 0, "a bad call creates nothing");
    q::<i64>(&mut c, &["ZADD", "inf", "+inf", "m"]).unwrap();
    let e = err(&mut c, &["ZINCRBY", "inf", "-inf", "m"]);
    assert!(e.contains("resulting score is not a number (NaN)"), "{e}");
    let e = err(&mut c, &["ZADD", "inf", "INCR", "-inf", "m"]);
    assert!(e.contains("resulting score is not a number (NaN)"), "{e}");
    assert_eq!(q::<String>(&mut c, &["ZSCORE", "inf", "m"]).unwrap(), "inf");
}

#[test]
fn reads_ranks_counts_and_ranges() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, _) = keys();
    for key in [&a, &b] {
        q::<i64>(&mut c, &["ZADD", key, "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["ZCOUNT", key, "(1", "3"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["ZCOUNT", key, "-inf", "+inf"]).unwrap(), 5);
        assert_eq!(q::<i64>(&mut c, &["ZLEXCOUNT", key, "[b", "(e"]).unwrap(), 3);
        assert_eq!(q::<i64>(&mut c, &["ZRANK", key, "c"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["ZREVRANK", key, "c"]).unwrap(), 2);
        assert_eq!(
            q::<(i64, String)>(&mut c, &["ZRANK", key, "e", "WITHSCORE"]).unwrap(),
            (4, "5".into())
        );
        assert_eq!(
            q::<(i64, String)>(&mut c, &["ZREVRANK", key, "e", "withscore"]).unwrap(),
            (0, "5".into())
        );
        assert_eq!(q::<Option<i64>>(&mut c, &["ZRANK", key, "nope"]).unwrap(), None);
        assert_eq!(
            q::<redis::Value>(&mut c, &["ZRANK", key, "nope", "WITHSCORE"]).unwrap(),
            redis::Value::Nil
        );
        assert_eq!(
            q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", key, "a", "nope", "e"]).unwrap(),
            [Some("1".into()), None, Some("5".into())]
        );
        assert_eq!(strings(&mut c, &["ZRANGE", key, "1", "2"]), ["b", "c"]);
        assert_eq!(
            strings(&mut c, &["ZRANGE", key, "-2", "-1", "WITHSCORES"]),
            ["d", "4", "e", "5"]
        );
        assert_eq!(strings(&mut c, &["ZRANGE", key, "0", "1", "REV"]), ["e", "d"]);
        assert_eq!(strings(&mut c, &["ZRANGE", key, "(1", "3", "BYSCORE"]), ["b", "c"]);
        assert_eq!(
            strings(&mut c, &["ZRANGE", key, "+inf", "-inf", "BYSCORE", "REV", "LIMIT", "1", "2"]),
            ["d", "c"]
        );
        assert_eq!(
            strings(&mut c, &["ZRANGE", key, "[b", "[d", "BYLEX", "LIMIT", "1", "-1"]),
            ["c", "d"]
        );
        assert_eq!(strings(&mut c, &["ZRANGE", key, "+", "(c", "BYLEX", "REV"]), ["e", "d"]);
        assert_eq!(strings(&mut c, &["ZREVRANGE", key, "0", "0", "WITHSCORES"]), ["e", "5"]);
        assert_eq!(
            strings(&mut c, &["ZRANGEBYSCORE", key, "2", "(4", "WITHSCORES"]),
            ["b", "2", "c", "3"]
        );
        assert_eq!(
            strings(&mut c, &["ZRANGEBYSCORE", key, "-inf", "+inf", "LIMIT", "4", "10"]),
            ["e"]
        );
        assert_eq!(
            strings(&mut c, &["ZRANGEBYSCORE", key, "-inf", "+inf", "LIMIT", "-1", "10"]),
            Vec::<String>::new()
        );
        assert_eq!(
            strings(&mut c, &["ZREVRANGEBYSCORE", key, "(5", "3", "LIMIT", "0", "1"]),
            ["d"]
        );
        assert_eq!(strings(&mut c, &["ZRANGEBYLEX", key, "-", "(c"]), ["a", "b"]);
        assert_eq!(
            strings(&mut c, &["ZREVRANGEBYLEX", key, "[c", "-", "LIMIT", "0", "2"]),
            ["c", "b"]
        );
    }
    assert_eq!(strings(&mut c, &["ZRANGE", "missing", "0", "-1"]), Vec::<String>::new());
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "missing"]).unwrap(), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["ZSCORE", "missing", "a"]).unwrap(), None);
    assert_eq!(
        q::<Vec<Option<String>>>(&mut c, &["ZMSCORE", "missing", "a", "b"]).unwrap(),
        [None, None]
    );
    for (args, text) in [
        (
            &["ZRANGE", &a, "0", "-1", "LIMIT", "0", "1"][..],
            "syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ),
        (
            &["ZRANGE", &a, "-", "+", "BYLEX", "WITHSCORES"],
            "syntax error, WITHSCORES not supported in combination with BYLEX",
        ),
        (&["ZRANGE", &a, "0", "-1", "BYSCORE", "BYLEX"], "syntax error"),
        (&["ZREVRANGE", &a, "0", "-1", "REV"], "syntax error"),
        (&["ZRANGEBYSCORE", &a, "0", "1", "BYLEX"], "syntax error"),
        (&["ZRANGE", &a, "x", "1"], "value is not an integer or out of range"),
        (&["ZRANGE", &a, "x", "1", "BYSCORE"], "min or max is not a float"),
        (&["ZRANGEBYSCORE", &a, "1", "nan"], "min or max is not a float"),
        (&["ZCOUNT", &a, "((1", "2"], "min or max is not a float"),
        (&["ZRANGE", &a, "a", "b", "BYLEX"], "min or max not valid string range item"),
        (&["ZLEXCOUNT", &a, "-", "+x"], "min or max not valid string range item"),
        (
            &["ZRANGE", &a, "0", "1", "BYSCORE", "LIMIT", "0", "x"],
            "value is not an integer or out of range",
        ),
        (&["ZRANK", &a, "a", "WITHSCORES"], "syntax error"),
        (&["ZRANK", &a, "a", "WITHSCORE", "x"], "wrong number of arguments for 'zrank' command"),
        (&["ZRANGESTORE", "d", &a, "0", "-1", "WITHSCORES"], "syntax error"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(text), "{args:?}: {e}");
    }
}

#[test]
fn removals_pops_and_empty_keys() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, _) = keys();
    for key in [&a, &b] {
        q::<i64>(
            &mut c,
            &["ZADD", key, "1", "a", "2", "b", "3", "c", "4", "d", "5", "e", "6", "f"],
        )
        .unwrap();
        assert_eq!(q::<i64>(&mut c, &["ZREM", key, "a", "nope", "a"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYRANK", key, "-1", "-1"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", key, "(4", "+inf"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYLEX", key, "[b", "[b"]).unwrap(), 1);
        assert_eq!(strings(&mut c, &["ZRANGE", key, "0", "-1"]), ["c", "d"]);
        assert_eq!(strings(&mut c, &["ZPOPMIN", key]), ["c", "3"]);
        assert_eq!(strings(&mut c, &["ZPOPMAX", key, "10"]), ["d", "4"]);
        assert_eq!(
            q::<i64>(&mut c, &["EXISTS", key]).unwrap(),
            0,
            "popping the last member deletes"
        );
        assert_eq!(strings(&mut c, &["ZPOPMIN", key]), Vec::<String>::new());
        q::<i64>(&mut c, &["ZADD", key, "1", "a"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["ZREM", key, "a"]).unwrap(), 1);
        assert_eq!(
            q::<i64>(&mut c, &["EXISTS", key]).unwrap(),
            0,
            "removing the last member deletes"
        );
        q::<i64>(&mut c, &["ZADD", key, "1", "a", "2", "b"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["ZREMRANGEBYSCORE", key, "-inf", "+inf"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
    }
    q::<i64>(&mut c, &["ZADD", "z", "1", "a"]).unwrap();
    assert_eq!(strings(&mut c, &["ZPOPMIN", "z", "0"]), Vec::<String>::new());
    assert_eq!(q::<i64>(&mut c, &["ZCARD", "z"]).unwrap(), 1);
    for (args, text) in [
        (&["ZPOPMIN", "z", "-1"][..], "value is out of range, must be positive"),
        (&["ZPOPMAX", "z", "x"], "value is out of range, must be positive"),
        (&["ZPOPMIN", "z", "1", "2"], "syntax error"),
        (&["ZREMRANGEBYRANK", "z", "a", "1"], "value is not an integer or out of range"),
        (&["ZREMRANGEBYSCORE", "z", "a", "1"], "min or max is not a float"),
        (&["ZREMRANGEBYLEX", "z", "a", "b"], "min or max not valid string range item"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(text), "{args:?}: {e}");
    }
}

#[test]
fn zmpop_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, _) = keys();
    q::<i64>(&mut c, &["ZADD", &b, "1", "x", "2", "y", "3", "z"]).unwrap();
    type Popped = Option<(String, Vec<(String, String)>)>;
    let got: Popped = q(&mut c, &["ZMPOP", "2", &a, &b, "MAX", "COUNT", "2"]).unwrap();
    assert_eq!(got, Some((b.clone(), vec![("z".into(), "3".into()), ("y".into(), "2".into())])));
    q::<i64>(&mut c, &["ZADD", &a, "5", "p"]).unwrap();
    let got: Popped = q(&mut c, &["ZMPOP", "2", &a, &b, "MIN", "COUNT", "10"]).unwrap();
    assert_eq!(got, Some((a.clone(), vec![("p".into(), "5".into())])));
    let got: Popped = q(&mut c, &["ZMPOP", "2", &a, &b, "min"]).unwrap();
    assert_eq!(got, Some((b.clone(), vec![("x".into(), "1".into())])));
    let got: Popped = q(&mut c, &["ZMPOP", "2", &a, &b, "MIN"]).unwrap();
    assert_eq!(got, None);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a, &b]).unwrap(), 0);
    for (args, text) in [
        (&["ZMPOP", "0", &a, "MIN"][..], "numkeys should be greater than 0"),
        (&["ZMPOP", "-1", &a, "MIN"], "numkeys should be greater than 0"),
        (&["ZMPOP", "1", &a, "MIDDLE"], "syntax error"),
        (&["ZMPOP", "2", &a, "MIN"], "syntax error"),
        (&["ZMPOP", "1", &a, "MIN", "COUNT", "0"], "count should be greater than 0"),
        (&["ZMPOP", "1", &a, "MIN", "COUNT", "1", "COUNT", "2"], "syntax error"),
        (&["ZMPOP", "1", &a, "MIN", "BAD"], "syntax error"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(text), "{args:?}: {e}");
    }
}

#[test]
fn algebra_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, a2) = keys();
    q::<i64>(&mut c, &["ZADD", &a, "1", "x", "2", "y", "3", "z"]).unwrap();
    q::<i64>(&mut c, &["ZADD", &b, "10", "y", "20", "z", "30", "w"]).unwrap();
    assert_eq!(
        strings(&mut c, &["ZUNION", "2", &a, &b, "WITHSCORES"]),
        ["x", "1", "y", "12", "z", "23", "w", "30"]
    );
    assert_eq!(
        strings(&mut c, &["ZUNION", "2", &a, &b, "WEIGHTS", "2", "0.5", "AGGREGATE", "MAX"]),
        ["x", "y", "z", "w"]
    );
    assert_eq!(
        strings(
            &mut c,
            &["ZINTER", "2", &a, &b, "WEIGHTS", "1", "-1", "AGGREGATE", "MIN", "WITHSCORES"]
        ),
        ["z", "-20", "y", "-10"]
    );
    assert_eq!(strings(&mut c, &["ZDIFF", "2", &b, &a, "WITHSCORES"]), ["w", "30"]);
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", &a, &b]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["ZINTERCARD", "2", &a, &b, "LIMIT", "1"]).unwrap(), 1);
    // Destination on the other shard from one input.
    assert_eq!(
        q::<i64>(&mut c, &["ZUNIONSTORE", &a2, "2", &a, &b, "AGGREGATE", "SUM"]).unwrap(),
        4
    );
    assert_eq!(
        strings(&mut c, &["ZRANGE", &a2, "0", "-1", "WITHSCORES"]),
        ["x", "1", "y", "12", "z", "23", "w", "30"]
    );
    assert_eq!(
        q::<i64>(&mut c, &["ZINTERSTORE", &b, "2", &a, &b, "WEIGHTS", "2", "1"]).unwrap(),
        2
    );
    assert_eq!(strings(&mut c, &["ZRANGE", &b, "0", "-1", "WITHSCORES"]), ["y", "14", "z", "26"]);
    assert_eq!(q::<i64>(&mut c, &["ZDIFFSTORE", &a2, "2", &a, &b]).unwrap(), 1);
    assert_eq!(strings(&mut c, &["ZRANGE", &a2, "0", "-1", "WITHSCORES"]), ["x", "1"]);
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", &a2, &b, "(14", "+inf", "BYSCORE"]).unwrap(), 1);
    assert_eq!(strings(&mut c, &["ZRANGE", &a2, "0", "-1"]), ["z"]);
    // An empty result deletes the destination.
    assert_eq!(q::<i64>(&mut c, &["ZINTERSTORE", &a2, "2", &a, "missing"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a2]).unwrap(), 0);
    q::<i64>(&mut c, &["ZADD", &a2, "1", "q"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", &a2, &b, "5", "10"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a2]).unwrap(), 0);
    // Infinities never make NaN.
    q::<i64>(&mut c, &["ZADD", "i1", "+inf", "m"]).unwrap();
    q::<i64>(&mut c, &["ZADD", "i2", "-inf", "m"]).unwrap();
    assert_eq!(strings(&mut c, &["ZUNION", "2", "i1", "i2", "WITHSCORES"]), ["m", "0"]);
    assert_eq!(
        strings(&mut c, &["ZINTER", "2", "i1", "i2", "WEIGHTS", "0", "1", "WITHSCORES"]),
        ["m", "-inf"]
    );
    for (args, text) in [
        (&["ZUNION", "0", &a][..], "at least 1 input key is needed for 'zunion' command"),
        (
            &["ZUNIONSTORE", "d", "0", &a],
            "at least 1 input key is needed for 'zunionstore' command",
        ),
        (&["ZDIFF", "0", &a], "at least 1 input key is needed for 'zdiff' command"),
        (&["ZINTERCARD", "0", &a], "at least 1 input key is needed for 'zintercard' command"),
        (&["ZUNION", "3", &a, &b], "syntax error"),
        (&["ZUNION", "x", &a], "value is not an integer or out of range"),
        (&["ZUNION", "2", &a, &b, "WEIGHTS", "1", "x"], "weight value is not a float"),
        (&["ZUNION", "2", &a, &b, "WEIGHTS", "1"], "syntax error"),
        (&["ZINTER", "2", &a, &b, "AGGREGATE", "AVG"], "syntax error"),
        (&["ZINTERSTORE", "d", "2", &a, &b, "WITHSCORES"], "syntax error"),
        (&["ZDIFF", "2", &a, &b, "AGGREGATE", "SUM"], "syntax error"),
        (&["ZINTERCARD", "2", &a, &b, "LIMIT", "-1"], "LIMIT can't be negative"),
        (&["ZINTERCARD", "2", &a, &b, "WITHSCORES"], "syntax error"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(text), "{args:?}: {e}");
    }
}

#[test]
fn wrongtype_everywhere() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, _) = keys();
    q::<String>(&mut c, &["SET", &a, "v"]).unwrap();
    q::<i64>(&mut c, &["ZADD", &b, "1", "m"]).unwrap();
    let cases: &[&[&str]] = &[
        &["ZADD", &a, "1", "m"],
        &["ZINCRBY", &a, "1", "m"],
        &["ZREM", &a, "m"],
        &["ZCARD", &a],
        &["ZCOUNT", &a, "0", "1"],
        &["ZLEXCOUNT", &a, "-", "+"],
        &["ZSCORE", &a, "m"],
        &["ZMSCORE", &a, "m"],
        &["ZRANK", &a, "m"],
        &["ZREVRANK", &a, "m", "WITHSCORE"],
        &["ZRANGE", &a, "0", "-1"],
        &["ZREVRANGE", &a, "0", "-1"],
        &["ZRANGEBYSCORE", &a, "0", "1"],
        &["ZREVRANGEBYSCORE", &a, "1", "0"],
        &["ZRANGEBYLEX", &a, "-", "+"],
        &["ZREVRANGEBYLEX", &a, "+", "-"],
        &["ZRANGESTORE", "d", &a, "0", "-1"],
        &["ZREMRANGEBYRANK", &a, "0", "1"],
        &["ZREMRANGEBYSCORE", &a, "0", "1"],
        &["ZREMRANGEBYLEX", &a, "-", "+"],
        &["ZPOPMIN", &a],
        &["ZPOPMAX", &a, "2"],
        &["ZMPOP", "2", "missing", &a, "MIN"],
        &["ZRANDMEMBER", &a],
        &["ZRANDMEMBER", &a, "-3"],
        &["ZUNION", "2", &b, &a],
        &["ZINTER", "2", &b, &a],
        &["ZDIFF", "2", &b, &a],
        &["ZUNIONSTORE", "d", "2", &b, &a],
        &["ZINTERSTORE", "d", "2", &a, &b],
        &["ZDIFFSTORE", "d", "2", &b, &a],
        &["ZINTERCARD", "2", &b, &a],
        &["ZSCAN", &a, "0"],
    ];
    for args in cases {
        let e = err(&mut c, args);
        assert!(e.contains("WRONGTYPE"), "{args:?}: {e}");
    }
    // A STORE destination of another type is simply replaced.
    assert_eq!(q::<i64>(&mut c, &["ZUNIONSTORE", &a, "1", &b]).unwrap(), 1);
    assert_eq!(q::<String>(&mut c, &["TYPE", &a]).unwrap(), "zset");
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    q(c, &["OBJECT", "ENCODING", key]).unwrap()
}

#[test]
fn listpack_to_skiplist_at_the_thresholds() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, _) = keys();
    q::<String>(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "4"]).unwrap();
    q::<String>(&mut c, &["CONFIG", "SET", "zset-max-ziplist-value", "8"]).unwrap();
    for key in [&a, &b] {
        q::<i64>(&mut c, &["ZADD", key, "1", "a", "2", "b", "3", "c", "4", "d"]).unwrap();
        assert_eq!(encoding(&mut c, key), "listpack");
        q::<i64>(&mut c, &["ZADD", key, "5", "e"]).unwrap();
        assert_eq!(encoding(&mut c, key), "skiplist", "past 4 entries");
        q::<i64>(&mut c, &["ZREM", key, "a", "b", "c"]).unwrap();
        assert_eq!(encoding(&mut c, key), "skiplist", "never back on removal");
        assert_eq!(
            strings(&mut c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]),
            ["d", "4", "e", "5"]
        );
    }
    q::<i64>(&mut c, &["ZADD", "v", "1", "12345678"]).unwrap();
    assert_eq!(encoding(&mut c, "v"), "listpack");
    q::<i64>(&mut c, &["ZADD", "v", "1", "123456789"]).unwrap();
    assert_eq!(encoding(&mut c, "v"), "skiplist", "a member past 8 bytes");
    q::<i64>(&mut c, &["ZADD", "w", "1", "123456789"]).unwrap();
    assert_eq!(encoding(&mut c, "w"), "skiplist", "created big");
    // STORE results go back to a listpack when they fit.
    q::<i64>(&mut c, &["ZUNIONSTORE", "small", "1", &a]).unwrap();
    assert_eq!(encoding(&mut c, "small"), "listpack");
    q::<i64>(&mut c, &["ZRANGESTORE", "small", &a, "0", "0"]).unwrap();
    assert_eq!(encoding(&mut c, "small"), "listpack");
    q::<i64>(&mut c, &["ZADD", "big", "1", "a", "2", "b", "3", "c", "4", "d", "5", "e"]).unwrap();
    q::<i64>(&mut c, &["ZRANGESTORE", "big2", "big", "0", "-1"]).unwrap();
    assert_eq!(encoding(&mut c, "big2"), "skiplist");
    q::<String>(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "0"]).unwrap();
    q::<i64>(&mut c, &["ZADD", "zero", "1", "a"]).unwrap();
    assert_eq!(encoding(&mut c, "zero"), "skiplist");
    assert_eq!(q::<i64>(&mut c, &["ZRANGESTORE", "zero2", "zero", "0", "-1"]).unwrap(), 1);
    assert_eq!(encoding(&mut c, "zero2"), "skiplist");
    // Both encodings agree on every read after a conversion.
    q::<String>(&mut c, &["CONFIG", "SET", "zset-max-listpack-entries", "128"]).unwrap();
    q::<String>(&mut c, &["CONFIG", "SET", "zset-max-listpack-value", "64"]).unwrap();
    let args: Vec<String> =
        (0..129).flat_map(|i| [(i % 7).to_string(), format!("m{i:03}")]).collect();
    let mut zadd = vec!["ZADD", "conv"];
    zadd.extend(args.iter().map(String::as_str).take(256));
    q::<i64>(&mut c, &zadd).unwrap();
    assert_eq!(encoding(&mut c, "conv"), "listpack");
    let before = strings(&mut c, &["ZRANGE", "conv", "0", "-1", "WITHSCORES"]);
    q::<i64>(&mut c, &["ZADD", "conv", &args[256], &args[257]]).unwrap();
    assert_eq!(encoding(&mut c, "conv"), "skiplist");
    let mut after = strings(&mut c, &["ZRANGE", "conv", "0", "-1", "WITHSCORES"]);
    let at = after.iter().position(|m| m == "m128").unwrap();
    after.drain(at..at + 2);
    assert_eq!(after, before);
}

#[test]
fn zrandmember_and_zscan_basics() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, _, _) = keys();
    assert_eq!(q::<Option<String>>(&mut c, &["ZRANDMEMBER", &a]).unwrap(), None);
    assert_eq!(strings(&mut c, &["ZRANDMEMBER", &a, "3"]), Vec::<String>::new());
    q::<i64>(&mut c, &["ZADD", &a, "1", "a", "2", "b", "3", "c"]).unwrap();
    let one: String = q(&mut c, &["ZRANDMEMBER", &a]).unwrap();
    assert!(["a", "b", "c"].contains(&one.as_str()));
    let all = strings(&mut c, &["ZRANDMEMBER", &a, "5", "WITHSCORES"]);
    assert_eq!(all, ["a", "1", "b", "2", "c", "3"]);
    let two = strings(&mut c, &["ZRANDMEMBER", &a, "2"]);
    assert_eq!(two.iter().collect::<HashSet<_>>().len(), 2);
    let many = strings(&mut c, &["ZRANDMEMBER", &a, "-20", "WITHSCORES"]);
    assert_eq!(many.len(), 40);
    for pair in many.chunks(2) {
        let want = (pair[0].as_bytes()[0] - b'a' + 1).to_string();
        assert_eq!(pair[1], want, "{pair:?}");
    }
    assert_eq!(strings(&mut c, &["ZRANDMEMBER", &a, "0"]), Vec::<String>::new());
    for (args, text) in [
        (&["ZRANDMEMBER", &a, "-9223372036854775808"][..], "value is out of range"),
        (&["ZRANDMEMBER", &a, "-9223372036854770000", "WITHSCORES"], "value is out of range"),
        (&["ZRANDMEMBER", &a, "1", "WITHSCORE"], "syntax error"),
        (&["ZRANDMEMBER", &a, "x"], "value is not an integer or out of range"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(text), "{args:?}: {e}");
    }
    let (cursor, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", &a, "0"]).unwrap();
    assert_eq!(
        (cursor.as_str(), items),
        ("0", vec!["a".into(), "1".into(), "b".into(), "2".into(), "c".into(), "3".into()])
    );
    let (cursor, items): (String, Vec<String>) =
        q(&mut c, &["ZSCAN", &a, "0", "MATCH", "[bc]", "COUNT", "1"]).unwrap();
    assert_eq!(
        (cursor.as_str(), items),
        ("0", vec!["b".into(), "2".into(), "c".into(), "3".into()])
    );
    let (cursor, items): (String, Vec<String>) = q(&mut c, &["ZSCAN", "missing", "12345"]).unwrap();
    assert_eq!((cursor.as_str(), items), ("0", vec![]), "a missing key ends the iteration");
    for (args, text) in [
        (&["ZSCAN", &a, "x"][..], "invalid cursor"),
        (&["ZSCAN", &a, "0", "COUNT", "0"], "syntax error"),
        (&["ZSCAN", &a, "0", "COUNT", "x"], "value is not an integer or out of range"),
        (&["ZSCAN", &a, "0", "TYPE", "zset"], "syntax error"),
        (&["ZSCAN", &a, "0", "MATCH"], "syntax error"),
    ] {
        let e = err(&mut c, args);
        assert!(e.contains(text), "{args:?}: {e}");
    }
}

/// Sends `args` on a RESP3 connection and returns the raw reply.
fn call3(raw: &mut Raw, args: &[&str]) -> String {
    raw.call(args)
}

#[test]
fn resp3_reply_shapes() {
    let server = Server::start(2);
    let mut raw = server.raw();
    assert!(raw.call(&["HELLO", "3"]).starts_with('%'));
    let (a, b, _) = keys();
    assert_eq!(call3(&mut raw, &["ZADD", &a, "1", "x", "2.5", "y"]), ":2\r\n");
    assert_eq!(call3(&mut raw, &["ZADD", &b, "+inf", "y"]), ":1\r\n");
    assert_eq!(call3(&mut raw, &["ZSCORE", &a, "y"]), ",2.5\r\n");
    assert_eq!(call3(&mut raw, &["ZSCORE", &a, "nope"]), "_\r\n");
    assert_eq!(call3(&mut raw, &["ZINCRBY", &a, "1", "x"]), ",2\r\n");
    assert_eq!(call3(&mut raw, &["ZADD", &a, "INCR", "NX", "1", "x"]), "_\r\n");
    assert_eq!(call3(&mut raw, &["ZMSCORE", &a, "x", "nope"]), "*2\r\n,2\r\n_\r\n");
    assert_eq!(call3(&mut raw, &["ZRANK", &a, "y", "WITHSCORE"]), "*2\r\n:1\r\n,2.5\r\n");
    assert_eq!(call3(&mut raw, &["ZRANK", &a, "nope", "WITHSCORE"]), "_\r\n");
    assert_eq!(
        call3(&mut raw, &["ZRANGE", &a, "0", "-1", "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\nx\r\n,2\r\n*2\r\n$1\r\ny\r\n,2.5\r\n"
    );
    assert_eq!(call3(&mut raw, &["ZRANGE", &a, "0", "-1"]), "*2\r\n$1\r\nx\r\n$1\r\ny\r\n");
    assert_eq!(
        call3(&mut raw, &["ZUNION", "2", &a, &b, "WITHSCORES"]),
        "*2\r\n*2\r\n$1\r\nx\r\n,2\r\n*2\r\n$1\r\ny\r\n,inf\r\n"
    );
    assert_eq!(
        call3(&mut raw, &["ZRANDMEMBER", &b, "1", "WITHSCORES"]),
        "*1\r\n*2\r\n$1\r\ny\r\n,inf\r\n"
    );
    assert_eq!(
        call3(&mut raw, &["ZSCAN", &b, "0"]),
        "*2\r\n$1\r\n0\r\n*2\r\n$1\r\ny\r\n$3\r\ninf\r\n"
    );
    assert_eq!(call3(&mut raw, &["ZPOPMIN", &a]), "*2\r\n$1\r\nx\r\n,2\r\n");
    assert_eq!(call3(&mut raw, &["ZPOPMAX", &a, "1"]), "*1\r\n*2\r\n$1\r\ny\r\n,2.5\r\n");
    assert_eq!(call3(&mut raw, &["ZPOPMAX", &a, "1"]), "*0\r\n");
    assert_eq!(
        call3(&mut raw, &["ZMPOP", "2", &a, &b, "MIN"]),
        format!("*2\r\n${}\r\n{b}\r\n*1\r\n*2\r\n$1\r\ny\r\n,inf\r\n", b.len())
    );
    assert_eq!(call3(&mut raw, &["ZMPOP", "2", &a, &b, "MIN"]), "_\r\n");
    // The same in RESP2.
    assert!(raw.call(&["HELLO", "2"]).starts_with('*'));
    assert_eq!(call3(&mut raw, &["ZADD", &a, "1.5", "x"]), ":1\r\n");
    assert_eq!(call3(&mut raw, &["ZRANK", &a, "nope", "WITHSCORE"]), "*-1\r\n");
    assert_eq!(call3(&mut raw, &["ZMPOP", "1", &b, "MIN"]), "*-1\r\n");
    assert_eq!(call3(&mut raw, &["ZPOPMAX", &a, "1"]), "*2\r\n$1\r\nx\r\n$3\r\n1.5\r\n");
}

#[test]
fn zsets_with_keyspace_commands() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b, _) = keys();
    q::<i64>(&mut c, &["ZADD", &a, "1", "x", "2", "y"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["TYPE", &a]).unwrap(), "zset");
    assert_eq!(q::<String>(&mut c, &["RENAME", &a, &b]).unwrap(), "OK");
    assert_eq!(strings(&mut c, &["ZRANGE", &b, "0", "-1", "WITHSCORES"]), ["x", "1", "y", "2"]);
    assert_eq!(q::<i64>(&mut c, &["COPY", &b, &a]).unwrap(), 1);
    q::<i64>(&mut c, &["ZADD", &a, "3", "z"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["ZCARD", &b]).unwrap(), 2, "a copy is independent");
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", &a, "50"]).unwrap(), 1);
    thread::sleep(std::time::Duration::from_millis(120));
    assert_eq!(q::<i64>(&mut c, &["ZCARD", &a]).unwrap(), 0, "expired");
    let (_, keys): (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "TYPE", "zset", "COUNT", "1000"]).unwrap();
    assert_eq!(keys, std::slice::from_ref(&b));
}

/// ZSCAN's contract on a big (skiplist) set while other clients add and
/// remove members, growing and shrinking its table: every member present for
/// the whole iteration is returned, nothing that was never present is, and
/// each score is the member's.
#[test]
fn zscan_guarantee_under_concurrent_changes() {
    let server = Server::start(2);
    let mut c = server.client();
    let (key, _, _) = keys();
    let stable = 3000;
    for chunk in (0..stable).collect::<Vec<_>>().chunks(500) {
        let mut cmd = redis::cmd("ZADD");
        cmd.arg(&key);
        for i in chunk {
            cmd.arg(*i).arg(format!("s:{i}"));
        }
        cmd.query::<i64>(&mut c).unwrap();
    }
    // Members removed during the scan: present at the start only.
    let mut cmd = redis::cmd("ZADD");
    cmd.arg(&key);
    for i in 0..1000 {
        cmd.arg(-1).arg(format!("r:{i}"));
    }
    cmd.query::<i64>(&mut c).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let churn = {
        let (key, stop, url) = (key.clone(), stop.clone(), server.url());
        thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut i = 0u64;
            let mut removed = 0;
            while !stop.load(Ordering::Relaxed) {
                // Grow by 20, shrink by 10: the table splits and, once the
                // transient members go in bulk, merges.
                let mut add = redis::cmd("ZADD");
                add.arg(&key);
                for j in 0..20 {
                    add.arg(-2).arg(format!("t:{}", i + j));
                }
                add.query::<i64>(&mut c).unwrap();
                let mut rem = redis::cmd("ZREM");
                rem.arg(&key);
                for j in 0..10 {
                    rem.arg(format!("t:{}", i + j));
                }
                if removed < 1000 {
                    rem.arg(format!("r:{removed}"));
                    removed += 1;
                }
                rem.query::<i64>(&mut c).unwrap();
                i += 20;
                if i.is_multiple_of(4000) {
                    q::<i64>(&mut c, &["ZREMRANGEBYSCORE", &key, "-2", "-2"]).unwrap();
                }
            }
            i
        })
    };
    let mut rounds = 0;
    let mut calls = 0;
    while rounds < 3 {
        let mut seen: HashSet<String> = HashSet::new();
        let mut cursor = "0".to_string();
        loop {
            let (next, items): (String, Vec<String>) =
                q(&mut c, &["ZSCAN", &key, &cursor, "COUNT", "25"]).unwrap();
            calls += 1;
            for pair in items.chunks(2) {
                let (member, score) = (&pair[0], &pair[1]);
                let want = match member.split_once(':') {
                    Some(("s", i)) => i.to_string(),
                    Some(("r", _)) => "-1".to_string(),
                    Some(("t", _)) => "-2".to_string(),
                    _ => panic!("ZSCAN returned {member}, which was never added"),
                };
                assert_eq!(score, &want, "score of {member}");
                seen.insert(member.clone());
            }
            cursor = next;
            if cursor == "0" {
                break;
            }
        }
        for i in 0..stable {
            assert!(seen.contains(&format!("s:{i}")), "round {rounds}: s:{i} was never returned");
        }
        rounds += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let churned = churn.join().unwrap();
    assert!(churned > 100, "too little churn: {churned}");
    assert!(calls > 3 * stable / 50, "{calls} calls for 3 iterations");
    assert_eq!(encoding(&mut c, &key), "skiplist");
}
