//! What a shard's turn produced for the world outside it: one value, filled
//! as the turn runs (the funnel holds it, as `Funnel::out`),
//! taken in one place ([`Shard::take_effects`]) and delivered by the server.
//!
//! Every producer (the funnel's events, the blocking table, tracking,
//! reactive queries, hot keys, scripts' MONITOR lines and PUBLISHes, the
//! slow log, eviction) writes into this one value, so a new kind of effect
//! is added here once, and nothing can be forgotten by a caller.

use crate::blocking::Waiter;
use crate::funnel::KeyEvent;
use crate::hotkeys::HotEvent;
use crate::query_watch::WatchPush;
use crate::shard::{Publish, Shard, ShardState};
use crate::slowlog::SlowEntry;
use crate::tracking::{KeyInvalidation, Outbox, Reader};
use bytes::Bytes;
use std::collections::VecDeque;

/// Everything a shard has to tell, in the order the server delivers it.
#[derive(Default)]
pub struct Effects {
    /// Blocked clients served (their replies) or to try again elsewhere.
    pub wakes: Vec<(Waiter, Option<Bytes>)>,
    /// Client-side caching invalidations.
    pub invalidations: Outbox,
    /// Bytes the queued invalidations hold (see
    /// [`Effects::invalidation_bytes`]).
    invalidation_bytes: usize,
    /// Keyspace events (notifications, WATCH, the hot-key copies).
    pub events: Vec<KeyEvent>,
    /// MONITOR lines of the commands scripts called.
    pub monitor: Vec<Bytes>,
    /// Messages scripts PUBLISHed.
    pub publishes: Vec<Publish>,
    /// This shard ran out of keys to evict: the others are asked.
    pub evict_elsewhere: bool,
    /// Slow-log entries, for their clients' home cores.
    pub slow: VecDeque<SlowEntry>,
    /// New results of reactive queries.
    pub watch_pushes: Vec<WatchPush>,
    /// Keys that became hot or cooled down.
    pub hot: Vec<HotEvent>,
}

impl Effects {
    /// Queues a tracking invalidation.
    pub(crate) fn invalidate(&mut self, invalidation: KeyInvalidation) {
        self.invalidation_bytes += invalidation.key.len()
            + invalidation.readers.capacity() * std::mem::size_of::<Reader>()
            + std::mem::size_of::<KeyInvalidation>();
        self.invalidations.keys.push(invalidation);
    }

    /// Bytes the queued invalidations hold: eviction does not count them
    /// (each key it evicts queues one, and counting it would make a run
    /// evict far more than it needs, Redis's #8069 feedback loop).
    pub fn invalidation_bytes(&self) -> usize {
        self.invalidation_bytes
    }

    pub fn is_empty(&self) -> bool {
        !self.sends_at_once() && !self.evict_elsewhere && self.slow.is_empty()
    }

    /// Whether delivering these reaches clients at once (under `appendfsync
    /// always` the log is synced first: Redis, too, writes nothing to a
    /// client before the fsync of the writes it is about). Scripts'
    /// messages and MONITOR lines count: a subscriber or a monitor would
    /// otherwise hear of a write before it is on disk.
    pub fn sends_at_once(&self) -> bool {
        !self.wakes.is_empty()
            || !self.invalidations.is_empty()
            || !self.events.is_empty()
            || !self.watch_pushes.is_empty()
            || !self.hot.is_empty()
            || !self.monitor.is_empty()
            || !self.publishes.is_empty()
    }
}

impl ShardState {
    /// Takes every effect queued in this state.
    pub fn take_effects(&mut self) -> Effects {
        std::mem::take(&mut self.funnel.out)
    }
}

impl Shard {
    /// Ends a turn: serves the blocked clients whose keys changed, re-runs
    /// the reactive queries now unless `coalesce` (`watch-coalesce-ms`
    /// asks the server to wait), and takes what the turn produced. Costs no
    /// clock read when no query is due.
    pub fn take_effects(&mut self, coalesce: bool) -> Effects {
        self.serve_blocked();
        if !coalesce && self.state.funnel.queries.has_dirty() {
            self.rerun_queries(crate::shard::now_ms());
        }
        self.state.take_effects()
    }
}
