-- Read one semaphore for the admin's lookup page (read only; see locking/semaphore.py).
-- KEYS[1] permits zset (<owner>@<fence> -> deadline ms), KEYS[2] waiters zset (owner ->
-- arrival number), KEYS[3] waiters' leases zset (owner -> deadline ms)
-- ARGV[1] most permits and waiters returned, each
-- returns {server time in ms, permit count, waiter count, {id, deadline, ...},
--          {owner, arrival, lease deadline or "", ...}, live permits, live waiters}: the first
--          ARGV[1] permits by deadline and waiters by arrival; the counts include permits and
--          waiters' places that ended but were not reclaimed yet, the live ones do not
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local most = tonumber(ARGV[1])
local permits = redis.call('ZRANGE', KEYS[1], 0, most - 1, 'WITHSCORES')
local queued = redis.call('ZRANGE', KEYS[2], 0, most - 1, 'WITHSCORES')
local waiters = {}
for i = 1, #queued, 2 do
  waiters[#waiters + 1] = queued[i]
  waiters[#waiters + 1] = queued[i + 1]
  waiters[#waiters + 1] = redis.call('ZSCORE', KEYS[3], queued[i]) or ''
end
return {tostring(now), redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2]), permits,
  waiters, redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf'),
  redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')}
