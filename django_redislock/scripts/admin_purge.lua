-- One step of the admin's purge: delete at most what the operator confirmed, and nothing at all
-- when the queue holds more tasks than the confirmation page showed.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1] tasks the operator confirmed (the total the page showed); -1 skips the check
-- ARGV[2] tasks to delete in this call at most (the chunk, never above what is left of ARGV[1])
-- returns {deleted in this call, tasks left}, or {-1, tasks now} when ARGV[1] is not -1 and the
--          queue holds more than ARGV[1] tasks (nothing deleted); when none are left the hashes
--          and the signal list are UNLINKed (freed in the background)
local total = redis.call('ZCARD', KEYS[1]) + redis.call('ZCARD', KEYS[2])
  + redis.call('ZCARD', KEYS[3])
local seen = tonumber(ARGV[1])
if seen >= 0 and total > seen then return {-1, total} end
local budget = tonumber(ARGV[2])
local deleted = 0
for k = 1, 3 do
  if budget > 0 then
    local ids = redis.call('ZRANGE', KEYS[k], 0, budget - 1)
    if #ids > 0 then
      redis.call('ZREMRANGEBYRANK', KEYS[k], 0, #ids - 1)
      redis.call('HDEL', KEYS[4], unpack(ids))
      redis.call('HDEL', KEYS[5], unpack(ids))
      redis.call('HDEL', KEYS[6], unpack(ids))
      deleted = deleted + #ids
      budget = budget - #ids
    end
  end
end
local left = total - deleted
if left == 0 then redis.call('UNLINK', KEYS[4], KEYS[5], KEYS[6], KEYS[7]) end
return {deleted, left}
