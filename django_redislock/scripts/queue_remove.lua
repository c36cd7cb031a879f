-- Remove tasks whatever their state (ready, delayed, in flight or dead).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1..] task ids
-- returns how many of them existed
-- include: priority
local removed = 0
for _, id in ipairs(ARGV) do
  local n = redis.call('ZREM', KEYS[1], id) + redis.call('ZREM', KEYS[2], id)
    + redis.call('ZREM', KEYS[3], id)
  if n > 0 then removed = removed + 1 end
  redis.call('HDEL', KEYS[4], id)
  redis.call('HDEL', KEYS[5], id)
  redis.call('HDEL', KEYS[6], id)
  redis.call('HDEL', KEYS[8], id)
  redis.call('HDEL', KEYS[11], id)
  prio_forget({id})
end
return removed
