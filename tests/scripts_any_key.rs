//! Scripts that touch keys they did not declare, on a real 2-shard server,
//! as Redis runs them: the flash-sale tutorial's purchase script verbatim
//! (no declared key), atomicity of scripts that move a value between the
//! shards while others read both, runs undone and run again with every
//! shard leaving no trace (notifications, logs), and a crash under
//! `appendfsync always` never leaving half a script.

mod common;
use common::{info_field, keys_on_two_shards, q, Server};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// The purchase script of the flash-sale tutorial (`shared/seeds/004_…`),
/// verbatim but for its comments: called with no key, it builds them.
const SECKILL: &str = include_str!("../benches/loadgen/seckill.lua");

/// Three vouchers whose stock keys are not all on one shard.
fn vouchers() -> Vec<String> {
    let map = ringdb_engine::SlotMap::new(2);
    let shard = |v: &str| map.shard_of_key(format!("seckill:stock:{v}").as_bytes()).0;
    let mut chosen: Vec<String> = Vec::new();
    for want in [0, 1, 0] {
        let v =
            (1..).map(|i| i.to_string()).find(|v| shard(v) == want && !chosen.contains(v)).unwrap();
        chosen.push(v);
    }
    chosen
}

#[test]
fn the_tutorials_purchase_script_sells_each_unit_once() {
    const STOCK: i64 = 25;
    const USERS: usize = 60;
    const BUYERS: usize = 40;
    let server = Server::start(2);
    let mut c = server.client();
    let vouchers = vouchers();
    for v in &vouchers {
        q::<()>(&mut c, &["SET", &format!("seckill:stock:{v}"), &STOCK.to_string()]).unwrap();
    }
    q::<()>(&mut c, &["XGROUP", "CREATE", "stream.orders", "g1", "0", "MKSTREAM"]).unwrap();
    let sha: String = q(&mut c, &["SCRIPT", "LOAD", SECKILL]).unwrap();

    // 40 buyers, each trying every user twice on every voucher.
    let mut threads = Vec::new();
    for b in 0..BUYERS {
        let (url, sha, vouchers) = (server.url(), sha.clone(), vouchers.clone());
        threads.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut bought = Vec::new();
            for round in 0..2 {
                for u in 0..USERS {
                    let user = (u + b * 7) % USERS;
                    for v in &vouchers {
                        let order = format!("{b}-{round}-{user}-{v}");
                        let r: i64 =
                            q(&mut c, &["EVALSHA", &sha, "0", v, &user.to_string(), &order])
                                .unwrap();
                        assert!((0..=2).contains(&r), "reply {r}");
                        if r == 0 {
                            bought.push((v.clone(), user, order));
                        }
                    }
                }
            }
            bought
        }));
    }
    let bought: Vec<(String, usize, String)> =
        threads.into_iter().flat_map(|t| t.join().unwrap()).collect();

    let mut per_voucher: HashMap<&str, HashSet<usize>> = HashMap::new();
    for (v, user, _) in &bought {
        assert!(per_voucher.entry(v).or_default().insert(*user), "user {user} bought {v} twice");
    }
    for v in &vouchers {
        let stock: i64 = q(&mut c, &["GET", &format!("seckill:stock:{v}")]).unwrap();
        assert_eq!(stock, 0, "voucher {v}");
        assert_eq!(per_voucher[v.as_str()].len() as i64, STOCK, "orders of voucher {v}");
        let buyers: i64 = q(&mut c, &["SCARD", &format!("seckill:order:{v}")]).unwrap();
        assert_eq!(buyers, STOCK);
    }
    let orders: i64 = q(&mut c, &["XLEN", "stream.orders"]).unwrap();
    assert_eq!(orders as usize, bought.len());
    // Cross-shard runs took every shard; runs that stayed held are counted.
    let on_node: u64 = info_field(&mut c, "stats", "script_runs_on_node").parse().unwrap();
    assert!(on_node > 0);

    // Three consumers drain the queue as the tutorial does; one of them
    // dies before acknowledging and recovers from its pending list (id 0).
    let mut consumers = Vec::new();
    for name in ["c1", "c2", "c3"] {
        let url = server.url();
        consumers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut seen = Vec::new();
            let read =
                |c: &mut redis::Connection, from: &str, block: bool| -> Option<(String, String)> {
                    let mut args = vec!["XREADGROUP", "GROUP", "g1", name, "COUNT", "1"];
                    if block {
                        args.extend(["BLOCK", "500"]);
                    }
                    args.extend(["STREAMS", "stream.orders", from]);
                    let reply: redis::Value = q(c, &args).unwrap();
                    first_entry(reply)
                };
            let mut unacked = None;
            while let Some((id, order)) = read(&mut c, ">", true) {
                if name == "c3" && unacked.is_none() {
                    // Crashes before its XACK.
                    unacked = Some(id);
                    continue;
                }
                let _: i64 = q(&mut c, &["XACK", "stream.orders", "g1", &id]).unwrap();
                seen.push(order);
            }
            if name == "c3" {
                // Recovery: what it read but never acknowledged.
                while let Some((id, order)) = read(&mut c, "0", false) {
                    let _: i64 = q(&mut c, &["XACK", "stream.orders", "g1", &id]).unwrap();
                    seen.push(order);
                }
            }
            seen
        }));
    }
    let mut handled: Vec<String> = consumers.into_iter().flat_map(|t| t.join().unwrap()).collect();
    handled.sort();
    let mut expected: Vec<String> = bought.iter().map(|(_, _, o)| o.clone()).collect();
    expected.sort();
    assert_eq!(handled, expected, "every order handled exactly once");
    let pending: Vec<redis::Value> = q(&mut c, &["XPENDING", "stream.orders", "g1"]).unwrap();
    assert_eq!(pending.first(), Some(&redis::Value::Int(0)));
}

/// The first entry of an XREADGROUP reply: its id and its `id` field.
fn first_entry(reply: redis::Value) -> Option<(String, String)> {
    use redis::Value::*;
    let text = |v: &redis::Value| match v {
        BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        other => panic!("not a string: {other:?}"),
    };
    let Array(streams) = reply else { return None };
    let Array(stream) = streams.into_iter().next()? else { return None };
    let Array(entries) = stream.into_iter().nth(1)? else { return None };
    let Array(entry) = entries.into_iter().next()? else { return None };
    let id = text(&entry[0]);
    let Array(fields) = &entry[1] else { return None };
    let at = fields.iter().position(|f| text(f) == "id")?;
    Some((id, text(&fields[at + 1])))
}

/// Moves `n` from ARGV[1] to ARGV[2]; neither is declared.
const MOVE: &str = "local n = tonumber(ARGV[3]) \
    redis.call('decrby', ARGV[1], n) redis.call('incrby', ARGV[2], n) \
    return redis.call('mget', ARGV[1], ARGV[2])";

/// The same with its source declared: held on the source's shard, it is
/// undone and runs again with every shard when the target is elsewhere.
fn move_declared(tag: u64) -> String {
    format!(
        "-- {tag}\nlocal n = tonumber(ARGV[2]) redis.call('decrby', KEYS[1], n) \
         redis.call('incrby', ARGV[1], n) return 1"
    )
}

#[test]
fn scripts_moving_a_value_between_shards_are_atomic() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let near = format!("{{{a}}}:near");
    let mut c = server.client();
    q::<()>(&mut c, &["MSET", &a, "1000", &b, "0", &near, "0"]).unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..3u64 {
        let (a, b, near, stop, url) =
            (a.clone(), b.clone(), near.clone(), stop.clone(), server.url());
        writers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let (from, to) = if n.is_multiple_of(2) { (&a, &b) } else { (&b, &a) };
                let amount = (n % 7 + 1).to_string();
                if w == 2 {
                    // A fresh script each time: held once on a's shard
                    // (moving to `near`), then undone and run again with
                    // every shard when it meets b.
                    let script = move_declared(n);
                    let _: i64 = q(&mut c, &["EVAL", &script, "1", &a, &near, "0"]).unwrap();
                    let _: i64 = q(&mut c, &["EVAL", &script, "1", &a, &b, &amount]).unwrap();
                    let _: i64 = q(&mut c, &["EVAL", &script, "1", &b, &a, &amount]).unwrap();
                } else {
                    let _: Vec<i64> = q(&mut c, &["EVAL", MOVE, "0", from, to, &amount]).unwrap();
                }
                n += 1;
            }
            n
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (a, b, near, stop, url) =
            (a.clone(), b.clone(), near.clone(), stop.clone(), server.url());
        readers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut n = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let v: Vec<i64> = q(&mut c, &["MGET", &a, &b, &near]).unwrap();
                assert_eq!(v.iter().sum::<i64>(), 1000, "a reader saw half a script: {v:?}");
                n += 1;
            }
            n
        }));
    }
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let moves: u64 = writers.into_iter().map(|t| t.join().unwrap()).sum();
    let reads: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(moves > 30 && reads > 30, "too little traffic: {moves} moves, {reads} reads");
    let v: Vec<i64> = q(&mut c, &["MGET", &a, &b, &near]).unwrap();
    assert_eq!(v.iter().sum::<i64>(), 1000);
    let restarted: u64 = info_field(&mut c, "stats", "script_runs_restarted").parse().unwrap();
    assert!(restarted > 0, "no run was undone and run again");
}

/// Two shards logging every write to `dir`, synced before each reply.
fn durable(dir: &std::path::Path, extra: &[&str]) -> Server {
    let dir = dir.display().to_string();
    let mut args =
        vec!["--shards", "2", "--dir", &dir, "--appendonly", "yes", "--appendfsync", "always"];
    args.extend_from_slice(extra);
    Server::start_with(&args)
}

#[test]
fn an_undone_run_leaves_no_trace() {
    let dir = common::temp_dir("undone");
    let server = durable(&dir, &["--notify-keyspace-events", "KEA"]);
    let (a, b) = keys_on_two_shards();
    let near = format!("{{{a}}}:near");
    let mut c = server.client();
    q::<()>(&mut c, &["SET", &a, "10"]).unwrap();
    let mut events = server.raw();
    assert!(events.call(&["PSUBSCRIBE", "__keyevent@0__:*"]).starts_with("*3"));
    let script = move_declared(1);
    // Learns that the script stays on a's shard, then meets b.
    assert_eq!(q::<i64>(&mut c, &["EVAL", &script, "1", &a, &near, "0"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EVAL", &script, "1", &a, &b, "3"]).unwrap(), 1);
    assert_eq!(info_field(&mut c, "stats", "script_runs_restarted"), "1");
    let v: Vec<i64> = q(&mut c, &["MGET", &a, &b, &near]).unwrap();
    assert_eq!(v, vec![7, 3, 0]);
    // Each run's notifications once: the learning run's two, then the
    // second run's two (the undone run's are gone).
    q::<()>(&mut c, &["SET", "marker", "1"]).unwrap();
    let mut seen = Vec::new();
    loop {
        let frame = String::from_utf8_lossy(&events.read_frame()).into_owned();
        let key = frame.rsplit("\r\n").nth(1).unwrap_or_default().to_string();
        let event = frame.split("\r\n").nth(6).unwrap_or_default().to_string();
        if key == "marker" {
            break;
        }
        seen.push(format!("{event} {key}"));
    }
    let prefix = "__keyevent@0__:";
    // (DECRBY's event is `incrby`, as in Redis.)
    let want: Vec<String> = [("incrby", &a), ("incrby", &near), ("incrby", &a), ("incrby", &b)]
        .iter()
        .map(|(e, k)| format!("{prefix}{e} {k}"))
        .collect();
    assert_eq!(seen, want);
    // The logs have the second run once, as one transaction of two parts.
    drop(server);
    let log = |shard: usize| {
        let path = dir.join("appendonlydir").join(format!("appendonly.aof.{shard}-of-2"));
        String::from_utf8_lossy(&std::fs::read(path).unwrap()).into_owned()
    };
    let (log0, log1) = (log(0), log(1));
    // Shard 0: SET, the learning run (one part, two keys), the second run;
    // nothing of the undone one in between.
    let records_of = |log: &str, key: &str| log.matches(&format!("\r\n{key}\r\n")).count();
    assert_eq!(records_of(&log0, &a), 3, "{log0}");
    assert_eq!(log0.matches("TXBEGIN").count(), 2, "{log0}");
    assert_eq!(log1.matches("TXBEGIN").count(), 1, "{log1}");
    assert!(log1.contains("TXBEGIN\r\n") && log1.contains("\r\n$1\r\n2\r\n"), "{log1}");
    let server = durable(&dir, &[]);
    let mut c = server.client();
    let v: Vec<i64> = q(&mut c, &["MGET", &a, &b, &near]).unwrap();
    assert_eq!(v, vec![7, 3, 0]);
}

#[test]
fn a_crash_never_leaves_half_a_script() {
    let dir = common::temp_dir("scriptcrash");
    let start = || durable(&dir, &[]);
    let (a, b) = keys_on_two_shards();
    {
        let server = start();
        let mut c = server.client();
        q::<()>(&mut c, &["MSET", &a, "1000", &b, "0"]).unwrap();
    }
    for round in 0..4u64 {
        let server = start();
        let mut c = server.client();
        let v: Vec<i64> = q(&mut c, &["MGET", &a, &b]).unwrap();
        assert_eq!(v.iter().sum::<i64>(), 1000, "round {round}: half a script survived: {v:?}");
        let mut movers = Vec::new();
        for w in 0..2 {
            let (a, b, url) = (a.clone(), b.clone(), server.url());
            movers.push(thread::spawn(move || {
                let Ok(mut c) = redis::Client::open(url).unwrap().get_connection() else { return };
                let (from, to) = if w == 0 { (&a, &b) } else { (&b, &a) };
                while q::<Vec<i64>>(&mut c, &["EVAL", MOVE, "0", from, to, "1"]).is_ok() {}
            }));
        }
        thread::sleep(Duration::from_millis(120 + (round * 89) % 150));
        // Dropping the server kills it (SIGKILL) in the middle of runs.
        drop(server);
        movers.into_iter().for_each(|t| t.join().unwrap());
    }
    let server = start();
    let mut c = server.client();
    let v: Vec<i64> = q(&mut c, &["MGET", &a, &b]).unwrap();
    assert_eq!(v.iter().sum::<i64>(), 1000, "half a script survived: {v:?}");
}

/// A script's PUBLISH reaches the subscribers of every core, once, and
/// replies how many it reached: on one shard and on two, held runs that
/// are undone by it included.
#[test]
fn publish_from_scripts_reaches_every_core_once() {
    for shards in [1, 2] {
        let server = Server::start(shards);
        let mut admin = server.client();
        let mut keep = Vec::new();
        let mut subscribers: Vec<common::Raw> =
            (0..shards).map(|s| common::raw_on_shard(&server, &mut admin, s, &mut keep)).collect();
        for s in &mut subscribers {
            assert!(s.call(&["SUBSCRIBE", "news"]).starts_with("*3"));
        }
        let mut p = server.raw();
        assert!(p.call(&["PSUBSCRIBE", "ne*"]).starts_with("*3"));
        let (a, _) = keys_on_two_shards();
        // Learns that the script stays on a's shard, then publishes: held
        // (one shard) or undone and run again on the node (two).
        let script = "redis.call('incr', KEYS[1]) \
                      if ARGV[1] == 'say' then return redis.call('publish', 'news', 'hi') end return 0";
        assert_eq!(q::<i64>(&mut admin, &["EVAL", script, "1", &a, "no"]).unwrap(), 0);
        let receivers = shards as i64 + 1;
        assert_eq!(q::<i64>(&mut admin, &["EVAL", script, "1", &a, "say"]).unwrap(), receivers);
        let fcall = "#!lua name=pub\nredis.register_function('pub', function(k, a) return redis.call('spublish', a[1], a[2]) end)";
        q::<String>(&mut admin, &["FUNCTION", "LOAD", fcall]).unwrap();
        for s in &mut subscribers {
            let msg = String::from_utf8_lossy(&s.read_frame()).into_owned();
            assert_eq!(msg, "*3\r\n$7\r\nmessage\r\n$4\r\nnews\r\n$2\r\nhi\r\n", "{shards} shards");
        }
        let msg = String::from_utf8_lossy(&p.read_frame()).into_owned();
        assert!(msg.starts_with("*4\r\n$8\r\npmessage\r\n$3\r\nne*\r\n"), "{msg}");
        // Nothing twice: the next frames are the marker's.
        q::<i64>(&mut admin, &["PUBLISH", "news", "marker"]).unwrap();
        for s in &mut subscribers {
            let msg = String::from_utf8_lossy(&s.read_frame()).into_owned();
            assert!(msg.ends_with("$6\r\nmarker\r\n"), "{msg}");
        }
        let v: i64 = q(&mut admin, &["GET", &a]).unwrap();
        assert_eq!(v, 2);
        let restarted = info_field(&mut admin, "stats", "script_runs_restarted");
        assert_eq!(restarted, if shards == 2 { "1" } else { "0" });
        // One shard holds every key: each run is held there.
        let runs = ["script_runs_held", "script_runs_on_node"]
            .map(|field| info_field(&mut admin, "stats", field));
        assert_eq!(runs, if shards == 2 { ["0", "2"] } else { ["2", "0"] });
        // Read-only scripts may not publish, as in Redis.
        let ro =
            q::<i64>(&mut admin, &["EVAL_RO", "return redis.call('publish', 'news', 'x')", "0"])
                .unwrap_err();
        assert!(
            ro.to_string().contains("Write commands are not allowed from read-only scripts"),
            "{ro}"
        );
        // SPUBLISH from a function.
        let n: i64 = q(&mut admin, &["FCALL", "pub", "0", "s-chan", "x"]).unwrap();
        assert_eq!(n, 0);
    }
}

/// KEYS and DBSIZE from a script see every shard (a held run undone by
/// them runs again on the node), as the common "delete what matches"
/// script needs.
#[test]
fn keys_and_dbsize_from_scripts_see_every_shard() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<()>(&mut c, &["MSET", &format!("tmp:{a}"), "1", &format!("tmp:{b}"), "2", "kept", "3"])
        .unwrap();
    let purge = "local n = 0 for _, k in ipairs(redis.call('keys', ARGV[1])) do \
                 n = n + redis.call('del', k) end return {n, redis.call('dbsize')}";
    let v: Vec<i64> = q(&mut c, &["EVAL", purge, "0", "tmp:*"]).unwrap();
    assert_eq!(v, vec![2, 1]);
    // Held first (it learns that it stays on a's shard), then undone by KEYS.
    let held = "redis.call('set', KEYS[1], 1) \
                if ARGV[1] == 'all' then return redis.call('dbsize') end return 0";
    assert_eq!(q::<i64>(&mut c, &["EVAL", held, "1", &a, "no"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EVAL", held, "1", &a, "all"]).unwrap(), 2);
    assert_eq!(info_field(&mut c, "stats", "script_runs_restarted"), "1");
}
