//! Hot-key detection: the HOTKEYS container (RULES, LIST, TOP, HELP),
//! HOTKEYS.WATCH and HOTKEYS.UNWATCH. They run on the connection's core
//! (`Exec::Node`) and visit every shard; the server crate implements them
//! (crates/server/src/cmd/hotkeys.rs), the counting lives in
//! [`crate::hotkeys`]. Only their rows live here.

use crate::command::spec::{flags::*, CommandSpec, Exec, NodeCommand as N};

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd))
}

const WATCHER: u32 = PUBSUB | NOSCRIPT | NO_MULTI | LOADING | STALE | PUSH_MODE | PUSH_REPLY;

static HOTKEYS_SUBCOMMANDS: &[CommandSpec] = &[
    node("rules", -3, ADMIN | NOSCRIPT | LOADING | STALE, N::HotkeysRules).doc(
        "hotkeys",
        "0.1.0",
        "Sets, shows or deletes the rules that decide which keys are hot.",
        "O(N) where N is the number of rules, plus O(M) for the M keys counted when rules change",
        "<SET name <PATTERN pattern | PREFIX prefix> INTERVAL interval:double THRESHOLD threshold:integer DURATION duration:double [COUNT <READS | WRITES | BOTH>] | GET [name] | DEL name>",
    ),
    node("list", 2, LOADING | STALE, N::HotkeysList).doc(
        "hotkeys",
        "0.1.0",
        "Returns the keys hot now, with their rule, count in the window and since when they are hot.",
        "O(N) where N is the number of hot keys",
        "",
    ),
    node("top", -2, LOADING | STALE, N::HotkeysTop).doc(
        "hotkeys",
        "0.1.0",
        "Returns the most accessed keys of the whole server right now, with estimated counts.",
        "O(K) where K is the number of keys each shard keeps in its top list",
        "[count]",
    ),
    node("help", 2, LOADING | STALE, N::HotkeysHelp).doc(
        "hotkeys",
        "0.1.0",
        "Returns helpful text about the different subcommands.",
        "O(1)",
        "",
    ),
];

pub static COMMANDS: &[CommandSpec] = &[
    CommandSpec::container("hotkeys", HOTKEYS_SUBCOMMANDS).doc(
        "hotkeys",
        "0.1.0",
        "A container for hot-key detection commands.",
        "Depends on subcommand.",
        "",
    ),
    node("hotkeys.watch", -1, WATCHER, N::HotkeysWatch).doc(
        "hotkeys",
        "0.1.0",
        "Pushes [\"hotkey\", key, count, rule] when a key (matching a pattern, if given) becomes hot and [\"coldkey\", key] when it cools down.",
        "O(N) where N is the number of keys hot now",
        "[pattern]",
    ),
    node("hotkeys.unwatch", 1, WATCHER, N::HotkeysUnwatch).doc(
        "hotkeys",
        "0.1.0",
        "Ends this connection's HOTKEYS.WATCH subscription.",
        "O(S) where S is the number of shards",
        "",
    ),
];
