//! `publish`: S subscriber connections on one channel (each its own
//! connection, so the server spreads them over its cores) and P publisher
//! threads. Measures messages delivered per second, summed over the
//! subscribers, and the time from PUBLISH to each delivery (the payload
//! carries its send time).
//!
//! Publishers are paced by credit (see `flow`): at most `window` messages
//! are on their way to the subscribers, so the server's output buffers stay
//! small and the rate is one the subscribers keep up with.

use crate::conn::Conn;
use crate::flow::Flow;
use crate::measure::{now_ns, read_stamp, stamped, Outcome, Window};
use crate::reactor::{Attached, Ctx, Session};
use crate::resp::Reply;
use crate::run::{finish, supported, Common, Failure, Sender, Setup};
use std::sync::Arc;

const CHANNEL: &[u8] = b"lg:channel";

#[derive(Clone, Debug)]
pub struct Options {
    pub subscribers: usize,
    pub publishers: usize,
    /// Bytes of each message (at least its timestamp).
    pub payload: usize,
    /// Messages in flight at most, over all publishers.
    pub window: u64,
}

pub fn run(common: &Common, options: &Options) -> Outcome {
    let variant = format!(
        "subscribers={} publishers={} payload={}",
        options.subscribers, options.publishers, options.payload
    );
    finish("publish", variant, "deliveries", common, || prepare(common, options))
}

fn prepare(common: &Common, options: &Options) -> Result<Setup, Failure> {
    let mut probe = Conn::open(&common.target)?;
    // Nobody listens to this channel: PUBLISH answers 0 if it exists.
    match supported(probe.call(&[b"PUBLISH", b"lg:nobody", b"x"])?, "PUBLISH")? {
        Reply::Int(0) => {}
        other => return Err(Failure::Error(format!("PUBLISH: {}", other.describe()))),
    }
    let subscribers = options.subscribers.max(1) as u64;
    let flow = Arc::new(Flow::new(options.window.max(1) * subscribers));
    let mut setup = Setup::default();
    for _ in 0..subscribers {
        let mut conn = Conn::open(&common.target)?;
        let reply = supported(conn.call(&[b"SUBSCRIBE", CHANNEL])?, "SUBSCRIBE")?;
        if reply.items().and_then(|items| items.first()).and_then(Reply::bulk) != Some(b"subscribe")
        {
            return Err(Failure::Error(format!("SUBSCRIBE: {}", reply.describe())));
        }
        let (stream, pending) = conn.into_parts();
        let session = Subscriber { flow: Arc::clone(&flow) };
        setup.connections.push(Attached { stream, pending, session: Box::new(session) });
    }
    for _ in 0..options.publishers.max(1) {
        let conn = Conn::open(&common.target)?;
        let (flow, size) = (Arc::clone(&flow), options.payload);
        let publisher: Sender =
            Box::new(move |window| publish(conn, &flow, subscribers, size, window));
        setup.senders.push(publisher);
    }
    Ok(setup)
}

/// One publisher: PUBLISH, read the receiver count, repeat.
fn publish(
    mut conn: Conn,
    flow: &Flow,
    subscribers: u64,
    size: usize,
    window: Window,
) -> Result<(), String> {
    flow.register();
    while flow.acquire(subscribers, &window)? {
        let payload = stamped("", now_ns(), size);
        match conn.call(&[b"PUBLISH", CHANNEL, &payload])? {
            Reply::Int(n) if n as u64 == subscribers => {}
            // Once the window is over the event loops close the
            // subscribers, and a PUBLISH still in flight reaches fewer.
            Reply::Int(_) if window.over(now_ns()) => break,
            other => {
                return Err(format!(
                    "PUBLISH reached {} of {subscribers} subscribers",
                    other.describe()
                ))
            }
        }
    }
    Ok(())
}

struct Subscriber {
    flow: Arc<Flow>,
}

impl Session for Subscriber {
    fn begin(&mut self, _out: &mut Vec<u8>, _ctx: &mut Ctx) -> Result<(), String> {
        Ok(())
    }

    fn on_reply(&mut self, reply: Reply, _out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String> {
        let stamp = match reply.items() {
            Some([kind, _channel, payload]) if kind.bulk() == Some(b"message") => {
                payload.bulk().and_then(|p| read_stamp(p, ""))
            }
            _ => None,
        };
        let Some(sent) = stamp else {
            return Err(format!("subscriber got {}", reply.describe()));
        };
        ctx.ops(1);
        ctx.latency_since(sent);
        self.flow.credit(1);
        Ok(())
    }
}
