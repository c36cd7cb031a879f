-- List a queue's concurrency groups (the admin's queue page; read-only).
-- KEYS[1] hold zset, KEYS[2] groups hash, KEYS[3] wait zset (see the groups fragment)
-- ARGV[1] at most this many groups
-- returns per group six values: its name, its admitted tasks (ready or running), its limits
--         "<concurrency>,<interval µs>,<burst>", its held tasks, its rate limit's tat ("" if
--         none), the server µs its next held task may be admitted ("" if not waiting)
-- The groups hash is read with HSCAN over its "l:" fields (groups that were ever used and
-- still have a task; an admin-only read, bounded by 100 rounds), never on a hot path.
local want = tonumber(ARGV[1])
local out, cursor, rounds, found = {}, '0', 0, 0
repeat
  local page = redis.call('HSCAN', KEYS[2], cursor, 'MATCH', 'l:*', 'COUNT', 200)
  cursor, rounds = page[1], rounds + 1
  local fields = page[2]
  for i = 1, #fields, 2 do
    if found >= want then break end
    local g = string.sub(fields[i], 3)
    local f = redis.call('HMGET', KEYS[2], 'r:' .. g, 't:' .. g)
    local p = string.format('%d:', #g) .. g .. ':'
    local held = redis.call('ZLEXCOUNT', KEYS[1], '[' .. p, '(' .. p .. '\255')
    local running = tonumber(f[1] or '0')
    if running > 0 or held > 0 then
      found = found + 1
      local wait = redis.call('ZSCORE', KEYS[3], g)
      out[#out + 1] = g
      out[#out + 1] = running
      out[#out + 1] = fields[i + 1]
      out[#out + 1] = held
      out[#out + 1] = f[2] or ''
      out[#out + 1] = wait or ''
    end
  end
until cursor == '0' or found >= want or rounds >= 100
return out
