//! An epoll event loop that drives many connections from one thread: the
//! closed-loop clients of `multi` and `evalsha`, and the subscribers,
//! watchers, blocked poppers and consumers that answer to what arrives.
//!
//! One thread per connection would put 1000 threads on the load
//! generator's core for 1000 subscribers, and the scheduler would decide
//! the latencies; one loop reads whatever is ready, as redis-benchmark
//! does. Each connection has a [`Session`]: a small state machine that is
//! told each reply and queues the commands to send next.

use crate::measure::{now_ns, Tally, Window};
use crate::resp::{self, Reply};
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::thread;

/// What a connection does with its replies.
pub trait Session: Send {
    /// Queues the first commands, when the run starts.
    fn begin(&mut self, out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String>;

    /// Handles one reply or push frame; may queue commands in `out`.
    fn on_reply(&mut self, reply: Reply, out: &mut Vec<u8>, ctx: &mut Ctx) -> Result<(), String>;
}

/// What a session sees besides its reply: the time the reply was read, the
/// measured window and the thread's tally.
pub struct Ctx {
    pub now: u64,
    pub window: Window,
    pub tally: Tally,
}

impl Ctx {
    /// Counts `n` operations completed now.
    pub fn ops(&mut self, n: u64) {
        self.tally.ops(&self.window, self.now, n);
    }

    /// Records the latency of something started at `started`.
    pub fn latency_since(&mut self, started: u64) {
        self.tally.latency(&self.window, started, self.now);
    }
}

/// A connection handed to the reactor: its socket, bytes already read from
/// it during set-up, and its session.
pub struct Attached {
    pub stream: TcpStream,
    pub pending: Vec<u8>,
    pub session: Box<dyn Session>,
}

struct Slot {
    stream: TcpStream,
    input: Vec<u8>,
    out: Vec<u8>,
    session: Box<dyn Session>,
}

/// Runs `connections` on `threads` event loops until the window ends, and
/// returns what they counted together.
pub fn run(connections: Vec<Attached>, threads: usize, window: Window) -> Result<Tally, String> {
    let threads = threads.clamp(1, connections.len().max(1));
    let mut groups: Vec<Vec<Attached>> = (0..threads).map(|_| Vec::new()).collect();
    for (i, attached) in connections.into_iter().enumerate() {
        groups[i % threads].push(attached);
    }
    let handles: Vec<_> =
        groups.into_iter().map(|group| thread::spawn(move || event_loop(group, window))).collect();
    let mut total = Tally::default();
    let mut first_error = None;
    for handle in handles {
        match handle.join() {
            Ok(Ok(tally)) => total.merge(&tally),
            Ok(Err(e)) => first_error = first_error.or(Some(e)),
            Err(_) => first_error = first_error.or(Some("an event loop panicked".to_string())),
        }
    }
    first_error.map_or(Ok(total), Err)
}

fn event_loop(group: Vec<Attached>, window: Window) -> Result<Tally, String> {
    let mut poller = Poller::new()?;
    let mut ctx = Ctx { now: now_ns(), window, tally: Tally::default() };
    let mut slots = Vec::with_capacity(group.len());
    for (token, attached) in group.into_iter().enumerate() {
        attached.stream.set_nonblocking(true).map_err(|e| e.to_string())?;
        poller.add(&attached.stream, token as u64)?;
        let mut slot = Slot {
            stream: attached.stream,
            input: attached.pending,
            out: Vec::new(),
            session: attached.session,
        };
        slot.session.begin(&mut slot.out, &mut ctx)?;
        slots.push(slot);
    }
    for slot in &mut slots {
        ctx.now = now_ns();
        slot.dispatch(&mut ctx)?;
        slot.flush()?;
    }
    let mut ready = Vec::new();
    let mut scratch = vec![0u8; 64 * 1024];
    loop {
        ctx.now = now_ns();
        if window.over(ctx.now) {
            return Ok(ctx.tally);
        }
        let wait_ms = ((window.to - ctx.now) / 1_000_000).clamp(1, 100) as i32;
        poller.wait(&mut ready, wait_ms)?;
        for &token in &ready {
            let slot = &mut slots[token as usize];
            if !slot.receive(&mut scratch)? {
                return if window.over(now_ns()) {
                    Ok(ctx.tally)
                } else {
                    Err("connection closed by the server".into())
                };
            }
            ctx.now = now_ns();
            slot.dispatch(&mut ctx)?;
            slot.flush()?;
        }
    }
}

impl Slot {
    /// Reads what the socket has, through `scratch`; false at end of stream.
    fn receive(&mut self, scratch: &mut [u8]) -> Result<bool, String> {
        match self.stream.read(scratch) {
            Ok(0) => Ok(false),
            Ok(n) => {
                self.input.extend_from_slice(&scratch[..n]);
                Ok(true)
            }
            Err(e)
                if matches!(e.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted) =>
            {
                Ok(true)
            }
            Err(e) => Err(format!("read: {e}")),
        }
    }

    /// Hands every complete reply in the input to the session.
    fn dispatch(&mut self, ctx: &mut Ctx) -> Result<(), String> {
        let mut used = 0;
        while let Some((reply, n)) = resp::parse(&self.input[used..]).map_err(|e| e.to_string())? {
            used += n;
            self.session.on_reply(reply, &mut self.out, ctx)?;
        }
        self.input.drain(..used);
        Ok(())
    }

    /// Writes what the session queued. Commands are small and the socket
    /// buffer is rarely full, so a full buffer is waited out right here
    /// rather than tracked in the loop.
    fn flush(&mut self) -> Result<(), String> {
        let mut written = 0;
        while written < self.out.len() {
            match self.stream.write(&self.out[written..]) {
                Ok(0) => return Err("write: connection closed".into()),
                Ok(n) => written += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => wait_writable(&self.stream)?,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("write: {e}")),
            }
        }
        self.out.clear();
        Ok(())
    }
}

fn wait_writable(stream: &TcpStream) -> Result<(), String> {
    let mut fd = libc::pollfd { fd: stream.as_raw_fd(), events: libc::POLLOUT, revents: 0 };
    // SAFETY: one valid pollfd, for the duration of the call.
    let n = unsafe { libc::poll(&mut fd, 1, 10_000) };
    match n {
        1.. => Ok(()),
        0 => Err("write: socket not writable for 10 s".into()),
        _ => match io::Error::last_os_error() {
            e if e.kind() == io::ErrorKind::Interrupted => Ok(()),
            e => Err(format!("poll: {e}")),
        },
    }
}

/// The epoll instance of one event loop (level-triggered: a socket with
/// bytes left after one read is reported again).
struct Poller {
    fd: i32,
    events: Vec<libc::epoll_event>,
}

impl Poller {
    fn new() -> Result<Poller, String> {
        // SAFETY: plain system call, the result is checked.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if fd < 0 {
            return Err(format!("epoll_create1: {}", io::Error::last_os_error()));
        }
        Ok(Poller { fd, events: vec![libc::epoll_event { events: 0, u64: 0 }; 1024] })
    }

    fn add(&self, stream: &TcpStream, token: u64) -> Result<(), String> {
        let mut event = libc::epoll_event { events: libc::EPOLLIN as u32, u64: token };
        // SAFETY: both descriptors are open; the event is read during the call.
        let rc = unsafe {
            libc::epoll_ctl(self.fd, libc::EPOLL_CTL_ADD, stream.as_raw_fd(), &mut event)
        };
        if rc < 0 {
            return Err(format!("epoll_ctl: {}", io::Error::last_os_error()));
        }
        Ok(())
    }

    /// Fills `ready` with the tokens of readable sockets.
    fn wait(&mut self, ready: &mut Vec<u64>, timeout_ms: i32) -> Result<(), String> {
        ready.clear();
        // SAFETY: the buffer holds `len` events and outlives the call.
        let n = unsafe {
            libc::epoll_wait(
                self.fd,
                self.events.as_mut_ptr(),
                self.events.len() as i32,
                timeout_ms,
            )
        };
        if n < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(())
            } else {
                Err(format!("epoll_wait: {e}"))
            };
        }
        ready.extend(self.events[..n as usize].iter().map(|e| e.u64));
        Ok(())
    }
}

impl Drop for Poller {
    fn drop(&mut self) {
        // SAFETY: the descriptor is this poller's own and closed once.
        unsafe { libc::close(self.fd) };
    }
}
