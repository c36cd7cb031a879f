-- Acknowledge finished tasks: they leave the in-flight set and never come back.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- ARGV[1..] task ids (at most a few thousand: they are passed to single commands)
-- returns how many of them were in flight
-- (A newer copy queued with replace=True keeps its data.)
-- include: ack
if #ARGV == 0 then return 0 end
return ack(ARGV)
