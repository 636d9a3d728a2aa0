//! The ringdb server: configuration, executors, listeners, connections, the
//! mesh between cores, routing and cross-shard transactions.
//!
//! Layout (the path of a request, in order):
//! - [`net`]: listeners and the connection loop (read, parse, write);
//! - [`route`]: which shard each command runs on, batching per shard,
//!   cross-shard operations and the transaction scheme;
//! - [`mesh`]: how cores ask each other to run things;
//! - [`push`]: what is sent to clients unasked (Pub/Sub messages), per core;
//! - [`cmd`]: commands that run on the connection's core (connection state,
//!   CLIENT, CONFIG, INFO, COMMAND, DBSIZE, SCAN, …);
//! - [`node`]: start-up, one pinned glommio executor per shard;
//! - [`config`]: settings, the TOML file and command-line flags;
//! - [`expiry`]: the per-core active expiry task;
//! - [`aof`], [`persist`]: the append-only logs and snapshots; [`check_aof`]:
//!   `ringdb check-aof`, the offline check of the logs;
//! - [`repl`]: replication, as Redis speaks it, as primary and replica;
//! - [`logging`]: `tracing` set up with Redis's log levels;
//! - [`memory`]: allocation accounting for INFO memory;
//! - [`metrics`]: the per-core sampler of INFO's instantaneous rates;
//! - [`process`], [`proctitle`]: the process as supervisors see it (daemon,
//!   pid file, OOM score) and the title `ps` shows.
//!
//! Commands that run on a shard are parsed by `ringdb-protocol`, looked up in
//! the table of `ringdb-engine`, executed by the engine's command families,
//! and their replies written by `ringdb-protocol`'s writer. Only this crate
//! touches glommio.

pub mod aof;
pub mod cgroup;
pub mod check_aof;
pub mod cmd;
pub mod config;
pub mod expiry;
pub mod loading;
pub mod logging;
pub mod memlock;
pub mod memory;
pub mod mesh;
pub mod metrics;
pub mod net;
pub mod node;
pub mod persist;
pub mod process;
pub mod proctitle;
pub mod push;
pub mod repl;
pub mod route;
pub mod supervise;
