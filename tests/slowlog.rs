//! SLOWLOG against a real 2-shard server: commands run on the client's own
//! shard, on the other shard, across shards and on the connection's core
//! all reach the client's log with its address and name; one SLOWLOG shows
//! the clients of both cores newest first; trimming, redaction, scripts,
//! MULTI/EXEC, the length bound and the errors behave as in Redis.

mod common;
use common::{keys_on_two_shards, q, raw_on_shard, Server};
use redis::Value;

/// (id, unix time, microseconds, arguments, client address, client name)
type Entry = (i64, i64, i64, Vec<String>, String, String);

fn slowlog(c: &mut redis::Connection, count: &str) -> Vec<Entry> {
    q(c, &["SLOWLOG", "GET", count]).unwrap()
}

fn logged_commands(c: &mut redis::Connection) -> Vec<String> {
    slowlog(c, "-1").into_iter().map(|e| e.3.join(" ")).collect()
}

#[test]
fn commands_of_every_path_are_logged_on_their_clients_core() {
    let server = Server::start(2);
    let mut admin = server.client();
    let (on0, on1) = keys_on_two_shards();
    let _: () = q(&mut admin, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap();
    let mut keep = Vec::new();
    let mut a = raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut b = raw_on_shard(&server, &mut admin, 1, &mut keep);
    assert_eq!(a.call(&["CLIENT", "SETNAME", "alice"]), "+OK\r\n");
    assert_eq!(b.call(&["CLIENT", "SETNAME", "bob"]), "+OK\r\n");
    let _: () = q(&mut admin, &["SLOWLOG", "RESET"]).unwrap();
    // Alice: her own shard's key, the other shard's key, a cross-shard MSET
    // and a command of her core. Bob: the other way round.
    a.call(&["SET", &on0, "1"]);
    a.call(&["GET", &on1]);
    a.call(&["MSET", &on0, "2", &on1, "3"]);
    b.call(&["GET", &on0]);
    b.call(&["ECHO", "hi"]);
    let entries = slowlog(&mut admin, "-1");
    // That SLOWLOG GET is in the log now too.
    assert_eq!(q::<i64>(&mut admin, &["SLOWLOG", "LEN"]).unwrap(), entries.len() as i64 + 1);
    let mine: Vec<(String, String)> = entries
        .iter()
        .rev()
        .filter(|e| !e.5.is_empty())
        .map(|e| (e.5.clone(), e.3.join(" ")))
        .collect();
    assert_eq!(
        mine,
        [
            ("alice".to_string(), format!("SET {on0} 1")),
            ("alice".to_string(), format!("GET {on1}")),
            ("alice".to_string(), format!("MSET {on0} 2 {on1} 3")),
            ("bob".to_string(), format!("GET {on0}")),
            ("bob".to_string(), "ECHO hi".to_string()),
        ]
    );
    // Newest first, ids increasing with time, addresses as CLIENT LIST has them.
    assert!(entries.windows(2).all(|w| w[0].0 > w[1].0), "{entries:?}");
    let list: String = q(&mut admin, &["CLIENT", "LIST"]).unwrap();
    for e in entries.iter().filter(|e| !e.5.is_empty()) {
        assert!(
            list.contains(&format!("addr={} ", e.4)) && list.contains(&format!("name={} ", e.5)),
            "{e:?}"
        );
        assert!(e.1 > 1_700_000_000 && e.2 >= 0);
    }
    assert_eq!(slowlog(&mut admin, "2").len(), 2);
    assert_eq!(slowlog(&mut admin, "0").len(), 0);
}

#[test]
fn scripts_transactions_trimming_and_redaction_follow_redis() {
    let server = Server::start(2);
    let mut c = server.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "0"]).unwrap();
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    // A script is one entry; the commands it calls are not logged.
    let _: Value =
        q(&mut c, &["EVAL", "redis.call('set', KEYS[1], 'x') return 1", "1", "k"]).unwrap();
    // EXEC is not logged, its commands are.
    let _: () = q(&mut c, &["MULTI"]).unwrap();
    let _: Value = q(&mut c, &["INCR", "n"]).unwrap();
    let _: Value = q(&mut c, &["EXEC"]).unwrap();
    // Secrets are redacted (the AUTH fails: no password is set).
    let _ = q::<Value>(&mut c, &["AUTH", "user", "secret"]);
    let _: () = q(&mut c, &["CONFIG", "SET", "requirepass", ""]).unwrap();
    // Long commands are trimmed.
    let mut sadd = vec!["SADD".to_string(), "s".to_string()];
    sadd.extend((0..40).map(|i| i.to_string()));
    let sadd: Vec<&str> = sadd.iter().map(String::as_str).collect();
    let _: i64 = q(&mut c, &sadd).unwrap();
    let long = "A".repeat(200);
    let _: () = q(&mut c, &["SET", "long", &long]).unwrap();
    let logged = logged_commands(&mut c);
    let mut expected = vec![
        "SLOWLOG RESET".to_string(),
        "EVAL redis.call('set', KEYS[1], 'x') return 1 1 k".to_string(),
        "MULTI".to_string(),
        "INCR n".to_string(),
        "AUTH (redacted) (redacted)".to_string(),
        "CONFIG SET requirepass (redacted)".to_string(),
    ];
    let mut trimmed: Vec<String> = sadd[..31].iter().map(|s| s.to_string()).collect();
    trimmed.push("... (11 more arguments)".to_string());
    expected.push(trimmed.join(" "));
    expected.push(format!("SET long {}... (72 more bytes)", "A".repeat(128)));
    expected.reverse();
    assert_eq!(logged, expected);
    // The log keeps slowlog-max-len entries, newest first.
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-max-len", "3"]).unwrap();
    let _: () = q(&mut c, &["SET", "last", "1"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]).unwrap(), 3);
    // (SLOWLOG LEN is itself the newest entry by now.)
    assert_eq!(logged_commands(&mut c)[..2], ["SLOWLOG LEN", "SET last 1"]);
    // Off: nothing more is logged.
    let _: () = q(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-1"]).unwrap();
    let _: () = q(&mut c, &["SLOWLOG", "RESET"]).unwrap();
    let _: () = q(&mut c, &["SET", "x", "1"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["SLOWLOG", "LEN"]).unwrap(), 0);
    // Errors as Redis words them.
    for bad in ["-2", "x"] {
        let e = q::<Value>(&mut c, &["SLOWLOG", "GET", bad]).unwrap_err().to_string();
        assert!(e.contains("count should be greater than or equal to -1"), "{e}");
    }
    let e = q::<Value>(&mut c, &["SLOWLOG", "GET", "1", "2"]).unwrap_err().to_string();
    assert!(e.contains("unknown subcommand or wrong number of arguments for 'GET'"), "{e}");
    let e = q::<Value>(&mut c, &["CONFIG", "SET", "slowlog-log-slower-than", "-2"])
        .unwrap_err()
        .to_string();
    assert!(e.contains("slowlog-log-slower-than"), "{e}");
    let help: Vec<String> = q(&mut c, &["SLOWLOG", "HELP"]).unwrap();
    assert_eq!(help[1], "GET [<count>]");
}
