-- Push back the lease deadline of in-flight tasks (long tasks call this while they run).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1] lease in microseconds from now, ARGV[2..] task ids
-- returns {new deadline, then per id 1 extended or 0 not in flight (the lease was lost)}
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1])
local out = {deadline}
for i = 2, #ARGV do
  if redis.call('ZSCORE', KEYS[2], ARGV[i]) then
    redis.call('ZADD', KEYS[2], deadline, ARGV[i])
    out[i] = 1
  else
    out[i] = 0
  end
end
return out
