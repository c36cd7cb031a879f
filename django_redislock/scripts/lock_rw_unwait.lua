-- Withdraw what a waiting writer left when it stops waiting without the lock (timed out,
-- cancelled): its intent, which refuses new readers, and its entry in the waiters zset.
-- The waiting readers and writers are woken, since the intent may have been all that kept
-- them out. Safe to resend: a second call finds nothing of this writer and changes nothing.
-- KEYS[1] waiting writer's intent   KEYS[2] reader wake-up signal   KEYS[3] writer wake-up signal
-- KEYS[4] waiters zset shared with the mutex of the name
-- ARGV[1] writer owner (unique per acquire call)   ARGV[2] signal lifetime ms
-- returns 1 when this writer's intent was removed, 0 when it was not there (expired, or
--         another writer's)
redis.call('ZREM', KEYS[4], ARGV[1])
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
redis.call('DEL', KEYS[1])
for i = 2, 3 do
  redis.call('LPUSH', KEYS[i], 1)
  redis.call('LTRIM', KEYS[i], 0, 0)
  redis.call('PEXPIRE', KEYS[i], ARGV[2])
end
return 1
