//! MULTI/EXEC/DISCARD/WATCH/UNWATCH against a real 2-shard server: Redis's
//! rules, WATCH on keys of the other shard, and atomicity across shards.

mod common;
use common::{keys_on_two_shards, q, Server};
use redis::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn queueing_and_exec_replies() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let (a, b) = keys_on_two_shards();
    assert_eq!(raw.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(raw.call(&["SET", &a, "1"]), "+QUEUED\r\n");
    assert_eq!(raw.call(&["INCR", &a]), "+QUEUED\r\n");
    assert_eq!(raw.call(&["SET", &b, "x"]), "+QUEUED\r\n");
    assert_eq!(raw.call(&["INCR", &b]), "+QUEUED\r\n");
    assert_eq!(raw.call(&["MGET", &a, &b]), "+QUEUED\r\n");
    assert_eq!(raw.call(&["PING"]), "+QUEUED\r\n");
    // Runtime errors are replies in place; nothing rolls back.
    assert_eq!(
        raw.call(&["EXEC"]),
        "*6\r\n+OK\r\n:2\r\n+OK\r\n-ERR value is not an integer or out of range\r\n*2\r\n$1\r\n2\r\n$1\r\nx\r\n+PONG\r\n"
    );
    assert_eq!(raw.call(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(raw.call(&["DISCARD"]), "-ERR DISCARD without MULTI\r\n");
    assert_eq!(raw.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(raw.call(&["MULTI"]), "-ERR MULTI calls can not be nested\r\n");
    assert_eq!(raw.call(&["WATCH", &a]), "-ERR WATCH inside MULTI is not allowed\r\n");
    assert_eq!(raw.call(&["SET", &a, "9"]), "+QUEUED\r\n");
    assert_eq!(raw.call(&["DISCARD"]), "+OK\r\n");
    assert_eq!(raw.call(&["GET", &a]), "$1\r\n2\r\n");
}

#[test]
fn errors_while_queueing_abort_exec() {
    let server = Server::start(2);
    let mut raw = server.raw();
    assert_eq!(raw.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(raw.call(&["SET", "k", "1"]), "+QUEUED\r\n");
    assert!(raw.call(&["NOSUCHCMD"]).starts_with("-ERR unknown command"));
    assert!(raw.call(&["GET"]).starts_with("-ERR wrong number of arguments"));
    assert_eq!(raw.call(&["SET", "k2", "2"]), "+QUEUED\r\n");
    assert_eq!(
        raw.call(&["EXEC"]),
        "-EXECABORT Transaction discarded because of previous errors.\r\n"
    );
    assert_eq!(raw.call(&["EXISTS", "k", "k2"]), ":0\r\n");
    assert_eq!(raw.call(&["PING"]), "+PONG\r\n");
    // RESP3: a failed WATCH gives a null.
    raw.call(&["HELLO", "3"]);
    raw.call(&["WATCH", "w"]);
    let mut other = server.client();
    q::<String>(&mut other, &["SET", "w", "changed"]).unwrap();
    raw.call(&["MULTI"]);
    raw.call(&["GET", "w"]);
    assert_eq!(raw.call(&["EXEC"]), "_\r\n");
}

#[test]
fn watch_on_either_shard() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let mut other = server.client();
    for key in [&a, &b] {
        // Unchanged: EXEC runs.
        q::<()>(&mut c, &["WATCH", key]).unwrap();
        let v: Value = redis::pipe().atomic().cmd("SET").arg(key).arg("1").query(&mut c).unwrap();
        assert_ne!(v, Value::Nil, "unchanged watched key {key}");
        // Changed by another client: EXEC returns a null array.
        q::<()>(&mut c, &["WATCH", key, "unrelated"]).unwrap();
        q::<()>(&mut other, &["INCR", key]).unwrap();
        let v: Value =
            redis::pipe().atomic().cmd("SET").arg(key).arg("lost").query(&mut c).unwrap();
        assert_eq!(v, Value::Nil, "changed watched key {key}");
        assert_eq!(q::<String>(&mut c, &["GET", key]).unwrap(), "2");
        // Changed, but UNWATCHed: runs.
        q::<()>(&mut c, &["WATCH", key]).unwrap();
        q::<()>(&mut other, &["INCR", key]).unwrap();
        q::<()>(&mut c, &["UNWATCH"]).unwrap();
        let v: Value = redis::pipe().atomic().cmd("SET").arg(key).arg("won").query(&mut c).unwrap();
        assert_ne!(v, Value::Nil);
        // Keys are no longer watched after EXEC.
        q::<()>(&mut other, &["INCR", "unrelated"]).unwrap();
        let v: Value = redis::pipe().atomic().cmd("PING").query(&mut c).unwrap();
        assert_ne!(v, Value::Nil);
    }
}

#[test]
fn watch_sees_expiry_and_flushes() {
    let server = Server::start(2);
    let (a, _) = keys_on_two_shards();
    let mut c = server.client();
    let mut other = server.client();
    // A key that expires after WATCH fails the EXEC.
    q::<()>(&mut c, &["SET", &a, "v", "PX", "100"]).unwrap();
    q::<()>(&mut c, &["WATCH", &a]).unwrap();
    thread::sleep(Duration::from_millis(200));
    let v: Value = redis::pipe().atomic().cmd("PING").query(&mut c).unwrap();
    assert_eq!(v, Value::Nil);
    // FLUSHALL of an existing watched key fails it.
    q::<()>(&mut c, &["SET", &a, "v"]).unwrap();
    q::<()>(&mut c, &["WATCH", &a]).unwrap();
    q::<()>(&mut other, &["FLUSHALL"]).unwrap();
    let v: Value = redis::pipe().atomic().cmd("PING").query(&mut c).unwrap();
    assert_eq!(v, Value::Nil);
    // FLUSHALL of a watched key that did not exist does not.
    q::<()>(&mut c, &["WATCH", &a]).unwrap();
    q::<()>(&mut other, &["FLUSHALL"]).unwrap();
    let v: Value = redis::pipe().atomic().cmd("PING").query(&mut c).unwrap();
    assert_ne!(v, Value::Nil);
}

#[test]
fn a_hundred_commands_over_two_shards() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let mut pipe = redis::pipe();
    pipe.atomic();
    for i in 0..100 {
        pipe.cmd("INCR").arg(if i % 10 < 5 { &a } else { &b });
    }
    pipe.cmd("MGET").arg(&a).arg(&b).cmd("DBSIZE");
    let v: Vec<Value> = pipe.query(&mut c).unwrap();
    assert_eq!(v.len(), 102);
    assert_eq!(
        v[100],
        Value::Array(vec![Value::BulkString(b"50".to_vec()), Value::BulkString(b"50".to_vec())])
    );
    assert_eq!(v[101], Value::Int(2));
}

#[test]
fn exec_is_atomic_across_shards() {
    // A writer moves 1 from a to b in a transaction (keys on two shards);
    // readers must always see a + b == 1000.
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    q::<()>(&mut c, &["MSET", &a, "1000", &b, "0"]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (a, b, stop, url) = (a.clone(), b.clone(), stop.clone(), server.url());
        thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut n = 0;
            while !stop.load(Ordering::Relaxed) {
                let _: Value = redis::pipe()
                    .atomic()
                    .cmd("DECR")
                    .arg(&a)
                    .cmd("INCR")
                    .arg(&b)
                    .query(&mut c)
                    .unwrap();
                n += 1;
            }
            n
        })
    };
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut checks = 0;
    while Instant::now() < deadline {
        // Both through a transaction and through MGET.
        let (x, y): (i64, i64) =
            redis::pipe().atomic().cmd("GET").arg(&a).cmd("GET").arg(&b).query(&mut c).unwrap();
        assert_eq!(x + y, 1000, "EXEC saw a={x} b={y}");
        let v: Vec<i64> = q(&mut c, &["MGET", &a, &b]).unwrap();
        assert_eq!(v[0] + v[1], 1000, "MGET saw {v:?}");
        checks += 1;
    }
    stop.store(true, Ordering::Relaxed);
    let moves = writer.join().unwrap();
    assert!(checks > 50 && moves > 50, "checks {checks} moves {moves}");
}
