//! Criterion benches for the wire: request parsing (pipelined SET/GET,
//! large values, inline) and reply writing (hand-made writer vs
//! redis-protocol's frame encoder).

use bytes::{Bytes, BytesMut};
use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use redis_protocol::resp2::types::BytesFrame;
use ringdb_protocol::{ParseLimits, ReplyWriter, RequestParser, Resp};

fn pipeline(n: usize) -> Vec<u8> {
    let mut v = Vec::new();
    for i in 0..n {
        let key = format!("key:{i:012}");
        v.extend_from_slice(
            format!("*3\r\n$3\r\nSET\r\n${}\r\n{}\r\n$3\r\nxxx\r\n", key.len(), key).as_bytes(),
        );
    }
    v
}

fn parse(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    let input = pipeline(16);
    g.throughput(Throughput::Elements(16));
    g.bench_function("pipeline_16_set", |b| {
        let mut parser = RequestParser::new();
        let limits = ParseLimits::default();
        let mut out = Vec::with_capacity(16);
        b.iter(|| {
            let mut buf = BytesMut::from(&input[..]);
            out.clear();
            parser.parse(&mut buf, &limits, &mut out).unwrap();
            black_box(&out);
        })
    });
    let big = {
        let value = vec![b'v'; 1 << 20];
        let mut v = format!("*3\r\n$3\r\nSET\r\n$1\r\nk\r\n${}\r\n", value.len()).into_bytes();
        v.extend_from_slice(&value);
        v.extend_from_slice(b"\r\n");
        v
    };
    g.throughput(Throughput::Bytes(big.len() as u64));
    g.bench_function("set_1mib_value", |b| {
        let mut parser = RequestParser::new();
        let limits = ParseLimits::default();
        let mut out = Vec::new();
        b.iter(|| {
            let mut buf = BytesMut::from(&big[..]);
            out.clear();
            parser.parse(&mut buf, &limits, &mut out).unwrap();
            black_box(&out);
        })
    });
    g.throughput(Throughput::Elements(1));
    g.bench_function("inline_set", |b| {
        let mut parser = RequestParser::new();
        let limits = ParseLimits::default();
        let mut out = Vec::new();
        b.iter(|| {
            let mut buf = BytesMut::from(&b"SET key:000000000001 \"some value\"\r\n"[..]);
            out.clear();
            parser.parse(&mut buf, &limits, &mut out).unwrap();
            black_box(&out);
        })
    });
    g.finish();
}

fn reply(c: &mut Criterion) {
    let mut g = c.benchmark_group("reply");
    let values: Vec<Bytes> = (0..16).map(|i| Bytes::from(format!("value-{i}"))).collect();
    g.throughput(Throughput::Elements(16));
    g.bench_function("writer_16_bulks", |b| {
        let mut out = Vec::with_capacity(4096);
        b.iter(|| {
            out.clear();
            let mut w = ReplyWriter::new(&mut out, Resp::V2);
            for v in &values {
                w.bulk(v);
            }
            black_box(&out);
        })
    });
    g.bench_function("redis_protocol_16_bulks", |b| {
        let mut out = BytesMut::with_capacity(4096);
        b.iter(|| {
            out.clear();
            for v in &values {
                let frame = BytesFrame::BulkString(v.clone());
                redis_protocol::resp2::encode::extend_encode(&mut out, &frame, false).unwrap();
            }
            black_box(&out);
        })
    });
    g.finish();
}

criterion_group!(benches, parse, reply);
criterion_main!(benches);
