//! The table of settings: every setting ringdb has, its default, how its
//! value is read, whether CONFIG SET may change it at run time, and the
//! one-line comment written to `config/ringdb.toml`.
//!
//! This is the single source for the embedded defaults, the TOML file, the
//! command-line flags (`--port 7000`, as `redis-server` takes them) and
//! CONFIG GET/SET/REWRITE.

/// How a setting's value is read and printed.
#[derive(Clone, Copy, Debug)]
pub enum Kind {
    /// `yes` / `no` (TOML booleans are accepted too).
    Bool,
    /// An integer within bounds.
    Int { min: i64, max: i64 },
    /// A byte size: a number with an optional `k`, `kb`, `m`, `mb`, `g`,
    /// `gb` suffix; printed as bytes.
    Memory { min: i64, max: i64 },
    /// A decimal number strictly between the bounds.
    Float { min: f64, max: f64 },
    /// One of these words (case-insensitive; printed lower case).
    Enum(&'static [&'static str]),
    /// Free text.
    Text,
    /// Words separated by spaces, given as several arguments on one line
    /// in Redis's format (`bind 127.0.0.1 -::1`).
    Words,
    /// `notify-keyspace-events` classes (`KEA`, `Kx`, …), printed in
    /// Redis's canonical order.
    NotifyEvents,
    /// `save`: `<seconds> <changes>` pairs, or nothing.
    SavePoints,
    /// `client-output-buffer-limit`: `<class> <hard> <soft> <seconds>`
    /// triples for the classes normal, replica (or slave) and pubsub.
    BufferLimits,
    /// `hotkeys-rules`: rules in `HOTKEYS RULES SET`'s syntax, separated
    /// by `;`, printed in canonical form.
    HotkeysRules,
    /// Percentiles between 0 and 100, separated by spaces, printed as
    /// Redis prints them (`%f` without its trailing zeros).
    Percentiles,
    /// `oom-score-adj-values`: three scores between -2000 and 2000 (primary,
    /// replica, background child).
    OomScores,
    /// `proc-title-template`: text with `{variables}` ([`crate::proctitle`]).
    TitleTemplate,
    /// Any of these words, separated by spaces, as a set of flags
    /// (Redis's multi-argument enums); the first word is the empty set
    /// and is printed only for it.
    Flags(&'static [&'static str]),
}

#[derive(Clone, Copy, Debug)]
pub struct Setting {
    pub name: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    /// CONFIG SET may change it while running.
    pub mutable: bool,
    /// Never shown in logs (passwords).
    pub sensitive: bool,
    /// CONFIG SET changes it only as `enable-protected-configs` allows
    /// (Redis's PROTECTED_CONFIG: where files are written).
    pub protected: bool,
    /// ringdb's own, not Redis's: an immutable one accepts CONFIG SET of
    /// the value it has, so that tools which set back every CONFIG GET *
    /// pair (Redis's own suite does) pass over it.
    pub own: bool,
    /// Left out of CONFIG GET patterns, shown only when asked for by name
    /// (Redis's HIDDEN_CONFIG: settings for tests).
    pub hidden: bool,
    /// CONFIG SET refuses it with -LOADING while the data loads (Redis's
    /// DENY_LOADING_CONFIG: where the data is).
    pub deny_loading: bool,
    /// Redis's older name, accepted everywhere the name is
    /// (`hash-max-ziplist-entries` for `hash-max-listpack-entries`).
    pub alias: Option<&'static str>,
    pub help: &'static str,
}

impl Setting {
    /// Whether `name` is this setting's name or alias (any case).
    pub fn is_named(&self, name: &str) -> bool {
        self.name.eq_ignore_ascii_case(name)
            || self.alias.is_some_and(|a| a.eq_ignore_ascii_case(name))
    }
}

const fn s(
    name: &'static str,
    default: &'static str,
    kind: Kind,
    mutable: bool,
    help: &'static str,
) -> Setting {
    Setting {
        name,
        default,
        kind,
        mutable,
        sensitive: false,
        protected: false,
        own: false,
        hidden: false,
        deny_loading: false,
        alias: None,
        help,
    }
}

/// A setting Redis does not have.
const fn own(setting: Setting) -> Setting {
    Setting { own: true, ..setting }
}

/// A setting CONFIG GET shows only when named.
const fn hidden(setting: Setting) -> Setting {
    Setting { hidden: true, ..setting }
}

/// A setting CONFIG SET cannot change while the data loads.
const fn deny_loading(setting: Setting) -> Setting {
    Setting { deny_loading: true, ..setting }
}

/// A setting only `enable-protected-configs` lets CONFIG SET change.
const fn protected(setting: Setting) -> Setting {
    Setting { protected: true, ..setting }
}

/// A setting with Redis's older name as an alias.
const fn aliased(setting: Setting, alias: &'static str) -> Setting {
    Setting { alias: Some(alias), ..setting }
}

const MAXMEMORY_POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];

/// What a signal's shutdown does (Redis's `shutdown_on_sig_enum`).
pub const SHUTDOWN_FLAGS: &[&str] = &["default", "save", "nosave", "now", "force"];

/// Who may take a protected action (Redis's `protected_action_enum`).
const PROTECTED_ACTION: &[&str] = &["no", "yes", "local"];

const INT_MAX: i64 = i32::MAX as i64;
const INT_MIN: i64 = i32::MIN as i64;
const MB: i64 = 1024 * 1024;

pub static SETTINGS: &[Setting] = &[
    s("bind", "* -::*", Kind::Words, true,
      "Addresses to listen on, separated by spaces: * is every IPv4 address, ::* every IPv6 one, and a leading - makes an address optional. With protected-mode and no password, only loopback clients are served."),
    s("port", "6379", Kind::Int { min: 0, max: 65535 }, true,
      "TCP port. Every shard listens on it (SO_REUSEPORT) and the kernel spreads connections over them."),
    own(s("shards", "0", Kind::Int { min: 0, max: 1024 }, false,
      "Number of shards (one per core). 0 = one per CPU this process may run on (its affinity mask).")),
    own(s("pin-cpus", "yes", Kind::Bool, false,
      "Pin each shard to its own CPU of the affinity mask.")),
    own(s("io-backend", "auto", Kind::Enum(&["auto", "uring", "glommio"]), false,
      "Client sockets: uring (each shard's own io_uring ring: multishot accept and receive, batched sends), glommio (glommio's TcpStream), or auto (uring when the kernel supports it).")),
    s("databases", "16", Kind::Int { min: 1, max: INT_MAX }, false,
      "Number of logical databases (SELECT 0 .. databases-1)."),
    Setting { sensitive: true, ..s("requirepass", "", Kind::Text, true,
      "Password clients must give with AUTH or HELLO before other commands. Empty = no password.") },
    s("aclfile", "", Kind::Text, false,
      "ACL file of users (ACL LOAD and ACL SAVE read and write it); not with `user` lines in the configuration file."),
    s("acllog-max-len", "128", Kind::Int { min: 0, max: i64::MAX }, true,
      "Most entries ACL LOG keeps."),
    s("acl-pubsub-default", "resetchannels", Kind::Enum(&["allchannels", "resetchannels"]), true,
      "Channels a new user (and `reset`) starts with: none (resetchannels) or all (allchannels)."),
    s("protected-mode", "yes", Kind::Bool, true,
      "With no password set, answer clients from other hosts with -DENIED and close (Redis's protected mode)."),
    s("maxclients", "10000", Kind::Int { min: 1, max: u32::MAX as i64 }, true,
      "Most clients connected at once, over all shards; more get 'ERR max number of clients reached'."),
    s("proto-max-bulk-len", "536870912", Kind::Memory { min: MB, max: i64::MAX }, true,
      "Longest single argument (and longest string value) a client may send."),
    s("client-query-buffer-limit", "1073741824", Kind::Memory { min: MB, max: i64::MAX }, true,
      "Most unparsed bytes one client may have buffered; beyond it the client is disconnected."),
    s("tcp-backlog", "511", Kind::Int { min: 0, max: INT_MAX }, false,
      "Listen backlog of each shard's listener."),
    s("tcp-keepalive", "300", Kind::Int { min: 0, max: INT_MAX }, true,
      "Seconds between TCP keepalive probes on client connections (0 = off)."),
    s("timeout", "0", Kind::Int { min: 0, max: INT_MAX }, true,
      "Close a client after this many idle seconds (0 = never)."),
    s("loglevel", "notice", Kind::Enum(&["debug", "verbose", "notice", "warning", "nothing"]), true,
      "How much to log: debug, verbose, notice, warning or nothing."),
    s("logfile", "", Kind::Text, false,
      "File to log to. Empty = standard output."),
    s("hz", "10", Kind::Int { min: 1, max: 500 }, true,
      "Background task frequency per second (active expiry cycles)."),
    s("maxmemory", "0", Kind::Memory { min: 0, max: i64::MAX }, true,
      "Most bytes the process may allocate (0 = no limit). Over it, each shard evicts its own keys by maxmemory-policy; write commands that may grow memory get '-OOM ...' when nothing is left to evict."),
    s("maxmemory-policy", "noeviction", Kind::Enum(MAXMEMORY_POLICIES), true,
      "Which keys go over maxmemory: noeviction (none: writes get OOM), allkeys-/volatile- (only keys with a TTL) lru, lfu or random, or volatile-ttl. An *-lfu policy makes OBJECT FREQ available, the others OBJECT IDLETIME."),
    s("maxmemory-samples", "5", Kind::Int { min: 1, max: 64 }, true,
      "Keys sampled per database per eviction round (more: closer to true LRU/LFU, slower)."),
    s("maxmemory-eviction-tenacity", "10", Kind::Int { min: 0, max: 100 }, true,
      "How long one command may spend evicting before it goes ahead anyway: 50 us per step up to 10, then 15% more per step, no limit at 100."),
    s("lfu-log-factor", "10", Kind::Int { min: 0, max: INT_MAX }, true,
      "LFU counter logarithm factor, as in Redis."),
    s("lfu-decay-time", "1", Kind::Int { min: 0, max: INT_MAX }, true,
      "Minutes of idleness for each step an LFU counter decays, as in Redis."),
    aliased(s("list-max-listpack-size", "-2", Kind::Int { min: i32::MIN as i64, max: INT_MAX }, true,
      "List node size: negative = bytes per node (-1 4 KiB, -2 8 KiB, ... -5 64 KiB), positive = elements per node."),
      "list-max-ziplist-size"),
    s("list-compress-depth", "0", Kind::Int { min: 0, max: INT_MAX }, true,
      "List nodes kept uncompressed at each end of a list; the nodes between are LZF-compressed (0: none). A list keeps the depth it was created with, as in Redis."),
    aliased(s("hash-max-listpack-entries", "512", Kind::Int { min: 0, max: i64::MAX }, true,
      "Hashes with at most this many fields stay in the compact listpack encoding."),
      "hash-max-ziplist-entries"),
    aliased(s("hash-max-listpack-value", "64", Kind::Int { min: 0, max: i64::MAX }, true,
      "Hashes whose fields and values are at most this long stay in the compact listpack encoding."),
      "hash-max-ziplist-value"),
    s("set-max-intset-entries", "512", Kind::Int { min: 0, max: i64::MAX }, true,
      "Sets of integers with at most this many members stay in the compact intset encoding."),
    aliased(s("zset-max-listpack-entries", "128", Kind::Int { min: 0, max: i64::MAX }, true,
      "Sorted sets with at most this many members stay in the compact listpack encoding."),
      "zset-max-ziplist-entries"),
    aliased(s("zset-max-listpack-value", "64", Kind::Int { min: 0, max: i64::MAX }, true,
      "Sorted sets whose members are at most this long stay in the compact listpack encoding."),
      "zset-max-ziplist-value"),
    s("stream-node-max-bytes", "4096", Kind::Memory { min: 0, max: i64::MAX }, true,
      "A stream node (Redis: a listpack) is full at this many bytes, as Redis counts them (0 = no limit)."),
    s("stream-node-max-entries", "100", Kind::Int { min: 0, max: i64::MAX }, true,
      "A stream node is full with this many entries, deleted ones included (0 = no limit)."),
    s("notify-keyspace-events", "", Kind::NotifyEvents, true,
      "Keyspace notifications to publish (Redis's letters: K keyspace, E keyevent, A all, g $ l s h z x e t m n)."),
    s("client-output-buffer-limit", "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60",
      Kind::BufferLimits, true,
      "Per client class: hard limit, soft limit and soft seconds of a client's pending output; a subscriber past them is disconnected."),
    aliased(s("busy-reply-threshold", "5000", Kind::Int { min: 0, max: i64::MAX }, true,
      "Milliseconds a script may run before other clients get BUSY and SCRIPT KILL / FUNCTION KILL may stop it (0 = never)."),
      "lua-time-limit"),
    own(s("lua-memory-limit", "268435456", Kind::Memory { min: 0, max: i64::MAX }, true,
      "Most memory one shard's Lua state may use (0 = no limit); past it a script fails with 'not enough memory'.")),
    own(s("lua-allow-undeclared-keys", "yes", Kind::Bool, true,
      "Let scripts touch keys they did not declare in KEYS, on any shard, as Redis does (a script that leaves its shard runs with every shard held); no refuses them.")),
    s("tracking-table-max-keys", "1000000", Kind::Int { min: 0, max: i64::MAX }, true,
      "Most keys the client-side caching table remembers over all shards (0 = no limit); past it keys are invalidated as if changed."),
    s("hll-sparse-max-bytes", "3000", Kind::Memory { min: 0, max: i64::MAX }, true,
      "A sparse HyperLogLog that would grow past this many bytes becomes dense (12 KiB), as in Redis."),
    own(s("bf-error-rate", "0.01", Kind::Float { min: 0.0, max: 1.0 }, true,
      "False-positive rate of the Bloom filters BF.ADD, BF.MADD and BF.INSERT create, as RedisBloom's ERROR_RATE.")),
    own(s("bf-initial-size", "100", Kind::Int { min: 1, max: 1 << 30 }, true,
      "Capacity of the Bloom filters BF.ADD, BF.MADD and BF.INSERT create, as RedisBloom's INITIAL_SIZE.")),
    s("slowlog-log-slower-than", "10000", Kind::Int { min: -1, max: i64::MAX }, true,
      "Commands that run at least this many microseconds are recorded in the slow log (SLOWLOG GET); 0 records every command, -1 none."),
    s("slowlog-max-len", "128", Kind::Int { min: 0, max: i64::MAX }, true,
      "Most entries the slow log keeps; the oldest are dropped first."),
    s("latency-tracking", "yes", Kind::Bool, true,
      "Keep a latency histogram per command (LATENCY HISTOGRAM, INFO latencystats)."),
    s("latency-tracking-info-percentiles", "50 99 99.9", Kind::Percentiles, true,
      "The percentiles of each command's latency INFO latencystats shows."),
    s("latency-monitor-threshold", "0", Kind::Int { min: 0, max: i64::MAX }, true,
      "The latency monitor records events (commands, expiry and eviction cycles) that take at least this many milliseconds (LATENCY LATEST, HISTORY, GRAPH, DOCTOR); 0 = off."),
    own(s("watch-coalesce-ms", "0", Kind::Int { min: 0, max: 60_000 }, true,
      "Reactive queries (GET.WATCH …): re-run a changed query at most once per this many milliseconds, so a burst of writes sends its watchers the latest result rather than every one (0 = push every change).")),
    s("daemonize", "no", Kind::Bool, false,
      "Run in the background: fork at start-up, detach from the terminal, and write pidfile (/var/run/redis_<port>.pid when pidfile is empty)."),
    s("supervised", "no", Kind::Enum(&["no", "upstart", "systemd", "auto"]), false,
      "Tell a supervisor when the server is ready and when it stops: systemd (Type=notify: READY=1 once every shard serves, STOPPING=1, WATCHDOG=1 while every shard answers when WatchdogSec= is set), upstart (SIGSTOP when ready), auto (whichever the environment names), no."),
    s("disable-thp", "yes", Kind::Bool, false,
      "Turn transparent huge pages off for the process (prctl PR_SET_THP_DISABLE), as Redis does: with them on, every partly used 2 MB region of the heap is resident whole."),
    s("set-proc-title", "yes", Kind::Bool, false,
      "Show proc-title-template as the process's command line (ps, top)."),
    s("proc-title-template", crate::proctitle::DEFAULT_TEMPLATE, Kind::TitleTemplate, true,
      "The process title: {title} (the program as started), {listen-addr}, {server-mode}, {port}, {tls-port}, {unixsocket}, {config-file}; {{ is a brace."),
    s("pidfile", "", Kind::Text, false,
      "File the process id is written to at start-up and removed from at shutdown. Empty = none (unless daemonize)."),
    s("always-show-logo", "no", Kind::Bool, false,
      "Log the start-up banner (with the port and the process id) even when standard output is not a terminal, as Redis does."),
    s("lazyfree-lazy-user-del", "no", Kind::Bool, true,
      "DEL frees big values in the background, as UNLINK does."),
    s("lazyfree-lazy-user-flush", "no", Kind::Bool, true,
      "FLUSHDB, FLUSHALL, SCRIPT FLUSH and FUNCTION FLUSH without SYNC or ASYNC free in the background, as with ASYNC."),
    s("oom-score-adj", "no", Kind::Enum(&["no", "yes", "relative", "absolute"]), true,
      "Set the kernel's OOM score of the process from oom-score-adj-values: relative (or yes) adds it to the score ringdb started with, absolute sets it; no restores the original."),
    s("oom-score-adj-values", "0 200 800", Kind::OomScores, true,
      "OOM score adjustments for a primary, a replica and a background child, each between -2000 and 2000."),
    deny_loading(protected(s("dir", "./", Kind::Text, true,
      "Directory the snapshot file is written to and loaded from."))),
    protected(s("dbfilename", "dump.rdb", Kind::Text, true,
      "Name of the snapshot file (Redis RDB version 10) in dir, loaded at start-up when present.")),
    s("enable-protected-configs", "no", Kind::Enum(PROTECTED_ACTION), false,
      "Whether CONFIG SET may change dir and dbfilename: no, yes, or local (clients on a loopback address only)."),
    s("enable-debug-command", "no", Kind::Enum(PROTECTED_ACTION), false,
      "Whether DEBUG may run: no, yes, or local (clients on a loopback address only)."),
    s("save", "3600 1 300 100 60 10000", Kind::SavePoints, true,
      "Snapshot schedule: pairs of <seconds> <changes>, a background save when both are reached. Empty = never."),
    s("shutdown-on-sigint", "default", Kind::Flags(SHUTDOWN_FLAGS), true,
      "What SIGINT's shutdown does, as SHUTDOWN's options: default (save when save points are set), save, nosave, now, force (exit even when the save fails)."),
    s("shutdown-on-sigterm", "default", Kind::Flags(SHUTDOWN_FLAGS), true,
      "What SIGTERM's shutdown does: as shutdown-on-sigint."),
    s("rdbcompression", "yes", Kind::Bool, true,
      "Compress strings in snapshots with LZF, as Redis does."),
    s("rdbchecksum", "yes", Kind::Bool, true,
      "Write a CRC64 at the end of snapshots and check it when loading."),
    hidden(s("rdb-key-save-delay", "0", Kind::Int { min: INT_MIN, max: INT_MAX }, true,
      "For tests, as Redis's: microseconds the snapshot and log-rewrite writer waits per key written (-n: 1 in n keys waits 1 microsecond). The shards keep serving meanwhile.")),
    hidden(s("key-load-delay", "0", Kind::Int { min: INT_MIN, max: INT_MAX }, true,
      "For tests, as Redis's: microseconds a shard waits after each key it loads at start-up or DEBUG RELOAD (-n: 1 in n keys waits 1 microsecond).")),
    hidden(s("loading-process-events-interval-bytes", "2097152", Kind::Int { min: 1024, max: INT_MAX }, true,
      "While loading at start-up, a shard serves its clients (INFO, -LOADING) each time it has read this many more bytes of the file.")),
    deny_loading(s("appendonly", "no", Kind::Bool, true,
      "Keep an append-only log per shard of every write, replayed at start-up (instead of the snapshot).")),
    s("appendfsync", "everysec", Kind::Enum(&["always", "everysec", "no"]), true,
      "When the log reaches the disk: always (before the write is acknowledged), everysec, or no (left to the kernel)."),
    s("appendfilename", "appendonly.aof", Kind::Text, false,
      "Base name of the log files; shard i of n logs to <appendfilename>.<i>-of-<n> in appenddirname."),
    s("appenddirname", "appendonlydir", Kind::Text, false,
      "Directory (inside dir) of the append-only logs."),
    s("auto-aof-rewrite-percentage", "100", Kind::Int { min: 0, max: INT_MAX }, true,
      "Rewrite the logs (every shard's, without stopping them) once together they have grown by this percent since their last rewrite (0 = never)."),
    s("auto-aof-rewrite-min-size", "67108864", Kind::Memory { min: 0, max: i64::MAX }, true,
      "Smallest total size of the logs at which automatic rewrites happen."),
    s("aof-use-rdb-preamble", "yes", Kind::Bool, true,
      "A rewritten log starts with an RDB snapshot of the shard (compact, fast to load), as Redis's base file does."),
    s("aof-load-truncated", "yes", Kind::Bool, true,
      "At start-up, cut off a log's torn last record (and say so) rather than refuse to start."),
    own(s("hotkeys-rules", "", Kind::HotkeysRules, true,
      "Hot-key rules, as HOTKEYS RULES SET takes them, separated by ';': name (PATTERN glob | PREFIX prefix) INTERVAL seconds THRESHOLD n DURATION seconds [COUNT reads|writes|both]. HOTKEYS RULES SET/DEL change it; CONFIG REWRITE keeps it.")),
    own(s("hotkeys-max-keys", "10000", Kind::Int { min: 1, max: 10_000_000 }, true,
      "Most keys each shard counts against hot-key rules; the least recently accessed is forgotten to make room (INFO hotkeys: hotkeys_evicted_keys).")),
    own(s("hotkeys-replicate-reads", "no", Kind::Bool, true,
      "While a key is hot, every core keeps a copy of it and answers GET of it without a hop to its owner; a write empties every copy before it is acknowledged (see the README).")),
    aliased(s("replicaof", "", Kind::Words, false,
      "The primary this node replicates, as `host port` (empty: none); REPLICAOF changes it at run time."),
      "slaveof"),
    Setting { sensitive: true, ..s("masterauth", "", Kind::Text, true,
      "Password this replica gives its primary (AUTH) before syncing.") },
    s("masteruser", "", Kind::Text, true,
      "User name this replica gives its primary with masterauth (AUTH user password)."),
    aliased(s("replica-read-only", "yes", Kind::Bool, true,
      "A replica refuses writes from its clients with -READONLY (its primary's stream still applies)."),
      "slave-read-only"),
    aliased(s("replica-ignore-maxmemory", "yes", Kind::Bool, true,
      "A replica evicts nothing under maxmemory: its keys leave by its primary's stream, so it never diverges from it."),
      "slave-ignore-maxmemory"),
    aliased(s("replica-serve-stale-data", "yes", Kind::Bool, true,
      "While its link to the primary is down, a replica still answers with the data it has; no answers -MASTERDOWN."),
      "slave-serve-stale-data"),
    aliased(s("replica-priority", "100", Kind::Int { min: 0, max: INT_MAX }, true,
      "Sentinel promotes the replica with the lowest priority first (0: never)."),
      "slave-priority"),
    aliased(s("replica-announce-ip", "", Kind::Text, true,
      "Address a replica announces to its primary (REPLCONF ip-address) instead of the one it connects from."),
      "slave-announce-ip"),
    aliased(s("replica-announce-port", "0", Kind::Int { min: 0, max: 65535 }, true,
      "Port a replica announces to its primary (0: the port it listens on)."),
      "slave-announce-port"),
    s("repl-backlog-size", "1048576", Kind::Memory { min: 1, max: i64::MAX }, true,
      "Bytes of the replication stream kept for replicas that reconnect (partial resync)."),
    s("repl-backlog-ttl", "3600", Kind::Int { min: 0, max: INT_MAX }, true,
      "Seconds without replicas after which a primary frees its backlog (0: never)."),
    s("repl-diskless-sync", "yes", Kind::Bool, true,
      "A full sync streams the snapshot straight to the replica ($EOF:<mark>) instead of writing a file first ($<len>)."),
    s("repl-diskless-load", "disabled", Kind::Enum(&["disabled", "on-empty-db", "swapdb"]), true,
      "How a replica takes a full sync: disabled writes the snapshot to a file in dir as it arrives and loads it from there; on-empty-db and swapdb keep it in memory (faster, but the replica holds the dataset twice meanwhile)."),
    s("repl-diskless-sync-delay", "5", Kind::Int { min: 0, max: INT_MAX }, true,
      "Seconds a diskless full sync waits before it starts (newlines keep the replica waiting)."),
    aliased(s("repl-ping-replica-period", "10", Kind::Int { min: 1, max: INT_MAX }, true,
      "Seconds between the PINGs a primary writes to its replication stream."),
      "repl-ping-slave-period"),
    s("repl-timeout", "60", Kind::Int { min: 1, max: INT_MAX }, true,
      "Seconds of silence after which a replication link (either end) is given up."),
    aliased(s("min-replicas-to-write", "0", Kind::Int { min: 0, max: INT_MAX }, true,
      "A primary refuses writes (-NOREPLICAS) with fewer replicas than this acknowledging within min-replicas-max-lag (0: off)."),
      "min-slaves-to-write"),
    aliased(s("min-replicas-max-lag", "10", Kind::Int { min: 0, max: INT_MAX }, true,
      "Seconds since its last acknowledgement within which a replica counts for min-replicas-to-write."),
      "min-slaves-max-lag"),
    s("tls-port", "0", Kind::Int { min: 0, max: 65535 }, true,
      "TLS port (0 = none). Every shard listens on it beside port (SO_REUSEPORT); with port 0 the server speaks TLS only."),
    s("tls-cert-file", "", Kind::Text, true,
      "PEM certificate (chain) the server presents; CONFIG SET reloads it for new handshakes, keeping open connections."),
    s("tls-key-file", "", Kind::Text, true,
      "PEM private key of tls-cert-file: PKCS#8, PKCS#1 or SEC1; encrypted as PKCS#8 (PBES2) or OpenSSL's legacy AES-CBC form with tls-key-file-pass."),
    Setting { sensitive: true, ..s("tls-key-file-pass", "", Kind::Text, true,
      "Password of an encrypted tls-key-file.") },
    s("tls-client-cert-file", "", Kind::Text, true,
      "Certificate a replica presents to its primary (tls-replication); empty = tls-cert-file."),
    s("tls-client-key-file", "", Kind::Text, true,
      "Private key of tls-client-cert-file."),
    Setting { sensitive: true, ..s("tls-client-key-file-pass", "", Kind::Text, true,
      "Password of an encrypted tls-client-key-file.") },
    s("tls-dh-params-file", "", Kind::Text, true,
      "Accepted for Redis's configurations and checked to be readable; unused: rustls offers ECDHE key exchange only, no finite-field DHE."),
    s("tls-ca-cert-file", "", Kind::Text, true,
      "PEM CA certificates that client certificates (tls-auth-clients) and a TLS primary's certificate (tls-replication) must chain to."),
    s("tls-ca-cert-dir", "", Kind::Text, true,
      "A directory of PEM CA certificates, as tls-ca-cert-file (every readable certificate file in it)."),
    s("tls-auth-clients", "yes", Kind::Enum(&["no", "yes", "optional"]), true,
      "Client certificates on the TLS port: yes (required, signed by the CA), optional (checked if given), no (not asked for)."),
    s("tls-protocols", "", Kind::Text, true,
      "TLS versions, separated by spaces: TLSv1.2 and/or TLSv1.3 (empty = both). TLSv1 and TLSv1.1 are accepted but never offered (rustls has no such versions)."),
    s("tls-ciphers", "", Kind::Text, true,
      "TLS 1.2 cipher list in OpenSSL's syntax (ECDHE-RSA-AES128-GCM-SHA256:..., DEFAULT, HIGH, !/- to remove); only the AEAD ECDHE suites rustls has can be chosen. Empty = all of them."),
    s("tls-ciphersuites", "", Kind::Text, true,
      "TLS 1.3 suites, separated by ':' (TLS_AES_256_GCM_SHA384:TLS_AES_128_GCM_SHA256:TLS_CHACHA20_POLY1305_SHA256). Empty = all."),
    s("tls-prefer-server-ciphers", "no", Kind::Bool, true,
      "Choose the cipher by the server's order rather than the client's."),
    s("tls-session-caching", "yes", Kind::Bool, true,
      "Let clients resume TLS sessions (stateful: the server keeps them)."),
    s("tls-session-cache-size", "20480", Kind::Int { min: 0, max: INT_MAX }, true,
      "Most TLS sessions kept for resumption (0 = no limit)."),
    s("tls-session-cache-timeout", "300", Kind::Int { min: 0, max: INT_MAX }, true,
      "Seconds a kept TLS session may be resumed."),
    s("tls-replication", "no", Kind::Bool, true,
      "A replica connects to its primary with TLS (the primary's tls-port)."),
    s("tls-cluster", "no", Kind::Bool, true,
      "Cluster bus over TLS: stored for Redis's configurations (ringdb has no cluster bus yet)."),
    own(s("io-memory", "1048576", Kind::Memory { min: 512 * 1024, max: i64::MAX }, false,
      "Memory each shard registers with io_uring for its I/O buffers (counts against ulimit -l).")),
    own(s("task-quota", "500", Kind::Int { min: 50, max: 100_000 }, false,
      "Microseconds a busy shard runs its own work before it looks for replies and jobs from other cores, timers and file completions (glommio's preemption timer, Seastar's task quota). Bounds how long a cross-shard request waits behind a core that is never idle.")),
    own(s("spin-before-park", "50", Kind::Int { min: 0, max: 1_000_000 }, false,
      "Longest an idle shard spins before sleeping, in microseconds (0 = never: idle CPU over latency). The uring backend's network ring adapts its spin up to this, as KVM's halt polling does: longer while clients come back soon after it would have slept (clients that wait for each reply, as BLPOP consumers do), none while idle periods are longer. With io-backend glommio the executor spins this long.")),
];

pub fn find(name: &str) -> Option<&'static Setting> {
    SETTINGS.iter().find(|s| s.is_named(name))
}

/// Reads `value` as `setting` requires and returns its canonical form, or the
/// reason it cannot be used (Redis's wording).
pub fn normalize(setting: &Setting, value: &str) -> Result<String, String> {
    match setting.kind {
        Kind::Bool => match value.to_ascii_lowercase().as_str() {
            "yes" | "true" => Ok("yes".into()),
            "no" | "false" => Ok("no".into()),
            _ => Err("argument must be 'yes' or 'no'".into()),
        },
        Kind::Int { min, max } => {
            let n: i64 = value
                .trim()
                .parse()
                .map_err(|_| "argument couldn't be parsed into an integer".to_string())?;
            check_bounds(n, min, max)?;
            Ok(n.to_string())
        }
        Kind::Memory { min, max } => {
            let n =
                parse_memory(value).ok_or_else(|| "argument must be a memory value".to_string())?;
            check_bounds(n, min, max)?;
            Ok(n.to_string())
        }
        Kind::Float { min, max } => {
            let v: f64 = value
                .trim()
                .parse()
                .ok()
                .filter(|v: &f64| v.is_finite())
                .ok_or_else(|| "argument couldn't be parsed into a number".to_string())?;
            if v <= min || v >= max {
                return Err(format!("argument must be between {min} and {max} exclusive"));
            }
            Ok(v.to_string())
        }
        Kind::Enum(words) => {
            let lower = value.to_ascii_lowercase();
            if words.contains(&lower.as_str()) {
                Ok(lower)
            } else {
                Err(format!("argument(s) must be one of the following: {}", words.join(", ")))
            }
        }
        Kind::Text => Ok(value.to_string()),
        Kind::TitleTemplate => crate::proctitle::validate(value).map(|()| value.to_string()),
        Kind::Words => Ok(value.split_whitespace().collect::<Vec<_>>().join(" ")),
        Kind::BufferLimits => merge_buffer_limits(setting.default, value),
        Kind::SavePoints => parse_save_points(value).map(|points| {
            points.iter().map(|(s, c)| format!("{s} {c}")).collect::<Vec<_>>().join(" ")
        }),
        Kind::HotkeysRules => ringdb_engine::hotkeys::rule::parse_rules(value)
            .map(|rules| ringdb_engine::hotkeys::rule::rules_to_text(&rules))
            .map_err(|e| e.text().trim_start_matches("ERR ").to_string()),
        Kind::Flags(words) => {
            let bad = || format!("argument(s) must be one of the following: {}", words.join(", "));
            let mut set = vec![false; words.len()];
            let mut any = false;
            for given in value.split_whitespace() {
                let i = words.iter().position(|w| w.eq_ignore_ascii_case(given)).ok_or_else(bad)?;
                set[i] = true;
                any = true;
            }
            if !any {
                return Err(bad());
            }
            let on = |w: &str| words.iter().position(|x| *x == w).is_some_and(|i| set[i]);
            if words == SHUTDOWN_FLAGS && on("save") && on("nosave") {
                return Err("shutdown options SAVE and NOSAVE can't be used simultaneously".into());
            }
            let names: Vec<&str> =
                words.iter().zip(&set).skip(1).filter(|(_, on)| **on).map(|(w, _)| *w).collect();
            Ok(if names.is_empty() { words[0].to_string() } else { names.join(" ") })
        }
        Kind::Percentiles => {
            let mut printed = Vec::new();
            for word in value.split_whitespace() {
                let p: f64 = word
                    .parse()
                    .ok()
                    .filter(|p: &f64| !p.is_nan())
                    .ok_or("Invalid latency-tracking-info-percentiles parameters")?;
                if !(0.0..=100.0).contains(&p) {
                    return Err("latency-tracking-info-percentiles parameters should sit between [0.0,100.0]".into());
                }
                let text = format!("{p:.6}");
                printed.push(text.trim_end_matches('0').trim_end_matches('.').to_string());
            }
            Ok(printed.join(" "))
        }
        Kind::OomScores => {
            let words: Vec<&str> = value.split_whitespace().collect();
            if words.len() != 3 {
                return Err("wrong number of arguments".into());
            }
            let scores: Option<Vec<i64>> = words
                .iter()
                .map(|w| w.parse::<i64>().ok().filter(|v| (-2000..=2000).contains(v)))
                .collect();
            let bad = "Invalid oom-score-adj-values, elements must be between -2000 and 2000.";
            Ok(scores.ok_or(bad)?.iter().map(i64::to_string).collect::<Vec<_>>().join(" "))
        }
        Kind::NotifyEvents => ringdb_engine::funnel::notify::parse(value)
            .map(ringdb_engine::funnel::notify::to_string)
            .ok_or_else(|| "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_string()),
    }
}

fn check_bounds(n: i64, min: i64, max: i64) -> Result<(), String> {
    if n < min || n > max {
        return Err(format!("argument must be between {min} and {max} inclusive"));
    }
    Ok(())
}

/// Applies `<class> <hard> <soft> <seconds>` triples from `new` over
/// `current` (classes not named keep their limits), as Redis's CONFIG SET
/// client-output-buffer-limit does; the result is printed in bytes.
pub fn merge_buffer_limits(current: &str, new: &str) -> Result<String, String> {
    const BAD: &str = "Wrong number of arguments in buffer limit configuration.";
    let mut classes: Vec<(String, [i64; 3])> = Vec::new();
    let mut parse_into = |text: &str, strict: bool| -> Result<(), String> {
        let words: Vec<&str> = text.split_whitespace().collect();
        if !words.len().is_multiple_of(4) {
            return Err(BAD.into());
        }
        for chunk in words.chunks(4) {
            let class = match chunk[0].to_ascii_lowercase().as_str() {
                "normal" => "normal",
                "slave" | "replica" => "slave",
                "pubsub" => "pubsub",
                other if strict => {
                    return Err(format!(
                        "Invalid client class specified in buffer limit configuration: {other}"
                    ))
                }
                _ => continue,
            };
            let hard = parse_memory(chunk[1]).ok_or(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            )?;
            let soft = parse_memory(chunk[2]).ok_or(
                "Error in hard, soft or soft_seconds setting in buffer limit configuration.",
            )?;
            let secs: i64 = chunk[3].parse().map_err(|_| {
                "Error in hard, soft or soft_seconds setting in buffer limit configuration."
            })?;
            if hard < 0 || soft < 0 || secs < 0 {
                return Err(
                    "Error in hard, soft or soft_seconds setting in buffer limit configuration."
                        .into(),
                );
            }
            match classes.iter_mut().find(|(c, _)| c == class) {
                Some((_, limits)) => *limits = [hard, soft, secs],
                None => classes.push((class.to_string(), [hard, soft, secs])),
            }
        }
        Ok(())
    };
    parse_into(current, false)?;
    parse_into(new, true)?;
    Ok(classes
        .iter()
        .map(|(c, [h, s, t])| format!("{c} {h} {s} {t}"))
        .collect::<Vec<_>>()
        .join(" "))
}

/// The `save` schedule: `<seconds> <changes>` pairs (Redis's checks: an
/// even number of non-negative integers; seconds at least 1).
pub fn parse_save_points(value: &str) -> Result<Vec<(u64, u64)>, String> {
    const BAD: &str = "Invalid save parameters";
    let words: Vec<&str> = value.split_whitespace().collect();
    if !words.len().is_multiple_of(2) {
        return Err(BAD.into());
    }
    words
        .chunks(2)
        .map(|pair| {
            let seconds: u64 = pair[0].parse().map_err(|_| BAD.to_string())?;
            let changes: u64 = pair[1].parse().map_err(|_| BAD.to_string())?;
            if seconds < 1 || seconds > i32::MAX as u64 || changes > i32::MAX as u64 {
                return Err(BAD.to_string());
            }
            Ok((seconds, changes))
        })
        .collect()
}

/// Redis's `memtoull`: `1gb`, `512mb`, `64k`, plain bytes.
pub fn parse_memory(value: &str) -> Option<i64> {
    let v = value.trim().to_ascii_lowercase();
    let split = v.find(|c: char| !c.is_ascii_digit() && c != '-').unwrap_or(v.len());
    let (num, unit) = v.split_at(split);
    let n: i64 = num.parse().ok()?;
    let mult: i64 = match unit {
        "" | "b" => 1,
        "k" => 1000,
        "kb" => 1024,
        "m" => 1000 * 1000,
        "mb" => 1024 * 1024,
        "g" => 1000 * 1000 * 1000,
        "gb" => 1024 * 1024 * 1024,
        _ => return None,
    };
    n.checked_mul(mult)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_valid() {
        for s in SETTINGS {
            assert_eq!(normalize(s, s.default).as_deref(), Ok(s.default), "{}", s.name);
        }
    }

    #[test]
    fn values_are_checked() {
        let hz = find("hz").unwrap();
        assert!(normalize(hz, "abc").is_err());
        assert!(normalize(hz, "1000").is_err());
        assert_eq!(normalize(find("protected-mode").unwrap(), "NO").unwrap(), "no");
        assert_eq!(normalize(find("proto-max-bulk-len").unwrap(), "2mb").unwrap(), "2097152");
        assert!(normalize(find("maxmemory-policy").unwrap(), "lru").is_err());
        let rate = find("bf-error-rate").unwrap();
        assert_eq!(normalize(rate, "0.001").unwrap(), "0.001");
        assert_eq!(normalize(rate, "1e-3").unwrap(), "0.001");
        assert!(normalize(rate, "0").is_err() && normalize(rate, "1").is_err());
        assert!(normalize(rate, "abc").is_err() && normalize(rate, "nan").is_err());
        assert_eq!(parse_memory("1gb"), Some(1 << 30));
        let sig = find("shutdown-on-sigterm").unwrap();
        assert_eq!(normalize(sig, "FORCE nosave now").unwrap(), "nosave now force");
        assert_eq!(normalize(sig, "default save").unwrap(), "save");
        assert_eq!(normalize(sig, "default").unwrap(), "default");
        assert_eq!(
            normalize(sig, "").unwrap_err(),
            "argument(s) must be one of the following: default, save, nosave, now, force"
        );
        assert!(normalize(sig, "save bla").is_err());
        assert!(normalize(sig, "save nosave").unwrap_err().contains("simultaneously"));
        let save = find("save").unwrap();
        assert_eq!(normalize(save, " 900  1 ").unwrap(), "900 1");
        assert_eq!(normalize(save, "").unwrap(), "");
        for bad in ["900", "a 1", "0 1", "-1 1", "900 -1"] {
            assert_eq!(normalize(save, bad).unwrap_err(), "Invalid save parameters", "{bad}");
        }
    }
}
