-- YCSB A/B/C/D/F over tuffdb's ekoDB REST face, as a wrk script (bench/ycsb.py runs it).
--
--   wrk -t N -c N -d <safety>s -s bench/ycsb_gen/ycsb.lua http://127.0.0.1:PORT -- \
--       WORKLOAD RECORDCOUNT SEED WARMUP_S DURATION_S TOKEN WORKERS TABLE [OPS_CAP]
--
-- WORKLOAD is A, B, C, D, F or "trivial" (GET /api/health: the generator's ceiling).
-- One wrk thread per connection (-t N -c N), so each thread is one closed-loop YCSB client
-- with its own Lua state: request() and response() strictly alternate, which is what a
-- read-modify-write (F: GET, then PUT of one field, one op, one latency sample) needs.
-- Requests (the same as bench/_ycsb_drivers.py): read = GET /api/find/TABLE/KEY,
-- update = PUT /api/update/TABLE/KEY {"fieldN": 100 bytes}, insert (D) =
-- POST /api/insert/TABLE {"id": KEY, field0..field9}, all with the bearer TOKEN.
-- Keys: "user" .. fnv64(n) as YCSB (hashed insert order). Distributions: ScrambledZipfian
-- (theta 0.99 over YCSB's 10^10 item space, zeta hard-coded as YCSB does, hashed and taken
-- modulo RECORDCOUNT) for A, B, C, F; for D, SkewedLatest: newest - Zipfian(RECORDCOUNT),
-- inserts taking disjoint ranges per thread (RECORDCOUNT + id + k * WORKERS) and reads of a
-- key above RECORDCOUNT mapped onto this thread's own (acknowledged) keys, so no read misses.
-- Seeded per thread (math.randomseed(SEED * 7919 + id)).
-- Window: ops completing in [t0 + WARMUP_S, t0 + WARMUP_S + DURATION_S) count (t0 = when
-- wrk set the threads up); each thread stops itself at the window's end (or after OPS_CAP
-- counted ops, if given) and prints "YCSB_STOPPED id"; wrk's main thread sleeps for all of
-- -d regardless, so bench/ycsb.py sends it SIGINT once every thread has stopped. Latency per op from
-- a CLOCK_MONOTONIC read (LuaJIT FFI) when the op's first request is built to when its last
-- response is parsed, into a 1 us histogram. A non-2xx status is an error (counted, not an
-- op). done() prints one line "YCSB_JSON {...}" with per-thread counts, the histogram and
-- wrk's own socket error counters.

local ffi = require("ffi")
ffi.cdef([[
typedef struct { long tv_sec; long tv_nsec; } ycsb_timespec;
int clock_gettime(int clk_id, ycsb_timespec *tp);
]])
local ts = ffi.new("ycsb_timespec")
local function now_us()
  ffi.C.clock_gettime(1, ts) -- CLOCK_MONOTONIC
  return tonumber(ts.tv_sec) * 1e6 + tonumber(ts.tv_nsec) / 1e3
end

-- ------------------------------------------------------------------ setup/done environment
local threads = {}
local setup_t0 = nil -- the globals id and t0 are set in each thread's own state

function setup(thread)
  if setup_t0 == nil then
    setup_t0 = now_us()
  end
  thread:set("id", #threads)
  thread:set("t0", setup_t0)
  table.insert(threads, thread)
end

-- ------------------------------------------------------------------ keys and distributions
local FNV_OFFSET = 0xCBF29CE484222325ULL
local FNV_PRIME = 1099511628211ULL
local SIGN = 0x8000000000000000ULL

local function fnv64(n) -- n: a non-negative integer below 2^53
  local h = FNV_OFFSET
  for _ = 1, 8 do
    local b = n % 256
    n = (n - b) / 256
    h = bit.bxor(h, b) * FNV_PRIME
  end
  if h >= SIGN then -- Java's Math.abs of a signed long
    h = 0ULL - h
  end
  return h
end

local keys = {}
local function key(n)
  local k = keys[n]
  if k == nil then
    k = "user" .. string.sub(tostring(fnv64(n)), 1, -4) -- drop the "ULL" suffix
    keys[n] = k
  end
  return k
end

local THETA = 0.99
local ZETA2 = 1 + 0.5 ^ THETA
local ALPHA = 1 / (1 - THETA)
local YCSB_ITEMS = 10000000000
local YCSB_ZETAN = 26.46902820178302

local function zipfian(items, zetan)
  if zetan == nil then
    zetan = 0
    for i = 1, items do
      zetan = zetan + 1 / i ^ THETA
    end
  end
  local eta = (1 - (2 / items) ^ (1 - THETA)) / (1 - ZETA2 / zetan)
  return { items = items, zetan = zetan, eta = eta }
end

local function zipf_next(z)
  local u = math.random()
  local uz = u * z.zetan
  if uz < 1 then
    return 0
  end
  if uz < ZETA2 then
    return 1
  end
  local r = math.floor(z.items * (z.eta * u - z.eta + 1) ^ ALPHA)
  if r > z.items - 1 then
    r = z.items - 1
  end
  return r
end

-- ------------------------------------------------------------------ per-thread state
local ALNUM = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
local MIXES = {
  A = { read = 0.5, update = 0.5 },
  B = { read = 0.95, update = 0.05 },
  C = { read = 1.0 },
  D = { read = 0.95, insert = 0.05 },
  F = { read = 0.5, rmw = 0.5 },
}

local workload, rc, workers, tbl, head_auth, head_host, cap
local win_start, win_end
local zipf, latest, rc_u64
local value, pool = nil, {}
local newest, own_inserts = 0, 0

-- results read by done() through thread:get (numbers and tables of numbers only)
hist = {}
ops = 0
errors = 0
errors_all = 0
inserted = 0
stopped_at = -1 -- us after the window start when this thread stopped

local kind, cur, op_start, rmw_key

local function rand_string(len)
  local t = {}
  for i = 1, len do
    local j = math.random(1, #ALNUM)
    t[i] = string.sub(ALNUM, j, j)
  end
  return table.concat(t)
end

local function req(method, path, body)
  if body == nil then
    return method .. " " .. path .. " HTTP/1.1\r\n" .. head_host .. head_auth .. "\r\n"
  end
  return method .. " " .. path .. " HTTP/1.1\r\n" .. head_host .. head_auth
    .. "Content-Type: application/json\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body
end

local function update_req(k)
  local f = math.random(0, 9)
  return req("PUT", "/api/update/" .. tbl .. "/" .. k, '{"field' .. f .. '":"' .. value .. '"}')
end

local function insert_req(n)
  local parts = { '{"id":"', key(n), '"' }
  for f = 0, 9 do
    parts[#parts + 1] = ',"field' .. f .. '":"' .. pool[math.random(1, #pool)] .. '"'
  end
  parts[#parts + 1] = "}"
  return req("POST", "/api/insert/" .. tbl, table.concat(parts))
end

local function read_req(k)
  return req("GET", "/api/find/" .. tbl .. "/" .. k)
end

local function pick()
  local u = math.random()
  for op, p in pairs(MIXES[workload]) do
    if u < p then
      return op
    end
    u = u - p
  end
  return "read"
end

local function next_op()
  if workload == "trivial" then
    kind = "trivial"
    return
  end
  local op = pick()
  if workload == "D" then
    if op == "insert" then
      newest = rc + id + own_inserts * workers
      own_inserts = own_inserts + 1
      kind, cur = "insert", insert_req(newest)
      return
    end
    local n = newest - zipf_next(latest)
    if n < 0 then
      n = 0
    end
    if n >= rc then -- another thread's key may not exist yet: read our own at or below n
      local idx = math.floor((n - rc - id) / workers)
      n = idx >= 0 and (rc + id + idx * workers) or (rc - 1)
    end
    kind, cur = "read", read_req(key(n))
    return
  end
  local n = tonumber(fnv64(zipf_next(zipf)) % rc_u64)
  if op == "read" then
    kind, cur = "read", read_req(key(n))
  elseif op == "update" then
    kind, cur = "update", update_req(key(n))
  else
    kind, cur, rmw_key = "rmw_read", read_req(key(n)), key(n)
  end
end

function init(args)
  workload = args[1]
  rc = tonumber(args[2])
  local seed = tonumber(args[3])
  win_start = t0 + tonumber(args[4]) * 1e6
  win_end = win_start + tonumber(args[5]) * 1e6
  head_auth = "Authorization: Bearer " .. args[6] .. "\r\n"
  workers = tonumber(args[7])
  tbl = args[8] or "usertable"
  cap = tonumber(args[9] or "0")
  head_host = "Host: " .. wrk.host .. ":" .. tostring(wrk.port) .. "\r\n"
  math.randomseed(seed * 7919 + id)
  rc_u64 = ffi.new("uint64_t", rc)
  zipf = zipfian(YCSB_ITEMS, YCSB_ZETAN)
  newest = rc - 1
  if workload == "D" then
    latest = zipfian(rc)
  end
  value = rand_string(100)
  for i = 1, 16 do
    pool[i] = rand_string(100)
  end
  if workload == "trivial" then
    cur = req("GET", "/api/health")
  end
  next_op()
end

function request()
  if kind ~= "rmw_update" then
    op_start = now_us()
  end
  return cur
end

function response(status, headers, body)
  local t = now_us()
  local ok = status >= 200 and status < 300
  if kind == "rmw_read" and ok then -- second half of the read-modify-write, same op
    kind, cur = "rmw_update", update_req(rmw_key)
    return
  end
  if kind == "insert" and ok then
    inserted = inserted + 1
  end
  if not ok then
    errors_all = errors_all + 1
  end
  if t >= win_start and t < win_end then
    if ok then
      ops = ops + 1
      local us = math.floor(t - op_start)
      hist[us] = (hist[us] or 0) + 1
    else
      errors = errors + 1
    end
  end
  if t >= win_end or (cap > 0 and ops >= cap) then
    stopped_at = t - win_start
    io.write("YCSB_STOPPED " .. id .. "\n") -- bench/ycsb.py ends wrk once every thread said so
    io.flush()
    wrk.thread:stop()
    return
  end
  next_op()
end

-- ------------------------------------------------------------------ done: one JSON line
function done(summary, latency, requests)
  local merged, per = {}, {}
  local total_ops, total_err, total_err_all, stopped = 0, 0, 0, 0
  for _, th in ipairs(threads) do
    local h = th:get("hist") or {}
    for us, c in pairs(h) do
      merged[us] = (merged[us] or 0) + c
    end
    local o, e, ea = th:get("ops"), th:get("errors"), th:get("errors_all")
    total_ops, total_err, total_err_all = total_ops + o, total_err + e, total_err_all + ea
    local st = th:get("stopped_at")
    if st >= 0 then
      stopped = stopped + 1
    end
    per[#per + 1] = string.format('{"id":%d,"ops":%d,"errors":%d,"inserted":%d,"stop_us":%d}',
      th:get("id"), o, e, th:get("inserted"), st)
  end
  local hs = {}
  for us, c in pairs(merged) do
    hs[#hs + 1] = string.format('"%d":%d', us, c)
  end
  local er = summary.errors
  io.write(string.format(
    'YCSB_JSON {"ops":%d,"errors":%d,"errors_all":%d,"threads":[%s],"hist_us":{%s},'
      .. '"wrk":{"requests":%d,"duration_us":%d,"connect":%d,"read":%d,"write":%d,'
      .. '"status":%d,"timeout":%d},"threads_stopped":%d}\n',
    total_ops, total_err, total_err_all, table.concat(per, ","), table.concat(hs, ","),
    summary.requests, summary.duration, er.connect, er.read, er.write, er.status, er.timeout,
    stopped))
end
