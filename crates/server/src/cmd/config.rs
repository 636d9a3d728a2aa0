//! The CONFIG container: GET, SET, RESETSTAT, REWRITE, HELP, with Redis 7's
//! semantics (config.c): GET takes several names or glob patterns and
//! replies with one map; SET takes several pairs and is all or nothing.
//!
//! Every core keeps its own copy of the configuration, so SET validates all
//! pairs against this core's copy first and then applies the same pairs on
//! every core (`invoke_on_all` → [`Core::apply_config`]). Applying pairs
//! rather than a whole copy means two concurrent SETs of different settings
//! from different cores cannot undo each other.

use crate::config::settings::find;
use crate::config::Config;
use crate::net::connection::Connection;
use crate::node::Core;
use bytes::Bytes;
use ringdb_engine::command::args::text;
use ringdb_engine::command::error::SYNTAX;
use ringdb_engine::command::{CmdError, CmdResult};

/// CONFIG GET parameter [parameter ...]: a map of every setting named or
/// matched, each once.
pub async fn get(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let found = matching(&conn.core.config.borrow(), &args[2..]);
    let mut out = conn.reply();
    out.map(found.len());
    for found in &found {
        out.bulk(found.shown.as_bytes());
        out.bulk(found.value.as_bytes());
    }
    Ok(())
}

/// One setting CONFIG GET reports.
#[derive(Debug)]
struct Found {
    name: &'static str,
    /// As Redis replies: the name as the client wrote it when asked for by
    /// name, the setting's own name when matched by a pattern.
    shown: String,
    value: String,
}

/// The settings `patterns` name (exactly, any case) or match (globs), in the
/// order found, each once.
fn matching(config: &Config, patterns: &[Bytes]) -> Vec<Found> {
    let mut found: Vec<Found> = Vec::new();
    for pattern in patterns {
        let is_glob = pattern.iter().any(|c| matches!(c, b'*' | b'?' | b'['));
        let hits: Vec<Found> = if is_glob {
            config
                .matching(pattern)
                .into_iter()
                .map(|(s, v)| Found {
                    name: s.name,
                    shown: s.name.to_string(),
                    value: v.to_string(),
                })
                .collect()
        } else {
            let shown = text(pattern);
            find(&shown)
                .and_then(|s| {
                    config.get(s.name).map(|v| Found { name: s.name, shown, value: v.to_string() })
                })
                .into_iter()
                .collect()
        };
        for hit in hits {
            if !found.iter().any(|f| f.name == hit.name) {
                found.push(hit);
            }
        }
    }
    found
}

/// Checks every pair of CONFIG SET against `config` and returns the pairs
/// with canonical names, or Redis's error for the first problem: an unknown
/// name wins over everything, then an immutable or duplicate setting, then
/// the first value that cannot be used.
/// `local`: the client is on a loopback address (protected settings);
/// `loading`: the node is loading its data.
fn validate(
    config: &Config,
    pairs: &[Bytes],
    local: bool,
    loading: bool,
) -> Result<Vec<(&'static str, String)>, CmdError> {
    // A setting of where the data is cannot change while it loads, and
    // that error comes first (clients may retry on it), as in Redis.
    if loading
        && pairs
            .chunks(2)
            .any(|p| find(&String::from_utf8_lossy(&p[0])).is_some_and(|s| s.deny_loading))
    {
        return Err(crate::loading::LOADING);
    }
    let mut checked: Vec<(&'static str, String)> = Vec::with_capacity(pairs.len() / 2);
    let mut first_problem: Option<CmdError> = None;
    for pair in pairs.chunks(2) {
        let (name, value) = (&pair[0], &pair[1]);
        let Some(setting) = find(&String::from_utf8_lossy(name)) else {
            return Err(CmdError::owned(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                text(name)
            )));
        };
        if first_problem.is_some() {
            continue;
        }
        if !setting.mutable && !config.keeps_own(setting, &String::from_utf8_lossy(value)) {
            first_problem = Some(set_failed(&text(name), "can't set immutable config"));
        } else if setting.protected && !config.allows("enable-protected-configs", local) {
            first_problem = Some(set_failed(&text(name), "can't set protected config"));
        } else if checked.iter().any(|(n, _)| *n == setting.name) {
            first_problem = Some(set_failed(&text(name), "duplicate parameter"));
        }
        let Ok(value) = std::str::from_utf8(value) else {
            first_problem
                .get_or_insert(set_failed(setting.name, "argument must be valid UTF-8 text"));
            continue;
        };
        checked.push((setting.name, value.to_string()));
    }
    if let Some(problem) = first_problem {
        return Err(problem);
    }
    let mut trial = config.clone();
    for (name, value) in &checked {
        trial.set(name, value).map_err(|reason| set_failed(name, &reason))?;
    }
    Ok(checked)
}

fn set_failed(name: &str, reason: &str) -> CmdError {
    CmdError::owned(format!(
        "ERR CONFIG SET failed (possibly related to argument '{name}') - {reason}"
    ))
}

/// What a change applies to the process itself, once, before the cores take
/// it (so that a failure leaves the configuration as it was): the OOM
/// score, then the process title.
fn apply_to_process(core: &Core, pairs: &[(&'static str, String)]) -> CmdResult {
    let changes = |prefix: &str| pairs.iter().find(|(n, _)| n.starts_with(prefix));
    let mut next = core.config.borrow().clone();
    for (n, value) in pairs {
        let _ = next.set(n, value);
    }
    if let Some((name, _)) = changes("oom-score-adj") {
        let (mode, value) = next.oom_score();
        crate::process::apply_oom_score(mode, value).map_err(|e| set_failed(name, &e))?;
    }
    if changes("proc-title-template").is_some() || changes("tls-port").is_some() {
        crate::proctitle::refresh(&next, core.shared.port);
    }
    // As Redis's `updateRequirePass`: the default user's password.
    if changes("requirepass").is_some() {
        core.shared.acl.set_default_password(next.requirepass().map(str::as_bytes));
    }
    if changes("acllog-max-len").is_some() {
        core.shared.acl.set_log_max_len(next.int("acllog-max-len").max(0) as usize);
    }
    Ok(())
}

/// New listening sockets, one set per shard, when the pairs change `bind`,
/// `port` or `tls-port`; made before anything changes, so that a failure
/// is Redis's error and leaves the server listening where it did.
fn rebind(core: &Core, pairs: &[(&'static str, String)]) -> Result<Option<Sockets>, CmdError> {
    let current = core.config.borrow();
    let next = changed(&current, pairs);
    let ports_changed =
        next.port() != current.port() || next.int("tls-port") != current.int("tls-port");
    if !ports_changed && next.bind() == current.bind() {
        return Ok(None);
    }
    match crate::net::listener::rebind(&next, &current, core.shared.shards()) {
        Ok(per_shard) => Ok(Some(per_shard.into_iter().map(Some).collect())),
        Err((name, e)) => {
            tracing::warn!("Failed to bind: {e}");
            Err(match ports_changed {
                true => set_failed(name, "Unable to listen on this port. Check server logs."),
                false => set_failed("bind", "Failed to bind to specified addresses."),
            })
        }
    }
}

/// `current` with the pairs applied (validated already).
fn changed(current: &Config, pairs: &[(&'static str, String)]) -> Config {
    let mut next = current.clone();
    for (n, value) in pairs {
        let _ = next.set(n, value);
    }
    next
}

/// Rebuilds what new TLS handshakes use when the pairs change a `tls-*`
/// setting it is made of (certificates are read again: CONFIG SET of the
/// same file name reloads a renewed one), as Redis's `applyTlsCfg`; a
/// `tls-port` alone only needs TLS set up once. Existing connections keep
/// their sessions.
fn reconfigure_tls(core: &Core, pairs: &[(&'static str, String)]) -> CmdResult {
    let is_tls = |n: &str| n.starts_with("tls-") && n != "tls-auth-clients";
    let Some((name, _)) = pairs.iter().find(|(n, _)| is_tls(n)) else { return Ok(()) };
    let only_port = pairs.iter().all(|(n, _)| !is_tls(n) || *n == "tls-port");
    if only_port && crate::net::tls::configured() {
        return Ok(());
    }
    let next = changed(&core.config.borrow(), pairs);
    crate::net::tls::configure(&next).map_err(|_| set_failed(name, crate::net::tls::UPDATE_FAILED))
}

/// Each shard's new listening sockets, taken by its core.
type Sockets = Vec<Option<Vec<crate::net::listener::Listening>>>;

/// Applies already validated pairs to one core's copy.
fn apply(core: &Core, pairs: &[(&'static str, String)]) {
    let mut config = core.config.borrow().clone();
    for (name, value) in pairs {
        // Validated against an identical copy: this cannot fail.
        let _ = config.set(name, value);
    }
    core.apply_config(config);
}

/// CONFIG SET parameter value [parameter value ...]: all or nothing, on
/// every core.
pub async fn set(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if !args.len().is_multiple_of(2) {
        return Err(SYNTAX);
    }
    let pairs = validate(
        &conn.core.config.borrow(),
        &args[2..],
        conn.is_local(),
        conn.core.shared.loading.active(),
    )?;
    // The sockets first: a port or address that cannot be had leaves
    // everything else as it was (the OOM score included).
    let sockets = rebind(&conn.core, &pairs)?;
    reconfigure_tls(&conn.core, &pairs)?;
    apply_to_process(&conn.core, &pairs)?;
    conn.core.invoke_on_all(move |core| apply(core, &pairs)).await?;
    if let Some(sockets) = sockets {
        let sockets = std::sync::Arc::new(std::sync::Mutex::new(sockets));
        conn.core
            .invoke_on_all(move |core| {
                let mine = sockets.lock().ok().and_then(|mut s| s[core.id.index()].take());
                if let (Some(fds), Some(accepting)) = (mine, core.accepting.borrow().as_ref()) {
                    accepting.replace(fds);
                }
            })
            .await?;
    }
    conn.reply().ok();
    Ok(())
}

/// CONFIG RESETSTAT: every shard's statistics, and the memory peak.
pub async fn resetstat(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    conn.core
        .invoke_on_all(|core| {
            let mut shard = core.shard.borrow_mut();
            shard.state.stats.reset();
            shard.state.latency.reset_commands();
            shard.state.hotkeys.reset_stats();
            core.push.borrow_mut().limit_disconnections = 0;
        })
        .await?;
    crate::memory::reset_peak();
    ringdb_engine::lazyfree::reset_stats();
    conn.reply().ok();
    Ok(())
}

/// CONFIG REWRITE: the current values into the file the server started
/// with.
pub async fn rewrite(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let config = conn.core.config.borrow().clone();
    if config.file.is_none() {
        return Err(CmdError::new("ERR The server is running without a config file"));
    }
    match config.rewrite(false) {
        Ok(()) => {
            tracing::info!("CONFIG REWRITE executed with success.");
            conn.reply().ok();
            Ok(())
        }
        Err(e) => {
            tracing::warn!("CONFIG REWRITE failed: {e}");
            Err(CmdError::owned(format!("ERR Rewriting config file: {e}")))
        }
    }
}

const HELP: &[&str] = &[
    "GET <pattern>",
    "    Return parameters matching the glob-like <pattern> and their values.",
    "SET <directive> <value>",
    "    Set the configuration <directive> to <value>.",
    "RESETSTAT",
    "    Reset statistics reported by the INFO command.",
    "REWRITE",
    "    Rewrite the configuration file.",
];

pub async fn help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::cmd::help(conn, args, HELP);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    fn err(s: &str) -> String {
        validate(&Config::default(), &args(s), true, false)
            .err()
            .map(|e| e.text().to_string())
            .unwrap_or_default()
    }

    #[test]
    fn set_errors_as_redis() {
        assert_eq!(
            err("foo 1"),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        assert_eq!(
            err("databases 1 foo 1"),
            "ERR Unknown option or number of arguments for CONFIG SET - 'foo'"
        );
        assert_eq!(
            err("hz abc"),
            "ERR CONFIG SET failed (possibly related to argument 'hz') - argument couldn't be parsed into an integer"
        );
        assert_eq!(
            err("HZ 10 hz 11"),
            "ERR CONFIG SET failed (possibly related to argument 'hz') - duplicate parameter"
        );
        assert_eq!(
            err("Databases 3"),
            "ERR CONFIG SET failed (possibly related to argument 'Databases') - can't set immutable config"
        );
        let ok =
            validate(&Config::default(), &args("HZ 20 maxmemory-policy ALLKEYS-LFU"), true, false)
                .unwrap_or_default();
        assert_eq!(
            ok,
            vec![("hz", "20".to_string()), ("maxmemory-policy", "ALLKEYS-LFU".to_string())]
        );
    }

    #[test]
    fn while_loading_the_data_settings_of_where_it_is_answer_loading_first() {
        let loading = |s: &str| {
            validate(&Config::default(), &args(s), true, true).err().map(|e| e.text().to_string())
        };
        let text = Some("LOADING Redis is loading the dataset in memory".to_string());
        assert_eq!(loading("dir /tmp"), text);
        assert_eq!(loading("foo 1 appendonly yes"), text);
        assert_eq!(loading("loglevel debug"), None);
    }

    #[test]
    fn get_matches_names_and_globs_once() {
        let config = Config::default();
        let found = matching(&config, &args("HZ h* port nosuch"));
        let names: Vec<&str> = found.iter().map(|f| f.shown.as_str()).collect();
        assert_eq!(
            names,
            vec![
                "HZ",
                "hash-max-listpack-entries",
                "hash-max-listpack-value",
                "hll-sparse-max-bytes",
                "hotkeys-rules",
                "hotkeys-max-keys",
                "hotkeys-replicate-reads",
                "port"
            ]
        );
        assert_eq!(found[0].value, "10");
        let all = matching(&config, &args("*"));
        // Every setting but the hidden ones.
        let shown = crate::config::settings::SETTINGS.iter().filter(|s| !s.hidden).count();
        assert_eq!(all.len(), shown);
    }
}
