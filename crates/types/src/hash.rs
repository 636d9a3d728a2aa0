//! [`Hash`](enum@Hash): Redis hashes with the `listpack` and `hashtable` encodings.
//!
//! - `listpack`: a forward [`Pack`] of field, value, field, value, … in
//!   insertion order (lookups O(n), n ≤ `hash-max-listpack-entries`).
//! - `hashtable`: a [`ScanTable`] of [`HashEntry`], each field and value in
//!   one [`ThinBytes`]: an 8-byte slot and one exact allocation per pair
//!   (Redis: bucket pointer, dictEntry, two sds).
//!
//! Conversion is one way, as in t_hash.c: before a write whose arguments hold
//! a string longer than `hash-max-listpack-value` (or, for a multi-pair
//! HSET, more pairs than `hash-max-listpack-entries`), and after a write that
//! leaves more than `hash-max-listpack-entries` fields.
//!
//! Values are bytes; canonical integers are stored compactly in the pack
//! (the table stores bytes, like Redis's sds values).

use crate::limits::Limits;
use crate::pack::{Item, Pack, Probe, FIRST};
use crate::sample::{below, distinct_sorted, with_repeats_sorted};
use crate::table::{Keyed, ScanTable};
use crate::thin_bytes::ThinBytes;

/// A field and its value in one compact string: a LEB128 field length,
/// the field, then the value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HashEntry(ThinBytes);

impl HashEntry {
    pub fn new(field: &[u8], value: &[u8]) -> Self {
        let mut buf = Vec::with_capacity(field.len() + value.len() + 3);
        let mut n = field.len();
        loop {
            let byte = (n & 127) as u8;
            n >>= 7;
            if n == 0 {
                buf.push(byte);
                break;
            }
            buf.push(byte | 128);
        }
        buf.extend_from_slice(field);
        buf.extend_from_slice(value);
        HashEntry(ThinBytes::new(&buf))
    }

    /// `(start of field, field length)`.
    #[inline]
    fn field_span(&self) -> (usize, usize) {
        let bytes: &[u8] = &self.0;
        let (mut len, mut shift, mut i) = (0usize, 0, 0);
        loop {
            let b = bytes[i];
            len |= ((b & 127) as usize) << shift;
            i += 1;
            if b & 128 == 0 {
                return (i, len);
            }
            shift += 7;
        }
    }

    #[inline]
    pub fn field(&self) -> &[u8] {
        let (start, len) = self.field_span();
        &self.0[start..start + len]
    }

    #[inline]
    pub fn value(&self) -> &[u8] {
        let (start, len) = self.field_span();
        &self.0[start + len..]
    }
}

impl Keyed for HashEntry {
    #[inline]
    fn key(&self) -> &[u8] {
        self.field()
    }

    fn heap_size(&self) -> usize {
        self.0.heap_size()
    }
}

#[derive(Clone, Debug)]
pub enum Hash {
    Pack(Pack<false>),
    Table(Box<ScanTable<HashEntry>>),
}

impl Default for Hash {
    fn default() -> Self {
        Hash::new()
    }
}

impl Hash {
    /// An empty hash in the listpack encoding (how every hash starts).
    pub fn new() -> Hash {
        Hash::Pack(Pack::new())
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            Hash::Pack(_) => "listpack",
            Hash::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            Hash::Pack(p) => p.len() / 2,
            Hash::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE), beyond the 16-byte handle.
    pub fn heap_size(&self) -> usize {
        match self {
            Hash::Pack(p) => p.byte_len(),
            Hash::Table(t) => std::mem::size_of::<ScanTable<HashEntry>>() + t.heap_size(),
        }
    }

    /// Offsets of `field` and its value in a pack.
    fn pack_find(p: &Pack<false>, field: &[u8]) -> Option<(usize, usize)> {
        let off = p.find(&Probe::new(field), FIRST, 2)?;
        Some((off, p.entry(off).1))
    }

    /// HGET: the value of `field`.
    pub fn get(&self, field: &[u8]) -> Option<Item<'_>> {
        match self {
            Hash::Pack(p) => Self::pack_find(p, field).map(|(_, v)| p.get(v)),
            Hash::Table(t) => t.get(field).map(|e| Item::Str(e.value())),
        }
    }

    /// HEXISTS.
    pub fn contains(&self, field: &[u8]) -> bool {
        match self {
            Hash::Pack(p) => Self::pack_find(p, field).is_some(),
            Hash::Table(t) => t.contains(field),
        }
    }

    /// HSTRLEN: the value's length, 0 when the field is missing.
    pub fn value_len(&self, field: &[u8]) -> usize {
        self.get(field).map_or(0, |v| v.len())
    }

    /// Converts to the hashtable encoding, sized for `capacity` fields.
    fn convert(&mut self, capacity: usize) {
        if let Hash::Pack(p) = self {
            let mut table = ScanTable::with_capacity(capacity.max(p.len() / 2));
            let mut it = p.iter();
            while let (Some(f), Some(v)) = (it.next(), it.next()) {
                table.insert_new(HashEntry::new(&f.to_vec(), &v.to_vec()));
            }
            *self = Hash::Table(Box::new(table));
        }
    }

    /// Redis's `hashTypeTryConversion` before a write with `args` (fields
    /// and values alternating, as the command received them).
    pub fn prepare_for(&mut self, args: &[&[u8]], limits: &Limits) {
        let Hash::Pack(p) = self else { return };
        let new_fields = args.len() / 2;
        if new_fields > limits.hash_max_listpack_entries {
            self.convert(new_fields);
            return;
        }
        let mut sum = 0usize;
        for a in args {
            if a.len() > limits.hash_max_listpack_value {
                self.convert(0);
                return;
            }
            sum += a.len();
        }
        if !p.safe_to_add(sum) {
            self.convert(0);
        }
    }

    /// Redis's `hashTypeSet`: sets `field` to `value`, returning true when
    /// the field is new. Converts first when either string is too long for
    /// a listpack (HINCRBY*), after when the count passes the limit.
    pub fn set(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        if let Hash::Pack(_) = self {
            let max = limits.hash_max_listpack_value;
            if field.len() > max || value.len() > max {
                self.convert(0);
            }
        }
        match self {
            Hash::Pack(p) => {
                let value_item = Item::from_bytes(value);
                if let Some((_, v)) = Self::pack_find(p, field) {
                    p.replace(v, &value_item);
                    return false;
                }
                p.push_back(&[Item::from_bytes(field), value_item]);
                if p.len() / 2 > limits.hash_max_listpack_entries {
                    self.convert(0);
                }
                true
            }
            Hash::Table(t) => t.insert(HashEntry::new(field, value)).is_none(),
        }
    }

    /// HSET/HMSET: every pair in order, after [`Hash::prepare_for`]. Returns
    /// how many fields were new.
    pub fn set_many(&mut self, pairs: &[(&[u8], &[u8])], limits: &Limits) -> usize {
        let args: Vec<&[u8]> = pairs.iter().flat_map(|&(f, v)| [f, v]).collect();
        self.prepare_for(&args, limits);
        pairs.iter().filter(|(f, v)| self.set(f, v, limits)).count()
    }

    /// HSETNX: Redis converts for the arguments even when the field exists.
    pub fn set_nx(&mut self, field: &[u8], value: &[u8], limits: &Limits) -> bool {
        self.prepare_for(&[field, value], limits);
        if self.contains(field) {
            return false;
        }
        self.set(field, value, limits)
    }

    /// HDEL of one field; true if it existed.
    pub fn remove(&mut self, field: &[u8]) -> bool {
        match self {
            Hash::Pack(p) => match Self::pack_find(p, field) {
                Some((off, _)) => {
                    p.delete(off, 2);
                    true
                }
                None => false,
            },
            Hash::Table(t) => t.remove(field).is_some(),
        }
    }

    /// Every field and value (listpack: insertion order).
    pub fn iter(&self) -> Box<dyn Iterator<Item = (Item<'_>, Item<'_>)> + '_> {
        match self {
            Hash::Pack(p) => {
                let mut it = p.iter();
                Box::new(std::iter::from_fn(move || Some((it.next()?, it.next()?))))
            }
            Hash::Table(t) => {
                Box::new(t.iter().map(|e| (Item::Str(e.field()), Item::Str(e.value()))))
            }
        }
    }

    /// One uniformly random field and value (HRANDFIELD without a count).
    pub fn random(&self, rng: &mut (impl FnMut() -> u64 + ?Sized)) -> Option<(Item<'_>, Item<'_>)> {
        match self {
            Hash::Pack(p) => {
                let n = p.len() / 2;
                if n == 0 {
                    return None;
                }
                let off = p.skip(FIRST, 2 * below(rng, n))?;
                let (f, v) = p.entry(off);
                Some((f, p.get(v)))
            }
            Hash::Table(t) => t.random(rng).map(|e| (Item::Str(e.field()), Item::Str(e.value()))),
        }
    }

    /// HRANDFIELD with a negative count: `count` independent picks in random
    /// order. Callers bound `count` per call (Redis serves at most 1000 at
    /// a time) since the result is held in memory.
    pub fn random_with_repeats(
        &self,
        count: usize,
        rng: &mut (impl FnMut() -> u64 + ?Sized),
    ) -> Vec<(Item<'_>, Item<'_>)> {
        match self {
            Hash::Pack(p) => {
                let n = p.len() / 2;
                if n == 0 {
                    return Vec::new();
                }
                let picks = with_repeats_sorted(rng, n, count);
                let mut out = vec![(Item::Int(0), Item::Int(0)); picks.len()];
                let mut it = p.iter();
                let mut at = 0;
                let mut current = (it.next(), it.next());
                for (index, order) in picks {
                    while at < index {
                        current = (it.next(), it.next());
                        at += 1;
                    }
                    if let (Some(f), Some(v)) = current {
                        out[order] = (f, v);
                    }
                }
                out
            }
            Hash::Table(_) => (0..count).filter_map(|_| self.random(rng)).collect(),
        }
    }

    /// HRANDFIELD with a positive count below the size: `count` distinct
    /// fields (order not random, as in Redis). Use [`Hash::iter`] when
    /// `count >= len`.
    pub fn random_distinct(
        &self,
        count: usize,
        rng: &mut (impl FnMut() -> u64 + ?Sized),
    ) -> Vec<(Item<'_>, Item<'_>)> {
        let len = self.len();
        match self {
            Hash::Table(t) if count.saturating_mul(3) <= len => {
                // Few picks from many: draw until distinct (Redis's CASE 4).
                let mut seen = hashbrown::HashSet::with_capacity(count);
                let mut out = Vec::with_capacity(count);
                while out.len() < count {
                    let Some(e) = t.random(rng) else { break };
                    if seen.insert(e.field()) {
                        out.push((Item::Str(e.field()), Item::Str(e.value())));
                    }
                }
                out
            }
            _ => {
                let picks = distinct_sorted(rng, len, count);
                let mut out = Vec::with_capacity(picks.len());
                let mut next = 0;
                for (i, pair) in self.iter().enumerate() {
                    if next == picks.len() {
                        break;
                    }
                    if picks[next] == i {
                        out.push(pair);
                        next += 1;
                    }
                }
                out
            }
        }
    }

    /// HSCAN step: listpacks return everything with cursor 0; tables return
    /// a window of hash positions (see [`ScanTable::scan`]).
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(Item<'_>, Item<'_>)) -> u64 {
        match self {
            Hash::Pack(_) => {
                for (k, v) in self.iter() {
                    f(k, v);
                }
                0
            }
            Hash::Table(t) => {
                t.scan(cursor, count, |e| f(Item::Str(e.field()), Item::Str(e.value())))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::test_rng;
    use std::collections::HashMap;

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn entries_split_field_and_value() {
        for (f, v) in [("", ""), ("f", "v"), ("field", ""), (&"x".repeat(300) as &str, "value")] {
            let e = HashEntry::new(f.as_bytes(), v.as_bytes());
            assert_eq!(e.field(), f.as_bytes());
            assert_eq!(e.value(), v.as_bytes());
        }
        assert_eq!(HashEntry::new(b"f", b"12345").heap_size(), 0, "tiny pairs stay inline");
        assert_eq!(HashEntry::new(b"field:1", b"value:1").heap_size(), 16);
    }

    #[test]
    fn get_set_delete_in_both_encodings() {
        let lim = Limits::default();
        let mut h = Hash::new();
        assert!(h.set(b"a", b"1", &lim));
        assert!(h.set(b"b", b"two", &lim));
        assert!(!h.set(b"a", b"-12345678901", &lim));
        assert_eq!(h.get(b"a").map(|v| v.to_vec()), Some(b("-12345678901")));
        assert_eq!(h.value_len(b"b"), 3);
        assert_eq!(h.value_len(b"zz"), 0);
        assert!(!h.set_nx(b"b", b"x", &lim));
        assert!(h.set_nx(b"c", b"x", &lim));
        assert_eq!(h.len(), 3);
        assert!(h.remove(b"b") && !h.remove(b"b"));
        assert_eq!(h.encoding(), "listpack");
        let pairs: Vec<(Vec<u8>, Vec<u8>)> =
            h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
        assert_eq!(pairs, [(b("a"), b("-12345678901")), (b("c"), b("x"))]);
        // A long value converts before the write.
        assert!(h.set(b"long", &[b'v'; 65], &lim));
        assert_eq!(h.encoding(), "hashtable");
        assert_eq!(h.get(b"a").map(|v| v.to_vec()), Some(b("-12345678901")));
        assert_eq!(h.len(), 3);
    }

    #[test]
    fn conversions_at_redis_thresholds() {
        let lim = Limits { hash_max_listpack_entries: 4, ..Limits::default() };
        let mut h = Hash::new();
        for i in 0..4 {
            h.set(format!("f{i}").as_bytes(), b"v", &lim);
        }
        assert_eq!(h.encoding(), "listpack");
        h.set(b"f4", b"v", &lim);
        assert_eq!(h.encoding(), "hashtable");
        // A 64-byte value fits, 65 does not; fields count too.
        let mut h = Hash::new();
        h.set(&[b'f'; 64], &[b'v'; 64], &Limits::default());
        assert_eq!(h.encoding(), "listpack");
        h.set(&[b'f'; 65], b"v", &Limits::default());
        assert_eq!(h.encoding(), "hashtable");
        // Multi-pair HSET: more pairs than the limit converts up front, even
        // if they repeat one field.
        let mut h = Hash::new();
        let pairs: Vec<(&[u8], &[u8])> = vec![(b"same", b"v"); 5];
        assert_eq!(h.set_many(&pairs, &lim), 1);
        assert_eq!(h.encoding(), "hashtable");
        // HSETNX converts for a long value even when the field exists.
        let mut h = Hash::new();
        h.set(b"f", b"v", &lim);
        assert!(!h.set_nx(b"f", &[b'x'; 100], &lim));
        assert_eq!(h.encoding(), "hashtable");
        // Deleting never converts back.
        h.remove(b"f");
        assert_eq!(h.encoding(), "hashtable");
    }

    #[test]
    fn matches_a_hashmap_model() {
        for limit in [0usize, 3, 512] {
            let lim = Limits { hash_max_listpack_entries: limit, ..Limits::default() };
            let mut rng = test_rng(limit as u64 + 1);
            let mut h = Hash::new();
            let mut model: HashMap<Vec<u8>, Vec<u8>> = HashMap::new();
            for step in 0..5000 {
                let field = format!("f{}", below(&mut rng, 300)).into_bytes();
                let value = match below(&mut rng, 3) {
                    0 => format!("{}", below(&mut rng, 100000) as i64 - 50000).into_bytes(),
                    1 => vec![b'x'; below(&mut rng, 70)],
                    _ => format!("value:{step}").into_bytes(),
                };
                match below(&mut rng, 4) {
                    0 => assert_eq!(h.remove(&field), model.remove(&field).is_some()),
                    1 => {
                        let new = !model.contains_key(&field);
                        if new {
                            model.insert(field.clone(), value.clone());
                        }
                        assert_eq!(h.set_nx(&field, &value, &lim), new);
                    }
                    _ => assert_eq!(
                        h.set(&field, &value, &lim),
                        model.insert(field.clone(), value).is_none()
                    ),
                }
                assert_eq!(h.len(), model.len());
                assert_eq!(h.get(&field).map(|v| v.to_vec()), model.get(&field).cloned());
            }
            let mut got: Vec<(Vec<u8>, Vec<u8>)> =
                h.iter().map(|(f, v)| (f.to_vec(), v.to_vec())).collect();
            got.sort();
            let mut want: Vec<(Vec<u8>, Vec<u8>)> = model.into_iter().collect();
            want.sort();
            assert_eq!(got, want);
        }
    }

    #[test]
    fn random_fields_in_both_encodings() {
        let mut rng = test_rng(3);
        for limit in [512usize, 0] {
            let lim = Limits { hash_max_listpack_entries: limit, ..Limits::default() };
            let mut h = Hash::new();
            for i in 0..20 {
                h.set(format!("f{i}").as_bytes(), format!("{i}").as_bytes(), &lim);
            }
            let mut hits = HashMap::new();
            for _ in 0..200 {
                for (f, v) in h.random_with_repeats(10, &mut rng) {
                    assert_eq!(f.to_vec()[1..], v.to_vec()[..]);
                    *hits.entry(f.to_vec()).or_insert(0) += 1;
                }
            }
            assert_eq!(hits.len(), 20);
            assert!(hits.values().all(|&n| (50..150).contains(&n)), "{hits:?}");
            for count in [1, 5, 19] {
                let picks = h.random_distinct(count, &mut rng);
                let mut fields: Vec<Vec<u8>> = picks.iter().map(|(f, _)| f.to_vec()).collect();
                fields.sort();
                fields.dedup();
                assert_eq!(fields.len(), count);
            }
            assert!(h.random(&mut rng).is_some());
        }
    }

    #[test]
    fn hscan_small_in_one_call_big_by_cursor() {
        let lim = Limits::default();
        let mut h = Hash::new();
        for i in 0..10 {
            h.set(format!("f{i}").as_bytes(), b"v", &lim);
        }
        let mut n = 0;
        assert_eq!(h.scan(12345, 1, |_, _| n += 1), 0);
        assert_eq!(n, 10);
        for i in 10..2000 {
            h.set(format!("f{i}").as_bytes(), b"v", &lim);
        }
        // Fields f0..f1999 stay for the whole scan; others come and go
        // between calls, growing and shrinking the table.
        let mut seen = std::collections::HashSet::new();
        let mut cursor = 0;
        let mut calls = 0u64;
        loop {
            cursor = h.scan(cursor, 50, |f, _| {
                seen.insert(f.to_vec());
            });
            calls += 1;
            for j in 0..40 {
                let extra = format!("extra{}", calls * 40 + j);
                match calls % 3 {
                    0 => h.remove(format!("extra{}", (calls - 1) * 40 + j).as_bytes()),
                    _ => h.set(extra.as_bytes(), b"x", &lim),
                };
            }
            if cursor == 0 {
                break;
            }
        }
        for i in 0..2000 {
            assert!(seen.contains(format!("f{i}").as_bytes()), "f{i} missed");
        }
    }
}
