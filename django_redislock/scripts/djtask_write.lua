-- Write the stored result of a Django tasks-framework call (create, start, finish).
-- KEYS[1] result hash (task, args, kwargs, status, times, return value, ...)
-- KEYS[2] worker ids list (one entry per started attempt)
-- KEYS[3] errors list (one JSON {exception_class_path, traceback} per failed attempt)
-- ARGV[1] time to live of all three keys, ms
-- ARGV[2] worker id to append, or "" (a start)
-- ARGV[3] error to append, or "" (a failure)
-- ARGV[4] "1": only write if the hash exists (start/finish of a result that may have expired)
-- ARGV[5..] field, value pairs for the hash
-- returns 1 written, 0 skipped (ARGV[4] = "1" and the result is gone)
if ARGV[4] == '1' and redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if #ARGV >= 6 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 5))
end
if ARGV[2] ~= '' then redis.call('RPUSH', KEYS[2], ARGV[2]) end
if ARGV[3] ~= '' then redis.call('RPUSH', KEYS[3], ARGV[3]) end
for k = 1, 3 do redis.call('PEXPIRE', KEYS[k], ARGV[1]) end
return 1
