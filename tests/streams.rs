//! Streams against a real 2-shard server: XADD and its ids and trimming,
//! ranges, XDEL, XTRIM, XREAD and XREADGROUP over streams on both shards,
//! consumer groups (XGROUP, XACK, XPENDING, XCLAIM, XAUTOCLAIM), XINFO,
//! XSETID, the keyspace commands on streams, keyspace events, and the
//! flash-sale queue (a group of consumers, acknowledgements, and recovery of
//! a crashed consumer from its pending list).

mod common;
use common::{keys_on_two_shards, q, Server};
use redis::Value;

fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    q::<Value>(c, args).map(|v| format!("no error: {v:?}")).unwrap_or_else(|e| {
        // The client splits the error code off; put the text back together.
        format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or(""))
    })
}

/// The ids of an XRANGE-shaped reply.
fn ids(v: &Value) -> Vec<String> {
    let Value::Array(entries) = v else { return Vec::new() };
    entries
        .iter()
        .filter_map(|e| match e {
            Value::Array(parts) => match parts.first() {
                Some(Value::BulkString(id)) => Some(String::from_utf8_lossy(id).into_owned()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// XREAD's reply as (key, ids) pairs.
fn read_ids(v: &Value) -> Vec<(String, Vec<String>)> {
    let Value::Array(streams) = v else { return Vec::new() };
    streams
        .iter()
        .filter_map(|s| match s {
            Value::Array(parts) if parts.len() == 2 => match &parts[0] {
                Value::BulkString(k) => {
                    Some((String::from_utf8_lossy(k).into_owned(), ids(&parts[1])))
                }
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[test]
fn xadd_ids_options_and_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        let id: String = q(&mut c, &["XADD", key, "*", "f", "v"]).unwrap();
        let (ms, seq) = id.split_once('-').expect("ms-seq");
        assert!(ms.parse::<u64>().unwrap() > 1_600_000_000_000 && seq.parse::<u64>().is_ok());
        assert_eq!(
            q::<String>(&mut c, &["XADD", key, "99999999999999-5", "f", "v"]).unwrap(),
            "99999999999999-5"
        );
        assert_eq!(
            q::<String>(&mut c, &["XADD", key, "99999999999999-*", "f", "v"]).unwrap(),
            "99999999999999-6"
        );
        assert_eq!(q::<String>(&mut c, &["XADD", key, "*", "f", "v"]).unwrap(), "99999999999999-7");
        assert!(err(&mut c, &["XADD", key, "5-5", "f", "v"])
            .contains("equal or smaller than the target stream top item"));
        assert_eq!(q::<i64>(&mut c, &["XLEN", key]).unwrap(), 4);
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "stream");
        assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", key]).unwrap(), "stream");
    }
    assert!(err(&mut c, &["XADD", "s", "0-0", "f", "v"]).contains("must be greater than 0-0"));
    assert!(err(&mut c, &["XADD", "s", "*", "f"]).contains("wrong number of arguments for 'xadd'"));
    assert!(err(&mut c, &["XADD", "s", "bad", "f", "v"]).contains("Invalid stream ID"));
    assert_eq!(
        q::<Option<String>>(&mut c, &["XADD", "s", "NOMKSTREAM", "*", "f", "v"]).unwrap(),
        None
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "s"]).unwrap(), 0);
    q::<String>(&mut c, &["SET", "str", "x"]).unwrap();
    assert!(err(&mut c, &["XADD", "str", "*", "f", "v"]).starts_with("WRONGTYPE"));
    assert!(err(&mut c, &["XLEN", "str"]).starts_with("WRONGTYPE"));
    q::<String>(&mut c, &["XADD", "max", "18446744073709551615-18446744073709551615", "f", "v"])
        .unwrap();
    assert!(err(&mut c, &["XADD", "max", "*", "f", "v"]).contains("exhausted the last possible ID"));
}

#[test]
fn trimming_with_maxlen_minid_approx_and_limit() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, _) = keys_on_two_shards();
    for i in 1..=10 {
        q::<String>(&mut c, &["XADD", &a, &format!("{i}-0"), "f", "v"]).unwrap();
    }
    assert_eq!(
        q::<String>(&mut c, &["XADD", &a, "MAXLEN", "=", "5", "11-0", "f", "v"]).unwrap(),
        "11-0"
    );
    assert_eq!(q::<i64>(&mut c, &["XLEN", &a]).unwrap(), 5);
    assert_eq!(q::<i64>(&mut c, &["XTRIM", &a, "MINID", "9"]).unwrap(), 2);
    // The one node (3 entries) cannot go as a whole: approximate trims stop.
    assert_eq!(q::<i64>(&mut c, &["XTRIM", &a, "MAXLEN", "~", "1"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["XTRIM", &a, "MAXLEN", "~", "0", "LIMIT", "1"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["XTRIM", &a, "MAXLEN", "1"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["XTRIM", "missing", "MAXLEN", "1"]).unwrap(), 0);
    // Small nodes: approximate trimming removes whole nodes only.
    q::<String>(&mut c, &["CONFIG", "SET", "stream-node-max-entries", "2"]).unwrap();
    for i in 1..=9 {
        q::<String>(&mut c, &["XADD", "small", &format!("{i}-0"), "f", "v"]).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["XTRIM", "small", "MAXLEN", "~", "4"]).unwrap(), 4);
    assert_eq!(q::<i64>(&mut c, &["XTRIM", "small", "MAXLEN", "~", "0", "LIMIT", "2"]).unwrap(), 2);
    q::<String>(&mut c, &["XADD", "small", "MINID", "~", "9", "10-0", "f", "v"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["XLEN", "small"]).unwrap(), 2);
    for (args, text) in [
        (&["XTRIM", &a, "LIMIT", "5"][..], "without specifying a trimming strategy"),
        (&["XTRIM", &a, "MAXLEN", "1", "LIMIT", "5"][..], "without the special ~ option"),
        (&["XTRIM", &a, "MAXLEN", "-1"][..], "The MAXLEN argument must be >= 0."),
        (&["XTRIM", &a, "MAXLEN", "~", "1", "LIMIT", "-1"][..], "The LIMIT argument must be >= 0."),
        (
            &["XTRIM", &a, "MAXLEN", "1", "MINID", "1"][..],
            "options at the same time are not compatible",
        ),
        (&["XTRIM", &a, "FOO", "1"][..], "syntax error"),
        (&["XTRIM", &a, "MINID", "x"][..], "Invalid stream ID"),
    ] {
        assert!(err(&mut c, args).contains(text), "{args:?}");
    }
}

#[test]
fn ranges_and_deletion() {
    let server = Server::start(2);
    let mut c = server.client();
    let (_, b) = keys_on_two_shards();
    for i in 1..=5 {
        q::<String>(&mut c, &["XADD", &b, &format!("{i}-1"), "n", &i.to_string(), "other", "x"])
            .unwrap();
    }
    let all: Value = q(&mut c, &["XRANGE", &b, "-", "+"]).unwrap();
    assert_eq!(ids(&all), ["1-1", "2-1", "3-1", "4-1", "5-1"]);
    let Value::Array(entries) = &all else { panic!() };
    assert_eq!(
        entries[0],
        Value::Array(vec![
            Value::BulkString(b"1-1".to_vec()),
            Value::Array(
                ["n", "1", "other", "x"]
                    .iter()
                    .map(|s| Value::BulkString(s.as_bytes().to_vec()))
                    .collect()
            )
        ])
    );
    assert_eq!(ids(&q(&mut c, &["XRANGE", &b, "(2-1", "4"]).unwrap()), ["3-1", "4-1"]);
    assert_eq!(ids(&q(&mut c, &["XRANGE", &b, "2", "(4-1", "COUNT", "1"]).unwrap()), ["2-1"]);
    assert_eq!(
        ids(&q(&mut c, &["XREVRANGE", &b, "+", "-", "COUNT", "2"]).unwrap()),
        ["5-1", "4-1"]
    );
    assert_eq!(ids(&q(&mut c, &["XREVRANGE", &b, "(5-1", "(1-1"]).unwrap()), ["4-1", "3-1", "2-1"]);
    assert_eq!(q::<Value>(&mut c, &["XRANGE", &b, "-", "+", "COUNT", "0"]).unwrap(), Value::Nil);
    assert_eq!(q::<Value>(&mut c, &["XRANGE", "missing", "-", "+"]).unwrap(), Value::Array(vec![]));
    assert!(err(&mut c, &["XRANGE", &b, "(18446744073709551615-18446744073709551615", "+"])
        .contains("invalid start ID for the interval"));
    assert!(err(&mut c, &["XRANGE", &b, "-", "(0-0"]).contains("invalid end ID for the interval"));
    assert!(err(&mut c, &["XRANGE", &b, "-", "+", "LIMIT", "1"]).contains("syntax error"));
    assert!(err(&mut c, &["XRANGE", &b, "-", "+", "COUNT", "x"]).contains("not an integer"));
    assert_eq!(q::<i64>(&mut c, &["XDEL", &b, "2-1", "3-1", "9-9"]).unwrap(), 2);
    assert!(err(&mut c, &["XDEL", &b, "bad"]).contains("Invalid stream ID"));
    assert_eq!(ids(&q(&mut c, &["XRANGE", &b, "-", "+"]).unwrap()), ["1-1", "4-1", "5-1"]);
    assert_eq!(q::<i64>(&mut c, &["XDEL", &b, "1-1", "4-1", "5-1"]).unwrap(), 3);
    // An emptied stream stays, with its last id.
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &b]).unwrap(), 1);
    assert!(err(&mut c, &["XADD", &b, "5-1", "f", "v"]).contains("equal or smaller"));
}

#[test]
fn xread_over_streams_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    assert_eq!(q::<Value>(&mut c, &["XREAD", "STREAMS", &a, &b, "0", "0"]).unwrap(), Value::Nil);
    for i in 1..=3 {
        q::<String>(&mut c, &["XADD", &a, &format!("{i}-0"), "f", "v"]).unwrap();
        q::<String>(&mut c, &["XADD", &b, &format!("{}-0", i + 10), "f", "v"]).unwrap();
    }
    let got = read_ids(&q(&mut c, &["XREAD", "COUNT", "2", "STREAMS", &a, &b, "1", "0"]).unwrap());
    assert_eq!(
        got,
        [
            (a.clone(), vec!["2-0".to_string(), "3-0".to_string()]),
            (b.clone(), vec!["11-0".to_string(), "12-0".to_string()])
        ]
    );
    // `$`: nothing newer than now; only streams with news are in the reply.
    assert_eq!(q::<Value>(&mut c, &["XREAD", "STREAMS", &a, &b, "$", "$"]).unwrap(), Value::Nil);
    let got = read_ids(&q(&mut c, &["XREAD", "STREAMS", &a, &b, "$", "12"]).unwrap());
    assert_eq!(got, [(b.clone(), vec!["13-0".to_string()])]);
    // BLOCK is accepted; with nothing to serve the reply is the timeout's.
    assert_eq!(
        q::<Value>(&mut c, &["XREAD", "BLOCK", "10", "STREAMS", &a, "$"]).unwrap(),
        Value::Nil
    );
    let got = read_ids(&q(&mut c, &["XREAD", "BLOCK", "0", "STREAMS", &a, "2-0"]).unwrap());
    assert_eq!(got, [(a.clone(), vec!["3-0".to_string()])]);
    for (args, text) in [
        (&["XREAD", "STREAMS", &a, &b, "0"][..], "Unbalanced XREAD list of streams"),
        (&["XREAD", "GROUP", "g", "c", "STREAMS", &a, "0"][..], "only supported by XREADGROUP"),
        (&["XREAD", "NOACK", "STREAMS", &a, "0"][..], "only supported by XREADGROUP"),
        (
            &["XREAD", "STREAMS", &a, ">"][..],
            "The > ID can be specified only when calling XREADGROUP",
        ),
        (&["XREAD", "BLOCK", "-1", "STREAMS", &a, "0"][..], "timeout is negative"),
        (
            &["XREAD", "BLOCK", "x", "STREAMS", &a, "0"][..],
            "timeout is not an integer or out of range",
        ),
        (&["XREAD", "COUNT", "1", "FOO", &a, "0"][..], "syntax error"),
        (&["XREAD", "STREAMS", &a, "x"][..], "Invalid stream ID"),
    ] {
        assert!(err(&mut c, args).contains(text), "{args:?}");
    }
    q::<String>(&mut c, &["SET", "str", "x"]).unwrap();
    assert!(err(&mut c, &["XREAD", "STREAMS", &a, "str", "0", "0"]).starts_with("WRONGTYPE"));
}

#[test]
fn xreadgroup_across_shards_keeps_pending_state() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        assert_eq!(
            q::<String>(&mut c, &["XGROUP", "CREATE", key, "g", "0", "MKSTREAM"]).unwrap(),
            "OK"
        );
        q::<String>(&mut c, &["XADD", key, "1-0", "f", "v"]).unwrap();
        q::<String>(&mut c, &["XADD", key, "2-0", "f", "v"]).unwrap();
    }
    let got = read_ids(
        &q(&mut c, &["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", &a, &b, ">", ">"])
            .unwrap(),
    );
    assert_eq!(got, [(a.clone(), vec!["1-0".to_string()]), (b.clone(), vec!["1-0".to_string()])]);
    // The group state changed on both owners (the gathered copy was written back).
    for key in [&a, &b] {
        let summary: Value = q(&mut c, &["XPENDING", key, "g"]).unwrap();
        let Value::Array(parts) = summary else { panic!() };
        assert_eq!(parts[0], Value::Int(1), "{key}");
    }
    let got = read_ids(
        &q(&mut c, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", &a, &b, ">", ">"]).unwrap(),
    );
    assert_eq!(got, [(a.clone(), vec!["2-0".to_string()]), (b.clone(), vec!["2-0".to_string()])]);
    assert_eq!(
        q::<Value>(&mut c, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", &a, &b, ">", ">"])
            .unwrap(),
        Value::Nil
    );
    // History: the consumer's own pending entries after the id given.
    let got = read_ids(&q(&mut c, &["XREADGROUP", "GROUP", "g", "c", "STREAMS", &a, "0"]).unwrap());
    assert_eq!(got, [(a.clone(), vec!["1-0".to_string(), "2-0".to_string()])]);
    let got =
        read_ids(&q(&mut c, &["XREADGROUP", "GROUP", "g", "other", "STREAMS", &a, "0"]).unwrap());
    assert_eq!(got, [(a.clone(), vec![])], "empty history is still a reply");
    // NOACK: delivered, not pending.
    q::<String>(&mut c, &["XADD", &a, "3-0", "f", "v"]).unwrap();
    read_ids(&q(&mut c, &["XREADGROUP", "GROUP", "g", "c", "NOACK", "STREAMS", &a, ">"]).unwrap());
    let pending: Value = q(&mut c, &["XPENDING", &a, "g", "-", "+", "10"]).unwrap();
    assert_eq!(ids(&pending), ["1-0", "2-0"]);
    // A deleted pending entry comes back as [id, nil].
    q::<i64>(&mut c, &["XDEL", &a, "1-0"]).unwrap();
    let hist: Value =
        q(&mut c, &["XREADGROUP", "GROUP", "g", "c", "COUNT", "1", "STREAMS", &a, "0"]).unwrap();
    let Value::Array(streams) = hist else { panic!() };
    let Value::Array(parts) = &streams[0] else { panic!() };
    assert_eq!(
        parts[1],
        Value::Array(vec![Value::Array(vec![Value::BulkString(b"1-0".to_vec()), Value::Nil])])
    );
    for (args, text) in [
        (&["XREADGROUP", "GROUP", "nog", "c", "STREAMS", &a, ">"][..], "NOGROUP No such key"),
        (
            &["XREADGROUP", "GROUP", "g", "c", "STREAMS", "missing", ">"][..],
            "in XREADGROUP with GROUP option",
        ),
        (&["XREADGROUP", "GROUP", "g", "c", "STREAMS", &a, "$"][..], "The $ ID is meaningless"),
        (&["XREADGROUP", "COUNT", "1", "STREAMS", &a, ">", "x"][..], "Unbalanced"),
        (
            &["XREADGROUP", "COUNT", "1", "NOACK", "STREAMS", &a, ">"][..],
            "Missing GROUP option for XREADGROUP",
        ),
    ] {
        assert!(err(&mut c, args).contains(text), "{args:?}");
    }
}

#[test]
fn xgroup_subcommands() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, _) = keys_on_two_shards();
    assert!(err(&mut c, &["XGROUP", "CREATE", &a, "g", "$"]).contains("requires the key to exist"));
    assert_eq!(
        q::<String>(&mut c, &["XGROUP", "CREATE", &a, "g", "$", "MKSTREAM", "ENTRIESREAD", "0"])
            .unwrap(),
        "OK"
    );
    assert!(err(&mut c, &["XGROUP", "CREATE", &a, "g", "$"]).starts_with("BUSYGROUP"));
    assert!(err(&mut c, &["XGROUP", "CREATE", &a, "h", "$", "ENTRIESREAD", "-5"])
        .contains("must be positive or -1"));
    assert!(err(&mut c, &["XGROUP", "CREATE", &a, "h", "$", "FOO"]).contains(
        "unknown subcommand or wrong number of arguments for 'CREATE'. Try XGROUP HELP."
    ));
    assert!(err(&mut c, &["XGROUP", "CREATE", &a, "h", "x"]).contains("Invalid stream ID"));
    q::<String>(&mut c, &["XADD", &a, "5-0", "f", "v"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["XGROUP", "SETID", &a, "g", "$"]).unwrap(), "OK");
    assert_eq!(
        q::<String>(&mut c, &["XGROUP", "SETID", &a, "g", "0", "ENTRIESREAD", "0"]).unwrap(),
        "OK"
    );
    assert!(err(&mut c, &["XGROUP", "SETID", &a, "nog", "0"])
        .contains("NOGROUP No such consumer group 'nog' for key name"));
    assert!(err(&mut c, &["XGROUP", "SETID", "missing", "g", "0"])
        .contains("requires the key to exist"));
    assert_eq!(q::<i64>(&mut c, &["XGROUP", "CREATECONSUMER", &a, "g", "alice"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["XGROUP", "CREATECONSUMER", &a, "g", "alice"]).unwrap(), 0);
    q::<Value>(&mut c, &["XREADGROUP", "GROUP", "g", "alice", "STREAMS", &a, ">"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["XGROUP", "DELCONSUMER", &a, "g", "alice"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["XGROUP", "DELCONSUMER", &a, "g", "alice"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["XGROUP", "DESTROY", &a, "g"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["XGROUP", "DESTROY", &a, "g"]).unwrap(), 0);
    let help: Vec<String> = q(&mut c, &["XGROUP", "HELP"]).unwrap();
    assert!(
        help[0].starts_with("XGROUP <subcommand>")
            && help.iter().any(|l| l.starts_with("CREATECONSUMER"))
    );
    let help: Vec<String> = q(&mut c, &["XINFO", "HELP"]).unwrap();
    assert!(help.iter().any(|l| l.starts_with("STREAM <key>")));
    assert!(err(&mut c, &["XGROUP", "FOO"]).contains("unknown subcommand"));
}

#[test]
fn pending_acks_and_claims() {
    let server = Server::start(2);
    let mut c = server.client();
    let (_, b) = keys_on_two_shards();
    q::<String>(&mut c, &["XGROUP", "CREATE", &b, "g", "0", "MKSTREAM"]).unwrap();
    for i in 1..=4 {
        q::<String>(&mut c, &["XADD", &b, &format!("{i}-0"), "f", "v"]).unwrap();
    }
    q::<Value>(&mut c, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "3", "STREAMS", &b, ">"])
        .unwrap();
    q::<Value>(&mut c, &["XREADGROUP", "GROUP", "g", "bob", "STREAMS", &b, ">"]).unwrap();
    let summary: Value = q(&mut c, &["XPENDING", &b, "g"]).unwrap();
    let bulk = |s: &str| Value::BulkString(s.as_bytes().to_vec());
    assert_eq!(
        summary,
        Value::Array(vec![
            Value::Int(4),
            bulk("1-0"),
            bulk("4-0"),
            Value::Array(vec![
                Value::Array(vec![bulk("alice"), bulk("3")]),
                Value::Array(vec![bulk("bob"), bulk("1")])
            ])
        ])
    );
    assert_eq!(
        ids(&q(&mut c, &["XPENDING", &b, "g", "(1-0", "+", "10", "alice"]).unwrap()),
        ["2-0", "3-0"]
    );
    assert_eq!(ids(&q(&mut c, &["XPENDING", &b, "g", "-", "+", "2"]).unwrap()), ["1-0", "2-0"]);
    assert_eq!(
        ids(&q(&mut c, &["XPENDING", &b, "g", "IDLE", "100000", "-", "+", "10"]).unwrap()),
        Vec::<String>::new()
    );
    assert_eq!(
        q::<Value>(&mut c, &["XPENDING", &b, "g", "-", "+", "10", "nobody"]).unwrap(),
        Value::Array(vec![])
    );
    assert!(err(&mut c, &["XPENDING", &b, "g", "-", "+"]).contains("syntax error"));
    assert!(err(&mut c, &["XPENDING", &b, "nog"]).contains("NOGROUP No such key"));
    assert!(err(&mut c, &["XPENDING", &b, "g", "IDLE", "10", "-", "+"]).contains("syntax error"));
    // XACK: all ids checked first; unknown ones are not counted.
    assert!(err(&mut c, &["XACK", &b, "g", "1-0", "bad"]).contains("Invalid stream ID"));
    assert_eq!(q::<i64>(&mut c, &["XACK", &b, "g", "1-0", "1-0", "9-0"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["XACK", &b, "nog", "2-0"]).unwrap(), 0);
    // XCLAIM with every option.
    let claimed: Value =
        q(&mut c, &["XCLAIM", &b, "g", "bob", "0", "2-0", "RETRYCOUNT", "7", "IDLE", "5000"])
            .unwrap();
    assert_eq!(ids(&claimed), ["2-0"]);
    let row: Value = q(&mut c, &["XPENDING", &b, "g", "2-0", "2-0", "1"]).unwrap();
    let Value::Array(rows) = row else { panic!() };
    let Value::Array(fields) = &rows[0] else { panic!() };
    assert_eq!(fields[1], bulk("bob"));
    assert!(matches!(fields[2], Value::Int(idle) if (5000..60000).contains(&idle)));
    assert_eq!(fields[3], Value::Int(7));
    let just: Vec<String> =
        q(&mut c, &["XCLAIM", &b, "g", "carol", "1000", "2-0", "3-0", "JUSTID"]).unwrap();
    assert_eq!(just, ["2-0"], "3-0 is not idle long enough");
    let forced: Vec<String> = q(
        &mut c,
        &["XCLAIM", &b, "g", "carol", "0", "1-0", "TIME", "0", "FORCE", "JUSTID", "LASTID", "4-0"],
    )
    .unwrap();
    assert_eq!(forced, ["1-0"]);
    assert!(err(&mut c, &["XCLAIM", &b, "g", "carol", "x", "1-0"])
        .contains("Invalid min-idle-time argument for XCLAIM"));
    assert!(err(&mut c, &["XCLAIM", &b, "g", "carol", "0", "1-0", "IDLE", "x"])
        .contains("Invalid IDLE option argument for XCLAIM"));
    assert!(err(&mut c, &["XCLAIM", &b, "g", "carol", "0", "1-0", "BOGUS"])
        .contains("Unrecognized XCLAIM option 'BOGUS'"));
    assert!(err(&mut c, &["XCLAIM", &b, "nog", "carol", "0", "1-0"]).contains("NOGROUP"));
    // XAUTOCLAIM: a cursor, the claimed entries, the deleted ids.
    q::<i64>(&mut c, &["XDEL", &b, "3-0"]).unwrap();
    let auto: Value = q(&mut c, &["XAUTOCLAIM", &b, "g", "dave", "0", "0", "COUNT", "2"]).unwrap();
    let Value::Array(parts) = auto else { panic!() };
    assert_eq!(parts[0], bulk("3-0"));
    assert_eq!(ids(&parts[1]), ["1-0", "2-0"]);
    assert_eq!(parts[2], Value::Array(vec![]));
    let auto: Value = q(&mut c, &["XAUTOCLAIM", &b, "g", "dave", "0", "3-0", "JUSTID"]).unwrap();
    assert_eq!(
        auto,
        Value::Array(vec![
            bulk("0-0"),
            Value::Array(vec![bulk("4-0")]),
            Value::Array(vec![bulk("3-0")])
        ])
    );
    assert!(err(&mut c, &["XAUTOCLAIM", &b, "g", "dave", "0", "0", "COUNT", "0"])
        .contains("COUNT must be > 0"));
    assert!(err(&mut c, &["XAUTOCLAIM", &b, "g", "dave", "x", "0"])
        .contains("Invalid min-idle-time argument for XAUTOCLAIM"));
    assert!(err(&mut c, &["XAUTOCLAIM", &b, "nog", "dave", "0", "0"]).contains("NOGROUP"));
}

#[test]
fn xinfo_and_xsetid() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, _) = keys_on_two_shards();
    q::<String>(&mut c, &["XADD", &a, "1-0", "f", "v"]).unwrap();
    q::<String>(&mut c, &["XADD", &a, "2-0", "f", "w"]).unwrap();
    q::<String>(&mut c, &["XGROUP", "CREATE", &a, "g", "0"]).unwrap();
    q::<Value>(&mut c, &["XREADGROUP", "GROUP", "g", "alice", "COUNT", "1", "STREAMS", &a, ">"])
        .unwrap();
    let info: std::collections::HashMap<String, Value> =
        q(&mut c, &["XINFO", "STREAM", &a]).unwrap();
    assert_eq!(info["length"], Value::Int(2));
    assert_eq!(info["radix-tree-keys"], Value::Int(1));
    assert_eq!(info["last-generated-id"], Value::BulkString(b"2-0".to_vec()));
    assert_eq!(info["entries-added"], Value::Int(2));
    assert_eq!(info["groups"], Value::Int(1));
    assert_eq!(ids(&Value::Array(vec![info["first-entry"].clone()])), ["1-0"]);
    assert_eq!(ids(&Value::Array(vec![info["last-entry"].clone()])), ["2-0"]);
    let full: std::collections::HashMap<String, Value> =
        q(&mut c, &["XINFO", "STREAM", &a, "FULL", "COUNT", "1"]).unwrap();
    assert_eq!(ids(&full["entries"]), ["1-0"]);
    let Value::Array(groups) = &full["groups"] else { panic!() };
    assert_eq!(groups.len(), 1);
    assert!(err(&mut c, &["XINFO", "STREAM", &a, "FULL", "COUNT"])
        .contains("unknown subcommand or wrong number of arguments"));
    assert!(err(&mut c, &["XINFO", "STREAM", "missing"]).contains("no such key"));
    let groups: Vec<std::collections::HashMap<String, Value>> =
        q(&mut c, &["XINFO", "GROUPS", &a]).unwrap();
    assert_eq!(groups[0]["pending"], Value::Int(1));
    assert_eq!(groups[0]["entries-read"], Value::Int(1));
    assert_eq!(groups[0]["lag"], Value::Int(1));
    let consumers: Vec<std::collections::HashMap<String, Value>> =
        q(&mut c, &["XINFO", "CONSUMERS", &a, "g"]).unwrap();
    assert_eq!(consumers[0]["name"], Value::BulkString(b"alice".to_vec()));
    assert_eq!(consumers[0]["pending"], Value::Int(1));
    assert!(matches!(consumers[0]["inactive"], Value::Int(n) if n >= 0), "{consumers:?}");
    assert!(err(&mut c, &["XINFO", "CONSUMERS", &a, "nog"])
        .contains("NOGROUP No such consumer group 'nog'"));
    // XSETID.
    assert!(err(&mut c, &["XSETID", &a, "1-0"]).contains("smaller than the target stream top item"));
    assert!(err(&mut c, &["XSETID", &a, "9-0", "ENTRIESADDED", "1"])
        .contains("smaller than the target stream length"));
    assert!(err(&mut c, &["XSETID", &a, "9-0", "ENTRIESADDED", "-1"])
        .contains("entries_added must be positive"));
    assert!(err(&mut c, &["XSETID", &a, "9-0", "MAXDELETEDID", "10-0"])
        .contains("smaller than the provided max_deleted_entry_id"));
    assert!(err(&mut c, &["XSETID", "missing", "9-0"]).contains("no such key"));
    assert_eq!(
        q::<String>(&mut c, &["XSETID", &a, "9-0", "ENTRIESADDED", "5", "MAXDELETEDID", "3-0"])
            .unwrap(),
        "OK"
    );
    let info: std::collections::HashMap<String, Value> =
        q(&mut c, &["XINFO", "STREAM", &a]).unwrap();
    assert_eq!(info["last-generated-id"], Value::BulkString(b"9-0".to_vec()));
    assert_eq!(info["max-deleted-entry-id"], Value::BulkString(b"3-0".to_vec()));
    assert_eq!(info["entries-added"], Value::Int(5));
}

#[test]
fn keyspace_commands_and_events_on_streams() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["XADD", &a, "1-0", "f", "v"]).unwrap();
    q::<String>(&mut c, &["XGROUP", "CREATE", &a, "g", "0"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &b]).unwrap(), 1);
    assert_eq!(ids(&q(&mut c, &["XRANGE", &b, "-", "+"]).unwrap()), ["1-0"]);
    assert_eq!(
        q::<i64>(&mut c, &["XGROUP", "CREATECONSUMER", &b, "g", "c"]).unwrap(),
        1,
        "groups are copied"
    );
    q::<String>(&mut c, &["RENAME", &b, "renamed"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["XLEN", "renamed"]).unwrap(), 1);
    let usage: i64 = q(&mut c, &["MEMORY", "USAGE", &a]).unwrap();
    assert!(usage > 0);
    let scanned: (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "TYPE", "stream", "COUNT", "100"]).unwrap();
    assert!(scanned.1.contains(&a));

    let mut s = server.raw();
    s.call(&["PSUBSCRIBE", "__keyevent@0__:*"]);
    q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Et"]).unwrap();
    q::<String>(&mut c, &["XADD", &a, "MAXLEN", "1", "2-0", "f", "v"]).unwrap();
    q::<i64>(&mut c, &["XDEL", &a, "2-0"]).unwrap();
    q::<String>(&mut c, &["XGROUP", "CREATE", &a, "g2", "0"]).unwrap();
    q::<String>(&mut c, &["XGROUP", "SETID", &a, "g2", "0"]).unwrap();
    q::<i64>(&mut c, &["XGROUP", "CREATECONSUMER", &a, "g2", "x"]).unwrap();
    q::<i64>(&mut c, &["XGROUP", "DELCONSUMER", &a, "g2", "x"]).unwrap();
    q::<i64>(&mut c, &["XGROUP", "DESTROY", &a, "g2"]).unwrap();
    q::<String>(&mut c, &["XSETID", &a, "5-0"]).unwrap();
    q::<i64>(&mut c, &["XTRIM", &a, "MAXLEN", "0"]).unwrap();
    for event in [
        "xadd",
        "xtrim",
        "xdel",
        "xgroup-create",
        "xgroup-setid",
        "xgroup-createconsumer",
        "xgroup-delconsumer",
        "xgroup-destroy",
        "xsetid",
    ] {
        let frame = String::from_utf8(s.read_frame()).unwrap();
        assert!(frame.contains(&format!("__keyevent@0__:{event}\r\n")), "{event}: {frame:?}");
    }
}

/// The flash-sale queue: a producer appends orders to `stream.orders` while
/// a group of three consumers, each on its own connection and thread, reads
/// with `>` and acknowledges; c2 "crashes" on some orders (no ack) and then
/// recovers them from its pending list (id 0) until it is empty. Every order
/// is handled at least once, none is delivered twice by `>`, none stays
/// pending.
#[test]
fn flash_sale_orders_are_each_handled_at_least_once() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    const ORDERS: usize = 10_000;
    let server = Server::start(2);
    let mut c = server.client();
    let key = "stream.orders";
    assert_eq!(
        q::<String>(&mut c, &["XGROUP", "CREATE", key, "g1", "0", "MKSTREAM"]).unwrap(),
        "OK"
    );
    let produced = Arc::new(AtomicBool::new(false));
    let mut producer = server.client();
    let done = produced.clone();
    let producer = std::thread::spawn(move || {
        for i in 0..ORDERS {
            let id = i.to_string();
            q::<String>(
                &mut producer,
                &["XADD", key, "*", "userId", "7", "voucherId", "3", "id", &id],
            )
            .unwrap();
        }
        done.store(true, Ordering::SeqCst);
    });
    let consumers: Vec<_> = ["c1", "c2", "c3"]
        .into_iter()
        .map(|name| {
            let mut conn = server.client();
            let produced = produced.clone();
            std::thread::spawn(move || {
                // (delivered by `>`, acknowledged)
                let mut delivered = Vec::new();
                let mut acked = Vec::new();
                loop {
                    let finished = produced.load(Ordering::SeqCst);
                    let args = ["XREADGROUP", "GROUP", "g1", name, "COUNT", "1", "BLOCK", "2000"];
                    let args: Vec<&str> = args.into_iter().chain(["STREAMS", key, ">"]).collect();
                    let got = read_ids(&q(&mut conn, &args).unwrap());
                    let Some((_, ids)) = got.into_iter().next() else {
                        if finished {
                            break;
                        }
                        std::thread::sleep(std::time::Duration::from_millis(1));
                        continue;
                    };
                    for id in ids {
                        delivered.push(id.clone());
                        // c2 fails on every 5th order it gets.
                        if name == "c2" && delivered.len() % 5 == 0 {
                            continue;
                        }
                        assert_eq!(q::<i64>(&mut conn, &["XACK", key, "g1", &id]).unwrap(), 1);
                        acked.push(id);
                    }
                }
                (delivered, acked)
            })
        })
        .collect();
    producer.join().unwrap();
    let mut delivered = std::collections::BTreeSet::new();
    let mut handled = std::collections::BTreeSet::new();
    for consumer in consumers {
        let (got, acked) = consumer.join().unwrap();
        for id in got {
            assert!(delivered.insert(id.clone()), "{id} delivered twice by >");
        }
        handled.extend(acked);
    }
    assert_eq!(delivered.len(), ORDERS);
    assert!(handled.len() < ORDERS, "c2 crashed on some orders");
    // c2 recovers: its pending list from 0 until empty.
    loop {
        let args = ["XREADGROUP", "GROUP", "g1", "c2", "COUNT", "5", "STREAMS", key, "0"];
        let got = read_ids(&q(&mut c, &args).unwrap());
        let ids = &got[0].1;
        if ids.is_empty() {
            break;
        }
        for id in ids {
            assert_eq!(q::<i64>(&mut c, &["XACK", key, "g1", id]).unwrap(), 1);
            handled.insert(id.clone());
        }
    }
    assert_eq!(handled.len(), ORDERS);
    let summary: Value = q(&mut c, &["XPENDING", key, "g1"]).unwrap();
    assert_eq!(summary, Value::Array(vec![Value::Int(0), Value::Nil, Value::Nil, Value::Nil]));
}
