//! Logging through `tracing`, with Redis's `loglevel` names, to standard
//! output or `logfile`, changeable at run time by CONFIG SET loglevel.
//! Lines look like Redis's (`pid:M 02 Dec 2026 04:00:00.123 * message`), so
//! that log watchers and Redis's own test suite read them as Redis's.

use std::fmt::Write as _;
use std::sync::OnceLock;
use tracing::{Event, Level, Subscriber};
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::registry::LookupSpan;
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
        registry.with(fmt::layer().with_ansi(false).event_format(RedisFormat)).init();
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
                    .with_ansi(false)
                    .event_format(RedisFormat)
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

/// The role letter of log lines: `M` for a primary, `S` for a replica.
static ROLE: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(b'M');

/// Log lines say this node is a replica (or a primary again).
pub fn set_replica(replica: bool) {
    ROLE.store(if replica { b'S' } else { b'M' }, std::sync::atomic::Ordering::Relaxed);
}

/// Redis's log line: `pid:role day month year time.ms level-mark message`,
/// the mark `.` debug, `-` verbose, `*` notice, `#` warning.
struct RedisFormat;

impl<S, N> FormatEvent<S, N> for RedisFormat
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> std::fmt::Result {
        let mark = match *event.metadata().level() {
            Level::TRACE | Level::DEBUG => '.',
            Level::INFO => '*',
            Level::WARN | Level::ERROR => '#',
        };
        let role = char::from(ROLE.load(std::sync::atomic::Ordering::Relaxed));
        write!(writer, "{}:{role} {} {mark} ", std::process::id(), local_time())?;
        ctx.field_format().format_fields(writer.by_ref(), event)?;
        writeln!(writer)
    }
}

/// `02 Dec 2026 04:00:00.123` in local time, as Redis writes it.
fn local_time() -> String {
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = now.as_secs() as libc::time_t;
    // SAFETY: localtime_r fills the local struct and keeps no pointer.
    let tm = unsafe {
        let mut tm: libc::tm = std::mem::zeroed();
        libc::localtime_r(&secs, &mut tm);
        tm
    };
    const MONTHS: [&str; 12] =
        ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];
    let mut out = String::with_capacity(24);
    let _ = write!(
        out,
        "{:02} {} {} {:02}:{:02}:{:02}.{:03}",
        tm.tm_mday,
        MONTHS[tm.tm_mon.clamp(0, 11) as usize],
        tm.tm_year + 1900,
        tm.tm_hour,
        tm.tm_min,
        tm.tm_sec,
        now.subsec_millis()
    );
    out
}

/// The start-up banner, with the port and the process id, as Redis's logo
/// shows them (scripts and Redis's test suite look for ` PID: `).
pub fn banner(version: &str, redis_version: &str, port: u16, shards: usize) -> String {
    format!(
        "\n    ringdb {version} (Redis {redis_version} compatible) {bits} bit\n\
         \x20   Running mode=standalone, shards={shards}\n\
         \x20   Port: {port}\n\
         \x20   PID: {pid}\n",
        bits = usize::BITS,
        pid = std::process::id()
    )
}
