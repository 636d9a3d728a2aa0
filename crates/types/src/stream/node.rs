//! One node of a stream: a run of consecutive entries packed into one byte
//! buffer, as Redis packs them into one listpack per radix-tree key.
//!
//! Layout (every element is a [`crate::pack`] item, listpack's compact
//! integer and string encodings, without listpack's back-lengths):
//!
//! ```text
//! master:  num-fields field-1 … field-N
//! entry:   flags ms-delta seq-delta [num-fields field-1 …] value-1 … value-N
//! ```
//!
//! The master fields are those of the node's first entry; an entry with the
//! same field names sets [`SAME_FIELDS`] and stores only its values. Ids are
//! stored as differences from the node's master id (its key in the stream's
//! tree). A deleted entry keeps its bytes and gets [`DELETED`] (a tombstone),
//! exactly as in Redis, so that trimming and node splitting behave the same.
//!
//! Redis decides when a node is full from its listpack's size; the node keeps
//! that size ([`Node::lp_bytes`]) as arithmetic beside its own smaller bytes,
//! so nodes split where Redis's would. Backward walks (XREVRANGE) collect a
//! node's entry offsets first: nodes are small (100 entries by default).

use super::id::StreamId;
use crate::pack::{backlen_len, decode, encode, encoded_len, Item};

/// The entry was deleted (XDEL or trimming inside a node).
pub const DELETED: u8 = 1;
/// The entry's field names are the node's master fields.
pub const SAME_FIELDS: u8 = 2;

/// Bytes of a listpack's header (total bytes, element count) and end mark.
const LP_HEADER_AND_END: usize = 7;

/// What an item costs inside a Redis listpack: its encoding plus the
/// back-length that follows it.
fn lp_element(item: &Item<'_>) -> usize {
    let n = encoded_len(item);
    n + backlen_len(n)
}

fn lp_int(n: i64) -> usize {
    lp_element(&Item::Int(n))
}

#[derive(Clone, Debug, Default)]
pub(crate) struct Node {
    buf: Vec<u8>,
    /// Where the first entry starts (after the master fields).
    entries_start: usize,
    /// Where the last entry starts (tombstones included).
    last_start: usize,
    master_fields: usize,
    /// Entries not deleted.
    pub live: usize,
    /// Tombstones.
    pub deleted: usize,
    /// Redis's listpack size for this node, less the two counters at its
    /// head (which change size as they grow).
    lp_fixed: usize,
}

/// A decoded entry header: where its parts are.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryPos {
    pub flags: u8,
    pub id: StreamId,
    /// Offset of the first field name (or first value with SAME_FIELDS).
    pub body: usize,
    pub fields: usize,
    /// Offset just past the entry.
    pub end: usize,
}

fn int_at(buf: &[u8], off: usize) -> (i64, usize) {
    match decode(buf, off) {
        (Item::Int(n), len) => (n, off + len),
        (other, _) => unreachable!("stream node integer expected, found {other:?}"),
    }
}

fn skip_items(buf: &[u8], mut off: usize, n: usize) -> usize {
    for _ in 0..n {
        off += decode(buf, off).1;
    }
    off
}

impl Node {
    /// A node whose master fields are `pairs`' field names (`pairs` holds
    /// field, value, field, value, …).
    pub fn new(pairs: &[&[u8]]) -> Node {
        Node::with_fields(pairs.len() / 2, pairs.iter().step_by(2).map(|f| Item::from_bytes(f)))
    }

    /// A node with these `count` master field names.
    fn with_fields<'i>(count: usize, fields: impl Iterator<Item = Item<'i>>) -> Node {
        let mut node = Node::default();
        let count_item = Item::Int(count as i64);
        encode(&count_item, &mut node.buf);
        node.lp_fixed = LP_HEADER_AND_END + lp_element(&count_item) + lp_int(0);
        for item in fields {
            encode(&item, &mut node.buf);
            node.lp_fixed += lp_element(&item);
        }
        node.master_fields = count;
        node.entries_start = node.buf.len();
        node.last_start = node.buf.len();
        node
    }

    /// The size Redis's listpack for this node would have (`lpBytes`).
    pub fn lp_bytes(&self) -> usize {
        self.lp_fixed + lp_int(self.live as i64) + lp_int(self.deleted as i64)
    }

    /// Entries stored, tombstones included.
    pub fn stored(&self) -> usize {
        self.live + self.deleted
    }

    /// Bytes of memory the node's buffer holds.
    pub fn heap_size(&self) -> usize {
        self.buf.capacity()
    }

    /// Gives back the buffer's spare room (the node is full: Redis's
    /// `lpShrinkToFit`).
    pub fn shrink(&mut self) {
        self.buf.shrink_to_fit();
    }

    /// Whether `pairs`' field names are the master fields.
    pub fn same_fields(&self, pairs: &[&[u8]]) -> bool {
        if pairs.len() / 2 != self.master_fields {
            return false;
        }
        let mut off = skip_items(&self.buf, 0, 1);
        for field in pairs.iter().step_by(2) {
            let (item, len) = decode(&self.buf, off);
            if !item.eq_bytes(field) {
                return false;
            }
            off += len;
        }
        true
    }

    /// Appends an entry with id `id` (the node's master id is `master`).
    pub fn append(&mut self, master: StreamId, id: StreamId, pairs: &[&[u8]], same_fields: bool) {
        let flags = if same_fields { SAME_FIELDS } else { 0 };
        let deltas = (id.ms.wrapping_sub(master.ms) as i64, id.seq.wrapping_sub(master.seq) as i64);
        let skip = usize::from(same_fields);
        let body = pairs.iter().skip(skip).step_by(1 + skip).map(|p| Item::from_bytes(p));
        let own_fields = (!same_fields).then_some(pairs.len() / 2);
        self.append_items(flags, deltas, own_fields, body);
    }

    /// Appends an entry from its parts: flags, id deltas from the master
    /// id, its own field count (`None` with [`SAME_FIELDS`]) and its body
    /// (field, value, … or only values).
    fn append_items<'i>(
        &mut self,
        flags: u8,
        deltas: (i64, i64),
        own_fields: Option<usize>,
        body: impl Iterator<Item = Item<'i>>,
    ) {
        self.last_start = self.buf.len();
        let header = [Item::Int(flags as i64), Item::Int(deltas.0), Item::Int(deltas.1)];
        let count = own_fields.map(|n| Item::Int(n as i64));
        // Redis's lp-count: the elements before it in the entry.
        let mut lp_count = 0;
        let mut lp = 0;
        for item in header.into_iter().chain(count).chain(body) {
            encode(&item, &mut self.buf);
            lp += lp_element(&item);
            lp_count += 1;
        }
        self.lp_fixed += lp + lp_int(lp_count);
        if flags & DELETED != 0 {
            self.deleted += 1;
        } else {
            self.live += 1;
        }
    }

    /// The entry starting at `off`.
    pub fn entry_at(&self, master: StreamId, off: usize) -> EntryPos {
        let buf = &self.buf;
        let (flags, p) = int_at(buf, off);
        let (ms_delta, p) = int_at(buf, p);
        let (seq_delta, p) = int_at(buf, p);
        let id = StreamId::new(
            master.ms.wrapping_add(ms_delta as u64),
            master.seq.wrapping_add(seq_delta as u64),
        );
        let flags = flags as u8;
        let (fields, body, items) = if flags & SAME_FIELDS != 0 {
            (self.master_fields, p, self.master_fields)
        } else {
            let (n, body) = int_at(buf, p);
            (n as usize, body, 2 * n as usize)
        };
        let end = skip_items(buf, body, items);
        EntryPos { flags, id, body, fields, end }
    }

    /// Offset of the first entry, if any.
    pub fn first(&self) -> Option<usize> {
        (self.entries_start < self.buf.len()).then_some(self.entries_start)
    }

    /// Offset of the entry after the one ending at `end`, if any.
    pub fn after(&self, end: usize) -> Option<usize> {
        (end < self.buf.len()).then_some(end)
    }

    /// Offset of the last entry (possibly a tombstone), if any.
    pub fn last(&self) -> Option<usize> {
        self.first().map(|_| self.last_start)
    }

    /// Offsets of every entry, in order (for backward walks).
    pub fn offsets(&self, master: StreamId) -> Vec<usize> {
        let mut out = Vec::with_capacity(self.stored());
        let mut off = self.first();
        while let Some(at) = off {
            out.push(at);
            off = self.after(self.entry_at(master, at).end);
        }
        out
    }

    /// Marks the entry at `off` deleted (its flags are a one-byte integer,
    /// so in place) and moves it from the live count to the tombstones.
    pub fn mark_deleted(&mut self, off: usize) {
        debug_assert!(self.buf[off] & DELETED == 0);
        self.buf[off] |= DELETED;
        self.live -= 1;
        self.deleted += 1;
    }

    /// The field names and values of the entry at `pos`, in order.
    pub fn pairs(&self, pos: &EntryPos) -> Pairs<'_> {
        let master = (pos.flags & SAME_FIELDS != 0).then(|| skip_items(&self.buf, 0, 1));
        Pairs { buf: &self.buf, master, off: pos.body, left: pos.fields }
    }
}

impl Node {
    /// The node as the elements of Redis's listpack for it: the master
    /// entry `count deleted num-fields field-1 … field-N 0`, then each entry
    /// (tombstones included) followed by its lp-count.
    pub fn listpack_items(&self, master: StreamId) -> Vec<Item<'_>> {
        let mut items = vec![Item::Int(self.live as i64), Item::Int(self.deleted as i64)];
        let mut off = 0;
        while off < self.entries_start {
            let (item, len) = decode(&self.buf, off);
            items.push(item);
            off += len;
        }
        items.push(Item::Int(0));
        while off < self.buf.len() {
            let end = self.entry_at(master, off).end;
            let before = items.len();
            while off < end {
                let (item, len) = decode(&self.buf, off);
                items.push(item);
                off += len;
            }
            items.push(Item::Int((items.len() - before) as i64));
        }
        items
    }

    /// Rebuilds a node from the elements of a Redis stream listpack whose
    /// master id is `master`, checking its layout as Redis's deep
    /// `streamValidateListpackIntegrity` does, and that its ids rise from
    /// `master` on. Returns the node and its last id (tombstones included).
    pub fn from_listpack_items(
        master: StreamId,
        items: &[Item<'_>],
    ) -> Result<(Node, StreamId), &'static str> {
        const BAD: &str = "Stream listpack integrity check failed.";
        let mut at = 0;
        let int = |at: &mut usize| match items.get(*at) {
            Some(Item::Int(n)) => {
                *at += 1;
                Ok(*n)
            }
            _ => Err(BAD),
        };
        let live = int(&mut at)?;
        let deleted = int(&mut at)?;
        let fields = count_of(int(&mut at)?, items.len() - at)?;
        let mut node = Node::with_fields(fields, items[at..at + fields].iter().copied());
        at += fields;
        if int(&mut at)? != 0 {
            return Err(BAD);
        }
        let mut last: Option<StreamId> = None;
        while at < items.len() {
            let flags = int(&mut at)?;
            if flags & !i64::from(DELETED | SAME_FIELDS) != 0 {
                return Err(BAD);
            }
            let deltas = (int(&mut at)?, int(&mut at)?);
            let id = StreamId::new(
                master.ms.wrapping_add(deltas.0 as u64),
                master.seq.wrapping_add(deltas.1 as u64),
            );
            if id < master || last.is_some_and(|l| id <= l) {
                return Err("Stream entry ids are not in order");
            }
            last = Some(id);
            let (own, body) = if flags & i64::from(SAME_FIELDS) != 0 {
                (None, fields)
            } else {
                let n = count_of(int(&mut at)?, (items.len() - at) / 2)?;
                (Some(n), 2 * n)
            };
            if items.len() - at < body {
                return Err(BAD);
            }
            node.append_items(flags as u8, deltas, own, items[at..at + body].iter().copied());
            at += body;
            if int(&mut at)? != (3 + usize::from(own.is_some()) + body) as i64 {
                return Err(BAD);
            }
        }
        if node.live as i64 != live || node.deleted as i64 != deleted {
            return Err(BAD);
        }
        match last {
            Some(last) if node.live > 0 => Ok((node, last)),
            _ => Err("Empty listpack inside stream"),
        }
    }
}

/// A count read from a listpack: not negative, and not more than the
/// elements there are.
fn count_of(n: i64, elements: usize) -> Result<usize, &'static str> {
    match usize::try_from(n) {
        Ok(n) if n <= elements => Ok(n),
        _ => Err("Stream listpack integrity check failed."),
    }
}

/// Iterator over an entry's (field, value) pairs.
pub struct Pairs<'a> {
    buf: &'a [u8],
    /// Cursor in the master fields, for entries with SAME_FIELDS.
    master: Option<usize>,
    off: usize,
    left: usize,
}

impl<'a> Iterator for Pairs<'a> {
    type Item = (Item<'a>, Item<'a>);

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let field = match &mut self.master {
            Some(m) => {
                let (item, len) = decode(self.buf, *m);
                *m += len;
                item
            }
            None => {
                let (item, len) = decode(self.buf, self.off);
                self.off += len;
                item
            }
        };
        let (value, len) = decode(self.buf, self.off);
        self.off += len;
        Some((field, value))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.left, Some(self.left))
    }
}

impl ExactSizeIterator for Pairs<'_> {}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(node: &Node, pos: &EntryPos) -> Vec<(Vec<u8>, Vec<u8>)> {
        node.pairs(pos).map(|(f, v)| (f.to_vec(), v.to_vec())).collect()
    }

    #[test]
    fn entries_round_trip_with_and_without_master_fields() {
        let master = StreamId::new(1000, 5);
        let mut node = Node::new(&[b"a", b"1", b"b", b"x"]);
        node.append(master, master, &[b"a", b"1", b"b", b"x"], true);
        assert!(node.same_fields(&[b"a", b"9", b"b", b"y"]));
        assert!(!node.same_fields(&[b"a", b"9"]));
        assert!(!node.same_fields(&[b"a", b"9", b"c", b"y"]));
        let second = StreamId::new(1000, 6);
        node.append(master, second, &[b"c", b"-17", b"d", b"long value"], false);
        // A seq below the master's: the delta wraps and decodes back.
        let third = StreamId::new(u64::MAX, 0);
        node.append(master, third, &[b"a", b"2", b"b", b"z"], true);
        let offs = node.offsets(master);
        assert_eq!(offs.len(), 3);
        let e: Vec<EntryPos> = offs.iter().map(|&o| node.entry_at(master, o)).collect();
        assert_eq!([e[0].id, e[1].id, e[2].id], [master, second, third]);
        assert_eq!(
            texts(&node, &e[0]),
            [(b"a".to_vec(), b"1".to_vec()), (b"b".to_vec(), b"x".to_vec())]
        );
        assert_eq!(
            texts(&node, &e[1]),
            [(b"c".to_vec(), b"-17".to_vec()), (b"d".to_vec(), b"long value".to_vec())]
        );
        assert_eq!(texts(&node, &e[2])[1], (b"b".to_vec(), b"z".to_vec()));
        assert_eq!(node.last(), Some(offs[2]));
        node.mark_deleted(offs[1]);
        assert_eq!((node.live, node.deleted), (2, 1));
        assert_eq!(node.entry_at(master, offs[1]).flags & DELETED, DELETED);
        assert_eq!(node.entry_at(master, offs[1]).id, second);
    }

    #[test]
    fn listpack_items_round_trip_and_are_checked() {
        let master = StreamId::new(10, 0);
        let mut node = Node::new(&[b"a", b"1"]);
        node.append(master, master, &[b"a", b"1"], true);
        node.append(master, StreamId::new(10, 1), &[b"b", b"x", b"c", b"y"], false);
        node.append(master, StreamId::new(12, 0), &[b"a", b"2"], true);
        let off = node.offsets(master)[1];
        node.mark_deleted(off);
        let items = node.listpack_items(master);
        // count deleted num-fields "a" 0 | 2 0 0 "1" 4 | 1 0 1 2 "b" "x" "c" "y" 8 | 2 2 0 "2" 4
        assert_eq!(items.len(), 5 + 5 + 9 + 5);
        assert!(matches!(items[..2], [Item::Int(2), Item::Int(1)]));
        assert!(matches!(items[18], Item::Int(8)));
        let (back, last) = Node::from_listpack_items(master, &items).expect("valid");
        assert_eq!(last, StreamId::new(12, 0));
        assert_eq!((back.live, back.deleted, back.lp_bytes()), (2, 1, node.lp_bytes()));
        assert_eq!(format!("{:?}", back.listpack_items(master)), format!("{items:?}"));
        // Wrong counts, a missing terminator, an id below the master (and
        // the entry before it), a bad lp-count, a missing lp-count, only
        // tombstones: all refused.
        let mut bad = items.clone();
        bad[0] = Item::Int(3);
        assert!(Node::from_listpack_items(master, &bad).is_err());
        let mut bad = items.clone();
        bad[4] = Item::Int(1);
        assert!(Node::from_listpack_items(master, &bad).is_err());
        let mut bad = items.clone();
        bad[20] = Item::Int(-1);
        assert!(Node::from_listpack_items(master, &bad).is_err());
        let mut bad = items.clone();
        bad[23] = Item::Int(5);
        assert!(Node::from_listpack_items(master, &bad).is_err());
        let mut bad = items.clone();
        bad.pop();
        assert!(Node::from_listpack_items(master, &bad).is_err());
        let mut one = Node::new(&[b"a", b"1"]);
        one.append(master, master, &[b"a", b"1"], true);
        let first = one.offsets(master)[0];
        one.mark_deleted(first);
        assert!(Node::from_listpack_items(master, &one.listpack_items(master)).is_err());
    }

    #[test]
    fn listpack_size_matches_redis() {
        // XADD s 1-1 f v on an empty stream. Redis's listpack: 7 bytes of
        // header and end; master [1][0][1]["f"][0]; entry [2][0][0]["v"][4].
        // Small integers take 1 byte, 1-byte strings 2, each element has a
        // 1-byte back-length: 7 + (2+2+2+3+2) + (2+2+2+3+2) = 29.
        let id = StreamId::new(1, 1);
        let mut node = Node::new(&[b"f", b"v"]);
        node.append(id, id, &[b"f", b"v"], true);
        assert_eq!(node.lp_bytes(), 29);
        // Its own field names: flags, deltas, num-fields, "g", "w", lp-count.
        node.append(id, StreamId::new(1, 2), &[b"g", b"w"], false);
        assert_eq!(node.lp_bytes(), 29 + 2 + 2 + 2 + 2 + 3 + 3 + 2);
        // A live count past 127 is a 13-bit integer: one byte more.
        let mut n = node.clone();
        n.live = 127;
        let at_127 = n.lp_bytes();
        n.live = 128;
        assert_eq!(n.lp_bytes(), at_127 + 1);
    }
}
