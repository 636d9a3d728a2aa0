//! Eviction under `maxmemory`: Redis's `performEvictions`, for one shard.
//!
//! The limit is the whole process's (the allocator's count of bytes, as
//! Redis's `used_memory`), and each shard evicts only its own keys, so no
//! core ever touches another's data:
//! - before each command it runs while the process is over the limit
//!   ([`make_room`], called from the shard's command entry points);
//! - on its timer, so that a shard that gets no writes still gives memory
//!   back when others fill the process.
//!
//! Candidates are sampled (`maxmemory-samples` neighbouring keys per
//! database per round, only keys with a TTL for the `volatile-*` policies)
//! into a pool of the best few, kept from run to run, as Redis's
//! approximated LRU, LFU and TTL eviction do. Keys a cross-shard
//! transaction holds are never evicted. A run stops when the process is
//! under the limit, or when its time budget (`maxmemory-eviction-tenacity`)
//! is spent; one that runs out of keys to evict (`noeviction`, or no
//! candidate left on any shard) makes the `denyoom` commands that follow
//! get Redis's OOM error.
//!
//! Redis evicts from the whole keyspace, so a write is refused only when
//! no key anywhere may go. Here each shard publishes how many candidates it
//! has on the [`Board`]; a shard out of candidates while another has some
//! lets its commands through and asks that shard to evict at once
//! ([`ShardState::evict_elsewhere`](crate::shard::ShardState), sent by the
//! server), as a run cut short by its time budget does.

use crate::funnel::NotifyClass;
use crate::locks::fingerprint;
use crate::shard::{lfu_decayed, Shard};
use crate::ShardId;
use bytes::Bytes;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Redis's reply to a `denyoom` command over the limit.
pub const OOM: &str = "OOM command not allowed when used memory > 'maxmemory'.";

/// `maxmemory-policy`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Policy {
    NoEviction,
    AllKeysLru,
    AllKeysLfu,
    AllKeysRandom,
    VolatileLru,
    VolatileLfu,
    VolatileRandom,
    VolatileTtl,
}

impl Policy {
    /// The policy a (validated, lower-case) `maxmemory-policy` names.
    pub fn from_name(name: &str) -> Policy {
        match name {
            "allkeys-lru" => Policy::AllKeysLru,
            "allkeys-lfu" => Policy::AllKeysLfu,
            "allkeys-random" => Policy::AllKeysRandom,
            "volatile-lru" => Policy::VolatileLru,
            "volatile-lfu" => Policy::VolatileLfu,
            "volatile-random" => Policy::VolatileRandom,
            "volatile-ttl" => Policy::VolatileTtl,
            _ => Policy::NoEviction,
        }
    }

    fn volatile_only(self) -> bool {
        matches!(
            self,
            Policy::VolatileLru
                | Policy::VolatileLfu
                | Policy::VolatileRandom
                | Policy::VolatileTtl
        )
    }

    fn random(self) -> bool {
        matches!(self, Policy::AllKeysRandom | Policy::VolatileRandom)
    }
}

/// The `maxmemory` settings a shard runs with.
#[derive(Clone, Copy, Debug)]
pub struct MemoryLimit {
    /// `maxmemory` in bytes; 0: no limit.
    pub maxmemory: u64,
    pub policy: Policy,
    /// `maxmemory-samples`.
    pub samples: usize,
    /// `maxmemory-eviction-tenacity` (0–100).
    pub tenacity: u32,
    /// The process's allocated bytes now (the server's allocator count;
    /// the shard is there for tests, which count its keys instead).
    pub used: fn(&Shard) -> u64,
}

impl Default for MemoryLimit {
    fn default() -> Self {
        MemoryLimit {
            maxmemory: 0,
            policy: Policy::NoEviction,
            samples: 5,
            tenacity: 10,
            used: |_| 0,
        }
    }
}

impl MemoryLimit {
    /// Redis's `evictionTimeLimitUs`: 50 µs per tenacity step up to 10,
    /// then growing 15% per step, and no limit at 100.
    fn time_budget(&self) -> Option<Duration> {
        match self.tenacity {
            t if t <= 10 => Some(Duration::from_micros(50 * t as u64)),
            t if t < 100 => {
                Some(Duration::from_micros((500.0 * 1.15f64.powi(t as i32 - 10)) as u64))
            }
            _ => None,
        }
    }
}

/// What each shard could still evict under the current policy, published
/// for the others (one per process; a scratch shard state has an empty one).
#[derive(Debug, Default)]
pub struct Board {
    shards: Vec<BoardSlot>,
}

#[derive(Debug, Default)]
struct BoardSlot {
    /// Keys the policy may evict (keys with a TTL for `volatile-*`), as of
    /// the shard's last eviction run or timer tick.
    candidates: AtomicU64,
    /// Another shard asked this one to evict and it has not run yet.
    asked: AtomicBool,
}

impl Board {
    /// A board where every shard may have candidates until it has said.
    pub fn new(shards: usize) -> Board {
        let unknown = || BoardSlot { candidates: AtomicU64::new(u64::MAX), ..Default::default() };
        Board { shards: (0..shards).map(|_| unknown()).collect() }
    }

    fn others_have_candidates(&self, me: usize) -> bool {
        self.shards_with_candidates().any(|s| s.index() != me)
    }

    /// The shards that may still have keys to evict.
    pub fn shards_with_candidates(&self) -> impl Iterator<Item = ShardId> + '_ {
        let has = |(_, s): &(usize, &BoardSlot)| s.candidates.load(Ordering::Relaxed) > 0;
        self.shards.iter().enumerate().filter(has).map(|(i, _)| ShardId(i as u16))
    }

    /// The shards `me` should ask to evict now: those with candidates not
    /// asked already (each is asked once until it has run).
    pub fn shards_to_ask(&self, me: ShardId) -> Vec<ShardId> {
        let ask = |(i, s): &(usize, &BoardSlot)| {
            *i != me.index()
                && s.candidates.load(Ordering::Relaxed) > 0
                && !s.asked.swap(true, Ordering::Relaxed)
        };
        self.shards.iter().enumerate().filter(ask).map(|(i, _)| ShardId(i as u16)).collect()
    }
}

/// The shard's eviction run on its timer, or when another shard asked
/// ([`Board::shards_to_ask`]): publishes what it could evict (which also
/// clears a request), then evicts while the process is over the limit.
pub fn evict_on_timer(shard: &mut Shard, now_ms: u64) {
    if shard.state.settings.memory.maxmemory == 0 {
        return;
    }
    publish_candidates(shard);
    make_room(shard, now_ms);
}

/// Publishes what this shard could evict on the [`Board`] (on its timer,
/// and when its settings change), which also clears a request to evict.
pub fn publish_candidates(shard: &Shard) {
    publish(shard, candidates(shard));
}

/// Keys the policy may evict on this shard.
fn candidates(shard: &Shard) -> u64 {
    let ks = &shard.keyspace;
    match shard.state.settings.memory.policy {
        Policy::NoEviction => 0,
        p if p.volatile_only() => (0..ks.db_count()).map(|db| ks.db(db).volatile() as u64).sum(),
        _ => (0..ks.db_count()).map(|db| ks.db(db).len() as u64).sum(),
    }
}

/// [`publish_candidates`] after each command under `maxmemory`, so that
/// the first command over the limit knows which shards to ask: without
/// clearing a request, and a store only when the count changed (the
/// board's line stays shared while nothing changes).
pub(crate) fn publish_if_changed(shard: &Shard) {
    let now = candidates(shard);
    if let Some(slot) = shard.state.evict_board.shards.get(shard.id.index()) {
        if slot.candidates.load(Ordering::Relaxed) != now {
            slot.candidates.store(now, Ordering::Relaxed);
        }
    }
}

fn publish(shard: &Shard, candidates: u64) {
    if let Some(slot) = shard.state.evict_board.shards.get(shard.id.index()) {
        slot.asked.store(false, Ordering::Relaxed);
        slot.candidates.store(candidates, Ordering::Relaxed);
    }
}

/// Pool size of the best candidates (Redis's `EVPOOL_SIZE`).
const POOL: usize = 16;

/// A sampled key and how good a victim it is (higher: evict sooner).
#[derive(Debug)]
struct Candidate {
    score: u64,
    db: usize,
    key: Bytes,
}

/// The best candidates sampled so far, worst first (Redis's eviction
/// pool). It lives in the shard from one eviction run to the next, so each
/// run starts from the best keys earlier rounds found.
#[derive(Debug, Default)]
pub struct Pool {
    /// The policy the scores were computed for.
    policy: Option<Policy>,
    best: Vec<Candidate>,
}

/// The memory eviction compares with `maxmemory`: all of it but the
/// invalidations this shard has queued and not sent yet.
fn counted(shard: &Shard, limit: &MemoryLimit) -> u64 {
    let queued = shard.state.funnel.out.invalidation_bytes() as u64;
    (limit.used)(shard).saturating_sub(queued)
}

/// Whether the process is over `maxmemory` with a policy that evicts, and
/// eviction is not paused: Redis then evicts before every command.
/// One branch when there is no limit (the clock is read only when over).
#[inline]
pub fn must_evict(shard: &Shard) -> bool {
    let limit = &shard.state.settings.memory;
    limit.maxmemory != 0
        && limit.policy != Policy::NoEviction
        && counted(shard, limit) > limit.maxmemory
        && !shard.state.pause.keys_frozen(crate::shard::now_ms())
}

/// Evicts this shard's keys while the process is over `maxmemory`, and
/// records in `state.oom` whether the `denyoom` commands that follow must
/// be refused (over the limit, and no key left to evict). One branch when
/// there is no limit.
#[inline]
pub fn make_room(shard: &mut Shard, now_ms: u64) {
    if shard.state.settings.memory.maxmemory == 0 {
        shard.state.oom = false;
        return;
    }
    // CLIENT PAUSE freezes the dataset: nothing is evicted meanwhile.
    if shard.state.pause.keys_frozen(now_ms) {
        return;
    }
    evict_over_limit(shard, now_ms);
}

#[cold]
fn evict_over_limit(shard: &mut Shard, now_ms: u64) {
    let limit = shard.state.settings.memory;
    if counted(shard, &limit) <= limit.maxmemory {
        shard.state.oom = false;
        return;
    }
    let started = Instant::now();
    let budget = limit.time_budget();
    let kept = std::mem::take(&mut shard.state.evict_pool);
    let mut pool = if kept.policy == Some(limit.policy) { kept.best } else { Vec::new() };
    let mut evicted = 0u64;
    // Redis's EVICT_FAIL: over the limit with nothing (left) to evict. A
    // run cut short by its time budget lets commands through (EVICT_RUNNING).
    let mut failed = true;
    if limit.policy != Policy::NoEviction {
        while let Some((db, key)) = next_victim(shard, &limit, &mut pool, now_ms) {
            evict(shard, db, &key);
            evicted += 1;
            if counted(shard, &limit) <= limit.maxmemory {
                failed = false;
                break;
            }
            // Redis looks at the clock every 16 keys.
            if evicted.is_multiple_of(16) && budget.is_some_and(|b| started.elapsed() >= b) {
                failed = false;
                break;
            }
        }
    }
    shard.state.evict_pool = Pool { policy: Some(limit.policy), best: pool };
    let threshold = shard.state.settings.latency.monitor_threshold_ms;
    let ms = started.elapsed().as_millis() as u64;
    shard.state.latency.events.add_if_needed(threshold, "eviction-cycle", ms);
    // Out of victims (none left, or none that may go now): nothing to
    // offer the others either.
    publish(shard, if failed { 0 } else { candidates(shard) });
    if failed
        && limit.policy != Policy::NoEviction
        && shard.state.evict_board.others_have_candidates(shard.id.index())
    {
        // Other shards hold the keys to evict: ask them, and let this
        // command through meanwhile.
        shard.state.funnel.out.evict_elsewhere = true;
        failed = false;
    }
    shard.state.oom = failed;
}

/// Deletes `key` of `db` as evicted, through the funnel (keyspace event
/// `evicted`, WATCH, tracking, the append-only log).
fn evict(shard: &mut Shard, db: usize, key: &[u8]) {
    if shard.keyspace.db_mut(db).remove(key).is_some() {
        shard.state.stats.evicted_keys += 1;
        shard.state.funnel.key_changed(db, key, NotifyClass::Evicted, "evicted");
    }
}

/// The next key to evict: a random one for the random policies, else the
/// best of the pool after a round of sampling. None when there is nothing
/// left to evict.
fn next_victim(
    shard: &mut Shard,
    limit: &MemoryLimit,
    pool: &mut Vec<Candidate>,
    now_ms: u64,
) -> Option<(usize, Bytes)> {
    let volatile = limit.policy.volatile_only();
    let dbs = shard.keyspace.db_count();
    let live = |shard: &Shard, db: usize| {
        let d = shard.keyspace.db(db);
        if volatile {
            d.volatile()
        } else {
            d.len()
        }
    };
    if limit.policy.random() {
        // Databases in turn from a random one, as Redis's `next_db`.
        let start = (shard.state.random() % dbs as u64) as usize;
        for i in 0..dbs {
            let db = (start + i) % dbs;
            if live(shard, db) == 0 {
                continue;
            }
            let Shard { keyspace, state, locks, .. } = &mut *shard;
            let mut victim = None;
            keyspace.db(db).sample(volatile, limit.samples, &mut || state.random(), |e| {
                if victim.is_none() && (locks.is_idle() || !locks.holds(fingerprint(db, e.key()))) {
                    victim = Some(Bytes::copy_from_slice(e.key()));
                }
            });
            if let Some(key) = victim {
                return Some((db, key));
            }
        }
        return None;
    }
    for db in 0..dbs {
        if live(shard, db) == 0 {
            continue;
        }
        let Shard { keyspace, state, .. } = &mut *shard;
        let (policy, decay) = (limit.policy, state.settings.lfu_decay_time);
        keyspace.db(db).sample(volatile, limit.samples, &mut || state.random(), |e| {
            let score = match policy {
                Policy::AllKeysLfu | Policy::VolatileLfu => {
                    255 - lfu_decayed(e.access, now_ms, decay) as u64
                }
                Policy::VolatileTtl => u64::MAX - e.expire_at().unwrap_or(u64::MAX),
                // The LRU clock is in seconds and wraps like Redis's.
                _ => ((now_ms / 1000) as u32).wrapping_sub(e.access) as u64,
            };
            consider(pool, db, e.key(), score);
        });
    }
    // The best candidate still there (another command may have deleted or
    // a transaction locked it since it was sampled).
    while let Some(c) = pool.pop() {
        let exists = shard.keyspace.db(c.db).get(&c.key).is_some();
        let locked = !shard.locks.is_idle() && shard.locks.holds(fingerprint(c.db, &c.key));
        if exists && !locked {
            return Some((c.db, c.key));
        }
    }
    None
}

/// Puts a sampled key in the pool if it is among the best [`POOL`] (the
/// pool stays sorted, worst first).
fn consider(pool: &mut Vec<Candidate>, db: usize, key: &[u8], score: u64) {
    if pool.iter().any(|c| c.db == db && c.key[..] == *key) {
        return;
    }
    if pool.len() == POOL {
        if pool[0].score >= score {
            return;
        }
        pool.remove(0);
    }
    let at = pool.partition_point(|c| c.score < score);
    pool.insert(at, Candidate { score, db, key: Bytes::copy_from_slice(key) });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::{Entry, StrValue, Value};
    use crate::shard::{ShardId, ShardSettings, SlotMap};

    /// A pretend process: 100 bytes per key, limit 1000 bytes.
    fn shard(policy: Policy, keys: usize, ttl_every: usize) -> Shard {
        let used = |s: &Shard| s.key_count() as u64 * 100;
        let settings = ShardSettings {
            memory: MemoryLimit { maxmemory: 1000, policy, samples: 5, tenacity: 100, used },
            ..ShardSettings::default()
        };
        let mut shard = Shard::new(ShardId(0), SlotMap::new(1), settings, 7);
        for i in 0..keys {
            let value = Value::Str(StrValue::from_bytes(b"v"));
            let mut e = Entry::new(format!("k{i}").as_bytes(), value);
            // Older keys have older access times (LRU seconds).
            e.access = i as u32;
            if ttl_every > 0 && i % ttl_every == 0 {
                e = e.with_expire(Some(u64::MAX / 2 + i as u64));
            }
            shard.keyspace.db_mut(0).insert(e);
        }
        shard
    }

    #[test]
    fn evicts_down_to_the_limit_and_prefers_idle_keys() {
        let mut s = shard(Policy::AllKeysLru, 50, 0);
        make_room(&mut s, 1_000_000);
        assert_eq!(s.key_count(), 10);
        assert_eq!(s.state.stats.evicted_keys, 40);
        assert!(!s.state.oom);
        // Sampling is approximate: most survivors are among the newest.
        let newest =
            (30..50).filter(|i| s.keyspace.db(0).get(format!("k{i}").as_bytes()).is_some());
        assert!(newest.count() >= 6);
    }

    #[test]
    fn volatile_policies_only_evict_keys_with_a_ttl() {
        let mut s = shard(Policy::VolatileLru, 50, 2);
        make_room(&mut s, 1_000_000);
        // 25 keys have a TTL; evicting them all still leaves 25 > 10.
        assert_eq!(s.key_count(), 25);
        assert_eq!(s.keyspace.db(0).volatile(), 0);
        assert!(s.state.oom, "nothing left to evict: denyoom commands are refused");
    }

    #[test]
    fn a_shard_out_of_candidates_asks_the_others_once() {
        let board = std::sync::Arc::new(Board::new(2));
        let mut s = shard(Policy::VolatileLru, 50, 2);
        s.state.evict_board = board.clone();
        // Shard 1 has not said yet: it may have keys to evict.
        make_room(&mut s, 1_000_000);
        assert_eq!(s.keyspace.db(0).volatile(), 0);
        assert!(!s.state.oom && std::mem::take(&mut s.state.funnel.out.evict_elsewhere));
        assert_eq!(board.shards_to_ask(ShardId(0)), [ShardId(1)]);
        assert!(board.shards_to_ask(ShardId(0)).is_empty(), "asked twice");
        // Shard 1 has nothing either: the writes are refused.
        let mut other = shard(Policy::VolatileLru, 0, 0);
        other.id = ShardId(1);
        other.state.evict_board = board.clone();
        evict_on_timer(&mut other, 1_000_000);
        make_room(&mut s, 1_000_000);
        assert!(s.state.oom && !s.state.funnel.out.evict_elsewhere);
    }

    #[test]
    fn noeviction_refuses_and_keeps_every_key() {
        let mut s = shard(Policy::NoEviction, 50, 0);
        make_room(&mut s, 1_000_000);
        assert_eq!(s.key_count(), 50);
        assert!(s.state.oom);
        s.state.settings.memory.maxmemory = 10_000;
        make_room(&mut s, 0);
        assert!(!s.state.oom);
    }

    #[test]
    fn random_and_ttl_policies_evict() {
        for policy in [Policy::AllKeysRandom, Policy::VolatileRandom, Policy::VolatileTtl] {
            let mut s = shard(policy, 50, 1);
            make_room(&mut s, 1_000_000);
            assert_eq!(s.key_count(), 10, "{policy:?}");
        }
        // volatile-ttl: the keys that expire soonest go first.
        let mut s = shard(Policy::VolatileTtl, 50, 1);
        make_room(&mut s, 1_000_000);
        let latest =
            (40..50).filter(|i| s.keyspace.db(0).get(format!("k{i}").as_bytes()).is_some());
        assert!(latest.count() >= 5);
    }

    #[test]
    fn tenacity_budgets_match_redis() {
        let at = |tenacity| MemoryLimit { tenacity, ..MemoryLimit::default() }.time_budget();
        assert_eq!(at(0), Some(Duration::ZERO));
        assert_eq!(at(10), Some(Duration::from_micros(500)));
        assert_eq!(at(11), Some(Duration::from_micros(575)));
        assert_eq!(at(100), None);
    }
}
