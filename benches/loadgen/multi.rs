//! `multi`: transactions of MULTI, N INCRs and EXEC, from closed-loop
//! clients. With `--keys tagged` the INCRs of one transaction share a hash
//! tag (one shard in ringdb); with `--keys random` each key is drawn on its
//! own, so with two shards almost every transaction spans both.
//!
//! Latency is per transaction: from sending its batch to reading its EXEC
//! reply. With `--pipeline P` a client sends P transactions at once and
//! waits for all of them, as redis-benchmark's `-P` does.

use crate::conn::{expect_status, Conn};
use crate::measure::{now_ns, Outcome, Rng};
use crate::reactor::{Attached, Ctx, Session};
use crate::resp::{encode, Reply};
use crate::run::{finish, supported, Common, Failure, Setup};
use std::io::Write;

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Keys {
    /// One hash tag per transaction.
    Tagged,
    /// Every key drawn independently.
    Random,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub clients: usize,
    pub pipeline: usize,
    /// INCRs per transaction.
    pub commands: usize,
    pub keys: Keys,
}

pub fn run(common: &Common, options: &Options) -> Outcome {
    let keys = match options.keys {
        Keys::Tagged => "tagged",
        Keys::Random => "random",
    };
    let variant = format!(
        "keys={keys} commands={} clients={} pipeline={}",
        options.commands, options.clients, options.pipeline
    );
    finish("multi", variant, "transactions", common, || prepare(common, options))
}

fn prepare(common: &Common, options: &Options) -> Result<Setup, Failure> {
    let mut probe = Conn::open(&common.target)?;
    supported(probe.call(&[b"MULTI"])?, "MULTI")?;
    match supported(probe.call(&[b"EXEC"])?, "EXEC")? {
        Reply::Array(items) if items.is_empty() => {}
        other => return Err(Failure::Error(format!("empty EXEC: {}", other.describe()))),
    }
    let mut setup = Setup::default();
    for i in 0..options.clients {
        let (stream, pending) = Conn::open(&common.target)?.into_parts();
        let session = Client {
            options: options.clone(),
            keyspace: common.keyspace,
            rng: Rng::new(i as u64 + 1),
            sent_at: 0,
            replies_left: 0,
            position: 0,
        };
        setup.connections.push(Attached { stream, pending, session: Box::new(session) });
    }
    Ok(setup)
}

struct Client {
    options: Options,
    keyspace: u64,
    rng: Rng,
    sent_at: u64,
    /// Transactions of the batch not answered yet.
    replies_left: usize,
    /// Replies read of the current transaction (0 = MULTI's).
    position: usize,
}

impl Client {
    fn send_batch(&mut self, out: &mut Vec<u8>) {
        let mut key = Vec::with_capacity(32);
        for _ in 0..self.options.pipeline {
            encode(out, &[b"MULTI"]);
            let tag = self.rng.below(self.keyspace);
            for j in 0..self.options.commands {
                key.clear();
                // Writing to a Vec cannot fail.
                let _ = match self.options.keys {
                    Keys::Tagged => write!(key, "lg:{{{tag}}}:{j}"),
                    Keys::Random => write!(key, "lg:key:{}", self.rng.below(self.keyspace)),
                };
                encode(out, &[b"INCR", &key]);
            }
            encode(out, &[b"EXEC"]);
        }
        self.sent_at = now_ns();
        self.replies_left = self.options.pipeline;
        self.position = 0;
    }

    /// Checks the EXEC reply: one integer per INCR.
    fn check_exec(&self, reply: &Reply) -> Result<(), String> {
        match reply {
            Reply::Array(items)
                if items.len() == self.options.commands
                    && items.iter().all(|r| matches!(r, Reply::Int(_))) =>
            {
                Ok(())
            }
            other => Err(format!("EXEC: {}", other.describe())),
        }
    }
}

impl Session for Client {
    fn begin(&mut self, out: &mut Vec<u8>, _ctx: &mut Ctx) -> Result<(), String> {
        self.send_batch(out);
        Ok(())
    }

    fn on_reply(&mut self, reply: Reply, out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String> {
        let last = self.options.commands + 1;
        match self.position {
            0 => expect_status(&reply, "MULTI")?,
            p if p < last => expect_status(&reply, "queued INCR")?,
            _ => self.check_exec(&reply)?,
        }
        if self.position < last {
            self.position += 1;
            return Ok(());
        }
        self.position = 0;
        ctx.ops(1);
        ctx.latency_since(self.sent_at);
        self.replies_left -= 1;
        if self.replies_left == 0 {
            self.send_batch(out);
        }
        Ok(())
    }
}
