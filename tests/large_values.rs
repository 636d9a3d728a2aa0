//! Large string values, which leave the keyspace by reference (spliced into
//! the reply stream, sent with vectored sends on the uring path): what a
//! client sees must not change. GETs of 1 MB and 64 MB values on both
//! shards, pipelines mixing them with small replies, in-place changes after
//! a large SET (copy-on-write, also while a reply of the old value is still
//! queued), a reader that stops reading, DUMP/RESTORE and DEBUG RELOAD.

mod common;
use common::{keys_on_two_shards, q, Server};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// A value of `len` bytes whose content depends on `seed` and position, so
/// that a piece out of place or from another value shows.
fn value(len: usize, seed: u8) -> Vec<u8> {
    (0..len).map(|i| (i * 31 % 251) as u8 ^ seed).collect()
}

fn set(c: &mut redis::Connection, key: &str, value: &[u8]) {
    let _: () = redis::cmd("SET").arg(key).arg(value).query(c).unwrap();
}

fn get(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn resp_command(args: &[&[u8]]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn bulk(value: &[u8]) -> Vec<u8> {
    let mut out = format!("${}\r\n", value.len()).into_bytes();
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
    out
}

fn connect(server: &Server) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", server.port)).expect("connect");
    s.set_nodelay(true).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    s
}

/// Sends `requests` from one thread while reading exactly `expected.len()`
/// bytes on this one, and compares (a pipeline of large replies would
/// otherwise fill both directions' buffers and stall).
fn pipeline(server: &Server, requests: Vec<u8>, expected: &[u8]) {
    let mut s = connect(server);
    let mut writer = s.try_clone().unwrap();
    let sender = std::thread::spawn(move || writer.write_all(&requests).unwrap());
    let mut got = vec![0u8; expected.len()];
    s.read_exact(&mut got).expect("every reply");
    sender.join().unwrap();
    if got != expected {
        let at = got.iter().zip(expected).position(|(a, b)| a != b).unwrap_or(0);
        panic!(
            "replies differ from byte {at} of {}: got {:?}, expected {:?}",
            expected.len(),
            String::from_utf8_lossy(&got[at.saturating_sub(20)..(at + 40).min(got.len())]),
            String::from_utf8_lossy(&expected[at.saturating_sub(20)..(at + 40).min(got.len())]),
        );
    }
}

#[test]
fn gets_of_1_mb_and_64_mb_values_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (k1, k2) = keys_on_two_shards();
    for (len, seed) in [(1usize << 20, 1u8), (64 << 20, 2)] {
        let v1 = value(len, seed);
        let v2 = value(len, seed + 100);
        set(&mut c, &k1, &v1);
        set(&mut c, &k2, &v2);
        assert!(get(&mut c, &k1) == v1, "{len} bytes of {k1} came back different");
        assert!(get(&mut c, &k2) == v2, "{len} bytes of {k2} came back different");
        // Twice in one pipeline, from both shards.
        let (a, b, a2): (Vec<u8>, Vec<u8>, Vec<u8>) =
            redis::pipe().get(&k1).get(&k2).get(&k1).query(&mut c).unwrap();
        assert!(a == v1 && b == v2 && a2 == v1, "{len}-byte pipeline");
        for key in [&k1, &k2] {
            assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", key]).unwrap(), "raw");
            assert_eq!(q::<usize>(&mut c, &["STRLEN", key]).unwrap(), len);
            let usage: usize = q(&mut c, &["MEMORY", "USAGE", key]).unwrap();
            assert!(usage >= len, "MEMORY USAGE {usage} for {len} bytes");
        }
        let tail: Vec<u8> = redis::cmd("GETRANGE").arg(&k2).arg(-5).arg(-1).query(&mut c).unwrap();
        assert_eq!(tail, v2[len - 5..]);
    }
    // The other commands that return the stored value.
    let v = value(1 << 20, 7);
    for key in [&k1, &k2] {
        set(&mut c, key, &v);
        let back: Vec<u8> =
            redis::cmd("GETEX").arg(key).arg("PX").arg(100_000).query(&mut c).unwrap();
        assert!(back == v, "GETEX {key}");
        let back: Vec<u8> = redis::cmd("SET").arg(key).arg("x").arg("GET").query(&mut c).unwrap();
        assert!(back == v, "SET GET {key}");
        set(&mut c, key, &v);
        let back: Vec<u8> = redis::cmd("GETSET").arg(key).arg("y").query(&mut c).unwrap();
        assert!(back == v, "GETSET {key}");
        set(&mut c, key, &v);
        let back: Vec<u8> = redis::cmd("GETDEL").arg(key).query(&mut c).unwrap();
        assert!(back == v, "GETDEL {key}");
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
    }
}

/// Large replies (from both shards, so some come back from the other
/// core) interleaved with small ones in one pipeline: every reply in
/// request order, byte for byte, and none of those CLIENT REPLY SKIP
/// drops.
#[test]
fn pipelined_large_gets_keep_their_order_among_small_replies() {
    let server = Server::start(2);
    let mut c = server.client();
    let (k1, k2) = keys_on_two_shards();
    let big1 = value(200_000, 3);
    let big2 = value(70_000, 4);
    // At the splicing threshold (ringdb_protocol::SPLICE_MIN), and below.
    let edge = value(8 * 1024, 5);
    let under = value(8 * 1024 - 1, 6);
    set(&mut c, &k1, &big1);
    set(&mut c, &k2, &big2);
    set(&mut c, "edge", &edge);
    set(&mut c, "under", &under);
    set(&mut c, "small", b"tiny");
    let (mut requests, mut expected) = (Vec::new(), Vec::new());
    for i in 0..60 {
        let n = i.to_string();
        let steps: [(Vec<u8>, Vec<u8>); 8] = [
            (resp_command(&[b"GET", k1.as_bytes()]), bulk(&big1)),
            (resp_command(&[b"PING"]), b"+PONG\r\n".to_vec()),
            (resp_command(&[b"GET", k2.as_bytes()]), bulk(&big2)),
            (resp_command(&[b"GET", b"small"]), bulk(b"tiny")),
            (resp_command(&[b"INCR", b"counter"]), format!(":{}\r\n", i + 1).into_bytes()),
            (resp_command(&[b"GET", b"edge"]), bulk(&edge)),
            (resp_command(&[b"GET", b"under"]), bulk(&under)),
            (resp_command(&[b"ECHO", n.as_bytes()]), bulk(n.as_bytes())),
        ];
        for (request, reply) in steps {
            requests.extend(request);
            expected.extend(reply);
        }
        if i % 10 == 0 {
            // Replies dropped by CLIENT REPLY SKIP take their values along.
            for key in [&k1, &k2, "edge"] {
                requests.extend(resp_command(&[b"CLIENT", b"REPLY", b"SKIP"]));
                requests.extend(resp_command(&[b"GET", key.as_bytes()]));
            }
        }
    }
    pipeline(&server, requests, &expected);
}

/// In-place changes after a large SET work on a copy: replies of the old
/// value queued before the change (in the same pipeline) still carry the
/// old bytes, and later reads see the change.
#[test]
fn changes_after_a_large_set_copy_the_value_first() {
    let server = Server::start(2);
    let mut c = server.client();
    let (k1, k2) = keys_on_two_shards();
    let v = value(1 << 20, 9);
    for key in [&k1, &k2] {
        set(&mut c, key, &v);
        let k = key.as_bytes();
        let mut changed = v.clone();
        changed.extend_from_slice(b"tail");
        let mut requests = resp_command(&[b"GET", k]);
        requests.extend(resp_command(&[b"APPEND", k, b"tail"]));
        requests.extend(resp_command(&[b"GET", k]));
        requests.extend(resp_command(&[b"SETRANGE", k, b"0", b"XY"]));
        requests.extend(resp_command(&[b"GETRANGE", k, b"0", b"3"]));
        requests.extend(resp_command(&[b"SETBIT", k, b"16", b"1"]));
        requests.extend(resp_command(&[b"INCR", k]));
        let mut expected = bulk(&v);
        expected.extend(format!(":{}\r\n", changed.len()).as_bytes());
        expected.extend(bulk(&changed));
        expected.extend(format!(":{}\r\n", changed.len()).as_bytes());
        changed[..2].copy_from_slice(b"XY");
        expected.extend(bulk(&changed[..4]));
        expected.extend(format!(":{}\r\n", changed[2] >> 7).as_bytes());
        changed[2] |= 0x80;
        expected.extend(b"-ERR value is not an integer or out of range\r\n");
        pipeline(&server, requests, &expected);
        assert!(get(&mut c, key) == changed, "{key} after the changes");
        assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", key]).unwrap(), "raw");
        // A new large SET over the changed value, then INCRBYFLOAT's error.
        set(&mut c, key, &v);
        let e = q::<String>(&mut c, &["INCRBYFLOAT", key, "1"]).unwrap_err();
        assert!(e.to_string().contains("value is not a valid float"), "{e}");
        assert!(get(&mut c, key) == v);
    }
}

/// A reader that pipelines large GETs (from both shards) and never reads
/// is disconnected at the normal output limit on the uring path: the
/// values queued by reference count towards it. Others are unaffected.
#[test]
fn a_reader_of_large_values_that_stops_reading_is_disconnected() {
    let server = Server::start(2);
    let mut c = server.client();
    let backend: String = q::<String>(&mut c, &["INFO", "server"])
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("io_backend:").map(|b| b.trim().to_string()))
        .unwrap();
    if backend != "uring" {
        return;
    }
    let _: () =
        q(&mut c, &["CONFIG", "SET", "client-output-buffer-limit", "normal 2mb 0 0"]).unwrap();
    let (k1, k2) = keys_on_two_shards();
    set(&mut c, &k1, &value(512 * 1024, 11));
    set(&mut c, &k2, &value(512 * 1024, 12));
    let mut reader = connect(&server);
    let size: libc::c_int = 64 * 1024;
    // SAFETY: setsockopt on our own socket with a valid int argument.
    unsafe {
        use std::os::fd::AsRawFd;
        libc::setsockopt(
            reader.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUF,
            (&size as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    let request = format!("GET {k1}\r\nGET {k2}\r\n").repeat(100);
    let _ = reader.write_all(request.as_bytes());
    // Counted before the connection is closed; waiting for the count (not
    // for connected_clients to drop) cannot mistake a reader the server
    // has not accepted yet for one it has dropped.
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let stats: String = q(&mut c, &["INFO", "stats"]).unwrap();
        if stats.contains("client_output_buffer_limit_disconnections:1\r\n") {
            break;
        }
        assert!(Instant::now() < deadline, "the reader was never disconnected");
        std::thread::sleep(Duration::from_millis(20));
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    while !q::<String>(&mut c, &["INFO", "clients"]).unwrap().contains("connected_clients:1\r") {
        assert!(Instant::now() < deadline, "the reader's connection stayed");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(q::<usize>(&mut c, &["STRLEN", &k2]).unwrap(), 512 * 1024);
}

#[test]
fn large_values_survive_dump_restore_and_debug_reload() {
    let server = Server::start(2);
    let mut c = server.client();
    let (k1, k2) = keys_on_two_shards();
    let v = value(3 << 20, 13);
    set(&mut c, &k1, &v);
    let dump: Vec<u8> = redis::cmd("DUMP").arg(&k1).query(&mut c).unwrap();
    let _: () = redis::cmd("RESTORE").arg(&k2).arg(0).arg(&dump).query(&mut c).unwrap();
    assert!(get(&mut c, &k2) == v, "RESTOREd on the other shard");
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", &k2]).unwrap(), "raw");
    let _: () = q(&mut c, &["DEBUG", "RELOAD"]).unwrap();
    for key in [&k1, &k2] {
        assert!(get(&mut c, key) == v, "{key} after DEBUG RELOAD");
        assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", key]).unwrap(), "raw");
    }
    // A change after the reload copies the loaded value first.
    assert_eq!(q::<usize>(&mut c, &["APPEND", &k1, "!"]).unwrap(), v.len() + 1);
    assert!(get(&mut c, &k2) == v);
}
