-- Fragment: concurrency groups (docs/queue.md, "Concurrency groups"). A task of a group is
-- *admitted* (in pending or in flight) only while its group has fewer admitted tasks than
-- its concurrency (and, with a rate limit, when the group's GCRA admits it); the others are
-- *held* out of pending, so a claim never sees them and costs what it costs without groups.
-- Admission puts a task at the END of pending (scored now): when every group is saturated,
-- pending holds at most <concurrency> tasks of each group, in the order their groups got a
-- slot, which is round-robin: a backlog of one group never starves another group's task.
-- The scripts that include it pass its four keys as a table G = {hold, groups, wait, tasks}:
--   hold   zset, every score 0: held tasks as "<#group>:<group>:<due µs, 17 digits>:<id>"
--          (by lex, one group's tasks are contiguous and earliest due first)
--   groups hash, per group (a few fields each, so the admin's listing scans groups only):
--                "r:<group>" -> tasks of the group admitted (pending or in flight)
--                "l:<group>" -> "<concurrency>,<interval µs (0: no rate limit)>,<burst>"
--                           (written by every enqueue of the group: the last one wins)
--                "t:<group>" -> its rate limit's theoretical arrival time (GCRA, µs)
--   wait   zset group -> server µs its next held task may be admitted (its due time, or its
--          rate limit's); claims admit what came due (grp_promote)
--   tasks  hash, per task: "i:<id>" -> the group of a grouped task, while its payload exists;
--                "h:<id>" -> its hold member, while it is held
-- and KEYS[1] pending, KEYS[7] signal list, KEYS[9]/KEYS[10] (prio_back) of the queue scripts.
-- A claim marks the claims field of a grouped task with a leading "g" (see the claims
-- fragment), so every exit path of its run (ack, retry, dead letter, expired lease) knows to
-- give its slot back without reading anything for tasks that have no group.
-- A script that includes it includes the gcra and priority fragments first, and the claims
-- fragment after it (its ack frees the slots).
local function grp_prefix(g)
  return string.format('%d:', #g) .. g .. ':'
end
-- admissions so far in this script call (see grp_admit)
local grp_seq = {0}
-- grp_hold(G, g, id, due): hold id in group g until it is admitted
local function grp_hold(G, g, id, due)
  local member = grp_prefix(g) .. string.format('%017d', due) .. ':' .. id
  redis.call('ZADD', G[1], 0, member)
  redis.call('HSET', G[4], 'i:' .. id, g, 'h:' .. id, member)
end
-- grp_admit(G, g, now): admit held tasks of g while it has a free slot and its rate allows;
-- when the next one is due later (or rate-limited), g waits in G[3] until then; returns how
-- many were admitted. Bounded: at most 100 per call (the rest at the next release or claim).
local function grp_admit(G, g, now)
  local f = redis.call('HMGET', G[2], 'r:' .. g, 'l:' .. g, 't:' .. g)
  local running = tonumber(f[1] or '0')
  local spec = f[2] or '1,0,1'
  local c1 = string.find(spec, ',', 1, true)
  local c2 = string.find(spec, ',', c1 + 1, true)
  local limit = tonumber(string.sub(spec, 1, c1 - 1))
  local interval = tonumber(string.sub(spec, c1 + 1, c2 - 1))
  local burst = tonumber(string.sub(spec, c2 + 1))
  local tat = tonumber(f[3] or '0')
  local p = grp_prefix(g)
  local admitted, waiting = 0, false
  while running < limit and admitted < 100 do
    local head = redis.call('ZRANGEBYLEX', G[1], '[' .. p, '(' .. p .. '\255', 'LIMIT', 0, 1)
    if #head == 0 then break end
    local due = tonumber(string.sub(head[1], #p + 1, #p + 17))
    local at, after = due, tat
    if due <= now and interval > 0 then
      local ok, later, wait = gcra(tat, now, interval, burst, 1)
      if ok then after = later else at = now + wait end
    end
    if at > now then
      redis.call('ZADD', G[3], at, g)
      waiting = true
      break
    end
    local id = string.sub(head[1], #p + 19)
    redis.call('ZREM', G[1], head[1])
    redis.call('HDEL', G[4], 'h:' .. id)
    -- due now, in the order of admission: a µs apart (not a tie pending would break by
    -- id), up to a millisecond before now (so a claim in the same script sees them due)
    grp_seq[1] = math.min(grp_seq[1] + 1, 999)
    local score = now - 1000 + grp_seq[1]
    redis.call('ZADD', KEYS[1], score, id)
    prio_back(id, score)
    running, tat, admitted = running + 1, after, admitted + 1
  end
  if not waiting then redis.call('ZREM', G[3], g) end
  if admitted > 0 then
    redis.call('HSET', G[2], 'r:' .. g, running)
    if interval > 0 then redis.call('HSET', G[2], 't:' .. g, string.format('%d', tat)) end
    if redis.call('LLEN', KEYS[7]) == 0 then redis.call('LPUSH', KEYS[7], 1) end
  end
  return admitted
end
-- grp_free(G, g, now): one admitted task of g ended (or went back to the hold): its slot is
-- free, and the next held task of g is admitted
local function grp_free(G, g, now)
  if redis.call('HINCRBY', G[2], 'r:' .. g, -1) <= 0 then redis.call('HDEL', G[2], 'r:' .. g) end
  grp_admit(G, g, now)
end
-- grp_release(G, id, now): the admitted task id ended for good (acked, dead-lettered,
-- cancelled): its group forgets it and gets its slot back
local function grp_release(G, id, now)
  local g = redis.call('HGET', G[4], 'i:' .. id)
  if not g then return end
  redis.call('HDEL', G[4], 'i:' .. id)
  grp_free(G, g, now)
end
-- grp_back(G, id, due, now): the admitted task id runs again at due (a retry): it gives its
-- slot back and is held again (it is admitted when due and its group has a slot); false when
-- id has no group (the caller queues it as usual)
local function grp_back(G, id, due, now)
  local g = redis.call('HGET', G[4], 'i:' .. id)
  if not g then return false end
  redis.call('ZREM', KEYS[1], id)
  grp_hold(G, g, id, due)
  grp_free(G, g, now)
  return true
end
-- grp_forget(G, id, now): id is deleted or replaced whatever its state: a held one leaves the
-- hold, an admitted one frees its slot; returns true when it was held (it is in no zset)
local function grp_forget(G, id, now)
  local f = redis.call('HMGET', G[4], 'i:' .. id, 'h:' .. id)
  if not f[1] then return false end
  redis.call('HDEL', G[4], 'i:' .. id, 'h:' .. id)
  if f[2] then
    redis.call('ZREM', G[1], f[2])
    local left = redis.call('ZRANGEBYLEX', G[1], '[' .. grp_prefix(f[1]),
      '(' .. grp_prefix(f[1]) .. '\255', 'LIMIT', 0, 1)
    if #left == 0 then redis.call('ZREM', G[3], f[1]) end
    return true
  end
  grp_free(G, f[1], now)
  return false
end
-- grp_promote(G, now): admit the tasks of groups whose wait ended (at most 32 groups a call)
local function grp_promote(G, now)
  local due = redis.call('ZRANGEBYSCORE', G[3], '-inf', now, 'LIMIT', 0, 32)
  for _, g in ipairs(due) do grp_admit(G, g, now) end
end
