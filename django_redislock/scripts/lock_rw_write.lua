-- Grant the write hold of a read-write lock when no writer and no live reader holds it.
-- A writer that must wait leaves an intent that stops new readers (writer preference).
-- Safe to resend: the writer owner is unique to one acquire call, so a hold by it is this
-- call's grant; an owner its caller took back (lock_rw_release ARGV[6]) is granted nothing.
-- KEYS[1] writer hash (o=owner, f=fence, m=metadata)   KEYS[2] readers zset (owner -> deadline)
-- KEYS[3] waiting writer's intent   KEYS[4] bucket fence counter
-- KEYS[5] index names   KEYS[6] index expiry   KEYS[7] writer wake-up signal
-- KEYS[8] request memory zset (request id -> fence)
-- KEYS[9] (optional) waiters zset shared with the mutex of the name (owner -> wait deadline
--         in ms); a refused try that will wait (ARGV[5] > 0) records its owner there until
--         min(ARGV[5], the blocker's remaining ms + 1 s) from now (a retry renews it), the
--         grant removes it, entries past their deadline are pruned, and the zset expires a
--         second after its last deadline
-- ARGV[1] writer owner (unique per acquire call)   ARGV[2] ttl ms   ARGV[3] lock name   ARGV[4] holder metadata (JSON)
-- ARGV[5] intent lifetime ms (0: do not wait, leave no intent): the caller's next wait plus a
--         margin, at most one wake-up period (readwrite.py WRITER_BLOCK), so the intent of a
--         writer that stopped waiting without withdrawing it (killed) ends within that period
-- ARGV[6] signal lifetime ms
-- ARGV[7] (optional) "1": this try follows a wait that consumed a release's wake-up ("1"),
--         not a passed-on one ("p")
-- returns {1, fence, 1} when granted; {0, wait_ms} otherwise (time until the blocker expires)
-- include: waiters
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
if hold[1] == ARGV[1] then
  return {1, tonumber(hold[2]), 1}  -- this call's grant: a resend
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local intent = redis.call('GET', KEYS[3])
local wait = 0
if redis.call('EXISTS', KEYS[1]) == 1 then
  wait = redis.call('PTTL', KEYS[1])
elseif redis.call('ZCARD', KEYS[2]) > 0 then
  wait = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2]) - now
elseif intent and intent ~= ARGV[1] then
  -- Free, but another writer is first in line. If this caller consumed a release's wake-up
  -- (ARGV[7] "1"), pass it on as "p", so that writer is not left waiting for a signal that
  -- already came. A "p" is never passed on again: a writer behind an intent whose owner no
  -- longer waits (killed) blocks until that intent ends (one wake-up period) instead of
  -- popping its own push in a loop.
  wait = redis.call('PTTL', KEYS[3])
  if ARGV[7] == '1' then
    redis.call('LPUSH', KEYS[7], 'p')
    redis.call('LTRIM', KEYS[7], 0, 0)
    redis.call('PEXPIRE', KEYS[7], ARGV[6])
  end
end
if wait ~= 0 then
  if tonumber(ARGV[5]) > 0 and (not intent or intent == ARGV[1]) then
    redis.call('SET', KEYS[3], ARGV[1], 'PX', ARGV[5])
  end
  if KEYS[9] and tonumber(ARGV[5]) > 0 then
    record_waiter(KEYS[9], ARGV[1], now, tonumber(ARGV[5]), wait)
  end
  return {0, wait}
end
if redis.call('ZSCORE', KEYS[8], ARGV[1]) then
  return {0, 0}  -- taken back by its caller, or granted and ended since: grant nothing
end
redis.call('DEL', KEYS[3])
if KEYS[9] then redis.call('ZREM', KEYS[9], ARGV[1]) end
local fence = redis.call('INCR', KEYS[4])
redis.call('HSET', KEYS[1], 'o', ARGV[1], 'f', fence, 'm', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
if redis.call('ZADD', KEYS[6], now + tonumber(ARGV[2]), ARGV[3]) == 1 then
  redis.call('ZADD', KEYS[5], 0, ARGV[3])
end
return {1, fence, 1}
