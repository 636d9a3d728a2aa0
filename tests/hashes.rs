//! Hashes against a real 2-shard server: every command and option with keys
//! on both shards, Redis's error texts, WRONGTYPE, RESP3 reply shapes
//! (HGETALL's map, HRANDFIELD's nested pairs), the listpack → hashtable
//! conversions at the CONFIG thresholds, the generic commands on hashes
//! (TYPE, RENAME, COPY, EXPIRE, SCAN TYPE), and HSCAN's guarantee while
//! other clients add and remove fields of the hash being scanned.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use redis::Value;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// The exact error text a command gets (without `-` and CRLF).
fn err(raw: &mut Raw, args: &[&str]) -> String {
    let reply = raw.call(args);
    assert!(reply.starts_with('-'), "{args:?}: expected an error, got {reply:?}");
    reply[1..].trim_end().to_string()
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    q(c, &["OBJECT", "ENCODING", key]).unwrap()
}

/// HGETALL as a field → value map.
fn hgetall(c: &mut redis::Connection, key: &str) -> HashMap<String, String> {
    q(c, &["HGETALL", key]).unwrap()
}

#[test]
fn set_get_and_friends_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        assert_eq!(q::<i64>(&mut c, &["HSET", key, "f1", "v1", "f2", "2"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["HSET", key, "f1", "x", "f3", ""]).unwrap(), 1);
        assert_eq!(q::<String>(&mut c, &["HMSET", key, "f4", "-17", "f1", "v1"]).unwrap(), "OK");
        assert_eq!(q::<i64>(&mut c, &["HSETNX", key, "f1", "no"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["HSETNX", key, "f5", "yes"]).unwrap(), 1);
        assert_eq!(q::<String>(&mut c, &["HGET", key, "f1"]).unwrap(), "v1");
        assert_eq!(q::<String>(&mut c, &["HGET", key, "f4"]).unwrap(), "-17");
        assert_eq!(q::<Option<String>>(&mut c, &["HGET", key, "nope"]).unwrap(), None);
        assert_eq!(
            q::<Vec<Option<String>>>(&mut c, &["HMGET", key, "f2", "nope", "f3"]).unwrap(),
            vec![Some("2".into()), None, Some(String::new())]
        );
        assert_eq!(q::<i64>(&mut c, &["HLEN", key]).unwrap(), 5);
        assert_eq!(q::<i64>(&mut c, &["HSTRLEN", key, "f4"]).unwrap(), 3);
        assert_eq!(q::<i64>(&mut c, &["HSTRLEN", key, "nope"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["HEXISTS", key, "f5"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["HEXISTS", key, "nope"]).unwrap(), 0);
        // A listpack keeps insertion order.
        assert_eq!(
            q::<Vec<String>>(&mut c, &["HKEYS", key]).unwrap(),
            ["f1", "f2", "f3", "f4", "f5"]
        );
        assert_eq!(
            q::<Vec<String>>(&mut c, &["HVALS", key]).unwrap(),
            ["v1", "2", "", "-17", "yes"]
        );
        let all = hgetall(&mut c, key);
        assert_eq!(all.len(), 5);
        assert_eq!(all["f5"], "yes");
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "hash");
    }
    // Missing keys are empty hashes.
    for (cmd, reply) in [
        (&["HGET", "nokey", "f"][..], Value::Nil),
        (&["HMGET", "nokey", "f", "g"], Value::Array(vec![Value::Nil, Value::Nil])),
        (&["HGETALL", "nokey"], Value::Array(vec![])),
        (&["HKEYS", "nokey"], Value::Array(vec![])),
        (&["HVALS", "nokey"], Value::Array(vec![])),
        (&["HLEN", "nokey"], Value::Int(0)),
        (&["HSTRLEN", "nokey", "f"], Value::Int(0)),
        (&["HEXISTS", "nokey", "f"], Value::Int(0)),
        (&["HDEL", "nokey", "f"], Value::Int(0)),
        (&["HRANDFIELD", "nokey"], Value::Nil),
        (&["HRANDFIELD", "nokey", "3"], Value::Array(vec![])),
    ] {
        assert_eq!(q::<Value>(&mut c, cmd).unwrap(), reply, "{cmd:?}");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "nokey"]).unwrap(), 0);
}

#[test]
fn hdel_and_empty_hashes_are_deleted() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<i64>(&mut c, &["HSET", key, "a", "1", "b", "2", "c", "3"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["HDEL", key, "a", "nope"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["HDEL", key, "a"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["HDEL", key, "b", "c", "b", "x"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "none");
        // The same for a hashtable.
        let mut args = vec!["HSET".to_string(), key.clone()];
        for i in 0..600 {
            args.push(format!("f{i}"));
            args.push("v".into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        assert_eq!(q::<i64>(&mut c, &args).unwrap(), 600);
        assert_eq!(encoding(&mut c, key), "hashtable");
        let mut del = vec!["HDEL", key.as_str()];
        del.extend(&args[2..].iter().step_by(2).copied().collect::<Vec<_>>());
        assert_eq!(q::<i64>(&mut c, &del).unwrap(), 600);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
    }
}

#[test]
fn counters_and_their_errors() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [a.as_str(), b.as_str()] {
        assert_eq!(raw.call(&["HINCRBY", key, "n", "5"]), ":5\r\n");
        assert_eq!(raw.call(&["HINCRBY", key, "n", "-7"]), ":-2\r\n");
        assert_eq!(raw.call(&["HINCRBY", key, "big", "17179869184"]), ":17179869184\r\n");
        raw.call(&[
            "HSET",
            key,
            "max",
            "9223372036854775807",
            "s",
            "abc",
            "sp",
            " 1",
            "x",
            "1e308",
        ]);
        assert_eq!(
            err(&mut raw, &["HINCRBY", key, "max", "1"]),
            "ERR increment or decrement would overflow"
        );
        assert_eq!(err(&mut raw, &["HINCRBY", key, "s", "1"]), "ERR hash value is not an integer");
        assert_eq!(err(&mut raw, &["HINCRBY", key, "sp", "1"]), "ERR hash value is not an integer");
        assert_eq!(
            err(&mut raw, &["HINCRBY", key, "n", "1.5"]),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "f", "10.5"]), "$4\r\n10.5\r\n");
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "f", "0.1"]), "$4\r\n10.6\r\n");
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "f", "-10.6"]), "$1\r\n0\r\n");
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "g", "1.23"]), "$4\r\n1.23\r\n");
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "g", "0.77"]), "$1\r\n2\r\n");
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "g", "-0.1"]), "$3\r\n1.9\r\n");
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "big", "1.5"]), "$13\r\n17179869185.5\r\n");
        assert_eq!(raw.call(&["HINCRBYFLOAT", key, "e", "5.0e3"]), "$4\r\n5000\r\n");
        assert_eq!(
            err(&mut raw, &["HINCRBYFLOAT", key, "s", "1"]),
            "ERR hash value is not a float"
        );
        assert_eq!(
            err(&mut raw, &["HINCRBYFLOAT", key, "sp", "1"]),
            "ERR hash value is not a float"
        );
        assert_eq!(
            err(&mut raw, &["HINCRBYFLOAT", key, "f", "abc"]),
            "ERR value is not a valid float"
        );
        assert_eq!(
            err(&mut raw, &["HINCRBYFLOAT", key, "f", "+inf"]),
            "ERR value is NaN or Infinity"
        );
        assert_eq!(
            err(&mut raw, &["HINCRBYFLOAT", key, "x", "1e308"]),
            "ERR increment would produce NaN or Infinity"
        );
        assert_eq!(raw.call(&["HGET", key, "x"]), "$5\r\n1e308\r\n", "failures change nothing");
    }
    raw.cmd(&[b"HSET", a.as_bytes(), b"nul", b"1\x002"]);
    raw.read_frame();
    assert_eq!(err(&mut raw, &["HINCRBYFLOAT", &a, "nul", "1"]), "ERR hash value is not a float");
    assert_eq!(
        err(&mut raw, &["HINCRBYFLOAT", "fresh", "f", "-inf"]),
        "ERR value is NaN or Infinity"
    );
    assert_eq!(raw.call(&["EXISTS", "fresh"]), ":0\r\n");
}

#[test]
fn argument_errors_and_wrong_type() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [a.as_str(), b.as_str()] {
        raw.call(&["SET", key, "string"]);
        for cmd in [
            &["HSET", key, "f", "v"][..],
            &["HSETNX", key, "f", "v"],
            &["HMSET", key, "f", "v"],
            &["HGET", key, "f"],
            &["HMGET", key, "f"],
            &["HGETALL", key],
            &["HDEL", key, "f"],
            &["HLEN", key],
            &["HSTRLEN", key, "f"],
            &["HEXISTS", key, "f"],
            &["HKEYS", key],
            &["HVALS", key],
            &["HINCRBY", key, "f", "1"],
            &["HINCRBYFLOAT", key, "f", "1"],
            &["HRANDFIELD", key],
            &["HRANDFIELD", key, "-3", "WITHVALUES"],
            &["HSCAN", key, "0"],
            &["HSCAN", key, "0", "BAD", "OPTION"],
        ] {
            assert_eq!(
                err(&mut raw, cmd),
                "WRONGTYPE Operation against a key holding the wrong kind of value",
                "{cmd:?}"
            );
        }
        assert_eq!(raw.call(&["GET", key]), "$6\r\nstring\r\n");
    }
    assert_eq!(
        err(&mut raw, &["HSET", &a, "f"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        err(&mut raw, &["HSET", &a, "f", "v", "g"]),
        "ERR wrong number of arguments for 'hset' command"
    );
    assert_eq!(
        err(&mut raw, &["HMSET", &a, "f", "v", "g"]),
        "ERR wrong number of arguments for 'hmset' command"
    );
    assert_eq!(err(&mut raw, &["HGET", &a]), "ERR wrong number of arguments for 'hget' command");
    assert_eq!(err(&mut raw, &["HDEL", &a]), "ERR wrong number of arguments for 'hdel' command");
    assert_eq!(err(&mut raw, &["HSCAN", &a]), "ERR wrong number of arguments for 'hscan' command");
    // Argument errors come before the type check where Redis checks first.
    assert_eq!(
        err(&mut raw, &["HINCRBY", &a, "f", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(&mut raw, &["HINCRBYFLOAT", &a, "f", "x"]), "ERR value is not a valid float");
    assert_eq!(
        err(&mut raw, &["HRANDFIELD", &a, "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(&mut raw, &["HSCAN", &a, "x"]), "ERR invalid cursor");
}

#[test]
fn hrandfield_counts_and_shapes() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    for (key, size) in [(&a, 10usize), (&b, 1000)] {
        let mut model = HashMap::new();
        for i in 0..size {
            let (f, v) = (format!("f{i}"), format!("v{i}"));
            q::<i64>(&mut c, &["HSET", key, &f, &v]).unwrap();
            model.insert(f, v);
        }
        let expected = if size > 512 { "hashtable" } else { "listpack" };
        assert_eq!(encoding(&mut c, key), expected);
        // No count: one field; every field turns up eventually.
        let mut seen = HashSet::new();
        for _ in 0..2000 {
            let f: String = q(&mut c, &["HRANDFIELD", key]).unwrap();
            assert!(model.contains_key(&f));
            seen.insert(f);
            if seen.len() == size.min(10) && size == 10 {
                break;
            }
        }
        assert!(seen.len() >= size.min(10));
        // Positive counts: distinct fields, at most the whole hash.
        for count in [1, 3, 9, size - 1, size, size + 5] {
            let fields: Vec<String> = q(&mut c, &["HRANDFIELD", key, &count.to_string()]).unwrap();
            assert_eq!(fields.len(), count.min(size), "count {count}");
            assert_eq!(fields.iter().collect::<HashSet<_>>().len(), fields.len(), "distinct");
            assert!(fields.iter().all(|f| model.contains_key(f)));
            let flat: Vec<String> =
                q(&mut c, &["HRANDFIELD", key, &count.to_string(), "WITHVALUES"]).unwrap();
            assert_eq!(flat.len(), 2 * count.min(size));
            for pair in flat.chunks(2) {
                assert_eq!(model[&pair[0]], pair[1]);
            }
        }
        // Negative counts: exactly that many, repeats allowed.
        let picks: Vec<String> = q(&mut c, &["HRANDFIELD", key, "-2500"]).unwrap();
        assert_eq!(picks.len(), 2500);
        assert!(picks.iter().all(|f| model.contains_key(f)));
        if size == 10 {
            assert_eq!(picks.iter().collect::<HashSet<_>>().len(), 10, "all fields show up");
        }
        let flat: Vec<String> = q(&mut c, &["HRANDFIELD", key, "-7", "withvalues"]).unwrap();
        assert_eq!(flat.len(), 14);
        for pair in flat.chunks(2) {
            assert_eq!(model[&pair[0]], pair[1]);
        }
        assert_eq!(q::<Vec<String>>(&mut c, &["HRANDFIELD", key, "0"]).unwrap().len(), 0);
        // Errors.
        assert_eq!(err(&mut raw, &["HRANDFIELD", key, "1", "WITHVALUE"]), "ERR syntax error");
        assert_eq!(err(&mut raw, &["HRANDFIELD", key, "1", "WITHVALUES", "x"]), "ERR syntax error");
        assert_eq!(
            err(&mut raw, &["HRANDFIELD", key, "-9223372036854775808"]),
            "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
        );
        assert_eq!(
            err(&mut raw, &["HRANDFIELD", key, "-9223372036854770000", "WITHVALUES"]),
            "ERR value is out of range"
        );
        assert_eq!(
            err(&mut raw, &["HRANDFIELD", key, "4611686018427387904", "WITHVALUES"]),
            "ERR value is out of range"
        );
    }
    assert_eq!(raw.call(&["HRANDFIELD", "nokey", "0"]), "*0\r\n");
    assert_eq!(raw.call(&["HRANDFIELD", "nokey", "-5"]), "*0\r\n");
    // RESP3: pairs nest, fields alone do not.
    assert!(raw.call(&["HELLO", "3"]).starts_with('%'));
    for key in [&a, &b] {
        let reply = raw.call(&["HRANDFIELD", key, "3", "WITHVALUES"]);
        assert!(reply.starts_with("*3\r\n*2\r\n$"), "{reply:?}");
        assert_eq!(reply.matches("*2\r\n").count(), 3, "{reply:?}");
        let reply = raw.call(&["HRANDFIELD", key, "-4", "WITHVALUES"]);
        assert!(reply.starts_with("*4\r\n*2\r\n$"), "{reply:?}");
        assert_eq!(reply.matches("*2\r\n").count(), 4, "{reply:?}");
        let reply = raw.call(&["HRANDFIELD", key, "1", "WITHVALUES"]);
        assert!(reply.starts_with("*1\r\n*2\r\n$"), "{reply:?}");
        let reply = raw.call(&["HRANDFIELD", key, "3"]);
        assert!(reply.starts_with("*3\r\n$"), "{reply:?}");
        assert!(!reply.contains("*2\r\n"), "{reply:?}");
    }
    assert_eq!(raw.call(&["HRANDFIELD", "nokey"]), "_\r\n");
}

#[test]
fn resp3_hgetall_is_a_map() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [a.as_str(), b.as_str()] {
        raw.call(&["HSET", key, "f", "v", "n", "12"]);
        assert_eq!(
            raw.call(&["HGETALL", key]),
            "*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nn\r\n$2\r\n12\r\n"
        );
    }
    assert!(raw.call(&["HELLO", "3"]).starts_with('%'));
    for key in [a.as_str(), b.as_str()] {
        assert_eq!(
            raw.call(&["HGETALL", key]),
            "%2\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\nn\r\n$2\r\n12\r\n"
        );
        assert_eq!(raw.call(&["HKEYS", key]), "*2\r\n$1\r\nf\r\n$1\r\nn\r\n");
        assert_eq!(raw.call(&["HVALS", key]), "*2\r\n$1\r\nv\r\n$2\r\n12\r\n");
        assert_eq!(raw.call(&["HGET", key, "nope"]), "_\r\n");
    }
    assert_eq!(raw.call(&["HGETALL", "nokey"]), "%0\r\n");
    assert_eq!(raw.call(&["HKEYS", "nokey"]), "*0\r\n");
    assert_eq!(raw.call(&["HSCAN", "nokey", "0"]), "*2\r\n$1\r\n0\r\n*0\r\n");
}

#[test]
fn encodings_follow_the_config_thresholds() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let set = |c: &mut redis::Connection, name: &str, value: &str| {
        assert_eq!(q::<String>(c, &["CONFIG", "SET", name, value]).unwrap(), "OK");
    };
    set(&mut c, "hash-max-listpack-entries", "4");
    set(&mut c, "hash-max-listpack-value", "8");
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "hash-max-ziplist-entries"]).unwrap();
    assert_eq!(got, ["hash-max-ziplist-entries", "4"]);
    for key in [&a, &b] {
        // Entries: 4 fields stay a listpack, the 5th converts.
        q::<i64>(&mut c, &["HSET", key, "a", "1", "b", "2", "c", "3", "d", "12345678"]).unwrap();
        assert_eq!(encoding(&mut c, key), "listpack");
        q::<i64>(&mut c, &["HSET", key, "e", "5"]).unwrap();
        assert_eq!(encoding(&mut c, key), "hashtable");
        // Deleting never converts back.
        q::<i64>(&mut c, &["HDEL", key, "a", "b", "c", "d"]).unwrap();
        assert_eq!(encoding(&mut c, key), "hashtable");
        assert_eq!(hgetall(&mut c, key), HashMap::from([("e".into(), "5".into())]));
        q::<i64>(&mut c, &["DEL", key]).unwrap();
        // Values and fields: 8 bytes fit, 9 do not.
        for (field, value, expected) in [
            ("f", "12345678", "listpack"),
            ("f", "123456789", "hashtable"),
            ("12345678", "v", "listpack"),
            ("123456789", "v", "hashtable"),
        ] {
            q::<i64>(&mut c, &["HSET", key, field, value]).unwrap();
            assert_eq!(encoding(&mut c, key), expected, "{field} {value}");
            assert_eq!(q::<String>(&mut c, &["HGET", key, field]).unwrap(), value);
            q::<i64>(&mut c, &["DEL", key]).unwrap();
        }
        // HSETNX converts for a long value only when it sets it.
        q::<i64>(&mut c, &["HSET", key, "f", "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["HSETNX", key, "f", "123456789"]).unwrap(), 0);
        assert_eq!(encoding(&mut c, key), "listpack");
        assert_eq!(q::<i64>(&mut c, &["HSETNX", key, "g", "123456789"]).unwrap(), 1);
        assert_eq!(encoding(&mut c, key), "hashtable");
        q::<i64>(&mut c, &["DEL", key]).unwrap();
        // HINCRBYFLOAT converts when its result is too long (Redis's test).
        q::<i64>(&mut c, &["HSET", key, "tmp", "0"]).unwrap();
        q::<String>(&mut c, &["HINCRBYFLOAT", key, "tmp", "0.000005"]).unwrap();
        assert_eq!(encoding(&mut c, key), "listpack");
        q::<String>(&mut c, &["HINCRBYFLOAT", key, "tmp", "0.0000005"]).unwrap();
        assert_eq!(encoding(&mut c, key), "hashtable");
        assert_eq!(q::<String>(&mut c, &["HGET", key, "tmp"]).unwrap(), "0.0000055");
        q::<i64>(&mut c, &["DEL", key]).unwrap();
        q::<i64>(&mut c, &["HINCRBY", key, "abcdefghi", "1"]).unwrap();
        assert_eq!(encoding(&mut c, key), "hashtable");
        q::<i64>(&mut c, &["DEL", key]).unwrap();
    }
    // The Redis 7 defaults: 512 entries, 64 bytes.
    set(&mut c, "hash-max-ziplist-entries", "512");
    set(&mut c, "hash-max-ziplist-value", "64");
    for key in [&a, &b] {
        for i in 0..512 {
            q::<i64>(&mut c, &["HSET", key, &format!("f{i}"), &"x".repeat(64)]).unwrap();
        }
        assert_eq!(encoding(&mut c, key), "listpack");
        q::<i64>(&mut c, &["HSET", key, "one-more", "v"]).unwrap();
        assert_eq!(encoding(&mut c, key), "hashtable");
        assert_eq!(q::<i64>(&mut c, &["HLEN", key]).unwrap(), 513);
        assert_eq!(q::<i64>(&mut c, &["HSTRLEN", key, "f7"]).unwrap(), 64);
    }
}

#[test]
fn generic_commands_work_on_hashes() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<i64>(&mut c, &["HSET", &a, "f", "v", "n", "1"]).unwrap();
    // RENAME and COPY move a hash between shards intact.
    assert_eq!(q::<String>(&mut c, &["RENAME", &a, &b]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a]).unwrap(), 0);
    assert_eq!(hgetall(&mut c, &b).len(), 2);
    assert_eq!(q::<i64>(&mut c, &["COPY", &b, &a]).unwrap(), 1);
    q::<i64>(&mut c, &["HINCRBY", &a, "n", "5"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["HGET", &b, "n"]).unwrap(), "1", "the copy is independent");
    assert_eq!(q::<String>(&mut c, &["HGET", &a, "n"]).unwrap(), "6");
    // SCAN TYPE finds hashes on both shards.
    q::<String>(&mut c, &["SET", "s", "x"]).unwrap();
    let mut found = Vec::new();
    let mut cursor = "0".to_string();
    loop {
        let (next, keys): (String, Vec<String>) =
            q(&mut c, &["SCAN", &cursor, "TYPE", "hash", "COUNT", "100"]).unwrap();
        found.extend(keys);
        if next == "0" {
            break;
        }
        cursor = next;
    }
    found.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(found, want);
    // Expiry.
    assert_eq!(q::<i64>(&mut c, &["PEXPIRE", &a, "50"]).unwrap(), 1);
    thread::sleep(Duration::from_millis(120));
    assert_eq!(q::<Option<String>>(&mut c, &["HGET", &a, "f"]).unwrap(), None);
    assert_eq!(q::<i64>(&mut c, &["HSET", &a, "f", "new"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", &a]).unwrap(), -1, "a new hash has no TTL");
}

/// One HSCAN call: the next cursor and the field → value pairs.
fn hscan(
    c: &mut redis::Connection,
    key: &str,
    cursor: &str,
    options: &[&str],
) -> (String, Vec<(String, String)>) {
    let mut args = vec!["HSCAN", key, cursor];
    args.extend_from_slice(options);
    let (next, flat): (String, Vec<String>) = q(c, &args).unwrap();
    assert_eq!(flat.len() % 2, 0);
    (next, flat.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect())
}

#[test]
fn hscan_options_small_and_big_hashes() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    assert_eq!(raw.call(&["HSCAN", "nokey", "12345"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(raw.call(&["HSCAN", "nokey", "0", "BAD"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    for key in [&a, &b] {
        // A listpack: everything at once with cursor 0, whatever the cursor.
        q::<i64>(&mut c, &["HSET", key, "a1", "1", "b1", "2", "a2", "3", "10", "x"]).unwrap();
        let (next, pairs) = hscan(&mut c, key, "999", &["COUNT", "1"]);
        assert_eq!(next, "0");
        assert_eq!(pairs.len(), 4);
        let (_, pairs) = hscan(&mut c, key, "0", &["MATCH", "a*"]);
        assert_eq!(pairs, [("a1".into(), "1".into()), ("a2".into(), "3".into())]);
        let (_, pairs) = hscan(&mut c, key, "0", &["MATCH", "1?", "COUNT", "5"]);
        assert_eq!(pairs, [("10".to_string(), "x".to_string())]);
        assert_eq!(err(&mut raw, &["HSCAN", key, "0", "COUNT", "0"]), "ERR syntax error");
        assert_eq!(err(&mut raw, &["HSCAN", key, "0", "COUNT", "-1"]), "ERR syntax error");
        assert_eq!(
            err(&mut raw, &["HSCAN", key, "0", "COUNT", "x"]),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(err(&mut raw, &["HSCAN", key, "0", "MATCH"]), "ERR syntax error");
        assert_eq!(err(&mut raw, &["HSCAN", key, "0", "TYPE", "hash"]), "ERR syntax error");
        assert_eq!(err(&mut raw, &["HSCAN", key, "0", "NOVALUES"]), "ERR syntax error");
        assert_eq!(err(&mut raw, &["HSCAN", key, "1.5"]), "ERR invalid cursor");
        q::<i64>(&mut c, &["DEL", key]).unwrap();
        // A hashtable: pages by cursor; MATCH filters after COUNT.
        let mut pipe = redis::pipe();
        for i in 0..3000 {
            pipe.cmd("HSET").arg(key).arg(format!("f{i}")).arg(i).ignore();
        }
        pipe.query::<()>(&mut c).unwrap();
        assert_eq!(encoding(&mut c, key), "hashtable");
        for (options, want) in
            [(&["COUNT", "50"][..], 3000), (&["MATCH", "f1*", "COUNT", "50"], 1111)]
        {
            let mut cursor = "0".to_string();
            let mut seen = HashMap::new();
            let mut calls = 0;
            loop {
                let (next, pairs) = hscan(&mut c, key, &cursor, options);
                calls += 1;
                assert!(pairs.len() <= 2 * 50 + 64, "a page of about COUNT: {}", pairs.len());
                for (f, v) in pairs {
                    assert_eq!(f[1..], v, "value follows its field");
                    seen.insert(f, v);
                }
                if next == "0" {
                    break;
                }
                cursor = next;
            }
            assert_eq!(seen.len(), want, "{options:?}");
            assert!(calls >= 3000 / 100, "{calls} calls for {options:?}");
        }
        // A large COUNT takes everything in one call.
        let (next, pairs) = hscan(&mut c, key, "0", &["COUNT", "1000000"]);
        assert_eq!((next.as_str(), pairs.len()), ("0", 3000));
    }
}

/// Redis's SCAN guarantee for HSCAN: while other clients add and remove
/// fields (growing the table many times over and shrinking it back), one
/// iteration returns every field present from its start to its end, and
/// never a field that was absent all along.
#[test]
fn hscan_guarantee_under_concurrent_changes() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    for key in [a, b] {
        let mut c = server.client();
        let mut pipe = redis::pipe();
        for i in 0..2000 {
            pipe.cmd("HSET").arg(&key).arg(format!("stable:{i}")).arg("v").ignore();
        }
        pipe.query::<()>(&mut c).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicUsize::new(0));
        let churn = {
            let (stop, rounds, key) = (stop.clone(), rounds.clone(), key.clone());
            let mut w = server.client();
            thread::spawn(move || {
                let mut round = 0usize;
                while !stop.load(Ordering::Relaxed) && round < 10_000 {
                    // Add 3000 volatile fields, then remove them again.
                    for cmd in ["HSET", "HDEL"] {
                        let mut pipe = redis::pipe();
                        for i in 0..3000 {
                            let f = format!("volatile:{round}:{i}");
                            match cmd {
                                "HSET" => pipe.cmd("HSET").arg(&key).arg(f).arg("x").ignore(),
                                _ => pipe.cmd("HDEL").arg(&key).arg(f).ignore(),
                            };
                        }
                        pipe.query::<()>(&mut w).unwrap();
                    }
                    round += 1;
                    rounds.store(round, Ordering::Relaxed);
                }
            })
        };
        // Let the churn get going, then iterate in small pages so that it
        // overlaps many changes.
        while rounds.load(Ordering::Relaxed) < 1 {
            thread::yield_now();
        }
        let rounds_before = rounds.load(Ordering::Relaxed);
        let mut seen = HashSet::new();
        let mut cursor = "0".to_string();
        let mut calls = 0;
        loop {
            let (next, pairs) = hscan(&mut c, &key, &cursor, &["COUNT", "10"]);
            calls += 1;
            for (f, _) in pairs {
                assert!(
                    f.starts_with("stable:") || f.starts_with("volatile:"),
                    "a field never written: {f}"
                );
                seen.insert(f);
            }
            if next == "0" {
                break;
            }
            cursor = next;
            thread::sleep(Duration::from_micros(500));
        }
        let rounds_during = rounds.load(Ordering::Relaxed) - rounds_before;
        stop.store(true, Ordering::Relaxed);
        churn.join().unwrap();
        let missing: Vec<_> =
            (0..2000).map(|i| format!("stable:{i}")).filter(|f| !seen.contains(f)).collect();
        assert!(
            missing.is_empty(),
            "{} stable fields missed: {:?}",
            missing.len(),
            &missing[..5.min(missing.len())]
        );
        assert!(calls > 50, "{calls} calls");
        assert!(rounds_during >= 1, "the churn ran during the scan ({rounds_during} rounds)");
        assert_eq!(q::<i64>(&mut c, &["HLEN", &key]).unwrap(), 2000);
    }
}
