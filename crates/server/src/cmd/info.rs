//! INFO: every section, summed over all shards.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};

pub async fn info(_conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    Err(CmdError::new("ERR info info: not built yet"))
}
