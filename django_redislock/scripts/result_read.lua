-- Read the result of one @task call: the stored outcome, else its state in the queue.
-- KEYS[1] the queue's payload hash, KEYS[2] in-flight zset, KEYS[3] dead-letter zset,
-- KEYS[4] last-error hash (all four: fields or members are task ids)
-- KEYS[5] result hash (gen, status, value, error)
-- ARGV[1] the task id
-- returns {status, serialized value or "", error or ""}; status is SUCCESSFUL, FAILED or
--         CANCELLED (stored), else FAILED or CANCELLED (dead-lettered without a stored
--         outcome; CANCELLED when its error is a TaskCancelled), RUNNING (claimed
--         by a worker), READY (queued, delayed or waiting for a retry; the error is the
--         last failed run's), or UNKNOWN (no record and not in the queue)
local record = redis.call('HMGET', KEYS[5], 'status', 'value', 'error')
if record[1] == 'SUCCESSFUL' or record[1] == 'FAILED' or record[1] == 'CANCELLED' then
  return {record[1], record[2] or '', record[3] or ''}
end
local id = ARGV[1]
-- every queue script keeps a payload field exactly while the id is queued, in flight or dead
if redis.call('HEXISTS', KEYS[1], id) == 0 then return {'UNKNOWN', '', ''} end
local err = redis.call('HGET', KEYS[4], id) or ''
if redis.call('ZSCORE', KEYS[3], id) then
  local cancelled = string.find(err, 'TaskCancelled:', 1, true) == 1
  return {cancelled and 'CANCELLED' or 'FAILED', '', err}
end
if redis.call('ZSCORE', KEYS[2], id) then return {'RUNNING', '', err} end
return {'READY', '', err}
