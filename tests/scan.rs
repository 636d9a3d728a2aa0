//! SCAN against a real 2-shard server: Redis's guarantee with one cursor
//! over both shards while other clients insert and delete (every key present
//! for a whole iteration is returned, no key absent for a whole iteration
//! is), MATCH, TYPE, COUNT, expired keys, and cursors a client made up.

mod common;
use common::{q, Raw, Server};
use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

/// The exact error text a command gets (without `-` and CRLF).
fn err(raw: &mut Raw, args: &[&str]) -> String {
    let reply = raw.call(args);
    assert!(reply.starts_with('-'), "{args:?}: expected an error, got {reply:?}");
    reply[1..].trim_end().to_string()
}

/// One SCAN call: the next cursor and the keys.
fn scan(c: &mut redis::Connection, cursor: &str, options: &[&str]) -> (String, Vec<String>) {
    let mut args = vec!["SCAN", cursor];
    args.extend_from_slice(options);
    q(c, &args).unwrap()
}

/// A full iteration: every key returned (duplicates kept) and the number of
/// calls it took.
fn iterate(c: &mut redis::Connection, options: &[&str]) -> (Vec<String>, usize) {
    let mut cursor = "0".to_string();
    let mut keys = Vec::new();
    let mut calls = 0;
    loop {
        let (next, batch) = scan(c, &cursor, options);
        calls += 1;
        keys.extend(batch);
        if next == "0" {
            return (keys, calls);
        }
        assert!(calls < 1_000_000, "iteration does not end");
        cursor = next;
    }
}

fn load(c: &mut redis::Connection, keys: &[String]) {
    for chunk in keys.chunks(1000) {
        let mut pipe = redis::pipe();
        for k in chunk {
            pipe.cmd("SET").arg(k).arg("v").ignore();
        }
        pipe.query::<()>(c).unwrap();
    }
}

/// Clients that keep inserting and deleting keys until told to stop: one
/// works on two slots in turn (hash tags `{hot}`, whose large table is
/// rehashed in place again and again, and `{warm}`, whose small table grows
/// many times over and shrinks back every round), the other churns keys
/// all over the keyspace.
struct Churn {
    stop: Arc<AtomicBool>,
    rounds: Arc<AtomicUsize>,
    threads: Vec<thread::JoinHandle<()>>,
}

impl Churn {
    fn start(server: &Server) -> Churn {
        let stop = Arc::new(AtomicBool::new(false));
        let rounds = Arc::new(AtomicUsize::new(0));
        let mut threads = Vec::new();
        for (writer, prefixes) in [(0, ["{hot}:churn", "{warm}:churn"]), (1, ["churn", "churn"])] {
            let mut c = server.client();
            let (stop, rounds) = (stop.clone(), rounds.clone());
            threads.push(thread::spawn(move || {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let prefix = prefixes[n as usize % 2];
                    let batch: Vec<String> =
                        (0..500).map(|i| format!("{prefix}:{writer}:{n}:{i}")).collect();
                    let mut add = redis::pipe();
                    for k in &batch {
                        add.cmd("SET").arg(k).arg("v").ignore();
                    }
                    add.query::<()>(&mut c).unwrap();
                    let mut remove = redis::pipe();
                    for k in &batch {
                        remove.cmd("DEL").arg(k).ignore();
                    }
                    remove.query::<()>(&mut c).unwrap();
                    n += 1;
                    rounds.fetch_add(1, Ordering::Relaxed);
                    // Leave the scanner room on a small machine.
                    thread::sleep(Duration::from_millis(2));
                }
            }));
        }
        Churn { stop, rounds, threads }
    }

    fn stop(self) -> usize {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads {
            t.join().unwrap();
        }
        self.rounds.load(Ordering::Relaxed)
    }
}

#[test]
fn guarantee_holds_across_shards_under_concurrent_writes() {
    let server = Server::start(2);
    let mut c = server.client();
    // Present for every iteration: spread over all slots, and many in one
    // slot so that it is read window by window.
    let mut stable: Vec<String> = (0..25_000).map(|i| format!("stable:{i}")).collect();
    stable.extend((0..5_000).map(|i| format!("{{hot}}:stable:{i}")));
    stable.extend((0..50).map(|i| format!("{{warm}}:stable:{i}")));
    load(&mut c, &stable);
    // Absent for every iteration: deleted before any starts.
    let gone: Vec<String> = (0..3_000).map(|i| format!("gone:{i}")).collect();
    load(&mut c, &gone);
    for chunk in gone.chunks(500) {
        let mut args = vec!["DEL"];
        args.extend(chunk.iter().map(String::as_str));
        q::<i64>(&mut c, &args).unwrap();
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 30_050);

    let churn = Churn::start(&server);
    let stable_set: HashSet<&str> = stable.iter().map(String::as_str).collect();
    for count in ["10", "1000", "100", "25"] {
        let (keys, calls) = iterate(&mut c, &["COUNT", count]);
        let returned: HashSet<&str> = keys.iter().map(String::as_str).collect();
        let missed: Vec<&&str> = stable_set.difference(&returned).take(5).collect();
        assert!(missed.is_empty(), "COUNT {count}: missed {missed:?} (and maybe more)");
        for k in &returned {
            assert!(
                !k.starts_with("gone:"),
                "COUNT {count}: returned {k}, deleted before the iteration"
            );
            assert!(
                stable_set.contains(k) || k.contains("churn:"),
                "COUNT {count}: returned unknown key {k}"
            );
        }
        // Without concurrent writes nothing would repeat; with them, the
        // stable keys still come back once each.
        let stable_returned = keys.iter().filter(|k| stable_set.contains(k.as_str())).count();
        assert_eq!(stable_returned, stable.len(), "COUNT {count}: a stable key was returned twice");
        assert!(calls > 1, "COUNT {count} took {calls} calls");
    }
    let rounds = churn.stop();
    assert!(rounds > 2, "the writers barely ran ({rounds} rounds)");
}

#[test]
fn count_is_a_hint_and_calls_cross_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let keys: Vec<String> = (0..2000).map(|i| format!("key:{i}")).collect();
    load(&mut c, &keys);
    let (all, calls_10) = iterate(&mut c, &[]);
    assert_eq!(all.iter().collect::<HashSet<_>>().len(), 2000);
    assert_eq!(all.len(), 2000, "a quiet iteration returns each key once");
    let (_, calls_1000) = iterate(&mut c, &["COUNT", "1000"]);
    assert!(
        calls_1000 <= 4 && calls_10 >= 150,
        "COUNT 1000: {calls_1000} calls, default: {calls_10}"
    );
    // Each call returns about COUNT keys.
    let (_, first) = scan(&mut c, "0", &["COUNT", "50"]);
    assert!((40..=60).contains(&first.len()), "{} keys", first.len());
    // COUNT larger than the keyspace: one call covers both shards.
    let (cursor, everything) = scan(&mut c, "0", &["COUNT", "100000"]);
    assert_eq!((cursor.as_str(), everything.len()), ("0", 2000));
    // A sparse keyspace: one key on each shard still takes one call.
    q::<()>(&mut c, &["FLUSHALL"]).unwrap();
    let (a, b) = common::keys_on_two_shards();
    load(&mut c, &[a.clone(), b.clone()]);
    let (cursor, found) = scan(&mut c, "0", &[]);
    assert_eq!(cursor, "0");
    assert_eq!(found.into_iter().collect::<HashSet<_>>(), HashSet::from([a, b]));
}

#[test]
fn match_and_type_filter_after_collecting() {
    let server = Server::start(2);
    let mut c = server.client();
    let keys: Vec<String> = (0..1000).map(|i| format!("key:{i}")).collect();
    load(&mut c, &keys);
    let (found, _) = iterate(&mut c, &["MATCH", "key:1??"]);
    assert_eq!(found.iter().collect::<HashSet<_>>().len(), 100);
    assert!(found.iter().all(|k| k.len() == 7 && k.starts_with("key:1")));
    let (found, _) = iterate(&mut c, &["match", "*"]);
    assert_eq!(found.len(), 1000);
    let (found, _) = iterate(&mut c, &["MATCH", "nothing*"]);
    assert!(found.is_empty());
    let (found, _) = iterate(&mut c, &["TYPE", "list"]);
    assert!(found.is_empty());
    let (found, _) = iterate(&mut c, &["TYPE", "STRING"]);
    assert_eq!(found.len(), 1000);
    let (found, _) = iterate(&mut c, &["type", "string", "match", "key:*", "count", "10"]);
    assert_eq!(found.len(), 1000);
    // Filtered keys count toward COUNT, as in Redis: a call on a selective
    // pattern may come back empty with a non-zero cursor.
    let (cursor, batch) = scan(&mut c, "0", &["MATCH", "key:99?", "COUNT", "5"]);
    assert_ne!(cursor, "0");
    assert!(batch.len() <= 10);
}

#[test]
fn expired_keys_and_other_databases() {
    let server = Server::start(2);
    let mut c = server.client();
    let keys: Vec<String> = (0..200).map(|i| format!("key:{i}")).collect();
    load(&mut c, &keys);
    for k in keys.iter().take(50) {
        q::<()>(&mut c, &["PEXPIRE", k, "1"]).unwrap();
    }
    thread::sleep(Duration::from_millis(10));
    let (found, _) = iterate(&mut c, &["COUNT", "7"]);
    let found: HashSet<String> = found.into_iter().collect();
    assert_eq!(found, keys[50..].iter().cloned().collect());
    q::<()>(&mut c, &["SELECT", "3"]).unwrap();
    assert_eq!(iterate(&mut c, &[]).0, Vec::<String>::new());
    q::<()>(&mut c, &["SET", "only-in-3", "v"]).unwrap();
    assert_eq!(iterate(&mut c, &[]).0, vec!["only-in-3".to_string()]);
}

#[test]
fn invalid_and_made_up_cursors() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    let keys: Vec<String> = (0..500).map(|i| format!("key:{i}")).collect();
    load(&mut c, &keys);
    for bad in ["abc", "1.5", " 1", "1 ", "-", "18446744073709551616", "0x10"] {
        assert_eq!(err(&mut raw, &["SCAN", bad]), "ERR invalid cursor", "cursor {bad:?}");
    }
    assert_eq!(err(&mut raw, &["SCAN", "0", "COUNT", "0"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SCAN", "0", "COUNT", "-1"]), "ERR syntax error");
    assert_eq!(
        err(&mut raw, &["SCAN", "0", "COUNT", "x"]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(err(&mut raw, &["SCAN", "0", "COUNT"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SCAN", "0", "MATCH"]), "ERR syntax error");
    assert_eq!(err(&mut raw, &["SCAN", "0", "FOO", "bar"]), "ERR syntax error");
    assert!(err(&mut raw, &["SCAN"]).contains("wrong number of arguments for 'scan' command"));
    // Cursors ringdb never handed out: past the last slot the iteration is
    // over; anywhere else it continues from there and still ends.
    for made_up in ["18446744073709551615", "-1", "70368744177664", "9223372036854775808"] {
        assert_eq!(scan(&mut c, made_up, &[]), ("0".to_string(), vec![]), "cursor {made_up}");
    }
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for _ in 0..300 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        // Mostly inside the slot space, some beyond it.
        let made_up = if x.is_multiple_of(4) { x } else { x % (1 << 46) };
        let mut cursor = made_up.to_string();
        for call in 0.. {
            assert!(call < 1000, "iteration from {made_up} does not end");
            let (next, _) = scan(&mut c, &cursor, &["COUNT", "100"]);
            if next == "0" {
                break;
            }
            let (now, then) = (next.parse::<u64>().unwrap(), cursor.parse::<u64>().unwrap());
            assert!(now > then, "cursor went back from {then} to {now}");
            cursor = next;
        }
    }
    // The empty string is cursor 0 (Redis reads cursors with strtoul).
    let (_, from_empty) = scan(&mut c, "", &["COUNT", "100000"]);
    assert_eq!(from_empty.len(), 500);
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 500);
}
