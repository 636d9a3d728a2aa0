//! Scripts (EVAL, EVALSHA, FCALL and their read-only forms) on a node of
//! several shards.
//!
//! A script may touch any key, declared in KEYS or not, as in Redis, and
//! no client may see a state between two of its commands. The router
//! cannot know the keys a script will touch, so a script runs one of two
//! ways:
//!
//! - **held**: where its declared keys are, as any command (on the shard
//!   that owns them, the connection's own with none; gathered copies when
//!   they span shards). It holds that shard whole (it starts once no
//!   transaction holds a key there), so every key of it is the script's to
//!   touch. Meeting a key of another shard ends the run: the shard undoes
//!   it (`ringdb_engine::scripting::journal`) and the script runs again,
//!   the other way.
//! - **on the node**: every shard held and lent to one core, the
//!   [`HOLDER`]: each other core waits, blocked in the job that lent its
//!   shard, until the holder gives it back, and the run calls each command
//!   on the shard that owns its keys ([`ringdb_engine::lent`]). The scripts
//!   of every core that wait at that moment run under the same hold (the
//!   lenders hand theirs over with their shards). The holder first tries
//!   every whole-shard lock at once; if one is taken it lets go of all and
//!   takes them in shard order, as any cross-shard transaction does.
//!   Nothing waits in the middle of a run, so no run waits for another in
//!   a cycle. A run's changes reach the append-only logs as one cross-shard
//!   transaction, and its reply leaves once every lender has published
//!   them.
//!
//! Which way a script goes is what this core learned from its earlier runs
//! ([`Profiles`]): a script it has not seen runs on the node, and one whose
//! first run touched no undeclared key beyond its held shard runs held from
//! then on, until a held run meets another shard's key; from then on it
//! runs on the node. With one shard there is no choice to make: scripts
//! run as any command (see `route::execute`).

use super::cross::{take_in_order, AcquireStep};
use super::Target;
use crate::mesh::NO_ANSWER;
use crate::net::connection::Connection;
use crate::node::Core;
use crate::push::{Kind, PushHub};
use bytes::Bytes;
use ringdb_engine::command::CmdError;
use ringdb_engine::lent::{Lent, NodeLog};
use ringdb_engine::locks::{LockMode, LockSet, WHOLE_SHARD};
use ringdb_engine::scripting::monitor::ScriptMonitor;
use ringdb_engine::scripting::RunReport;
use ringdb_engine::shard::{Caller, Clock};
use ringdb_engine::{Shard, ShardCommand, ShardId};
use std::collections::HashMap;
use std::ptr::NonNull;
use std::rc::Rc;
use std::time::{Duration, Instant};

/// How a script has run on this core.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Profile {
    /// Its runs stay where they are held: the shard of its declared keys
    /// (or their gathered copies), or `shard` for a script with no
    /// declared key.
    Held { shard: Option<ShardId> },
    /// It touches keys beyond: it runs on the node.
    Node,
}

/// What this core learned of the scripts its clients ran, by command row
/// and script (EVAL's body, EVALSHA's SHA1, FCALL's function name).
/// Bounded: past [`MAX_PROFILES`] scripts or [`MAX_PROFILE_BYTES`] of
/// their names it starts over (a forgotten script runs on the node once).
#[derive(Default)]
pub struct Profiles {
    scripts: HashMap<(usize, Bytes), Profile>,
    bytes: usize,
}

const MAX_PROFILES: usize = 4096;
const MAX_PROFILE_BYTES: usize = 4 << 20;

impl Profiles {
    fn get(&self, key: &(usize, Bytes)) -> Option<Profile> {
        self.scripts.get(key).copied()
    }

    fn set(&mut self, key: (usize, Bytes), profile: Profile) {
        if !self.scripts.contains_key(&key) {
            if self.scripts.len() >= MAX_PROFILES || self.bytes + key.1.len() > MAX_PROFILE_BYTES {
                self.clear();
            }
            self.bytes += key.1.len();
        }
        self.scripts.insert(key, profile);
    }

    /// SCRIPT FLUSH, FUNCTION LOAD/DELETE/FLUSH/RESTORE: what was learned
    /// may no longer be the scripts'.
    pub fn clear(&mut self) {
        self.scripts = HashMap::new();
        self.bytes = 0;
    }
}

/// The profile of `command`'s script.
fn profile_key(command: &ShardCommand) -> (usize, Bytes) {
    (command.id, command.args.get(1).cloned().unwrap_or_default())
}

/// Runs a script command outside MULTI; its reply goes to `conn.out`.
pub async fn run(conn: &mut Connection, command: ShardCommand) -> Result<(), CmdError> {
    let key = profile_key(&command);
    let profile = conn.core.script_profiles.borrow().get(&key);
    if let Some(Profile::Held { shard }) = profile {
        // Where its declared keys are; a call without any where the
        // script's keys were (the same script may be called with keys).
        let mut declares = false;
        command.spec.for_each_key(&command.args, |_| declares = true);
        let target = match shard {
            Some(shard) if !declares => Target::One(shard),
            _ => super::target(conn, &command),
        };
        let report = match target {
            Target::One(shard) => run_held(conn, shard, &command).await?,
            Target::Many => super::cross::run(conn, command.clone(), false).await?,
        };
        if !report.needs_node {
            return Ok(());
        }
        conn.core.script_profiles.borrow_mut().set(key.clone(), Profile::Node);
        if !report.restart {
            // It failed where it could not be undone: its error is the reply.
            return Ok(());
        }
    }
    let report = run_on_node(conn, &command).await?;
    // Learned from a script's first run only: one that once left its
    // shard runs on the node from then on (a script whose keys come from
    // its arguments would otherwise go back and forth).
    if profile.is_none() {
        let learned = learn(conn, &command, &report);
        conn.core.script_profiles.borrow_mut().set(key, learned);
    }
    Ok(())
}

/// Runs a script command inside EXEC, which holds every shard for it
/// (`route::multi`): on the node, without taking any lock.
pub async fn run_in_exec(conn: &mut Connection, command: ShardCommand) -> Result<(), CmdError> {
    run_on_node(conn, &command).await?;
    Ok(())
}

/// How a script should run next, from what its run on the node touched:
/// held if every undeclared key it touched was on the shard it would be
/// held on (for a script without declared keys: on one shard, or none).
fn learn(conn: &Connection, command: &ShardCommand, report: &RunReport) -> Profile {
    let slot_map = conn.core.shared.slot_map;
    let mut declared = Vec::new();
    command.spec.for_each_key(&command.args, |i| {
        declared.push(slot_map.shard_of_key(&command.args[i]));
    });
    declared.sort_unstable();
    declared.dedup();
    let touched = &report.undeclared;
    match declared.as_slice() {
        [] => match touched.as_slice() {
            [] => Profile::Held { shard: Some(conn.core.id) },
            [one] => Profile::Held { shard: Some(*one) },
            _ => Profile::Node,
        },
        [home] if touched.iter().all(|s| s == home) => Profile::Held { shard: None },
        // Gathered copies hold the declared keys only.
        _ if touched.is_empty() => Profile::Held { shard: None },
        _ => Profile::Node,
    }
}

/// Runs a script held on `shard`: at once when it is this core's and no
/// transaction holds a key there, else through the shard's lock queue (a
/// batch of one), answered once its log has the run's writes. Its reply
/// goes to `conn.out`, unless the run was undone.
async fn run_held(
    conn: &mut Connection,
    shard: ShardId,
    command: &ShardCommand,
) -> Result<RunReport, CmdError> {
    if shard == conn.core.id {
        let mut local = conn.core.shard.borrow_mut();
        if local.locks.is_idle() || local.locks.may_run(&command.lock_set()) {
            let mark = conn.out.len();
            local.call(command, &mut conn.out, &mut Clock::start(), Caller::Client);
            let report = local.state.scripting.take_report();
            if report.restart {
                conn.out.truncate(mark);
                local.state.stats.undo_call(command.id);
            }
            return Ok(report);
        }
    }
    let (cmd, id) = (command.clone(), command.id);
    let (mut batch, report) = conn
        .core
        .invoke_deferred(shard, move |core, reply| {
            let notifier = core.clone();
            core.shard.borrow_mut().run_batch(
                vec![cmd],
                Box::new(move |shard, batch| {
                    let report = shard.state.scripting.take_report();
                    if report.restart {
                        shard.state.stats.undo_call(id);
                    }
                    notifier.publish_group_committed(shard);
                    notifier.after_log_sync(Box::new(move || reply.send((batch, report))));
                }),
            )
        })
        .await?;
    if !report.restart {
        conn.out.append(&mut batch.buf);
    }
    Ok(report)
}

/// Runs a script with every shard of the node lent to this core (see the
/// module doc); its reply goes to `conn.out` once every shard's log has
/// the run's changes. Outside EXEC the run waits in this core's
/// [`NodeRuns`] for the next hold of every shard (this core's, or another
/// core's that takes it along). Inside EXEC the locks are the
/// transaction's.
async fn run_on_node(conn: &mut Connection, command: &ShardCommand) -> Result<RunReport, CmdError> {
    let (out, report) = if conn.state.in_exec {
        let log = NodeLog::Exec(conn.state.exec_id);
        let mut loans: Vec<Loan> =
            borrow_shards(&conn.core, Lend::InExec).await?.into_iter().flatten().collect();
        let mut done = run_lent(&conn.core, &mut loans, std::iter::once((command, log)));
        wait_published(give_back(&conn.core, loans)).await;
        done.pop().ok_or(NO_ANSWER)?
    } else {
        let (tx, rx) = flume::bounded(1);
        conn.core.node_runs.borrow_mut().waiting.push((command.clone(), tx));
        if conn.core.id == HOLDER {
            want_hold(&conn.core);
        } else if !std::mem::replace(&mut conn.core.node_runs.borrow_mut().signaled, true) {
            conn.core.queue_job(HOLDER, Box::new(want_hold));
        }
        rx.recv_async().await.map_err(|_| NO_ANSWER)??
    };
    conn.out.extend_from_slice(&out);
    Ok(report)
}

/// Runs one script command with every shard held by this core itself
/// rather than by the [`HOLDER`], for a run that needs this core: a
/// debugging session, which talks to its client's socket from the
/// script's hook. `prepare` readies this core's shard before the run
/// (it gives the session its client). Its reply goes to `conn.out` once
/// every shard has published the run's changes.
pub async fn run_here(
    conn: &mut Connection,
    command: &ShardCommand,
    prepare: impl FnOnce(&mut Shard),
) -> Result<(), CmdError> {
    let core = conn.core.clone();
    let mut loans = hold_every_shard(&core, false).await?;
    prepare(&mut core.shard.borrow_mut());
    let log = NodeLog::Own(core.shard.borrow_mut().state.random());
    let mut done = run_lent(&core, &mut loans, std::iter::once((command, log)));
    release_here(&core, loans).await;
    let (out, _) = done.pop().ok_or(NO_ANSWER)?;
    conn.out.extend_from_slice(&out);
    Ok(())
}

/// Forks the process with every shard held by this core, so that the
/// child's copy of each shard is as it was between two commands. The
/// child runs `command` in a debugging session with the client on `fd`
/// and exits; the parent gets the child's process id once the shards are
/// given back.
pub async fn fork_here(
    conn: &mut Connection,
    command: &ShardCommand,
    fd: std::os::fd::RawFd,
) -> Result<i32, CmdError> {
    use crate::net::fd_link::FdLink;
    let core = conn.core.clone();
    let mut loans = hold_every_shard(&core, false).await?;
    // SAFETY: a fork of a process with other threads: the child runs this
    // thread alone, touches only the shards (held: their cores wait
    // outside them), its Lua state and the descriptor, with plain system
    // calls (none of the parent's rings), and exits without unwinding.
    let pid = unsafe { libc::fork() };
    if pid == 0 {
        super::debug::child_starts();
        core.shard.borrow_mut().state.scripting.debug_link = Some(Box::new(FdLink::new(fd)));
        let mut done = run_lent(&core, &mut loans, std::iter::once((command, NodeLog::Own(0))));
        let out = done.pop().map(|(out, _)| out).unwrap_or_default();
        super::debug::child_exits(&mut FdLink::new(fd), &out);
    }
    release_here(&core, loans).await;
    if pid < 0 {
        let e = std::io::Error::last_os_error();
        return Err(CmdError::owned(format!(
            "ERR Fork() failed: can't run EVAL in debugging mode: {e}"
        )));
    }
    Ok(pid)
}

/// Ends a hold [`run_here`] or [`fork_here`] took: the loans back, this
/// shard's lock released, once every shard has published.
async fn release_here(core: &Rc<Core>, loans: Vec<Loan>) {
    let published = give_back(core, loans);
    core.shard.borrow_mut().tx_release(&vec![(WHOLE_SHARD, LockMode::Exclusive)]);
    wait_published(published).await;
}

/// What a node-wide run gives its client: its reply and its report.
type NodeResult = Result<(Vec<u8>, RunReport), CmdError>;

/// A script waiting to run with every shard, and where its result goes.
type NodeRun = (ShardCommand, flume::Sender<NodeResult>);

/// The core that holds every shard for node-wide runs: the scripts of the
/// other cores wait there until it borrows their shards, and go with the
/// loans. One core holding for all means the holds never compete for the
/// shards' locks (two cores taking turns would each wait for the other).
const HOLDER: ShardId = ShardId(0);

/// The node-wide runs this core's clients are waiting for; on the
/// [`HOLDER`], whether it holds (or is taking) every shard now and whether
/// another core has runs waiting; elsewhere, whether the holder was told.
#[derive(Default)]
pub struct NodeRuns {
    waiting: Vec<NodeRun>,
    holding: bool,
    wanted: bool,
    signaled: bool,
}

/// On the [`HOLDER`]: runs wait on some core; a hold starts unless one runs.
fn want_hold(core: &Rc<Core>) {
    let start = {
        let mut runs = core.node_runs.borrow_mut();
        runs.wanted = true;
        !std::mem::replace(&mut runs.holding, true)
    };
    if start {
        glommio::spawn_local(hold_for_runs(core.clone())).detach();
    }
}

/// On the [`HOLDER`], while scripts wait anywhere: takes every shard (see
/// [`hold_every_shard`]), runs every script waiting by then, here and on
/// the cores that lent their shards (they hand theirs over with the loan),
/// and gives the shards back. The replies leave once every shard has
/// published the changes, without holding up the next round.
async fn hold_for_runs(core: Rc<Core>) {
    // Whatever happens, the next run starts a hold of its own.
    struct Done(Rc<Core>);
    impl Drop for Done {
        fn drop(&mut self) {
            let mut runs = self.0.node_runs.borrow_mut();
            runs.holding = false;
            for (_, reply) in runs.waiting.drain(..) {
                let _ = reply.send(Err(NO_ANSWER));
            }
        }
    }
    let _done = Done(core.clone());
    let whole: LockSet = vec![(WHOLE_SHARD, LockMode::Exclusive)];
    loop {
        {
            let mut runs = core.node_runs.borrow_mut();
            if runs.waiting.is_empty() && !std::mem::take(&mut runs.wanted) {
                return;
            }
        }
        // (A failure is a job that panicked: the scripts waiting fail.)
        let Ok(mut loans) = hold_every_shard(&core, true).await else { return };
        let mut runs = std::mem::take(&mut core.node_runs.borrow_mut().waiting);
        for loan in &mut loans {
            runs.append(&mut loan.runs);
        }
        let logs: Vec<NodeLog> =
            runs.iter().map(|_| NodeLog::Own(core.shard.borrow_mut().state.random())).collect();
        let results =
            run_lent(&core, &mut loans, runs.iter().map(|(command, _)| command).zip(logs));
        let published = give_back(&core, loans);
        core.shard.borrow_mut().tx_release(&whole);
        let reply = move || {
            for ((_, reply), result) in runs.into_iter().zip(results) {
                let _ = reply.send(Ok(result));
            }
        };
        // The lenders publish as soon as they have their shards back: their
        // word is usually there by now.
        if published_now(&published) {
            reply();
        } else {
            glommio::spawn_local(async move {
                wait_published(published).await;
                reply();
            })
            .detach();
        }
    }
}

/// Takes every shard's whole-shard lock and borrows the other shards.
///
/// First at once: this shard's lock if it is free, and a lend from every
/// other core that gets its lock at once (it takes it and blocks), all in
/// one round trip. Nothing waits while holding anything, so this cannot
/// deadlock; if a lock is taken, whatever was got is given back and the
/// locks are taken in shard order, waiting in each shard's queue as any
/// cross-shard transaction does, then the shards are borrowed.
///
/// `take_runs`: the lenders hand over their clients' scripts waiting for
/// such a hold, to run under this one.
async fn hold_every_shard(core: &Rc<Core>, take_runs: bool) -> Result<Vec<Loan>, CmdError> {
    let whole: LockSet = vec![(WHOLE_SHARD, LockMode::Exclusive)];
    let (try_lock, release) = match take_runs {
        true => (Lend::TryLock, Lend::Release),
        false => (Lend::TryLockAlone, Lend::ReleaseAlone),
    };
    if core.shard.borrow_mut().locks.try_acquire(&whole) {
        let tries = borrow_shards(core, try_lock).await?;
        if tries.iter().all(Option::is_some) {
            return Ok(tries.into_iter().flatten().collect());
        }
        // Given back (each lender lets go of its lock), this one too; the
        // scripts they handed over wait here.
        let mut got: Vec<Loan> = tries.into_iter().flatten().collect();
        for loan in &mut got {
            core.node_runs.borrow_mut().waiting.append(&mut loan.runs);
        }
        wait_published(give_back(core, got)).await;
        core.shard.borrow_mut().tx_release(&whole);
    }
    let steps: Vec<AcquireStep<()>> = (0..core.shared.shards())
        .map(|i| (ShardId(i as u16), whole.clone(), Box::new(|_: &mut Shard| ()) as _))
        .collect();
    take_in_order(core, steps).await?;
    match borrow_shards(core, release).await {
        Ok(loans) => Ok(loans.into_iter().flatten().collect()),
        Err(e) => {
            core.shard.borrow_mut().tx_release(&whole);
            Err(e)
        }
    }
}

/// Runs `commands` one after the other on this core with the other shards
/// `loans` lent: each reply and report.
fn run_lent<'c>(
    core: &Core,
    loans: &mut [Loan],
    commands: impl Iterator<Item = (&'c ShardCommand, NodeLog)>,
) -> Vec<(Vec<u8>, RunReport)> {
    // A PUBLISH counts the subscribers of every core (the lenders' hubs are
    // lent with their shards, read only).
    let hubs: Vec<NonNull<PushHub>> = loans.iter().map(|l| l.hub).collect();
    let own_hub = core.push.borrow();
    let receivers = |shard_channel: bool, channel: &[u8]| -> i64 {
        let kind = if shard_channel { Kind::ShardChannel } else { Kind::Channel };
        // SAFETY: as for the shards (`impl Send for Loan`): each lender is
        // blocked, touching nothing, until its loan ends, after this run.
        let lent: i64 = hubs.iter().map(|h| unsafe { h.as_ref() }.receivers(kind, channel)).sum();
        own_hub.receivers(kind, channel) + lent
    };
    let mut home = core.shard.borrow_mut();
    let home = &mut *home;
    let mut lent = Lent::new(home.id, core.shared.slot_map, loans.iter_mut().map(Loan::shard));
    lent.receivers = Some(&receivers);
    commands
        .map(|(command, log)| {
            let mut out = Vec::new();
            home.call_on_node(&mut lent, command, &mut out, log);
            (out, home.state.scripting.take_report())
        })
        .collect()
}

/// Gives the loans back and publishes this shard's changes; the receivers
/// say when each lender has published its own.
fn give_back(core: &Rc<Core>, loans: Vec<Loan>) -> Vec<flume::Receiver<()>> {
    let published = loans.into_iter().map(Loan::give_back).collect();
    core.publish_changes();
    published
}

/// Whether every lender says it published, waiting [`ANSWER_SPIN`] at
/// most.
fn published_now(published: &[flume::Receiver<()>]) -> bool {
    let start = Instant::now();
    loop {
        if published.iter().all(|done| !done.is_empty() || done.is_disconnected()) {
            return true;
        }
        if start.elapsed() >= ANSWER_SPIN {
            return false;
        }
        std::hint::spin_loop();
    }
}

async fn wait_published(published: Vec<flume::Receiver<()>>) {
    for done in published {
        let _ = done.recv_async().await;
    }
}

/// Another core's shard, lent to this one: that core waits, blocked in
/// the job that lent it ([`lend`]), until the loan is given back.
struct Loan {
    shard: NonNull<Shard>,
    /// The lender's Pub/Sub subscribers, read (never changed) by the run's
    /// PUBLISH.
    hub: NonNull<PushHub>,
    /// Dropping it gives the shard back.
    back: Option<flume::Sender<()>>,
    /// Says when the lender has published what the run changed there.
    published: flume::Receiver<()>,
    /// The lender's own clients' scripts that were waiting to run with
    /// every shard: they run under this hold too.
    runs: Vec<NodeRun>,
}

// SAFETY: the shard (and the hub, only read) is touched by one thread at a
// time. Its core lends it from inside a job and then blocks, touching
// nothing, until `back` is dropped or given back; the borrower reaches the
// shard only through `&mut self` of the loan, so only while the loan lives. Sending and
// receiving on the channels orders the two threads' accesses. Nothing the
// borrower runs on the shard keeps a reference into it (commands run to
// their end; a script's Lua state is the borrower's own).
unsafe impl Send for Loan {}

impl Loan {
    fn shard(&mut self) -> &mut Shard {
        // SAFETY: see `impl Send for Loan`: the lender is blocked until the
        // loan ends, and this borrow cannot outlive the loan.
        unsafe { self.shard.as_mut() }
    }

    /// Gives the shard back; the receiver says when its core has published
    /// the changes (its log written and, under `appendfsync always`,
    /// synced) and let go of its whole-shard lock.
    fn give_back(mut self) -> flume::Receiver<()> {
        self.back.take();
        self.published.clone()
    }
}

impl Drop for Loan {
    fn drop(&mut self) {
        self.back.take();
    }
}

/// Why a core lends its shard.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Lend {
    /// To a hold of every shard that took the locks: the lender lets go of
    /// its whole-shard lock once the loan ends, and hands over its clients'
    /// waiting scripts.
    Release,
    /// The same, taking the lock first if it is free, else lending nothing.
    TryLock,
    /// To an EXEC, whose release step lets go of the locks.
    InExec,
    /// As `Release` and `TryLock`, keeping the lender's waiting scripts (a
    /// hold for one run of its own: a debugging session).
    ReleaseAlone,
    TryLockAlone,
}

impl Lend {
    fn tries(self) -> bool {
        matches!(self, Lend::TryLock | Lend::TryLockAlone)
    }

    fn hands_over_runs(self) -> bool {
        matches!(self, Lend::TryLock | Lend::Release)
    }
}

/// Asks every other core for its shard, in shard order: a loan each
/// (`None` where a [`Lend::TryLock`] found the lock taken).
async fn borrow_shards(core: &Rc<Core>, why: Lend) -> Result<Vec<Option<Loan>>, CmdError> {
    let mut waiting = Vec::new();
    for i in 0..core.shared.shards() {
        let shard = ShardId(i as u16);
        if shard == core.id {
            continue;
        }
        let (tx, rx) = flume::bounded(1);
        core.send_job(shard, Box::new(move |core| lend(core, tx, why))).await;
        waiting.push(rx);
    }
    let mut loans = Vec::with_capacity(waiting.len());
    for rx in waiting {
        loans.push(answer(&rx).await.map_err(|_| NO_ANSWER)?);
    }
    Ok(loans)
}

/// How long a core spins for a lender's answer before it waits in its
/// reactor: a core that is not busy answers within microseconds, and the
/// lender is blocked (idle) from the moment it sent its loan.
const ANSWER_SPIN: Duration = Duration::from_micros(20);

async fn answer<T>(rx: &flume::Receiver<T>) -> Result<T, flume::RecvError> {
    let start = Instant::now();
    while start.elapsed() < ANSWER_SPIN {
        match rx.try_recv() {
            Ok(value) => return Ok(value),
            Err(flume::TryRecvError::Disconnected) => return Err(flume::RecvError::Disconnected),
            Err(flume::TryRecvError::Empty) => std::hint::spin_loop(),
        }
    }
    rx.recv_async().await
}

/// How long a lender spins before it sleeps while its shard is lent: a
/// short script gives it back within microseconds.
const LEND_SPIN: Duration = Duration::from_micros(0);

/// The job that lends this core's shard to a run on another core: sends
/// the loan, waits (blocked: nothing of this core runs meanwhile) until it
/// is given back, then publishes what the run changed here.
fn lend(core: &Rc<Core>, to: flume::Sender<Option<Loan>>, why: Lend) {
    let whole = vec![(WHOLE_SHARD, LockMode::Exclusive)];
    if why.tries() && !core.shard.borrow_mut().locks.try_acquire(&whole) {
        let _ = to.send(None);
        return;
    }
    let release = why != Lend::InExec;
    let serve_busy = core.shard.borrow().state.scripting.while_busy();
    let (back_tx, back_rx) = flume::bounded::<()>(1);
    let (published_tx, published_rx) = flume::bounded::<()>(1);
    let runs = if why.hands_over_runs() {
        let mut runs = core.node_runs.borrow_mut();
        runs.signaled = false;
        std::mem::take(&mut runs.waiting)
    } else {
        Vec::new()
    };
    {
        let mut shard = core.shard.borrow_mut();
        let hub = core.push.borrow();
        let loan = Loan {
            shard: NonNull::from(&mut *shard),
            hub: NonNull::from(&*hub),
            back: Some(back_tx),
            published: published_rx,
            runs,
        };
        if let Err(flume::SendError(Some(loan))) = to.send(Some(loan)) {
            // The hold is gone (a lend to it failed): nothing was lent, and
            // the scripts wait here again.
            drop((shard, hub));
            core.node_runs.borrow_mut().waiting.extend(std::mem::take(&mut { loan }.runs));
            if release {
                core.shard.borrow_mut().tx_release(&whole);
            }
            return;
        }
        // A loan still in the channel when the borrower goes is dropped
        // with it, which gives it back.
        drop(to);
        wait_for_return(&back_rx, &core.shared.scripts, serve_busy.as_deref());
    }
    core.publish_changes();
    if release {
        core.shard.borrow_mut().tx_release(&whole);
    }
    let _ = published_tx.send(());
}

/// Blocks until the loan ends. While the run is past the busy threshold,
/// this core's waiting clients get their BUSY answers from `serve_busy`
/// (the hook a busy script calls on its own core).
fn wait_for_return(
    back: &flume::Receiver<()>,
    scripts: &ScriptMonitor,
    serve_busy: Option<&dyn Fn()>,
) {
    let returned =
        |r: Result<(), flume::TryRecvError>| !matches!(r, Err(flume::TryRecvError::Empty));
    let start = Instant::now();
    while start.elapsed() < LEND_SPIN {
        if returned(back.try_recv()) {
            return;
        }
        std::hint::spin_loop();
    }
    loop {
        match back.recv_timeout(Duration::from_millis(1)) {
            Err(flume::RecvTimeoutError::Timeout) => {}
            _ => return,
        }
        if let (true, Some(serve)) = (scripts.any_busy(), serve_busy) {
            serve();
        }
    }
}
