//! What a command handler works with: [`Ctx`] = the keyspace as seen by this
//! command ([`KeyspaceView`]), the reply writer, and the calling client.
//!
//! Every key lookup goes through [`KeyspaceView`], so lazy expiry, hit/miss
//! statistics and LRU/LFU updates happen in one place, as in Redis's
//! `lookupKey*`; every change goes through [`KeyspaceView::changed`], the
//! write funnel.

use crate::funnel::NotifyClass;
use crate::keyspace::{Db, Entry, Keyspace, Value};
use crate::shard::ShardState;
use ringdb_protocol::{ReplyWriter, Resp};

/// The calling client, as far as a shard needs to know it.
#[derive(Clone, Copy, Debug, Default)]
pub struct ClientInfo {
    pub id: u64,
    pub db: usize,
    pub resp: Resp,
    /// CLIENT NO-TOUCH: reads do not update LRU/LFU.
    pub no_touch: bool,
    /// The core the connection lives on (where its pushes go).
    pub home: u16,
    /// CLIENT TRACKING: this command's keys are remembered for the client
    /// if it reads them (default mode, and OPTIN/OPTOUT as CLIENT CACHING
    /// says for this command).
    pub track: bool,
    /// The command runs inside a script (Redis's `CLIENT_SCRIPT`): SORT
    /// then orders a set even when asked not to.
    pub script: bool,
    /// The command is one shard's part of a command split over shards
    /// (MSET, MGET, DEL, …): the slow log records the whole command where
    /// the client is, not each part.
    pub part: bool,
}

/// Everything a handler gets.
pub struct Ctx<'a, 'n> {
    pub ks: KeyspaceView<'a>,
    pub out: ReplyWriter<'a>,
    pub client: ClientInfo,
    /// The other shards of the node, when they are lent to this command (a
    /// script run that holds every shard: see [`crate::lent`]).
    pub lent: Option<&'a mut crate::lent::Lent<'n>>,
}

/// The keyspace as one command sees it: its selected database, a fixed
/// "now" (Redis also freezes the clock for the duration of a command), and
/// the shard state that reacts to lookups and changes.
pub struct KeyspaceView<'a> {
    pub keyspace: &'a mut Keyspace,
    pub state: &'a mut ShardState,
    pub db: usize,
    pub now_ms: u64,
    pub no_touch: bool,
}

impl<'a> KeyspaceView<'a> {
    /// The command found nothing to serve and replies its timeout's null:
    /// the blocking form of it waits (the server reads this, not the
    /// reply).
    pub fn found_nothing(&mut self) {
        self.state.found_nothing = true;
    }

    pub fn current_db(&self) -> &Db {
        self.keyspace.db(self.db)
    }

    /// Deletes `key` if it has expired, firing the funnel. Returns whether it
    /// has expired. Free when the database has no keys with a TTL. While
    /// CLIENT PAUSE freezes keys, a read leaves the expired key in place
    /// (it still reads as missing), as Redis does.
    fn expire_if_needed(&mut self, key: &[u8], for_read: bool) -> bool {
        let db = self.keyspace.db_mut(self.db);
        if db.volatile() == 0 {
            return false;
        }
        let expired = db.get(key).is_some_and(|e| e.is_expired(self.now_ms));
        if expired && for_read && self.state.pause.keys_frozen(self.now_ms) {
            return true;
        }
        if expired {
            crate::expire::delete_expired(self.keyspace, self.state, self.db, key);
        }
        expired
    }

    /// Looks `key` up for reading (Redis's `lookupKeyRead`): expires it if
    /// due, counts a hit or a miss, and updates its access time.
    pub fn read(&mut self, key: &[u8]) -> Option<&mut Entry> {
        let expired = self.expire_if_needed(key, true);
        let touch = !self.no_touch;
        let found = if expired { None } else { self.keyspace.db_mut(self.db).get_mut(key) };
        match found {
            Some(e) => {
                self.state.stats.keyspace_hits += 1;
                if touch {
                    self.state.touch(e, self.now_ms);
                }
                Some(e)
            }
            None => {
                self.state.stats.keyspace_misses += 1;
                self.state.funnel.notify(self.db, key, NotifyClass::KeyMiss, "keymiss");
                None
            }
        }
    }

    /// Looks `key` up for writing (Redis's `lookupKeyWrite`): expires it if
    /// due and updates its access time; no hit/miss statistics.
    pub fn write(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.expire_if_needed(key, false);
        let e = self.keyspace.db_mut(self.db).get_mut(key)?;
        if !self.no_touch {
            self.state.touch(e, self.now_ms);
        }
        Some(e)
    }

    /// The entry without any side effect other than honouring expiry
    /// (an expired key looks absent but is not deleted).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.keyspace.db(self.db).get(key).filter(|e| !e.is_expired(self.now_ms))
    }

    /// Whether `key` exists (expiring it if due).
    pub fn exists(&mut self, key: &[u8]) -> bool {
        !self.expire_if_needed(key, true) && self.keyspace.db(self.db).get(key).is_some()
    }

    /// Stores `value` under `key`, replacing any previous value; the TTL is
    /// kept only with `keep_ttl` (Redis's `setKey`). Does not fire the
    /// funnel: the caller does, with its own event name.
    pub fn set(&mut self, key: &[u8], value: Value, keep_ttl: bool) -> &mut Entry {
        let clock = self.state.new_access(self.now_ms);
        let now = self.now_ms;
        let mut created = false;
        let entry = self.keyspace.db_mut(self.db).store(key, value, clock, |old| {
            let live = old.filter(|e| !e.is_expired(now));
            created = live.is_none();
            if keep_ttl {
                live.and_then(Entry::expire_at)
            } else {
                None
            }
        });
        // Redis's dbAdd: a created key is also a `new` notification.
        if created {
            self.state.funnel.notify(self.db, key, NotifyClass::New, "new");
        }
        entry
    }

    /// Deletes `key` and, when it was live (there, not expired), tells the
    /// funnel (`del`): the way a command deletes a key. Whether it was.
    pub fn delete(&mut self, key: &[u8]) -> bool {
        let live = self.discard(key);
        if live {
            self.changed(key, NotifyClass::Generic, "del");
        }
        live
    }

    /// [`Self::delete`] as UNLINK does it: a value costly to free goes to
    /// the lazy-free thread (see [`crate::lazyfree`]).
    pub fn unlink(&mut self, key: &[u8]) -> bool {
        let now = self.now_ms;
        let live = match self.keyspace.db_mut(self.db).remove(key) {
            Some(e) => {
                let live = !e.is_expired(now);
                crate::lazyfree::free_value(e.value);
                live
            }
            None => false,
        };
        if live {
            self.changed(key, NotifyClass::Generic, "del");
        }
        live
    }

    /// Removes `key` without telling anyone, for the two cases where that
    /// is right: the key is being replaced and its replacement is told
    /// (RENAME's and RESTORE REPLACE's destination), or nobody ever saw it
    /// (a stream that XADD created and then could not add to). Whether it
    /// was live.
    pub fn discard(&mut self, key: &[u8]) -> bool {
        let now = self.now_ms;
        match self.keyspace.db_mut(self.db).remove(key) {
            Some(e) => !e.is_expired(now),
            None => false,
        }
    }

    /// Renames `src` to `dst` (an existing `dst` was discarded by the
    /// caller), keeping its TTL and access time, and fires `rename_from`
    /// and `rename_to`. Whether `src` was there.
    pub fn rename(&mut self, src: &[u8], dst: &[u8]) -> bool {
        let db = self.keyspace.db_mut(self.db);
        let Some(entry) = db.remove(src) else { return false };
        let (expire, access) = (entry.expire_at(), entry.access);
        let mut renamed = Entry::new(dst, entry.value).with_expire(expire);
        renamed.access = access;
        db.put(Box::new(renamed));
        self.changed(src, NotifyClass::Generic, "rename_from");
        self.changed(dst, NotifyClass::Generic, "rename_to");
        true
    }

    /// Moves `key` to database `to` (the caller checked that it is free
    /// there) and fires `move_from` and `move_to`. Whether it was there.
    pub fn move_to(&mut self, key: &[u8], to: usize) -> bool {
        let Some(entry) = self.keyspace.db_mut(self.db).remove(key) else { return false };
        self.keyspace.db_mut(to).insert(entry);
        self.changed(key, NotifyClass::Generic, "move_from");
        self.changed_in(to, key, NotifyClass::Generic, "move_to");
        true
    }

    /// Sets or clears the expiry of an existing key.
    pub fn set_expire(&mut self, key: &[u8], at: Option<u64>) -> bool {
        self.keyspace.db_mut(self.db).set_expire(key, at)
    }

    /// The write funnel: `key` changed. Every write goes through here.
    pub fn changed(&mut self, key: &[u8], class: NotifyClass, event: &'static str) {
        self.state.funnel.key_changed(self.db, key, class, event);
    }

    /// Same, for a key in another database (MOVE, COPY … DB).
    pub fn changed_in(&mut self, db: usize, key: &[u8], class: NotifyClass, event: &'static str) {
        self.state.funnel.key_changed(db, key, class, event);
    }

    /// Runs `f` with another database selected (MOVE, COPY … DB).
    pub fn with_db<R>(&mut self, db: usize, f: impl FnOnce(&mut Self) -> R) -> R {
        let saved = self.db;
        self.db = db;
        let r = f(self);
        self.db = saved;
        r
    }
}
