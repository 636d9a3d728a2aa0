//! The CLIENT container: ID, SETNAME, GETNAME, SETINFO, LIST, INFO, KILL, REPLY, NO-EVICT, NO-TOUCH, HELP.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};

pub async fn id(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client id: not built yet"))
}

pub async fn setname(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client setname: not built yet"))
}

pub async fn getname(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client getname: not built yet"))
}

pub async fn setinfo(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client setinfo: not built yet"))
}

pub async fn list(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client list: not built yet"))
}

pub async fn info(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client info: not built yet"))
}

pub async fn kill(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client kill: not built yet"))
}

pub async fn reply(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client reply: not built yet"))
}

pub async fn no_evict(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client no_evict: not built yet"))
}

pub async fn no_touch(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client no_touch: not built yet"))
}

pub async fn help(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR client help: not built yet"))
}
