-- Renew a mutex or reentrant hold for ttl (or, with ttl 0, only check it is still held).
-- The deadline only moves later: a reentrant hold is shared by its levels, so an inner level's
-- shorter ttl (its watchdog, its extend()) must not end the outer level's hold early. The
-- levels named in ARGV[5..] (the renewing object's own) move their recorded deadlines to
-- now + ttl, never earlier, so that their release sets the hold back to what the levels
-- left still need (see lock_acquire.lua, lock_release.lua).
-- KEYS[1] lock hash   KEYS[2] index expiry zset
-- ARGV[1] owner   ARGV[2] fence   ARGV[3] new ttl ms (0: check only)   ARGV[4] lock name
-- ARGV[5..] (optional) the request ids of the renewing object's levels; when none of them is
--          held any more (a watchdog renewal that arrives after its object's last release of
--          an inner level), nothing moves: the levels left keep the deadline they asked for
-- returns the hold's remaining PTTL in ms (> 0; at least ttl unless the named levels are all
--         gone) when (owner, fence) holds it; -2 when it does not
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
if hold[1] ~= ARGV[1] or hold[2] ~= ARGV[2] then
  return -2
end
local ttl = tonumber(ARGV[3])
if ttl > 0 then
  local now
  if #ARGV > 4 then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
    local live = 0
    for i = 5, #ARGV do
      local field = '@' .. ARGV[i]
      local deadline = redis.call('HGET', KEYS[1], field)
      -- a level released meanwhile (a renewal racing its release) is not recorded again
      if deadline then
        live = live + 1
        if tonumber(deadline) < now + ttl then
          redis.call('HSET', KEYS[1], field, now + ttl)
        end
      end
    end
    if live == 0 then
      return redis.call('PTTL', KEYS[1])
    end
  end
  local left = redis.call('PTTL', KEYS[1])
  if left >= ttl then
    return left
  end
  if not now then
    local t = redis.call('TIME')
    now = t[1] * 1000 + math.floor(t[2] / 1000)
  end
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('ZADD', KEYS[2], now + ttl, ARGV[4])
  return ttl
end
return redis.call('PTTL', KEYS[1])
