//! TLS on the io_uring path, inside the driver: a connection accepted on
//! the TLS port carries a server session in its shared state
//! ([`super::stream::State::tls`]). Received ciphertext is decrypted into
//! the connection's input as it is reaped (in place in the shard's
//! receive buffer when it holds whole records), and the replies a turn
//! sends are encrypted from the connection's output into the send buffer,
//! so that everything above the driver (the connection, a busy script's
//! answers, a debugging session's link) sees plaintext. A handshake not
//! done within [`HANDSHAKE_TIMEOUT`] has its socket shut down.

use super::stream::{Shared, State};
use crate::net::tls::session::ServerSession;
use crate::net::tls::HANDSHAKE_TIMEOUT;
use std::rc::Rc;
use tracing::debug;

/// Takes ciphertext just received. A failed session ends the input (the
/// connection then closes, after its alert is sent).
pub(super) fn receive(shared: &Shared, st: &mut State, data: &mut [u8]) {
    let State { tls, input, eof, .. } = st;
    let Some(session) = tls.as_mut() else { return };
    let was_failed = session.failure().is_some();
    if let Err(e) = session.receive(data, input) {
        if !was_failed {
            failed(shared, &e);
        }
        *eof = true;
    } else if session.peer_closed() {
        *eof = true;
    }
}

/// Moves what is due into the (idle) send buffer: handshake records, the
/// pending replies encrypted once the handshake is done, close_notify
/// when the connection is closing. Replies that can never be sent (a
/// closing connection whose handshake did not finish) are dropped.
pub(super) fn seal(shared: &Shared, st: &mut State) {
    let State { tls, pending, in_flight, input, closing, eof, .. } = st;
    let Some(session) = tls.as_mut() else { return };
    if pending.is_empty() && !session.wants_write(*closing) {
        // Nothing due (most turns that only re-arm a receive).
        return;
    }
    let (wire, _) = in_flight.parts();
    if let Err(e) = session.seal(pending, wire, input, *closing) {
        failed(shared, &e);
        *eof = true;
        // The connection may be waiting for input: it ends now.
        if let Some(reader) = shared.reader.take() {
            reader.wake();
        }
    }
    if *closing && !session.is_open() {
        pending.clear();
    }
}

/// Redis's words for a connection whose handshake (or a later record)
/// failed: a plaintext client on the TLS port, a refused certificate.
fn failed(shared: &Shared, e: &rustls::Error) {
    let addr = crate::net::socket::peer_addr(shared.fd).map(|a| a.to_string()).unwrap_or_default();
    debug!("Error accepting a client connection: {e} (addr={addr})");
}

/// Shuts the socket down if the handshake is not done in time: the
/// receive then ends, and with it the connection.
pub(super) fn watch_handshake(shared: &Rc<Shared>) {
    let shared = Rc::downgrade(shared);
    glommio::spawn_local(async move {
        glommio::timer::sleep(HANDSHAKE_TIMEOUT).await;
        let Some(shared) = shared.upgrade() else { return };
        let st = shared.st.borrow();
        let open = st.tls.as_ref().is_none_or(|s| s.is_open());
        if !open && !st.closed {
            debug!("TLS handshake timed out: closing the connection");
            // SAFETY: not yet closed by the driver, so still this
            // connection's descriptor.
            unsafe { libc::shutdown(shared.fd, libc::SHUT_RDWR) };
        }
    })
    .detach();
}

/// Starts a connection's session (it came in on the TLS port).
pub(super) fn attach(shared: &Rc<Shared>, session: ServerSession) {
    shared.st.borrow_mut().tls = Some(Box::new(session));
    watch_handshake(shared);
}
