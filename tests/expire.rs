//! Expiry against a real 2-shard server: EXPIRE/PEXPIRE/EXPIREAT/PEXPIREAT
//! with every option and error, TTL/PTTL/EXPIRETIME/PEXPIRETIME, PERSIST,
//! lazy expiry on access and the active cycle reclaiming keys nobody reads,
//! with keys on both shards.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

fn now_ms() -> i64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as i64).unwrap_or(0)
}

/// The exact error text a command gets (without `-` and CRLF).
fn err(raw: &mut Raw, args: &[&str]) -> String {
    let reply = raw.call(args);
    assert!(reply.starts_with('-'), "{args:?}: expected an error, got {reply:?}");
    reply[1..].trim_end().to_string()
}

/// `n` keys named `prefix:i` on each of the two shards.
fn keys_per_shard(prefix: &str, n: usize) -> Vec<String> {
    let map = ringdb_engine::SlotMap::new(2);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for i in 0.. {
        let k = format!("{prefix}:{i}");
        match map.shard_of_key(k.as_bytes()).0 {
            0 if a.len() < n => a.push(k),
            1 if b.len() < n => b.push(k),
            _ => {}
        }
        if a.len() == n && b.len() == n {
            break;
        }
    }
    a.extend(b);
    a
}

#[test]
fn ttl_family_reports_missing_persistent_and_volatile_keys() {
    let server = Server::start(2);
    let mut c = server.client();
    for key in [keys_on_two_shards().0, keys_on_two_shards().1] {
        for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
            assert_eq!(q::<i64>(&mut c, &[cmd, &key]).unwrap(), -2, "{cmd} on a missing key");
        }
        q::<()>(&mut c, &["SET", &key, "v"]).unwrap();
        for cmd in ["TTL", "PTTL", "EXPIRETIME", "PEXPIRETIME"] {
            assert_eq!(q::<i64>(&mut c, &[cmd, &key]).unwrap(), -1, "{cmd} without a TTL");
        }
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", &key, "100"]).unwrap(), 1);
        let ttl: i64 = q(&mut c, &["TTL", &key]).unwrap();
        assert!((99..=100).contains(&ttl), "ttl {ttl}");
        let pttl: i64 = q(&mut c, &["PTTL", &key]).unwrap();
        assert!((99_000..=100_000).contains(&pttl), "pttl {pttl}");
        let at = now_ms() / 1000 + 1000;
        assert_eq!(q::<i64>(&mut c, &["EXPIREAT", &key, &at.to_string()]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", &key]).unwrap(), at);
        assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", &key]).unwrap(), at * 1000);
        let pat = now_ms() + 123_456;
        assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", &key, &pat.to_string()]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["PEXPIRETIME", &key]).unwrap(), pat);
        assert_eq!(q::<i64>(&mut c, &["EXPIRETIME", &key]).unwrap(), (pat + 500) / 1000);
        assert_eq!(q::<i64>(&mut c, &["PEXPIRE", &key, "5000"]).unwrap(), 1);
        let pttl: i64 = q(&mut c, &["PTTL", &key]).unwrap();
        assert!((4_900..=5_000).contains(&pttl), "pttl {pttl}");
    }
}

#[test]
fn persist_removes_the_ttl() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        assert_eq!(q::<i64>(&mut c, &["PERSIST", key]).unwrap(), 0);
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["PERSIST", key]).unwrap(), 0);
        q::<()>(&mut c, &["EXPIRE", key, "100"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["PERSIST", key]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["TTL", key]).unwrap(), -1);
        assert_eq!(q::<i64>(&mut c, &["PERSIST", key]).unwrap(), 0);
    }
}

#[test]
fn expire_conditions_nx_xx_gt_lt() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        let ttl = |c: &mut redis::Connection| q::<i64>(c, &["TTL", key]).unwrap();
        // NX: only without a TTL.
        q::<()>(&mut c, &["SET", key, "v", "EX", "100"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "200", "NX"]).unwrap(), 0);
        assert!((99..=100).contains(&ttl(&mut c)));
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "200", "nx"]).unwrap(), 1);
        assert!((199..=200).contains(&ttl(&mut c)));
        // XX: only with a TTL.
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "300", "XX"]).unwrap(), 1);
        assert!((299..=300).contains(&ttl(&mut c)));
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "300", "XX"]).unwrap(), 0);
        assert_eq!(ttl(&mut c), -1);
        // GT: no TTL counts as infinite, so GT never applies to it.
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "300", "GT"]).unwrap(), 0);
        assert_eq!(ttl(&mut c), -1);
        q::<()>(&mut c, &["SET", key, "v", "EX", "100"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "50", "GT"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "200", "GT"]).unwrap(), 1);
        assert!((199..=200).contains(&ttl(&mut c)));
        // LT: applies to keys without a TTL.
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "300", "LT"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "150", "LT"]).unwrap(), 1);
        assert!((149..=150).contains(&ttl(&mut c)));
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "100", "LT"]).unwrap(), 1);
        assert!((99..=100).contains(&ttl(&mut c)));
        // LT XX together.
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "50", "LT", "XX"]).unwrap(), 1);
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "50", "XX", "LT"]).unwrap(), 0);
        // PEXPIRE and the absolute forms take the same options.
        assert_eq!(q::<i64>(&mut c, &["PEXPIRE", key, "100000", "NX"]).unwrap(), 1);
        let later = (now_ms() + 500_000).to_string();
        assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", key, &later, "GT"]).unwrap(), 1);
        let sooner = (now_ms() / 1000 + 10).to_string();
        assert_eq!(q::<i64>(&mut c, &["EXPIREAT", key, &sooner, "LT"]).unwrap(), 1);
        assert!((9..=10).contains(&ttl(&mut c)));
    }
    for cond in ["NX", "XX", "GT", "LT"] {
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", "none", "100", cond]).unwrap(), 0);
    }
}

#[test]
fn expire_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut raw = server.raw();
    q::<()>(&mut c, &["SET", "foo", "bar"]).unwrap();
    let incompatible = "ERR NX and XX, GT or LT options at the same time are not compatible";
    assert_eq!(err(&mut raw, &["EXPIRE", "foo", "200", "NX", "XX"]), incompatible);
    assert_eq!(err(&mut raw, &["EXPIRE", "foo", "200", "NX", "GT"]), incompatible);
    assert_eq!(err(&mut raw, &["PEXPIRE", "foo", "200", "NX", "LT"]), incompatible);
    assert_eq!(
        err(&mut raw, &["EXPIRE", "foo", "200", "LT", "GT"]),
        "ERR GT and LT options at the same time are not compatible"
    );
    assert_eq!(err(&mut raw, &["EXPIRE", "foo", "200", "AB"]), "ERR Unsupported option AB");
    assert_eq!(err(&mut raw, &["EXPIREAT", "foo", "200", "XX", "AB"]), "ERR Unsupported option AB");
    // Options are checked before the number, as in Redis.
    assert_eq!(err(&mut raw, &["EXPIRE", "foo", "abc", "AB"]), "ERR Unsupported option AB");
    assert_eq!(
        err(&mut raw, &["EXPIRE", "foo", ""]),
        "ERR value is not an integer or out of range"
    );
    assert_eq!(
        err(&mut raw, &["EXPIRE", "foo", "1.5"]),
        "ERR value is not an integer or out of range"
    );
    for big in [
        "9223370399119966",
        "9223372036854776",
        "10000000000000000",
        "18446744073709561",
        "-9223372036854776",
    ] {
        assert_eq!(
            err(&mut raw, &["EXPIRE", "foo", big]),
            "ERR invalid expire time in 'expire' command"
        );
    }
    assert_eq!(
        err(&mut raw, &["EXPIREAT", "foo", "9223372036854776"]),
        "ERR invalid expire time in 'expireat' command"
    );
    assert_eq!(
        err(&mut raw, &["PEXPIRE", "foo", "9223372036854770000"]),
        "ERR invalid expire time in 'pexpire' command"
    );
    assert_eq!(q::<i64>(&mut c, &["TTL", "foo"]).unwrap(), -1);
    assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", "foo", "9223372036854770000"]).unwrap(), 1);
    assert!(err(&mut raw, &["EXPIRE", "foo"])
        .contains("wrong number of arguments for 'expire' command"));
    assert!(err(&mut raw, &["TTL"]).contains("wrong number of arguments for 'ttl' command"));
    assert!(err(&mut raw, &["PERSIST", "a", "b"])
        .contains("wrong number of arguments for 'persist' command"));
}

#[test]
fn a_time_in_the_past_deletes_the_key() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<()>(&mut c, &["SET", key, "v", "EX", "100"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "-10", "LT"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["TTL", key]).unwrap(), -2);
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "0"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["EXPIREAT", key, "1"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
        q::<()>(&mut c, &["SET", key, "v"]).unwrap();
        assert_eq!(q::<i64>(&mut c, &["PEXPIREAT", key, "-9223372036854770000"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["TTL", key]).unwrap(), -2);
        // A deleted key stays deleted: EXPIRE does not bring it back.
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "10"]).unwrap(), 0);
    }
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
}

#[test]
fn expired_keys_are_invisible_at_once() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<()>(&mut c, &["SET", key, "v", "PX", "100"]).unwrap();
        assert_eq!(q::<String>(&mut c, &["GET", key]).unwrap(), "v");
    }
    sleep(Duration::from_millis(150));
    for key in [&a, &b] {
        assert_eq!(q::<Option<String>>(&mut c, &["GET", key]).unwrap(), None);
        assert_eq!(q::<i64>(&mut c, &["EXISTS", key]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["TTL", key]).unwrap(), -2);
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "none");
        // An expired key cannot get a TTL back.
        assert_eq!(q::<i64>(&mut c, &["EXPIRE", key, "100"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["PERSIST", key]).unwrap(), 0);
    }
}

/// Lazy expiry reclaims the keys it reads. The active cycle (hz 1) may also
/// run meanwhile, so a round in which it did is retried.
#[test]
fn lazy_expiry_reclaims_what_it_reads() {
    let server = Server::start_with(&["--shards", "2", "--hz", "1"]);
    let mut c = server.client();
    let keys = keys_per_shard("lazy", 20);
    for _round in 0..5 {
        for k in &keys {
            q::<()>(&mut c, &["SET", k, "v", "PX", "20"]).unwrap();
        }
        sleep(Duration::from_millis(40));
        let before: i64 = q(&mut c, &["DBSIZE"]).unwrap();
        // Read half of them, both shards' halves.
        for k in keys.iter().step_by(2) {
            assert_eq!(q::<Option<String>>(&mut c, &["GET", k]).unwrap(), None);
        }
        let after: i64 = q(&mut c, &["DBSIZE"]).unwrap();
        q::<()>(&mut c, &["FLUSHALL"]).unwrap();
        if before == 40 && after == 20 {
            return;
        }
        assert!(after <= before, "{before} -> {after}");
    }
    panic!("the active cycle interfered in every round");
}

#[test]
fn active_expiry_reclaims_keys_nobody_reads() {
    let server = Server::start(2);
    let mut c = server.client();
    let keys = keys_per_shard("active", 500);
    let mut pipe = redis::pipe();
    for (i, k) in keys.iter().enumerate() {
        pipe.cmd("SET").arg(k).arg("v").arg("PX").arg(1500).ignore();
        if i % 10 == 0 {
            pipe.cmd("SET").arg(format!("keep:{k}")).arg("v").ignore();
        }
    }
    pipe.query::<()>(&mut c).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 1100);
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let size: i64 = q(&mut c, &["DBSIZE"]).unwrap();
        if size == 100 {
            break;
        }
        assert!(Instant::now() < deadline, "DBSIZE still {size}");
        sleep(Duration::from_millis(50));
    }
    let kept: Vec<String> = q(&mut c, &["KEYS", "*"]).unwrap();
    assert!(kept.iter().all(|k| k.starts_with("keep:")));
}

#[test]
fn debug_pause_cron_stops_active_expiry() {
    let server = Server::start(2);
    let mut c = server.client();
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "1"]).unwrap();
    for key in ["a", "b", "c", "d"] {
        let _: () = q(&mut c, &["SET", key, "v", "PX", "20"]).unwrap();
    }
    std::thread::sleep(std::time::Duration::from_millis(400));
    // Not reclaimed in the background: still counted, never read.
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 4);
    let _: () = q(&mut c, &["DEBUG", "PAUSE-CRON", "0"]).unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while q::<i64>(&mut c, &["DBSIZE"]).unwrap() != 0 {
        assert!(std::time::Instant::now() < deadline, "active expiry did not resume");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}
