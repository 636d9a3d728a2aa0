//! [`List`]: Redis lists with Redis 7.2's two encodings.
//!
//! - `listpack`: one back-linked [`Pack`] (O(1) at both ends, O(n) inside).
//! - `quicklist`: a deque of such packs ("nodes"), each bounded by
//!   `list-max-listpack-size` (bytes as Redis counts them, or entries with an
//!   8 KiB safety cap), so a push or pop touches one small node.
//!
//! Conversions follow t_list.c: before growing (push, insert, set) a
//! listpack whose bytes plus the new arguments' lengths, or whose count plus
//! theirs, would exceed the node limit becomes a quicklist whose first node
//! is the old listpack; after shrinking (pop, rem, trim, set) a quicklist of
//! one node at most half the limit becomes a listpack again. Each mutating
//! call below does these checks where the Redis command does, so the
//! command families only pass [`Limits`]. With `Limits::list_listpack`
//! false, lists are quicklists from the first element, as Redis 7.0
//! reports them.
//!
//! Node sizes are compared with Redis's `lpBytes` (see [`Pack::redis_bytes`])
//! so conversions and node splits happen at the same sizes as in Redis; the
//! memory saved is the robj, the per-node 32-byte struct (a node here is the
//! 16-byte pack handle in a `VecDeque`) and 5 header bytes per node.
//!
//! Indexing walks nodes from the nearer end (O(n / node size)), as Redis's
//! quicklist does.
//!
//! `list-compress-depth` (fixed per list when it becomes a quicklist, as in
//! Redis) keeps that many nodes plain at each end and LZF-compresses the
//! others ([`node`]). Every change restores that; reads through `&self`
//! open the compressed nodes they touch, and [`List::close`] (or the next
//! change) closes them again.

mod node;

use crate::limits::Limits;
use crate::pack::{Item, Pack, Probe};
use node::Node;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

pub type ListPack = Pack<true>;

/// Redis's `SIZE_ESTIMATE_OVERHEAD`: bytes assumed for an entry's header and
/// back-length when deciding whether it fits a node.
const ENTRY_OVERHEAD_ESTIMATE: usize = 8;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    Head,
    Tail,
}

#[derive(Clone, Debug)]
pub enum List {
    Pack(ListPack),
    Quick(Box<QuickList>),
}

#[derive(Debug, Default)]
pub struct QuickList {
    nodes: VecDeque<Node>,
    len: usize,
    /// `list-compress-depth` when the list became a quicklist (0: none).
    depth: usize,
    /// A read opened a compressed node.
    opened: AtomicBool,
}

impl Clone for QuickList {
    fn clone(&self) -> Self {
        QuickList {
            nodes: self.nodes.clone(),
            len: self.len,
            depth: self.depth,
            opened: AtomicBool::new(self.opened.load(Relaxed)),
        }
    }
}

impl Default for List {
    fn default() -> Self {
        List::new()
    }
}

/// LRANGE's index rules: negative indexes count from the tail, the range is
/// clamped to the list, and an empty range is None. Returns the inclusive
/// `(first, last)`.
pub fn normalize_range(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let mut start = if start < 0 { len + start } else { start };
    let mut stop = if stop < 0 { len + stop } else { stop };
    if start < 0 {
        start = 0;
    }
    if start > stop || start >= len {
        return None;
    }
    if stop >= len {
        stop = len - 1;
    }
    Some((start as usize, stop as usize))
}

impl List {
    /// An empty list in the listpack encoding (how every list starts).
    pub fn new() -> List {
        List::Pack(ListPack::new())
    }

    /// The name OBJECT ENCODING reports.
    pub fn encoding(&self) -> &'static str {
        match self {
            List::Pack(_) => "listpack",
            List::Quick(_) => "quicklist",
        }
    }

    pub fn len(&self) -> usize {
        match self {
            List::Pack(p) => p.len(),
            List::Quick(q) => q.len,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Heap bytes owned (MEMORY USAGE), beyond the 16-byte handle.
    pub fn heap_size(&self) -> usize {
        match self {
            List::Pack(p) => p.byte_len(),
            List::Quick(q) => {
                std::mem::size_of::<QuickList>()
                    + q.nodes.capacity() * std::mem::size_of::<Node>()
                    + q.nodes.iter().map(Node::heap_size).sum::<usize>()
            }
        }
    }

    /// Number of nodes (1 for a listpack): DEBUG output and tests.
    pub fn node_count(&self) -> usize {
        match self {
            List::Pack(_) => 1,
            List::Quick(q) => q.nodes.len(),
        }
    }

    /// The list's packs in order: its nodes, or its one listpack (RDB
    /// writes a quicklist node by node).
    pub fn nodes(&self) -> Box<dyn Iterator<Item = &ListPack> + '_> {
        match self {
            List::Pack(p) => Box::new(std::iter::once(p)),
            List::Quick(q) => Box::new((0..q.nodes.len()).map(|n| q.read(n))),
        }
    }

    /// Closes the compressed nodes reads opened (they keep a decompressed
    /// copy while open). Read commands call it once they have replied.
    pub fn close(&mut self) {
        self.settle(false);
    }

    /// After a change: restores `list-compress-depth` (see
    /// [`QuickList::settle`]).
    fn settle(&mut self, inside: bool) {
        if let List::Quick(q) = self {
            q.settle(inside);
        }
    }

    /// Redis's `listTypeTryConvertListpack`, before adding elements of
    /// `add_bytes` total length and `add_count` elements.
    fn grow_check(&mut self, add_bytes: usize, add_count: usize, limits: &Limits) {
        if let List::Pack(p) = self {
            if !limits.list_listpack
                || limits.list_exceeds(p.redis_bytes() + add_bytes, p.len() + add_count)
            {
                let pack = std::mem::take(p);
                let len = pack.len();
                let mut nodes = VecDeque::with_capacity(1);
                if len > 0 {
                    nodes.push_back(Node::new(pack));
                }
                let depth = limits.list_compress_depth;
                *self =
                    List::Quick(Box::new(QuickList { nodes, len, depth, ..Default::default() }));
            }
        }
    }

    /// Redis's `listTypeTryConvertQuicklist` after shrinking: one node at
    /// most half the limit becomes a listpack again.
    fn shrink_check(&mut self, limits: &Limits) {
        if let List::Quick(q) = self {
            if q.nodes.len() != 1 || !limits.list_listpack {
                return;
            }
            let (size_limit, count_limit) = limits.list_node_limit();
            let node = q.nodes[0].pack();
            if node.redis_bytes() > size_limit / 2 || q.len > count_limit / 2 {
                return;
            }
            let pack = q.nodes.pop_front().unwrap_or_default().into_pack();
            *self = List::Pack(pack);
        }
    }

    /// LPUSH/RPUSH: pushes each element in turn at `end` (so LPUSH a b c
    /// leaves c first).
    pub fn push(&mut self, end: End, elements: &[&[u8]], limits: &Limits) {
        let add_bytes = elements.iter().map(|e| e.len()).sum();
        self.grow_check(add_bytes, elements.len(), limits);
        match self {
            List::Pack(p) => {
                let items: Vec<Item<'_>> = match end {
                    End::Tail => elements.iter().map(|e| Item::from_bytes(e)).collect(),
                    End::Head => elements.iter().rev().map(|e| Item::from_bytes(e)).collect(),
                };
                match end {
                    End::Tail => p.push_back(&items),
                    End::Head => p.push_front(&items),
                }
            }
            List::Quick(q) => {
                for e in elements {
                    // Each push may add a node, moving one inside the depth.
                    q.push(end, e, limits);
                    q.settle(false);
                }
            }
        }
    }

    /// LPOP/RPOP of one element.
    pub fn pop(&mut self, end: End, limits: &Limits) -> Option<Vec<u8>> {
        let v = self.pop_raw(end);
        self.settle(false);
        if v.is_some() && !self.is_empty() {
            self.shrink_check(limits);
        }
        v
    }

    fn pop_raw(&mut self, end: End) -> Option<Vec<u8>> {
        match self {
            List::Pack(p) => {
                let off = match end {
                    End::Head => p.first()?,
                    End::Tail => p.last()?,
                };
                let v = p.get(off).to_vec();
                p.delete(off, 1);
                Some(v)
            }
            List::Quick(q) => q.pop(end),
        }
    }

    /// LPOP/RPOP with a count: up to `count` elements in the order popped.
    pub fn pop_many(&mut self, end: End, count: usize, limits: &Limits) -> Vec<Vec<u8>> {
        let n = count.min(self.len());
        let mut out = Vec::with_capacity(n);
        match self {
            List::Pack(p) => take_from_pack(p, end, n, &mut out),
            List::Quick(q) => {
                while out.len() < n {
                    let Some(node) = q.end_mut(end) else { break };
                    let before = out.len();
                    take_from_pack(node, end, n - before, &mut out);
                    let emptied = node.is_empty();
                    q.len -= out.len() - before;
                    if emptied {
                        match end {
                            End::Head => q.nodes.pop_front(),
                            End::Tail => q.nodes.pop_back(),
                        };
                    }
                }
                q.settle(false);
            }
        }
        if !out.is_empty() && !self.is_empty() {
            self.shrink_check(limits);
        }
        out
    }

    /// LMOVE/RPOPLPUSH with the same key as source and destination: pop,
    /// push, then the shrink check, in Redis's order.
    pub fn rotate(&mut self, from: End, to: End, limits: &Limits) -> Option<Vec<u8>> {
        let v = self.pop_raw(from)?;
        self.push(to, &[&v], limits);
        self.shrink_check(limits);
        Some(v)
    }

    /// Normalises a possibly negative index.
    fn index(&self, index: i64) -> Option<usize> {
        let len = self.len() as i64;
        let i = if index < 0 { len + index } else { index };
        (0..len).contains(&i).then_some(i as usize)
    }

    /// LINDEX.
    pub fn get(&self, index: i64) -> Option<Item<'_>> {
        let i = self.index(index)?;
        match self {
            List::Pack(p) => p.seek(i).map(|off| p.get(off)),
            List::Quick(q) => {
                let (n, off) = q.locate(i)?;
                Some(q.read(n).get(off))
            }
        }
    }

    /// LSET; false when the index is out of range. The grow check runs first
    /// even then, as in Redis.
    pub fn set(&mut self, index: i64, value: &[u8], limits: &Limits) -> bool {
        self.grow_check(value.len(), 1, limits);
        let Some(i) = self.index(index) else { return false };
        let item = Item::from_bytes(value);
        match self {
            List::Pack(p) => {
                let Some(off) = p.seek(i) else { return false };
                p.replace(off, &item);
            }
            List::Quick(q) => {
                let Some((n, off)) = q.locate(i) else { return false };
                q.nodes[n].pack_mut().replace(off, &item);
                q.isolate_if_oversized(n, off, limits);
                q.settle(true);
            }
        }
        self.shrink_check(limits);
        true
    }

    /// LINSERT: inserts `value` before or after the first `pivot` from the
    /// head. Returns the new length, or None when the pivot is absent.
    pub fn insert(
        &mut self,
        pivot: &[u8],
        value: &[u8],
        after: bool,
        limits: &Limits,
    ) -> Option<usize> {
        self.grow_check(value.len(), 1, limits);
        let probe = Probe::new(pivot);
        let item = Item::from_bytes(value);
        match self {
            List::Pack(p) => {
                let off = p.find(&probe, crate::pack::FIRST, 1)?;
                let at = if after { p.entry(off).1 } else { off };
                p.insert(at, &[item]);
            }
            List::Quick(q) => {
                let found = q.find(&probe);
                let Some((n, off)) = found else {
                    q.settle(false);
                    return None;
                };
                q.insert_at(n, off, after, &item, value.len(), limits);
                q.settle(true);
            }
        }
        Some(self.len())
    }

    /// LREM: removes up to `count` occurrences of `value` from the head
    /// (`count > 0`), from the tail (`count < 0`) or all (`0`). Returns how
    /// many went.
    pub fn remove(&mut self, value: &[u8], count: i64, limits: &Limits) -> usize {
        let probe = Probe::new(value);
        let limit = if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
        let from_tail = count < 0;
        let removed = match self {
            List::Pack(p) => remove_from_pack(p, &probe, limit, from_tail),
            List::Quick(q) => {
                let removed = q.remove(&probe, limit, from_tail);
                q.settle(true);
                removed
            }
        };
        if removed > 0 && !self.is_empty() {
            self.shrink_check(limits);
        }
        removed
    }

    /// LTRIM with Redis's index rules; returns how many elements went.
    pub fn trim(&mut self, start: i64, stop: i64, limits: &Limits) -> usize {
        let len = self.len();
        let (ltrim, rtrim) = match normalize_range(start, stop, len) {
            None => (len, 0),
            Some((first, last)) => (first, len - last - 1),
        };
        for (end, n) in [(End::Head, ltrim), (End::Tail, rtrim)] {
            if n == 0 {
                continue;
            }
            match self {
                List::Pack(p) => drop_from_pack(p, end, n),
                List::Quick(q) => q.drop_from(end, n),
            }
        }
        self.settle(false);
        if !self.is_empty() {
            self.shrink_check(limits);
        }
        ltrim + rtrim
    }

    /// Iterates from the head.
    pub fn iter(&self) -> ListIter<'_> {
        self.iter_range(0, self.len(), false)
    }

    /// Iterates from the tail.
    pub fn iter_rev(&self) -> ListIter<'_> {
        self.iter_range(self.len().saturating_sub(1), self.len(), true)
    }

    /// Iterates `count` elements starting at index `first`, towards the tail
    /// or (`reverse`) towards the head. LRANGE: `iter_range(first, last -
    /// first + 1, false)` from [`normalize_range`].
    pub fn iter_range(&self, first: usize, count: usize, reverse: bool) -> ListIter<'_> {
        let len = self.len();
        if first >= len || count == 0 {
            return ListIter { nodes: Nodes::One(None), node: 0, off: 0, left: 0, reverse };
        }
        let count = if reverse { count.min(first + 1) } else { count.min(len - first) };
        match self {
            List::Pack(p) => {
                let off = p.seek(first).unwrap_or(crate::pack::FIRST);
                ListIter { nodes: Nodes::One(Some(p)), node: 0, off, left: count, reverse }
            }
            List::Quick(q) => {
                let (node, off) = q.locate(first).unwrap_or((0, crate::pack::FIRST));
                ListIter { nodes: Nodes::Many(q), node, off, left: count, reverse }
            }
        }
    }

    #[cfg(test)]
    fn check(&self, limits: &Limits) {
        if let List::Quick(q) = self {
            assert_eq!(q.len, q.nodes.iter().map(|n| n.len()).sum::<usize>());
            assert!(q.nodes.iter().all(|n| !n.is_empty()));
            let (count, d) = (q.nodes.len(), q.depth);
            let opened = q.opened.load(Relaxed);
            for (i, n) in q.nodes.iter().enumerate() {
                let inside = d > 0 && i >= d && i + d < count;
                assert!(n.settled(inside, opened), "node {i} of {count} at depth {d}: {n:?}");
            }
            // Plain nodes only (compressed ones were checked when plain):
            // opening nodes here would bypass `opened`.
            for n in q.nodes.iter().filter(|n| !n.is_compressed()).map(Node::pack) {
                if n.len() > 1 {
                    // A listpack grows by its elements' lengths without
                    // their headers before it converts (Redis's
                    // `listTypeTryConversionAppend`), so its node can be over
                    // by those, as in Redis.
                    let headers = n.len() * ENTRY_OVERHEAD_ESTIMATE;
                    assert!(
                        !limits.list_exceeds(n.redis_bytes().saturating_sub(headers), n.len()),
                        "node of {} bytes / {} entries over the limit",
                        n.redis_bytes(),
                        n.len()
                    );
                }
            }
        }
    }
}

/// Moves `n` elements from `end` of `p` into `out` (pop order), with one
/// splice.
fn take_from_pack(p: &mut ListPack, end: End, n: usize, out: &mut Vec<Vec<u8>>) {
    if n == 0 {
        return;
    }
    let len = p.len();
    let n = n.min(len);
    match end {
        End::Head => {
            let mut off = crate::pack::FIRST;
            for _ in 0..n {
                let (item, next) = p.entry(off);
                out.push(item.to_vec());
                off = next;
            }
            p.delete_bytes(crate::pack::FIRST, off, n);
        }
        End::Tail => {
            let end_off = p.byte_len();
            let mut off = end_off;
            for _ in 0..n {
                let Some(prev) = p.prev(off) else { break };
                out.push(p.get(prev).to_vec());
                off = prev;
            }
            p.delete_bytes(off, end_off, n);
        }
    }
}

fn drop_from_pack(p: &mut ListPack, end: End, n: usize) {
    let n = n.min(p.len());
    match end {
        End::Head => {
            p.delete(crate::pack::FIRST, n);
        }
        End::Tail => {
            let end_off = p.byte_len();
            let mut off = end_off;
            for _ in 0..n {
                match p.prev(off) {
                    Some(prev) => off = prev,
                    None => break,
                }
            }
            p.delete_bytes(off, end_off, n);
        }
    }
}

/// Removes up to `limit` matches of `probe` from one pack, scanning from the
/// head or the tail; one rewrite of the pack.
fn remove_from_pack(p: &mut ListPack, probe: &Probe<'_>, limit: usize, from_tail: bool) -> usize {
    if limit == 0 {
        return 0;
    }
    let matches: Vec<usize> =
        p.iter().enumerate().filter(|(_, it)| probe.matches(it)).map(|(i, _)| i).collect();
    if matches.is_empty() {
        return 0;
    }
    let chosen: &[usize] = if matches.len() <= limit {
        &matches
    } else if from_tail {
        &matches[matches.len() - limit..]
    } else {
        &matches[..limit]
    };
    let mut next = 0;
    p.retain(|i, _| {
        if next < chosen.len() && chosen[next] == i {
            next += 1;
            false
        } else {
            true
        }
    })
}

impl QuickList {
    /// Redis's `_quicklistNodeAllowInsert`.
    fn allows_insert(node: &ListPack, len: usize, limits: &Limits) -> bool {
        !limits.list_exceeds(node.redis_bytes() + len + ENTRY_OVERHEAD_ESTIMATE, node.len() + 1)
    }

    /// Node `n`'s entries for reading (opening it if compressed).
    fn read(&self, n: usize) -> &ListPack {
        let node = &self.nodes[n];
        if node.is_compressed() {
            self.opened.store(true, Relaxed);
        }
        node.pack()
    }

    /// The node at `end`, for a change.
    fn end_mut(&mut self, end: End) -> Option<&mut ListPack> {
        let node = match end {
            End::Head => self.nodes.front_mut(),
            End::Tail => self.nodes.back_mut(),
        };
        node.map(Node::pack_mut)
    }

    /// Restores `list-compress-depth` after a change (or reads): the
    /// `depth` nodes at each end plain, the others compressed, none left
    /// open. A change that stayed at the ends (`inside` false) can only have
    /// moved nodes across the depth boundary, so only the nodes up to it
    /// are looked at; one inside, or nodes opened by reads, walk them all.
    fn settle(&mut self, inside: bool) {
        let d = self.depth;
        if d == 0 {
            return;
        }
        let n = self.nodes.len();
        if inside || std::mem::take(self.opened.get_mut()) {
            for (i, node) in self.nodes.iter_mut().enumerate() {
                if i >= d && i + d < n {
                    node.compress();
                } else {
                    node.decompress();
                }
            }
            return;
        }
        for i in (0..d.min(n)).chain(n.saturating_sub(d)..n) {
            self.nodes[i].decompress();
        }
        if n > 2 * d {
            self.nodes[d].compress();
            self.nodes[n - 1 - d].compress();
        }
    }

    fn push(&mut self, end: End, element: &[u8], limits: &Limits) {
        let item = Item::from_bytes(element);
        match self.end_mut(end) {
            Some(node) if Self::allows_insert(node, element.len(), limits) => match end {
                End::Head => node.push_front(&[item]),
                End::Tail => node.push_back(&[item]),
            },
            _ => {
                let mut node = ListPack::new();
                node.push_back(&[item]);
                let at = match end {
                    End::Head => 0,
                    End::Tail => self.nodes.len(),
                };
                self.insert_node(at, node);
            }
        }
        self.len += 1;
    }

    /// Adds a node. The deque grows by a quarter at a time from one node
    /// (rather than doubling from four), so that its spare room stays below
    /// what Redis's separately allocated 32-byte nodes cost.
    fn insert_node(&mut self, at: usize, pack: ListPack) {
        if self.nodes.len() == self.nodes.capacity() {
            self.nodes.reserve_exact((self.nodes.len() / 4).max(1));
        }
        self.nodes.insert(at, Node::new(pack));
    }

    fn pop(&mut self, end: End) -> Option<Vec<u8>> {
        let node = self.end_mut(end)?;
        let off = match end {
            End::Head => node.first()?,
            End::Tail => node.last()?,
        };
        let v = node.get(off).to_vec();
        node.delete(off, 1);
        if node.is_empty() {
            match end {
                End::Head => self.nodes.pop_front(),
                End::Tail => self.nodes.pop_back(),
            };
        }
        self.len -= 1;
        Some(v)
    }

    /// `(node, offset)` of element `index`, walking from the nearer end.
    fn locate(&self, index: usize) -> Option<(usize, usize)> {
        if index >= self.len {
            return None;
        }
        if index < self.len / 2 {
            let mut skipped = 0;
            for (n, node) in self.nodes.iter().enumerate() {
                let l = node.len();
                if index < skipped + l {
                    return Some((n, self.read(n).seek(index - skipped)?));
                }
                skipped += l;
            }
        } else {
            let mut after = self.len;
            for (n, node) in self.nodes.iter().enumerate().rev() {
                let l = node.len();
                after -= l;
                if index >= after {
                    return Some((n, self.read(n).seek(index - after)?));
                }
            }
        }
        None
    }

    /// First match of `probe` from the head.
    fn find(&self, probe: &Probe<'_>) -> Option<(usize, usize)> {
        (0..self.nodes.len())
            .find_map(|n| self.read(n).find(probe, crate::pack::FIRST, 1).map(|off| (n, off)))
    }

    /// Inserts `item` before/after the entry at `off` of node `n`, following
    /// Redis's `_quicklistInsert`: into the node if it has room, else into
    /// the neighbour when inserting at a node's edge, else a new node (after
    /// splitting the full node at the insertion point).
    fn insert_at(
        &mut self,
        n: usize,
        off: usize,
        after: bool,
        item: &Item<'_>,
        len: usize,
        limits: &Limits,
    ) {
        self.len += 1;
        let node = self.nodes[n].pack_mut();
        let at = if after { node.entry(off).1 } else { off };
        if Self::allows_insert(node, len, limits) {
            node.insert(at, std::slice::from_ref(item));
            return;
        }
        let at_tail = at == node.byte_len();
        let at_head = at == crate::pack::FIRST;
        if at_tail {
            if let Some(next) = self.nodes.get_mut(n + 1).map(Node::pack_mut) {
                if Self::allows_insert(next, len, limits) {
                    next.push_front(std::slice::from_ref(item));
                    return;
                }
            }
        }
        if at_head && n > 0 {
            let prev = self.nodes[n - 1].pack_mut();
            if Self::allows_insert(prev, len, limits) {
                prev.push_back(std::slice::from_ref(item));
                return;
            }
        }
        let mut fresh = ListPack::new();
        fresh.push_back(std::slice::from_ref(item));
        if at_tail {
            self.insert_node(n + 1, fresh);
        } else if at_head {
            self.insert_node(n, fresh);
        } else {
            // Split the full node at the insertion point; the element goes
            // to whichever half has room, or between them.
            let node = self.nodes[n].pack_mut();
            let index = node.iter_offsets().take_while(|(o, _)| *o < at).count();
            let mut right = node.split_off(at, node.len() - index);
            if Self::allows_insert(&right, len, limits) {
                right.push_front(std::slice::from_ref(item));
                self.insert_node(n + 1, right);
            } else if Self::allows_insert(node, len, limits) {
                node.push_back(std::slice::from_ref(item));
                self.insert_node(n + 1, right);
            } else {
                self.insert_node(n + 1, fresh);
                self.insert_node(n + 2, right);
            }
        }
    }

    /// After LSET grew an element: a node now over the limit is split so the
    /// big element sits alone (Redis inserts it as a new node).
    fn isolate_if_oversized(&mut self, n: usize, off: usize, limits: &Limits) {
        let node = self.nodes[n].pack_mut();
        if node.len() < 2 || !limits.list_exceeds(node.redis_bytes(), node.len()) {
            return;
        }
        let index = node.iter_offsets().take_while(|(o, _)| *o < off).count();
        let len = node.len();
        let next_off = node.entry(off).1;
        let right = (next_off < node.byte_len()).then(|| node.split_off(next_off, len - index - 1));
        let middle = (off > crate::pack::FIRST).then(|| node.split_off(off, 1));
        let mut at = n + 1;
        if let Some(m) = middle {
            self.insert_node(at, m);
            at += 1;
        }
        if let Some(r) = right {
            self.insert_node(at, r);
        }
    }

    fn remove(&mut self, probe: &Probe<'_>, limit: usize, from_tail: bool) -> usize {
        let mut removed = 0;
        let order: Vec<usize> = if from_tail {
            (0..self.nodes.len()).rev().collect()
        } else {
            (0..self.nodes.len()).collect()
        };
        for n in order {
            if removed == limit {
                break;
            }
            removed +=
                remove_from_pack(self.nodes[n].pack_mut(), probe, limit - removed, from_tail);
        }
        self.nodes.retain(|n| !n.is_empty());
        self.len -= removed;
        removed
    }

    /// Drops `n` elements from `end`, whole nodes first.
    fn drop_from(&mut self, end: End, mut n: usize) {
        while n > 0 {
            let node = match end {
                End::Head => self.nodes.front_mut(),
                End::Tail => self.nodes.back_mut(),
            };
            let Some(node) = node else { break };
            let l = node.len();
            if l <= n {
                match end {
                    End::Head => self.nodes.pop_front(),
                    End::Tail => self.nodes.pop_back(),
                };
                self.len -= l;
                n -= l;
            } else {
                drop_from_pack(node.pack_mut(), end, n);
                self.len -= n;
                n = 0;
            }
        }
    }
}

enum Nodes<'a> {
    One(Option<&'a ListPack>),
    Many(&'a QuickList),
}

impl<'a> Nodes<'a> {
    fn get(&self, n: usize) -> Option<&'a ListPack> {
        match *self {
            Nodes::One(p) => p.filter(|_| n == 0),
            Nodes::Many(q) => (n < q.nodes.len()).then(|| q.read(n)),
        }
    }
}

/// Iterator over a run of list elements in either direction.
pub struct ListIter<'a> {
    nodes: Nodes<'a>,
    node: usize,
    off: usize,
    left: usize,
    reverse: bool,
}

impl<'a> Iterator for ListIter<'a> {
    type Item = Item<'a>;

    fn next(&mut self) -> Option<Item<'a>> {
        if self.left == 0 {
            return None;
        }
        let pack = self.nodes.get(self.node)?;
        let (item, next) = pack.entry(self.off);
        self.left -= 1;
        if self.left > 0 {
            if self.reverse {
                match pack.prev(self.off) {
                    Some(prev) => self.off = prev,
                    None => match self
                        .node
                        .checked_sub(1)
                        .and_then(|n| Some((n, self.nodes.get(n)?.last()?)))
                    {
                        Some((n, off)) => (self.node, self.off) = (n, off),
                        // `left` never outruns the list; stop cleanly if it did.
                        None => self.left = 0,
                    },
                }
            } else if next < pack.byte_len() {
                self.off = next;
            } else {
                self.node += 1;
                self.off = crate::pack::FIRST;
            }
        }
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sample::{below, test_rng};

    fn items(l: &List) -> Vec<Vec<u8>> {
        l.iter().map(|i| i.to_vec()).collect()
    }

    fn b(s: &str) -> Vec<u8> {
        s.as_bytes().to_vec()
    }

    #[test]
    fn push_pop_both_ends_and_integers_round_trip() {
        let lim = Limits::default();
        let mut l = List::new();
        l.push(End::Head, &[b"a", b"b", b"c"], &lim);
        l.push(End::Tail, &[b"1", b"-5000", b"9223372036854775807", b"007"], &lim);
        assert_eq!(
            items(&l),
            [b("c"), b("b"), b("a"), b("1"), b("-5000"), b("9223372036854775807"), b("007")]
        );
        assert_eq!(l.pop(End::Tail, &lim), Some(b("007")));
        assert_eq!(l.pop(End::Head, &lim), Some(b("c")));
        assert_eq!(l.get(-1).map(|i| i.to_vec()), Some(b("9223372036854775807")));
        assert_eq!(l.get(0).map(|i| i.to_vec()), Some(b("b")));
        assert!(l.get(5).is_none() && l.get(-6).is_none());
        assert_eq!(l.encoding(), "listpack");
        let rev: Vec<Vec<u8>> = l.iter_rev().map(|i| i.to_vec()).collect();
        assert_eq!(rev, [b("9223372036854775807"), b("-5000"), b("1"), b("a"), b("b")]);
    }

    #[test]
    fn converts_to_quicklist_past_8k_and_back_below_half() {
        let lim = Limits::default();
        let mut l = List::new();
        let value = [b'x'; 100];
        // A 100-byte element takes 103 bytes (2 header, 1 back-length):
        // 7 + 79 * 103 = 8144 fit; the 80th (8144 + 100 > 8192) converts.
        for _ in 0..79 {
            l.push(End::Tail, &[&value], &lim);
        }
        assert_eq!(l.encoding(), "listpack");
        l.push(End::Tail, &[&value], &lim);
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(l.node_count(), 2);
        // Shrinking: one node is needed, of at most 4096 bytes.
        while l.len() > 40 {
            l.pop(End::Tail, &lim);
        }
        assert_eq!(l.encoding(), "quicklist", "one node but 4127 bytes: over half the limit");
        l.pop(End::Tail, &lim);
        assert_eq!(l.encoding(), "listpack");
        assert_eq!(l.len(), 39);
    }

    #[test]
    fn count_limited_nodes_and_their_conversions() {
        let lim = Limits { list_max_listpack_size: 3, ..Limits::default() };
        let mut l = List::new();
        l.push(End::Tail, &[b"a", b"b", b"c"], &lim);
        assert_eq!(l.encoding(), "listpack");
        l.push(End::Tail, &[b"d"], &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.push(End::Tail, &[b"e", b"f", b"g"], &lim);
        l.check(&lim);
        assert_eq!(l.node_count(), 3);
        assert_eq!(
            l.pop_many(End::Tail, 6, &lim),
            [b("g"), b("f"), b("e"), b("d"), b("c"), b("b")]
        );
        // One node of one entry: at most half of 3.
        assert_eq!(l.encoding(), "listpack");
        // A single big push converts even though the count fits.
        let big = vec![b'z'; 9000];
        l.push(End::Head, &[&big], &lim);
        assert_eq!(l.encoding(), "quicklist");
    }

    #[test]
    fn redis_7_0_lists_are_always_quicklists() {
        let lim = Limits { list_listpack: false, ..Limits::default() };
        let mut l = List::new();
        l.push(End::Tail, &[b"a", b"b"], &lim);
        assert_eq!(l.encoding(), "quicklist");
        l.pop(End::Tail, &lim);
        assert_eq!((l.len(), l.encoding()), (1, "quicklist"));
        assert_eq!(l.pop(End::Head, &lim), Some(b("a")));
    }

    #[test]
    fn insert_set_rem_trim() {
        let lim = Limits::default();
        let mut l = List::new();
        l.push(End::Tail, &[b"a", b"b", b"a", b"c", b"a"], &lim);
        assert_eq!(l.insert(b"b", b"X", false, &lim), Some(6));
        assert_eq!(l.insert(b"a", b"Y", true, &lim), Some(7));
        assert_eq!(l.insert(b"zz", b"Y", true, &lim), None);
        assert_eq!(items(&l), [b("a"), b("Y"), b("X"), b("b"), b("a"), b("c"), b("a")]);
        assert!(l.set(-1, b"last", &lim));
        assert!(!l.set(7, b"nope", &lim));
        assert_eq!(l.remove(b"a", -1, &lim), 1);
        assert_eq!(items(&l), [b("a"), b("Y"), b("X"), b("b"), b("c"), b("last")]);
        assert_eq!(l.remove(b"a", 0, &lim), 1);
        assert_eq!(l.trim(1, -2, &lim), 2);
        assert_eq!(items(&l), [b("X"), b("b"), b("c")]);
        assert_eq!(l.trim(5, 10, &lim), 3);
        assert!(l.is_empty());
    }

    #[test]
    fn handles_stay_sixteen_bytes_and_cross_threads() {
        fn shareable<T: Send + Sync>() {}
        shareable::<List>();
        shareable::<crate::hash::Hash>();
        shareable::<crate::set::Set>();
        shareable::<crate::zset::ZSet>();
        assert_eq!(std::mem::size_of::<List>(), 16);
        assert_eq!(std::mem::size_of::<crate::hash::Hash>(), 16);
        assert_eq!(std::mem::size_of::<crate::zset::ZSet>(), 16);
        assert_eq!(std::mem::size_of::<crate::set::Set>(), 16);
    }

    #[test]
    fn lrange_index_rules() {
        assert_eq!(normalize_range(0, -1, 5), Some((0, 4)));
        assert_eq!(normalize_range(-100, 100, 5), Some((0, 4)));
        assert_eq!(normalize_range(3, 1, 5), None);
        assert_eq!(normalize_range(5, 10, 5), None);
        assert_eq!(normalize_range(-2, -1, 5), Some((3, 4)));
        assert_eq!(normalize_range(0, 0, 0), None);
    }

    #[test]
    fn rotate_keeps_the_encoding_rules_in_redis_order() {
        let lim = Limits { list_max_listpack_size: 4, ..Limits::default() };
        let mut l = List::new();
        l.push(End::Tail, &[b"1", b"2", b"3", b"4", b"5"], &lim);
        assert_eq!(l.encoding(), "quicklist");
        assert_eq!(l.rotate(End::Tail, End::Head, &lim), Some(b("5")));
        assert_eq!(items(&l), [b("5"), b("1"), b("2"), b("3"), b("4")]);
        assert_eq!(l.encoding(), "quicklist");
    }

    #[test]
    fn compress_depth_compresses_inner_nodes_and_reads_reopen_them() {
        let lim = Limits { list_compress_depth: 1, ..Limits::default() };
        let plain_lim = Limits::default();
        let (mut l, mut plain) = (List::new(), List::new());
        for i in 0..20_000 {
            let v = format!("order:{}:pending", i % 100);
            l.push(End::Tail, &[v.as_bytes()], &lim);
            plain.push(End::Tail, &[v.as_bytes()], &plain_lim);
        }
        l.check(&lim);
        assert!(l.node_count() > 10);
        let (small, big) = (l.heap_size(), plain.heap_size());
        assert!(small * 3 < big, "compressed {small} bytes vs {big}");
        // A read in the middle opens one node; closing drops the copy.
        assert_eq!(l.get(10_050).map(|i| i.to_vec()), Some(b("order:50:pending")));
        assert!(l.heap_size() > small);
        l.close();
        assert_eq!(l.heap_size(), small);
        l.check(&lim);
        assert!(l.iter().map(|i| i.to_vec()).eq(plain.iter().map(|i| i.to_vec())));
        // The depth is the list's own: a later setting does not change it.
        l.push(End::Head, &[b"first"], &plain_lim);
        l.check(&lim);
        assert_eq!(l.pop(End::Head, &plain_lim), Some(b("first")));
    }

    /// Thousands of random operations against a VecDeque, across encodings,
    /// node limits and compression depths.
    #[test]
    fn matches_a_vecdeque_model() {
        let configs = [(1u64, -2i64, 0), (2, 3, 0), (3, -1, 0), (4, 1, 0), (5, 16, 0)];
        let compressed = [(6, 3, 1), (7, 1, 2), (8, -1, 1), (9, 16, 3), (10, 2, 1)];
        for (seed, fill, depth) in configs.into_iter().chain(compressed) {
            let lim = Limits {
                list_max_listpack_size: fill,
                list_compress_depth: depth,
                ..Limits::default()
            };
            let mut rng = test_rng(seed);
            let mut l = List::new();
            let mut model: VecDeque<Vec<u8>> = VecDeque::new();
            let value = |rng: &mut dyn FnMut() -> u64| -> Vec<u8> {
                match below(&mut *rng, 4) {
                    0 => format!("{}", below(&mut *rng, 300) as i64 - 150).into_bytes(),
                    1 => vec![b'a' + below(&mut *rng, 3) as u8; 1 + below(&mut *rng, 200)],
                    2 => format!("v{}", below(&mut *rng, 5)).into_bytes(),
                    _ => vec![b'q'; below(&mut *rng, 3000)],
                }
            };
            for step in 0..4000 {
                let op = below(&mut rng, 12);
                let len = model.len() as i64;
                let idx = below(&mut rng, (2 * len + 3) as usize) as i64 - len - 1;
                match op {
                    0 | 1 => {
                        let vs: Vec<Vec<u8>> =
                            (0..1 + below(&mut rng, 4)).map(|_| value(&mut rng)).collect();
                        let refs: Vec<&[u8]> = vs.iter().map(|v| v.as_slice()).collect();
                        let end = if op == 0 { End::Head } else { End::Tail };
                        l.push(end, &refs, &lim);
                        for v in vs {
                            if op == 0 {
                                model.push_front(v)
                            } else {
                                model.push_back(v)
                            }
                        }
                    }
                    2 => assert_eq!(l.pop(End::Head, &lim), model.pop_front()),
                    3 => assert_eq!(l.pop(End::Tail, &lim), model.pop_back()),
                    4 => {
                        let n = below(&mut rng, 5);
                        let want: Vec<Vec<u8>> = (0..n).filter_map(|_| model.pop_back()).collect();
                        assert_eq!(l.pop_many(End::Tail, n, &lim), want);
                    }
                    5 => {
                        let v = value(&mut rng);
                        let i = if idx < 0 { len + idx } else { idx };
                        let ok = (0..len).contains(&i);
                        assert_eq!(l.set(idx, &v, &lim), ok);
                        if ok {
                            model[i as usize] = v;
                        }
                    }
                    6 => {
                        let pivot = value(&mut rng);
                        let v = value(&mut rng);
                        let after = below(&mut rng, 2) == 0;
                        let pos = model.iter().position(|x| *x == pivot);
                        let got = l.insert(&pivot, &v, after, &lim);
                        match pos {
                            Some(p) => {
                                model.insert(if after { p + 1 } else { p }, v);
                                assert_eq!(got, Some(model.len()));
                            }
                            None => assert_eq!(got, None),
                        }
                    }
                    7 => {
                        let v = value(&mut rng);
                        let count = below(&mut rng, 5) as i64 - 2;
                        let mut want = 0;
                        let limit =
                            if count == 0 { usize::MAX } else { count.unsigned_abs() as usize };
                        if count >= 0 {
                            let mut i = 0;
                            while i < model.len() {
                                if want < limit && model[i] == v {
                                    model.remove(i);
                                    want += 1;
                                } else {
                                    i += 1;
                                }
                            }
                        } else {
                            let mut i = model.len();
                            while i > 0 {
                                i -= 1;
                                if want < limit && model[i] == v {
                                    model.remove(i);
                                    want += 1;
                                }
                            }
                        }
                        assert_eq!(l.remove(&v, count, &lim), want);
                    }
                    8 if step % 20 == 0 => {
                        let (s, e) =
                            (idx, below(&mut rng, (2 * len + 3) as usize) as i64 - len - 1);
                        let removed = l.trim(s, e, &lim);
                        let kept: VecDeque<Vec<u8>> = match normalize_range(s, e, model.len()) {
                            None => VecDeque::new(),
                            Some((a, z)) => model.range(a..=z).cloned().collect(),
                        };
                        assert_eq!(removed, model.len() - kept.len());
                        model = kept;
                    }
                    9 => {
                        let i = if idx < 0 { len + idx } else { idx };
                        let want = (0..len).contains(&i).then(|| model[i as usize].clone());
                        assert_eq!(l.get(idx).map(|x| x.to_vec()), want);
                    }
                    10 => {
                        let (s, e) =
                            (idx, below(&mut rng, (2 * len + 3) as usize) as i64 - len - 1);
                        match normalize_range(s, e, model.len()) {
                            None => {}
                            Some((a, z)) => {
                                let got: Vec<Vec<u8>> =
                                    l.iter_range(a, z - a + 1, false).map(|x| x.to_vec()).collect();
                                let want: Vec<Vec<u8>> = model.range(a..=z).cloned().collect();
                                assert_eq!(got, want);
                                let got: Vec<Vec<u8>> =
                                    l.iter_range(z, z - a + 1, true).map(|x| x.to_vec()).collect();
                                let want: Vec<Vec<u8>> =
                                    model.range(a..=z).rev().cloned().collect();
                                assert_eq!(got, want);
                            }
                        }
                    }
                    _ => {
                        if !model.is_empty() {
                            let v = l.rotate(End::Head, End::Tail, &lim);
                            let m = model.pop_front();
                            model.extend(m.clone());
                            assert_eq!(v, m);
                        }
                    }
                }
                assert_eq!(l.len(), model.len(), "seed {seed} step {step}");
                if step % 3 == 0 {
                    // Reads leave nodes open until the list closes them.
                    l.close();
                }
                l.check(&lim);
                if model.is_empty() {
                    // Redis deletes empty lists; start over as a new key.
                    l = List::new();
                }
            }
            assert!(l.iter().map(|x| x.to_vec()).eq(model.iter().cloned()));
            assert!(l.iter_rev().map(|x| x.to_vec()).eq(model.iter().rev().cloned()));
        }
    }
}
