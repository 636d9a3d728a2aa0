//! One TLS connection's records, on rustls's *unbuffered* API
//! (`UnbufferedServerConnection` / `UnbufferedClientConnection`): rustls
//! keeps no socket buffers of its own, so
//!
//! - received ciphertext is deframed and decrypted where it lies: in the
//!   shard's receive buffer itself when it holds whole records (the usual
//!   case for requests), else in this session's `partial` buffer, which
//!   keeps only the start of a record whose rest has not arrived. The
//!   plaintext is appended to the connection's input (rustls 0.23 hands
//!   each decrypted record over as its own buffer: one copy from there);
//! - replies are encrypted straight from the connection's output (spliced
//!   values where they are) into the bytes the next send takes: one pass,
//!   no plaintext copy.
//!
//! Handshake records rustls wants sent wait in `handshake` and go first.
//! A session that fails (a bad record, a plaintext client, a refused
//! certificate) keeps its alert for the peer and takes nothing more.

use bytes::BytesMut;
use ringdb_protocol::Output;
use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::server::{ServerConnectionData, UnbufferedServerConnection};
use rustls::unbuffered::{
    ConnectionState, EncodeError, EncryptError, InsufficientSizeError, UnbufferedStatus,
    WriteTraffic,
};
use rustls::Error;

/// Most ciphertext kept while a record is incomplete. A record is at most
/// 16 KiB of payload plus its overhead (2^14 + 2048 bytes in TLS 1.2), and
/// rustls refuses a longer one as soon as it reads its header; a
/// handshake message may span records (a certificate chain), which rustls
/// keeps in this buffer until it is whole. Past this, the peer is not
/// speaking TLS as we know it.
pub const MAX_PARTIAL: usize = 128 * 1024;

/// The two sides' connections, for the one engine below.
pub trait Records {
    type Data;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, Self::Data>;
}

impl Records for UnbufferedServerConnection {
    type Data = ServerConnectionData;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, ServerConnectionData> {
        self.process_tls_records(incoming)
    }
}

impl Records for UnbufferedClientConnection {
    type Data = ClientConnectionData;
    fn process<'c, 'i>(
        &'c mut self,
        incoming: &'i mut [u8],
    ) -> UnbufferedStatus<'c, 'i, ClientConnectionData> {
        self.process_tls_records(incoming)
    }
}

pub struct Session<C> {
    conn: C,
    /// Received ciphertext not yet taken by rustls (the start of a record,
    /// or of a handshake message spanning records).
    partial: Vec<u8>,
    /// Handshake records and alerts to send before anything else.
    handshake: Vec<u8>,
    open: bool,
    /// The peer sent close_notify: no more input.
    peer_closed: bool,
    close_sent: bool,
    failed: Option<Error>,
    /// Some record of ours was produced: the peer speaks TLS with us.
    spoke: bool,
}

pub type ServerSession = Session<UnbufferedServerConnection>;
pub type ClientSession = Session<UnbufferedClientConnection>;

/// What [`Session::pump`] does once rustls lets it write.
enum Then<'a> {
    /// Nothing: only records were read.
    Read,
    /// Encrypt `app` (emptying it) after the handshake records into
    /// `wire`; then close_notify when `close`.
    Seal { app: &'a mut Output, wire: &'a mut Vec<u8>, close: bool },
}

impl<C: Records> Session<C> {
    pub fn new(conn: C) -> Self {
        Session {
            conn,
            partial: Vec::new(),
            handshake: Vec::new(),
            open: false,
            peer_closed: false,
            close_sent: false,
            failed: None,
            spoke: false,
        }
    }

    /// The handshake is done: application data flows.
    pub fn is_open(&self) -> bool {
        self.open
    }

    /// The peer closed the session (close_notify): no more input.
    pub fn peer_closed(&self) -> bool {
        self.peer_closed
    }

    pub fn failure(&self) -> Option<&Error> {
        self.failed.as_ref()
    }

    /// Takes ciphertext just received (`data`, decrypted in place, so it
    /// must be the receiver's to change) and appends its plaintext to
    /// `plain`. An error ends the session (its alert waits for
    /// [`Session::seal`]).
    pub fn receive(&mut self, data: &mut [u8], plain: &mut BytesMut) -> Result<(), Error> {
        if let Some(e) = &self.failed {
            return Err(e.clone());
        }
        let result = if self.partial.is_empty() {
            // The common case: whole records, decrypted where they are;
            // only a trailing part of a record is kept.
            self.pump(data, plain, Then::Read)
                .map(|used| self.partial.extend_from_slice(&data[used..]))
        } else {
            let mut buf = std::mem::take(&mut self.partial);
            buf.extend_from_slice(data);
            let result = self.pump(&mut buf, plain, Then::Read);
            if let Ok(used) = result {
                buf.drain(..used);
            }
            self.partial = buf;
            result.map(|_| ())
        };
        if result.is_ok() && self.partial.len() > MAX_PARTIAL {
            let e = Error::General("a TLS record larger than TLS allows".into());
            // No alert: rustls has not seen what overflowed.
            self.failed = Some(e.clone());
            return Err(e);
        }
        result
    }

    /// Appends to `wire` what is to be sent: handshake records first, then,
    /// once the handshake is done, `app` encrypted (which empties it; before,
    /// it waits there), then close_notify when `close`. A failed session
    /// sends its alert and drops `app`. Plaintext that rustls had still to
    /// hand over goes to `plain`.
    pub fn seal(
        &mut self,
        app: &mut Output,
        wire: &mut Vec<u8>,
        plain: &mut BytesMut,
        close: bool,
    ) -> Result<(), Error> {
        if self.failed.is_some() {
            wire.append(&mut self.handshake);
            app.clear();
            return Ok(());
        }
        let mut buf = std::mem::take(&mut self.partial);
        let result = self.pump(&mut buf, plain, Then::Seal { app, wire, close });
        if let Ok(used) = result {
            buf.drain(..used);
        }
        self.partial = buf;
        if result.is_err() {
            wire.append(&mut self.handshake);
        }
        result.map(|_| ())
    }

    /// Whether [`Session::seal`] has something to send even with no
    /// application data: records of the handshake or an alert, or the
    /// close_notify of a closing connection.
    pub fn wants_write(&self, closing: bool) -> bool {
        !self.handshake.is_empty() || (closing && self.open && !self.close_sent)
    }

    /// Runs rustls over `buf` until it needs more input or lets us write
    /// (then does what `then` says). Returns how many bytes of `buf` it
    /// is done with. On an error the session has failed (see
    /// [`Session::fail`]).
    fn pump(
        &mut self,
        buf: &mut [u8],
        plain: &mut BytesMut,
        then: Then<'_>,
    ) -> Result<usize, Error> {
        let mut used = 0;
        let result = self.pump_from(buf, &mut used, plain, then);
        if let Err(e) = &result {
            let rest = used.min(buf.len());
            self.fail(e.clone(), &mut buf[rest..]);
        }
        result
    }

    fn pump_from(
        &mut self,
        buf: &mut [u8],
        used: &mut usize,
        plain: &mut BytesMut,
        mut then: Then<'_>,
    ) -> Result<usize, Error> {
        // Each state is handled before the next is asked for, and every
        // turn of this loop either consumes input or output rustls holds,
        // so it ends; the bound is a guard against a rustls change.
        for _ in 0..10_000 {
            let UnbufferedStatus { mut discard, state } = self.conn.process(&mut buf[*used..]);
            let state = match state {
                Ok(state) => state,
                Err(e) => {
                    *used += discard;
                    return Err(e);
                }
            };
            match state {
                ConnectionState::ReadTraffic(mut records) => {
                    while let Some(record) = records.next_record() {
                        let record = record?;
                        discard += record.discard;
                        plain.extend_from_slice(record.payload);
                    }
                }
                ConnectionState::EncodeTlsData(mut encoder) => {
                    self.spoke = true;
                    encode(&mut |out: &mut [u8]| encoder.encode(out), &mut self.handshake)
                }
                // What was encoded is in `handshake`, sent by the next seal
                // before anything encrypted after it.
                ConnectionState::TransmitTlsData(sent) => sent.done(),
                ConnectionState::BlockedHandshake => {
                    if let Then::Seal { wire, .. } = &mut then {
                        wire.append(&mut self.handshake);
                    }
                    return Ok(*used + discard);
                }
                ConnectionState::PeerClosed => self.peer_closed = true,
                ConnectionState::Closed => {
                    self.peer_closed = true;
                    if let Then::Seal { wire, app, .. } = &mut then {
                        wire.append(&mut self.handshake);
                        app.clear();
                    }
                    return Ok(*used + discard);
                }
                ConnectionState::WriteTraffic(mut writer) => {
                    self.open = true;
                    if let Then::Seal { app, wire, close } = &mut then {
                        wire.append(&mut self.handshake);
                        for piece in app.segments() {
                            encrypt(&mut writer, piece, wire)?;
                        }
                        app.clear();
                        if *close && !self.close_sent {
                            self.close_sent = true;
                            close_notify(&mut writer, wire)?;
                        }
                    }
                    return Ok(*used + discard);
                }
                // Early data is never accepted (max_early_data_size 0).
                _ => return Err(Error::General("unexpected TLS early data".into())),
            }
            *used += discard;
        }
        Err(Error::General("TLS state machine did not settle".into()))
    }

    /// Ends the session with `error`: the alert rustls queued for the peer
    /// is encoded for the next seal. One call into rustls only: it hands
    /// over queued records before it reads input, and reading `rest` again
    /// could raise (and queue) a second fatal alert, which rustls asserts
    /// never happens. A peer whose very first bytes are not TLS (a
    /// plaintext client on the TLS port) gets no alert, only the close, as
    /// OpenSSL does ("wrong version number"): an alert record would read
    /// as a garbled reply there.
    fn fail(&mut self, error: Error, rest: &mut [u8]) {
        let not_tls = !self.spoke && matches!(error, Error::InvalidMessage(_));
        self.failed = Some(error);
        if not_tls {
            return;
        }
        if let Ok(ConnectionState::EncodeTlsData(mut encoder)) = self.conn.process(rest).state {
            encode(&mut |out: &mut [u8]| encoder.encode(out), &mut self.handshake);
        }
    }
}

/// Appends a handshake record (or alert) to `out`, with the room the
/// encoder asks for.
fn encode(encoder: &mut dyn FnMut(&mut [u8]) -> Result<usize, EncodeError>, out: &mut Vec<u8>) {
    let mut room = 4096;
    for _ in 0..4 {
        let start = out.len();
        out.resize(start + room, 0);
        match encoder(&mut out[start..]) {
            Ok(n) => {
                out.truncate(start + n);
                return;
            }
            Err(EncodeError::InsufficientSize(InsufficientSizeError { required_size })) => {
                out.truncate(start);
                room = required_size;
            }
            Err(_) => {
                out.truncate(start);
                return;
            }
        }
    }
}

/// Encrypts `data` into `wire` (as many records as it takes).
fn encrypt<D>(
    writer: &mut WriteTraffic<'_, D>,
    data: &[u8],
    wire: &mut Vec<u8>,
) -> Result<(), Error> {
    // Header, tag, content type and TLS 1.2's explicit nonce per 16 KiB
    // record; rustls says how much it needs if that is short.
    let mut room = data.len() + (data.len() / 16384 + 1) * 40;
    for _ in 0..4 {
        let start = wire.len();
        wire.resize(start + room, 0);
        match writer.encrypt(data, &mut wire[start..]) {
            Ok(n) => {
                wire.truncate(start + n);
                return Ok(());
            }
            Err(EncryptError::InsufficientSize(InsufficientSizeError { required_size })) => {
                wire.truncate(start);
                room = required_size;
            }
            Err(e) => {
                wire.truncate(start);
                return Err(Error::General(format!("TLS encryption failed: {e}")));
            }
        }
    }
    Err(Error::General("TLS encryption needs ever more room".into()))
}

fn close_notify<D>(writer: &mut WriteTraffic<'_, D>, wire: &mut Vec<u8>) -> Result<(), Error> {
    let start = wire.len();
    wire.resize(start + 64, 0);
    match writer.queue_close_notify(&mut wire[start..]) {
        Ok(n) => {
            wire.truncate(start + n);
            Ok(())
        }
        Err(e) => {
            wire.truncate(start);
            Err(Error::General(format!("TLS close_notify failed: {e}")))
        }
    }
}

/// A server or client session, for code that carries either (the glommio
/// backend's streams).
pub enum AnySession {
    Server(ServerSession),
    Client(ClientSession),
}

impl AnySession {
    pub fn receive(&mut self, data: &mut [u8], plain: &mut BytesMut) -> Result<(), Error> {
        match self {
            AnySession::Server(s) => s.receive(data, plain),
            AnySession::Client(s) => s.receive(data, plain),
        }
    }

    pub fn seal(
        &mut self,
        app: &mut Output,
        wire: &mut Vec<u8>,
        plain: &mut BytesMut,
        close: bool,
    ) -> Result<(), Error> {
        match self {
            AnySession::Server(s) => s.seal(app, wire, plain, close),
            AnySession::Client(s) => s.seal(app, wire, plain, close),
        }
    }

    pub fn is_open(&self) -> bool {
        match self {
            AnySession::Server(s) => s.is_open(),
            AnySession::Client(s) => s.is_open(),
        }
    }

    pub fn peer_closed(&self) -> bool {
        match self {
            AnySession::Server(s) => s.peer_closed(),
            AnySession::Client(s) => s.peer_closed(),
        }
    }

    pub fn failure(&self) -> Option<&Error> {
        match self {
            AnySession::Server(s) => s.failure(),
            AnySession::Client(s) => s.failure(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::{CertificateDer, PrivatePkcs8KeyDer};
    use std::sync::Arc;

    /// A server and a client session that trust each other (no client
    /// certificate).
    fn pair() -> (ServerSession, ClientSession) {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = ca.self_signed(&ca_key).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = rcgen::CertificateParams::new(vec!["localhost".to_string()])
            .unwrap()
            .signed_by(&key, &ca, &ca_key)
            .unwrap();
        let provider = Arc::new(super::super::suites::provider("", "").unwrap());
        let server = rustls::ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(
                vec![CertificateDer::from(cert.der().to_vec())],
                PrivatePkcs8KeyDer::from(key.serialize_der()).into(),
            )
            .unwrap();
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(ca.der().to_vec())).unwrap();
        let client = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let server = UnbufferedServerConnection::new(Arc::new(server)).unwrap();
        let name = "localhost".try_into().unwrap();
        let client = UnbufferedClientConnection::new(Arc::new(client), name).unwrap();
        (Session::new(server), Session::new(client))
    }

    /// Moves `from`'s records to `to`, `piece` bytes at a time; returns
    /// the plaintext `to` got.
    fn carry<A: Records, B: Records>(
        from: &mut Session<A>,
        app: &mut Output,
        to: &mut Session<B>,
        piece: usize,
    ) -> BytesMut {
        let (mut wire, mut plain) = (Vec::new(), BytesMut::new());
        from.seal(app, &mut wire, &mut plain, false).unwrap();
        let mut got = BytesMut::new();
        for chunk in wire.chunks_mut(piece) {
            to.receive(chunk, &mut got).unwrap();
        }
        got
    }

    fn handshake(server: &mut ServerSession, client: &mut ClientSession) {
        for _ in 0..8 {
            carry(client, &mut Output::default(), server, 1 << 20);
            carry(server, &mut Output::default(), client, 1 << 20);
        }
        assert!(server.is_open() && client.is_open());
    }

    #[test]
    fn data_flows_both_ways_whatever_the_pieces_it_arrives_in() {
        let (mut server, mut client) = pair();
        handshake(&mut server, &mut client);
        let request: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        for piece in [1, 7, 4096, 16 * 1024 + 5, 1 << 20] {
            let mut app = Output::default();
            app.extend_from_slice(&request);
            let got = carry(&mut client, &mut app, &mut server, piece);
            assert!(app.is_empty(), "sealed whole");
            assert_eq!(&got[..], &request[..], "pieces of {piece}");
        }
        let mut reply = Output::default();
        reply.extend_from_slice(b"+PONG\r\n");
        assert_eq!(&carry(&mut server, &mut reply, &mut client, 3)[..], b"+PONG\r\n");
        // close_notify ends the peer's input.
        let (mut wire, mut plain) = (Vec::new(), BytesMut::new());
        server.seal(&mut Output::default(), &mut wire, &mut plain, true).unwrap();
        client.receive(&mut wire, &mut plain).unwrap();
        assert!(client.peer_closed());
    }

    #[test]
    fn app_data_waits_for_the_handshake() {
        let (mut server, mut client) = pair();
        let mut early = Output::default();
        early.extend_from_slice(b"-ERR max number of clients reached\r\n");
        let (mut wire, mut plain) = (Vec::new(), BytesMut::new());
        server.seal(&mut early, &mut wire, &mut plain, false).unwrap();
        assert!(wire.is_empty() && !early.is_empty(), "nothing to send before the hello");
        handshake(&mut server, &mut client);
        assert_eq!(
            &carry(&mut server, &mut early, &mut client, 100)[..],
            b"-ERR max number of clients reached\r\n"
        );
    }

    #[test]
    fn garbage_ends_the_session_without_a_panic() {
        // A plaintext client: no alert, nothing sent.
        let (mut server, _) = pair();
        let mut plain = BytesMut::new();
        assert!(server.receive(&mut b"*1\r\n$4\r\nPING\r\n".to_vec(), &mut plain).is_err());
        assert!(server.receive(&mut b"more".to_vec(), &mut plain).is_err(), "stays failed");
        let mut wire = Vec::new();
        server.seal(&mut Output::default(), &mut wire, &mut plain, true).unwrap();
        assert!(wire.is_empty() && plain.is_empty());
        // A record longer than TLS allows.
        let (mut server, _) = pair();
        assert!(server.receive(&mut [0x16, 0x03, 0x03, 0xff, 0xff], &mut plain).is_err());
        // The start of a record waits for the rest.
        let (mut server, _) = pair();
        let mut header = vec![0x16, 0x03, 0x01, 0x3f, 0xff];
        assert!(server.receive(&mut header, &mut plain).is_ok());
        assert_eq!(server.partial.len(), 5);
        // Corrupt records after the handshake: an alert, then the end.
        let (mut server, mut client) = pair();
        handshake(&mut server, &mut client);
        let mut junk = vec![0x17, 0x03, 0x03, 0x00, 0x20];
        junk.extend([0xAB; 32]);
        assert!(server.receive(&mut junk, &mut plain).is_err());
        let mut wire = Vec::new();
        server.seal(&mut Output::default(), &mut wire, &mut plain, false).unwrap();
        assert!(!wire.is_empty(), "the alert");
        assert!(server.failure().is_some());
    }
}
