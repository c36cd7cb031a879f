-- Set or add the units of a stock and, when given, its sale window.
-- KEYS[1] units string, KEYS[2] meta hash (opens, closes µs; taken, restored)
-- KEYS[3], KEYS[4] the stock's buyers set and reservations hash (not touched)
-- KEYS[5] this request's key: a call that changed the stock records its answer there, so a
--   resent call (same key) answers exactly what the first answered and changes nothing (a
--   resent "add" does not add twice; a resent "set" does not undo takes made in between)
-- ARGV[1] "set": units become ARGV[2]; "add": ARGV[2] is added to an existing stock
-- ARGV[2] units (>= 0 for set, >= 1 for add)
-- ARGV[3] opens µs since the epoch ("" keeps the current value, "0" no start)
-- ARGV[4] closes µs since the epoch ("" keeps the current value, "0" no end)
-- ARGV[5] how long the request's record is kept, in milliseconds
-- ARGV[6] optional: the stock-changes channel; a call that changed the stock publishes the
--   units key there (inventory/sold_out.py)
-- returns units left after the change, or -1 for "add" on a stock that was never set, or -2
--   (nothing changed) when the window would close before it opens (a bound given here
--   against the one kept)
local seen = redis.call('GET', KEYS[5])
if seen then return tonumber(seen) end
if ARGV[3] ~= ARGV[4] and (ARGV[3] == '' or ARGV[4] == '') then
  local opens = ARGV[3] ~= '' and ARGV[3] or redis.call('HGET', KEYS[2], 'opens') or '0'
  local closes = ARGV[4] ~= '' and ARGV[4] or redis.call('HGET', KEYS[2], 'closes') or '0'
  local o, c = tonumber(opens), tonumber(closes)
  if o > 0 and c > 0 and c <= o then return -2 end
end
local units
if ARGV[1] == 'add' then
  if redis.call('EXISTS', KEYS[1]) == 0 then return -1 end
  units = redis.call('INCRBY', KEYS[1], tonumber(ARGV[2]))
else
  redis.call('SET', KEYS[1], ARGV[2])
  units = tonumber(ARGV[2])
end
if ARGV[3] ~= '' then redis.call('HSET', KEYS[2], 'opens', ARGV[3]) end
if ARGV[4] ~= '' then redis.call('HSET', KEYS[2], 'closes', ARGV[4]) end
redis.call('SET', KEYS[5], string.format('%d', units), 'PX', ARGV[5])
if ARGV[6] then redis.call('PUBLISH', ARGV[6], KEYS[1]) end
return units
