-- One queue's numbers for the metrics endpoint: counts by state, ages and outcome counters.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] outcome counters hash (written by workers with HINCRBY)
-- KEYS[9] flow hash (pause and rate limit; see the flow fragment)
-- returns {now, due (ready), pending (ready + delayed), in flight, dead,
--          oldest due score or -1, earliest lease deadline or -1, expired leases,
--          1 if paused else 0,
--          then the counters hash as field, value, ...}
-- Every call is O(log n): ZCOUNT/ZCARD and the first member of two zsets, never a scan.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local due = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local lease = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local out = {now, redis.call('ZCOUNT', KEYS[1], '-inf', now), redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), due[2] or -1, lease[2] or -1,
  redis.call('ZCOUNT', KEYS[2], '-inf', now), redis.call('HEXISTS', KEYS[9], 'paused')}
local counters = redis.call('HGETALL', KEYS[8])
for i = 1, #counters do out[#out + 1] = counters[i] end
return out
