-- Set or add the units of a stock and, when given, its sale window.
-- KEYS[1] units string, KEYS[2] meta hash (opens, closes µs; taken, restored)
-- ARGV[1] "set": units become ARGV[2]; "add": ARGV[2] is added to an existing stock
-- ARGV[2] units (>= 0 for set, >= 1 for add)
-- ARGV[3] opens µs since the epoch ("" keeps the current value, "0" no start)
-- ARGV[4] closes µs since the epoch ("" keeps the current value, "0" no end)
-- returns units left after the change, or -1 for "add" on a stock that was never set
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
return units
