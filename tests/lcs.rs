//! LCS against a real 2-shard server: the subsequence, LEN, IDX with
//! MINMATCHLEN and WITHMATCHLEN, errors, keys on different shards and the
//! proto-max-bulk-len bound on the table.

mod common;
use common::{keys_on_two_shards, q, Raw, Server};
use redis::Value;

fn assert_err(r: &mut Raw, args: &[&str], text: &str) {
    assert_eq!(r.call(args), format!("-{text}\r\n"), "{args:?}");
}

/// Redis's unit/type/string.tcl LCS vectors.
const RNA1: &str = "CACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTTCGTCCGGGTGTG";
const RNA2: &str = "ATTAAAGGTTTATACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTT";
const RNA_LCS: &str = "ACCTTCCCAGGTAACAAACCAACCAACTTTCGATCTCTTGTAGATCTGTTCTCTAAACGAACTTTAAAATCTGTGTGGCTGTCACTCGGCTGCATGCTTAGTGCACTCACGCAGTATAATTAATAACTAATTACTGTCGTTGACAGGACACGAGTAACTCGTCTATCTTCTGCAGGCTGCTTACGGTTTCGTCCGTGTTGCAGCCGATCATCAGCACATCTAGGTTT";

/// `[[a_start, a_end], [b_start, b_end] (, len)]` as the client sees it.
fn range(a: (i64, i64), b: (i64, i64), len: Option<i64>) -> Value {
    let mut items = vec![
        Value::Array(vec![Value::Int(a.0), Value::Int(a.1)]),
        Value::Array(vec![Value::Int(b.0), Value::Int(b.1)]),
    ];
    items.extend(len.map(Value::Int));
    Value::Array(items)
}

fn idx_reply(matches: Vec<Value>, len: i64) -> Value {
    Value::Array(vec![
        Value::BulkString(b"matches".to_vec()),
        Value::Array(matches),
        Value::BulkString(b"len".to_vec()),
        Value::Int(len),
    ])
}

#[test]
fn lcs_string_len_and_indexes() {
    let server = Server::start(2);
    let mut c = server.client();
    q::<()>(&mut c, &["MSET", "virus1{t}", RNA1, "virus2{t}", RNA2]).unwrap();
    assert_eq!(q::<String>(&mut c, &["LCS", "virus1{t}", "virus2{t}"]).unwrap(), RNA_LCS);
    assert_eq!(
        q::<i64>(&mut c, &["LCS", "virus1{t}", "virus2{t}", "LEN"]).unwrap(),
        RNA_LCS.len() as i64
    );
    assert_eq!(
        q::<i64>(&mut c, &["lcs", "virus1{t}", "virus2{t}", "len"]).unwrap(),
        RNA_LCS.len() as i64
    );
    let full = [
        ((238, 238), (239, 239), 1),
        ((236, 236), (238, 238), 1),
        ((229, 230), (236, 237), 2),
        ((224, 224), (235, 235), 1),
        ((1, 222), (13, 234), 222),
    ];
    let plain: Vec<Value> = full.iter().map(|&(a, b, _)| range(a, b, None)).collect();
    let with_len: Vec<Value> = full.iter().map(|&(a, b, l)| range(a, b, Some(l))).collect();
    let len = RNA_LCS.len() as i64;
    assert_eq!(
        q::<Value>(&mut c, &["LCS", "virus1{t}", "virus2{t}", "IDX"]).unwrap(),
        idx_reply(plain, len)
    );
    assert_eq!(
        q::<Value>(&mut c, &["LCS", "virus1{t}", "virus2{t}", "IDX", "WITHMATCHLEN"]).unwrap(),
        idx_reply(with_len, len)
    );
    let long_only = vec![range((1, 222), (13, 234), Some(222))];
    let r = q::<Value>(
        &mut c,
        &["LCS", "virus1{t}", "virus2{t}", "IDX", "WITHMATCHLEN", "MINMATCHLEN", "5"],
    )
    .unwrap();
    assert_eq!(r, idx_reply(long_only, len));
    // A negative MINMATCHLEN means no minimum.
    let r =
        q::<Value>(&mut c, &["LCS", "virus1{t}", "virus2{t}", "MINMATCHLEN", "-3", "IDX"]).unwrap();
    assert!(
        matches!(&r, Value::Array(v) if matches!(&v[1], Value::Array(m) if m.len() == 5)),
        "{r:?}"
    );
    // Options that do not apply to the plain form are accepted and ignored.
    assert_eq!(
        q::<String>(&mut c, &["LCS", "virus1{t}", "virus2{t}", "WITHMATCHLEN", "MINMATCHLEN", "2"])
            .unwrap(),
        RNA_LCS
    );
}

#[test]
fn lcs_documentation_example_and_empty_inputs() {
    let server = Server::start(2);
    let mut c = server.client();
    q::<()>(&mut c, &["MSET", "{k}1", "ohmytext", "{k}2", "mynewtext"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["LCS", "{k}1", "{k}2"]).unwrap(), "mytext");
    assert_eq!(q::<i64>(&mut c, &["LCS", "{k}1", "{k}2", "LEN"]).unwrap(), 6);
    let r = q::<Value>(&mut c, &["LCS", "{k}1", "{k}2", "IDX", "MINMATCHLEN", "4", "WITHMATCHLEN"])
        .unwrap();
    assert_eq!(r, idx_reply(vec![range((4, 7), (5, 8), Some(4))], 6));
    let r = q::<Value>(&mut c, &["LCS", "{k}1", "{k}2", "IDX"]).unwrap();
    assert_eq!(r, idx_reply(vec![range((4, 7), (5, 8), None), range((2, 3), (0, 1), None)], 6));
    // Missing keys are empty strings.
    assert_eq!(q::<String>(&mut c, &["LCS", "{k}1", "{k}missing"]).unwrap(), "");
    assert_eq!(q::<i64>(&mut c, &["LCS", "{k}none", "{k}missing", "LEN"]).unwrap(), 0);
    assert_eq!(
        q::<Value>(&mut c, &["LCS", "{k}none", "{k}1", "IDX"]).unwrap(),
        idx_reply(vec![], 0)
    );
    // Integer-encoded strings are compared as digits.
    q::<()>(&mut c, &["MSET", "{k}n1", "12345", "{k}n2", "1x3y5"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["LCS", "{k}n1", "{k}n2"]).unwrap(), "135");
}

#[test]
fn lcs_keys_on_two_shards() {
    let server = Server::start(2);
    let mut c = server.client();
    let (a, b) = keys_on_two_shards();
    q::<()>(&mut c, &["MSET", &a, "ohmytext", &b, "mynewtext"]).unwrap();
    assert_eq!(q::<String>(&mut c, &["LCS", &a, &b]).unwrap(), "mytext");
    assert_eq!(q::<String>(&mut c, &["LCS", &b, &a]).unwrap(), "mytext");
    assert_eq!(q::<i64>(&mut c, &["LCS", &a, &b, "LEN"]).unwrap(), 6);
    let r = q::<Value>(&mut c, &["LCS", &a, &b, "IDX", "MINMATCHLEN", "4"]).unwrap();
    assert_eq!(r, idx_reply(vec![range((4, 7), (5, 8), None)], 6));
    // Reading changes nothing on either shard.
    assert_eq!(q::<Vec<String>>(&mut c, &["MGET", &a, &b]).unwrap(), ["ohmytext", "mynewtext"]);
}

#[test]
fn lcs_errors() {
    let server = Server::start(2);
    let mut c = server.client();
    let mut r = server.raw();
    q::<()>(&mut c, &["MSET", "{k}1", "abc", "{k}2", "abd"]).unwrap();
    assert_err(
        &mut r,
        &["LCS", "{k}1", "{k}2", "LEN", "IDX"],
        "ERR If you want both the length and indexes, please just use IDX.",
    );
    assert_err(
        &mut r,
        &["LCS", "{k}1", "{k}2", "IDX", "LEN"],
        "ERR If you want both the length and indexes, please just use IDX.",
    );
    assert_err(&mut r, &["LCS", "{k}1", "{k}2", "FOO"], "ERR syntax error");
    assert_err(&mut r, &["LCS", "{k}1", "{k}2", "MINMATCHLEN"], "ERR syntax error");
    assert_err(
        &mut r,
        &["LCS", "{k}1", "{k}2", "MINMATCHLEN", "x"],
        "ERR value is not an integer or out of range",
    );
    assert_err(&mut r, &["LCS", "{k}1"], "ERR wrong number of arguments for 'lcs' command");
}

#[test]
fn lcs_table_is_bounded_by_proto_max_bulk_len() {
    let server = Server::start_with(&["--shards", "2", "--proto-max-bulk-len", "1mb"]);
    let mut c = server.client();
    let mut r = server.raw();
    // 500 × 500 bytes: (501 × 501) × 4 bytes of table fit in 1 MiB ...
    let (x, y) = ("A".repeat(500), format!("{}B", "A".repeat(499)));
    q::<()>(&mut c, &["MSET", "{k}x", &x, "{k}y", &y]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["LCS", "{k}x", "{k}y", "LEN"]).unwrap(), 499);
    // ... 600 × 600 do not, whatever the options.
    let (x, y) = ("A".repeat(600), "A".repeat(600));
    q::<()>(&mut c, &["MSET", "{k}x", &x, "{k}y", &y]).unwrap();
    let text = "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";
    assert_err(&mut r, &["LCS", "{k}x", "{k}y"], text);
    assert_err(&mut r, &["LCS", "{k}x", "{k}y", "LEN"], text);
    assert_err(&mut r, &["LCS", "{k}x", "{k}y", "IDX"], text);
    // A short string against a long one is still fine.
    q::<()>(&mut c, &["SET", "{k}short", "AA"]).unwrap();
    assert_eq!(q::<i64>(&mut c, &["LCS", "{k}x", "{k}short", "LEN"]).unwrap(), 2);
}
