-- Fragment: the history of a task's runs, kept per queue in a hash (id -> JSON list of its last
-- HISTORY_RUNS runs) and a zset (id -> time of its last recorded run, µs) that bounds the hash
-- to the HISTORY_TASKS tasks with the most recent runs (see django_redislock/queue/history.py).
-- A run: {attempt, end (ms since the epoch, server TIME), runtime (µs, measured by the worker's
-- monotonic clock; absent when unknown), worker ("host:pid"), outcome, error (capped), fn (the
-- task function its payload names, capped at 200 characters; absent when unknown)}.
local HISTORY_RUNS = 10
local HISTORY_TASKS = 1000
local HISTORY_ERROR = 1500
local HISTORY_TTL = 604800000
-- history_add(hash, index, id, attempt, now µs, runtime µs or '', worker, outcome, error, function
-- or nil)
local function history_add(hkey, zkey, id, attempt, now, runtime, worker, outcome, err, fn)
  -- keys of another type (another program's): record nothing rather than fail the retry
  for _, key in ipairs({hkey, zkey}) do
    local kind = redis.call('TYPE', key).ok
    if kind ~= 'none' and kind ~= (key == hkey and 'hash' or 'zset') then return end
  end
  if #err > HISTORY_ERROR then
    -- the message and the end of the traceback (where it was raised) are what matter
    err = string.sub(err, 1, 500) .. '\n[...]\n' .. string.sub(err, -(HISTORY_ERROR - 500))
  end
  local runs = {}
  local raw = redis.call('HGET', hkey, id)
  if raw then
    local ok, old = pcall(cjson.decode, raw)
    if ok and type(old) == 'table' then runs = old end
  end
  -- an attempt number that does not follow the last one: a new task with an old id
  local last = runs[#runs]
  if last and (type(last) ~= 'table' or (tonumber(last.attempt) or 0) >= attempt) then runs = {} end
  local run = {attempt = attempt, ['end'] = math.floor(now / 1000), worker = worker,
    outcome = outcome, error = err}
  if tonumber(runtime) then run.runtime = tonumber(runtime) end
  if fn and fn ~= '' then run.fn = string.sub(fn, 1, 200) end
  runs[#runs + 1] = run
  while #runs > HISTORY_RUNS do table.remove(runs, 1) end
  redis.call('HSET', hkey, id, cjson.encode(runs))
  redis.call('ZADD', zkey, now, id)
  local extra = redis.call('ZCARD', zkey) - HISTORY_TASKS
  if extra > 0 then
    local old = redis.call('ZPOPMIN', zkey, extra)
    for i = 1, #old, 2 do redis.call('HDEL', hkey, old[i]) end
  end
  redis.call('PEXPIRE', hkey, HISTORY_TTL)
  redis.call('PEXPIRE', zkey, HISTORY_TTL)
end
