-- One page of a bucket's index of held lock names, pruning names released or expired.
-- KEYS[1] index names zset   KEYS[2] index expiry zset
-- ARGV[1] lowest name in ZRANGEBYLEX form ("-", "[abc" or "(abc")
-- ARGV[2] highest name in ZRANGEBYLEX form ("+", "[abc\xff" or "(abc")   ARGV[3] page size
-- ARGV[4] most stale names to prune
-- ARGV[5] "r" to walk backward from ARGV[2] (the page before a cursor), "" to walk forward
-- ARGV[6] most names to look at (live or stale) before giving up on filling the page
-- returns {now_ms, total_live, stop, name1, expiry1, name2, expiry2, ...} in name order
--         (descending with ARGV[5] "r"); stop is "" unless the walk gave up after ARGV[6]
--         names with the range not done, and then the last name it looked at (the caller
--         lists nothing beyond it). The holders' details are in each lock's own keys.
local t = redis.call('TIME')
local now = t[1] * 1000 + math.floor(t[2] / 1000)
local stale = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
if #stale > 0 then
  redis.call('ZREM', KEYS[1], unpack(stale))
  redis.call('ZREM', KEYS[2], unpack(stale))
end
local out = {now, redis.call('ZCOUNT', KEYS[2], '(' .. now, '+inf'), ''}
local limit, budget = tonumber(ARGV[3]), tonumber(ARGV[6])
local backward = ARGV[5] == 'r'
local low, high = ARGV[1], ARGV[2]
local found, seen = 0, 0
-- Names past their expiry that the prune above did not reach (more than ARGV[4] of them)
-- are skipped; the walk goes on in batches until the page is full or the range ends.
while found < limit do
  if seen >= budget then
    out[3] = backward and string.sub(high, 2) or string.sub(low, 2)
    break
  end
  local batch = math.min(math.max(limit * 2, 64), budget - seen)
  local names
  if backward then
    names = redis.call('ZREVRANGEBYLEX', KEYS[1], high, low, 'LIMIT', 0, batch)
  else
    names = redis.call('ZRANGEBYLEX', KEYS[1], low, high, 'LIMIT', 0, batch)
  end
  for _, name in ipairs(names) do
    seen = seen + 1
    local expiry = redis.call('ZSCORE', KEYS[2], name)
    if expiry and tonumber(expiry) > now then
      found = found + 1
      out[#out + 1] = name
      out[#out + 1] = expiry
      if found == limit then break end
    end
  end
  if #names < batch then break end  -- the range is done
  if backward then high = '(' .. names[#names] else low = '(' .. names[#names] end
end
return out
