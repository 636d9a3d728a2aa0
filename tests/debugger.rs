//! The Lua debugger (`SCRIPT DEBUG YES|SYNC`, `redis-cli --ldb`) against a
//! real 2-shard server: redis-cli's sessions read exactly as with
//! redis-server, SYNC keeps the script's changes and blocks the server, YES
//! forks (the server keeps answering, the changes are rolled back), and the
//! wire protocol's edges (refusals, unknown commands, a client that goes
//! away mid-session) behave as Redis 7.0's.

mod common;
use common::{keys_on_two_shards, q, RedisServer, Server};
use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A script that touches keys of both shards and uses every kind of log.
const SCRIPT: &str = "local a = 1
redis.call('set', KEYS[1], ARGV[1])
local b = redis.call('get', KEYS[2])
redis.debug('b is', b, {1, {x = 2}})
redis.breakpoint()
return {a, b}
";

/// Debugger commands covering the console's commands and answers.
const INPUT: &str = "n\nn\nprint\nn\np b\np KEYS\np nosuch\nr get nosuchkey\n\
e 1+2\ne x(\nt\nw\nb\nb 6\nb 99\nb x\nb -99\nl 2 0\nm 3\nh\nabc\nc\nc\n";

/// redis-cli's output for a session on `port`, colours stripped.
fn redis_cli_session(
    port: u16,
    mode: &str,
    script: &std::path::Path,
    keys: (&str, &str),
) -> String {
    let mut child = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--no-raw", mode, "--eval"])
        .arg(script)
        .args([keys.0, keys.1, ",", "value"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("redis-cli (apt install redis-tools) is required");
    child.stdin.take().unwrap().write_all(INPUT.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut plain = String::new();
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\x1b' {
            for c in chars.by_ref() {
                if c == 'm' {
                    break;
                }
            }
        } else {
            plain.push(c);
        }
    }
    // Addresses of functions differ from run to run.
    plain.lines().filter(|l| !l.contains("function@")).collect::<Vec<_>>().join("\n")
}

#[test]
fn redis_cli_sessions_read_as_with_redis_server() {
    let Some(redis) = RedisServer::start_default() else { return };
    let server = Server::start(2);
    let dir = common::temp_dir("ldb");
    let script = dir.join("script.lua");
    std::fs::write(&script, SCRIPT).unwrap();
    let (a, b) = keys_on_two_shards();
    for (mode, kept) in [("--ldb-sync-mode", true), ("--ldb", false)] {
        let mut ours = server.client();
        let mut theirs = redis.client();
        for c in [&mut ours, &mut theirs] {
            q::<()>(c, &["MSET", &a, "old", &b, "other"]).unwrap();
        }
        let want = redis_cli_session(redis.port, mode, &script, (&a, &b));
        let got = redis_cli_session(server.port, mode, &script, (&a, &b));
        assert!(want.contains("stop reason = redis.breakpoint() called"), "{want}");
        assert_eq!(got, want, "{mode}");
        let expected = if kept { "value" } else { "old" };
        assert_eq!(q::<String>(&mut ours, &["GET", &a]).unwrap(), expected, "{mode}");
        assert_eq!(q::<String>(&mut theirs, &["GET", &a]).unwrap(), expected, "{mode}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// The array of status lines the debugger sends.
fn log(lines: &[&str]) -> String {
    let mut out = format!("*{}\r\n", lines.len());
    for l in lines {
        out.push('+');
        out.push_str(l);
        out.push_str("\r\n");
    }
    out
}

fn read_text(raw: &mut common::Raw) -> String {
    String::from_utf8_lossy(&raw.read_frame()).into_owned()
}

#[test]
fn sync_sessions_speak_redis_protocol_and_keep_changes() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut raw = server.raw();
    assert_eq!(raw.call(&["SCRIPT", "DEBUG", "MAYBE"]), "-ERR Use SCRIPT DEBUG YES/SYNC/NO\r\n");
    raw.send(b"PING\r\nSCRIPT DEBUG SYNC\r\n");
    assert_eq!(read_text(&mut raw), "+PONG\r\n");
    assert_eq!(read_text(&mut raw), "-ERR SCRIPT DEBUG must be called outside a pipeline\r\n");
    assert_eq!(raw.call(&["SCRIPT", "DEBUG", "SYNC"]), "+OK\r\n");
    // A debugging EVAL that fails before its script runs ends the session
    // too, and leaves no session behind for anyone else's next EVAL.
    assert_eq!(raw.call(&["EVAL", "return 1", "x"]), log(&["<endsession>"]));
    assert_eq!(read_text(&mut raw), "-ERR value is not an integer or out of range\r\n");
    assert!(raw.is_closed());
    let mut raw = server.raw();
    raw.call(&["SCRIPT", "DEBUG", "SYNC"]);
    assert_eq!(raw.call(&["EVAL", "return (", "0"]), log(&["<endsession>"]));
    assert_eq!(
        read_text(&mut raw),
        "-ERR Error compiling script (new function): user_script:1: unexpected symbol near '<eof>'\r\n"
    );
    assert!(raw.is_closed());
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["EVAL", "return 7", "0"]).unwrap(), 7);
    let mut raw = server.raw();
    assert_eq!(raw.call(&["SCRIPT", "DEBUG", "SYNC"]), "+OK\r\n");
    let sha = "0".repeat(40);
    assert_eq!(
        raw.call(&["EVALSHA", &sha, "0"]),
        "-ERR Please use EVAL instead of EVALSHA for debugging\r\n"
    );
    let body = "redis.call('set', KEYS[1], 'v1')\nreturn redis.call('incr', KEYS[2])";
    assert_eq!(
        raw.call(&["EVAL", body, "2", &a, &b]),
        log(&[
            "* Stopped at 1, stop reason = step over",
            "-> 1   redis.call('set', KEYS[1], 'v1')"
        ])
    );
    // Redis's own protocol tests: arguments with NUL bytes are unknown.
    for bad in [&b"hello\0world"[..], b"hello\0", b"\0hello", b"\0hello\0"] {
        raw.cmd(&[bad]);
        assert_eq!(
            read_text(&mut raw),
            log(&["<error> Unknown Redis Lua debugger command or wrong number of arguments."])
        );
    }
    // The whole server waits for the session: another client's command
    // is answered only once it has ended.
    let mut other = server.raw();
    other.cmd(&[b"GET", a.as_bytes()]);
    std::thread::sleep(Duration::from_millis(200));
    other.stream.set_nonblocking(true).unwrap();
    let mut byte = [0u8; 1];
    let early = std::io::Read::read(&mut other.stream, &mut byte);
    assert!(early.is_err(), "answered during a SYNC session: {early:?}");
    other.stream.set_nonblocking(false).unwrap();
    assert_eq!(
        raw.call(&["s"]),
        log(&[
            "<redis> set key:0 v1",
            "<reply> \"+OK\"",
            "* Stopped at 2, stop reason = step over",
            "-> 2   return redis.call('incr', KEYS[2])",
        ])
        .replace("key:0", &a)
    );
    assert_eq!(raw.call(&["c"]), log(&["<endsession>"]));
    assert_eq!(read_text(&mut raw), ":1\r\n");
    assert!(raw.is_closed(), "the connection ends with the session");
    assert_eq!(read_text(&mut other), "$2\r\nv1\r\n");
}

#[test]
fn a_client_that_leaves_lets_the_script_finish() {
    let server = Server::start(2);
    let mut raw = server.raw();
    assert_eq!(raw.call(&["SCRIPT", "DEBUG", "SYNC"]), "+OK\r\n");
    raw.call(&["EVAL", "redis.call('set', 'left', 'yes')\nreturn 1", "0"]);
    // Redis's "lua stack overflow" test: a `redis` command of 100
    // arguments, then the client goes.
    let mut argv: Vec<&[u8]> = vec![b"redis"];
    argv.extend(std::iter::repeat_n(&b"test"[..], 100));
    raw.cmd(&argv);
    let reply = read_text(&mut raw);
    assert!(reply.contains("Unknown Redis command called from script"), "{reply}");
    drop(raw);
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
    assert_eq!(q::<String>(&mut c, &["GET", "left"]).unwrap(), "yes");
}

#[test]
fn forked_sessions_leave_the_server_serving_and_the_data_unchanged() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    q::<()>(&mut c, &["MSET", &a, "before", &b, "before"]).unwrap();
    let mut raw = server.raw();
    assert_eq!(raw.call(&["SCRIPT", "DEBUG", "YES"]), "+OK\r\n");
    let body = "redis.call('mset', KEYS[1], 'during', KEYS[2], 'during')\n\
                return redis.call('mget', KEYS[1], KEYS[2])";
    let stop = raw.call(&["EVAL", body, "2", &a, &b]);
    assert!(stop.contains("* Stopped at 1, stop reason = step over"), "{stop}");
    // The session waits for its client; the server answers everyone else.
    let started = Instant::now();
    assert_eq!(q::<String>(&mut c, &["SET", "meanwhile", "1"]).unwrap(), "OK");
    assert!(started.elapsed() < Duration::from_secs(2));
    assert_eq!(raw.call(&["c"]), log(&["<endsession>"]));
    assert_eq!(read_text(&mut raw), "*2\r\n$6\r\nduring\r\n$6\r\nduring\r\n");
    assert!(raw.is_closed(), "the connection ends with the session");
    let after: Vec<String> = redis::cmd("MGET").arg(&a).arg(&b).query(&mut c).unwrap();
    assert_eq!(after, ["before", "before"], "a forked session's changes are rolled back");
    // `abort` ends the script with Redis's error.
    let mut raw = server.raw();
    raw.call(&["SCRIPT", "DEBUG", "YES"]);
    raw.call(&["EVAL", "return 1", "0"]);
    assert_eq!(raw.call(&["a"]), log(&["<endsession>"]));
    let reply = read_text(&mut raw);
    assert!(reply.starts_with("-ERR script aborted for user request script: "), "{reply}");
    assert!(reply.ends_with(", on @user_script:1.\r\n"), "{reply}");
}
