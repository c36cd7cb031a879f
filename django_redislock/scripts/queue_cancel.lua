-- Cancel a task: remove it if it is queued, or ask the worker running it to stop it.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- KEYS[12] cancel requests hash (id -> the enqueue time of the copy to cancel): read by the
--          lease renewals of the worker running it (queue_extend.lua), dropped by its retry;
--          a run that ended before a renewal read its request leaves it behind, so each
--          request sent here first drops up to PRUNE requests of tasks that are neither in
--          flight nor pending (a retried or recovered task keeps its request for its next run)
-- KEYS[13] the task's result hash, KEYS[14] its done list (see result_store.lua)
-- KEYS[15], KEYS[16] the queue's history hash and index (see the history fragment), KEYS[17] its
--          run log of ends other than success (see the runlog fragment)
-- KEYS[18..21] (optional) the concurrency groups' keys (see the groups
--          fragment): a held task is removed too, and an admitted one gives its slot back
-- ARGV[1] id, ARGV[2] the reason (recorded as its error), ARGV[3] who asked ("host:pid")
-- ARGV[4] (optional) the enqueue time (KEYS[11]) of the copy the caller read, "-" when it
--         read none: a queued copy with another one is not removed (-1, see below)
-- KEYS[22], KEYS[23] (optional, with KEYS[21]) the copy the caller read is a workflow member: its workflow
-- hash and the queue's workflow dependency hash; ARGV[5] the workflow id, ARGV[6] its time to
-- live (ms), ARGV[7] the member's role, ARGV[8] its index: removing it ends its step as
-- failed in this call (see the workflow fragment: wf_removed)
-- returns 1 removed (it was ready or delayed), 2 asked (it is in flight: its worker stops it at
--         its next lease renewal), 0 nothing to cancel (finished, dead-lettered or unknown),
--         -1 nothing changed: the queued copy is not the one the caller read (read it again)
-- include: priority
-- include: workflow
-- include: gcra
-- include: groups
-- include: history
-- include: runlog
local PRUNE = 20
local id = ARGV[1]
if redis.call('ZSCORE', KEYS[2], id) then
  local sample = redis.call('HRANDFIELD', KEYS[12], PRUNE)
  -- a missing hash answers an empty array (fakeredis: nil)
  for _, asked in ipairs(type(sample) == 'table' and sample or {}) do
    if not (redis.call('ZSCORE', KEYS[2], asked) or redis.call('ZSCORE', KEYS[1], asked)) then
      redis.call('HDEL', KEYS[12], asked)
    end
  end
  redis.call('HSET', KEYS[12], id, redis.call('HGET', KEYS[11], id) or '')
  return 2
end
local G = #KEYS >= 21 and {KEYS[18], KEYS[19], KEYS[20], KEYS[21]} or nil
local held = G and redis.call('HEXISTS', G[4], 'h:' .. id) == 1
if not (held or redis.call('ZSCORE', KEYS[1], id)) then return 0 end
if ARGV[4] and (redis.call('HGET', KEYS[11], id) or '-') ~= ARGV[4] then return -1 end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
if G then grp_forget(G, id, now) end
local attempts = tonumber(redis.call('HGET', KEYS[5], id) or '0')
redis.call('ZREM', KEYS[1], id)
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[6], id)
redis.call('HDEL', KEYS[8], id)
redis.call('HDEL', KEYS[11], id)
redis.call('HDEL', KEYS[12], id)
prio_forget({id})
if #KEYS >= 23 then
  wf_removed(KEYS[22], KEYS[23], ARGV[5], ARGV[6], ARGV[7], ARGV[8], id, ARGV[2])
end
history_add(KEYS[15], KEYS[16], id, attempts + 1, now, '', ARGV[3], 'cancelled', ARGV[2])
runlog_push(KEYS[17], {runlog_entry(id, attempts + 1, math.floor(now / 1000), '', ARGV[3],
  'cancelled', ARGV[2], nil)})
-- a stored result (a READY record) ends as CANCELLED, and its waiters wake
if redis.call('HEXISTS', KEYS[13], 'gen') == 1 then
  redis.call('HSET', KEYS[13], 'status', 'CANCELLED', 'value', '', 'error', ARGV[2])
  local ttl = redis.call('PTTL', KEYS[13])
  if redis.call('LLEN', KEYS[14]) == 0 then redis.call('RPUSH', KEYS[14], 1) end
  if ttl > 0 then redis.call('PEXPIRE', KEYS[14], ttl) end
end
return 1
