//! Pub/Sub and keyspace notifications against a real 2-shard server:
//! subscribers and publishers on different cores, RESP2 subscriber mode and
//! RESP3 pushes, patterns, PUBSUB introspection, ordering, and a slow
//! subscriber being disconnected.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::io::Write;
use std::time::{Duration, Instant};

/// One subscriber connection per core: the kernel spreads connections, so
/// keep opening until two land on different cores (CLIENT INFO's laddr is
/// the same, so tell them apart by which core answers CLIENT ID parity…
/// simpler: open several and use them all).
fn subscribers(server: &Server, n: usize) -> Vec<Raw> {
    (0..n).map(|_| server.raw()).collect()
}

#[test]
fn messages_reach_every_subscriber_once_whatever_its_core() {
    let server = Server::start(2);
    let mut subs = subscribers(&server, 6);
    for s in subs.iter_mut() {
        assert_eq!(s.call(&["SUBSCRIBE", "news"]), "*3\r\n$9\r\nsubscribe\r\n$4\r\nnews\r\n:1\r\n");
    }
    let mut publisher = server.client();
    for i in 0..50 {
        let n: i64 = q(&mut publisher, &["PUBLISH", "news", &format!("m{i}")]).unwrap();
        assert_eq!(n, 6);
    }
    for s in subs.iter_mut() {
        for i in 0..50 {
            let payload = format!("m{i}");
            assert_eq!(
                s.read_frame(),
                format!("*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n${}\r\n{payload}\r\n", payload.len())
                    .into_bytes()
            );
        }
    }
    let n: i64 = q(&mut publisher, &["PUBLISH", "nobody", "x"]).unwrap();
    assert_eq!(n, 0);
}

#[test]
fn patterns_shard_channels_and_introspection() {
    let server = Server::start(2);
    let mut a = server.raw();
    let mut b = server.raw();
    assert_eq!(a.call(&["PSUBSCRIBE", "n*"]), "*3\r\n$10\r\npsubscribe\r\n$2\r\nn*\r\n:1\r\n");
    assert_eq!(b.call(&["SUBSCRIBE", "news", "sport"]).matches("subscribe").count(), 1);
    assert!(b.read_frame().starts_with(b"*3\r\n$9\r\nsubscribe\r\n$5\r\nsport\r\n:2"));
    assert_eq!(
        b.call(&["SSUBSCRIBE", "shardy"]),
        "*3\r\n$10\r\nssubscribe\r\n$6\r\nshardy\r\n:1\r\n"
    );
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "news", "hi"]).unwrap(), 2);
    assert_eq!(a.read_frame(), b"*4\r\n$8\r\npmessage\r\n$2\r\nn*\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
    assert_eq!(b.read_frame(), b"*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n");
    assert_eq!(q::<i64>(&mut c, &["SPUBLISH", "shardy", "s"]).unwrap(), 1);
    assert_eq!(b.read_frame(), b"*3\r\n$8\r\nsmessage\r\n$6\r\nshardy\r\n$1\r\ns\r\n");
    let mut channels: Vec<String> = q(&mut c, &["PUBSUB", "CHANNELS"]).unwrap();
    channels.sort();
    assert_eq!(channels, vec!["news", "sport"]);
    let numsub: Vec<redis::Value> = q(&mut c, &["PUBSUB", "NUMSUB", "news", "none"]).unwrap();
    assert_eq!(numsub.len(), 4);
    assert_eq!(q::<i64>(&mut c, &["PUBSUB", "NUMPAT"]).unwrap(), 1);
    assert_eq!(q::<Vec<String>>(&mut c, &["PUBSUB", "SHARDCHANNELS"]).unwrap(), vec!["shardy"]);
    // RESP2 subscriber mode refuses other commands, answers PING specially.
    assert_eq!(
        b.call(&["GET", "x"]),
        "-ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context\r\n"
    );
    assert_eq!(b.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    assert_eq!(b.call(&["UNSUBSCRIBE"]).matches("unsubscribe").count(), 1);
    b.read_frame();
    assert_eq!(b.call(&["SUNSUBSCRIBE"]), "*3\r\n$12\r\nsunsubscribe\r\n$6\r\nshardy\r\n:0\r\n");
    assert_eq!(b.call(&["GET", "x"]), "$-1\r\n");
    assert_eq!(q::<i64>(&mut c, &["PUBLISH", "sport", "x"]).unwrap(), 0);
}

#[test]
fn resp3_pushes_mix_with_replies() {
    let server = Server::start(2);
    let mut s = server.raw();
    s.call(&["HELLO", "3"]);
    assert_eq!(s.call(&["SUBSCRIBE", "c"]), ">3\r\n$9\r\nsubscribe\r\n$1\r\nc\r\n:1\r\n");
    // Any command works while subscribed under RESP3.
    assert_eq!(s.call(&["SET", "k", "v"]), "+OK\r\n");
    let mut p = server.client();
    assert_eq!(q::<i64>(&mut p, &["PUBLISH", "c", "hello"]).unwrap(), 1);
    assert_eq!(s.read_frame(), b">3\r\n$7\r\nmessage\r\n$1\r\nc\r\n$5\r\nhello\r\n");
    assert_eq!(s.call(&["GET", "k"]), "$1\r\nv\r\n");
    // NUMSUB and SHARDNUMSUB stay flat arrays under RESP3, as in Redis.
    assert_eq!(s.call(&["PUBSUB", "NUMSUB", "c"]), "*2\r\n$1\r\nc\r\n:1\r\n");
    assert_eq!(s.call(&["PUBSUB", "SHARDNUMSUB", "c"]), "*2\r\n$1\r\nc\r\n:0\r\n");
}

#[test]
fn one_publishers_messages_arrive_in_order() {
    let server = Server::start(2);
    let mut subs = subscribers(&server, 4);
    for s in subs.iter_mut() {
        s.call(&["SUBSCRIBE", "seq"]);
    }
    let mut p = server.raw();
    let mut pipeline = Vec::new();
    for i in 0..2000 {
        let m = i.to_string();
        pipeline.extend_from_slice(
            format!("*3\r\n$7\r\nPUBLISH\r\n$3\r\nseq\r\n${}\r\n{m}\r\n", m.len()).as_bytes(),
        );
    }
    p.send(&pipeline);
    for _ in 0..2000 {
        assert_eq!(p.read_frame(), b":4\r\n");
    }
    for s in subs.iter_mut() {
        for i in 0..2000 {
            let frame = String::from_utf8(s.read_frame()).unwrap();
            assert!(frame.ends_with(&format!("\r\n{i}\r\n")), "expected {i}, got {frame:?}");
        }
    }
}

#[test]
fn keyspace_notifications_from_both_shards() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let mut s = server.raw();
    assert_eq!(
        s.call(&["PSUBSCRIBE", "__key*__:*"]),
        "*3\r\n$10\r\npsubscribe\r\n$10\r\n__key*__:*\r\n:1\r\n"
    );
    // Off by default: nothing is published.
    q::<()>(&mut c, &["SET", &a, "1"]).unwrap();
    q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "KEA"]).unwrap();
    assert_eq!(
        q::<Vec<String>>(&mut c, &["CONFIG", "GET", "notify-keyspace-events"]).unwrap()[1],
        "AKE"
    );
    q::<()>(&mut c, &["SET", &a, "2"]).unwrap();
    q::<()>(&mut c, &["INCR", &b]).unwrap();
    q::<()>(&mut c, &["DEL", &a]).unwrap();
    let expect = [
        (format!("__keyspace@0__:{a}"), "set".to_string()),
        ("__keyevent@0__:set".to_string(), a.clone()),
        (format!("__keyspace@0__:{b}"), "incrby".to_string()),
        ("__keyevent@0__:incrby".to_string(), b.clone()),
        (format!("__keyspace@0__:{a}"), "del".to_string()),
        ("__keyevent@0__:del".to_string(), a.clone()),
    ];
    for (channel, payload) in expect {
        let frame = String::from_utf8(s.read_frame()).unwrap();
        assert!(
            frame.contains(&channel) && frame.ends_with(&format!("{payload}\r\n")),
            "{frame:?}"
        );
    }
    // Expired keys are notified too, including by the active cycle.
    q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ex"]).unwrap();
    q::<()>(&mut c, &["SET", &b, "v", "PX", "50"]).unwrap();
    let frame = String::from_utf8(s.read_frame()).unwrap();
    assert!(
        frame.contains("__keyevent@0__:expired") && frame.ends_with(&format!("{b}\r\n")),
        "{frame:?}"
    );
    let err = q::<()>(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Q"]).unwrap_err();
    assert!(err.to_string().contains("Invalid event class character"), "{err}");
}

#[test]
fn a_subscriber_that_does_not_read_is_disconnected() {
    let server = Server::start_with(&[
        "--shards",
        "2",
        "--client-output-buffer-limit",
        "pubsub 1mb 256kb 1",
    ]);
    let mut slow = server.raw();
    slow.call(&["SUBSCRIBE", "firehose"]);
    // Never read from `slow` again. Publish ~8 MiB.
    let mut p = server.client();
    let payload = vec![b'x'; 64 * 1024];
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut receivers = 1;
    while receivers > 0 && Instant::now() < deadline {
        receivers =
            redis::cmd("PUBLISH").arg("firehose").arg(&payload).query::<i64>(&mut p).unwrap();
    }
    assert_eq!(receivers, 0, "the slow subscriber was never disconnected");
    assert!(slow.is_closed() || slow.stream.write_all(b"PING\r\n").is_err() || slow.is_closed());
    // Everybody else is fine.
    assert_eq!(q::<String>(&mut p, &["PING"]).unwrap(), "PONG");
}
