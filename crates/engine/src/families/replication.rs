//! The replication and cluster commands clients send to any server: ROLE,
//! WAIT, READONLY, READWRITE and ASKING. ringdb has no replicas and no
//! cluster mode (yet), so they answer as a Redis primary without replicas
//! and with cluster support disabled answers them: ROLE is `master` with
//! no replicas, WAIT is acknowledged by no replica (at once when none is
//! asked for, else after its timeout), the cluster commands get Redis's
//! "cluster support disabled" error. They run on the connection's core
//! (`Exec::Node`); the server crate implements them.

use crate::command::spec::{acl, flags::*, CommandSpec, Exec, NodeCommand as N};

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd))
}

pub static COMMANDS: &[CommandSpec] = &[
    node("role", 1, NOSCRIPT | LOADING | STALE | FAST | SENTINEL, N::Role)
        .acl(acl::ADMIN | acl::DANGEROUS)
        .doc("server", "2.8.12", "Returns the replication role.", "O(1)", ""),
    node("wait", 3, 0, N::Wait)
        .acl(acl::CONNECTION)
        .tips(&["request_policy:all_shards", "response_policy:agg_min"])
        .doc(
            "generic",
            "3.0.0",
            "Blocks until the asynchronous replication of all preceding write commands sent by the connection is completed.",
            "O(1)",
            "numreplicas:integer timeout:integer",
        ),
    node("readonly", 1, FAST | LOADING | STALE, N::ClusterDisabled)
        .acl(acl::CONNECTION)
        .doc("cluster", "3.0.0", "Enables read-only queries for a connection to a Redis Cluster replica node.", "O(1)", ""),
    node("readwrite", 1, FAST | LOADING | STALE, N::ClusterDisabled)
        .acl(acl::CONNECTION)
        .doc("cluster", "3.0.0", "Enables read-write queries for a connection to a Reids Cluster replica node.", "O(1)", ""),
    node("asking", 1, FAST, N::ClusterDisabled)
        .acl(acl::CONNECTION)
        .doc("cluster", "3.0.0", "Signals that a cluster client is following an -ASK redirect.", "O(1)", ""),
];
