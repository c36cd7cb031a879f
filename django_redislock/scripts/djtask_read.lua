-- Read the stored result of a Django tasks-framework call in one consistent step.
-- KEYS[1] result hash, KEYS[2] worker ids list, KEYS[3] errors list
-- returns {} when unknown (never stored or expired), else {hash as field, value, ...,
--          worker ids, errors} (the last two are arrays)
local fields = redis.call('HGETALL', KEYS[1])
if #fields == 0 then return {} end
return {fields, redis.call('LRANGE', KEYS[2], 0, -1), redis.call('LRANGE', KEYS[3], 0, -1)}
