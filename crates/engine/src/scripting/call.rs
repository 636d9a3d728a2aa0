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
use crate::command::{table, Registered};
use crate::keyspace::Keyspace;
use crate::lent::Lent;
use crate::shard::{execute_timed, Clock, ShardCommand, ShardState};
use bytes::Bytes;
use mlua::{Function, Lua, MultiValue, Value};
use ringdb_protocol::ReplyWriter;
use std::cell::{Cell, RefCell};
use std::rc::Rc;

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
}

/// `redis.call` and `redis.pcall`, made once per Lua state. A run hands
/// them its [`CallCtx`] through [`CallFns::enter`]: making a fresh pair of
/// scoped functions for every run cost more than many scripts' own work.
pub struct CallFns {
    pub call: Function,
    pub pcall: Function,
    /// The running script's `RefCell<CallCtx>`, erased to a pointer (null
    /// between runs).
    current: Rc<Cell<*const ()>>,
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
    pub fn new(lua: &Lua, run: &Rc<RunState>) -> mlua::Result<CallFns> {
        let current: Rc<Cell<*const ()>> = Rc::new(Cell::new(std::ptr::null()));
        let make = |raise: bool| {
            let (current, run) = (current.clone(), run.clone());
            lua.create_function(move |lua, args: MultiValue| {
                let ptr = current.get();
                if ptr.is_null() {
                    return Err(mlua::Error::runtime(
                        "redis.call/pcall can only be called inside a script invocation",
                    ));
                }
                // SAFETY: `ptr` was set by `enter` from a live
                // `&RefCell<CallCtx>`, and its guard resets it before that
                // borrow ends (also when unwinding); only the lifetime
                // parameter differs, which does not change the layout.
                let ctx = unsafe { &*(ptr as *const RefCell<CallCtx<'static, 'static>>) };
                let (value, failed) = command(lua, ctx, args)?;
                match value {
                    Value::Table(t) if failed && raise => {
                        let text = super::error_field(&t);
                        *run.pending_error.borrow_mut() = Some(t);
                        Err(mlua::Error::runtime(text))
                    }
                    value => Ok(value),
                }
            })
        };
        Ok(CallFns { call: make(true)?, pcall: make(false)?, current })
    }

    /// Makes `ctx` the context of the functions until the guard drops.
    pub fn enter<'f>(&'f self, ctx: &'f RefCell<CallCtx<'_, '_>>) -> Entered<'f> {
        let previous = self.current.replace(ctx as *const RefCell<CallCtx<'_, '_>> as *const ());
        Entered { current: &self.current, previous }
    }
}

/// The implementation behind `redis.call` and `redis.pcall` (Lua numbers
/// become arguments as Redis formats them, `%.17g`): returns the
/// reply as a Lua value and whether it is an error (then the value is an
/// error table, which `redis.call` raises).
pub fn command(
    lua: &Lua,
    ctx: &RefCell<CallCtx<'_, '_>>,
    args: MultiValue,
) -> mlua::Result<(Value, bool)> {
    let fail = |text: &str| -> mlua::Result<(Value, bool)> {
        Ok((Value::Table(convert::error_table(lua, text.as_bytes())?), true))
    };
    if args.is_empty() {
        return fail("Please specify at least one argument for this redis lib call");
    }
    // The arguments in one buffer: one allocation per call, not per
    // argument.
    let mut buf = Vec::new();
    let mut ends = Vec::with_capacity(args.len());
    for v in args.iter() {
        match v {
            Value::String(s) => buf.extend_from_slice(&s.as_bytes()),
            Value::Integer(i) => ringdb_protocol::reply::format_double(&mut buf, *i as f64),
            Value::Number(n) => ringdb_protocol::reply::format_double(&mut buf, *n),
            _ => return fail("Lua redis lib command arguments must be strings or integers"),
        }
        ends.push(buf.len());
    }
    let buf = Bytes::from(buf);
    let mut start = 0;
    let argv: Vec<Bytes> = ends
        .into_iter()
        .map(|end| {
            let arg = buf.slice(start..end);
            start = end;
            arg
        })
        .collect();
    let Ok(mut c) = ctx.try_borrow_mut() else {
        return fail(
            "luaRedisGenericCommand() recursive call detected. Are you doing funny stuff with Lua debug hooks?",
        );
    };
    // Counted already (a refusal by `run`, an error reply by the command's
    // own statistics): the script's reply, if this error becomes it, is
    // not counted again (Redis's `ignore_error_stats_update`).
    let counted = |t: &mlua::Table| t.raw_set(convert::COUNTED, true);
    if let Err(text) = c.run(argv) {
        let result = fail(&text)?;
        if let (Value::Table(t), _) = &result {
            counted(t)?;
        }
        return Ok(result);
    }
    let (value, _) = convert::resp_to_lua(lua, &c.reply)?;
    let failed = c.reply.first() == Some(&b'-');
    if let (Value::Table(t), true) = (&value, failed) {
        counted(t)?;
    }
    Ok((value, failed))
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

    fn run_resolved(&mut self, reg: &Registered, argv: Vec<Bytes>) -> Result<(), String> {
        let spec = reg.spec;
        if spec.has(flags::NOSCRIPT) && !self.deny_disabled() {
            return Err("This Redis command is not allowed from script".into());
        }
        if self.read_only && spec.has(flags::WRITE | flags::MAY_REPLICATE) {
            return Err("Write commands are not allowed from read-only scripts.".into());
        }
        if let Exec::Node(_) | Exec::Container = spec.exec {
            self.node_command(&argv, spec.exec, &reg.full_name)?;
            // Counted as the shard counts the commands it runs.
            let failed = self.reply.first() == Some(&b'-');
            if failed {
                let code = self.reply[1..].split(|&b| b == b' ' || b == b'\r').next();
                self.state.stats.error(&String::from_utf8_lossy(code.unwrap_or(b"ERR")));
            }
            let stat = self.state.stats.command(reg.id);
            stat.calls += 1;
            stat.failed_calls += failed as u64;
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
            self.state.monitor_out.push(crate::monitor::line(client.db, "lua", &argv));
        }
        let cmd = ShardCommand { id: reg.id, spec, args: argv, client };
        let clock = &mut self.clock;
        match &mut self.reach {
            Reach::Held(journal) => {
                journal.before(self.keyspace, self.state, &cmd, clock.now_ms);
                execute_timed(self.keyspace, self.state, &cmd, &mut self.reply, clock);
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
            Exec::Node(N::Select) => match ringdb_types::number::parse_i64(&argv[1]) {
                None => out.error("ERR value is not an integer or out of range"),
                Some(db) if db < 0 || db as usize >= self.keyspace.db_count() => {
                    out.error("ERR DB index is out of range")
                }
                Some(db) => {
                    self.client.db = db as usize;
                    out.ok();
                }
            },
            Exec::Node(N::Ping) if argv.len() <= 2 => match argv.get(1) {
                Some(msg) => out.bulk(msg),
                None => out.simple("PONG"),
            },
            Exec::Node(N::Ping) => out.error("ERR wrong number of arguments for 'ping' command"),
            Exec::Node(N::Echo) => out.bulk(&argv[1]),
            Exec::Node(N::Time) => {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap_or_default();
                out.array(2);
                out.bulk_int(now.as_secs() as i64);
                out.bulk_int(now.subsec_micros() as i64);
            }
            Exec::Node(N::Debug) if argv.len() == 3 && is(&argv[1], "protocol") => {
                if let Err(e) = crate::families::debug::protocol(&mut out, &argv[2]) {
                    out.error(e.text());
                }
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
                self.state.publishes.push(crate::shard::Publish {
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
