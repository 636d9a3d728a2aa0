//! Blocking commands (BLPOP, BZPOPMIN, BLMOVE, XREAD BLOCK, …), the shard
//! half: which clients wait for which of this shard's keys, the wake-ups a
//! change of such a key produces, and the timeouts' parsing.
//!
//! A blocking command's row is an ordinary shard handler that serves the
//! client if it can and otherwise replies what Redis replies on timeout (a
//! null). The server's blocking loop (`cmd::blocking`) runs it; when it
//! got the null it registers the client here on every key's shard and waits.
//! The write funnel turns any change of a watched key (a push, a rename onto
//! it, a FLUSHDB, a SWAPDB…) into one wake-up for each waiting client's home
//! core, which runs the command again. A retry that still finds nothing
//! keeps waiting, so a change that does not help (LPUSH then DEL inside one
//! MULTI) never serves anyone, as in Redis.

use crate::command::error::CmdError;
use crate::query_watch::KeyRef;
use bytes::Bytes;
use hashbrown::HashMap;
use ringdb_types::number::parse_f64;

/// A waiting client: its home core and client id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Waiter {
    pub core: u16,
    pub client: u64,
}

/// This shard's waiting clients, by the keys they wait for.
#[derive(Default)]
pub struct BlockTable {
    by_key: HashMap<(usize, Bytes), Vec<Waiter>>,
    /// Wake-ups for the server to deliver (each waiter at most once).
    pub outbox: Vec<Waiter>,
}

impl BlockTable {
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// `waiter` waits for `key` of database `db` (again: no duplicate).
    pub fn block(&mut self, db: usize, key: Bytes, waiter: Waiter) {
        let waiters = self.by_key.entry((db, key)).or_default();
        if !waiters.contains(&waiter) {
            waiters.push(waiter);
        }
    }

    /// `waiter` no longer waits for `key`.
    pub fn unblock(&mut self, db: usize, key: &[u8], waiter: Waiter) {
        if let Some(waiters) = self.by_key.get_mut(&KeyRef(db, key)) {
            waiters.retain(|w| *w != waiter);
            if waiters.is_empty() {
                self.by_key.remove(&KeyRef(db, key));
            }
        }
    }

    /// Waiting clients of this shard.
    pub fn clients(&self) -> usize {
        let mut all: Vec<Waiter> = self.by_key.values().flatten().copied().collect();
        all.sort_unstable_by_key(|w| (w.core, w.client));
        all.dedup();
        all.len()
    }

    /// `key` changed: wake whoever waits for it, in the order they came.
    pub fn touch(&mut self, db: usize, key: &[u8]) {
        if let Some(waiters) = self.by_key.get(&KeyRef(db, key)) {
            for w in waiters {
                if !self.outbox.contains(w) {
                    self.outbox.push(*w);
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
                    if !self.outbox.contains(w) {
                        self.outbox.push(*w);
                    }
                }
            }
        }
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
/// `None` when it does not block (XREAD without BLOCK) or is malformed (the
/// handler then reports the error).
pub fn timeout_of<'a>(name: &str, args: &'a [Bytes]) -> Option<(&'a Bytes, Unit)> {
    match name {
        "blpop" | "brpop" | "bzpopmin" | "bzpopmax" | "blmove" | "brpoplpush" => {
            Some((args.last()?, Unit::Seconds))
        }
        "blmpop" | "bzmpop" => Some((args.get(1)?, Unit::Seconds)),
        "xread" | "xreadgroup" => {
            let streams = args.iter().position(|a| a.eq_ignore_ascii_case(b"streams"))?;
            let at = args[..streams].iter().position(|a| a.eq_ignore_ascii_case(b"block"))?;
            Some((args.get(at + 1)?, Unit::Millis))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn w(core: u16, client: u64) -> Waiter {
        Waiter { core, client }
    }

    #[test]
    fn changes_wake_their_waiters_once_in_order() {
        let mut t = BlockTable::default();
        t.block(0, Bytes::from_static(b"k"), w(1, 7));
        t.block(0, Bytes::from_static(b"k"), w(0, 3));
        t.block(0, Bytes::from_static(b"j"), w(1, 7));
        t.block(1, Bytes::from_static(b"k"), w(0, 9));
        t.touch(0, b"k");
        t.touch(0, b"j");
        t.touch(0, b"other");
        assert_eq!(t.outbox, vec![w(1, 7), w(0, 3)]);
        assert_eq!(t.clients(), 3);
        t.outbox.clear();
        t.unblock(0, b"k", w(1, 7));
        t.unblock(0, b"j", w(1, 7));
        t.touch(0, b"k");
        assert_eq!(t.outbox, vec![w(0, 3)]);
        t.outbox.clear();
        t.touch_db(1, |_| true);
        assert_eq!(t.outbox, vec![w(0, 9)]);
        t.unblock(0, b"k", w(0, 3));
        t.unblock(1, b"k", w(0, 9));
        assert!(t.is_empty());
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
        let a = args("blpop a b 5");
        assert_eq!(timeout_of("blpop", &a).map(|t| &t.0[..]), Some(&b"5"[..]));
        let a = args("bzmpop 1.5 2 a b MIN");
        assert_eq!(timeout_of("bzmpop", &a).map(|t| &t.0[..]), Some(&b"1.5"[..]));
        let a = args("xread COUNT 2 BLOCK 100 STREAMS s $");
        assert_eq!(timeout_of("xread", &a), Some((&a[4], Unit::Millis)));
        assert_eq!(timeout_of("xread", &args("xread STREAMS block 0")), None);
    }
}
