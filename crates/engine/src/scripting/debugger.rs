//! The Lua debugger: Redis's LDB (`SCRIPT DEBUG YES|SYNC`, `redis-cli
//! --ldb`), with Redis 7.0's commands, texts and wire format.
//!
//! A debugging EVAL runs with a line hook instead of the busy hook. The
//! hook stops where the client asked (a step, a breakpoint, a call of
//! `redis.breakpoint()`, or a run past the busy threshold), sends what it
//! logged as one array of status lines, and reads the client's debugger
//! commands from the connection itself, blocking the core, until one of
//! them resumes the script. The connection is a [`Link`] the server gives
//! (its socket on this core, or in a forked copy of the process).
//!
//! What `redis.call`, `redis.debug` and `redis.breakpoint` log or set is
//! [`DebugState`] (part of the run's state, so they reach it without the
//! session); the session itself (the link, the breakpoints, the source)
//! belongs to the hook.

use super::sandbox::RunState;
use mlua::debug::{Debug, DebugEvent};
use mlua::{Lua, MultiValue, Table, Value, VmState};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Instant;

/// How long a [`Link::send`] waits for a client that reads nothing before
/// the client counts as gone (Redis's send timeout on a debugging client).
pub const SEND_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The debugging client's connection, blocking.
pub trait Link {
    /// Waits for bytes from the client and appends them to `into`; `false`
    /// once the client has gone.
    fn recv(&mut self, into: &mut Vec<u8>) -> bool;
    /// Sends `bytes`, waiting [`SEND_TIMEOUT`] at most; a failure shows at
    /// the next `recv`.
    fn send(&mut self, bytes: &[u8]);
}

/// Redis's `LDB_BREAKPOINTS_MAX`.
const MAX_BREAKPOINTS: usize = 64;
/// Redis's `LDB_MAX_LEN_DEFAULT`: replies and values logged are cut here.
const DEFAULT_MAXLEN: usize = 256;
/// What a client may have sent before one command is complete.
const MAX_INPUT: usize = 1 << 20;
/// Nesting shown of a table in a table (Redis's `LDB_MAX_VALUES_DEPTH`).
const MAX_DEPTH: usize = 10;
/// Instructions between the hook's looks at the clock while the script
/// runs free (Redis's count for the debugger's hook).
pub const COUNT_EVERY: u32 = 100_000;

/// What the debugger shares with `redis.call`, `redis.debug` and
/// `redis.breakpoint` during a debugging run.
#[derive(Default)]
pub struct DebugState {
    /// A debugging session runs (Redis's `ldb.active`).
    pub active: Cell<bool>,
    /// Stop at the next line; commands and their replies are logged
    /// meanwhile (Redis's `ldb.step`).
    pub step: Cell<bool>,
    /// `redis.breakpoint()` was called: stop at the next line.
    pub lua_breakpoint: Cell<bool>,
    pub current_line: Cell<i64>,
    /// Logged replies and values are cut at this length (0: never).
    maxlen: Cell<usize>,
    maxlen_hint_sent: Cell<bool>,
    logs: RefCell<Vec<Vec<u8>>>,
}

impl DebugState {
    /// Whether commands and replies are logged now (Redis's
    /// `ldbIsEnabled`).
    pub fn logging(&self) -> bool {
        self.active.get() && self.step.get()
    }

    fn begin(&self) {
        self.active.set(true);
        self.step.set(true);
        self.lua_breakpoint.set(false);
        self.current_line.set(0);
        self.maxlen.set(DEFAULT_MAXLEN);
        self.maxlen_hint_sent.set(false);
        self.logs.borrow_mut().clear();
    }

    pub fn log(&self, entry: impl Into<Vec<u8>>) {
        self.logs.borrow_mut().push(entry.into());
    }

    /// Logs `entry` cut at `maxlen`, with a hint the first time.
    fn log_trimmed(&self, mut entry: Vec<u8>) {
        let maxlen = self.maxlen.get();
        let trimmed = maxlen > 0 && entry.len() > maxlen;
        if trimmed {
            entry.truncate(maxlen);
            entry.extend_from_slice(b" ...");
        }
        self.log(entry);
        if trimmed && !self.maxlen_hint_sent.replace(true) {
            self.log("<hint> The above reply was trimmed. Use 'maxlen 0' to disable trimming.");
        }
    }

    /// `<redis> cmd args…` for a command the script calls (ten arguments
    /// at most).
    pub fn log_command(&self, argv: &[bytes::Bytes]) {
        let mut line = b"<redis>".to_vec();
        for (i, arg) in argv.iter().enumerate() {
            if i == 10 {
                line.extend_from_slice(format!(" ... ({} more)", argv.len() - i - 1).as_bytes());
                break;
            }
            line.push(b' ');
            line.extend_from_slice(arg);
        }
        self.log(line);
    }

    /// `<reply> …` for a command's reply, in human form.
    pub fn log_reply(&self, reply: &[u8]) {
        let mut line = b"<reply> ".to_vec();
        human(&mut line, reply);
        self.log_trimmed(line);
    }

    /// `<error> …` for a command the script may not call.
    pub fn log_error(&self, text: &str) {
        self.log(format!("<error> {}", text.strip_prefix('-').unwrap_or(text)));
    }

    /// `redis.debug(…)`: its arguments, logged with the current line.
    pub fn log_debug(&self, values: &MultiValue) {
        if !self.active.get() {
            return;
        }
        let mut line = format!("<debug> line {}: ", self.current_line.get()).into_bytes();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                line.extend_from_slice(b", ");
            }
            cat_value(&mut line, v, 0);
        }
        self.log(line);
    }

    /// Sends the log as one array of status lines (newlines become
    /// spaces), emptying it.
    fn send(&self, link: &mut dyn Link) {
        let logs = std::mem::take(&mut *self.logs.borrow_mut());
        let mut wire = format!("*{}\r\n", logs.len()).into_bytes();
        for mut line in logs {
            for c in &mut line {
                if *c == b'\r' || *c == b'\n' {
                    *c = b' ';
                }
            }
            wire.push(b'+');
            wire.extend_from_slice(&line);
            wire.extend_from_slice(b"\r\n");
        }
        link.send(&wire);
    }
}

/// One debugging session: the client's link, the breakpoints, the
/// script's source by line and what the client sent of its next command.
pub struct Session {
    link: Box<dyn Link>,
    breakpoints: Vec<i64>,
    source: Vec<Vec<u8>>,
    input: Vec<u8>,
    /// The globals KEYS and ARGV live in (the sandbox's real table).
    globals: Table,
}

/// How a run of the debugger's prompt ended.
enum Resume {
    /// Go on running the script.
    Run,
    /// The client has gone.
    Gone,
}

impl Session {
    /// A session for a script with `body`.
    pub fn new(link: Box<dyn Link>, body: &[u8], globals: Table) -> Self {
        let mut end = body.len();
        while end > 0 && matches!(body[end - 1], b'\n' | b'\r') {
            end -= 1;
        }
        let source = body[..end].split(|&c| c == b'\n').map(<[u8]>::to_vec).collect();
        Session { link, breakpoints: Vec::new(), source, input: Vec::new(), globals }
    }

    fn line(&self, n: i64) -> &[u8] {
        usize::try_from(n - 1)
            .ok()
            .and_then(|i| self.source.get(i))
            .map_or(b"<out of range source code line>", |l| &l[..])
    }

    fn is_breakpoint(&self, n: i64) -> bool {
        self.breakpoints.contains(&n)
    }

    /// `-> 3   code`, marked as the current line and/or a breakpoint.
    fn log_line(&self, ldb: &DebugState, n: i64) {
        let prefix = match (ldb.current_line.get() == n, self.is_breakpoint(n)) {
            (true, true) => "->#",
            (true, false) => "-> ",
            (false, true) => "  #",
            (false, false) => "   ",
        };
        let mut line = format!("{prefix}{n:<3} ").into_bytes();
        line.extend_from_slice(self.line(n));
        ldb.log(line);
    }

    /// `list`: the lines within `context` of `around` (0: the whole file).
    fn list(&self, ldb: &DebugState, around: i64, context: i64) {
        for n in 1..=self.source.len() as i64 {
            if around == 0 || (around - n).abs() <= context {
                self.log_line(ldb, n);
            }
        }
    }

    /// The hook, on every line and every [`COUNT_EVERY`] instructions
    /// (Redis's `luaLdbLineHook`).
    pub fn on_hook(&mut self, lua: &Lua, debug: &Debug, run: &RunState) -> mlua::Result<()> {
        let ldb = &run.ldb;
        let line = debug.current_line().map_or(-1, |l| l as i64);
        let in_script = debug.source().short_src.is_some_and(|s| s.contains("user_script"));
        ldb.current_line.set(line);
        if !in_script {
            return Ok(());
        }
        let breakpoint = self.is_breakpoint(line) || ldb.lua_breakpoint.get();
        let mut timeout = false;
        if debug.event() == DebugEvent::Count && !ldb.step.get() && !breakpoint {
            let limit = match run.busy_after_ms.get() {
                0 => 5000,
                ms => ms,
            };
            if run.started.get().elapsed().as_millis() < u128::from(limit) {
                return Ok(());
            }
            timeout = true;
            ldb.step.set(true);
        }
        if !ldb.step.get() && !breakpoint {
            return Ok(());
        }
        let reason = if breakpoint {
            if ldb.lua_breakpoint.get() {
                "redis.breakpoint() called"
            } else {
                "break point"
            }
        } else if timeout {
            "timeout reached, infinite loop?"
        } else {
            "step over"
        };
        ldb.step.set(false);
        ldb.lua_breakpoint.set(false);
        ldb.log(format!("* Stopped at {line}, stop reason = {reason}"));
        self.log_line(ldb, line);
        ldb.send(&mut *self.link);
        if let Resume::Gone = self.prompt(lua, run)? {
            if timeout {
                return Err(mlua::Error::runtime(
                    "timeout during Lua debugging with client closing connection",
                ));
            }
        }
        run.started.set(Instant::now());
        Ok(())
    }

    /// Reads and runs debugger commands until one resumes the script
    /// (Redis's `ldbRepl`).
    fn prompt(&mut self, lua: &Lua, run: &RunState) -> mlua::Result<Resume> {
        let ldb = &run.ldb;
        loop {
            let argv = loop {
                match parse_command(&self.input) {
                    Parsed::Command(argv) => break argv,
                    Parsed::Error => {
                        return Err(mlua::Error::runtime("protocol error"));
                    }
                    Parsed::Incomplete => {}
                }
                if !self.link.recv(&mut self.input) {
                    // The script runs on without the client.
                    ldb.step.set(false);
                    self.breakpoints.clear();
                    return Ok(Resume::Gone);
                }
                if self.input.len() > MAX_INPUT {
                    self.input = Vec::new();
                    return Err(mlua::Error::runtime("max client buffer reached"));
                }
            };
            self.input.clear();
            let name = String::from_utf8_lossy(&argv[0]).to_ascii_lowercase();
            let arg = |i: usize| argv.get(i).map(|a| String::from_utf8_lossy(a).into_owned());
            match name.as_str() {
                "h" | "help" => {
                    for line in HELP {
                        ldb.log(*line);
                    }
                }
                "s" | "step" | "n" | "next" => {
                    ldb.step.set(true);
                    return Ok(Resume::Run);
                }
                "c" | "continue" => return Ok(Resume::Run),
                "t" | "trace" => self.trace(lua, ldb),
                "m" | "maxlen" => maxlen(ldb, arg(1).as_deref()),
                "b" | "break" => self.breakpoint(ldb, &argv[1..]),
                "e" | "eval" => eval(lua, ldb, &argv[1..]),
                "a" | "abort" => {
                    return Err(mlua::Error::runtime("script aborted for user request"))
                }
                "r" | "redis" if argv.len() > 1 => self.redis(lua, ldb, &argv[1..]),
                "p" | "print" => match arg(1) {
                    Some(var) if argv.len() == 2 => self.print(lua, ldb, &var),
                    _ => print_all(lua, ldb),
                },
                "l" | "list" => {
                    let mut around = ldb.current_line.get();
                    if let Some(n) = arg(1).map(|a| atoi(&a)).filter(|&n| n > 0) {
                        around = n;
                    }
                    let context = arg(2).map_or(5, |a| atoi(&a));
                    self.list(ldb, around, context);
                }
                "w" | "whole" => self.list(ldb, 1, 1_000_000),
                _ => ldb.log(
                    "<error> Unknown Redis Lua debugger command or wrong number of arguments.",
                ),
            }
            ldb.send(&mut *self.link);
        }
    }

    /// `break`: lists, adds (`n`), removes (`-n`) or clears (`0`).
    fn breakpoint(&mut self, ldb: &DebugState, args: &[Vec<u8>]) {
        if args.is_empty() {
            if self.breakpoints.is_empty() {
                ldb.log("No breakpoints set. Use 'b <line>' to add one.");
            } else {
                ldb.log(format!("{} breakpoints set:", self.breakpoints.len()));
                for &n in &self.breakpoints {
                    self.log_line(ldb, n);
                }
            }
            return;
        }
        for arg in args {
            let Some(n) = ringdb_types::number::parse_i64(arg) else {
                ldb.log(format!("Invalid argument:'{}'", String::from_utf8_lossy(arg)));
                continue;
            };
            if n == 0 {
                self.breakpoints.clear();
                ldb.log("All breakpoints removed.");
            } else if n > 0 {
                if self.breakpoints.len() == MAX_BREAKPOINTS {
                    ldb.log("Too many breakpoints set.");
                } else if n <= self.source.len() as i64 && !self.is_breakpoint(n) {
                    self.breakpoints.push(n);
                    self.list(ldb, n, 1);
                } else {
                    ldb.log("Wrong line number.");
                }
            } else if let Some(i) = self.breakpoints.iter().position(|&b| b == -n) {
                self.breakpoints.remove(i);
                ldb.log("Breakpoint removed.");
            } else {
                ldb.log("No breakpoint in the specified line.");
            }
        }
    }

    /// `redis <cmd>`: calls it through `redis.call` with logging on, so
    /// the command and its reply are logged.
    fn redis(&self, lua: &Lua, ldb: &DebugState, args: &[Vec<u8>]) {
        let call = self.globals.raw_get::<Table>("redis").and_then(|redis| {
            match redis.get::<Value>("call")? {
                Value::Function(f) => Ok(f),
                _ => Err(mlua::Error::runtime("no redis.call")),
            }
        });
        let Ok(call) = call else { return };
        let args: mlua::Result<MultiValue> =
            args.iter().map(|a| lua.create_string(a).map(Value::String)).collect();
        let Ok(args) = args else { return };
        ldb.step.set(true);
        let _ = call.call::<Value>(args);
        ldb.step.set(false);
    }

    /// `print <var>`: the innermost local of that name, or the globals
    /// KEYS and ARGV.
    fn print(&self, lua: &Lua, ldb: &DebugState, var: &str) {
        let found = locals(lua, None)
            .ok()
            .and_then(|all| all.into_iter().find(|(name, _)| name == var).map(|(_, v)| v));
        let value = match found {
            Some(v) => Some(v),
            None if var == "KEYS" || var == "ARGV" => self.globals.raw_get::<Value>(var).ok(),
            None => None,
        };
        match value {
            Some(v) => {
                let mut line = b"<value> ".to_vec();
                cat_value(&mut line, &v, 0);
                ldb.log_trimmed(line);
            }
            None => ldb.log("No such variable."),
        }
    }

    /// `trace`: the script's frames, innermost first.
    fn trace(&self, lua: &Lua, ldb: &DebugState) {
        match frames(lua) {
            Ok(frames) if !frames.is_empty() => {
                for (level, (name, line)) in frames.into_iter().enumerate() {
                    let place = if level == 0 { "In" } else { "From" };
                    ldb.log(format!("{place} {}:", name.as_deref().unwrap_or("top level")));
                    self.log_line(ldb, line);
                }
            }
            _ => ldb.log("<error> Can't retrieve Lua stack."),
        }
    }

    /// Ends the session: `<endsession>` and what was logged since the last
    /// stop go to the client.
    pub fn end(&mut self, ldb: &DebugState) {
        ldb.log("<endsession>");
        ldb.send(&mut *self.link);
        ldb.active.set(false);
        ldb.step.set(false);
    }
}

/// A debugging client whose session has not started yet. Redis starts the
/// session before it looks at EVAL's arguments, so a run that fails first
/// still ends the session for the client (`<endsession>`, then the error).
pub struct Pending(pub Option<Box<dyn Link>>);

impl Pending {
    /// The client, for the session that starts now.
    pub fn start(&mut self) -> Option<Box<dyn Link>> {
        self.0.take()
    }
}

impl Drop for Pending {
    fn drop(&mut self) {
        if let Some(mut link) = self.0.take() {
            link.send(b"*1\r\n+<endsession>\r\n");
        }
    }
}

/// Starts the state of a session (Redis's `ldbEnable`).
pub fn begin(run: &RunState) {
    run.ldb.begin();
}

/// The hook of a debugging run, for `Lua::set_hook`.
pub fn hook(
    session: Rc<RefCell<Session>>,
    run: Rc<RunState>,
) -> impl Fn(&Lua, &Debug) -> mlua::Result<VmState> {
    move |lua, debug| {
        // Lua calls no hook from inside a hook; a borrow taken means the
        // session is being ended.
        if let Ok(mut session) = session.try_borrow_mut() {
            session.on_hook(lua, debug, &run)?;
        }
        Ok(VmState::Continue)
    }
}

const HELP: &[&str] = &[
    "Redis Lua debugger help:",
    "[h]elp               Show this help.",
    "[s]tep               Run current line and stop again.",
    "[n]ext               Alias for step.",
    "[c]ontinue           Run till next breakpoint.",
    "[l]ist               List source code around current line.",
    "[l]ist [line]        List source code around [line].",
    "                     line = 0 means: current position.",
    "[l]ist [line] [ctx]  In this form [ctx] specifies how many lines",
    "                     to show before/after [line].",
    "[w]hole              List all source code. Alias for 'list 1 1000000'.",
    "[p]rint              Show all the local variables.",
    "[p]rint <var>        Show the value of the specified variable.",
    "                     Can also show global vars KEYS and ARGV.",
    "[b]reak              Show all breakpoints.",
    "[b]reak <line>       Add a breakpoint to the specified line.",
    "[b]reak -<line>      Remove breakpoint from the specified line.",
    "[b]reak 0            Remove all breakpoints.",
    "[t]race              Show a backtrace.",
    "[e]val <code>        Execute some Lua code (in a different callframe).",
    "[r]edis <cmd>        Execute a Redis command.",
    "[m]axlen [len]       Trim logged Redis replies and Lua var dumps to len.",
    "                     Specifying zero as <len> means unlimited.",
    "[a]bort              Stop the execution of the script. In sync",
    "                     mode dataset changes will be retained.",
    "",
    "Debugger functions you can call from Lua scripts:",
    "redis.debug()        Produce logs in the debugger console.",
    "redis.breakpoint()   Stop execution like if there was a breakpoint in the",
    "                     next line of code.",
];

/// C's `atoi`: leading blanks, a sign, digits; 0 for anything else.
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (sign, digits) = match s.as_bytes().first() {
        Some(b'-') => (-1, &s[1..]),
        Some(b'+') => (1, &s[1..]),
        _ => (1, s),
    };
    let end = digits.bytes().position(|c| !c.is_ascii_digit()).unwrap_or(digits.len());
    sign * digits[..end].parse::<i64>().unwrap_or(0).min(i32::MAX as i64)
}

/// `maxlen [len]`: shows or sets the cut (at least 60 unless 0).
fn maxlen(ldb: &DebugState, arg: Option<&str>) {
    if let Some(arg) = arg {
        let mut len = atoi(arg);
        ldb.maxlen_hint_sent.set(true);
        if len != 0 && len <= 60 {
            len = 60;
        }
        ldb.maxlen.set(len.max(0) as usize);
    }
    match ldb.maxlen.get() {
        0 => ldb.log("<value> replies are unlimited."),
        n => ldb.log(format!("<value> replies are truncated at {n} bytes.")),
    }
}

/// `eval <code>`: the code as an expression (`return …`) or else as a
/// statement, in a frame of its own; its first result is logged.
fn eval(lua: &Lua, ldb: &DebugState, args: &[Vec<u8>]) {
    let code = args.join(&b' ');
    let mut expr = b"return ".to_vec();
    expr.extend_from_slice(&code);
    let compiled = lua
        .load(&expr[..])
        .set_name("@ldb_eval")
        .into_function()
        .or_else(|_| lua.load(&code[..]).set_name("@ldb_eval").into_function());
    let result = compiled.and_then(|f| f.call::<Value>(()));
    match result {
        Ok(v) => {
            let mut line = b"<retval> ".to_vec();
            cat_value(&mut line, &v, 0);
            ldb.log_trimmed(line);
        }
        Err(e) => ldb.log(format!("<error> {}", super::syntax(&e))),
    }
}

/// `print`: every local of the current frame but Lua's temporaries.
fn print_all(lua: &Lua, ldb: &DebugState) {
    let locals = locals(lua, Some(1)).unwrap_or_default();
    let mut shown = 0;
    for (name, value) in locals {
        if name.contains("(*temporary)") {
            continue;
        }
        let mut line = format!("<value> {name} = ").into_bytes();
        cat_value(&mut line, &value, 0);
        ldb.log_trimmed(line);
        shown += 1;
    }
    if shown == 0 {
        ldb.log("No local variables in the current context.");
    }
}

/// The locals of the script's frames, innermost frame first (`only`: of
/// that frame alone), read with Lua's debug API from a protected call
/// (frame 0 is that call; the script's innermost frame is 1).
fn locals(lua: &Lua, only: Option<i32>) -> mlua::Result<Vec<(String, Value)>> {
    use mlua::ffi;
    // SAFETY: Lua debug API calls on the running state inside mlua's
    // protected call; the stack is checked before each push, and what is
    // returned is left on it as the result values.
    let values = unsafe {
        lua.exec_raw::<MultiValue>((), |state| {
            let mut level = only.unwrap_or(1);
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            while ffi::lua_getstack(state, level, &mut ar) != 0 {
                let mut i = 1;
                loop {
                    ffi::luaL_checkstack(state, 3, std::ptr::null());
                    let name = ffi::lua_getlocal(state, &ar, i);
                    if name.is_null() {
                        break;
                    }
                    // The name below its value.
                    ffi::lua_pushstring(state, name);
                    ffi::lua_insert(state, -2);
                    i += 1;
                }
                if only.is_some() {
                    break;
                }
                level += 1;
            }
        })
    }?;
    let mut out = Vec::new();
    let mut values = values.into_iter();
    while let (Some(Value::String(name)), Some(value)) = (values.next(), values.next()) {
        out.push((name.to_string_lossy(), value));
    }
    Ok(out)
}

/// The script's frames, innermost first: each function's name (if Lua
/// knows one) and its current line.
fn frames(lua: &Lua) -> mlua::Result<Vec<(Option<String>, i64)>> {
    use mlua::ffi;
    // SAFETY: as in `locals`; each frame pushes its name (or nil) and line.
    let values = unsafe {
        lua.exec_raw::<MultiValue>((), |state| {
            let mut level = 1;
            let mut ar: ffi::lua_Debug = std::mem::zeroed();
            while ffi::lua_getstack(state, level, &mut ar) != 0 {
                ffi::lua_getinfo(state, c"Snl".as_ptr(), &mut ar);
                let src = std::ffi::CStr::from_ptr(ar.short_src.as_ptr()).to_string_lossy();
                if src.contains("user_script") {
                    ffi::luaL_checkstack(state, 2, std::ptr::null());
                    if ar.name.is_null() {
                        ffi::lua_pushnil(state);
                    } else {
                        ffi::lua_pushstring(state, ar.name);
                    }
                    ffi::lua_pushinteger(state, ar.currentline as ffi::lua_Integer);
                }
                level += 1;
            }
        })
    }?;
    let mut out = Vec::new();
    let mut values = values.into_iter();
    while let (Some(name), Some(line)) = (values.next(), values.next()) {
        let name = match name {
            Value::String(s) => Some(s.to_string_lossy()),
            _ => None,
        };
        let line = match line {
            Value::Integer(i) => i,
            Value::Number(n) => n as i64,
            _ => -1,
        };
        out.push((name, line));
    }
    Ok(out)
}

/// A Lua value as the debugger shows it (Redis's `ldbCatStackValueRec`):
/// strings quoted, numbers as `%g`, tables as `{a; b}` when they are
/// arrays and `{[k]=v; …}` otherwise, the rest as `"type@address"`.
pub fn cat_value(out: &mut Vec<u8>, value: &Value, level: usize) {
    if level == MAX_DEPTH {
        out.extend_from_slice(b"<max recursion level reached! Nested table?>");
        return;
    }
    match value {
        Value::String(s) => crate::monitor::repr(out, &s.as_bytes()),
        Value::Boolean(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Integer(i) => ringdb_protocol::reply::format_g(out, *i as f64, 6),
        Value::Number(n) => ringdb_protocol::reply::format_g(out, *n, 6),
        Value::Nil => out.extend_from_slice(b"nil"),
        Value::Table(t) => {
            let (mut array, mut full) = (Vec::new(), Vec::new());
            let mut is_array = true;
            for (expected, pair) in (1i64..).zip(t.clone().pairs::<Value, Value>()) {
                let Ok((k, v)) = pair else { break };
                let index = match &k {
                    Value::Integer(i) => Some(*i as f64),
                    Value::Number(n) => Some(*n),
                    _ => None,
                };
                if is_array && index != Some(expected as f64) {
                    is_array = false;
                }
                if !array.is_empty() {
                    array.extend_from_slice(b"; ");
                    full.extend_from_slice(b"; ");
                }
                cat_value(&mut array, &v, level + 1);
                full.push(b'[');
                cat_value(&mut full, &k, level + 1);
                full.extend_from_slice(b"]=");
                cat_value(&mut full, &v, level + 1);
            }
            out.push(b'{');
            out.extend_from_slice(if is_array { &array } else { &full });
            out.push(b'}');
        }
        other => {
            let kind = match other {
                Value::Function(_) => "function",
                Value::UserData(_) => "userdata",
                Value::Thread(_) => "thread",
                Value::LightUserData(_) => "light-userdata",
                _ => "unknown",
            };
            out.extend_from_slice(format!("\"{kind}@{:p}\"", other.to_pointer()).as_bytes());
        }
    }
}

/// What the client's bytes hold.
#[derive(Debug, PartialEq)]
enum Parsed {
    Command(Vec<Vec<u8>>),
    Incomplete,
    Error,
}

/// One debugger command: a multibulk of 1 to 1024 arguments of 1 to 1024
/// bytes each (Redis's `ldbReplParseCommand`, as forgiving: whatever comes
/// before the first `*` is skipped).
fn parse_command(input: &[u8]) -> Parsed {
    if input.is_empty() {
        return Parsed::Incomplete;
    }
    let Some(star) = input.iter().position(|&c| c == b'*') else { return Parsed::Error };
    let mut p = star + 1;
    let line = |from: usize| memchr::memmem::find(&input[from..], b"\r\n").map(|i| from + i);
    let Some(end) = line(p) else { return Parsed::Incomplete };
    let count = atoi(&String::from_utf8_lossy(&input[p..end]));
    if !(1..=1024).contains(&count) {
        return Parsed::Error;
    }
    p = end + 2;
    let mut argv = Vec::with_capacity(count as usize);
    while argv.len() < count as usize {
        match input.get(p) {
            None => return Parsed::Incomplete,
            Some(b'$') => {}
            Some(_) => return Parsed::Error,
        }
        let Some(end) = line(p + 1) else { return Parsed::Incomplete };
        let len = atoi(&String::from_utf8_lossy(&input[p + 1..end]));
        if !(1..=1024).contains(&len) {
            return Parsed::Error;
        }
        let start = end + 2;
        let stop = start + len as usize;
        if stop + 2 > input.len() {
            return Parsed::Incomplete;
        }
        if &input[stop..stop + 2] != b"\r\n" {
            return Parsed::Error;
        }
        argv.push(input[start..stop].to_vec());
        p = stop + 2;
    }
    Parsed::Command(argv)
}

/// Appends a RESP reply in the debugger's human form (Redis's
/// `ldbRedisProtocolToHuman`); returns what follows it.
fn human<'a>(out: &mut Vec<u8>, reply: &'a [u8]) -> &'a [u8] {
    let Some(&kind) = reply.first() else { return reply };
    let Some(end) = memchr::memmem::find(reply, b"\r\n") else {
        out.extend_from_slice(reply);
        return &[];
    };
    let header = &reply[1..end];
    let mut rest = &reply[end + 2..];
    let count = || ringdb_types::number::parse_i64(header).unwrap_or(0);
    let items = |out: &mut Vec<u8>, rest: &mut &'a [u8], n: i64, sep: &[u8]| {
        for j in 0..n.max(0) {
            *rest = human(out, rest);
            if j != n - 1 {
                out.extend_from_slice(sep);
            }
        }
    };
    match kind {
        b':' => out.extend_from_slice(header),
        b'$' => match count() {
            -1 => out.extend_from_slice(b"NULL"),
            n => {
                let n = (n.max(0) as usize).min(rest.len());
                crate::monitor::repr(out, &rest[..n]);
                rest = rest.get(n + 2..).unwrap_or_default();
            }
        },
        b'+' | b'-' => crate::monitor::repr(out, &reply[..end]),
        b'*' if count() == -1 => out.extend_from_slice(b"NULL"),
        b'*' => {
            out.push(b'[');
            items(out, &mut rest, count(), b",");
            out.push(b']');
        }
        b'~' => {
            out.extend_from_slice(b"~(");
            items(out, &mut rest, count(), b",");
            out.push(b')');
        }
        b'%' => {
            out.push(b'{');
            let n = count();
            for j in 0..n.max(0) {
                rest = human(out, rest);
                out.extend_from_slice(b" => ");
                rest = human(out, rest);
                if j != n - 1 {
                    out.push(b',');
                }
            }
            out.push(b'}');
        }
        b'_' => out.extend_from_slice(b"(null)"),
        b'#' => out.extend_from_slice(if header == b"t" { b"#true" } else { b"#false" }),
        b',' => {
            out.extend_from_slice(b"(double) ");
            out.extend_from_slice(header);
        }
        _ => out.extend_from_slice(&reply[..end]),
    }
    rest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_parse_as_redis_parses_them() {
        let cmd =
            |parts: &[&str]| Parsed::Command(parts.iter().map(|p| p.as_bytes().to_vec()).collect());
        assert_eq!(parse_command(b""), Parsed::Incomplete);
        assert_eq!(parse_command(b"*1\r\n$4\r\nstep\r\n"), cmd(&["step"]));
        assert_eq!(parse_command(b"junk*2\r\n$1\r\nb\r\n$2\r\n12\r\n"), cmd(&["b", "12"]));
        assert_eq!(parse_command(b"*1\r\n$4\r\nst"), Parsed::Incomplete);
        assert_eq!(parse_command(b"*2\r\n$1\r\nb\r\n"), Parsed::Incomplete);
        assert_eq!(parse_command(b"step\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*0\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1\r\n$0\r\n\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1\r\n$2000\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1\r\n:1\r\n"), Parsed::Error);
        assert_eq!(parse_command(b"*1\r\n$2\r\nabcd\r\n"), Parsed::Error);
        assert_eq!(
            parse_command(b"*1\r\n$11\r\nhello\0world\r\n"),
            Parsed::Command(vec![b"hello\0world".to_vec()])
        );
    }

    #[test]
    fn replies_read_as_redis_shows_them() {
        let show = |reply: &[u8]| {
            let mut out = Vec::new();
            let rest = human(&mut out, reply);
            assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(rest));
            String::from_utf8(out).unwrap()
        };
        assert_eq!(show(b":42\r\n"), "42");
        assert_eq!(show(b"$5\r\nhe\"lo\r\n"), "\"he\\\"lo\"");
        assert_eq!(show(b"$-1\r\n"), "NULL");
        assert_eq!(show(b"+OK\r\n"), "\"+OK\"");
        assert_eq!(show(b"-ERR no\r\n"), "\"-ERR no\"");
        assert_eq!(show(b"*2\r\n:1\r\n$1\r\na\r\n"), "[1,\"a\"]");
        assert_eq!(show(b"*-1\r\n"), "NULL");
        assert_eq!(show(b"~1\r\n:1\r\n"), "~(1)");
        assert_eq!(show(b"%1\r\n+a\r\n:1\r\n"), "{\"+a\" => 1}");
        assert_eq!(show(b"_\r\n"), "(null)");
        assert_eq!(show(b"#t\r\n"), "#true");
        assert_eq!(show(b",1.5\r\n"), "(double) 1.5");
    }

    #[test]
    fn values_show_as_redis_shows_them() {
        let lua = Lua::new();
        let show = |code: &str| {
            let v: Value = lua.load(code).eval().unwrap();
            let mut out = Vec::new();
            cat_value(&mut out, &v, 0);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(show("'a\\nb'"), "\"a\\nb\"");
        assert_eq!(show("1.5"), "1.5");
        assert_eq!(show("10"), "10");
        assert_eq!(show("1e20"), "1e+20");
        assert_eq!(show("nil"), "nil");
        assert_eq!(show("true"), "true");
        assert_eq!(show("{1, 'two', {3}}"), "{1; \"two\"; {3}}");
        assert_eq!(show("{x = 1}"), "{[\"x\"]=1}");
        assert!(show("print").starts_with("\"function@0x"));
        let nested = show("local t = {} t[1] = t return t");
        assert!(nested.ends_with("<max recursion level reached! Nested table?>}}}}}}}}}}"));
    }

    #[test]
    fn maxlen_trims_with_one_hint() {
        let ldb = DebugState::default();
        ldb.begin();
        maxlen(&ldb, Some("10"));
        ldb.log_reply(format!("${}\r\n{}\r\n", 100, "x".repeat(100)).as_bytes());
        ldb.log_reply(format!("${}\r\n{}\r\n", 100, "x".repeat(100)).as_bytes());
        let logs = ldb.logs.borrow();
        assert_eq!(&logs[0][..], b"<value> replies are truncated at 60 bytes.");
        assert_eq!(logs[1].len(), 64);
        assert!(logs[1].ends_with(b" ..."));
        // `maxlen` told the user already: no hint.
        assert_eq!(logs.len(), 3);
    }
}
