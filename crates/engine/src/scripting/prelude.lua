-- ringdb's script sandbox, run once when a shard creates its Lua state.
-- It receives R (ringdb's helpers written in Rust), G (the state's original
-- globals) and returns the pieces the engine keeps: the scripts' globals
-- (env), their metatable, the real globals behind them, the globals seen
-- while FUNCTION LOAD runs, the real `redis` table (call/pcall are set per run),
-- the error handler, and the runners.
--
-- Redis 7 marks tables read-only inside its patched Lua; stock Lua 5.1 has no
-- such flag, so every table a script can reach (the globals, the libraries,
-- `redis`) is shown through a proxy: an empty table whose metatable reads
-- from the real one and refuses writes with Redis's error. The builtins that
-- bypass metatables (rawset, setmetatable, table.insert, ...) are wrapped to
-- refuse proxies; next/pairs/rawget see through them.
local R, G = ...
local type, error, tostring, rawget, rawset, setmetatable, getmetatable, next, pcall,
      xpcall, select, getfenv, setfenv, loadstring, unpack, ipairs =
      type, error, tostring, rawget, rawset, setmetatable, getmetatable, next, pcall,
      xpcall, select, getfenv, setfenv, loadstring, unpack, ipairs
local string_sub, string_byte, table_concat = string.sub, string.byte, table.concat
local dbg = debug
local killed, errtext, error_table = R.killed, R.errtext, R.error_table

local READONLY = 'Attempt to modify a readonly table'
local real_of = setmetatable({}, {__mode = 'k'})
local function refuse() error(READONLY, 2) end
local function seen(t) return real_of[t] or t end

-- The empty, read-only table every protected table shows as its metatable.
local sealed = {}
real_of[sealed] = {}
setmetatable(sealed, {__index = real_of[sealed], __newindex = refuse, __metatable = sealed})

local function protect(real)
  local proxy = {}
  real_of[proxy] = real
  setmetatable(proxy, {__index = real, __newindex = refuse, __metatable = sealed})
  return proxy
end

local function nonexistent(_, k)
  error("Script attempted to access nonexistent global variable '" .. tostring(k) .. "'", 0)
end
local function with_error_meta(t) return setmetatable(t, {__index = nonexistent}) end

-- The real globals and the read-only view scripts get.
local real = with_error_meta({})
local env = {}
real_of[env] = real
local env_meta = {__index = real, __newindex = refuse, __metatable = sealed}
setmetatable(env, env_meta)

for _, name in ipairs({'assert', 'collectgarbage', 'error', 'gcinfo', 'getmetatable',
                        'newproxy', 'rawequal', 'select', 'tonumber', 'tostring', 'type',
                        'unpack', '_VERSION'}) do
  real[name] = G[name]
end
real._G = env
real.next = function(t, k) return next(seen(t), k) end
local wnext = real.next
real.pairs = function(t) return wnext, t, nil end
real.ipairs = function(t) return ipairs(seen(t)) end
real.rawget = function(t, k) return rawget(seen(t), k) end
real.rawset = function(t, k, v)
  if real_of[t] then error(READONLY, 2) end
  return rawset(t, k, v)
end
real.setmetatable = function(t, mt)
  if real_of[t] then error(READONLY, 2) end
  return setmetatable(t, mt)
end
real.getfenv = function(f)
  if f == nil then f = 2 elseif type(f) == 'number' and f > 0 then f = f + 1 end
  local e = getfenv(f)
  if e == G then return env end
  return e
end
real.setfenv = function(f, t)
  if f == 0 or real_of[t] == G then error(READONLY, 2) end
  if type(f) == 'number' and f > 0 then f = f + 1 end
  local r = setfenv(f, t)
  return r
end
local function safe_loadstring(s, name)
  -- Binary chunks are refused, as Redis 7 does.
  if type(s) == 'string' and string_byte(s, 1) == 27 then return nil, 'binary chunks are not allowed' end
  local f, e = loadstring(s, name)
  if f then setfenv(f, env) end
  return f, e
end
real.loadstring = safe_loadstring
real.load = function(fn, name)
  if type(fn) == 'string' then return safe_loadstring(fn, name) end
  local parts = {}
  while true do
    local p = fn()
    if p == nil or p == '' then break end
    parts[#parts + 1] = p
  end
  return safe_loadstring(table_concat(parts), name)
end

-- pcall as Redis 7's: an error table becomes its message; a kill cannot be
-- caught.
local function pcall_result(ok, ...)
  if ok then return ok, ... end
  local e = ...
  if killed() then error(e, 0) end
  if type(e) == 'table' then
    local m = rawget(e, 'err')
    if type(m) == 'string' or type(m) == 'number' then e = m end
  elseif type(e) == 'userdata' then
    e = errtext(e)
  end
  return false, e
end
real.pcall = function(...) return pcall_result(pcall(...)) end
local function xpcall_result(ok, ...)
  if not ok and killed() then error((...), 0) end
  return ok, ...
end
real.xpcall = function(f, h) return xpcall_result(xpcall(f, h)) end

-- Libraries, read-only. table's in-place functions refuse proxies.
local function guarded(f)
  return function(t, ...)
    if real_of[t] then error(READONLY, 2) end
    return f(t, ...)
  end
end
local tablelib = {}
for k, v in next, G.table do tablelib[k] = v end
for _, name in ipairs({'insert', 'remove', 'sort', 'setn'}) do
  if tablelib[name] then tablelib[name] = guarded(tablelib[name]) end
end
local mathlib = {}
for k, v in next, G.math do mathlib[k] = v end
mathlib.random = R.random
mathlib.randomseed = R.randomseed
local coroutinelib = {}
for k, v in next, G.coroutine do coroutinelib[k] = v end
real.string = protect(G.string)
real.table = protect(tablelib)
real.math = protect(mathlib)
real.coroutine = protect(coroutinelib)
real.bit = protect(G.bit)
real.struct = protect(G.struct)
real.cjson = protect(G.cjson)
real.cmsgpack = protect(G.cmsgpack)
-- "abc":upper() reads the string table through the string metatable: hide it.
local string_meta = getmetatable('')
if string_meta then rawset(string_meta, '__metatable', sealed) end

-- The redis API. redis.call and redis.pcall are set by the engine (they
-- reach the keyspace of the run in progress; outside a run they refuse).
local redis = {}
redis.error_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return error_table('wrong number or type of arguments')
  end
  if string_sub(s, 1, 1) ~= '-' then s = '-' .. s end
  return error_table(s)
end
redis.status_reply = function(...)
  local s = ...
  if select('#', ...) ~= 1 or type(s) ~= 'string' then
    return error_table('wrong number or type of arguments')
  end
  return {ok = s}
end
redis.sha1hex = R.sha1hex
redis.log = R.log
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REDIS_VERSION = R.version
redis.REDIS_VERSION_NUM = R.version_num
redis.setresp = R.setresp
redis.set_repl = R.set_repl
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.replicate_commands = function() return true end
redis.breakpoint = R.breakpoint
redis.debug = R.debug
redis.acl_check_cmd = R.acl_check_cmd
real.redis = protect(redis)

-- What FUNCTION LOAD's code sees: only redis.register_function, log and
-- the versions.
local load_redis = with_error_meta({
  register_function = R.register_function,
  log = R.log,
  LOG_DEBUG = 0, LOG_VERBOSE = 1, LOG_NOTICE = 2, LOG_WARNING = 3,
  REDIS_VERSION = R.version,
  REDIS_VERSION_NUM = R.version_num,
})
local load_api = with_error_meta({redis = protect(load_redis)})

-- Redis's error handler: the error as a table, with where it happened in
-- the user's code.
local function err_handler(err)
  local level = 2
  local i = dbg.getinfo(level, 'nSl')
  while i and (i.what == 'C' or i.what == 'tail' or i.source == '=ringdb') do
    level = level + 1
    i = dbg.getinfo(level, 'nSl')
  end
  if killed() then
    err = {err = 'ERR Script killed by user with SCRIPT KILL...'}
  elseif type(err) == 'userdata' then
    -- Raised from Rust (redis.call raises its error table itself).
    err = {err = 'ERR ' .. errtext(err)}
  elseif type(err) ~= 'table' or real_of[err] then
    err = {err = 'ERR ' .. tostring(err)}
  end
  if i then
    err.source = i.source
    err.line = i.currentline
  end
  return err
end

local function run_eval(f) return xpcall(f, err_handler) end
local function run_function(f, keys, args)
  return xpcall(function() return f(keys, args) end, err_handler)
end
local function run_load(f) return xpcall(f, err_handler) end

return env, env_meta, real, load_api, redis, run_eval, run_function, run_load
