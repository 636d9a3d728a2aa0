//! A map with a fixed capacity that forgets its least recently used entry
//! to make room: the per-shard table of keys counted against hot-key rules.
//!
//! Entries live in a slab (a `Vec` with a free list) threaded on a doubly
//! linked list in recency order; a hash map finds a key's slot. Every
//! operation is O(1) and the memory is bounded by the capacity.

use bytes::Bytes;
use hashbrown::{Equivalent, HashMap};

/// A tracked key: its database and name.
pub type TrackedKey = (usize, Bytes);

/// A borrowed `(db, key)`, so that looking a key up costs no copy.
#[derive(Hash)]
pub struct KeyRef<'a>(pub usize, pub &'a [u8]);

impl Equivalent<TrackedKey> for KeyRef<'_> {
    fn equivalent(&self, other: &TrackedKey) -> bool {
        self.0 == other.0 && self.1 == &other.1[..]
    }
}

const NONE: u32 = u32::MAX;

struct Node<V> {
    key: TrackedKey,
    value: V,
    prev: u32,
    next: u32,
}

/// A slot number, valid until its entry is removed.
pub type Slot = u32;

pub struct Lru<V> {
    map: HashMap<TrackedKey, Slot>,
    nodes: Vec<Option<Node<V>>>,
    free: Vec<Slot>,
    /// Most recently used.
    head: u32,
    /// Least recently used: the next to go.
    tail: u32,
    capacity: usize,
}

impl<V> Lru<V> {
    pub fn new(capacity: usize) -> Self {
        Lru {
            map: HashMap::new(),
            nodes: Vec::new(),
            free: Vec::new(),
            head: NONE,
            tail: NONE,
            capacity: capacity.max(1),
        }
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The slot of `(db, key)`, made the most recently used.
    pub fn touch(&mut self, db: usize, key: &[u8]) -> Option<Slot> {
        let slot = *self.map.get(&KeyRef(db, key))?;
        self.unlink(slot);
        self.push_front(slot);
        Some(slot)
    }

    /// Inserts a key that is not in the map as the most recently used;
    /// when the map is full the least recently used entry is removed first
    /// and returned.
    pub fn insert(&mut self, key: TrackedKey, value: V) -> (Slot, Option<(TrackedKey, V)>) {
        let evicted = if self.map.len() >= self.capacity { self.pop_oldest() } else { None };
        let node = Node { key: key.clone(), value, prev: NONE, next: NONE };
        let slot = match self.free.pop() {
            Some(slot) => {
                self.nodes[slot as usize] = Some(node);
                slot
            }
            None => {
                self.nodes.push(Some(node));
                (self.nodes.len() - 1) as Slot
            }
        };
        self.map.insert(key, slot);
        self.push_front(slot);
        (slot, evicted)
    }

    /// Removes an entry by slot.
    pub fn remove(&mut self, slot: Slot) -> Option<(TrackedKey, V)> {
        self.nodes.get(slot as usize)?.as_ref()?;
        self.unlink(slot);
        let node = self.nodes[slot as usize].take()?;
        self.map.remove(&node.key);
        self.free.push(slot);
        Some((node.key, node.value))
    }

    /// The least recently used entry: the next to go.
    pub fn oldest(&self) -> Option<&V> {
        self.get(self.tail).map(|(_, v)| v)
    }

    fn pop_oldest(&mut self) -> Option<(TrackedKey, V)> {
        if self.tail == NONE {
            return None;
        }
        self.remove(self.tail)
    }

    /// Changes the capacity, removing the least recently used entries that
    /// no longer fit; returns them.
    pub fn set_capacity(&mut self, capacity: usize) -> Vec<(TrackedKey, V)> {
        self.capacity = capacity.max(1);
        let mut gone = Vec::new();
        while self.map.len() > self.capacity {
            gone.extend(self.pop_oldest());
        }
        gone
    }

    pub fn get(&self, slot: Slot) -> Option<(&TrackedKey, &V)> {
        self.nodes.get(slot as usize)?.as_ref().map(|n| (&n.key, &n.value))
    }

    pub fn get_mut(&mut self, slot: Slot) -> Option<(&TrackedKey, &mut V)> {
        self.nodes.get_mut(slot as usize)?.as_mut().map(|n| (&n.key, &mut n.value))
    }

    /// Every slot in use.
    pub fn slots(&self) -> Vec<Slot> {
        self.map.values().copied().collect()
    }

    fn node(&mut self, slot: u32) -> &mut Node<V> {
        // Only called with linked slots, which always hold a node.
        self.nodes[slot as usize].as_mut().expect("linked slot holds a node")
    }

    fn unlink(&mut self, slot: u32) {
        let (prev, next) = {
            let n = self.node(slot);
            (n.prev, n.next)
        };
        if prev == NONE {
            self.head = next;
        } else {
            self.node(prev).next = next;
        }
        if next == NONE {
            self.tail = prev;
        } else {
            self.node(next).prev = prev;
        }
    }

    fn push_front(&mut self, slot: u32) {
        let head = self.head;
        {
            let n = self.node(slot);
            n.prev = NONE;
            n.next = head;
        }
        if head == NONE {
            self.tail = slot;
        } else {
            self.node(head).prev = slot;
        }
        self.head = slot;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(s: &str) -> TrackedKey {
        (0, Bytes::copy_from_slice(s.as_bytes()))
    }

    #[test]
    fn the_least_recently_used_goes_first() {
        let mut lru = Lru::new(3);
        for (i, k) in ["a", "b", "c"].iter().enumerate() {
            assert!(lru.insert(key(k), i).1.is_none());
        }
        assert!(lru.touch(0, b"a").is_some());
        assert_eq!(lru.oldest(), Some(&1));
        let (_, evicted) = lru.insert(key("d"), 3);
        assert_eq!(evicted.map(|(k, v)| (k.1, v)), Some((Bytes::from_static(b"b"), 1)));
        assert!(lru.touch(0, b"b").is_none());
        assert!(lru.touch(1, b"a").is_none(), "databases are apart");
        let (_, evicted) = lru.insert(key("e"), 4);
        assert_eq!(evicted.map(|(_, v)| v), Some(2));
        assert_eq!(lru.len(), 3);
    }

    #[test]
    fn removal_reuses_slots_and_shrinking_evicts_the_oldest() {
        let mut lru = Lru::new(10);
        let slots: Vec<Slot> = (0..5).map(|i| lru.insert(key(&i.to_string()), i).0).collect();
        assert_eq!(lru.remove(slots[2]).map(|(_, v)| v), Some(2));
        assert!(lru.remove(slots[2]).is_none());
        let (slot, _) = lru.insert(key("x"), 9);
        assert_eq!(slot, slots[2]);
        lru.touch(0, b"0");
        let gone: Vec<i32> = lru.set_capacity(2).into_iter().map(|(_, v)| v).collect();
        assert_eq!(gone, vec![1, 3, 4]);
        assert_eq!(lru.len(), 2);
        assert!(lru.touch(0, b"0").is_some() && lru.touch(0, b"x").is_some());
    }
}
