//! The write funnel: the one function every change to a key goes through on
//! its shard (Redis's `signalModifiedKey` + `notifyKeyspaceEvent`).
//!
//! Everything that reacts to change hangs off [`Funnel::key_changed`]:
//! today the dirty counter and (for cross-shard transactions and tests) the
//! event record; later issues add optimistic WATCH versions, the reactive
//! watch table, client-side caching invalidation, keyspace notifications,
//! blocked-client wake-ups, hot-key counting and the append-only log. A test
//! asserts that every command flagged `write` fires it for each key it
//! changes and that read commands never do.

use bytes::Bytes;

/// The keyspace-notification class of a change (the letters of
/// `notify-keyspace-events`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NotifyClass {
    /// `g`: DEL, EXPIRE, RENAME, …
    Generic,
    /// `$`
    String,
    /// `l`
    List,
    /// `h`
    Hash,
    /// `s`
    Set,
    /// `z`
    ZSet,
    /// `t`
    Stream,
    /// `x`: a key expired.
    Expired,
    /// `e`: a key was evicted.
    Evicted,
    /// `n`: a key was created.
    New,
    /// `d`: a module type changed (Bloom filters, RedisBloom's type).
    Module,
}

/// One change to one key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyEvent {
    pub db: usize,
    pub key: Bytes,
    pub class: NotifyClass,
    pub event: &'static str,
}

/// A shard's write funnel.
#[derive(Default)]
pub struct Funnel {
    /// Changes since the last snapshot (Redis's `server.dirty`).
    pub dirty: u64,
    /// When set, every event is also recorded here: the scratch keyspace of
    /// a cross-shard transaction replays them on the keys' owners, and tests
    /// inspect them.
    record: Option<Vec<KeyEvent>>,
}

impl Funnel {
    /// A funnel that records every event.
    pub fn recording() -> Self {
        Funnel { dirty: 0, record: Some(Vec::new()) }
    }

    /// `key` in database `db` changed.
    pub fn key_changed(&mut self, db: usize, key: &[u8], class: NotifyClass, event: &'static str) {
        self.dirty += 1;
        if let Some(record) = &mut self.record {
            record.push(KeyEvent { db, key: Bytes::copy_from_slice(key), class, event });
        }
    }

    /// Every key of database `db` (all databases for `None`) may have
    /// changed at once: FLUSHDB, FLUSHALL, and each side of SWAPDB (Redis's
    /// `signalFlushedDb` / `touchAllWatchedKeysInDb`). Whole-database
    /// reactions (failing WATCHes on that database, dropping its reactive
    /// watches) hang off here rather than off one event per key.
    pub fn flushed(&mut self, _db: Option<usize>) {
        self.dirty += 1;
    }

    /// Takes the recorded events (empty when not recording).
    pub fn take_events(&mut self) -> Vec<KeyEvent> {
        self.record.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn is_recording(&self) -> bool {
        self.record.is_some()
    }
}
