-- Fragment: acknowledge finished tasks (queue_ack.lua, and queue_pop.lua before it claims).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[4] payload hash, KEYS[5] attempts hash,
-- KEYS[6] last-error hash (the queue scripts' key order)
-- ack(ids): ids (at most a few thousand: they are passed to single commands) leave the
-- in-flight set and never come back; returns how many of them were in flight
-- (A newer copy queued with replace=True keeps its data.)
local function ack(ids)
  local flying = redis.call('ZMSCORE', KEYS[2], unpack(ids))
  local queued = redis.call('ZMSCORE', KEYS[1], unpack(ids))
  local done, gone = {}, {}
  for i, id in ipairs(ids) do
    if flying[i] then
      done[#done + 1] = id
      if not queued[i] then gone[#gone + 1] = id end
    end
  end
  if #done > 0 then redis.call('ZREM', KEYS[2], unpack(done)) end
  if #gone > 0 then
    redis.call('HDEL', KEYS[4], unpack(gone))
    redis.call('HDEL', KEYS[5], unpack(gone))
    redis.call('HDEL', KEYS[6], unpack(gone))
  end
  return #done
end
