//! DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, KEYS, SCAN, RANDOMKEY: commands that visit every shard.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};

pub async fn swapdb(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR keyspace swapdb: not built yet"))
}

pub async fn dbsize(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR keyspace dbsize: not built yet"))
}

pub async fn flushdb(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR keyspace flushdb: not built yet"))
}

pub async fn flushall(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR keyspace flushall: not built yet"))
}

pub async fn keys(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR keyspace keys: not built yet"))
}

pub async fn scan(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR keyspace scan: not built yet"))
}

pub async fn randomkey(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR keyspace randomkey: not built yet"))
}
