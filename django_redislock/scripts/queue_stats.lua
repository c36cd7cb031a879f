-- Counts of a queue by state, without scanning (ZCOUNT / ZCARD only).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash, KEYS[9..10] the priority keys (all three unused), KEYS[11] flow hash (see the flow fragment)
-- returns {now, due (ready), pending (ready + delayed), in flight, dead,
--          oldest due score or -1, in-flight tasks whose lease has expired,
--          1 if paused else 0, the rate limit as written or ""}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local flow = redis.call('HMGET', KEYS[11], 'paused', 'rate')
return {now, redis.call('ZCOUNT', KEYS[1], '-inf', now), redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), first[2] or -1,
  redis.call('ZCOUNT', KEYS[2], '-inf', now), flow[1] and 1 or 0, flow[2] or ''}
