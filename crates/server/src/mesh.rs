//! The mesh: how cores ask each other to do things.
//!
//! Each core has one bounded queue of jobs; every core holds a sender to
//! every queue. A job is a closure run on the target core with that core's
//! state — Seastar's `invoke_on`. Replies come back over one-shot channels.
//! Bounded queues give backpressure: a core that floods another waits.
//!
//! A job never awaits, so a core serving its queue can never deadlock with
//! another core serving its own.

use crate::node::{Core, Shared};
use ringdb_engine::command::CmdError;
use ringdb_engine::ShardId;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// What a caller gets if a job died without answering (a bug: a job
/// panicked). The core survives; the client gets this error.
pub const NO_ANSWER: CmdError = CmdError::new("ERR internal error: a shard did not answer");

/// Work for a core.
pub type Job = Box<dyn FnOnce(&Rc<Core>) + Send>;

/// Rung by a core after it queued a job on another: a network driver
/// spinning on the target core stops, so that glommio's reactor, which
/// delivers the job, runs (see `net::uring::SpinWindow`). On a cache line
/// of its own: other cores write it, its core reads it while spinning.
#[repr(align(64))]
#[derive(Default)]
pub struct Doorbell(AtomicBool);

impl Doorbell {
    pub fn ring(&self) {
        // Read first: a bell already rung costs the sender no cache-line
        // transfer.
        if !self.0.load(Relaxed) {
            self.0.store(true, Relaxed);
        }
    }

    /// Whether it rang since the last answer.
    pub fn answer(&self) -> bool {
        self.0.load(Relaxed) && self.0.swap(false, Relaxed)
    }
}

impl Shared {
    /// Rings `target`'s doorbell after `from` queued a job there. A job a
    /// core queues on itself needs no bell: its queue's task is woken on
    /// this thread, without the reactor.
    fn ring(&self, from: ShardId, target: ShardId) {
        if from != target {
            self.doorbells[target.index()].ring();
        }
    }
}

/// Runs the jobs other cores send to this one.
pub async fn serve(core: Rc<Core>, rx: flume::Receiver<Job>) {
    while let Ok(job) = rx.recv_async().await {
        // A panicking job must not take the core down: its asker gets
        // NO_ANSWER when the reply channel drops.
        if catch_unwind(AssertUnwindSafe(|| job(&core))).is_err() {
            tracing::error!(shard = core.id.0, "a mesh job panicked");
        }
        core.publish_changes();
    }
}

/// The sending half of a deferred reply: a job that cannot answer at once
/// (it waits for a lock) keeps this and answers later.
pub struct Reply<R>(flume::Sender<R>);

impl<R> Reply<R> {
    pub fn send(self, value: R) {
        // The asker may have gone (its client disconnected); nothing to do.
        let _ = self.0.send(value);
    }
}

impl Core {
    /// Queues `job` on `shard` (which may be this core).
    pub async fn send_job(self: &Rc<Self>, shard: ShardId, job: Job) {
        if shard == self.id {
            job(self);
            return;
        }
        // The receiving core lives as long as the process.
        let _ = self.shared.mesh[shard.index()].send_async(job).await;
        self.shared.ring(self.id, shard);
    }

    /// Queues `job` on `target`'s queue without waiting, even when `target`
    /// is this core: what one core queues on another arrives in the order
    /// it was queued, so pushes (and the job that adds a watcher behind
    /// them) are never overtaken. When the queue is full the job waits for
    /// room on a task of its own.
    pub fn queue_job(&self, target: ShardId, job: Job) {
        let sender = &self.shared.mesh[target.index()];
        if let Err(flume::TrySendError::Full(job)) = sender.try_send(job) {
            let (sender, shared, from) = (sender.clone(), self.shared.clone(), self.id);
            glommio::spawn_local(async move {
                let _ = sender.send_async(job).await;
                shared.ring(from, target);
            })
            .detach();
        } else {
            self.shared.ring(self.id, target);
        }
    }

    /// Runs `f` on `shard` and returns its result. Runs inline when `shard`
    /// is this core.
    pub async fn invoke_on<R, F>(self: &Rc<Self>, shard: ShardId, f: F) -> Result<R, CmdError>
    where
        F: FnOnce(&Rc<Core>) -> R + Send + 'static,
        R: Send + 'static,
    {
        if shard == self.id {
            return Ok(f(self));
        }
        self.invoke_deferred(shard, move |core, reply| reply.send(f(core))).await
    }

    /// Runs `f` on `shard`; `f` answers through the [`Reply`] it is given,
    /// now or later.
    pub async fn invoke_deferred<R, F>(self: &Rc<Self>, shard: ShardId, f: F) -> Result<R, CmdError>
    where
        F: FnOnce(&Rc<Core>, Reply<R>) + Send + 'static,
        R: Send + 'static,
    {
        let (tx, rx) = flume::bounded(1);
        self.send_job(shard, Box::new(move |core| f(core, Reply(tx)))).await;
        rx.recv_async().await.map_err(|_| NO_ANSWER)
    }

    /// Runs `f` on every core in parallel; results in shard order. On this
    /// core it runs at once.
    pub async fn invoke_on_all<R, F>(self: &Rc<Self>, f: F) -> Result<Vec<R>, CmdError>
    where
        F: Fn(&Rc<Core>) -> R + Send + Sync + Clone + 'static,
        R: Send + 'static,
    {
        self.on_every_core(f, false).await
    }

    /// [`invoke_on_all`](Self::invoke_on_all), but behind the jobs already
    /// queued on each core, this one's included: what another core queued
    /// here before a reply this client saw (a slow-log entry) is seen.
    /// Replies travel on channels of their own and may be read before such
    /// jobs run.
    pub async fn invoke_on_all_queued<R, F>(self: &Rc<Self>, f: F) -> Result<Vec<R>, CmdError>
    where
        F: Fn(&Rc<Core>) -> R + Send + Sync + Clone + 'static,
        R: Send + 'static,
    {
        self.on_every_core(f, true).await
    }

    async fn on_every_core<R, F>(self: &Rc<Self>, f: F, queued: bool) -> Result<Vec<R>, CmdError>
    where
        F: Fn(&Rc<Core>) -> R + Send + Sync + Clone + 'static,
        R: Send + 'static,
    {
        let n = self.shared.shards();
        let mut pending = Vec::with_capacity(n);
        for i in 0..n {
            let (f, (tx, rx)) = (f.clone(), flume::bounded(1));
            let job: Job = Box::new(move |core| {
                let _ = tx.send(f(core));
            });
            let shard = ShardId(i as u16);
            if queued {
                self.queue_job(shard, job);
            } else {
                self.send_job(shard, job).await;
            }
            pending.push(rx);
        }
        let mut out = Vec::with_capacity(n);
        for rx in pending {
            out.push(rx.recv_async().await.map_err(|_| NO_ANSWER)?);
        }
        Ok(out)
    }
}
