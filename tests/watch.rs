//! Reactive queries (`<READCMD>.WATCH`) against a real 2-shard server:
//! watchers on the key's core and on the other core, RESP2 watch mode and
//! RESP3 pushes, what wakes a query and what does not, UNWATCH, shared
//! fingerprints, INFO, disconnects and coalescing.

mod common;
use bytes::Bytes;
use common::{q, raw_on_shard, Raw, Server};
use ringdb_engine::query_watch::fingerprint;
use std::time::{Duration, Instant};

/// The shard that owns `key` on a 2-shard server.
fn shard_of(key: &str) -> usize {
    ringdb_engine::SlotMap::new(2).shard_of_key(key.as_bytes()).0 as usize
}

/// The fingerprint of `name args…` in database 0, as the server computes it.
fn fp(name: &str, args: &[&str]) -> u64 {
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::from(a.to_string())).collect();
    fingerprint(name, &args, 0)
}

/// A watch message: `*3` (RESP2) or `>3` (RESP3), the name, the fingerprint,
/// and the result as the base command would reply it.
fn frame(resp3: bool, name: &str, fingerprint: u64, result: &str) -> String {
    let fp = fingerprint.to_string();
    let head = if resp3 { '>' } else { '*' };
    format!("{head}3\r\n${}\r\n{name}\r\n${}\r\n{fp}\r\n{result}", name.len(), fp.len())
}

/// The result part of a RESP2 watch message of `name`.
fn result_of(frame: &[u8], name: &str) -> String {
    let text = String::from_utf8_lossy(frame).into_owned();
    let prefix = format!("*3\r\n${}\r\n{name}\r\n", name.len());
    let rest = text.strip_prefix(&prefix).unwrap_or_else(|| panic!("not a watch frame: {text:?}"));
    // Skip the fingerprint bulk string.
    let after_len = rest.find("\r\n").unwrap() + 2;
    let fp_end = after_len + rest[after_len..].find("\r\n").unwrap() + 2;
    rest[fp_end..].to_string()
}

/// One raw connection on each shard: `[on shard 0, on shard 1]`.
fn watchers(server: &Server, keep: &mut Vec<Raw>) -> [Raw; 2] {
    let mut admin = server.client();
    [raw_on_shard(server, &mut admin, 0, keep), raw_on_shard(server, &mut admin, 1, keep)]
}

#[test]
fn pfcount_watch_sees_the_exact_sequence_from_both_cores() {
    let server = Server::start(2);
    let mut keep = Vec::new();
    let [mut on0, mut on1] = watchers(&server, &mut keep);
    assert_ne!(shard_of("users:hll"), shard_of("other:hll"), "the merge must cross shards");
    let f = fp("PFCOUNT", &["users:hll"]);
    let expect = |n: i64| frame(false, "PFCOUNT", f, &format!(":{n}\r\n")).into_bytes();
    for w in [&mut on0, &mut on1] {
        assert_eq!(w.call(&["PFCOUNT.WATCH", "users:hll"]).into_bytes(), expect(0));
    }
    let mut writer = server.client();
    let writes: [&[&str]; 5] = [
        &["PFADD", "users:hll", "user1"],
        &["PFADD", "users:hll", "user2", "user3"],
        &["PFADD", "users:hll", "user4"],
        &["PFADD", "other:hll", "user5"],
        &["PFMERGE", "users:hll", "users:hll", "other:hll"],
    ];
    for w in writes {
        let _: redis::Value = q(&mut writer, w).unwrap();
    }
    for w in [&mut on0, &mut on1] {
        for n in [1, 3, 4, 5] {
            assert_eq!(w.read_frame(), expect(n));
        }
        // Nothing else was pushed: the next frame is PING's (subscribe-style
        // under RESP2).
        assert_eq!(w.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
    }
    // A PFADD that changes no register re-runs nothing visible.
    let _: i64 = q(&mut writer, &["PFADD", "users:hll", "user1"]).unwrap();
    let _: i64 = q(&mut writer, &["PFADD", "users:hll", "user6"]).unwrap();
    assert_eq!(on0.read_frame(), expect(6));
    assert_eq!(on1.read_frame(), expect(6));
}

#[test]
fn resp3_pushes_interleave_with_normal_replies() {
    let server = Server::start(2);
    let mut keep = Vec::new();
    let [on0, on1] = watchers(&server, &mut keep);
    let key = "counter";
    // The watcher lives on the other core than the key.
    let mut w = if shard_of(key) == 0 { on1 } else { on0 };
    assert!(w.call(&["HELLO", "3"]).starts_with('%'));
    let f = fp("GET", &[key]);
    assert_eq!(w.call(&["GET.WATCH", key]), frame(true, "GET", f, "_\r\n"));
    // Any command still works, and the connection's own writes push too.
    // (The push comes from the key's core, the reply too: either may be
    // first, as with Redis's tracking invalidations.)
    w.cmd(&[b"SET", key.as_bytes(), b"1"]);
    let mut two = [w.read_frame(), w.read_frame()].map(|f| String::from_utf8(f).unwrap());
    two.sort();
    assert_eq!(two, ["+OK\r\n".to_string(), frame(true, "GET", f, "$1\r\n1\r\n")]);
    let mut writer = server.client();
    let _: i64 = q(&mut writer, &["INCR", key]).unwrap();
    assert_eq!(String::from_utf8(w.read_frame()).unwrap(), frame(true, "GET", f, "$1\r\n2\r\n"));
    assert_eq!(w.call(&["GET", key]), "$1\r\n2\r\n");
    // ZRANGE with options is one query; its result is the command's array
    // (RESP3: pairs with double scores).
    let zf = fp("ZRANGE", &["z", "0", "9", "REV", "WITHSCORES"]);
    assert_eq!(
        w.call(&["ZRANGE.WATCH", "z", "0", "9", "REV", "WITHSCORES"]),
        frame(true, "ZRANGE", zf, "*0\r\n")
    );
    let _: i64 = q(&mut writer, &["ZADD", "z", "1", "a", "2", "b"]).unwrap();
    assert_eq!(
        String::from_utf8(w.read_frame()).unwrap(),
        frame(true, "ZRANGE", zf, "*2\r\n*2\r\n$1\r\nb\r\n,2\r\n*2\r\n$1\r\na\r\n,1\r\n")
    );
}

#[test]
fn get_watch_wakes_on_changes_of_its_key_only() {
    let server = Server::start(2);
    let mut keep = Vec::new();
    let [on0, on1] = watchers(&server, &mut keep);
    let key = "{k}page";
    let mut w = if shard_of(key) == 0 { on1 } else { on0 };
    let f = fp("GET", &[key]);
    let expect = |result: &str| frame(false, "GET", f, result).into_bytes();
    assert_eq!(w.call(&["GET.WATCH", key]).into_bytes(), expect("$-1\r\n"));
    let mut c = server.client();
    let mut run = |args: &[&str]| {
        let _: redis::Value = q(&mut c, args).unwrap();
    };
    run(&["SET", key, "v1"]);
    assert_eq!(w.read_frame(), expect("$2\r\nv1\r\n"));
    // Same value, other keys, TTL changes: the result is unchanged.
    run(&["SET", key, "v1"]);
    run(&["SET", "{k}other", "x"]);
    run(&["SET", "elsewhere", "x"]);
    run(&["EXPIRE", key, "100"]);
    run(&["DEL", key]);
    assert_eq!(w.read_frame(), expect("$-1\r\n"));
    // RENAME onto the key, then of the key.
    run(&["SET", "{k}src", "moved"]);
    run(&["RENAME", "{k}src", key]);
    assert_eq!(w.read_frame(), expect("$5\r\nmoved\r\n"));
    run(&["RENAME", key, "{k}dst"]);
    assert_eq!(w.read_frame(), expect("$-1\r\n"));
    // Expiry (active or lazy) pushes the null.
    run(&["SET", key, "short", "PX", "30"]);
    assert_eq!(w.read_frame(), expect("$5\r\nshort\r\n"));
    assert_eq!(w.read_frame(), expect("$-1\r\n"));
    // FLUSHDB, SWAPDB and FLUSHALL.
    run(&["SET", key, "a"]);
    assert_eq!(w.read_frame(), expect("$1\r\na\r\n"));
    run(&["FLUSHDB"]);
    assert_eq!(w.read_frame(), expect("$-1\r\n"));
    run(&["SELECT", "1"]);
    run(&["SET", key, "from-db1"]);
    run(&["SWAPDB", "0", "1"]);
    assert_eq!(w.read_frame(), expect("$8\r\nfrom-db1\r\n"));
    run(&["FLUSHALL"]);
    assert_eq!(w.read_frame(), expect("$-1\r\n"));
    assert_eq!(w.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

/// For every watchable command: the pushed result after a write equals what
/// the base command replies, with the watcher on the other core.
#[test]
fn every_watchable_command_pushes_its_normal_reply() {
    let server = Server::start(2);
    let mut keep = Vec::new();
    let [on0, on1] = watchers(&server, &mut keep);
    let mut by_shard = [on0, on1];
    let mut reader = server.raw();
    let mut c = server.client();
    let cases: &[(&[&str], &[&str])] = &[
        (&["GET", "s"], &["SET", "s", "hello"]),
        (&["MGET", "s"], &["SET", "s", "world"]),
        (&["STRLEN", "s"], &["APPEND", "s", "!!"]),
        (&["EXISTS", "s"], &["DEL", "s"]),
        (&["TTL", "t"], &["SET", "t", "v", "EX", "1000"]),
        (&["GETBIT", "b", "7"], &["SETBIT", "b", "7", "1"]),
        (&["BITCOUNT", "b"], &["SETBIT", "b", "9", "1"]),
        (&["HGET", "h", "f"], &["HSET", "h", "f", "1"]),
        (&["HGETALL", "h"], &["HSET", "h", "g", "2"]),
        (&["HLEN", "h"], &["HSET", "h", "i", "3"]),
        (&["LRANGE", "l", "0", "-1"], &["RPUSH", "l", "a", "b"]),
        (&["LLEN", "l"], &["RPUSH", "l", "c"]),
        (&["LINDEX", "l", "-1"], &["RPUSH", "l", "d"]),
        (&["LPOS", "l", "x"], &["RPUSH", "l", "x"]),
        (&["SMEMBERS", "st"], &["SADD", "st", "m1", "m2"]),
        (&["SCARD", "st"], &["SADD", "st", "m3"]),
        (&["SISMEMBER", "st", "m9"], &["SADD", "st", "m9"]),
        (
            &["ZRANGE", "z", "(1", "+inf", "BYSCORE", "LIMIT", "0", "2", "WITHSCORES"],
            &["ZADD", "z", "1", "a", "2", "b", "3", "c"],
        ),
        (&["ZCARD", "z"], &["ZADD", "z", "4", "d"]),
        (&["ZSCORE", "z", "a"], &["ZINCRBY", "z", "0.5", "a"]),
        (&["ZRANK", "z", "d"], &["ZADD", "z", "0", "d"]),
        (&["ZCOUNT", "z", "-inf", "+inf"], &["ZADD", "z", "5", "e"]),
        (&["PFCOUNT", "hll"], &["PFADD", "hll", "a", "b", "c"]),
        (&["BF.EXISTS", "bf", "x"], &["BF.ADD", "bf", "x"]),
        (&["BF.CARD", "bf"], &["BF.ADD", "bf", "y"]),
        (&["XLEN", "x"], &["XADD", "x", "*", "f", "v"]),
    ];
    for (read, write) in cases {
        let key = read[1];
        let name = read[0];
        let w = &mut by_shard[1 - shard_of(key)];
        let mut watch = vec![format!("{name}.WATCH")];
        watch.extend(read[1..].iter().map(|a| a.to_string()));
        let watch: Vec<&str> = watch.iter().map(String::as_str).collect();
        let first = w.call(&watch);
        assert_eq!(
            result_of(first.as_bytes(), name),
            reader.call(read),
            "first result of {read:?}"
        );
        let _: redis::Value = q(&mut c, write).unwrap();
        let pushed = result_of(&w.read_frame(), name);
        assert_eq!(pushed, reader.call(read), "{read:?} after {write:?}");
        let unwatch = format!("{name}.UNWATCH");
        assert_eq!(w.call(&[&unwatch, &fp(name, &read[1..]).to_string()]), "+OK\r\n");
    }
}

#[test]
fn errors_unwatch_and_watch_mode() {
    let server = Server::start(2);
    let mut w = server.raw();
    assert_eq!(w.call(&["MGET.WATCH", "a", "b"]), "-ERR MGET.WATCH watches exactly one key\r\n");
    assert_eq!(
        w.call(&["PFCOUNT.UNWATCH"]),
        "-ERR wrong number of arguments for 'pfcount.unwatch' command\r\n"
    );
    assert_eq!(
        w.call(&["GET.WATCH"]),
        "-ERR wrong number of arguments for 'get.watch' command\r\n"
    );
    assert!(w.call(&["SET.WATCH", "k"]).starts_with("-ERR unknown command 'SET.WATCH'"));
    assert_eq!(w.call(&["GET.UNWATCH", "nope"]), "-ERR invalid fingerprint\r\n");
    // Not in watch mode yet: any command works.
    assert_eq!(w.call(&["GET", "k"]), "$-1\r\n");
    let f = fp("GET", &["k"]);
    assert_eq!(w.call(&["GET.WATCH", "k"]), frame(false, "GET", f, "$-1\r\n"));
    assert_eq!(
        w.call(&["GET", "k"]),
        "-ERR Can't execute 'get': only *.WATCH / *.UNWATCH / (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in watch mode\r\n"
    );
    // UNWATCH stops the pushes; it leaves watch mode with the last query.
    assert_eq!(w.call(&["GET.UNWATCH", &f.to_string()]), "+OK\r\n");
    let mut c = server.client();
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    assert_eq!(w.call(&["GET", "k"]), "$1\r\nv\r\n");
    // RESET drops every query and the mode.
    assert_eq!(
        w.call(&["STRLEN.WATCH", "k"]),
        frame(false, "STRLEN", fp("STRLEN", &["k"]), ":1\r\n")
    );
    assert_eq!(w.call(&["RESET"]), "+RESET\r\n");
    let _: () = q(&mut c, &["SET", "k", "longer"]).unwrap();
    assert_eq!(w.call(&["STRLEN", "k"]), ":6\r\n");
}

fn info_watch(c: &mut redis::Connection) -> (u64, u64, u64, u64) {
    let info: String = q(c, &["INFO", "watch"]).unwrap();
    let field = |name: &str| -> u64 {
        info.lines()
            .find_map(|l| l.strip_prefix(&format!("{name}:")))
            .unwrap_or_else(|| panic!("no {name} in {info}"))
            .trim()
            .parse()
            .unwrap()
    };
    (
        field("watch_fingerprints"),
        field("watch_subscriptions"),
        field("watch_pushes"),
        field("watch_reexecutions"),
    )
}

#[test]
fn watchers_of_one_query_share_its_fingerprint_and_reruns() {
    let server = Server::start(2);
    let mut keep = Vec::new();
    let [mut on0, mut on1] = watchers(&server, &mut keep);
    let mut c = server.client();
    let f = fp("LLEN", &["queue"]);
    for w in [&mut on0, &mut on1] {
        assert_eq!(w.call(&["LLEN.WATCH", "queue"]), frame(false, "LLEN", f, ":0\r\n"));
    }
    let (fingerprints, subscriptions, _, reruns_before) = info_watch(&mut c);
    assert_eq!((fingerprints, subscriptions), (1, 2));
    let _: i64 = q(&mut c, &["RPUSH", "queue", "job"]).unwrap();
    for w in [&mut on0, &mut on1] {
        assert_eq!(w.read_frame(), frame(false, "LLEN", f, ":1\r\n").into_bytes());
    }
    let (_, _, pushes, reruns) = info_watch(&mut c);
    assert_eq!(reruns - reruns_before, 1, "one re-run per change, whatever the watchers");
    assert!(pushes >= 2);
    // Closing the connections removes their subscriptions and, with the
    // last one, the fingerprint.
    drop(on0);
    drop(on1);
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let (fingerprints, subscriptions, _, _) = info_watch(&mut c);
        if (fingerprints, subscriptions) == (0, 0) {
            break;
        }
        assert!(Instant::now() < deadline, "subscriptions left: {fingerprints} {subscriptions}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn coalesced_pushes_end_with_the_latest_result() {
    let server = Server::start(2);
    let mut c = server.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "watch-coalesce-ms", "50"]).unwrap();
    let mut w = server.raw();
    let f = fp("GET", &["n"]);
    assert_eq!(w.call(&["GET.WATCH", "n"]), frame(false, "GET", f, "$-1\r\n"));
    let mut pipe = redis::pipe();
    for _ in 0..500 {
        pipe.cmd("INCR").arg("n").ignore();
    }
    let _: () = pipe.query(&mut c).unwrap();
    let mut received = 0;
    loop {
        received += 1;
        if w.read_frame() == frame(false, "GET", f, "$3\r\n500\r\n").into_bytes() {
            break;
        }
    }
    assert!(received < 500, "{received} pushes for 500 writes in one burst");
    assert_eq!(w.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");
}

#[test]
fn geosearch_watch_follows_members_moving_in_and_out_of_the_area() {
    let server = Server::start(2);
    let mut keep = Vec::new();
    let [on0, on1] = watchers(&server, &mut keep);
    let key = "drivers";
    let mut w = if shard_of(key) == 0 { on1 } else { on0 };
    let args = [key, "FROMLONLAT", "2.35", "48.85", "BYRADIUS", "5", "km", "ASC", "WITHDIST"];
    let f = fp("GEOSEARCH", &args);
    let watch: Vec<&str> = ["GEOSEARCH.WATCH"].into_iter().chain(args).collect();
    assert_eq!(w.call(&watch), frame(false, "GEOSEARCH", f, "*0\r\n"));
    let mut c = server.client();
    let _: i64 = q(&mut c, &["GEOADD", key, "2.36", "48.86", "d1"]).unwrap();
    let near = "*1\r\n*2\r\n$2\r\nd1\r\n$6\r\n1.3315\r\n";
    assert_eq!(String::from_utf8(w.read_frame()).unwrap(), frame(false, "GEOSEARCH", f, near));
    // d1 drives 73 km east: out of the area.
    let _: i64 = q(&mut c, &["GEOADD", key, "3.36", "48.86", "d1"]).unwrap();
    assert_eq!(String::from_utf8(w.read_frame()).unwrap(), frame(false, "GEOSEARCH", f, "*0\r\n"));
}
