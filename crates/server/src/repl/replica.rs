//! Following a primary (Redis 7.0's `replication.c`, replica side):
//! REPLICAOF / SLAVEOF, the handshake, the snapshot, and the stream applied
//! through a client connection of its own (Redis's master client).
//!
//! The link runs on the core that took REPLICAOF. It connects, says PING,
//! AUTH (`masterauth`, `masteruser`), `REPLCONF listening-port`, `REPLCONF
//! capa eof capa psync2`, then `PSYNC <replid> <offset+1>` with the
//! history it has. `+FULLRESYNC` brings a snapshot (either form), loaded
//! into every shard under one lock of all of them; `+CONTINUE` goes on
//! from the offset it has. The stream's commands then run in order through
//! the router, spread over the shards as any client's are, which keeps
//! every key's order and runs a `MULTI … EXEC` whole. Once a second and on
//! `REPLCONF GETACK` it acknowledges the offset it has applied. A link that
//! breaks is made again a second later, with PSYNC.
//!
//! A ringdb primary with as many shards sends the snapshot as one flow per
//! shard (see [`super::primary`]). A replica serves replicas of its own
//! once its link is up: it relays the stream it applies into its own
//! backlog, at the primary's offsets, and takes their snapshots between
//! two batches of the stream, where every shard is at the same offset.

use super::received::{Snapshot, Spill};
use super::Role;
use crate::net::connection::Connection;
use crate::net::tls::stream::Stream;
use crate::node::Core;
use bytes::{Bytes, BytesMut};
use glommio::net::TcpStream;
use ringdb_engine::command::args::is;
use ringdb_engine::command::{CmdError, CmdResult};
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// The primary this node follows, and how the link to it is.
#[derive(Clone, Debug)]
pub struct Master {
    pub host: String,
    pub port: u16,
    /// The link is up (`master_link_status`).
    pub up: bool,
    /// A snapshot is being received (`master_sync_in_progress`).
    pub syncing: bool,
    /// Redis's replica state, as ROLE names it.
    pub phase: &'static str,
    pub last_io: Option<Instant>,
    pub down_since: Option<Instant>,
    pub transfer_size: i64,
    pub transfer_read: i64,
    /// Which REPLICAOF this is: an older link stops.
    epoch: u64,
}

/// The database the last link's stream had selected (a partial resync
/// goes on in it, as Redis's cached master client does).
static STREAM_DB: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// REPLICAOF host port | NO ONE (and SLAVEOF).
pub async fn replicaof(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let core = conn.core.clone();
    if is(&args[1], "no") && is(&args[2], "one") {
        if promote(&core, conn.state.in_exec).await? {
            info!(
                "MASTER MODE enabled (user request from 'id={} addr={}')",
                conn.state.id, conn.handle.addr
            );
            remember(&core, String::new()).await;
        }
        conn.reply().ok();
        return Ok(());
    }
    let port = ringdb_engine::command::args::int(&args[2])?;
    if !(0..=65535).contains(&port) {
        return Err(CmdError::new("ERR Invalid master port"));
    }
    let host = String::from_utf8_lossy(&args[1]).into_owned();
    {
        let st = core.shared.repl.lock();
        if let Role::Replica(m) = &st.role {
            if m.host.eq_ignore_ascii_case(&host) && m.port == port as u16 {
                drop(st);
                conn.reply().simple("OK Already connected to specified master");
                return Ok(());
            }
        }
    }
    follow(&core, host.clone(), port as u16);
    remember(&core, format!("{host} {port}")).await;
    info!(
        "REPLICAOF {host}:{port} enabled (user request from 'id={} addr={}')",
        conn.state.id, conn.handle.addr
    );
    conn.reply().ok();
    Ok(())
}

/// Sets `replicaof` on every core, so that CONFIG GET and CONFIG REWRITE
/// (Sentinel's failover rewrites the file) say what this node follows.
async fn remember(core: &Rc<Core>, primary: String) {
    let _ = core
        .invoke_on_all(move |core| {
            let mut config = core.config.borrow().clone();
            if config.set_by_server("replicaof", &primary).is_ok() {
                core.apply_config(config);
            }
        })
        .await;
}

static EPOCH: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Becomes a replica of `host:port` (REPLICAOF, or `replicaof` in the
/// configuration) and starts the link on this core.
pub fn follow(core: &Rc<Core>, host: String, port: u16) {
    let epoch = EPOCH.fetch_add(1, Relaxed) + 1;
    {
        let repl = &core.shared.repl;
        let mut st = repl.lock();
        // Our replicas must sync again from the new history.
        st.drop_links();
        st.backlog = false;
        repl.feeding.store(false, Relaxed);
        st.role = Role::Replica(Master {
            host,
            port,
            up: false,
            syncing: false,
            phase: "connect",
            last_io: None,
            down_since: Some(Instant::now()),
            transfer_size: -1,
            transfer_read: 0,
            epoch,
        });
        repl.replica.store(true, Relaxed);
        crate::logging::set_replica(true);
    }
    glommio::spawn_local(run_link(core.clone(), epoch)).detach();
}

/// REPLICAOF NO ONE: keeps the data, starts a new history (the old id
/// stays valid for PSYNC2 up to this offset) and a backlog that replicas
/// (former siblings) can go on from. Whether this was a replica.
///
/// Under one lock of every shard (held already inside EXEC): a cross-shard
/// transaction is then wholly before the stream starts or wholly in it,
/// never a part in it whose other part was never logged.
pub async fn promote(core: &Rc<Core>, in_exec: bool) -> Result<bool, CmdError> {
    if let Role::Primary = core.shared.repl.lock().role {
        return Ok(false);
    }
    crate::persist::lock_all(core, in_exec).await?;
    let started = core
        .invoke_on_all(|core| {
            // Every shard records its changes for the stream from here on.
            core.shard.borrow_mut().state.funnel.log.get_or_insert_with(Default::default).as_is =
                true;
        })
        .await;
    {
        let repl = &core.shared.repl;
        let mut st = repl.lock();
        st.role = Role::Primary;
        repl.replica.store(false, Relaxed);
        crate::logging::set_replica(false);
        st.shift_replid(super::new_replid());
        st.create_backlog(&repl.feeding);
        // Our replicas reconnect and go on under the new id (PSYNC2).
        st.drop_links();
    }
    crate::persist::unlock_all(core, in_exec).await?;
    started.map(|_| true)
}

fn current(core: &Core, epoch: u64) -> bool {
    matches!(&core.shared.repl.lock().role, Role::Replica(m) if m.epoch == epoch)
}

/// Changes the link's state, if the link is still the current one.
fn update(core: &Core, epoch: u64, f: impl FnOnce(&mut Master)) {
    if let Role::Replica(m) = &mut core.shared.repl.lock().role {
        if m.epoch == epoch {
            f(m);
        }
    }
}

async fn run_link(core: Rc<Core>, epoch: u64) {
    while current(&core, epoch) {
        if let Err(e) = session(&core, epoch).await {
            if current(&core, epoch) {
                warn!("Replication link to the MASTER failed: {e}");
            }
        }
        update(&core, epoch, |m| {
            if m.up {
                m.down_since = Some(Instant::now());
            }
            m.up = false;
            m.syncing = false;
            m.phase = "connect";
        });
        glommio::timer::sleep(Duration::from_secs(1)).await;
    }
}

/// The handshake's reading and writing, before the stream.
struct Handshake {
    /// Through TLS with `tls-replication`.
    stream: Stream,
    buf: BytesMut,
    /// What each read lands in (kept: a snapshot takes thousands of reads).
    chunk: Vec<u8>,
    timeout: Duration,
}

impl Handshake {
    async fn send(&mut self, args: &[&[u8]]) -> Result<(), String> {
        let mut out = Vec::new();
        ringdb_protocol::encode_command(&mut out, args);
        self.stream.write_all(&out).await.map_err(|e| e.to_string())
    }

    /// Reads more into `buf`; how much.
    async fn fill(&mut self) -> Result<usize, String> {
        let read = self.stream.read(&mut self.chunk);
        let n = glommio::timer::timeout(self.timeout, async {
            read.await.map_err(glommio::GlommioError::IoError)
        })
        .await
        .map_err(|_| "Timeout connecting to the MASTER...".to_string())?;
        if n == 0 {
            return Err("the MASTER closed the connection".into());
        }
        self.buf.extend_from_slice(&self.chunk[..n]);
        Ok(n)
    }

    /// The next line that is not a keepalive newline.
    async fn line(&mut self) -> Result<String, String> {
        loop {
            if let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
                let line = self.buf.split_to(end + 1);
                let text = String::from_utf8_lossy(&line).trim_end().to_string();
                if text.is_empty() {
                    continue;
                }
                return Ok(text);
            }
            if self.buf.len() > 64 * 1024 {
                return Err("a line from the MASTER is too long".into());
            }
            self.fill().await?;
        }
    }

    async fn command(&mut self, args: &[&[u8]]) -> Result<String, String> {
        self.send(args).await?;
        self.line().await
    }
}

/// How to reach the primary (cloned into each flow of a full sync).
#[derive(Clone)]
struct Dial {
    host: String,
    port: u16,
    auth: Option<String>,
    user: Option<String>,
    timeout: Duration,
    /// `tls-replication`: the primary's port is its TLS port.
    tls: bool,
}

impl Dial {
    /// Connects (and completes the TLS handshake), within `repl-timeout`.
    async fn connect(&self) -> Result<Handshake, String> {
        let stream = glommio::timer::timeout(self.timeout, async {
            let tcp = TcpStream::connect(format!("{}:{}", self.host, self.port)).await?;
            let _ = tcp.set_nodelay(true);
            if !self.tls {
                return Ok(Stream::plain(tcp));
            }
            let session = crate::net::tls::connect(&self.host)
                .map_err(|e| std::io::Error::other(format!("TLS: {e}")))?;
            let mut stream =
                Stream::tls(tcp, crate::net::tls::session::AnySession::Client(session));
            stream.handshake().await?;
            Ok(stream)
        })
        .await
        .map_err(|e| format!("Unable to connect to MASTER: {e}"))?;
        Ok(Handshake {
            stream,
            buf: BytesMut::new(),
            chunk: vec![0; 256 * 1024],
            timeout: self.timeout,
        })
    }

    /// AUTH with `masterauth` (and `masteruser`), when set.
    async fn auth(&self, hs: &mut Handshake) -> Result<(), String> {
        if let Some(pass) = &self.auth {
            let reply = match &self.user {
                Some(user) => hs.command(&[b"AUTH", user.as_bytes(), pass.as_bytes()]).await?,
                None => hs.command(&[b"AUTH", pass.as_bytes()]).await?,
            };
            if reply.starts_with('-') {
                return Err(format!("Unable to AUTH to MASTER: {reply}"));
            }
        }
        Ok(())
    }
}

/// One connection to the primary, from connecting to its end.
async fn session(core: &Rc<Core>, epoch: u64) -> Result<(), String> {
    let (host, port) = match &core.shared.repl.lock().role {
        Role::Replica(m) => (m.host.clone(), m.port),
        Role::Primary => return Ok(()),
    };
    let (dial, announce_ip, announce_port) = {
        let c = core.config.borrow();
        let dial = Dial {
            host,
            port,
            auth: c.get("masterauth").filter(|s| !s.is_empty()).map(str::to_string),
            user: c.get("masteruser").filter(|s| !s.is_empty()).map(str::to_string),
            timeout: Duration::from_secs(c.int("repl-timeout").max(1) as u64),
            tls: c.get("tls-replication") == Some("yes"),
        };
        (
            dial,
            c.get("replica-announce-ip").filter(|s| !s.is_empty()).map(str::to_string),
            c.int("replica-announce-port"),
        )
    };
    let timeout = dial.timeout;
    info!("Connecting to MASTER {}:{}", dial.host, dial.port);
    update(core, epoch, |m| m.phase = "connecting");
    let mut hs = dial.connect().await?;
    info!("MASTER <-> REPLICA sync started");
    update(core, epoch, |m| {
        m.phase = "handshake";
        m.last_io = Some(Instant::now());
    });
    let pong = hs.command(&[b"PING"]).await?;
    if pong.starts_with('-')
        && !pong.starts_with("-NOAUTH")
        && !pong.starts_with("-NOPERM")
        && !pong.starts_with("-ERR operation not permitted")
    {
        return Err(format!("Error reply to PING from master: '{pong}'"));
    }
    dial.auth(&mut hs).await?;
    // Redis announces the port its replicas would dial: the TLS one when
    // replication is over TLS.
    let own_port = match dial.tls {
        true => core.config.borrow().int("tls-port") as u16,
        false => core.shared.port,
    };
    let listening = if announce_port > 0 { announce_port as u16 } else { own_port };
    let reply =
        hs.command(&[b"REPLCONF", b"listening-port", listening.to_string().as_bytes()]).await?;
    if reply.starts_with('-') {
        info!("(Non critical) Master does not understand REPLCONF listening-port: {reply}");
    }
    if let Some(ip) = &announce_ip {
        let reply = hs.command(&[b"REPLCONF", b"ip-address", ip.as_bytes()]).await?;
        if reply.starts_with('-') {
            info!("(Non critical) Master does not understand REPLCONF ip-address: {reply}");
        }
    }
    let reply = hs.command(&[b"REPLCONF", b"capa", b"eof", b"capa", b"psync2"]).await?;
    if reply.starts_with('-') {
        info!("(Non critical) Master does not understand REPLCONF capa: {reply}");
    }
    // A ringdb primary with as many shards sends a full sync as one flow
    // per shard; others answer an error and the sync is Redis's.
    let shards = core.shared.shards().to_string();
    let flows = hs.command(&[b"REPLCONF", b"ringdb-shards", shards.as_bytes()]).await?;
    let dial = (!flows.starts_with('-')).then_some(dial);
    let (replid, offset) = {
        let st = core.shared.repl.lock();
        (st.replid.clone(), st.stream.offset)
    };
    info!("Trying a partial resynchronization (request {replid}:{}).", offset + 1);
    let reply =
        hs.command(&[b"PSYNC", replid.as_bytes(), (offset + 1).to_string().as_bytes()]).await?;
    let mut db = STREAM_DB.load(Relaxed);
    let offset = if let Some(rest) = reply.strip_prefix("+FULLRESYNC ") {
        let mut words = rest.split(' ');
        let (Some(id), Some(off)) =
            (words.next(), words.next().and_then(|o| o.parse::<u64>().ok()))
        else {
            return Err(format!("Bad +FULLRESYNC reply: '{reply}'"));
        };
        info!("Full resync from master: {id}:{off}");
        let parts = receive_snapshot(core, epoch, &mut hs, dial).await?;
        load_snapshot(core, parts).await?;
        let mut st = core.shared.repl.lock();
        st.replid = id.to_string();
        st.replid2 = super::NO_REPLID.into();
        st.second_offset = -1;
        st.stream = super::stream::Stream::new(core.shared.shards(), off);
        // A new dataset: our replicas must sync again.
        st.drop_links();
        st.backlog = false;
        db = 0;
        off
    } else if let Some(rest) = reply.strip_prefix("+CONTINUE") {
        let new = rest.trim();
        info!("Successful partial resynchronization with master.");
        let mut st = core.shared.repl.lock();
        if !new.is_empty() && new != st.replid {
            info!("Master replication ID changed to {new}");
            st.shift_replid(new.to_string());
            st.drop_links();
        }
        offset
    } else {
        return Err(format!("Unexpected reply to PSYNC from master: {reply}"));
    };
    update(core, epoch, |m| {
        m.up = true;
        m.syncing = false;
        m.phase = "connected";
        m.down_since = None;
        m.last_io = Some(Instant::now());
    });
    info!("MASTER <-> REPLICA sync: Finished with success");
    let Handshake { stream, buf, .. } = hs;
    let fd = std::os::fd::AsRawFd::as_raw_fd(stream.tcp());
    let slot = Rc::new(crate::net::fallback::Slot::for_fd(fd));
    let socket = crate::net::socket::Socket::glommio(stream, slot);
    let mut conn = Connection::for_master(core.clone(), socket, &buf, db);
    let result = apply(&mut conn, epoch, offset, timeout).await;
    STREAM_DB.store(conn.state.db, Relaxed);
    conn.close().await;
    result
}

/// Receives the snapshot after `+FULLRESYNC`: `$<len>` and that many
/// bytes, `$EOF:<mark>` and bytes up to the mark, or from a ringdb primary
/// (when `flows` can reach it) `$FLOWS:<token>` and one RDB per shard, each
/// received by its shard's core on a connection of its own.
async fn receive_snapshot(
    core: &Rc<Core>,
    epoch: u64,
    hs: &mut Handshake,
    flows: Option<Dial>,
) -> Result<Vec<Snapshot>, String> {
    update(core, epoch, |m| {
        m.syncing = true;
        m.phase = "sync";
        m.transfer_size = -1;
        m.transfer_read = 0;
    });
    let header = hs.line().await?;
    if let (Some(token), Some(dial)) = (header.strip_prefix("$FLOWS:"), flows) {
        info!("MASTER <-> REPLICA sync: receiving one flow per shard from master into memory");
        let tasks: Vec<_> = (0..core.shared.shards())
            .map(|shard| {
                let (core, dial, token) = (core.clone(), dial.clone(), token.to_string());
                glommio::spawn_local(async move {
                    let on = ringdb_engine::ShardId(shard as u16);
                    core.invoke_deferred(on, move |core, reply| {
                        let core = core.clone();
                        glommio::spawn_local(async move {
                            reply.send(receive_flow(&core, epoch, &dial, shard, &token).await)
                        })
                        .detach();
                    })
                    .await
                    .map_err(|e| e.text().to_string())?
                })
            })
            .collect();
        let mut parts = Vec::with_capacity(tasks.len());
        for task in tasks {
            parts.push(task.await?);
        }
        return Ok(parts);
    }
    Ok(vec![read_rdb(core, epoch, hs, &header).await?])
}

/// One flow of a full sync: shard `shard`'s RDB, on a connection of its own.
async fn receive_flow(
    core: &Core,
    epoch: u64,
    dial: &Dial,
    shard: usize,
    token: &str,
) -> Result<Snapshot, String> {
    let mut hs = dial.connect().await?;
    dial.auth(&mut hs).await?;
    let shard_text = shard.to_string();
    hs.send(&[
        b"REPLCONF",
        b"ringdb-flow",
        shard_text.as_bytes(),
        b"ringdb-sync",
        token.as_bytes(),
    ])
    .await?;
    let header = hs.line().await?;
    read_rdb(core, epoch, &mut hs, &header)
        .await
        .map_err(|e| format!("flow {shard} of the full sync: {e}"))
}

/// Reads an RDB framed as `$<len>` or `$EOF:<mark>` (the `header` line),
/// counting its bytes in `master_sync_read_bytes`. With `repl-diskless-load
/// disabled` (Redis's default) it goes to a file as it arrives; otherwise
/// it is kept in memory.
async fn read_rdb(
    core: &Core,
    epoch: u64,
    hs: &mut Handshake,
    header: &str,
) -> Result<Snapshot, String> {
    let Some(spec) = header.strip_prefix('$') else {
        return Err(format!("Bad protocol from MASTER, the first byte is not '$' (we received '{header}'), are you sure the host and port are right?"));
    };
    let (limit, mut spill) = {
        let c = core.config.borrow();
        let limit = c.int("proto-max-bulk-len").max(1) as u64 * 64;
        let spill = match c.get("repl-diskless-load") {
            Some("disabled") => {
                static FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
                let n = FILES.fetch_add(1, Relaxed);
                Some(Spill::create(c.get("dir").unwrap_or("./"), n)?)
            }
            _ => None,
        };
        (limit, spill)
    };
    let place = if spill.is_some() { "to disk" } else { "into memory" };
    let progress = |read: usize| {
        update(core, epoch, |m| {
            m.transfer_read += read as i64;
            m.last_io = Some(Instant::now());
        })
    };
    // Bytes held before they go to the file.
    const SPILL_AT: usize = 4 << 20;
    let mut spilled: u64 = 0;
    if let Some(mark) = spec.strip_prefix("EOF:") {
        let mark = mark.as_bytes().to_vec();
        if mark.len() != 40 {
            return Err("bad EOF mark from MASTER".into());
        }
        info!("MASTER <-> REPLICA sync: receiving streamed RDB from master with EOF {place}");
        let finder = memchr::memmem::Finder::new(&mark);
        let mut searched: usize = 0;
        loop {
            // The stream may follow the mark in the same read.
            let from = searched.saturating_sub(40);
            if let Some(at) = finder.find(&hs.buf[from..]) {
                let data = hs.buf.split_to(from + at);
                let _ = hs.buf.split_to(40);
                return finish(data, spill);
            }
            if let Some(file) = spill.as_mut().filter(|_| hs.buf.len() > SPILL_AT) {
                // All but what may be the start of the mark.
                let out = hs.buf.split_to(hs.buf.len() - 40);
                file.put(&out)?;
                spilled += out.len() as u64;
            }
            searched = hs.buf.len();
            if spilled + hs.buf.len() as u64 > limit {
                return Err("the snapshot from MASTER is too large".into());
            }
            progress(hs.fill().await?);
        }
    }
    let len: u64 =
        spec.parse().map_err(|_| format!("Bad snapshot length from MASTER: {header}"))?;
    if len > limit {
        return Err("the snapshot from MASTER is too large".into());
    }
    info!("MASTER <-> REPLICA sync: receiving {len} bytes from master {place}");
    update(core, epoch, |m| m.transfer_size = len as i64);
    if spill.is_none() {
        hs.buf.reserve(len as usize);
    }
    while spilled + (hs.buf.len() as u64) < len {
        if let Some(file) = spill.as_mut().filter(|_| hs.buf.len() > SPILL_AT) {
            let out = hs.buf.split();
            file.put(&out)?;
            spilled += out.len() as u64;
        }
        progress(hs.fill().await?);
    }
    finish(hs.buf.split_to((len - spilled) as usize), spill)
}

/// The snapshot's last bytes, and the whole of it.
fn finish(last: BytesMut, spill: Option<Spill>) -> Result<Snapshot, String> {
    match spill {
        Some(file) => file.finish(&last),
        None => Ok(Snapshot::Memory(last.into())),
    }
}

/// Replaces every shard's data with the snapshot's (one RDB for all, or
/// one per shard).
async fn load_snapshot(core: &Rc<Core>, parts: Vec<Snapshot>) -> Result<(), String> {
    info!("MASTER <-> REPLICA sync: Flushing old data");
    info!("MASTER <-> REPLICA sync: Loading DB in memory");
    let keys = crate::persist::load_from_primary(core, parts).await?;
    info!("MASTER <-> REPLICA sync: Loaded {keys} keys");
    Ok(())
}

/// The bytes a command takes in the stream (the primary writes every
/// command as a RESP array of bulk strings).
fn wire_len(args: &[Bytes]) -> u64 {
    let digits = |n: usize| n.to_string().len() as u64;
    let mut len = 1 + digits(args.len()) + 2;
    for a in args {
        len += 1 + digits(a.len()) + 2 + a.len() as u64 + 2;
    }
    len
}

/// A full sync of this replica's own replica: the snapshot's writers
/// (one, or one per shard) and the offset it is at, or why not.
pub(crate) type SnapshotRequest =
    (bool, flume::Sender<Result<(Vec<crate::persist::FileWriter>, u64), String>>);

/// Runs the stream's commands; acknowledges the offset applied once a
/// second and when asked. Between batches it starts the snapshots this
/// replica's own replicas ask for.
async fn apply(
    conn: &mut Connection,
    epoch: u64,
    mut offset: u64,
    timeout: Duration,
) -> Result<(), String> {
    let core = conn.core.clone();
    let snapshots = core.shared.repl.snapshots.1.clone();
    let mut requests = Vec::new();
    let mut batch = Vec::new();
    let mut last_ack: Option<Instant> = None;
    let mut last_io = Instant::now();
    loop {
        if !current(&core, epoch) || conn.handle.is_killed() {
            return Ok(());
        }
        // Between two batches: every shard is at `offset`.
        while let Ok(asked) = snapshots.try_recv() {
            snapshot_for_replica(&core, offset, asked).await;
        }
        // Input already here first (the stream may have come with the
        // snapshot's last bytes); commands before a protocol error still
        // apply, as in Redis.
        let mut broken = conn.parse_input(&mut requests).err();
        if requests.is_empty() && broken.is_none() {
            ack_when_due(conn, offset, &mut last_ack).await?;
            let mut asked = None;
            let read = conn.read_input();
            let tick = async {
                let request = async { asked = snapshots.recv_async().await.ok() };
                let tick = glommio::timer::sleep(Duration::from_millis(250));
                futures_lite::future::or(request, tick).await;
                Ok(None)
            };
            let input = futures_lite::future::or(read, tick).await?;
            if let Some(asked) = asked {
                snapshot_for_replica(&core, offset, asked).await;
                continue;
            }
            match input {
                Some(0) => return Err("the MASTER closed the connection".into()),
                Some(_) => last_io = Instant::now(),
                None if last_io.elapsed() > timeout => {
                    return Err("MASTER timeout: no data nor PING received...".into())
                }
                None => continue,
            }
            update(&core, epoch, |m| m.last_io = Some(last_io));
            broken = conn.parse_input(&mut requests).err();
        }
        for request in requests.drain(..) {
            let args = &request.args;
            if args.len() >= 2 && is(&args[0], "replconf") {
                run(conn, &mut batch, &mut offset).await;
                let (size, relayed) = as_sent(&core, std::slice::from_ref(&request));
                applied(&core, &mut offset, size, &relayed);
                if is(&args[1], "getack") {
                    ack(conn, offset).await?;
                }
                continue;
            }
            batch.push(request);
        }
        run(conn, &mut batch, &mut offset).await;
        if let Some(e) = broken {
            return Err(e);
        }
        ack_when_due(conn, offset, &mut last_ack).await?;
    }
}

/// Starts the snapshot one of this replica's replicas asked for, at the
/// offset every shard has applied.
async fn snapshot_for_replica(core: &Rc<Core>, offset: u64, (flows, reply): SnapshotRequest) {
    let started = crate::persist::start_for_replica(core, flows, |_| {}).await;
    let _ = reply.send(started.map(|w| (w, offset)).map_err(|e| e.text().to_string()));
}

/// Acknowledges the offset applied, at least once a second.
async fn ack_when_due(
    conn: &mut Connection,
    offset: u64,
    last: &mut Option<Instant>,
) -> Result<(), String> {
    if last.is_none_or(|t| t.elapsed() >= Duration::from_secs(1)) {
        *last = Some(Instant::now());
        ack(conn, offset).await?;
    }
    Ok(())
}

/// Runs the batched commands and counts them as applied.
async fn run(conn: &mut Connection, batch: &mut Vec<ringdb_protocol::Request>, offset: &mut u64) {
    if !batch.is_empty() {
        let (size, relayed) = as_sent(&conn.core, batch);
        crate::route::execute(conn, batch).await;
        conn.out.clear();
        batch.clear();
        applied(&conn.core, offset, size, &relayed);
    }
}

/// The bytes these commands took in the primary's stream, and the bytes
/// themselves when this replica has replicas of its own to relay them to
/// (the primary writes every command as a RESP array of bulk strings).
fn as_sent(core: &Core, requests: &[ringdb_protocol::Request]) -> (u64, Vec<u8>) {
    let size = requests.iter().map(|r| wire_len(&r.args)).sum();
    let mut relayed = Vec::new();
    if core.shared.repl.lock().backlog {
        for r in requests {
            let args: Vec<&[u8]> = r.args.iter().map(|a| &a[..]).collect();
            ringdb_protocol::encode_command(&mut relayed, &args);
        }
    }
    (size, relayed)
}

/// Counts `size` bytes of the stream as applied, and relays them to our
/// replicas (Redis's `replicationFeedStreamFromMasterStream`).
fn applied(core: &Core, offset: &mut u64, size: u64, relayed: &[u8]) {
    *offset += size;
    let mut st = core.shared.repl.lock();
    if st.backlog {
        if relayed.len() as u64 == size {
            st.stream.relay(relayed);
        } else {
            // The backlog was created while these ran: it starts after
            // them. A link that went on from before them must sync again
            // (a full sync's link has no position until its snapshot).
            st.stream = super::stream::Stream::new(core.shared.shards(), *offset);
            for link in st.links.iter_mut().filter(|l| l.sent.is_some_and(|s| s < *offset)) {
                link.cut();
            }
        }
        st.after_growth();
    }
    st.stream.offset = *offset;
}

/// `REPLCONF ACK <offset>` to the primary.
async fn ack(conn: &mut Connection, offset: u64) -> Result<(), String> {
    let mut out = Vec::new();
    ringdb_protocol::encode_command(
        &mut out,
        &[&b"REPLCONF"[..], b"ACK", offset.to_string().as_bytes()],
    );
    conn.out.extend_from_slice(&out);
    conn.flush().await
}
