//! hop: one cross-core request and its reply, as the mesh (`src/mesh.rs`)
//! makes it: a boxed job sent over a bounded flume queue to a glommio
//! executor on another CPU, which runs it and answers over a one-shot flume
//! channel. Both executors are built as ringdb builds a shard's (no
//! registered I/O memory, no poll ring). Measured twice: executors that
//! park as soon as they are idle, so that a hop pays the wake-up of a
//! sleeping peer each way, and executors that spin 50 us first (a busy
//! peer, which takes the job without sleeping).
//!
//! ```text
//! cargo bench --bench hop
//! ```
//!
//! criterion reports nanoseconds per hop (request out, reply back, one at a
//! time). After each, the bench runs 20,000 hops once more and prints the
//! voluntary context switches per hop, from `/proc/self/status`, which is
//! how often a side went to sleep and had to be woken.
//!
//! Syscalls per hop: `HOP_ONLY=parking` (or `spinning`) runs 100,000 hops
//! of one kind without criterion, to be counted from outside:
//!
//! ```text
//! HOP_ONLY=parking perf stat -e raw_syscalls:sys_enter target/release/deps/hop-<hash>
//! ```

use criterion::{criterion_group, Criterion};
use glommio::{LocalExecutorBuilder, Placement};
use std::time::{Duration, Instant};

/// A job as the mesh carries it.
type Job = Box<dyn FnOnce() + Send>;

/// What the asking executor is told to do: `n` hops, then say how long
/// they took.
struct Round {
    hops: u64,
    done: std::sync::mpsc::Sender<Duration>,
}

/// Two executors, on CPUs 0 and 1 where there are two (unbound otherwise).
struct Pair {
    rounds: flume::Sender<Round>,
}

fn placement(cpu: usize) -> Placement {
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > cpu {
        Placement::Fixed(cpu)
    } else {
        Placement::Unbound
    }
}

/// `spin`: how long an idle executor polls before it parks (ringdb's
/// `spin-before-park` on the glommio backend).
fn executor(name: &str, cpu: usize, spin: Duration) -> LocalExecutorBuilder {
    let builder = LocalExecutorBuilder::new(placement(cpu))
        .name(name)
        .io_memory(0)
        .ring_depth(128)
        .poll_ring(false);
    if spin.is_zero() {
        builder
    } else {
        builder.spin_before_park(spin)
    }
}

impl Pair {
    fn start(spin: Duration) -> Pair {
        let (jobs_tx, jobs_rx) = flume::bounded::<Job>(4096);
        let (rounds_tx, rounds_rx) = flume::unbounded::<Round>();
        std::thread::spawn(move || {
            executor("hop-peer", 1, spin).make().expect("peer executor").run(async move {
                while let Ok(job) = jobs_rx.recv_async().await {
                    job();
                }
            })
        });
        std::thread::spawn(move || {
            executor("hop-asker", 0, spin).make().expect("asking executor").run(async move {
                while let Ok(round) = rounds_rx.recv_async().await {
                    let start = Instant::now();
                    for i in 0..round.hops {
                        let (tx, rx) = flume::bounded(1);
                        let job: Job = Box::new(move || {
                            let _ = tx.send(i);
                        });
                        jobs_tx.send_async(job).await.expect("peer gone");
                        assert_eq!(rx.recv_async().await.expect("no reply"), i);
                    }
                    let _ = round.done.send(start.elapsed());
                }
            })
        });
        Pair { rounds: rounds_tx }
    }

    fn hops(&self, hops: u64) -> Duration {
        let (done, took) = std::sync::mpsc::channel();
        self.rounds.send(Round { hops, done }).expect("asker gone");
        took.recv().expect("asker gone")
    }
}

/// Voluntary context switches of every thread of the process so far.
fn voluntary_switches() -> u64 {
    let tasks = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
    tasks
        .filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("status")).ok())
        .filter_map(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("voluntary_ctxt_switches:")?.trim().parse::<u64>().ok()
            })
        })
        .sum()
}

/// The two ways the executors wait, by name.
const VARIANTS: [(&str, Duration); 2] =
    [("parking peers", Duration::ZERO), ("peers spinning 50us", Duration::from_micros(50))];

/// Runs `hops` hops on a fresh pair and prints their time and voluntary
/// context switches.
fn count(name: &str, spin: Duration, hops: u64) {
    let pair = Pair::start(spin);
    pair.hops(1000);
    let before = voluntary_switches();
    let took = pair.hops(hops);
    let switches = voluntary_switches() - before;
    println!(
        "{name}: {hops} hops, {:.0} ns each, {:.3} voluntary context switches per hop",
        took.as_nanos() as f64 / hops as f64,
        switches as f64 / hops as f64
    );
}

fn hop(c: &mut Criterion) {
    for (name, spin) in VARIANTS {
        let pair = Pair::start(spin);
        pair.hops(1000);
        c.bench_function(&format!("one hop and back, {name}"), |b| b.iter_custom(|n| pair.hops(n)));
        drop(pair);
        count(name, spin, 20_000);
    }
}

criterion_group!(benches, hop);

fn main() {
    // `HOP_ONLY=parking` (or `spinning`): no criterion, just 100,000 hops
    // of that kind, so that `perf stat -e raw_syscalls:sys_enter` around
    // the run counts the syscalls of a hop.
    if let Ok(only) = std::env::var("HOP_ONLY") {
        let (name, spin) = VARIANTS
            .into_iter()
            .find(|(name, _)| name.contains(only.as_str()))
            .expect("HOP_ONLY: parking or spinning");
        count(name, spin, 100_000);
        return;
    }
    benches();
    Criterion::default().configure_from_args().final_summary();
}
