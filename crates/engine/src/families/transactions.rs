//! Transactions: MULTI, EXEC, DISCARD, WATCH, UNWATCH. They change the
//! connection's state and run on its core (`Exec::Node`); the server crate
//! implements them (queueing in the router, EXEC in `route::multi`). Only
//! their rows live here.

use crate::command::spec::{
    acl, flags::*, keyflags as kf, CommandSpec, Exec, KeySpec, NodeCommand as N,
};

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd)).acl(acl::TRANSACTION)
}

pub static COMMANDS: &[CommandSpec] = &[
    node("multi", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | CONTROLS_MULTI, N::Multi)
        .doc("transactions", "1.2.0", "Starts a transaction.", "O(1)", ""),
    node("exec", 1, NOSCRIPT | LOADING | STALE | SKIP_SLOWLOG | CONTROLS_MULTI, N::Exec).doc(
        "transactions",
        "1.2.0",
        "Executes all commands in a transaction.",
        "Depends on commands in the transaction",
        "",
    ),
    node("discard", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | CONTROLS_MULTI, N::Discard)
        .doc(
            "transactions",
            "2.0.0",
            "Discards a transaction.",
            "O(N), when N is the number of queued commands",
            "",
        ),
    node("watch", -2, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY | CONTROLS_MULTI, N::Watch)
        .keys(&[KeySpec::range(1, -1, 1, kf::RO)])
        .doc(
            "transactions",
            "2.2.0",
            "Monitors changes to keys to determine the execution of a transaction.",
            "O(1) for every key.",
            "key [key ...]",
        ),
    node("unwatch", 1, NOSCRIPT | LOADING | STALE | FAST | ALLOW_BUSY, N::Unwatch).doc(
        "transactions",
        "2.2.0",
        "Forgets about watched keys of a transaction.",
        "O(1)",
        "",
    ),
];
