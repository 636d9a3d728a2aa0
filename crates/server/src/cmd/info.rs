//! INFO [section ...]: Redis 7's sections and field names (server.c,
//! `genRedisInfoString`), so that tools written for Redis parse them, plus
//! ringdb's own `shards` section.
//!
//! Every number is real: statistics are kept per shard and summed here over
//! all cores (`invoke_on_all`), memory comes from the allocator wrapper and
//! `/proc`, CPU from `getrusage`. Fields of features ringdb does not have
//! (replicas, persistence, eviction) report what is true of it: nothing in
//! progress, no replicas, nothing evicted. Fields ringdb cannot measure are
//! left out rather than invented.

use crate::cmd::connection::REDIS_VERSION;
use crate::memory;
use crate::net::connection::Connection;
use crate::node::Core;
use bytes::Bytes;
use ringdb_engine::command::{table, CmdResult};
use ringdb_engine::shard::{RateMetric, ShardStats};
use std::collections::BTreeSet;
use std::fmt::Write;
use std::rc::Rc;
use std::time::Duration;

/// Sections in output order; `true` for those in `default`.
const SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("latencystats", false),
    ("cluster", true),
    ("keyspace", true),
    ("shards", true),
    ("watch", true),
    ("hotkeys", true),
];

/// Which sections a request asked for (Redis's `genInfoSectionDict`).
#[derive(Debug, Default)]
struct Wanted {
    all: bool,
    names: BTreeSet<String>,
}

impl Wanted {
    fn parse(args: &[Bytes]) -> Wanted {
        let mut wanted = Wanted::default();
        if args.is_empty() {
            wanted.add_default();
        }
        for arg in args {
            let name = String::from_utf8_lossy(arg).to_ascii_lowercase();
            match name.as_str() {
                "default" => wanted.add_default(),
                "all" | "everything" => wanted.all = true,
                _ => {
                    wanted.names.insert(name);
                }
            }
        }
        wanted
    }

    fn add_default(&mut self) {
        for (name, default) in SECTIONS {
            if *default {
                self.names.insert(name.to_string());
            }
        }
    }

    fn has(&self, section: &str) -> bool {
        self.all
            || self.names.contains(section)
            || (section == "modules" && self.names.contains("module_list"))
    }
}

/// What one core contributes.
struct CoreReport {
    shard: u16,
    cpu: Option<usize>,
    stats: ShardStats,
    /// (keys, keys with a TTL) per database.
    dbs: Vec<(usize, usize)>,
    dirty: u64,
    /// The shard's log: (bytes, bytes after its last rewrite), when on.
    aof: Option<(u64, u64)>,
    clients: usize,
    /// Clients of this core waiting in blocking commands.
    blocked: usize,
    max_input_buffer: usize,
    /// Tracking clients of the core; keys, items and prefixes its shard
    /// tracks.
    tracking: (usize, usize, usize, usize),
    thread_cpu: (Duration, Duration),
    /// Reactive queries: fingerprints and subscriptions on this shard,
    /// results pushed, re-runs.
    watch: (usize, u64, u64, u64),
    /// Hot keys: (keys tracked against rules, keys hot now), the shard's
    /// counters, and this core's HOTKEYS.WATCH clients.
    hotkeys: (usize, usize, ringdb_engine::hotkeys::HotStats, usize),
    /// Read copies: this shard's replicated keys, GETs this core answered
    /// from copies.
    replicas: (usize, u64),
    /// MIGRATE connections this core caches.
    migrate_sockets: usize,
    /// Clients this core closed at their output buffer limit.
    output_limit_disconnections: u64,
    /// The shard's latency histograms, when INFO latencystats is asked for.
    latency: Option<ringdb_engine::latency::CommandLatency>,
    /// The core's memory (MEMORY STATS's share), when INFO memory is.
    memory: Option<crate::cmd::memory::CoreMemory>,
}

impl CoreReport {
    fn collect(core: &Rc<Core>, with_latency: bool, with_memory: bool) -> CoreReport {
        let latency =
            with_latency.then(|| core.shard.borrow_mut().state.latency.commands().clone());
        let shard = core.shard.borrow();
        let clients = core.clients.borrow();
        CoreReport {
            shard: core.id.0,
            cpu: core.shared.cpus.get(core.id.index()).copied().flatten(),
            stats: shard.state.stats.clone(),
            dbs: shard.keyspace.iter().map(|db| (db.len(), db.volatile())).collect(),
            dirty: shard.state.funnel.dirty,
            aof: core.aof.borrow().as_ref().map(|w| (w.size, w.base_size)),
            clients: clients.len(),
            blocked: core.blocked.borrow().count(),
            tracking: (
                core.push.borrow().tracking.len(),
                shard.state.funnel.tracking.key_count(),
                shard.state.funnel.tracking.item_count(),
                shard.state.funnel.tracking.prefix_count(),
            ),
            max_input_buffer: clients.iter().map(|c| c.view.borrow().qbuf).max().unwrap_or(0),
            thread_cpu: rusage(libc::RUSAGE_THREAD),
            watch: {
                let queries = &shard.state.funnel.queries;
                let (fingerprints, subscriptions) = queries.counts();
                (fingerprints, subscriptions, queries.pushes, queries.reexecutions)
            },
            hotkeys: {
                let (tracked, hot) = shard.state.hotkeys.counts();
                (tracked, hot, shard.state.hotkeys.stats, core.push.borrow().hotkeys.len())
            },
            replicas: (shard.state.funnel.replicas.len(), core.replica_reads.get()),
            migrate_sockets: core.migrate.borrow().len(),
            output_limit_disconnections: core.push.borrow().limit_disconnections,
            latency,
            memory: with_memory.then(|| crate::cmd::memory::CoreMemory::collect(core)),
        }
    }
}

/// (user, system) CPU time of `who` (`RUSAGE_SELF`, `_CHILDREN`, `_THREAD`).
fn rusage(who: libc::c_int) -> (Duration, Duration) {
    // SAFETY: getrusage writes one rusage struct into the zeroed one we own.
    let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
    if unsafe { libc::getrusage(who, &mut ru) } != 0 {
        return (Duration::ZERO, Duration::ZERO);
    }
    let time = |tv: libc::timeval| {
        Duration::new(tv.tv_sec.max(0) as u64, (tv.tv_usec.max(0) as u32) * 1000)
    };
    (time(ru.ru_utime), time(ru.ru_stime))
}

/// `%ld.%06ld` seconds, as Redis prints CPU times.
fn secs(d: Duration) -> String {
    format!("{}.{:06}", d.as_secs(), d.subsec_micros())
}

pub async fn info(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let wanted = Wanted::parse(&args[1..]);
    conn.update_view();
    let with_latency = wanted.has("latencystats");
    let with_memory = wanted.has("memory");
    // Before INFO's own gathering (histograms, reports) allocates: as
    // Redis reads it, and what a client compares with `maxmemory`.
    let used_memory = memory::used_memory();
    let mut reports = conn
        .core
        .invoke_on_all(move |core| CoreReport::collect(core, with_latency, with_memory))
        .await?;
    let mut total = ShardStats::default();
    reports.iter().for_each(|r| total.add(&r.stats));
    let mut latency = ringdb_engine::latency::CommandLatency::default();
    reports.iter().filter_map(|r| r.latency.as_ref()).for_each(|l| latency.add(l));
    let cores: Vec<_> = reports.iter_mut().filter_map(|r| r.memory.take()).collect();
    let overhead = with_memory.then(|| crate::cmd::memory::Overhead::from_cores(&cores));
    let view = Report {
        core: &conn.core,
        used_memory,
        reports: &reports,
        total: &total,
        latency: &latency,
        overhead: overhead.as_ref(),
    };
    let mut out = String::with_capacity(4096);
    for (name, _) in SECTIONS {
        if wanted.has(name) {
            if !out.is_empty() {
                out.push_str("\r\n");
            }
            view.section(name, &mut out);
        }
    }
    conn.reply().verbatim("txt", out.as_bytes());
    Ok(())
}

/// Everything the sections are written from.
struct Report<'a> {
    core: &'a Rc<Core>,
    /// `used_memory` when INFO started.
    used_memory: u64,
    /// MEMORY STATS's numbers, when the memory section is wanted.
    overhead: Option<&'a crate::cmd::memory::Overhead>,
    reports: &'a [CoreReport],
    total: &'a ShardStats,
    latency: &'a ringdb_engine::latency::CommandLatency,
}

impl Report<'_> {
    fn section(&self, name: &str, out: &mut String) {
        match name {
            "server" => self.server(out),
            "clients" => self.clients(out),
            "memory" => self.memory(out),
            "persistence" => self.persistence(out),
            "stats" => self.stats(out),
            "replication" => self.replication(out),
            "cpu" => self.cpu(out),
            "modules" => out.push_str("# Modules\r\n"),
            "commandstats" => self.commandstats(out),
            "latencystats" => self.latencystats(out),
            "errorstats" => self.errorstats(out),
            "cluster" => out.push_str("# Cluster\r\ncluster_enabled:0\r\n"),
            "keyspace" => self.keyspace(out),
            "shards" => self.shards(out),
            "watch" => self.watch(out),
            "hotkeys" => self.hotkeys(out),
            _ => {}
        }
    }

    fn server(&self, out: &mut String) {
        let shared = &self.core.shared;
        let config = self.core.config.borrow();
        let now = ringdb_engine::shard::now_ms();
        let uptime = shared.started.elapsed().as_secs();
        let _ = write!(
            out,
            "# Server\r\nredis_version:{REDIS_VERSION}\r\nredis_git_sha1:00000000\r\nredis_git_dirty:0\r\n\
             redis_build_id:0\r\nringdb_version:{}\r\nredis_mode:standalone\r\n\
             os:{}\r\narch_bits:{}\r\nmultiplexing_api:io_uring\r\nprocess_id:{}\r\nprocess_supervised:no\r\n\
             run_id:{}\r\ntcp_port:{}\r\nserver_time_usec:{}\r\nuptime_in_seconds:{uptime}\r\n\
             uptime_in_days:{}\r\nhz:{}\r\nconfigured_hz:{}\r\nlru_clock:{}\r\nexecutable:{}\r\n\
             config_file:{}\r\nio_threads_active:0\r\nio_backend:{}\r\n",
            env!("CARGO_PKG_VERSION"),
            uname(),
            usize::BITS,
            std::process::id(),
            shared.run_id,
            shared.port,
            now * 1000,
            uptime / 86400,
            config.hz(),
            config.hz(),
            (now / 1000) as u32,
            shared.executable,
            shared.config_file.as_deref().unwrap_or(""),
            self.core.io_backend.get(),
        );
        let _ = write!(out, "listener0:name=tcp");
        for bind in config.bind() {
            let _ = write!(out, ",bind={bind}");
        }
        let _ = write!(out, ",port={}\r\n", shared.port);
    }

    fn clients(&self, out: &mut String) {
        let connected: usize = self.reports.iter().map(|r| r.clients).sum();
        let max_in = self.reports.iter().map(|r| r.max_input_buffer).max().unwrap_or(0);
        // Clients held by CLIENT PAUSE are counted once, node-wide.
        let paused = self.core.shared.pause.waiting.load(std::sync::atomic::Ordering::Relaxed);
        let blocked: usize = self.reports.iter().map(|r| r.blocked).sum::<usize>() + paused;
        let _ = write!(
            out,
            "# Clients\r\nconnected_clients:{connected}\r\ncluster_connections:0\r\nmaxclients:{}\r\n\
             client_recent_max_input_buffer:{max_in}\r\nblocked_clients:{blocked}\r\ntracking_clients:{}\r\n",
            self.core.config.borrow().maxclients(),
            self.reports.iter().map(|r| r.tracking.0).sum::<usize>(),
        );
    }

    fn memory(&self, out: &mut String) {
        let used = self.used_memory;
        let peak = memory::peak_memory().max(used);
        let rss = memory::rss_bytes();
        let system = memory::total_system_memory();
        let peak_perc = if peak > 0 { used as f64 * 100.0 / peak as f64 } else { 0.0 };
        let frag = if used > 0 { rss as f64 / used as f64 } else { 0.0 };
        let maxmemory = self.core.config.borrow().maxmemory();
        let _ = write!(
            out,
            "# Memory\r\nused_memory:{used}\r\nused_memory_human:{}\r\nused_memory_rss:{rss}\r\n\
             used_memory_rss_human:{}\r\nused_memory_peak:{peak}\r\nused_memory_peak_human:{}\r\n\
             used_memory_peak_perc:{peak_perc:.2}%\r\ntotal_system_memory:{system}\r\n\
             total_system_memory_human:{}\r\nmaxmemory:{maxmemory}\r\nmaxmemory_human:{}\r\n\
             maxmemory_policy:{}\r\nmem_fragmentation_ratio:{frag:.2}\r\nmem_fragmentation_bytes:{}\r\n",
            memory::human(used),
            memory::human(rss),
            memory::human(peak),
            memory::human(system),
            memory::human(maxmemory),
            self.core.config.borrow().maxmemory_policy(),
            rss as i64 - used as i64,
        );
        let lua = self.core.shard.borrow().state.scripting.used_memory();
        let scripts = self.core.shared.scripts.body_count();
        let _ = write!(
            out,
            "used_memory_lua:{lua}\r\nused_memory_lua_human:{}\r\nnumber_of_cached_scripts:{scripts}\r\n\
             mem_allocator:{}\r\nlazyfree_pending_objects:{}\r\nlazyfreed_objects:{}\r\n",
            memory::human(lua as u64),
            memory::ALLOCATOR,
            ringdb_engine::lazyfree::pending(),
            ringdb_engine::lazyfree::freed(),
        );
        if let Some(overhead) = self.overhead {
            overhead.write_info(out);
        }
    }

    fn persistence(&self, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        let dirty: u64 = self.reports.iter().map(|r| r.dirty).sum();
        let p = &self.core.shared.persist;
        let since = |started: &std::sync::atomic::AtomicU64, running: bool| -> i64 {
            match running {
                true => {
                    (ringdb_engine::shard::now_ms().saturating_sub(started.load(Relaxed)) / 1000)
                        as i64
                }
                false => -1,
            }
        };
        let in_progress = p.bgsave_in_progress.load(Relaxed);
        let rewriting = p.aof_rewrite_in_progress.load(Relaxed);
        let aof_on = self.core.config.borrow().get("appendonly") == Some("yes");
        let loading = self.core.shared.loading.active();
        let status = |ok: bool| if ok { "ok" } else { "err" };
        let _ = write!(
            out,
            "# Persistence\r\nloading:{}\r\nasync_loading:0\r\nrdb_changes_since_last_save:{dirty}\r\n\
             rdb_bgsave_in_progress:{}\r\nrdb_last_save_time:{}\r\nrdb_last_bgsave_status:{}\r\n\
             rdb_last_bgsave_time_sec:{}\r\nrdb_current_bgsave_time_sec:{}\r\n\
             rdb_saves:{}\r\naof_enabled:{}\r\naof_rewrite_in_progress:{}\r\naof_rewrite_scheduled:{}\r\n\
             aof_last_rewrite_time_sec:{}\r\naof_current_rewrite_time_sec:{}\r\n\
             aof_last_bgrewrite_status:{}\r\naof_rewrites:{}\r\naof_rewrites_consecutive_failures:{}\r\n\
             aof_last_write_status:{}\r\nmodule_fork_in_progress:0\r\n",
            u8::from(loading),
            u8::from(in_progress),
            p.last_save.load(Relaxed),
            status(p.last_bgsave_ok.load(Relaxed)),
            p.last_bgsave_time_s.load(Relaxed),
            since(&p.bgsave_started_ms, in_progress),
            p.saves.load(Relaxed),
            u8::from(aof_on),
            u8::from(rewriting),
            u8::from(p.aof_rewrite_scheduled.load(Relaxed)),
            p.aof_last_rewrite_time_s.load(Relaxed),
            since(&p.aof_rewrite_started_ms, rewriting),
            status(p.aof_last_rewrite_ok.load(Relaxed)),
            p.aof_rewrites.load(Relaxed),
            p.aof_rewrite_failures.load(Relaxed),
            status(p.aof_last_write_ok.load(Relaxed)),
        );
        if aof_on {
            // Summed over the shards' logs.
            let (size, base) = self
                .reports
                .iter()
                .filter_map(|r| r.aof)
                .fold((0, 0), |(s, b), (rs, rb)| (s + rs, b + rb));
            let _ = write!(
                out,
                "aof_current_size:{size}\r\naof_base_size:{base}\r\naof_pending_rewrite:{}\r\n\
                 aof_buffer_length:0\r\naof_pending_bio_fsync:0\r\naof_delayed_fsync:0\r\n",
                u8::from(p.aof_rewrite_scheduled.load(Relaxed)),
            );
        }
        if loading {
            out.push_str(&self.core.shared.loading.info_fields());
        }
    }

    fn stats(&self, out: &mut String) {
        let t = self.total;
        let sync = {
            let st = self.core.shared.repl.lock();
            (st.sync_full, st.sync_partial_ok, st.sync_partial_err)
        };
        let rate = |f: fn(&ShardStats) -> &RateMetric| -> u64 {
            self.reports.iter().map(|r| f(&r.stats).per_sec()).sum()
        };
        let _ = write!(
            out,
            "# Stats\r\ntotal_connections_received:{}\r\ntotal_commands_processed:{}\r\n\
             instantaneous_ops_per_sec:{}\r\ntotal_net_input_bytes:{}\r\ntotal_net_output_bytes:{}\r\ntotal_net_repl_input_bytes:0\r\n\
             total_net_repl_output_bytes:0\r\ninstantaneous_input_kbps:{:.2}\r\n\
             instantaneous_output_kbps:{:.2}\r\ninstantaneous_input_repl_kbps:0.00\r\n\
             instantaneous_output_repl_kbps:0.00\r\nrejected_connections:{}\r\nsync_full:{}\r\nsync_partial_ok:{}\r\n\
             sync_partial_err:{}\r\nexpired_keys:{}\r\nexpired_stale_perc:{:.2}\r\n\
             expire_cycle_cpu_milliseconds:{}\r\nevicted_keys:{}\r\nevicted_clients:0\r\nkeyspace_hits:{}\r\n\
             keyspace_misses:{}\r\nlatest_fork_usec:0\r\ntotal_forks:{}\r\nmigrate_cached_sockets:{}\r\n\
             tracking_total_keys:{}\r\ntracking_total_items:{}\r\ntracking_total_prefixes:{}\r\n\
             unexpected_error_replies:0\r\n\
             total_error_replies:{}\r\ntotal_reads_processed:{}\r\ntotal_writes_processed:{}\r\n\
             client_query_buffer_limit_disconnections:{}\r\nclient_output_buffer_limit_disconnections:{}\r\n\
             script_runs_held:{}\r\nscript_runs_restarted:{}\r\nscript_runs_on_node:{}\r\n",
            t.connections_received,
            t.commands_processed,
            rate(|s| &s.ops_rate),
            t.net_input_bytes,
            t.net_output_bytes,
            rate(|s| &s.input_rate) as f64 / 1024.0,
            rate(|s| &s.output_rate) as f64 / 1024.0,
            t.rejected_connections,
            sync.0,
            sync.1,
            sync.2,
            t.expired_keys,
            t.expired_stale_perc,
            t.expire_cycle_cpu_ms,
            t.evicted_keys,
            t.keyspace_hits,
            t.keyspace_misses,
            self.core.shared.persist.background_jobs.load(std::sync::atomic::Ordering::Relaxed),
            self.reports.iter().map(|r| r.migrate_sockets).sum::<usize>(),
            self.reports.iter().map(|r| r.tracking.1).sum::<usize>(),
            self.reports.iter().map(|r| r.tracking.2).sum::<usize>(),
            // Every shard knows every core's prefixes.
            self.reports.iter().map(|r| r.tracking.3).max().unwrap_or(0),
            t.error_replies,
            t.reads_processed,
            t.writes_processed,
            t.query_limit_disconnections,
            self.reports.iter().map(|r| r.output_limit_disconnections).sum::<u64>(),
            t.script_runs.held,
            t.script_runs.restarted,
            t.script_runs.node,
        );
    }

    fn replication(&self, out: &mut String) {
        crate::repl::info(self.core, out);
    }

    fn cpu(&self, out: &mut String) {
        let (user, sys) = rusage(libc::RUSAGE_SELF);
        let (child_user, child_sys) = rusage(libc::RUSAGE_CHILDREN);
        let _ = write!(
            out,
            "# CPU\r\nused_cpu_sys:{}\r\nused_cpu_user:{}\r\nused_cpu_sys_children:{}\r\n\
             used_cpu_user_children:{}\r\n",
            secs(sys),
            secs(user),
            secs(child_sys),
            secs(child_user),
        );
    }

    fn commandstats(&self, out: &mut String) {
        out.push_str("# Commandstats\r\n");
        for row in table().all_rows() {
            let Some(c) = self.total.commands.get(row.id) else { continue };
            if c.calls == 0 && c.failed_calls == 0 && c.rejected_calls == 0 {
                continue;
            }
            let per_call = if c.calls == 0 { 0.0 } else { c.usec as f64 / c.calls as f64 };
            let _ = write!(
                out,
                "cmdstat_{}:calls={},usec={},usec_per_call={per_call:.2},rejected_calls={},failed_calls={}\r\n",
                safe(&row.full_name),
                c.calls,
                c.usec,
                c.rejected_calls,
                c.failed_calls,
            );
        }
    }

    /// Per command with calls, the configured percentiles of its latency
    /// in microseconds (nothing while `latency-tracking` is off).
    fn latencystats(&self, out: &mut String) {
        out.push_str("# Latencystats\r\n");
        let config = self.core.config.borrow();
        if !config.latency().tracking {
            return;
        }
        let percentiles = config.latency_percentiles();
        for row in table().all_rows() {
            let Some(h) = self.latency.get(row.id) else { continue };
            let values: Vec<String> = percentiles
                .iter()
                .map(|(text, p)| {
                    format!("p{text}={:.3}", ringdb_engine::latency::percentile_usec(h, *p))
                })
                .collect();
            let _ = write!(
                out,
                "latency_percentiles_usec_{}:{}\r\n",
                safe(&row.full_name),
                values.join(",")
            );
        }
    }

    fn errorstats(&self, out: &mut String) {
        out.push_str("# Errorstats\r\n");
        let mut codes: Vec<(&String, &u64)> = self.total.errors.iter().collect();
        codes.sort();
        for (code, count) in codes {
            let _ = write!(out, "errorstat_{}:count={count}\r\n", safe(code));
        }
    }

    fn keyspace(&self, out: &mut String) {
        out.push_str("# Keyspace\r\n");
        let databases = self.reports.iter().map(|r| r.dbs.len()).max().unwrap_or(0);
        for db in 0..databases {
            let (keys, expires) = self
                .reports
                .iter()
                .filter_map(|r| r.dbs.get(db))
                .fold((0, 0), |(k, e), (keys, expires)| (k + keys, e + expires));
            if keys > 0 || expires > 0 {
                // avg_ttl is not estimated (Redis also reports 0 until its
                // expiry cycle has sampled TTLs).
                let _ = write!(out, "db{db}:keys={keys},expires={expires},avg_ttl=0\r\n");
            }
        }
    }

    /// ringdb's own section: one line per shard.
    fn shards(&self, out: &mut String) {
        let _ = write!(out, "# Shards\r\nshards:{}\r\n", self.reports.len());
        for r in self.reports {
            let keys: usize = r.dbs.iter().map(|(k, _)| k).sum();
            let expires: usize = r.dbs.iter().map(|(_, e)| e).sum();
            let cpu = r.cpu.map_or_else(|| "unpinned".to_string(), |c| c.to_string());
            let _ = write!(
                out,
                "shard{}:cpu={cpu},keys={keys},expires={expires},clients={},ops={},busy_usec={},\
                 used_cpu_user={},used_cpu_sys={}\r\n",
                r.shard,
                r.clients,
                r.stats.commands_processed,
                r.stats.busy_usec,
                secs(r.thread_cpu.0),
                secs(r.thread_cpu.1),
            );
        }
    }

    /// ringdb's reactive queries: totals, then one line per shard (the
    /// shard that owns each query's key).
    fn watch(&self, out: &mut String) {
        let sum = |f: fn(&CoreReport) -> u64| self.reports.iter().map(f).sum::<u64>();
        let _ = write!(
            out,
            "# Watch\r\nwatch_fingerprints:{}\r\nwatch_subscriptions:{}\r\nwatch_pushes:{}\r\n\
             watch_reexecutions:{}\r\n",
            sum(|r| r.watch.0 as u64),
            sum(|r| r.watch.1),
            sum(|r| r.watch.2),
            sum(|r| r.watch.3),
        );
        for r in self.reports {
            let (fingerprints, subscriptions, pushes, reexecutions) = r.watch;
            let _ = write!(
                out,
                "shard{}:fingerprints={fingerprints},subscriptions={subscriptions},\
                 pushes={pushes},reexecutions={reexecutions}\r\n",
                r.shard
            );
        }
    }
}

impl Report<'_> {
    /// ringdb's hot-key detection: rules, keys counted and hot, events, and
    /// watchers, summed over the shards.
    fn hotkeys(&self, out: &mut String) {
        let sum = |f: fn(&CoreReport) -> u64| self.reports.iter().map(f).sum::<u64>();
        let config = self.core.config.borrow();
        let _ = write!(
            out,
            "# Hotkeys\r\nhotkeys_rules:{}\r\nhotkeys_max_keys:{}\r\nhotkeys_tracked_keys:{}\r\n\
             hotkeys_hot_keys:{}\r\nhotkeys_detected:{}\r\nhotkeys_cooled:{}\r\n\
             hotkeys_evicted_keys:{}\r\nhotkeys_counted_accesses:{}\r\nhotkeys_watchers:{}\r\n\
             hotkeys_replicated_keys:{}\r\nhotkeys_replica_reads:{}\r\n",
            config.hotkeys_rules().len(),
            config.hotkeys_max_keys(),
            sum(|r| r.hotkeys.0 as u64),
            sum(|r| r.hotkeys.1 as u64),
            sum(|r| r.hotkeys.2.detected),
            sum(|r| r.hotkeys.2.cooled),
            sum(|r| r.hotkeys.2.evicted),
            sum(|r| r.hotkeys.2.counted),
            sum(|r| r.hotkeys.3 as u64),
            sum(|r| r.replicas.0 as u64),
            sum(|r| r.replicas.1),
        );
    }
}

/// Redis's `getSafeInfoString`: characters that would break INFO's format
/// become `_`.
fn safe(name: &str) -> String {
    name.chars().map(|c| if matches!(c, '#' | ':' | '\n' | '\r') { '_' } else { c }).collect()
}

/// `sysname release machine`, as Redis's `os:` field.
fn uname() -> String {
    // SAFETY: uname fills the zeroed struct we own; its fields are
    // NUL-terminated C strings within their arrays.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    if unsafe { libc::uname(&mut u) } != 0 {
        return String::new();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!("{} {} {}", field(&u.sysname), field(&u.release), field(&u.machine))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ')
            .filter(|a| !a.is_empty())
            .map(|a| Bytes::copy_from_slice(a.as_bytes()))
            .collect()
    }

    #[test]
    fn section_selection_as_redis() {
        let default = Wanted::parse(&args(""));
        assert!(default.has("server") && default.has("keyspace") && !default.has("commandstats"));
        let one = Wanted::parse(&args("commandSTATS"));
        assert!(one.has("commandstats") && !one.has("server"));
        let all = Wanted::parse(&args("cpu all"));
        assert!(all.has("commandstats") && all.has("memory"));
        let mixed = Wanted::parse(&args("cpu default"));
        assert!(mixed.has("cpu") && mixed.has("memory") && !mixed.has("commandstats"));
        assert!(Wanted::parse(&args("everything")).has("errorstats"));
        assert!(Wanted::parse(&args("module_list")).has("modules"));
    }

    #[test]
    fn helpers() {
        assert_eq!(safe("client|list"), "client|list");
        assert_eq!(safe("a:b#c"), "a_b_c");
        assert_eq!(secs(Duration::from_micros(1_500_002)), "1.500002");
        assert!(uname().contains("Linux"));
        assert!(rusage(libc::RUSAGE_SELF).0 + rusage(libc::RUSAGE_SELF).1 > Duration::ZERO);
    }
}
