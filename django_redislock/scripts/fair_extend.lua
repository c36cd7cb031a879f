-- Renew a fair lock's hold for ttl (or, with ttl 0, only check it is still held); the
-- deadline only moves later.
-- KEYS[1] lock hash   ARGV[1] owner token   ARGV[2] fence   ARGV[3] new ttl ms (0: check only)
-- returns the hold's remaining PTTL in ms (> 0) when (token, fence) holds it; -2 when not
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
if hold[1] ~= ARGV[1] or hold[2] ~= ARGV[2] then
  return -2
end
local ttl = tonumber(ARGV[3])
local left = redis.call('PTTL', KEYS[1])
if ttl > left then
  redis.call('PEXPIRE', KEYS[1], ttl)
  return ttl
end
return left
