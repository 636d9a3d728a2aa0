//! loadgen: a RESP load generator for what redis-benchmark cannot measure
//! (transactions, EVALSHA, Pub/Sub fan-out, reactive watch pushes, blocking
//! pops, consumer groups), run side by side against ringdb and redis-server
//! by `benches/load.sh`.
//!
//! ```text
//! cargo bench --bench loadgen -- <scenario> [--port P] [--seconds S] [options]
//! cargo bench --bench loadgen -- help <scenario>
//! ```
//!
//! Each run prints one CSV line on stdout (`--header` adds the header):
//! operations per second in the measured window, p50/p99/max latency,
//! server and client CPU seconds, and a status that is `ok`, `not
//! supported: <error>` (the server lacks a command the scenario needs) or
//! `error: <what went wrong>`. A summary for people goes to stderr.
//!
//! Layout (in `benches/loadgen/`): `resp` (encoding, reply parser), `conn`
//! (blocking connection), `reactor` (epoll loop over many connections),
//! `flow` (credit between senders and receivers), `histogram`, `measure`
//! (window, tallies, CSV), `run` (the set-up/measure shape), one module per
//! scenario, and `cli`. Their unit tests run through `tests/loadgen_units.rs`
//! (`cargo test --test loadgen_units`): this target has no test harness.

// `cargo check`/`clippy` build a harness-less bench with `--cfg test` but
// without `--test`: the `#[cfg(test)]` modules compile while their `#[test]`
// functions are dropped, so their imports and helpers would look unused.
#![cfg_attr(test, allow(unused_imports, dead_code))]

#[path = "loadgen/blpop.rs"]
mod blpop;
#[path = "loadgen/cli.rs"]
mod cli;
#[path = "loadgen/conn.rs"]
mod conn;
#[path = "loadgen/evalsha.rs"]
mod evalsha;
#[path = "loadgen/flow.rs"]
mod flow;
#[path = "loadgen/histogram.rs"]
mod histogram;
#[path = "loadgen/measure.rs"]
mod measure;
#[path = "loadgen/multi.rs"]
mod multi;
#[path = "loadgen/publish.rs"]
mod publish;
#[path = "loadgen/reactor.rs"]
mod reactor;
#[path = "loadgen/resp.rs"]
mod resp;
#[path = "loadgen/run.rs"]
mod run;
#[path = "loadgen/watch.rs"]
mod watch;
#[path = "loadgen/xreadgroup.rs"]
mod xreadgroup;

use cli::{Plan, Scenario};
use measure::{Outcome, Status, CSV_HEADER};
use std::process::ExitCode;

/// Runs the scenario a plan names.
fn execute(plan: &Plan) -> Outcome {
    let common = &plan.common;
    match &plan.scenario {
        Scenario::Multi(o) => multi::run(common, o),
        Scenario::Evalsha(o) => evalsha::run(common, o),
        Scenario::Publish(o) => publish::run(common, o),
        Scenario::Watch(o) => watch::run(common, o),
        Scenario::Blpop(o) => blpop::run(common, o),
        Scenario::XReadGroup(o) => xreadgroup::run(common, o),
    }
}

/// 1000 subscribers need more descriptors than a default soft limit of
/// 1024 leaves room for: raise it to the hard limit.
fn raise_open_file_limit() {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write one rlimit we own.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur < limit.rlim_max
        {
            limit.rlim_cur = limit.rlim_max;
            libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
        }
    }
}

fn main() -> ExitCode {
    let plan = match cli::parse(std::env::args().skip(1)) {
        Ok(plan) => plan,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { ExitCode::from(2) } else { ExitCode::SUCCESS };
        }
    };
    raise_open_file_limit();
    let outcome = execute(&plan);
    if plan.header {
        println!("{CSV_HEADER}");
    }
    println!("{}", outcome.csv());
    eprintln!("{}", outcome.summary());
    // "not supported" is an answer, not a failure of the tool.
    match outcome.status {
        Status::Failed(_) => ExitCode::FAILURE,
        Status::Ok | Status::NotSupported(_) => ExitCode::SUCCESS,
    }
}
