//! What the socket path must survive, on the backend this run uses
//! (`RINGDB_IO_BACKEND`, else the server's `auto` choice): clients that
//! vanish mid-request and mid-reply, a client sending one byte at a time,
//! 64 MB values both ways, 5,000 connections at once, and readers that stop
//! reading (disconnected at their output limit, others unaffected).

mod common;
use common::{info_field, keys_on_two_shards, q, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn backend(c: &mut redis::Connection) -> String {
    info_field(c, "server", "io_backend")
}

/// Waits until the server counts `n` connected clients.
fn wait_for_clients(c: &mut redis::Connection, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now: usize = info_field(c, "clients", "connected_clients").parse().unwrap();
        if now == n {
            return;
        }
        assert!(Instant::now() < deadline, "connected_clients stays {now}, expected {n}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn connect(server: &Server) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    s
}

fn read_exactly(s: &mut TcpStream, n: usize) -> Vec<u8> {
    let mut buf = vec![0u8; n];
    s.read_exact(&mut buf).expect("read reply");
    buf
}

#[test]
fn the_backend_is_the_one_asked_for() {
    let server = Server::start(2);
    let mut c = server.client();
    let name = backend(&mut c);
    match std::env::var("RINGDB_IO_BACKEND") {
        Ok(wanted) if wanted != "auto" => assert_eq!(name, wanted),
        _ => assert!(name == "uring" || name == "glommio", "{name}"),
    }
    let fallback = Server::start_with(&["--shards", "2", "--io-backend", "glommio"]);
    let mut c = fallback.client();
    assert_eq!(backend(&mut c), "glommio");
    assert_eq!(q::<String>(&mut c, &["SET", "k", "v"]).unwrap(), "OK");
    let err = q::<String>(&mut c, &["CONFIG", "SET", "io-backend", "uring"]).unwrap_err();
    assert!(err.to_string().contains("can't set immutable config"), "{err}");
}

#[test]
fn a_client_sending_one_byte_at_a_time_is_served() {
    let server = Server::start(2);
    let (k1, k2) = keys_on_two_shards();
    let mut s = connect(&server);
    let mut request = Vec::new();
    for (key, value) in [(&k1, "hello"), (&k2, "world")] {
        request.extend_from_slice(
            format!(
                "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
                key.len(),
                value.len()
            )
            .as_bytes(),
        );
    }
    request.extend_from_slice(format!("GET {k1}\r\nGET {k2}\r\n").as_bytes());
    for byte in &request {
        s.write_all(std::slice::from_ref(byte)).unwrap();
        std::thread::sleep(Duration::from_micros(300));
    }
    let expected = b"+OK\r\n+OK\r\n$5\r\nhello\r\n$5\r\nworld\r\n";
    assert_eq!(read_exactly(&mut s, expected.len()), expected);
}

#[test]
fn clients_gone_mid_request_leave_nothing_behind() {
    let server = Server::start(2);
    let mut c = server.client();
    for i in 0..40 {
        let mut s = connect(&server);
        if i % 2 == 0 {
            // Half a SET: the value never arrives.
            s.write_all(b"*3\r\n$3\r\nSET\r\n$7\r\npartial\r\n$100000\r\nabc").unwrap();
        } else {
            // A 10 MB argument cut off after its first megabyte.
            s.write_all(b"*3\r\n$3\r\nSET\r\n$7\r\npartial\r\n$10000000\r\n").unwrap();
            let _ = s.write_all(&vec![b'x'; 1 << 20]);
        }
        drop(s);
    }
    wait_for_clients(&mut c, 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "partial"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
}

#[test]
fn clients_gone_mid_reply_leave_nothing_behind() {
    let server = Server::start(2);
    let mut c = server.client();
    let (k1, k2) = keys_on_two_shards();
    let big = "v".repeat(8 << 20);
    for k in [&k1, &k2] {
        let _: () = q(&mut c, &["SET", k, &big]).unwrap();
    }
    for i in 0..20 {
        let mut s = connect(&server);
        let key = if i % 2 == 0 { &k1 } else { &k2 };
        for _ in 0..4 {
            s.write_all(format!("GET {key}\r\n").as_bytes()).unwrap();
        }
        // Take a little of the 32 MB of replies, then hang up.
        let _ = read_exactly(&mut s, 1000);
        drop(s);
    }
    wait_for_clients(&mut c, 1);
    assert_eq!(q::<usize>(&mut c, &["STRLEN", &k1]).unwrap(), 8 << 20);
    assert_eq!(q::<String>(&mut c, &["GET", &k2]).unwrap().len(), 8 << 20);
}

#[test]
fn values_of_64_mb_travel_both_ways() {
    let server = Server::start(2);
    let mut c = server.client();
    let value: Vec<u8> = (0..64usize << 20).map(|i| (i * 31 % 251) as u8).collect();
    let (k1, k2) = keys_on_two_shards();
    for key in [&k1, &k2] {
        let _: () = redis::cmd("SET").arg(key).arg(&value).query(&mut c).unwrap();
    }
    for key in [&k1, &k2] {
        let back: Vec<u8> = redis::cmd("GET").arg(key).query(&mut c).unwrap();
        assert!(back == value, "64 MB value of {key} came back different");
    }
    // Both at once, in one pipeline.
    let (a, b): (Vec<u8>, Vec<u8>) =
        redis::pipe().cmd("GET").arg(&k1).cmd("GET").arg(&k2).query(&mut c).unwrap();
    assert!(a == value && b == value);
}

#[test]
fn five_thousand_connections_at_once() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut conns: Vec<TcpStream> = (0..5000).map(|_| connect(&server)).collect();
    for (i, s) in conns.iter_mut().enumerate() {
        s.write_all(format!("SET conn:{i} {i}\r\nPING\r\n").as_bytes()).unwrap();
    }
    for s in conns.iter_mut() {
        assert_eq!(read_exactly(s, 12), b"+OK\r\n+PONG\r\n");
    }
    wait_for_clients(&mut c, 5001);
    assert_eq!(q::<usize>(&mut c, &["DBSIZE"]).unwrap(), 5000);
    let per_shard = common::clients_per_shard(&mut c);
    assert!(per_shard.iter().all(|&n| n > 0), "connections spread over the shards: {per_shard:?}");
    drop(conns);
    wait_for_clients(&mut c, 1);
}

/// A subscriber that stops reading is disconnected at the pubsub limit;
/// the publisher and other clients go on being served meanwhile.
#[test]
fn a_subscriber_that_stops_reading_is_disconnected_at_its_limit() {
    let server = Server::start(2);
    let mut c = server.client();
    let _: () =
        q(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "pubsub 1mb 0 0"]).unwrap();
    let mut sub = connect(&server);
    small_receive_buffer(&sub);
    sub.write_all(b"SUBSCRIBE news\r\n").unwrap();
    let _ = read_exactly(&mut sub, b"*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n".len());
    let message = "m".repeat(100_000);
    let mut other = server.client();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let receivers: i64 = q(&mut c, &["PUBLISH", "news", &message]).unwrap();
        assert_eq!(q::<String>(&mut other, &["PING"]).unwrap(), "PONG");
        if receivers == 0 {
            break;
        }
        assert!(Instant::now() < deadline, "the subscriber was never disconnected");
    }
    wait_for_clients(&mut c, 2);
    let numsub: Vec<redis::Value> = q(&mut c, &["PUBSUB", "NUMSUB", "news"]).unwrap();
    assert_eq!(numsub[1], redis::Value::Int(0));
}

/// A shard whose own sockets stay idle while another core keeps handing
/// its connection replies (here, Pub/Sub messages published on the other
/// shard): its network driver is woken 40,000 times without its ring
/// signalling. It must keep going (it once re-polled its parked eventfd
/// read on every such wake-up, and glommio piles a waker up per poll of a
/// read: at 32,768 the task's reference count overflowed and the core
/// panicked).
#[test]
fn an_idle_shard_woken_by_another_core_many_times_keeps_serving() {
    let server = Server::start(2);
    let mut admin = server.client();
    let mut keep = Vec::new();
    let mut sub = common::raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut publisher = common::raw_on_shard(&server, &mut admin, 1, &mut keep);
    drop(keep);
    sub.send(b"SUBSCRIBE news\r\n");
    assert!(sub.read_frame().starts_with(b"*3\r\n$9\r\nsubscribe"));
    const MESSAGES: usize = 40_000;
    for i in 0..MESSAGES {
        assert_eq!(publisher.call(&["PUBLISH", "news", &i.to_string()]), ":1\r\n", "message {i}");
        if i % 1000 == 999 {
            // Read what arrived so far, so the subscriber stays far below
            // its output limit.
            for j in i - 999..=i {
                let frame = sub.read_frame();
                let tail = format!("${}\r\n{j}\r\n", j.to_string().len());
                assert!(frame.ends_with(tail.as_bytes()), "message {j}");
            }
        }
    }
    assert_eq!(sub.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(q::<String>(&mut admin, &["PING"]).unwrap(), "PONG");
}

/// A client that pipelines big replies and never reads them: with a normal
/// class limit it is disconnected once that much is unsent (replies the
/// kernel has not taken are visible on the uring path; glommio's writes
/// wait instead, and the client is held back by TCP).
#[test]
fn a_reader_that_stops_reading_is_disconnected_at_the_normal_limit() {
    let server = Server::start(2);
    let mut c = server.client();
    if backend(&mut c) != "uring" {
        return;
    }
    let _: () =
        q(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "normal 2mb 0 0"]).unwrap();
    let _: () = q(&mut c, &["SET", "big", &"b".repeat(1 << 20)]).unwrap();
    let mut reader = connect(&server);
    small_receive_buffer(&reader);
    let request = "GET big\r\n".repeat(200);
    // The server may close while we still write: that is the point.
    let _ = reader.write_all(request.as_bytes());
    wait_for_clients(&mut c, 1);
    let mut other = server.client();
    assert_eq!(q::<usize>(&mut other, &["STRLEN", "big"]).unwrap(), 1 << 20);
}

/// Keeps what the kernel buffers for a reader that stops reading small, so
/// that the server's own buffers fill quickly.
fn small_receive_buffer(s: &TcpStream) {
    use std::os::fd::AsRawFd;
    let size: libc::c_int = 64 * 1024;
    // SAFETY: setsockopt on our own socket with a valid int argument.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
}
