-- Move dead-lettered tasks back to the ready set with fresh attempts.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1] at most this many (oldest deaths first) when no ids are given
-- ARGV[2..] task ids (optional)
-- returns how many were requeued (their last error is kept for the record)
-- include: priority
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local ids = {}
if #ARGV > 1 then
  for i = 2, #ARGV do ids[#ids + 1] = ARGV[i] end
else
  ids = redis.call('ZRANGE', KEYS[3], 0, tonumber(ARGV[1]) - 1)
end
local moved = 0
for _, id in ipairs(ids) do
  if redis.call('ZREM', KEYS[3], id) == 1 then
    moved = moved + 1
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[8], id)
    if not redis.call('ZSCORE', KEYS[1], id) then
      redis.call('ZADD', KEYS[1], now, id)
      prio_back(id, now)
    end
  end
end
if moved > 0 then
  if redis.call('LLEN', KEYS[7]) == 0 then redis.call('LPUSH', KEYS[7], 1) end
end
return moved
