-- Fragment: priority levels 1-9 (0 is the default and the lowest; see docs/queue.md,
-- "Priorities"). KEYS[1] pending zset, KEYS[9] priority index zset, KEYS[10] levels hash.
-- Every task stays in the pending zset scored by its due time whatever its level, so every
-- reader of pending (dedup, stats, pages, the admin, metrics) is unchanged. A task of level
-- 1-9 also has its level in KEYS[10] (while its payload exists) and, while pending, an entry
-- in KEYS[9] scored (9 - level) * BAND + (due - EPOCH): one band per level, the highest
-- first, due order (FIFO) within a band; exact in a double (below 2^53) until 2055. A queue
-- that never uses priorities has neither key, and its claim costs one more command (on a
-- missing key).
local PRIO_BAND, PRIO_EPOCH = 1e15, 1704067200000000
local function prio_score(level, due)
  return (9 - level) * PRIO_BAND + math.min(math.max(tonumber(due) - PRIO_EPOCH, 0),
    PRIO_BAND - 1)
end
-- prio_set(id, due, level): id is pending at due with this level (0 forgets any level)
local function prio_set(id, due, level)
  if level > 0 then
    redis.call('HSET', KEYS[10], id, level)
    redis.call('ZADD', KEYS[9], prio_score(level, due), id)
  else
    redis.call('HDEL', KEYS[10], id)
    redis.call('ZREM', KEYS[9], id)
  end
end
-- prio_back(id, due): id is pending again at due (retry, release, expiry, requeue): index it
-- again at its level, if it has one
local function prio_back(id, due)
  local level = redis.call('HGET', KEYS[10], id)
  if level then redis.call('ZADD', KEYS[9], prio_score(tonumber(level), due), id) end
end
-- prio_forget(ids): their data is gone (ids: a list, at most a few thousand)
local function prio_forget(ids)
  if #ids == 0 then return end
  redis.call('ZREM', KEYS[9], unpack(ids))
  redis.call('HDEL', KEYS[10], unpack(ids))
end
-- prio_due(now, want): up to want due tasks of levels 1-9, highest level first and FIFO
-- within a level: their ids, due scores (from pending) and levels; they stay where they are.
-- An index entry whose task left pending (the admin deleted it, a claim took it as a default
-- task) is dropped; one whose due time moved is re-indexed (the admin's "run now"). Bounded:
-- after 32 rounds the rest is left to the caller's plain due-order scan.
local function prio_due(now, want)
  local ids, scores, levels = {}, {}, {}
  local floor, rounds, here = 0, 0, 0
  local rel = math.min(math.max(now - PRIO_EPOCH, 0), PRIO_BAND - 1)
  while #ids < want and rounds < 32 do
    rounds = rounds + 1
    local head = redis.call('ZRANGEBYSCORE', KEYS[9], floor, '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
    if #head == 0 then break end
    local low = math.floor(tonumber(head[2]) / PRIO_BAND) * PRIO_BAND
    local level = 9 - low / PRIO_BAND
    if low ~= floor then here = 0 end
    local got = redis.call('ZRANGEBYSCORE', KEYS[9], low, low + rel, 'LIMIT', here, want - #ids)
    local clean = true
    if #got > 0 then
      local due = redis.call('ZMSCORE', KEYS[1], unpack(got))
      for i, id in ipairs(got) do
        local score = due[i] and tonumber(due[i])
        if score and score <= now then
          here = here + 1
          ids[#ids + 1] = id
          scores[#ids] = due[i]
          levels[#ids] = level
        elseif score then
          redis.call('ZADD', KEYS[9], prio_score(level, score), id)
          clean = false
        else
          redis.call('ZREM', KEYS[9], id)
          clean = false
        end
      end
    end
    floor = low
    if clean then floor, here = low + PRIO_BAND, 0 end
  end
  return ids, scores, levels
end
-- prio_claimable(now, count): the flat {id, due score, ...} list of up to count due tasks a
-- claim takes, prioritized ones first, then the default level's in due order (pending's
-- ZRANGEBYSCORE, as without priorities), and the levels of the prioritized ones (the first
-- #levels of the list; empty when the queue holds none: then the list is exactly pending's
-- first due tasks by rank)
local function prio_claimable(now, count)
  local ids, scores, levels = prio_due(now, count)
  if #ids == 0 then
    return redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, count),
      levels
  end
  local out, taken = {}, {}
  for i = 1, #ids do
    taken[ids[i]] = true
    out[2 * i - 1], out[2 * i] = ids[i], scores[i]
  end
  if #ids < count then
    local more = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'WITHSCORES', 'LIMIT', 0, count)
    for i = 1, #more, 2 do
      if #out >= 2 * count then break end
      if not taken[more[i]] then
        local n = #out
        out[n + 1] = more[i]
        out[n + 2] = more[i + 1]
      end
    end
  end
  return out, levels
end
