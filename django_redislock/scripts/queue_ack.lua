-- Acknowledge finished tasks: they leave the in-flight set and never come back.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- ARGV[1..] pairs: task id, claim token ("" for whatever claim is current); at most a few
-- thousand (they are passed to single commands)
-- returns how many were acknowledged; a claim that is no longer current (its lease expired,
-- or a newer copy was queued with replace=True) changes nothing
-- include: claims
return ack(ARGV, 1)
