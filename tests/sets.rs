//! The set family against a real 2-shard server: every command, option,
//! error text and WRONGTYPE case; the intset → hashtable conversions (a
//! string member, and past `set-max-intset-entries` changed with CONFIG
//! SET); RESP2 and RESP3 reply shapes; multi-key commands with keys on both
//! shards; and SSCAN's guarantee while the set changes under it.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::collections::{BTreeSet, HashMap, HashSet};

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

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

fn members(c: &mut redis::Connection, key: &str) -> BTreeSet<String> {
    q(c, &["SMEMBERS", key]).unwrap()
}

fn set_of(items: &[&str]) -> BTreeSet<String> {
    items.iter().map(|s| s.to_string()).collect()
}

fn encoding(c: &mut redis::Connection, key: &str) -> String {
    q(c, &["OBJECT", "ENCODING", key]).unwrap()
}

/// SADD, SREM, SCARD, SISMEMBER, SMISMEMBER, SMEMBERS on keys of both shards.
#[test]
fn membership_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        assert_eq!(q::<i64>(&mut c, &["SADD", key, "foo", "bar", "foo"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["SADD", key, "bar", "baz"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["SCARD", key]).unwrap(), 3);
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", key, "foo"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", key, "nope"]).unwrap(), 0);
        assert_eq!(
            q::<Vec<i64>>(&mut c, &["SMISMEMBER", key, "nope", "foo", "baz"]).unwrap(),
            [0, 1, 1]
        );
        assert_eq!(members(&mut c, key), set_of(&["bar", "baz", "foo"]));
        assert_eq!(q::<i64>(&mut c, &["SREM", key, "nope", "nope2"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["SREM", key, "foo", "foo", "x"]).unwrap(), 1);
        // Removing the last members deletes the key (and stops counting).
        assert_eq!(q::<i64>(&mut c, &["SREM", key, "bar", "baz", "zzz"]).unwrap(), 2);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
    }
    // Missing keys are empty sets.
    assert_eq!(q::<i64>(&mut c, &["SCARD", "none"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", "none", "x"]).unwrap(), 0);
    assert_eq!(q::<Vec<i64>>(&mut c, &["SMISMEMBER", "none", "x", "y"]).unwrap(), [0, 0]);
    assert_eq!(q::<i64>(&mut c, &["SREM", "none", "x"]).unwrap(), 0);
    assert!(members(&mut c, "none").is_empty());
    // Integers and their string spellings.
    q::<i64>(&mut c, &["SADD", &a, "17", "-5", "213244124402402314402033402"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", &a, "-5"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", &a, "017"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SISMEMBER", &a, "213244124402402314402033402"]).unwrap(), 1);
    // An expired set is gone for every command.
    q::<i64>(&mut c, &["SADD", &b, "x"]).unwrap();
    q::<i64>(&mut c, &["PEXPIRE", &b, "1"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    assert_eq!(q::<i64>(&mut c, &["SCARD", &b]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SADD", &b, "y"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["TTL", &b]).unwrap(), -1);
}

/// Arity errors and WRONGTYPE for every command that reads a key's type.
#[test]
fn errors_and_wrongtype() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let (s, set) = keys_on_two_shards();
    assert_eq!(raw.call(&["SET", &s, "string"]), "+OK\r\n");
    assert_eq!(raw.call(&["SADD", &set, "a"]), ":1\r\n");
    let wrongtype_lines: Vec<Vec<&str>> = vec![
        vec!["SADD", &s, "x"],
        vec!["SREM", &s, "x"],
        vec!["SCARD", &s],
        vec!["SISMEMBER", &s, "x"],
        vec!["SMISMEMBER", &s, "x"],
        vec!["SMEMBERS", &s],
        vec!["SRANDMEMBER", &s],
        vec!["SRANDMEMBER", &s, "0"],
        vec!["SPOP", &s],
        vec!["SPOP", &s, "0"],
        vec!["SMOVE", &s, &set, "a"],
        vec!["SMOVE", &set, &s, "a"],
        vec!["SINTER", &set, &s],
        vec!["SINTER", "missing", &s],
        vec!["SINTERCARD", "2", &set, &s],
        vec!["SUNION", &s, &set],
        vec!["SDIFF", &set, &s],
        vec!["SDIFF", "missing", &s],
        vec!["SINTERSTORE", "dst", &set, &s],
        vec!["SUNIONSTORE", "dst", &s],
        vec!["SDIFFSTORE", "dst", "missing", &s],
        vec!["SSCAN", &s, "0"],
    ];
    for line in &wrongtype_lines {
        assert_eq!(err(&mut raw, line), WRONGTYPE, "{line:?}");
    }
    // A failed store leaves its destination alone.
    assert_eq!(raw.call(&["EXISTS", "dst"]), ":0\r\n");
    assert_eq!(raw.call(&["SMEMBERS", &set]), "*1\r\n$1\r\na\r\n");
    for (line, name) in [
        (vec!["SADD", "k"], "sadd"),
        (vec!["SREM", "k"], "srem"),
        (vec!["SCARD"], "scard"),
        (vec!["SCARD", "a", "b"], "scard"),
        (vec!["SISMEMBER", "k"], "sismember"),
        (vec!["SMISMEMBER", "k"], "smismember"),
        (vec!["SMEMBERS", "a", "b"], "smembers"),
        (vec!["SRANDMEMBER"], "srandmember"),
        (vec!["SPOP"], "spop"),
        (vec!["SMOVE", "a", "b"], "smove"),
        (vec!["SINTER"], "sinter"),
        (vec!["SINTERCARD", "1"], "sintercard"),
        (vec!["SUNION"], "sunion"),
        (vec!["SDIFF"], "sdiff"),
        (vec!["SINTERSTORE", "d"], "sinterstore"),
        (vec!["SUNIONSTORE", "d"], "sunionstore"),
        (vec!["SDIFFSTORE", "d"], "sdiffstore"),
        (vec!["SSCAN", "k"], "sscan"),
    ] {
        assert_eq!(
            err(&mut raw, &line),
            format!("ERR wrong number of arguments for '{name}' command"),
            "{line:?}"
        );
    }
    assert_eq!(err(&mut raw, &["SPOP", &set, "1", "2"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SRANDMEMBER", &set, "1", "2"]), "ERR syntax error");
}

/// intset → hashtable on a string member and past set-max-intset-entries
/// (changed at run time on every shard), and the encodings of new and
/// stored sets.
#[test]
fn encodings_convert_at_the_thresholds() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<i64>(&mut c, &["SADD", &a, "1", "2", "3"]).unwrap();
    assert_eq!(encoding(&mut c, &a), "intset");
    q::<i64>(&mut c, &["SADD", &a, "a"]).unwrap();
    assert_eq!(encoding(&mut c, &a), "hashtable");
    q::<i64>(&mut c, &["SREM", &a, "a"]).unwrap();
    assert_eq!(encoding(&mut c, &a), "hashtable", "encodings never shrink back");
    q::<i64>(&mut c, &["SADD", &b, "foo"]).unwrap();
    assert_eq!(encoding(&mut c, &b), "hashtable", "Redis 7.0 has no listpack sets");
    q::<i64>(&mut c, &["DEL", &a, &b]).unwrap();

    // The default: 512 integers stay an intset, the 513th converts.
    let ints: Vec<String> = (0..512).map(|i| i.to_string()).collect();
    let mut args = vec!["SADD", a.as_str()];
    args.extend(ints.iter().map(String::as_str));
    assert_eq!(q::<i64>(&mut c, &args).unwrap(), 512);
    assert_eq!(encoding(&mut c, &a), "intset");
    q::<i64>(&mut c, &["SADD", &a, "512"]).unwrap();
    assert_eq!(encoding(&mut c, &a), "hashtable");
    q::<i64>(&mut c, &["DEL", &a]).unwrap();

    // CONFIG SET reaches both shards.
    assert_eq!(
        q::<String>(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "4"]).unwrap(),
        "OK"
    );
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "set-max-intset-entries"]).unwrap(),
        ["set-max-intset-entries", "4"]
    );
    for key in [&a, &b] {
        q::<i64>(&mut c, &["SADD", key, "1", "2", "3", "4"]).unwrap();
        assert_eq!(encoding(&mut c, key), "intset", "{key}");
        q::<i64>(&mut c, &["SADD", key, "5"]).unwrap();
        assert_eq!(encoding(&mut c, key), "hashtable", "{key}");
    }
    // Stores build their result as Redis does: an intset while it fits.
    q::<i64>(&mut c, &["SADD", "ints", "1", "2", "3"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", "res", &a, "ints"]).unwrap(), 3);
    assert_eq!(encoding(&mut c, "res"), "intset", "integers from hashtables end as an intset");
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "res", &a, "ints"]).unwrap(), 5);
    assert_eq!(encoding(&mut c, "res"), "hashtable", "past the (lowered) limit");
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", "res", &a, "ints"]).unwrap(), 2);
    assert_eq!(encoding(&mut c, "res"), "intset");
    q::<String>(&mut c, &["CONFIG", "SET", "set-max-intset-entries", "512"]).unwrap();
    q::<i64>(&mut c, &["SADD", "words", "x", "1"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", "res", "ints", "words"]).unwrap(), 4);
    assert_eq!(encoding(&mut c, "res"), "hashtable");
    // SMOVE creates its destination from the member.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "words", "fresh-int", "1"]).unwrap(), 1);
    assert_eq!(encoding(&mut c, "fresh-int"), "intset");
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "words", "fresh-str", "x"]).unwrap(), 1);
    assert_eq!(encoding(&mut c, "fresh-str"), "hashtable");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "words"]).unwrap(), 0, "emptied source deleted");
    // Moving a string into an intset converts it.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "fresh-str", "fresh-int", "x"]).unwrap(), 1);
    assert_eq!(encoding(&mut c, "fresh-int"), "hashtable");
}

#[test]
fn srandmember_counts_and_shapes() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    let words: Vec<String> = (0..50).map(|i| format!("w{i}")).collect();
    let mut args = vec!["SADD", a.as_str()];
    args.extend(words.iter().map(String::as_str));
    q::<i64>(&mut c, &args).unwrap();
    let ints: Vec<String> = (0..50).map(|i| i.to_string()).collect();
    let mut args = vec!["SADD", b.as_str()];
    args.extend(ints.iter().map(String::as_str));
    q::<i64>(&mut c, &args).unwrap();
    for (key, all) in [(&a, &words), (&b, &ints)] {
        let all: HashSet<String> = all.iter().cloned().collect();
        let one: String = q(&mut c, &["SRANDMEMBER", key]).unwrap();
        assert!(all.contains(&one));
        // Negative: repeats allowed, exactly |count| members.
        let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", key, "-200"]).unwrap();
        assert_eq!(picks.len(), 200);
        assert!(picks.iter().all(|m| all.contains(m)));
        assert!(picks.iter().collect::<HashSet<_>>().len() < 200, "repeats");
        // Positive: distinct; the whole set when asking for as many.
        for count in [1usize, 5, 45, 50, 100] {
            let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", key, &count.to_string()]).unwrap();
            assert_eq!(picks.len(), count.min(50), "count {count}");
            let unique: HashSet<&String> = picks.iter().collect();
            assert_eq!(unique.len(), picks.len());
            assert!(picks.iter().all(|m| all.contains(m)));
        }
        // Every member comes up eventually.
        let mut seen = HashSet::new();
        for _ in 0..200 {
            let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", key, "5"]).unwrap();
            seen.extend(picks);
        }
        assert_eq!(seen, all);
        assert_eq!(q::<i64>(&mut c, &["SCARD", key]).unwrap(), 50, "SRANDMEMBER removes nothing");
    }
    assert_eq!(raw.call(&["SRANDMEMBER", &a, "0"]), "*0\r\n");
    assert_eq!(raw.call(&["SRANDMEMBER", "missing", "5"]), "*0\r\n");
    assert_eq!(raw.call(&["SRANDMEMBER", "missing", "-5"]), "*0\r\n");
    assert_eq!(raw.call(&["SRANDMEMBER", "missing"]), "$-1\r\n");
    assert_eq!(
        err(&mut raw, &["SRANDMEMBER", &a, "-9223372036854775808"]),
        "ERR value is out of range, value must between -9223372036854775807 and 9223372036854775807"
    );
    assert_eq!(
        err(&mut raw, &["SRANDMEMBER", &a, "x"]),
        "ERR value is not an integer or out of range"
    );
    // A huge negative count is refused rather than built in memory: at
    // once when it cannot fit, or once the reply outgrows the limit.
    assert_eq!(
        err(&mut raw, &["SRANDMEMBER", &a, "-9223372036854775807"]),
        "ERR reply exceeds maximum allowed size (proto-max-bulk-len)"
    );
    assert_eq!(raw.call(&["CONFIG", "SET", "proto-max-bulk-len", "1mb"]), "+OK\r\n");
    assert_eq!(
        err(&mut raw, &["SRANDMEMBER", &a, "-500000"]),
        "ERR reply exceeds maximum allowed size (proto-max-bulk-len)"
    );
    let picks: Vec<String> = q(&mut c, &["SRANDMEMBER", &a, "-50000"]).unwrap();
    assert_eq!(picks.len(), 50000, "within the limit");
    assert_eq!(raw.call(&["PING"]), "+PONG\r\n");
}

#[test]
fn spop_cases() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    let fill = |c: &mut redis::Connection, key: &str, items: &[String]| {
        q::<i64>(c, &["DEL", key]).unwrap();
        let mut args = vec!["SADD", key];
        args.extend(items.iter().map(String::as_str));
        q::<i64>(c, &args).unwrap();
    };
    let ints: Vec<String> = (1..=20).map(|i| i.to_string()).collect();
    let words: Vec<String> = (1..=20).map(|i| format!("m{i}")).collect();
    for (key, items) in [(&a, &ints), (&b, &words)] {
        let all: BTreeSet<String> = items.iter().cloned().collect();
        // Without a count: one member, removed.
        fill(&mut c, key, items);
        let one: String = q(&mut c, &["SPOP", key]).unwrap();
        assert!(all.contains(&one));
        assert_eq!(q::<i64>(&mut c, &["SISMEMBER", key, &one]).unwrap(), 0);
        // Case 2 (few taken), case 3 (most taken), case 1 (all taken).
        for count in [2usize, 18, 20, 30] {
            fill(&mut c, key, items);
            let popped: Vec<String> = q(&mut c, &["SPOP", key, &count.to_string()]).unwrap();
            assert_eq!(popped.len(), count.min(20), "count {count}");
            let rest = members(&mut c, key);
            assert_eq!(rest.len(), 20 - count.min(20));
            let mut union: BTreeSet<String> = popped.iter().cloned().collect();
            assert_eq!(union.len(), popped.len(), "no member popped twice");
            union.extend(rest);
            assert_eq!(union, all);
            if count >= 20 {
                assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
            }
        }
        // Popping one at a time until empty deletes the key.
        fill(&mut c, key, items);
        let mut popped = BTreeSet::new();
        for _ in 0..20 {
            let m: Vec<String> = q(&mut c, &["SPOP", key, "1"]).unwrap();
            popped.extend(m);
        }
        assert_eq!(popped, all);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
        assert_eq!(raw.call(&["SPOP", key]), "$-1\r\n");
    }
    assert_eq!(raw.call(&["SPOP", "missing", "5"]), "*0\r\n");
    q::<i64>(&mut c, &["SADD", &a, "x"]).unwrap();
    assert_eq!(raw.call(&["SPOP", &a, "0"]), "*0\r\n");
    for bad in ["-1", "x", "1.5"] {
        assert_eq!(
            err(&mut raw, &["SPOP", &a, bad]),
            "ERR value is out of range, must be positive",
            "{bad}"
        );
    }
    // Case 3 on a hashtable of integers leaves an intset, as in Redis 7.0.
    let many: Vec<String> = (0..600).map(|i| i.to_string()).collect();
    fill(&mut c, &a, &many);
    assert_eq!(encoding(&mut c, &a), "hashtable");
    let popped: Vec<String> = q(&mut c, &["SPOP", &a, "590"]).unwrap();
    assert_eq!(popped.len(), 590);
    assert_eq!(q::<i64>(&mut c, &["SCARD", &a]).unwrap(), 10);
    assert_eq!(encoding(&mut c, &a), "intset");
}

#[test]
fn smove_within_and_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (src, dst) = keys_on_two_shards();
    q::<i64>(&mut c, &["SADD", &src, "1", "a", "b"]).unwrap();
    q::<i64>(&mut c, &["SADD", &dst, "2", "3", "4"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &src, &dst, "a"]).unwrap(), 1);
    assert_eq!(members(&mut c, &src), set_of(&["1", "b"]));
    assert_eq!(members(&mut c, &dst), set_of(&["2", "3", "4", "a"]));
    assert_eq!(encoding(&mut c, &dst), "hashtable");
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &dst, &src, "2"]).unwrap(), 1);
    assert_eq!(members(&mut c, &src), set_of(&["1", "2", "b"]));
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &src, &dst, "nope"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", "missing", &dst, "3"]).unwrap(), 0);
    // Already in the destination: still moved out of the source.
    q::<i64>(&mut c, &["SADD", &dst, "b"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &src, &dst, "b"]).unwrap(), 1);
    assert_eq!(members(&mut c, &src), set_of(&["1", "2"]));
    // Same key on both sides: membership only.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &src, &src, "1"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &src, &src, "9"]).unwrap(), 0);
    assert_eq!(members(&mut c, &src), set_of(&["1", "2"]));
    // Emptying the source deletes it, on its own shard.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &src, &dst, "1"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &src, &dst, "2"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &src]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SCARD", &dst]).unwrap(), 6);
    // A missing destination on the other shard is created there.
    assert_eq!(q::<i64>(&mut c, &["SMOVE", &dst, &src, "a"]).unwrap(), 1);
    assert_eq!(members(&mut c, &src), set_of(&["a"]));
    assert_eq!(q::<i64>(&mut c, &["SCARD", &dst]).unwrap(), 5);
    // Types: a missing source answers 0 before the destination is checked.
    let str_key = "a-string";
    q::<String>(&mut c, &["SET", str_key, "x"]).unwrap();
    assert_eq!(raw.call(&["SMOVE", "missing", str_key, "a"]), ":0\r\n");
    assert_eq!(err(&mut raw, &["SMOVE", &src, str_key, "a"]), WRONGTYPE);
    assert_eq!(err(&mut raw, &["SMOVE", str_key, &src, "a"]), WRONGTYPE);
    assert_eq!(members(&mut c, &src), set_of(&["a"]), "a failed SMOVE changes nothing");
}

#[test]
fn algebra_with_keys_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (zero, one) = keys_per_shard("alg", 3);
    let (s1, s2, s3) = (&zero[0], &one[0], &zero[1]);
    let (d0, d1) = (&zero[2], &one[2]);
    for i in 0..200 {
        q::<i64>(&mut c, &["SADD", s1, &i.to_string()]).unwrap();
        q::<i64>(&mut c, &["SADD", s2, &(i + 195).to_string()]).unwrap();
    }
    q::<i64>(&mut c, &["SADD", s3, "199", "195", "1000", "2000", "foo"]).unwrap();
    q::<i64>(&mut c, &["SADD", s1, "foo"]).unwrap();
    q::<i64>(&mut c, &["SADD", s2, "foo"]).unwrap();
    let inter: BTreeSet<String> = q(&mut c, &["SINTER", s1, s2]).unwrap();
    assert_eq!(inter, set_of(&["195", "196", "197", "198", "199", "foo"]));
    let inter: BTreeSet<String> = q(&mut c, &["SINTER", s1, s2, s3]).unwrap();
    assert_eq!(inter, set_of(&["195", "199", "foo"]));
    let inter: Vec<String> = q(&mut c, &["SINTER", s1, s2, "missing"]).unwrap();
    assert!(inter.is_empty());
    let same: BTreeSet<String> = q(&mut c, &["SINTER", s1, s1, s1]).unwrap();
    assert_eq!(same, members(&mut c, s1));
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", s1, s2]).unwrap(), 6);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "3", s1, s2, s3]).unwrap(), 3);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "3", s1, s2, s3, "LIMIT", "2"]).unwrap(), 2);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", s1, s2, "limit", "0"]).unwrap(), 6);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", s1, s2, "LIMIT", "100"]).unwrap(), 6);
    assert_eq!(q::<i64>(&mut c, &["SINTERCARD", "2", s1, "missing"]).unwrap(), 0);

    let union: BTreeSet<String> = q(&mut c, &["SUNION", s1, "missing", s2]).unwrap();
    let mut expected = members(&mut c, s1);
    expected.extend(members(&mut c, s2));
    assert_eq!(union.len(), 396);
    assert_eq!(union, expected);
    let diff: BTreeSet<String> = q(&mut c, &["SDIFF", s2, s1, s3]).unwrap();
    let expected: BTreeSet<String> = (200..395).map(|i| i.to_string()).collect();
    assert_eq!(diff, expected);
    let diff: Vec<String> = q(&mut c, &["SDIFF", s1, s1]).unwrap();
    assert!(diff.is_empty(), "a set minus itself");
    let diff: Vec<String> = q(&mut c, &["SDIFF", "missing", s1]).unwrap();
    assert!(diff.is_empty());

    // Stores with the destination on either shard, replacing any type and TTL.
    q::<String>(&mut c, &["SET", d1, "old", "EX", "100"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", d1, s1, s2]).unwrap(), 6);
    assert_eq!(members(&mut c, d1), set_of(&["195", "196", "197", "198", "199", "foo"]));
    assert_eq!(q::<i64>(&mut c, &["TTL", d1]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", d0, s2, s3]).unwrap(), 203);
    assert_eq!(q::<i64>(&mut c, &["SUNIONSTORE", d1, s1, s2, s3, "missing"]).unwrap(), 398);
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", d0, s1, s2, s3]).unwrap(), 195);
    assert_eq!(encoding(&mut c, d0), "intset");
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", d1, s2, s1]).unwrap(), 195);
    // The destination may be one of the sources.
    assert_eq!(q::<i64>(&mut c, &["SINTERSTORE", s3, s3, s1]).unwrap(), 3);
    assert_eq!(members(&mut c, s3), set_of(&["195", "199", "foo"]));
    // An empty result deletes the destination, wherever it lives.
    for (dst, line) in [
        (d0, vec!["SINTERSTORE", d0.as_str(), s1, "missing"]),
        (d1, vec!["SUNIONSTORE", d1.as_str(), "missing", "missing2"]),
        (d0, vec!["SDIFFSTORE", d0.as_str(), s1, s1]),
    ] {
        q::<i64>(&mut c, &["SADD", dst, "x"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &line).unwrap(), 0, "{line:?}");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", dst]).unwrap(), 0, "{line:?}");
    }
    q::<String>(&mut c, &["SET", d1, "x"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SDIFFSTORE", d1, "missing", s1]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", d1]).unwrap(), 0, "a string destination too");
    // WRONGTYPE across shards leaves the destination as it was.
    q::<i64>(&mut c, &["SADD", d0, "keep"]).unwrap();
    q::<String>(&mut c, &["SET", d1, "str"]).unwrap();
    let e = q::<i64>(&mut c, &["SUNIONSTORE", d0, s1, d1]).unwrap_err();
    assert!(e.to_string().contains("WRONGTYPE"), "{e}");
    assert_eq!(members(&mut c, d0), set_of(&["keep"]));
}

#[test]
fn sintercard_argument_errors() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    raw.call(&["SADD", &a, "1", "2"]);
    raw.call(&["SADD", &b, "2", "3"]);
    assert_eq!(raw.call(&["SINTERCARD", "2", &a, &b]), ":1\r\n");
    for numkeys in ["0", "-1", "a", "1.5"] {
        assert_eq!(
            err(&mut raw, &["SINTERCARD", numkeys, &a]),
            "ERR numkeys should be greater than 0",
            "{numkeys}"
        );
    }
    assert_eq!(
        err(&mut raw, &["SINTERCARD", "2", &a]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(
        err(&mut raw, &["SINTERCARD", "3", &a, &b]),
        "ERR Number of keys can't be greater than number of args"
    );
    assert_eq!(err(&mut raw, &["SINTERCARD", "1", &a, &b]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SINTERCARD", "1", &a, "LIMIT"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SINTERCARD", "1", &a, "LIMIT", "1", "x"]), "ERR syntax error");
    assert_eq!(
        err(&mut raw, &["SINTERCARD", "1", &a, "LIMIT", "-1"]),
        "ERR LIMIT can't be negative"
    );
    assert_eq!(
        err(&mut raw, &["SINTERCARD", "1", &a, "LIMIT", "a"]),
        "ERR LIMIT can't be negative"
    );
}

/// What each command replies in RESP3 (sets where Redis 7.0 sends sets,
/// arrays where it sends arrays, nulls) and the RESP2 downgrade.
#[test]
fn resp3_reply_shapes() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    raw.call(&["SADD", &a, "1"]);
    raw.call(&["SADD", &b, "1"]);
    assert_eq!(raw.call(&["SMEMBERS", &a]), "*1\r\n$1\r\n1\r\n");
    assert!(raw.call(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(raw.call(&["SMEMBERS", &a]), "~1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["SMEMBERS", "missing"]), "~0\r\n");
    assert_eq!(raw.call(&["SINTER", &a, &b]), "~1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["SINTER", &a, "missing"]), "~0\r\n");
    assert_eq!(raw.call(&["SUNION", &a, &b]), "~1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["SDIFF", &a, &b]), "~0\r\n");
    assert_eq!(raw.call(&["SISMEMBER", &a, "1"]), ":1\r\n");
    assert_eq!(raw.call(&["SMISMEMBER", &a, "1", "2"]), "*2\r\n:1\r\n:0\r\n");
    assert_eq!(raw.call(&["SRANDMEMBER", &a, "2"]), "*1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["SRANDMEMBER", &a, "-2"]), "*2\r\n$1\r\n1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["SRANDMEMBER", "missing"]), "_\r\n");
    assert_eq!(raw.call(&["SPOP", "missing"]), "_\r\n");
    assert_eq!(raw.call(&["SPOP", "missing", "2"]), "~0\r\n");
    assert_eq!(raw.call(&["SSCAN", &a, "0"]), "*2\r\n$1\r\n0\r\n*1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["SPOP", &a, "5"]), "~1\r\n$1\r\n1\r\n");
    assert_eq!(raw.call(&["SINTERCARD", "1", &b]), ":1\r\n");
}

/// SSCAN: small sets in one call, missing keys, options, and a quiet full
/// iteration of a big set (on each shard).
#[test]
fn sscan_small_big_and_options() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    q::<i64>(&mut c, &["SADD", &a, "1", "2", "3", "10", "20"]).unwrap();
    let (cursor, found): (String, Vec<String>) =
        q(&mut c, &["SSCAN", &a, "0", "COUNT", "1"]).unwrap();
    assert_eq!(cursor, "0", "an intset comes back whole");
    assert_eq!(found.len(), 5);
    let (cursor, found): (String, BTreeSet<String>) =
        q(&mut c, &["SSCAN", &a, "12345", "MATCH", "1*"]).unwrap();
    assert_eq!((cursor.as_str(), found), ("0", set_of(&["1", "10"])));
    // A missing key ends the iteration, whatever cursor was given.
    assert_eq!(raw.call(&["SSCAN", "missing", "987"]), "*2\r\n$1\r\n0\r\n*0\r\n");
    assert_eq!(err(&mut raw, &["SSCAN", &a, "x"]), "ERR invalid cursor");
    assert_eq!(err(&mut raw, &["SSCAN", &a, "-"]), "ERR invalid cursor");
    assert_eq!(err(&mut raw, &["SSCAN", &a, "0", "COUNT", "0"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SSCAN", &a, "0", "COUNT"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SSCAN", &a, "0", "TYPE", "set"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SSCAN", &a, "0", "FOO", "bar"]), "ERR syntax error");
    assert_eq!(
        err(&mut raw, &["SSCAN", &a, "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );

    for key in [&a, &b] {
        q::<i64>(&mut c, &["DEL", key]).unwrap();
        let all: Vec<String> = (0..5000).map(|i| format!("m{i}")).collect();
        for chunk in all.chunks(1000) {
            let mut args = vec!["SADD", key.as_str()];
            args.extend(chunk.iter().map(String::as_str));
            q::<i64>(&mut c, &args).unwrap();
        }
        for (count, pattern) in [("10", "*"), ("100", "m1*"), ("1000", "*")] {
            let mut seen: HashMap<String, usize> = HashMap::new();
            let mut cursor = "0".to_string();
            let mut calls = 0;
            loop {
                let (next, found): (String, Vec<String>) =
                    q(&mut c, &["SSCAN", key, &cursor, "COUNT", count, "MATCH", pattern]).unwrap();
                for m in found {
                    *seen.entry(m).or_default() += 1;
                }
                calls += 1;
                cursor = next;
                if cursor == "0" {
                    break;
                }
            }
            let want: HashSet<&String> =
                all.iter().filter(|m| pattern == "*" || m.starts_with("m1")).collect();
            assert_eq!(seen.len(), want.len(), "count {count} pattern {pattern}");
            assert!(seen.keys().all(|m| want.contains(m)));
            assert!(seen.values().all(|&n| n == 1), "a quiet iteration has no duplicates");
            if count == "10" {
                assert!(calls > 100, "COUNT 10 over 5000 members took {calls} calls");
            }
        }
    }
}

/// SSCAN's guarantee (every member present for the whole iteration is
/// returned, nothing absent for the whole iteration is) while other clients
/// add and remove members: once with the set grown tenfold and shrunk back
/// between calls, once with a writer thread running freely.
#[test]
fn sscan_guarantee_under_concurrent_sadd_srem() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for (key, threaded) in [(&a, false), (&b, true)] {
        let stable: Vec<String> = (0..3000).map(|i| format!("stable:{i}")).collect();
        let gone: Vec<String> = (0..500).map(|i| format!("gone:{i}")).collect();
        for chunk in stable.chunks(500).chain(gone.chunks(500)) {
            let mut args = vec!["SADD", key.as_str()];
            args.extend(chunk.iter().map(String::as_str));
            q::<i64>(&mut c, &args).unwrap();
        }
        let mut args = vec!["SREM", key.as_str()];
        args.extend(gone.iter().map(String::as_str));
        assert_eq!(q::<i64>(&mut c, &args).unwrap(), 500);

        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let writer = threaded.then(|| {
            let mut w = server.client();
            let (key, stop) = (key.clone(), stop.clone());
            std::thread::spawn(move || {
                let mut round = 0u64;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let batch: Vec<String> =
                        (0..200).map(|i| format!("churn:{round}:{i}")).collect();
                    let mut args = vec!["SADD", key.as_str()];
                    args.extend(batch.iter().map(String::as_str));
                    q::<i64>(&mut w, &args).unwrap();
                    if !round.is_multiple_of(3) {
                        let mut args = vec!["SREM", key.as_str()];
                        args.extend(batch.iter().map(String::as_str));
                        q::<i64>(&mut w, &args).unwrap();
                    }
                    round += 1;
                }
                round
            })
        });

        let mut seen: HashSet<String> = HashSet::new();
        let mut cursor = "0".to_string();
        let mut call = 0u64;
        loop {
            let (next, found): (String, Vec<String>) =
                q(&mut c, &["SSCAN", key, &cursor, "COUNT", "50"]).unwrap();
            seen.extend(found);
            cursor = next;
            if cursor == "0" {
                break;
            }
            call += 1;
            if !threaded {
                // Grow tenfold, then shrink back, between calls.
                let phase = call % 20;
                let batch: Vec<String> =
                    (0..1500).map(|i| format!("churn:{}:{i}", call / 20)).collect();
                let op = if phase < 10 { "SADD" } else { "SREM" };
                let wave: Vec<String> = if phase < 10 {
                    batch.iter().map(|m| format!("{m}:{phase}")).collect()
                } else {
                    batch.iter().map(|m| format!("{m}:{}", phase - 10)).collect()
                };
                let mut args = vec![op, key.as_str()];
                args.extend(wave.iter().map(String::as_str));
                q::<i64>(&mut c, &args).unwrap();
            }
            assert!(call < 1_000_000, "the iteration does not end");
        }
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(writer) = writer {
            let rounds = writer.join().expect("writer thread");
            assert!(rounds > 0, "the writer ran during the iteration");
        }
        for m in &stable {
            assert!(seen.contains(m), "{key}: {m} was present throughout but not returned");
        }
        for m in &gone {
            assert!(!seen.contains(m), "{key}: {m} was absent throughout but returned");
        }
        assert!(seen.iter().all(|m| m.starts_with("stable:") || m.starts_with("churn:")));
        assert!(call > 20, "{key}: the iteration took {call} calls, too few to interleave");
    }
}
