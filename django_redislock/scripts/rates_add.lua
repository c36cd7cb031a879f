-- Add a worker's outcome counts of the last second to its queue's rate buckets (sent by the
-- worker in the same pipeline as its outcome counters: no round trip of its own).
-- KEYS[1] the queue's rates hash (see the rates fragment)
-- ARGV[1] how many outcome pairs follow; ARGV[2..] outcome, count pairs (outcomes:
--         succeeded, failed, retried, dead), then exception type name, count pairs
--         (failures by type)
-- returns the number of pairs read
-- include: rates
local t = redis.call('TIME')
local pairs_n = tonumber(ARGV[1])
local counts, types = {}, nil
for i = 2, 2 * pairs_n, 2 do counts[ARGV[i]] = tonumber(ARGV[i + 1]) end
for i = 2 * pairs_n + 2, #ARGV - 1, 2 do
  types = types or {}
  types[ARGV[i]] = (types[ARGV[i]] or 0) + tonumber(ARGV[i + 1])
end
rate_add(KEYS[1], tonumber(t[1]), counts, types)
return (#ARGV - 1) / 2
