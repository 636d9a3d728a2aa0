//! Configuration: embedded defaults, `config/ringdb.toml`, command-line flags
//! and CONFIG GET/SET/REWRITE, all driven by one table ([`settings`]).
//!
//! Precedence is Redis's: defaults, then the file, then flags. Every value is
//! validated when it is read, wherever it comes from, with the same errors.

pub mod cli;
pub mod settings;

use settings::{find, normalize, Kind, Setting, SETTINGS};
use std::path::{Path, PathBuf};

/// A complete, validated configuration. Each core keeps its own copy;
/// CONFIG SET changes every copy.
#[derive(Clone, Debug)]
pub struct Config {
    /// Canonical values, in the order of [`SETTINGS`].
    values: Vec<String>,
    /// The file it was loaded from (CONFIG REWRITE writes there).
    pub file: Option<PathBuf>,
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
}

impl Default for Config {
    fn default() -> Self {
        let mut config = Config {
            values: SETTINGS.iter().map(|s| s.default.to_string()).collect(),
            file: None,
            conn: ConnSettings::default(),
        };
        config.refresh_conn();
        config
    }
}

impl Config {
    /// Defaults, then `file` if given, then `overrides` (flag name, value).
    pub fn load(file: Option<&Path>, overrides: &[(String, String)]) -> Result<Self, ConfigError> {
        let mut config = Config::default();
        if let Some(path) = file {
            let text = std::fs::read_to_string(path)
                .map_err(|source| ConfigError::Read { path: path.display().to_string(), source })?;
            config.apply_toml(&text).map_err(|message| ConfigError::Parse {
                path: path.display().to_string(),
                message,
            })?;
            config.file = Some(std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf()));
        }
        for (name, value) in overrides {
            config
                .set_any(name, value)
                .map_err(|message| ConfigError::Value { name: name.clone(), message })?;
        }
        Ok(config)
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
        }
        Ok(())
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
    pub fn set(&mut self, name: &str, value: &str) -> Result<(), String> {
        let setting = find(name).ok_or_else(|| "Unknown option".to_string())?;
        if !setting.mutable {
            return Err("can't set immutable config".into());
        }
        self.set_any(name, value)
    }

    pub fn get(&self, name: &str) -> Option<&str> {
        Self::index(name).map(|i| self.values[i].as_str())
    }

    /// Settings whose name matches the glob `pattern`, in table order.
    pub fn matching(&self, pattern: &[u8]) -> Vec<(&'static Setting, &str)> {
        SETTINGS
            .iter()
            .zip(&self.values)
            .filter(|(s, _)| ringdb_types::glob::glob_match(pattern, s.name.as_bytes(), true))
            .map(|(s, v)| (s, v.as_str()))
            .collect()
    }

    fn int(&self, name: &str) -> i64 {
        self.get(name).and_then(|v| v.parse().ok()).unwrap_or(0)
    }

    fn flag(&self, name: &str) -> bool {
        self.get(name) == Some("yes")
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
        ringdb_engine::evict::MemoryLimit {
            maxmemory: self.maxmemory(),
            policy: ringdb_engine::evict::Policy::from_name(self.maxmemory_policy()),
            samples: self.int("maxmemory-samples") as usize,
            tenacity: self.int("maxmemory-eviction-tenacity") as u32,
            used: |_| crate::memory::used_memory_now(),
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

    /// How scripts run: busy threshold, Lua memory, undeclared keys.
    pub fn script_settings(&self) -> ringdb_engine::scripting::ScriptSettings {
        ringdb_engine::scripting::ScriptSettings {
            busy_reply_threshold_ms: self.int("busy-reply-threshold").max(0) as u64,
            memory_limit: self.int("lua-memory-limit").max(0) as usize,
            allow_undeclared_keys: self.flag("lua-allow-undeclared-keys"),
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

    /// CONFIG REWRITE: writes the current values into the file the server
    /// was started with, keeping its comments and layout.
    pub fn rewrite(&self) -> Result<(), String> {
        let Some(path) = &self.file else {
            return Err("The server is running without a config file".into());
        };
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let mut doc: toml_edit::DocumentMut =
            text.parse().map_err(|e: toml_edit::TomlError| e.to_string())?;
        for (s, v) in SETTINGS.iter().zip(&self.values) {
            let present = doc.contains_key(s.name);
            if present || v != s.default {
                let value: toml_edit::Value = match s.kind {
                    Kind::Bool => (v == "yes").into(),
                    Kind::Int { .. } | Kind::Memory { .. } => v.parse::<i64>().unwrap_or(0).into(),
                    Kind::Float { .. } => v.parse::<f64>().unwrap_or(0.0).into(),
                    Kind::Enum(_)
                    | Kind::Text
                    | Kind::BufferLimits
                    | Kind::NotifyEvents
                    | Kind::SavePoints
                    | Kind::HotkeysRules
                    | Kind::Percentiles => v.as_str().into(),
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
        let tmp = path.with_extension("toml.tmp");
        std::fs::write(&tmp, doc.to_string()).map_err(|e| e.to_string())?;
        std::fs::rename(&tmp, path).map_err(|e| e.to_string())
    }
}

fn toml_value(s: &Setting, v: &str) -> String {
    match s.kind {
        Kind::Bool => (v == "yes").to_string(),
        Kind::Int { .. } | Kind::Memory { .. } | Kind::Float { .. } => v.to_string(),
        Kind::Enum(_)
        | Kind::Text
        | Kind::BufferLimits
        | Kind::NotifyEvents
        | Kind::SavePoints
        | Kind::HotkeysRules
        | Kind::Percentiles => format!("{v:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn committed_config_file_matches_the_table() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/ringdb.toml");
        let committed = std::fs::read_to_string(&path).expect("config/ringdb.toml is committed");
        assert_eq!(
            committed,
            Config::default().to_toml(),
            "config/ringdb.toml is out of date: regenerate it with `ringdb --print-config > config/ringdb.toml`"
        );
        let loaded = Config::load(Some(&path), &[]).unwrap();
        assert_eq!(loaded.values, Config::default().values);
    }

    #[test]
    fn flags_override_and_validate() {
        let c =
            Config::load(None, &[("port".into(), "7000".into()), ("shards".into(), "2".into())])
                .unwrap();
        assert_eq!(c.port(), 7000);
        assert_eq!(c.shards(), 2);
        assert!(Config::load(None, &[("port".into(), "x".into())]).is_err());
        assert!(Config::load(None, &[("nope".into(), "1".into())]).is_err());
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
        let mut c = Config::load(Some(&path), &[]).unwrap();
        c.set("hz", "25").unwrap();
        c.set("maxmemory-policy", "allkeys-lfu").unwrap();
        c.rewrite().unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("# my comment"));
        assert!(text.contains("hz = 25"));
        assert!(text.contains("maxmemory-policy = \"allkeys-lfu\""));
        let again = Config::load(Some(&path), &[]).unwrap();
        assert_eq!(again.hz(), 25);
        std::fs::remove_dir_all(&dir).ok();
    }
}
