//! CONFIG against a real 2-shard server: GET with several names and
//! patterns, SET of several pairs (all or nothing, on every shard), Redis's
//! errors, RESETSTAT over both shards, REWRITE.

mod common;
use common::{keys_on_two_shards, q, raw_on_shard, Server};
use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn config_get(c: &mut redis::Connection, args: &[&str]) -> Vec<(String, String)> {
    let mut full = vec!["CONFIG", "GET"];
    full.extend_from_slice(args);
    let flat: Vec<String> = q(c, &full).unwrap();
    flat.chunks(2).map(|p| (p[0].clone(), p[1].clone())).collect()
}

#[test]
fn get_several_names_and_patterns() {
    let server = Server::start(2);
    let mut c = server.client();
    let got = config_get(&mut c, &["HZ", "h?", "*port*", "nosuch", "maxmemory-policy"]);
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    // Each setting once; a name asked for by name comes back as written.
    assert_eq!(
        names,
        vec!["HZ", "port", "replica-announce-port", "tls-port", "maxmemory-policy"],
        "{got:?}"
    );
    assert_eq!(got[0].1, "10");
    assert_eq!(got[1].1, server.port.to_string());
    assert_eq!(got[4].1, "noeviction");
    let all = config_get(&mut c, &["*"]);
    let unique: HashMap<_, _> = all.iter().cloned().collect();
    assert_eq!(unique.len(), all.len());
    assert!(unique.contains_key("requirepass") && unique.contains_key("databases"));
    assert!(config_get(&mut c, &["nosuch*"]).is_empty());
    let err = q::<Vec<String>>(&mut c, &["CONFIG", "GET"]).unwrap_err();
    assert!(
        err.to_string().contains("wrong number of arguments for 'config|get' command"),
        "{err}"
    );
}

#[test]
fn set_is_all_or_nothing_with_redis_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    assert_eq!(
        q::<String>(&mut c, &["CONFIG", "SET", "hz", "20", "timeout", "300"]).unwrap(),
        "OK"
    );
    assert_eq!(
        config_get(&mut c, &["hz", "timeout"]),
        vec![("hz".into(), "20".into()), ("timeout".into(), "300".into())]
    );
    for (args, text) in [
        (vec!["foo", "1"], "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
        (vec!["hz", "30", "foo", "1"], "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"),
        (
            vec!["timeout", "1", "hz", "abc"],
            "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer",
        ),
        (
            vec!["hz", "1000"],
            "ERR CONFIG SET failed (possibly related to argument 'hz') - argument must be between 1 and 500 inclusive",
        ),
        (vec!["hz", "11", "HZ", "12"], "ERR CONFIG SET failed (possibly related to argument 'HZ') - duplicate parameter"),
        (
            vec!["timeout", "5", "databases", "4"],
            "ERR CONFIG SET failed (possibly related to argument 'databases') - can't set immutable config",
        ),
        (vec!["maxmemory-policy", "lru"], "argument(s) must be one of the following"),
        (vec!["hz", "11", "timeout"], "ERR syntax error"),
    ] {
        let mut full = vec!["CONFIG", "SET"];
        full.extend_from_slice(&args);
        let err = q::<String>(&mut c, &full).unwrap_err();
        // The client shows the code (ERR) apart from the message.
        let message = text.strip_prefix("ERR ").unwrap_or(text);
        assert!(err.to_string().contains(message), "{args:?}: {err}");
    }
    // Nothing of a refused SET was applied.
    assert_eq!(
        config_get(&mut c, &["hz", "timeout"]),
        vec![("hz".into(), "20".into()), ("timeout".into(), "300".into())]
    );
    let err = q::<String>(&mut c, &["CONFIG", "SET", "hz"]).unwrap_err();
    assert!(
        err.to_string().contains("wrong number of arguments for 'config|set' command"),
        "{err}"
    );
}

#[test]
fn set_reaches_every_shard() {
    let server = Server::start(2);
    let mut admin = server.client();
    let mut keep = Vec::new();
    let mut on0 = raw_on_shard(&server, &mut admin, 0, &mut keep);
    let mut on1 = raw_on_shard(&server, &mut admin, 1, &mut keep);
    assert_eq!(
        on0.call(&["CONFIG", "SET", "hz", "33", "maxmemory-policy", "allkeys-lfu"]),
        "+OK\r\n"
    );
    // The other core's copy of the configuration changed too.
    assert_eq!(on1.call(&["CONFIG", "GET", "hz"]), "*2\r\n$2\r\nhz\r\n$2\r\n33\r\n");
    let info = on1.call(&["INFO", "memory"]);
    assert!(info.contains("maxmemory_policy:allkeys-lfu"), "{info}");

    // And so did both shards' settings: keys created now on either shard
    // carry an LFU counter (minutes << 8 | 5) instead of an LRU clock.
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        assert_eq!(on1.call(&["SET", key, "v"]), "+OK\r\n");
        let line = on0.call(&["DEBUG", "OBJECT", key]);
        let lru: u64 =
            line.split(' ').find_map(|f| f.strip_prefix("lru:")).unwrap().parse().unwrap();
        assert!(lru < 1 << 24 && lru & 0xff == 5, "{key}: {line}");
    }
    // OBJECT FREQ, which needs an LFU policy, now works on both shards.
    for key in [&a, &b] {
        // A new key's counter is 5; it may have decayed by one if a minute
        // boundary passed since the SET.
        let freq = on0.call(&["OBJECT", "FREQ", key]);
        assert!(freq == ":5\r\n" || freq == ":4\r\n", "{key}: {freq}");
    }
    assert_eq!(on1.call(&["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]), "+OK\r\n");
    for key in [&a, &b] {
        assert!(on0
            .call(&["OBJECT", "FREQ", key])
            .starts_with("-ERR An LFU maxmemory policy is not selected"));
    }
    for key in [&a, &b] {
        assert_eq!(on0.call(&["SET", key, "w"]), "+OK\r\n");
        let line = on1.call(&["DEBUG", "OBJECT", key]);
        let lru: u64 =
            line.split(' ').find_map(|f| f.strip_prefix("lru:")).unwrap().parse().unwrap();
        assert!(lru > 1 << 30, "an LRU clock in seconds: {line}");
    }
}

#[test]
fn resetstat_clears_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["SET", &a, "1"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "1"]).unwrap();
    let _ = q::<String>(&mut c, &["NOSUCH"]);
    let stats: String = q(&mut c, &["INFO", "commandstats"]).unwrap();
    assert!(stats.contains("cmdstat_set:calls=2,"), "{stats}");
    assert_eq!(q::<String>(&mut c, &["CONFIG", "RESETSTAT"]).unwrap(), "OK");
    let stats: String = q(&mut c, &["INFO", "commandstats", "errorstats", "stats"]).unwrap();
    assert!(!stats.contains("cmdstat_set"), "{stats}");
    assert!(!stats.contains("errorstat_ERR"), "{stats}");
    assert!(stats.contains("total_error_replies:0\r\n"), "{stats}");
    // As in Redis, RESETSTAT itself is counted once it has run.
    assert!(stats.contains("cmdstat_config|resetstat:calls=1,"), "{stats}");
    assert_eq!(stats.matches("cmdstat_").count(), 1, "{stats}");
}

#[test]
fn rewrite_and_help() {
    let server = Server::start(2);
    let mut c = server.client();
    let err = q::<String>(&mut c, &["CONFIG", "REWRITE"]).unwrap_err();
    assert!(err.to_string().contains("The server is running without a config file"), "{err}");
    let help: Vec<String> = q(&mut c, &["config", "help"]).unwrap();
    assert_eq!(help[0], "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
    assert!(help.contains(&"RESETSTAT".to_string()));

    // A server started from a file writes its changes back into it.
    let dir = std::env::temp_dir().join(format!("ringdb-config-it-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("ringdb.toml");
    std::fs::write(&path, "# kept comment\nhz = 10\n").unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_ringdb"))
        .arg(&path)
        .args([
            "--port",
            &port.to_string(),
            "--shards",
            "2",
            "--pin-cpus",
            "no",
            "--loglevel",
            "warning",
        ])
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/")).unwrap();
    let mut c = loop {
        if let Ok(c) = client.get_connection() {
            break c;
        }
        assert!(Instant::now() < deadline, "server did not start");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "hz", "25", "timeout", "7"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["CONFIG", "REWRITE"]).unwrap(), "OK");
    let text = std::fs::read_to_string(&path).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    std::fs::remove_dir_all(&dir).ok();
    assert!(
        text.contains("# kept comment") && text.contains("hz = 25") && text.contains("timeout = 7"),
        "{text}"
    );
}

#[test]
fn oom_score_adj_relative_absolute_and_restored() {
    let server = Server::start(2);
    let mut c = server.client();
    let pid = common::info_field(&mut c, "server", "process_id");
    let path = format!("/proc/{pid}/oom_score_adj");
    let score = || std::fs::read_to_string(&path).unwrap().trim().parse::<i32>().unwrap();
    let base = score();
    let ok = |c: &mut redis::Connection, args: &[&str]| {
        assert_eq!(q::<String>(c, args).unwrap(), "OK");
    };
    ok(&mut c, &["CONFIG", "SET", "oom-score-adj-values", "10 20 30", "oom-score-adj", "yes"]);
    assert_eq!(score(), base + 10);
    ok(&mut c, &["CONFIG", "SET", "oom-score-adj", "absolute"]);
    assert_eq!(score(), 10);
    ok(&mut c, &["CONFIG", "SET", "oom-score-adj", "no"]);
    assert_eq!(score(), base);
    let err =
        q::<String>(&mut c, &["CONFIG", "SET", "oom-score-adj-values", "2001 0 0"]).unwrap_err();
    assert!(err.to_string().contains("elements must be between -2000 and 2000"), "{err}");
    let values: Vec<String> = q(&mut c, &["CONFIG", "GET", "oom-score-adj-values"]).unwrap();
    assert_eq!(values[1], "10 20 30");
}

/// A client of the server at `host:port`, once it answers there.
fn client_at(host: &str, port: u16) -> redis::Connection {
    let client = redis::Client::open(format!("redis://{host}:{port}/")).unwrap();
    client.get_connection_with_timeout(Duration::from_secs(2)).unwrap()
}

/// Waits until nothing accepts on `host:port` any more.
fn refused_soon(host: &str, port: u16) -> bool {
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline {
        let addr = format!("{host}:{port}").parse().unwrap();
        if std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

#[test]
fn set_port_and_bind_move_every_shards_listeners() {
    let server = Server::start(2);
    let mut admin = server.client();
    // A port nothing uses, and one something else holds.
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let taken_port = taken.local_addr().unwrap().port();
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let new_port = free.local_addr().unwrap().port();
    drop(free);
    let ok = |c: &mut redis::Connection, args: &[&str]| {
        assert_eq!(q::<String>(c, args).unwrap(), "OK", "{args:?}");
    };
    ok(&mut admin, &["CONFIG", "SET", "port", &new_port.to_string()]);
    assert!(refused_soon("127.0.0.1", server.port), "still listening on the old port");
    // Both shards accept on the new port (the kernel spreads connections).
    let mut kept = Vec::new();
    for _ in 0..40 {
        let mut c = client_at("127.0.0.1", new_port);
        assert_eq!(q::<String>(&mut c, &["PING"]).unwrap(), "PONG");
        kept.push(c);
    }
    let per_shard = common::clients_per_shard(&mut admin);
    assert!(per_shard.iter().all(|&n| n > 1), "connections per shard: {per_shard:?}");
    drop(kept);
    let mut c = client_at("127.0.0.1", new_port);
    // A port that cannot be had fails the whole SET: nothing else changes
    // (the OOM score, applied to the process, included).
    let pid = common::info_field(&mut c, "server", "process_id");
    let score = || std::fs::read_to_string(format!("/proc/{pid}/oom_score_adj")).unwrap();
    let before = score();
    let taken_arg = taken_port.to_string();
    let err = q::<String>(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "oom-score-adj",
            "yes",
            "oom-score-adj-values",
            "1 1 1",
            "port",
            &taken_arg,
        ],
    )
    .unwrap_err();
    assert!(err.to_string().contains("Unable to listen on this port"), "{err}");
    assert_eq!(score(), before);
    assert_eq!(config_get(&mut c, &["oom-score-adj"])[0].1, "no");
    let err = q::<String>(&mut c, &["CONFIG", "SET", "bind", "999.999.999.999"]).unwrap_err();
    assert!(err.to_string().contains("Failed to bind to specified addresses"), "{err}");
    assert_eq!(config_get(&mut c, &["port"])[0].1, new_port.to_string());
    assert_eq!(q::<String>(&mut client_at("127.0.0.1", new_port), &["PING"]).unwrap(), "PONG");
    // Another (loopback) address, on the same port.
    ok(&mut c, &["CONFIG", "SET", "bind", "127.0.0.2"]);
    assert!(refused_soon("127.0.0.1", new_port), "still listening on 127.0.0.1");
    let mut moved = client_at("127.0.0.2", new_port);
    assert_eq!(q::<String>(&mut moved, &["PING"]).unwrap(), "PONG");
    assert_eq!(config_get(&mut moved, &["bind"])[0].1, "127.0.0.2");
    drop(taken);
}

#[test]
fn debug_and_protected_configs_as_enable_settings_allow() {
    let dir = common::temp_dir("protected");
    let dir_arg = dir.to_str().unwrap();
    // Redis's defaults: neither is allowed.
    let server = Server::start_with(&[
        "--shards",
        "2",
        "--enable-debug-command",
        "no",
        "--enable-protected-configs",
        "no",
    ]);
    let mut c = server.client();
    let err = q::<String>(&mut c, &["DEBUG", "HELP"]).unwrap_err();
    assert!(
        err.to_string().contains(
            "DEBUG command not allowed. If the enable-debug-command option is set to \"local\""
        ),
        "{err}"
    );
    let err = q::<String>(&mut c, &["CONFIG", "SET", "dir", dir_arg]).unwrap_err();
    assert!(
        err.to_string().contains(
            "CONFIG SET failed (possibly related to argument 'dir') - can't set protected config"
        ),
        "{err}"
    );
    // Inside MULTI the refusal fails the transaction, as any rejected command.
    let mut raw = server.raw();
    assert_eq!(raw.call(&["MULTI"]), "+OK\r\n");
    assert!(raw.call(&["DEBUG", "HELP"]).starts_with("-ERR DEBUG command not allowed"));
    assert!(raw.call(&["EXEC"]).starts_with("-EXECABORT"));
    let err = q::<String>(&mut c, &["CONFIG", "SET", "enable-debug-command", "yes"]).unwrap_err();
    assert!(err.to_string().contains("can't set immutable config"), "{err}");
    drop(server);
    // `local`: a client on a loopback address may.
    let server = Server::start_with(&[
        "--shards",
        "2",
        "--enable-debug-command",
        "local",
        "--enable-protected-configs",
        "local",
    ]);
    let mut c = server.client();
    let help: Vec<String> = q(&mut c, &["DEBUG", "HELP"]).unwrap();
    assert!(!help.is_empty());
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "dir", dir_arg]).unwrap(), "OK");
    assert_eq!(config_get(&mut c, &["enable-debug-command"])[0].1, "local");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn process_title_follows_the_template() {
    let server = Server::start_with(&["--shards", "2", "--bind", "127.0.0.1"]);
    let mut c = server.client();
    let pid = common::info_field(&mut c, "server", "process_id");
    let cmdline = || {
        let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap();
        String::from_utf8_lossy(&raw).trim_end_matches('\0').to_string()
    };
    // Redis's default template: the program, then the first address.
    let title = cmdline();
    assert!(title.ends_with(&format!("ringdb 127.0.0.1:{}", server.port)), "{title:?}");
    let _: () = q(
        &mut c,
        &[
            "CONFIG",
            "SET",
            "proc-title-template",
            "TEST {title} {port} {{x} {tls-port} {config-file}",
        ],
    )
    .unwrap();
    let title = cmdline();
    let words: Vec<&str> = title.split(' ').collect();
    assert_eq!(words[0], "TEST");
    assert!(words[1].ends_with("/ringdb"), "{title:?}");
    assert_eq!(words[2..], [server.port.to_string().as_str(), "{x}", "0", "-"], "{title:?}");
    let err =
        q::<()>(&mut c, &["CONFIG", "SET", "proc-title-template", "{invalid-var}"]).unwrap_err();
    assert!(
        err.to_string().contains("template format is invalid or contains unknown variables"),
        "{err}"
    );
    // The environment moved out of the way is still the process's.
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(!environ.is_empty());
}

#[test]
fn own_immutable_settings_take_their_own_value_and_hidden_ones_need_their_name() {
    let server = Server::start(2);
    let mut c = server.client();
    let _: () = q(&mut c, &["CONFIG", "SET", "shards", "2", "pin-cpus", "no"]).unwrap();
    let err = q::<()>(&mut c, &["CONFIG", "SET", "shards", "3"]).unwrap_err();
    assert!(err.to_string().contains("can't set immutable config"), "{err}");
    // Redis's own immutable settings refuse even their value.
    let err = q::<()>(&mut c, &["CONFIG", "SET", "daemonize", "no"]).unwrap_err();
    assert!(err.to_string().contains("can't set immutable config"), "{err}");
    let all = config_get(&mut c, &["*"]);
    assert!(!all.iter().any(|(n, _)| n == "rdb-key-save-delay"), "hidden from patterns");
    assert_eq!(
        config_get(&mut c, &["rdb-key-save-delay"]),
        [("rdb-key-save-delay".to_string(), "0".to_string())]
    );
}
