-- Give claimed but unstarted tasks back at once (a worker that is stopping).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1..] pairs: id, the due score it had before it was claimed
-- returns how many were given back (the claim does not count as an attempt)
local released = 0
for i = 1, #ARGV, 2 do
  local id = ARGV[i]
  if redis.call('ZREM', KEYS[2], id) == 1 then
    released = released + 1
    redis.call('HINCRBY', KEYS[5], id, -1)
    if not redis.call('ZSCORE', KEYS[1], id) then
      redis.call('ZADD', KEYS[1], ARGV[i + 1], id)
    end
  end
end
if released > 0 then
  if redis.call('LLEN', KEYS[7]) == 0 then redis.call('LPUSH', KEYS[7], 1) end
end
return released
