-- A task's own rate limit (@task(rate_limit=...)), checked by the worker before the run:
-- run it now, or give it back to the queue for when the limit admits it, charging nothing.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment), KEYS[9], KEYS[10] the priority index and
--         levels (see the priority fragment), KEYS[11] enqueue times (not read),
--         KEYS[12] flow hash (see the flow fragment):
--         field ARGV[3] holds the limit's theoretical arrival time (µs, GCRA), field
--         ARGV[3] .. ':h' the latest time a task was given back for (spreads them out)
-- KEYS[13] this request's key: a resent call (same key) answers the first call's answer and
--         changes nothing (kept 60 s)
-- ARGV[1] task id, ARGV[2] its claim token ("" for whatever claim is current)
-- ARGV[3] the limit's field in the flow hash ("task:<task path>")
-- ARGV[4] µs between two runs, ARGV[5] runs admitted at once
-- ARGV[6] "1" if the task is a suspect (it stays one when it is given back)
-- ARGV[7] (optional, default 0) µs the caller will wait for the limit: a task the limit admits
--         within that time stays claimed (a task given back earlier that arrives for its slot
--         a little before the run ahead of it has made room would otherwise lose that slot)
-- returns {1, 0} run it now (counted against the limit);
--         {3, µs until the limit admits it} (at most ARGV[7]): still claimed, nothing changed:
--         call again after that long;
--         {2, µs until the limit admits the next run} given back: due then (or later, behind
--         others given back before it), its claim ended, no attempt counted;
--         {0, 0} lost: the claim is no longer current, nothing changed
-- include: gcra
-- include: claims
-- include: priority
local seen = redis.call('LRANGE', KEYS[13], 0, -1)
if #seen > 0 then return {tonumber(seen[1]), tonumber(seen[2])} end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local id, field = ARGV[1], ARGV[3]
local interval, burst = tonumber(ARGV[4]), tonumber(ARGV[5])
local hold = tonumber(ARGV[7] or '0')
local out = {0, 0}
local v = holder(id, ARGV[2])
if v then
  local admitted, tat, wait = gcra(tonumber(redis.call('HGET', KEYS[12], field)), now, interval,
    burst, 1)
  if admitted then
    redis.call('HSET', KEYS[12], field, string.format('%d', tat))
    out = {1, 0}
  elseif wait <= hold then
    out = {3, wait}
  else
    local after = tonumber(redis.call('HGET', KEYS[12], field .. ':h') or '0') + interval
    local due = math.max(now + wait, after)
    redis.call('HSET', KEYS[12], field .. ':h', string.format('%d', due))
    redis.call('ZREM', KEYS[2], id)
    if started(v) and tonumber(redis.call('HGET', KEYS[5], id) or '0') > 0 then
      redis.call('HINCRBY', KEYS[5], id, -1)
    end
    if ARGV[6] == '1' then
      redis.call('HSET', KEYS[8], id, '?')
    else
      redis.call('HDEL', KEYS[8], id)
    end
    redis.call('ZADD', KEYS[1], due, id)
    prio_back(id, due)
    out = {2, wait}
  end
end
redis.call('RPUSH', KEYS[13], out[1], string.format('%d', out[2]))
redis.call('PEXPIRE', KEYS[13], 60000)
return out
