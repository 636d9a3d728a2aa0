//! The process title `ps` and `top` show, as Redis sets it
//! (`set-proc-title`, `proc-title-template`): ringdb writes the expanded
//! template over its own command line, the one memory `/proc/<pid>/cmdline`
//! reads.
//!
//! The command line and, after it, the environment strings are one block
//! at the top of the initial stack. [`init`] (in `main`, before any thread
//! exists) moves the environment to the heap, so the whole block can hold
//! the title, as Redis's `spt_init` does. After `init`, `std::env::args`
//! no longer reads the original arguments: take them before.

use crate::config::Config;
use std::sync::{Mutex, OnceLock};

/// Redis's default template.
pub const DEFAULT_TEMPLATE: &str = "{title} {listen-addr} {server-mode}";

/// The writable block: start address and length.
static AREA: Mutex<Option<(usize, usize)>> = Mutex::new(None);

/// argv[0], taken before the block is written over.
static ARG0: OnceLock<String> = OnceLock::new();

/// What the template's variables stand for.
pub struct Vars<'a> {
    /// argv[0], as the process was started.
    pub title: &'a str,
    pub bind: &'a [String],
    pub port: u16,
    pub tls_port: u16,
    pub config_file: Option<&'a str>,
    /// `[cluster]` or `[sentinel]`, or empty.
    pub server_mode: &'a str,
}

impl Vars<'_> {
    fn get(&self, name: &str) -> Option<String> {
        Some(match name {
            "title" => self.title.to_string(),
            // As Redis: the TLS port when there is no plain one.
            "listen-addr" => {
                let port = if self.port != 0 { self.port } else { self.tls_port };
                format!("{}:{}", self.bind.first().map_or("*", String::as_str), port)
            }
            "server-mode" => self.server_mode.to_string(),
            "config-file" => self.config_file.unwrap_or("-").to_string(),
            "port" => self.port.to_string(),
            "tls-port" => self.tls_port.to_string(),
            // ringdb has no unix socket yet.
            "unixsocket" => String::new(),
            _ => return None,
        })
    }
}

/// The template with its `{variables}` replaced (`{{` is a `{`), trimmed of
/// spaces; `None` for an unknown variable or an unclosed brace (Redis's
/// `sdstemplate`).
pub fn expand(template: &str, vars: &Vars) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let after = &rest[open + 1..];
        if let Some(quoted) = after.strip_prefix('{') {
            out.push('{');
            rest = quoted;
            continue;
        }
        let close = after.find('}')?;
        out.push_str(&vars.get(&after[..close])?);
        rest = &after[close + 1..];
    }
    out.push_str(rest);
    Some(out.trim_matches(' ').to_string())
}

/// Whether CONFIG SET may take `template` (Redis's text otherwise).
pub fn validate(template: &str) -> Result<(), String> {
    let vars =
        Vars { title: "", bind: &[], port: 0, tls_port: 0, config_file: None, server_mode: "" };
    match expand(template, &vars) {
        Some(title) if !title.is_empty() => Ok(()),
        _ => Err("template format is invalid or contains unknown variables".into()),
    }
}

/// Finds the command line's block and moves the environment out of it.
/// Must run before any other thread exists (it rewrites `environ`).
pub fn init() {
    let arg0 = std::env::args_os().next().unwrap_or_default();
    let _ = ARG0.set(arg0.to_string_lossy().into_owned());
    let Some((start, end)) = command_line_block() else { return };
    let vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
    // SAFETY: single-threaded (see above). clearenv drops the pointers into
    // the block; setenv copies every variable onto the heap.
    unsafe {
        libc::clearenv();
        for (name, value) in &vars {
            std::env::set_var(name, value);
        }
    }
    *AREA.lock().unwrap_or_else(|e| e.into_inner()) = Some((start, end - start));
}

/// Sets the title from `config` (`set-proc-title`, `proc-title-template`)
/// for a server listening on `port`.
pub fn refresh(config: &Config, port: u16) {
    if config.get("set-proc-title") != Some("yes") {
        return;
    }
    let bind = config.bind();
    let config_file = config
        .file
        .as_ref()
        .map(|f| std::path::absolute(f).unwrap_or_else(|_| f.clone()).display().to_string());
    let vars = Vars {
        title: ARG0.get().map_or("ringdb", String::as_str),
        bind: &bind,
        port,
        tls_port: config.int("tls-port").clamp(0, u16::MAX as i64) as u16,
        config_file: config_file.as_deref(),
        server_mode: "",
    };
    let template = config.get("proc-title-template").unwrap_or(DEFAULT_TEMPLATE);
    if let Some(title) = expand(template, &vars) {
        set(&title);
    }
}

/// Writes `title` over the command line (cut to fit it).
fn set(title: &str) {
    let area = AREA.lock().unwrap_or_else(|e| e.into_inner());
    let Some((start, len)) = *area else { return };
    let bytes = title.as_bytes();
    let n = bytes.len().min(len - 1);
    // SAFETY: [start, start+len) is this process's own argument and
    // environment block, which nothing reads any more (see `init`); the
    // lock keeps two writers apart.
    unsafe {
        let base = start as *mut u8;
        std::ptr::write_bytes(base, 0, len);
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), base, n);
    }
}

/// `arg_start` and `env_end` of `/proc/self/stat`: the block holding the
/// argument and environment strings.
fn command_line_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name, which is in parentheses and may hold
    // spaces; the first of them is field 3.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<usize>().ok();
    let (start, end) = (field(48)?, field(51)?);
    (start != 0 && end > start + 1).then_some((start, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars() -> Vars<'static> {
        static BIND: [String; 0] = [];
        Vars {
            title: "/bin/ringdb",
            bind: &BIND,
            port: 6379,
            tls_port: 0,
            config_file: None,
            server_mode: "",
        }
    }

    #[test]
    fn expands_as_redis() {
        assert_eq!(expand(DEFAULT_TEMPLATE, &vars()).unwrap(), "/bin/ringdb *:6379");
        assert_eq!(
            expand("T {title} {port} {tls-port} {config-file} {{x}", &vars()).unwrap(),
            "T /bin/ringdb 6379 0 - {x}"
        );
        let tls_only = Vars { port: 0, tls_port: 6380, ..vars() };
        assert_eq!(expand("{listen-addr} {tls-port}", &tls_only).unwrap(), "*:6380 6380");
        assert_eq!(expand("{nosuch}", &vars()), None);
        assert_eq!(expand("{title", &vars()), None);
        assert!(validate("{invalid-var}").is_err());
        assert!(validate("   ").is_err());
        assert!(validate("--my--title--template").is_ok());
    }
}
