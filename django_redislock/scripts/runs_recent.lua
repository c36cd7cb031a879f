-- A page of a queue's run log, newest first, filtered (see the runlog fragment and
-- django_redislock/admin/runs.py). Read-only: the two lists (successes, other ends) are walked
-- together by end time, at most 2 x RUNLOG_KEEP entries; only entries that pass a filter on
-- their end time are decoded.
-- KEYS[1] the run log of successes, KEYS[2] the run log of other ends
-- ARGV[1] rows to skip, ARGV[2] rows to return, ARGV[3] a function name part (lower case, ""
--   for any), ARGV[4] an exception type ("" for any; "Boom" matches "app.Boom" and the other
--   way round), ARGV[5] a worker part (lower case), ARGV[6] an outcome ("" for any), ARGV[7]
--   ended at or after (ms, "" for no bound), ARGV[8] ended before (ms, ""), ARGV[9] ended
--   within this many seconds of now ("" for any)
-- returns {server time µs, entries kept, entries matching, entry, ...} (entries as written:
--   "<end ms>:<JSON>"); a key of another type counts as empty
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local skip, want = tonumber(ARGV[1]), tonumber(ARGV[2])
local fn, kind, worker, outcome = ARGV[3], ARGV[4], ARGV[5], ARGV[6]
local since, before = tonumber(ARGV[7]), tonumber(ARGV[8])
if tonumber(ARGV[9]) then
  local floor = math.floor(now / 1000) - tonumber(ARGV[9]) * 1000
  if not since or floor > since then since = floor end
end
local function entries(key, wanted)
  if not wanted or redis.call('TYPE', key).ok ~= 'list' then return {} end
  return redis.call('LRANGE', key, 0, -1)
end
local ok = entries(KEYS[1], outcome == '' or outcome == 'succeeded')
local other = entries(KEYS[2], outcome ~= 'succeeded')
local total = (redis.call('TYPE', KEYS[1]).ok == 'list' and redis.call('LLEN', KEYS[1]) or 0)
  + (redis.call('TYPE', KEYS[2]).ok == 'list' and redis.call('LLEN', KEYS[2]) or 0)
local function ended(entry) return tonumber(string.match(entry or '', '^(%d+):')) or 0 end
local function has(text, part)
  return part == '' or (type(text) == 'string' and string.find(string.lower(text), part, 1, true))
end
local function type_matches(have)
  if kind == '' then return true end
  if type(have) ~= 'string' then return false end
  return have == kind or string.sub(have, -#kind - 1) == '.' .. kind
    or string.sub(kind, -#have - 1) == '.' .. have
end
local function keeps(entry)
  local at = ended(entry)
  if at == 0 then return false end
  if (since and at < since) or (before and at >= before) then return false end
  if fn == '' and kind == '' and worker == '' and outcome == '' then return true end
  local ok_json, run = pcall(cjson.decode, string.sub(entry, string.find(entry, ':', 1, true) + 1))
  if not ok_json or type(run) ~= 'table' then return false end
  return has(run.f, fn) and type_matches(run.t) and has(run.w, worker)
    and (outcome == '' or run.o == outcome)
end
local out = {now, total, 0}
local i, j, matched = 1, 1, 0
while i <= #ok or j <= #other do
  local entry
  if j > #other or (i <= #ok and ended(ok[i]) >= ended(other[j])) then
    entry = ok[i]; i = i + 1
  else
    entry = other[j]; j = j + 1
  end
  if keeps(entry) then
    matched = matched + 1
    if matched > skip and matched <= skip + want then out[#out + 1] = entry end
  end
end
out[3] = matched
return out
