//! The command families: one module per family, each exporting its rows of
//! the command table (`COMMANDS`) and the shard-side handlers behind them.
//!
//! Commands that run on the connection's core (`Exec::Node`) have their rows
//! here too, so that there is one table; the server crate implements them.

pub mod bitmap;
pub mod bloom;
pub mod command;
pub mod connection;
pub mod debug;
pub mod dump;
pub mod geo;
pub mod hash;
pub mod hll;
pub mod hotkeys;
pub mod keys;
pub mod list;
pub mod lolwut;
pub mod memory;
pub mod migrate;
pub mod pubsub;
pub mod replication;
pub mod scripting;
pub mod server;
pub mod set;
pub mod sort;
pub mod stream;
pub mod string;
pub mod transactions;
pub mod zset;

use crate::command::CommandSpec;

/// Every family's rows, in the order COMMAND lists them.
pub static ALL: &[&[CommandSpec]] = &[
    string::COMMANDS,
    bitmap::COMMANDS,
    list::COMMANDS,
    hash::COMMANDS,
    set::COMMANDS,
    zset::COMMANDS,
    geo::COMMANDS,
    stream::COMMANDS,
    hll::COMMANDS,
    bloom::COMMANDS,
    keys::COMMANDS,
    sort::COMMANDS,
    dump::COMMANDS,
    migrate::COMMANDS,
    memory::COMMANDS,
    transactions::COMMANDS,
    pubsub::COMMANDS,
    connection::COMMANDS,
    server::COMMANDS,
    lolwut::COMMANDS,
    replication::COMMANDS,
    scripting::COMMANDS,
    command::COMMANDS,
    hotkeys::COMMANDS,
];
