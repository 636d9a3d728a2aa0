//! Reactive queries (`GET.WATCH key`, `PFCOUNT.WATCH key`, …), the shard
//! half: which read commands are watched on this shard, by which cores, and
//! what each last returned.
//!
//! A query is identified by its fingerprint (a 64-bit hash of the command
//! name upper-cased and its arguments as given), so every client watching
//! the same query shares one entry and the shard re-runs it once per change,
//! however many watchers there are. The write funnel marks the queries of a
//! changed key dirty; after the shard's work the server calls
//! [`QueryWatchTable::rerun`], which re-runs each dirty query once per
//! protocol its watchers speak and reports the results that differ from the
//! last ones sent, for each core that has watchers.

use crate::keyspace::Keyspace;
use crate::shard::{call, Caller, Clock, ShardCommand, ShardState};
use bytes::Bytes;
use hashbrown::HashMap;
use ringdb_protocol::Resp;
use std::collections::BTreeMap;

/// The fingerprint of a read command: its name upper-cased and its
/// arguments as given, and the database when it is not 0 (the same command
/// in two databases is two queries). Fixed seed, so every core computes the
/// same.
pub fn fingerprint(name: &str, args: &[Bytes], db: usize) -> u64 {
    let mut buf = Vec::with_capacity(64);
    buf.extend_from_slice(name.to_ascii_uppercase().as_bytes());
    if db != 0 {
        buf.push(0xff);
        buf.extend_from_slice(&(db as u64).to_le_bytes());
    }
    for arg in args {
        buf.push(0);
        buf.extend_from_slice(&(arg.len() as u64).to_le_bytes());
        buf.extend_from_slice(arg);
    }
    xxhash_rust::xxh3::xxh3_64(&buf)
}

/// A borrowed `(db, key)`, so that looking a changed key up costs no copy.
#[derive(Hash)]
pub(crate) struct KeyRef<'a>(pub usize, pub &'a [u8]);

impl hashbrown::Equivalent<(usize, Bytes)> for KeyRef<'_> {
    fn equivalent(&self, other: &(usize, Bytes)) -> bool {
        self.0 == other.0 && self.1 == &other.1[..]
    }
}

/// Index of a protocol in the per-protocol arrays.
fn slot(resp: Resp) -> usize {
    match resp {
        Resp::V2 => 0,
        Resp::V3 => 1,
    }
}

const PROTOCOLS: [Resp; 2] = [Resp::V2, Resp::V3];

/// A read command to watch: its name without `.WATCH`, the command as the
/// shard runs it, and the one key it reads.
pub struct Query {
    pub name: Bytes,
    pub command: ShardCommand,
    pub key: Bytes,
}

struct WatchedQuery {
    /// The command name without `.WATCH`, upper case (`PFCOUNT`).
    name: Bytes,
    command: ShardCommand,
    db: usize,
    key: Bytes,
    /// Watchers per (home core, protocol).
    watchers: BTreeMap<(u16, usize), u32>,
    /// Last result sent, per protocol.
    last: [Option<Bytes>; 2],
}

/// A changed result for the watchers on one core.
#[derive(Clone, Debug)]
pub struct WatchPush {
    pub core: u16,
    pub fingerprint: u64,
    pub name: Bytes,
    /// The new result, per protocol (only those this core's watchers use).
    pub results: [Option<Bytes>; 2],
}

#[derive(Default)]
pub struct QueryWatchTable {
    queries: HashMap<u64, WatchedQuery>,
    by_key: HashMap<(usize, Bytes), Vec<u64>>,
    /// Queries whose key changed since the last re-run, in order.
    dirty: Vec<u64>,
    /// Re-executions and pushes made (INFO watch).
    pub reexecutions: u64,
    pub pushes: u64,
}

impl QueryWatchTable {
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.queries.is_empty()
    }

    pub fn has_dirty(&self) -> bool {
        !self.dirty.is_empty()
    }

    /// Number of watched queries and of subscriptions (INFO watch).
    pub fn counts(&self) -> (usize, u64) {
        let subs = self.queries.values().flat_map(|q| q.watchers.values()).map(|&n| n as u64).sum();
        (self.queries.len(), subs)
    }

    /// `key` changed (the write funnel): its queries must be re-run.
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if let Some(fps) = self.by_key.get(&KeyRef(db, key)) {
            for fp in fps {
                if !self.dirty.contains(fp) {
                    self.dirty.push(*fp);
                }
            }
        }
    }

    /// Every watched key of `db` that `affected` selects changed at once
    /// (FLUSHDB, FLUSHALL, SWAPDB).
    pub fn touch_db(&mut self, db: usize, affected: impl Fn(&[u8]) -> bool) {
        for ((d, key), fps) in &self.by_key {
            if *d == db && affected(key) {
                for fp in fps {
                    if !self.dirty.contains(fp) {
                        self.dirty.push(*fp);
                    }
                }
            }
        }
    }

    /// One more watcher of a query on `core` speaking `resp`; returns the
    /// query's current result in that protocol (what the new watcher is sent
    /// first).
    pub fn watch(
        &mut self,
        fp: u64,
        query: Query,
        core: u16,
        resp: Resp,
        mut run: impl FnMut(&ShardCommand, Resp) -> Bytes,
    ) -> Bytes {
        let Query { name, command, key } = query;
        let db = command.client.db;
        let query = self.queries.entry(fp).or_insert_with(|| {
            self.by_key.entry((db, key.clone())).or_default().push(fp);
            WatchedQuery { name, command, db, key, watchers: BTreeMap::new(), last: [None, None] }
        });
        *query.watchers.entry((core, slot(resp))).or_default() += 1;
        let result = run(&query.command, resp);
        query.last[slot(resp)] = Some(result.clone());
        self.reexecutions += 1;
        result
    }

    /// One watcher of a query on `core` speaking `resp` lets go; the query
    /// goes with its last watcher.
    pub fn unwatch(&mut self, fp: u64, core: u16, resp: Resp) {
        let Some(query) = self.queries.get_mut(&fp) else { return };
        let k = (core, slot(resp));
        if let Some(n) = query.watchers.get_mut(&k) {
            *n -= 1;
            if *n == 0 {
                query.watchers.remove(&k);
            }
        }
        if query.watchers.is_empty() {
            let key = (query.db, query.key.clone());
            self.queries.remove(&fp);
            if let Some(fps) = self.by_key.get_mut(&key) {
                fps.retain(|f| *f != fp);
                if fps.is_empty() {
                    self.by_key.remove(&key);
                }
            }
            self.dirty.retain(|f| *f != fp);
        }
    }

    /// Re-runs every dirty query once per protocol its watchers speak and
    /// returns, per core, the results that differ from the last ones sent.
    pub fn rerun(&mut self, mut run: impl FnMut(&ShardCommand, Resp) -> Bytes) -> Vec<WatchPush> {
        let mut pushes = Vec::new();
        for fp in std::mem::take(&mut self.dirty) {
            let Some(query) = self.queries.get_mut(&fp) else { continue };
            let mut changed: [Option<Bytes>; 2] = [None, None];
            for resp in PROTOCOLS {
                let s = slot(resp);
                if !query.watchers.keys().any(|(_, p)| *p == s) {
                    continue;
                }
                let result = run(&query.command, resp);
                self.reexecutions += 1;
                if query.last[s].as_ref() != Some(&result) {
                    query.last[s] = Some(result.clone());
                    changed[s] = Some(result);
                }
            }
            if changed.iter().all(Option::is_none) {
                continue;
            }
            let mut by_core: BTreeMap<u16, [Option<Bytes>; 2]> = BTreeMap::new();
            for &(core, s) in query.watchers.keys() {
                if let Some(result) = &changed[s] {
                    by_core.entry(core).or_default()[s] = Some(result.clone());
                }
            }
            for (core, results) in by_core {
                self.pushes += 1;
                pushes.push(WatchPush { core, fingerprint: fp, name: query.name.clone(), results });
            }
        }
        pushes
    }
}

/// Runs a watched read command in one protocol, as the server (see
/// [`Caller::Query`](crate::shard::Caller::Query)): the runner [`QueryWatchTable`] is given by the shard.
pub fn run(
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    command: &ShardCommand,
    resp: Resp,
    now: u64,
) -> Bytes {
    let mut cmd = command.clone();
    cmd.client.resp = resp;
    cmd.client.no_touch = true;
    let mut out = Vec::new();
    call(keyspace, state, &cmd, &mut out, &mut Clock::at(now), Caller::Query);
    Bytes::from(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::{table, ClientInfo};
    use crate::shard::{Shard, ShardId, ShardSettings, SlotMap};

    fn command(line: &str, resp: Resp) -> ShardCommand {
        let args: Vec<Bytes> =
            line.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect();
        let reg = table().resolve(&args).unwrap();
        let client = ClientInfo { resp, ..ClientInfo::default() };
        ShardCommand { id: reg.id, spec: reg.spec, args, client }
    }

    fn exec(shard: &mut Shard, line: &str) {
        let mut out = Vec::new();
        shard.call(&command(line, Resp::V2), &mut out, &mut Clock::start(), Caller::Client);
    }

    fn watch(shard: &mut Shard, line: &str, core: u16, resp: Resp) -> (u64, Bytes) {
        let cmd = command(line, resp);
        let name = Bytes::from(cmd.spec.name.to_ascii_uppercase());
        let fp = fingerprint(cmd.spec.name, &cmd.args[1..], 0);
        let key = cmd.args[1].clone();
        (fp, shard.watch_query(fp, Query { name, command: cmd, key }, core, resp, 0))
    }

    fn shard() -> Shard {
        Shard::new(ShardId(0), SlotMap::new(1), ShardSettings::default(), 1)
    }

    fn pushed(shard: &mut Shard) -> Vec<(u16, Option<String>, Option<String>)> {
        let text = |b: &Option<Bytes>| b.as_ref().map(|b| String::from_utf8_lossy(b).into_owned());
        std::mem::take(&mut shard.state.funnel.out.watch_pushes)
            .iter()
            .map(|p| (p.core, text(&p.results[0]), text(&p.results[1])))
            .collect()
    }

    #[test]
    fn fingerprints_normalise_the_name_and_keep_the_arguments() {
        let args = [Bytes::from_static(b"k")];
        assert_eq!(fingerprint("get", &args, 0), fingerprint("GET", &args, 0));
        assert_ne!(
            fingerprint("get", &args, 0),
            fingerprint("get", &[Bytes::from_static(b"K")], 0)
        );
        assert_ne!(fingerprint("get", &args, 0), fingerprint("get", &args, 1));
        assert_ne!(fingerprint("get", &args, 0), fingerprint("strlen", &args, 0));
    }

    #[test]
    fn a_change_is_pushed_once_per_core_and_only_when_the_result_changes() {
        let mut s = shard();
        let (fp, first) = watch(&mut s, "pfcount users", 0, Resp::V2);
        assert_eq!(&first[..], b":0\r\n");
        let (same, _) = watch(&mut s, "PFCOUNT users", 1, Resp::V3);
        let (_, _) = watch(&mut s, "pfcount users", 1, Resp::V3);
        assert_eq!(fp, same, "watchers of one query share its fingerprint");
        assert_eq!(s.state.funnel.queries.counts(), (1, 3));

        exec(&mut s, "pfadd users a");
        assert_eq!(
            pushed(&mut s),
            vec![(0, Some(":1\r\n".into()), None), (1, None, Some(":1\r\n".into()))]
        );
        // A write that leaves the result as it was pushes nothing; other
        // keys never wake the query.
        exec(&mut s, "pfadd users a");
        exec(&mut s, "pfadd others b");
        assert!(pushed(&mut s).is_empty());
        exec(&mut s, "del users");
        assert_eq!(pushed(&mut s).len(), 2);

        s.unwatch_query(fp, 1, Resp::V3);
        s.unwatch_query(fp, 1, Resp::V3);
        exec(&mut s, "pfadd users z");
        assert_eq!(pushed(&mut s), vec![(0, Some(":1\r\n".into()), None)]);
        s.unwatch_query(fp, 0, Resp::V2);
        assert!(s.state.funnel.queries.is_empty());
        exec(&mut s, "pfadd users y");
        assert!(pushed(&mut s).is_empty());
    }

    #[test]
    fn flushes_wake_the_queries_of_their_database() {
        let mut s = shard();
        exec(&mut s, "set k v");
        let (_, first) = watch(&mut s, "get k", 0, Resp::V2);
        assert_eq!(&first[..], b"$1\r\nv\r\n");
        // FLUSHDB runs on every shard through the server; the server re-runs
        // the queries after it, as here.
        crate::families::keys::op_flush(&mut s, Some(0), false);
        s.rerun_queries(0);
        assert_eq!(pushed(&mut s), vec![(0, Some("$-1\r\n".into()), None)]);
    }

    #[test]
    fn reruns_are_not_client_reads() {
        let mut s = shard();
        let (_, _) = watch(&mut s, "get k", 0, Resp::V2);
        exec(&mut s, "set k v");
        let stats = &s.state.stats;
        assert_eq!((stats.keyspace_hits, stats.keyspace_misses), (0, 0));
        let get = table().get(b"get").unwrap().id;
        assert_eq!(s.state.stats.commands.get(get).map_or(0, |c| c.calls), 0);
        assert_eq!(s.state.funnel.queries.reexecutions, 2);
    }
}
