-- Acknowledge finished tasks: they leave the in-flight set and never come back.
-- KEYS[1] pending zset, KEYS[2] in-flight zset, KEYS[3] dead-letter zset
-- KEYS[4] payload hash, KEYS[5] attempts hash, KEYS[6] last-error hash, KEYS[7] signal list
-- KEYS[8] claims hash (see the claims fragment)
-- KEYS[9] priority index zset, KEYS[10] levels hash (see the priority fragment)
-- KEYS[11] enqueue times hash (id -> server µs it was queued, while its payload exists)
-- ARGV[1..] "<claim token>:<task id>" (token "" for whatever claim is current; the token
-- may end "+<ms>", see KEYS[13]); at most a
-- few thousand (they are passed to single commands)
-- returns how many were acknowledged; a claim that is no longer current (its lease expired,
-- or a newer copy was queued with replace=True) changes nothing
-- KEYS[12] (optional) this request's key: a resent call (same key) answers the first call's
--         count and changes nothing
-- KEYS[13] (optional, after KEYS[12]) the unique zset: "<token>+<ms>:<id>" opens the id's
--         unique_for window there (see the claims fragment)
-- KEYS[14..17] (optional) the concurrency groups' keys (see the groups
--         fragment): an acked task of a group gives its slot back
-- include: priority
-- include: gcra
-- include: groups
-- include: claims
if #KEYS >= 12 then
  local seen = redis.call('GET', KEYS[12])
  if seen then return tonumber(seen) end
end
local G = #KEYS >= 17 and {KEYS[14], KEYS[15], KEYS[16], KEYS[17]} or nil
local done = ack(ARGV, 1, KEYS[13], G)
if #KEYS >= 12 then redis.call('SET', KEYS[12], done, 'PX', 60000) end
return done
