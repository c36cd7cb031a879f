-- Read a queue's rate buckets (see the rates fragment) with the server's clock.
-- KEYS[1] the queue's rates hash
-- returns {server time in seconds, then the hash as field, value, ...} (at most a few
--          thousand fields: 240 slots of 5 outcomes and 60 minutes of at most 21 types)
local t = redis.call('TIME')
local out = {tonumber(t[1])}
local fields = redis.call('HGETALL', KEYS[1])
for i = 1, #fields do out[#out + 1] = fields[i] end
return out
