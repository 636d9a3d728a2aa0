//! Redis's RDB format (version 10, as Redis 7.0 writes it; versions 1 to 11
//! are read): the snapshot file, and the value encoding DUMP and RESTORE
//! share with it.
//!
//! - [`encode`]: values, keys with their expiry and access data, the file
//!   header (aux fields, functions), `SELECTDB` and the footer.
//! - [`decode`]: a bounded reader of RDB values that builds ringdb's own
//!   structures with Redis's encoding rules, validating everything.
//! - [`file`](mod@file): a whole file as a stream of records, with its checksum.
//!
//! Bloom filters are stored as RedisBloom stores them: a module value
//! (`RDB_TYPE_MODULE_2`) of the module type `MBbloom--`, so that a
//! redis-server with RedisBloom loaded reads them. Streams are saved as
//! Redis 7.0 saves them (`STREAM_LISTPACKS_2`); types 15 (Redis 5 and 6) and
//! 21 (Redis 7.2) are read too.

pub mod decode;
pub mod encode;
pub mod file;

/// The RDB version ringdb writes (Redis 7.0's).
pub const RDB_VERSION: u16 = 10;
/// The newest version ringdb reads (Redis 7.2's).
pub const MAX_READ_VERSION: u16 = 11;

/// Value types (`RDB_TYPE_*`).
pub mod types {
    pub const STRING: u8 = 0;
    pub const LIST: u8 = 1;
    pub const SET: u8 = 2;
    pub const ZSET: u8 = 3;
    pub const HASH: u8 = 4;
    pub const ZSET_2: u8 = 5;
    pub const MODULE: u8 = 6;
    pub const MODULE_2: u8 = 7;
    pub const HASH_ZIPMAP: u8 = 9;
    pub const LIST_ZIPLIST: u8 = 10;
    pub const SET_INTSET: u8 = 11;
    pub const ZSET_ZIPLIST: u8 = 12;
    pub const HASH_ZIPLIST: u8 = 13;
    pub const LIST_QUICKLIST: u8 = 14;
    pub const STREAM_LISTPACKS: u8 = 15;
    pub const HASH_LISTPACK: u8 = 16;
    pub const ZSET_LISTPACK: u8 = 17;
    pub const LIST_QUICKLIST_2: u8 = 18;
    pub const STREAM_LISTPACKS_2: u8 = 19;
    pub const SET_LISTPACK: u8 = 20;
    pub const STREAM_LISTPACKS_3: u8 = 21;

    /// Redis's `rdbIsObjectType` (as of version 11).
    pub fn is_object(t: u8) -> bool {
        t <= 7 || (9..=21).contains(&t)
    }
}

/// Record opcodes (`RDB_OPCODE_*`).
pub mod opcode {
    pub const FUNCTION2: u8 = 245;
    pub const FUNCTION: u8 = 246;
    pub const MODULE_AUX: u8 = 247;
    pub const IDLE: u8 = 248;
    pub const FREQ: u8 = 249;
    pub const AUX: u8 = 250;
    pub const RESIZEDB: u8 = 251;
    pub const EXPIRETIME_MS: u8 = 252;
    pub const EXPIRETIME: u8 = 253;
    pub const SELECTDB: u8 = 254;
    pub const EOF: u8 = 255;
}

/// Module value field opcodes (`RDB_MODULE_OPCODE_*`).
pub mod module_opcode {
    pub const EOF: u64 = 0;
    pub const SINT: u64 = 1;
    pub const UINT: u64 = 2;
    pub const FLOAT: u64 = 3;
    pub const DOUBLE: u64 = 4;
    pub const STRING: u64 = 5;
}

/// Quicklist node containers in `LIST_QUICKLIST_2`.
pub const QUICKLIST_PLAIN: u64 = 1;
pub const QUICKLIST_PACKED: u64 = 2;

const MODULE_CHARSET: &[u8; 64] =
    b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

/// Redis's `moduleTypeEncodeId`: nine 6-bit characters and a 10-bit
/// encoding version.
pub const fn module_type_id(name: &[u8; 9], encver: u64) -> u64 {
    let mut id = 0u64;
    let mut i = 0;
    while i < 9 {
        let mut c = 0;
        while c < 64 && MODULE_CHARSET[c] != name[i] {
            c += 1;
        }
        id = (id << 6) | c as u64;
        i += 1;
    }
    (id << 10) | encver
}

/// Redis's `moduleTypeNameByID`.
pub fn module_type_name(id: u64) -> String {
    (0..9).map(|i| MODULE_CHARSET[((id >> (10 + 6 * (8 - i))) & 63) as usize] as char).collect()
}

/// RedisBloom's Bloom filter type, with the encoding version RedisBloom 2.x
/// registers it with (`BF_MIN_GROWTH_ENC`).
pub const BLOOM_ENCVER: u64 = 4;
pub const BLOOM_MODULE_ID: u64 = module_type_id(b"MBbloom--", BLOOM_ENCVER);

/// What went wrong reading RDB data, and where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RdbError {
    /// Byte offset in the data being read.
    pub offset: usize,
    pub reason: String,
}

impl std::fmt::Display for RdbError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} (at byte {})", self.reason, self.offset)
    }
}

impl std::error::Error for RdbError {}

#[cfg(test)]
mod tests;
