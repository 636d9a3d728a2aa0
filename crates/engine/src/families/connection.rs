//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET and the
//! CLIENT container. They run on the connection's core (`Exec::Node`); the
//! server crate implements them. Only their rows live here.

use crate::command::spec::{acl, flags::*, CommandSpec, Exec, NodeCommand as N};

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd)).acl(acl::CONNECTION)
}

pub static COMMANDS: &[CommandSpec] = &[
    node("ping", -1, FAST | SENTINEL, N::Ping)
        .tips(&["request_policy:all_shards", "response_policy:all_succeeded"])
        .doc("connection", "1.0.0", "Returns the server's liveliness response.", "O(1)", "[message]"),
    node("echo", 2, LOADING | STALE | FAST, N::Echo)
        .doc("connection", "1.0.0", "Returns the given string.", "O(1)", "message"),
    node("select", 2, LOADING | STALE | FAST, N::Select)
        .doc("connection", "1.0.0", "Changes the selected database.", "O(1)", "index"),
    node("quit", -1, ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH, N::Quit)
        .doc("connection", "1.0.0", "Closes the connection.", "O(1)", "")
        .deprecated("7.2.0", "just closing the connection"),
];
