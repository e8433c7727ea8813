-- include: prelude schedules
-- schedule_delete.lua: deletes a schedule; the jobs it created stay.
-- ARGV: 3 uuid
-- Returns 1, or 0 when there is no such schedule.
local uuid = ARGV[3]
local sk = skey(uuid)
local key = redis.call('HGET', sk, 'key')
if redis.call('DEL', sk) == 0 then
    return 0
end
redis.call('ZREM', SCHED_ALL, uuid)
redis.call('ZREM', SCHED_DUE, uuid)
if key and redis.call('HGET', SCHED_NAMES, key) == uuid then
    redis.call('HDEL', SCHED_NAMES, key)
end
return 1
