//! The shape every scenario shares: set up connections (failing early and
//! cleanly when the server lacks a command), then run the sessions and the
//! paced senders through a warm-up and a measured window while this thread
//! samples CPU time at the window's edges, then turn it into an [`Outcome`].

use crate::conn::Target;
use crate::measure::{cpu_seconds, Outcome, Status, Tally, Window};
use crate::reactor::{self, Attached};
use crate::resp::Reply;
use std::thread;
use std::time::Duration;

/// Settings every scenario has.
#[derive(Clone, Debug)]
pub struct Common {
    pub target: Target,
    pub warmup: Duration,
    pub seconds: Duration,
    /// Event-loop threads for the connections that receive.
    pub threads: usize,
    /// The server's process, to measure its CPU time in the window.
    pub server_pid: Option<u32>,
    /// Random keys are drawn from this many.
    pub keyspace: u64,
}

/// Why a scenario could not run.
#[derive(Debug)]
pub enum Failure {
    NotSupported(String),
    Error(String),
}

impl From<String> for Failure {
    fn from(e: String) -> Failure {
        Failure::Error(e)
    }
}

/// A reply to a probe: an unknown-command error means the scenario does not
/// apply to this server; any other error is a failure.
pub fn supported(reply: Reply, what: &str) -> Result<Reply, Failure> {
    if reply.is_unknown_command() {
        return Err(Failure::NotSupported(reply.error_text().unwrap_or_default()));
    }
    match reply.error_text() {
        Some(e) => Err(Failure::Error(format!("{what}: {e}"))),
        None => Ok(reply),
    }
}

/// A thread that sends at its own pace until the window ends.
pub type Sender = Box<dyn FnOnce(Window) -> Result<(), String> + Send>;

/// A scenario ready to run.
#[derive(Default)]
pub struct Setup {
    pub connections: Vec<Attached>,
    pub senders: Vec<Sender>,
}

struct Measured {
    tally: Tally,
    seconds: f64,
    server_cpu: Option<f64>,
    client_cpu: Option<f64>,
}

/// Prepares and measures one scenario.
pub fn finish(
    scenario: &'static str,
    variant: String,
    unit: &'static str,
    common: &Common,
    prepare: impl FnOnce() -> Result<Setup, Failure>,
) -> Outcome {
    let mut outcome = Outcome {
        scenario,
        variant,
        unit,
        tally: Tally::default(),
        seconds: 0.0,
        server_cpu: None,
        client_cpu: None,
        status: Status::Ok,
    };
    match prepare() {
        Err(Failure::NotSupported(why)) => outcome.status = Status::NotSupported(why),
        Err(Failure::Error(why)) => outcome.status = Status::Failed(why),
        Ok(setup) => match measure(common, setup) {
            Ok(measured) => {
                outcome.tally = measured.tally;
                outcome.seconds = measured.seconds;
                outcome.server_cpu = measured.server_cpu;
                outcome.client_cpu = measured.client_cpu;
            }
            Err(why) => outcome.status = Status::Failed(why),
        },
    }
    outcome
}

fn measure(common: &Common, setup: Setup) -> Result<Measured, String> {
    let window = Window::after(common.warmup, common.seconds);
    let senders: Vec<_> =
        setup.senders.into_iter().map(|send| thread::spawn(move || send(window))).collect();
    let (connections, threads) = (setup.connections, common.threads);
    let receivers = thread::spawn(move || reactor::run(connections, threads, window));

    let cpu = |pid: Option<u32>| pid.and_then(cpu_seconds);
    let me = Some(std::process::id());
    Window::sleep_until(window.from);
    let (server_before, client_before) = (cpu(common.server_pid), cpu(me));
    Window::sleep_until(window.to);
    let (server_after, client_after) = (cpu(common.server_pid), cpu(me));

    let mut first_error = None;
    for sender in senders {
        let result = sender.join().unwrap_or_else(|_| Err("a sender panicked".into()));
        if let Err(e) = result {
            first_error = first_error.or(Some(e));
        }
    }
    // An event loop's error comes first: when receivers fail, senders
    // only stall after them.
    let tally = match receivers.join() {
        Ok(Ok(tally)) => tally,
        Ok(Err(e)) => return Err(e),
        Err(_) => return Err("the event loops panicked".into()),
    };
    if let Some(e) = first_error {
        return Err(e);
    }
    let spent = |before: Option<f64>, after: Option<f64>| Some(after? - before?);
    Ok(Measured {
        tally,
        seconds: window.seconds(),
        server_cpu: spent(server_before, server_after),
        client_cpu: spent(client_before, client_after),
    })
}
