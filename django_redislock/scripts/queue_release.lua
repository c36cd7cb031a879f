-- Give claimed but unstarted tasks back at once (a worker that is stopping).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1..] triples: id, claim token ("" for whatever claim is current), the due score it had
-- before it was claimed
-- returns how many were given back (an attempt recorded for the claim is given back too);
-- a claim that is no longer current changes nothing
-- include: claims
-- include: priority
local released = 0
for i = 1, #ARGV - 2, 3 do
  local id = ARGV[i]
  local v = holder(id, ARGV[i + 1])
  if v then
    released = released + 1
    redis.call('ZREM', KEYS[2], id)
    redis.call('HDEL', KEYS[8], id)
    if started(v) and tonumber(redis.call('HGET', KEYS[5], id) or '0') > 0 then
      redis.call('HINCRBY', KEYS[5], id, -1)
    end
    redis.call('ZADD', KEYS[1], ARGV[i + 2], id)
    prio_back(id, ARGV[i + 2])
  end
end
if released > 0 then
  if redis.call('LLEN', KEYS[7]) == 0 then redis.call('LPUSH', KEYS[7], 1) end
end
return released
