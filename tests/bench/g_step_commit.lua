-- g_step_commit.lua -- the Redis work of one tern step commit in its simplest form
-- (read the job's owner fields, append the result, move the cursor, write the event to
-- the global stream, and to the job's own only if it has one: see "Events" in
-- docs/WORKFLOWS.md), for redis-benchmark's ceiling in tests/bench/run.sh.
-- KEYS[1] a job key; ARGV[1] the result/event JSON; ARGV[2] the new step index.
local k = KEYS[1]
redis.call('HMGET', k, 'runner', 'fence', 'phase', 'idx', 'execution', 'cancel')
redis.call('RPUSH', k .. ':res', ARGV[1])
redis.call('HSET', k, 'phase', '0', 'idx', ARGV[2], 'attempt', '0', 'updated', ARGV[2])
if redis.call('EXISTS', k .. ':events') == 1 then
    redis.call('XADD', k .. ':events', 'MAXLEN', '~', 1000, '*', 'e', ARGV[1])
end
redis.call('XADD', 'bench:g:events', 'MAXLEN', '~', 10000, '*', 'e', ARGV[1])
return {'OK', 0}
