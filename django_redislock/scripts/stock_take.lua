-- Take units of one stock for one buyer and, in the same step, queue the order task.
-- KEYS[1] units string (units left), KEYS[2] meta hash (opens, closes µs; taken, restored)
-- KEYS[3] buyers set (everyone holding a live reservation of this stock)
-- KEYS[4] reservations hash (reservation id -> "<qty>:<taken at µs>:<buyer>")
-- KEYS[5] this request's key: a take that took records its answer there, so a resent take
--   (same key) answers exactly what the first answered and changes nothing (absent in a probe)
-- KEYS[6..16] optional: the order queue's keys in the queue scripts' order (pending, inflight,
--   dead, payload, attempts, errors, signal, claims, priority index, levels, enqueue times);
--   they share the stock's hash tag (one slot); KEYS[17] the order queue's rates hash (the queued order
--   counts as enqueued; order tasks are queued at level 0)
-- ARGV[1] quantity (>= 1), ARGV[2] buyer id, ARGV[3] reservation id (also the order task's id;
--   "" for a probe: a client that saw this stock sold out asks before it builds a take)
-- ARGV[4] serialized order task payload (ignored without the queue keys)
-- ARGV[5] how long the request's record is kept, in milliseconds
-- returns {code, units left, server time µs}: 0 taken, 1 sold out (not enough units),
--   2 the buyer already holds a reservation, 3 the sale has not opened, 4 the sale has ended,
--   5 no such stock (never set), 6 (a probe only) enough units: send the take; a resend of a
--   take that took answers {0, the same units left, the same time}. A refusal changes nothing
--   and records nothing: its resend is simply a new take. The server time is 0 in the answers
--   that did not need it (sold out, no such stock, a probe).
-- Sold out is answered first, from the one read of the units and the request's record (a
-- resent take that took finds its record in that read): two commands, the MGET included,
-- before any window or buyer check, and no Lua of the rates fragment.
local qty = tonumber(ARGV[1])
local probe = ARGV[3] == ''
local units, seen
if probe then
  units = redis.call('GET', KEYS[1])
else
  local got = redis.call('MGET', KEYS[1], KEYS[5])
  units, seen = got[1], got[2]
end
if seen then
  local left, at = string.match(seen, '^(%d+):(%d+)$')
  return {0, tonumber(left), tonumber(at)}
end
if not units then return {5, 0, 0} end
units = tonumber(units)
if units < qty then return {1, units, 0} end
if probe then return {6, units, 0} end
-- include: rates
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- the same instant as exact text (concatenating a big Lua number would round it)
local stamp = t[1] .. string.format('%06d', tonumber(t[2]))
local window = redis.call('HMGET', KEYS[2], 'opens', 'closes')
local opens, closes = tonumber(window[1] or '0'), tonumber(window[2] or '0')
if opens > 0 and now < opens then return {3, units, now} end
if closes > 0 and now >= closes then return {4, units, now} end
if redis.call('SISMEMBER', KEYS[3], ARGV[2]) == 1 then return {2, units, now} end
local left = redis.call('DECRBY', KEYS[1], qty)
redis.call('SADD', KEYS[3], ARGV[2])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[1] .. ':' .. stamp .. ':' .. ARGV[2])
redis.call('HINCRBY', KEYS[2], 'taken', qty)
redis.call('SET', KEYS[5], string.format('%d:', left) .. stamp, 'PX', ARGV[5])
if #KEYS >= 13 then
  -- what queue_enqueue.lua does for one fresh id with no delay: the reservation id is new,
  -- so it has no attempts, error or dead letter to clear
  redis.call('ZADD', KEYS[6], now, ARGV[3])
  redis.call('HSET', KEYS[9], ARGV[3], ARGV[4])
  if #KEYS >= 16 then redis.call('HSET', KEYS[16], ARGV[3], stamp) end  -- its enqueue time
  if redis.call('LLEN', KEYS[12]) == 0 then redis.call('LPUSH', KEYS[12], 1) end
  if #KEYS >= 17 then rate_count(KEYS[17], tonumber(t[1]), 'enqueued', 1) end
end
return {0, left, now}
