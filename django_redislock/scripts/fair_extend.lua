-- Renew a fair lock's hold for ttl (or, with ttl 0, only check it is still held); the
-- deadline only moves later.
-- KEYS[1] lock hash   KEYS[2] the bucket's coordination index (see fair_acquire.lua): its
-- entry for KEYS[1] moves with the new deadline
-- ARGV[1] owner token   ARGV[2] fence   ARGV[3] new ttl ms (0: check only)
-- returns the hold's remaining PTTL in ms (> 0) when (token, fence) holds it; -2 when not
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
if hold[1] ~= ARGV[1] or hold[2] ~= ARGV[2] then
  return -2
end
local ttl = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[1])
if ttl > left then
  redis.call('PEXPIRE', KEYS[1], ttl)
  local t = redis.call('TIME')
  redis.call('ZADD', KEYS[2], 'GT', t[1] * 1000 + math.floor(t[2] / 1000) + ttl, KEYS[1])
  return ttl
end
return left
