//! Persistence against a real 2-shard server: DUMP/RESTORE both ways
//! between ringdb and a real redis-server (when one is installed; the tests
//! that need it say so and skip otherwise), for every type.

mod common;
use common::{keys_on_two_shards, q, Server};
use redis::Value;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
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

/// A real redis-server, killed on drop.
struct Redis {
    child: Child,
    port: u16,
}

impl Redis {
    /// Starts `redis-server` with its files in `dir`; `None` (after saying
    /// so) when it is not installed.
    fn start(dir: &TempDir, dbfilename: &str) -> Option<Redis> {
        let port = std::net::TcpListener::bind("127.0.0.1:0").ok()?.local_addr().ok()?.port();
        let child = Command::new("redis-server")
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1", "--save", ""])
            .args(["--dir", dir.str(), "--dbfilename", dbfilename, "--appendonly", "no"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn();
        let Ok(child) = child else {
            eprintln!("SKIPPED: redis-server is not installed (apt install redis-server)");
            return None;
        };
        let redis = Redis { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(mut c) = redis.try_client() {
                // Loading a file: wait until it is done.
                if q::<String>(&mut c, &["PING"]).is_ok() {
                    return Some(redis);
                }
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        panic!("redis-server did not start");
    }

    fn try_client(&self) -> redis::RedisResult<redis::Connection> {
        redis::Client::open(format!("redis://127.0.0.1:{}/", self.port))?.get_connection()
    }

    fn client(&self) -> redis::Connection {
        self.try_client().expect("connect to redis-server")
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
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
    cmds
}

fn key_names() -> Vec<String> {
    let (a, b) = keys_on_two_shards();
    let mut keys: Vec<String> = [
        "int", "big-int", "long", "ttl", "list", "biglist", "hash", "bighash", "intset", "strset",
        "zset", "bigzset", "hll",
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
    let Some(redis) = Redis::start(&dir, "dump.rdb") else { return };
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
