-- Give the units of a reservation back (compensation); a second call for the same id is a no-op.
-- KEYS[1] units string, KEYS[2] meta hash, KEYS[3] buyers set, KEYS[4] reservations hash
-- KEYS[5..11] optional: the order queue's keys (pending, inflight, dead, payload, attempts,
--   errors, signal)
-- ARGV[1] reservation id
-- ARGV[2] "1": the buyer may buy again (leaves the buyers set); "0": the buyer stays marked
-- returns {1 restored or 0 not a live reservation, units left, quantity restored,
--          1 if the order task was still waiting and was dropped}
local record = redis.call('HGET', KEYS[4], ARGV[1])
if not record then return {0, tonumber(redis.call('GET', KEYS[1]) or '0'), 0, 0} end
local qty, _, buyer = string.match(record, '^(%d+):(%d+):(.*)$')
qty = tonumber(qty)
redis.call('HDEL', KEYS[4], ARGV[1])
local left = redis.call('INCRBY', KEYS[1], qty)
redis.call('HINCRBY', KEYS[2], 'restored', qty)
if ARGV[2] == '1' then redis.call('SREM', KEYS[3], buyer) end
local dropped = 0
if #KEYS >= 11 and not redis.call('ZSCORE', KEYS[6], ARGV[1]) then
  -- an order task that has not started yet would order a unit that is back on sale
  if redis.call('ZREM', KEYS[5], ARGV[1]) == 1 then
    redis.call('HDEL', KEYS[8], ARGV[1])
    redis.call('HDEL', KEYS[9], ARGV[1])
    redis.call('HDEL', KEYS[10], ARGV[1])
    dropped = 1
  end
end
return {1, left, qty, dropped}
