-- Release one hold of a mutex or reentrant lock, if (owner, fence) still holds it.
-- KEYS[1] lock hash   KEYS[2] wake-up signal list   KEYS[3] released fences zset
-- KEYS[4] index names   KEYS[5] index expiry   KEYS[6] index metadata   KEYS[7] index counts
-- ARGV[1] owner   ARGV[2] fence ("*": whichever hold this owner has, for a release from
--         another process that knows only the explicit owner)   ARGV[3] lock name
-- ARGV[4] signal lifetime ms
-- returns {1, remaining_count, fence}: released (0: the lock is free; if a waiter had marked the
--         hold, one waiter was woken);
--         {2, 0}: this fence was already released (a retried release: a no-op success);
--         {0, 0}: not held by (owner, fence): it expired, was force-released or never was
local hold = redis.call('HMGET', KEYS[1], 'o', 'f', 'n', 'w')
local fence = hold[2]
if hold[1] == ARGV[1] and (ARGV[2] == '*' or fence == ARGV[2]) then
  if hold[3] ~= '1' then
    local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
    if n > 0 then
      redis.call('HSET', KEYS[7], ARGV[3], n)
      return {1, n, tonumber(fence)}
    end
    redis.call('HDEL', KEYS[7], ARGV[3])
  end
  redis.call('DEL', KEYS[1])
  redis.call('ZADD', KEYS[3], fence, fence)
  if redis.call('ZCARD', KEYS[3]) > 1088 then
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -1025)
  end
  redis.call('ZREM', KEYS[4], ARGV[3])
  -- An expiry of 0 hides the entry from listings and counts at once; its metadata is dropped
  -- with it by the next prune (every 16th grant of the bucket, or a listing), one call less here.
  redis.call('ZADD', KEYS[5], 0, ARGV[3])
  if hold[4] then
    if redis.call('LPUSH', KEYS[2], 1) > 1 then
      redis.call('LTRIM', KEYS[2], 0, 0)  -- one pending wake-up is enough
    end
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
  end
  return {1, 0, tonumber(fence)}
end
if redis.call('ZSCORE', KEYS[3], ARGV[2]) then
  return {2, 0}
end
return {0, 0}
