//! Start-up and the per-core runtime: one glommio executor per shard, pinned
//! to its CPU, each with its own listener(s), its shard, its clients and its
//! end of the mesh.
//!
//! [`Shared`] is what all cores read and never write after start-up (the
//! slot map, the mesh senders, start time). [`Core`] is what one core owns;
//! it is only ever touched from that core's thread.

use crate::cmd::connection::REDIS_VERSION;
use crate::config::Config;
use crate::mesh::Job;
use crate::net::clients::ClientRegistry;
use crate::net::listener;
use glommio::{LocalExecutorBuilder, Placement};
use ringdb_engine::effects::Effects;
use ringdb_engine::hotkeys::replica::ReplicaSlot;
use ringdb_engine::hotkeys::HotEvent;
use ringdb_engine::shard::ShardSettings;
use ringdb_engine::{Shard, ShardId, SlotMap};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, AtomicUsize};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tracing::{error, info, warn};

/// Read-only, process-wide facts shared by every core.
pub struct Shared {
    pub slot_map: SlotMap,
    /// Senders into each core's mesh queue.
    pub mesh: Vec<flume::Sender<Job>>,
    /// Each core's doorbell, rung after a job is queued on it.
    pub doorbells: Vec<crate::mesh::Doorbell>,
    pub started: Instant,
    pub started_unix_ms: u64,
    pub run_id: String,
    /// Replication: the stream, its backlog, replicas, the primary.
    pub repl: Arc<crate::repl::Replication>,
    pub port: u16,
    /// CPU each shard is pinned to (None when not pinned).
    pub cpus: Vec<Option<usize>>,
    pub executable: String,
    pub config_file: Option<String>,
    /// Client ids are handed out at connect time only (not the data path).
    pub next_client_id: AtomicU64,
    /// Ids of slow-log entries, in the order cores log them (slow commands
    /// only, never the data path).
    pub next_slowlog_id: Arc<AtomicU64>,
    /// What each shard could evict under `maxmemory` (see
    /// `ringdb_engine::evict`; read and written only while over the limit
    /// and on the timer).
    pub evict_board: Arc<ringdb_engine::evict::Board>,
    /// Every shard's tracked keys, against `tracking-table-max-keys`.
    pub tracked: Arc<ringdb_engine::tracking::TrackedTotal>,
    /// CLIENT PAUSE, for every core.
    pub pause: Arc<ringdb_engine::pause::Pause>,
    /// DEBUG PAUSE-CRON: every core's periodic work (active expiry,
    /// eviction, the tracking table's limit, save points and rewrites)
    /// stops while set, as Redis's serverCron does.
    pub cron_paused: std::sync::atomic::AtomicBool,
    /// A signal's shutdown is under way (a second SIGINT exits at once).
    pub shutting_down: std::sync::atomic::AtomicBool,
    /// Connected clients over all cores, for `maxclients` (connect and
    /// disconnect only).
    pub connected_clients: AtomicUsize,
    /// Scripts running past the busy threshold on any core (BUSY replies,
    /// SCRIPT KILL, FUNCTION STATS) and the bodies EVAL has seen. Control
    /// path only: the router reads one atomic of it per command.
    pub scripts: Arc<ringdb_engine::scripting::monitor::ScriptMonitor>,
    /// Snapshot state: last save, background save in progress, counters.
    pub persist: crate::persist::Persistence,
    /// Whether the shards are still loading their data (start-up).
    pub loading: crate::loading::Loading,
    /// Users, their permissions, and the ACL log.
    pub acl: &'static ringdb_engine::acl::Acl,
    /// Each shard's io_uring sizes, fitted to the locked-memory limit.
    pub io_plan: crate::memlock::IoPlan,
}

impl Shared {
    pub fn shards(&self) -> usize {
        self.mesh.len()
    }
}

/// Everything one core owns.
pub struct Core {
    pub id: ShardId,
    pub shared: Arc<Shared>,
    pub shard: RefCell<Shard>,
    /// This core's copy of the configuration (CONFIG SET updates all copies).
    pub config: RefCell<Config>,
    pub clients: RefCell<ClientRegistry>,
    /// Mailboxes and Pub/Sub subscriptions of this core's connections.
    pub push: RefCell<crate::push::PushHub>,
    /// A coalesced re-run of reactive queries is waiting
    /// (`watch-coalesce-ms`).
    pub watch_rerun_scheduled: Cell<bool>,
    /// This core's clients waiting in blocking commands.
    pub blocked: RefCell<crate::cmd::blocking::BlockedClients>,
    /// This shard's append-only log, when `appendonly` is on.
    pub aof: RefCell<Option<crate::aof::AofWriter>>,
    /// Replies waiting for the log's next sync (group commit under
    /// `appendfsync always`).
    pub log_sync: RefCell<crate::aof::GroupCommit>,
    /// Read copies of other shards' hot keys (`hotkeys-replicate-reads`),
    /// shared with their owners (see ringdb_engine::hotkeys::replica).
    pub replicas: RefCell<std::collections::HashMap<(usize, bytes::Bytes), Arc<ReplicaSlot>>>,
    /// GETs this core answered from a copy.
    pub replica_reads: Cell<u64>,
    /// The socket backend this core's connections use (`io-backend`).
    pub io_backend: Cell<&'static str>,
    /// What accepts this core's connections (CONFIG SET port/bind gives it
    /// new sockets).
    pub accepting: RefCell<Option<crate::net::listener::Accepting>>,
    /// The slow commands of this core's clients (SLOWLOG).
    pub slowlog: RefCell<crate::cmd::slowlog::SlowLog>,
    /// How this core's clients' scripts have run (where the next run goes).
    pub script_profiles: RefCell<crate::route::script::Profiles>,
    /// Scripts of this core's clients waiting to run with every shard.
    pub node_runs: RefCell<crate::route::script::NodeRuns>,
    /// MIGRATE's cached connections to target instances.
    pub migrate: RefCell<crate::cmd::migrate::SocketCache>,
}

impl Core {
    /// The settings a shard needs, from a configuration.
    pub fn shard_settings(config: &Config) -> ShardSettings {
        ShardSettings {
            databases: config.databases(),
            active_expire: true,
            replica: config.is_replica(),
            lfu: config.maxmemory_policy().contains("lfu"),
            lfu_log_factor: config.lfu_log_factor(),
            lfu_decay_time: config.lfu_decay_time(),
            max_bulk_len: config.proto_max_bulk_len(),
            limits: config.collection_limits(),
            scripts: config.script_settings(),
            hll_sparse_max_bytes: config.hll_sparse_max_bytes(),
            bf_error_rate: config.bf_error_rate(),
            bf_initial_size: config.bf_initial_size(),
            watch_coalesce_ms: config.watch_coalesce_ms(),
            slowlog: config.slowlog(),
            latency: config.latency(),
            memory: config.memory_limit(),
            lazy_user_del: config.get("lazyfree-lazy-user-del") == Some("yes"),
        }
    }

    /// Applies a changed configuration to this core.
    pub fn apply_config(&self, config: Config) {
        if config.loglevel() != self.config.borrow().loglevel() {
            crate::logging::set_level(config.loglevel());
        }
        let logging = config.get("appendonly") == Some("yes");
        let was_logging = self.config.borrow().get("appendonly") == Some("yes");
        let fsync = crate::aof::Fsync::from_config(&config);
        {
            let mut shard = self.shard.borrow_mut();
            let active_expire = shard.state.settings.active_expire;
            shard.state.settings = ShardSettings { active_expire, ..Self::shard_settings(&config) };
            ringdb_engine::evict::publish_candidates(&shard);
            shard.state.funnel.notify_flags = config.notify_flags();
            let max_keys = config.tracking_table_max_keys();
            shard.state.funnel.tracking.set_limit(max_keys);
            Self::apply_hotkeys(&mut shard, &config, Some(&self.config.borrow()));
            if !config.hotkeys_replicate_reads() {
                for (db, key) in shard.state.funnel.replicas.remove_all() {
                    self.share_replica(db, key, None);
                }
            }
        }
        self.shared.repl.min_replicas.store(
            config.int("min-replicas-to-write") > 0 && config.int("min-replicas-max-lag") > 0,
            std::sync::atomic::Ordering::Relaxed,
        );
        *self.config.borrow_mut() = config;
        if let Some(w) = self.aof.borrow_mut().as_mut() {
            w.fsync = fsync;
        }
        if logging && !was_logging {
            // Turning the log on writes it from the shards' state, with a
            // rewrite of every shard that starts within a tenth of a second
            // (as Redis's `startAppendOnly`; see `crate::aof::rewrite`).
            if self.id.0 == 0 {
                let p = &self.shared.persist;
                p.aof_rewrite_scheduled.store(true, std::sync::atomic::Ordering::Relaxed);
                info!("AOF was enabled: an AOF background was scheduled to start when possible.");
            }
        } else if !logging && was_logging {
            crate::aof::close(self);
        }
    }

    /// Tells every other core that this shard's hot key `(db, key)` has a
    /// read copy in `slot`, or (`None`) no longer has one. Queued in order
    /// behind everything this core sent them before.
    fn share_replica(&self, db: usize, key: bytes::Bytes, slot: Option<Arc<ReplicaSlot>>) {
        for target in 0..self.shared.shards() {
            if target == self.id.index() {
                continue;
            }
            let (key, slot) = (key.clone(), slot.clone());
            self.queue_job(
                ShardId(target as u16),
                Box::new(move |core| {
                    let mut replicas = core.replicas.borrow_mut();
                    match slot {
                        Some(slot) => replicas.insert((db, key), slot),
                        None => replicas.remove(&(db, key)),
                    };
                }),
            );
        }
    }

    /// A key of this shard became hot or cooled down while
    /// `hotkeys-replicate-reads` is on: its read copy starts or ends.
    fn replicate(&self, shard: &mut Shard, event: &HotEvent) {
        match event {
            HotEvent::Hot { db, key, .. } => {
                let slot = shard.state.funnel.replicas.add(*db, key.clone());
                self.share_replica(*db, key.clone(), Some(slot));
            }
            HotEvent::Cold { db, key } => {
                if shard.state.funnel.replicas.remove(*db, key) {
                    self.share_replica(*db, key.clone(), None);
                }
            }
        }
    }

    /// Gives the shard `config`'s hot-key rules and key limit when they
    /// differ from `before`'s (all of them at start-up, `before` = None).
    fn apply_hotkeys(shard: &mut Shard, config: &Config, before: Option<&Config>) {
        let changed = |name: &str| before.is_none_or(|b| b.get(name) != config.get(name));
        if changed("hotkeys-rules") {
            shard.state.set_hotkey_rules(config.hotkeys_rules());
        }
        shard.state.set_hotkeys_max_keys(config.hotkeys_max_keys());
        shard.state.hotkeys.replicate = config.hotkeys_replicate_reads();
    }

    /// Sends out what this core's shard work left for others: replies to
    /// blocked clients it can now serve, keyspace notifications, client-side
    /// caching invalidations and the new results of reactive queries whose
    /// key changed. Called after shard work (a command, a batch, a mesh job,
    /// an expiry cycle), before the reply leaves, so that a client who sees a
    /// reply and then acts sees the pushes it caused first; costs two checks
    /// when there is nothing to send.
    pub fn publish_changes(self: &Rc<Self>) {
        self.publish_shard_changes(&mut self.shard.borrow_mut());
    }

    /// [`publish_changes`](Self::publish_changes) for a caller that holds
    /// the shard (a batch's completion).
    pub fn publish_shard_changes(self: &Rc<Self>, shard: &mut Shard) {
        let effects = self.take_effects(shard);
        self.deliver(shard, effects);
    }

    /// Ends the shard's turn ([`Shard::take_effects`]): blocked clients are
    /// served first, as their changes (events, queries, tracking) go out
    /// after the served replies (Redis sends a BLMOVE's reply before the
    /// invalidation it caused). Under `watch-coalesce-ms` a burst of writes
    /// within the window costs one re-run of the queries, and the watchers
    /// get its latest result.
    pub(crate) fn take_effects(self: &Rc<Self>, shard: &mut Shard) -> Effects {
        // The setting is read only when a query is due (after every batch
        // otherwise).
        let due = shard.state.funnel.queries.has_dirty();
        let coalesce = if due { self.config.borrow().watch_coalesce_ms() } else { 0 };
        let effects = shard.take_effects(coalesce != 0);
        if coalesce != 0 && !self.watch_rerun_scheduled.replace(true) {
            let core = self.clone();
            glommio::spawn_local(async move {
                glommio::timer::sleep(Duration::from_millis(coalesce)).await;
                core.watch_rerun_scheduled.set(false);
                core.shard.borrow_mut().rerun_queries(ringdb_engine::shard::now_ms());
                core.publish_changes();
            })
            .detach();
        }
        effects
    }

    /// Delivers what a turn produced: the one way out of a shard. The log
    /// is written (and synced under appendfsync always) before any reply
    /// or push about these changes leaves.
    pub(crate) fn deliver(self: &Rc<Self>, shard: &mut Shard, effects: Effects) {
        self.flush_log_of(shard);
        if effects.is_empty() {
            return;
        }
        if !effects.wakes.is_empty() {
            crate::cmd::blocking::send_wakes(self, effects.wakes);
        }
        if !effects.invalidations.is_empty() {
            crate::push::tracking::publish(self, effects.invalidations);
        }
        if !effects.events.is_empty() {
            self.publish_events(effects.events);
        }
        if !effects.monitor.is_empty() {
            crate::cmd::monitor::send(self, effects.monitor);
        }
        if !effects.publishes.is_empty() {
            crate::cmd::pubsub::publish_from_scripts(self, effects.publishes);
        }
        if effects.evict_elsewhere {
            self.ask_to_evict(shard);
        }
        if !effects.slow.is_empty() {
            let max_len = shard.state.settings.slowlog.max_len;
            crate::cmd::slowlog::deliver(self, effects.slow, max_len);
        }
        if !effects.watch_pushes.is_empty() {
            self.send_watch_pushes(effects.watch_pushes);
        }
        if !effects.hot.is_empty() {
            if shard.state.hotkeys.replicate {
                effects.hot.iter().for_each(|event| self.replicate(shard, event));
            }
            if !shard.state.hotkeys.watchers.is_empty() {
                self.send_hotkey_pushes(effects.hot, &shard.state.hotkeys.watchers);
            }
        }
    }

    /// Asks the shards that still have keys to evict to run their eviction
    /// now: this shard ran out while the process is over `maxmemory`.
    fn ask_to_evict(&self, shard: &Shard) {
        for other in shard.state.evict_board.shards_to_ask(self.id) {
            self.queue_job(
                other,
                Box::new(|core| {
                    let now = ringdb_engine::shard::now_ms();
                    core.shard.borrow_mut().enforce_limits(now);
                    core.publish_changes();
                }),
            );
        }
    }

    /// Redis enforces `maxmemory` and `tracking-table-max-keys` before
    /// every command (`processCommand`), so the invalidations and events of
    /// the keys it evicts reach clients before the command's reply,
    /// whichever shard held them. Every shard that may have to give up keys
    /// does so now and answers on this core's queue, behind the pushes it
    /// queued here; the caller then writes those pushes first.
    pub async fn enforce_limits(self: &Rc<Self>) {
        let targets: Vec<ShardId> = if self.shared.tracked.over_limit() {
            (0..self.shared.shards()).map(|i| ShardId(i as u16)).collect()
        } else {
            self.shard.borrow().state.evict_board.shards_with_candidates().collect()
        };
        let mut answers = Vec::with_capacity(targets.len());
        for target in targets {
            let (tx, rx) = flume::bounded::<()>(1);
            let home = self.id;
            self.queue_job(
                target,
                Box::new(move |core| {
                    let now = ringdb_engine::shard::now_ms();
                    core.shard.borrow_mut().enforce_limits(now);
                    core.publish_changes();
                    core.queue_job(
                        home,
                        Box::new(move |_| {
                            let _ = tx.send(());
                        }),
                    );
                }),
            );
            answers.push(rx);
        }
        for rx in answers {
            // A dropped answer is a job that panicked; the command goes on.
            let _ = rx.recv_async().await;
        }
    }

    /// Queues hot / cold key events on every core with `HOTKEYS.WATCH`
    /// watchers, in the order they happened (one mesh queue per target).
    fn send_hotkey_pushes(
        &self,
        events: Vec<ringdb_engine::hotkeys::HotEvent>,
        watchers: &std::collections::BTreeMap<u16, u32>,
    ) {
        let events = Arc::new(events);
        for &target in watchers.keys() {
            let events = events.clone();
            self.queue_job(
                ShardId(target),
                Box::new(move |core| {
                    let limit = core.config.borrow().pubsub_buffer_limit();
                    core.push.borrow_mut().deliver_hotkeys(&events, limit);
                }),
            );
        }
    }

    /// Queues each reactive query result on the core whose watchers want it.
    fn send_watch_pushes(&self, pushes: Vec<ringdb_engine::query_watch::WatchPush>) {
        for push in pushes {
            let target = ShardId(push.core);
            self.queue_job(
                target,
                Box::new(move |core| {
                    let limit = core.config.borrow().pubsub_buffer_limit();
                    core.push.borrow_mut().deliver_watch(&push, limit);
                }),
            );
        }
    }

    /// Publishes keyspace notifications (`__keyspace@<db>__:<key>` and
    /// `__keyevent@<db>__:<event>`) without waiting: the deliveries are
    /// queued to the subscribers' cores before this returns, so they arrive
    /// before anything the caller sends afterwards — a client that sees a
    /// command's reply and runs another sees their notifications in order,
    /// whatever shards the keys live on. Does not borrow the shard.
    fn publish_events(&self, events: Vec<ringdb_engine::funnel::KeyEvent>) {
        use ringdb_engine::funnel::notify;
        let flags = self.config.borrow().notify_flags();
        for event in events {
            if flags & notify::KEYSPACE != 0 {
                let mut channel = format!("__keyspace@{}__:", event.db).into_bytes();
                channel.extend_from_slice(&event.key);
                let payload = bytes::Bytes::from_static(event.event.as_bytes());
                self.publish_now(channel.into(), payload);
            }
            if flags & notify::KEYEVENT != 0 {
                let channel = format!("__keyevent@{}__:{}", event.db, event.event).into_bytes();
                self.publish_now(channel.into(), event.key.clone());
            }
        }
    }

    /// Queues a message's delivery on every core with a subscriber of
    /// `channel`, without waiting for counts. This core's own subscribers
    /// are reached through its own queue too, so a notification can never
    /// overtake one another shard queued here earlier.
    fn publish_now(&self, channel: bytes::Bytes, payload: bytes::Bytes) {
        use crate::push::Kind;
        let targets = self.push.borrow().targets(Kind::Channel, &channel, self.id.0);
        for target in targets {
            let (channel, payload) = (channel.clone(), payload.clone());
            self.queue_job(
                ShardId(target),
                Box::new(move |core| {
                    let limit = core.config.borrow().pubsub_buffer_limit();
                    core.push.borrow_mut().deliver(Kind::Channel, &channel, &payload, limit);
                }),
            );
        }
    }
}

/// The CPUs this process may run on (its affinity mask, as a pinned
/// container or `taskset` sets it).
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: sched_getaffinity writes at most size_of::<cpu_set_t>() bytes
    // into the zeroed set we own.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    let ok =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) }
            == 0;
    let cpus: Vec<usize> = if ok {
        (0..libc::CPU_SETSIZE as usize).filter(|&c| unsafe { libc::CPU_ISSET(c, &set) }).collect()
    } else {
        Vec::new()
    };
    if cpus.is_empty() {
        (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect()
    } else {
        cpus
    }
}

fn random_seed() -> u64 {
    let mut buf = [0u8; 8];
    if std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut buf))
        .is_ok()
    {
        u64::from_le_bytes(buf)
    } else {
        ringdb_engine::shard::now_ms() ^ (std::process::id() as u64) << 32
    }
}

/// 40 hex digits derived from `seed` (run id, replication id).
pub fn run_id(seed: u64) -> String {
    let mut x = seed | 1;
    (0..40)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            std::char::from_digit((x % 16) as u32, 16).unwrap_or('0')
        })
        .collect()
}

/// Descriptors kept beside the clients' (listeners, rings, files), as
/// Redis's CONFIG_MIN_RESERVED_FDS.
const RESERVED_FDS: u64 = 32;

/// Raises the soft open-files limit to `maxclients` + reserve, as far as
/// the hard limit allows (Redis's `adjustOpenFilesLimit`), so that
/// `maxclients` connections can be accepted; says so when it cannot.
fn raise_open_files_limit(maxclients: usize) {
    let wanted = maxclients as u64 + RESERVED_FDS;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: plain syscalls on a local struct.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 || lim.rlim_cur >= wanted {
            return;
        }
        let target = wanted.min(lim.rlim_max);
        let old = lim.rlim_cur;
        lim.rlim_cur = target;
        if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 || target < wanted {
            tracing::warn!(
                limit = target.max(old),
                maxclients,
                "open files limit is below maxclients + {RESERVED_FDS}: raise it (ulimit -n) to serve that many clients"
            );
        }
    }
}

/// How long a shard retries its rings while the locked memory they need
/// is still held: the kernel frees a stopped process's rings a moment after
/// it exits, and a restart (systemd, Kubernetes) comes at once.
pub const RING_RETRY: Duration = Duration::from_secs(5);

/// The shard's executor, on this thread. ENOMEM from `io_uring_setup` is
/// retried for [`RING_RETRY`] (see there); a refused io_uring says why.
fn make_executor(
    builder: impl Fn() -> LocalExecutorBuilder,
) -> Result<glommio::LocalExecutor, String> {
    let started = Instant::now();
    loop {
        let error = match builder().make() {
            Ok(executor) => return Ok(executor),
            Err(e) => e,
        };
        let errno = match &error {
            glommio::GlommioError::IoError(e) => e.raw_os_error(),
            _ => None,
        };
        match errno {
            Some(libc::ENOMEM) if started.elapsed() < RING_RETRY => {
                std::thread::sleep(Duration::from_millis(50))
            }
            Some(libc::ENOMEM) => {
                return Err(format!(
                    "its io_uring rings do not fit in the locked memory left to this user: the \
                     limit (ulimit -l) counts every process of the uid, other servers and \
                     containers running as it included. Run each server as a user of its own \
                     (docker --user) or raise the limit ({error})"
                ))
            }
            Some(libc::EPERM | libc::ENOSYS) => return Err(io_uring_refused(&error.to_string())),
            _ => return Err(format!("cannot create its executor: {error}")),
        }
    }
}

/// The error for a system that refuses io_uring, naming the usual causes.
pub fn io_uring_refused(error: &str) -> String {
    format!(
        "io_uring is refused on this system ({error}). A seccomp profile blocks io_uring_setup \
         (Docker 25+ and containerd 2.x leave it out of their defaults: run with \
         deploy/seccomp-ringdb.json), or sysctl kernel.io_uring_disabled is set; see deploy/README.md"
    )
}

/// How many shards run and each one's io_uring sizes: the configured
/// count, or one per CPU within the cgroup's CPU quota, fitted to the
/// locked-memory limit (`crate::memlock`); and `maxmemory` from the
/// cgroup's memory limit when none was given. Each choice is logged.
fn fit_to_limits(config: &mut Config, cpus: usize) -> Result<crate::memlock::IoPlan, String> {
    let cgroup = crate::cgroup::limits();
    let wanted = match config.shards() {
        0 => crate::cgroup::default_shards(cpus, &cgroup),
        n => n,
    };
    if let (0, Some(quota)) = (config.shards(), cgroup.cpus) {
        info!(
            "cgroup CPU quota {quota:.2} CPUs: {wanted} shards (the affinity mask has {} CPUs)",
            cpus
        );
    }
    let maxmemory_given = config.was_given("maxmemory");
    if let (false, Some(limit)) = (maxmemory_given, crate::cgroup::default_maxmemory(&cgroup)) {
        config.set_by_server("maxmemory", &limit.to_string())?;
        warn!(
            "cgroup memory limit {} MiB: maxmemory set to {} MiB ({}% of it; the rest is for \
             buffers and the allocator). Set maxmemory (0: no limit) to choose.",
            cgroup.memory.unwrap_or(0) >> 20,
            limit >> 20,
            (crate::cgroup::MAXMEMORY_SHARE * 100.0) as u32
        );
    }
    let net = match config.io_backend() {
        "glommio" => crate::memlock::Net::Off,
        "uring" => crate::memlock::Net::Required,
        _ => crate::memlock::Net::Preferred,
    };
    let io_plan =
        crate::memlock::plan(crate::memlock::effective_limit(), wanted, config.io_memory(), net)?;
    if io_plan.per_shard() < io_plan.full_per_shard {
        warn!("{io_plan}");
    } else {
        info!("{io_plan}");
    }
    Ok(io_plan)
}

/// Starts every shard and serves until SIGINT/SIGTERM or SHUTDOWN.
pub fn run(mut config: Config) -> Result<(), String> {
    let bind = config.bind();
    if bind.is_empty() {
        return Err(listener::NOWHERE.into());
    }
    raise_open_files_limit(config.maxclients());
    crate::supervise::init(config.get("supervised").unwrap_or("no"));
    let seed = random_seed();
    ringdb_engine::keyspace::set_hash_seed(seed);
    ringdb_types::table::init_hash_seed(seed.rotate_left(17));

    let cpus = allowed_cpus();
    let io_plan = fit_to_limits(&mut config, cpus.len())?;
    let shards = io_plan.shards;
    let slot_map = SlotMap::new(shards);
    let (port, listeners) = listener::bind_node(&config, shards)?;
    // SAFETY: isatty only reads the descriptor's state.
    if config.always_show_logo() || unsafe { libc::isatty(1) } == 1 {
        info!("{}", crate::logging::banner(env!("CARGO_PKG_VERSION"), REDIS_VERSION, port, shards));
    } else {
        info!("Running mode=standalone, port={port}.");
    }
    info!("Server initialized");

    let mut senders = Vec::with_capacity(shards);
    let mut receivers = Vec::with_capacity(shards);
    for _ in 0..shards {
        let (tx, rx) = flume::bounded::<Job>(4096);
        senders.push(tx);
        receivers.push(rx);
    }
    let acl = crate::cmd::acl::startup(&config)?;
    let pinned: Vec<Option<usize>> =
        (0..shards).map(|i| config.pin_cpus().then(|| cpus[i % cpus.len()])).collect();
    let shared = Arc::new(Shared {
        slot_map,
        mesh: senders,
        doorbells: (0..shards).map(|_| Default::default()).collect(),
        started: Instant::now(),
        started_unix_ms: ringdb_engine::shard::now_ms(),
        run_id: run_id(seed),
        repl: Arc::new(crate::repl::Replication::new(
            shards,
            run_id(seed.rotate_left(17) ^ 0x9e37_79b9_7f4a_7c15),
        )),
        port,
        cpus: pinned.clone(),
        executable: std::env::current_exe().map(|p| p.display().to_string()).unwrap_or_default(),
        config_file: config.file.as_ref().map(|p| p.display().to_string()),
        next_client_id: AtomicU64::new(1),
        next_slowlog_id: Arc::new(AtomicU64::new(0)),
        evict_board: Arc::new(ringdb_engine::evict::Board::new(shards)),
        tracked: Default::default(),
        pause: Default::default(),
        cron_paused: Default::default(),
        shutting_down: Default::default(),
        connected_clients: AtomicUsize::new(0),
        scripts: Arc::new(ringdb_engine::scripting::monitor::ScriptMonitor::new(shards)),
        persist: crate::persist::Persistence::default(),
        loading: Default::default(),
        acl,
        io_plan: io_plan.clone(),
    });
    // The snapshot file, read once; every shard loads its own keys from it.
    let rdb_path = config.rdb_path();
    let started_loading = Instant::now();
    // With appendonly on and logs present, the logs are the data (as in
    // Redis); otherwise the snapshot is.
    let from_logs =
        config.get("appendonly") == Some("yes") && crate::aof::logs_exist(&config, shards)?;
    let rdb = Arc::new(if from_logs { None } else { crate::persist::read_file(&rdb_path)? });
    let committed = Arc::new(if from_logs {
        crate::aof::committed_transactions(&config, shards)?
    } else {
        Default::default()
    });
    if from_logs || rdb.is_some() {
        shared.loading.begin(shards, rdb.as_ref().as_ref().map_or(0, Vec::len));
    }

    // The start-up baseline of MEMORY STATS: before any shard loads data.
    crate::memory::mark_startup();
    let mut handles = Vec::new();
    let mut ready = Vec::new();
    for (i, (rx, fds)) in receivers.into_iter().zip(listeners).enumerate() {
        let placement = match pinned[i] {
            Some(cpu) => Placement::Fixed(cpu),
            None => Placement::Unbound,
        };
        // glommio looks at other cores' messages only between runs of its
        // task queues, and a core under constant load runs them until this
        // timer fires (glommio's default is 100 ms: the p99 of requests
        // routed to a saturated shard).
        // With the uring backend the network ring's driver spins (adaptively:
        // `uring::SpinWindow`); an executor spinning as well would only burn
        // CPU, as it does not see the ring's completions.
        let spin = Duration::from_micros(config.spin_before_park_us());
        let spin = (io_plan.net.is_none() && !spin.is_zero()).then_some(spin);
        let (plan, quota) = (io_plan.clone(), Duration::from_micros(config.task_quota_us()));
        let builder = move || {
            let builder = LocalExecutorBuilder::new(placement.clone())
                .name(&format!("ringdb-shard-{i}"))
                .io_memory(plan.io_memory)
                .ring_depth(plan.ring_depth)
                // Only direct file I/O on polling devices uses the poll ring.
                .poll_ring(false)
                .preempt_timer(quota);
            match spin {
                Some(spin) => builder.spin_before_park(spin),
                None => builder,
            }
        };
        let shared = shared.clone();
        let config = config.clone();
        let rdb = rdb.clone();
        let committed = committed.clone();
        let (ready_tx, ready_rx) = flume::bounded(1);
        let handle = std::thread::Builder::new()
            .name(format!("ringdb-shard-{i}"))
            .spawn(move || {
                let executor = match make_executor(builder) {
                    Ok(executor) => executor,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e));
                        return;
                    }
                };
                executor.run(async move {
                    let start = Start { id: ShardId(i as u16), seed, rdb, committed };
                    core_main(start, shared, config, rx, fds, ready_tx).await
                })
            })
            .map_err(|e| format!("cannot start shard {i}: {e}"))?;
        handles.push(handle);
        ready.push(ready_rx);
    }
    // An executor that cannot start (too little locked memory for its
    // io_uring rings, a CPU that is not there) ends its thread: say so and
    // stop, rather than serve with a missing shard.
    let mut loaded = 0;
    for (i, rx) in ready.into_iter().enumerate() {
        // Loading a big snapshot takes a while: no time limit once it runs.
        match rx.recv_timeout(Duration::from_secs(if rdb.is_some() { 24 * 3600 } else { 60 })) {
            Ok(Ok(keys)) => loaded += keys,
            Ok(Err(e)) => return Err(format!("shard {i} could not start: {e}")),
            Err(_) => return Err(format!("shard {i} stopped while it started")),
        }
    }

    if loaded == 0 {
        // Nothing loaded: the shards' own structures count as start-up too.
        crate::memory::mark_startup();
    }
    if rdb.is_some() {
        info!(
            "DB loaded from disk: {:.3} seconds, {loaded} keys ({})",
            started_loading.elapsed().as_secs_f64(),
            rdb_path.display()
        );
    }
    drop(rdb);

    let placement: Vec<String> = pinned
        .iter()
        .enumerate()
        .map(|(i, cpu)| match cpu {
            Some(c) => format!("{i}->cpu{c}"),
            None => format!("{i}->unpinned"),
        })
        .collect();
    crate::proctitle::refresh(&config, port);
    info!(
        address = %bind.iter().map(|a| format!("{a}:{port}")).collect::<Vec<_>>().join(" "),
        shards,
        pinning = %placement.join(" "),
        "Ready to accept connections"
    );
    crate::supervise::ready(&shared);

    wait_for_signal(&shared);
    Ok(())
}

/// SIGINT/SIGTERM: save first when a `save` schedule is configured (as
/// Redis does), on core 0, then exit. A second SIGINT meanwhile (a save
/// or a busy script holding the shutdown up) exits at once, as Redis's
/// "You insist... exiting now.".
fn wait_for_signal(shared: &Shared) {
    use signal_hook::consts::{SIGINT, SIGTERM};
    use std::sync::atomic::Ordering::Relaxed;
    let mut signals = match signal_hook::iterator::Signals::new([SIGINT, SIGTERM]) {
        Ok(signals) => signals,
        Err(e) => {
            error!("cannot install signal handlers: {e}");
            loop {
                std::thread::park();
            }
        }
    };
    for sig in signals.forever() {
        // A shutdown under way: cleared when its save fails without
        // `force` (the server keeps running, as Redis's does) or by
        // SHUTDOWN ABORT while it waits.
        if shared.shutting_down.swap(true, Relaxed) {
            if sig == SIGINT {
                warn!("You insist... exiting now.");
                crate::persist::remove_temp_file();
                std::process::exit(1);
            }
            continue;
        }
        let name = if sig == SIGINT { "SIGINT" } else { "SIGTERM" };
        warn!("Received {name} scheduling shutdown...");
        crate::supervise::stopping();
        let job: Job = Box::new(move |core| {
            let core = core.clone();
            glommio::spawn_local(async move {
                // Redis acts on signals in its cron: while DEBUG PAUSE-CRON
                // holds it, SHUTDOWN ABORT can call the shutdown off.
                while core.shared.cron_paused.load(Relaxed) {
                    glommio::timer::sleep(Duration::from_millis(10)).await;
                }
                if !core.shared.shutting_down.load(Relaxed) {
                    return;
                }
                warn!("User requested shutdown...");
                // shutdown-on-sigint / shutdown-on-sigterm, as SHUTDOWN's options.
                let (save, nosave, force) = core.config.borrow().shutdown_on_signal(sig == SIGINT);
                let scheduled = !core.config.borrow().save_points().is_empty();
                if nosave || !(save || scheduled) {
                    shutdown(0);
                }
                crate::persist::stop_background_save(&core).await;
                crate::aof::rewrite::stop(&core).await;
                info!("Saving the final RDB snapshot before exiting.");
                if let Err(e) = crate::persist::save(&core, false).await {
                    error!("Error trying to save the DB, can't exit. ({e})");
                    if !force {
                        warn!("Errors trying to shut down the server. Check the logs for more information.");
                        core.shared.shutting_down.store(false, Relaxed);
                        return;
                    }
                }
                shutdown(0);
            })
            .detach();
        });
        if shared.mesh[0].send(job).is_err() {
            shutdown(0);
        }
    }
}

/// Stops the process. Snapshots are saved before this is called (SHUTDOWN,
/// signals); append-only logs are written after every unit of shard work,
/// so what the kernel holds of them survives the exit.
pub fn shutdown(code: i32) -> ! {
    crate::supervise::stopping();
    crate::route::debug::kill_sessions();
    info!("ringdb is now ready to exit, bye bye...");
    std::process::exit(code)
}

/// What a core starts with: its id, the random seed, the snapshot to load.
struct Start {
    id: ShardId,
    seed: u64,
    rdb: Arc<Option<Vec<u8>>>,
    /// Cross-shard transactions whose every part is in the logs.
    committed: Arc<crate::aof::Committed>,
}

async fn core_main(
    start: Start,
    shared: Arc<Shared>,
    config: Config,
    mesh_rx: flume::Receiver<Job>,
    listeners: Vec<listener::Listening>,
    ready: flume::Sender<Result<usize, String>>,
) {
    let Start { id, seed, rdb, committed } = start;
    let mut shard =
        Shard::new(id, shared.slot_map, Core::shard_settings(&config), seed ^ (id.0 as u64 + 1));
    shard.state.funnel.notify_flags = config.notify_flags();
    shard.state.slowlog_ids = shared.next_slowlog_id.clone();
    shard.state.evict_board = shared.evict_board.clone();
    shard.state.pause = shared.pause.clone();
    shard.state.funnel.tracking.count_in(shared.tracked.clone());
    shard.state.funnel.tracking.set_limit(config.tracking_table_max_keys());
    shard.state.scripting.attach(shared.scripts.clone(), id.index());
    Core::apply_hotkeys(&mut shard, &config, None);
    let core = Rc::new(Core {
        id,
        shared,
        shard: RefCell::new(shard),
        config: RefCell::new(config),
        clients: RefCell::new(ClientRegistry::default()),
        push: RefCell::new(crate::push::PushHub::default()),
        watch_rerun_scheduled: Cell::new(false),
        blocked: RefCell::new(Default::default()),
        aof: RefCell::new(None),
        log_sync: RefCell::new(Default::default()),
        replicas: RefCell::new(std::collections::HashMap::new()),
        replica_reads: Cell::new(0),
        io_backend: Cell::new("glommio"),
        accepting: RefCell::new(None),
        slowlog: RefCell::new(Default::default()),
        script_profiles: RefCell::new(Default::default()),
        node_runs: RefCell::new(Default::default()),
        migrate: RefCell::new(Default::default()),
    });
    // A script's PUBLISH on a one-shard node counts this core's subscribers
    // (on a node of several, the run holds every core's: route::script).
    let weak = Rc::downgrade(&core);
    core.shard.borrow_mut().state.scripting.receivers =
        Some(Rc::new(move |shard_channel: bool, channel: &[u8]| {
            let kind = if shard_channel {
                crate::push::Kind::ShardChannel
            } else {
                crate::push::Kind::Channel
            };
            weak.upgrade()
                .and_then(|c| c.push.try_borrow().ok().map(|h| h.receivers(kind, channel)))
                .unwrap_or(0)
        }));
    // The core listens first and loads after: meanwhile its clients get
    // INFO and `-LOADING` (crate::loading), as Redis's do.
    glommio::spawn_local(crate::mesh::serve(core.clone(), mesh_rx)).detach();
    match listener::start(&core, listeners).await {
        Ok(backend) => core.io_backend.set(backend),
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    }
    let loaded = load(&core, &rdb, &committed).await;
    core.shared.loading.shard_done();
    drop(rdb);
    let keys = match loaded {
        Ok(keys) => keys,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    glommio::spawn_local(crate::aof::sync_loop(core.clone())).detach();
    if id.0 == 0 {
        glommio::spawn_local(crate::persist::cron(core.clone())).detach();
        glommio::spawn_local(crate::repl::cron(core.clone())).detach();
        let primary = core.config.borrow().get("replicaof").unwrap_or("").to_string();
        if let Some((host, port)) = primary.split_once(' ') {
            crate::repl::replica::follow(&core, host.to_string(), port.parse().unwrap_or(6379));
        }
    }
    glommio::spawn_local(crate::expiry::run(core.clone())).detach();
    glommio::spawn_local(crate::metrics::run(core.clone())).detach();
    glommio::spawn_local(crate::memory::give_back_when_quiet(core.clone())).detach();
    let _ = ready.send(Ok(keys));
    // A core lives until the process exits.
    futures_lite::future::pending::<()>().await;
}

/// This shard's data at start-up: its keys of the snapshot, or its
/// append-only log replayed (then opened for writing). Returns the keys.
async fn load(
    core: &Rc<Core>,
    rdb: &Option<Vec<u8>>,
    committed: &crate::aof::Committed,
) -> Result<usize, String> {
    let mut keys = 0;
    if let Some(data) = rdb {
        let path = core.config.borrow().rdb_path();
        keys = crate::persist::load_at_start(core, data, &path).await?;
    }
    if core.config.borrow().get("appendonly") == Some("yes") {
        let records = crate::aof::replay_shard(core, core.shared.shards(), committed)?;
        crate::aof::open(core)?;
        if records > 0 {
            info!(shard = core.id.0, records, "append-only log replayed");
        }
        // The log goes on from the snapshot it may start with.
        keys = core.shard.borrow().keyspace.iter().map(|db| db.len()).sum::<usize>();
    }
    Ok(keys)
}
