-- Wake one fair-lock waiter: push its own wake-up list (it blocks there between its tries).
-- KEYS[1] the waiter's wake-up list   ARGV[1] lifetime of an unread wake-up, ms
-- returns the list's length (one pending wake-up is kept: a second adds nothing)
if redis.call('LPUSH', KEYS[1], 1) > 1 then
  redis.call('LTRIM', KEYS[1], 0, 0)
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
return 1
