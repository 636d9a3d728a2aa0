//! Client-side caching (CLIENT TRACKING) against a real 2-shard server:
//! keys on both shards, so every test has a reader whose key lives on
//! another core than its connection; RESP3 pushes, RESP2 redirection to a
//! `__redis__:invalidate` subscriber, BCAST prefixes, OPTIN/OPTOUT with
//! CLIENT CACHING, NOLOOP, flushes, the table limit, a redirect target
//! going away, and every error text of Redis 7.0.
//!
//! A "nothing was sent" check is always followed by a change that must be
//! sent: the next frame then proves nothing came before it.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::time::Duration;

/// An `invalidate` push (RESP3) for `keys`.
fn invalidate(keys: &[&str]) -> Vec<u8> {
    let mut out = format!(">2\r\n$10\r\ninvalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        out.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    out.into_bytes()
}

/// The same invalidation as a RESP2 message on `__redis__:invalidate`.
fn message(keys: &[&str]) -> Vec<u8> {
    let mut out =
        format!("*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n*{}\r\n", keys.len());
    for k in keys {
        out.push_str(&format!("${}\r\n{k}\r\n", k.len()));
    }
    out.into_bytes()
}

fn text(frame: Vec<u8>) -> String {
    String::from_utf8_lossy(&frame).into_owned()
}

/// A RESP3 connection with tracking turned on with `options`.
fn resp3_tracker(server: &Server, options: &[&str]) -> Raw {
    let mut r = server.raw();
    assert!(r.call(&["HELLO", "3"]).starts_with('%'));
    let mut args = vec!["CLIENT", "TRACKING", "ON"];
    args.extend_from_slice(options);
    assert_eq!(r.call(&args), "+OK\r\n");
    r
}

fn info_field(con: &mut redis::Connection, name: &str) -> String {
    common::info_field(con, "everything", name)
}

fn err(con: &mut redis::Connection, args: &[&str]) -> String {
    match q::<redis::Value>(con, args) {
        Err(e) => format!("{} {}", e.code().unwrap_or(""), e.detail().unwrap_or("")),
        Ok(v) => panic!("{args:?} succeeded: {v:?}"),
    }
}

/// Two keys on different shards with a common prefix.
fn prefixed_on_two_shards(prefix: &str) -> (String, String) {
    let map = ringdb_engine::SlotMap::new(2);
    let mut found: [Option<String>; 2] = [None, None];
    for i in 0.. {
        let k = format!("{prefix}{i}");
        let shard = map.shard_of_key(k.as_bytes()).0 as usize;
        found[shard].get_or_insert(k);
        if let [Some(a), Some(b)] = &found {
            return (a.clone(), b.clone());
        }
    }
    unreachable!()
}

#[test]
fn default_mode_invalidates_each_read_key_once_on_both_shards() {
    let server = Server::start(2);
    let (k0, k1) = keys_on_two_shards();
    let mut w = server.client();
    let _: () = q(&mut w, &["MSET", &k0, "1", &k1, "1", "unread", "1"]).unwrap();
    let mut r = resp3_tracker(&server, &[]);
    assert_eq!(r.call(&["MGET", &k0, &k1]), "*2\r\n$1\r\n1\r\n$1\r\n1\r\n");
    assert_eq!(r.call(&["GET", &k1]), "$1\r\n1\r\n");
    assert_eq!(info_field(&mut w, "tracking_clients"), "1");
    assert_eq!(info_field(&mut w, "tracking_total_keys"), "2");
    assert_eq!(info_field(&mut w, "tracking_total_items"), "2");
    let list: String = q(&mut w, &["CLIENT", "LIST"]).unwrap();
    assert!(list.lines().any(|l| l.contains(" flags=t ") && l.contains(" redir=0 ")), "{list}");

    // A key nobody read sends nothing; a read key is sent once.
    let _: () = q(&mut w, &["SET", "unread", "2"]).unwrap();
    let _: () = q(&mut w, &["SET", &k0, "2"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k0]));
    let _: () = q(&mut w, &["SET", &k0, "3"]).unwrap();
    let _: i64 = q(&mut w, &["DEL", &k1]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k1]));
    assert_eq!(info_field(&mut w, "tracking_total_keys"), "0");

    // Other writes than SET: EXPIRE, a hash field, a cross-shard RENAME.
    let _: () = q(&mut w, &["HSET", &k1, "f", "v"]).unwrap();
    assert_eq!(r.call(&["HGET", &k1, "f"]), "$1\r\nv\r\n");
    assert_eq!(r.call(&["GET", &k0]), "$1\r\n3\r\n");
    let _: i64 = q(&mut w, &["HDEL", &k1, "f"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k1]));
    let _: () = q(&mut w, &["RENAME", &k0, &k1]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k0]));

    // The writer's own invalidation comes after its reply.
    assert_eq!(r.call(&["GET", &k1]), "$1\r\n3\r\n");
    assert_eq!(r.call(&["SET", &k1, "4"]), "+OK\r\n");
    assert_eq!(r.read_frame(), invalidate(&[&k1]));

    // Turning tracking off: reads are no longer remembered, and keys read
    // before are not sent.
    assert_eq!(r.call(&["GET", &k1]), "$1\r\n4\r\n");
    assert_eq!(r.call(&["CLIENT", "TRACKING", "OFF"]), "+OK\r\n");
    let _: () = q(&mut w, &["SET", &k1, "5"]).unwrap();
    assert_eq!(info_field(&mut w, "tracking_clients"), "0");
    assert_eq!(r.call(&["PING"]), "+PONG\r\n");
}

#[test]
fn resp2_clients_redirect_to_a_subscriber_and_learn_when_it_is_gone() {
    let server = Server::start(2);
    let (k0, k1) = keys_on_two_shards();
    let mut target = server.raw();
    let target_id = target.call(&["CLIENT", "ID"]).trim_start_matches(':').trim().to_string();
    assert!(target.call(&["SUBSCRIBE", "__redis__:invalidate"]).contains("subscribe"));
    let mut w = server.client();
    let _: () = q(&mut w, &["MSET", &k0, "1", &k1, "1"]).unwrap();

    // Several trackers: they land on both cores.
    let mut trackers: Vec<redis::Connection> = (0..4).map(|_| server.client()).collect();
    for t in trackers.iter_mut() {
        let _: () = q(t, &["CLIENT", "TRACKING", "on", "REDIRECT", &target_id]).unwrap();
        assert_eq!(q::<i64>(t, &["CLIENT", "GETREDIR"]).unwrap().to_string(), target_id);
    }
    let list: String = q(&mut w, &["CLIENT", "LIST"]).unwrap();
    assert_eq!(list.matches(&format!(" redir={target_id} ")).count(), 4, "{list}");
    let _: Vec<String> = q(&mut trackers[0], &["MGET", &k0, &k1]).unwrap();
    let _: () = q(&mut w, &["SET", &k0, "2"]).unwrap();
    assert_eq!(target.read_frame(), message(&[&k0]));
    let _: () = q(&mut w, &["SET", &k1, "2"]).unwrap();
    assert_eq!(target.read_frame(), message(&[&k1]));
    // Every tracker that read a key gets its own message.
    for t in trackers.iter_mut() {
        let _: String = q(t, &["GET", &k1]).unwrap();
    }
    let _: () = q(&mut w, &["SET", &k1, "3"]).unwrap();
    for _ in 0..4 {
        assert_eq!(target.read_frame(), message(&[&k1]));
    }

    // A flush invalidates everything: one null per tracking client.
    let _: () = q(&mut w, &["FLUSHALL"]).unwrap();
    for _ in 0..4 {
        assert_eq!(
            text(target.read_frame()),
            "*3\r\n$7\r\nmessage\r\n$20\r\n__redis__:invalidate\r\n$-1\r\n"
        );
    }
    let _: () = q(&mut w, &["FLUSHDB"]).unwrap();
    for _ in 0..4 {
        assert!(text(target.read_frame()).ends_with("$-1\r\n"));
    }

    // The target leaves: a RESP2 tracker only gets the flag, a RESP3 one a
    // push.
    assert_eq!(target.call(&["QUIT"]), "+OK\r\n");
    let mut r3 = server.raw();
    assert!(r3.call(&["HELLO", "3"]).starts_with('%'));
    // Redis checks the target when tracking is turned on: it is gone.
    assert_eq!(
        r3.call(&["CLIENT", "TRACKING", "on", "REDIRECT", &target_id]),
        "-ERR The client ID you want redirect to does not exist\r\n"
    );
    let _: () = q(&mut w, &["SET", &k0, "1"]).unwrap();
    let _: String = q(&mut trackers[1], &["GET", &k0]).unwrap();
    let _: () = q(&mut w, &["SET", &k0, "2"]).unwrap();
    let mut broken = false;
    for _ in 0..50 {
        let list: String = q(&mut w, &["CLIENT", "LIST"]).unwrap();
        if list.lines().any(|l| l.contains(" flags=tR ")) {
            broken = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(broken, "no client flagged R");
    let info: redis::Value = q(&mut trackers[1], &["CLIENT", "TRACKINGINFO"]).unwrap();
    assert!(format!("{info:?}").contains("broken_redirect"), "{info:?}");
}

#[test]
fn resp3_tracker_gets_tracking_redir_broken_when_its_target_leaves() {
    let server = Server::start(2);
    let (k0, k1) = keys_on_two_shards();
    let mut w = server.client();
    let _: () = q(&mut w, &["MSET", &k0, "1", &k1, "1"]).unwrap();
    for key in [&k0, &k1] {
        // A RESP3 target needs no subscription.
        let mut target = server.raw();
        assert!(target.call(&["HELLO", "3"]).starts_with('%'));
        let id = target.call(&["CLIENT", "ID"]).trim_start_matches(':').trim().to_string();
        let mut r = resp3_tracker(&server, &["REDIRECT", &id]);
        assert_eq!(r.call(&["GET", key]), "$1\r\n1\r\n");
        let _: () = q(&mut w, &["SET", key, "1"]).unwrap();
        assert_eq!(target.read_frame(), invalidate(&[key]));
        assert_eq!(r.call(&["GET", key]), "$1\r\n1\r\n");
        assert_eq!(target.call(&["QUIT"]), "+OK\r\n");
        let _: () = q(&mut w, &["SET", key, "1"]).unwrap();
        assert_eq!(
            text(r.read_frame()),
            format!(">2\r\n$21\r\ntracking-redir-broken\r\n:{id}\r\n")
        );
        let info = r.call(&["CLIENT", "TRACKINGINFO"]);
        assert!(info.contains("~2\r\n$2\r\non\r\n$15\r\nbroken_redirect\r\n"), "{info}");
        assert!(info.contains(&format!("$8\r\nredirect\r\n:{id}\r\n")), "{info}");
    }
}

#[test]
fn bcast_sends_changes_under_each_prefix_from_both_shards() {
    let server = Server::start(2);
    let (a0, a1) = prefixed_on_two_shards("a:");
    let (b0, b1) = prefixed_on_two_shards("b:");
    let mut r = resp3_tracker(&server, &["BCAST", "PREFIX", "a:", "PREFIX", "b:", "NOLOOP"]);
    let mut w = server.client();
    assert_eq!(info_field(&mut w, "tracking_total_prefixes"), "2");
    let info = r.call(&["CLIENT", "TRACKINGINFO"]);
    assert!(info.contains("~3\r\n$2\r\non\r\n$5\r\nbcast\r\n$6\r\nnoloop\r\n"), "{info}");
    assert!(info.contains("*2\r\n$2\r\na:\r\n$2\r\nb:\r\n"), "{info}");

    // Keys under no prefix send nothing; each key under one is sent, read
    // or not.
    let _: () = q(&mut w, &["SET", "c:1", "x"]).unwrap();
    let _: () = q(&mut w, &["SET", &a0, "x"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&a0]));
    let _: () = q(&mut w, &["SET", &a1, "x"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&a1]));
    // A transaction on one shard sends one message per prefix.
    let tag_a = "a:{t}1";
    let tag_b = "b:{t}1";
    let _: redis::Value = redis::pipe()
        .atomic()
        .cmd("SET")
        .arg(tag_a)
        .arg("1")
        .cmd("SET")
        .arg("a:{t}2")
        .arg("1")
        .cmd("SET")
        .arg(tag_b)
        .arg("1")
        .query(&mut w)
        .unwrap();
    assert_eq!(r.read_frame(), invalidate(&[tag_a, "a:{t}2"]));
    assert_eq!(r.read_frame(), invalidate(&[tag_b]));
    // NOLOOP: its own changes are not sent back; expiry is nobody's.
    assert_eq!(r.call(&["SET", &b0, "x", "PX", "50"]), "+OK\r\n");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(r.read_frame(), invalidate(&[&b0]));
    assert_eq!(r.call(&["SET", &b1, "x"]), "+OK\r\n");
    let _: () = q(&mut w, &["SET", &b0, "y"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&b0]));

    // More prefixes may be added; overlapping ones may not.
    assert_eq!(r.call(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "c:"]), "+OK\r\n");
    assert_eq!(
        r.call(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "a"]),
        "-ERR Prefix 'a' overlaps with an existing prefix 'a:'. Prefixes for a single client must not overlap.\r\n"
    );
    assert_eq!(
        r.call(&["CLIENT", "TRACKING", "ON", "BCAST", "PREFIX", "d:1", "PREFIX", "d:"]),
        "-ERR Prefix 'd:1' overlaps with another provided prefix 'd:'. Prefixes for a single client must not overlap.\r\n"
    );
    assert_eq!(
        r.call(&["CLIENT", "TRACKING", "ON"]),
        "-ERR You can't switch BCAST mode on/off before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"
    );
    assert_eq!(info_field(&mut w, "tracking_total_prefixes"), "3");
    let _: () = q(&mut w, &["SET", "c:1", "z"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&["c:1"]));
    // Leaving removes the prefixes from every shard.
    drop(r);
    let mut gone = false;
    for _ in 0..50 {
        if info_field(&mut w, "tracking_total_prefixes") == "0" {
            gone = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(gone);
    assert_eq!(info_field(&mut w, "tracking_clients"), "0");
}

#[test]
fn optin_and_optout_follow_client_caching() {
    let server = Server::start(2);
    let (k0, k1) = keys_on_two_shards();
    let mut w = server.client();
    let _: () = q(&mut w, &["MSET", &k0, "1", &k1, "1"]).unwrap();

    let mut r = resp3_tracker(&server, &["OPTIN"]);
    assert_eq!(r.call(&["GET", &k0]), "$1\r\n1\r\n");
    assert_eq!(r.call(&["CLIENT", "CACHING", "yes"]), "+OK\r\n");
    let info = r.call(&["CLIENT", "TRACKINGINFO"]);
    assert!(info.contains("~3\r\n$2\r\non\r\n$5\r\noptin\r\n$11\r\ncaching-yes\r\n"), "{info}");
    assert_eq!(r.call(&["GET", &k1]), "$1\r\n1\r\n");
    let _: () = q(&mut w, &["SET", &k0, "2"]).unwrap();
    let _: () = q(&mut w, &["SET", &k1, "2"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k1]));
    // CACHING covers one command, or one whole transaction.
    assert_eq!(r.call(&["CLIENT", "CACHING", "yes"]), "+OK\r\n");
    assert_eq!(r.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(r.call(&["GET", &k0]), "+QUEUED\r\n");
    assert_eq!(r.call(&["GET", &k1]), "+QUEUED\r\n");
    assert_eq!(r.call(&["EXEC"]), "*2\r\n$1\r\n2\r\n$1\r\n2\r\n");
    assert_eq!(r.call(&["GET", &k0]), "$1\r\n2\r\n");
    let _: () = q(&mut w, &["MSET", &k0, "3", &k1, "3"]).unwrap();
    let mut got = vec![text(r.read_frame()), text(r.read_frame())];
    got.sort();
    let mut want = vec![text(invalidate(&[&k0])), text(invalidate(&[&k1]))];
    want.sort();
    assert_eq!(got, want);
    // The third GET (after EXEC) was not cached: the next change of k0
    // sends nothing, k1 read with CACHING does.
    assert_eq!(r.call(&["CLIENT", "CACHING", "yes"]), "+OK\r\n");
    assert_eq!(r.call(&["GET", &k1]), "$1\r\n3\r\n");
    let _: () = q(&mut w, &["SET", &k0, "4"]).unwrap();
    let _: () = q(&mut w, &["SET", &k1, "4"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k1]));
    assert_eq!(
        r.call(&["CLIENT", "CACHING", "no"]),
        "-ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.\r\n"
    );
    assert_eq!(
        r.call(&["CLIENT", "TRACKING", "on", "OPTOUT"]),
        "-ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, and then re-enabling it with a different mode.\r\n"
    );

    assert_eq!(r.call(&["CLIENT", "TRACKING", "off"]), "+OK\r\n");
    assert_eq!(r.call(&["CLIENT", "TRACKING", "on", "OPTOUT"]), "+OK\r\n");
    assert_eq!(r.call(&["CLIENT", "CACHING", "no"]), "+OK\r\n");
    assert_eq!(r.call(&["GET", &k0]), "$1\r\n4\r\n");
    assert_eq!(r.call(&["GET", &k1]), "$1\r\n4\r\n");
    let _: () = q(&mut w, &["SET", &k0, "5"]).unwrap();
    let _: () = q(&mut w, &["SET", &k1, "5"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k1]));
    assert_eq!(
        r.call(&["CLIENT", "CACHING", "yes"]),
        "-ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.\r\n"
    );
    assert_eq!(r.call(&["CLIENT", "CACHING", "maybe"]), "-ERR syntax error\r\n");

    // Tracking and CACHING given inside a transaction: they apply to its
    // later commands, and CACHING ends with it.
    let mut t = server.raw();
    assert!(t.call(&["HELLO", "3"]).starts_with('%'));
    for line in
        [&["MULTI"][..], &["CLIENT", "TRACKING", "on", "OPTIN"], &["CLIENT", "CACHING", "yes"]]
    {
        assert!(t.call(line).starts_with('+'));
    }
    assert_eq!(t.call(&["GET", &k0]), "+QUEUED\r\n");
    assert_eq!(t.call(&["EXEC"]), "*3\r\n+OK\r\n+OK\r\n$1\r\n5\r\n");
    assert_eq!(t.call(&["GET", &k1]), "$1\r\n5\r\n");
    let _: () = q(&mut w, &["MSET", &k0, "6", &k1, "6"]).unwrap();
    assert_eq!(t.read_frame(), invalidate(&[&k0]));
    assert_eq!(t.call(&["CLIENT", "CACHING", "yes"]), "+OK\r\n");
    assert_eq!(t.call(&["GET", "marker"]), "_\r\n");
    let _: () = q(&mut w, &["SET", "marker", "1"]).unwrap();
    assert_eq!(t.read_frame(), invalidate(&["marker"]));
    assert_eq!(r.call(&["CLIENT", "TRACKING", "off"]), "+OK\r\n");
    assert_eq!(
        r.call(&["CLIENT", "CACHING", "yes"]),
        "-ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or OPTOUT mode enabled\r\n"
    );
}

#[test]
fn noloop_and_cross_shard_commands() {
    let server = Server::start(2);
    let (k0, k1) = keys_on_two_shards();
    let mut w = server.client();
    let _: () = q(&mut w, &["MSET", &k0, "1", &k1, "1"]).unwrap();
    let mut r = resp3_tracker(&server, &["NOLOOP"]);
    assert_eq!(r.call(&["MGET", &k0, &k1]), "*2\r\n$1\r\n1\r\n$1\r\n1\r\n");
    // Its own writes, on both shards, are not sent back (and the keys are
    // no longer tracked).
    assert_eq!(r.call(&["MSET", &k0, "2", &k1, "2"]), "+OK\r\n");
    let _: () = q(&mut w, &["SET", &k0, "3"]).unwrap();
    assert_eq!(r.call(&["GET", &k1]), "$1\r\n2\r\n");
    let _: () = q(&mut w, &["SET", &k1, "3"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&k1]));

    // A gathered cross-shard read remembers its keys on their owners; a
    // gathered write by the reader itself is NOLOOP too.
    let (s0, s1) = prefixed_on_two_shards("set:");
    let _: i64 = q(&mut w, &["SADD", &s0, "a"]).unwrap();
    let _: i64 = q(&mut w, &["SADD", &s1, "b"]).unwrap();
    assert_eq!(r.call(&["SINTERCARD", "2", &s0, &s1]), ":0\r\n");
    assert_eq!(r.call(&["SMOVE", &s0, &s1, "a"]), ":1\r\n");
    assert_eq!(r.call(&["SCARD", &s1]), ":2\r\n");
    let _: i64 = q(&mut w, &["SADD", &s1, "c"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&[&s1]));
    assert_eq!(r.call(&["SINTERCARD", "2", &s0, &s1]), ":0\r\n");
    let _: () = q(&mut w, &["RENAME", &s1, &s0]).unwrap();
    let mut got = vec![text(r.read_frame()), text(r.read_frame())];
    got.sort();
    let mut want = vec![text(invalidate(&[&s0])), text(invalidate(&[&s1]))];
    want.sort();
    assert_eq!(got, want);

    // A script over keys on both shards tracks every declared key once it
    // reads, and none when it only writes.
    let (e0, e1) = prefixed_on_two_shards("eval:");
    let _: () = q(&mut w, &["MSET", &e0, "1", &e1, "2"]).unwrap();
    let write_only = "redis.call('set', KEYS[1], 'z') return 0";
    assert_eq!(r.call(&["EVAL", write_only, "2", &e0, &e1]), ":0\r\n");
    let _: () = q(&mut w, &["MSET", &e0, "1", &e1, "2"]).unwrap();
    assert_eq!(r.call(&["GET", "marker"]), "_\r\n");
    let _: () = q(&mut w, &["SET", "marker", "1"]).unwrap();
    assert_eq!(r.read_frame(), invalidate(&["marker"]));
    let read = "return redis.call('get', KEYS[1])";
    assert_eq!(r.call(&["EVAL", read, "2", &e0, &e1]), "$1\r\n1\r\n");
    let _: () = q(&mut w, &["MSET", &e0, "3", &e1, "4"]).unwrap();
    let mut got = vec![text(r.read_frame()), text(r.read_frame())];
    got.sort();
    let mut want = vec![text(invalidate(&[&e0])), text(invalidate(&[&e1]))];
    want.sort();
    assert_eq!(got, want);
}

#[test]
fn the_table_limit_invalidates_excess_keys() {
    let server = Server::start(2);
    let mut w = server.client();
    let keys: Vec<String> = (0..10).map(|i| format!("lim:{i}")).collect();
    for k in &keys {
        let _: () = q(&mut w, &["SET", k, "1"]).unwrap();
    }
    let mut r = resp3_tracker(&server, &[]);
    for k in &keys {
        assert_eq!(r.call(&["GET", k]), "$1\r\n1\r\n");
    }
    assert_eq!(info_field(&mut w, "tracking_total_keys"), "10");
    let _: () = q(&mut w, &["CONFIG", "SET", "tracking-table-max-keys", "1"]).unwrap();
    let mut invalidated = Vec::new();
    for _ in 0..9 {
        let frame = text(r.read_frame());
        assert!(frame.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n"), "{frame}");
        invalidated.push(frame);
    }
    invalidated.sort();
    invalidated.dedup();
    assert_eq!(invalidated.len(), 9);
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(r.call(&["PING"]), "+PONG\r\n");
    assert_eq!(info_field(&mut w, "tracking_total_keys"), "1");
    let limit: Vec<String> = q(&mut w, &["CONFIG", "GET", "tracking-table-max-keys"]).unwrap();
    assert_eq!(limit, vec!["tracking-table-max-keys", "1"]);
}

#[test]
fn the_limit_counts_every_shard_and_is_enforced_before_the_next_reply() {
    // Redis #11715: two keys of one shard under a limit of 2 stay tracked;
    // lowered to 1, the invalidation comes before the next command's reply,
    // even one that is only queued in MULTI.
    let server = Server::start(2);
    let mut w = server.client();
    let _: () = q(&mut w, &["CONFIG", "SET", "tracking-table-max-keys", "2"]).unwrap();
    let _: () = q(&mut w, &["DEBUG", "PAUSE-CRON", "1"]).unwrap();
    let mut r = resp3_tracker(&server, &[]);
    assert_eq!(r.call(&["MGET", "1{tag}", "2{tag}"]), "*2\r\n_\r\n_\r\n");
    assert_eq!(r.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(info_field(&mut w, "tracking_total_keys"), "2");
    let _: () = q(&mut w, &["CONFIG", "SET", "tracking-table-max-keys", "1"]).unwrap();
    r.cmd(&[b"PING"]);
    let frame = text(r.read_frame());
    assert!(frame.starts_with(">2\r\n$10\r\ninvalidate\r\n*1\r\n"), "{frame}");
    assert!(frame.contains("{tag}"), "{frame}");
    assert_eq!(text(r.read_frame()), "+QUEUED\r\n");
    assert_eq!(r.call(&["EXEC"]), "*1\r\n+PONG\r\n");
    assert_eq!(info_field(&mut w, "tracking_total_keys"), "1");
    let _: () = q(&mut w, &["DEBUG", "PAUSE-CRON", "0"]).unwrap();
}

#[test]
fn an_evicted_key_of_another_shard_is_invalidated_before_the_reply() {
    // Redis evicts before every command over maxmemory; the evicted key
    // lives on the other shard than the command's key.
    let server = Server::start(2);
    let (k0, k1) = keys_on_two_shards();
    let mut w = server.client();
    let _: () = q(&mut w, &["SET", &k0, "warm"]).unwrap();
    let _: () = q(&mut w, &["SET", &k1, "warm"]).unwrap();
    let mut r = resp3_tracker(&server, &[]);
    let _: () = q(&mut w, &["CONFIG", "SET", "maxmemory-policy", "volatile-random"]).unwrap();
    // No eviction on the timer: only the one before GETBIT.
    let _: () = q(&mut w, &["DEBUG", "PAUSE-CRON", "1"]).unwrap();
    let used: u64 = info_field(&mut w, "used_memory").parse().unwrap();
    let limit = (used + 512 * 1024).to_string();
    let _: () = q(&mut w, &["CONFIG", "SET", "maxmemory", &limit]).unwrap();
    assert_eq!(r.call(&["SETEX", &k1, "10000", "x"]), "+OK\r\n");
    assert_eq!(r.call(&["GET", &k1]), "$1\r\nx\r\n");
    // A 1 MB bitmap on the other shard puts the process over the limit;
    // the volatile key is the only one that may go.
    let _: i64 = q(&mut w, &["SETBIT", &k0, "8000000", "0"]).unwrap();
    r.cmd(&[b"GETBIT", k0.as_bytes(), b"0"]);
    assert_eq!(r.read_frame(), invalidate(&[&k1]));
    assert_eq!(text(r.read_frame()), ":0\r\n");
    assert_eq!(q::<Option<String>>(&mut w, &["GET", &k1]).unwrap(), None);
    let _: () = q(&mut w, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    let _: () = q(&mut w, &["DEBUG", "PAUSE-CRON", "0"]).unwrap();
}

#[test]
fn tracking_errors_are_redis_texts() {
    let server = Server::start(2);
    let mut c = server.client();
    let id: i64 = q(&mut c, &["CLIENT", "ID"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "GETREDIR"]).unwrap(), -1);
    let cases: &[(&[&str], &str)] = &[
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "999999"], "ERR The client ID you want redirect to does not exist"),
        (&["CLIENT", "TRACKING", "off", "REDIRECT", "0"], "ERR The client ID you want redirect to does not exist"),
        (&["CLIENT", "TRACKING", "on", "REDIRECT", "x"], "ERR value is not an integer or out of range"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "FOO"], "ERR syntax error"),
        (&["CLIENT", "TRACKING", "on", "PREFIX"], "ERR syntax error"),
        (&["CLIENT", "TRACKING", "maybe"], "ERR syntax error"),
        (&["CLIENT", "TRACKING", "on", "PREFIX", "a"], "ERR PREFIX option requires BCAST mode to be enabled"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "OPTIN"], "ERR OPTIN and OPTOUT are not compatible with BCAST"),
        (&["CLIENT", "TRACKING", "on", "OPTIN", "OPTOUT"], "ERR You can't specify both OPTIN mode and OPTOUT mode"),
        (&["CLIENT", "TRACKING", "on", "BCAST", "PREFIX", "ab", "PREFIX", "a"], "ERR Prefix 'ab' overlaps with another provided prefix 'a'. Prefixes for a single client must not overlap."),
        (&["CLIENT", "TRACKING"], "ERR wrong number of arguments for 'client|tracking' command"),
        (&["CLIENT", "CACHING"], "ERR wrong number of arguments for 'client|caching' command"),
        (&["CLIENT", "GETREDIR", "x"], "ERR wrong number of arguments for 'client|getredir' command"),
    ];
    for (args, want) in cases {
        assert_eq!(err(&mut c, args), *want, "{args:?}");
    }
    // A redirect is checked before a later bad option, and only one may be
    // given.
    let me = id.to_string();
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "on", "REDIRECT", "999999", "BOGUS"]),
        "ERR The client ID you want redirect to does not exist"
    );
    assert_eq!(
        err(&mut c, &["CLIENT", "TRACKING", "on", "REDIRECT", &me, "REDIRECT", &me]),
        "ERR A client can only redirect to a single other client"
    );
    let _: () = q(&mut c, &["CLIENT", "TRACKING", "on"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "GETREDIR"]).unwrap(), 0);
    let _: () = q(&mut c, &["CLIENT", "TRACKING", "on", "REDIRECT", &me]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "GETREDIR"]).unwrap(), id);
    let info: redis::Value = q(&mut c, &["CLIENT", "TRACKINGINFO"]).unwrap();
    assert!(format!("{info:?}").contains(&format!("int({id})")), "{info:?}");
    let _: () = q(&mut c, &["CLIENT", "TRACKING", "off"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "GETREDIR"]).unwrap(), -1);
    // RESET turns tracking off.
    let _: () = q(&mut c, &["CLIENT", "TRACKING", "on", "BCAST"]).unwrap();
    assert_eq!(info_field(&mut c, "tracking_clients"), "1");
    let _: String = q(&mut c, &["RESET"]).unwrap();
    assert_eq!(info_field(&mut c, "tracking_clients"), "0");
    assert_eq!(info_field(&mut c, "tracking_total_prefixes"), "0");
}

#[test]
fn idle_tracking_clients_time_out_but_subscribers_do_not() {
    let server = Server::start_with(&["--shards", "2", "--timeout", "1"]);
    let mut tracker = resp3_tracker(&server, &[]);
    let mut subscriber = server.raw();
    assert!(subscriber.call(&["SUBSCRIBE", "__redis__:invalidate"]).contains("subscribe"));
    let started = std::time::Instant::now();
    assert!(tracker.is_closed());
    assert!(started.elapsed() < Duration::from_secs(5));
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(subscriber.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

#[test]
fn a_tracking_client_that_does_not_read_is_disconnected_at_its_buffer_limit() {
    let server = Server::start(2);
    let mut w = server.client();
    let _: () =
        q(&mut w, &["CONFIG", "SET", "client-output-buffer-limit", "normal 65536 0 0"]).unwrap();
    let mut slow = resp3_tracker(&server, &["BCAST"]);
    let mut other = resp3_tracker(&server, &["BCAST", "PREFIX", "unrelated:"]);
    // Far more invalidations than the socket buffers hold.
    let name = "k".repeat(4000);
    let mut closed = false;
    for round in 0..200 {
        let mut mset = vec!["MSET".to_string()];
        for i in 0..50 {
            mset.push(format!("{name}{round}:{i}"));
            mset.push("v".into());
        }
        let args: Vec<&str> = mset.iter().map(String::as_str).collect();
        let _: () = q(&mut w, &args).unwrap();
        let list: String = q(&mut w, &["CLIENT", "LIST"]).unwrap();
        if list.lines().count() == 2 {
            closed = true;
            break;
        }
    }
    assert!(closed, "the slow tracking client was never disconnected");
    assert!(slow.is_closed());
    // Nobody else was affected.
    assert_eq!(other.call(&["PING"]), "+PONG\r\n");
}
