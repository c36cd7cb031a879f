-- Add one process's sold-out refusal counts to a stock bucket's meta hash (the flush of
-- inventory/sold_out_counts.py, every few seconds per process: the take's sold-out answer
-- itself writes nothing).
-- KEYS[1] units string (only a stock that exists is counted: a bucket cleared since the
--   refusals gets no meta hash back), KEYS[2] meta hash
-- ARGV[1] sold-out refusals answered by Redis (the take script, or a probe GET), added to
--   refused_sold_out_redis; ARGV[2] refused from the process's local flag, added to
--   refused_sold_out_local
-- returns 1 when counted, 0 when the stock no longer exists (the counts are dropped)
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] ~= '0' then redis.call('HINCRBY', KEYS[2], 'refused_sold_out_redis', ARGV[1]) end
if ARGV[2] ~= '0' then redis.call('HINCRBY', KEYS[2], 'refused_sold_out_local', ARGV[2]) end
return 1
