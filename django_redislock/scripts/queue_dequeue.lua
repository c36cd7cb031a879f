-- Remove a queued task only if its score still matches.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1] id, ARGV[2] the score the caller saw (from top() or enqueue)
-- returns 1 removed, 0 not queued or rescheduled since (stale score)
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then return 0 end
redis.call('ZREM', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[9], ARGV[1])
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) then
  redis.call('HDEL', KEYS[4], ARGV[1])
  redis.call('HDEL', KEYS[5], ARGV[1])
  redis.call('HDEL', KEYS[6], ARGV[1])
  redis.call('HDEL', KEYS[8], ARGV[1])
  redis.call('HDEL', KEYS[10], ARGV[1])
  redis.call('HDEL', KEYS[11], ARGV[1])
end
return 1
