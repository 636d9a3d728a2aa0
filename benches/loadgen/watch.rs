//! `watch-latency`: W RESP3 connections watch one key with `GET.WATCH key`
//! (each push a frame `>3 GET <fingerprint> <value>`) while a writer SETs
//! the key to `<sequence>:<send time>`. Measures the time from the SET to
//! each push, and pushes received per second.
//!
//! The writer waits for credit (see `flow`): with the default window of 1
//! it sets the next value only once every watcher has seen the last one,
//! so each push is timed without a queue in front of it. Pushes may
//! coalesce under a burst (the server sends the latest value), so a
//! watcher credits every sequence number it skipped as well.
//!
//! A server without GET.WATCH (redis-server) is reported "not supported"
//! after one probe connection.

use crate::conn::{expect_status, Conn};
use crate::flow::Flow;
use crate::measure::{now_ns, Outcome, Window};
use crate::reactor::{Attached, Ctx, Session};
use crate::resp::Reply;
use crate::run::{finish, supported, Common, Failure, Sender, Setup};
use std::sync::Arc;

const KEY: &[u8] = b"lg:watched";

#[derive(Clone, Debug)]
pub struct Options {
    pub watchers: usize,
    /// SETs not yet seen by every watcher, at most.
    pub window: u64,
}

pub fn run(common: &Common, options: &Options) -> Outcome {
    let variant = format!("watchers={}", options.watchers);
    finish("watch-latency", variant, "pushes", common, || prepare(common, options))
}

fn prepare(common: &Common, options: &Options) -> Result<Setup, Failure> {
    let mut writer = Conn::open(&common.target)?;
    supported(writer.call(&[b"DEL", KEY])?, "DEL")?;
    let watchers = options.watchers.max(1) as u64;
    let flow = Arc::new(Flow::new(options.window.max(1) * watchers));
    let mut setup = Setup::default();
    for _ in 0..watchers {
        let watcher = watch(common)?;
        let (stream, pending) = watcher.into_parts();
        let session = Watcher { flow: Arc::clone(&flow), seen: 0 };
        setup.connections.push(Attached { stream, pending, session: Box::new(session) });
    }
    let sender: Sender = Box::new(move |window| write(writer, &flow, watchers, window));
    setup.senders.push(sender);
    Ok(setup)
}

/// A RESP3 connection watching the key, its first push (the current
/// value, null as the key was just deleted) read.
fn watch(common: &Common) -> Result<Conn, Failure> {
    let mut conn = Conn::open(&common.target)?;
    supported(conn.call(&[b"HELLO", b"3"])?, "HELLO 3")?;
    let first = supported(conn.call(&[b"GET.WATCH", KEY])?, "GET.WATCH")?;
    match first {
        Reply::Push(items) if items.len() == 3 && items[0].bulk() == Some(b"GET") => Ok(conn),
        other => Err(Failure::Error(format!("GET.WATCH: {}", other.describe()))),
    }
}

/// The writer: SET the key to a new stamped value whenever credit allows.
fn write(mut conn: Conn, flow: &Flow, watchers: u64, window: Window) -> Result<(), String> {
    flow.register();
    let mut sequence = 0u64;
    while flow.acquire(watchers, &window)? {
        sequence += 1;
        let value = format!("{sequence}:{}", now_ns());
        expect_status(&conn.call(&[b"SET", KEY, value.as_bytes()])?, "SET")?;
    }
    Ok(())
}

struct Watcher {
    flow: Arc<Flow>,
    /// The last sequence number pushed to this watcher.
    seen: u64,
}

/// `<sequence>:<send time>` as the writer sets it.
fn parse_value(value: &[u8]) -> Option<(u64, u64)> {
    let text = std::str::from_utf8(value).ok()?;
    let (sequence, sent) = text.split_once(':')?;
    Some((sequence.parse().ok()?, sent.parse().ok()?))
}

impl Session for Watcher {
    fn begin(&mut self, _out: &mut Vec<u8>, _ctx: &mut Ctx) -> Result<(), String> {
        Ok(())
    }

    fn on_reply(&mut self, reply: Reply, _out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String> {
        let value = match &reply {
            Reply::Push(items) if items.len() == 3 && items[0].bulk() == Some(b"GET") => {
                items[2].bulk().and_then(parse_value)
            }
            _ => None,
        };
        let Some((sequence, sent)) = value else {
            return Err(format!("watcher got {}", reply.describe()));
        };
        if sequence > self.seen {
            self.flow.credit(sequence - self.seen);
            self.seen = sequence;
        }
        ctx.ops(1);
        ctx.latency_since(sent);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_read_back() {
        assert_eq!(parse_value(b"12:345"), Some((12, 345)));
        assert_eq!(parse_value(b"12"), None);
        assert_eq!(parse_value(b"a:1"), None);
    }
}
