//! MEMORY: USAGE (how much a key costs) and HELP run on the key's shard;
//! STATS, DOCTOR, MALLOC-STATS and PURGE look at the whole process and run
//! on the connection's core (the server crate implements them).

use crate::command::args::{self, is};
use crate::command::error::{CmdResult, SYNTAX};
use crate::command::spec::{
    flags::*, keyflags as kf, CommandSpec, Exec, KeySpec, NodeCommand as N,
};
use crate::command::Ctx;
use bytes::Bytes;

static SUBCOMMANDS: &[CommandSpec] = &[
    CommandSpec::new("usage", -3, READONLY, Exec::Shard(usage))
        .keys(&[KeySpec::one(2, kf::RO)])
        .doc(
            "server",
            "4.0.0",
            "Estimates the memory usage of a key.",
            "O(N) where N is the number of samples.",
            "key [SAMPLES count]",
        ),
    CommandSpec::new("stats", 2, 0, Exec::Node(N::MemoryStats))
        .tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"])
        .doc("server", "4.0.0", "Returns details about memory usage.", "O(1)", ""),
    CommandSpec::new("doctor", 2, 0, Exec::Node(N::MemoryDoctor))
        .tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"])
        .doc("server", "4.0.0", "Outputs a memory problems report.", "O(1)", ""),
    CommandSpec::new("malloc-stats", 2, 0, Exec::Node(N::MemoryMallocStats))
        .tips(&["nondeterministic_output", "request_policy:all_shards", "response_policy:special"])
        .doc(
            "server",
            "4.0.0",
            "Returns the allocator statistics.",
            "Depends on how much memory is allocated, could be slow",
            "",
        ),
    CommandSpec::new("purge", 2, 0, Exec::Node(N::MemoryPurge))
        .tips(&["request_policy:all_shards", "response_policy:all_succeeded"])
        .doc(
            "server",
            "4.0.0",
            "Asks the allocator to release memory.",
            "Depends on how much memory is allocated, could be slow",
            "",
        ),
    CommandSpec::new("help", 2, LOADING | STALE, Exec::Shard(help)).doc(
        "server",
        "4.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[CommandSpec::container("memory", SUBCOMMANDS).doc(
    "server",
    "4.0.0",
    "A container for memory diagnostics commands.",
    "Depends on subcommand.",
    "",
)];

/// MEMORY USAGE key [SAMPLES count]: the bytes the key, its value and its
/// table slot take. Values are measured whole, so SAMPLES only has to be
/// valid.
fn usage(ctx: &mut Ctx, args: &[Bytes]) -> CmdResult {
    let mut j = 3;
    while j < args.len() {
        if is(&args[j], "SAMPLES") && j + 1 < args.len() {
            if args::int(&args[j + 1])? < 0 {
                return Err(SYNTAX);
            }
            j += 2;
        } else {
            return Err(SYNTAX);
        }
    }
    match ctx.ks.peek(&args[2]) {
        Some(entry) => {
            let bytes = entry.memory() as i64;
            ctx.out.int(bytes);
        }
        None => ctx.out.null(),
    }
    Ok(())
}

fn help(ctx: &mut Ctx, _args: &[Bytes]) -> CmdResult {
    let lines = [
        "MEMORY <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "DOCTOR",
        "    Return memory problems reports.",
        "MALLOC-STATS",
        "    Return internal statistics report from the memory allocator.",
        "PURGE",
        "    Attempt to purge dirty pages for reclamation by the allocator.",
        "STATS",
        "    Return information about the memory usage of the server.",
        "USAGE <key> [SAMPLES <count>]",
        "    Return memory in bytes used by <key> and its value. Nested values are",
        "    sampled up to <count> times (default: 5, 0 means sample all).",
        "HELP",
        "    Print this help.",
    ];
    ctx.out.array(lines.len());
    for line in lines {
        ctx.out.simple(line);
    }
    Ok(())
}
