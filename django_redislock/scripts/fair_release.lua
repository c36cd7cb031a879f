-- Release a fair lock's hold, or take back an acquire call (leave the queue, and release the
-- grant it may have got without its caller knowing); then name the waiter to wake.
-- Safe to resend: the owner token is remembered, so a resent release answers 2.
-- KEYS[1] lock hash   KEYS[2] queue zset   KEYS[3] wait-lease zset
-- KEYS[4] request memory zset (see fragments/requests.lua)   KEYS[5] bucket fence counter
-- KEYS[6] the bucket's coordination index (see fair_acquire.lua): the entry of KEYS[1] is
--         removed when the lock is free and no waiter's lease is live
-- ARGV[1] owner token   ARGV[2] fence, or "*": a take-back (whatever this token has)
-- returns {code, next}: code 1 released (or, with "*", left the queue), 2 released already
--         (a resend), 0 not held by (token, fence): expired or never granted;
--         next: the token of the first live waiter when the lock is free after this call
--         (the caller pushes its wake-up list, see fair_wake.lua), else ""
-- include: requests
local owner = ARGV[1]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
local code = 0
if hold[1] == owner and (ARGV[2] == '*' or hold[2] == ARGV[2]) then
  redis.call('DEL', KEYS[1])
  code = 1
elseif ARGV[2] == '*' then
  code = 1
elseif redis.call('ZSCORE', KEYS[4], owner) then
  code = 2
end
redis.call('ZREM', KEYS[2], owner)
redis.call('ZREM', KEYS[3], owner)
remember(KEYS[4], owner, redis.call('GET', KEYS[5]) or 0, now)
local nxt = ''
if redis.call('EXISTS', KEYS[1]) == 0 then
  local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64)
  if #lapsed > 0 then
    redis.call('ZREM', KEYS[2], unpack(lapsed))
    redis.call('ZREM', KEYS[3], unpack(lapsed))
  end
  nxt = redis.call('ZRANGE', KEYS[2], 0, 0)[1] or ''
  if redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') == 0 then
    redis.call('ZREM', KEYS[6], KEYS[1])
  end
end
return {code, nxt}
