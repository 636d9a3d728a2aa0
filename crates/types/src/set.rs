//! [`Set`]: Redis sets with Redis 7.2's three encodings.
//!
//! - `intset`: sorted integers at the smallest width ([`IntSet`]), while
//!   every member is a canonical integer and there are at most
//!   `set-max-intset-entries`.
//! - `listpack`: a forward [`Pack`] of members, at most
//!   `set-max-listpack-entries` of at most `set-max-listpack-value` bytes.
//! - `hashtable`: a [`ScanTable`] of [`Member`]s (one word each, inline up
//!   to 7 bytes).
//!
//! The two small encodings share one [`PackBuf`] field and are told apart by
//! the intset's `FF` marker byte, which keeps a `Set` at 16 bytes, like the
//! other collections, so a key's value stays small.
//!
//! Conversions are those of Redis 7.2's t_set.c (`setTypeCreate`,
//! `setTypeMaybeConvert`, `setTypeAddAux`, `maybeConvertToIntset`, SPOP's
//! re-encoding of what remains); the set-algebra builders reproduce how
//! SINTERSTORE, SUNIONSTORE and SDIFFSTORE pick the result's encoding.

use crate::intset::IntSet;
use crate::limits::Limits;
use crate::number::parse_i64;
use crate::pack::{Item, Pack, PackBuf, Probe, FIRST};
use crate::sample::{below, distinct_sorted, with_repeats_sorted};
use crate::table::{Keyed, ScanTable};
use crate::thin_bytes::ThinBytes;

/// A member of a `hashtable` set (one word; inline up to 7 bytes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member(pub ThinBytes);

impl Keyed for Member {
    #[inline]
    fn key(&self) -> &[u8] {
        &self.0
    }

    fn heap_size(&self) -> usize {
        self.0.heap_size()
    }
}

#[derive(Clone, Debug)]
pub enum Set {
    /// An intset or a pack (see the module docs).
    Small(PackBuf),
    Table(Box<ScanTable<Member>>),
}

/// The set seen through its encoding.
enum View<'a> {
    Int(&'a IntSet),
    Pack(&'a Pack<false>),
    Table(&'a ScanTable<Member>),
}

enum ViewMut<'a> {
    Int(&'a mut IntSet),
    Pack(&'a mut Pack<false>),
    Table(&'a mut ScanTable<Member>),
}

/// Redis's `intsetMaxEntries`: the intset limit, capped at 2^30.
fn intset_max(limits: &Limits) -> usize {
    limits.set_max_intset_entries.min(1 << 30)
}

/// Digits (and sign) of `v`, Redis's `sdigits10`.
fn digits(v: i64) -> usize {
    let mut tmp = [0u8; 24];
    crate::pack::format_i64(&mut tmp, v).len()
}

impl Set {
    /// An empty intset (a builder's starting point, like Redis's
    /// `createIntsetObject`).
    pub fn new_intset() -> Set {
        Set::Small(IntSet::new().into_buf())
    }

    /// An empty listpack set.
    pub fn new_listpack() -> Set {
        Set::Small(Pack::<false>::new().into_buf())
    }

    /// An empty hashtable set sized for `capacity`.
    pub fn new_table(capacity: usize) -> Set {
        Set::Table(Box::new(ScanTable::with_capacity(capacity)))
    }

    /// Redis's `setTypeCreate`: the encoding a new set gets for a first
    /// member `first` and about `size_hint` members (SADD: its argument
    /// count; SMOVE: 1).
    pub fn new_for(first: &[u8], size_hint: usize, limits: &Limits) -> Set {
        if Probe::new(first).as_int().is_some() && size_hint <= limits.set_max_intset_entries {
            Set::new_intset()
        } else if size_hint <= limits.set_max_listpack_entries {
            Set::new_listpack()
        } else {
            Set::new_table(size_hint)
        }
    }

    fn view(&self) -> View<'_> {
        match self {
            Set::Small(b) if IntSet::is_intset_bytes(b.as_slice()) => View::Int(IntSet::view(b)),
            Set::Small(b) => View::Pack(Pack::view(b)),
            Set::Table(t) => View::Table(t),
        }
    }

    fn view_mut(&mut self) -> ViewMut<'_> {
        match self {
            Set::Small(b) => {
                if IntSet::is_intset_bytes(b.as_slice()) {
                    ViewMut::Int(IntSet::view_mut(b))
                } else {
                    ViewMut::Pack(Pack::view_mut(b))
                }
            }
            Set::Table(t) => ViewMut::Table(t),
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self.view() {
            View::Int(_) => "intset",
            View::Pack(_) => "listpack",
            View::Table(_) => "hashtable",
        }
    }

    pub fn len(&self) -> usize {
        match self.view() {
            View::Int(s) => s.len(),
            View::Pack(p) => p.len(),
            View::Table(t) => t.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE), beyond the 16-byte handle.
    pub fn heap_size(&self) -> usize {
        match self {
            Set::Small(b) => b.len(),
            Set::Table(t) => std::mem::size_of::<ScanTable<Member>>() + t.heap_size(),
        }
    }

    /// SISMEMBER.
    pub fn contains(&self, member: &[u8]) -> bool {
        match self.view() {
            View::Int(s) => Probe::new(member).as_int().is_some_and(|v| s.contains(v)),
            View::Pack(p) => p.find(&Probe::new(member), FIRST, 1).is_some(),
            View::Table(t) => t.contains(member),
        }
    }

    /// Converts to a hashtable sized for `capacity` members.
    fn convert_to_table(&mut self, capacity: usize) {
        if let Set::Small(_) = self {
            let mut table = ScanTable::with_capacity(capacity.max(self.len()));
            for m in self.iter() {
                table.insert_new(Member(ThinBytes::new(&m.to_vec())));
            }
            *self = Set::Table(Box::new(table));
        }
    }

    /// Converts an intset to a listpack.
    fn convert_intset_to_pack(&mut self) {
        if let View::Int(s) = self.view() {
            let items: Vec<Item<'_>> = s.iter().map(Item::Int).collect();
            let mut p = Pack::<false>::new();
            p.push_back(&items);
            *self = Set::Small(p.into_buf());
        }
    }

    /// Redis's `setTypeMaybeConvert`: before adding about `size_hint`
    /// members to an existing set (SADD).
    pub fn maybe_convert(&mut self, size_hint: usize, limits: &Limits) {
        let convert = match self.view() {
            View::Pack(_) => size_hint > limits.set_max_listpack_entries,
            View::Int(_) => size_hint > limits.set_max_intset_entries,
            View::Table(_) => false,
        };
        if convert {
            self.convert_to_table(size_hint);
        }
    }

    /// Redis's `setTypeAddAux`: adds `member`, converting as needed; false
    /// when it was already there.
    pub fn add(&mut self, member: &[u8], limits: &Limits) -> bool {
        let probe = Probe::new(member);
        match self.view_mut() {
            ViewMut::Int(s) => {
                if let Some(v) = probe.as_int() {
                    if !s.insert(v) {
                        return false;
                    }
                    if s.len() > intset_max(limits) {
                        self.convert_to_table(0);
                    }
                    return true;
                }
                // A string joins an intset: listpack if everything fits.
                let n = s.len();
                let (max_digits, est_bytes) = match (s.min(), s.max()) {
                    (Some(lo), Some(hi)) => {
                        let d = digits(lo).max(digits(hi));
                        (d, n * (d + 2))
                    }
                    _ => (0, 0),
                };
                let fits = n < limits.set_max_listpack_entries
                    && member.len() <= limits.set_max_listpack_value
                    && max_digits <= limits.set_max_listpack_value
                    && est_bytes + member.len() <= crate::pack::MAX_SAFE_BYTES;
                if fits {
                    self.convert_intset_to_pack();
                } else {
                    self.convert_to_table(n + 1);
                }
                self.add(member, limits)
            }
            ViewMut::Pack(p) => {
                if p.find(&probe, FIRST, 1).is_some() {
                    return false;
                }
                if p.len() < limits.set_max_listpack_entries
                    && member.len() <= limits.set_max_listpack_value
                    && p.safe_to_add(member.len())
                {
                    p.push_back(&[probe.item()]);
                } else {
                    let n = p.len();
                    self.convert_to_table(n + 1);
                    self.add(member, limits);
                }
                true
            }
            ViewMut::Table(t) => {
                if t.contains(member) {
                    return false;
                }
                t.insert_new(Member(ThinBytes::new(member)));
                true
            }
        }
    }

    /// SADD of several members to an existing set: the size-hint conversion,
    /// then each add. Returns how many were new.
    pub fn add_many(&mut self, members: &[&[u8]], limits: &Limits) -> usize {
        self.maybe_convert(members.len(), limits);
        members.iter().filter(|m| self.add(m, limits)).count()
    }

    /// SREM of one member; true if it was there. Encodings never shrink.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        let probe = Probe::new(member);
        match self.view_mut() {
            ViewMut::Int(s) => probe.as_int().is_some_and(|v| s.remove(v)),
            ViewMut::Pack(p) => match p.find(&probe, FIRST, 1) {
                Some(off) => {
                    p.delete(off, 1);
                    true
                }
                None => false,
            },
            ViewMut::Table(t) => t.remove(member).is_some(),
        }
    }

    /// Every member (intset: ascending; listpack: insertion order).
    pub fn iter(&self) -> Box<dyn Iterator<Item = Item<'_>> + '_> {
        match self.view() {
            View::Int(s) => Box::new(s.iter().map(Item::Int)),
            View::Pack(p) => Box::new(p.iter()),
            View::Table(t) => Box::new(t.iter().map(|m| Item::Str(&m.0))),
        }
    }

    /// The member at iteration index `i` of a small set.
    fn small_nth(&self, i: usize) -> Option<Item<'_>> {
        match self.view() {
            View::Int(s) => (i < s.len()).then(|| Item::Int(s.get(i))),
            View::Pack(p) => p.skip(FIRST, i).map(|off| p.get(off)),
            View::Table(_) => None,
        }
    }

    /// SRANDMEMBER without a count: one uniformly random member.
    pub fn random(&self, rng: &mut (impl FnMut() -> u64 + ?Sized)) -> Option<Item<'_>> {
        match self {
            Set::Table(t) => t.random(rng).map(|m| Item::Str(&m.0)),
            Set::Small(_) => {
                let n = self.len();
                if n == 0 {
                    return None;
                }
                self.small_nth(below(rng, n))
            }
        }
    }

    /// SRANDMEMBER with a negative count: `count` independent picks in
    /// random order (callers bound `count` per call, as Redis does).
    pub fn random_with_repeats(
        &self,
        count: usize,
        rng: &mut (impl FnMut() -> u64 + ?Sized),
    ) -> Vec<Item<'_>> {
        let n = self.len();
        if n == 0 {
            return Vec::new();
        }
        match self.view() {
            View::Pack(p) => {
                let picks = with_repeats_sorted(rng, n, count);
                let mut out = vec![Item::Int(0); picks.len()];
                let mut it = p.iter();
                let mut at = 0;
                let mut current = it.next();
                for (index, order) in picks {
                    while at < index {
                        current = it.next();
                        at += 1;
                    }
                    if let Some(m) = current {
                        out[order] = m;
                    }
                }
                out
            }
            _ => (0..count).filter_map(|_| self.random(rng)).collect(),
        }
    }

    /// SRANDMEMBER with a positive count below the size: `count` distinct
    /// members (order not random, as in Redis).
    pub fn random_distinct(
        &self,
        count: usize,
        rng: &mut (impl FnMut() -> u64 + ?Sized),
    ) -> Vec<Item<'_>> {
        let len = self.len();
        if let Set::Table(t) = self {
            if count.saturating_mul(3) <= len {
                let mut seen = hashbrown::HashSet::with_capacity(count);
                let mut out = Vec::with_capacity(count);
                while out.len() < count {
                    let Some(m) = t.random(rng) else { break };
                    if seen.insert(m.key()) {
                        out.push(Item::Str(&m.0));
                    }
                }
                return out;
            }
        }
        let picks = distinct_sorted(rng, len, count);
        let mut out = Vec::with_capacity(picks.len());
        let mut next = 0;
        for (i, m) in self.iter().enumerate() {
            if next == picks.len() {
                break;
            }
            if picks[next] == i {
                out.push(m);
                next += 1;
            }
        }
        out
    }

    /// SPOP without a count.
    pub fn pop_random(&mut self, rng: &mut (impl FnMut() -> u64 + ?Sized)) -> Option<Vec<u8>> {
        let m = self.random(rng)?.to_vec();
        self.remove(&m);
        Some(m)
    }

    /// SPOP with a count, as Redis 7.2 does it: everything when `count`
    /// reaches the size; random picks when few are taken; otherwise the
    /// members that *stay* are picked into a new set, which replaces this
    /// one (its encoding rebuilt from scratch, so a hashtable can become an
    /// intset or a listpack; with listpack sets disabled, as in Redis 7.0,
    /// the survivors start as `setTypeCreate` of the first one). Returns the
    /// popped members.
    pub fn pop_many(
        &mut self,
        count: usize,
        rng: &mut (impl FnMut() -> u64 + ?Sized),
        limits: &Limits,
    ) -> Vec<Vec<u8>> {
        const MOVE_STRATEGY_MUL: usize = 5;
        let size = self.len();
        if count >= size {
            let all = self.iter().map(|m| m.to_vec()).collect();
            *self = Set::new_intset();
            return all;
        }
        let remaining = size - count;
        if remaining * MOVE_STRATEGY_MUL > count {
            if let ViewMut::Pack(p) = self.view_mut() {
                let picks = distinct_sorted(rng, size, count);
                let mut out = Vec::with_capacity(count);
                let mut next = 0;
                p.retain(|i, m| {
                    if next < picks.len() && picks[next] == i {
                        next += 1;
                        out.push(m.to_vec());
                        false
                    } else {
                        true
                    }
                });
                return out;
            }
            return (0..count).filter_map(|_| self.pop_random(rng)).collect();
        }
        // CASE 3: pick the survivors into a new set.
        let mut kept: Option<Set> = None;
        if let View::Pack(_) = self.view() {
            let picks = distinct_sorted(rng, size, remaining);
            let mut new = Set::new_listpack();
            let mut next = 0;
            let mut popped = Vec::with_capacity(count);
            for (i, m) in self.iter().enumerate() {
                if next < picks.len() && picks[next] == i {
                    next += 1;
                    new.add(&m.to_vec(), limits);
                } else {
                    popped.push(m.to_vec());
                }
            }
            *self = new;
            return popped;
        }
        // Redis starts the survivors as an intset only when the random
        // element came back as an integer, i.e. from an intset; hashtable
        // members come back as strings, so those survivors start as a
        // listpack even when they look like numbers.
        let from_intset = matches!(self.view(), View::Int(_));
        for _ in 0..remaining {
            let Some(m) = self.random(rng).map(|m| m.to_vec()) else { break };
            let new = kept.get_or_insert_with(|| {
                if from_intset {
                    Set::new_intset()
                } else if limits.set_max_listpack_entries == 0 {
                    // Redis 7.0 (no listpack sets): `setTypeCreate` of the
                    // first survivor, an intset when it is an integer.
                    Set::new_for(&m, 1, limits)
                } else {
                    Set::new_listpack()
                }
            });
            new.add(&m, limits);
            self.remove(&m);
        }
        let popped = self.iter().map(|m| m.to_vec()).collect();
        *self = kept.unwrap_or_else(Set::new_intset);
        popped
    }

    /// SSCAN step: small encodings return everything with cursor 0.
    pub fn scan<'a>(&'a self, cursor: u64, count: usize, mut f: impl FnMut(Item<'a>)) -> u64 {
        match self {
            Set::Table(t) => t.scan(cursor, count, |m| f(Item::Str(&m.0))),
            Set::Small(_) => {
                self.iter().for_each(f);
                0
            }
        }
    }

    /// Redis's `maybeConvertToIntset`, for a result known to hold only
    /// integers.
    fn maybe_convert_to_intset(&mut self, limits: &Limits) {
        if matches!(self.view(), View::Int(_)) || self.len() > intset_max(limits) {
            return;
        }
        let mut s = IntSet::new();
        for m in self.iter() {
            match m {
                Item::Int(v) => s.insert(v),
                Item::Str(b) => match parse_i64(b) {
                    Some(v) => s.insert(v),
                    None => return,
                },
                Item::Float(_) => return,
            };
        }
        *self = Set::Small(s.into_buf());
    }

    /// Calls `f` for each member of the intersection of `sets` (None = a
    /// missing key, so the intersection is empty), iterating the smallest
    /// set; `f` returns false to stop (SINTERCARD LIMIT). Pass the same
    /// reference for a repeated key: it is then not probed against itself.
    pub fn for_each_in_intersection<'a>(
        sets: &[Option<&'a Set>],
        mut f: impl FnMut(Item<'a>) -> bool,
    ) {
        let Some(mut sorted) = sets.iter().copied().collect::<Option<Vec<&'a Set>>>() else {
            return;
        };
        if sorted.is_empty() {
            return;
        }
        sorted.sort_by_key(|s| s.len());
        let first = sorted[0];
        let mut tmp = [0u8; 24];
        for m in first.iter() {
            let bytes = m.bytes(&mut tmp);
            let everywhere =
                sorted[1..].iter().all(|s| std::ptr::eq(*s, first) || s.contains(bytes));
            if everywhere && !f(m) {
                return;
            }
        }
    }

    /// SINTERSTORE's result, encoded as Redis encodes it: starting as an
    /// intset when the smallest input is one (else a listpack), then
    /// converted to an intset if every member turned out to be an integer.
    pub fn intersection(sets: &[Option<&Set>], limits: &Limits) -> Set {
        let smallest = sets.iter().flatten().min_by_key(|s| s.len());
        let mut out = match smallest.map(|s| s.encoding()) {
            Some("intset") => Set::new_intset(),
            _ => Set::new_listpack(),
        };
        let mut only_integers = true;
        Set::for_each_in_intersection(sets, |m| {
            let bytes = m.to_vec();
            only_integers &= Probe::new(&bytes).as_int().is_some();
            out.add(&bytes, limits);
            true
        });
        if only_integers && !out.is_empty() {
            out.maybe_convert_to_intset(limits);
        }
        out
    }

    /// SUNION/SUNIONSTORE's result (Redis builds it from an empty intset).
    pub fn union(sets: &[Option<&Set>], limits: &Limits) -> Set {
        let mut out = Set::new_intset();
        for s in sets.iter().flatten() {
            for m in s.iter() {
                out.add(&m.to_vec(), limits);
            }
        }
        out
    }

    /// SDIFF/SDIFFSTORE's result: the first set minus all the others,
    /// choosing Redis's cheaper algorithm (probe each member of the first
    /// set, or add the first and remove the rest).
    pub fn difference(sets: &[Option<&Set>], limits: &Limits) -> Set {
        let mut out = Set::new_intset();
        let Some(Some(first)) = sets.first() else { return out };
        let rest: Vec<&Set> = sets[1..].iter().flatten().copied().collect();
        if rest.iter().any(|s| std::ptr::eq(*s, *first)) {
            return out;
        }
        let algo_one = first.len() * (rest.len() + 1) / 2;
        let algo_two = first.len() + rest.iter().map(|s| s.len()).sum::<usize>();
        let mut tmp = [0u8; 24];
        if algo_one <= algo_two {
            let mut rest = rest;
            rest.sort_by_key(|s| std::cmp::Reverse(s.len()));
            for m in first.iter() {
                let bytes = m.bytes(&mut tmp);
                if !rest.iter().any(|s| s.contains(bytes)) {
                    out.add(bytes, limits);
                }
            }
        } else {
            for m in first.iter() {
                out.add(m.bytes(&mut tmp), limits);
            }
            for s in rest {
                if out.is_empty() {
                    break;
                }
                for m in s.iter() {
                    out.remove(m.bytes(&mut tmp));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::test_rng;
    use std::collections::HashSet;

    fn members(s: &Set) -> Vec<Vec<u8>> {
        let mut v: Vec<Vec<u8>> = s.iter().map(|m| m.to_vec()).collect();
        v.sort();
        v
    }

    fn set_of(items: &[&str], lim: &Limits) -> Set {
        let mut s = Set::new_for(items[0].as_bytes(), items.len(), lim);
        let refs: Vec<&[u8]> = items.iter().map(|i| i.as_bytes()).collect();
        s.add_many(&refs, lim);
        s
    }

    #[test]
    fn stays_sixteen_bytes() {
        assert_eq!(std::mem::size_of::<Set>(), 16);
    }

    #[test]
    fn encodings_follow_redis_7_2() {
        let lim = Limits::default();
        let mut s = Set::new_for(b"1", 1, &lim);
        assert_eq!(s.encoding(), "intset");
        for i in 0..512 {
            s.add(i.to_string().as_bytes(), &lim);
        }
        assert_eq!(s.encoding(), "intset");
        s.add(b"512", &lim);
        assert_eq!(s.encoding(), "hashtable", "past set-max-intset-entries");

        // An intset meeting a string becomes a listpack while it fits.
        let mut s = set_of(&["1", "2", "3"], &lim);
        assert_eq!(s.encoding(), "intset");
        assert!(s.add(b"abc", &lim));
        assert_eq!(s.encoding(), "listpack");
        assert!(s.contains(b"2") && s.contains(b"abc") && !s.contains(b"02"));
        // ... and a hashtable past set-max-listpack-entries.
        for i in 0..124 {
            s.add(format!("m{i}").as_bytes(), &lim);
        }
        assert_eq!((s.len(), s.encoding()), (128, "listpack"));
        s.add(b"one more", &lim);
        assert_eq!(s.encoding(), "hashtable");

        // A long member skips the listpack.
        let mut s = set_of(&["a"], &lim);
        assert_eq!(s.encoding(), "listpack");
        s.add(&[b'x'; 65], &lim);
        assert_eq!(s.encoding(), "hashtable");
        let mut s = set_of(&["1"], &lim);
        s.add(&[b'x'; 65], &lim);
        assert_eq!(s.encoding(), "hashtable", "intset + long string");

        // SADD with many arguments converts up front.
        let mut s = set_of(&["a"], &lim);
        let many: Vec<Vec<u8>> = (0..200).map(|i| format!("k{i}").into_bytes()).collect();
        s.add_many(&[many[0].as_slice(); 129], &lim);
        assert_eq!(s.encoding(), "hashtable");
        assert_eq!(Set::new_for(b"x", 129, &lim).encoding(), "hashtable");
        assert_eq!(Set::new_for(b"5", 513, &lim).encoding(), "hashtable");
        assert_eq!(Set::new_for(b"5", 200, &lim).encoding(), "intset");
    }

    #[test]
    fn redis_7_0_sets_have_no_listpack() {
        let lim = Limits { set_max_listpack_entries: 0, ..Limits::default() };
        assert_eq!(set_of(&["foo"], &lim).encoding(), "hashtable");
        let mut s = set_of(&["1", "2"], &lim);
        assert_eq!(s.encoding(), "intset");
        s.add(b"foo", &lim);
        assert_eq!(s.encoding(), "hashtable");
    }

    #[test]
    fn matches_a_hashset_model() {
        for (seed, intsets, packs) in
            [(1u64, 512usize, 128usize), (2, 4, 4), (3, 0, 0), (4, 512, 0)]
        {
            let lim = Limits {
                set_max_intset_entries: intsets,
                set_max_listpack_entries: packs,
                ..Limits::default()
            };
            let mut rng = test_rng(seed);
            let mut s = Set::new_intset();
            let mut model: HashSet<Vec<u8>> = HashSet::new();
            for _ in 0..6000 {
                let m = match below(&mut rng, 3) {
                    0 => format!("{}", below(&mut rng, 700) as i64 - 100).into_bytes(),
                    1 => format!("m{}", below(&mut rng, 200)).into_bytes(),
                    _ => format!("{}", below(&mut rng, 1 << 40)).into_bytes(),
                };
                match below(&mut rng, 10) {
                    0..=2 => assert_eq!(s.remove(&m), model.remove(&m)),
                    3 => assert_eq!(s.contains(&m), model.contains(&m)),
                    4 if !model.is_empty() => {
                        let popped = s.pop_random(&mut rng).unwrap();
                        assert!(model.remove(&popped));
                    }
                    _ => assert_eq!(s.add(&m, &lim), model.insert(m)),
                }
                assert_eq!(s.len(), model.len());
                if model.is_empty() {
                    s = Set::new_intset();
                }
            }
            let mut want: Vec<Vec<u8>> = model.into_iter().collect();
            want.sort();
            assert_eq!(members(&s), want);
        }
    }

    #[test]
    fn spop_with_count_in_every_case() {
        let lim = Limits::default();
        let mut rng = test_rng(9);
        for (n, members_of) in [(100usize, 0), (100, 1), (2000, 0), (2000, 1)] {
            for count in [1usize, 10, 90, 99, 100, 150] {
                let all: Vec<String> = (0..n)
                    .map(|i| if members_of == 0 { i.to_string() } else { format!("m{i}") })
                    .collect();
                let refs: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
                let mut s = set_of(&refs, &lim);
                let before = members(&s);
                let popped = s.pop_many(count, &mut rng, &lim);
                assert_eq!(popped.len(), count.min(n));
                let mut rest = members(&s);
                rest.extend(popped.iter().cloned());
                rest.sort();
                assert_eq!(rest, before, "n {n} count {count}");
                let unique: HashSet<&Vec<u8>> = popped.iter().collect();
                assert_eq!(unique.len(), popped.len());
            }
        }
        // CASE 3 rebuilds the survivors: from a hashtable they start as a
        // listpack (even numeric ones), from an intset as an intset.
        let all: Vec<String> = (0..1000).map(|i| i.to_string()).collect();
        let refs: Vec<&str> = all.iter().map(|s| s.as_str()).collect();
        let mut s = set_of(&refs, &lim);
        assert_eq!(s.encoding(), "hashtable");
        s.pop_many(995, &mut rng, &lim);
        assert_eq!((s.len(), s.encoding()), (5, "listpack"));
        let mut s = set_of(&refs[..400], &lim);
        assert_eq!(s.encoding(), "intset");
        s.pop_many(390, &mut rng, &lim);
        assert_eq!((s.len(), s.encoding()), (10, "intset"));
        // Redis 7.0 (no listpack sets) starts the survivors with
        // `setTypeCreate` of the first one: numeric survivors of a hashtable
        // end as an intset, strings as a hashtable.
        let lim70 = Limits { set_max_listpack_entries: 0, ..Limits::default() };
        let mut s = set_of(&refs, &lim70);
        assert_eq!(s.encoding(), "hashtable");
        s.pop_many(995, &mut rng, &lim70);
        assert_eq!((s.len(), s.encoding()), (5, "intset"));
        let words: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        let refs: Vec<&str> = words.iter().map(|s| s.as_str()).collect();
        let mut s = set_of(&refs, &lim70);
        s.pop_many(995, &mut rng, &lim70);
        assert_eq!((s.len(), s.encoding()), (5, "hashtable"));
    }

    #[test]
    fn random_members_are_members_and_fair() {
        let lim = Limits::default();
        let mut rng = test_rng(4);
        for items in [vec!["1", "2", "3", "4", "5"], vec!["a", "b", "c", "d", "e"]] {
            let mut s = set_of(&items, &lim);
            for round in 0..2 {
                let mut hits = std::collections::HashMap::new();
                for m in s.random_with_repeats(5000, &mut rng) {
                    *hits.entry(m.to_vec()).or_insert(0) += 1;
                }
                assert_eq!(hits.len(), 5);
                assert!(hits.values().all(|&h| (850..1150).contains(&h)), "{hits:?}");
                let d = s.random_distinct(3, &mut rng);
                let unique: HashSet<Vec<u8>> = d.iter().map(|m| m.to_vec()).collect();
                assert_eq!(unique.len(), 3);
                if round == 0 {
                    s.convert_to_table(0);
                }
            }
        }
    }

    #[test]
    fn algebra_matches_the_model_and_redis_encodings() {
        let lim = Limits::default();
        let a = set_of(&["1", "2", "3", "4", "x"], &lim);
        let b = set_of(&["2", "3", "4", "5"], &lim);
        let c = set_of(&["3", "4", "y"], &lim);
        let inter = Set::intersection(&[Some(&a), Some(&b), Some(&c)], &lim);
        assert_eq!(members(&inter), [b"3".to_vec(), b"4".to_vec()]);
        assert_eq!(inter.encoding(), "intset", "only integers end as an intset");
        assert!(Set::intersection(&[Some(&a), None], &lim).is_empty());
        let mut n = 0;
        Set::for_each_in_intersection(&[Some(&a), Some(&b)], |_| {
            n += 1;
            n < 2
        });
        assert_eq!(n, 2, "stops when asked (SINTERCARD LIMIT)");
        let union = Set::union(&[Some(&a), None, Some(&c)], &lim);
        assert_eq!(union.len(), 6);
        assert_eq!(union.encoding(), "listpack");
        let ints = Set::union(&[Some(&b), Some(&b)], &lim);
        assert_eq!(ints.encoding(), "intset");
        let diff = Set::difference(&[Some(&a), Some(&b), None], &lim);
        assert_eq!(members(&diff), [b"1".to_vec(), b"x".to_vec()]);
        assert!(Set::difference(&[Some(&a), Some(&a)], &lim).is_empty(), "same key");
        assert!(Set::difference(&[None, Some(&a)], &lim).is_empty());
        // Algorithm 2 (many big sets to subtract) gives the same answer.
        let big: Vec<String> = (0..500).map(|i| format!("m{i}")).collect();
        let big_refs: Vec<&str> = big.iter().map(|s| s.as_str()).collect();
        let big_set = set_of(&big_refs, &lim);
        let small = set_of(&["m1", "m2", "zzz"], &lim);
        let d = Set::difference(&[Some(&small), Some(&big_set), Some(&big_set)], &lim);
        assert_eq!(members(&d), [b"zzz".to_vec()]);
    }

    #[test]
    fn sscan_small_in_one_call() {
        let lim = Limits::default();
        let s = set_of(&["1", "2", "3"], &lim);
        let mut n = 0;
        assert_eq!(s.scan(99, 1, |_| n += 1), 0);
        assert_eq!(n, 3);
        let big: Vec<String> = (0..1000).map(|i| format!("m{i}")).collect();
        let refs: Vec<&str> = big.iter().map(|s| s.as_str()).collect();
        let s = set_of(&refs, &lim);
        let mut seen = HashSet::new();
        let mut cursor = 0;
        loop {
            cursor = s.scan(cursor, 10, |m| {
                seen.insert(m.to_vec());
            });
            if cursor == 0 {
                break;
            }
        }
        assert_eq!(seen.len(), 1000);
    }
}
