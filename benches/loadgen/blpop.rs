//! `blpop-latency`: B connections blocked in `BLPOP lg:list 0`, each
//! blocking again as soon as it is served, and a pusher on its own
//! connection doing `LPUSH lg:list <send time>`. Measures the wake-up
//! latency, from the LPUSH to the BLPOP reply, and wake-ups per second.
//!
//! The pusher is paced by credit (see `flow`): with the default window of
//! 1 it pushes the next element only once the last one was popped, so each
//! wake-up is timed on its own. A server without BLPOP is reported "not
//! supported" after a probe (`BLPOP` on an empty key with a 10 ms timeout).

use crate::conn::Conn;
use crate::flow::Flow;
use crate::measure::{now_ns, read_stamp, Outcome, Window};
use crate::reactor::{Attached, Ctx, Session};
use crate::resp::{encode, Reply};
use crate::run::{finish, supported, Common, Failure, Sender, Setup};
use std::sync::Arc;

const KEY: &[u8] = b"lg:list";

#[derive(Clone, Debug)]
pub struct Options {
    pub clients: usize,
    /// Elements pushed but not popped yet, at most.
    pub window: u64,
}

pub fn run(common: &Common, options: &Options) -> Outcome {
    let variant = format!("clients={}", options.clients);
    finish("blpop-latency", variant, "wakeups", common, || prepare(common, options))
}

fn prepare(common: &Common, options: &Options) -> Result<Setup, Failure> {
    let mut pusher = Conn::open(&common.target)?;
    supported(pusher.call(&[b"DEL", KEY])?, "DEL")?;
    match supported(pusher.call(&[b"BLPOP", b"lg:list:probe", b"0.01"])?, "BLPOP")? {
        Reply::Null => {}
        other => {
            return Err(Failure::Error(format!("BLPOP on an empty key: {}", other.describe())))
        }
    }
    let flow = Arc::new(Flow::new(options.window.max(1)));
    let mut setup = Setup::default();
    for _ in 0..options.clients.max(1) {
        let (stream, pending) = Conn::open(&common.target)?.into_parts();
        let session = Popper { flow: Arc::clone(&flow) };
        setup.connections.push(Attached { stream, pending, session: Box::new(session) });
    }
    let sender: Sender = Box::new(move |window| push(pusher, &flow, window));
    setup.senders.push(sender);
    Ok(setup)
}

fn push(mut conn: Conn, flow: &Flow, window: Window) -> Result<(), String> {
    flow.register();
    while flow.acquire(1, &window)? {
        let value = now_ns().to_string();
        match conn.call(&[b"LPUSH", KEY, value.as_bytes()])? {
            Reply::Int(_) => {}
            other => return Err(format!("LPUSH: {}", other.describe())),
        }
    }
    Ok(())
}

struct Popper {
    flow: Arc<Flow>,
}

fn block(out: &mut Vec<u8>) {
    encode(out, &[b"BLPOP", KEY, b"0"]);
}

impl Session for Popper {
    fn begin(&mut self, out: &mut Vec<u8>, _ctx: &mut Ctx) -> Result<(), String> {
        block(out);
        Ok(())
    }

    fn on_reply(&mut self, reply: Reply, out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String> {
        let stamp = match reply.items() {
            Some([key, value]) if key.bulk() == Some(KEY) => {
                value.bulk().and_then(|v| read_stamp(v, ""))
            }
            _ => None,
        };
        let Some(sent) = stamp else {
            return Err(format!("BLPOP: {}", reply.describe()));
        };
        block(out);
        ctx.ops(1);
        ctx.latency_since(sent);
        self.flow.credit(1);
        Ok(())
    }
}
