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
//! - [`limits`]: the CONFIG thresholds that pick a collection's encoding.
//! - [`pack`]: the compact contiguous encoding of small collections (listpack's
//!   role), also the nodes of big lists and the leaves of big sorted sets.
//! - [`intset`]: sorted integers at the smallest width (small integer sets).
//! - [`table`]: the segmented hash table of big hashes, sets and sorted-set
//!   indexes, with a SCAN cursor that survives resizes.
//! - [`hash`]: hashes (`listpack` / `hashtable`).
//! - [`list`]: lists (`listpack` / `quicklist`).
//! - [`set`]: sets (`intset` / `listpack` / `hashtable`) and set algebra.
//! - [`zset`]: sorted sets (`listpack` / `skiplist`), score and lex ranges.
//! - [`score_tree`]: the order-statistic B+tree of big sorted sets.
//! - [`thin_bytes`]: one-word strings, the elements of big hash tables.
//! - [`sample`]: random picks for SRANDMEMBER, SPOP, HRANDFIELD, ZRANDMEMBER.
//! - [`murmur`]: MurmurHash2 (64- and 32-bit), the hashes of HLL and Bloom.
//! - [`hll`]: HyperLogLog byte-identical to Redis's (PFADD, PFCOUNT, PFMERGE).
//! - [`bloom`]: scalable Bloom filters as RedisBloom builds them (BF.*).
//! - [`stream`]: streams (nodes of packed entries) and consumer groups.
//!
//! Everything here is tested with plain `#[test]`s beside the code.

pub mod bits;
pub mod bloom;
pub mod geohash;
pub mod glob;
pub mod hash;
pub mod hll;
pub mod intset;
pub mod lcs;
pub mod limits;
pub mod list;
pub mod lzf;
pub mod murmur;
pub mod number;
pub mod pack;
pub mod sample;
pub mod score_tree;
pub mod set;
pub mod sha1;
pub mod slot;
pub mod small_bytes;
pub mod stream;
pub mod table;
#[cfg(test)]
mod test_alloc;
pub mod thin_bytes;
pub mod zset;

pub use small_bytes::SmallBytes;
