//! The CONFIG container: GET, SET, RESETSTAT, REWRITE, HELP.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};

pub async fn get(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR config get: not built yet"))
}

pub async fn set(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR config set: not built yet"))
}

pub async fn resetstat(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR config resetstat: not built yet"))
}

pub async fn rewrite(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR config rewrite: not built yet"))
}

pub async fn help(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR config help: not built yet"))
}
