-- An admin action on tasks the operator saw, refused for any task that changed since.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash, KEYS[9] priority index zset, KEYS[10] levels hash (see the priority
-- fragment: a task run now or requeued keeps its level)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- KEYS[12..15] the concurrency groups' keys (see the groups fragment): a deleted task of a
--          group gives its slot back
-- ARGV[1] action: "run" (a delayed task becomes due now; a ready one keeps its place),
--         "requeue" (a dead task goes back to ready with fresh attempts, its last error kept)
--         or "delete"
-- ARGV[2..] quadruples: id, the zset it was seen in (1 pending, 2 in flight, 3 dead), its
--         score, and "" or, for a workflow member (read from its payload), "<k> <workflow id>
--         <ttl ms> <role> <index>": deleting it while it is pending ends its step as failed
--         (see the workflow fragment: wf_removed), with KEYS[14 + 2k], KEYS[15 + 2k] its
--         workflow hash and the queue's workflow dependency hash
-- returns one code per task: 1 done, 0 gone, -1 changed since it was seen (state or score),
--         -2 the action does not apply to that state (run in flight, requeue a live task)
-- include: priority
-- include: workflow
-- include: gcra
-- include: groups
local G = #KEYS >= 15 and {KEYS[12], KEYS[13], KEYS[14], KEYS[15]} or nil
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local action = ARGV[1]
local out = {}
local woken = false
for i = 2, #ARGV, 4 do
  local id, where = ARGV[i], tonumber(ARGV[i + 1])
  local score = redis.call('ZSCORE', KEYS[where], id)
  local code = 1
  if not score then
    code = 0
    for k = 1, 3 do
      if redis.call('ZSCORE', KEYS[k], id) then code = -1 end
    end
  elseif tonumber(score) ~= tonumber(ARGV[i + 2]) then
    code = -1
  elseif action == 'run' then
    if where ~= 1 then code = -2 else
      if tonumber(score) > now then
        redis.call('ZADD', KEYS[1], 'XX', now, id)
        prio_back(id, now)
      end
      woken = true
    end
  elseif action == 'requeue' then
    if where ~= 3 then code = -2 else
      redis.call('ZREM', KEYS[3], id)
      redis.call('HDEL', KEYS[5], id)
      if not redis.call('ZSCORE', KEYS[1], id) then
        redis.call('ZADD', KEYS[1], now, id)
        prio_back(id, now)
      end
      woken = true
    end
  elseif action == 'delete' then
    redis.call('ZREM', KEYS[where], id)
    if where == 1 then redis.call('ZREM', KEYS[9], id) end
    local k, wf, ttl, role, index = string.match(ARGV[i + 3], '^(%d+) (%S+) (%d+) (%a) (%d+)$')
    if where == 1 and k then
      k = tonumber(k)
      wf_removed(KEYS[14 + 2 * k], KEYS[15 + 2 * k], wf, ttl, role, index, id,
        'TaskDeleted: deleted while queued (admin)')
    end
    if not (redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
        or redis.call('ZSCORE', KEYS[3], id)) then
      redis.call('HDEL', KEYS[4], id)
      redis.call('HDEL', KEYS[5], id)
      redis.call('HDEL', KEYS[6], id)
      redis.call('HDEL', KEYS[8], id)  -- the claim of an in-flight task: no field outlives it
      redis.call('HDEL', KEYS[11], id)
      prio_forget({id})
      if G then grp_forget(G, id, now) end
    end
  else
    return redis.error_reply('unknown action ' .. action)
  end
  out[#out + 1] = code
end
if woken then
  redis.call('LPUSH', KEYS[7], 1)
  redis.call('LTRIM', KEYS[7], 0, 15)
end
return out
