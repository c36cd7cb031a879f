-- One page of a bucket's index of held locks, pruning entries whose lock has expired.
-- KEYS[1] index names zset   KEYS[2] index expiry zset   KEYS[3] index metadata hash
-- KEYS[4] index counts hash
-- ARGV[1] lowest name in ZRANGEBYLEX form ("-", "[abc" or "(abc")
-- ARGV[2] highest name in ZRANGEBYLEX form ("+" or "[abc\xff")   ARGV[3] page size   ARGV[4] most stale entries to prune
-- returns {now_ms, total_live, name1, expiry1, meta1, count1, name2, ...}
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
if #stale > 0 then
  redis.call('ZREM', KEYS[1], unpack(stale))
  redis.call('ZREM', KEYS[2], unpack(stale))
  redis.call('HDEL', KEYS[3], unpack(stale))
  redis.call('HDEL', KEYS[4], unpack(stale))
end
local out = {now, redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf')}
local limit = tonumber(ARGV[3])
local names = redis.call('ZRANGEBYLEX', KEYS[1], ARGV[1], ARGV[2], 'LIMIT', 0, limit * 2)
local found = 0
for _, name in ipairs(names) do
  local expiry = redis.call('ZSCORE', KEYS[2], name)
  if expiry and tonumber(expiry) > now and found < limit then
    found = found + 1
    out[#out + 1] = name
    out[#out + 1] = expiry
    out[#out + 1] = redis.call('HGET', KEYS[3], name) or ''
    out[#out + 1] = redis.call('HGET', KEYS[4], name) or ''
  end
end
return out
