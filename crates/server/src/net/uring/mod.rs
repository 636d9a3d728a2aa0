//! The io_uring socket path (`io-backend uring`): one network ring per
//! shard, created with `COOP_TASKRUN | SINGLE_ISSUER`, for every socket
//! operation of the shard. Not `DEFER_TASKRUN`: with it, a parked shard's
//! eventfd was not signalled when data arrived (kernel 6.18), so every
//! request of a lone client waited ~16 ms for some other wake-up; without
//! it, measured here, P=1 latency is 0.04 ms instead of 16 ms, and SET at
//! P=16 costs 8% less CPU per request (benches/RESULTS.md).
//!
//! Why: glommio's `TcpStream` arms a poll after every short read and its
//! rings run completion work as interrupts; this ring runs it only when the
//! driver asks, once per turn (see ARCHITECTURE.md, "The socket path").
//!
//! How: a multishot accept per listener, a multishot receive per connection
//! into the shard's provided buffers ([`buffers`]), and sends queued by the
//! connections during a turn go to the kernel together in the next turn's
//! one `io_uring_enter`, which also reaps completions (replies first, then
//! connections that only have pushes: [`Driver::schedule_later`]). The
//! driver is a task of the shard's glommio executor (glommio keeps timers,
//! channels and files): it turns while there is work, yielding between
//! turns so that the connections it woke run and queue their replies; when
//! a turn finds nothing, it lets the ring signal an eventfd and parks on a
//! glommio read of that eventfd, so an idle shard sleeps in glommio's own
//! wait. Before parking it may spin a while ([`SpinWindow`]): parking and
//! waking again cost more than short gaps between requests.
//!
//! Connections accepted on the TLS port carry their session in the
//! driver ([`tls`]): the driver decrypts what it reaps and encrypts what
//! it sends, so the connections above it see plaintext.

pub mod buffers;
pub mod stream;
pub mod tls;

use crate::route::busy::Idle;
use buffers::BufRing;
use bytes::BytesMut;
use glommio::io::BufferedFile;
use io_uring::{cqueue, opcode, squeue, types, IoUring};
use ringdb_protocol::{Output, Resp};
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};
use stream::{Shared, State, UringStream, RECV_PAUSE_BYTES};
use tracing::warn;

/// Receive buffers per shard and their size (1 MiB in all).
pub const BUFFERS: u16 = 256;
const BUFFER_SIZE: usize = 4 * 1024;
const BUFFER_GROUP: u16 = 0;
/// A send buffer bigger than this is freed once sent rather than kept.
const KEEP_SEND_BUFFER: usize = 1024 * 1024;

/// What a completion is for: the low byte of its user data (the rest is
/// the connection's token, or the listener's index for accepts).
const OP_ACCEPT: u64 = 0;
const OP_RECV: u64 = 1;
const OP_SEND: u64 = 2;
const OP_CANCEL: u64 = 3;

fn user_data(token: u32, op: u64) -> u64 {
    (token as u64) << 8 | op
}

struct Listener {
    /// Names its accepts' completions (listeners come and go with CONFIG
    /// SET port/bind, so not its place in the list).
    id: u32,
    fd: OwnedFd,
    /// The TLS port's: its connections start a TLS session.
    tls: bool,
    armed: bool,
    /// After a failed accept (EMFILE …): not re-armed before this instant.
    retry_at: Option<Instant>,
}

/// The longest a debugging session's wait for its client goes without a
/// look at the ring (whose deferred completion work runs only when the
/// ring is entered).
const DEBUGGER_WAIT: Duration = Duration::from_millis(10);

/// A shard's network ring and its connections.
pub struct Driver {
    ring: RefCell<IoUring>,
    bufs: RefCell<BufRing>,
    conns: RefCell<HashMap<u32, Rc<Shared>>>,
    next_token: Cell<u32>,
    listeners: RefCell<Vec<Listener>>,
    /// Replaced listeners whose accept the kernel has not given back yet
    /// (closed once it has).
    retired: RefCell<Vec<Listener>>,
    next_listener: Cell<u32>,
    /// Connections with something for the next turn (a send, a re-armed
    /// receive, a close).
    work: RefCell<Vec<Rc<Shared>>>,
    /// Connections whose only news is pushes (Pub/Sub messages, watch
    /// results): their sends go after those of `work` in a turn. Redis
    /// writes a publisher's reply before its subscribers' messages too (the
    /// client that just ran a command is written first): the publisher's
    /// next command then arrives while the messages go out, and the next
    /// turn carries more messages per send.
    later: RefCell<Vec<Rc<Shared>>>,
    /// The driver task while it is parked.
    parked: Cell<Option<Waker>>,
    /// The ring signalled its eventfd since the driver last looked.
    signalled: Cell<bool>,
    /// The eventfd registered with the ring (the kernel holds its own
    /// reference for that), for glommio to read while the driver parks;
    /// taken by [`Driver::run`].
    parking_fd: Cell<Option<OwnedFd>>,
    /// Completions of a turn, copied out of the ring before handling them.
    scratch: RefCell<Vec<(u64, i32, u32)>>,
    /// Connections accepted while a script blocked the core, admitted by
    /// the driver's next turn of its own.
    held: RefCell<Vec<UringStream>>,
    /// Makes the session of a connection accepted on the TLS port (set by
    /// the listener code, which knows the settings).
    tls_accept: RefCell<Option<TlsAccept>>,
}

/// See [`Driver::tls_accept`].
pub type TlsAccept = Box<dyn Fn() -> Result<crate::net::tls::session::ServerSession, String>>;

impl Driver {
    /// Creates the ring with the flags this path needs, at the size the
    /// locked-memory plan gives it (`crate::memlock`), registers the
    /// buffer ring and the eventfd. An error means this kernel cannot run
    /// the uring backend (the caller falls back to glommio's sockets).
    pub fn new(size: crate::memlock::NetRing) -> io::Result<Rc<Driver>> {
        let ring = IoUring::builder()
            .setup_coop_taskrun()
            .setup_single_issuer()
            // The kernel flags waiting completion work in the shared ring,
            // so that a turn with nothing to submit and nothing waiting
            // costs no system call.
            .setup_taskrun_flag()
            .setup_cqsize(size.cq)
            .build(size.sq)?;
        let bufs = BufRing::new(BUFFERS, BUFFER_SIZE)?;
        let (addr, entries) = bufs.registration();
        // SAFETY: the buffer ring lives in the driver, as long as the ring.
        unsafe { ring.submitter().register_buf_ring_with_flags(addr, entries, BUFFER_GROUP, 0)? };
        // Blocking on purpose: io_uring then waits for a count instead of
        // failing the read with EAGAIN.
        // SAFETY: plain syscall; the result is checked.
        let efd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
        if efd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: a descriptor we just created and own.
        let eventfd = unsafe { OwnedFd::from_raw_fd(efd) };
        ring.submitter().register_eventfd(eventfd.as_raw_fd())?;
        let mut ring = ring;
        ring.completion().disable_eventfd();
        Ok(Rc::new(Driver {
            ring: RefCell::new(ring),
            bufs: RefCell::new(bufs),
            conns: RefCell::new(HashMap::new()),
            next_token: Cell::new(0),
            listeners: RefCell::new(Vec::new()),
            retired: RefCell::new(Vec::new()),
            next_listener: Cell::new(0),
            work: RefCell::new(Vec::new()),
            later: RefCell::new(Vec::new()),
            parked: Cell::new(None),
            signalled: Cell::new(false),
            parking_fd: Cell::new(Some(eventfd)),
            scratch: RefCell::new(Vec::new()),
            held: RefCell::new(Vec::new()),
            tls_accept: RefCell::new(None),
        }))
    }

    /// Accepts on a listening socket (multishot, armed in the next turn);
    /// `tls`: the TLS port's.
    pub fn listen(&self, fd: OwnedFd, tls: bool) {
        let id = self.next_listener.get();
        self.next_listener.set(id.wrapping_add(1));
        self.listeners.borrow_mut().push(Listener { id, fd, tls, armed: false, retry_at: None });
    }

    /// How connections accepted on the TLS port get their session.
    pub fn set_tls_accept(&self, make: TlsAccept) {
        *self.tls_accept.borrow_mut() = Some(make);
    }

    /// Takes over an accepted socket: its receive is armed in the next turn.
    fn stream(self: &Rc<Self>, fd: RawFd) -> UringStream {
        let mut conns = self.conns.borrow_mut();
        let mut token = self.next_token.get();
        while conns.contains_key(&token) {
            token = token.wrapping_add(1) & 0x00ff_ffff;
        }
        self.next_token.set(token.wrapping_add(1) & 0x00ff_ffff);
        let shared = Rc::new(Shared {
            fd,
            token,
            st: RefCell::new(State::default()),
            reader: Cell::new(None),
            writer: Cell::new(None),
            idle: RefCell::new(None),
        });
        conns.insert(token, shared.clone());
        drop(conns);
        self.schedule(&shared);
        UringStream { shared, driver: self.clone() }
    }

    /// Lists a connection for the next turn and wakes the driver if parked.
    pub(crate) fn schedule(&self, shared: &Rc<Shared>) {
        self.schedule_in(&self.work, shared);
    }

    /// [`Driver::schedule`] for a connection whose news is only pushes.
    pub(crate) fn schedule_later(&self, shared: &Rc<Shared>) {
        self.schedule_in(&self.later, shared);
    }

    fn schedule_in(&self, list: &RefCell<Vec<Rc<Shared>>>, shared: &Rc<Shared>) {
        let mut st = shared.st.borrow_mut();
        if !st.queued {
            st.queued = true;
            list.borrow_mut().push(shared.clone());
        }
        if let Some(waker) = self.parked.take() {
            waker.wake();
        }
    }

    /// Runs the shard's network for ever; `on_accept` receives every new
    /// connection. An idle driver spins for at most `max_spin` before it
    /// parks ([`SpinWindow`]), and not at all while `may_spin` says no
    /// (work for this core waits in glommio's reactor, which a spinning
    /// driver keeps from running).
    pub async fn run(
        self: Rc<Self>,
        max_spin: Duration,
        may_spin: impl Fn() -> bool,
        on_accept: impl Fn(UringStream),
    ) {
        let Some(fd) = self.parking_fd.take() else { return };
        glommio::spawn_local(self.clone().watch_eventfd(fd)).detach();
        let mut last_work = Instant::now();
        // Turns had work since `last_work` was read: the clock is read at
        // the first idle turn after them, not on every busy one.
        let mut worked = false;
        let mut spin = SpinWindow::new(max_spin);
        loop {
            let held = std::mem::take(&mut *self.held.borrow_mut());
            held.into_iter().for_each(&on_accept);
            if self.turn(&on_accept, false) > 0 {
                // Let the connections just woken run and queue their replies.
                worked = true;
                glommio::executor().yield_now().await;
                continue;
            }
            if std::mem::take(&mut worked) {
                last_work = Instant::now();
            }
            if !spin.window.is_zero() && last_work.elapsed() < spin.window && may_spin() {
                // Keep turning a while before sleeping.
                glommio::executor().yield_now().await;
                continue;
            }
            // Nothing to do: have the ring signal the eventfd, then look once
            // more (work queued before the signal was on sends no signal).
            self.ring.borrow_mut().completion().enable_eventfd();
            if self.turn(&on_accept, true) == 0 {
                // Woken by the ring (true) or by a connection with something
                // to send that it did not get from the ring (false).
                let woken = poll_fn(|cx| {
                    if self.signalled.replace(false) || self.accept_retry_due() {
                        return Poll::Ready(true);
                    }
                    if !self.work.borrow().is_empty() || !self.later.borrow().is_empty() {
                        return Poll::Ready(false);
                    }
                    self.parked.set(Some(cx.waker().clone()));
                    Poll::Pending
                });
                let by_ring = match self.accept_retry_in() {
                    None => woken.await,
                    Some(delay) => {
                        let retry = async {
                            glommio::timer::sleep(delay).await;
                            true
                        };
                        futures_lite::future::or(woken, retry).await
                    }
                };
                self.parked.set(None);
                spin.after_park(last_work.elapsed(), by_ring);
            }
            self.ring.borrow_mut().completion().disable_eventfd();
        }
    }

    /// While a script blocks the core (called from its hook, so no task of
    /// this core runs meanwhile, the driver's included): one turn of the
    /// ring, then `serve` may answer the input of each idle connection
    /// ([`Shared::idle`]) by taking commands off the front of its input and
    /// appending their replies (pausing the record: leave this connection
    /// alone until it reads again), and a second turn sends those. New
    /// connections are held until the driver runs again (for the server to
    /// admit them), and are idle meanwhile when `new_is_idle` says so of
    /// their descriptor. The part of Redis's `processEventsWhileBlocked`
    /// that reaches the network.
    pub fn serve_while_busy(
        self: &Rc<Self>,
        new_is_idle: &dyn Fn(RawFd) -> bool,
        serve: &mut dyn FnMut(&mut Idle, &mut BytesMut, &mut Output),
    ) {
        let hold = |stream: UringStream| {
            if new_is_idle(stream.fd()) {
                stream.set_idle(Idle::new(Resp::V2, None));
            }
            self.held.borrow_mut().push(stream);
        };
        if self.ring.try_borrow_mut().is_err() {
            return;
        }
        self.turn(&hold, false);
        let idle: Vec<Rc<Shared>> = self
            .conns
            .borrow()
            .values()
            .filter(|shared| {
                shared.idle.borrow().as_ref().is_some_and(|idle| !idle.paused)
                    && !shared.st.borrow().input.is_empty()
            })
            .cloned()
            .collect();
        for shared in &idle {
            {
                let mut st = shared.st.borrow_mut();
                let mut idle = shared.idle.borrow_mut();
                let Some(idle) = idle.as_mut() else { continue };
                if st.closing || st.error.is_some() {
                    continue;
                }
                let st = &mut *st;
                serve(idle, &mut st.input, &mut st.pending);
            }
            self.schedule(shared);
        }
        self.turn(&hold, false);
        self.admit_held_soon();
    }

    /// While a debugging session blocks the core (from the script's hook,
    /// as [`Driver::serve_while_busy`]): waits up to [`DEBUGGER_WAIT`] for
    /// input on `fd` or a completion, then turns the ring once (new
    /// connections are held until the driver runs again).
    pub fn turn_for_debugger(self: &Rc<Self>, fd: RawFd) {
        let Ok(ring) = self.ring.try_borrow() else { return };
        let mut fds = [
            libc::pollfd { fd, events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: ring.as_raw_fd(), events: libc::POLLIN, revents: 0 },
        ];
        drop(ring);
        // SAFETY: two valid pollfd records; the result is only a wake-up.
        unsafe { libc::poll(fds.as_mut_ptr(), 2, DEBUGGER_WAIT.as_millis() as i32) };
        let hold = |stream: UringStream| self.held.borrow_mut().push(stream);
        self.turn(&hold, true);
        self.admit_held_soon();
    }

    /// Has the driver's next turn admit the connections accepted while the
    /// core was blocked (a parked driver turns even though the ring has
    /// nothing to say).
    fn admit_held_soon(&self) {
        if !self.held.borrow().is_empty() {
            self.signalled.set(true);
            if let Some(waker) = self.parked.take() {
                waker.wake();
            }
        }
    }

    /// Reads the ring's eventfd for ever (through glommio, so an idle
    /// shard sleeps in glommio's own wait) and wakes the parked driver
    /// when the ring signals. A task of its own: glommio adds a waker to a
    /// read each time the read is polled, so a read the driver polled
    /// again after each of its other wake-ups (replies from other cores)
    /// would pile wakers up until the task's reference count overflows.
    async fn watch_eventfd(self: Rc<Self>, fd: OwnedFd) {
        // SAFETY: the eventfd, owned by the glommio file from now on.
        let efile = unsafe { BufferedFile::from_raw_fd(fd.into_raw_fd()) };
        loop {
            if let Err(e) = efile.read_at(0, 8).await {
                // Not expected of an eventfd; the driver still runs on the
                // wake-ups of its connections, and this retries.
                tracing::warn!("reading the network ring's eventfd: {e}");
                glommio::timer::sleep(Duration::from_millis(1)).await;
            }
            self.signalled.set(true);
            if let Some(waker) = self.parked.take() {
                waker.wake();
            }
        }
    }

    /// The connections listed for this turn, replies before pushes.
    fn take_work(&self) -> Vec<Rc<Shared>> {
        let mut work = std::mem::take(&mut *self.work.borrow_mut());
        work.append(&mut self.later.borrow_mut());
        work
    }

    /// One turn: queue the listed work, submit it and run the ring's
    /// completion work in one `io_uring_enter`, then handle the completions.
    /// The system call is left out when there is nothing to submit and the
    /// kernel has flagged no completion work, unless `always_enter` (the
    /// last look before parking does not trust the flag alone).
    /// Returns how many submissions and completions there were.
    fn turn(self: &Rc<Self>, on_accept: &impl Fn(UringStream), always_enter: bool) -> usize {
        let mut ring = self.ring.borrow_mut();
        let work = self.take_work();
        for shared in &work {
            shared.st.borrow_mut().queued = false;
            self.prepare(&mut ring, shared);
        }
        self.arm_listeners(&mut ring);
        let submitted = ring.submission().len();
        let enter = always_enter || submitted > 0 || ring.submission().taskrun();
        // SAFETY: every queued entry points at memory the driver keeps until
        // its completion (send buffers in `Shared`, the buffer ring).
        let entered = enter.then(|| unsafe {
            ring.submitter().enter::<libc::sigset_t>(
                submitted as u32,
                0,
                io_uring::EnterFlags::GETEVENTS.bits(),
                None,
            )
        });
        match entered {
            None | Some(Ok(_)) => {}
            // EBUSY/EAGAIN: completions must be reaped first; EINTR: again.
            Some(Err(e))
                if matches!(e.raw_os_error(), Some(libc::EBUSY | libc::EAGAIN | libc::EINTR)) => {}
            Some(Err(e)) => warn!("io_uring_enter failed: {e}"),
        }
        let mut scratch = self.scratch.borrow_mut();
        scratch.clear();
        scratch.extend(ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
        for &(data, res, flags) in scratch.iter() {
            let token = (data >> 8) as u32;
            match data & 0xff {
                OP_ACCEPT => self.accepted(&mut ring, token, res, flags, on_accept),
                OP_RECV => self.received(&mut ring, token, res, flags),
                OP_SEND => self.sent(&mut ring, token, res),
                _ => {}
            }
        }
        self.bufs.borrow().publish();
        submitted + scratch.len() + work.len()
    }

    /// Queues what a connection needs: its next send, its receive, or its
    /// close once nothing of it is left in the kernel.
    fn prepare(&self, ring: &mut IoUring, shared: &Rc<Shared>) {
        let mut st = shared.st.borrow_mut();
        let st = &mut *st;
        if st.closed {
            return;
        }
        if st.tls.is_some() {
            if !st.sending && st.error.is_none() {
                // Records go into the idle send buffer.
                tls::seal(shared, st);
                if !st.in_flight.is_empty() {
                    st.sent = 0;
                    st.sending = true;
                    push(ring, &send_entry(shared, st));
                }
            }
        } else if !st.sending && !st.pending.is_empty() && st.error.is_none() {
            std::mem::swap(&mut st.in_flight, &mut st.pending);
            st.sent = 0;
            st.sending = true;
            push(ring, &send_entry(shared, st));
        }
        let wants_input = !st.closing && !st.detached && !st.eof && st.error.is_none();
        if !st.recv_armed && wants_input && st.input.len() < RECV_PAUSE_BYTES {
            st.recv_paused = false;
            st.recv_armed = true;
            let entry = opcode::RecvMulti::new(types::Fd(shared.fd), BUFFER_GROUP)
                .build()
                .user_data(user_data(shared.token, OP_RECV));
            push(ring, &entry);
        }
        if (st.closing || st.detached) && st.recv_armed && !st.cancel_sent {
            st.cancel_sent = true;
            let entry = opcode::AsyncCancel::new(user_data(shared.token, OP_RECV))
                .build()
                .user_data(user_data(shared.token, OP_CANCEL));
            push(ring, &entry);
        }
        if st.closing
            && !st.recv_armed
            && !st.sending
            && (st.pending.is_empty() || st.error.is_some())
        {
            self.conns.borrow_mut().remove(&shared.token);
            st.closed = true;
            // SAFETY: the connection's descriptor; nothing of it is left in
            // the kernel and the connection's task has dropped its stream.
            unsafe { libc::close(shared.fd) };
        }
    }

    /// Listens on `fds` instead (CONFIG SET port/bind): the old listeners'
    /// accepts are cancelled in the next turn, and each is closed once the
    /// kernel has given its accept back.
    pub fn replace_listeners(&self, fds: Vec<crate::net::listener::Listening>) {
        let old = std::mem::take(&mut *self.listeners.borrow_mut());
        for l in fds {
            self.listen(l.fd, l.tls);
        }
        if let Ok(mut ring) = self.ring.try_borrow_mut() {
            for l in old {
                if l.armed {
                    let entry = opcode::AsyncCancel::new(user_data(l.id, OP_ACCEPT))
                        .build()
                        .user_data(user_data(l.id, OP_CANCEL));
                    push(&mut ring, &entry);
                    self.retired.borrow_mut().push(l);
                }
            }
        }
        // A turn is due (to submit the cancels and arm the new listeners)
        // even though the ring has nothing to say.
        self.signalled.set(true);
        if let Some(waker) = self.parked.take() {
            waker.wake();
        }
    }

    fn arm_listeners(&self, ring: &mut IoUring) {
        for l in self.listeners.borrow_mut().iter_mut() {
            // The clock only for a listener backing off: this runs every turn.
            if l.armed || l.retry_at.is_some_and(|t| t > Instant::now()) {
                continue;
            }
            l.armed = true;
            l.retry_at = None;
            let entry = opcode::AcceptMulti::new(types::Fd(l.fd.as_raw_fd()))
                .flags(libc::SOCK_CLOEXEC)
                .build()
                .user_data(user_data(l.id, OP_ACCEPT));
            push(ring, &entry);
        }
    }

    /// How long until a listener that failed may accept again, if any.
    fn accept_retry_in(&self) -> Option<Duration> {
        let first = self.listeners.borrow().iter().filter_map(|l| l.retry_at).min()?;
        Some(first.saturating_duration_since(Instant::now()))
    }

    fn accept_retry_due(&self) -> bool {
        self.accept_retry_in().is_some_and(|d| d.is_zero())
    }

    fn accepted(
        self: &Rc<Self>,
        ring: &mut IoUring,
        id: u32,
        res: i32,
        flags: u32,
        on_accept: &impl Fn(UringStream),
    ) {
        if res >= 0 {
            let stream = self.stream(res);
            if self.is_tls_listener(id) {
                let made = self.tls_accept.borrow().as_ref().map(|make| make());
                match made.unwrap_or_else(|| Err("TLS is not configured".into())) {
                    Ok(session) => {
                        tls::attach(&stream.shared, session);
                        on_accept(stream);
                    }
                    // Dropping the stream closes it.
                    Err(e) => warn!("cannot start a TLS session: {e}"),
                }
            } else {
                on_accept(stream);
            }
        } else if res != -libc::ECANCELED {
            // EMFILE and friends: back off instead of spinning.
            warn!("accept failed: {}", io::Error::from_raw_os_error(-res));
        }
        if !cqueue::more(flags) {
            // A replaced listener is done with: closed now.
            self.retired.borrow_mut().retain(|l| l.id != id);
            let mut listeners = self.listeners.borrow_mut();
            if let Some(l) = listeners.iter_mut().find(|l| l.id == id) {
                l.armed = false;
                if res < 0 {
                    l.retry_at = Some(Instant::now() + Duration::from_millis(10));
                }
            }
            drop(listeners);
            self.arm_listeners(ring);
        }
    }

    /// Whether listener `id` (current or being replaced) is the TLS port's.
    fn is_tls_listener(&self, id: u32) -> bool {
        let of = |list: &Vec<Listener>| list.iter().any(|l| l.id == id && l.tls);
        of(&self.listeners.borrow()) || of(&self.retired.borrow())
    }

    fn received(&self, ring: &mut IoUring, token: u32, res: i32, flags: u32) {
        let shared = self.conns.borrow().get(&token).cloned();
        let mut bufs = self.bufs.borrow_mut();
        let bid = cqueue::buffer_select(flags);
        let Some(shared) = shared else {
            if let Some(bid) = bid {
                bufs.give_back(bid);
            }
            return;
        };
        let mut st = shared.st.borrow_mut();
        let tls = st.tls.is_some();
        if let Some(bid) = bid {
            if res > 0 && tls {
                tls::receive(&shared, &mut st, bufs.data_mut(bid, res as usize));
            } else if res > 0 {
                st.input.extend_from_slice(bufs.data(bid, res as usize));
            }
            bufs.give_back(bid);
        }
        drop(bufs);
        match res {
            0 => st.eof = true,
            // Out of buffers (re-armed below, once they are back) or our
            // own cancel (pausing or closing).
            r if r == -libc::ENOBUFS || r == -libc::ECANCELED => {}
            r if r < 0 => st.error = Some(-r),
            _ => {}
        }
        if !cqueue::more(flags) {
            st.recv_armed = false;
            st.cancel_sent = false;
        } else if st.input.len() >= RECV_PAUSE_BYTES && !st.cancel_sent {
            // The connection is not taking its input: stop receiving.
            st.recv_paused = true;
            st.cancel_sent = true;
            let entry = opcode::AsyncCancel::new(user_data(token, OP_RECV))
                .build()
                .user_data(user_data(token, OP_CANCEL));
            push(ring, &entry);
        }
        // A TLS receive may have records to answer (the handshake's).
        let rearm = !st.recv_armed || (tls && res > 0);
        let woke = res != -libc::ENOBUFS && res != -libc::ECANCELED;
        drop(st);
        if woke {
            wake(&shared.reader);
            if res < 0 {
                wake(&shared.writer);
            }
        }
        if rearm {
            self.prepare(ring, &shared);
        }
    }

    fn sent(&self, ring: &mut IoUring, token: u32, res: i32) {
        let Some(shared) = self.conns.borrow().get(&token).cloned() else { return };
        let mut st = shared.st.borrow_mut();
        if res >= 0 {
            st.sent += res as usize;
            if st.sent < st.in_flight.size() {
                // A short send: the rest from where it stopped.
                push(ring, &send_entry(&shared, &mut st));
                return;
            }
        } else {
            st.error = Some(-res);
            st.pending.clear();
        }
        st.sending = false;
        st.sent = 0;
        st.in_flight.clear();
        if st.pending.is_empty() || st.in_flight.capacity() > KEEP_SEND_BUFFER {
            // Nothing more to send: an idle connection keeps no buffer.
            st.in_flight = Output::default();
            st.vectored = None;
        }
        drop(st);
        // A writer waits for its own mark (`UringStream::drained_to`).
        wake(&shared.writer);
        if res < 0 {
            wake(&shared.reader);
        }
        self.prepare(ring, &shared);
    }
}

/// How long an idle driver keeps turning before it parks, adapted as KVM's
/// halt polling adapts `halt_poll_ns`. Parking costs a shard tens of
/// microseconds of CPU (glommio re-arms its timers, issues a `membarrier`,
/// sleeps, and reads the ring's eventfd when woken), more than a short gap
/// costs spinning: a client that waits for each reply (BLPOP, a script
/// queue) leaves gaps of a few tens of microseconds. But spinning through
/// gaps longer than the window wastes the window as well. So the window
/// grows (doubling from [`SpinWindow::START`] up to the maximum) while the
/// ring wakes the driver soon after it parked, when a longer spin would
/// have caught the work, and drops to none once an idle period outlasts
/// the maximum.
///
/// While the driver spins, glommio's reactor does not run: replies from
/// other cores, timers and file completions wait for the driver to park.
/// A wake-up that came from there (a connection with something to send
/// that the ring did not bring) says the spin held work back, so the
/// window drops to none then too. Jobs other cores send here stop a spin
/// at once (the mesh's doorbell, the driver's `may_spin`).
#[derive(Debug)]
struct SpinWindow {
    window: Duration,
    max: Duration,
}

impl SpinWindow {
    const START: Duration = Duration::from_micros(10);

    fn new(max: Duration) -> Self {
        SpinWindow { window: Duration::ZERO, max }
    }

    /// After a park: `idle` is the time from the driver's last work to its
    /// wake-up, spin included; `by_ring` whether the ring woke it.
    fn after_park(&mut self, idle: Duration, by_ring: bool) {
        if idle > self.max || !by_ring {
            self.window = Duration::ZERO;
        } else if idle > self.window {
            self.window = (self.window * 2).max(Self::START).min(self.max);
        }
    }
}

fn wake(cell: &Cell<Option<Waker>>) {
    if let Some(waker) = cell.take() {
        waker.wake();
    }
}

/// A send of the unsent part of the connection's in-flight replies: one
/// per connection per turn, carrying every reply frame of the turn. A
/// plain send of the buffer, or, when long values are spliced in, a
/// vectored send of the buffer's runs and the values where they are.
fn send_entry(shared: &Shared, st: &mut State) -> squeue::Entry {
    let entry = if st.in_flight.has_splices() {
        let header = st.vectored.get_or_insert_with(Box::default).prepare(&st.in_flight, st.sent);
        opcode::SendMsg::new(types::Fd(shared.fd), header).flags(libc::MSG_NOSIGNAL as u32).build()
    } else {
        let rest = st.in_flight.bytes_since(st.sent);
        let len = rest.len().min(u32::MAX as usize) as u32;
        opcode::Send::new(types::Fd(shared.fd), rest.as_ptr(), len)
            .flags(libc::MSG_NOSIGNAL)
            .build()
    };
    entry.user_data(user_data(shared.token, OP_SEND))
}

/// Queues an entry, handing the queue to the kernel first if it is full.
fn push(ring: &mut IoUring, entry: &squeue::Entry) {
    loop {
        // SAFETY: the entry's memory (a send's replies, their spliced values
        // and its iovecs in `Shared`, kept alive by the connection table
        // until the completion) outlives it.
        if unsafe { ring.submission().push(entry) }.is_ok() {
            return;
        }
        if let Err(e) = ring.submit() {
            warn!("io_uring submit failed: {e}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shared(token: u32) -> Rc<Shared> {
        Rc::new(Shared {
            fd: -1,
            token,
            st: RefCell::new(State::default()),
            reader: Cell::new(None),
            writer: Cell::new(None),
            idle: RefCell::new(None),
        })
    }

    #[test]
    fn the_spin_window_grows_while_the_ring_wakes_soon_and_stops_otherwise() {
        let us = Duration::from_micros;
        let mut spin = SpinWindow::new(us(50));
        assert_eq!(spin.window, Duration::ZERO);
        spin.after_park(us(3), true);
        assert_eq!(spin.window, us(10));
        spin.after_park(us(15), true);
        assert_eq!(spin.window, us(20));
        spin.after_park(us(45), true);
        assert_eq!(spin.window, us(40));
        spin.after_park(us(45), true);
        assert_eq!(spin.window, us(50), "capped at the maximum");
        spin.after_park(us(30), true);
        assert_eq!(spin.window, us(50), "a wake-up within the window keeps it");
        spin.after_park(us(51), true);
        assert_eq!(spin.window, Duration::ZERO);
        spin.after_park(us(5), true);
        spin.after_park(us(12), false);
        assert_eq!(spin.window, Duration::ZERO, "work the spin held back stops it");
        let mut never = SpinWindow::new(Duration::ZERO);
        never.after_park(Duration::ZERO, true);
        assert_eq!(never.window, Duration::ZERO, "a maximum of 0 never spins");
    }

    #[test]
    fn a_turn_takes_replies_before_pushes() {
        let Ok(driver) = Driver::new(crate::memlock::NetRing::FULL) else {
            eprintln!("no io_uring with the flags this path needs here: skipped");
            return;
        };
        let (subscriber, publisher, other) = (shared(1), shared(2), shared(3));
        driver.schedule_later(&subscriber);
        driver.schedule(&publisher);
        // Listed once, where it was first listed.
        driver.schedule_later(&publisher);
        driver.schedule(&other);
        let order: Vec<u32> = driver.take_work().iter().map(|s| s.token).collect();
        assert_eq!(order, [2, 3, 1]);
        assert!(driver.take_work().is_empty());
    }
}
