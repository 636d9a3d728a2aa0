//! Hot-key detection against a real 2-shard server: rules (valid, invalid,
//! changed at run time, from the configuration, kept by CONFIG REWRITE),
//! detection within one window, a key just below the threshold never hot,
//! cool-down, HOTKEYS.WATCH pushes to watchers on both cores (RESP2 watch
//! mode and RESP3), HOTKEYS TOP on a skewed load, INFO hotkeys.

mod common;
use common::{q, raw_on_shard, Raw, Server};
use std::time::{Duration, Instant};

/// The shard that owns `key` on a 2-shard server.
fn shard_of(key: &str) -> usize {
    ringdb_engine::SlotMap::new(2).shard_of_key(key.as_bytes()).0 as usize
}

/// Keys `<prefix><i>` on shard 0 and on shard 1.
fn keys_on_both(prefix: &str) -> [String; 2] {
    let find =
        |shard| (0..).map(|i| format!("{prefix}{i}")).find(|k| shard_of(k) == shard).unwrap();
    [find(0), find(1)]
}

/// `n` GETs of `key` in one pipeline (well within any window).
fn hammer(c: &mut redis::Connection, key: &str, n: usize) {
    let mut pipe = redis::pipe();
    for _ in 0..n {
        pipe.cmd("GET").arg(key).ignore();
    }
    let () = pipe.query(c).unwrap();
}

/// The keys HOTKEYS LIST reports, with their rule and count.
fn hot_list(c: &mut redis::Connection) -> Vec<(String, String, i64)> {
    let list: Vec<Vec<redis::Value>> = q(c, &["HOTKEYS", "LIST"]).unwrap();
    list.iter()
        .map(|entry| {
            let field = |name: &str| {
                let at = entry
                    .iter()
                    .position(|v| {
                        redis::from_redis_value::<String>(v).ok().as_deref() == Some(name)
                    })
                    .unwrap();
                entry[at + 1].clone()
            };
            (
                redis::from_redis_value(&field("key")).unwrap(),
                redis::from_redis_value(&field("rule")).unwrap(),
                redis::from_redis_value(&field("count")).unwrap(),
            )
        })
        .collect()
}

fn info_field(c: &mut redis::Connection, name: &str) -> String {
    common::info_field(c, "hotkeys", name)
}

fn set_rule(c: &mut redis::Connection, rule: &str) {
    let mut args = vec!["HOTKEYS", "RULES", "SET"];
    args.extend(rule.split(' '));
    assert_eq!(q::<String>(c, &args).unwrap(), "OK");
}

fn err(c: &mut redis::Connection, args: &[&str]) -> String {
    q::<redis::Value>(c, args).unwrap_err().to_string()
}

/// Waits until `check` holds (or fails after `secs`).
fn eventually(secs: u64, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(secs);
    while !check() {
        assert!(Instant::now() < deadline, "condition not met within {secs}s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn rules_are_validated_listed_changed_and_deleted() {
    let server = Server::start(2);
    let mut c = server.client();
    let all: Vec<Vec<String>> = q(&mut c, &["HOTKEYS", "RULES", "GET"]).unwrap();
    assert!(all.is_empty());
    set_rule(&mut c, "users prefix user: interval 0.5 threshold 100 duration 2 count reads");
    set_rule(&mut c, "items PATTERN item:*:stock INTERVAL 1 THRESHOLD 10 DURATION 5");
    let one: Vec<String> = q(&mut c, &["HOTKEYS", "RULES", "GET", "users"]).unwrap();
    assert_eq!(
        one.join(" "),
        "users PREFIX user: INTERVAL 0.5 THRESHOLD 100 DURATION 2 COUNT reads"
    );
    let all: Vec<Vec<String>> = q(&mut c, &["HOTKEYS", "RULES", "GET"]).unwrap();
    assert_eq!(all.len(), 2);
    assert_eq!(all[1][0], "items");
    assert_eq!(
        q::<Option<Vec<String>>>(&mut c, &["HOTKEYS", "RULES", "GET", "nope"]).unwrap(),
        None
    );
    // The setting holds them, in the same syntax.
    let config: Vec<String> = q(&mut c, &["CONFIG", "GET", "hotkeys-rules"]).unwrap();
    assert_eq!(
        config[1],
        "users PREFIX user: INTERVAL 0.5 THRESHOLD 100 DURATION 2 COUNT reads; \
         items PATTERN item:*:stock INTERVAL 1 THRESHOLD 10 DURATION 5 COUNT both"
    );
    assert_eq!(info_field(&mut c, "hotkeys_rules"), "2");
    // Replacing a rule keeps its place.
    set_rule(&mut c, "users PREFIX u: INTERVAL 1 THRESHOLD 3 DURATION 1");
    let all: Vec<Vec<String>> = q(&mut c, &["HOTKEYS", "RULES", "GET"]).unwrap();
    assert_eq!((all[0][2].as_str(), all.len()), ("u:", 2));

    let bad = |c: &mut redis::Connection, rule: &str| {
        let mut args = vec!["HOTKEYS", "RULES", "SET"];
        args.extend(rule.split(' '));
        err(c, &args)
    };
    assert!(bad(&mut c, "r PREFIX a INTERVAL 1 THRESHOLD 0 DURATION 1")
        .contains("THRESHOLD must be an integer between 1 and 1000000000"));
    assert!(bad(&mut c, "r PREFIX a INTERVAL 0 THRESHOLD 1 DURATION 1")
        .contains("INTERVAL must be a number of seconds between 0.01 and 86400"));
    assert!(bad(&mut c, "r PREFIX a INTERVAL 1 THRESHOLD 1 DURATION x")
        .contains("DURATION must be a number of seconds"));
    assert!(bad(&mut c, "r PREFIX a INTERVAL 1 THRESHOLD 1")
        .contains("needs INTERVAL, THRESHOLD and DURATION"));
    assert!(bad(&mut c, "r INTERVAL 1 THRESHOLD 1 DURATION 1").contains("needs PATTERN or PREFIX"));
    assert!(bad(&mut c, "r PREFIX a INTERVAL 1 THRESHOLD 1 DURATION 1 COUNT some")
        .contains("COUNT must be reads, writes or both"));
    assert!(bad(&mut c, "r PREFIX a SIZE 1").contains("syntax error"));
    assert!(err(&mut c, &["HOTKEYS", "RULES", "MAKE", "x"])
        .contains("unknown subcommand or wrong number of arguments for 'RULES MAKE'"));
    assert!(err(&mut c, &["HOTKEYS", "RULES"])
        .contains("wrong number of arguments for 'hotkeys|rules'"));
    assert!(err(&mut c, &["HOTKEYS", "NOPE"]).contains("unknown subcommand 'NOPE'"));
    assert!(err(&mut c, &["CONFIG", "SET", "hotkeys-rules", "r PREFIX a"])
        .contains("CONFIG SET failed (possibly related to argument 'hotkeys-rules') - a hotkeys rule needs INTERVAL"));
    // Nothing changed by the refused ones.
    let all: Vec<Vec<String>> = q(&mut c, &["HOTKEYS", "RULES", "GET"]).unwrap();
    assert_eq!(all.len(), 2);

    assert_eq!(q::<i64>(&mut c, &["HOTKEYS", "RULES", "DEL", "users"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["HOTKEYS", "RULES", "DEL", "users"]).unwrap(), 0);
    // CONFIG SET replaces them all.
    let ok: String = q(
        &mut c,
        &["CONFIG", "SET", "hotkeys-rules", "a PREFIX a INTERVAL 1 THRESHOLD 2 DURATION 1;b PREFIX b INTERVAL 1 THRESHOLD 2 DURATION 1"],
    )
    .unwrap();
    assert_eq!(ok, "OK");
    let names: Vec<String> = q::<Vec<Vec<String>>>(&mut c, &["HOTKEYS", "RULES", "GET"])
        .unwrap()
        .into_iter()
        .map(|r| r[0].clone())
        .collect();
    assert_eq!(names, vec!["a", "b"]);
    let help: Vec<String> = q(&mut c, &["HOTKEYS", "HELP"]).unwrap();
    assert!(help[0].starts_with("HOTKEYS <subcommand>"));
}

#[test]
fn hot_within_one_window_just_below_never_and_cools_down() {
    let server = Server::start(2);
    let mut c = server.client();
    set_rule(&mut c, "hot PREFIX hot: INTERVAL 1 THRESHOLD 50 DURATION 0.5");
    let [a, b] = keys_on_both("hot:");
    let [x, y] = keys_on_both("hot:x");
    // On both shards: 50 accesses make a key hot at once, 49 never do.
    hammer(&mut c, &a, 50);
    hammer(&mut c, &b, 50);
    hammer(&mut c, &x, 49);
    hammer(&mut c, &y, 49);
    let mut hot = hot_list(&mut c);
    hot.sort();
    assert_eq!(hot, vec![(a.clone(), "hot".into(), 50), (b.clone(), "hot".into(), 50)]);
    // 49 in every window, window after window: never hot.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(1050));
        hammer(&mut c, &x, 49);
        hammer(&mut c, &y, 49);
        assert!(hot_list(&mut c).iter().all(|(k, _, _)| k != &x && k != &y));
    }
    // a and b were last hot over 3 s ago: cooled down.
    assert!(hot_list(&mut c).is_empty());
    assert_eq!(info_field(&mut c, "hotkeys_detected"), "2");
    assert_eq!(info_field(&mut c, "hotkeys_cooled"), "2");
    assert_eq!(info_field(&mut c, "hotkeys_hot_keys"), "0");
    // Cool-down comes about `duration` after the last access at the
    // threshold (0.5 s, checked every 100 ms).
    hammer(&mut c, &a, 50);
    let hot_at = Instant::now();
    assert_eq!(hot_list(&mut c).len(), 1);
    eventually(3, || hot_list(&mut c).is_empty());
    let took = hot_at.elapsed();
    assert!(took >= Duration::from_millis(450), "cooled after {took:?}");
    // Writes count too under COUNT both; keys of no rule are not tracked.
    let mut pipe = redis::pipe();
    for i in 0..50 {
        pipe.cmd("SET").arg(&b).arg(i).ignore();
        pipe.cmd("GET").arg("cold:key").ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let hot = hot_list(&mut c);
    assert_eq!(hot.len(), 1);
    assert_eq!(hot[0].0, b);
    assert!(info_field(&mut c, "hotkeys_tracked_keys").parse::<u64>().unwrap() <= 4);
}

#[test]
fn reads_or_writes_only_and_changing_a_rule_at_run_time() {
    let server = Server::start(2);
    let mut c = server.client();
    set_rule(&mut c, "w PREFIX w: INTERVAL 1 THRESHOLD 5 DURATION 10 COUNT writes");
    hammer(&mut c, "w:1", 20);
    assert!(hot_list(&mut c).is_empty(), "reads do not count for a writes rule");
    for i in 0..5 {
        let () = q(&mut c, &["SET", "w:1", &i.to_string()]).unwrap();
    }
    assert_eq!(hot_list(&mut c), vec![("w:1".into(), "w".into(), 5)]);
    // A changed rule starts over: the key is no longer hot.
    set_rule(&mut c, "w PREFIX w: INTERVAL 1 THRESHOLD 6 DURATION 10 COUNT writes");
    assert!(hot_list(&mut c).is_empty());
    // Deleting the rule stops the counting.
    assert_eq!(q::<i64>(&mut c, &["HOTKEYS", "RULES", "DEL", "w"]).unwrap(), 1);
    for i in 0..10 {
        let () = q(&mut c, &["SET", "w:1", &i.to_string()]).unwrap();
    }
    assert!(hot_list(&mut c).is_empty());
    assert_eq!(info_field(&mut c, "hotkeys_tracked_keys"), "0");
}

/// A watcher on `shard` speaking RESP2 or RESP3.
fn watcher(server: &Server, shard: usize, resp3: bool, keep: &mut Vec<Raw>) -> Raw {
    let mut admin = server.client();
    let mut w = raw_on_shard(server, &mut admin, shard, keep);
    if resp3 {
        assert!(w.call(&["HELLO", "3"]).starts_with('%'));
    }
    w
}

fn hot_frame(resp3: bool, key: &str, count: i64, rule: &str) -> String {
    let head = if resp3 { '>' } else { '*' };
    format!(
        "{head}4\r\n$6\r\nhotkey\r\n${}\r\n{key}\r\n:{count}\r\n${}\r\n{rule}\r\n",
        key.len(),
        rule.len()
    )
}

fn cold_frame(resp3: bool, key: &str) -> String {
    let head = if resp3 { '>' } else { '*' };
    format!("{head}2\r\n$7\r\ncoldkey\r\n${}\r\n{key}\r\n", key.len())
}

fn read(w: &mut Raw) -> String {
    String::from_utf8_lossy(&w.read_frame()).into_owned()
}

#[test]
fn watchers_on_both_cores_get_hot_and_cold_pushes() {
    let server = Server::start(2);
    let mut keep = Vec::new();
    let mut c = server.client();
    set_rule(&mut c, "flash PREFIX sale: INTERVAL 1 THRESHOLD 20 DURATION 0.3");
    let [k0, k1] = keys_on_both("sale:");
    // RESP2 on shard 0, RESP3 on shard 1, and a filtered one.
    let mut w0 = watcher(&server, 0, false, &mut keep);
    let mut w1 = watcher(&server, 1, true, &mut keep);
    let mut only_other = watcher(&server, 0, false, &mut keep);
    assert_eq!(w0.call(&["HOTKEYS.WATCH"]), "*2\r\n$13\r\nhotkeys.watch\r\n:0\r\n");
    assert_eq!(w1.call(&["HOTKEYS.WATCH"]), ">2\r\n$13\r\nhotkeys.watch\r\n:0\r\n");
    assert_eq!(
        only_other.call(&["HOTKEYS.WATCH", "other:*"]),
        "*2\r\n$13\r\nhotkeys.watch\r\n:0\r\n"
    );
    // RESP2 watch mode.
    assert!(w0.call(&["GET", "x"]).contains("only *.WATCH / *.UNWATCH"));
    assert_eq!(w1.call(&["GET", "x"]), "_\r\n");

    // A key on each shard: every watcher, whatever its core, hears of both.
    hammer(&mut c, &k1, 25);
    hammer(&mut c, &k0, 20);
    for (w, resp3) in [(&mut w0, false), (&mut w1, true)] {
        assert_eq!(read(w), hot_frame(resp3, &k1, 20, "flash"));
        assert_eq!(read(w), hot_frame(resp3, &k0, 20, "flash"));
    }
    // Then they cool down, in the order they stopped being hot.
    for (w, resp3) in [(&mut w0, false), (&mut w1, true)] {
        let mut cold = vec![read(w), read(w)];
        cold.sort();
        let mut want = vec![cold_frame(resp3, &k0), cold_frame(resp3, &k1)];
        want.sort();
        assert_eq!(cold, want);
    }
    // The filtered watcher saw nothing: its next frame is PING's.
    assert_eq!(only_other.call(&["PING"]), "*2\r\n$4\r\npong\r\n$0\r\n\r\n");

    // A watcher that comes while a key is hot is told at once. (A fresh
    // key: k1's window still holds its earlier accesses.)
    let k2 = keys_on_both("sale:z")[1].clone();
    hammer(&mut c, &k2, 20);
    assert_eq!(read(&mut w0), hot_frame(false, &k2, 20, "flash"));
    let mut late = watcher(&server, 0, false, &mut keep);
    late.cmd(&[b"HOTKEYS.WATCH", b"sale:*"]);
    assert_eq!(read(&mut late), "*2\r\n$13\r\nhotkeys.watch\r\n:1\r\n");
    assert_eq!(read(&mut late), hot_frame(false, &k2, 20, "flash"));
    assert_eq!(read(&mut late), cold_frame(false, &k2));
    assert_eq!(read(&mut w0), cold_frame(false, &k2));
    assert_eq!(info_field(&mut c, "hotkeys_watchers"), "4");

    // UNWATCH ends it: no more pushes, out of watch mode.
    assert_eq!(w0.call(&["HOTKEYS.UNWATCH"]), "+OK\r\n");
    assert_eq!(w0.call(&["GET", "x"]), "$-1\r\n");
    drop(w1);
    drop(late);
    eventually(5, || info_field(&mut c, "hotkeys_watchers") == "1");
    hammer(&mut c, &k0, 20);
    assert_eq!(w0.call(&["PING"]), "+PONG\r\n");
}

#[test]
fn top_lists_the_heaviest_keys_of_a_skewed_load() {
    let server = Server::start(2);
    let mut c = server.client();
    let [a, b] = keys_on_both("top:");
    // 4000 GETs: a 50%, b 25%, the rest over 500 keys.
    let mut pipe = redis::pipe();
    for i in 0..4000 {
        let key = match i % 4 {
            0 | 1 => a.clone(),
            2 => b.clone(),
            _ => format!("uniform:{}", (i * 7919) % 500),
        };
        pipe.cmd("GET").arg(key).ignore();
    }
    let () = pipe.query(&mut c).unwrap();
    let top: Vec<redis::Value> = q(&mut c, &["HOTKEYS", "TOP", "2"]).unwrap();
    let top: Vec<(String, i64)> = top
        .chunks(2)
        .map(|p| (redis::from_redis_value(&p[0]).unwrap(), redis::from_redis_value(&p[1]).unwrap()))
        .collect();
    assert_eq!(top.len(), 2);
    assert_eq!(top[0].0, a);
    assert_eq!(top[1].0, b);
    // Estimates never exceed the true counts; heavy keys are close.
    assert!((1900..=2000).contains(&top[0].1), "{top:?}");
    assert!((950..=1000).contains(&top[1].1), "{top:?}");
    let ten: Vec<redis::Value> = q(&mut c, &["HOTKEYS", "TOP"]).unwrap();
    assert_eq!(ten.len(), 20);
    assert!(err(&mut c, &["HOTKEYS", "TOP", "-1"]).contains("must be positive"));
    assert!(err(&mut c, &["HOTKEYS", "TOP", "x"]).contains("not an integer"));
    assert!(err(&mut c, &["HOTKEYS", "TOP", "1", "2"]).contains("syntax error"));
}

#[test]
fn rules_come_from_the_configuration_and_config_rewrite_keeps_them() {
    let dir = std::env::temp_dir().join(format!("ringdb-hotkeys-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ringdb.toml");
    std::fs::write(
        &path,
        "# hot keys\nhotkeys-rules = \"boot PREFIX b: INTERVAL 1 THRESHOLD 3 DURATION 1\"\n",
    )
    .unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_ringdb"))
        .arg(&path)
        .args(["--port", &port.to_string(), "--shards", "2", "--pin-cpus", "no"])
        .args(["--loglevel", "warning"])
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut c = loop {
        if let Ok(c) = client.get_connection() {
            break c;
        }
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    let rule: Vec<String> = q(&mut c, &["HOTKEYS", "RULES", "GET", "boot"]).unwrap();
    assert_eq!(rule.join(" "), "boot PREFIX b: INTERVAL 1 THRESHOLD 3 DURATION 1 COUNT both");
    hammer(&mut c, "b:1", 3);
    assert_eq!(hot_list(&mut c), vec![("b:1".into(), "boot".into(), 3)]);
    set_rule(&mut c, "more PATTERN m* INTERVAL 2 THRESHOLD 9 DURATION 3");
    assert_eq!(q::<String>(&mut c, &["CONFIG", "REWRITE"]).unwrap(), "OK");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
    assert!(text.contains("# hot keys"), "{text}");
    assert!(
        text.contains(
            "hotkeys-rules = \"boot PREFIX b: INTERVAL 1 THRESHOLD 3 DURATION 1 COUNT both; \
             more PATTERN m* INTERVAL 2 THRESHOLD 9 DURATION 3 COUNT both\""
        ),
        "{text}"
    );
}

/// The integer value of a GET reply (`$-1` = 0).
fn int_value(reply: &str) -> u64 {
    if reply == "$-1\r\n" {
        return 0;
    }
    let body = reply.split("\r\n").nth(1).unwrap_or_else(|| panic!("not a bulk: {reply:?}"));
    body.parse().unwrap_or_else(|_| panic!("not a number: {reply:?}"))
}

#[test]
fn read_copies_never_serve_a_value_older_than_an_acknowledged_write() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use std::sync::Arc;
    let server = Server::start_with(&["--shards", "2", "--hotkeys-replicate-reads", "yes"]);
    let mut c = server.client();
    set_rule(&mut c, "rep PREFIX rep: INTERVAL 1 THRESHOLD 10 DURATION 5 COUNT reads");
    // The key lives on shard 1; the readers sit on shard 0, where GET is
    // answered from the copy.
    let key = keys_on_both("rep:")[1].clone();
    let () = q(&mut c, &["SET", &key, "0"]).unwrap();
    let mut keep = Vec::new();
    let mut admin = server.client();
    let mut readers: Vec<Raw> =
        (0..3).map(|_| raw_on_shard(&server, &mut admin, 0, &mut keep)).collect();
    hammer(&mut c, &key, 20);
    eventually(5, || info_field(&mut c, "hotkeys_replicated_keys") == "1");
    assert_eq!(int_value(&readers[0].call(&["GET", &key])), 0);

    let acked = Arc::new(AtomicU64::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut threads = Vec::new();
    for mut reader in readers.drain(..) {
        let (key, acked, stop) = (key.clone(), acked.clone(), stop.clone());
        threads.push(std::thread::spawn(move || {
            let mut reads = 0u64;
            while !stop.load(Ordering::SeqCst) {
                let before = acked.load(Ordering::SeqCst);
                let seen = int_value(&reader.call(&["GET", &key]));
                assert!(seen >= before, "read {seen} after write {before} was acknowledged");
                reads += 1;
            }
            reads
        }));
    }
    let writer = {
        let (key, acked, stop) = (key.clone(), acked.clone(), stop.clone());
        let mut w = server.client();
        std::thread::spawn(move || {
            let mut i = 0u64;
            while !stop.load(Ordering::SeqCst) {
                i += 1;
                let () = q(&mut w, &["SET", &key, &i.to_string()]).unwrap();
                acked.store(i, Ordering::SeqCst);
                // Leave room for copies to be refilled and served between
                // writes, now and then.
                if i.is_multiple_of(50) {
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
            i
        })
    };
    std::thread::sleep(Duration::from_secs(2));
    stop.store(true, Ordering::SeqCst);
    let writes = writer.join().unwrap();
    let reads: u64 = threads.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(writes > 100 && reads > 100, "writes {writes}, reads {reads}");
    let served: u64 = info_field(&mut c, "hotkeys_replica_reads").parse().unwrap();
    assert!(served > 0, "no read was answered from a copy");
    // Still hot: the reads served from copies count on the owner.
    assert_eq!(info_field(&mut c, "hotkeys_replicated_keys"), "1");

    // Expiry and flushes reach the copies too.
    let mut reader = raw_on_shard(&server, &mut admin, 0, &mut keep);
    let () = q(&mut c, &["SET", &key, "7", "PX", "300"]).unwrap();
    assert_eq!(int_value(&reader.call(&["GET", &key])), 7);
    assert_eq!(int_value(&reader.call(&["GET", &key])), 7);
    std::thread::sleep(Duration::from_millis(350));
    assert_eq!(reader.call(&["GET", &key]), "$-1\r\n");
    let () = q(&mut c, &["SET", &key, "8"]).unwrap();
    assert_eq!(int_value(&reader.call(&["GET", &key])), 8);
    assert_eq!(int_value(&reader.call(&["GET", &key])), 8);
    let () = q(&mut c, &["FLUSHALL"]).unwrap();
    assert_eq!(reader.call(&["GET", &key]), "$-1\r\n");

    // Turned off, the copies go.
    let () = q(&mut c, &["CONFIG", "SET", "hotkeys-replicate-reads", "no"]).unwrap();
    eventually(5, || info_field(&mut c, "hotkeys_replicated_keys") == "0");
    let before: u64 = info_field(&mut c, "hotkeys_replica_reads").parse().unwrap();
    let () = q(&mut c, &["SET", &key, "9"]).unwrap();
    hammer(&mut c, &key, 20);
    for _ in 0..10 {
        assert_eq!(int_value(&reader.call(&["GET", &key])), 9);
    }
    let after: u64 = info_field(&mut c, "hotkeys_replica_reads").parse().unwrap();
    assert_eq!(before, after);
}

#[test]
fn counted_keys_are_bounded_per_shard() {
    let server = Server::start_with(&["--shards", "2", "--hotkeys-max-keys", "3"]);
    let mut c = server.client();
    set_rule(&mut c, "all PREFIX m: INTERVAL 0.01 THRESHOLD 1000 DURATION 1");
    for i in 0..40 {
        let () = q(&mut c, &["SET", &format!("m:{i}"), "x"]).unwrap();
        // Past the window: the oldest key is spent and makes room at once.
        std::thread::sleep(Duration::from_millis(15));
    }
    // At most 3 per shard; the others were forgotten, least recent first.
    assert_eq!(info_field(&mut c, "hotkeys_tracked_keys"), "6");
    assert_eq!(info_field(&mut c, "hotkeys_evicted_keys"), "34");
    assert_eq!(info_field(&mut c, "hotkeys_max_keys"), "3");
    let () = q(&mut c, &["CONFIG", "SET", "hotkeys-max-keys", "1"]).unwrap();
    assert_eq!(info_field(&mut c, "hotkeys_tracked_keys"), "2");
    assert!(err(&mut c, &["CONFIG", "SET", "hotkeys-max-keys", "0"]).contains("must be between 1"));
}
