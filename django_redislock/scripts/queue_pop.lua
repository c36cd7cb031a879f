-- Acknowledge finished tasks, return expired leases, then claim due tasks under a lease.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1] how many due tasks to claim (0 to a few thousand: ids go to single commands)
-- ARGV[2] lease in microseconds
-- ARGV[3] at most this many expired leases are handled (bounds the work of one call)
-- ARGV[4] attempts after which a task whose lease expired goes to the dead-letter set
-- ARGV[5..] ids to acknowledge first (saves the worker a round trip per batch)
-- returns {now, next due score or -1, earliest lease deadline or -1, acked, recovered,
--          then per claimed task: id, due score, attempts, payload, last error}
-- include: ack
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local count = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local max_attempts = tonumber(ARGV[4])

local acked = 0
if #ARGV >= 5 then
  local ids = {}
  for i = 5, #ARGV do ids[#ids + 1] = ARGV[i] end
  acked = ack(ids)
end

local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[2], id)
  if not redis.call('ZSCORE', KEYS[1], id) then
    local attempts = tonumber(redis.call('HGET', KEYS[5], id) or '0')
    local why = 'lease expired during attempt ' .. attempts ..
      ' (the worker died or the task ran past its lease)'
    redis.call('HSET', KEYS[6], id, why)
    if attempts >= max_attempts then
      redis.call('ZADD', KEYS[3], now, id)
    else
      redis.call('ZADD', KEYS[1], now, id)
    end
  end
end

local out = {now, -1, -1, acked, #expired}
if count > 0 then
  local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, count)
  local n = #due / 2
  if n > 0 then
    local ids = {}
    local claims = {}
    for i = 1, n do
      ids[i] = due[2 * i - 1]
      claims[2 * i - 1] = now + lease
      claims[2 * i] = ids[i]
    end
    redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
    for i = 1, 2 * n, 1000 do
      redis.call('ZADD', KEYS[2], unpack(claims, i, math.min(i + 999, 2 * n)))
    end
    local payloads = redis.call('HMGET', KEYS[4], unpack(ids))
    local errors = redis.call('HMGET', KEYS[6], unpack(ids))
    local attempts = redis.call('HMGET', KEYS[5], unpack(ids))
    local counted = {}
    for i = 1, n do
      attempts[i] = tonumber(attempts[i] or '0') + 1
      counted[2 * i - 1] = ids[i]
      counted[2 * i] = attempts[i]
    end
    for i = 1, 2 * n, 1000 do
      redis.call('HSET', KEYS[5], unpack(counted, i, math.min(i + 999, 2 * n)))
    end
    for i = 1, n do
      out[#out + 1] = ids[i]
      out[#out + 1] = due[2 * i]
      out[#out + 1] = attempts[i]
      out[#out + 1] = payloads[i] or ''
      out[#out + 1] = errors[i] or ''
    end
  end
end

local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
if first[2] then out[2] = first[2] end
if not first[2] or tonumber(first[2]) > now then
  redis.call('DEL', KEYS[7])
elseif redis.call('LLEN', KEYS[7]) == 0 then
  redis.call('LPUSH', KEYS[7], 1)  -- work is left: wake the next idle worker
end
local lease_first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
if lease_first[2] then out[3] = lease_first[2] end
return out
