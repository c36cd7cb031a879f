-- Release a semaphore permit, take back an acquire whose outcome its caller does not know, or
-- withdraw a waiting caller from the queue. Anything that may let a queued caller through
-- (a permit freed, a caller ahead gone) wakes the queued callers (up to ARGV[6]), who try again
-- in their arrival order (see semaphore_acquire.lua).
-- KEYS[1] permits zset   KEYS[2] queue zset   KEYS[3] leases zset   KEYS[4] wake-up signal list
-- KEYS[5] bucket fence counter (read only)   KEYS[6] request memory zset (released fences and
--         taken-back owners -> the fence counter when recorded; see fragments/requests.lua)
-- KEYS[7] the bucket's coordination index (see semaphore_acquire.lua): the entry of KEYS[1]
--         is removed when no permit is held and no waiter's lease is live
-- ARGV[1] "r": release the permit ARGV[2] ("<owner>@<fence>") with fence ARGV[3];
--         "t": take back the acquire of owner ARGV[2]: it leaves the queue, and its permit is
--              released if it was granted; if it was not, the owner is remembered so that the
--              acquire, arriving late, grants nothing;
--         "l": the waiting caller ARGV[2] leaves the queue (it stopped waiting)
-- ARGV[4] signal lifetime ms   ARGV[5] most waiters one call wakes
-- returns {1, permits held} released (or "l": left the queue); {2, 0} already released (a
--         resent release: a no-op success); {0, 0} not held (expired, or never granted) or
--         ("l") not queued
-- include: requests
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local mode, member, fence = ARGV[1], ARGV[2], ARGV[3]
local function wake()
  local waiting = redis.call('ZCARD', KEYS[2])
  if waiting == 0 then return end
  local n = math.min(waiting, tonumber(ARGV[5]))
  local ones = {}
  for i = 1, n do ones[i] = 1 end
  redis.call('LPUSH', KEYS[4], unpack(ones))
  redis.call('LTRIM', KEYS[4], 0, n - 1)
  redis.call('PEXPIRE', KEYS[4], ARGV[4])
end
local function leave(owner)
  redis.call('ZREM', KEYS[3], owner)
  return redis.call('ZREM', KEYS[2], owner) == 1
end
local function main()
  if mode == 'l' then
    if leave(member) then
      wake()  -- the callers behind it moved up
      return {1, 0}
    end
    return {0, 0}
  end
  local counter = redis.call('GET', KEYS[5]) or 0
  if mode == 't' then
    local left = leave(member)
    local seen = redis.call('ZSCORE', KEYS[6], member)
    if not seen then
      remember(KEYS[6], member, counter, now)
      if left then wake() end
      return {0, 0}
    end
    member, fence = member .. '@' .. seen, seen
  end
  local deadline = redis.call('ZSCORE', KEYS[1], member)
  redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now)  -- expired permits (this one too) go
  if not deadline or tonumber(deadline) <= now then
    if redis.call('ZSCORE', KEYS[6], fence) then
      return {2, 0}
    end
    if deadline then wake() end  -- it expired a moment ago: its permit is free now
    return {0, 0}
  end
  redis.call('ZREM', KEYS[1], member)
  remember(KEYS[6], fence, counter, now)
  wake()
  return {1, redis.call('ZCARD', KEYS[1])}
end
local reply = main()
if redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') == 0
    and redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') == 0 then
  redis.call('ZREM', KEYS[7], KEYS[1])
end
return reply
