-- Grant a permit of a semaphore with leased permits, or queue the caller in arrival order.
-- Each permit is the member "<owner>@<fence>" of the permits zset, scored by its own deadline
-- (ms, server clock): expired permits are reclaimed here, so a holder that dies loses only its
-- own permit, at its deadline. The limit is the caller's (ARGV[3]): changing it keeps every
-- permit held; while more are held than a caller's limit, that caller waits.
-- Arrival order: a caller that will wait is queued (queue zset: owner -> arrival number, drawn
-- from the bucket's fence counter) with a lease (leases zset: owner -> deadline) that each of
-- its tries renews. A permit goes to a caller only when fewer than (limit - held) live callers
-- are queued ahead of it; a caller not queued (a first or non-waiting try) counts every queued
-- caller as ahead, so it never overtakes one. A waiter that dies keeps its place until its
-- lease lapses (at most ARGV[4] ms after its last try), then the queue moves on.
-- Safe to resend: the owner is unique to one acquire call and remembered with its fence, so a
-- resend is answered as the first time; an owner its caller took back (semaphore_release "t")
-- is granted nothing.
-- KEYS[1] permits zset   KEYS[2] queue zset   KEYS[3] leases zset   KEYS[4] wake-up signal list
-- KEYS[5] bucket fence counter   KEYS[6] request memory zset (request id -> fence; kept for
--         the resend window, see fragments/requests.lua)
-- KEYS[7] the bucket's coordination index (zset: KEYS[1] -> the latest deadline of a permit
--         or a waiter's lease, ms; locking/coordindex.py lists it for the admin and metrics)
-- ARGV[1] owner (unique per acquire call)   ARGV[2] ttl ms   ARGV[3] permits (the limit)
-- ARGV[4] lease ms of a caller that will wait if refused (0: a try that does not wait: it is
--         never queued)   ARGV[5] signal lifetime ms   ARGV[6] most waiters one grant wakes
-- returns {1, fence, permits held} when granted;
--         {0, wait_ms, callers ahead} when refused (wait_ms: until the first permit's deadline
--         when none is free, else until the lease of the first queued caller ends)
-- include: requests
local owner = ARGV[1]
local seen = redis.call('ZSCORE', KEYS[6], owner)
if seen then
  if redis.call('ZSCORE', KEYS[1], owner .. '@' .. seen) then
    return {1, tonumber(seen), redis.call('ZCARD', KEYS[1])}  -- this call's grant: a resend
  end
  return {0, 0, 0}  -- taken back by its caller, or granted and ended since: grant nothing
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)  -- expired permits come back
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', now, 'LIMIT', 0, 64)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[2], unpack(lapsed))
  redis.call('ZREM', KEYS[3], unpack(lapsed))
end
local function wake(waiting)
  local n = math.min(waiting, tonumber(ARGV[6]))
  local ones = {}
  for i = 1, n do ones[i] = 1 end
  redis.call('LPUSH', KEYS[4], unpack(ones))
  redis.call('LTRIM', KEYS[4], 0, n - 1)
  redis.call('PEXPIRE', KEYS[4], ARGV[5])
end
local function last_left(key)
  return tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2]) - now
end
local limit = tonumber(ARGV[3])
local lease = tonumber(ARGV[4])
local held = redis.call('ZCARD', KEYS[1])
local ahead = redis.call('ZRANK', KEYS[2], owner)
local queued = ahead ~= false
if not queued then
  ahead = redis.call('ZCARD', KEYS[2])
end
if held + ahead >= limit then
  local wait
  if held >= limit and held > 0 then
    wait = tonumber(redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')[2]) - now
  elseif ahead > 0 then
    local first = redis.call('ZRANGE', KEYS[2], 0, 0)[1]
    wait = tonumber(redis.call('ZSCORE', KEYS[3], first)) - now
  else
    wait = lease  -- a limit of 0: nothing frees a permit but a new limit
  end
  if lease > 0 then
    if not queued then
      redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[5]), owner)
    end
    redis.call('ZADD', KEYS[3], now + lease, owner)
    redis.call('ZADD', KEYS[7], 'GT', now + lease, KEYS[1])
    local left = last_left(KEYS[3])
    redis.call('PEXPIRE', KEYS[2], left)
    redis.call('PEXPIRE', KEYS[3], left)
  end
  return {0, math.max(wait, 1), ahead}
end
if queued then
  redis.call('ZREM', KEYS[2], owner)
  redis.call('ZREM', KEYS[3], owner)
end
local fence = redis.call('INCR', KEYS[5])
redis.call('ZADD', KEYS[1], now + tonumber(ARGV[2]), owner .. '@' .. fence)
redis.call('ZADD', KEYS[7], 'GT', now + tonumber(ARGV[2]), KEYS[1])
redis.call('PEXPIRE', KEYS[1], last_left(KEYS[1]))
remember(KEYS[6], owner, fence, now)
held = held + 1
local waiting = redis.call('ZCARD', KEYS[2])
if waiting > 0 and held < limit then
  wake(waiting)  -- permits are still free: the callers next in line may take them
end
return {1, fence, held}
