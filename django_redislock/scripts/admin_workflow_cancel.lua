-- The admin's "Cancel workflow": end a workflow that is still going as FAILED (or CANCELLED
-- when it waits for its dependencies), so no later step or callback is queued, and return
-- the ids of its members that did not end yet (the caller cancels them with
-- queue_cancel.lua). Workflows waiting for it are cancelled in turn (see the workflow
-- fragment: wf_fail).
-- KEYS[1] the workflow hash, KEYS[2] the queue's workflow dependency hash
-- ARGV[1] workflow id, ARGV[2] the reason (the workflow's error), ARGV[3] most member ids
-- returned
-- returns {outcome, member ids...}: outcome 1 the workflow was ended here, 0 it had already
-- ended (its unended members are still returned), -1 no such workflow (expired or never
-- started); a resend finds it ended (0) and returns the same members
-- include: workflow
local W, D, id = KEYS[1], KEYS[2], ARGV[1]
local h = redis.call('HMGET', W, 'state', 'n', 'kind', 'cb')
if not h[1] then return {-1} end
local outcome = 0
if redis.call('HEXISTS', D, 'l:' .. id) == 1 then
  redis.call('HDEL', D, 'l:' .. id, 'p:' .. id)
  redis.call('HSET', D, 'x:' .. id, ARGV[2])
  wf_fail(W, D, id, '', ARGV[2])
  outcome = 1
elseif h[1] == 'RUNNING' then
  wf_fail(W, D, id, '', ARGV[2])
  outcome = 1
end
local out, most = {outcome}, tonumber(ARGV[3])
local n = tonumber(h[2]) or 0
local last = n - 1
if h[3] ~= 'group' and h[3] ~= 'chord' then last = 100000 end  -- a chain: to its last m:<i>
for i = 0, last do
  local member = redis.call('HGET', W, 'm:' .. i)
  if not member then break end
  if redis.call('HEXISTS', W, 's:' .. i) == 0 then
    out[#out + 1] = member
    if #out > most then return out end
  end
end
if h[4] and h[4] ~= '' and redis.call('HEXISTS', W, 's:' .. n) == 0 then
  out[#out + 1] = h[4]
end
return out
