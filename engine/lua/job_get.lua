-- job_get.lua: one consistent snapshot of a job.
-- ARGV: 3 uuid
-- Returns {} when missing, else {fields (HGETALL), chain results, onerror results,
--         oncancel results, state (HGETALL), history, server now}
local k = jkey(ARGV[3])
local fields = redis.call('HGETALL', k)
if #fields == 0 then
    return {}
end
return {fields, redis.call('LRANGE', k .. ':res:0', 0, -1),
        redis.call('LRANGE', k .. ':res:1', 0, -1),
        redis.call('LRANGE', k .. ':res:2', 0, -1),
        redis.call('HGETALL', k .. ':state'),
        redis.call('LRANGE', k .. ':history', 0, -1), now_ms()}
