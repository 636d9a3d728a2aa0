//! SLOWLOG GET / LEN / RESET / HELP, and the log they read.
//!
//! Each core keeps the slow commands of its own clients: a shard records
//! the commands it runs (`ringdb_engine::slowlog`) and sends the entries to
//! the client's home core, which adds the client's address and name; the
//! commands that run on the connection's core are logged there directly.
//! Entry ids come from one process-wide counter, taken when a command is
//! recorded, so they order entries over all cores as Redis's one log
//! orders them. Every core keeps at most
//! `slowlog-max-len` entries, so the newest `slowlog-max-len` entries of
//! all cores — what SLOWLOG shows — are always kept.

use super::{help, subcommand_syntax_error};
use crate::net::connection::Connection;
use crate::node::Core;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_engine::shard::now_ms;
use ringdb_engine::slowlog::{logged_args, SlowEntry};
use ringdb_engine::ShardId;
use ringdb_types::number::parse_i64;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;
use std::sync::atomic::Ordering;

/// One entry as SLOWLOG GET shows it.
#[derive(Clone, Debug)]
pub struct Logged {
    id: u64,
    unix_secs: u64,
    usec: u64,
    args: Vec<Bytes>,
    /// The client's `ip:port` and name when it ran the command.
    addr: String,
    name: String,
}

/// A core's slow log, newest first.
#[derive(Default)]
pub struct SlowLog {
    entries: VecDeque<Logged>,
}

impl SlowLog {
    /// Adds an entry in id order (an entry from another shard may arrive
    /// after a newer one logged here), keeping the newest `max_len`.
    fn add(&mut self, entry: Logged, max_len: usize) {
        let at = self.entries.iter().position(|e| e.id < entry.id).unwrap_or(self.entries.len());
        self.entries.insert(at, entry);
        self.entries.truncate(max_len);
    }
}

/// Logs slow commands a shard ran: each on its client's home core, whose
/// log keeps `max_len` entries (the shard's `slowlog-max-len`; every core
/// has the same).
pub fn deliver(core: &Rc<Core>, entries: VecDeque<SlowEntry>, max_len: usize) {
    let mut by_home: BTreeMap<u16, Vec<SlowEntry>> = BTreeMap::new();
    for entry in entries {
        by_home.entry(entry.home).or_default().push(entry);
    }
    for (home, entries) in by_home {
        if home == core.id.0 {
            log_here(core, entries, max_len);
        } else {
            core.queue_job(ShardId(home), Box::new(move |core| log_here(core, entries, max_len)));
        }
    }
}

/// Adds entries of this core's clients to its log, with each client's
/// address and name (empty if it has gone meanwhile).
fn log_here(core: &Core, entries: Vec<SlowEntry>, max_len: usize) {
    let clients = core.clients.borrow();
    let mut log = core.slowlog.borrow_mut();
    for entry in entries {
        let (addr, name) = clients
            .get(entry.client)
            .map(|c| (c.addr.clone(), c.view.borrow().name.clone()))
            .unwrap_or_default();
        let SlowEntry { id, unix_secs, usec, args, .. } = entry;
        log.add(Logged { id, unix_secs, usec, args, addr, name }, max_len);
    }
}

/// Logs a command the connection's core timed, if it was slow: one that
/// ran there (`Exec::Node`), or a command split over shards (from its
/// start to the last shard's reply).
pub fn record_here(conn: &Connection, args: &[Bytes], usec: u64) {
    // The shard's parsed copy of the settings: this runs for every command
    // of the connection's core (PING …), so no lookup by name.
    let settings = conn.core.shard.borrow().state.settings.slowlog;
    if !settings.is_slow(usec) {
        return;
    }
    let name = conn.handle.view.borrow().name.clone();
    let id = conn.core.shared.next_slowlog_id.fetch_add(1, Ordering::Relaxed);
    let entry = Logged {
        id,
        unix_secs: now_ms() / 1000,
        usec,
        args: logged_args(args),
        addr: conn.handle.addr.clone(),
        name,
    };
    conn.core.slowlog.borrow_mut().add(entry, settings.max_len);
}

/// SLOWLOG GET [count]: the newest `count` entries (10; -1 for all).
pub async fn get(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(subcommand_syntax_error(args));
    }
    let max_len = conn.core.shard.borrow().state.settings.slowlog.max_len;
    let count = match args.get(2) {
        None => 10,
        Some(arg) => match parse_i64(arg) {
            Some(-1) => max_len,
            Some(n) if n >= 0 => usize::try_from(n).unwrap_or(usize::MAX).min(max_len),
            _ => return Err(CmdError::new("ERR count should be greater than or equal to -1")),
        },
    };
    let per_core = conn
        .core
        .invoke_on_all_queued(move |core| {
            core.slowlog.borrow().entries.iter().take(count).cloned().collect::<Vec<Logged>>()
        })
        .await?;
    let mut entries: Vec<Logged> = per_core.into_iter().flatten().collect();
    entries.sort_by_key(|e| std::cmp::Reverse(e.id));
    entries.truncate(count);
    let mut out = conn.reply();
    out.array(entries.len());
    for e in &entries {
        out.array(6);
        out.int(e.id as i64);
        out.int(e.unix_secs as i64);
        out.int(e.usec as i64);
        out.array(e.args.len());
        for arg in &e.args {
            out.bulk(arg);
        }
        out.bulk(e.addr.as_bytes());
        out.bulk(e.name.as_bytes());
    }
    Ok(())
}

/// SLOWLOG LEN
pub async fn len(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let max_len = conn.core.shard.borrow().state.settings.slowlog.max_len;
    let per_core =
        conn.core.invoke_on_all_queued(|core| core.slowlog.borrow().entries.len()).await?;
    let len = per_core.into_iter().sum::<usize>().min(max_len);
    conn.reply().int(len as i64);
    Ok(())
}

/// SLOWLOG RESET
pub async fn reset(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    conn.core.invoke_on_all_queued(|core| core.slowlog.borrow_mut().entries.clear()).await?;
    conn.reply().ok();
    Ok(())
}

/// SLOWLOG HELP
pub fn slowlog_help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    help(
        conn,
        args,
        &[
            "GET [<count>]",
            "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
            "    Entries are made of:",
            "    id, timestamp, time in microseconds, arguments array, client IP and port,",
            "    client name",
            "LEN",
            "    Return the length of the slowlog.",
            "RESET",
            "    Reset the slowlog.",
        ],
    );
    Ok(())
}
