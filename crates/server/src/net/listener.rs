//! Listening sockets: one per bind address per shard, all on the same port
//! with SO_REUSEPORT, so the kernel spreads new connections over the cores
//! and a connection then stays on the core that accepted it.
//!
//! The sockets are created by the main thread before the shards start, so an
//! address already in use is reported once, clearly, at start-up. A probe
//! bind without SO_REUSEPORT comes first: SO_REUSEPORT alone would let a
//! second ringdb (or Redis) share the port silently.
//!
//! Each shard then accepts on its sockets with the backend `io-backend`
//! names: its own io_uring ring ([`super::uring`]) or glommio's sockets
//! ([`super::fallback`]).

use crate::net::connection::Connection;
use crate::net::socket::{self, Socket};
use crate::net::uring;
use crate::node::Core;
use socket2::{Domain, Protocol, Type};
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::{debug, warn};

fn resolve(addr: &str, port: u16) -> Result<SocketAddr, String> {
    let host = addr.trim_start_matches('-');
    let host = if host == "*" { "0.0.0.0" } else { host };
    (host, port)
        .to_socket_addrs()
        .map_err(|e| format!("bad bind address {addr}: {e}"))?
        .next()
        .ok_or_else(|| format!("bad bind address {addr}"))
}

fn socket_for(addr: SocketAddr) -> Result<socket2::Socket, String> {
    let domain = if addr.is_ipv6() { Domain::IPV6 } else { Domain::IPV4 };
    socket2::Socket::new(domain, Type::STREAM, Some(Protocol::TCP)).map_err(|e| e.to_string())
}

/// Binds `shards` listening sockets per address. Returns the port (resolved
/// when 0 was asked for) and, per shard, its sockets.
pub fn bind_all(
    addresses: &[String],
    port: u16,
    shards: usize,
    backlog: i32,
) -> Result<(u16, Vec<Vec<OwnedFd>>), String> {
    bind_sockets(addresses, port, shards, backlog, true)
}

/// [`bind_all`]; `probe`: check first that nothing listens on the port.
fn bind_sockets(
    addresses: &[String],
    port: u16,
    shards: usize,
    backlog: i32,
    probe: bool,
) -> Result<(u16, Vec<Vec<OwnedFd>>), String> {
    let mut per_shard: Vec<Vec<OwnedFd>> = (0..shards).map(|_| Vec::new()).collect();
    let mut port = port;
    for address in addresses {
        let mut addr = resolve(address, port)?;
        if !probe {
            bind_per_shard(addr, backlog, &mut per_shard)?;
            continue;
        }
        // Probe: fails if anything at all listens on the port already.
        let probe = socket_for(addr)?;
        probe.set_reuse_address(true).map_err(|e| e.to_string())?;
        probe.bind(&addr.into()).map_err(|e| {
            // Redis's words: scripts (and Redis's test suite) retry another
            // port when they read them.
            format!(
                "Could not create server TCP listening socket {addr}: bind: {e}. \
                 Failed listening on port {port} (TCP), aborting."
            )
        })?;
        if port == 0 {
            port =
                probe.local_addr().ok().and_then(|a| a.as_socket()).map(|a| a.port()).unwrap_or(0);
            addr.set_port(port);
        }
        drop(probe);
        bind_per_shard(addr, backlog, &mut per_shard)?;
    }
    Ok((port, per_shard))
}

/// One SO_REUSEPORT listening socket on `addr` for each shard.
fn bind_per_shard(
    addr: SocketAddr,
    backlog: i32,
    per_shard: &mut [Vec<OwnedFd>],
) -> Result<(), String> {
    for fds in per_shard.iter_mut() {
        let sock = socket_for(addr)?;
        sock.set_reuse_address(true).map_err(|e| e.to_string())?;
        sock.set_reuse_port(true).map_err(|e| e.to_string())?;
        if addr.is_ipv6() {
            sock.set_only_v6(true).map_err(|e| e.to_string())?;
        }
        sock.bind(&addr.into()).map_err(|e| format!("could not bind {addr}: {e}"))?;
        sock.listen(backlog).map_err(|e| format!("could not listen on {addr}: {e}"))?;
        sock.set_nonblocking(true).map_err(|e| e.to_string())?;
        fds.push(OwnedFd::from(sock));
    }
    Ok(())
}

/// Starts accepting on this shard's listening sockets, on the backend the
/// configuration asks for (`auto`: the uring backend when this kernel can
/// create its ring, else glommio's, with a log line saying why). Returns the
/// backend's name.
pub fn start(core: &Rc<Core>, fds: Vec<OwnedFd>) -> Result<&'static str, String> {
    let wanted = core.config.borrow().io_backend().to_string();
    if wanted != "glommio" {
        match uring::Driver::new() {
            Ok(driver) => {
                for fd in fds {
                    driver.listen(fd);
                }
                let spin = Duration::from_micros(core.config.borrow().spin_before_park_us());
                // A busy script's hook serves this core's waiting clients.
                let (weak, serving) = (Rc::downgrade(core), driver.clone());
                let serve = move || {
                    if let Some(core) = weak.upgrade() {
                        let new_is_idle =
                            |fd| Connection::answerable_when_new(&core, socket::peer_addr(fd));
                        serving.serve_while_busy(&new_is_idle, &mut |idle, input, out| {
                            crate::route::busy::answer(&core, idle, input, out)
                        });
                    }
                };
                core.shard.borrow_mut().state.scripting.serve_while_busy(Rc::new(serve));
                *core.accepting.borrow_mut() = Some(Accepting::Uring(driver.clone()));
                let (core, shared, id) = (core.clone(), core.shared.clone(), core.id.index());
                let may_spin = move || !shared.doorbells[id].answer();
                let run =
                    driver.run(spin, may_spin, move |stream| admit(&core, Socket::Uring(stream)));
                glommio::spawn_local(run).detach();
                return Ok("uring");
            }
            Err(e) if wanted == "uring" => {
                return Err(format!("io-backend uring: cannot set up the io_uring ring: {e}"))
            }
            Err(e) => {
                if core.id.0 == 0 {
                    warn!("io_uring ring unavailable ({e}): using glommio's sockets (io-backend glommio)");
                }
            }
        }
    }
    let fallback = super::fallback::Fallback::start(core, fds)
        .map_err(|e| format!("io-backend glommio: cannot set up the listeners' ring: {e}"))?;
    *core.accepting.borrow_mut() = Some(Accepting::Glommio(fallback));
    Ok("glommio")
}

/// What accepts a core's connections, on its backend: what CONFIG SET
/// port/bind gives new sockets to.
pub enum Accepting {
    Uring(Rc<uring::Driver>),
    Glommio(Rc<super::fallback::Fallback>),
}

impl Accepting {
    /// Accepts on `fds` from now on, instead of the sockets it had.
    pub fn replace(&self, fds: Vec<OwnedFd>) {
        match self {
            Accepting::Uring(driver) => driver.replace_listeners(fds),
            Accepting::Glommio(fallback) => {
                if let Err(e) = fallback.replace_listeners(fds) {
                    warn!("could not poll the new listening sockets: {e}");
                }
            }
        }
    }
}

/// The sockets for a CONFIG SET of `bind` and `port` (Redis's
/// `changeBindAddr` / `changeListenPort`), per shard, made before the old
/// ones close so that a failure leaves the server as it was: port 0 or
/// no address means no listener at all, as in Redis. `same_port`: the
/// port is the one the server listens on now (its own sockets are there:
/// no probe).
pub fn rebind(
    addresses: &[String],
    port: u16,
    same_port: bool,
    shards: usize,
    backlog: i32,
) -> Result<Vec<Vec<OwnedFd>>, String> {
    if port == 0 || addresses.is_empty() {
        return Ok((0..shards).map(|_| Vec::new()).collect());
    }
    let probe = !same_port;
    bind_sockets(addresses, port, shards, backlog, probe).map(|(_, fds)| fds)
}

/// Serves a new connection, or refuses it past `maxclients`.
pub fn admit(core: &Rc<Core>, socket: Socket) {
    let shared = &core.shared;
    let maxclients = core.config.borrow().maxclients();
    if shared.connected_clients.fetch_add(1, Ordering::Relaxed) >= maxclients {
        shared.connected_clients.fetch_sub(1, Ordering::Relaxed);
        core.shard.borrow_mut().state.stats.rejected_connections += 1;
        glommio::spawn_local(Connection::refuse(socket, "ERR max number of clients reached"))
            .detach();
        return;
    }
    debug!(shard = core.id.0, "accepted a connection");
    glommio::spawn_local(Connection::serve(core.clone(), socket)).detach();
}
