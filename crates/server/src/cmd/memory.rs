//! MEMORY STATS, DOCTOR, MALLOC-STATS and PURGE: the whole process's memory,
//! in Redis 7's reply shapes (object.c, `getMemoryOverheadData` and
//! `getMemoryDoctorReport`).
//!
//! Every number is measured: the allocator wrapper's count and peak, the
//! start-up baseline, each shard's tables, script caches and log buffer,
//! each connection's buffers (as CLIENT LIST's `tot-mem`), the heap's
//! resident bytes and the process's RSS. What ringdb does not have
//! (replication backlog, replicas, cluster links) is reported as the 0 it is.

use crate::memory;
use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::CmdResult;

/// One core's share.
pub struct CoreMemory {
    /// Per database: (keys, table overhead, slot-table overhead).
    dbs: Vec<(usize, usize, usize)>,
    /// Connections and their buffers (CLIENT LIST's `tot-mem`).
    clients: usize,
    client_bytes: usize,
    /// Script cache, function libraries, number of cached scripts.
    lua: usize,
    functions: usize,
    scripts: usize,
    aof_buffer: usize,
}

/// The process's memory overhead, as Redis's `redisMemOverhead`.
pub struct Overhead {
    used: u64,
    peak: u64,
    startup: u64,
    clients: u64,
    client_count: u64,
    aof_buffer: u64,
    lua: u64,
    functions: u64,
    /// (db, keys, main, slot-to-keys) for databases with keys.
    dbs: Vec<(usize, u64, u64, u64)>,
    max_scripts: usize,
    /// [`memory::allocator_resident`].
    resident: u64,
    rss: u64,
}

impl CoreMemory {
    /// This core's share (run on each core: by MEMORY STATS, and by INFO
    /// within the round it makes anyway).
    pub fn collect(core: &crate::node::Core) -> CoreMemory {
        let shard = core.shard.borrow();
        let clients = core.clients.borrow();
        let (lua, functions) = shard.state.scripting.cache_memory();
        CoreMemory {
            dbs: shard
                .keyspace
                .iter()
                .map(|db| {
                    let (main, slots) = db.overhead();
                    (db.len(), main, slots)
                })
                .collect(),
            clients: clients.len(),
            client_bytes: clients.iter().map(|c| c.view.borrow().tot_mem()).sum(),
            lua,
            functions,
            scripts: shard.state.scripting.script_count(),
            aof_buffer: core.aof.borrow().as_ref().map_or(0, |w| w.buffer_capacity()),
        }
    }
}

impl Overhead {
    pub async fn measure(conn: &Connection) -> Result<Overhead, ringdb_engine::command::CmdError> {
        let cores = conn.core.invoke_on_all(|core| CoreMemory::collect(core)).await?;
        Ok(Self::from_cores(&cores))
    }

    /// The node's overhead from every core's share.
    pub fn from_cores(cores: &[CoreMemory]) -> Overhead {
        let used = memory::used_memory();
        let sum = |f: &dyn Fn(&CoreMemory) -> usize| cores.iter().map(f).sum::<usize>() as u64;
        let db_count = cores.iter().map(|c| c.dbs.len()).max().unwrap_or(0);
        let dbs = (0..db_count)
            .filter_map(|i| {
                let (mut keys, mut main, mut slots) = (0u64, 0u64, 0u64);
                for c in cores {
                    if let Some(&(k, m, s)) = c.dbs.get(i) {
                        keys += k as u64;
                        main += m as u64;
                        slots += s as u64;
                    }
                }
                (keys > 0).then_some((i, keys, main, slots))
            })
            .collect();
        Overhead {
            used,
            peak: memory::peak_memory().max(used),
            startup: memory::startup_memory(),
            clients: sum(&|c| c.client_bytes),
            client_count: sum(&|c| c.clients),
            aof_buffer: sum(&|c| c.aof_buffer),
            lua: sum(&|c| c.lua),
            functions: sum(&|c| c.functions),
            dbs,
            max_scripts: cores.iter().map(|c| c.scripts).max().unwrap_or(0),
            resident: memory::allocator_resident(),
            rss: memory::rss_bytes(),
        }
    }

    fn total(&self) -> u64 {
        self.startup
            + self.clients
            + self.aof_buffer
            + self.lua
            + self.functions
            + self.dbs.iter().map(|d| d.2 + d.3).sum::<u64>()
    }

    fn keys(&self) -> u64 {
        self.dbs.iter().map(|d| d.1).sum()
    }

    /// Memory above the start-up baseline (at least 1, as Redis).
    fn net_usage(&self) -> u64 {
        if self.used > self.startup {
            self.used - self.startup
        } else {
            1
        }
    }

    fn dataset(&self) -> i64 {
        self.used as i64 - self.total() as i64
    }

    /// Redis computes the ratios in float.
    fn ratio(a: u64, b: u64) -> f64 {
        (a as f32 / b.max(1) as f32) as f64
    }

    fn total_frag(&self) -> (f64, i64) {
        (Self::ratio(self.rss, self.used), self.rss as i64 - self.used as i64)
    }

    /// The heap's resident bytes stand for both jemalloc's `active` and
    /// `resident`: the allocator's fragmentation is all of the heap's
    /// excess, and the RSS overhead is the program's own pages.
    fn allocator_frag(&self) -> (f64, i64) {
        (Self::ratio(self.resident, self.used), self.resident as i64 - self.used as i64)
    }

    fn allocator_rss(&self) -> (f64, i64) {
        (Self::ratio(self.resident, self.resident), 0)
    }

    fn rss_extra(&self) -> (f64, i64) {
        (Self::ratio(self.rss, self.resident), self.rss as i64 - self.resident as i64)
    }
}

impl Overhead {
    /// INFO memory's fields from the same numbers as MEMORY STATS, those
    /// the rest of the section does not already show (Redis's names).
    pub fn write_info(&self, out: &mut String) {
        use std::fmt::Write;
        let dataset = self.dataset();
        let perc = dataset as f64 * 100.0 / self.net_usage() as f64;
        let (afr, afb) = self.allocator_frag();
        let (arr, arb) = self.allocator_rss();
        let (rr, rb) = self.rss_extra();
        let scripts = self.lua + self.functions;
        let _ = write!(
            out,
            "used_memory_overhead:{}\r\nused_memory_startup:{}\r\nused_memory_dataset:{dataset}\r\n\
             used_memory_dataset_perc:{perc:.2}%\r\nallocator_allocated:{}\r\nallocator_active:{}\r\n\
             allocator_resident:{}\r\nused_memory_scripts_eval:{}\r\nused_memory_functions:{}\r\n\
             used_memory_scripts:{scripts}\r\nused_memory_scripts_human:{}\r\n\
             allocator_frag_ratio:{afr:.2}\r\nallocator_frag_bytes:{afb}\r\nallocator_rss_ratio:{arr:.2}\r\n\
             allocator_rss_bytes:{arb}\r\nrss_overhead_ratio:{rr:.2}\r\nrss_overhead_bytes:{rb}\r\n\
             mem_not_counted_for_evict:{}\r\nmem_replication_backlog:0\r\nmem_total_replication_buffers:0\r\n\
             mem_clients_slaves:0\r\nmem_clients_normal:{}\r\nmem_cluster_links:0\r\nmem_aof_buffer:{}\r\n\
             active_defrag_running:0\r\n",
            self.total(),
            self.startup,
            self.used,
            self.resident,
            self.resident,
            self.lua,
            self.functions,
            memory::human(scripts),
            // As Redis: the AOF buffer is not counted against maxmemory.
            self.aof_buffer,
            self.clients,
            self.aof_buffer,
        );
    }
}

/// MEMORY STATS.
pub async fn stats(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let m = Overhead::measure(conn).await?;
    let mut out = conn.reply();
    out.map(27 + m.dbs.len());
    let field = |out: &mut ringdb_protocol::ReplyWriter, name: &str, n: i64| {
        out.bulk(name.as_bytes());
        out.int(n);
    };
    field(&mut out, "peak.allocated", m.peak as i64);
    field(&mut out, "total.allocated", m.used as i64);
    field(&mut out, "startup.allocated", m.startup as i64);
    field(&mut out, "replication.backlog", 0);
    field(&mut out, "clients.slaves", 0);
    field(&mut out, "clients.normal", m.clients as i64);
    field(&mut out, "cluster.links", 0);
    field(&mut out, "aof.buffer", m.aof_buffer as i64);
    field(&mut out, "lua.caches", m.lua as i64);
    field(&mut out, "functions.caches", m.functions as i64);
    for &(db, _, main, slots) in &m.dbs {
        out.bulk(format!("db.{db}").as_bytes());
        out.map(3);
        field(&mut out, "overhead.hashtable.main", main as i64);
        // TTLs live in the entries: no table of their own.
        field(&mut out, "overhead.hashtable.expires", 0);
        field(&mut out, "overhead.hashtable.slot-to-keys", slots as i64);
    }
    let keys = m.keys();
    field(&mut out, "overhead.total", m.total() as i64);
    field(&mut out, "keys.count", keys as i64);
    field(&mut out, "keys.bytes-per-key", m.net_usage().checked_div(keys).unwrap_or(0) as i64);
    field(&mut out, "dataset.bytes", m.dataset());
    out.bulk(b"dataset.percentage");
    out.double((m.dataset() as f32 * 100.0 / m.net_usage() as f32) as f64);
    out.bulk(b"peak.percentage");
    out.double((m.used as f32 * 100.0 / m.peak.max(1) as f32) as f64);
    field(&mut out, "allocator.allocated", m.used as i64);
    field(&mut out, "allocator.active", m.resident as i64);
    field(&mut out, "allocator.resident", m.resident as i64);
    let pair = |out: &mut ringdb_protocol::ReplyWriter, name: &str, (ratio, bytes): (f64, i64)| {
        out.bulk(format!("{name}.ratio").as_bytes());
        out.double(ratio);
        out.bulk(format!("{name}.bytes").as_bytes());
        out.int(bytes);
    };
    pair(&mut out, "allocator-fragmentation", m.allocator_frag());
    pair(&mut out, "allocator-rss", m.allocator_rss());
    pair(&mut out, "rss-overhead", m.rss_extra());
    // Total RSS overhead, fragmentation included (kept under this name for
    // compatibility, as in Redis).
    let (ratio, bytes) = m.total_frag();
    out.bulk(b"fragmentation");
    out.double(ratio);
    out.bulk(b"fragmentation.bytes");
    out.int(bytes);
    Ok(())
}

/// MEMORY DOCTOR: Redis's report, from ringdb's numbers.
pub async fn doctor(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let m = Overhead::measure(conn).await?;
    let text = doctor_report(&m);
    conn.reply().verbatim("txt", text.as_bytes());
    Ok(())
}

fn doctor_report(m: &Overhead) -> String {
    const MB10: i64 = 10 << 20;
    let mut issues: Vec<String> = Vec::new();
    let empty = m.used < 5 * 1024 * 1024;
    if !empty {
        if m.peak as f32 / m.used as f32 > 1.5 {
            issues.push(PEAK.to_string());
        }
        let (frag, frag_bytes) = m.total_frag();
        if frag > 1.4 && frag_bytes > MB10 {
            issues.push(HIGH_RSS.replace("%s", memory::ALLOCATOR));
        }
        let (alloc_frag, alloc_frag_bytes) = m.allocator_frag();
        if alloc_frag > 1.1 && alloc_frag_bytes > MB10 {
            issues.push(ALLOC_FRAG.to_string());
        }
        let (alloc_rss, alloc_rss_bytes) = m.allocator_rss();
        if alloc_rss > 1.1 && alloc_rss_bytes > MB10 {
            issues.push(ALLOC_RSS.to_string());
        }
        let (rss_extra, rss_extra_bytes) = m.rss_extra();
        if rss_extra > 1.1 && rss_extra_bytes > MB10 {
            issues.push(PROC_RSS.to_string());
        }
        // No replicas, so never Redis's "Big replica buffers".
        if m.clients / m.client_count.max(1) > 1024 * 200 {
            issues.push(CLIENT_BUFFERS.to_string());
        }
        if m.max_scripts > 1000 {
            issues.push(MANY_SCRIPTS.to_string());
        }
    }
    if empty {
        EMPTY.to_string()
    } else if issues.is_empty() {
        FINE.to_string()
    } else {
        let mut s = String::from(
            "Sam, I detected a few issues in this Redis instance memory implants:\n\n",
        );
        for issue in issues {
            s.push_str(&issue);
        }
        s.push_str("I'm here to keep you safe, Sam. I want to help you.\n");
        s
    }
}

/// MEMORY MALLOC-STATS: mimalloc's own report.
pub async fn malloc_stats(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let report = memory::allocator_report();
    conn.reply().verbatim("txt", &report);
    Ok(())
}

/// MEMORY PURGE: every core returns its free pages (mimalloc's heaps are per
/// thread).
pub async fn purge(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    conn.core.invoke_on_all(|_| memory::purge_this_thread()).await?;
    conn.reply().ok();
    Ok(())
}

const FINE: &str = "Hi Sam, I can't find any memory issue in your instance. I can only account for what occurs on this base.\n";
const EMPTY: &str = "Hi Sam, this instance is empty or is using very little memory, my issues detector can't be used in these conditions. Please, leave for your mission on Earth and fill it with some data. The new Sam and I will be back to our programming as soon as I finished rebooting.\n";
const PEAK: &str = " * Peak memory: In the past this instance used more than 150% the memory that is currently using. The allocator is normally not able to release memory after a peak, so you can expect to see a big fragmentation ratio, however this is actually harmless and is only due to the memory peak, and if the Redis instance Resident Set Size (RSS) is currently bigger than expected, the memory will be used as soon as you fill the Redis instance with more data. If the memory peak was only occasional and you want to try to reclaim memory, please try the MEMORY PURGE command, otherwise the only other option is to shutdown and restart the instance.\n\n";
const HIGH_RSS: &str = " * High total RSS: This instance has a memory fragmentation and RSS overhead greater than 1.4 (this means that the Resident Set Size of the Redis process is much larger than the sum of the logical allocations Redis performed). This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. If the problem is a large peak memory, then there is no issue. Otherwise, make sure you are using the Jemalloc allocator and not the default libc malloc. Note: The currently used allocator is \"%s\".\n\n";
const ALLOC_FRAG: &str = " * High allocator fragmentation: This instance has an allocator external fragmentation greater than 1.1. This problem is usually due either to a large peak memory (check if there is a peak memory entry above in the report) or may result from a workload that causes the allocator to fragment memory a lot. You can try enabling 'activedefrag' config option.\n\n";
const ALLOC_RSS: &str = " * High allocator RSS overhead: This instance has an RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the allocator is much larger than the sum what the allocator actually holds). This problem is usually due to a large peak memory (check if there is a peak memory entry above in the report), you can try the MEMORY PURGE command to reclaim it.\n\n";
const PROC_RSS: &str = " * High process RSS overhead: This instance has non-allocator RSS memory overhead is greater than 1.1 (this means that the Resident Set Size of the Redis process is much larger than the RSS the allocator holds). This problem may be due to Lua scripts or Modules.\n\n";
const CLIENT_BUFFERS: &str = " * Big client buffers: The clients output buffers in this instance are greater than 200K per client (on average). This may result from different causes, like Pub/Sub clients subscribed to channels bot not receiving data fast enough, so that data piles on the Redis instance output buffer, or clients sending commands with large replies or very large sequences of commands in the same pipeline. Please use the CLIENT LIST command in order to investigate the issue if it causes problems in your instance, or to understand better why certain clients are using a big amount of memory.\n\n";
const MANY_SCRIPTS: &str = " * Many scripts: There seem to be many cached scripts in this instance (more than 1000). This may be because scripts are generated and `EVAL`ed, instead of being parameterized (with KEYS and ARGV), `SCRIPT LOAD`ed and `EVALSHA`ed. Unless `SCRIPT FLUSH` is called periodically, the scripts' caches may end up consuming most of your memory.\n\n";

#[cfg(test)]
mod tests {
    use super::*;

    fn overhead(used: u64, peak: u64, rss: u64) -> Overhead {
        Overhead {
            used,
            peak,
            startup: 1 << 20,
            clients: 20_000,
            client_count: 1,
            aof_buffer: 0,
            lua: 0,
            functions: 0,
            dbs: vec![(0, 10, 1000, 100)],
            max_scripts: 0,
            resident: used,
            rss,
        }
    }

    #[test]
    fn doctor_reports_as_redis() {
        assert_eq!(doctor_report(&overhead(1 << 20, 1 << 20, 1 << 20)), EMPTY);
        let mb = 1 << 20;
        assert_eq!(doctor_report(&overhead(100 * mb, 100 * mb, 101 * mb)), FINE);
        let report = doctor_report(&overhead(100 * mb, 200 * mb, 300 * mb));
        assert!(report.starts_with("Sam, I detected a few issues"));
        assert!(report.contains(" * Peak memory:"));
        assert!(report.contains("The currently used allocator is \"mimalloc\"."));
        assert!(report.ends_with("I want to help you.\n"));
    }

    #[test]
    fn totals() {
        let m = overhead(10 << 20, 10 << 20, 12 << 20);
        assert_eq!(m.total(), (1 << 20) + 20_000 + 1100);
        assert_eq!(m.keys(), 10);
        assert_eq!(m.net_usage(), 9 << 20);
        assert_eq!(m.dataset(), (10 << 20) - m.total() as i64);
        assert_eq!(m.total_frag(), (1.2f32 as f64, 2 << 20));
    }
}
