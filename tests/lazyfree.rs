//! Lazy freeing: UNLINK, FLUSHDB/FLUSHALL ASYNC and the lazyfree-lazy-user-*
//! settings free big values on the background thread, counted in INFO.

mod common;

use common::{info_field, q, Server};
use std::time::{Duration, Instant};

fn freed(c: &mut redis::Connection) -> u64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    while info_field(c, "memory", "lazyfree_pending_objects") != "0" {
        assert!(Instant::now() < deadline, "lazy free never finished");
        std::thread::sleep(Duration::from_millis(10));
    }
    info_field(c, "memory", "lazyfreed_objects").parse().unwrap()
}

fn big_set(c: &mut redis::Connection, key: &str) {
    let mut args = vec!["SADD".to_string(), key.to_string()];
    args.extend((0..1000).map(|i| format!("member:{i}")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let _: i64 = q(c, &args).unwrap();
}

#[test]
fn big_values_are_freed_in_the_background() {
    let server = Server::start(2);
    let mut c = server.client();
    let _: () = q(&mut c, &["CONFIG", "RESETSTAT"]).unwrap();
    big_set(&mut c, "big");
    let _: () = q(&mut c, &["SADD", "small", "1", "2"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["UNLINK", "big", "small", "none"]).unwrap(), 2);
    // Only the big set went through the thread.
    assert_eq!(freed(&mut c), 1);
    big_set(&mut c, "big");
    assert_eq!(q::<i64>(&mut c, &["DEL", "big"]).unwrap(), 1);
    assert_eq!(freed(&mut c), 1);
    let _: () = q(&mut c, &["CONFIG", "SET", "lazyfree-lazy-user-del", "yes"]).unwrap();
    big_set(&mut c, "big");
    assert_eq!(q::<i64>(&mut c, &["DEL", "big"]).unwrap(), 1);
    assert_eq!(freed(&mut c), 2);

    // FLUSHALL ASYNC counts every key of every shard.
    for i in 0..10 {
        let _: () = q(&mut c, &["SET", &format!("k{i}"), "v"]).unwrap();
    }
    let _: () = q(&mut c, &["FLUSHALL", "ASYNC"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["DBSIZE"]).unwrap(), 0);
    assert_eq!(freed(&mut c), 12);
    let _: () = q(&mut c, &["CONFIG", "SET", "lazyfree-lazy-user-flush", "yes"]).unwrap();
    let _: () = q(&mut c, &["SET", "x", "v"]).unwrap();
    let _: () = q(&mut c, &["FLUSHDB"]).unwrap();
    assert_eq!(freed(&mut c), 13);
    let _: () = q(&mut c, &["SET", "x", "v"]).unwrap();
    let _: () = q(&mut c, &["FLUSHDB", "SYNC"]).unwrap();
    assert_eq!(freed(&mut c), 13);
    assert!(q::<String>(&mut c, &["FLUSHDB", "LATER"]).is_err());
}
