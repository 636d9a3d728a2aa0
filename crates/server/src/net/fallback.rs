//! The glommio backend's (`io-backend glommio`) accepting, and its answers
//! while a script blocks the core.
//!
//! A busy script's hook answers the core's waiting clients (BUSY, SCRIPT
//! KILL, SHUTDOWN NOSAVE: `route::busy`), new connections too, as Redis's
//! `processEventsWhileBlocked` does. On this backend nothing of glommio
//! runs inside the hook, so the hook reads and writes the sockets itself,
//! without waiting (`MSG_DONTWAIT`). That is safe for a connection waiting
//! for input: glommio reads a socket only with such a `recv` when polled
//! (it waits for readiness with a poll, never with a receive in the
//! kernel), and nothing of the connection's is being written then. What
//! the hook read and did not answer, and replies it could not send, wait
//! in the connection's [`Slot`], which the connection empties first.
//!
//! New connections are accepted with plain `accept4` calls, by the core's
//! accept task when a poll in a small io_uring ring of the core's own says
//! they wait, or by the hook ([`Fallback::watch`] says why not glommio's
//! accept). Those of the TLS port get a TLS stream, whose handshake
//! `listener::admit` completes before serving them; the hook never
//! answers them (it reads raw sockets).

use crate::net::connection::Connection;
use crate::net::listener::Listening;
use crate::net::socket::{self, Socket};
use crate::net::tls;
use crate::node::Core;
use crate::route::busy::Idle;
use bytes::BytesMut;
use glommio::io::BufferedFile;
use glommio::net::TcpStream;
use io_uring::{opcode, types, IoUring};
use ringdb_protocol::{Output, Resp};
use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};
use std::time::Duration;
use tracing::warn;

/// The hook stops reading a connection while this much of its input is
/// unanswered, or this much of its replies unsent (a client that does not
/// read them).
const BUSY_BUFFER_LIMIT: usize = 1024 * 1024;
/// What one `recv` of the hook reads at most.
const RECV_CHUNK: usize = 16 * 1024;

/// What the hook and one connection share.
#[derive(Default)]
pub struct Slot {
    fd: RawFd,
    /// Set while the connection waits for input in a state the hook may
    /// answer (see `uring::stream::Shared::idle`).
    idle: RefCell<Option<Idle>>,
    /// Received by the hook and not answered there: the connection's next
    /// input.
    input: RefCell<BytesMut>,
    /// Replies of the hook not yet taken by the kernel: sent before any
    /// other of the connection's.
    output: RefCell<Output>,
    /// The hook's read saw the end of the input or an error.
    eof: Cell<bool>,
    error: Cell<Option<i32>>,
    /// The connection waiting for input.
    waker: Cell<Option<Waker>>,
}

impl Slot {
    /// The slot of a connection on descriptor `fd`.
    pub fn for_fd(fd: RawFd) -> Slot {
        Slot { fd, ..Slot::default() }
    }

    /// See [`Slot::idle`]; a record already there (one the hook made for a
    /// new connection, with what it answered) is kept.
    pub fn set_idle(&self, idle: Idle) {
        let mut slot = self.idle.borrow_mut();
        if slot.is_none() {
            *slot = Some(idle);
        }
    }

    pub fn take_idle(&self) -> Option<Idle> {
        self.idle.borrow_mut().take()
    }

    /// Replies the hook could not send, to go before the connection's own.
    pub fn take_output(&self) -> Output {
        std::mem::take(&mut *self.output.borrow_mut())
    }

    /// What the hook left for the connection to read: `Some(Ok(n))` bytes
    /// appended to `buf` (0: the peer has closed), `Some(Err)` the read's
    /// error, `None` nothing.
    pub fn take_input(&self, buf: &mut BytesMut) -> Option<io::Result<usize>> {
        let mut input = self.input.borrow_mut();
        if !input.is_empty() {
            let n = input.len();
            buf.extend_from_slice(&input);
            input.clear();
            return Some(Ok(n));
        }
        if let Some(errno) = self.error.get() {
            return Some(Err(io::Error::from_raw_os_error(errno)));
        }
        self.eof.get().then_some(Ok(0))
    }

    /// Waits until the hook left input or replies for the connection.
    pub async fn changed(&self) {
        poll_fn(|cx| {
            let news = !self.input.borrow().is_empty()
                || !self.output.borrow().is_empty()
                || self.eof.get()
                || self.error.get().is_some();
            if news {
                return Poll::Ready(());
            }
            self.waker.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// The connection is closing its socket: the hook leaves the
    /// descriptor alone from now on (its number may soon be another's).
    pub fn retire(&self) {
        self.idle.borrow_mut().take();
        self.output.borrow_mut().clear();
    }

    /// Whether the hook has something to do here: the connection waits
    /// for input it may answer, or for the rest of the hook's replies.
    fn wanted(&self) -> bool {
        let answerable = self.idle.borrow().as_ref().is_some_and(|idle| !idle.paused);
        (answerable && !self.eof.get() && self.error.get().is_none())
            || !self.output.borrow().is_empty()
    }

    /// From the hook, for a connection [`Slot::wanted`] and ready: reads
    /// what the client sent, `serve`s it, and sends the replies, none of it
    /// waiting.
    fn serve(&self, serve: &mut dyn FnMut(&mut Idle, &mut BytesMut, &mut Output)) {
        let mut input = self.input.borrow_mut();
        let mut output = self.output.borrow_mut();
        let mut idle = self.idle.borrow_mut();
        // A chunk at a time, answered before the next: the replies (BUSY
        // errors are longer than a PING) stay near the limit too.
        while let Some(idle) = idle.as_mut().filter(|idle| !idle.paused) {
            if self.eof.get()
                || self.error.get().is_some()
                || input.len() >= BUSY_BUFFER_LIMIT
                || output.size() >= BUSY_BUFFER_LIMIT
            {
                break;
            }
            input.reserve(RECV_CHUNK);
            let spare = &mut input.spare_capacity_mut()[..RECV_CHUNK];
            // SAFETY: reads into the buffer's spare capacity, of that length.
            let n = unsafe {
                libc::recv(self.fd, spare.as_mut_ptr().cast(), spare.len(), libc::MSG_DONTWAIT)
            };
            match n {
                0 => self.eof.set(true),
                n if n > 0 => {
                    let len = input.len() + n as usize;
                    // SAFETY: the kernel wrote `n` bytes there.
                    unsafe { input.set_len(len) };
                    serve(idle, &mut input, &mut output);
                    continue;
                }
                _ => match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN | libc::EINTR) => {}
                    errno => self.error.set(Some(errno.unwrap_or(libc::EIO))),
                },
            }
            break;
        }
        send_now(self.fd, &mut output);
        let news = !input.is_empty() || !output.is_empty() || self.eof.get();
        if news || self.error.get().is_some() {
            if let Some(waker) = self.waker.take() {
                waker.wake();
            }
        }
    }
}

/// Sends what the kernel takes of `out` without waiting; keeps the rest.
fn send_now(fd: RawFd, out: &mut Output) {
    // The hook's replies are errors and short answers, never spliced
    // values (were there any, the connection's own write sends them).
    while !out.is_empty() && !out.has_splices() {
        let bytes = out.bytes_since(0);
        // SAFETY: sends from a live slice of that length.
        let sent = unsafe {
            libc::send(
                fd,
                bytes.as_ptr().cast(),
                bytes.len(),
                libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
            )
        };
        if sent <= 0 {
            // Full (EAGAIN) or failed: the connection's own write sends the
            // rest or meets the error.
            return;
        }
        out.drain_front(sent as usize);
    }
}

/// A core's glommio backend: its listening sockets, its connections'
/// slots, and the connections the hook accepted.
pub struct Fallback {
    listeners: RefCell<Vec<Listening>>,
    /// The eventfd the listeners' ring signals (read by [`Fallback::watch`]).
    eventfd: RawFd,
    /// Polls for the listeners (see [`Fallback::watch`]); `armed[i]`: the
    /// poll of listener `i` is in the kernel.
    ring: RefCell<IoUring>,
    armed: RefCell<Vec<bool>>,
    slots: RefCell<Vec<Weak<Slot>>>,
    /// Accepted by the hook, for the core to admit once it runs again.
    held: RefCell<Vec<Socket>>,
    held_waker: Cell<Option<Waker>>,
}

impl Fallback {
    /// Accepts on the core's listening sockets with glommio's sockets; a
    /// busy script's hook serves the core's waiting clients. An error: the
    /// ring for the listeners' polls could not be set up.
    pub fn start(core: &Rc<Core>, listeners: Vec<Listening>) -> io::Result<Rc<Fallback>> {
        // Blocking on purpose: io_uring then waits for a count instead of
        // failing glommio's read with EAGAIN.
        // SAFETY: plain syscall; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just created and own.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        let ring = Self::polls_ring(listeners.len(), efd)?;
        let fallback = Rc::new(Fallback {
            armed: RefCell::new(vec![false; listeners.len()]),
            listeners: RefCell::new(listeners),
            eventfd: efd,
            ring: RefCell::new(ring),
            slots: RefCell::new(Vec::new()),
            held: RefCell::new(Vec::new()),
            held_waker: Cell::new(None),
        });
        let (weak, serving) = (Rc::downgrade(core), fallback.clone());
        let serve = move || {
            if let Some(core) = weak.upgrade() {
                serving.serve_while_busy(&core);
            }
        };
        core.shard.borrow_mut().state.scripting.serve_while_busy(Rc::new(serve));
        glommio::spawn_local(fallback.clone().watch(core.clone(), eventfd)).detach();
        glommio::spawn_local(fallback.clone().admit_held(core.clone())).detach();
        Ok(fallback)
    }

    /// A ring for the polls of `listeners` listeners, signalling `eventfd`.
    fn polls_ring(listeners: usize, eventfd: RawFd) -> io::Result<IoUring> {
        let ring = IoUring::new(listeners.next_power_of_two().max(2) as u32)?;
        ring.submitter().register_eventfd(eventfd)?;
        Ok(ring)
    }

    /// Listens on `fds` instead (CONFIG SET port/bind). The polls of the
    /// old listeners go with their ring, replaced by one for the new ones.
    pub fn replace_listeners(&self, fds: Vec<Listening>) -> io::Result<()> {
        let ring = Self::polls_ring(fds.len(), self.eventfd)?;
        *self.ring.borrow_mut() = ring;
        *self.armed.borrow_mut() = vec![false; fds.len()];
        *self.listeners.borrow_mut() = fds;
        self.arm();
        Ok(())
    }

    /// A connection's socket, with its slot registered for the hook; on
    /// the TLS port, with a TLS session (`auth`: `tls-auth-clients`), or
    /// none when it cannot be had (the connection is closed).
    fn socket(&self, fd: OwnedFd, tls: Option<tls::AuthClients>) -> Option<Socket> {
        let slot = Rc::new(Slot { fd: fd.as_raw_fd(), ..Slot::default() });
        let mut slots = self.slots.borrow_mut();
        if slots.len() == slots.capacity() {
            // Before the list grows: amortized, and bounded by the open
            // connections even when no script ever runs.
            slots.retain(|s| s.strong_count() > 0);
        }
        slots.push(Rc::downgrade(&slot));
        // SAFETY: a connected TCP socket we own; the stream owns it now.
        let tcp = unsafe { TcpStream::from_raw_fd(fd.into_raw_fd()) };
        let stream = match tls.map(tls::accept) {
            None => tls::stream::Stream::plain(tcp),
            Some(Ok(session)) => {
                tls::stream::Stream::tls(tcp, tls::session::AnySession::Server(session))
            }
            Some(Err(e)) => {
                warn!("cannot start a TLS session: {e}");
                return None;
            }
        };
        Some(Socket::glommio(stream, slot))
    }

    /// Accepts the connections waiting on every listener, for ever: plain
    /// `accept4` calls until none is left, then a poll per listener in the
    /// ring, which signals the eventfd that glommio reads. Not glommio's
    /// accept: that keeps an accept in glommio's ring, which the kernel
    /// completes while a script's hook runs, into a completion glommio
    /// reads only after the script; a poll takes no connection, so the
    /// hook can accept them itself.
    async fn watch(self: Rc<Self>, core: Rc<Core>, eventfd: OwnedFd) {
        // SAFETY: the eventfd, owned by the glommio file from now on.
        let efile = unsafe { BufferedFile::from_raw_fd(eventfd.into_raw_fd()) };
        loop {
            let failed =
                self.accept_all(&core, &mut |socket| super::listener::admit(&core, socket));
            if failed {
                // EMFILE and friends: back off instead of spinning.
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            self.arm();
            if let Err(e) = efile.read_at(0, 8).await {
                warn!("reading the listeners' eventfd: {e}");
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
        }
    }

    /// Accepts every waiting connection; true if an accept failed.
    fn accept_all(&self, core: &Core, take: &mut dyn FnMut(Socket)) -> bool {
        let mut failed = false;
        for listener in self.listeners.borrow().iter() {
            let auth = listener.tls.then(|| {
                core.config.try_borrow().map_or(tls::AuthClients::Yes, |c| tls::AuthClients::of(&c))
            });
            loop {
                // Blocking sockets, as glommio's own accept makes them.
                // SAFETY: plain syscall on our listening socket.
                let fd = unsafe {
                    libc::accept4(
                        listener.fd.as_raw_fd(),
                        std::ptr::null_mut(),
                        std::ptr::null_mut(),
                        libc::SOCK_CLOEXEC,
                    )
                };
                if fd >= 0 {
                    // SAFETY: a descriptor the kernel just gave us.
                    if let Some(socket) = self.socket(unsafe { OwnedFd::from_raw_fd(fd) }, auth) {
                        take(socket);
                    }
                    continue;
                }
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR | libc::ECONNABORTED) => continue,
                    Some(libc::EAGAIN) => {}
                    _ => {
                        warn!("accept failed: {e}");
                        failed = true;
                    }
                }
                break;
            }
        }
        failed
    }

    /// Reaps the listeners' poll completions and re-arms those polls.
    fn arm(&self) {
        let mut ring = self.ring.borrow_mut();
        let mut armed = self.armed.borrow_mut();
        for done in ring.completion() {
            armed[done.user_data() as usize] = false;
        }
        for (i, listener) in self.listeners.borrow().iter().enumerate() {
            if armed[i] {
                continue;
            }
            let poll =
                opcode::PollAdd::new(types::Fd(listener.fd.as_raw_fd()), libc::POLLIN as u32)
                    .build()
                    .user_data(i as u64);
            // SAFETY: the entry refers to no memory of ours; the ring has
            // room for a poll per listener.
            if unsafe { ring.submission().push(&poll) }.is_ok() {
                armed[i] = true;
            }
        }
        if let Err(e) = ring.submit() {
            warn!("arming the listeners' polls: {e}");
        }
    }

    /// Admits the connections the hook accepted, once the core runs again.
    async fn admit_held(self: Rc<Self>, core: Rc<Core>) {
        loop {
            poll_fn(|cx| {
                if self.held.borrow().is_empty() {
                    self.held_waker.set(Some(cx.waker().clone()));
                    return Poll::Pending;
                }
                Poll::Ready(())
            })
            .await;
            let held = std::mem::take(&mut *self.held.borrow_mut());
            for socket in held {
                super::listener::admit(&core, socket);
            }
        }
    }

    /// From a busy script's hook: new connections are accepted (and
    /// answered like the others when nothing has to be said to them
    /// first), then every waiting connection's input is answered.
    fn serve_while_busy(&self, core: &Rc<Core>) {
        self.accept_all(core, &mut |socket| {
            if let Socket::Glommio(g) = &socket {
                if !g.stream.is_tls()
                    && Connection::answerable_when_new(core, socket::peer_addr(g.slot.fd))
                {
                    g.slot.set_idle(Idle::new(Resp::V2, None));
                }
            }
            self.held.borrow_mut().push(socket);
        });
        if !self.held.borrow().is_empty() {
            if let Some(waker) = self.held_waker.take() {
                waker.wake();
            }
        }
        // One poll for all: the hook runs every few thousand instructions
        // of the script, and most connections have sent nothing.
        let slots: Vec<Rc<Slot>> = {
            let mut slots = self.slots.borrow_mut();
            slots.retain(|s| s.strong_count() > 0);
            slots.iter().filter_map(Weak::upgrade).filter(|s| s.wanted()).collect()
        };
        let mut ready: Vec<libc::pollfd> = slots
            .iter()
            .map(|s| {
                let out = if s.output.borrow().is_empty() { 0 } else { libc::POLLOUT };
                libc::pollfd { fd: s.fd, events: libc::POLLIN | out, revents: 0 }
            })
            .collect();
        // SAFETY: `ready` is an array of that many pollfds.
        if unsafe { libc::poll(ready.as_mut_ptr(), ready.len() as libc::nfds_t, 0) } <= 0 {
            return;
        }
        for (slot, ready) in slots.iter().zip(&ready) {
            if ready.revents != 0 {
                slot.serve(&mut |idle, input, out| {
                    crate::route::busy::answer(core, idle, input, out)
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::unix::net::UnixStream;

    /// A slot on one end of a socket pair, waiting for input.
    fn slot_pair() -> (Slot, UnixStream, UnixStream) {
        let (ours, peer) = UnixStream::pair().unwrap();
        let slot = Slot { fd: ours.as_raw_fd(), ..Slot::default() };
        slot.set_idle(Idle::new(Resp::V2, None));
        (slot, ours, peer)
    }

    /// Answers whole lines with `+<line>`; pauses at `WAIT`, leaving it.
    fn echo(idle: &mut Idle, input: &mut BytesMut, out: &mut Output) {
        while let Some(end) = input.iter().position(|&b| b == b'\n') {
            if input.starts_with(b"WAIT") {
                idle.paused = true;
                return;
            }
            let line = input.split_to(end + 1);
            out.extend_from_slice(b"+");
            out.extend_from_slice(&line);
        }
    }

    #[test]
    fn the_hook_answers_what_it_can_and_leaves_the_rest_in_order() {
        let (slot, _ours, mut peer) = slot_pair();
        peer.write_all(b"a\nb\nWAIT\nc\nhalf").unwrap();
        assert!(slot.wanted());
        slot.serve(&mut echo);
        let mut got = [0u8; 6];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(&got, b"+a\n+b\n");
        // Paused: the hook reads no more, and the connection gets the rest.
        assert!(!slot.wanted());
        peer.write_all(b"later").unwrap();
        slot.serve(&mut echo);
        let mut buf = BytesMut::new();
        assert_eq!(slot.take_input(&mut buf).unwrap().unwrap(), 11);
        assert_eq!(&buf[..], b"WAIT\nc\nhalf");
        assert!(slot.take_input(&mut buf).is_none());
        let idle = slot.take_idle().unwrap();
        assert!(idle.paused);
    }

    #[test]
    fn replies_the_kernel_does_not_take_wait_for_the_connection() {
        let (slot, _ours, mut peer) = slot_pair();
        // A client that sends and never reads: the hook stops reading once
        // its replies pass the limit, and keeps what it could not send.
        let line = vec![b'x'; 1023];
        let mut request = Vec::new();
        for _ in 0..4096 {
            request.extend_from_slice(&line);
            request.push(b'\n');
        }
        let writer = std::thread::spawn(move || {
            let _ = peer.write_all(&request);
            peer
        });
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while slot.output.borrow().size() < BUSY_BUFFER_LIMIT {
            assert!(std::time::Instant::now() < deadline, "the replies never piled up");
            slot.serve(&mut echo);
            std::thread::sleep(Duration::from_millis(1));
        }
        slot.serve(&mut echo);
        let unsent = slot.output.borrow().size();
        assert!(unsent <= BUSY_BUFFER_LIMIT + 2 * RECV_CHUNK, "{unsent}");
        assert!(slot.input.borrow().len() <= BUSY_BUFFER_LIMIT + RECV_CHUNK);
        // The connection's own write sends them first.
        assert_eq!(slot.take_output().size(), unsent);
        drop(slot);
        drop(_ours);
        let _ = writer.join();
    }

    #[test]
    fn the_end_of_the_input_reaches_the_connection() {
        let (slot, _ours, peer) = slot_pair();
        drop(peer);
        slot.serve(&mut echo);
        let mut buf = BytesMut::new();
        assert_eq!(slot.take_input(&mut buf).unwrap().unwrap(), 0);
        assert!(!slot.wanted());
    }
}
