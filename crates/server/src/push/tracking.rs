//! Client-side caching, the connection half (Redis's `tracking.c` and the
//! CLIENT TRACKING state of `networking.c`): which clients of this core
//! track, how, and the delivery of the invalidations shards send them.
//!
//! The shards keep the tracked keys ([`ringdb_engine::tracking`]); the
//! settings of a tracking client live here, on its home core, in its core's
//! [`TrackingClients`]. A shard's invalidations travel to the readers' home
//! cores (one mesh job per core per batch of shard work); there each reader
//! still tracking gets an `invalidate` push (RESP3), or its redirect target
//! gets it, as a push under RESP3 or as a `__redis__:invalidate` message
//! under RESP2 when it is subscribed. A redirect target that is gone turns
//! into a `tracking-redir-broken` push to the reader, as in Redis.
//!
//! BCAST: each core knows its own BCAST clients by prefix and tells every
//! shard when it gains its first or loses its last client of a prefix; the
//! shards send every change to a key under such a prefix to the core, which
//! sends each client one message per prefix with the keys it covers.

use crate::node::Core;
use crate::push::Push;
use bytes::Bytes;
use ringdb_engine::command::CmdError;
use ringdb_engine::tracking::{BcastChange, Outbox};
use ringdb_engine::ShardId;
use ringdb_protocol::Resp;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::rc::Rc;

/// The channel RESP2 redirect targets subscribe to.
pub const CHANNEL: &[u8] = b"__redis__:invalidate";

/// Which reads of a tracking connection make the shards remember its keys
/// (the connection keeps this; [`ClientTracking`] is the rest).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Remember {
    /// Default mode: every read.
    Every,
    /// OPTIN: reads after CLIENT CACHING YES.
    OptIn,
    /// OPTOUT: reads not after CLIENT CACHING NO.
    OptOut,
    /// BCAST: none (prefixes decide).
    Never,
}

impl Remember {
    pub fn of(options: &Options) -> Remember {
        if options.bcast {
            Remember::Never
        } else if options.optin {
            Remember::OptIn
        } else if options.optout {
            Remember::OptOut
        } else {
            Remember::Every
        }
    }

    /// Whether the next command's reads are remembered, given whether
    /// CLIENT CACHING was given for it.
    pub fn now(self, caching: bool) -> bool {
        match self {
            Remember::Every => true,
            Remember::OptIn => caching,
            Remember::OptOut => !caching,
            Remember::Never => false,
        }
    }
}

/// The options of one CLIENT TRACKING call.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Options {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    pub prefixes: Vec<Bytes>,
}

/// A parsed CLIENT TRACKING. Redis checks the REDIRECT client as soon as
/// it reads the option, so an error in a later option comes after that
/// check: `redirect` is the id read before parsing stopped, and `options`
/// the rest of the result.
#[derive(Debug)]
pub struct Request {
    pub on: Result<bool, CmdError>,
    pub redirect: Option<i64>,
    pub options: Result<Options, CmdError>,
}

/// Parses `CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p]... [BCAST]
/// [OPTIN] [OPTOUT] [NOLOOP]` as Redis's `clientCommand` does.
pub fn parse(args: &[Bytes]) -> Request {
    use ringdb_engine::command::args::is;
    use ringdb_engine::command::error::{NOT_INTEGER, SYNTAX};
    let mut redirect: Option<i64> = None;
    let mut options = Options::default();
    let mut failure = None;
    let mut j = 3;
    while j < args.len() {
        let more = j + 1 < args.len();
        let arg = &args[j];
        if is(arg, "redirect") && more {
            j += 1;
            if redirect.is_some_and(|r| r != 0) {
                failure =
                    Some(CmdError::new("ERR A client can only redirect to a single other client"));
                break;
            }
            match ringdb_types::number::parse_i64(&args[j]) {
                Some(id) => redirect = Some(id),
                None => {
                    failure = Some(NOT_INTEGER);
                    break;
                }
            }
        } else if is(arg, "bcast") {
            options.bcast = true;
        } else if is(arg, "optin") {
            options.optin = true;
        } else if is(arg, "optout") {
            options.optout = true;
        } else if is(arg, "noloop") {
            options.noloop = true;
        } else if is(arg, "prefix") && more {
            j += 1;
            // A copy: kept as long as tracking is on (an argument would
            // keep the client's whole input buffer alive).
            options.prefixes.push(Bytes::copy_from_slice(&args[j]));
        } else {
            failure = Some(SYNTAX);
            break;
        }
        j += 1;
    }
    let on = if is(&args[2], "on") {
        Ok(true)
    } else if is(&args[2], "off") {
        Ok(false)
    } else {
        Err(SYNTAX)
    };
    Request { on, redirect, options: failure.map_or(Ok(options), Err) }
}

/// One tracking client's settings, on its home core.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientTracking {
    pub bcast: bool,
    pub optin: bool,
    pub optout: bool,
    pub noloop: bool,
    /// The client invalidations go to (0: this client) and its core.
    pub redirect: u64,
    pub redirect_core: u16,
    /// BCAST prefixes (they stay until tracking is turned off).
    pub prefixes: BTreeSet<Bytes>,
    /// An invalidation found the redirect target gone.
    pub broken_redirect: bool,
}

impl ClientTracking {
    /// Redis's checks of CLIENT TRACKING ON against the options and the
    /// client's current state (`self`, when it tracks already), in Redis's
    /// order.
    pub fn check(current: Option<&ClientTracking>, options: &Options) -> Result<(), CmdError> {
        if !options.bcast && !options.prefixes.is_empty() {
            return Err(CmdError::new("ERR PREFIX option requires BCAST mode to be enabled"));
        }
        if current.is_some_and(|c| c.bcast != options.bcast) {
            return Err(CmdError::new(
                "ERR You can't switch BCAST mode on/off before disabling tracking for this client, \
                 and then re-enabling it with a different mode.",
            ));
        }
        if options.bcast && (options.optin || options.optout) {
            return Err(CmdError::new("ERR OPTIN and OPTOUT are not compatible with BCAST"));
        }
        if options.optin && options.optout {
            return Err(CmdError::new("ERR You can't specify both OPTIN mode and OPTOUT mode"));
        }
        let switches =
            current.is_some_and(|c| (options.optin && c.optout) || (options.optout && c.optin));
        if switches {
            return Err(CmdError::new(
                "ERR You can't switch OPTIN/OPTOUT mode before disabling tracking for this client, \
                 and then re-enabling it with a different mode.",
            ));
        }
        if options.bcast {
            let existing = current.map(|c| &c.prefixes);
            check_prefix_collisions(existing, &options.prefixes)?;
        }
        Ok(())
    }
}

/// Two prefixes collide when one starts with the other: both would send
/// the same key (Redis's `checkPrefixCollisionsOrReply`).
fn check_prefix_collisions(
    existing: Option<&BTreeSet<Bytes>>,
    prefixes: &[Bytes],
) -> Result<(), CmdError> {
    let overlap = |a: &[u8], b: &[u8]| a.starts_with(b) || b.starts_with(a);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    for (i, prefix) in prefixes.iter().enumerate() {
        if let Some(old) = existing.into_iter().flatten().find(|old| overlap(old, prefix)) {
            return Err(CmdError::owned(format!(
                "ERR Prefix '{}' overlaps with an existing prefix '{}'. Prefixes for a single client must not overlap.",
                text(prefix),
                text(old)
            )));
        }
        if let Some(other) = prefixes[i + 1..].iter().find(|other| overlap(prefix, other)) {
            return Err(CmdError::owned(format!(
                "ERR Prefix '{}' overlaps with another provided prefix '{}'. Prefixes for a single client must not overlap.",
                text(prefix),
                text(other)
            )));
        }
    }
    Ok(())
}

/// The tracking clients of one core.
#[derive(Debug, Default)]
pub struct TrackingClients {
    clients: HashMap<u64, ClientTracking>,
    /// This core's BCAST clients by prefix.
    prefixes: BTreeMap<Bytes, BTreeSet<u64>>,
}

impl TrackingClients {
    pub fn get(&self, id: u64) -> Option<&ClientTracking> {
        self.clients.get(&id)
    }

    /// Tracking clients on this core (INFO `tracking_clients`).
    pub fn len(&self) -> usize {
        self.clients.len()
    }

    pub fn is_empty(&self) -> bool {
        self.clients.is_empty()
    }

    /// Turns tracking on (or changes it) for `id`, as Redis's
    /// `enableTracking`: the flags are replaced, BCAST prefixes are added
    /// to those the client has (the empty prefix when none is given).
    /// Returns the prefixes this core had no client of before.
    pub fn enable(&mut self, id: u64, redirect: (u64, u16), options: Options) -> Vec<Bytes> {
        let client = self.clients.entry(id).or_default();
        let prefixes = std::mem::take(&mut client.prefixes);
        *client = ClientTracking {
            bcast: options.bcast,
            optin: options.optin,
            optout: options.optout,
            noloop: options.noloop,
            redirect: redirect.0,
            redirect_core: redirect.1,
            prefixes,
            broken_redirect: false,
        };
        let mut gained = Vec::new();
        if !options.bcast {
            return gained;
        }
        let wanted =
            if options.prefixes.is_empty() { vec![Bytes::new()] } else { options.prefixes };
        for prefix in wanted {
            client.prefixes.insert(prefix.clone());
            let clients = self.prefixes.entry(prefix.clone()).or_default();
            if clients.is_empty() {
                gained.push(prefix);
            }
            clients.insert(id);
        }
        gained
    }

    /// Turns tracking off for `id` (CLIENT TRACKING OFF, RESET, disconnect).
    /// Returns the prefixes this core has no client of any more. The keys
    /// the shards remember for it go lazily, as in Redis.
    pub fn disable(&mut self, id: u64) -> Vec<Bytes> {
        let Some(client) = self.clients.remove(&id) else { return Vec::new() };
        let mut lost = Vec::new();
        for prefix in client.prefixes {
            if let Some(clients) = self.prefixes.get_mut(&prefix) {
                clients.remove(&id);
                if clients.is_empty() {
                    self.prefixes.remove(&prefix);
                    lost.push(prefix);
                }
            }
        }
        lost
    }

    /// Every tracking client of this core.
    pub fn ids(&self) -> Vec<u64> {
        self.clients.keys().copied().collect()
    }

    /// The BCAST messages a batch of changes makes: for each prefix, for
    /// each of its clients, the keys under it (sorted, once each), without
    /// those a NOLOOP client changed itself last (Redis's
    /// `trackingBroadcastInvalidationMessages`).
    pub fn bcast_messages(&self, changes: &[BcastChange]) -> Vec<(u64, Vec<Bytes>)> {
        let mut messages = Vec::new();
        for (prefix, clients) in &self.prefixes {
            // Key → the client that changed it last.
            let mut keys: BTreeMap<&Bytes, Option<u64>> = BTreeMap::new();
            for change in changes.iter().filter(|c| c.key.starts_with(prefix)) {
                keys.insert(&change.key, change.writer);
            }
            if keys.is_empty() {
                continue;
            }
            for &id in clients {
                let noloop = self.clients.get(&id).is_some_and(|c| c.noloop);
                let sent: Vec<Bytes> = keys
                    .iter()
                    .filter(|(_, writer)| !(noloop && **writer == Some(id)))
                    .map(|(key, _)| (*key).clone())
                    .collect();
                if !sent.is_empty() {
                    messages.push((id, sent));
                }
            }
        }
        messages
    }

    /// Notes that an invalidation found `redirect`, the target of `id`,
    /// gone; true when `id` still redirects there.
    fn mark_broken(&mut self, id: u64, redirect: u64) -> bool {
        match self.clients.get_mut(&id) {
            Some(c) if c.redirect == redirect => {
                c.broken_redirect = true;
                true
            }
            _ => false,
        }
    }
}

/// Invalidations for one core's clients from one batch of shard work.
#[derive(Default)]
struct Delivery {
    /// A key, its readers on the core, and who changed it (NOLOOP).
    keys: Vec<(Bytes, Vec<u64>, u64)>,
    bcast: Vec<BcastChange>,
}

/// Sends a shard's invalidations to the readers' home cores, without
/// waiting: they are queued before the writer's reply leaves.
pub fn publish(core: &Core, outbox: Outbox) {
    let mut by_core: BTreeMap<u16, Delivery> = BTreeMap::new();
    for invalidation in outbox.keys {
        let mut readers = invalidation.readers.iter().peekable();
        while let Some(first) = readers.next() {
            // Readers are sorted by core: take this core's run of them.
            let mut ids = vec![first.id];
            while let Some(next) = readers.next_if(|r| r.core == first.core) {
                ids.push(next.id);
            }
            let delivery = by_core.entry(first.core).or_default();
            delivery.keys.push((invalidation.key.clone(), ids, invalidation.writer));
        }
    }
    for (target, changes) in outbox.bcast {
        by_core.entry(target).or_default().bcast = changes;
    }
    for (target, delivery) in by_core {
        core.queue_job(ShardId(target), Box::new(move |core| deliver(core, delivery)));
    }
}

/// On a home core: hands each reader still tracking its invalidations.
fn deliver(core: &Rc<Core>, delivery: Delivery) {
    for (key, ids, writer) in delivery.keys {
        for id in ids {
            let wanted = {
                let hub = core.push.borrow();
                // A client that turned tracking off, or on again in BCAST
                // mode, no longer wants keys it read before (as Redis).
                let looped = |c: &ClientTracking| c.noloop && writer == id;
                hub.tracking.get(id).is_some_and(|c| !c.bcast && !looped(c))
            };
            if wanted {
                send(core, id, Some(vec![key.clone()]));
            }
        }
    }
    if !delivery.bcast.is_empty() {
        let messages = core.push.borrow().tracking.bcast_messages(&delivery.bcast);
        for (id, keys) in messages {
            send(core, id, Some(keys));
        }
    }
}

/// FLUSHDB / FLUSHALL: every tracking client of this core drops its whole
/// cache (the null invalidation).
pub fn invalidate_everything(core: &Rc<Core>) {
    let ids = core.push.borrow().tracking.ids();
    for id in ids {
        send(core, id, None);
    }
}

/// Sends an invalidation (`None`: every key) for tracking client `id` of
/// this core: to the client itself, or to its redirect target.
fn send(core: &Rc<Core>, id: u64, keys: Option<Vec<Bytes>>) {
    let Some((redirect, redirect_core)) =
        core.push.borrow().tracking.get(id).map(|c| (c.redirect, c.redirect_core))
    else {
        return;
    };
    if redirect == 0 {
        // RESP2 has no pushes: without a redirect nothing can be sent.
        if let Some((Resp::V3, subscribed)) = client_resp(core, id) {
            put(core, id, Push::Invalidate { keys, channel: false }, subscribed);
        }
        return;
    }
    let home = core.id.0;
    core.queue_job(
        ShardId(redirect_core),
        Box::new(move |core| redirected(core, redirect, id, home, keys)),
    );
}

/// On the redirect target's core: delivers there, or tells the reader its
/// target is gone.
fn redirected(
    core: &Rc<Core>,
    target: u64,
    reader: u64,
    reader_core: u16,
    keys: Option<Vec<Bytes>>,
) {
    match client_resp(core, target) {
        Some((Resp::V3, subscribed)) => {
            put(core, target, Push::Invalidate { keys, channel: false }, subscribed)
        }
        Some((_, true)) => put(core, target, Push::Invalidate { keys, channel: true }, true),
        // A RESP2 target that is not subscribed cannot be sent anything.
        Some(_) => {}
        None => {
            core.queue_job(ShardId(reader_core), Box::new(move |core| broken(core, reader, target)))
        }
    }
}

/// On the reader's core: its redirect target is gone.
fn broken(core: &Rc<Core>, reader: u64, target: u64) {
    if !core.push.borrow_mut().tracking.mark_broken(reader, target) {
        return;
    }
    if let Some(handle) = core.clients.borrow().get(reader) {
        handle.view.borrow_mut().tracking_broken = true;
    }
    if let Some((Resp::V3, subscribed)) = client_resp(core, reader) {
        put(core, reader, Push::RedirBroken(target), subscribed);
    }
}

/// A connected client's protocol and whether it is subscribed to anything.
fn client_resp(core: &Core, id: u64) -> Option<(Resp, bool)> {
    let clients = core.clients.borrow();
    let handle = clients.get(id).filter(|h| !h.is_killed())?;
    let view = handle.view.borrow();
    Some((view.resp, view.sub + view.psub + view.ssub > 0))
}

/// Puts a push in a client's mailbox, within the output buffer limit of
/// its class (Redis's `pubsub` for a subscriber, `normal` otherwise).
fn put(core: &Core, id: u64, push: Push, subscribed: bool) {
    let limit = core.config.borrow().buffer_limit(if subscribed { "pubsub" } else { "normal" });
    core.push.borrow_mut().send(id, push, limit);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    fn err(r: Result<(), CmdError>) -> String {
        r.err().map(|e| e.text().to_string()).unwrap_or_default()
    }

    fn options(s: &str) -> Options {
        parse(&args(&format!("client tracking on {s}"))).options.unwrap_or_default()
    }

    #[test]
    fn parses_options_in_redis_order() {
        let r = parse(&args("client tracking ON redirect 7 prefix a: BCAST prefix b: noloop"));
        assert_eq!(r.on.ok(), Some(true));
        assert_eq!(r.redirect, Some(7));
        let o = r.options.unwrap_or_default();
        assert!(o.bcast && o.noloop && !o.optin && !o.optout);
        assert_eq!(o.prefixes, vec![Bytes::from_static(b"a:"), Bytes::from_static(b"b:")]);

        let r = parse(&args("client tracking on redirect 7 redirect 8"));
        assert_eq!(r.redirect, Some(7));
        assert_eq!(
            r.options.err().map(|e| e.text().to_string()).as_deref(),
            Some("ERR A client can only redirect to a single other client")
        );
        let r = parse(&args("client tracking on redirect x"));
        assert_eq!(
            r.options.err().map(|e| e.text().to_string()).as_deref(),
            Some("ERR value is not an integer or out of range")
        );
        let r = parse(&args("client tracking maybe bcast"));
        assert!(r.on.is_err() && r.options.is_ok());
        for bad in
            ["client tracking on prefix", "client tracking on redirect", "client tracking on foo"]
        {
            let r = parse(&args(bad));
            assert_eq!(
                r.options.err().map(|e| e.text().to_string()).as_deref(),
                Some("ERR syntax error")
            );
        }
    }

    #[test]
    fn checks_combinations_with_redis_errors() {
        let check = |current: Option<&ClientTracking>, s: &str| {
            err(ClientTracking::check(current, &options(s)))
        };
        assert_eq!(check(None, "prefix a"), "ERR PREFIX option requires BCAST mode to be enabled");
        assert_eq!(
            check(None, "bcast optin"),
            "ERR OPTIN and OPTOUT are not compatible with BCAST"
        );
        assert_eq!(
            check(None, "bcast optout"),
            "ERR OPTIN and OPTOUT are not compatible with BCAST"
        );
        assert_eq!(
            check(None, "optin optout"),
            "ERR You can't specify both OPTIN mode and OPTOUT mode"
        );
        let bcast = ClientTracking { bcast: true, ..ClientTracking::default() };
        assert!(check(Some(&bcast), "noloop").starts_with("ERR You can't switch BCAST mode on/off"));
        let optin = ClientTracking { optin: true, ..ClientTracking::default() };
        assert!(check(Some(&optin), "optout").starts_with("ERR You can't switch OPTIN/OPTOUT mode"));
        assert_eq!(check(Some(&optin), "optin"), "");
        assert_eq!(
            check(None, "bcast prefix FOOBAR prefix FOO"),
            "ERR Prefix 'FOOBAR' overlaps with another provided prefix 'FOO'. Prefixes for a single client must not overlap."
        );
        let with = ClientTracking {
            bcast: true,
            prefixes: [Bytes::from_static(b"FOO"), Bytes::from_static(b"BAR")].into(),
            ..ClientTracking::default()
        };
        assert_eq!(
            check(Some(&with), "bcast prefix FO"),
            "ERR Prefix 'FO' overlaps with an existing prefix 'FOO'. Prefixes for a single client must not overlap."
        );
        assert_eq!(check(Some(&with), "bcast prefix BAZ"), "");
    }

    #[test]
    fn bcast_prefixes_are_counted_per_core_and_messages_grouped_by_prefix() {
        let mut t = TrackingClients::default();
        assert_eq!(
            t.enable(1, (0, 0), options("bcast prefix a: prefix b:")),
            vec![Bytes::from_static(b"a:"), Bytes::from_static(b"b:")]
        );
        assert_eq!(t.enable(2, (0, 0), options("bcast prefix a: noloop")), Vec::<Bytes>::new());
        // Adding a prefix keeps the others (Redis's "Adding prefixes to BCAST mode works").
        assert_eq!(
            t.enable(2, (0, 0), options("bcast prefix c: noloop")),
            vec![Bytes::from_static(b"c:")]
        );
        assert_eq!(t.get(2).map(|c| c.prefixes.len()), Some(2));
        let change = |k: &'static [u8], writer| BcastChange { key: Bytes::from_static(k), writer };
        let changes = [
            change(b"a:2", Some(2)),
            change(b"a:1", None),
            change(b"a:2", Some(2)),
            change(b"b:1", Some(1)),
        ];
        let keys =
            |v: &[&'static [u8]]| v.iter().map(|k| Bytes::from_static(k)).collect::<Vec<_>>();
        assert_eq!(
            t.bcast_messages(&changes),
            vec![(1, keys(&[b"a:1", b"a:2"])), (2, keys(&[b"a:1"])), (1, keys(&[b"b:1"]))]
        );
        assert_eq!(t.disable(1), vec![Bytes::from_static(b"b:")]);
        assert_eq!(t.disable(2), vec![Bytes::from_static(b"a:"), Bytes::from_static(b"c:")]);
        assert!(t.is_empty() && t.bcast_messages(&changes).is_empty());
        // BCAST with no prefix tracks every key.
        assert_eq!(t.enable(3, (9, 1), options("bcast")), vec![Bytes::new()]);
        assert_eq!(t.bcast_messages(&changes[3..]), vec![(3, keys(&[b"b:1"]))]);
        assert!(t.mark_broken(3, 9) && !t.mark_broken(3, 8));
        assert_eq!(t.get(3).map(|c| c.broken_redirect), Some(true));
        // Turning tracking on again clears the flags and keeps the prefixes.
        t.enable(3, (0, 0), options("bcast"));
        assert_eq!(t.get(3).map(|c| (c.broken_redirect, c.prefixes.len())), Some((false, 1)));
    }
}
