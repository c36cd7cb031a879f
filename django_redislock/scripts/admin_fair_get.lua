-- Read one fair lock for the admin (read only; see locking/fair.py and locking/coordindex.py).
-- KEYS[1] lock hash (o=owner token, f=fence, m=holder metadata)   KEYS[2] queue zset (owner
-- token -> arrival number)   KEYS[3] wait-lease zset (owner token -> lease deadline, ms)
-- ARGV[1] most waiters returned
-- returns {server time in ms, owner or "", fence or "", metadata or "", hold PTTL ms (<= 0:
--          not held), waiter count, {token, arrival, lease deadline or "", ...}, live waiters}:
--          the first ARGV[1] waiters in arrival order; live waiters: those whose lease has not
--          lapsed (the waiter count includes lapsed ones not dropped yet)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local hold = redis.call('HMGET', KEYS[1], 'o', 'f', 'm')
local queued = redis.call('ZRANGE', KEYS[2], 0, tonumber(ARGV[1]) - 1, 'WITHSCORES')
local waiters = {}
for i = 1, #queued, 2 do
  waiters[#waiters + 1] = queued[i]
  waiters[#waiters + 1] = queued[i + 1]
  waiters[#waiters + 1] = redis.call('ZSCORE', KEYS[3], queued[i]) or ''
end
return {tostring(now), hold[1] or '', hold[2] or '', hold[3] or '', redis.call('PTTL', KEYS[1]),
  redis.call('ZCARD', KEYS[2]), waiters, redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf')}
