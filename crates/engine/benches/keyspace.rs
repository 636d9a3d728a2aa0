//! Criterion benches for the keyspace table: insert, lookup hit/miss, and
//! random lookups in pipelines of 16 over 1M keys, with and without
//! [`Db::prefetch`](ringdb_engine::keyspace::Db::prefetch) first; and what
//! every command's call adds to the shard: recording its latency
//! ([`ringdb_engine::latency`]).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ringdb_engine::keyspace::{Entry, Keyspace, StrValue, Value};

fn key(i: u64) -> Vec<u8> {
    format!("key:{i:08}").into_bytes()
}

fn entry(i: u64) -> Entry {
    Entry::new(&key(i), Value::Str(StrValue::from_bytes(b"value-0123456789")))
}

fn keyspace(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyspace");
    let n = 100_000u64;
    g.throughput(Throughput::Elements(n));
    g.bench_function("insert_100k", |b| {
        b.iter(|| {
            let ks = Keyspace::for_slots(1, 0, 16384).filled((0..n).map(|i| (0, entry(i))));
            black_box(ks.db(0).len());
        })
    });
    let ks = Keyspace::for_slots(1, 0, 16384).filled((0..n).map(|i| (0, entry(i))));
    let keys: Vec<Vec<u8>> = (0..n).map(key).collect();
    g.bench_function("get_hit_100k", |b| {
        b.iter(|| {
            let db = ks.db(0);
            let mut found = 0;
            for k in &keys {
                found += db.get(k).is_some() as usize;
            }
            black_box(found);
        })
    });
    let missing: Vec<Vec<u8>> = (n..2 * n).map(key).collect();
    g.bench_function("get_miss_100k", |b| {
        b.iter(|| {
            let db = ks.db(0);
            let mut found = 0;
            for k in &missing {
                found += db.get(k).is_some() as usize;
            }
            black_box(found);
        })
    });
    g.finish();
}

/// A pipeline of 16 GETs of random keys, as `redis-benchmark -P 16 -r`
/// sends: every lookup misses the cache unless the batch was prefetched.
fn pipelined_lookups(c: &mut Criterion) {
    let n = 1_000_000u64;
    let ks = Keyspace::for_slots(1, 0, 16384).filled((0..n).map(|i| (0, entry(i))));
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let random: Vec<Vec<u8>> = (0..64 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            key(x % n)
        })
        .collect();
    let mut g = c.benchmark_group("pipeline_16_random_gets_1m_keys");
    g.throughput(Throughput::Elements(random.len() as u64));
    for prefetch in [false, true] {
        let name = if prefetch { "prefetched" } else { "one_by_one" };
        g.bench_function(name, |b| {
            b.iter(|| {
                let db = ks.db(0);
                let mut found = 0;
                for batch in random.chunks(16) {
                    if prefetch {
                        db.prefetch(batch.iter().map(|k| &k[..]));
                    }
                    for k in batch {
                        found += db.get(k).is_some() as usize;
                    }
                }
                black_box(found);
            })
        });
    }
    g.finish();
}

/// One call's latency record, as every command pays it (`latency-tracking`
/// on, the monitor off): 1,000 calls of 16 commands with spread run times.
fn latency_record(c: &mut Criterion) {
    use ringdb_engine::latency::{Latency, LatencySettings};
    let mut g = c.benchmark_group("latency");
    g.throughput(Throughput::Elements(1000));
    let settings = LatencySettings { tracking: true, monitor_threshold_ms: 0 };
    let mut latency = Latency::default();
    g.bench_function("record_call_1k", |b| {
        b.iter(|| {
            for i in 0..1000u64 {
                let usec = (i * 7919) % 50;
                latency.record_call(settings, (i % 16) as usize, true, black_box(usec));
            }
        })
    });
    g.finish();
}

criterion_group!(benches, keyspace, pipelined_lookups, latency_record);
criterion_main!(benches);
