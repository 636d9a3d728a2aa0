//! Sorted sets: ZADD, ZINCRBY, ZREM, ZCARD, ZCOUNT, ZLEXCOUNT, ZSCORE,
//! ZMSCORE, ZRANK, ZREVRANK, ZRANGE and its older forms, ZRANGESTORE, the
//! ZREMRANGEBY* commands, ZPOPMIN, ZPOPMAX, ZMPOP (and the blocking BZPOPMIN,
//! BZPOPMAX, BZMPOP), ZRANDMEMBER, ZUNION, ZINTER,
//! ZDIFF and their STORE forms, ZINTERCARD, ZSCAN. Semantics, reply shapes
//! and error texts follow Redis 7's `t_zset.c` (ZRANK/ZREVRANK's WITHSCORE is
//! 7.2's).
//!
//! Layout:
//! - this file: the rows, and what every command shares (typed lookups,
//!   deleting emptied keys, member/score replies, building a result set);
//! - [`parse`]: range bounds, LIMIT and the ranged integers, with Redis's
//!   error texts;
//! - [`write`]: ZADD, ZINCRBY, ZREM, ZREMRANGEBY*, the pops (blocking too);
//! - [`read`]: the lookups, ZRANGE and its forms (also ZRANGESTORE),
//!   ZRANDMEMBER, ZSCAN;
//! - [`algebra`]: ZUNION, ZINTER, ZDIFF, their STORE forms, ZINTERCARD
//!   (plain sets are accepted as inputs, every member scoring 1).
//!
//! Multi-key commands are ordinary shard handlers: when their keys span
//! shards the router runs them on a gathered copy (see the server's
//! `route/cross.rs`), so each handler only has to be right on one keyspace.

mod algebra;
mod parse;
mod read;
#[cfg(test)]
mod tests;
mod write;

pub(crate) use write::zadd;

use crate::command::error::{CmdError, WRONG_TYPE};
use crate::command::spec::{
    acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec, TimeoutAt, Waits,
};
use crate::command::{Ctx, KeyspaceView, Updater};
use crate::funnel::NotifyClass;
use crate::keyspace::{typed, Value};
use ringdb_protocol::ReplyWriter;
use ringdb_types::limits::Limits;
use ringdb_types::pack::Item;
use ringdb_types::zset::{AddFlags, ZSet};

const ONE_RO: &[KeySpec] = &[KeySpec::one(1, kf::RO | kf::ACCESS)];
/// BZPOPMIN and BZPOPMAX: every argument but the timeout.
const BPOP_KEYS: &[KeySpec] = &[KeySpec::range(1, -2, 1, kf::RW | kf::ACCESS | kf::DELETE)];
const ONE_DELETE: &[KeySpec] = &[KeySpec::one(1, kf::RW | kf::DELETE)];
const ONE_POP: &[KeySpec] = &[KeySpec::one(1, kf::RW | kf::ACCESS | kf::DELETE)];
const NUMKEYS_RO: &[KeySpec] = &[KeySpec::keynum(1, kf::RO | kf::ACCESS)];
const STORE_NUMKEYS: &[KeySpec] =
    &[KeySpec::one(1, kf::OW | kf::UPDATE), KeySpec::keynum(2, kf::RO | kf::ACCESS)];

const RANGE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements being returned. If M is constant (e.g. always asking for the first 10 elements with LIMIT), you can consider it O(log(N)).";
const REMOVE_COMPLEXITY: &str = "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements removed by the operation.";
const UNION_COMPLEXITY: &str = "O(N)+O(M*log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.";
const INTER_COMPLEXITY: &str = "O(N*K)+O(M*log(M)) worst case with N being the smallest input sorted set, K being the number of input sorted sets and M being the number of elements in the resulting sorted set.";
const DIFF_COMPLEXITY: &str = "O(L + (N-K)log(N)) worst case where L is the total number of elements in all the sets, N is the size of the first set, and K is the size of the result set.";
const POP_COMPLEXITY: &str = "O(log(N)*M) with N being the number of elements in the sorted set, and M being the number of elements popped.";

/// A sorted-set row: group `sorted_set`, ACL category `@sortedset`.
const fn row(
    name: &'static str,
    arity: i32,
    flags: u32,
    handler: crate::command::Handler,
    keys: &'static [KeySpec],
) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Shard(handler)).keys(keys).acl(acl::SORTEDSET)
}

pub static COMMANDS: &[CommandSpec] = &[
    row("zadd", -4, WRITE | DENYOOM | FAST | AS_IS, write::zadd, &[KeySpec::one(1, kf::RW | kf::UPDATE)])
        .doc("sorted_set", "1.2.0", "Adds one or more members to a sorted set, or updates their scores. Creates the key if it doesn't exist.", "O(log(N)) for each item added, where N is the number of elements in the sorted set.", "key [NX | XX] [GT | LT] [CH] [INCR] score member [score member ...]")
        .history(&[
            ("2.4.0", "Accepts multiple elements."),
            ("3.0.2", "Added the `XX`, `NX`, `CH` and `INCR` options."),
            ("6.2.0", "Added the `GT` and `LT` options."),
        ]),
    row("zincrby", 4, WRITE | DENYOOM | FAST | AS_IS, write::zincrby, &[KeySpec::one(1, kf::RW | kf::ACCESS | kf::UPDATE)])
        .doc("sorted_set", "1.2.0", "Increments the score of a member in a sorted set.", "O(log(N)) where N is the number of elements in the sorted set.", "key increment member"),
    row("zrem", -3, WRITE | FAST | AS_IS, write::zrem, ONE_DELETE)
        .doc("sorted_set", "1.2.0", "Removes one or more members from a sorted set. Deletes the sorted set if all members were removed.", "O(M*log(N)) with N being the number of elements in the sorted set and M the number of elements to be removed.", "key member [member ...]")
        .history(&[("2.4.0", "Accepts multiple elements.")]),
    row("zcard", 2, READONLY | FAST | WATCHABLE, read::zcard, &[KeySpec::one(1, kf::RO)])
        .doc("sorted_set", "1.2.0", "Returns the number of members in a sorted set.", "O(1)", "key"),
    row("zcount", 4, READONLY | FAST | WATCHABLE, read::zcount, ONE_RO)
        .doc("sorted_set", "2.0.0", "Returns the count of members in a sorted set that have scores within a range.", "O(log(N)) with N being the number of elements in the sorted set.", "key min:double max:double"),
    row("zlexcount", 4, READONLY | FAST | WATCHABLE, read::zlexcount, ONE_RO)
        .doc("sorted_set", "2.8.9", "Returns the number of members in a sorted set within a lexicographical range.", "O(log(N)) with N being the number of elements in the sorted set.", "key min max"),
    row("zscore", 3, READONLY | FAST | WATCHABLE, read::zscore, ONE_RO)
        .doc("sorted_set", "1.2.0", "Returns the score of a member in a sorted set.", "O(1)", "key member"),
    row("zmscore", -3, READONLY | FAST | WATCHABLE, read::zmscore, ONE_RO)
        .doc("sorted_set", "6.2.0", "Returns the score of one or more members in a sorted set.", "O(N) where N is the number of members being requested.", "key member [member ...]"),
    row("zrank", -3, READONLY | FAST | WATCHABLE, read::zrank, ONE_RO)
        .doc("sorted_set", "2.0.0", "Returns the index of a member in a sorted set ordered by ascending scores.", "O(log(N))", "key member [WITHSCORE]")
        .history(&[("7.2.0", "Added the optional `WITHSCORE` argument.")]),
    row("zrevrank", -3, READONLY | FAST | WATCHABLE, read::zrevrank, ONE_RO)
        .doc("sorted_set", "2.0.0", "Returns the index of a member in a sorted set ordered by descending scores.", "O(log(N))", "key member [WITHSCORE]")
        .history(&[("7.2.0", "Added the optional `WITHSCORE` argument.")]),
    row("zrange", -4, READONLY | WATCHABLE, read::zrange, ONE_RO)
        .doc("sorted_set", "1.2.0", "Returns members in a sorted set within a range of indexes.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.", "key start:string stop:string [BYSCORE | BYLEX] [REV] [LIMIT offset count] [WITHSCORES]")
        .history(&[("6.2.0", "Added the `REV`, `BYSCORE`, `BYLEX` and `LIMIT` options.")]),
    row("zrangestore", -5, WRITE | DENYOOM, read::zrangestore, &[KeySpec::one(1, kf::OW | kf::UPDATE), KeySpec::one(2, kf::RO | kf::ACCESS)])
        .doc("sorted_set", "6.2.0", "Stores a range of members from sorted set in a key.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements stored into the destination key.", "dst src min max [BYSCORE | BYLEX] [REV] [LIMIT offset count]"),
    row("zrevrange", -4, READONLY, read::zrevrange, ONE_RO)
        .doc("sorted_set", "1.2.0", "Returns members in a sorted set within a range of indexes in reverse order.", "O(log(N)+M) with N being the number of elements in the sorted set and M the number of elements returned.", "key start stop [WITHSCORES]")
        .deprecated("6.2.0", "`ZRANGE` with the `REV` argument"),
    row("zrangebyscore", -4, READONLY, read::zrangebyscore, ONE_RO)
        .doc("sorted_set", "1.0.5", "Returns members in a sorted set within a range of scores.", RANGE_COMPLEXITY, "key min:double max:double [WITHSCORES] [LIMIT offset count]")
        .history(&[("2.0.0", "Added the `WITHSCORES` modifier.")])
        .deprecated("6.2.0", "`ZRANGE` with the `BYSCORE` argument"),
    row("zrevrangebyscore", -4, READONLY, read::zrevrangebyscore, ONE_RO)
        .doc("sorted_set", "2.2.0", "Returns members in a sorted set within a range of scores in reverse order.", RANGE_COMPLEXITY, "key max:double min:double [WITHSCORES] [LIMIT offset count]")
        .history(&[("2.1.6", "`min` and `max` can be exclusive.")])
        .deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYSCORE` arguments"),
    row("zrangebylex", -4, READONLY, read::zrangebylex, ONE_RO)
        .doc("sorted_set", "2.8.9", "Returns members in a sorted set within a lexicographical range.", RANGE_COMPLEXITY, "key min max [LIMIT offset count]")
        .deprecated("6.2.0", "`ZRANGE` with the `BYLEX` argument"),
    row("zrevrangebylex", -4, READONLY, read::zrevrangebylex, ONE_RO)
        .doc("sorted_set", "2.8.9", "Returns members in a sorted set within a lexicographical range in reverse order.", RANGE_COMPLEXITY, "key max min [LIMIT offset count]")
        .deprecated("6.2.0", "`ZRANGE` with the `REV` and `BYLEX` arguments"),
    row("zremrangebyrank", 4, WRITE | AS_IS, write::zremrangebyrank, ONE_DELETE)
        .doc("sorted_set", "2.0.0", "Removes members in a sorted set within a range of indexes. Deletes the sorted set if all members were removed.", REMOVE_COMPLEXITY, "key start stop"),
    row("zremrangebyscore", 4, WRITE | AS_IS, write::zremrangebyscore, ONE_DELETE)
        .doc("sorted_set", "1.2.0", "Removes members in a sorted set within a range of scores. Deletes the sorted set if all members were removed.", REMOVE_COMPLEXITY, "key min:double max:double"),
    row("zremrangebylex", 4, WRITE | AS_IS, write::zremrangebylex, ONE_DELETE)
        .doc("sorted_set", "2.8.9", "Removes members in a sorted set within a lexicographical range. Deletes the sorted set if all members were removed.", REMOVE_COMPLEXITY, "key min max"),
    row("zpopmin", -2, WRITE | FAST | AS_IS, write::zpopmin, ONE_POP)
        .doc("sorted_set", "5.0.0", "Returns the lowest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", POP_COMPLEXITY, "key [count]"),
    row("zpopmax", -2, WRITE | FAST | AS_IS, write::zpopmax, ONE_POP)
        .doc("sorted_set", "5.0.0", "Returns the highest-scoring members from a sorted set after removing them. Deletes the sorted set if the last member was popped.", POP_COMPLEXITY, "key [count]"),
    row("zmpop", -4, WRITE, write::zmpop, &[KeySpec::keynum(1, kf::RW | kf::ACCESS | kf::DELETE)])
        .doc("sorted_set", "7.0.0", "Returns the highest- or lowest-scoring members from one or more sorted sets after removing them. Deletes the sorted set if the last member was popped.", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", "numkeys key [key ...] <MIN | MAX> [COUNT count]"),
    // The blocking forms serve the client if they can and otherwise reply
    // the timeout's null; the server waits and retries (`crate::blocking`).
    row("bzpopmin", -3, WRITE | NOSCRIPT | FAST | BLOCKING, write::bzpopmin, BPOP_KEYS)
        .blocks(TimeoutAt::Last, Waits::Pop)
        .doc("sorted_set", "5.0.0", "Removes and returns the member with the lowest score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "O(log(N)) with N being the number of elements in the sorted set.", "key [key ...] timeout:double")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]),
    row("bzpopmax", -3, WRITE | NOSCRIPT | FAST | BLOCKING, write::bzpopmax, BPOP_KEYS)
        .blocks(TimeoutAt::Last, Waits::Pop)
        .doc("sorted_set", "5.0.0", "Removes and returns the member with the highest score from one or more sorted sets. Blocks until a member available otherwise.  Deletes the sorted set if the last element was popped.", "O(log(N)) with N being the number of elements in the sorted set.", "key [key ...] timeout:double")
        .history(&[("6.0.0", "`timeout` is interpreted as a double instead of an integer.")]),
    row("bzmpop", -5, WRITE | BLOCKING, write::bzmpop, &[KeySpec::keynum(2, kf::RW | kf::ACCESS | kf::DELETE)])
        .blocks(TimeoutAt::First, Waits::Pop)
        .doc("sorted_set", "7.0.0", "Removes and returns a member by score from one or more sorted sets. Blocks until a member is available otherwise. Deletes the sorted set if the last element was popped.", "O(K) + O(M*log(N)) where K is the number of provided keys, N being the number of elements in the sorted set, and M being the number of elements popped.", "timeout:double numkeys key [key ...] <MIN | MAX> [COUNT count]"),
    row("zrandmember", -2, READONLY, read::zrandmember, ONE_RO)
        .tips(&["nondeterministic_output"])
        .doc("sorted_set", "6.2.0", "Returns one or more random members from a sorted set.", "O(N) where N is the number of members returned", "key [count [WITHSCORES]]"),
    row("zunion", -3, READONLY, algebra::zunion, NUMKEYS_RO)
        .doc("sorted_set", "6.2.0", "Returns the union of multiple sorted sets.", UNION_COMPLEXITY, "numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>] [WITHSCORES]"),
    row("zinter", -3, READONLY, algebra::zinter, NUMKEYS_RO)
        .doc("sorted_set", "6.2.0", "Returns the intersect of multiple sorted sets.", INTER_COMPLEXITY, "numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>] [WITHSCORES]"),
    row("zdiff", -3, READONLY, algebra::zdiff, NUMKEYS_RO)
        .doc("sorted_set", "6.2.0", "Returns the difference between multiple sorted sets.", DIFF_COMPLEXITY, "numkeys key [key ...] [WITHSCORES]"),
    row("zunionstore", -4, WRITE | DENYOOM, algebra::zunionstore, STORE_NUMKEYS)
        .doc("sorted_set", "2.0.0", "Stores the union of multiple sorted sets in a key.", "O(N)+O(M log(M)) with N being the sum of the sizes of the input sorted sets, and M being the number of elements in the resulting sorted set.", "destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>]"),
    row("zinterstore", -4, WRITE | DENYOOM, algebra::zinterstore, STORE_NUMKEYS)
        .doc("sorted_set", "2.0.0", "Stores the intersect of multiple sorted sets in a key.", INTER_COMPLEXITY, "destination numkeys key [key ...] [WEIGHTS weight [weight ...]] [AGGREGATE <SUM | MIN | MAX>]"),
    row("zdiffstore", -4, WRITE | DENYOOM, algebra::zdiffstore, STORE_NUMKEYS)
        .doc("sorted_set", "6.2.0", "Stores the difference of multiple sorted sets in a key.", DIFF_COMPLEXITY, "destination numkeys key [key ...]"),
    row("zintercard", -3, READONLY, algebra::zintercard, NUMKEYS_RO)
        .doc("sorted_set", "7.0.0", "Returns the number of members of the intersect of multiple sorted sets.", "O(N*K) worst case with N being the smallest input sorted set, K being the number of input sorted sets.", "numkeys key [key ...] [LIMIT limit]"),
    row("zscan", -3, READONLY, read::zscan, ONE_RO)
        .tips(&["nondeterministic_output"])
        .doc("sorted_set", "2.8.0", "Iterates over members and scores of a sorted set.", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection.", "key cursor [MATCH pattern] [COUNT count]"),
];

/// The sorted set at `key` for reading: `Ok(None)` when missing, WRONGTYPE
/// when the key holds another type.
pub fn read_zset<'a>(ks: &'a mut KeyspaceView, key: &[u8]) -> Result<Option<&'a ZSet>, CmdError> {
    match ks.read(key) {
        None => Ok(None),
        Some(e) => match &e.value {
            Value::ZSet(z) => Ok(Some(z)),
            _ => Err(WRONG_TYPE),
        },
    }
}

/// The sorted set at `key` for writing.
pub fn write_zset<'v>(
    ks: &'v mut KeyspaceView,
    key: &'v [u8],
) -> Result<Option<Updater<'v, ZSet>>, CmdError> {
    ks.write_as(key, typed)
}

/// After members were removed from `key` (its updater fired the event):
/// deletes the key when it became empty, with Redis's "del" event.
fn delete_if_emptied(ks: &mut KeyspaceView, key: &[u8]) {
    let emptied = matches!(ks.peek(key).map(|e| &e.value), Some(Value::ZSet(z)) if z.is_empty());
    if emptied {
        ks.delete(key);
    }
}

/// A member as a bulk string.
fn bulk_member(out: &mut ReplyWriter, member: &Item<'_>) {
    let mut tmp = [0u8; 24];
    out.bulk(member.bytes(&mut tmp));
}

/// Members (and scores) as ZRANGE replies with them: a flat array in RESP2,
/// `[member, score]` pairs in RESP3 (not a map: the order matters).
fn reply_members<'a>(
    out: &mut ReplyWriter,
    members: impl ExactSizeIterator<Item = (Item<'a>, f64)>,
    with_scores: bool,
) {
    let pairs = with_scores && out.is_resp3();
    out.array(if with_scores && !pairs { members.len() * 2 } else { members.len() });
    for (member, score) in members {
        if pairs {
            out.array(2);
        }
        bulk_member(out, &member);
        if with_scores {
            out.double(score);
        }
    }
}

/// A new sorted set holding `members` (distinct), encoded as Redis encodes
/// STORE results (`zsetConvertToListpackIfNeeded`): a listpack when the count
/// and the longest member allow it.
fn build_zset(members: &[(Vec<u8>, f64)], limits: &Limits) -> ZSet {
    let longest = members.iter().map(|(m, _)| m.len()).max().unwrap_or(0);
    let mut z = ZSet::new_for(members.len(), longest, limits);
    for (member, score) in members {
        // Scores of results are never NaN: the operations turn NaN into 0.
        let _ = z.add(member, *score, AddFlags::default(), limits);
    }
    z
}

/// Ends a STORE command: stores `members` at `dst` (event `event`) and
/// replies with their count, or, when there are none, deletes `dst` (event
/// "del" if it existed) and replies 0.
pub(crate) fn store_result(
    ctx: &mut Ctx,
    dst: &[u8],
    members: &[(Vec<u8>, f64)],
    event: &'static str,
) {
    if members.is_empty() {
        ctx.ks.delete(dst);
        ctx.out.int(0);
        return;
    }
    let limits = ctx.ks.state.settings.limits;
    ctx.ks.set(dst, Value::ZSet(build_zset(members, &limits)), false, NotifyClass::ZSet, event);
    ctx.out.int(members.len() as i64);
}
