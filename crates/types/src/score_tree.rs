//! [`ScoreTree`]: the ordered half of a big sorted set — a B+tree over
//! `(score, member)` whose inner nodes keep subtree sizes, so rank, select
//! and range bounds are O(log n), like Redis's skiplist with its spans.
//!
//! Leaves are forward [`Pack`]s of member, score pairs (the same layout as
//! a small sorted set), at most [`LEAF_MAX_PAIRS`] pairs or
//! [`LEAF_MAX_BYTES`] bytes, so an element costs its packed bytes plus a
//! small share of node overhead instead of a skiplist node's pointers.
//! Inner nodes hold up to [`INNER_MAX`] children, their sizes and
//! separators: `seps[i]` is a lower bound of `children[i + 1]` and above
//! every key of `children[i]` (set at splits; deletions may leave it
//! below the child's first key, which keeps both properties).
//!
//! Scores are never NaN (the sorted set rejects NaN before it gets here),
//! so `partial_cmp` is total; `-0.0` and `0.0` compare equal, as in Redis.
//!
//! Queries take a *prefix predicate*: a test true for every key below some
//! boundary and false from it on (e.g. "score < min"). The number of keys
//! it holds for is a rank, found by one descent.

use crate::pack::{Item, Pack, FIRST};
use crate::SmallBytes;
use std::cmp::Ordering;

pub const LEAF_MAX_PAIRS: usize = 32;
pub const LEAF_MAX_BYTES: usize = 2048;
const LEAF_MIN_PAIRS: usize = LEAF_MAX_PAIRS / 4;
pub const INNER_MAX: usize = 64;
const INNER_MIN: usize = INNER_MAX / 4;

/// Orders `(score, member)` keys: score first, then member bytes.
#[inline]
pub fn cmp_key(score: f64, member: &Item<'_>, other_score: f64, other_member: &[u8]) -> Ordering {
    match score.partial_cmp(&other_score) {
        Some(Ordering::Equal) | None => member.cmp_bytes(other_member),
        Some(o) => o,
    }
}

/// The pair at `off` of a member/score pack: member, score, next offset.
#[inline]
pub fn pair_at(p: &Pack<false>, off: usize) -> (Item<'_>, f64, usize) {
    let (member, score_off) = p.entry(off);
    let (score, next) = p.entry(score_off);
    (member, score.score(), next)
}

/// Number of leading pairs for which `pred` holds, and the offset after
/// them.
#[inline]
pub fn pack_count_while(p: &Pack<false>, pred: &impl Fn(f64, &Item<'_>) -> bool) -> (usize, usize) {
    let mut off = FIRST;
    let mut n = 0;
    while off < p.byte_len() {
        let (m, s, next) = pair_at(p, off);
        if !pred(s, &m) {
            break;
        }
        n += 1;
        off = next;
    }
    (n, off)
}

/// Inserts a pair at its place in `(score, member)` order.
pub fn pack_insert_sorted(p: &mut Pack<false>, score: f64, member: &[u8]) {
    let (_, off) = pack_count_while(p, &|s, m| cmp_key(s, m, score, member) == Ordering::Less);
    p.insert(off, &[Item::from_bytes(member), Item::from_score(score)]);
}

/// Offset of the pair `(score, member)`, if present.
pub fn pack_find_exact(p: &Pack<false>, score: f64, member: &[u8]) -> Option<usize> {
    let (_, off) = pack_count_while(p, &|s, m| cmp_key(s, m, score, member) == Ordering::Less);
    if off >= p.byte_len() {
        return None;
    }
    let (m, s, _) = pair_at(p, off);
    (s == score && m.eq_bytes(member)).then_some(off)
}

/// Byte offset of pair number `index`.
pub fn pack_pair_offset(p: &Pack<false>, index: usize) -> Option<usize> {
    p.skip(FIRST, 2 * index)
}

#[derive(Clone, Debug)]
struct Sep {
    score: f64,
    member: SmallBytes,
}

#[derive(Clone, Debug)]
enum Node {
    Leaf(Pack<false>),
    Inner(Box<Inner>),
}

#[derive(Clone, Debug)]
struct Inner {
    children: Vec<Node>,
    counts: Vec<usize>,
    seps: Vec<Sep>,
}

impl Node {
    fn len(&self) -> usize {
        match self {
            Node::Leaf(p) => p.len() / 2,
            Node::Inner(i) => i.counts.iter().sum(),
        }
    }

    fn underfull(&self) -> bool {
        match self {
            Node::Leaf(p) => p.len() / 2 < LEAF_MIN_PAIRS && p.byte_len() < LEAF_MAX_BYTES / 4,
            Node::Inner(i) => i.children.len() < INNER_MIN,
        }
    }

    fn heap_size(&self) -> usize {
        match self {
            Node::Leaf(p) => p.byte_len(),
            Node::Inner(i) => {
                std::mem::size_of::<Inner>()
                    + i.children.capacity() * std::mem::size_of::<Node>()
                    + i.counts.capacity() * 8
                    + i.seps.capacity() * std::mem::size_of::<Sep>()
                    + i.seps.iter().map(|s| s.member.heap_size()).sum::<usize>()
                    + i.children.iter().map(Node::heap_size).sum::<usize>()
            }
        }
    }
}

impl Inner {
    /// Index of the child whose range holds `(score, member)`.
    fn child_for(&self, score: f64, member: &[u8]) -> usize {
        self.seps.partition_point(|s| {
            cmp_key(s.score, &Item::Str(&s.member), score, member) != Ordering::Greater
        })
    }

    /// Splits off the upper half; returns the separator that goes up.
    fn split(&mut self) -> (Sep, Inner) {
        let mid = self.children.len() / 2;
        let children = self.children.split_off(mid);
        let counts = self.counts.split_off(mid);
        let mut seps = self.seps.split_off(mid - 1);
        let up = seps.remove(0);
        (up, Inner { children, counts, seps })
    }
}

/// Splits a leaf in two at its middle pair when it is over a limit.
fn split_leaf(p: &mut Pack<false>) -> Option<(Sep, Pack<false>)> {
    let pairs = p.len() / 2;
    if pairs < 2 || (pairs <= LEAF_MAX_PAIRS && p.byte_len() <= LEAF_MAX_BYTES) {
        return None;
    }
    // Split by bytes when bytes are the problem, else by count.
    let half = if pairs > LEAF_MAX_PAIRS {
        pairs / 2
    } else {
        let mut off = FIRST;
        let mut i = 0;
        while off < p.byte_len() / 2 && i < pairs - 1 {
            off = pair_at(p, off).2;
            i += 1;
        }
        i.max(1)
    };
    let off = pack_pair_offset(p, half)?;
    let right = p.split_off(off, 2 * (pairs - half));
    let (m, s, _) = pair_at(&right, FIRST);
    let sep = Sep { score: s, member: SmallBytes::from(m.to_vec()) };
    Some((sep, right))
}

fn insert_rec(node: &mut Node, score: f64, member: &[u8]) -> Option<(Sep, Node)> {
    match node {
        Node::Leaf(p) => {
            pack_insert_sorted(p, score, member);
            split_leaf(p).map(|(sep, right)| (sep, Node::Leaf(right)))
        }
        Node::Inner(inner) => {
            let i = inner.child_for(score, member);
            inner.counts[i] += 1;
            let (sep, right) = insert_rec(&mut inner.children[i], score, member)?;
            let right_len = right.len();
            inner.counts[i] -= right_len;
            inner.seps.insert(i, sep);
            inner.children.insert(i + 1, right);
            inner.counts.insert(i + 1, right_len);
            if inner.children.len() > INNER_MAX {
                let (up, right) = inner.split();
                return Some((up, Node::Inner(Box::new(right))));
            }
            None
        }
    }
}

fn remove_rec(node: &mut Node, score: f64, member: &[u8]) -> bool {
    match node {
        Node::Leaf(p) => match pack_find_exact(p, score, member) {
            Some(off) => {
                p.delete(off, 2);
                true
            }
            None => false,
        },
        Node::Inner(inner) => {
            let i = inner.child_for(score, member);
            if !remove_rec(&mut inner.children[i], score, member) {
                return false;
            }
            removed_below(inner, i);
            true
        }
    }
}

/// Removes the key at `rank` (below the node's length): the walk goes by
/// the counts, with no key comparison.
fn remove_rank_rec(node: &mut Node, mut rank: usize) {
    match node {
        Node::Leaf(p) => {
            if let Some(off) = pack_pair_offset(p, rank) {
                p.delete(off, 2);
            }
        }
        Node::Inner(inner) => {
            let mut i = 0;
            while rank >= inner.counts[i] {
                rank -= inner.counts[i];
                i += 1;
            }
            remove_rank_rec(&mut inner.children[i], rank);
            removed_below(inner, i);
        }
    }
}

/// After a key went from child `i`: its count, and a merge when it is left
/// underfull.
fn removed_below(inner: &mut Inner, i: usize) {
    inner.counts[i] -= 1;
    if inner.children[i].underfull() && inner.children.len() > 1 {
        rebalance(inner, i);
    }
}

/// Merges child `i` with a neighbour, splitting the result again when it is
/// too big for one node (which evens the two out).
fn rebalance(inner: &mut Inner, i: usize) {
    let l = if i + 1 < inner.children.len() { i } else { i - 1 };
    let right = inner.children.remove(l + 1);
    let right_count = inner.counts.remove(l + 1);
    let sep = inner.seps.remove(l);
    inner.counts[l] += right_count;
    let split = match (&mut inner.children[l], right) {
        (Node::Leaf(a), Node::Leaf(b)) => {
            a.append(&b);
            split_leaf(a).map(|(s, r)| (s, Node::Leaf(r)))
        }
        (Node::Inner(a), Node::Inner(b)) => {
            let b = *b;
            a.seps.push(sep);
            a.seps.extend(b.seps);
            a.children.extend(b.children);
            a.counts.extend(b.counts);
            (a.children.len() > INNER_MAX).then(|| {
                let (up, r) = a.split();
                (up, Node::Inner(Box::new(r)))
            })
        }
        _ => unreachable!("siblings are at the same depth"),
    };
    if let Some((sep, right)) = split {
        let right_len = right.len();
        inner.counts[l] -= right_len;
        inner.seps.insert(l, sep);
        inner.children.insert(l + 1, right);
        inner.counts.insert(l + 1, right_len);
    }
}

/// Number of keys for which the prefix predicate `pred` holds.
fn count_while(node: &Node, pred: &impl Fn(f64, &Item<'_>) -> bool) -> usize {
    match node {
        Node::Leaf(p) => pack_count_while(p, pred).0,
        Node::Inner(inner) => {
            let j = inner.seps.partition_point(|s| pred(s.score, &Item::Str(&s.member)));
            inner.counts[..j].iter().sum::<usize>() + count_while(&inner.children[j], pred)
        }
    }
}

#[derive(Clone, Debug)]
pub struct ScoreTree {
    root: Node,
    len: usize,
}

impl Default for ScoreTree {
    fn default() -> Self {
        ScoreTree { root: Node::Leaf(Pack::new()), len: 0 }
    }
}

impl ScoreTree {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Heap bytes of the nodes (the root's handle is inline).
    pub fn heap_size(&self) -> usize {
        self.root.heap_size()
    }

    /// Inserts a key the caller knows is absent.
    pub fn insert(&mut self, score: f64, member: &[u8]) {
        self.len += 1;
        if let Some((sep, right)) = insert_rec(&mut self.root, score, member) {
            let right_len = right.len();
            let left = std::mem::replace(&mut self.root, Node::Leaf(Pack::new()));
            let inner = Inner {
                children: vec![left, right],
                counts: vec![self.len - right_len, right_len],
                seps: vec![sep],
            };
            self.root = Node::Inner(Box::new(inner));
        }
    }

    /// Removes `(score, member)`; false when absent.
    pub fn remove(&mut self, score: f64, member: &[u8]) -> bool {
        if !remove_rec(&mut self.root, score, member) {
            return false;
        }
        self.removed_one();
        true
    }

    /// Removes the key at `rank` (ZPOPMIN and the rank ranges, which know
    /// ranks: cheaper than a search by key); false when out of range.
    pub fn remove_rank(&mut self, rank: usize) -> bool {
        if rank >= self.len {
            return false;
        }
        remove_rank_rec(&mut self.root, rank);
        self.removed_one();
        true
    }

    /// After a removal: the count, and a root left with one child goes.
    fn removed_one(&mut self) {
        self.len -= 1;
        while let Node::Inner(inner) = &mut self.root {
            if inner.children.len() != 1 {
                break;
            }
            let child = inner.children.pop().unwrap_or(Node::Leaf(Pack::new()));
            self.root = child;
        }
    }

    /// How many keys satisfy the prefix predicate `pred` (a rank).
    pub fn count_while(&self, pred: &impl Fn(f64, &Item<'_>) -> bool) -> usize {
        count_while(&self.root, pred)
    }

    /// Number of keys below `(score, member)`: its rank when present.
    pub fn rank(&self, score: f64, member: &[u8]) -> usize {
        self.count_while(&|s, m| cmp_key(s, m, score, member) == Ordering::Less)
    }

    /// The element at `rank`.
    pub fn get(&self, rank: usize) -> Option<(Item<'_>, f64)> {
        let (leaf, index) = self.locate(rank)?;
        let off = pack_pair_offset(leaf, index)?;
        let (m, s, _) = pair_at(leaf, off);
        Some((m, s))
    }

    fn locate(&self, mut rank: usize) -> Option<(&Pack<false>, usize)> {
        if rank >= self.len {
            return None;
        }
        let mut node = &self.root;
        loop {
            match node {
                Node::Leaf(p) => return Some((p, rank)),
                Node::Inner(inner) => {
                    let mut i = 0;
                    while rank >= inner.counts[i] {
                        rank -= inner.counts[i];
                        i += 1;
                    }
                    node = &inner.children[i];
                }
            }
        }
    }

    /// Iterates from `rank` towards higher ranks, or lower when `reverse`.
    pub fn iter_from(&self, rank: usize, reverse: bool) -> TreeIter<'_> {
        let mut it = TreeIter {
            stack: Vec::new(),
            leaf: None,
            off: 0,
            offsets: Vec::new(),
            pos: 0,
            reverse,
        };
        if rank >= self.len {
            return it;
        }
        let mut node = &self.root;
        let mut r = rank;
        loop {
            match node {
                Node::Leaf(p) => {
                    it.enter_leaf(p, r);
                    return it;
                }
                Node::Inner(inner) => {
                    let mut i = 0;
                    while r >= inner.counts[i] {
                        r -= inner.counts[i];
                        i += 1;
                    }
                    it.stack.push((inner, i));
                    node = &inner.children[i];
                }
            }
        }
    }

    #[cfg(test)]
    pub(crate) fn check(&self) {
        fn walk(
            node: &Node,
            lo: Option<(f64, Vec<u8>)>,
            hi: Option<(f64, Vec<u8>)>,
            depth: usize,
            leaf_depth: &mut Option<usize>,
        ) -> usize {
            match node {
                Node::Leaf(p) => {
                    match leaf_depth {
                        Some(d) => assert_eq!(*d, depth, "leaves at one depth"),
                        None => *leaf_depth = Some(depth),
                    }
                    let mut prev: Option<(f64, Vec<u8>)> = None;
                    let mut off = FIRST;
                    while off < p.byte_len() {
                        let (m, s, next) = pair_at(p, off);
                        let mb = m.to_vec();
                        if let Some((ps, pm)) = &prev {
                            assert_eq!(cmp_key(*ps, &Item::Str(pm), s, &mb), Ordering::Less);
                        }
                        if let Some((ls, lm)) = &lo {
                            assert_ne!(cmp_key(s, &Item::Str(&mb), *ls, lm), Ordering::Less);
                        }
                        if let Some((hs, hm)) = &hi {
                            assert_eq!(cmp_key(s, &Item::Str(&mb), *hs, hm), Ordering::Less);
                        }
                        prev = Some((s, mb));
                        off = next;
                    }
                    p.len() / 2
                }
                Node::Inner(inner) => {
                    assert_eq!(inner.seps.len() + 1, inner.children.len());
                    assert!(inner.children.len() <= INNER_MAX);
                    let mut total = 0;
                    for (i, child) in inner.children.iter().enumerate() {
                        let clo = if i == 0 {
                            lo.clone()
                        } else {
                            Some((inner.seps[i - 1].score, inner.seps[i - 1].member.to_vec()))
                        };
                        let chi = if i == inner.seps.len() {
                            hi.clone()
                        } else {
                            Some((inner.seps[i].score, inner.seps[i].member.to_vec()))
                        };
                        let n = walk(child, clo, chi, depth + 1, leaf_depth);
                        assert_eq!(n, inner.counts[i]);
                        total += n;
                    }
                    total
                }
            }
        }
        let mut leaf_depth = None;
        assert_eq!(walk(&self.root, None, None, 0, &mut leaf_depth), self.len);
    }
}

/// In-order (or reverse) iteration from a rank. Forward walks a leaf's
/// pairs directly; reverse collects the leaf's pair offsets first (a forward
/// pack cannot step back).
pub struct TreeIter<'a> {
    stack: Vec<(&'a Inner, usize)>,
    leaf: Option<&'a Pack<false>>,
    /// Forward: offset of the next pair.
    off: usize,
    /// Reverse: the leaf's pair offsets and the next index into them.
    offsets: Vec<usize>,
    pos: usize,
    reverse: bool,
}

impl<'a> TreeIter<'a> {
    /// Starts at pair `index` of leaf `p`.
    fn enter_leaf(&mut self, p: &'a Pack<false>, index: usize) {
        self.leaf = Some(p);
        if self.reverse {
            self.offsets.clear();
            let mut off = FIRST;
            while off < p.byte_len() {
                self.offsets.push(off);
                off = pair_at(p, off).2;
            }
            self.pos = index.min(self.offsets.len().saturating_sub(1));
        } else {
            self.off = pack_pair_offset(p, index).unwrap_or(p.byte_len());
        }
    }

    /// Moves to the next (or previous) leaf; false at the end.
    fn advance_leaf(&mut self) -> bool {
        while let Some((inner, i)) = self.stack.pop() {
            let next = if self.reverse {
                i.checked_sub(1)
            } else {
                Some(i + 1).filter(|&n| n < inner.children.len())
            };
            let Some(n) = next else { continue };
            self.stack.push((inner, n));
            let mut node = &inner.children[n];
            loop {
                match node {
                    Node::Leaf(p) => {
                        let start = if self.reverse { (p.len() / 2).saturating_sub(1) } else { 0 };
                        self.enter_leaf(p, start);
                        return !p.is_empty();
                    }
                    Node::Inner(child) => {
                        let c = if self.reverse { child.children.len() - 1 } else { 0 };
                        self.stack.push((child, c));
                        node = &child.children[c];
                    }
                }
            }
        }
        self.leaf = None;
        false
    }
}

impl<'a> Iterator for TreeIter<'a> {
    type Item = (Item<'a>, f64);

    fn next(&mut self) -> Option<(Item<'a>, f64)> {
        let leaf = self.leaf?;
        if self.reverse {
            let off = *self.offsets.get(self.pos)?;
            let (m, s, _) = pair_at(leaf, off);
            match self.pos.checked_sub(1) {
                Some(p) => self.pos = p,
                None => {
                    if !self.advance_leaf() {
                        self.offsets.clear();
                    }
                }
            }
            Some((m, s))
        } else {
            if self.off >= leaf.byte_len() {
                return None;
            }
            let (m, s, next) = pair_at(leaf, self.off);
            self.off = next;
            if next >= leaf.byte_len() && !self.advance_leaf() {
                self.leaf = None;
            }
            Some((m, s))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{below, test_rng};
    use std::collections::BTreeSet;

    /// A key ordered as the tree orders them (scores here are integers).
    fn key(s: i64, m: &[u8]) -> (i64, Vec<u8>) {
        (s, m.to_vec())
    }

    #[test]
    fn matches_a_btreeset_under_random_operations() {
        let mut rng = test_rng(21);
        let mut t = ScoreTree::default();
        let mut model: BTreeSet<(i64, Vec<u8>)> = BTreeSet::new();
        for step in 0..40_000 {
            let s = below(&mut rng, 50) as i64 - 25;
            let m = match below(&mut rng, 3) {
                0 => format!("{}", below(&mut rng, 2000)).into_bytes(),
                1 => format!("m{}", below(&mut rng, 2000)).into_bytes(),
                _ => vec![b'L'; below(&mut rng, 300)],
            };
            // Grow for the first half, then shrink: splits then merges.
            let grow = step < 20_000;
            if below(&mut rng, 10) < if grow { 7 } else { 2 } {
                if model.insert(key(s, &m)) {
                    t.insert(s as f64, &m);
                }
            } else {
                // Remove the first key at or after a random one (present),
                // and try the random one itself (often absent).
                let probe = key(s, &m);
                assert_eq!(t.remove(s as f64, &m), model.remove(&probe));
                if let Some(k) = model.range(probe..).next().cloned() {
                    if below(&mut rng, 2) == 0 {
                        assert!(t.remove(k.0 as f64, &k.1));
                    } else {
                        // The same key, by its rank.
                        let rank = model.range(..k.clone()).count();
                        assert!(t.remove_rank(rank));
                    }
                    model.remove(&k);
                }
                assert!(!t.remove_rank(model.len()));
            }
            assert_eq!(t.len(), model.len());
            if step % 4000 == 0 {
                t.check();
            }
        }
        t.check();
        let got: Vec<(i64, Vec<u8>)> =
            t.iter_from(0, false).map(|(m, s)| (s as i64, m.to_vec())).collect();
        let want: Vec<(i64, Vec<u8>)> = model.iter().cloned().collect();
        assert_eq!(got, want);
        let back: Vec<(i64, Vec<u8>)> = t
            .iter_from(t.len().saturating_sub(1), true)
            .map(|(m, s)| (s as i64, m.to_vec()))
            .collect();
        assert_eq!(back, want.iter().rev().cloned().collect::<Vec<_>>());
        for (rank, (s, m)) in want.iter().enumerate().step_by(37) {
            assert_eq!(t.rank(*s as f64, m), rank);
            let (gm, gs) = t.get(rank).unwrap();
            assert_eq!((gs as i64, gm.to_vec()), (*s, m.clone()));
            let from: Vec<Vec<u8>> =
                t.iter_from(rank, false).take(3).map(|(m, _)| m.to_vec()).collect();
            let want_from: Vec<Vec<u8>> =
                want[rank..].iter().take(3).map(|k| k.1.clone()).collect();
            assert_eq!(from, want_from);
            let below_score = t.count_while(&|sc, _| sc < *s as f64);
            assert_eq!(below_score, want.iter().filter(|k| k.0 < *s).count());
        }
    }

    #[test]
    fn grows_to_many_levels_and_back_to_a_leaf() {
        let mut t = ScoreTree::default();
        for i in 0..100_000 {
            t.insert((i % 1000) as f64, format!("{i:06}").as_bytes());
        }
        t.check();
        assert!(matches!(t.root, Node::Inner(_)));
        assert_eq!(t.get(0).map(|(m, s)| (m.to_vec(), s)), Some((b"000000".to_vec(), 0.0)));
        assert_eq!(t.rank(999.0, b"099999"), 99_999);
        for i in 0..50_000 {
            assert!(t.remove((i % 1000) as f64, format!("{i:06}").as_bytes()));
        }
        t.check();
        // The rest from both ends by rank, as ZPOPMIN and ZPOPMAX do.
        let mut expect_min = (0..50_000).map(|i| (i % 1000, 50_000 + i)).collect::<Vec<_>>();
        expect_min.sort();
        let (mut lo, mut hi) = (0, expect_min.len());
        while lo < hi {
            let (rank, want) = if (hi - lo) % 3 == 0 {
                hi -= 1;
                (t.len() - 1, expect_min[hi])
            } else {
                lo += 1;
                (0, expect_min[lo - 1])
            };
            let got = t.get(rank).map(|(m, s)| (s as i64, m.to_vec()));
            assert_eq!(got, Some((want.0 as i64, format!("{:06}", want.1).into_bytes())));
            assert!(t.remove_rank(rank));
            if t.len() % 5000 == 0 {
                t.check();
            }
        }
        assert!(t.is_empty() && matches!(t.root, Node::Leaf(_)));
    }
}
