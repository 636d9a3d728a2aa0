//! A shard: the keyspace one core owns, and everything that lives with it
//! (statistics, the write funnel, intent locks, the expiry cycle's cursor).
//!
//! A `Shard` is plain data with no I/O and no threads: the server gives each
//! core one and only that core ever touches it, so nothing here needs a lock
//! or an atomic. Commands reach it as [`ShardCommand`]s, alone or in batches.

use crate::command::ctx::{ClientInfo, Ctx, KeyspaceView};
use crate::command::spec::{CommandSpec, Exec, Handler};
use crate::funnel::Funnel;
use crate::keyspace::{Entry, Keyspace};
use crate::locks::{fingerprint, LockMode, LockSet, LockTable};
use crate::query_watch::{self, Query};
use bytes::Bytes;
use ringdb_protocol::{Output, ReplyWriter, Resp, Splices};
use ringdb_types::slot::SLOTS;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// A shard's number. Shard = core: shard `i` runs on the i-th CPU it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ShardId(pub u16);

impl ShardId {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// Which shard owns which hash slot: contiguous ranges of equal size, so a
/// shard's slots are `first..first + count` and SCAN visits shards in order.
#[derive(Clone, Copy, Debug)]
pub struct SlotMap {
    shards: u16,
}

impl SlotMap {
    pub fn new(shards: usize) -> Self {
        SlotMap { shards: shards.clamp(1, SLOTS) as u16 }
    }

    pub fn shards(&self) -> usize {
        self.shards as usize
    }

    #[inline]
    pub fn shard_of_slot(&self, slot: u16) -> ShardId {
        ShardId(((slot as u32 * self.shards as u32) / SLOTS as u32) as u16)
    }

    #[inline]
    pub fn shard_of_key(&self, key: &[u8]) -> ShardId {
        if self.shards == 1 {
            return ShardId(0);
        }
        self.shard_of_slot(ringdb_types::slot::key_slot(key))
    }

    /// The first slot of `shard` and how many it owns.
    pub fn slots_of(&self, shard: ShardId) -> (u16, u16) {
        let n = self.shards as u32;
        let first = |i: u32| (i * SLOTS as u32).div_ceil(n);
        let start = first(shard.0 as u32);
        let end = first(shard.0 as u32 + 1).min(SLOTS as u32);
        (start as u16, (end - start) as u16)
    }
}

/// Per-command counters (INFO commandstats).
#[derive(Clone, Copy, Debug, Default)]
pub struct CommandStats {
    pub calls: u64,
    pub usec: u64,
    pub rejected_calls: u64,
    pub failed_calls: u64,
}

/// How scripts ran (INFO stats): held where their declared keys are
/// (every run on a node of one shard), undone there to run again with
/// every shard, or run with every shard.
#[derive(Clone, Copy, Debug, Default)]
pub struct ScriptRuns {
    pub held: u64,
    pub restarted: u64,
    pub node: u64,
}

impl ScriptRuns {
    pub fn add(&mut self, other: &ScriptRuns) {
        self.held += other.held;
        self.restarted += other.restarted;
        self.node += other.node;
    }
}

/// How many samples an instantaneous rate averages (Redis's
/// `STATS_METRIC_SAMPLES`); the server samples every 100 ms.
pub const RATE_SAMPLES: usize = 16;

/// One of Redis's instantaneous metrics (`instantaneous_ops_per_sec`, …):
/// the per-second rate of a counter, averaged over the last
/// [`RATE_SAMPLES`] samples.
#[derive(Clone, Copy, Debug, Default)]
pub struct RateMetric {
    last_ms: u64,
    last_reading: u64,
    samples: [u64; RATE_SAMPLES],
    next: usize,
}

impl RateMetric {
    /// Records the counter's `reading` at `now_ms` (Redis's
    /// `trackInstantaneousMetric`).
    pub fn track(&mut self, now_ms: u64, reading: u64) {
        let elapsed = now_ms.saturating_sub(self.last_ms);
        if self.last_ms != 0 && elapsed > 0 {
            self.samples[self.next] = reading.saturating_sub(self.last_reading) * 1000 / elapsed;
            self.next = (self.next + 1) % RATE_SAMPLES;
        }
        self.last_ms = now_ms;
        self.last_reading = reading;
    }

    /// The average rate per second over the samples.
    pub fn per_sec(&self) -> u64 {
        self.samples.iter().sum::<u64>() / RATE_SAMPLES as u64
    }
}

/// Most distinct error codes INFO errorstats tracks, as Redis
/// (`ERROR_STATS_NUMBER`): error texts can come from clients (a script's
/// `redis.error_reply`), so the table must not grow without bound. Errors past
/// it still count in `error_replies`.
pub const MAX_ERROR_CODES: usize = 128;

/// A shard's statistics (Redis's `server.stat_*` for the work this core
/// does); INFO adds them up over all shards with [`ShardStats::add`].
#[derive(Clone, Debug, Default)]
pub struct ShardStats {
    /// Indexed by command id (the row's position in the table).
    pub commands: Vec<CommandStats>,
    /// Error replies by error code (INFO errorstats).
    pub errors: hashbrown::HashMap<String, u64>,
    /// Every error reply, tracked in `errors` or not (`total_error_replies`).
    pub error_replies: u64,
    /// The command now failing replies with an error counted already: a
    /// script's error that came from a command it called (which counted
    /// it). Taken by the command's own statistics.
    pub error_counted: bool,
    pub keyspace_hits: u64,
    pub keyspace_misses: u64,
    pub expired_keys: u64,
    /// Keys deleted to stay under `maxmemory`.
    pub evicted_keys: u64,
    pub expired_stale_perc: f64,
    pub expire_cycle_cpu_ms: u64,
    pub commands_processed: u64,
    /// CPU time spent running commands on this shard, microseconds.
    pub busy_usec: u64,
    /// Connections this core accepted (`total_connections_received`).
    pub connections_received: u64,
    /// Connections refused for `maxclients` (`rejected_connections`).
    pub rejected_connections: u64,
    /// Clients closed for passing `client-query-buffer-limit`.
    pub query_limit_disconnections: u64,
    /// Bytes read from and written to this core's clients.
    pub net_input_bytes: u64,
    pub net_output_bytes: u64,
    /// Socket reads and writes that carried data.
    pub reads_processed: u64,
    pub writes_processed: u64,
    /// How scripts ran on a node of several shards.
    pub script_runs: ScriptRuns,
    /// Instantaneous rates of `commands_processed`, `net_input_bytes` and
    /// `net_output_bytes`, sampled by [`ShardStats::sample`].
    pub ops_rate: RateMetric,
    pub input_rate: RateMetric,
    pub output_rate: RateMetric,
}

impl ShardStats {
    pub fn command(&mut self, id: usize) -> &mut CommandStats {
        if self.commands.len() <= id {
            self.commands.resize(id + 1, CommandStats::default());
        }
        &mut self.commands[id]
    }

    /// One call of row `id` that ran `usec` (see [`ShardState::count_call`]).
    pub fn call(&mut self, id: usize, usec: u64, failed: bool) {
        let stat = self.command(id);
        stat.calls += 1;
        stat.usec += usec;
        stat.failed_calls += failed as u64;
        self.commands_processed += 1;
    }

    /// Takes back one call of row `id`: a script run that is undone to
    /// start again with every shard leaves no trace.
    pub fn undo_call(&mut self, id: usize) {
        let stat = self.command(id);
        stat.calls = stat.calls.saturating_sub(1);
        self.commands_processed = self.commands_processed.saturating_sub(1);
    }

    /// Counts an error reply with code `code` (`ERR`, `WRONGTYPE`, …).
    pub fn error(&mut self, code: &str) {
        self.error_replies += 1;
        let room = self.errors.len() < MAX_ERROR_CODES;
        match self.errors.get_mut(code) {
            Some(n) => *n += 1,
            None if room => {
                self.errors.insert(code.to_string(), 1);
            }
            None => {}
        }
    }

    /// A command was refused before it ran (wrong arity, NOAUTH, …): Redis's
    /// `rejected_calls`.
    pub fn rejected(&mut self, id: usize, code: &str) {
        self.command(id).rejected_calls += 1;
        self.error(code);
    }

    pub fn reset(&mut self) {
        *self = ShardStats::default();
    }

    /// Takes one sample of every instantaneous rate (every 100 ms).
    pub fn sample(&mut self, now_ms: u64) {
        self.ops_rate.track(now_ms, self.commands_processed);
        self.input_rate.track(now_ms, self.net_input_bytes);
        self.output_rate.track(now_ms, self.net_output_bytes);
    }

    /// Adds `other` into `self` (INFO sums the shards). The stale percentage
    /// of the last expiry cycle is the largest of the shards'; rates are not
    /// added here (INFO adds each shard's `per_sec`).
    pub fn add(&mut self, other: &ShardStats) {
        for (id, c) in other.commands.iter().enumerate() {
            let mine = self.command(id);
            mine.calls += c.calls;
            mine.usec += c.usec;
            mine.rejected_calls += c.rejected_calls;
            mine.failed_calls += c.failed_calls;
        }
        for (code, n) in &other.errors {
            *self.errors.entry(code.clone()).or_insert(0) += n;
        }
        self.error_replies += other.error_replies;
        self.keyspace_hits += other.keyspace_hits;
        self.keyspace_misses += other.keyspace_misses;
        self.expired_keys += other.expired_keys;
        self.evicted_keys += other.evicted_keys;
        self.expired_stale_perc = self.expired_stale_perc.max(other.expired_stale_perc);
        self.expire_cycle_cpu_ms += other.expire_cycle_cpu_ms;
        self.commands_processed += other.commands_processed;
        self.busy_usec += other.busy_usec;
        self.connections_received += other.connections_received;
        self.rejected_connections += other.rejected_connections;
        self.query_limit_disconnections += other.query_limit_disconnections;
        self.net_input_bytes += other.net_input_bytes;
        self.net_output_bytes += other.net_output_bytes;
        self.reads_processed += other.reads_processed;
        self.writes_processed += other.writes_processed;
        self.script_runs.add(&other.script_runs);
    }
}

/// The settings a shard needs while running commands (a copy per shard,
/// updated by CONFIG SET on every shard).
#[derive(Clone, Debug)]
pub struct ShardSettings {
    pub databases: usize,
    pub active_expire: bool,
    /// This node is a replica: its keys expire by its primary's DELs.
    pub replica: bool,
    /// `maxmemory-policy` is an LFU policy: keys carry an access frequency
    /// instead of an access time.
    pub lfu: bool,
    pub lfu_log_factor: u32,
    pub lfu_decay_time: u32,
    /// `proto-max-bulk-len`: no string may grow beyond it.
    pub max_bulk_len: u64,
    /// When collections leave their compact encodings.
    pub limits: ringdb_types::limits::Limits,
    /// How scripts run (busy threshold, Lua memory, undeclared keys).
    pub scripts: crate::scripting::ScriptSettings,
    /// `hll-sparse-max-bytes`: a sparse HyperLogLog that would grow past
    /// this many bytes becomes dense.
    pub hll_sparse_max_bytes: usize,
    /// `bf-error-rate` and `bf-initial-size`: the filter BF.ADD, BF.MADD and
    /// BF.INSERT create when the key does not exist.
    pub bf_error_rate: f64,
    pub bf_initial_size: u64,
    /// `watch-coalesce-ms`: 0 re-runs a changed reactive query after every
    /// command (each change is pushed), more leaves it to the server's
    /// timer.
    pub watch_coalesce_ms: u64,
    /// `maxmemory` and its eviction policy.
    pub memory: crate::evict::MemoryLimit,
    /// Which commands the slow log records, and how many it keeps.
    pub slowlog: crate::slowlog::SlowLogSettings,
    /// Per-command latency histograms and the latency monitor's threshold.
    pub latency: crate::latency::LatencySettings,
    /// `lazyfree-lazy-user-del`: DEL frees as UNLINK does.
    pub lazy_user_del: bool,
}

impl Default for ShardSettings {
    fn default() -> Self {
        ShardSettings {
            databases: 16,
            active_expire: true,
            replica: false,
            lfu: false,
            lfu_log_factor: 10,
            lfu_decay_time: 1,
            max_bulk_len: 512 * 1024 * 1024,
            limits: ringdb_types::limits::Limits {
                list_listpack: false,
                set_max_listpack_entries: 0,
                set_max_listpack_value: 0,
                ..Default::default()
            },
            scripts: crate::scripting::ScriptSettings::default(),
            hll_sparse_max_bytes: ringdb_types::hll::DEFAULT_SPARSE_MAX_BYTES,
            bf_error_rate: 0.01,
            bf_initial_size: 100,
            watch_coalesce_ms: 0,
            memory: crate::evict::MemoryLimit::default(),
            slowlog: crate::slowlog::SlowLogSettings::default(),
            latency: crate::latency::LatencySettings { tracking: true, monitor_threshold_ms: 0 },
            lazy_user_del: false,
        }
    }
}

/// Everything of a shard but its keys.
pub struct ShardState {
    /// The command that just ran found nothing to serve and replied its
    /// timeout's null: a blocking form waits ([`KeyspaceView::found_nothing`];
    /// cleared before every command).
    ///
    /// [`KeyspaceView::found_nothing`]: crate::command::KeyspaceView::found_nothing
    pub found_nothing: bool,
    pub funnel: Funnel,
    pub stats: ShardStats,
    pub settings: ShardSettings,
    /// The shard's Lua state and scripts (created on first use).
    pub scripting: crate::scripting::Scripting,
    /// Hot-key rules, counters and the top-keys sketch.
    pub hotkeys: crate::hotkeys::HotKeys,
    /// The process was over `maxmemory` before the current command and
    /// this shard ran out of keys to evict: `denyoom` commands get the OOM
    /// error (see [`crate::evict`]).
    pub oom: bool,
    /// Eviction candidates kept between runs (see [`crate::evict`]).
    pub evict_pool: crate::evict::Pool,
    /// Per-command latency histograms and latency monitor events (see
    /// [`crate::latency`]); CONFIG RESETSTAT clears the histograms.
    pub latency: crate::latency::Latency,
    /// What every shard could evict (the process's one board).
    pub evict_board: std::sync::Arc<crate::evict::Board>,
    /// The node's CLIENT PAUSE state (keys neither expire nor are evicted
    /// while it freezes them).
    pub pause: std::sync::Arc<crate::pause::Pause>,
    /// A scratch state whose keyspace the router filled with the keys the
    /// command forms from its data too ([`FormedKeys`]), so it may read them.
    ///
    /// [`FormedKeys`]: crate::command::spec::FormedKeys
    pub formed_keys_gathered: bool,
    /// Where slow-log entry ids come from: one counter for every shard of
    /// the process (the server shares its own; scratch states share their
    /// home shard's).
    pub slowlog_ids: std::sync::Arc<std::sync::atomic::AtomicU64>,
    /// Some client, on any core, is in MONITOR: commands scripts call are
    /// written as lines to the effects for the server to deliver.
    pub monitored: bool,
    rng: u64,
}

/// A message a script PUBLISHed (SPUBLISH: on a shard channel).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publish {
    pub shard_channel: bool,
    pub channel: Bytes,
    pub message: Bytes,
}

/// How many clients a message on a channel reaches right now (the
/// server's Pub/Sub subscribers; `true`: a shard channel).
pub type Receivers<'a> = dyn Fn(bool, &[u8]) -> i64 + 'a;

/// Redis's initial LFU counter for new keys.
const LFU_INIT_VAL: u32 = 5;

impl ShardState {
    /// One call of row `id` that ran `usec`: as INFO commandstats,
    /// `total_commands_processed` and LATENCY count it.
    pub fn count_call(&mut self, id: usize, spec: &CommandSpec, usec: u64, failed: bool) {
        let fast = spec.has(crate::command::spec::flags::FAST);
        self.stats.call(id, usec, failed);
        self.latency.record_call(self.settings.latency, id, fast, usec);
    }

    pub fn new(settings: ShardSettings, seed: u64) -> Self {
        ShardState {
            found_nothing: false,
            funnel: Funnel::default(),
            stats: ShardStats::default(),
            settings,
            scripting: crate::scripting::Scripting::default(),
            hotkeys: crate::hotkeys::HotKeys::default(),
            oom: false,
            evict_pool: crate::evict::Pool::default(),
            evict_board: Default::default(),
            pause: Default::default(),
            latency: Default::default(),
            formed_keys_gathered: false,
            slowlog_ids: Default::default(),
            monitored: false,
            rng: seed | 1,
        }
    }

    /// A state whose funnel records every event (scratch keyspaces, tests).
    pub fn recording(settings: ShardSettings) -> Self {
        ShardState { funnel: Funnel::recording(), ..ShardState::new(settings, 0x2545_F491) }
    }

    /// Replaces the hot-key rules (keys that were hot under a changed rule
    /// cool down: their events join the effects).
    pub fn set_hotkey_rules(&mut self, rules: Vec<crate::hotkeys::rule::Rule>) {
        self.hotkeys.set_rules(rules, &mut self.funnel.out.hot);
    }

    /// Changes `hotkeys-max-keys`.
    pub fn set_hotkeys_max_keys(&mut self, max_keys: usize) {
        self.hotkeys.set_max_keys(max_keys, &mut self.funnel.out.hot);
    }

    /// The hot-key tick (every 100 ms): counts the reads other cores served
    /// from this shard's read copies, cools down the keys whose time is up.
    /// Whether keys became hot or cooled since the effects were last taken.
    pub fn tick_hotkeys(&mut self, now_ms: u64) -> bool {
        let out = &mut self.funnel.out.hot;
        for (db, key, n) in self.funnel.replicas.take_served() {
            self.hotkeys.record_served(db, &key, n, now_ms, out);
        }
        self.hotkeys.tick(now_ms, out);
        !out.is_empty()
    }

    /// A generator seeded from this state's, for a command that draws
    /// numbers while it holds a key for writing (SPOP) or reading.
    pub fn generator(&mut self) -> impl FnMut() -> u64 {
        let mut state = self.random();
        move || {
            state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            z ^ (z >> 31)
        }
    }

    /// A fast xorshift random number (RANDOMKEY, LFU increments, sampling).
    pub fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        x
    }

    /// The access field of a key created now.
    pub fn new_access(&self, now_ms: u64) -> u32 {
        if self.settings.lfu {
            (lfu_minutes(now_ms) << 8) | LFU_INIT_VAL
        } else {
            (now_ms / 1000) as u32
        }
    }

    /// Records an access to `e` (Redis's `updateLFU` / LRU clock update).
    pub fn touch(&mut self, e: &mut Entry, now_ms: u64) {
        if self.settings.lfu {
            let counter = self.lfu_decayed(e.access, now_ms);
            let counter = self.lfu_log_incr(counter);
            e.access = (lfu_minutes(now_ms) << 8) | counter;
        } else {
            e.access = (now_ms / 1000) as u32;
        }
    }

    /// The access field Redis's `objectSetLRUOrLFU` gives a restored or
    /// loaded key: `freq` under an LFU policy, `idle` seconds under the
    /// others; `None` keeps the fresh access of a new key.
    pub fn restored_access(&self, now_ms: u64, idle: Option<u64>, freq: Option<u8>) -> Option<u32> {
        if self.settings.lfu {
            freq.map(|f| (lfu_minutes(now_ms) << 8) | f as u32)
        } else {
            let idle = idle?.min(u32::MAX as u64) as u32;
            Some(((now_ms / 1000) as u32).wrapping_sub(idle))
        }
    }

    /// The LFU counter of an access field after decay (OBJECT FREQ).
    pub fn lfu_decayed(&self, access: u32, now_ms: u64) -> u32 {
        lfu_decayed(access, now_ms, self.settings.lfu_decay_time)
    }

    fn lfu_log_incr(&mut self, counter: u32) -> u32 {
        if counter == 255 {
            return 255;
        }
        let r = (self.random() >> 11) as f64 / (1u64 << 53) as f64;
        let base = counter.saturating_sub(LFU_INIT_VAL) as f64;
        let p = 1.0 / (base * self.settings.lfu_log_factor as f64 + 1.0);
        if r < p {
            counter + 1
        } else {
            counter
        }
    }
}

/// The LFU counter of an access field after `decay_time` minutes per step
/// of decay (Redis's `LFUDecrAndReturn`); 0 turns decay off.
pub fn lfu_decayed(access: u32, now_ms: u64, decay_time: u32) -> u32 {
    let ldt = access >> 8;
    let counter = access & 255;
    let now = lfu_minutes(now_ms);
    let elapsed = if now >= ldt { now - ldt } else { 65535 - ldt + now };
    let periods = elapsed.checked_div(decay_time).unwrap_or(0);
    counter.saturating_sub(periods)
}

fn lfu_minutes(now_ms: u64) -> u32 {
    ((now_ms / 60_000) & 65535) as u32
}

/// Unix time in milliseconds.
pub fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

/// Time as commands see it. "Now" in milliseconds is read once per batch
/// (Redis also freezes the clock for a command; a batch is a few
/// microseconds); durations for INFO commandstats chain from one command's
/// end to the next one's, so a command costs one clock read, not three.
pub struct Clock {
    pub now_ms: u64,
    mark: Instant,
}

impl Clock {
    pub fn start() -> Self {
        Clock { now_ms: now_ms(), mark: Instant::now() }
    }

    /// A clock frozen at `now_ms` (tests, scratch keyspaces).
    pub fn at(now_ms: u64) -> Self {
        Clock { now_ms, mark: Instant::now() }
    }

    /// Microseconds since the last lap.
    fn lap_usec(&mut self) -> u64 {
        let now = Instant::now();
        let usec = now.duration_since(self.mark).as_micros() as u64;
        self.mark = now;
        usec
    }
}

/// Loads the keyspace entries of `keys` in `db`, and their lines of the
/// hot-key sketch, into the cache (see [`crate::keyspace::Db::prefetch`]).
pub fn prefetch_keys<'k>(
    keyspace: &Keyspace,
    state: &ShardState,
    db: usize,
    keys: impl Iterator<Item = &'k [u8]> + Clone,
) {
    if db >= keyspace.db_count() {
        return;
    }
    keyspace.db(db).prefetch(keys.clone());
    for key in keys.take(crate::keyspace::PREFETCH_MAX) {
        state.hotkeys.prefetch(db, key);
    }
}

/// One command bound for a shard, with everything needed to run it there.
#[derive(Clone)]
pub struct ShardCommand {
    /// The row's id in the command table (for statistics).
    pub id: usize,
    pub spec: &'static CommandSpec,
    pub args: Vec<Bytes>,
    pub client: ClientInfo,
}

impl ShardCommand {
    /// The databases whose copies of its keys the command may read or
    /// change: the client's, or every one for a row that names another
    /// (MOVE, COPY … DB) and for scripts (they may SELECT).
    pub fn databases(&self, count: usize) -> std::ops::Range<usize> {
        use crate::command::spec::flags::{OTHER_DBS, RUNS_SCRIPT};
        match self.spec.has(OTHER_DBS) || self.spec.has(RUNS_SCRIPT) {
            true => 0..count,
            false => self.client.db..self.client.db + 1,
        }
    }

    fn handler(&self) -> Option<Handler> {
        match self.spec.exec {
            Exec::Shard(h) => Some(h),
            Exec::Split { handler, .. } => Some(handler),
            Exec::Node(_) | Exec::Container => None,
        }
    }

    /// The locks this command would need on its shard. A script may touch
    /// any key of its shard: it waits for every transaction there.
    pub fn lock_set(&self) -> LockSet {
        if self.spec.has(crate::command::spec::flags::RUNS_SCRIPT) {
            return vec![(crate::locks::WHOLE_SHARD, LockMode::Exclusive)];
        }
        let mode =
            if self.spec.locks_exclusively() { LockMode::Exclusive } else { LockMode::Shared };
        self.spec
            .key_positions(&self.args)
            .unwrap_or_default()
            .into_iter()
            .filter_map(|i| self.args.get(i))
            .map(|k| (fingerprint(self.client.db, k), mode))
            .collect()
    }
}

/// The replies of a batch: one output (long string values in it are
/// references to the keyspace's bytes, which travel to the connection's
/// core without a copy), and where each reply ends in its byte buffer.
#[derive(Default)]
pub struct BatchReply {
    pub buf: Output,
    pub ends: Vec<usize>,
    /// Commands not run yet: the batch stopped early because its replies
    /// reached [`BATCH_REPLY_LIMIT`]. The sender writes out what it has and
    /// sends these again.
    pub rest: Vec<ShardCommand>,
}

/// Bytes of replies a batch collects before it returns early, so that a
/// pipeline of big replies is never held in memory whole.
pub const BATCH_REPLY_LIMIT: usize = 1 << 20;

/// What runs when a waiter's turn comes in a shard's lock queue.
pub type Waiter = Box<dyn FnOnce(&mut Shard)>;

/// What receives a batch's replies once all of its commands have run.
pub type BatchDone = Box<dyn FnOnce(&mut Shard, BatchReply)>;

pub struct Shard {
    pub id: ShardId,
    pub slot_map: SlotMap,
    pub keyspace: Keyspace,
    pub state: ShardState,
    pub locks: LockTable<Waiter>,
    /// Where the active expiry cycle resumes: (database, slot).
    pub expire_cursor: (usize, u16),
}

impl Shard {
    pub fn new(id: ShardId, slot_map: SlotMap, settings: ShardSettings, seed: u64) -> Self {
        let (first, count) = slot_map.slots_of(id);
        Shard {
            id,
            slot_map,
            keyspace: Keyspace::for_slots(settings.databases, first, count),
            state: ShardState::new(settings, seed),
            locks: LockTable::default(),
            expire_cursor: (0, first),
        }
    }

    /// Runs one command now, whatever the locks say (the caller checked, or
    /// holds them): the way into a shard. Makes room under `maxmemory`
    /// first, and after it re-runs the reactive queries it changed; the rest
    /// is [`call`].
    pub fn call<'o>(
        &mut self,
        cmd: &ShardCommand,
        out: impl Into<Sink<'o>>,
        clock: &mut Clock,
        caller: Caller,
    ) {
        crate::evict::make_room(self, clock.now_ms);
        call(&mut self.keyspace, &mut self.state, cmd, out, clock, caller);
        self.after_command(clock.now_ms);
    }

    /// After each command: unless `watch-coalesce-ms` asks to wait, the
    /// reactive queries it changed are re-run now, so that every change is
    /// pushed, even in the middle of a pipeline. Under `maxmemory`, the
    /// shard's count of keys it could evict is published as it changes, so
    /// that a shard out of victims finds the others' keys at once.
    fn after_command(&mut self, now: u64) {
        if self.state.funnel.queries.has_dirty() && self.state.settings.watch_coalesce_ms == 0 {
            self.rerun_queries(now);
        }
        if self.state.settings.memory.maxmemory != 0 {
            crate::evict::publish_if_changed(self);
        }
    }

    /// Before a pipeline of commands from one client runs here: starts
    /// loading their keys' entries into the cache (see [`crate::keyspace::Db::prefetch`]).
    /// Takes each command's second argument, the first key of nearly every
    /// keyed command; for the others the hint is merely wasted.
    pub fn prefetch<'k>(&self, db: usize, args: impl Iterator<Item = &'k [Bytes]> + Clone) {
        let keys = args.filter_map(|a| a.get(1).map(|k| &k[..]));
        prefetch_keys(&self.keyspace, &self.state, db, keys);
    }

    /// Runs a batch of commands from one connection in order. A command
    /// whose keys are locked by a transaction parks the rest of the batch in
    /// the lock queue; it resumes when its turn comes. `done` receives the
    /// replies once the last command has run, or once they pass
    /// [`BATCH_REPLY_LIMIT`] (then `rest` holds the commands still to run).
    pub fn run_batch(&mut self, cmds: Vec<ShardCommand>, done: BatchDone) {
        if cmds.len() > 1 {
            self.prefetch(cmds[0].client.db, cmds.iter().map(|c| &c.args[..]));
        }
        self.resume_batch(cmds, 0, BatchReply::default(), false, done)
    }

    fn resume_batch(
        &mut self,
        mut cmds: Vec<ShardCommand>,
        mut next: usize,
        mut reply: BatchReply,
        woken: bool,
        done: BatchDone,
    ) {
        let mut clock = Clock::start();
        // A woken batch runs its first command unconditionally: the lock
        // queue has just said its turn has come.
        let mut unchecked = woken;
        while next < cmds.len() {
            if reply.buf.size() >= BATCH_REPLY_LIMIT {
                reply.rest = cmds.split_off(next);
                break;
            }
            let cmd = &cmds[next];
            if !std::mem::take(&mut unchecked) && !self.locks.is_idle() {
                let locks = cmd.lock_set();
                if !self.locks.may_run(&locks) {
                    self.locks.enqueue(
                        locks,
                        false,
                        Box::new(move |shard: &mut Shard| {
                            shard.resume_batch(cmds, next, reply, true, done)
                        }),
                    );
                    return;
                }
            }
            self.call(cmd, &mut reply.buf, &mut clock, Caller::Client);
            reply.ends.push(reply.buf.len());
            next += 1;
        }
        done(self, reply)
    }

    /// Transaction step: takes `locks`, then runs `granted` (at once, or when
    /// the lock queue gets to it).
    pub fn tx_acquire(&mut self, locks: LockSet, granted: Waiter) {
        if self.locks.try_acquire(&locks) {
            granted(self)
        } else {
            self.locks.enqueue(locks, true, granted)
        }
    }

    /// Transaction step: releases `locks` and lets the waiters whose turn has
    /// come proceed.
    pub fn tx_release(&mut self, locks: &LockSet) {
        let ready = self.locks.release(locks);
        for waiter in ready {
            waiter(self);
        }
    }

    /// One more watcher, on `core` and speaking `resp`, of the reactive
    /// query `fp`; returns the query's current result for it.
    pub fn watch_query(&mut self, fp: u64, query: Query, core: u16, resp: Resp, now: u64) -> Bytes {
        let (keyspace, state) = (&mut self.keyspace, &mut self.state);
        // The table is taken out while it runs queries, which need the
        // state it lives in; running a read changes no watched key.
        let mut table = std::mem::take(&mut state.funnel.queries);
        let result = table.watch(fp, query, core, resp, |cmd, resp| {
            query_watch::run(keyspace, state, cmd, resp, now)
        });
        state.funnel.queries = table;
        result
    }

    /// One watcher of `fp` on `core` speaking `resp` lets go.
    pub fn unwatch_query(&mut self, fp: u64, core: u16, resp: Resp) {
        self.state.funnel.queries.unwatch(fp, core, resp);
    }

    /// Gives up keys this shard must to keep the process within its
    /// limits: eviction while over `maxmemory`, and tracked keys while over
    /// `tracking-table-max-keys` (on the timer, and when another core asks
    /// before a command).
    pub fn enforce_limits(&mut self, now: u64) {
        crate::evict::evict_on_timer(self, now);
        self.state.funnel.limit_tracked();
    }

    /// Re-runs the reactive queries whose key changed; the results that
    /// differ from the last ones sent join the effects.
    pub fn rerun_queries(&mut self, now: u64) {
        if !self.state.funnel.queries.has_dirty() {
            return;
        }
        let (keyspace, state) = (&mut self.keyspace, &mut self.state);
        let mut table = std::mem::take(&mut state.funnel.queries);
        let pushes = table.rerun(|cmd, resp| query_watch::run(keyspace, state, cmd, resp, now));
        state.funnel.queries = table;
        state.funnel.out.watch_pushes.extend(pushes);
    }

    /// Serves the blocked clients whose keys changed (see
    /// [`crate::blocking`]), in the order they blocked, and keeps serving
    /// while serving changes more keys (a BLMOVE into a list another client
    /// waits on). A waiter whose keys a transaction holds waits for it.
    pub fn serve_blocked(&mut self) {
        // A bound on chains of moves feeding each other (each round serves
        // or leaves every ready waiter; a ring of moves could feed itself).
        for _ in 0..1024 {
            if !self.state.funnel.blocked.has_ready() {
                return;
            }
            let mut served_any = false;
            for (waiter, command) in self.state.funnel.blocked.take_ready() {
                let Some(command) = command else {
                    // Keys on several shards: its home core tries again.
                    self.state.funnel.out.wakes.push((waiter, None));
                    continue;
                };
                if !self.locks.is_idle() && !self.locks.may_run(&command.lock_set()) {
                    self.state.funnel.blocked.defer(waiter);
                    continue;
                }
                let mut out = Vec::new();
                self.call(&command, &mut out, &mut Clock::start(), Caller::Waiting);
                let nothing = self.state.found_nothing;
                match crate::blocking::verdict(&command, &out, nothing, &self.keyspace) {
                    crate::blocking::Verdict::Wait => {}
                    crate::blocking::Verdict::Reply(reply) => {
                        self.state.funnel.blocked.served(waiter);
                        self.state.funnel.out.wakes.push((waiter, Some(reply)));
                        served_any = true;
                    }
                }
            }
            // Only a served client can have made others ready; deferred
            // ones wait for the next call (after the transaction's step).
            if !served_any {
                return;
            }
        }
    }

    /// Keys in all databases.
    pub fn key_count(&self) -> usize {
        self.keyspace.iter().map(|db| db.len()).sum()
    }
}

/// Who runs a command on a shard, which decides what its run counts.
pub enum Caller<'l, 'a> {
    /// A client's command, and everything that runs as one: a part of a
    /// split, a queued MULTI command, a script's `redis.call`, a gathered
    /// command on its scratch copy. Counted in full.
    Client,
    /// A run of a blocking command that leaves its client waiting when it
    /// finds nothing to serve (its first try, or a try after a key
    /// changed): such a run is not a call, as Redis counts a blocked
    /// command once, when it is served, times out or is unblocked.
    Waiting,
    /// The server's own run of a reactive query: nothing a client could
    /// observe is counted (no command statistics, no keyspace hits or
    /// misses, no `keymiss` event, no hot-key access).
    Query,
    /// A script run with the other shards lent to it
    /// ([`Shard::call_on_node`], which logs its changes itself).
    Node(&'l mut crate::lent::Lent<'a>),
}

/// Where a reply goes: plain bytes, or a connection's output, which takes
/// long string values by reference (see [`ringdb_protocol::output`]).
pub enum Sink<'o> {
    Bytes(&'o mut Vec<u8>),
    Output(&'o mut Output),
}

impl<'o> From<&'o mut Vec<u8>> for Sink<'o> {
    fn from(out: &'o mut Vec<u8>) -> Self {
        Sink::Bytes(out)
    }
}

impl<'o> From<&'o mut Output> for Sink<'o> {
    fn from(out: &'o mut Output) -> Self {
        Sink::Output(out)
    }
}

/// Runs `cmd` against `keyspace` (a shard's, or a transaction's scratch
/// copy), appending the reply to `out`: the OOM refusal, hot-key access
/// counting, the handler, log atomicity, read copies, statistics, the slow
/// log and latency, each as `caller` asks. A bug that panics inside a
/// handler becomes an error reply instead of taking the core down.
pub fn call<'o>(
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    cmd: &ShardCommand,
    out: impl Into<Sink<'o>>,
    clock: &mut Clock,
    caller: Caller,
) {
    let (out, mut splices) = match out.into() {
        Sink::Bytes(bytes) => (bytes, None),
        Sink::Output(output) => {
            let (bytes, splices) = output.parts();
            (bytes, Some(splices))
        }
    };
    let (waiting, lent) = match caller {
        Caller::Query => return query(keyspace, state, cmd, out, splices, clock.now_ms),
        Caller::Client => (false, None),
        Caller::Waiting => (true, None),
        Caller::Node(lent) => (false, Some(lent)),
    };
    if state.oom && cmd.spec.has(crate::command::spec::flags::DENYOOM) {
        // Refused before it runs: a rejected call, as in Redis.
        ReplyWriter::new(out, cmd.client.resp).error(crate::evict::OOM);
        state.stats.rejected(cmd.id, "OOM");
        return;
    }
    record_accesses(state, cmd, clock.now_ms);
    let mark = out.len();
    let log_mark = state.funnel.log.as_ref().map(|log| log.mark());
    let node = lent.is_some();
    let expired = state.stats.expired_keys;
    let failed = run_handler(keyspace, state, cmd, out, splices.as_deref_mut(), clock.now_ms, lent);
    // A node-wide run logs its changes across the shards itself.
    if let (Some(log_mark), false) = (log_mark, node) {
        atomic_in_log(state, log_mark);
        // A key that expired as the command found it is sent as its state:
        // a replica still holds the expired value.
        let as_is = !waiting
            && failed.is_none()
            && cmd.spec.replicates_as_is(&cmd.args)
            && state.stats.expired_keys == expired;
        if let Some(log) = state.funnel.log.as_mut().filter(|l| l.as_is && as_is) {
            log.mark_as_is(log_mark, cmd.client.db, &cmd.args);
        }
    }
    let counted = std::mem::take(&mut state.stats.error_counted);
    if waiting && state.found_nothing {
        return;
    }
    if !state.funnel.replicas.is_empty()
        && failed.is_none()
        && cmd.spec.has(crate::command::spec::flags::READ_COPY)
    {
        let reply = match splices {
            Some(splices) => ringdb_protocol::output::flatten_since(out, splices, mark),
            None => std::borrow::Cow::Borrowed(&out[mark..]),
        };
        fill_replica(keyspace, state, cmd, &reply);
    }
    if let Some(e) = failed.as_ref().filter(|_| !counted) {
        state.stats.error(e.code());
    }
    let usec = clock.lap_usec();
    crate::slowlog::record(state, cmd, usec, clock.now_ms);
    state.count_call(cmd.id, cmd.spec, usec, failed.is_some());
    state.stats.busy_usec += usec;
}

/// [`Caller::Query`]: the handler alone, with the hits, misses and
/// `keymiss` events it caused taken back.
fn query(
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    cmd: &ShardCommand,
    out: &mut Vec<u8>,
    splices: Option<&mut Splices>,
    now: u64,
) {
    let (hits, misses) = (state.stats.keyspace_hits, state.stats.keyspace_misses);
    let queued = state.funnel.out.events.len();
    run_handler(keyspace, state, cmd, out, splices, now, None);
    state.stats.keyspace_hits = hits;
    state.stats.keyspace_misses = misses;
    let events = &mut state.funnel.out.events;
    let added = events.split_off(queued);
    events.extend(added.into_iter().filter(|e| e.class != crate::funnel::NotifyClass::KeyMiss));
}

/// A command that changed several keys (MSET, RENAME, a script) is one
/// transaction in the append-only log: a crash that tears its records
/// loses all of them at replay, never some.
fn atomic_in_log(state: &mut ShardState, log_mark: usize) {
    if state.funnel.log.as_ref().is_some_and(|log| log.several_changes_since(log_mark)) {
        let id = state.random();
        if let Some(log) = &mut state.funnel.log {
            log.wrap_since(log_mark, id);
        }
    }
}

/// Counts each key `cmd` names as one access, for hot-key detection: a
/// write for a command flagged `write`, a read otherwise. This is the one
/// place a command's keys are known on its shard, and it runs once per
/// command a client (or a script) sends; the server's own re-runs of
/// reactive queries ([`Caller::Query`]) are not counted, and neither are the
/// scratch copies cross-shard commands run on (a recording funnel): they
/// would cost each such command a fresh sketch, and count on a state that
/// is thrown away.
fn record_accesses(state: &mut ShardState, cmd: &ShardCommand, now: u64) {
    if state.funnel.is_recording() {
        return;
    }
    let write = cmd.spec.is_write();
    let (args, db, hotkeys) = (&cmd.args, cmd.client.db, &mut state.hotkeys);
    let out = &mut state.funnel.out.hot;
    cmd.spec.for_each_key(args, |i| {
        if let Some(key) = args.get(i) {
            hotkeys.record(db, key, write, now, out);
        }
    });
}

/// After a `GET` of a key with per-core read copies: its reply becomes the
/// copy (see [`crate::hotkeys::replica`]).
fn fill_replica(keyspace: &Keyspace, state: &ShardState, cmd: &ShardCommand, reply: &[u8]) {
    let (Some(key), db) = (cmd.args.get(1), cmd.client.db) else { return };
    if db >= keyspace.db_count() {
        return;
    }
    let expire_at = keyspace.db(db).get(key).and_then(|e| e.expire_at());
    state.funnel.replicas.fill(db, key, reply, expire_at);
}

/// Runs `cmd`'s handler, writing its reply (or its error) to `out` (and
/// long string values to `splices`, if given); returns the error, if any.
fn run_handler(
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    cmd: &ShardCommand,
    out: &mut Vec<u8>,
    mut splices: Option<&mut Splices>,
    now: u64,
    lent: Option<&mut crate::lent::Lent>,
) -> Option<crate::command::error::CmdError> {
    let Some(handler) = cmd.handler() else {
        let e = crate::command::error::CmdError::new("ERR command cannot run on a shard");
        ReplyWriter::new(out, cmd.client.resp).error(e.text());
        return Some(e);
    };
    let mark = out.len();
    state.found_nothing = false;
    let outer_writer = state.funnel.tracking.enter(&cmd.client);
    let result = {
        let mut ks = KeyspaceView::new(keyspace, state, cmd.client.db, now, cmd.client.no_touch);
        ks.from_master = cmd.client.master;
        let mut ctx = Ctx {
            ks,
            out: match splices.as_deref_mut() {
                Some(splices) => ReplyWriter::spliced(out, splices, cmd.client.resp),
                None => ReplyWriter::new(out, cmd.client.resp),
            },
            client: cmd.client,
            lent,
        };
        catch_unwind(AssertUnwindSafe(|| handler(&mut ctx, &cmd.args)))
    };
    let funnel = &mut state.funnel;
    funnel.tracking.leave(outer_writer, &cmd.client, cmd.spec, &cmd.args, &mut funnel.out);
    let failed = match result {
        Ok(Ok(())) => None,
        Ok(Err(e)) => Some(e),
        Err(_) => Some(crate::command::error::CmdError::new(
            "ERR internal error while running the command (see the server log)",
        )),
    };
    if let Some(e) = &failed {
        out.truncate(mark);
        if let Some(splices) = splices {
            splices.truncate(mark);
        }
        ReplyWriter::new(out, cmd.client.resp).error(e.text());
    }
    failed
}

/// Tests' way to run a command: `args` resolved against the command table
/// (an unknown command fails the test), run as `client` at `now` through
/// [`call`]; the reply's bytes.
#[cfg(test)]
pub(crate) fn test_call(
    keyspace: &mut Keyspace,
    state: &mut ShardState,
    args: Vec<Bytes>,
    client: ClientInfo,
    now: u64,
) -> Vec<u8> {
    let reg = crate::command::table().resolve(&args).unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let cmd = ShardCommand { id: reg.id, spec: reg.spec, args, client };
    let mut out = Vec::new();
    call(keyspace, state, &cmd, &mut out, &mut Clock::at(now), Caller::Client);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slot_ranges_cover_everything_once() {
        for n in [1usize, 2, 3, 7, 64] {
            let map = SlotMap::new(n);
            let mut next = 0u32;
            for s in 0..n {
                let (first, count) = map.slots_of(ShardId(s as u16));
                assert_eq!(first as u32, next);
                for slot in first..first + count {
                    assert_eq!(map.shard_of_slot(slot), ShardId(s as u16));
                }
                next += count as u32;
            }
            assert_eq!(next, SLOTS as u32);
        }
    }

    #[test]
    fn rates_average_the_last_samples() {
        let mut rate = RateMetric::default();
        rate.track(1_000, 0);
        assert_eq!(rate.per_sec(), 0);
        for i in 1..=RATE_SAMPLES as u64 {
            // 50 more every 100 ms: 500 per second.
            rate.track(1_000 + i * 100, i * 50);
        }
        assert_eq!(rate.per_sec(), 500);
        rate.track(1_000 + (RATE_SAMPLES as u64 + 1) * 100, RATE_SAMPLES as u64 * 50);
        assert_eq!(rate.per_sec(), 500 * (RATE_SAMPLES as u64 - 1) / RATE_SAMPLES as u64);
    }

    #[test]
    fn stats_add_up_and_error_codes_are_bounded() {
        let mut a = ShardStats::default();
        a.command(3).calls = 2;
        a.error("ERR");
        a.rejected(1, "ERR");
        let mut b = ShardStats::default();
        b.command(3).calls = 5;
        b.error("WRONGTYPE");
        b.keyspace_hits = 7;
        let mut total = ShardStats::default();
        total.add(&a);
        total.add(&b);
        assert_eq!(total.commands[3].calls, 7);
        assert_eq!(total.commands[1].rejected_calls, 1);
        assert_eq!(total.errors.get("ERR"), Some(&2));
        assert_eq!(total.errors.get("WRONGTYPE"), Some(&1));
        assert_eq!(total.error_replies, 3);
        assert_eq!(total.keyspace_hits, 7);

        let mut many = ShardStats::default();
        for i in 0..MAX_ERROR_CODES + 10 {
            many.error(&format!("E{i}"));
        }
        assert_eq!(many.errors.len(), MAX_ERROR_CODES);
        assert_eq!(many.error_replies, (MAX_ERROR_CODES + 10) as u64);
    }
}
