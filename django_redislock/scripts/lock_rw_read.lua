-- Grant a read hold of a read-write lock unless a writer holds it or waits for it.
-- Each read hold is the member "<owner>@<fence>" of the readers set: its fence is part of its
-- name, so releasing or renewing a hold can never touch another, newer one.
-- Safe to resend: the reader owner is unique to one acquire call and remembered with its
-- fence, so a resend is answered as the first time; an owner its caller took back
-- (lock_rw_release ARGV[6]) is granted nothing.
-- KEYS[1] writer hash (o=owner, f=fence)   KEYS[2] readers zset (member -> deadline ms)
-- KEYS[3] waiting writer's intent   KEYS[4] reader wake-up signal   KEYS[5] bucket fence counter
-- KEYS[6] index names   KEYS[7] index expiry   KEYS[8] latest reader's metadata hash
-- KEYS[9] request memory zset (request id -> fence; kept for the resend window, see
--         fragments/requests.lua)
-- KEYS[10] (optional) waiters zset shared with the mutex and the writers of the name (owner
--          -> wait deadline in ms): a refused try records its owner there until
--          min(ARGV[6], the blocker's remaining ms + 1 s) from now (a retry renews it), a
--          grant removes it, and entries past their deadline are pruned
-- ARGV[1] reader owner (unique per acquire call)   ARGV[2] ttl ms   ARGV[3] lock name
-- ARGV[4] holder metadata (JSON)   ARGV[5] signal lifetime ms
-- ARGV[6] (with KEYS[10]) ms the caller will still wait
-- returns {1, fence, readers} when granted;
--         {0, wait_ms} when a writer holds it or a writer waits (writer preference)
-- include: waiters
-- include: requests
local seen = redis.call('ZSCORE', KEYS[9], ARGV[1])
if seen then
  if redis.call('ZSCORE', KEYS[2], ARGV[1] .. '@' .. seen) then
    return {1, tonumber(seen), redis.call('ZCARD', KEYS[2])}  -- this call's grant: a resend
  end
  return {0, 0}  -- taken back by its caller, or granted and ended since: grant nothing
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local function refused(wait)
  if KEYS[10] then record_waiter(KEYS[10], ARGV[1], now, tonumber(ARGV[6]), wait) end
  return {0, wait}
end
if redis.call('EXISTS', KEYS[1]) == 1 then
  return refused(redis.call('PTTL', KEYS[1]))
end
local intent = redis.call('PTTL', KEYS[3])
if intent > 0 then
  return refused(intent)
end
if KEYS[10] then redis.call('ZREM', KEYS[10], ARGV[1]) end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local fence = redis.call('INCR', KEYS[5])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1] .. '@' .. fence)
remember(KEYS[9], ARGV[1], fence, now)
local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
redis.call('PEXPIRE', KEYS[2], last - now)
redis.call('HSET', KEYS[8], 'm', ARGV[4], 'f', fence)
redis.call('PEXPIRE', KEYS[8], last - now)
if redis.call('ZADD', KEYS[7], last, ARGV[3]) == 1 then
  redis.call('ZADD', KEYS[6], 0, ARGV[3])
end
redis.call('LPUSH', KEYS[4], 1)
redis.call('LTRIM', KEYS[4], 0, 0)
redis.call('PEXPIRE', KEYS[4], ARGV[5])
return {1, fence, redis.call('ZCARD', KEYS[2])}
