-- One acquire try of a fair lock: granted when the lock is free and the caller is the first
-- live waiter of its queue (or nobody waits); a refused waiting try queues the caller in
-- arrival order (once) and renews its wait-lease. Waiters whose lease lapsed (a crashed
-- process) are dropped first, so they never block the queue behind them.
-- Safe to resend: the owner token is unique to one acquire call and names it. A resend after
-- the grant is answered as the first time; a token its caller took back (fair_release "*")
-- or released is in the request memory and is granted nothing.
-- KEYS[1] lock hash (o=owner token, f=fence, m=holder metadata)   KEYS[2] bucket fence counter
-- KEYS[3] request memory zset (see fragments/requests.lua)
-- KEYS[4] queue zset (owner token -> arrival number)
-- KEYS[5] wait-lease zset (owner token -> lease deadline, ms, server clock)
-- KEYS[6] the bucket's coordination index (zset: KEYS[1] -> the latest deadline of the hold
--         or a waiter's lease, ms; locking/coordindex.py lists it for the admin and metrics)
-- ARGV[1] owner token   ARGV[2] ttl ms   ARGV[3] holder metadata (JSON)
-- ARGV[4] "0" a try that will not wait, "1" a waiting try (queued, lease renewed)
-- ARGV[5] wait-lease ms
-- returns {1, fence} when granted;
--         {0, wait_ms, place}: refused; wait_ms the holder's remaining PTTL (0: the lock is
--         free but it is an earlier waiter's turn); place: 1-based place in the queue (0: not
--         queued: a try that does not wait, or a token taken back)
local owner = ARGV[1]
local hold = redis.call('HMGET', KEYS[1], 'o', 'f')
if hold[1] == owner then
  return {1, tonumber(hold[2])}  -- granted already: a resend, or a woken waiter's hand-off
end
if redis.call('ZSCORE', KEYS[3], owner) then
  redis.call('ZREM', KEYS[4], owner)
  redis.call('ZREM', KEYS[5], owner)
  return {0, 0, 0}  -- taken back or released by its caller: grant nothing
end
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local lapsed = redis.call('ZRANGEBYSCORE', KEYS[5], '-inf', now, 'LIMIT', 0, 64)
if #lapsed > 0 then
  redis.call('ZREM', KEYS[4], unpack(lapsed))
  redis.call('ZREM', KEYS[5], unpack(lapsed))
end
local lease = tonumber(ARGV[5])
local function queue()
  if ARGV[4] ~= '1' then
    return 0
  end
  if not redis.call('ZSCORE', KEYS[4], owner) then
    local last = redis.call('ZRANGE', KEYS[4], -1, -1, 'WITHSCORES')
    redis.call('ZADD', KEYS[4], (tonumber(last[2]) or 0) + 1, owner)
  end
  redis.call('ZADD', KEYS[5], now + lease, owner)
  redis.call('ZADD', KEYS[6], 'GT', now + lease, KEYS[1])
  -- both outlive the longest live lease, no longer: a waiter with a shorter lease than
  -- another's never shortens them (the other's place would vanish with the keys)
  for _, key in ipairs({KEYS[4], KEYS[5]}) do
    if redis.call('PTTL', key) < lease + 1000 then redis.call('PEXPIRE', key, lease + 1000) end
  end
  return redis.call('ZRANK', KEYS[4], owner) + 1
end
if hold[1] then
  return {0, redis.call('PTTL', KEYS[1]), queue()}
end
local head = redis.call('ZRANGE', KEYS[4], 0, 0)
if head[1] and head[1] ~= owner then
  return {0, 0, queue()}
end
local fence = redis.call('INCR', KEYS[2])
redis.call('HSET', KEYS[1], 'o', owner, 'f', fence, 'm', ARGV[3])
redis.call('PEXPIRE', KEYS[1], tonumber(ARGV[2]))
redis.call('ZADD', KEYS[6], 'GT', now + tonumber(ARGV[2]), KEYS[1])
if head[1] then
  redis.call('ZREM', KEYS[4], owner)
  redis.call('ZREM', KEYS[5], owner)
end
return {1, fence}
