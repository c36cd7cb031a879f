-- Fragment: the bucket's request memory (a zset: request id -> the bucket's fence counter when
-- it was recorded), which turns a resent request into a no-op. It keeps every entry for at
-- least the resend window, 120 s (REQUEST_MEMORY_SECONDS in locking/keys.py), however many
-- requests the bucket sees: a count bound let a flood of other requests trim an entry before
-- its resend arrived, and the resend was applied twice.
-- remember(key, member, score, now): records `member` with `score` (the counter now: scores
-- never go down from one record to the next) at `now` ms. The first record of each 10 s slot
-- also records the marker "~<slot>" with that score and forgets every entry scored below the
-- marker of the newest slot that began at least the window ago (entries scored below a marker
-- were recorded before its slot began). Idle slots have no marker: when none is found in the
-- 60 slots further back, entries below the oldest newer marker were older still.
-- Forgetting is bounded: one call drops at most REQUEST_FORGET_MAX entries, the oldest first.
-- Dropping a busy bucket's whole slot at once (80,000 entries: 34-113 ms) stalled the server
-- for every client. "!<slot>" marks the slot's forgetting as done; while entries are left to
-- forget the mark is taken away again, so the next record of the slot goes on with it.
local REQUEST_SLOT_MS = 10000
local REQUEST_SLOTS = 12  -- the window in slots
local REQUEST_FORGET_MAX = 1000
local function remember(key, member, score, now)
  redis.call('ZADD', key, score, member)
  local slot = math.floor(now / REQUEST_SLOT_MS)
  if redis.call('ZADD', key, 'NX', score, '!' .. slot) == 0 then
    return
  end
  redis.call('ZADD', key, 'NX', score, '~' .. slot)  -- NX: the slot's first score stays
  local keep = redis.call('ZSCORE', key, '~' .. slot)
  for back = 1, REQUEST_SLOTS + 60 do
    local mark = redis.call('ZSCORE', key, '~' .. (slot - back))
    if mark then
      keep = mark
      if back >= REQUEST_SLOTS then break end
    end
  end
  local old = redis.call('ZCOUNT', key, '-inf', '(' .. keep)
  if old > REQUEST_FORGET_MAX then
    redis.call('ZREMRANGEBYRANK', key, 0, REQUEST_FORGET_MAX - 1)  -- the lowest scores
    redis.call('ZREM', key, '!' .. slot)  -- more to forget: the next record goes on
  elseif old > 0 then
    redis.call('ZREMRANGEBYRANK', key, 0, old - 1)
  end
end
