//! A glommio TCP stream, in the clear or through a TLS [`session`]: the
//! glommio backend's client sockets, and a replica's connections to its
//! primary. Each read and write is awaited, as glommio's are; the TLS side
//! keeps what it decrypted and has not handed out yet, so nothing read is
//! ever lost between calls.
//!
//! [`session`]: super::session

use super::session::AnySession;
use bytes::BytesMut;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use ringdb_protocol::Output;
use std::io;

/// Ciphertext read at once (a little over one whole record).
const CIPHER_CHUNK: usize = 32 * 1024;

pub struct Stream {
    tcp: TcpStream,
    tls: Option<Box<Tls>>,
}

struct Tls {
    session: AnySession,
    /// Decrypted and not yet read.
    plain: BytesMut,
    /// What a read of the socket lands in.
    chunk: Vec<u8>,
    /// Records to write.
    wire: Vec<u8>,
    /// The socket's end was read.
    eof: bool,
}

fn broken(e: impl std::fmt::Display) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

impl Stream {
    pub fn plain(tcp: TcpStream) -> Stream {
        Stream { tcp, tls: None }
    }

    pub fn tls(tcp: TcpStream, session: AnySession) -> Stream {
        let tls = Tls {
            session,
            plain: BytesMut::new(),
            chunk: vec![0; CIPHER_CHUNK],
            wire: Vec::new(),
            eof: false,
        };
        Stream { tcp, tls: Some(Box::new(tls)) }
    }

    pub fn tcp(&self) -> &TcpStream {
        &self.tcp
    }

    pub fn is_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// A TLS stream whose handshake is not done yet.
    pub fn handshaking(&self) -> bool {
        self.tls.as_ref().is_some_and(|t| !t.session.is_open())
    }

    /// Reads what arrives into `out` (at least one byte; 0 at the end).
    pub async fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else { return self.tcp.read(out).await };
        while tls.plain.is_empty() {
            if !Self::fill(&mut self.tcp, tls).await? {
                return Ok(0);
            }
        }
        let n = tls.plain.len().min(out.len());
        out[..n].copy_from_slice(&tls.plain.split_to(n));
        Ok(n)
    }

    /// Appends what arrives to `buf` (at least one byte; 0 at the end);
    /// `chunk` is the plain path's read buffer.
    pub async fn read_into(&mut self, buf: &mut BytesMut, chunk: &mut [u8]) -> io::Result<usize> {
        let Some(tls) = self.tls.as_mut() else {
            let n = self.tcp.read(chunk).await?;
            buf.extend_from_slice(&chunk[..n]);
            return Ok(n);
        };
        while tls.plain.is_empty() {
            if !Self::fill(&mut self.tcp, tls).await? {
                return Ok(0);
            }
        }
        let n = tls.plain.len();
        if buf.is_empty() {
            std::mem::swap(buf, &mut tls.plain);
        } else {
            buf.extend_from_slice(&tls.plain);
            tls.plain.clear();
        }
        Ok(n)
    }

    /// One read of ciphertext, decrypted into `tls.plain`, after sending
    /// what the session has to say (handshake records, an alert). False at
    /// the end of the input.
    async fn fill(tcp: &mut TcpStream, tls: &mut Tls) -> io::Result<bool> {
        Self::flush(tcp, tls, &mut Output::default(), false).await?;
        if let Some(e) = tls.session.failure() {
            return Err(broken(e));
        }
        if tls.eof || tls.session.peer_closed() {
            return Ok(false);
        }
        let n = tcp.read(&mut tls.chunk).await?;
        if n == 0 {
            tls.eof = true;
            return Ok(!tls.plain.is_empty());
        }
        let received = tls.session.receive(&mut tls.chunk[..n], &mut tls.plain);
        if let Err(e) = received {
            // The alert first, so that the peer learns why.
            let _ = Self::flush(tcp, tls, &mut Output::default(), false).await;
            return Err(broken(e));
        }
        Ok(true)
    }

    /// Seals `app` (what the handshake lets through) and writes it.
    async fn flush(
        tcp: &mut TcpStream,
        tls: &mut Tls,
        app: &mut Output,
        close: bool,
    ) -> io::Result<()> {
        let sealed = tls.session.seal(app, &mut tls.wire, &mut tls.plain, close);
        if !tls.wire.is_empty() {
            let written = tcp.write_all(&tls.wire).await;
            tls.wire.clear();
            written?;
        }
        sealed.map_err(broken)
    }

    /// Drives the handshake to its end (or its failure).
    pub async fn handshake(&mut self) -> io::Result<()> {
        let Some(tls) = self.tls.as_mut() else { return Ok(()) };
        while !tls.session.is_open() {
            if !Self::fill(&mut self.tcp, tls).await? {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "the peer closed the connection during the TLS handshake",
                ));
            }
        }
        // A client's Finished (and a server's tickets) may still wait.
        Self::flush(&mut self.tcp, tls, &mut Output::default(), false).await
    }

    /// Writes `out` (leaving it empty): on TLS, encrypted piece by piece
    /// into one send; in the clear, spliced values from where they are.
    pub async fn write_output(&mut self, out: &mut Output) -> io::Result<()> {
        if self.handshaking() {
            if let Err(e) = self.handshake().await {
                out.clear();
                return Err(e);
            }
        }
        let Some(tls) = self.tls.as_mut() else {
            let mut written = Ok(());
            for piece in out.segments() {
                written = self.tcp.write_all(piece).await;
                if written.is_err() {
                    break;
                }
            }
            out.clear();
            return written;
        };
        let flushed = Self::flush(&mut self.tcp, tls, out, false).await;
        out.clear();
        flushed
    }

    /// Writes `bytes` (the replica's handshake commands).
    pub async fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut out = Output::default();
        out.extend_from_slice(bytes);
        self.write_output(&mut out).await
    }

    /// Says close_notify on TLS (when the session is up), then closes.
    pub async fn close(mut self) -> io::Result<()> {
        if let Some(tls) = self.tls.as_mut().filter(|t| t.session.is_open()) {
            let _ = Self::flush(&mut self.tcp, tls, &mut Output::default(), true).await;
        }
        self.tcp.close().await
    }
}
