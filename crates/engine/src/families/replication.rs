//! The replication and cluster commands: ROLE, WAIT, REPLCONF, SYNC,
//! PSYNC, REPLICAOF (SLAVEOF), CLUSTER, READONLY, READWRITE and ASKING.
//! ringdb has no cluster mode (yet): the cluster commands get Redis's
//! "cluster support disabled" error. They run on the connection's core
//! (`Exec::Node`); the server crate implements them (`repl`).

use crate::command::spec::{acl, flags::*, CommandSpec, Exec, NodeCommand as N};

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd))
}

/// CLUSTER's subcommands (Redis 7's rows): with cluster support disabled
/// every one answers Redis's error.
static CLUSTER: &[CommandSpec] = &[
    node("addslots", -3, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Assigns new hash slots to a node.", "O(N) where N is the total number of hash slot arguments", "slot [slot ...]"),
    node("addslotsrange", -4, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "7.0.0", "Assigns new hash slot ranges to a node.", "O(N) where N is the total number of the slots between the start slot and end slot arguments.", "start-slot end-slot [start-slot end-slot ...]"),
    node("bumpepoch", 2, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "3.0.0", "Advances the cluster config epoch.", "O(1)", ""),
    node("count-failure-reports", 3, ADMIN | STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "3.0.0", "Returns the number of active failure reports active for a node.", "O(N) where N is the number of failure reports", "node-id"),
    node("countkeysinslot", 3, STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Returns the number of keys in a hash slot.", "O(1)", "slot"),
    node("delslots", -3, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Sets hash slots as unbound for a node.", "O(N) where N is the total number of hash slot arguments", "slot [slot ...]"),
    node("delslotsrange", -4, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "7.0.0", "Sets hash slot ranges as unbound for a node.", "O(N) where N is the total number of the slots between the start slot and end slot arguments.", "start-slot end-slot [start-slot end-slot ...]"),
    node("failover", -2, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Forces a replica to perform a manual failover of its master.", "O(1)", "[FORCE | TAKEOVER]"),
    node("flushslots", 2, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Deletes all slots information from a node.", "O(1)", ""),
    node("forget", 3, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Removes a node from the nodes table.", "O(1)", "node-id"),
    node("getkeysinslot", 4, STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "3.0.0", "Returns the key names in a hash slot.", "O(N) where N is the number of requested keys", "slot count"),
    node("help", 2, LOADING | STALE, N::ClusterDisabled)
        .doc("cluster", "5.0.0", "Returns helpful text about the different subcommands.", "O(1)", ""),
    node("info", 2, STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "3.0.0", "Returns information about the state of a node.", "O(1)", ""),
    node("keyslot", 3, STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Returns the hash slot for a key.", "O(N) where N is the number of bytes in the key", "key"),
    node("links", 2, STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "7.0.0", "Returns a list of all TCP links to and from peer nodes.", "O(N) where N is the total number of Cluster nodes", ""),
    node("meet", -4, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .history(&[("4.0.0", "Added the optional `cluster_bus_port` argument.")])
        .doc("cluster", "3.0.0", "Forces a node to handshake with another node.", "O(1)", "ip port [cluster-bus-port]"),
    node("myid", 2, STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Returns the ID of a node.", "O(1)", ""),
    node("myshardid", 2, STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "7.2.0", "Returns the shard ID of a node.", "O(1)", ""),
    node("nodes", 2, STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "3.0.0", "Returns the cluster configuration for a node.", "O(N) where N is the total number of Cluster nodes", ""),
    node("replicas", 3, ADMIN | STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "5.0.0", "Lists the replica nodes of a master node.", "O(N) where N is the number of replicas.", "node-id"),
    node("replicate", 3, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Configure a node as replica of a master node.", "O(1)", "node-id"),
    node("reset", -2, ADMIN | STALE | NOSCRIPT, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Resets a node.", "O(N) where N is the number of known nodes. The command may execute a FLUSHALL as a side effect.", "[HARD | SOFT]"),
    node("saveconfig", 2, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Forces a node to save the cluster configuration to disk.", "O(1)", ""),
    node("set-config-epoch", 3, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Sets the configuration epoch for a new node.", "O(1)", "config-epoch"),
    node("setslot", -4, NO_ASYNC_LOADING | ADMIN | STALE, N::ClusterDisabled)
        .doc("cluster", "3.0.0", "Binds a hash slot to a node.", "O(1)", "slot <IMPORTING importing=node-id | MIGRATING migrating=node-id | NODE node=node-id | STABLE>"),
    node("shards", 2, LOADING | STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .doc("cluster", "7.0.0", "Returns the mapping of cluster slots to shards.", "O(N) where N is the total number of cluster nodes", ""),
    node("slaves", 3, ADMIN | STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .deprecated("5.0.0", "`CLUSTER REPLICAS`")
        .doc("cluster", "3.0.0", "Lists the replica nodes of a master node.", "O(N) where N is the number of replicas.", "node-id"),
    node("slots", 2, LOADING | STALE, N::ClusterDisabled)
        .tips(&["nondeterministic_output"])
        .history(&[("4.0.0", "Added node IDs."), ("7.0.0", "Added additional networking metadata field.")])
        .deprecated("7.0.0", "`CLUSTER SHARDS`")
        .doc("cluster", "3.0.0", "Returns the mapping of cluster slots to nodes.", "O(N) where N is the total number of Cluster nodes", ""),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::container("cluster", CLUSTER).doc(
        "cluster",
        "3.0.0",
        "A container for Redis Cluster commands.",
        "Depends on subcommand.",
        "",
    ),
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
    node("replconf", -1, ADMIN | NOSCRIPT | LOADING | STALE | ALLOW_BUSY, N::Replconf)
        .doc("server", "3.0.0", "An internal command for configuring the replication stream.", "O(1)", ""),
    node("psync", -3, NO_ASYNC_LOADING | ADMIN | NO_MULTI | NOSCRIPT, N::Sync)
        .doc("server", "2.8.0", "An internal command used in replication.", "", "replicationid offset:integer"),
    node("sync", 1, NO_ASYNC_LOADING | ADMIN | NO_MULTI | NOSCRIPT, N::Sync)
        .doc("server", "1.0.0", "An internal command used in replication.", "", ""),
    node("replicaof", 3, NO_ASYNC_LOADING | ADMIN | NOSCRIPT | STALE, N::Replicaof)
        .doc("server", "5.0.0", "Configures a server as replica of another, or promotes it to a master.", "O(1)", "<host port | NO ONE>"),
    node("slaveof", 3, NO_ASYNC_LOADING | ADMIN | NOSCRIPT | STALE, N::Replicaof)
        .deprecated("5.0.0", "`REPLICAOF`")
        .doc("server", "1.0.0", "Sets a Redis server as a replica of another, or promotes it to being a master.", "O(1)", "<host port | NO ONE>"),
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
