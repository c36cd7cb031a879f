-- The tasks of a queue with the most recent recorded runs, newest first, each with its last run
-- (see the history fragment and django_redislock/admin/runs.py). Read-only.
-- KEYS[1] the queue's history hash, KEYS[2] its history index (id -> time of its last run, µs)
-- ARGV[1] how many tasks (1..1000), ARGV[2] characters of each error kept (from its start: the
--   exception type and message come first)
-- returns {server time µs, id, time of its last run µs, runs recorded, last run as JSON, ...};
--   a field that is not a JSON list of runs (another program's) gives an empty JSON object
local t = redis.call('TIME')
local out = {tonumber(t[1]) * 1000000 + tonumber(t[2])}
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' or redis.call('TYPE', KEYS[2]).ok ~= 'zset' then
  return out
end
local keep = tonumber(ARGV[2])
local newest = redis.call('ZREVRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
for i = 1, #newest, 2 do
  local raw = redis.call('HGET', KEYS[1], newest[i])
  local last, count = '{}', 0
  if raw then
    local ok, runs = pcall(cjson.decode, raw)
    if ok and type(runs) == 'table' and type(runs[#runs]) == 'table' then
      local run = runs[#runs]
      count = #runs
      if type(run.error) == 'string' and #run.error > keep then
        run.error = string.sub(run.error, 1, keep)
      end
      last = cjson.encode(run)
    end
  end
  out[#out + 1] = newest[i]
  out[#out + 1] = newest[i + 1]
  out[#out + 1] = count
  out[#out + 1] = last
end
return out
