//! A debugging session's client on a plain descriptor: blocking reads and
//! writes with `poll`, for the glommio backend (whose sockets are read
//! only when their task polls, and that task runs the session) and for a
//! forked session (whose process must not touch the parent's rings).

use ringdb_engine::scripting::debugger::{Link, SEND_TIMEOUT};
use std::os::fd::RawFd;
use std::time::Instant;

pub struct FdLink {
    fd: RawFd,
    gone: bool,
}

impl FdLink {
    pub fn new(fd: RawFd) -> FdLink {
        FdLink { fd, gone: false }
    }

    /// Waits up to `ms` (-1: for ever) for `events` on the descriptor.
    fn wait(&self, events: libc::c_short, ms: i32) {
        let mut pfd = libc::pollfd { fd: self.fd, events, revents: 0 };
        // SAFETY: one valid pollfd record; the result is only a wake-up.
        unsafe { libc::poll(&mut pfd, 1, ms) };
    }
}

impl Link for FdLink {
    fn recv(&mut self, into: &mut Vec<u8>) -> bool {
        let mut buf = [0u8; 1024];
        while !self.gone {
            // SAFETY: reads into a buffer of its length.
            let n = unsafe {
                libc::recv(self.fd, buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT)
            };
            match n {
                n if n > 0 => {
                    into.extend_from_slice(&buf[..n as usize]);
                    return true;
                }
                0 => self.gone = true,
                _ => match std::io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN | libc::EINTR) => self.wait(libc::POLLIN, -1),
                    _ => self.gone = true,
                },
            }
        }
        false
    }

    fn send(&mut self, mut bytes: &[u8]) {
        let deadline = Instant::now() + SEND_TIMEOUT;
        while !bytes.is_empty() && !self.gone {
            // SAFETY: sends from a slice of its length.
            let n = unsafe {
                libc::send(
                    self.fd,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                bytes = &bytes[n as usize..];
                continue;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EAGAIN | libc::EINTR) if !left.is_zero() => {
                    self.wait(libc::POLLOUT, left.as_millis().max(1) as i32)
                }
                _ => self.gone = true,
            }
        }
    }
}
