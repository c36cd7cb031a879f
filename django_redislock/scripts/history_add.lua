-- Record the successful runs of a worker's last second (sent in its outcome batch, once a
-- second: no round trip of its own): each in the queue's run log (see the runlog fragment), and
-- in the task's history those that end a run of failures (see the history fragment).
-- KEYS[1] the queue's history hash, KEYS[2] its index, KEYS[3] its run log of successes
-- ARGV[1] the worker ("host:pid"); ARGV[2] n, the runs for the log; ARGV[3 .. 2 + 2n] pairs,
--   oldest run first: ms between the run's end and this call being sent, the entry's JSON (made
--   by the worker, see django_redislock/queue/runlog.py: the script only prefixes its end time,
--   about 0.5 µs a run instead of 5 for encoding it here); then quadruples of the runs that end a
--   run of failures, for their history: task id, attempt, run duration in µs, the task function
-- returns how many runs were entered in the log
-- include: history
-- include: runlog
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ms = math.floor(now / 1000)
local n = tonumber(ARGV[2])
local entries = {}
for i = 3, 2 + 2 * n, 2 do
  entries[#entries + 1] = string.format('%d:', ms - (tonumber(ARGV[i]) or 0)) .. ARGV[i + 1]
end
runlog_push(KEYS[3], entries)
for i = 3 + 2 * n, #ARGV - 3, 4 do
  history_add(KEYS[1], KEYS[2], ARGV[i], tonumber(ARGV[i + 1]), now, ARGV[i + 2], ARGV[1],
    'succeeded', '', ARGV[i + 3])
end
return n
