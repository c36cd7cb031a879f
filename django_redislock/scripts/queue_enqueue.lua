-- Enqueue tasks with one entry per id (a queued id is not queued twice) and wake waiting workers.
-- KEYS[1] pending zset (id -> due time, microseconds since the epoch; ready and delayed tasks)
-- KEYS[2] in-flight zset (id -> lease deadline, microseconds)
-- KEYS[3] dead-letter zset (id -> time of death, microseconds)
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash (fields are task ids)
-- KEYS[7] signal list (a wake-up token that idle workers BLPOP)
-- KEYS[8] claims hash (id -> claim token of an in-flight task; see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- KEYS[12] rates hash (the enqueued count goes to its time buckets; see the rates fragment)
-- KEYS[13] (optional, sent with replace) this request's key: a resent call (same key) answers
--         the first call's reply and changes nothing
--         With the "u" flag (below) KEYS[13] is the unique zset (id -> server µs its
--         unique_for window ends; written by the ack scripts, see the claims fragment) and
--         the request key, if any, is KEYS[14].
-- ARGV[1] "1": reschedule ids that are already queued (replace); "0": keep the first copy;
--         followed by the tasks' priority level when it is not 0 ("05": level 5); the whole
--         flag prefixed with "u" ("u0", "u15") refuses ids whose unique_for window is open
-- ARGV[2..] triples: id, delay in microseconds (>= 0), serialized payload
-- returns one integer per task: 1 queued (or rescheduled), 0 an earlier copy was kept,
--         2 refused: the id completed within its unique_for window (nothing written)
--
-- A replaced in-flight task leaves the in-flight set and its claim is forgotten: the new copy
-- is a task of its own, and the run of the old one can no longer ack, retry, release or
-- extend anything (those calls answer lost).
--
-- Every script keeps a payload field (and its enqueue time in KEYS[11]) exactly while the id
-- is in one of the three zsets, so
-- HSETNX on the payload hash is the dedup check of the common case (a fresh id): three
-- commands per task. Ids that exist take the slow path, which also repairs an orphan field.
--
-- The common call, one task of level 0 with no replace, unique_for or request key (what
-- delay() sends), runs first, before the fragments' functions below are built: a script
-- builds its local functions and tables on every call, and those and the general loop took
-- a tenth to a fifth of its server time. It sends the same commands as the general path
-- (TIME, HSETNX, ZADD, HSET, LLEN, the rate buckets' HMGET and two HINCRBY) and leaves the
-- rest to it: an id that exists but is not live (an orphan field, a dead task), and rate
-- slots that hold an older bucket (once a second), go on below with what was already done.
local t, held
if ARGV[1] == '0' and #ARGV == 4 and #KEYS == 12 then
  t = redis.call('TIME')
  local id = ARGV[2]
  if redis.call('HSETNX', KEYS[4], id, ARGV[4]) == 1 then
    -- the instant as exact text, seconds then six digits, which is also the score of a task
    -- without delay (a number sent to a command is turned into text at the server's cost)
    local micros = t[2]
    if #micros < 6 then micros = string.rep('0', 6 - #micros) .. micros end
    local stamp = t[1] .. micros
    local score = stamp
    if ARGV[3] ~= '0' then score = tonumber(stamp) + tonumber(ARGV[3]) end
    redis.call('ZADD', KEYS[1], score, id)
    redis.call('HSET', KEYS[11], id, stamp)
    if redis.call('LLEN', KEYS[7]) == 0 then
      redis.call('LPUSH', KEYS[7], '1')
    end
    -- rate_count's fast path (the rates fragment): both slots hold this minute and second,
    -- checked without turning the minute into text (the second is TIME's own text)
    local now_s = tonumber(t[1])
    local minute = (now_s - now_s % 60) / 60
    local m, s = 'm' .. minute % 60, 's' .. now_s % 180
    held = redis.pcall('HMGET', KEYS[12], m, s)
    if held.err then return {1} end
    if held[2] == t[1] and tonumber(held[1]) == minute then
      redis.call('HINCRBY', KEYS[12], m .. ':enqueued', '1')
      redis.call('HINCRBY', KEYS[12], s .. ':enqueued', '1')
      return {1}
    end
  elseif redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id) then
    return {0}
  end
end
-- include: priority
-- include: rates
if held then  -- the one-task path queued its task; a rate slot holds an older bucket
  rate_count(KEYS[12], t[1], 'enqueued', '1', held)
  return {1}
end
local unique = string.byte(ARGV[1]) == 117  -- "u"
local flag = unique and string.sub(ARGV[1], 2) or ARGV[1]
local req = unique and 14 or 13
if #KEYS >= req then
  local seen = redis.call('LRANGE', KEYS[req], 0, -1)
  if #seen > 0 then
    for i = 1, #seen do seen[i] = tonumber(seen[i]) end
    return seen
  end
end
t = t or redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local replace = string.sub(flag, 1, 1) == '1'
local level = tonumber(string.sub(flag, 2)) or 0
local out = {}
local added = 0
local stamps = {}  -- id, enqueue time, ... of the tasks queued anew (one HSET at the end)
local stamp = string.format('%d', now)
local total = (#ARGV - 1) / 3
for i = 2, #ARGV, 3 do
  local id = ARGV[i]
  -- one microsecond per position keeps a batch in order, its scores distinct and not
  -- later than now + delay
  local score = now - total + (i + 1) / 3 + tonumber(ARGV[i + 1])
  local queued, code = 1, nil
  if unique and tonumber(redis.call('ZSCORE', KEYS[13], id) or '0') > now then
    queued, code = 0, 2
  elseif redis.call('HSETNX', KEYS[4], id, ARGV[i + 2]) == 1 then
    redis.call('ZADD', KEYS[1], score, id)
    if level > 0 then prio_set(id, score, level) end
    stamps[#stamps + 1] = id
    stamps[#stamps + 1] = stamp
  else
    local live = redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
    if live and not replace then
      queued = 0
    else
      -- rescheduled, back from the dead letters, or an orphan field: start afresh
      redis.call('ZADD', KEYS[1], score, id)
      redis.call('ZREM', KEYS[2], id)
      redis.call('ZREM', KEYS[3], id)
      redis.call('HDEL', KEYS[8], id)
      redis.call('HSET', KEYS[4], id, ARGV[i + 2])
      redis.call('HDEL', KEYS[5], id)
      redis.call('HDEL', KEYS[6], id)
      prio_set(id, score, level)
      stamps[#stamps + 1] = id
      stamps[#stamps + 1] = stamp
    end
  end
  added = added + queued
  out[#out + 1] = code or queued
end
for i = 1, #stamps, 1000 do
  redis.call('HSET', KEYS[11], unpack(stamps, i, math.min(i + 999, #stamps)))
end
if added > 0 and redis.call('LLEN', KEYS[7]) == 0 then
  redis.call('LPUSH', KEYS[7], 1)
end
if added > 0 then rate_count(KEYS[12], t[1], 'enqueued', added) end
if #KEYS >= req then
  for i = 1, #out, 1000 do
    redis.call('RPUSH', KEYS[req], unpack(out, i, math.min(i + 999, #out)))
  end
  redis.call('PEXPIRE', KEYS[req], 60000)
end
return out
