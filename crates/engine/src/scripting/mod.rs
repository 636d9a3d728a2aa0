//! Lua scripting and Redis 7 functions: EVAL/EVALSHA/EVAL_RO/EVALSHA_RO,
//! FCALL/FCALL_RO, and the shard side of SCRIPT and FUNCTION.
//!
//! Layout:
//! - [`sandbox`] and `prelude.lua`: a shard's Lua state, its read-only
//!   globals, the `redis` API, the instruction hook (busy threshold, kills);
//! - [`call`]: `redis.call` / `redis.pcall` running commands of the table;
//! - [`convert`]: RESP ↔ Lua with Redis's rules;
//! - [`debugger`]: the Lua debugger (`SCRIPT DEBUG`);
//! - [`functions`]: libraries, `redis.register_function`, DUMP payloads;
//! - [`journal`]: undoing a held run that is to run again with every shard;
//! - [`libs`]: `bit`, `struct`, `cjson`, `cmsgpack`;
//! - [`monitor`]: what other cores see of a running script (BUSY, KILL);
//! - [`rand`]: Redis's `math.random` generator.
//!
//! One Lua state per shard, created on first use and kept in the shard's
//! [`ShardState`](crate::shard::ShardState) (a `Lua` is `!Send`: it never
//! leaves its core). A script runs to completion, and nothing else touches
//! what it holds meanwhile, so every script is atomic. What it holds is
//! what the router gave it: the shard owning its declared keys (or the
//! connection's, with none), a scratch copy of declared keys gathered
//! from several shards under a cross-shard transaction, or every shard of
//! the node ([`crate::lent`]). A script may touch keys it did not declare;
//! one held run that meets a key beyond what it holds is undone
//! ([`journal`]) and reported ([`RunReport`]), and the server runs the
//! script again with every shard ([`call`] has the rules).

pub mod call;
pub mod convert;
pub mod debugger;
pub mod functions;
pub mod journal;
pub mod libs;
pub mod monitor;
mod rand;
pub mod sandbox;

use crate::command::error::{CmdError, CmdResult, NOT_INTEGER};
use crate::command::Ctx;
use bytes::Bytes;
use functions::{Libraries, Library, PendingLibrary};
use hashbrown::HashMap;
use mlua::{Function, Lua, MultiValue, Table, Value};
use monitor::ScriptMonitor;
use sandbox::{RunState, Sandbox};
use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

/// The Redis version scripts see (`redis.REDIS_VERSION`), as INFO reports.
pub const REDIS_VERSION: &str = "7.0.15";
pub const REDIS_VERSION_NUM: f64 = 0x0007_000f as f64;

/// Runs between garbage collection steps, and the step's size in KB
/// (Redis's `LUA_GC_CYCLE_PERIOD`).
const GC_PERIOD: u32 = 50;
pub const NOSCRIPT: CmdError = CmdError::new("NOSCRIPT No matching script. Please use EVAL.");

/// Script and function flags (`#!lua flags=…`, `register_function{flags=…}`).
pub type ScriptFlags = u32;
pub mod flag {
    pub const NO_WRITES: u32 = 1 << 0;
    pub const ALLOW_OOM: u32 = 1 << 1;
    pub const ALLOW_STALE: u32 = 1 << 2;
    pub const NO_CLUSTER: u32 = 1 << 3;
    /// An EVAL script without a shebang: Redis 6 behaviour.
    pub const EVAL_COMPAT: u32 = 1 << 4;
    pub const ALLOW_CROSS_SLOT: u32 = 1 << 5;
    /// ringdb: the script may touch keys it did not declare (of its shard).
    pub const ALLOW_UNDECLARED: u32 = 1 << 6;
}

/// Flag names, in Redis's order.
pub const FLAG_NAMES: &[(u32, &str)] = &[
    (flag::NO_WRITES, "no-writes"),
    (flag::ALLOW_OOM, "allow-oom"),
    (flag::ALLOW_STALE, "allow-stale"),
    (flag::NO_CLUSTER, "no-cluster"),
    (flag::ALLOW_CROSS_SLOT, "allow-cross-slot-keys"),
    (flag::ALLOW_UNDECLARED, "allow-undeclared-keys"),
];

/// Flags from their names; `Err(name)` for an unknown one.
pub fn flags_from_names<'a>(
    names: impl Iterator<Item = &'a str>,
    ignore_case: bool,
) -> Result<ScriptFlags, String> {
    let mut flags = 0;
    for name in names {
        let found = FLAG_NAMES.iter().find(|(_, n)| {
            if ignore_case {
                n.eq_ignore_ascii_case(name)
            } else {
                *n == name
            }
        });
        match found {
            Some((bit, _)) => flags |= bit,
            None => return Err(name.to_string()),
        }
    }
    Ok(flags)
}

/// Redis's `evalExtractShebangFlags`: the flags of an EVAL script and the
/// length of its shebang line (0 without one).
pub fn shebang(body: &[u8]) -> Result<(ScriptFlags, usize), String> {
    if !body.starts_with(b"#!") {
        return Ok((flag::EVAL_COMPAT, 0));
    }
    let end = body.iter().position(|&c| c == b'\n').ok_or("Invalid script shebang")?;
    let parts = ringdb_protocol::parse::split_args(&body[..end])
        .filter(|p| !p.is_empty())
        .ok_or("Invalid engine in script shebang")?;
    if parts[0] != b"#!lua" {
        return Err(format!(
            "Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(&parts[0])
        ));
    }
    let mut flags = 0;
    for part in &parts[1..] {
        let text = String::from_utf8_lossy(part);
        let Some(list) = text.strip_prefix("flags=") else {
            return Err(format!("Unknown lua shebang option: {text}"));
        };
        let names = list.split(',').filter(|s| !s.is_empty());
        flags |= flags_from_names(names, false)
            .map_err(|name| format!("Unexpected flag in script shebang: {name}"))?;
    }
    Ok((flags, end))
}

/// Redis's `scriptFlagsToCmdFlags`: a script that declared flags (a
/// shebang, a function) runs with the command's flags but for what it
/// declared: WRITE and DENYOOM unless `no-writes`, never MAY_REPLICATE.
/// A script without a shebang keeps the command's flags.
pub fn command_flags(cmd_flags: u32, script: ScriptFlags) -> u32 {
    use crate::command::spec::flags as f;
    if script & flag::EVAL_COMPAT != 0 {
        return cmd_flags;
    }
    let mut out = cmd_flags & !(f::STALE | f::DENYOOM | f::WRITE | f::MAY_REPLICATE);
    if script & (flag::ALLOW_OOM | flag::NO_WRITES) == 0 {
        out |= f::DENYOOM;
    }
    if script & flag::NO_WRITES == 0 {
        out |= f::WRITE;
    }
    if script & flag::ALLOW_STALE != 0 {
        out |= f::STALE;
    }
    out
}

/// EVAL's script flags: from its body's shebang.
pub fn flags_of_body(_: &Scripting, args: &[Bytes]) -> Option<ScriptFlags> {
    shebang(args.get(1)?).ok().map(|(flags, _)| flags)
}

/// EVALSHA's: of the cached script, compiled here or known to the node.
pub fn flags_of_sha(scripting: &Scripting, args: &[Bytes]) -> Option<ScriptFlags> {
    let sha = std::str::from_utf8(args.get(1)?).ok()?.to_ascii_lowercase();
    if let Some(s) = scripting.engine.as_ref().and_then(|e| e.scripts.get(sha.as_str())) {
        return Some(s.flags);
    }
    let body = scripting.monitor.as_ref()?.0.body(&sha)?;
    shebang(&body).ok().map(|(flags, _)| flags)
}

/// FCALL's: of the function, as registered.
pub fn flags_of_function(scripting: &Scripting, args: &[Bytes]) -> Option<ScriptFlags> {
    scripting.libraries()?.function(args.get(1)?).map(|f| f.flags)
}

/// The settings scripts run with (part of the shard's settings).
#[derive(Clone, Copy, Debug)]
pub struct ScriptSettings {
    /// `busy-reply-threshold` (`lua-time-limit`), ms; 0 = never busy.
    pub busy_reply_threshold_ms: u64,
    /// `lua-memory-limit`: bytes one shard's Lua state may use; 0 = none.
    pub memory_limit: usize,
    /// `lua-allow-undeclared-keys`: scripts may touch keys they did not
    /// declare (Redis's behaviour, the default); `no` refuses them.
    pub allow_undeclared_keys: bool,
    /// This node is a read-only replica (`replicaof` set and
    /// `replica-read-only yes`): a script's writes get `-READONLY`.
    pub read_only_replica: bool,
}

impl Default for ScriptSettings {
    fn default() -> Self {
        ScriptSettings {
            busy_reply_threshold_ms: 5000,
            memory_limit: 256 * 1024 * 1024,
            allow_undeclared_keys: true,
            read_only_replica: false,
        }
    }
}

/// A compiled EVAL script.
struct Script {
    flags: ScriptFlags,
    function: Function,
}

/// A shard's Lua state and everything compiled into it.
pub struct LuaEngine {
    lua: Lua,
    sandbox: Sandbox,
    calls: call::CallFns,
    run: Rc<RunState>,
    scripts: HashMap<String, Script>,
    pub libraries: Libraries,
    memory_limit: std::cell::Cell<usize>,
    runs: u32,
}

/// What the server learns from the last script run on a shard.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunReport {
    /// The run met a key it did not hold and was undone: run the script
    /// again with every shard. Nothing of it is left but statistics.
    pub restart: bool,
    /// The script needs every shard: it met a key it did not hold (undone
    /// or not).
    pub needs_node: bool,
    /// A run with every shard: the shards of the undeclared keys it touched.
    pub undeclared: Vec<crate::shard::ShardId>,
    /// A gathered blocking command found nothing to serve
    /// ([`crate::shard::ShardState::found_nothing`]).
    pub found_nothing: bool,
}

/// One shard's scripting: the Lua state (created on first use) and the link
/// to the process-wide [`ScriptMonitor`].
#[derive(Default)]
pub struct Scripting {
    engine: Option<Box<LuaEngine>>,
    monitor: Option<(Arc<ScriptMonitor>, usize)>,
    while_busy: Option<Rc<dyn Fn()>>,
    /// The subscribers of this core, for a PUBLISH of a script that holds
    /// the only shard of the node.
    pub receivers: Option<Rc<crate::shard::Receivers<'static>>>,
    report: RunReport,
    /// The debugging client of the next EVAL on this shard (`SCRIPT
    /// DEBUG`): the server sets it right before it runs that command.
    pub debug_link: Option<Box<dyn debugger::Link>>,
}

fn lua_error(e: mlua::Error) -> CmdError {
    CmdError::owned(format!("ERR {}", e.to_string().replace(['\r', '\n'], " ")))
}

impl Scripting {
    /// Links this shard to the monitor all cores share.
    pub fn attach(&mut self, monitor: Arc<ScriptMonitor>, shard: usize) {
        if let Some(engine) = &self.engine {
            *engine.run.monitor.borrow_mut() = Some((monitor.clone(), shard));
        }
        self.monitor = Some((monitor, shard));
    }

    /// What a busy script's hook calls to serve the core's other clients
    /// (see [`sandbox::RunState::while_busy`]).
    pub fn serve_while_busy(&mut self, serve: Rc<dyn Fn()>) {
        if let Some(engine) = &self.engine {
            *engine.run.while_busy.borrow_mut() = Some(serve.clone());
        }
        self.while_busy = Some(serve);
    }

    pub fn monitor(&self) -> Option<&Arc<ScriptMonitor>> {
        self.monitor.as_ref().map(|(m, _)| m)
    }

    /// What the last run on this shard reported (and forgets it).
    pub fn take_report(&mut self) -> RunReport {
        std::mem::take(&mut self.report)
    }

    /// What serves the core's other clients while a script is busy, for a
    /// core whose shard is lent to a busy run elsewhere.
    pub fn while_busy(&self) -> Option<Rc<dyn Fn()>> {
        self.while_busy.clone()
    }

    /// The Lua state, created on first use.
    fn engine(&mut self) -> Result<&mut LuaEngine, CmdError> {
        if self.engine.is_none() {
            let (lua, sandbox, run) = sandbox::new_state().map_err(lua_error)?;
            *run.monitor.borrow_mut() = self.monitor.clone();
            *run.while_busy.borrow_mut() = self.while_busy.clone();
            let calls = call::CallFns::new(&lua).map_err(lua_error)?;
            // Set once: outside a run they refuse by themselves.
            sandbox.redis.raw_set("call", calls.call.clone()).map_err(lua_error)?;
            sandbox.redis.raw_set("pcall", calls.pcall.clone()).map_err(lua_error)?;
            // What building the sandbox left behind (a third of the state).
            let _ = lua.gc_collect();
            self.engine = Some(Box::new(LuaEngine {
                lua,
                sandbox,
                calls,
                run,
                scripts: HashMap::new(),
                libraries: Libraries::default(),
                memory_limit: std::cell::Cell::new(0),
                runs: 0,
            }));
        }
        self.engine.as_deref_mut().ok_or_else(|| CmdError::new("ERR no Lua state"))
    }

    /// Takes the engine out for a run (the run needs the shard state the
    /// engine lives in); [`Scripting::put_back`] returns it.
    fn take(&mut self) -> Result<Box<LuaEngine>, CmdError> {
        self.engine()?;
        self.engine.take().ok_or_else(|| CmdError::new("ERR no Lua state"))
    }

    fn put_back(&mut self, engine: Box<LuaEngine>) {
        self.engine = Some(engine);
    }

    /// The libraries loaded on this shard (none before any FUNCTION LOAD).
    pub fn libraries(&self) -> Option<&Libraries> {
        self.engine.as_ref().map(|e| &e.libraries)
    }

    /// SCRIPT LOAD on this shard: compiles and caches `body`; its SHA1.
    pub fn script_load(&mut self, body: &Bytes) -> Result<String, CmdError> {
        let sha = sha1_hex(body);
        let monitor = self.monitor.clone();
        self.engine()?.script(&sha, Some(body), monitor.as_ref().map(|(m, _)| m))?;
        Ok(sha)
    }

    /// SCRIPT EXISTS on this shard: cached here or known to the process.
    pub fn script_exists(&self, sha: &[u8]) -> bool {
        let sha = String::from_utf8_lossy(sha).to_ascii_lowercase();
        self.engine.as_ref().is_some_and(|e| e.scripts.contains_key(&sha))
            || self.monitor().is_some_and(|m| m.has_body(&sha))
    }

    /// SCRIPT FLUSH on this shard: forgets every compiled script.
    pub fn script_flush(&mut self) {
        if let Some(engine) = &mut self.engine {
            engine.scripts.clear();
            let _ = engine.lua.gc_collect();
        }
    }

    /// FUNCTION LOAD on this shard; the library's name.
    pub fn function_load(&mut self, code: &Bytes, replace: bool) -> Result<String, CmdError> {
        let engine = self.engine()?;
        let current = std::mem::take(&mut engine.libraries);
        let compiled = engine.compile_library(code, replace, &current);
        engine.libraries = current;
        let lib = compiled?;
        let name = lib.name.clone();
        engine.libraries.insert(lib);
        Ok(name)
    }

    /// FUNCTION DELETE on this shard.
    pub fn function_delete(&mut self, name: &[u8]) -> Result<(), CmdError> {
        let name = String::from_utf8_lossy(name);
        let removed = self.engine.as_mut().and_then(|e| e.libraries.remove(&name));
        removed.map(|_| ()).ok_or(CmdError::new("ERR Library not found"))
    }

    /// FUNCTION FLUSH on this shard.
    pub fn function_flush(&mut self) {
        if let Some(engine) = &mut self.engine {
            engine.libraries.clear();
            let _ = engine.lua.gc_collect();
        }
    }

    /// FUNCTION DUMP's payload.
    pub fn function_dump(&self) -> Vec<u8> {
        match self.libraries() {
            Some(libs) => functions::dump(libs.libs.values().map(|l| &l.code[..])),
            None => functions::dump(std::iter::empty()),
        }
    }

    /// FUNCTION RESTORE on this shard with `policy` (`flush`, `append`,
    /// `replace`).
    pub fn function_restore(&mut self, payload: &[u8], policy: RestorePolicy) -> CmdResult {
        let codes = functions::parse_dump(payload).map_err(err)?;
        let engine = self.engine()?;
        let mut restored = Libraries::default();
        for code in codes {
            let lib = engine.compile_library(&Bytes::from(code), false, &restored)?;
            restored.insert(lib);
        }
        let current = &mut engine.libraries;
        match policy {
            RestorePolicy::Flush => *current = restored,
            RestorePolicy::Append | RestorePolicy::Replace => {
                let replace = policy == RestorePolicy::Replace;
                for lib in restored.libs.values() {
                    if !replace && current.libs.contains_key(&lib.name) {
                        return Err(err(format!("Library {} already exists", lib.name)));
                    }
                    let except = replace.then_some(lib.name.as_str());
                    if let Some(f) = current.collision(lib, except) {
                        return Err(err(format!("Function {f} already exists")));
                    }
                }
                let names: Vec<String> = restored.libs.keys().cloned().collect();
                for name in names {
                    if let Some(lib) = restored.remove(&name) {
                        current.insert(lib);
                    }
                }
            }
        }
        Ok(())
    }

    /// Memory the Lua state uses (INFO memory's `used_memory_lua`).
    pub fn used_memory(&self) -> usize {
        self.engine.as_ref().map_or(0, |e| e.lua.used_memory())
    }

    /// Bytes of the script cache's map and of the function libraries'
    /// code and names (MEMORY STATS `lua.caches`, `functions.caches`). The
    /// compiled functions themselves live in the Lua state
    /// ([`Self::used_memory`]).
    pub fn cache_memory(&self) -> (usize, usize) {
        let Some(e) = &self.engine else { return (0, 0) };
        // The map's slots, and each sha's 40 bytes of text.
        let slot = std::mem::size_of::<(String, Script)>();
        let scripts = e.scripts.capacity() * slot + e.scripts.len() * 40;
        let functions = e
            .libraries
            .libs
            .values()
            .map(|l| {
                std::mem::size_of::<Library>()
                    + l.code.len()
                    + l.name.len()
                    + l.functions.keys().map(String::len).sum::<usize>()
            })
            .sum();
        (scripts, functions)
    }

    /// Scripts cached on this shard.
    pub fn script_count(&self) -> usize {
        self.engine.as_ref().map_or(0, |e| e.scripts.len())
    }
}

/// FUNCTION RESTORE's policies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestorePolicy {
    Flush,
    Append,
    Replace,
}

fn err(text: impl Into<String>) -> CmdError {
    CmdError::owned(format!("ERR {}", text.into()))
}

pub fn sha1_hex(data: &[u8]) -> String {
    ringdb_types::sha1::hex(&ringdb_types::sha1::sha1(data))
}

/// Redis's EVAL/FCALL `numkeys` checks; `bad` is the error for a number
/// that does not parse.
fn numkeys(arg: &[u8], argc: usize, bad: CmdError) -> Result<usize, CmdError> {
    let n = ringdb_types::number::parse_i64(arg).ok_or(bad)?;
    if n > argc as i64 - 3 {
        return Err(CmdError::new("ERR Number of keys can't be greater than number of args"));
    }
    if n < 0 {
        return Err(CmdError::new("ERR Number of keys can't be negative"));
    }
    Ok(n as usize)
}

/// What is being run.
struct Invocation<'a> {
    function: Function,
    flags: ScriptFlags,
    /// SHA1 (EVAL) or function name (FCALL), for messages.
    name: String,
    eval: bool,
    read_only_command: bool,
    keys: &'a [Bytes],
    argv: &'a [Bytes],
    command: &'a [Bytes],
    /// A debugging run's client (EVAL's script, `command[1]`, is the source).
    debug: debugger::Pending,
}

impl LuaEngine {
    /// Lua 5.1 does not collect garbage when an allocation fails, so under a
    /// memory limit the garbage of a failed script would starve the next
    /// one: collect in full once half of the limit is in use.
    fn relieve(&self, memory_limit: usize) {
        if memory_limit != self.memory_limit.get() {
            let _ = self.lua.set_memory_limit(memory_limit);
            self.memory_limit.set(memory_limit);
        }
        if memory_limit > 0 && self.lua.used_memory() > memory_limit / 2 {
            let _ = self.lua.gc_collect();
        }
    }

    /// The compiled script `sha`, compiling `body` (or the body another
    /// shard cached) if needed; NOSCRIPT when there is none.
    fn script(
        &mut self,
        sha: &str,
        body: Option<&Bytes>,
        monitor: Option<&Arc<ScriptMonitor>>,
    ) -> Result<(Function, ScriptFlags), CmdError> {
        if let Some(s) = self.scripts.get(sha) {
            return Ok((s.function.clone(), s.flags));
        }
        let body = match body {
            Some(b) => b.clone(),
            None => monitor.and_then(|m| m.body(sha)).ok_or(NOSCRIPT)?,
        };
        let (flags, skip) = shebang(&body).map_err(err)?;
        let function = self
            .lua
            .load(&body[skip..])
            .set_name("@user_script")
            .set_environment(self.sandbox.env.clone())
            .into_function()
            .map_err(|e| err(format!("Error compiling script (new function): {}", syntax(&e))))?;
        self.scripts.insert(sha.to_string(), Script { flags, function: function.clone() });
        if let Some(m) = monitor {
            m.remember(sha, &body);
        }
        Ok((function, flags))
    }

    /// Compiles a library and runs its code to collect its functions,
    /// checking it against `existing` (Redis's
    /// `functionsCreateWithLibraryCtx`).
    fn compile_library(
        &mut self,
        code: &Bytes,
        replace: bool,
        existing: &Libraries,
    ) -> Result<Library, CmdError> {
        let md = functions::metadata(code).map_err(err)?;
        if !functions::valid_name(md.name.as_bytes()) {
            return Err(err(functions::BAD_NAME));
        }
        if !md.engine.eq_ignore_ascii_case("lua") {
            return Err(err(format!("Engine '{}' not found", md.engine)));
        }
        if existing.libs.contains_key(&md.name) && !replace {
            return Err(err(format!("Library '{}' already exists", md.name)));
        }
        let body = self
            .lua
            .load(&code[md.body..])
            .set_name("@user_function")
            .set_environment(self.sandbox.env.clone())
            .into_function()
            .map_err(|e| err(format!("Error compiling function: {}", syntax(&e))))?;
        let functions = self.run_library_code(body)?;
        if functions.functions.is_empty() {
            return Err(err("No functions registered"));
        }
        let lib =
            Library { name: md.name.clone(), code: code.clone(), functions: functions.functions };
        if let Some(f) = existing.collision(&lib, Some(&md.name)) {
            return Err(err(format!("Function {f} already exists")));
        }
        Ok(lib)
    }

    /// Runs a library's code with the load-time API as its globals.
    fn run_library_code(&mut self, body: Function) -> Result<PendingLibrary, CmdError> {
        let meta = &self.sandbox.env_meta;
        meta.raw_set("__index", self.sandbox.load_api.clone()).map_err(lua_error)?;
        *self.run.loading.borrow_mut() = Some(PendingLibrary::default());
        self.run.started.set(Instant::now());
        // What an earlier run left (a SCRIPT KILL) is not this load's.
        self.run.killed.set(false);
        self.run.restart.set(false);
        let result = self.sandbox.run_load.call::<MultiValue>(body);
        let pending = self.run.loading.borrow_mut().take().unwrap_or_default();
        meta.raw_set("__index", self.sandbox.real.clone()).map_err(lua_error)?;
        let values = result.map_err(lua_error)?;
        if let Some(Value::Boolean(false)) = values.front() {
            let msg = match values.get(1) {
                Some(Value::Table(t)) => error_field(t),
                Some(other) => format!("ERR {other:?}"),
                None => "ERR unknown error".into(),
            };
            return Err(err(format!("Error registering functions: {msg}")));
        }
        Ok(pending)
    }

    /// Starts a debugging session for this run: the debugger's hook
    /// replaces the busy hook until [`debugger::Session::end`].
    fn debug_session(
        &self,
        link: Box<dyn debugger::Link>,
        body: &[u8],
    ) -> mlua::Result<Rc<RefCell<debugger::Session>>> {
        debugger::begin(&self.run);
        let session =
            Rc::new(RefCell::new(debugger::Session::new(link, body, self.sandbox.real.clone())));
        let triggers =
            mlua::HookTriggers::new().every_line().every_nth_instruction(debugger::COUNT_EVERY);
        self.lua.set_hook(triggers, debugger::hook(session.clone(), self.run.clone()))?;
        Ok(session)
    }

    /// Runs a script or function against `ctx`'s keyspace and writes its
    /// result (or error) as the reply.
    fn invoke(&mut self, ctx: &mut Ctx, mut inv: Invocation) -> CmdResult {
        let compat = inv.flags & flag::EVAL_COMPAT != 0;
        if !compat && inv.flags & flag::NO_WRITES == 0 && inv.read_only_command {
            return Err(CmdError::new(
                "ERR Can not execute a script with write flag using *_ro command.",
            ));
        }
        // Over `maxmemory` before the script: a script with flags runs only
        // if it may not write or allows it (Redis's `scriptPrepareForRun`).
        let oom = ctx.ks.state.oom;
        if oom && !compat && inv.flags & (flag::ALLOW_OOM | flag::NO_WRITES) == 0 {
            return Err(CmdError::new(
                "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'",
            ));
        }
        // The declared keys are the ones the script's commands touch: their
        // entries load while Lua sets the run up.
        let keys = inv.keys.iter().map(|k| &k[..]);
        let db = ctx.ks.db;
        let (keyspace, state) = ctx.ks.for_nested_calls();
        crate::shard::prefetch_keys(keyspace, state, db, keys);
        let settings = ctx.ks.state.settings.scripts;
        let lua = &self.lua;
        let arrays = keys_and_argv(lua, &self.sandbox.real, inv.keys, inv.argv, inv.eval)
            .map_err(lua_error)?;

        let read_only = inv.read_only_command || (!compat && inv.flags & flag::NO_WRITES != 0);
        let allow_undeclared =
            settings.allow_undeclared_keys || inv.flags & flag::ALLOW_UNDECLARED != 0;
        self.run.libraries.set((self.libraries.libs.len(), self.libraries.function_count()));
        let busy_ms = settings.busy_reply_threshold_ms;
        let session = match inv.debug.start() {
            Some(link) => Some(self.debug_session(link, &inv.command[1]).map_err(lua_error)?),
            None => None,
        };
        self.run.begin(inv.name.clone(), inv.command, inv.eval, busy_ms);
        // The script's commands are held to the state it started in
        // (`CallCtx::oom`), not refused by the shard's own check.
        ctx.ks.state.oom = false;
        // A held run keeps a journal when it may meet a key of another
        // shard: on a real shard of a node of several.
        let reach = match ctx.lent.take() {
            Some(lent) => call::Reach::Node(lent),
            None => call::Reach::Held(journal::Journal::new(
                !ctx.ks.state.funnel.is_recording() && !ctx.ks.keyspace().owns_every_slot(),
            )),
        };
        let (now_ms, db) = (ctx.ks.now_ms, ctx.ks.db);
        let (keyspace, state) = ctx.ks.for_nested_calls();
        let call_ctx = RefCell::new(call::CallCtx {
            keyspace,
            state,
            reach,
            clock: crate::shard::Clock::at(now_ms),
            client: crate::command::ClientInfo { db, ..ctx.client },
            keys: inv.keys,
            read_only,
            allow_undeclared,
            oom: oom && (compat || inv.flags & flag::ALLOW_OOM == 0),
            run: &self.run,
            reply: Vec::new(),
            // A user deleted meanwhile may run nothing.
            user: ctx.client.acl_user.map(|uid| {
                crate::acl::registry()
                    .by_uid(uid)
                    .unwrap_or_else(|| std::sync::Arc::new(crate::acl::User::new("", false)))
            }),
        });
        let entered = self.calls.enter(&call_ctx);
        let outcome = match arrays {
            None => self.sandbox.run_eval.call::<MultiValue>(inv.function.clone()),
            Some((keys, argv)) => {
                self.sandbox.run_function.call::<MultiValue>((inv.function.clone(), keys, argv))
            }
        };
        drop(entered);
        if let Some(session) = session {
            session.borrow_mut().end(&self.run.ldb);
            sandbox::install_busy_hook(lua, &self.run).map_err(lua_error)?;
        }
        if let Some(panic) = self.run.panicked.take() {
            std::panic::resume_unwind(panic);
        }
        let (journal, undeclared) = match call_ctx.into_inner().reach {
            call::Reach::Held(journal) => (Some(journal), Vec::new()),
            call::Reach::Node(lent) => (None, std::mem::take(&mut lent.undeclared)),
        };
        ctx.ks.state.oom = oom;
        let script_resp = self.run.resp.get();
        let restart = self.run.restart.get();
        let report = RunReport {
            restart,
            needs_node: self.run.needs_node.get(),
            undeclared,
            found_nothing: false,
        };
        let runs = &mut ctx.ks.state.stats.script_runs;
        *match (&journal, restart) {
            (None, _) => &mut runs.node,
            (Some(_), true) => &mut runs.restarted,
            (Some(_), false) => &mut runs.held,
        } += 1;
        // An undone run leaves nothing: the server runs it again.
        if let (true, Some(journal)) = (restart, journal) {
            let (keyspace, state) = ctx.ks.for_nested_calls();
            journal.undo(keyspace, state);
        }
        ctx.ks.state.scripting.report = report;
        self.run.end();
        self.relieve(settings.memory_limit);
        // Garbage collection steps worth 50 KB every 50 runs, as Redis does
        // (`LUA_GC_CYCLE_PERIOD`), so that garbage never piles up to a long
        // full collection. (mlua's `gc_step` is a single step: too little
        // to keep up with short scripts.)
        self.runs += 1;
        if self.runs >= GC_PERIOD {
            self.runs = 0;
            // SAFETY: one Lua API call inside mlua's protected call; nothing
            // is left on the stack.
            let _ = unsafe {
                lua.exec_raw::<()>((), |state| {
                    mlua::ffi::lua_gc(state, mlua::ffi::LUA_GCSTEP, GC_PERIOD as i32);
                })
            };
        }
        if restart {
            return Ok(());
        }
        let values = match outcome {
            Ok(values) => values,
            Err(e) => {
                return Err(CmdError::owned(format!(
                    "ERR Error running script {}, {}",
                    inv.name,
                    syntax(&e)
                )))
            }
        };
        match values.front() {
            Some(Value::Boolean(true)) => {
                let result = values.get(1).cloned().unwrap_or(Value::Nil);
                // A returned error table is the command's error: counted in
                // INFO errorstats like any other, unless a command the
                // script called counted it.
                if let Value::Table(t) = &result {
                    if let Ok(Value::String(e)) = t.raw_get::<Value>("err") {
                        ctx.ks.state.stats.error_counted = counted(t);
                        return Err(CmdError::owned(e.to_string_lossy()));
                    }
                }
                convert::lua_to_resp(&result, script_resp, &mut ctx.out);
                Ok(())
            }
            _ => {
                if let Some(Value::Table(t)) = values.get(1) {
                    ctx.ks.state.stats.error_counted = counted(t);
                }
                Err(script_error(values.get(1), &inv.name))
            }
        }
    }
}

/// Makes the run's KEYS and ARGV arrays in one protected call (each
/// protected call costs a C closure: the set-up is a fair share of a short
/// script's run). For EVAL they become the globals `KEYS` and `ARGV` of
/// `real` and `None` is returned; for FCALL they are returned (the
/// function's arguments) and the globals are cleared.
fn keys_and_argv(
    lua: &Lua,
    real: &Table,
    keys: &[Bytes],
    argv: &[Bytes],
    globals: bool,
) -> mlua::Result<Option<(Table, Table)>> {
    use mlua::ffi;
    // SAFETY: plain Lua API calls on the state mlua hands over, inside its
    // protected call: a memory error unwinds to mlua as an `Err`, and no
    // value with a destructor is alive in this closure meanwhile. `real` is
    // at stack index 1; the stack holds what the result type says at the
    // end (nothing, or the two tables).
    unsafe {
        lua.exec_raw::<(Option<Table>, Option<Table>)>(real, |state| {
            for items in [keys, argv] {
                // A size hint only: clamped, never wrapped.
                ffi::lua_createtable(state, items.len().min(i32::MAX as usize) as i32, 0);
                for (i, item) in items.iter().enumerate() {
                    ffi::lua_pushlstring(state, item.as_ptr().cast(), item.len());
                    ffi::lua_rawseti(state, -2, i as ffi::lua_Integer + 1);
                }
            }
            for (name, at) in [(c"ARGV", -1), (c"KEYS", -2)] {
                ffi::lua_pushstring(state, name.as_ptr());
                if globals {
                    ffi::lua_pushvalue(state, at - 1);
                } else {
                    ffi::lua_pushnil(state);
                }
                ffi::lua_rawset(state, 1);
            }
            ffi::lua_remove(state, 1);
            if globals {
                ffi::lua_settop(state, 0);
            }
        })
    }
    .map(|(keys, argv)| keys.zip(argv))
}

/// The text of a Lua error for messages: syntax errors as Lua prints them.
fn syntax(e: &mlua::Error) -> String {
    match e {
        mlua::Error::SyntaxError { message, .. } => message.clone(),
        mlua::Error::RuntimeError(m) | mlua::Error::MemoryError(m) => m.clone(),
        mlua::Error::CallbackError { cause, .. } => syntax(cause),
        other => other.to_string(),
    }
}

fn error_field(t: &Table) -> String {
    match t.raw_get::<Value>("err") {
        Ok(Value::String(s)) => s.to_string_lossy(),
        Ok(Value::Number(n)) => libs::lua_number_text(n),
        Ok(Value::Integer(i)) => i.to_string(),
        _ => "ERR unknown error".into(),
    }
}

/// Whether an error table's error was counted where it happened.
fn counted(t: &Table) -> bool {
    t.raw_get::<bool>(convert::COUNTED.to_str().unwrap_or_default()).unwrap_or(false)
}

/// The reply for a script that failed, as Redis writes it:
/// `<err> script: <name>, on <source>:<line>.`
fn script_error(value: Option<&Value>, name: &str) -> CmdError {
    let Some(Value::Table(t)) = value else {
        let msg = match value {
            Some(Value::String(s)) => s.to_string_lossy(),
            _ => "execution failure".into(),
        };
        let msg: String = msg.chars().take(100).collect();
        return CmdError::owned(format!("ERR Error running script {name}, {msg}"));
    };
    let msg = error_field(t);
    let source = t.raw_get::<Value>("source").ok().and_then(|v| libs::opt_bytes(&v));
    let line = t.raw_get::<Value>("line").ok().and_then(|v| libs::opt_bytes(&v));
    match (source, line) {
        (Some(source), Some(line)) => CmdError::owned(format!(
            "{msg} script: {name}, on {}:{}.",
            String::from_utf8_lossy(&source),
            String::from_utf8_lossy(&line)
        )),
        _ => CmdError::owned(msg),
    }
}

/// EVAL, EVALSHA, EVAL_RO, EVALSHA_RO.
pub fn eval(ctx: &mut Ctx, args: &[Bytes], by_sha: bool, read_only: bool) -> CmdResult {
    let debug = debugger::Pending(ctx.ks.state.scripting.debug_link.take());
    if by_sha && args[1].len() != 40 {
        return Err(NOSCRIPT);
    }
    let n = numkeys(&args[2], args.len(), NOT_INTEGER)?;
    let sha = if by_sha {
        String::from_utf8_lossy(&args[1]).to_ascii_lowercase()
    } else {
        sha1_hex(&args[1])
    };
    let monitor = ctx.ks.state.scripting.monitor().cloned();
    let mut engine = ctx.ks.state.scripting.take()?;
    engine.relieve(ctx.ks.state.settings.scripts.memory_limit);
    let result = (|| {
        let body = (!by_sha).then(|| &args[1]);
        let (function, flags) = engine.script(&sha, body, monitor.as_ref())?;
        let inv = Invocation {
            function,
            flags,
            name: sha,
            eval: true,
            read_only_command: read_only,
            keys: &args[3..3 + n],
            argv: &args[3 + n..],
            command: args,
            debug,
        };
        engine.invoke(ctx, inv)
    })();
    ctx.ks.state.scripting.put_back(engine);
    result
}

/// FCALL, FCALL_RO.
pub fn fcall(ctx: &mut Ctx, args: &[Bytes], read_only: bool) -> CmdResult {
    let function = ctx
        .ks
        .state
        .scripting
        .libraries()
        .and_then(|libs| libs.function(&args[1]))
        .map(|f| (f.callback.clone(), f.flags, f.name.clone()));
    let Some((function, flags, name)) = function else {
        return Err(CmdError::new("ERR Function not found"));
    };
    let n = numkeys(&args[2], args.len(), CmdError::new("ERR Bad number of keys provided"))?;
    let mut engine = ctx.ks.state.scripting.take()?;
    engine.relieve(ctx.ks.state.settings.scripts.memory_limit);
    let inv = Invocation {
        function,
        flags,
        name,
        eval: false,
        read_only_command: read_only,
        keys: &args[3..3 + n],
        argv: &args[3 + n..],
        command: args,
        debug: debugger::Pending(None),
    };
    let result = engine.invoke(ctx, inv);
    ctx.ks.state.scripting.put_back(engine);
    result
}

#[cfg(test)]
mod tests;
