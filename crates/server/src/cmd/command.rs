//! The COMMAND container: COUNT, INFO, DOCS, LIST, GETKEYS, GETKEYSANDFLAGS, HELP, and bare COMMAND.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};

pub async fn command(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command command: not built yet"))
}

pub async fn count(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command count: not built yet"))
}

pub async fn info(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command info: not built yet"))
}

pub async fn docs(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command docs: not built yet"))
}

pub async fn list(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command list: not built yet"))
}

pub async fn getkeys(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command getkeys: not built yet"))
}

pub async fn getkeysandflags(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command getkeysandflags: not built yet"))
}

pub async fn help(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR command help: not built yet"))
}
