-- Fragment: the waiters zset of a lock name (the admin's Waiters count), shared by the mutex,
-- the writers and the readers of the name.
-- record_waiter(key, member, now, want, blocker): a refused caller that will wait up to `want`
-- ms is recorded until min(want, blocker + 1 s) from `now` (at least 1 s; `blocker`: the ms
-- the hold or intent that refused it has left), so its entry lapses soon after it gives up or
-- dies; a retry renews it, entries past their deadline are pruned, and the zset expires a
-- second after its last deadline.
local function record_waiter(key, member, now, want, blocker)
  local ms = math.max(math.min(want, blocker + 1000), 1000)
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  redis.call('ZADD', key, now + ms, member)
  if redis.call('PTTL', key) < ms + 1000 then
    redis.call('PEXPIRE', key, ms + 1000)
  end
end
