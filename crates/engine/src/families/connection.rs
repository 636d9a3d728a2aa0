//! Connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT, RESET and the
//! CLIENT container. They run on the connection's core (`Exec::Node`); the
//! server crate implements them. PING, ECHO and SELECT need nothing but
//! their arguments, so they are written once here, for the server and for
//! scripts (`redis.call('ping')`) alike.

use crate::command::error::{CmdError, CmdResult, DB_INDEX_OUT_OF_RANGE};
use crate::command::spec::{acl, flags::*, CommandSpec, Exec, NodeCommand as N};
use bytes::Bytes;
use ringdb_protocol::ReplyWriter;

/// `PING [message]`. A RESP2 subscriber (`push_mode`) gets the answer as a
/// Pub/Sub-style array.
pub fn ping(out: &mut ReplyWriter, args: &[Bytes], push_mode: bool) -> CmdResult {
    if args.len() > 2 {
        return Err(CmdError::wrong_args("ping"));
    }
    if push_mode {
        out.array(2);
        out.bulk(b"pong");
        out.bulk(args.get(1).map_or(&b""[..], |m| &m[..]));
        return Ok(());
    }
    match args.get(1) {
        Some(msg) => out.bulk(msg),
        None => out.simple("PONG"),
    }
    Ok(())
}

/// ECHO message
pub fn echo(out: &mut ReplyWriter, args: &[Bytes]) -> CmdResult {
    out.bulk(&args[1]);
    Ok(())
}

/// SELECT index: the database it selects, of `databases` (Redis's
/// `getIntFromObjectOrReply`, with its two errors, then the range check).
pub fn select_index(args: &[Bytes], databases: usize) -> Result<usize, CmdError> {
    let not_int = CmdError::new("ERR value is not an integer or out of range");
    let db = crate::command::args::int_or(&args[1], not_int)?;
    let db = i32::try_from(db).map_err(|_| {
        CmdError::new("ERR value is out of range, value must between -2147483648 and 2147483647")
    })?;
    usize::try_from(db).ok().filter(|&db| db < databases).ok_or(DB_INDEX_OUT_OF_RANGE)
}

const fn node(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    CommandSpec::new(name, arity, flags, Exec::Node(cmd)).acl(acl::CONNECTION)
}

/// Flags every CLIENT subcommand but NO-TOUCH and HELP shares.
const CLIENT_FLAGS: u32 = NOSCRIPT | LOADING | STALE | SENTINEL;

/// A CLIENT subcommand: group `connection`, ACL `@connection`.
const fn client(name: &'static str, arity: i32, flags: u32, cmd: N) -> CommandSpec {
    node(name, arity, flags, cmd)
}

static CLIENT: &[CommandSpec] = &[
    client("id", 2, CLIENT_FLAGS, N::ClientId)
        .doc("connection", "5.0.0", "Returns the unique client ID of the connection.", "O(1)", ""),
    client("setname", 3, CLIENT_FLAGS, N::ClientSetName)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc("connection", "2.6.9", "Sets the connection name.", "O(1)", "connection-name"),
    client("getname", 2, CLIENT_FLAGS, N::ClientGetName)
        .doc("connection", "2.6.9", "Returns the name of the connection.", "O(1)", ""),
    client("setinfo", 4, CLIENT_FLAGS, N::ClientSetInfo)
        .tips(&["request_policy:all_nodes", "response_policy:all_succeeded"])
        .doc(
            "connection",
            "7.2.0",
            "Sets information specific to the client or connection.",
            "O(1)",
            "<\"lib-name\" libname | \"lib-ver\" libver>",
        ),
    client("list", -2, ADMIN | CLIENT_FLAGS, N::ClientList)
        .tips(&["nondeterministic_output"])
        .doc(
            "connection",
            "2.4.0",
            "Lists open connections.",
            "O(N) where N is the number of client connections",
            "[TYPE <normal | master | replica | pubsub>] [ID client-id [client-id ...]]",
        ),
    client("info", 2, CLIENT_FLAGS, N::ClientInfo)
        .tips(&["nondeterministic_output"])
        .doc("connection", "6.2.0", "Returns information about the connection.", "O(1)", ""),
    client("kill", -3, ADMIN | CLIENT_FLAGS, N::ClientKill)
        .doc(
            "connection",
            "2.4.0",
            "Terminates open connections.",
            "O(N) where N is the number of client connections",
            "<old-format=ip:port | <[ID client-id] | [TYPE <normal | master | slave | replica | pubsub>] | \
             [USER username] | [ADDR addr=ip:port] | [LADDR laddr=ip:port] | [SKIPME <YES | NO>] [[ID client-id] | \
             [TYPE <normal | master | slave | replica | pubsub>] | [USER username] | [ADDR addr=ip:port] | \
             [LADDR laddr=ip:port] | [SKIPME <YES | NO>] ...]>>",
        ),
    client("reply", 3, CLIENT_FLAGS, N::ClientReply)
        .doc("connection", "3.2.0", "Instructs the server whether to reply to commands.", "O(1)", "<ON | OFF | SKIP>"),
    client("no-evict", 3, ADMIN | CLIENT_FLAGS, N::ClientNoEvict)
        .doc("connection", "7.0.0", "Sets the client eviction mode of the connection.", "O(1)", "<ON | OFF>"),
    client("no-touch", 3, NOSCRIPT | LOADING | STALE, N::ClientNoTouch).doc(
        "connection",
        "7.2.0",
        "Controls whether commands sent by the client affect the LRU/LFU of accessed keys.",
        "O(1)",
        "<ON | OFF>",
    ),
    client("pause", -3, ADMIN | CLIENT_FLAGS, N::ClientPause)
        .doc("connection", "3.0.0", "Suspends commands processing.", "O(1)", "timeout:integer [WRITE | ALL]")
        .history(&[("6.2.0", "`CLIENT PAUSE WRITE` mode added along with the `mode` option.")]),
    client("unpause", 2, ADMIN | CLIENT_FLAGS, N::ClientUnpause).doc(
        "connection",
        "6.2.0",
        "Resumes processing of clients that were paused.",
        "O(N) Where N is the number of paused clients",
        "",
    ),
    client("unblock", -3, ADMIN | CLIENT_FLAGS, N::ClientUnblock).doc(
        "connection",
        "5.0.0",
        "Unblocks a client blocked by a blocking command from a different connection.",
        "O(log N) where N is the number of client connections",
        "client-id:integer [TIMEOUT | ERROR]",
    ),
    client("tracking", -3, CLIENT_FLAGS, N::ClientTracking).doc(
        "connection",
        "6.0.0",
        "Controls server-assisted client-side caching for the connection.",
        "O(1). Some options may introduce additional complexity.",
        "<ON | OFF> [REDIRECT client-id] [PREFIX prefix [PREFIX prefix ...]] [BCAST] [OPTIN] [OPTOUT] [NOLOOP]",
    ),
    client("caching", 3, CLIENT_FLAGS, N::ClientCaching).doc(
        "connection",
        "6.0.0",
        "Instructs the server whether to track the keys in the next request.",
        "O(1)",
        "<YES | NO>",
    ),
    client("getredir", 2, CLIENT_FLAGS, N::ClientGetRedir).doc(
        "connection",
        "6.0.0",
        "Returns the client ID to which the connection's tracking notifications are redirected.",
        "O(1)",
        "",
    ),
    client("trackinginfo", 2, CLIENT_FLAGS, N::ClientTrackingInfo).doc(
        "connection",
        "6.2.0",
        "Returns information about server-assisted client-side caching for the connection.",
        "O(1)",
        "",
    ),
    client("help", 2, LOADING | STALE | SENTINEL, N::ClientHelp)
        .doc("connection", "5.0.0", "Returns helpful text about the different subcommands.", "O(1)", ""),
];

/// Flags HELLO and AUTH share (RESET has the same minus SENTINEL).
const HANDSHAKE_FLAGS: u32 = NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | SENTINEL | ALLOW_BUSY;

pub static COMMANDS: &[CommandSpec] = &[
    node("ping", -1, FAST | SENTINEL | PUSH_MODE, N::Ping)
        .tips(&["request_policy:all_shards", "response_policy:all_succeeded"])
        .doc(
            "connection",
            "1.0.0",
            "Returns the server's liveliness response.",
            "O(1)",
            "[message]",
        ),
    node("echo", 2, LOADING | STALE | FAST, N::Echo).doc(
        "connection",
        "1.0.0",
        "Returns the given string.",
        "O(1)",
        "message",
    ),
    node("select", 2, LOADING | STALE | FAST, N::Select).doc(
        "connection",
        "1.0.0",
        "Changes the selected database.",
        "O(1)",
        "index",
    ),
    node(
        "quit",
        -1,
        ALLOW_BUSY | NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | PUSH_MODE | CONTROLS_MULTI,
        N::Quit,
    )
    .doc("connection", "1.0.0", "Closes the connection.", "O(1)", "")
    .deprecated("7.2.0", "just closing the connection"),
    node("hello", -1, HANDSHAKE_FLAGS, N::Hello).doc(
        "connection",
        "6.0.0",
        "Handshakes with the Redis server.",
        "O(1)",
        "[protover [AUTH username password] [SETNAME clientname]]",
    ),
    node("auth", -2, HANDSHAKE_FLAGS, N::Auth).doc(
        "connection",
        "1.0.0",
        "Authenticates the connection.",
        "O(N) where N is the number of passwords defined for the user",
        "[username] password",
    ),
    node(
        "reset",
        1,
        NOSCRIPT | LOADING | STALE | FAST | NO_AUTH | ALLOW_BUSY | PUSH_MODE | CONTROLS_MULTI,
        N::Reset,
    )
    .doc("connection", "6.2.0", "Resets the connection.", "O(1)", ""),
    CommandSpec { flags: SENTINEL | KEEPS_CACHING, ..CommandSpec::container("client", CLIENT) }
        .doc(
            "connection",
            "2.4.0",
            "A container for client connection commands.",
            "Depends on subcommand.",
            "",
        ),
];

#[cfg(test)]
mod tests {
    use crate::command::table;
    use bytes::Bytes;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    #[test]
    fn quoted_tokens_and_display_texts_in_syntax() {
        let t = table();
        let setinfo = t.get_full(b"client|setinfo").map(|r| r.spec).unwrap();
        let args = crate::command::docs::arguments(setinfo.doc.syntax, setinfo.keys).unwrap();
        let tokens: Vec<Option<&str>> =
            args[0].arguments.iter().map(|a| a.token.as_deref()).collect();
        assert_eq!(tokens, vec![Some("lib-name"), Some("lib-ver")]);
        let kill = t.get_full(b"client|kill").map(|r| r.spec).unwrap();
        let args = crate::command::docs::arguments(kill.doc.syntax, kill.keys).unwrap();
        let old = &args[0].arguments[0];
        assert_eq!((old.name.as_str(), old.display.as_deref()), ("old-format", Some("ip:port")));
    }

    #[test]
    fn client_subcommands_resolve_with_redis_errors() {
        let t = table();
        assert_eq!(
            t.resolve(&args("CLIENT LIST")).map(|r| r.full_name.as_str()).ok(),
            Some("client|list")
        );
        assert_eq!(
            t.resolve(&args("client No-Touch on")).map(|r| r.full_name.as_str()).ok(),
            Some("client|no-touch")
        );
        let err = t.resolve(&args("CLIENT KILL")).err().map(|e| e.text().to_string());
        assert_eq!(err.as_deref(), Some("ERR wrong number of arguments for 'client|kill' command"));
        let err = t.resolve(&args("CLIENT")).err().map(|e| e.text().to_string());
        assert_eq!(err.as_deref(), Some("ERR wrong number of arguments for 'client' command"));
        let err = t.resolve(&args("CLIENT FOO")).err().map(|e| e.text().to_string());
        assert_eq!(err.as_deref(), Some("ERR unknown subcommand 'FOO'. Try CLIENT HELP."));
    }
}
