//! Commands that run on the connection's core (`Exec::Node` rows): connection
//! state, administration, and commands that visit every shard. One module per
//! family, mirroring the engine's families.

pub mod connection;

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult, NodeCommand, Registered};
use std::time::Instant;

/// Runs a node command, writing its reply to `conn.out`, and counts it in
/// this core's command statistics.
pub async fn run(conn: &mut Connection, cmd: NodeCommand, reg: &Registered, args: &[Bytes]) -> CmdResult {
    let started = Instant::now();
    let result = dispatch(conn, cmd, args).await;
    let usec = started.elapsed().as_micros() as u64;
    let mut shard = conn.core.shard.borrow_mut();
    let stat = shard.state.stats.command(reg.id);
    stat.calls += 1;
    stat.usec += usec;
    stat.failed_calls += result.is_err() as u64;
    shard.state.stats.commands_processed += 1;
    result
}

async fn dispatch(conn: &mut Connection, cmd: NodeCommand, args: &[Bytes]) -> CmdResult {
    use NodeCommand as N;
    match cmd {
        N::Ping => connection::ping(conn, args),
        N::Echo => connection::echo(conn, args),
        N::Select => connection::select(conn, args),
        N::Quit => connection::quit(conn),
        N::Hello => connection::hello(conn, args),
        N::Auth => connection::auth(conn, args),
        N::Reset => connection::reset(conn),
        other => Err(CmdError::owned(format!("ERR {other:?} is not available yet"))),
    }
}

/// `ERR syntax error`.
pub fn syntax() -> CmdError {
    ringdb_engine::command::error::SYNTAX
}
