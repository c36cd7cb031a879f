-- Count a count-down latch down by one; at zero, open it: every waiter wakes at once.
-- Safe to resend: each count-down carries a request id, recorded in the latch's hash, so a
-- resent one is answered as the first time and counted once.
-- KEYS[1] latch hash (n=remaining count, r:<request id>=1 per applied count-down)
-- KEYS[2] the latch's wake-up list (one element once open; waiters rotate it, keep=True)
-- KEYS[3] the bucket's coordination index (zset: KEYS[1] -> the latch's expiry, ms; see
--         locking/coordindex.py)
-- ARGV[1] initial count (used when the latch does not exist yet)   ARGV[2] request id
-- ARGV[3] the latch's lifetime ms (from its latest change)
-- returns {code, remaining}: code 1 counted, 2 a resend (counted before), 0 already open
--         (nothing counted)
local n = tonumber(redis.call('HGET', KEYS[1], 'n') or ARGV[1])
local field = 'r:' .. ARGV[2]
if redis.call('HEXISTS', KEYS[1], field) == 1 then
  return {2, n}
end
if n <= 0 then
  return {0, 0}
end
n = n - 1
redis.call('HSET', KEYS[1], 'n', n, field, 1)
redis.call('PEXPIRE', KEYS[1], ARGV[3])
local t = redis.call('TIME')
redis.call('ZADD', KEYS[3], t[1] * 1000 + math.floor(t[2] / 1000) + tonumber(ARGV[3]), KEYS[1])
if n == 0 then
  redis.call('DEL', KEYS[2])
  redis.call('LPUSH', KEYS[2], 1)
  redis.call('PEXPIRE', KEYS[2], ARGV[3])
end
return {1, n}
