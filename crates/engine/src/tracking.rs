//! Client-side caching, the shard half (Redis's `tracking.c`): which clients
//! may hold which of this shard's keys in their cache, and the invalidations
//! the write funnel produces for them.
//!
//! - **Default mode.** After a read-only command of a tracking client runs
//!   here, its keys are remembered with the reader: (home core, client id).
//!   The first change to such a key (write, expiry, eviction) removes the
//!   entry and queues one invalidation for its readers; the key must be read
//!   again to be tracked again. As in Redis, the table knows nothing of
//!   databases, and a reader that turned tracking off is dropped lazily: its
//!   home core ignores invalidations it no longer wants.
//! - **Broadcast mode.** Every shard keeps a summary of which cores have
//!   BCAST clients for which prefixes (each core tells every shard when it
//!   gains its first or loses its last client of a prefix). A change to a key
//!   matching a prefix queues the key for those cores, which match it against
//!   their own clients' prefixes.
//! - **Flushes.** FLUSHDB/FLUSHALL empty the table; the server sends every
//!   tracking client one "everything" (null) invalidation once all shards
//!   are flushed (one per flush, not one per shard).
//! - **Bound.** `tracking-table-max-keys` bounds the process's keys, as
//!   Redis's one table: each shard adds its count to a [`TrackedTotal`] when
//!   it changes (one atomic add, only then), and while the total is over the
//!   limit every shard invalidates some of its own keys as if they had
//!   changed, with Redis's growing effort per call. The server runs that
//!   before the next command of any client (Redis's `processCommand` calls
//!   `trackingLimitUsedSlots`), so the invalidations precede its reply.
//!
//! The server publishes the [`Outbox`] after the shard work that filled it,
//! before the writer's reply leaves. A shard nobody tracks pays one
//! `is_empty()` check per change.

use crate::command::spec::{flags, CommandSpec};
use crate::command::ClientInfo;
use crate::effects::Effects;
use bytes::Bytes;
use hashbrown::HashMap;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;

/// The tracked keys of every shard together, and whether they are over
/// `tracking-table-max-keys` (read before every command: it changes only
/// when a shard crosses the limit, so the line stays shared).
#[derive(Debug, Default)]
pub struct TrackedTotal {
    keys: AtomicUsize,
    over: AtomicBool,
}

impl TrackedTotal {
    #[inline]
    pub fn over_limit(&self) -> bool {
        self.over.load(Relaxed)
    }

    fn set_over(&self, over: bool) {
        if self.over.load(Relaxed) != over {
            self.over.store(over, Relaxed);
        }
    }
}

/// A client that may cache a key: its home core and id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Reader {
    pub core: u16,
    pub id: u64,
}

/// A tracked key changed: its readers must drop it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyInvalidation {
    pub key: Bytes,
    /// Sorted by (core, id).
    pub readers: Vec<Reader>,
    /// The client whose command was running (0: none), for NOLOOP (Redis
    /// compares with its `current_client`, expiry during a command
    /// included).
    pub writer: u64,
}

/// A change to a key some BCAST prefix matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BcastChange {
    pub key: Bytes,
    /// The client that changed the key; `None` for expiry and eviction
    /// (Redis passes no client to the funnel then), for NOLOOP.
    pub writer: Option<u64>,
}

/// Invalidations waiting to be published, in the order they happened.
#[derive(Debug, Default, PartialEq)]
pub struct Outbox {
    pub keys: Vec<KeyInvalidation>,
    /// Changes to keys under BCAST prefixes, by core to tell.
    pub bcast: BTreeMap<u16, Vec<BcastChange>>,
}

impl Outbox {
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.bcast.is_empty()
    }
}

/// Commands Redis leaves to their scripts (EVAL_RO, FCALL_RO … too): they
/// remember keys only when the script reads (see [`TrackingTable::leave`]).
fn tracks_through_script(spec: &CommandSpec) -> bool {
    spec.has(flags::RUNS_SCRIPT)
}

/// A shard's tracking state.
#[derive(Debug, Default)]
pub struct TrackingTable {
    keys: HashMap<Bytes, Vec<Reader>>,
    /// Reader entries over all keys (INFO `tracking_total_items`).
    items: usize,
    /// Cores with BCAST clients, by prefix.
    prefixes: BTreeMap<Bytes, Vec<u16>>,
    /// `tracking-table-max-keys` (`None`: no limit).
    max_keys: Option<usize>,
    /// The process's total this shard counts in (a cross-shard command's
    /// scratch table counts in none: its keys go to their owners).
    total: Option<Arc<TrackedTotal>>,
    /// How many of this table's keys the total has.
    counted: usize,
    /// Consecutive calls of [`limit_used_slots`](Self::limit_used_slots)
    /// that could not get under the limit (Redis's `timeout_counter`).
    over_limit_calls: usize,
    /// Nesting of commands running now (a script's calls run inside it).
    depth: u32,
    /// The client whose command is running (0: none).
    writer: u64,
    /// A script running now called a read-only command.
    script_read: bool,
}

impl TrackingTable {
    /// Nothing tracked on this shard: no keys, no BCAST prefixes.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.prefixes.is_empty()
    }

    /// Tracked keys (INFO `tracking_total_keys`).
    pub fn key_count(&self) -> usize {
        self.keys.len()
    }

    /// Reader entries over all keys (INFO `tracking_total_items`).
    pub fn item_count(&self) -> usize {
        self.items
    }

    /// Prefixes some core's BCAST clients registered (every shard knows all
    /// of them: INFO `tracking_total_prefixes`).
    pub fn prefix_count(&self) -> usize {
        self.prefixes.len()
    }

    /// Makes this table count in the process's `total`.
    pub fn count_in(&mut self, total: Arc<TrackedTotal>) {
        self.total = Some(total);
        self.sync_total();
    }

    /// Sets `tracking-table-max-keys` (0 = no limit); a lowered limit is
    /// enforced before the next command.
    pub fn set_limit(&mut self, max_keys: u64) {
        self.max_keys = (max_keys > 0).then(|| usize::try_from(max_keys).unwrap_or(usize::MAX));
        let all = self.sync_total();
        if let Some(total) = &self.total {
            total.set_over(self.max_keys.is_some_and(|max| all > max));
        }
    }

    /// Brings the process's total up to date with this table, and returns
    /// it (this table's own count when it counts in none).
    fn sync_total(&mut self) -> usize {
        let now = self.keys.len();
        let Some(total) = &self.total else { return now };
        if now > self.counted {
            total.keys.fetch_add(now - self.counted, Relaxed);
        } else if now < self.counted {
            total.keys.fetch_sub(self.counted - now, Relaxed);
        }
        self.counted = now;
        total.keys.load(Relaxed)
    }

    /// A command of `client` starts (the write funnel needs to know whose
    /// change it sees). Pairs with [`leave`](Self::leave).
    #[inline]
    pub fn enter(&mut self, client: &ClientInfo) -> u64 {
        self.depth += 1;
        std::mem::replace(&mut self.writer, client.id)
    }

    /// The command that [`enter`](Self::enter) began has run. A tracking
    /// client's keys are remembered as Redis's `call()` does: after a
    /// read-only command; for a script, the keys it declared, once it has
    /// called a read-only command (EVAL_RO and FCALL_RO are no exception).
    pub fn leave(
        &mut self,
        outer_writer: u64,
        client: &ClientInfo,
        spec: &CommandSpec,
        args: &[Bytes],
        out: &mut Effects,
    ) {
        self.depth = self.depth.saturating_sub(1);
        self.writer = outer_writer;
        if !client.track {
            return;
        }
        let read_only = spec.has(flags::READONLY) && !tracks_through_script(spec);
        if self.depth > 0 {
            // A script's call: it makes the script's own keys tracked.
            self.script_read |= read_only;
            return;
        }
        let script_read = std::mem::take(&mut self.script_read);
        if (read_only || script_read) && !spec.has(flags::PUBSUB) {
            let reader = Reader { core: client.home, id: client.id };
            let _ = spec.for_each_key(args, |i| self.remember(&args[i], reader));
            self.limit_used_slots(out);
        }
    }

    /// A script that held every shard ([`crate::lent`]) and entered this
    /// shard's table ([`enter`](Self::enter)) ended: whether one of its
    /// read-only calls ran here (the caller then remembers its declared
    /// keys on their owners).
    pub fn leave_node_run(&mut self, outer_writer: u64) -> bool {
        self.depth = self.depth.saturating_sub(1);
        self.writer = outer_writer;
        std::mem::take(&mut self.script_read)
    }

    /// `reader` may now cache `key`.
    pub fn remember(&mut self, key: &[u8], reader: Reader) {
        let readers = match self.keys.get_mut(key) {
            Some(readers) => readers,
            None => self.keys.entry(Bytes::copy_from_slice(key)).or_default(),
        };
        if let Err(at) = readers.binary_search(&reader) {
            readers.insert(at, reader);
            self.items += 1;
        }
    }

    /// Takes every remembered key with its readers, leaving the table empty
    /// (a cross-shard command's scratch space hands its reads to the keys'
    /// owners this way).
    pub fn take_remembered(&mut self) -> Vec<(Bytes, Vec<Reader>)> {
        self.items = 0;
        self.keys.drain().collect()
    }

    /// The write funnel: `key` changed. `by_client` is false for expiry and
    /// eviction.
    pub fn key_changed(&mut self, key: &[u8], by_client: bool, out: &mut Effects) {
        if !self.prefixes.is_empty() {
            self.note_bcast(key, by_client, out);
        }
        if let Some(readers) = self.keys.remove(key) {
            self.items -= readers.len();
            let key = Bytes::copy_from_slice(key);
            out.invalidate(KeyInvalidation { key, readers, writer: self.writer });
        }
    }

    /// Queues `key` for every core with a BCAST prefix it starts with.
    fn note_bcast(&mut self, key: &[u8], by_client: bool, out: &mut Effects) {
        let writer = (by_client && self.writer != 0).then_some(self.writer);
        let mut cores: Vec<u16> = Vec::new();
        for (prefix, with) in &self.prefixes {
            if key.starts_with(prefix) {
                cores.extend(with);
            }
        }
        cores.sort_unstable();
        cores.dedup();
        for core in cores {
            let change = BcastChange { key: Bytes::copy_from_slice(key), writer };
            out.invalidations.bcast.entry(core).or_default().push(change);
        }
    }

    /// Every tracked key for which `affected` says yes changed at once
    /// (SWAPDB: keys on either side of the swap).
    pub fn keys_changed_where(&mut self, affected: impl Fn(&[u8]) -> bool, out: &mut Effects) {
        let changed: Vec<Bytes> = self.keys.keys().filter(|k| affected(k)).cloned().collect();
        for key in changed {
            self.key_changed(&key, true, out);
        }
    }

    /// FLUSHDB / FLUSHALL: nothing is cached validly any more (Redis's
    /// `trackingInvalidateKeysOnFlush`); the server tells the clients.
    pub fn flush(&mut self) {
        self.keys = HashMap::new();
        self.items = 0;
    }

    /// Makes `writer` the client whose changes the funnel sees now (a
    /// gathered cross-shard command writes its keys back on their owners);
    /// returns the one before, to restore.
    pub fn changes_by(&mut self, writer: u64) -> u64 {
        std::mem::replace(&mut self.writer, writer)
    }

    /// Core `core` gained its first (`present`) or lost its last BCAST
    /// client of `prefix`.
    pub fn note_prefix(&mut self, prefix: Bytes, core: u16, present: bool) {
        if present {
            let cores = self.prefixes.entry(prefix).or_default();
            if !cores.contains(&core) {
                cores.push(core);
            }
        } else if let Some(cores) = self.prefixes.get_mut(&prefix) {
            cores.retain(|&c| c != core);
            if cores.is_empty() {
                self.prefixes.remove(&prefix);
            }
        }
    }

    /// Keeps the process within `tracking-table-max-keys` (Redis's
    /// `trackingLimitUsedSlots`): while the total is over, invalidates this
    /// shard's keys as if they had changed, at most 100 per call more than
    /// the call before while it stays over. Called after each read that
    /// remembers keys, on every background tick, and on every shard before
    /// a command while the total is over.
    pub fn limit_used_slots(&mut self, out: &mut Effects) {
        let Some(max) = self.max_keys else { return };
        let all = self.sync_total();
        if all <= max {
            self.over_limit_calls = 0;
            if let Some(total) = &self.total {
                total.set_over(false);
            }
            return;
        }
        let effort = 100 * (self.over_limit_calls + 1);
        let count = self.claim_excess(all, max, effort);
        // Which keys go is arbitrary (Redis walks its radix tree at
        // random); the hash order is as good as random and needs no scan.
        let victims: Vec<Bytes> = self.keys.keys().take(count).cloned().collect();
        for key in victims {
            if let Some(readers) = self.keys.remove(&key) {
                self.items -= readers.len();
                // Nobody changed the key: no NOLOOP client is spared.
                out.invalidate(KeyInvalidation { key, readers, writer: 0 });
            }
        }
        let over = self.sync_total() > max;
        if let Some(total) = &self.total {
            total.set_over(over);
        }
        if over {
            self.over_limit_calls += 1;
        } else {
            self.over_limit_calls = 0;
        }
    }

    /// How many of its keys this table drops to bring the process from
    /// `all` keys to `max`, at most `effort`. Shards trimming at once would
    /// each drop the whole excess: each takes its part off the total first
    /// (a compare-and-swap), so together they drop exactly the excess.
    fn claim_excess(&mut self, mut all: usize, max: usize, effort: usize) -> usize {
        let own = self.keys.len();
        let Some(total) = &self.total else { return (all - max).min(own).min(effort) };
        loop {
            let count = all.saturating_sub(max).min(own).min(effort);
            if count == 0 {
                return 0;
            }
            match total.keys.compare_exchange(all, all - count, Relaxed, Relaxed) {
                Ok(_) => {
                    // The keys about to go are counted out already.
                    self.counted -= count;
                    return count;
                }
                Err(now) => all = now,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::table;
    use crate::shard::{Caller, Clock};

    fn spec(name: &str) -> &'static CommandSpec {
        table().get(name.as_bytes()).map(|r| r.spec).unwrap()
    }

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    /// A table with the effects it queues (a shard's, in a server).
    #[derive(Default)]
    struct Table {
        table: TrackingTable,
        out: Effects,
    }

    impl Table {
        fn key_changed(&mut self, key: &[u8], by_client: bool) {
            self.table.key_changed(key, by_client, &mut self.out);
        }
        fn keys_changed_where(&mut self, affected: impl Fn(&[u8]) -> bool) {
            self.table.keys_changed_where(affected, &mut self.out);
        }
        fn leave(&mut self, outer: u64, client: &ClientInfo, spec: &CommandSpec, args: &[Bytes]) {
            self.table.leave(outer, client, spec, args, &mut self.out);
        }
        fn limit_used_slots(&mut self) {
            self.table.limit_used_slots(&mut self.out);
        }
        fn take_outbox(&mut self) -> Option<Outbox> {
            taken(&mut self.out)
        }
    }

    impl std::ops::Deref for Table {
        type Target = TrackingTable;
        fn deref(&self) -> &TrackingTable {
            &self.table
        }
    }

    impl std::ops::DerefMut for Table {
        fn deref_mut(&mut self) -> &mut TrackingTable {
            &mut self.table
        }
    }

    /// The invalidations queued in `out`, if any.
    fn taken(out: &mut Effects) -> Option<Outbox> {
        let outbox = std::mem::take(out).invalidations;
        (!outbox.is_empty()).then_some(outbox)
    }

    fn tracker(id: u64, core: u16) -> ClientInfo {
        ClientInfo { id, home: core, track: true, ..ClientInfo::default() }
    }

    /// Runs `line` as client `client` would (without executing anything).
    fn run(t: &mut Table, client: &ClientInfo, line: &str) {
        let a = args(line);
        let outer = t.enter(client);
        t.leave(outer, client, spec(line.split(' ').next().unwrap()), &a);
    }

    #[test]
    fn reads_are_remembered_and_the_first_change_invalidates_once() {
        let mut t = Table::default();
        assert!(t.is_empty());
        let (a, b) = (tracker(7, 1), tracker(9, 0));
        run(&mut t, &a, "mget x y");
        run(&mut t, &b, "get x");
        run(&mut t, &b, "get x");
        run(&mut t, &a, "set z 1");
        assert_eq!((t.key_count(), t.item_count()), (2, 3));
        t.key_changed(b"z", true);
        assert_eq!(t.take_outbox(), None);
        let writer = tracker(3, 0);
        let outer = t.enter(&writer);
        t.key_changed(b"x", true);
        t.key_changed(b"x", true);
        t.leave(outer, &writer, spec("set"), &args("set x 1"));
        let out = t.take_outbox().unwrap();
        assert_eq!(
            out.keys,
            vec![KeyInvalidation {
                key: Bytes::from_static(b"x"),
                readers: vec![Reader { core: 0, id: 9 }, Reader { core: 1, id: 7 }],
                writer: 3,
            }]
        );
        assert_eq!((t.key_count(), t.item_count()), (1, 1));
        // A client that does not track leaves nothing behind.
        run(&mut t, &ClientInfo { id: 5, ..ClientInfo::default() }, "get q");
        assert_eq!(t.key_count(), 1);
    }

    #[test]
    fn scripts_track_their_declared_keys_only_after_a_read() {
        let mut t = Table::default();
        let c = tracker(4, 0);
        let script = |t: &mut Table, line: &str, inner: &str| {
            let a = args(line);
            let outer = t.enter(&c);
            let inner_args = args(inner);
            let o = t.enter(&c);
            t.leave(o, &c, spec(inner.split(' ').next().unwrap()), &inner_args);
            t.leave(outer, &c, spec(line.split(' ').next().unwrap()), &a);
        };
        script(&mut t, "eval s 2 k1 k2", "set k3 v");
        assert_eq!(t.key_count(), 0);
        script(&mut t, "eval_ro s 2 k1 k2", "ping");
        assert_eq!(t.key_count(), 0);
        script(&mut t, "eval s 2 k1 k2", "get k3");
        assert_eq!(t.key_count(), 2);
        assert!(t.keys.contains_key(&b"k1"[..]) && !t.keys.contains_key(&b"k3"[..]));
    }

    #[test]
    fn bcast_prefixes_route_changes_to_their_cores() {
        let mut t = Table::default();
        t.note_prefix(Bytes::from_static(b"a:"), 1, true);
        t.note_prefix(Bytes::from_static(b""), 0, true);
        t.note_prefix(Bytes::from_static(b"a:"), 0, true);
        assert!(!t.is_empty());
        let w = tracker(6, 0);
        let outer = t.enter(&w);
        t.key_changed(b"a:1", true);
        t.key_changed(b"b", false);
        t.leave(outer, &w, spec("set"), &args("set a:1 1"));
        let out = t.take_outbox().unwrap();
        let change = |k: &'static [u8], writer| BcastChange { key: Bytes::from_static(k), writer };
        assert_eq!(out.bcast.get(&0), Some(&vec![change(b"a:1", Some(6)), change(b"b", None)]));
        assert_eq!(out.bcast.get(&1), Some(&vec![change(b"a:1", Some(6))]));
        t.note_prefix(Bytes::from_static(b""), 0, false);
        t.note_prefix(Bytes::from_static(b"a:"), 0, false);
        t.note_prefix(Bytes::from_static(b"a:"), 1, false);
        assert!(t.is_empty());
        assert_eq!(t.prefix_count(), 0);
    }

    #[test]
    fn flushes_and_swaps() {
        let mut t = Table::default();
        let c = tracker(2, 0);
        run(&mut t, &c, "mget a b c");
        t.keys_changed_where(|k| k == b"b");
        let out = t.take_outbox().unwrap();
        assert_eq!(out.keys.len(), 1);
        t.flush();
        assert_eq!((t.key_count(), t.item_count()), (0, 0));
        assert_eq!(t.take_outbox(), None);
        // A gathered command's write-back names its writer for NOLOOP.
        run(&mut t, &c, "get a");
        let before = t.changes_by(9);
        t.key_changed(b"a", true);
        assert_eq!(t.changes_by(before), 9);
        assert_eq!(t.take_outbox().unwrap().keys[0].writer, 9);
    }

    /// Runs `line` on a real shard as `client`.
    fn execute(shard: &mut crate::Shard, client: &ClientInfo, line: &str) -> Vec<u8> {
        let args = args(line);
        let reg = table().resolve(&args).unwrap();
        let cmd = crate::ShardCommand { id: reg.id, spec: reg.spec, args, client: *client };
        let mut out = Vec::new();
        shard.call(&cmd, &mut out, &mut Clock::start(), Caller::Client);
        out
    }

    #[test]
    fn a_shard_remembers_tracked_reads_and_its_funnel_invalidates_them() {
        use crate::shard::ShardSettings;
        let mut shard = crate::Shard::new(
            crate::ShardId(0),
            crate::SlotMap::new(1),
            ShardSettings::default(),
            1,
        );
        let (reader, writer) = (tracker(4, 1), ClientInfo { id: 5, ..ClientInfo::default() });
        execute(&mut shard, &writer, "mset a 1 b 2 h:x 1");
        assert_eq!(execute(&mut shard, &reader, "mget a b"), b"*2\r\n$1\r\n1\r\n$1\r\n2\r\n");
        execute(&mut shard, &reader, "strlen missing");
        execute(&mut shard, &reader, "set h:x 2");
        assert_eq!(shard.state.funnel.tracking.key_count(), 3);
        assert_eq!(taken(&mut shard.state.funnel.out), None);
        execute(&mut shard, &writer, "del a missing");
        execute(&mut shard, &writer, "append b x");
        let out = taken(&mut shard.state.funnel.out).unwrap();
        let keys: Vec<(&[u8], u64)> = out.keys.iter().map(|k| (&k.key[..], k.writer)).collect();
        // Deleting a missing key changes nothing: it stays tracked.
        assert_eq!(keys, vec![(&b"a"[..], 5), (&b"b"[..], 5)]);
        assert_eq!(shard.state.funnel.tracking.key_count(), 1);
        assert!(out.keys.iter().all(|k| k.readers == vec![Reader { core: 1, id: 4 }]));
        // Expiry is nobody's change.
        execute(&mut shard, &reader, "get h:x");
        // Long enough that the read below is surely before it expires, even
        // on a loaded machine.
        execute(&mut shard, &writer, "pexpire h:x 200");
        let _ = taken(&mut shard.state.funnel.out);
        execute(&mut shard, &reader, "get h:x");
        shard.state.funnel.tracking.note_prefix(Bytes::from_static(b"h:"), 0, true);
        std::thread::sleep(std::time::Duration::from_millis(250));
        execute(&mut shard, &reader, "get h:x");
        let out = taken(&mut shard.state.funnel.out).unwrap();
        assert_eq!(out.keys.len(), 1);
        assert_eq!(
            out.bcast.get(&0),
            Some(&vec![BcastChange { key: Bytes::from_static(b"h:x"), writer: None }])
        );
    }

    #[test]
    fn the_limit_bounds_every_shard_together_with_growing_effort() {
        let total = Arc::new(TrackedTotal::default());
        let (mut a, mut b) = (Table::default(), Table::default());
        a.count_in(total.clone());
        b.count_in(total.clone());
        a.set_limit(0);
        assert_eq!(a.max_keys, None);

        let c = tracker(1, 0);
        for i in 0..350 {
            a.remember(format!("k{i}").as_bytes(), Reader { core: 0, id: c.id });
        }
        b.remember(b"other", Reader { core: 0, id: c.id });
        b.set_limit(2);
        a.set_limit(2);
        // 351 keys against 2: the process is over, and says so at once.
        assert!(total.over_limit());
        a.limit_used_slots();
        assert_eq!(a.key_count(), 250);
        a.limit_used_slots();
        assert_eq!(a.key_count(), 50);
        assert!(total.over_limit());
        a.limit_used_slots();
        // b's key counts: a keeps one.
        assert_eq!((a.key_count(), b.key_count()), (1, 1));
        assert!(!total.over_limit());
        let evicted = a.take_outbox().unwrap().keys;
        assert_eq!(evicted.len(), 349);
        assert!(evicted.iter().all(|e| e.writer == 0 && e.readers.len() == 1));
        // A read past the limit makes room right away.
        run(&mut b, &c, "get z");
        b.limit_used_slots();
        assert_eq!(a.key_count() + b.key_count(), 2);
        assert!(!total.over_limit());
    }
}
