-- Enqueue one task due now at level 0, keeping a queued copy: what delay() sends.
-- The one-task path of queue_enqueue.lua (the same commands, the same writes) with only the
-- keys that path uses: a call of queue_enqueue.lua carries all twelve of its keys, which
-- the server reads into the script's KEYS table on every call.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] payload hash, KEYS[4] signal list,
-- KEYS[5] enqueue times hash, KEYS[6] rates hash (queue_enqueue.lua's KEYS[1], [2], [4], [7],
--         [11] and [12])
-- ARGV[1] the task id, ARGV[2] its serialized payload
-- returns 1 queued, 0 a copy that is queued or in flight was kept, -1 nothing was
--         written: the id has a payload field but is in neither set (an orphan field, a dead
--         task), which queue_enqueue.lua repairs or revives, so the caller sends it there
--         (an integer, not an array: an array reply is a table the server builds and reads)
local id = ARGV[1]
local t = redis.call('TIME')
if redis.call('HSETNX', KEYS[3], id, ARGV[2]) == 0 then
  if redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id) then
    return 0
  end
  return -1
end
-- the instant as exact text, seconds then six digits: the task's score and its enqueue time
local micros = t[2]
if #micros < 6 then micros = string.rep('0', 6 - #micros) .. micros end
local stamp = t[1] .. micros
redis.call('ZADD', KEYS[1], stamp, id)
redis.call('HSET', KEYS[5], id, stamp)
if redis.call('LLEN', KEYS[4]) == 0 then
  redis.call('LPUSH', KEYS[4], '1')
end
-- rate_count's fast path (the rates fragment): both slots hold this minute and second,
-- checked without turning the minute into text (the second is TIME's own text). The slots'
-- names are the same text as rate_count's 'm' .. minute % 60, written with '%d': Lua turns a
-- number into text with '%.14g', a floating-point format that cost more than the call
local now_s = tonumber(t[1])
local minute = (now_s - now_s % 60) / 60
local m, s = string.format('m%d', minute % 60), string.format('s%d', now_s % 180)
local held = redis.pcall('HMGET', KEYS[6], m, s)
if held.err then return 1 end
if held[2] == t[1] and tonumber(held[1]) == minute then
  redis.call('HINCRBY', KEYS[6], m .. ':enqueued', '1')
  redis.call('HINCRBY', KEYS[6], s .. ':enqueued', '1')
  return 1
end
-- a rate slot holds an older bucket (once a second): the fragment is built only now
-- include: rates
rate_count(KEYS[6], t[1], 'enqueued', '1', held)
return 1
