//! MIGRATE, on the connection's core: its keys are locked and dumped on
//! their shards, sent to the target instance over a cached connection
//! (glommio's `TcpStream`, every step bounded by the command's timeout),
//! and, unless COPY, deleted where the target acknowledged them. Replies,
//! retries and the connection cache follow Redis 7.0's `migrateCommand`,
//! `migrateGetSocket` and `migrateCloseTimedoutSockets` (`cluster.c`).
//!
//! The keys stay locked from the dump to the deletion, so no other client
//! sees or changes them half-migrated (Redis blocks the whole server for the
//! command instead).

use crate::aof::{log_part, PartLog};
use crate::mesh::NO_ANSWER;
use crate::net::connection::Connection;
use crate::node::Core;
use crate::route::cross::{acquire_in_order, transaction_id, AcquireStep};
use bytes::Bytes;
use futures_lite::{AsyncReadExt, AsyncWriteExt};
use glommio::net::TcpStream;
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_engine::families::migrate::{
    op_delete_migrated, op_dump_keys, request, Dumped, MigrateArgs,
};
use ringdb_engine::locks::{fingerprint, LockMode, LockSet};
use ringdb_engine::shard::now_ms;
use ringdb_engine::ShardId;
use std::collections::{BTreeMap, HashMap};
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::time::{Duration, Instant};

/// Redis's `MIGRATE_SOCKET_CACHE_ITEMS`, per core here.
const CACHE_ITEMS: usize = 64;
/// Redis's `MIGRATE_SOCKET_CACHE_TTL`: an idle cached connection is closed
/// after this long.
const CACHE_TTL: Duration = Duration::from_secs(10);
/// Redis writes the request in pieces of this size, each within the timeout.
const WRITE_CHUNK: usize = 64 * 1024;
/// Redis reads each reply line into a 1024-byte buffer: at most 1023 bytes
/// of a line count, the rest is read as the next line. Also what bounds
/// what a target can make us buffer.
const MAX_LINE: usize = 1023;
const READ_CHUNK: usize = 4096;

const CONNECT_ERROR: CmdError = CmdError::new("IOERR error or timeout connecting to the client");
const WRITE_ERROR: CmdError = CmdError::new("IOERR error or timeout writing to target instance");
const READ_ERROR: CmdError = CmdError::new("IOERR error or timeout reading to target instance");

/// A connection to a target instance.
struct Link {
    stream: TcpStream,
    /// Bytes read past the last reply line (bounded by [`MAX_LINE`] and
    /// one read): kept with the connection, as the kernel would keep them
    /// for Redis.
    rx: Vec<u8>,
    /// The database last selected there (`None`: unknown, SELECT first).
    last_db: Option<i64>,
}

struct Cached {
    /// `None` while a MIGRATE uses it.
    link: Option<Link>,
    last_use: Instant,
}

/// This core's cached target connections by `host:port` as the client wrote
/// them (Redis's `migrate_cached_sockets`).
#[derive(Default)]
pub struct SocketCache {
    entries: HashMap<Vec<u8>, Cached>,
    /// The task closing idle connections runs (only while any is cached).
    sweeping: bool,
}

impl SocketCache {
    /// Cached connections, in use or not (INFO's `migrate_cached_sockets`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Closes the connections idle for longer than [`CACHE_TTL`].
    fn sweep(&mut self, now: Instant) {
        self.entries.retain(|_, c| c.link.is_none() || now.duration_since(c.last_use) <= CACHE_TTL);
    }
}

/// Closes idle cached connections once a second while any is cached (Redis
/// does it from `serverCron`).
fn start_sweeper(core: &Rc<Core>) {
    if std::mem::replace(&mut core.migrate.borrow_mut().sweeping, true) {
        return;
    }
    let core = core.clone();
    glommio::spawn_local(async move {
        loop {
            glommio::timer::sleep(Duration::from_secs(1)).await;
            let mut cache = core.migrate.borrow_mut();
            cache.sweep(Instant::now());
            if cache.is_empty() {
                cache.sweeping = false;
                break;
            }
        }
    })
    .detach();
}

/// The cached connection to `name`, taken for this command, or a new one
/// (cached from now on, as Redis caches it on connecting). `None` when no
/// connection could be made within `timeout`.
async fn get_link(
    core: &Rc<Core>,
    name: &[u8],
    m: &MigrateArgs,
    timeout: Duration,
) -> Option<Link> {
    if let Some(cached) = core.migrate.borrow_mut().entries.get_mut(name) {
        cached.last_use = Instant::now();
        if let Some(link) = cached.link.take() {
            return Some(link);
        }
    }
    let stream = connect(&m.host, &m.port, timeout).await.ok()?;
    let _ = stream.set_nodelay(true);
    let link = Link { stream, rx: Vec::new(), last_db: None };
    {
        let mut cache = core.migrate.borrow_mut();
        if !cache.entries.contains_key(name) {
            if cache.entries.len() >= CACHE_ITEMS {
                // Too many: drop the idle one used longest ago.
                let oldest = cache
                    .entries
                    .iter()
                    .filter(|(_, c)| c.link.is_some())
                    .min_by_key(|(_, c)| c.last_use)
                    .map(|(k, _)| k.clone());
                if let Some(oldest) = oldest {
                    cache.entries.remove(&oldest);
                }
            }
            cache.entries.insert(name.to_vec(), Cached { link: None, last_use: Instant::now() });
        }
    }
    start_sweeper(core);
    Some(link)
}

/// Gives a connection that worked back to the cache (closing it when
/// another took its place meanwhile).
fn put_back(core: &Core, name: &[u8], link: Link) {
    if let Some(cached) = core.migrate.borrow_mut().entries.get_mut(name) {
        if cached.link.is_none() {
            cached.link = Some(link);
        }
    }
}

/// Redis's `migrateCloseSocket`: the connection is dropped (closed) by
/// the caller, and the next MIGRATE connects afresh.
fn forget(core: &Core, name: &[u8]) {
    core.migrate.borrow_mut().entries.remove(name);
}

/// C's `atoi`, as Redis reads the port: leading blanks, a sign, digits, and
/// whatever follows ignored.
fn atoi(arg: &[u8]) -> i64 {
    let s = arg.iter().skip_while(|b| b.is_ascii_whitespace()).copied().collect::<Vec<u8>>();
    let (neg, digits) = match s.first() {
        Some(b'-') => (true, &s[1..]),
        Some(b'+') => (false, &s[1..]),
        _ => (false, &s[..]),
    };
    let mut n: i64 = 0;
    for d in digits.iter().take_while(|b| b.is_ascii_digit()) {
        n = n.saturating_mul(10).saturating_add(i64::from(d - b'0'));
    }
    if neg {
        -n
    } else {
        n
    }
}

/// `f`, or `TimedOut` once `limit` has passed.
async fn within<T>(limit: Duration, f: impl Future<Output = io::Result<T>>) -> io::Result<T> {
    futures_lite::future::or(f, async move {
        glommio::timer::sleep(limit).await;
        Err(io::Error::from(io::ErrorKind::TimedOut))
    })
    .await
}

/// Connects to `host:port` within `timeout`. A name is resolved on a thread
/// of its own, so that a slow resolver never stalls this core.
async fn connect(host: &[u8], port: &[u8], timeout: Duration) -> io::Result<TcpStream> {
    let started = Instant::now();
    let port = u16::try_from(atoi(port))
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "bad port"))?;
    let host = String::from_utf8_lossy(host).into_owned();
    let addrs: Vec<SocketAddr> = match host.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => {
            let (tx, rx) = flume::bounded(1);
            std::thread::Builder::new().name("migrate-resolve".into()).spawn(move || {
                let found = (host.as_str(), port).to_socket_addrs().map(|a| a.collect());
                let _ = tx.send(found);
            })?;
            within(timeout, async move {
                rx.recv_async().await.map_err(|_| io::Error::from(io::ErrorKind::Other))?
            })
            .await?
        }
    };
    let mut last = io::Error::new(io::ErrorKind::NotFound, "no address");
    for addr in addrs {
        let left = timeout.saturating_sub(started.elapsed());
        if left.is_zero() {
            return Err(io::Error::from(io::ErrorKind::TimedOut));
        }
        match TcpStream::connect_timeout(addr, left).await {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e.into(),
        }
    }
    Err(last)
}

/// Reads one reply line as Redis's `connSyncReadLine` into its 1024-byte
/// buffer: the line without its `\r\n`, at most [`MAX_LINE`] bytes of it.
/// A bare `\n` is a failure, as in Redis (it reads nothing).
async fn read_line(link: &mut Link, timeout: Duration) -> io::Result<Vec<u8>> {
    loop {
        let window = link.rx.len().min(MAX_LINE);
        if let Some(pos) = memchr_newline(&link.rx[..window]) {
            let mut line: Vec<u8> = link.rx.drain(..=pos).collect();
            line.pop();
            if line.is_empty() {
                return Err(io::Error::new(io::ErrorKind::InvalidData, "empty reply line"));
            }
            if line.last() == Some(&b'\r') {
                line.pop();
            }
            return Ok(line);
        }
        if link.rx.len() >= MAX_LINE {
            return Ok(link.rx.drain(..MAX_LINE).collect());
        }
        let mut chunk = [0u8; READ_CHUNK];
        let n = within(timeout, link.stream.read(&mut chunk)).await?;
        if n == 0 {
            return Err(io::Error::from(io::ErrorKind::UnexpectedEof));
        }
        link.rx.extend_from_slice(&chunk[..n]);
    }
}

fn memchr_newline(buf: &[u8]) -> Option<usize> {
    buf.iter().position(|&b| b == b'\n')
}

async fn write_request(link: &mut Link, request: &[u8], timeout: Duration) -> io::Result<()> {
    for piece in request.chunks(WRITE_CHUNK) {
        within(timeout, link.stream.write_all(piece)).await?;
    }
    within(timeout, link.stream.flush()).await
}

/// How the transfer ended: the reply, and the keys the target restored.
struct Outcome {
    reply: CmdResult,
    restored: Vec<Bytes>,
}

/// A socket failure: retried once on a fresh connection unless it was a
/// timeout (Redis: `errno != ETIMEDOUT && may_retry`).
fn retryable(e: &io::Error) -> bool {
    e.kind() != io::ErrorKind::TimedOut
}

/// The target's error text for the client: Redis's `addReplyErrorFormat`
/// turns newlines into spaces.
fn target_error(line: &[u8]) -> CmdError {
    let text: String = String::from_utf8_lossy(&line[1..])
        .chars()
        .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
        .collect();
    CmdError::owned(format!("ERR Target instance replied with error: {text}"))
}

/// Sends `keys` to the target and reads its replies.
async fn transfer(core: &Rc<Core>, m: &MigrateArgs, keys: &[Dumped]) -> Outcome {
    let name = [&m.host[..], b":", &m.port[..]].concat();
    let timeout = Duration::from_millis(m.timeout_ms);
    let mut may_retry = true;
    loop {
        let Some(mut link) = get_link(core, &name, m, timeout).await else {
            return Outcome { reply: Err(CONNECT_ERROR), restored: Vec::new() };
        };
        let select = link.last_db != Some(m.db);
        let (bytes, sent) = request(m, keys, select, now_ms());
        if let Err(e) = write_request(&mut link, &bytes, timeout).await {
            forget(core, &name);
            if retryable(&e) && std::mem::take(&mut may_retry) {
                continue;
            }
            return Outcome { reply: Err(WRITE_ERROR), restored: Vec::new() };
        }
        let mut preamble = Vec::new();
        let mut failed = None;
        for wanted in [m.auth.is_some(), select] {
            if !wanted {
                continue;
            }
            match read_line(&mut link, timeout).await {
                Ok(line) => preamble.push(line),
                Err(e) => {
                    failed = Some(e);
                    break;
                }
            }
        }
        if let Some(e) = failed {
            forget(core, &name);
            if retryable(&e) && std::mem::take(&mut may_retry) {
                continue;
            }
            return Outcome { reply: Err(READ_ERROR), restored: Vec::new() };
        }
        // An AUTH or SELECT error fails every key, as in Redis.
        let refused = preamble.iter().find(|l| l.first() == Some(&b'-')).cloned();
        let mut error = None;
        let mut restored = Vec::new();
        let mut socket_error = None;
        let mut read = 0;
        for &i in &sent {
            let line = match read_line(&mut link, timeout).await {
                Ok(line) => line,
                Err(e) => {
                    socket_error = Some(e);
                    break;
                }
            };
            read += 1;
            let failure = refused.as_ref().or((line.first() == Some(&b'-')).then_some(&line));
            match failure {
                // The first error is the reply; the database is unknown now.
                Some(line) if error.is_none() => {
                    link.last_db = None;
                    error = Some(target_error(line));
                }
                Some(_) => {}
                None if !m.copy => restored.push(keys[i].key.clone()),
                None => {}
            }
        }
        if let Some(e) = socket_error {
            forget(core, &name);
            // Nothing was processed yet: a fresh connection may do better.
            if error.is_none() && read == 0 && retryable(&e) && std::mem::take(&mut may_retry) {
                continue;
            }
            let reply = Err(error.unwrap_or(READ_ERROR));
            return Outcome { reply, restored };
        }
        let reply = match error {
            Some(e) => Err(e),
            None => {
                link.last_db = Some(m.db);
                Ok(())
            }
        };
        put_back(core, &name, link);
        return Outcome { reply, restored };
    }
}

pub async fn migrate(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let m = MigrateArgs::parse(args)?;
    let client = conn.state.info();
    let db = client.db;
    let slot_map = conn.core.shared.slot_map;
    let mut by_shard: BTreeMap<ShardId, Vec<(usize, Bytes)>> = BTreeMap::new();
    for (i, key) in m.keys.iter().enumerate() {
        by_shard.entry(slot_map.shard_of_key(key)).or_default().push((i, key.clone()));
    }
    // COPY leaves the keys as they are: others may still read them.
    let mode = if m.copy { LockMode::Shared } else { LockMode::Exclusive };
    let plan: Vec<(ShardId, LockSet)> = by_shard
        .iter()
        .map(|(shard, keys)| {
            let mut locks: LockSet = keys.iter().map(|(_, k)| (fingerprint(db, k), mode)).collect();
            locks.sort_unstable_by_key(|(fp, _)| *fp);
            locks.dedup_by_key(|(fp, _)| *fp);
            (*shard, locks)
        })
        .collect();
    let steps: Vec<AcquireStep<Vec<(usize, Dumped)>>> = plan
        .iter()
        .map(|(shard, locks)| {
            let keys = by_shard.remove(shard).unwrap_or_default();
            let dump: Box<dyn FnOnce(&mut ringdb_engine::Shard) -> _ + Send> =
                Box::new(move |shard| op_dump_keys(shard, &client, &keys, now_ms()));
            (*shard, locks.clone(), dump)
        })
        .collect();
    let mut found: Vec<(usize, Dumped)> =
        acquire_in_order(conn, steps).await?.into_iter().flatten().collect();
    found.sort_unstable_by_key(|(i, _)| *i);
    let keys: Vec<Dumped> = found.into_iter().map(|(_, d)| d).collect();
    let outcome = if keys.is_empty() { None } else { Some(transfer(&conn.core, &m, &keys).await) };
    let restored = outcome.as_ref().map(|o| o.restored.clone()).unwrap_or_default();
    finish(conn, plan, restored, db).await?;
    match outcome {
        None => conn.reply().simple("NOKEY"),
        Some(Outcome { reply: Ok(()), .. }) => conn.reply().ok(),
        Some(Outcome { reply: Err(e), .. }) => return Err(e),
    }
    Ok(())
}

/// Deletes the restored keys on their shards and releases every lock. The
/// deletions are one transaction in the append-only logs when they span
/// shards (part of the EXEC's inside one).
async fn finish(
    conn: &Connection,
    plan: Vec<(ShardId, LockSet)>,
    restored: Vec<Bytes>,
    db: usize,
) -> CmdResult {
    let slot_map = conn.core.shared.slot_map;
    let mut deletes: BTreeMap<ShardId, Vec<Bytes>> = BTreeMap::new();
    for key in restored {
        deletes.entry(slot_map.shard_of_key(&key)).or_default().push(key);
    }
    let held = conn.state.in_exec;
    let (tx_id, parts, exec_id) = (transaction_id(conn), deletes.len(), conn.state.exec_id);
    let writer = conn.state.info().id;
    let mut waiting = Vec::with_capacity(plan.len());
    for (shard, locks) in plan {
        let keys = deletes.remove(&shard).unwrap_or_default();
        let (tx, rx) = flume::bounded(1);
        conn.core
            .send_job(
                shard,
                Box::new(move |core| {
                    let mut shard = core.shard.borrow_mut();
                    let how = match (held, keys.is_empty()) {
                        (true, _) => PartLog::Exec(exec_id),
                        (false, false) => PartLog::Own { id: tx_id, parts },
                        (false, true) => PartLog::Plain,
                    };
                    // The deletions are this client's (tracking's NOLOOP).
                    let before = shard.state.funnel.tracking.changes_by(writer);
                    log_part(&mut shard, how, |shard| {
                        op_delete_migrated(shard, db, &keys, now_ms())
                    });
                    shard.state.funnel.tracking.changes_by(before);
                    if !held {
                        shard.tx_release(&locks);
                    }
                    drop(shard);
                    core.publish_changes();
                    let _ = tx.send(());
                }),
            )
            .await;
        waiting.push(rx);
    }
    for rx in waiting {
        rx.recv_async().await.map_err(|_| NO_ANSWER)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atoi_reads_as_c_does() {
        assert_eq!(atoi(b"6379"), 6379);
        assert_eq!(atoi(b" 12ab"), 12);
        assert_eq!(atoi(b"-5"), -5);
        assert_eq!(atoi(b"x"), 0);
        assert_eq!(atoi(b"99999999999999999999999"), i64::MAX);
    }
}
