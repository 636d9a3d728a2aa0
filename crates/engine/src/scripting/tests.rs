//! Scripts run against a real keyspace, without a server.

use crate::command::{table, ClientInfo};
use crate::keyspace::Keyspace;
use crate::shard::{now_ms, test_call, Caller, Clock, ShardCommand, ShardSettings, ShardState};
use bytes::Bytes;

struct Fixture {
    ks: Keyspace,
    state: ShardState,
}

impl Fixture {
    fn new() -> Self {
        Fixture {
            ks: Keyspace::for_slots(16, 0, 16384),
            state: ShardState::new(ShardSettings::default(), 7),
        }
    }

    fn run(&mut self, args: &[&str]) -> String {
        let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let out = test_call(&mut self.ks, &mut self.state, args, ClientInfo::default(), now_ms());
        String::from_utf8_lossy(&out).into_owned()
    }

    fn eval(&mut self, script: &str, keys: &[&str], argv: &[&str]) -> String {
        let n = keys.len().to_string();
        let mut args = vec!["EVAL", script, &n];
        args.extend_from_slice(keys);
        args.extend_from_slice(argv);
        self.run(&args)
    }
}

#[test]
fn eval_returns_converted_values() {
    let mut f = Fixture::new();
    assert_eq!(f.eval("return 1", &[], &[]), ":1\r\n");
    assert_eq!(f.eval("return {1, 'a', {ok='x'}}", &[], &[]), "*3\r\n:1\r\n$1\r\na\r\n+x\r\n");
    assert_eq!(f.eval("return {KEYS[1], ARGV[1]}", &["k"], &["v"]), "*2\r\n$1\r\nk\r\n$1\r\nv\r\n");
    assert_eq!(f.eval("return redis.call('set', KEYS[1], 'x')", &["k"], &[]), "+OK\r\n");
    assert_eq!(f.eval("return redis.call('get', KEYS[1])", &["k"], &[]), "$1\r\nx\r\n");
    assert_eq!(f.eval("return redis.call('get', KEYS[1]) == false", &["nope"], &[]), ":1\r\n");
}

#[test]
fn errors_follow_redis() {
    let mut f = Fixture::new();
    // Undeclared keys are served (one shard holds them all), unless
    // `lua-allow-undeclared-keys no` refuses them.
    assert_eq!(f.eval("return redis.call('set', 'other', 1)", &["k"], &[]), "+OK\r\n");
    f.state.settings.scripts.allow_undeclared_keys = false;
    assert_eq!(
        f.eval("return redis.call('get', 'other')", &["k"], &[]),
        "-ERR script tried accessing undeclared key: other script: 8a1c4a3ec0af2a74cafbd9239bfdf8b4f48e6fb4, on @user_script:1.\r\n"
            .replace("8a1c4a3ec0af2a74cafbd9239bfdf8b4f48e6fb4", &super::sha1_hex(b"return redis.call('get', 'other')"))
    );
    f.state.settings.scripts.allow_undeclared_keys = true;
    let r = f.eval("error('boom')", &[], &[]);
    assert!(r.starts_with("-ERR user_script:1: boom script: "), "{r}");
    assert!(r.ends_with(", on @user_script:1.\r\n"), "{r}");
    let r = f.eval("return a", &[], &[]);
    assert!(r.contains("Script attempted to access nonexistent global variable 'a'"), "{r}");
    let r = f.eval("a = 1", &[], &[]);
    assert!(r.contains("Attempt to modify a readonly table"), "{r}");
    assert!(f
        .eval("return redis.call('nosuch')", &[], &[])
        .contains("Unknown Redis command called from script"));
    assert!(f.eval("return redis.pcall('get')", &[], &[]).contains("Wrong number of args"));
    assert_eq!(
        f.run(&["EVAL", "return 1", "2", "a"]),
        "-ERR Number of keys can't be greater than number of args\r\n"
    );
    assert_eq!(f.run(&["EVAL", "return 1", "-1"]), "-ERR Number of keys can't be negative\r\n");
    assert_eq!(
        f.run(&["EVALSHA", "abc", "0"]),
        "-NOSCRIPT No matching script. Please use EVAL.\r\n"
    );
    let r = f.eval("return {err='MY failure'}", &[], &[]);
    assert_eq!(r, "-MY failure\r\n");
    let r = f.eval("return redis.error_reply('CUSTOM x')", &[], &[]);
    assert_eq!(r, "-CUSTOM x\r\n");
    let r = f.eval("return ++", &[], &[]);
    assert!(r.starts_with("-ERR Error compiling script (new function): user_script:1:"), "{r}");
}

#[test]
fn redis_call_arguments_and_replies() {
    let mut f = Fixture::new();
    // Numbers are formatted as Redis does (%.17g); other types are refused.
    assert_eq!(
        f.eval("redis.call('set', 'n', 3.5) return redis.call('get', 'n')", &[], &[]),
        "$3\r\n3.5\r\n"
    );
    assert_eq!(
        f.eval("redis.call('set', 'n', 10) return redis.call('get', 'n')", &[], &[]),
        "$2\r\n10\r\n"
    );
    assert_eq!(
        f.eval("redis.call('set', 'e', '') return redis.call('strlen', 'e')", &[], &[]),
        ":0\r\n"
    );
    let r = f.eval("return redis.pcall('set', 'k', {})", &[], &[]);
    assert_eq!(r, "-ERR Lua redis lib command arguments must be strings or integers\r\n");
    let r = f.eval("return redis.pcall()", &[], &[]);
    assert_eq!(r, "-ERR Please specify at least one argument for this redis lib call\r\n");
    let r = f.eval("redis.call()", &[], &[]);
    assert!(r.starts_with("-ERR Please specify at least one argument"), "{r}");
    // redis.call raises the error table; pcall catches its message.
    let r =
        f.eval("local ok, e = pcall(redis.call, 'incr', 'e') return {tostring(ok), e}", &[], &[]);
    assert_eq!(r, "*2\r\n$5\r\nfalse\r\n$43\r\nERR value is not an integer or out of range\r\n");
    let r = f.eval("local t = redis.pcall('incr', 'e') return t.err", &[], &[]);
    assert_eq!(r, "$43\r\nERR value is not an integer or out of range\r\n");
    // Status, null and nested replies.
    assert_eq!(f.eval("return redis.call('ping').ok", &[], &[]), "$4\r\nPONG\r\n");
    assert_eq!(f.eval("return {redis.call('get', 'none')}", &[], &[]), "*1\r\n$-1\r\n");
    f.eval("redis.call('rpush', 'l', 'a', 'b')", &[], &[]);
    assert_eq!(f.eval("return #redis.call('lrange', 'l', 0, -1)", &[], &[]), ":2\r\n");
}

#[test]
fn read_only_scripts_refuse_writes() {
    let mut f = Fixture::new();
    let r = f.run(&["EVAL_RO", "return redis.call('set', KEYS[1], 1)", "1", "k"]);
    assert!(r.contains("Write commands are not allowed from read-only scripts."), "{r}");
    let r = f.eval("#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 1)", &["k"], &[]);
    assert!(r.contains("Write commands are not allowed from read-only scripts."), "{r}");
    let r = f.run(&["EVAL_RO", "#!lua\nreturn 1", "0"]);
    assert_eq!(r, "-ERR Can not execute a script with write flag using *_ro command.\r\n");
    let r = f.eval("#!lua flags=bogus\nreturn 1", &[], &[]);
    assert_eq!(r, "-ERR Unexpected flag in script shebang: bogus\r\n");
}

#[test]
fn sandbox_and_libraries() {
    let mut f = Fixture::new();
    assert!(f.eval("return os", &[], &[]).contains("nonexistent global variable 'os'"));
    assert!(f.eval("redis.call = nil", &[], &[]).contains("readonly table"));
    assert!(f.eval("rawset(string, 'x', 1)", &[], &[]).contains("readonly table"));
    assert!(f.eval("setmetatable(_G, {})", &[], &[]).contains("readonly table"));
    assert!(f.eval("getmetatable(_G).__index = {}", &[], &[]).contains("readonly table"));
    assert!(f.eval("table.insert(redis, 1)", &[], &[]).contains("readonly table"));
    assert!(f.eval("loadstring('x = 1')()", &[], &[]).contains("readonly table"));
    assert_eq!(f.eval("return cjson.encode({1, 2})", &[], &[]), "$5\r\n[1,2]\r\n");
    assert_eq!(f.eval("return bit.band(7, 3)", &[], &[]), ":3\r\n");
    assert_eq!(
        f.eval("return redis.sha1hex('')", &[], &[]),
        "$40\r\nda39a3ee5e6b4b0d3255bfef95601890afd80709\r\n"
    );
    let a = f.eval("math.randomseed(42) return tostring(math.random())", &[], &[]);
    let b = f.eval("math.randomseed(42) return tostring(math.random())", &[], &[]);
    assert_eq!(a, b);
    let r = f.eval("local ok, e = pcall(function() redis.call('nosuch') end) return e", &[], &[]);
    assert_eq!(r, "$44\r\nERR Unknown Redis command called from script\r\n");
}

#[test]
fn functions_load_and_call() {
    let mut f = Fixture::new();
    let code = Bytes::from_static(b"#!lua name=lib\nredis.register_function('hello', function(keys, args) return 'hi ' .. args[1] end)\nredis.register_function{function_name='ro', callback=function() return 1 end, flags={'no-writes'}}");
    assert_eq!(f.state.scripting.function_load(&code, false).unwrap(), "lib");
    assert_eq!(f.run(&["FCALL", "hello", "0", "you"]), "$6\r\nhi you\r\n");
    assert_eq!(f.run(&["FCALL", "HELLO", "0", "x"]), "$4\r\nhi x\r\n");
    assert_eq!(f.run(&["FCALL_RO", "ro", "0"]), ":1\r\n");
    assert!(f.run(&["FCALL_RO", "hello", "0", "x"]).contains("*_ro command"));
    assert_eq!(f.run(&["FCALL", "nope", "0"]), "-ERR Function not found\r\n");
    let again = f.state.scripting.function_load(&code, false).unwrap_err();
    assert_eq!(again.text(), "ERR Library 'lib' already exists");
    let bad = Bytes::from_static(b"#!lua name=lib2\nreturn redis.call('ping')");
    let e = f.state.scripting.function_load(&bad, false).unwrap_err();
    assert!(e.text().contains("nonexistent global variable 'call'"), "{}", e.text());
    let dump = f.state.scripting.function_dump();
    f.state.scripting.function_flush();
    assert_eq!(f.run(&["FCALL", "hello", "0", "x"]), "-ERR Function not found\r\n");
    f.state.scripting.function_restore(&dump, super::RestorePolicy::Append).unwrap();
    assert_eq!(f.run(&["FCALL", "hello", "0", "x"]), "$4\r\nhi x\r\n");
}

/// Shard 0 of a two-shard node, with keys of each shard.
fn half_node() -> (crate::shard::Shard, String, String) {
    use crate::shard::{ShardId, SlotMap};
    let map = SlotMap::new(2);
    let mut shard = crate::shard::Shard::new(ShardId(0), map, ShardSettings::default(), 7);
    shard.state.funnel.log = Some(Default::default());
    shard.state.funnel.notify_flags = crate::funnel::notify::parse("KEA").unwrap();
    let on = |s: u16| {
        (0..).map(|i| format!("k{i}")).find(|k| map.shard_of_key(k.as_bytes()) == ShardId(s))
    };
    (shard, on(0).unwrap(), on(1).unwrap())
}

fn run_on(shard: &mut crate::shard::Shard, args: &[&str]) -> String {
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
    let reg = table().resolve(&args).unwrap();
    let cmd = ShardCommand { id: reg.id, spec: reg.spec, args, client: ClientInfo::default() };
    let mut out = Vec::new();
    shard.call(&cmd, &mut out, &mut Clock::start(), Caller::Client);
    String::from_utf8_lossy(&out).into_owned()
}

#[test]
fn a_held_run_that_meets_another_shards_key_is_undone() {
    let (mut shard, here, there) = half_node();
    run_on(&mut shard, &["SET", &here, "1"]);
    shard.state.funnel.out.events.clear();
    shard.state.funnel.log.as_mut().unwrap().events.clear();
    let watched = shard.state.funnel.watches.watch(0, here.as_bytes());
    let dirty = shard.state.funnel.dirty;
    let script = "redis.call('incr', KEYS[1]) redis.call('set', 'new' .. KEYS[1], 'x') \
                  return redis.call('get', ARGV[1])";
    // Undone: no reply, no change, no notification, no log record.
    assert_eq!(run_on(&mut shard, &["EVAL", script, "1", &here, &there]), "");
    let report = shard.state.scripting.take_report();
    assert!(report.restart && report.needs_node, "{report:?}");
    assert_eq!(run_on(&mut shard, &["GET", &here]), "$1\r\n1\r\n");
    assert_eq!(run_on(&mut shard, &["EXISTS", &format!("new{here}")]), ":0\r\n");
    assert!(shard.state.funnel.out.events.is_empty());
    assert!(shard.state.funnel.log.as_ref().unwrap().events.is_empty());
    assert_eq!(shard.state.funnel.watches.version(0, here.as_bytes()), Some(watched));
    assert_eq!(shard.state.funnel.dirty, dirty);
    // A pcall that catches the restart changes nothing either.
    let caught = "redis.call('incr', KEYS[1]) pcall(redis.call, 'get', ARGV[1]) \
                  redis.call('incr', KEYS[1]) return 'done'";
    assert_eq!(run_on(&mut shard, &["EVAL", caught, "1", &here, &there]), "");
    assert!(shard.state.scripting.take_report().restart);
    assert_eq!(run_on(&mut shard, &["GET", &here]), "$1\r\n1\r\n");
    // A run that stays on its shard reports nothing.
    assert_eq!(
        run_on(&mut shard, &["EVAL", "return redis.call('incr', ARGV[1])", "0", &here]),
        ":2\r\n"
    );
    assert_eq!(shard.state.scripting.take_report(), Default::default());
}

#[test]
fn a_held_run_that_changed_a_large_value_cannot_be_undone() {
    let (mut shard, here, there) = half_node();
    // A new key is cheap to undo (it was absent); a large one is not.
    let fill = "for i = 1, 200 do redis.call('rpush', KEYS[1], i) end";
    assert_eq!(run_on(&mut shard, &["EVAL", fill, "1", &here]), "$-1\r\n");
    let script = "redis.call('rpush', KEYS[1], 'last') return redis.call('get', ARGV[1])";
    let reply = run_on(&mut shard, &["EVAL", script, "1", &here, &there]);
    assert!(
        reply.starts_with(&format!("-ERR script reached key '{there}' of another shard after changing a value too large to undo")),
        "{reply}"
    );
    let report = shard.state.scripting.take_report();
    assert!(!report.restart && report.needs_node, "{report:?}");
    // Its writes stay, as after any script error.
    assert_eq!(run_on(&mut shard, &["LLEN", &here]), ":201\r\n");
}
