-- Release one hold of a mutex or reentrant lock, if (owner, fence) still holds it; or take
-- back an acquire whose outcome its caller does not know (ARGV[6]).
-- KEYS[1] lock hash   KEYS[2] wake-up signal list   KEYS[3] request memory zset (id -> the
-- fence counter when recorded; kept for the resend window, see fragments/requests.lua)
-- KEYS[4] index expiry zset   KEYS[5] bucket fence counter (read only)
-- ARGV[1] owner   ARGV[2] fence ("*": whichever hold this owner has, for a release from
--         another process that knows only the explicit owner)   ARGV[3] lock name
-- ARGV[4] signal lifetime ms   ARGV[5] release id: "" for a mutex hold (its fence tells its
--         one release apart), else unique per release call and the same when it is resent
-- ARGV[6] (optional) an acquire to take back: its request id, or its owner when the owner is
--         unique to that call. The hold is released only if that acquire was applied; if it
--         was not, the id is remembered so that the acquire, arriving late, grants nothing.
-- ARGV[7] (optional) the level this release ends: the request id of the acquire that entered
--         it (a take-back ends the level of its ARGV[6]); its "@<id>" deadline is dropped, and
--         a partial release sets the hold's expiry to the latest deadline of the levels left
--         (see levels_left below), or ends the hold when those have all passed
-- returns {1, remaining_count, fence}: released (0: the lock is free; if a waiter had marked the
--         hold, one waiter was woken);
--         {2, 0}: this release was already done (a resent release: a no-op success);
--         {0, 0}: not held by (owner, fence): it expired, was force-released or never was
-- include: requests
-- levels_left(level, n, now): after a partial release, drops the "@<level>" deadline and sets
-- the hold's expiry to the latest deadline of the levels left. Only when at least n of them
-- have one (a level entered without a request id, or by an older script, has none: the expiry
-- then stays as it is, never shorter than such a level may need; a release by owner alone
-- names no level and leaves one deadline too many, never one too few). Returns false when
-- every deadline left has passed: the hold ends now.
local function levels_left(level, n, now)
  if level ~= '' then
    redis.call('HDEL', KEYS[1], '@' .. level)
  end
  local fields = redis.call('HGETALL', KEYS[1])
  local count, latest = 0, 0
  for i = 1, #fields, 2 do
    if string.byte(fields[i], 1) == 64 then  -- "@": a level's deadline
      count = count + 1
      latest = math.max(latest, tonumber(fields[i + 1]))
    end
  end
  if count < n then
    return true
  end
  if latest <= now then
    return false
  end
  redis.call('PEXPIRE', KEYS[1], latest - now)
  redis.call('ZADD', KEYS[4], latest, ARGV[3])
  return true
end
local rid = ARGV[5] ~= '' and ARGV[5] or ARGV[2]
if ARGV[5] ~= '' and redis.call('ZSCORE', KEYS[3], rid) then
  return {2, 0}  -- done already; the owner may hold the lock again since, which must stay
end
local hold = redis.call('HMGET', KEYS[1], 'o', 'f', 'n', 'w')
local fence = hold[2]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local counter = redis.call('GET', KEYS[5]) or 0
local undo = ARGV[6] or ''
local level = ARGV[7] or ''
if level == '' then level = undo end
if undo ~= '' then
  local applied = hold[1] == ARGV[1]
  if applied and undo ~= ARGV[1] then
    -- applied to this hold: recorded since its grant, so with a score of at least its fence
    local seen = redis.call('ZSCORE', KEYS[3], undo)
    applied = seen ~= false and tonumber(seen) >= tonumber(fence)
  end
  if not applied then
    remember(KEYS[3], undo, counter, now)
    return {0, 0}
  end
end
if hold[1] == ARGV[1] and (ARGV[2] == '*' or fence == ARGV[2]) then
  if hold[3] ~= '1' then
    local n = redis.call('HINCRBY', KEYS[1], 'n', -1)
    if n > 0 then
      remember(KEYS[3], rid, counter, now)
      if levels_left(level, n, now) then
        return {1, n, tonumber(fence)}
      end
    end
  end
  redis.call('DEL', KEYS[1])
  remember(KEYS[3], rid, counter, now)
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
