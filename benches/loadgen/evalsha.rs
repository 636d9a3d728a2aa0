//! `evalsha`: SCRIPT LOAD of a script, then closed-loop clients calling it
//! with EVALSHA. Two scripts:
//!
//! - `flash-sale` (the default): one purchase of a flash sale, all or
//!   nothing. The script checks the item's stock, checks that the buyer has
//!   not bought it yet, decrements the stock, records the buyer in a set and
//!   appends the order to a list. Each call draws an item out of `--items`
//!   and a buyer out of `--keyspace`; an item's three keys share a hash tag
//!   (one shard in ringdb). Every item starts with `--stock` units, enough
//!   not to sell out during a run, so most calls are purchases (five
//!   commands) and the rest refusals of a repeat buyer.
//! - `seckill`: the purchase script of the flash-sale tutorial
//!   (`shared/seeds/004_…`) verbatim, called as the tutorial calls it, with
//!   no declared key (`EVALSHA sha 0 voucher user order`): it builds its
//!   keys (`seckill:stock:<v>`, `seckill:order:<v>`) and appends each order
//!   to the stream `stream.orders`. Vouchers come from `--items`, users from
//!   `--keyspace`; the order id is a counter per client.
//! - `incr`: `return redis.call('INCR', KEYS[1])` on a random key.
//!
//! Keys carry a prefix unique to the run, so repeated runs against one
//! server start from the same state without deleting anything.

use crate::conn::Conn;
use crate::measure::{now_ns, Outcome, Rng};
use crate::reactor::{Attached, Ctx, Session};
use crate::resp::{encode, Reply};
use crate::run::{finish, supported, Common, Failure, Setup};
use std::io::Write;

/// KEYS: stock, buyers, orders; ARGV: buyer. Returns 1 (bought), 0 (this
/// buyer already has one) or -1 (sold out).
pub const FLASH_SALE: &str = "\
local stock = tonumber(redis.call('GET', KEYS[1]))
if not stock or stock <= 0 then return -1 end
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return 0 end
redis.call('DECR', KEYS[1])
redis.call('SADD', KEYS[2], ARGV[1])
redis.call('RPUSH', KEYS[3], ARGV[1])
return 1";

/// The flash-sale tutorial's purchase script (the tests run it too). ARGV:
/// voucher, user, order id. Returns 0 (bought), 1 (sold out) or 2 (this
/// user already bought it).
pub const SECKILL: &str = include_str!("seckill.lua");

pub const INCR: &str = "return redis.call('INCR', KEYS[1])";

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Script {
    FlashSale,
    Seckill,
    Incr,
}

#[derive(Clone, Debug)]
pub struct Options {
    pub clients: usize,
    pub pipeline: usize,
    pub script: Script,
    /// Items on sale (flash-sale).
    pub items: u64,
    /// Units of each item at the start (flash-sale).
    pub stock: u64,
}

pub fn run(common: &Common, options: &Options) -> Outcome {
    let variant = match options.script {
        Script::FlashSale => format!(
            "script=flash-sale items={} clients={} pipeline={}",
            options.items, options.clients, options.pipeline
        ),
        Script::Seckill => format!(
            "script=seckill vouchers={} clients={} pipeline={}",
            options.items, options.clients, options.pipeline
        ),
        Script::Incr => {
            format!("script=incr clients={} pipeline={}", options.clients, options.pipeline)
        }
    };
    finish("evalsha", variant, "calls", common, || prepare(common, options))
}

/// The key prefix of this run: a number no earlier run used.
fn run_prefix() -> String {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or_default();
    format!("lg:{since_epoch:x}")
}

/// The keys of item `item`: stock, buyers, orders.
fn item_keys(prefix: &str, item: u64) -> [String; 3] {
    ["stock", "buyers", "orders"].map(|what| format!("{prefix}:{{item{item}}}:{what}"))
}

fn prepare(common: &Common, options: &Options) -> Result<Setup, Failure> {
    let mut loader = Conn::open(&common.target)?;
    let script = match options.script {
        Script::FlashSale => FLASH_SALE,
        Script::Seckill => SECKILL,
        Script::Incr => INCR,
    };
    let sha =
        match supported(loader.call(&[b"SCRIPT", b"LOAD", script.as_bytes()])?, "SCRIPT LOAD")? {
            Reply::Bulk(sha) if sha.len() == 40 => sha,
            other => return Err(Failure::Error(format!("SCRIPT LOAD: {}", other.describe()))),
        };
    let prefix = run_prefix();
    let items = options.items.max(1);
    match options.script {
        Script::FlashSale => stock_items(&mut loader, &prefix, items, options.stock)?,
        Script::Seckill => stock_vouchers(&mut loader, &prefix, items, options.stock)?,
        Script::Incr => {}
    }
    let mut setup = Setup::default();
    for i in 0..options.clients {
        let (stream, pending) = Conn::open(&common.target)?.into_parts();
        let session = Client {
            sha: sha.clone(),
            script: options.script,
            prefix: prefix.clone(),
            items,
            pipeline: options.pipeline,
            keyspace: common.keyspace,
            rng: Rng::new(i as u64 + 1),
            orders: (i as u64) << 40,
            sent_at: 0,
            replies_left: 0,
        };
        setup.connections.push(Attached { stream, pending, session: Box::new(session) });
    }
    Ok(setup)
}

/// The tutorial's voucher ids of this run (its keys carry no prefix: the
/// script builds them, so the run's prefix goes into the voucher id).
fn voucher(prefix: &str, item: u64) -> String {
    format!("{prefix}-{item}")
}

/// SETs every voucher's stock, as the tutorial does before the sale.
fn stock_vouchers(conn: &mut Conn, prefix: &str, items: u64, stock: u64) -> Result<(), String> {
    let stock = stock.to_string();
    for item in 0..items {
        let key = format!("seckill:stock:{}", voucher(prefix, item));
        conn.queue(&[b"SET", key.as_bytes(), stock.as_bytes()]);
    }
    conn.flush()?;
    for _ in 0..items {
        crate::conn::expect_status(&conn.read()?, "SET stock")?;
    }
    Ok(())
}

/// SETs every item's stock, pipelined.
fn stock_items(conn: &mut Conn, prefix: &str, items: u64, stock: u64) -> Result<(), String> {
    let stock = stock.to_string();
    for item in 0..items {
        let [key, _, _] = item_keys(prefix, item);
        conn.queue(&[b"SET", key.as_bytes(), stock.as_bytes()]);
    }
    conn.flush()?;
    for _ in 0..items {
        crate::conn::expect_status(&conn.read()?, "SET stock")?;
    }
    Ok(())
}

struct Client {
    sha: Vec<u8>,
    script: Script,
    prefix: String,
    items: u64,
    pipeline: usize,
    keyspace: u64,
    rng: Rng,
    /// Orders this client placed (the seckill script's order ids).
    orders: u64,
    sent_at: u64,
    replies_left: usize,
}

impl Client {
    fn queue_call(&mut self, out: &mut Vec<u8>) {
        match self.script {
            Script::FlashSale => {
                let [stock, buyers, orders] = item_keys(&self.prefix, self.rng.below(self.items));
                let buyer = format!("user:{}", self.rng.below(self.keyspace));
                encode(
                    out,
                    &[
                        b"EVALSHA",
                        &self.sha,
                        b"3",
                        stock.as_bytes(),
                        buyers.as_bytes(),
                        orders.as_bytes(),
                        buyer.as_bytes(),
                    ],
                );
            }
            Script::Seckill => {
                let voucher = voucher(&self.prefix, self.rng.below(self.items));
                let user = self.rng.below(self.keyspace).to_string();
                self.orders += 1;
                let order = self.orders.to_string();
                encode(
                    out,
                    &[
                        b"EVALSHA",
                        &self.sha,
                        b"0",
                        voucher.as_bytes(),
                        user.as_bytes(),
                        order.as_bytes(),
                    ],
                );
            }
            Script::Incr => {
                let mut key = Vec::with_capacity(40);
                // Writing to a Vec cannot fail.
                let _ = write!(key, "{}:key:{}", self.prefix, self.rng.below(self.keyspace));
                encode(out, &[b"EVALSHA", &self.sha, b"1", &key]);
            }
        }
    }

    fn send_batch(&mut self, out: &mut Vec<u8>) {
        for _ in 0..self.pipeline {
            self.queue_call(out);
        }
        self.sent_at = now_ns();
        self.replies_left = self.pipeline;
    }

    /// A reply the script can give: any integer for INCR, 1, 0 or -1 for
    /// the sale, 0, 1 or 2 for the tutorial's.
    fn check(&self, reply: &Reply) -> Result<(), String> {
        match (self.script, reply) {
            (Script::Incr, Reply::Int(_))
            | (Script::FlashSale, Reply::Int(-1..=1))
            | (Script::Seckill, Reply::Int(0..=2)) => Ok(()),
            _ => Err(format!("EVALSHA: {}", reply.describe())),
        }
    }
}

impl Session for Client {
    fn begin(&mut self, out: &mut Vec<u8>, _ctx: &mut Ctx) -> Result<(), String> {
        self.send_batch(out);
        Ok(())
    }

    fn on_reply(&mut self, reply: Reply, out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String> {
        self.check(&reply)?;
        ctx.ops(1);
        ctx.latency_since(self.sent_at);
        self.replies_left -= 1;
        if self.replies_left == 0 {
            self.send_batch(out);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_items_keys_share_a_hash_tag() {
        let keys = item_keys("lg:1f", 7);
        assert_eq!(keys, ["lg:1f:{item7}:stock", "lg:1f:{item7}:buyers", "lg:1f:{item7}:orders"]);
        assert_ne!(run_prefix(), "lg:0");
    }
}
