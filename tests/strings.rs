//! Strings and counters against a real 2-shard server: every option of SET,
//! the GET variants, MGET/MSET/MSETNX across shards, counters, ranges.

mod common;
use common::{keys_on_two_shards, q, Server};
use redis::Value;

#[test]
fn set_get_and_options() {
    let server = Server::start(2);
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["GET", "k"]).unwrap(), "v");
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "k", "w", "NX"]).unwrap(), None);
    assert_eq!(
        q::<Option<String>>(&mut c, &["SET", "k", "w", "XX", "GET"]).unwrap().as_deref(),
        Some("v")
    );
    assert_eq!(q::<Option<String>>(&mut c, &["SET", "nokey", "w", "XX"]).unwrap(), None);
    assert_eq!(q::<String>(&mut c, &["SET", "k", "x", "EX", "100"]).unwrap(), "OK");
    let ttl: i64 = q(&mut c, &["TTL", "k"]).unwrap_or(100);
    assert!(ttl > 90 && ttl <= 100, "ttl {ttl}");
    let err = q::<String>(&mut c, &["SET", "k", "x", "EX", "0"]).unwrap_err();
    assert!(err.to_string().contains("invalid expire time in 'set' command"), "{err}");
    let err = q::<String>(&mut c, &["SET", "k", "x", "NX", "XX"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
    let err = q::<String>(&mut c, &["SET", "k", "x", "EX", "10", "PX", "10"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
    let err = q::<String>(&mut c, &["SET", "k", "x", "EX", "abc"]).unwrap_err();
    assert!(err.to_string().contains("not an integer"), "{err}");
    assert_eq!(q::<i64>(&mut c, &["SETNX", "fresh", "1"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["SETNX", "fresh", "2"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["GETSET", "fresh", "3"]).unwrap(), "1");
    assert_eq!(q::<String>(&mut c, &["GETDEL", "fresh"]).unwrap(), "3");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "fresh"]).unwrap(), None);
}

#[test]
fn mset_mget_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    assert_eq!(q::<String>(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap(), "OK");
    let v: Vec<Option<String>> = q(&mut c, &["MGET", &b, "missing", &a]).unwrap();
    assert_eq!(v, vec![Some("2".into()), None, Some("1".into())]);
    assert_eq!(q::<i64>(&mut c, &["MSETNX", &a, "x", "other", "y"]).unwrap(), 0);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "other"]).unwrap(), None);
    assert_eq!(q::<i64>(&mut c, &["DEL", &a, &b, "missing"]).unwrap(), 2);
    let err = q::<String>(&mut c, &["MSET", &a, "1", &b]).unwrap_err();
    assert!(err.to_string().contains("wrong number of arguments for 'mset'"), "{err}");
    assert_eq!(
        q::<Value>(&mut c, &["MGET", &a, &b]).unwrap(),
        Value::Array(vec![Value::Nil, Value::Nil])
    );
}

#[test]
fn counters() {
    let server = Server::start(2);
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["INCR", "n"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["INCRBY", "n", "10"]).unwrap(), 11);
    assert_eq!(q::<i64>(&mut c, &["DECRBY", "n", "20"]).unwrap(), -9);
    assert_eq!(q::<i64>(&mut c, &["DECR", "n"]).unwrap(), -10);
    q::<String>(&mut c, &["SET", "big", "9223372036854775807"]).unwrap();
    let err = q::<i64>(&mut c, &["INCR", "big"]).unwrap_err();
    assert!(err.to_string().contains("increment or decrement would overflow"), "{err}");
    q::<String>(&mut c, &["SET", "s", "abc"]).unwrap();
    let err = q::<i64>(&mut c, &["INCR", "s"]).unwrap_err();
    assert!(err.to_string().contains("value is not an integer or out of range"), "{err}");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "10.5"]).unwrap(), "10.5");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "0.1"]).unwrap(), "10.6");
    assert_eq!(q::<String>(&mut c, &["INCRBYFLOAT", "f", "-10.6"]).unwrap(), "0");
    let err = q::<String>(&mut c, &["INCRBYFLOAT", "f", "nan"]).unwrap_err();
    assert!(err.to_string().contains("not a valid float"), "{err}");
    let err = q::<String>(&mut c, &["INCRBYFLOAT", "f", "1e308"]).unwrap();
    assert!(err.starts_with("1"), "{err}");
    let err = q::<String>(&mut c, &["INCRBYFLOAT", "f", "1e308"]).unwrap_err();
    assert!(err.to_string().contains("increment would produce NaN or Infinity"), "{err}");
}

#[test]
fn ranges_append_strlen() {
    let server = Server::start(2);
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["APPEND", "s", "Hello"]).unwrap(), 5);
    assert_eq!(q::<i64>(&mut c, &["APPEND", "s", " World"]).unwrap(), 11);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "s"]).unwrap(), 11);
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "s", "0", "4"]).unwrap(), "Hello");
    assert_eq!(q::<String>(&mut c, &["GETRANGE", "s", "-5", "-1"]).unwrap(), "World");
    assert_eq!(q::<String>(&mut c, &["SUBSTR", "s", "6", "100"]).unwrap(), "World");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "s", "6", "Redis"]).unwrap(), 11);
    assert_eq!(q::<String>(&mut c, &["GET", "s"]).unwrap(), "Hello Redis");
    assert_eq!(q::<i64>(&mut c, &["SETRANGE", "z", "3", "x"]).unwrap(), 4);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "z"]).unwrap(), b"\0\0\0x".to_vec());
    let err = q::<i64>(&mut c, &["SETRANGE", "z", "-1", "x"]).unwrap_err();
    assert!(err.to_string().contains("offset is out of range"), "{err}");
    let err = q::<i64>(&mut c, &["SETRANGE", "z", "536870912", "x"]).unwrap_err();
    assert!(err.to_string().contains("string exceeds maximum allowed size"), "{err}");
}
