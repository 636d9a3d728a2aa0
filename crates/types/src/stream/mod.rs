//! Streams: append-only logs of entries (an id and field-value pairs) with
//! consumer groups, as Redis 7.0's `t_stream.c` keeps them.
//!
//! Layout:
//! - [`id`]: entry ids and the ways clients write them.
//! - [`node`] (private): runs of entries packed in one buffer, with field
//!   names shared with the run's first entry and delta-encoded ids.
//! - [`group`]: consumer groups, their pending entries and consumers.
//! - this file: [`Stream`], the nodes in a `BTreeMap` keyed by each node's
//!   first id (Redis uses a radix tree of listpacks keyed the same way), and
//!   everything the commands do to a stream: append, trim, delete, ranges,
//!   XSETID, group reads, claims, the read counter and lag.
//!
//! Finding an id is O(log n) for its node plus a walk inside a node of at
//! most `stream-node-max-entries` entries. Nodes split exactly where Redis's
//! listpacks would (by the listpack size Redis would have and the entry
//! count, tombstones included), and deleting keeps tombstones as Redis does,
//! so XADD MAXLEN ~, XTRIM … LIMIT and XINFO's node count match Redis.
//!
//! Times are Unix milliseconds passed in by the caller (`now`): nothing here
//! reads a clock.

mod group;
mod id;
mod node;

pub use group::{Consumer, Group, Nack, ENTRIES_READ_INVALID};
pub use id::{parse, parse_for_add, parse_interval, parse_strict, string2ull, InvalidId, StreamId};
pub use node::Pairs;

use crate::limits::Limits;
use crate::pack::{decode, encode, Item};
use node::{EntryPos, Node, DELETED};
use std::collections::{btree_map, BTreeMap};

/// Redis's `STREAM_LISTPACK_MAX_SIZE`: no node grows past 1 GiB, and no
/// entry's fields and values may add up to more.
pub const MAX_NODE_BYTES: usize = 1 << 30;

#[derive(Clone, Debug, Default)]
pub struct Stream {
    nodes: BTreeMap<StreamId, Node>,
    length: u64,
    last_id: StreamId,
    /// The first entry that is not a tombstone (0-0 when empty).
    first_id: StreamId,
    max_deleted_id: StreamId,
    entries_added: u64,
    groups: BTreeMap<Box<[u8]>, Group>,
}

/// A saved stream's metadata (RDB), besides its nodes and groups.
#[derive(Clone, Copy, Debug)]
pub struct SavedMeta {
    pub length: u64,
    pub last_id: StreamId,
    /// `None` when not saved (RDB type 15): computed on load.
    pub first_id: Option<StreamId>,
    pub max_deleted_id: StreamId,
    pub entries_added: u64,
}

/// The id XADD asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddId {
    /// `*`: the current time, or the last id's successor if the clock is
    /// behind it.
    Auto,
    /// `<ms>-<seq>`.
    Exact(StreamId),
    /// `<ms>-*`: the sequence after the last id's if the milliseconds are
    /// the same, else 0.
    Ms(u64),
}

/// Why XADD could not append.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddError {
    /// The id is not greater than the last one (`EDOM`).
    IdTooSmall,
    /// `<ms>-*` when the last id already has the largest sequence, or the
    /// fields and values exceed [`MAX_NODE_BYTES`] (Redis replies "Elements
    /// are too large to be stored" to both).
    TooLarge,
}

/// Why XSETID refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SetIdError {
    SmallerThanTop,
    EntriesAddedTooSmall,
}

/// What trimming keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimTo {
    /// MAXLEN: at most this many entries.
    MaxLen(u64),
    /// MINID: no entry below this id.
    MinId(StreamId),
}

/// A trim request as XADD and XTRIM parse it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    pub to: TrimTo,
    /// `~`: only whole nodes go.
    pub approx: bool,
    /// Most entries to remove (0: no limit).
    pub limit: u64,
}

/// An entry in a stream, borrowed.
#[derive(Clone, Copy, Debug)]
pub struct Entry<'a> {
    node: &'a Node,
    pos: EntryPos,
}

impl<'a> Entry<'a> {
    pub fn id(&self) -> StreamId {
        self.pos.id
    }

    /// Number of field-value pairs.
    pub fn len(&self) -> usize {
        self.pos.fields
    }

    pub fn is_empty(&self) -> bool {
        self.pos.fields == 0
    }

    pub fn is_deleted(&self) -> bool {
        self.pos.flags & DELETED != 0
    }

    pub fn pairs(&self) -> Pairs<'a> {
        self.node.pairs(&self.pos)
    }

    pub fn to_copy(&self) -> EntryCopy {
        let mut items = Vec::new();
        for (field, value) in self.pairs() {
            encode(&field, &mut items);
            encode(&value, &mut items);
        }
        EntryCopy { id: self.id(), body: Some((items.into_boxed_slice(), self.len())) }
    }
}

/// An entry copied out of a stream (what a read returns, so that it can be
/// replied after the stream changed or on another core). A pending id whose
/// entry was deleted has no body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EntryCopy {
    pub id: StreamId,
    body: Option<(Box<[u8]>, usize)>,
}

impl EntryCopy {
    /// A pending id whose entry no longer exists.
    pub fn missing(id: StreamId) -> Self {
        EntryCopy { id, body: None }
    }

    pub fn is_missing(&self) -> bool {
        self.body.is_none()
    }

    /// Number of field-value pairs (0 when missing).
    pub fn len(&self) -> usize {
        self.body.as_ref().map_or(0, |(_, n)| *n)
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The field-value pairs (none when missing).
    pub fn pairs(&self) -> impl Iterator<Item = (Item<'_>, Item<'_>)> + '_ {
        let bytes: &[u8] = self.body.as_ref().map_or(&[], |(b, _)| b);
        let mut off = 0;
        std::iter::from_fn(move || {
            if off >= bytes.len() {
                return None;
            }
            let (field, n) = decode(bytes, off);
            let (value, m) = decode(bytes, off + n);
            off += n + m;
            Some((field, value))
        })
    }
}

/// Entries between two ids, forwards or backwards.
pub struct Range<'a> {
    nodes: btree_map::Range<'a, StreamId, Node>,
    start: StreamId,
    end: StreamId,
    rev: bool,
    tombstones: bool,
    current: Option<(StreamId, &'a Node)>,
    /// Forwards: the next entry's offset in the current node.
    next_off: Option<usize>,
    /// Backwards: the current node's entry offsets not yet visited.
    offsets: Vec<usize>,
    done: bool,
}

impl<'a> Iterator for Range<'a> {
    type Item = Entry<'a>;

    fn next(&mut self) -> Option<Entry<'a>> {
        while !self.done {
            let Some((master, node)) = self.current else {
                let next = if self.rev { self.nodes.next_back() } else { self.nodes.next() };
                let Some((&master, node)) = next else {
                    self.done = true;
                    break;
                };
                self.current = Some((master, node));
                if self.rev {
                    self.offsets = node.offsets(master);
                } else {
                    self.next_off = node.first();
                }
                continue;
            };
            let off = if self.rev { self.offsets.pop() } else { self.next_off };
            let Some(off) = off else {
                self.current = None;
                continue;
            };
            let pos = node.entry_at(master, off);
            if !self.rev {
                self.next_off = node.after(pos.end);
            }
            if pos.flags & DELETED != 0 && !self.tombstones {
                continue;
            }
            let (before, past) = if self.rev {
                (pos.id > self.end, pos.id < self.start)
            } else {
                (pos.id < self.start, pos.id > self.end)
            };
            if past {
                self.done = true;
            } else if !before {
                return Some(Entry { node, pos });
            }
        }
        None
    }
}

/// Where XREADGROUP reads from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GroupFrom {
    /// `>`: entries never delivered to the group.
    New,
    /// An id: the consumer's own pending entries from this id on.
    History(StreamId),
}

/// What a group read delivered.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct GroupRead {
    pub entries: Vec<EntryCopy>,
    /// The read created the consumer (Redis announces
    /// `xgroup-createconsumer`).
    pub consumer_created: bool,
}

/// XCLAIM's options, resolved.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClaimOptions {
    /// Only entries idle at least this long (ms; 0: any).
    pub min_idle: i64,
    /// The delivery time claimed entries get.
    pub delivery_time: i64,
    /// RETRYCOUNT: the delivery count claimed entries get.
    pub retry_count: Option<u64>,
    /// Create pending entries for ids that exist but are not pending.
    pub force: bool,
    /// Reply ids only, and leave delivery counts alone.
    pub just_id: bool,
    /// LASTID: move the group's last-delivered id up to this.
    pub last_id: Option<StreamId>,
}

/// XAUTOCLAIM's arguments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AutoClaim {
    /// First pending id to look at.
    pub start: StreamId,
    /// Most entries to claim (10 times as many are looked at, at most).
    pub count: u64,
    /// Only entries idle at least this long (ms).
    pub min_idle: i64,
    /// Reply ids only, and leave delivery counts alone.
    pub just_id: bool,
}

/// What XCLAIM or XAUTOCLAIM did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Claimed {
    /// Claimed entries (only ids, no bodies, with JUSTID).
    pub entries: Vec<EntryCopy>,
    /// Pending ids dropped because their entries no longer exist.
    pub deleted: Vec<StreamId>,
    /// XAUTOCLAIM's cursor: where the next call should start (0-0: done).
    pub cursor: StreamId,
    pub consumer_created: bool,
    /// Whether the group changed at all.
    pub changed: bool,
}

impl Stream {
    pub fn new() -> Self {
        Self::default()
    }

    /// Number of entries (tombstones not counted).
    pub fn len(&self) -> u64 {
        self.length
    }

    pub fn is_empty(&self) -> bool {
        self.length == 0
    }

    /// The last id ever used (entries may have been deleted since).
    pub fn last_id(&self) -> StreamId {
        self.last_id
    }

    /// XINFO's `recorded-first-entry-id`.
    pub fn first_id(&self) -> StreamId {
        self.first_id
    }

    pub fn max_deleted_id(&self) -> StreamId {
        self.max_deleted_id
    }

    pub fn entries_added(&self) -> u64 {
        self.entries_added
    }

    /// Number of nodes (XINFO's `radix-tree-keys`).
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// Each node's size as a Redis listpack, in order (RDB size estimates).
    pub fn node_sizes(&self) -> impl Iterator<Item = usize> + '_ {
        self.nodes.values().map(Node::lp_bytes)
    }

    /// The nodes a radix tree holding the node keys (16-byte big-endian ids)
    /// has: XINFO's `radix-tree-nodes`. Computed for a compressed trie as
    /// Redis's rax builds it: a compressed node per run of bytes without a
    /// branch, a node per branch point, an empty node where each key ends,
    /// and the root.
    pub fn radix_tree_nodes(&self) -> usize {
        let keys: Vec<[u8; 16]> = self.nodes.keys().map(|id| id.to_be_bytes()).collect();
        if keys.is_empty() {
            return 1;
        }
        trie_nodes(&keys, 0)
    }

    /// Approximate heap bytes (MEMORY USAGE, INFO).
    pub fn heap_size(&self) -> usize {
        const NODE_OVERHEAD: usize = std::mem::size_of::<Node>() + 16 + 8;
        let nodes: usize = self.nodes.values().map(|n| n.heap_size() + NODE_OVERHEAD).sum();
        let groups: usize = self
            .groups
            .iter()
            .map(|(name, g)| {
                let consumers: usize =
                    g.consumers().map(|(n, c)| n.len() + 64 + 24 * c.pending_len()).sum();
                name.len() + std::mem::size_of::<Group>() + 64 * g.pending_len() + consumers
            })
            .sum();
        nodes + groups
    }

    // ---- Entries -----------------------------------------------------------

    /// Appends an entry (`pairs`: field, value, field, value, …, at least one
    /// pair), returning its id (Redis's `streamAppendItem`).
    pub fn append(
        &mut self,
        id: AddId,
        pairs: &[&[u8]],
        now_ms: u64,
        limits: &Limits,
    ) -> Result<StreamId, AddError> {
        let id = match id {
            AddId::Auto if now_ms > self.last_id.ms => StreamId::new(now_ms, 0),
            AddId::Auto => self.last_id.next().ok_or(AddError::IdTooSmall)?,
            AddId::Exact(id) => id,
            AddId::Ms(ms) if ms == self.last_id.ms => {
                self.last_id.next().filter(|n| n.ms == ms).ok_or(AddError::TooLarge)?
            }
            AddId::Ms(ms) => StreamId::new(ms, 0),
        };
        if id <= self.last_id {
            return Err(AddError::IdTooSmall);
        }
        let total: usize = pairs.iter().map(|p| p.len()).sum();
        if total > MAX_NODE_BYTES {
            return Err(AddError::TooLarge);
        }
        let max_bytes = match limits.stream_node_max_bytes {
            0 => MAX_NODE_BYTES,
            n => n.min(MAX_NODE_BYTES),
        };
        let max_entries = limits.stream_node_max_entries;
        let mut appended = false;
        if let Some(mut tail) = self.nodes.last_entry() {
            let node = tail.get();
            let full = node.lp_bytes() + total >= max_bytes
                || (max_entries != 0 && node.stored() >= max_entries);
            let master = *tail.key();
            let node = tail.get_mut();
            if full {
                node.shrink();
            } else {
                let same = node.same_fields(pairs);
                node.append(master, id, pairs, same);
                appended = true;
            }
        }
        if !appended {
            let mut node = Node::new(pairs);
            node.append(id, id, pairs, true);
            self.nodes.insert(id, node);
        }
        self.length += 1;
        self.entries_added += 1;
        self.last_id = id;
        if self.length == 1 {
            self.first_id = id;
        }
        Ok(id)
    }

    /// Entries from `start` to `end` inclusive, forwards (or backwards from
    /// `end` with `rev`), tombstones skipped.
    pub fn range(&self, start: StreamId, end: StreamId, rev: bool) -> Range<'_> {
        self.range_with(start, end, rev, false)
    }

    fn range_with(&self, start: StreamId, end: StreamId, rev: bool, tombstones: bool) -> Range<'_> {
        let nodes = if rev {
            self.nodes.range(..=end)
        } else {
            // The node holding `start` begins at or before it.
            let from = self
                .nodes
                .range(..=start)
                .next_back()
                .or_else(|| self.nodes.first_key_value())
                .map(|(k, _)| *k);
            match from {
                Some(from) => self.nodes.range(from..),
                None => self.nodes.range(StreamId::MAX..StreamId::MAX),
            }
        };
        Range {
            nodes,
            start,
            end,
            rev,
            tombstones,
            current: None,
            next_off: None,
            offsets: Vec::new(),
            done: start > end,
        }
    }

    /// The entry with this id, unless deleted.
    pub fn get(&self, id: StreamId) -> Option<Entry<'_>> {
        self.range(id, id, false).next()
    }

    /// The last entry that is not a tombstone (`streamLastValidID`).
    pub fn last_valid_id(&self) -> Option<StreamId> {
        self.range(StreamId::MIN, StreamId::MAX, true).next().map(|e| e.id())
    }

    /// The first or last id, tombstones included or not
    /// (`streamGetEdgeID`; an empty stream gives MAX for the first and MIN
    /// for the last).
    fn edge_id(&self, first: bool, skip_tombstones: bool) -> StreamId {
        let mut range = self.range_with(StreamId::MIN, StreamId::MAX, !first, !skip_tombstones);
        match range.next() {
            Some(e) => e.id(),
            None if first => StreamId::MAX,
            None => StreamId::MIN,
        }
    }

    /// Deletes the entry with this id (`streamDeleteItem`): a tombstone, or
    /// the whole node when it was the node's last live entry.
    fn delete_one(&mut self, id: StreamId) -> bool {
        let Some((&master, node)) = self.nodes.range_mut(..=id).next_back() else {
            return false;
        };
        let mut off = node.first();
        let found = loop {
            let Some(at) = off else { break None };
            let pos = node.entry_at(master, at);
            if pos.id > id {
                break None;
            }
            if pos.id == id && pos.flags & DELETED == 0 {
                break Some(at);
            }
            off = node.after(pos.end);
        };
        let Some(at) = found else {
            return false;
        };
        if node.live == 1 {
            self.nodes.remove(&master);
        } else {
            node.mark_deleted(at);
        }
        self.length -= 1;
        true
    }

    /// XDEL: deletes these ids, keeping the first id and the largest
    /// deleted id up to date; returns how many were deleted.
    pub fn delete(&mut self, ids: &[StreamId]) -> u64 {
        let mut deleted = 0;
        let mut first_deleted = false;
        for &id in ids {
            if self.delete_one(id) {
                first_deleted |= id == self.first_id;
                self.max_deleted_id = self.max_deleted_id.max(id);
                deleted += 1;
            }
        }
        if deleted > 0 {
            if self.length == 0 {
                self.first_id = StreamId::MIN;
            } else if first_deleted {
                self.first_id = self.edge_id(true, true);
            }
        }
        deleted
    }

    /// Trims from the head (Redis's `streamTrim`): whole nodes while they
    /// can go; then, unless approximate, entries inside the next node become
    /// tombstones. Never removes more than `limit` entries (0: no limit)
    /// counting whole nodes. Returns how many entries went.
    pub fn trim(&mut self, trim: &Trim) -> u64 {
        let mut deleted: u64 = 0;
        while let Some(mut first) = self.nodes.first_entry() {
            if let TrimTo::MaxLen(max) = trim.to {
                if self.length <= max {
                    break;
                }
            }
            let master = *first.key();
            let node = first.get_mut();
            let entries = node.live as u64;
            if trim.limit != 0 && deleted + entries > trim.limit {
                break;
            }
            let whole = match trim.to {
                TrimTo::MaxLen(max) => self.length - entries >= max,
                TrimTo::MinId(min) => {
                    node.last().is_some_and(|off| node.entry_at(master, off).id < min)
                }
            };
            if whole {
                first.remove();
                self.length -= entries;
                deleted += entries;
                continue;
            }
            if trim.approx {
                break;
            }
            let mut off = node.first();
            while let Some(at) = off {
                let pos = node.entry_at(master, at);
                let stop = match trim.to {
                    TrimTo::MaxLen(max) => self.length <= max,
                    TrimTo::MinId(min) => pos.id >= min,
                };
                if stop {
                    break;
                }
                if pos.flags & DELETED == 0 {
                    node.mark_deleted(at);
                    self.length -= 1;
                    deleted += 1;
                }
                off = node.after(pos.end);
            }
            break;
        }
        if self.length == 0 {
            self.first_id = StreamId::MIN;
        } else if deleted > 0 {
            self.first_id = self.edge_id(true, true);
        }
        deleted
    }

    /// XSETID: sets the last id, and optionally the entries-added counter
    /// and the largest deleted id (a zero one is ignored, as in Redis).
    pub fn set_last_id(
        &mut self,
        id: StreamId,
        entries_added: Option<u64>,
        max_deleted: Option<StreamId>,
    ) -> Result<(), SetIdError> {
        if self.length > 0 {
            if self.last_valid_id().is_some_and(|top| id < top) {
                return Err(SetIdError::SmallerThanTop);
            }
            if entries_added.is_some_and(|added| self.length > added) {
                return Err(SetIdError::EntriesAddedTooSmall);
            }
        }
        self.last_id = id;
        if let Some(added) = entries_added {
            self.entries_added = added;
        }
        if let Some(max) = max_deleted.filter(|m| !m.is_zero()) {
            self.max_deleted_id = max;
        }
        Ok(())
    }

    // ---- Saving and loading ---------------------------------------------

    /// Each node's master id and the elements of Redis's listpack for it,
    /// in order (RDB's `RDB_TYPE_STREAM_LISTPACKS_*`).
    pub fn listpacks(&self) -> impl Iterator<Item = (StreamId, Vec<Item<'_>>)> {
        self.nodes.iter().map(|(&master, node)| (master, node.listpack_items(master)))
    }

    /// Loading: appends a saved node (the elements of its Redis listpack,
    /// tombstones kept) after the nodes already there. Its ids must come
    /// after theirs. The length grows by its live entries.
    pub fn push_saved_node(
        &mut self,
        master: StreamId,
        items: &[Item<'_>],
    ) -> Result<(), &'static str> {
        let (node, _) = Node::from_listpack_items(master, items)?;
        if self.stored_last_id().is_some_and(|last| master <= last) {
            return Err("Stream listpacks are not in order");
        }
        self.length += node.live as u64;
        self.nodes.insert(master, node);
        Ok(())
    }

    /// The last id stored, tombstones included.
    fn stored_last_id(&self) -> Option<StreamId> {
        let (&master, node) = self.nodes.last_key_value()?;
        Some(node.entry_at(master, node.last()?).id)
    }

    /// Loading: sets the saved metadata once the nodes are in. The length
    /// must be the live entries loaded and the last id no smaller than any
    /// stored; a `first_id` of `None` (older RDB types) is computed as
    /// Redis computes it.
    pub fn restore_meta(&mut self, meta: &SavedMeta) -> Result<(), &'static str> {
        if meta.length != self.length {
            return Err("Stream length inconsistent with its entries");
        }
        if self.stored_last_id().is_some_and(|last| meta.last_id < last) {
            return Err("Stream last id smaller than its entries");
        }
        self.last_id = meta.last_id;
        self.first_id = meta.first_id.unwrap_or_else(|| self.edge_id(true, true));
        self.max_deleted_id = meta.max_deleted_id;
        self.entries_added = meta.entries_added;
        Ok(())
    }

    // ---- Read counters and lag ---------------------------------------------

    /// Whether entries between `start` and the end may have been deleted
    /// (`streamRangeHasTombstones`, with no end).
    fn tombstones_after(&self, start: StreamId) -> bool {
        if self.length == 0 || self.max_deleted_id.is_zero() {
            return false;
        }
        if self.first_id > self.max_deleted_id {
            return false;
        }
        start <= self.max_deleted_id
    }

    /// The logical read counter of `id`: its distance from the first entry
    /// ever added, when it can be known
    /// (`streamEstimateDistanceFromFirstEverEntry`); otherwise
    /// [`ENTRIES_READ_INVALID`].
    pub fn estimate_distance(&self, id: StreamId) -> i64 {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return 0;
        }
        if self.length == 0 && id <= self.last_id {
            return added;
        }
        if id == self.last_id {
            return added;
        }
        if id > self.last_id {
            return ENTRIES_READ_INVALID;
        }
        if self.max_deleted_id.is_zero() || self.max_deleted_id < self.first_id {
            let before_first = added.wrapping_sub(self.length as i64);
            if id < self.first_id {
                return before_first;
            }
            if id == self.first_id {
                return before_first.wrapping_add(1);
            }
        }
        ENTRIES_READ_INVALID
    }

    /// A group's lag: entries added and not yet read by it, when it can be
    /// known (`streamReplyWithCGLag`).
    pub fn lag(&self, group: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = group.entries_read() {
            if !self.tombstones_after(group.last_id) {
                return Some(added.wrapping_sub(read));
            }
        }
        match self.estimate_distance(group.last_id) {
            ENTRIES_READ_INVALID => None,
            read => Some(added.wrapping_sub(read)),
        }
    }

    // ---- Consumer groups ---------------------------------------------------

    pub fn groups_len(&self) -> usize {
        self.groups.len()
    }

    /// Groups in name order.
    pub fn groups(&self) -> impl Iterator<Item = (&[u8], &Group)> {
        self.groups.iter().map(|(n, g)| (&**n, g))
    }

    pub fn group(&self, name: &[u8]) -> Option<&Group> {
        self.groups.get(name)
    }

    pub fn group_mut(&mut self, name: &[u8]) -> Option<&mut Group> {
        self.groups.get_mut(name)
    }

    /// Creates a group; false if one has that name already.
    pub fn create_group(&mut self, name: &[u8], last_id: StreamId, entries_read: i64) -> bool {
        if self.groups.contains_key(name) {
            return false;
        }
        self.groups.insert(name.into(), Group::new(last_id, entries_read));
        true
    }

    pub fn destroy_group(&mut self, name: &[u8]) -> bool {
        self.groups.remove(name).is_some()
    }

    /// Whether XREADGROUP with `>` has something to give `group` now: an
    /// entry (not deleted) past its last-delivered id.
    pub fn has_new_for(&self, group: &Group) -> bool {
        self.length > 0 && self.last_valid_id().is_some_and(|top| top > group.last_id)
    }

    /// XREADGROUP for one stream: `consumer` (created if missing, its
    /// seen-time set to `now`) reads up to `count` entries (0: all).
    ///
    /// With [`GroupFrom::New`] the entries are those after the group's
    /// last-delivered id, which moves to the last one read (advancing the
    /// read counter), and each becomes pending for this consumer unless
    /// `noack`; `None` when there is nothing new (the consumer is then not
    /// created, as in Redis). With [`GroupFrom::History`] the entries are
    /// the consumer's own pending ones from that id on, each delivered again
    /// (a deleted one comes back without a body). `None` also when there is
    /// no such group.
    pub fn read_group(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        from: GroupFrom,
        count: usize,
        noack: bool,
        now: i64,
    ) -> Option<GroupRead> {
        let g = self.groups.get(group)?;
        if from == GroupFrom::New && !self.has_new_for(g) {
            return None;
        }
        let consumer_created = self.groups.get_mut(group)?.touch_consumer(consumer, now);
        let entries = match from {
            GroupFrom::New => self.deliver_new(group, consumer, count, noack, now),
            GroupFrom::History(start) => self.deliver_history(group, consumer, start, count, now),
        };
        Some(GroupRead { entries, consumer_created })
    }

    /// The `>` part of [`Stream::read_group`] (`streamReplyWithRange` with a
    /// group): the consumer must exist.
    fn deliver_new(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        count: usize,
        noack: bool,
        now: i64,
    ) -> Vec<EntryCopy> {
        let Some(g) = self.groups.get(group) else {
            return Vec::new();
        };
        let Some(start) = g.last_id.next() else {
            return Vec::new();
        };
        let (mut last_id, mut entries_read) = (g.last_id, g.entries_read);
        let mut out = Vec::new();
        for entry in self.range(start, StreamId::MAX, false) {
            let id = entry.id();
            if id > last_id {
                if entries_read != ENTRIES_READ_INVALID && !self.tombstones_after(id) {
                    entries_read = entries_read.wrapping_add(1);
                } else if self.entries_added != 0 {
                    entries_read = self.estimate_distance(id);
                }
                last_id = id;
            }
            out.push(entry.to_copy());
            if out.len() == count {
                break;
            }
        }
        let Some(g) = self.groups.get_mut(group) else {
            return out;
        };
        g.last_id = last_id;
        g.entries_read = entries_read;
        if !noack {
            for entry in &out {
                g.deliver(entry.id, consumer, now);
            }
        }
        if !out.is_empty() {
            g.set_active(consumer, now);
        }
        out
    }

    /// The history part of [`Stream::read_group`]
    /// (`streamReplyWithRangeFromConsumerPEL`).
    fn deliver_history(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        start: StreamId,
        count: usize,
        now: i64,
    ) -> Vec<EntryCopy> {
        let Some(c) = self.groups.get(group).and_then(|g| g.consumer(consumer)) else {
            return Vec::new();
        };
        let limit = if count == 0 { usize::MAX } else { count };
        let ids: Vec<StreamId> = c.pending_from(start).take(limit).collect();
        let out: Vec<EntryCopy> = ids
            .iter()
            .map(|&id| match self.get(id) {
                Some(entry) => entry.to_copy(),
                None => EntryCopy::missing(id),
            })
            .collect();
        if let Some(g) = self.groups.get_mut(group) {
            for entry in out.iter().filter(|e| !e.is_missing()) {
                g.redeliver(entry.id, now);
            }
        }
        out
    }

    /// XCLAIM: gives `consumer` the pending entries among `ids` that have
    /// been idle long enough (with FORCE, also ids that exist and are not
    /// pending); pending ids whose entries are gone are dropped. `None` when
    /// there is no such group.
    pub fn claim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        ids: &[StreamId],
        options: &ClaimOptions,
        now: i64,
    ) -> Option<Claimed> {
        let mut done = Claimed::default();
        let g = self.groups.get_mut(group)?;
        if let Some(last) = options.last_id.filter(|last| *last > g.last_id) {
            g.last_id = last;
            done.changed = true;
        }
        let mut consumer_ready = false;
        for &id in ids {
            let exists = self.get(id).is_some();
            let g = self.groups.get_mut(group)?;
            let pending = g.nack(id).is_some();
            if !exists {
                if pending {
                    g.forget(id);
                    done.changed = true;
                }
                continue;
            }
            let forced = options.force && !pending;
            if !pending && !forced {
                continue;
            }
            if !forced && options.min_idle > 0 {
                let idle = g.nack(id).map_or(0, |n| now.wrapping_sub(n.delivery_time));
                if idle < options.min_idle {
                    continue;
                }
            }
            if !consumer_ready {
                done.consumer_created = g.touch_consumer(consumer, now);
                consumer_ready = true;
            }
            if forced {
                g.deliver(id, consumer, now);
            }
            let count = match options.retry_count {
                Some(n) => Some(n),
                None if !options.just_id => g.nack(id).map(|n| n.delivery_count.saturating_add(1)),
                None => None,
            };
            g.claim(id, consumer, options.delivery_time, count);
            g.set_active(consumer, now);
            done.changed = true;
            done.entries.push(self.copy_or_id(id, options.just_id));
        }
        Some(done)
    }

    /// XAUTOCLAIM: walks the group's pending entries from `start`, giving
    /// `consumer` up to `count` of those idle at least `min_idle` (looking
    /// at no more than 10 × `count`), dropping those whose entries are gone
    /// (which count against `count` too); the cursor is the next pending id
    /// to look at. `None` when there is no such group.
    pub fn autoclaim(
        &mut self,
        group: &[u8],
        consumer: &[u8],
        request: &AutoClaim,
        now: i64,
    ) -> Option<Claimed> {
        let AutoClaim { start, count, min_idle, just_id } = *request;
        let mut done = Claimed::default();
        let mut attempts = count.saturating_mul(10);
        let mut left = count;
        let mut from = Some(start);
        let mut consumer_ready = false;
        let mut exhausted = false;
        while attempts > 0 && left > 0 {
            attempts -= 1;
            let g = self.groups.get(group)?;
            let next =
                from.and_then(|f| g.pending_from(f).next().map(|(id, n)| (id, n.delivery_time)));
            let Some((id, delivered)) = next else {
                exhausted = true;
                break;
            };
            from = id.next();
            if self.get(id).is_none() {
                self.groups.get_mut(group)?.forget(id);
                done.deleted.push(id);
                done.changed = true;
                left -= 1;
                continue;
            }
            if min_idle > 0 && now.wrapping_sub(delivered) < min_idle {
                continue;
            }
            let g = self.groups.get_mut(group)?;
            if !consumer_ready {
                done.consumer_created = g.touch_consumer(consumer, now);
                consumer_ready = true;
            }
            let count = if just_id { None } else { g.count_delivery(id) };
            g.claim(id, consumer, now, count);
            g.set_active(consumer, now);
            done.changed = true;
            done.entries.push(self.copy_or_id(id, just_id));
            left -= 1;
        }
        let g = self.groups.get(group)?;
        done.cursor = match from {
            Some(f) if !exhausted => g.pending_from(f).next().map_or(StreamId::MIN, |(id, _)| id),
            _ => StreamId::MIN,
        };
        Some(done)
    }

    /// A claimed entry for the reply: its copy, or just its id (JUSTID).
    fn copy_or_id(&self, id: StreamId, just_id: bool) -> EntryCopy {
        match self.get(id) {
            Some(entry) if !just_id => entry.to_copy(),
            _ => EntryCopy::missing(id),
        }
    }
}

/// Nodes of the compressed trie over `keys` (sorted, distinct, equally
/// long, sharing their first `depth` bytes), counting the node that starts
/// at `depth`.
fn trie_nodes(keys: &[[u8; 16]], depth: usize) -> usize {
    if depth == 16 {
        return 1;
    }
    let (first, last) = (&keys[0], &keys[keys.len() - 1]);
    // Sorted keys share a byte at a position iff the first and last do.
    let run = (depth..16).take_while(|&i| first[i] == last[i]).count();
    if run > 0 {
        return 1 + trie_nodes(keys, depth + run);
    }
    let mut total = 1;
    let mut lo = 0;
    while lo < keys.len() {
        let byte = keys[lo][depth];
        let hi = lo + keys[lo..].iter().take_while(|k| k[depth] == byte).count();
        total += trie_nodes(&keys[lo..hi], depth + 1);
        lo = hi;
    }
    total
}

#[cfg(test)]
mod tests;
