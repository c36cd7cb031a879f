-- Fragment: a queue's rates in fixed-size time buckets, all in ONE hash (the queue's "rates"
-- key; see django_redislock/queue/rates.py, which reads it).
-- Two rings of slots: "m" 60 slots of one minute, "s" 180 slots of one second. Slot k of
-- ring r has the field "<r><k>" = the bucket it holds (minutes or seconds since the epoch,
-- server TIME) and "<r><k>:<outcome>" = that bucket's counts. Writing to a slot that holds an
-- older bucket clears the slot first, so the hash never holds more than its 240 slots (and
-- a reader skips a slot whose bucket is not one of the last 60 minutes / 180 seconds).
-- Minute slots also count failures per exception type: "m<k>:t" = the type names seen in
-- that minute (newline-separated, at most RATE_TYPES), "m<k>:t:<name>" = how many; further
-- names of that minute are counted as "(other)".
-- Downsampled for the day and the week: when a minute slot is cleared for a later minute, its
-- counts are first added to two coarser rings (the minute is rolled up, once), "q" 96 slots of
-- 15 minutes and "w" 84 slots of two hours, each slot "<r><k>" = its bucket and
-- "<r><k>:<outcome>" its counts (failure types are not kept there). A reader adds the minute
-- slots not rolled up yet (every minute slot still in the hash) to the coarse buckets they
-- belong to: exact counts, never counted twice, and 1,080 more fields at most.
-- The hash expires RATE_TTL ms (a week and two hours) after the last minute it was written in:
-- an idle queue leaves nothing behind.
-- A key of another type is left alone (nothing is counted), so it never fails an enqueue.
-- The hash is kept in the server's hashtable encoding from its first write on (see rate_reset):
-- in the compact listpack encoding, used for a hash of fewer than 512 fields (a new queue's
-- first minutes), every HMGET and HINCRBY scans and rewrites the whole hash, which made the
-- counting cost more than the rest of an enqueue.
local RATE_RINGS = {{'m', 60, 60}, {'s', 1, 180}}
local RATE_TYPES = 20
local RATE_TTL = 612000000
local RATE_OUTCOMES = {'enqueued', 'succeeded', 'failed', 'retried', 'dead'}
-- rate_rollup(key, fields, old, minute): add the counts of minute slot fields (the five
-- outcome fields of a slot that held minute old) to the coarse rings, minute being the new one
-- (the rings' table is built here, not at the top: the enqueue script runs its top on every
-- call and this once a minute)
local function rate_rollup(key, fields, old, minute)
  local values = redis.call('HMGET', key, unpack(fields))
  local start = tonumber(old) * 60
  for _, ring in ipairs({{'q', 900, 96}, {'w', 7200, 84}}) do
    local bucket = math.floor(start / ring[2])
    if bucket > math.floor(tonumber(minute) * 60 / ring[2]) - ring[3] then
      local slot = ring[1] .. string.format('%d', bucket % ring[3])
      local mark = string.format('%d', bucket)
      if redis.call('HGET', key, slot) ~= mark then
        local stale = {}
        for _, outcome in ipairs(RATE_OUTCOMES) do stale[#stale + 1] = slot .. ':' .. outcome end
        redis.call('HDEL', key, unpack(stale))
        redis.call('HSET', key, slot, mark)
      end
      for i, outcome in ipairs(RATE_OUTCOMES) do
        if values[i] then redis.call('HINCRBY', key, slot .. ':' .. outcome, values[i]) end
      end
    end
  end
end
-- rate_reset(key, slot, bucket, old): clear a slot that holds an older bucket (old, or nil when
-- none, or a second slot) and give it bucket, a minute slot's counts rolled up first; the
-- hash's expiry is renewed here (at most once a second), not on every write
local function rate_reset(key, slot, bucket, old)
  local stale = {}
  for _, outcome in ipairs(RATE_OUTCOMES) do stale[#stale + 1] = slot .. ':' .. outcome end
  local m = string.sub(slot, 1, 1) == 'm'
  if old and tonumber(old) and m then
    rate_rollup(key, stale, old, bucket)
  end
  local seen = redis.call('HGET', key, slot .. ':t')
  if seen then
    stale[#stale + 1] = slot .. ':t'
    for name in string.gmatch(seen, '[^\n]+') do stale[#stale + 1] = slot .. ':t:' .. name end
  end
  redis.call('HDEL', key, unpack(stale))
  redis.call('HSET', key, slot, bucket)
  redis.call('PEXPIRE', key, RATE_TTL)
  -- a value longer than hash-max-listpack-value (64 bytes unless configured) turns the hash
  -- into a hashtable for good; the field goes at once, so readers never see it (checked once a
  -- minute: a hash loaded from a snapshot or a replica's full sync comes back compact; a
  -- server without OBJECT, such as fakeredis, answers an error and is left as it is)
  if m then
    local encoding = redis.pcall('OBJECT', 'ENCODING', key)
    if type(encoding) == 'string' and encoding ~= 'hashtable' then
      redis.call('HSET', key, '-', string.rep('-', 1024))
      redis.call('HDEL', key, '-')
    end
  end
end
-- rate_count(key, sec, outcome, n, held): add n (a count, best as text) to one outcome in both
-- rings at second sec (the text TIME gave), the enqueue scripts' fast path: HMGET, two
-- HINCRBY, and the minute turned into text only when a slot holds an older bucket (once a
-- second); held, when given, is the reply of that HMGET of the two slots' buckets, already
-- sent (the enqueue script's one-task path and the take's order task send it before this
-- fragment is built). sec must be text: it is compared with the second slot's bucket as it
-- stands.
local function rate_count(key, sec, outcome, n, held)
  local now_s = tonumber(sec)
  local minute = (now_s - now_s % 60) / 60
  local m, s = 'm' .. minute % 60, 's' .. now_s % 180
  -- another program's key of another type there: count nothing rather than fail the caller
  held = held or redis.pcall('HMGET', key, m, s)
  if held.err then return end
  if held[2] ~= sec or tonumber(held[1]) ~= minute then
    local mb = string.format('%d', minute)
    if held[1] ~= mb then rate_reset(key, m, mb, held[1]) end
    if held[2] ~= sec then rate_reset(key, s, sec) end
  end
  redis.call('HINCRBY', key, m .. ':' .. outcome, n)
  redis.call('HINCRBY', key, s .. ':' .. outcome, n)
end
-- rate_add(key, now_s, counts, types): add counts (outcome -> n) to the buckets of now_s in
-- both rings, and types (exception type name -> n, failures) to the minute's type counts.
-- Three commands in the common case (HMGET, two HINCRBY): it runs in every enqueue.
local function rate_add(key, now_s, counts, types)
  local slots, buckets = {}, {}
  for i, ring in ipairs(RATE_RINGS) do
    local bucket = math.floor(now_s / ring[2])
    buckets[i] = string.format('%d', bucket)
    slots[i] = ring[1] .. string.format('%d', bucket % ring[3])
  end
  -- another program's key of another type there: count nothing rather than fail the caller
  -- (a script that errors half-way keeps what it wrote: the tasks would be queued anyway)
  local held = redis.pcall('HMGET', key, slots[1], slots[2])
  if held.err then return end
  for i = 1, #slots do
    if held[i] ~= buckets[i] then rate_reset(key, slots[i], buckets[i], held[i]) end
  end
  for i = 1, #slots do
    for outcome, n in pairs(counts) do
      if n ~= 0 then redis.call('HINCRBY', key, slots[i] .. ':' .. outcome, n) end
    end
  end
  local minute = slots[1]
  if types then
    local seen = redis.call('HGET', key, minute .. ':t') or ''
    local names = {}
    for name in string.gmatch(seen, '[^\n]+') do names[name] = true end
    local known = 0
    for _ in pairs(names) do known = known + 1 end
    for name, n in pairs(types) do
      name = string.gsub(name, '\n', ' ')
      if not names[name] then
        if known >= RATE_TYPES then name = '(other)' end
        if not names[name] then
          names[name] = true
          known = known + 1
          seen = seen .. name .. '\n'
        end
      end
      redis.call('HINCRBY', key, minute .. ':t:' .. name, n)
    end
    redis.call('HSET', key, minute .. ':t', seen)
  end
end
