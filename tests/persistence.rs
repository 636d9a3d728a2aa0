//! Persistence against a real 2-shard server: DUMP/RESTORE both ways
//! between ringdb and a real redis-server, snapshot files (SAVE, BGSAVE,
//! the `save` schedule, SHUTDOWN, DEBUG RELOAD) that survive a restart and
//! move between ringdb and redis-server in both directions, for every type.
//! Tests that need redis-server say so and skip when it is not installed
//! (fail under CI=true; see `common::RedisServer`).

mod common;
use common::{keys_on_two_shards, q, RedisServer, Server};
use redis::Value;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A directory under the system's temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> TempDir {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("ringdb-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a temp dir");
        TempDir(dir)
    }

    fn str(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temp path")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Keys of every type and encoding, with the commands that create them.
fn fixture_commands() -> Vec<Vec<String>> {
    let (a, b) = keys_on_two_shards();
    let mut cmds: Vec<Vec<String>> = Vec::new();
    let mut add = |args: &[&str]| cmds.push(args.iter().map(|s| s.to_string()).collect());
    add(&["SET", &a, "on shard zero"]);
    add(&["SET", &b, "on shard one"]);
    add(&["SET", "int", "-123456789"]);
    add(&["SET", "big-int", "9223372036854775807"]);
    add(&["SET", "long", &"compressible ".repeat(200)]);
    add(&["SET", "ttl", "x", "PX", "100000000"]);
    add(&["RPUSH", "list", "a", "b", "1", "-7", "300000"]);
    let many: Vec<String> = (0..300).map(|i| format!("element-{i}")).collect();
    let mut rpush = vec!["RPUSH", "biglist"];
    rpush.extend(many.iter().map(String::as_str));
    add(&rpush);
    add(&["HSET", "hash", "f", "v", "n", "7"]);
    let mut hset = vec!["HSET", "bighash"];
    for m in &many {
        hset.push(m);
        hset.push(m);
    }
    add(&hset);
    add(&["SADD", "intset", "1", "2", "-3", "100000"]);
    add(&["SADD", "strset", "a", "b", "c"]);
    add(&["ZADD", "zset", "1", "a", "2.5", "b", "-inf", "c"]);
    let mut zadd = vec!["ZADD", "bigzset"];
    let scores: Vec<String> = (0..300).map(|i| format!("{}", i as f64 / 7.0)).collect();
    for (m, s) in many.iter().zip(&scores) {
        zadd.push(s);
        zadd.push(m);
    }
    add(&zadd);
    add(&["PFADD", "hll", "a", "b", "c", "d"]);
    // A stream with a tombstone, two groups, pending entries and consumers.
    add(&["XADD", "stream", "1-1", "a", "1", "b", "2"]);
    add(&["XADD", "stream", "1-2", "a", "3", "b", "4"]);
    add(&["XADD", "stream", "2-0", "c", "hello"]);
    add(&["XADD", "stream", "3-0", "a", "5", "b", "6"]);
    add(&["XDEL", "stream", "1-2"]);
    add(&["XGROUP", "CREATE", "stream", "g", "0"]);
    add(&["XREADGROUP", "GROUP", "g", "alice", "COUNT", "2", "STREAMS", "stream", ">"]);
    add(&["XGROUP", "CREATECONSUMER", "stream", "g", "bob"]);
    add(&["XCLAIM", "stream", "g", "bob", "0", "2-0"]);
    add(&["XGROUP", "CREATE", "stream", "g2", "$"]);
    // Several nodes (100 entries each), trimmed inside one, compressible.
    for i in 1..=250 {
        let value = format!("value {i} {}", "compressible ".repeat(3));
        let id = format!("{i}-1");
        add(&["XADD", "bigstream", &id, "field", &value, "n", &i.to_string()]);
    }
    add(&["XTRIM", "bigstream", "MAXLEN", "180"]);
    add(&["XDEL", "bigstream", "150-1", "200-1"]);
    add(&["XGROUP", "CREATE", "bigstream", "grp", "0"]);
    add(&["XREADGROUP", "GROUP", "grp", "c1", "COUNT", "30", "STREAMS", "bigstream", ">"]);
    add(&["XACK", "bigstream", "grp", "75-1", "80-1"]);
    // An empty stream is a key too.
    add(&["XADD", "emptied", "5-5", "f", "v"]);
    add(&["XDEL", "emptied", "5-5"]);
    cmds
}

fn key_names() -> Vec<String> {
    let (a, b) = keys_on_two_shards();
    let mut keys: Vec<String> = [
        "int",
        "big-int",
        "long",
        "ttl",
        "list",
        "biglist",
        "hash",
        "bighash",
        "intset",
        "strset",
        "zset",
        "bigzset",
        "hll",
        "stream",
        "bigstream",
        "emptied",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    keys.push(a);
    keys.push(b);
    keys
}

fn run_all(c: &mut redis::Connection, cmds: &[Vec<String>]) {
    for cmd in cmds {
        let args: Vec<&str> = cmd.iter().map(String::as_str).collect();
        q::<Value>(c, &args).unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    }
}

/// A comparable description of a key: type, encoding, contents (sorted
/// where order is not defined) and whether it has a TTL.
fn describe(c: &mut redis::Connection, key: &str) -> String {
    let kind: String = q(c, &["TYPE", key]).unwrap();
    // Strings are compared without their encoding: a restored string is
    // `embstr` or `raw` by length alone, whatever made the original.
    let encoding: Option<String> = match kind.as_str() {
        "string" => None,
        _ => q(c, &["OBJECT", "ENCODING", key]).unwrap_or(None),
    };
    let contents: Vec<Vec<u8>> = match kind.as_str() {
        "string" => vec![q(c, &["GET", key]).unwrap()],
        "list" => q(c, &["LRANGE", key, "0", "-1"]).unwrap(),
        "hash" => sorted(q(c, &["HGETALL", key]).unwrap()),
        "set" => sorted(q(c, &["SMEMBERS", key]).unwrap()),
        "zset" => q(c, &["ZRANGE", key, "0", "-1", "WITHSCORES"]).unwrap(),
        "stream" => {
            let entries: Value = q(c, &["XRANGE", key, "-", "+"]).unwrap();
            let info: Value = q(c, &["XINFO", "STREAM", key, "FULL"]).unwrap();
            vec![format!("{entries:?}").into_bytes(), format!("{info:?}").into_bytes()]
        }
        "none" => vec![],
        other => panic!("unexpected type {other}"),
    };
    let ttl: i64 = q(c, &["PTTL", key]).unwrap();
    let ttl = if ttl > 0 { "ttl" } else { "persistent" };
    let digest: Vec<String> =
        contents.iter().map(|v| String::from_utf8_lossy(v).into_owned()).collect();
    format!("{key} {kind} {encoding:?} {ttl} {digest:?}")
}

fn sorted(mut v: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    v.sort();
    v
}

fn dump(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("DUMP").arg(key).query(c).unwrap_or_else(|e| panic!("DUMP {key}: {e}"))
}

fn restore(
    c: &mut redis::Connection,
    key: &str,
    payload: &[u8],
    ttl: i64,
) -> redis::RedisResult<String> {
    redis::cmd("RESTORE").arg(key).arg(ttl).arg(payload).query(c)
}

/// Copies every fixture key from one server to the other with DUMP and
/// RESTORE (keeping TTLs) and checks that both describe them alike.
fn copy_all(from: &mut redis::Connection, to: &mut redis::Connection) {
    for key in key_names() {
        let payload = dump(from, &key);
        let ttl: i64 = q(from, &["PTTL", &key]).unwrap();
        assert_eq!(restore(to, &key, &payload, ttl.max(0)).unwrap(), "OK", "RESTORE {key}");
        assert_eq!(describe(to, &key), describe(from, &key));
    }
}

#[test]
fn dump_restore_between_redis_and_ringdb_for_every_type() {
    let dir = TempDir::new("dump");
    let Some(redis) = RedisServer::start(&dir.0, "dump.rdb") else { return };
    let server = Server::start(2);
    let (mut r, mut g) = (redis.client(), server.client());
    run_all(&mut r, &fixture_commands());
    copy_all(&mut r, &mut g);
    // And back: ringdb's payloads restore into redis-server.
    let _ = q::<String>(&mut r, &["FLUSHALL"]);
    copy_all(&mut g, &mut r);
    // Byte for byte, for the types whose encoding is deterministic (LZF
    // output may differ between compressors, and is not compared).
    for key in ["int", "list", "hash", "intset", "zset", "bigzset"] {
        assert_eq!(dump(&mut g, key), dump(&mut r, key), "DUMP {key}");
    }
}

#[test]
fn restore_options_and_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    run_all(&mut c, &fixture_commands());
    let payload = dump(&mut c, "list");
    // Restored on the other shard's key, with REPLACE, ABSTTL and IDLETIME.
    for key in [&a, &b] {
        let err = restore(&mut c, key, &payload, 0).unwrap_err();
        assert_eq!(err.code(), Some("BUSYKEY"), "{err}");
        let at = (std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis()
            + 100_000) as i64;
        let reply: String = redis::cmd("RESTORE")
            .arg(key)
            .arg(at)
            .arg(&payload)
            .arg("REPLACE")
            .arg("ABSTTL")
            .arg("IDLETIME")
            .arg(50)
            .query(&mut c)
            .unwrap();
        assert_eq!(reply, "OK");
        let idle: i64 = q(&mut c, &["OBJECT", "IDLETIME", key]).unwrap();
        assert!((50..55).contains(&idle), "{idle}");
        assert_eq!(q::<i64>(&mut c, &["LLEN", key]).unwrap(), 5);
        let pttl: i64 = q(&mut c, &["PTTL", key]).unwrap();
        assert!(pttl > 90_000 && pttl <= 100_000, "{pttl}");
    }
    let mut bad = payload.clone();
    bad[1] ^= 0xff;
    let err = restore(&mut c, "new", &bad, 0).unwrap_err();
    assert!(err.to_string().contains("DUMP payload version or checksum are wrong"), "{err}");
    let err = restore(&mut c, "new", &payload, -1).unwrap_err();
    assert!(err.to_string().contains("Invalid TTL value, must be >= 0"), "{err}");
    assert_eq!(q::<Option<Vec<u8>>>(&mut c, &["DUMP", "missing"]).unwrap(), None);
    // Bloom filters travel as RedisBloom's module value, on both shards.
    q::<i64>(&mut c, &["DEL", &a, &b]).unwrap();
    for i in 0..300 {
        q::<i64>(&mut c, &["BF.ADD", &a, &format!("item{i}")]).unwrap();
    }
    let payload = dump(&mut c, &a);
    assert_eq!(restore(&mut c, &b, &payload, 0).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["TYPE", &b]).unwrap(), "MBbloom--");
    assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", &b, "item299"]).unwrap(), 1);
    assert_eq!(
        q::<Value>(&mut c, &["BF.INFO", &b]).unwrap(),
        q::<Value>(&mut c, &["BF.INFO", &a]).unwrap()
    );
}

/// A server on `dir` (2 shards), with extra flags.
fn server_on(dir: &TempDir, extra: &[&str]) -> Server {
    let mut args = vec!["--shards", "2", "--dir", dir.str()];
    args.extend_from_slice(extra);
    Server::start_with(&args)
}

fn info_field(c: &mut redis::Connection, field: &str) -> String {
    common::info_field(c, "persistence", field)
}

/// Waits until no log rewrite runs or waits to start (Redis's
/// `waitForBgrewriteaof`).
fn wait_for_rewrite(c: &mut redis::Connection) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while info_field(c, "aof_rewrite_in_progress") != "0"
        || info_field(c, "aof_rewrite_scheduled") != "0"
    {
        assert!(Instant::now() < deadline, "the log rewrite does not end");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// BGREWRITEAOF, and its end.
fn rewrite_logs(c: &mut redis::Connection) {
    assert_eq!(
        q::<String>(c, &["BGREWRITEAOF"]).unwrap(),
        "Background append only file rewriting started"
    );
    wait_for_rewrite(c);
    assert_eq!(info_field(c, "aof_last_bgrewrite_status"), "ok");
}

const LIBRARY: &str =
    "#!lua name=persisted\nredis.register_function('answer', function() return 42 end)";

/// Everything the fixture holds, described, plus the other databases.
fn snapshot_of(c: &mut redis::Connection) -> Vec<String> {
    let mut all: Vec<String> = key_names().iter().map(|k| describe(c, k)).collect();
    q::<String>(c, &["SELECT", "3"]).unwrap();
    all.push(describe(c, "in-db-3"));
    q::<String>(c, &["SELECT", "0"]).unwrap();
    all.push(format!("dbsize {}", q::<i64>(c, &["DBSIZE"]).unwrap()));
    all
}

fn populate(c: &mut redis::Connection) {
    run_all(c, &fixture_commands());
    run_all(
        c,
        &[
            vec!["SELECT".into(), "3".into()],
            vec!["SET".into(), "in-db-3".into(), "x".into()],
            vec!["SELECT".into(), "0".into()],
        ],
    );
}

#[test]
fn snapshot_survives_restart_with_every_type_on_both_shards() {
    let dir = TempDir::new("restart");
    let expected = {
        let server = server_on(&dir, &[]);
        let mut c = server.client();
        populate(&mut c);
        q::<String>(&mut c, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
        // A key that expires before the restart is not loaded.
        q::<String>(&mut c, &["SET", "short", "x", "PX", "300"]).unwrap();
        let (a, b) = keys_on_two_shards();
        q::<i64>(&mut c, &["BF.ADD", &format!("{a}:bf"), "item"]).unwrap();
        q::<i64>(&mut c, &["BF.ADD", &format!("{b}:bf"), "item"]).unwrap();
        assert_ne!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
        let before: i64 = q(&mut c, &["LASTSAVE"]).unwrap();
        assert_eq!(q::<String>(&mut c, &["SAVE"]).unwrap(), "OK");
        assert!(q::<i64>(&mut c, &["LASTSAVE"]).unwrap() >= before);
        assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
        assert_eq!(info_field(&mut c, "rdb_saves"), "1");
        assert!(dir.0.join("dump.rdb").exists());
        q::<i64>(&mut c, &["DEL", "short"]).unwrap();
        snapshot_of(&mut c)
    };
    std::thread::sleep(Duration::from_millis(350));
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    assert_eq!(snapshot_of(&mut c), expected);
    assert_eq!(q::<Option<String>>(&mut c, &["GET", "short"]).unwrap(), None);
    let ttl: i64 = q(&mut c, &["PTTL", "ttl"]).unwrap();
    assert!(ttl > 99_000_000, "{ttl}");
    assert_eq!(q::<i64>(&mut c, &["FCALL", "answer", "0"]).unwrap(), 42);
    let (a, b) = keys_on_two_shards();
    for key in [a, b] {
        assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", &format!("{key}:bf"), "item"]).unwrap(), 1);
    }
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
}

#[test]
fn redis_server_and_ringdb_load_each_others_snapshots() {
    let ours = TempDir::new("ours");
    let server = server_on(&ours, &["--dbfilename", "ringdb.rdb"]);
    let mut g = server.client();
    populate(&mut g);
    q::<String>(&mut g, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
    assert_eq!(q::<String>(&mut g, &["SAVE"]).unwrap(), "OK");
    let file = ours.0.join("ringdb.rdb");
    if let Ok(out) = Command::new("redis-check-rdb").arg(&file).output() {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success() && text.contains("RDB looks OK"), "redis-check-rdb: {text}");
    }
    let Some(redis) = RedisServer::start(&ours.0, "ringdb.rdb") else { return };
    let mut r = redis.client();
    assert_eq!(snapshot_of(&mut r), snapshot_of(&mut g));
    assert_eq!(q::<i64>(&mut r, &["FCALL", "answer", "0"]).unwrap(), 42);

    // And the other way: redis-server's dump.rdb starts a ringdb.
    let theirs = TempDir::new("theirs");
    let Some(redis) = RedisServer::start(&theirs.0, "dump.rdb") else { return };
    let mut r = redis.client();
    populate(&mut r);
    q::<String>(&mut r, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
    assert_eq!(q::<String>(&mut r, &["SAVE"]).unwrap(), "OK");
    let server = server_on(&theirs, &[]);
    let mut g = server.client();
    assert_eq!(snapshot_of(&mut g), snapshot_of(&mut r));
    assert_eq!(q::<i64>(&mut g, &["FCALL", "answer", "0"]).unwrap(), 42);
}

/// Waits until no background save runs; its status.
fn wait_bgsave(c: &mut redis::Connection) -> String {
    let deadline = Instant::now() + Duration::from_secs(20);
    while info_field(c, "rdb_bgsave_in_progress") == "1" {
        assert!(Instant::now() < deadline, "background save did not finish");
        std::thread::sleep(Duration::from_millis(20));
    }
    info_field(c, "rdb_last_bgsave_status")
}

#[test]
fn bgsave_schedule_and_settings() {
    let dir = TempDir::new("bgsave");
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["BGSAVE"]).unwrap(), "Background saving started");
    assert_eq!(wait_bgsave(&mut c), "ok");
    assert_eq!(info_field(&mut c, "rdb_changes_since_last_save"), "0");
    assert!(dir.0.join("dump.rdb").exists());
    assert_eq!(q::<String>(&mut c, &["BGSAVE", "SCHEDULE"]).unwrap(), "Background saving started");
    wait_bgsave(&mut c);
    let err = q::<String>(&mut c, &["BGSAVE", "NOW"]).unwrap_err();
    assert!(err.to_string().contains("syntax error"), "{err}");
    // Inside MULTI a BGSAVE is scheduled, and runs after EXEC.
    let replies: Vec<String> = redis::pipe().atomic().cmd("BGSAVE").query(&mut c).unwrap();
    assert_eq!(replies, vec!["Background saving scheduled"]);
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(&mut c, "rdb_saves") != "3" {
        assert!(Instant::now() < deadline, "the scheduled save did not run");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Settings, with Redis's names, defaults and errors.
    let get = |c: &mut redis::Connection, name: &str| -> String {
        let v: Vec<String> = q(c, &["CONFIG", "GET", name]).unwrap();
        v[1].clone()
    };
    assert_eq!(get(&mut c, "dbfilename"), "dump.rdb");
    assert_eq!(get(&mut c, "rdbcompression"), "yes");
    assert_eq!(get(&mut c, "rdbchecksum"), "yes");
    assert_eq!(get(&mut c, "save"), "");
    let err = q::<String>(&mut c, &["CONFIG", "SET", "dir", "/no/such/dir"]).unwrap_err();
    assert!(err.to_string().contains("No such file or directory"), "{err}");
    let err = q::<String>(&mut c, &["CONFIG", "SET", "save", "10"]).unwrap_err();
    assert!(err.to_string().contains("Invalid save parameters"), "{err}");
    // A failing save: the directory is gone.
    let gone = TempDir::new("gone");
    q::<String>(&mut c, &["CONFIG", "SET", "dir", gone.str()]).unwrap();
    drop(gone);
    let err = q::<String>(&mut c, &["SAVE"]).unwrap_err();
    assert_eq!(err.code(), Some("ERR"), "{err}");
    assert_eq!(q::<String>(&mut c, &["BGSAVE"]).unwrap(), "Background saving started");
    assert_eq!(wait_bgsave(&mut c), "err");
}

#[test]
fn the_save_schedule_saves_on_its_own() {
    let dir = TempDir::new("schedule");
    let server = server_on(&dir, &["--save", "1 2"]);
    let mut c = server.client();
    q::<String>(&mut c, &["SET", "one", "1"]).unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    assert!(!dir.0.join("dump.rdb").exists(), "one change is not enough");
    q::<String>(&mut c, &["SET", "two", "2"]).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !dir.0.join("dump.rdb").exists()
        || info_field(&mut c, "rdb_changes_since_last_save") != "0"
    {
        assert!(Instant::now() < deadline, "the schedule did not save");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn debug_reload_keeps_everything() {
    let server = Server::start(2);
    let mut c = server.client();
    populate(&mut c);
    let before = snapshot_of(&mut c);
    assert_eq!(q::<String>(&mut c, &["DEBUG", "RELOAD"]).unwrap(), "OK");
    assert_eq!(snapshot_of(&mut c), before);
    // NOSAVE loads the file as it is: what changed since is gone.
    let (a, b) = keys_on_two_shards();
    let (x, y) = (format!("{{{a}}}:reload"), format!("{{{b}}}:reload"));
    q::<String>(&mut c, &["MSET", &x, "after", &y, "after"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["DEBUG", "RELOAD", "NOSAVE"]).unwrap(), "OK");
    assert_eq!(snapshot_of(&mut c), before);
    // NOFLUSH keeps the data: a key the file has too fails the load, unless
    // MERGE lets the file's replace it.
    let err = q::<String>(&mut c, &["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH"]).unwrap_err();
    assert!(err.to_string().contains("Error trying to load the RDB dump"), "{err}");
    q::<String>(&mut c, &["MSET", &x, "kept", &a, "replaced"]).unwrap();
    let merge = ["DEBUG", "RELOAD", "NOSAVE", "NOFLUSH", "MERGE"];
    assert_eq!(q::<String>(&mut c, &merge).unwrap(), "OK");
    assert_eq!(q::<Option<String>>(&mut c, &["GET", &x]).unwrap().as_deref(), Some("kept"));
    q::<i64>(&mut c, &["DEL", &x]).unwrap();
    assert_eq!(snapshot_of(&mut c), before);
    let err = q::<String>(&mut c, &["DEBUG", "RELOAD", "FAST"]).unwrap_err();
    assert!(
        err.to_string().contains("only supports the MERGE, NOFLUSH and NOSAVE options"),
        "{err}"
    );
}

#[test]
fn shutdown_saves_when_a_schedule_is_set() {
    let dir = TempDir::new("shutdown");
    let (a, b) = keys_on_two_shards();
    {
        let mut server = server_on(&dir, &["--save", "3600 1"]);
        let mut c = server.client();
        q::<String>(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap();
        let _ = q::<String>(&mut c, &["SHUTDOWN"]);
        let deadline = Instant::now() + Duration::from_secs(10);
        while server.is_running() {
            assert!(Instant::now() < deadline, "SHUTDOWN did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let mut server = server_on(&dir, &[]);
    let mut c = server.client();
    let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v, vec![Some("1".into()), Some("2".into())]);
    // NOSAVE leaves the file as it was.
    q::<String>(&mut c, &["SET", &a, "changed"]).unwrap();
    let _ = q::<String>(&mut c, &["SHUTDOWN", "NOSAVE"]);
    while server.is_running() {
        std::thread::sleep(Duration::from_millis(20));
    }
    let server = server_on(&dir, &[]);
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["GET", &a]).unwrap(), "1");
}

/// SIGINT saves first when a schedule is set; a second SIGINT while that
/// save runs exits at once with status 1 and leaves no temporary file
/// (Redis's "You insist... exiting now."). The save is slowed down by
/// `rdb-key-save-delay` so that the second signal finds it running.
#[test]
fn a_second_sigint_exits_without_waiting_for_the_save() {
    let dir = TempDir::new("sigint");
    let mut server = server_on(&dir, &["--save", "3600 1", "--rdb-key-save-delay", "100000"]);
    let mut c = server.client();
    for i in 0..50 {
        q::<String>(&mut c, &["SET", &format!("k{i}"), "v"]).unwrap();
    }
    let temp_files = || {
        std::fs::read_dir(&dir.0)
            .unwrap()
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("temp-"))
            .count()
    };
    server.signal(libc::SIGINT);
    let deadline = Instant::now() + Duration::from_secs(10);
    while temp_files() == 0 {
        assert!(Instant::now() < deadline, "the final save never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(server.is_running(), "the save takes 5 s: the first SIGINT waits for it");
    server.signal(libc::SIGINT);
    assert_eq!(server.exit_code(Duration::from_secs(5)), Some(1));
    assert_eq!(temp_files(), 0);
    assert!(!dir.0.join("dump.rdb").exists(), "the save did not finish");
}

#[test]
fn a_damaged_snapshot_stops_start_up_with_the_offset() {
    let dir = TempDir::new("damaged");
    {
        let server = server_on(&dir, &[]);
        let mut c = server.client();
        populate(&mut c);
        q::<String>(&mut c, &["SAVE"]).unwrap();
    }
    let path = dir.0.join("dump.rdb");
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x5a;
    std::fs::write(&path, &bytes).unwrap();
    let stderr = start_fails(&dir, "2", &[]);
    assert!(stderr.contains("at byte") && stderr.contains("dump.rdb"), "{stderr}");
}

/// The log of shard `i` of a 2-shard server on `dir`.
fn shard_log(dir: &TempDir, i: usize) -> PathBuf {
    dir.0.join("appendonlydir").join(format!("appendonly.aof.{i}-of-2"))
}

const ALWAYS: &[&str] = &["--appendonly", "yes", "--appendfsync", "always"];

#[test]
fn the_append_only_log_survives_kill_9_with_every_type() {
    let dir = TempDir::new("aof");
    let (a, b) = keys_on_two_shards();
    let expected = {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        assert_eq!(info_field(&mut c, "aof_enabled"), "1");
        populate(&mut c);
        // Changes of every kind after creation: deletes, expiry, flushes,
        // swaps, gathered cross-shard commands, scripts.
        q::<String>(&mut c, &["MSET", &a, "x", &b, "y"]).unwrap();
        q::<String>(&mut c, &["RENAME", &a, "renamed"]).unwrap();
        q::<i64>(&mut c, &["DEL", "int"]).unwrap();
        q::<i64>(&mut c, &["EXPIRE", "hash", "10000"]).unwrap();
        q::<Option<String>>(&mut c, &["SPOP", "strset"]).unwrap();
        q::<i64>(&mut c, &["EVAL", "return redis.call('RPUSH', KEYS[1], 'z')", "1", "list"])
            .unwrap();
        run_all(
            &mut c,
            &[
                vec!["SELECT".into(), "5".into()],
                vec!["SET".into(), "gone".into(), "1".into()],
                vec!["FLUSHDB".into()],
                vec!["SET".into(), "kept".into(), "1".into()],
                vec!["SELECT".into(), "0".into()],
                vec!["SWAPDB".into(), "5".into(), "6".into()],
            ],
        );
        let mut all = snapshot_of(&mut c);
        all.push(describe(&mut c, "renamed"));
        q::<String>(&mut c, &["SELECT", "6"]).unwrap();
        all.push(describe(&mut c, "kept"));
        all
        // Dropping the server kills it (SIGKILL): nothing is flushed at exit.
    };
    assert!(shard_log(&dir, 0).exists() && shard_log(&dir, 1).exists());
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let mut all = snapshot_of(&mut c);
    all.push(describe(&mut c, "renamed"));
    q::<String>(&mut c, &["SELECT", "6"]).unwrap();
    all.push(describe(&mut c, "kept"));
    assert_eq!(all, expected);
    q::<String>(&mut c, &["SELECT", "5"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
}

#[test]
fn acknowledged_writes_survive_kill_9_at_random_moments() {
    let dir = TempDir::new("crash");
    let (a, b) = keys_on_two_shards();
    let mut acked = (0i64, 0i64);
    for round in 0..4u64 {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        let got: Vec<Option<i64>> = q(&mut c, &["MGET", &a, &b]).unwrap();
        let (ga, gb) = (got[0].unwrap_or(0), got[1].unwrap_or(0));
        // Everything acknowledged is there (and at most the one write in
        // flight when the process died is extra).
        assert!(ga >= acked.0 && ga <= acked.0 + 1, "round {round}: {ga} vs {}", acked.0);
        assert!(gb >= acked.1 && gb <= acked.1 + 1, "round {round}: {gb} vs {}", acked.1);
        let url = server.url();
        let (ka, kb) = (a.clone(), b.clone());
        let writer = std::thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut last = (ga, gb);
            loop {
                let Ok(x) = q::<i64>(&mut c, &["INCR", &ka]) else { return last };
                last.0 = x;
                let Ok(y) = q::<i64>(&mut c, &["INCR", &kb]) else { return last };
                last.1 = y;
            }
        });
        std::thread::sleep(Duration::from_millis(150 + (round * 97) % 200));
        drop(server);
        acked = writer.join().unwrap();
    }
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let got: Vec<i64> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert!(got[0] >= acked.0 && got[1] >= acked.1, "{got:?} vs {acked:?}");
    assert!(acked.0 > 4 && acked.1 > 4, "the writers wrote: {acked:?}");
}

#[test]
fn a_torn_last_record_is_cut_off_or_refused() {
    let dir = TempDir::new("torn");
    let (a, b) = keys_on_two_shards();
    {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        q::<String>(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap();
    }
    let log = shard_log(&dir, 0);
    let good = std::fs::read(&log).unwrap();
    let mut torn = good.clone();
    torn.extend_from_slice(b"*3\r\n$3\r\nSET\r\n$1\r\n");
    std::fs::write(&log, &torn).unwrap();
    let stderr = start_fails(&dir, "2", &["--appendonly", "yes", "--aof-load-truncated", "no"]);
    assert!(
        stderr.contains("Unexpected end of file")
            && stderr.contains(&format!("at byte {}", good.len())),
        "{stderr}"
    );
    // With aof-load-truncated yes (the default) the torn record goes.
    let server = server_on(&dir, &["--appendonly", "yes"]);
    let mut c = server.client();
    let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v, vec![Some("1".into()), Some("2".into())]);
    assert_eq!(std::fs::read(&log).unwrap(), good);
    // Corruption before the end stops start-up, naming the file and byte.
    drop(server);
    let mut bad = good.clone();
    bad[0] = b'#';
    std::fs::write(&log, &bad).unwrap();
    let stderr = start_fails(&dir, "2", &["--appendonly", "yes"]);
    assert!(stderr.contains("appendonly.aof.0-of-2") && stderr.contains("at byte 0"), "{stderr}");
    // A log of another shard count is refused.
    assert!(start_fails(&dir, "3", &["--appendonly", "yes"]).contains("--shards 2"));
}

#[test]
fn bgrewriteaof_and_turning_the_log_on_at_run_time() {
    let dir = TempDir::new("rewrite");
    let (a, b) = keys_on_two_shards();
    {
        let server = server_on(&dir, &[]);
        let mut c = server.client();
        q::<String>(&mut c, &["SET", &a, "before"]).unwrap();
        assert_eq!(info_field(&mut c, "aof_enabled"), "0");
        // With the log off, BGREWRITEAOF writes the files and logs nothing
        // after them.
        rewrite_logs(&mut c);
        let size = std::fs::metadata(shard_log(&dir, 0)).unwrap().len();
        q::<String>(&mut c, &["SET", &a, "before"]).unwrap();
        assert_eq!(std::fs::metadata(shard_log(&dir, 0)).unwrap().len(), size);
        q::<String>(&mut c, &["CONFIG", "SET", "appendonly", "yes"]).unwrap();
        assert_eq!(info_field(&mut c, "aof_enabled"), "1");
        wait_for_rewrite(&mut c);
        for i in 0..200 {
            q::<String>(&mut c, &["SET", &b, &format!("value {i}")]).unwrap();
        }
        let size = std::fs::metadata(shard_log(&dir, 1)).unwrap().len();
        rewrite_logs(&mut c);
        // BGREWRITEAOF with the log off, turning it on, BGREWRITEAOF.
        assert_eq!(info_field(&mut c, "aof_rewrites"), "3");
        assert!(std::fs::metadata(shard_log(&dir, 1)).unwrap().len() < size / 50);
        // A rewrite starts with an RDB preamble unless told otherwise.
        assert!(std::fs::read(shard_log(&dir, 1)).unwrap().starts_with(b"REDIS0010"));
        q::<String>(&mut c, &["CONFIG", "SET", "aof-use-rdb-preamble", "no"]).unwrap();
        rewrite_logs(&mut c);
        assert!(std::fs::read(shard_log(&dir, 1)).unwrap().starts_with(b"*2\r\n$6\r\nSELECT"));
        q::<String>(&mut c, &["CONFIG", "SET", "aof-use-rdb-preamble", "yes"]).unwrap();
        rewrite_logs(&mut c);
        q::<String>(&mut c, &["SET", "after", "rewrite"]).unwrap();
        for policy in ["no", "everysec"] {
            q::<String>(&mut c, &["CONFIG", "SET", "appendfsync", policy]).unwrap();
            q::<String>(&mut c, &["SET", &format!("{policy}-key"), "1"]).unwrap();
        }
        assert_eq!(q::<String>(&mut c, &["DEBUG", "LOADAOF"]).unwrap(), "OK");
        assert_eq!(q::<String>(&mut c, &["GET", "no-key"]).unwrap(), "1");
    }
    let server = server_on(&dir, &["--appendonly", "yes"]);
    let mut c = server.client();
    let v: Vec<Option<String>> =
        q(&mut c, &["MGET", &a, &b, "after", "no-key", "everysec-key"]).unwrap();
    let v: Vec<String> = v.into_iter().map(Option::unwrap_or_default).collect();
    assert_eq!(v, vec!["before", "value 199", "rewrite", "1", "1"]);
    // Turning it off stops logging.
    q::<String>(&mut c, &["CONFIG", "SET", "appendonly", "no"]).unwrap();
    let size = std::fs::metadata(shard_log(&dir, 0)).unwrap().len();
    q::<String>(&mut c, &["SET", &a, "unlogged"]).unwrap();
    assert_eq!(std::fs::metadata(shard_log(&dir, 0)).unwrap().len(), size);
}

#[test]
fn the_log_rewrites_itself_when_it_has_grown() {
    let dir = TempDir::new("autorewrite");
    let server = server_on(&dir, &["--appendonly", "yes", "--auto-aof-rewrite-min-size", "4096"]);
    let mut c = server.client();
    let (a, _) = keys_on_two_shards();
    for i in 0..300 {
        q::<String>(&mut c, &["SET", &a, &format!("value {i}")]).unwrap();
    }
    // The log is checked once a second: where the writes are slower than
    // a rewrite, one runs half way and the writes after it grow the new
    // log until the next check rewrites it again.
    let deadline = Instant::now() + Duration::from_secs(10);
    let log_size = || std::fs::metadata(shard_log(&dir, 0)).unwrap().len();
    while info_field(&mut c, "aof_rewrites") == "0" || log_size() >= 4096 {
        assert!(Instant::now() < deadline, "no automatic rewrite (log: {} bytes)", log_size());
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(server);
    let server = server_on(&dir, &["--appendonly", "yes"]);
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["GET", &a]).unwrap(), "value 299");
}

#[test]
fn a_crash_never_leaves_half_of_a_cross_shard_mset() {
    let dir = TempDir::new("halfmset");
    let (a, b) = keys_on_two_shards();
    {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        q::<String>(&mut c, &["SET", &a, "old"]).unwrap();
        q::<String>(&mut c, &["SET", &b, "old"]).unwrap();
        q::<String>(&mut c, &["MSET", &a, "new", &b, "new"]).unwrap();
    }
    // As if the process died after shard 0 wrote its part of the MSET and
    // before shard 1 wrote the end of its part.
    tear_last_transaction(&dir, 1);
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let v: Vec<String> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v, vec!["old", "old"]);
    // Whole transactions are replayed: a gathered RENAME across shards.
    q::<String>(&mut c, &["RENAME", &a, &b]).unwrap();
    drop(server);
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v, vec![None, Some("old".into())]);
}

#[test]
fn function_libraries_are_kept_in_the_logs() {
    let dir = TempDir::new("aof-functions");
    let (a, b) = keys_on_two_shards();
    let logged = ["--appendonly", "yes", "--appendfsync", "always", "--aof-use-rdb-preamble", "no"];
    {
        let server = server_on(&dir, &logged);
        let mut c = server.client();
        q::<String>(&mut c, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
        // Dropped: SIGKILL, right after the reply.
    }
    {
        let server = server_on(&dir, &logged);
        let mut c = server.client();
        // Both shards have it back (a function runs on its keys' shard).
        assert_eq!(q::<i64>(&mut c, &["FCALL", "answer", "1", &a]).unwrap(), 42);
        assert_eq!(q::<i64>(&mut c, &["FCALL", "answer", "1", &b]).unwrap(), 42);
        q::<String>(&mut c, &["FUNCTION", "DELETE", "persisted"]).unwrap();
    }
    {
        let server = server_on(&dir, &logged);
        let mut c = server.client();
        assert_eq!(q::<Vec<Value>>(&mut c, &["FUNCTION", "LIST"]).unwrap(), vec![]);
        q::<String>(&mut c, &["FUNCTION", "LOAD", LIBRARY]).unwrap();
        // A rewrite without preamble starts with the libraries.
        rewrite_logs(&mut c);
        q::<String>(&mut c, &["CONFIG", "SET", "appendonly", "no"]).unwrap();
        q::<String>(&mut c, &["FUNCTION", "FLUSH"]).unwrap();
        // As Redis's aofrw test: with the log off the flush is not logged,
        // and DEBUG LOADAOF (which empties everything first) brings the
        // libraries back from the log.
        assert_eq!(q::<String>(&mut c, &["DEBUG", "LOADAOF"]).unwrap(), "OK");
        assert_eq!(q::<i64>(&mut c, &["FCALL", "answer", "1", &b]).unwrap(), 42);
    }
    // And from an RDB preamble.
    let preamble = ["--appendonly", "yes", "--aof-use-rdb-preamble", "yes"];
    {
        let server = server_on(&dir, &preamble);
        let mut c = server.client();
        rewrite_logs(&mut c);
        assert!(std::fs::read(shard_log(&dir, 0)).unwrap().starts_with(b"REDIS"));
    }
    let server = server_on(&dir, &preamble);
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["FCALL", "answer", "1", &a]).unwrap(), 42);
}

/// Cuts shard `shard`'s log before the end of its last transaction part:
/// as if the process died while writing it.
fn tear_last_transaction(dir: &TempDir, shard: usize) {
    let log = shard_log(dir, shard);
    let data = std::fs::read(&log).unwrap();
    let end = data.windows(5).rposition(|w| w == b"TXEND").expect("a transaction end");
    let record_start = data[..end].iter().rposition(|&c| c == b'*').unwrap();
    std::fs::write(&log, &data[..record_start]).unwrap();
}

#[test]
fn a_crash_never_leaves_half_of_a_cross_shard_del_or_unlink() {
    let dir = TempDir::new("halfdel");
    let (a, b) = keys_on_two_shards();
    for command in ["DEL", "UNLINK"] {
        {
            let server = server_on(&dir, ALWAYS);
            let mut c = server.client();
            q::<String>(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap();
            assert_eq!(q::<i64>(&mut c, &[command, &a, &b, "missing"]).unwrap(), 2);
        }
        tear_last_transaction(&dir, 1);
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
        assert_eq!(v, vec![Some("1".into()), Some("2".into())], "{command}");
    }
}

/// Keys under the hash tags of `a` and `b` (one per shard): they live on
/// `a`'s and `b`'s shards.
fn tagged(a: &str, b: &str, names: &[&str]) -> Vec<String> {
    names
        .iter()
        .map(|n| if n.starts_with('a') { format!("{{{a}}}{n}") } else { format!("{{{b}}}{n}") })
        .collect()
}

const INCR_ALL: &str =
    "local last = 0 for _, k in ipairs(KEYS) do last = redis.call('INCR', k) end return last";

/// One kind of transaction a crash test runs over and over: every call
/// increments each of its keys once, so they stay equal.
#[derive(Clone, Copy, Debug)]
enum Writer {
    Multi,
    Script,
}

/// Runs `kind` on `keys` until the server dies; returns the highest value
/// an acknowledged call returned.
fn write_until_killed(url: String, kind: Writer, keys: Vec<String>, start: i64) -> i64 {
    let Ok(mut c) = redis::Client::open(url).and_then(|c| c.get_connection()) else {
        return start;
    };
    let mut acked = start;
    loop {
        let result: redis::RedisResult<i64> = match kind {
            Writer::Multi => {
                let mut pipe = redis::pipe();
                pipe.atomic();
                for k in &keys {
                    pipe.cmd("INCR").arg(k);
                }
                pipe.query::<Vec<i64>>(&mut c).map(|v| v.iter().copied().max().unwrap_or(0))
            }
            Writer::Script => {
                let mut cmd = redis::cmd("EVAL");
                cmd.arg(INCR_ALL).arg(keys.len());
                for k in &keys {
                    cmd.arg(k);
                }
                cmd.query(&mut c)
            }
        };
        match result {
            Ok(v) => acked = acked.max(v),
            Err(_) => return acked,
        }
    }
}

#[test]
fn transactions_and_scripts_are_all_or_nothing_after_kill_9() {
    let dir = TempDir::new("txcrash");
    let (a, b) = keys_on_two_shards();
    // Each group's keys are incremented together; (kind, keys) per writer.
    let groups: Vec<(Writer, Vec<String>)> = vec![
        (Writer::Multi, tagged(&a, &b, &["a1", "b1", "a2", "b2"])),
        (Writer::Multi, tagged(&a, &b, &["a1", "b1", "a2", "b2"])),
        (Writer::Script, tagged(&a, &b, &["a1", "b1", "a2", "b2"])),
        (Writer::Script, tagged(&a, &b, &["a3", "a4"])),
        (Writer::Multi, tagged(&a, &b, &["b3", "b4"])),
    ];
    let mut acked: Vec<i64> = vec![0; groups.len()];
    for round in 0..5u64 {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        for (i, (_, keys)) in groups.iter().enumerate() {
            let values: Vec<Option<i64>> = q(
                &mut c,
                &["MGET".to_string()].iter().chain(keys).map(String::as_str).collect::<Vec<_>>(),
            )
            .unwrap();
            let values: Vec<i64> = values.into_iter().map(|v| v.unwrap_or(0)).collect();
            // No half transaction: the keys of a group are equal.
            assert!(values.iter().all(|v| *v == values[0]), "round {round}: {keys:?} = {values:?}");
            // Every acknowledged call is there (writers of one group share
            // keys, so the highest acknowledged value of any of them).
            let highest = groups
                .iter()
                .zip(&acked)
                .filter(|((_, k), _)| k == keys)
                .map(|(_, v)| *v)
                .max()
                .unwrap_or(0);
            assert!(
                values[0] >= highest,
                "round {round}: {keys:?} = {values:?}, acknowledged {highest}"
            );
            acked[i] = values[0];
        }
        let writers: Vec<_> = groups
            .iter()
            .zip(&acked)
            .map(|((kind, keys), start)| {
                let (url, kind, keys, start) = (server.url(), *kind, keys.clone(), *start);
                std::thread::spawn(move || write_until_killed(url, kind, keys, start))
            })
            .collect();
        std::thread::sleep(Duration::from_millis(300 + (round * 131) % 300));
        drop(server);
        for (i, w) in writers.into_iter().enumerate() {
            acked[i] = w.join().unwrap();
        }
    }
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let first: i64 = q(&mut c, &["GET", &groups[0].1[0]]).unwrap();
    assert!(first > 10, "the writers wrote: {first}");
    let single: i64 = q(&mut c, &["GET", &groups[3].1[0]]).unwrap();
    assert!(single > 10, "the single-shard script wrote: {single}");
    // The cross-shard script runs (its writer did not stop at an error).
    let mut args = vec!["EVAL", INCR_ALL, "4"];
    args.extend(groups[2].1.iter().map(String::as_str));
    assert_eq!(q::<i64>(&mut c, &args).unwrap(), first + 1);
}

#[test]
fn a_crash_never_leaves_half_of_a_cross_shard_exec() {
    let dir = TempDir::new("halfexec");
    let (a, b) = keys_on_two_shards();
    {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        q::<String>(&mut c, &["MSET", &a, "1", &b, "1"]).unwrap();
        let _: Vec<i64> =
            redis::pipe().atomic().cmd("INCR").arg(&a).cmd("INCR").arg(&b).query(&mut c).unwrap();
    }
    // As if the process died after shard 0 logged its part of the EXEC and
    // before shard 1 logged the end of its part.
    let log = shard_log(&dir, 1);
    let data = std::fs::read(&log).unwrap();
    let end = data.windows(5).rposition(|w| w == b"TXEND").expect("a transaction end");
    let record_start = data[..end].iter().rposition(|&c| c == b'*').unwrap();
    std::fs::write(&log, &data[..record_start]).unwrap();
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let v: Vec<i64> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v, vec![1, 1], "the EXEC is gone from both shards");
    // A whole EXEC (and a cross-shard script) survives.
    let _: Vec<i64> =
        redis::pipe().atomic().cmd("INCR").arg(&a).cmd("INCR").arg(&b).query(&mut c).unwrap();
    q::<i64>(&mut c, &["EVAL", INCR_ALL, "2", &a, &b]).unwrap();
    drop(server);
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let v: Vec<i64> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v, vec![3, 3]);
}

/// Runs `ringdb check-aof` with `args`, answering `answer` to its question.
fn check_aof(args: &[&str], answer: &str) -> (bool, String) {
    use std::io::Write;
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringdb"))
        .arg("check-aof")
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(answer.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Starts a server with `shards` shards on `dir` (and `extra` flags),
/// which must fail to start; returns its stderr.
fn start_fails(dir: &TempDir, shards: &str, extra: &[&str]) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_ringdb"))
        .args([
            "--port",
            "0",
            "--shards",
            shards,
            "--pin-cpus",
            "no",
            "--save",
            "",
            "--dir",
            dir.str(),
        ])
        .args(extra)
        .output()
        .unwrap();
    assert!(!out.status.success(), "start-up should have failed");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn a_log_torn_inside_a_transaction_loses_the_whole_transaction() {
    let dir = TempDir::new("torntx");
    let (a, b) = keys_on_two_shards();
    let keys = tagged(&a, &b, &["a1", "a2"]);
    let before = {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        q::<String>(&mut c, &["MSET", &keys[0], "1", &keys[1], "1"]).unwrap();
        let before = std::fs::read(shard_log(&dir, 0)).unwrap().len();
        let replies: Vec<i64> = redis::pipe()
            .atomic()
            .cmd("INCR")
            .arg(&keys[0])
            .cmd("INCR")
            .arg(&keys[1])
            .query(&mut c)
            .unwrap();
        assert_eq!(replies, vec![2, 2]);
        before
    };
    let log = shard_log(&dir, 0);
    let data = std::fs::read(&log).unwrap();
    // The EXEC is one block: TXBEGIN, its records, TXEND.
    assert!(
        data[before..].starts_with(b"*3\r\n$7\r\nTXBEGIN"),
        "{:?}",
        String::from_utf8_lossy(&data[before..])
    );
    assert!(
        data.ends_with(b"\r\n") && data.windows(5).rposition(|w| w == b"TXEND").unwrap() > before
    );
    // As if the machine lost the end of the block: 3 bytes short.
    std::fs::write(&log, &data[..data.len() - 3]).unwrap();
    let (ok, text) = check_aof(&[dir.str()], "");
    assert!(!ok);
    assert!(text.contains(&format!("begun at byte {before}")), "{text}");
    assert!(
        text.contains(&format!("a fix would truncate {} bytes", data.len() - 3 - before)),
        "{text}"
    );
    let stderr = start_fails(&dir, "2", &["--appendonly", "yes", "--aof-load-truncated", "no"]);
    assert!(
        stderr.contains("Unexpected end of file") && stderr.contains("ringdb check-aof --fix"),
        "{stderr}"
    );
    // aof-load-truncated yes (the default): neither INCR, and the log is
    // cut back to the transaction's start.
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let v: Vec<i64> = q(&mut c, &["MGET", &keys[0], &keys[1]]).unwrap();
    assert_eq!(v, vec![1, 1]);
    drop(server);
    assert_eq!(std::fs::read(&log).unwrap().len(), before);
}

#[test]
fn check_aof_finds_and_fixes_a_corrupted_log() {
    let dir = TempDir::new("checkaof");
    let (a, b) = keys_on_two_shards();
    {
        let server = server_on(&dir, ALWAYS);
        let mut c = server.client();
        for i in 0..20 {
            q::<String>(&mut c, &["MSET", &a, &i.to_string(), &b, &i.to_string()]).unwrap();
        }
    }
    let (ok, text) = check_aof(&[dir.str()], "");
    assert!(ok, "{text}");
    assert!(text.contains("All 2 AOF files are valid"), "{text}");
    // Damage a record in the middle of shard 1's log.
    let log = shard_log(&dir, 1);
    let data = std::fs::read(&log).unwrap();
    let middle = data.len() / 2;
    let at = middle + data[middle..].windows(3).position(|w| w == b"\r\n*").unwrap() + 2;
    let mut bad = data.clone();
    bad[at] = b'?';
    std::fs::write(&log, &bad).unwrap();
    let stderr = start_fails(&dir, "2", &["--appendonly", "yes", "--aof-load-truncated", "no"]);
    assert!(
        stderr.contains(&format!("at byte {at}")) && stderr.contains("ringdb check-aof"),
        "{stderr}"
    );
    let (ok, text) = check_aof(&[dir.str()], "");
    assert!(!ok);
    assert!(text.contains(&format!("{}: bad record at byte {at}", log.display())), "{text}");
    assert!(text.contains("Use the --fix option"), "{text}");
    // --fix asks; without a yes nothing changes.
    let (ok, text) = check_aof(&["--fix", log.to_str().unwrap()], "n\n");
    assert!(!ok && text.contains("Continue? [y/N]: Aborting..."), "{text}");
    assert_eq!(std::fs::read(&log).unwrap(), bad);
    let (ok, text) = check_aof(&["--fix", dir.str()], "y\n");
    assert!(ok, "{text}");
    assert!(text.contains(&format!("Successfully truncated AOF {}", log.display())), "{text}");
    assert!(std::fs::read(&log).unwrap().len() <= at);
    // The server starts again; the MSETs whose part on shard 1 was cut off
    // are gone on both shards.
    let server = server_on(&dir, ALWAYS);
    let mut c = server.client();
    let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v[0], v[1], "no half MSET");
    assert!(v[0].as_deref() != Some("19"), "the last MSETs were cut off: {v:?}");
}

#[test]
fn a_big_snapshot_loads_while_the_server_answers_loading() {
    let dir = TempDir::new("loading");
    {
        // Uncompressed, as Redis's test of it: 20 MB.
        let server = server_on(&dir, &["--rdbcompression", "no"]);
        let mut c = server.client();
        let _: () = q(&mut c, &["DEBUG", "POPULATE", "20000", "key", "1000"]).unwrap();
        let _: () = q(&mut c, &["SAVE"]).unwrap();
    }
    // 10,000 keys a shard at 100 µs each: a second or more of loading,
    // serving the clients every 1 KiB of the file.
    let args = ["--key-load-delay", "100", "--loading-process-events-interval-bytes", "1024"];
    let mut flags = vec!["--shards", "2", "--dir", dir.str()];
    flags.extend_from_slice(&args);
    let server = Server::start_loading(&flags);
    let mut c = server.client();
    assert_eq!(info_field(&mut c, "loading"), "1");
    let total: usize = info_field(&mut c, "loading_total_bytes").parse().unwrap();
    assert!(total > 20_000_000, "{total}");
    info_field(&mut c, "loading_loaded_perc").parse::<f64>().unwrap();
    let mut raw = server.raw();
    let loading = "-LOADING Redis is loading the dataset in memory\r\n";
    for cmd in [&["GET", "key:1"][..], &["PING"], &["SET", "a", "b"], &["DBSIZE"]] {
        assert_eq!(raw.call(cmd), loading, "{cmd:?}");
    }
    // Commands flagged `loading` run; settings of where the data is wait.
    assert_eq!(raw.call(&["CONFIG", "SET", "loglevel", "debug"]), "+OK\r\n");
    assert_eq!(raw.call(&["CONFIG", "SET", "dir", "/tmp"]), loading);
    // Hidden settings are there when named.
    let delay: Vec<String> = q(&mut c, &["CONFIG", "GET", "key-load-delay"]).unwrap();
    assert_eq!(delay, ["key-load-delay", "100"]);
    let listed: Vec<String> = q(&mut c, &["CONFIG", "GET", "*"]).unwrap();
    assert!(!listed.iter().any(|n| n == "key-load-delay"));
    let deadline = Instant::now() + Duration::from_secs(60);
    while info_field(&mut c, "loading") != "0" {
        assert!(Instant::now() < deadline, "the load does not end");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(q::<usize>(&mut c, &["DBSIZE"]).unwrap(), 20000);
    assert_eq!(q::<String>(&mut c, &["GET", "key:7"]).unwrap().len(), 1000);
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "dir", dir.str()]).unwrap(), "OK");
    drop(server);

    // SHUTDOWN SAVE while loading exits without saving (as Redis): the
    // file is what was being loaded. DEBUG cannot change the data then.
    let file = std::fs::read(dir.0.join("dump.rdb")).unwrap();
    let mut server = Server::start_loading(&flags);
    let mut raw = server.raw();
    assert_eq!(raw.call(&["DEBUG", "POPULATE", "10"]), loading);
    assert_eq!(raw.call(&["DEBUG", "RELOAD"]), loading);
    raw.cmd(&[b"SHUTDOWN", b"SAVE"]);
    assert!(raw.is_closed());
    assert!(server.exit_code(Duration::from_secs(10)).is_some());
    assert!(std::fs::read(dir.0.join("dump.rdb")).unwrap() == file, "the file changed");
}

#[test]
fn debug_reload_and_loadaof_touch_watched_keys_and_tracking_clients() {
    let server = Server::start_with(&["--shards", "2", "--appendonly", "yes"]);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["MSET", &a, "1", &b, "2"]).unwrap();
    for reload in [&["DEBUG", "RELOAD"][..], &["DEBUG", "LOADAOF"]] {
        // A transaction watching a key of each shard fails after the
        // reload, as after a flush (Redis's emptyData).
        let mut watcher = server.raw();
        assert_eq!(watcher.call(&["WATCH", &a, &b]), "+OK\r\n");
        // A tracking client (RESP3) drops its whole cache: a null
        // invalidation.
        let mut tracker = server.raw();
        assert!(tracker.call(&["HELLO", "3"]).starts_with('%'));
        assert_eq!(tracker.call(&["CLIENT", "TRACKING", "ON"]), "+OK\r\n");
        assert_eq!(tracker.call(&["GET", &a]), "$1\r\n1\r\n");
        assert_eq!(q::<String>(&mut c, reload).unwrap(), "OK", "{reload:?}");
        assert_eq!(tracker.read_frame(), b">2\r\n$10\r\ninvalidate\r\n_\r\n", "{reload:?}");
        assert_eq!(watcher.call(&["MULTI"]), "+OK\r\n");
        assert_eq!(watcher.call(&["GET", &a]), "+QUEUED\r\n");
        assert_eq!(watcher.call(&["EXEC"]), "*-1\r\n", "{reload:?}");
        // The data is the same, and the log still has it.
        assert_eq!(q::<Vec<String>>(&mut c, &["MGET", &a, &b]).unwrap(), ["1", "2"]);
    }
    assert_eq!(q::<String>(&mut c, &["DEBUG", "LOADAOF"]).unwrap(), "OK");
    assert_eq!(q::<Vec<String>>(&mut c, &["MGET", &a, &b]).unwrap(), ["1", "2"]);
}
