//! The ACL container (CAT, DELUSER, DRYRUN, GENPASS, GETUSER, LIST, LOAD,
//! LOG, SAVE, SETUSER, USERS, WHOAMI, HELP) with Redis 7.0's replies and
//! texts (`aclCommand`), the users at start-up (`user` lines or `aclfile`),
//! and what a change does to connected clients: those of a deleted user
//! are closed, and subscribers that lost a channel are closed, as Redis
//! does.

use crate::net::connection::Connection;
use crate::node::Core;
use bytes::Bytes;
use ringdb_engine::acl::{self, Acl, Context, LogEntry, Reason, User, Users, Verdict};
use ringdb_engine::command::args::{is, text};
use ringdb_engine::command::{table, CmdError, CmdResult, Registered};
use ringdb_types::number::parse_i64;
use std::rc::Rc;
use std::sync::Arc;

const NO_ACL_FILE: &str = "ERR This Redis instance is not configured to use an ACL file. You may want to specify users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a Redis configuration file set) in order to store users in the Redis configuration.";

/// The users the server starts with: the default user with `requirepass`,
/// then the configuration's `user` lines or the ACL file (not both, as
/// Redis refuses).
pub fn startup(config: &crate::config::Config) -> Result<&'static Acl, String> {
    let acl = acl::registry();
    let pubsub_all = pubsub_all(config);
    let file = config.get("aclfile").unwrap_or("");
    if !file.is_empty() && !config.users.is_empty() {
        return Err("Configuring Redis with users defined in redis.conf and at the same setting an ACL file path is invalid. This setup is very likely to lead to configuration errors and security holes, please define either an ACL file or declare users directly in your redis.conf, but not both.".into());
    }
    acl.set_default_password(config.requirepass().map(str::as_bytes));
    acl.set_log_max_len(config.int("acllog-max-len").max(0) as usize);
    if !config.users.is_empty() {
        let lines: Vec<Vec<Bytes>> = config
            .users
            .iter()
            .map(|l| l.iter().map(|a| Bytes::copy_from_slice(a.as_bytes())).collect())
            .collect();
        let users = Users::from_config_lines(&lines, acl.default_user(), pubsub_all)
            .map_err(|e| format!("{e}. Critical error while loading ACLs. Exiting."))?;
        acl.replace(users);
    }
    if !file.is_empty() {
        let text = std::fs::read(file)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: Error loading ACLs, opening file '{file}': {e}"))?;
        let users = Users::from_acl_file(&text, file, pubsub_all)
            .map_err(|e| format!("Aborting Redis startup because of ACL errors: {e}"))?;
        acl.replace(users);
    }
    Ok(acl)
}

fn pubsub_all(config: &crate::config::Config) -> bool {
    config.get("acl-pubsub-default") == Some("allchannels")
}

/// Records a refusal in the ACL log. `arg` is the refused key or channel's
/// position in `args`, if any.
pub fn log_denial(
    conn: &Connection,
    verdict: Verdict,
    full_name: &str,
    args: &[Bytes],
    context: Context,
) {
    let (reason, at) = verdict.reason();
    let object = match at {
        Some(i) => text(&args[i]),
        None => full_name.to_string(),
    };
    let username = conn.state.user.name().to_string();
    let entry = LogEntry::new(reason, context, object, username, conn.handle.describe());
    conn.core.shared.acl.log(entry);
}

/// Where a command the connection runs now comes from, for the log.
fn context(conn: &Connection) -> Context {
    if conn.state.multi.is_some() {
        Context::Multi
    } else {
        Context::Toplevel
    }
}

/// A failed AUTH or HELLO AUTH, in the log as Redis writes it.
pub fn log_auth_failure(conn: &Connection, command: &[u8], username: &[u8]) {
    let entry = LogEntry::new(
        Reason::Auth,
        context(conn),
        text(command),
        text(username),
        conn.handle.describe(),
    );
    conn.core.shared.acl.log(entry);
}

/// Checks `reg` with `args` for this connection's user; refusals are
/// logged. The error is Redis's `-NOPERM`.
pub fn check(conn: &Connection, reg: &Registered, args: &[Bytes]) -> Result<(), CmdError> {
    let verdict = conn.state.user.check(reg, args);
    if verdict == Verdict::Allowed {
        return Ok(());
    }
    log_denial(conn, verdict, &reg.full_name, args, context(conn));
    Err(CmdError::owned(verdict.error(&reg.full_name)))
}

/// For a command that forms keys from data (SORT BY/GET): whether its
/// user may read every key, which decides if it may form them.
pub fn note_key_reads(conn: &mut Connection, reg: &Registered, args: &[Bytes]) {
    if reg.spec.formed_keys.is_some() {
        let user = &conn.state.user;
        conn.state.partial_key_read =
            !user.unrestricted() && !user.every_key_allowed(reg, args, acl::READ);
    }
}

pub async fn setuser(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let name = &args[2];
    if !acl::valid_name(name) {
        return Err(CmdError::new("ERR Usernames can't contain spaces or null characters"));
    }
    let name = text(name);
    let pubsub_all = pubsub_all(&conn.core.config.borrow());
    let (old, new) = conn
        .core
        .shared
        .acl
        .change(|users| users.set_user(&name, &args[3..], pubsub_all))
        .map_err(CmdError::owned)?;
    if let Some(old) = old {
        if !new.keeps_channels_of(&old) {
            close_subscribers_outside(conn, &name, new.all_channel_patterns()).await?;
        }
        blocked_look_again(conn).await?;
    }
    conn.reply().ok();
    Ok(())
}

/// Closes `user`'s subscribers with a subscription `patterns` no longer
/// allow (`None`: every channel is allowed).
async fn close_subscribers_outside(
    conn: &mut Connection,
    user: &str,
    patterns: Option<Vec<Bytes>>,
) -> CmdResult {
    let Some(patterns) = patterns else { return Ok(()) };
    let user: Arc<str> = user.into();
    close_where(conn, move |core, client| {
        *client.view.borrow().user == *user
            && core
                .push
                .borrow()
                .subscribes_outside(client.id, |c, pattern| acl::channel_in(&patterns, c, pattern))
    })
    .await
}

/// Clients blocked in a command check it again against the changed rules
/// (one that is no longer allowed gets -NOPERM instead of its reply).
async fn blocked_look_again(conn: &mut Connection) -> CmdResult {
    conn.core.invoke_on_all(|core| core.blocked.borrow().acl_changed()).await?;
    Ok(())
}

/// Closes every connection authenticated as one of `names` (a deleted or
/// reloaded user).
pub async fn close_clients_of(conn: &mut Connection, names: Vec<String>) -> CmdResult {
    if names.is_empty() {
        return Ok(());
    }
    close_where(conn, move |_, client| names.iter().any(|n| **n == *client.view.borrow().user))
        .await
}

/// Closes the clients on every core that `doomed` picks; the caller
/// itself after its reply.
async fn close_where(
    conn: &mut Connection,
    doomed: impl Fn(&Core, &crate::net::clients::ClientHandle) -> bool + Send + Sync + 'static,
) -> CmdResult {
    let doomed = Arc::new(doomed);
    let me = conn.state.id;
    let closed_me = conn
        .core
        .invoke_on_all(move |core| {
            let mut me_too = false;
            for client in core.clients.borrow().iter().filter(|c| doomed(core, c)) {
                if client.id == me {
                    me_too = true;
                } else {
                    client.kill();
                }
            }
            me_too
        })
        .await?;
    if closed_me.into_iter().any(|m| m) {
        conn.state.close_after_reply = true;
    }
    Ok(())
}

pub async fn deluser(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    if args[2..].iter().any(|n| n.as_ref() == b"default") {
        return Err(CmdError::new("ERR The 'default' user cannot be removed"));
    }
    let names: Vec<String> = args[2..].iter().map(|n| text(n)).collect();
    let deleted: Vec<String> = conn
        .core
        .shared
        .acl
        .change(|users| names.iter().filter(|n| users.remove(n).is_some()).cloned().collect());
    let count = deleted.len() as i64;
    close_clients_of(conn, deleted).await?;
    conn.reply().int(count);
    Ok(())
}

pub fn getuser(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let Some(user) = conn.core.shared.acl.user(&text(&args[2])) else {
        conn.reply().null();
        return Ok(());
    };
    let mut out = conn.reply();
    out.map(6);
    out.bulk(b"flags");
    let flags = user.flags();
    out.set(flags.len());
    for f in flags {
        out.bulk(f.as_bytes());
    }
    out.bulk(b"passwords");
    out.array(user.passwords().len());
    for p in user.passwords() {
        out.bulk(p.as_bytes());
    }
    describe_selector(&mut out, user.root());
    out.bulk(b"selectors");
    out.array(user.selectors().len() - 1);
    for s in &user.selectors()[1..] {
        out.map(3);
        describe_selector(&mut out, s);
    }
    Ok(())
}

fn describe_selector(out: &mut ringdb_protocol::ReplyWriter, s: &acl::Selector) {
    out.bulk(b"commands");
    out.bulk(s.describe_commands().as_bytes());
    out.bulk(b"keys");
    out.bulk(s.describe_keys().as_bytes());
    out.bulk(b"channels");
    out.bulk(s.describe_channels().as_bytes());
}

pub fn list(conn: &mut Connection, users_only: bool) -> CmdResult {
    let lines: Vec<String> = conn.core.shared.acl.read(|users| {
        if users_only {
            users.iter().map(|u| u.name().to_string()).collect()
        } else {
            users.describe()
        }
    });
    let mut out = conn.reply();
    out.array(lines.len());
    for l in lines {
        out.bulk(l.as_bytes());
    }
    Ok(())
}

pub fn whoami(conn: &mut Connection) -> CmdResult {
    let name = conn.state.user.name().to_string();
    conn.reply().bulk(name.as_bytes());
    Ok(())
}

fn acl_file(conn: &Connection) -> Result<String, CmdError> {
    match conn.core.config.borrow().get("aclfile") {
        Some(f) if !f.is_empty() => Ok(f.to_string()),
        _ => Err(CmdError::new(NO_ACL_FILE)),
    }
}

pub async fn load(conn: &mut Connection) -> CmdResult {
    let file = acl_file(conn)?;
    let text = std::fs::read(&file).map_err(|e| {
        CmdError::owned(format!("ERR Error loading ACLs, opening file '{file}': {e}"))
    })?;
    let pubsub_all = pubsub_all(&conn.core.config.borrow());
    let users = Users::from_acl_file(&text, &file, pubsub_all)
        .map_err(|e| CmdError::owned(format!("ERR {e}")))?;
    let old = conn.core.shared.acl.replace(users);
    // As Redis frees the old users: their clients are closed, the default
    // user's excepted (it is updated in place).
    let names: Vec<String> =
        old.iter().map(|u| u.name().to_string()).filter(|n| n != "default").collect();
    close_clients_of(conn, names).await?;
    conn.reply().ok();
    Ok(())
}

pub fn save(conn: &mut Connection) -> CmdResult {
    let file = acl_file(conn)?;
    let mut body = conn.core.shared.acl.read(|users| users.describe()).join("\n");
    body.push('\n');
    let tmp = format!("{file}.tmp-{}-{}", std::process::id(), ringdb_engine::shard::now_ms());
    let written = std::fs::write(&tmp, body).and_then(|_| std::fs::rename(&tmp, &file));
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        tracing::warn!("Writing ACL file for ACL SAVE: {e}");
        return Err(CmdError::new(
            "ERR There was an error trying to save the ACLs. Please check the server logs for more information",
        ));
    }
    conn.reply().ok();
    Ok(())
}

pub fn cat(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let Some(name) = args.get(2) else {
        let names = ringdb_engine::command::spec::acl::NAMES;
        let mut out = conn.reply();
        out.array(names.len());
        for (_, n) in names {
            out.bulk(n.as_bytes());
        }
        return Ok(());
    };
    if args.len() > 3 {
        return Err(crate::cmd::subcommand_syntax_error(args));
    }
    let cat = acl::category_by_name(name).ok_or_else(|| {
        CmdError::owned(format!("ERR Unknown category '{}'", text(&name[..name.len().min(128)])))
    })?;
    let names: Vec<&str> = table()
        .all_rows()
        .into_iter()
        .filter(|r| r.spec.acl_categories() & cat != 0)
        .map(|r| r.full_name.as_str())
        .collect();
    let mut out = conn.reply();
    out.array(names.len());
    for n in names {
        out.bulk(n.as_bytes());
    }
    Ok(())
}

pub fn genpass(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    const MAX_BITS: i64 = 4096;
    let bits = match args.get(2) {
        Some(b) => {
            parse_i64(b).ok_or(CmdError::new("ERR value is not an integer or out of range"))?
        }
        None => 256,
    };
    if args.len() > 3 {
        return Err(crate::cmd::subcommand_syntax_error(args));
    }
    if bits <= 0 || bits > MAX_BITS {
        return Err(CmdError::owned(format!(
            "ERR ACL GENPASS argument must be the number of bits for the output password, a positive number up to {MAX_BITS}"
        )));
    }
    let chars = (bits as usize).div_ceil(4);
    // From the kernel's random source, as Redis seeds GENPASS.
    let mut bytes = vec![0u8; chars.div_ceil(2)];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| std::io::Read::read_exact(&mut f, &mut bytes))
        .map_err(|e| CmdError::owned(format!("ERR could not read random bytes: {e}")))?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    conn.reply().bulk(&hex.as_bytes()[..chars]);
    Ok(())
}

pub fn log(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let mut count = 10usize;
    if let Some(arg) = args.get(2) {
        if args.len() > 3 {
            return Err(crate::cmd::subcommand_syntax_error(args));
        }
        if is(arg, "reset") {
            conn.core.shared.acl.log.lock().unwrap_or_else(|e| e.into_inner()).reset();
            conn.reply().ok();
            return Ok(());
        }
        let n =
            parse_i64(arg).ok_or(CmdError::new("ERR value is not an integer or out of range"))?;
        count = n.max(0) as usize;
    }
    let now = ringdb_engine::shard::now_ms();
    let entries: Vec<LogEntry> = {
        let log = conn.core.shared.acl.log.lock().unwrap_or_else(|e| e.into_inner());
        log.newest(count).cloned().collect()
    };
    let mut out = conn.reply();
    out.array(entries.len());
    for e in entries {
        out.map(7);
        out.bulk(b"count");
        out.int(e.count as i64);
        out.bulk(b"reason");
        out.bulk(e.reason.name().as_bytes());
        out.bulk(b"context");
        out.bulk(e.context.name().as_bytes());
        out.bulk(b"object");
        out.bulk(e.object.as_bytes());
        out.bulk(b"username");
        out.bulk(e.username.as_bytes());
        out.bulk(b"age-seconds");
        out.double(now.saturating_sub(e.at_ms) as f64 / 1000.0);
        out.bulk(b"client-info");
        out.bulk(e.client_info.as_bytes());
    }
    Ok(())
}

pub fn dryrun(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    let name = text(&args[2]);
    let user = conn
        .core
        .shared
        .acl
        .user(&name)
        .ok_or_else(|| CmdError::owned(format!("ERR User '{name}' not found")))?;
    let command = &args[3..];
    let reg = table()
        .lookup(command)
        .ok_or_else(|| CmdError::owned(format!("ERR Command '{}' not found", text(&command[0]))))?;
    let arity = reg.spec.arity;
    let argc = command.len() as i32;
    if (arity > 0 && arity != argc) || argc < -arity {
        return Err(CmdError::owned(format!(
            "ERR wrong number of arguments for '{}' command",
            reg.full_name
        )));
    }
    let verdict = user.check(reg, command);
    let mut out = conn.reply();
    match verdict {
        Verdict::Allowed => out.ok(),
        Verdict::DeniedCommand => out.bulk(
            format!("This user has no permissions to run the '{}' command", reg.full_name)
                .as_bytes(),
        ),
        Verdict::DeniedKey(i) => out.bulk(
            format!("This user has no permissions to access the '{}' key", text(&command[i]))
                .as_bytes(),
        ),
        Verdict::DeniedChannel(i) => out.bulk(
            format!("This user has no permissions to access the '{}' channel", text(&command[i]))
                .as_bytes(),
        ),
    }
    Ok(())
}

pub fn help(conn: &mut Connection, args: &[Bytes]) -> CmdResult {
    crate::cmd::help(
        conn,
        args,
        &[
            "CAT [<category>]",
            "    List all commands that belong to <category>, or all command categories",
            "    when no category is specified.",
            "DELUSER <username> [<username> ...]",
            "    Delete a list of users.",
            "DRYRUN <username> <command> [<arg> ...]",
            "    Returns whether the user can execute the given command without executing the command.",
            "GETUSER <username>",
            "    Get the user's details.",
            "GENPASS [<bits>]",
            "    Generate a secure 256-bit user password. The optional `bits` argument can",
            "    be used to specify a different size.",
            "LIST",
            "    Show users details in config file format.",
            "LOAD",
            "    Reload users from the ACL file.",
            "LOG [<count> | RESET]",
            "    Show the ACL log entries.",
            "SAVE",
            "    Save the current config to the ACL file.",
            "SETUSER <username> <attribute> [<attribute> ...]",
            "    Create or modify a user with the specified attributes.",
            "USERS",
            "    List all the registered usernames.",
            "WHOAMI",
            "    Return the current connection username.",
        ],
    );
    Ok(())
}

/// Re-reads the connection's user when the ACL changed since it last
/// looked: one atomic read a command. The link to our primary has no
/// user of the registry to re-read.
pub fn keep_user_current(conn: &mut Connection) {
    if conn.core.shared.acl.generation() != conn.state.acl_generation && !conn.state.master {
        refresh_user(conn);
    }
}

/// The user a connection keeps, after ACL changes: the current version of
/// its user, or the default user, logged out, when its user is gone (its
/// connection is being closed).
fn refresh_user(conn: &mut Connection) {
    let acl = &conn.core.shared.acl;
    conn.state.acl_generation = acl.generation();
    match acl.user(conn.state.user.name()) {
        Some(user) => conn.state.user = user,
        None => {
            conn.state.user = acl.default_user();
            conn.state.authenticated = false;
            conn.state.close_after_reply = true;
        }
    }
}

/// The client handle's user name, for CLIENT LIST and CLIENT KILL USER.
pub fn show_user(handle: &Rc<crate::net::clients::ClientHandle>, user: &User) {
    let mut view = handle.view.borrow_mut();
    if *view.user != *user.name() {
        view.user = user.name().into();
    }
}
