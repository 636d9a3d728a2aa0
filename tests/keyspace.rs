//! The keyspace family against a real 2-shard server: TYPE, TOUCH, RENAME,
//! RENAMENX and COPY (also across shards), MOVE between databases, OBJECT,
//! and the commands that visit every shard: KEYS, DBSIZE, RANDOMKEY,
//! FLUSHDB, FLUSHALL, SWAPDB. Every option and error text.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::collections::HashSet;

/// `n` keys named `prefix:i` on each of the two shards.
fn keys_per_shard(prefix: &str, n: usize) -> (Vec<String>, Vec<String>) {
    let map = ringdb_engine::SlotMap::new(2);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0.. {
        let k = format!("{prefix}:{i}");
        match map.shard_of_key(k.as_bytes()).0 {
            0 if a.len() < n => a.push(k),
            1 if b.len() < n => b.push(k),
            _ => {}
        }
        if a.len() == n && b.len() == n {
            break;
        }
    }
    (a, b)
}

/// The exact error text a command gets (without `-` and CRLF).
fn err(raw: &mut Raw, args: &[&str]) -> String {
    let reply = raw.call(args);
    assert!(reply.starts_with('-'), "{args:?}: expected an error, got {reply:?}");
    reply[1..].trim_end().to_string()
}

#[test]
fn type_exists_touch_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    q::<()>(&mut c, &["SET", &a, "1"]).unwrap();
    q::<()>(&mut c, &["SET", &b, "2"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["TYPE", &a]).unwrap(), "string");
    assert_eq!(q::<String>(&mut c, &["TYPE", "missing"]).unwrap(), "none");
    assert_eq!(q::<i64>(&mut c, &["TOUCH", &a, &b, "missing", &a]).unwrap(), 3);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a, &b, "missing"]).unwrap(), 2);
    assert!(err(&mut raw, &["TYPE"]).contains("wrong number of arguments for 'type' command"));
    assert!(err(&mut raw, &["TOUCH"]).contains("wrong number of arguments for 'touch' command"));
}

#[test]
fn rename_and_renamenx_within_and_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    // Across shards, keeping the TTL.
    q::<()>(&mut c, &["SET", &a, "hello", "EX", "100"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["RENAME", &a, &b]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "hello");
    let ttl: i64 = q(&mut c, &["TTL", &b]).unwrap();
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    // Overwrites the destination, which does not keep its own TTL.
    q::<()>(&mut c, &["SET", &a, "new"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["RENAME", &a, &b]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "new");
    assert_eq!(q::<i64>(&mut c, &["TTL", &b]).unwrap(), -1);
    // Back, on the same shard and across.
    assert_eq!(q::<String>(&mut c, &["RENAME", &b, "x{1}"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["RENAME", "x{1}", "y{1}"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "y{1}"]).unwrap(), "new");
    assert_eq!(q::<String>(&mut c, &["RENAME", "y{1}", "y{1}"]).unwrap(), "OK");
    assert_eq!(err(&mut raw, &["RENAME", "nosuch", &a]), "ERR no such key");
    assert_eq!(err(&mut raw, &["RENAME", "nosuch", "nosuch"]), "ERR no such key");
    assert_eq!(err(&mut raw, &["RENAMENX", "nosuch", &b]), "ERR no such key");
    // RENAMENX across shards.
    q::<()>(&mut c, &["SET", &a, "A"]).unwrap();
    q::<()>(&mut c, &["SET", &b, "B"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", &a, &b]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "B");
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", &a, &a]).unwrap(), 0);
    q::<()>(&mut c, &["DEL", &b]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["RENAMENX", &a, &b]).unwrap(), 1);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", &a]).unwrap(), None);
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "A");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 2);
}

#[test]
fn copy_with_db_and_replace_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    q::<()>(&mut c, &["SET", &a, "v", "EX", "100"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &b]).unwrap(), 1);
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "v");
    let ttl: i64 = q(&mut c, &["TTL", &b]).unwrap();
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    q::<()>(&mut c, &["SET", &a, "w"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &b]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "v");
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &b, "REPLACE"]).unwrap(), 1);
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "w");
    assert_eq!(q::<i64>(&mut c, &["TTL", &b]).unwrap(), -1);
    // Into another database, across shards and on the same key.
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &b, "DB", "3"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &a, "db", "3"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &a, "DB", "3"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &a, "REPLACE", "DB", "3"]).unwrap(), 1);
    q::<()>(&mut c, &["SELECT", "3"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 2);
    assert_eq!(q::<String>(&mut c, &["GET", &b]).unwrap(), "w");
    // The copy is independent of its source.
    q::<()>(&mut c, &["SET", &b, "changed"]).unwrap();
    q::<()>(&mut c, &["SELECT", "0"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", &a]).unwrap(), "w");
    assert_eq!(q::<i64>(&mut c, &["COPY", "missing", &b]).unwrap(), 0);
    assert_eq!(err(&mut raw, &["COPY", &a, &a]), "ERR source and destination objects are the same");
    assert_eq!(
        err(&mut raw, &["COPY", &a, &a, "DB", "0"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(err(&mut raw, &["COPY", &a, &b, "DB", "16"]), "ERR DB index is out of range");
    assert_eq!(err(&mut raw, &["COPY", &a, &b, "DB", "-1"]), "ERR DB index is out of range");
    assert_eq!(
        err(&mut raw, &["COPY", &a, &b, "DB", "notanumber"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(&mut raw, &["COPY", &a, &b, "DB"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["COPY", &a, &b, "REPLACE", "NOW"]), "ERR syntax error");
    assert!(err(&mut raw, &["COPY", &a]).contains("wrong number of arguments for 'copy' command"));
}

#[test]
fn move_between_databases_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<()>(&mut c, &["SET", key, "v", "EX", "100"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["MOVE", key, "10"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["TTL", key]).unwrap(), -2);
        // Present in the target database: nothing moves.
        q::<()>(&mut c, &["SET", key, "again"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["MOVE", key, "10"]).unwrap(), 0);
        assert_eq!(q::<String>(&mut c, &["GET", key]).unwrap(), "again");
    }
    assert_eq!(q::<i64>(&mut c, &["MOVE", "missing", "10"]).unwrap(), 0);
    q::<()>(&mut c, &["SELECT", "10"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 2);
    for key in [&a, &b] {
        assert_eq!(q::<String>(&mut c, &["GET", key]).unwrap(), "v");
        let ttl: i64 = q(&mut c, &["TTL", key]).unwrap();
        assert!((99..=100).contains(&ttl), "ttl {ttl}");
    }
    raw.call(&["SELECT", "10"]);
    assert_eq!(
        err(&mut raw, &["MOVE", &a, "10"]),
        "ERR source and destination objects are the same"
    );
    assert_eq!(err(&mut raw, &["MOVE", &a, "16"]), "ERR DB index is out of range");
    assert_eq!(
        err(&mut raw, &["MOVE", &a, "notanumber"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut raw, &["MOVE", &a, "4294967296"]),
        "ERR value is out of range, value must between -2147483648 and 2147483647"
    );
}

#[test]
fn object_subcommands() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    q::<()>(&mut c, &["SET", &a, "12345"]).unwrap();
    q::<()>(&mut c, &["SET", &b, "some text"]).unwrap();
    q::<()>(&mut c, &["SET", "long", &"x".repeat(100)]).unwrap();
    q::<()>(&mut c, &["SET", "big", "123456789"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", &a]).unwrap(), "int");
    assert_eq!(q::<String>(&mut c, &["object", "encoding", &b]).unwrap(), "embstr");
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "long"]).unwrap(), "raw");
    assert_eq!(q::<Option<String>>(&mut c, &["OBJECT", "ENCODING", "missing"]).unwrap(), None);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "REFCOUNT", "big"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "REFCOUNT", &b]).unwrap(), 1);
    q::<()>(&mut c, &["SET", "small", "7"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["OBJECT", "REFCOUNT", "small"]).unwrap(), 2147483647);
    assert_eq!(q::<Option<i64>>(&mut c, &["OBJECT", "IDLETIME", "missing"]).unwrap(), None);
    // OBJECT does not count as an access; GET does.
    std::thread::sleep(std::time::Duration::from_millis(2100));
    for key in [&a, &b] {
        assert!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", key]).unwrap() >= 2);
        assert!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", key]).unwrap() >= 2);
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "string");
        assert_eq!(q::<i64>(&mut c, &["TTL", key]).unwrap(), -1);
        assert!(
            q::<i64>(&mut c, &["OBJECT", "IDLETIME", key]).unwrap() >= 2,
            "TYPE/TTL touched {key}"
        );
        q::<String>(&mut c, &["GET", key]).unwrap();
        // Whole seconds: 1 when a second boundary falls between GET and OBJECT.
        assert!(q::<i64>(&mut c, &["OBJECT", "IDLETIME", key]).unwrap() <= 1);
    }
    assert_eq!(
        err(&mut raw, &["OBJECT", "FREQ", &a]),
        "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that when switching between policies at runtime LRU and LFU data will take some time to adjust."
    );
    let help: Vec<String> = q(&mut c, &["OBJECT", "HELP"]).unwrap();
    assert_eq!(
        help.first().map(String::as_str),
        Some("OBJECT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
    );
    assert_eq!(help.len(), 15);
    assert_eq!(help.last().map(String::as_str), Some("    Prints this help."));
    assert_eq!(
        err(&mut raw, &["OBJECT", "FOO", &a]),
        "ERR unknown subcommand 'FOO'. Try OBJECT HELP."
    );
    assert!(err(&mut raw, &["OBJECT", "ENCODING"])
        .contains("wrong number of arguments for 'object|encoding' command"));
    assert!(err(&mut raw, &["OBJECT"]).contains("wrong number of arguments for 'object' command"));
}

#[test]
fn object_freq_under_an_lfu_policy() {
    let server = Server::start_with(&["--shards", "2", "--maxmemory-policy", "allkeys-lfu"]);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        let before: i64 = q(&mut c, &["OBJECT", "FREQ", key]).unwrap();
        assert_eq!(before, 5, "Redis's LFU_INIT_VAL");
        for _ in 0..200 {
            q::<String>(&mut c, &["GET", key]).unwrap();
        }
        let after: i64 = q(&mut c, &["OBJECT", "FREQ", key]).unwrap();
        assert!(after > before, "{before} -> {after}");
        assert!(err(&mut raw, &["OBJECT", "IDLETIME", key])
            .starts_with("ERR An LFU maxmemory policy is selected, idle time not tracked."));
    }
    assert_eq!(q::<Option<i64>>(&mut c, &["OBJECT", "FREQ", "missing"]).unwrap(), None);
}

#[test]
fn keys_dbsize_randomkey_over_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]).unwrap(), None);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).unwrap(), Vec::<String>::new());
    let (on0, on1) = keys_per_shard("user", 20);
    let (other0, other1) = keys_per_shard("item", 5);
    for k in on0.iter().chain(&on1).chain(&other0).chain(&other1) {
        q::<()>(&mut c, &["SET", k, "v"]).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 50);
    let users: HashSet<String> =
        q::<Vec<String>>(&mut c, &["KEYS", "user:*"]).unwrap().into_iter().collect();
    assert_eq!(users, on0.iter().chain(&on1).cloned().collect());
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "*"]).unwrap().len(), 50);
    let one_digit = other0.iter().chain(&other1).filter(|k| k.len() == "item:0".len()).count();
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "item:?"]).unwrap().len(), one_digit);
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "nothing*"]).unwrap(), Vec::<String>::new());
    // Expired keys are not listed, even before they are reclaimed.
    q::<()>(&mut c, &["PSETEX", &on0[0], "1", "v"]).unwrap();
    q::<()>(&mut c, &["PSETEX", &on1[0], "1", "v"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(5));
    assert_eq!(q::<Vec<String>>(&mut c, &["KEYS", "user:*"]).unwrap().len(), 38);
    let mut seen = HashSet::new();
    for _ in 0..1000 {
        seen.insert(q::<String>(&mut c, &["RANDOMKEY"]).unwrap());
    }
    assert!(seen.len() > 40, "only {} distinct keys", seen.len());
    assert!(seen.iter().any(|k| on0.contains(k)) && seen.iter().any(|k| on1.contains(k)));
    assert!(!seen.contains(&on0[0]) && !seen.contains(&on1[0]), "returned an expired key");
    // Another database is another keyspace.
    q::<()>(&mut c, &["SELECT", "5"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]).unwrap(), None);
    q::<()>(&mut c, &["SET", "x", "10"]).unwrap();
    q::<()>(&mut c, &["DEL", "x"]).unwrap();
    assert_eq!(q::<Option<String>>(&mut c, &["RANDOMKEY"]).unwrap(), None);
    assert!(err(&mut raw, &["KEYS"]).contains("wrong number of arguments for 'keys' command"));
    assert!(
        err(&mut raw, &["DBSIZE", "x"]).contains("wrong number of arguments for 'dbsize' command")
    );
    assert!(err(&mut raw, &["RANDOMKEY", "x"])
        .contains("wrong number of arguments for 'randomkey' command"));
}

#[test]
fn keys_pattern_that_backtracks_a_lot() {
    let server = Server::start(2);
    let mut c = server.client();
    q::<()>(&mut c, &["SET", &"a".repeat(40), "1"]).unwrap();
    let found: Vec<String> =
        q(&mut c, &["KEYS", "a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b"]).unwrap();
    assert!(found.is_empty());
}

#[test]
fn flushdb_and_flushall() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    for db in ["0", "1"] {
        q::<()>(&mut c, &["SELECT", db]).unwrap();
        q::<()>(&mut c, &["SET", &a, "1"]).unwrap();
        q::<()>(&mut c, &["SET", &b, "1", "EX", "100"]).unwrap();
    }
    assert_eq!(q::<String>(&mut c, &["FLUSHDB"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &a, &b]).unwrap(), 0);
    q::<()>(&mut c, &["SELECT", "0"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 2);
    assert_eq!(q::<String>(&mut c, &["FLUSHDB", "async"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    q::<()>(&mut c, &["SET", &a, "1"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["FLUSHDB", "SYNC"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    for db in ["0", "7"] {
        q::<()>(&mut c, &["SELECT", db]).unwrap();
        q::<()>(&mut c, &["SET", &a, "1"]).unwrap();
        q::<()>(&mut c, &["SET", &b, "1"]).unwrap();
    }
    assert_eq!(q::<String>(&mut c, &["FLUSHALL", "ASYNC"]).unwrap(), "OK");
    for db in ["0", "7"] {
        q::<()>(&mut c, &["SELECT", db]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    }
    assert_eq!(q::<String>(&mut c, &["FLUSHALL"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["FLUSHALL", "sync"]).unwrap(), "OK");
    assert_eq!(err(&mut raw, &["FLUSHALL", "LATER"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["FLUSHDB", "ASYNC", "SYNC"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["FLUSHDB", "x"]), "ERR syntax error");
}

#[test]
fn swapdb_on_every_shard() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let mut other = server.client();
    let (a, b) = keys_on_two_shards();
    q::<()>(&mut c, &["SET", &a, "zero-a"]).unwrap();
    q::<()>(&mut c, &["SET", &b, "zero-b", "EX", "100"]).unwrap();
    q::<()>(&mut other, &["SELECT", "1"]).unwrap();
    q::<()>(&mut other, &["SET", &a, "one-a"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "0", "1"]).unwrap(), "OK");
    // Connections stay on their database number and see the other data.
    assert_eq!(q::<String>(&mut c, &["GET", &a]).unwrap(), "one-a");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", &b]).unwrap(), None);
    assert_eq!(q::<String>(&mut other, &["GET", &a]).unwrap(), "zero-a");
    assert_eq!(q::<String>(&mut other, &["GET", &b]).unwrap(), "zero-b");
    assert!(q::<i64>(&mut other, &["TTL", &b]).unwrap() > 0);
    assert_eq!(q::<i64>(&mut other, &["DBSIZE"]).unwrap(), 2);
    assert_eq!(q::<String>(&mut c, &["SWAPDB", "1", "1"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut other, &["DBSIZE"]).unwrap(), 2);
    assert_eq!(err(&mut raw, &["SWAPDB", "x", "1"]), "ERR invalid first DB index");
    assert_eq!(err(&mut raw, &["SWAPDB", "1", "y"]), "ERR invalid second DB index");
    assert_eq!(err(&mut raw, &["SWAPDB", "x", "y"]), "ERR invalid first DB index");
    assert_eq!(err(&mut raw, &["SWAPDB", "99999999999", "1"]), "ERR invalid first DB index");
    assert_eq!(err(&mut raw, &["SWAPDB", "0", "16"]), "ERR DB index is out of range");
    assert_eq!(err(&mut raw, &["SWAPDB", "-1", "0"]), "ERR DB index is out of range");
    assert!(
        err(&mut raw, &["SWAPDB", "0"]).contains("wrong number of arguments for 'swapdb' command")
    );
}
