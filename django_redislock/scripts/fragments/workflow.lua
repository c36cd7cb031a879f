-- Fragment: the end of one member of a workflow (chain, group, chord, a task with
-- dependencies; see django_redislock/queue/canvas.py), counted once.
-- The queue scripts' key order: KEYS[1] pending zset, KEYS[4] payload hash, KEYS[7] signal
-- list, KEYS[11] enqueue times hash. The workflow hash W (<prefix>:{q:<queue>}:wf:<id>) has:
--   kind, state (RUNNING, SUCCESSFUL, FAILED), n (members), left (members not finished),
--   allow ("1": a failed member does not fail a chord), cb/cbp (callback id and payload),
--   s:<i> "ok" or "failed" per member (set once: the counter's guard), r:<i> its result,
--   e:<i> its error, m:<i> its task id (set when it is queued: the first tasks by
--   workflow_start.lua, a chain's later steps here; a chord's callback is cb), result (the workflow's value), failed/error (the step that failed it)
-- The dependency hash D (<prefix>:{q:<queue>}:wfdeps, one per queue) has, per workflow id:
--   w:<id> the ids of workflows waiting for it (space separated), l:<id> how many
--   dependencies a deferred workflow still waits for, p:<id> its first tasks
--   (cmsgpack {id, payload, ...}), x:<id> why it was cancelled (a dependency failed)
-- wf_enqueue(id, payload): queue one fresh task now (a queued copy is kept)
local function wf_enqueue(id, payload)
  if redis.call('HSETNX', KEYS[4], id, payload) == 0 then return end
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
  redis.call('ZADD', KEYS[1], now, id)
  redis.call('HSET', KEYS[11], id, string.format('%d', now))
  if redis.call('LLEN', KEYS[7]) == 0 then redis.call('LPUSH', KEYS[7], 1) end
end
-- wf_release(D, id): queue the first tasks of the deferred workflow id
local function wf_release(D, id)
  local packed = redis.call('HGET', D, 'p:' .. id)
  redis.call('HDEL', D, 'l:' .. id, 'p:' .. id)
  if not packed then return end
  local items = cmsgpack.unpack(packed)
  for i = 1, #items, 2 do wf_enqueue(items[i], items[i + 1]) end
end
-- wf_waiters(D, id): the workflows waiting for id (the field is dropped)
local function wf_waiters(D, id)
  local found = redis.call('HGET', D, 'w:' .. id)
  redis.call('HDEL', D, 'w:' .. id)
  local out = {}
  if found then for w in string.gmatch(found, '%S+') do out[#out + 1] = w end end
  return out
end
-- wf_succeed(W, D, id, data): the workflow id ends well; its waiters lose one dependency
local function wf_succeed(W, D, id, data)
  redis.call('HSET', W, 'state', 'SUCCESSFUL', 'result', data)
  for _, w in ipairs(wf_waiters(D, id)) do
    local left = redis.call('HINCRBY', D, 'l:' .. w, -1)
    if left <= 0 then wf_release(D, w) end
  end
end
-- wf_fail(W, D, id, step, err): the workflow id failed at step; every workflow waiting for
-- it (and, in turn, for those) is cancelled (at most 10000 in one call)
local function wf_fail(W, D, id, step, err)
  redis.call('HSET', W, 'state', 'FAILED', 'failed', step, 'error', err)
  local todo, n = {id}, 1
  while n <= #todo and n <= 10000 do
    for _, w in ipairs(wf_waiters(D, todo[n])) do
      if redis.call('HEXISTS', D, 'l:' .. w) == 1 then
        redis.call('HDEL', D, 'l:' .. w, 'p:' .. w)
        redis.call('HSET', D, 'x:' .. w, 'dependency ' .. todo[n] .. ' failed')
        todo[#todo + 1] = w
      end
    end
    n = n + 1
  end
end
-- wf_end(W, D, ttl, id, role, i, ok, data, err, next_id, next_payload): member i (role "c" a
-- chain step, "m" a group/chord member, "t" the last task: a callback, a chain's last step
-- or a single task) of workflow id ended (ok: returned data; else failed with err). Counted
-- once per member: a resent call or a second run's end changes nothing. A chain step passes
-- the next step (id and payload) to queue. Returns 1 counted, 0 already counted.
local function wf_end(W, D, ttl, id, role, i, ok, data, err, next_id, next_payload)
  if redis.call('HSETNX', W, 's:' .. i, ok and 'ok' or 'failed') == 0 then return 0 end
  redis.call('PEXPIRE', W, ttl)
  if redis.call('HGET', W, 'state') ~= 'RUNNING' then return 1 end
  if role == 'm' then
    local left
    if ok then
      redis.call('HSET', W, 'r:' .. i, data)
      left = redis.call('HINCRBY', W, 'left', -1)
    else
      redis.call('HSET', W, 'e:' .. i, err)
      if redis.call('HGET', W, 'allow') ~= '1' then
        wf_fail(W, D, id, next_id, err)
        return 1
      end
      left = redis.call('HINCRBY', W, 'left', -1)
    end
    if left <= 0 then
      local cb = redis.call('HMGET', W, 'cb', 'cbp')
      if cb[1] and cb[1] ~= '' then wf_enqueue(cb[1], cb[2]) else wf_succeed(W, D, id, '') end
    end
  elseif not ok then
    wf_fail(W, D, id, next_id, err)
  elseif role == 'c' and next_id ~= '' then
    redis.call('HSET', W, 'r:' .. i, data, 'm:' .. (tonumber(i) + 1), next_id)
    wf_enqueue(next_id, next_payload)
  else
    wf_succeed(W, D, id, data)
  end
  return 1
end
-- wf_removed(W, D, id, ttl, role, i, task, err): the queued task `task` was removed
-- (cancelled, deleted) and its payload named it member i (role) of workflow id: when W
-- records it as that member (m:<i>, or cb: a chord's callback), its step ends as failed
-- with err (wf_end), as a dead-lettered member's would. Returns 1 counted, 0 not.
local function wf_removed(W, D, id, ttl, role, i, task, err)
  if redis.call('HGET', W, 'm:' .. i) ~= task and redis.call('HGET', W, 'cb') ~= task then
    return 0
  end
  return wf_end(W, D, ttl, id, role, i, false, '', err, task, '')
end
