-- Store the final outcome of one run of an @task call that stores results, and wake waiters.
-- KEYS[1] result hash (gen, status, value, error)
-- KEYS[2] done list: one wake-up token that waiters rotate with BLMOVE (never consume)
-- ARGV[1] the run's generation (from its payload)
-- ARGV[2] status: SUCCESSFUL or FAILED
-- ARGV[3] the serialized return value ("" for FAILED)
-- ARGV[4] the error text ("" for SUCCESSFUL)
-- ARGV[5] time to live of both keys, ms
-- returns 1 stored, 0 skipped: the record belongs to a newer run of the same id (queued with
--         replace=True, or after this run was handed to another worker and finished)
--
-- A record that expired (or was never started) is written anyway. The token exists only
-- while the record holds a final status of the current generation, so a waiter woken by it
-- always finds a final result.
local gen = redis.call('HGET', KEYS[1], 'gen')
if gen and gen ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'gen', ARGV[1], 'status', ARGV[2], 'value', ARGV[3], 'error', ARGV[4])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
if redis.call('LLEN', KEYS[2]) == 0 then redis.call('RPUSH', KEYS[2], 1) end
redis.call('PEXPIRE', KEYS[2], ARGV[5])
return 1
