//! A ringdb shard: the keyspace a core owns and the commands that run on it.
//!
//! Layout:
//! - [`keyspace`]: databases split into one hash table per slot; entries.
//! - [`shard`]: the shard itself, its statistics and settings, and command
//!   execution (single commands, batches, transaction lock steps).
//! - [`command`]: the command table (rows, registry, key specs) and the
//!   handler context.
//! - [`families`]: one module per command family with its rows and handlers.
//! - [`funnel`]: the write funnel every change goes through.
//! - [`effects`]: what a shard's turn produced, taken in one place.
//! - [`locks`]: intent locks and the wait queue of cross-shard transactions.
//! - [`cross`]: the shard-side pieces of cross-shard commands (splitting,
//!   merging replies, copies of gathered keys and their changes back).
//! - [`lent`]: a command (a script) that runs with every shard lent to it.
//! - [`expire`]: the active expiry cycle.
//! - [`digest`]: DEBUG DIGEST's Redis-compatible dataset signatures.
//! - [`scan`]: SCAN's cursor over slots and shards.
//! - [`watch`]: versions of WATCHed keys (optimistic MULTI/EXEC).
//! - [`query_watch`]: reactive queries (`GET.WATCH`): which reads are
//!   watched on this shard, re-run when their key changes.
//! - [`scripting`]: Lua scripts and functions (one Lua state per shard).
//! - [`tracking`]: client-side caching (tracked keys, invalidations).
//! - [`persist`]: RDB (snapshots, DUMP/RESTORE), snapshot cursors and the
//!   append-only log's records, as bytes in memory.
//! - [`hotkeys`]: hot-key rules, sliding-window counters and the top-keys
//!   sketch.
//!
//! The rule this crate keeps: no I/O, no threads, no glommio. A shard is plain
//! data driven by the server; everything here is tested with plain `#[test]`.

pub mod acl;
pub mod blocking;
pub mod command;
pub mod cross;
pub mod digest;
pub mod effects;
pub mod evict;
pub mod expire;
pub mod families;
pub mod funnel;
pub mod hotkeys;
pub mod keyspace;
pub mod latency;
pub mod lazyfree;
pub mod lent;
pub mod locks;
pub mod monitor;
pub mod pause;
pub mod persist;
pub mod query_watch;
pub mod scan;
pub mod scripting;
pub mod shard;
pub mod slowlog;
pub mod tracking;
pub mod watch;

pub use shard::{Shard, ShardCommand, ShardId, SlotMap};
