-- Record the successful runs of tasks that had failed before (sent by the worker in its counters
-- pipeline, once a second: no round trip of its own); see the history fragment.
-- KEYS[1] the queue's history hash, KEYS[2] its index
-- ARGV[1] the worker ("host:pid"); ARGV[2..] quadruples: task id, attempt, run duration in µs,
--   the task function ("" when unknown)
-- returns how many runs were recorded
-- include: history
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local n = 0
for i = 2, #ARGV - 3, 4 do
  history_add(KEYS[1], KEYS[2], ARGV[i], tonumber(ARGV[i + 1]), now, ARGV[i + 2], ARGV[1],
    'succeeded', '', ARGV[i + 3])
  n = n + 1
end
return n
