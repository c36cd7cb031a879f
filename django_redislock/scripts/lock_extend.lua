-- Renew a mutex or reentrant hold for ttl (or, with ttl 0, only check it is still held).
-- The deadline only moves later: a reentrant hold is shared by its levels, so an inner level's
-- shorter ttl (its watchdog, its extend()) must not end the outer level's hold early.
-- KEYS[1] lock hash   KEYS[2] index expiry zset
-- ARGV[1] owner   ARGV[2] fence   ARGV[3] new ttl ms (0: check only)   ARGV[4] lock name
-- returns the hold's remaining PTTL in ms (> 0, at least ttl) when (owner, fence) holds it;
--         -2 when it does not
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
if hold[1] ~= ARGV[1] or hold[2] ~= ARGV[2] then
  return -2
end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  local left = redis.call('PTTL', KEYS[1])
  if left >= ttl then
    return left
  end
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
  return ttl
end
return redis.call('PTTL', KEYS[1])
