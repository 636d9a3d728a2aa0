//! A blocking RESP connection: used to set a scenario up (probes, SCRIPT
//! LOAD, subscriptions) and by the threads that send at a controlled pace
//! (publishers, writers, pushers, producers). Connections that only answer
//! to what arrives are driven by the reactor instead.

use crate::resp::{self, Reply};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// How long a read may wait for a reply before the run is declared stuck.
/// Generous: a 1000-watcher run may keep a server busy for a while.
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(10);

pub struct Conn {
    stream: TcpStream,
    /// Bytes read but not parsed yet start at `start`.
    buf: Vec<u8>,
    start: usize,
    out: Vec<u8>,
}

/// Where the server under test listens.
#[derive(Clone, Debug)]
pub struct Target {
    pub host: String,
    pub port: u16,
}

impl Conn {
    pub fn open(target: &Target) -> Result<Conn, String> {
        let stream = TcpStream::connect((target.host.as_str(), target.port))
            .map_err(|e| format!("connect to {}:{}: {e}", target.host, target.port))?;
        stream.set_nodelay(true).map_err(|e| e.to_string())?;
        stream.set_read_timeout(Some(REPLY_TIMEOUT)).map_err(|e| e.to_string())?;
        Ok(Conn { stream, buf: Vec::with_capacity(16 * 1024), start: 0, out: Vec::new() })
    }

    /// Queues a command; `flush` sends everything queued.
    pub fn queue(&mut self, args: &[&[u8]]) {
        resp::encode(&mut self.out, args);
    }

    pub fn flush(&mut self) -> Result<(), String> {
        let result = self.stream.write_all(&self.out).map_err(|e| format!("write: {e}"));
        self.out.clear();
        result
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Reply, String> {
        self.queue(args);
        self.flush()?;
        self.read()
    }

    /// Reads the next reply (or push frame).
    pub fn read(&mut self) -> Result<Reply, String> {
        loop {
            match resp::parse(&self.buf[self.start..]).map_err(|e| e.to_string())? {
                Some((reply, used)) => {
                    self.start += used;
                    if self.start == self.buf.len() {
                        self.buf.clear();
                        self.start = 0;
                    }
                    return Ok(reply);
                }
                None => self.fill()?,
            }
        }
    }

    /// Reads more bytes from the socket into the buffer.
    fn fill(&mut self) -> Result<(), String> {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + 16 * 1024, 0);
        let read = self.stream.read(&mut self.buf[len..]);
        match read {
            Ok(0) => {
                self.buf.truncate(len);
                Err("connection closed by the server".into())
            }
            Ok(n) => {
                self.buf.truncate(len + n);
                Ok(())
            }
            Err(e) => {
                self.buf.truncate(len);
                Err(match e.kind() {
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
                        format!("no reply within {} s", REPLY_TIMEOUT.as_secs())
                    }
                    _ => format!("read: {e}"),
                })
            }
        }
    }

    /// Hands the socket and any bytes already read to the reactor.
    pub fn into_parts(mut self) -> (TcpStream, Vec<u8>) {
        self.buf.drain(..self.start);
        (self.stream, self.buf)
    }
}

/// A reply that must be `+OK` (or another status).
pub fn expect_status(reply: &Reply, what: &str) -> Result<(), String> {
    match reply {
        Reply::Status(_) => Ok(()),
        other => Err(format!("{what}: {}", other.describe())),
    }
}
