//! Serving replicas (Redis 7.0's `replication.c`, primary side): REPLCONF,
//! SYNC and PSYNC, the full sync and the stream.
//!
//! A replica's connection stays in PSYNC (or SYNC) for as long as it is a
//! replica: the command writes `+FULLRESYNC <replid> <offset>` (or
//! `+CONTINUE`), then the snapshot and the stream, and reads the replica's
//! `REPLCONF ACK`s, until the link ends.
//!
//! The full sync is the no-stop snapshot of every shard (no fork, the
//! shards keep serving), cut at one point of the stream: each shard, at
//! the instant its snapshot starts, hands over its changes so far and marks
//! the cut (see [`super::stream`]), all under one lock of every shard. It
//! goes out diskless (`$EOF:<mark>`, the default, when the replica
//! announced `capa eof`) or through a file (`$<len>`). Replicas that ask
//! for a diskless sync while another waits out `repl-diskless-sync-delay`
//! share its snapshot, as in Redis.
//!
//! Between ringdb nodes with as many shards, a diskless full sync runs one
//! flow per shard in parallel: the replica says `REPLCONF ringdb-shards N`
//! in its handshake; the primary answers PSYNC with `+FULLRESYNC` and
//! `$FLOWS:<token>` instead of the RDB; the replica opens one connection
//! per shard, from that shard's core, each saying `REPLCONF ringdb-flow
//! <i> ringdb-sync <token>`, and each receives shard i's snapshot as an RDB
//! of its own (`$EOF:` form) that its shard i loads alone. The stream then
//! follows on the main link as with any replica, so a partial resync works
//! the same way on both paths.

use super::{Link, LinkState, Role};
use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::args::is;
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_protocol::Request;
use std::io::Write;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};
use tracing::{info, warn};

/// What a replica told us with REPLCONF before PSYNC.
#[derive(Clone, Debug, Default)]
pub struct Hello {
    pub port: u16,
    pub ip: Option<String>,
    /// It reads the diskless form (`capa eof`).
    pub eof: bool,
    /// It understands `+CONTINUE <replid>` (`capa psync2`).
    pub psync2: bool,
    /// A ringdb replica with this many shards (`REPLCONF ringdb-shards`):
    /// it takes a full sync as one flow per shard.
    pub shards: Option<usize>,
    /// This connection asks for one flow of a full sync (`REPLCONF
    /// ringdb-flow <shard> ringdb-sync <token>`).
    pub flow: Option<(usize, String)>,
}

/// A flow of a full sync waiting for its connection from the replica.
pub struct Flow {
    pub token: String,
    pub shard: usize,
    /// The client id of the replica's main link (its progress counts there).
    link: u64,
    writer: crate::persist::FileWriter,
    done: flume::Sender<Result<(), String>>,
}

impl std::fmt::Debug for Flow {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Flow({}, shard {})", self.token, self.shard)
    }
}

/// Bytes of stream a link takes from the backlog at a time.
const READ_CHUNK: usize = 1 << 20;
/// Unsent bytes past which a link waits for the socket before taking more.
const UNSENT_MAX: usize = 8 << 20;

/// REPLCONF option value … (Redis's `replconfCommand`).
pub async fn replconf(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if args.len().is_multiple_of(2) {
        return Err(CmdError::new("ERR syntax error"));
    }
    let hello = conn.state.replica_hello.get_or_insert_with(Box::default);
    for pair in args[1..].chunks(2) {
        let (option, value) = (&pair[0], &pair[1]);
        if is(option, "listening-port") {
            let port = ringdb_engine::command::args::int(value)?;
            hello.port = port.clamp(0, 65535) as u16;
        } else if is(option, "ip-address") {
            let ip = String::from_utf8_lossy(value).into_owned();
            if ip.len() > 46 {
                return Err(CmdError::owned(format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    ip.len()
                )));
            }
            hello.ip = Some(ip);
        } else if is(option, "capa") {
            if is(value, "eof") {
                hello.eof = true;
            } else if is(value, "psync2") {
                hello.psync2 = true;
            }
        } else if is(option, "ack") || is(option, "getack") {
            // ACK is read by the link itself; GETACK is for a replica's link
            // to its primary. Neither gets a reply here.
            return Ok(());
        } else if is(option, "rdb-only") {
            // Accepted: the snapshot is sent and the stream follows anyway.
        } else if is(option, "ringdb-shards") {
            let shards = ringdb_engine::command::args::int(value)?;
            hello.shards = usize::try_from(shards).ok();
        } else if is(option, "ringdb-flow") {
            let shard = ringdb_engine::command::args::int(value)?;
            let shard = usize::try_from(shard).map_err(|_| CmdError::new("ERR invalid flow"))?;
            let token = hello.flow.take().map(|f| f.1).unwrap_or_default();
            hello.flow = Some((shard, token));
        } else if is(option, "ringdb-sync") {
            let token = String::from_utf8_lossy(value).into_owned();
            let shard = hello.flow.take().map_or(usize::MAX, |f| f.0);
            hello.flow = Some((shard, token));
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unrecognized REPLCONF option: {}",
                String::from_utf8_lossy(option)
            )));
        }
    }
    if let Some((shard, token)) = hello.flow.take() {
        return serve_flow(conn, shard, &token).await;
    }
    conn.reply().ok();
    Ok(())
}

/// Sends one flow of a full sync: shard `shard`'s snapshot, then closes.
async fn serve_flow(conn: &mut Connection, shard: usize, token: &str) -> CmdResult {
    let flow = {
        let mut st = conn.core.shared.repl.lock();
        let at = st.flows.iter().position(|f| f.shard == shard && f.token == token);
        at.map(|at| st.flows.swap_remove(at))
    };
    let Some(Flow { writer, done, link, .. }) = flow else {
        return Err(CmdError::new("ERR no such replication flow"));
    };
    conn.handle.view.borrow_mut().link = crate::net::clients::LinkKind::Replica;
    let result = send_snapshot(conn, writer, true, link).await;
    if let Err(e) = &result {
        warn!("Flow {shard} of a full sync to {} failed: {e}", conn.handle.addr);
    }
    let _ = done.send(result);
    conn.state.close_after_reply = true;
    Ok(())
}

/// SYNC and PSYNC replid offset: the connection becomes a replica link
/// and stays in this command until the link ends.
pub async fn sync(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let repl = conn.core.shared.repl.clone();
    if let Role::Replica(m) = &repl.lock().role {
        // A replica serves replicas of its own once it has its primary's
        // data, relaying the stream it applies.
        if !m.up {
            return Err(CmdError::new(
                "NOMASTERLINK Can't SYNC while not connected with my master",
            ));
        }
    }
    if !conn.out.is_empty() {
        return Err(CmdError::new("ERR SYNC and PSYNC are invalid with pending output"));
    }
    let psync = args.len() == 3;
    let hello = conn.state.replica_hello.as_deref().cloned().unwrap_or_default();
    let ip = hello.ip.clone().unwrap_or_else(|| {
        conn.handle
            .addr
            .rsplit_once(':')
            .map(|(ip, _)| ip.trim_matches(['[', ']']).to_string())
            .unwrap_or_default()
    });
    let (wake, woken) = flume::bounded(1);
    let client = conn.state.id;
    let partial = {
        let mut st = repl.lock();
        let partial = if psync { try_partial(&mut st, &args[1], &args[2]) } else { None };
        let primary = matches!(st.role, Role::Primary);
        if partial.is_none() && st.links.is_empty() && !st.backlog && primary {
            // A new history starts with the backlog (Redis's syncCommand).
            st.replid = super::new_replid();
            st.replid2 = super::NO_REPLID.into();
            st.second_offset = -1;
        }
        st.create_backlog(&repl.feeding);
        st.links.push(Link {
            client,
            ip,
            port: hello.port,
            state: if partial.is_some() { LinkState::Online } else { LinkState::WaitBgsave },
            sent: partial,
            cut: None,
            ack: 0,
            ack_at: Instant::now(),
            wake,
            dropped: false,
            over_soft: None,
            fd: conn.handle.fd,
        });
        if partial.is_some() {
            st.sync_partial_ok += 1;
        } else {
            st.sync_full += 1;
        }
        partial
    };
    {
        let mut view = conn.handle.view.borrow_mut();
        view.link = crate::net::clients::LinkKind::Replica;
    }
    let result = match partial {
        Some(pos) => {
            let replid = repl.lock().replid.clone();
            info!(
                "Partial resynchronization request from {} accepted. Sending {} bytes of backlog starting from offset {}.",
                conn.handle.addr,
                repl.lock().stream.offset - pos,
                pos + 1
            );
            let line = if hello.psync2 {
                format!("+CONTINUE {replid}\r\n")
            } else {
                "+CONTINUE\r\n".into()
            };
            conn.out.extend_from_slice(line.as_bytes());
            serve(conn, pos, &woken, false).await
        }
        None => match full_sync(conn, psync, &hello).await {
            // After a diskless snapshot the stream starts at the replica's
            // first ACK: it cannot tell the stream's bytes from the end of
            // the snapshot before it has found the end mark (Redis's
            // `repl_start_cmd_stream_on_ack`).
            Ok((pos, diskless)) => serve(conn, pos, &woken, diskless).await,
            Err(e) => Err(e),
        },
    };
    if let Err(e) = &result {
        warn!("Connection with replica {} lost: {e}", conn.handle.addr);
    }
    let mut st = repl.lock();
    st.links.retain(|l| l.client != client);
    if st.links.is_empty() {
        st.alone_since = Instant::now();
    }
    drop(st);
    conn.state.close_after_reply = true;
    Ok(())
}

/// PSYNC's offer: the stream position to go on from, when the backlog has
/// it (Redis's `masterTryPartialResynchronization`).
fn try_partial(st: &mut super::State, replid: &[u8], offset: &[u8]) -> Option<u64> {
    let replid = String::from_utf8_lossy(replid);
    let offset: i64 = std::str::from_utf8(offset).ok()?.parse().ok()?;
    let known = replid == st.replid || (replid == st.replid2 && offset <= st.second_offset);
    let pos = (offset - 1).max(0) as u64;
    if known && st.backlog && offset >= 1 && st.stream.has_within(pos, st.backlog_size) {
        return Some(pos);
    }
    if replid != "?" {
        st.sync_partial_err += 1;
        if !known {
            info!("Partial resynchronization not accepted: Replication ID mismatch (Replica asked for '{replid}', my replication IDs are '{}' and '{}')", st.replid, st.replid2);
        } else {
            info!("Unable to partial resync with replica for lack of backlog (Replica request was: {offset}).");
        }
    }
    None
}

/// The full sync: waits `repl-diskless-sync-delay` (newlines keep the
/// link alive), cuts the stream at a snapshot of every shard, answers
/// `+FULLRESYNC`, sends the snapshot. Returns the stream position the
/// replica goes on from.
async fn full_sync(
    conn: &mut Connection,
    psync: bool,
    hello: &Hello,
) -> Result<(u64, bool), String> {
    let core = conn.core.clone();
    let repl = core.shared.repl.clone();
    let (diskless, delay) = {
        let c = core.config.borrow();
        (c.get("repl-diskless-sync") == Some("yes"), c.int("repl-diskless-sync-delay"))
    };
    let diskless = diskless && hello.eof;
    let flows = diskless && hello.shards == Some(core.shared.shards());
    let chained = matches!(repl.lock().role, Role::Replica(_));
    // Diskless syncs of one RDB share the snapshot of the first one that
    // waits out the delay (Redis's replicas that ask within it).
    let shared = diskless && !flows && !chained && delay > 0;
    let me = conn.state.id;
    let joined = if shared {
        let mut st = repl.lock();
        match st.forming.as_mut() {
            Some(forming) => {
                let (start, started) = flume::bounded(1);
                forming.push(Member { client: me, start });
                Some(started)
            }
            None => {
                st.forming = Some(Vec::new());
                None
            }
        }
    } else {
        None
    };
    if let Some(started) = joined {
        return join_sync(conn, psync, started).await;
    }
    let mut members = Joined(Vec::new());
    if diskless && delay > 0 {
        let waited = async {
            for _ in 0..delay {
                keepalive(conn).await?;
                glommio::timer::sleep(Duration::from_secs(1)).await;
            }
            Ok::<(), String>(())
        }
        .await;
        if shared {
            members.0 = repl.lock().forming.take().unwrap_or_default();
        }
        waited?;
    }
    // One snapshot at a time (BGSAVE, a log rewrite, another replica's).
    while core.shared.persist.snapshot_busy.swap(true, Relaxed) {
        keepalive(conn).await?;
        glommio::timer::sleep(Duration::from_millis(100)).await;
    }
    let started = if chained {
        from_applied_stream(conn, flows).await
    } else {
        let clients: Vec<u64> = members.0.iter().map(|m| m.client).collect();
        cut_the_stream(conn, flows, &clients).await
    };
    let (writers, pos) = match started {
        Ok(started) => started,
        Err(e) => {
            crate::persist::release(&core);
            return Err(e);
        }
    };
    let replid = repl.lock().replid.clone();
    info!(
        "Starting BGSAVE for SYNC with target: {} (replica {}), stream offset {pos}",
        if diskless { "replicas sockets" } else { "disk" },
        conn.handle.addr
    );
    if psync {
        conn.out.extend_from_slice(format!("+FULLRESYNC {replid} {pos}\r\n").as_bytes());
    }
    set_state(conn, LinkState::SendBulk);
    let result = if flows {
        send_flows(conn, writers).await
    } else if let Some(writer) = writers.into_iter().next() {
        let (tx, pieces) = flume::bounded(crate::persist::IN_FLIGHT);
        let mut outs = vec![tx];
        for m in std::mem::take(&mut members.0) {
            let (tx, theirs) = flume::bounded(crate::persist::IN_FLIGHT);
            outs.push(tx);
            let _ = m.start.send(Ok((pos, theirs)));
        }
        match write_snapshot(conn, writer, diskless, outs) {
            Ok(()) => relay_snapshot(conn, &pieces, conn.state.id).await,
            Err(e) => Err(e),
        }
    } else {
        Err("no snapshot".to_string())
    };
    crate::persist::release(&core);
    result?;
    info!("Synchronization with replica {} succeeded", conn.handle.addr);
    Ok((pos, diskless))
}

/// A replica that joined a diskless sync waiting out its delay: the
/// offset of the snapshot it shares, and its pieces.
pub struct Member {
    client: u64,
    start: flume::Sender<Result<(u64, flume::Receiver<Piece>), String>>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Member({})", self.client)
    }
}

/// The replicas that joined a sync; those still here when it ends without
/// starting its snapshot are told so.
struct Joined(Vec<Member>);

impl Drop for Joined {
    fn drop(&mut self) {
        for m in self.0.drain(..) {
            let _ = m.start.send(Err("the sync it joined ended".into()));
        }
    }
}

/// Takes the snapshot of the diskless sync this replica joined, once its
/// first replica has started it.
async fn join_sync(
    conn: &mut Connection,
    psync: bool,
    started: flume::Receiver<Result<(u64, flume::Receiver<Piece>), String>>,
) -> Result<(u64, bool), String> {
    let (pos, pieces) = keep_alive_until(conn, &started, "the sync it joined ended").await?;
    let replid = conn.core.shared.repl.lock().replid.clone();
    info!(
        "Replica {} shares the diskless sync started for another, stream offset {pos}",
        conn.handle.addr
    );
    if psync {
        conn.out.extend_from_slice(format!("+FULLRESYNC {replid} {pos}\r\n").as_bytes());
    }
    set_state(conn, LinkState::SendBulk);
    relay_snapshot(conn, &pieces, conn.state.id).await?;
    info!("Synchronization with replica {} succeeded", conn.handle.addr);
    Ok((pos, true))
}

/// A replica's snapshot for its own replica: taken by the link that
/// applies the primary's stream, between two batches, at the offset
/// applied.
async fn from_applied_stream(
    conn: &mut Connection,
    flows: bool,
) -> Result<(Vec<crate::persist::FileWriter>, u64), String> {
    let repl = conn.core.shared.repl.clone();
    let (reply, started) = flume::bounded(1);
    let _ = repl.snapshots.0.send((flows, reply));
    let (writers, pos) = keep_alive_until(conn, &started, "the link to the primary ended").await?;
    let mut st = repl.lock();
    if let Some(l) = st.links.iter_mut().find(|l| l.client == conn.state.id) {
        l.sent = Some(pos);
    }
    Ok((writers, pos))
}

/// A primary's snapshot for a replica (and the `sharing` ones), at a cut
/// of the stream.
async fn cut_the_stream(
    conn: &mut Connection,
    flows: bool,
    sharing: &[u64],
) -> Result<(Vec<crate::persist::FileWriter>, u64), String> {
    let core = conn.core.clone();
    let repl = core.shared.repl.clone();
    let client = conn.state.id;
    let cut = {
        let mut st = repl.lock();
        let cut = st.next_cut();
        for l in st.links.iter_mut().filter(|l| l.client == client || sharing.contains(&l.client)) {
            l.cut = Some(cut);
        }
        cut
    };
    let at_point = move |core: &Rc<crate::node::Core>| {
        // The changes before the point go out before the cut; the shard's
        // log records from here on for the stream.
        core.flush_log();
        let mut shard = core.shard.borrow_mut();
        shard.state.funnel.log.get_or_insert_with(Default::default).as_is = true;
        let mut st = core.shared.repl.lock();
        st.stream.cut(core.id.index(), cut);
        st.after_growth();
    };
    info!("Full sync of replica {}: cut {cut}", conn.handle.addr);
    let writers = crate::persist::start_for_replica(&core, flows, at_point)
        .await
        .map_err(|e| e.text().to_string())?;
    // Every shard has marked the cut: it is taken once what each queued
    // before it has gone out (at once, unless a transaction's part waits).
    let mut said = Instant::now();
    let pos = loop {
        let sent = repl.lock().links.iter().find(|l| l.client == client).and_then(|l| l.sent);
        if let Some(pos) = sent {
            break pos;
        }
        if said.elapsed() > Duration::from_secs(1) {
            said = Instant::now();
            warn!("The stream's cut waits: {}", repl.lock().stream.heads());
        }
        glommio::timer::sleep(Duration::from_millis(1)).await;
    };
    Ok((writers, pos))
}

/// Offers the snapshot as one flow per shard (`$FLOWS:<token>`) and waits
/// until the replica has taken every flow whole. A flow not asked for
/// within `repl-timeout` ends the sync.
async fn send_flows(
    conn: &mut Connection,
    writers: Vec<crate::persist::FileWriter>,
) -> Result<(), String> {
    let repl = conn.core.shared.repl.clone();
    let timeout = Duration::from_secs(conn.core.config.borrow().int("repl-timeout").max(1) as u64);
    let token = super::new_replid();
    let (done, finished) = flume::unbounded();
    let flows = writers.len();
    let link = conn.state.id;
    repl.lock().flows.extend(writers.into_iter().enumerate().map(|(shard, writer)| Flow {
        token: token.clone(),
        shard,
        link,
        writer,
        done: done.clone(),
    }));
    drop(done);
    conn.out.extend_from_slice(format!("$FLOWS:{token}\r\n").as_bytes());
    let result = async {
        conn.flush().await?;
        let started = Instant::now();
        let mut ended = 0;
        while ended < flows {
            let tick = async {
                glommio::timer::sleep(Duration::from_millis(100)).await;
                None
            };
            match futures_lite::future::or(async { Some(finished.recv_async().await) }, tick).await
            {
                Some(Ok(result)) => {
                    result?;
                    ended += 1;
                }
                Some(Err(_)) => return Err("a flow ended without its snapshot".to_string()),
                None if conn.handle.is_killed() => return Err("killed".to_string()),
                None => {
                    let st = repl.lock();
                    if st.links.iter().any(|l| l.client == link && l.dropped) {
                        return Err("cut off".to_string());
                    }
                    let waiting = st.flows.iter().any(|f| f.token == token);
                    if waiting && started.elapsed() > timeout {
                        return Err("the replica did not ask for every flow".to_string());
                    }
                }
            }
        }
        Ok(())
    }
    .await;
    // Flows never asked for end their shards' snapshots.
    repl.lock().flows.retain(|f| f.token != token);
    result
}

fn set_state(conn: &Connection, state: LinkState) {
    let mut st = conn.core.shared.repl.lock();
    if let Some(l) = st.links.iter_mut().find(|l| l.client == conn.state.id) {
        l.state = state;
        l.ack_at = Instant::now();
    }
}

/// Waits for what `started` brings (or `ended` when it never will),
/// writing a newline to the replica every second meanwhile. A cut link
/// ends the wait: its socket is shut down.
async fn keep_alive_until<T>(
    conn: &mut Connection,
    started: &flume::Receiver<Result<T, String>>,
    ended: &str,
) -> Result<T, String> {
    loop {
        let tick = async {
            glommio::timer::sleep(Duration::from_secs(1)).await;
            None
        };
        match futures_lite::future::or(async { Some(started.recv_async().await) }, tick).await {
            Some(Ok(value)) => return value,
            Some(Err(_)) => return Err(ended.into()),
            None => keepalive(conn).await?,
        }
    }
}

/// A newline: keeps a replica waiting for its snapshot from timing out.
async fn keepalive(conn: &mut Connection) -> Result<(), String> {
    if conn.handle.is_killed() {
        return Err("killed".into());
    }
    conn.out.extend_from_slice(b"\n");
    conn.flush().await
}

/// What the snapshot's writer thread hands the replicas' connections.
enum Piece {
    Bytes(Bytes),
    /// The snapshot is whole, or why not.
    End(Result<(), String>),
}

/// Bytes of the snapshot on their way from the writer thread, to every
/// replica that takes this snapshot.
struct Pieces {
    outs: Vec<flume::Sender<Piece>>,
    buf: Vec<u8>,
}

impl Pieces {
    /// Sends to every replica still there; an error once none is.
    fn send(&mut self, piece: Piece) -> std::io::Result<()> {
        match piece {
            Piece::End(result) => {
                for out in &self.outs {
                    let _ = out.send(Piece::End(result.clone()));
                }
            }
            Piece::Bytes(bytes) => {
                self.outs.retain(|out| out.send(Piece::Bytes(bytes.clone())).is_ok());
                if self.outs.is_empty() {
                    return Err(std::io::Error::other("the replicas are gone"));
                }
            }
        }
        Ok(())
    }
}

impl Write for Pieces {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(bytes);
        if self.buf.len() >= 256 * 1024 {
            self.flush()?;
        }
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if !self.buf.is_empty() {
            let piece = Bytes::from(std::mem::take(&mut self.buf));
            self.send(Piece::Bytes(piece))?;
        }
        Ok(())
    }
}

/// Writes the snapshot, framed for the replica, on a thread, and hands it
/// to `outs` as it comes. Diskless: `$EOF:<mark>`, the RDB, the mark.
/// Otherwise the RDB goes to a file first for its length (`$<len>`).
fn write_snapshot(
    conn: &Connection,
    writer: crate::persist::FileWriter,
    diskless: bool,
    outs: Vec<flume::Sender<Piece>>,
) -> Result<(), String> {
    let dir = conn.core.config.borrow().get("dir").unwrap_or("./").to_string();
    let name = format!("temp-repl-{}-{}.rdb", std::process::id(), conn.state.id);
    std::thread::Builder::new()
        .name("ringdb-repl-sync".into())
        .spawn(move || {
            let mut out = Pieces { outs, buf: Vec::new() };
            let written = if diskless {
                let mark = super::new_replid();
                (|| {
                    write!(out, "$EOF:{mark}\r\n")?;
                    writer.write_to(&mut out)?;
                    out.write_all(mark.as_bytes())?;
                    out.flush()
                })()
            } else {
                let path = std::path::Path::new(&dir).join(name);
                let sent = (|| {
                    let mut file = std::io::BufWriter::new(std::fs::File::create(&path)?);
                    let len = writer.write_to(&mut file)?;
                    file.flush()?;
                    drop(file);
                    write!(out, "${len}\r\n")?;
                    let mut file = std::fs::File::open(&path)?;
                    std::io::copy(&mut file, &mut out)?;
                    out.flush()
                })();
                let _ = std::fs::remove_file(&path);
                sent
            };
            let _ = out.send(Piece::End(written.map_err(|e| e.to_string())));
        })
        .map_err(|e| e.to_string())?;
    Ok(())
}

/// Sends a flow's snapshot, the only one that takes it; `link` is the
/// replica's main link.
async fn send_snapshot(
    conn: &mut Connection,
    writer: crate::persist::FileWriter,
    diskless: bool,
    link: u64,
) -> Result<(), String> {
    let (tx, pieces) = flume::bounded(crate::persist::IN_FLIGHT);
    write_snapshot(conn, writer, diskless, vec![tx])?;
    relay_snapshot(conn, &pieces, link).await
}

/// Writes the snapshot's pieces to this replica as they come; each one
/// taken is progress of the replica's main link `link` (`repl-timeout`
/// during a full sync).
async fn relay_snapshot(
    conn: &mut Connection,
    pieces: &flume::Receiver<Piece>,
    link: u64,
) -> Result<(), String> {
    loop {
        let piece = pieces.recv_async().await.map_err(|_| "the snapshot writer stopped")?;
        let bytes = match piece {
            Piece::Bytes(bytes) => bytes,
            Piece::End(result) => return result,
        };
        if conn.handle.is_killed() {
            return Err("killed".into());
        }
        conn.out.extend_from_slice(&bytes);
        conn.flush().await?;
        if let Some(l) = conn.core.shared.repl.lock().links.iter_mut().find(|l| l.client == link) {
            l.ack_at = Instant::now();
        }
        while conn.unsent() > UNSENT_MAX {
            glommio::timer::sleep(Duration::from_millis(1)).await;
            if conn.handle.is_killed() {
                return Err("killed".into());
            }
        }
    }
}

/// Streams to the replica from `pos` on (once it has acknowledged, when
/// `wait_ack`), and reads its acknowledgements, until the link ends.
async fn serve(
    conn: &mut Connection,
    mut pos: u64,
    woken: &flume::Receiver<()>,
    mut wait_ack: bool,
) -> Result<(), String> {
    set_state(conn, LinkState::Online);
    let repl = conn.core.shared.repl.clone();
    let client = conn.state.id;
    let mut chunk = Vec::new();
    let mut requests: Vec<Request> = Vec::new();
    loop {
        chunk.clear();
        {
            let mut st = repl.lock();
            let Some(link) = st.links.iter_mut().find(|l| l.client == client) else {
                return Err("unregistered".into());
            };
            if link.dropped {
                return Err("output buffer limit or timeout".into());
            }
            if wait_ack {
                // Loading the snapshot: not silent for `repl-timeout`.
                link.ack_at = Instant::now();
            }
            link.sent = Some(pos);
            if !st.stream.has(pos) {
                return Err("the backlog no longer has the replica's offset".into());
            }
            if !wait_ack {
                st.stream.read(pos, READ_CHUNK, &mut chunk);
            }
        }
        if !chunk.is_empty() {
            pos += chunk.len() as u64;
            conn.out.extend_from_slice(&chunk);
        }
        if !conn.out.is_empty() {
            conn.flush().await?;
        }
        if conn.handle.is_killed() {
            return Err("killed".into());
        }
        let more = !chunk.is_empty() && conn.unsent() < UNSENT_MAX;
        // Wait for the stream to grow or the replica to say something (when
        // there is more to send, only look at what the replica said).
        let input = {
            let read = conn.read_input();
            let wait = async {
                if !more {
                    let _ = futures_lite::future::or(
                        async {
                            let _ = woken.recv_async().await;
                        },
                        glommio::timer::sleep(Duration::from_millis(100)),
                    )
                    .await;
                }
                Ok(None)
            };
            futures_lite::future::or(read, wait).await?
        };
        if input == Some(0) {
            return Err("closed by the replica".into());
        }
        if input.is_some() {
            conn.parse_input(&mut requests)?;
            for request in requests.drain(..) {
                let args = &request.args;
                if args.len() >= 3 && is(&args[0], "replconf") && is(&args[1], "ack") {
                    let offset =
                        std::str::from_utf8(&args[2]).ok().and_then(|s| s.parse::<u64>().ok());
                    if let Some(offset) = offset {
                        wait_ack = false;
                        let mut st = repl.lock();
                        if let Some(l) = st.links.iter_mut().find(|l| l.client == client) {
                            l.ack = l.ack.max(offset);
                            l.ack_at = Instant::now();
                        }
                    }
                }
            }
        }
    }
}
