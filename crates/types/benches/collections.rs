//! Criterion benches for the collection types' hot operations, in their
//! small (compact) and big encodings: list push/pop, hash set/get, set
//! add/ismember, sorted-set add/range/rank.

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
use ringdb_types::hash::Hash;
use ringdb_types::limits::Limits;
use ringdb_types::list::{End, List};
use ringdb_types::set::Set;
use ringdb_types::zset::{AddFlags, ScoreRange, ZSet};

fn names(prefix: &str, n: usize) -> Vec<Vec<u8>> {
    (0..n).map(|i| format!("{prefix}{i}").into_bytes()).collect()
}

fn lists(c: &mut Criterion) {
    let lim = Limits::default();
    let mut g = c.benchmark_group("list");
    let value = b"value-0123456789";
    // A steady-state list (quicklist) with pushes and pops at both ends.
    let mut big = List::new();
    for _ in 0..100_000 {
        big.push(End::Tail, &[value], &lim);
    }
    g.bench_function("lpush_rpop_quicklist", |b| {
        b.iter(|| {
            big.push(End::Head, &[value], &lim);
            black_box(big.pop(End::Tail, &lim))
        })
    });
    let mut small = List::new();
    for _ in 0..10 {
        small.push(End::Tail, &[value], &lim);
    }
    g.bench_function("rpush_lpop_listpack_10", |b| {
        b.iter(|| {
            small.push(End::Tail, &[value], &lim);
            black_box(small.pop(End::Head, &lim))
        })
    });
    g.bench_function("lrange_100_of_100k", |b| {
        b.iter(|| black_box(big.iter_range(50_000, 100, false).map(|i| i.len()).sum::<usize>()))
    });
    g.bench_function("lindex_middle_of_100k", |b| {
        b.iter(|| black_box(big.get(50_000).map(|i| i.len())))
    });
    g.finish();
}

fn hashes(c: &mut Criterion) {
    let lim = Limits::default();
    let mut g = c.benchmark_group("hash");
    let fields = names("field:", 100_000);
    let mut small = Hash::new();
    for f in &fields[..10] {
        small.set(f, b"value", &lim);
    }
    let mut big = Hash::new();
    for f in &fields {
        big.set(f, b"value", &lim);
    }
    let mut i = 0;
    g.bench_function("hset_existing_listpack_10", |b| {
        b.iter(|| {
            i = (i + 1) % 10;
            black_box(small.set(&fields[i], b"other", &lim))
        })
    });
    g.bench_function("hget_listpack_10", |b| {
        b.iter(|| {
            i = (i + 1) % 10;
            black_box(small.get(&fields[i]).map(|v| v.len()))
        })
    });
    g.bench_function("hset_hashtable_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % fields.len();
            black_box(big.set(&fields[i], b"other", &lim))
        })
    });
    g.bench_function("hget_hashtable_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % fields.len();
            black_box(big.get(&fields[i]).map(|v| v.len()))
        })
    });
    g.bench_function("hset_new_fields_1000", |b| {
        b.iter_batched(
            Hash::new,
            |mut h| {
                for f in &fields[..1000] {
                    h.set(f, b"value", &lim);
                }
                h
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn sets(c: &mut Criterion) {
    let lim = Limits::default();
    let mut g = c.benchmark_group("set");
    let members = names("member:", 100_000);
    let ints: Vec<Vec<u8>> = (0..512).map(|i: u32| i.to_string().into_bytes()).collect();
    let mut intset = Set::new_intset();
    for m in &ints {
        intset.add(m, &lim);
    }
    let mut small = Set::new_listpack();
    for m in &members[..100] {
        small.add(m, &lim);
    }
    let mut big = Set::new_intset();
    for m in &members {
        big.add(m, &lim);
    }
    let mut i = 0;
    g.bench_function("sismember_intset_512", |b| {
        b.iter(|| {
            i = (i + 1) % ints.len();
            black_box(intset.contains(&ints[i]))
        })
    });
    g.bench_function("sismember_listpack_100", |b| {
        b.iter(|| {
            i = (i + 1) % 100;
            black_box(small.contains(&members[i]))
        })
    });
    g.bench_function("sismember_hashtable_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % members.len();
            black_box(big.contains(&members[i]))
        })
    });
    g.bench_function("sadd_srem_hashtable_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % members.len();
            big.remove(&members[i]);
            black_box(big.add(&members[i], &lim))
        })
    });
    g.bench_function("sadd_new_members_1000", |b| {
        b.iter_batched(
            Set::new_intset,
            |mut s| {
                for m in &members[..1000] {
                    s.add(m, &lim);
                }
                s
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

fn zsets(c: &mut Criterion) {
    let lim = Limits::default();
    let mut g = c.benchmark_group("zset");
    let members = names("member:", 100_000);
    let mut small = ZSet::new();
    for (i, m) in members[..100].iter().enumerate() {
        small.add(m, i as f64, AddFlags::default(), &lim).ok();
    }
    let mut big = ZSet::new();
    for (i, m) in members.iter().enumerate() {
        big.add(m, (i * 7 % 100_000) as f64, AddFlags::default(), &lim).ok();
    }
    let mut i = 0;
    g.bench_function("zadd_update_listpack_100", |b| {
        b.iter(|| {
            i = (i + 1) % 100;
            black_box(small.add(&members[i], (i * 31 % 1000) as f64, AddFlags::default(), &lim))
        })
    });
    g.bench_function("zadd_update_skiplist_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % members.len();
            black_box(big.add(&members[i], (i * 31 % 100_000) as f64, AddFlags::default(), &lim))
        })
    });
    g.bench_function("zrank_skiplist_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % members.len();
            black_box(big.rank(&members[i], false))
        })
    });
    g.bench_function("zscore_skiplist_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % members.len();
            black_box(big.score(&members[i]))
        })
    });
    g.bench_function("zrange_by_rank_10_skiplist_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % 99_000;
            black_box(big.range_by_rank(i as i64, i as i64 + 9, false).count())
        })
    });
    g.bench_function("zrangebyscore_10_skiplist_100k", |b| {
        b.iter(|| {
            i = (i + 7919) % 99_000;
            let r = ScoreRange::new(i as f64, false, f64::INFINITY, false);
            black_box(big.range_by_score(&r, false, 0, Some(10)).count())
        })
    });
    g.bench_function("zrange_all_listpack_100", |b| {
        b.iter(|| black_box(small.range_by_rank(0, -1, false).count()))
    });
    g.bench_function("zpopmin_zadd_skiplist_100k", |b| {
        b.iter(|| {
            let popped = big.pop(false, 1);
            for (m, s) in &popped {
                big.add(m, s + 100_000.0, AddFlags::default(), &lim).ok();
            }
            black_box(popped.len())
        })
    });
    g.finish();
}

criterion_group!(benches, lists, hashes, sets, zsets);
criterion_main!(benches);
