//! Deleting keys whose time is up ([`delete_expired`], [`drain_expired`]:
//! the one place that removes them, counts them and tells the funnel), and
//! the active expiry cycle, which reclaims expired keys that nobody reads.
//!
//! Redis samples random keys with a TTL; ringdb sweeps instead, slot by slot,
//! through the slots that hold keys with a TTL (each slot table counts them,
//! so slots without any cost one check). A sweep resumes where the last one
//! stopped and stops when its time budget is spent, so a cycle is bounded in
//! time, every expired key is reclaimed within a bounded number of cycles,
//! and nothing ever scans the whole keyspace at once.

use crate::funnel::NotifyClass;
use crate::keyspace::Keyspace;
use crate::shard::{now_ms, Shard, ShardState};
use std::time::{Duration, Instant};

/// Deletes `key` of database `db` as expired (`expired_keys`, the
/// `expired` event, WATCH and tracking through the funnel). Whether the
/// key was there.
pub fn delete_expired(
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    db: usize,
    key: &[u8],
) -> bool {
    let gone = keyspace.db_mut(db).remove(key).is_some();
    if gone {
        counted(state, db, key);
    }
    gone
}

/// Deletes every key of `slot` in database `db` that is expired at `now`,
/// as [`delete_expired`] does; how many.
pub fn drain_expired(
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    db: usize,
    slot: u16,
    now: u64,
) -> usize {
    let mut deleted = 0;
    for entry in keyspace.db_mut(db).drain_expired(slot, now) {
        counted(state, db, entry.key());
        deleted += 1;
    }
    deleted
}

fn counted(state: &mut ShardState, db: usize, key: &[u8]) {
    state.stats.expired_keys += 1;
    state.funnel.key_changed(db, key, NotifyClass::Expired, "expired");
}

/// What one cycle did.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct CycleStats {
    /// Keys with a TTL looked at.
    pub checked: usize,
    pub expired: usize,
}

/// Runs one cycle for at most about `budget`.
pub fn active_cycle(shard: &mut Shard, budget: Duration) -> CycleStats {
    let started = Instant::now();
    let now = now_ms();
    let (first, count) = shard.slot_map.slots_of(shard.id);
    let dbs = shard.keyspace.db_count();
    let mut stats = CycleStats::default();
    // CLIENT PAUSE freezes the dataset: no key expires meanwhile.
    if count == 0
        || shard.state.pause.keys_frozen(now)
        || shard.keyspace.iter().all(|db| db.volatile() == 0)
    {
        return stats;
    }
    let (mut db, mut slot) = shard.expire_cursor;
    if db >= dbs || slot < first || slot >= first + count {
        (db, slot) = (0, first);
    }
    let positions = dbs * count as usize;
    for visited in 0..positions {
        if shard.keyspace.db(db).volatile() == 0 {
            // Nothing to do in this database: jump to the next one.
            db = (db + 1) % dbs;
            slot = first;
            continue;
        }
        let volatile = shard.keyspace.db(db).slot_table(slot).map_or(0, |t| t.volatile());
        if volatile > 0 {
            stats.checked += volatile as usize;
            stats.expired += drain_expired(&mut shard.keyspace, &mut shard.state, db, slot, now);
        }
        slot += 1;
        if slot >= first + count {
            slot = first;
            db = (db + 1) % dbs;
        }
        if visited % 64 == 63 && started.elapsed() >= budget {
            break;
        }
    }
    shard.expire_cursor = (db, slot);
    if stats.checked > 0 {
        shard.state.stats.expired_stale_perc = stats.expired as f64 / stats.checked as f64 * 100.0;
    }
    let ms = started.elapsed().as_millis() as u64;
    shard.state.stats.expire_cycle_cpu_ms += ms;
    let threshold = shard.state.settings.latency.monitor_threshold_ms;
    shard.state.latency.events.add_if_needed(threshold, "expire-cycle", ms);
    stats
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Entry, StrValue, Value};
    use crate::shard::{ShardId, ShardSettings, SlotMap};

    #[test]
    fn reclaims_expired_keys_and_keeps_the_rest() {
        let mut shard = Shard::new(ShardId(0), SlotMap::new(1), ShardSettings::default(), 1);
        let now = now_ms();
        for i in 0..10_000 {
            let key = format!("k{i}");
            let expire = if i % 2 == 0 {
                Some(now - 1)
            } else if i % 3 == 0 {
                Some(now + 100_000)
            } else {
                None
            };
            let e = Entry::new(key.as_bytes(), Value::Str(StrValue::from_bytes(b"v")))
                .with_expire(expire);
            shard.keyspace.db_mut(0).insert(e);
        }
        let mut total = 0;
        for _ in 0..100 {
            total += active_cycle(&mut shard, Duration::from_millis(50)).expired;
        }
        assert_eq!(total, 5_000);
        assert_eq!(shard.keyspace.db(0).len(), 5_000);
        assert_eq!(shard.state.stats.expired_keys, 5_000);
        assert!(shard.keyspace.db(0).get(b"k1").is_some());
        assert!(shard.keyspace.db(0).get(b"k0").is_none());
    }
}
