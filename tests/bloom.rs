//! Bloom filters against a real 2-shard server, as RedisBloom 2.x behaves:
//! sizing (hash functions, bits per item, BF.INFO Size against the
//! theoretical bits), every option and error text of BF.RESERVE and
//! BF.INSERT, RESP2 and RESP3 replies, BF.INFO fields, SCANDUMP/LOADCHUNK
//! across servers and against dumps made by RedisBloom's own code
//! (tests/data/bloom), measured false-positive rates at capacity and at 10×
//! capacity (and no false negatives), and the keyspace commands on
//! filters (TYPE, SCAN TYPE, COPY, RENAME, DEL, expiry).

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use redis::Value;

fn items(prefix: &str, range: std::ops::Range<usize>) -> Vec<String> {
    range.map(|i| format!("{prefix}{i}")).collect()
}

/// BF.MADD in batches of 1000; returns how many were reported new.
fn madd(c: &mut redis::Connection, key: &str, items: &[String]) -> usize {
    let mut added = 0;
    for chunk in items.chunks(1000) {
        let r: Vec<i64> = redis::cmd("BF.MADD").arg(key).arg(chunk).query(c).unwrap();
        added += r.iter().filter(|&&x| x == 1).count();
    }
    added
}

/// How many of `items` BF.MEXISTS reports present.
fn present(c: &mut redis::Connection, key: &str, items: &[String]) -> usize {
    let mut found = 0;
    for chunk in items.chunks(1000) {
        let r: Vec<i64> = redis::cmd("BF.MEXISTS").arg(key).arg(chunk).query(c).unwrap();
        found += r.iter().filter(|&&x| x == 1).count();
    }
    found
}

/// BF.DEBUG's line for sub-filter `i`, as `field -> value`.
fn debug_link(
    c: &mut redis::Connection,
    key: &str,
    i: usize,
) -> std::collections::HashMap<String, String> {
    let lines: Vec<String> = q(c, &["BF.DEBUG", key]).unwrap();
    lines[i + 1]
        .split(' ')
        .filter_map(|kv| kv.split_once(':'))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

fn info(c: &mut redis::Connection, key: &str, field: &str) -> i64 {
    let v: Vec<i64> = q(c, &["BF.INFO", key, field]).unwrap();
    v[0]
}

/// Hash functions and bits per item as RedisBloom computes them, and the
/// memory BF.INFO reports close to the theoretical size.
#[test]
fn sizing_and_memory() {
    let server = Server::start(2);
    let mut c = server.client();
    let ln2_sq = std::f64::consts::LN_2.powi(2);
    // (error, hashes of a non-scaling filter, of a scaling one, whose rate
    // is halved, and that rate as BF.DEBUG prints it)
    let cases = [(0.01f64, 7, 8, "0.005"), (0.001, 10, 11, "0.0005"), (0.0001, 14, 15, "5e-05")];
    for (error, hashes, scaling_hashes, scaling_ratio) in cases {
        let capacity = 100_000u64;
        let key = format!("fixed:{error}");
        let reply: String =
            q(&mut c, &["BF.RESERVE", &key, &error.to_string(), "100000", "NONSCALING"]).unwrap();
        assert_eq!(reply, "OK");
        let link = debug_link(&mut c, &key, 0);
        assert_eq!(link["hashes"], hashes.to_string(), "{error}");
        let bits: f64 = link["bits"].parse().unwrap();
        let theory = capacity as f64 * -error.ln() / ln2_sq;
        eprintln!(
            "error {error}: {:.2} bits per item (theory {:.2}), {hashes} hashes",
            bits / capacity as f64,
            theory / capacity as f64
        );
        assert!(bits >= theory && bits < theory + 64.0, "{bits} bits for {theory}");
        // Size: the bit array plus RedisBloom's 96 bytes of structs.
        let size = info(&mut c, &key, "SIZE") as f64;
        assert!(
            size >= theory / 8.0 && size <= theory / 8.0 + 104.0,
            "size {size}, theory {}",
            theory / 8.0
        );
        let scaling = format!("scaling:{error}");
        q::<String>(&mut c, &["BF.RESERVE", &scaling, &error.to_string(), "100000"]).unwrap();
        assert_eq!(debug_link(&mut c, &scaling, 0)["hashes"], scaling_hashes.to_string());
        assert_eq!(debug_link(&mut c, &scaling, 0)["ratio"], scaling_ratio);
    }
    // BF.ADD's default filter is RedisBloom's: 100 items at 1%, 240 bytes.
    assert_eq!(q::<i64>(&mut c, &["BF.ADD", "default", "x"]).unwrap(), 1);
    assert_eq!(info(&mut c, "default", "CAPACITY"), 100);
    assert_eq!(info(&mut c, "default", "SIZE"), 240);
}

#[test]
fn reserve_errors() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let cases: &[(&[&str], &str)] = &[
        (&["BF.RESERVE", "b", "abc", "100"], "-ERR bad error rate"),
        (&["BF.RESERVE", "b", "0", "100"], "-ERR (0 < error rate range < 1) "),
        (&["BF.RESERVE", "b", "1", "100"], "-ERR (0 < error rate range < 1) "),
        (&["BF.RESERVE", "b", "0.01", "x"], "-ERR bad capacity"),
        (&["BF.RESERVE", "b", "0.01", "0"], "-ERR (capacity should be larger than 0)"),
        (&["BF.RESERVE", "b", "0.01", "10", "EXPANSION"], "-ERR no expansion"),
        (&["BF.RESERVE", "b", "0.01", "10", "EXPANSION", "x"], "-ERR bad expansion"),
        (
            &["BF.RESERVE", "b", "0.01", "10", "EXPANSION", "0"],
            "-ERR expansion should be greater or equal to 1",
        ),
        (
            &["BF.RESERVE", "b", "0.01", "10", "NONSCALING", "EXPANSION", "2"],
            "-Nonscaling filters cannot expand",
        ),
        (&["BF.RESERVE", "b", "0.01"], "-ERR wrong number of arguments for 'bf.reserve' command"),
        (
            &["BF.RESERVE", "b", "0.01", "10", "a", "b", "c", "d"],
            "-ERR wrong number of arguments for 'bf.reserve' command",
        ),
        (
            &["BF.RESERVE", "b", "0.01", "1000000000000000"],
            "-ERR Insufficient memory to create filter",
        ),
        (&["BF.RESERVE", "b", "0.01", "10", "EXPANSION", "4"], "+OK"),
        (&["BF.RESERVE", "b", "0.01", "10"], "-ERR item exists"),
    ];
    for (args, want) in cases {
        assert_eq!(raw.call(args), format!("{want}\r\n"), "{args:?}");
    }
    raw.call(&["SET", "s", "x"]);
    assert_eq!(
        raw.call(&["BF.RESERVE", "s", "0.01", "10"]),
        "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
    );
    for cmd in
        [&["BF.ADD", "s", "x"][..], &["BF.EXISTS", "s", "x"], &["BF.INFO", "s"], &["BF.CARD", "s"]]
    {
        assert!(raw.call(cmd).starts_with("-WRONGTYPE"), "{cmd:?}");
    }
}

/// Adds and lookups on filters on both shards, in RESP2 and RESP3.
#[test]
fn add_exists_on_both_shards_resp2_and_resp3() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        assert_eq!(q::<i64>(&mut c, &["BF.ADD", key, "one"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["BF.ADD", key, "one"]).unwrap(), 0);
        assert_eq!(
            q::<Vec<i64>>(&mut c, &["BF.MADD", key, "two", "one", "three"]).unwrap(),
            vec![1, 0, 1]
        );
        assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", key, "two"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", key, "nine"]).unwrap(), 0);
        assert_eq!(
            q::<Vec<i64>>(&mut c, &["BF.MEXISTS", key, "one", "nine", "three"]).unwrap(),
            vec![1, 0, 1]
        );
        assert_eq!(q::<i64>(&mut c, &["BF.CARD", key]).unwrap(), 3);
    }
    assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", "missing", "x"]).unwrap(), 0);
    assert_eq!(q::<Vec<i64>>(&mut c, &["BF.MEXISTS", "missing", "x", "y"]).unwrap(), vec![0, 0]);
    assert_eq!(q::<i64>(&mut c, &["BF.CARD", "missing"]).unwrap(), 0);
    let mut raw = server.raw();
    raw.call(&["HELLO", "3"]);
    assert_eq!(raw.call(&["BF.ADD", &a, "four"]), "#t\r\n");
    assert_eq!(raw.call(&["BF.ADD", &a, "four"]), "#f\r\n");
    assert_eq!(raw.call(&["BF.EXISTS", &b, "one"]), "#t\r\n");
    assert_eq!(raw.call(&["BF.MEXISTS", &b, "one", "nine"]), "*2\r\n#t\r\n#f\r\n");
    assert_eq!(raw.call(&["BF.MADD", &b, "one", "five"]), "*2\r\n#f\r\n#t\r\n");
    assert_eq!(raw.call(&["BF.ADD"]), "-ERR wrong number of arguments for 'bf.add' command\r\n");
    assert_eq!(
        raw.call(&["BF.ADD", &a, "x", "y"]),
        "-ERR wrong number of arguments for 'bf.add' command\r\n"
    );
    assert_eq!(
        raw.call(&["BF.MEXISTS", &a]),
        "-ERR wrong number of arguments for 'bf.mexists' command\r\n"
    );
}

#[test]
fn insert_options() {
    let server = Server::start(2);
    let mut raw = server.raw();
    let mut c = server.client();
    assert_eq!(raw.call(&["BF.INSERT", "i", "NOCREATE", "ITEMS", "a"]), "-ERR not found\r\n");
    assert_eq!(
        raw.call(&[
            "BF.INSERT",
            "i",
            "CAPACITY",
            "1000",
            "ERROR",
            "0.001",
            "EXPANSION",
            "3",
            "ITEMS",
            "a",
            "b",
            "a"
        ]),
        "*3\r\n:1\r\n:1\r\n:0\r\n"
    );
    assert_eq!(info(&mut c, "i", "CAPACITY"), 1000);
    assert_eq!(info(&mut c, "i", "EXPANSION"), 3);
    let link = debug_link(&mut c, "i", 0);
    assert_eq!(link["ratio"], "0.0005");
    assert_eq!(link["hashes"], "11");
    // NOCREATE on an existing filter adds; options of an existing filter are ignored.
    assert_eq!(
        raw.call(&["BF.INSERT", "i", "NOCREATE", "CAPACITY", "5", "ITEMS", "c"]),
        "*1\r\n:1\r\n"
    );
    assert_eq!(info(&mut c, "i", "CAPACITY"), 1000);
    // NONSCALING: full after its capacity; the reply stops at the error.
    assert_eq!(
        raw.call(&["BF.INSERT", "n", "CAPACITY", "2", "NONSCALING", "ITEMS", "a", "b", "c", "d"]),
        "*3\r\n:1\r\n:1\r\n-ERR non scaling filter is full\r\n"
    );
    assert_eq!(raw.call(&["BF.ADD", "n", "e"]), "-ERR non scaling filter is full\r\n");
    assert_eq!(raw.call(&["BF.ADD", "n", "a"]), ":0\r\n");
    assert_eq!(raw.call(&["BF.INFO", "n", "EXPANSION"]), "*1\r\n$-1\r\n");
    let errors: &[(&[&str], &str)] = &[
        (&["BF.INSERT", "x", "ITEMS"], "-ERR wrong number of arguments for 'bf.insert' command"),
        (
            &["BF.INSERT", "x", "CAPACITY", "10"],
            "-ERR wrong number of arguments for 'bf.insert' command",
        ),
        (
            &["BF.INSERT", "x", "NONSCALING", "CAPACITY"],
            "-ERR wrong number of arguments for 'bf.insert' command",
        ),
        (&["BF.INSERT", "x", "BOGUS", "ITEMS", "a"], "-Unknown argument received"),
        (&["BF.INSERT", "x", "ERROR", "abc", "ITEMS", "a"], "-Bad error rate"),
        (&["BF.INSERT", "x", "EXPANSION", "abc", "ITEMS", "a"], "-Bad expansion"),
        (&["BF.INSERT", "x", "CAPACITY", "abc", "ITEMS", "a"], "-Bad capacity"),
        (&["BF.INSERT", "x", "ERROR", "1.5", "ITEMS", "a"], "-Bad argument received"),
        (&["BF.INSERT", "x", "CAPACITY", "0", "ITEMS", "a"], "-Bad argument received"),
        (&["BF.INSERT", "x", "EXPANSION", "0", "ITEMS", "a"], "-Bad argument received"),
    ];
    for (args, want) in errors {
        assert_eq!(raw.call(args), format!("{want}\r\n"), "{args:?}");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "x"]).unwrap(), 0);
}

#[test]
fn info_fields_resp2_and_resp3() {
    let server = Server::start(2);
    let mut c = server.client();
    q::<String>(&mut c, &["BF.RESERVE", "f", "0.01", "1000", "EXPANSION", "4"]).unwrap();
    madd(&mut c, "f", &items("x", 0..10));
    let all: Value = q(&mut c, &["BF.INFO", "f"]).unwrap();
    let expect = |name: &str, v: i64| vec![Value::SimpleString(name.into()), Value::Int(v)];
    let mut want = Vec::new();
    want.extend(expect("Capacity", 1000));
    want.extend(expect("Size", 32 + 64 + 1384));
    want.extend(expect("Number of filters", 1));
    want.extend(expect("Number of items inserted", 10));
    want.extend(expect("Expansion rate", 4));
    assert_eq!(all, Value::Array(want));
    for (field, v) in
        [("capacity", 1000), ("Size", 1480), ("FILTERS", 1), ("items", 10), ("expansion", 4)]
    {
        assert_eq!(info(&mut c, "f", field), v, "{field}");
    }
    let mut raw: Raw = server.raw();
    assert_eq!(raw.call(&["BF.INFO", "f", "bogus"]), "-Invalid information value\r\n");
    assert_eq!(raw.call(&["BF.INFO", "missing"]), "-ERR not found\r\n");
    assert_eq!(
        raw.call(&["BF.INFO", "f", "a", "b"]),
        "-ERR wrong number of arguments for 'bf.info' command\r\n"
    );
    raw.call(&["HELLO", "3"]);
    assert_eq!(raw.call(&["BF.INFO", "f", "items"]), "%1\r\n+Number of items inserted\r\n:10\r\n");
    assert_eq!(
        raw.call(&["BF.INFO", "f"]),
        "%5\r\n+Capacity\r\n:1000\r\n+Size\r\n:1480\r\n+Number of filters\r\n:1\r\n\
         +Number of items inserted\r\n:10\r\n+Expansion rate\r\n:4\r\n"
    );
}

/// A filter dumped with SCANDUMP from one server and loaded with LOADCHUNK
/// into another (on the other shard there) answers the same.
#[test]
fn scandump_loadchunk_across_servers() {
    let first = Server::start(2);
    let second = Server::start(2);
    let mut c1 = first.client();
    let mut c2 = second.client();
    let (a, b) = keys_on_two_shards();
    q::<String>(&mut c1, &["BF.RESERVE", &a, "0.01", "500", "EXPANSION", "2"]).unwrap();
    let added = items("member", 0..3000);
    madd(&mut c1, &a, &added);
    assert!(info(&mut c1, &a, "FILTERS") >= 3);
    let mut iter = 0i64;
    let mut chunks = 0;
    loop {
        let (next, data): (i64, Vec<u8>) =
            redis::cmd("BF.SCANDUMP").arg(&a).arg(iter).query(&mut c1).unwrap();
        if next == 0 {
            assert!(data.is_empty());
            break;
        }
        let ok: String =
            redis::cmd("BF.LOADCHUNK").arg(&b).arg(next).arg(&data).query(&mut c2).unwrap();
        assert_eq!(ok, "OK");
        iter = next;
        chunks += 1;
    }
    assert!(chunks >= 2, "header and data");
    let original: Value = q(&mut c1, &["BF.INFO", &a]).unwrap();
    let copy: Value = q(&mut c2, &["BF.INFO", &b]).unwrap();
    assert_eq!(original, copy);
    assert_eq!(present(&mut c2, &b, &added), added.len(), "false negatives after load");
    let others = items("other", 0..5000);
    assert_eq!(present(&mut c1, &a, &others), present(&mut c2, &b, &others));
    // Errors.
    let mut raw = second.raw();
    assert_eq!(raw.call(&["BF.LOADCHUNK", "new", "1", "garbage"]), "-ERR received bad data\r\n");
    assert_eq!(raw.call(&["BF.LOADCHUNK", "new", "5", "x"]), "-ERR not found\r\n");
    assert_eq!(
        raw.call(&["BF.LOADCHUNK", &b, "x", "x"]),
        "-ERR Second argument must be numeric\r\n"
    );
    assert_eq!(raw.call(&["BF.LOADCHUNK", &b, "0", "x"]), "-ERR received bad data\r\n");
    assert_eq!(
        raw.call(&["BF.LOADCHUNK", &b, "1000000000", "x"]),
        "-ERR invalid offset - no link found\r\n"
    );
    assert_eq!(raw.call(&["BF.SCANDUMP", &b, "x"]), "-Second argument must be numeric\r\n");
    assert_eq!(raw.call(&["BF.SCANDUMP", "missing", "0"]), "-ERR not found\r\n");
    assert_eq!(raw.call(&["BF.SCANDUMP", &b, "-5"]), "*2\r\n:0\r\n$0\r\n\r\n");
}

fn unhex(hex: &str) -> Vec<u8> {
    (0..hex.len()).step_by(2).map(|i| u8::from_str_radix(&hex[i..i + 2], 16).unwrap()).collect()
}

/// RedisBloom's own dumps (tests/data/bloom/expected.txt, made by its C
/// code): ringdb's BF.RESERVE + BF.MADD dump the same bytes, and RedisBloom's
/// dumps load with BF.LOADCHUNK and answer the same, for every chain ringdb
/// can hold (64- and 32-bit hashing, exact and power-of-two sizes).
#[test]
fn dumps_are_redisbloom_dumps() {
    let server = Server::start(2);
    let mut c = server.client();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/bloom/expected.txt");
    let data = std::fs::read_to_string(path).expect("tests/data/bloom/expected.txt");
    let probes = items("probe:", 0..1000);
    let mut compared = 0;
    for (n, line) in data.lines().filter(|l| !l.starts_with('#')).enumerate() {
        let f: Vec<&str> = line.split(' ').collect();
        let (options, count): (u32, usize) = (f[3].parse().unwrap(), f[5].parse().unwrap());
        let (header, bits) = (unhex(f[7]), unhex(f[8]));
        // Load RedisBloom's dump: the header, then each sub-filter's bits.
        let key = format!("loaded:{n}");
        let ok: String =
            redis::cmd("BF.LOADCHUNK").arg(&key).arg(1).arg(&header).query(&mut c).unwrap();
        assert_eq!(ok, "OK");
        let links = (header.len() - 20) / 53;
        let mut at = 0usize;
        for i in 0..links {
            let len =
                u64::from_le_bytes(header[20 + 53 * i..28 + 53 * i].try_into().unwrap()) as usize;
            at += len;
            let chunk = &bits[at - len..at];
            let ok: String =
                redis::cmd("BF.LOADCHUNK").arg(&key).arg(1 + at).arg(chunk).query(&mut c).unwrap();
            assert_eq!(ok, "OK");
        }
        let answers: Vec<i64> =
            redis::cmd("BF.MEXISTS").arg(&key).arg(&probes).query(&mut c).unwrap();
        let answers: String = answers.iter().map(|a| a.to_string()).collect();
        assert_eq!(answers, f[9], "probes of RedisBloom's dump {n}");
        // No false negatives: every item RedisBloom took (a full non-scaling
        // filter refused some: '2').
        let taken: Vec<String> = f[6]
            .chars()
            .enumerate()
            .filter(|(_, r)| *r != '2')
            .map(|(i, _)| format!("item:{i}"))
            .collect();
        assert_eq!(present(&mut c, &key, &taken), taken.len());
        // What BF.RESERVE makes (64-bit hashes, exact sizes), ringdb dumps
        // exactly as RedisBloom does.
        if options & 1 != 0 && options & 4 != 0 {
            let made = format!("made:{n}");
            let mut reserve = vec!["BF.RESERVE", &made, f[2], f[1]];
            let growth = f[4].to_string();
            if options & 8 != 0 {
                reserve.push("NONSCALING");
            } else {
                reserve.extend(["EXPANSION", &growth]);
            }
            q::<String>(&mut c, &reserve).unwrap();
            for item in items("item:", 0..count) {
                // A full non-scaling filter refuses the rest, as RedisBloom did.
                let _ = q::<i64>(&mut c, &["BF.ADD", &made, &item]);
            }
            let (next, dumped): (i64, Vec<u8>) =
                redis::cmd("BF.SCANDUMP").arg(&made).arg(0).query(&mut c).unwrap();
            assert_eq!((next, dumped), (1, header.clone()), "header of {made}");
            let mut all = Vec::new();
            let mut iter = 1;
            loop {
                let (next, chunk): (i64, Vec<u8>) =
                    redis::cmd("BF.SCANDUMP").arg(&made).arg(iter).query(&mut c).unwrap();
                if next == 0 {
                    break;
                }
                all.extend(chunk);
                iter = next;
            }
            assert_eq!(all, bits, "bits of {made}");
            compared += 1;
        }
    }
    assert_eq!(compared, 4);
}

/// Measured false-positive rates over 100k items never added: at capacity,
/// and after 10× capacity in a scaling filter; no false negatives.
#[test]
fn false_positive_rates_are_within_the_error_rate() {
    let server = Server::start(2);
    let mut c = server.client();
    let never_added = items("absent:", 0..100_000);
    for error in [0.01, 0.001] {
        let capacity = 20_000;
        let rate = error.to_string();
        let (fixed, scaling) = (format!("fixed:{rate}"), format!("scaling:{rate}"));
        q::<String>(&mut c, &["BF.RESERVE", &fixed, &rate, &capacity.to_string(), "NONSCALING"])
            .unwrap();
        q::<String>(&mut c, &["BF.RESERVE", &scaling, &rate, &capacity.to_string()]).unwrap();
        let full = items("in:", 0..capacity);
        let added = madd(&mut c, &fixed, &full);
        // Items may collide with earlier ones while the filter fills, at a
        // rate below the final one.
        assert!(added as f64 >= capacity as f64 * (1.0 - error), "only {added} reported new");
        assert_eq!(present(&mut c, &fixed, &full), capacity, "false negatives");
        let fp = present(&mut c, &fixed, &never_added) as f64 / never_added.len() as f64;
        // Three standard deviations of a 100k-sample measure of `error`.
        let margin = 3.0 * (error * (1.0 - error) / never_added.len() as f64).sqrt();
        eprintln!(
            "non-scaling {error}: false positives {:.4}% at capacity (limit {:.4}%)",
            fp * 100.0,
            (error + margin) * 100.0
        );
        assert!(fp <= error + margin, "false-positive rate {fp} for {error}");

        let ten_times = items("in:", 0..capacity * 10);
        madd(&mut c, &scaling, &ten_times);
        assert_eq!(present(&mut c, &scaling, &ten_times), ten_times.len(), "false negatives");
        let fp = present(&mut c, &scaling, &never_added) as f64 / never_added.len() as f64;
        let filters = info(&mut c, &scaling, "FILTERS");
        let size = info(&mut c, &scaling, "SIZE");
        eprintln!(
            "scaling {error}: false positives {:.4}% after 10x capacity ({filters} filters, {size} bytes)",
            fp * 100.0
        );
        assert!(fp <= error + margin, "false-positive rate {fp} for {error} after 10x capacity");
        assert!(filters >= 4, "{filters} filters");
    }
}

/// Filters under the keyspace commands: TYPE, SCAN TYPE, OBJECT ENCODING,
/// COPY and RENAME across shards, DEL, expiry.
#[test]
fn keyspace_commands_on_filters() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    madd(&mut c, &a, &items("k", 0..50));
    assert_eq!(q::<String>(&mut c, &["TYPE", &a]).unwrap(), "MBbloom--");
    assert_eq!(q::<String>(&mut c, &["OBJECT", "ENCODING", &a]).unwrap(), "raw");
    q::<String>(&mut c, &["SET", "plain", "x"]).unwrap();
    let (_, found): (String, Vec<String>) =
        q(&mut c, &["SCAN", "0", "TYPE", "MBbloom--", "COUNT", "1000"]).unwrap();
    assert_eq!(found, vec![a.clone()]);
    // COPY to the other shard: an independent copy.
    assert_eq!(q::<i64>(&mut c, &["COPY", &a, &b]).unwrap(), 1);
    q::<i64>(&mut c, &["BF.ADD", &b, "only in b"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", &a, "only in b"]).unwrap(), 0);
    assert_eq!(
        q::<i64>(&mut c, &["BF.CARD", &a]).unwrap() + 1,
        q::<i64>(&mut c, &["BF.CARD", &b]).unwrap()
    );
    // RENAME across shards keeps the filter.
    assert_eq!(q::<String>(&mut c, &["RENAME", &b, "renamed"]).unwrap(), "OK");
    assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", "renamed", "only in b"]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &b]).unwrap(), 0);
    // Expiry and DEL.
    q::<i64>(&mut c, &["PEXPIRE", "renamed", "20"]).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_eq!(q::<i64>(&mut c, &["BF.EXISTS", "renamed", "k1"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["DEL", &a]).unwrap(), 1);
    assert_eq!(q::<i64>(&mut c, &["BF.CARD", &a]).unwrap(), 0);
}

/// bf-error-rate and bf-initial-size set the filters BF.ADD creates.
#[test]
fn default_filter_settings() {
    let server = Server::start_with(&["--shards", "2", "--bf-initial-size", "5000"]);
    let mut c = server.client();
    assert_eq!(q::<String>(&mut c, &["CONFIG", "SET", "bf-error-rate", "0.001"]).unwrap(), "OK");
    let got: Vec<String> = q(&mut c, &["CONFIG", "GET", "bf-*"]).unwrap();
    assert_eq!(got, vec!["bf-error-rate", "0.001", "bf-initial-size", "5000"]);
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<i64>(&mut c, &["BF.ADD", key, "x"]).unwrap();
        assert_eq!(info(&mut c, key, "CAPACITY"), 5000);
        assert_eq!(debug_link(&mut c, key, 0)["ratio"], "0.0005");
    }
    let err = q::<String>(&mut c, &["CONFIG", "SET", "bf-error-rate", "1"]).unwrap_err();
    assert!(err.to_string().contains("bf-error-rate"), "{err}");
    let err = q::<String>(&mut c, &["CONFIG", "SET", "bf-initial-size", "0"]).unwrap_err();
    assert!(err.to_string().contains("bf-initial-size"), "{err}");
}
