-- Acknowledge finished tasks, return expired leases, then claim due tasks under a lease.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- KEYS[12] flow hash: pause and rate limit (see the flow fragment); a paused queue claims
--         nothing, a rate-limited one at most what its limit admits (acks and expired
--         leases are handled either way)
-- KEYS[13] (optional) this request's key: a resent call (same key) answers what the first
--         call claimed, those of its claims that are still current, and claims nothing new
--         (kept 60 s)
-- KEYS[14] (optional) the unique zset: acks "<token>+<ms>:<id>" open the id's unique_for
--         window there (see the claims fragment)
-- KEYS[15..18] (optional) the concurrency groups' hold zset, groups hash, wait zset and
--         tasks hash (see the groups fragment): with the flow hash's "groups" field set (a
--         grouped task was queued here), a claim first admits the held tasks whose wait
--         ended, and marks the claims of grouped tasks, whose acks and dead letters (here:
--         expired leases) give their group's slot back
-- KEYS[19] (optional) the request key of the caller's previous claim, deleted: its answer
--         arrived, so it will not be resent
-- ARGV[1] how many due tasks to claim (0 to a few thousand: ids go to single commands)
-- ARGV[2] lease in microseconds
-- ARGV[3] at most this many expired leases are handled (bounds the work of one call)
-- ARGV[4] the queue's max_attempts, for a lease that expires on a run that recorded none
-- ARGV[5] "1": record every claimed run as started now (pop()); "0": the worker records
--         each start itself (extend with a start mark, or retry), so a claimed task that never
--         ran costs no attempt
-- ARGV[6] payload bytes per claim: claiming stops before the task that would pass it (the
--         first task is always claimed), which bounds the reply and the payloads read
-- ARGV[7..] "<claim token>:<id>" to acknowledge first (saves the worker a round trip)
-- returns {now, next due score or -1, earliest lease deadline or -1, acked, recovered,
--          claim tokens: the first (the others follow one by one) or, for a resend, a list,
--          positions (1-based) of the suspects (see the claims fragment),
--          {position, level, ...} of the claimed tasks of levels 1-9 (the priority fragment),
--          1 if the queue is paused else 0, the server time (µs) at which its rate limit
--          admits the next task if this claim used the limit up else -1,
--          then the claimed tasks in two strings (each reply element costs the client a
--          parse): per task "<due score>,<this run's attempt number>,<id bytes>,<last error
--          bytes>,<payload bytes>", joined with ","; and every task's id, then every task's
--          last error, then every task's payload, concatenated ('' and '' for no task)}
-- include: priority
-- include: gcra
-- include: groups
-- include: claims
-- include: flow
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local count = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local default_max = tonumber(ARGV[4])
local start_all = ARGV[5] == '1'

local quota, paused, limit, grouped = flow_quota(now, count)
local G = nil
if grouped and #KEYS >= 18 then G = {KEYS[15], KEYS[16], KEYS[17], KEYS[18]} end
local acked = ack(ARGV, 7, KEYS[14], G, now)
if #KEYS >= 19 then redis.call('DEL', KEYS[19]) end

-- the claimed tasks as the reply's last two strings (see "returns" above)
local texts = {}
local function text(n)  -- a small number as a string, converted once per call (lengths repeat)
  local found = texts[n]
  if not found then found = tostring(n); texts[n] = found end
  return found
end
-- tasks i = 1..n of ids, errors and payloads (tables: a missing error or payload, false or
-- nil, is read as ''): the reply's two task strings in out[11] and out[12]
local function tasks_out(out, n, scores, attempts, ids, errors, payloads)
  local metas = {}
  for i = 1, n do
    local e, p = errors[i] or '', payloads[i] or ''
    errors[i], payloads[i] = e, p
    metas[i] = scores[i] .. ',' .. text(attempts[i]) .. ',' .. text(#ids[i]) .. ',' .. text(#e)
      .. ',' .. text(#p)
  end
  out[11] = table.concat(metas, ',')
  out[12] = table.concat(ids, '', 1, n) .. table.concat(errors, '', 1, n)
    .. table.concat(payloads, '', 1, n)
  return out
end

-- held: paused, or the rate limit is used up: no idle worker is woken (they wait for the
-- resume's wake-up, or until the limit admits the next task)
local function wake_and_hints(out, held)
  out[9], out[10] = paused and 1 or 0, held or -1
  local first = redis.call('ZRANGE', KEYS[1], 0, 0, 'WITHSCORES')
  if first[2] then out[2] = first[2] end
  if not first[2] or tonumber(first[2]) > now or paused or held then
    redis.call('DEL', KEYS[7])
  elseif redis.call('LLEN', KEYS[7]) == 0 then
    redis.call('LPUSH', KEYS[7], 1)  -- work is left: wake the next idle worker
  end
  local lease_first = redis.call('ZRANGE', KEYS[2], 0, 0, 'WITHSCORES')
  if lease_first[2] then out[3] = lease_first[2] end
  if G then  -- a held task admitted later (its due time, its group's rate) is work due then
    local waits = redis.call('ZRANGE', G[3], 0, 0, 'WITHSCORES')
    if waits[2] and (out[2] == -1 or tonumber(waits[2]) < tonumber(out[2])) then
      out[2] = waits[2]
    end
  end
  return out
end

if #KEYS >= 13 then
  local rows = redis.call('LRANGE', KEYS[13], 0, -1)
  if #rows > 0 then
    local out = {now, -1, -1, acked, 0, {}, {}, {}, 0, -1, '', ''}
    -- the record: first token, due scores and suspect flags (comma-separated), then the ids
    local first = tonumber(rows[1])
    local scores, flags = {}, {}
    local t_scores, t_attempts, t_ids, t_errors, t_payloads = {}, {}, {}, {}, {}
    for v in string.gmatch(rows[2], '[^,]+') do scores[#scores + 1] = v end
    for v in string.gmatch(rows[3], '[^,]+') do flags[#flags + 1] = tonumber(v) end
    for k = 4, #rows do
      local id, token = rows[k], string.format('%d', first + k - 4)
      if holder(id, token) then
        local v = redis.call('HGET', KEYS[8], id) or ''
        local attempts = tonumber(redis.call('HGET', KEYS[5], id) or '0')
        if not started(v) then attempts = attempts + 1 end
        out[6][#out[6] + 1] = token
        if flags[k - 3] == 1 then out[7][#out[7] + 1] = #out[6] end
        local level = redis.call('HGET', KEYS[10], id)
        if level then table.insert(out[8], #out[6]); table.insert(out[8], tonumber(level)) end
        local m = #out[6]
        t_scores[m], t_attempts[m], t_ids[m] = scores[k - 3], attempts, id
        t_errors[m] = redis.call('HGET', KEYS[6], id)
        t_payloads[m] = redis.call('HGET', KEYS[4], id)
      end
    end
    local n = #out[6]
    return wake_and_hints(tasks_out(out, n, t_scores, t_attempts, t_ids, t_errors, t_payloads), nil)
  end
end

-- a lease expired: a run recorded as started was an attempt (dead-lettered once the task's
-- own max_attempts is used up); an unrecorded one costs nothing. Either way the task comes
-- back as a suspect, whose next run is recorded before it runs.
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[2], id)
  local v = redis.call('HGET', KEYS[8], id) or ''
  local attempts = tonumber(redis.call('HGET', KEYS[5], id) or '0')
  if started(v) then
    redis.call('HSET', KEYS[6], id, 'lease expired during attempt ' .. attempts ..
      ' (the worker died or the task ran past its lease)')
    if attempts >= limit_of(v, default_max) then
      redis.call('ZADD', KEYS[3], now, id)
      redis.call('HDEL', KEYS[8], id)
      if G and string.byte(v) == 103 then grp_release(G, id, now) end
    else
      redis.call('ZADD', KEYS[1], now, id)
      prio_back(id, now)
      redis.call('HSET', KEYS[8], id, '?')
    end
  else
    redis.call('HSET', KEYS[6], id, 'lease expired before a run was recorded as started '
      .. '(its worker died or stalled); no attempt counted')
    redis.call('ZADD', KEYS[1], now, id)
    prio_back(id, now)
    redis.call('HSET', KEYS[8], id, '?')
  end
end

if G then grp_promote(G, now) end
local out = {now, -1, -1, acked, #expired, 0, {}, {}, 0, -1, '', ''}
local claimed = 0
if quota > 0 then
  local due, levels = prio_claimable(now, quota)
  local n = #due / 2
  if n > 0 then
    local ids = {}
    for i = 1, n do ids[i] = due[2 * i - 1] end
    -- the byte budget is applied before any payload is read (HSTRLEN is O(1)): a payload
    -- that will not be returned is never copied, so a claim's server time is bounded by
    -- the budget, not by the sizes of the due tasks
    local budget, used, m = tonumber(ARGV[6]), 0, 0
    for i = 1, n do
      used = used + redis.call('HSTRLEN', KEYS[4], ids[i])
      if m > 0 and used > budget then break end
      m = i
    end
    for i = m + 1, n do ids[i] = nil end
    n = m
    local payloads = redis.call('HMGET', KEYS[4], unpack(ids, 1, n))
    claimed = n
    local claims = {}
    for i = 1, n do
      claims[2 * i - 1] = now + lease
      claims[2 * i] = ids[i]
    end
    if #levels == 0 then
      redis.call('ZREMRANGEBYRANK', KEYS[1], 0, n - 1)
    else  -- prioritized tasks first: not pending's first ranks
      redis.call('ZREM', KEYS[1], unpack(ids))
      redis.call('ZREM', KEYS[9], unpack(ids))
      for i = 1, math.min(#levels, n) do
        table.insert(out[8], i)
        table.insert(out[8], levels[i])
      end
    end
    for i = 1, 2 * n, 1000 do
      redis.call('ZADD', KEYS[2], unpack(claims, i, math.min(i + 999, 2 * n)))
    end
    local errors = redis.call('HMGET', KEYS[6], unpack(ids))
    local attempts = redis.call('HMGET', KEYS[5], unpack(ids))
    local held = redis.call('HMGET', KEYS[8], unpack(ids))
    local groups = nil  -- the groups of the claimed tasks (claims of grouped ones are marked)
    if G then
      local fields = {}
      for i = 1, n do fields[i] = 'i:' .. ids[i] end
      groups = redis.call('HMGET', G[4], unpack(fields))
    end
    local last = redis.call('HINCRBY', KEYS[8], '', n)
    out[6] = last - n + 1
    local tokens, counted, scores, flags = {}, {}, {}, {}
    for i = 1, n do
      local token = string.format('%d', last - n + i)
      attempts[i] = tonumber(attempts[i] or '0') + 1
      tokens[2 * i - 1] = ids[i]
      if groups and groups[i] then token = 'g' .. token end
      tokens[2 * i] = start_all and (token .. '|0') or token
      counted[2 * i - 1] = ids[i]
      counted[2 * i] = attempts[i]
      if held[i] == '?' then out[7][#out[7] + 1] = i end
      scores[i] = due[2 * i]
      flags[i] = held[i] == '?' and 1 or 0
    end
    if #KEYS >= 13 then
      local head = string.format('%d', last - n + 1)
      redis.call('RPUSH', KEYS[13], head, table.concat(scores, ','), table.concat(flags, ','))
      for i = 1, n, 1000 do
        redis.call('RPUSH', KEYS[13], unpack(ids, i, math.min(i + 999, n)))
      end
      redis.call('PEXPIRE', KEYS[13], 60000)
    end
    tasks_out(out, n, scores, attempts, ids, errors, payloads)
    for i = 1, 2 * n, 1000 do
      redis.call('HSET', KEYS[8], unpack(tokens, i, math.min(i + 999, 2 * n)))
      if start_all then
        redis.call('HSET', KEYS[5], unpack(counted, i, math.min(i + 999, 2 * n)))
      end
    end
  end
end

return wake_and_hints(out, flow_charge(limit, claimed))
