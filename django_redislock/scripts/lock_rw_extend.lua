-- Renew a read or write hold for ttl (or, with ttl 0, only check that it is held). As for the
-- mutex (lock_extend.lua), the deadline only moves later: an extend or watchdog renewal with a
-- shorter ttl than the hold has left keeps the hold's deadline.
-- KEYS[1] writer hash   KEYS[2] readers zset   KEYS[3] index expiry zset
-- KEYS[4] latest reader's metadata hash (lives as long as the last reader)
-- ARGV[1] "r" or "w"   ARGV[2] owner   ARGV[3] fence   ARGV[4] new ttl ms (0: check only)
-- ARGV[5] lock name
-- returns the hold's remaining time in ms (> 0; at least ttl) when held; -2 when it is not
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local ttl = tonumber(ARGV[4])
if ARGV[1] == 'w' then
  local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
  if hold[1] ~= ARGV[2] or hold[2] ~= ARGV[3] then
    return -2
  end
  local left = redis.call('PTTL', KEYS[1])
  if left >= ttl then
    return left
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', KEYS[3], now + ttl, ARGV[5])
  return ttl
end
local deadline = redis.call('ZSCORE', KEYS[2], ARGV[2])
if not deadline or tonumber(deadline) <= now then
  return -2
end
if tonumber(deadline) - now >= ttl then
  return tonumber(deadline) - now
end
redis.call('ZADD', KEYS[2], now + ttl, ARGV[2])
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIRE', KEYS[2], last - now)
redis.call('PEXPIRE', KEYS[4], last - now)
if redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZADD', KEYS[3], last, ARGV[5])
end
return ttl
