//! [`ScanTable`]: the hash table behind big hashes, sets and sorted-set
//! indexes. It grows without whole-table rehash pauses and gives
//! HSCAN/SSCAN/ZSCAN a cursor that survives any resize.
//!
//! Design: extendible hashing. Each element has a fixed 64-bit hash (xxh3
//! with a per-process seed). The table is a set of *segments*, each a small
//! hashbrown table holding every element whose hash starts with the
//! segment's bit prefix; a directory indexed by the top `depth` bits points
//! at them. A full segment splits in two by its next prefix bit (moving at
//! most [`SEGMENT_MAX`] elements, so no insert pauses for long); two sparse
//! buddies merge back; the directory doubles or halves as depths demand.
//!
//! Why this shape (see also ARCHITECTURE.md on SCAN): hashbrown moves
//! entries on every resize, so a bucket index cannot be a cursor. Here the
//! cursor is a *hash position*: a call returns every element whose hash lies
//! in a window `[cursor, next)` and returns `next`; windows tile the hash
//! space from 0 to 2^64 (cursor 0 again = done). An element present for the
//! whole scan has a fixed hash, so exactly one window covers it and the call
//! for that window returns it, whatever splits or merges happened between
//! calls. A window is one segment's range, or a prefix of it sorted by hash
//! when the segment holds more than COUNT elements, so a call costs at most
//! one segment's worth of work.
//!
//! Inside a segment all hashes share their top bits, so hashbrown gets the
//! hash multiplied by an odd constant: its control byte (top 7 bits) then
//! depends on every bit and its bucket index (low bits) on the low bits,
//! which the prefix does not touch.

use crate::sample::below;
use hashbrown::HashTable;
use std::sync::OnceLock;

/// Elements per segment before it splits: 512 hashbrown buckets at 7/8 load.
pub const SEGMENT_MAX: usize = 448;
/// Segments merge with their buddy when both together fit in this.
const MERGE_BELOW: usize = SEGMENT_MAX / 2;

static SEED: OnceLock<u64> = OnceLock::new();

/// Sets the hash seed once, at start-up, before any table exists (so that
/// clients cannot pick members that collide). Returns false if a seed was
/// already fixed (by an earlier call or by a table built before it): every
/// table must hash with the same seed for its whole life.
pub fn init_hash_seed(seed: u64) -> bool {
    SEED.set(seed).is_ok()
}

#[inline]
fn seed() -> u64 {
    *SEED.get_or_init(|| 0x243F_6A88_85A3_08D3)
}

/// The fixed hash of an element's key; also its SCAN position.
#[inline]
pub fn hash_key(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, seed())
}

/// The hash hashbrown sees inside a segment (see the module docs).
#[inline]
fn inner(h: u64) -> u64 {
    h.wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

/// What a [`ScanTable`] stores: something with a key.
pub trait Keyed {
    fn key(&self) -> &[u8];
    /// Heap bytes the element owns beyond its own size (MEMORY USAGE).
    fn heap_size(&self) -> usize;
}

#[derive(Clone)]
struct Segment<E> {
    table: HashTable<E>,
    /// The top `depth` bits every hash in this segment starts with.
    prefix: u64,
    depth: u32,
}

impl<E> Segment<E> {
    /// First hash position of the segment's range.
    fn start(&self) -> u64 {
        if self.depth == 0 {
            0
        } else {
            self.prefix << (64 - self.depth)
        }
    }

    /// First position past the range; None when the range ends at 2^64.
    fn end(&self) -> Option<u64> {
        let size = 1u128 << (64 - self.depth);
        let end = self.start() as u128 + size;
        u64::try_from(end).ok()
    }
}

#[derive(Clone)]
pub struct ScanTable<E> {
    /// 2^depth entries, each the index of the segment covering that prefix.
    dir: Vec<u32>,
    depth: u32,
    segments: Vec<Segment<E>>,
    /// Segments whose depth equals the directory's (0 lets it halve).
    at_full_depth: usize,
    len: usize,
    /// Heap bytes owned by the elements themselves.
    heap: usize,
}

impl<E: std::fmt::Debug> std::fmt::Debug for ScanTable<E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.segments.iter().flat_map(|s| s.table.iter())).finish()
    }
}

impl<E: Keyed> Default for ScanTable<E> {
    fn default() -> Self {
        Self::with_capacity(0)
    }
}

impl<E: Keyed> ScanTable<E> {
    /// A table sized for `n` elements without splits (Redis's `dictExpand`
    /// on conversion).
    pub fn with_capacity(n: usize) -> Self {
        let mut depth = 0;
        while (n >> depth) > SEGMENT_MAX * 3 / 4 && depth < 20 {
            depth += 1;
        }
        let count = 1usize << depth;
        let per = (n >> depth).min(SEGMENT_MAX);
        let segments = (0..count)
            .map(|p| Segment { table: HashTable::with_capacity(per), prefix: p as u64, depth })
            .collect();
        ScanTable {
            dir: (0..count as u32).collect(),
            depth,
            segments,
            at_full_depth: count,
            len: 0,
            heap: 0,
        }
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline]
    fn dir_index(&self, h: u64) -> usize {
        if self.depth == 0 {
            0
        } else {
            (h >> (64 - self.depth)) as usize
        }
    }

    #[inline]
    fn segment_of(&self, h: u64) -> usize {
        self.dir[self.dir_index(h)] as usize
    }

    #[inline]
    pub fn get(&self, key: &[u8]) -> Option<&E> {
        let h = hash_key(key);
        self.segments[self.segment_of(h)].table.find(inner(h), |e| e.key() == key)
    }

    #[inline]
    pub fn contains(&self, key: &[u8]) -> bool {
        self.get(key).is_some()
    }

    /// Inserts `entry`, returning the element it replaced (same key).
    pub fn insert(&mut self, entry: E) -> Option<E> {
        let h = hash_key(entry.key());
        let si = self.segment_of(h);
        let seg = &mut self.segments[si];
        if let Some(slot) = seg.table.find_mut(inner(h), |e| e.key() == entry.key()) {
            self.heap = self.heap - slot.heap_size() + entry.heap_size();
            return Some(std::mem::replace(slot, entry));
        }
        self.insert_absent(h, si, entry);
        None
    }

    /// Inserts an element the caller knows is absent.
    pub fn insert_new(&mut self, entry: E) {
        let h = hash_key(entry.key());
        let si = self.segment_of(h);
        debug_assert!(self.get(entry.key()).is_none());
        self.insert_absent(h, si, entry);
    }

    fn insert_absent(&mut self, h: u64, mut si: usize, entry: E) {
        if self.segments[si].table.len() >= SEGMENT_MAX && self.segments[si].depth < 64 {
            self.split(si);
            si = self.segment_of(h);
        }
        self.heap += entry.heap_size();
        self.len += 1;
        self.segments[si].table.insert_unique(inner(h), entry, |e| inner(hash_key(e.key())));
    }

    /// Removes and returns the element with `key`.
    pub fn remove(&mut self, key: &[u8]) -> Option<E> {
        let h = hash_key(key);
        let si = self.segment_of(h);
        let entry = self.segments[si].table.find_entry(inner(h), |e| e.key() == key).ok()?;
        let (removed, _) = entry.remove();
        self.len -= 1;
        self.heap -= removed.heap_size();
        self.after_remove(si);
        Some(removed)
    }

    /// Splits segment `si` by its next prefix bit.
    fn split(&mut self, si: usize) {
        let depth = self.segments[si].depth;
        if depth == self.depth {
            self.double_directory();
        }
        let bit = 1u64 << (63 - depth);
        let seg = &mut self.segments[si];
        let moved: Vec<E> = seg.table.extract_if(|e| hash_key(e.key()) & bit != 0).collect();
        let mut table = HashTable::with_capacity(moved.len());
        for e in moved {
            table.insert_unique(inner(hash_key(e.key())), e, |x| inner(hash_key(x.key())));
        }
        seg.prefix <<= 1;
        seg.depth = depth + 1;
        let new = Segment { table, prefix: seg.prefix | 1, depth: depth + 1 };
        let ni = self.segments.len();
        self.point_directory(new.prefix, new.depth, ni);
        self.segments.push(new);
        if depth + 1 == self.depth {
            self.at_full_depth += 2;
        }
    }

    fn double_directory(&mut self) {
        self.dir = self.dir.iter().flat_map(|&s| [s, s]).collect();
        self.depth += 1;
        self.at_full_depth = 0;
    }

    /// Points the directory entries of the range `prefix`/`depth` at
    /// segment `si`.
    fn point_directory(&mut self, prefix: u64, depth: u32, si: usize) {
        let shift = self.depth - depth;
        let first = (prefix << shift) as usize;
        for slot in &mut self.dir[first..first + (1usize << shift)] {
            *slot = si as u32;
        }
    }

    /// Keeps sparse tables small: merge with the buddy segment when both fit
    /// in half a segment, otherwise give back an oversized hashbrown table.
    fn after_remove(&mut self, si: usize) {
        let seg = &self.segments[si];
        if seg.depth > 0 && seg.table.len() < MERGE_BELOW / 2 {
            let buddy_prefix = seg.prefix ^ 1;
            let buddy_start = buddy_prefix << (64 - seg.depth);
            let bi = self.segment_of(buddy_start);
            let buddy = &self.segments[bi];
            if bi != si
                && buddy.depth == seg.depth
                && buddy.table.len() + seg.table.len() <= MERGE_BELOW
            {
                self.merge(si.min(bi), si.max(bi));
                return;
            }
        }
        let seg = &mut self.segments[si];
        if seg.table.capacity() > 64 && seg.table.len() * 4 < seg.table.capacity() {
            let len = seg.table.len();
            seg.table.shrink_to(len, |e| inner(hash_key(e.key())));
        }
    }

    /// Merges buddies `a` and `b` (`a < b`) into `a`, removing `b`.
    fn merge(&mut self, a: usize, b: usize) {
        let was_full_depth = self.segments[a].depth == self.depth;
        let other = self.segments.swap_remove(b);
        // The segment that was last now sits at `b`.
        if b < self.segments.len() {
            let (prefix, depth) = (self.segments[b].prefix, self.segments[b].depth);
            self.point_directory(prefix, depth, b);
        }
        let seg = &mut self.segments[a];
        seg.depth -= 1;
        seg.prefix >>= 1;
        seg.table.reserve(other.table.len(), |e| inner(hash_key(e.key())));
        for e in other.table {
            seg.table.insert_unique(inner(hash_key(e.key())), e, |x| inner(hash_key(x.key())));
        }
        let (prefix, depth) = (seg.prefix, seg.depth);
        self.point_directory(prefix, depth, a);
        if was_full_depth {
            self.at_full_depth -= 2;
            if self.at_full_depth == 0 {
                self.halve_directory();
            }
        }
    }

    fn halve_directory(&mut self) {
        while self.depth > 0 && self.at_full_depth == 0 {
            self.dir = self.dir.iter().step_by(2).copied().collect();
            self.depth -= 1;
            self.at_full_depth = self.segments.iter().filter(|s| s.depth == self.depth).count();
        }
        if self.dir.capacity() > 4 * self.dir.len() {
            self.dir.shrink_to_fit();
        }
        if self.segments.capacity() > 4 * self.segments.len() {
            self.segments.shrink_to_fit();
        }
    }

    /// Iterates every element (in no particular order).
    pub fn iter(&self) -> impl Iterator<Item = &E> + '_ {
        self.segments.iter().flat_map(|s| s.table.iter())
    }

    /// A uniformly random element: a random segment accepted with
    /// probability len/[`SEGMENT_MAX`] (rejection keeps it exactly uniform
    /// whatever the segment sizes), then a random element inside it.
    pub fn random(&self, rng: &mut (impl FnMut() -> u64 + ?Sized)) -> Option<&E> {
        if self.len == 0 {
            return None;
        }
        if self.segments.len() > 1 {
            for _ in 0..64 {
                let seg = &self.segments[below(rng, self.segments.len())];
                let r = below(rng, SEGMENT_MAX);
                if r < seg.table.len() {
                    return seg.table.iter().nth(r);
                }
            }
        }
        // One segment, or a very sparse table: a weighted walk.
        let mut k = below(rng, self.len);
        for seg in &self.segments {
            if k < seg.table.len() {
                return seg.table.iter().nth(k);
            }
            k -= seg.table.len();
        }
        None
    }

    /// One SCAN step from hash position `cursor`: calls `f` for every
    /// element in a window `[cursor, next)` holding about `count` elements
    /// and returns `next` (0 when the window reached the end).
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(&'a E)) -> u64 {
        let count = count.max(1);
        let mut pos = cursor;
        let mut emitted = 0;
        // Empty or sparse segments: visit a bounded number per call, as
        // Redis bounds empty buckets per SCAN call.
        for _ in 0..count.saturating_mul(4).max(16) {
            let seg = &self.segments[self.segment_of(pos)];
            let mut window: Vec<(u64, &E)> = seg
                .table
                .iter()
                .filter_map(|e| {
                    let h = hash_key(e.key());
                    (h >= pos).then_some((h, e))
                })
                .collect();
            let room = count - emitted;
            if window.len() > room {
                window.sort_unstable_by_key(|w| w.0);
                let mut take = room;
                // Never split equal hashes across windows.
                while take < window.len() && window[take].0 == window[take - 1].0 {
                    take += 1;
                }
                for (_, e) in &window[..take] {
                    f(e);
                }
                if take < window.len() {
                    return window[take].0;
                }
            } else {
                for (_, e) in &window {
                    f(e);
                }
                emitted += window.len();
            }
            match seg.end() {
                None => return 0,
                Some(end) => pos = end,
            }
            if emitted >= count {
                break;
            }
        }
        pos
    }

    /// Bytes owned: directory, segment headers, hashbrown allocations and the
    /// elements' own heap (not `size_of::<Self>()`).
    pub fn heap_size(&self) -> usize {
        self.dir.capacity() * 4
            + self.segments.capacity() * std::mem::size_of::<Segment<E>>()
            + self.segments.iter().map(|s| s.table.allocation_size()).sum::<usize>()
            + self.heap
    }

    #[cfg(test)]
    fn segment_count(&self) -> usize {
        self.segments.len()
    }

    #[cfg(test)]
    fn check_invariants(&self) {
        assert_eq!(self.dir.len(), 1 << self.depth);
        let mut total = 0;
        for (si, seg) in self.segments.iter().enumerate() {
            assert!(seg.depth <= self.depth);
            let shift = self.depth - seg.depth;
            let first = (seg.prefix << shift) as usize;
            for &d in &self.dir[first..first + (1 << shift)] {
                assert_eq!(d as usize, si);
            }
            for e in seg.table.iter() {
                assert_eq!(self.segment_of(hash_key(e.key())), si);
            }
            total += seg.table.len();
        }
        assert_eq!(total, self.len);
        assert_eq!(
            self.at_full_depth,
            self.segments.iter().filter(|s| s.depth == self.depth).count()
        );
        assert_eq!(self.heap, self.iter().map(|e| e.heap_size()).sum::<usize>());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::test_rng;
    use std::collections::HashSet;

    #[derive(Clone, Debug, PartialEq)]
    struct Member(Vec<u8>);

    impl Keyed for Member {
        fn key(&self) -> &[u8] {
            &self.0
        }
        fn heap_size(&self) -> usize {
            self.0.capacity()
        }
    }

    fn m(i: u64) -> Member {
        Member(format!("member:{i}").into_bytes())
    }

    #[test]
    fn grows_by_splitting_and_shrinks_by_merging() {
        let mut t = ScanTable::default();
        for i in 0..20_000 {
            assert!(t.insert(m(i)).is_none());
        }
        t.check_invariants();
        assert_eq!(t.len(), 20_000);
        assert!(t.segment_count() >= 20_000 / SEGMENT_MAX);
        assert!(t.insert(m(5)).is_some());
        assert_eq!(t.len(), 20_000);
        for i in 0..20_000 {
            assert!(t.contains(&m(i).0));
        }
        for i in 0..19_990 {
            assert_eq!(t.remove(&m(i).0), Some(m(i)));
        }
        assert!(t.remove(b"nope").is_none());
        t.check_invariants();
        assert_eq!(t.len(), 10);
        assert!(t.segment_count() < 8, "sparse buddies merge: {}", t.segment_count());
        assert!(t.heap_size() < 4096, "{}", t.heap_size());
    }

    #[test]
    fn random_operations_match_a_hashset() {
        let mut rng = test_rng(99);
        let mut t = ScanTable::default();
        let mut model = HashSet::new();
        for step in 0..60_000u64 {
            let i = below(&mut rng, 3000 + (step as usize / 10)) as u64;
            if below(&mut rng, 5) < 2 {
                assert_eq!(t.remove(&m(i).0).is_some(), model.remove(&i));
            } else {
                assert_eq!(t.insert(m(i)).is_none(), model.insert(i));
            }
            if step % 5000 == 0 {
                t.check_invariants();
            }
        }
        t.check_invariants();
        let mut seen: Vec<Vec<u8>> = t.iter().map(|e| e.0.clone()).collect();
        seen.sort();
        let mut want: Vec<Vec<u8>> = model.iter().map(|&i| m(i).0).collect();
        want.sort();
        assert_eq!(seen, want);
    }

    #[test]
    fn random_is_uniform_across_segments() {
        let mut rng = test_rng(5);
        let mut t = ScanTable::default();
        for i in 0..3000 {
            t.insert(m(i));
        }
        assert!(t.segment_count() > 4);
        // Segments differ in size; a fair draw hits each in proportion to it.
        let mut hits = vec![0f64; t.segment_count()];
        let draws = 60_000;
        for _ in 0..draws {
            let e = t.random(&mut rng).unwrap();
            hits[t.segment_of(hash_key(&e.0))] += 1.0;
        }
        for (si, seg) in t.segments.iter().enumerate() {
            let expected = draws as f64 * seg.table.len() as f64 / t.len() as f64;
            let tolerance = 5.0 * expected.sqrt();
            assert!(
                (hits[si] - expected).abs() < tolerance,
                "segment {si}: {} vs {expected}",
                hits[si]
            );
        }
    }

    /// SCAN's contract under concurrent change: everything present for the
    /// whole scan is returned, nothing never present is.
    #[test]
    fn scan_returns_every_stable_element_across_resizes() {
        let mut rng = test_rng(17);
        for count in [1usize, 10, 100, 1000] {
            let mut t = ScanTable::default();
            for i in 0..3000 {
                t.insert(m(i));
            }
            let stable: HashSet<Vec<u8>> = (0..1500).map(|i| m(i).0).collect();
            let mut ever: HashSet<Vec<u8>> = t.iter().map(|e| e.0.clone()).collect();
            let mut seen = HashSet::new();
            let mut cursor = 0;
            let mut calls = 0;
            let mut next_new = 10_000;
            loop {
                cursor = t.scan(cursor, count, |e| {
                    seen.insert(e.0.clone());
                });
                calls += 1;
                // Churn between calls: grow (splits) and shrink (merges)
                // around the stable half.
                // Churn slower than the scan advances, or it never ends.
                for _ in 0..(count / 2).clamp(1, 50) {
                    if calls % 7 < 4 {
                        t.insert(m(next_new));
                        ever.insert(m(next_new).0);
                        next_new += 1;
                    } else {
                        let victim = 1500 + below(&mut rng, 100_000) as u64;
                        t.remove(&m(victim).0);
                    }
                }
                if cursor == 0 {
                    break;
                }
                assert!(calls < 100_000);
            }
            t.check_invariants();
            for s in &stable {
                assert!(seen.contains(s), "count {count}: missed {:?}", String::from_utf8_lossy(s));
            }
            assert!(seen.iter().all(|s| ever.contains(s)));
            if count >= 100 {
                assert!(calls < 3000 / count * 4 + 50, "count {count}: {calls} calls");
            }
        }
    }

    #[test]
    fn scan_of_an_empty_or_tiny_table_finishes_in_one_call() {
        let t: ScanTable<Member> = ScanTable::default();
        assert_eq!(t.scan(0, 10, |_| panic!("empty")), 0);
        let mut t = ScanTable::default();
        t.insert(m(1));
        let mut n = 0;
        assert_eq!(t.scan(0, 10, |_| n += 1), 0);
        assert_eq!(n, 1);
        // An arbitrary cursor is just a position: never an error or a loop.
        assert_eq!(t.scan(u64::MAX, 10, |_| {}), 0);
    }

    #[test]
    fn presized_tables_hold_their_capacity_without_splitting() {
        let mut t = ScanTable::with_capacity(1000);
        let before = t.segment_count();
        for i in 0..1000 {
            t.insert(m(i));
        }
        t.check_invariants();
        assert!(t.segment_count() <= before * 2);
    }
}
