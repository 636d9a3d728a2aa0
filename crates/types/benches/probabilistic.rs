//! Criterion benches for the probabilistic types: HyperLogLog PFADD and
//! PFCOUNT (sparse, dense, and the union of 16 keys), Bloom filter BF.ADD
//! and BF.EXISTS.

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use ringdb_types::bloom::BloomFilter;
use ringdb_types::hll::{self, REGISTERS};

const SPARSE_MAX: usize = hll::DEFAULT_SPARSE_MAX_BYTES;

fn hll_of(prefix: &str, n: usize) -> Vec<u8> {
    let mut h = hll::new_sparse();
    for i in 0..n {
        hll::add(&mut h, format!("{prefix}{i}").as_bytes(), SPARSE_MAX).unwrap();
    }
    h
}

fn hyperloglog(c: &mut Criterion) {
    let mut g = c.benchmark_group("hll");
    // PFADD of new elements into a dense HLL (the steady state of a big one)
    // and into a sparse one (which keeps splitting opcodes).
    let mut dense = hll_of("d", 100_000);
    let mut i = 0u64;
    g.bench_function("pfadd_dense", |b| {
        b.iter(|| {
            i += 1;
            black_box(hll::add(&mut dense, &i.to_le_bytes(), SPARSE_MAX).unwrap())
        })
    });
    let sparse_start = hll_of("s", 500);
    let mut sparse = sparse_start.clone();
    let mut j = 0u64;
    g.bench_function("pfadd_sparse_500", |b| {
        b.iter(|| {
            j += 1;
            // Start over now and then, so the HLL stays sparse at about the
            // same size.
            if j.is_multiple_of(200) {
                sparse.clone_from(&sparse_start);
            }
            black_box(hll::add(&mut sparse, &j.to_le_bytes(), SPARSE_MAX).unwrap())
        })
    });
    // PFCOUNT with a stale cache: the estimate itself.
    let sparse = hll_of("s", 1000);
    assert_eq!(hll::encoding(&sparse), hll::Encoding::Sparse);
    g.bench_function("pfcount_sparse_1000", |b| b.iter(|| black_box(hll::count(&sparse))));
    let dense = hll_of("d", 100_000);
    g.bench_function("pfcount_dense", |b| b.iter(|| black_box(hll::count(&dense))));
    let mut cached = dense.clone();
    hll::cached_count(&mut cached).unwrap();
    g.bench_function("pfcount_cached", |b| b.iter(|| black_box(hll::cached_count(&mut cached))));
    // PFCOUNT of 16 keys: 8 dense and 8 sparse, merged then counted.
    let keys: Vec<Vec<u8>> = (0..16)
        .map(|k| {
            if k % 2 == 0 {
                hll_of(&format!("k{k}:"), 20_000)
            } else {
                hll_of(&format!("k{k}:"), 500)
            }
        })
        .collect();
    g.bench_function("pfcount_union_16", |b| {
        b.iter(|| {
            let mut max = [0u8; REGISTERS];
            for k in &keys {
                hll::merge_into(&mut max, k).unwrap();
            }
            black_box(hll::count_registers(&max))
        })
    });
    g.finish();
}

fn bloom(c: &mut Criterion) {
    let mut g = c.benchmark_group("bloom");
    let max = 1 << 30;
    // BF.ADD of new items into a 1M-item filter (1.4 MB of bits) half full;
    // started over before it fills, so that it never grows a second link.
    let mut half_full = BloomFilter::new(1_000_000, 0.01, 2, true, max).unwrap();
    for i in 0..500_000u64 {
        half_full.add(&i.to_le_bytes(), max);
    }
    let mut filter = half_full.clone();
    let mut next = 1_000_000u64;
    g.bench_function("bf_add_1m", |b| {
        b.iter(|| {
            next += 1;
            if next.is_multiple_of(400_000) {
                filter.clone_from(&half_full);
            }
            black_box(filter.add(&next.to_le_bytes(), max))
        })
    });
    // BF.EXISTS in a full 1M-item filter, and in a small one that fits in
    // the CPU's caches.
    let mut full = BloomFilter::new(1_000_000, 0.01, 2, true, max).unwrap();
    for i in 0..1_000_000u64 {
        full.add(&i.to_le_bytes(), max);
    }
    assert_eq!(full.links().len(), 1);
    let mut small = BloomFilter::new(10_000, 0.01, 2, true, max).unwrap();
    for i in 0..10_000u64 {
        small.add(&i.to_le_bytes(), max);
    }
    let mut probe = 0u64;
    g.bench_function("bf_exists_present_1m", |b| {
        b.iter(|| {
            probe = (probe + 7) % 1_000_000;
            black_box(full.contains(&probe.to_le_bytes()))
        })
    });
    let mut absent = u64::MAX / 2;
    g.bench_function("bf_exists_absent_1m", |b| {
        b.iter(|| {
            absent += 1;
            black_box(full.contains(&absent.to_le_bytes()))
        })
    });
    g.bench_function("bf_exists_present_10k", |b| {
        b.iter(|| {
            probe = (probe + 7) % 10_000;
            black_box(small.contains(&probe.to_le_bytes()))
        })
    });
    g.finish();
}

criterion_group!(benches, hyperloglog, bloom);
criterion_main!(benches);
