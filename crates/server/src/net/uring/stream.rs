//! One connection on the io_uring path: the state the driver and the
//! connection's task share, and the stream the connection code uses.
//!
//! The driver appends received bytes to `input` and sends `pending` replies;
//! the connection takes `input` (usually by swapping buffers, no copy) and
//! hands its replies over the same way. Neither side waits for the other
//! except at the bounds: the driver stops receiving for a connection whose
//! untaken input passed [`RECV_PAUSE_BYTES`], and a connection whose unsent
//! replies passed [`SEND_HIGH_WATER`] waits until they drain. Replies are
//! an [`Output`]: long string values in them are references, sent from
//! where they are with a vectored send (see [`Vectored`]) and counted in
//! the unsent bytes like the rest.

use super::Driver;
use crate::route::busy::Idle;
use bytes::BytesMut;
use ringdb_engine::scripting::debugger::{Link, SEND_TIMEOUT};
use ringdb_protocol::Output;
use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::os::fd::RawFd;
use std::rc::Rc;
use std::task::{Poll, Waker};

/// Untaken input at which the driver stops receiving for a connection (the
/// kernel's socket buffer then holds the rest, and TCP slows the client).
pub const RECV_PAUSE_BYTES: usize = 4 * 1024 * 1024;
/// Unsent replies at which a connection waits before running more commands.
pub const SEND_HIGH_WATER: usize = 4 * 1024 * 1024;
/// How long a closed connection's last replies may take to be sent before
/// the socket is shut down (a peer that never reads them).
const CLOSE_GRACE: std::time::Duration = std::time::Duration::from_secs(10);

/// What the driver and the connection share.
pub struct Shared {
    pub fd: RawFd,
    pub token: u32,
    pub st: RefCell<State>,
    pub reader: Cell<Option<Waker>>,
    pub writer: Cell<Option<Waker>>,
    /// The connection waits for input with nothing of its own buffered, in
    /// a state where what its commands get while a script blocks the core
    /// depends on the commands and this record alone: the driver may answer
    /// it then ([`Driver::serve_while_busy`]).
    pub idle: RefCell<Option<Idle>>,
}

#[derive(Default)]
pub struct State {
    /// Received and not yet taken by the connection.
    pub input: BytesMut,
    /// The peer closed its side (or the receive failed): no more input.
    pub eof: bool,
    /// The errno that ended the connection's receive or send, if any.
    pub error: Option<i32>,
    /// A multishot receive is armed in the kernel.
    pub recv_armed: bool,
    /// Input is over the pause mark: the receive was cancelled and is
    /// re-armed once the connection takes the input.
    pub recv_paused: bool,
    /// Replies waiting for a send.
    pub pending: Output,
    /// The replies a send in the kernel reads from (not touched until its
    /// completion, which also keeps their spliced values alive), and how
    /// many of their bytes are sent.
    pub in_flight: Output,
    pub sent: usize,
    /// The iovecs and header of the send in the kernel when it is vectored
    /// (boxed, and kept only while sends go on: most connections never
    /// make one).
    pub vectored: Option<Box<Vectored>>,
    pub sending: bool,
    /// The connection is done: close once the replies are sent.
    pub closing: bool,
    /// A cancel of the receive was submitted for closing or pausing.
    pub cancel_sent: bool,
    /// Listed in the driver's work list for this turn.
    pub queued: bool,
    /// The driver has closed the descriptor.
    pub closed: bool,
    /// The socket was handed to another process (a forked debugging
    /// session): nothing more is received here.
    pub detached: bool,
    /// The TLS session of a connection on the TLS port: `input` and
    /// `pending` are plaintext, `in_flight` records ([`super::tls`]).
    pub tls: Option<Box<crate::net::tls::session::ServerSession>>,
}

impl State {
    pub fn unsent(&self) -> usize {
        self.pending.size() + self.in_flight.size() - self.sent
    }
}

/// Most iovecs one send carries (the kernel's `UIO_MAXIOV`); a send of more
/// pieces is a short send, continued from where it stopped.
const MAX_IOVECS: usize = 1024;

/// The message a vectored send (`IORING_OP_SENDMSG`) reads: one iovec per
/// piece of the in-flight replies (byte runs and spliced values) from the
/// first unsent byte on. It lives in the connection's state, which the
/// driver keeps until the send's completion, and is rebuilt only between
/// sends.
pub struct Vectored {
    iovecs: Vec<libc::iovec>,
    header: libc::msghdr,
}

impl Default for Vectored {
    fn default() -> Self {
        // SAFETY: an all-zero msghdr is a valid empty message.
        Vectored { iovecs: Vec::new(), header: unsafe { std::mem::zeroed() } }
    }
}

impl Vectored {
    /// Points the message at `out` from byte `skip` of its stream on, and
    /// returns the header for the send.
    pub fn prepare(&mut self, out: &Output, mut skip: usize) -> *const libc::msghdr {
        self.iovecs.clear();
        for piece in out.segments() {
            if skip >= piece.len() {
                skip -= piece.len();
                continue;
            }
            let rest = &piece[skip..];
            skip = 0;
            self.iovecs
                .push(libc::iovec { iov_base: rest.as_ptr() as *mut _, iov_len: rest.len() });
            if self.iovecs.len() == MAX_IOVECS {
                break;
            }
        }
        // SAFETY: as in `default`.
        self.header = unsafe { std::mem::zeroed() };
        self.header.msg_iov = self.iovecs.as_mut_ptr();
        self.header.msg_iovlen = self.iovecs.len() as _;
        &self.header
    }
}

/// The connection's side.
pub struct UringStream {
    pub(super) shared: Rc<Shared>,
    pub(super) driver: Rc<Driver>,
}

impl UringStream {
    pub fn fd(&self) -> RawFd {
        self.shared.fd
    }

    pub fn unsent(&self) -> usize {
        self.shared.st.borrow().unsent()
    }

    /// See [`Shared::idle`]; a record already there (one the driver made
    /// for a connection accepted while a script blocked the core, with
    /// what was answered then) is kept.
    pub fn set_idle(&self, idle: Idle) {
        let mut slot = self.shared.idle.borrow_mut();
        if slot.is_none() {
            *slot = Some(idle);
        }
    }

    /// Takes back what [`UringStream::set_idle`] handed over, with what
    /// the driver's answers changed in it.
    pub fn take_idle(&self) -> Option<Idle> {
        self.shared.idle.borrow_mut().take()
    }

    /// Appends what has been received to `buf` (waiting for at least one
    /// byte); `Ok(0)` once the peer has closed.
    pub async fn read_into(&mut self, buf: &mut BytesMut) -> io::Result<usize> {
        poll_fn(|cx| {
            let mut st = self.shared.st.borrow_mut();
            if !st.input.is_empty() {
                let n = st.input.len();
                if buf.is_empty() {
                    std::mem::swap(buf, &mut st.input);
                } else {
                    buf.extend_from_slice(&st.input);
                    st.input.clear();
                }
                if st.recv_paused {
                    drop(st);
                    self.driver.schedule(&self.shared);
                }
                return Poll::Ready(Ok(n));
            }
            if let Some(errno) = st.error {
                return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
            }
            if st.eof {
                return Poll::Ready(Ok(0));
            }
            self.shared.reader.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }

    /// Hands `out` to the driver (leaving `out` empty) to be sent in its
    /// next submission; waits only while too much is still unsent. `pushes`:
    /// `out` holds only pushes, which go after the turn's replies (see
    /// `Driver::later`).
    pub async fn write(&mut self, out: &mut Output, pushes: bool) -> io::Result<()> {
        {
            let mut st = self.shared.st.borrow_mut();
            if let Some(errno) = st.error {
                out.clear();
                return Err(io::Error::from_raw_os_error(errno));
            }
            st.pending.append(out);
        }
        if pushes {
            self.driver.schedule_later(&self.shared);
        } else {
            self.driver.schedule(&self.shared);
        }
        self.drained_to(SEND_HIGH_WATER).await
    }

    /// Waits until at most `mark` bytes handed over are unsent.
    pub async fn drained_to(&self, mark: usize) -> io::Result<()> {
        poll_fn(|cx| {
            let st = self.shared.st.borrow();
            if let Some(errno) = st.error {
                return Poll::Ready(Err(io::Error::from_raw_os_error(errno)));
            }
            if st.unsent() <= mark {
                return Poll::Ready(Ok(()));
            }
            self.shared.writer.set(Some(cx.waker().clone()));
            Poll::Pending
        })
        .await
    }
}

impl UringStream {
    /// Stops receiving: the socket's input is another process's from now
    /// on (a forked debugging session). Waits until the receive in the
    /// kernel is cancelled; what it had received is dropped.
    pub async fn stop_reading(&self) {
        self.shared.st.borrow_mut().detached = true;
        self.driver.schedule(&self.shared);
        for _ in 0..1000 {
            if !self.shared.st.borrow().recv_armed {
                break;
            }
            glommio::timer::sleep(std::time::Duration::from_millis(1)).await;
        }
        self.shared.st.borrow_mut().input.clear();
    }

    /// The connection as a debugging session's client: read and written
    /// through this core's ring, turned by the session while it blocks the
    /// core.
    pub fn debug_link(&self) -> Box<dyn Link> {
        Box::new(UringLink { shared: self.shared.clone(), driver: self.driver.clone() })
    }
}

/// See [`UringStream::debug_link`].
struct UringLink {
    shared: Rc<Shared>,
    driver: Rc<Driver>,
}

impl Link for UringLink {
    fn recv(&mut self, into: &mut Vec<u8>) -> bool {
        loop {
            {
                let mut st = self.shared.st.borrow_mut();
                if !st.input.is_empty() {
                    into.extend_from_slice(&st.input);
                    st.input.clear();
                    if st.recv_paused {
                        drop(st);
                        self.driver.schedule(&self.shared);
                    }
                    return true;
                }
                if st.eof || st.error.is_some() || st.closing {
                    return false;
                }
            }
            self.driver.turn_for_debugger(self.shared.fd);
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        {
            let mut st = self.shared.st.borrow_mut();
            if st.error.is_some() {
                return;
            }
            st.pending.extend_from_slice(bytes);
        }
        self.driver.schedule(&self.shared);
        let deadline = std::time::Instant::now() + SEND_TIMEOUT;
        loop {
            {
                let st = self.shared.st.borrow();
                if st.unsent() == 0 || st.error.is_some() {
                    return;
                }
            }
            if std::time::Instant::now() >= deadline {
                // A client that reads nothing for this long is gone.
                self.shared.st.borrow_mut().error = Some(libc::ETIMEDOUT);
                return;
            }
            self.driver.turn_for_debugger(self.shared.fd);
        }
    }
}

impl Drop for UringStream {
    /// The connection is done: the driver sends what is left, then closes.
    /// A peer that does not take the rest within [`CLOSE_GRACE`] has its
    /// socket shut down, which ends the send.
    fn drop(&mut self) {
        let unsent = {
            let mut st = self.shared.st.borrow_mut();
            st.closing = true;
            st.unsent()
        };
        self.driver.schedule(&self.shared);
        if unsent > 0 {
            let shared = Rc::downgrade(&self.shared);
            glommio::spawn_local(async move {
                glommio::timer::sleep(CLOSE_GRACE).await;
                if let Some(shared) = shared.upgrade() {
                    if !shared.st.borrow().closed {
                        // SAFETY: not yet closed by the driver, so still
                        // this connection's descriptor.
                        unsafe { libc::shutdown(shared.fd, libc::SHUT_RDWR) };
                    }
                }
            })
            .detach();
        }
    }
}
