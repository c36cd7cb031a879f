-- A queue's counts per outcome over the last day (96 buckets of 15 minutes) and the last week
-- (84 buckets of two hours), by the server's clock, from the rates hash's coarse rings plus the
-- minute slots not rolled up into them yet (see the rates fragment). Read-only.
-- KEYS[1] the queue's rates hash
-- returns {server time in seconds, then per ring (the day's, then the week's): the epoch second
--          its first bucket starts, then per outcome (enqueued, succeeded, failed, retried,
--          dead) its counts, oldest bucket first; the last bucket is the current one}
local now = tonumber(redis.call('TIME')[1])
local outcomes = {'enqueued', 'succeeded', 'failed', 'retried', 'dead'}
local rings = {{'q', 900, 96}, {'w', 7200, 84}}
local out = {now}
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return out end
local counts, firsts = {}, {}
for r, ring in ipairs(rings) do
  firsts[r] = math.floor(now / ring[2]) - ring[3] + 1
  counts[r] = {}
  for o = 1, #outcomes do
    counts[r][o] = {}
    for i = 1, ring[3] do counts[r][o][i] = 0 end
  end
end
-- add(r, bucket, values): values (one per outcome) into bucket of ring r, when in its window
local function add(r, bucket, values)
  local i = bucket - firsts[r] + 1
  if i < 1 or i > rings[r][3] then return end
  for o = 1, #outcomes do counts[r][o][i] = counts[r][o][i] + (tonumber(values[o]) or 0) end
end
-- fields(slot): the slot's bucket field, then its outcome fields
local function fields(slot)
  local names = {slot}
  for _, outcome in ipairs(outcomes) do names[#names + 1] = slot .. ':' .. outcome end
  return names
end
for r, ring in ipairs(rings) do
  for k = 0, ring[3] - 1 do
    local v = redis.call('HMGET', KEYS[1], unpack(fields(ring[1] .. k)))
    if tonumber(v[1]) then add(r, tonumber(v[1]), {unpack(v, 2)}) end
  end
end
for k = 0, 59 do
  local v = redis.call('HMGET', KEYS[1], unpack(fields('m' .. k)))
  if tonumber(v[1]) then
    local start = tonumber(v[1]) * 60
    for r, ring in ipairs(rings) do add(r, math.floor(start / ring[2]), {unpack(v, 2)}) end
  end
end
for r, ring in ipairs(rings) do
  out[#out + 1] = firsts[r] * ring[2]
  for o = 1, #outcomes do
    for i = 1, ring[3] do out[#out + 1] = counts[r][o][i] end
  end
end
return out
