-- Fragment: per task function counts and runtimes of a queue in fixed-size time buckets, all in
-- ONE hash (the queue's "fnstats" key; see django_redislock/queue/fnstats.py, which reads it).
-- Two rings of slots: "h" 12 slots of five minutes (the last hour), "d" 24 slots of one hour
-- (the last day). Slot k of ring r has the field "<r><k>" = the bucket it holds (seconds since
-- the epoch divided by the slot's width, server TIME); "<r><k>:f" = the function names seen
-- in it (newline-separated, at most FN_NAMES; further names are counted as "(other)"); and,
-- for the i-th name of that list, "<r><k>:<i>:n" runs, "<r><k>:<i>:x" failed runs,
-- "<r><k>:<i>:b<bin>" runs whose runtime fell in that histogram bin (4 bins per doubling of
-- the microseconds, see fnstats.py) and "<r><k>:<i>:l" the bins in use (for the reset).
-- Writing to a slot that holds an older bucket clears it first, so the hash never holds more
-- than its 36 slots. The hash expires FN_TTL ms after its last slot change (a day and an hour).
-- A key of another type is left alone (nothing is counted), so it never fails the worker.
local FN_RINGS = {{'h', 300, 12}, {'d', 3600, 24}}
local FN_NAMES = 20
local FN_TTL = 90000000
-- fn_reset(key, slot, bucket): clear a slot that holds an older bucket and give it bucket
local function fn_reset(key, slot, bucket)
  local stale = {slot .. ':f'}
  local seen = redis.call('HGET', key, slot .. ':f')
  if seen then
    local i = 0
    for _ in string.gmatch(seen, '[^\n]+') do
      i = i + 1
      local p = slot .. ':' .. i
      stale[#stale + 1] = p .. ':n'
      stale[#stale + 1] = p .. ':x'
      stale[#stale + 1] = p .. ':l'
      for bin in string.gmatch(redis.call('HGET', key, p .. ':l') or '', '[^,]+') do
        stale[#stale + 1] = p .. ':b' .. bin
      end
    end
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
      local p = slot .. ':' .. index[name]
      if item[2] ~= 0 then redis.call('HINCRBY', key, p .. ':n', item[2]) end
      if item[3] ~= 0 then redis.call('HINCRBY', key, p .. ':x', item[3]) end
      local bins = item[4]
      local added = nil
      for b = 1, #bins - 1, 2 do
        if redis.call('HINCRBY', key, p .. ':b' .. bins[b], bins[b + 1]) == bins[b + 1] then
          added = (added and added .. ',' or '') .. bins[b]
        end
      end
      if added then
        local list = redis.call('HGET', key, p .. ':l')
        redis.call('HSET', key, p .. ':l', list and list .. ',' .. added or added)
      end
    end
    if grown then redis.call('HSET', key, slot .. ':f', seen) end
  end
end
