//! CLIENT PAUSE: one state for the whole node, shared by every core's
//! shard and connections through atomics (read with one relaxed load per
//! command while nothing is paused).
//!
//! As Redis 7.0: a pause holds `WRITE` (commands that write or may
//! replicate: PUBLISH, PFCOUNT, scripts that may write, EXEC of such) or
//! `ALL` commands until its end time or CLIENT UNPAUSE; a second pause
//! keeps the stricter kind and the later end. While paused, keys are not
//! expired (active or lazy: an expired key reads as missing but stays) and
//! nothing is evicted, so that the dataset does not change under a
//! failover that paused it.

use crate::command::spec::flags;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering::Relaxed};

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum PauseKind {
    Write = 1,
    All = 2,
}

#[derive(Default, Debug)]
pub struct Pause {
    /// 0 = none, else a [`PauseKind`].
    kind: AtomicU8,
    until_ms: AtomicU64,
    /// Clients waiting for the pause to end, over all cores (they count in
    /// INFO's blocked_clients, as in Redis).
    pub waiting: AtomicUsize,
}

impl Pause {
    /// CLIENT PAUSE: the stricter kind and the later end win.
    pub fn pause(&self, kind: PauseKind, until_ms: u64) {
        self.kind.fetch_max(kind as u8, Relaxed);
        self.until_ms.fetch_max(until_ms, Relaxed);
    }

    /// CLIENT UNPAUSE.
    pub fn unpause(&self) {
        self.kind.store(0, Relaxed);
        self.until_ms.store(0, Relaxed);
    }

    /// Whether a pause was asked for (it may have ended by its time).
    pub fn is_set(&self) -> bool {
        self.kind.load(Relaxed) != 0
    }

    /// The pause in force at `now_ms`, if any (a pause past its end is over).
    pub fn active(&self, now_ms: u64) -> Option<PauseKind> {
        let kind = match self.kind.load(Relaxed) {
            0 => return None,
            1 => PauseKind::Write,
            _ => PauseKind::All,
        };
        (now_ms < self.until_ms.load(Relaxed)).then_some(kind)
    }

    /// Whether a command with these (request) flags must wait.
    pub fn holds(&self, request_flags: u32, now_ms: u64) -> bool {
        match self.active(now_ms) {
            None => false,
            Some(PauseKind::All) => true,
            Some(PauseKind::Write) => request_flags & (flags::WRITE | flags::MAY_REPLICATE) != 0,
        }
    }

    /// Whether keys may expire and be evicted now.
    pub fn keys_frozen(&self, now_ms: u64) -> bool {
        self.is_set() && self.active(now_ms).is_some()
    }

    /// Milliseconds until the pause ends (0 when none).
    pub fn remaining_ms(&self, now_ms: u64) -> u64 {
        match self.active(now_ms) {
            Some(_) => self.until_ms.load(Relaxed).saturating_sub(now_ms),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stricter_kind_and_later_end_win() {
        let p = Pause::default();
        assert!(!p.holds(flags::WRITE, 0));
        p.pause(PauseKind::Write, 1000);
        assert!(p.holds(flags::WRITE, 10) && p.holds(flags::MAY_REPLICATE, 10));
        assert!(!p.holds(flags::READONLY, 10));
        p.pause(PauseKind::All, 500);
        assert!(p.holds(flags::READONLY, 10));
        assert_eq!(p.remaining_ms(10), 990);
        assert!(p.keys_frozen(999) && !p.keys_frozen(1000));
        assert!(!p.holds(flags::WRITE, 1000));
        p.unpause();
        assert_eq!(p.active(10), None);
    }
}
