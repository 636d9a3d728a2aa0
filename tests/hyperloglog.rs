//! HyperLogLog against a real 2-shard server: the bytes and counts a real
//! Redis 7.0.15 produced for fixed inputs (tests/data/hll/expected.txt,
//! written by tests/data/hll/generate.py), PFCOUNT and PFMERGE of keys on
//! both shards, sparse→dense promotion, the error over a million elements,
//! Redis's error texts, PFDEBUG and PFSELFTEST.

mod common;
use common::{keys_on_two_shards, q, Server};
use std::collections::HashMap;

fn expected_data() -> String {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/hll/expected.txt");
    std::fs::read_to_string(path).expect("tests/data/hll/expected.txt is committed")
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// The PFADD batches an element spec stands for (see generate.py).
fn batches(spec: &str) -> Vec<Vec<Vec<u8>>> {
    let p: Vec<&str> = spec.split(':').collect();
    let n = |s: &str| s.parse::<usize>().unwrap();
    let (items, batch): (Vec<Vec<u8>>, usize) = match p[0] {
        "str" => {
            ((n(p[2])..n(p[3])).map(|i| format!("{}{i}", p[1]).into_bytes()).collect(), n(p[4]))
        }
        "u64" => ((n(p[1])..n(p[2])).map(|i| (i as u64).to_le_bytes().to_vec()).collect(), n(p[3])),
        "len" => (
            (n(p[1])..n(p[2]))
                .map(|i| (0..i).map(|j| ((i * 31 + j) % 256) as u8).collect())
                .collect(),
            n(p[3]),
        ),
        other => panic!("unknown spec {other}"),
    };
    let mut out: Vec<Vec<Vec<u8>>> = items.chunks(batch).map(|c| c.to_vec()).collect();
    if out.is_empty() {
        out.push(Vec::new());
    }
    out
}

fn get(c: &mut redis::Connection, key: &str) -> Vec<u8> {
    redis::cmd("GET").arg(key).query(c).unwrap()
}

fn pfadd(c: &mut redis::Connection, key: &str, elements: &[Vec<u8>]) -> i64 {
    redis::cmd("PFADD").arg(key).arg(elements).query(c).unwrap()
}

/// Every record of the data file, replayed: the same bytes after PFADD, the
/// same count, the same bytes once PFCOUNT cached it; unions (which must
/// leave their keys alone) and merges (into new keys and into copies) too.
/// The names spread over both shards.
#[test]
fn matches_bytes_and_counts_recorded_from_redis() {
    let server = Server::start(2);
    let mut c = server.client();
    let map = ringdb_engine::SlotMap::new(2);
    let mut shards_used = [0; 2];
    let mut records = 0;
    for line in expected_data().lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<&str> = line.split(' ').collect();
        match f[0] {
            "hll" => {
                let name = f[1];
                shards_used[map.shard_of_key(name.as_bytes()).index()] += 1;
                q::<String>(&mut c, &["CONFIG", "SET", "hll-sparse-max-bytes", f[2]]).unwrap();
                let mut pipe = redis::pipe();
                for batch in batches(f[3]) {
                    pipe.cmd("PFADD").arg(name).arg(batch).ignore();
                }
                pipe.query::<()>(&mut c).unwrap();
                assert_eq!(get(&mut c, name), unhex(f[5]), "{name}: bytes after PFADD");
                assert_eq!(q::<String>(&mut c, &["PFCOUNT", name]).unwrap(), f[4], "{name}");
                assert_eq!(get(&mut c, name), unhex(f[6]), "{name}: bytes after PFCOUNT");
            }
            "union" => {
                q::<String>(&mut c, &["CONFIG", "SET", "hll-sparse-max-bytes", "3000"]).unwrap();
                let names: Vec<&str> = f[1].split(',').collect();
                let before: Vec<Vec<u8>> = names.iter().map(|n| get(&mut c, n)).collect();
                let mut cmd = vec!["PFCOUNT"];
                cmd.extend(&names);
                assert_eq!(q::<String>(&mut c, &cmd).unwrap(), f[2], "union {}", f[1]);
                let after: Vec<Vec<u8>> = names.iter().map(|n| get(&mut c, n)).collect();
                assert_eq!(before, after, "PFCOUNT of several keys changed them");
            }
            "merge" => {
                let dest = format!("merged:{records}");
                if f[1] != "-" {
                    q::<i64>(&mut c, &["COPY", f[1], &dest]).unwrap();
                }
                let mut cmd = vec!["PFMERGE", dest.as_str()];
                cmd.extend(f[2].split(','));
                assert_eq!(q::<String>(&mut c, &cmd).unwrap(), "OK");
                assert_eq!(get(&mut c, &dest), unhex(f[4]), "merge {} {}", f[1], f[2]);
                assert_eq!(q::<String>(&mut c, &["PFCOUNT", &dest]).unwrap(), f[3]);
            }
            other => panic!("unknown record {other}"),
        }
        records += 1;
    }
    assert!(records >= 25, "{records} records");
    assert!(shards_used.iter().all(|&n| n > 0), "records on both shards: {shards_used:?}");
}

/// Bytes written by a real Redis make a working HLL with SET.
#[test]
fn set_of_redis_bytes_makes_a_working_hll() {
    let server = Server::start(2);
    let mut c = server.client();
    let data = expected_data();
    let records: HashMap<&str, Vec<&str>> = data
        .lines()
        .filter(|l| l.starts_with("hll "))
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            (f[1], f)
        })
        .collect();
    let (a, b) = keys_on_two_shards();
    for (key, name) in [(&a, "thousand"), (&b, "five_thousand")] {
        let f = &records[name];
        let bytes = unhex(f[5]);
        let _: () = redis::cmd("SET").arg(key).arg(&bytes).query(&mut c).unwrap();
        assert_eq!(q::<String>(&mut c, &["PFCOUNT", key]).unwrap(), f[4]);
        assert_eq!(q::<String>(&mut c, &["TYPE", key]).unwrap(), "string");
        // Adding elements it already holds changes nothing.
        let again: Vec<Vec<u8>> = (0..100).map(|i| format!("elem{i}").into_bytes()).collect();
        assert_eq!(pfadd(&mut c, key, &again), 0);
        assert_eq!(pfadd(&mut c, key, &[b"a new element".to_vec()]), 1);
        assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", key]).unwrap(), "raw");
    }
    // The union of the two Redis-made HLLs, on two shards.
    let union: i64 = q(&mut c, &["PFCOUNT", &a, &b]).unwrap();
    assert!((4990..=5060).contains(&union), "{union}");
    // A short HLL set by SET is an embstr until first written.
    let small = unhex(records["three"][5]);
    let _: () = redis::cmd("SET").arg("small").arg(&small).query(&mut c).unwrap();
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", "small"]).unwrap(), "embstr");
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "small"]).unwrap(), 3);
    assert_eq!(get(&mut c, "small"), unhex(records["three"][6]));
}

#[test]
fn pfadd_creates_and_reports_changes() {
    let server = Server::start(2);
    let mut c = server.client();
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "h"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "h"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h", "a", "b", "c"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h", "a", "b", "c"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["PFADD", "h", ""]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "h"]).unwrap(), 4);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "missing"]).unwrap(), 0);
    // The cache: valid after PFCOUNT (top bit of byte 15 clear), stale
    // again after a change, untouched by a PFADD that changes nothing.
    assert_eq!(get(&mut c, "h")[15], 0);
    q::<i64>(&mut c, &["PFADD", "h", "a"]).unwrap();
    assert_eq!(get(&mut c, "h")[15], 0);
    q::<i64>(&mut c, &["PFADD", "h", "zzz"]).unwrap();
    assert_eq!(get(&mut c, "h")[15], 0x80);
    // An HLL is a string: expiry, RENAME and DEL work on it.
    let (a, b) = keys_on_two_shards();
    q::<i64>(&mut c, &["PFADD", &a, "x", "y"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["RENAME", &a, &b]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", &b]).unwrap(), 2);
    q::<i64>(&mut c, &["PEXPIRE", &b, "20"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", &b]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["DEL", "h"]).unwrap(), 1);
}

#[test]
fn errors_are_redis_texts() {
    let server = Server::start(2);
    let mut raw = server.raw();
    raw.call(&["SET", "str", "not an hll"]);
    raw.call(&["SET", "int", "1234567890123456"]);
    raw.call(&["BF.ADD", "bloom", "x"]);
    let not_hll = "-WRONGTYPE Key is not a valid HyperLogLog string value.\r\n";
    let wrong_type = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n";
    for key in ["str", "int"] {
        assert_eq!(raw.call(&["PFADD", key, "a"]), not_hll);
        assert_eq!(raw.call(&["PFCOUNT", key]), not_hll);
        assert_eq!(raw.call(&["PFCOUNT", key, "other"]), not_hll);
        assert_eq!(raw.call(&["PFMERGE", "dest", key]), not_hll);
        assert_eq!(raw.call(&["PFMERGE", key, "other"]), not_hll);
        assert_eq!(raw.call(&["PFDEBUG", "GETREG", key]), not_hll);
    }
    assert_eq!(raw.call(&["PFADD", "bloom", "a"]), wrong_type);
    assert_eq!(raw.call(&["PFCOUNT", "bloom"]), wrong_type);
    assert_eq!(raw.call(&["PFMERGE", "bloom"]), wrong_type);
    // Corruptions Redis's own tests make.
    raw.call(&["PFADD", "hll", "a", "b", "c"]);
    raw.call(&["APPEND", "hll", "hello"]);
    assert_eq!(raw.call(&["PFCOUNT", "hll"]), "-INVALIDOBJ Corrupted HLL object detected\r\n");
    assert_eq!(raw.call(&["PFCOUNT", "hll", "x"]), "-INVALIDOBJ Corrupted HLL object detected\r\n");
    assert_eq!(raw.call(&["PFMERGE", "d", "hll"]), "-INVALIDOBJ Corrupted HLL object detected\r\n");
    raw.call(&["DEL", "hll"]);
    raw.call(&["PFADD", "hll", "a", "b", "c"]);
    raw.call(&["SETRANGE", "hll", "0", "0123"]);
    assert_eq!(raw.call(&["PFCOUNT", "hll"]), not_hll);
    raw.call(&["DEL", "hll"]);
    raw.call(&["PFADD", "hll", "a", "b", "c"]);
    raw.call(&["SETRANGE", "hll", "4", "\x00"]);
    assert_eq!(raw.call(&["PFCOUNT", "hll"]), not_hll, "dense of the wrong length");
    assert_eq!(raw.call(&["PFADD"]), "-ERR wrong number of arguments for 'pfadd' command\r\n");
    assert_eq!(raw.call(&["PFCOUNT"]), "-ERR wrong number of arguments for 'pfcount' command\r\n");
    assert_eq!(raw.call(&["PFMERGE"]), "-ERR wrong number of arguments for 'pfmerge' command\r\n");
    assert_eq!(
        raw.call(&["PFDEBUG", "GETREG"]),
        "-ERR wrong number of arguments for 'pfdebug' command\r\n"
    );
    assert_eq!(
        raw.call(&["PFDEBUG", "GETREG", "nokey"]),
        "-ERR The specified key does not exist\r\n"
    );
    raw.call(&["PFADD", "ok", "a"]);
    assert_eq!(raw.call(&["PFDEBUG", "foo", "ok"]), "-ERR Unknown PFDEBUG subcommand 'foo'\r\n");
    assert_eq!(
        raw.call(&["PFSELFTEST", "x"]),
        "-ERR wrong number of arguments for 'pfselftest' command\r\n"
    );
}

/// PFCOUNT of keys on both shards is the union's count and leaves the keys
/// as they were (their stale caches included).
#[test]
fn pfcount_across_shards_changes_nothing() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let first: Vec<Vec<u8>> = (0..3000).map(|i| format!("x{i}").into_bytes()).collect();
    let second: Vec<Vec<u8>> = (2000..6000).map(|i| format!("x{i}").into_bytes()).collect();
    pfadd(&mut c, &a, &first);
    pfadd(&mut c, &b, &second);
    let before = (get(&mut c, &a), get(&mut c, &b));
    assert_eq!(before.0[15] & 0x80, 0x80, "stale cache before");
    let union: i64 = q(&mut c, &["PFCOUNT", &a, &b, "missing"]).unwrap();
    assert!((5880..=6120).contains(&union), "union {union}");
    assert_eq!((get(&mut c, &a), get(&mut c, &b)), before);
    // The same keys under one hash tag (one shard) give the same count.
    pfadd(&mut c, "{t}a", &first);
    pfadd(&mut c, "{t}b", &second);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "{t}a", "{t}b"]).unwrap(), union);
}

/// PFMERGE with the destination and sources on different shards, the
/// destination one of the sources, gives the bytes a one-shard merge gives.
#[test]
fn pfmerge_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let first: Vec<Vec<u8>> = (0..200).map(|i| format!("m{i}").into_bytes()).collect();
    let second: Vec<Vec<u8>> = (100..5000).map(|i| format!("m{i}").into_bytes()).collect();
    pfadd(&mut c, &a, &first);
    pfadd(&mut c, &b, &second);
    pfadd(&mut c, "{t}a", &first);
    pfadd(&mut c, "{t}b", &second);
    // Into a new key on the other shard than a.
    assert_eq!(q::<String>(&mut c, &["PFMERGE", "dest:1", &a, &b]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["PFMERGE", "{t}dest", "{t}a", "{t}b"]).unwrap(), "OK");
    assert_eq!(get(&mut c, "dest:1"), get(&mut c, "{t}dest"));
    // Into one of the sources (sparse a absorbs dense b: a becomes dense).
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", &a]).unwrap(), "sparse");
    assert_eq!(q::<String>(&mut c, &["PFMERGE", &a, &b]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["PFMERGE", "{t}a", "{t}b"]).unwrap(), "OK");
    assert_eq!(get(&mut c, &a), get(&mut c, "{t}a"));
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", &a]).unwrap(), "dense");
    let count: i64 = q(&mut c, &["PFCOUNT", &a]).unwrap();
    assert!((4900..=5100).contains(&count), "{count}");
    // Sources that do not exist count as empty; the destination alone is fine.
    assert_eq!(q::<String>(&mut c, &["PFMERGE", &b, "nothing:1", "nothing:2"]).unwrap(), "OK");
    assert_eq!(q::<String>(&mut c, &["PFMERGE", "fresh"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "fresh"]).unwrap(), 0);
}

/// Sparse while small, dense once the sparse form would pass
/// hll-sparse-max-bytes (Redis's own promotion test, shortened).
#[test]
fn sparse_to_dense_promotion() {
    let server = Server::start(2);
    let mut c = server.client();
    for (max, key) in [(3000usize, "promote:a"), (500, "promote:b")] {
        q::<String>(&mut c, &["CONFIG", "SET", "hll-sparse-max-bytes", &max.to_string()]).unwrap();
        let mut n = 0;
        let mut last_sparse_len = 0;
        loop {
            pfadd(&mut c, key, &[format!("p{n}").into_bytes()]);
            n += 1;
            let encoding: String = q(&mut c, &["PFDEBUG", "ENCODING", key]).unwrap();
            let len: usize = q(&mut c, &["STRLEN", key]).unwrap();
            if encoding == "dense" {
                assert_eq!(len, 12304);
                break;
            }
            assert!(len <= max, "sparse HLL of {len} bytes with a limit of {max}");
            last_sparse_len = len;
        }
        assert!(last_sparse_len > max - 10, "promoted at {last_sparse_len} bytes, limit {max}");
        eprintln!("hll-sparse-max-bytes {max}: dense after {n} elements");
        assert!(n > max / 4, "promoted after only {n} elements");
    }
}

/// One million distinct elements, in three differently named sets: the
/// count is within 2% (Redis documents a standard error of 0.81%; its
/// estimator, which ringdb reproduces exactly, can pass 2% for about one
/// input in seventy).
#[test]
fn error_within_two_percent_for_a_million_elements() {
    let server = Server::start(2);
    let mut c = server.client();
    let n = 1_000_000;
    for prefix in ["user", "session:", "ip-"] {
        let key = format!("million:{prefix}");
        for start in (0..n).step_by(1000) {
            let batch: Vec<Vec<u8>> =
                (start..start + 1000).map(|i| format!("{prefix}{i}").into_bytes()).collect();
            pfadd(&mut c, &key, &batch);
        }
        let count: i64 = q(&mut c, &["PFCOUNT", &key]).unwrap();
        let error = (count - n).abs() as f64 / n as f64;
        eprintln!("{n} elements \"{prefix}N\": PFCOUNT {count}, error {:.3}%", error * 100.0);
        assert!(error < 0.02, "count {count} for {n}: error {error}");
    }
}

#[test]
fn pfdebug_and_pfselftest() {
    let server = Server::start(2);
    let mut c = server.client();
    q::<i64>(&mut c, &["PFADD", "d", "1", "2", "3"]).unwrap();
    let decoded: String = q(&mut c, &["PFDEBUG", "DECODE", "d"]).unwrap();
    assert!(decoded.starts_with('Z') || decoded.starts_with('z') || decoded.starts_with('v'));
    assert_eq!(decoded.matches("v:").count(), 3, "{decoded}");
    let registers: Vec<i64> = q(&mut c, &["PFDEBUG", "GETREG", "d"]).unwrap();
    assert_eq!(registers.len(), 16384);
    assert_eq!(registers.iter().filter(|&&r| r > 0).count(), 3);
    // GETREG made it dense.
    assert_eq!(q::<String>(&mut c, &["PFDEBUG", "ENCODING", "d"]).unwrap(), "dense");
    assert_eq!(q::<i64>(&mut c, &["PFDEBUG", "TODENSE", "d"]).unwrap(), 0);
    q::<i64>(&mut c, &["PFADD", "e", "1"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["PFDEBUG", "todense", "e"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["PFCOUNT", "d", "e"]).unwrap(), 3);
    assert_eq!(q::<String>(&mut c, &["PFSELFTEST"]).unwrap(), "OK");
}
