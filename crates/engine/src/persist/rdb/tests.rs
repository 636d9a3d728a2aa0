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
use ringdb_types::stream::{AddId, GroupFrom, Stream, StreamId, ENTRIES_READ_INVALID};
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
        Value::Stream(_) => describe_stream(v).into_iter().map(String::into_bytes).collect(),
        Value::Bloom(b) => {
            vec![format!("{} {} {} {}", b.size(), b.links().len(), b.options(), b.growth())
                .into_bytes()]
        }
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

/// A stream's entries, metadata, groups, PELs and consumers as text.
fn describe_stream(v: &Value) -> Vec<String> {
    let Value::Stream(s) = v else { panic!("not a stream") };
    let mut out = vec![format!(
        "len={} last={} first={} maxdel={} added={} nodes={}",
        s.len(),
        s.last_id(),
        s.first_id(),
        s.max_deleted_id(),
        s.entries_added(),
        s.node_count()
    )];
    for e in s.range(StreamId::MIN, StreamId::MAX, false) {
        let pairs: Vec<String> = e
            .pairs()
            .map(|(f, v)| {
                format!(
                    "{}={}",
                    String::from_utf8_lossy(&f.to_vec()),
                    String::from_utf8_lossy(&v.to_vec())
                )
            })
            .collect();
        out.push(format!("{} {}", e.id(), pairs.join(",")));
    }
    for (name, g) in s.groups() {
        out.push(format!(
            "group {} {} {}",
            String::from_utf8_lossy(name),
            g.last_id,
            g.entries_read
        ));
        for (id, n) in g.pending_from(StreamId::MIN) {
            out.push(format!(
                "  pending {id} {} {} {}",
                String::from_utf8_lossy(n.consumer()),
                n.delivery_time,
                n.delivery_count
            ));
        }
        for (name, c) in g.consumers() {
            let ids: Vec<String> = c.pending_from(StreamId::MIN).map(|i| i.to_string()).collect();
            out.push(format!(
                "  consumer {} {} [{}]",
                String::from_utf8_lossy(name),
                c.seen_time,
                ids.join(" ")
            ));
        }
    }
    out
}

/// DUMP of a stream redis-server 7.0.15 built: XADD s 1-1 a 1 b 2, 1-2 a 3
/// b 4, 2-0 c hello, 3-0 a 5 b 6; XDEL s 1-2; XGROUP CREATE s g 0;
/// XREADGROUP GROUP g alice COUNT 2 STREAMS s >; XGROUP CREATECONSUMER s g
/// bob; XGROUP CREATE s g2 $; XCLAIM s g bob 0 2-0.
const REDIS_STREAM: &str = "13011000000000000000010000000000000001c34049404f124f0000001f0003010101020181610281620200200900002001401102050103600902030104200b40130fdfff0201018163028568656c6c6f0606202c0002401402050106202100ff0303000101010204020167020081ffffffffffffffff0200000000000000010000000000000001db58112ca201000001000000000000000200000000000000000659112ca2010000020205616c696365db58112ca2010000010000000000000001000000000000000103626f620659112ca20100000100000000000000020000000000000000026732030081ffffffffffffffff00000a001e12363dc8515e3f";

#[test]
fn stream_dumps_are_byte_for_byte_redis_7s() {
    let payload = hex(REDIS_STREAM);
    let stream = restore(&payload);
    let text = describe_stream(&stream);
    assert_eq!(text[0], "len=3 last=3-0 first=1-1 maxdel=1-2 added=4 nodes=1");
    assert_eq!(&text[1..4], ["1-1 a=1,b=2", "2-0 c=hello", "3-0 a=5,b=6"]);
    assert_eq!(text[4], "group g 2-0 -1");
    assert!(text[5].starts_with("  pending 1-1 alice "), "{text:?}");
    assert!(text[6].starts_with("  pending 2-0 bob "), "{text:?}");
    assert!(text[7].starts_with("  consumer alice ") && text[7].ends_with(" [1-1]"));
    assert!(text[8].starts_with("  consumer bob ") && text[8].ends_with(" [2-0]"));
    assert_eq!(text[9], "group g2 3-0 -1");
    // ringdb's LZF compressor finds other (equally long) matches than
    // liblzf, so the listpacks are compared uncompressed.
    assert_eq!(Encoder { compress: false }.dump(&stream), uncompressed(&payload));
    assert_eq!(describe_stream(&restore(&dump_of(&stream))), text);
}

/// A one-node stream DUMP with its listpack stored uncompressed.
fn uncompressed(payload: &[u8]) -> Vec<u8> {
    let limits = LoadLimits::default();
    let mut dec = super::decode::Decoder::new(&payload[1..payload.len() - 10], &limits);
    assert_eq!(dec.length().unwrap(), 1);
    let raw = Encoder { compress: false };
    let mut out = vec![payload[0], 1];
    raw.string(&mut out, &dec.string().unwrap());
    raw.string(&mut out, &dec.string().unwrap());
    out.extend_from_slice(&payload[1 + dec.pos()..payload.len() - 10]);
    sign(&out)
}

/// A stream with several nodes, tombstones, entries with their own fields,
/// and two groups with pending entries and consumers.
fn busy_stream() -> Value {
    let limits = Limits { stream_node_max_entries: 4, ..Limits::default() };
    let mut s = Stream::new();
    for i in 0..20u64 {
        let value = format!("value number {i} long enough to compress well well well");
        let n = i.to_string();
        let pairs: Vec<&[u8]> = if i % 3 == 0 {
            vec![b"other", value.as_bytes()]
        } else {
            vec![b"f", n.as_bytes(), b"g", value.as_bytes()]
        };
        s.append(AddId::Exact(StreamId::new(1000 + i, i)), &pairs, 0, &limits).unwrap();
    }
    s.delete(&[StreamId::new(1000, 0), StreamId::new(1005, 5), StreamId::new(1009, 9)]);
    assert!(s.create_group(b"readers", StreamId::MIN, 0));
    assert!(s.create_group(b"12", StreamId::new(1010, 10), ENTRIES_READ_INVALID));
    s.read_group(b"readers", b"alice", GroupFrom::New, 5, false, 111).unwrap();
    s.read_group(b"readers", b"bob", GroupFrom::New, 3, false, 222).unwrap();
    s.read_group(b"12", b"carol", GroupFrom::New, 2, true, 333).unwrap();
    s.group_mut(b"readers").unwrap().create_consumer(b"idle", 444);
    Value::Stream(Box::new(s))
}

#[test]
fn streams_round_trip_with_deletes_groups_and_consumers() {
    let value = busy_stream();
    let payload = dump_of(&value);
    assert_eq!(payload[0], types::STREAM_LISTPACKS_2);
    let back = restore(&payload);
    assert_eq!(describe_stream(&back), describe_stream(&value));
    assert_eq!(dump_of(&back), payload);
    let text = describe_stream(&back);
    assert!(text.iter().any(|l| l.starts_with("  pending 1001-1 alice 111 1")), "{text:?}");
    assert!(text.iter().any(|l| l == "  consumer idle 444 []"), "{text:?}");
    // An empty stream is a value too.
    let empty = Value::Stream(Box::default());
    assert_eq!(describe_stream(&restore(&dump_of(&empty))), describe_stream(&empty));
}

/// The stream's RDB body (after the type byte) cut where the stream's
/// metadata and groups start, with the nodes kept as they are.
fn nodes_part(payload: &[u8]) -> Vec<u8> {
    // One node: count, key (1 + 16 bytes), listpack string.
    let limits = LoadLimits::default();
    let mut dec = super::decode::Decoder::new(&payload[1..], &limits);
    let nodes = dec.length().unwrap();
    for _ in 0..2 * nodes {
        dec.skip_string().unwrap();
    }
    payload[1..1 + dec.pos()].to_vec()
}

#[test]
fn older_and_newer_stream_types_load() {
    let redis = hex(REDIS_STREAM);
    let nodes = nodes_part(&redis);
    let enc = Encoder::default();
    let id = |out: &mut Vec<u8>, ms, seq| {
        encode::put_len(out, ms);
        encode::put_len(out, seq);
    };
    // RDB_TYPE_STREAM_LISTPACKS (Redis 5, 6): no first id, max deleted id,
    // entries added or read counters; one group with one consumer.
    let mut v15 = vec![types::STREAM_LISTPACKS];
    v15.extend_from_slice(&nodes);
    encode::put_len(&mut v15, 3);
    id(&mut v15, 3, 0);
    encode::put_len(&mut v15, 1);
    enc.string(&mut v15, b"g");
    id(&mut v15, 2, 0);
    encode::put_len(&mut v15, 1);
    v15.extend_from_slice(&StreamId::new(2, 0).to_be_bytes());
    v15.extend_from_slice(&77i64.to_le_bytes());
    encode::put_len(&mut v15, 3);
    encode::put_len(&mut v15, 1);
    enc.string(&mut v15, b"c");
    v15.extend_from_slice(&88i64.to_le_bytes());
    encode::put_len(&mut v15, 1);
    v15.extend_from_slice(&StreamId::new(2, 0).to_be_bytes());
    let text = describe_stream(&restore(&sign(&v15)));
    assert_eq!(text[0], "len=3 last=3-0 first=1-1 maxdel=0-0 added=3 nodes=1");
    // The read counter is estimated: 2-0 is not the first entry, so unknown.
    assert_eq!(text[4], "group g 2-0 -1");
    assert_eq!(text[5], "  pending 2-0 c 77 3");
    assert_eq!(text[6], "  consumer c 88 [2-0]");

    // RDB_TYPE_STREAM_LISTPACKS_3 (Redis 7.2): consumers have an active time.
    let mut v21 = vec![types::STREAM_LISTPACKS_3];
    v21.extend_from_slice(&nodes);
    encode::put_len(&mut v21, 3);
    id(&mut v21, 3, 0);
    id(&mut v21, 1, 1);
    id(&mut v21, 1, 2);
    encode::put_len(&mut v21, 4);
    encode::put_len(&mut v21, 1);
    enc.string(&mut v21, b"g");
    id(&mut v21, 3, 0);
    encode::put_len(&mut v21, 4);
    encode::put_len(&mut v21, 0);
    encode::put_len(&mut v21, 1);
    enc.string(&mut v21, b"c");
    v21.extend_from_slice(&88i64.to_le_bytes());
    v21.extend_from_slice(&99i64.to_le_bytes());
    encode::put_len(&mut v21, 0);
    let value = restore(&sign(&v21));
    let text = describe_stream(&value);
    assert_eq!(text[0], "len=3 last=3-0 first=1-1 maxdel=1-2 added=4 nodes=1");
    assert_eq!(&text[4..], ["group g 3-0 4", "  consumer c 88 []"]);
    let Value::Stream(s) = value else { unreachable!() };
    let consumer = s.group(b"g").and_then(|g| g.consumer(b"c")).map(|c| c.active_time);
    assert_eq!(consumer, Some(99));
}

#[test]
fn hostile_stream_payloads_are_bad_format() {
    let format = Err(dump::PayloadError::Format);
    let limits = LoadLimits { max_expanded_bytes: 1 << 20, ..LoadLimits::default() };
    let check = |body: &[u8]| dump::decode(&sign(body), &limits).map(|_| ());
    let good = dump_of(&busy_stream());
    let body = &good[..good.len() - 10];
    assert!(check(body).is_ok());
    // Every truncation fails cleanly.
    for cut in 1..body.len() {
        assert_eq!(check(&body[..cut]), format, "cut at {cut}");
    }
    // Every single-byte corruption is refused or loads something, without
    // panicking.
    for at in 1..body.len() {
        for flip in [0x01u8, 0x80, 0xff] {
            let mut bad = body.to_vec();
            bad[at] ^= flip;
            let _ = check(&bad);
        }
    }
    // Huge counts are refused before allocating.
    assert_eq!(
        check(&[types::STREAM_LISTPACKS_2, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]),
        format
    );
    // A wrong length, a last id below the entries, a PEL entry without a
    // consumer, a consumer owning an id not pending.
    let redis = hex(REDIS_STREAM);
    let nodes = nodes_part(&redis);
    let meta = |length: u64, last_ms: u64| {
        let mut v = vec![types::STREAM_LISTPACKS_2];
        v.extend_from_slice(&nodes);
        for n in [length, last_ms, 0, 1, 1, 1, 2, 4] {
            encode::put_len(&mut v, n);
        }
        v
    };
    let mut ok = meta(3, 3);
    ok.push(0);
    assert!(check(&ok).is_ok());
    for (length, last) in [(2, 3), (4, 3), (3, 2)] {
        let mut v = meta(length, last);
        v.push(0);
        assert_eq!(check(&v), format);
    }
    let group = |pending: &[u64], owned: &[u64]| {
        let mut v = meta(3, 3);
        encode::put_len(&mut v, 1);
        Encoder::default().string(&mut v, b"g");
        for n in [3, 0, 4, pending.len() as u64] {
            encode::put_len(&mut v, n);
        }
        for &ms in pending {
            v.extend_from_slice(&StreamId::new(ms, 0).to_be_bytes());
            v.extend_from_slice(&0i64.to_le_bytes());
            encode::put_len(&mut v, 1);
        }
        encode::put_len(&mut v, 1);
        Encoder::default().string(&mut v, b"c");
        v.extend_from_slice(&0i64.to_le_bytes());
        encode::put_len(&mut v, owned.len() as u64);
        for &ms in owned {
            v.extend_from_slice(&StreamId::new(ms, 0).to_be_bytes());
        }
        v
    };
    assert!(check(&group(&[2, 3], &[2, 3])).is_ok());
    assert_eq!(check(&group(&[2, 3], &[2])), format);
    assert_eq!(check(&group(&[2], &[2, 3])), format);
    assert_eq!(check(&group(&[2], &[2, 2])), format);
    assert_eq!(check(&group(&[2, 2], &[2])), format);
}
