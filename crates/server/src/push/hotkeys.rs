//! `HOTKEYS.WATCH`, the home-core half: which of this core's connections
//! watch hot keys (and for which key patterns), and the delivery of the
//! hot / cold events shards send here.
//!
//! Every shard knows how many watchers each core has
//! ([`ringdb_engine::hotkeys::HotKeys::watchers`]) and sends each such core
//! its events, in order, through the mesh; this core filters them by each
//! watcher's patterns and drops them in the mailboxes.

use super::Push;
use bytes::Bytes;
use ringdb_engine::hotkeys::HotEvent;
use std::collections::BTreeMap;

/// This core's hot-key watchers: client id → its patterns (empty = every
/// key), and the uid of its ACL user when that user may not read every
/// key: it is told only of keys its user may read.
#[derive(Default)]
pub struct HotkeyWatchers {
    by_client: BTreeMap<u64, Vec<Bytes>>,
    restricted: BTreeMap<u64, u32>,
}

impl HotkeyWatchers {
    /// Adds a watcher, or patterns to one (none = every key; a watcher of
    /// every key stays one).
    pub fn add(&mut self, client: u64, patterns: &[Bytes], acl_user: Option<u32>) {
        match acl_user {
            Some(uid) => self.restricted.insert(client, uid),
            None => self.restricted.remove(&client),
        };
        match self.by_client.get_mut(&client) {
            None => {
                self.by_client.insert(client, patterns.to_vec());
            }
            Some(existing) if existing.is_empty() => {}
            Some(existing) if patterns.is_empty() => existing.clear(),
            Some(existing) => {
                for p in patterns {
                    if !existing.contains(p) {
                        existing.push(p.clone());
                    }
                }
            }
        }
    }

    pub fn remove(&mut self, client: u64) {
        self.by_client.remove(&client);
        self.restricted.remove(&client);
    }

    pub fn len(&self) -> usize {
        self.by_client.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_client.is_empty()
    }

    /// Whether `client`'s patterns let `key` through.
    pub fn wants(&self, client: u64, key: &[u8]) -> bool {
        let matches = self.by_client.get(&client).is_some_and(|patterns| {
            patterns.is_empty()
                || patterns.iter().any(|p| ringdb_types::glob::glob_match(p, key, false))
        });
        matches && self.restricted.get(&client).is_none_or(|&uid| may_read(uid, key))
    }

    /// The pushes `events` make for this core's watchers.
    pub fn fan_out(&self, events: &[HotEvent]) -> Vec<(u64, Push)> {
        let mut out = Vec::new();
        for event in events {
            for &client in self.by_client.keys() {
                if self.wants(client, event.key()) {
                    out.push((client, Push::Hotkey(event.clone())));
                }
            }
        }
        out
    }
}

/// Writes a hot-key push: `["hotkey", key, count, rule]` or
/// `["coldkey", key]`, a push frame in RESP3, an array in RESP2.
pub fn encode(event: &HotEvent, out: &mut ringdb_protocol::ReplyWriter) {
    match event {
        HotEvent::Hot { key, count, rule, .. } => {
            out.push(4);
            out.bulk(b"hotkey");
            out.bulk(key);
            out.int(*count as i64);
            out.bulk(rule);
        }
        HotEvent::Cold { key, .. } => {
            out.push(2);
            out.bulk(b"coldkey");
            out.bulk(key);
        }
    }
}

/// Whether the ACL user with `uid` (as it is now) may read `key`; a user
/// deleted meanwhile may read nothing.
fn may_read(uid: u32, key: &[u8]) -> bool {
    let acl = ringdb_engine::acl::registry();
    acl.by_uid(uid).is_some_and(|u| u.may_read(key))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ringdb_protocol::Resp;

    fn hot(key: &'static str) -> HotEvent {
        HotEvent::Hot {
            db: 0,
            key: Bytes::from_static(key.as_bytes()),
            count: 12,
            rule: Bytes::from_static(b"r"),
        }
    }

    #[test]
    fn events_reach_the_watchers_whose_patterns_match() {
        let mut w = HotkeyWatchers::default();
        w.add(1, &[], None);
        w.add(1, &[Bytes::from_static(b"user:*")], None);
        w.add(2, &[Bytes::from_static(b"user:*")], None);
        w.add(2, &[Bytes::from_static(b"item:*")], None);
        let cold = HotEvent::Cold { db: 0, key: Bytes::from_static(b"user:1") };
        let sent: Vec<u64> =
            w.fan_out(&[hot("user:1"), hot("cart:9"), cold]).iter().map(|(c, _)| *c).collect();
        assert_eq!(sent, vec![1, 2, 1, 1, 2]);
        assert!(!w.wants(2, b"cart:9"));
        w.add(2, &[], None);
        assert!(w.wants(2, b"cart:9"));
        w.remove(1);
        w.remove(2);
        assert!(w.is_empty() && w.fan_out(&[hot("x")]).is_empty());
    }

    #[test]
    fn frames_as_the_issue_describes_them() {
        let mut buf = Vec::new();
        encode(&hot("k"), &mut ringdb_protocol::ReplyWriter::new(&mut buf, Resp::V3));
        assert_eq!(buf, b">4\r\n$6\r\nhotkey\r\n$1\r\nk\r\n:12\r\n$1\r\nr\r\n");
        buf.clear();
        let cold = HotEvent::Cold { db: 0, key: Bytes::from_static(b"k") };
        encode(&cold, &mut ringdb_protocol::ReplyWriter::new(&mut buf, Resp::V2));
        assert_eq!(buf, b"*2\r\n$7\r\ncoldkey\r\n$1\r\nk\r\n");
    }
}
