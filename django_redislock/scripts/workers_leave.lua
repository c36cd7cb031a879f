-- A worker that stops cleanly leaves the registry at once.
-- KEYS[1] index zset (worker id -> expiry)   KEYS[2] records hash (worker id -> record)
-- ARGV[1] worker id
-- returns 1 when the worker was registered, 0 when it was not (already gone, or a resend)
redis.call('HDEL', KEYS[2], ARGV[1])
return redis.call('ZREM', KEYS[1], ARGV[1])
