-- Fragment: the run log, every finished run of a queue's tasks in two capped lists (see
-- django_redislock/queue/runlog.py): successes in one, every other end (failed and retried,
-- dead-lettered, cancelled, expired) in the other, so a burst of successes never pushes the
-- failures out. Newest first; each holds at most RUNLOG_KEEP entries and expires RUNLOG_TTL ms
-- after its last write. An entry is "<end ms>:<JSON>", the JSON {i: task id, a: attempt, r:
-- runtime µs (absent when unknown), w: worker ("host:pid"), o: outcome, f: task function (absent
-- when unknown), t: exception type, x: the error's first RUNLOG_ERROR characters}.
local RUNLOG_KEEP = 1000
local RUNLOG_TTL = 604800000
local RUNLOG_ERROR = 200
-- runlog_entry(id, attempt, end ms, runtime µs or '', worker, outcome, error, function or nil)
local function runlog_entry(id, attempt, ended, runtime, worker, outcome, err, fn)
  local run = {i = id, a = tonumber(attempt) or 0, w = worker, o = outcome}
  if tonumber(runtime) then run.r = tonumber(runtime) end
  if fn and fn ~= '' then run.f = string.sub(fn, 1, 200) end
  if err and err ~= '' then
    run.x = string.sub(err, 1, RUNLOG_ERROR)
    -- the exception type: the first line's text before a colon, when it has no space
    local kind = string.match(err, '^([^:\n ]+):')
    if kind then run.t = string.sub(kind, 1, 200) end
  end
  return string.format('%d:', ended) .. cjson.encode(run)
end
-- runlog_push(list key, entries, oldest first): keys of another type (another program's) get
-- nothing rather than fail the call that ends the runs
local function runlog_push(key, entries)
  if #entries == 0 then return end
  local kind = redis.call('TYPE', key).ok
  if kind ~= 'none' and kind ~= 'list' then return end
  for i = 1, #entries, 500 do
    redis.call('LPUSH', key, unpack(entries, i, math.min(i + 499, #entries)))
  end
  redis.call('LTRIM', key, 0, RUNLOG_KEEP - 1)
  redis.call('PEXPIRE', key, RUNLOG_TTL)
end
