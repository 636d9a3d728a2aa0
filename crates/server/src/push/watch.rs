//! Reactive queries, the home-core half: which of this core's connections
//! watch which query, and the delivery of the results a query's shard
//! pushes here.
//!
//! The shard half ([`ringdb_engine::query_watch`]) knows only how many
//! watchers each core has per protocol; it re-runs a changed query once and
//! sends each of those cores one message with the new result. This core
//! fans it out to its own watchers' mailboxes.
//!
//! Order: a watcher is added here by a job the shard queues on this core's
//! mesh queue right after it registered the watcher and computed its first
//! result — behind every result it pushed here before. So a new watcher
//! never receives a result older than its first one.

use super::Push;
use bytes::Bytes;
use ringdb_engine::acl::Verdict;
use ringdb_engine::command::Registered;
use ringdb_engine::query_watch::WatchPush;
use ringdb_engine::ShardId;
use ringdb_protocol::Resp;
use std::collections::HashMap;
use std::sync::Arc;

/// One of a connection's reactive queries (its side of the bookkeeping).
#[derive(Clone, Debug)]
pub struct WatchedQuery {
    /// `PFCOUNT`: the command name without `.WATCH`, upper case.
    pub name: Bytes,
    /// The shard that owns the query's key.
    pub shard: ShardId,
    /// The protocol the results were asked in.
    pub resp: Resp,
}

/// This core's watchers, by fingerprint.
#[derive(Default)]
pub struct QueryWatchers {
    by_fingerprint: HashMap<u64, Vec<Watcher>>,
}

/// A client, its protocol, and for a restricted ACL user what each result
/// is checked against.
type Watcher = (u64, Resp, Option<Arc<Permission>>);

/// A restricted user's watch: the user's uid and the `<NAME>.WATCH`
/// request. A result is pushed only while the user (as it is then) may
/// still run that request.
pub struct Permission {
    pub uid: u32,
    pub reg: &'static Registered,
    pub args: Vec<Bytes>,
}

impl Permission {
    fn allows(&self) -> bool {
        let acl = ringdb_engine::acl::registry();
        acl.by_uid(self.uid).is_some_and(|u| u.check(self.reg, &self.args) == Verdict::Allowed)
    }
}

impl QueryWatchers {
    pub fn add(
        &mut self,
        fingerprint: u64,
        client: u64,
        resp: Resp,
        permission: Option<Arc<Permission>>,
    ) {
        let watchers = self.by_fingerprint.entry(fingerprint).or_default();
        if !watchers.iter().any(|(c, _, _)| *c == client) {
            watchers.push((client, resp, permission));
        }
    }

    pub fn remove(&mut self, fingerprint: u64, client: u64) {
        if let Some(watchers) = self.by_fingerprint.get_mut(&fingerprint) {
            watchers.retain(|(c, _, _)| *c != client);
            if watchers.is_empty() {
                self.by_fingerprint.remove(&fingerprint);
            }
        }
    }

    /// The pushes a new result makes: one per local watcher whose protocol
    /// the result was computed in.
    pub fn fan_out(&self, push: &WatchPush) -> Vec<(u64, Push)> {
        let Some(watchers) = self.by_fingerprint.get(&push.fingerprint) else {
            return Vec::new();
        };
        watchers
            .iter()
            .filter_map(|(client, resp, permission)| {
                if permission.as_ref().is_some_and(|p| !p.allows()) {
                    return None;
                }
                let result = push.results[resp_index(*resp)].clone()?;
                Some((
                    *client,
                    Push::Watch { name: push.name.clone(), fingerprint: push.fingerprint, result },
                ))
            })
            .collect()
    }

    /// Connections of this core watching something.
    pub fn watching_clients(&self) -> usize {
        let mut clients: Vec<u64> =
            self.by_fingerprint.values().flatten().map(|(c, _, _)| *c).collect();
        clients.sort_unstable();
        clients.dedup();
        clients.len()
    }
}

/// The index [`WatchPush::results`] keeps a protocol's result at.
fn resp_index(resp: Resp) -> usize {
    match resp {
        Resp::V2 => 0,
        Resp::V3 => 1,
    }
}

/// Writes a reactive query's frame: its name, its fingerprint in decimal and
/// the result as the command replies it (already encoded in the
/// watcher's protocol). A push frame in RESP3, an array in RESP2.
pub fn encode(
    name: &[u8],
    fingerprint: u64,
    result: &[u8],
    out: &mut ringdb_protocol::ReplyWriter,
) {
    out.push(3);
    out.bulk(name);
    out.bulk(fingerprint.to_string().as_bytes());
    out.raw(result);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn push(fingerprint: u64, v2: Option<&str>, v3: Option<&str>) -> WatchPush {
        WatchPush {
            core: 0,
            fingerprint,
            name: Bytes::from_static(b"GET"),
            results: [
                v2.map(|s| Bytes::from(s.to_string())),
                v3.map(|s| Bytes::from(s.to_string())),
            ],
        }
    }

    #[test]
    fn results_reach_the_watchers_of_their_protocol_only() {
        let mut w = QueryWatchers::default();
        w.add(7, 1, Resp::V2, None);
        w.add(7, 2, Resp::V3, None);
        w.add(7, 2, Resp::V3, None);
        w.add(8, 3, Resp::V2, None);
        let sent = w.fan_out(&push(7, Some("$1\r\na\r\n"), None));
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].0, 1);
        assert_eq!(w.fan_out(&push(7, Some("x"), Some("y"))).len(), 2);
        assert_eq!(w.watching_clients(), 3);
        w.remove(7, 1);
        w.remove(7, 2);
        assert!(w.fan_out(&push(7, Some("x"), Some("y"))).is_empty());
        assert_eq!(w.watching_clients(), 1);
    }

    #[test]
    fn frames_carry_name_fingerprint_and_the_raw_result() {
        let mut buf = Vec::new();
        encode(
            b"PFCOUNT",
            42,
            b":3\r\n",
            &mut ringdb_protocol::ReplyWriter::new(&mut buf, Resp::V3),
        );
        assert_eq!(buf, b">3\r\n$7\r\nPFCOUNT\r\n$2\r\n42\r\n:3\r\n");
        buf.clear();
        encode(b"GET", 1, b"$-1\r\n", &mut ringdb_protocol::ReplyWriter::new(&mut buf, Resp::V2));
        assert_eq!(buf, b"*3\r\n$3\r\nGET\r\n$1\r\n1\r\n$-1\r\n");
    }
}
