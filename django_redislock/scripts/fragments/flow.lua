-- Fragment: pause and the queue's rate limit, read from the queue's flow hash (the claim
-- script includes it).
-- KEYS[12] flow hash: "paused" -> "1" while the queue is paused; "interval" and "burst" its
-- rate limit (µs between two tasks, tasks admitted at once); "tat" the limit's theoretical
-- arrival time (GCRA, µs of server time); "groups" -> "1" once a task of a concurrency group
-- was queued here (see the groups fragment). No other field is read here.
-- flow_quota(now, count): how many tasks this claim may take (0 while paused), whether the
-- queue is paused, the limit's state for flow_charge (nil without a limit), and whether the
-- queue has concurrency groups (read in the same command: a queue without pays nothing)
local function flow_quota(now, count)
  local f = redis.call('HMGET', KEYS[12], 'paused', 'interval', 'burst', 'tat', 'groups')
  local grouped = f[5] and true or false
  if f[1] then return 0, true, nil, grouped end
  if not f[2] then return count, false, nil, grouped end
  local interval, burst = tonumber(f[2]), tonumber(f[3])
  local tat = math.max(tonumber(f[4] or '0'), now)
  local tolerance = (burst - 1) * interval
  local free = 0
  if tat - tolerance <= now then free = math.floor((now + tolerance - tat) / interval) + 1 end
  return math.min(count, free), false, {interval, tolerance, tat, free}, grouped
end
-- flow_charge(limit, n): count n claimed tasks against the limit; returns when the next task
-- is allowed (µs) once this claim used the limit up, else nil
local function flow_charge(limit, n)
  if not limit then return nil end
  local tat = limit[3] + n * limit[1]
  if n > 0 then redis.call('HSET', KEYS[12], 'tat', string.format('%d', tat)) end
  if n < limit[4] then return nil end
  return tat - limit[2]
end
