-- Release a read or write hold of a read-write lock, if (owner, fence) still holds it; or take
-- back an acquire whose outcome its caller does not know (ARGV[6]).
-- KEYS[1] writer hash   KEYS[2] readers zset   KEYS[3] reader signal   KEYS[4] writer signal
-- KEYS[5] request memory zset (released fences, request ids -> the highest fence counter
--         recorded so far; kept for the resend window, see fragments/requests.lua)
-- KEYS[6] index expiry
-- KEYS[7] latest reader's metadata hash
-- ARGV[1] "r" or "w"   ARGV[2] owner: the writer's owner, or a read hold's member
--         "<owner>@<fence>" (so a read release is fence-checked by the member itself)
-- ARGV[3] fence   ARGV[4] lock name   ARGV[5] signal lifetime ms
-- ARGV[6] (optional) "1": take back the acquire of owner ARGV[2] (a reader's or writer's
--         owner, unique to that call; ARGV[3] is then ignored): the hold is released if it was
--         granted; if not, the owner is remembered so that the acquire, arriving late, grants
--         nothing
-- returns {1, readers_left} released; {2, 0} already released (retry no-op); {0, 0} not held
-- include: requests
local function signal(key)
  redis.call('LPUSH', key, 1)
  redis.call('LTRIM', key, 0, 0)
  redis.call('PEXPIRE', key, ARGV[5])
end
local owner, fence = ARGV[2], ARGV[3]
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
-- No fence counter here: a record is scored with the highest score so far, which never goes
-- down either (fragments/requests.lua needs that).
local function top()
  return redis.call('ZRANGE', KEYS[5], -1, -1, 'WITHSCORES')[2] or 0
end
if ARGV[6] == '1' then
  local seen
  if ARGV[1] == 'w' then
    local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
    if hold[1] == owner then seen = hold[2] end
  else
    seen = redis.call('ZSCORE', KEYS[5], owner)
    if seen then owner = owner .. '@' .. seen end
  end
  if not seen then
    remember(KEYS[5], ARGV[2], top(), now)
    return {0, 0}
  end
  fence = seen
end
local released = false
if ARGV[1] == 'w' then
  local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
  if hold[1] == owner and hold[2] == fence then
    redis.call('DEL', KEYS[1])
    released = true
    signal(KEYS[3])
  end
else
  released = redis.call('ZREM', KEYS[2], owner) == 1
end
if not released then
  if redis.call('ZSCORE', KEYS[5], fence) then
    return {2, 0}
  end
  return {0, 0}
end
remember(KEYS[5], fence, math.max(tonumber(top()), tonumber(fence)), now)
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local readers = redis.call('ZCARD', KEYS[2])
if readers == 0 and redis.call('EXISTS', KEYS[1]) == 0 then
  redis.call('ZADD', KEYS[6], 0, ARGV[4])  -- hidden at once, pruned later (see lock_release)
  redis.call('DEL', KEYS[7])
  signal(KEYS[4])
elseif readers > 0 then
  local last = tonumber(redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')[2])
  redis.call('ZADD', KEYS[6], last, ARGV[4])
end
return {1, readers}
