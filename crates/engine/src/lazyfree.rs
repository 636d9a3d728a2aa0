//! Lazy freeing, as Redis's `lazyfree.c`: UNLINK, FLUSHDB/FLUSHALL ASYNC
//! (and DEL or a flush under `lazyfree-lazy-user-del` / `-user-flush`)
//! hand values that are costly to free to a background thread, so that a
//! shard's core does not stall on a million-element drop.
//!
//! One thread for the node, started on first use, fed over a channel; a
//! value whose free effort is at most [`THRESHOLD`] (Redis's
//! LAZYFREE_THRESHOLD) is freed at once, where it is. INFO's
//! `lazyfree_pending_objects` and `lazyfreed_objects` count what went
//! through it.

use crate::keyspace::Value;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{mpsc, OnceLock};

/// Values that cost more than this many allocations to free go to the
/// background thread.
pub const THRESHOLD: usize = 64;

/// Something to drop later, and how many objects it counts as.
struct Job {
    garbage: Box<dyn Send>,
    objects: u64,
}

static QUEUE: OnceLock<mpsc::Sender<Job>> = OnceLock::new();
static PENDING: AtomicU64 = AtomicU64::new(0);
static FREED: AtomicU64 = AtomicU64::new(0);

fn queue() -> &'static mpsc::Sender<Job> {
    QUEUE.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let spawned = std::thread::Builder::new().name("ringdb-lazyfree".into()).spawn(move || {
            for job in rx {
                drop(job.garbage);
                PENDING.fetch_sub(job.objects, Relaxed);
                FREED.fetch_add(job.objects, Relaxed);
            }
        });
        if let Err(e) = spawned {
            // Without the thread, values are freed where they are dropped:
            // the receiver goes with the closure and sends fail.
            tracing::warn!("cannot start the lazy-free thread: {e}");
        }
        tx
    })
}

/// Drops `garbage` (worth `objects` objects) on the background thread, or
/// here if the thread is not running.
pub fn free_later(garbage: impl Send + 'static, objects: u64) {
    PENDING.fetch_add(objects, Relaxed);
    if let Err(mpsc::SendError(job)) = queue().send(Job { garbage: Box::new(garbage), objects }) {
        PENDING.fetch_sub(objects, Relaxed);
        drop(job.garbage);
    }
}

/// Drops a value: in the background when it is costly (Redis's
/// `dbAsyncDelete`), at once otherwise.
pub fn free_value(value: Value) {
    if free_effort(&value) > THRESHOLD {
        free_later(value, 1);
    }
}

/// Redis's `lazyfreeGetFreeEffort`: about how many allocations freeing the
/// value takes (1 for compact encodings and strings).
pub fn free_effort(value: &Value) -> usize {
    match value {
        Value::List(l) => l.node_count(),
        Value::Set(s) if s.encoding() == "hashtable" => s.len(),
        Value::Hash(h) if h.encoding() == "hashtable" => h.len(),
        Value::ZSet(z) if z.encoding() == "skiplist" => z.len(),
        Value::Stream(s) => {
            // As Redis: nodes, and every group with (an estimate of) its
            // pending entries.
            let groups = s.groups_len();
            let pel = s.groups().next().map_or(0, |(_, g)| g.pending_len());
            s.node_count() + groups * (1 + pel)
        }
        _ => 1,
    }
}

/// Objects handed over and not freed yet (`lazyfree_pending_objects`).
pub fn pending() -> u64 {
    PENDING.load(Relaxed)
}

/// Objects freed in the background (`lazyfreed_objects`).
pub fn freed() -> u64 {
    FREED.load(Relaxed)
}

/// CONFIG RESETSTAT.
pub fn reset_stats() {
    FREED.store(0, Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keyspace::Value;

    #[test]
    fn costly_values_go_to_the_background() {
        let limits = ringdb_types::limits::Limits::default();
        let mut set = ringdb_types::set::Set::new_table(1000);
        for i in 0..1000u32 {
            set.add(format!("m{i}").as_bytes(), &limits);
        }
        let value = Value::Set(set);
        assert!(free_effort(&value) > THRESHOLD);
        let before = freed();
        free_value(value);
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while freed() == before {
            assert!(std::time::Instant::now() < deadline, "never freed");
            std::thread::yield_now();
        }
        assert_eq!(free_effort(&Value::Str(crate::keyspace::StrValue::Int(1))), 1);
    }
}
