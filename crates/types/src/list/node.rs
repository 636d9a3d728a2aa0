//! One quicklist node: a pack, or the pack LZF-compressed.
//!
//! Redis's `list-compress-depth` keeps that many nodes at each end of a
//! quicklist plain and compresses the others: pushes and pops touch only the
//! ends, and the middle of a long queue is rarely read. As in Redis, a node
//! is compressed only when it is at least 48 bytes and LZF saves at least 8
//! (`MIN_COMPRESS_BYTES`, `MIN_COMPRESS_IMPROVE`). A node LZF cannot shrink
//! is put aside as it is (*stored*), so that it is not tried again until it
//! changes.
//!
//! A compressed node keeps its entry count, so indexing walks past it
//! without decompressing. Reading it through `&self` *opens* it: the pack
//! is decompressed once and kept beside the compressed bytes until the list
//! closes it, so a read costs one decompression and no recompression.
//! Changing a node makes it plain again; the quicklist compresses it after
//! the change.

use super::ListPack;
use crate::lzf;
use std::sync::OnceLock;

const MIN_COMPRESS_BYTES: usize = 48;
const MIN_COMPRESS_IMPROVE: usize = 8;

/// 24 bytes, so that the node deque of a short list costs no more than
/// Redis's nodes.
#[derive(Clone, Debug, Default)]
pub(super) struct Node {
    /// The entries; empty while the node is compressed.
    pack: ListPack,
    /// The compressed form of a compressed node.
    lzf: Option<Box<Compressed>>,
}

#[derive(Clone, Debug)]
struct Compressed {
    /// LZF of the pack's bytes, or the bytes themselves when LZF could not
    /// shrink them (`stored`).
    bytes: Box<[u8]>,
    stored: bool,
    /// The pack's length in bytes and entries.
    raw_len: usize,
    count: usize,
    /// The pack, while a read has the node open.
    open: OnceLock<ListPack>,
}

impl Compressed {
    fn decompress(&self) -> ListPack {
        let raw = match self.stored {
            true => Some(self.bytes.to_vec()),
            false => lzf::decompress(&self.bytes, self.raw_len),
        };
        // The bytes are this module's own compression of a pack, so they
        // always decompress; an empty node (dropped by the next change)
        // is the answer should they ever not.
        debug_assert!(raw.is_some(), "a compressed list node does not decompress");
        raw.map(|raw| ListPack::from_own_bytes(raw, self.count)).unwrap_or_default()
    }
}

impl Node {
    pub fn new(pack: ListPack) -> Node {
        Node { pack, lzf: None }
    }

    /// Entries, known without decompressing.
    pub fn len(&self) -> usize {
        match &self.lzf {
            Some(c) => c.count,
            None => self.pack.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn is_compressed(&self) -> bool {
        self.lzf.is_some()
    }

    /// Heap bytes: the pack, or the compressed bytes and an open pack.
    pub fn heap_size(&self) -> usize {
        match &self.lzf {
            Some(c) => {
                std::mem::size_of::<Compressed>()
                    + c.bytes.len()
                    + c.open.get().map_or(0, ListPack::byte_len)
            }
            None => self.pack.byte_len(),
        }
    }

    /// The entries, opening a compressed node.
    pub fn pack(&self) -> &ListPack {
        match &self.lzf {
            Some(c) => c.open.get_or_init(|| c.decompress()),
            None => &self.pack,
        }
    }

    /// The entries for a change: a compressed node becomes plain.
    pub fn pack_mut(&mut self) -> &mut ListPack {
        self.decompress();
        &mut self.pack
    }

    pub fn into_pack(mut self) -> ListPack {
        self.decompress();
        self.pack
    }

    /// Makes the node plain.
    pub fn decompress(&mut self) {
        if let Some(c) = self.lzf.take() {
            let mut c = *c;
            self.pack = c.open.take().unwrap_or_else(|| c.decompress());
        }
    }

    /// Compresses a plain node (or stores it, when LZF cannot shrink it
    /// enough) and closes a compressed one. Nodes too small to be worth it
    /// stay plain.
    pub fn compress(&mut self) {
        if let Some(c) = &mut self.lzf {
            c.open.take();
            return;
        }
        if self.pack.redis_bytes() < MIN_COMPRESS_BYTES {
            return;
        }
        let raw = self.pack.as_bytes();
        let lzf = lzf::compress(raw, raw.len().saturating_sub(MIN_COMPRESS_IMPROVE));
        let stored = lzf.is_none();
        let bytes = lzf.unwrap_or_else(|| raw.to_vec());
        let pack = std::mem::take(&mut self.pack);
        self.lzf = Some(Box::new(Compressed {
            bytes: bytes.into_boxed_slice(),
            stored,
            raw_len: pack.byte_len(),
            count: pack.len(),
            open: OnceLock::new(),
        }));
    }

    /// Whether the node is as `list-compress-depth` wants it: plain near an
    /// end, compressed (or too small) inside, and closed unless reads may
    /// have opened it.
    #[cfg(test)]
    pub fn settled(&self, inside: bool, may_be_open: bool) -> bool {
        match &self.lzf {
            Some(c) => inside && (may_be_open || c.open.get().is_none()),
            None => !inside || self.pack.redis_bytes() < MIN_COMPRESS_BYTES,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pack::Item;

    fn pack_of(values: &[&[u8]]) -> ListPack {
        let mut p = ListPack::new();
        let items: Vec<Item<'_>> = values.iter().map(|v| Item::from_bytes(v)).collect();
        p.push_back(&items);
        p
    }

    #[test]
    fn compresses_opens_and_changes() {
        let values: Vec<Vec<u8>> =
            (0..50).map(|i| format!("element-{}", i % 5).into_bytes()).collect();
        let refs: Vec<&[u8]> = values.iter().map(|v| v.as_slice()).collect();
        let mut node = Node::new(pack_of(&refs));
        let plain = node.heap_size();
        node.compress();
        assert!(node.is_compressed() && node.heap_size() < plain / 2);
        assert_eq!(node.len(), 50);
        // A read opens it and leaves the compressed bytes as they are.
        assert_eq!(node.pack().get(node.pack().seek(7).unwrap()).to_vec(), b"element-2");
        assert!(node.is_compressed() && !node.settled(true, false));
        node.compress();
        assert!(node.settled(true, false));
        // A change makes it plain.
        node.pack_mut().push_back(&[Item::from_bytes(b"last")]);
        assert!(!node.is_compressed() && node.len() == 51);
        assert_eq!(node.into_pack().len(), 51);
    }

    #[test]
    fn small_nodes_stay_plain_and_incompressible_ones_are_stored() {
        let mut small = Node::new(pack_of(&[b"a", b"b"]));
        small.compress();
        assert!(!small.is_compressed() && small.settled(true, false));
        // Bytes with no repeats: LZF cannot save 8 bytes.
        let noise: Vec<u8> =
            (0..200u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8).collect();
        let mut node = Node::new(pack_of(&[&noise]));
        node.compress();
        assert!(node.is_compressed() && node.settled(true, false));
        assert_eq!(node.pack().get(0).to_vec(), noise);
        assert_eq!(node.into_pack().len(), 1);
        assert_eq!(std::mem::size_of::<Node>(), 24);
    }
}
