//! What the clients of a core get while a script blocks it.
//!
//! A script runs to its end on its shard's core, so nothing else of that
//! core runs meanwhile. Once it has run past `busy-reply-threshold`, its
//! hook calls [`answer`] (through the network driver) for every connection
//! of the core that is waiting for input, as Redis's
//! `processEventsWhileBlocked` does for its clients: commands get the BUSY
//! error (a busy script makes the whole server busy, as in Redis), SCRIPT
//! KILL and FUNCTION KILL ask the script to stop, FUNCTION STATS describes
//! it, SHUTDOWN NOSAVE stops the process. A connection in MULTI keeps its
//! transaction going: MULTI and DISCARD are answered, a command refused
//! with BUSY fails the EXEC, and EXEC itself is refused with EXECABORT
//! (Redis's `rejectCommand`). Clients on other cores get the same answers
//! from the router ([`super::busy_error`]), or, on a core whose shard is
//! lent to the busy script, from this module too.

use super::busy_error;
use crate::cmd::admin::ShutdownFlags;
use crate::node::Core;
use crate::route::multi::Multi;
use bytes::{Bytes, BytesMut};
use ringdb_engine::command::spec::flags;
use ringdb_engine::command::{table, CmdError, CmdResult, Exec, NodeCommand};
use ringdb_protocol::{encode_command, Output, ParseLimits, ReplyWriter, RequestParser, Resp};

/// What the driver holds of a connection that waits for input, so that
/// the hook can answer it (`uring::stream::Shared::idle`): the protocol of
/// its replies and its open transaction, which the connection hands over
/// while it waits and takes back when it reads ([`Idle::multi`]).
#[derive(Debug)]
pub struct Idle {
    pub resp: Resp,
    /// The connection's MULTI, queued to and failed while the core is busy.
    pub multi: Option<Multi>,
    /// A transaction ended here (EXEC refused, DISCARD): the connection
    /// forgets its WATCHed keys when it takes the record back.
    pub discarded: bool,
    /// A command had to wait for the script's end: nothing more of this
    /// connection is answered until it reads again.
    pub paused: bool,
}

impl Idle {
    pub fn new(resp: Resp, multi: Option<Multi>) -> Idle {
        Idle { resp, multi, discarded: false, paused: false }
    }
}

/// Answers the commands at the front of an idle connection's `input`,
/// appending the replies to `out`. It stops at the first command it cannot
/// answer without the rest of the connection's state or another core
/// (AUTH, a key of another shard outside MULTI …): that command and those
/// after it stay in `input`, to run in order once the script has ended, and
/// `idle` is paused. So does an incomplete or malformed command (the
/// connection replies to that itself).
pub fn answer(core: &Core, idle: &mut Idle, input: &mut BytesMut, out: &mut Output) {
    let Ok(config) = core.config.try_borrow() else { return };
    // Only authenticated connections are idle.
    let limits =
        ParseLimits { max_bulk_len: config.conn.proto_max_bulk_len, ..ParseLimits::default() };
    drop(config);
    let mut requests = Vec::new();
    let parsed = RequestParser::new().parse(input, &limits, &mut requests);
    let mut requests = requests.into_iter();
    while let Some(request) = requests.next() {
        if !answer_one(core, idle, request.args.clone(), &mut out.writer(idle.resp)) {
            let mut kept = BytesMut::new();
            for request in std::iter::once(request).chain(requests) {
                // Inline commands come back as multibulks: the same command.
                encode_command(&mut kept, &request.args);
            }
            kept.extend_from_slice(input);
            *input = kept;
            idle.paused = true;
            return;
        }
    }
    idle.paused = parsed.is_err();
}

/// Answers one command; false when it must wait for the script's end.
fn answer_one(core: &Core, idle: &mut Idle, args: Vec<Bytes>, out: &mut ReplyWriter) -> bool {
    // Unknown commands and wrong arities are reported before BUSY (Redis's
    // `processCommand` order).
    let reg = match table().resolve(&args) {
        Ok(reg) => reg,
        Err(e) => {
            fail(idle);
            out.error(e.text());
            return true;
        }
    };
    let scripts = &core.shared.scripts;
    if !reg.spec.has(flags::ALLOW_BUSY) {
        if let Some(busy) = busy_error(core) {
            if matches!(reg.spec.exec, Exec::Node(NodeCommand::Exec)) {
                idle.multi = None;
                idle.discarded = true;
                out.error(&super::exec_abort_text(busy));
            } else {
                fail(idle);
                out.error(busy);
            }
            return true;
        }
    }
    if let Some(multi) = &mut idle.multi {
        if !reg.spec.has(flags::CONTROLS_MULTI) {
            // Also SCRIPT KILL: Redis queues it inside MULTI.
            match multi.queue(reg, args) {
                Ok(()) => out.simple("QUEUED"),
                Err(e) => out.error(e.text()),
            }
            return true;
        }
    }
    if !reg.spec.has(flags::ALLOW_BUSY) {
        // The script is no longer busy: it runs after it.
        return false;
    }
    use NodeCommand as N;
    let Exec::Node(command) = reg.spec.exec else { return false };
    match command {
        N::Multi => {
            reply_ok(out, Multi::begin(&mut idle.multi));
            true
        }
        N::Discard => {
            let discarded = Multi::discard(&mut idle.multi);
            idle.discarded |= discarded.is_ok();
            reply_ok(out, discarded);
            true
        }
        N::ScriptKill | N::FunctionKill => {
            reply_ok(
                out,
                scripts.kill(command == N::ScriptKill).map_err(|e| CmdError::new(e.text())),
            );
            true
        }
        N::FunctionStats => {
            // This core's shard is the busy one: its counts come with it.
            let running = scripts.running();
            let counts = running.as_ref().map_or((0, 0), |r| r.libraries);
            if let Err(e) = crate::cmd::scripting::write_function_stats(out, running, counts) {
                out.error(e.text());
            }
            true
        }
        N::Shutdown => {
            match ShutdownFlags::parse(&args) {
                Err(e) => out.error(e.text()),
                Ok(f) if f.nosave => {
                    tracing::warn!("User requested shutdown...");
                    crate::node::shutdown(0)
                }
                // Saving needs the busy shard (Redis: only NOSAVE).
                Ok(_) => out.error(scripts.any_busy_error().unwrap_or_default()),
            }
            true
        }
        _ => false,
    }
}

/// `+OK`, or the error.
fn reply_ok(out: &mut ReplyWriter, result: CmdResult) {
    match result {
        Ok(()) => out.simple("OK"),
        Err(e) => out.error(e.text()),
    }
}

/// A refused command fails the open transaction, if any (EXECABORT).
fn fail(idle: &mut Idle) {
    if let Some(multi) = &mut idle.multi {
        multi.failed = true;
    }
}
