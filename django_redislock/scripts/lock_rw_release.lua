-- Release a read or write hold of a read-write lock, if (owner, fence) still holds it.
-- KEYS[1] writer hash   KEYS[2] readers zset   KEYS[3] reader signal   KEYS[4] writer signal
-- KEYS[5] released holds zset   KEYS[6] index expiry   KEYS[7] latest reader's metadata hash
-- ARGV[1] "r" or "w"   ARGV[2] owner   ARGV[3] fence   ARGV[4] lock name
-- ARGV[5] signal lifetime ms
-- returns {1, readers_left} released; {2, 0} already released (retry no-op); {0, 0} not held
local function signal(key)
  redis.call('LPUSH', key, 1)
  redis.call('LTRIM', key, 0, 0)
  redis.call('PEXPIRE', key, ARGV[5])
end
local released = false
if ARGV[1] == 'w' then
  local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
  if hold[1] == ARGV[2] and hold[2] == ARGV[3] then
    redis.call('DEL', KEYS[1])
    released = true
    signal(KEYS[3])
  end
else
  released = redis.call('ZREM', KEYS[2], ARGV[2]) == 1
end
if not released then
  if redis.call('ZSCORE', KEYS[5], ARGV[3]) then
    return {2, 0}
  end
  return {0, 0}
end
redis.call('ZADD', KEYS[5], ARGV[3], ARGV[3])
if tonumber(ARGV[3]) % 64 == 0 then
  redis.call('ZREMRANGEBYRANK', KEYS[5], 0, -1025)
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local readers = redis.call('ZCARD', KEYS[2])
if readers == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZADD', KEYS[6], 0, ARGV[4])  -- hidden at once, pruned later (see lock_release)
  redis.call('DEL', KEYS[7])
  signal(KEYS[4])
elseif readers > 0 then
  local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
  redis.call('ZADD', KEYS[6], last, ARGV[4])
end
return {1, readers}
