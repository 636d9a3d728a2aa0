//! MIGRATE from a 2-shard ringdb to a second ringdb and to a real
//! redis-server: single keys and KEYS lists spanning shards, COPY, REPLACE,
//! TTLs, NOKEY, target errors (keys already restored still leave), AUTH and
//! AUTH2, timeouts, the connection cache, and targets that misbehave.

mod common;

use common::{info_field, keys_on_two_shards, q, RedisServer, Server};
use std::io::{Read, Write};
use std::net::TcpListener;
use std::time::{Duration, Instant};

/// MIGRATE's reply, exactly: `Ok(status)` or `Err(error text)`.
fn migrate(c: &mut redis::Connection, args: &[&str]) -> Result<String, String> {
    let mut cmd = redis::cmd("MIGRATE");
    for a in args {
        cmd.arg(*a);
    }
    match cmd.query::<redis::Value>(c) {
        Ok(redis::Value::Okay) => Ok("OK".to_string()),
        Ok(redis::Value::SimpleString(s)) => Ok(s),
        Ok(other) => panic!("MIGRATE replied {other:?}"),
        Err(e) => Err(format!("{} {}", e.code().unwrap_or("?"), e.detail().unwrap_or(""))),
    }
}

fn exists(c: &mut redis::Connection, key: &str) -> bool {
    q::<i64>(c, &["EXISTS", key]).unwrap() == 1
}

#[test]
fn a_key_moves_with_its_ttl_and_the_connection_is_cached() {
    let source = Server::start(2);
    let target = Server::start(2);
    let mut s = source.client();
    let mut t = target.client();
    let port = target.port.to_string();
    let _: () = q(&mut s, &["SET", "k", "v", "EX", "100"]).unwrap();
    let _: () = q(&mut s, &["RPUSH", "plain", "a", "b"]).unwrap();
    assert_eq!(info_field(&mut s, "stats", "migrate_cached_sockets"), "0");
    assert_eq!(migrate(&mut s, &["127.0.0.1", &port, "k", "0", "5000"]).unwrap(), "OK");
    assert!(!exists(&mut s, "k"));
    assert_eq!(q::<String>(&mut t, &["GET", "k"]).unwrap(), "v");
    let pttl: i64 = q(&mut t, &["PTTL", "k"]).unwrap();
    assert!((95_000..=100_000).contains(&pttl), "pttl {pttl}");
    assert_eq!(info_field(&mut s, "stats", "migrate_cached_sockets"), "1");
    // No TTL stays no TTL; the cached connection is reused.
    assert_eq!(migrate(&mut s, &["127.0.0.1", &port, "plain", "0", "5000"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut t, &["TTL", "plain"]).unwrap(), -1);
    assert_eq!(q::<Vec<String>>(&mut t, &["LRANGE", "plain", "0", "-1"]).unwrap(), ["a", "b"]);
    assert_eq!(info_field(&mut s, "stats", "migrate_cached_sockets"), "1");
    assert_eq!(info_field(&mut t, "clients", "connected_clients"), "2");
    // Nothing to move: NOKEY, and no connection is needed for it.
    assert_eq!(migrate(&mut s, &["127.0.0.1", "1", "k", "0", "100"]).unwrap(), "NOKEY");
}

#[test]
fn keys_on_both_shards_copy_replace_and_delete_with_events() {
    let source = Server::start(2);
    let target = Server::start(2);
    let mut s = source.client();
    let mut t = target.client();
    let port = target.port.to_string();
    let (a, b) = keys_on_two_shards();
    let _: () = q(&mut s, &["MSET", &a, "1", &b, "2"]).unwrap();
    let keys = |extra: &[&'static str]| -> Vec<String> {
        let mut v: Vec<String> = ["127.0.0.1", &port, "", "0", "5000"].map(String::from).to_vec();
        v.extend(extra.iter().map(|s| s.to_string()));
        v.push("KEYS".into());
        v.extend([a.clone(), "missing".into(), b.clone()]);
        v
    };
    let run = |c: &mut redis::Connection, extra: &[&'static str]| {
        let args = keys(extra);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        migrate(c, &args)
    };
    assert_eq!(run(&mut s, &["COPY"]).unwrap(), "OK");
    assert!(exists(&mut s, &a) && exists(&mut s, &b));
    assert_eq!(q::<Vec<String>>(&mut t, &["MGET", &a, &b]).unwrap(), ["1", "2"]);
    // Without REPLACE the target refuses; nothing leaves the source.
    let e = run(&mut s, &["COPY"]).unwrap_err();
    assert!(e.contains("Target instance replied with error: BUSYKEY"), "{e}");
    assert!(exists(&mut s, &a) && exists(&mut s, &b));
    // REPLACE, no COPY: the keys leave, each with a `del` event.
    let _: () = q(&mut s, &["MSET", &a, "x", &b, "y"]).unwrap();
    let _: () = q(&mut s, &["CONFIG", "SET", "notify-keyspace-events", "Eg"]).unwrap();
    let mut events = source.raw();
    events.call(&["SUBSCRIBE", "__keyevent@0__:del"]);
    assert_eq!(run(&mut s, &["REPLACE"]).unwrap(), "OK");
    let mut deleted = Vec::new();
    for _ in 0..2 {
        let frame = String::from_utf8_lossy(&events.read_frame()).into_owned();
        deleted.push(frame.lines().last().unwrap_or_default().to_string());
    }
    deleted.sort();
    let mut expected = vec![a.clone(), b.clone()];
    expected.sort();
    assert_eq!(deleted, expected);
    assert!(!exists(&mut s, &a) && !exists(&mut s, &b));
    assert_eq!(q::<Vec<String>>(&mut t, &["MGET", &a, &b]).unwrap(), ["x", "y"]);
    // Without the empty key argument, KEYS is refused.
    let e = migrate(&mut s, &["127.0.0.1", &port, "k", "0", "5000", "KEYS", "a"]).unwrap_err();
    assert!(e.contains("the key argument must be set to the empty string"), "{e}");
    let e = migrate(&mut s, &["127.0.0.1", &port, "k", "0", "5000", "AUTH"]).unwrap_err();
    assert!(e.contains("syntax error"), "{e}");
}

#[test]
fn to_redis_server_types_databases_and_partial_failure() {
    let Some(redis) = RedisServer::start_default() else { return };
    let source = Server::start(2);
    let mut s = source.client();
    let mut r = redis.client();
    let port = redis.port.to_string();
    let _: () = q(&mut s, &["HSET", "h", "f", "v"]).unwrap();
    let _: () = q(&mut s, &["ZADD", "z", "1", "m"]).unwrap();
    let _: () = q(&mut s, &["SADD", "set", "x"]).unwrap();
    let _: () = q(&mut s, &["SET", "str", "val", "PX", "50000"]).unwrap();
    let args = ["127.0.0.1", &port, "", "3", "5000", "KEYS", "h", "z", "set", "str"];
    assert_eq!(migrate(&mut s, &args).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut s, &["DBSIZE"]).unwrap(), 0);
    let _: () = q(&mut r, &["SELECT", "3"]).unwrap();
    assert_eq!(q::<String>(&mut r, &["HGET", "h", "f"]).unwrap(), "v");
    assert_eq!(q::<Vec<String>>(&mut r, &["ZRANGE", "z", "0", "-1"]).unwrap(), ["m"]);
    assert_eq!(q::<Vec<String>>(&mut r, &["SMEMBERS", "set"]).unwrap(), ["x"]);
    let pttl: i64 = q(&mut r, &["PTTL", "str"]).unwrap();
    assert!((40_000..=50_000).contains(&pttl), "pttl {pttl}");
    // A busy key on the target: the error names it, the other keys (the
    // ones the target restored) still leave the source.
    let _: () = q(&mut s, &["MSET", "a", "1", "b", "2", "c", "3", "d", "4"]).unwrap();
    let _: () = q(&mut r, &["SET", "c", "busy"]).unwrap();
    let args = ["127.0.0.1", &port, "", "3", "5000", "KEYS", "a", "b", "c", "d"];
    let e = migrate(&mut s, &args).unwrap_err();
    assert!(e.contains("Target instance replied with error: BUSYKEY"), "{e}");
    assert_eq!(q::<Vec<String>>(&mut s, &["KEYS", "*"]).unwrap(), ["c"]);
    assert_eq!(q::<i64>(&mut r, &["DBSIZE"]).unwrap(), 8);
    // A bad database is the target's error.
    let e = migrate(&mut s, &["127.0.0.1", &port, "c", "99", "5000"]).unwrap_err();
    assert!(e.contains("Target instance replied with error: ERR DB index is out of range"), "{e}");
    assert!(exists(&mut s, "c"));
}

#[test]
fn select_is_sent_only_when_the_database_changes() {
    let Some(redis) = RedisServer::start_default() else { return };
    let source = Server::start(2);
    let mut s = source.client();
    let port = redis.port.to_string();
    let mut monitor = redis.raw();
    assert!(monitor.call(&["MONITOR"]).starts_with("+OK"));
    for (key, db) in [("k1", "2"), ("k2", "2"), ("k3", "5")] {
        let _: () = q(&mut s, &["SET", key, "v"]).unwrap();
        assert_eq!(migrate(&mut s, &["127.0.0.1", &port, key, db, "5000"]).unwrap(), "OK");
    }
    let mut seen = Vec::new();
    while seen.len() < 5 {
        let line = String::from_utf8_lossy(&monitor.read_frame()).into_owned();
        let cmd = line.split('"').nth(1).unwrap_or_default().to_ascii_lowercase();
        seen.push(cmd);
    }
    assert_eq!(seen, ["select", "restore", "restore", "select", "restore"]);
}

#[test]
fn auth_and_auth2() {
    let Some(redis) = RedisServer::start_default() else { return };
    let mut r = redis.client();
    let _: () = q(&mut r, &["CONFIG", "SET", "requirepass", "foobar"]).unwrap();
    let source = Server::start(2);
    let mut s = source.client();
    let port = redis.port.to_string();
    let _: () = q(&mut s, &["RPUSH", "l", "a", "b"]).unwrap();
    let e = migrate(&mut s, &["127.0.0.1", &port, "l", "0", "5000"]).unwrap_err();
    assert!(e.contains("Target instance replied with error: NOAUTH"), "{e}");
    let e = migrate(&mut s, &["127.0.0.1", &port, "l", "0", "5000", "AUTH", "wrong"]).unwrap_err();
    assert!(e.contains("WRONGPASS"), "{e}");
    assert!(exists(&mut s, "l"));
    let args = ["127.0.0.1", &port, "l", "0", "5000", "COPY", "AUTH", "foobar"];
    assert_eq!(migrate(&mut s, &args).unwrap(), "OK");
    let args = ["127.0.0.1", &port, "l", "0", "5000", "REPLACE", "AUTH2", "default", "foobar"];
    assert_eq!(migrate(&mut s, &args).unwrap(), "OK");
    assert!(!exists(&mut s, "l"));
    assert_eq!(q::<Vec<String>>(&mut r, &["LRANGE", "l", "0", "-1"]).unwrap(), ["a", "b"]);
}

#[test]
fn timeouts_and_unreachable_targets_leave_the_keys() {
    let source = Server::start(2);
    let mut s = source.client();
    let _: () = q(&mut s, &["SET", "k", "v"]).unwrap();
    // Nothing listens: the connection fails at once.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap();
    let closed_port = closed.local_addr().unwrap().port().to_string();
    drop(closed);
    let e = migrate(&mut s, &["127.0.0.1", &closed_port, "k", "0", "1000"]).unwrap_err();
    assert_eq!(e, "IOERR error or timeout connecting to the client");
    // A listener that never answers: the read times out, in about the
    // timeout, and the server goes on serving meanwhile.
    let silent = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = silent.local_addr().unwrap().port().to_string();
    let started = Instant::now();
    let waiting = {
        let mut c = source.client();
        let port = port.clone();
        std::thread::spawn(move || migrate(&mut c, &["127.0.0.1", &port, "k", "0", "700"]))
    };
    std::thread::sleep(Duration::from_millis(100));
    let mut other = source.client();
    for _ in 0..5 {
        let ping = Instant::now();
        assert_eq!(q::<String>(&mut other, &["PING"]).unwrap(), "PONG");
        assert!(ping.elapsed() < Duration::from_millis(300));
    }
    let e = waiting.join().unwrap().unwrap_err();
    assert_eq!(e, "IOERR error or timeout reading to target instance");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(650) && took < Duration::from_secs(5), "{took:?}");
    assert!(exists(&mut s, "k"));
    assert_eq!(info_field(&mut s, "stats", "migrate_cached_sockets"), "0");
    drop(silent);
    // A listener whose accept queue is full answers no handshake: the
    // connect times out.
    let full = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    full.bind(&"127.0.0.1:0".parse::<std::net::SocketAddr>().unwrap().into()).unwrap();
    full.listen(0).unwrap();
    let addr = full.local_addr().unwrap().as_socket().unwrap();
    let fillers: Vec<_> = (0..4)
        .filter_map(|_| {
            std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).ok()
        })
        .collect();
    let started = Instant::now();
    let full_port = addr.port().to_string();
    let e = migrate(&mut s, &["127.0.0.1", &full_port, "k", "0", "300"]).unwrap_err();
    assert_eq!(e, "IOERR error or timeout connecting to the client");
    let took = started.elapsed();
    assert!(took >= Duration::from_millis(250) && took < Duration::from_secs(5), "{took:?}");
    assert!(exists(&mut s, "k"));
    drop(fillers);
}

/// A fake target: accepts one connection, reads a little, answers with
/// `reply`, then keeps the connection open until the test ends.
fn fake_target(reply: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port().to_string();
    let handle = std::thread::spawn(move || {
        let Ok((mut conn, _)) = listener.accept() else { return };
        // A reply the server stops reading must not hold this thread.
        let _ = conn.set_write_timeout(Some(Duration::from_millis(500)));
        let mut buf = [0u8; 65536];
        let _ = conn.read(&mut buf);
        let _ = conn.write_all(&reply);
        std::thread::sleep(Duration::from_millis(500));
    });
    (port, handle)
}

#[test]
fn a_misbehaving_target_cannot_hurt_the_server() {
    let source = Server::start(2);
    let mut s = source.client();
    // One endless line: Redis takes 1023 bytes of it as SELECT's reply and
    // the next 1023 as RESTORE's, neither an error: the key is restored.
    let _: () = q(&mut s, &["SET", "k", "v"]).unwrap();
    let (port, fake) = fake_target(vec![b'A'; 4 << 20]);
    assert_eq!(migrate(&mut s, &["127.0.0.1", &port, "k", "0", "2000"]).unwrap(), "OK");
    assert!(!exists(&mut s, "k"));
    fake.join().unwrap();
    // An error line with odd bytes in it is passed on, on one line.
    let _: () = q(&mut s, &["SET", "k", "v"]).unwrap();
    let (port, fake) = fake_target(b"+OK\r\n-ERR bad\rthing\xff\r\n".to_vec());
    let e = migrate(&mut s, &["127.0.0.1", &port, "k", "0", "2000"]).unwrap_err();
    assert!(e.contains("Target instance replied with error: ERR bad thing"), "{e}");
    assert!(exists(&mut s, "k"));
    fake.join().unwrap();
    // The target closes without a word: retried once, then a read error.
    let (port, fake) = fake_target(Vec::new());
    let e = migrate(&mut s, &["127.0.0.1", &port, "k", "0", "2000"]).unwrap_err();
    assert!(e.starts_with("IOERR"), "{e}");
    fake.join().unwrap();
    assert_eq!(q::<String>(&mut s, &["PING"]).unwrap(), "PONG");
}

#[test]
fn command_info_marks_movable_keys() {
    let source = Server::start(2);
    let mut raw = source.raw();
    let info = raw.call(&["COMMAND", "INFO", "MIGRATE"]);
    assert!(info.contains("movablekeys"), "{info}");
    let mut s = source.client();
    let keys: Vec<String> = q(
        &mut s,
        &[
            "COMMAND", "GETKEYS", "MIGRATE", "h", "1", "", "0", "5", "AUTH", "KEYS", "KEYS", "a",
            "b",
        ],
    )
    .unwrap();
    assert_eq!(keys, ["a", "b"]);
    let keys: Vec<String> =
        q(&mut s, &["COMMAND", "GETKEYS", "MIGRATE", "h", "1", "k", "0", "5"]).unwrap();
    assert_eq!(keys, ["k"]);
}
