//! A point-in-time snapshot of a shard taken while the shard keeps serving
//! commands: no fork and no stop (Dragonfly's scheme, on ringdb's one hash
//! table per slot).
//!
//! Starting one ([`Keyspace::begin_snapshot`]) costs a few allocations:
//! every database that holds keys gets a [`DbSnapshot`] recording which of
//! its slot tables are serialised already (none yet). From then on:
//!
//! - a background task serialises the tables in order, a bounded step at a
//!   time ([`Keyspace::snapshot_step`]), and hands the bytes to the file
//!   writer, yielding between steps so that commands run;
//! - before anything changes a table not serialised yet, the keyspace
//!   serialises that whole table first (its pre-image): every mutating
//!   accessor of [`Db`](crate::keyspace::Db) calls [`DbSnapshot::preserve`]
//!   (one branch when no snapshot runs). So the bytes hold each table exactly
//!   as it was at the start, while memory grows only by the serialised bytes
//!   not yet written, never by a copy of the data;
//! - FLUSHDB/FLUSHALL hand the unserialised tables to the snapshot
//!   ([`DbSnapshot::detach`]) instead of dropping them, and SWAPDB moves a
//!   database together with its `DbSnapshot`, which keeps the database
//!   number it had at the start.
//!
//! Keys already expired at the start are left out (the start time is the
//! snapshot's "now" for every table, whenever it is written). Nothing here
//! does I/O: the server streams the steps' bytes to the file.

use super::rdb::encode::{Access, Encoder};
use crate::keyspace::{Keyspace, SlotTable};

/// How a snapshot writes keys, fixed when it starts.
#[derive(Clone, Copy, Debug)]
pub struct SnapshotParams {
    /// The snapshot's "now": keys expired by then are left out, and LFU
    /// counters decay to then.
    pub now_ms: u64,
    pub format: Format,
    pub encoder: Encoder,
    /// `Some(lfu-decay-time)` under an LFU policy: each key carries its
    /// access frequency, as Redis saves it.
    pub lfu_decay_time: Option<u32>,
}

/// What a snapshot's bytes are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// RDB key records (an RDB file, or a log's RDB preamble).
    #[default]
    Rdb,
    /// Append-only log records (a log rewritten with
    /// `aof-use-rdb-preamble no`): `RESTORE` per key.
    Log,
}

/// One database's progress in a running snapshot.
pub struct DbSnapshot {
    /// The database's number at the start (SWAPDB moves it, not this).
    db: usize,
    params: SnapshotParams,
    /// One bit per table index: serialised already.
    done: Vec<u64>,
    /// Tables not serialised yet (in the database; `detached` not counted).
    left: usize,
    /// Where the background cursor looks for the next table.
    next: usize,
    /// Tables flushed out of the database before they were serialised.
    detached: Vec<SlotTable>,
    /// Serialised keys not yet handed to the writer, and how many.
    pending: Vec<u8>,
    pending_keys: usize,
}

impl DbSnapshot {
    pub fn new(db: usize, params: SnapshotParams, tables: usize) -> Self {
        let mut done = vec![0u64; tables.div_ceil(64)];
        if !tables.is_multiple_of(64) {
            // Bits past the last table count as done.
            if let Some(last) = done.last_mut() {
                *last = !0 << (tables % 64);
            }
        }
        DbSnapshot {
            db,
            params,
            done,
            left: tables,
            next: 0,
            detached: Vec::new(),
            pending: Vec::new(),
            pending_keys: 0,
        }
    }

    fn is_done(&self, i: usize) -> bool {
        self.done.get(i / 64).is_none_or(|w| w & (1 << (i % 64)) != 0)
    }

    fn mark_done(&mut self, i: usize) {
        if let Some(w) = self.done.get_mut(i / 64) {
            *w |= 1 << (i % 64);
            self.left -= 1;
        }
    }

    /// Called before table `i` of `tables` changes: serialises it first if
    /// the snapshot has not got it yet.
    #[inline]
    pub fn preserve(&mut self, i: usize, tables: &[SlotTable]) {
        if !self.is_done(i) {
            self.save_table(i, tables);
        }
    }

    #[cold]
    #[inline(never)]
    fn save_table(&mut self, i: usize, tables: &[SlotTable]) {
        if let Some(table) = tables.get(i) {
            self.serialize(table);
        }
        self.mark_done(i);
    }

    fn serialize(&mut self, table: &SlotTable) {
        let SnapshotParams { now_ms, format, encoder, lfu_decay_time } = self.params;
        for entry in table.iter().filter(|e| !e.is_expired(now_ms)) {
            self.pending_keys += 1;
            if format == Format::Log {
                super::aof::key_record(&mut self.pending, entry.key(), Some(entry), now_ms);
                continue;
            }
            let access = match lfu_decay_time {
                Some(decay) => Access::Freq(
                    crate::shard::lfu_decayed(entry.access, now_ms, decay).min(255) as u8,
                ),
                None => Access::None,
            };
            encoder.entry(&mut self.pending, entry, access);
        }
    }

    /// The database is being emptied: the tables not serialised yet are
    /// kept for the snapshot, the others dropped; everything the database
    /// holds from now on is newer than the snapshot.
    pub fn detach(&mut self, tables: Vec<SlotTable>) {
        for (i, table) in tables.into_iter().enumerate() {
            if !self.is_done(i) && !table.is_empty() {
                self.detached.push(table);
            }
        }
        self.done.fill(u64::MAX);
        self.left = 0;
    }

    /// Serialises tables (detached ones first) until `budget` bytes are
    /// pending or none is left. Returns whether the database is done.
    pub fn step(&mut self, tables: &[SlotTable], budget: usize) -> bool {
        while self.pending.len() < budget {
            if let Some(table) = self.detached.pop() {
                self.serialize(&table);
                continue;
            }
            if self.left == 0 {
                break;
            }
            while self.is_done(self.next) {
                self.next += 1;
            }
            let i = self.next;
            self.save_table(i, tables);
        }
        self.finished()
    }

    fn finished(&self) -> bool {
        self.left == 0 && self.detached.is_empty()
    }
}

/// Serialised keys of one database.
#[derive(Debug, Default)]
pub struct Chunk {
    /// The database's number at the snapshot's start.
    pub db: usize,
    pub bytes: Vec<u8>,
    pub keys: usize,
}

/// What one background step of a shard's snapshot produced.
#[derive(Debug, Default)]
pub struct Step {
    /// Serialised keys by database number (at the snapshot's start).
    pub chunks: Vec<Chunk>,
    /// The shard's snapshot is complete: `chunks` are its last bytes.
    pub finished: bool,
}

/// A database's size when a snapshot started (`RESIZEDB`'s hint; keys
/// that had expired but were not deleted yet are counted).
#[derive(Clone, Copy, Debug, Default)]
pub struct DbCount {
    pub keys: usize,
    pub volatile: usize,
}

impl Keyspace {
    /// Starts a snapshot of this keyspace as it is now. The caller makes
    /// sure no other snapshot of it runs (a running one is replaced).
    /// Returns every database's size.
    pub fn begin_snapshot(&mut self, params: SnapshotParams) -> Vec<DbCount> {
        let mut counts = Vec::with_capacity(self.db_count());
        for i in 0..self.db_count() {
            let db = self.db_mut(i);
            counts.push(DbCount { keys: db.len(), volatile: db.volatile() });
            let snapshot =
                (!db.is_empty()).then(|| Box::new(DbSnapshot::new(i, params, db.tables().len())));
            db.set_snapshot(snapshot);
        }
        counts
    }

    /// Whether a snapshot of this keyspace is running.
    pub fn snapshot_running(&self) -> bool {
        self.iter().any(|db| db.snapshot().is_some())
    }

    /// One step of the running snapshot: serialises about `budget` bytes
    /// more and takes every database's pending bytes (pre-images included).
    /// A finished database's snapshot is dropped, so its writes are free
    /// again.
    pub fn snapshot_step(&mut self, budget: usize) -> Step {
        let mut step = Step { finished: true, ..Step::default() };
        let mut budget = budget;
        for i in 0..self.db_count() {
            let db = self.db_mut(i);
            let Some((snapshot, tables)) = db.snapshot_parts() else { continue };
            let done = snapshot.step(tables, budget);
            let bytes = std::mem::take(&mut snapshot.pending);
            let keys = std::mem::take(&mut snapshot.pending_keys);
            budget = budget.saturating_sub(bytes.len());
            if !bytes.is_empty() {
                step.chunks.push(Chunk { db: snapshot.db, bytes, keys });
            }
            if done {
                db.set_snapshot(None);
            } else {
                step.finished = false;
            }
        }
        step
    }

    /// Drops the running snapshot (its file could not be written).
    pub fn abort_snapshot(&mut self) {
        for i in 0..self.db_count() {
            self.db_mut(i).set_snapshot(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Entry, StrValue, Value};
    use crate::persist::rdb::decode::LoadLimits;
    use crate::persist::snapshot::{assemble, load, DbPart, ShardPart};
    use crate::shard::{ShardSettings, ShardState};

    const NOW: u64 = 1_000_000;

    fn params() -> SnapshotParams {
        SnapshotParams {
            now_ms: NOW,
            format: Format::Rdb,
            encoder: Encoder::default(),
            lfu_decay_time: None,
        }
    }

    fn entry(key: &str, value: &str) -> Entry {
        Entry::new(key.as_bytes(), Value::Str(StrValue::from_bytes(value.as_bytes())))
    }

    fn filled(dbs: usize, keys: usize) -> Keyspace {
        let mut ks = Keyspace::for_slots(dbs, 0, 16384);
        for db in 0..dbs {
            for i in 0..keys {
                ks.db_mut(db).insert(entry(&format!("k{i}"), &format!("old{db}:{i}")));
            }
        }
        ks
    }

    /// Runs the snapshot to its end in steps of `budget` bytes, calling
    /// `between` after each step, and returns the bytes by database.
    fn run(ks: &mut Keyspace, budget: usize, mut between: impl FnMut(&mut Keyspace)) -> ShardPart {
        let mut part = ShardPart::default();
        part.dbs.resize_with(ks.db_count(), DbPart::default);
        loop {
            let step = ks.snapshot_step(budget);
            for chunk in step.chunks {
                part.dbs[chunk.db].bytes.extend_from_slice(&chunk.bytes);
            }
            if step.finished {
                break;
            }
            between(ks);
        }
        for db in &mut part.dbs {
            db.keys = usize::from(!db.bytes.is_empty());
        }
        part
    }

    /// The keys (and string values) a snapshot's bytes load back as.
    fn loaded(part: ShardPart, dbs: usize) -> Keyspace {
        let file = assemble(&[], &[part], Encoder::default(), true);
        let mut state = ShardState::recording(ShardSettings::default());
        let mut back = Keyspace::for_slots(dbs, 0, 16384);
        load(&file, &mut back, &mut state, &LoadLimits::default(), NOW, true).unwrap();
        back
    }

    fn value(ks: &Keyspace, db: usize, key: &str) -> Option<String> {
        ks.db(db).get(key.as_bytes()).map(|e| match &e.value {
            Value::Str(s) => String::from_utf8_lossy(s.as_bytes(&mut [0; 20])).into_owned(),
            _ => unreachable!("only strings here"),
        })
    }

    #[test]
    fn writes_during_a_snapshot_keep_the_pre_image() {
        let mut ks = filled(2, 3000);
        let counts = ks.begin_snapshot(params());
        assert_eq!(counts[0].keys, 3000);
        assert!(ks.snapshot_running());
        let mut round = 0;
        let part = run(&mut ks, 4096, |ks| {
            // Every kind of write, spread over the keyspace, between steps.
            round += 1;
            let db = ks.db_mut(round % 2);
            db.insert(entry(&format!("k{}", round * 7 % 3000), "new"));
            db.remove(format!("k{}", round * 13 % 3000).as_bytes());
            db.insert(entry(&format!("added{round}"), "new"));
            db.set_expire(format!("k{}", round * 17 % 3000).as_bytes(), Some(NOW - 1));
            if let Some(e) = db.get_mut(format!("k{}", round * 19 % 3000).as_bytes()) {
                e.value = Value::Str(StrValue::from_bytes(b"new"));
            }
            db.store(
                format!("k{}", round * 23 % 3000).as_bytes(),
                Value::Str(StrValue::from_bytes(b"new")),
                0,
                |_| None,
            );
        });
        assert!(round > 20, "the snapshot took several steps ({round})");
        assert!(!ks.snapshot_running(), "a finished snapshot is dropped");
        let back = loaded(part, 2);
        for db in 0..2 {
            assert_eq!(back.db(db).len(), 3000);
            for i in 0..3000 {
                assert_eq!(value(&back, db, &format!("k{i}")), Some(format!("old{db}:{i}")));
            }
        }
        assert!(value(&back, 0, "added1").is_none());
    }

    #[test]
    fn flushall_and_swapdb_during_a_snapshot() {
        let mut ks = filled(3, 2000);
        ks.begin_snapshot(params());
        let mut round = 0;
        let part = run(&mut ks, 2048, |ks| {
            round += 1;
            match round {
                2 => ks.swap(0, 2),
                4 => {
                    for db in 0..3 {
                        ks.db_mut(db).clear();
                    }
                    ks.db_mut(0).insert(entry("k1", "after flush"));
                }
                _ => {}
            }
        });
        let back = loaded(part, 3);
        for db in 0..3 {
            assert_eq!(back.db(db).len(), 2000, "db {db}");
            assert_eq!(value(&back, db, "k1"), Some(format!("old{db}:1")));
        }
    }

    #[test]
    fn expired_at_the_start_is_left_out_and_empty_dbs_are_free() {
        let mut ks = filled(1, 100);
        ks.db_mut(0).set_expire(b"k5", Some(NOW));
        ks.db_mut(0).set_expire(b"k6", Some(NOW + 1));
        let mut ks16 = Keyspace::for_slots(16, 0, 16384);
        ks16.db_mut(0).insert(entry("a", "b"));
        ks16.begin_snapshot(params());
        assert!(ks16.db(1).snapshot().is_none(), "no state for empty databases");
        ks.begin_snapshot(params());
        let part = run(&mut ks, 1 << 20, |_| {});
        let back = loaded(part, 1);
        assert_eq!(back.db(0).len(), 99);
        assert!(back.db(0).get(b"k5").is_none());
        assert_eq!(back.db(0).get(b"k6").and_then(|e| e.expire_at()), Some(NOW + 1));
    }

    #[test]
    fn an_aborted_snapshot_leaves_writes_free() {
        let mut ks = filled(1, 100);
        ks.begin_snapshot(params());
        ks.abort_snapshot();
        assert!(!ks.snapshot_running());
        ks.db_mut(0).remove(b"k1");
        assert!(ks.snapshot_step(1 << 20).finished);
    }
}
