//! SCRIPT and FUNCTION subcommands (eval.c, functions.c, script.c): they
//! reach every shard's Lua state, so they run here and visit the shards.
//!
//! - SCRIPT LOAD compiles the script on every shard; EVAL and SCRIPT LOAD
//!   also record its body in the process-wide monitor, so that EVALSHA
//!   finds it on a shard that has not seen it yet (SCRIPT EXISTS reads that
//!   record).
//! - FUNCTION LOAD/DELETE/FLUSH/RESTORE run on every shard (each has its
//!   own copy of every library); LIST, DUMP and STATS read this core's.
//! - SCRIPT KILL / FUNCTION KILL and FUNCTION STATS's running script go
//!   through the monitor: the script runs on another core, which is busy.

use crate::net::connection::Connection;
use crate::node::Core;
use bytes::Bytes;
use ringdb_engine::command::args::{is, text};
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_engine::persist::aof::LogEvent;
use ringdb_engine::scripting::monitor::RunningScript;
use ringdb_engine::scripting::{functions::Library, RestorePolicy, Scripting, FLAG_NAMES};
use ringdb_protocol::ReplyWriter;
use std::rc::Rc;

/// The first error of a visit to every shard, or the first shard's value.
fn first_result<T>(results: Vec<Result<T, CmdError>>) -> Result<T, CmdError> {
    let mut first = None;
    for r in results {
        match r {
            Err(e) => return Err(e),
            Ok(v) if first.is_none() => first = Some(v),
            Ok(_) => {}
        }
    }
    first.ok_or(crate::mesh::NO_ANSWER)
}

/// SCRIPT LOAD script
pub async fn script_load(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let body = args[2].clone();
    let results = conn
        .core
        .invoke_on_all(move |core| core.shard.borrow_mut().state.scripting.script_load(&body))
        .await?;
    let sha = first_result(results)?;
    conn.reply().bulk(sha.as_bytes());
    Ok(())
}

/// SCRIPT EXISTS sha1 [sha1 ...]
pub fn script_exists(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let found: Vec<bool> = {
        let shard = conn.core.shard.borrow();
        args[2..].iter().map(|sha| shard.state.scripting.script_exists(sha)).collect()
    };
    let mut out = conn.reply();
    out.array(found.len());
    for f in found {
        out.int(f as i64);
    }
    Ok(())
}

/// `[ASYNC | SYNC]` of SCRIPT FLUSH and FUNCTION FLUSH (both free at once:
/// ringdb has no lazy-free thread).
fn flush_mode(args: &[Bytes], error: &'static str) -> CmdResult {
    match args.len() {
        2 => Ok(()),
        3 if is(&args[2], "sync") || is(&args[2], "async") => Ok(()),
        _ => Err(CmdError::new(error)),
    }
}

/// SCRIPT FLUSH [ASYNC | SYNC]
pub async fn script_flush(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    flush_mode(args, "ERR SCRIPT FLUSH only support SYNC|ASYNC option")?;
    conn.core.shared.scripts.forget_bodies();
    conn.core
        .invoke_on_all(|core| {
            core.shard.borrow_mut().state.scripting.script_flush();
            core.script_profiles.borrow_mut().clear();
        })
        .await?;
    conn.reply().ok();
    Ok(())
}

/// SCRIPT KILL (`eval`) and FUNCTION KILL.
pub fn kill(conn: &mut Connection, eval: bool) -> CmdResult {
    conn.core.shared.scripts.kill(eval).map_err(|e| CmdError::new(e.text()))?;
    conn.reply().ok();
    Ok(())
}

/// SCRIPT DEBUG YES|SYNC|NO: whether the next EVAL runs in a debugging
/// session (`crate::route::debug`).
pub fn script_debug(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    use crate::route::debug::Mode;
    if !conn.out.is_empty() {
        return Err(CmdError::new("ERR SCRIPT DEBUG must be called outside a pipeline"));
    }
    conn.state.debugger = match &args[2] {
        a if is(a, "no") => None,
        a if is(a, "yes") => Some(Mode::Yes),
        a if is(a, "sync") => Some(Mode::Sync),
        _ => return Err(CmdError::new("ERR Use SCRIPT DEBUG YES/SYNC/NO")),
    };
    conn.reply().ok();
    Ok(())
}

const SCRIPT_HELP: &[&str] = &[
    "DEBUG (YES|SYNC|NO)",
    "    Set the debug mode for subsequent scripts executed.",
    "EXISTS <sha1> [<sha1> ...]",
    "    Return information about the existence of the scripts in the script cache.",
    "FLUSH [ASYNC|SYNC]",
    "    Flush the Lua scripts cache. Very dangerous on replicas.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the scripts cache.",
    "    * SYNC: Synchronously flush the scripts cache.",
    "KILL",
    "    Kill the currently executing Lua script.",
    "LOAD <script>",
    "    Load a script into the scripts cache without executing it.",
];

pub fn script_help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::cmd::help(conn, args, SCRIPT_HELP);
    Ok(())
}

/// Changes this core's function libraries; when that worked, the shard's
/// log records them as they are now (and is written, and synced under
/// `appendfsync always`, before the reply), so that they survive a
/// restart as Redis's AOF keeps them.
fn change_functions<T, E>(
    core: &Rc<Core>,
    change: impl FnOnce(&mut Scripting) -> Result<T, E>,
) -> Result<T, E> {
    let mut shard = core.shard.borrow_mut();
    let result = change(&mut shard.state.scripting)?;
    // A name may now be another function's: where it ran says nothing.
    core.script_profiles.borrow_mut().clear();
    if shard.state.funnel.log.is_some() {
        let payload = Bytes::from(shard.state.scripting.function_dump());
        if let Some(log) = shard.state.funnel.log.as_mut() {
            log.events.push(LogEvent::Functions(payload));
        }
        core.flush_log_of(&mut shard);
    }
    Ok(result)
}

/// FUNCTION LOAD [REPLACE] function-code
pub async fn function_load(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let mut replace = false;
    for arg in &args[2..args.len() - 1] {
        if is(arg, "replace") {
            replace = true;
        } else {
            return Err(CmdError::owned(format!("ERR Unknown option given: {}", text(arg))));
        }
    }
    let code = args[args.len() - 1].clone();
    let results = conn
        .core
        .invoke_on_all(move |core| change_functions(core, |s| s.function_load(&code, replace)))
        .await?;
    let name = first_result(results)?;
    conn.core.shard.borrow_mut().state.funnel.dirty += 1;
    conn.reply().bulk(name.as_bytes());
    Ok(())
}

/// FUNCTION DELETE library-name
pub async fn function_delete(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let name = args[2].clone();
    let results = conn
        .core
        .invoke_on_all(move |core| change_functions(core, |s| s.function_delete(&name)))
        .await?;
    first_result(results)?;
    conn.core.shard.borrow_mut().state.funnel.dirty += 1;
    conn.reply().ok();
    Ok(())
}

/// FUNCTION FLUSH [ASYNC | SYNC]
pub async fn function_flush(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if args.len() > 3 {
        return Err(crate::cmd::subcommand_syntax_error(args));
    }
    flush_mode(args, "ERR FUNCTION FLUSH only supports SYNC|ASYNC option")?;
    conn.core
        .invoke_on_all(|core| {
            change_functions(core, |s| {
                s.function_flush();
                Ok::<(), CmdError>(())
            })
        })
        .await?;
    conn.core.shard.borrow_mut().state.funnel.dirty += 1;
    conn.reply().ok();
    Ok(())
}

/// FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]
pub fn function_list(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let (mut with_code, mut pattern): (bool, Option<&[u8]>) = (false, None);
    let mut i = 2;
    while i < args.len() {
        if !with_code && is(&args[i], "withcode") {
            with_code = true;
        } else if pattern.is_none() && is(&args[i], "libraryname") {
            let Some(p) = args.get(i + 1) else {
                return Err(CmdError::new("ERR library name argument was not given"));
            };
            pattern = Some(p);
            i += 1;
        } else {
            return Err(CmdError::owned(format!("ERR Unknown argument {}", text(&args[i]))));
        }
        i += 1;
    }
    let core = conn.core.clone();
    let shard = core.shard.borrow();
    let libs: Vec<&Library> = shard
        .state
        .scripting
        .libraries()
        .map(|l| l.libs.values().collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .filter(|l| match pattern {
            Some(p) => ringdb_types::glob::glob_match(p, l.name.as_bytes(), true),
            None => true,
        })
        .collect();
    let mut out = conn.reply();
    out.array(libs.len());
    for lib in libs {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(lib.name.as_bytes());
        out.bulk(b"engine");
        out.bulk(b"LUA");
        out.bulk(b"functions");
        out.array(lib.functions.len());
        for f in lib.functions.values() {
            out.map(3);
            out.bulk(b"name");
            out.bulk(f.name.as_bytes());
            out.bulk(b"description");
            match &f.description {
                Some(d) => out.bulk(d.as_bytes()),
                None => out.null(),
            }
            out.bulk(b"flags");
            let names: Vec<&str> =
                FLAG_NAMES.iter().filter(|(bit, _)| f.flags & bit != 0).map(|(_, n)| *n).collect();
            out.set(names.len());
            for n in names {
                out.simple(n);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&lib.code);
        }
    }
    Ok(())
}

/// FUNCTION DUMP
pub fn function_dump(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let payload = conn.core.shard.borrow().state.scripting.function_dump();
    conn.reply().bulk(&payload);
    Ok(())
}

/// FUNCTION RESTORE serialized-value [FLUSH | APPEND | REPLACE]
pub async fn function_restore(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if args.len() > 4 {
        return Err(crate::cmd::subcommand_syntax_error(args));
    }
    let policy =
        match args.get(3) {
            None => RestorePolicy::Append,
            Some(p) if is(p, "append") => RestorePolicy::Append,
            Some(p) if is(p, "replace") => RestorePolicy::Replace,
            Some(p) if is(p, "flush") => RestorePolicy::Flush,
            Some(_) => return Err(CmdError::new(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            )),
        };
    let payload = args[2].clone();
    let results = conn
        .core
        .invoke_on_all(move |core| change_functions(core, |s| s.function_restore(&payload, policy)))
        .await?;
    first_result(results)?;
    conn.core.shard.borrow_mut().state.funnel.dirty += 1;
    conn.reply().ok();
    Ok(())
}

/// FUNCTION STATS: the function running past the busy threshold (on any
/// core) and the number of libraries and functions.
pub fn function_stats(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let running = conn.core.shared.scripts.running();
    let counts = {
        let shard = conn.core.shard.borrow();
        shard.state.scripting.libraries().map_or((0, 0), |l| (l.libs.len(), l.function_count()))
    };
    write_function_stats(&mut conn.reply(), running, counts)
}

/// FUNCTION STATS's reply: `running` (an EVAL script gets BUSY instead, as
/// in Redis) and the counts of libraries and functions. Also what a busy
/// function's own core answers (`route::busy`).
pub fn write_function_stats(
    out: &mut ReplyWriter,
    running: Option<RunningScript>,
    (libraries, functions): (usize, usize),
) -> CmdResult {
    if running.as_ref().is_some_and(|r| r.eval) {
        return Err(CmdError::new(ringdb_engine::scripting::monitor::BUSY_EVAL));
    }
    out.map(2);
    out.bulk(b"running_script");
    match running {
        None => out.null(),
        Some(script) => {
            out.map(3);
            out.bulk(b"name");
            out.bulk(script.name.as_bytes());
            out.bulk(b"command");
            out.array(script.command.len());
            for arg in &script.command {
                out.bulk(arg);
            }
            out.bulk(b"duration_ms");
            out.int(script.started.elapsed().as_millis() as i64);
        }
    }
    out.bulk(b"engines");
    out.map(1);
    out.bulk(b"LUA");
    out.map(2);
    out.bulk(b"libraries_count");
    out.int(libraries as i64);
    out.bulk(b"functions_count");
    out.int(functions as i64);
    Ok(())
}

const FUNCTION_HELP: &[&str] = &[
    "LOAD [REPLACE] <FUNCTION CODE>",
    "    Create a new library with the given library name and code.",
    "DELETE <LIBRARY NAME>",
    "    Delete the given library.",
    "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
    "    Return general information on all the libraries:",
    "    * Library name",
    "    * The engine used to run the Library",
    "    * Library description",
    "    * Functions list",
    "    * Library code (if WITHCODE is given)",
    "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
    "STATS",
    "    Return information about the current function running:",
    "    * Function name",
    "    * Command used to run the function",
    "    * Duration in MS that the function is running",
    "    If no function is running, return nil",
    "    In addition, returns a list of available engines.",
    "KILL",
    "    Kill the current running function.",
    "FLUSH [ASYNC|SYNC]",
    "    Delete all the libraries.",
    "    When called without the optional mode argument, the behavior is determined by the",
    "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
    "    * ASYNC: Asynchronously flush the libraries.",
    "    * SYNC: Synchronously flush the libraries.",
    "DUMP",
    "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
    "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
    "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
    "    control how to handle existing libraries (default APPEND):",
    "    * FLUSH: delete all existing libraries.",
    "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
    "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
    "      libraries with the new libraries (notice that even on this option there is a chance of failure",
    "      in case of functions name collision with another library).",
];

pub fn function_help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::cmd::help(conn, args, FUNCTION_HELP);
    Ok(())
}
