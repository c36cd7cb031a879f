-- Force-release a fair lock's hold (the admin), only if it still has the fence the operator
-- saw; the holder keeps running but its next extend or ensure_held fails (its release finds
-- nothing: LockLost). Bumps the bucket's fence, as the mutex's force release does. Names the
-- first live waiter, whose wake-up list the caller pushes (fair_wake.lua).
-- KEYS[1] lock hash   KEYS[2] queue zset   KEYS[3] wait-lease zset
-- KEYS[4] the bucket's coordination index (see fair_acquire.lua)   KEYS[5] bucket fence counter
-- ARGV[1] the fence of the hold to end
-- returns {1, next} released (next: the first live waiter's token, or ""); {0, ""} when the
--         lock is not held with that fence (released, expired or granted again since)
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
if redis.call('HGET', KEYS[1], 'f') ~= ARGV[1] then
  return {0, ''}
end
redis.call('DEL', KEYS[1])
redis.call('INCR', KEYS[5])
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[2], unpack(lapsed))
  redis.call('ZREM', KEYS[3], unpack(lapsed))
end
if redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') == 0 then
  redis.call('ZREM', KEYS[4], KEYS[1])
end
return {1, redis.call('ZRANGE', KEYS[2], 0, 0)[1] or ''}
