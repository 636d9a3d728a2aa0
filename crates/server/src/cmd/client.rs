//! The CLIENT container: ID, SETNAME, GETNAME, SETINFO, LIST, INFO, KILL,
//! REPLY, NO-EVICT, NO-TOUCH, TRACKING, CACHING, GETREDIR, TRACKINGINFO,
//! HELP (UNBLOCK lives with the blocking commands, `cmd::blocking`).
//! Semantics and error texts follow Redis
//! 7.2's `clientCommand` (networking.c).
//!
//! A connection lives on the core that accepted it and is registered in that
//! core's [`ClientRegistry`](crate::net::clients::ClientRegistry), so LIST
//! and KILL visit every core (`invoke_on_all`); the others only touch the
//! caller's own connection.

use crate::cmd::connection::check_client_name;
use crate::net::clients::ClientHandle;
use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::args::{is, text};
use ringdb_engine::command::error::SYNTAX;
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_types::number::parse_i64;

/// Redis's client types (CLIENT LIST TYPE, CLIENT KILL TYPE).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ClientType {
    Normal,
    Replica,
    PubSub,
    Master,
}

impl ClientType {
    /// Redis's `getClientTypeByName`.
    fn parse(name: &[u8]) -> Result<Self, CmdError> {
        if is(name, "normal") {
            Ok(ClientType::Normal)
        } else if is(name, "slave") || is(name, "replica") {
            Ok(ClientType::Replica)
        } else if is(name, "pubsub") {
            Ok(ClientType::PubSub)
        } else if is(name, "master") {
            Ok(ClientType::Master)
        } else {
            Err(CmdError::owned(format!("ERR Unknown client type '{}'", text(name))))
        }
    }

    /// The type of a connected client (Redis's `getClientType`).
    fn of(client: &ClientHandle) -> Self {
        use crate::net::clients::LinkKind;
        let view = client.view.borrow();
        match view.link {
            LinkKind::Replica => ClientType::Replica,
            LinkKind::Master => ClientType::Master,
            LinkKind::None if view.sub + view.psub + view.ssub > 0 => ClientType::PubSub,
            LinkKind::None => ClientType::Normal,
        }
    }
}

pub async fn id(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let id = conn.state.id as i64;
    conn.reply().int(id);
    Ok(())
}

/// CLIENT SETNAME name: an empty name removes the name.
pub async fn setname(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    check_client_name(&args[2])?;
    conn.handle.view.borrow_mut().name = text(&args[2]);
    conn.reply().ok();
    Ok(())
}

pub async fn getname(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let name = conn.handle.view.borrow().name.clone();
    if name.is_empty() {
        conn.reply().null();
    } else {
        conn.reply().bulk(name.as_bytes());
    }
    Ok(())
}

/// CLIENT SETINFO LIB-NAME|LIB-VER value (7.2): shown in CLIENT LIST; an
/// empty value clears it.
pub async fn setinfo(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let (attr, value) = (&args[2], &args[3]);
    let lib_name = if is(attr, "lib-name") {
        true
    } else if is(attr, "lib-ver") {
        false
    } else {
        return Err(CmdError::owned(format!("ERR Unrecognized option '{}'", text(attr))));
    };
    if value.iter().any(|&c| !(b'!'..=b'~').contains(&c)) {
        return Err(CmdError::owned(format!(
            "ERR {} cannot contain spaces, newlines or special characters.",
            text(attr)
        )));
    }
    {
        let mut view = conn.handle.view.borrow_mut();
        let field = if lib_name { &mut view.lib_name } else { &mut view.lib_ver };
        *field = text(value);
    }
    conn.reply().ok();
    Ok(())
}

/// Which clients CLIENT LIST shows.
#[derive(Clone)]
enum ListFilter {
    All,
    Type(ClientType),
    Ids(Vec<u64>),
}

fn parse_list(args: &[Bytes]) -> Result<ListFilter, CmdError> {
    if args.len() == 4 && is(&args[2], "type") {
        return ClientType::parse(&args[3]).map(ListFilter::Type);
    }
    if args.len() > 3 && is(&args[2], "id") {
        let ids = args[3..]
            .iter()
            .map(|a| parse_i64(a).map(|n| n as u64).ok_or(CmdError::new("ERR Invalid client ID")))
            .collect::<Result<Vec<u64>, CmdError>>()?;
        return Ok(ListFilter::Ids(ids));
    }
    if args.len() != 2 {
        return Err(SYNTAX);
    }
    Ok(ListFilter::All)
}

/// CLIENT LIST [TYPE type] [ID id ...]: the clients of every core, in
/// connection order (or in the order of the ids asked for).
pub async fn list(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let filter = parse_list(args)?;
    conn.update_view();
    let wanted = filter.clone();
    let per_core = conn
        .core
        .invoke_on_all(move |core| {
            core.clients
                .borrow()
                .iter()
                .filter(|c| match &wanted {
                    ListFilter::All => true,
                    ListFilter::Type(t) => ClientType::of(c) == *t,
                    ListFilter::Ids(ids) => ids.contains(&c.id),
                })
                .map(|c| (c.id, c.describe()))
                .collect::<Vec<(u64, String)>>()
        })
        .await?;
    let mut lines: Vec<(u64, String)> = per_core.into_iter().flatten().collect();
    lines.sort_by_key(|(id, _)| *id);
    let mut out = String::new();
    let mut push = |line: &str| {
        out.push_str(line);
        out.push('\n');
    };
    match &filter {
        ListFilter::Ids(ids) => {
            for id in ids {
                if let Ok(i) = lines.binary_search_by_key(id, |(id, _)| *id) {
                    push(&lines[i].1);
                }
            }
        }
        _ => lines.iter().for_each(|(_, line)| push(line)),
    }
    conn.reply().verbatim("txt", out.as_bytes());
    Ok(())
}

/// CLIENT INFO: the caller's own CLIENT LIST line.
pub async fn info(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    conn.update_view();
    let mut line = conn.handle.describe();
    line.push('\n');
    conn.reply().verbatim("txt", line.as_bytes());
    Ok(())
}

/// What CLIENT KILL matches; every given filter must match.
#[derive(Clone, Default)]
struct KillFilter {
    addr: Option<String>,
    laddr: Option<String>,
    kind: Option<ClientType>,
    id: Option<u64>,
    user: Option<String>,
    skip_me: bool,
}

impl KillFilter {
    fn matches(&self, client: &ClientHandle) -> bool {
        self.addr.as_ref().is_none_or(|a| *a == client.addr)
            && self.laddr.as_ref().is_none_or(|a| *a == client.laddr)
            && self.kind.is_none_or(|t| ClientType::of(client) == t)
            && self.id.is_none_or(|id| id == client.id)
            && self.user.as_ref().is_none_or(|u| **u == *client.view.borrow().user)
    }
}

/// Reads the filters of the new form (`CLIENT KILL <option> <value> ...`).
fn parse_kill(args: &[Bytes], acl: &ringdb_engine::acl::Acl) -> Result<KillFilter, CmdError> {
    let mut filter = KillFilter { skip_me: true, ..KillFilter::default() };
    let mut i = 2;
    while i < args.len() {
        let (option, value) = match args.get(i + 1) {
            Some(value) => (&args[i], value),
            None => return Err(SYNTAX),
        };
        if is(option, "id") {
            let id = parse_i64(value)
                .filter(|&n| n >= 1)
                .ok_or(CmdError::new("ERR client-id should be greater than 0"))?;
            filter.id = Some(id as u64);
        } else if is(option, "type") {
            filter.kind = Some(ClientType::parse(value)?);
        } else if is(option, "addr") {
            filter.addr = Some(text(value));
        } else if is(option, "laddr") {
            filter.laddr = Some(text(value));
        } else if is(option, "user") {
            if acl.user(&text(value)).is_none() {
                return Err(CmdError::owned(format!("ERR No such user '{}'", text(value))));
            }
            filter.user = Some(text(value));
        } else if is(option, "skipme") {
            filter.skip_me = if is(value, "yes") {
                true
            } else if is(value, "no") {
                false
            } else {
                return Err(SYNTAX);
            };
        } else {
            return Err(SYNTAX);
        }
        i += 2;
    }
    Ok(filter)
}

/// CLIENT KILL ip:port | CLIENT KILL <filter> <value> ...: closes matching
/// clients on every core. The caller itself is closed after its reply.
pub async fn kill(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let legacy = args.len() == 3;
    let filter = if legacy {
        // The old form may kill the caller itself.
        KillFilter { addr: Some(text(&args[2])), skip_me: false, ..KillFilter::default() }
    } else {
        parse_kill(args, conn.core.shared.acl)?
    };
    let me = conn.state.id;
    let per_core = conn
        .core
        .invoke_on_all(move |core| {
            let mut killed = 0usize;
            let mut killed_me = false;
            for client in core.clients.borrow().iter().filter(|c| filter.matches(c)) {
                if client.id == me {
                    if filter.skip_me {
                        continue;
                    }
                    killed_me = true;
                } else {
                    client.kill();
                }
                killed += 1;
            }
            (killed, killed_me)
        })
        .await?;
    let killed: usize = per_core.iter().map(|(n, _)| n).sum();
    if legacy {
        if killed == 0 {
            return Err(CmdError::new("ERR No such client"));
        }
        conn.reply().ok();
    } else {
        conn.reply().int(killed as i64);
    }
    if per_core.iter().any(|(_, me)| *me) {
        conn.state.close_after_reply = true;
    }
    Ok(())
}

/// CLIENT REPLY ON|OFF|SKIP. OFF and SKIP send no reply of their own.
pub async fn reply(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let mode = &args[2];
    if is(mode, "on") {
        conn.state.reply_off = false;
        conn.state.skip_next = false;
        conn.state.skip_current = false;
        conn.reply().ok();
    } else if is(mode, "off") {
        conn.state.reply_off = true;
    } else if is(mode, "skip") {
        if !conn.state.reply_off {
            conn.state.skip_next = true;
        }
    } else {
        return Err(SYNTAX);
    }
    Ok(())
}

fn on_off(arg: &[u8]) -> Result<bool, CmdError> {
    if is(arg, "on") {
        Ok(true)
    } else if is(arg, "off") {
        Ok(false)
    } else {
        Err(SYNTAX)
    }
}

/// CLIENT NO-EVICT ON|OFF: shown as the `e` flag (ringdb never evicts
/// clients for memory, so there is nothing else to change).
pub async fn no_evict(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    conn.state.no_evict = on_off(&args[2])?;
    conn.reply().ok();
    Ok(())
}

/// CLIENT PAUSE timeout [WRITE|ALL]: every core's clients wait (see
/// `ringdb_engine::pause` and `crate::route::pause`).
pub async fn pause(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    use ringdb_engine::pause::PauseKind;
    let timeout = ringdb_engine::command::args::int(&args[2])
        .map_err(|_| CmdError::new("ERR timeout is not an integer or out of range"))?;
    if timeout < 0 {
        return Err(CmdError::new("ERR timeout is negative"));
    }
    let kind = match args.get(3) {
        None => PauseKind::All,
        Some(a) if a.eq_ignore_ascii_case(b"write") && args.len() == 4 => PauseKind::Write,
        Some(a) if a.eq_ignore_ascii_case(b"all") && args.len() == 4 => PauseKind::All,
        Some(_) => return Err(SYNTAX),
    };
    let now = ringdb_engine::shard::now_ms();
    conn.core.shared.pause.pause(kind, now.saturating_add(timeout as u64));
    conn.reply().ok();
    Ok(())
}

/// CLIENT UNPAUSE: the paused clients go on.
pub async fn unpause(conn: &mut Connection) -> CmdResult {
    conn.core.shared.pause.unpause();
    conn.reply().ok();
    Ok(())
}

/// CLIENT NO-TOUCH ON|OFF: this client's reads stop updating the keys'
/// LRU/LFU data (the shard honours `ClientInfo::no_touch`).
pub async fn no_touch(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    conn.state.no_touch = on_off(&args[2])?;
    conn.reply().ok();
    Ok(())
}

/// CLIENT TRACKING ON|OFF [REDIRECT id] [PREFIX p ...] [BCAST] [OPTIN]
/// [OPTOUT] [NOLOOP] (see [`crate::push::tracking`]).
pub async fn tracking(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    use crate::push::tracking::{parse, ClientTracking, Remember};
    let request = parse(args);
    // Redis looks the target up as soon as it reads REDIRECT.
    let redirect = match request.redirect {
        Some(id) => Some((id as u64, core_of_client(conn, id).await?)),
        None => None,
    };
    let options = request.options?;
    if !request.on? {
        stop_tracking(conn).await;
        conn.reply().ok();
        return Ok(());
    }
    let id = conn.state.id;
    ClientTracking::check(conn.core.push.borrow().tracking.get(id), &options)?;
    let remember = Remember::of(&options);
    conn.ensure_mailbox();
    let gained =
        conn.core.push.borrow_mut().tracking.enable(id, redirect.unwrap_or((0, 0)), options);
    // The connection's state first: whatever happens next, turning
    // tracking off (or leaving) undoes all of it.
    conn.state.tracking = Some(remember);
    {
        let mut view = conn.handle.view.borrow_mut();
        view.tracking = true;
        view.tracking_bcast = remember == Remember::Never;
        view.tracking_broken = false;
        view.redirect = redirect.map_or(0, |(id, _)| id as i64);
    }
    for prefix in gained {
        tell_shards_about_prefix(conn, prefix, true).await?;
    }
    conn.reply().ok();
    Ok(())
}

/// The core of the connected client `id`, or Redis's error when there is
/// none.
async fn core_of_client(conn: &Connection, id: i64) -> Result<u16, CmdError> {
    let found = conn
        .core
        .invoke_on_all(move |core| {
            id > 0 && core.clients.borrow().get(id as u64).is_some_and(|c| !c.is_killed())
        })
        .await?;
    match found.iter().position(|&here| here) {
        Some(core) => Ok(core as u16),
        None => Err(CmdError::new("ERR The client ID you want redirect to does not exist")),
    }
}

/// Tells every shard that this core gained its first (`present`) or lost
/// its last BCAST client of `prefix`.
async fn tell_shards_about_prefix(
    conn: &Connection,
    prefix: Bytes,
    present: bool,
) -> Result<(), CmdError> {
    let home = conn.core.id.0;
    conn.core
        .invoke_on_all(move |core| {
            core.shard.borrow_mut().state.funnel.tracking.note_prefix(prefix.clone(), home, present)
        })
        .await?;
    Ok(())
}

/// Turns tracking off for the connection (CLIENT TRACKING OFF, RESET,
/// disconnect).
pub async fn stop_tracking(conn: &mut Connection) {
    if conn.state.tracking.take().is_none() {
        return;
    }
    conn.state.caching = false;
    let lost = conn.core.push.borrow_mut().tracking.disable(conn.state.id);
    for prefix in lost {
        // Only a job that panicked fails here; the prefix then stays
        // known to a shard, which costs an unwanted delivery, not a wrong one.
        let _ = tell_shards_about_prefix(conn, prefix, false).await;
    }
    let mut view = conn.handle.view.borrow_mut();
    view.tracking = false;
    view.tracking_bcast = false;
    view.tracking_broken = false;
    view.redirect = -1;
}

/// CLIENT CACHING YES|NO: whether the next command's reads are remembered
/// in OPTIN / OPTOUT mode.
pub async fn caching(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    use crate::push::tracking::Remember;
    let Some(mode) = conn.state.tracking else {
        return Err(CmdError::new(
            "ERR CLIENT CACHING can be called only when the client is in tracking mode with OPTIN or \
             OPTOUT mode enabled",
        ));
    };
    if is(&args[2], "yes") {
        if mode != Remember::OptIn {
            return Err(CmdError::new(
                "ERR CLIENT CACHING YES is only valid when tracking is enabled in OPTIN mode.",
            ));
        }
    } else if is(&args[2], "no") {
        if mode != Remember::OptOut {
            return Err(CmdError::new(
                "ERR CLIENT CACHING NO is only valid when tracking is enabled in OPTOUT mode.",
            ));
        }
    } else {
        return Err(SYNTAX);
    }
    conn.state.caching = true;
    conn.reply().ok();
    Ok(())
}

/// CLIENT GETREDIR: the redirect target, 0 for none, -1 when not tracking.
pub async fn getredir(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let redirect = conn.handle.view.borrow().redirect;
    conn.reply().int(redirect);
    Ok(())
}

/// CLIENT TRACKINGINFO: flags, redirect and prefixes, as Redis.
pub async fn trackinginfo(conn: &mut Connection, _args: &[Bytes]) -> CmdResult {
    let settings = conn.core.push.borrow().tracking.get(conn.state.id).cloned();
    let mut flags: Vec<&str> = Vec::new();
    let caching = conn.state.caching;
    match &settings {
        None => flags.push("off"),
        Some(t) => {
            flags.push("on");
            let optional = [
                (t.bcast, "bcast"),
                (t.optin, "optin"),
                (t.optin && caching, "caching-yes"),
                (t.optout, "optout"),
                (t.optout && caching, "caching-no"),
                (t.noloop, "noloop"),
                (t.broken_redirect, "broken_redirect"),
            ];
            flags.extend(optional.iter().filter(|(on, _)| *on).map(|(_, name)| *name));
        }
    }
    let mut out = conn.reply();
    out.map(3);
    out.bulk(b"flags");
    out.set(flags.len());
    for flag in flags {
        out.bulk(flag.as_bytes());
    }
    out.bulk(b"redirect");
    out.int(settings.as_ref().map_or(-1, |t| t.redirect as i64));
    out.bulk(b"prefixes");
    let prefixes: Vec<Bytes> =
        settings.map(|t| t.prefixes.into_iter().collect()).unwrap_or_default();
    out.array(prefixes.len());
    for prefix in &prefixes {
        out.bulk(prefix);
    }
    Ok(())
}

const HELP: &[&str] = &[
    "CACHING (YES|NO)",
    "    Enable/disable tracking of the keys for next command in OPTIN/OPTOUT modes.",
    "GETREDIR",
    "    Return the client ID we are redirecting to when tracking is enabled.",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made from the specified address",
    "    * LADDR (<ip:port>|<unixsocket>:0)",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "TRACKING (ON|OFF) [REDIRECT <id>] [BCAST] [PREFIX <prefix> [...]]",
    "         [OPTIN] [OPTOUT] [NOLOOP]",
    "    Control server assisted client side caching.",
    "TRACKINGINFO",
    "    Report tracking status for the current connection.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
];

pub async fn help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::cmd::help(conn, args, HELP);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(s: &str) -> Vec<Bytes> {
        s.split(' ').map(|a| Bytes::copy_from_slice(a.as_bytes())).collect()
    }

    fn kill_err(s: &str) -> String {
        parse_kill(&args(s), ringdb_engine::acl::registry())
            .err()
            .map(|e| e.text().to_string())
            .unwrap_or_default()
    }

    #[test]
    fn kill_filters_and_errors() {
        assert_eq!(kill_err("CLIENT KILL id 10 wrong_arg"), "ERR syntax error");
        assert_eq!(kill_err("CLIENT KILL id str"), "ERR client-id should be greater than 0");
        assert_eq!(kill_err("CLIENT KILL id 0"), "ERR client-id should be greater than 0");
        assert_eq!(kill_err("CLIENT KILL type wrong_type"), "ERR Unknown client type 'wrong_type'");
        assert_eq!(kill_err("CLIENT KILL user wrong_user"), "ERR No such user 'wrong_user'");
        assert_eq!(kill_err("CLIENT KILL skipme yes_or_no"), "ERR syntax error");
        let f = parse_kill(
            &args("CLIENT KILL ID 7 SKIPME no TYPE normal USER default"),
            ringdb_engine::acl::registry(),
        )
        .ok();
        assert!(f
            .as_ref()
            .is_some_and(|f| f.id == Some(7) && !f.skip_me && f.kind == Some(ClientType::Normal)));
    }

    #[test]
    fn list_filters() {
        assert!(matches!(parse_list(&args("CLIENT LIST")), Ok(ListFilter::All)));
        assert!(matches!(
            parse_list(&args("CLIENT LIST TYPE replica")),
            Ok(ListFilter::Type(ClientType::Replica))
        ));
        assert!(
            matches!(parse_list(&args("CLIENT LIST ID 3 1")), Ok(ListFilter::Ids(ids)) if ids == vec![3, 1])
        );
        let err = parse_list(&args("CLIENT LIST TYPE foo")).err().map(|e| e.text().to_string());
        assert_eq!(err.as_deref(), Some("ERR Unknown client type 'foo'"));
        let err = parse_list(&args("CLIENT LIST ID x")).err().map(|e| e.text().to_string());
        assert_eq!(err.as_deref(), Some("ERR Invalid client ID"));
        let err = parse_list(&args("CLIENT LIST foo")).err().map(|e| e.text().to_string());
        assert_eq!(err.as_deref(), Some("ERR syntax error"));
    }
}
