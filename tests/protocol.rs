//! The wire, with raw sockets: pipelines, RESP3, inline commands, limits,
//! garbage. Protocol errors get Redis's reply and close the connection;
//! command errors do not; nothing a client sends takes the server down.

mod common;
use common::{q, Server};
use std::io::Write;

#[test]
fn a_pipeline_of_thousands_of_commands() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let mut batch = Vec::new();
    for i in 0..10_000 {
        let key = format!("k{i}");
        let val = format!("v{i}");
        batch.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{}\r\n${}\r\n{}\r\n",
                key.len(),
                key,
                val.len(),
                val
            )
            .as_bytes(),
        );
        batch.extend_from_slice(
            format!("*2\r\n$3\r\nGET\r\n${}\r\n{}\r\n", key.len(), key).as_bytes(),
        );
    }
    raw.send(&batch);
    for i in 0..10_000 {
        assert_eq!(raw.read_frame(), b"+OK\r\n");
        let val = format!("v{i}");
        assert_eq!(raw.read_frame(), format!("${}\r\n{}\r\n", val.len(), val).into_bytes());
    }
}

#[test]
fn resp3_after_hello() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let hello = raw.call(&["HELLO", "3"]);
    assert!(hello.starts_with("%7\r\n"), "{hello}");
    assert!(hello.contains("proto\r\n:3\r\n"), "{hello}");
    assert_eq!(raw.call(&["GET", "missing"]), "_\r\n");
    assert_eq!(raw.call(&["HELLO", "2"]).chars().next(), Some('*'));
    assert_eq!(raw.call(&["GET", "missing"]), "$-1\r\n");
    assert!(raw.call(&["HELLO", "4"]).starts_with("-NOPROTO"));
}

#[test]
fn inline_commands_like_telnet() {
    let server = Server::start(2);
    let mut raw = server.raw();
    raw.send(b"SET greeting \"hello world\"\r\nGET greeting\r\n\r\nPING\n");
    assert_eq!(raw.read_frame(), b"+OK\r\n");
    assert_eq!(raw.read_frame(), b"$11\r\nhello world\r\n");
    assert_eq!(raw.read_frame(), b"+PONG\r\n");
    raw.send(b"SET k \"unbalanced\r\n");
    assert_eq!(raw.read_frame(), b"-ERR Protocol error: unbalanced quotes in request\r\n");
    assert!(raw.is_closed());
}

#[test]
fn command_errors_keep_the_connection_open() {
    let server = Server::start(2);
    let mut raw = server.raw();
    assert_eq!(
        raw.call(&["FOO", "a", "b"]),
        "-ERR unknown command 'FOO', with args beginning with: 'a' 'b' \r\n"
    );
    assert_eq!(raw.call(&["GET"]), "-ERR wrong number of arguments for 'get' command\r\n");
    assert_eq!(raw.call(&["PING"]), "+PONG\r\n");
}

#[test]
fn huge_claims_are_refused_and_close_the_connection() {
    let server = Server::start(2);
    for (input, error) in [
        (&b"*2147483648\r\n"[..], "-ERR Protocol error: invalid multibulk length\r\n"),
        (b"*1\r\n$4294967296\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (b"*1\r\n$-5\r\n", "-ERR Protocol error: invalid bulk length\r\n"),
        (b"*3\r\nfoo\r\n", "-ERR Protocol error: expected '$', got 'f'\r\n"),
        (b"*x\r\n", "-ERR Protocol error: invalid multibulk length\r\n"),
    ] {
        let mut raw = server.raw();
        raw.send(input);
        assert_eq!(String::from_utf8_lossy(&raw.read_frame()), error);
        assert!(raw.is_closed(), "connection must close after {error}");
    }
    // A claim just under the limit allocates nothing until data arrives, and
    // the server keeps serving.
    let mut raw = server.raw();
    raw.send(b"*2147483647\r\n$536870912\r\n");
    let mut other = server.raw();
    assert_eq!(other.call(&["PING"]), "+PONG\r\n");
}

#[test]
fn query_buffer_limit_disconnects() {
    let server = Server::start_with(&["--shards", "2", "--client-query-buffer-limit", "1mb"]);
    let mut raw = server.raw();
    raw.send(b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4000000\r\n");
    let chunk = vec![b'x'; 64 * 1024];
    let mut closed = false;
    for _ in 0..40 {
        if raw.stream.write_all(&chunk).is_err() {
            closed = true;
            break;
        }
    }
    assert!(closed || raw.is_closed(), "the server must drop a client over the query buffer limit");
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    let stats: String = q(&mut c, &["INFO", "stats"]).unwrap();
    assert!(stats.contains("client_query_buffer_limit_disconnections:1\r\n"), "{stats}");
}

#[test]
fn large_values_round_trip() {
    let server = Server::start(2);
    let mut c = server.client();
    let big = vec![b'z'; 10 * 1024 * 1024];
    redis::cmd("SET").arg("big").arg(&big).query::<()>(&mut c).unwrap();
    let back: Vec<u8> = redis::cmd("GET").arg("big").query(&mut c).unwrap();
    assert_eq!(back.len(), big.len());
    assert!(back == big);
}

#[test]
fn garbage_never_takes_the_server_down() {
    let mut server = Server::start(2);
    let mut seed = 0x9E37_79B9_7F4A_7C15u64;
    for round in 0..200 {
        let mut raw = server.raw();
        let mut bytes = Vec::new();
        let len = 1 + (round * 37) % 700;
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            // Mix protocol-looking bytes into the noise.
            let b = match seed % 8 {
                0 => b'*',
                1 => b'$',
                2 => b'\r',
                3 => b'\n',
                4 => b'0' + (seed >> 8) as u8 % 10,
                _ => (seed >> 16) as u8,
            };
            bytes.push(b);
        }
        let _ = raw.stream.write_all(&bytes);
    }
    assert!(server.is_running());
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
}

#[test]
fn unauthenticated_clients_get_small_limits_and_noauth() {
    let server = Server::start_with(&["--shards", "2", "--requirepass", "s3cret"]);
    let mut raw = server.raw();
    assert_eq!(raw.call(&["GET", "k"]), "-NOAUTH Authentication required.\r\n");
    assert_eq!(
        raw.call(&["AUTH", "wrong"]),
        "-WRONGPASS invalid username-password pair or user is disabled.\r\n"
    );
    assert_eq!(raw.call(&["AUTH", "s3cret"]), "+OK\r\n");
    assert_eq!(raw.call(&["GET", "k"]), "$-1\r\n");
    let mut raw = server.raw();
    raw.send(b"*11\r\n");
    assert_eq!(raw.read_frame(), b"-ERR Protocol error: unauthenticated multibulk length\r\n");
    assert!(raw.is_closed());
}

#[test]
fn a_slow_reader_of_big_replies_does_not_grow_server_memory() {
    // 200 GETs of 1 MiB values are 200 MiB of replies; the server writes
    // them as it goes and waits for the reader, so its memory stays small.
    // The two keys live on different shards, so both the connection's own
    // shard and a batch sent to the other shard are exercised.
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = common::keys_on_two_shards();
    let big = vec![b'v'; 1 << 20];
    for key in [&a, &b] {
        redis::cmd("SET").arg(key).arg(&big).query::<()>(&mut c).unwrap();
    }
    let mut raw = server.raw();
    let mut pipeline = Vec::new();
    for i in 0..200 {
        let key = if i % 2 == 0 { &a } else { &b };
        pipeline.extend_from_slice(
            format!("*2\r\n$3\r\nGET\r\n${}\r\n{}\r\n", key.len(), key).as_bytes(),
        );
    }
    raw.send(&pipeline);
    std::thread::sleep(std::time::Duration::from_millis(500));
    let info: String = q(&mut c, &["INFO", "memory"]).unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("used_memory in INFO");
    assert!(used < 64 << 20, "server holds {used} bytes while the client is not reading");
    for _ in 0..200 {
        let frame = raw.read_frame();
        assert_eq!(frame.len(), (1 << 20) + "$1048576\r\n".len() + 2);
    }
}
