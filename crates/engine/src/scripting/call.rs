//! `redis.call` / `redis.pcall`: a script runs a command of the table, with
//! Redis's checks (script.c `scriptCall`), on the shard that owns its keys.
//!
//! A script may touch any key, declared in KEYS or not, as in Redis. Where
//! the keys are depends on how the server runs the script ([`Reach`]):
//! - **held**: on the keyspace it was given, the shard that owns its
//!   declared keys (which it holds whole: the server starts it when no
//!   transaction holds any key there) or a scratch copy of the declared keys
//!   a cross-shard transaction gathered. A key beyond it (another shard's,
//!   or one the copy lacks) ends the run: the journal undoes what it
//!   changed ([`super::journal`]) and the server runs the script again
//!   with every shard. If the run changed a value too large to save, it
//!   cannot be undone: the command that named the key fails instead.
//! - **node**: every shard of the node is lent to the run
//!   ([`crate::lent`]); each command runs where its keys live.
//!
//! `lua-allow-undeclared-keys no` (or a script's lack of the
//! `allow-undeclared-keys` flag under it) refuses undeclared keys with the
//! error ringdb gave before it could run them.
use super::convert;
use super::journal::Journal;
use super::sandbox::RunState;
use crate::command::args::is;
use crate::command::ctx::ClientInfo;
use crate::command::spec::{flags, CommandSpec, Exec};
use crate::command::{table, CmdResult, Registered};
use crate::families::connection::{self, select_index};
use crate::keyspace::Keyspace;
use crate::lent::Lent;
use crate::shard::{call, Caller, Clock, ShardCommand, ShardState};
use bytes::{Bytes, BytesMut};
use mlua::{ffi, Function, Lua};
use ringdb_protocol::ReplyWriter;
use std::cell::{Cell, RefCell};
use std::ffi::{c_int, c_void};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Where a run's commands may go.
pub enum Reach<'a, 'n> {
    /// Only the keyspace the script was given; the journal can undo what
    /// the run changed there.
    Held(Journal),
    /// Every shard of the node.
    Node(&'a mut Lent<'n>),
}

/// The error a command of a run that has to start again gets (a script
/// that catches it still ends, and its run is undone).
pub const RESTART: &str = "ERR this script runs again with every shard";

/// What a script's commands run against.
pub struct CallCtx<'a, 'n> {
    /// The keyspace and state of the shard the script runs on (or of the
    /// scratch copy it was given).
    pub keyspace: &'a mut Keyspace,
    pub state: &'a mut ShardState,
    pub reach: Reach<'a, 'n>,
    /// The script's frozen "now" (Redis freezes the clock for a script),
    /// and the time its commands take.
    pub clock: Clock,
    pub client: ClientInfo,
    pub keys: &'a [Bytes],
    pub read_only: bool,
    pub allow_undeclared: bool,
    /// The process was over `maxmemory` when the script started, and the
    /// script does not allow that (`allow-oom`): its first write that may
    /// grow memory is refused.
    pub oom: bool,
    pub run: &'a RunState,
    pub reply: Vec<u8>,
    /// The restricted user the script runs for, whose rights each call
    /// is checked against (`None`: the user may run anything).
    pub user: Option<std::sync::Arc<crate::acl::User>>,
}

/// `redis.call` and `redis.pcall`, made once per Lua state. A run hands
/// them its [`CallCtx`] through [`CallFns::enter`]. They are C functions
/// reading their arguments off the Lua stack and pushing the reply onto it:
/// mlua's callbacks (a fresh pair per run, or the arguments and reply
/// converted to mlua values) cost more than many scripts' own work.
pub struct CallFns {
    pub call: Function,
    pub pcall: Function,
    /// The running script's `RefCell<CallCtx>`, erased to a pointer (null
    /// between runs). Boxed: the functions hold its address.
    current: Box<Cell<*const ()>>,
}

/// The context of the run in progress, for as long as this guard lives.
pub struct Entered<'f> {
    current: &'f Cell<*const ()>,
    previous: *const (),
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        self.current.set(self.previous);
    }
}

impl CallFns {
    pub fn new(lua: &Lua) -> mlua::Result<CallFns> {
        let current: Box<Cell<*const ()>> = Box::new(Cell::new(std::ptr::null()));
        let at = &*current as *const Cell<*const ()> as *mut c_void;
        let make = |f: ffi::lua_CFunction| {
            // SAFETY: Lua API calls inside mlua's protected call, owning
            // nothing; they leave the closure on the stack. Its upvalues:
            // the context's cell (alive as long as the functions: both are
            // this `CallFns`'s) and the reply pusher.
            unsafe {
                lua.exec_raw::<Function>((), |state| {
                    ffi::lua_pushlightuserdata(state, at);
                    ffi::lua_pushcfunction(state, push_reply);
                    ffi::lua_pushcclosure(state, f, 2);
                })
            }
        };
        Ok(CallFns { call: make(redis_call)?, pcall: make(redis_pcall)?, current })
    }

    /// Makes `ctx` the context of the functions until the guard drops.
    pub fn enter<'f>(&'f self, ctx: &'f RefCell<CallCtx<'_, '_>>) -> Entered<'f> {
        let previous = self.current.replace(ctx as *const RefCell<CallCtx<'_, '_>> as *const ());
        Entered { current: &self.current, previous }
    }
}

unsafe extern "C-unwind" fn redis_call(state: *mut ffi::lua_State) -> c_int {
    from_lua(state, true)
}

unsafe extern "C-unwind" fn redis_pcall(state: *mut ffi::lua_State) -> c_int {
    from_lua(state, false)
}

/// What [`call_and_push`] left on top of the Lua stack.
enum Pushed {
    /// The command's reply, or its error table.
    Reply { failed: bool },
    /// An error to raise, even from `redis.pcall`.
    Raise,
}

/// `redis.call` (`raise`) and `redis.pcall`: runs the command its
/// arguments name and returns its reply (Lua numbers become arguments as
/// Redis formats them, `%.17g`); a failed command's reply is an error
/// table, which `redis.call` raises.
///
/// # Safety
/// Called by Lua with the upvalues [`CallFns::new`] gives. A Lua error is
/// a longjmp over this frame: raised only here, where nothing is owned.
unsafe fn from_lua(state: *mut ffi::lua_State, raise: bool) -> c_int {
    match call_and_push(state) {
        Pushed::Reply { failed } if !(failed && raise) => 1,
        _ => ffi::lua_error(state),
    }
}

/// A reply for [`push_reply`] to push, and whether its error was counted
/// in INFO errorstats already (a refusal, or a command's error reply): the
/// script's reply, if this error becomes it, is not counted again (Redis's
/// `ignore_error_stats_update`).
struct ReplyToPush {
    reply: *const u8,
    len: usize,
    counted: bool,
}

/// The work of [`from_lua`]: everything that owns something ends here.
unsafe fn call_and_push(state: *mut ffi::lua_State) -> Pushed {
    let pushed = |reply: &[u8], counted: bool| {
        let job = ReplyToPush { reply: reply.as_ptr(), len: reply.len(), counted };
        // In a protected call: a memory error is the error to raise, not
        // a longjmp over the frames that own the context's borrow.
        ffi::lua_pushvalue(state, ffi::lua_upvalueindex(2));
        ffi::lua_pushlightuserdata(state, &job as *const ReplyToPush as *mut c_void);
        match ffi::lua_pcall(state, 1, 1, 0) {
            0 => Pushed::Reply { failed: reply.first() == Some(&b'-') },
            _ => Pushed::Raise,
        }
    };
    let current =
        &*(ffi::lua_touserdata(state, ffi::lua_upvalueindex(1)) as *const Cell<*const ()>);
    let ptr = current.get();
    if ptr.is_null() {
        return match pushed(
            b"-ERR redis.call/pcall can only be called inside a script invocation\r\n",
            false,
        ) {
            Pushed::Reply { .. } => Pushed::Raise,
            raise => raise,
        };
    }
    let argv = match argv_on_stack(state) {
        Ok(argv) => argv,
        Err(text) => return pushed(text, false),
    };
    // SAFETY: `ptr` was set by `enter` from a live `&RefCell<CallCtx>`, and
    // its guard resets it before that borrow ends (also when unwinding);
    // only the lifetime parameter differs, which does not change the layout.
    let ctx = &*(ptr as *const RefCell<CallCtx<'static, 'static>>);
    let Ok(mut c) = ctx.try_borrow_mut() else {
        return pushed(
            b"-ERR luaRedisGenericCommand() recursive call detected. Are you doing funny stuff with Lua debug hooks?\r\n",
            false,
        );
    };
    // A panic must not unwind through Lua's C frames: the run ends, and
    // the panic goes on once Lua has returned (`RunState::panicked`).
    // A debugging client that steps sees each command and its reply.
    let logging = c.run.ldb.logging();
    if logging {
        c.run.ldb.log_command(&argv);
    }
    match catch_unwind(AssertUnwindSafe(|| c.run(argv))) {
        Ok(Ok(())) => {
            if logging {
                c.run.ldb.log_reply(&c.reply);
            }
        }
        Ok(Err(text)) => {
            if logging {
                c.run.ldb.log_error(&text);
            }
            convert::error_reply(&mut c.reply, text.as_bytes())
        }
        Err(panic) => {
            *c.run.panicked.borrow_mut() = Some(panic);
            c.reply.clear();
            c.reply.extend_from_slice(b"-ERR internal error: a command panicked\r\n");
            let _ = pushed(&c.reply, true);
            return Pushed::Raise;
        }
    }
    pushed(&c.reply, true)
}

/// The arguments of a `redis.call`, in one buffer (one allocation per
/// call, not per argument); a refusal's error reply.
unsafe fn argv_on_stack(state: *mut ffi::lua_State) -> Result<Vec<Bytes>, &'static [u8]> {
    let argc = ffi::lua_gettop(state);
    if argc == 0 {
        return Err(b"-ERR Please specify at least one argument for this redis lib call\r\n");
    }
    let string = |i: c_int| {
        let mut len = 0;
        let at = ffi::lua_tolstring(state, i, &mut len);
        std::slice::from_raw_parts(at.cast::<u8>(), len)
    };
    let mut size = 0;
    for i in 1..=argc {
        size += match ffi::lua_type(state, i) {
            ffi::LUA_TSTRING => string(i).len(),
            ffi::LUA_TNUMBER => 24,
            _ => {
                return Err(b"-ERR Lua redis lib command arguments must be strings or integers\r\n")
            }
        };
    }
    let mut buf = BytesMut::with_capacity(size);
    let mut argv = Vec::with_capacity(argc as usize);
    let mut number = Vec::new();
    for i in 1..=argc {
        if ffi::lua_type(state, i) == ffi::LUA_TSTRING {
            buf.extend_from_slice(string(i));
        } else {
            number.clear();
            ringdb_protocol::reply::format_double(&mut number, ffi::lua_tonumber(state, i));
            buf.extend_from_slice(&number);
        }
        argv.push(buf.split().freeze());
    }
    Ok(argv)
}

/// Pushes the [`ReplyToPush`] at stack index 1 as a Lua value (run in a
/// protected call by [`call_and_push`]).
unsafe extern "C-unwind" fn push_reply(state: *mut ffi::lua_State) -> c_int {
    let job = &*(ffi::lua_touserdata(state, 1) as *const ReplyToPush);
    let reply = std::slice::from_raw_parts(job.reply, job.len);
    match convert::push_reply(state, reply) {
        Ok(_) => {
            if job.counted && reply.first() == Some(&b'-') {
                ffi::lua_pushboolean(state, 1);
                ffi::lua_setfield(state, -2, convert::COUNTED.as_ptr());
            }
            1
        }
        Err(text) => {
            ffi::lua_pushlstring(state, text.as_ptr().cast(), text.len());
            ffi::lua_error(state)
        }
    }
}

/// Runs a command that writes its reply or fails: its error is its reply.
fn replied(out: &mut ReplyWriter, run: impl FnOnce(&mut ReplyWriter) -> CmdResult) {
    if let Err(e) = run(out) {
        out.error(e.text());
    }
}

impl CallCtx<'_, '_> {
    /// Checks and runs one command, leaving its reply in `self.reply`; an
    /// `Err` is a refusal (its text becomes the error table).
    fn run(&mut self, argv: Vec<Bytes>) -> Result<(), String> {
        self.reply.clear();
        // A run that is to start again runs nothing more.
        if self.run.restart.get() {
            return Err(RESTART.into());
        }
        let reg = match table().resolve(&argv) {
            Ok(reg) => reg,
            Err(_) => {
                let reg = table().lookup(&argv);
                let text = match reg {
                    None => "Unknown Redis command called from script",
                    Some(_) => "Wrong number of args calling Redis command from script",
                };
                return Err(self.refused(reg.map(|r| r.id), text.into()));
            }
        };
        self.run_resolved(reg, argv).map_err(|text| self.refused(Some(reg.id), text))
    }

    /// Counts a refusal as Redis's `scriptCall` does: an error reply, and a
    /// rejected call of the command if there is one.
    fn refused(&mut self, id: Option<usize>, text: String) -> String {
        // A run that starts again leaves no trace in the statistics.
        if self.run.restart.get() {
            return text;
        }
        let code = text.strip_prefix('-').and_then(|t| t.split(' ').next()).unwrap_or("ERR");
        match id {
            Some(id) => self.state.stats.rejected(id, code),
            None => self.state.stats.error(code),
        }
        text
    }

    /// A refused call in the ACL log, context `lua`. The client is named by
    /// id and user: the full CLIENT INFO line lives with the connection.
    fn log_denial(
        &self,
        user: &crate::acl::User,
        verdict: crate::acl::Verdict,
        name: &str,
        argv: &[Bytes],
    ) {
        let (reason, at) = verdict.reason();
        let object = match at {
            Some(i) => String::from_utf8_lossy(&argv[i]).into_owned(),
            None => name.to_string(),
        };
        let info = format!("id={} db={} user={}", self.client.id, self.client.db, user.name());
        let user_name = user.name().to_string();
        let entry =
            crate::acl::LogEntry::new(reason, crate::acl::Context::Lua, object, user_name, info);
        crate::acl::registry().log(entry);
    }

    fn run_resolved(&mut self, reg: &Registered, argv: Vec<Bytes>) -> Result<(), String> {
        let spec = reg.spec;
        if spec.has(flags::NOSCRIPT) && !self.deny_disabled() {
            return Err("This Redis command is not allowed from script".into());
        }
        // Redis's `scriptVerifyACL`.
        if let Some(user) = &self.user {
            let verdict = user.check(reg, &argv);
            if verdict != crate::acl::Verdict::Allowed {
                self.log_denial(user, verdict, &reg.full_name, &argv);
                return Err(verdict.script_error());
            }
        }
        if self.read_only && spec.has(flags::WRITE | flags::MAY_REPLICATE) {
            return Err("Write commands are not allowed from read-only scripts.".into());
        }
        // Redis's `scriptVerifyWriteCommandAllow`.
        if spec.is_write() && self.state.settings.scripts.read_only_replica {
            return Err("-READONLY You can't write against a read only replica.".into());
        }
        if let Exec::Node(_) | Exec::Container = spec.exec {
            self.node_command(&argv, spec.exec, &reg.full_name)?;
            // Counted as the shard counts the commands it runs.
            let failed = self.reply.first() == Some(&b'-');
            if failed {
                let code = self.reply[1..].split(|&b| b == b' ' || b == b'\r').next();
                self.state.stats.error(&String::from_utf8_lossy(code.unwrap_or(b"ERR")));
            }
            self.state.count_call(reg.id, spec, 0, failed);
            return Ok(());
        }
        // Before the keys, as Redis's `scriptVerifyOOM` comes before its
        // cluster checks; once the script has written, it cannot be stopped
        // half way.
        if self.oom && !self.run.wrote.get() && spec.has(flags::DENYOOM) {
            return Err(format!("-{}", crate::evict::OOM));
        }
        self.check_keys(spec, &argv)?;
        if spec.is_write() {
            self.run.note_write();
        }
        let client = ClientInfo { resp: self.run.resp.get(), script: true, ..self.client };
        if self.state.monitored && !spec.has(flags::ADMIN) {
            self.state.funnel.out.monitor.push(crate::monitor::line(client.db, "lua", &argv));
        }
        let cmd = ShardCommand { id: reg.id, spec, args: argv, client };
        let clock = &mut self.clock;
        match &mut self.reach {
            Reach::Held(journal) => {
                journal.before(self.keyspace, self.state, &cmd, clock.now_ms);
                call(self.keyspace, self.state, &cmd, &mut self.reply, clock, Caller::Client);
            }
            Reach::Node(lent) => {
                lent.run((&mut *self.keyspace, &mut *self.state), &cmd, &mut self.reply, clock)
            }
        }
        Ok(())
    }

    /// The undeclared-key rule, and where the keys are: a held run that
    /// names a key beyond its keyspace starts again with every shard (or,
    /// when it cannot be undone, the command fails).
    fn check_keys(&mut self, spec: &CommandSpec, argv: &[Bytes]) -> Result<(), String> {
        // On the only shard of a node every key is held.
        let held = matches!(self.reach, Reach::Held(_));
        let everything =
            held && !self.state.funnel.is_recording() && self.keyspace.owns_every_slot();
        if everything && self.allow_undeclared {
            return Ok(());
        }
        let check_held = held && !everything;
        let (mut refused, mut beyond, mut undeclared) = (None, None, false);
        spec.for_each_key(argv, |i| {
            let key = &argv[i];
            if refused.is_some() || beyond.is_some() {
                return;
            }
            let declared = self.keys.iter().any(|k| k == key);
            undeclared |= !declared;
            if !declared && !self.allow_undeclared {
                refused = Some(key.clone());
            } else if check_held && !self.holds(key, declared) {
                beyond = Some(key.clone());
            }
        });
        if let Some(key) = refused {
            return Err(format!(
                "script tried accessing undeclared key: {}",
                String::from_utf8_lossy(&key)
            ));
        }
        match &mut self.reach {
            // Every key is reached; what the server learns is where the
            // undeclared ones were.
            Reach::Node(lent) => {
                if undeclared {
                    let keys = &self.keys;
                    spec.for_each_key(argv, |i| {
                        if !keys.iter().any(|k| *k == argv[i]) {
                            lent.touched_undeclared(&argv[i]);
                        }
                    });
                }
                return Ok(());
            }
            Reach::Held(_) if everything => return Ok(()),
            Reach::Held(_) => {}
        }
        // Keys it would form from data (SORT … GET) must be held too.
        if let (None, Some(formed)) = (&beyond, spec.formed_keys) {
            let scratch = self.state.funnel.is_recording();
            let keyspace = &*self.keyspace;
            let here = |k: &[u8]| !scratch && keyspace.owns_key(k);
            if (formed.forms_elsewhere)(argv, &here) {
                beyond = argv.get(1).cloned();
            }
        }
        match beyond {
            None => Ok(()),
            Some(key) => {
                let what = format!("key '{}' of another shard", String::from_utf8_lossy(&key));
                Err(self.beyond(&what))
            }
        }
    }

    /// Whether a held run holds `key`: its declared keys (the router put
    /// it where they are, or gathered them), and on a shard every key of
    /// that shard.
    fn holds(&self, key: &[u8], declared: bool) -> bool {
        declared || (!self.state.funnel.is_recording() && self.keyspace.owns_key(key))
    }

    /// A held run reached `what`, which it does not hold (a key of another
    /// shard, the other cores' subscribers): it starts again with every
    /// shard if what it changed can be undone.
    fn beyond(&mut self, what: &str) -> String {
        let undoable = match &self.reach {
            Reach::Held(journal) => journal.can_undo(),
            Reach::Node(_) => true,
        };
        self.run.needs_node.set(true);
        if undoable {
            self.run.restart.set(true);
            return RESTART.into();
        }
        format!(
            "script reached {what} after changing a value too large to undo; ringdb runs \
             this script with every shard from its next call"
        )
    }

    /// DEBUG SET-DISABLE-DENY-SCRIPTS is on.
    fn deny_disabled(&self) -> bool {
        self.run.monitor.borrow().as_ref().is_some_and(|(m, _)| m.deny_disabled())
    }

    /// The few commands of the connection's core a script can run where it
    /// is (SELECT changes the script's database only, as in Redis; DEBUG
    /// PROTOCOL and SLEEP under DEBUG SET-DISABLE-DENY-SCRIPTS); the others
    /// need the server and cannot run inside a script.
    fn node_command(&mut self, argv: &[Bytes], exec: Exec, name: &str) -> Result<(), String> {
        use crate::command::NodeCommand as N;
        let resp = self.run.resp.get();
        let mut out = ReplyWriter::new(&mut self.reply, resp);
        match exec {
            Exec::Node(N::Select) => match select_index(argv, self.keyspace.db_count()) {
                Ok(db) => {
                    self.client.db = db;
                    out.ok();
                }
                Err(e) => out.error(e.text()),
            },
            Exec::Node(N::Ping) => replied(&mut out, |out| connection::ping(out, argv, false)),
            Exec::Node(N::Echo) => replied(&mut out, |out| connection::echo(out, argv)),
            Exec::Node(N::Time) => crate::families::server::time(&mut out),
            Exec::Node(N::Debug) if argv.len() == 3 && is(&argv[1], "protocol") => {
                replied(&mut out, |out| crate::families::debug::protocol(out, &argv[2]))
            }
            Exec::Node(N::ClusterDisabled) => {
                out.error("ERR This instance has cluster support disabled")
            }
            // Commands over every key: the shards the run reaches must be
            // every shard.
            Exec::Node(cmd @ (N::DbSize | N::Keys)) => {
                let only_core =
                    self.keyspace.owns_every_slot() && !self.state.funnel.is_recording();
                let others: Vec<&Keyspace> = match &self.reach {
                    Reach::Node(lent) => lent.keyspaces().collect(),
                    Reach::Held(_) if only_core => Vec::new(),
                    Reach::Held(_) => return Err(self.beyond("the keys of other shards")),
                };
                let (db, now) = (self.client.db, self.clock.now_ms);
                let keyspaces = std::iter::once(&*self.keyspace).chain(others);
                if cmd == N::DbSize {
                    out.int(keyspaces.map(|ks| ks.db(db).len()).sum::<usize>() as i64);
                } else {
                    let keys: Vec<Bytes> = keyspaces
                        .flat_map(|ks| crate::families::keys::keys_matching(ks, db, &argv[1], now))
                        .collect();
                    out.array(keys.len());
                    keys.iter().for_each(|k| out.bulk(k));
                }
            }
            Exec::Node(cmd @ (N::Publish | N::SPublish)) => {
                let shard_channel = cmd == N::SPublish;
                // The subscribers of every core: those of the node when it
                // is lent to the run, or of the only shard's core.
                let only_core =
                    self.keyspace.owns_every_slot() && !self.state.funnel.is_recording();
                let count = match &self.reach {
                    Reach::Node(lent) => lent.receivers.map(|r| r(shard_channel, &argv[1])),
                    Reach::Held(_) if only_core => {
                        self.state.scripting.receivers.as_ref().map(|r| r(shard_channel, &argv[1]))
                    }
                    Reach::Held(_) => None,
                };
                let Some(count) = count else {
                    return Err(self.beyond("the subscribers of other cores (PUBLISH)"));
                };
                self.state.funnel.out.publishes.push(crate::shard::Publish {
                    shard_channel,
                    channel: argv[1].clone(),
                    message: argv[2].clone(),
                });
                out.int(count);
            }
            Exec::Node(N::Debug) if argv.len() == 3 && is(&argv[1], "sleep") => {
                std::thread::sleep(crate::families::debug::sleep_time(&argv[2]));
                out.ok();
            }
            _ => return Err(format!("ringdb cannot run '{name}' from a script")),
        }
        Ok(())
    }
}
