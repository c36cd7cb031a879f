-- One bucket's coordination index for the admin and the metrics: the semaphores and fair locks
-- with a permit, a hold or a waiter's lease that may still be live; entries past their
-- deadline are pruned first (their holds and leases have all ended).
-- KEYS[1] the bucket's coordination index (zset: a primitive's main key -> latest deadline, ms)
-- ARGV[1] most entries returned   ARGV[2] most stale entries pruned
-- returns {now_ms, live entries, key1, deadline1, key2, deadline2, ...}, soonest deadline first
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local stale = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[2]))
if #stale > 0 then
  redis.call('ZREM', KEYS[1], unpack(stale))
end
local out = {now, redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf')}
if tonumber(ARGV[1]) > 0 then
  local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0,
    tonumber(ARGV[1]))
  for _, value in ipairs(live) do
    out[#out + 1] = value
  end
end
return out
