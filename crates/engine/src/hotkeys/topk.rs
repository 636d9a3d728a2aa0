//! The heavy-hitters sketch behind `HOTKEYS TOP`: HeavyKeeper (Yang et al.,
//! "HeavyKeeper: An Accurate Algorithm for Finding Top-k Elephant Flows",
//! as RedisBloom's TOPK and Dragonfly's top keys use it).
//!
//! A `DEPTH × WIDTH` array of buckets holds a key fingerprint and a count
//! (laid out so that a key's buckets share one cache line, see [`line_of`]).
//! An access increments the buckets that hold its fingerprint (one per row);
//! a bucket held by another key decays by one with probability
//! `DECAY^count`, and is taken over when it reaches zero. Big counts almost
//! never decay, so heavy keys keep their buckets while the tail fights over
//! the rest. Next to the array, the `k` keys with the largest estimates are
//! kept with their names. Memory is fixed: the array plus `k` names.
//!
//! Counts are halved every [`HALF_LIFE_MS`] so that the list reflects what
//! is accessed now rather than since start-up.

use bytes::Bytes;

const WIDTH: usize = 2048;
const DEPTH: usize = 4;
/// Buckets of one row in a cache line, and the lines of the array (see
/// [`line_of`]).
const COLUMNS: usize = 2;
const LINES: usize = WIDTH / COLUMNS;
/// HeavyKeeper's `b` is 1.08; decay happens with probability `b^-count`.
const DECAY: f64 = 1.0 / 1.08;
/// From this count on the decay probability is taken as zero (< 1e-8).
const NO_DECAY_FROM: usize = 256;
/// Keys each shard names in its list.
pub const K: usize = 64;
/// Longest key name kept in the list (longer names are cut: the list is for
/// people to read, and this bounds its memory).
pub const MAX_NAME: usize = 256;
/// Every this many milliseconds all counts are halved.
pub const HALF_LIFE_MS: u64 = 10_000;

#[derive(Clone, Copy, Default)]
struct Bucket {
    fingerprint: u32,
    count: u32,
}

/// One cache line of buckets: a key's bucket of every row.
#[derive(Clone, Copy, Default)]
#[repr(align(64))]
struct Line([Bucket; DEPTH * COLUMNS]);

/// One of the heaviest keys of a shard, with its estimated access count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TopEntry {
    pub db: usize,
    pub key: Bytes,
    pub count: u64,
    hash: u64,
}

pub struct TopK {
    /// Allocated on the first access, so that a scratch shard state (a
    /// cross-shard command's) costs nothing.
    lines: Vec<Line>,
    list: Vec<TopEntry>,
    /// The smallest count in `list` once it is full (0 before): an access
    /// whose estimate is not above it cannot change the list, so it is not
    /// searched (the common case under a spread-out load).
    list_floor: u64,
    rng: u64,
    last_halving_ms: u64,
}

/// `DECAY^count` as a threshold on a 53-bit random number, per count below
/// [`NO_DECAY_FROM`] (no floating point on the access path).
static DECAY_THRESHOLDS: std::sync::LazyLock<[u64; NO_DECAY_FROM]> =
    std::sync::LazyLock::new(|| {
        std::array::from_fn(|count| (DECAY.powi(count as i32) * (1u64 << 53) as f64) as u64)
    });

impl Default for TopK {
    fn default() -> Self {
        TopK::new(0x9E37_79B9_7F4A_7C15)
    }
}

impl TopK {
    pub fn new(seed: u64) -> Self {
        TopK {
            lines: Vec::new(),
            list: Vec::new(),
            list_floor: 0,
            rng: seed | 1,
            last_halving_ms: 0,
        }
    }

    /// Starts loading the line an access of `(db, key)` will count in (see
    /// [`crate::keyspace::Db::prefetch`]): under a spread-out load the
    /// keyspace pushes the array out of the cache between two accesses.
    pub fn prefetch(&self, db: usize, key: &[u8]) {
        if let Some(line) = self.lines.get(line_of(hash_of(db, key))) {
            crate::keyspace::prefetch_line(line);
        }
    }

    /// Counts one access of `(db, key)`.
    pub fn add(&mut self, db: usize, key: &[u8]) {
        if self.lines.is_empty() {
            self.lines = vec![Line::default(); LINES];
        }
        let hash = hash_of(db, key);
        let fingerprint = (hash >> 32) as u32 | 1;
        let line = line_of(hash);
        let mut estimate = 0u32;
        for row in 0..DEPTH {
            let at = row * COLUMNS + ((hash >> (40 + row)) & 1) as usize;
            let b = self.lines[line].0[at];
            let count = if b.count == 0 || b.fingerprint == fingerprint {
                self.lines[line].0[at] = Bucket { fingerprint, count: b.count.saturating_add(1) };
                b.count.saturating_add(1)
            } else if self.decays(b.count) {
                let left = b.count - 1;
                self.lines[line].0[at] = if left == 0 {
                    Bucket { fingerprint, count: 1 }
                } else {
                    Bucket { fingerprint: b.fingerprint, count: left }
                };
                (left == 0) as u32
            } else {
                0
            };
            estimate = estimate.max(count);
        }
        if estimate as u64 > self.list_floor {
            self.offer(db, key, hash, estimate as u64);
        }
    }

    fn decays(&mut self, count: u32) -> bool {
        if count as usize >= NO_DECAY_FROM {
            return false;
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        (x >> 11) < DECAY_THRESHOLDS[count as usize]
    }

    /// Puts `(db, key)` in the list if its estimate earns it a place.
    fn offer(&mut self, db: usize, key: &[u8], hash: u64, estimate: u64) {
        if let Some(e) = self.list.iter_mut().find(|e| e.hash == hash && e.db == db) {
            let old = e.count;
            e.count = old.max(estimate);
            if old == self.list_floor {
                self.update_floor();
            }
            return;
        }
        let full = self.list.len() >= K;
        let smallest = self.list.iter().enumerate().min_by_key(|(_, e)| e.count);
        let replace = match smallest {
            Some((i, e)) if full && e.count < estimate => Some(i),
            _ if full => return,
            _ => None,
        };
        let name = Bytes::copy_from_slice(&key[..key.len().min(MAX_NAME)]);
        let entry = TopEntry { db, key: name, count: estimate, hash };
        match replace {
            Some(i) => self.list[i] = entry,
            None => self.list.push(entry),
        }
        self.update_floor();
    }

    fn update_floor(&mut self) {
        self.list_floor = if self.list.len() >= K {
            self.list.iter().map(|e| e.count).min().unwrap_or(0)
        } else {
            0
        };
    }

    /// The heaviest keys, largest estimate first, at most `n`.
    pub fn top(&self, n: usize) -> Vec<TopEntry> {
        let mut out = self.list.clone();
        out.sort_by(|a, b| b.count.cmp(&a.count).then_with(|| a.key.cmp(&b.key)));
        out.truncate(n);
        out
    }

    /// Halves every count once per [`HALF_LIFE_MS`] (called by the shard's
    /// periodic tick).
    pub fn age(&mut self, now_ms: u64) {
        if self.last_halving_ms == 0 {
            self.last_halving_ms = now_ms;
        }
        if now_ms < self.last_halving_ms + HALF_LIFE_MS {
            return;
        }
        self.last_halving_ms = now_ms;
        for b in self.lines.iter_mut().flat_map(|l| l.0.iter_mut()) {
            b.count /= 2;
        }
        for e in &mut self.list {
            e.count /= 2;
        }
        self.list.retain(|e| e.count > 0);
        self.update_floor();
    }

    /// Forgets everything (FLUSHALL does not, as Redis keeps LFU counts of
    /// keys it deletes; this is for CONFIG RESETSTAT).
    pub fn clear(&mut self) {
        self.lines.iter_mut().for_each(|l| *l = Line::default());
        self.list.clear();
        self.list_floor = 0;
    }
}

/// The hash an access of `(db, key)` is counted under.
fn hash_of(db: usize, key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, db as u64)
}

/// The cache line of a key's buckets. The array is laid out in lines
/// of `DEPTH × COLUMNS` buckets (64 bytes): a key's bucket of each row is in
/// one line, so an access costs one cache miss rather than one per row.
/// Rows stay distinct counters (each row picks its column with its own hash
/// bit); two keys meet in a row only if they share a line and that bit.
fn line_of(hash: u64) -> usize {
    let mixed = hash.wrapping_mul(0xBF58_476D_1CE4_E5B9).rotate_left(29);
    (mixed % LINES as u64) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_heavy_keys_of_a_skewed_load() {
        let mut top = TopK::new(7);
        let mut rng = 12345u64;
        for i in 0..200_000u64 {
            // Key "hot" 30%, "warm" 10%, the rest spread over 50 000 keys.
            let key = match i % 10 {
                0..=2 => "hot".to_string(),
                3 => "warm".to_string(),
                _ => {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    format!("k{}", rng % 50_000)
                }
            };
            top.add(0, key.as_bytes());
        }
        let list = top.top(3);
        assert_eq!(list[0].key, Bytes::from_static(b"hot"));
        assert_eq!(list[1].key, Bytes::from_static(b"warm"));
        // Estimates never exceed the true counts by construction and stay
        // close for heavy keys.
        assert!(list[0].count <= 60_000 && list[0].count > 55_000, "{}", list[0].count);
        assert!(list[1].count <= 20_000 && list[1].count > 18_000, "{}", list[1].count);
        assert!(list[2].count < 100);
        assert!(top.top(1000).len() <= K);
    }

    #[test]
    fn counts_halve_with_time_and_databases_are_apart() {
        let mut top = TopK::new(1);
        for _ in 0..100 {
            top.add(0, b"a");
        }
        top.add(1, b"a");
        top.age(1_000);
        assert_eq!(top.top(1)[0].count, 100);
        top.age(1_000 + HALF_LIFE_MS);
        assert_eq!(top.top(1)[0].count, 50);
        let dbs: Vec<usize> = top.top(10).iter().map(|e| e.db).collect();
        assert_eq!(dbs, vec![0]);
        top.clear();
        assert!(top.top(10).is_empty());
    }
}
