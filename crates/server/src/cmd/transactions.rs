//! MULTI, EXEC, DISCARD, WATCH, UNWATCH (the transaction itself runs in
//! `route::multi`).

use crate::net::connection::Connection;
use crate::route::multi::{self, Multi};
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};

pub fn multi(conn: &mut Connection) -> CmdResult {
    Multi::begin(&mut conn.state.multi)?;
    conn.reply().ok();
    Ok(())
}

pub async fn exec(conn: &mut Connection) -> CmdResult {
    multi::exec(conn).await
}

pub async fn discard(conn: &mut Connection) -> CmdResult {
    Multi::discard(&mut conn.state.multi)?;
    multi::unwatch_all(conn).await;
    conn.reply().ok();
    Ok(())
}

pub async fn watch(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if conn.state.multi.is_some() {
        return Err(CmdError::new("ERR WATCH inside MULTI is not allowed"));
    }
    multi::watch(conn, &args[1..]).await?;
    conn.reply().ok();
    Ok(())
}

pub async fn unwatch(conn: &mut Connection) -> CmdResult {
    multi::unwatch_all(conn).await;
    conn.reply().ok();
    Ok(())
}
