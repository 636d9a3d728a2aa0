//! The write funnel: the one function every change to a key goes through on
//! its shard (Redis's `signalModifiedKey` + `notifyKeyspaceEvent`).
//!
//! Everything that reacts to change hangs off [`Funnel::key_changed`]: the
//! dirty counter, the versions of WATCHed keys, keyspace notifications
//! (queued in the outbox the server publishes from) and, for cross-shard
//! transactions and tests, the event record, the reactive queries whose
//! key changed and client-side caching invalidations
//! ([`crate::tracking`]). Later issues hang blocked-client wake-ups,
//! hot-key counting and the append-only log off it too. A test asserts that
//! every command flagged `write` fires it for each key it changes and that
//! read commands never do.

use crate::blocking::BlockTable;
use crate::query_watch::QueryWatchTable;
use crate::tracking::TrackingTable;
use crate::watch::WatchTable;
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
    /// `m`: a read missed (not a change; never recorded as one).
    KeyMiss,
    /// A change Redis announces with no notification (XACK, XCLAIM, a group
    /// read that moves the group's position): it still counts as a write
    /// (WATCH, cross-shard write-back), but is never published.
    Silent,
}

/// `notify-keyspace-events` flags, as Redis numbers them.
pub mod notify {
    pub const KEYSPACE: u32 = 1 << 0;
    pub const KEYEVENT: u32 = 1 << 1;
    pub const GENERIC: u32 = 1 << 2;
    pub const STRING: u32 = 1 << 3;
    pub const LIST: u32 = 1 << 4;
    pub const SET: u32 = 1 << 5;
    pub const HASH: u32 = 1 << 6;
    pub const ZSET: u32 = 1 << 7;
    pub const EXPIRED: u32 = 1 << 8;
    pub const EVICTED: u32 = 1 << 9;
    pub const STREAM: u32 = 1 << 10;
    pub const KEY_MISS: u32 = 1 << 11;
    pub const MODULE: u32 = 1 << 12;
    pub const NEW: u32 = 1 << 13;
    /// `A`: every class but key-miss and new.
    pub const ALL: u32 =
        GENERIC | STRING | LIST | SET | HASH | ZSET | EXPIRED | EVICTED | STREAM | MODULE;

    const LETTERS: &[(u8, u32)] = &[
        (b'g', GENERIC),
        (b'$', STRING),
        (b'l', LIST),
        (b's', SET),
        (b'h', HASH),
        (b'z', ZSET),
        (b'x', EXPIRED),
        (b'e', EVICTED),
        (b't', STREAM),
        (b'd', MODULE),
        (b'n', NEW),
    ];

    /// Redis's `keyspaceEventsStringToFlags`; `None` for an unknown letter.
    pub fn parse(classes: &str) -> Option<u32> {
        let mut flags = 0;
        for c in classes.bytes() {
            flags |= match c {
                b'A' => ALL,
                b'K' => KEYSPACE,
                b'E' => KEYEVENT,
                b'm' => KEY_MISS,
                other => LETTERS.iter().find(|(l, _)| *l == other)?.1,
            };
        }
        Some(flags)
    }

    /// Redis's `keyspaceEventsFlagsToString`.
    pub fn to_string(flags: u32) -> String {
        let mut out = String::new();
        if flags & ALL == ALL {
            out.push('A');
            if flags & NEW != 0 {
                out.push('n');
            }
        } else {
            for (letter, flag) in LETTERS {
                if flags & flag != 0 {
                    out.push(*letter as char);
                }
            }
        }
        for (letter, flag) in [('K', KEYSPACE), ('E', KEYEVENT), ('m', KEY_MISS)] {
            if flags & flag != 0 {
                out.push(letter);
            }
        }
        out
    }
}

impl NotifyClass {
    /// The `notify-keyspace-events` flag of this class.
    pub fn flag(self) -> u32 {
        match self {
            NotifyClass::Generic => notify::GENERIC,
            NotifyClass::String => notify::STRING,
            NotifyClass::List => notify::LIST,
            NotifyClass::Hash => notify::HASH,
            NotifyClass::Set => notify::SET,
            NotifyClass::ZSet => notify::ZSET,
            NotifyClass::Stream => notify::STREAM,
            NotifyClass::Expired => notify::EXPIRED,
            NotifyClass::Evicted => notify::EVICTED,
            NotifyClass::New => notify::NEW,
            NotifyClass::KeyMiss => notify::KEY_MISS,
            NotifyClass::Module => notify::MODULE,
            NotifyClass::Silent => 0,
        }
    }
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
    /// Keys clients WATCH, with their versions.
    pub watches: WatchTable,
    /// Reactive queries (`GET.WATCH key`) reading keys of this shard.
    pub queries: QueryWatchTable,
    /// Clients blocked (BLPOP, XREAD BLOCK, …) on keys of this shard.
    pub blocked: BlockTable,
    /// `notify-keyspace-events` flags (0: notifications off).
    pub notify_flags: u32,
    /// Everything this shard has to tell (keyspace notifications, wakes,
    /// invalidations, …), filled as the turn runs and taken whole when it
    /// ends.
    pub(crate) out: crate::effects::Effects,
    /// Client-side caching: tracked keys, BCAST prefixes, invalidations.
    pub tracking: TrackingTable,
    /// The append-only log's pending changes (`None`: `appendonly no`).
    pub log: Option<crate::persist::aof::LogState>,
    /// Per-core read copies of this shard's hot keys: a change empties the
    /// key's copy before the write is acknowledged.
    pub replicas: crate::hotkeys::replica::Replicas,
}

impl Funnel {
    /// A funnel that records every event.
    pub fn recording() -> Self {
        Funnel { record: Some(Vec::new()), ..Funnel::default() }
    }

    /// `key` in database `db` changed.
    pub fn key_changed(&mut self, db: usize, key: &[u8], class: NotifyClass, event: &'static str) {
        self.dirty += 1;
        if !self.watches.is_empty() {
            self.watches.touch(db, key);
        }
        if !self.queries.is_empty() {
            self.queries.touch(db, key);
        }
        if !self.blocked.is_empty() {
            self.blocked.touch(db, key);
        }
        if !self.tracking.is_empty() {
            let by_client = !matches!(class, NotifyClass::Expired | NotifyClass::Evicted);
            self.tracking.key_changed(key, by_client, &mut self.out);
        }
        if !self.replicas.is_empty() {
            self.replicas.invalidate(db, key);
        }
        self.notify(db, key, class, event);
        if let Some(log) = &mut self.log {
            log.events.push(crate::persist::aof::LogEvent::Key(db, Bytes::copy_from_slice(key)));
        }
        if let Some(record) = &mut self.record {
            record.push(KeyEvent { db, key: Bytes::copy_from_slice(key), class, event });
        }
    }

    /// Every key of database `db` for which `affected` says yes changed at
    /// once: FLUSHDB, FLUSHALL, and each side of SWAPDB (Redis's
    /// `signalFlushedDb` / `touchAllWatchedKeysInDb`). Whole-database
    /// reactions hang off here rather than off one event per key.
    pub fn flushed(&mut self, db: usize, affected: impl Fn(&[u8]) -> bool) {
        self.dirty += 1;
        self.replaced(db, affected);
        if let Some(log) = &mut self.log {
            log.events.push(crate::persist::aof::LogEvent::WholeDb(db));
        }
    }

    /// Database `db` is about to be replaced by what a file holds (DEBUG
    /// RELOAD, DEBUG LOADAOF: Redis's `emptyData`): everyone who reacts to
    /// its keys hears it as a flush, but the log does not (the file is the
    /// log, or what the log will be rewritten from).
    pub fn replaced(&mut self, db: usize, affected: impl Fn(&[u8]) -> bool) {
        if !self.tracking.is_empty() {
            self.tracking.keys_changed_where(&affected, &mut self.out);
        }
        if !self.watches.is_empty() {
            self.watches.touch_db(db, &affected);
        }
        if !self.queries.is_empty() {
            self.queries.touch_db(db, &affected);
        }
        if !self.blocked.is_empty() {
            self.blocked.touch_db(db, &affected);
        }
        if !self.replicas.is_empty() {
            self.replicas.invalidate_db(db);
        }
    }

    /// Queues a keyspace notification if its class is enabled. Read misses
    /// (`keymiss`) come here directly: they change nothing.
    pub fn notify(&mut self, db: usize, key: &[u8], class: NotifyClass, event: &'static str) {
        if self.notify_flags & class.flag() != 0
            && self.notify_flags & (notify::KEYSPACE | notify::KEYEVENT) != 0
        {
            self.out.events.push(KeyEvent { db, key: Bytes::copy_from_slice(key), class, event });
        }
    }

    /// Brings the tracked keys under `tracking-table-max-keys` (see
    /// [`TrackingTable::limit_used_slots`]), queueing their invalidations.
    pub fn limit_tracked(&mut self) {
        self.tracking.limit_used_slots(&mut self.out);
    }

    /// Takes the recorded events (empty when not recording).
    pub fn take_events(&mut self) -> Vec<KeyEvent> {
        self.record.as_mut().map(std::mem::take).unwrap_or_default()
    }

    pub fn is_recording(&self) -> bool {
        self.record.is_some()
    }
}
