-- Remove a task whatever its state (ready, delayed, in flight or dead).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- KEYS[12..15] (optional) the concurrency groups' keys (see the groups
--          fragment): a held task is removed too, an admitted one gives its slot back
-- ARGV[1] task id
-- ARGV[2] (optional) the enqueue time (KEYS[11]) of the copy the caller read, "-" when it
--         read none: a queued copy with another one is not removed (-1, see below)
-- KEYS[16], KEYS[17] (optional, with KEYS[15]) the copy the caller read is a workflow member:
-- its workflow hash and the queue's workflow dependency hash; ARGV[3] the workflow id, ARGV[4]
-- its time to live (ms), ARGV[5] the member's role, ARGV[6] its index: removing it while it is
-- queued ends its step as failed in this call (see the workflow fragment: wf_removed)
-- returns 1 it existed, 0 it did not, -1 nothing changed: the queued copy is not the one the
--         caller read (read it again)
-- include: priority
-- include: workflow
-- include: gcra
-- include: groups
local id = ARGV[1]
if ARGV[2] and redis.call('ZSCORE', KEYS[1], id)
    and (redis.call('HGET', KEYS[11], id) or '-') ~= ARGV[2] then
  return -1
end
local G = #KEYS >= 15 and {KEYS[12], KEYS[13], KEYS[14], KEYS[15]} or nil
local queued = redis.call('ZREM', KEYS[1], id)
local n = queued + redis.call('ZREM', KEYS[2], id) + redis.call('ZREM', KEYS[3], id)
if G then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  if grp_forget(G, id, now) then n = n + 1 end
end
redis.call('HDEL', KEYS[4], id)
redis.call('HDEL', KEYS[5], id)
redis.call('HDEL', KEYS[6], id)
redis.call('HDEL', KEYS[8], id)
redis.call('HDEL', KEYS[11], id)
prio_forget({id})
if queued == 1 and #KEYS >= 17 then
  wf_removed(KEYS[16], KEYS[17], ARGV[3], ARGV[4], ARGV[5], ARGV[6], id,
    'TaskRemoved: removed while queued')
end
return n > 0 and 1 or 0
