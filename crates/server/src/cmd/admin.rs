//! TIME, LASTSAVE, SHUTDOWN, DEBUG, FUNCTION FLUSH.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};

pub async fn time(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR admin time: not built yet"))
}

pub async fn lastsave(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR admin lastsave: not built yet"))
}

pub async fn shutdown(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR admin shutdown: not built yet"))
}

pub async fn debug(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR admin debug: not built yet"))
}

pub async fn function_flush(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR admin function_flush: not built yet"))
}
