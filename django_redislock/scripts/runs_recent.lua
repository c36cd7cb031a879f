-- A page of a queue's run log, newest first, filtered (see the runlog fragment and
-- django_redislock/admin/runs.py). Read-only: the two lists (successes, other ends) are walked
-- together by end time, at most 2 x RUNLOG_KEEP entries (without a filter, only the first skip +
-- rows of each); an entry is decoded only when its text holds what is searched for.
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
local plain = fn == '' and kind == '' and worker == '' and outcome == ''
-- what is searched for reads the same in an entry's JSON text (no character JSON escapes)
local raw = not string.find(fn .. kind .. worker, '[/\\"%c]')
local function entries(key, wanted)
  if not wanted or redis.call('TYPE', key).ok ~= 'list' then return {} end
  -- no filter: the page is among the first skip + want of each list (both are newest first)
  return redis.call('LRANGE', key, 0, (plain and not since and not before) and skip + want - 1 or -1)
end
local function length(key)
  return redis.call('TYPE', key).ok == 'list' and redis.call('LLEN', key) or 0
end
-- a success has no exception type: an error filter reads the other list only
local ok = entries(KEYS[1], (outcome == '' or outcome == 'succeeded') and kind == '')
local other = entries(KEYS[2], outcome ~= 'succeeded')
local total = length(KEYS[1]) + length(KEYS[2])
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
local function keeps(entry, only_successes)
  local at = ended(entry)
  if at == 0 then return false end
  if (since and at < since) or (before and at >= before) then return false end
  if plain or (only_successes and fn == '' and worker == '') then return true end
  -- the decode (a few µs) only for an entry whose text holds what is searched for
  local text = string.lower(entry)
  if raw and ((fn ~= '' and not string.find(text, fn, 1, true))
    or (worker ~= '' and not string.find(text, worker, 1, true))
    or (kind ~= '' and not string.find(entry, kind, 1, true))
    or (outcome ~= '' and not string.find(entry, '"' .. outcome .. '"', 1, true))) then
    return false
  end
  local ok_json, run = pcall(cjson.decode, string.sub(entry, string.find(entry, ':', 1, true) + 1))
  if not ok_json or type(run) ~= 'table' then return false end
  return has(run.f, fn) and type_matches(run.t) and has(run.w, worker)
    and (outcome == '' or run.o == outcome)
end
local out = {now, total, 0}
local i, j, matched = 1, 1, 0
if plain and not since and not before then
  -- every entry matches: the count is the lists' lengths, the page the first entries merged
  matched = total
  while (i <= #ok or j <= #other) and i + j - 2 < skip + want do
    local entry
    if j > #other or (i <= #ok and ended(ok[i]) >= ended(other[j])) then
      entry = ok[i]; i = i + 1
    else
      entry = other[j]; j = j + 1
    end
    if i + j - 2 > skip then out[#out + 1] = entry end
  end
else
  while i <= #ok or j <= #other do
    local entry, success
    if j > #other or (i <= #ok and ended(ok[i]) >= ended(other[j])) then
      entry = ok[i]; i = i + 1; success = true
    else
      entry = other[j]; j = j + 1; success = false
    end
    if keeps(entry, success and outcome == 'succeeded') then
      matched = matched + 1
      if matched > skip and matched <= skip + want then out[#out + 1] = entry end
    end
  end
end
out[3] = matched
return out
