//! Criterion benches for the keyspace table: insert, lookup hit/miss, and
//! a 1M-key load (the memory shape of the load benchmark).

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use ringdb_engine::keyspace::{Entry, Keyspace, StrValue, Value};

fn key(i: u64) -> Vec<u8> {
    format!("key:{i:08}").into_bytes()
}

fn entry(i: u64) -> Box<Entry> {
    Box::new(Entry::new(&key(i), Value::Str(StrValue::from_bytes(b"value-0123456789"))))
}

fn keyspace(c: &mut Criterion) {
    let mut g = c.benchmark_group("keyspace");
    let n = 100_000u64;
    g.throughput(Throughput::Elements(n));
    g.bench_function("insert_100k", |b| {
        b.iter(|| {
            let mut ks = Keyspace::for_slots(1, 0, 16384);
            let db = ks.db_mut(0);
            for i in 0..n {
                db.insert(entry(i));
            }
            black_box(db.len());
        })
    });
    let mut ks = Keyspace::for_slots(1, 0, 16384);
    for i in 0..n {
        ks.db_mut(0).insert(entry(i));
    }
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

criterion_group!(benches, keyspace);
criterion_main!(benches);
