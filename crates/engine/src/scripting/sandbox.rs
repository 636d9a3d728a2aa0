//! A shard's Lua state: created with Redis's libraries, the `redis` API and
//! the read-only sandbox of `prelude.lua`, plus the per-state run state that
//! ringdb's Rust helpers (`math.random`, `redis.setresp`, the kill check,
//! `redis.register_function`, …) and the instruction hook share.

use super::functions::PendingLibrary;
use super::monitor::{RunningScript, ScriptMonitor};
use super::rand::{Lrand48, LRAND48_MAX};
use super::{convert, libs, REDIS_VERSION, REDIS_VERSION_NUM};
use bytes::Bytes;
use mlua::{Function, HookTriggers, Lua, LuaOptions, MultiValue, StdLib, Table, Value, VmState};
use ringdb_protocol::Resp;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Instructions between two checks of the clock and the kill flag.
const HOOK_EVERY: u32 = 10_000;
/// How long FUNCTION LOAD may run a library's code (Redis's
/// `LOAD_TIMEOUT_MS`).
pub const LOAD_TIMEOUT: Duration = Duration::from_millis(500);
/// The error a killed script gets.
const KILLED: &str = "Script killed by user with SCRIPT KILL...";

/// What the running script, the hook and the helpers share.
pub struct RunState {
    /// A script (or a library load) is running.
    pub active: Cell<bool>,
    pub started: Cell<Instant>,
    /// `busy-reply-threshold` in ms (0: never busy).
    pub busy_after_ms: Cell<u64>,
    pub run_id: Cell<u64>,
    pub timed_out: Cell<bool>,
    pub killed: Cell<bool>,
    pub wrote: Cell<bool>,
    /// The run met a key it does not hold and can be undone: it is to run
    /// again with every shard ([`super::call`]); it runs nothing more.
    pub restart: Cell<bool>,
    /// The run met a key it does not hold: the script needs every shard.
    pub needs_node: Cell<bool>,
    /// The protocol `redis.call` replies are converted from (`redis.setresp`).
    pub resp: Cell<Resp>,
    pub eval_mode: Cell<bool>,
    /// Libraries and functions loaded (see [`RunningScript::libraries`]).
    pub libraries: Cell<(usize, usize)>,
    /// The script's name and command, published if it becomes busy.
    pub name: RefCell<String>,
    pub command: RefCell<Vec<Bytes>>,
    pub monitor: RefCell<Option<(Arc<ScriptMonitor>, usize)>>,
    /// Serves the core's other clients while the script is busy (BUSY
    /// replies, SCRIPT KILL, SHUTDOWN NOSAVE): the server's part of Redis's
    /// `processEventsWhileBlocked`, called from the hook once the script
    /// has passed the busy threshold.
    pub while_busy: RefCell<Option<Rc<dyn Fn()>>>,
    pub rand: Cell<Lrand48>,
    /// Set while FUNCTION LOAD runs a library's code.
    pub loading: RefCell<Option<PendingLibrary>>,
    /// A command the script called panicked: the run ends (no `pcall`
    /// catches it) and the panic goes on once Lua has returned.
    pub panicked: RefCell<Option<Box<dyn std::any::Any + Send>>>,
    /// The debugger's log and stepping state (a `SCRIPT DEBUG` run).
    pub ldb: super::debugger::DebugState,
}

impl RunState {
    fn new() -> Self {
        RunState {
            active: Cell::new(false),
            started: Cell::new(Instant::now()),
            busy_after_ms: Cell::new(5000),
            run_id: Cell::new(0),
            timed_out: Cell::new(false),
            killed: Cell::new(false),
            wrote: Cell::new(false),
            restart: Cell::new(false),
            needs_node: Cell::new(false),
            resp: Cell::new(Resp::V2),
            eval_mode: Cell::new(true),
            libraries: Cell::new((0, 0)),
            name: RefCell::new(String::new()),
            command: RefCell::new(Vec::new()),
            monitor: RefCell::new(None),
            while_busy: RefCell::new(None),
            rand: Cell::new(Lrand48::default()),
            loading: RefCell::new(None),
            panicked: RefCell::new(None),
            ldb: Default::default(),
        }
    }

    /// The instruction hook's check: time out (publish BUSY), honour kills.
    fn check(&self) -> mlua::Result<VmState> {
        if self.loading.borrow().is_some() {
            if self.started.get().elapsed() > LOAD_TIMEOUT {
                return Err(mlua::Error::runtime("FUNCTION LOAD timeout"));
            }
            return Ok(VmState::Continue);
        }
        if !self.active.get() {
            return Ok(VmState::Continue);
        }
        if self.killed.get() {
            return Err(mlua::Error::runtime(KILLED));
        }
        if self.restart.get() {
            return Err(mlua::Error::runtime(super::call::RESTART));
        }
        let limit = self.busy_after_ms.get();
        if !self.timed_out.get() {
            let elapsed = self.started.get().elapsed();
            if limit == 0 || elapsed < Duration::from_millis(limit) {
                return Ok(VmState::Continue);
            }
            self.timed_out.set(true);
            tracing::warn!(
                "Slow script detected: still in execution after {} milliseconds. You can try \
                 killing the script using the {} command. Script name is: {}.",
                elapsed.as_millis(),
                if self.eval_mode.get() { "SCRIPT KILL" } else { "FUNCTION KILL" },
                self.name.borrow()
            );
            if let Some((monitor, _)) = self.monitor.borrow().as_ref() {
                let script = RunningScript {
                    name: self.name.borrow().clone(),
                    command: self.command.borrow().clone(),
                    started: self.started.get(),
                    eval: self.eval_mode.get(),
                    libraries: self.libraries.get(),
                };
                // Every shard is busy, as all of Redis is while a script
                // runs past the threshold.
                for shard in 0..monitor.shard_count() {
                    monitor.set_busy(shard, self.run_id.get(), self.wrote.get(), script.clone());
                }
            }
        }
        // Cloned out first: serving may not find this state borrowed.
        let serve = self.while_busy.borrow().clone();
        if let Some(serve) = serve {
            serve();
        }
        let kill = self
            .monitor
            .borrow()
            .as_ref()
            .is_some_and(|(m, shard)| m.kill_requested(*shard, self.run_id.get()));
        if kill {
            tracing::warn!("Lua script killed by user with SCRIPT KILL.");
            self.killed.set(true);
            return Err(mlua::Error::runtime(KILLED));
        }
        Ok(VmState::Continue)
    }

    /// The script ran a write command.
    pub fn note_write(&self) {
        self.wrote.set(true);
        if self.timed_out.get() {
            for shard in self.published_shards() {
                if let Some((monitor, _)) = self.monitor.borrow().as_ref() {
                    monitor.set_wrote(shard);
                }
            }
        }
    }

    /// The shards a busy run is published on: every one.
    fn published_shards(&self) -> std::ops::Range<usize> {
        self.monitor.borrow().as_ref().map_or(0..0, |(monitor, _)| 0..monitor.shard_count())
    }

    /// Prepares a run.
    pub fn begin(&self, name: String, command: &[Bytes], eval: bool, busy_after_ms: u64) {
        let run_id = match self.monitor.borrow().as_ref() {
            Some((m, _)) => m.new_run_id(),
            None => self.run_id.get() + 1,
        };
        self.run_id.set(run_id);
        self.active.set(true);
        self.started.set(Instant::now());
        self.busy_after_ms.set(busy_after_ms);
        self.timed_out.set(false);
        self.killed.set(false);
        self.wrote.set(false);
        self.restart.set(false);
        self.needs_node.set(false);
        self.resp.set(Resp::V2);
        self.eval_mode.set(eval);
        *self.name.borrow_mut() = name;
        // Cloning Bytes only counts references; the vector is reused.
        let mut held = self.command.borrow_mut();
        held.clear();
        held.extend_from_slice(command);
    }

    /// Ends a run: withdraws a BUSY publication.
    pub fn end(&self) {
        self.active.set(false);
        if self.timed_out.get() {
            for shard in self.published_shards() {
                if let Some((monitor, _)) = self.monitor.borrow().as_ref() {
                    monitor.clear_busy(shard, self.run_id.get());
                }
            }
        }
        self.command.borrow_mut().clear();
    }
}

/// What the prelude hands back.
pub struct Sandbox {
    pub env: Table,
    pub env_meta: Table,
    pub real: Table,
    pub load_api: Table,
    /// The real `redis` table (the engine sets call/pcall).
    pub redis: Table,
    pub run_eval: Function,
    pub run_function: Function,
    pub run_load: Function,
}

/// Creates a Lua state with the sandbox. Only `base`, `table`, `string`,
/// `math` and `debug` (hidden after the prelude) are opened: no `io`, `os`,
/// `package`.
pub fn create(run: Rc<RunState>) -> mlua::Result<(Lua, Sandbox)> {
    let libs = StdLib::TABLE | StdLib::STRING | StdLib::MATH | StdLib::DEBUG;
    // SAFETY: mlua calls a state with `debug` "unsafe" because debug can
    // break Lua's invariants. The prelude keeps `debug` in a local for the
    // error handler and removes it from the globals before any script runs;
    // no C module loader (`package`) is opened.
    let lua = unsafe { Lua::unsafe_new_with(libs, LuaOptions::new()) };
    let globals = lua.globals();
    libs::register(&lua, &globals)?;
    let helpers = helpers(&lua, &run)?;
    let prelude = lua.load(include_str!("prelude.lua")).set_name("=ringdb").into_function()?;
    let (env, env_meta, real, load_api, redis, run_eval, run_function, run_load): (
        Table,
        Table,
        Table,
        Table,
        Table,
        Function,
        Function,
        Function,
    ) = prelude.call((helpers, globals.clone()))?;
    // Nothing of the original globals stays reachable by name.
    for name in ["debug", "print", "dofile", "loadfile", "require", "module"] {
        globals.raw_set(name, Value::Nil)?;
    }
    install_busy_hook(&lua, &run)?;
    Ok((lua, Sandbox { env, env_meta, real, load_api, redis, run_eval, run_function, run_load }))
}

/// The instruction hook of every run but a debugging one: the busy
/// threshold, kills ([`RunState::check`]).
pub fn install_busy_hook(lua: &Lua, run: &Rc<RunState>) -> mlua::Result<()> {
    let run = run.clone();
    lua.set_hook(HookTriggers::new().every_nth_instruction(HOOK_EVERY), move |_, _| run.check())
}

/// The message of an error raised from Rust (for the error handler and
/// `pcall`), without mlua's decoration.
fn error_message(e: &mlua::Error) -> String {
    match e {
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        other => other.to_string(),
    }
}

fn helpers(lua: &Lua, run: &Rc<RunState>) -> mlua::Result<Table> {
    let r = lua.create_table()?;
    let state = run.clone();
    // The run must end: killed, or a command it called panicked.
    r.raw_set(
        "killed",
        lua.create_function(move |_, ()| {
            Ok(state.killed.get() || state.panicked.borrow().is_some())
        })?,
    )?;
    r.raw_set(
        "errtext",
        lua.create_function(|_, v: Value| {
            Ok(match v {
                Value::Error(e) => error_message(&e),
                other => format!("{other:?}"),
            })
        })?,
    )?;
    r.raw_set(
        "error_table",
        lua.create_function(|lua, s: mlua::LuaString| convert::error_table(lua, &s.as_bytes()))?,
    )?;
    r.raw_set("version", REDIS_VERSION)?;
    r.raw_set("version_num", REDIS_VERSION_NUM)?;
    // The debugger's: `redis.breakpoint()` stops at the next line of a
    // debugging run (true) and does nothing otherwise (false);
    // `redis.debug(…)` logs its arguments to the debugging client.
    let state = run.clone();
    r.raw_set(
        "breakpoint",
        lua.create_function(move |_, ()| {
            let active = state.ldb.active.get();
            if active {
                state.ldb.lua_breakpoint.set(true);
            }
            Ok(active)
        })?,
    )?;
    let state = run.clone();
    r.raw_set(
        "debug",
        lua.create_function(move |_, values: MultiValue| {
            state.ldb.log_debug(&values);
            Ok(())
        })?,
    )?;
    let state = run.clone();
    r.raw_set(
        "random",
        lua.create_function(move |_, args: MultiValue| {
            if !state.active.get() {
                return Err(mlua::Error::runtime(
                    "math.random can only be called inside a script invocation",
                ));
            }
            let mut g = state.rand.get();
            let r = (g.next() % LRAND48_MAX) as f64 / LRAND48_MAX as f64;
            state.rand.set(g);
            match args.len() {
                0 => Ok(r),
                1 => {
                    let u = libs::check_number(&args, 0, "random")? as i32;
                    if u < 1 {
                        return Err(mlua::Error::runtime(
                            "bad argument #1 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * u as f64).floor() + 1.0)
                }
                2 => {
                    let l = libs::check_number(&args, 0, "random")? as i32;
                    let u = libs::check_number(&args, 1, "random")? as i32;
                    if l > u {
                        return Err(mlua::Error::runtime(
                            "bad argument #2 to 'random' (interval is empty)",
                        ));
                    }
                    Ok((r * (u as f64 - l as f64 + 1.0)).floor() + l as f64)
                }
                _ => Err(mlua::Error::runtime("wrong number of arguments")),
            }
        })?,
    )?;
    let state = run.clone();
    r.raw_set(
        "randomseed",
        lua.create_function(move |_, args: MultiValue| {
            if !state.active.get() {
                return Err(mlua::Error::runtime(
                    "math.randomseed can only be called inside a script invocation",
                ));
            }
            let seed = libs::check_number(&args, 0, "randomseed")? as i64 as i32;
            let mut g = state.rand.get();
            g.seed(seed);
            state.rand.set(g);
            Ok(())
        })?,
    )?;
    let state = run.clone();
    r.raw_set(
        "setresp",
        lua.create_function(move |_, args: MultiValue| {
            if !state.active.get() {
                return Err(mlua::Error::runtime(
                    "redis.setresp can only be called inside a script invocation",
                ));
            }
            if args.len() != 1 {
                return Err(mlua::Error::runtime("redis.setresp() requires one argument."));
            }
            match libs::opt_number(&args[0]).map(|n| n as i64) {
                Some(2) => state.resp.set(Resp::V2),
                Some(3) => state.resp.set(Resp::V3),
                _ => return Err(mlua::Error::runtime("RESP version must be 2 or 3.")),
            }
            Ok(())
        })?,
    )?;
    let state = run.clone();
    r.raw_set(
        "set_repl",
        lua.create_function(move |_, args: MultiValue| {
            if !state.active.get() {
                return Err(mlua::Error::runtime(
                    "redis.set_repl can only be called inside a script invocation",
                ));
            }
            if args.len() != 1 {
                return Err(mlua::Error::runtime("redis.set_repl() requires two arguments."));
            }
            let flags = libs::opt_number(&args[0]).unwrap_or(0.0) as i64;
            if flags & !3 != 0 {
                return Err(mlua::Error::runtime(
                    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.",
                ));
            }
            // ringdb has no replication or AOF yet: nothing to switch.
            Ok(())
        })?,
    )?;
    r.raw_set(
        "sha1hex",
        lua.create_function(|_, args: MultiValue| {
            if args.len() != 1 {
                return Err(mlua::Error::runtime("wrong number of arguments"));
            }
            let data = libs::opt_bytes(&args[0]).unwrap_or_default();
            Ok(ringdb_types::sha1::hex(&ringdb_types::sha1::sha1(&data)))
        })?,
    )?;
    r.raw_set("log", lua.create_function(log)?)?;
    let state = run.clone();
    r.raw_set(
        "acl_check_cmd",
        lua.create_function(move |_, args: MultiValue| {
            if !state.active.get() {
                return Err(mlua::Error::runtime(
                    "redis.acl_check_cmd can only be called inside a script invocation",
                ));
            }
            if args.is_empty() {
                return Err(mlua::Error::runtime(
                    "Please specify at least one argument for this redis lib call",
                ));
            }
            let argv: Vec<Bytes> =
                args.iter().filter_map(libs::opt_bytes).map(Bytes::from).collect();
            if argv.len() != args.len() {
                return Err(mlua::Error::runtime(
                    "Lua redis lib command arguments must be strings or integers",
                ));
            }
            // ringdb has one user, allowed everything: a known command is
            // permitted.
            match crate::command::table().lookup(&argv) {
                Some(_) => Ok(true),
                None => {
                    Err(mlua::Error::runtime("Invalid command passed to redis.acl_check_cmd()"))
                }
            }
        })?,
    )?;
    let state = run.clone();
    r.raw_set(
        "register_function",
        lua.create_function(move |_, args: MultiValue| {
            let mut loading = state.loading.borrow_mut();
            let Some(pending) = loading.as_mut() else {
                return Err(mlua::Error::runtime(
                    "redis.register_function can only be called on FUNCTION LOAD command",
                ));
            };
            pending.register(args).map_err(mlua::Error::runtime)
        })?,
    )?;
    Ok(r)
}

/// `redis.log(level, message, ...)`.
fn log(_: &Lua, args: MultiValue) -> mlua::Result<()> {
    if args.len() < 2 {
        return Err(mlua::Error::runtime("redis.log() requires two arguments or more."));
    }
    let Some(level) = libs::opt_number(&args[0]) else {
        return Err(mlua::Error::runtime("First argument must be a number (log level)."));
    };
    let level = level as i64;
    if !(0..=3).contains(&level) {
        return Err(mlua::Error::runtime("Invalid debug level."));
    }
    let parts: Vec<String> = args
        .iter()
        .skip(1)
        .filter_map(libs::opt_bytes)
        .map(|b| String::from_utf8_lossy(&b).into_owned())
        .collect();
    let text = parts.join(" ");
    match level {
        0 => tracing::debug!(target: "script", "{text}"),
        1 => tracing::info!(target: "script", "{text}"),
        2 => tracing::info!(target: "script", "{text}"),
        _ => tracing::warn!(target: "script", "{text}"),
    }
    Ok(())
}

/// Creates the state the engine keeps.
pub fn new_state() -> mlua::Result<(Lua, Sandbox, Rc<RunState>)> {
    let run = Rc::new(RunState::new());
    let (lua, sandbox) = create(run.clone())?;
    Ok((lua, sandbox, run))
}
