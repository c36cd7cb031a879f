-- Enqueue tasks with one entry per id (seed 000's dedup) and wake waiting workers.
-- KEYS[1] pending zset (id -> due time, microseconds since the epoch; ready and delayed tasks)
-- KEYS[2] in-flight zset (id -> lease deadline, microseconds)
-- KEYS[3] dead-letter zset (id -> time of death, microseconds)
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash (fields are task ids)
-- KEYS[7] signal list (wake-up tokens that idle workers BLPOP)
-- ARGV[1] "1": reschedule ids that are already queued (replace); "0": keep the first copy
-- ARGV[2..] triples: id, delay in microseconds (>= 0), serialized payload
-- returns one integer per task: 1 queued (or rescheduled), 0 an earlier copy was kept
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local replace = ARGV[1] == '1'
local out = {}
local added = 0
local position = 0
local total = (#ARGV - 1) / 3
for i = 2, #ARGV, 3 do
  local id = ARGV[i]
  position = position + 1
  local queued = redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
  if queued and not replace then
    out[#out + 1] = 0
  else
    -- one microsecond per position keeps a batch in order, its scores distinct and not
    -- later than now + delay
    redis.call('ZADD', KEYS[1], now - total + position + tonumber(ARGV[i + 1]), id)
    redis.call('ZREM', KEYS[3], id)
    redis.call('HSET', KEYS[4], id, ARGV[i + 2])
    redis.call('HDEL', KEYS[5], id)
    redis.call('HDEL', KEYS[6], id)
    added = added + 1
    out[#out + 1] = 1
  end
end
if added > 0 then
  redis.call('LPUSH', KEYS[7], 1)
  redis.call('LTRIM', KEYS[7], 0, 15)
end
return out
