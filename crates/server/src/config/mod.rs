//! Configuration: embedded defaults, a configuration file in ringdb's TOML
//! (`config/ringdb.toml`) or in Redis's `redis.conf` format, command-line
//! options and CONFIG GET/SET/REWRITE, all driven by one table
//! ([`settings`]).
//!
//! Precedence is Redis's: defaults, then the file, then options. Every value
//! is validated when it is read, wherever it comes from, with the same
//! errors.

pub mod cli;
pub mod redis_conf;
pub mod settings;

use redis_conf::{Directive, FatalError};
use settings::{find, normalize, Kind, Setting, SETTINGS};
use std::path::{Path, PathBuf};

/// The format of a configuration file, chosen by its name or its text;
/// CONFIG REWRITE writes back the format it read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    Toml,
    Redis,
}

impl Format {
    /// `.toml` and `.conf` by name, otherwise by what the text looks like.
    pub fn of(path: &Path, text: &str) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some("toml") => Format::Toml,
            Some("conf") => Format::Redis,
            _ if redis_conf::looks_like_toml(text) => Format::Toml,
            _ => Format::Redis,
        }
    }
}

/// A complete, validated configuration. Each core keeps its own copy;
/// CONFIG SET changes every copy.
#[derive(Clone, Debug)]
pub struct Config {
    /// Canonical values, in the order of [`SETTINGS`].
    values: Vec<String>,
    /// The file it was loaded from (CONFIG REWRITE writes there).
    pub file: Option<PathBuf>,
    pub format: Format,
    /// `rename-command` directives, in order (applied to the command table
    /// before it is first used).
    pub renames: Vec<(String, String)>,
    /// `user <name> <rules…>` lines, in order (loaded into the ACL at
    /// start-up).
    pub users: Vec<Vec<String>>,
    /// Directives Redis has and ringdb ignores, to be logged at start-up.
    pub warnings: Vec<String>,
    /// Settings the file or the command line gave (the others have their
    /// defaults, which start-up may adapt: `maxmemory` in a cgroup).
    given: Vec<&'static str>,
    /// What every connection reads on every request, parsed once per change.
    pub conn: ConnSettings,
}

/// The settings a connection's loop reads per read or per reply, kept
/// parsed so that the loop does not look them up by name each time.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConnSettings {
    pub proto_max_bulk_len: u64,
    pub client_query_buffer_limit: usize,
    /// `timeout`: idle seconds before a client is closed (0 = never).
    pub idle_timeout: u64,
    /// `client-output-buffer-limit` of the normal class.
    pub normal_output_limit: crate::push::BufferLimit,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("bad config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("bad directive or wrong value for '{name}': {message}")]
    Value { name: String, message: String },
    /// Redis's format: printed exactly as redis-server prints it.
    #[error("{0}")]
    Fatal(FatalError),
}

impl Default for Config {
    fn default() -> Self {
        let mut config = Config {
            values: SETTINGS.iter().map(|s| s.default.to_string()).collect(),
            file: None,
            format: Format::Toml,
            renames: Vec::new(),
            users: Vec::new(),
            warnings: Vec::new(),
            given: Vec::new(),
            conn: ConnSettings::default(),
        };
        config.refresh_conn();
        config
    }
}

/// Settings that take several arguments on one line in Redis's format
/// (`save 900 1`, `bind a b`); every other takes exactly one.
fn multi_arg(setting: &Setting) -> bool {
    matches!(
        setting.kind,
        Kind::SavePoints
            | Kind::BufferLimits
            | Kind::Percentiles
            | Kind::OomScores
            | Kind::Words
            | Kind::Flags(_)
    )
}

impl Config {
    /// Defaults, then `file` if given (either format), then `stdin`'s text
    /// (Redis's format, `ringdb -`), then the command-line `options`.
    pub fn load(
        file: Option<&Path>,
        stdin: Option<&str>,
        options: &[Directive],
    ) -> Result<Self, ConfigError> {
        let mut config = Config::default();
        let mut directives = Vec::new();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
            config.format = Format::of(path, &text);
            match config.format {
                Format::Toml => config.apply_toml(&text).map_err(|message| ConfigError::Parse {
                    path: path.display().to_string(),
                    message,
                })?,
                Format::Redis => {
                    directives = redis_conf::read_file(path).map_err(ConfigError::Fatal)?
                }
            }
            config.file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        }
        if let Some(text) = stdin {
            directives.extend(redis_conf::parse_text(text, None).map_err(ConfigError::Fatal)?);
        }
        directives.extend_from_slice(options);
        // As Redis: the first `save` read replaces the defaults, later ones
        // add to it.
        let mut save_read = false;
        for d in &directives {
            config
                .apply(d, &mut save_read)
                .map_err(|m| ConfigError::Fatal(FatalError::at(d, m)))?;
        }
        Ok(config)
    }

    /// One directive of Redis's format (or a command-line option).
    fn apply(&mut self, d: &Directive, save_read: &mut bool) -> Result<(), String> {
        const BAD: &str = "Bad directive or wrong number of arguments";
        if let Some(setting) = find(&d.name) {
            if setting.name == "replicaof" {
                // `replicaof host port` or `replicaof no one`, as Redis
                // checks it.
                let [host, port] = &d.args[..] else { return Err(BAD.into()) };
                if host.eq_ignore_ascii_case("no") && port.eq_ignore_ascii_case("one") {
                    return self.set_any("replicaof", "");
                }
                if !port.parse::<i64>().is_ok_and(|p| (0..=65535).contains(&p)) {
                    return Err("Invalid master port".into());
                }
            }
            let value = if multi_arg(setting) {
                d.args.join(" ")
            } else if d.args.len() == 1 {
                d.args[0].clone()
            } else {
                return Err("wrong number of arguments".into());
            };
            if setting.name == "save" && !value.is_empty() {
                let value = if std::mem::replace(save_read, true) {
                    format!("{} {value}", self.get("save").unwrap_or(""))
                } else {
                    value
                };
                return self.set_any("save", &value);
            }
            self.given.push(setting.name);
            return self.set_any(setting.name, &value);
        }
        let name = d.name.as_str();
        match name {
            "rename-command" if d.args.len() == 2 => {
                self.renames.push((d.args[0].clone(), d.args[1].clone()));
            }
            "sentinel" => return Err("sentinel directive while not in sentinel mode".into()),
            "user" if !d.args.is_empty() => self.users.push(d.args.clone()),
            "loadmodule" if !d.args.is_empty() => self.warn(d),
            _ if redis_conf::DEPRECATED.contains(&name) => {}
            _ if redis_conf::REDIS_ONLY.contains(&name) || name.contains('.') => {
                if d.args.is_empty() {
                    return Err(BAD.into());
                }
                let harmless = redis_conf::BEHAVES_AS.iter().any(|(n, v)| {
                    *n == name && d.args.len() == 1 && d.args[0].eq_ignore_ascii_case(v)
                });
                if !harmless {
                    self.warn(d);
                }
            }
            _ => return Err(BAD.into()),
        }
        Ok(())
    }

    fn warn(&mut self, d: &Directive) {
        self.warnings.push(format!(
            "ringdb does not honour Redis's '{}' directive ({}: '{}'): it is ignored",
            d.name,
            d.place(),
            d.text
        ));
    }

    fn apply_toml(&mut self, text: &str) -> Result<(), String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
        for (name, value) in table {
            let text = match value {
                toml::Value::String(s) => s,
                toml::Value::Integer(i) => i.to_string(),
                toml::Value::Boolean(b) => if b { "yes" } else { "no" }.to_string(),
                toml::Value::Float(f) => f.to_string(),
                other => return Err(format!("'{name}': unsupported value {other}")),
            };
            self.set_any(&name, &text).map_err(|m| format!("'{name}': {m}"))?;
            self.given.extend(find(&name).map(|s| s.name));
        }
        Ok(())
    }

    /// Whether the file or the command line set `name`.
    pub fn was_given(&self, name: &str) -> bool {
        self.given.iter().any(|g| g.eq_ignore_ascii_case(name))
    }

    fn index(name: &str) -> Option<usize> {
        SETTINGS.iter().position(|s| s.is_named(name))
    }

    /// Sets any setting, mutable or not (start-up).
    fn set_any(&mut self, name: &str, value: &str) -> Result<(), String> {
        let i = Self::index(name).ok_or_else(|| "unknown setting".to_string())?;
        // Redis changes directory to `dir` and fails as chdir does.
        if SETTINGS[i].name == "dir" && !Path::new(value).is_dir() {
            return Err("No such file or directory".into());
        }
        self.values[i] = match SETTINGS[i].kind {
            // Classes not named keep their current limits.
            Kind::BufferLimits => settings::merge_buffer_limits(&self.values[i], value)?,
            _ => normalize(&SETTINGS[i], value)?,
        };
        self.refresh_conn();
        Ok(())
    }

    fn refresh_conn(&mut self) {
        self.conn = ConnSettings {
            proto_max_bulk_len: self.proto_max_bulk_len(),
            client_query_buffer_limit: self.client_query_buffer_limit(),
            idle_timeout: self.timeout(),
            normal_output_limit: self.buffer_limit("normal"),
        };
    }

    /// CONFIG SET of one setting: validated, and refused for settings that
    /// cannot change at run time (Redis's texts).
    /// Sets a setting the server itself changes, immutable or not
    /// (`replicaof`, which REPLICAOF changes).
    pub fn set_by_server(&mut self, name: &str, value: &str) -> Result<(), String> {
        self.set_any(name, value)
    }

    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let setting = find(name).ok_or_else(|| "Unknown option".to_string())?;
        if !setting.mutable {
            if self.keeps_own(setting, value) {
                return Ok(());
            }
            return Err("can't set immutable config".into());
        }
        self.set_any(name, value)
    }

    /// Whether `value` is what `setting`, one of ringdb's own, has now: a
    /// CONFIG SET of it changes nothing and is accepted even when the
    /// setting is immutable (see [`Setting::own`]).
    pub fn keeps_own(&self, setting: &Setting, value: &str) -> bool {
        setting.own && normalize(setting, value).ok().as_deref() == self.get(setting.name)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        Self::index(name).map(|i| self.values[i].as_str())
    }

    /// Settings whose name matches the glob `pattern`, in table order.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static Setting, &str)> {
        SETTINGS
            .iter()
            .zip(&self.values)
            .filter(|(s, _)| {
                !s.hidden && ringdb_types::glob::glob_match(pattern, s.name.as_bytes(), true)
            })
            .map(|(s, v)| (s, v.as_str()))
            .collect()
    }

    /// An integer setting's value (0 when it is not one).
    pub fn int(&self, name: &str) -> i64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("yes")
    }

    pub fn daemonize(&self) -> bool {
        self.flag("daemonize")
    }

    pub fn disable_thp(&self) -> bool {
        self.flag("disable-thp")
    }

    /// The pid file to write: `pidfile`, or Redis's default path when
    /// daemonized without one.
    pub fn pidfile(&self) -> Option<String> {
        match self.get("pidfile").unwrap_or("") {
            "" if self.daemonize() => Some(format!("/var/run/redis_{}.pid", self.port())),
            "" => None,
            path => Some(path.to_string()),
        }
    }

    /// `oom-score-adj` (`no`, `relative` or `absolute`) and the primary's
    /// value of `oom-score-adj-values`.
    pub fn oom_score(&self) -> (&str, i32) {
        let mode = match self.get("oom-score-adj").unwrap_or("no") {
            "yes" => "relative",
            other => other,
        };
        let primary = self.get("oom-score-adj-values").unwrap_or("0");
        (mode, primary.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(0))
    }

    pub fn always_show_logo(&self) -> bool {
        self.flag("always-show-logo")
    }

    pub fn port(&self) -> u16 {
        self.int("port") as u16
    }

    pub fn bind(&self) -> Vec<String> {
        self.get("bind").unwrap_or("").split_whitespace().map(str::to_string).collect()
    }

    pub fn shards(&self) -> usize {
        self.int("shards") as usize
    }

    pub fn pin_cpus(&self) -> bool {
        self.flag("pin-cpus")
    }

    /// `auto`, `uring` or `glommio`.
    pub fn io_backend(&self) -> &str {
        self.get("io-backend").unwrap_or("auto")
    }

    pub fn databases(&self) -> usize {
        self.int("databases") as usize
    }

    pub fn requirepass(&self) -> Option<&str> {
        self.get("requirepass").filter(|p| !p.is_empty())
    }

    /// Whether a protected action (`enable-debug-command`,
    /// `enable-protected-configs`) is allowed to a client, `local` if it
    /// is on a loopback address (Redis's `allowProtectedAction`).
    pub fn allows(&self, action: &str, local: bool) -> bool {
        match self.get(action) {
            Some(v) if v.eq_ignore_ascii_case("yes") => true,
            Some(v) if v.eq_ignore_ascii_case("local") => local,
            _ => false,
        }
    }

    pub fn protected_mode(&self) -> bool {
        self.flag("protected-mode")
    }

    pub fn maxclients(&self) -> usize {
        self.int("maxclients") as usize
    }

    pub fn proto_max_bulk_len(&self) -> u64 {
        self.int("proto-max-bulk-len") as u64
    }

    pub fn client_query_buffer_limit(&self) -> usize {
        self.int("client-query-buffer-limit") as usize
    }

    pub fn tcp_backlog(&self) -> i32 {
        self.int("tcp-backlog") as i32
    }

    pub fn tcp_keepalive(&self) -> u64 {
        self.int("tcp-keepalive") as u64
    }

    pub fn timeout(&self) -> u64 {
        self.int("timeout") as u64
    }

    pub fn loglevel(&self) -> &str {
        self.get("loglevel").unwrap_or("notice")
    }

    pub fn logfile(&self) -> &str {
        self.get("logfile").unwrap_or("")
    }

    pub fn hz(&self) -> u64 {
        self.int("hz").max(1) as u64
    }

    pub fn maxmemory_policy(&self) -> &str {
        self.get("maxmemory-policy").unwrap_or("noeviction")
    }

    pub fn maxmemory(&self) -> u64 {
        self.int("maxmemory") as u64
    }

    /// `maxmemory` and how to stay under it, measured by the process's
    /// allocator count.
    pub fn memory_limit(&self) -> ringdb_engine::evict::MemoryLimit {
        // A replica that evicted keys of its own would diverge from its
        // primary (`replica-ignore-maxmemory`, as Redis).
        let ignored = self.is_replica() && self.flag("replica-ignore-maxmemory");
        ringdb_engine::evict::MemoryLimit {
            maxmemory: if ignored { 0 } else { self.maxmemory() },
            policy: ringdb_engine::evict::Policy::from_name(self.maxmemory_policy()),
            samples: self.int("maxmemory-samples") as usize,
            tenacity: self.int("maxmemory-eviction-tenacity") as u32,
            used: |shard| crate::memory::used_memory_near(shard.state.settings.memory.maxmemory),
        }
    }

    pub fn lfu_log_factor(&self) -> u32 {
        self.int("lfu-log-factor") as u32
    }

    pub fn lfu_decay_time(&self) -> u32 {
        self.int("lfu-decay-time") as u32
    }

    /// The encoding thresholds of lists, hashes, sets and sorted sets, and
    /// the size of stream nodes.
    /// Encodings follow Redis 7.0 (the version of the test suite ringdb is
    /// held to): lists are always quicklists and sets of strings hashtables.
    pub fn collection_limits(&self) -> ringdb_types::limits::Limits {
        ringdb_types::limits::Limits {
            list_max_listpack_size: self.int("list-max-listpack-size"),
            list_listpack: false,
            // Redis caps the depth a quicklist keeps at 2^16 - 1.
            list_compress_depth: (self.int("list-compress-depth") as usize).min(u16::MAX as usize),
            hash_max_listpack_entries: self.int("hash-max-listpack-entries") as usize,
            hash_max_listpack_value: self.int("hash-max-listpack-value") as usize,
            set_max_intset_entries: self.int("set-max-intset-entries") as usize,
            set_max_listpack_entries: 0,
            set_max_listpack_value: 0,
            zset_max_listpack_entries: self.int("zset-max-listpack-entries") as usize,
            zset_max_listpack_value: self.int("zset-max-listpack-value") as usize,
            stream_node_max_bytes: self.int("stream-node-max-bytes") as usize,
            stream_node_max_entries: self.int("stream-node-max-entries") as usize,
        }
    }

    /// `notify-keyspace-events` as flags.
    pub fn notify_flags(&self) -> u32 {
        ringdb_engine::funnel::notify::parse(self.get("notify-keyspace-events").unwrap_or(""))
            .unwrap_or(0)
    }

    /// `client-output-buffer-limit` of the pubsub class.
    pub fn pubsub_buffer_limit(&self) -> crate::push::BufferLimit {
        self.buffer_limit("pubsub")
    }

    /// `client-output-buffer-limit` of one client class (`normal`,
    /// `pubsub`, `slave`).
    pub fn buffer_limit(&self, class: &str) -> crate::push::BufferLimit {
        let text = self.get("client-output-buffer-limit").unwrap_or("");
        let words: Vec<&str> = text.split_whitespace().collect();
        words
            .chunks(4)
            .find(|c| c[0] == class)
            .map(|c| crate::push::BufferLimit {
                hard: c[1].parse().unwrap_or(0),
                soft: c[2].parse().unwrap_or(0),
                soft_seconds: c[3].parse().unwrap_or(0),
            })
            .unwrap_or_default()
    }

    /// This node follows a primary (`replicaof`, which REPLICAOF sets).
    pub fn is_replica(&self) -> bool {
        !self.get("replicaof").unwrap_or("").is_empty()
    }

    /// How scripts run: busy threshold, Lua memory, undeclared keys.
    pub fn script_settings(&self) -> ringdb_engine::scripting::ScriptSettings {
        ringdb_engine::scripting::ScriptSettings {
            busy_reply_threshold_ms: self.int("busy-reply-threshold").max(0) as u64,
            memory_limit: self.int("lua-memory-limit").max(0) as usize,
            allow_undeclared_keys: self.flag("lua-allow-undeclared-keys"),
            read_only_replica: self.is_replica() && self.flag("replica-read-only"),
        }
    }

    /// `tracking-table-max-keys` (0 = no limit), shared among the shards.
    pub fn tracking_table_max_keys(&self) -> u64 {
        self.int("tracking-table-max-keys").max(0) as u64
    }

    pub fn watch_coalesce_ms(&self) -> u64 {
        self.int("watch-coalesce-ms") as u64
    }

    /// `slowlog-log-slower-than` and `slowlog-max-len`.
    pub fn slowlog(&self) -> ringdb_engine::slowlog::SlowLogSettings {
        ringdb_engine::slowlog::SlowLogSettings {
            slower_than: self.int("slowlog-log-slower-than"),
            max_len: usize::try_from(self.int("slowlog-max-len")).unwrap_or(usize::MAX),
        }
    }

    /// `latency-tracking` and `latency-monitor-threshold`.
    pub fn latency(&self) -> ringdb_engine::latency::LatencySettings {
        ringdb_engine::latency::LatencySettings {
            tracking: self.flag("latency-tracking"),
            monitor_threshold_ms: self.int("latency-monitor-threshold").max(0) as u64,
        }
    }

    /// `latency-tracking-info-percentiles` (validated when set), as written
    /// and as numbers.
    pub fn latency_percentiles(&self) -> Vec<(String, f64)> {
        let text = self.get("latency-tracking-info-percentiles").unwrap_or("");
        text.split_whitespace().filter_map(|p| Some((p.to_string(), p.parse().ok()?))).collect()
    }

    /// `hotkeys-rules`, read (it was validated when set).
    pub fn hotkeys_rules(&self) -> Vec<ringdb_engine::hotkeys::rule::Rule> {
        ringdb_engine::hotkeys::rule::parse_rules(self.get("hotkeys-rules").unwrap_or(""))
            .unwrap_or_default()
    }

    pub fn hotkeys_replicate_reads(&self) -> bool {
        self.flag("hotkeys-replicate-reads")
    }

    pub fn hotkeys_max_keys(&self) -> usize {
        self.int("hotkeys-max-keys").max(1) as usize
    }

    pub fn hll_sparse_max_bytes(&self) -> usize {
        self.int("hll-sparse-max-bytes") as usize
    }

    pub fn bf_error_rate(&self) -> f64 {
        self.get("bf-error-rate").and_then(|v| v.parse().ok()).unwrap_or(0.01)
    }

    pub fn bf_initial_size(&self) -> u64 {
        self.int("bf-initial-size") as u64
    }

    /// Where snapshots go: `dir` joined with `dbfilename`.
    pub fn rdb_path(&self) -> PathBuf {
        Path::new(self.get("dir").unwrap_or("./"))
            .join(self.get("dbfilename").unwrap_or("dump.rdb"))
    }

    /// The `save` schedule as (seconds, changes) pairs.
    pub fn save_points(&self) -> Vec<(u64, u64)> {
        settings::parse_save_points(self.get("save").unwrap_or("")).unwrap_or_default()
    }

    /// What a shutdown on SIGINT (`sigint`) or SIGTERM does: (save, nosave,
    /// force), as SHUTDOWN's options.
    pub fn shutdown_on_signal(&self, sigint: bool) -> (bool, bool, bool) {
        let name = if sigint { "shutdown-on-sigint" } else { "shutdown-on-sigterm" };
        let words: Vec<&str> = self.get(name).unwrap_or("").split(' ').collect();
        (words.contains(&"save"), words.contains(&"nosave"), words.contains(&"force"))
    }

    pub fn rdbcompression(&self) -> bool {
        self.flag("rdbcompression")
    }

    pub fn rdbchecksum(&self) -> bool {
        self.flag("rdbchecksum")
    }

    pub fn io_memory(&self) -> usize {
        self.int("io-memory") as usize
    }

    pub fn task_quota_us(&self) -> u64 {
        self.int("task-quota") as u64
    }

    pub fn spin_before_park_us(&self) -> u64 {
        self.int("spin-before-park") as u64
    }

    /// The configuration file's text for these values: every setting with
    /// its comment, as `config/ringdb.toml` is written.
    pub fn to_toml(&self) -> String {
        let mut out = String::from(
            "# ringdb configuration. Every setting, with its default.\n\
             # Each one can also be given as a flag (`ringdb --port 7000`) and most\n\
             # can be changed at run time with CONFIG SET.\n",
        );
        for (s, v) in SETTINGS.iter().zip(&self.values) {
            out.push_str(&format!("\n# {}\n{} = {}\n", s.help, s.name, toml_value(s, v)));
        }
        out
    }

    /// The same in Redis's format (`ringdb --print-config redis`).
    pub fn to_redis_conf(&self) -> String {
        let mut out = String::from(
            "# ringdb configuration in Redis's redis.conf format. Every setting, with its default.\n",
        );
        for (s, v) in SETTINGS.iter().zip(&self.values) {
            out.push_str(&format!("\n# {}\n", s.help));
            for line in redis_lines(s, v) {
                out.push_str(&line);
                out.push('\n');
            }
        }
        out
    }

    /// CONFIG REWRITE: writes the current values into the file the server
    /// was started with, in its format, keeping its comments and layout.
    /// `force`: every setting is written, at its default or not (DEBUG
    /// CONFIG-REWRITE-FORCE-ALL).
    pub fn rewrite(&self, force: bool) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err("The server is running without a config file".into());
        };
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let new = match self.format {
            Format::Toml => self.rewrite_toml(&text, force)?,
            Format::Redis => self.rewrite_redis(&text, force),
        };
        let mut tmp = path.clone().into_os_string();
        tmp.push(".tmp");
        std::fs::write(&tmp, new).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())
    }

    /// Redis's rewrite: each setting's lines replace its old lines in place
    /// (extra old lines go), settings not in the file and not at their
    /// default are appended after `# Generated by CONFIG REWRITE`. Other
    /// lines (comments, `include`, `rename-command`, Redis-only directives)
    /// stay as they are.
    fn rewrite_redis(&self, text: &str, force: bool) -> String {
        const MARK: &str = "# Generated by CONFIG REWRITE";
        let mut lines: Vec<Option<String>> = text.lines().map(|l| Some(l.to_string())).collect();
        let mut tail = Vec::new();
        for (s, v) in SETTINGS.iter().zip(&self.values) {
            let old: Vec<usize> = lines
                .iter()
                .enumerate()
                .filter(|(_, l)| {
                    let l = l.as_deref().unwrap_or("").trim();
                    !l.starts_with('#')
                        && redis_conf::split_args(l)
                            .and_then(|a| a.into_iter().next())
                            .is_some_and(|name| s.is_named(&name))
                })
                .map(|(i, _)| i)
                .collect();
            if old.is_empty() && v == s.default && !force {
                continue;
            }
            let mut new = redis_lines(s, v).into_iter();
            for &i in &old {
                lines[i] = new.next();
            }
            tail.extend(new);
        }
        let mut out: Vec<String> = lines.into_iter().flatten().collect();
        if !tail.is_empty() {
            if !out.iter().any(|l| l == MARK) {
                out.push(MARK.to_string());
            }
            out.extend(tail);
        }
        let mut text = out.join("\n");
        text.push('\n');
        text
    }

    fn rewrite_toml(&self, text: &str, force: bool) -> Result<String, String> {
        let mut doc: toml_edit::DocumentMut =
            text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
        for (s, v) in SETTINGS.iter().zip(&self.values) {
            let present = doc.contains_key(s.name);
            if present || v != s.default || force {
                let value: toml_edit::Value = match s.kind {
                    Kind::Bool => (v == "yes").into(),
                    Kind::Int { .. } | Kind::Memory { .. } => v.parse::<i64>().unwrap_or(0).into(),
                    Kind::Float { .. } => v.parse::<f64>().unwrap_or(0.0).into(),
                    Kind::Enum(_)
                    | Kind::Text
                    | Kind::TitleTemplate
                    | Kind::Words
                    | Kind::BufferLimits
                    | Kind::NotifyEvents
                    | Kind::SavePoints
                    | Kind::HotkeysRules
                    | Kind::Percentiles
                    | Kind::OomScores
                    | Kind::Flags(_) => v.as_str().into(),
                };
                match doc.get_mut(s.name).and_then(|item| item.as_value_mut()) {
                    Some(existing) => {
                        let decor = existing.decor().clone();
                        *existing = value;
                        *existing.decor_mut() = decor;
                    }
                    None => {
                        doc[s.name] = toml_edit::value(value);
                    }
                }
            }
        }
        Ok(doc.to_string())
    }
}

/// A setting's lines in Redis's format: `save` one line per pair,
/// `client-output-buffer-limit` one per class, strings quoted as Redis's
/// rewrite quotes them.
fn redis_lines(s: &Setting, v: &str) -> Vec<String> {
    let words: Vec<&str> = v.split_whitespace().collect();
    match s.kind {
        // No primary: no line (Redis's rewrite removes it).
        Kind::Words if s.name == "replicaof" && words.is_empty() => Vec::new(),
        Kind::SavePoints if words.is_empty() => vec![format!("{} \"\"", s.name)],
        Kind::SavePoints => {
            words.chunks(2).map(|p| format!("{} {}", s.name, p.join(" "))).collect()
        }
        Kind::BufferLimits => {
            words.chunks(4).map(|c| format!("{} {}", s.name, c.join(" "))).collect()
        }
        Kind::Percentiles | Kind::Words | Kind::OomScores if !words.is_empty() => {
            vec![format!("{} {}", s.name, words.join(" "))]
        }
        Kind::Percentiles | Kind::Words | Kind::OomScores => vec![format!("{} \"\"", s.name)],
        Kind::Text | Kind::TitleTemplate | Kind::NotifyEvents | Kind::HotkeysRules => {
            vec![format!("{} {}", s.name, redis_conf::repr(v))]
        }
        Kind::Bool
        | Kind::Int { .. }
        | Kind::Memory { .. }
        | Kind::Float { .. }
        | Kind::Enum(_)
        | Kind::Flags(_) => {
            vec![format!("{} {}", s.name, v)]
        }
    }
}

fn toml_value(s: &Setting, v: &str) -> String {
    match s.kind {
        Kind::Bool => (v == "yes").to_string(),
        Kind::Int { .. } | Kind::Memory { .. } | Kind::Float { .. } => v.to_string(),
        Kind::Enum(_)
        | Kind::Text
        | Kind::TitleTemplate
        | Kind::Words
        | Kind::BufferLimits
        | Kind::NotifyEvents
        | Kind::SavePoints
        | Kind::HotkeysRules
        | Kind::Percentiles
        | Kind::OomScores
        | Kind::Flags(_) => format!("{v:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(words: &[&str]) -> Vec<Directive> {
        let words: Vec<String> = words.iter().map(|w| w.to_string()).collect();
        redis_conf::command_line(&words)
    }

    fn temp(tag: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("ringdb-config-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn reads_redis_conf() {
        let dir = temp("redis");
        let path = dir.join("redis.conf");
        std::fs::write(
            &path,
            "# a comment\nport 6599\nsave \"\"\nsave 900 1\nsave 300 10\nmaxmemory 100mb\n\
             client-output-buffer-limit pubsub 32mb 8mb 60\nlogfile ''\nappendonly yes\n\
             rename-command FLUSHALL \"\"\nactiverehashing yes\nrepl-disable-tcp-nodelay yes\nbind 127.0.0.1 -::1\n",
        )
        .unwrap();
        let c = Config::load(Some(&path), None, &opts(&["--save", "60", "5"])).unwrap();
        assert_eq!(c.format, Format::Redis);
        assert_eq!(c.port(), 6599);
        assert_eq!(c.save_points(), vec![(900, 1), (300, 10), (60, 5)]);
        assert_eq!(c.maxmemory(), 100 * 1024 * 1024);
        assert_eq!(c.pubsub_buffer_limit().hard, 32 * 1024 * 1024);
        assert_eq!(c.get("appendonly"), Some("yes"));
        assert_eq!(c.bind(), vec!["127.0.0.1", "-::1"]);
        assert_eq!(c.renames, vec![("FLUSHALL".to_string(), String::new())]);
        // activerehashing yes is what ringdb does; repl-disable-tcp-nodelay
        // yes is not.
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert!(
            c.warnings[0].contains("'repl-disable-tcp-nodelay'")
                && c.warnings[0].contains("line 12")
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn redis_conf_errors_as_redis() {
        let dir = temp("errors");
        let path = dir.join("redis.conf");
        for (text, line, message) in [
            ("port 1\nnosuchthing yes\n", 2, "Bad directive or wrong number of arguments"),
            ("port 1 2\n", 1, "wrong number of arguments"),
            ("hz 10\nport abc\n", 2, "argument couldn't be parsed into an integer"),
            ("maxmemory-policy nope\n", 1, "argument(s) must be one of the following"),
            ("hz 10\nreplicaof 127.0.0.1 abc\n", 2, "Invalid master port"),
            ("slaveof 127.0.0.1\n", 1, "Bad directive or wrong number of arguments"),
            ("shutdown-on-sigint\n", 1, "argument(s) must be one of the following: default"),
        ] {
            std::fs::write(&path, text).unwrap();
            let err = Config::load(Some(&path), None, &[]).unwrap_err().to_string();
            assert!(err.contains("*** FATAL CONFIG FILE ERROR (Redis "), "{err}");
            assert!(err.contains(&format!("at line {line}\n")), "{err}");
            assert!(err.contains(message), "{err}");
        }
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn rewrites_redis_conf_in_place() {
        let dir = temp("rewrite-redis");
        let path = dir.join("redis.conf");
        std::fs::write(&path, "# keep me\nhz 10\nsave 900 1\nsave 300 10\nactiverehashing yes\n")
            .unwrap();
        let mut c = Config::load(Some(&path), None, &[]).unwrap();
        c.set("hz", "25").unwrap();
        c.set("save", "100 1").unwrap();
        c.set("maxmemory-policy", "allkeys-lfu").unwrap();
        c.set("requirepass", "a b").unwrap();
        c.rewrite(false).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            text,
            "# keep me\nhz 25\nsave 100 1\nactiverehashing yes\n# Generated by CONFIG REWRITE\n\
             requirepass \"a b\"\nmaxmemory-policy allkeys-lfu\n"
        );
        let again = Config::load(Some(&path), None, &[]).unwrap();
        assert_eq!((again.hz(), again.requirepass()), (25, Some("a b")));
        assert_eq!(again.save_points(), vec![(100, 1)]);
        // Forced: every setting is in the file, and it reads back the same.
        again.rewrite(true).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\nshutdown-on-sigterm default\n"), "{text}");
        let forced = Config::load(Some(&path), None, &[]).unwrap();
        assert_eq!(forced.values, again.values);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn printed_redis_conf_loads_back_as_the_defaults() {
        let dir = temp("print");
        let path = dir.join("all.conf");
        std::fs::write(&path, Config::default().to_redis_conf()).unwrap();
        let loaded = Config::load(Some(&path), None, &[]).unwrap();
        assert_eq!(loaded.values, Config::default().values);
        assert!(loaded.warnings.is_empty());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn committed_config_file_matches_the_table() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ringdb.toml");
        let committed = std::fs::read_to_string(&path).expect("config/ringdb.toml is committed");
        assert_eq!(
            committed,
            Config::default().to_toml(),
            "config/ringdb.toml is out of date: regenerate it with `ringdb --print-config > config/ringdb.toml`"
        );
        let loaded = Config::load(Some(&path), None, &[]).unwrap();
        assert_eq!(loaded.values, Config::default().values);
    }

    #[test]
    fn flags_override_and_validate() {
        let c = Config::load(None, None, &opts(&["--port", "7000", "--shards", "2"])).unwrap();
        assert_eq!(c.port(), 7000);
        assert_eq!(c.shards(), 2);
        assert!(Config::load(None, None, &opts(&["--port", "x"])).is_err());
        assert!(Config::load(None, None, &opts(&["--nope", "1"])).is_err());
        let mut c = Config::default();
        assert_eq!(c.set("databases", "3").unwrap_err(), "can't set immutable config");
        assert!(c.set("hz", "20").is_ok());
        assert_eq!(c.hz(), 20);
    }

    #[test]
    fn rewrite_keeps_comments() {
        let dir = std::env::temp_dir().join(format!("ringdb-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("ringdb.toml");
        std::fs::write(&path, "# my comment\nhz = 10\n").unwrap();
        let mut c = Config::load(Some(&path), None, &[]).unwrap();
        c.set("hz", "25").unwrap();
        c.set("maxmemory-policy", "allkeys-lfu").unwrap();
        c.rewrite(false).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("# my comment"));
        assert!(text.contains("hz = 25"));
        assert!(text.contains("maxmemory-policy = \"allkeys-lfu\""));
        let again = Config::load(Some(&path), None, &[]).unwrap();
        assert_eq!(again.hz(), 25);
        std::fs::remove_dir_all(&dir).ok();
    }
}
