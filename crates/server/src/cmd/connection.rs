//! PING, ECHO, SELECT, QUIT, HELLO, AUTH, RESET: the connection's own state.

use crate::net::connection::{ClientState, Connection};
use bytes::Bytes;
use ringdb_engine::command::args::{self, is};
use ringdb_engine::command::{CmdError, CmdResult};
use ringdb_engine::families::connection;
use ringdb_protocol::Resp;

/// The Redis version ringdb answers as (HELLO, INFO): the command set it
/// implements.
/// One version everywhere: the engine's (what scripts see).
pub const REDIS_VERSION: &str = ringdb_engine::scripting::REDIS_VERSION;

const WRONGPASS: CmdError =
    CmdError::new("WRONGPASS invalid username-password pair or user is disabled.");

pub fn ping(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let push_mode = conn.state.in_push_mode();
    connection::ping(&mut conn.reply(), args, push_mode)
}

pub fn echo(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    connection::echo(&mut conn.reply(), args)
}

pub fn select(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let databases = conn.core.config.borrow().databases();
    conn.state.db = connection::select_index(args, databases)?;
    conn.reply().ok();
    Ok(())
}

pub fn quit(conn: &mut Connection) -> CmdResult {
    conn.reply().ok();
    conn.state.close_after_reply = true;
    Ok(())
}

/// Logs the connection in as `user` when `password` is one of its own
/// (Redis's `ACLAuthenticateUser`); a failure is logged in ACL LOG.
fn authenticate(conn: &mut Connection, command: &[u8], user: &[u8], password: &[u8]) -> CmdResult {
    let found = conn.core.shared.acl.user(&String::from_utf8_lossy(user));
    match found {
        Some(u) if u.authenticates(password) => {
            conn.state.acl_generation = conn.core.shared.acl.generation();
            crate::cmd::acl::show_user(&conn.handle, &u);
            conn.state.user = u;
            conn.state.authenticated = true;
            Ok(())
        }
        _ => {
            crate::cmd::acl::log_auth_failure(conn, command, user);
            Err(WRONGPASS)
        }
    }
}

pub fn auth(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let (user, password): (&[u8], _) = match args.len() {
        2 => (b"default", &args[1]),
        3 => (&args[1], &args[2]),
        _ => return Err(crate::cmd::syntax()),
    };
    if args.len() == 2 && conn.core.shared.acl.default_user().nopass() {
        return Err(CmdError::new(
            "ERR AUTH <password> called without any password configured for the default user. \
             Are you sure your configuration is correct?",
        ));
    }
    authenticate(conn, &args[0], user, password)?;
    conn.reply().ok();
    Ok(())
}

/// Validates a client name as CLIENT SETNAME / HELLO SETNAME do.
pub fn check_client_name(name: &[u8]) -> CmdResult {
    if name.iter().any(|c| !(b'!'..=b'~').contains(c)) {
        return Err(CmdError::new(
            "ERR Client names cannot contain spaces, newlines or special characters.",
        ));
    }
    Ok(())
}

/// HELLO [protover [AUTH username password] [SETNAME clientname]]: as Redis's
/// `helloCommand`, every option is read (and a bad one refused) before the
/// credentials are checked, and nothing changes unless everything succeeds.
pub fn hello(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let mut version = None;
    let mut next = 1;
    if args.len() >= 2 {
        let v = args::int_or(
            &args[1],
            CmdError::new("ERR Protocol version is not an integer or out of range"),
        )?;
        if !(2..=3).contains(&v) {
            return Err(CmdError::new("NOPROTO unsupported protocol version"));
        }
        version = Some(v);
        next = 2;
    }
    let mut credentials = None;
    let mut name = None;
    let mut j = next;
    while j < args.len() {
        let more = args.len() - 1 - j;
        if is(&args[j], "AUTH") && more >= 2 {
            credentials = Some((&args[j + 1], &args[j + 2]));
            j += 3;
        } else if is(&args[j], "SETNAME") && more >= 1 {
            check_client_name(&args[j + 1])?;
            name = Some(&args[j + 1]);
            j += 2;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Syntax error in HELLO option '{}'",
                String::from_utf8_lossy(&args[j])
            )));
        }
    }
    if let Some((user, password)) = credentials {
        authenticate(conn, &args[0], user, password)?;
    }
    if !conn.state.authenticated {
        return Err(CmdError::new(
            "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH \
             <user> <pass> option can be used to authenticate the client and select the RESP protocol version at \
             the same time",
        ));
    }
    if let Some(name) = name {
        conn.handle.view.borrow_mut().name = String::from_utf8_lossy(name).into_owned();
    }
    if let Some(v) = version {
        conn.state.resp = if v == 3 { Resp::V3 } else { Resp::V2 };
        if conn.state.resp == Resp::V3 {
            // A RESP3 client may be sent invalidations it did not ask for
            // (it is another's CLIENT TRACKING REDIRECT target).
            conn.ensure_mailbox();
        }
    }
    let id = conn.state.id as i64;
    let proto = if conn.state.resp == Resp::V3 { 3 } else { 2 };
    let mut out = conn.reply();
    out.map(7);
    out.bulk(b"server");
    out.bulk(b"redis");
    out.bulk(b"version");
    out.bulk(REDIS_VERSION.as_bytes());
    out.bulk(b"proto");
    out.int(proto);
    out.bulk(b"id");
    out.int(id);
    out.bulk(b"mode");
    out.bulk(b"standalone");
    out.bulk(b"role");
    out.bulk(b"master");
    out.bulk(b"modules");
    out.array(0);
    Ok(())
}

/// RESET: the connection as newly connected (Redis's
/// `clearClientConnectionState`); the library name and version stay, since
/// they still describe the client behind the connection.
pub async fn reset(conn: &mut Connection) -> CmdResult {
    conn.state.multi = None;
    crate::route::multi::unwatch_all(conn).await;
    conn.leave_push_hub().await;
    // Everything else returns to a new connection's state (Redis's
    // clearClientConnectionState), CLIENT CACHING and REPLY OFF included;
    // RESET's own reply is still dropped after CLIENT REPLY SKIP (Redis
    // clears only the skip of the next command), and a close asked for
    // stays asked for.
    // As Redis, RESET logs the client out to the default user.
    let acl = &conn.core.shared.acl;
    let user = acl.default_user();
    crate::cmd::acl::show_user(&conn.handle, &user);
    let fresh = ClientState::new(
        conn.state.id,
        conn.state.home,
        !acl.auth_required(),
        user,
        acl.generation(),
    );
    let (skip_current, close_after_reply) = (conn.state.skip_current, conn.state.close_after_reply);
    conn.state = ClientState { skip_current, close_after_reply, ..fresh };
    conn.handle.view.borrow_mut().name.clear();
    conn.reply().simple("RESET");
    Ok(())
}
