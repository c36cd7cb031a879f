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
-- ARGV[4] how long the request's record is kept, in milliseconds
-- ARGV[5] with the queue keys only: the serialized order task payload
-- then, optional, admission (a rate limit on takes, GCRA, see fragments/gcra.lua): the index
--   in KEYS of the item's admission state (its per-buyer state follows it), then µs between
--   two takes of the item and its burst, then the same for one buyer ("" for none). A take is
--   admitted when both limits admit it; it is charged only when it takes.
-- returns, by the reply's type (each answer the cheapest the server can send):
--   a string "<units left>:<server time µs>": taken (also the request's record, so a resend
--     of a take that took answers the same string);
--   an integer: sold out (fewer units left than asked for), the units left;
--   {code, units left, third}: 2 the buyer already holds a reservation, 3 the sale has not
--     opened, 4 the sale has ended, 5 no such stock (never set), 6 not admitted (a rate
--     limit: the third element is then the µs until it would be); else the server time µs
--     (0 for no such stock).
--   A refusal changes nothing but its counter in the meta hash (refused_duplicate,
--   refused_not_open, refused_ended, refused_admission: the admin's per-bucket refusals; sold
--   out is not counted here, it stays one read: the client counts it and flushes every few
--   seconds, inventory/sold_out_counts.py) and records no answer: its resend is simply a new
--   take (counted again).
-- Sold out is answered first, from the one read of the units and the request's record (a
-- resent take that took finds its record in that read): two commands, the MGET included,
-- before any window or buyer check. (A client that saw the stock sold out does not run this
-- script: it reads the units with one GET, see inventory/calls.py.)
-- What a call costs at the server is mostly per command sent from Lua and per table built
-- (KEYS, ARGV, an array reply either way): numbers go to commands as the strings they came
-- in, the time stays the text TIME gave, fragments are defined only in the branch that uses
-- them (the rates fragment only when a rate slot holds an older bucket: the order's count
-- runs rate_count's fast path inline), and the hot answers are a string or an integer
-- (docs/seckill.md, "What a take costs at the server").
local got = redis.call('MGET', KEYS[1], KEYS[5])
local units, seen = got[1], got[2]
if seen then return seen end
if not units then return {5, 0, 0} end
units = tonumber(units)
if units < tonumber(ARGV[1]) then return units end
local queued = #KEYS >= 10
local t = redis.call('TIME')
local micros = t[2]
if #micros < 6 then micros = string.rep('0', 6 - #micros) .. micros end
-- the instant as exact text, seconds then six digits (a big Lua number would be rounded)
local stamp = t[1] .. micros
local window = redis.call('HMGET', KEYS[2], 'opens', 'closes')
if window[1] or window[2] then
  local now = tonumber(stamp)
  if now < tonumber(window[1] or '0') then
    redis.call('HINCRBY', KEYS[2], 'refused_not_open', '1')
    return {3, units, now}
  end
  local closes = tonumber(window[2] or '0')
  if closes > 0 and now >= closes then
    redis.call('HINCRBY', KEYS[2], 'refused_ended', '1')
    return {4, units, now}
  end
end
-- the buyer check is the buyer's entry itself: SADD answers 0 for a buyer already in the set
-- (every check that can refuse is above it, so a buyer added here always takes)
local at = queued and 6 or 5
local admission = ARGV[at] and ARGV[at] ~= '' and tonumber(ARGV[at])
local added
if admission then
-- include: gcra
  local now, admitted = tonumber(stamp), {}
  for i = 0, 1 do
    local interval = ARGV[at + 1 + 2 * i]
    if interval ~= '' then
      local key = KEYS[admission + i]
      local ok, tat, wait = gcra(tonumber(redis.call('GET', key)), now, tonumber(interval),
        tonumber(ARGV[at + 2 + 2 * i]), 1)
      if not ok then
        redis.call('HINCRBY', KEYS[2], 'refused_admission', '1')
        return {6, units, wait}
      end
      admitted[#admitted + 1] = {key, tat}
    end
  end
  added = redis.call('SADD', KEYS[3], ARGV[2]) == 1
  if added then
    for _, charge in ipairs(admitted) do keep_tat(charge[1], charge[2]) end
  end
else
  added = redis.call('SADD', KEYS[3], ARGV[2]) == 1
end
if not added then
  redis.call('HINCRBY', KEYS[2], 'refused_duplicate', '1')
  return {2, units, tonumber(stamp)}
end
local left = redis.call('DECRBY', KEYS[1], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[1] .. ':' .. stamp .. ':' .. ARGV[2])
redis.call('HINCRBY', KEYS[2], 'taken', ARGV[1])
local record = string.format('%d:', left) .. stamp
redis.call('SET', KEYS[5], record, 'PX', ARGV[4])
if queued then
  -- what queue_enqueue.lua does for one fresh id with no delay: the reservation id is new,
  -- so it has no attempts, error, claim, priority level or dead letter to clear, and those
  -- keys are not sent
  redis.call('ZADD', KEYS[6], stamp, ARGV[3])
  redis.call('HSET', KEYS[7], ARGV[3], ARGV[5])
  redis.call('HSET', KEYS[9], ARGV[3], stamp)  -- its enqueue time
  if redis.call('LLEN', KEYS[8]) == 0 then redis.call('LPUSH', KEYS[8], '1') end
  -- rate_count's fast path, as in queue_enqueue.lua's one-task path: both rate slots hold
  -- this minute and second (the fragment is built only when one holds an older bucket,
  -- once a second; its functions cost some 5,000 instructions to define)
  local now_s = tonumber(t[1])
  local minute = (now_s - now_s % 60) / 60
  local m, s = 'm' .. minute % 60, 's' .. now_s % 180
  local held = redis.pcall('HMGET', KEYS[10], m, s)
  if held.err then return record end
  if held[2] == t[1] and tonumber(held[1]) == minute then
    redis.call('HINCRBY', KEYS[10], m .. ':enqueued', '1')
    redis.call('HINCRBY', KEYS[10], s .. ':enqueued', '1')
    return record
  end
-- include: rates
  rate_count(KEYS[10], t[1], 'enqueued', '1', held)
end
return record
