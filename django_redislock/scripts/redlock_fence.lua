-- Give a Redlock grant one fence on every master that holds it: the largest of the quorum's.
-- KEYS[1] lock hash (o=owner, f=fence)   KEYS[2] bucket fence counter
-- KEYS[3] (optional) waiters zset of the name: the granted caller's entry (ARGV[3]) is removed
--         on every master, also those that refused it (a refused waiting try recorded it
--         there; left, such entries would add up to a waiter that is not there in the admin)
-- ARGV[1] owner of the grant   ARGV[2] the grant's fence (max of the per-master fences)
-- ARGV[3] (with KEYS[3]) the caller's member in the waiters zset (request id, or owner)
-- returns 1 when this master still holds the lock for ARGV[1] (its hash now carries the grant's
--         fence and its counter is at least that fence); 0 when it does not hold it. The counter
--         is raised either way: raising a fence counter can never make a later fence smaller.
local target = tonumber(ARGV[2])
if KEYS[3] then redis.call('ZREM', KEYS[3], ARGV[3]) end
if tonumber(redis.call('GET', KEYS[2]) or '0') < target then
  redis.call('SET', KEYS[2], target)
end
if redis.call('HGET', KEYS[1], 'o') ~= ARGV[1] then
  return 0
end
redis.call('HSET', KEYS[1], 'f', target)
return 1
