"""Lua 5.1 for EVAL/EVALSHA (lupa's ``lua51`` module), sandboxed the way Redis 7.0 is.

One :class:`LuaEngine` per server. What a script sees (redis-types.md §3):

- the base library on Redis's allow-list plus ``string``, ``table``, ``math`` and the
  ``redis`` table; no ``os``, ``io``, ``package``/``require``, ``dofile``, ``loadfile``,
  ``debug`` or lupa's ``python``;
- read-only globals and library tables: assigning to either raises "Attempt to modify
  a readonly table", reading an unknown global raises "Script attempted to access
  nonexistent global variable"; ``KEYS`` and ``ARGV`` are set per call;
- ``redis.call``/``redis.pcall`` (run a command in-process, reply converted to Lua by
  Redis's rules), ``error_reply``, ``status_reply``, ``sha1hex``, ``log``, ``setresp``,
  ``set_repl``, ``replicate_commands``, ``breakpoint``, ``debug``, ``acl_check_cmd``,
  ``REDIS_VERSION``/``REDIS_VERSION_NUM``, the ``LOG_*`` and ``REPL_*`` constants.

Errors come back as Redis formats them: a raised error gets
`` script: <sha>, on @user_script:<line>.`` appended (the line found by an xpcall handler,
as Redis's ``__redis__err__handler`` does); a returned ``{err=...}`` does not.
A count hook (every ``HOOK_INSTRUCTIONS``) lets SCRIPT KILL stop a script that has not
written.
"""

from __future__ import annotations

import hashlib
import logging
import time
from typing import TYPE_CHECKING, Any

import lupa.lua51 as lua51

from tuffdb.server.resp import lualibs, reply
from tuffdb.server.resp.commands.collection import format_double
from tuffdb.server.resp.lualibs import LibError

if TYPE_CHECKING:
    from collections.abc import Callable

    from tuffdb.server.resp.reply import Resp2

log = logging.getLogger("tuffdb.resp.lua")

HOOK_INSTRUCTIONS = 100_000
KILLED = "ERR Script killed by user with SCRIPT KILL..."

# The sandbox, built once per runtime. The Python callables come in as arguments.
BOOTSTRAP = r"""
local py_call, py_pcall, py_errtext, py_sha1hex, py_log, py_setresp, py_interrupt, py_acl, version, version_num, libs, py_load_expired = ...
local dbg = debug
local G = _G
local rawset, rawget, setmetatable, error, type, tostring = rawset, rawget, setmetatable, error, type, tostring
local setfenv, loadstring = setfenv, loadstring
local getinfo, sethook = dbg.getinfo, dbg.sethook

-- (getfenv and setfenv too, as Redis 7.0.15 observed: getfenv(0) handed a script the real
-- globals, where what it set stayed for every later script; setfenv could swap this
-- bootstrap's own environment)
for _, name in ipairs({"os", "io", "package", "require", "dofile", "loadfile", "python",
                       "print", "module", "debug", "newproxy", "getfenv", "setfenv"}) do
  rawset(G, name, nil)
end

-- Every table a script must not change, whatever it calls: the globals, the library
-- tables, their read-only views, the string metatable. Redis 7.0's Lua refuses writes to
-- them in the VM itself (rawset and table.insert included); stock Lua has no such flag,
-- so the raw writers scripts can reach check this set (raw_guard below).
local protected = setmetatable({}, {__mode = "k"})

local function readonly(t, name)
  local view = setmetatable({}, {
    __index = t,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = {},
  })
  protected[t], protected[view] = true, true
  return view
end

local function raw_guard(t)
  if protected[t] then error("Attempt to modify a readonly table", 0) end
end

-- The first argument of a raw writer: a table (else the error the C function gives, at the
-- script's line), and not a protected one if the call would write (``least``: the length
-- below which it does not: table.remove of an empty table, a sort of one element).
local function writable(name, n, t, least)
  if type(t) ~= "table" then
    error("bad argument #1 to '" .. name .. "' (table expected, got " ..
          (n == 0 and "no value" or type(t)) .. ")", 3)
  end
  if not least or #t >= least then raw_guard(t) end
end

do  -- the raw writers a script can reach
  local tbl = rawget(G, "table")
  local insert, remove, sort, raw, setmt = tbl.insert, tbl.remove, tbl.sort, rawset, setmetatable
  tbl.insert = function(...) writable("insert", select("#", ...), (...)) insert(...) end
  tbl.remove = function(...)
    writable("remove", select("#", ...), (...), 1)
    local v = remove(...)
    return v
  end
  tbl.sort = function(...) writable("sort", select("#", ...), (...), 2) sort(...) end
  rawset(G, "rawset", function(...)
    writable("rawset", select("#", ...), (...))
    return (raw(...))
  end)
  rawset(G, "setmetatable", function(...)
    writable("setmetatable", select("#", ...), (...))
    return (setmt(...))
  end)
end

local redis = {}
-- Python callables, so C functions for Lua: a script's "return redis.call(...)" is then not a
-- tail call that would drop the script's frame (its line goes into the error suffix).
-- redis.call raises a Python exception (a userdata to Lua; tostring gives its text).
redis.call = py_call
redis.pcall = py_pcall
redis.error_reply = function(msg)
  if type(msg) ~= "string" then error("wrong number or type of arguments", 2) end
  if msg:sub(1, 1) == "-" then msg = msg:sub(2) end
  local space = msg:find(" ", 1, true)
  if not space then return {err = "ERR " .. msg} end
  return {err = msg}
end
redis.status_reply = function(msg)
  if type(msg) ~= "string" then error("wrong number or type of arguments", 2) end
  return {ok = msg}
end
redis.sha1hex = function(s)
  if type(s) ~= "string" and type(s) ~= "number" then
    error("wrong number of arguments", 2)
  end
  return py_sha1hex(tostring(s))
end
redis.log = function(level, ...)
  local n = select("#", ...)
  if n == 0 then error("redis.log() requires two arguments or more.", 2) end
  if type(level) ~= "number" or level < 0 or level > 3 then
    error("Invalid debug level.", 2)
  end
  local parts = {}
  for i = 1, n do parts[i] = tostring((select(i, ...))) end
  py_log(level, table.concat(parts, " "))
end
redis.setresp = function(v)
  if v ~= 2 and v ~= 3 then error("RESP version must be 2 or 3.", 2) end
  py_setresp(v)
end
redis.set_repl = function(v)
  if type(v) ~= "number" or v < 0 or v > 3 then error("Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.", 2) end
end
redis.replicate_commands = function() return true end
redis.breakpoint = function() return false end
redis.debug = function() end
redis.acl_check_cmd = function(...) return py_acl(...) end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL = 0, 1, 2, 2, 3
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = version, version_num

rawset(G, "redis", readonly(redis))
for _, lib in ipairs({"string", "table", "math", "coroutine"}) do
  rawset(G, lib, readonly(rawget(G, lib)))
end
for name, lib in pairs(libs) do  -- cjson, cmsgpack, struct, bit (lualibs/)
  rawset(G, name, readonly(lib))
end

local env = setmetatable({}, {
  __index = function(_, name)
    local v = rawget(G, name)
    if v == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    return v
  end,
  __newindex = function() error("Attempt to modify a readonly table", 2) end,
  __metatable = {},
})
rawset(G, "_G", env)
protected[G], protected[env] = true, true

-- The string metatable is every string's: its __index was the string library itself, so
-- getmetatable("").__index.upper = f changed string.upper for every later script, and
-- getmetatable("").__index = t every string method. Its __index is now the read-only
-- string table, and getmetatable("") gives a read-only view of it.
do
  local string_mt = dbg.getmetatable("")
  string_mt.__index = rawget(G, "string")
  string_mt.__metatable = readonly(string_mt)
end

-- A chunk a script loads runs with the script's globals (read-only), never the real ones
-- (loadstring("x = 1")() set x for every later script), and a precompiled (binary) chunk
-- is refused: Lua 5.1 does not verify bytecode, so a crafted one escapes the sandbox
-- (CVE-2015-4335). Redis parses one as source; the message is the parser's.
local function chunk_id(name)
  local first = name:sub(1, 1)
  if first == "=" or first == "@" then return name:sub(2, 60) end
  local line = name:match("^[^\n%z]*")
  if #line > 45 then return '[string "' .. line:sub(1, 45) .. '..."]' end
  if #line < #name and name:sub(#line + 1, #line + 1) == "\n" then
    return '[string "' .. line .. '..."]'
  end
  return '[string "' .. line .. '"]'
end

local function load_chunk(source, name)
  if type(source) == "string" and source:byte(1) == 27 then
    return nil, chunk_id(name or source) .. ":1: unexpected symbol near 'char(27)'"
  end
  local fn, err = loadstring(source, name)
  if fn then setfenv(fn, env) end
  return fn, err
end

rawset(G, "loadstring", function(source, name)
  if type(source) ~= "string" and type(source) ~= "number" then
    error("bad argument #1 to 'loadstring' (string expected, got " ..
          (source == nil and "no value" or type(source)) .. ")", 2)
  end
  return load_chunk(tostring(source), name)
end)
rawset(G, "load", function(reader, name)
  if type(reader) ~= "function" then
    error("bad argument #1 to 'load' (function expected, got " ..
          (reader == nil and "no value" or type(reader)) .. ")", 2)
  end
  local parts = {}
  while true do
    local piece = reader()
    if piece == nil or piece == "" then break end
    if type(piece) ~= "string" then return nil, "reader function must return a string" end
    parts[#parts + 1] = piece
  end
  return load_chunk(table.concat(parts), name or "=(load)")
end)

-- Where an error is reported: as Redis's handler, the innermost Lua function that raised
-- it (a script's, a library's, or a chunk it loaded), past the C functions, tail calls and
-- this sandbox's own code (every chunk lupa runs, the bundled libraries' too, is
-- "<python>").
local own_source = getinfo(1, "S").source

local function handler(err)
  local source, line
  for level = 2, 20 do
    local info = getinfo(level, "Sl")
    if not info then break end
    if info.what ~= "C" and info.what ~= "tail" and info.source ~= own_source then
      source, line = info.source, info.currentline
      break
    end
  end
  if type(err) == "userdata" then
    local text, located = py_errtext(err)
    if located and line then  -- a library's error: luaL_error puts the script's line first
      text = "ERR " .. source:gsub("^@", "") .. ":" .. line .. ": " .. text
    elseif located then
      text = "ERR " .. text
    end
    err = {err = text}
  elseif type(err) ~= "table" then
    err = {err = "ERR " .. tostring(err)}
  end
  return {err = err.err, source = source, line = line}
end

local function hook()
  local info = getinfo(2, "S")
  local src = info and info.source
  -- any code but this sandbox's own: the script's, a library's, a chunk either loaded (a
  -- loop in loadstring(...)() once ran on after SCRIPT KILL, the server busy for good)
  if src ~= own_source and py_interrupt() then
    sethook(hook, "l")  -- keep failing on every line, even inside a pcall
    error("Script killed by user with SCRIPT KILL...", 0)
  end
end

local compile = function(body)
  local fn, err = load_chunk(body, "@user_script")
  if not fn then return nil, err end
  setfenv(fn, env)
  return fn, nil
end

local run = function(fn, keys, argv)
  rawset(G, "KEYS", keys)
  rawset(G, "ARGV", argv)
  sethook(hook, "", HOOK_COUNT)
  local ok, result = xpcall(fn, handler)
  sethook()
  return ok, result
end

-- Redis 7.0 functions (FUNCTION LOAD, FCALL; functions.py keeps the libraries). A
-- library's code runs once in an environment of its own, whose `redis` offers only
-- register_function and the logging/version fields while it loads, and the whole
-- `redis` table afterwards (the callbacks keep that environment). KEYS and ARGV are not
-- globals there: a function gets them as its arguments.
local FLAGS = {["no-writes"] = true, ["allow-oom"] = true, ["allow-stale"] = true,
               ["no-cluster"] = true, ["allow-cross-slot-keys"] = true}
local function refuse(msg) error({err = "ERR " .. msg}, 0) end

local function registrar(registered)
  return function(...)
    local n = select("#", ...)
    local name, callback, flags, description
    if n == 1 then
      local args = ...
      if type(args) ~= "table" then
        refuse("calling redis.register_function with a single argument is only applicable to Lua table (representing named arguments).")
      end
      for k, v in pairs(args) do
        if k == "function_name" then
          if type(v) ~= "string" then refuse("function_name argument given to redis.register_function must be a string") end
          name = v
        elseif k == "description" then
          if type(v) ~= "string" then refuse("description argument given to redis.register_function must be a string") end
          description = v
        elseif k == "callback" then
          if type(v) ~= "function" then refuse("callback argument given to redis.register_function must be a function") end
          callback = v
        elseif k == "flags" then
          if type(v) ~= "table" then refuse("flags argument to redis.register_function must be a table representing function flags") end
          flags = v
        else
          refuse("unknown argument given to redis.register_function")
        end
      end
      if not name then refuse("redis.register_function must get a function name argument") end
      if not callback then refuse("redis.register_function must get a callback argument") end
    elseif n == 2 then
      name, callback = ...
      if type(name) ~= "string" then refuse("first argument to redis.register_function must be a string") end
      if type(callback) ~= "function" then refuse("second argument to redis.register_function must be a function") end
    else
      refuse("wrong number of arguments to redis.register_function")
    end
    local flag_list = {}
    for _, f in pairs(flags or {}) do
      if type(f) ~= "string" or not FLAGS[f] then refuse("unknown flag given") end
      flag_list[#flag_list + 1] = f
    end
    if not name:match("^[%w_]+$") then
      -- (sic: Redis 7.0 gives the library's message for a bad function name)
      refuse("Library names can only contain letters, numbers, or underscores(_) and must be at least one character long")
    end
    for _, r in ipairs(registered) do
      if r[1] == name then refuse("Function already exists in the library") end
    end
    registered[#registered + 1] = {name, callback, flag_list, description}
  end
end

local function nonexistent(name)
  error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 3)
end

local function load_hook()
  local info = getinfo(2, "S")
  if info and info.source ~= own_source and py_load_expired() then
    sethook(load_hook, "l")  -- keep failing on every line of the library, even in a pcall
    error({err = "ERR FUNCTION LOAD timeout"}, 0)
  end
end

local load_library = function(body)
  local fn, err = load_chunk(body, "@user_function")
  if not fn then return false, "compile", err end
  local registered = {}
  local loading = true
  local api = {register_function = registrar(registered), log = redis.log,
               setresp = redis.setresp, REDIS_VERSION = version,
               REDIS_VERSION_NUM = version_num, LOG_DEBUG = 0, LOG_VERBOSE = 1,
               LOG_NOTICE = 2, LOG_WARNING = 3}
  local loading_redis = setmetatable({}, {
    __index = function(_, name)
      local v = api[name]
      if v == nil then nonexistent(name) end
      return v
    end,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = {},
  })
  local full_redis = rawget(G, "redis")
  local lib_env = setmetatable({}, {
    __index = function(_, name)
      if name == "redis" then return loading and loading_redis or full_redis end
      local v = (name ~= "KEYS" and name ~= "ARGV") and rawget(G, name) or nil
      if v == nil then nonexistent(name) end
      return v
    end,
    __newindex = function() error("Attempt to modify a readonly table", 2) end,
    __metatable = {},
  })
  setfenv(fn, lib_env)
  sethook(load_hook, "", HOOK_COUNT)
  local ok, result = xpcall(fn, handler)
  sethook()
  loading = false
  if not ok then return false, "run", result end
  return true, registered
end

local run_function = function(fn, keys, argv)
  sethook(hook, "", HOOK_COUNT)
  local ok, result = xpcall(function() return fn(keys, argv) end, handler)
  sethook()
  return ok, result
end

return compile, run, load_library, run_function
"""


class CallError(Exception):  # noqa: N818  (what Redis calls it)
    """A command run by ``redis.call`` failed; ``str()`` is the error line."""


class Status(bytes):
    """A status reply seen by redis.call (converted to ``{ok=...}``)."""


class ErrorReply(bytes):
    """An error reply seen by redis.call."""


class Double(float):
    """A RESP3 double seen by redis.call (converted to ``{double=...}``)."""


class BigNumber(bytes):
    pass


class Verbatim(bytes):
    pass


class RespMap(list):  # type: ignore[type-arg]
    """A RESP3 map: a list of (key, value) pairs."""


class RespSet(list):  # type: ignore[type-arg]
    pass


def parse_reply(raw: bytes) -> Any:
    value, _ = _parse(raw, 0)
    return value


def _parse(raw: bytes, pos: int) -> tuple[Any, int]:  # noqa: C901, PLR0911
    end = raw.index(b"\r\n", pos)
    kind, head = raw[pos], raw[pos + 1 : end]
    nxt = end + 2
    if kind == 0x24:  # $
        if head == b"-1":
            return None, nxt
        n = int(head)
        return raw[nxt : nxt + n], nxt + n + 2
    if kind == 0x3A:  # :
        return int(head), nxt
    if kind in (0x2A, 0x7E, 0x3E):  # * ~ >
        if head == b"-1":
            return None, nxt
        items = []
        for _ in range(int(head)):
            item, nxt = _parse(raw, nxt)
            items.append(item)
        return (RespSet(items) if kind == 0x7E else items), nxt
    if kind == 0x2B:  # +
        return Status(head), nxt
    if kind == 0x2D:  # -
        return ErrorReply(head), nxt
    if kind == 0x5F:  # _
        return None, nxt
    if kind == 0x2C:  # ,
        return Double(float(head)), nxt
    if kind == 0x23:  # #
        return head == b"t", nxt
    if kind == 0x25:  # %
        pairs = RespMap()
        for _ in range(int(head)):
            k, nxt = _parse(raw, nxt)
            v, nxt = _parse(raw, nxt)
            pairs.append((k, v))
        return pairs, nxt
    if kind == 0x28:  # (
        return BigNumber(head), nxt
    if kind == 0x3D:  # =
        n = int(head)
        return Verbatim(raw[nxt : nxt + n]), nxt + n + 2
    raise ValueError(f"unknown reply type {raw[pos:pos + 1]!r}")


def sha1hex(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()  # noqa: S324  (Redis names scripts by SHA1)


class LuaEngine:
    """The Lua state, the script cache and the conversions both ways."""

    def __init__(self, call: Callable[[bool, tuple[Any, ...]], Any],
                 interrupt: Callable[[], bool], acl_check: Callable[..., bool],
                 version: str) -> None:
        self.lua = lua51.LuaRuntime(encoding=None, unpack_returned_tuples=True,
                                    register_eval=False, register_builtins=False)
        self.resp3 = False  # redis.setresp(3) in the running script
        self.scripts: dict[str, Any] = {}  # sha -> compiled function
        major, minor, patch = (int(x) for x in version.split("."))
        boot = self.lua.execute(BOOTSTRAP.replace("HOOK_COUNT", str(HOOK_INSTRUCTIONS)),
                                lambda *args: call(False, args),
                                lambda *args: call(True, args),
                                _errtext,
                                lambda s: sha1hex(s).encode(),
                                self._log, self._setresp, interrupt, acl_check,
                                version.encode(), (major << 16) | (minor << 8) | patch,
                                self.lua.table_from(lualibs.install(
                                    self.lua, self.lua.globals().tonumber)),
                                self._load_expired)
        self._compile, self._run, self._load_library, self._run_function = boot
        # lupa hands a Lua -0.0 to Python as the integer 0: whether a table's field is -0,
        # asked where the sign still is (a script's {double = -0.0}, a ZINCRBY's -0 reply)
        self._negative_zero = self.lua.execute(
            "return function(t, k) local x = t[k]; return x == 0 and 1 / x < 0 end")
        self._load_deadline = 0.0
        self.LuaError = lua51.LuaError

    def _log(self, level: int, message: bytes) -> None:
        log.log([logging.DEBUG, logging.DEBUG, logging.INFO, logging.WARNING][int(level)],
                "script: %s", message.decode("utf-8", "replace"))

    def _setresp(self, version: int) -> None:
        self.resp3 = int(version) == 3  # noqa: PLR2004

    # -- the cache --------------------------------------------------------------------------
    def load(self, body: bytes) -> str:
        """Compile ``body`` (cached under its SHA1); raises ValueError with Redis's text."""
        sha = sha1hex(body)
        if sha not in self.scripts:
            fn, err = self._compile(strip_shebang(body))
            if fn is None:
                raise ValueError(
                    f"ERR Error compiling script (new function): {_text(err)}")
            self.scripts[sha] = fn
        return sha

    def flush(self) -> None:
        self.scripts.clear()

    # -- functions (FUNCTION LOAD) -------------------------------------------------------------
    def load_library(self, body: bytes, timeout_s: float) -> list[tuple[str, Any, frozenset[str],
                                                                       bytes | None]]:
        """Run a library's code (its ``#!lua`` line blanked) once; its registered functions
        as (name, Lua function, flags, description).

        :raises ValueError: with Redis's text (compile error, runtime error, timeout).
        """
        self._load_deadline = time.monotonic() + timeout_s
        ok, *out = self._load_library(strip_shebang(body))
        if ok:
            registered = out[0]
            return [(_text(r[1]), r[2], frozenset(_text(f) for f in r[3].values()), r[4])
                    for r in (registered[i] for i in range(1, len(registered) + 1))]
        stage, err = out
        if stage == b"compile":
            raise ValueError(f"ERR Error compiling function: {_text(err)}")
        text = _text(err[b"err"]) if lua51.lua_type(err) == "table" else _text(err)
        raise ValueError(f"ERR Error registering functions: {text}")

    def _load_expired(self) -> bool:
        return time.monotonic() > self._load_deadline

    def run_function(self, fn: Any, keys: list[bytes], argv: list[bytes]) -> tuple[bool, Any]:
        """(True, result) or (False, error table) of one call of a library's function."""
        self.resp3 = False
        result: tuple[bool, Any] = self._run_function(fn, self.lua.table_from(keys),
                                                      self.lua.table_from(argv))
        return result

    # -- running ----------------------------------------------------------------------------
    def run(self, sha: str, keys: list[bytes], argv: list[bytes]) -> tuple[bool, Any]:
        """(True, result) or (False, error table) of one call of a cached script."""
        self.resp3 = False
        fn = self.scripts[sha]
        result: tuple[bool, Any] = self._run(fn, self.lua.table_from(keys),
                                             self.lua.table_from(argv))
        return result

    def error_line(self, err: Any, sha: str) -> str:
        """The error reply text of a script that raised (with Redis's suffix)."""
        if lua51.lua_type(err) != "table":
            return f"ERR {_text(err)}"
        msg = err[b"err"]
        text = _text(msg) if msg is not None else "ERR unknown error"
        line = err[b"line"]
        source = err[b"source"]
        if source is not None and line is not None:
            return f"{text} script: {sha}, on {_text(source)}:{int(line)}."
        return f"{text} script: {sha}, on @user_script:0."

    # -- Redis reply -> Lua ------------------------------------------------------------------
    def to_lua(self, value: Any) -> Any:  # noqa: C901, PLR0911
        if value is None:
            return None if self.resp3 else False
        t = type(value)
        if t is bytes or t is int or t is bool:
            return value
        if t is list:
            return self.lua.table_from([self.to_lua(v) for v in value])
        if t is Status:
            return self.lua.table_from({b"ok": bytes(value)})
        if t is ErrorReply:  # Redis 7.0 marks a command's error so it is not counted twice
            return self.lua.table_from({b"err": bytes(value), b"ignore_error_stats_update": True})
        if t is Double:
            return self.lua.table_from({b"double": float(value)})
        if t is RespMap:
            inner = self.lua.table()
            for k, v in value:
                inner[self.to_lua(k)] = self.to_lua(v)
            return self.lua.table_from({b"map": inner})
        if t is RespSet:
            inner = self.lua.table()
            for m in value:
                inner[self.to_lua(m)] = True
            return self.lua.table_from({b"set": inner})
        if t is BigNumber:
            return self.lua.table_from({b"big_number": bytes(value)})
        if t is Verbatim:
            raw = bytes(value)
            return self.lua.table_from({b"verbatim_string": self.lua.table_from(
                {b"format": raw[:3], b"string": raw[4:]})})
        return value

    # -- Lua -> Redis reply -------------------------------------------------------------------
    def to_reply(self, value: Any, enc: type[Resp2]) -> bytes:  # noqa: C901, PLR0911, PLR0912
        if value is None:
            return enc.null
        t = type(value)
        if t is bytes:
            return reply.bulk(value)
        if t is CallError:  # a redis.call error caught by the script's own pcall
            return reply.bulk(str(value).encode())
        if t is bool:
            if value:
                return b"#t\r\n" if self.resp3 and enc.proto == 3 else reply.ONE  # noqa: PLR2004
            if self.resp3:
                return b"#f\r\n" if enc.proto == 3 else reply.ZERO  # noqa: PLR2004
            return enc.null
        if t is int:
            return reply.integer(value)
        if t is float:  # truncated; NaN and out of range as C's cast gives them on x86
            return reply.integer(int(value)) if value == value and abs(value) < 2**63 \
                else reply.integer(-(2**63))
        if lua51.lua_type(value) != "table":
            return enc.null
        err = value[b"err"]
        if err is not None:
            return reply.error(_text(err))
        ok = value[b"ok"]
        if ok is not None:
            return reply.simple(_bytes(ok))
        double = value[b"double"]
        if double is not None:
            x = float(double)
            if x == 0 and self._negative_zero(value, b"double"):
                x = -0.0
            return enc.double(format_double(x))
        big = value[b"big_number"]
        if big is not None:
            return b"(%b\r\n" % _bytes(big) if enc.proto == 3 else reply.bulk(_bytes(big))  # noqa: PLR2004
        verbatim = value[b"verbatim_string"]
        if verbatim is not None:
            return enc.verbatim(_bytes(verbatim[b"string"] or b""))
        mapping = value[b"map"]
        if mapping is not None:
            return enc.map([(self.to_reply(k, enc), self.to_reply(v, enc))
                            for k, v in mapping.items()])
        members = value[b"set"]
        if members is not None:
            return enc.set([self.to_reply(k, enc) for k in members])
        items = []
        i = 1
        while True:
            item = value[i]
            if item is None:
                break
            items.append(self.to_reply(item, enc))
            i += 1
        return reply.array(items)


def _errtext(exc: Any) -> tuple[bytes, bool]:
    """The error line of a Python exception raised through Lua (redis.call's errors), and
    whether the script's line goes in front of it (a library's error, lualibs/)."""
    if isinstance(exc, CallError):
        return str(exc).encode(), False
    if isinstance(exc, LibError):
        return str(exc).encode(), True
    log.error("internal error in a script callback: %r", exc)
    return f"ERR internal error: {type(exc).__name__}: {exc}".encode(), False


def _text(x: Any) -> str:
    if isinstance(x, bytes):
        return x.decode("utf-8", "replace")
    return str(x)


def _bytes(x: Any) -> bytes:
    if isinstance(x, bytes):
        return x
    if isinstance(x, float) and x == int(x):
        return b"%d" % int(x)
    return str(x).encode()


SHEBANG_FLAGS = frozenset(("no-writes", "allow-oom", "allow-stale", "no-cluster",
                           "allow-cross-slot-keys"))


def shebang_flags(body: bytes) -> frozenset[str] | None:
    """The flags of a ``#!lua flags=...`` first line; None without a shebang.

    :raises ValueError: with Redis's error text for a bad shebang.
    """
    if not body.startswith(b"#!"):
        return None
    line = body.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    parts = line[2:].split(" ")
    if parts[0] != "lua":
        raise ValueError(f"ERR Unexpected engine in script shebang: {parts[0]}")
    flags: set[str] = set()
    for part in parts[1:]:
        if not part:
            continue
        if not part.startswith("flags="):
            raise ValueError(f"ERR Unknown lua shebang option: {part}")
        for flag in part[len("flags="):].split(","):
            if flag and flag not in SHEBANG_FLAGS:
                raise ValueError(f"ERR Unexpected flag in script shebang: {flag}")
            if flag:
                flags.add(flag)
    return frozenset(flags)


def strip_shebang(body: bytes) -> bytes:
    """The body Lua compiles: a shebang line is blanked (line numbers stay)."""
    if body.startswith(b"#!"):
        nl = body.find(b"\n")
        return b"" if nl < 0 else body[nl:]
    return body
