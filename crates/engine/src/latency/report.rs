//! The texts LATENCY GRAPH and LATENCY DOCTOR write, as Redis writes them
//! (latency.c and sparkline.c).

use super::{Events, Series};
use std::fmt::Write;

/// Width of a graph (Redis's `LATENCY_GRAPH_COLS`) and its height in rows.
const COLUMNS: usize = 80;
const ROWS: usize = 4;

/// LATENCY GRAPH: a header with the high and low of the samples kept and
/// the worst ever, then the samples as a filled sparkline, labelled with
/// how long ago each happened.
pub fn graph(event: &str, series: &Series, now_secs: u64) -> String {
    let samples: Vec<(f64, String)> = series
        .samples
        .iter()
        .map(|&(secs, ms)| (ms as f64, ago(now_secs.saturating_sub(secs))))
        .collect();
    let high = series.samples.iter().map(|s| s.1).max().unwrap_or(0);
    let low = series.samples.iter().map(|s| s.1).min().unwrap_or(0);
    let mut out =
        format!("{event} - high {high} ms, low {low} ms (all time high {} ms)\n", series.max);
    out.push_str(&"-".repeat(COLUMNS));
    out.push('\n');
    // sparkline.c's min/max: a value is a new max only if it is not a new
    // min (its `else if`).
    let (mut min, mut max) = (0.0, 0.0);
    for (i, (v, _)) in samples.iter().enumerate() {
        if i == 0 {
            (min, max) = (*v, *v);
        } else if *v < min {
            min = *v;
        } else if *v > max {
            max = *v;
        }
    }
    for (i, chunk) in samples.chunks(COLUMNS).enumerate() {
        if i != 0 {
            out.push('\n');
        }
        sparkline(&mut out, chunk, min, max);
    }
    out
}

/// "12s", "3m", "5h", "2d" ago.
fn ago(secs: u64) -> String {
    match secs {
        s if s < 60 => format!("{s}s"),
        s if s < 3600 => format!("{}m", s / 60),
        s if s < 86_400 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// sparkline.c's `sparklineRenderRange` with `SPARKLINE_FILL`: ROWS rows
/// of `_o#` (and `|` below the top), a blank row, then the labels written
/// downwards one character per row.
fn sparkline(out: &mut String, samples: &[(f64, String)], min: f64, max: f64) {
    const FILL: &[u8] = b"_o#";
    let steps = (FILL.len() * ROWS) as f64;
    let relmax = if max - min == 0.0 { 1.0 } else { max - min };
    let step_of = |v: f64| (((v - min) * steps) / relmax).clamp(0.0, steps - 1.0) as i64;
    let mut row = 0;
    loop {
        let mut chars = vec![b' '; samples.len()];
        let mut more = false;
        for (j, (value, label)) in samples.iter().enumerate() {
            if row < ROWS {
                more = true;
                let idx = step_of(*value) - ((ROWS - row - 1) * FILL.len()) as i64;
                if (0..FILL.len() as i64).contains(&idx) {
                    chars[j] = FILL[idx as usize];
                } else if idx >= FILL.len() as i64 {
                    chars[j] = b'|';
                }
            } else if row == ROWS {
                // The blank row between the graph and its labels.
                more = true;
                break;
            } else if let Some(&c) = label.as_bytes().get(row - ROWS - 1) {
                more = true;
                chars[j] = c;
            }
        }
        if !more {
            return;
        }
        if row == ROWS {
            chars.fill(b' ');
        }
        row += 1;
        out.push_str(&String::from_utf8_lossy(&chars));
        out.push('\n');
    }
}

/// What LATENCY DOCTOR needs besides the events.
pub struct DoctorContext {
    pub threshold_ms: u64,
    pub slowlog_slower_than_us: i64,
    pub hz: u64,
    pub now_secs: u64,
}

/// LATENCY DOCTOR: Redis's report on the events (count, average, mean
/// deviation, period, worst) and its advice for the kinds of events seen.
pub fn doctor(events: &Events, ctx: &DoctorContext) -> String {
    if events.by_name.is_empty() && ctx.threshold_ms == 0 {
        return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in order to enable it. If we weren't in a deep space mission I'd suggest to take a look at https://redis.io/topics/latency-monitor.\n".into();
    }
    let mut out = String::new();
    let mut advice = Advice::default();
    for (n, (name, series)) in events.by_name.iter().enumerate() {
        if n == 0 {
            out.push_str("Dave, I have observed latency spikes in this Redis instance. You don't mind talking about it, do you Dave?\n\n");
        }
        let samples = series.samples.len() as u64;
        let avg = series.samples.iter().map(|s| s.1).sum::<u64>() / samples.max(1);
        let mad = series.samples.iter().map(|s| s.1.abs_diff(avg)).sum::<u64>() / samples.max(1);
        let oldest = series.samples.iter().map(|s| s.0).min().unwrap_or(ctx.now_secs);
        let period = ctx.now_secs.saturating_sub(oldest).max(1);
        let _ = writeln!(
            out,
            "{}. {name}: {samples} latency spikes (average {avg}ms, mean deviation {mad}ms, period {:.2} sec). Worst all time event {}ms.",
            n + 1,
            period as f64 / samples.max(1) as f64,
            series.max
        );
        advice.note(name, ctx);
    }
    match (events.by_name.is_empty(), advice.count) {
        (true, 0) => out.push_str("Dave, no latency spike was observed during the lifetime of this Redis instance, not in the slightest bit. I honestly think you ought to sit down calmly, take a stress pill, and think things over.\n"),
        (false, 0) => out.push_str("\nWhile there are latency events logged, I'm not able to suggest any easy fix. Please use the Redis community to get some help, providing this report in your help request.\n"),
        _ => advice.write(&mut out, ctx),
    }
    out
}

#[derive(Default)]
struct Advice {
    count: usize,
    slowlog_enable: bool,
    slowlog_tune: bool,
    slowlog_inspect: bool,
    scheduler: bool,
    hz: bool,
    large_objects: bool,
    mass_eviction: bool,
}

impl Advice {
    fn note(&mut self, event: &str, ctx: &DoctorContext) {
        match event {
            "command" => {
                if ctx.slowlog_slower_than_us < 0 {
                    self.slowlog_enable = true;
                    self.count += 1;
                } else if (ctx.slowlog_slower_than_us / 1000) as u64 > ctx.threshold_ms {
                    self.slowlog_tune = true;
                    self.count += 1;
                }
                self.slowlog_inspect = true;
                self.large_objects = true;
                self.count += 2;
            }
            "fast-command" => {
                self.scheduler = true;
                self.count += 1;
            }
            "expire-cycle" => {
                self.hz = true;
                self.large_objects = true;
                self.count += 2;
            }
            "eviction-cycle" => {
                self.mass_eviction = true;
                self.count += 1;
            }
            _ => {}
        }
    }

    fn write(&self, out: &mut String, ctx: &DoctorContext) {
        let threshold_us = ctx.threshold_ms * 1000;
        out.push_str("\nI have a few advices for you:\n\n");
        if self.slowlog_enable {
            let _ = writeln!(out, "- There are latency issues with potentially slow commands you are using. Try to enable the Slow Log Redis feature using the command 'CONFIG SET slowlog-log-slower-than {threshold_us}'. If the Slow log is disabled Redis is not able to log slow commands execution for you.");
        }
        if self.slowlog_tune {
            let _ = writeln!(out, "- Your current Slow Log configuration only logs events that are slower than your configured latency monitor threshold. Please use 'CONFIG SET slowlog-log-slower-than {threshold_us}'.");
        }
        if self.slowlog_inspect {
            out.push_str("- Check your Slow Log to understand what are the commands you are running which are too slow to execute. Please check https://redis.io/commands/slowlog for more information.\n");
        }
        if self.scheduler {
            out.push_str("- The system is slow to execute Redis code paths not containing system calls. This usually means the system does not provide Redis CPU time to run for long periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / VM just for Redis if you are running other software in the same system.\n  3) Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, if you are using Jemalloc. However this may create fragmentation problems.\n");
        }
        if self.hz && ctx.hz < 100 {
            out.push_str("- In order to make the Redis keys expiring process more incremental, try to set the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n");
        }
        if self.large_objects {
            out.push_str("- Deleting, expiring or evicting (because of maxmemory policy) large objects is a blocking operation. If you have very large objects that are often deleted, expired, or evicted, try to fragment those objects into multiple smaller objects.\n");
        }
        if self.mass_eviction {
            out.push_str("- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of large objects via sets or sorted sets intersections, STORE option of SORT, Redis Cluster large keys migrations (RESTORE command), may create sudden memory pressure forcing the server to block trying to evict keys. \n");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_is_redis_sparkline() {
        let mut series = Series::default();
        for (secs, ms) in [(100, 300), (101, 400), (103, 500)] {
            series.add(secs, ms);
        }
        let g = graph("command", &series, 110);
        let expected = "command - high 500 ms, low 300 ms (all time high 500 ms)\n".to_string()
            + &"-".repeat(80)
            + "\n  #\n _|\n ||\n_||\n   \n197\n0ss\ns  \n";
        assert_eq!(g, expected);
    }

    #[test]
    fn doctor_reports_events_and_advice() {
        let ctx = DoctorContext {
            threshold_ms: 100,
            slowlog_slower_than_us: 10_000,
            hz: 10,
            now_secs: 200,
        };
        let off = DoctorContext { threshold_ms: 0, ..ctx };
        assert!(doctor(&Events::default(), &off).starts_with("I'm sorry, Dave"));
        assert!(doctor(&Events::default(), &ctx).starts_with("Dave, no latency spike"));
        let mut events = Events::default();
        let series = events.by_name.entry("command").or_default();
        series.add(100, 300);
        series.add(150, 500);
        let report = doctor(&events, &ctx);
        assert!(report.contains("1. command: 2 latency spikes (average 400ms, mean deviation 100ms, period 50.00 sec). Worst all time event 500ms.\n"), "{report}");
        assert!(report.contains("- Check your Slow Log"), "{report}");
    }
}
