//! ringdb's data types and the pure algorithms over them: no I/O, no shards,
//! no knowledge of commands.
//!
//! Layout:
//! - [`small_bytes`]: the compact byte string used for keys and short values.
//! - [`slot`]: key → Redis Cluster hash slot (CRC16, `{hash tags}`).
//! - [`glob`]: Redis's glob matcher (KEYS, SCAN MATCH, CONFIG GET, …).
//! - [`number`]: Redis's exact rules for reading and printing numbers.
//! - [`bits`]: bitmap algorithms (BITCOUNT, BITPOS, BITFIELD, BITOP).
//! - [`lcs`]: longest common subsequence (LCS).
//! - [`sha1`]: SHA-1, for DEBUG DIGEST's Redis-compatible signatures.
//!
//! Everything here is tested with plain `#[test]`s beside the code.

pub mod bits;
pub mod glob;
pub mod lcs;
pub mod number;
pub mod sha1;
pub mod slot;
pub mod small_bytes;

pub use small_bytes::SmallBytes;
