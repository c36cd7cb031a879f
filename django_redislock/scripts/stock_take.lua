-- Take units of one stock for one buyer and, in the same step, queue the order task.
-- KEYS[1] units string (units left), KEYS[2] meta hash (opens, closes µs; taken, restored)
-- KEYS[3] buyers set (everyone holding a live reservation of this stock)
-- KEYS[4] reservations hash (reservation id -> "<qty>:<taken at µs>:<buyer>")
-- KEYS[5] this request's key: a take that took records its answer there, so a resent take
--   (same key) answers exactly what the first answered and changes nothing
-- KEYS[6..10] optional: the order queue's keys that an enqueue of one fresh id writes, and only
--   those (pending, payload, signal, enqueue times, rates); they share the stock's hash tag
--   (one slot). The queued order counts as enqueued in the rates; it is queued at level 0.
-- ARGV[1] quantity (>= 1), ARGV[2] buyer id, ARGV[3] reservation id (also the order task's id)
-- ARGV[4] serialized order task payload (ignored without the queue keys)
-- ARGV[5] how long the request's record is kept, in milliseconds
-- ARGV[6..10] optional admission (a rate limit on takes, GCRA, see fragments/gcra.lua): the
--   index in KEYS of the item's admission state (its per-buyer state follows it), then µs
--   between two takes of the item and its burst, then the same for one buyer ("" for none).
--   A take is admitted when both limits admit it; it is charged only when it takes.
-- returns {code, units left, server time µs}: 0 taken, 1 sold out (not enough units),
--   2 the buyer already holds a reservation, 3 the sale has not opened, 4 the sale has ended,
--   5 no such stock (never set), 6 not admitted (a rate limit: the third element is then the
--   µs until it would be); a resend of a take that took answers {0, the same units left,
--   the same time}. A refusal changes nothing but its counter in the meta hash
--   (refused_duplicate, refused_not_open, refused_ended, refused_admission: the admin's
--   per-bucket refusals; sold out is not counted here, it stays one read: the client counts
--   it and flushes every few seconds, inventory/sold_out_counts.py) and records no answer:
--   its resend is simply a new take (counted again). The server time is 0 in the answers
--   that did not need it (sold out, no such stock).
-- Sold out is answered first, from the one read of the units and the request's record (a
-- resent take that took finds its record in that read): two commands, the MGET included,
-- before any window or buyer check, and no Lua of the rates fragment. (A client that saw the
-- stock sold out does not run this script: it reads the units with one GET, see
-- inventory/calls.py.)
local qty = tonumber(ARGV[1])
local got = redis.call('MGET', KEYS[1], KEYS[5])
local units, seen = got[1], got[2]
if seen then
  local left, at = string.match(seen, '^(%d+):(%d+)$')
  return {0, tonumber(left), tonumber(at)}
end
if not units then return {5, 0, 0} end
units = tonumber(units)
if units < qty then return {1, units, 0} end
-- include: rates
-- include: gcra
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
-- the same instant as exact text (concatenating a big Lua number would round it)
local stamp = t[1] .. string.format('%06d', tonumber(t[2]))
local window = redis.call('HMGET', KEYS[2], 'opens', 'closes')
local opens, closes = tonumber(window[1] or '0'), tonumber(window[2] or '0')
if opens > 0 and now < opens then
  redis.call('HINCRBY', KEYS[2], 'refused_not_open', 1)
  return {3, units, now}
end
if closes > 0 and now >= closes then
  redis.call('HINCRBY', KEYS[2], 'refused_ended', 1)
  return {4, units, now}
end
-- the buyer check is the buyer's entry itself: SADD answers 0 for a buyer already in the set
-- (every check that can refuse is above it, so a buyer added here always takes)
local admission = ARGV[6] and ARGV[6] ~= '' and tonumber(ARGV[6])
local admitted = {}
if admission then
  for i = 0, 1 do
    local interval = ARGV[7 + 2 * i]
    if interval ~= '' then
      local key = KEYS[admission + i]
      local ok, tat, wait = gcra(tonumber(redis.call('GET', key)), now, tonumber(interval),
        tonumber(ARGV[8 + 2 * i]), 1)
      if not ok then
        redis.call('HINCRBY', KEYS[2], 'refused_admission', 1)
        return {6, units, wait}
      end
      admitted[#admitted + 1] = {key, tat}
    end
  end
end
if redis.call('SADD', KEYS[3], ARGV[2]) == 0 then
  redis.call('HINCRBY', KEYS[2], 'refused_duplicate', 1)
  return {2, units, now}
end
for _, charge in ipairs(admitted) do
  keep_tat(charge[1], charge[2])
end
local left = redis.call('DECRBY', KEYS[1], qty)
redis.call('HSET', KEYS[4], ARGV[3], ARGV[1] .. ':' .. stamp .. ':' .. ARGV[2])
redis.call('HINCRBY', KEYS[2], 'taken', qty)
redis.call('SET', KEYS[5], string.format('%d:', left) .. stamp, 'PX', ARGV[5])
if #KEYS >= 10 then
  -- what queue_enqueue.lua does for one fresh id with no delay: the reservation id is new,
  -- so it has no attempts, error, claim, priority level or dead letter to clear, and those
  -- keys are not sent
  redis.call('ZADD', KEYS[6], now, ARGV[3])
  redis.call('HSET', KEYS[7], ARGV[3], ARGV[4])
  redis.call('HSET', KEYS[9], ARGV[3], stamp)  -- its enqueue time
  if redis.call('LLEN', KEYS[8]) == 0 then redis.call('LPUSH', KEYS[8], 1) end
  rate_count(KEYS[10], tonumber(t[1]), 'enqueued', 1)
end
return {0, left, now}
