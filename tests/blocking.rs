//! Blocking commands against a real 2-shard server: BLPOP and friends,
//! BZPOPMIN and friends, XREAD/XREADGROUP BLOCK, woken by writes on either
//! shard, timeouts, CLIENT UNBLOCK, clients that hang up while blocked, and
//! the non-blocking behaviour inside MULTI and scripts.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::time::{Duration, Instant};

/// Sends a blocking command and gives the server time to block it (checked
/// through INFO's blocked_clients).
fn block(server: &Server, raw: &mut Raw, args: &[&str], blocked_before: usize) {
    let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
    raw.cmd(&args);
    wait_blocked(server, blocked_before + 1);
}

fn blocked_clients(c: &mut redis::Connection) -> usize {
    let info: String = q(c, &["INFO", "clients"]).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("blocked_clients:"))
        .expect("blocked_clients in INFO")
        .trim()
        .parse()
        .unwrap()
}

fn wait_blocked(server: &Server, n: usize) {
    let mut c = server.client();
    let deadline = Instant::now() + Duration::from_secs(10);
    while blocked_clients(&mut c) != n {
        assert!(Instant::now() < deadline, "never reached {n} blocked clients");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn text(frame: Vec<u8>) -> String {
    String::from_utf8(frame).unwrap()
}

fn bulk(s: &str) -> String {
    format!("${}\r\n{s}\r\n", s.len())
}

#[test]
fn blpop_waits_on_keys_of_both_shards() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let mut w = server.raw();
    block(&server, &mut w, &["BLPOP", &a, &b, "0"], 0);
    let _: i64 = q(&mut c, &["RPUSH", &b, "x", "y"]).unwrap();
    assert_eq!(text(w.read_frame()), format!("*2\r\n{}{}", bulk(&b), bulk("x")));
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", &b, "0", "-1"]).unwrap(), ["y"]);
    // Served at once when a list has something; the first key wins.
    let _: i64 = q(&mut c, &["RPUSH", &a, "1"]).unwrap();
    assert_eq!(w.call(&["BRPOP", &a, &b, "1"]), format!("*2\r\n{}{}", bulk(&a), bulk("1")));
    // BRPOP takes the tail.
    block(&server, &mut w, &["BRPOP", &a, "0"], 0);
    let _: i64 = q(&mut c, &["LPUSH", &a, "first", "last"]).unwrap();
    assert_eq!(text(w.read_frame()), format!("*2\r\n{}{}", bulk(&a), bulk("first")));
    assert_eq!(blocked_clients(&mut c), 0);
}

#[test]
fn timeouts_reply_null_in_each_protocol() {
    let server = Server::start(2);
    let mut w = server.raw();
    let started = Instant::now();
    assert_eq!(w.call(&["BLPOP", "nothing", "0.2"]), "*-1\r\n");
    let waited = started.elapsed();
    assert!(waited >= Duration::from_millis(190), "returned after {waited:?}");
    assert_eq!(w.call(&["BLMOVE", "nothing", "dst", "LEFT", "RIGHT", "0.05"]), "$-1\r\n");
    assert_eq!(w.call(&["BZPOPMIN", "nothing", "0.05"]), "*-1\r\n");
    assert_eq!(w.call(&["XREAD", "BLOCK", "50", "STREAMS", "nothing", "$"]), "*-1\r\n");
    assert!(w.call(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(w.call(&["BLPOP", "nothing", "0.05"]), "_\r\n");
    assert_eq!(w.call(&["BRPOPLPUSH", "nothing", "dst", "0.05"]), "_\r\n");
    // Errors, as Redis words them.
    assert_eq!(w.call(&["BLPOP", "k", "-1"]), "-ERR timeout is negative\r\n");
    assert_eq!(w.call(&["BLPOP", "k", "abc"]), "-ERR timeout is not a float or out of range\r\n");
    assert_eq!(
        w.call(&["XREAD", "BLOCK", "1.5", "STREAMS", "s", "$"]),
        "-ERR timeout is not an integer or out of range\r\n"
    );
    assert_eq!(
        w.call(&["BLMPOP", "0", "0", "k", "LEFT"]),
        "-ERR numkeys should be greater than 0\r\n"
    );
    let mut c = server.client();
    let _: () = q(&mut c, &["SET", "str", "v"]).unwrap();
    assert!(w.call(&["BLPOP", "str", "0"]).starts_with("-WRONGTYPE"));
}

#[test]
fn moves_and_sorted_sets_across_shards() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let mut w = server.raw();
    // BLMOVE from a list on one shard to one on the other: atomic, and the
    // destination list is created.
    block(&server, &mut w, &["BLMOVE", &a, &b, "RIGHT", "LEFT", "0"], 0);
    let _: i64 = q(&mut c, &["RPUSH", &a, "job1", "job2"]).unwrap();
    assert_eq!(text(w.read_frame()), bulk("job2"));
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", &b, "0", "-1"]).unwrap(), ["job2"]);
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", &a, "0", "-1"]).unwrap(), ["job1"]);
    // BLMPOP with COUNT.
    let z1 = format!("z{a}");
    let z2 = format!("z{b}");
    block(&server, &mut w, &["BLMPOP", "0", "2", &z1, &z2, "RIGHT", "COUNT", "5"], 0);
    let _: i64 = q(&mut c, &["RPUSH", &z2, "p", "q"]).unwrap();
    assert_eq!(
        text(w.read_frame()),
        format!("*2\r\n{}*2\r\n{}{}", bulk(&z2), bulk("q"), bulk("p"))
    );
    // BZPOPMIN / BZPOPMAX / BZMPOP.
    block(&server, &mut w, &["BZPOPMIN", &z1, &z2, "0"], 0);
    let _: i64 = q(&mut c, &["ZADD", &z1, "2", "two", "1", "one"]).unwrap();
    assert_eq!(text(w.read_frame()), format!("*3\r\n{}{}{}", bulk(&z1), bulk("one"), bulk("1")));
    assert_eq!(
        w.call(&["BZPOPMAX", &z2, &z1, "0"]),
        format!("*3\r\n{}{}{}", bulk(&z1), bulk("two"), bulk("2"))
    );
    block(&server, &mut w, &["BZMPOP", "0", "1", &z2, "MAX", "COUNT", "2"], 0);
    let _: i64 = q(&mut c, &["ZADD", &z2, "5", "e", "7", "g", "6", "f"]).unwrap();
    assert_eq!(
        text(w.read_frame()),
        format!(
            "*2\r\n{}*2\r\n*2\r\n{}{}*2\r\n{}{}",
            bulk(&z2),
            bulk("g"),
            bulk("7"),
            bulk("f"),
            bulk("6")
        )
    );
}

#[test]
fn streams_block_for_new_entries() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    let _: String = q(&mut c, &["XADD", &a, "1-1", "old", "x"]).unwrap();
    let mut w = server.raw();
    // `$` is the last id when the read started: the old entry is not served.
    block(&server, &mut w, &["XREAD", "BLOCK", "0", "STREAMS", &a, &b, "$", "$"], 0);
    let _: String = q(&mut c, &["XADD", &b, "5-1", "f", "v"]).unwrap();
    assert_eq!(
        text(w.read_frame()),
        format!(
            "*1\r\n*2\r\n{}*1\r\n*2\r\n{}*2\r\n{}{}",
            bulk(&b),
            bulk("5-1"),
            bulk("f"),
            bulk("v")
        )
    );
    // XREADGROUP BLOCK with `>`, acknowledged afterwards.
    let _: () = q(&mut c, &["XGROUP", "CREATE", &a, "g", "$"]).unwrap();
    block(
        &server,
        &mut w,
        &["XREADGROUP", "GROUP", "g", "c1", "BLOCK", "0", "STREAMS", &a, ">"],
        0,
    );
    let _: String = q(&mut c, &["XADD", &a, "2-1", "order", "42"]).unwrap();
    assert_eq!(
        text(w.read_frame()),
        format!(
            "*1\r\n*2\r\n{}*1\r\n*2\r\n{}*2\r\n{}{}",
            bulk(&a),
            bulk("2-1"),
            bulk("order"),
            bulk("42")
        )
    );
    assert_eq!(q::<i64>(&mut c, &["XACK", &a, "g", "2-1"]).unwrap(), 1);
}

#[test]
fn client_unblock_and_blocked_flag() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut w = server.raw();
    let id = w.call(&["CLIENT", "ID"]);
    let id = id.trim().trim_start_matches(':').to_string();
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id]).unwrap(), 0);
    block(&server, &mut w, &["BLPOP", "q", "0"], 0);
    let list: String = q(&mut c, &["CLIENT", "LIST", "ID", &id]).unwrap();
    assert!(list.contains("flags=b") && list.contains("cmd=blpop"), "{list}");
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, "TIMEOUT"]).unwrap(), 1);
    assert_eq!(text(w.read_frame()), "*-1\r\n");
    block(&server, &mut w, &["BLPOP", "q", "0"], 0);
    assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, "ERROR"]).unwrap(), 1);
    assert_eq!(text(w.read_frame()), "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n");
    assert_eq!(blocked_clients(&mut c), 0);
    // Each blocked command is one call, however many times it was tried.
    let stats: String = q(&mut c, &["INFO", "commandstats"]).unwrap();
    let blpop = stats.lines().find(|l| l.starts_with("cmdstat_blpop:")).unwrap();
    assert!(blpop.starts_with("cmdstat_blpop:calls=2,"), "{blpop}");
    assert!(blpop.contains("rejected_calls=0,failed_calls=1"), "{blpop}");
    let err = q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, "LATER"]).unwrap_err();
    assert!(err.to_string().contains("CLIENT UNBLOCK reason should be TIMEOUT or ERROR"), "{err}");
}

#[test]
fn a_client_that_hangs_up_is_never_served() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut w = server.raw();
    block(&server, &mut w, &["BLPOP", "gone", "0"], 0);
    drop(w);
    wait_blocked(&server, 0);
    let _: i64 = q(&mut c, &["RPUSH", "gone", "kept"]).unwrap();
    assert_eq!(q::<Vec<String>>(&mut c, &["LRANGE", "gone", "0", "-1"]).unwrap(), ["kept"]);
}

#[test]
fn changes_that_leave_nothing_keep_waiting() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut w = server.raw();
    // Commands pipelined behind the blocking one run after it.
    w.send(b"*3\r\n$5\r\nBLPOP\r\n$4\r\nlist\r\n$1\r\n0\r\n*1\r\n$4\r\nPING\r\n");
    wait_blocked(&server, 1);
    let _: redis::Value = redis::pipe()
        .atomic()
        .cmd("LPUSH")
        .arg("list")
        .arg("a")
        .cmd("DEL")
        .arg("list")
        .query(&mut c)
        .unwrap();
    let _: () = q(&mut c, &["SET", "list", "now a string"]).unwrap();
    let _: i64 = q(&mut c, &["DEL", "list"]).unwrap();
    assert_eq!(blocked_clients(&mut c), 1);
    let _: i64 = q(&mut c, &["RPUSH", "list", "b"]).unwrap();
    assert_eq!(text(w.read_frame()), format!("*2\r\n{}{}", bulk("list"), bulk("b")));
    assert_eq!(text(w.read_frame()), "+PONG\r\n");
}

#[test]
fn multi_and_scripts_never_block() {
    let server = Server::start(2);
    let mut w = server.raw();
    assert_eq!(w.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(w.call(&["BLPOP", "empty", "0"]), "+QUEUED\r\n");
    assert_eq!(w.call(&["XREAD", "BLOCK", "0", "STREAMS", "s", "$"]), "+QUEUED\r\n");
    assert_eq!(w.call(&["EXEC"]), "*2\r\n*-1\r\n*-1\r\n");
    // Scripts: Redis 7.0 refuses the blocking pops of its 2.x era, and
    // runs BLMPOP and BZMPOP without blocking.
    assert_eq!(
        w.call(&["EVAL", "return redis.pcall('blpop', KEYS[1], 0)", "1", "empty"]),
        "-ERR This Redis command is not allowed from script\r\n"
    );
    let blmpop = "return redis.call('blmpop', 0, 1, KEYS[1], 'LEFT')";
    assert_eq!(w.call(&["EVAL", blmpop, "1", "empty"]), "$-1\r\n");
    let mut c = server.client();
    let _: i64 = q(&mut c, &["RPUSH", "full", "x"]).unwrap();
    assert_eq!(
        w.call(&["EVAL", blmpop, "1", "full"]),
        format!("*2\r\n{}*1\r\n{}", bulk("full"), bulk("x"))
    );
}
