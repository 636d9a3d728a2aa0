//! The loading state: while the shards load their data at start-up the
//! node already listens, answers INFO (`loading:1` and its progress) and
//! the commands flagged `loading`, and refuses the rest with `-LOADING`,
//! as Redis does while it reads its file.
//!
//! Every shard reads the whole snapshot file (keeping the keys it owns),
//! so the bytes loaded are the shards' positions added up, over the file's
//! size times the shards.

use std::sync::atomic::AtomicU64;
use std::sync::atomic::AtomicUsize;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;

use ringdb_engine::command::error::CmdError;

/// Redis's reply to a command that cannot run while loading.
pub const LOADING: CmdError = CmdError::new("LOADING Redis is loading the dataset in memory");

/// Shared by every core.
#[derive(Debug, Default)]
pub struct Loading {
    /// Shards still loading; loading while it is above 0.
    shards_left: AtomicUsize,
    /// Unix seconds the load began.
    started: AtomicU64,
    /// The file's size (0 when the data is in the append-only logs).
    file_bytes: AtomicU64,
    /// The shards' positions in the file, added up.
    read_bytes: AtomicU64,
    shards: AtomicUsize,
}

impl Loading {
    /// The node is about to load a file of `file_bytes` (0: logs) on
    /// `shards` shards.
    pub fn begin(&self, shards: usize, file_bytes: usize) {
        self.shards.store(shards, Relaxed);
        self.file_bytes.store(file_bytes as u64, Relaxed);
        self.started.store(ringdb_engine::shard::now_ms() / 1000, Relaxed);
        self.shards_left.store(shards, Relaxed);
    }

    /// Whether commands without the `loading` flag are refused now.
    pub fn active(&self) -> bool {
        self.shards_left.load(Relaxed) > 0
    }

    /// A shard has read `bytes` more of the file.
    pub fn advance(&self, bytes: usize) {
        self.read_bytes.fetch_add(bytes as u64, Relaxed);
    }

    /// A shard is done (or failed: the process stops then).
    pub fn shard_done(&self) {
        let _ = self.shards_left.fetch_update(Relaxed, Relaxed, |n| n.checked_sub(1));
    }

    /// The fields INFO persistence ends with while loading, as Redis's.
    pub fn info_fields(&self) -> String {
        let total = self.file_bytes.load(Relaxed);
        let shards = self.shards.load(Relaxed).max(1) as u64;
        let loaded = (self.read_bytes.load(Relaxed) / shards).min(total);
        let perc = if total > 0 { loaded as f64 * 100.0 / total as f64 } else { 0.0 };
        let started = self.started.load(Relaxed);
        let elapsed = (ringdb_engine::shard::now_ms() / 1000).saturating_sub(started);
        // Redis's estimate: 1 second when nothing is known yet.
        let eta = if elapsed == 0 {
            1
        } else {
            elapsed * total.saturating_sub(loaded).max(1) / (loaded + 1)
        };
        format!(
            "loading_start_time:{started}\r\nloading_total_bytes:{total}\r\nloading_rdb_used_mem:0\r\n\
             loading_loaded_bytes:{loaded}\r\nloading_loaded_perc:{perc:.2}\r\nloading_eta_seconds:{eta}\r\n"
        )
    }
}

/// `key-load-delay` (a setting for tests, as Redis's `debugDelay`): after
/// each key loaded the shard waits `delay` microseconds, or when negative
/// (-n) 1 µs for one key in n on average. The core's thread itself waits:
/// that is what makes a load slow enough to watch.
#[derive(Debug, Default)]
pub struct KeyDelay {
    delay: i64,
    keys: u64,
}

impl KeyDelay {
    pub fn new(delay: i64) -> Self {
        KeyDelay { delay, keys: 0 }
    }

    pub fn after_key(&mut self) {
        let micros = match self.delay {
            0 => return,
            d if d > 0 => d as u64,
            d => {
                self.keys += 1;
                u64::from(self.keys.is_multiple_of(d.unsigned_abs()))
            }
        };
        if micros > 0 {
            std::thread::sleep(Duration::from_micros(micros));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loading_lasts_until_every_shard_is_done_and_reports_its_progress() {
        let loading = Loading::default();
        assert!(!loading.active());
        loading.begin(2, 1000);
        assert!(loading.active());
        loading.advance(500);
        loading.advance(300);
        let fields = loading.info_fields();
        assert!(fields.contains("loading_total_bytes:1000\r\n"), "{fields}");
        assert!(fields.contains("loading_loaded_bytes:400\r\n"), "{fields}");
        assert!(fields.contains("loading_loaded_perc:40.00\r\n"), "{fields}");
        loading.shard_done();
        assert!(loading.active());
        loading.shard_done();
        assert!(!loading.active());
        loading.shard_done();
        assert!(!loading.active());
    }
}
