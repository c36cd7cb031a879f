-- Read a count-down latch's remaining count, creating the latch with its initial count when
-- it does not exist yet (so every later reader and waiter sees the same count); a waiter's
-- read also records it in the latch's waiters (for the admin), with a lease, until it opens.
-- KEYS[1] latch hash (n=remaining count)
-- KEYS[2] the latch's waiters zset (waiter id -> lease deadline, ms, server clock)
-- KEYS[3] the bucket's coordination index (zset: KEYS[1] -> the latch's expiry or the latest
--         waiter's lease, ms; see locking/coordindex.py)
-- ARGV[1] initial count   ARGV[2] the latch's lifetime ms (set when it is created)
-- ARGV[3] waiter id ("": a plain read)   ARGV[4] the waiter's lease ms
-- returns the remaining count (0: open)
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local n = redis.call('HGET', KEYS[1], 'n')
if n then
  n = tonumber(n)
else
  n = tonumber(ARGV[1])
  redis.call('HSET', KEYS[1], 'n', n)
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('ZADD', KEYS[3], 'GT', now + tonumber(ARGV[2]), KEYS[1])
end
if ARGV[3] ~= '' then
  if n > 0 then
    local lease = tonumber(ARGV[4])
    redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)  -- waiters whose lease lapsed
    redis.call('ZADD', KEYS[2], now + lease, ARGV[3])
    local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
    redis.call('PEXPIRE', KEYS[2], last - now)  -- as long as the latest lease, no longer
    redis.call('ZADD', KEYS[3], 'GT', now + lease, KEYS[1])
  else
    redis.call('ZREM', KEYS[2], ARGV[3])
  end
end
return n
