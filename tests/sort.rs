//! SORT and SORT_RO against a real 2-shard server: numeric and ALPHA
//! sorting of lists, sets and sorted sets, LIMIT, ASC/DESC, BY and GET
//! patterns (string keys and hash fields, `#`, constant patterns), STORE on
//! the same and on another shard, Redis's error texts, and patterns whose
//! keys live on other shards.

mod common;
use common::{keys_on_two_shards, q, Server};
use redis::Value;

fn strings(c: &mut redis::Connection, args: &[&str]) -> Vec<String> {
    q(c, args).unwrap()
}

fn error(c: &mut redis::Connection, args: &[&str]) -> String {
    q::<Value>(c, args).unwrap_err().to_string()
}

#[test]
fn sorts_lists_sets_and_sorted_sets_with_every_option() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<()>(&mut c, &["RPUSH", key, "3", "10", "-1.5", "2", "10"]).unwrap();
        assert_eq!(strings(&mut c, &["SORT", key]), ["-1.5", "2", "3", "10", "10"]);
        assert_eq!(strings(&mut c, &["SORT", key, "DESC", "LIMIT", "1", "2"]), ["10", "3"]);
        assert_eq!(strings(&mut c, &["SORT", key, "ALPHA"]), ["-1.5", "10", "10", "2", "3"]);
        assert_eq!(strings(&mut c, &["SORT_RO", key, "LIMIT", "-5", "2"]), ["-1.5", "2"]);
        assert_eq!(strings(&mut c, &["SORT", key, "LIMIT", "10", "5"]), Vec::<String>::new());
        // BY a constant: the list's own order, LIMIT on it, DESC from the tail.
        assert_eq!(
            strings(&mut c, &["SORT", key, "BY", "nosort", "LIMIT", "1", "3"]),
            ["10", "-1.5", "2"]
        );
        assert_eq!(
            strings(&mut c, &["SORT", key, "BY", "nosort", "DESC"]),
            ["10", "2", "-1.5", "10", "3"]
        );
        // GET # and a constant pattern (which reads nothing: nil).
        let got: Vec<Option<String>> =
            q(&mut c, &["SORT", key, "GET", "#", "GET", "const", "LIMIT", "0", "1"]).unwrap();
        assert_eq!(got, [Some("-1.5".to_string()), None]);
    }
    // Sets sort the same way; unsorted output of a set stored is sorted.
    let set = format!("{{{a}}}:set");
    q::<()>(&mut c, &["SADD", &set, "b", "a", "c"]).unwrap();
    assert_eq!(strings(&mut c, &["SORT", &set, "ALPHA", "DESC"]), ["c", "b", "a"]);
    let dst = format!("{{{a}}}:dst");
    assert_eq!(q::<i64>(&mut c, &["SORT", &set, "BY", "nosort", "STORE", &dst]).unwrap(), 3);
    assert_eq!(strings(&mut c, &["LRANGE", &dst, "0", "-1"]), ["a", "b", "c"]);
    // Sorted sets: their own order with BY nosort, by member otherwise.
    let zset = format!("{{{b}}}:z");
    q::<()>(&mut c, &["ZADD", &zset, "1", "9", "2", "7", "3", "8"]).unwrap();
    assert_eq!(strings(&mut c, &["SORT", &zset, "BY", "nosort"]), ["9", "7", "8"]);
    assert_eq!(strings(&mut c, &["SORT", &zset, "BY", "nosort", "DESC", "LIMIT", "1", "1"]), ["7"]);
    assert_eq!(strings(&mut c, &["SORT", &zset]), ["7", "8", "9"]);
    // A missing key sorts as empty; STORE of nothing deletes the target.
    assert_eq!(strings(&mut c, &["SORT", "missing"]), Vec::<String>::new());
    assert_eq!(q::<i64>(&mut c, &["SORT", "{missing}", "STORE", "{missing}:d"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["SORT", &format!("{{{a}}}:none"), "STORE", &dst]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &dst]).unwrap(), 0);
}

#[test]
fn store_replaces_the_target_on_either_shard_and_errors_are_redis_texts() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<()>(&mut c, &["RPUSH", &a, "2", "1", "3"]).unwrap();
    // The destination on the other shard, holding another type and a TTL.
    q::<()>(&mut c, &["SET", &b, "old", "EX", "100"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SORT", &a, "DESC", "STORE", &b]).unwrap(), 3);
    assert_eq!(strings(&mut c, &["LRANGE", &b, "0", "-1"]), ["3", "2", "1"]);
    assert_eq!(q::<i64>(&mut c, &["TTL", &b]).unwrap(), -1);
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", &b]).unwrap(), "quicklist");
    // The last STORE counts, and a GET pattern named "store" is not one.
    let dst = format!("{{{a}}}:d");
    assert_eq!(q::<i64>(&mut c, &["SORT", &a, "STORE", &b, "GET", "#", "STORE", &dst]).unwrap(), 3);
    assert_eq!(strings(&mut c, &["LRANGE", &dst, "0", "-1"]), ["1", "2", "3"]);

    q::<()>(&mut c, &["RPUSH", "{w}", "1", "x"]).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["SORT", "{w}"], "One or more scores can't be converted into double"),
        (&["SORT", "{w}", "LIMIT", "0"], "syntax error"),
        (&["SORT", "{w}", "LIMIT", "x", "1"], "value is not an integer or out of range"),
        (&["SORT", "{w}", "BOGUS"], "syntax error"),
        (&["SORT_RO", "{w}", "STORE", "{w}:d"], "syntax error"),
        (&["SORT", &b, "BY", "x"], "WRONGTYPE"),
    ];
    q::<()>(&mut c, &["SET", &b, "string"]).unwrap();
    for (args, want) in cases {
        let got = error(&mut c, args);
        assert!(got.contains(want), "{args:?}: {got}");
    }
    let got: Vec<String> =
        q(&mut c, &["COMMAND", "GETKEYS", "SORT", "k", "GET", "store", "STORE", "d"]).unwrap();
    assert_eq!(got, ["k", "d"]);
}

#[test]
fn by_and_get_patterns_read_strings_and_hash_fields() {
    let server = Server::start(2);
    let mut c = server.client();
    // Everything under one hash tag: one shard.
    q::<()>(&mut c, &["RPUSH", "{t}list", "a", "b", "c", "d"]).unwrap();
    for (item, weight, name) in [("a", "3", "alpha"), ("b", "1", "beta"), ("c", "2", "gamma")] {
        q::<()>(&mut c, &["SET", &format!("{{t}}w_{item}"), weight]).unwrap();
        q::<()>(&mut c, &["HSET", &format!("{{t}}h_{item}"), "name", name, "w", weight]).unwrap();
    }
    // "d" has no weight: 0, so first.
    assert_eq!(strings(&mut c, &["SORT", "{t}list", "BY", "{t}w_*"]), ["d", "b", "c", "a"]);
    assert_eq!(
        strings(&mut c, &["SORT", "{t}list", "BY", "{t}h_*->w", "DESC"]),
        ["a", "c", "b", "d"]
    );
    let got: Vec<Option<String>> = q(
        &mut c,
        &["SORT", "{t}list", "BY", "{t}w_*", "GET", "#", "GET", "{t}h_*->name", "LIMIT", "0", "2"],
    )
    .unwrap();
    assert_eq!(got, [Some("d".into()), None, Some("b".into()), Some("beta".into())]);
    // ALPHA BY: a missing weight sorts first; equal numeric weights by element.
    assert_eq!(
        strings(&mut c, &["SORT", "{t}list", "BY", "{t}h_*->name", "ALPHA", "DESC"]),
        ["c", "b", "a", "d"]
    );
    q::<()>(&mut c, &["SET", "{t}w_d", "1"]).unwrap();
    assert_eq!(strings(&mut c, &["SORT", "{t}list", "BY", "{t}w_*"]), ["b", "d", "c", "a"]);
    // A pattern ending in "->" is a key name, not a field.
    q::<()>(&mut c, &["SET", "{t}h_a->", "plain"]).unwrap();
    let got: Vec<Option<String>> =
        q(&mut c, &["SORT", "{t}list", "GET", "{t}h_*->", "ALPHA", "LIMIT", "0", "1"]).unwrap();
    assert_eq!(got, [Some("plain".into())]);
    // STORE with GET: missing values stored as empty strings.
    assert_eq!(
        q::<i64>(&mut c, &["SORT", "{t}list", "ALPHA", "GET", "{t}h_*->name", "STORE", "{t}out"])
            .unwrap(),
        4
    );
    assert_eq!(strings(&mut c, &["LRANGE", "{t}out", "0", "-1"]), ["alpha", "beta", "gamma", ""]);
    // A weight that is not a number.
    q::<()>(&mut c, &["SET", "{t}w_a", "heavy"]).unwrap();
    assert!(error(&mut c, &["SORT", "{t}list", "BY", "{t}w_*"])
        .contains("can't be converted into double"));
}

/// Patterns whose keys live on both shards: the router gathers them, so
/// SORT gives what one Redis gives; inside MULTI they are refused.
#[test]
fn patterns_read_keys_on_every_shard() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let items: Vec<String> = (0..40).map(|i| format!("item{i}")).collect();
    for (i, item) in items.iter().enumerate() {
        q::<()>(&mut c, &["RPUSH", &a, item]).unwrap();
        q::<()>(&mut c, &["SET", &format!("weight_{item}"), &((i * 7) % 40).to_string()]).unwrap();
        q::<()>(&mut c, &["HSET", &format!("obj_{item}"), "name", &format!("name-{i}")]).unwrap();
    }
    let mut want: Vec<(usize, String)> =
        items.iter().enumerate().map(|(i, item)| ((i * 7) % 40, item.clone())).collect();
    want.sort();
    let want: Vec<String> = want.into_iter().map(|(_, item)| item).collect();
    assert_eq!(strings(&mut c, &["SORT", &a, "BY", "weight_*"]), want);
    let names: Vec<String> =
        q(&mut c, &["SORT_RO", &a, "BY", "weight_*", "GET", "obj_*->name", "LIMIT", "0", "2"])
            .unwrap();
    let first: usize = want[0].trim_start_matches("item").parse().unwrap();
    assert_eq!(names[0], format!("name-{first}"));
    assert_eq!(q::<i64>(&mut c, &["SORT", &a, "BY", "weight_*", "STORE", &b]).unwrap(), 40);
    assert_eq!(strings(&mut c, &["LRANGE", &b, "0", "-1"]), want);
    let reply: redis::RedisResult<Value> =
        redis::pipe().atomic().cmd("SORT").arg(&a).arg("BY").arg("weight_*").query(&mut c);
    let text = match reply {
        Ok(v) => format!("{v:?}"),
        Err(e) => e.to_string(),
    };
    assert!(text.contains("denied in MULTI"), "{text}");
}
