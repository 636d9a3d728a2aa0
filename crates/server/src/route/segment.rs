//! A segment: the run of single-shard commands of one read between two
//! barriers (a cross-shard or server command, or the end of the read).
//!
//! Commands bound for one shard travel as one batch — one mesh message per
//! shard per segment, never one per command. Commands for this core's own
//! shard run at once, as long as nothing before them in the segment is still
//! waiting. Replies are stitched back into request order: while nothing is
//! pending they go straight to the connection's output; after that they are
//! kept aside until the batches come back.

use crate::net::connection::Connection;
use ringdb_engine::command::CmdError;
use ringdb_engine::shard::{BatchReply, Caller, Clock};
use ringdb_engine::{ShardCommand, ShardId};
use ringdb_protocol::Output;
use std::ops::Range;

/// Where a reply is, once the segment has been sent.
enum ReplyAt {
    /// In `side`, produced here while an earlier reply was pending.
    Side(Range<usize>),
    /// The `index`-th reply of the batch sent to `shard`.
    Batch { shard: ShardId, index: usize, suppress: bool },
}

#[derive(Default)]
pub struct Segment {
    /// The time the commands run at: read when the first shard command of
    /// the segment runs here, so server commands cost no clock read.
    clock: Option<Clock>,
    /// Replies after the first pending one, in request order.
    parts: Vec<ReplyAt>,
    side: Output,
    /// Commands per shard, in request order.
    batches: Vec<(ShardId, Vec<ShardCommand>)>,
    /// Whether this core's shard has a batch (because a local command had to
    /// wait for a lock): later local commands must queue behind it.
    home_batched: bool,
}

impl Segment {
    fn pending(&self) -> bool {
        !self.parts.is_empty()
    }

    /// No command of this read is waiting for a shard: a reply written now
    /// is in request order.
    pub fn is_idle(&self) -> bool {
        !self.pending()
    }

    /// Bytes of replies held aside.
    pub fn buffered(&self) -> usize {
        self.side.size()
    }

    fn batch_for(&mut self, shard: ShardId) -> &mut Vec<ShardCommand> {
        let i = match self.batches.iter().position(|(s, _)| *s == shard) {
            Some(i) => i,
            None => {
                self.batches.push((shard, Vec::new()));
                self.batches.len() - 1
            }
        };
        &mut self.batches[i].1
    }

    /// Adds a command for `shard`. `suppress`: CLIENT REPLY OFF/SKIP.
    pub fn push(
        &mut self,
        conn: &mut Connection,
        shard: ShardId,
        command: ShardCommand,
        suppress: bool,
    ) {
        if shard == conn.core.id && !self.home_batched {
            let mut local = conn.core.shard.borrow_mut();
            let free = local.locks.is_idle() || local.locks.may_run(&command.lock_set());
            if free {
                if self.pending() {
                    let start = self.side.len();
                    local.call(
                        &command,
                        &mut self.side,
                        self.clock.get_or_insert_with(Clock::start),
                        Caller::Client,
                    );
                    if suppress {
                        self.side.truncate(start);
                    }
                    self.parts.push(ReplyAt::Side(start..self.side.len()));
                } else {
                    let mark = conn.out.len();
                    local.call(
                        &command,
                        &mut conn.out,
                        self.clock.get_or_insert_with(Clock::start),
                        Caller::Client,
                    );
                    if suppress {
                        conn.out.truncate(mark);
                    }
                }
                return;
            }
            self.home_batched = true;
        }
        let batch = self.batch_for(shard);
        batch.push(command);
        let index = batch.len() - 1;
        self.parts.push(ReplyAt::Batch { shard, index, suppress });
    }

    /// An error reply in request order (unknown command, NOAUTH, …).
    pub fn reply_error(&mut self, conn: &mut Connection, error: &CmdError, suppress: bool) {
        conn.core.shard.borrow_mut().state.stats.error(error.code());
        if suppress {
            return;
        }
        if self.pending() {
            let start = self.side.len();
            self.side.writer(conn.state.resp).error(error.text());
            self.parts.push(ReplyAt::Side(start..self.side.len()));
        } else {
            conn.reply().error(error.text());
        }
    }

    /// A status reply in request order (`+QUEUED`).
    pub fn reply_status(&mut self, conn: &mut Connection, status: &str, suppress: bool) {
        if suppress {
            return;
        }
        if self.pending() {
            let start = self.side.len();
            self.side.writer(conn.state.resp).simple(status);
            self.parts.push(ReplyAt::Side(start..self.side.len()));
        } else {
            conn.reply().simple(status);
        }
    }

    /// Sends the batches, waits for the replies and writes them all, in
    /// request order, to the connection's output. A batch whose replies
    /// pass the shard's limit comes back early with the commands it did not
    /// run; what can be written is written out to the socket, and the rest
    /// is sent again. So a pipeline of big replies streams through a bounded
    /// amount of memory.
    pub async fn finish(&mut self, conn: &mut Connection) {
        // What runs next (a server or cross-shard command) is timed on its
        // own; the next shard command starts a new clock.
        self.clock = None;
        if !self.pending() {
            return;
        }
        let mut to_send = std::mem::take(&mut self.batches);
        let mut received: Vec<Received> = Vec::new();
        let parts = std::mem::take(&mut self.parts);
        let mut next_part = 0;
        loop {
            let mut waiting = Vec::with_capacity(to_send.len());
            for (shard, commands) in to_send.drain(..) {
                let (tx, rx) = flume::bounded(1);
                let job: crate::mesh::Job = Box::new(move |core| {
                    let notifier = core.clone();
                    core.shard.borrow_mut().run_batch(
                        commands,
                        Box::new(move |shard, reply| {
                            // Pushes leave before the reply does; the reply
                            // once the log has the batch's writes on disk
                            // (one sync for every batch of the moment under
                            // `appendfsync always`).
                            notifier.publish_group_committed(shard);
                            notifier.after_log_sync(Box::new(move || {
                                let _ = tx.send(reply);
                            }));
                        }),
                    );
                });
                conn.core.send_job(shard, job).await;
                waiting.push((shard, rx));
            }
            for (shard, rx) in waiting {
                // A dropped batch can only come from a panicking job; its
                // replies become errors below rather than a stuck connection.
                let mut reply: BatchReply = rx.recv_async().await.unwrap_or_default();
                if !reply.rest.is_empty() {
                    to_send.push((shard, std::mem::take(&mut reply.rest)));
                }
                match received.iter_mut().find(|r| r.shard == shard) {
                    Some(r) => r.append(reply),
                    None => received.push(Received::new(shard, reply)),
                }
            }
            // Write every reply available in order, up to the first that
            // is still to come.
            while let Some(part) = parts.get(next_part) {
                match part {
                    ReplyAt::Side(range) => conn.out.append_range(&self.side, range.clone()),
                    ReplyAt::Batch { shard, index, suppress } => {
                        let r = received.iter_mut().find(|r| r.shard == *shard);
                        match r.as_deref().and_then(|r| Some((&r.buf, r.get(*index)?))) {
                            Some((buf, range)) if !suppress => conn.out.append_range(buf, range),
                            Some(_) => {}
                            None if to_send.iter().any(|(s, _)| s == shard) => break,
                            None => conn.reply().error(crate::mesh::NO_ANSWER.text()),
                        }
                        if let Some(r) = r {
                            r.consumed(*index);
                        }
                    }
                }
                next_part += 1;
            }
            if to_send.is_empty() {
                break;
            }
            for r in &mut received {
                r.compact();
            }
            if conn.flush().await.is_err() {
                conn.state.close_after_reply = true;
                break;
            }
        }
        self.side.clear();
        self.home_batched = false;
    }
}

/// The replies received so far from one shard in this segment. Replies are
/// numbered from the start of the segment; those already written are
/// dropped from the front.
struct Received {
    shard: ShardId,
    buf: Output,
    /// End offset in `buf` of each reply kept.
    ends: Vec<usize>,
    /// Number of the first reply kept.
    first: usize,
    /// Replies before this number have been written.
    written: usize,
}

impl Received {
    fn new(shard: ShardId, reply: BatchReply) -> Self {
        Received { shard, buf: reply.buf, ends: reply.ends, first: 0, written: 0 }
    }

    fn append(&mut self, mut reply: BatchReply) {
        let base = self.buf.len();
        self.buf.append(&mut reply.buf);
        self.ends.extend(reply.ends.iter().map(|e| e + base));
    }

    /// Where reply `index` is in `buf`.
    fn get(&self, index: usize) -> Option<Range<usize>> {
        let i = index.checked_sub(self.first)?;
        let end = *self.ends.get(i)?;
        let start = if i == 0 { 0 } else { self.ends[i - 1] };
        Some(start..end)
    }

    fn consumed(&mut self, index: usize) {
        self.written = self.written.max(index + 1);
    }

    /// Drops the replies already written.
    fn compact(&mut self) {
        let drop = self.written.saturating_sub(self.first).min(self.ends.len());
        if drop == 0 {
            return;
        }
        let bytes = self.ends[drop - 1];
        self.buf.drain_front(bytes);
        self.ends.drain(..drop);
        self.ends.iter_mut().for_each(|e| *e -= bytes);
        self.first += drop;
    }
}
