-- Enqueue tasks of concurrency groups (one entry per id, as queue_enqueue.lua): each is held
-- and admitted to pending at once when its group has a free slot (see the groups fragment).
-- KEYS[1..11] the queue's keys (as queue_enqueue.lua), KEYS[12] rates hash
-- KEYS[13] hold zset, KEYS[14] groups hash, KEYS[15] wait zset, KEYS[16] tasks hash (see
--          the groups fragment)
-- KEYS[17] flow hash: its "groups" field is set (claims then look at groups; see the flow
--          fragment)
-- KEYS[18] (optional, sent with replace) this request's key: a resent call answers the first
--          call's reply and changes nothing
-- ARGV[1] "1": reschedule ids that are already queued (replace); "0": keep the first copy;
--         followed by the tasks' priority level when it is not 0 ("05": level 5)
-- ARGV[2] the group's limits "<concurrency>,<interval µs, 0 for no rate limit>,<burst>"
-- ARGV[3..] quads: id, delay in microseconds (>= 0), serialized payload, group
-- returns one integer per task: 1 queued (or rescheduled), 0 an earlier copy was kept
-- include: priority
-- include: gcra
-- include: groups
-- include: rates
if #KEYS >= 18 then
  local seen = redis.call('LRANGE', KEYS[18], 0, -1)
  if #seen > 0 then
    for i = 1, #seen do seen[i] = tonumber(seen[i]) end
    return seen
  end
end
local G = {KEYS[13], KEYS[14], KEYS[15], KEYS[16]}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local replace = string.sub(ARGV[1], 1, 1) == '1'
local level = tonumber(string.sub(ARGV[1], 2)) or 0
local out, touched, order, stamps = {}, {}, {}, {}
local added = 0
local stamp = string.format('%d', now)
local total = (#ARGV - 2) / 4
for i = 3, #ARGV, 4 do
  local id, payload, g = ARGV[i], ARGV[i + 2], ARGV[i + 3]
  local due = now - total + (i + 1) / 4 + tonumber(ARGV[i + 1])
  local queued = 1
  if redis.call('HSETNX', KEYS[4], id, payload) == 0 then
    local live = redis.call('ZSCORE', KEYS[1], id) or redis.call('ZSCORE', KEYS[2], id)
      or redis.call('HEXISTS', G[4], 'h:' .. id) == 1
    if live and not replace then
      queued = 0
    else  -- rescheduled, back from the dead letters, or an orphan field: start afresh
      grp_forget(G, id, now)
      redis.call('ZREM', KEYS[1], id)
      redis.call('ZREM', KEYS[2], id)
      redis.call('ZREM', KEYS[3], id)
      redis.call('HDEL', KEYS[8], id)
      redis.call('HSET', KEYS[4], id, payload)
      redis.call('HDEL', KEYS[5], id)
      redis.call('HDEL', KEYS[6], id)
      prio_set(id, due, 0)
    end
  end
  if queued == 1 then
    if level > 0 then redis.call('HSET', KEYS[10], id, level) end
    grp_hold(G, g, id, due)
    stamps[#stamps + 1] = id
    stamps[#stamps + 1] = stamp
    if not touched[g] then
      touched[g] = true
      order[#order + 1] = g
      redis.call('HSET', G[2], 'l:' .. g, ARGV[2])
    end
  end
  added = added + queued
  out[#out + 1] = queued
end
for i = 1, #stamps, 1000 do
  redis.call('HSET', KEYS[11], unpack(stamps, i, math.min(i + 999, #stamps)))
end
if added > 0 then
  redis.call('HSET', KEYS[17], 'groups', '1')
  for _, g in ipairs(order) do grp_admit(G, g, now) end
  rate_count(KEYS[12], t[1], 'enqueued', added)
end
if #KEYS >= 18 then
  for i = 1, #out, 1000 do
    redis.call('RPUSH', KEYS[18], unpack(out, i, math.min(i + 999, #out)))
  end
  redis.call('PEXPIRE', KEYS[18], 60000)
end
return out
