//! Redis's configuration format, `redis.conf`: one directive per line, its
//! arguments split as Redis's `sdssplitargs` splits them (double quotes with
//! `\n`, `\xHH`, … escapes, single quotes, `#` comment lines), `include`
//! of further files (globs too). Command-line options (`--port 7000`) are
//! the same directives, as `redis-server` appends them to its file.
//!
//! What the directives mean is [`super::Config`]'s business; this module
//! only reads and writes the text, and names Redis's directives ringdb
//! does not have, so that they are warned about rather than refused.

use std::path::{Path, PathBuf};

use crate::cmd::connection::REDIS_VERSION;

/// One directive: `name arg arg …`, where it was read.
#[derive(Clone, Debug, PartialEq)]
pub struct Directive {
    /// Lower case, as Redis compares them.
    pub name: String,
    pub args: Vec<String>,
    /// The line as written (trimmed), for errors and warnings.
    pub text: String,
    pub line: usize,
    /// The file, or `None` for the command line.
    pub file: Option<PathBuf>,
}

impl Directive {
    pub fn new(name: &str, args: Vec<String>) -> Directive {
        let mut text = name.to_string();
        for a in &args {
            text.push(' ');
            text.push_str(&repr(a));
        }
        Directive { name: name.to_ascii_lowercase(), args, text, line: 0, file: None }
    }

    /// Where it was read, for warnings: `line 3 of /etc/redis.conf`.
    pub fn place(&self) -> String {
        match &self.file {
            Some(f) => format!("line {} of {}", self.line, f.display()),
            None => "the command line".to_string(),
        }
    }
}

/// A fatal error in configuration text, printed as Redis prints it.
#[derive(Debug, Clone, PartialEq)]
pub struct FatalError {
    /// The offending line and its number, when there is one.
    pub at: Option<(usize, String)>,
    pub message: String,
}

impl FatalError {
    pub fn at(d: &Directive, message: impl Into<String>) -> FatalError {
        FatalError { at: Some((d.line, d.text.clone())), message: message.into() }
    }
}

impl std::fmt::Display for FatalError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(f, "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***")?;
        if let Some((line, text)) = &self.at {
            writeln!(f, "Reading the configuration file, at line {line}")?;
            writeln!(f, ">>> '{text}'")?;
        }
        write!(f, "{}", self.message)
    }
}

/// Splits a line into arguments as Redis's `sdssplitargs` (the protocol
/// crate's, which inline commands use too); `None` for unbalanced quotes
/// (or a closing quote not followed by a space).
pub fn split_args(line: &str) -> Option<Vec<String>> {
    let args = ringdb_protocol::parse::split_args(line.as_bytes())?;
    Some(args.into_iter().map(|a| String::from_utf8_lossy(&a).into_owned()).collect())
}

/// A string as Redis's `sdscatrepr` writes it: double-quoted, with escapes.
pub fn repr(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for &c in s.as_bytes() {
        match c {
            b'\\' => out.push_str("\\\\"),
            b'"' => out.push_str("\\\""),
            b'\n' => out.push_str("\\n"),
            b'\r' => out.push_str("\\r"),
            b'\t' => out.push_str("\\t"),
            7 => out.push_str("\\a"),
            8 => out.push_str("\\b"),
            0x20..=0x7e => out.push(c as char),
            _ => out.push_str(&format!("\\x{c:02x}")),
        }
    }
    out.push('"');
    out
}

/// An argument as a rewritten file shows it: bare when it reads back the
/// same, quoted otherwise.
pub fn word(s: &str) -> String {
    let bare = !s.is_empty()
        && s.bytes().all(|c| c.is_ascii_graphic() && c != b'"' && c != b'\'' && c != b'\\');
    if bare {
        s.to_string()
    } else {
        repr(s)
    }
}

/// How deep `include` may nest (Redis has no limit and overflows its stack
/// on a file that includes itself).
const MAX_INCLUDE_DEPTH: usize = 16;

/// Reads a file of directives, following `include`.
pub fn read_file(path: &Path) -> Result<Vec<Directive>, FatalError> {
    let mut out = Vec::new();
    read_into(path, 0, &mut out)?;
    Ok(out)
}

fn read_into(path: &Path, depth: usize, out: &mut Vec<Directive>) -> Result<(), FatalError> {
    let text = std::fs::read_to_string(path).map_err(|e| FatalError {
        at: None,
        message: format!("Fatal error, can't open config file '{}': {e}", path.display()),
    })?;
    for d in parse_text(&text, Some(path))? {
        if d.name != "include" {
            out.push(d);
            continue;
        }
        if d.args.len() != 1 {
            return Err(FatalError::at(&d, "Bad directive or wrong number of arguments"));
        }
        if depth >= MAX_INCLUDE_DEPTH {
            return Err(FatalError::at(&d, "include nesting too deep"));
        }
        for file in include_paths(&d.args[0]) {
            read_into(&file, depth + 1, out)?;
        }
    }
    Ok(())
}

/// The files an `include` names: the path itself, or the sorted matches of
/// a glob in its last component (none is fine, as Redis allows an empty
/// `conf.d`).
fn include_paths(pattern: &str) -> Vec<PathBuf> {
    let path = Path::new(pattern);
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    if !name.contains(['*', '?', '[']) {
        return vec![path.to_path_buf()];
    }
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| {
            let n = e.file_name();
            ringdb_types::glob::glob_match(name.as_bytes(), n.to_string_lossy().as_bytes(), false)
        })
        .map(|e| dir.join(e.file_name()))
        .collect();
    files.sort();
    files
}

/// Directives of configuration text; `file` names it in errors.
pub fn parse_text(text: &str, file: Option<&Path>) -> Result<Vec<Directive>, FatalError> {
    let mut out = Vec::new();
    for (i, raw) in text.split('\n').enumerate() {
        let line = raw.trim_matches([' ', '\t', '\r', '\n']);
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let Some(mut args) = split_args(line) else {
            return Err(FatalError {
                at: Some((i + 1, line.to_string())),
                message: "Unbalanced quotes in configuration line".into(),
            });
        };
        if args.is_empty() {
            continue;
        }
        let name = args.remove(0).to_ascii_lowercase();
        out.push(Directive {
            name,
            args,
            text: line.to_string(),
            line: i + 1,
            file: file.map(Path::to_path_buf),
        });
    }
    Ok(out)
}

/// Whether a file's text is ringdb's TOML rather than Redis's format: its
/// first directive is `name = value` or a `[table]`.
pub fn looks_like_toml(text: &str) -> bool {
    let first =
        text.lines().map(str::trim).find(|l| !l.is_empty() && !l.starts_with('#')).unwrap_or("");
    if first.starts_with('[') {
        return true;
    }
    match first.split_once('=') {
        Some((name, _)) => {
            let name = name.trim();
            !name.is_empty()
                && name.bytes().all(|c| c.is_ascii_alphanumeric() || c == b'-' || c == b'_')
        }
        None => false,
    }
}

/// Command-line options as `redis-server` reads them: `--name` starts a
/// directive and the words after it are its arguments; a name followed by
/// nothing takes the next word even when it starts with `--`, except that
/// a bare `--save` means `save ""`.
pub fn command_line(words: &[String]) -> Vec<Directive> {
    let mut out: Vec<Directive> = Vec::new();
    let mut needs_value = false;
    for (j, w) in words.iter().enumerate() {
        let starts_option = w.starts_with("--") && !needs_value;
        if starts_option {
            // `"--port 6380"` as one word is a whole directive.
            let mut parts = split_args(&w[2..]).unwrap_or_default();
            if parts.is_empty() {
                parts.push(String::new());
            }
            let name = parts.remove(0);
            needs_value = parts.is_empty();
            let next_is_option = words.get(j + 1).is_none_or(|n| n.starts_with("--"));
            if needs_value && next_is_option && name.eq_ignore_ascii_case("save") {
                parts.push(String::new());
                needs_value = false;
            }
            out.push(Directive::new(&name, parts));
        } else if let Some(last) = out.last_mut() {
            last.args.push(w.clone());
            last.text = Directive::new(&last.name, last.args.clone()).text;
            needs_value = false;
        } else {
            // Words before any `--name` start a directive of their own
            // (`redis-server redis.conf loglevel verbose`, which Redis
            // supports though it is not the documented form).
            out.push(Directive::new(w, Vec::new()));
        }
    }
    out
}

/// Redis 7.0's deprecated directives, accepted and ignored by Redis itself.
pub const DEPRECATED: &[&str] =
    &["list-max-ziplist-entries", "list-max-ziplist-value", "lua-replicate-commands"];

/// Redis's directives that ringdb does not act on, where ringdb behaves as
/// the given value does anyway: that value is accepted without a warning.
pub const BEHAVES_AS: &[(&str, &str)] = &[
    ("activerehashing", "yes"),
    ("aof-timestamp-enabled", "no"),
    ("dynamic-hz", "no"),
    ("io-threads", "1"),
    ("lazyfree-lazy-eviction", "no"),
    ("lazyfree-lazy-expire", "no"),
    ("lazyfree-lazy-server-del", "no"),
    ("no-appendfsync-on-rewrite", "no"),
];

/// Every directive of Redis 7.0.15's configuration table that ringdb's own
/// table does not have. Reading one logs a warning naming it.
pub const REDIS_ONLY: &[&str] = &[
    "active-defrag-cycle-max",
    "active-defrag-cycle-min",
    "active-defrag-ignore-bytes",
    "active-defrag-max-scan-fields",
    "active-defrag-threshold-lower",
    "active-defrag-threshold-upper",
    "active-expire-effort",
    "activedefrag",
    "activerehashing",
    "aof-disable-auto-gc",
    "aof-rewrite-incremental-fsync",
    "aof-timestamp-enabled",
    "bind-source-addr",
    "cluster-allow-pubsubshard-when-down",
    "cluster-allow-reads-when-down",
    "cluster-allow-replica-migration",
    "cluster-announce-bus-port",
    "cluster-announce-hostname",
    "cluster-announce-ip",
    "cluster-announce-port",
    "cluster-announce-tls-port",
    "cluster-config-file",
    "cluster-enabled",
    "cluster-link-sendbuf-limit",
    "cluster-migration-barrier",
    "cluster-node-timeout",
    "cluster-port",
    "cluster-preferred-endpoint-type",
    "cluster-replica-no-failover",
    "cluster-replica-validity-factor",
    "cluster-require-full-coverage",
    "cluster-slave-no-failover",
    "cluster-slave-validity-factor",
    "crash-log-enabled",
    "crash-memcheck-enabled",
    "dynamic-hz",
    "enable-module-command",
    "ignore-warnings",
    "io-threads",
    "io-threads-do-reads",
    "jemalloc-bg-thread",
    "lazyfree-lazy-eviction",
    "lazyfree-lazy-expire",
    "lazyfree-lazy-server-del",
    "maxmemory-clients",
    "no-appendfsync-on-rewrite",
    "propagation-error-behavior",
    "rdb-del-sync-files",
    "rdb-save-incremental-fsync",
    "repl-disable-tcp-nodelay",
    "repl-diskless-sync-max-replicas",
    "replica-announced",
    "replica-ignore-disk-write-errors",
    "replica-lazy-flush",
    "sanitize-dump-payload",
    "shutdown-timeout",
    "slave-lazy-flush",
    "socket-mark-id",
    "stop-writes-on-bgsave-error",
    "syslog-enabled",
    "syslog-facility",
    "syslog-ident",
    "unixsocket",
    "unixsocketperm",
    "use-exit-on-panic",
    "watchdog-period",
];

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    #[test]
    fn splits_as_sdssplitargs() {
        assert_eq!(split_args("save 900 1").unwrap(), s(&["save", "900", "1"]));
        assert_eq!(split_args("logfile ''").unwrap(), s(&["logfile", ""]));
        assert_eq!(split_args(r#"a "b c" 'd e'"#).unwrap(), s(&["a", "b c", "d e"]));
        assert_eq!(split_args(r#""\x41\n\"" 'it\'s'"#).unwrap(), s(&["A\n\"", "it's"]));
        assert_eq!(split_args(r#"x"y z""#).unwrap(), s(&["xy z"]));
        assert_eq!(split_args("  \t "), Some(vec![]));
        assert_eq!(split_args(r#""open"#), None);
        assert_eq!(split_args(r#""a"b"#), None);
        assert_eq!(split_args("'a'b"), None);
    }

    #[test]
    fn repr_reads_back() {
        for v in ["", "plain", "a b", "q\"uote", "back\\slash", "\x01\n\t"] {
            assert_eq!(split_args(&repr(v)).unwrap(), vec![v.to_string()]);
            assert_eq!(split_args(&word(v)).unwrap(), vec![v.to_string()]);
        }
        assert_eq!(word("3600"), "3600");
        assert_eq!(word(""), "\"\"");
    }

    #[test]
    fn parses_lines_with_numbers_and_errors() {
        let text = "# comment\n\nport 6599\nSAVE \"\"\r\n  bind 127.0.0.1 -::1\n";
        let ds = parse_text(text, None).unwrap();
        assert_eq!(ds.len(), 3);
        assert_eq!((ds[0].name.as_str(), ds[0].line), ("port", 3));
        assert_eq!((ds[1].name.as_str(), ds[1].args.clone()), ("save", s(&[""])));
        assert_eq!(ds[2].args, s(&["127.0.0.1", "-::1"]));
        let err = parse_text("port 1\nlogfile \"x\n", None).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "\n*** FATAL CONFIG FILE ERROR (Redis {REDIS_VERSION}) ***\nReading the configuration file, at line 2\n>>> 'logfile \"x'\nUnbalanced quotes in configuration line"
            )
        );
    }

    #[test]
    fn includes_files_and_globs() {
        let dir = std::env::temp_dir().join(format!("ringdb-include-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("conf.d")).unwrap();
        std::fs::write(dir.join("conf.d/b.conf"), "hz 20\n").unwrap();
        std::fs::write(dir.join("conf.d/a.conf"), "hz 15\n").unwrap();
        std::fs::write(
            dir.join("self.conf"),
            format!("include {}\n", dir.join("self.conf").display()),
        )
        .unwrap();
        let main = dir.join("redis.conf");
        std::fs::write(
            &main,
            format!(
                "port 1\ninclude {}/conf.d/*.conf\ninclude {}/none/*.conf\n",
                dir.display(),
                dir.display()
            ),
        )
        .unwrap();
        let ds = read_file(&main).unwrap();
        let names: Vec<String> = ds.iter().map(|d| d.text.clone()).collect();
        assert_eq!(names, s(&["port 1", "hz 15", "hz 20"]));
        assert_eq!(ds[2].line, 1);
        assert!(read_file(&dir.join("self.conf")).unwrap_err().message.contains("too deep"));
        assert!(read_file(&dir.join("missing.conf")).unwrap_err().message.contains("can't open"));
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn command_line_as_redis_server() {
        let ds = command_line(&s(&["--port", "7000", "--save", "--loglevel", "verbose"]));
        let got: Vec<(String, Vec<String>)> = ds.into_iter().map(|d| (d.name, d.args)).collect();
        assert_eq!(
            got,
            vec![
                ("port".into(), s(&["7000"])),
                ("save".into(), s(&[""])),
                ("loglevel".into(), s(&["verbose"]))
            ]
        );
        let ds = command_line(&s(&[
            "--save",
            "3600",
            "1",
            "300",
            "100",
            "--logfile",
            "",
            "--port 7001",
        ]));
        assert_eq!(ds[0].args, s(&["3600", "1", "300", "100"]));
        assert_eq!(ds[1].args, s(&[""]));
        assert_eq!((ds[2].name.as_str(), ds[2].args.clone()), ("port", s(&["7001"])));
        // A name with no value yet takes the next word, `--` or not.
        let ds = command_line(&s(&["--requirepass", "--secret--"]));
        assert_eq!(ds[0].args, s(&["--secret--"]));
        let ds = command_line(&s(&["--replicaof", "--127.0.0.1", "--abc"]));
        assert_eq!(ds[0].text, "replicaof \"--127.0.0.1\"");
        assert_eq!((ds[1].name.as_str(), ds[1].args.len()), ("abc", 0));
        // Leading words without `--` are a directive too.
        let ds = command_line(&s(&["loglevel", "verbose", "--maxmemory '700mb'"]));
        assert_eq!((ds[0].name.as_str(), ds[0].args.clone()), ("loglevel", s(&["verbose"])));
        assert_eq!((ds[1].name.as_str(), ds[1].args.clone()), ("maxmemory", s(&["700mb"])));
    }

    #[test]
    fn tells_toml_from_redis_conf() {
        assert!(looks_like_toml("# c\nport = 7000\n"));
        assert!(looks_like_toml("[section]\n"));
        assert!(!looks_like_toml("# c\nport 7000\n"));
        assert!(!looks_like_toml("requirepass a=b\n"));
        assert!(!looks_like_toml(""));
    }
}
