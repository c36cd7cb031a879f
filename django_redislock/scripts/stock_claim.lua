-- Claim a buyer in (or release it from) its home bucket of a sharded stock (inventory/shards.py).
-- A buyer whose home bucket is sold out is claimed there before it takes from another bucket,
-- so the home bucket's buyers set stays the one place that says whether the buyer bought: a
-- second take of that buyer (at once, or later from yet another bucket) finds it there.
-- KEYS[1] units string, KEYS[2] meta hash, KEYS[3] buyers set, KEYS[4] reservations hash
--   (the buyers set is changed, and a refused claim counts in the meta hash's
--   refused_duplicate; all four are declared as every stock script's are)
-- KEYS[5] this request's key: the call records its answer there, so a resent call (same key)
--   answers exactly what the first answered and changes nothing
-- ARGV[1] buyer id
-- ARGV[2] "claim": add the buyer to the set; "release": remove it
-- ARGV[3] how long the request's record is kept, in milliseconds
-- returns 1 when the set changed (claimed: the buyer was not in it; released: it was),
--   0 otherwise (a claim of a buyer already in the set: that buyer already bought)
local seen = redis.call('GET', KEYS[5])
if seen then return tonumber(seen) end
local done
if ARGV[2] == 'claim' then
  done = redis.call('SADD', KEYS[3], ARGV[1])
  if done == 0 then redis.call('HINCRBY', KEYS[2], 'refused_duplicate', 1) end
else
  done = redis.call('SREM', KEYS[3], ARGV[1])
end
redis.call('SET', KEYS[5], done, 'PX', ARGV[3])
return done
