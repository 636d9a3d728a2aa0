//! CLIENT PAUSE at the door: before a command runs, the router asks
//! whether the node's pause holds it, and if so the client waits here,
//! counted in INFO's blocked_clients, until the pause ends or CLIENT
//! UNPAUSE. Arity and authentication errors are answered first, and
//! commands queued inside MULTI are not held: their EXEC is, by what the
//! transaction contains (Redis 7.0's rules, `ringdb_engine::pause`).

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{Exec, NodeCommand, Registered};
use ringdb_engine::shard::now_ms;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

/// How often a held client looks at the pause again: CLIENT UNPAUSE on any
/// core releases it within this.
const RECHECK: Duration = Duration::from_millis(2);

/// Whether the pause holds this request now.
pub fn holds(conn: &Connection, reg: &Registered, args: &[Bytes]) -> bool {
    let pause = &conn.core.shared.pause;
    // One relaxed load per command while nothing is paused.
    if !pause.is_set() {
        return false;
    }
    let now = now_ms();
    pause.active(now).is_some() && pause.holds(request_flags(conn, reg, args), now)
}

/// The flags the request runs with: a script's declared ones, and for EXEC
/// those of everything it queued.
fn request_flags(conn: &Connection, reg: &Registered, args: &[Bytes]) -> u32 {
    let shard = conn.core.shard.borrow();
    let scripting = &shard.state.scripting;
    match reg.spec.exec {
        Exec::Node(NodeCommand::Exec) => conn.state.multi.as_ref().map_or(0, |m| {
            m.queued.iter().fold(0, |all, q| all | q.reg.spec.request_flags(scripting, &q.args))
        }),
        _ => reg.spec.request_flags(scripting, args),
    }
}

/// Waits while the pause holds the request. What the client sent before
/// it has been answered already.
pub async fn wait(conn: &mut Connection, reg: &Registered, args: &[Bytes]) {
    if conn.flush().await.is_err() {
        conn.state.close_after_reply = true;
        return;
    }
    let waiting = &conn.core.shared.pause.waiting;
    waiting.fetch_add(1, Relaxed);
    while holds(conn, reg, args) {
        glommio::timer::sleep(RECHECK).await;
    }
    waiting.fetch_sub(1, Relaxed);
}
