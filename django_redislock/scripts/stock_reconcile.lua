-- Check one stock's books against its reservation records, and with ARGV[1] = "1" fix them.
-- The records are the truth: every live reservation is "<qty>:<taken at µs>:<buyer>", so the
-- units sold and not given back must equal the sum of their quantities (taken - restored), and
-- every buyer holding one must be in the buyers set (or that buyer could buy twice). A fix sets
-- the `taken` counter to restored + that sum and adds the missing buyers; units are not
-- touched (how many there should be depends on how many were put on sale, which only the
-- caller knows). O(live reservations) in one script: run it when the sale is quiet.
-- KEYS[1] units string, KEYS[2] meta hash, KEYS[3] buyers set, KEYS[4] reservations hash
-- ARGV[1] "1": fix the drift found; "0": only report it
-- returns {1 if the stock exists else 0, units left, taken, restored, units in live
--          reservations, live reservations, buyers, buyers missing from the set,
--          undecodable records, 1 if something was fixed}
local units = redis.call('GET', KEYS[1])
if not units then return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0} end
local meta = redis.call('HMGET', KEYS[2], 'taken', 'restored')
local taken, restored = tonumber(meta[1] or '0'), tonumber(meta[2] or '0')
local records = redis.call('HVALS', KEYS[4])
local reserved, bad, missing = 0, 0, {}
for _, record in ipairs(records) do
  local qty, _, buyer = string.match(record, '^(%d+):(%d+):(.*)$')
  if qty then
    reserved = reserved + tonumber(qty)
    if redis.call('SISMEMBER', KEYS[3], buyer) == 0 then missing[#missing + 1] = buyer end
  else
    bad = bad + 1
  end
end
local fixed = 0
if ARGV[1] == '1' then
  if taken - restored ~= reserved then
    redis.call('HSET', KEYS[2], 'taken', restored + reserved)
    fixed = 1
  end
  for _, buyer in ipairs(missing) do
    redis.call('SADD', KEYS[3], buyer)
    fixed = 1
  end
end
return {1, tonumber(units), taken, restored, reserved, #records, redis.call('SCARD', KEYS[3]),
  #missing, bad, fixed}
