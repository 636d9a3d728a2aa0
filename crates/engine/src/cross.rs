//! The shard-side pieces of commands whose keys live on several shards,
//! with no I/O: how a split command (MGET, MSET, DEL, …) is cut into one
//! command per shard and how their replies merge, and how a gathered command
//! (RENAME, SUNIONSTORE, …) copies its keys out of their owners and writes
//! its changes back through each owner's funnel.
//!
//! The server drives these over the mesh under the cross-shard transaction
//! scheme; a script run that holds every shard ([`crate::lent`]) drives
//! them directly.

use crate::command::spec::FindKeys;
use crate::command::{ClientInfo, Merge};
use crate::funnel::{KeyEvent, NotifyClass};
use crate::keyspace::{Entry, Keyspace};
use crate::shard::{ShardCommand, ShardId, ShardState, SlotMap};
use bytes::Bytes;
use ringdb_protocol::{frame, ReplyWriter, Resp};
use std::collections::BTreeMap;

/// One shard's share of a split command.
pub struct SplitPart {
    pub shard: ShardId,
    pub command: ShardCommand,
    /// Original position (among the keys) of each key it was given.
    pub key_order: Vec<usize>,
}

/// Splits a command by the shards of its keys, in shard order. Each key
/// takes the arguments that follow it up to the key spec's step (MSET: key
/// and value).
pub fn split_by_shard(slot_map: &SlotMap, command: &ShardCommand) -> Vec<SplitPart> {
    let positions = command.spec.key_positions(&command.args).unwrap_or_default();
    let step = match command.spec.keys.first().map(|k| k.find) {
        Some(FindKeys::Range { step, .. }) if step > 0 => step as usize,
        _ => 1,
    };
    let mut by_shard: BTreeMap<ShardId, SplitPart> = BTreeMap::new();
    for (n, &pos) in positions.iter().enumerate() {
        let shard = slot_map.shard_of_key(&command.args[pos]);
        let part = by_shard.entry(shard).or_insert_with(|| SplitPart {
            shard,
            command: ShardCommand {
                args: vec![command.args[0].clone()],
                client: ClientInfo { part: true, ..command.client },
                ..command.clone()
            },
            key_order: Vec::new(),
        });
        let end = (pos + step).min(command.args.len());
        part.command.args.extend_from_slice(&command.args[pos..end]);
        part.key_order.push(n);
    }
    by_shard.into_values().collect()
}

/// Writes the reply of a split command from its parts' replies (in the
/// order of `parts`): the first error if a part failed, else the merge.
/// `None` when a part's reply is not what its merge expects (a bug).
pub fn merge_replies(
    merge: Merge,
    parts: &[SplitPart],
    replies: &[Vec<u8>],
    resp: Resp,
    out: &mut Vec<u8>,
) -> Option<()> {
    if let Some(err) = replies.iter().find(|r| frame::is_error(r)) {
        out.extend_from_slice(err);
        return Some(());
    }
    match merge {
        Merge::Ok => ReplyWriter::new(out, resp).ok(),
        Merge::Sum => {
            let total: i64 = replies.iter().filter_map(|r| frame::integer(r)).sum();
            ReplyWriter::new(out, resp).int(total);
        }
        Merge::Array => {
            let keys: usize = parts.iter().map(|p| p.key_order.len()).sum();
            let mut slots: Vec<&[u8]> = vec![&[]; keys];
            for (part, reply) in parts.iter().zip(replies) {
                let elements = frame::array_elements(reply, resp)?;
                for (range, &n) in elements.into_iter().zip(&part.key_order) {
                    slots[n] = &reply[range];
                }
            }
            ReplyWriter::new(out, resp).array(keys);
            for element in slots {
                out.extend_from_slice(element);
            }
        }
    }
    Some(())
}

/// Copies of keys with the database each came from.
pub type Copies = Vec<(usize, Entry)>;

/// Copies of `keys` in `databases`, skipping those expired at `now`.
pub fn copy_keys(
    keyspace: &Keyspace,
    keys: &[Bytes],
    databases: std::ops::Range<usize>,
    now: u64,
) -> Copies {
    let mut copies = Vec::new();
    for key in keys {
        for db in databases.clone() {
            if let Some(e) = keyspace.db(db).get(key).filter(|e| !e.is_expired(now)) {
                copies.push((db, e.clone()));
            }
        }
    }
    copies
}

/// A key's final state after a gathered command, for its owner.
pub struct Change {
    pub db: usize,
    pub key: Bytes,
    pub entry: Option<Entry>,
    pub events: Vec<(NotifyClass, &'static str)>,
}

/// The changes a gathered command's events describe, by owner, each key
/// once with every event it had, its final entry taken from `scratch`.
pub fn changes_by_owner(
    slot_map: &SlotMap,
    events: Vec<KeyEvent>,
    scratch: &mut Keyspace,
) -> BTreeMap<ShardId, Vec<Change>> {
    let mut changes: BTreeMap<ShardId, Vec<Change>> = BTreeMap::new();
    for KeyEvent { db, key, class, event } in events {
        let list = changes.entry(slot_map.shard_of_key(&key)).or_default();
        match list.iter_mut().find(|c| c.db == db && c.key == key) {
            Some(change) => change.events.push((class, event)),
            None => list.push(Change { db, key, entry: None, events: vec![(class, event)] }),
        }
    }
    for list in changes.values_mut() {
        for change in list.iter_mut() {
            change.entry = scratch.db_mut(change.db).remove(&change.key);
        }
    }
    changes
}

/// Applies a gathered command's changes on their owner (its keyspace and
/// state), through its funnel.
pub fn apply_changes(keyspace: &mut Keyspace, state: &mut ShardState, changes: Vec<Change>) {
    for change in changes {
        let db = keyspace.db_mut(change.db);
        match change.entry {
            Some(entry) => {
                db.insert(entry);
            }
            None => {
                db.remove(&change.key);
            }
        }
        for (class, event) in change.events {
            state.funnel.key_changed(change.db, &change.key, class, event);
        }
    }
}
