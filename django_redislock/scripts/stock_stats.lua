-- Read everything the admin and the shop show about one stock, in one consistent snapshot.
-- KEYS[1] units string, KEYS[2] meta hash, KEYS[3] buyers set, KEYS[4] reservations hash
-- returns {units left or -1 if never set, opens µs, closes µs, units taken, units restored,
--          buyers, live reservations, server time µs, then the take's refusals: duplicate
--          (already bought), not open, ended, not admitted, then the sold-out refusals the
--          processes counted and flushed (inventory/sold_out_counts.py): answered by Redis,
--          answered from a process's local flag}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local meta = redis.call('HMGET', KEYS[2], 'opens', 'closes', 'taken', 'restored',
  'refused_duplicate', 'refused_not_open', 'refused_ended', 'refused_admission',
  'refused_sold_out_redis', 'refused_sold_out_local')
return {
  tonumber(redis.call('GET', KEYS[1]) or '-1'),
  tonumber(meta[1] or '0'), tonumber(meta[2] or '0'),
  tonumber(meta[3] or '0'), tonumber(meta[4] or '0'),
  redis.call('SCARD', KEYS[3]), redis.call('HLEN', KEYS[4]), now,
  tonumber(meta[5] or '0'), tonumber(meta[6] or '0'), tonumber(meta[7] or '0'),
  tonumber(meta[8] or '0'), tonumber(meta[9] or '0'), tonumber(meta[10] or '0')
}
