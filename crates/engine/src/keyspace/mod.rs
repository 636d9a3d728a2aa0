//! A shard's keyspace: its databases, each split into one small hash table per
//! hash slot the shard owns.
//!
//! Why one table per slot (see ARCHITECTURE.md): a resize only ever moves one
//! slot's keys, so the keyspace grows without a whole-table rehash pause, and
//! SCAN's cursor is simply (slot, hash position inside the slot), which stays
//! valid whatever the tables do in between. Cluster commands that work per
//! slot (COUNTKEYSINSLOT, GETKEYSINSLOT, migration) come for free later.
//!
//! A table bucket is a pointer (8 bytes) to the entry's one block, which
//! holds the value, the key and the expiry ([`entry`]). With hashbrown's load
//! factor that is far less memory than storing entries in the buckets.
//!
//! Nothing here knows about expiry policy, notifications or commands: this is
//! the storage, and [`crate::command::KeyspaceView`] is how commands reach it.

mod entry;
mod value;

pub use entry::{Entry, EntryHead};
pub use value::{typed, StrValue, Typed, Value, BLOOM_TYPE_NAME, EMBSTR_MAX, SHARED_MIN};

use crate::persist::live::DbSnapshot;
use hashbrown::HashTable;
use ringdb_types::slot::key_slot;
use std::sync::atomic::{AtomicU64, Ordering};

/// Seed for the keyspace hash, set once at start-up from the OS's randomness
/// so that clients cannot choose keys that collide.
static HASH_SEED: AtomicU64 = AtomicU64::new(0x5eed_0fa1_1c0d_e5ed);

pub fn set_hash_seed(seed: u64) {
    HASH_SEED.store(seed, Ordering::Relaxed);
}

/// Keys a prefetch covers: the first of a longer pipeline (more would be
/// evicted again before their turn comes).
pub const PREFETCH_MAX: usize = 32;

/// Asks the CPU to start loading the cache line of `at` (a hint: no effect
/// on results, none at all off x86-64).
#[inline(always)]
pub(crate) fn prefetch_line<T>(at: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults and reads nothing into the program;
    // SSE is part of every x86-64 CPU.
    unsafe {
        std::arch::x86_64::_mm_prefetch(at as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = at;
}

/// The hash a key is stored under. Its top 32 bits are also the key's SCAN
/// position inside its slot.
#[inline]
pub fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64_with_seed(key, HASH_SEED.load(Ordering::Relaxed))
}

/// The keys of one hash slot.
#[derive(Default)]
pub struct SlotTable {
    table: HashTable<Entry>,
    /// How many of these keys have a TTL (the active expiry cycle skips
    /// slots with none).
    volatile: u32,
}

impl SlotTable {
    pub fn len(&self) -> usize {
        self.table.len()
    }

    pub fn is_empty(&self) -> bool {
        self.table.is_empty()
    }

    pub fn volatile(&self) -> u32 {
        self.volatile
    }

    pub fn iter(&self) -> impl Iterator<Item = &Entry> {
        self.table.iter()
    }

    fn find(&self, hash: u64, key: &[u8]) -> Option<&Entry> {
        self.table.find(hash, |e| e.key() == key)
    }

    fn find_mut(&mut self, hash: u64, key: &[u8]) -> Option<&mut Entry> {
        self.table.find_mut(hash, |e| e.key() == key)
    }

    /// Removes every entry `drop_if` selects, returning them (the handles
    /// the table held: no copy).
    fn drain_where(&mut self, mut drop_if: impl FnMut(&Entry) -> bool) -> Vec<Entry> {
        let out: Vec<Entry> = self.table.extract_if(|e| drop_if(e)).collect();
        self.volatile -= out.iter().filter(|e| e.expire_at().is_some()).count() as u32;
        if !out.is_empty() {
            self.shrink_after_removal();
        }
        out
    }

    /// Gives memory back after keys left: an emptied slot keeps no buckets
    /// (keys spread over thousands of slots, so a table per slot that once
    /// held a key would add up to more than eviction could ever free), and a
    /// big table an eighth full halves its size.
    fn shrink_after_removal(&mut self) {
        let table = &mut self.table;
        if table.is_empty() {
            if table.capacity() > 0 {
                *table = HashTable::new();
            }
        } else if table.capacity() > 64 && table.len() * 8 < table.capacity() {
            table.shrink_to(table.len() * 2, |e| key_hash(e.key()));
        }
    }
}

/// How a slot number maps to a table inside a [`Db`].
#[derive(Clone)]
enum SlotIndex {
    /// The shard owns slots `first..first + count`.
    Range { first: u16, count: u16 },
    /// Any slots, allocated as they are used (the scratch keyspace of a
    /// cross-shard transaction holds a few keys from anywhere).
    Sparse(hashbrown::HashMap<u16, usize>),
}

/// One logical database (SELECT n) of one shard.
///
/// Every accessor that can change a table first calls [`Db::preserve`]:
/// while a snapshot runs, a table is serialised before its first change
/// (see [`crate::persist::live`]).
pub struct Db {
    index: SlotIndex,
    /// Empty until the first key arrives, so 16 empty databases cost nothing;
    /// once made, a flush keeps the (empty) tables: an emptied database
    /// does not jump by a whole slot index at its next key (Redis's suite
    /// measures `maxmemory` headroom from an emptied database).
    tables: Vec<SlotTable>,
    len: usize,
    volatile: usize,
    /// The running snapshot's progress in this database, if one runs.
    snapshot: Option<Box<DbSnapshot>>,
}

/// Where in the tables a key lives.
#[derive(Clone, Copy, Debug)]
pub struct KeyPos {
    pub slot: u16,
    pub hash: u64,
}

impl KeyPos {
    pub fn of(key: &[u8]) -> Self {
        KeyPos { slot: key_slot(key), hash: key_hash(key) }
    }
}

impl Db {
    fn new(index: SlotIndex) -> Self {
        Db { index, tables: Vec::new(), len: 0, volatile: 0, snapshot: None }
    }

    /// Table `i` is about to change: a running snapshot gets its pre-image
    /// first. One branch when no snapshot runs.
    #[inline]
    fn preserve(&mut self, i: usize) {
        if let Some(snapshot) = &mut self.snapshot {
            snapshot.preserve(i, &self.tables);
        }
    }

    pub(crate) fn tables(&self) -> &[SlotTable] {
        &self.tables
    }

    pub fn snapshot(&self) -> Option<&DbSnapshot> {
        self.snapshot.as_deref()
    }

    pub(crate) fn set_snapshot(&mut self, snapshot: Option<Box<DbSnapshot>>) {
        self.snapshot = snapshot;
    }

    /// The running snapshot and the tables it reads.
    pub(crate) fn snapshot_parts(&mut self) -> Option<(&mut DbSnapshot, &[SlotTable])> {
        Some((self.snapshot.as_deref_mut()?, &self.tables))
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Keys with a TTL.
    pub fn volatile(&self) -> usize {
        self.volatile
    }

    /// Bytes the database spends on holding its keys, apart from the keys
    /// and values themselves (MEMORY STATS `db.N`): the hash tables' slots
    /// (a pointer and a control byte each) and the boxed entries, and the
    /// per-slot tables that stand in for Redis's slot-to-keys map. TTLs
    /// live in the entries, so there is no expires table.
    pub fn overhead(&self) -> (usize, usize) {
        let slot = std::mem::size_of::<Entry>() + 1;
        let main =
            self.tables.iter().map(|t| t.table.capacity() * slot + t.len() * entry::HEAD).sum();
        let slot_to_keys = self.tables.capacity() * std::mem::size_of::<SlotTable>();
        (main, slot_to_keys)
    }

    fn table_index(&self, slot: u16) -> Option<usize> {
        match &self.index {
            SlotIndex::Range { first, count } => {
                let i = slot.checked_sub(*first)? as usize;
                (i < *count as usize && i < self.tables.len()).then_some(i)
            }
            SlotIndex::Sparse(map) => map.get(&slot).copied(),
        }
    }

    /// The index of the table for `slot`, creating tables as needed.
    fn table_for_insert(&mut self, slot: u16) -> usize {
        let i = match &mut self.index {
            SlotIndex::Range { first, count } => {
                if self.tables.is_empty() {
                    self.tables = empty_tables(*count);
                }
                // The router only sends a shard keys of slots it owns; a key
                // from elsewhere would be a routing bug, so it is kept in the
                // nearest table rather than taking the core down.
                (slot.saturating_sub(*first) as usize).min(self.tables.len() - 1)
            }
            SlotIndex::Sparse(map) => {
                let next = self.tables.len();
                let i = *map.entry(slot).or_insert(next);
                if i == next {
                    self.tables.push(SlotTable::default());
                }
                i
            }
        };
        i
    }

    /// Whether this database belongs to a shard that owns `slot` (a scratch
    /// database owns no slot: it only holds copies).
    pub fn owns_slot(&self, slot: u16) -> bool {
        match &self.index {
            SlotIndex::Range { first, count } => {
                slot.checked_sub(*first).is_some_and(|i| i < *count)
            }
            SlotIndex::Sparse(_) => false,
        }
    }

    /// Up to `n` entries for eviction's sampling (only entries with a TTL
    /// when `volatile`), handed to `visit`: consecutive entries from a
    /// random place of a random slot's table, going on to the next tables
    /// while `n` are not found. Like Redis's `dictGetSomeKeys`, it reads one
    /// region rather than `n` scattered ones (the cache misses of sampling
    /// are most of eviction's cost), and is not uniform over keys, which
    /// sampling does not need.
    pub fn sample(
        &self,
        volatile: bool,
        n: usize,
        rng: &mut impl FnMut() -> u64,
        mut visit: impl FnMut(&Entry),
    ) {
        let live = |t: &SlotTable| if volatile { t.volatile as usize } else { t.len() };
        let wanted = if volatile { self.volatile } else { self.len };
        let tables = self.tables.len();
        if wanted == 0 || tables == 0 {
            return;
        }
        // Mostly-full shards: a few random tables find one at once. A
        // sparse one: the first table with keys from a random start.
        let first = (0..8)
            .map(|_| (rng() % tables as u64) as usize)
            .find(|&i| live(&self.tables[i]) > 0)
            .unwrap_or((rng() % tables as u64) as usize);
        let mut left = n.min(wanted);
        for i in 0..tables {
            let t = &self.tables[(first + i) % tables];
            let here = live(t);
            if here == 0 {
                continue;
            }
            // From a random place of the first table, wrapping around it.
            let skip = if i == 0 { (rng() % here as u64) as usize } else { 0 };
            let entries = t.table.iter().filter(|e| !volatile || e.expire_at().is_some());
            for e in entries.clone().skip(skip).chain(entries.take(skip)).take(left) {
                visit(e);
                left -= 1;
            }
            if left == 0 {
                return;
            }
        }
    }

    /// The table of `slot`, if it holds anything.
    pub fn slot_table(&self, slot: u16) -> Option<&SlotTable> {
        self.table_index(slot).map(|i| &self.tables[i])
    }

    pub(crate) fn slot_table_mut(&mut self, slot: u16) -> Option<&mut SlotTable> {
        let i = self.table_index(slot)?;
        self.preserve(i);
        Some(&mut self.tables[i])
    }

    pub fn get(&self, key: &[u8]) -> Option<&Entry> {
        self.get_at(KeyPos::of(key), key)
    }

    /// Starts loading into the cache what looking `keys` up will read,
    /// before a pipeline of commands runs. A lookup is a chain of three
    /// dependent cache misses (the slot's table, its control bytes, the
    /// entry) that one command at a time pays in full; issued for the whole
    /// batch first, the misses of different keys overlap. In two passes: the
    /// tables, then (their headers arriving meanwhile) the probe, which
    /// touches the control bytes and only prefetches each candidate entry.
    pub fn prefetch<'k>(&self, keys: impl Iterator<Item = &'k [u8]>) {
        let mut found = [(0usize, 0u64); PREFETCH_MAX];
        let mut n = 0;
        for key in keys.take(PREFETCH_MAX) {
            let pos = KeyPos::of(key);
            if let Some(i) = self.table_index(pos.slot) {
                prefetch_line(&self.tables[i]);
                found[n] = (i, pos.hash);
                n += 1;
            }
        }
        for &(i, hash) in &found[..n] {
            self.tables[i].table.find(hash, |e| {
                prefetch_line(&**e);
                false
            });
        }
    }

    pub fn get_at(&self, pos: KeyPos, key: &[u8]) -> Option<&Entry> {
        self.slot_table(pos.slot)?.find(pos.hash, key)
    }

    pub(crate) fn get_mut(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.get_mut_at(KeyPos::of(key), key)
    }

    pub(crate) fn get_mut_at(&mut self, pos: KeyPos, key: &[u8]) -> Option<&mut Entry> {
        self.slot_table_mut(pos.slot)?.find_mut(pos.hash, key)
    }

    /// Inserts `entry`, replacing (and returning) any entry under its key.
    pub(crate) fn insert(&mut self, entry: Entry) -> Option<Entry> {
        self.insert_inner(entry).0
    }

    /// Inserts `entry`, dropping any entry under its key, and returns the
    /// stored entry.
    pub(crate) fn put(&mut self, entry: Entry) -> &mut Entry {
        self.insert_inner(entry).1
    }

    /// Stores `value` under `key` with access field `access` and the expiry
    /// `expire(existing entry)` decides. An existing entry is updated in
    /// place (one probe, no allocation), as overwrites are the common case.
    pub(crate) fn store(
        &mut self,
        key: &[u8],
        value: Value,
        access: u32,
        expire: impl FnOnce(Option<&Entry>) -> Option<u64>,
    ) -> &mut Entry {
        let pos = KeyPos::of(key);
        let i = self.table_for_insert(pos.slot);
        self.preserve(i);
        let table = &mut self.tables[i];
        match table.table.entry(pos.hash, |e| e.key() == key, |e| key_hash(e.key())) {
            hashbrown::hash_table::Entry::Occupied(occupied) => {
                let e = occupied.into_mut();
                let at = expire(Some(e)).unwrap_or(0);
                let (was, now) = (e.expire_at().is_some(), at != 0);
                table.volatile = table.volatile + now as u32 - was as u32;
                self.volatile = self.volatile + now as usize - was as usize;
                e.value = value;
                e.set_expire_at(at);
                e.access = access;
                e
            }
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                let at = expire(None).unwrap_or(0);
                table.volatile += (at != 0) as u32;
                self.volatile += (at != 0) as usize;
                self.len += 1;
                vacant.insert(Entry::make(key, value, at, access)).into_mut()
            }
        }
    }

    /// The entry under `key`, or a new one holding `new()` with access
    /// field `access` (no TTL): one probe either way. Whether it was made.
    pub(crate) fn get_or_insert_with(
        &mut self,
        key: &[u8],
        access: u32,
        new: impl FnOnce() -> Value,
    ) -> (&mut Entry, bool) {
        let pos = KeyPos::of(key);
        let i = self.table_for_insert(pos.slot);
        self.preserve(i);
        let table = &mut self.tables[i];
        match table.table.entry(pos.hash, |e| e.key() == key, |e| key_hash(e.key())) {
            hashbrown::hash_table::Entry::Occupied(occupied) => (occupied.into_mut(), false),
            hashbrown::hash_table::Entry::Vacant(vacant) => {
                self.len += 1;
                (vacant.insert(Entry::make(key, new(), 0, access)).into_mut(), true)
            }
        }
    }

    fn insert_inner(&mut self, entry: Entry) -> (Option<Entry>, &mut Entry) {
        let pos = KeyPos::of(entry.key());
        let volatile = entry.expire_at().is_some() as u32;
        let i = self.table_for_insert(pos.slot);
        self.preserve(i);
        let table = &mut self.tables[i];
        // One probe: replace in place when the key exists.
        let (old, stored) =
            match table.table.entry(pos.hash, |e| e.key() == entry.key(), |e| key_hash(e.key())) {
                hashbrown::hash_table::Entry::Occupied(occupied) => {
                    let slot = occupied.into_mut();
                    let old = std::mem::replace(slot, entry);
                    (Some(old), slot)
                }
                hashbrown::hash_table::Entry::Vacant(vacant) => {
                    (None, vacant.insert(entry).into_mut())
                }
            };
        let old_volatile = old.as_ref().map_or(0, |o| o.expire_at().is_some() as u32);
        table.volatile = table.volatile + volatile - old_volatile;
        self.volatile = self.volatile + volatile as usize - old_volatile as usize;
        if old.is_none() {
            self.len += 1;
        }
        (old, stored)
    }

    pub(crate) fn remove(&mut self, key: &[u8]) -> Option<Entry> {
        let pos = KeyPos::of(key);
        let i = self.table_index(pos.slot)?;
        self.preserve(i);
        let table = &mut self.tables[i];
        let removed = table.table.find_entry(pos.hash, |e| e.key() == key).ok()?.remove().0;
        let volatile = removed.expire_at().is_some() as u32;
        table.volatile -= volatile;
        self.volatile -= volatile as usize;
        self.len -= 1;
        table.shrink_after_removal();
        Some(removed)
    }

    /// Sets (`Some`) or clears (`None`) the expiry of `key`. Returns false when
    /// the key does not exist.
    pub(crate) fn set_expire(&mut self, key: &[u8], at: Option<u64>) -> bool {
        let pos = KeyPos::of(key);
        let Some(i) = self.table_index(pos.slot) else { return false };
        self.preserve(i);
        let table = &mut self.tables[i];
        let Some(entry) = table.find_mut(pos.hash, key) else { return false };
        let was = entry.expire_at().is_some();
        entry.set_expire_at(at.unwrap_or(0));
        let now = at.is_some_and(|at| at != 0);
        match (was, now) {
            (false, true) => {
                table.volatile += 1;
                self.volatile += 1;
            }
            (true, false) => {
                table.volatile -= 1;
                self.volatile -= 1;
            }
            _ => {}
        }
        true
    }

    /// Removes every key whose expiry is at or before `now_ms` in `slot`
    /// (the entries as the table holds them: moved out, not copied).
    pub(crate) fn drain_expired(&mut self, slot: u16, now_ms: u64) -> Vec<Entry> {
        let Some(i) = self.table_index(slot) else { return Vec::new() };
        if self.tables[i].volatile == 0 {
            return Vec::new();
        }
        self.preserve(i);
        let table = &mut self.tables[i];
        let out = table.drain_where(|e| e.is_expired(now_ms));
        self.len -= out.len();
        self.volatile -= out.len();
        out
    }

    /// Slots that have a table, in ascending order, with their tables.
    pub fn slots(&self) -> Box<dyn Iterator<Item = (u16, &SlotTable)> + '_> {
        match &self.index {
            SlotIndex::Range { first, .. } => {
                let first = *first;
                Box::new(self.tables.iter().enumerate().map(move |(i, t)| (first + i as u16, t)))
            }
            SlotIndex::Sparse(map) => {
                let mut slots: Vec<(u16, usize)> = map.iter().map(|(&s, &i)| (s, i)).collect();
                slots.sort_unstable();
                Box::new(slots.into_iter().map(move |(s, i)| (s, &self.tables[i])))
            }
        }
    }

    /// Removes everything (a running snapshot keeps the tables it has not
    /// serialised yet).
    pub(crate) fn clear(&mut self) {
        self.clear_freeing(false);
    }

    /// [`Db::clear`]; `lazy` leaves the freeing to the lazy-free thread
    /// (FLUSHDB ASYNC).
    pub(crate) fn clear_freeing(&mut self, lazy: bool) {
        let fresh = match &self.index {
            SlotIndex::Range { count, .. } if !self.tables.is_empty() => empty_tables(*count),
            _ => Vec::new(),
        };
        let tables = std::mem::replace(&mut self.tables, fresh);
        if let Some(snapshot) = &mut self.snapshot {
            snapshot.detach(tables);
        } else if lazy && self.len > 0 {
            crate::lazyfree::free_later(tables, self.len as u64);
        }
        if let SlotIndex::Sparse(map) = &mut self.index {
            map.clear();
        }
        self.len = 0;
        self.volatile = 0;
    }
}

/// One empty table per slot of a shard's range.
fn empty_tables(count: u16) -> Vec<SlotTable> {
    let mut tables = Vec::new();
    tables.resize_with(count as usize, SlotTable::default);
    tables
}

/// All databases of one shard (or of a transaction's scratch space).
pub struct Keyspace {
    dbs: Vec<Db>,
}

impl Keyspace {
    /// The keyspace of a shard owning `first_slot..first_slot + slot_count`.
    pub fn for_slots(databases: usize, first_slot: u16, slot_count: u16) -> Self {
        let index = SlotIndex::Range { first: first_slot, count: slot_count };
        let mut dbs: Vec<Db> = (0..databases).map(|_| Db::new(index.clone())).collect();
        // Database 0 is nearly always used: its index is there from the
        // start, so the first key does not jump used_memory either.
        if let Some(db) = dbs.first_mut() {
            db.tables = empty_tables(slot_count);
        }
        Keyspace { dbs }
    }

    /// An empty keyspace that accepts keys of any slot: the scratch space in
    /// which a cross-shard command runs on copies of its keys.
    pub fn scratch(databases: usize) -> Self {
        let index = SlotIndex::Sparse(hashbrown::HashMap::new());
        Keyspace { dbs: (0..databases).map(|_| Db::new(index.clone())).collect() }
    }

    /// Fills a keyspace no shard serves yet (a cross-shard command's
    /// scratch copies, a bench's or a test's keys) with (database, entry)
    /// pairs: nothing can watch it, so nothing needs to hear of the keys.
    /// A served keyspace changes only through the funnel
    /// ([`crate::command::KeyspaceView`]); its mutators are not public.
    pub fn filled(mut self, entries: impl IntoIterator<Item = (usize, Entry)>) -> Self {
        for (db, entry) in entries {
            self.dbs[db].insert(entry);
        }
        self
    }

    pub fn db_count(&self) -> usize {
        self.dbs.len()
    }

    /// Whether `key` belongs to this shard (never for a scratch keyspace,
    /// whose keys are copies owned elsewhere).
    pub fn owns_key(&self, key: &[u8]) -> bool {
        self.dbs.first().is_some_and(|db| db.owns_slot(key_slot(key)))
    }

    /// Whether this is the only shard's keyspace (every key belongs here).
    pub fn owns_every_slot(&self) -> bool {
        self.dbs.first().is_some_and(|db| {
            matches!(db.index, SlotIndex::Range { first: 0, count } if count as usize == ringdb_types::slot::SLOTS)
        })
    }

    /// Database `i`. Indexes are validated by SELECT/MOVE/COPY before they
    /// get here; an invalid one falls back to db 0 rather than panicking.
    pub fn db(&self, i: usize) -> &Db {
        self.dbs.get(i).unwrap_or(&self.dbs[0])
    }

    pub(crate) fn db_mut(&mut self, i: usize) -> &mut Db {
        let i = if i < self.dbs.len() { i } else { 0 };
        &mut self.dbs[i]
    }

    pub(crate) fn swap(&mut self, a: usize, b: usize) {
        if a < self.dbs.len() && b < self.dbs.len() {
            self.dbs.swap(a, b);
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Db> {
        self.dbs.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(k: &str, v: &str) -> Entry {
        Entry::new(k.as_bytes(), Value::Str(StrValue::from_bytes(v.as_bytes())))
    }

    #[test]
    fn prefetch_takes_any_keys_and_changes_nothing() {
        // A shard owning half the slots: keys of the other half have no table.
        let mut ks = Keyspace::for_slots(1, 0, 8192);
        let db = ks.db_mut(0);
        let owned: Vec<String> =
            (0..200).map(|i| format!("k{i}")).filter(|k| key_slot(k.as_bytes()) < 8192).collect();
        for k in &owned[..owned.len() / 2] {
            db.insert(entry(k, "v"));
        }
        let mut keys: Vec<&[u8]> = owned.iter().map(|k| k.as_bytes()).collect();
        keys.push(b"");
        keys.extend((0..100).map(|_| b"foo".as_slice())); // slot 12182: not owned
        db.prefetch(keys.iter().copied());
        assert_eq!(db.len(), owned.len() / 2);
        for (i, k) in owned.iter().enumerate() {
            assert_eq!(db.get(k.as_bytes()).is_some(), i < owned.len() / 2);
        }
    }

    #[test]
    fn insert_get_remove_and_counts() {
        let mut ks = Keyspace::for_slots(2, 0, 16384);
        let db = ks.db_mut(0);
        assert!(db.insert(entry("a", "1")).is_none());
        assert!(db.insert(entry("b", "2")).is_none());
        assert!(db.insert(entry("a", "3")).is_some());
        assert_eq!(db.len(), 2);
        assert!(db.set_expire(b"a", Some(100)));
        assert_eq!(db.volatile(), 1);
        // Replacing a volatile entry with a persistent one fixes the count.
        db.insert(entry("a", "4"));
        assert_eq!(db.volatile(), 0);
        db.set_expire(b"b", Some(100));
        assert_eq!(db.drain_expired(key_slot(b"b"), 100).len(), 1);
        assert_eq!(db.len(), 1);
        assert_eq!(db.volatile(), 0);
        assert!(db.remove(b"a").is_some());
        assert!(db.remove(b"a").is_none());
        assert!(db.is_empty());
    }

    #[test]
    fn scratch_accepts_any_slot() {
        let mut ks = Keyspace::scratch(1);
        let db = ks.db_mut(0);
        for i in 0..100 {
            db.insert(entry(&format!("k{i}"), "v"));
        }
        assert_eq!(db.len(), 100);
        assert_eq!(db.slots().map(|(_, t)| t.len()).sum::<usize>(), 100);
        assert!(db.get(b"k42").is_some());
    }

    #[test]
    fn many_keys_grow_per_slot() {
        let mut ks = Keyspace::for_slots(1, 0, 16384);
        let db = ks.db_mut(0);
        for i in 0..50_000 {
            db.insert(entry(&format!("key:{i}"), "v"));
        }
        assert_eq!(db.len(), 50_000);
        for i in (0..50_000).step_by(7) {
            assert!(db.get(format!("key:{i}").as_bytes()).is_some());
        }
    }
}
