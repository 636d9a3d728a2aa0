//! Per-core read copies of hot keys (`hotkeys-replicate-reads yes`).
//!
//! While a key is hot, its owner shares a [`ReplicaSlot`] with every other
//! core. The slot holds the key's last `GET` reply, filled by the owner
//! when it runs a `GET` of the key, and emptied by the owner's write funnel
//! on every change of the key ([`Replicas::invalidate`]) — inside the
//! write's execution, so before the write is acknowledged. Other cores
//! answer `GET` of the key from a full slot without a hop to the owner; an
//! empty slot sends the `GET` to the owner as usual (which fills it again).
//!
//! Consistency: only the owner's thread fills or empties a slot, in the
//! order it runs commands. A copy is therefore always a value the key had,
//! and once a write has been acknowledged no reader anywhere gets a value
//! from before it: a read that starts after the acknowledgement finds the
//! slot emptied or refilled with a newer value. Reads concurrent with a
//! write may see either value, as with any linearizable register.
//!
//! The slot is the one thing shared between threads here: a mutex around a
//! small value, taken briefly by the owner and by readers.

use super::lru::KeyRef;
use bytes::Bytes;
use hashbrown::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// A copy: the `GET` reply (a bulk string, the same in RESP2 and RESP3) and
/// when the key expires.
#[derive(Clone, Debug)]
struct Copy {
    reply: Bytes,
    expire_at: Option<u64>,
}

/// One hot key's copy, shared by its owner and every other core.
#[derive(Debug, Default)]
pub struct ReplicaSlot {
    copy: Mutex<Option<Copy>>,
    /// Reads answered from the copy since the owner last collected them
    /// (they count as accesses of the key, so it stays hot).
    served: AtomicU64,
}

impl ReplicaSlot {
    /// The `GET` reply to send, if the copy is there and not expired.
    pub fn read(&self, now_ms: u64) -> Option<Bytes> {
        let copy = self.copy.lock().ok()?;
        let copy = copy.as_ref().filter(|c| c.expire_at.is_none_or(|at| now_ms < at))?;
        self.served.fetch_add(1, Ordering::Relaxed);
        Some(copy.reply.clone())
    }

    fn set(&self, copy: Option<Copy>) {
        if let Ok(mut slot) = self.copy.lock() {
            *slot = copy;
        }
    }

    /// Empties the copy (the key changed, or is no longer replicated).
    pub fn clear(&self) {
        self.set(None);
    }

    /// Reads served since the last call.
    pub fn take_served(&self) -> u64 {
        self.served.swap(0, Ordering::Relaxed)
    }
}

/// The owner's side: the slots of its replicated keys.
#[derive(Default)]
pub struct Replicas {
    by_key: HashMap<(usize, Bytes), Arc<ReplicaSlot>>,
}

impl Replicas {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Starts replicating `(db, key)`; returns its slot (empty until the
    /// next `GET` of the key on the owner).
    pub fn add(&mut self, db: usize, key: Bytes) -> Arc<ReplicaSlot> {
        self.by_key.entry((db, key)).or_default().clone()
    }

    /// Stops replicating `(db, key)`; its slot is emptied.
    pub fn remove(&mut self, db: usize, key: &[u8]) -> bool {
        match self.by_key.remove(&KeyRef(db, key)) {
            Some(slot) => {
                slot.clear();
                true
            }
            None => false,
        }
    }

    /// Stops replicating everything; returns the keys.
    pub fn remove_all(&mut self) -> Vec<(usize, Bytes)> {
        self.by_key
            .drain()
            .map(|(key, slot)| {
                slot.clear();
                key
            })
            .collect()
    }

    /// The write funnel: `(db, key)` changed.
    #[inline]
    pub fn invalidate(&self, db: usize, key: &[u8]) {
        if let Some(slot) = self.by_key.get(&KeyRef(db, key)) {
            slot.clear();
        }
    }

    /// Database `db` was flushed or swapped.
    pub fn invalidate_db(&self, db: usize) {
        self.by_key.iter().filter(|((d, _), _)| *d == db).for_each(|(_, slot)| slot.clear());
    }

    /// After the owner ran `GET key`: the reply becomes the copy when it is
    /// a value (a miss or an error leaves the slot empty).
    pub fn fill(&self, db: usize, key: &[u8], reply: &[u8], expire_at: Option<u64>) {
        let Some(slot) = self.by_key.get(&KeyRef(db, key)) else { return };
        if reply.first() == Some(&b'$') && !reply.starts_with(b"$-1") {
            slot.set(Some(Copy { reply: Bytes::copy_from_slice(reply), expire_at }));
        }
    }

    /// Reads served from each copy since the last call, for the hot-key
    /// counters.
    pub fn take_served(&self) -> Vec<(usize, Bytes, u64)> {
        self.by_key
            .iter()
            .filter_map(|((db, key), slot)| {
                let n = slot.take_served();
                (n > 0).then(|| (*db, key.clone(), n))
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_are_filled_by_gets_and_emptied_by_changes() {
        let mut r = Replicas::default();
        let slot = r.add(0, Bytes::from_static(b"k"));
        assert_eq!(slot.read(1), None);
        r.fill(0, b"k", b"$1\r\na\r\n", None);
        r.fill(0, b"other", b"$1\r\nb\r\n", None);
        assert_eq!(slot.read(1).as_deref(), Some(&b"$1\r\na\r\n"[..]));
        r.invalidate(1, b"k");
        assert!(slot.read(1).is_some(), "another database's key");
        r.invalidate(0, b"k");
        assert_eq!(slot.read(1), None);
        r.fill(0, b"k", b"$-1\r\n", None);
        assert_eq!(slot.read(1), None);
        r.fill(0, b"k", b"-ERR x\r\n", None);
        assert_eq!(slot.read(1), None);
        r.fill(0, b"k", b"$1\r\nc\r\n", Some(100));
        assert!(slot.read(99).is_some());
        assert_eq!(slot.read(100), None, "expired copies are not served");
        assert_eq!(r.take_served(), vec![(0, Bytes::from_static(b"k"), 3)]);
        assert!(r.take_served().is_empty());
        r.invalidate_db(0);
        assert_eq!(slot.read(1), None);
        r.fill(0, b"k", b"$1\r\nc\r\n", None);
        assert!(r.remove(0, b"k"));
        assert_eq!(slot.read(1), None, "a slot no longer replicated is empty");
        assert!(r.is_empty());
    }
}
