//! Replication, as Redis 7.0 speaks it, in both directions.
//!
//! - [`stream`]: every shard's changes merged into one ordered stream with
//!   one offset, and its backlog.
//! - [`primary`]: serving replicas (SYNC, PSYNC, REPLCONF, the full sync
//!   from a no-stop snapshot cut at one point of the stream, then the
//!   stream).
//! - [`replica`]: following a primary (REPLICAOF / SLAVEOF), redis-server
//!   or ringdb; [`received`]: the snapshot it receives, in memory or in a
//!   file.
//!
//! [`Replication`] is shared by all cores. Shards take its lock once per
//! turn that changed something, and only while the backlog exists
//! (`feeding`); commands that read it (INFO, ROLE, WAIT) take it briefly.

pub mod primary;
pub mod received;
pub mod replica;
pub mod stream;

use crate::node::Core;
use ringdb_engine::persist::aof::{self, LogEvent};
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};
use std::sync::Mutex;
use std::time::Instant;
use stream::Stream;

/// A replica's state, as INFO names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LinkState {
    /// Waiting for its snapshot to start (`repl-diskless-sync-delay`).
    WaitBgsave,
    /// Receiving the snapshot.
    SendBulk,
    /// Receiving the stream.
    Online,
}

impl LinkState {
    pub fn name(self) -> &'static str {
        match self {
            LinkState::WaitBgsave => "wait_bgsave",
            LinkState::SendBulk => "send_bulk",
            LinkState::Online => "online",
        }
    }
}

/// A replica connected to this node.
#[derive(Debug)]
pub struct Link {
    /// Its client id.
    pub client: u64,
    pub ip: String,
    /// The port it listens on (REPLCONF listening-port).
    pub port: u16,
    pub state: LinkState,
    /// The stream offset sent so far (`None`: its full sync's cut is not
    /// taken yet).
    pub sent: Option<u64>,
    /// The cut its full sync waits for.
    pub cut: Option<u64>,
    /// The offset it acknowledged (REPLCONF ACK) and when (while it takes
    /// its snapshot: when it last took some of it).
    pub ack: u64,
    pub ack_at: Instant,
    /// Rung when the stream grows.
    pub wake: flume::Sender<()>,
    /// Cut off: it fell further behind than `client-output-buffer-limit
    /// replica` allows.
    pub dropped: bool,
    /// Since when it has been more than the soft limit behind.
    pub over_soft: Option<Instant>,
    /// Its connection's socket (open while the link is listed).
    pub fd: i32,
}

impl Link {
    /// Ends the link at once, whatever it waits for: a replica that stops
    /// reading leaves its sends pending forever otherwise.
    pub fn cut(&mut self) {
        if !self.dropped {
            self.dropped = true;
            // SAFETY: the link's connection removes the link (under the
            // same lock) before it closes this descriptor.
            unsafe { libc::shutdown(self.fd, libc::SHUT_RDWR) };
        }
        let _ = self.wake.try_send(());
    }
}

/// Where this node takes its data from.
#[derive(Clone, Debug)]
pub enum Role {
    Primary,
    /// Replica of `host:port`.
    Replica(replica::Master),
}

/// The node's replication state.
#[derive(Debug)]
pub struct State {
    pub replid: String,
    /// The replication id this node had before its last promotion, valid
    /// up to `second_offset` (PSYNC2).
    pub replid2: String,
    pub second_offset: i64,
    pub stream: Stream,
    /// The backlog exists (`repl_backlog_active`): shards feed the stream.
    pub backlog: bool,
    pub backlog_size: u64,
    /// `client-output-buffer-limit replica` (0: none).
    pub replica_limit: crate::push::BufferLimit,
    pub links: Vec<Link>,
    /// Flows of full syncs waiting for the replica's connections.
    pub flows: Vec<primary::Flow>,
    /// The replicas that joined the diskless sync waiting out its delay.
    pub forming: Option<Vec<primary::Member>>,
    next_cut: u64,
    /// Since when no replica is connected (`repl-backlog-ttl`).
    pub alone_since: Instant,
    pub role: Role,
    pub sync_full: u64,
    pub sync_partial_ok: u64,
    pub sync_partial_err: u64,
}

pub struct Replication {
    /// Shards hand their changes to the stream (mirrors `State::backlog`,
    /// read after every turn without the lock).
    pub feeding: AtomicBool,
    /// This node is a replica (mirrors `State::role`, for the router).
    pub replica: AtomicBool,
    /// `min-replicas-to-write` and `min-replicas-max-lag` are both set.
    pub min_replicas: AtomicBool,
    pub state: Mutex<State>,
    /// A replica's own replicas' full syncs, asking the link that applies
    /// the stream for a snapshot between two of its batches (the one point
    /// where every shard is at the same offset).
    pub(crate) snapshots:
        (flume::Sender<replica::SnapshotRequest>, flume::Receiver<replica::SnapshotRequest>),
}

/// 40 zeros: no second replication id.
pub const NO_REPLID: &str = "0000000000000000000000000000000000000000";

impl Replication {
    pub fn new(shards: usize, replid: String) -> Replication {
        Replication {
            feeding: AtomicBool::new(false),
            replica: AtomicBool::new(false),
            min_replicas: AtomicBool::new(false),
            snapshots: flume::unbounded(),
            state: Mutex::new(State {
                replid,
                replid2: NO_REPLID.into(),
                second_offset: -1,
                stream: Stream::new(shards, 0),
                backlog: false,
                backlog_size: 1 << 20,
                replica_limit: crate::push::BufferLimit {
                    hard: 256 << 20,
                    soft: 64 << 20,
                    soft_seconds: 60,
                },
                links: Vec::new(),
                flows: Vec::new(),
                forming: None,
                next_cut: 0,
                alone_since: Instant::now(),
                role: Role::Primary,
                sync_full: 0,
                sync_partial_ok: 0,
                sync_partial_err: 0,
            }),
        }
    }

    pub fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Hands a shard's changes (taken from its log after a turn) to the
    /// stream.
    pub fn feed(
        &self,
        shard: usize,
        events: &[LogEvent],
        keyspace: &ringdb_engine::keyspace::Keyspace,
    ) {
        let mut items = Vec::with_capacity(events.len());
        aof::feed(events, keyspace, ringdb_engine::shard::now_ms(), &mut items);
        let mut st = self.lock();
        if !st.backlog {
            return;
        }
        st.stream.push(shard, items);
        st.after_growth();
    }
}

/// Sends a command that changes no key to the replicas (PUBLISH, as
/// Redis's `forceCommandPropagation`), after what this core's shard has
/// changed so far.
pub fn propagate(core: &Core, args: &[&[u8]]) {
    let repl = &core.shared.repl;
    if repl.feeding.load(Relaxed) {
        core.flush_log();
        let mut st = repl.lock();
        if st.backlog {
            st.stream.command(args);
            st.after_growth();
        }
    }
}

impl State {
    /// Creates the backlog (the first replica, or a promotion): the stream
    /// goes on from `offset`. A primary's shards feed it; a replica's holds
    /// the stream it relays from its primary.
    pub fn create_backlog(&mut self, feeding: &AtomicBool) {
        if !self.backlog {
            self.stream = Stream::new(self.stream.shards(), self.stream.offset);
            self.backlog = true;
        }
        feeding.store(matches!(self.role, Role::Primary), Relaxed);
    }

    /// Ends every replica's link: they connect again and learn a new
    /// replication id, or sync again from a new dataset.
    pub fn drop_links(&mut self) {
        for l in &mut self.links {
            l.cut();
        }
    }

    /// After the stream grew: links whose cut is taken learn their offset,
    /// what nobody needs leaves the backlog, links are woken.
    pub fn after_growth(&mut self) {
        for link in &mut self.links {
            if let (None, Some(cut)) = (link.sent, link.cut) {
                if let Some(at) = self.stream.cut_offset(cut) {
                    link.sent = Some(at);
                }
            }
        }
        let offset = self.stream.offset;
        let mut keep = offset.saturating_sub(self.backlog_size);
        let mut waiting_cut = false;
        let limit = self.replica_limit;
        for link in &mut self.links {
            // A link left from an older history may be past `offset`.
            let behind = link.sent.map_or(0, |sent| offset.saturating_sub(sent) as usize);
            let over_soft = limit.soft > 0 && behind > limit.soft;
            if !over_soft {
                link.over_soft = None;
            } else if link.over_soft.is_none() {
                link.over_soft = Some(Instant::now());
            }
            let over = limit.hard > 0 && behind > limit.hard
                || link.over_soft.is_some_and(|t| t.elapsed().as_secs() >= limit.soft_seconds);
            match link.sent {
                Some(_) if over => {
                    if !link.dropped {
                        tracing::warn!(
                            "Client id={} scheduled to be closed ASAP for overcoming of output buffer limits.",
                            link.client
                        );
                    }
                    link.cut();
                }
                Some(sent) if !link.dropped => keep = keep.min(sent),
                Some(_) => {}
                None => waiting_cut = true,
            }
            let _ = link.wake.try_send(());
        }
        if !waiting_cut {
            self.stream.trim_to(keep);
        }
    }

    /// A new cut id for a full sync.
    pub fn next_cut(&mut self) -> u64 {
        self.next_cut += 1;
        self.next_cut
    }

    /// Replicas that acknowledged at least `offset`.
    pub fn acked(&self, offset: u64) -> usize {
        self.links.iter().filter(|l| l.state == LinkState::Online && l.ack >= offset).count()
    }

    /// Replicas online with an acknowledgement no older than `max_lag`
    /// seconds (`min-replicas-max-lag`).
    pub fn good_replicas(&self, max_lag: u64) -> usize {
        self.links
            .iter()
            .filter(|l| l.state == LinkState::Online && l.ack_at.elapsed().as_secs() <= max_lag)
            .count()
    }

    /// Starts a new history (promotion, a primary's new dataset): the old
    /// id stays valid up to the current offset for PSYNC2.
    pub fn shift_replid(&mut self, new: String) {
        self.replid2 = std::mem::replace(&mut self.replid, new);
        self.second_offset = self.stream.offset as i64 + 1;
    }

    /// Asks every replica for its offset now (WAIT).
    pub fn getack(&mut self) {
        if self.backlog && !self.links.is_empty() {
            self.stream.command(&[b"REPLCONF", b"GETACK", b"*"]);
            self.after_growth();
        }
    }
}

/// A new random replication id.
pub fn new_replid() -> String {
    let mut buf = [0u8; 8];
    let seed = std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .map(|_| u64::from_le_bytes(buf))
        .unwrap_or_else(|_| ringdb_engine::shard::now_ms() ^ std::process::id() as u64);
    crate::node::run_id(seed)
}

/// INFO's `# Replication` section, as Redis 7.0 writes it.
pub fn info(core: &Core, out: &mut String) {
    use std::fmt::Write;
    let config = core.config.borrow();
    let st = core.shared.repl.lock();
    let _ = write!(out, "# Replication\r\n");
    match &st.role {
        Role::Primary => out.push_str("role:master\r\n"),
        Role::Replica(m) => {
            let _ = write!(
                out,
                "role:slave\r\nmaster_host:{}\r\nmaster_port:{}\r\nmaster_link_status:{}\r\n\
                 master_last_io_seconds_ago:{}\r\nmaster_sync_in_progress:{}\r\n\
                 slave_read_repl_offset:{}\r\nslave_repl_offset:{}\r\n",
                m.host,
                m.port,
                if m.up { "up" } else { "down" },
                m.last_io.map_or(-1, |t| t.elapsed().as_secs() as i64),
                u8::from(m.syncing),
                st.stream.offset,
                st.stream.offset,
            );
            if m.syncing {
                let _ = write!(
                    out,
                    "master_sync_total_bytes:{}\r\nmaster_sync_read_bytes:{}\r\n\
                     master_sync_left_bytes:{}\r\nmaster_sync_perc:{:.2}\r\n\
                     master_sync_last_io_seconds_ago:{}\r\n",
                    m.transfer_size,
                    m.transfer_read,
                    m.transfer_size - m.transfer_read,
                    if m.transfer_size > 0 {
                        m.transfer_read as f64 * 100.0 / m.transfer_size as f64
                    } else {
                        0.0
                    },
                    m.last_io.map_or(0, |t| t.elapsed().as_secs()),
                );
            }
            if !m.up {
                let down = m.down_since.map_or(-1, |t| t.elapsed().as_secs() as i64);
                let _ = write!(out, "master_link_down_since_seconds:{down}\r\n");
            }
            let _ = write!(
                out,
                "slave_priority:{}\r\nslave_read_only:{}\r\nreplica_announced:1\r\n",
                config.int("replica-priority"),
                u8::from(config.get("replica-read-only") == Some("yes")),
            );
        }
    }
    let _ = write!(out, "connected_slaves:{}\r\n", st.links.len());
    let (to_write, max_lag) =
        (config.int("min-replicas-to-write"), config.int("min-replicas-max-lag"));
    if to_write > 0 && max_lag > 0 {
        let _ = write!(out, "min_slaves_good_slaves:{}\r\n", st.good_replicas(max_lag as u64));
    }
    for (i, l) in st.links.iter().enumerate() {
        let lag = if l.state == LinkState::Online { l.ack_at.elapsed().as_secs() } else { 0 };
        let _ = write!(
            out,
            "slave{i}:ip={},port={},state={},offset={},lag={lag}\r\n",
            l.ip,
            l.port,
            l.state.name(),
            l.ack
        );
    }
    // Bytes kept past the backlog's size for lagging replicas are theirs.
    let histlen = if st.backlog { st.stream.histlen().min(st.backlog_size) } else { 0 };
    let _ = write!(
        out,
        "master_failover_state:no-failover\r\nmaster_replid:{}\r\nmaster_replid2:{}\r\n\
         master_repl_offset:{}\r\nsecond_repl_offset:{}\r\nrepl_backlog_active:{}\r\n\
         repl_backlog_size:{}\r\nrepl_backlog_first_byte_offset:{}\r\nrepl_backlog_histlen:{}\r\n",
        st.replid,
        st.replid2,
        st.stream.offset,
        st.second_offset,
        u8::from(st.backlog),
        st.backlog_size,
        if st.backlog { st.stream.offset - histlen + 1 } else { 0 },
        histlen,
    );
}

/// ROLE: `master offset [[ip port offset] …]` or `slave host port state
/// offset`, as Redis 7.0.
pub fn role(conn: &mut crate::net::connection::Connection) {
    let st = conn.core.shared.repl.lock();
    let (offset, role) = (st.stream.offset, st.role.clone());
    let links: Vec<(String, u16, u64)> =
        st.links.iter().map(|l| (l.ip.clone(), l.port, l.ack)).collect();
    drop(st);
    let mut out = conn.reply();
    match role {
        Role::Primary => {
            out.array(3);
            out.bulk(b"master");
            out.int(offset as i64);
            out.array(links.len());
            for (ip, port, ack) in links {
                out.array(3);
                out.bulk(ip.as_bytes());
                out.bulk(port.to_string().as_bytes());
                out.bulk(ack.to_string().as_bytes());
            }
        }
        Role::Replica(m) => {
            out.array(5);
            out.bulk(b"slave");
            out.bulk(m.host.as_bytes());
            out.int(m.port as i64);
            out.bulk(m.phase.as_bytes());
            out.int(if m.up { offset as i64 } else { -1 });
        }
    }
}

/// Once a second on core 0 (Redis's `replicationCron`): pings replicas
/// every `repl-ping-replica-period` seconds, drops the backlog after
/// `repl-backlog-ttl` seconds without replicas, cuts replicas silent for
/// `repl-timeout`, and takes the settings that shape the backlog.
pub async fn cron(core: std::rc::Rc<Core>) {
    let mut ticks: u64 = 0;
    loop {
        glommio::timer::sleep(std::time::Duration::from_secs(1)).await;
        ticks += 1;
        let (period, ttl, timeout, size, limit) = {
            let c = core.config.borrow();
            (
                c.int("repl-ping-replica-period").max(1) as u64,
                c.int("repl-backlog-ttl") as u64,
                c.int("repl-timeout").max(1) as u64,
                c.int("repl-backlog-size").max(16 * 1024) as u64,
                c.buffer_limit("slave"),
            )
        };
        let repl = &core.shared.repl;
        let mut st = repl.lock();
        st.backlog_size = size;
        st.replica_limit = limit;
        if st.backlog {
            st.stream.release_stale();
            st.after_growth();
        }
        let primary = matches!(st.role, Role::Primary);
        if st.links.is_empty() {
            if primary && st.backlog && ttl > 0 && st.alone_since.elapsed().as_secs() >= ttl {
                st.backlog = false;
                repl.feeding.store(false, Relaxed);
                tracing::info!(
                    "Replication backlog freed after {ttl} seconds without connected replicas."
                );
            }
        } else {
            st.alone_since = Instant::now();
            if ticks.is_multiple_of(period) && primary {
                st.stream.command(&[b"PING"]);
                st.after_growth();
            }
            for l in st.links.iter_mut() {
                let what = match l.state {
                    LinkState::Online => "streaming sync",
                    LinkState::SendBulk => "full sync",
                    LinkState::WaitBgsave => continue,
                };
                if l.ack_at.elapsed().as_secs() > timeout {
                    tracing::warn!("Disconnecting timedout replica ({what}): {}:{}", l.ip, l.port);
                    l.cut();
                }
            }
        }
    }
}

/// The stream offset WAIT waits for: everything written so far. WAIT on a
/// replica is an error, as in Redis.
pub fn wait_target(repl: &Replication) -> Result<u64, ringdb_engine::command::CmdError> {
    let st = repl.lock();
    if let Role::Replica(_) = st.role {
        return Err(ringdb_engine::command::CmdError::new("ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a replica is configured to be writable (which is not the default) writes to replicas are just local and are not propagated."));
    }
    Ok(st.stream.offset)
}

/// Redis's refusals of a command by replication state (`processCommand`):
/// a write on a read-only replica (`-READONLY`), a command that needs
/// fresh data while the link is down and `replica-serve-stale-data` is no
/// (`-MASTERDOWN`), a write on a primary with too few good replicas
/// (`-NOREPLICAS`). One atomic load for a primary without
/// `min-replicas-to-write`.
pub fn gate(
    conn: &crate::net::connection::Connection,
    reg: &ringdb_engine::command::Registered,
) -> Result<(), ringdb_engine::command::CmdError> {
    use ringdb_engine::command::spec::flags;
    use ringdb_engine::command::CmdError;
    let repl = &conn.core.shared.repl;
    let replica = repl.replica.load(Relaxed);
    if !replica && !repl.min_replicas.load(Relaxed) || conn.state.master {
        return Ok(());
    }
    let writes = reg.spec.has(flags::WRITE)
        || matches!(
            reg.spec.exec,
            ringdb_engine::command::Exec::Node(ringdb_engine::command::NodeCommand::Exec)
        ) && conn
            .state
            .multi
            .as_ref()
            .is_some_and(|m| m.queued.iter().any(|q| q.reg.spec.has(flags::WRITE)));
    let config = conn.core.config.borrow();
    if replica {
        if writes && config.get("replica-read-only") == Some("yes") {
            return Err(CmdError::new("READONLY You can't write against a read only replica."));
        }
        let up = matches!(&repl.lock().role, Role::Replica(m) if m.up);
        if !up
            && !reg.spec.has(flags::STALE)
            && config.get("replica-serve-stale-data") == Some("no")
        {
            return Err(CmdError::new(
                "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
            ));
        }
        return Ok(());
    }
    let (needed, max_lag) =
        (config.int("min-replicas-to-write"), config.int("min-replicas-max-lag"));
    if writes
        && needed > 0
        && max_lag > 0
        && (repl.lock().good_replicas(max_lag as u64) as i64) < needed
    {
        return Err(CmdError::new("NOREPLICAS Not enough good replicas to write."));
    }
    Ok(())
}
