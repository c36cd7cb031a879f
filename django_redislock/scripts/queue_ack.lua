-- Acknowledge finished tasks: they leave the in-flight set and never come back.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1..] task ids
-- returns how many of them were in flight
-- (A newer copy queued with replace=True keeps its data.)
local acked = 0
for _, id in ipairs(ARGV) do
  if redis.call('ZREM', KEYS[2], id) == 1 then
    acked = acked + 1
    if not redis.call('ZSCORE', KEYS[1], id) then
      redis.call('HDEL', KEYS[4], id)
      redis.call('HDEL', KEYS[5], id)
      redis.call('HDEL', KEYS[6], id)
    end
  end
end
return acked
