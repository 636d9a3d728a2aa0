//! TIME, LASTSAVE, DEBUG, FUNCTION, SHUTDOWN, and the replication and
//! cluster commands (ROLE, WAIT, READONLY, …) against a real 2-shard
//! server, with keys on both shards where a subcommand is keyed.

mod common;
use common::{keys_on_two_shards, q, raw_on_shard, Server};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn unix_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_secs()
}

#[test]
fn time_and_lastsave() {
    let server = Server::start(2);
    let mut c = server.client();
    let time: Vec<String> = q(&mut c, &["TIME"]).unwrap();
    assert_eq!(time.len(), 2);
    let secs: u64 = time[0].parse().unwrap();
    let micros: u64 = time[1].parse().unwrap();
    assert!(secs.abs_diff(unix_secs()) <= 2 && micros < 1_000_000, "{time:?}");
    let lastsave: u64 = q(&mut c, &["LASTSAVE"]).unwrap();
    assert!(lastsave.abs_diff(unix_secs()) <= 30, "{lastsave}");
    let err = q::<Vec<String>>(&mut c, &["TIME", "x"]).unwrap_err();
    assert!(err.to_string().contains("wrong number of arguments for 'time' command"), "{err}");
}

#[test]
fn debug_object_sleep_and_active_expire_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["SET", &a, "hello"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "20000"]).unwrap();
    let line_a: String = q(&mut c, &["DEBUG", "OBJECT", &a]).unwrap();
    assert!(line_a.starts_with("Value at:0x"), "{line_a}");
    assert!(line_a.contains(" refcount:1 encoding:embstr serializedlength:6 lru:"), "{line_a}");
    // The LRU clock counts whole seconds (as Redis's), so a second boundary
    // between SET and DEBUG OBJECT makes the idle time 1.
    assert!(
        line_a.ends_with(" lru_seconds_idle:0") || line_a.ends_with(" lru_seconds_idle:1"),
        "{line_a}"
    );
    let line_b: String = q(&mut c, &["DEBUG", "OBJECT", &b]).unwrap();
    assert!(line_b.contains(" encoding:int serializedlength:3 "), "{line_b}");
    // An integer changed in place keeps its address (Redis's INCR test).
    let address = |line: &str| line.split(' ').nth(1).unwrap().to_string();
    q::<i64>(&mut c, &["INCR", &b]).unwrap();
    let again: String = q(&mut c, &["DEBUG", "OBJECT", &b]).unwrap();
    assert_eq!(address(&again), address(&line_b));
    let err = q::<String>(&mut c, &["DEBUG", "OBJECT", "missing"]).unwrap_err();
    assert!(err.to_string().contains("no such key"), "{err}");

    // SET-ACTIVE-EXPIRE 0 stops the expiry cycle of both shards.
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "0"]).unwrap(), "OK");
    q::<String>(&mut c, &["SET", &a, "1", "PX", "30"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "1", "PX", "30"]).unwrap();
    std::thread::sleep(Duration::from_millis(400));
    let keyspace: String = q(&mut c, &["INFO", "keyspace"]).unwrap();
    assert!(keyspace.contains("db0:keys=2,expires=2,"), "{keyspace}");
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SET-ACTIVE-EXPIRE", "1"]).unwrap(), "OK");
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let keyspace: String = q(&mut c, &["INFO", "keyspace"]).unwrap();
        if !keyspace.contains("db0:") {
            break;
        }
        assert!(Instant::now() < deadline, "keys never expired: {keyspace}");
        std::thread::sleep(Duration::from_millis(50));
    }

    // SLEEP stops the whole server: clients of both cores wait, from (about)
    // the same moment, and the sleeper gets its reply after one pause.
    let mut keep = Vec::new();
    let mut on = [0, 1].map(|shard| raw_on_shard(&server, &mut c, shard, &mut keep));
    let port = server.port;
    let sleeper = std::thread::spawn(move || {
        let mut c = redis::Client::open(format!("redis://127.0.0.1:{port}/"))
            .unwrap()
            .get_connection()
            .unwrap();
        let started = Instant::now();
        assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "1"]).unwrap(), "OK");
        started.elapsed()
    });
    // Margins are wide: a loaded CI machine may start the sleeper late.
    std::thread::sleep(Duration::from_millis(300));
    for raw in &mut on {
        raw.cmd(&[b"PING"]);
    }
    std::thread::sleep(Duration::from_millis(250));
    for (shard, raw) in on.iter_mut().enumerate() {
        // Neither core has answered yet.
        raw.stream.set_nonblocking(true).unwrap();
        let pending = raw.stream.peek(&mut [0u8; 16]);
        raw.stream.set_nonblocking(false).unwrap();
        assert!(
            matches!(&pending, Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
            "shard {shard} answered during DEBUG SLEEP: {pending:?}"
        );
    }
    for raw in &mut on {
        assert_eq!(raw.read_frame(), b"+PONG\r\n");
    }
    let slept = sleeper.join().unwrap();
    assert!(
        slept >= Duration::from_millis(1000) && slept < Duration::from_millis(3000),
        "{slept:?}"
    );
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "0"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["DEBUG", "SLEEP", "-1"]).unwrap(), "OK");
}

#[test]
fn debug_protocol_in_both_protocols() {
    let server = Server::start(2);
    let mut raw = server.raw();
    for (kind, resp2) in [
        ("string", "$11\r\nHello World\r\n"),
        ("integer", ":12345\r\n"),
        ("double", "$5\r\n3.141\r\n"),
        ("bignum", "$37\r\n1234567999999999999999999999999999999\r\n"),
        ("null", "$-1\r\n"),
        ("array", "*3\r\n:0\r\n:1\r\n:2\r\n"),
        ("set", "*3\r\n:0\r\n:1\r\n:2\r\n"),
        ("map", "*6\r\n:0\r\n:0\r\n:1\r\n:1\r\n:2\r\n:0\r\n"),
        ("true", ":1\r\n"),
        ("false", ":0\r\n"),
        ("verbatim", "$25\r\nThis is a verbatim\nstring\r\n"),
        ("attrib", "$39\r\nSome real reply following the attribute\r\n"),
    ] {
        assert_eq!(raw.call(&["DEBUG", "PROTOCOL", kind]), resp2, "{kind}");
    }
    assert!(raw
        .call(&["DEBUG", "PROTOCOL", "push"])
        .starts_with("-ERR RESP2 is not supported by this command"));
    assert!(raw.call(&["DEBUG", "PROTOCOL", "nope"]).starts_with("-ERR Wrong protocol type name."));
    assert!(raw.call(&["HELLO", "3"]).starts_with("%7"));
    for (kind, resp3) in [
        ("double", ",3.141\r\n"),
        ("bignum", "(1234567999999999999999999999999999999\r\n"),
        ("null", "_\r\n"),
        ("set", "~3\r\n:0\r\n:1\r\n:2\r\n"),
        ("map", "%3\r\n:0\r\n#f\r\n:1\r\n#t\r\n:2\r\n#f\r\n"),
        ("true", "#t\r\n"),
        ("verbatim", "=29\r\ntxt:This is a verbatim\nstring\r\n"),
    ] {
        assert_eq!(raw.call(&["DEBUG", "PROTOCOL", kind]), resp3, "{kind}");
    }
    // A push frame, then the real reply.
    raw.cmd(&[b"DEBUG", b"PROTOCOL", b"push"]);
    assert_eq!(raw.read_frame(), b">2\r\n$16\r\nserver-cpu-usage\r\n:42\r\n");
    assert_eq!(raw.read_frame(), b"$40\r\nSome real reply following the push reply\r\n");
}

#[test]
fn debug_other_subcommands_and_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["SET", &a, "x"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "y"]).unwrap();
    for key in [&a, &b] {
        let err = q::<String>(&mut c, &["DEBUG", "LISTPACK", key]).unwrap_err();
        assert!(err.to_string().contains("Not a listpack encoded object."), "{err}");
        let err = q::<String>(&mut c, &["DEBUG", "QUICKLIST", key]).unwrap_err();
        assert!(err.to_string().contains("Not a quicklist encoded object."), "{err}");
    }
    let err = q::<String>(&mut c, &["DEBUG", "LISTPACK", "missing"]).unwrap_err();
    assert!(err.to_string().contains("no such key"), "{err}");
    assert_eq!(q::<String>(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "1b"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "0"]).unwrap(), "OK");
    let err = q::<String>(&mut c, &["DEBUG", "QUICKLIST-PACKED-THRESHOLD", "5gb"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("argument must be a memory value bigger than 1 and smaller than 4gb"),
        "{err}"
    );
    let err = q::<String>(&mut c, &["DEBUG", "ERROR", "MYCODE something failed"]).unwrap_err();
    assert_eq!(err.code(), Some("MYCODE"));
    let errorstats: String = q(&mut c, &["INFO", "errorstats"]).unwrap();
    assert!(errorstats.contains("errorstat_MYCODE:count=1"), "{errorstats}");
    assert_eq!(q::<String>(&mut c, &["DEBUG", "LOG", "hello from a test"]).unwrap(), "OK");
    assert_eq!(
        q::<String>(&mut c, &["DEBUG", "STRINGMATCH-TEST"]).unwrap(),
        "Apparently Redis did not crash: test passed"
    );
    let help: Vec<String> = q(&mut c, &["DEBUG", "HELP"]).unwrap();
    assert_eq!(help[0], "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    assert!(help.contains(&"SLEEP <seconds>".to_string()));
    for args in [vec!["DEBUG", "JMAP"], vec!["DEBUG", "OBJECT"], vec!["DEBUG", "sleep", "1", "2"]] {
        let err = q::<String>(&mut c, &args).unwrap_err();
        let sub = args[1];
        let expected =
            format!("unknown subcommand or wrong number of arguments for '{sub}'. Try DEBUG HELP.");
        assert!(err.to_string().contains(&expected), "{err}");
    }
    let err = q::<String>(&mut c, &["DEBUG"]).unwrap_err();
    assert!(err.to_string().contains("wrong number of arguments for 'debug' command"), "{err}");
}

#[test]
fn debug_digest_matches_redis() {
    let server = Server::start(2);
    let mut c = server.client();
    let zeros = "0".repeat(40);
    assert_eq!(q::<String>(&mut c, &["DEBUG", "DIGEST"]).unwrap(), zeros);
    // The keys live on both shards; the signatures were taken from Redis
    // 7.0.15 with the same commands.
    let map = ringdb_engine::SlotMap::new(2);
    let keys = ["a", "b", "key:1", "c", "t"];
    assert!(keys.iter().any(|k| map.shard_of_key(k.as_bytes()).0 == 0));
    assert!(keys.iter().any(|k| map.shard_of_key(k.as_bytes()).0 == 1));
    let long = "x".repeat(100);
    q::<String>(&mut c, &["MSET", "a", "1", "b", "hello", "key:1", "12345678901234", "c", &long])
        .unwrap();
    q::<String>(&mut c, &["SET", "t", "v", "EX", "1000"]).unwrap();
    q::<String>(&mut c, &["SELECT", "3"]).unwrap();
    q::<String>(&mut c, &["SET", "z", "42"]).unwrap();
    assert_eq!(
        q::<String>(&mut c, &["DEBUG", "DIGEST"]).unwrap(),
        "c3abab56ac49473c8e4cbb3ddbb2d63eb9d02b1b"
    );
    q::<String>(&mut c, &["SELECT", "0"]).unwrap();
    let values: Vec<String> = q(&mut c, &["DEBUG", "DIGEST-VALUE", "a", "t", "nosuch"]).unwrap();
    assert_eq!(
        values,
        vec![
            "b4fc66738120fba0b5aa500ab5c2bf89cea1c5da".to_string(),
            "311b17018163335616e089f6b951c82c477335ac".to_string(),
            zeros,
        ]
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["DEBUG", "DIGEST-VALUE"]).unwrap(), Vec::<String>::new());
}

#[test]
fn function_flush_list_help() {
    let server = Server::start(2);
    let mut c = server.client();
    for args in [
        vec!["FUNCTION", "FLUSH"],
        vec!["FUNCTION", "FLUSH", "async"],
        vec!["FUNCTION", "FLUSH", "SYNC"],
    ] {
        assert_eq!(q::<String>(&mut c, &args).unwrap(), "OK");
    }
    let err = q::<String>(&mut c, &["FUNCTION", "FLUSH", "later"]).unwrap_err();
    assert!(err.to_string().contains("FUNCTION FLUSH only supports SYNC|ASYNC option"), "{err}");
    let err = q::<String>(&mut c, &["FUNCTION", "FLUSH", "sync", "async"]).unwrap_err();
    assert!(
        err.to_string().contains("unknown subcommand or wrong number of arguments for 'FLUSH'"),
        "{err}"
    );
    assert_eq!(q::<Vec<String>>(&mut c, &["FUNCTION", "LIST"]).unwrap(), Vec::<String>::new());
    let none: Vec<String> =
        q(&mut c, &["FUNCTION", "LIST", "WITHCODE", "LIBRARYNAME", "lib*"]).unwrap();
    assert!(none.is_empty());
    let err = q::<Vec<String>>(&mut c, &["FUNCTION", "LIST", "LIBRARYNAME"]).unwrap_err();
    assert!(err.to_string().contains("library name argument was not given"), "{err}");
    let err = q::<Vec<String>>(&mut c, &["FUNCTION", "LIST", "bogus"]).unwrap_err();
    assert!(err.to_string().contains("Unknown argument bogus"), "{err}");
    let help: Vec<String> = q(&mut c, &["FUNCTION", "HELP"]).unwrap();
    assert_eq!(help[0], "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    let err = q::<String>(&mut c, &["FUNCTION", "LOAD", "x"]).unwrap_err();
    assert!(err.to_string().contains("Missing library metadata"), "{err}");
    let err = q::<String>(&mut c, &["FUNCTION", "NOPE"]).unwrap_err();
    assert!(err.to_string().contains("unknown subcommand 'NOPE'. Try FUNCTION HELP."), "{err}");
}

#[test]
fn shutdown() {
    let mut server = Server::start(2);
    let mut c = server.client();
    // A save that cannot be written (its directory is gone) stops SHUTDOWN SAVE.
    let gone = common::temp_dir("gone");
    q::<String>(&mut c, &["CONFIG", "SET", "dir", gone.to_str().unwrap()]).unwrap();
    std::fs::remove_dir_all(&gone).unwrap();
    for (args, text) in [
        (vec!["SHUTDOWN", "BADARG"], "syntax error"),
        (vec!["SHUTDOWN", "SAVE", "NOSAVE"], "syntax error"),
        (vec!["SHUTDOWN", "ABORT", "NOW"], "syntax error"),
        (vec!["SHUTDOWN", "ABORT"], "No shutdown in progress."),
        (vec!["SHUTDOWN", "SAVE"], "Errors trying to SHUTDOWN. Check logs."),
    ] {
        let err = q::<String>(&mut c, &args).unwrap_err();
        assert!(err.to_string().contains(text), "{args:?}: {err}");
    }
    assert!(server.is_running());
    // The connection closes without a reply and the process exits.
    assert!(q::<String>(&mut c, &["SHUTDOWN", "NOSAVE", "NOW"]).is_err());
    let deadline = Instant::now() + Duration::from_secs(5);
    while server.is_running() {
        assert!(Instant::now() < deadline, "the server did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn replication_and_cluster_commands_answer_as_a_primary_without_replicas() {
    let server = Server::start(2);
    let mut c = server.client();
    let role: redis::Value = q(&mut c, &["ROLE"]).unwrap();
    let role: (String, i64, Vec<String>) = redis::from_redis_value(&role).unwrap();
    assert_eq!(role, ("master".to_string(), 0, vec![]));
    // WAIT for no replica answers at once; for one, after its timeout.
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["WAIT", "0", "0"]).unwrap(), 0);
    let started = Instant::now();
    assert_eq!(q::<i64>(&mut c, &["WAIT", "1", "100"]).unwrap(), 0);
    assert!(started.elapsed() >= Duration::from_millis(100));
    // WAIT 1 0 waits until CLIENT UNBLOCK: 0, or UNBLOCKED with ERROR.
    for (how, reply) in
        [("TIMEOUT", ":0\r\n"), ("ERROR", "-UNBLOCKED client unblocked via CLIENT UNBLOCK\r\n")]
    {
        let mut waiter = server.raw();
        let id = waiter.call(&["CLIENT", "ID"]);
        let id = id.trim_start_matches(':').trim_end().to_string();
        waiter.cmd(&[b"WAIT", b"1", b"0"]);
        let deadline = Instant::now() + Duration::from_secs(5);
        while common::info_field(&mut c, "clients", "blocked_clients") != "1" {
            assert!(Instant::now() < deadline, "WAIT did not block");
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(q::<i64>(&mut c, &["CLIENT", "UNBLOCK", &id, how]).unwrap(), 1);
        assert_eq!(String::from_utf8(waiter.read_frame()).unwrap(), reply);
    }
    // Inside MULTI, WAIT never blocks.
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    let _: () = q(&mut c, &["WAIT", "5", "0"]).unwrap();
    assert_eq!(q::<Vec<i64>>(&mut c, &["EXEC"]).unwrap(), [0]);
    for (args, want) in [
        (&["WAIT", "x", "1"][..], "value is not an integer or out of range"),
        (&["WAIT", "1", "-1"], "timeout is negative"),
        (&["WAIT", "1", "1.5"], "timeout is not an integer or out of range"),
        (&["READONLY"], "This instance has cluster support disabled"),
        (&["READWRITE"], "This instance has cluster support disabled"),
        (&["ASKING"], "This instance has cluster support disabled"),
    ] {
        let e = q::<redis::Value>(&mut c, args).unwrap_err().to_string();
        assert!(e.contains(want), "{args:?}: {e}");
    }
}

#[test]
fn a_signal_whose_save_fails_keeps_serving_and_abort_cancels_a_pending_one() {
    let dir = common::temp_dir("sigsave");
    let server =
        Server::start_with(&["--shards", "2", "--dir", dir.to_str().unwrap(), "--save", "3600 1"]);
    let mut c = server.client();
    let _: () = q(&mut c, &["SET", "k", "v"]).unwrap();
    // A directory where the snapshot goes: the final save cannot rename.
    std::fs::create_dir_all(dir.join("dump.rdb")).unwrap();
    server.signal(libc::SIGTERM);
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    let err = q::<String>(&mut c, &["SHUTDOWN", "ABORT"]).unwrap_err().to_string();
    assert!(err.contains("No shutdown in progress"), "{err}");
    // While the cron is paused a signal's shutdown waits, and ABORT calls it off.
    std::fs::remove_dir(dir.join("dump.rdb")).unwrap();
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "1"]).unwrap();
    server.signal(libc::SIGTERM);
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(q::<String>(&mut c, &["SHUTDOWN", "ABORT"]).unwrap(), "OK");
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "0"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
}

#[test]
fn debug_populate_makes_keys_on_every_shard_as_redis() {
    let server = Server::start(2);
    let mut c = server.client();
    q::<()>(&mut c, &["SET", "key:3", "mine"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["DEBUG", "POPULATE", "1000"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 1000);
    // An existing key is left alone.
    assert_eq!(q::<String>(&mut c, &["GET", "key:3"]).unwrap(), "mine");
    assert_eq!(q::<String>(&mut c, &["GET", "key:999"]).unwrap(), "value:999");
    let per_shard = common::info_field(&mut c, "keyspace", "db0");
    assert!(per_shard.starts_with("keys=1000"), "{per_shard}");
    // A prefix and a size: zero-padded, or cut.
    q::<String>(&mut c, &["DEBUG", "POPULATE", "3", "big", "10"]).unwrap();
    let v: Vec<u8> = q(&mut c, &["GET", "big:1"]).unwrap();
    assert_eq!(v, b"value:1\0\0\0");
    q::<String>(&mut c, &["DEBUG", "POPULATE", "3", "small", "3"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["GET", "small:2"]).unwrap(), "val");
    let err = q::<String>(&mut c, &["DEBUG", "POPULATE", "-1"]).unwrap_err();
    assert!(err.to_string().contains("value is out of range, must be positive"), "{err}");
}
