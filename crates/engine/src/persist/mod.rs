//! Persistence formats, with no I/O: Redis's RDB (snapshots, DUMP/RESTORE),
//! its checksum and compression, the point-in-time snapshot of a keyspace,
//! and the append-only log's records.
//!
//! - [`crc64`], [`lzf`](ringdb_types::lzf): the checksum and compression RDB uses.
//! - [`encodings`]: listpacks, ziplists, intsets, zipmaps byte for byte.
//! - [`rdb`]: the RDB format (values, keys, files).
//! - [`dump`]: DUMP payloads and their checks.
//! - [`aof`]: the append-only log's records, replay and rewrite.
//! - [`snapshot`]: a shard's part of a snapshot file, and loading a shard.
//! - [`live`]: a snapshot taken while the shard keeps serving writes
//!   (pre-images of the tables changed before they were written).
//!
//! The server crate does the file work (where, when, fsync); everything
//! here works on bytes in memory and is tested with plain `#[test]`.

pub mod aof;
pub mod crc64;
pub mod dump;
pub mod encodings;
pub mod live;
pub mod rdb;
pub mod snapshot;
