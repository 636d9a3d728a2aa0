//! Logging through `tracing`, with Redis's `loglevel` names, to standard
//! output or `logfile`, changeable at run time by CONFIG SET loglevel.

use std::sync::OnceLock;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;
use tracing_subscriber::{fmt, reload, EnvFilter, Registry};

static LEVEL: OnceLock<reload::Handle<EnvFilter, Registry>> = OnceLock::new();

/// Redis's level names as `tracing` filters.
fn filter_for(loglevel: &str) -> EnvFilter {
    if let Ok(filter) = EnvFilter::try_from_env("RINGDB_LOG") {
        return filter;
    }
    EnvFilter::new(match loglevel {
        "debug" => "debug",
        "verbose" | "notice" => "info",
        "warning" => "warn",
        _ => "off",
    })
}

/// Installs the global subscriber. `logfile` empty = standard output.
pub fn init(loglevel: &str, logfile: &str) -> Result<(), String> {
    let (filter, handle) = reload::Layer::new(filter_for(loglevel));
    let registry = tracing_subscriber::registry().with(filter);
    if logfile.is_empty() {
        registry.with(fmt::layer().with_target(false)).init();
    } else {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(logfile)
            .map_err(|e| format!("cannot open logfile {logfile}: {e}"))?;
        // Log lines are rare and never on the request path, so a plain
        // locked file writer is fine here.
        registry
            .with(
                fmt::layer()
                    .with_target(false)
                    .with_ansi(false)
                    .with_writer(std::sync::Mutex::new(file)),
            )
            .init();
    }
    let _ = LEVEL.set(handle);
    Ok(())
}

/// CONFIG SET loglevel.
pub fn set_level(loglevel: &str) {
    if let Some(handle) = LEVEL.get() {
        let _ = handle.reload(filter_for(loglevel));
    }
}
