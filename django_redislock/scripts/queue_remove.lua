-- Remove tasks whatever their state (ready, delayed, in flight or dead).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- KEYS[12..15] (optional) the concurrency groups' keys (see the groups
--          fragment): a held task is removed too, an admitted one gives its slot back
-- ARGV[1..] task ids
-- returns how many of them existed
-- include: priority
-- include: gcra
-- include: groups
local G = #KEYS >= 15 and {KEYS[12], KEYS[13], KEYS[14], KEYS[15]} or nil
local now = 0
if G then
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000000 + tonumber(t[2])
end
local removed = 0
for _, id in ipairs(ARGV) do
  local n = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
    + redis.call('ZREM', KEYS[3], id)
  if G and grp_forget(G, id, now) then n = n + 1 end
  if n > 0 then removed = removed + 1 end
  redis.call('HDEL', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('HDEL', KEYS[6], id)
  redis.call('HDEL', KEYS[8], id)
  redis.call('HDEL', KEYS[11], id)
  prio_forget({id})
end
return removed
