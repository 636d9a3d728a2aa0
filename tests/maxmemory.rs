//! `maxmemory` against a real 2-shard server: the OOM error under
//! `noeviction` (and under a volatile policy with no key that has a TTL),
//! eviction that keeps the process under the limit on both shards, the
//! `evicted` keyspace event, and the INFO and CONFIG views of the limit.

mod common;
use common::{info_field, keys_on_two_shards, q, Server};

const OOM_TEXT: &str = "command not allowed when used memory > 'maxmemory'.";

/// Redis's OOM error (the `redis` crate shows its code as "OOM:").
fn is_oom(error: &str) -> bool {
    error.starts_with("OOM") && error.ends_with(OOM_TEXT)
}

fn used(c: &mut redis::Connection) -> u64 {
    info_field(c, "memory", "used_memory").parse().unwrap()
}

/// Writes 1 KiB values under fresh keys until one fails or `count` are
/// written; returns how many were written and the error, if any.
fn fill(
    c: &mut redis::Connection,
    prefix: &str,
    count: usize,
    ttl: bool,
) -> (usize, Option<String>) {
    let value = "v".repeat(1024);
    for i in 0..count {
        let key = format!("{prefix}:{i}");
        let reply = if ttl {
            q::<String>(c, &["SET", &key, &value, "EX", "1000"])
        } else {
            q::<String>(c, &["SET", &key, &value])
        };
        if let Err(e) = reply {
            return (i, Some(e.to_string()));
        }
    }
    (count, None)
}

#[test]
fn noeviction_refuses_writes_and_eviction_keeps_under_the_limit() {
    let server = Server::start(2);
    let mut c = server.client();
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), "0");
    let limit = used(&mut c) + 4 * 1024 * 1024;
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]).unwrap();
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "maxmemory"]).unwrap();
    assert_eq!(got, ["maxmemory".to_string(), limit.to_string()]);
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), limit.to_string());

    // noeviction: writes fail once the process is over the limit (8 MiB
    // of values is twice what fits).
    let (written, error) = fill(&mut c, "a", 8 * 1024, false);
    let first_written = written;
    let error = error.expect("no write was refused");
    assert!(is_oom(&error), "{error}");
    assert!(written > 1000, "refused too early: {written}");
    // Reads and deletes still run; nothing was evicted.
    let v: Option<String> = q(&mut c, &["GET", "a:0"]).unwrap();
    assert!(v.is_some());
    let dbsize: usize = q(&mut c, &["DBSIZE"]).unwrap();
    assert_eq!(dbsize, written);
    assert_eq!(info_field(&mut c, "stats", "evicted_keys"), "0");
    // A refused write is a rejected call, and an OOM error reply (Redis).
    let set = info_field(&mut c, "commandstats", "cmdstat_set");
    assert!(
        set.contains(&format!("calls={written},")) && set.contains("rejected_calls=1,"),
        "{set}"
    );
    assert_eq!(info_field(&mut c, "errorstats", "errorstat_OOM"), "count=1");

    // volatile-lru with no key that has a TTL: still refused.
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", "volatile-lru"]).unwrap();
    let (_, error) = fill(&mut c, "b", 2048, false);
    assert!(error.is_some_and(|e| is_oom(&e)));
    // A transaction fails at the write, before EXEC (Redis refuses it
    // before queueing).
    let mut raw = server.raw();
    assert_eq!(raw.call(&["MULTI"]), "+OK\r\n");
    assert_eq!(raw.call(&["GET", "a:0"]), "+QUEUED\r\n");
    assert_eq!(raw.call(&["SET", "b:x", "1"]), format!("-OOM {OOM_TEXT}\r\n"));
    assert!(raw.call(&["EXEC"]).starts_with("-EXECABORT"));

    // allkeys-lru: every write goes through, old keys go, and the process
    // stays near the limit.
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"]).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "notify-keyspace-events", "Ee"]).unwrap();
    let mut sub = server.client();
    let mut pubsub = sub.as_pubsub();
    pubsub.subscribe("__keyevent@0__:evicted").unwrap();
    let (written, error) = fill(&mut c, "c", 8 * 1024, false);
    assert_eq!((written, error), (8 * 1024, None));
    let evicted: u64 = info_field(&mut c, "stats", "evicted_keys").parse().unwrap();
    assert!(evicted > 1000, "{evicted}");
    let dbsize: u64 = q(&mut c, &["DBSIZE"]).unwrap();
    assert!(dbsize < 8 * 1024, "{dbsize}");
    let now = used(&mut c);
    assert!(now <= limit + 1024 * 1024, "used {now} over the limit {limit}");
    // Both shards gave keys up: of the keys written under noeviction, each
    // shard lost some.
    let map = ringdb_engine::SlotMap::new(2);
    let mut before = [0; 2];
    let mut after = [0; 2];
    for i in 0..first_written {
        let key = format!("a:{i}");
        let shard = map.shard_of_key(key.as_bytes()).index();
        before[shard] += 1;
        after[shard] += q::<u64>(&mut c, &["EXISTS", &key]).unwrap();
    }
    assert!(after[0] < before[0] && after[1] < before[1], "{before:?} -> {after:?}");
    pubsub.set_read_timeout(Some(std::time::Duration::from_secs(5))).unwrap();
    let msg = pubsub.get_message().unwrap();
    let key: String = msg.get_payload().unwrap();
    assert!(key.starts_with("a:") || key.starts_with("c:"), "{key}");

    // volatile-ttl evicts only keys with a TTL, soonest first.
    let _: () = q(&mut c, &["FLUSHALL"]).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]).unwrap();
    // 1,000 keys without a TTL (a quarter of the headroom): a shard whose
    // own volatile keys are gone has the other shard evict.
    let value = "v".repeat(1024);
    for i in 0..1000 {
        let _: () = q(&mut c, &["SET", &format!("keep:{i}"), &value]).unwrap();
    }
    let (written, error) = fill(&mut c, "t", 8 * 1024, true);
    assert_eq!((written, error), (8 * 1024, None));
    for i in 0..1000 {
        let v: Option<String> = q(&mut c, &["GET", &format!("keep:{i}")]).unwrap();
        assert!(v.is_some(), "keep:{i} has no TTL and was evicted");
    }
}

#[test]
fn bad_maxmemory_settings_are_refused() {
    let server = Server::start(2);
    let mut c = server.client();
    for (name, value) in [
        ("maxmemory", "-1"),
        ("maxmemory-samples", "0"),
        ("maxmemory-samples", "65"),
        ("maxmemory-eviction-tenacity", "101"),
        ("maxmemory-policy", "lru"),
    ] {
        let err = q::<()>(&mut c, &["CONFIG", "SET", name, value]).unwrap_err();
        assert!(err.to_string().contains("CONFIG SET failed"), "{name} {value}: {err}");
    }
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1gb"]).unwrap();
    assert_eq!(info_field(&mut c, "memory", "maxmemory"), (1u64 << 30).to_string());
    assert_eq!(info_field(&mut c, "memory", "maxmemory_human"), "1.00G");
}

/// Out of memory, EXEC of a transaction with a write that may grow memory
/// is refused whole (EXECABORT with the OOM error, the transaction is
/// gone); one of reads only still runs (Redis's `processCommand`).
#[test]
fn exec_with_a_growing_write_is_refused_when_out_of_memory() {
    let server = Server::start(2);
    let mut c = server.client();
    let (mut reads, mut raw) = (server.raw(), server.raw());
    assert_eq!(raw.call(&["SET", "x", "value"]), "+OK\r\n");
    for cmd in [&["MULTI"][..], &["GET", "x"], &["PING"]] {
        reads.call(cmd);
    }
    for cmd in [&["MULTI"][..], &["SET", "x", "1"], &["GET", "x"]] {
        raw.call(cmd);
    }
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "1"]).unwrap();
    assert_eq!(reads.call(&["EXEC"]), "*2\r\n$5\r\nvalue\r\n+PONG\r\n");
    assert_eq!(
        raw.call(&["EXEC"]),
        format!("-EXECABORT Transaction discarded because of: OOM {OOM_TEXT}\r\n")
    );
    assert_eq!(raw.call(&["EXEC"]), "-ERR EXEC without MULTI\r\n");
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    assert_eq!(raw.call(&["GET", "x"]), "$5\r\nvalue\r\n");
}

/// The limit is the process's and Redis evicts from the whole keyspace: a
/// shard with nothing of its own to evict lets writes through while the
/// other shard has keys to evict, and has it evict them; writes are
/// refused once no shard has any left.
#[test]
fn a_shard_out_of_candidates_has_the_other_shard_evict() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    // 2 MiB of values with a TTL, all on b's shard.
    let (written, error) = fill(&mut c, &format!("{{{b}}}:ttl"), 2048, true);
    assert_eq!((written, error), (2048, None));
    let limit = used(&mut c) + 1024 * 1024;
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", "volatile-ttl"]).unwrap();
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]).unwrap();
    // Keys without a TTL on a's shard, which has nothing to evict: about
    // 1 MiB fits under the limit, and 2 MiB more as b's keys go.
    let (written, error) = fill(&mut c, &format!("{{{a}}}:kept"), 8 * 1024, false);
    let error = error.expect("no write was refused");
    assert!(is_oom(&error), "{error}");
    assert!(written > 2500, "refused while b's shard had keys to evict: {written} written");
    let evicted: u64 = info_field(&mut c, "stats", "evicted_keys").parse().unwrap();
    assert!(evicted > 1500, "{evicted} evicted");
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
    let kept: u64 = q(&mut c, &["EXISTS", &format!("{{{a}}}:kept:0")]).unwrap();
    assert_eq!(kept, 1, "a key without a TTL was evicted");
}

#[test]
fn the_limit_is_honoured_within_4_kb_of_an_emptied_database() {
    // Redis's own check: 100 KB above an emptied database, small keys fill
    // it (more than 10 fit: nothing jumps by a slot index or a pending
    // count), and as many again stay within 4 KB of the limit.
    let server = Server::start(2);
    let mut c = server.client();
    for policy in ["allkeys-lru", "volatile-random"] {
        let _: () = q(&mut c, &["FLUSHALL"]).unwrap();
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
        // Warm: every command's first use has allocated what it keeps.
        for i in 0..20 {
            let _: () = q(&mut c, &["SETEX", &format!("warm:{i}"), "10000", "x"]).unwrap();
        }
        let _: () = q(&mut c, &["FLUSHALL"]).unwrap();
        let limit = used(&mut c) + 100 * 1024;
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", &limit.to_string()]).unwrap();
        let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory-policy", policy]).unwrap();
        let mut n = 0;
        while used(&mut c) + 4096 <= limit {
            let _: () = q(&mut c, &["SETEX", &format!("k:{n}"), "10000", "x"]).unwrap();
            n += 1;
        }
        assert!(n > 10, "{policy}: only {n} keys fit in 100 KB");
        for i in 0..n {
            if let Err(e) = q::<()>(&mut c, &["SETEX", &format!("more:{i}"), "10000", "x"]) {
                let info: String = q(&mut c, &["INFO", "everything"]).unwrap();
                let pick =
                    |f: &str| info.lines().find(|l| l.starts_with(f)).unwrap_or("").to_string();
                panic!(
                    "{policy} key {i} of {n}: {e}; {} {} {} limit {limit} {}",
                    pick("used_memory:"),
                    pick("db0"),
                    pick("evicted_keys"),
                    pick("mem_not_counted")
                );
            }
        }
        let now = used(&mut c);
        assert!(now < limit + 4096, "{policy}: used {now} against limit {limit}");
    }
    let _: () = q(&mut c, &["CONFIG", "SET", "maxmemory", "0"]).unwrap();
}
