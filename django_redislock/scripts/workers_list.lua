-- The live workers of an alias (read only): those whose expiry is still ahead.
-- KEYS[1] index zset (worker id -> expiry, µs)   KEYS[2] records hash (worker id -> record)
-- ARGV[1] most workers to return
-- returns {now µs, live count, id1, record1, id2, record2, ...}; a record is
--         "<heartbeat µs>:<JSON>", or false when it is missing (its worker left meanwhile)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local after = '(' .. string.format('%d', now)
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], after, '+inf', 'LIMIT', 0, tonumber(ARGV[1]))
local out = {now, redis.call('ZCOUNT', KEYS[1], after, '+inf')}
if #ids > 0 then
  local records = redis.call('HMGET', KEYS[2], unpack(ids))
  for i, id in ipairs(ids) do
    out[#out + 1] = id
    out[#out + 1] = records[i]
  end
end
return out
