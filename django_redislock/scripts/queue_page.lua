-- One page of a queue's tasks in one state, by (score, id), and the count of each state
-- (Queue.tasks() and the admin's queue page).
-- The cursor's place is found by rank (ZCOUNT, then a binary search among equal scores), so a
-- page costs O(log N + page size) whatever the queue holds, and equal scores are never skipped.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash, KEYS[9] priority index zset, KEYS[10] levels hash
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1] state: "ready", "delayed", "in_flight" or "dead"
-- ARGV[2] direction: "first", "last", "after" or "before" (the cursor)
-- ARGV[3] cursor score, ARGV[4] cursor id (ignored for "first" and "last")
-- ARGV[5] page size, ARGV[6] bytes of each payload to return (a preview; 0: all of it)
-- returns {now, ready, delayed, in flight, dead, rank of the first row, first rank of the
--          state, end rank of the state, then per task: id, score, attempts, payload preview,
--          payload size, last error, priority level (0-9)}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local due = redis.call('ZCOUNT', KEYS[1], '-inf', now)
local pending = redis.call('ZCARD', KEYS[1])
local flying = redis.call('ZCARD', KEYS[2])
local dead = redis.call('ZCARD', KEYS[3])
local state = ARGV[1]
local zset, low, high = KEYS[1], 0, due
if state == 'delayed' then low, high = due, pending
elseif state == 'in_flight' then zset, high = KEYS[2], flying
elseif state == 'dead' then zset, high = KEYS[3], dead end

-- byte order, as the zset orders members of equal score (Lua's < follows the locale)
local function above(a, b, strict)
  for i = 1, math.min(#a, #b) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x > y end
  end
  if #a == #b then return not strict end
  return #a > #b
end

-- the first rank whose (score, member) is above the cursor (strict) or at/above it
local function place(score, id, strict)
  local lo = redis.call('ZCOUNT', zset, '-inf', '(' .. score)
  local hi = redis.call('ZCOUNT', zset, '-inf', score)
  while lo < hi do
    local mid = math.floor((lo + hi) / 2)
    if above(redis.call('ZRANGE', zset, mid, mid)[1], id, strict) then hi = mid else lo = mid + 1 end
  end
  return lo
end

local size = tonumber(ARGV[5])
local start = low
if ARGV[2] == 'last' then
  start = high - size
elseif ARGV[2] == 'after' then
  start = place(ARGV[3], ARGV[4], true)
elseif ARGV[2] == 'before' then
  start = math.min(place(ARGV[3], ARGV[4], false), high) - size
end
start = math.max(start, low)
local stop = math.min(start + size, high) - 1
local out = {now, due, pending - due, flying, dead, start, low, high}
if stop < start then return out end
local page = redis.call('ZRANGE', zset, start, stop, 'WITHSCORES')
local ids = {}
for i = 1, #page / 2 do ids[i] = page[2 * i - 1] end
local payloads = redis.call('HMGET', KEYS[4], unpack(ids))
local attempts = redis.call('HMGET', KEYS[5], unpack(ids))
local errors = redis.call('HMGET', KEYS[6], unpack(ids))
local levels = redis.call('HMGET', KEYS[10], unpack(ids))
local preview = tonumber(ARGV[6])
for i = 1, #ids do
  local payload = payloads[i] or ''
  out[#out + 1] = ids[i]
  out[#out + 1] = page[2 * i]
  out[#out + 1] = tonumber(attempts[i] or '0')
  out[#out + 1] = preview > 0 and string.sub(payload, 1, preview) or payload
  out[#out + 1] = #payload
  out[#out + 1] = errors[i] or ''
  out[#out + 1] = tonumber(levels[i] or '0')
end
return out
