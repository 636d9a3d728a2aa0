//! DBSIZE, FLUSHDB, FLUSHALL, SWAPDB, KEYS, SCAN, RANDOMKEY: commands that
//! visit every shard. Each sends at most one message per shard per step and
//! does the per-key work on the shards with the engine's `op_*` functions.

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::error::DB_INDEX_OUT_OF_RANGE;
use ringdb_engine::command::{args, CmdError, CmdResult};
use ringdb_engine::families::keys::{
    op_flush, op_keys, op_random_key, op_swap_db, parse_flush_mode,
};
use ringdb_engine::scan::{op_scan, reply_cursor, ScanArgs, ScanCursor};
use ringdb_engine::shard::now_ms;
use ringdb_engine::ShardId;

/// A SWAPDB index must be an `int` (Redis's `getIntFromObjectOrReply`).
fn int32(arg: &[u8]) -> Option<i64> {
    args::int(arg).ok().filter(|n| i32::try_from(*n).is_ok())
}

pub async fn swapdb(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let a = int32(&args[1]).ok_or(CmdError::new("ERR invalid first DB index"))?;
    let b = int32(&args[2]).ok_or(CmdError::new("ERR invalid second DB index"))?;
    let databases = conn.core.config.borrow().databases();
    let in_range = |n: i64| usize::try_from(n).ok().filter(|&n| n < databases);
    let (Some(a), Some(b)) = (in_range(a), in_range(b)) else { return Err(DB_INDEX_OUT_OF_RANGE) };
    crate::route::cross::on_every_shard_exclusively(conn, move |shard| op_swap_db(shard, a, b))
        .await?;
    conn.reply().ok();
    Ok(())
}

pub async fn dbsize(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let db = conn.state.db;
    let sizes =
        conn.core.invoke_on_all(move |core| core.shard.borrow().keyspace.db(db).len()).await?;
    conn.reply().int(sizes.iter().sum::<usize>() as i64);
    Ok(())
}

/// `lazyfree-lazy-user-flush`: a flush without SYNC or ASYNC is ASYNC.
fn lazy_user_flush(conn: &Connection) -> bool {
    conn.core.config.borrow().get("lazyfree-lazy-user-flush") == Some("yes")
}

pub async fn flushdb(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let lazy = parse_flush_mode(args, lazy_user_flush(conn))?;
    let db = conn.state.db;
    crate::route::cross::on_every_shard_exclusively(conn, move |shard| {
        op_flush(shard, Some(db), lazy)
    })
    .await?;
    invalidate_tracked_keys(conn).await?;
    conn.reply().ok();
    Ok(())
}

/// After a flush every tracking client, wherever it lives, drops its whole
/// cache: one null invalidation each (Redis's
/// `trackingInvalidateKeysOnFlush`).
async fn invalidate_tracked_keys(conn: &Connection) -> CmdResult {
    conn.core.invoke_on_all(crate::push::tracking::invalidate_everything).await?;
    Ok(())
}

pub async fn flushall(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let lazy = parse_flush_mode(args, lazy_user_flush(conn))?;
    crate::route::cross::on_every_shard_exclusively(conn, move |shard| op_flush(shard, None, lazy))
        .await?;
    invalidate_tracked_keys(conn).await?;
    // As Redis's `flushAllDataAndResetRDB`: a background save of the old
    // data is stopped, and with save points configured the (now empty)
    // snapshot is written at once, which also clears the dirty counter.
    crate::persist::stop_background_save(&conn.core).await;
    if !conn.core.config.borrow().save_points().is_empty() {
        // Its failure is logged; FLUSHALL itself has succeeded.
        let _ = crate::persist::save(&conn.core, conn.state.in_exec).await;
    }
    conn.reply().ok();
    Ok(())
}

pub async fn keys(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let db = conn.state.db;
    let pattern = args[1].clone();
    let per_shard = conn
        .core
        .invoke_on_all(move |core| op_keys(&core.shard.borrow(), db, &pattern, now_ms()))
        .await?;
    let mut out = conn.reply();
    out.array(per_shard.iter().map(Vec::len).sum());
    for key in per_shard.iter().flatten() {
        out.bulk(key);
    }
    Ok(())
}

/// SCAN with one cursor over all shards (see `ringdb_engine::scan`): the
/// cursor names a slot and so a shard; that shard sweeps from it, and when
/// it runs out of slots before COUNT keys were visited, the next shard
/// continues in the same call.
pub async fn scan(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let ScanArgs { cursor, count, filter } = ScanArgs::parse(args)?;
    let db = conn.state.db;
    let slot_map = conn.core.shared.slot_map;
    let mut keys = Vec::new();
    let mut visited = 0usize;
    // A cursor past the last slot (never handed out) ends the iteration.
    let mut next = ScanCursor::decode(cursor);
    while let Some(from) = next {
        let shard = slot_map.shard_of_slot(from.slot);
        let want = count - visited;
        let filter = filter.clone();
        let step = conn
            .core
            .invoke_on(shard, move |core| {
                op_scan(&mut core.shard.borrow_mut(), db, from, want, &filter, now_ms())
            })
            .await?;
        visited += step.visited;
        keys.extend(step.keys);
        next = step.next;
        let stopped_inside = next.is_some_and(|c| slot_map.shard_of_slot(c.slot) == shard);
        if stopped_inside || visited >= count {
            break;
        }
    }
    let mut out = conn.reply();
    out.array(2);
    out.bulk(reply_cursor(next).to_string().as_bytes());
    out.array(keys.len());
    for key in &keys {
        out.bulk(key);
    }
    Ok(())
}

/// RANDOMKEY: a shard chosen with probability proportional to its keys, then
/// a uniform key there. A shard whose keys all turned out expired has
/// reclaimed them when it answers none, so the next round skips it.
pub async fn randomkey(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let db = conn.state.db;
    for _round in 0..=conn.core.shared.shards() {
        let sizes =
            conn.core.invoke_on_all(move |core| core.shard.borrow().keyspace.db(db).len()).await?;
        let total: usize = sizes.iter().sum();
        if total == 0 {
            break;
        }
        let mut pick = (conn.core.shard.borrow_mut().state.random() % total as u64) as usize;
        let mut shard = ShardId(0);
        for (i, &size) in sizes.iter().enumerate() {
            if pick < size {
                shard = ShardId(i as u16);
                break;
            }
            pick -= size;
        }
        let key = conn
            .core
            .invoke_on(shard, move |core| op_random_key(&mut core.shard.borrow_mut(), db, now_ms()))
            .await?;
        if let Some(key) = key {
            conn.reply().bulk(&key);
            return Ok(());
        }
    }
    conn.reply().null();
    Ok(())
}
