//! Intent locks and the wait queue of one shard: the shard half of the
//! cross-shard transaction scheme.
//!
//! A transaction that spans shards (MSET over two shards, RENAME, a gather of
//! SUNIONSTORE's sources, later MULTI/EXEC and scripts) locks the fingerprints
//! of its keys on every shard involved, one shard at a time in ascending shard
//! order, then runs its hops, then releases. Acquiring in one global order
//! means two transactions can never wait for each other in a cycle; requests
//! wait in one FIFO per shard, so nobody starves.
//!
//! Single-shard commands never take locks: they run at once when none of
//! their keys is locked or awaited in a conflicting mode (the common case
//! costs one `is_idle` check), and otherwise wait in the same FIFO, which is
//! what keeps a client from ever seeing half of a transaction.
//!
//! Locks are on 64-bit key fingerprints, not keys: a collision only makes two
//! unrelated commands wait for each other, never lets a conflict through.

use crate::keyspace::key_hash;
use hashbrown::HashMap;
use std::collections::VecDeque;

/// Hash of (database, key) that locks are taken on.
pub type Fingerprint = u64;

/// The lock on a whole shard (FLUSHDB, FLUSHALL, SWAPDB): conflicts with
/// every other lock. A key whose fingerprint happens to equal it only makes
/// its commands wait a little more, never lets a conflict through.
pub const WHOLE_SHARD: Fingerprint = u64::MAX;

pub fn fingerprint(db: usize, key: &[u8]) -> Fingerprint {
    key_hash(key) ^ (db as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Readers: any number at once.
    Shared,
    /// A writer: alone.
    Exclusive,
}

/// The locks one command or transaction needs on one shard.
pub type LockSet = Vec<(Fingerprint, LockMode)>;

#[derive(Default, Debug)]
struct Held {
    shared: u32,
    exclusive: u32,
}

impl Held {
    fn admits(&self, mode: LockMode) -> bool {
        match mode {
            LockMode::Shared => self.exclusive == 0,
            LockMode::Exclusive => self.exclusive == 0 && self.shared == 0,
        }
    }
}

fn takes_whole_shard(locks: &LockSet) -> bool {
    locks.iter().any(|(fp, _)| *fp == WHOLE_SHARD)
}

fn conflicts(a: &LockSet, b: &LockSet) -> bool {
    if (takes_whole_shard(a) && !b.is_empty()) || (takes_whole_shard(b) && !a.is_empty()) {
        return true;
    }
    a.iter().any(|(fa, ma)| {
        b.iter()
            .any(|(fb, mb)| fa == fb && (*ma == LockMode::Exclusive || *mb == LockMode::Exclusive))
    })
}

struct Waiter<W> {
    locks: LockSet,
    /// Whether granting takes the locks (a transaction) or only lets the
    /// waiter run (a single-shard command that found its keys busy).
    acquire: bool,
    then: W,
}

/// A shard's lock table and wait queue. `W` is what runs when a waiter's
/// turn comes.
pub struct LockTable<W> {
    held: HashMap<Fingerprint, Held>,
    waiting: VecDeque<Waiter<W>>,
}

impl<W> Default for LockTable<W> {
    fn default() -> Self {
        LockTable { held: HashMap::new(), waiting: VecDeque::new() }
    }
}

impl<W> LockTable<W> {
    /// Nothing held and nothing waiting: every command may run at once.
    #[inline]
    pub fn is_idle(&self) -> bool {
        self.held.is_empty() && self.waiting.is_empty()
    }

    /// Whether a transaction holds `fp` (or the whole shard).
    pub fn holds(&self, fp: Fingerprint) -> bool {
        self.held.contains_key(&fp) || self.held.contains_key(&WHOLE_SHARD)
    }

    fn admitted_by_held(&self, locks: &LockSet) -> bool {
        if locks.is_empty() {
            return true;
        }
        if takes_whole_shard(locks) {
            return self.held.is_empty();
        }
        !self.held.contains_key(&WHOLE_SHARD)
            && locks.iter().all(|(fp, mode)| self.held.get(fp).is_none_or(|h| h.admits(*mode)))
    }

    /// Whether a command needing `locks` may run now: nothing held conflicts,
    /// and no earlier waiter wants a conflicting lock (it would be overtaken).
    pub fn may_run(&self, locks: &LockSet) -> bool {
        self.admitted_by_held(locks) && !self.waiting.iter().any(|w| conflicts(&w.locks, locks))
    }

    fn take(&mut self, locks: &LockSet) {
        for (fp, mode) in locks {
            let h = self.held.entry(*fp).or_default();
            match mode {
                LockMode::Shared => h.shared += 1,
                LockMode::Exclusive => h.exclusive += 1,
            }
        }
    }

    /// Takes `locks` if [`may_run`](Self::may_run) allows it.
    pub fn try_acquire(&mut self, locks: &LockSet) -> bool {
        if self.may_run(locks) {
            self.take(locks);
            true
        } else {
            false
        }
    }

    /// Queues a waiter. `acquire`: take the locks when granted.
    pub fn enqueue(&mut self, locks: LockSet, acquire: bool, then: W) {
        self.waiting.push_back(Waiter { locks, acquire, then });
    }

    /// Releases `locks` (taken earlier by `try_acquire` or a granted waiter)
    /// and returns the waiters that may now proceed, in queue order. Granted
    /// transaction waiters already hold their locks.
    #[must_use]
    pub fn release(&mut self, locks: &LockSet) -> Vec<W> {
        for (fp, mode) in locks {
            if let Some(h) = self.held.get_mut(fp) {
                match mode {
                    LockMode::Shared => h.shared = h.shared.saturating_sub(1),
                    LockMode::Exclusive => h.exclusive = h.exclusive.saturating_sub(1),
                }
                if h.shared == 0 && h.exclusive == 0 {
                    self.held.remove(fp);
                }
            }
        }
        self.grant()
    }

    /// Pops every waiter that may proceed: admitted by what is held, and not
    /// conflicting with an earlier waiter that stays queued.
    pub fn grant(&mut self) -> Vec<W> {
        let mut ready = Vec::new();
        let mut i = 0;
        while i < self.waiting.len() {
            let w = &self.waiting[i];
            let blocked_by_earlier =
                self.waiting.iter().take(i).any(|earlier| conflicts(&earlier.locks, &w.locks));
            if !blocked_by_earlier && self.admitted_by_held(&w.locks) {
                let Some(w) = self.waiting.remove(i) else { break };
                // A command that only waited takes nothing: the caller runs
                // it at once, before any granted transaction's next hop.
                if w.acquire {
                    self.take(&w.locks);
                }
                ready.push(w.then);
                continue;
            }
            i += 1;
        }
        ready
    }

    pub fn held_count(&self) -> usize {
        self.held.len()
    }

    pub fn waiting_count(&self) -> usize {
        self.waiting.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LockMode::*;

    #[test]
    fn shared_and_exclusive() {
        let mut t: LockTable<&str> = LockTable::default();
        assert!(t.is_idle());
        let a = vec![(1, Shared)];
        assert!(t.try_acquire(&a));
        assert!(t.try_acquire(&a));
        assert!(!t.may_run(&vec![(1, Exclusive)]));
        assert!(t.may_run(&vec![(2, Exclusive)]));
        t.enqueue(vec![(1, Exclusive)], true, "writer");
        // A new reader may not overtake the queued writer.
        assert!(!t.may_run(&vec![(1, Shared)]));
        assert!(t.release(&a).is_empty());
        assert_eq!(t.release(&a), vec!["writer"]);
        assert!(!t.may_run(&vec![(1, Shared)]));
        assert!(t.release(&vec![(1, Exclusive)]).is_empty());
        assert!(t.is_idle());
    }

    #[test]
    fn the_whole_shard_lock_excludes_everything() {
        let mut t: LockTable<&str> = LockTable::default();
        let key = vec![(5, Shared)];
        let whole = vec![(WHOLE_SHARD, Exclusive)];
        assert!(t.try_acquire(&key));
        assert!(!t.try_acquire(&whole));
        t.enqueue(whole.clone(), true, "flush");
        // Nothing new may overtake the queued flush.
        assert!(!t.may_run(&vec![(6, Shared)]));
        assert_eq!(t.release(&key), vec!["flush"]);
        assert!(!t.may_run(&vec![(7, Exclusive)]));
        assert!(t.release(&whole).is_empty());
        assert!(t.is_idle());
    }

    #[test]
    fn fifo_without_overtaking_conflicts() {
        let mut t: LockTable<u32> = LockTable::default();
        let x = vec![(7, Exclusive)];
        assert!(t.try_acquire(&x));
        t.enqueue(vec![(7, Exclusive)], true, 1);
        t.enqueue(vec![(8, Exclusive)], false, 2); // independent: granted when checked
        t.enqueue(vec![(7, Shared)], false, 3);
        // 2 does not conflict with anything held or earlier.
        assert_eq!(t.grant(), vec![2]);
        assert_eq!(t.release(&x), vec![1]);
        assert_eq!(t.release(&vec![(8, Exclusive)]), Vec::<u32>::new());
        assert_eq!(t.release(&vec![(7, Exclusive)]), vec![3]);
    }
}
