-- Per task function of a queue: runs, failed runs and runtime percentiles over the last hour
-- and the last day, read from its function buckets (see the fnstats fragment). Read-only.
-- KEYS[1] the queue's fnstats hash
-- ARGV[1..] the percentiles wanted, in thousandths (500 950: p50 and p95)
-- returns {server time s, then per function (at most 20 per slot; 36 slots):
--   name, hour runs, hour failed, day runs, day failed, runs with a runtime in the hour,
--   in the day, then the hour's bin of each percentile, then the day's (-1: no runtime)}
-- include: fnstats
local now = tonumber(redis.call('TIME')[1])
local out = {now}
if redis.call('TYPE', KEYS[1]).ok ~= 'hash' then return out end
local wanted = {}
for i = 1, #ARGV do wanted[i] = tonumber(ARGV[i]) / 1000 end
local stats, order = {}, {}
-- ring, width, slots, which window it feeds (1 the hour, 2 the day)
for w, ring in ipairs({{'h', 300, 12}, {'d', 3600, 24}}) do
  local current = math.floor(now / ring[2])
  for bucket = current - ring[3] + 1, current do
    local slot = ring[1] .. string.format('%d', bucket % ring[3])
    local held = redis.call('HMGET', KEYS[1], slot, slot .. ':f')
    if held[1] == string.format('%d', bucket) and held[2] then
      local i = 0
      for name in string.gmatch(held[2], '[^\n]+') do
        i = i + 1
        local p = slot .. ':' .. i
        local s = stats[name]
        if not s then
          s = {{0, 0, 0, {}}, {0, 0, 0, {}}}
          stats[name] = s
          order[#order + 1] = name
        end
        local n, x, h = fn_decode(redis.call('HGET', KEYS[1], p))
        local win = s[w]
        win[1] = win[1] + n
        win[2] = win[2] + x
        for bin, c in pairs(h) do
          if c > 0 then
            win[3] = win[3] + c
            win[4][bin] = (win[4][bin] or 0) + c
          end
        end
      end
    end
  end
end
local function percentiles(win)
  local bins = {}
  for bin in pairs(win[4]) do bins[#bins + 1] = bin end
  table.sort(bins)
  local res = {}
  for q = 1, #wanted do
    local need, seen, found = wanted[q] * win[3], 0, -1
    for _, bin in ipairs(bins) do
      seen = seen + win[4][bin]
      if seen >= need then found = bin break end
    end
    if win[3] == 0 then found = -1 end
    res[q] = found
  end
  return res
end
for _, name in ipairs(order) do
  local s = stats[name]
  out[#out + 1] = name
  out[#out + 1] = s[1][1]
  out[#out + 1] = s[1][2]
  out[#out + 1] = s[2][1]
  out[#out + 1] = s[2][2]
  out[#out + 1] = s[1][3]
  out[#out + 1] = s[2][3]
  for _, bin in ipairs(percentiles(s[1])) do out[#out + 1] = bin end
  for _, bin in ipairs(percentiles(s[2])) do out[#out + 1] = bin end
end
return out
