//! Cross-shard atomicity under concurrency, against a real 2-shard server:
//! MSET is never seen half done, MSETNX sets all keys or none.

mod common;
use common::{keys_on_two_shards, q, Server};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

#[test]
fn mset_is_atomic_across_shards() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let stop = Arc::new(AtomicBool::new(false));
    let mut writers = Vec::new();
    for w in 0..2 {
        let (a, b, stop, url) = (a.clone(), b.clone(), stop.clone(), server.url());
        writers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let v = format!("{w}-{i}");
                q::<String>(&mut c, &["MSET", &a, &v, &b, &v]).unwrap();
                i += 1;
            }
            i
        }));
    }
    let mut readers = Vec::new();
    for _ in 0..2 {
        let (a, b, stop, url) = (a.clone(), b.clone(), stop.clone(), server.url());
        readers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut checked = 0u64;
            while !stop.load(Ordering::Relaxed) {
                let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
                assert_eq!(v[0], v[1], "MGET saw a torn MSET");
                checked += 1;
            }
            checked
        }));
    }
    thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::Relaxed);
    let writes: u64 = writers.into_iter().map(|t| t.join().unwrap()).sum();
    let reads: u64 = readers.into_iter().map(|t| t.join().unwrap()).sum();
    assert!(writes > 100 && reads > 100, "too little traffic: {writes} writes, {reads} reads");
}

#[test]
fn a_read_after_a_read_never_goes_back_in_time() {
    // One writer MSETs a counter into two keys on different shards; a reader
    // GETs a, then b. Once it has seen a at i, b must be at least i: the
    // second key of a half-applied MSET is locked until it is written.
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let stop = Arc::new(AtomicBool::new(false));
    let writer = {
        let (a, b, stop, url) = (a.clone(), b.clone(), stop.clone(), server.url());
        thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                let v = i.to_string();
                q::<String>(&mut c, &["MSET", &a, &v, &b, &v]).unwrap();
            }
        })
    };
    let mut c = server.client();
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut checks = 0;
    while Instant::now() < deadline {
        let va: Option<u64> = q(&mut c, &["GET", &a]).unwrap();
        let vb: Option<u64> = q(&mut c, &["GET", &b]).unwrap();
        if let (Some(va), Some(vb)) = (va, vb) {
            assert!(vb >= va, "saw a={va} then b={vb}");
            checks += 1;
        }
    }
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(checks > 100);
}

#[test]
fn msetnx_sets_all_or_none_under_contention() {
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let mut c = server.client();
    for round in 0..30 {
        q::<i64>(&mut c, &["DEL", &a, &b]).unwrap();
        let handles: Vec<_> = (0..4)
            .map(|id| {
                let (a, b, url) = (a.clone(), b.clone(), server.url());
                thread::spawn(move || {
                    let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
                    let v = format!("{round}-{id}");
                    q::<i64>(&mut c, &["MSETNX", &a, &v, &b, &v]).unwrap()
                })
            })
            .collect();
        let won: i64 = handles.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(won, 1, "exactly one MSETNX must win");
        let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
        assert!(v[0].is_some() && v[0] == v[1], "MSETNX left {v:?}");
    }
}

#[test]
fn flushall_is_atomic_across_shards() {
    // MSET writes two keys on different shards while FLUSHALL runs: an
    // MGET must see both keys or neither, never one flushed and one not.
    let server = Server::start(2);
    let (a, b) = keys_on_two_shards();
    let stop = Arc::new(AtomicBool::new(false));
    let mut workers = Vec::new();
    {
        let (a, b, stop, url) = (a.clone(), b.clone(), stop.clone(), server.url());
        workers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) {
                i += 1;
                q::<String>(&mut c, &["MSET", &a, &i.to_string(), &b, &i.to_string()]).unwrap();
            }
        }));
    }
    {
        let (stop, url) = (stop.clone(), server.url());
        workers.push(thread::spawn(move || {
            let mut c = redis::Client::open(url).unwrap().get_connection().unwrap();
            while !stop.load(Ordering::Relaxed) {
                q::<String>(&mut c, &["FLUSHALL"]).unwrap();
            }
        }));
    }
    let mut c = server.client();
    let deadline = Instant::now() + Duration::from_secs(3);
    let (mut both, mut neither) = (0, 0);
    while Instant::now() < deadline {
        let v: Vec<Option<String>> = q(&mut c, &["MGET", &a, &b]).unwrap();
        match (&v[0], &v[1]) {
            (Some(x), Some(y)) => {
                assert_eq!(x, y);
                both += 1;
            }
            (None, None) => neither += 1,
            _ => panic!("MGET saw one shard flushed and the other not: {v:?}"),
        }
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().unwrap();
    }
    assert!(both > 0 && neither > 0, "both={both} neither={neither}");
}
