//! What the clients of a core get while a script blocks it.
//!
//! A script runs to its end on its shard's core, so nothing else of that
//! core runs meanwhile. Once it has run past `busy-reply-threshold`, its
//! hook calls [`answer`] (through the network driver) for every connection
//! of the core that is waiting for input, as Redis's
//! `processEventsWhileBlocked` does for its clients: commands that need the
//! busy shard get the BUSY error, SCRIPT KILL and FUNCTION KILL ask the
//! script to stop, FUNCTION STATS describes it, SHUTDOWN NOSAVE stops the
//! process. Clients on other cores get the same answers from the router
//! ([`super::busy_error`]).

use super::busy_error;
use crate::cmd::admin::ShutdownFlags;
use crate::node::Core;
use bytes::{Bytes, BytesMut};
use ringdb_engine::command::spec::flags;
use ringdb_engine::command::table;
use ringdb_protocol::{encode_command, Output, ParseLimits, ReplyWriter, RequestParser, Resp};

/// Answers the commands at the front of an idle connection's `input`,
/// appending the replies to `out`. It stops at the first command it cannot
/// answer without the connection's own state or another core (AUTH, MULTI,
/// a key of another shard …): that command and those after it stay in
/// `input`, to run in order once the script has ended. So does an
/// incomplete or malformed command. Returns whether the connection may be
/// answered again while the script runs: not after a command that waits,
/// nor after a malformed one.
pub fn answer(core: &Core, resp: Resp, input: &mut BytesMut, out: &mut Output) -> bool {
    let Ok(config) = core.config.try_borrow() else { return true };
    // Only authenticated connections are idle (`Shared::idle`).
    let limits =
        ParseLimits { max_bulk_len: config.conn.proto_max_bulk_len, ..ParseLimits::default() };
    drop(config);
    let mut requests = Vec::new();
    // A protocol error leaves the bad bytes in `input`: the connection
    // replies to them itself.
    let parsed = RequestParser::new().parse(input, &limits, &mut requests);
    let mut requests = requests.into_iter();
    while let Some(request) = requests.next() {
        if !answer_one(core, &request.args, &mut out.writer(resp)) {
            let mut kept = BytesMut::new();
            for request in std::iter::once(request).chain(requests) {
                // Inline commands come back as multibulks: the same command.
                encode_command(&mut kept, &request.args);
            }
            kept.extend_from_slice(input);
            *input = kept;
            return false;
        }
    }
    parsed.is_ok()
}

/// Answers one command; false when it must wait for the script's end.
fn answer_one(core: &Core, args: &[Bytes], out: &mut ReplyWriter) -> bool {
    // Unknown commands and wrong arities are reported before BUSY (Redis's
    // `processCommand` order).
    let reg = match table().resolve(args) {
        Ok(reg) => reg,
        Err(e) => {
            out.error(e.text());
            return true;
        }
    };
    let scripts = &core.shared.scripts;
    if !reg.spec.has(flags::ALLOW_BUSY) {
        return match busy_error(core, reg.spec, args) {
            Some(busy) => {
                out.error(busy);
                true
            }
            // Only other shards are needed: it runs after the script.
            None => false,
        };
    }
    match reg.full_name.as_str() {
        "script|kill" | "function|kill" => {
            match scripts.kill(reg.full_name == "script|kill") {
                Ok(()) => out.simple("OK"),
                Err(e) => out.error(e.text()),
            }
            true
        }
        "function|stats" => {
            // This core's shard is the busy one: its counts come with it.
            let running = scripts.running();
            let counts = running.as_ref().map_or((0, 0), |r| r.libraries);
            if let Err(e) = crate::cmd::scripting::write_function_stats(out, running, counts) {
                out.error(e.text());
            }
            true
        }
        "shutdown" => {
            match ShutdownFlags::parse(args) {
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
