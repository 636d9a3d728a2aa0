//! Reactive queries: `<NAME>.WATCH args…` and `<NAME>.UNWATCH fingerprint`
//! for every read command the table flags watchable (`GET.WATCH key`,
//! `PFCOUNT.WATCH key`, `ZRANGE.WATCH key 0 9 REV WITHSCORES`, …).
//!
//! The query runs on the shard that owns its one key, which keeps it in its
//! watch table (shared by every watcher of the same fingerprint) and re-runs
//! it after a change; this core delivers the new results to its watchers
//! ([`crate::push::watch`]). Every message, the first (the reply to
//! `.WATCH`) included, is `[NAME, fingerprint, result]`: a push frame under
//! RESP3, an array under RESP2, where the connection is then in watch mode
//! as a subscriber is in subscribe mode.

use crate::net::connection::Connection;
use crate::push::watch::WatchedQuery;
use bytes::Bytes;
use ringdb_engine::command::{table, CmdError, CmdResult};
use ringdb_engine::query_watch::{fingerprint, Query};
use ringdb_engine::{ShardCommand, ShardId};
use std::collections::BTreeMap;

/// The row a `.WATCH` / `.UNWATCH` request is about (`pfcount` for
/// `PFCOUNT.WATCH`), and its name upper-cased.
fn base_row(
    name: &[u8],
    suffix: &str,
) -> Result<(&'static ringdb_engine::command::Registered, String), CmdError> {
    let base = &name[..name.len().saturating_sub(suffix.len())];
    let reg = table().get(base).ok_or_else(|| CmdError::new("ERR unknown watchable command"))?;
    Ok((reg, reg.spec.name.to_ascii_uppercase()))
}

pub async fn query_watch(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let (reg, name) = base_row(&args[0], ".watch")?;
    let keys = reg.spec.key_positions(args).unwrap_or_default();
    let [key_at] = keys[..] else {
        return Err(CmdError::owned(format!("ERR {name}.WATCH watches exactly one key")));
    };
    // Copies: a watch lives long, and the arguments are slices of the
    // client's input buffer, which they would keep alive whole.
    let args: Vec<Bytes> = args.iter().map(|a| Bytes::copy_from_slice(a)).collect();
    let args = &args[..];
    let key = args[key_at].clone();
    let fp = fingerprint(&name, &args[1..], conn.state.db);
    let mut command_args = args.to_vec();
    command_args[0] = Bytes::from_static(reg.spec.name.as_bytes());
    let command =
        ShardCommand { id: reg.id, spec: reg.spec, args: command_args, client: conn.state.info() };
    let shard = conn.core.shared.slot_map.shard_of_key(&key);
    let (home, client, resp) = (conn.core.id, conn.state.id, conn.state.resp);
    // A restricted user's results stop if its rules stop allowing this.
    let permission = match (conn.state.info().acl_user, table().get(&args[0])) {
        (Some(uid), Some(watch_reg)) => Some(std::sync::Arc::new(crate::push::watch::Permission {
            uid,
            reg: watch_reg,
            args: args.to_vec(),
        })),
        _ => None,
    };
    let again = conn.state.query_watches.contains_key(&fp);
    let label = Bytes::from(name.clone());
    conn.ensure_mailbox();
    let result = conn
        .core
        .invoke_deferred(shard, move |core, reply| {
            let now = ringdb_engine::shard::now_ms();
            let result = {
                let mut shard = core.shard.borrow_mut();
                if again {
                    // Watching the same query twice: its current result,
                    // one subscription.
                    let shard = &mut *shard;
                    ringdb_engine::query_watch::run(
                        &mut shard.keyspace,
                        &mut shard.state,
                        &command,
                        resp,
                        now,
                    )
                } else {
                    let query = Query { name: label, command, key };
                    shard.watch_query(fp, query, home.0, resp, now)
                }
            };
            // The watcher joins its core behind every result this shard
            // pushed there before (see crate::push::watch).
            core.queue_job(
                home,
                Box::new(move |home| {
                    home.push.borrow_mut().queries.add(fp, client, resp, permission);
                    reply.send(result);
                }),
            );
        })
        .await?;
    conn.state
        .query_watches
        .insert(fp, WatchedQuery { name: Bytes::from(name.clone()), shard, resp });
    crate::push::watch::encode(name.as_bytes(), fp, &result, &mut conn.reply());
    conn.update_view();
    Ok(())
}

pub async fn query_unwatch(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let (_, name) = base_row(&args[0], ".unwatch")?;
    let fp = ringdb_types::number::parse_u64(&args[1])
        .ok_or_else(|| CmdError::new("ERR invalid fingerprint"))?;
    let watched = conn.state.query_watches.get(&fp).is_some_and(|w| w.name == name.as_bytes());
    if watched {
        if let Some(query) = conn.state.query_watches.remove(&fp) {
            stop(conn, BTreeMap::from([(fp, query)])).await;
        }
    }
    conn.reply().ok();
    conn.update_view();
    Ok(())
}

/// Drops every reactive query of the connection (disconnect, RESET).
pub async fn unwatch_all(conn: &mut Connection) {
    let queries = std::mem::take(&mut conn.state.query_watches);
    stop(conn, queries).await;
}

/// Stops `queries` for this connection: at once on this core (no more
/// deliveries), then on their shards, one message per shard.
async fn stop(conn: &mut Connection, queries: BTreeMap<u64, WatchedQuery>) {
    let (home, client) = (conn.core.id.0, conn.state.id);
    let mut by_shard: BTreeMap<ShardId, Vec<(u64, ringdb_protocol::Resp)>> = BTreeMap::new();
    {
        let mut hub = conn.core.push.borrow_mut();
        for (fp, query) in queries {
            hub.queries.remove(fp, client);
            by_shard.entry(query.shard).or_default().push((fp, query.resp));
        }
    }
    for (shard, fps) in by_shard {
        conn.core
            .send_job(
                shard,
                Box::new(move |core| {
                    let mut shard = core.shard.borrow_mut();
                    for (fp, resp) in fps {
                        shard.unwatch_query(fp, home, resp);
                    }
                }),
            )
            .await;
    }
}

/// Redis's subscribe-mode error, adapted to watch mode (a RESP2 connection
/// with reactive queries).
pub fn watch_mode_error(full_name: &str) -> CmdError {
    CmdError::owned(format!(
        "ERR Can't execute '{full_name}': only *.WATCH / *.UNWATCH / (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in watch mode"
    ))
}
