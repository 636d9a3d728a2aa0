//! The push path: everything the server sends a client without being asked
//! for it at that moment — Pub/Sub messages (keyspace notifications are
//! Pub/Sub messages), reactive-query results ([`watch`]), client-side
//! caching invalidations ([`tracking`]) and hot-key events ([`hotkeys`]).
//!
//! Each core keeps a [`PushHub`]: a mailbox per connection that receives
//! pushes, and the Pub/Sub subscriptions of its own connections. Whoever has
//! something for a client sends it to the client's home core (one mesh
//! message per core, however many subscribers it has there), which drops it
//! in the mailboxes; the connection writes pushes out between replies.
//!
//! So that PUBLISH reaches only the cores that have subscribers, every core
//! also keeps a summary of which other cores have subscribers for which
//! channels and patterns, updated by a broadcast when a core gains its first
//! or loses its last subscriber of one.
//!
//! Slow receivers: the bytes waiting in a mailbox count against
//! `client-output-buffer-limit pubsub`; past the hard limit, or past the soft
//! limit for longer than its seconds, the client is disconnected, as Redis
//! does. Nobody else waits for it.

pub mod hotkeys;
pub mod tracking;
pub mod watch;

use crate::net::clients::ClientHandle;
use bytes::Bytes;
use std::collections::HashMap;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Instant;

/// What a connection can be sent unasked.
#[derive(Clone, Debug)]
pub enum Push {
    /// A message on a channel (`message`) or a shard channel (`smessage`).
    Message { kind: Kind, channel: Bytes, payload: Bytes },
    /// A message on a channel matching a pattern (`pmessage`).
    PMessage { pattern: Bytes, channel: Bytes, payload: Bytes },
    /// Client-side caching: these keys (`None`: every key, after a flush)
    /// may have changed. A push, or a message on `__redis__:invalidate`
    /// (`channel`) for a RESP2 redirect target.
    Invalidate { keys: Option<Vec<Bytes>>, channel: bool },
    /// The client tracking redirects to is gone (its id).
    RedirBroken(u64),
    /// A reactive query's new result, encoded in the watcher's protocol.
    Watch { name: Bytes, fingerprint: u64, result: Bytes },
    /// A key became hot or cooled down (`HOTKEYS.WATCH`).
    Hotkey(ringdb_engine::hotkeys::HotEvent),
    /// A command someone ran, for a client in MONITOR (a status reply,
    /// already encoded: see `ringdb_engine::monitor`).
    Monitor(Bytes),
}

impl Push {
    /// Bytes it costs while waiting (for the output buffer limit).
    pub fn size(&self) -> usize {
        match self {
            // What a queued message holds beyond its bytes: the push, its
            // slot in the mailbox, and the copies' allocations.
            Push::Message { channel, payload, .. } => channel.len() + payload.len() + 96,
            Push::PMessage { pattern, channel, payload } => {
                pattern.len() + channel.len() + payload.len() + 112
            }
            Push::Invalidate { keys, .. } => {
                keys.iter().flatten().map(|k| k.len() + 16).sum::<usize>() + 48
            }
            Push::RedirBroken(_) => 48,
            Push::Watch { name, result, .. } => name.len() + result.len() + 48,
            Push::Hotkey(event) => event.key().len() + 96,
            Push::Monitor(line) => line.len(),
        }
    }
}

/// The two channel namespaces (and patterns over the first).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Kind {
    Channel,
    Pattern,
    ShardChannel,
}

/// `client-output-buffer-limit` for one client class: hard bytes, soft
/// bytes, soft seconds (0 = no limit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BufferLimit {
    pub hard: usize,
    pub soft: usize,
    pub soft_seconds: u64,
}

struct Mailbox {
    tx: flume::Sender<Push>,
    handle: Rc<ClientHandle>,
}

/// A core's mailboxes and Pub/Sub subscriptions.
#[derive(Default)]
pub struct PushHub {
    mailboxes: HashMap<u64, Mailbox>,
    /// Local subscribers by kind and name, in subscription order.
    local: BTreeMap<(Kind, Bytes), Vec<u64>>,
    /// Other cores with subscribers, by kind and name.
    remote: HashMap<(Kind, Bytes), BTreeSet<u16>>,
    /// Reactive-query watchers among this core's connections.
    pub queries: watch::QueryWatchers,
    /// Hot-key watchers among this core's connections.
    pub hotkeys: hotkeys::HotkeyWatchers,
    /// Clients disconnected for exceeding their output buffer limit.
    pub limit_disconnections: u64,
    /// This core's client-side caching clients.
    pub tracking: tracking::TrackingClients,
    /// This core's clients in MONITOR, and the cores (this one too) that
    /// have some.
    pub monitors: Vec<u64>,
    pub monitor_cores: BTreeSet<u16>,
}

impl PushHub {
    /// Gives a client a mailbox (its first subscription).
    pub fn register(&mut self, handle: Rc<ClientHandle>) -> flume::Receiver<Push> {
        let (tx, rx) = flume::unbounded();
        self.mailboxes.insert(handle.id, Mailbox { tx, handle });
        rx
    }

    /// Forgets a client (it disconnected); returns the names it was the last
    /// local subscriber of, for the summary broadcast.
    pub fn unregister(&mut self, id: u64) -> Vec<(Kind, Bytes)> {
        self.mailboxes.remove(&id);
        let mut emptied = Vec::new();
        self.local.retain(|name, subscribers| {
            subscribers.retain(|&c| c != id);
            if subscribers.is_empty() {
                emptied.push(name.clone());
                false
            } else {
                true
            }
        });
        emptied
    }

    /// Adds a subscription; true when this core had no subscriber of it.
    pub fn subscribe(&mut self, kind: Kind, name: Bytes, id: u64) -> bool {
        let subscribers = self.local.entry((kind, name)).or_default();
        let first = subscribers.is_empty();
        if !subscribers.contains(&id) {
            subscribers.push(id);
        }
        first
    }

    /// Whether client `id` subscribes to something `allowed` refuses
    /// (channels and shard channels by name, patterns as written): an ACL
    /// change took a channel away.
    pub fn subscribes_outside(&self, id: u64, allowed: impl Fn(&[u8], bool) -> bool) -> bool {
        self.local
            .iter()
            .any(|((kind, name), ids)| ids.contains(&id) && !allowed(name, *kind == Kind::Pattern))
    }

    /// Removes a subscription; true when it was this core's last.
    pub fn unsubscribe(&mut self, kind: Kind, name: &Bytes, id: u64) -> bool {
        let key = (kind, name.clone());
        let Some(subscribers) = self.local.get_mut(&key) else { return false };
        subscribers.retain(|&c| c != id);
        if subscribers.is_empty() {
            self.local.remove(&key);
            return true;
        }
        false
    }

    /// Another core gained its first (`present`) or lost its last
    /// subscriber of a name.
    pub fn note_remote(&mut self, kind: Kind, name: Bytes, core: u16, present: bool) {
        let key = (kind, name);
        if present {
            self.remote.entry(key).or_default().insert(core);
        } else if let Some(cores) = self.remote.get_mut(&key) {
            cores.remove(&core);
            if cores.is_empty() {
                self.remote.remove(&key);
            }
        }
    }

    /// The cores a message on `channel` must reach (this one included when
    /// it has subscribers), for `Kind::Channel` (with patterns) or
    /// `Kind::ShardChannel`.
    pub fn targets(&self, kind: Kind, channel: &[u8], me: u16) -> BTreeSet<u16> {
        let mut cores = BTreeSet::new();
        let key = (kind, Bytes::copy_from_slice(channel));
        if self.local.contains_key(&key) {
            cores.insert(me);
        }
        if let Some(remote) = self.remote.get(&key) {
            cores.extend(remote);
        }
        if kind == Kind::Channel {
            for ((k, pattern), remote) in &self.remote {
                if *k == Kind::Pattern && ringdb_types::glob::glob_match(pattern, channel, false) {
                    cores.extend(remote);
                }
            }
            if self.local_patterns().any(|p| ringdb_types::glob::glob_match(p, channel, false)) {
                cores.insert(me);
            }
        }
        cores
    }

    fn local_patterns(&self) -> impl Iterator<Item = &Bytes> {
        self.local
            .range((Kind::Pattern, Bytes::new())..(Kind::ShardChannel, Bytes::new()))
            .map(|((_, p), _)| p)
    }

    /// Delivers a message to this core's subscribers; returns how many
    /// received it (PUBLISH's count).
    pub fn deliver(
        &mut self,
        kind: Kind,
        channel: &Bytes,
        payload: &Bytes,
        limit: BufferLimit,
    ) -> i64 {
        // Copied once, for every subscriber here: the arguments are slices
        // of the publisher's input buffer, which a queued message would
        // otherwise keep whole (up to twice what the output limit counts).
        let mut copies: Option<(Bytes, Bytes)> = None;
        let mut owned = || {
            copies
                .get_or_insert_with(|| {
                    (Bytes::copy_from_slice(channel), Bytes::copy_from_slice(payload))
                })
                .clone()
        };
        let mut sends: Vec<(u64, Push)> = Vec::new();
        if let Some(subscribers) = self.local.get(&(kind, channel.clone())) {
            for &id in subscribers {
                let (channel, payload) = owned();
                sends.push((id, Push::Message { kind, channel, payload }));
            }
        }
        if kind == Kind::Channel {
            for ((k, pattern), subscribers) in &self.local {
                if *k == Kind::Pattern && ringdb_types::glob::glob_match(pattern, channel, false) {
                    for &id in subscribers {
                        let (channel, payload) = owned();
                        let pattern = pattern.clone();
                        sends.push((id, Push::PMessage { pattern, channel, payload }));
                    }
                }
            }
        }
        let count = sends.len() as i64;
        for (id, push) in sends {
            self.send(id, push, limit);
        }
        count
    }

    /// How many of this core's clients a message on `channel` would reach
    /// ([`deliver`](Self::deliver)'s count, sending nothing): a script's
    /// PUBLISH replies this before the message goes out.
    pub fn receivers(&self, kind: Kind, channel: &[u8]) -> i64 {
        let key = (kind, Bytes::copy_from_slice(channel));
        let mut count = self.local.get(&key).map_or(0, Vec::len);
        if kind == Kind::Channel {
            for ((k, pattern), subscribers) in &self.local {
                if *k == Kind::Pattern && ringdb_types::glob::glob_match(pattern, channel, false) {
                    count += subscribers.len();
                }
            }
        }
        count as i64
    }

    /// Delivers a reactive query's new result to this core's watchers.
    pub fn deliver_watch(
        &mut self,
        push: &ringdb_engine::query_watch::WatchPush,
        limit: BufferLimit,
    ) {
        for (id, push) in self.queries.fan_out(push) {
            self.send(id, push, limit);
        }
    }

    /// Delivers hot / cold key events to this core's watchers.
    pub fn deliver_hotkeys(
        &mut self,
        events: &[ringdb_engine::hotkeys::HotEvent],
        limit: BufferLimit,
    ) {
        for (id, push) in self.hotkeys.fan_out(events) {
            self.send(id, push, limit);
        }
    }

    /// Delivers MONITOR lines to this core's monitors.
    pub fn deliver_monitor(&mut self, lines: &[Bytes], limit: BufferLimit) {
        for id in self.monitors.clone() {
            for line in lines {
                self.send(id, Push::Monitor(line.clone()), limit);
            }
        }
    }

    /// Puts a push in a client's mailbox, enforcing its output buffer limit.
    pub fn send(&mut self, id: u64, push: Push, limit: BufferLimit) {
        let Some(mailbox) = self.mailboxes.get(&id) else { return };
        if mailbox.handle.is_killed() {
            return;
        }
        let pending = mailbox.handle.pending_push_bytes.get() + push.size();
        if over_limit(&mailbox.handle, pending, limit) {
            tracing::warn!(
                client = id,
                pending,
                "closing a subscriber that reached its output buffer limit"
            );
            mailbox.handle.kill();
            self.limit_disconnections += 1;
            return;
        }
        mailbox.handle.pending_push_bytes.set(pending);
        let _ = mailbox.tx.send(push);
    }

    /// Names with subscribers on this core, of one kind (PUBSUB CHANNELS /
    /// SHARDCHANNELS).
    pub fn names(&self, kind: Kind) -> impl Iterator<Item = &Bytes> {
        self.local.keys().filter(move |(k, _)| *k == kind).map(|(_, n)| n)
    }

    /// Subscribers on this core of a name (PUBSUB NUMSUB / SHARDNUMSUB).
    pub fn subscriber_count(&self, kind: Kind, name: &Bytes) -> usize {
        self.local.get(&(kind, name.clone())).map_or(0, Vec::len)
    }
}

/// Redis's `checkClientOutputBufferLimits` for the bytes waiting.
pub fn over_limit(handle: &ClientHandle, pending: usize, limit: BufferLimit) -> bool {
    if limit.hard > 0 && pending >= limit.hard {
        return true;
    }
    if limit.soft > 0 && pending >= limit.soft {
        let since = handle.soft_limit_since.get().unwrap_or_else(|| {
            let now = Instant::now();
            handle.soft_limit_since.set(Some(now));
            now
        });
        return since.elapsed().as_secs() >= limit.soft_seconds;
    }
    handle.soft_limit_since.set(None);
    false
}

/// Writes a push in the client's protocol (`message`/`smessage`/`pmessage`
/// arrays in RESP2, push frames in RESP3).
pub fn encode(push: &Push, out: &mut ringdb_protocol::ReplyWriter) {
    match push {
        Push::Message { kind, channel, payload } => {
            out.push(3);
            out.bulk(if *kind == Kind::ShardChannel { b"smessage" } else { b"message" });
            out.bulk(channel);
            out.bulk(payload);
        }
        Push::PMessage { pattern, channel, payload } => {
            out.push(4);
            out.bulk(b"pmessage");
            out.bulk(pattern);
            out.bulk(channel);
            out.bulk(payload);
        }
        Push::Invalidate { keys, channel } => {
            if *channel {
                out.push(3);
                out.bulk(b"message");
                out.bulk(tracking::CHANNEL);
            } else {
                out.push(2);
                out.bulk(b"invalidate");
            }
            match keys {
                Some(keys) => {
                    out.array(keys.len());
                    for key in keys {
                        out.bulk(key);
                    }
                }
                None => out.null(),
            }
        }
        Push::RedirBroken(id) => {
            out.push(2);
            out.bulk(b"tracking-redir-broken");
            out.int(*id as i64);
        }
        Push::Watch { name, fingerprint, result } => watch::encode(name, *fingerprint, result, out),
        Push::Hotkey(event) => hotkeys::encode(event, out),
        Push::Monitor(line) => out.raw(line),
    }
}
