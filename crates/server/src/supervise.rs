//! Telling a supervisor how the server is doing, as Redis's `supervised`:
//! systemd's notify socket (`Type=notify`: `READY=1` once every shard
//! serves, `STOPPING=1` when a shutdown begins, and `WATCHDOG=1` while
//! every shard answers, when the unit sets `WatchdogSec=`), or upstart's
//! `SIGSTOP` once ready.

use crate::node::Shared;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tracing::{info, warn};

enum Supervisor {
    Systemd(SocketAddr),
    Upstart,
}

static SUPERVISOR: OnceLock<Option<Supervisor>> = OnceLock::new();

/// Reads `supervised` (`no`, `systemd`, `upstart`, `auto`) and the
/// supervisor's environment, with Redis's messages.
pub fn init(mode: &str) {
    let systemd = std::env::var_os("NOTIFY_SOCKET");
    let upstart = std::env::var_os("UPSTART_JOB").is_some();
    let chosen = match mode {
        "systemd" => Some("systemd"),
        "upstart" => Some("upstart"),
        "auto" if systemd.is_some() => Some("systemd"),
        "auto" if upstart => Some("upstart"),
        _ => None,
    };
    let supervisor = match chosen {
        Some("systemd") => {
            match systemd.as_deref().and_then(|p| notify_address(p.as_encoded_bytes())) {
                Some(addr) => {
                    info!(
                        "supervised by systemd. Please make sure you set appropriate values for \
                     TimeoutStartSec and TimeoutStopSec in your service unit."
                    );
                    Some(Supervisor::Systemd(addr))
                }
                None => {
                    warn!(
                        "systemd supervision requested or auto-detected, but NOTIFY_SOCKET \
                     environment variable not found!"
                    );
                    None
                }
            }
        }
        Some(_) if upstart => {
            info!("supervised by upstart, will stop to signal readiness.");
            Some(Supervisor::Upstart)
        }
        Some(_) => {
            warn!("upstart supervision requested, but UPSTART_JOB not found!");
            None
        }
        None => None,
    };
    let _ = SUPERVISOR.set(supervisor);
}

/// `NOTIFY_SOCKET`: a path, or `@name` for an abstract socket.
fn notify_address(value: &[u8]) -> Option<SocketAddr> {
    use std::os::linux::net::SocketAddrExt;
    match value {
        [] => None,
        [b'@', name @ ..] => SocketAddr::from_abstract_name(name).ok(),
        path => SocketAddr::from_pathname(std::str::from_utf8(path).ok()?).ok(),
    }
}

fn systemd(message: &str) {
    if let Some(Some(Supervisor::Systemd(addr))) = SUPERVISOR.get() {
        let sent = UnixDatagram::unbound().and_then(|s| s.send_to_addr(message.as_bytes(), addr));
        if let Err(e) = sent {
            warn!("cannot tell systemd '{}': {e}", message.trim_end());
        }
    }
}

/// Every shard serves: systemd's `READY=1`, upstart's `SIGSTOP`; then the
/// watchdog, when systemd asks for one.
pub fn ready(shared: &Arc<Shared>) {
    match SUPERVISOR.get() {
        Some(Some(Supervisor::Systemd(_))) => {
            systemd(&format!(
                "READY=1\nSTATUS=Ready to accept connections\nMAINPID={}\n",
                std::process::id()
            ));
            if let Some(every) = watchdog_interval() {
                let shared = shared.clone();
                let _ = std::thread::Builder::new()
                    .name("ringdb-watchdog".into())
                    .spawn(move || watchdog(&shared, every));
            }
        }
        Some(Some(Supervisor::Upstart)) => {
            // SAFETY: a signal to this process; upstart resumes it.
            unsafe { libc::raise(libc::SIGSTOP) };
        }
        _ => {}
    }
}

/// A shutdown begins (Redis's `prepareForShutdown`): said once, however
/// many paths to the exit call it.
pub fn stopping() {
    static SAID: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    if !SAID.swap(true, Relaxed) {
        systemd("STOPPING=1\nSTATUS=Shutting down\n");
    }
}

/// `WATCHDOG_USEC` when meant for this process (`WATCHDOG_PID`).
fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    let for_us = std::env::var("WATCHDOG_PID")
        .map_or(true, |pid| pid.parse::<u32>().ok() == Some(std::process::id()));
    (for_us && usec > 0).then(|| Duration::from_micros(usec))
}

/// Every half interval, a job to each shard; `WATCHDOG=1` only when all
/// of them ran it, so a shard stuck in a loop lets systemd restart the
/// server.
fn watchdog(shared: &Shared, every: Duration) {
    let shards = shared.mesh.len();
    loop {
        let answered = Arc::new(AtomicUsize::new(0));
        for (i, mesh) in shared.mesh.iter().enumerate() {
            let answered = answered.clone();
            if mesh.try_send(Box::new(move |_| _ = answered.fetch_add(1, Relaxed))).is_ok() {
                shared.doorbells[i].ring();
            }
        }
        std::thread::sleep(every / 2);
        let count = answered.load(Relaxed);
        if count == shards {
            systemd("WATCHDOG=1\n");
        } else {
            warn!(
                "watchdog: {} of {shards} shards did not answer within {:?}",
                shards - count,
                every / 2
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notify_socket_paths_and_abstract_names() {
        use std::os::linux::net::SocketAddrExt;
        let path = notify_address(b"/run/systemd/notify").unwrap();
        assert_eq!(path.as_pathname().unwrap().to_str(), Some("/run/systemd/notify"));
        let abs = notify_address(b"@/org/freedesktop/systemd1/notify/1").unwrap();
        assert_eq!(abs.as_abstract_name(), Some(&b"/org/freedesktop/systemd1/notify/1"[..]));
        assert!(notify_address(b"").is_none());
    }
}
