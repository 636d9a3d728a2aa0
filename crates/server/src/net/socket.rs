//! A client socket, on whichever backend the shard runs (`io-backend`):
//! the one small interface the connection code uses for I/O.
//!
//! - `uring`: the shard's own io_uring ring ([`super::uring`]): replies are
//!   handed over without waiting and sent with every other connection's in
//!   the next turn.
//! - `glommio`: glommio's `TcpStream` (each read and write awaited), the
//!   fallback for kernels without the ring flags or buffer rings.
//!
//! On the TLS port the connection code sees plaintext all the same: the
//! uring driver decrypts and encrypts itself, the glommio path through
//! [`Stream`]. A busy script's hook answers no TLS client on the glommio
//! path (it reads raw sockets), and a debugging session's link there is
//! the raw socket: SCRIPT DEBUG needs the uring backend on the TLS port.

use super::fallback::Slot;
use super::tls::stream::Stream;
use super::uring::stream::UringStream;
use bytes::BytesMut;
use ringdb_protocol::Output;
use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::rc::Rc;

/// Read size on the glommio path for ordinary traffic; grows for large
/// arguments up to [`MAX_READ_CHUNK`].
const READ_CHUNK: usize = 16 * 1024;
const MAX_READ_CHUNK: usize = 1024 * 1024;

pub enum Socket {
    Uring(UringStream),
    /// Boxed: inline, its 150-odd bytes would be in every connection's
    /// task on either backend.
    Glommio(Box<GlommioSocket>),
}

/// A connection of the glommio backend.
pub struct GlommioSocket {
    pub(super) stream: Stream,
    chunk: Vec<u8>,
    /// What a busy script's hook answered for this connection
    /// ([`super::fallback`]).
    pub(super) slot: Rc<Slot>,
    /// Another process has the socket (a forked debugging session): it is
    /// closed here without shutting it down.
    handed_off: bool,
}

impl Socket {
    pub fn glommio(stream: Stream, slot: Rc<Slot>) -> Socket {
        Socket::Glommio(Box::new(GlommioSocket {
            stream,
            chunk: Vec::new(),
            slot,
            handed_off: false,
        }))
    }

    pub fn fd(&self) -> RawFd {
        match self {
            Socket::Uring(s) => s.fd(),
            Socket::Glommio(g) => g.stream.tcp().as_raw_fd(),
        }
    }

    /// A TLS connection of the glommio path whose handshake is still to
    /// be done ([`Socket::handshake`]); the uring driver does its own.
    pub fn handshaking(&self) -> bool {
        matches!(self, Socket::Glommio(g) if g.stream.handshaking())
    }

    /// Completes a TLS handshake ([`Socket::handshaking`]).
    pub async fn handshake(&mut self) -> io::Result<()> {
        match self {
            Socket::Uring(_) => Ok(()),
            Socket::Glommio(g) => g.stream.handshake().await,
        }
    }

    pub fn peer_addr(&self) -> Option<SocketAddr> {
        peer_addr(self.fd())
    }

    pub fn local_addr(&self) -> Option<SocketAddr> {
        with_sock(self.fd(), |s| s.local_addr().ok().and_then(|a| a.as_socket()))
    }

    /// TCP_NODELAY and, when `keepalive_secs` > 0, keepalive probes.
    pub fn set_options(&self, keepalive_secs: u64) {
        with_sock(self.fd(), |sock| {
            let _ = sock.set_nodelay(true);
            if keepalive_secs > 0 {
                let ka = socket2::TcpKeepalive::new()
                    .with_time(std::time::Duration::from_secs(keepalive_secs));
                let _ = sock.set_tcp_keepalive(&ka);
            }
        })
    }

    /// Appends what the client sent to `buf`, waiting for at least one
    /// byte; `Ok(0)` once the client has closed. `wanted` is the size of an
    /// argument being received, if known (reads grow for it).
    pub async fn read_into(&mut self, buf: &mut BytesMut, wanted: usize) -> io::Result<usize> {
        match self {
            Socket::Uring(s) => s.read_into(buf).await,
            // Boxed, here and in `write_as`: the glommio path's state would
            // otherwise be inline in every connection's task, on either
            // backend, while it waits.
            Socket::Glommio(g) => {
                let GlommioSocket { stream, chunk, slot, .. } = &mut **g;
                Box::pin(read_glommio(stream, chunk, slot, buf, wanted)).await
            }
        }
    }

    /// Sends `out` (leaving it empty).
    pub async fn write(&mut self, out: &mut Output) -> io::Result<()> {
        self.write_as(out, false).await
    }

    /// [`Socket::write`]; `pushes`: `out` is pushes alone (no reply to a
    /// request), which the uring path sends after the replies of the same
    /// turn.
    /// Stops reading the socket: another process reads it from now on
    /// (a forked debugging session). The glommio path reads only when the
    /// connection asks, which it will not do again.
    pub async fn stop_reading(&mut self) {
        match self {
            Socket::Uring(s) => s.stop_reading().await,
            Socket::Glommio(g) => g.handed_off = true,
        }
    }

    /// The connection as a debugging session's client (see
    /// `ringdb_engine::scripting::debugger`).
    pub fn debug_link(&self) -> Box<dyn ringdb_engine::scripting::debugger::Link> {
        match self {
            Socket::Uring(s) => s.debug_link(),
            Socket::Glommio(g) => Box::new(super::fd_link::FdLink::new(g.stream.tcp().as_raw_fd())),
        }
    }

    pub async fn write_as(&mut self, out: &mut Output, pushes: bool) -> io::Result<()> {
        match self {
            Socket::Uring(s) => s.write(out, pushes).await,
            Socket::Glommio(g) => {
                let GlommioSocket { stream, slot, .. } = &mut **g;
                Box::pin(async {
                    // Replies a busy script's hook could not send go first.
                    let earlier = write_glommio(stream, &mut slot.take_output()).await;
                    if earlier.is_err() {
                        out.clear();
                        return earlier;
                    }
                    write_glommio(stream, out).await
                })
                .await
            }
        }
    }

    /// Waits until at most `mark` bytes handed to [`Socket::write`] are
    /// unsent (the glommio path's writes wait until taken: at once).
    pub async fn drained_to(&self, mark: usize) -> io::Result<()> {
        match self {
            Socket::Uring(s) => s.drained_to(mark).await,
            Socket::Glommio(_) => Ok(()),
        }
    }

    /// Bytes handed to [`Socket::write`] and not yet taken by the kernel
    /// (always 0 on the glommio path, whose writes wait until taken).
    pub fn unsent(&self) -> usize {
        match self {
            Socket::Uring(s) => s.unsent(),
            Socket::Glommio(_) => 0,
        }
    }

    /// Marks the connection as waiting for input in a state where, while a
    /// script blocks the core, its commands may be answered without it
    /// (`uring::stream::Shared::idle`), handing over what those answers
    /// need; [`Socket::take_idle`] takes it back.
    pub fn set_idle(&self, idle: crate::route::busy::Idle) {
        match self {
            Socket::Uring(s) => s.set_idle(idle),
            // The hook reads raw sockets: TLS clients wait for the script.
            Socket::Glommio(g) if g.stream.is_tls() => {}
            Socket::Glommio(g) => g.slot.set_idle(idle),
        }
    }

    pub fn take_idle(&self) -> Option<crate::route::busy::Idle> {
        match self {
            Socket::Uring(s) => s.take_idle(),
            Socket::Glommio(g) => g.slot.take_idle(),
        }
    }

    /// Closes the socket once what was written has been sent.
    pub async fn close(self) {
        match self {
            // Dropping the stream hands the close to the driver.
            Socket::Uring(s) => drop(s),
            Socket::Glommio(g) => {
                let GlommioSocket { stream, slot, handed_off, .. } = *g;
                slot.retire();
                // Dropping closes the descriptor alone; `close` would also
                // shut the connection down for the process that has it.
                if !handed_off {
                    let _ = stream.close().await;
                }
            }
        }
    }
}

/// [`Socket::read_into`] on the glommio path.
async fn read_glommio(
    stream: &mut Stream,
    chunk: &mut Vec<u8>,
    slot: &Slot,
    buf: &mut BytesMut,
    wanted: usize,
) -> io::Result<usize> {
    let size = wanted.clamp(READ_CHUNK, MAX_READ_CHUNK);
    if chunk.len() < size {
        chunk.resize(size, 0);
    } else if size == READ_CHUNK && chunk.len() > READ_CHUNK {
        chunk.truncate(READ_CHUNK);
        chunk.shrink_to_fit();
    }
    if stream.is_tls() {
        // Never served by the hook (see the module header).
        return stream.read_into(buf, chunk).await;
    }
    loop {
        // A busy script's hook may have answered this client while it
        // waited: its unsent replies go out now, and what it read comes
        // before what the socket has.
        write_glommio(stream, &mut slot.take_output()).await?;
        if let Some(read) = slot.take_input(buf) {
            return read;
        }
        let read = async { Some(stream.read(chunk).await) };
        let hook = async {
            slot.changed().await;
            None
        };
        if let Some(n) = futures_lite::future::or(hook, read).await {
            let n = n?;
            buf.extend_from_slice(&chunk[..n]);
            return Ok(n);
        }
    }
}

/// Writes `out` on a glommio stream (leaving it empty), piece by piece:
/// spliced values are written from where they are (or encrypted from
/// there), never copied.
async fn write_glommio(stream: &mut Stream, out: &mut Output) -> io::Result<()> {
    if out.is_empty() {
        return Ok(());
    }
    stream.write_output(out).await
}

/// The peer of an open socket's descriptor.
pub fn peer_addr(fd: RawFd) -> Option<SocketAddr> {
    with_sock(fd, |s| s.peer_addr().ok().and_then(|a| a.as_socket()))
}

/// `fd` must be an open socket for as long as `f` runs.
fn with_sock<R>(fd: RawFd, f: impl FnOnce(socket2::SockRef<'_>) -> R) -> R {
    // SAFETY: callers pass a socket they own, open for the borrow.
    let fd = unsafe { BorrowedFd::borrow_raw(fd) };
    f(socket2::SockRef::from(&fd))
}
