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
use ringdb_engine::shard::{BatchReply, Clock};
use ringdb_engine::{ShardCommand, ShardId};
use ringdb_protocol::ReplyWriter;
use std::ops::Range;

/// Where a reply is, once the segment has been sent.
enum Part {
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
    parts: Vec<Part>,
    side: Vec<u8>,
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

    fn batch_for(&mut self, shard: ShardId) -> &mut Vec<ShardCommand> {
        match self.batches.iter().position(|(s, _)| *s == shard) {
            Some(i) => &mut self.batches[i].1,
            None => {
                self.batches.push((shard, Vec::new()));
                &mut self.batches.last_mut().expect("just pushed").1
            }
        }
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
                    local.execute_with(
                        &command,
                        &mut self.side,
                        self.clock.get_or_insert_with(Clock::start),
                    );
                    if suppress {
                        self.side.truncate(start);
                    }
                    self.parts.push(Part::Side(start..self.side.len()));
                } else {
                    let mark = conn.out.len();
                    local.execute_with(
                        &command,
                        &mut conn.out,
                        self.clock.get_or_insert_with(Clock::start),
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
        self.parts.push(Part::Batch { shard, index, suppress });
    }

    /// An error reply in request order (unknown command, NOAUTH, …).
    pub fn reply_error(&mut self, conn: &mut Connection, error: &CmdError, suppress: bool) {
        conn.core.shard.borrow_mut().state.stats.error(error.code());
        if suppress {
            return;
        }
        if self.pending() {
            let start = self.side.len();
            ReplyWriter::new(&mut self.side, conn.state.resp).error(error.text());
            self.parts.push(Part::Side(start..self.side.len()));
        } else {
            conn.reply().error(error.text());
        }
    }

    /// Sends the batches, waits for every reply and writes them all, in
    /// request order, to the connection's output.
    pub async fn finish(&mut self, conn: &mut Connection) {
        // What runs next (a server or cross-shard command) is timed on its
        // own; the next shard command starts a new clock.
        self.clock = None;
        if !self.pending() {
            return;
        }
        let batches = std::mem::take(&mut self.batches);
        let mut replies: Vec<(ShardId, BatchReply)> = Vec::with_capacity(batches.len());
        let mut waiting = Vec::with_capacity(batches.len());
        for (shard, commands) in batches {
            let (tx, rx) = flume::bounded(1);
            let job: crate::mesh::Job = Box::new(move |core| {
                core.shard.borrow_mut().run_batch(
                    commands,
                    0,
                    BatchReply::default(),
                    false,
                    Box::new(move |_, reply| {
                        let _ = tx.send(reply);
                    }),
                );
            });
            conn.core.send_job(shard, job).await;
            waiting.push((shard, rx));
        }
        for (shard, rx) in waiting {
            // A dropped batch can only come from a panicking job; its
            // replies become errors below rather than a stuck connection.
            let reply = rx.recv_async().await.unwrap_or_default();
            replies.push((shard, reply));
        }
        for part in std::mem::take(&mut self.parts) {
            match part {
                Part::Side(range) => conn.out.extend_from_slice(&self.side[range]),
                Part::Batch { shard, index, suppress } => {
                    let reply = replies.iter().find(|(s, _)| *s == shard).map(|(_, r)| r);
                    match reply.filter(|r| index < r.ends.len()) {
                        Some(r) if !suppress => conn.out.extend_from_slice(r.reply(index)),
                        Some(_) => {}
                        None => conn.reply().error(crate::mesh::NO_ANSWER.text()),
                    }
                }
            }
        }
        self.side.clear();
        self.home_batched = false;
    }
}
