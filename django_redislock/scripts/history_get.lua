-- The recorded runs of one task (see the history fragment).
-- KEYS[1] the queue's history hash
-- ARGV[1] task id
-- returns the JSON list of its last runs, or false when none is recorded
return redis.call('HGET', KEYS[1], ARGV[1])
