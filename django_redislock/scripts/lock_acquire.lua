-- Grant a mutex or reentrant lock, issue its fence and record it in the bucket's index.
-- KEYS[1] lock hash (o=owner, n=count, f=fence)   KEYS[2] bucket fence counter
-- KEYS[3] index names zset   KEYS[4] index expiry zset   KEYS[5] index metadata hash
-- KEYS[6] index counts hash
-- ARGV[1] owner   ARGV[2] ttl ms   ARGV[3] "1" if reentrant   ARGV[4] lock name
-- ARGV[5] holder metadata (a JSON object; the script adds "fence")
-- ARGV[6] "0" a non-blocking try, "1" a first try that will wait if refused, "2" a retry after
--         waiting. Waiters mark the hold (w=1) so that only its release pays for a wake-up push;
--         a waiter that gets the lock marks its own hold, as others may still be waiting.
-- returns {1, fence, count} when granted (count > 1: a reentrant re-entry, same fence);
--         {0, wait_ms} when another owner holds it (wait_ms: the holder's remaining PTTL)
local ttl = tonumber(ARGV[2])
local holder = redis.call('HGET', KEYS[1], 'o')
if holder then
  if holder ~= ARGV[1] or ARGV[3] ~= '1' then
    if ARGV[6] ~= '0' then
      redis.call('HSET', KEYS[1], 'w', 1)
    end
    return {0, redis.call('PTTL', KEYS[1])}
  end
  local t = redis.call('TIME')
  local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', KEYS[4], t[1] * 1000 + math.floor(t[2] / 1000) + ttl, ARGV[4])
  redis.call('HSET', KEYS[6], ARGV[4], n)
  return {1, tonumber(redis.call('HGET', KEYS[1], 'f')), n}
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local fence = redis.call('INCR', KEYS[2])
if fence % 16 == 0 then
  -- Every 16th grant of the bucket prunes up to 64 entries of locks that expired unreleased.
  local stale = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 64)
  if #stale > 0 then
    redis.call('ZREM', KEYS[3], unpack(stale))
    redis.call('ZREM', KEYS[4], unpack(stale))
    redis.call('HDEL', KEYS[5], unpack(stale))
    redis.call('HDEL', KEYS[6], unpack(stale))
  end
end
if ARGV[6] == '2' then
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 'f', fence, 'w', 1)
else
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'n', 1, 'f', fence)
end
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', KEYS[3], 0, ARGV[4])
redis.call('ZADD', KEYS[4], now + ttl, ARGV[4])
redis.call('HSET', KEYS[5], ARGV[4], string.sub(ARGV[5], 1, -2) .. ',"fence":' .. fence .. '}')
if ARGV[3] == '1' then
  redis.call('HDEL', KEYS[6], ARGV[4])  -- a stale count of an expired reentrant hold
end
return {1, fence, 1}
