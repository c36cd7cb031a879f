-- One queue's numbers: counts by state, the oldest due task, the earliest lease, pause and
-- rate limit, and the outcome counters. Counts and first members of sorted sets only, never
-- a scan: O(log n) however many tasks the queue holds.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4..11] payload hash, attempts hash, last-error hash, signal list, claims hash, the
--             two priority keys and the enqueue times (unused: the order every queue script
--             takes its keys in)
-- KEYS[12] flow hash (pause and rate limit; see the flow fragment)
-- KEYS[13] outcome counters hash (written by workers with HINCRBY)
-- KEYS[14] the concurrency groups' held tasks zset (see the groups fragment)
-- ARGV the outcome counters to read (fields of KEYS[13]); none for a summary without them
-- returns {now (microseconds), due (ready), pending (ready + delayed), in flight, dead,
--          first pending score or -1, earliest lease deadline or -1, expired leases,
--          1 if paused else 0, the rate limit as written or "", the tasks groups hold,
--          then the value of each counter named in ARGV, 0 when unset}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
local lease = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
local flow = redis.call('HMGET', KEYS[12], 'paused', 'rate')
local out = {now, redis.call('ZCOUNT', KEYS[1], '-inf', now), redis.call('ZCARD', KEYS[1]),
  redis.call('ZCARD', KEYS[2]), redis.call('ZCARD', KEYS[3]), first[2] or -1, lease[2] or -1,
  redis.call('ZCOUNT', KEYS[2], '-inf', now), flow[1] and 1 or 0, flow[2] or '',
  redis.call('ZCARD', KEYS[14])}
if #ARGV > 0 then
  local counters = redis.call('HMGET', KEYS[13], unpack(ARGV))
  for i = 1, #ARGV do out[#out + 1] = counters[i] or 0 end
end
return out
