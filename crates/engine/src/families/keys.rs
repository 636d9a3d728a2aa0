//! The keyspace ("generic") family: DEL, UNLINK, EXISTS, TOUCH, TYPE,
//! RENAME, RENAMENX, COPY, MOVE, OBJECT, RANDOMKEY, KEYS, SCAN, and the
//! expiry commands (EXPIRE … PERSIST, TTL …). Semantics follow Redis's `db.c`
//! and `expire.c`.

use crate::command::error::CmdResult;
use crate::command::spec::{acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec, Merge};
use crate::command::Ctx;
use crate::funnel::NotifyClass;
use bytes::Bytes;

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("del", -2, WRITE, Exec::Split { handler: del, merge: Merge::Sum, atomic: false })
        .keys(&[KeySpec::range(1, -1, 1, kf::RM | kf::DELETE)])
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .doc("generic", "1.0.0", "Deletes one or more keys.", "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1).", "key [key ...]"),
    CommandSpec::new("unlink", -2, WRITE | FAST, Exec::Split { handler: unlink, merge: Merge::Sum, atomic: false })
        .keys(&[KeySpec::range(1, -1, 1, kf::RM | kf::DELETE)])
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .doc("generic", "4.0.0", "Asynchronously deletes one or more keys.", "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of.", "key [key ...]"),
    CommandSpec::new("exists", -2, READONLY | FAST | WATCHABLE, Exec::Split { handler: exists, merge: Merge::Sum, atomic: false })
        .keys(&[KeySpec::range(1, -1, 1, kf::RO)])
        .acl(acl::KEYSPACE)
        .tips(&["request_policy:multi_shard", "response_policy:agg_sum"])
        .doc("generic", "1.0.0", "Determines whether one or more keys exist.", "O(N) where N is the number of keys to check.", "key [key ...]"),
];

fn delete_keys(ctx: &mut Ctx, args: &[Bytes]) -> i64 {
    let mut n = 0;
    for key in &args[1..] {
        // An expired key is reclaimed by the lookup and does not count.
        if ctx.ks.exists(key) && ctx.ks.delete(key) {
            ctx.ks.changed(key, NotifyClass::Generic, "del");
            n += 1;
        }
    }
    n
}

fn del(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let n = delete_keys(ctx, args);
    ctx.out.int(n);
    Ok(())
}

fn unlink(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    del(ctx, args)
}

fn exists(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let n = args[1..].iter().filter(|k| ctx.ks.exists(k)).count();
    ctx.out.int(n as i64);
    Ok(())
}
