//! RDB encoding checked against bytes redis-server 7.0.15 wrote (DUMP
//! payloads), and round trips of every type, encoding and file record.

use super::decode::LoadLimits;
use super::encode::{self, Access, Encoder};
use super::file::{RdbReader, Record};
use super::*;
use crate::keyspace::{Entry, StrValue, Value};
use crate::persist::{crc64, dump};
use ringdb_types::bloom::BloomFilter;
use ringdb_types::hash::Hash;
use ringdb_types::limits::Limits;
use ringdb_types::list::{End, List};
use ringdb_types::set::Set;
use ringdb_types::zset::{AddFlags, ZSet};

fn hex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

fn limits() -> Limits {
    Limits::default()
}

fn list(items: &[&[u8]]) -> Value {
    let mut l = List::new();
    l.push(End::Tail, items, &limits());
    Value::List(l)
}

fn hash(pairs: &[(&[u8], &[u8])]) -> Value {
    let mut h = Hash::new();
    for (f, v) in pairs {
        h.set(f, v, &limits());
    }
    Value::Hash(h)
}

fn set(members: &[&[u8]]) -> Value {
    let mut s = Set::new_for(members[0], members.len(), &limits());
    for m in members {
        s.add(m, &limits());
    }
    Value::Set(s)
}

fn zset(pairs: &[(&[u8], f64)]) -> Value {
    let mut z = ZSet::new();
    for (m, score) in pairs {
        z.add(m, *score, AddFlags::default(), &limits()).unwrap();
    }
    Value::ZSet(z)
}

fn dump_of(v: &Value) -> Vec<u8> {
    Encoder::default().dump(v)
}

fn restore(payload: &[u8]) -> Value {
    dump::decode(payload, &LoadLimits::default()).unwrap()
}

/// A canonical description of a value, to compare two values.
fn describe(v: &Value) -> (String, &'static str, Vec<Vec<u8>>) {
    let mut parts: Vec<Vec<u8>> = match v {
        Value::Str(s) => {
            let mut tmp = [0u8; 20];
            vec![s.as_bytes(&mut tmp).to_vec()]
        }
        Value::List(l) => l.iter().map(|i| i.to_vec()).collect(),
        Value::Hash(h) => {
            h.iter().map(|(f, v)| [f.to_vec(), b"=".to_vec(), v.to_vec()].concat()).collect()
        }
        Value::Set(s) => s.iter().map(|i| i.to_vec()).collect(),
        Value::ZSet(z) => {
            z.iter().map(|(m, s)| [m.to_vec(), format!("={s}").into_bytes()].concat()).collect()
        }
        Value::Bloom(b) => {
            vec![format!("{} {} {} {}", b.size(), b.links().len(), b.options(), b.growth())
                .into_bytes()]
        }
        Value::Stream(s) => vec![format!("{} {}", s.len(), s.last_id()).into_bytes()],
    };
    if matches!(v, Value::Hash(_) | Value::Set(_)) {
        parts.sort();
    }
    (v.type_name().to_string(), v.encoding(), parts)
}

#[test]
fn dumps_are_byte_for_byte_redis_7s() {
    // `DUMP` replies of redis-server 7.0.15 (hex).
    let cases: Vec<(Value, &str)> = vec![
        (Value::Str(StrValue::from_bytes(b"hello")), "000568656c6c6f0a006372df766534200a"),
        (Value::Str(StrValue::from_bytes(b"12345")), "00c139300a009d94ea2793fc08b9"),
        (
            list(&[b"a", b"b", b"1", b"2"]),
            "1201021111000000040081610281620201010201ff0a006d72713e9b43482b",
        ),
        (
            hash(&[(b"f", b"v"), (b"n", b"7")]),
            "1012120000000400816602817602816e020701ff0a00b82adea8407ffaa8",
        ),
        (set(&[b"1", b"2", b"3"]), "0b0e02000000030000000100020003000a00a5025ce26d6e4d1b"),
        (
            zset(&[(b"a", 1.0), (b"b", 2.5)]),
            "1114140000000400816102010181620283322e3504ff0a00d44c6ea4f644d9d7",
        ),
    ];
    for (value, redis) in cases {
        assert_eq!(dump_of(&value), hex(redis), "{:?}", describe(&value));
        assert_eq!(describe(&restore(&hex(redis))), describe(&value));
    }
    // A hashtable set of two strings, in the order Redis iterated it.
    let redis_set = restore(&hex("0202016201610a0075d99d835ef85f65"));
    assert_eq!(describe(&redis_set), describe(&set(&[b"a", b"b"])));
}

#[test]
fn every_type_and_encoding_round_trips() {
    let long: Vec<u8> = (0..3000u32).flat_map(|i| i.to_string().into_bytes()).collect();
    let many: Vec<Vec<u8>> = (0..600).map(|i| format!("member:{i}").into_bytes()).collect();
    let many_refs: Vec<&[u8]> = many.iter().map(|m| &m[..]).collect();
    let numbers: Vec<Vec<u8>> = (0..600).map(|i| (i * 7 - 1000).to_string().into_bytes()).collect();
    let number_refs: Vec<&[u8]> = numbers.iter().map(|m| &m[..]).collect();
    let pairs: Vec<(&[u8], &[u8])> =
        many_refs.iter().zip(&number_refs).map(|(a, b)| (*a, *b)).collect();
    let scored: Vec<(&[u8], f64)> =
        many_refs.iter().enumerate().map(|(i, m)| (*m, i as f64 / 3.0)).collect();
    let mut bloom = BloomFilter::new(100, 0.01, 2, true, 1 << 20).unwrap();
    for i in 0..500 {
        bloom.add(format!("item{i}").as_bytes(), 1 << 20);
    }
    let values = vec![
        Value::Str(StrValue::from_bytes(b"")),
        Value::Str(StrValue::from_bytes(b"-9223372036854775808")),
        Value::Str(StrValue::from_bytes(b"007")),
        Value::Str(StrValue::from_bytes(&long)),
        list(&[b"x"]),
        list(&many_refs),
        list(&[&long, b"1", b"", &long]),
        hash(&[(b"a", b"")]),
        hash(&pairs),
        hash(&[(&long, b"big field makes a hashtable")]),
        set(&number_refs),
        set(&many_refs),
        set(&[b"1", b"x"]),
        zset(&[(b"m", f64::INFINITY), (b"n", f64::NEG_INFINITY), (b"o", -0.5)]),
        zset(&scored),
        Value::Bloom(Box::new(bloom)),
    ];
    for value in &values {
        let payload = dump_of(value);
        let back = restore(&payload);
        assert_eq!(describe(&back), describe(value));
        assert_eq!(dump_of(&back), payload, "{:?}", describe(value).1);
    }
}

#[test]
fn uncompressed_strings_read_back() {
    let text = vec![b'a'; 200];
    let mut out = Vec::new();
    Encoder { compress: false }.string(&mut out, &text);
    assert_eq!(out.len(), 2 + 200);
    let mut compressed = Vec::new();
    Encoder::default().string(&mut compressed, &text);
    assert_eq!(compressed[0], 0xC3);
    for bytes in [out, compressed] {
        let limits = LoadLimits::default();
        let mut dec = decode::Decoder::new(&bytes, &limits);
        assert_eq!(&dec.string().unwrap()[..], &text[..]);
    }
}

#[test]
fn bad_payloads_are_refused() {
    let payload = dump_of(&list(&[b"a", b"b", b"c"]));
    for cut in 0..payload.len() {
        assert!(dump::decode(&payload[..cut], &LoadLimits::default()).is_err());
    }
    for i in 0..payload.len() {
        let mut bad = payload.clone();
        bad[i] ^= 0x10;
        assert_eq!(
            dump::decode(&bad, &LoadLimits::default()).unwrap_err(),
            dump::PayloadError::Footer
        );
    }
    // A newer RDB version is refused even with a right checksum.
    let mut newer = payload[..payload.len() - 10].to_vec();
    newer.extend_from_slice(&12u16.to_le_bytes());
    let crc = crc64::crc64(&newer);
    newer.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(
        dump::decode(&newer, &LoadLimits::default()).unwrap_err(),
        dump::PayloadError::Footer
    );
}

/// Signs `body` as a DUMP payload.
fn sign(body: &[u8]) -> Vec<u8> {
    let mut out = body.to_vec();
    out.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let crc = crc64::crc64(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

#[test]
fn hostile_but_signed_payloads_are_bad_format() {
    let format = Err(dump::PayloadError::Format);
    let limits = LoadLimits { max_expanded_bytes: 1 << 20, ..LoadLimits::default() };
    let check = |body: &[u8]| dump::decode(&sign(body), &limits).map(|_| ());
    // A list claiming 2^32 elements.
    assert_eq!(check(&[types::LIST, 0x80, 0xff, 0xff, 0xff, 0xff, 1, b'a']), format);
    // An LZF string claiming to expand to 4 GiB.
    assert_eq!(check(&[types::STRING, 0xC3, 2, 0x80, 0xff, 0xff, 0xff, 0xff, 0, b'a']), format);
    // Duplicate set members, hash fields, zset members; a NaN score.
    assert_eq!(check(&[types::SET, 2, 1, b'a', 1, b'a']), format);
    assert_eq!(check(&[types::HASH, 2, 1, b'a', 1, b'x', 1, b'a', 1, b'y']), format);
    let mut z = vec![types::ZSET_2, 1, 1, b'a'];
    z.extend_from_slice(&f64::NAN.to_le_bytes());
    assert_eq!(check(&z), format);
    // Not a value type; trailing garbage after EOF is still read as a value.
    assert_eq!(check(&[opcode::SELECTDB, 0]), format);
    assert_eq!(check(&[]), format);
    // Unknown module type.
    let mut m = vec![types::MODULE_2];
    encode::put_len(&mut m, module_type_id(b"ReJSON-RL", 3));
    m.push(0);
    assert_eq!(check(&m), format);
    // Empty collections are not values.
    assert_eq!(check(&[types::SET, 0]), format);
}

#[test]
fn module_type_ids() {
    assert_eq!(module_type_name(BLOOM_MODULE_ID), "MBbloom--");
    assert_eq!(BLOOM_MODULE_ID & 1023, BLOOM_ENCVER);
}

#[test]
fn files_round_trip_with_databases_expiry_and_access() {
    let enc = Encoder::default();
    let mut out = Vec::new();
    encode::header(&mut out, &[("redis-ver", "7.0.15".into()), ("ctime", "1700000000".into())]);
    encode::function(
        &mut out,
        &enc,
        b"#!lua name=lib\nredis.register_function('f', function() return 1 end)",
    );
    encode::select_db(&mut out, 0);
    encode::resize_db(&mut out, 2, 1);
    let plain = Entry::new(b"plain", Value::Str(StrValue::from_bytes(b"v")));
    let timed = Entry::new(b"timed", list(&[b"a"])).with_expire(Some(4_000_000_000_000));
    enc.entry(&mut out, &plain, Access::Idle(30));
    enc.entry(&mut out, &timed, Access::Freq(5));
    encode::select_db(&mut out, 3);
    enc.entry(&mut out, &Entry::new(b"other", set(&[b"1"])), Access::None);
    let crc = crc64::crc64(&out);
    encode::footer(&mut out, crc, true);

    let mut reader = RdbReader::new(&out, true).unwrap();
    assert_eq!(reader.version, RDB_VERSION);
    let mut seen = Vec::new();
    loop {
        match reader.next_record().unwrap() {
            Record::Aux(k, v) => seen.push(format!(
                "aux {}={}",
                String::from_utf8_lossy(&k),
                String::from_utf8_lossy(&v)
            )),
            Record::Function(code) => seen.push(format!("function {}", code.len())),
            Record::Key(k) => {
                let value = k.decode(&LoadLimits::default()).unwrap().unwrap();
                seen.push(format!(
                    "db{} {} {:?} {:?} {:?} {}",
                    k.db,
                    String::from_utf8_lossy(&k.key),
                    k.expire_ms,
                    k.idle,
                    k.freq,
                    value.type_name()
                ));
            }
            Record::End => break,
        }
    }
    assert_eq!(
        seen,
        vec![
            "aux redis-ver=7.0.15",
            "aux ctime=1700000000",
            "function 68",
            "db0 plain None Some(30) None string",
            "db0 timed Some(4000000000000) None Some(5) list",
            "db3 other None None None set",
        ]
    );

    // A damaged byte fails the checksum (or the parse), never silently.
    for i in 9..out.len() {
        let mut bad = out.clone();
        bad[i] ^= 0x01;
        let Ok(mut reader) = RdbReader::new(&bad, true) else { continue };
        let failed = loop {
            match reader.next_record() {
                Err(_) => break true,
                Ok(Record::End) => break false,
                Ok(Record::Key(k)) if k.decode(&LoadLimits::default()).is_err() => break true,
                Ok(_) => {}
            }
        };
        assert!(failed, "flip at byte {i} went unnoticed");
    }
    // A truncated file ends in an error, not a panic.
    for cut in 9..out.len() {
        let mut reader = RdbReader::new(&out[..cut], true).unwrap();
        while let Ok(record) = reader.next_record() {
            assert!(!matches!(record, Record::End), "cut at {cut} read to the end");
        }
    }
}

#[test]
fn bad_signatures() {
    assert!(RdbReader::new(b"REDIS", true).is_err());
    assert!(RdbReader::new(b"RADIS0010\xff", true).is_err());
    assert!(RdbReader::new(b"REDIS0099\xff", true).is_err());
    assert!(RdbReader::new(b"REDIS0009\xff", true).is_ok());
}
