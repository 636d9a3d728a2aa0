//! Runs the unit tests of the load generator (`benches/loadgen/*.rs`, each
//! module's tests beside its code). Its bench target is a program with its
//! own arguments and no test harness, so `cargo test` reaches those tests
//! here: this crate compiles the same modules under the same names (they
//! refer to one another as `crate::…`), without the program's `main`.

// Without `main`, most of the generator is unused in this crate.
#![allow(dead_code)]

#[path = "../benches/loadgen/blpop.rs"]
mod blpop;
#[path = "../benches/loadgen/cli.rs"]
mod cli;
#[path = "../benches/loadgen/conn.rs"]
mod conn;
#[path = "../benches/loadgen/evalsha.rs"]
mod evalsha;
#[path = "../benches/loadgen/flow.rs"]
mod flow;
#[path = "../benches/loadgen/histogram.rs"]
mod histogram;
#[path = "../benches/loadgen/measure.rs"]
mod measure;
#[path = "../benches/loadgen/multi.rs"]
mod multi;
#[path = "../benches/loadgen/publish.rs"]
mod publish;
#[path = "../benches/loadgen/reactor.rs"]
mod reactor;
#[path = "../benches/loadgen/resp.rs"]
mod resp;
#[path = "../benches/loadgen/run.rs"]
mod run;
#[path = "../benches/loadgen/watch.rs"]
mod watch;
#[path = "../benches/loadgen/xreadgroup.rs"]
mod xreadgroup;
