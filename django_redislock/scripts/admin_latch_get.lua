-- Read one count-down latch for the admin (read only; see locking/latch.py).
-- KEYS[1] latch hash (n=remaining count)   KEYS[2] waiters zset (id -> lease deadline, ms)
-- ARGV[1] most waiters returned
-- returns {server time in ms, remaining count or "" (no such latch), latch PTTL ms,
--          {id, lease deadline, ...}, live waiters}: the first ARGV[1] waiters by lease
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local waiters = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0,
  tonumber(ARGV[1]))
return {tostring(now), redis.call('HGET', KEYS[1], 'n') or '', redis.call('PTTL', KEYS[1]),
  waiters, redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')}
