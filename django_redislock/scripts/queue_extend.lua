-- Push back the lease deadline of claimed tasks, and optionally record that their run started.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- ARGV[1] lease in microseconds from now
-- ARGV[2] "" only extend; else record each run as started (one attempt, once per claim) with
--         this max_attempts for a lease that expires later ("0": the queue's default)
-- ARGV[3..] pairs: id, claim token ("" for whatever claim is current)
-- KEYS[12] (optional) the cancel requests hash (id -> the enqueue time of the copy to cancel,
--          see queue_cancel.lua): a task with a request for its current copy answers 2
-- returns {new deadline, then per id 1 extended, 2 extended and asked to cancel, or 0 lost (not
--          in flight under that claim)}
-- include: claims
local t = redis.call('TIME')
local deadline = tonumber(t[1]) * 1000000 + tonumber(t[2]) + tonumber(ARGV[1])
local start = ARGV[2]
local out = {deadline}
for i = 3, #ARGV - 1, 2 do
  local id = ARGV[i]
  local v = holder(id, ARGV[i + 1])
  if v then
    redis.call('ZADD', KEYS[2], deadline, id)
    if start ~= '' and not started(v) then
      redis.call('HINCRBY', KEYS[5], id, 1)
      redis.call('HSET', KEYS[8], id, v .. '|' .. start)
    end
    local flag = 1
    if #KEYS >= 12 then
      local asked = redis.call('HGET', KEYS[12], id)
      if asked then
        if asked == (redis.call('HGET', KEYS[11], id) or '') then
          flag = 2
        else  -- a request for an earlier copy of the id (it finished first): forget it
          redis.call('HDEL', KEYS[12], id)
        end
      end
    end
    out[#out + 1] = flag
  else
    out[#out + 1] = 0
  end
end
return out
