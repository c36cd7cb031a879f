-- Fragment: per task function counts and runtimes of a queue in fixed-size time buckets, all in
-- ONE hash (the queue's "fnstats" key; see django_redislock/queue/fnstats.py, which reads it).
-- Two rings of slots: "h" 12 slots of five minutes (the last hour), "d" 24 slots of one hour
-- (the last day). Slot k of ring r has the field "<r><k>" = the bucket it holds (seconds since
-- the epoch divided by the slot's width, server TIME); "<r><k>:f" = the function names seen
-- in it (newline-separated, at most FN_NAMES; further names are counted as "(other)"); and,
-- for the i-th name of that list, "<r><k>:<i>" = the JSON array [runs, failed, bin, count, bin,
-- count, ...]: its runs, failed runs and runtime histogram (4 bins per doubling of the
-- microseconds, bins 16 to 136, see fnstats.py), one field per function and slot (a reader
-- decodes one array with cjson, not a field per bin: at most 36 x 20 arrays of 121 pairs).
-- Writing to a slot that holds an older bucket clears it first, so the hash never holds more
-- than its 36 slots. The hash expires FN_TTL ms after its last slot change (a day and an hour).
-- A key of another type is left alone (nothing is counted), so it never fails the worker.
local FN_RINGS = {{'h', 300, 12}, {'d', 3600, 24}}
local FN_NAMES = 20
local FN_TTL = 90000000
-- fn_decode(raw): runs, failed, {bin = count} of a function's field (zeros for nil or junk)
local function fn_decode(raw)
  local ok, a = pcall(cjson.decode, raw or '[]')
  if not ok or type(a) ~= 'table' then return 0, 0, {} end
  local h = {}
  for i = 3, #a - 1, 2 do
    local b, c = tonumber(a[i]), tonumber(a[i + 1])
    if b and c then h[b] = (h[b] or 0) + c end
  end
  return tonumber(a[1]) or 0, tonumber(a[2]) or 0, h
end
-- fn_reset(key, slot, bucket): clear a slot that holds an older bucket and give it bucket
local function fn_reset(key, slot, bucket)
  local stale = {slot .. ':f'}
  local i = 0
  for _ in string.gmatch(redis.call('HGET', key, slot .. ':f') or '', '[^\n]+') do
    i = i + 1
    stale[#stale + 1] = slot .. ':' .. i
  end
  redis.call('HDEL', key, unpack(stale))
  redis.call('HSET', key, slot, bucket)
  redis.call('PEXPIRE', key, FN_TTL)
end
-- fn_add(key, now_s, items): items = {{name, runs, failed, {bin, count, ...}}, ...}
local function fn_add(key, now_s, items)
  local slots, buckets = {}, {}
  for i, ring in ipairs(FN_RINGS) do
    local bucket = math.floor(now_s / ring[2])
    buckets[i] = string.format('%d', bucket)
    slots[i] = ring[1] .. string.format('%d', bucket % ring[3])
  end
  local held = redis.pcall('HMGET', key, slots[1], slots[2])
  if held.err then return end
  for r = 1, #slots do
    local slot = slots[r]
    if held[r] ~= buckets[r] then fn_reset(key, slot, buckets[r]) end
    local seen = redis.call('HGET', key, slot .. ':f') or ''
    local index, known = {}, 0
    for name in string.gmatch(seen, '[^\n]+') do
      known = known + 1
      index[name] = known
    end
    local grown = false
    for _, item in ipairs(items) do
      local name = item[1]
      if not index[name] and known >= FN_NAMES then name = '(other)' end
      if not index[name] then
        known = known + 1
        index[name] = known
        seen = seen .. name .. '\n'
        grown = true
      end
      local field = slot .. ':' .. index[name]
      local n, x, h = fn_decode(redis.call('HGET', key, field))
      local bins = item[4]
      for b = 1, #bins - 1, 2 do h[bins[b]] = (h[bins[b]] or 0) + bins[b + 1] end
      local parts = {string.format('%d,%d', n + item[2], x + item[3])}
      for bin, count in pairs(h) do parts[#parts + 1] = string.format('%d,%d', bin, count) end
      redis.call('HSET', key, field, '[' .. table.concat(parts, ',') .. ']')
    end
    if grown then redis.call('HSET', key, slot .. ':f', seen) end
  end
end
