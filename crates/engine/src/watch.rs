//! Optimistic WATCH, the shard half: versions of the keys some client
//! watches.
//!
//! A key gets an entry when a client WATCHes it and loses it when the last
//! watcher lets go (UNWATCH, EXEC, DISCARD, disconnect). The write funnel
//! bumps an entry's version on every change to its key, expiry included, and
//! FLUSHDB/FLUSHALL/SWAPDB bump every watched key they affect. EXEC compares
//! versions while holding the keys' locks, so the check and the transaction
//! are one atomic step, on whichever shard each key lives. Keys nobody
//! watches cost nothing: the funnel checks `is_empty` first.

use bytes::Bytes;
use hashbrown::HashMap;

#[derive(Debug)]
struct Watched {
    version: u64,
    watchers: u32,
}

#[derive(Debug, Default)]
pub struct WatchTable {
    keys: HashMap<(usize, Bytes), Watched>,
    /// Versions come from one counter, so a key unwatched and watched again
    /// never repeats a version an older watcher saw.
    next_version: u64,
}

impl WatchTable {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty()
    }

    /// Registers one more watcher of `key` and returns its current version.
    pub fn watch(&mut self, db: usize, key: &[u8]) -> u64 {
        let next = &mut self.next_version;
        let entry = self.keys.entry((db, Bytes::copy_from_slice(key))).or_insert_with(|| {
            *next += 1;
            Watched { version: *next, watchers: 0 }
        });
        entry.watchers += 1;
        entry.version
    }

    /// One watcher of `key` lets go.
    pub fn unwatch(&mut self, db: usize, key: &[u8]) {
        let k = (db, Bytes::copy_from_slice(key));
        if let Some(entry) = self.keys.get_mut(&k) {
            entry.watchers = entry.watchers.saturating_sub(1);
            if entry.watchers == 0 {
                self.keys.remove(&k);
            }
        }
    }

    /// The version of a watched key (`None` when nobody watches it).
    pub fn version(&self, db: usize, key: &[u8]) -> Option<u64> {
        self.keys.get(&(db, Bytes::copy_from_slice(key))).map(|e| e.version)
    }

    /// `key` changed (the write funnel).
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if let Some(entry) = self.keys.get_mut(&(db, Bytes::copy_from_slice(key))) {
            self.next_version += 1;
            entry.version = self.next_version;
        }
    }

    /// Puts a watched key's version back (an undone script run had bumped
    /// it): its watchers see no change.
    pub fn restore(&mut self, db: usize, key: &[u8], version: u64) {
        if let Some(entry) = self.keys.get_mut(&(db, Bytes::copy_from_slice(key))) {
            entry.version = version;
        }
    }

    /// Every watched key of `db` for which `affected` says yes changed at
    /// once (FLUSHDB, FLUSHALL, SWAPDB: keys that existed before, or exist
    /// after, as Redis's `touchAllWatchedKeysInDb`).
    pub fn touch_db(&mut self, db: usize, affected: impl Fn(&[u8]) -> bool) {
        for ((d, key), entry) in self.keys.iter_mut() {
            if *d == db && affected(key) {
                self.next_version += 1;
                entry.version = self.next_version;
            }
        }
    }

    /// Number of keys watched on this shard (INFO `watching_clients`-style
    /// statistics).
    pub fn len(&self) -> usize {
        self.keys.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_change_on_touch_and_entries_go_with_the_last_watcher() {
        let mut t = WatchTable::default();
        let v1 = t.watch(0, b"k");
        assert_eq!(t.watch(0, b"k"), v1);
        t.touch(0, b"other");
        assert_eq!(t.version(0, b"k"), Some(v1));
        t.touch(0, b"k");
        let v2 = t.version(0, b"k").unwrap();
        assert_ne!(v1, v2);
        t.unwatch(0, b"k");
        assert_eq!(t.version(0, b"k"), Some(v2));
        t.unwatch(0, b"k");
        assert!(t.is_empty());
        // Watched again: a version no earlier watcher could have seen.
        let v3 = t.watch(0, b"k");
        assert!(v3 != v1 && v3 != v2);
        t.touch_db(1, |_| true);
        assert_eq!(t.version(0, b"k"), Some(v3));
        t.touch_db(0, |k| k == b"k");
        assert_ne!(t.version(0, b"k"), Some(v3));
    }
}
