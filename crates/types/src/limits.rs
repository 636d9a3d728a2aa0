//! [`Limits`]: the CONFIG settings that decide when a collection leaves its
//! compact encoding. They are parameters, not constants, because CONFIG SET
//! changes them at run time; every mutating collection call takes them.
//!
//! Defaults are what `redis-server` 7.2 uses with no configuration file
//! (config.c; redis.conf ships the same values). Note that
//! `hash-max-listpack-entries` is 512 there, not the 128 some documentation
//! quotes.

/// Encoding thresholds, named after their CONFIG parameters.
///
/// Redis 7.0 behaviour (what Redis 7.0.15's own test suite asserts) is two
/// settings away: `list_listpack: false` (7.0 reports every list as a
/// quicklist) and `set_max_listpack_entries: 0` (7.0 has no listpack sets:
/// strings go straight to a hashtable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// `list-max-listpack-size`: negative = node size class (-1 = 4 KiB …
    /// -5 = 64 KiB), positive = entries per node.
    pub list_max_listpack_size: i64,
    /// Whether small lists use the listpack encoding (Redis 7.2). Not a
    /// Redis CONFIG parameter: false makes lists quicklists from their first
    /// element and never convert back, as Redis 7.0 reports them.
    pub list_listpack: bool,
    /// `list-compress-depth`: nodes kept plain at each end of a quicklist,
    /// the others LZF-compressed (0: none).
    pub list_compress_depth: usize,
    /// `hash-max-listpack-entries`.
    pub hash_max_listpack_entries: usize,
    /// `hash-max-listpack-value`: longest field or value kept in a listpack.
    pub hash_max_listpack_value: usize,
    /// `set-max-intset-entries`.
    pub set_max_intset_entries: usize,
    /// `set-max-listpack-entries` (Redis 7.2).
    pub set_max_listpack_entries: usize,
    /// `set-max-listpack-value` (Redis 7.2).
    pub set_max_listpack_value: usize,
    /// `zset-max-listpack-entries`.
    pub zset_max_listpack_entries: usize,
    /// `zset-max-listpack-value`.
    pub zset_max_listpack_value: usize,
    /// `stream-node-max-bytes`: a stream node (Redis: a listpack) is full
    /// at this size (0: no limit but Redis's 1 GiB).
    pub stream_node_max_bytes: usize,
    /// `stream-node-max-entries`: a stream node is full with this many
    /// entries, deleted ones included (0: no limit).
    pub stream_node_max_entries: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            list_max_listpack_size: -2,
            list_listpack: true,
            list_compress_depth: 0,
            hash_max_listpack_entries: 512,
            hash_max_listpack_value: 64,
            set_max_intset_entries: 512,
            set_max_listpack_entries: 128,
            set_max_listpack_value: 64,
            zset_max_listpack_entries: 128,
            zset_max_listpack_value: 64,
            stream_node_max_bytes: 4096,
            stream_node_max_entries: 100,
        }
    }
}

/// Redis's `optimization_level`: the byte limits of negative
/// `list-max-listpack-size` values.
const LIST_SIZE_LEVELS: [usize; 5] = [4096, 8192, 16384, 32768, 65536];

/// Redis's `SIZE_SAFETY_LIMIT`: a node limited by entry count still never
/// grows past 8 KiB (unless it holds a single element).
pub const LIST_SIZE_SAFETY_LIMIT: usize = 8192;

impl Limits {
    /// `(byte limit, entry limit)` of one list node or of a listpack list
    /// (Redis's `quicklistNodeLimit`).
    pub fn list_node_limit(&self) -> (usize, usize) {
        let fill = self.list_max_listpack_size;
        if fill >= 0 {
            (usize::MAX, if fill == 0 { 1 } else { fill as usize })
        } else {
            let level = ((-fill - 1) as usize).min(LIST_SIZE_LEVELS.len() - 1);
            (LIST_SIZE_LEVELS[level], usize::MAX)
        }
    }

    /// Redis's `quicklistNodeExceedsLimit`: whether a node (or listpack list)
    /// of `bytes` (listpack bytes as Redis counts them) and `count` entries
    /// is over the limit.
    pub fn list_exceeds(&self, bytes: usize, count: usize) -> bool {
        let (size_limit, count_limit) = self.list_node_limit();
        if size_limit != usize::MAX {
            bytes > size_limit
        } else {
            bytes > LIST_SIZE_SAFETY_LIMIT || count > count_limit
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn list_limits_follow_quicklist_node_limit() {
        let mut l = Limits::default();
        assert_eq!(l.list_node_limit(), (8192, usize::MAX));
        assert!(!l.list_exceeds(8192, 100_000));
        assert!(l.list_exceeds(8193, 1));
        l.list_max_listpack_size = -1;
        assert_eq!(l.list_node_limit().0, 4096);
        l.list_max_listpack_size = -100;
        assert_eq!(l.list_node_limit().0, 65536);
        l.list_max_listpack_size = 0;
        assert_eq!(l.list_node_limit(), (usize::MAX, 1));
        l.list_max_listpack_size = 5;
        assert!(!l.list_exceeds(100, 5));
        assert!(l.list_exceeds(100, 6));
        assert!(l.list_exceeds(8193, 2), "the 8 KiB safety limit applies to count limits");
    }
}
