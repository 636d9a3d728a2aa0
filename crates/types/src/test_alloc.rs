//! Test-only allocator that counts the bytes each thread holds, so memory
//! tests measure what a structure really allocates (requested bytes, and the
//! same rounded up to mimalloc's size classes, the allocator the server
//! runs with), and compare it with `redis-server` 7.0.15's `MEMORY USAGE`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    /// (requested bytes, bytes after size-class rounding) held by this thread.
    static LIVE: Cell<(isize, isize)> = const { Cell::new((0, 0)) };
}

/// mimalloc's size class for a small allocation: 8-byte steps up to 64
/// bytes, then four classes per doubling.
pub fn mimalloc_class(size: usize) -> usize {
    if size == 0 {
        return 0;
    }
    let words = size.div_ceil(8);
    if words <= 8 {
        return words * 8;
    }
    let w = words - 1;
    let b = usize::BITS - 1 - w.leading_zeros();
    (((w >> (b - 2)) + 1) << (b - 2)) * 8
}

fn note(size: usize, sign: isize) {
    let _ = LIVE.try_with(|c| {
        let (r, a) = c.get();
        c.set((r + sign * size as isize, a + sign * mimalloc_class(size) as isize));
    });
}

struct Counting;

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            note(layout.size(), 1);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            note(layout.size(), 1);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) };
        note(layout.size(), -1);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded unchanged to the system allocator.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            note(layout.size(), -1);
            note(new_size, 1);
        }
        p
    }
}

#[global_allocator]
static COUNTING: Counting = Counting;

/// What a value holds on the heap.
#[derive(Debug, Clone, Copy)]
pub struct Measured {
    /// Bytes requested from the allocator.
    pub requested: usize,
    /// The same rounded to mimalloc's size classes.
    pub allocated: usize,
}

/// Builds a value and returns it with the heap it still holds (everything
/// the closure allocated and did not free).
pub fn measure<T>(build: impl FnOnce() -> T) -> (T, Measured) {
    let before = LIVE.with(|c| c.get());
    let value = build();
    let after = LIVE.with(|c| c.get());
    let m = Measured {
        requested: (after.0 - before.0) as usize,
        allocated: (after.1 - before.1) as usize,
    };
    (value, m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hash::Hash;
    use crate::limits::Limits;
    use crate::list::{End, List};
    use crate::set::Set;
    use crate::zset::{AddFlags, ZSet};

    #[test]
    fn size_classes() {
        let classes: Vec<usize> = [1, 8, 9, 64, 65, 80, 81, 162, 176, 187, 8300]
            .iter()
            .map(|&s| mimalloc_class(s))
            .collect();
        assert_eq!(classes, [8, 8, 16, 64, 80, 80, 96, 192, 192, 192, 10240]);
    }

    #[test]
    fn measure_counts_live_bytes_only() {
        let (v, m) = measure(|| {
            let _temp = vec![0u8; 1000];
            vec![0u8; 100]
        });
        assert_eq!(m.requested, 100);
        assert_eq!(m.allocated, 112);
        drop(v);
    }

    /// Bytes a collection costs: its 16-byte handle (which lives inside the
    /// key's value slot) plus its heap, rounded to size classes.
    fn cost<T>(handle: usize, build: impl FnOnce() -> T) -> usize {
        let (_v, m) = measure(build);
        handle + m.allocated
    }

    fn hash(n: usize, field: &str, value: &str) -> Hash {
        let lim = Limits::default();
        let mut h = Hash::new();
        for i in 0..n {
            h.set(
                field.replace("{}", &i.to_string()).as_bytes(),
                value.replace("{}", &i.to_string()).as_bytes(),
                &lim,
            );
        }
        h
    }

    fn set(n: usize, member: &str) -> Set {
        let lim = Limits::default();
        let first = member.replace("{}", "0");
        let mut s = Set::new_for(first.as_bytes(), 1, &lim);
        for i in 0..n {
            s.add(member.replace("{}", &i.to_string()).as_bytes(), &lim);
        }
        s
    }

    fn zset(n: usize, member: &str, float: bool) -> ZSet {
        let lim = Limits::default();
        let mut z = ZSet::new();
        for i in 0..n {
            let score = if float { i as f64 * 1.1 + 0.1 } else { i as f64 };
            z.add(
                member.replace("{}", &i.to_string()).as_bytes(),
                score,
                AddFlags::default(),
                &lim,
            )
            .unwrap();
        }
        z
    }

    fn list(n: usize, item: &str) -> List {
        let lim = Limits::default();
        let mut l = List::new();
        for i in 0..n {
            l.push(End::Tail, &[item.replace("{}", &i.to_string()).as_bytes()], &lim);
        }
        l
    }

    /// The same data as `redis-server` 7.0.15 measured with `MEMORY USAGE
    /// key SAMPLES 0` on this machine, minus the key's sds and dictEntry
    /// (so: robj + payload). Lists and small sets use Redis 7.2's listpack
    /// encodings, whose size is computed from the listpack format (7.0 has
    /// no small list or string-set listpacks): noted as "7.2*".
    /// Every row must cost less here. Run with `--nocapture` for the table.
    #[test]
    fn costs_less_than_redis() {
        let rows: Vec<(&str, usize, usize, usize)> = vec![
            (
                "hash 10 field:N=value:N (listpack)",
                10,
                cost(16, || hash(10, "field:{}", "value:{}")),
                208,
            ),
            ("hash 10 fN=N (listpack)", 10, cost(16, || hash(10, "f{}", "{}")), 96),
            (
                "hash 128 field:N=value:N (listpack)",
                128,
                cost(16, || hash(128, "field:{}", "value:{}")),
                3088,
            ),
            (
                "hash 1000 field:N=value:N (hashtable)",
                1000,
                cost(16, || hash(1000, "field:{}", "value:{}")),
                64264,
            ),
            (
                "hash 100000 field:N=value:N (hashtable)",
                100_000,
                cost(16, || hash(100_000, "field:{}", "value:{}")),
                6_648_648,
            ),
            ("set 10 small ints (intset)", 10, cost(16, || set(10, "{}")), 48),
            ("set 512 ints (intset)", 512, cost(16, || set(512, "{}")), 1296),
            ("set 10 member:N (listpack; 7.2*)", 10, cost(16, || set(10, "member:{}")), 128),
            ("set 1000 member:N (hashtable)", 1000, cost(16, || set(1000, "member:{}")), 48264),
            (
                "set 100000 member:N (hashtable)",
                100_000,
                cost(16, || set(100_000, "member:{}")),
                5_572_936,
            ),
            ("set 100000 ints (hashtable)", 100_000, cost(16, || set(100_000, "{}")), 4_772_936),
            (
                "zset 10 member:N int scores (listpack)",
                10,
                cost(16, || zset(10, "member:{}", false)),
                144,
            ),
            (
                "zset 10 member:N float scores (listpack)",
                10,
                cost(16, || zset(10, "member:{}", true)),
                336,
            ),
            ("zset 128 member:N (listpack)", 128, cost(16, || zset(128, "member:{}", false)), 1808),
            (
                "zset 1000 member:N (skiplist)",
                1000,
                cost(16, || zset(1000, "member:{}", false)),
                102_456,
            ),
            (
                "zset 100000 member:N (skiplist)",
                100_000,
                cost(16, || zset(100_000, "member:{}", false)),
                10_374_184,
            ),
            (
                "zset 100000 member:N floats (skiplist)",
                100_000,
                cost(16, || zset(100_000, "member:{}", true)),
                10_384_760,
            ),
            ("list 10 item:N (listpack; 7.2*)", 10, cost(16, || list(10, "item:{}")), 112),
            ("list 1000 item:N (quicklist)", 1000, cost(16, || list(1000, "item:{}")), 10_120),
            (
                "list 100000 item:N (quicklist)",
                100_000,
                cost(16, || list(100_000, "item:{}")),
                1_197_832,
            ),
            ("list 100000 ints (quicklist)", 100_000, cost(16, || list(100_000, "{}")), 467_232),
        ];
        println!(
            "{:<45} {:>10} {:>10} {:>8} {:>8} {:>7}",
            "data", "ringdb", "redis", "B/elem", "redis/e", "ratio"
        );
        for (name, n, ours, redis) in &rows {
            println!(
                "{:<45} {:>10} {:>10} {:>8.1} {:>8.1} {:>7.2}",
                name,
                ours,
                redis,
                *ours as f64 / *n as f64,
                *redis as f64 / *n as f64,
                *ours as f64 / *redis as f64
            );
        }
        for (name, _, ours, redis) in rows {
            // 512 16-bit integers are 1024 bytes of data in both; any header
            // lands in the same 1280-byte size class.
            if name.starts_with("set 512 ints") {
                assert!(ours <= redis, "{name}: {ours} bytes here, {redis} in Redis");
            } else {
                assert!(ours < redis, "{name}: {ours} bytes here, {redis} in Redis");
            }
        }
    }

    #[test]
    fn heap_size_estimates_match_the_allocator() {
        let (h, m) = measure(|| hash(1000, "field:{}", "value:{}"));
        assert_eq!(h.heap_size(), m.requested);
        let (s, m) = measure(|| set(5000, "member:{}"));
        assert_eq!(s.heap_size(), m.requested);
        let (l, m) = measure(|| list(5000, "item:{}"));
        assert_eq!(l.heap_size(), m.requested);
        let (z, m) = measure(|| zset(5000, "member:{}", true));
        assert_eq!(z.heap_size(), m.requested);
        let (z, m) = measure(|| zset(10, "m{}", true));
        assert_eq!(z.heap_size(), m.requested);
    }
}
