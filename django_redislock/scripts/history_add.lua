-- Record the successful runs of a worker's last second (sent in its outcome batch, once a
-- second: no round trip of its own): each in the queue's run log (see the runlog fragment), and
-- in the task's history those that end a run of failures (see the history fragment).
-- KEYS[1] the queue's history hash, KEYS[2] its index, KEYS[3] its run log of successes
-- ARGV[1] the worker ("host:pid"); ARGV[2..] sextuples, oldest run first: task id, attempt, run
--   duration in µs, the task function ("" when unknown), 1 if the task had failed before (its
--   history gets the run) else 0, ms between the run's end and the batch being sent
-- returns how many runs were recorded
-- include: history
-- include: runlog
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ms = math.floor(now / 1000)
local n, entries = 0, {}
for i = 2, #ARGV - 5, 6 do
  local ended = ms - (tonumber(ARGV[i + 5]) or 0)
  entries[#entries + 1] = runlog_entry(ARGV[i], ARGV[i + 1], ended, ARGV[i + 2], ARGV[1],
    'succeeded', '', ARGV[i + 3])
  if ARGV[i + 4] == '1' then
    history_add(KEYS[1], KEYS[2], ARGV[i], tonumber(ARGV[i + 1]), now, ARGV[i + 2], ARGV[1],
      'succeeded', '', ARGV[i + 3])
  end
  n = n + 1
end
runlog_push(KEYS[3], entries)
return n
