//! Lua scripting against a real 2-shard server: EVAL/EVALSHA/EVAL_RO/
//! EVALSHA_RO, SCRIPT LOAD/EXISTS/FLUSH/KILL/HELP, conversions, errors, the
//! sandbox, the bundled libraries, scripts on one and on two shards
//! (atomic), the undeclared-key rule, BUSY replies and SCRIPT KILL, and the
//! flash sale of issue 5.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

fn sha1(script: &str) -> String {
    ringdb_types::sha1::hex(&ringdb_types::sha1::sha1(script.as_bytes()))
}

/// Two keys on the same shard (one hash tag) and a key on the other shard.
fn keys() -> (String, String, String) {
    let (a, b) = keys_on_two_shards();
    (format!("{{{a}}}:1"), format!("{{{a}}}:2"), b)
}

#[test]
fn replies_convert_as_redis() {
    let server = Server::start(2);
    let mut r = server.raw();
    assert_eq!(r.call(&["EVAL", "return 42", "0"]), ":42\r\n");
    assert_eq!(r.call(&["EVAL", "return 3.99", "0"]), ":3\r\n");
    assert_eq!(r.call(&["EVAL", "return 'x'", "0"]), "$1\r\nx\r\n");
    assert_eq!(r.call(&["EVAL", "return true", "0"]), ":1\r\n");
    assert_eq!(r.call(&["EVAL", "return false", "0"]), "$-1\r\n");
    assert_eq!(r.call(&["EVAL", "return nil", "0"]), "$-1\r\n");
    assert_eq!(
        r.call(&["EVAL", "return {1, 'a', {2}}", "0"]),
        "*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n"
    );
    assert_eq!(r.call(&["EVAL", "return {1, nil, 3}", "0"]), "*1\r\n:1\r\n");
    assert_eq!(r.call(&["EVAL", "return {ok='fine'}", "0"]), "+fine\r\n");
    assert_eq!(r.call(&["EVAL", "return {err='BAD thing'}", "0"]), "-BAD thing\r\n");
    assert_eq!(r.call(&["EVAL", "return redis.status_reply('OK')", "0"]), "+OK\r\n");
    assert_eq!(r.call(&["EVAL", "return redis.error_reply('MY err')", "0"]), "-MY err\r\n");
    assert_eq!(r.call(&["EVAL", "return redis.error_reply('plain')", "0"]), "-ERR plain\r\n");
    assert_eq!(
        r.call(&["EVAL", "return {KEYS[1], KEYS[2], ARGV[1]}", "2", "k1", "k2", "a1"]),
        "*3\r\n$2\r\nk1\r\n$2\r\nk2\r\n$2\r\na1\r\n"
    );
    // Redis replies become Lua values and back.
    let (k, _, _) = keys();
    r.call(&["SET", &k, "v"]);
    assert_eq!(r.call(&["EVAL", "return redis.call('get', KEYS[1])", "1", &k]), "$1\r\nv\r\n");
    assert_eq!(r.call(&["EVAL", "return redis.call('get', 'no') == false", "1", "no"]), ":1\r\n");
    assert_eq!(r.call(&["EVAL", "return redis.call('set', KEYS[1], 1)", "1", &k]), "+OK\r\n");
    assert_eq!(
        r.call(&["EVAL", "return type(redis.call('incr', KEYS[1]))", "1", &k]),
        "$6\r\nnumber\r\n"
    );
    assert_eq!(r.call(&["EVAL", "return redis.call('set', KEYS[1], 1.5)", "1", &k]), "+OK\r\n");
    assert_eq!(r.call(&["GET", &k]), "$3\r\n1.5\r\n");
    // redis.pcall returns errors as tables; pcall turns them into strings.
    assert_eq!(
        r.call(&["EVAL", "local e = redis.pcall('incr', KEYS[1]) return e.err", "1", &k]),
        "$43\r\nERR value is not an integer or out of range\r\n"
    );
    // RESP3: redis.setresp(3) and a RESP3 client.
    assert_eq!(
        r.call(&["EVAL", "redis.setresp(3) return redis.call('get', 'no') == nil", "1", "no"]),
        ":1\r\n"
    );
    assert!(r.call(&["HELLO", "3"]).starts_with('%'));
    assert_eq!(r.call(&["EVAL", "redis.setresp(3) return true", "0"]), "#t\r\n");
    assert_eq!(r.call(&["EVAL", "return {double=1.5}", "0"]), ",1.5\r\n");
    assert_eq!(r.call(&["EVAL", "return {map={a=1}}", "0"]), "%1\r\n$1\r\na\r\n:1\r\n");
    assert_eq!(r.call(&["EVAL", "return {set={a=true}}", "0"]), "~1\r\n$1\r\na\r\n");
    assert_eq!(r.call(&["EVAL", "return false", "0"]), "_\r\n");
    assert_eq!(r.call(&["EVAL", "redis.setresp(3) return false", "0"]), "#f\r\n");
}

#[test]
fn errors_have_redis_texts() {
    let server = Server::start(2);
    let mut r = server.raw();
    let script = "return redis.call('nosuchcommand')";
    assert_eq!(
        r.call(&["EVAL", script, "0"]),
        format!(
            "-ERR Unknown Redis command called from script script: {}, on @user_script:1.\r\n",
            sha1(script)
        )
    );
    let script = "\n\nerror('boom')";
    assert_eq!(
        r.call(&["EVAL", script, "0"]),
        format!("-ERR user_script:3: boom script: {}, on @user_script:3.\r\n", sha1(script))
    );
    assert!(r
        .call(&["EVAL", "return redis.call('get')", "0"])
        .contains("Wrong number of args calling Redis command from script"));
    assert!(r
        .call(&["EVAL", "return redis.call()", "0"])
        .contains("Please specify at least one argument for this redis lib call"));
    assert!(r
        .call(&["EVAL", "return redis.call('get', {})", "0"])
        .contains("Lua redis lib command arguments must be strings or integers"));
    assert!(r
        .call(&["EVAL", "return redis.call('eval', 'return 1', 0)", "0"])
        .contains("This Redis command is not allowed from script"));
    assert!(r
        .call(&["EVAL", "return redis.call('info')", "0"])
        .contains("ringdb cannot run 'info' from a script"));
    assert_eq!(r.call(&["EVAL", "return redis.call('ping')", "0"]), "+PONG\r\n");
    assert_eq!(
        r.call(&["EVAL", "return 1", "2", "a"]),
        "-ERR Number of keys can't be greater than number of args\r\n"
    );
    assert_eq!(r.call(&["EVAL", "return 1", "-1"]), "-ERR Number of keys can't be negative\r\n");
    assert_eq!(
        r.call(&["EVAL", "return 1", "x"]),
        "-ERR value is not an integer or out of range\r\n"
    );
    assert_eq!(
        r.call(&["EVALSHA", "abc", "0"]),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    assert_eq!(
        r.call(&["EVALSHA", &"a".repeat(40), "0"]),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    assert!(r
        .call(&["EVAL", "return +", "0"])
        .starts_with("-ERR Error compiling script (new function): user_script:1:"));
    assert_eq!(
        r.call(&["EVAL", "#!python\nreturn 1", "0"]),
        "-ERR Unexpected engine in script shebang: #!python\r\n"
    );
    assert_eq!(
        r.call(&["EVAL", "#!lua flags=nope\nreturn 1", "0"]),
        "-ERR Unexpected flag in script shebang: nope\r\n"
    );
    assert_eq!(
        r.call(&["EVAL", "#!lua foo\nreturn 1", "0"]),
        "-ERR Unknown lua shebang option: foo\r\n"
    );
    assert_eq!(r.call(&["EVAL", "#!lua", "0"]), "-ERR Invalid script shebang\r\n");
    assert_eq!(r.call(&["EVAL"]), "-ERR wrong number of arguments for 'eval' command\r\n");
    // A shebang keeps line numbers.
    assert!(r.call(&["EVAL", "#!lua\nerror('x')", "0"]).contains("on @user_script:2."));
    // Errors of commands keep their code.
    r.call(&["SET", "s", "x"]);
    assert!(r
        .call(&["EVAL", "return redis.call('incr', KEYS[1])", "1", "s"])
        .starts_with("-ERR value is not an integer or out of range script:"));
    let pcall = "local ok, e = pcall(function() return redis.call('incr', KEYS[1]) end) return {tostring(ok), e}";
    assert_eq!(
        r.call(&["EVAL", pcall, "1", "s"]),
        "*2\r\n$5\r\nfalse\r\n$43\r\nERR value is not an integer or out of range\r\n"
    );
}

#[test]
fn script_cache_commands() {
    let server = Server::start(2);
    let mut r = server.raw();
    let (a, _, b) = keys();
    let body = "return redis.call('incr', KEYS[1])";
    let sha = sha1(body);
    assert_eq!(r.call(&["SCRIPT", "EXISTS", &sha, "ffff"]), "*2\r\n:0\r\n:0\r\n");
    assert_eq!(r.call(&["SCRIPT", "LOAD", body]), format!("$40\r\n{sha}\r\n"));
    assert_eq!(r.call(&["SCRIPT", "EXISTS", &sha, "ffff"]), "*2\r\n:1\r\n:0\r\n");
    // Loaded on every shard: keys on both run.
    assert_eq!(r.call(&["EVALSHA", &sha, "1", &a]), ":1\r\n");
    assert_eq!(r.call(&["EVALSHA", &sha.to_uppercase(), "1", &b]), ":1\r\n");
    assert!(r
        .call(&["EVALSHA_RO", &sha, "1", &b])
        .contains("Write commands are not allowed from read-only scripts."));
    // EVAL caches for EVALSHA on any shard.
    let other = "return 'cached ' .. KEYS[1]";
    r.call(&["EVAL", other, "1", &a]);
    assert_eq!(
        r.call(&["EVALSHA", &sha1(other), "1", &b]),
        format!("${}\r\ncached {b}\r\n", 7 + b.len())
    );
    assert_eq!(
        r.call(&["SCRIPT", "FLUSH", "bogus"]),
        "-ERR SCRIPT FLUSH only support SYNC|ASYNC option\r\n"
    );
    assert_eq!(r.call(&["SCRIPT", "FLUSH", "SYNC"]), "+OK\r\n");
    assert_eq!(r.call(&["SCRIPT", "EXISTS", &sha]), "*1\r\n:0\r\n");
    assert_eq!(
        r.call(&["EVALSHA", &sha, "1", &a]),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    assert_eq!(
        r.call(&["EVALSHA", &sha, "1", &b]),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    assert_eq!(r.call(&["SCRIPT", "FLUSH"]), "+OK\r\n");
    assert!(r
        .call(&["SCRIPT", "LOAD", "return +"])
        .starts_with("-ERR Error compiling script (new function)"));
    assert_eq!(r.call(&["SCRIPT", "KILL"]), "-NOTBUSY No scripts in execution right now.\r\n");
    assert!(r.call(&["SCRIPT", "HELP"]).contains("LOAD <script>"));
    assert_eq!(r.call(&["SCRIPT", "NOPE"]), "-ERR unknown subcommand 'NOPE'. Try SCRIPT HELP.\r\n");
}

#[test]
fn read_only_scripts() {
    let server = Server::start(2);
    let mut r = server.raw();
    let (a, _, b) = keys();
    r.call(&["SET", &b, "v"]);
    assert_eq!(r.call(&["EVAL_RO", "return redis.call('get', KEYS[1])", "1", &b]), "$1\r\nv\r\n");
    assert!(r
        .call(&["EVAL_RO", "return redis.call('set', KEYS[1], 1)", "1", &a])
        .contains("Write commands are not allowed from read-only scripts."));
    assert!(r
        .call(&["EVAL", "#!lua flags=no-writes\nreturn redis.call('del', KEYS[1])", "1", &a])
        .contains("Write commands are not allowed from read-only scripts."));
    assert_eq!(
        r.call(&["EVAL_RO", "#!lua\nreturn 1", "0"]),
        "-ERR Can not execute a script with write flag using *_ro command.\r\n"
    );
    assert_eq!(r.call(&["EVAL_RO", "#!lua flags=no-writes\nreturn 1", "0"]), ":1\r\n");
    assert_eq!(r.call(&["GET", &b]), "$1\r\nv\r\n");
}

#[test]
fn sandbox_matches_redis() {
    let server = Server::start(2);
    let mut r = server.raw();
    let has = |r: &mut Raw, script: &str, text: &str| {
        let reply = r.call(&["EVAL", script, "0"]);
        assert!(reply.contains(text), "{script}: {reply}");
    };
    has(&mut r, "return a", "Script attempted to access nonexistent global variable 'a'");
    has(&mut r, "a = 10", "Attempt to modify a readonly table");
    has(&mut r, "return os.time()", "nonexistent global variable 'os'");
    has(&mut r, "return io", "nonexistent global variable 'io'");
    has(&mut r, "loadfile('x')", "nonexistent global variable 'loadfile'");
    has(&mut r, "dofile('x')", "nonexistent global variable 'dofile'");
    has(&mut r, "print('x')", "nonexistent global variable 'print'");
    has(&mut r, "setmetatable(_G, {})", "Attempt to modify a readonly table");
    has(&mut r, "getmetatable(_G).__index = {}", "Attempt to modify a readonly table");
    has(&mut r, "redis.call = function() end", "Attempt to modify a readonly table");
    has(&mut r, "cjson.encode = nil", "Attempt to modify a readonly table");
    has(&mut r, "string.len = nil", "Attempt to modify a readonly table");
    has(&mut r, "rawset(_G, 'x', 1)", "Attempt to modify a readonly table");
    has(
        &mut r,
        "loadstring(string.dump(function() return 1 end))()",
        "attempt to call a nil value",
    );
    // Locals and KEYS/ARGV are fine; nothing leaks between scripts.
    assert_eq!(r.call(&["EVAL", "local x = 5 return x", "0"]), ":5\r\n");
    // math.random: seeded by math.randomseed, as Redis's generator.
    let seeded = "math.randomseed(ARGV[1]) return tostring(math.random())";
    assert_eq!(r.call(&["EVAL", seeded, "0", "42"]), r.call(&["EVAL", seeded, "0", "42"]));
    assert_eq!(r.call(&["EVAL", "return math.random(10, 10)", "0"]), ":10\r\n");
    assert_eq!(
        r.call(&["EVAL", "return redis.sha1hex('Pizza & Mandolino')", "0"]),
        "$40\r\n74822d82031af7493c20eefa13bd07ec4fada82f\r\n"
    );
    assert_eq!(r.call(&["EVAL", "return redis.REDIS_VERSION", "0"]), "$6\r\n7.0.15\r\n");
    assert_eq!(r.call(&["EVAL", "return redis.LOG_WARNING", "0"]), ":3\r\n");
    assert_eq!(
        r.call(&["EVAL", "redis.log(redis.LOG_WARNING, 'from a test') return 1", "0"]),
        ":1\r\n"
    );
    assert!(r.call(&["EVAL", "redis.log(9, 'x')", "0"]).contains("Invalid debug level."));
    assert!(r.call(&["EVAL", "redis.setresp(4)", "0"]).contains("RESP version must be 2 or 3."));
}

#[test]
fn bundled_libraries() {
    let server = Server::start(2);
    let mut c = server.client();
    let s = |c: &mut redis::Connection, script: &str| -> String {
        q(c, &["EVAL", script, "0"]).unwrap()
    };
    assert_eq!(s(&mut c, "return cjson.encode({a = {1, 2, 'x'}})"), r#"{"a":[1,2,"x"]}"#);
    assert_eq!(s(&mut c, r#"return cjson.decode('{"k": [1, "two"]}').k[2]"#), "two");
    assert_eq!(
        s(&mut c, "local t = cmsgpack.unpack(cmsgpack.pack({1, 'b', true})) return t[2]"),
        "b"
    );
    assert_eq!(s(&mut c, "local h = '' for _, b in ipairs({string.byte(cmsgpack.pack(0.1), 1, -1)}) do h = h .. string.format('%02x', b) end return h"), "cb3fb999999999999a");
    assert_eq!(s(&mut c, "return bit.tohex(bit.bor(0xf0, 0x0f))"), "000000ff");
    assert_eq!(s(&mut c, "return tostring(bit.lshift(1, 4) + bit.rshift(256, 4) + bit.bxor(5, 3) + bit.band(12, 10))"), "46");
    assert_eq!(s(&mut c, "return tostring(struct.unpack('>I2', struct.pack('>I2', 513)))"), "513");
    assert_eq!(s(&mut c, "return tostring(struct.size('>iH'))"), "6");
}

#[test]
fn scripts_on_two_shards_run_atomically() {
    let server = Server::start(2);
    let (a, _, b) = keys();
    let mut c = server.client();
    // One script writes keys on both shards.
    let set_both = "redis.call('set', KEYS[1], ARGV[1]) redis.call('set', KEYS[2], ARGV[1]) return redis.call('mget', KEYS[1], KEYS[2])";
    let v: Vec<String> = q(&mut c, &["EVAL", set_both, "2", &a, &b, "1"]).unwrap();
    assert_eq!(v, vec!["1", "1"]);
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2 {
        let (a, b, stop, url) = (a.clone(), b.clone(), stop.clone(), server.url());
        writers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let v = format!("{w}-{n}");
                let _: Vec<String> = q(&mut c, &["EVAL", set_both, "2", &a, &b, &v]).unwrap();
                n += 1;
            }
            n
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (a, b, stop, url) = (a.clone(), b.clone(), stop.clone(), server.url());
        readers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
                assert_eq!(v[0], v[1], "MGET saw a half-applied script");
                n += 1;
            }
            n
        }));
    }
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers.into_iter().map(|t| t.join().unwrap()).sum();
    let reads: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(writes > 50 && reads > 50, "too little traffic: {writes} writes, {reads} reads");
}

#[test]
fn undeclared_keys_are_served_unless_refused() {
    let server = Server::start(2);
    let mut r = server.raw();
    let (a, a2, b) = keys();
    let touch = "return redis.call('set', ARGV[1], 'x')";
    // As in Redis: any key, on either shard, declared or not; gathered
    // scripts too.
    assert_eq!(r.call(&["EVAL", touch, "1", &a, &a2]), "+OK\r\n");
    assert_eq!(r.call(&["EVAL", touch, "1", &a, &b]), "+OK\r\n");
    assert_eq!(r.call(&["EVAL", touch, "2", &a, &b, &a2]), "+OK\r\n");
    assert_eq!(r.call(&["EVAL", "return redis.call('get', ARGV[1])", "0", &b]), "$1\r\nx\r\n");
    // `lua-allow-undeclared-keys no` refuses them, with ringdb's old error.
    assert_eq!(r.call(&["CONFIG", "SET", "lua-allow-undeclared-keys", "no"]), "+OK\r\n");
    let reply = r.call(&["EVAL", touch, "1", &a, &a2]);
    assert_eq!(
        reply,
        format!(
            "-ERR script tried accessing undeclared key: {a2} script: {}, on @user_script:1.\r\n",
            sha1(touch)
        )
    );
    // Unless the script asks for them (ringdb's shebang flag).
    let flagged = format!("#!lua flags=allow-undeclared-keys\n{touch}");
    assert_eq!(r.call(&["EVAL", &flagged, "1", &a, &b]), "+OK\r\n");
}

/// A script whose runs stay on its declared key's shard, busy when told.
const SPIN: &str = "if ARGV[1] == 'spin' then while true do end end return 1";

/// Runs SPIN once on `conn` without spinning: its core learns that the
/// script stays on `key`'s shard, so a spinning run is held there (the
/// other cores keep their shards, and answer BUSY from their routers).
fn teach_spin(conn: &mut Raw, key: &str) {
    assert_eq!(conn.call(&["EVAL", SPIN, "1", key, "no"]), ":1\r\n");
}

#[test]
fn busy_scripts_get_busy_replies_and_script_kill() {
    let server = Server::start(2);
    let (a, _, b) = keys();
    let mut admin = server.client();
    let _: () = q(&mut admin, &["CONFIG", "SET", "busy-reply-threshold", "50"]).unwrap();
    // A client on the other core than a's (shard 0).
    let mut other = common::raw_on_shard(&server, &mut admin, 1, &mut Vec::new());
    let mut tx = common::raw_on_shard(&server, &mut admin, 1, &mut Vec::new());
    let mut tx2 = common::raw_on_shard(&server, &mut admin, 1, &mut Vec::new());
    // A transaction opened before the script.
    assert_eq!(tx2.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(tx2.call(&["SET", &b, "2"]), "+QUEUED\r\n");
    // A script that never ends, held on a's shard.
    let mut runner = server.raw();
    teach_spin(&mut runner, &a);
    runner.cmd(&[b"EVAL", SPIN.as_bytes(), b"1", a.as_bytes(), b"spin"]);
    // The client on the other core gets BUSY, for any key: the whole
    // server is busy, as in Redis.
    wait_until_busy(&mut other);
    assert_eq!(other.call(&["GET", &a]), BUSY);
    assert_eq!(other.call(&["SET", &b, "1"]), BUSY);
    assert!(other.call(&["DBSIZE"]).starts_with("-BUSY"));
    assert_eq!(other.call(&["FUNCTION", "KILL"]), BUSY);
    // A command refused with BUSY inside MULTI fails the EXEC (Redis's
    // rejectCommand flags the transaction).
    assert_eq!(tx.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(tx.call(&["GET", &a]), BUSY);
    // EXEC itself is refused whole, and the transaction is gone.
    assert_eq!(tx2.call(&["EXEC"]), exec_abort(BUSY));
    assert_eq!(other.call(&["SCRIPT", "KILL"]), "+OK\r\n");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(
        killed.starts_with("-ERR Script killed by user with SCRIPT KILL... script:"),
        "{killed}"
    );
    let deadline = Instant::now() + Duration::from_secs(5);
    // Once the script is gone, the GET is queued.
    while tx.call(&["GET", &a]).starts_with("-BUSY") {
        assert!(Instant::now() < deadline, "still busy after the kill");
        thread::sleep(Duration::from_millis(20));
    }
    assert!(tx.call(&["EXEC"]).starts_with("-EXECABORT"));
    assert_eq!(tx2.call(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
    assert_eq!(other.call(&["SCRIPT", "KILL"]), "-NOTBUSY No scripts in execution right now.\r\n");

    // pcall cannot catch a kill.
    runner.cmd(&[
        b"EVAL",
        b"local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end",
        b"1",
        a.as_bytes(),
    ]);
    wait_until_busy(&mut other);
    assert_eq!(other.call(&["SCRIPT", "KILL"]), "+OK\r\n");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(killed.contains("Script killed by user with SCRIPT KILL..."), "{killed}");

    // A script that wrote cannot be killed; it ends by itself.
    let wrote = "redis.call('set', KEYS[1], 'w') local t = tonumber(redis.call('time')[1]) while tonumber(redis.call('time')[1]) < t + 2 do end return 'done'";
    runner.cmd(&[b"EVAL", wrote.as_bytes(), b"1", a.as_bytes()]);
    // `other` is on a core that answers: ask until the script is past the
    // busy threshold (it runs for 2 s).
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut reply = other.call(&["SCRIPT", "KILL"]);
    while reply.starts_with("-NOTBUSY") && Instant::now() < deadline {
        thread::sleep(Duration::from_millis(10));
        reply = other.call(&["SCRIPT", "KILL"]);
    }
    assert!(
        reply.starts_with("-UNKILLABLE Sorry the script already executed write commands"),
        "{reply}"
    );
    assert_eq!(String::from_utf8_lossy(&runner.read_frame()), "$4\r\ndone\r\n");
}

/// The clients of the core a busy script blocks are answered from the
/// script's hook, as Redis answers its clients while a script runs: BUSY,
/// SCRIPT KILL, SHUTDOWN NOSAVE, new connections too; a command that only
/// needs other shards waits for the script's end, in order. On both
/// backends (the glommio one reads and writes the sockets from the hook).
#[test]
fn busy_scripts_answer_the_clients_of_their_own_core() {
    let server = Server::start(2);
    let (a, _, b) = keys();
    let mut admin = server.client();
    let _: () = q(&mut admin, &["CONFIG", "SET", "busy-reply-threshold", "50"]).unwrap();
    let mut keep = Vec::new();
    // a's shard is shard 0: the runner and two idle clients live there.
    let mut runner = common::raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut same = common::raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut same2 = common::raw_on_shard(&server, &mut admin, 0, &mut keep);
    teach_spin(&mut runner, &a);
    runner.cmd(&[b"EVAL", SPIN.as_bytes(), b"1", a.as_bytes(), b"spin"]);
    // Answered once the script passes the threshold (the read waits).
    wait_until_busy(&mut same);
    // One read: an unknown command, a key of the busy shard, SHUTDOWN
    // without NOSAVE, the other kind's KILL.
    let mut pipeline = b"*1\r\n$3\r\nFOO\r\n".to_vec();
    pipeline.extend_from_slice(format!("*2\r\n$3\r\nGET\r\n${}\r\n{a}\r\n", a.len()).as_bytes());
    pipeline.extend_from_slice(b"*1\r\n$8\r\nSHUTDOWN\r\n*2\r\n$8\r\nFUNCTION\r\n$4\r\nKILL\r\n");
    same.send(&pipeline);
    assert_eq!(
        String::from_utf8_lossy(&same.read_frame()),
        "-ERR unknown command 'FOO', with args beginning with: \r\n"
    );
    for _ in 0..3 {
        assert_eq!(String::from_utf8_lossy(&same.read_frame()), BUSY);
    }
    // New connections, wherever the kernel puts them, are answered.
    for _ in 0..8 {
        let mut fresh = server.raw();
        assert_eq!(fresh.call(&["PING"]), BUSY);
    }
    // Keys of the other shard too: the whole server is busy.
    assert_eq!(same.call(&["GET", &b]), BUSY);
    assert_eq!(same2.call(&["SCRIPT", "KILL"]), "+OK\r\n");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."), "{killed}");
    assert_eq!(runner.call(&["PING"]), "+PONG\r\n");

    // Transactions on the busy core go on (Redis's rules): a command gets
    // BUSY and fails the EXEC, and EXEC is refused whole, ending the
    // transaction. A transaction opened before the script keeps what it
    // queued; SCRIPT KILL inside MULTI is queued.
    assert_eq!(same2.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(same2.call(&["INCR", &b]), "+QUEUED\r\n");
    runner.cmd(&[b"EVAL", SPIN.as_bytes(), b"1", a.as_bytes(), b"spin"]);
    wait_until_busy(&mut same);
    assert_eq!(same2.call(&["SCRIPT", "KILL"]), "+QUEUED\r\n");
    assert_eq!(same2.call(&["MULTI"]), "-ERR MULTI calls can not be nested\r\n");
    assert_eq!(same.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(same.call(&["SET", &b, "x"]), BUSY);
    assert_eq!(same.call(&["EXEC"]), exec_abort(BUSY));
    assert_eq!(same.call(&["DISCARD"]), "-ERR DISCARD without MULTI\r\n");
    assert_eq!(same.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(same.call(&["DISCARD"]), "+OK\r\n");
    assert_eq!(same.call(&["SCRIPT", "KILL"]), "+OK\r\n");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."), "{killed}");
    assert_eq!(
        same2.call(&["EXEC"]),
        "*2\r\n:1\r\n-NOTBUSY No scripts in execution right now.\r\n"
    );

    // A busy function: FUNCTION STATS describes it, FUNCTION KILL stops it.
    let code = format!(
        "#!lua name=spin\nredis.register_function('spin', function(KEYS, ARGV) {SPIN} end)"
    );
    assert_eq!(runner.call(&["FUNCTION", "LOAD", &code]), "$4\r\nspin\r\n");
    assert_eq!(runner.call(&["FCALL", "spin", "1", &a, "no"]), ":1\r\n");
    runner.cmd(&[b"FCALL", b"spin", b"1", a.as_bytes(), b"spin"]);
    wait_until_busy(&mut same);
    let stats = same.call(&["FUNCTION", "STATS"]);
    assert!(
        stats.starts_with("*4\r\n$14\r\nrunning_script\r\n*6\r\n$4\r\nname\r\n$4\r\nspin\r\n"),
        "{stats}"
    );
    assert!(
        stats.contains("$15\r\nlibraries_count\r\n:1\r\n$15\r\nfunctions_count\r\n:1\r\n"),
        "{stats}"
    );
    assert!(same.call(&["SCRIPT", "KILL"]).starts_with("-BUSY"));
    assert_eq!(same.call(&["FUNCTION", "KILL"]), "+OK\r\n");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(killed.contains("Script killed by user"), "{killed}");

    // SHUTDOWN NOSAVE stops the process even so.
    runner.cmd(&[b"EVAL", b"while true do end", b"1", a.as_bytes()]);
    wait_until_busy(&mut same);
    same.cmd(&[b"SHUTDOWN", b"NOSAVE"]);
    assert!(same.is_closed());
    let mut server = server;
    let deadline = Instant::now() + Duration::from_secs(10);
    while server.is_running() {
        assert!(Instant::now() < deadline, "SHUTDOWN NOSAVE did not stop a busy server");
        thread::sleep(Duration::from_millis(20));
    }
}

/// A script that has not run before, or that left its shard, runs with
/// every shard: while it is busy, every shard is, and the clients of the
/// cores that lent their shards get BUSY too (and may kill it).
#[test]
fn busy_scripts_on_the_node_busy_every_shard() {
    let server = Server::start(2);
    let (a, _, b) = keys();
    let mut admin = server.client();
    let _: () = q(&mut admin, &["CONFIG", "SET", "busy-reply-threshold", "50"]).unwrap();
    let mut keep = Vec::new();
    let mut runner = common::raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut lender = common::raw_on_shard(&server, &mut admin, 1, &mut keep);
    runner.cmd(&[b"EVAL", b"while true do end", b"0"]);
    wait_until_busy(&mut lender);
    assert_eq!(lender.call(&["GET", &a]), BUSY);
    assert_eq!(lender.call(&["GET", &b]), BUSY);
    assert_eq!(lender.call(&["SCRIPT", "KILL"]), "+OK\r\n");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."), "{killed}");
    assert_eq!(lender.call(&["SET", &b, "1"]), "+OK\r\n");
    assert_eq!(runner.call(&["GET", &b]), "$1\r\n1\r\n");
}

const BUSY: &str =
    "-BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.\r\n";

/// Redis's reply to an EXEC refused with `error` (a raw error reply).
fn exec_abort(error: &str) -> String {
    format!("-EXECABORT Transaction discarded because of: {}", &error[1..])
}

/// PINGs on `conn` until one gets BUSY (PONG before the script started).
/// With one shard every client is on the busy core: SCRIPT KILL from a
/// client that connects after the script started (as `redis-cli SCRIPT
/// KILL` does) stops it, on both backends; half a command sent while the
/// script ran is completed and served after it.
#[test]
fn script_kill_from_a_new_connection_with_one_shard() {
    let server = Server::start(1);
    let mut admin = server.client();
    let _: () = q(&mut admin, &["CONFIG", "SET", "busy-reply-threshold", "50"]).unwrap();
    let mut waiting = server.raw();
    let mut runner = server.raw();
    runner.cmd(&[b"EVAL", b"while true do end", b"0"]);
    wait_until_busy(&mut waiting);
    waiting.send(b"*2\r\n$4\r\nECHO\r\n$5\r\nhel");
    let mut fresh = server.client();
    let busy = q::<String>(&mut fresh, &["GET", "k"]).unwrap_err();
    assert_eq!(busy.code(), Some("BUSY"), "{busy}");
    assert_eq!(q::<String>(&mut fresh, &["SCRIPT", "KILL"]).unwrap(), "OK");
    let killed = String::from_utf8_lossy(&runner.read_frame()).into_owned();
    assert!(killed.starts_with("-ERR Script killed by user with SCRIPT KILL..."), "{killed}");
    waiting.send(b"lo\r\n");
    assert_eq!(String::from_utf8_lossy(&waiting.read_frame()), "$5\r\nhello\r\n");
    assert_eq!(runner.call(&["PING"]), "+PONG\r\n");
}

fn wait_until_busy(conn: &mut Raw) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let reply = conn.call(&["PING"]);
        if reply.starts_with("-BUSY") {
            return;
        }
        assert_eq!(reply, "+PONG\r\n");
        assert!(Instant::now() < deadline, "the script never became busy");
        thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn flash_sale() {
    // Stock 100, 1000 buyers, each trying twice: a script checks the stock
    // and the buyer, then decrements, records the buyer and appends the
    // order. The buyer keys are spread over both shards, so most sales are
    // cross-shard transactions. (Orders go to a string until LPUSH/XADD
    // and sets are merged: APPEND of "buyer," per order.)
    let server = Server::start(2);
    let mut c = server.client();
    let stock = "sale:stock";
    let orders = "sale:orders";
    let _: () = q(&mut c, &["SET", stock, "100"]).unwrap();
    let buy = "
        local stock = tonumber(redis.call('get', KEYS[1]))
        if stock <= 0 then return 0 end
        if redis.call('exists', KEYS[2]) == 1 then return -1 end
        redis.call('decr', KEYS[1])
        redis.call('set', KEYS[2], 1)
        redis.call('append', KEYS[3], ARGV[1] .. ',')
        return 1";
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", buy]).unwrap();
    let mut threads = Vec::new();
    for t in 0..20 {
        let (url, sha) = (server.url(), sha.clone());
        threads.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut sold = 0;
            for round in 0..2 {
                for i in 0..50 {
                    let buyer = format!("buyer:{}", t * 50 + i);
                    let r: i64 =
                        q(&mut c, &["EVALSHA", &sha, "3", stock, &buyer, orders, &buyer]).unwrap();
                    assert!(round == 0 || r != 1, "{buyer} bought twice");
                    if r == 1 {
                        sold += 1;
                    }
                }
            }
            sold
        }));
    }
    let sold: i64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert_eq!(sold, 100);
    let left: i64 = q(&mut c, &["GET", stock]).unwrap();
    assert_eq!(left, 0);
    let log: String = q(&mut c, &["GET", orders]).unwrap();
    let buyers: Vec<&str> = log.split(',').filter(|s| !s.is_empty()).collect();
    assert_eq!(buyers.len(), 100);
    assert_eq!(buyers.iter().collect::<HashSet<_>>().len(), 100, "a buyer has two orders");
    for buyer in buyers {
        let exists: i64 = q(&mut c, &["EXISTS", buyer]).unwrap();
        assert_eq!(exists, 1);
    }
}

#[test]
fn lua_memory_is_limited() {
    let server = Server::start(2);
    let mut r = server.raw();
    assert_eq!(r.call(&["CONFIG", "SET", "lua-memory-limit", "4mb"]), "+OK\r\n");
    let hog = "local t = {} for i = 1, 1000000 do t[i] = string.rep('x', 100) .. i end return #t";
    let reply = r.call(&["EVAL", hog, "0"]);
    assert!(reply.contains("not enough memory"), "{reply}");
    // The state survives and frees the garbage.
    assert_eq!(r.call(&["EVAL", "return 1", "0"]), ":1\r\n");
    assert_eq!(r.call(&["CONFIG", "SET", "lua-memory-limit", "0"]), "+OK\r\n");
    assert_eq!(
        r.call(&["EVAL", "local t = {} for i = 1, 100000 do t[i] = i end return #t", "0"]),
        ":100000\r\n"
    );
}
