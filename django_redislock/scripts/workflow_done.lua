-- Record the successful end of one member of a workflow and queue what comes next (the next
-- step of a chain, a chord's callback, the workflows that waited for this one).
-- KEYS[1..11] the queue's keys (as queue_enqueue.lua: pending, in-flight, dead, payload,
-- attempts, errors, signal, claims, priority index, levels, enqueue times)
-- KEYS[12] the workflow hash, KEYS[13] the queue's workflow dependency hash (see the workflow
-- fragment)
-- ARGV[1] workflow id, ARGV[2] its hash's time to live (ms), ARGV[3] the member's role ("c",
-- "m", "t"), ARGV[4] its index, ARGV[5] its serialized result, ARGV[6] the member's task id,
-- ARGV[7] its claim token, ARGV[8] the next step's id ("" for none), ARGV[9] its payload
-- returns 1 counted, 0 not: already counted (a resent call, a second run of a member whose
-- first run ended), or the member's claim is no longer current (another run holds it)
-- include: claims
-- include: workflow
if not holder(ARGV[6], ARGV[7]) and redis.call('HEXISTS', KEYS[4], ARGV[6]) == 1 then
  return 0
end
return wf_end(KEYS[12], KEYS[13], ARGV[2], ARGV[1], ARGV[3], ARGV[4], true, ARGV[5], '',
  ARGV[8], ARGV[9])
