-- End every hold on a lock name, whoever owns it, bump the bucket's fence and wake all waiters.
-- KEYS[1] lock hash   KEYS[2] rw writer hash   KEYS[3] rw readers zset   KEYS[4] rw reader metadata
-- KEYS[5] rw writer intent   KEYS[6] mutex signal   KEYS[7] reader signal   KEYS[8] writer signal
-- KEYS[9] bucket fence   KEYS[10] index names   KEYS[11] index expiry
-- ARGV[1] lock name   ARGV[2] signal lifetime ms
-- ARGV[3] expected fence of the hold ("": release whatever is held; for readers, the latest
--         reader's fence), so that a confirmation made against one hold cannot end a newer one
-- returns the number of lock structures deleted (0: nothing was held); -1 when ARGV[3] is set
--         and the hold's fence is not ARGV[3] (nothing was changed)
if ARGV[3] ~= '' then
  local fence = redis.call('HGET', KEYS[1], 'f') or redis.call('HGET', KEYS[2], 'f')
    or redis.call('HGET', KEYS[4], 'f')
  if fence ~= ARGV[3] then
    return -1
  end
end
local ended = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3])
redis.call('DEL', KEYS[4], KEYS[5])
redis.call('INCR', KEYS[9])
redis.call('ZREM', KEYS[10], ARGV[1])
redis.call('ZREM', KEYS[11], ARGV[1])
if ended > 0 then
  for i = 6, 8 do
    redis.call('LPUSH', KEYS[i], 1)
    redis.call('LTRIM', KEYS[i], 0, 0)
    redis.call('PEXPIRE', KEYS[i], ARGV[2])
  end
end
return ended
