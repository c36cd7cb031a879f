-- Pause, resume or rate-limit a queue, or read those settings (one atomic step each).
-- KEYS[1..11] the queue's keys (only KEYS[7], its signal list, is used), KEYS[12] its flow
-- hash (see the flow fragment)
-- ARGV[1] "pause"; "resume" (wakes an idle worker); "limit" with ARGV[2] µs between two
--         tasks, ARGV[3] tasks admitted at once, ARGV[4] the rate as written ("20/s"):
--         replaces the limit (a different one starts afresh; the same one keeps its state,
--         so a resend changes nothing); "unlimit"; "read" changes nothing
-- returns {1 if paused else 0, the rate as written or ""} after the change
local op = ARGV[1]
if op == 'pause' then
  redis.call('HSET', KEYS[12], 'paused', '1')
elseif op == 'resume' then
  if redis.call('HDEL', KEYS[12], 'paused') == 1 and redis.call('LLEN', KEYS[7]) == 0 then
    redis.call('LPUSH', KEYS[7], 1)  -- the claim it triggers wakes the next worker, and so on
  end
elseif op == 'limit' then
  local old = redis.call('HMGET', KEYS[12], 'interval', 'burst')
  if old[1] ~= ARGV[2] or old[2] ~= ARGV[3] then
    redis.call('HDEL', KEYS[12], 'tat')  -- a new limit starts afresh; the same one (a resend) goes on
  end
  redis.call('HSET', KEYS[12], 'interval', ARGV[2], 'burst', ARGV[3], 'rate', ARGV[4])
elseif op == 'unlimit' then
  redis.call('HDEL', KEYS[12], 'interval', 'burst', 'rate', 'tat')
end
if (op == 'limit' or op == 'unlimit') and redis.call('LLEN', KEYS[7]) == 0 then
  redis.call('LPUSH', KEYS[7], 1)  -- workers waiting for the old limit look again
end
local f = redis.call('HMGET', KEYS[12], 'paused', 'rate')
return {f[1] and 1 or 0, f[2] or ''}
