-- Fragment: the generic cell rate algorithm (GCRA), the rate limit of the limiters and of the
-- queue's tasks. A limit is `interval` µs between two units and `burst` units admitted at once;
-- its whole state is one number, the theoretical arrival time `tat` (µs of server time).
-- gcra(tat, now, interval, burst, cost): whether `cost` units are admitted now, the tat after
-- them (unchanged when refused), and how many µs until they would be (0 when admitted)
local function gcra(tat, now, interval, burst, cost)
  tat = math.max(tat or 0, now)
  local after = tat + cost * interval
  local allowed_at = after - burst * interval
  if allowed_at <= now then return true, after, 0 end
  return false, tat, allowed_at - now
end

-- keep_tat(key, tat): store a limit's tat in its own string key until 1 ms after it, an
-- absolute time in TIME's clock (PXAT): a PX counted from the server's clock at the
-- command's start could end it early where that clock and TIME are sampled apart
local function keep_tat(key, tat)
  redis.call('SET', key, string.format('%d', tat), 'PXAT', string.format('%d', math.ceil(tat / 1000) + 1))
end
