-- Force-release one permit of a semaphore (the admin): the permit's holder keeps running but
-- its next extend or ensure_held fails (its release finds nothing: LockLost). The queued
-- callers are woken to take the freed permit in their arrival order.
-- KEYS[1] permits zset   KEYS[2] queue zset   KEYS[3] leases zset   KEYS[4] wake-up signal list
-- KEYS[5] the bucket's coordination index (see semaphore_acquire.lua)
-- ARGV[1] the permit's id ("<owner>@<fence>")   ARGV[2] signal lifetime ms
-- ARGV[3] most waiters woken
-- returns 1 when the permit was held and is released now, 0 when it was not held (released or
--         expired since the operator looked)
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local deadline = redis.call('ZSCORE', KEYS[1], ARGV[1])
local ended = 0
if deadline and tonumber(deadline) > now then
  redis.call('ZREM', KEYS[1], ARGV[1])
  ended = 1
  local waiting = redis.call('ZCARD', KEYS[2])
  if waiting > 0 then
    local n = math.min(waiting, tonumber(ARGV[3]))
    local ones = {}
    for i = 1, n do ones[i] = 1 end
    redis.call('LPUSH', KEYS[4], unpack(ones))
    redis.call('LTRIM', KEYS[4], 0, n - 1)
    redis.call('PEXPIRE', KEYS[4], ARGV[2])
  end
end
if redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') == 0
    and redis.call('ZCOUNT', KEYS[3], '(' .. now, '+inf') == 0 then
  redis.call('ZREM', KEYS[5], KEYS[1])
end
return ended
