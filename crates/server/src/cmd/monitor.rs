//! MONITOR: a client that asks sees every command any client runs, on any
//! core, as Redis's MONITOR shows them (`ringdb_engine::monitor` writes
//! the lines).
//!
//! Every core knows which cores have monitors (a broadcast when a core
//! gains its first or loses its last), so a command costs one check while
//! nobody monitors. The connection's core writes the lines of the commands
//! its clients send, in the order they send them, before they run (EXEC
//! writes its queued commands and then itself; administrative commands are
//! not shown, as in Redis); shards write the lines of commands their
//! scripts call. Lines travel on the mesh queues, so a script's EVAL line
//! always reaches a monitor before the lines of the commands it calls.

use crate::net::connection::Connection;
use crate::node::Core;
use bytes::Bytes;
use ringdb_engine::command::spec::flags;
use ringdb_engine::command::{CmdResult, CommandSpec, Exec, NodeCommand};
use ringdb_engine::monitor::line;
use ringdb_engine::ShardId;
use std::rc::Rc;

/// MONITOR
pub async fn monitor(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    // Redis ignores a second MONITOR (no reply).
    if conn.state.monitor {
        return Ok(());
    }
    conn.ensure_mailbox();
    conn.state.monitor = true;
    let first = {
        let mut hub = conn.core.push.borrow_mut();
        hub.monitors.push(conn.state.id);
        hub.monitors.len() == 1
    };
    // Every core knows before the +OK leaves: a command another client
    // sends after it is seen.
    if first {
        announce(&conn.core, true).await?;
    }
    conn.reply().ok();
    Ok(())
}

/// Ends MONITOR for a client that disconnects or RESETs.
pub async fn stop(conn: &mut Connection) {
    if !std::mem::take(&mut conn.state.monitor) {
        return;
    }
    let last = {
        let mut hub = conn.core.push.borrow_mut();
        hub.monitors.retain(|&id| id != conn.state.id);
        hub.monitors.is_empty()
    };
    if last {
        let _ = announce(&conn.core, false).await;
    }
}

/// Tells every core (this one too) that this core has monitors now, or no
/// longer; each shard learns whether any core has.
async fn announce(core: &Rc<Core>, present: bool) -> CmdResult {
    let me = core.id.0;
    core.invoke_on_all(move |core| {
        let mut hub = core.push.borrow_mut();
        if present {
            hub.monitor_cores.insert(me);
        } else {
            hub.monitor_cores.remove(&me);
        }
        core.shard.borrow_mut().state.monitored = !hub.monitor_cores.is_empty();
    })
    .await?;
    Ok(())
}

/// Shows a command a client of this core is about to run to the monitors
/// (nothing while there are none). EXEC shows the commands it runs first.
pub fn feed(conn: &Connection, spec: &CommandSpec, args: &[Bytes]) {
    if conn.core.push.borrow().monitor_cores.is_empty() || spec.has(flags::ADMIN) {
        return;
    }
    let (db, addr) = (conn.state.db, conn.handle.addr.as_str());
    let mut lines = Vec::new();
    if matches!(spec.exec, Exec::Node(NodeCommand::Exec)) {
        if let Some(multi) = conn.state.multi.as_ref().filter(|m| !m.failed) {
            for queued in multi.queued.iter().filter(|q| !q.reg.spec.has(flags::ADMIN)) {
                lines.push(line(db, addr, &queued.args));
            }
        }
    }
    lines.push(line(db, addr, args));
    send(&conn.core, lines);
}

/// Queues lines on every core with monitors, behind what this core queued
/// there before.
pub fn send(core: &Core, lines: Vec<Bytes>) {
    let targets: Vec<u16> = core.push.borrow().monitor_cores.iter().copied().collect();
    let lines = std::sync::Arc::new(lines);
    for target in targets {
        let lines = lines.clone();
        core.queue_job(
            ShardId(target),
            Box::new(move |core| {
                let limit = core.config.borrow().buffer_limit("slave");
                core.push.borrow_mut().deliver_monitor(&lines, limit);
            }),
        );
    }
}
