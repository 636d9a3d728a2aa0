//! Consumer groups: a group's read position (last-delivered id and its
//! logical read counter), its pending entries list (PEL: every entry
//! delivered and not yet acknowledged, with the consumer that has it, the
//! last delivery time and the number of deliveries), and its consumers, each
//! with its own PEL (the same ids, by owner).
//!
//! Groups and consumers are kept in byte order of their names, the order
//! Redis's radix trees list them in.

use super::id::StreamId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

/// The read counter of a group whose position is not known
/// (`SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_INVALID: i64 = -1;

/// A pending entry (Redis's `streamNACK`).
#[derive(Clone, Debug)]
pub struct Nack {
    /// Unix time of the last delivery, milliseconds.
    pub delivery_time: i64,
    pub delivery_count: u64,
    /// The consumer that has it (shared with the consumers table).
    consumer: Arc<[u8]>,
}

impl Nack {
    pub fn consumer(&self) -> &[u8] {
        &self.consumer
    }
}

/// A consumer of a group.
#[derive(Clone, Debug)]
pub struct Consumer {
    /// Last time the consumer was seen: any command naming it (Redis 7.0's
    /// `seen-time`).
    pub seen_time: i64,
    /// Last time it was given entries (read or claimed); -1 never. Redis 7.2
    /// reports it as `active-time`.
    pub active_time: i64,
    pel: BTreeSet<StreamId>,
}

impl Consumer {
    fn new(now: i64) -> Self {
        Consumer { seen_time: now, active_time: -1, pel: BTreeSet::new() }
    }

    /// Number of entries pending for this consumer.
    pub fn pending_len(&self) -> usize {
        self.pel.len()
    }

    /// Its pending ids in order, from `start` on.
    pub fn pending_from(&self, start: StreamId) -> impl Iterator<Item = StreamId> + '_ {
        self.pel.range(start..).copied()
    }
}

#[derive(Clone, Debug)]
pub struct Group {
    pub last_id: StreamId,
    /// Logical read counter of `last_id`, or [`ENTRIES_READ_INVALID`].
    pub entries_read: i64,
    pel: BTreeMap<StreamId, Nack>,
    consumers: BTreeMap<Arc<[u8]>, Consumer>,
}

impl Group {
    pub fn new(last_id: StreamId, entries_read: i64) -> Self {
        Group { last_id, entries_read, pel: BTreeMap::new(), consumers: BTreeMap::new() }
    }

    /// The logical read counter, when known.
    pub fn entries_read(&self) -> Option<i64> {
        (self.entries_read != ENTRIES_READ_INVALID).then_some(self.entries_read)
    }

    pub fn pending_len(&self) -> usize {
        self.pel.len()
    }

    /// The group's pending entries from `start` on, in id order.
    pub fn pending_from(&self, start: StreamId) -> impl Iterator<Item = (StreamId, &Nack)> {
        self.pel.range(start..).map(|(id, n)| (*id, n))
    }

    /// Smallest and largest pending ids.
    pub fn pending_bounds(&self) -> Option<(StreamId, StreamId)> {
        let first = *self.pel.first_key_value()?.0;
        let last = *self.pel.last_key_value()?.0;
        Some((first, last))
    }

    pub fn nack(&self, id: StreamId) -> Option<&Nack> {
        self.pel.get(&id)
    }

    pub fn consumers_len(&self) -> usize {
        self.consumers.len()
    }

    /// Consumers in name order.
    pub fn consumers(&self) -> impl Iterator<Item = (&[u8], &Consumer)> {
        self.consumers.iter().map(|(name, c)| (&**name, c))
    }

    /// A consumer without touching its seen-time (`SLC_NO_REFRESH`).
    pub fn consumer(&self, name: &[u8]) -> Option<&Consumer> {
        self.consumers.get(name)
    }

    /// Looks a consumer up as a command naming it does (`streamLookupConsumer`
    /// with `SLC_DEFAULT`, creating it if missing): its seen-time becomes
    /// `now`. Returns whether it was created.
    pub fn touch_consumer(&mut self, name: &[u8], now: i64) -> bool {
        match self.consumers.get_mut(name) {
            Some(c) => {
                c.seen_time = now;
                false
            }
            None => {
                self.consumers.insert(Arc::from(name), Consumer::new(now));
                true
            }
        }
    }

    /// Creates a consumer if missing (XGROUP CREATECONSUMER); whether it was.
    pub fn create_consumer(&mut self, name: &[u8], now: i64) -> bool {
        if self.consumers.contains_key(name) {
            return false;
        }
        self.consumers.insert(Arc::from(name), Consumer::new(now));
        true
    }

    /// Loading: adds a consumer with its saved times; false if it exists.
    pub fn restore_consumer(&mut self, name: &[u8], seen_time: i64, active_time: i64) -> bool {
        if !self.create_consumer(name, seen_time) {
            return false;
        }
        self.set_active(name, active_time);
        true
    }

    /// Loading: makes `id` pending for `consumer` (which must exist) with
    /// its saved delivery time and count; false if `id` is pending already
    /// or there is no such consumer.
    pub fn restore_pending(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        delivery_time: i64,
        delivery_count: u64,
    ) -> bool {
        if self.pel.contains_key(&id) {
            return false;
        }
        let Some(name) = self.own(id, consumer) else {
            return false;
        };
        self.pel.insert(id, Nack { delivery_time, delivery_count, consumer: name });
        true
    }

    /// Deletes a consumer and its pending entries (from the group's PEL
    /// too); returns how many it had, or `None` if there was no such
    /// consumer.
    pub fn delete_consumer(&mut self, name: &[u8]) -> Option<usize> {
        let consumer = self.consumers.remove(name)?;
        for id in &consumer.pel {
            self.pel.remove(id);
        }
        Some(consumer.pel.len())
    }

    /// Acknowledges `id`; whether it was pending.
    pub fn ack(&mut self, id: StreamId) -> bool {
        let Some(nack) = self.pel.remove(&id) else {
            return false;
        };
        if let Some(c) = self.consumers.get_mut(&nack.consumer) {
            c.pel.remove(&id);
        }
        true
    }

    /// Records a delivery of `id` to `consumer` (which must exist): a new
    /// pending entry, or an existing one moved to this consumer with its
    /// delivery time `now` and count 1 (an entry re-delivered after XGROUP
    /// SETID moved the group back).
    pub(crate) fn deliver(&mut self, id: StreamId, consumer: &[u8], now: i64) {
        let Some(name) = self.own(id, consumer) else {
            return;
        };
        let nack = Nack { delivery_time: now, delivery_count: 1, consumer: name };
        if let Some(old) = self.pel.insert(id, nack) {
            self.disown(id, &old.consumer, consumer);
        }
    }

    /// Adds `id` to `consumer`'s own PEL; its shared name, or `None` when
    /// there is no such consumer.
    fn own(&mut self, id: StreamId, consumer: &[u8]) -> Option<Arc<[u8]>> {
        let name = self.consumers.get_key_value(consumer)?.0.clone();
        self.consumers.get_mut(consumer)?.pel.insert(id);
        Some(name)
    }

    /// Removes `id` from `previous`'s PEL when ownership moved to `now_owner`.
    fn disown(&mut self, id: StreamId, previous: &[u8], now_owner: &[u8]) {
        if previous != now_owner {
            if let Some(c) = self.consumers.get_mut(previous) {
                c.pel.remove(&id);
            }
        }
    }

    /// A history read of `id` by its owner: delivered again now.
    pub(crate) fn redeliver(&mut self, id: StreamId, now: i64) {
        if let Some(nack) = self.pel.get_mut(&id) {
            nack.delivery_time = now;
            nack.delivery_count = nack.delivery_count.saturating_add(1);
        }
    }

    /// Drops a pending entry whose stream entry no longer exists.
    pub(crate) fn forget(&mut self, id: StreamId) {
        self.ack(id);
    }

    /// Moves pending entry `id` to `consumer` (which must exist) with the
    /// delivery time and count given, as XCLAIM and XAUTOCLAIM do.
    pub(crate) fn claim(
        &mut self,
        id: StreamId,
        consumer: &[u8],
        delivery_time: i64,
        count: Option<u64>,
    ) {
        if !self.pel.contains_key(&id) {
            return;
        }
        let Some(name) = self.own(id, consumer) else {
            return;
        };
        let Some(nack) = self.pel.get_mut(&id) else {
            return;
        };
        let old = std::mem::replace(&mut nack.consumer, name);
        nack.delivery_time = delivery_time;
        if let Some(count) = count {
            nack.delivery_count = count;
        }
        self.disown(id, &old, consumer);
    }

    /// Increments a pending entry's delivery count.
    pub(crate) fn count_delivery(&mut self, id: StreamId) -> Option<u64> {
        let nack = self.pel.get_mut(&id)?;
        nack.delivery_count = nack.delivery_count.saturating_add(1);
        Some(nack.delivery_count)
    }

    pub(crate) fn set_active(&mut self, consumer: &[u8], now: i64) {
        if let Some(c) = self.consumers.get_mut(consumer) {
            c.active_time = now;
        }
    }

    /// Whether the PEL and the consumers' PELs agree (tests).
    #[cfg(test)]
    pub(crate) fn consistent(&self) -> bool {
        let owned: usize = self.consumers.values().map(|c| c.pel.len()).sum();
        owned == self.pel.len()
            && self
                .pel
                .iter()
                .all(|(id, n)| self.consumers.get(&n.consumer).is_some_and(|c| c.pel.contains(id)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(ms: u64) -> StreamId {
        StreamId::new(ms, 0)
    }

    #[test]
    fn deliveries_acks_and_consumers() {
        let mut g = Group::new(StreamId::MIN, 0);
        assert!(g.touch_consumer(b"alice", 10));
        assert!(!g.touch_consumer(b"alice", 20));
        assert_eq!(g.consumer(b"alice").map(|c| c.seen_time), Some(20));
        assert!(g.create_consumer(b"bob", 30));
        assert!(!g.create_consumer(b"bob", 40));
        g.deliver(id(1), b"alice", 50);
        g.deliver(id(2), b"alice", 50);
        assert!(g.consistent());
        // Delivered again to someone else: moved, count back to 1.
        g.redeliver(id(1), 60);
        assert_eq!(g.nack(id(1)).map(|n| n.delivery_count), Some(2));
        g.deliver(id(1), b"bob", 70);
        assert_eq!(g.nack(id(1)).map(|n| (n.consumer(), n.delivery_count)), Some((&b"bob"[..], 1)));
        assert_eq!(g.consumer(b"alice").map(Consumer::pending_len), Some(1));
        assert!(g.consistent());
        assert_eq!(g.pending_bounds(), Some((id(1), id(2))));
        assert!(g.ack(id(2)));
        assert!(!g.ack(id(2)));
        assert_eq!(g.delete_consumer(b"bob"), Some(1));
        assert_eq!(g.delete_consumer(b"bob"), None);
        assert_eq!(g.pending_len(), 0);
        assert!(g.consistent());
        let names: Vec<&[u8]> = g.consumers().map(|(n, _)| n).collect();
        assert_eq!(names, [&b"alice"[..]]);
    }

    #[test]
    fn claims_move_ownership() {
        let mut g = Group::new(StreamId::MIN, ENTRIES_READ_INVALID);
        assert_eq!(g.entries_read(), None);
        g.touch_consumer(b"a", 1);
        g.touch_consumer(b"b", 1);
        g.deliver(id(5), b"a", 1);
        g.claim(id(5), b"b", 100, Some(7));
        let n = g.nack(id(5)).expect("pending");
        assert_eq!((n.consumer(), n.delivery_time, n.delivery_count), (&b"b"[..], 100, 7));
        assert_eq!(g.count_delivery(id(5)), Some(8));
        assert!(g.consistent());
        // A consumer may be named "": still a consumer of its own.
        g.touch_consumer(b"", 1);
        g.claim(id(5), b"", 3, None);
        assert_eq!(g.consumer(b"b").map(Consumer::pending_len), Some(0));
        assert!(g.consistent());
    }
}
