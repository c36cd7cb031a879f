-- Delete a stock: its units, window and counters, buyers and reservations (not queued tasks).
-- KEYS[1] units string, KEYS[2] meta hash, KEYS[3] buyers set, KEYS[4] reservations hash
-- KEYS[5] this request's key: a clear that deleted records it there, so a resent clear (same
--   key) answers 1 again and deletes nothing (not a stock set again in between)
-- ARGV[1] how long the request's record is kept, in milliseconds
-- ARGV[2] optional: the stock-changes channel; a clear that deleted publishes the units key
--   there (inventory/sold_out.py)
-- returns 1 if the stock existed (any of its keys), 0 if there was nothing to delete
if redis.call('EXISTS', KEYS[5]) == 1 then return 1 end
local deleted = redis.call('DEL', KEYS[1], KEYS[2], KEYS[3], KEYS[4])
if deleted == 0 then return 0 end
redis.call('SET', KEYS[5], '1', 'PX', ARGV[1])
if ARGV[2] then redis.call('PUBLISH', ARGV[2], KEYS[1]) end
return 1
