-- Fragment: who holds a claim, and acknowledging finished tasks (every script that acts on a
-- claimed task includes it).
-- KEYS[2] in-flight zset, KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash,
-- KEYS[8] claims hash, KEYS[10] levels hash, KEYS[11] enqueue times (the queue scripts' key
-- order). A claims field is, per id:
--   "<token>"        claimed under that token, its run not recorded as started
--   "<token>|<max>"  claimed and its run recorded as started (one attempt counted); <max> is
--                    the task's own max_attempts (0: the queue's default)
--   "g<token>", "g<token>|<max>"  the same, of a task of a concurrency group (see the
--                    groups fragment): its run's end gives the group's slot back
--   "?"              queued again after a lease expired: a suspect, whose next run is recorded
--                    as started before it runs
-- The field "" is the counter the tokens are drawn from (ids are never empty).
-- owns(v, token): true when claims field v (false when absent) is held under token;
-- the token "" names whatever claim is current (a bare id)
local function owns(v, token)
  if token == '' then return true end
  if not v then return false end
  local bar = string.find(v, '|', 1, true)
  local held = bar and string.sub(v, 1, bar - 1) or v
  if string.byte(held) == 103 then held = string.sub(held, 2) end  -- "g": a grouped task
  return held == token
end
-- holder(id, token): the claims field of id when it is in flight under token, else nil
local function holder(id, token)
  if not redis.call('ZSCORE', KEYS[2], id) then return nil end
  local v = redis.call('HGET', KEYS[8], id)
  if owns(v, token) then return v or '' end
  return nil
end
local function started(v)
  return string.find(v, '|', 1, true) ~= nil
end
-- limit_of(v, default): the max_attempts recorded when the run started, else default
local function limit_of(v, default)
  local bar = string.find(v, '|', 1, true)
  local n = bar and tonumber(string.sub(v, bar + 1)) or 0
  if n and n > 0 then return n end
  return default
end
-- ack(args, from, unique): args[from..] are "<token>:<id>" (tokens are digits; "" for any
-- claim), at most a few thousand (they are passed to single commands); the tasks still held
-- under those claims leave the in-flight set and never come back; a stale claim changes
-- nothing; returns how many were acknowledged.
-- "<token>+<ms>:<id>" also opens the id's unique_for window of <ms> milliseconds: it goes
-- to the unique zset (key unique: id -> server µs the window ends; see queue_enqueue.lua),
-- whose ended entries are dropped here and which expires by itself after its longest window.
-- G: the groups fragment's keys (nil: no task of a group is acknowledged here): an acked task
-- of a group gives its slot back, and the next one of its group is admitted as of `now` (the
-- caller's server time, when it has one: a claim then finds it due)
local function ack(args, from, unique, G, now)
  local ids, tokens, windows = {}, {}, nil
  for i = from, #args do
    local colon = string.find(args[i], ':', 1, true)
    local token = string.sub(args[i], 1, colon - 1)
    local plus = string.find(token, '+', 1, true)
    if plus then
      windows = windows or {}
      windows[#ids + 1] = tonumber(string.sub(token, plus + 1))
      token = string.sub(token, 1, plus - 1)
    end
    tokens[#tokens + 1] = token
    ids[#ids + 1] = string.sub(args[i], colon + 1)
  end
  if #ids == 0 then return 0 end
  local flying = redis.call('ZMSCORE', KEYS[2], unpack(ids))
  local held = redis.call('HMGET', KEYS[8], unpack(ids))
  local done, opened, grouped = {}, {}, nil
  for i, id in ipairs(ids) do
    if flying[i] and owns(held[i], tokens[i]) then
      done[#done + 1] = id
      if windows and windows[i] then opened[#opened + 1] = i end
      if G and string.byte(held[i]) == 103 then
        grouped = grouped or {}
        grouped[#grouped + 1] = id
      end
    end
  end
  if #done > 0 then
    redis.call('ZREM', KEYS[2], unpack(done))
    redis.call('HDEL', KEYS[4], unpack(done))
    redis.call('HDEL', KEYS[5], unpack(done))
    redis.call('HDEL', KEYS[6], unpack(done))
    redis.call('HDEL', KEYS[8], unpack(done))
    if redis.call('EXISTS', KEYS[10]) == 1 then redis.call('HDEL', KEYS[10], unpack(done)) end
    redis.call('HDEL', KEYS[11], unpack(done))
  end
  if grouped then
    if not now then
      local t = redis.call('TIME')
      now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    end
    for _, id in ipairs(grouped) do grp_release(G, id, now) end
  end
  if #opened > 0 and unique then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
    redis.call('ZREMRANGEBYSCORE', unique, '-inf', now)
    local longest = 0
    for _, i in ipairs(opened) do
      local ms = windows[i]
      redis.call('ZADD', unique, string.format('%d', now + ms * 1000), ids[i])
      if ms > longest then longest = ms end
    end
    if redis.call('PTTL', unique) < longest then redis.call('PEXPIRE', unique, longest) end
  end
  return #done
end
