-- A worker's heartbeat: store its record, push its expiry, prune workers that stopped beating.
-- KEYS[1] index zset (worker id -> expiry, µs of server time)
-- KEYS[2] records hash (worker id -> "<heartbeat µs>:<JSON record>")
-- ARGV[1] worker id   ARGV[2] ttl (µs)   ARGV[3] the JSON record
-- ARGV[4] most expired workers to prune in this call
-- KEYS[3] optional: the control hash (worker id -> command an operator sent: quiet, resume, stop)
-- returns now (µs of server time): the heartbeat time stored with the record; with KEYS[3],
--   {now, the command waiting for this worker or ''} and the command is taken (deleted)
-- Both keys share the hash tag {workers}: one slot, so a beat is all or nothing. The keys
-- themselves expire with the last live worker, so a fleet that is gone leaves nothing.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local gone = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[4]))
if #gone > 0 then
  redis.call('ZREM', KEYS[1], unpack(gone))
  redis.call('HDEL', KEYS[2], unpack(gone))
end
-- numbers written with %d: Lua's own formatting keeps 14 digits, and µs since 1970 have 16
redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[2])), ARGV[1])
redis.call('HSET', KEYS[2], ARGV[1], string.format('%d', now) .. ':' .. ARGV[3])
local last = redis.call('ZRANGE', KEYS[1], -1, -1, 'WITHSCORES')
local until_ms = math.floor(tonumber(last[2]) / 1000) + 1000
redis.call('PEXPIREAT', KEYS[1], until_ms)
redis.call('PEXPIREAT', KEYS[2], until_ms)
if #KEYS >= 3 then
  local command = redis.call('HGET', KEYS[3], ARGV[1]) or ''
  if command ~= '' then redis.call('HDEL', KEYS[3], ARGV[1]) end
  return {now, command}
end
return now
