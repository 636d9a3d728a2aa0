//! Blocking commands (BLPOP, BZPOPMIN, BLMOVE, XREAD BLOCK, …), the shard
//! half: which clients wait for which of this shard's keys, serving them
//! when a change makes that possible, and the timeouts' parsing.
//!
//! A blocking command's row is an ordinary shard handler that serves the
//! client if it can and otherwise replies what Redis replies on timeout (a
//! null). The server runs it once; when it got the null it registers the
//! client here on every key's shard and waits.
//!
//! - **All keys on this shard** (the common case): the command itself is
//!   kept here. The write funnel marks the waiters of a changed key ready;
//!   after the shard's work, before the writer's reply leaves,
//!   [`crate::shard::Shard::serve_blocked`] runs their commands in the order
//!   the clients blocked, and sends each one that got something its reply.
//!   So, as in Redis, a client that sees its LPUSH acknowledged also sees
//!   the waiting BLPOP served, and chains (BLMOVE into a list another client
//!   waits on) complete at once.
//! - **Keys on several shards**: each shard only wakes the client, whose
//!   home core runs the command again (across shards, atomically).
//!
//! A change that does not help (LPUSH then DEL inside one MULTI, or the key
//! turned into a string) serves nobody: the client keeps waiting, as in
//! Redis.

use crate::command::error::CmdError;
use crate::command::spec::{CommandSpec, TimeoutAt, Waits};
use crate::keyspace::{Keyspace, Value};
use crate::query_watch::KeyRef;
use crate::shard::ShardCommand;
use bytes::Bytes;
use hashbrown::HashMap;
use ringdb_types::number::parse_f64;

/// A waiting client: its home core and client id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Waiter {
    pub core: u16,
    pub client: u64,
}

/// This shard's waiting clients, by the keys they wait for.
#[derive(Default)]
pub struct BlockTable {
    by_key: HashMap<(usize, Bytes), Vec<Waiter>>,
    /// The commands this shard serves itself, with the keys they wait for.
    commands: HashMap<Waiter, (ShardCommand, Vec<Bytes>)>,
    /// Waiters whose key changed, in the order they blocked (each once).
    ready: Vec<Waiter>,
    /// Ready waiters whose keys a transaction holds: tried again later.
    deferred: Vec<Waiter>,
}

/// What a blocked command's run means for its client.
#[derive(Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Nothing to serve (or a key of the wrong type): keep waiting.
    Wait,
    /// Send this reply; the client is done.
    Reply(Bytes),
}

impl BlockTable {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// `waiter` waits for `key` of database `db` (no duplicate); its home
    /// core retries when woken.
    pub fn block(&mut self, db: usize, key: Bytes, waiter: Waiter) {
        let waiters = self.by_key.entry((db, key)).or_default();
        if !waiters.contains(&waiter) {
            waiters.push(waiter);
        }
    }

    /// `waiter` waits here for all of `command`'s `keys`: this shard serves
    /// it when one of them changes.
    pub fn block_command(&mut self, waiter: Waiter, command: ShardCommand, keys: Vec<Bytes>) {
        for key in &keys {
            self.block(command.client.db, key.clone(), waiter);
        }
        self.commands.insert(waiter, (command, keys));
    }

    /// `waiter` no longer waits for `keys`. False when it was not waiting
    /// any more (this shard served it meanwhile: its reply is on the way).
    pub fn unblock(&mut self, db: usize, keys: &[Bytes], waiter: Waiter) -> bool {
        let mut found = false;
        for key in keys {
            if let Some(waiters) = self.by_key.get_mut(&KeyRef(db, key)) {
                let before = waiters.len();
                waiters.retain(|w| *w != waiter);
                found |= waiters.len() != before;
                if waiters.is_empty() {
                    self.by_key.remove(&KeyRef(db, key));
                }
            }
        }
        self.commands.remove(&waiter);
        self.ready.retain(|w| *w != waiter);
        self.deferred.retain(|w| *w != waiter);
        found
    }

    /// Waiting clients of this shard.
    pub fn clients(&self) -> usize {
        let mut all: Vec<Waiter> = self.by_key.values().flatten().copied().collect();
        all.sort_unstable_by_key(|w| (w.core, w.client));
        all.dedup();
        all.len()
    }

    /// `key` changed: its waiters are ready, in the order they came.
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if let Some(waiters) = self.by_key.get(&KeyRef(db, key)) {
            for w in waiters {
                if !self.ready.contains(w) {
                    self.ready.push(*w);
                }
            }
        }
    }

    /// Every key of `db` for which `affected` says yes changed at once
    /// (FLUSHDB, SWAPDB).
    pub fn touch_db(&mut self, db: usize, affected: impl Fn(&[u8]) -> bool) {
        for ((d, key), waiters) in &self.by_key {
            if *d == db && affected(key) {
                for w in waiters {
                    if !self.ready.contains(w) {
                        self.ready.push(*w);
                    }
                }
            }
        }
    }

    /// Whether some waiter may have something to do.
    pub fn has_ready(&self) -> bool {
        !self.ready.is_empty() || !self.deferred.is_empty()
    }

    /// The ready waiters (those deferred before first), in order; each with
    /// its command when this shard serves it.
    pub fn take_ready(&mut self) -> Vec<(Waiter, Option<ShardCommand>)> {
        let mut ready = std::mem::take(&mut self.deferred);
        for w in std::mem::take(&mut self.ready) {
            if !ready.contains(&w) {
                ready.push(w);
            }
        }
        ready.into_iter().map(|w| (w, self.commands.get(&w).map(|(c, _)| c.clone()))).collect()
    }

    /// A ready waiter whose keys are locked by a transaction: later.
    pub fn defer(&mut self, waiter: Waiter) {
        self.deferred.push(waiter);
    }

    /// A served waiter (its reply is queued as a wake): gone from every key.
    pub fn served(&mut self, waiter: Waiter) {
        if let Some((command, keys)) = self.commands.remove(&waiter) {
            self.unblock(command.client.db, &keys, waiter);
        }
    }
}

/// Judges one run of a blocked command, as Redis serves blocked clients:
/// `found_nothing` ([`crate::shard::ShardState::found_nothing`]) means
/// nothing yet; an error means a key now holds another type,
/// which Redis never serves, except for a move whose source is a list (its
/// destination's error is the reply) and XREADGROUP, whose client is told
/// that its stream or group went away.
pub fn verdict(
    command: &ShardCommand,
    reply: &[u8],
    found_nothing: bool,
    keyspace: &Keyspace,
) -> Verdict {
    if found_nothing {
        return Verdict::Wait;
    }
    if reply.first() != Some(&b'-') {
        return Verdict::Reply(Bytes::copy_from_slice(reply));
    }
    let db = keyspace.db(command.client.db);
    let holds = |key: &[u8], f: fn(&Value) -> bool| db.get(key).is_some_and(|e| f(&e.value));
    match command.spec.blocks.map(|b| b.waits) {
        Some(Waits::Move) if holds(&command.args[1], |v| matches!(v, Value::List(_))) => {
            Verdict::Reply(Bytes::copy_from_slice(reply))
        }
        Some(Waits::GroupEntries) => {
            let args = &command.args;
            let streams = args.iter().position(|a| a.eq_ignore_ascii_case(b"streams"));
            let keys = streams.map_or(&args[..0], |s| {
                let n = (args.len() - s - 1) / 2;
                &args[s + 1..s + 1 + n]
            });
            let gone = keys.iter().any(|k| !holds(k, |v| matches!(v, Value::Stream(_))));
            Verdict::Reply(Bytes::from_static(if gone {
                b"-UNBLOCKED the stream key no longer exists\r\n"
            } else {
                b"-NOGROUP the consumer group this client was blocked on no longer exists\r\n"
            }))
        }
        _ => Verdict::Wait,
    }
}

/// How a command gives its timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// BLPOP's: seconds, fractions allowed.
    Seconds,
    /// XREAD BLOCK's: whole milliseconds.
    Millis,
}

/// A timeout argument in milliseconds (0: wait forever), checked as Redis's
/// `getTimeoutFromObjectOrReply` checks it, with its error texts.
pub fn parse_timeout(arg: &[u8], unit: Unit) -> Result<u64, CmdError> {
    let ms = match unit {
        Unit::Seconds => {
            let seconds = parse_f64(arg)
                .filter(|s| !s.is_nan())
                .ok_or(CmdError::new("ERR timeout is not a float or out of range"))?;
            let ms = (seconds * 1000.0).ceil();
            if ms > i64::MAX as f64 {
                return Err(CmdError::new("ERR timeout is out of range"));
            }
            ms
        }
        Unit::Millis => ringdb_types::number::parse_i64(arg)
            .ok_or(CmdError::new("ERR timeout is not an integer or out of range"))?
            as f64,
    };
    if ms < 0.0 {
        return Err(CmdError::new("ERR timeout is negative"));
    }
    // A deadline must fit beside the clock (Redis: "timeout is out of range").
    if ms >= (i64::MAX / 2) as f64 {
        return Err(CmdError::new("ERR timeout is out of range"));
    }
    Ok(ms as u64)
}

/// Where a blocking command keeps its timeout: `(argument, unit)`, or
/// `None` when it does not block (XREAD without BLOCK, a row that is not
/// blocking) or is malformed (the handler then reports the error).
pub fn timeout_of<'a>(spec: &CommandSpec, args: &'a [Bytes]) -> Option<(&'a Bytes, Unit)> {
    match spec.blocks?.timeout {
        TimeoutAt::Last => Some((args.last()?, Unit::Seconds)),
        TimeoutAt::First => Some((args.get(1)?, Unit::Seconds)),
        TimeoutAt::AfterBlock => {
            let streams = args.iter().position(|a| a.eq_ignore_ascii_case(b"streams"))?;
            let at = args[..streams].iter().position(|a| a.eq_ignore_ascii_case(b"block"))?;
            Some((args.get(at + 1)?, Unit::Millis))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(core: u16, client: u64) -> Waiter {
        Waiter { core, client }
    }

    #[test]
    fn changes_make_their_waiters_ready_once_in_order() {
        let mut t = BlockTable::default();
        let key = |k: &'static str| Bytes::from_static(k.as_bytes());
        t.block(0, key("k"), w(1, 7));
        t.block(0, key("k"), w(0, 3));
        t.block(0, key("j"), w(1, 7));
        t.block(1, key("k"), w(0, 9));
        t.touch(0, b"k");
        t.touch(0, b"j");
        t.touch(0, b"other");
        let ready: Vec<Waiter> = t.take_ready().into_iter().map(|(w, _)| w).collect();
        assert_eq!(ready, vec![w(1, 7), w(0, 3)]);
        assert_eq!(t.clients(), 3);
        assert!(t.unblock(0, &[key("k"), key("j")], w(1, 7)));
        assert!(!t.unblock(0, &[key("k")], w(1, 7)), "not waiting any more");
        t.touch(0, b"k");
        t.defer(w(5, 5));
        let ready: Vec<Waiter> = t.take_ready().into_iter().map(|(w, _)| w).collect();
        assert_eq!(ready, vec![w(5, 5), w(0, 3)], "deferred waiters first");
        t.touch_db(1, |_| true);
        assert_eq!(t.take_ready().len(), 1);
        t.unblock(0, &[key("k")], w(0, 3));
        t.unblock(1, &[key("k")], w(0, 9));
        assert!(t.is_empty() && !t.has_ready());
    }

    #[test]
    fn timeouts_parse_as_redis() {
        assert_eq!(parse_timeout(b"0", Unit::Seconds), Ok(0));
        assert_eq!(parse_timeout(b"0.1", Unit::Seconds), Ok(100));
        assert_eq!(parse_timeout(b"1.0001", Unit::Seconds), Ok(1001));
        assert_eq!(parse_timeout(b"250", Unit::Millis), Ok(250));
        let text = |r: Result<u64, CmdError>| r.unwrap_err().text().to_string();
        assert_eq!(text(parse_timeout(b"-1", Unit::Seconds)), "ERR timeout is negative");
        assert_eq!(
            text(parse_timeout(b"abc", Unit::Seconds)),
            "ERR timeout is not a float or out of range"
        );
        assert_eq!(
            text(parse_timeout(b"1.5", Unit::Millis)),
            "ERR timeout is not an integer or out of range"
        );
        assert_eq!(text(parse_timeout(b"1e300", Unit::Seconds)), "ERR timeout is out of range");
    }

    #[test]
    fn timeout_positions() {
        let args = |s: &str| s.split(' ').map(|a| Bytes::from(a.to_string())).collect::<Vec<_>>();
        let spec = |name: &str| crate::command::table().get(name.as_bytes()).unwrap().spec;
        let a = args("blpop a b 5");
        assert_eq!(timeout_of(spec("blpop"), &a).map(|t| &t.0[..]), Some(&b"5"[..]));
        let a = args("bzmpop 1.5 2 a b MIN");
        assert_eq!(timeout_of(spec("bzmpop"), &a).map(|t| &t.0[..]), Some(&b"1.5"[..]));
        let a = args("xread COUNT 2 BLOCK 100 STREAMS s $");
        assert_eq!(timeout_of(spec("xread"), &a), Some((&a[4], Unit::Millis)));
        assert_eq!(timeout_of(spec("xread"), &args("xread STREAMS block 0")), None);
        assert_eq!(timeout_of(spec("lpop"), &args("lpop a 5")), None);
    }

    #[test]
    fn every_blocking_row_says_how_it_waits_and_no_other_does() {
        for row in crate::command::table().all_rows() {
            let blocking = row.spec.has(crate::command::spec::flags::BLOCKING);
            assert_eq!(blocking, row.spec.blocks.is_some(), "{}", row.full_name);
        }
    }
}
