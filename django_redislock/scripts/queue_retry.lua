-- Give a failed in-flight task another run after a delay, or dead-letter it.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1] id, ARGV[2] delay in microseconds, ARGV[3] error text,
-- ARGV[4] attempts after which the task is dead-lettered
-- returns 1 retried, 2 dead-lettered, 3 dropped because a newer copy is queued,
--         0 not in flight (its lease expired and it was handed out again)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id = ARGV[1]
if redis.call('ZREM', KEYS[2], id) == 0 then return 0 end
if redis.call('ZSCORE', KEYS[1], id) then return 3 end
redis.call('HSET', KEYS[6], id, ARGV[3])
local attempts = tonumber(redis.call('HGET', KEYS[5], id) or '0')
if attempts >= tonumber(ARGV[4]) then
  redis.call('ZADD', KEYS[3], now, id)
  return 2
end
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), id)
if redis.call('LLEN', KEYS[7]) == 0 then redis.call('LPUSH', KEYS[7], 1) end
return 1
