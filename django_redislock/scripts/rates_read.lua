-- Read a queue's current rate buckets (see the rates fragment) by the server's clock.
-- KEYS[1] the queue's rates hash
-- returns {server time in seconds, then field, value, ... of the hash's fields that belong to
--          the last 60 minutes and 180 seconds, failure types included}: at most ~2,700
--          fields, read with HMGET (never HGETALL: no more than the slots that count)
local now = tonumber(redis.call('TIME')[1])
local outcomes = {'enqueued', 'succeeded', 'failed', 'retried', 'dead'}
local wanted = {}
for _, ring in ipairs({{'m', 60, 60}, {'s', 1, 180}}) do
  local current = math.floor(now / ring[2])
  for bucket = current - ring[3] + 1, current do
    local slot = ring[1] .. string.format('%d', bucket % ring[3])
    wanted[#wanted + 1] = slot
    for _, outcome in ipairs(outcomes) do wanted[#wanted + 1] = slot .. ':' .. outcome end
    if ring[1] == 'm' then wanted[#wanted + 1] = slot .. ':t' end
  end
end
local out = {now}
local function emit(names, values)
  for i = 1, #names do
    if values[i] then
      out[#out + 1] = names[i]
      out[#out + 1] = values[i]
    end
  end
end
local values = {}
for i = 1, #wanted, 500 do
  local part = redis.call('HMGET', KEYS[1], unpack(wanted, i, math.min(i + 499, #wanted)))
  for k = 1, #part do values[i + k - 1] = part[k] end
end
emit(wanted, values)
local typed = {}
for i = 1, #wanted do
  if values[i] and string.sub(wanted[i], -2) == ':t' then
    for name in string.gmatch(values[i], '[^\n]+') do typed[#typed + 1] = wanted[i] .. ':' .. name end
  end
end
for i = 1, #typed, 500 do
  local names = {unpack(typed, i, math.min(i + 499, #typed))}
  emit(names, redis.call('HMGET', KEYS[1], unpack(names)))
end
return out
