-- Start the result record of @task calls that store results, right after their enqueue.
-- Sent in the same MULTI/EXEC as queue_enqueue.lua (one round trip, atomic), so a waiter
-- never sees the previous run's result of a reused id once the new run is queued.
-- KEYS[1] the queue's payload hash (id -> serialized payload)
-- KEYS[2 + 2k] result hash of the k-th call (gen, status, value, error)
-- KEYS[3 + 2k] done list of the k-th call (a wake-up token once the result is final)
-- ARGV[1] time to live of a new record, ms (the call's delay plus its result_ttl)
-- ARGV[2 + 3k], ARGV[3 + 3k], ARGV[4 + 3k] the k-th call's id, serialized payload, generation
-- returns the number of records (re)started
--
-- The enqueue queued this call's copy exactly when the payload stored for its id is the one
-- sent (each carries a fresh generation): then the record starts afresh (status READY, the
-- last run's result and wake-up token gone). A deduplicated call leaves the record of the
-- copy that was kept. A resent MULTI (the record already holds this generation) changes
-- nothing, so a result stored in between stays.
local started = 0
for k = 0, (#ARGV - 1) / 3 - 1 do
  local id, data, gen = ARGV[2 + 3 * k], ARGV[3 + 3 * k], ARGV[4 + 3 * k]
  local record, done = KEYS[2 + 2 * k], KEYS[3 + 2 * k]
  if redis.call('HGET', KEYS[1], id) == data and redis.call('HGET', record, 'gen') ~= gen then
    redis.call('DEL', record, done)
    redis.call('HSET', record, 'gen', gen, 'status', 'READY')
    redis.call('PEXPIRE', record, ARGV[1])
    started = started + 1
  end
end
return started
