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
//!
//! The TLS port (`tls-port`) is bound the same way beside the plain one;
//! `port 0` with a TLS port means TLS only, as in Redis. Its connections
//! start a TLS session ([`super::tls`]) before anything else.

use crate::config::Config;
use crate::net::connection::Connection;
use crate::net::socket::{self, Socket};
use crate::net::{tls, uring};
use crate::node::Core;
use socket2::{Domain, Protocol, Type};
use std::net::{SocketAddr, ToSocketAddrs};
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tracing::{debug, warn};

/// A bind address as Redis reads it: `*` is every IPv4 address, `::*`
/// every IPv6 one, and a leading `-` makes it optional (skipped when this
/// host does not have it).
struct BindAddress<'a> {
    text: &'a str,
    optional: bool,
}

impl<'a> BindAddress<'a> {
    fn parse(text: &'a str) -> Self {
        match text.strip_prefix('-') {
            Some(rest) => BindAddress { text: rest, optional: true },
            None => BindAddress { text, optional: false },
        }
    }

    fn resolve(&self, port: u16) -> Result<SocketAddr, String> {
        let host = match self.text {
            "*" => "0.0.0.0",
            "::*" => "::",
            host => host,
        };
        (host, port)
            .to_socket_addrs()
            .map_err(|e| format!("bad bind address {}: {e}", self.text))?
            .next()
            .ok_or_else(|| format!("bad bind address {}", self.text))
    }
}

/// Whether a failure to listen on an address means only that this host
/// lacks it or its protocol (no IPv6, say): Redis's `listenToPort` then
/// goes on with the other addresses, optional or not, except that a
/// missing address stops start-up unless it is optional.
fn host_lacks(error: &std::io::Error, optional: bool) -> bool {
    match error.raw_os_error() {
        Some(libc::EADDRNOTAVAIL) => optional,
        Some(
            libc::ENOPROTOOPT
            | libc::EPROTONOSUPPORT
            | libc::ESOCKTNOSUPPORT
            | libc::EPFNOSUPPORT
            | libc::EAFNOSUPPORT,
        ) => true,
        _ => false,
    }
}

fn socket_for(addr: SocketAddr) -> std::io::Result<socket2::Socket> {
    let domain = if addr.is_ipv6() { Domain::IPV6 } else { Domain::IPV4 };
    socket2::Socket::new(domain, Type::STREAM, Some(Protocol::TCP))
}

/// Redis's words when no address can be listened on.
pub const NOWHERE: &str = "Configured to not listen anywhere, exiting.";

/// A listening socket, and whether it is the TLS port's.
pub struct Listening {
    pub fd: OwnedFd,
    pub tls: bool,
}

/// Each shard's sockets: the plain port's, then the TLS port's.
pub type PerShard = Vec<Vec<Listening>>;

fn merge(per_shard: &mut PerShard, fds: Vec<Vec<OwnedFd>>, tls: bool) {
    for (shard, fds) in per_shard.iter_mut().zip(fds) {
        shard.extend(fds.into_iter().map(|fd| Listening { fd, tls }));
    }
}

/// Start-up: TLS configured when the settings want it (Redis's words when
/// it cannot be; the reason was logged), then the plain port (unless `port
/// 0` with a TLS port) and the TLS port, bound for every shard. Returns
/// the plain port (resolved when 0 was asked for without TLS; 0 when TLS
/// only) and each shard's sockets.
pub fn bind_node(config: &Config, shards: usize) -> Result<(u16, PerShard), String> {
    if tls::configure(config).is_err() {
        return Err("Failed to configure TLS. Check logs for more info.".into());
    }
    let (bind, backlog) = (config.bind(), config.tcp_backlog());
    let tls_port = config.int("tls-port") as u16;
    let mut per_shard: PerShard = (0..shards).map(|_| Vec::new()).collect();
    let mut port = 0;
    if config.port() != 0 || tls_port == 0 {
        let (bound, fds) = bind_all(&bind, config.port(), shards, backlog)?;
        port = bound;
        merge(&mut per_shard, fds, false);
    }
    if tls_port != 0 {
        let (_, fds) = bind_sockets(&bind, tls_port, shards, backlog, true)
            .map_err(|e| e.replace("(TCP)", "(tls)"))?;
        merge(&mut per_shard, fds, true);
    }
    Ok((port, per_shard))
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
    for text in addresses {
        let address = BindAddress::parse(text);
        let mut addr = address.resolve(port)?;
        let bound = match probe {
            true => probe_port(addr),
            false => Ok(port),
        }
        .and_then(|found| {
            addr.set_port(found);
            bind_per_shard(addr, backlog, shards)
        });
        match bound {
            Ok(fds) => {
                port = addr.port();
                for (shard, fd) in per_shard.iter_mut().zip(fds) {
                    shard.push(fd);
                }
            }
            Err(e) if host_lacks(&e, address.optional) => {
                warn!("Could not create server TCP listening socket {text}:{port}: {e}");
            }
            // Redis's words: scripts (and Redis's test suite) retry
            // another port when they read them.
            Err(e) => {
                return Err(format!(
                    "Could not create server TCP listening socket {addr}: bind: {e}. \
                     Failed listening on port {port} (TCP), aborting."
                ))
            }
        }
    }
    if per_shard.iter().all(Vec::is_empty) {
        return Err(NOWHERE.into());
    }
    Ok((port, per_shard))
}

/// Binds `addr` without SO_REUSEPORT and lets go at once: fails if anything
/// at all listens on the port already. Returns the port (the one the
/// kernel chose, for port 0).
fn probe_port(addr: SocketAddr) -> std::io::Result<u16> {
    let probe = socket_for(addr)?;
    probe.set_reuse_address(true)?;
    if addr.is_ipv6() {
        probe.set_only_v6(true)?;
    }
    probe.bind(&addr.into())?;
    Ok(probe.local_addr()?.as_socket().map_or(addr.port(), |a| a.port()))
}

/// One SO_REUSEPORT listening socket on `addr` for each shard.
fn bind_per_shard(addr: SocketAddr, backlog: i32, shards: usize) -> std::io::Result<Vec<OwnedFd>> {
    (0..shards)
        .map(|_| {
            let sock = socket_for(addr)?;
            sock.set_reuse_address(true)?;
            sock.set_reuse_port(true)?;
            if addr.is_ipv6() {
                sock.set_only_v6(true)?;
            }
            sock.bind(&addr.into())?;
            sock.listen(backlog)?;
            sock.set_nonblocking(true)?;
            Ok(OwnedFd::from(sock))
        })
        .collect()
}

/// Starts accepting on this shard's listening sockets, on the backend the
/// configuration asks for (`auto`: the uring backend when this kernel can
/// create its ring and the locked-memory plan has room for it, else
/// glommio's, with a log line saying why). Returns the backend's name.
pub async fn start(core: &Rc<Core>, fds: Vec<Listening>) -> Result<&'static str, String> {
    let wanted = core.config.borrow().io_backend().to_string();
    if let Some(size) = core.shared.io_plan.net {
        match new_driver(size).await {
            Ok(driver) => {
                for l in fds {
                    driver.listen(l.fd, l.tls);
                }
                let weak = Rc::downgrade(core);
                driver.set_tls_accept(Box::new(move || {
                    tls::accept(weak.upgrade().map_or(tls::AuthClients::Yes, |c| auth_clients(&c)))
                }));
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

/// The network ring; ENOMEM is retried for a moment, as the executor's
/// rings are (`node::make_executor`: a stopped process's rings are freed
/// a moment after it exits).
async fn new_driver(size: crate::memlock::NetRing) -> std::io::Result<Rc<uring::Driver>> {
    let started = std::time::Instant::now();
    loop {
        match uring::Driver::new(size) {
            Err(e)
                if e.raw_os_error() == Some(libc::ENOMEM)
                    && started.elapsed() < crate::node::RING_RETRY =>
            {
                glommio::timer::sleep(Duration::from_millis(50)).await
            }
            result => return result,
        }
    }
}

/// What accepts a core's connections, on its backend: what CONFIG SET
/// port/bind gives new sockets to.
pub enum Accepting {
    Uring(Rc<uring::Driver>),
    Glommio(Rc<super::fallback::Fallback>),
}

impl Accepting {
    /// Accepts on `fds` from now on, instead of the sockets it had.
    pub fn replace(&self, fds: Vec<Listening>) {
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

/// The sockets for a CONFIG SET of `bind`, `port` or `tls-port` (Redis's
/// `changeBindAddr` / `changeListenPort`), per shard, made before the old
/// ones close so that a failure leaves the server as it was: port 0 or no
/// address means no listener at all, as in Redis. A port the server
/// listens on now has its own sockets there: no probe. An error names the
/// setting whose port could not be had.
pub fn rebind(
    next: &Config,
    current: &Config,
    shards: usize,
) -> Result<PerShard, (&'static str, String)> {
    let (addresses, backlog) = (next.bind(), next.tcp_backlog());
    let mut per_shard: PerShard = (0..shards).map(|_| Vec::new()).collect();
    if addresses.is_empty() {
        return Ok(per_shard);
    }
    let ports = [
        ("port", next.port(), current.port(), false),
        ("tls-port", next.int("tls-port") as u16, current.int("tls-port") as u16, true),
    ];
    for (name, port, was, tls) in ports {
        if port == 0 {
            continue;
        }
        let (_, fds) =
            bind_sockets(&addresses, port, shards, backlog, port != was).map_err(|e| (name, e))?;
        merge(&mut per_shard, fds, tls);
    }
    Ok(per_shard)
}

/// `tls-auth-clients` as a new connection of this core reads it (yes,
/// Redis's default, while the settings are being changed).
fn auth_clients(core: &Core) -> tls::AuthClients {
    core.config.try_borrow().map_or(tls::AuthClients::Yes, |c| tls::AuthClients::of(&c))
}

/// Serves a new connection, or refuses it past `maxclients`. A TLS
/// connection of the glommio backend completes its handshake first
/// (within [`tls::HANDSHAKE_TIMEOUT`]), as Redis's accept handler runs once
/// the handshake is done.
pub fn admit(core: &Rc<Core>, mut socket: Socket) {
    if socket.handshaking() {
        let core = core.clone();
        glommio::spawn_local(async move {
            let done = glommio::timer::timeout(tls::HANDSHAKE_TIMEOUT, async {
                socket.handshake().await.map_err(glommio::GlommioError::IoError)
            })
            .await;
            match done {
                Ok(()) => admit_now(&core, socket),
                Err(e) => {
                    let addr = socket.peer_addr().map(|a| a.to_string()).unwrap_or_default();
                    debug!("Error accepting a client connection: {e} (addr={addr})");
                    socket.close().await;
                }
            }
        })
        .detach();
        return;
    }
    admit_now(core, socket)
}

fn admit_now(core: &Rc<Core>, socket: Socket) {
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
