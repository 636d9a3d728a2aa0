//! The command table and what command handlers work with.
//!
//! - [`spec`]: a row of the table ([`CommandSpec`]): name, arity, flags, key
//!   specs, ACL categories, docs and how the command runs.
//! - [`table`](mod@table): the registry built once from every family's rows; lookup by
//!   name (and subcommand), arity checks, ids for statistics.
//! - [`ctx`]: the handler's view of the shard ([`Ctx`], [`KeyspaceView`]).
//! - [`docs`]: the argument trees of COMMAND DOCS, read from each row's syntax.
//! - [`args`], [`error`]: reading arguments and Redis's error texts.

pub mod args;
pub mod ctx;
pub mod docs;
pub mod error;
pub mod spec;
pub mod table;

pub use ctx::{ClientInfo, Ctx, KeyspaceView, Updater};
pub use error::{CmdError, CmdResult};
pub use spec::{CommandSpec, Exec, Handler, KeySpec, Merge, NodeCommand};
pub use table::{table, CommandTable, Registered};
