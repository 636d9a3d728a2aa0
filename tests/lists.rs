//! Lists against a real 2-shard server: every list command and option, the
//! RESP2/RESP3 null rules, Redis's error texts, WRONGTYPE, deletion of
//! emptied lists, the `quicklist` encoding at every size, keys on both
//! shards, and LMOVE / RPOPLPUSH / LMPOP with keys on different shards.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::collections::VecDeque;

const WRONGTYPE: &str = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";

/// A bulk string reply as RESP text.
fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

/// An array of bulk strings as RESP text.
fn bulks(items: &[&str]) -> String {
    let mut out = format!("*{}\r\n", items.len());
    for item in items {
        out += &bulk(item);
    }
    out
}

/// Another key on the same shard as `key` (same hash tag, so same slot).
fn beside(key: &str, name: &str) -> String {
    format!("{{{key}}}:{name}")
}

fn lrange(raw: &mut Raw, key: &str) -> String {
    raw.call(&["LRANGE", key, "0", "-1"])
}

#[test]
fn push_pop_len_range_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        let key = key.as_str();
        assert_eq!(q::<i64>(&mut c, &["LPUSHX", key, "x"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["RPUSHX", key, "x"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0, "LPUSHX created {key}");
        assert_eq!(q::<i64>(&mut c, &["RPUSH", key, "a", "b", "c"]).unwrap(), 3);
        assert_eq!(q::<i64>(&mut c, &["LPUSH", key, "1", "2"]).unwrap(), 5);
        assert_eq!(q::<i64>(&mut c, &["LPUSHX", key, "y", "z"]).unwrap(), 7);
        assert_eq!(q::<i64>(&mut c, &["RPUSHX", key, "-7"]).unwrap(), 8);
        assert_eq!(q::<i64>(&mut c, &["LLEN", key]).unwrap(), 8);
        let all: Vec<String> = q(&mut c, &["LRANGE", key, "0", "-1"]).unwrap();
        assert_eq!(all, ["z", "y", "2", "1", "a", "b", "c", "-7"]);
        let some: Vec<String> = q(&mut c, &["LRANGE", key, "-3", "100"]).unwrap();
        assert_eq!(some, ["b", "c", "-7"]);
        let none: Vec<String> = q(&mut c, &["LRANGE", key, "5", "2"]).unwrap();
        assert!(none.is_empty());
        assert_eq!(q::<String>(&mut c, &["LPOP", key]).unwrap(), "z");
        assert_eq!(q::<String>(&mut c, &["RPOP", key]).unwrap(), "-7");
        let popped: Vec<String> = q(&mut c, &["RPOP", key, "2"]).unwrap();
        assert_eq!(popped, ["c", "b"]);
        let popped: Vec<String> = q(&mut c, &["LPOP", key, "2"]).unwrap();
        assert_eq!(popped, ["y", "2"]);
        let popped: Vec<String> = q(&mut c, &["LPOP", key, "0"]).unwrap();
        assert!(popped.is_empty());
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "list");
        let popped: Vec<String> = q(&mut c, &["LPOP", key, "100"]).unwrap();
        assert_eq!(popped, ["1", "a"]);
        // The emptied list is gone.
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "none");
        assert_eq!(q::<i64>(&mut c, &["LLEN", key]).unwrap(), 0);
    }
}

#[test]
fn null_replies_in_resp2_and_resp3() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    raw.call(&["RPUSH", &b, "v"]);
    let resp2 = [
        (vec!["LPOP", &a], "$-1\r\n"),
        (vec!["RPOP", &a, "1"], "*-1\r\n"),
        (vec!["LPOP", &a, "0"], "*-1\r\n"),
        (vec!["LPOP", &b, "0"], "*0\r\n"),
        (vec!["LINDEX", &a, "0"], "$-1\r\n"),
        (vec!["LINDEX", &b, "5"], "$-1\r\n"),
        (vec!["LRANGE", &a, "0", "-1"], "*0\r\n"),
        (vec!["LPOS", &a, "v"], "$-1\r\n"),
        (vec!["LPOS", &b, "x"], "$-1\r\n"),
        (vec!["LPOS", &a, "v", "COUNT", "0"], "*0\r\n"),
        (vec!["LMOVE", &a, &b, "LEFT", "LEFT"], "$-1\r\n"),
        (vec!["RPOPLPUSH", &a, &b], "$-1\r\n"),
    ];
    for (args, want) in &resp2 {
        assert_eq!(raw.call(args), *want, "{args:?}");
    }
    let missing = beside(&a, "other");
    assert_eq!(raw.call(&["LMPOP", "2", &a, &missing, "LEFT"]), "*-1\r\n");
    assert!(raw.call(&["HELLO", "3"]).starts_with('%'));
    for (args, want) in &resp2 {
        let want = if want.starts_with("*0") { "*0\r\n" } else { "_\r\n" };
        assert_eq!(raw.call(args), want, "RESP3 {args:?}");
    }
    assert_eq!(raw.call(&["LMPOP", "2", &a, &missing, "RIGHT"]), "_\r\n");
    assert_eq!(raw.call(&["RPOP", &b, "5"]), bulks(&["v"]));
}

#[test]
fn lindex_lset_linsert_lrem_ltrim() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    for key in [&a, &b] {
        let key = key.as_str();
        raw.call(&["RPUSH", key, "a", "b", "c", "b", "a", "10"]);
        assert_eq!(raw.call(&["LINDEX", key, "0"]), bulk("a"));
        assert_eq!(raw.call(&["LINDEX", key, "-1"]), bulk("10"));
        assert_eq!(raw.call(&["LINDEX", key, "-7"]), "$-1\r\n");
        assert_eq!(raw.call(&["LSET", key, "1", "B"]), "+OK\r\n");
        assert_eq!(raw.call(&["LSET", key, "-1", "11"]), "+OK\r\n");
        assert_eq!(raw.call(&["LSET", key, "6", "x"]), "-ERR index out of range\r\n");
        assert_eq!(raw.call(&["LSET", key, "-7", "x"]), "-ERR index out of range\r\n");
        assert_eq!(raw.call(&["LINSERT", key, "BEFORE", "c", "X"]), ":7\r\n");
        assert_eq!(raw.call(&["LINSERT", key, "after", "a", "Y"]), ":8\r\n");
        assert_eq!(raw.call(&["LINSERT", key, "AFTER", "nope", "Y"]), ":-1\r\n");
        assert_eq!(lrange(&mut raw, key), bulks(&["a", "Y", "B", "X", "c", "b", "a", "11"]));
        assert_eq!(raw.call(&["LREM", key, "0", "nope"]), ":0\r\n");
        assert_eq!(raw.call(&["LREM", key, "-1", "a"]), ":1\r\n");
        raw.call(&["RPUSH", key, "b", "b"]);
        assert_eq!(raw.call(&["LREM", key, "2", "b"]), ":2\r\n");
        assert_eq!(lrange(&mut raw, key), bulks(&["a", "Y", "B", "X", "c", "11", "b"]));
        assert_eq!(raw.call(&["LREM", key, "0", "b"]), ":1\r\n");
        assert_eq!(raw.call(&["LTRIM", key, "1", "-2"]), "+OK\r\n");
        assert_eq!(lrange(&mut raw, key), bulks(&["Y", "B", "X", "c"]));
        assert_eq!(raw.call(&["LTRIM", key, "-100", "100"]), "+OK\r\n");
        assert_eq!(raw.call(&["LLEN", key]), ":4\r\n");
        assert_eq!(raw.call(&["LTRIM", key, "2", "1"]), "+OK\r\n");
        assert_eq!(raw.call(&["EXISTS", key]), ":0\r\n", "LTRIM to nothing deletes");
        raw.call(&["RPUSH", key, "z", "z"]);
        assert_eq!(raw.call(&["LREM", key, "0", "z"]), ":2\r\n");
        assert_eq!(raw.call(&["EXISTS", key]), ":0\r\n", "LREM of everything deletes");
        // Missing keys.
        assert_eq!(raw.call(&["LINSERT", key, "BEFORE", "a", "b"]), ":0\r\n");
        assert_eq!(raw.call(&["LREM", key, "0", "a"]), ":0\r\n");
        assert_eq!(raw.call(&["LTRIM", key, "0", "1"]), "+OK\r\n");
        assert_eq!(raw.call(&["LSET", key, "0", "a"]), "-ERR no such key\r\n");
        assert_eq!(raw.call(&["EXISTS", key]), ":0\r\n");
    }
}

#[test]
fn lpos_every_option_and_error() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    for key in [&a, &b] {
        let key = key.as_str();
        raw.call(&["RPUSH", key, "a", "b", "c", "1", "2", "3", "c", "c"]);
        let cases: &[(&[&str], &str)] = &[
            (&["c"], ":2\r\n"),
            (&["1"], ":3\r\n"),
            (&["c", "RANK", "2"], ":6\r\n"),
            (&["c", "rank", "-1"], ":7\r\n"),
            (&["c", "RANK", "-3"], ":2\r\n"),
            (&["c", "RANK", "4"], "$-1\r\n"),
            (&["c", "COUNT", "0"], "*3\r\n:2\r\n:6\r\n:7\r\n"),
            (&["c", "COUNT", "2"], "*2\r\n:2\r\n:6\r\n"),
            (&["c", "COUNT", "0", "RANK", "-2"], "*2\r\n:6\r\n:2\r\n"),
            (&["c", "RANK", "2", "COUNT", "1"], "*1\r\n:6\r\n"),
            (&["c", "COUNT", "0", "MAXLEN", "7"], "*2\r\n:2\r\n:6\r\n"),
            (&["c", "MAXLEN", "2"], "$-1\r\n"),
            (&["c", "RANK", "-1", "MAXLEN", "1"], ":7\r\n"),
            (&["x", "COUNT", "5"], "*0\r\n"),
            (&["c", "RANK", "0"], "-ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list\r\n"),
            (&["c", "RANK", "x"], "-ERR value is not an integer or out of range\r\n"),
            (&["c", "COUNT", "-1"], "-ERR COUNT can't be negative\r\n"),
            (&["c", "COUNT", "x"], "-ERR COUNT can't be negative\r\n"),
            (&["c", "MAXLEN", "-1"], "-ERR MAXLEN can't be negative\r\n"),
            (&["c", "MAXLEN"], "-ERR syntax error\r\n"),
            (&["c", "WHAT", "1"], "-ERR syntax error\r\n"),
        ];
        for (options, want) in cases {
            let mut args = vec!["LPOS", key];
            args.extend_from_slice(options);
            assert_eq!(raw.call(&args), *want, "{args:?}");
        }
    }
    // Options are checked before the key is looked up.
    assert_eq!(
        raw.call(&["LPOS", "missing", "a", "RANK", "0"]).get(..16),
        Some("-ERR RANK can't ")
    );
}

#[test]
fn lmove_and_rpoplpush_across_shards() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    raw.call(&["RPUSH", &a, "1", "2", "3", "4"]);
    raw.call(&["RPUSH", &b, "x"]);
    assert_eq!(raw.call(&["LMOVE", &a, &b, "LEFT", "RIGHT"]), bulk("1"));
    assert_eq!(raw.call(&["LMOVE", &a, &b, "RIGHT", "LEFT"]), bulk("4"));
    assert_eq!(raw.call(&["LMOVE", &b, &a, "left", "left"]), bulk("4"));
    assert_eq!(raw.call(&["LMOVE", &b, &a, "RIGHT", "RIGHT"]), bulk("1"));
    assert_eq!(lrange(&mut raw, &a), bulks(&["4", "2", "3", "1"]));
    assert_eq!(lrange(&mut raw, &b), bulks(&["x"]));
    assert_eq!(raw.call(&["RPOPLPUSH", &a, &b]), bulk("1"));
    assert_eq!(lrange(&mut raw, &b), bulks(&["1", "x"]));
    // Moving the last element deletes the source on its own shard and
    // creates the destination on the other.
    let fresh = beside(&b, "fresh");
    for _ in 0..2 {
        raw.call(&["RPOPLPUSH", &b, &fresh]);
    }
    assert_eq!(raw.call(&["EXISTS", &b]), ":0\r\n");
    assert_eq!(lrange(&mut raw, &fresh), bulks(&["1", "x"]));
    assert_eq!(raw.call(&["RPOPLPUSH", &a, &b]), bulk("3"));
    assert_eq!(raw.call(&["LMOVE", &a, &b, "LEFT", "LEFT"]), bulk("4"));
    assert_eq!(raw.call(&["LMOVE", &a, &b, "LEFT", "LEFT"]), bulk("2"));
    assert_eq!(raw.call(&["EXISTS", &a]), ":0\r\n");
    assert_eq!(lrange(&mut raw, &b), bulks(&["2", "4", "3"]));
    // A destination of another type on the other shard: nothing moves.
    let string = beside(&a, "string");
    raw.call(&["SET", &string, "v"]);
    assert_eq!(raw.call(&["LMOVE", &b, &string, "LEFT", "LEFT"]), WRONGTYPE);
    assert_eq!(raw.call(&["RPOPLPUSH", &b, &string]), WRONGTYPE);
    assert_eq!(raw.call(&["RPOPLPUSH", &string, &b]), WRONGTYPE);
    assert_eq!(raw.call(&["LLEN", &b]), ":3\r\n");
    // A missing source replies null even when the destination is wrong.
    assert_eq!(raw.call(&["RPOPLPUSH", &a, &string]), "$-1\r\n");
    // Same key as source and destination: a rotation.
    assert_eq!(raw.call(&["LMOVE", &b, &b, "LEFT", "RIGHT"]), bulk("2"));
    assert_eq!(raw.call(&["RPOPLPUSH", &b, &b]), bulk("2"));
    assert_eq!(lrange(&mut raw, &b), bulks(&["2", "4", "3"]));
    assert_eq!(raw.call(&["LMOVE", &b, &a, "UP", "LEFT"]), "-ERR syntax error\r\n");
    assert_eq!(raw.call(&["LMOVE", &b, &a, "LEFT", "DOWN"]), "-ERR syntax error\r\n");
}

#[test]
fn lmpop_across_shards() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    raw.call(&["RPUSH", &b, "1", "2", "3"]);
    let want = |key: &str, items: &[&str]| format!("*2\r\n{}{}", bulk(key), bulks(items));
    assert_eq!(raw.call(&["LMPOP", "2", &a, &b, "LEFT"]), want(&b, &["1"]));
    assert_eq!(raw.call(&["LMPOP", "2", &a, &b, "RIGHT", "COUNT", "1"]), want(&b, &["3"]));
    raw.call(&["RPUSH", &a, "x", "y"]);
    assert_eq!(raw.call(&["LMPOP", "2", &a, &b, "right", "count", "10"]), want(&a, &["y", "x"]));
    assert_eq!(raw.call(&["EXISTS", &a]), ":0\r\n");
    assert_eq!(raw.call(&["LMPOP", "2", &a, &b, "LEFT", "COUNT", "10"]), want(&b, &["2"]));
    assert_eq!(raw.call(&["EXISTS", &b]), ":0\r\n");
    assert_eq!(raw.call(&["LMPOP", "2", &a, &b, "LEFT"]), "*-1\r\n");
    // A key of another type before any list is an error; after one, unseen.
    raw.call(&["SET", &a, "v"]);
    raw.call(&["RPUSH", &b, "1"]);
    assert_eq!(raw.call(&["LMPOP", "2", &a, &b, "LEFT"]), WRONGTYPE);
    assert_eq!(raw.call(&["LMPOP", "2", &b, &a, "LEFT"]), want(&b, &["1"]));
    let errors: &[(&[&str], &str)] = &[
        (&["0", "k", "LEFT"], "-ERR numkeys should be greater than 0\r\n"),
        (&["-1", "k", "LEFT"], "-ERR numkeys should be greater than 0\r\n"),
        (&["x", "k", "LEFT"], "-ERR numkeys should be greater than 0\r\n"),
        (&["3", "k", "LEFT"], "-ERR syntax error\r\n"),
        // Once crashed the router's key finder (overflow).
        (&["9223372036854775807", "k", "LEFT"], "-ERR syntax error\r\n"),
        (&["9223372036854775806", "k", "LEFT"], "-ERR syntax error\r\n"),
        (&["1", "k", "UP"], "-ERR syntax error\r\n"),
        (&["1", "k", "LEFT", "COUNT"], "-ERR syntax error\r\n"),
        (&["1", "k", "LEFT", "COUNT", "1", "COUNT", "1"], "-ERR syntax error\r\n"),
        (&["1", "k", "LEFT", "LIMIT", "1"], "-ERR syntax error\r\n"),
        (&["1", "k", "LEFT", "COUNT", "0"], "-ERR count should be greater than 0\r\n"),
        (&["1", "k", "LEFT", "COUNT", "-2"], "-ERR count should be greater than 0\r\n"),
        (&["1", "k", "LEFT", "COUNT", "x"], "-ERR count should be greater than 0\r\n"),
    ];
    for (rest, want) in errors {
        let mut args = vec!["LMPOP"];
        args.extend_from_slice(rest);
        assert_eq!(raw.call(&args), *want, "{args:?}");
    }
    assert_eq!(
        raw.call(&["LMPOP", "1", "k"]),
        "-ERR wrong number of arguments for 'lmpop' command\r\n"
    );
}

#[test]
fn wrongtype_and_argument_errors() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    for key in [&a, &b] {
        let key = key.as_str();
        raw.call(&["SET", key, "v"]);
        let list = beside(key, "list");
        raw.call(&["RPUSH", &list, "e"]);
        let commands: Vec<Vec<&str>> = vec![
            vec!["LPUSH", key, "x"],
            vec!["RPUSH", key, "x"],
            vec!["LPUSHX", key, "x"],
            vec!["RPUSHX", key, "x"],
            vec!["LPOP", key],
            vec!["RPOP", key, "2"],
            vec!["LPOP", key, "0"],
            vec!["LLEN", key],
            vec!["LRANGE", key, "0", "-1"],
            vec!["LINDEX", key, "0"],
            vec!["LSET", key, "0", "x"],
            vec!["LINSERT", key, "BEFORE", "a", "b"],
            vec!["LREM", key, "0", "a"],
            vec!["LTRIM", key, "0", "1"],
            vec!["LPOS", key, "a"],
            vec!["LMOVE", key, &list, "LEFT", "LEFT"],
            vec!["LMOVE", &list, key, "LEFT", "LEFT"],
            vec!["RPOPLPUSH", key, &list],
            vec!["LMPOP", "1", key, "LEFT"],
        ];
        for args in &commands {
            assert_eq!(raw.call(args), WRONGTYPE, "{args:?}");
        }
        assert_eq!(raw.call(&["GET", key]), bulk("v"));
        assert_eq!(lrange(&mut raw, &list), bulks(&["e"]));
    }
    let not_integer = "-ERR value is not an integer or out of range\r\n";
    let errors: &[(&[&str], &str)] = &[
        (&["LPOP", "k", "x"], "-ERR value is out of range, must be positive\r\n"),
        (&["RPOP", "k", "-1"], "-ERR value is out of range, must be positive\r\n"),
        (&["LPOP", "k", "1", "2"], "-ERR wrong number of arguments for 'lpop' command\r\n"),
        (&["RPOP", "k", "1", "2"], "-ERR wrong number of arguments for 'rpop' command\r\n"),
        (&["LPUSH", "k"], "-ERR wrong number of arguments for 'lpush' command\r\n"),
        (&["LLEN"], "-ERR wrong number of arguments for 'llen' command\r\n"),
        (&["LRANGE", "k", "a", "1"], not_integer),
        (&["LRANGE", "k", "0", "1.5"], not_integer),
        (&["LTRIM", "k", "0", "x"], not_integer),
        (&["LREM", "k", "x", "a"], not_integer),
        (&["LINSERT", "k", "MIDDLE", "a", "b"], "-ERR syntax error\r\n"),
        (
            &["LINSERT", "k", "BEFORE", "a"],
            "-ERR wrong number of arguments for 'linsert' command\r\n",
        ),
        (&["RPOPLPUSH", "k"], "-ERR wrong number of arguments for 'rpoplpush' command\r\n"),
    ];
    for (args, want) in errors {
        assert_eq!(raw.call(args), *want, "{args:?}");
    }
    // LINDEX and LSET look the key up before the index.
    assert_eq!(raw.call(&["LINDEX", "missing", "x"]), "$-1\r\n");
    assert_eq!(raw.call(&["LSET", "missing", "x", "v"]), "-ERR no such key\r\n");
    raw.call(&["RPUSH", "l", "a"]);
    assert_eq!(raw.call(&["LINDEX", "l", "x"]), not_integer);
    assert_eq!(raw.call(&["LSET", "l", "x", "v"]), not_integer);
}

/// Redis 7.0 lists are `quicklist` at every size; the node structure under
/// it changes with `list-max-listpack-size`, and the contents must not.
#[test]
fn quicklist_encoding_at_every_size_and_node_limit() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let mut raw = server.raw();
    // Every node limit, plain and with inner nodes LZF-compressed.
    let runs = [(&a, "-2", "0"), (&b, "3", "0"), (&a, "1", "2"), (&b, "-1", "1"), (&a, "-2", "1")];
    for (key, fill, depth) in runs {
        let key = key.as_str();
        q::<()>(&mut c, &["DEL", key]).unwrap();
        for (name, value) in [("list-max-listpack-size", fill), ("list-compress-depth", depth)] {
            assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", name, value]).unwrap(), "OK");
        }
        let mut model: VecDeque<String> = VecDeque::new();
        q::<i64>(&mut c, &["RPUSH", key, "1"]).unwrap();
        model.push_back("1".into());
        assert_eq!(raw.call(&["OBJECT", "ENCODING", key]), bulk("quicklist"), "fill {fill}");
        // Small, integer and large elements (one past a whole 8 KiB node).
        for i in 0..300 {
            let value = match i % 5 {
                0 => i.to_string(),
                1 => format!("-{i}"),
                2 => "x".repeat(i % 50),
                3 => "y".repeat(9000 + i),
                _ => format!("element:{i}"),
            };
            if i % 2 == 0 {
                q::<i64>(&mut c, &["RPUSH", key, &value]).unwrap();
                model.push_back(value);
            } else {
                q::<i64>(&mut c, &["LPUSH", key, &value]).unwrap();
                model.push_front(value);
            }
        }
        assert_eq!(raw.call(&["OBJECT", "ENCODING", key]), bulk("quicklist"), "fill {fill}");
        // Changes in the middle of nodes.
        let pivot = model[150].clone();
        q::<i64>(&mut c, &["LINSERT", key, "AFTER", &pivot, "inserted"]).unwrap();
        let at = model.iter().position(|v| *v == pivot).unwrap_or(0);
        model.insert(at + 1, "inserted".into());
        let big = "z".repeat(20_000);
        q::<String>(&mut c, &["LSET", key, "100", &big]).unwrap();
        model[100] = big;
        q::<String>(&mut c, &["LSET", key, "-5", "small"]).unwrap();
        let last = model.len() - 5;
        model[last] = "small".into();
        let removed: i64 = q(&mut c, &["LREM", key, "0", "x"]).unwrap();
        let before = model.len();
        model.retain(|v| v != "x");
        assert_eq!(removed as usize, before - model.len());
        q::<String>(&mut c, &["LTRIM", key, "7", "-9"]).unwrap();
        let kept: VecDeque<String> = model.range(7..model.len() - 8).cloned().collect();
        model = kept;
        let got: Vec<String> = q(&mut c, &["LRANGE", key, "0", "-1"]).unwrap();
        assert!(got.iter().eq(model.iter()), "fill {fill}: contents differ after edits");
        for (index, want) in model.iter().enumerate().step_by(17) {
            let index = index.to_string();
            assert_eq!(q::<String>(&mut c, &["LINDEX", key, &index]).unwrap(), *want);
        }
        // Down to one element: still a quicklist, as in Redis 7.0.
        let n = (model.len() - 1).to_string();
        let popped: Vec<String> = q(&mut c, &["RPOP", key, &n]).unwrap();
        assert_eq!(popped.len(), model.len() - 1);
        assert_eq!(raw.call(&["OBJECT", "ENCODING", key]), bulk("quicklist"), "fill {fill}");
        assert_eq!(q::<i64>(&mut c, &["LLEN", key]).unwrap(), 1);
    }
}

/// `list-compress-depth`: inner nodes take a fraction of the memory, every
/// command still sees the same elements, and a list keeps the depth it was
/// created with (as in Redis).
#[test]
fn compress_depth_shrinks_inner_nodes() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let fill = |c: &mut redis::Connection, key: &str| {
        for chunk in 0..50 {
            let values: Vec<String> =
                (0..1000).map(|i| format!("order:{}:pending", (chunk * 1000 + i) % 100)).collect();
            let mut args = vec!["RPUSH", key];
            args.extend(values.iter().map(String::as_str));
            q::<i64>(c, &args).unwrap();
        }
    };
    fill(&mut c, &a);
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "list-compress-depth", "1"]).unwrap(), "OK");
    fill(&mut c, &b);
    let plain: i64 = q(&mut c, &["MEMORY", "USAGE", &a]).unwrap();
    let packed: i64 = q(&mut c, &["MEMORY", "USAGE", &b]).unwrap();
    assert!(packed * 4 < plain, "compressed {packed} bytes vs plain {plain}");
    // Reads and changes in the middle give what the plain list gives.
    for key in [&a, &b] {
        q::<i64>(&mut c, &["LINSERT", key, "BEFORE", "order:42:pending", "first-42"]).unwrap();
        q::<String>(&mut c, &["LSET", key, "25000", "middle"]).unwrap();
        q::<i64>(&mut c, &["LREM", key, "-3", "order:7:pending"]).unwrap();
    }
    for cmd in [
        vec!["LRANGE", "K", "24990", "25010"],
        vec!["LRANGE", "K", "0", "-1"],
        vec!["LINDEX", "K", "30000"],
        vec!["LPOS", "K", "middle"],
        vec!["LPOS", "K", "order:7:pending", "RANK", "-1", "COUNT", "5"],
    ] {
        let on = |key: &str| -> Vec<String> {
            cmd.iter().map(|&x| if x == "K" { key } else { x }.to_string()).collect()
        };
        let got_a: redis::Value =
            q(&mut c, &on(&a).iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        let got_b: redis::Value =
            q(&mut c, &on(&b).iter().map(String::as_str).collect::<Vec<_>>()).unwrap();
        assert_eq!(got_a, got_b, "{cmd:?}");
    }
    // Reads do not leave decompressed copies behind.
    let after: i64 = q(&mut c, &["MEMORY", "USAGE", &b]).unwrap();
    assert!(after * 4 < plain, "{after} bytes after reads");
    // The plain list stays plain under the new setting, and pops drain both alike.
    let popped_a: Vec<String> = q(&mut c, &["LPOP", &a, "30000"]).unwrap();
    let popped_b: Vec<String> = q(&mut c, &["LPOP", &b, "30000"]).unwrap();
    assert_eq!(popped_a, popped_b);
    for bad in ["-1", "x"] {
        let err = q::<String>(&mut c, &["CONFIG", "SET", "list-compress-depth", bad]).unwrap_err();
        assert!(err.to_string().contains("list-compress-depth"), "{err}");
    }
}

#[test]
fn lists_rename_copy_and_expire_like_other_keys() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    raw.call(&["RPUSH", &a, "1", "2"]);
    assert_eq!(raw.call(&["RENAME", &a, &b]), "+OK\r\n");
    assert_eq!(lrange(&mut raw, &b), bulks(&["1", "2"]));
    assert_eq!(raw.call(&["COPY", &b, &a]), ":1\r\n");
    raw.call(&["RPUSH", &a, "3"]);
    assert_eq!(raw.call(&["LLEN", &b]), ":2\r\n", "COPY shares nothing");
    assert_eq!(raw.call(&["LLEN", &a]), ":3\r\n");
    assert_eq!(raw.call(&["PEXPIRE", &a, "20"]), ":1\r\n");
    std::thread::sleep(std::time::Duration::from_millis(60));
    assert_eq!(raw.call(&["LPUSHX", &a, "x"]), ":0\r\n");
    assert_eq!(raw.call(&["LPOP", &a]), "$-1\r\n");
    assert_eq!(raw.call(&["LMOVE", &b, &a, "LEFT", "LEFT"]), bulk("1"));
    assert_eq!(raw.call(&["TTL", &a]), ":-1\r\n", "a fresh list, not the expired one");
}
