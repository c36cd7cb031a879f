-- The admin overview row of one queue: counts by state and the oldest due task and lease.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] flow hash (pause and rate limit; see the flow fragment)
-- returns {now, due (ready), pending (ready + delayed), in flight, dead,
--          oldest due score or -1, earliest lease deadline or -1, expired leases,
--          1 if paused else 0, the rate limit as written or ""}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local due = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local lease = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local flow = redis.call('HMGET', KEYS[8], 'paused', 'rate')
return {now, redis.call('ZCOUNT', KEYS[1], '-inf', now), redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), due[2] or -1, lease[2] or -1,
  redis.call('ZCOUNT', KEYS[2], '-inf', now), flow[1] and 1 or 0, flow[2] or ''}
