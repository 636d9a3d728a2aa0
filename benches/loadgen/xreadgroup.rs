//! `xreadgroup`: P producer threads XADD entries `ts <send time>` to one
//! stream, and a consumer group of C consumers loops on `XREADGROUP GROUP
//! lg:group c<i> COUNT n BLOCK 100 STREAMS lg:stream >` and acknowledges
//! every batch with one XACK. Measures entries acknowledged per second,
//! and the time from XADD to the entry's delivery.
//!
//! Producers are paced by credit (see `flow`): at most `window` entries are
//! added but not acknowledged. The stream is deleted and the group created
//! afresh (MKSTREAM) before each run; a server without streams is reported
//! "not supported" by XGROUP CREATE.

use crate::conn::{expect_status, Conn};
use crate::flow::Flow;
use crate::measure::{now_ns, Outcome, Window};
use crate::reactor::{Attached, Ctx, Session};
use crate::resp::{encode, Reply};
use crate::run::{finish, supported, Common, Failure, Sender, Setup};
use std::sync::Arc;

const STREAM: &[u8] = b"lg:stream";
const GROUP: &[u8] = b"lg:group";

#[derive(Clone, Debug)]
pub struct Options {
    pub producers: usize,
    pub consumers: usize,
    /// XREADGROUP's COUNT.
    pub count: usize,
    /// XADDs a producer sends per round trip.
    pub pipeline: usize,
    /// Entries added but not acknowledged, at most.
    pub window: u64,
}

pub fn run(common: &Common, options: &Options) -> Outcome {
    let variant = format!(
        "producers={} consumers={} count={} pipeline={}",
        options.producers, options.consumers, options.count, options.pipeline
    );
    finish("xreadgroup", variant, "acks", common, || prepare(common, options))
}

fn prepare(common: &Common, options: &Options) -> Result<Setup, Failure> {
    let mut admin = Conn::open(&common.target)?;
    supported(admin.call(&[b"DEL", STREAM])?, "DEL")?;
    let created = admin.call(&[b"XGROUP", b"CREATE", STREAM, GROUP, b"0", b"MKSTREAM"])?;
    expect_status(&supported(created, "XGROUP CREATE")?, "XGROUP CREATE")?;
    let flow = Arc::new(Flow::new(options.window.max(1)));
    let mut setup = Setup::default();
    for i in 0..options.consumers.max(1) {
        let (stream, pending) = Conn::open(&common.target)?.into_parts();
        let session = Consumer {
            name: format!("c{i}").into_bytes(),
            count: options.count.max(1).to_string().into_bytes(),
            flow: Arc::clone(&flow),
            acking: 0,
        };
        setup.connections.push(Attached { stream, pending, session: Box::new(session) });
    }
    for _ in 0..options.producers.max(1) {
        let conn = Conn::open(&common.target)?;
        let (flow, pipeline) = (Arc::clone(&flow), options.pipeline.max(1));
        let producer: Sender = Box::new(move |window| produce(conn, &flow, pipeline, window));
        setup.senders.push(producer);
    }
    Ok(setup)
}

fn produce(mut conn: Conn, flow: &Flow, pipeline: usize, window: Window) -> Result<(), String> {
    flow.register();
    while flow.acquire(pipeline as u64, &window)? {
        for _ in 0..pipeline {
            let sent = now_ns().to_string();
            conn.queue(&[b"XADD", STREAM, b"*", b"ts", sent.as_bytes()]);
        }
        conn.flush()?;
        for _ in 0..pipeline {
            match conn.read()? {
                Reply::Bulk(_) => {}
                other => return Err(format!("XADD: {}", other.describe())),
            }
        }
    }
    Ok(())
}

struct Consumer {
    name: Vec<u8>,
    count: Vec<u8>,
    flow: Arc<Flow>,
    /// Entries in the XACK in flight (0: a read is in flight).
    acking: u64,
}

/// One delivered entry: its id and the send time in its `ts` field.
struct Entry<'a> {
    id: &'a [u8],
    sent: Option<u64>,
}

/// The entries of an XREADGROUP reply `[[stream, [[id, [field, value, …]], …]]]`
/// (null when BLOCK timed out).
fn entries(reply: &Reply) -> Result<Vec<Entry<'_>>, String> {
    let bad = || format!("XREADGROUP: {}", reply.describe());
    let Some(streams) = reply.items() else {
        return if *reply == Reply::Null { Ok(Vec::new()) } else { Err(bad()) };
    };
    let mut found = Vec::new();
    for stream in streams {
        let Some([_name, list]) = stream.items() else { return Err(bad()) };
        for entry in list.items().ok_or_else(bad)? {
            let Some([id, fields]) = entry.items() else { return Err(bad()) };
            let id = id.bulk().ok_or_else(bad)?;
            let sent = fields.items().and_then(|f| match f {
                [name, value] if name.bulk() == Some(b"ts") => {
                    std::str::from_utf8(value.bulk()?).ok()?.parse().ok()
                }
                _ => None,
            });
            found.push(Entry { id, sent });
        }
    }
    Ok(found)
}

impl Consumer {
    fn read(&self, out: &mut Vec<u8>) {
        encode(
            out,
            &[
                b"XREADGROUP",
                b"GROUP",
                GROUP,
                &self.name,
                b"COUNT",
                &self.count,
                b"BLOCK",
                b"100",
                b"STREAMS",
                STREAM,
                b">",
            ],
        );
    }
}

impl Session for Consumer {
    fn begin(&mut self, out: &mut Vec<u8>, _ctx: &mut Ctx) -> Result<(), String> {
        self.read(out);
        Ok(())
    }

    fn on_reply(&mut self, reply: Reply, out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String> {
        if self.acking > 0 {
            match reply {
                Reply::Int(n) if n as u64 == self.acking => {}
                other => return Err(format!("XACK of {}: {}", self.acking, other.describe())),
            }
            ctx.ops(self.acking);
            self.flow.credit(self.acking);
            self.acking = 0;
            self.read(out);
            return Ok(());
        }
        let found = entries(&reply)?;
        if found.is_empty() {
            self.read(out);
            return Ok(());
        }
        let mut ack: Vec<&[u8]> = vec![b"XACK", STREAM, GROUP];
        for entry in &found {
            ack.push(entry.id);
            if let Some(sent) = entry.sent {
                ctx.latency_since(sent);
            }
        }
        encode(out, &ack);
        self.acking = found.len() as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(text: &str) -> Reply {
        Reply::Bulk(text.as_bytes().to_vec())
    }

    #[test]
    fn reads_entries() {
        let entry = |id: &str, ts: &str| {
            Reply::Array(vec![bulk(id), Reply::Array(vec![bulk("ts"), bulk(ts)])])
        };
        let reply = Reply::Array(vec![Reply::Array(vec![
            bulk("lg:stream"),
            Reply::Array(vec![entry("1-0", "5"), entry("1-1", "x")]),
        ])]);
        let found = entries(&reply).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].id, found[0].sent), (&b"1-0"[..], Some(5)));
        assert_eq!(found[1].sent, None);
        assert!(entries(&Reply::Null).unwrap().is_empty());
        assert!(entries(&Reply::Int(1)).is_err());
    }
}
