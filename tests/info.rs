//! INFO against a real 2-shard server: section selection as Redis does it,
//! statistics summed over both shards (commandstats, errorstats, keyspace,
//! stats), memory from the allocator, the replication and shards sections.

mod common;
use common::{keys_on_two_shards, q, Server};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// `field:value` lines of an INFO reply.
fn fields(info: &str) -> HashMap<String, String> {
    info.lines()
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn info(c: &mut redis::Connection, sections: &[&str]) -> String {
    let mut args = vec!["INFO"];
    args.extend_from_slice(sections);
    q(c, &args).unwrap()
}

fn field(c: &mut redis::Connection, section: &str, name: &str) -> String {
    fields(&info(c, &[section]))
        .remove(name)
        .unwrap_or_else(|| panic!("no {name} in INFO {section}"))
}

#[test]
fn sections_as_redis_selects_them() {
    let server = Server::start(2);
    let mut c = server.client();
    for default in [info(&mut c, &[]), info(&mut c, &["default"])] {
        for header in [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
        ] {
            assert!(default.contains(header), "{header} missing");
        }
        assert!(
            default.contains("# Keyspace")
                && default.contains("# Shards")
                && default.contains("# Errorstats")
        );
        assert!(!default.contains("rejected_calls") && !default.contains("# Commandstats"));
        assert!(
            default.contains("\r\n\r\n# Clients\r\n"),
            "sections are separated by an empty line"
        );
    }
    for all in
        [info(&mut c, &["all"]), info(&mut c, &["everything"]), info(&mut c, &["cpu", "all"])]
    {
        assert!(
            all.contains("# Commandstats")
                && all.contains("rejected_calls")
                && all.contains("used_memory:")
        );
        assert_eq!(all.matches("used_cpu_user_children").count(), 1);
    }
    let cpu = info(&mut c, &["cpu"]);
    assert!(
        cpu.starts_with("# CPU\r\n")
            && cpu.contains("used_cpu_user:")
            && !cpu.contains("used_memory")
    );
    let stats = info(&mut c, &["commandSTATS"]);
    assert!(stats.starts_with("# Commandstats\r\n") && stats.contains("rejected_calls"), "{stats}");
    let two = info(&mut c, &["cpu", "sentinel", "CLUSTER"]);
    assert!(
        two.contains("used_cpu_user")
            && two.contains("cluster_enabled:0")
            && !two.contains("sentinel")
    );
    let mixed = info(&mut c, &["cpu", "default"]);
    assert!(mixed.contains("master_repl_offset") && !mixed.contains("rejected_calls"));
    assert_eq!(info(&mut c, &["nosuchsection"]), "");
}

#[test]
fn command_and_error_stats_sum_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["SET", &a, "x"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "y"]).unwrap();
    q::<Option<String>>(&mut c, &["GET", &a]).unwrap();
    q::<Option<String>>(&mut c, &["GET", "missing:1"]).unwrap();
    let _ = q::<i64>(&mut c, &["INCR", &b]).unwrap_err();
    let _ = q::<String>(&mut c, &["SET", &a]).unwrap_err();
    let _ = q::<String>(&mut c, &["NOSUCHCMD"]).unwrap_err();
    let _ = q::<String>(&mut c, &["CLIENT", "NOSUCH"]).unwrap_err();
    q::<i64>(&mut c, &["CLIENT", "ID"]).unwrap();
    let all = info(&mut c, &["commandstats", "errorstats", "stats"]);
    let f = fields(&all);
    let set = &f["cmdstat_set"];
    assert!(
        set.starts_with("calls=2,usec=") && set.ends_with(",rejected_calls=1,failed_calls=0"),
        "{set}"
    );
    assert!(f["cmdstat_get"].starts_with("calls=2,"), "{all}");
    assert!(f["cmdstat_incr"].ends_with("rejected_calls=0,failed_calls=1"), "{all}");
    assert!(f["cmdstat_client|id"].starts_with("calls=1,"), "{all}");
    let per_call: f64 =
        set.split(',').find_map(|p| p.strip_prefix("usec_per_call=")).unwrap().parse().unwrap();
    assert!(per_call >= 0.0);
    assert_eq!(f["errorstat_ERR"], "count=4", "{all}");
    assert_eq!(f["total_error_replies"], "4");
    // INCR looks its key up for writing, which counts no hit (as in Redis).
    assert_eq!(f["keyspace_hits"], "1");
    assert_eq!(f["keyspace_misses"], "1");
    let processed: u64 = f["total_commands_processed"].parse().unwrap();
    assert!(processed >= 6, "{processed}");
}

/// Errors inside scripts count once, where they happen, as Redis counts
/// them: an error of a command a script called (caught by `pcall` or not,
/// returned or raised), a refusal (OOM), and SELECT's own calls; the
/// script's reply counts only errors of its own (`error()`,
/// `redis.error_reply`).
#[test]
fn errors_inside_scripts_count_once() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, _) = keys_on_two_shards();
    q::<String>(&mut c, &["SET", &a, "text"]).unwrap();
    // "eval=1/0/1" is cmdstat_eval's calls/rejected_calls/failed_calls,
    // "ERR=1" errorstat_ERR, "total=1" total_error_replies.
    let stats = |c: &mut redis::Connection| {
        let all = info(c, &["commandstats", "errorstats", "stats"]);
        let mut seen: Vec<String> = fields(&all)
            .into_iter()
            .filter_map(|(k, v)| {
                let count = |p: &str| v.split(',').find_map(|f| f.strip_prefix(p)).unwrap_or("");
                if let Some(name) = k.strip_prefix("cmdstat_") {
                    ["eval", "incr", "select", "set"].contains(&name).then(|| {
                        let calls =
                            [count("calls="), count("rejected_calls="), count("failed_calls=")];
                        format!("{name}={}", calls.join("/"))
                    })
                } else if let Some(code) = k.strip_prefix("errorstat_") {
                    Some(format!("{code}={}", count("count=")))
                } else {
                    (k == "total_error_replies").then(|| format!("total={v}"))
                }
            })
            .collect();
        seen.sort();
        seen.join(" ")
    };
    let cases: [(&[&str], &str); 7] = [
        (
            &["EVAL", "local t = redis.pcall('incr', KEYS[1]) return 1", "1", &a],
            "ERR=1 eval=1/0/0 incr=1/0/1 total=1",
        ),
        (
            &["EVAL", "return redis.call('incr', KEYS[1])", "1", &a],
            "ERR=1 eval=1/0/1 incr=1/0/1 total=1",
        ),
        (
            &["EVAL", "return redis.pcall('incr', KEYS[1])", "1", &a],
            "ERR=1 eval=1/0/1 incr=1/0/1 total=1",
        ),
        (
            &["EVAL", "local t = redis.pcall('select', 99) return 1", "0"],
            "ERR=1 eval=1/0/0 select=1/0/1 total=1",
        ),
        (&["EVAL", "error('boom')", "0"], "ERR=1 eval=1/0/1 total=1"),
        (&["EVAL", "return redis.error_reply('MY err')", "0"], "MY=1 eval=1/0/1 total=1"),
        // Last: over maxmemory.
        (
            &["EVAL", "local t = redis.pcall('set', KEYS[1], 'y') return 1", "1", &a],
            "OOM=1 eval=1/0/0 set=0/1/0 total=1",
        ),
    ];
    for (i, (command, want)) in cases.iter().enumerate() {
        if i == cases.len() - 1 {
            q::<String>(&mut c, &["CONFIG", "SET", "maxmemory", "1"]).unwrap();
        }
        q::<String>(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
        let _ = q::<redis::Value>(&mut c, command);
        assert_eq!(stats(&mut c), *want, "{command:?}");
    }
    q::<String>(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
}

#[test]
fn keyspace_and_shards_sections() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c, &["SET", &a, "x", "EX", "100"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "y"]).unwrap();
    q::<String>(&mut c, &["SELECT", "5"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "z"]).unwrap();
    let keyspace = info(&mut c, &["keyspace"]);
    assert_eq!(
        keyspace,
        "# Keyspace\r\ndb0:keys=2,expires=1,avg_ttl=0\r\ndb5:keys=1,expires=0,avg_ttl=0\r\n"
    );
    let shards = info(&mut c, &["shards"]);
    let f = fields(&shards);
    assert_eq!(f["shards"], "2");
    let keys: Vec<&str> = ["shard0", "shard1"]
        .iter()
        .map(|s| f[*s].split(',').find_map(|p| p.strip_prefix("keys=")).unwrap())
        .collect();
    // One key of db0 on each shard; db5's key lives with b.
    let total: u32 = keys.iter().map(|k| k.parse::<u32>().unwrap()).sum();
    assert_eq!(total, 3, "{shards}");
    assert!(keys.contains(&"1") && keys.contains(&"2"), "{shards}");
    for s in ["shard0", "shard1"] {
        assert!(
            f[s].contains(",ops=")
                && f[s].contains(",used_cpu_user=")
                && f[s].starts_with("cpu=unpinned"),
            "{shards}"
        );
    }
    let changes = |c: &mut redis::Connection| -> u64 {
        field(c, "persistence", "rdb_changes_since_last_save").parse().unwrap()
    };
    let before = changes(&mut c);
    assert!(before >= 3);
    q::<String>(&mut c, &["SET", &a, "1"]).unwrap();
    q::<String>(&mut c, &["SET", &b, "2"]).unwrap();
    assert_eq!(changes(&mut c), before + 2, "one change on each shard");
}

#[test]
fn server_clients_stats_and_replication() {
    let server = Server::start(2);
    let mut c = server.client();
    let f = fields(&info(&mut c, &["server", "clients", "replication", "cpu"]));
    assert_eq!(f["tcp_port"], server.port.to_string());
    assert_eq!(f["redis_mode"], "standalone");
    assert!(f["process_id"].parse::<u32>().is_ok());
    assert_eq!(f["run_id"].len(), 40);
    assert_eq!(f["role"], "master");
    assert_eq!(f["connected_slaves"], "0");
    assert_eq!(f["master_replid"].len(), 40);
    assert!(f["used_cpu_sys"].contains('.') && f["used_cpu_user"].parse::<f64>().is_ok());
    let others: Vec<redis::Connection> = (0..5).map(|_| server.client()).collect();
    assert_eq!(field(&mut c, "clients", "connected_clients"), "6");
    drop(others);
    let deadline = Instant::now() + Duration::from_secs(5);
    while field(&mut c, "clients", "connected_clients") != "1" {
        assert!(Instant::now() < deadline, "closed clients are still counted");
        std::thread::sleep(Duration::from_millis(20));
    }
    let received: u64 = field(&mut c, "stats", "total_connections_received").parse().unwrap();
    assert!(received >= 6, "{received}");
    let input: u64 = field(&mut c, "stats", "total_net_input_bytes").parse().unwrap();
    assert!(input > 0);

    let before = f["master_replid"].clone();
    assert_eq!(q::<String>(&mut c, &["DEBUG", "CHANGE-REPL-ID"]).unwrap(), "OK");
    assert_ne!(field(&mut c, "replication", "master_replid"), before);
}

#[test]
fn memory_comes_from_the_allocator() {
    let server = Server::start(2);
    let mut c = server.client();
    let used =
        |c: &mut redis::Connection| field(c, "memory", "used_memory").parse::<u64>().unwrap();
    let before = used(&mut c);
    assert!(before > 0);
    let (a, b) = keys_on_two_shards();
    // 8 MiB on each shard.
    q::<i64>(&mut c, &["SETRANGE", &a, &(8 << 20).to_string(), "x"]).unwrap();
    q::<i64>(&mut c, &["SETRANGE", &b, &(8 << 20).to_string(), "x"]).unwrap();
    let after = used(&mut c);
    assert!(after >= before + (16 << 20), "{before} -> {after}");
    let f = fields(&info(&mut c, &["memory"]));
    assert!(f["used_memory_peak"].parse::<u64>().unwrap() >= after);
    assert!(f["used_memory_rss"].parse::<u64>().unwrap() > 0);
    assert!(f["used_memory_human"].ends_with('M'), "{}", f["used_memory_human"]);
    q::<i64>(&mut c, &["DEL", &a, &b]).unwrap();
    let freed = used(&mut c);
    assert!(freed + (16 << 20) <= after + (1 << 20), "{after} -> {freed}");
}

#[test]
fn instantaneous_rates_follow_the_load() {
    let server = Server::start(2);
    let mut c = server.client();
    let rate =
        |c: &mut redis::Connection, name: &str| -> f64 { field(c, "stats", name).parse().unwrap() };
    let (a, b) = keys_on_two_shards();
    // Keep both shards busy for a while (the rates average the last 1.6 s).
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(800) {
        q::<String>(&mut c, &["SET", &a, "x"]).unwrap();
        q::<String>(&mut c, &["SET", &b, "y"]).unwrap();
    }
    assert!(rate(&mut c, "instantaneous_ops_per_sec") > 0.0);
    assert!(rate(&mut c, "instantaneous_input_kbps") > 0.0);
    assert!(rate(&mut c, "instantaneous_output_kbps") > 0.0);
    // Idle again: the rates fall back to zero once the window has passed.
    std::thread::sleep(Duration::from_millis(2000));
    assert!(rate(&mut c, "instantaneous_ops_per_sec") <= 1.0);
}

/// A command over keys of two shards runs on copies of them (gathered):
/// what it counts there (hits, misses, error replies) is counted as if it
/// ran on one shard.
#[test]
fn a_gathered_command_counts_its_hits_misses_and_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let _: i64 = q(&mut c, &["SADD", &a, "x"]).unwrap();
    let _: i64 = q(&mut c, &["SADD", &b, "y"]).unwrap();
    let _: String = q(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    let union: Vec<String> = q(&mut c, &["SUNION", &a, &b]).unwrap();
    assert_eq!(union.len(), 2);
    let _: String = q(&mut c, &["SET", &b, "not a set"]).unwrap();
    let err = q::<Vec<String>>(&mut c, &["SUNION", &a, &b]).unwrap_err();
    assert!(err.to_string().contains("WRONGTYPE"), "{err}");
    let stats = fields(&info(&mut c, &["stats"]));
    // SUNION read both keys twice (the second time, b as the wrong type).
    assert_eq!(stats["keyspace_hits"], "4", "{stats:?}");
    assert_eq!(stats["keyspace_misses"], "0");
    assert_eq!(stats["total_error_replies"], "1");
    let errors = fields(&info(&mut c, &["errorstats"]));
    assert_eq!(errors["errorstat_WRONGTYPE"], "count=1");
    let commands = fields(&info(&mut c, &["commandstats"]));
    assert!(commands["cmdstat_sunion"].starts_with("calls=2,"), "{commands:?}");
    assert!(commands["cmdstat_sunion"].contains("failed_calls=1"), "{commands:?}");
}
