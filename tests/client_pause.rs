//! CLIENT PAUSE / UNPAUSE over every core: held writes wait and go on,
//! reads pass a WRITE pause, keys neither expire nor are evicted meanwhile.

mod common;

use common::{info_field, keys_on_two_shards, q, Server};
use std::time::{Duration, Instant};

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn write_pause_holds_writes_on_every_shard_until_unpause() {
    let server = Server::start(2);
    let mut admin = server.client();
    let (a, b) = keys_on_two_shards();
    let _: () = q(&mut admin, &["SET", &a, "old"]).unwrap();
    assert_eq!(q::<String>(&mut admin, &["CLIENT", "PAUSE", "100000", "WRITE"]).unwrap(), "OK");
    let writers: Vec<_> = [a.clone(), b.clone()]
        .into_iter()
        .map(|key| {
            let mut c = server.client();
            std::thread::spawn(move || q::<String>(&mut c, &["SET", &key, "new"]).unwrap())
        })
        .collect();
    wait_for("two held writers", || info_field(&mut admin, "clients", "blocked_clients") == "2");
    // Reads go on; the writes have not happened.
    let mut reader = server.client();
    assert_eq!(q::<Option<String>>(&mut reader, &["GET", &a]).unwrap().as_deref(), Some("old"));
    assert_eq!(q::<Option<String>>(&mut reader, &["GET", &b]).unwrap(), None);
    // A syntax error is answered at once, and a read-only script passes.
    assert!(q::<String>(&mut reader, &["SET", &a]).is_err());
    let ro = "#!lua flags=no-writes\nreturn 1";
    assert_eq!(q::<i64>(&mut reader, &["EVAL", ro, "0"]).unwrap(), 1);
    assert_eq!(q::<String>(&mut admin, &["CLIENT", "UNPAUSE"]).unwrap(), "OK");
    for w in writers {
        assert_eq!(w.join().unwrap(), "OK");
    }
    assert_eq!(q::<Vec<String>>(&mut reader, &["MGET", &a, &b]).unwrap(), vec!["new", "new"]);
    assert_eq!(info_field(&mut admin, "clients", "blocked_clients"), "0");
}

#[test]
fn keys_do_not_expire_while_paused_and_pause_ends_by_itself() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        let _: () = q(&mut c, &["SET", key, "v", "PX", "300"]).unwrap();
    }
    let expired = |c: &mut redis::Connection| -> u64 {
        info_field(c, "stats", "expired_keys").parse().unwrap()
    };
    let before = expired(&mut c);
    let _: () = q(&mut c, &["CLIENT", "PAUSE", "2000", "WRITE"]).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    // Logically gone, but not deleted (no expired_keys, no event).
    assert_eq!(q::<Vec<Option<String>>>(&mut c, &["MGET", &a, &b]).unwrap(), vec![None, None]);
    assert_eq!(expired(&mut c), before);
    // The pause ends at its time; then a read reclaims the key.
    let started = Instant::now();
    let _: () = q(&mut c, &["SET", "after", "1"]).unwrap();
    assert!(started.elapsed() >= Duration::from_millis(1000), "{:?}", started.elapsed());
    let _: Option<String> = q(&mut c, &["GET", &a]).unwrap();
    let _: Option<String> = q(&mut c, &["GET", &b]).unwrap();
    assert_eq!(expired(&mut c), before + 2);
}

#[test]
fn all_pause_holds_reads_and_errors_are_redis_s() {
    let server = Server::start(2);
    let mut c = server.client();
    let err = q::<String>(&mut c, &["CLIENT", "PAUSE", "abc"]).unwrap_err().to_string();
    assert!(err.contains("timeout is not an integer or out of range"), "{err}");
    let err = q::<String>(&mut c, &["CLIENT", "PAUSE", "-1"]).unwrap_err().to_string();
    assert!(err.contains("timeout is negative"), "{err}");
    let err = q::<String>(&mut c, &["CLIENT", "PAUSE", "10", "SOME"]).unwrap_err().to_string();
    assert!(err.contains("syntax error"), "{err}");
    // Connected first: the client's own hello would wait too.
    let mut reader = server.client();
    let _: () = q(&mut c, &["CLIENT", "PAUSE", "400", "ALL"]).unwrap();
    let started = Instant::now();
    assert_eq!(q::<Option<String>>(&mut reader, &["GET", "x"]).unwrap(), None);
    assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
}
