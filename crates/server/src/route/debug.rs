//! A debugging EVAL: the client turned the Lua debugger on (`SCRIPT DEBUG
//! YES|SYNC`), and its next EVAL runs in a session of
//! `ringdb_engine::scripting::debugger`, which talks to the client over its
//! own socket from inside the script's hook. As in Redis:
//!
//! - **SYNC**: the session runs here, with every shard held by this core,
//!   so the whole server waits for it, and what the script changed stays.
//! - **YES**: the process forks while every shard is held, the child runs
//!   the session on its copy of the data and exits, and the server goes on
//!   at once: what the script changes is never seen. (ringdb forks nothing
//!   else: this copy lives only as long as a developer debugs.)
//!
//! Either way the connection is closed after the script's reply, the end
//! of the session for the client (`redis-cli --ldb` reconnects).

use crate::net::connection::Connection;
use bytes::Bytes;
use ringdb_engine::command::spec::Debugs;
use ringdb_engine::command::{CmdError, Registered};
use ringdb_engine::scripting::debugger::Link;
use ringdb_engine::{Shard, ShardCommand};
use std::sync::Mutex;
use tracing::warn;

/// SCRIPT DEBUG's modes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Forked: the server is not blocked, changes are discarded.
    Yes,
    /// Blocking: the server waits, changes are kept.
    Sync,
}

/// The forked sessions still running, by process id (SHUTDOWN kills them).
static SESSIONS: Mutex<Vec<i32>> = Mutex::new(Vec::new());

/// Runs a command whose row [`Debugs`] under the debugger; its reply goes
/// to `conn.out`, and the connection closes after it.
pub async fn run(conn: &mut Connection, reg: &'static Registered, args: Vec<Bytes>, mode: Mode) {
    if reg.spec.debugs == Debugs::Refuses {
        conn.reply().error("ERR Please use EVAL instead of EVALSHA for debugging");
        return;
    }
    // The replies before it leave before anything of the session.
    if conn.flush().await.is_err() {
        conn.state.close_after_reply = true;
        return;
    }
    let command = ShardCommand { id: reg.id, spec: reg.spec, args, client: conn.state.info() };
    let mark = conn.out.len();
    let ran = match mode {
        Mode::Sync => {
            warn!("Redis synchronous debugging eval session started");
            let link = conn.debug_link();
            let ran = super::script::run_here(conn, &command, give(link)).await;
            // Not left for another client's EVAL when this one failed
            // before its script ran (a bad key count …).
            conn.core.shard.borrow_mut().state.scripting.debug_link = None;
            warn!("Redis synchronous debugging eval session ended");
            ran
        }
        Mode::Yes => forked(conn, &command).await,
    };
    if let Err(e) = ran {
        conn.out.truncate(mark);
        conn.reply().error(e.text());
    }
    conn.state.close_after_reply = true;
}

/// What readies the shard for a debugging run: the session's client.
fn give(link: Box<dyn Link>) -> impl FnOnce(&mut Shard) {
    move |shard| shard.state.scripting.debug_link = Some(link)
}

/// A forked session: the parent holds every shard only for the fork, and
/// closes its side of the connection without a reply.
async fn forked(conn: &mut Connection, command: &ShardCommand) -> Result<(), CmdError> {
    // The child's own descriptor for the socket; this core stops reading
    // it first, so that every byte the client sends reaches the child.
    // SAFETY: plain syscall on the connection's open descriptor.
    let fd = unsafe { libc::dup(conn.socket_fd()) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(CmdError::owned(format!(
            "ERR Fork() failed: can't run EVAL in debugging mode: {e}"
        )));
    }
    conn.stop_reading().await;
    let pid = super::script::fork_here(conn, command, fd).await;
    // SAFETY: the duplicate made above; the child has its own.
    unsafe { libc::close(fd) };
    let pid = pid?;
    warn!("Redis forked for debugging eval (session {pid})");
    SESSIONS.lock().unwrap_or_else(|e| e.into_inner()).push(pid);
    glommio::spawn_local(reap(pid)).detach();
    // The parent's side ends here, as Redis frees the client.
    conn.out.clear();
    Ok(())
}

/// In the forked child, after the run: sends the reply and exits.
pub fn child_exits(link: &mut dyn Link, reply: &[u8]) -> ! {
    link.send(reply);
    // SAFETY: ends the child at once: nothing of the parent's state (its
    // rings, files, other threads' work) is touched on the way out.
    unsafe { libc::_exit(0) }
}

/// In the forked child, before the run: the parent's signals are not its
/// business (Redis's child ignores them too).
pub fn child_starts() {
    // SAFETY: plain syscalls setting dispositions.
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGTERM, libc::SIG_IGN);
    }
}

/// Collects a forked session's exit.
async fn reap(pid: i32) {
    loop {
        let mut status = 0;
        // SAFETY: plain syscall on our own child.
        let done = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
        if done != 0 {
            SESSIONS.lock().unwrap_or_else(|e| e.into_inner()).retain(|&p| p != pid);
            warn!("Lua debugging session {pid} ended");
            return;
        }
        glommio::timer::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// Kills every forked session (at shutdown, as Redis's
/// `ldbKillForkedSessions`).
pub fn kill_sessions() {
    for pid in SESSIONS.lock().unwrap_or_else(|e| e.into_inner()).drain(..) {
        warn!("Killing debugging session {pid}");
        // SAFETY: plain syscall on our own child.
        unsafe { libc::kill(pid, libc::SIGKILL) };
    }
}
