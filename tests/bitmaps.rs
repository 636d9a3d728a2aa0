//! Bitmaps against a real 2-shard server: SETBIT, GETBIT, BITCOUNT, BITPOS,
//! BITOP (including keys on both shards), BITFIELD and BITFIELD_RO with every
//! option, overflow mode and error text.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use redis::Connection;

/// Checks that a command fails with exactly `text` (raw socket, so the
/// error code is seen as the client gets it).
fn assert_err(r: &mut Raw, args: &[&str], text: &str) {
    assert_eq!(r.call(args), format!("-{text}\r\n"), "{args:?}");
}

const BAD_OFFSET: &str = "ERR bit offset is not an integer or out of range";
const BAD_TYPE: &str = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is.";

#[test]
fn setbit_getbit_on_both_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        assert_eq!(q::<i64>(&mut c, &["SETBIT", key, "1", "1"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["SETBIT", key, "7", "1"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["SETBIT", key, "7", "1"]).unwrap(), 1, "returns the old bit");
        assert_eq!(q::<String>(&mut c, &["GET", key]).unwrap(), "A");
        assert_eq!(q::<i64>(&mut c, &["GETBIT", key, "1"]).unwrap(), 1);
        assert_eq!(q::<i64>(&mut c, &["GETBIT", key, "2"]).unwrap(), 0);
        assert_eq!(q::<i64>(&mut c, &["GETBIT", key, "1000"]).unwrap(), 0, "past the end");
        // Growing pads with zero bytes.
        assert_eq!(q::<i64>(&mut c, &["SETBIT", key, "23", "0"]).unwrap(), 0);
        assert_eq!(q::<Vec<u8>>(&mut c, &["GET", key]).unwrap(), b"A\0\0");
        assert_eq!(q::<i64>(&mut c, &["SETBIT", key, "1", "0"]).unwrap(), 1);
        assert_eq!(q::<Vec<u8>>(&mut c, &["GET", key]).unwrap(), b"\x01\0\0");
    }
    assert_eq!(q::<i64>(&mut c, &["GETBIT", "missing", "5"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "missing"]).unwrap(), 0);
    // An integer-encoded string is read as its digits: "12" = 0x31 0x32.
    q::<()>(&mut c, &["SET", "n", "12"]).unwrap();
    let bits: Vec<i64> =
        (0..16).map(|i| q(&mut c, &["GETBIT", "n", &i.to_string()]).unwrap()).collect();
    assert_eq!(bits, [0, 0, 1, 1, 0, 0, 0, 1, 0, 0, 1, 1, 0, 0, 1, 0]);
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "n", "6", "1"]).unwrap(), 0);
    assert_eq!(q::<String>(&mut c, &["GET", "n"]).unwrap(), "32");
}

#[test]
fn setbit_getbit_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut r = server.raw();
    for offset in ["-1", "x", "1.5", "4294967296", "#1", "99999999999999999999"] {
        assert_err(&mut r, &["SETBIT", "k", offset, "1"], BAD_OFFSET);
        assert_err(&mut r, &["GETBIT", "k", offset], BAD_OFFSET);
    }
    for bit in ["2", "-1", "a", "", "10"] {
        assert_err(&mut r, &["SETBIT", "k", "1", bit], "ERR bit is not an integer or out of range");
    }
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]).unwrap(), 0, "failed SETBITs create nothing");
    assert_err(
        &mut r,
        &["SETBIT", "k", "1"],
        "ERR wrong number of arguments for \'setbit\' command",
    );
    assert_err(&mut r, &["GETBIT", "k"], "ERR wrong number of arguments for \'getbit\' command");
}

#[test]
fn offsets_are_bounded_by_proto_max_bulk_len() {
    let server = Server::start_with(&["--shards", "2", "--proto-max-bulk-len", "1mb"]);
    let mut c = server.client();
    let mut r = server.raw();
    let last = (1024 * 1024 * 8 - 1).to_string();
    assert_eq!(q::<i64>(&mut c, &["SETBIT", "big", &last, "1"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["STRLEN", "big"]).unwrap(), 1024 * 1024);
    assert_err(&mut r, &["SETBIT", "big", "8388608", "1"], BAD_OFFSET);
    assert_err(&mut r, &["GETBIT", "big", "8388608"], BAD_OFFSET);
    assert_eq!(q::<Vec<i64>>(&mut c, &["BITFIELD", "big", "GET", "u8", "#1048575"]).unwrap(), [1]);
    assert_err(&mut r, &["BITFIELD", "big", "GET", "u8", "#1048576"], BAD_OFFSET);
    assert_err(&mut r, &["BITFIELD", "big", "SET", "u1", "8388608", "1"], BAD_OFFSET);
    assert_err(&mut r, &["BITFIELD", "big", "GET", "i64", "#9223372036854775807"], BAD_OFFSET);
}

#[test]
fn bitcount_every_form() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut r = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<()>(&mut c, &["SET", key, "foobar"]).unwrap();
        let count = |c: &mut Connection, extra: &[&str]| -> i64 {
            let mut args = vec!["BITCOUNT", key.as_str()];
            args.extend_from_slice(extra);
            q(c, &args).unwrap()
        };
        assert_eq!(count(&mut c, &[]), 26);
        assert_eq!(count(&mut c, &["0", "0"]), 4);
        assert_eq!(count(&mut c, &["1", "1"]), 6);
        assert_eq!(count(&mut c, &["1", "1", "BYTE"]), 6);
        assert_eq!(count(&mut c, &["5", "30", "BIT"]), 17);
        assert_eq!(count(&mut c, &["5", "30", "bit"]), 17);
        assert_eq!(count(&mut c, &["-2", "-1"]), 7);
        assert_eq!(count(&mut c, &["-100", "100"]), 26);
        assert_eq!(count(&mut c, &["3", "1"]), 0);
        assert_eq!(count(&mut c, &["-1", "-2"]), 0);
        assert_eq!(count(&mut c, &["-1", "-2", "NOTAUNIT"]), 0, "answered before the unit is read");
        assert_eq!(count(&mut c, &["0", "-1", "BIT"]), 26);
        assert_eq!(count(&mut c, &["-8", "-1", "BIT"]), 4);
    }
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "missing"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "missing", "x", "y", "z", "w"]).unwrap(), 0);
    q::<()>(&mut c, &["SET", "n", "-1"]).unwrap();
    // "-1" is 0x2d 0x31: 4 + 3 bits.
    assert_eq!(q::<i64>(&mut c, &["BITCOUNT", "n"]).unwrap(), 7);
    q::<()>(&mut c, &["SET", "s", "foobar"]).unwrap();
    assert_err(&mut r, &["BITCOUNT", "s", "0"], "ERR syntax error");
    assert_err(&mut r, &["BITCOUNT", "s", "0", "1", "BIT", "x"], "ERR syntax error");
    assert_err(&mut r, &["BITCOUNT", "s", "0", "1", "bits"], "ERR syntax error");
    assert_err(&mut r, &["BITCOUNT", "s", "a", "1"], "ERR value is not an integer or out of range");
    assert_err(
        &mut r,
        &["BITCOUNT", "s", "0", "1.5"],
        "ERR value is not an integer or out of range",
    );
    assert_err(&mut r, &["BITCOUNT"], "ERR wrong number of arguments for \'bitcount\' command");
}

#[test]
fn bitpos_every_form() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut r = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        let k = key.as_str();
        let pos = |c: &mut Connection, args: &[&str]| -> i64 {
            let mut all = vec!["BITPOS", k];
            all.extend_from_slice(args);
            q(c, &all).unwrap()
        };
        redis::cmd("SET").arg(k).arg(&b"\xff\xf0\x00"[..]).query::<()>(&mut c).unwrap();
        assert_eq!(pos(&mut c, &["0"]), 12);
        assert_eq!(pos(&mut c, &["1"]), 0);
        assert_eq!(pos(&mut c, &["0", "2"]), 16);
        assert_eq!(pos(&mut c, &["1", "1"]), 8);
        assert_eq!(pos(&mut c, &["1", "2"]), -1);
        assert_eq!(pos(&mut c, &["1", "-1"]), -1);
        assert_eq!(pos(&mut c, &["0", "0", "0"]), -1, "an explicit end: no 0 inside it");
        assert_eq!(pos(&mut c, &["0", "1", "-1"]), 12);
        assert_eq!(pos(&mut c, &["1", "7", "15", "BIT"]), 7);
        assert_eq!(pos(&mut c, &["0", "7", "15", "bit"]), 12);
        assert_eq!(pos(&mut c, &["0", "0", "11", "BIT"]), -1);
        assert_eq!(pos(&mut c, &["1", "1", "1", "BYTE"]), 8);
        assert_eq!(pos(&mut c, &["1", "2", "1"]), -1, "empty range");
        // Without an end, the string continues with zero bits.
        redis::cmd("SET").arg(k).arg(&b"\xff\xff"[..]).query::<()>(&mut c).unwrap();
        assert_eq!(pos(&mut c, &["0"]), 16);
        assert_eq!(pos(&mut c, &["0", "0"]), 16);
        assert_eq!(pos(&mut c, &["0", "3", "-1", "BIT"]), -1);
        assert_eq!(pos(&mut c, &["0", "0", "-1"]), -1);
    }
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "missing", "0"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "missing", "1"]).unwrap(), -1);
    q::<()>(&mut c, &["SET", "empty", ""]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["BITPOS", "empty", "0"]).unwrap(), -1);
    q::<()>(&mut c, &["SET", "s", "abc"]).unwrap();
    for bit in ["2", "-1"] {
        assert_err(&mut r, &["BITPOS", "s", bit], "ERR The bit argument must be 1 or 0.");
        assert_err(&mut r, &["BITPOS", "missing", bit], "ERR The bit argument must be 1 or 0.");
    }
    assert_err(&mut r, &["BITPOS", "s", "x"], "ERR value is not an integer or out of range");
    assert_err(&mut r, &["BITPOS", "s", "1", "a"], "ERR value is not an integer or out of range");
    assert_err(
        &mut r,
        &["BITPOS", "s", "1", "0", "b"],
        "ERR value is not an integer or out of range",
    );
    assert_err(&mut r, &["BITPOS", "s", "1", "0", "1", "BITS"], "ERR syntax error");
    assert_err(&mut r, &["BITPOS", "s", "1", "0", "1", "BIT", "x"], "ERR syntax error");
    assert_err(&mut r, &["BITPOS", "s"], "ERR wrong number of arguments for \'bitpos\' command");
}

#[test]
fn bitop_operations_and_padding() {
    let server = Server::start(2);
    let mut c = server.client();
    let set = |c: &mut Connection, k: &str, v: &[u8]| {
        redis::cmd("SET").arg(k).arg(v).query::<()>(c).unwrap()
    };
    let get = |c: &mut Connection, k: &str| q::<Vec<u8>>(c, &["GET", k]).unwrap();
    set(&mut c, "{t}a", b"\x0f\xf0\xaa");
    set(&mut c, "{t}b", b"\xff\x0f");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "AND", "{t}d", "{t}a", "{t}b"]).unwrap(), 3);
    assert_eq!(get(&mut c, "{t}d"), b"\x0f\x00\x00");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "or", "{t}d", "{t}a", "{t}b"]).unwrap(), 3);
    assert_eq!(get(&mut c, "{t}d"), b"\xff\xff\xaa");
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "Xor", "{t}d", "{t}a", "{t}b", "{t}missing"]).unwrap(),
        3
    );
    assert_eq!(get(&mut c, "{t}d"), b"\xf0\xff\xaa");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "{t}d", "{t}b"]).unwrap(), 2);
    assert_eq!(get(&mut c, "{t}d"), b"\x00\xf0");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "AND", "{t}d", "{t}a", "{t}missing"]).unwrap(), 3);
    assert_eq!(get(&mut c, "{t}d"), b"\x00\x00\x00");
    // The destination may be a source.
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "{t}a", "{t}a"]).unwrap(), 3);
    assert_eq!(get(&mut c, "{t}a"), b"\xf0\x0f\x55");
    // An integer-encoded source is its digits.
    set(&mut c, "{t}n", b"12");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "{t}d", "{t}n"]).unwrap(), 2);
    assert_eq!(get(&mut c, "{t}d"), b"\xce\xcd");
    // An empty result deletes the destination.
    assert_eq!(q::<i64>(&mut c, &["BITOP", "OR", "{t}d", "{t}none1", "{t}none2"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "{t}d"]).unwrap(), 0);
    set(&mut c, "{t}empty", b"");
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", "{t}d", "{t}empty"]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "{t}d"]).unwrap(), 0);
}

#[test]
fn bitop_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut r = server.raw();
    q::<()>(&mut c, &["SET", "{t}a", "x"]).unwrap();
    assert_err(
        &mut r,
        &["BITOP", "NOT", "{t}d", "{t}a", "{t}a"],
        "ERR BITOP NOT must be called with a single source key.",
    );
    assert_err(&mut r, &["BITOP", "NAND", "{t}d", "{t}a"], "ERR syntax error");
    assert_err(&mut r, &["BITOP", "", "{t}d", "{t}a"], "ERR syntax error");
    assert_err(
        &mut r,
        &["BITOP", "AND", "{t}d"],
        "ERR wrong number of arguments for \'bitop\' command",
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "{t}d"]).unwrap(), 0);
}

#[test]
fn bitop_across_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    let (a2, b2) = (format!("{a}:dest"), format!("{b}:dest"));
    redis::cmd("SET").arg(&a).arg(&b"\x0f\xf0\xaa"[..]).query::<()>(&mut c).unwrap();
    redis::cmd("SET").arg(&b).arg(&b"\xff\x0f"[..]).query::<()>(&mut c).unwrap();
    for dest in [&a2, &b2, &a, &b] {
        assert_eq!(q::<i64>(&mut c, &["BITOP", "XOR", "scratch", &a, &b]).unwrap(), 3);
        assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "scratch"]).unwrap(), b"\xf0\xff\xaa");
        assert_eq!(q::<i64>(&mut c, &["BITOP", "OR", dest, &b, &a]).unwrap(), 3);
        assert_eq!(q::<Vec<u8>>(&mut c, &["GET", dest]).unwrap(), b"\xff\xff\xaa");
        // Put the sources back for the next round.
        redis::cmd("SET").arg(&a).arg(&b"\x0f\xf0\xaa"[..]).query::<()>(&mut c).unwrap();
        redis::cmd("SET").arg(&b).arg(&b"\xff\x0f"[..]).query::<()>(&mut c).unwrap();
    }
    // An empty result deletes a destination on the other shard.
    assert_eq!(
        q::<i64>(&mut c, &["BITOP", "AND", &b2, &format!("{a}:none"), "nothing"]).unwrap(),
        0
    );
    assert_eq!(q::<i64>(&mut c, &["EXISTS", &b2]).unwrap(), 0);
    assert_eq!(q::<i64>(&mut c, &["BITOP", "NOT", &a2, &b]).unwrap(), 2);
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", &a2]).unwrap(), b"\x00\xf0");
}

#[test]
fn bitfield_get_set_incrby() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        let k = key.as_str();
        let r: Vec<i64> = q(
            &mut c,
            &["BITFIELD", k, "SET", "u8", "0", "255", "GET", "u8", "0", "GET", "i8", "0"],
        )
        .unwrap();
        assert_eq!(r, [0, 255, -1]);
        let r: Vec<i64> =
            q(&mut c, &["BITFIELD", k, "INCRBY", "u2", "100", "1", "GET", "u4", "0"]).unwrap();
        assert_eq!(r, [1, 15]);
        assert_eq!(q::<i64>(&mut c, &["STRLEN", k]).unwrap(), 13, "grew to hold bit 101");
        // Redis's documented example: u5 = 23 at offset 7.
        q::<()>(&mut c, &["DEL", k]).unwrap();
        let r: Vec<i64> =
            q(&mut c, &["BITFIELD", k, "SET", "u5", "7", "23", "GET", "u5", "7", "GET", "i5", "7"])
                .unwrap();
        assert_eq!(r, [0, 23, -9]);
        assert_eq!(q::<Vec<u8>>(&mut c, &["GET", k]).unwrap(), [0b0000_0001, 0b0111_0000]);
        // `#n` offsets count fields of the type's width.
        let r: Vec<i64> = q(
            &mut c,
            &[
                "BITFIELD", k, "SET", "i8", "#0", "100", "SET", "i8", "#1", "-100", "GET", "i8",
                "#1", "GET", "u16", "#0",
            ],
        )
        .unwrap();
        assert_eq!(r, [1, 112, -100, (100 << 8) | 156]);
        // Subcommands and types are case-insensitive where Redis allows.
        let r: Vec<i64> =
            q(&mut c, &["bitfield", k, "get", "i8", "#1", "incrby", "i8", "#1", "-1"]).unwrap();
        assert_eq!(r, [-100, -101]);
    }
    // Extremes: i64 and u63.
    let r: Vec<i64> = q(
        &mut c,
        &[
            "BITFIELD",
            "x",
            "SET",
            "i64",
            "3",
            "-9223372036854775808",
            "GET",
            "i64",
            "3",
            "SET",
            "u63",
            "3",
            "9223372036854775807",
            "GET",
            "u63",
            "3",
        ],
    )
    .unwrap();
    assert_eq!(r, [0, i64::MIN, 4611686018427387904, i64::MAX]);
    // GET on a missing key reads zeros and does not create it.
    let r: Vec<i64> =
        q(&mut c, &["BITFIELD", "missing", "GET", "u8", "0", "GET", "i64", "100"]).unwrap();
    assert_eq!(r, [0, 0]);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "missing"]).unwrap(), 0);
    // No operations: an empty array.
    assert_eq!(q::<Vec<i64>>(&mut c, &["BITFIELD", "missing"]).unwrap(), Vec::<i64>::new());
    // An integer-encoded string is read as its digits ("1" = 0x31).
    q::<()>(&mut c, &["SET", "n", "1"]).unwrap();
    assert_eq!(q::<Vec<i64>>(&mut c, &["BITFIELD", "n", "GET", "u8", "0"]).unwrap(), [0x31]);
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["BITFIELD", "n", "INCRBY", "u8", "0", "1"]).unwrap(),
        [0x32]
    );
    assert_eq!(q::<String>(&mut c, &["GET", "n"]).unwrap(), "2");
}

#[test]
fn bitfield_overflow_modes() {
    let server = Server::start(2);
    let mut c = server.client();
    let bf = |c: &mut Connection, args: &[&str]| -> Vec<Option<i64>> {
        let mut all = vec!["BITFIELD", "f"];
        all.extend_from_slice(args);
        q(c, &all).unwrap()
    };
    // WRAP is the default.
    assert_eq!(
        bf(&mut c, &["SET", "u8", "0", "250", "INCRBY", "u8", "0", "10"]),
        [Some(0), Some(4)]
    );
    assert_eq!(bf(&mut c, &["OVERFLOW", "WRAP", "INCRBY", "u8", "0", "-5"]), [Some(255)]);
    assert_eq!(
        bf(&mut c, &["SET", "i8", "0", "120", "INCRBY", "i8", "0", "10"]),
        [Some(-1), Some(-126)]
    );
    assert_eq!(bf(&mut c, &["INCRBY", "i8", "0", "-3"]), [Some(127)]);
    assert_eq!(bf(&mut c, &["SET", "i8", "0", "300"]), [Some(127)]);
    assert_eq!(bf(&mut c, &["GET", "i8", "0"]), [Some(44)]);
    // SAT clamps.
    assert_eq!(
        bf(&mut c, &["OVERFLOW", "SAT", "SET", "u8", "0", "250", "INCRBY", "u8", "0", "10"]),
        [Some(44), Some(255)]
    );
    assert_eq!(bf(&mut c, &["OVERFLOW", "sat", "INCRBY", "u8", "0", "-1000"]), [Some(0)]);
    assert_eq!(
        bf(&mut c, &["OVERFLOW", "SAT", "SET", "i8", "0", "1000", "GET", "i8", "0"]),
        [Some(0), Some(127)]
    );
    assert_eq!(bf(&mut c, &["OVERFLOW", "SAT", "INCRBY", "i8", "0", "-1000"]), [Some(-128)]);
    assert_eq!(
        bf(&mut c, &["OVERFLOW", "SAT", "SET", "u8", "0", "-1", "GET", "u8", "0"]),
        [Some(128), Some(255)]
    );
    // FAIL refuses and replies null, leaving the value alone.
    assert_eq!(
        bf(&mut c, &["OVERFLOW", "FAIL", "INCRBY", "u8", "0", "1", "GET", "u8", "0"]),
        [None, Some(255)]
    );
    assert_eq!(
        bf(&mut c, &["OVERFLOW", "FAIL", "SET", "i8", "0", "128", "SET", "i8", "0", "127"]),
        [None, Some(-1)]
    );
    assert_eq!(
        bf(&mut c, &["OVERFLOW", "fail", "INCRBY", "i8", "0", "1", "INCRBY", "i8", "0", "-1"]),
        [None, Some(126)]
    );
    // The mode applies to the operations after it, until the next OVERFLOW.
    let r = bf(
        &mut c,
        &[
            "SET", "u4", "100", "15", "OVERFLOW", "FAIL", "INCRBY", "u4", "100", "1", "OVERFLOW",
            "SAT", "INCRBY", "u4", "100", "1", "OVERFLOW", "WRAP", "INCRBY", "u4", "100", "1",
        ],
    );
    assert_eq!(r, [Some(0), None, Some(15), Some(0)]);
    // 64-bit signed overflow and 63-bit unsigned.
    let r = bf(
        &mut c,
        &[
            "SET",
            "i64",
            "200",
            "9223372036854775807",
            "INCRBY",
            "i64",
            "200",
            "1",
            "OVERFLOW",
            "SAT",
            "INCRBY",
            "i64",
            "200",
            "-1",
            "OVERFLOW",
            "FAIL",
            "INCRBY",
            "i64",
            "200",
            "-1",
        ],
    );
    assert_eq!(r, [Some(0), Some(i64::MIN), Some(i64::MIN), None]);
    let r = bf(
        &mut c,
        &[
            "SET",
            "u63",
            "300",
            "9223372036854775807",
            "INCRBY",
            "u63",
            "300",
            "1",
            "OVERFLOW",
            "SAT",
            "INCRBY",
            "u63",
            "300",
            "-1",
        ],
    );
    assert_eq!(r, [Some(0), Some(0), Some(0)]);
    // A new key whose only write is refused still exists afterwards, as in Redis.
    assert_eq!(
        q::<Vec<Option<i64>>>(
            &mut c,
            &["BITFIELD", "new", "OVERFLOW", "FAIL", "INCRBY", "u2", "0", "9"]
        )
        .unwrap(),
        [None]
    );
    assert_eq!(q::<Vec<u8>>(&mut c, &["GET", "new"]).unwrap(), b"\0");
}

#[test]
fn bitfield_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut r = server.raw();
    for ty in ["u64", "i65", "i0", "u0", "x8", "U8", "i", "", "i08", "u-1"] {
        assert_err(&mut r, &["BITFIELD", "k", "GET", ty, "0"], BAD_TYPE);
        assert_err(&mut r, &["BITFIELD", "k", "SET", ty, "0", "1"], BAD_TYPE);
    }
    for offset in ["-1", "x", "#-1", "#x", "4294967296", "##1"] {
        assert_err(&mut r, &["BITFIELD", "k", "GET", "u8", offset], BAD_OFFSET);
    }
    assert_err(
        &mut r,
        &["BITFIELD", "k", "OVERFLOW", "MAYBE", "GET", "u8", "0"],
        "ERR Invalid OVERFLOW type specified",
    );
    assert_err(&mut r, &["BITFIELD", "k", "GET", "u8"], "ERR syntax error");
    assert_err(&mut r, &["BITFIELD", "k", "SET", "u8", "0"], "ERR syntax error");
    assert_err(&mut r, &["BITFIELD", "k", "INCRBY", "u8", "0"], "ERR syntax error");
    assert_err(&mut r, &["BITFIELD", "k", "OVERFLOW"], "ERR syntax error");
    assert_err(&mut r, &["BITFIELD", "k", "FROB", "u8", "0"], "ERR syntax error");
    assert_err(
        &mut r,
        &["BITFIELD", "k", "SET", "u8", "0", "x"],
        "ERR value is not an integer or out of range",
    );
    assert_err(
        &mut r,
        &["BITFIELD", "k", "INCRBY", "u8", "0", "1.5"],
        "ERR value is not an integer or out of range",
    );
    // An error anywhere means nothing ran, even the writes before it.
    assert_err(&mut r, &["BITFIELD", "k", "SET", "u8", "0", "1", "GET", "u64", "0"], BAD_TYPE);
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "k"]).unwrap(), 0);
    assert_err(&mut r, &["BITFIELD"], "ERR wrong number of arguments for \'bitfield\' command");
}

#[test]
fn bitfield_ro_only_reads() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut r = server.raw();
    let (a, b) = keys_on_two_shards();
    for key in [&a, &b] {
        q::<Vec<i64>>(&mut c, &["BITFIELD", key, "SET", "u8", "#1", "200"]).unwrap();
        let got: Vec<i64> = q(
            &mut c,
            &["BITFIELD_RO", key, "GET", "u8", "#1", "GET", "i8", "8", "GET", "u4", "#3"],
        )
        .unwrap();
        assert_eq!(got, [200, -56, 8]);
        for write in [&["SET", "u8", "0", "1"][..], &["INCRBY", "u8", "0", "1"]] {
            let mut args = vec!["BITFIELD_RO", key.as_str(), "GET", "u8", "0"];
            args.extend_from_slice(write);
            assert_err(&mut r, &args, "ERR BITFIELD_RO only supports the GET subcommand");
        }
        assert_eq!(q::<Vec<i64>>(&mut c, &["BITFIELD_RO", key, "GET", "u8", "#1"]).unwrap(), [200]);
    }
    assert_eq!(q::<Vec<i64>>(&mut c, &["BITFIELD_RO", "missing", "GET", "i16", "0"]).unwrap(), [0]);
    assert_eq!(q::<Vec<i64>>(&mut c, &["BITFIELD_RO", "missing"]).unwrap(), Vec::<i64>::new());
    assert_eq!(
        q::<Vec<i64>>(&mut c, &["BITFIELD_RO", "missing", "OVERFLOW", "SAT"]).unwrap(),
        Vec::<i64>::new()
    );
    assert_err(&mut r, &["BITFIELD_RO", "missing", "GET", "u64", "0"], BAD_TYPE);
    assert_err(&mut r, &["BITFIELD_RO", "missing", "GET", "u8"], "ERR syntax error");
    assert_eq!(q::<i64>(&mut c, &["EXISTS", "missing"]).unwrap(), 0);
}
