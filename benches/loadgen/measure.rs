//! What a run measures and how it is reported: the clock that timestamps
//! payloads, the measurement window, per-thread tallies, CPU time, and the
//! CSV line that `benches/report.py` reads.
//!
//! Every run has a warm-up (connections busy, nothing counted) followed by
//! the measured window; an operation counts if it completes inside the
//! window, so the rate is operations completed per second of window.

use crate::histogram::Histogram;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

static EPOCH: OnceLock<Instant> = OnceLock::new();

/// Nanoseconds since the process's first call: the timestamps written into
/// payloads, which only this process reads back, so a monotonic clock
/// shared by its threads is all that is needed.
pub fn now_ns() -> u64 {
    EPOCH.get_or_init(Instant::now).elapsed().as_nanos() as u64
}

/// The measured part of a run, in `now_ns` time.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub from: u64,
    pub to: u64,
}

impl Window {
    /// A window starting after `warmup` from now and lasting `length`.
    pub fn after(warmup: Duration, length: Duration) -> Window {
        let from = now_ns() + warmup.as_nanos() as u64;
        Window { from, to: from + length.as_nanos() as u64 }
    }

    pub fn contains(&self, at: u64) -> bool {
        (self.from..self.to).contains(&at)
    }

    pub fn over(&self, at: u64) -> bool {
        at >= self.to
    }

    pub fn seconds(&self) -> f64 {
        (self.to - self.from) as f64 / 1e9
    }

    /// Sleeps until `now_ns() >= at`.
    pub fn sleep_until(at: u64) {
        let now = now_ns();
        if at > now {
            std::thread::sleep(Duration::from_nanos(at - now));
        }
    }
}

/// What one thread counted: operations completed in the window and the
/// latencies of those that carry one.
#[derive(Default)]
pub struct Tally {
    pub ops: u64,
    pub latency: Histogram,
}

impl Tally {
    /// Counts `n` operations completed at `at`.
    pub fn ops(&mut self, window: &Window, at: u64, n: u64) {
        if window.contains(at) {
            self.ops += n;
        }
    }

    /// Records the latency of something started at `started` and completed
    /// at `at` (not counted as an operation).
    pub fn latency(&mut self, window: &Window, started: u64, at: u64) {
        if window.contains(at) {
            self.latency.record(at.saturating_sub(started));
        }
    }

    pub fn merge(&mut self, other: &Tally) {
        self.ops += other.ops;
        self.latency.merge(&other.latency);
    }
}

/// A small xorshift generator: keys need to be spread, not unpredictable,
/// and each client thread has its own.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        // Mixed so that consecutive seeds give unrelated sequences; never 0.
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// A number below `n` (`n` > 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Writes `<prefix><nanoseconds>` and pads it with `x` to `size` bytes: a
/// payload whose send time the receiver can read back.
pub fn stamped(prefix: &str, at: u64, size: usize) -> Vec<u8> {
    let mut payload = format!("{prefix}{at}").into_bytes();
    if payload.len() < size {
        payload.resize(size, b'x');
    }
    payload
}

/// Reads back what `stamped` wrote: the number right after `prefix`.
pub fn read_stamp(payload: &[u8], prefix: &str) -> Option<u64> {
    let rest = payload.strip_prefix(prefix.as_bytes())?;
    let digits = rest.iter().take_while(|b| b.is_ascii_digit()).count();
    std::str::from_utf8(&rest[..digits]).ok()?.parse().ok()
}

/// utime + stime of a process, all its threads, in seconds.
pub fn cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: count after its ')'.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    // SAFETY: sysconf only reads a configuration value.
    let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    (per_second > 0).then(|| ticks as f64 / per_second as f64)
}

/// How a run ended.
#[derive(Debug, Clone, PartialEq)]
pub enum Status {
    Ok,
    /// The server does not have a command the scenario needs.
    NotSupported(String),
    Failed(String),
}

impl Status {
    pub fn text(&self) -> String {
        match self {
            Status::Ok => "ok".into(),
            Status::NotSupported(why) => format!("not supported: {}", why.trim()),
            Status::Failed(why) => format!("error: {}", why.trim()),
        }
    }
}

/// One run's result: one CSV line.
pub struct Outcome {
    pub scenario: &'static str,
    pub variant: String,
    /// What `ops` counts, e.g. "transactions".
    pub unit: &'static str,
    pub tally: Tally,
    pub seconds: f64,
    pub server_cpu: Option<f64>,
    pub client_cpu: Option<f64>,
    pub status: Status,
}

pub const CSV_HEADER: &str = "scenario,variant,unit,ops,seconds,rate,p50_ms,p99_ms,max_ms,samples,\
                              server_cpu_s,client_cpu_s,status";

fn ms(ns: u64) -> String {
    format!("{:.3}", ns as f64 / 1e6)
}

fn quoted(text: &str) -> String {
    format!("\"{}\"", text.replace('"', "\"\"").replace(['\r', '\n'], " "))
}

fn optional(value: Option<f64>) -> String {
    value.map(|v| format!("{v:.2}")).unwrap_or_default()
}

impl Outcome {
    pub fn rate(&self) -> f64 {
        if self.seconds > 0.0 {
            self.tally.ops as f64 / self.seconds
        } else {
            0.0
        }
    }

    pub fn csv(&self) -> String {
        let latency = &self.tally.latency;
        [
            self.scenario.to_string(),
            quoted(&self.variant),
            self.unit.to_string(),
            self.tally.ops.to_string(),
            format!("{:.3}", self.seconds),
            format!("{:.1}", self.rate()),
            ms(latency.quantile(0.50)),
            ms(latency.quantile(0.99)),
            ms(latency.max()),
            latency.count().to_string(),
            optional(self.server_cpu),
            optional(self.client_cpu),
            quoted(&self.status.text()),
        ]
        .join(",")
    }

    /// A line for people, on stderr.
    pub fn summary(&self) -> String {
        let latency = &self.tally.latency;
        format!(
            "{} [{}]: {:.0} {}/s, p50 {} ms, p99 {} ms, max {} ms ({} samples); {}",
            self.scenario,
            self.variant,
            self.rate(),
            self.unit,
            ms(latency.quantile(0.50)),
            ms(latency.quantile(0.99)),
            ms(latency.max()),
            latency.count(),
            self.status.text()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_read_back() {
        let payload = stamped("7:", 123_456_789, 32);
        assert_eq!(payload.len(), 32);
        assert_eq!(read_stamp(&payload, "7:"), Some(123_456_789));
        assert_eq!(read_stamp(b"8:1", "7:"), None);
        assert_eq!(read_stamp(b"7:", "7:"), None);
        assert_eq!(stamped("", 42, 0), b"42");
    }

    #[test]
    fn window_counts_only_inside() {
        let window = Window { from: 100, to: 200 };
        let mut tally = Tally::default();
        tally.ops(&window, 99, 1);
        tally.ops(&window, 100, 2);
        tally.ops(&window, 200, 4);
        tally.latency(&window, 150, 199);
        tally.latency(&window, 150, 250);
        assert_eq!(tally.ops, 2);
        assert_eq!(tally.latency.count(), 1);
        assert_eq!(tally.latency.max(), 49);
    }

    #[test]
    fn csv_quotes_and_counts() {
        let mut tally = Tally { ops: 50, ..Tally::default() };
        tally.latency.record(2_000_000);
        let outcome = Outcome {
            scenario: "multi",
            variant: "keys=tagged \"x\"".into(),
            unit: "transactions",
            tally,
            seconds: 2.0,
            server_cpu: Some(1.5),
            client_cpu: None,
            status: Status::Failed("a,\nb".into()),
        };
        let line = outcome.csv();
        assert_eq!(
            line,
            "multi,\"keys=tagged \"\"x\"\"\",transactions,50,2.000,25.0,2.000,2.000,2.000,1,1.50,,\
             \"error: a, b\""
        );
        assert_eq!(line.matches(',').count(), CSV_HEADER.matches(',').count() + 1);
    }

    #[test]
    fn rng_stays_below() {
        let mut rng = Rng::new(0);
        assert!((0..1000).all(|_| rng.below(7) < 7));
        assert_ne!(Rng::new(1).next(), Rng::new(2).next());
    }

    #[test]
    fn reads_own_cpu_time() {
        assert!(cpu_seconds(std::process::id()).is_some());
        assert_eq!(cpu_seconds(u32::MAX), None);
    }
}
