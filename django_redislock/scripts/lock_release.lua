-- Release one hold of a mutex or reentrant lock, if (owner, fence) still holds it; or take
-- back an acquire whose outcome its caller does not know (ARGV[6]).
-- KEYS[1] lock hash   KEYS[2] wake-up signal list   KEYS[3] request memory zset (id -> fence)
-- KEYS[4] index expiry zset   KEYS[5] bucket fence counter (read only when taking back)
-- ARGV[1] owner   ARGV[2] fence ("*": whichever hold this owner has, for a release from
--         another process that knows only the explicit owner)   ARGV[3] lock name
-- ARGV[4] signal lifetime ms   ARGV[5] release id: "" for a mutex hold (its fence tells its
--         one release apart), else unique per release call and the same when it is resent
-- ARGV[6] (optional) an acquire to take back: its request id, or its owner when the owner is
--         unique to that call. The hold is released only if that acquire was applied; if it
--         was not, the id is remembered so that the acquire, arriving late, grants nothing.
-- returns {1, remaining_count, fence}: released (0: the lock is free; if a waiter had marked the
--         hold, one waiter was woken);
--         {2, 0}: this release was already done (a resent release: a no-op success);
--         {0, 0}: not held by (owner, fence): it expired, was force-released or never was
local rid = ARGV[5] ~= '' and ARGV[5] or ARGV[2]
if ARGV[5] ~= '' and redis.call('ZSCORE', KEYS[3], rid) then
  return {2, 0}  -- done already; the owner may hold the lock again since, which must stay
end
local hold = redis.call('HMGET', KEYS[1], 'o', 'f', 'n', 'w')
local fence = hold[2]
local undo = ARGV[6] or ''
if undo ~= '' then
  local applied = hold[1] == ARGV[1]
  if applied and undo ~= ARGV[1] then
    applied = redis.call('ZSCORE', KEYS[3], undo) == fence
  end
  if not applied then
    redis.call('ZADD', KEYS[3], redis.call('GET', KEYS[5]) or 0, undo)
    return {0, 0}
  end
end
if hold[1] == ARGV[1] and (ARGV[2] == '*' or fence == ARGV[2]) then
  if hold[3] ~= '1' then
    local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
    if n > 0 then
      redis.call('ZADD', KEYS[3], fence, rid)
      return {1, n, tonumber(fence)}
    end
  end
  redis.call('DEL', KEYS[1])
  redis.call('ZADD', KEYS[3], fence, rid)
  if tonumber(fence) % 64 == 0 then
    redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -1025)
  end
  -- Expiry 0 hides the name from listings and counts at once; the name stays in the index
  -- (one call less here, and none at the next grant of the same name) until it is pruned.
  redis.call('ZADD', KEYS[4], 0, ARGV[3])
  if hold[4] then
    if redis.call('LPUSH', KEYS[2], 1) > 1 then
      redis.call('LTRIM', KEYS[2], 0, 0)  -- one pending wake-up is enough
    end
    redis.call('PEXPIRE', KEYS[2], ARGV[4])
  end
  return {1, 0, tonumber(fence)}
end
if redis.call('ZSCORE', KEYS[3], rid) then
  return {2, 0}
end
return {0, 0}
