-- One task by id, whatever its state, with at most ARGV[2] bytes of its payload (the admin's
-- task page: a payload of many megabytes written by another producer must not fill the page).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash, KEYS[9] priority index zset, KEYS[10] levels hash
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1] id, ARGV[2] bytes of the payload to return (0: all of it)
-- returns {} when unknown, else {now, state (1 pending, 2 in flight, 3 dead), score,
--          attempts, payload (or its first ARGV[2] bytes), payload size in bytes, last error,
--          priority level (0-9), enqueue time (server µs, -1 when not recorded)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cap = tonumber(ARGV[2])
for k = 1, 3 do
  local score = redis.call('ZSCORE', KEYS[k], ARGV[1])
  if score then
    local size = redis.call('HSTRLEN', KEYS[4], ARGV[1])
    local payload = redis.call('HGET', KEYS[4], ARGV[1]) or ''
    if cap > 0 and size > cap then payload = string.sub(payload, 1, cap) end
    return {now, k, score, tonumber(redis.call('HGET', KEYS[5], ARGV[1]) or '0'),
      payload, size, redis.call('HGET', KEYS[6], ARGV[1]) or '',
      tonumber(redis.call('HGET', KEYS[10], ARGV[1]) or '0'),
      tonumber(redis.call('HGET', KEYS[11], ARGV[1]) or '-1')}
  end
end
return {}
