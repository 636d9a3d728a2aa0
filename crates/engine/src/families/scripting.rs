//! Scripting: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, FCALL, FCALL_RO (shard
//! handlers: the router runs them where their declared keys are), and the
//! SCRIPT and FUNCTION containers, whose subcommands reach every shard's
//! Lua state and so run on the connection's core (`Exec::Node`, implemented
//! by the server). The work itself is in [`crate::scripting`].

use crate::command::error::CmdResult;
use crate::command::spec::{
    acl, flags::*, keyflags as kf, CommandSpec, Debugs, Exec, KeySpec, NodeCommand as N,
};
use crate::command::Ctx;
use bytes::Bytes;

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd))
}

/// Flags EVAL, EVALSHA and FCALL share; the `_RO` variants are READONLY
/// instead of MAY_REPLICATE.
const RUN: u32 = NOSCRIPT | SKIP_MONITOR | MAY_REPLICATE | NO_MANDATORY_KEYS | STALE | RUNS_SCRIPT;
const RUN_RO: u32 = NOSCRIPT | SKIP_MONITOR | NO_MANDATORY_KEYS | STALE | READONLY | RUNS_SCRIPT;
const WORST: &str =
    "We cannot tell how the keys will be used so we assume the worst, RW and UPDATE";
const WORST_RO: &str =
    "We cannot tell how the keys will be used so we assume the worst, RO and ACCESS";
const ALL_SHARDS: &[&str] = &["request_policy:all_shards", "response_policy:all_succeeded"];

static SCRIPT: &[CommandSpec] = &[
    node("debug", 3, NOSCRIPT, N::ScriptDebug)
        .acl(acl::SCRIPTING)
        .doc("scripting", "3.2.0", "Sets the debug mode of server-side Lua scripts.", "O(1)", "<YES | SYNC | NO>"),
    node("exists", -3, NOSCRIPT, N::ScriptExists)
        .acl(acl::SCRIPTING)
        .tips(&["request_policy:all_shards", "response_policy:agg_logical_and"])
        .doc("scripting", "2.6.0", "Determines whether server-side Lua scripts exist in the script cache.", "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation).", "sha1 [sha1 ...]"),
    node("flush", -2, NOSCRIPT, N::ScriptFlush)
        .acl(acl::SCRIPTING)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc("scripting", "2.6.0", "Removes all server-side Lua scripts from the script cache.", "O(N) with N being the number of scripts in cache", "[ASYNC | SYNC]")
        .history(&[("6.2.0", "Added the `ASYNC` and `SYNC` flushing mode modifiers.")]),
    node("help", 2, LOADING | STALE, N::ScriptHelp)
        .acl(acl::SCRIPTING)
        .doc("scripting", "5.0.0", "Returns helpful text about the different subcommands.", "O(1)", ""),
    node("kill", 2, NOSCRIPT | ALLOW_BUSY, N::ScriptKill)
        .acl(acl::SCRIPTING)
        .tips(&["request_policy:all_shards", "response_policy:one_succeeded"])
        .doc("scripting", "2.6.0", "Terminates a server-side Lua script during execution.", "O(1)", ""),
    node("load", 3, NOSCRIPT | STALE, N::ScriptLoad)
        .acl(acl::SCRIPTING)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc("scripting", "2.6.0", "Loads a server-side Lua script to the script cache.", "O(N) with N being the length in bytes of the script body.", "script"),
];

static FUNCTION: &[CommandSpec] = &[
    node("delete", 3, NOSCRIPT | WRITE, N::FunctionDelete)
        .acl(acl::SCRIPTING)
        .tips(ALL_SHARDS)
        .doc("scripting", "7.0.0", "Deletes a library and its functions.", "O(1)", "library-name"),
    node("dump", 2, NOSCRIPT, N::FunctionDump).acl(acl::SCRIPTING).doc(
        "scripting",
        "7.0.0",
        "Dumps all libraries into a serialized binary payload.",
        "O(N) where N is the number of functions",
        "",
    ),
    node("flush", -2, NOSCRIPT | WRITE, N::FunctionFlush).acl(acl::SCRIPTING).tips(ALL_SHARDS).doc(
        "scripting",
        "7.0.0",
        "Deletes all libraries and functions.",
        "O(N) where N is the number of functions deleted",
        "[ASYNC | SYNC]",
    ),
    node("help", 2, LOADING | STALE, N::FunctionHelp).acl(acl::SCRIPTING).doc(
        "scripting",
        "7.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
    node("kill", 2, NOSCRIPT | ALLOW_BUSY, N::FunctionKill)
        .acl(acl::SCRIPTING)
        .tips(&["request_policy:all_shards", "response_policy:one_succeeded"])
        .doc("scripting", "7.0.0", "Terminates a function during execution.", "O(1)", ""),
    node("list", -2, NOSCRIPT, N::FunctionList)
        .acl(acl::SCRIPTING)
        .tips(&["nondeterministic_output_order"])
        .doc(
            "scripting",
            "7.0.0",
            "Returns information about all libraries.",
            "O(N) where N is the number of functions",
            "[LIBRARYNAME library-name-pattern] [WITHCODE]",
        ),
    node("load", -3, NOSCRIPT | WRITE | DENYOOM, N::FunctionLoad)
        .acl(acl::SCRIPTING)
        .tips(ALL_SHARDS)
        .doc(
            "scripting",
            "7.0.0",
            "Creates a library.",
            "O(1) (considering compilation time is redundant)",
            "[REPLACE] function-code",
        ),
    node("restore", -3, NOSCRIPT | WRITE | DENYOOM, N::FunctionRestore)
        .acl(acl::SCRIPTING)
        .tips(ALL_SHARDS)
        .doc(
            "scripting",
            "7.0.0",
            "Restores all libraries from a payload.",
            "O(N) where N is the number of functions on the payload",
            "serialized-value [FLUSH | APPEND | REPLACE]",
        ),
    node("stats", 2, NOSCRIPT | ALLOW_BUSY, N::FunctionStats)
        .acl(acl::SCRIPTING)
        .tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"])
        .doc(
            "scripting",
            "7.0.0",
            "Returns information about a function during execution.",
            "O(1)",
            "",
        ),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::new("eval", -3, RUN, Exec::Shard(eval))
        .debugs(Debugs::Body)
        .script_flags(crate::scripting::flags_of_body)
        .keys(&[KeySpec::keynum(2, kf::RW | kf::ACCESS | kf::UPDATE).notes(WORST)])
        .acl(acl::SCRIPTING)
        .doc(
            "scripting",
            "2.6.0",
            "Executes a server-side Lua script.",
            "Depends on the script that is executed.",
            "script numkeys [key [key ...]] [arg [arg ...]]",
        ),
    CommandSpec::new("evalsha", -3, RUN, Exec::Shard(evalsha))
        .debugs(Debugs::Refuses)
        .script_flags(crate::scripting::flags_of_sha)
        .keys(&[KeySpec::keynum(2, kf::RW | kf::ACCESS | kf::UPDATE)])
        .acl(acl::SCRIPTING)
        .doc(
            "scripting",
            "2.6.0",
            "Executes a server-side Lua script by SHA1 digest.",
            "Depends on the script that is executed.",
            "sha1 numkeys [key [key ...]] [arg [arg ...]]",
        ),
    CommandSpec::new("eval_ro", -3, RUN_RO, Exec::Shard(eval_ro))
        .debugs(Debugs::Body)
        .keys(&[KeySpec::keynum(2, kf::RO | kf::ACCESS).notes(WORST_RO)])
        .acl(acl::SCRIPTING)
        .doc(
            "scripting",
            "7.0.0",
            "Executes a read-only server-side Lua script.",
            "Depends on the script that is executed.",
            "script numkeys [key [key ...]] [arg [arg ...]]",
        ),
    CommandSpec::new("evalsha_ro", -3, RUN_RO, Exec::Shard(evalsha_ro))
        .debugs(Debugs::Refuses)
        .keys(&[KeySpec::keynum(2, kf::RO | kf::ACCESS)])
        .acl(acl::SCRIPTING)
        .doc(
            "scripting",
            "7.0.0",
            "Executes a read-only server-side Lua script by SHA1 digest.",
            "Depends on the script that is executed.",
            "sha1 numkeys [key [key ...]] [arg [arg ...]]",
        ),
    CommandSpec::new("fcall", -3, RUN, Exec::Shard(fcall))
        .script_flags(crate::scripting::flags_of_function)
        .keys(&[KeySpec::keynum(2, kf::RW | kf::ACCESS | kf::UPDATE).notes(WORST)])
        .acl(acl::SCRIPTING)
        .doc(
            "scripting",
            "7.0.0",
            "Invokes a function.",
            "Depends on the function that is executed.",
            "function numkeys [key [key ...]] [arg [arg ...]]",
        ),
    CommandSpec::new("fcall_ro", -3, RUN_RO, Exec::Shard(fcall_ro))
        .keys(&[KeySpec::keynum(2, kf::RO | kf::ACCESS).notes(WORST_RO)])
        .acl(acl::SCRIPTING)
        .doc(
            "scripting",
            "7.0.0",
            "Invokes a read-only function.",
            "Depends on the function that is executed.",
            "function numkeys [key [key ...]] [arg [arg ...]]",
        ),
    CommandSpec::container("script", SCRIPT).doc(
        "scripting",
        "2.6.0",
        "A container for Lua scripts management commands.",
        "Depends on subcommand.",
        "",
    ),
    CommandSpec::container("function", FUNCTION).doc(
        "scripting",
        "7.0.0",
        "A container for function commands.",
        "Depends on subcommand.",
        "",
    ),
];

/// EVAL script numkeys [key ...] [arg ...]
fn eval(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::scripting::eval(ctx, args, false, false)
}

/// EVALSHA sha1 numkeys [key ...] [arg ...]
fn evalsha(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::scripting::eval(ctx, args, true, false)
}

/// EVAL_RO script numkeys [key ...] [arg ...]
fn eval_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::scripting::eval(ctx, args, false, true)
}

/// EVALSHA_RO sha1 numkeys [key ...] [arg ...]
fn evalsha_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::scripting::eval(ctx, args, true, true)
}

/// FCALL function numkeys [key ...] [arg ...]
fn fcall(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::scripting::fcall(ctx, args, false)
}

/// FCALL_RO function numkeys [key ...] [arg ...]
fn fcall_ro(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    crate::scripting::fcall(ctx, args, true)
}
