-- End every hold on a lock name, whoever owns it, bump the bucket's fence and wake all waiters.
-- KEYS[1] lock hash   KEYS[2] rw writer hash   KEYS[3] rw readers zset   KEYS[4] rw writer intent
-- KEYS[5] mutex signal   KEYS[6] reader signal   KEYS[7] writer signal   KEYS[8] bucket fence
-- KEYS[9] index names   KEYS[10] index expiry   KEYS[11] index metadata   KEYS[12] index counts
-- ARGV[1] lock name   ARGV[2] signal lifetime ms
-- returns the number of lock structures deleted (0: nothing was held)
local ended = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('DEL', KEYS[4])
redis.call('INCR', KEYS[8])
redis.call('ZREM', KEYS[9], ARGV[1])
redis.call('ZREM', KEYS[10], ARGV[1])
redis.call('HDEL', KEYS[11], ARGV[1])
redis.call('HDEL', KEYS[12], ARGV[1])
if ended > 0 then
  for i = 5, 7 do
    redis.call('LPUSH', KEYS[i], 1)
    redis.call('LTRIM', KEYS[i], 0, 0)
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return ended
