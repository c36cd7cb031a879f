-- Read a count-down latch's remaining count, creating the latch with its initial count when
-- it does not exist yet (so every later reader and waiter sees the same count).
-- KEYS[1] latch hash (n=remaining count)
-- ARGV[1] initial count   ARGV[2] the latch's lifetime ms (set when it is created)
-- returns the remaining count (0: open)
local n = redis.call('HGET', KEYS[1], 'n')
if n then
  return tonumber(n)
end
redis.call('HSET', KEYS[1], 'n', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return tonumber(ARGV[1])
