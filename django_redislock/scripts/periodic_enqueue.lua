-- Enqueue one tick of a periodic schedule at most once, ever, and remember it.
-- KEYS[1..11] the queue's keys in the queue scripts' order; this script uses KEYS[1] the
--   pending zset (id -> due time, microseconds since the epoch), KEYS[4] the payload hash,
--   KEYS[7] the signal list (a wake-up token that idle workers BLPOP), KEYS[9] and KEYS[10]
--   the priority index and levels (see the priority fragment), KEYS[11] the enqueue times
-- KEYS[12] the queue's schedule hash (schedule name -> last enqueued tick, microseconds)
-- KEYS[13] (optional) the queue's rates hash (a queued tick counts as enqueued)
-- ARGV[1] schedule name, ARGV[2] tick (microseconds since the epoch, UTC)
-- ARGV[3] the tick's task id, ARGV[4] serialized payload, ARGV[5] the task's priority level
-- returns 1 queued; 0 this tick (or a later one) was already enqueued: nothing changed;
--         2 the mark moved but a task with this id was already queued and was kept
--
-- The mark and the task change in one script on one slot (all keys share the queue's hash
-- tag), so no crash, timeout or resend can leave a tick marked but not queued, or queued
-- twice: a resent call finds the mark and changes nothing, and a tick that ran and was acked
-- is never queued again (the queue's own per-id dedup would forget it after the ack).
-- include: priority
-- include: rates
local tick = tonumber(ARGV[2])
local last = tonumber(redis.call('HGET', KEYS[12], ARGV[1]) or '-1')
if tick <= last then
  return 0
end
redis.call('HSET', KEYS[12], ARGV[1], ARGV[2])
-- a fresh id is the only case: an existing payload field means this exact tick was queued
-- by hand (or lives on as a dead letter), and the first copy is kept
if redis.call('HSETNX', KEYS[4], ARGV[3], ARGV[4]) == 0 then
  return 2
end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
redis.call('ZADD', KEYS[1], now, ARGV[3])
redis.call('HSET', KEYS[11], ARGV[3], string.format('%d', now))
local level = tonumber(ARGV[5])
if level > 0 then prio_set(ARGV[3], now, level) end
if redis.call('LLEN', KEYS[7]) == 0 then
  redis.call('LPUSH', KEYS[7], 1)
end
if #KEYS >= 13 then rate_count(KEYS[13], t[1], 'enqueued', '1') end
return 1
