-- Renew a semaphore permit for ttl (or, with ttl 0, only check that it is held). As for the
-- mutex (lock_extend.lua), the deadline only moves later.
-- KEYS[1] permits zset (member "<owner>@<fence>" -> deadline ms, server clock)
-- KEYS[2] the bucket's coordination index (see semaphore_acquire.lua): its entry for KEYS[1]
--         moves with the new deadline
-- ARGV[1] the permit's member   ARGV[2] new ttl ms (0: check only)
-- returns the permit's remaining time in ms (> 0; at least ttl) when held; -2 when it is not
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not deadline or tonumber(deadline) <= now then
  return -2
end
local ttl = tonumber(ARGV[2])
if tonumber(deadline) - now >= ttl then
  return tonumber(deadline) - now
end
redis.call('ZADD', KEYS[1], now + ttl, ARGV[1])
redis.call('ZADD', KEYS[2], 'GT', now + ttl, KEYS[1])
local last = tonumber(redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIRE', KEYS[1], last - now)
return ttl
