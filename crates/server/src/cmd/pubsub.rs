//! Pub/Sub: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE, PUNSUBSCRIBE, SSUBSCRIBE,
//! SUNSUBSCRIBE, PUBLISH, SPUBLISH and the PUBSUB container, as Redis 7's
//! `pubsub.c` replies to them.
//!
//! Subscriptions belong to the connection's home core ([`crate::push`]).
//! PUBLISH sends one message to each core that has a subscriber (its own
//! included) and adds up how many received it; messages from one publisher
//! arrive in order because the mesh keeps each core-to-core queue in order.

use crate::net::connection::Connection;
use crate::node::Core;
use crate::push::Kind;
use bytes::Bytes;
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_engine::ShardId;
use std::collections::BTreeSet;
use std::rc::Rc;

/// The reply words of each kind: subscribe, unsubscribe.
fn words(kind: Kind) -> (&'static [u8], &'static [u8]) {
    match kind {
        Kind::Channel => (b"subscribe", b"unsubscribe"),
        Kind::Pattern => (b"psubscribe", b"punsubscribe"),
        Kind::ShardChannel => (b"ssubscribe", b"sunsubscribe"),
    }
}

/// The count a (un)subscribe reply shows: channels and patterns together,
/// shard channels apart (Redis's `subscriptionCount`).
fn count(conn: &Connection, kind: Kind) -> i64 {
    let n = |k: Kind| conn.state.subscriptions.iter().filter(|(kind, _)| *kind == k).count();
    match kind {
        Kind::ShardChannel => n(Kind::ShardChannel) as i64,
        _ => (n(Kind::Channel) + n(Kind::Pattern)) as i64,
    }
}

fn reply(conn: &mut Connection, word: &[u8], name: Option<&[u8]>, count: i64) {
    let mut out = conn.reply();
    out.push(3);
    out.bulk(word);
    match name {
        Some(n) => out.bulk(n),
        None => out.null(),
    }
    out.int(count);
}

/// Tells the other cores that this one gained its first (`present`) or lost
/// its last subscriber of each of `names`, and waits until they all know:
/// once SUBSCRIBE has answered, a PUBLISH on any core reaches the
/// subscriber. One message per core for all the names (one round trip for
/// `UNSUBSCRIBE` of every channel).
pub async fn tell_other_cores(core: &Rc<Core>, names: Vec<(Kind, Bytes)>, present: bool) {
    if names.is_empty() {
        return;
    }
    let me = core.id.0;
    let mut waiting = Vec::new();
    for i in 0..core.shared.shards() {
        if i as u16 == me {
            continue;
        }
        let names = names.clone();
        let (tx, rx) = flume::bounded(1);
        core.send_job(
            ShardId(i as u16),
            Box::new(move |c| {
                let mut push = c.push.borrow_mut();
                for (kind, name) in names {
                    push.note_remote(kind, name, me, present);
                }
                let _ = tx.send(());
            }),
        )
        .await;
        waiting.push(rx);
    }
    for rx in waiting {
        let _ = rx.recv_async().await;
    }
}

async fn subscribe_all(conn: &mut Connection, kind: Kind, names: &[Bytes]) -> CmdResult {
    conn.ensure_mailbox();
    let mut firsts = Vec::new();
    for name in names {
        if conn.state.subscriptions.insert((kind, name.clone())) {
            let first = conn.core.push.borrow_mut().subscribe(kind, name.clone(), conn.state.id);
            if first {
                firsts.push((kind, name.clone()));
            }
        }
        let n = count(conn, kind);
        reply(conn, words(kind).0, Some(name), n);
    }
    // Before the replies leave (they are written when the command is done).
    tell_other_cores(&conn.core, firsts, true).await;
    conn.update_view();
    Ok(())
}

/// Unsubscribes from `names`, or from every name of `kind` when empty.
pub async fn unsubscribe_all(conn: &mut Connection, kind: Kind, names: &[Bytes], notify: bool) {
    let names: Vec<Bytes> = if names.is_empty() {
        conn.state
            .subscriptions
            .iter()
            .filter(|(k, _)| *k == kind)
            .map(|(_, n)| n.clone())
            .collect()
    } else {
        names.to_vec()
    };
    if names.is_empty() && notify {
        let n = count(conn, kind);
        reply(conn, words(kind).1, None, n);
    }
    let mut lasts = Vec::new();
    for name in names {
        if conn.state.subscriptions.remove(&(kind, name.clone())) {
            let last = conn.core.push.borrow_mut().unsubscribe(kind, &name, conn.state.id);
            if last {
                lasts.push((kind, name.clone()));
            }
        }
        if notify {
            let n = count(conn, kind);
            reply(conn, words(kind).1, Some(&name), n);
        }
    }
    tell_other_cores(&conn.core, lasts, false).await;
    conn.update_view();
}

pub async fn subscribe(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    subscribe_all(conn, Kind::Channel, &args[1..]).await
}

pub async fn psubscribe(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    subscribe_all(conn, Kind::Pattern, &args[1..]).await
}

pub async fn ssubscribe(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    subscribe_all(conn, Kind::ShardChannel, &args[1..]).await
}

pub async fn unsubscribe(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    unsubscribe_all(conn, Kind::Channel, &args[1..], true).await;
    Ok(())
}

pub async fn punsubscribe(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    unsubscribe_all(conn, Kind::Pattern, &args[1..], true).await;
    Ok(())
}

pub async fn sunsubscribe(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    unsubscribe_all(conn, Kind::ShardChannel, &args[1..], true).await;
    Ok(())
}

/// The messages scripts PUBLISHed on this core's shard, in order: queued
/// to every core with a subscriber (what one core queues on another
/// arrives in order), after the run that published them.
pub fn publish_from_scripts(core: &Rc<Core>, publishes: Vec<ringdb_engine::shard::Publish>) {
    for publish in publishes {
        let kind = if publish.shard_channel { Kind::ShardChannel } else { Kind::Channel };
        let targets = core.push.borrow().targets(kind, &publish.channel, core.id.0);
        for target in targets {
            let (channel, message) = (publish.channel.clone(), publish.message.clone());
            core.queue_job(
                ShardId(target),
                Box::new(move |c| {
                    let limit = c.config.borrow().pubsub_buffer_limit();
                    c.push.borrow_mut().deliver(kind, &channel, &message, limit);
                }),
            );
        }
    }
}

/// Publishes a message on every core that has a subscriber; returns how
/// many clients received it. Also used for keyspace notifications.
pub async fn publish_message(core: &Rc<Core>, kind: Kind, channel: Bytes, payload: Bytes) -> i64 {
    let targets = core.push.borrow().targets(kind, &channel, core.id.0);
    let mut waiting = Vec::with_capacity(targets.len());
    for target in targets {
        let (channel, payload) = (channel.clone(), payload.clone());
        let (tx, rx) = flume::bounded(1);
        core.send_job(
            ShardId(target),
            Box::new(move |c| {
                let limit = c.config.borrow().pubsub_buffer_limit();
                let _ = tx.send(c.push.borrow_mut().deliver(kind, &channel, &payload, limit));
            }),
        )
        .await;
        waiting.push(rx);
    }
    let mut receivers = 0;
    for rx in waiting {
        receivers += rx.recv_async().await.unwrap_or(0);
    }
    receivers
}

pub async fn publish(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::repl::propagate(&conn.core, &[b"PUBLISH", &args[1], &args[2]]);
    let n = publish_message(&conn.core, Kind::Channel, args[1].clone(), args[2].clone()).await;
    conn.reply().int(n);
    Ok(())
}

pub async fn spublish(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::repl::propagate(&conn.core, &[b"SPUBLISH", &args[1], &args[2]]);
    let n = publish_message(&conn.core, Kind::ShardChannel, args[1].clone(), args[2].clone()).await;
    conn.reply().int(n);
    Ok(())
}

/// PUBSUB CHANNELS / SHARDCHANNELS [pattern]: names with subscribers on
/// any core.
async fn channels(conn: &mut Connection, kind: Kind, pattern: Option<&Bytes>) -> CmdResult {
    let all = conn
        .core
        .invoke_on_all(move |core| core.push.borrow().names(kind).cloned().collect::<Vec<_>>())
        .await?;
    let names: BTreeSet<Bytes> = all
        .into_iter()
        .flatten()
        .filter(|n| pattern.is_none_or(|p| ringdb_types::glob::glob_match(p, n, false)))
        .collect();
    let mut out = conn.reply();
    out.array(names.len());
    for n in names {
        out.bulk(&n);
    }
    Ok(())
}

/// PUBSUB NUMSUB / SHARDNUMSUB [name ...]: subscribers of each name over
/// all cores.
async fn numsub(conn: &mut Connection, kind: Kind, names: &[Bytes]) -> CmdResult {
    let wanted = names.to_vec();
    let per_core = conn
        .core
        .invoke_on_all(move |core| {
            let hub = core.push.borrow();
            wanted.iter().map(|n| hub.subscriber_count(kind, n)).collect::<Vec<_>>()
        })
        .await?;
    // A flat array of name, count pairs in both protocols, as Redis sends
    // it (`addReplyArrayLen(c, (argc-2)*2)`), not a RESP3 map.
    let mut out = conn.reply();
    out.array(names.len() * 2);
    for (i, name) in names.iter().enumerate() {
        out.bulk(name);
        out.int(per_core.iter().map(|c| c[i]).sum::<usize>() as i64);
    }
    Ok(())
}

pub async fn pubsub_channels(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    channels(conn, Kind::Channel, args.get(2)).await
}

pub async fn pubsub_shardchannels(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    channels(conn, Kind::ShardChannel, args.get(2)).await
}

pub async fn pubsub_numsub(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    numsub(conn, Kind::Channel, &args[2..]).await
}

pub async fn pubsub_shardnumsub(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    numsub(conn, Kind::ShardChannel, &args[2..]).await
}

/// PUBSUB NUMPAT: distinct patterns subscribed on any core.
pub async fn pubsub_numpat(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let all = conn
        .core
        .invoke_on_all(|core| core.push.borrow().names(Kind::Pattern).cloned().collect::<Vec<_>>())
        .await?;
    let distinct: BTreeSet<Bytes> = all.into_iter().flatten().collect();
    conn.reply().int(distinct.len() as i64);
    Ok(())
}

pub async fn pubsub_help(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    crate::cmd::command::reply_help(
        &mut conn.reply(),
        b"PUBSUB",
        &[
            "CHANNELS [<pattern>]",
            "    Return the currently active channels matching a <pattern> (default: '*').",
            "NUMPAT",
            "    Return number of subscriptions to patterns.",
            "NUMSUB [<channel> ...]",
            "    Return the number of subscribers for the specified channels, excluding",
            "    pattern subscriptions(default: no channels).",
            "SHARDCHANNELS [<pattern>]",
            "    Return the currently active shard level channels matching a <pattern> (default: '*').",
            "SHARDNUMSUB [<shardchannel> ...]",
            "    Return the number of subscribers for the specified shard level channel(s)",
        ],
    );
    Ok(())
}

/// The error a RESP2 client in subscriber mode gets for other commands.
pub fn subscriber_mode_error(full_name: &str) -> CmdError {
    CmdError::owned(format!(
        "ERR Can't execute '{full_name}': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this context"
    ))
}
