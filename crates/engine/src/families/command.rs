//! The COMMAND container: the command table describing itself (COUNT, INFO,
//! DOCS, LIST, GETKEYS, GETKEYSANDFLAGS, HELP, and bare COMMAND). Every
//! subcommand runs on the connection's core (`Exec::Node`); the server crate
//! implements them. Only their rows live here.

use crate::command::spec::{acl, flags::*, CommandSpec, Exec, NodeCommand as N};

/// Flags every COMMAND row has: it answers while loading and when stale, and
/// Sentinel has it too.
const COMMAND_FLAGS: u32 = LOADING | STALE | SENTINEL;

const fn node(name: &'static str, arity: i32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, COMMAND_FLAGS, Exec::Node(cmd)).acl(acl::CONNECTION)
}

const UNORDERED: &[&str] = &["nondeterministic_output_order"];

static SUBCOMMANDS: &[CommandSpec] = &[
    node("count", 2, N::CommandCount).doc(
        "server",
        "2.8.13",
        "Returns a count of commands.",
        "O(1)",
        "",
    ),
    node("docs", -2, N::CommandDocs).tips(UNORDERED).doc(
        "server",
        "7.0.0",
        "Returns documentary information about one, multiple or all commands.",
        "O(N) where N is the number of commands to look up",
        "[command-name [command-name ...]]",
    ),
    node("getkeys", -3, N::CommandGetKeys).doc(
        "server",
        "2.8.13",
        "Extracts the key names from an arbitrary command.",
        "O(N) where N is the number of arguments to the command",
        "command [arg [arg ...]]",
    ),
    node("getkeysandflags", -3, N::CommandGetKeysAndFlags).doc(
        "server",
        "7.0.0",
        "Extracts the key names and access flags for an arbitrary command.",
        "O(N) where N is the number of arguments to the command",
        "command [arg [arg ...]]",
    ),
    node("help", 2, N::CommandHelp).doc(
        "server",
        "5.0.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
    node("info", -2, N::CommandInfo)
        .tips(UNORDERED)
        .doc(
            "server",
            "2.8.13",
            "Returns information about one, multiple or all commands.",
            "O(N) where N is the number of commands to look up",
            "[command-name [command-name ...]]",
        )
        .history(&[(
            "7.0.0",
            "Allowed to be called with no argument to get info on all commands.",
        )]),
    node("list", -2, N::CommandList).tips(UNORDERED).doc(
        "server",
        "7.0.0",
        "Returns a list of command names.",
        "O(N) where N is the total number of Redis commands",
        "[FILTERBY <MODULE module-name | ACLCAT category | PATTERN pattern>]",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[node("command", -1, N::Command)
    .tips(UNORDERED)
    .doc(
        "server",
        "2.8.13",
        "Returns detailed information about all commands.",
        "O(N) where N is the total number of Redis commands",
        "",
    )
    .subcommands(SUBCOMMANDS)];
