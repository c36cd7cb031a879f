-- Give the units of a reservation back (compensation); a second call for the same id is a no-op.
-- KEYS[1] units string, KEYS[2] meta hash, KEYS[3] buyers set, KEYS[4] reservations hash
-- KEYS[5] this request's key: a restore that restored records its answer there, so a resent
--   restore (same key) answers exactly what the first answered (1) and changes nothing
-- KEYS[6..16] optional: the order queue's keys (pending, inflight, dead, payload, attempts,
--   errors, signal, claims, priority index, levels, enqueue times)
-- ARGV[1] reservation id
-- ARGV[2] "1": the buyer may buy again (leaves the buyers set); "0": the buyer stays marked
-- ARGV[3] how long the request's record is kept, in milliseconds
-- ARGV[4] optional: the stock-changes channel; a restore publishes the units key there (the
--   processes that remember the stock sold out forget it: inventory/sold_out.py)
-- returns {1 restored or 0 not a live reservation, units left, quantity restored,
--          1 if the order task was dropped (waiting, in flight or dead-lettered)}
local seen = redis.call('GET', KEYS[5])
if seen then
  local left, qty, dropped = string.match(seen, '^(%d+):(%d+):(%d)$')
  return {1, tonumber(left), tonumber(qty), tonumber(dropped)}
end
local record = redis.call('HGET', KEYS[4], ARGV[1])
if not record then return {0, tonumber(redis.call('GET', KEYS[1]) or '0'), 0, 0} end
local qty, _, buyer = string.match(record, '^(%d+):(%d+):(.*)$')
qty = tonumber(qty)
redis.call('HDEL', KEYS[4], ARGV[1])
local left = redis.call('INCRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[2], 'restored', qty)
if ARGV[2] == '1' then redis.call('SREM', KEYS[3], buyer) end
local dropped = 0
if #KEYS >= 13 then
  -- the order task of a unit that is back on sale must never make an order: drop it whether
  -- it waits (pending), was claimed (inflight: the running attempt's ack and retry then find
  -- nothing, and its lease can never hand it out again) or was dead-lettered (a requeue_dead
  -- would order a unit that may have been sold again)
  local removed = redis.call('ZREM', KEYS[6], ARGV[1]) + redis.call('ZREM', KEYS[7], ARGV[1])
    + redis.call('ZREM', KEYS[8], ARGV[1])
  if removed > 0 then
    redis.call('HDEL', KEYS[9], ARGV[1])
    redis.call('HDEL', KEYS[10], ARGV[1])
    redis.call('HDEL', KEYS[11], ARGV[1])
    redis.call('HDEL', KEYS[13], ARGV[1])  -- a claim of it, so no field outlives the task
    if #KEYS >= 16 then redis.call('HDEL', KEYS[16], ARGV[1]) end  -- its enqueue time
    dropped = 1
  end
end
redis.call('SET', KEYS[5], string.format('%d:%d:%d', left, qty, dropped), 'PX', ARGV[3])
if ARGV[4] then redis.call('PUBLISH', ARGV[4], KEYS[1]) end
return {1, left, qty, dropped}
