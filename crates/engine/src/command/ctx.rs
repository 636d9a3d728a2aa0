//! What a command handler works with: [`Ctx`] = the keyspace as seen by this
//! command ([`KeyspaceView`]), the reply writer, and the calling client.
//!
//! Every key lookup goes through [`KeyspaceView`], so lazy expiry, hit/miss
//! statistics and LRU/LFU updates happen in one place, as in Redis's
//! `lookupKey*`; and every change fires the write funnel by itself: a key is
//! stored, deleted, renamed or given a TTL by a method that fires, and changed
//! in place only through an [`Updater`], which fires when it drops. No
//! handler can reach a database's mutators (the view's keyspace is private).

use crate::command::error::{CmdError, WRONG_TYPE};
use crate::funnel::{Funnel, NotifyClass};
use crate::keyspace::{Db, Entry, Keyspace, Typed, Value};
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
    /// The command comes from this replica's primary (its stream): a key
    /// never expires for it, the primary's DEL decides (Redis's
    /// `expireIfNeeded` for the master client).
    pub master: bool,
    /// The ACL user's uid when the user is restricted (`None`: every
    /// command is allowed): a script's `redis.call` checks it.
    pub acl_user: Option<u32>,
    /// The ACL user may not read every key: SORT refuses BY and GET
    /// patterns (they read keys the arguments do not name).
    pub partial_key_read: bool,
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

/// The TTL a stored value gets.
#[derive(Clone, Copy)]
enum StoreTtl {
    /// The replaced key's, if it had one (SET KEEPTTL).
    Keep,
    At(Option<u64>),
}

/// Stores `value` under `key` in database `db` (Redis's `setKey`), with
/// the `new` notification of a created key; apart from [`KeyspaceView`] so
/// that the stored entry borrows the keyspace alone.
fn store<'k>(
    keyspace: &'k mut Keyspace,
    state: &mut ShardState,
    db: usize,
    now: u64,
    key: &[u8],
    value: Value,
    ttl: StoreTtl,
) -> &'k mut Entry {
    let clock = state.new_access(now);
    let mut created = false;
    let entry = keyspace.db_mut(db).store(key, value, clock, |old| {
        let live = old.filter(|e| !e.is_expired(now));
        created = live.is_none();
        match ttl {
            StoreTtl::Keep => live.and_then(Entry::expire_at),
            StoreTtl::At(at) => at,
        }
    });
    // Redis's dbAdd: a created key is also a `new` notification.
    if created {
        state.funnel.notify(db, key, NotifyClass::New, "new");
    }
    entry
}

/// The keyspace as one command sees it: its selected database, a fixed
/// "now" (Redis also freezes the clock for the duration of a command), and
/// the shard state that reacts to lookups and changes.
pub struct KeyspaceView<'a> {
    keyspace: &'a mut Keyspace,
    pub state: &'a mut ShardState,
    pub db: usize,
    pub now_ms: u64,
    pub no_touch: bool,
    /// See [`ClientInfo::master`].
    pub from_master: bool,
}

impl<'a> KeyspaceView<'a> {
    pub fn new(
        keyspace: &'a mut Keyspace,
        state: &'a mut ShardState,
        db: usize,
        now_ms: u64,
        no_touch: bool,
    ) -> Self {
        KeyspaceView { keyspace, state, db, now_ms, no_touch, from_master: false }
    }

    /// The whole keyspace, to read.
    pub fn keyspace(&self) -> &Keyspace {
        self.keyspace
    }

    /// The keyspace and state, for a command that runs other commands (a
    /// script): each of those changes keys through a view of its own.
    pub(crate) fn for_nested_calls(&mut self) -> (&mut Keyspace, &mut ShardState) {
        (self.keyspace, self.state)
    }

    /// The keyspace to read and the shard state to use, side by side (a
    /// random pick of a value with the shard's generator).
    pub fn keyspace_and_state(&mut self) -> (&Keyspace, &mut ShardState) {
        (self.keyspace, self.state)
    }

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
    /// CLIENT PAUSE freezes keys, and on a replica, a read leaves the
    /// expired key in place (it still reads as missing), as Redis does; for
    /// a replica's primary no key has expired.
    fn expire_if_needed(&mut self, key: &[u8], for_read: bool) -> bool {
        let db = self.keyspace.db_mut(self.db);
        if db.volatile() == 0 || self.from_master {
            return false;
        }
        let expired = db.get(key).is_some_and(|e| e.is_expired(self.now_ms));
        let kept = self.state.settings.replica || self.state.pause.keys_frozen(self.now_ms);
        if expired && for_read && kept {
            return true;
        }
        if expired {
            crate::expire::delete_expired(self.keyspace, self.state, self.db, key);
        }
        expired
    }

    /// Looks `key` up for reading (Redis's `lookupKeyRead`): expires it if
    /// due, counts a hit or a miss, and updates its access time.
    pub fn read(&mut self, key: &[u8]) -> Option<&Entry> {
        self.lookup_read(key).map(|e| &*e)
    }

    fn lookup_read(&mut self, key: &[u8]) -> Option<&mut Entry> {
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
    /// due and updates its access time; no hit/miss statistics. The change
    /// is fired when the updater drops (see [`Updater`]).
    pub fn write<'v>(&'v mut self, key: &'v [u8]) -> Option<Updater<'v, Entry>> {
        self.write_as(key, |e| Some(e)).ok().flatten()
    }

    /// [`Self::write`] for a value of one type (`as_type` picks it out of
    /// the [`Value`]): WRONGTYPE when the key holds another.
    pub fn write_as<'v, T: ?Sized>(
        &'v mut self,
        key: &'v [u8],
        as_type: impl FnOnce(&mut Entry) -> Option<&mut T>,
    ) -> Result<Option<Updater<'v, T>>, CmdError> {
        self.expire_if_needed(key, false);
        let Some(e) = self.keyspace.db_mut(self.db).get_mut(key) else { return Ok(None) };
        if !self.no_touch {
            self.state.touch(e, self.now_ms);
        }
        let value = as_type(e).ok_or(WRONG_TYPE)?;
        Ok(Some(Updater {
            value,
            key,
            db: self.db,
            funnel: &mut self.state.funnel,
            events: [None; 2],
        }))
    }

    /// The `T` at `key` for writing, created as `new` makes it when missing
    /// (an empty container the caller fills at once: Redis's
    /// `*TypeLookupWriteOrCreate`); WRONGTYPE when the key holds another type.
    pub fn write_or_create<'v, T: Typed>(
        &'v mut self,
        key: &'v [u8],
        new: impl FnOnce() -> Value,
    ) -> Result<Updater<'v, T>, CmdError> {
        self.expire_if_needed(key, false);
        let access = self.state.new_access(self.now_ms);
        let (e, created) = self.keyspace.db_mut(self.db).get_or_insert_with(key, access, new);
        if created {
            self.state.funnel.notify(self.db, key, NotifyClass::New, "new");
        } else if !self.no_touch {
            self.state.touch(e, self.now_ms);
        }
        let value = T::of(&mut e.value).ok_or(WRONG_TYPE)?;
        Ok(Updater { value, key, db: self.db, funnel: &mut self.state.funnel, events: [None; 2] })
    }

    /// Creates `key` holding `value` (an empty container the caller fills
    /// at once through the updater, whose event announces both: Redis's
    /// `dbAdd` then the command's own notification); `new` fires now.
    pub fn create_as<'v, T: ?Sized>(
        &'v mut self,
        key: &'v [u8],
        value: Value,
        as_type: impl FnOnce(&mut Entry) -> Option<&mut T>,
    ) -> Result<Updater<'v, T>, CmdError> {
        let (db, now) = (self.db, self.now_ms);
        let e = store(self.keyspace, self.state, db, now, key, value, StoreTtl::At(None));
        let value = as_type(e).ok_or(WRONG_TYPE)?;
        Ok(Updater { value, key, db, funnel: &mut self.state.funnel, events: [None; 2] })
    }

    /// [`Self::read`], for a read that reshapes how a value is kept without
    /// changing what it holds (a list closes the compressed nodes it
    /// opened): the funnel is not told, since nothing it serves changed.
    pub fn read_to_reshape(&mut self, key: &[u8]) -> Option<&mut Entry> {
        self.lookup_read(key)
    }

    /// A value was reshaped (see [`Self::read_to_reshape`]) in a way Redis
    /// still counts as dirty (PFCOUNT's cached count, PFDEBUG TODENSE): the
    /// dirty counter moves, no event fires.
    pub fn reshaped(&mut self) {
        self.state.funnel.dirty += 1;
    }

    /// The entry without any side effect other than honouring expiry
    /// (an expired key looks absent but is not deleted).
    pub fn peek(&self, key: &[u8]) -> Option<&Entry> {
        self.keyspace.db(self.db).get(key).filter(|e| !e.is_expired(self.now_ms))
    }

    /// Whether `key` exists, as a write looks it up (expiring it if due,
    /// counting no hit or miss).
    pub fn exists_for_write(&mut self, key: &[u8]) -> bool {
        !self.expire_if_needed(key, false) && self.keyspace.db(self.db).get(key).is_some()
    }

    /// Whether `key` exists (expiring it if due).
    pub fn exists(&mut self, key: &[u8]) -> bool {
        !self.expire_if_needed(key, true) && self.keyspace.db(self.db).get(key).is_some()
    }

    /// Stores `value` under `key`, replacing any previous value, and fires
    /// `event`; the TTL is kept only with `keep_ttl` (Redis's `setKey`).
    pub fn set(
        &mut self,
        key: &[u8],
        value: Value,
        keep_ttl: bool,
        class: NotifyClass,
        event: &'static str,
    ) {
        let ttl = if keep_ttl { StoreTtl::Keep } else { StoreTtl::At(None) };
        self.store(key, value, ttl);
        self.changed(key, class, event);
    }

    /// [`Self::set`] for a value that comes with its TTL and, when given,
    /// its access time (COPY, RESTORE): `event` fires, no `expire`.
    pub fn set_restored(
        &mut self,
        key: &[u8],
        value: Value,
        expire_at: Option<u64>,
        access: Option<u32>,
        event: &'static str,
    ) {
        let entry = self.store(key, value, StoreTtl::At(expire_at));
        if let Some(access) = access {
            entry.access = access;
        }
        self.changed(key, NotifyClass::Generic, event);
    }

    /// [`Self::set`] with the event left to the caller, which fires it.
    fn store(&mut self, key: &[u8], value: Value, ttl: StoreTtl) -> &mut Entry {
        store(self.keyspace, self.state, self.db, self.now_ms, key, value, ttl)
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
                crate::lazyfree::free_value(e.into_value());
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
        db.put(entry.into_renamed(dst));
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

    /// Sets or clears the expiry of an existing key and fires `event`
    /// (class generic). Whether the key was there.
    pub fn set_expire(&mut self, key: &[u8], at: Option<u64>, event: &'static str) -> bool {
        let there = self.keyspace.db_mut(self.db).set_expire(key, at);
        if there {
            self.changed(key, NotifyClass::Generic, event);
        }
        there
    }

    /// The write funnel: `key` changed. Private: the methods that change a
    /// key call it, so no handler can change one without it.
    fn changed(&mut self, key: &[u8], class: NotifyClass, event: &'static str) {
        self.state.funnel.key_changed(self.db, key, class, event);
    }

    /// Same, for a key in another database (MOVE).
    fn changed_in(&mut self, db: usize, key: &[u8], class: NotifyClass, event: &'static str) {
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

/// A key looked up for a change (Redis's `lookupKeyWrite`), holding the
/// promise that the write funnel hears of it: the only way to a mutable
/// value is [`Updater::update`], which names the change, and the change is
/// fired when the updater drops (Dragonfly's `AutoUpdater`). A handler that
/// found nothing to change after all says so with [`Updater::unchanged`].
/// Firing late is safe: what the funnel starts (notifications, wakes, the
/// log's record of the key) is only delivered when the turn ends.
pub struct Updater<'v, T: ?Sized> {
    value: &'v mut T,
    key: &'v [u8],
    db: usize,
    funnel: &'v mut Funnel,
    /// The changes to fire, in order (a command may announce two: XADD's
    /// `xadd` then `xtrim`, LMOVE's push and pop of one list).
    events: [Option<(NotifyClass, &'static str)>; 2],
}

impl<'v, T: ?Sized> Updater<'v, T> {
    /// The value, to change: `event` (of `class`) is fired when the
    /// updater drops.
    pub fn update(&mut self, class: NotifyClass, event: &'static str) -> &mut T {
        self.announce(class, event);
        self.value
    }

    /// Adds `event` to those fired when the updater drops, after the ones
    /// named before (naming one again adds nothing).
    pub fn announce(&mut self, class: NotifyClass, event: &'static str) {
        let named = Some((class, event));
        if self.events.contains(&named) {
            return;
        }
        if let Some(free) = self.events.iter_mut().find(|e| e.is_none()) {
            *free = named;
            return;
        }
        // Full: the oldest goes now, which keeps the order.
        if let Some((class, event)) = self.events[0] {
            self.funnel.key_changed(self.db, self.key, class, event);
        }
        self.events.rotate_left(1);
        self.events[self.events.len() - 1] = named;
    }

    /// The value, to change how it is kept without changing what it holds
    /// (an HLL turned dense): no event is fired for it.
    pub fn reshape(&mut self) -> &mut T {
        self.value
    }

    /// Nothing changed after all (HDEL of absent fields, LREM that found
    /// nothing): no event is fired.
    pub fn unchanged(&mut self) {
        self.events = [None; 2];
    }
}

impl<T: ?Sized> std::ops::Deref for Updater<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        self.value
    }
}

impl<T: ?Sized> Drop for Updater<'_, T> {
    fn drop(&mut self) {
        for (class, event) in self.events.iter().flatten() {
            self.funnel.key_changed(self.db, self.key, *class, event);
        }
    }
}
