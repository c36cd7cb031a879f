-- Turn a write hold into a read hold atomically (no other writer can slip in between).
-- The read hold is its own member "<reader owner>@<fence>" (the write hold's fence), so it is
-- released and renewed like any other read hold and never confused with another.
-- Safe to resend: once applied, the write hold is gone and that member is there; a resend
-- then answers as the first time and changes nothing.
-- KEYS[1] writer hash   KEYS[2] readers zset   KEYS[3] reader signal
-- KEYS[4] index expiry   KEYS[5] latest reader's metadata hash
-- ARGV[1] writer owner   ARGV[2] fence   ARGV[3] ttl ms of the read hold   ARGV[4] lock name
-- ARGV[5] holder metadata (JSON)   ARGV[6] signal lifetime ms
-- ARGV[7] reader owner (unique to this downgrade)
-- returns the number of readers after the downgrade (>= 1), or 0 when the write hold is gone
local member = ARGV[7] .. '@' .. ARGV[2]
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
if hold[1] ~= ARGV[1] or hold[2] ~= ARGV[2] then
  if redis.call('ZSCORE', KEYS[2], member) then
    return redis.call('ZCARD', KEYS[2])  -- applied already: a resend
  end
  return 0
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('DEL', KEYS[1])
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[3]), member)
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIRE', KEYS[2], last - now)
redis.call('HSET', KEYS[5], 'm', ARGV[5], 'f', ARGV[2])
redis.call('PEXPIRE', KEYS[5], last - now)
redis.call('ZADD', KEYS[4], last, ARGV[4])
redis.call('LPUSH', KEYS[3], 1)
redis.call('LTRIM', KEYS[3], 0, 0)
redis.call('PEXPIRE', KEYS[3], ARGV[6])
return redis.call('ZCARD', KEYS[2])
