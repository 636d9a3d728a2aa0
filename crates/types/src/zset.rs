//! [`ZSet`]: Redis sorted sets with the `listpack` and `skiplist` encodings.
//!
//! - `listpack`: a forward [`Pack`] of member, score pairs in `(score,
//!   member)` order; scores that are small integers take 1–5 bytes, others
//!   9 (Redis stores them as up to 17-digit strings).
//! - `skiplist` (the name Redis reports; the structure differs): a
//!   [`ScanTable`] from member to score (O(1) ZSCORE, membership, and the
//!   ZSCAN cursor) plus a [`ScoreTree`], an order-statistic B+tree with
//!   packed leaves, for O(log n) rank, select and score/lex range bounds.
//!
//! Conversion follows t_zset.c: a new member that would make the listpack
//! longer than `zset-max-listpack-entries`, or a member longer than
//! `zset-max-listpack-value`, converts it first; ZADD with many members
//! converts up front ([`ZSet::maybe_convert`]); results of the STORE
//! commands go back to a listpack when small ([`ZSet::convert_to_pack_if_needed`]).
//! Removing members never converts back.
//!
//! Scores are `f64` and never NaN: callers reject NaN arguments with
//! Redis's errors before calling (`ERR value is not a valid float`, `ERR min
//! or max is not a float`); [`ZSet::add`] also refuses NaN and reports a NaN
//! *result* of INCR (`inf` + `-inf`) as [`NotANumber`]. Lex ranges assume
//! all scores are equal, as Redis documents.

use crate::limits::Limits;
use crate::list::normalize_range;
use crate::pack::{Item, Pack, Probe, FIRST};
use crate::sample::{below, distinct_sorted, with_repeats_sorted};
use crate::score_tree::{
    pack_count_while, pack_insert_sorted, pack_pair_offset, pair_at, ScoreTree, TreeIter,
};
use crate::table::{Keyed, ScanTable};
use crate::thin_bytes::ThinBytes;
use std::cmp::Ordering;

/// One end of a score range (`1.5` or `(1.5`, `-inf`, `+inf`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreBound {
    pub value: f64,
    pub exclusive: bool,
}

/// A score interval; empty when min is above max (or equal with an
/// exclusive end), exactly as Redis treats it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ScoreRange {
    pub min: ScoreBound,
    pub max: ScoreBound,
}

impl ScoreRange {
    pub fn new(min: f64, min_exclusive: bool, max: f64, max_exclusive: bool) -> Self {
        ScoreRange {
            min: ScoreBound { value: min, exclusive: min_exclusive },
            max: ScoreBound { value: max, exclusive: max_exclusive },
        }
    }

    /// Whether `s` lies below the range's start (a prefix predicate).
    #[inline]
    fn before_min(&self, s: f64) -> bool {
        if self.min.exclusive {
            s <= self.min.value
        } else {
            s < self.min.value
        }
    }

    /// Whether `s` is not past the range's end (a prefix predicate).
    #[inline]
    fn not_after_max(&self, s: f64) -> bool {
        if self.max.exclusive {
            s < self.max.value
        } else {
            s <= self.max.value
        }
    }
}

/// One end of a lex range: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LexBound {
    /// `-`: below every member.
    Min,
    /// `+`: above every member.
    Max,
    Inclusive(Vec<u8>),
    Exclusive(Vec<u8>),
}

impl LexBound {
    /// Redis's `zslParseLexRangeItem`; None means `ERR min or max not valid
    /// string range item`.
    pub fn parse(arg: &[u8]) -> Option<LexBound> {
        match arg.split_first() {
            Some((b'+', [])) => Some(LexBound::Max),
            Some((b'-', [])) => Some(LexBound::Min),
            Some((b'(', rest)) => Some(LexBound::Exclusive(rest.to_vec())),
            Some((b'[', rest)) => Some(LexBound::Inclusive(rest.to_vec())),
            _ => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LexRange {
    pub min: LexBound,
    pub max: LexBound,
}

impl LexRange {
    #[inline]
    fn before_min(&self, m: &Item<'_>) -> bool {
        match &self.min {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => m.cmp_bytes(b) == Ordering::Less,
            LexBound::Exclusive(b) => m.cmp_bytes(b) != Ordering::Greater,
        }
    }

    #[inline]
    fn not_after_max(&self, m: &Item<'_>) -> bool {
        match &self.max {
            LexBound::Min => false,
            LexBound::Max => true,
            LexBound::Inclusive(b) => m.cmp_bytes(b) != Ordering::Greater,
            LexBound::Exclusive(b) => m.cmp_bytes(b) == Ordering::Less,
        }
    }
}

/// ZADD's options.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AddFlags {
    pub nx: bool,
    pub xx: bool,
    pub gt: bool,
    pub lt: bool,
    pub incr: bool,
}

/// What one ZADD/ZINCRBY member did.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct AddOutcome {
    pub added: bool,
    /// The score changed (CH counts these).
    pub updated: bool,
    /// The member's score after the call; None when NX/XX/GT/LT stopped it
    /// (ZADD INCR then replies nil).
    pub score: Option<f64>,
}

/// The score (or an INCR result) is NaN: `ERR resulting score is not a
/// number (NaN)` for INCR, a rejected argument otherwise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NotANumber;

/// A member and its score in one string: the member, then the score's 8
/// bytes (one word and one allocation, like a hash entry).
#[derive(Clone, Debug, PartialEq)]
pub struct ZEntry(ThinBytes);

impl ZEntry {
    fn new(member: &[u8], score: f64) -> Self {
        let mut buf = Vec::with_capacity(member.len() + 8);
        buf.extend_from_slice(member);
        buf.extend_from_slice(&score.to_le_bytes());
        ZEntry(ThinBytes::new(&buf))
    }

    #[inline]
    pub fn member(&self) -> &[u8] {
        &self.0[..self.0.len() - 8]
    }

    #[inline]
    pub fn score(&self) -> f64 {
        let b = &self.0[self.0.len() - 8..];
        f64::from_le_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]])
    }
}

impl Keyed for ZEntry {
    #[inline]
    fn key(&self) -> &[u8] {
        self.member()
    }

    fn heap_size(&self) -> usize {
        self.0.heap_size()
    }
}

/// The big encoding: member → score, and the ordered tree.
#[derive(Clone, Debug, Default)]
pub struct SortedTree {
    index: ScanTable<ZEntry>,
    tree: ScoreTree,
}

#[derive(Clone, Debug)]
pub enum ZSet {
    Pack(Pack<false>),
    Tree(Box<SortedTree>),
}

impl Default for ZSet {
    fn default() -> Self {
        ZSet::new()
    }
}

impl ZSet {
    /// An empty listpack sorted set.
    pub fn new() -> ZSet {
        ZSet::Pack(Pack::new())
    }

    /// An empty skiplist-encoded sorted set sized for `capacity`.
    pub fn new_tree(capacity: usize) -> ZSet {
        ZSet::Tree(Box::new(SortedTree {
            index: ScanTable::with_capacity(capacity),
            tree: ScoreTree::default(),
        }))
    }

    /// Redis's `zsetTypeCreate`: ZADD passes its member count and the first
    /// member's length, ZRANGESTORE the result length and 0.
    pub fn new_for(size_hint: usize, member_len_hint: usize, limits: &Limits) -> ZSet {
        if size_hint <= limits.zset_max_listpack_entries
            && member_len_hint <= limits.zset_max_listpack_value
        {
            ZSet::new()
        } else {
            ZSet::new_tree(size_hint)
        }
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            ZSet::Pack(_) => "listpack",
            ZSet::Tree(_) => "skiplist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            ZSet::Pack(p) => p.len() / 2,
            ZSet::Tree(t) => t.tree.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE), beyond the 16-byte handle.
    pub fn heap_size(&self) -> usize {
        match self {
            ZSet::Pack(p) => p.byte_len(),
            ZSet::Tree(t) => {
                std::mem::size_of::<SortedTree>() + t.index.heap_size() + t.tree.heap_size()
            }
        }
    }

    /// Redis's `zsetTypeMaybeConvert`, before adding about `size_hint`
    /// members to an existing set.
    pub fn maybe_convert(&mut self, size_hint: usize, limits: &Limits) {
        if matches!(self, ZSet::Pack(_)) && size_hint > limits.zset_max_listpack_entries {
            self.convert_to_tree(size_hint);
        }
    }

    fn convert_to_tree(&mut self, capacity: usize) {
        if let ZSet::Pack(p) = self {
            let mut big = SortedTree {
                index: ScanTable::with_capacity(capacity.max(p.len() / 2)),
                tree: ScoreTree::default(),
            };
            let mut off = FIRST;
            while off < p.byte_len() {
                let (m, s, next) = pair_at(p, off);
                let member = m.to_vec();
                big.index.insert_new(ZEntry::new(&member, s));
                big.tree.insert(s, &member);
                off = next;
            }
            *self = ZSet::Tree(Box::new(big));
        }
    }

    /// Redis's `zsetConvertToListpackIfNeeded` for STORE results: back to a
    /// listpack when the count and the longest member allow it.
    pub fn convert_to_pack_if_needed(&mut self, limits: &Limits) {
        let ZSet::Tree(t) = self else { return };
        if t.tree.len() > limits.zset_max_listpack_entries {
            return;
        }
        let mut longest = 0;
        let mut total = 0usize;
        for (m, _) in t.tree.iter_from(0, false) {
            let len = m.len();
            longest = longest.max(len);
            total += len;
        }
        if longest > limits.zset_max_listpack_value || total > crate::pack::MAX_SAFE_BYTES {
            return;
        }
        let mut p = Pack::new();
        let items: Vec<(Vec<u8>, f64)> =
            t.tree.iter_from(0, false).map(|(m, s)| (m.to_vec(), s)).collect();
        let flat: Vec<Item<'_>> =
            items.iter().flat_map(|(m, s)| [Item::from_bytes(m), Item::from_score(*s)]).collect();
        p.push_back(&flat);
        *self = ZSet::Pack(p);
    }

    /// Offset and score of `member` in a pack.
    fn pack_find(p: &Pack<false>, member: &[u8]) -> Option<(usize, f64)> {
        let off = p.find(&Probe::new(member), FIRST, 2)?;
        let (_, s, _) = pair_at(p, off);
        Some((off, s))
    }

    /// ZSCORE.
    pub fn score(&self, member: &[u8]) -> Option<f64> {
        match self {
            ZSet::Pack(p) => Self::pack_find(p, member).map(|(_, s)| s),
            ZSet::Tree(t) => t.index.get(member).map(|e| e.score()),
        }
    }

    /// ZADD/ZINCRBY for one member (Redis's `zsetAdd`).
    pub fn add(
        &mut self,
        member: &[u8],
        score: f64,
        flags: AddFlags,
        limits: &Limits,
    ) -> Result<AddOutcome, NotANumber> {
        if score.is_nan() {
            return Err(NotANumber);
        }
        let nop = AddOutcome { added: false, updated: false, score: None };
        let current = self.score(member);
        let Some(cur) = current else {
            if flags.xx {
                return Ok(nop);
            }
            self.insert_new(member, score, limits);
            return Ok(AddOutcome { added: true, updated: false, score: Some(score) });
        };
        if flags.nx {
            return Ok(nop);
        }
        let new = if flags.incr { score + cur } else { score };
        if new.is_nan() {
            return Err(NotANumber);
        }
        if (flags.lt && new >= cur) || (flags.gt && new <= cur) {
            return Ok(nop);
        }
        if new == cur {
            return Ok(AddOutcome { added: false, updated: false, score: Some(new) });
        }
        self.change_score(member, cur, new);
        Ok(AddOutcome { added: false, updated: true, score: Some(new) })
    }

    fn insert_new(&mut self, member: &[u8], score: f64, limits: &Limits) {
        if let ZSet::Pack(p) = self {
            if p.len() / 2 + 1 > limits.zset_max_listpack_entries
                || member.len() > limits.zset_max_listpack_value
                || !p.safe_to_add(member.len())
            {
                let n = p.len() / 2 + 1;
                self.convert_to_tree(n);
            }
        }
        match self {
            ZSet::Pack(p) => pack_insert_sorted(p, score, member),
            ZSet::Tree(t) => {
                t.index.insert_new(ZEntry::new(member, score));
                t.tree.insert(score, member);
            }
        }
    }

    fn change_score(&mut self, member: &[u8], cur: f64, new: f64) {
        match self {
            ZSet::Pack(p) => {
                if let Some((off, _)) = Self::pack_find(p, member) {
                    p.delete(off, 2);
                    pack_insert_sorted(p, new, member);
                }
            }
            ZSet::Tree(t) => {
                t.tree.remove(cur, member);
                t.tree.insert(new, member);
                t.index.insert(ZEntry::new(member, new));
            }
        }
    }

    /// ZREM of one member; true if it was there.
    pub fn remove(&mut self, member: &[u8]) -> bool {
        match self {
            ZSet::Pack(p) => match Self::pack_find(p, member) {
                Some((off, _)) => {
                    p.delete(off, 2);
                    true
                }
                None => false,
            },
            ZSet::Tree(t) => match t.index.remove(member) {
                Some(e) => {
                    t.tree.remove(e.score(), member);
                    true
                }
                None => false,
            },
        }
    }

    /// Number of members for which the prefix predicate holds.
    fn count_while(&self, pred: &impl Fn(f64, &Item<'_>) -> bool) -> usize {
        match self {
            ZSet::Pack(p) => pack_count_while(p, pred).0,
            ZSet::Tree(t) => t.tree.count_while(pred),
        }
    }

    /// ZRANK/ZREVRANK: the member's rank (0 = lowest, or highest when
    /// `reverse`) and score.
    pub fn rank(&self, member: &[u8], reverse: bool) -> Option<(usize, f64)> {
        let score = self.score(member)?;
        let below = self
            .count_while(&|s, m| crate::score_tree::cmp_key(s, m, score, member) == Ordering::Less);
        let rank = if reverse { self.len() - 1 - below } else { below };
        Some((rank, score))
    }

    /// Ascending ranks `[lo, hi)` of a score range.
    fn score_ranks(&self, range: &ScoreRange) -> (usize, usize) {
        let lo = self.count_while(&|s, _| range.before_min(s));
        let hi = self.count_while(&|s, _| range.not_after_max(s));
        (lo, hi.max(lo))
    }

    /// Ascending ranks `[lo, hi)` of a lex range.
    fn lex_ranks(&self, range: &LexRange) -> (usize, usize) {
        let lo = self.count_while(&|_, m| range.before_min(m));
        let hi = self.count_while(&|_, m| range.not_after_max(m));
        (lo, hi.max(lo))
    }

    /// ZCOUNT, in O(log n).
    pub fn count_by_score(&self, range: &ScoreRange) -> usize {
        let (lo, hi) = self.score_ranks(range);
        hi - lo
    }

    /// ZLEXCOUNT, in O(log n).
    pub fn count_by_lex(&self, range: &LexRange) -> usize {
        let (lo, hi) = self.lex_ranks(range);
        hi - lo
    }

    /// Iterates `count` members from ascending rank `first`, upwards or
    /// (`reverse`) downwards.
    fn iter_ranks(&self, first: usize, count: usize, reverse: bool) -> ZIter<'_> {
        let len = self.len();
        let count = if first >= len {
            0
        } else if reverse {
            count.min(first + 1)
        } else {
            count.min(len - first)
        };
        let inner = match self {
            ZSet::Pack(p) if reverse => {
                // A forward pack cannot step back: note the pair offsets.
                let mut offsets = Vec::with_capacity(first + 1);
                let mut off = FIRST;
                for _ in 0..=first.min(len.saturating_sub(1)) {
                    offsets.push(off);
                    off = pair_at(p, off).2;
                }
                Walk::PackBack { pack: p, offsets }
            }
            ZSet::Pack(p) => {
                let off = if count == 0 {
                    p.byte_len()
                } else {
                    pack_pair_offset(p, first).unwrap_or(p.byte_len())
                };
                Walk::Pack { pack: p, off }
            }
            ZSet::Tree(t) => Walk::Tree(t.tree.iter_from(first, reverse)),
        };
        ZIter { walk: inner, left: count }
    }

    /// Every member in ascending order.
    pub fn iter(&self) -> ZIter<'_> {
        self.iter_ranks(0, self.len(), false)
    }

    /// ZRANGE by index: `start..=stop` with Redis's index rules (negative
    /// from the end, clamped); with `reverse` index 0 is the highest.
    pub fn range_by_rank(&self, start: i64, stop: i64, reverse: bool) -> ZIter<'_> {
        let len = self.len();
        match normalize_range(start, stop, len) {
            None => self.iter_ranks(0, 0, reverse),
            Some((a, b)) => {
                let first = if reverse { len - 1 - a } else { a };
                self.iter_ranks(first, b - a + 1, reverse)
            }
        }
    }

    /// Iterates ascending ranks `[lo, hi)` in a direction, after skipping
    /// `offset` and keeping at most `limit` (ZRANGE … LIMIT).
    fn window(
        &self,
        lo: usize,
        hi: usize,
        reverse: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> ZIter<'_> {
        let available = (hi - lo).saturating_sub(offset);
        let count = limit.map_or(available, |l| l.min(available));
        if count == 0 {
            return self.iter_ranks(0, 0, reverse);
        }
        let first = if reverse { hi - 1 - offset } else { lo + offset };
        self.iter_ranks(first, count, reverse)
    }

    /// ZRANGE BYSCORE (and ZRANGEBYSCORE / ZREVRANGEBYSCORE).
    pub fn range_by_score(
        &self,
        range: &ScoreRange,
        reverse: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> ZIter<'_> {
        let (lo, hi) = self.score_ranks(range);
        self.window(lo, hi, reverse, offset, limit)
    }

    /// ZRANGE BYLEX (and ZRANGEBYLEX / ZREVRANGEBYLEX).
    pub fn range_by_lex(
        &self,
        range: &LexRange,
        reverse: bool,
        offset: usize,
        limit: Option<usize>,
    ) -> ZIter<'_> {
        let (lo, hi) = self.lex_ranks(range);
        self.window(lo, hi, reverse, offset, limit)
    }

    /// Removes ascending ranks `[lo, hi)`, returning the removed members.
    fn remove_ranks(&mut self, lo: usize, hi: usize) -> Vec<(Vec<u8>, f64)> {
        if lo >= hi {
            return Vec::new();
        }
        let removed: Vec<(Vec<u8>, f64)> =
            self.iter_ranks(lo, hi - lo, false).map(|(m, s)| (m.to_vec(), s)).collect();
        match self {
            ZSet::Pack(p) => {
                let start = pack_pair_offset(p, lo).unwrap_or(FIRST);
                let end = pack_pair_offset(p, hi).unwrap_or(p.byte_len());
                p.delete_bytes(start, end, 2 * (hi - lo));
            }
            ZSet::Tree(t) => {
                // Each removal moves the next one down to rank `lo`.
                for (m, _) in &removed {
                    t.tree.remove_rank(lo);
                    t.index.remove(m);
                }
            }
        }
        removed
    }

    /// ZREMRANGEBYRANK with Redis's index rules; returns how many went.
    pub fn remove_range_by_rank(&mut self, start: i64, stop: i64) -> usize {
        match normalize_range(start, stop, self.len()) {
            None => 0,
            Some((a, b)) => self.remove_ranks(a, b + 1).len(),
        }
    }

    /// ZREMRANGEBYSCORE.
    pub fn remove_range_by_score(&mut self, range: &ScoreRange) -> usize {
        let (lo, hi) = self.score_ranks(range);
        self.remove_ranks(lo, hi).len()
    }

    /// ZREMRANGEBYLEX.
    pub fn remove_range_by_lex(&mut self, range: &LexRange) -> usize {
        let (lo, hi) = self.lex_ranks(range);
        self.remove_ranks(lo, hi).len()
    }

    /// ZPOPMIN/ZPOPMAX (and ZMPOP): up to `count` members from the low or
    /// (`max`) high end, in the order popped.
    pub fn pop(&mut self, max: bool, count: usize) -> Vec<(Vec<u8>, f64)> {
        let len = self.len();
        let n = count.min(len);
        if max {
            let mut v = self.remove_ranks(len - n, len);
            v.reverse();
            v
        } else {
            self.remove_ranks(0, n)
        }
    }

    /// The member at ascending rank `rank`.
    pub fn get_by_rank(&self, rank: usize) -> Option<(Item<'_>, f64)> {
        match self {
            ZSet::Pack(p) => {
                let off = pack_pair_offset(p, rank)?;
                let (m, s, _) = pair_at(p, off);
                Some((m, s))
            }
            ZSet::Tree(t) => t.tree.get(rank),
        }
    }

    /// ZRANDMEMBER without a count.
    pub fn random(&self, rng: &mut (impl FnMut() -> u64 + ?Sized)) -> Option<(Item<'_>, f64)> {
        let len = self.len();
        if len == 0 {
            return None;
        }
        self.get_by_rank(below(rng, len))
    }

    /// ZRANDMEMBER with a negative count: independent picks in random order
    /// (callers bound `count` per call, as Redis does).
    pub fn random_with_repeats(
        &self,
        count: usize,
        rng: &mut (impl FnMut() -> u64 + ?Sized),
    ) -> Vec<(Item<'_>, f64)> {
        let len = self.len();
        if len == 0 {
            return Vec::new();
        }
        match self {
            ZSet::Pack(p) => {
                let picks = with_repeats_sorted(rng, len, count);
                let mut out = vec![(Item::Int(0), 0.0); picks.len()];
                let mut off = FIRST;
                let mut at = 0;
                for (index, order) in picks {
                    while at < index {
                        off = pair_at(p, off).2;
                        at += 1;
                    }
                    let (m, s, _) = pair_at(p, off);
                    out[order] = (m, s);
                }
                out
            }
            ZSet::Tree(_) => (0..count).filter_map(|_| self.random(rng)).collect(),
        }
    }

    /// ZRANDMEMBER with a positive count below the size: distinct members
    /// in rank order.
    pub fn random_distinct(
        &self,
        count: usize,
        rng: &mut (impl FnMut() -> u64 + ?Sized),
    ) -> Vec<(Item<'_>, f64)> {
        let picks = distinct_sorted(rng, self.len(), count);
        match self {
            ZSet::Pack(_) => {
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
            ZSet::Tree(t) => picks.into_iter().filter_map(|r| t.tree.get(r)).collect(),
        }
    }

    /// ZSCAN step: listpacks return everything with cursor 0; the big
    /// encoding scans its member table by hash position.
    pub fn scan(&self, cursor: u64, count: usize, mut f: impl FnMut(Item<'_>, f64)) -> u64 {
        match self {
            ZSet::Pack(_) => {
                for (m, s) in self.iter() {
                    f(m, s);
                }
                0
            }
            ZSet::Tree(t) => t.index.scan(cursor, count, |e| f(Item::Str(e.member()), e.score())),
        }
    }

    #[cfg(test)]
    fn check(&self) {
        if let ZSet::Tree(t) = self {
            t.tree.check();
            assert_eq!(t.index.len(), t.tree.len());
            for (m, s) in t.tree.iter_from(0, false) {
                assert_eq!(t.index.get(&m.to_vec()).map(|e| e.score()), Some(s));
            }
        }
    }
}

enum Walk<'a> {
    Pack {
        pack: &'a Pack<false>,
        off: usize,
    },
    /// Offsets of the pairs still to visit, the next one last.
    PackBack {
        pack: &'a Pack<false>,
        offsets: Vec<usize>,
    },
    Tree(TreeIter<'a>),
}

/// Members and scores of a rank window, in either direction.
pub struct ZIter<'a> {
    walk: Walk<'a>,
    left: usize,
}

impl<'a> Iterator for ZIter<'a> {
    type Item = (Item<'a>, f64);

    fn next(&mut self) -> Option<(Item<'a>, f64)> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        match &mut self.walk {
            Walk::Pack { pack, off } => {
                if *off >= pack.byte_len() {
                    return None;
                }
                let (m, s, next) = pair_at(pack, *off);
                *off = next;
                Some((m, s))
            }
            Walk::PackBack { pack, offsets } => {
                let (m, s, _) = pair_at(pack, offsets.pop()?);
                Some((m, s))
            }
            Walk::Tree(it) => it.next(),
        }
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for ZIter<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::test_rng;
    use std::collections::{BTreeMap, HashMap};

    fn add(z: &mut ZSet, m: &str, s: f64) -> AddOutcome {
        z.add(m.as_bytes(), s, AddFlags::default(), &Limits::default()).unwrap()
    }

    fn members(it: ZIter<'_>) -> Vec<(String, f64)> {
        it.map(|(m, s)| (String::from_utf8(m.to_vec()).unwrap(), s)).collect()
    }

    #[test]
    fn add_flags_follow_zadd() {
        let lim = Limits::default();
        let mut z = ZSet::new();
        assert_eq!(
            add(&mut z, "a", 1.0),
            AddOutcome { added: true, updated: false, score: Some(1.0) }
        );
        assert_eq!(
            add(&mut z, "a", 1.0),
            AddOutcome { added: false, updated: false, score: Some(1.0) }
        );
        assert!(add(&mut z, "a", 2.0).updated);
        let nx = AddFlags { nx: true, ..AddFlags::default() };
        assert_eq!(z.add(b"a", 5.0, nx, &lim).unwrap().score, None);
        let xx = AddFlags { xx: true, ..AddFlags::default() };
        assert_eq!(z.add(b"b", 5.0, xx, &lim).unwrap().score, None);
        let gt = AddFlags { gt: true, ..AddFlags::default() };
        assert_eq!(z.add(b"a", 1.0, gt, &lim).unwrap().score, None);
        assert_eq!(z.add(b"a", 3.0, gt, &lim).unwrap().score, Some(3.0));
        let lt_incr = AddFlags { lt: true, incr: true, ..AddFlags::default() };
        assert_eq!(z.add(b"a", 1.0, lt_incr, &lim).unwrap().score, None);
        assert_eq!(z.add(b"a", -1.0, lt_incr, &lim).unwrap().score, Some(2.0));
        let incr = AddFlags { incr: true, ..AddFlags::default() };
        assert_eq!(z.add(b"new", 2.5, incr, &lim).unwrap().score, Some(2.5));
        z.add(b"inf", f64::INFINITY, AddFlags::default(), &lim).unwrap();
        assert_eq!(z.add(b"inf", f64::NEG_INFINITY, incr, &lim), Err(NotANumber));
        assert_eq!(z.add(b"x", f64::NAN, AddFlags::default(), &lim), Err(NotANumber));
        assert_eq!(z.score(b"inf"), Some(f64::INFINITY));
        z.add(b"neg0", -0.0, AddFlags::default(), &lim).unwrap();
        assert!(z.score(b"neg0").unwrap().is_sign_negative(), "-0 keeps its sign");
    }

    #[test]
    fn ranges_ranks_and_counts() {
        for big in [false, true] {
            let mut z = if big { ZSet::new_tree(0) } else { ZSet::new() };
            for (i, m) in ["a", "b", "c", "d", "e"].iter().enumerate() {
                add(&mut z, m, i as f64 + 1.0);
            }
            add(&mut z, "c2", 3.0);
            assert_eq!(z.rank(b"c2", false), Some((3, 3.0)));
            assert_eq!(z.rank(b"c2", true), Some((2, 3.0)));
            assert_eq!(z.rank(b"zz", false), None);
            let r = ScoreRange::new(2.0, false, 3.0, false);
            assert_eq!(z.count_by_score(&r), 3);
            assert_eq!(
                members(z.range_by_score(&r, false, 0, None)),
                [("b".into(), 2.0), ("c".into(), 3.0), ("c2".into(), 3.0)]
            );
            assert_eq!(members(z.range_by_score(&r, true, 1, Some(1))), [("c".into(), 3.0)]);
            let ex = ScoreRange::new(2.0, true, 3.0, true);
            assert_eq!(z.count_by_score(&ex), 0);
            let all = ScoreRange::new(f64::NEG_INFINITY, false, f64::INFINITY, false);
            assert_eq!(z.count_by_score(&all), 6);
            let empty = ScoreRange::new(5.0, false, 1.0, false);
            assert_eq!(z.count_by_score(&empty), 0);
            assert_eq!(
                members(z.range_by_rank(0, 1, true)),
                [("e".into(), 5.0), ("d".into(), 4.0)]
            );
            assert_eq!(
                members(z.range_by_rank(-2, -1, false)),
                [("d".into(), 4.0), ("e".into(), 5.0)]
            );
            assert_eq!(z.range_by_rank(3, 1, false).count(), 0);
            assert_eq!(z.remove_range_by_rank(0, 0), 1);
            assert_eq!(z.remove_range_by_score(&ScoreRange::new(3.0, false, 3.0, false)), 2);
            assert_eq!(
                members(z.iter()),
                [("b".into(), 2.0), ("d".into(), 4.0), ("e".into(), 5.0)]
            );
            assert_eq!(z.pop(true, 2), [(b"e".to_vec(), 5.0), (b"d".to_vec(), 4.0)]);
            assert_eq!(z.pop(false, 5), [(b"b".to_vec(), 2.0)]);
            assert!(z.is_empty());
            z.check();
        }
    }

    #[test]
    fn lex_ranges() {
        for big in [false, true] {
            let mut z = if big { ZSet::new_tree(0) } else { ZSet::new() };
            for m in ["a", "b", "c", "d", "e", "1", "10", "2"] {
                add(&mut z, m, 0.0);
            }
            let lex = |a: &str, b: &str| LexRange {
                min: LexBound::parse(a.as_bytes()).unwrap(),
                max: LexBound::parse(b.as_bytes()).unwrap(),
            };
            assert_eq!(z.count_by_lex(&lex("-", "+")), 8);
            assert_eq!(z.count_by_lex(&lex("[b", "(d")), 2);
            assert_eq!(z.count_by_lex(&lex("(b", "[d")), 2);
            assert_eq!(z.count_by_lex(&lex("+", "-")), 0);
            assert_eq!(z.count_by_lex(&lex("[1", "[2")), 3, "integer members compare as strings");
            let got: Vec<String> = members(z.range_by_lex(&lex("[1", "+"), true, 0, Some(3)))
                .into_iter()
                .map(|x| x.0)
                .collect();
            assert_eq!(got, ["e", "d", "c"]);
            assert_eq!(z.remove_range_by_lex(&lex("-", "(a")), 3);
            assert_eq!(z.len(), 5);
            assert!(
                LexBound::parse(b"a").is_none()
                    && LexBound::parse(b"+x").is_none()
                    && LexBound::parse(b"").is_none()
            );
            z.check();
        }
    }

    #[test]
    fn conversions_at_the_thresholds() {
        let lim = Limits::default();
        let mut z = ZSet::new();
        for i in 0..128 {
            add(&mut z, &format!("m{i}"), i as f64);
        }
        assert_eq!(z.encoding(), "listpack");
        add(&mut z, "one more", 0.5);
        assert_eq!(z.encoding(), "skiplist");
        z.check();
        let mut z = ZSet::new();
        z.add(&[b'x'; 64], 1.0, AddFlags::default(), &lim).unwrap();
        assert_eq!(z.encoding(), "listpack");
        z.add(&[b'x'; 65], 1.0, AddFlags::default(), &lim).unwrap();
        assert_eq!(z.encoding(), "skiplist");
        assert_eq!(ZSet::new_for(129, 1, &lim).encoding(), "skiplist");
        assert_eq!(ZSet::new_for(128, 65, &lim).encoding(), "skiplist");
        assert_eq!(ZSet::new_for(128, 64, &lim).encoding(), "listpack");
        let mut z = ZSet::new();
        z.maybe_convert(129, &lim);
        assert_eq!(z.encoding(), "skiplist");
        // STORE results shrink back when they fit.
        add(&mut z, "a", 1.0);
        z.convert_to_pack_if_needed(&lim);
        assert_eq!(z.encoding(), "listpack");
        assert_eq!(z.score(b"a"), Some(1.0));
        // Removing never converts back.
        let mut z = ZSet::new_tree(0);
        add(&mut z, "a", 1.0);
        z.remove(b"a");
        assert_eq!(z.encoding(), "skiplist");
    }

    /// Thousands of random operations on both encodings against a model of
    /// member → score plus a sorted view.
    #[test]
    fn matches_a_model() {
        for (seed, max_entries) in [(1u64, 128usize), (2, 0), (3, 16)] {
            let lim = Limits { zset_max_listpack_entries: max_entries, ..Limits::default() };
            let mut rng = test_rng(seed);
            let mut z = ZSet::new();
            let mut model: HashMap<Vec<u8>, f64> = HashMap::new();
            let sorted = |model: &HashMap<Vec<u8>, f64>| -> Vec<(Vec<u8>, f64)> {
                let mut v: Vec<(Vec<u8>, f64)> =
                    model.iter().map(|(m, s)| (m.clone(), *s)).collect();
                v.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then(a.0.cmp(&b.0)));
                v
            };
            for step in 0..6000 {
                let m = match below(&mut rng, 3) {
                    0 => format!("{}", below(&mut rng, 400)).into_bytes(),
                    1 => format!("member:{}", below(&mut rng, 400)).into_bytes(),
                    _ => vec![b'z'; 1 + below(&mut rng, 40)],
                };
                let s = match below(&mut rng, 4) {
                    0 => below(&mut rng, 20) as f64,
                    1 => below(&mut rng, 1000) as f64 / 7.0 - 50.0,
                    2 => [f64::INFINITY, f64::NEG_INFINITY, 0.0, 1e300][below(&mut rng, 4)],
                    _ => (below(&mut rng, 1 << 50) as f64) * 3.0,
                };
                match below(&mut rng, 10) {
                    0..=1 => assert_eq!(z.remove(&m), model.remove(&m).is_some()),
                    2 => {
                        let want =
                            sorted(&model).iter().position(|x| x.0 == m).map(|r| (r, model[&m]));
                        assert_eq!(z.rank(&m, false), want);
                    }
                    3 => {
                        let (a, b) = (s.min(s / 2.0), s.max(s / 2.0));
                        let r =
                            ScoreRange::new(a, below(&mut rng, 2) == 0, b, below(&mut rng, 2) == 0);
                        let want: Vec<(Vec<u8>, f64)> = sorted(&model)
                            .into_iter()
                            .filter(|x| !r.before_min(x.1) && r.not_after_max(x.1))
                            .collect();
                        assert_eq!(z.count_by_score(&r), want.len());
                        let got: Vec<(Vec<u8>, f64)> = z
                            .range_by_score(&r, true, 1, Some(5))
                            .map(|(m, s)| (m.to_vec(), s))
                            .collect();
                        let want_rev: Vec<(Vec<u8>, f64)> =
                            want.iter().rev().skip(1).take(5).cloned().collect();
                        assert_eq!(got, want_rev);
                    }
                    4 if step % 10 == 0 => {
                        let removed = z.remove_range_by_rank(2, 4);
                        let all = sorted(&model);
                        let gone: Vec<Vec<u8>> =
                            all.iter().skip(2).take(3).map(|x| x.0.clone()).collect();
                        assert_eq!(removed, gone.len());
                        for g in gone {
                            model.remove(&g);
                        }
                    }
                    5 => {
                        let incr = AddFlags { incr: true, ..AddFlags::default() };
                        let cur = model.get(&m).copied().unwrap_or(0.0);
                        match z.add(&m, s, incr, &lim) {
                            Ok(out) => {
                                assert_eq!(out.score, Some(cur + s));
                                model.insert(m, cur + s);
                            }
                            Err(NotANumber) => assert!((cur + s).is_nan()),
                        }
                    }
                    _ => {
                        let out = z.add(&m, s, AddFlags::default(), &lim).unwrap();
                        let old = model.insert(m, s);
                        assert_eq!(out.added, old.is_none());
                        assert_eq!(out.updated, old.is_some_and(|o| o != s));
                    }
                }
                assert_eq!(z.len(), model.len(), "seed {seed} step {step}");
                if step % 500 == 0 {
                    z.check();
                    let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
                    assert_eq!(got, sorted(&model));
                }
            }
            z.check();
            let got: Vec<(Vec<u8>, f64)> = z.iter().map(|(m, s)| (m.to_vec(), s)).collect();
            assert_eq!(got, sorted(&model));
            let tree: BTreeMap<usize, Vec<u8>> =
                got.iter().enumerate().map(|(i, x)| (i, x.0.clone())).collect();
            for (r, m) in tree.iter().step_by(13) {
                assert_eq!(z.get_by_rank(*r).map(|x| x.0.to_vec()).as_ref(), Some(m));
            }
        }
    }

    #[test]
    fn random_members_and_zscan() {
        let lim = Limits::default();
        let mut rng = test_rng(8);
        for n in [10usize, 500] {
            let mut z = ZSet::new();
            for i in 0..n {
                z.add(format!("m{i}").as_bytes(), i as f64, AddFlags::default(), &lim).unwrap();
            }
            let picks = z.random_with_repeats(2000, &mut rng);
            assert_eq!(picks.len(), 2000);
            assert!(picks.iter().all(|(m, s)| z.score(&m.to_vec()) == Some(*s)));
            let d = z.random_distinct(n / 2, &mut rng);
            let unique: std::collections::HashSet<Vec<u8>> =
                d.iter().map(|x| x.0.to_vec()).collect();
            assert_eq!(unique.len(), n / 2);
            let mut seen = std::collections::HashSet::new();
            let mut cursor = 0;
            let mut calls = 0;
            loop {
                cursor = z.scan(cursor, 20, |m, s| {
                    assert_eq!(z.score(&m.to_vec()), Some(s));
                    seen.insert(m.to_vec());
                });
                calls += 1;
                if cursor == 0 {
                    break;
                }
            }
            assert_eq!(seen.len(), n);
            assert_eq!(calls > 1, n > 128, "listpacks answer in one call");
        }
    }
}
