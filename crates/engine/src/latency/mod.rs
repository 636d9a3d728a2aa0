//! Latency: what LATENCY and INFO latencystats report.
//!
//! Two records, kept per shard and merged by the server when asked (as
//! INFO sums command statistics):
//! - per-command histograms of how long each call ran, Redis 7's
//!   `latency-tracking` ([`CommandLatency`]): HDR histograms with Redis's
//!   bounds (1 ns to 1 s, 2 significant digits), read back with Redis's
//!   percentile rule and its power-of-two CDF ([`percentile_usec`],
//!   [`cdf_usec`]);
//! - the latency monitor's events (`latency-monitor-threshold`,
//!   [`Events`]): per event, one sample per second (the worst), the last
//!   160 seconds that had one, and the worst ever. Events: `command` and
//!   `fast-command` (a call that ran at least the threshold),
//!   `expire-cycle` and `eviction-cycle`.
//!
//! Recording is one counter increment per call (a plain array for calls
//! under 32 µs, folded into the command's histogram when it is read; the
//! histogram is allocated on the command's first call) and one comparison
//! for the monitor; reading merges the shards' copies.

pub mod report;

use hdrhistogram::Histogram;
use std::collections::{BTreeMap, VecDeque};

/// Redis's `LATENCY_HISTOGRAM_MIN_VALUE` / `_MAX_VALUE` (ns) and precision.
const LOWEST_NS: u64 = 1;
const HIGHEST_NS: u64 = 1_000_000_000;
const SIGNIFICANT_DIGITS: u8 = 2;
/// Samples an event keeps (Redis's `LATENCY_TS_LEN`).
pub const EVENT_SAMPLES: usize = 160;

/// `latency-tracking` and `latency-monitor-threshold`.
#[derive(Clone, Copy, Debug, Default)]
pub struct LatencySettings {
    /// Keep per-command histograms.
    pub tracking: bool,
    /// Record monitor events of at least this many milliseconds (0: off).
    pub monitor_threshold_ms: u64,
}

/// One histogram per command row, by row id.
#[derive(Clone, Debug, Default)]
pub struct CommandLatency {
    by_id: Vec<Option<Box<Recorded>>>,
}

/// Calls under [`FAST_USEC`] microseconds (nearly all of them) are counted
/// in a plain array, a cheaper increment than the histogram's, and moved
/// into the histogram when it is read ([`Latency::commands`]).
const FAST_USEC: usize = 32;

#[derive(Clone, Debug)]
struct Recorded {
    fast: [u64; FAST_USEC],
    histogram: Histogram<u64>,
}

impl CommandLatency {
    /// Records one call of row `id` that ran `usec` microseconds (Redis
    /// records nanoseconds of a microsecond clock: a call under one
    /// microsecond counts as 1 ns).
    pub fn record(&mut self, id: usize, usec: u64) {
        if self.by_id.len() <= id {
            self.by_id.resize(id + 1, None);
        }
        let recorded = self.by_id[id].get_or_insert_with(|| {
            Box::new(Recorded {
                fast: [0; FAST_USEC],
                // Valid constant bounds.
                histogram: Histogram::new_with_bounds(LOWEST_NS, HIGHEST_NS, SIGNIFICANT_DIGITS)
                    .expect("valid histogram bounds"),
            })
        });
        match recorded.fast.get_mut(usec as usize) {
            Some(count) => *count += 1,
            None => recorded.histogram.saturating_record(nanos(usec)),
        }
    }

    /// Moves the plain counts into the histograms.
    fn fold(&mut self) {
        for recorded in self.by_id.iter_mut().flatten() {
            for (usec, count) in recorded.fast.iter_mut().enumerate() {
                if *count > 0 {
                    recorded.histogram.saturating_record_n(nanos(usec as u64), *count);
                    *count = 0;
                }
            }
        }
    }

    /// Adds `other`'s calls into these (the server merges the shards').
    pub fn add(&mut self, other: &CommandLatency) {
        for (id, theirs) in other.by_id.iter().enumerate() {
            let Some(theirs) = theirs else { continue };
            if self.by_id.len() <= id {
                self.by_id.resize(id + 1, None);
            }
            match &mut self.by_id[id] {
                Some(mine) => {
                    // Same bounds on both sides: adding cannot fail.
                    let _ = mine.histogram.add(&theirs.histogram);
                    mine.fast.iter_mut().zip(theirs.fast).for_each(|(m, t)| *m += t);
                }
                mine => *mine = Some(theirs.clone()),
            }
        }
    }

    /// The histogram of row `id`, if it has had a call (of a record read
    /// through [`Latency::commands`], which folds the plain counts in).
    pub fn get(&self, id: usize) -> Option<&Histogram<u64>> {
        Some(&self.by_id.get(id)?.as_ref()?.histogram)
    }
}

fn nanos(usec: u64) -> u64 {
    usec.saturating_mul(1000).clamp(LOWEST_NS, HIGHEST_NS)
}

/// The buckets of `h` in value order: (lowest value, highest equivalent
/// value, count), in nanoseconds.
fn buckets(h: &Histogram<u64>) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
    h.iter_all().map(move |v| {
        let highest = v.value_iterated_to();
        (h.lowest_equivalent(highest), highest, v.count_at_value())
    })
}

/// The value at `percentile` (0–100) in microseconds, as Redis's INFO
/// latencystats computes it (`hdr_value_at_percentile`: the count rounded
/// to nearest, the bucket's highest equivalent value).
pub fn percentile_usec(h: &Histogram<u64>, percentile: f64) -> f64 {
    let wanted = ((percentile.min(100.0) / 100.0) * h.len() as f64 + 0.5) as u64;
    let wanted = wanted.max(1);
    let mut total = 0;
    for (lowest, highest, count) in buckets(h) {
        total += count;
        if total >= wanted {
            let value = if percentile == 0.0 { lowest } else { highest };
            return value as f64 / 1000.0;
        }
    }
    0.0
}

/// LATENCY HISTOGRAM's `histogram_usec`: (microseconds, calls at or below)
/// at every power of two from 1,024 ns where the count grew, as Redis
/// walks `hdr_iter_log_init(h, 1024, 2)`: a level is reported at the first
/// bucket that reaches it, with that bucket's highest value.
pub fn cdf_usec(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let (mut level, mut cumulative, mut reported) = (1024u64, 0u64, 0u64);
    let mut last_highest = 0;
    for (lowest, highest, count) in buckets(h) {
        cumulative += count;
        last_highest = highest;
        while lowest >= h.lowest_equivalent(level) {
            if cumulative > reported {
                out.push((highest / 1000, cumulative));
                reported = cumulative;
            }
            level = level.saturating_mul(2);
        }
        if reported == h.len() {
            break;
        }
    }
    // Calls past the last level the range reaches (over half a second).
    if cumulative > reported {
        out.push((last_highest / 1000, cumulative));
    }
    out
}

/// One monitor event: a sample per second it happened in, the worst of
/// that second, oldest first; and the worst ever.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Series {
    /// (unix seconds, milliseconds).
    pub samples: VecDeque<(u64, u64)>,
    pub max: u64,
}

impl Series {
    fn add(&mut self, unix_secs: u64, ms: u64) {
        self.max = self.max.max(ms);
        match self.samples.back_mut() {
            Some((secs, worst)) if *secs == unix_secs => *worst = (*worst).max(ms),
            _ => {
                self.samples.push_back((unix_secs, ms));
                if self.samples.len() > EVENT_SAMPLES {
                    self.samples.pop_front();
                }
            }
        }
    }

    /// Merges another shard's series of the same event: one sample per
    /// second over both, the newest [`EVENT_SAMPLES`].
    fn merge(&mut self, other: &Series) {
        let mut by_second: BTreeMap<u64, u64> = self.samples.iter().copied().collect();
        for &(secs, ms) in &other.samples {
            let worst = by_second.entry(secs).or_default();
            *worst = (*worst).max(ms);
        }
        let skip = by_second.len().saturating_sub(EVENT_SAMPLES);
        self.samples = by_second.into_iter().skip(skip).collect();
        self.max = self.max.max(other.max);
    }
}

/// The latency monitor's events of a shard (or, merged, of the process).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Events {
    pub by_name: BTreeMap<&'static str, Series>,
}

impl Events {
    /// Records `ms` for `event` if the monitor is on and it reaches the
    /// threshold (Redis's `latencyAddSampleIfNeeded`).
    pub fn add_if_needed(&mut self, threshold_ms: u64, event: &'static str, ms: u64) {
        if threshold_ms > 0 && ms >= threshold_ms {
            self.by_name.entry(event).or_default().add(crate::shard::now_ms() / 1000, ms);
        }
    }

    pub fn merge(&mut self, other: &Events) {
        for (name, series) in &other.by_name {
            self.by_name.entry(name).or_default().merge(series);
        }
    }

    /// Forgets the named events (all with none named; names are exact, as
    /// Redis's event table's); returns those it had.
    pub fn reset(&mut self, names: &[&[u8]]) -> Vec<&'static str> {
        let gone: Vec<&'static str> = self
            .by_name
            .keys()
            .copied()
            .filter(|name| names.is_empty() || names.contains(&name.as_bytes()))
            .collect();
        gone.iter().for_each(|name| drop(self.by_name.remove(name)));
        gone
    }
}

/// What a shard records: both of the above.
#[derive(Clone, Debug, Default)]
pub struct Latency {
    commands: CommandLatency,
    pub events: Events,
}

impl Latency {
    /// Records a call of row `id` (`fast`: a FAST command, whose monitor
    /// event is `fast-command`).
    pub fn record_call(&mut self, settings: LatencySettings, id: usize, fast: bool, usec: u64) {
        if settings.tracking {
            self.commands.record(id, usec);
        }
        let event = if fast { "fast-command" } else { "command" };
        self.events.add_if_needed(settings.monitor_threshold_ms, event, usec / 1000);
    }

    /// The histograms, with every finished call in them.
    pub fn commands(&mut self) -> &CommandLatency {
        self.commands.fold();
        &self.commands
    }

    /// CONFIG RESETSTAT.
    pub fn reset_commands(&mut self) {
        self.commands = CommandLatency::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn histogram(usecs: &[u64]) -> Histogram<u64> {
        let mut c = CommandLatency::default();
        usecs.iter().for_each(|&u| c.record(3, u));
        c.fold();
        c.get(3).unwrap().clone()
    }

    #[test]
    fn cdf_and_percentiles_match_redis() {
        // Read off redis-server 7.0.15: 19,025 SETs at 1 µs … its
        // histogram_usec labels are 1, 2, 4, 8, 16, 33, 66.
        let mut usecs = vec![1; 19_025];
        usecs.extend([2; 778].iter().chain(&[4; 123]).chain(&[7; 42]).chain(&[15; 14]));
        usecs.extend([30; 16].iter().chain(&[60; 2]));
        let h = histogram(&usecs);
        assert_eq!(
            cdf_usec(&h),
            [
                (1, 19_025),
                (2, 19_803),
                (4, 19_926),
                (8, 19_968),
                (16, 19_982),
                (33, 19_998),
                (66, 20_000)
            ]
        );
        assert_eq!(format!("{:.3}", percentile_usec(&h, 50.0)), "1.003");
        assert_eq!(format!("{:.3}", percentile_usec(&h, 99.0)), "2.007");
        // Calls under a microsecond are 1 ns.
        let fast = histogram(&[0, 0, 3]);
        assert_eq!(format!("{:.3}", percentile_usec(&fast, 50.0)), "0.001");
        assert_eq!(cdf_usec(&fast), [(1, 2), (4, 3)]);
        // Redis rounds the count to nearest: 1,090 calls, p99 is the
        // 1,079th (ceil would take the 1,080th).
        let mut usecs = vec![1; 1079];
        usecs.extend([500; 11]);
        assert_eq!(format!("{:.3}", percentile_usec(&histogram(&usecs), 99.0)), "1.003");
    }

    #[test]
    fn histograms_merge() {
        let mut a = CommandLatency::default();
        let mut b = CommandLatency::default();
        a.record(1, 5);
        b.record(1, 500);
        b.record(2, 9);
        a.add(&b);
        a.fold();
        assert_eq!(a.get(1).unwrap().len(), 2);
        assert_eq!(a.get(2).unwrap().len(), 1);
        assert!(a.get(0).is_none() && a.get(7).is_none());
    }

    #[test]
    fn events_keep_the_worst_per_second_and_merge() {
        let mut s = Series::default();
        s.add(10, 5);
        s.add(10, 9);
        s.add(10, 7);
        s.add(11, 3);
        assert_eq!(s.samples, [(10, 9), (11, 3)]);
        assert_eq!(s.max, 9);
        let mut other = Series::default();
        other.add(11, 8);
        other.add(12, 1);
        s.merge(&other);
        assert_eq!(s.samples, [(10, 9), (11, 8), (12, 1)]);
        for secs in 100..400 {
            s.add(secs, 1);
        }
        assert_eq!(s.samples.len(), EVENT_SAMPLES);
        assert_eq!(s.samples.back(), Some(&(399, 1)));

        let mut events = Events::default();
        events.add_if_needed(0, "command", 100);
        assert!(events.by_name.is_empty(), "threshold 0: the monitor is off");
        events.add_if_needed(10, "command", 9);
        assert!(events.by_name.is_empty());
        events.add_if_needed(10, "command", 10);
        events.add_if_needed(10, "expire-cycle", 12);
        assert!(events.reset(&[b"nosuch", b"COMMAND"]).is_empty());
        assert_eq!(events.reset(&[b"command"]), ["command"]);
        assert_eq!(events.reset(&[]), ["expire-cycle"]);
    }
}
