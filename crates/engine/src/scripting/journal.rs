//! What a script run on one shard changed, so that the run can be undone.
//!
//! A script that runs on one shard of several may meet a key that lives on
//! another ([`super::call`]). It cannot wait for that shard in the middle
//! of its run: two such scripts could wait for each other. Instead the run
//! is undone, as if it never ran, and the server runs the script again
//! with every shard held. Undoing needs what the run changed: before a
//! command changes a key for the first time in the run, the journal keeps
//! the key's entry as it was (its pre-image), and when the run first
//! changes anything, how far the funnel's outboxes went (keyspace
//! notifications, the append-only log's pending changes, the dirty count).
//! Undoing puts the pre-images back and cuts the outboxes there: no
//! notification, log record or publish of the run leaves the shard.
//!
//! Copying a large value before every change would make the common case
//! (a script that stays on its shard) pay for the rare one, so a value that
//! is not cheap to copy is not saved: the run can then no longer be undone,
//! and a key of another shard met after that fails the command that named
//! it (see [`super::call`]).
//!
//! What an undone run leaves behind, because it cannot observe a state
//! between two commands of any script: a client caching one of its keys
//! (CLIENT TRACKING) may get an invalidation, a reactive query or a
//! blocked client may re-check its key and find it unchanged, and the
//! statistics count the commands it ran.

use crate::command::spec::flags;
use crate::keyspace::{Entry, Keyspace};
use crate::shard::{ShardCommand, ShardState};
use bytes::Bytes;

/// A key's state before the run first changed it.
struct Saved {
    db: usize,
    key: Bytes,
    entry: Option<Entry>,
    /// Its WATCH version, if a client watches it (the change bumped it).
    version: Option<u64>,
}

/// How far the funnel's outboxes went before the run's first change.
struct Marks {
    notifications: usize,
    log: Option<usize>,
    dirty: u64,
}

/// A run's journal.
pub struct Journal {
    /// Off when the run cannot meet a key of another shard (one shard in
    /// the node) or changes only a scratch copy (a gathered run).
    enabled: bool,
    saved: Vec<Saved>,
    marks: Option<Marks>,
    /// A change was made that the journal could not save.
    incomplete: bool,
}

impl Journal {
    pub fn new(enabled: bool) -> Self {
        Journal { enabled, saved: Vec::new(), marks: None, incomplete: false }
    }

    /// Whether everything the run changed so far can be undone.
    pub fn can_undo(&self) -> bool {
        !self.incomplete
    }

    /// Before `cmd` runs: saves the keys it may change. A write may change
    /// every key it names (in every database, for MOVE and COPY … DB); a
    /// read changes a key only by finding it expired (it is deleted then).
    pub fn before(
        &mut self,
        keyspace: &Keyspace,
        state: &ShardState,
        cmd: &ShardCommand,
        now: u64,
    ) {
        if !self.enabled || self.incomplete {
            return;
        }
        let write = cmd.spec.is_write();
        let dbs = if cmd.spec.has(flags::OTHER_DBS) {
            0..keyspace.db_count()
        } else {
            cmd.client.db..cmd.client.db + 1
        };
        let mut keys = Vec::new();
        cmd.spec.for_each_key(&cmd.args, |i| keys.push(i));
        for i in keys {
            let Some(key) = cmd.args.get(i) else { continue };
            for db in dbs.clone() {
                // A read changes nothing where no key has a TTL.
                if !write && keyspace.db(db).volatile() == 0 {
                    continue;
                }
                let entry = keyspace.db(db).get(key);
                let expired = entry.is_some_and(|e| e.is_expired(now));
                if write || expired {
                    self.save(state, db, key, entry);
                }
            }
        }
    }

    fn save(&mut self, state: &ShardState, db: usize, key: &Bytes, entry: Option<&Entry>) {
        if self.saved.iter().any(|s| s.db == db && s.key == *key) {
            return;
        }
        if entry.is_some_and(|e| !e.value.cheap_to_copy()) {
            self.incomplete = true;
            return;
        }
        if self.marks.is_none() {
            let funnel = &state.funnel;
            self.marks = Some(Marks {
                notifications: funnel.out.events.len(),
                log: funnel.log.as_ref().map(|log| log.mark()),
                dirty: funnel.dirty,
            });
        }
        let version = state.funnel.watches.version(db, key);
        let entry = entry.cloned();
        self.saved.push(Saved { db, key: key.clone(), entry, version });
    }

    /// Puts every saved key back as it was and cuts the funnel's outboxes
    /// where the run's first change left them. Only when [`can_undo`].
    ///
    /// [`can_undo`]: Self::can_undo
    pub fn undo(self, keyspace: &mut Keyspace, state: &mut ShardState) {
        debug_assert!(!self.incomplete);
        for saved in self.saved.into_iter().rev() {
            let db = keyspace.db_mut(saved.db);
            db.remove(&saved.key);
            if let Some(entry) = saved.entry {
                db.insert(entry);
            }
            if let Some(version) = saved.version {
                state.funnel.watches.restore(saved.db, &saved.key, version);
            }
        }
        if let Some(marks) = self.marks {
            let funnel = &mut state.funnel;
            funnel.out.events.truncate(marks.notifications);
            if let (Some(log), Some(mark)) = (funnel.log.as_mut(), marks.log) {
                log.truncate(mark);
            }
            funnel.dirty = marks.dirty;
        }
    }
}
