-- Delete up to ARGV[1] tasks (pending, then in flight, then dead); called in a loop so
-- purging a huge queue never blocks Redis for long.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- KEYS[12..15] (optional) the concurrency groups' keys (see the groups
--          fragment): held tasks are deleted first (none is admitted while the others go),
--          and the groups' state with the last task
-- ARGV[1] chunk size
-- include: priority
-- ARGV[2] (optional) tasks the caller confirmed may be deleted (the admin's confirmation page);
--         when the queue holds more than that, nothing is deleted
-- returns {deleted in this call, tasks left}, or {-1, tasks now} when ARGV[2] is given and the
--          queue holds more than it; when none are left the hashes and the signal list are
--          UNLINKed (freed in the background); the claims hash keeps its token counter, so a
--          claim token is never handed out twice
if ARGV[2] then
  local total = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
    + redis.call('ZCARD', KEYS[3])
  if #KEYS >= 15 then total = total + redis.call('ZCARD', KEYS[12]) end
  if total > tonumber(ARGV[2]) then return {-1, total} end
end
local G = #KEYS >= 15 and {KEYS[12], KEYS[13], KEYS[14], KEYS[15]} or nil
local budget = tonumber(ARGV[1])
local deleted = 0
if G and budget > 0 then  -- held tasks of groups: "<#group>:<group>:<due>:<id>"
  local members = redis.call('ZRANGE', G[1], 0, budget - 1)
  if #members > 0 then
    local ids = {}
    for i, member in ipairs(members) do
      local colon = string.find(member, ':', 1, true)
      local skip = colon + tonumber(string.sub(member, 1, colon - 1)) + 20
      ids[i] = string.sub(member, skip)
    end
    redis.call('ZREMRANGEBYRANK', G[1], 0, #members - 1)
    redis.call('HDEL', KEYS[4], unpack(ids))
    redis.call('HDEL', KEYS[5], unpack(ids))
    redis.call('HDEL', KEYS[6], unpack(ids))
    redis.call('HDEL', KEYS[11], unpack(ids))
    prio_forget(ids)
    deleted = deleted + #ids
    budget = budget - #ids
  end
end
for k = 1, 3 do
  if budget > 0 then
    local ids = redis.call('ZRANGE', KEYS[k], 0, budget - 1)
    if #ids > 0 then
      redis.call('ZREMRANGEBYRANK', KEYS[k], 0, #ids - 1)
      redis.call('HDEL', KEYS[4], unpack(ids))
      redis.call('HDEL', KEYS[5], unpack(ids))
      redis.call('HDEL', KEYS[6], unpack(ids))
      redis.call('HDEL', KEYS[8], unpack(ids))
      redis.call('HDEL', KEYS[11], unpack(ids))
      prio_forget(ids)
      deleted = deleted + #ids
      budget = budget - #ids
    end
  end
end
local left = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
  + redis.call('ZCARD', KEYS[3])
if G then left = left + redis.call('ZCARD', G[1]) end
if left == 0 then
  redis.call('UNLINK', KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[9], KEYS[10], KEYS[11])
  if G then redis.call('UNLINK', G[2], G[3], G[4]) end
end
return {deleted, left}
