-- One task by id, whatever its state.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash, KEYS[9] priority index zset, KEYS[10] levels hash
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1] id
-- returns {} when unknown, else {now, state (1 pending, 2 in flight, 3 dead), score,
--          attempts, payload, last error, priority level (0-9),
--          enqueue time (server µs, -1 when not recorded)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for k = 1, 3 do
  local score = redis.call('ZSCORE', KEYS[k], ARGV[1])
  if score then
    return {now, k, score, tonumber(redis.call('HGET', KEYS[5], ARGV[1]) or '0'),
      redis.call('HGET', KEYS[4], ARGV[1]) or '', redis.call('HGET', KEYS[6], ARGV[1]) or '',
      tonumber(redis.call('HGET', KEYS[10], ARGV[1]) or '0'),
      tonumber(redis.call('HGET', KEYS[11], ARGV[1]) or '-1')}
  end
end
return {}
