-- One page of tasks in one state, by score (keyset pagination for top() and the admin).
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1] which zset: 1 pending, 2 in flight, 3 dead
-- ARGV[2] lowest score (inclusive, "(score" exclusive, or "now": after the server's now)
-- ARGV[3] highest score, or "now" (the server's now)
-- ARGV[4] offset, ARGV[5] count
-- returns {now, then per task: id, score, attempts, payload, last error}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local zset = KEYS[tonumber(ARGV[1])]
local low = ARGV[2]
if low == 'now' then low = string.format('(%.0f', now) end
local high = ARGV[3]
if high == 'now' then high = now end
local page = redis.call('ZRANGEBYSCORE', zset, low, high, 'WITHSCORES', 'LIMIT',
  tonumber(ARGV[4]), tonumber(ARGV[5]))
local out = {now}
local n = #page / 2
if n == 0 then return out end
local ids = {}
for i = 1, n do ids[i] = page[2 * i - 1] end
local payloads = redis.call('HMGET', KEYS[4], unpack(ids))
local attempts = redis.call('HMGET', KEYS[5], unpack(ids))
local errors = redis.call('HMGET', KEYS[6], unpack(ids))
for i = 1, n do
  out[#out + 1] = ids[i]
  out[#out + 1] = page[2 * i]
  out[#out + 1] = tonumber(attempts[i] or '0')
  out[#out + 1] = payloads[i] or ''
  out[#out + 1] = errors[i] or ''
end
return out
