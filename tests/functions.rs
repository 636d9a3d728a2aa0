//! Redis 7 functions against a real 2-shard server: FUNCTION LOAD, LIST,
//! DELETE, FLUSH, DUMP, RESTORE, STATS, KILL, HELP and FCALL/FCALL_RO,
//! with keys on one and on two shards.

mod common;
use common::{keys_on_two_shards, Server};
use std::thread;
use std::time::Duration;

const LIB: &str = "#!lua name=mylib
redis.register_function('incr2', function(keys, args)
  redis.call('incrby', keys[1], args[1])
  return redis.call('incrby', keys[2], args[1])
end)
redis.register_function{function_name='getter', callback=function(keys) return redis.call('get', keys[1]) end,
  flags={'no-writes'}, description='reads a key'}";

#[test]
fn load_call_list_delete() {
    let server = Server::start(2);
    let mut r = server.raw();
    let (a, b) = keys_on_two_shards();
    assert_eq!(r.call(&["FUNCTION", "LOAD", LIB]), "$5\r\nmylib\r\n");
    // Keys on both shards: runs as one transaction.
    assert_eq!(r.call(&["FCALL", "incr2", "2", &a, &b, "5"]), ":5\r\n");
    assert_eq!(r.call(&["MGET", &a, &b]), "*2\r\n$1\r\n5\r\n$1\r\n5\r\n");
    // Function names ignore case; FCALL_RO runs no-writes functions only.
    assert_eq!(r.call(&["FCALL_RO", "GETTER", "1", &b]), "$1\r\n5\r\n");
    assert_eq!(
        r.call(&["FCALL_RO", "incr2", "2", &a, &b, "1"]),
        "-ERR Can not execute a script with write flag using *_ro command.\r\n"
    );
    assert_eq!(r.call(&["FCALL", "nosuch", "0"]), "-ERR Function not found\r\n");
    assert_eq!(r.call(&["FCALL", "getter", "x"]), "-ERR Bad number of keys provided\r\n");
    assert_eq!(
        r.call(&["FCALL", "getter", "3", "a"]),
        "-ERR Number of keys can't be greater than number of args\r\n"
    );
    assert_eq!(r.call(&["FCALL", "getter", "-1"]), "-ERR Number of keys can't be negative\r\n");
    let err = r.call(&["FCALL", "getter", "1", &a, "extra"]);
    assert_eq!(err, "$1\r\n5\r\n");
    // Undeclared keys as for EVAL.
    assert!(r
        .call(&["FCALL", "getter", "0"])
        .contains("Lua redis lib command arguments must be strings or integers"));
    assert_eq!(
        r.call(&["FUNCTION", "LIST"]),
        "*1\r\n*6\r\n$12\r\nlibrary_name\r\n$5\r\nmylib\r\n$6\r\nengine\r\n$3\r\nLUA\r\n$9\r\nfunctions\r\n*2\r\n\
         *6\r\n$4\r\nname\r\n$6\r\ngetter\r\n$11\r\ndescription\r\n$11\r\nreads a key\r\n$5\r\nflags\r\n*1\r\n+no-writes\r\n\
         *6\r\n$4\r\nname\r\n$5\r\nincr2\r\n$11\r\ndescription\r\n$-1\r\n$5\r\nflags\r\n*0\r\n"
    );
    assert!(r.call(&["FUNCTION", "LIST", "WITHCODE"]).contains("library_code"));
    assert!(r.call(&["FUNCTION", "LIST", "LIBRARYNAME", "MY*"]).starts_with("*1\r\n"));
    assert_eq!(r.call(&["FUNCTION", "LIST", "LIBRARYNAME", "other*"]), "*0\r\n");
    assert_eq!(
        r.call(&["FUNCTION", "LIST", "LIBRARYNAME"]),
        "-ERR library name argument was not given\r\n"
    );
    assert_eq!(r.call(&["FUNCTION", "LIST", "bogus"]), "-ERR Unknown argument bogus\r\n");
    // Errors of FUNCTION LOAD.
    assert_eq!(r.call(&["FUNCTION", "LOAD", LIB]), "-ERR Library 'mylib' already exists\r\n");
    assert_eq!(r.call(&["FUNCTION", "LOAD", "REPLACE", LIB]), "$5\r\nmylib\r\n");
    assert_eq!(r.call(&["FUNCTION", "LOAD", "BAD", LIB]), "-ERR Unknown option given: BAD\r\n");
    assert_eq!(
        r.call(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=other\nredis.register_function('incr2', function() end)"
        ]),
        "-ERR Function incr2 already exists\r\n"
    );
    assert_eq!(r.call(&["FUNCTION", "LOAD", "return 1"]), "-ERR Missing library metadata\r\n");
    assert_eq!(
        r.call(&["FUNCTION", "LOAD", "#!nope name=x\nreturn 1"]),
        "-ERR Engine 'nope' not found\r\n"
    );
    assert_eq!(
        r.call(&["FUNCTION", "LOAD", "#!lua name=x\nlocal a = 1"]),
        "-ERR No functions registered\r\n"
    );
    assert!(r
        .call(&[
            "FUNCTION",
            "LOAD",
            "#!lua name=bad-name
return 1"
        ])
        .contains("Library names can only contain letters"));
    assert!(r
        .call(&["FUNCTION", "LOAD", "#!lua name=x\nreturn +"])
        .starts_with("-ERR Error compiling function:"));
    assert!(r
        .call(&["FUNCTION", "LOAD", "#!lua name=x\nredis.call('ping')"])
        .contains("Script attempted to access nonexistent global variable 'call'"));
    assert!(r
        .call(&["FUNCTION", "LOAD", "#!lua name=x\nredis.register_function('f', function() end)\nredis.register_function('f', function() end)"])
        .contains("Function already exists in the library"));
    assert!(r
        .call(&["FUNCTION", "LOAD", "#!lua name=x\nwhile true do end"])
        .contains("FUNCTION LOAD timeout"));
    // DELETE and FLUSH reach every shard.
    assert_eq!(r.call(&["FUNCTION", "DELETE", "nosuch"]), "-ERR Library not found\r\n");
    assert_eq!(r.call(&["FUNCTION", "DELETE", "mylib"]), "+OK\r\n");
    assert_eq!(r.call(&["FCALL", "getter", "1", &a]), "-ERR Function not found\r\n");
    assert_eq!(r.call(&["FCALL", "getter", "1", &b]), "-ERR Function not found\r\n");
    r.call(&["FUNCTION", "LOAD", LIB]);
    assert_eq!(
        r.call(&["FUNCTION", "FLUSH", "bogus"]),
        "-ERR FUNCTION FLUSH only supports SYNC|ASYNC option\r\n"
    );
    assert_eq!(r.call(&["FUNCTION", "FLUSH", "ASYNC"]), "+OK\r\n");
    assert_eq!(r.call(&["FUNCTION", "LIST"]), "*0\r\n");
    assert!(r.call(&["FUNCTION", "HELP"]).contains("RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]"));
}

#[test]
fn runtime_errors_name_the_function() {
    let server = Server::start(2);
    let mut r = server.raw();
    r.call(&["FUNCTION", "LOAD", "#!lua name=e\nredis.register_function('boom', function()\n  error('bad')\nend)\nredis.register_function('glob', function() return KEYS end)"]);
    assert_eq!(
        r.call(&["FCALL", "boom", "0"]),
        "-ERR user_function:3: bad script: boom, on @user_function:3.\r\n"
    );
    assert!(r
        .call(&["FCALL", "glob", "0"])
        .contains("Script attempted to access nonexistent global variable 'KEYS'"));
}

#[test]
fn dump_and_restore() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let _: String = redis::cmd("FUNCTION").arg("LOAD").arg(LIB).query(&mut c).unwrap();
    let dump: Vec<u8> = redis::cmd("FUNCTION").arg("DUMP").query(&mut c).unwrap();
    let _: () = redis::cmd("FUNCTION").arg("FLUSH").query(&mut c).unwrap();
    let restore = |c: &mut redis::Connection, policy: Option<&str>| -> redis::RedisResult<String> {
        let mut cmd = redis::cmd("FUNCTION");
        cmd.arg("RESTORE").arg(&dump);
        if let Some(p) = policy {
            cmd.arg(p);
        }
        cmd.query(c)
    };
    assert_eq!(restore(&mut c, None).unwrap(), "OK");
    let n: i64 =
        redis::cmd("FCALL").arg("incr2").arg(2).arg(&a).arg(&b).arg(1).query(&mut c).unwrap();
    assert_eq!(n, 1);
    let e = restore(&mut c, Some("APPEND")).unwrap_err();
    assert!(e.to_string().contains("Library mylib already exists"), "{e}");
    assert_eq!(restore(&mut c, Some("REPLACE")).unwrap(), "OK");
    assert_eq!(restore(&mut c, Some("FLUSH")).unwrap(), "OK");
    let e = restore(&mut c, Some("BAD")).unwrap_err();
    assert!(e.to_string().contains("Wrong restore policy given"), "{e}");
    let e =
        redis::cmd("FUNCTION").arg("RESTORE").arg("garbage").query::<String>(&mut c).unwrap_err();
    assert!(e.to_string().contains("payload version or checksum are wrong"), "{e}");
}

#[test]
fn stats_and_kill() {
    let server = Server::start(2);
    let mut r = server.raw();
    let (a, _) = keys_on_two_shards();
    assert_eq!(
        r.call(&["FUNCTION", "STATS"]),
        "*4\r\n$14\r\nrunning_script\r\n$-1\r\n$7\r\nengines\r\n*2\r\n$3\r\nLUA\r\n*4\r\n$15\r\nlibraries_count\r\n:0\r\n$15\r\nfunctions_count\r\n:0\r\n"
    );
    assert_eq!(r.call(&["CONFIG", "SET", "busy-reply-threshold", "50"]), "+OK\r\n");
    r.call(&[
        "FUNCTION",
        "LOAD",
        "#!lua name=slow\nredis.register_function('spin', function() while true do end end)",
    ]);
    assert_eq!(r.call(&["FUNCTION", "KILL"]), "-NOTBUSY No scripts in execution right now.\r\n");
    let mut runner = server.raw();
    runner.cmd(&[b"FCALL", b"spin", b"1", a.as_bytes()]);
    thread::sleep(Duration::from_millis(300));
    // Find a connection on the other core (the busy one does not answer).
    let mut other = None;
    for _ in 0..40 {
        let mut c = server.raw();
        c.stream.set_read_timeout(Some(Duration::from_millis(300))).unwrap();
        c.cmd(&[b"FUNCTION", b"STATS"]);
        let mut buf = [0u8; 1024];
        if let Ok(n) = std::io::Read::read(&mut c.stream, &mut buf) {
            let stats = String::from_utf8_lossy(&buf[..n]).into_owned();
            assert!(stats.contains("running_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin"), "{stats}");
            assert!(stats.contains("$7\r\ncommand\r\n*4\r\n$5\r\nFCALL"), "{stats}");
            c.stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            other = Some(c);
            break;
        }
    }
    let mut other = other.expect("a connection on the other core");
    assert_eq!(other.call(&["GET", &a]), "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n");
    assert_eq!(other.call(&["SCRIPT", "KILL"]), "-BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE.\r\n");
    assert_eq!(other.call(&["FUNCTION", "KILL"]), "+OK\r\n");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script: spin"),
        "{killed}"
    );
}
