-- Take `cost` units of a rate limit (GCRA): now, or, within the caller's longest wait, at the
-- first moment the limit admits them (the units are reserved then: a caller that sleeps until
-- that moment needs no second call, so the rate holds however late callers wake up).
-- KEYS[1] the limit's state: a string, its theoretical arrival time (µs of server time)
-- KEYS[2] this request's key: an admitted take records its admission time there, so a resent
--   take (same key) answers the same admission and charges nothing more (a refusal changes
--   nothing: its resend is simply a new take)
-- ARGV[1] µs between two units, ARGV[2] units admitted at once (burst), ARGV[3] cost (units,
--   at most the burst), ARGV[4] how long the request's record is kept, in milliseconds,
-- ARGV[5] the longest wait the caller accepts, in µs (0: now or not at all)
-- returns {1, µs until the admission (0: now)} admitted (charged); {0, µs until the cost would
--   be admitted} refused, nothing changed
-- The state expires when the limit is idle again (its tat passed), so an unused limit leaves
-- nothing behind.
-- include: gcra
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local seen = redis.call('GET', KEYS[2])
if seen then return {1, math.max(0, tonumber(seen) - now)} end
local interval, burst, cost = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local admitted, tat, wait = gcra(tonumber(redis.call('GET', KEYS[1])), now, interval, burst, cost)
if not admitted then
  if wait > tonumber(ARGV[5]) then return {0, wait} end
  tat = tat + cost * interval  -- the units are reserved at now + wait
end
keep_tat(KEYS[1], tat)
redis.call('SET', KEYS[2], string.format('%d', now + wait), 'PX', ARGV[4])
return {1, wait}
