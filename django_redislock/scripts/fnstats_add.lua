-- Add a worker's runs of the last second, per task function, to its queue's function buckets
-- (sent by the worker in the same pipeline as its outcome counters: no round trip of its own).
-- KEYS[1] the queue's fnstats hash (see the fnstats fragment)
-- ARGV[1..] per function: name, runs, failed runs, n (histogram pairs), then n pairs of
--   runtime bin, runs in that bin
-- returns the number of functions read
-- include: fnstats
local t = redis.call('TIME')
local items, i = {}, 1
while i + 3 <= #ARGV do
  local name = string.gsub(string.sub(ARGV[i], 1, 200), '\n', ' ')
  if name == '' then name = '?' end
  local n = tonumber(ARGV[i + 3])
  local bins = {}
  for k = i + 4, i + 3 + 2 * n do bins[#bins + 1] = tonumber(ARGV[k]) end
  items[#items + 1] = {name, tonumber(ARGV[i + 1]), tonumber(ARGV[i + 2]), bins}
  i = i + 4 + 2 * n
end
fn_add(KEYS[1], tonumber(t[1]), items)
return #items
