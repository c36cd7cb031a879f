-- Read a workflow's state (see the workflow fragment).
-- KEYS[1] the workflow hash, KEYS[2] the queue's workflow dependency hash
-- ARGV[1] workflow id
-- returns {state, failed step id, error, result, kind, n, deferred}: state is RUNNING,
-- SUCCESSFUL, FAILED, CANCELLED (a dependency failed) or UNKNOWN (no such workflow: it
-- expired, or never started); deferred is "1" while it waits for its dependencies
local h = redis.call('HMGET', KEYS[1], 'state', 'failed', 'error', 'result', 'kind', 'n')
local why = redis.call('HGET', KEYS[2], 'x:' .. ARGV[1])
local deferred = redis.call('HEXISTS', KEYS[2], 'l:' .. ARGV[1])
if why then return {'CANCELLED', '', why, '', h[5] or '', h[6] or '0', '0'} end
if not h[1] then return {'UNKNOWN', '', '', '', '', '0', '0'} end
return {h[1], h[2] or '', h[3] or '', h[4] or '', h[5] or '', h[6] or '0', tostring(deferred)}
