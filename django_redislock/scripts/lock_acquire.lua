-- Grant a mutex or reentrant lock, issue its fence and record the name in the bucket's index.
-- Safe to resend: a request this script already applied is answered as the first time and
-- changes nothing, and a request its caller took back (see lock_release ARGV[6]) grants nothing.
-- KEYS[1] lock hash (o=owner, f=fence, n=count, m=metadata, w=waited)   KEYS[2] bucket fence
-- KEYS[3] index names zset   KEYS[4] index expiry zset
-- KEYS[5] request memory zset (request id -> the fence counter when recorded; needed with
--         mode "t" or ARGV[6]; kept for the resend window, see fragments/requests.lua)
-- KEYS[6] (optional) waiters zset (request id, or owner without one -> wait deadline in ms)
-- ARGV[1] owner   ARGV[2] ttl ms   ARGV[3] lock name   ARGV[4] holder metadata (JSON)
-- ARGV[5] mode: "t" (a mutex whose owner is a token unique to this acquire call), "m" (a
--         mutex whose owner may be shared, e.g. an explicit owner) or "r" (reentrant), then
--         "0" a non-blocking try, "1" a first try
--         that will wait if refused, "2" a retry after waiting. Waiters mark the hold (w=1) so
--         that only its release pays for a wake-up push; a waiter that gets the lock marks its
--         own hold, as others may still be waiting.
-- ARGV[6] request id, the same for every try of one acquire call and for its resends; absent
--         or "" for mode "t" (the owner names the call) and for a caller that does not resend
-- ARGV[7] (with KEYS[6]) ms the caller will still wait; a refused waiting try records the
--         caller in the waiters zset until min(that, the holder's PTTL + 1 s) from now (a
--         retry renews it), a grant removes it, and entries past their deadline are pruned
-- Levels: a reentrant ("r") acquire with a request id records its own deadline as the hash field
--   "@<request id>" = now + ttl (ms, server clock): lock_release sets the hold's expiry back to
--   the latest deadline of the levels left, lock_extend moves only the levels it names.
-- returns {1, fence, count} when granted (count > 1: a reentrant re-entry, same fence);
--         {0, wait_ms} when another owner holds it (wait_ms: the holder's remaining PTTL)
-- include: waiters
-- include: requests
local ttl = tonumber(ARGV[2])
local wait = string.sub(ARGV[5], 2)
local rid = ARGV[6] or ''

local function index(name, ms)
  local t = redis.call('TIME')
  local now = t[1] * 1000 + math.floor(t[2] / 1000)
  if redis.call('ZADD', KEYS[4], now + ms, name) == 1 then
    redis.call('ZADD', KEYS[3], 0, name)  -- new to the index (a released name keeps its entry)
  end
  return now
end

-- A request is recorded with the counter now: a first grant's own fence, and for a re-entry
-- at least the hold's fence (lock_release's take-back tells a request applied to this hold by
-- a score >= its fence).
local function applied(counter, now)
  if rid ~= '' and KEYS[5] then
    remember(KEYS[5], rid, counter, now)
  end
end

local kind = string.sub(ARGV[5], 1, 1)
-- The owner alone first: a free or foreign-held lock (the common case) needs nothing else,
-- and one string reply costs the script less than a table of three.
local holder = redis.call('HGET', KEYS[1], 'o')
local hold
if holder == ARGV[1] then
  hold = redis.call('HMGET', KEYS[1], 'f', 'n')
  if kind == 't' then
    return {1, tonumber(hold[1]), tonumber(hold[2])}  -- this call's own token: a resend
  end
  local seen = rid ~= '' and redis.call('ZSCORE', KEYS[5], rid)
  if seen then
    -- Applied before: to this hold if recorded since its grant (a score of at least its
    -- fence), a resend answered as the first time; else to an older hold of this owner,
    -- ended since, and the new hold never counted it: grant nothing.
    if tonumber(seen) >= tonumber(hold[1]) then
      return {1, tonumber(hold[1]), tonumber(hold[2])}
    end
    return {0, 0}
  end
end
if holder then
  if holder ~= ARGV[1] or kind ~= 'r' then
    local left = redis.call('PTTL', KEYS[1])
    if wait ~= '0' then
      redis.call('HSET', KEYS[1], 'w', 1)
      if KEYS[6] and ARGV[7] then
        local t = redis.call('TIME')  -- in ms: whole seconds would cut up to 1 s off the wait
        local now = t[1] * 1000 + math.floor(t[2] / 1000)
        record_waiter(KEYS[6], rid ~= '' and rid or ARGV[1], now, tonumber(ARGV[7]), left)
      end
    end
    return {0, left}
  end
  -- A re-entry: counted, and the remaining TTL is never shortened (an outer hold may need it).
  local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
  local left = redis.call('PTTL', KEYS[1])
  if ttl > left then
    redis.call('PEXPIRE', KEYS[1], ttl)
    left = ttl
  end
  local now = index(ARGV[3], left)
  if rid ~= '' then
    redis.call('HSET', KEYS[1], '@' .. rid, now + ttl)  -- this level's own deadline
  end
  applied(redis.call('GET', KEYS[2]) or hold[1], now)
  return {1, tonumber(hold[1]), n}
end
local request = rid ~= '' and rid or (kind == 't' and ARGV[1]) or nil
if request and redis.call('ZSCORE', KEYS[5], request) then
  return {0, 0}  -- applied and ended since, or taken back by its caller: grant nothing
end
local fence = redis.call('INCR', KEYS[2])
if wait == '2' and KEYS[6] then
  redis.call('ZREM', KEYS[6], rid ~= '' and rid or ARGV[1])
end
if wait == '2' then
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'f', fence, 'n', 1, 'm', ARGV[4], 'w', 1)
else
  redis.call('HSET', KEYS[1], 'o', ARGV[1], 'f', fence, 'n', 1, 'm', ARGV[4])
end
redis.call('PEXPIRE', KEYS[1], ttl)
local now = index(ARGV[3], ttl)
if kind == 'r' and rid ~= '' then
  redis.call('HSET', KEYS[1], '@' .. rid, now + ttl)  -- the outermost level's own deadline
end
applied(fence, now)
if fence % 16 == 0 then
  -- Every 16th grant of the bucket drops up to 64 names released or expired unreleased.
  local stale = redis.call('ZRANGEBYSCORE', KEYS[4], '-inf', now, 'LIMIT', 0, 64)
  if #stale > 0 then
    redis.call('ZREM', KEYS[3], unpack(stale))
    redis.call('ZREM', KEYS[4], unpack(stale))
  end
end
return {1, fence, 1}
