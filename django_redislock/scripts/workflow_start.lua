-- Start a workflow: create its hash and queue its first tasks, or defer them until every
-- workflow it depends on succeeded (see the workflow fragment).
-- KEYS[1..11] the queue's keys (as queue_enqueue.lua), KEYS[12] the workflow hash,
-- KEYS[13] the queue's workflow dependency hash, KEYS[14..] the hashes of the workflows it
-- depends on (of the same queue)
-- ARGV[1] workflow id, ARGV[2] time to live of its hash (ms), ARGV[3] kind (chain, group,
-- chord, task), ARGV[4] members counted by the "left" counter, ARGV[5] allow ("1" or "0"),
-- ARGV[6] callback id ("" for none), ARGV[7] callback payload, ARGV[8] how many dependencies
-- (their ids follow, in the order of KEYS[14..]), then pairs: task id, payload (the tasks
-- queued first)
-- The first tasks' ids are recorded as m:<i> (i = 0, 1, ...: their member indices) for the
-- admin's workflow page and its cancel.
-- returns 1 queued, 2 deferred, 3 cancelled (a dependency failed, or is unknown: expired or
--         never started), 0 a workflow with this id exists (nothing changed: a resend)
-- include: workflow
local W, D, id = KEYS[12], KEYS[13], ARGV[1]
if redis.call('EXISTS', W) == 1 then return 0 end
redis.call('HSET', W, 'kind', ARGV[3], 'state', 'RUNNING', 'n', ARGV[4], 'left', ARGV[4],
  'allow', ARGV[5], 'cb', ARGV[6], 'cbp', ARGV[7])
redis.call('PEXPIRE', W, ARGV[2])
local ndeps = tonumber(ARGV[8])
local first = 9 + ndeps
for i = first, #ARGV, 2 do redis.call('HSET', W, 'm:' .. ((i - first) / 2), ARGV[i]) end
local left = 0
for k = 1, ndeps do
  local dep = ARGV[8 + k]
  local state = redis.call('HGET', KEYS[13 + k], 'state')
  local cancelled = redis.call('HGET', D, 'x:' .. dep)
  if state == 'FAILED' or cancelled or not state then
    local why = 'dependency ' .. dep .. (state and ' failed' or ' is unknown')
    redis.call('HSET', D, 'x:' .. id, why)
    return 3
  end
  if state == 'RUNNING' then
    local waiting = redis.call('HGET', D, 'w:' .. dep)
    redis.call('HSET', D, 'w:' .. dep, waiting and (waiting .. ' ' .. id) or id)
    left = left + 1
  end
end
if left > 0 then
  local items = {}
  for i = first, #ARGV do items[#items + 1] = ARGV[i] end
  redis.call('HSET', D, 'l:' .. id, left, 'p:' .. id, cmsgpack.pack(items))
  return 2
end
for i = first, #ARGV, 2 do wf_enqueue(ARGV[i], ARGV[i + 1]) end
return 1
