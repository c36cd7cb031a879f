-- Give a failed in-flight task another run after a delay, or dead-letter it.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1] id, ARGV[2] claim token ("" for whatever claim is current), ARGV[3] delay in
-- microseconds, ARGV[4] error text, ARGV[5] attempts after which the task is dead-lettered
-- returns 1 retried, 2 dead-lettered, 0 lost: the claim is no longer current (its lease
--         expired, or a newer copy was queued with replace=True) and nothing changed
-- KEYS[12], KEYS[13] (optional) the queue's history hash and index: the failed run is added to
-- the task's history (see the history fragment), with ARGV[6] the worker ("host:pid") and
-- ARGV[7] the run's duration in µs ("" when unknown)
-- ARGV[8] (optional) a final outcome instead of a failure: "cancelled" or "expired" dead-letters
-- the task whatever its attempts and is the outcome its history shows ("" for none)
-- ARGV[9] (optional) the task function its payload names, for its history
-- KEYS[14] (optional, with KEYS[12]) the queue's run log of ends other than success: the run is
-- added to it (see the runlog fragment)
-- KEYS[15] (optional) the cancel requests hash (id -> enqueue time, see queue_cancel.lua): the
-- task's request, if any, is dropped (its run ended)
-- KEYS[16..19] (optional, with KEYS[15]) the concurrency groups' keys (see
-- the groups fragment): a task of a group gives its slot back, and a retried one is held
-- until it is due and its group has a slot
-- KEYS[20], KEYS[21] (optional, with KEYS[19]) the task is a workflow member: its workflow
-- hash and the queue's workflow dependency hash; ARGV[10] the workflow id, ARGV[11] its time
-- to live (ms), ARGV[12] the member's role, ARGV[13] its index: a dead-lettered member ends
-- its workflow's step as failed (see the workflow fragment), in this call
-- The failed run counts as an attempt (here, unless its start was recorded already).
-- include: workflow
-- include: priority
-- include: gcra
-- include: groups
-- include: claims
-- include: history
-- include: runlog
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id = ARGV[1]
local v = holder(id, ARGV[2])
if not v then return 0 end
redis.call('ZREM', KEYS[2], id)
redis.call('HDEL', KEYS[8], id)
local attempts = tonumber(redis.call('HGET', KEYS[5], id) or '0')
if not started(v) then attempts = redis.call('HINCRBY', KEYS[5], id, 1) end
redis.call('HSET', KEYS[6], id, ARGV[4])
local final = ARGV[8] or ''
local dead = final ~= '' or attempts >= tonumber(ARGV[5])
if #KEYS >= 15 and final ~= '' then redis.call('HDEL', KEYS[15], id) end
local G = nil
if #KEYS >= 19 and string.byte(v) == 103 then G = {KEYS[16], KEYS[17], KEYS[18], KEYS[19]} end
if #KEYS >= 13 then
  local outcome = final ~= '' and final or (dead and 'dead' or 'retried')
  history_add(KEYS[12], KEYS[13], id, attempts, now, ARGV[7] or '', ARGV[6] or '', outcome,
    ARGV[4], ARGV[9])
  if #KEYS >= 14 then
    runlog_push(KEYS[14], {runlog_entry(id, attempts, math.floor(now / 1000), ARGV[7] or '',
      ARGV[6] or '', outcome, ARGV[4], ARGV[9])})
  end
end
if dead then
  redis.call('ZADD', KEYS[3], now, id)
  if G then grp_release(G, id, now) end
  if #KEYS >= 21 then
    wf_end(KEYS[20], KEYS[21], ARGV[11], ARGV[10], ARGV[12], ARGV[13], false, '', ARGV[4], id, '')
  end
  return 2
end
if G and grp_back(G, id, now + tonumber(ARGV[3]), now) then return 1 end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[3]), id)
prio_back(id, now + tonumber(ARGV[3]))
if redis.call('LLEN', KEYS[7]) == 0 then redis.call('LPUSH', KEYS[7], 1) end
return 1
